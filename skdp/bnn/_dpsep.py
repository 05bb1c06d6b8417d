"""DPSEPRegressor: differentially private stochastic EP for Bayesian neural networks."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, NamedTuple

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._random import check_generator
from ..base import (
    PRIVACY_PARAMETER_CONSTRAINTS,
    DPEstimatorMixin,
    PrivacyPlan,
    private_fit_context,
)
from ..privacy import (
    REPLACE_ONE,
    ExponentialMechanism,
    GaussianMechanism,
    LaplaceMechanism,
    PureDPEvent,
    SubsampledGaussianEvent,
    calibrate_noise_multiplier,
)
from ..privacy.calibration import pld_interval_for
from ..privacy.clipping import clip_box
from ..privacy.dpsgd import poisson_batch_indices
from ..privacy.ledger import COMPOSITION_CONSTRAINT, accountant_for
from ..privacy.mechanisms.subsampled import SubsampledGaussianMechanism
from ..privacy.quantiles import (
    calibrate_histogram_bounds,
    quantile_epsilon,
)
from ._bounds import (
    _AUTO_BOUNDS_FAILURE,  # noqa: F401 (tests read it here)
    _bounds_locatable,  # noqa: F401
    auto_bound_levels,  # noqa: F401
    auto_bounds_layout,
    constant_model,
    standardise,
    warn_fallback,
)
from ._pbp import forward_moments, gaussian_log_z, layer_shapes, split_layers
from ._sep import (
    SiteWorkspace,
    clip_l2,
    clipped_sum,
    factor_sensitivity,
    from_natural,
    release_scaling,
    sep_sites,
    stationary_noise,
    to_natural,
)

#: Floors of the cavity/posterior projection for the noise-precision Gamma:
#: ``alpha > 1`` keeps the noise variance ``beta / (alpha - 1)`` finite.
_MIN_ALPHA = 2.0
#: Range of the expected noise variance ``beta / (alpha - 1)`` on standardised
#: targets (whose variance is at most about 1).
_NOISE_VARIANCE_BOUNDS = (1e-4, 1.0)
#: Bound on the posterior means in prior standard deviations: with noise, a
#: precision raised to its floor can turn ``m / v`` into an absurd mean.
_MAX_ABS_MEAN = 10.0
#: Relative precision of the noise calibration (the multiplier is rounded up).
_CALIBRATION_RTOL = 1e-3
#: Weight of the ``-beta`` coordinate in the clipped and released vector
#: (``D`` in :func:`~skdp.bnn._sep.release_scaling`): the rate of the noise
#: Gamma is small on standardised targets and would drown in the noise.
_RATE_SCALE = 10.0
#: The posterior mean of a weight divides its natural mean by a precision of
#: at least the prior's plus this many noise standard deviations of the
#: precision (``"dp"`` only; see :func:`~skdp.bnn._sep.from_natural`).
_MEAN_FLOOR_SIGMAS = 2.0
#: Fraction of the last steps whose released factors are averaged.
_AVERAGED_FRACTION = 0.5


def dpsep_n_steps(n_samples, n_epochs, batch_size):
    """Number of SEP steps (releases): ``ceil(T N / B)``, ``T N`` for ``B = 1``.

    A function of the public ``N`` (replace-one neighbours) and the
    hyperparameters only; with Poisson batches ``T`` counts epochs in
    expectation (``N / B`` batches of expected size ``B`` visit every record
    once in expectation).
    """
    return max(1, -(-n_epochs * n_samples // batch_size))


def _planned_events(
    noise_multiplier,
    n_samples,
    n_epochs,
    batch_size,
    sampling="poisson",
    n_bound_releases=0,
    bound_epsilon=None,
    sensitivity=None,
    extra_events=(),
):
    """Privacy events of one DP-SEP fit at ``noise_multiplier`` (the plan handed to the calibrator).

    Every step draws its batch independently of the other steps and of the
    data, at sampling rate ``q = B / N`` (``B = batch_size``), and releases
    the factor with Gaussian noise: ``ceil(T N / B)`` subsampled Gaussian
    mechanisms under replace-one neighbours (Proposition 2), whose noise
    multiplier is the noise std over the replace-one sensitivity
    ``2 gamma C / N`` of the factor.  ``sampling="poisson"``: every record
    enters the batch independently with probability ``q`` (accounted by the
    ``"pld"`` accountant with the replace-one dominating pair of Poisson
    subsampling, Zhu, Dong & Wang 2022).  ``"without_replacement"``: exactly
    ``B`` records drawn uniformly without replacement (Wang, Balle &
    Kasiviswanathan 2019's RDP bound).  ``B = 1`` without replacement is
    Algorithm 3's one datapoint per step.

    ``"auto"`` bounds come first: ``n_bound_releases`` exponential-mechanism
    quantiles (two per column with ``feature_bounds="auto"``, two for
    ``target_bounds="auto"``), one :class:`~skdp.privacy.PureDPEvent` of
    ``bound_epsilon`` each, whatever ``noise_multiplier`` is: the
    calibration then fits the Gaussian noise to what they leave.
    ``extra_events`` (the ``"histogram"`` layout's feature histograms,
    :func:`~skdp.bnn._bounds.auto_bounds_layout`) come first of all, in the
    order the fit releases them.

    With ``sensitivity`` (the factor's, :func:`~skdp.bnn._sep.factor_sensitivity`)
    the steps' multiplier is the one the fit's mechanism will record for
    noise std ``noise_multiplier * sensitivity`` (``scale / sensitivity``
    under its own relation, then converted), which can differ from
    ``noise_multiplier`` in the last bit: the calibration then costs the very
    event the ledger composes, and the ledger finds its PLD built.
    """
    if sensitivity is not None:
        scale = noise_multiplier * sensitivity
        if sampling == "poisson":
            # Recorded under add/remove at half the sensitivity, converted to replace-one.
            noise_multiplier = scale / (sensitivity / 2.0) / 2
        else:
            noise_multiplier = scale / sensitivity
    events = list(extra_events)
    if n_bound_releases:
        events.append(PureDPEvent(count=n_bound_releases, neighbouring=REPLACE_ONE, epsilon=bound_epsilon))
    events.append(
        SubsampledGaussianEvent(
            count=dpsep_n_steps(n_samples, n_epochs, batch_size),
            neighbouring=REPLACE_ONE,
            noise_multiplier=noise_multiplier,
            sampling_rate=batch_size / n_samples,
            sampling=sampling,
        )
    )
    return events


def dpsep_noise_multiplier(
    n_samples,
    n_epochs,
    batch_size,
    epsilon,
    delta,
    composition="pld",
    sampling="poisson",
    n_bound_releases=0,
    bound_epsilon=None,
    sensitivity=None,
    pld_interval=None,
    extra_events=(),
):
    """Noise multiplier meeting ``(epsilon, delta)`` for :func:`_planned_events`.

    With ``"auto"`` bounds the plan includes their pure-DP events at the
    fixed ``bound_epsilon``: the multiplier is calibrated for the composition
    of both (under ``"pld"``, tighter than giving the steps what a basic
    split would leave them).

    The subsampled curves take up to seconds and a grid search refits with
    the same ``(N, T, B, epsilon, delta)`` many times: the calibration caches
    plan costs itself (:func:`skdp.privacy.calibrate_noise_multiplier`, keyed
    by the events).  ``pld_interval``: the PLD grid the plan is costed on
    (:func:`~skdp.privacy.calibration.pld_interval_for`; None: ``1e-4``),
    the one the fit's ledger then composes on.
    """
    return calibrate_noise_multiplier(
        functools.partial(
            _planned_events,
            n_samples=n_samples,
            n_epochs=n_epochs,
            batch_size=batch_size,
            sampling=sampling,
            n_bound_releases=n_bound_releases,
            bound_epsilon=bound_epsilon,
            sensitivity=sensitivity,
            extra_events=tuple(extra_events),
        ),
        epsilon,
        delta,
        composition=composition,
        neighbouring=REPLACE_ONE,
        rtol=_CALIBRATION_RTOL,
        pld_interval=pld_interval,
    )


def resolve_batch_size(batch_size, n_samples, mechanism="dp"):
    """``B``: for ``"auto"``, ``ceil(sqrt(N))`` with clipping and 1 for plain SEP.

    Plain SEP's sites are unbounded: summing many of them against one stale
    cavity can overshoot, so ``mechanism="none"`` keeps Algorithm 2's one
    datapoint per step unless asked otherwise.
    """
    if batch_size == "auto":
        if mechanism == "none":
            return 1
        return max(1, min(n_samples, math.ceil(math.sqrt(n_samples))))
    return int(batch_size)


#: Width of the hidden layer a default (``hidden_layer_sizes="auto"``) network gets.
_AUTO_WIDTH = 50
#: Rows times epsilon per weight of that network below which the default is linear.
_AUTO_ROWS_EPSILON_PER_WEIGHT = 200.0


def auto_hidden_layer_sizes(n_samples, n_features, epsilon, mechanism="dp"):
    """Hidden layers of ``hidden_layer_sizes="auto"``: one layer of 50, or none (linear), from ``n epsilon``.

    The noise left in the released factor, against the factor's own size,
    falls with ``n epsilon`` and grows with the number of weights ``P``
    (the released vector has ``2 P + 2`` coordinates, each datapoint's
    clipped site spreads its norm ``C`` over all of them).  Measured at
    epsilon = 1 (``docs/bnn.md``): with ``P = 601`` (10 features, 50
    hidden units) the private network reaches the linear model's R^2 at
    ``n = 9,000`` and stays below it at 3,750 and 331 rows (friedman1,
    diabetes), so below ``n epsilon = 200 P`` (about 10 times the largest
    measured ``n epsilon`` at which it does not beat the linear model) the
    default is Bayesian linear regression (``P = d + 1``), the model whose
    few weights the noise leaves readable.  A function of the public ``n``
    (replace-one), ``d`` and epsilon only.  The non-private modes keep the
    hidden layer.
    """
    hidden = (_AUTO_WIDTH,)
    if mechanism != "dp":
        return hidden
    n_weights = sum(a * b for a, b in layer_shapes(n_features, hidden))
    if n_samples * epsilon >= _AUTO_ROWS_EPSILON_PER_WEIGHT * n_weights:
        return hidden
    return ()


class _TrainingPairs(NamedTuple):
    """DP-SEP's validated training pairs, in memory (every step samples rows at random)."""

    X: np.ndarray
    y: np.ndarray
    n_samples: int
    n_features: int


# What a fitted model holds (``docs/guarantee.md``, "What a fitted model
# holds"): the posterior approximation, read off the released (noisy)
# average factor ``factor_natural_params_``; the standardisation, from the
# declared or ``"auto"`` (released, on the ledger) ``feature_bounds_``/
# ``target_bounds_`` (or, with ``None``, from the data with a
# ``PrivacyLeakWarning``); and the plan
# (``batch_size_``, ``n_iter_``, ``noise_multiplier_``, ``noise_scale_``),
# a function of hyperparameters and the size n, public under replace-one.
_RELEASED_ATTRIBUTES = frozenset(
    {
        "factor_natural_params_",
        "coefs_mean_",
        "coefs_var_",
        "noise_shape_",
        "noise_rate_",
        "x_center_",
        "x_scale_",
        "y_center_",
        "y_scale_",
        "batch_size_",
        "hidden_layer_sizes_",
        "n_iter_",
        "noise_multiplier_",
        "noise_scale_",
        "feature_bounds_",
        "target_bounds_",
    }
)


_PARAMETER_CONSTRAINTS = {
    **PRIVACY_PARAMETER_CONSTRAINTS,
    "hidden_layer_sizes": [tuple, list, StrOptions({"auto"})],
    "n_epochs": [Interval(Integral, 1, None, closed="left")],
    "batch_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
    "damping": [Interval(Real, 0, None, closed="neither")],
    "clip_norm": [Interval(Real, 0, None, closed="neither")],
    "mechanism": [StrOptions({"dp", "clipped", "none"})],
    "prior_variance": [Interval(Real, 0, None, closed="neither")],
    "noise_prior": [tuple, list],
    "feature_bounds": [tuple, list, StrOptions({"auto", "nonprivate"})],
    "target_bounds": [tuple, list, StrOptions({"auto", "nonprivate"})],
    "bounds_budget": [Interval(Real, 0, 1, closed="neither")],
    "composition": [COMPOSITION_CONSTRAINT],
    "sampling": [StrOptions({"poisson", "without_replacement"})],
}


@dataclass(frozen=True)
class SEPSettings:
    """:class:`DPSEPRegressor`'s plan, from the public ``N`` and the parameters (its ``_calibrate``).

    Attributes
    ----------
    fallback : bool
        Whether the fit is the data-free fallback (a constant prediction):
        the declared bounds' quantiles cannot be located at this ``N``.
    pooled_bounds : bool
        Whether the features share one private box ``[-S, S]`` (the
        per-column quantiles cannot be located at this ``N``).
    hidden_layer_sizes : tuple of int
        The network's hidden layers (``()`` for the fallback).
    bound_epsilon : float or None
        Budget of each private quantile of the bounds (None: declared).
    batch_size : int
        Rows per SEP step.
    n_steps : int
        Number of SEP steps (Algorithm 3).
    noise_multiplier : float or None
        Gaussian noise multiplier of each released factor (``"dp"``).
    sensitivity : float
        L2 sensitivity of a factor update (clip bound and damping).
    pld_interval : float or None
        Grid step of the PLD the noise was calibrated on and the ledger
        composes on (:func:`~skdp.privacy.calibration.pld_interval_for` of
        the public epsilon; None: dp-accounting's ``1e-4``).
    feature_histogram : HistogramBounds or None
        The ``"histogram"`` layout's plan of the feature box (else None).
    """

    fallback: bool
    pooled_bounds: bool
    hidden_layer_sizes: tuple
    bound_epsilon: float | None
    batch_size: int
    n_steps: int
    noise_multiplier: float | None
    sensitivity: float
    pld_interval: float | None = None
    feature_histogram: Any = None


def sep_loop(est, X, y, theta_f, theta_0, shapes, floors, batch_size, n_steps, rng, release):
    """The SEP loop of :class:`DPSEPRegressor` ``est`` (Algorithm 3, one batch per step).

    ``release`` is None without noise.  A function of the estimator's public
    parameters (``mechanism``, ``damping``, ``sampling``, ``clip_norm``) and
    of the fit's arrays, outside the class as the mixture's releases are.

    The loop works on ``u = D theta_f`` (:func:`~skdp.bnn._sep.release_scaling`):
    sites are clipped, and the factor released, in that space.  Returns
    the average of the factors released over the last steps.
    """
    n_samples = X.shape[0]
    clip = est.mechanism != "none"
    step = est.damping / n_samples
    keep = 1.0 - step * batch_size
    scale = release_scaling(theta_f.size, _RATE_SCALE)
    u = theta_f * scale
    average, n_averaged = np.zeros_like(u), 0
    first_averaged = n_steps - max(1, int(_AVERAGED_FRACTION * n_steps))
    poisson = est.sampling == "poisson"
    rate = batch_size / n_samples
    workspace = SiteWorkspace()  # the batch's arrays, reused by every step
    theta = np.empty_like(u)  # theta_f = D^-1 u, the factor every step's sites are formed against
    for t in range(n_steps):
        # Each step's batch is drawn independently of the data and of the
        # other steps, as the sampling scheme the accounting relies on says.
        if poisson:
            idx = poisson_batch_indices(n_samples, rate, rng)
        else:
            idx = rng.choice(n_samples, size=batch_size, replace=False)
        if idx.size:
            sites, norms = sep_sites(
                np.divide(u, scale, out=theta),
                theta_0,
                n_samples,
                X.take(idx, axis=0),
                y.take(idx),
                shapes,
                floors,
                scale,
                with_norms=True,
                workspace=workspace,
            )
            site_sum = clipped_sum(sites, est.clip_norm, norms) if clip else sites.sum(axis=0)
        else:
            # An empty Poisson batch: the step still damps and releases.
            site_sum = np.zeros_like(u)
        # SEP's f <- f^(1 - gamma B / N) prod_n f_n^(gamma / N), divided by
        # the public N (never the realised batch size): a replaced
        # datapoint moves the new factor by at most 2 gamma C / N.
        u = keep * u + step * site_sum
        if release is not None:
            u = release(u)
        if clip:
            u = clip_l2(u, est.clip_norm)
        if t >= first_averaged:
            # Polyak averaging of released factors: post-processing.
            n_averaged += 1
            average += (u - average) / n_averaged
    return average / scale


class DPSEPRegressor(DPEstimatorMixin, RegressorMixin, BaseEstimator):
    """Differentially private stochastic EP for Bayesian neural-network regression.

    A Bayesian neural network with ReLU hidden layers, factorised Gaussian
    posteriors over the weights and a Gamma posterior over the precision of
    the Gaussian output noise, fitted by stochastic expectation propagation
    (SEP; Li et al. 2015) with the moment matching of probabilistic
    backpropagation (PBP; Hernandez-Lobato & Adams 2015), made private as in
    DP-SEP (Vinaroz & Park, Algorithm 3).  The posterior is ``q = p0 f^N``
    (Eq. 2) with one average site ``f``; each step draws a batch at rate
    ``B / N``, clips every datapoint's site to L2 norm ``C = clip_norm``,
    damps ``theta_f <- (1 - gamma B/N) theta_f + (gamma/N) sum_n theta_fn``
    (divided by the public ``N``, never the realised batch size) and
    (``mechanism="dp"``) releases ``theta_f`` with Gaussian noise of standard
    deviation ``sigma * 2 gamma C / N`` (Algorithm 3, line 8; Proposition 1),
    clipped to norm ``C`` again.  The fitted posterior is ``p0 fbar^N`` for
    the average ``fbar`` of the factors released over the last half of the
    steps.  ``mechanism="clipped"`` (no noise) and ``"none"`` (plain SEP) are
    not private.  ``hidden_layer_sizes=()`` is Bayesian linear regression.

    ``privacy_spent_`` refers to **replace-one** neighbours (``N`` public):
    the steps are one :class:`~skdp.privacy.SubsampledGaussianEvent` (plus two
    :class:`~skdp.privacy.PureDPEvent` per ``"auto"`` bounds column, or one for a
    shared feature box, released first by the exponential mechanism), and ``sigma`` is calibrated for
    their composition.  Everything released afterwards is post-processing.

    Read more in the :doc:`User Guide </bnn>`: the model, the privacy
    argument and sensitivity table, the ``"auto"`` defaults and their
    data-free fallback, the deviations from the paper, and every parameter
    and attribute in detail.

    Parameters
    ----------
    hidden_layer_sizes : tuple of int or "auto", default="auto"
        Width of each ReLU hidden layer (``()``: linear); ``"auto"`` chooses
        from ``n * epsilon`` (:func:`auto_hidden_layer_sizes`).
    n_epochs : int, default=40
        Passes ``T`` (in expectation); the fit makes ``ceil(T * N / B)`` steps.
    batch_size : int or "auto", default="auto"
        ``B``, datapoints per step (expected, for Poisson batches); ``"auto"``
        is ``ceil(sqrt(N))``, or 1 for ``"none"``.
    damping : float, default=1.0
        ``gamma``: each datapoint moves the factor by ``gamma / N``
        (``gamma * B <= N``).
    clip_norm : float, default=1.0
        ``C``, the L2 bound on every site and on the factor, in the release
        space (the ``-beta`` coordinate weighted 10).
    epsilon : float, default=1.0
        Privacy budget (``mechanism="dp"``).
    delta : float, default=1e-5
        Privacy budget; must be positive for ``"dp"``.
    mechanism : {"dp", "clipped", "none"}, default="dp"
        DP-SEP, SEP with clipping only, or plain SEP.
    prior_variance : float, default=1.0
        Variance of the Gaussian prior of every weight (prior means: zero in
        the output layer, ``N(0, 1)`` draws in the hidden layers).
    noise_prior : tuple of (float, float), default=(6.0, 6.0)
        Shape and rate of the Gamma prior of the noise precision.
    feature_bounds : tuple (lower, upper), "auto" or "nonprivate", default="auto"
        Public bounds of the features (clipped to them, mapped to ``[-1, 1]``);
        ``"auto"`` releases them privately; ``"nonprivate"`` leaks (warned).
    target_bounds : tuple (lower, upper), "auto" or "nonprivate", default="auto"
        Public bounds of the target, used the same way; predicted means are
        clipped to them.
    composition : {"pld", "rdp", "advanced", "basic", "zcdp"}, default="pld"
        Composition the noise is calibrated and accounted with (Poisson
        batches need ``"pld"``).
    accountant : BudgetAccountant, default=None
        Shared budget charged with ``privacy_spent_`` (``"dp"`` only).
    random_state : int, RandomState instance or None, default=None
        Seeds the hidden layers' prior means, the batches and the noise.
    secure_noise : bool or None, default=None
        Exact (grid) noise sampling; None follows :func:`skdp.set_config`.
        A secure setting makes a ``"dp"`` fit raise ``ValueError``.
    sampling : {"poisson", "without_replacement"}, default="poisson"
        How every step's batch is drawn: Poisson at rate ``B / N``, or ``B``
        datapoints without replacement (the paper's scheme).
    bounds_budget : float in (0, 1), default=0.5
        Share of epsilon spent on the ``"auto"`` bounds; too few rows for the
        per-column quantiles release one shared feature box instead
        (:func:`~skdp.bnn._bounds.auto_bounds_layout`), too few for that warns
        and falls back to a private constant.

    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features,)
        Defined when X has feature names that are all strings.
    coefs_mean_, coefs_var_ : list of ndarray
        Posterior mean and variance of each layer's weights, shape
        ``(n_out, n_in + 1)`` (bias last), on standardised data.
    noise_shape_, noise_rate_ : float
        Gamma posterior of the noise precision (standardised targets).
    factor_natural_params_ : ndarray of shape (2 * n_weights + 2,)
        Natural parameters ``[m / v, -1 / (2 v), alpha - 1, -beta]`` of the
        averaged released site ``fbar``.
    hidden_layer_sizes_ : tuple of int
        The hidden layers fitted.
    batch_size_ : int
        ``B`` used by the fit (expected size for Poisson batches).
    noise_multiplier_ : float or None
        ``sigma``: noise standard deviation over the sensitivity (``"dp"``).
    noise_scale_ : float or None
        Standard deviation of the noise per coordinate per release (``"dp"``).
    n_iter_ : int
        Number of SEP steps (0 for the constant fallback).
    feature_bounds_ : ndarray of shape (2, n_features) or None
        The box the features were clipped to (declared or released).
    target_bounds_ : ndarray of shape (2,) or None
        The same for the target.
    x_center_, x_scale_ : ndarray of shape (n_features,)
    y_center_, y_scale_ : float
        The standardisation of the features and the target.
    privacy_spent_ : PrivacySpent
        ``(epsilon, delta)`` under replace-one neighbours; ``(inf, 0.0)``
        for ``"clipped"`` and ``"none"``.

    Notes
    -----
    Deviations from the paper (SEP's damped update at rate ``gamma / N``,
    Poisson batches accounted by PLD, batches of ``B`` per release,
    independent draws, a weighted release space, a noise-aware projection,
    random prior means, Polyak averaging), each keeping the guarantee:
    :ref:`bnn-deviations`.

    See Also
    --------
    sklearn.linear_model.BayesianRidge : non-private Bayesian linear regression.
    sklearn.neural_network.MLPRegressor : non-private (point-estimate) network.

    References
    ----------
    M. Vinaroz, M. Park. Differentially private stochastic expectation
    propagation. arXiv:2111.13219.

    Y. Li, J. M. Hernandez-Lobato, R. E. Turner. Stochastic expectation
    propagation. NeurIPS 2015.

    J. M. Hernandez-Lobato, R. P. Adams. Probabilistic backpropagation for
    scalable learning of Bayesian neural networks. ICML 2015.

    Y.-X. Wang, B. Balle, S. Kasiviswanathan. Subsampled Renyi differential
    privacy and analytical moments accountant. AISTATS 2019.

    Y. Zhu, J. Dong, Y.-X. Wang. Optimal accounting of differential privacy
    via characteristic function. AISTATS 2022.

    V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi. Connect the
    dots: tighter discrete approximations of privacy loss distributions.
    PETS 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.bnn import DPSEPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(2000, 3))
    >>> y = X @ [1.0, -2.0, 0.5] + 0.1 * rng.normal(size=2000)
    >>> model = DPSEPRegressor(hidden_layer_sizes=(), n_epochs=5, epsilon=2.0,
    ...                        feature_bounds=(-1, 1), target_bounds=(-4, 4),
    ...                        random_state=0).fit(X, y)
    >>> bool(model.score(X, y) > 0.9)
    True
    >>> model.privacy_spent_.epsilon <= 2.0
    True
    """

    _released_attributes = _RELEASED_ATTRIBUTES
    _parameter_constraints = _PARAMETER_CONSTRAINTS

    def __init__(
        self,
        hidden_layer_sizes="auto",
        n_epochs=40,
        batch_size="auto",
        damping=1.0,
        clip_norm=1.0,
        epsilon=1.0,
        delta=1e-5,
        mechanism="dp",
        prior_variance=1.0,
        noise_prior=(6.0, 6.0),
        feature_bounds="auto",
        target_bounds="auto",
        composition="pld",
        accountant=None,
        random_state=None,
        secure_noise=None,
        sampling="poisson",
        bounds_budget=0.5,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.n_epochs = n_epochs
        self.batch_size = batch_size
        self.damping = damping
        self.clip_norm = clip_norm
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.prior_variance = prior_variance
        self.noise_prior = noise_prior
        self.feature_bounds = feature_bounds
        self.target_bounds = target_bounds
        self.composition = composition
        self.accountant = accountant
        self.random_state = random_state
        self.secure_noise = secure_noise
        self.sampling = sampling
        self.bounds_budget = bounds_budget

    # -- the template's steps (skdp.base.DPEstimatorMixin._private_fit) ----------

    def _check_params(self):
        sizes = () if self._auto("hidden_layer_sizes") else tuple(self.hidden_layer_sizes)
        if not all(isinstance(h, Integral) and not isinstance(h, bool) and h >= 1 for h in sizes):
            raise ValueError(
                f"hidden_layer_sizes must be a tuple of positive integers, got {self.hidden_layer_sizes!r}."
            )
        prior = np.asarray(self.noise_prior, dtype=float)
        if prior.shape != (2,) or not np.all(np.isfinite(prior)) or np.any(prior <= 0):
            raise ValueError(f"noise_prior must be a pair of positive numbers, got {self.noise_prior!r}.")
        if self.mechanism == "dp":
            if self.delta <= 0:
                raise ValueError("delta must be positive for mechanism='dp' (Gaussian noise).")
            # The plan's event type is known before N is: refuse an accountant
            # with no rule for it now, before anything is reserved (RDP has no
            # curve for a Poisson-subsampled Gaussian under replace-one).
            probe = _planned_events(1.0, n_samples=2, n_epochs=1, batch_size=1, sampling=self.sampling)
            try:
                accountant_for(probe, self.composition)
            except ValueError:
                remedy = (
                    "use composition='rdp' (or 'pld', which composes these batches by RDP)"
                    if self.sampling == "without_replacement"
                    else "use composition='pld' (or sampling='without_replacement' for 'rdp')"
                )
                raise ValueError(
                    f"composition={self.composition!r} cannot account DP-SEP's {self.sampling!r} batches "
                    f"under replace-one neighbours; {remedy}."
                ) from None
        elif self.accountant is not None:
            raise ValueError(
                f"accountant cannot be charged by mechanism={self.mechanism!r}, which is not private; "
                "use mechanism='dp'."
            )

    def _noise_mechanisms(self):
        # The subsampled Gaussian releases are sampled in floating point;
        # there is no exact sampler for them: the template refuses secure
        # noise before anything is reserved.
        if self.mechanism != "dp":
            return ()
        if self._n_bound_releases(1):
            # The data-free fallback's centre adds a Laplace mean (private_centre);
            # the "histogram" layout's feature histograms are Gaussian (Laplace at delta 0).
            return (ExponentialMechanism, LaplaceMechanism, GaussianMechanism, SubsampledGaussianMechanism)
        return (SubsampledGaussianMechanism,)

    def _auto(self, name):
        value = getattr(self, name)
        return isinstance(value, str) and value == "auto"

    def _nonprivate(self, name):
        value = getattr(self, name)
        return isinstance(value, str) and value == "nonprivate"

    def _n_bound_releases(self, n_features):
        """Quantiles released for ``"auto"`` bounds: two per feature column, two for the target."""
        return 2 * n_features * self._auto("feature_bounds") + 2 * self._auto("target_bounds")

    def _privacy_plan(self):
        # "clipped" and "none" are non-private reference runs of the same loop.
        return PrivacyPlan(self.epsilon, self.delta, self.composition, private=self.mechanism == "dp")

    def _validate_input(self, X, y):
        X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64)
        if X.shape[0] < 2:
            raise ValueError(f"DPSEPRegressor needs at least 2 samples, got n_samples = {X.shape[0]}.")
        return _TrainingPairs(X, y, *X.shape)

    def _check_public_input(self, X, y=None, **fit_params):
        # Under replace-one neighbours the number of rows N is public: the
        # parameters' checks against it run before the hold, so a fit they
        # refuse is charged nothing.
        shape = getattr(X, "shape", None)
        if shape is not None and len(shape) >= 1:
            self._check_size(int(shape[0]))
        elif isinstance(X, list | tuple):
            self._check_size(len(X))

    def _check_size(self, n_samples):
        """Refuse a batch size or a damping that the public ``N`` cannot carry; return the batch size."""
        if n_samples < 2:
            raise ValueError(f"DPSEPRegressor needs at least 2 samples, got n_samples = {n_samples}.")
        batch_size = resolve_batch_size(self.batch_size, n_samples, self.mechanism)
        if batch_size > n_samples:
            raise ValueError(f"batch_size={batch_size} exceeds n_samples = {n_samples}.")
        if self.damping * batch_size > n_samples:
            raise ValueError(
                f"damping (gamma) times the batch size must not exceed n_samples = {n_samples}: "
                f"the update rate is gamma B / N, got damping={self.damping}, batch size {batch_size}."
            )
        return batch_size

    def _calibrate(self, data, plan):
        """Batch size, steps and (``"dp"``) noise multiplier, from the public ``N``."""
        n_samples = data.n_samples
        batch_size = self._check_size(n_samples)  # already checked when X had a shape
        sigma = bound_epsilon = layout = histogram = None
        n_bound_releases = self._n_bound_releases(data.n_features)
        if n_bound_releases:
            # The bounds' declared share of epsilon, split evenly over their
            # releases (pure DP, composed by the basic theorem), per column
            # where that locates them, else one shared feature box
            # (auto_bounds_layout: public n, d and epsilon only); the
            # non-private runs take the same quantile levels.
            layout, n_bound_releases, bound_epsilon, histogram = auto_bounds_layout(
                n_samples,
                data.n_features,
                self._auto("feature_bounds"),
                self._auto("target_bounds"),
                lambda k: quantile_epsilon(
                    self.bounds_budget * self.epsilon, 0.0, k, "basic", plan.secure_noise
                ),
                # The features' histograms at a part of the share (and of
                # delta: Gaussian where delta > 0), their two releases costed
                # by the fit's composition; the steps are then calibrated to
                # what all the bounds' events leave.
                histogram=lambda part: calibrate_histogram_bounds(
                    self.epsilon,
                    self.delta,
                    data.n_features,
                    self.bounds_budget * part,
                    self.composition,
                    plan.secure_noise,
                ),
            )
        fallback = bool(n_bound_releases) and plan.private and layout is None
        pld_interval = None
        if fallback:
            warn_fallback(self, n_samples)
        elif plan.private:
            # Above epsilon 10 the plan is costed on a grid relative to the
            # public target (the core's rule), which the ledger then uses.
            pld_interval = pld_interval_for(self.epsilon) if self.composition == "pld" else None
            sigma = dpsep_noise_multiplier(
                n_samples,
                self.n_epochs,
                batch_size,
                self.epsilon,
                self.delta,
                self.composition,
                self.sampling,
                n_bound_releases,
                bound_epsilon,
                sensitivity=factor_sensitivity(self.clip_norm, self.damping, n_samples),
                pld_interval=pld_interval,
                extra_events=() if histogram is None else histogram.events(),
            )
        hidden = (
            auto_hidden_layer_sizes(n_samples, data.n_features, self.epsilon, self.mechanism)
            if self._auto("hidden_layer_sizes")
            else tuple(self.hidden_layer_sizes)
        )
        return plan.with_settings(
            SEPSettings(
                fallback=fallback,
                pooled_bounds=layout == "pooled",
                hidden_layer_sizes=() if fallback else hidden,
                bound_epsilon=bound_epsilon,
                feature_histogram=histogram,
                batch_size=batch_size,
                n_steps=dpsep_n_steps(n_samples, self.n_epochs, batch_size),
                noise_multiplier=sigma,
                sensitivity=factor_sensitivity(self.clip_norm, self.damping, n_samples),
                pld_interval=pld_interval,
            )
        )

    def _fit_constant(self, data, plan, rng, ledger):
        """The data-free fallback: a constant prediction, the target's private centre (see :func:`private_centre`)."""
        fitted = constant_model(data, self, plan.settings.batch_size, rng, ledger)
        for name, value in fitted.items():
            setattr(self, name, value)

    # -- fit ---------------------------------------------------------------

    @private_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Run (DP-)SEP on ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : DPSEPRegressor
        """
        return self._private_fit(X, y)

    def _fit_private(self, data, plan, rng, ledger):
        """Algorithm 3: ``n_iter_`` SEP steps, each factor released (``"dp"``) or not."""
        if plan.settings.fallback:
            self._fit_constant(data, plan, rng, ledger)
            return
        n_samples = data.n_samples
        s = plan.settings
        batch_size, n_steps, sigma, sensitivity = s.batch_size, s.n_steps, s.noise_multiplier, s.sensitivity
        if ledger is not None:
            # Before the first release: the ledger composes on the grid the
            # noise was calibrated on (None: the default grid).
            ledger.pld_interval = s.pld_interval
        box = standardise(
            data.X,
            data.y,
            self.feature_bounds,
            self.target_bounds,
            self.mechanism == "dp",
            plan.settings.bound_epsilon,
            rng,
            ledger,
            pooled=plan.settings.pooled_bounds,
            histogram=plan.settings.feature_histogram,
            epsilon=self.epsilon,
        )
        Xs, ys = box.X, box.y
        self.feature_bounds_, self.target_bounds_ = box.feature_bounds, box.target_bounds
        self.x_center_, self.x_scale_, self.y_center_, self.y_scale_ = box[4:]

        self.hidden_layer_sizes_ = plan.settings.hidden_layer_sizes
        shapes = layer_shapes(data.n_features, self.hidden_layer_sizes_)
        n_weights = sum(a * b for a, b in shapes)
        # Data-independent start: random prior means for the hidden layers
        # (they break the symmetry between hidden units, as PBP's random
        # initial means do, but survive the noise), zero for the output
        # layer, and q = p0 (theta_f = 0).
        prior_mean = rng.normal(size=n_weights)
        prior_mean[n_weights - shapes[-1][0] * shapes[-1][1] :] = 0.0
        noise_prior = np.asarray(self.noise_prior, dtype=float)
        theta_0 = to_natural(prior_mean, np.full(n_weights, self.prior_variance), *noise_prior)
        theta_f = np.zeros_like(theta_0)

        rate = self.damping * batch_size / n_samples
        mean_precision = 0.0
        if plan.private:
            # Released noise left in N theta_f, times 2 for the precision.
            precision_noise = 2.0 * n_samples * stationary_noise(sigma * sensitivity, rate)
            mean_precision = 1.0 / self.prior_variance + _MEAN_FLOOR_SIGMAS * precision_noise
        floors = (
            1.0 / self.prior_variance,
            _MIN_ALPHA,
            _NOISE_VARIANCE_BOUNDS,
            _MAX_ABS_MEAN * math.sqrt(self.prior_variance),
            mean_precision,
            prior_mean,
        )
        run = functools.partial(
            sep_loop, self, Xs, ys, theta_f, theta_0, shapes, floors, batch_size, n_steps, rng
        )
        self.batch_size_ = batch_size
        self.noise_multiplier_ = self.noise_scale_ = None
        if plan.private:
            if self.sampling == "poisson":
                # The core describes a Poisson mechanism under add/remove:
                # one site in or out of the batch moves the factor by
                # gamma C / N (N the public constant of the update), half the
                # replace-one sensitivity.  The fit's replace-one ledger
                # records the same mechanism at multiplier sigma
                # (SubsampledGaussianEvent.to_relation), which "pld" accounts
                # with dp-accounting's REPLACE_ONE pair.
                mech_sensitivity = sensitivity / 2.0
            else:
                mech_sensitivity = sensitivity
            mech = SubsampledGaussianMechanism(
                mech_sensitivity,
                sigma * sensitivity,
                sampling_rate=batch_size / n_samples,
                sampling=self.sampling,
            )
            self.noise_multiplier_, self.noise_scale_ = float(sigma), mech.scale
            with mech.session(rng, ledger) as release:
                theta_f = run(release)
        else:
            theta_f = run(None)

        self.factor_natural_params_ = theta_f
        m, v, alpha, beta = from_natural(theta_0 + n_samples * theta_f, *floors)
        self.coefs_mean_ = [a.copy() for a in split_layers(m, shapes)]
        self.coefs_var_ = [a.copy() for a in split_layers(v, shapes)]
        self.noise_shape_, self.noise_rate_ = float(alpha), float(beta)
        self.n_iter_ = n_steps

    # -- prediction ----------------------------------------------------------

    def _standardise_X(self, X):
        X = validate_data(self, X, reset=False, dtype=np.float64)
        if self.feature_bounds_ is not None:
            X = clip_box(X, *self.feature_bounds_)
        return (X - self.x_center_) / self.x_scale_

    def _predictive(self, X):
        check_is_fitted(self)
        Xs = self._standardise_X(X)
        mean, var = forward_moments(Xs, self.coefs_mean_, self.coefs_var_)
        var = var + self.noise_rate_ / (self.noise_shape_ - 1.0)
        mean = mean * self.y_scale_ + self.y_center_
        if self.target_bounds_ is not None:
            # The target was clipped to its bounds (declared or released): so is its mean.
            mean = clip_box(mean, *self.target_bounds_)
        return mean, np.sqrt(var) * self.y_scale_

    def predict(self, X, return_std=False):
        """Posterior predictive mean (and standard deviation) of the target.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation of the predictive
            distribution of ``y`` (weight uncertainty propagated by PBP's
            moment matching plus the expected noise variance
            ``beta / (alpha - 1)``).

        Returns
        -------
        y_mean : ndarray of shape (n_samples,)
        y_std : ndarray of shape (n_samples,), only if ``return_std``
        """
        mean, std = self._predictive(X)
        if return_std:
            return mean, std
        return mean

    def log_likelihood(self, X, y):
        """Average test log-likelihood under the Gaussian predictive (paper, Table 3).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        ll : float
            ``mean_i log N(y_i | mean_i, var_i)`` in the units of ``y``.
        """
        mean, std = self._predictive(X)
        y = np.asarray(y, dtype=float).ravel()
        if y.shape != mean.shape:
            raise ValueError(f"y has {y.size} values but X has {mean.size} rows.")
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinity.")
        return float(np.mean(gaussian_log_z(y, mean, std * std)))

    def sample_posterior(self, n_samples=1, random_state=None):
        """Draw weight vectors from the (privatised) posterior; free post-processing.

        Parameters
        ----------
        n_samples : int, default=1
        random_state : int, RandomState instance or None, default=None

        Returns
        -------
        weights : list of ndarray
            One array per layer, shape ``(n_samples, n_out, n_in + 1)``,
            acting on standardised inputs and targets.
        noise_precision : ndarray of shape (n_samples,)
            Draws of the noise precision (standardised targets).
        """
        check_is_fitted(self)
        if not (isinstance(n_samples, Integral) and n_samples >= 1):
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}.")
        rng = check_generator(random_state)
        weights = [
            m + np.sqrt(v) * rng.standard_normal((n_samples, *m.shape))
            for m, v in zip(self.coefs_mean_, self.coefs_var_, strict=True)
        ]
        tau = rng.gamma(self.noise_shape_, 1.0 / self.noise_rate_, size=n_samples)
        return weights, tau

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Gaussian noise at epsilon=1 on the checks' small data sets costs
        # accuracy by design.
        tags.regressor_tags.poor_score = self.mechanism == "dp"
        return tags
