"""DPSEPRegressor: differentially private stochastic EP for Bayesian neural networks."""

from __future__ import annotations

import functools
import math
import warnings
from numbers import Integral, Real
from typing import NamedTuple

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
    warn_privacy_leak,
)
from ..privacy import (
    REPLACE_ONE,
    ExponentialMechanism,
    LaplaceMechanism,
    PureDPEvent,
    SubsampledGaussianEvent,
    calibrate_noise_multiplier,
)
from ..privacy.clipping import clip_box
from ..privacy.dpsgd import poisson_batch_indices
from ..privacy.ledger import COMPOSITION_CONSTRAINT, accountant_for
from ..privacy.mechanisms.subsampled import SubsampledGaussianMechanism
from ..privacy.quantiles import (
    AUTO_BOUNDS_QUANTILES,
    check_grid,
    private_box,
    private_quantiles,
    quantile_epsilon,
    rank_counts,
    rank_margin,
)
from ._pbp import forward_moments, gaussian_log_z, layer_shapes, split_layers
from ._sep import (
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
    events = []
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
):
    """Noise multiplier meeting ``(epsilon, delta)`` for :func:`_planned_events`.

    With ``"auto"`` bounds the plan includes their pure-DP events at the
    fixed ``bound_epsilon``: the multiplier is calibrated for the composition
    of both (under ``"pld"``, tighter than giving the steps what a basic
    split would leave them).

    The subsampled curves take up to seconds and a grid search refits with
    the same ``(N, T, B, epsilon, delta)`` many times: the calibration caches
    plan costs itself (:func:`skdp.privacy.calibrate_noise_multiplier`, keyed
    by the events).
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
        ),
        epsilon,
        delta,
        composition=composition,
        neighbouring=REPLACE_ONE,
        rtol=_CALIBRATION_RTOL,
    )


#: Probability, per released quantile, that the exponential mechanism picks a
#: cell on the wrong side of all the data (see :func:`auto_bound_levels`).
_AUTO_BOUNDS_FAILURE = 0.01
#: Largest quantile level of the ``"auto"`` bounds (the quartiles).
_MAX_AUTO_LEVEL = 0.25


def auto_bound_levels(n_samples, bound_epsilon, n_candidates):
    """Quantile level ``q`` of the ``"auto"`` bounds (released at ``q`` and ``1 - q``) and their widening.

    The exponential mechanism over ``K = n_candidates`` grid cells gives a
    cell outside the data (rank distance ``q n`` from the ``q``-quantile)
    weight ``exp(-epsilon q n / 2)`` against at least 1 for the right cell,
    so it lands outside with probability at most ``K exp(-epsilon q n / 2)``
    (McSherry & Talwar 2007).  ``q`` is the smallest level keeping that below
    ``beta = 0.01``, ``q = 2 log(K / beta) / (epsilon n)``
    (:func:`skdp.privacy.quantiles.rank_margin`), and at least the
    core's 1st percentile (:data:`~skdp.privacy.quantiles.AUTO_BOUNDS_QUANTILES`),
    at most 0.25 (the quartiles; a level above that warns: the data is too
    small for the budget).  The released ``[a, b]`` then holds about ``1 - 2 q`` of
    each column; it is widened about its centre by ``1 / (1 - 2 q)``, which
    restores the full range of a uniform column (the declared examples'
    case).  A function of public quantities only (``n`` is public under
    replace-one); the widening is post-processing.

    Returns
    -------
    q : float
    widening : float
    """
    q = rank_margin(n_samples, bound_epsilon, n_candidates, _AUTO_BOUNDS_FAILURE)
    if q > _MAX_AUTO_LEVEL:
        # Public quantities only (n, epsilon, the grid): nothing about the data.
        warnings.warn(
            f"feature_bounds/target_bounds='auto': {n_samples} rows at {bound_epsilon:.3g} epsilon per "
            "quantile are too few for the exponential mechanism to locate the bounds reliably; "
            "declare the bounds, or raise bounds_budget or epsilon.",
            UserWarning,
            stacklevel=4,
        )
    q = min(max(q, AUTO_BOUNDS_QUANTILES[0]), _MAX_AUTO_LEVEL)
    return q, 1.0 / (1.0 - 2.0 * q)


def _bounds_locatable(n_samples, bound_epsilon):
    """Whether ``"auto"`` bounds are located at this ``n`` and per-quantile epsilon (public only).

    The exponential mechanism finds the ``q``-quantile with failure
    probability at most 1% only for ``q <= 0.25`` here
    (:func:`auto_bound_levels`); beyond that the released box is a random
    grid cell, and a model standardised by it is worse than a constant.
    """
    grid = check_grid(None)
    return rank_margin(n_samples, bound_epsilon, grid.size - 1, _AUTO_BOUNDS_FAILURE) <= _MAX_AUTO_LEVEL


def private_centre(y, epsilon, declared, rng, ledger):
    """The fallback's constant: a private centre of the target, and the box it was clipped to (or None).

    Three rules, chosen by the public ``n``, epsilon and the declaration
    only (never by the data), each spending at most ``epsilon`` (pure DP,
    replace-one neighbours):

    * ``declared = (lower, upper)``: the mean of the target clipped to the
      declared bounds, released by the Laplace mechanism (sensitivity
      ``(upper - lower) / n``), then clipped to them;
    * else, when the exponential mechanism locates the ``q`` and ``1 - q``
      quantiles at ``epsilon / 3`` each (``q <= 0.25``,
      :func:`auto_bound_levels`): that box, widened by ``1 / (1 - 2 q)``,
      and the Laplace mean of the target clipped to it at ``epsilon / 3``
      (the constant that scores best is the mean, not the median);
    * else, when it locates the median at ``epsilon`` (its rank margin at
      most 1/2): the private median;
    * else ``0``, the centre of the core's public grid, and nothing is
      released (``n epsilon`` below about 50).

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
    epsilon : float
    declared : tuple of ndarray or None
        The declared target bounds (arrays of shape (1,)).
    rng : numpy.random.Generator
    ledger : PrivacyLedger

    Returns
    -------
    centre : float
    box : tuple (lower, upper) or None
    """
    n = y.size
    grid = check_grid(None)
    if declared is not None:
        lower, upper = float(declared[0][0]), float(declared[1][0])
    else:
        third = epsilon / 3.0
        if rank_margin(n, third, grid.size - 1, _AUTO_BOUNDS_FAILURE) > _MAX_AUTO_LEVEL:
            if rank_margin(n, epsilon, grid.size - 1, _AUTO_BOUNDS_FAILURE) > 0.5:
                return 0.0, None
            median = private_quantiles(rank_counts(y.reshape(-1, 1), grid), n, (0.5,), grid, epsilon, rng, ledger)
            return float(median[0, 0]), None
        q, widening = auto_bound_levels(n, third, grid.size - 1)
        low, high = private_box(rank_counts(y.reshape(-1, 1), grid), n, (q, 1.0 - q), grid, third, rng, ledger)
        # Post-processing of the released quantiles, as the "auto" bounds.
        centre, half = (low[0] + high[0]) / 2, (high[0] - low[0]) / 2 * widening
        lower, upper = centre - half, centre + half
        epsilon = third
    mean = clip_box(y.reshape(-1, 1), lower, upper).mean()
    mechanism = LaplaceMechanism.from_epsilon(epsilon, (upper - lower) / n)
    noisy = float(np.asarray(mechanism.release(np.array([mean]), rng, ledger)).ravel()[0])
    return min(max(noisy, lower), upper), (lower, upper)


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


def _mean_std(a):
    """Column means and standard deviations that do not overflow for huge values."""
    size = np.max(np.abs(a), axis=0)
    size = np.where(size > 0, size, 1.0)
    scaled = a / size
    return size * scaled.mean(axis=0), size * scaled.std(axis=0)


def _check_bounds(bounds, name, n_columns):
    """``(lower, upper)`` arrays of shape (n_columns,) from a user's bounds."""
    try:
        lower, upper = bounds
        lower = np.broadcast_to(np.asarray(lower, dtype=float), (n_columns,)).copy()
        upper = np.broadcast_to(np.asarray(upper, dtype=float), (n_columns,)).copy()
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be a pair (lower, upper) of scalars or arrays of length {n_columns}, "
            f"got {bounds!r}."
        ) from exc
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper)) and np.all(upper > lower)):
        raise ValueError(f"{name} must be finite with upper > lower, got {bounds!r}.")
    return lower, upper


class DPSEPRegressor(DPEstimatorMixin, RegressorMixin, BaseEstimator):
    """Differentially private stochastic EP for Bayesian neural-network regression.

    A Bayesian neural network with ReLU hidden layers, factorised Gaussian
    posteriors over the weights and a Gamma posterior over the precision of
    the Gaussian output noise, fitted by stochastic expectation propagation
    (SEP; Li et al. 2015) with the moment matching of probabilistic
    backpropagation (PBP; Hernandez-Lobato & Adams 2015), made private as in
    DP-SEP (Vinaroz & Park, Algorithm 3).  The posterior is
    ``q = p0 f^N`` (Eq. 2) with one average site ``f``; each step

    1. draws a batch at rate ``q = B / N`` (``B = batch_size``):
       ``sampling="poisson"`` keeps every datapoint independently with
       probability ``q`` (batches of expected size ``B``, possibly empty);
       ``"without_replacement"`` draws exactly ``B`` uniformly without
       replacement (Algorithm 3, line 2, is ``B = 1``);
    2. forms the cavity ``q_-1 = p0 f^(N-1)`` (Eq. 3);
    3. matches the moments of every tilted ``q_-1 p(y_n | x_n, w, tau)``
       (PBP) and divides by the cavity: the site ``f_n`` of each datapoint,
       whose natural parameters are clipped to L2 norm ``C = clip_norm``;
    4. damps: ``theta_f <- (1 - gamma B/N) theta_f + (gamma/N) sum_n theta_fn``
       with ``gamma = damping`` (SEP's update, Algorithm 2 line 5, and
       Algorithm 3 line 7, for ``B = 1``); the sum is over the realised
       batch and is divided by the public constants ``N`` and ``B``
       (``gamma / N = gamma q / B``), never by the realised batch size;
    5. (``mechanism="dp"``) releases ``theta_f`` with Gaussian noise of
       standard deviation ``sigma * 2 gamma C / N`` (Algorithm 3, line 8;
       Proposition 1), then clips it to norm ``C`` again (line 9).  An
       empty Poisson batch still releases (the noise is added to the
       damped factor alone).

    The fitted posterior is ``p0 fbar^N`` for the average ``fbar`` of the
    factors released over the last half of the steps.  ``mechanism="clipped"``
    runs the same algorithm without noise and ``mechanism="none"`` is plain
    SEP (no clipping, no noise); neither is private.
    ``hidden_layer_sizes=()`` is Bayesian linear regression.

    **Privacy.**  Mechanism: step 5 releases the new factor plus
    ``N(0, (sigma * 2 gamma C / N)^2 I)``.  Sensitivity: the previous
    factor was itself released and the batch's membership is drawn
    independently of the data, so between replace-one neighbours (``N`` is
    public) only the replaced record's clipped site can differ, and only
    when that record is in the batch: the new factor moves by at most
    ``(gamma / N) 2 C = 2 gamma C / N`` (Proposition 1), whatever the
    realised batch size (the sum is divided by the public ``N``, not by the
    number of records drawn).  Event: the ``ceil(n_epochs * N / B)``
    steps, with independent batches, are recorded as one
    :class:`~skdp.privacy.SubsampledGaussianEvent` under replace-one
    neighbours with noise multiplier ``sigma`` (the noise std over
    ``2 gamma C / N``), sampling rate ``B / N`` and the ``sampling``
    scheme (Proposition 2's composition of subsampled Gaussian mechanisms).
    With ``sampling="poisson"`` the ``"pld"`` accountant composes it with
    the dominating pair of Poisson subsampling under replace-one (Zhu, Dong
    & Wang 2022), computed by dp-accounting (Doroshenko et al. 2022);
    ``"without_replacement"`` is accounted by RDP with Wang, Balle &
    Kasiviswanathan (2019)'s bound, as in the paper.  The noise multiplier
    ``sigma`` is calibrated for exactly that plan.
    ``privacy_spent_`` refers to **replace-one** neighbours (datasets of the
    same size ``N`` differing in one record; ``N`` is public).  Everything
    released afterwards (the averaged factor, the posterior, predictions,
    weight samples) is post-processing of the released factors.
    Standardising the data with statistics computed from it
    (``feature_bounds`` or ``target_bounds`` set to ``"nonprivate"``) leaks outside
    this guarantee and raises a :class:`~skdp.PrivacyLeakWarning`.

    **"auto" bounds.**  ``feature_bounds="auto"`` (``target_bounds="auto"``)
    releases the ``q`` and ``1 - q`` quantiles of every feature column (of
    the target) by the exponential mechanism over the core's public log
    grid (:func:`~skdp.privacy.quantiles.private_box`; Smith 2011), before
    any SEP step: two :class:`~skdp.privacy.PureDPEvent` per column, each of
    ``bounds_budget * epsilon / k`` for the ``k`` quantiles released, so
    the bounds spend ``bounds_budget * epsilon`` by basic composition.
    ``q`` is the smallest level the mechanism locates at that epsilon and
    the public ``N`` (:func:`auto_bound_levels`; at least 0.01), and the
    released interval is widened by ``1 / (1 - 2 q)`` (post-processing).
    The plan is the pure events followed by the subsampled Gaussian steps
    (:func:`_planned_events`), and ``sigma`` is calibrated for their joint
    composition: under ``"pld"`` the bounds cost the steps far less than
    the basic split (``N = 9,000``, 10 features and the target, ``B = 95``,
    40 epochs: ``sigma`` 2.42 with declared bounds, 2.43 at
    ``bounds_budget=0.1``, 2.64 at 0.5).  The data is then clipped to the
    released box (:func:`~skdp.privacy.clipping.clip_box`) as to declared
    bounds.  Where ``n`` is too small for the bounds' share of epsilon to
    locate them, the fit falls back to a constant, a private estimate of
    the target's centre (:func:`private_centre`, at most epsilon, pure DP),
    and warns naming the bounds to declare.

    Parameters
    ----------
    hidden_layer_sizes : tuple of int or "auto", default="auto"
        Width of each ReLU hidden layer; ``()`` gives a linear model.
        ``"auto"``: one hidden layer of 50 units when ``n * epsilon`` is at
        least 200 times its number of weights, else linear
        (:func:`auto_hidden_layer_sizes`; always 50 units for the
        non-private modes); the choice is ``hidden_layer_sizes_``.
    n_epochs : int, default=40
        Number of passes ``T`` (in expectation for Poisson batches); the
        fit makes ``ceil(T * N / B)`` steps.
    batch_size : int or "auto", default="auto"
        ``B``, datapoints per step (and per release): the expected batch
        size for ``sampling="poisson"``, the exact one otherwise.
        ``"auto"`` is ``ceil(sqrt(N))`` for ``"dp"`` and ``"clipped"`` and 1
        (Algorithm 2) for ``"none"``; 1 without replacement is Algorithm 3
        as written.
    damping : float, default=1.0
        ``gamma``: each datapoint moves the factor by ``gamma / N``
        (``gamma * B`` must not exceed ``N``: the factor's weight
        ``1 - gamma B / N`` stays non-negative; with Poisson batches ``B``
        is the expected size).
    clip_norm : float, default=1.0
        ``C``, the L2 bound on the natural parameters of every datapoint's
        site and of the factor (``"dp"`` and ``"clipped"``), measured after
        the ``-beta`` coordinate is multiplied by 10 (see Notes).
    epsilon : float, default=1.0
        Privacy budget (``mechanism="dp"``).
    delta : float, default=1e-5
        Privacy budget; must be positive for ``"dp"``.
    mechanism : {"dp", "clipped", "none"}, default="dp"
        DP-SEP, SEP with clipping only, or plain SEP.
    prior_variance : float, default=1.0
        Variance of the Gaussian prior of every weight (the pre-activations
        are divided by ``sqrt(n_in + 1)``, as in PBP).  The prior means are
        zero in the output layer and drawn from ``N(0, 1)`` (from
        ``random_state``) in the hidden layers.
    noise_prior : tuple of (float, float), default=(6.0, 6.0)
        Shape and rate of the Gamma prior of the noise precision on the
        standardised targets (PBP's choice).
    feature_bounds : tuple (lower, upper), "auto" or "nonprivate", default="auto"
        Public bounds of the features (scalars or arrays); the features are
        clipped to them and mapped to ``[-1, 1]``.  ``"auto"`` releases them
        privately (see **"auto" bounds**), spending ``bounds_budget`` of
        epsilon.  When ``n`` is too small for the budget to locate them the
        fit warns (naming what to declare) and falls back to a constant, a
        private estimate of the target's centre (:func:`private_centre`).  ``"nonprivate"`` standardises with the data's mean and
        standard deviation (a privacy leak, warned; opt-in).
    target_bounds : tuple (lower, upper), "auto" or "nonprivate", default="auto"
        Public bounds of the target, used the same way; predicted means are
        clipped to them.
    composition : {"pld", "rdp", "advanced", "basic", "zcdp"}, default="pld"
        Composition the noise is calibrated and accounted with.  RDP has no
        curve for Poisson batches under replace-one neighbours:
        ``sampling="poisson"`` with ``"rdp"`` raises ``ValueError``, as does
        ``"zcdp"`` (no rule for subsampled mechanisms) with either sampling.
        ``"pld"`` with ``"without_replacement"`` batches is composed by RDP
        (the PLD accountant's fallback), the same ``sigma`` as ``"rdp"``.
    accountant : BudgetAccountant, default=None
        Shared budget charged with ``privacy_spent_`` (``"dp"`` only).
    random_state : int, RandomState instance or None, default=None
        Seeds the prior means of the hidden layers, the sampling of
        datapoints and the noise.

    secure_noise : bool or None, default=None
        Sample every Laplace and Gaussian release exactly on a grid (discrete
        Laplace / discrete Gaussian, Canonne, Kamath & Steinke 2020) instead of
        in floating point, whose low-order bits leak the noiseless value
        (Mironov 2012).  None follows the package default
        (:func:`skdp.set_config`), read once at the start of ``fit`` and
        carried by the estimator to worker processes.
        DP-SEP's subsampled Gaussian has no secure sampler: with
        ``mechanism="dp"`` a secure setting makes ``fit`` raise ``ValueError``.
    sampling : {"poisson", "without_replacement"}, default="poisson"
        How every step's batch is drawn: each datapoint independently with
        probability ``B / N`` (Poisson), or ``B`` datapoints uniformly
        without replacement (the paper's scheme; with ``composition="rdp"``
        it reproduces the fits made before ``"poisson"`` existed).  Poisson
        batches are accounted tighter (see Notes); they apply to every
        ``mechanism``, so ``"clipped"`` and ``"none"`` run the same loop.
    bounds_budget : float in (0, 1), default=0.5
        Share of epsilon spent on the ``"auto"`` bounds (basic composition
        of their quantiles); unused without ``"auto"``.  ``"clipped"`` and
        ``"none"`` take the exact quantiles at the same levels.  Too few
        rows for the share warns (``UserWarning``): declare the bounds.

    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features,)
        Defined when X has feature names that are all strings.
    coefs_mean_, coefs_var_ : list of ndarray
        Posterior mean and variance of the weights of each layer, shape
        ``(n_out, n_in + 1)`` (the last column is the bias), acting on the
        standardised inputs and targets.
    noise_shape_, noise_rate_ : float
        Gamma posterior of the noise precision (standardised targets).
    factor_natural_params_ : ndarray of shape (2 * n_weights + 2,)
        Natural parameters of the site ``fbar`` (the average of the factors
        released over the last half of the steps), laid out as
        ``[m / v, -1 / (2 v), alpha - 1, -beta]``: ``m / v`` for every
        weight, then ``-1 / (2 v)`` for every weight, then the two natural
        parameters of the noise Gamma (see :ref:`bnn-model`).
    hidden_layer_sizes_ : tuple of int
        The hidden layers fitted (``hidden_layer_sizes``, or the
        ``"auto"`` rule's choice from ``n``, ``d`` and epsilon).
    batch_size_ : int
        ``B`` used by the fit (the expected batch size for Poisson batches).
    noise_multiplier_ : float or None
        ``sigma``: noise standard deviation over the sensitivity (``"dp"``).
    noise_scale_ : float or None
        Standard deviation of the noise added to every coordinate of the
        released factor at every step (``"dp"``).
    n_iter_ : int
        Number of SEP steps (``ceil(n_epochs * n_samples / batch_size_)``).
    feature_bounds_ : ndarray of shape (2, n_features) or None
        The box the features were clipped to (declared or released); None
        with ``feature_bounds="nonprivate"``.
    target_bounds_ : ndarray of shape (2,) or None
        The same for the target.
    x_center_, x_scale_ : ndarray of shape (n_features,)
    y_center_, y_scale_ : float
        The standardisation of the features and the target.
    privacy_spent_ : PrivacySpent
        ``(epsilon, delta)`` of the fit under replace-one neighbours;
        ``(inf, 0.0)`` (no guarantee) for ``"clipped"`` and ``"none"``.

    Notes
    -----
    Deviations from the paper, each keeping the guarantee above (details
    and measurements in the user guide, :ref:`bnn-deviations`):

    * Eq. 4 followed by the refresh of Eq. 2 moves the factor by only
      ``gamma / N**2`` per step; we use SEP's damped update of the factor at
      rate ``gamma / N`` per datapoint (Algorithm 2, line 5), for which
      ``2 gamma C / N`` is the sensitivity of the released factor.
    * Poisson batches (``sampling="poisson"``, the default) instead of
      Algorithm 3's datapoint drawn without replacement.  Under replace-one
      neighbours a Poisson-subsampled Gaussian has a tight dominating pair
      (Zhu, Dong & Wang 2022, Poisson subsampling under replace-one:
      ``(1-q) N(0, s^2) + q N(-1, s^2)`` against ``(1-q) N(0, s^2) + q N(1, s^2)``
      with ``s = 2 sigma``), whose privacy loss distribution dp-accounting
      composes numerically with a pessimistic discretisation (Doroshenko,
      Ghazi, Kamath, Kumar & Manurangsi 2022), while sampling without
      replacement only has the looser RDP bound of Wang, Balle &
      Kasiviswanathan (2019).  At ``N = 10,000``, ``B = 100``, 40 epochs,
      ``epsilon = 1``, ``delta = 1e-5``, the calibrated ``sigma`` drops from
      5.21 (without replacement, RDP) to 2.36 (Poisson, PLD): the noise
      std per release is 2.2 times smaller for the same guarantee.  The
      realised batch size is Binomial(N, q); the update divides by the
      public ``N`` (equivalently ``B``), so the sensitivity is unchanged.
    * Batches of ``B`` datapoints per release instead of one.  One datapoint
      per release forces a small subsampling rate ``1 / N`` into the regime
      where amplification is weak (``sigma`` about 0.8 for ``N = 9,000``,
      10 epochs), so the noise left in the factor is about 3 times larger
      than with ``B = sqrt(N)`` for the same budget.
    * Algorithm 3 visits a random permutation per epoch, but its accounting
      (subsampled Gaussian) needs independent draws; every step draws its
      batch independently so the accounting holds.
    * Sites are clipped, and factors released, after multiplying the
      ``-beta`` coordinate of the noise Gamma by 10 (a fixed public
      rescaling, so the sensitivity holds in that space): on standardised
      targets ``beta`` is tiny and otherwise drowns in the noise.
    * Noisy natural parameters are mapped onto proper, bounded
      distributions before use (post-processing): precisions at least the
      prior's, ``alpha >= 2``, the noise variance of standardised targets in
      ``[1e-4, 1]``, means within 10 prior standard deviations, and
      (``"dp"``) a weight's mean shrunk towards its prior mean when its
      precision is within 2 noise standard deviations of the prior's:
      dividing a noisy natural mean by a precision the noise could have
      produced gives absurd means, the bad fixed point the paper's
      algorithm falls into.
    * Random prior means in the hidden layers (data-independent, public)
      instead of PBP's random initial posterior means: the latter are
      encoded in the factor at scale ``1 / N`` and the noise erases them.
    * The output is the average of the factors released over the last half
      of the steps (Polyak averaging; post-processing).
    * The prior is not clipped: it is public and cancels in Proposition 1.
    * The authors' code (``mvinaroz/stochastic-EP``) computes the clipped
      and noised parameters but keeps the unclipped, noiseless ones, so the
      paper's DP-SEP tables do not show the effect of the noise.

    The noise left in the released factor has standard deviation about
    ``sigma * 2 gamma C / (N sqrt(2 gamma B / N))`` per coordinate; the
    weights of a 50-unit first layer are below it on 10,000 rows at
    ``epsilon = 1`` and stay close to their prior, so the private network
    does about as well as a private linear model there.

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

    #: What a fitted model holds (``docs/guarantee.md``, "What a fitted model
    #: holds"): the posterior approximation, read off the released (noisy)
    #: average factor ``factor_natural_params_``; the standardisation, from the
    #: declared or ``"auto"`` (released, on the ledger) ``feature_bounds_``/
    #: ``target_bounds_`` (or, with ``None``, from the data with a
    #: ``PrivacyLeakWarning``); and the plan
    #: (``batch_size_``, ``n_iter_``, ``noise_multiplier_``, ``noise_scale_``),
    #: a function of hyperparameters and the size n, public under replace-one.
    _released_attributes = frozenset(
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

    _parameter_constraints = {
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
                raise ValueError(
                    f"composition={self.composition!r} cannot account DP-SEP's {self.sampling!r} batches "
                    "under replace-one neighbours; use composition='pld' (or "
                    "sampling='without_replacement' for 'rdp')."
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
            # The data-free fallback's centre adds a Laplace mean (private_centre).
            return (ExponentialMechanism, LaplaceMechanism, SubsampledGaussianMechanism)
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
        sigma = bound_epsilon = None
        n_bound_releases = self._n_bound_releases(data.n_features)
        if n_bound_releases:
            # The bounds' declared share of epsilon, split evenly over their
            # quantiles (pure DP, composed by the basic theorem); the
            # non-private runs take the same quantile levels.
            bound_epsilon = quantile_epsilon(
                self.bounds_budget * self.epsilon, 0.0, n_bound_releases, "basic", plan.secure_noise
            )
        fallback = bool(n_bound_releases) and plan.private and not _bounds_locatable(n_samples, bound_epsilon)
        if fallback:
            self._warn_fallback(n_samples)
        elif plan.private:
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
            )
        hidden = (
            auto_hidden_layer_sizes(n_samples, data.n_features, self.epsilon, self.mechanism)
            if self._auto("hidden_layer_sizes")
            else tuple(self.hidden_layer_sizes)
        )
        return plan.with_settings(
            fallback=fallback,
            hidden_layer_sizes=() if fallback else hidden,
            bound_epsilon=bound_epsilon,
            batch_size=batch_size,
            n_steps=dpsep_n_steps(n_samples, self.n_epochs, batch_size),
            noise_multiplier=sigma,
            sensitivity=factor_sensitivity(self.clip_norm, self.damping, n_samples),
        )

    def _warn_fallback(self, n_samples):
        """``UserWarning`` that the fit falls back to a constant (public quantities only).

        Issued when the ``"auto"`` bounds cannot be located at this ``n``
        and epsilon (:func:`_bounds_locatable`); names what to declare.
        Depends on ``n`` (public under replace-one), epsilon and
        ``bounds_budget`` only.
        """
        names = [name for name in ("feature_bounds", "target_bounds") if self._auto(name)]
        warnings.warn(
            f"DPSEPRegressor: {' and '.join(names)}='auto' cannot be released privately from "
            f"{n_samples} rows at epsilon={self.epsilon:g} (bounds_budget={self.bounds_budget:g}); "
            "the model falls back to predicting a private estimate of the target's centre (a constant). "
            f"Declare {' and '.join(names)} as (lower, upper) from the data's known domain, "
            "or raise epsilon or bounds_budget, to fit the network.",
            UserWarning,
            stacklevel=3,
        )

    def _fit_constant(self, data, plan, rng, ledger):
        """The data-free fallback: a constant prediction, the target's private centre (see :func:`private_centre`)."""
        d = data.n_features
        declared = None if self._auto("target_bounds") else _check_bounds(self.target_bounds, "target_bounds", 1)
        centre, box = private_centre(data.y, self.epsilon, declared, rng, ledger)
        self.hidden_layer_sizes_ = ()
        self.coefs_mean_ = [np.zeros((1, d + 1))]
        self.coefs_var_ = [np.zeros((1, d + 1))]
        self.noise_shape_, self.noise_rate_ = (float(v) for v in self.noise_prior)
        self.factor_natural_params_ = np.zeros(2 * (d + 1) + 2)
        self.feature_bounds_ = None
        if not self._auto("feature_bounds") and not self._nonprivate("feature_bounds"):
            self.feature_bounds_ = np.stack(_check_bounds(self.feature_bounds, "feature_bounds", d))
        self.x_center_, self.x_scale_ = np.zeros(d), np.ones(d)
        self.target_bounds_ = None if box is None else np.array(box, dtype=float)
        self.y_center_ = float(centre)
        self.y_scale_ = 1.0 if box is None else (box[1] - box[0]) / 2
        self.batch_size_ = plan.settings["batch_size"]
        self.noise_multiplier_ = self.noise_scale_ = None
        self.n_iter_ = 0

    def _bounds(self, name, a, private, plan, rng, ledger):
        """``(lower, upper)`` a column-wise box from the declared, ``"auto"`` or ``"nonprivate"`` bounds.

        ``"auto"`` releases the :data:`~skdp.privacy.quantiles.AUTO_BOUNDS_QUANTILES` of every column
        by the exponential mechanism over the core's public log grid
        (:func:`~skdp.privacy.quantiles.private_box`, accounted at the plan's
        ``bound_epsilon`` each); the non-private reference runs take the exact
        quantiles instead (they claim nothing).  ``"nonprivate"`` returns None (the
        caller standardises with the data's moments, warned).
        """
        bounds = getattr(self, name)
        if self._nonprivate(name):
            return None
        if not (isinstance(bounds, str) and bounds == "auto"):
            return _check_bounds(bounds, name, a.shape[1])
        grid = check_grid(None)
        q, widening = auto_bound_levels(a.shape[0], plan.settings["bound_epsilon"], grid.size - 1)
        if private:
            lower, upper = private_box(
                rank_counts(a, grid),
                a.shape[0],
                (q, 1.0 - q),
                grid,
                plan.settings["bound_epsilon"],
                rng,
                ledger,
            )
        else:
            lower, upper = np.quantile(a, (q, 1.0 - q), axis=0)
        # Post-processing of the released quantiles (see auto_bound_levels).
        center, half = (lower + upper) / 2, (upper - lower) / 2 * widening
        half = np.where(half > 0, half, 1.0)
        return center - half, center + half

    def _standardisation(self, X, y, plan, rng, ledger):
        """Clip to the bounds and map them to ``[-1, 1]``, or standardise with the data's moments."""
        private = self.mechanism == "dp"
        # Features first, then the target: the order of the bound releases.
        feature_box = self._bounds("feature_bounds", X, private, plan, rng, ledger)
        target_box = self._bounds("target_bounds", y.reshape(-1, 1), private, plan, rng, ledger)
        self.feature_bounds_ = self.target_bounds_ = None
        if feature_box is None:
            if private:
                warn_privacy_leak("feature_bounds", "the feature means and standard deviations")
            x_center, x_scale = _mean_std(X)
        else:
            lower, upper = feature_box
            self.feature_bounds_ = np.stack([lower, upper])
            x_center, x_scale = (lower + upper) / 2, (upper - lower) / 2
            # The core's box clip: the sites' sensitivity assumes nothing of
            # the data, but the standardised scale is what makes C meaningful.
            X = clip_box(X, lower, upper)
        if target_box is None:
            if private:
                warn_privacy_leak("target_bounds", "the target mean and standard deviation")
            y_center, y_scale = map(float, _mean_std(y))
        else:
            lower, upper = float(target_box[0][0]), float(target_box[1][0])
            self.target_bounds_ = np.array([lower, upper])
            y_center, y_scale = (lower + upper) / 2, (upper - lower) / 2
            y = clip_box(y, lower, upper)
        x_scale = np.where(x_scale > 0, x_scale, 1.0)
        y_scale = y_scale if y_scale > 0 else 1.0
        self.x_center_, self.x_scale_ = x_center, x_scale
        self.y_center_, self.y_scale_ = y_center, y_scale
        return (X - x_center) / x_scale, (y - y_center) / y_scale

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
        if plan.settings["fallback"]:
            self._fit_constant(data, plan, rng, ledger)
            return
        n_samples = data.n_samples
        batch_size, n_steps, sigma, sensitivity = (
            plan.settings[name] for name in ("batch_size", "n_steps", "noise_multiplier", "sensitivity")
        )
        Xs, ys = self._standardisation(data.X, data.y, plan, rng, ledger)

        self.hidden_layer_sizes_ = plan.settings["hidden_layer_sizes"]
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
        run = functools.partial(self._run, Xs, ys, theta_f, theta_0, shapes, floors, batch_size, n_steps, rng)
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

    def _run(self, X, y, theta_f, theta_0, shapes, floors, batch_size, n_steps, rng, release):
        """The SEP loop (Algorithm 3, one batch per step); ``release`` is None without noise.

        The loop works on ``u = D theta_f`` (:func:`~skdp.bnn._sep.release_scaling`):
        sites are clipped, and the factor released, in that space.  Returns
        the average of the factors released over the last steps.
        """
        n_samples = X.shape[0]
        clip = self.mechanism != "none"
        step = self.damping / n_samples
        keep = 1.0 - step * batch_size
        scale = release_scaling(theta_f.size, _RATE_SCALE)
        u = theta_f * scale
        average, n_averaged = np.zeros_like(u), 0
        first_averaged = n_steps - max(1, int(_AVERAGED_FRACTION * n_steps))
        poisson = self.sampling == "poisson"
        rate = batch_size / n_samples
        for t in range(n_steps):
            # Each step's batch is drawn independently of the data and of the
            # other steps, as the sampling scheme the accounting relies on says.
            if poisson:
                idx = poisson_batch_indices(n_samples, rate, rng)
            else:
                idx = rng.choice(n_samples, size=batch_size, replace=False)
            if idx.size:
                sites, norms = sep_sites(
                    u / scale, theta_0, n_samples, X[idx], y[idx], shapes, floors, scale, with_norms=True
                )
                site_sum = clipped_sum(sites, self.clip_norm, norms) if clip else sites.sum(axis=0)
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
                u = clip_l2(u, self.clip_norm)
            if t >= first_averaged:
                # Polyak averaging of released factors: post-processing.
                n_averaged += 1
                average += (u - average) / n_averaged
        return average / scale

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
