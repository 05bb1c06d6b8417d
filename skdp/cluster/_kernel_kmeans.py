"""DPKernelKMeans: private kernel k-means with random Fourier features (Acs et al., Alg. 2)."""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from .._random import child_generator
from ..privacy import REPLACE_ONE
from ..privacy.norm_selection import DPNormOptions, dp_norm_from_histogram
from ..privacy.quantiles import (
    AUTO_BOUNDS_QUANTILES,
    announced_histogram_box,
    calibrate_histogram_bounds,
    histogram_box_share,
)
from ._base import LloydSettings, _BaseDPLloyd
from ._fourier import MAX_FEATURE_NORM, draw_fourier_weights


def auto_gamma(kernel, low, high):
    """The kernel width of ``gamma="auto"`` from a released box ``[low, high]`` (post-processing).

    ``"rbf"``: ``1 / sum_j var_j`` with ``var_j = (high_j - low_j)^2 / 12``,
    the variance of the uniform distribution on the box: scikit-learn's
    ``gamma="scale"`` of ``SVC`` (``1 / (d Var X)``) with the box standing
    in for the data, so ``exp(-gamma |x - y|^2)`` falls to ``exp(-2)`` at the
    mean squared distance of two independent rows.  ``"laplacian"``:
    ``1 / sum_j E|x_j - y_j|`` with ``E|x_j - y_j| = (high_j - low_j) / 3``
    for two uniform points, the same rule for the L1 distance.  Depends on
    ``d`` and the released widths only.
    """
    width = np.asarray(high, dtype=float) - np.asarray(low, dtype=float)
    if kernel == "laplacian":
        return float(3.0 / np.sum(width))
    return float(12.0 / np.sum(width**2))


@dataclass(frozen=True)
class KernelKMeansSettings(LloydSettings):
    """:class:`DPKernelKMeans`'s plan: DP Lloyd's, and the private box of ``gamma="auto"``.

    Attributes
    ----------
    gamma_bounds : object or None
        The releases of the box that sets ``gamma`` (``gamma="auto"``), else None.
    """

    gamma_bounds: object = None


class DPKernelKMeans(_BaseDPLloyd):
    """Kernel k-means with differential privacy via random Fourier features.

    Acs et al. (2018), Alg. 2: every row ``x`` is mapped to random Fourier
    features ``z(x) = sqrt(2/d) cos(x W + b)`` of a shift-invariant kernel
    (Eq. 2), clipped to L2 norm ``C`` (line 5), and DP Lloyd's algorithm runs
    in that ``d``-dimensional space (lines 6-11).  The random map is drawn from
    the estimator's ``random_state`` independently of the data, so it costs
    no privacy.

    Clipping.  ``|z(x)| <= sqrt(2)`` for every ``x``, and Theorem 2 shows
    ``E|z(x)| <= 1`` for the RBF kernel, but only in expectation over ``W``
    and ``b``: the guarantee rests on the explicit clip to ``C`` (``clip_norm=1.0``
    by default, the paper's choice), which bounds every row, always.  With
    ``clip_norm="auto"``, ``C`` is chosen by DPNorm (Alg. 3,
    the release of :func:`skdp.privacy.dp_norm`): the noisy mode of the
    histogram of ``|z(x)|`` over ``clip_norm_bins`` bins up to
    ``clip_norm_max``, one more Gaussian release in the plan.

    Noise.  A noise multiplier ``sigma_K`` calibrated up front for the whole
    plan (``2 * max_iter`` releases, plus DPNorm) by
    :func:`skdp.privacy.calibrate_noise_multiplier` with the moments
    accountant (Theorem 1, Eq. 3).  Per iteration, sums get
    ``N(0, 2 C sigma_K I)`` (L2 sensitivity ``2 C``; the paper's line 11
    uses ``sqrt(2) C``, which misses a record replaced within its own
    cluster; see :ref:`cluster-sensitivities`) and sizes ``N(0, sqrt(2) w sigma_K)``
    (L2 sensitivity ``sqrt(2)``, line 10) with ``w = count_noise_weight``,
    ``(2 d)^(1/4)`` by default (the paper's ``w = 1`` wastes budget on the
    sizes).  DPNorm uses ``sigma_K``.  Noisy centres are projected onto the
    ball of radius ``C``; a cluster with noisy size below 1 is re-seeded (its
    public centre, or a split of the largest cluster for ``init="random"``).

    ``cluster_centers_`` live in the feature space (shape
    ``(n_clusters, n_components)``); ``predict`` maps new rows with the same
    ``W, b`` and clip, and picks the nearest centre there (post-processing).
    Everything the fitted model holds is covered: the released centres and
    noisy sizes, the data-independent ``W`` and ``b``, ``clip_norm_``
    (``clip_norm``, or DPNorm's release), the plan (``n_iter_``,
    ``noise_multiplier_``) and ``n_reseeded_`` (a function of the released
    sizes).  There is no ``labels_`` or ``inertia_``: ``fit_predict(X)``
    returns the labels of ``X`` and ``-score(X)`` its exact feature-space
    objective, computed on request and never stored; on the training rows
    they are *not* covered by the guarantee.  ``privacy_spent_`` refers to
    replace-one neighbours (datasets of the same size differing in one record).

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters ``k``.
    epsilon : float, default=1.0
        Privacy budget of the whole fit.
    delta : float, default=1e-5
        Privacy parameter delta (must be positive).
    kernel : {"rbf", "laplacian"}, default="rbf"
        ``"rbf"``: ``exp(-gamma |x - y|_2^2)`` (``RBFSampler`` semantics);
        ``"laplacian"``: ``exp(-gamma |x - y|_1)``.
    gamma : float or "auto", default="auto"
        Kernel width parameter; a number must be public (not tuned on the
        private data).  ``"auto"``: from a private box of the data (the
        histogram box of :class:`DPKMeans`'s small-``n epsilon`` route,
        :func:`~skdp.privacy.quantiles.private_histogram_box` with the row
        scale, its share of the budget the smallest of 0.1, 0.2, 0.3, 0.5
        at which a column can be located, from the public ``n``, ``d``,
        epsilon and delta), ``gamma_ = 1 / sum_j var_j`` with ``var_j`` the
        uniform variance on the released box (:func:`auto_gamma`,
        :ref:`kernel-kmeans-gamma`).  A fixed ``gamma`` suits one scale of
        data only (``gamma=1`` on features in the thousands gives features
        that are noise).
    n_components : int, default=200
        Number ``d`` of random features (the paper's choice).
    clip_norm : float or "auto", default=1.0
        Clipping bound ``C`` of the feature vectors, or ``"auto"`` for DPNorm.
    clip_norm_max : float, default=sqrt(2)
        Largest bound DPNorm may select (``C_max`` of Alg. 3), with
        ``clip_norm="auto"``.
    clip_norm_bins : int, default=100
        Number ``w`` of candidate bounds of DPNorm, with ``clip_norm="auto"``.
        (There is no ``clip_norm_noise_ratio`` here, unlike the DP-SGD
        estimators: DPNorm's histogram is one release of the plan with the
        plan's own multiplier ``sigma_K``, calibrated with the rest.)
    max_iter : int or "auto", default=5
        Number ``T`` of Lloyd iterations, all of which are run (the budget is
        split over them; fewer iterations, less noise in each).  ``"auto"``: the largest ``T <= 10``
        whose noise on a centre of average size ``n / k`` stays below half
        the clipping bound (the rule of :ref:`cluster-auto-iterations`); it
        reads only the plan and the public ``n`` (replace-one neighbours keep
        ``n`` fixed), never the data, so it costs no privacy.  With few rows
        or a small ``epsilon`` it runs a single iteration.
    init : "random" or array-like of shape (n_clusters, n_features), default="random"
        ``"random"``: the first iteration assigns the rows uniformly at random
        (a data-independent random partition).  An array gives public centres
        in the input space (Acs et al., footnote 3), mapped through ``z``.
    composition : {"pld", "rdp", "zcdp", "advanced", "basic"}, default="pld"
        Accountant of the plan (:mod:`skdp.privacy.accountants`; ``"pld"``,
        the tightest, never looser than ``"rdp"``).
    count_noise_weight : "auto" or float, default="auto"
        Noise multiplier of the cluster sizes over ``sigma_K``; ``"auto"`` is
        ``(2 n_components)^(1/4)`` (:ref:`cluster-budget-split`), ``1.0`` the
        paper's choice.
    accountant : BudgetAccountant, default=None
        Shared budget charged with ``privacy_spent_``.
    random_state : int, RandomState instance or None, default=None
        Seeds the random features, the initial centres and the noise.

    secure_noise : bool or None, default=None
        Sample every Laplace and Gaussian release exactly on a grid (discrete
        Laplace / discrete Gaussian, Canonne, Kamath & Steinke 2020) instead of
        in floating point, whose low-order bits leak the noiseless value
        (Mironov 2012).  None follows the package default
        (:func:`skdp.set_config`), read once at the start of ``fit`` and
        carried by the estimator to worker processes.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_components)
        Released private centres in the random feature space.
    random_weights_ : ndarray of shape (n_features, n_components)
        Frequencies ``W`` of the feature map (data-independent).
    random_offset_ : ndarray of shape (n_components,)
        Phases ``b`` of the feature map (data-independent).
    n_iter_ : int
        Number of iterations run (``max_iter``, or the one ``"auto"`` chose).
    noisy_counts_ : ndarray of shape (n_clusters,)
        Noisy cluster sizes of the last iteration (released).
    n_reseeded_ : int
        Number of re-seedings of clusters with noisy size below 1 (a function
        of the released noisy sizes).
    clip_norm_ : float
        Clipping bound ``C`` used (released by DPNorm when ``clip_norm="auto"``).
    gamma_ : float
        The kernel width used: ``gamma``, or the one ``gamma="auto"`` derived
        from the released box.
    bounds_ : tuple of two ndarrays of shape (n_features,)
        The box released by ``gamma="auto"`` (absent otherwise).
    noise_multiplier_ : float
        Calibrated ``sigma_K`` (sums and DPNorm).
    privacy_spent_ : PrivacySpent
        ``(epsilon, delta)`` of the fit.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features,)
        Defined when X has feature names that are all strings.

    See Also
    --------
    DPKMeans : DP Lloyd on the raw rows.
    sklearn.kernel_approximation.RBFSampler : the same random feature map.
    sklearn.cluster.KMeans : non-private k-means.

    References
    ----------
    G. Acs, L. Melis, C. Castelluccia, E. De Cristofaro. Differentially private
    mixture of generative neural networks. IEEE TKDE 2018, Section III-A, III-C,
    III-D, Alg. 2 and 3, Theorem 2, Eq. 3.

    A. Rahimi, B. Recht. Random features for large-scale kernel machines.
    NIPS 2007.

    R. Chitta, R. Jin, A. K. Jain. Efficient kernel clustering using random
    Fourier features. ICDM 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_circles
    >>> from sklearn.metrics import adjusted_rand_score
    >>> from skdp.cluster import DPKernelKMeans
    >>> X, y = make_circles(n_samples=4000, factor=0.3, noise=0.05, random_state=0)
    >>> init = [[0.0, 0.0], [1.0, 0.0]]  # public: one point on each circle
    >>> km = DPKernelKMeans(n_clusters=2, epsilon=3.0, gamma=5.0, n_components=500, init=init, random_state=0)
    >>> km = km.fit(X)
    >>> km.cluster_centers_.shape
    (2, 500)
    >>> adjusted_rand_score(y, km.predict(X)) > 0.9
    True
    >>> km.privacy_spent_.epsilon <= 3.0
    True
    """

    # As DPKMeans, plus the random feature map (drawn from the public number
    # of features only); clip_norm_ is clip_norm (public) or DPNorm's release.
    _bound_attribute = "clip_norm_"
    _settings_type = KernelKMeansSettings
    _released_attributes = frozenset(
        {
            "cluster_centers_",
            "noisy_counts_",
            "n_reseeded_",
            "clip_norm_",
            "n_iter_",
            "noise_multiplier_",
            "random_weights_",
            "random_offset_",
            "gamma_",
            "bounds_",
        }
    )

    _parameter_constraints = {
        **_BaseDPLloyd._parameter_constraints,
        "kernel": [StrOptions({"rbf", "laplacian"})],
        "gamma": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "clip_norm": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "clip_norm_max": [Interval(Real, 0, None, closed="neither")],
        "clip_norm_bins": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        n_clusters=8,
        *,
        epsilon=1.0,
        delta=1e-5,
        kernel="rbf",
        gamma="auto",
        n_components=200,
        clip_norm=1.0,
        clip_norm_max=MAX_FEATURE_NORM,
        clip_norm_bins=100,
        max_iter=5,
        init="random",
        composition="pld",
        count_noise_weight="auto",
        accountant=None,
        random_state=None,
        secure_noise=None,
    ):
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.delta = delta
        self.kernel = kernel
        self.gamma = gamma
        self.n_components = n_components
        self.clip_norm = clip_norm
        self.clip_norm_max = clip_norm_max
        self.clip_norm_bins = clip_norm_bins
        self.max_iter = max_iter
        self.init = init
        self.composition = composition
        self.count_noise_weight = count_noise_weight
        self.accountant = accountant
        self.random_state = random_state
        self.secure_noise = secure_noise

    def _fit_feature_map(self, n_features, rng):
        # The features are released as drawn: a stream of their own, so their
        # values cannot lead back to the noise generator's state.
        self.random_weights_, self.random_offset_ = draw_fourier_weights(
            self.kernel, self.gamma_, n_features, self.n_components, child_generator(rng)
        )

    # --- gamma="auto": a kernel width from a private box (public plan) ---
    def _auto_gamma(self):
        return isinstance(self.gamma, str) and self.gamma == "auto"

    def _gamma_bounds(self, secure_noise=False):
        """The box's :class:`~skdp.privacy.quantiles.HistogramBounds` plan of ``gamma="auto"``, else None.

        Its share is the smallest in :data:`~skdp.privacy.quantiles.BOX_SHARES`
        at which a column can be located (:func:`histogram_box_share`, public
        ``n``, ``d``, epsilon, delta); read during the calibration only.
        """
        shape = self.__dict__.get("_plan_shape")
        if not self._auto_gamma() or shape is None:
            return None
        n_samples, n_features = shape
        share = histogram_box_share(
            n_samples, float(self.epsilon), float(self.delta), n_features, self.composition, secure_noise
        )
        return calibrate_histogram_bounds(
            float(self.epsilon),
            float(self.delta),
            n_features,
            share,
            self.composition,
            secure_noise,
            scale=True,
        )

    def _bounds_plan(self, secure_noise=False):
        return self._gamma_bounds(secure_noise)

    def _calibrate(self, rows, plan):
        # The box's plan reads the public (n, d): held for the calibration only.
        self.__dict__["_plan_shape"] = (rows.n_samples, rows.n_features)
        try:
            settings = super()._calibrate(rows, plan)
            return settings.with_settings(gamma_bounds=self._gamma_bounds(plan.secure_noise))
        finally:
            self.__dict__.pop("_plan_shape", None)

    def _fit_private(self, rows, plan, rng, ledger):
        """Release the box of ``gamma="auto"`` (its events first in the plan), then DP Lloyd on the features."""
        self.__dict__.pop("bounds_", None)
        bounds = plan.settings.gamma_bounds
        if bounds is None:
            self.gamma_ = float(self.gamma)
        else:
            if rows.chunked:
                reduce = rows.data.map_reduce
            else:

                def reduce(fn, *params):
                    return fn(rows.Z, *params)

            # A column ranged by the row scale or the pool can be far wider than its
            # values (a smaller gamma_, a wider kernel): say so, naming no data value.
            low, high, located, pooled = announced_histogram_box(
                reduce,
                rows.n_samples,
                rows.n_features,
                bounds.mechanism(),
                AUTO_BOUNDS_QUANTILES,
                rng,
                ledger,
                scale_mechanism=bounds.scale_mechanism(),
                epsilon=self.epsilon,
                advice="Declare gamma from public knowledge of the data's scale, or raise epsilon.",
                extend=True,
            )
            self.bounds_ = (low, high)
            self.gamma_ = auto_gamma(self.kernel, low, high)
        return super()._fit_private(rows, plan, rng, ledger)

    def _feature_map(self):
        return (self.random_weights_, self.random_offset_)

    def _feature_dim(self, n_features):
        return int(self.n_components)

    def _n_norm_selections(self):
        return 1 if DPNormOptions.of(self).selected else 0

    def _select_bound(self, rows, noise_multiplier, rng, ledger):
        clip_norm, clip_norm_max, n_bins, _ = DPNormOptions.of(self)
        if clip_norm != "auto":
            return float(clip_norm)
        # DPNorm (Alg. 3), the core's one implementation, on the histogram of
        # the feature norms: counts that a chunked source adds up chunk by chunk.
        counts = rows.norm_histogram(clip_norm_max, n_bins)
        return dp_norm_from_histogram(
            counts, clip_norm_max, n_bins, noise_multiplier, rng, ledger, REPLACE_ONE
        )
