"""Privacy loss distributions (PLD) through Google's dp-accounting.

The privacy loss distribution of a mechanism on its worst pair of
neighbouring datasets (a *dominating pair*, Zhu, Dong & Wang 2022) composes
exactly by convolution (Sommer, Meiser & Mohammadi 2019; Koskela, Jalko &
Honkela 2020); dp-accounting (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi
2022, "Connect the dots") discretises it *pessimistically*: every loss is
rounded up to the grid and the truncated tail is charged to delta, so the
reported epsilon is an upper bound on the true one, within about the grid
step (``value_discretization_interval``, 1e-4) of it.  It is the accounting of
Google's DP libraries and what Opacus' default PRV accountant approximates;
for long DP-SGD runs it saves about 9% of epsilon against RDP.

Rules (the noise multiplier ``z`` of an event is its noise scale over its
sensitivity under its own neighbouring relation):

* Gaussian: ``N(0, z^2)`` against ``N(1, z^2)``, any relation (exact).
* Poisson-subsampled Gaussian at rate ``q``, add/remove: dp-accounting's
  ``ADD_OR_REMOVE_ONE`` pair with standard deviation ``z``.  Replace-one:
  the pair ``(1-q) N(0) + q N(-1)`` against ``(1-q) N(0) + q N(1)`` with
  standard deviation ``2 z`` (dp-accounting's ``REPLACE_ONE``, whose unit is
  one record's contribution, half the replace-one sensitivity ``z`` is
  measured against).  This is the direct replace-one accounting of DP-SGD and
  of DP-SEP's Poisson batches.
* Pure ``epsilon``-DP (Laplace, discrete Laplace, exponential mechanism,
  posterior sampling): the pair of randomised response with parameter
  ``epsilon``, which dominates every ``epsilon``-DP mechanism (Kairouz, Oh &
  Viswanath 2015), in any dimension.

Events with no rule here (the discrete Gaussian of secure noise, fixed-size
batches sampled without replacement, Acs et al.'s cluster-sampled steps) are
accounted by ``"rdp"`` instead: :func:`skdp.privacy.compose` falls back to it
for the whole history.

The reported epsilon is the smaller of the PLD bound and the RDP bound when
the RDP accountant supports the history too (both are upper bounds), so
``"pld"`` is never looser than ``"rdp"``.

Closed forms first: a history made only of plain (continuous) Gaussian
releases, full-batch "subsampled" ones included, composes *exactly* into one
Gaussian mechanism with multiplier ``(sum count / z^2)^(-1/2)`` (Dong, Roth &
Su 2022, Cor. 3.3), whose privacy profile is Balle & Wang's (2018, Thm. 8):
:func:`~skdp.privacy.accountants.rdp.exact_gaussian_epsilon`.  That is the
true epsilon of the very pair the PLD discretises pessimistically (rounding
losses up, charging the truncated tail to delta), hence never above the PLD
bound nor the RDP one, so it is reported without building a PLD (3e-5 s
against 0.1-0.3 s per composition).  Subsampled and mixed histories, which
have no exact closed form, are discretised.

PLDs are built once per process: the discretised PLD of one use of a
mechanism (its multiplier, sampling rate and relation) is cached, and so is
its ``count``-fold self-composition, so a budget or a calibration that meets
the same mechanism again with another count only convolves.  A Gaussian whose dp-accounting
standard deviation is below 0.1 (epsilon in the hundreds) is not discretised
(its loss grid would have millions of points): such a history gets its RDP
bound, or ``inf`` when it has none.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import replace

import numpy as np

from ..events import (
    ADD_REMOVE,
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    SubsampledGaussianEvent,
)
from ._base import Accountant
from .basic import pure_epsilon
from .rdp import RDPAccountant, exact_gaussian_epsilon

#: Grid step of the discretised privacy loss (dp-accounting's default).
VALUE_DISCRETIZATION_INTERVAL = 1e-4

#: Smallest dp-accounting standard deviation discretised (module docstring).
_MIN_STANDARD_DEVIATION = 0.1


class _TooLittleNoise(Exception):
    pass


def _pld_module():
    from dp_accounting.pld import privacy_loss_distribution

    return privacy_loss_distribution


class PLDAccountant(Accountant):
    """Composition of discretised privacy loss distributions (module docstring).

    Parameters
    ----------
    pessimistic : bool, default=True
        Round losses up (an upper bound on epsilon: what ledgers and
        calibration use).  False rounds them down, dp-accounting's
        *optimistic* estimate, a lower bound on the true epsilon that tests
        compare every accountant against.
    value_discretization_interval : float, default=1e-4
        Grid step of the losses.
    closed_forms : bool, default=True
        Report the exact closed form of a history that has one (plain
        Gaussian releases only, module docstring) instead of discretising
        it.  False always builds the PLD (the reference the tests compare
        the closed forms with).
    """

    name = "pld"

    def __init__(
        self,
        pessimistic=True,
        value_discretization_interval=VALUE_DISCRETIZATION_INTERVAL,
        closed_forms=True,
    ):
        self.pessimistic = bool(pessimistic)
        self.value_discretization_interval = float(value_discretization_interval)
        self.closed_forms = bool(closed_forms)

    def distribution(self, events):
        """The composed dp-accounting ``PrivacyLossDistribution`` of ``events``."""
        composed = None
        for e in events:
            pld = _composed_pld(e, self.pessimistic, self.value_discretization_interval)
            composed = pld if composed is None else composed.compose(pld)
        return composed

    def epsilon(self, events, delta):
        events = [e for e in events if e.count > 0]
        if not events:
            return 0.0
        if self.pessimistic and self.closed_forms:
            exact = exact_gaussian_epsilon([_as_gaussian(e) for e in events], delta)
            if math.isfinite(exact):
                # The true epsilon of the pair the PLD would discretise: never
                # above its pessimistic bound nor above RDP's (module docstring).
                return exact
        bound = math.inf
        if self.pessimistic and all(RDPAccountant.supports(e) for e in events):
            bound = RDPAccountant().epsilon(events, delta)
        bound = min(bound, exact_gaussian_epsilon(events, delta))
        try:
            eps = self._read(events, delta)
        except _TooLittleNoise:
            return bound
        return min(bound, max(0.0, eps)) if self.pessimistic else max(0.0, eps)

    def pld_epsilon(self, events, delta):
        """The epsilon of the discretised PLD of ``events`` alone (no closed form, no RDP bound); ``inf`` where none is built."""
        events = [e for e in events if e.count > 0]
        if not events:
            return 0.0
        try:
            eps = self._read(events, delta)
        except _TooLittleNoise:
            return math.inf
        return max(0.0, eps)

    def _read(self, events, delta):
        """Epsilon at ``delta`` of the composed PLD of ``events``, read once per history (:func:`_history_epsilon`)."""
        key = (tuple(events), float(delta), self.pessimistic, self.value_discretization_interval)
        try:
            hash(key)
        except TypeError:  # an unhashable event: read uncached
            return float(_epsilon_for_delta(self.distribution(events), delta))
        return _history_epsilon(*key)


@functools.lru_cache(maxsize=1024)
def _history_epsilon(events, delta, pessimistic, interval):
    """The epsilon read off the composed PLD of a history, cached like the PLDs themselves.

    The ledger reads the very history its fit's calibration accepted (the
    calibrator costs the events the mechanisms will record): the read of
    a composed PMF of millions of points is then not repeated.
    """
    pld = PLDAccountant(pessimistic, interval).distribution(events)
    return float(_epsilon_for_delta(pld, delta))


def _as_gaussian(event):
    """A full-batch subsampled Gaussian as the plain Gaussian it is; other events unchanged.

    With ``sampling_rate == 1`` every record is in the batch: the PLD rule
    above discretises exactly the Gaussian of the same multiplier.
    """
    if type(event) is SubsampledGaussianEvent and event.sampling_rate == 1.0:
        return GaussianEvent(count=event.count, neighbouring=event.neighbouring, noise_multiplier=event.noise_multiplier)
    return event


def _composed_pld(event, pessimistic, interval):
    # The count-fold self-composition of one use's PLD; both levels cached,
    # so a new count of a known mechanism only convolves.
    count = int(event.count)
    one = replace(event, count=1)
    if count == 1:
        return _one_use_pld(one, pessimistic, interval)
    return _self_composed(one, count, pessimistic, interval)


@functools.lru_cache(maxsize=1024)
def _one_use_pld(event, pessimistic, interval):
    return PLDAccountant._apply(event, pessimistic, interval)


@functools.lru_cache(maxsize=1024)
def _self_composed(event, count, pessimistic, interval):
    pld = _one_use_pld(event, pessimistic, interval)
    remove = _self_compose_pmf(pld._pmf_remove, count)
    if pld._symmetric:
        return type(pld)(remove)
    return type(pld)(remove, _self_compose_pmf(pld._pmf_add, count))


def _gaussian_pld(standard_deviation, pessimistic, interval, sampling_prob=1.0, replace_one=False):
    if standard_deviation < _MIN_STANDARD_DEVIATION:
        raise _TooLittleNoise
    from dp_accounting import NeighboringRelation

    if pessimistic:
        return _connect_dots_gaussian_pld(standard_deviation, interval, sampling_prob, replace_one)
    relation = NeighboringRelation.REPLACE_ONE if replace_one else NeighboringRelation.ADD_OR_REMOVE_ONE
    with warnings.catch_warnings():
        # The optimistic estimate is computed by privacy buckets, which
        # dp-accounting announces with a logging warning; nothing to act on.
        warnings.simplefilter("ignore")
        return _pld_module().from_gaussian_mechanism(
            standard_deviation=standard_deviation,
            sensitivity=1.0,
            pessimistic_estimate=pessimistic,
            value_discretization_interval=interval,
            sampling_prob=sampling_prob,
            use_connect_dots=pessimistic,
            neighboring_relation=relation,
        )


@PLDAccountant.rule(GaussianEvent, applies=lambda e: type(e) is GaussianEvent)
def _gaussian(event, pessimistic, interval):
    return _gaussian_pld(event.noise_multiplier, pessimistic, interval)


@PLDAccountant.rule(
    SubsampledGaussianEvent, applies=lambda e: e.sampling == "poisson" or e.sampling_rate == 1.0
)
def _poisson(event, pessimistic, interval):
    if event.sampling_rate == 1.0:
        return _gaussian_pld(event.noise_multiplier, pessimistic, interval)
    if event.neighbouring == ADD_REMOVE:
        return _gaussian_pld(event.noise_multiplier, pessimistic, interval, event.sampling_rate)
    # Replace-one: dp-accounting's unit is one record's contribution, half the
    # sensitivity the event's multiplier is measured against.
    return _gaussian_pld(2.0 * event.noise_multiplier, pessimistic, interval, event.sampling_rate, True)


@PLDAccountant.rule(LaplaceEvent, PureDPEvent)
def _pure(event, pessimistic, interval):
    from dp_accounting.pld.common import DifferentialPrivacyParameters

    # The randomised-response pair dominates every epsilon-DP mechanism; its
    # two losses +-epsilon are rounded to the grid by dp-accounting.
    return _pld_module().from_privacy_parameters(
        DifferentialPrivacyParameters(pure_epsilon(event), 0.0), value_discretization_interval=interval
    )


# --------------------------------------------------------------------------
# dp-accounting's algorithms on whole arrays.
#
# dp-accounting builds a connect-the-dots PLD by inverting the privacy loss
# at every grid point in a Python loop (tens of thousands of scalar calls),
# bounds a self-composition by forty separate log-MGF evaluations, and reads
# epsilon off a composed PMF in another Python loop: 0.3-0.5 s per costing
# of a 1,000-step DP-SGD plan, which calibration repeats.  The functions
# below run the *same* algorithms (same grid, same formulas, same FFT, same
# sequential sums) on NumPy arrays, and return dp-accounting's own objects:
# the values agree with dp-accounting's to floating-point rounding (tested
# in tests/privacy/test_accountants.py), in milliseconds.
# --------------------------------------------------------------------------


def _isclose(a, b):
    # math.isclose (rel_tol=1e-9, abs_tol=0) on an array against a scalar.
    return np.abs(a - b) <= 1e-9 * np.maximum(np.abs(a), abs(b))


def _log_a_times_exp_b_plus_c(a, b, c):
    """``common.log_a_times_exp_b_plus_c`` for ``a > 0 > c`` and an array ``b``."""
    out = np.empty_like(b)
    zero = b == 0
    out[zero] = np.log(a + c)
    d = b[~zero] + np.log(a)
    log_c = np.log(-c)
    if np.any(log_c >= d):
        raise ValueError("a exp(b) + c must be positive.")
    out[~zero] = d + np.log1p(-np.exp(log_c - d))
    return out


def _inverse_privacy_loss(loss, losses):
    """``GaussianPrivacyLoss.inverse_privacy_loss`` at every entry of ``losses``."""
    from dp_accounting.pld.privacy_loss_mechanism import AdjacencyType

    s = loss.sensitivity
    var = loss._standard_deviation ** 2
    q = loss.sampling_prob
    adjacency = loss.adjacency_type

    def remove_without_sampling(pl):
        return -0.5 * s - pl * var / s

    if adjacency == AdjacencyType.REPLACE:
        if q == 1.0:
            return np.where(losses == 0, 0.0, -losses * var / s / 2)
        absolute = np.abs(losses)
        sign = np.where(losses >= 0, 1.0, -1.0)
        log_alpha = 0.5 * (s / loss._standard_deviation) ** 2 + math.log1p(-q) - math.log(q)
        half = absolute / 2
        with np.errstate(divide="ignore"):
            log_sinh = np.where(half == 0, 0.0, half + np.log1p(-np.exp(-2 * half)) - math.log(2))
        a = log_alpha + log_sinh  # asinh_exp(a, -sign): |b| = 1
        asinh = -sign * np.logaddexp(0.5 * np.logaddexp(0, 2 * a), a)
        return np.where(losses == 0, 0.0, var / s * (asinh - losses / 2))
    if q == 1.0:
        x = remove_without_sampling(losses)
        return s + x if adjacency == AdjacencyType.ADD else x
    x = np.empty_like(losses)
    if adjacency == AdjacencyType.ADD:
        close = _isclose(losses, -math.log(1 - q))
        x[close] = -math.inf
        without = -_log_a_times_exp_b_plus_c(1 / q, -losses[~close], 1 - 1 / q)
        x[~close] = s + remove_without_sampling(without)
        return x
    close = _isclose(losses, math.log(1 - q))
    x[close] = math.inf
    without = _log_a_times_exp_b_plus_c(1 / q, losses[~close], 1 - 1 / q)
    x[~close] = remove_without_sampling(without)
    return x


def _hockey_stick(loss, epsilons):
    """``MonotonePrivacyLoss.get_delta_for_epsilon`` of a Gaussian privacy loss on an array."""
    from dp_accounting.pld.privacy_loss_mechanism import AdjacencyType

    q = loss.sampling_prob
    deltas = np.zeros_like(epsilons, dtype=float)
    if q == 1.0 or loss.adjacency_type == AdjacencyType.REPLACE:
        inverse = np.full_like(epsilons, True, dtype=bool)
    elif loss.adjacency_type == AdjacencyType.ADD:
        inverse = epsilons < -math.log1p(-q)
    else:
        inverse = epsilons > math.log1p(-q)
        deltas[~inverse] = -np.expm1(epsilons[~inverse])
    x = _inverse_privacy_loss(loss, epsilons[inverse])
    deltas[inverse] = loss.mu_upper_cdf(x) - np.exp(epsilons[inverse] + loss.mu_lower_log_cdf(x))
    return np.clip(deltas, 0, 1)


class _Normal:
    """``scipy.stats.norm(scale=scale)``'s cdf, logcdf and ppf (same special functions, same arithmetic).

    A frozen SciPy distribution builds its docstring when it is created
    (milliseconds, more than a coarse PLD costing's arithmetic); the
    Gaussian privacy loss only evaluates these three.
    """

    def __init__(self, scale):
        self.scale = scale

    def cdf(self, x):
        from scipy import special

        return special.ndtr(np.asarray(x, dtype=float) / self.scale)

    def logcdf(self, x):
        from scipy import special

        return special.log_ndtr(np.asarray(x, dtype=float) / self.scale)

    def ppf(self, q):
        from scipy import special

        return special.ndtri(q) * self.scale


@functools.lru_cache(maxsize=64)
def _loss_template(loss_class, sampling_prob, adjacency):
    return loss_class(1.0, sensitivity=1.0, pessimistic_estimate=True, sampling_prob=sampling_prob, adjacency_type=adjacency)


def _gaussian_privacy_loss(loss_class, standard_deviation, sampling_prob, adjacency):
    """dp-accounting's ``GaussianPrivacyLoss(standard_deviation, sampling_prob=..., adjacency_type=...)``.

    A copy of one made at standard deviation 1 (validated by
    dp-accounting's constructor), given the standard deviation and a
    :class:`_Normal` of that scale: the object dp-accounting would build,
    without a frozen SciPy distribution per costing.
    """
    import copy

    if not (standard_deviation > 0):
        raise ValueError(f"Standard deviation is not a positive real number: {standard_deviation}")
    loss = copy.copy(_loss_template(loss_class, sampling_prob, adjacency))
    loss._standard_deviation = standard_deviation
    loss._gaussian_random_variable = _Normal(standard_deviation)
    return loss


def _connect_dots_gaussian_pld(standard_deviation, interval, sampling_prob, replace_one):
    """dp-accounting's pessimistic connect-the-dots PLD of the (subsampled) Gaussian.

    ``from_gaussian_mechanism(standard_deviation, sensitivity=1,
    value_discretization_interval=interval, sampling_prob=sampling_prob,
    use_connect_dots=True)`` under add/remove (or replace-one), step for
    step, with the hockey-stick divergences at the grid's losses computed
    as one array instead of one scalar inversion per grid point.
    """
    from dp_accounting.pld.privacy_loss_mechanism import AdjacencyType, GaussianPrivacyLoss

    def pmf(adjacency):
        loss = _gaussian_privacy_loss(GaussianPrivacyLoss, standard_deviation, sampling_prob, adjacency)
        bounds = loss.connect_dots_bounds()
        upper = math.ceil(bounds.epsilon_upper / interval)
        lower = math.floor(bounds.epsilon_lower / interval)
        deltas = _hockey_stick(loss, np.arange(lower, upper + 1) * interval)
        return _connect_dots_pmf(interval, lower, upper, deltas)

    PLD = _pld_module().PrivacyLossDistribution
    if replace_one:
        return PLD(pmf(AdjacencyType.REPLACE))
    remove = pmf(AdjacencyType.REMOVE)
    if sampling_prob == 1.0:
        return PLD(remove)
    return PLD(remove, pmf(AdjacencyType.ADD))


def _connect_dots_pmf(interval, lower, upper, deltas):
    """``pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap``, the dense PMF made from the array itself.

    dp-accounting computes the probabilities as an array, then passes them
    through a dictionary keyed by grid index and back into a list (two
    Python loops over the grid); the same array goes straight into the
    same ``DensePLDPmf`` here.  Small and degenerate supports are left to
    dp-accounting.
    """
    from dp_accounting.pld import pld_pmf

    deltas = np.asarray(deltas, dtype=np.float64)
    # dp-accounting < 0.6 has no _DELTA_DIFF_TOLERANCE (its own check then
    # differs): leave the whole construction to it there.
    tolerance = getattr(pld_pmf, "_DELTA_DIFF_TOLERANCE", None)
    if (
        tolerance is None
        or upper - lower + 1 <= pld_pmf._MAX_PMF_SPARSE_SIZE
        or deltas.size != upper - lower + 1
        or np.any(deltas < 0)
        or np.any(deltas > 1)
        or np.any(np.diff(deltas) > tolerance)
    ):
        return pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(interval, lower, upper, deltas)
    deltas = np.minimum.accumulate(deltas)
    diffs = np.diff(deltas)
    probs = np.zeros_like(deltas)
    probs[0] = 1 - deltas[0] + diffs[0] / math.expm1(interval)
    probs[1:-1] = (diffs[1:] - diffs[:-1] * math.exp(interval)) / math.expm1(interval)
    probs[-1] = diffs[-1] / math.expm1(-interval)
    probs = np.maximum(0.0, probs)
    return pld_pmf.DensePLDPmf(interval, int(lower), probs, deltas[-1], True)


#: Tail mass dp-accounting's self-composition may truncate (its default).
_TAIL_MASS_TRUNCATION = 1e-15


def _self_compose_pmf(pmf, count, tail_mass_truncation=_TAIL_MASS_TRUNCATION):
    """``DensePLDPmf.self_compose(count)``, its truncation bounds computed as one array."""
    from dp_accounting.pld import pld_pmf
    from scipy import fft

    if isinstance(pmf, pld_pmf.SparsePLDPmf) and count > 1 and pmf.size ** min(count, 11) > pld_pmf._MAX_PMF_SPARSE_SIZE:
        # What dp-accounting does with a sparse PMF whose composition would
        # exceed the sparse size (size ** count; the exponent capped where
        # any size >= 2 exceeds it): compose it densely.
        pmf = pmf.to_dense_pmf()
    if not isinstance(pmf, pld_pmf.DensePLDPmf) or count <= 0:
        return pmf.self_compose(count, tail_mass_truncation)
    probs = pmf._probs
    lower, upper = _self_convolve_bounds(probs, count, tail_mass_truncation)
    length = upper - lower + 1
    fast = fft.next_fast_len(max(length, len(probs)))
    # dp-accounting's transforms, to the bit: the half-spectrum transforms
    # (rfft, irfft) would be faster but round differently, which moves the
    # epsilon read off the composition by up to 4e-9 relative either way.
    convolved = np.real(fft.ifft(_hermitian_power(fft.fft(probs, fast), count)))
    # np.roll(convolved, -lower)[:length], without rolling the whole array.
    start = lower % fast
    if start + length <= fast:
        convolved = convolved[start : start + length].copy()
    else:
        convolved = np.concatenate((convolved[start:], convolved[: start + length - fast]))
    infinity = tail_mass_truncation - math.expm1(count * math.log1p(-pmf._infinity_mass))
    return pld_pmf.DensePLDPmf(
        pmf._discretization, pmf._lower_loss * count + lower, convolved, infinity, pmf._pessimistic_estimate
    )


def _hermitian_power(spectrum, count):
    """``spectrum ** count`` of the transform of a real array, each power computed once.

    The transform of a real array is Hermitian, and SciPy's complex FFT of
    a real input writes its upper half as the conjugates of its lower half
    (``spectrum[N - k] == conj(spectrum[k])`` to the bit).  NumPy's power of
    a complex array by an integer above 100 is the C library's ``cpow``,
    ``cexp(count * clog(z))``, which commutes with conjugation bit for bit
    (``clog`` and ``cexp`` are built from ``atan2``, ``sin`` and ``cos``,
    odd functions evaluated on the magnitude with the sign restored): the
    lower half's powers, conjugated, are the upper half's.  Half the
    ``cpow`` calls, the costliest pass of a self-composition (a third of
    it at a composed grid of two million points); the array equals
    ``spectrum ** count`` to the bit (tested against it and against
    dp-accounting's composition).  A spectrum that is not
    conjugate-symmetric to the bit, or a ``cpow`` that is not (checked on
    64 entries of the upper half), gets the power of the whole spectrum.
    """
    n = spectrum.shape[0]
    half = n // 2 + 1  # entries 0 .. n // 2; the rest mirror entries (n - 1) // 2 .. 1
    mirrored = spectrum[1 : (n + 1) // 2][::-1]
    if count <= 2 or n < 4 or not np.array_equal(spectrum[half:], np.conjugate(mirrored)):
        # ``spectrum ** 2`` is NumPy's square, which rounds otherwise than
        # its power by 2 (and costs a product): left as it was.
        return spectrum**count
    out = np.empty_like(spectrum)
    np.power(spectrum[:half], count, out=out[:half])
    # The symmetry of the C library's cpow, spot-checked on this platform:
    # a library whose cpow does not commute with conjugation (none known)
    # gets the whole power.
    probe = np.unique(np.linspace(half, n - 1, 64).astype(np.intp))
    if not np.array_equal(np.power(spectrum[probe], count), np.conjugate(out[n - probe])):
        return spectrum**count
    np.conjugate(out[1 : (n + 1) // 2][::-1], out=out[half:])
    return out


def _self_convolve_bounds(probs, count, tail_mass_truncation):
    """``common.compute_self_convolve_bounds`` (Chernoff bounds at 40 orders) on one array.

    The bounds only place the window the FFT keeps (the mass outside it is
    at most ``tail_mass_truncation`` either way); the log-MGFs are computed
    by products rather than exponentials, equal to dp-accounting's to
    rounding.
    """
    n = len(probs)
    upper, lower = (n - 1) * count, 0
    if tail_mass_truncation == 0:
        return lower, upper
    ks = np.concatenate((np.arange(-20, 0), np.arange(1, 21)))
    orders = ks / n
    # log sum_i p_i exp(k i / n), shifted by its largest exponent (0 for
    # k < 0, k (n - 1) / n for k > 0): the k-th powers of one exponential
    # each side, by repeated products instead of 40 n exponentials.
    index = np.arange(n)
    down, up = np.exp(-index / n), np.exp((index - (n - 1)) / n)
    sums = np.empty(len(ks))
    term_down, term_up = probs.copy(), probs.copy()
    for k in range(1, 21):
        term_down *= down
        term_up *= up
        sums[20 - k] = term_down.sum()
        sums[19 + k] = term_up.sum()
    with np.errstate(divide="ignore"):
        log_mgfs = np.log(sums) + np.where(ks > 0, orders * (n - 1), 0.0)
    log_two = math.log(2 / tail_mass_truncation)
    for order, log_mgf in zip(orders, log_mgfs, strict=True):
        bound = (count * float(log_mgf) + log_two) / order
        if not math.isfinite(bound):
            continue
        if order > 0:
            upper = min(upper, math.ceil(bound))
        else:
            lower = max(lower, math.floor(bound))
    return lower, upper


def _epsilon_for_delta(pld, delta):
    """``PrivacyLossDistribution.get_epsilon_for_delta(delta)``, each PMF read as arrays."""
    eps = _pmf_epsilon(pld._pmf_remove, delta)
    if pld._symmetric:
        return eps
    return max(eps, _pmf_epsilon(pld._pmf_add, delta))


#: Losses read per block by :func:`_pmf_epsilon` at first (the block then doubles).
_READ_BLOCK = 4096


def _pmf_epsilon(pmf, delta):
    """``DensePLDPmf.get_epsilon_for_delta``: dp-accounting's loop from the largest loss down, as prefix sums.

    The loop adds the masses loss by loss (largest first) and stops before
    the first loss ``l`` with ``log((upper - delta) / lower) >= l``; the
    prefix sums below are the same sequential sums (``np.cumsum``), the
    losses the same repeated subtraction (``itertools.count``).  They are
    read in blocks from the largest loss down (each block's sums continue
    from the last one's, so every sum is the same float), and the read
    ends at the block where the loop stops: near the loss epsilon, a
    fraction of a composed PMF whose grid spans the losses of every step
    (millions of points at small noise, where the whole read took as long
    as the composition's FFT).
    """
    from dp_accounting.pld import pld_pmf

    if not isinstance(pmf, pld_pmf.DensePLDPmf):
        return pmf.get_epsilon_for_delta(delta)
    infinity = pmf._infinity_mass
    if infinity > delta:
        return math.inf
    probs = np.flip(pmf._probs)
    d = pmf._discretization
    n = len(probs)
    top = (pmf._lower_loss + n - 1) * d
    # Carried from block to block: the last loss, and the masses before the block's first loss.
    loss, mass_upper, mass_lower = top + d, infinity, 0.0
    start, block = 0, _READ_BLOCK
    while start < n:
        end = min(n, start + block)
        if start == 0:
            losses = np.cumsum(np.concatenate(([top], np.full(end - 1, -d))))
        else:
            losses = np.cumsum(np.concatenate(([loss], np.full(end - start, -d))))[1:]
        chunk = probs[start:end]
        # Masses before loss k is added (k = start .. end), as the loop holds them.
        upper = np.cumsum(np.concatenate(([mass_upper], chunk)))
        lower = np.cumsum(np.concatenate(([mass_lower], np.exp(-losses) * chunk)))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            stops = (upper[:-1] > delta) & (lower[:-1] > 0) & (np.log((upper[:-1] - delta) / lower[:-1]) >= losses)
            # The loop returns max(0, loss) after adding a loss whose lower mass
            # is still zero once the upper mass reaches delta.
            saturated = (upper[1:] >= delta) & (lower[1:] == 0)
        k_stop = int(np.argmax(stops)) if stops.any() else None
        k_sat = int(np.argmax(saturated)) if saturated.any() else None
        if k_sat is not None and (k_stop is None or k_sat < k_stop):
            return max(0, float(losses[k_sat]))
        if k_stop is not None:
            mass_upper, mass_lower = upper[k_stop], lower[k_stop]
            break
        loss, mass_upper, mass_lower = losses[-1], upper[-1], lower[-1]
        start, block = end, 2 * block
    if mass_upper <= mass_lower + delta:
        return 0
    return math.log((mass_upper - delta) / mass_lower)
