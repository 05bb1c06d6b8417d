"""DPGaussianMixture: differentially private EM by moment perturbation (Park et al.).

The estimator runs the template of :class:`~skdp.base.DPEstimatorMixin`; the
public plan of its releases is :class:`~skdp.mixture._plan.EMPlan`, the
releases of an M-step are :func:`~skdp.mixture._m_step.private_m_step`, the
starts (histogram, random, public) are in :mod:`skdp.mixture._init`, the bounds'
plan and the number of components the noise resolves in :mod:`skdp.mixture._bounds`,
and the moment algebra in :mod:`skdp.mixture._moments`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._input import validate_fit_input
from ..base import PRIVACY_PARAMETER_CONSTRAINTS, DPEstimatorMixin, private_fit_context, warn_privacy_leak
from ..privacy import (
    ExponentialMechanism,
)
from ..privacy.centring import (
    calibrate_after_bounds,
    private_centring,
)
from ..privacy.ledger import COMPOSITION_CONSTRAINT
from ..privacy.quantiles import (
    HistogramBounds,
)
from ._bounds import auto_shares, bounds_plan, fitted_components, release_box
from ._init import histogram_start, public_start, random_start
from ._m_step import niw_prior, private_m_step
from ._moments import (
    clip_to_unit_ball,
    compute_precision_cholesky,
    estimate_log_gaussian_prob,
    expected_statistics,
    precisions_from_cholesky,
    sample_mixture,
)
from ._plan import (
    DEFAULT_INIT_BUDGET,
    EMPlan,
    check_budget_shares,
    resolve_mean_mechanism,
)


def copy_components(weights, means, covariances, n_components, covariance_type):
    """``n_components`` rows from fewer fitted components: copies share their component's weight.

    The density is unchanged (post-processing); the attributes keep the
    shapes scikit-learn's ``GaussianMixture(n_components)`` has.
    """
    k = weights.shape[0]
    if k == n_components:
        return weights, means, covariances
    index = np.arange(n_components) % k
    copies = np.bincount(index, minlength=k)
    weights = weights[index] / copies[index]
    if covariance_type != "tied":
        covariances = covariances[index]
    return weights, means[index], covariances


def centred_expected_statistics(chunk, centre, data_norm, *params):
    """:func:`expected_statistics` of the rows shifted by a released ``centre`` (None: unshifted)."""
    return expected_statistics(chunk if centre is None else chunk - centre, data_norm, *params)


@dataclass(frozen=True)
class GaussianMixtureSettings:
    """:class:`DPGaussianMixture`'s plan (its ``_calibrate``), from public quantities.

    Attributes
    ----------
    scale : float
        The row bound of the data (declared ``data_norm``, or the box's; the
        released one replaces it when ``bounds`` is set).
    noise_multiplier : float
        The EM plan's common noise multiplier ``z``.
    multipliers : tuple of float
        Each M-step release's multiplier, ``z`` times its weight
        (:meth:`EMPlan.noise_weights`).
    bounds : HistogramBounds or AutoBounds or None
        The private box or centring released before EM, else None.
    init_multiplier : float or None
        The histogram start's multiplier (``init_budget > 0``), else None.
    em_plan : EMPlan
        Components, iterations and releases of DP-EM (:mod:`skdp.mixture._plan`).
    """

    scale: float
    noise_multiplier: float
    multipliers: tuple
    bounds: object
    init_multiplier: float | None
    em_plan: object


class DPGaussianMixture(DPEstimatorMixin, DensityMixin, BaseEstimator):
    """Differentially private Gaussian mixture fitted by DP-EM (Park et al. 2017).

    Rows are clipped to ``data_norm`` and scaled into the unit ball; every EM
    iteration releases the counts ``N_k`` (Eq. 13), the sums ``S1_k``
    (Eq. 14-15) and the second moments ``S2_k`` (Eq. 16-18, with two-sided
    noise instead of the paper's Gamma and Wishart noise) and maps them to
    parameters (post-processing).  The whole plan is calibrated before the
    data is read; exactly ``max_iter`` iterations run.

    Read more in the :doc:`User Guide </mixture>`.

    Parameters
    ----------
    n_components : int, default=1
        Number of mixture components ``K``.
    covariance_type : {"full", "tied", "spherical"}, default="full"
        ``"spherical"`` is the paper's isotropic case; ``"tied"`` releases the
        total second moment once per fit (the k-means model).
    estimator : {"map", "mle"}, default="map"
        MAP under the Dirichlet / Normal-inverse-Wishart priors below, or MLE.
    mean_mechanism : {"auto", "laplace", "gaussian"}, default="auto"
        Noise of the weights and means; ``"auto"`` is ``"gaussian"`` when
        ``delta > 0``, else ``"laplace"``.
    composition : {"pld", "rdp", "zcdp", "advanced", "basic"}, default="pld"
        Accountant of the calibration and the accounting.
    component_releases : {"joint", "separate"}, default="joint"
        One release per statistic for all components, or one per component
        (the paper's ``2K + 1`` per iteration).
    budget_split : {"auto", "equal"} or array-like of shape (3,), default="auto"
        Shares of the budget of the counts, first and second moments:
        ``"equal"`` per release, ``"auto"`` or three positive numbers.
    max_iter : int or "auto", default="auto"
        EM iterations; ``"auto"``: 1 after the histogram start or for one
        component, else 5.
    tol : float, default=1e-3
        Threshold on the change of ``lower_bound_`` for ``converged_`` (never stops early).
    reg_covar : float, default=1e-3
        Least covariance eigenvalue in the unit-ball scale (or the noise level).
    data_norm : float, "auto" or "nonprivate", default="auto"
        Public bound on a row's L2 norm.  ``"auto"`` releases a centre and a
        bound with ``bounds_budget`` (:doc:`/bounds`); ``"nonprivate"`` uses the
        data's largest row norm and warns (opt-in, not private).
    bounds_budget : float in (0, 1) or "auto", default="auto"
        Share of the budget spent on ``data_norm="auto"``.  ``"auto"``: the
        smallest of 0.1, 0.2, 0.3, 0.5 at which the norm quantile can be
        located from ``n`` and ``epsilon``; where none can, a private
        histogram box (:ref:`auto-data-norm`).
    init_params : {"auto", "histogram", "random"}, default="auto"
        Park et al.'s data-independent start, a private histogram start
        bought with ``init_budget``, or (``"auto"``) the histogram when ``d <= 2``.
    init_budget : float in (0, 1), default=0.1
        Share of the budget spent on the histogram start.
    reduce_components : bool, default=True
        Where ``n``, ``d`` and epsilon cannot resolve ``n_components``
        covariances above the noise, fit the largest number that can (one
        broad component at least; :ref:`mixture-fallback`) and warn; the
        fitted attributes keep ``n_components`` rows (copies share a
        component's weight).  A public rule; never with ``means_init`` or
        ``weights_init``.
    weights_init : array-like of shape (n_components,), default=None
        Public initial weights.
    means_init : array-like of shape (n_components, n_features), default=None
        Public initial means in the original scale.
    weight_concentration_prior : float, default=2.0
        Dirichlet parameter ``alpha`` (MAP only), at least 1.
    mean_precision_prior : float, default=1.0
        NIW ``kappa0`` (MAP only).
    degrees_of_freedom_prior : float or None, default=None
        NIW ``nu0`` (MAP only); ``None`` means ``d + 2``.
    covariance_prior : float or array-like of shape (n_features, n_features), default=None
        NIW scale ``S0`` in the unit-ball scale (MAP only); ``None`` means
        ``0.1 I``, a float ``s`` means ``s I``.
    epsilon : float, default=1.0
        Privacy budget of the whole fit.
    delta : float, default=1e-5
        Privacy budget; 0 (pure DP) requires Laplace means.
    accountant : BudgetAccountant, default=None
        Shared budget charged with ``privacy_spent_``.
    random_state : int, RandomState instance, Generator or None, default=None
        Seeds the initialisation and the noise; :meth:`sample` draws from a
        stream spawned from an int seed, never the noise's own.  ``None`` (fresh
        entropy) is the choice for a release: anyone who holds the seed, or the
        generator object passed here, can regenerate the noise and remove it
        (:doc:`/guarantee`, "Seeds and randomness").  A pickle of the model never
        carries a generator.
    secure_noise : bool or None, default=None
        Sample every Laplace and Gaussian release exactly on a grid (discrete
        Laplace / discrete Gaussian, Canonne, Kamath & Steinke 2020) instead of
        in floating point, whose low-order bits leak the noiseless value
        (Mironov 2012).  None follows :func:`skdp.set_config`.

    Attributes
    ----------
    weights_ : ndarray of shape (n_components,)
    means_ : ndarray of shape (n_components, n_features)
        In the original scale.
    covariances_ : ndarray
        ``(n_components, n_features, n_features)`` (full),
        ``(n_features, n_features)`` (tied) or ``(n_components,)``
        (spherical), in the original scale.
    precisions_ : ndarray
        Inverses of ``covariances_``.
    precisions_cholesky_ : ndarray
        Cholesky factors of ``precisions_``.
    converged_ : bool
    n_iter_ : int
        The number of iterations run: ``max_iter``, or the one ``"auto"`` chose.
    lower_bound_ : float
        Expected complete-data log-likelihood per sample (Eq. 4) of the last
        iteration, from the released moments.
    lower_bounds_ : list of float
        The same for every iteration.
    noise_multiplier_ : float
        Calibrated common noise scale over sensitivity.
    noise_multipliers_ : dict
        Noise scale over sensitivity of the ``"weights"``, ``"means"`` and
        ``"second_moments"`` releases.
    n_components_fitted_ : int
        Components actually fitted (``reduce_components``); public.
    data_norm_ : float
        The norm bound used.
    centre_ : ndarray of shape (n_features,)
        The released centre (``data_norm="auto"`` only).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features,)
        Defined when X has feature names that are all strings.
    privacy_spent_ : PrivacySpent
        ``(epsilon, delta)`` of the fit under replace-one neighbours.

    See Also
    --------
    sklearn.mixture.GaussianMixture : the non-private model.
    skdp.cluster.DPKMeans : private k-means (the tied model's small-variance limit).

    References
    ----------
    M. Park, J. Foulds, K. Chaudhuri, M. Welling. DP-EM: Differentially
    private expectation maximization. AISTATS 2017 (arXiv:1605.06995).

    C. Dwork, K. Talwar, A. Thakurta, L. Zhang. Analyze Gauss: optimal bounds
    for privacy-preserving principal component analysis. STOC 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mixture import DPGaussianMixture
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(-2, 0.5, (20000, 2)), rng.normal(2, 0.5, (20000, 2))])
    >>> gm = DPGaussianMixture(n_components=2, data_norm=5.0, max_iter=5, epsilon=1.0,
    ...                        delta=1e-5, random_state=0).fit(X)
    >>> np.round(gm.means_[np.argsort(gm.means_[:, 0])], 1)
    array([[-2., -2.],
           [ 2.,  2.]])
    >>> round(gm.privacy_spent_.epsilon, 6)
    1.0
    """

    #: What a fitted model holds (``docs/guarantee.md``, "What a fitted model
    #: holds"): the mixture parameters, a projection of the released noisy
    #: moments of the last iteration; ``lower_bound_``/``lower_bounds_`` and
    #: ``converged_``, computed from the released moments only; the plan
    #: (``noise_multiplier_``, ``noise_multipliers_``, ``n_iter_`` =
    #: ``max_iter``), from hyperparameters; ``data_norm_``, the declared
    #: ``data_norm`` (or, when it is not declared, the data's largest row norm,
    #: with a ``PrivacyLeakWarning``).
    _released_attributes = frozenset(
        {
            "weights_",
            "means_",
            "covariances_",
            "precisions_",
            "precisions_cholesky_",
            "lower_bound_",
            "lower_bounds_",
            "converged_",
            "n_iter_",
            "n_components_fitted_",
            "noise_multiplier_",
            "noise_multipliers_",
            "data_norm_",
            "centre_",
        }
    )

    _parameter_constraints = {
        **PRIVACY_PARAMETER_CONSTRAINTS,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "covariance_type": [StrOptions({"full", "tied", "spherical"})],
        "estimator": [StrOptions({"map", "mle"})],
        "mean_mechanism": [StrOptions({"auto", "laplace", "gaussian"})],
        "composition": [COMPOSITION_CONSTRAINT],
        "component_releases": [StrOptions({"joint", "separate"})],
        "budget_split": [StrOptions({"equal", "auto"}), "array-like"],
        "max_iter": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "tol": [Interval(Real, 0.0, None, closed="left")],
        "reg_covar": [Interval(Real, 0.0, 1.0, closed="neither")],
        "data_norm": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto", "nonprivate"})],
        "bounds_budget": [Interval(Real, 0, 1, closed="neither"), StrOptions({"auto"})],
        "init_params": [StrOptions({"auto", "random", "histogram"})],
        "init_budget": [Interval(Real, 0, 1, closed="neither")],
        "reduce_components": ["boolean"],
        "weights_init": ["array-like", None],
        "means_init": ["array-like", None],
        "weight_concentration_prior": [Interval(Real, 1.0, None, closed="left")],
        "mean_precision_prior": [Interval(Real, 0.0, None, closed="left")],
        "degrees_of_freedom_prior": [Interval(Real, 0.0, None, closed="left"), None],
        "covariance_prior": ["array-like", Interval(Real, 0.0, None, closed="left"), None],
    }

    def __init__(
        self,
        n_components=1,
        *,
        covariance_type="full",
        estimator="map",
        mean_mechanism="auto",
        composition="pld",
        component_releases="joint",
        budget_split="auto",
        max_iter="auto",
        tol=1e-3,
        reg_covar=1e-3,
        data_norm="auto",
        bounds_budget="auto",
        init_params="auto",
        init_budget=DEFAULT_INIT_BUDGET,
        reduce_components=True,
        weights_init=None,
        means_init=None,
        weight_concentration_prior=2.0,
        mean_precision_prior=1.0,
        degrees_of_freedom_prior=None,
        covariance_prior=None,
        epsilon=1.0,
        delta=1e-5,
        accountant=None,
        random_state=None,
        secure_noise=None,
    ):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.estimator = estimator
        self.mean_mechanism = mean_mechanism
        self.composition = composition
        self.component_releases = component_releases
        self.budget_split = budget_split
        self.max_iter = max_iter
        self.tol = tol
        self.reg_covar = reg_covar
        self.data_norm = data_norm
        self.bounds_budget = bounds_budget
        self.init_params = init_params
        self.init_budget = init_budget
        self.reduce_components = reduce_components
        self.weights_init = weights_init
        self.means_init = means_init
        self.weight_concentration_prior = weight_concentration_prior
        self.mean_precision_prior = mean_precision_prior
        self.degrees_of_freedom_prior = degrees_of_freedom_prior
        self.covariance_prior = covariance_prior
        self.epsilon = epsilon
        self.delta = delta
        self.accountant = accountant
        self.random_state = random_state
        self.secure_noise = secure_noise

    # The privacy plan (:mod:`skdp.mixture._plan`).
    def _noise_mechanisms(self):
        return (ExponentialMechanism,) if bounds_plan(self) is not None else ()

    def _check_params(self):
        # Only an explicit "gaussian" can meet delta=0: "auto" resolves to
        # "laplace" there.
        if self.delta == 0 and resolve_mean_mechanism(self.mean_mechanism, self.delta) == "gaussian":
            raise ValueError(
                "delta=0 asks for pure DP, which the Gaussian mechanism cannot give: "
                "set delta > 0 or mean_mechanism='laplace' (or 'auto')."
            )
        # Whether a histogram start is drawn may depend on the public number
        # of columns (_check_public_input); with init_params="histogram" it
        # does not, and the shares are refused here already.
        self._check_budget_shares(None)

    def _check_public_input(self, X, y=None, **fit_params):
        # The number of columns is public: the budget shares are checked
        # against it before the hold (a failed fit must not be charged).
        shape = getattr(X, "shape", None)
        if shape is not None and len(shape) == 2:
            self._check_budget_shares(int(shape[1]))

    def _check_budget_shares(self, n_features):
        share = auto_shares(self.init_budget)[0] if isinstance(self.bounds_budget, str) else self.bounds_budget
        init = (self.init_budget, share, self.init_params, self.means_init)
        check_budget_shares(self.data_norm, *init, n_features)

    def _validate_X(self, X, reset):
        X = validate_data(self, X, reset=reset, dtype=[np.float64, np.float32], ensure_min_samples=1)
        return np.asarray(X, dtype=np.float64)

    # Fit: the template's hooks (:class:`~skdp.base.DPEstimatorMixin`).
    @private_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the mixture by ``max_iter`` iterations of DP-EM.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), memmap, Dask array or DataFrame, or callable
            In-memory data, or data fitted chunk by chunk (:doc:`/scale_out`):
            a ``numpy.memmap`` (e.g. ``np.load(path, mmap_mode="r")``), a
            Dask array or DataFrame (one distributed reduction per
            iteration), or a callable returning a fresh iterable of 2-D
            chunks.  Chunked fits add the same noise to the same global sums:
            the guarantee and, for the same ``random_state``, the result are
            those of the in-memory fit.
        y : None
            Ignored.

        Returns
        -------
        self : DPGaussianMixture
        """
        return self._private_fit(X)

    def fit_predict(self, X, y=None):
        """Fit, then label the rows of ``X`` with the released model (post-processing).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return self.fit(X).predict(X)

    # The template's steps (skdp.base.DPEstimatorMixin._private_fit): the
    # plan is the requested budget under ``composition``; everything else is
    # calibrated once the public size and dimension are known.
    def _validate_input(self, X, y=None):
        data = validate_fit_input(self, X, dtype=[np.float64, np.float32])
        if not data.chunked:
            data = data._replace(X=np.asarray(data.X, dtype=np.float64))
        if data.n_samples < self.n_components:
            raise ValueError(
                f"Expected n_samples >= n_components but got n_components = {self.n_components}, "
                f"n_samples = {data.n_samples}."
            )
        return data

    def _calibrate(self, data, plan):
        """The scale (declared ``data_norm``) and the noise multipliers of the whole fit."""
        n_features = data.n_features
        bounds = bounds_plan(self, plan.secure_noise, (data.n_samples, data.n_features))
        if bounds is not None:
            scale = None  # released in _fit_private
        elif self.data_norm == "nonprivate":
            warn_privacy_leak("data_norm", "the largest row norm")
            if data.chunked:
                scale = data.summary.max_norm
            else:
                scale = float(np.sqrt(np.max(np.einsum("ij,ij->i", data.X, data.X))))
            scale = scale if scale > 0 else 1.0
        else:
            scale = float(self.data_norm)
        self._check_budget_shares(n_features)
        em = EMPlan.for_estimator(self, n_features)
        z_init, z = self._calibrate_plan(em, bounds, plan.secure_noise)
        fitted = fitted_components(self, em, z, data.n_samples)
        if fitted < em.n_components:
            em = em.with_components(fitted, self.max_iter)
            z_init, z = self._calibrate_plan(em, bounds, plan.secure_noise)
        multipliers = tuple(z * w for w in em.noise_weights())
        settings = dict(scale=scale, noise_multiplier=z, multipliers=multipliers, bounds=bounds)
        return plan.with_settings(GaussianMixtureSettings(**settings, init_multiplier=z_init, em_plan=em))

    def _calibrate_plan(self, em, bounds, secure_noise):
        """``(z_init, z)``: the histogram start's multiplier and the EM plan's, the bounds' events in front."""
        z_init = em.calibrate_init(self.init_budget, self.epsilon, self.delta, self.composition, secure_noise)
        init_events = em.init_events(z_init)
        z = calibrate_after_bounds(
            lambda z: init_events + em.events(z),
            bounds,
            self.epsilon,
            self.delta,
            self.composition,
            self._neighbouring,
            secure_noise=secure_noise,
        )
        return z_init, z

    def _fit_private(self, data, plan, rng, ledger):
        """``max_iter`` iterations of DP-EM (Park et al. 2017, Alg. 1), every M-step released."""
        n_samples, n_features = data.n_samples, data.n_features
        settings = plan.settings
        scale, z, multipliers = settings.scale, settings.noise_multiplier, settings.multipliers
        self.__dict__.pop("centre_", None)
        centre = None
        reduce = data.reduce
        if isinstance(plan.settings.bounds, HistogramBounds):
            centre, scale = release_box(
                self.epsilon, reduce, n_samples, n_features, plan.settings.bounds, rng, ledger
            )
        elif plan.settings.bounds is not None:
            centre, scale = private_centring(
                reduce, n_samples, n_features, plan.settings.bounds, rng, ledger
            )
        em = plan.settings.em_plan
        public_weights, public_means = public_start(
            self.weights_init, self.means_init, em.n_components, n_features, scale, centre
        )
        z_init = plan.settings.init_multiplier
        if z_init is not None:
            public_means = histogram_start(reduce, centre, scale, z_init, rng, ledger, plan=em)
        prior = niw_prior(
            n_features,
            self.weight_concentration_prior,
            self.mean_precision_prior,
            self.degrees_of_freedom_prior,
            self.covariance_prior,
        )

        if data.chunked:
            Xs = None
        else:
            Xs = clip_to_unit_ball(data.X if centre is None else data.X - centre, scale)
        weights, means, covariances = random_start(
            rng, em.n_components, n_features, self.covariance_type, public_weights, public_means
        )
        bounds = []
        tied = None
        for _ in range(em.n_iter):
            prec_chol = compute_precision_cholesky(covariances, self.covariance_type)
            params = (weights, means, prec_chol, self.covariance_type)
            if Xs is not None:
                stats = expected_statistics(Xs, None, *params)
            else:
                # One pass (one distributed reduction) per iteration; the
                # noise is added below, on the driver, to the global sums.
                stats = data.chunks.map_reduce(centred_expected_statistics, centre, scale, *params)
            # The tied model's total second moment is released once, then reused.
            weights, means, covariances, bound, tied = private_m_step(
                stats, n_samples, multipliers, prior, rng, ledger, em, self.estimator, self.reg_covar, tied
            )
            bounds.append(bound / n_samples - n_features * math.log(scale))

        self.noise_multiplier_ = z
        self.noise_multipliers_ = dict(zip(("weights", "means", "second_moments"), multipliers, strict=True))
        self.data_norm_ = scale
        if centre is not None:
            self.centre_ = centre
        self.n_iter_ = em.n_iter
        self.lower_bounds_ = bounds
        self.lower_bound_ = bounds[-1]
        self.converged_ = len(bounds) > 1 and abs(bounds[-1] - bounds[-2]) < self.tol
        self.n_components_fitted_ = em.n_components
        weights, means, covariances = copy_components(
            weights, means, covariances, self.n_components, self.covariance_type
        )
        self._set_parameters(weights, means, covariances, scale, centre)

    def _set_parameters(self, weights, means, covariances, scale, centre=None):
        """Fitted attributes in the user's original scale (and coordinates: ``+ centre``)."""
        self.weights_ = weights
        self.means_ = means * scale if centre is None else means * scale + centre
        self.covariances_ = covariances * scale**2
        self.precisions_cholesky_ = compute_precision_cholesky(self.covariances_, self.covariance_type)
        self.precisions_ = precisions_from_cholesky(self.precisions_cholesky_, self.covariance_type)

    # Post-processing of the released parameters.
    def _weighted_log_prob(self, X):
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        log_prob = estimate_log_gaussian_prob(X, self.means_, self.precisions_cholesky_, self.covariance_type)
        with np.errstate(divide="ignore"):
            return log_prob + np.log(self.weights_)

    def score_samples(self, X):
        """Log density of each row under the released mixture.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        log_prob : ndarray of shape (n_samples,)
        """
        from scipy.special import logsumexp

        return logsumexp(self._weighted_log_prob(X), axis=1)

    def score(self, X, y=None):
        """Mean log density of the rows of ``X`` (higher is better).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        log_likelihood : float
        """
        return float(np.mean(self.score_samples(X)))

    def predict_proba(self, X):
        """Posterior probability of each component for each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        resp : ndarray of shape (n_samples, n_components)
        """
        from scipy.special import logsumexp

        weighted = self._weighted_log_prob(X)
        return np.exp(weighted - logsumexp(weighted, axis=1, keepdims=True))

    def predict(self, X):
        """Most probable component of each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return self._weighted_log_prob(X).argmax(axis=1)

    def sample(self, n_samples=1):
        """Draw synthetic rows from the released mixture (free: post-processing).

        Parameters
        ----------
        n_samples : int, default=1

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
        y : ndarray of shape (n_samples,)
            Component of each row.
        """
        check_is_fitted(self)
        if not (isinstance(n_samples, (int, np.integer)) and n_samples >= 1):
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}.")
        # Never the fit's noise stream (whose draws would correlate the
        # synthetic rows with the noise): see ``random_state``.
        rng = self._generator_after_fit()
        return sample_mixture(
            rng, n_samples, self.weights_, self.means_, self.covariances_, self.covariance_type
        )

    def _n_parameters(self):
        k, d = self.means_.shape
        cov_params = {"full": k * d * (d + 1) / 2.0, "tied": d * (d + 1) / 2.0, "spherical": k}[
            self.covariance_type
        ]
        return int(cov_params + k * d + k - 1)

    def bic(self, X):
        """Bayesian information criterion of the released model on ``X`` (lower is better).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        bic : float
        """
        n = np.shape(X)[0]
        return -2 * self.score(X) * n + self._n_parameters() * np.log(n)

    def aic(self, X):
        """Akaike information criterion of the released model on ``X`` (lower is better).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        aic : float
        """
        return -2 * self.score(X) * np.shape(X)[0] + 2 * self._n_parameters()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        return tags
