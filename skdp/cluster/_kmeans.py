"""DPKMeans: differentially private Lloyd's algorithm (DPLloyd)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..base import warn_privacy_leak
from ..privacy import ExponentialMechanism
from ..privacy.centring import (
    DEFAULT_BOUNDS_BUDGET,
    calibrate_auto_bounds,
    can_locate_quantile,
    private_centring,
)
from ..privacy.quantiles import (
    AUTO_BOUNDS_QUANTILES,
    BOX_SHARES,
    announced_histogram_box,
    calibrate_histogram_bounds,
    histogram_box_share,
)
from ._base import (
    DIAGONAL_START_NOISE,
    LloydSettings,
    _BaseDPLloyd,
    _blas_threads,
)
from ._blas import threadpool_limits
from ._coreset import (
    ALGORITHMS,
    CORESET_COUNT_WEIGHT,
    CORESET_MAX_DEPTH,
    choose_algorithm,
    coreset_noise_multiplier,
    private_coreset,
    start_events,
    start_noise_ratio,
    start_resolves,
    tree_thresholds,
    weighted_kmeans,
)
from ._lloyd import (
    KMEANS_AUTO_MAX_ITER,
    KMEANS_AUTO_MIN_ITER,
    KMEANS_AUTO_NOISE_RATIO,
    BoxBallProjection,
    BoxShift,
    Shift,
    relative_centre_noise,
    row_norms,
)


def box_within_norm(low, high, located, norm):
    """A released box post-processed into ``[-C, C]`` per column, ``C`` a declared row norm bound.

    Every coordinate of a row of norm at most ``C`` lies in ``[-C, C]``
    (public); a column the box did not locate (given the data-free
    ``[0, 1]``) or whose released range lies outside it takes ``[-C, C]``,
    the declared domain.
    """
    low, high = np.clip(low, -norm, norm), np.clip(high, -norm, norm)
    free = (high <= low) | ~np.asarray(located, dtype=bool)
    return np.where(free, -norm, low), np.where(free, norm, high)


def max_row_norm(X):
    """Largest L2 row norm of ``X`` (a data-dependent bound: leaks privacy)."""
    return float(row_norms(X).max()) if len(X) else 0.0


@dataclass(frozen=True)
class KMeansSettings(LloydSettings):
    """:class:`DPKMeans`'s plan: DP Lloyd's, or the private coreset's.

    Attributes
    ----------
    algorithm : {"lloyd", "coreset"}
        The algorithm the public ``(n, d, k, epsilon)`` chose.
    max_depth : int or None
        Depth of the coreset's tree (``"coreset"``).
    thresholds : object or None
        The coreset tree's split thresholds (``"coreset"``, or the private start's).
    start_ratio : float or None
        ``"lloyd"`` with the private start: its coreset's noise multiplier over the
        iterations' (:func:`~skdp.cluster._coreset.start_noise_ratio`); None: no private start.
    """

    algorithm: str = "lloyd"
    max_depth: int | None = None
    thresholds: object = None
    start_ratio: float | None = None


class DPKMeans(_BaseDPLloyd):
    """K-means clustering with differential privacy (DP Lloyd's algorithm).

    Lloyd's algorithm where every iteration releases, with noise, the cluster
    sizes and the per-cluster sums of the rows clipped to L2 norm
    ``data_norm`` (Blum et al. 2005; Su et al. 2016 "DPLloyd"; with Gaussian
    noise, Acs et al. 2018, Alg. 2, lines 6-11).  All ``max_iter``
    iterations run, and the noise multiplier of their ``2 * max_iter``
    releases is calibrated once, before the data, so that their composition
    meets ``(epsilon, delta)``.  Where ``n * epsilon`` allows, Lloyd starts
    from k-means++ on a private coreset released first (its releases in the
    same plan).  With many clusters in high dimension
    (``algorithm="auto"``) a private coreset is clustered instead.

    The fitted model holds only releases and public quantities: no
    ``labels_`` and no ``inertia_``, which are exact functions of the
    training rows (``fit_predict`` and ``score`` compute them when asked,
    outside the guarantee on the training rows).  ``privacy_spent_`` refers
    to replace-one neighbours.

    Read more in the :doc:`User Guide </cluster>`: :ref:`the privacy plan
    <cluster-privacy-plan>`, :ref:`the sensitivities <cluster-sensitivities>`,
    :ref:`initialisation and empty clusters <cluster-init>`, :ref:`the coreset
    <cluster-coreset>`, :ref:`what the model holds <cluster-limits>` and
    :ref:`the deviations from the papers <cluster-deviations>`.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters ``k``.
    epsilon : float, default=1.0
        Privacy budget of the whole fit.
    delta : float, default=1e-5
        Privacy parameter delta; must be positive for the Gaussian mechanism.
    data_norm : float, "auto" or "nonprivate", default="auto"
        Public bound ``C`` on the L2 norm of a row; larger rows are scaled
        down to it.  ``"auto"`` releases a centre ``centre_`` and a bound
        ``data_norm_`` on ``||x - c||`` with a share ``bounds_budget`` of the
        budget (:ref:`auto-data-norm`).  A declared ``C`` releases nothing
        for the bounds except where ``n * epsilon`` is small and
        ``bounds="auto"`` (a box inside ``[-C, C]``, see ``bounds``).  With
        ``bounds``, ``"auto"`` (and
        ``"nonprivate"``) mean the box's half-diagonal, for free.  ``"nonprivate"``
        otherwise reads the largest row norm off the data, a leak (opt-in; a
        :class:`~skdp.exceptions.PrivacyLeakWarning` is raised).
    max_iter : int or "auto", default=5
        Number ``T`` of Lloyd iterations, all run.  ``"auto"``: 5 to 20, from
        the plan and the public ``n`` only (:ref:`cluster-auto-iterations`).
    bounds : tuple (lower, upper), "auto" or None, default="auto"
        A declared public box (scalars or arrays of shape ``(n_features,)``):
        rows are clipped into it and centred at its centre at no privacy
        cost, and the noisy centres are post-processed towards the previous
        ones (:ref:`cluster-declared-box`).  ``"auto"`` (with
        ``data_norm="auto"`` or a declared ``data_norm``): where ``n *
        epsilon`` is too small for the private centre and norm bound to be
        located (public quantities only), a box is released by noisy
        histograms (``bounds_``) and used as a declared one; with a declared
        ``data_norm = C`` it is post-processed into ``[-C, C]`` per column,
        an unlocated column taking ``[-C, C]``.  Elsewhere ``"auto"`` is
        ``None`` (:ref:`kmeans-auto-box`).
    init : "random" or array-like of shape (n_clusters, n_features), default="random"
        ``"random"``: a privately chosen start where ``n * epsilon`` allows it
        (k-means++ on a private coreset released with a fifth of the budget,
        accounted; :ref:`cluster-private-start`), else a data-independent one
        (a random partition, or public centres on the box's diagonal under
        heavy noise with ``bounds``).  An array gives public centres; it must
        not be computed from the private data.
    algorithm : {"auto", "lloyd", "coreset"}, default="auto"
        ``"lloyd"``: DP Lloyd.  ``"coreset"``: k-means on a private coreset
        from a locality-sensitive-hash prefix tree (Google's
        ``learning/clustering`` design).  ``"auto"``: the coreset when
        ``n_clusters >= 16`` and ``n_features >= 8`` (and ``init="random"``),
        Lloyd otherwise.
    mechanism : {"gaussian", "laplace"}, default="gaussian"
        Noise of the releases (L2 sensitivities for Gaussian, L1 for Laplace).
    composition : {"pld", "rdp", "zcdp", "advanced", "basic"}, default="pld"
        Accountant of the plan (:mod:`skdp.privacy.accountants`).
    count_noise_weight : "auto" or float, default="auto"
        Noise multiplier of the cluster sizes over that of the sums;
        ``"auto"`` minimises the centres' error (:ref:`cluster-budget-split`),
        ``1.0`` is the papers' single multiplier.
    bounds_budget : float in (0, 1) or "auto", default="auto"
        Share of ``(epsilon, delta)`` spent on the bounds when
        ``data_norm="auto"``.  ``"auto"``: the smallest of 0.1, 0.2, 0.3, 0.5
        at which the bounds can be located from the public ``n``, else 0.5
        (:ref:`kmeans-auto-box`).
    accountant : BudgetAccountant, default=None
        Shared budget charged with ``privacy_spent_``.
    random_state : int, RandomState instance or None, default=None
        Seeds the initial centres and the noise.  A known seed reproduces the
        fit exactly, and so removes the noise for whoever knows it.
    secure_noise : bool or None, default=None
        Sample every release exactly on a grid (discrete Laplace and
        Gaussian) instead of in floating point, whose low-order bits leak
        (Mironov 2012).  None follows :func:`skdp.set_config`.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        Released private centres.
    n_iter_ : int
        Number of iterations run (for the coreset, those of the non-private
        k-means on the released coreset).
    algorithm_ : str
        The algorithm run, ``"lloyd"`` or ``"coreset"``.
    n_leaves_ : int
        Size of the released coreset (``algorithm_ == "coreset"`` only).
    noisy_counts_ : ndarray of shape (n_clusters,)
        Noisy cluster sizes of the last iteration (released).
    n_reseeded_ : int
        Number of re-seedings of clusters whose noisy size fell below 1.
    data_norm_ : float
        Clipping bound ``C`` used.
    centre_ : ndarray of shape (n_features,)
        The released centre of ``data_norm="auto"``, or the box's centre
        (absent otherwise).
    bounds_ : tuple of two ndarrays of shape (n_features,)
        The box released by ``bounds="auto"`` where ``n * epsilon`` is
        small (absent otherwise).
    noise_multiplier_ : float
        Calibrated noise multiplier of the sums.
    privacy_spent_ : PrivacySpent
        ``(epsilon, delta)`` of the fit.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features,)
        Defined when X has feature names that are all strings.

    See Also
    --------
    DPKernelKMeans : DP Lloyd in a random Fourier feature space (non-linear clusters).
    sklearn.cluster.KMeans : the non-private estimator.

    References
    ----------
    A. Blum, C. Dwork, F. McSherry, K. Nissim. Practical privacy: the SuLQ
    framework. PODS 2005.

    D. Su, J. Cao, N. Li, E. Bertino, H. Jin. Differentially private k-means
    clustering. CODASPY 2016.

    G. Acs, L. Melis, C. Castelluccia, E. De Cristofaro. Differentially private
    mixture of generative neural networks. IEEE TKDE 2018, Alg. 2, Eq. 3.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.cluster import DPKMeans
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(-2, 0.3, (500, 2)), rng.normal(2, 0.3, (500, 2))])
    >>> init = np.array([[-1.0, -1.0], [1.0, 1.0]])  # public guesses
    >>> km = DPKMeans(n_clusters=2, epsilon=1.0, data_norm=4.0, init=init, random_state=0).fit(X)
    >>> np.round(km.cluster_centers_)
    array([[-2., -2.],
           [ 2.,  2.]])
    >>> km.predict([[-3.0, -2.5], [2.5, 1.0]])
    array([0, 1])
    >>> km.privacy_spent_.epsilon <= 1.0
    True
    """

    _settings_type = KMeansSettings

    # The centres and last noisy sizes are released; n_reseeded_ is a function
    # of the released sizes; data_norm_ is data_norm (public) unless the user
    # accepted the announced leak of data_norm="nonprivate"; n_iter_ and
    # noise_multiplier_ come from the plan (public n under replace-one).
    # centre_ is released by data_norm="auto" (on the ledger), else absent.
    _released_attributes = frozenset(
        {
            "cluster_centers_",
            "noisy_counts_",
            "n_reseeded_",
            "data_norm_",
            "n_iter_",
            "noise_multiplier_",
            "centre_",
            "bounds_",
            "algorithm_",
            "n_leaves_",
        }
    )

    _parameter_constraints = {
        **_BaseDPLloyd._parameter_constraints,
        "data_norm": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto", "nonprivate"})],
        "bounds": ["array-like", StrOptions({"auto"}), None],
        "bounds_budget": [Interval(Real, 0, 1, closed="neither"), StrOptions({"auto"})],
        "mechanism": [StrOptions({"gaussian", "laplace"})],
        "algorithm": [StrOptions(set(ALGORITHMS))],
    }

    def __init__(
        self,
        n_clusters=8,
        *,
        epsilon=1.0,
        delta=1e-5,
        data_norm="auto",
        bounds="auto",
        max_iter=5,
        init="random",
        algorithm="auto",
        mechanism="gaussian",
        composition="pld",
        count_noise_weight="auto",
        bounds_budget="auto",
        accountant=None,
        random_state=None,
        secure_noise=None,
    ):
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.bounds = bounds
        self.max_iter = max_iter
        self.init = init
        self.algorithm = algorithm
        self.mechanism = mechanism
        self.composition = composition
        self.count_noise_weight = count_noise_weight
        self.bounds_budget = bounds_budget
        self.accountant = accountant
        self.random_state = random_state
        self.secure_noise = secure_noise

    # --- bounds: a declared box gives a centre and a radius for free ---
    def _private_box_mode(self, shape):
        """Whether the fit releases a box rather than a centre and norm bound (public quantities).

        ``bounds="auto"`` with ``data_norm="auto"``: the centre and norm
        bound (:func:`~skdp.privacy.centring.private_centring`) while their
        quantile can be located (:func:`~skdp.privacy.centring.can_locate_quantile`),
        else the histogram box (never beyond twice the data's largest magnitude).
        With a declared ``data_norm`` the same rule: the declared ball, else
        the box (post-processed into the ball's cube, :func:`box_within_norm`).
        """
        if not (isinstance(self.bounds, str) and self.bounds == "auto" and self.data_norm != "nonprivate"):
            return False
        return self._centring_share(shape[0]) is None

    def _centring_share(self, n_samples):
        """The centring's share of the budget: declared, or (``"auto"``) the smallest that locates.

        ``bounds_budget="auto"``: the smallest share in
        :data:`~skdp.privacy.quantiles.BOX_SHARES` whose quantile epsilon
        lets the exponential mechanism locate a norm quantile with ``n``
        rows (:func:`~skdp.privacy.centring.can_locate_quantile`); None
        when none does (the histogram box then takes over with
        ``bounds="auto"``, else the largest share).  Public quantities only.
        """
        if not isinstance(self.bounds_budget, str):
            return float(self.bounds_budget)
        for share in BOX_SHARES:
            plan = calibrate_auto_bounds(
                float(self.epsilon), float(self.delta), share, neighbouring=self._neighbouring
            )
            if can_locate_quantile(n_samples, plan.quantile_epsilon):
                return share
        return None

    def _centring_plan(self, secure_noise, n_samples=None):
        share = DEFAULT_BOUNDS_BUDGET if n_samples is None else self._centring_share(n_samples)
        return calibrate_auto_bounds(
            float(self.epsilon),
            float(self.delta),
            BOX_SHARES[-1] if share is None else share,
            neighbouring=self._neighbouring,
            secure_noise=secure_noise,
        )

    def _declares_box(self):
        return self.bounds is not None and not isinstance(self.bounds, str)

    def _box(self, n_features):
        """The box as a :class:`BoxShift`: declared, or released by ``bounds="auto"`` (``bounds_``); else None."""
        released = self.__dict__.get("bounds_")
        if released is not None:
            return BoxShift(*released)
        if not self._declares_box():
            return None
        try:
            lower, upper = self.bounds
            lower = np.broadcast_to(np.asarray(lower, dtype=float), (n_features,))
            upper = np.broadcast_to(np.asarray(upper, dtype=float), (n_features,))
        except (TypeError, ValueError):
            raise ValueError(
                "bounds must be a pair (lower, upper) of scalars or arrays of shape (n_features,) = "
                f"({n_features},)."
            ) from None
        if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
            raise ValueError("bounds must be finite.")
        if np.any(upper <= lower):
            raise ValueError("bounds must satisfy lower < upper in every feature.")
        return BoxShift(lower, upper)

    def _box_radius(self, box):
        """The half-diagonal ``||upper - lower|| / 2``: every clipped, centred row lies within it."""
        return float(np.linalg.norm(box.upper - box.lower) / 2.0)

    # --- data_norm="auto": a private centre and bound (skdp.privacy.centring) ---
    def _auto_bounds(self, secure_noise=False, shape=None):
        """The bounds' plan, or None for a declared box or bound (nothing released).

        ``bounds="auto"`` with ``data_norm="auto"``: the private histogram box's
        :class:`~skdp.privacy.quantiles.HistogramBounds` (its share from the
        public ``n``, ``d``, epsilon and delta when ``bounds_budget="auto"``:
        :func:`~skdp.privacy.quantiles.histogram_box_share`); ``bounds=None``
        with ``data_norm="auto"``: the private centre and norm bound's
        :class:`~skdp.privacy.centring.AutoBounds`.  ``shape`` is the public
        ``(n_samples, n_features)`` (during ``fit``, the plan's).
        """
        if self._declares_box() or self.data_norm == "nonprivate":
            return None
        auto_share = isinstance(self.bounds_budget, str)
        shape = shape if shape is not None else self.__dict__.get("_plan_shape")
        if not isinstance(self.data_norm, str) and not (shape is not None and self._private_box_mode(shape)):
            # A declared norm is the ball the rows lie in: nothing is released
            # unless n * epsilon is too small for DP Lloyd on that ball (the box).
            return None
        if shape is not None and self._private_box_mode(shape):
            n_samples, n_features = shape
            composition = "basic" if self.mechanism == "laplace" else self.composition
            delta = 0.0 if self.mechanism == "laplace" else float(self.delta)
            share = (
                histogram_box_share(
                    n_samples, float(self.epsilon), delta, n_features, composition, secure_noise
                )
                if auto_share
                else float(self.bounds_budget)
            )
            return calibrate_histogram_bounds(
                float(self.epsilon), delta, n_features, share, composition, secure_noise, scale=True
            )
        return self._centring_plan(secure_noise, None if shape is None else shape[0])

    # Only the ball around the released centre takes the box's rules (BALL_PRIOR_NOISE).
    _ball_prior = property(lambda self: isinstance(self.data_norm, str) and self.data_norm == "auto")

    # DPKMeans' "auto" rule: at least 5, up to 20 (public quantities only).
    _auto_max_iter_rule = {
        "ratio": KMEANS_AUTO_NOISE_RATIO,
        "max_iter": KMEANS_AUTO_MAX_ITER,
        "min_iter": KMEANS_AUTO_MIN_ITER,
    }

    def _noise_mechanisms(self):
        # Either "auto" release may be the centring's exponential mechanism.
        auto = not self._declares_box() and isinstance(self.data_norm, str) and self.data_norm == "auto"
        return (ExponentialMechanism,) if auto else ()

    def _bounds_plan(self, secure_noise=False):
        return self._auto_bounds(secure_noise)

    def _fit_feature_map(self, n_features, rng):
        # A centre from an earlier fit must not shift this one.
        self.__dict__.pop("centre_", None)
        self.__dict__.pop("bounds_", None)
        box = self._box(n_features)
        if box is not None:
            self.centre_ = box.centre  # declared, public

    def _feature_map(self):
        if self._declares_box() or "bounds_" in self.__dict__:
            return self._box(self.n_features_in_)
        centre = self.__dict__.get("centre_")
        return None if centre is None else Shift(centre)

    def _projection(self, bound):
        box = self._box(self.n_features_in_)
        return None if box is None else BoxBallProjection(box, bound)

    def _released_centres(self, centres):
        centre = self.__dict__.get("centre_")
        return centres if centre is None else centres + centre

    def _space_centres(self):
        centre = self.__dict__.get("centre_")
        return self.cluster_centers_ if centre is None else self.cluster_centers_ - centre

    def _select_bound(self, rows, noise_multiplier, rng, ledger):
        if self._private_box_mode((rows.n_samples, rows.n_features)):
            self._release_box(rows, rng, ledger)
        box = self._box(rows.n_features)
        if box is not None:
            # The rows are already clipped to the box and centred at its centre.
            radius = self._box_radius(box)
            return (
                radius
                if isinstance(self.data_norm, str)
                else min(float(self.data_norm), radius)
            )
        bounds = self._auto_bounds(
            ledger is not None and ledger.secure_noise, (rows.n_samples, rows.n_features)
        )
        if bounds is not None:
            centre, bound = private_centring(
                self._reduce(rows), rows.n_samples, rows.n_features, bounds, rng, ledger
            )
            self.centre_ = centre
            rows.map_features(Shift(centre))  # the rows are x - c from here on
            return bound
        if self.data_norm != "nonprivate":
            return float(self.data_norm)
        warn_privacy_leak("data_norm", "the largest row norm")
        bound = rows.max_norm()
        if not np.isfinite(bound):
            raise ValueError("The largest row norm of X overflows; set data_norm to a public bound.")
        # All-zero data: any positive bound gives the same (zero) statistics.
        return bound if bound > 0 else 1.0

    @staticmethod
    def _reduce(rows):
        """``reduce(fn, *params)``: the sum of ``fn(chunk, *params)`` over the rows (in memory or chunked)."""
        if rows.chunked:
            return rows.data.map_reduce

        def reduce(fn, *params):
            return fn(rows.Z, *params)

        return reduce

    def _release_box(self, rows, rng, ledger):
        """``bounds="auto"``: release a box by the private histogram (:func:`private_histogram_box`).

        Its events are the plan's first (:meth:`_auto_bounds`); the box then
        serves exactly as a declared one: rows clipped into it and centred at
        its centre, radius its half-diagonal, diagonal start and shrinkage.
        """
        plan = self._auto_bounds(
            ledger is not None and ledger.secure_noise, (rows.n_samples, rows.n_features)
        )
        low, high, located, pooled = announced_histogram_box(
            self._reduce(rows),
            rows.n_samples,
            rows.n_features,
            plan.mechanism(),
            AUTO_BOUNDS_QUANTILES,
            rng,
            ledger,
            scale_mechanism=plan.scale_mechanism(),
            epsilon=self.epsilon,
            advice="Declare bounds=(lower, upper) from public knowledge, or raise epsilon.",
            extend=True,
        )
        if not isinstance(self.data_norm, str):
            low, high = box_within_norm(low, high, located, float(self.data_norm))
        self.bounds_ = (low, high)
        self.centre_ = (low + high) / 2.0
        rows.map_features(BoxShift(low, high))

    def _calibrate(self, rows, plan):
        # The bounds' plan reads the public (n, d) (histogram_box_share): held for
        # the calibration only, never kept on the estimator.
        self.__dict__["_plan_shape"] = (rows.n_samples, rows.n_features)
        try:
            return self._calibrate_algorithm(rows, plan)
        finally:
            self.__dict__.pop("_plan_shape", None)

    # --- algorithm: DP Lloyd or the private LSH coreset (skdp.cluster._coreset) ---
    def _algorithm(self, n_samples, n_features):
        """``algorithm``, with ``"auto"`` resolved from public quantities (:func:`choose_algorithm`).

        Public ``init`` centres are a Lloyd starting point: ``"auto"`` then keeps Lloyd.
        """
        if self.algorithm != "auto":
            if self.algorithm == "coreset" and not isinstance(self.init, str):
                raise ValueError(
                    "init must be 'random' with algorithm='coreset' (the coreset needs no start)."
                )
            return self.algorithm
        if not isinstance(self.init, str):
            return "lloyd"
        return choose_algorithm(
            n_samples, self.n_clusters, n_features, float(self.epsilon), float(self.delta)
        )

    # --- the private start of DP Lloyd (a coreset's k-means++; skdp.cluster._coreset) ---
    def _start_events(self, n_iter, count_weight):
        ratio = start_noise_ratio(int(n_iter), float(count_weight), self.mechanism)
        return functools.partial(start_events, ratio=ratio, mechanism=self.mechanism)

    def _may_start_privately(self):
        """``init="random"`` and at least two clusters: the start is considered (public parameters)."""
        return isinstance(self.init, str) and self.n_clusters >= 2

    def _uses_private_start(self, rows, settings):
        """Whether Lloyd's plan starts from the private coreset (public quantities only).

        ``init="random"`` wherever the start-free plan would begin with the
        random partition: not where a box's diagonal start takes its place
        (a box, declared or released, and a relative centre noise above
        :data:`~skdp.cluster._base.DIAGONAL_START_NOISE`), where ``n * epsilon``
        is too small for a coreset's leaves as well (:ref:`cluster-private-start`).
        One cluster needs no start: every row is assigned to it whatever the start.
        ``settings`` are the plan with the start's releases: its iterations'
        noise decides (public, and about the start-free plan's, see
        :meth:`_calibrate_algorithm`).
        """
        if not self._may_start_privately():
            return False
        shape = (rows.n_samples, rows.n_features)
        has_box = self._declares_box() or self._private_box_mode(shape)
        noise = relative_centre_noise(
            settings.noise_multiplier, self.mechanism, rows.n_samples, self.n_clusters, settings.dim
        )
        return not (has_box and noise > DIAGONAL_START_NOISE)

    def _private_start(self, rows, settings, bound, project, rng, ledger):
        """k-means++ and Lloyd on a private coreset of the rows (post-processing of its releases).

        The coreset (:func:`~skdp.cluster._coreset.private_coreset`) is
        released at ``start_ratio`` times the iterations' noise multiplier,
        its events the plan's (:meth:`_start_events`); its weighted k-means
        (:func:`~skdp.cluster._coreset.weighted_kmeans`) gives the centres.
        """
        ratio = settings.start_ratio
        if ratio is None:
            return None
        noise_multiplier = settings.noise_multiplier * ratio
        count_mechanism, sum_mechanism = self._count_and_sum_mechanisms(
            bound, settings.dim, CORESET_COUNT_WEIGHT, noise_multiplier
        )
        thresholds = tree_thresholds(
            noise_multiplier, self.mechanism, rows.n_samples, self.n_clusters, settings.dim
        )
        points, weights = private_coreset(
            rows, bound, count_mechanism, sum_mechanism, CORESET_MAX_DEPTH, thresholds, rng, ledger, project
        )
        centres, _, _, _ = weighted_kmeans(points, weights, self.n_clusters, bound, rng, project, n_init=1)
        return centres

    def _calibrate_algorithm(self, rows, plan):
        """Lloyd's plan, or the coreset's: ``D`` level counts and one leaf-sum release (public quantities)."""
        algorithm = self._algorithm(rows.n_samples, rows.n_features)
        if algorithm == "lloyd":
            if self._may_start_privately():
                # The plan with the start first: where it is taken (the common case at
                # large n * epsilon) it is the only calibration the fit pays.  Its
                # iterations' multiplier is about the start-free plan's (the start
                # costs what the random partition's release did, at the default T).
                started = super()._calibrate(rows, plan, start=True)
                s = started.settings
                ratio = start_noise_ratio(s.n_iter, s.count_weight, self.mechanism)
                if self._uses_private_start(rows, s) and start_resolves(
                    s.noise_multiplier * ratio, self.mechanism, rows.n_samples, self.n_clusters, s.dim
                ):
                    return started.with_settings(algorithm="lloyd", start_ratio=ratio)
            return super()._calibrate(rows, plan).with_settings(algorithm="lloyd")
        dim = self._feature_dim(rows.n_features)
        secure = plan.secure_noise
        noise_multiplier = coreset_noise_multiplier(
            CORESET_MAX_DEPTH,
            self.mechanism,
            CORESET_COUNT_WEIGHT,
            float(self.epsilon),
            float(self.delta),
            self.composition,
            secure_noise=secure,
            bounds=self._auto_bounds(secure),
        )
        thresholds = tree_thresholds(noise_multiplier, self.mechanism, rows.n_samples, self.n_clusters, dim)
        return plan.with_settings(
            KMeansSettings(
                algorithm="coreset",
                dim=dim,
                noise_multiplier=noise_multiplier,
                max_depth=CORESET_MAX_DEPTH,
                count_weight=CORESET_COUNT_WEIGHT,
                thresholds=thresholds,
            )
        )

    def _fit_private(self, rows, plan, rng, ledger):
        """DP Lloyd (:class:`_BaseDPLloyd`), or k-means on the private coreset."""
        self.algorithm_ = plan.settings.algorithm
        if self.algorithm_ == "lloyd":
            self.__dict__.pop("n_leaves_", None)
            return super()._fit_private(rows, plan, rng, ledger)
        self._fit_feature_map(rows.n_features, rng)
        s = plan.settings
        dim, noise_multiplier, max_depth, count_weight = s.dim, s.noise_multiplier, s.max_depth, s.count_weight
        thresholds = s.thresholds
        with threadpool_limits(limits=_blas_threads(rows, self.n_clusters), user_api="blas"):
            bound, count_mechanism, sum_mechanism = self._bounded_rows_and_mechanisms(
                rows, dim, count_weight, noise_multiplier, rng, ledger
            )
            project = self._projection(bound)
            points, weights = private_coreset(
                rows, bound, count_mechanism, sum_mechanism, max_depth, thresholds, rng, ledger, project
            )
            centres, cluster_weights, n_reseeded, n_iter = weighted_kmeans(
                points, weights, self.n_clusters, bound, rng, project
            )
        self._store_fit(noise_multiplier, bound, centres, cluster_weights, n_reseeded, n_iter)
        self.n_leaves_ = len(points)
