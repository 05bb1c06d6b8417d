"""Calibration: solve for the noise that meets a target (epsilon, delta).

Kept apart from accounting (autodp's calibrator idea): a calibrator asks the
accountant "what does this plan cost?" and searches one scalar, the noise
multiplier shared by the plan, with the root finder of :mod:`skdp.privacy.roots`
(re-exported here: :func:`illinois_bracket`, :func:`bisect`, :func:`bracket`).  Every estimator calibrates through
:func:`calibrate_noise_multiplier`, so no noise scale is computed inline.

Calibration is cached here, and only here: the cost of a plan depends on its
events alone (never on data), and grid searches refit the same plan many
times, each a bisection of some fifty costings.  The cache is keyed by the
events the plan's mechanisms will record, which depend on the
``secure_noise`` argument (a secure Gaussian release is a
:class:`DiscreteGaussianEvent`, which costs more), so a plan calibrated under
one setting is never reused under the other.  The setting is an argument,
passed by the estimator from its plan: nothing here reads a global.
"""

from __future__ import annotations

import functools
import math
import numbers
import re

from .accountants import get_accountant
from .accountants.conversions import gaussian_delta
from .events import (
    REPLACE_ONE,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    SubsampledGaussianEvent,
    _check_relation,
)
from .ledger import DEFAULT_COMPOSITION, _check_composition, compose
from .roots import NoCrossing, bisect, bracket, bracket_near, illinois_bracket, log_gap, secant_within

#: Event a mechanism records under ``secure_noise`` for each floating-point one.
_SECURE_EVENTS = {GaussianEvent: DiscreteGaussianEvent, LaplaceEvent: DiscreteLaplaceEvent}


def _as_released(event, secure_noise):
    """The event a mechanism will actually record for a planned ``event``.

    Under ``secure_noise`` a Gaussian mechanism samples the discrete Gaussian
    and records a :class:`DiscreteGaussianEvent`, which the accountant keeps out
    of the exact continuous-Gaussian composition and whose (epsilon, delta)
    comes from its RDP curve; a Laplace mechanism records a
    :class:`DiscreteLaplaceEvent`, whose RDP curve is that of randomised
    response.  A plan written with the floating-point events must be costed
    the same way, or the calibrated noise would fall short of what the ledger
    charges.
    """
    secure = _SECURE_EVENTS.get(type(event))
    if secure is not None and secure_noise:
        return secure(
            count=event.count, neighbouring=event.neighbouring, noise_multiplier=event.noise_multiplier
        )
    return event


def _check_budget(epsilon, delta):
    if not (isinstance(epsilon, numbers.Real) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}.")
    if not (isinstance(delta, numbers.Real) and 0 <= delta < 1):
        raise ValueError(f"delta must be in [0, 1), got {delta!r}.")


def _explain_failure(calibrate):
    """Name the parameters and the cause when no finite noise level meets the target.

    The search brackets the multiplier within ``[1e-12, 1e12]`` and its inner
    steps (the RDP start of a PLD search, an event built from a non-finite
    multiplier) fail with messages about themselves; the caller asked for an
    ``(epsilon, delta)`` under one composition, so that is what the error says.
    """

    @functools.wraps(calibrate)
    def wrapper(make_events, epsilon, delta=0.0, composition=DEFAULT_COMPOSITION, *args, **kwargs):
        _check_budget(epsilon, delta)
        try:
            return calibrate(make_events, epsilon, delta, composition, *args, **kwargs)
        except (ValueError, OverflowError, ZeroDivisionError) as exc:
            message = str(exc)
            unreachable = message.startswith("No noise level meets") or (
                "must be a positive finite number" in message and re.search(r"got \S*(nan|inf)", message)
            )
            if isinstance(exc, ValueError) and not unreachable:
                raise  # another cause (an event no accountant supports, ...): its own message
            if delta == 0:
                cause = "delta=0, but Gaussian noise needs delta > 0: set delta (1e-5 is the default)"
            elif delta >= 0.01:
                cause = (
                    "delta is too large for a meaningful guarantee (the accountants do not go below "
                    "the smallest noise it would allow); use a delta well below 1/n_samples, e.g. 1e-5"
                )
            else:
                floor = math.nan
                if composition in ("basic", "advanced"):
                    floor = _cost_floor(make_events, delta, composition, args, kwargs)
                if math.isfinite(floor) and floor > epsilon:
                    # Basic and advanced composition convert each use on its
                    # own share of delta: with thousands of uses (DP-SEP's
                    # steps) that conversion has a floor no noise lowers.
                    cause = (
                        f"this plan costs at least epsilon={floor:.3g} under {composition!r} composition "
                        "whatever the noise (each of its uses is converted to (epsilon, delta) on its own "
                        "share of delta, and that conversion has a floor); use composition='pld' (or "
                        "'rdp'), or raise epsilon above it"
                    )
                else:
                    cause = (
                        "epsilon is too small: the noise needed is beyond what can be computed (over 1e12 "
                        "times the sensitivity), so the fit would release noise only; raise epsilon"
                    )
            raise ValueError(
                f"No noise level meets epsilon={epsilon:g}, delta={delta:g} under {composition!r} "
                f"composition: {cause}."
            ) from None

    return wrapper


def _cost_floor(make_events, delta, composition, args, kwargs):
    """The plan's floor: its cost at a noise multiplier of ``1e9`` where that is no lower than at ``1e6``, else ``nan``.

    Noise that grows a thousandfold lowers a plan's cost by orders of
    magnitude unless the accountant's per-use conversion has a floor (basic
    and advanced composition of many subsampled uses, each converted on its
    own share of delta).
    """
    neighbouring = kwargs.get("neighbouring", args[0] if args else REPLACE_ONE)
    try:
        costs = [
            compose([e.to_relation(neighbouring) for e in make_events(z)], delta, composition).epsilon
            for z in (1e6, 1e9)
        ]
    except Exception:  # only a better message is at stake: the original cause stands
        return math.nan
    return costs[1] if costs[1] > 0.5 * costs[0] else math.nan


def _plan_cost(events, delta, composition, pld_interval=None):
    """Epsilon of the composition of ``events`` at ``delta``, cached by the events."""
    try:
        hash(events)
    except TypeError:  # an event type that is not hashable: cost it uncached
        return compose(list(events), delta, composition, pld_interval).epsilon
    return _cached_plan_cost(events, delta, composition, pld_interval)


@functools.lru_cache(maxsize=65536)
def _cached_plan_cost(events, delta, composition, pld_interval=None):
    return compose(list(events), delta, composition, pld_interval).epsilon


#: Relative precision of a bisection costed by the "pld" accountant, whose
#: costings take tenths of a second on long DP-SGD plans: 1e-4 of the noise
#: is far below what changes a fit's utility, and the returned multiplier is
#: the upper end of the bracket, so the plan still never exceeds its target.
PLD_RTOL = 1e-4


@_explain_failure
def calibrate_noise_multiplier(
    make_events,
    epsilon,
    delta=0.0,
    composition=DEFAULT_COMPOSITION,
    neighbouring=REPLACE_ONE,
    rtol=1e-6,
    *,
    secure_noise=False,
    pld_interval=None,
):
    """Smallest noise multiplier whose plan costs at most ``(epsilon, delta)``.

    Parameters
    ----------
    make_events : callable
        ``make_events(z)`` returns the list of :class:`PrivacyEvent` the fit will
        record when every mechanism uses noise multiplier ``z`` times its
        weight (the plan: which mechanisms, how often, with which relative
        noise).  The cost must decrease as ``z`` grows.
    epsilon, delta : float
        Target budget.
    composition : {"pld", "rdp", "zcdp", "advanced", "basic"}, default="pld"
        Accountant the plan is costed with.  Under ``"pld"`` the bisection
        starts from the ``"rdp"`` solution (an upper end: PLD never reports
        more than RDP) and stops at a relative precision of
        ``max(rtol, PLD_RTOL)``; each costing is cached by plan.
    neighbouring : {"replace_one", "add_remove"}
        Relation the target refers to; events are converted to it.
    rtol : float
        Relative precision of the bisection.  The returned multiplier is the
        upper end of the final bracket, so the plan never exceeds the target.
    secure_noise : bool, default=False
        Whether the plan's mechanisms sample exactly on a grid (the fit's
        :attr:`~skdp.base.PrivacyPlan.secure_noise`): its Gaussian and Laplace
        events are then costed as the discrete events the mechanisms will
        record.
    pld_interval : float or None, default=None
        Grid step of the ``"pld"`` costings (None: dp-accounting's ``1e-4``),
        the one the fit's ledger will compose on
        (:attr:`~skdp.privacy.PrivacyLedger.pld_interval`):
        :func:`pld_interval_for` of the target epsilon for a plan that
        accounts on a relative grid.

    Returns
    -------
    z : float
        Noise multiplier.
    """
    _check_budget(epsilon, delta)
    _check_composition(composition)
    _check_relation(neighbouring)

    def events_at(z):
        return tuple(_as_released(e, secure_noise).to_relation(neighbouring) for e in make_events(z))

    def cost(z):
        return _plan_cost(events_at(z), delta, composition, pld_interval)

    if composition == "rdp" and delta > 0:
        # A plan of plain Gaussian releases (the "pld" calibration's RDP
        # start too): the same bisection, located by one cheap search.
        z = _replay_exact_gaussian(cost, events_at, epsilon, delta, rtol)
        if z is not None:
            return z
    if composition == "pld":
        probe = [_as_released(e, secure_noise).to_relation(neighbouring) for e in make_events(1.0)]
        if not get_accountant("pld").unsupported(probe):
            if any(_is_subsampled(e) for e in probe):
                # Every subsampled plan, whether or not RDP can cost it (RDP
                # has no curve for replace-one Poisson batches): coarse PLDs
                # locate the multiplier, the fine one only accepts it.
                z = _refine_from_coarse(make_events, epsilon, delta, neighbouring, secure_noise, pld_interval)
                if z is not None:
                    return z
            if not get_accountant("rdp").unsupported(probe):
                try:
                    return _refine_from_rdp(
                        cost, make_events, epsilon, delta, neighbouring, secure_noise, rtol
                    )
                except ValueError as exc:
                    if not str(exc).startswith("No noise level meets"):
                        raise
                    # RDP's orders cannot certify so small an epsilon (its
                    # conversion needs an order near log(1/delta) / epsilon):
                    # bisect on PLD alone, which can.
                    return _bisect(cost, epsilon, delta, composition, max(rtol, PLD_RTOL))
            unsampled = [_unsampled(e) for e in probe]
            if not get_accountant("rdp").unsupported(unsampled):
                return _descend_from_unsampled(
                    cost, make_events, epsilon, delta, neighbouring, secure_noise, rtol
                )
        rtol = max(rtol, PLD_RTOL)
    return _bisect(cost, epsilon, delta, composition, rtol)


#: Grid step of the coarse PLDs that locate a subsampled plan's multiplier
#: (ten times dp-accounting's default): a tenth of the grid points, a tenth
#: of the cost of each costing.  Only the final multiplier's fine costing
#: decides what the plan spends.
PLD_COARSE_INTERVAL = 1e-3


def _is_subsampled(event):
    return isinstance(event, SubsampledGaussianEvent) and event.sampling_rate < 1.0


#: Share of the target a subsampled plan calibrated by
#: :func:`_refine_from_coarse` may leave unspent: its fine PLD epsilon is
#: in ``[epsilon * (1 - PLD_SLACK), epsilon]``: the multiplier is then
#: within about ``PLD_SLACK`` of the smallest that meets the target, as
#: the bracketed search's :data:`PLD_RTOL`.
PLD_SLACK = 1e-4

#: Target epsilon above which the coarse grid widens with the target
#: (:func:`_coarse_interval`) and the acceptance window moves down by
#: :data:`PLD_SLACK` (:func:`_acceptance`).
PLD_RELATIVE_FROM = 10.0


def _coarse_interval(epsilon):
    """Grid step of the coarse PLDs of a plan targeting ``epsilon``.

    :data:`PLD_COARSE_INTERVAL` up to :data:`PLD_RELATIVE_FROM`, then
    ``PLD_COARSE_INTERVAL * sqrt(epsilon / PLD_RELATIVE_FROM)``.  The coarse
    PLD only locates the multiplier; what matters is how far its epsilon
    lies above the fine one's at the same multiplier (the pessimistic
    rounding of the composed losses), relative to the target: that offset
    grows as the square of the grid step and, at a fixed step, falls
    steeply with epsilon (at a step of ``1e-3`` on DP-SEP's 534-step plan:
    ``6.7e-4`` of epsilon at epsilon 1, ``1.4e-5`` at 10, ``5.5e-7`` at
    100).  With the step growing as ``sqrt(epsilon)`` above 10 the offset
    stays below ``1.4e-5`` of the target, a seventh of the acceptance
    window (``PLD_SLACK``), so the coarse root is still accepted on the
    first fine costing, while the costings of the search, whose loss
    grids widen as the multiplier shrinks (a tenth of a second each at
    epsilon 100 on DP-SEP's plan at ``1e-3``), shrink with the step.  A
    rule of the target epsilon alone (public); below 10 the grid is the
    one calibrations have always located on.
    """
    return PLD_COARSE_INTERVAL * math.sqrt(max(1.0, epsilon / PLD_RELATIVE_FROM))


#: Share of the target epsilon a relative PLD grid steps by (:func:`pld_interval_for`):
#: dp-accounting's ``1e-4`` at epsilon 10.
PLD_RELATIVE_INTERVAL = 1e-5


def pld_interval_for(epsilon):
    """Grid step of the PLD a subsampled plan targeting ``epsilon`` is calibrated and accounted on; None for the default.

    None (dp-accounting's ``1e-4``) up to :data:`PLD_RELATIVE_FROM`, then
    ``PLD_RELATIVE_INTERVAL * epsilon``: the same step relative to the
    target as ``1e-4`` at epsilon 10.  dp-accounting's connect-the-dots PLD
    is pessimistic on any grid (every loss rounded up, the truncated tail
    charged to delta), so its epsilon on a coarser grid is still an upper
    bound, above the ``1e-4`` one at the same multiplier by a smooth
    offset (``5.5e-7`` of epsilon at a step of ``1e-3`` on DP-SEP's
    534-step plan at epsilon 100); the calibration then accepts a
    multiplier that meets the target on this grid, about ``1e-4`` more
    noise.  What it saves: the loss range of the one-use PLD widens as the
    multiplier shrinks, and at epsilon 100 the composed ``1e-4`` grid has
    two million points (a third of a second per costing, and the ledger
    composes it once more at the end of the fit); on the relative grid
    its size, and cost, no longer grow with epsilon.  A rule of the
    public target epsilon alone; an estimator that calibrates with it
    sets the same step on its ledger
    (:attr:`~skdp.privacy.PrivacyLedger.pld_interval`) so that the
    ledger composes what the calibration costed, and reports (above
    :data:`PLD_RELATIVE_FROM`, :func:`_acceptance`) at most ``epsilon (1 -
    PLD_SLACK)``, never more than the ``1e-4`` grid's calibration did.
    """
    if not epsilon > PLD_RELATIVE_FROM:
        return None
    return PLD_RELATIVE_INTERVAL * float(epsilon)


def _acceptance(epsilon):
    """``(window, aim)`` of the fine costing that accepts a subsampled plan's multiplier.

    Up to :data:`PLD_RELATIVE_FROM`, the window is ``[epsilon (1 -
    PLD_SLACK), epsilon]`` and the secant aims at its centre.  Above it the
    coarse grid is wider than the one the multiplier used to be located on
    (:func:`_coarse_interval`), which moves the multiplier accepted within
    that window; the window then moves down by ``PLD_SLACK`` (``[epsilon
    (1 - 2 PLD_SLACK), epsilon (1 - PLD_SLACK)]``, aim at its centre), so
    that the epsilon the fit reports is never above what the former
    search's multiplier reported (at least ``epsilon (1 - PLD_SLACK)``), for
    at most ``PLD_SLACK`` of the target more left unspent.  The coarse
    search aims at the same point.
    """
    if epsilon <= PLD_RELATIVE_FROM:
        return (epsilon * (1 - PLD_SLACK), epsilon), epsilon * (1 - PLD_SLACK / 2)
    return (epsilon * (1 - 2 * PLD_SLACK), epsilon * (1 - PLD_SLACK)), epsilon * (1 - 1.5 * PLD_SLACK)


def _refine_from_coarse(make_events, epsilon, delta, neighbouring, secure_noise, pld_interval=None, max_fine=5):
    """PLD calibration of a subsampled plan: coarse PLDs locate the multiplier, fine ones accept it.

    A subsampled history has no closed form, and each costing at
    dp-accounting's grid step builds and self-composes a PLD.  The
    multiplier is located on PLDs ten times coarser
    (:data:`PLD_COARSE_INTERVAL`, a tenth of the grid), whose epsilon is
    above the fine one by a smooth offset (the pessimistic rounding of each
    composed step, about the grid step times the number of steps).  The
    coarse root and the coarse curve's log-log slope there start a secant
    search on the *fine* PLD (the one the ledger composes): each round
    costs a candidate on the fine grid and steps along the slope (the
    secant of the last two fine costings once there are two) to
    ``epsilon * (1 - PLD_SLACK / 2)``.  A candidate is accepted when its
    fine PLD epsilon is in ``[epsilon * (1 - PLD_SLACK), epsilon]``: the
    plan meets the target (the ledger reports the smaller of that PLD
    bound and RDP's) and leaves at most ``PLD_SLACK`` of it unspent.
    Usually two fine costings.  None after ``max_fine`` or on any
    difficulty: the caller then brackets from the RDP answer.

    The coarse bracket is centred on the central-limit guess of Bu, Dong,
    Long & Su (2020) (:func:`_clt_guess`), only a starting point: it is
    widened until the coarse costs straddle the target.

    Above an epsilon of :data:`PLD_RELATIVE_FROM` the coarse grid widens
    with the target (:func:`_coarse_interval`) and the window moves down
    by ``PLD_SLACK`` (:func:`_acceptance`): the coarse search then aims
    at the window's centre rather than at ``epsilon``.
    """
    from .accountants.pld import VALUE_DISCRETIZATION_INTERVAL, PLDAccountant

    fine = VALUE_DISCRETIZATION_INTERVAL if pld_interval is None else pld_interval
    coarse_accountant = PLDAccountant(
        value_discretization_interval=max(_coarse_interval(epsilon), fine), closed_forms=False
    )
    fine_accountant = PLDAccountant(value_discretization_interval=fine, closed_forms=False)

    def events_at(z):
        return [_as_released(e, secure_noise).to_relation(neighbouring) for e in make_events(z)]

    @functools.lru_cache(maxsize=256)
    def coarse(z):
        return coarse_accountant.pld_epsilon(events_at(z), delta)

    window, aim = _acceptance(epsilon)
    # Up to PLD_RELATIVE_FROM the coarse search aims at epsilon itself, as it always has.
    located = epsilon if epsilon <= PLD_RELATIVE_FROM else aim
    z = _clt_guess(events_at(1.0), epsilon, delta)
    if z is None:
        return None
    z, width = _coarse_start(coarse, located, z)
    z = bracket_near(coarse, located, z, width, rtol=1e-4)
    if z is None:
        return None
    step = 1.01
    slope = math.log(coarse(z * step) / coarse(z)) / math.log(step)
    return secant_within(
        lambda w: fine_accountant.pld_epsilon(events_at(w), delta),
        z,
        slope,
        window,
        aim,
        max_fine,
    )


#: How far (a factor on the cost) the central-limit guess may miss the
#: target before :func:`_coarse_start` moves it: within it, the bracket
#: search starts from the guess itself.
CLT_TRUST = 2.0


def _coarse_start(coarse, epsilon, z, max_steps=6):
    """Start of the coarse bracket search: ``(z, width)`` for :func:`~skdp.privacy.roots.bracket_near`.

    The central-limit guess is close where the subsampled Gaussian's
    privacy loss is nearly Gaussian (large multipliers, small epsilon);
    at small multipliers (epsilon of tens) it is not, and growing the
    bracket from it by squared steps overshoots to a multiplier far below
    the root, whose PLD has a wide loss range and is the slowest costing
    of the search.  When ``coarse(z)`` misses ``epsilon`` by more than
    :data:`CLT_TRUST`, secant steps on ``log coarse`` against ``log z``
    (the curve is smooth and decreasing; the first slope from a probe a
    factor 1.25 towards the root) move ``z`` towards it, each step at most
    a factor 2, until the cost is within 2% of the target;
    the bracket is then grown from there by steps of 1%.  Only the start
    changes: :func:`~skdp.privacy.roots.bracket_near` still brackets the
    root to the same precision, and the fine PLD still accepts it.
    """
    target = math.log(epsilon)
    y = math.log(coarse(z))
    if abs(y - target) <= math.log(CLT_TRUST):
        return z, 1.05
    x = math.log(z)
    x_prev, y_prev = x, y
    x = x + (math.log(1.25) if y > target else -math.log(1.25))  # a probe towards the root: the first slope
    for _ in range(max_steps):
        c = coarse(math.exp(x))
        if not (math.isfinite(c) and c > 0):
            return math.exp(x_prev), 1.05
        y = math.log(c)
        if abs(y - target) <= math.log(1.02):
            break
        slope = (y - y_prev) / (x - x_prev)
        if not (math.isfinite(slope) and slope < 0):
            break
        step = min(max((target - y) / slope, -math.log(2.0)), math.log(2.0))
        x_prev, y_prev, x = x, y, x + step
    return math.exp(x), 1.01


def _clt_guess(events, epsilon, delta):
    """A starting multiplier for a subsampled plan (``_refine_from_coarse``), or None.

    The largest ``T q^2`` of the plan's subsampled events at multiplier 1
    sets ``mu``; ``mu`` is the Gaussian DP that meets ``(epsilon, delta)``
    (the inverse of :func:`gaussian_noise_multiplier`).
    """
    sampled = [e for e in events if _is_subsampled(e)]
    if not sampled or delta <= 0:
        return None
    e = max(sampled, key=lambda e: e.count * e.sampling_rate**2)
    mu = 1.0 / gaussian_noise_multiplier(epsilon, delta)
    ratio = (mu / e.sampling_rate) ** 2 / e.count
    return e.noise_multiplier / math.sqrt(math.log1p(ratio))


def _unsampled(event):
    """The plan's event without its subsampling (a plain Gaussian of the same multiplier)."""
    if isinstance(event, SubsampledGaussianEvent):
        return GaussianEvent(
            count=event.count, neighbouring=event.neighbouring, noise_multiplier=event.noise_multiplier
        )
    return event


def _descend_from_unsampled(cost, make_events, epsilon, delta, neighbouring, secure_noise, rtol):
    """PLD calibration of a plan RDP cannot cost (replace-one Poisson batches).

    Starts from the multiplier the same plan needs *without* subsampling (its
    exact Gaussian composition, cheap), a valid upper end since subsampling
    only amplifies privacy, and halves it until the PLD cost exceeds the
    target.  Costing from above keeps every PLD evaluated
    at a multiplier near or above the answer: a discretised PLD at a tiny
    multiplier has a huge loss range and takes minutes to build.
    """
    hi = calibrate_noise_multiplier(
        lambda z: [_unsampled(e) for e in make_events(z)],
        epsilon,
        delta,
        "rdp",
        neighbouring,
        rtol,
        secure_noise=secure_noise,
    )
    # hi failing the PLD cost is not expected (amplification); stay sound regardless.
    return _descend_from(cost, epsilon, delta, hi, 0.5, rtol)


def _refine_from_rdp(cost, make_events, epsilon, delta, neighbouring, secure_noise, rtol):
    """PLD calibration bracketed by the RDP solution (an upper end: PLD <= RDP).

    From that upper end, steps down by a factor 0.9 until a multiplier
    fails, then shrinks the bracket (:func:`_shrink_pld`).
    """
    hi = calibrate_noise_multiplier(
        make_events, epsilon, delta, "rdp", neighbouring, rtol, secure_noise=secure_noise
    )
    return _descend_from(cost, epsilon, delta, hi, 0.9, rtol)


def _descend_from(cost, epsilon, delta, hi, down, rtol):
    """From an upper end ``hi`` of the PLD multiplier, step down by ``down`` to a bracket and shrink it.

    Shared by the two PLD calibrations started from an RDP answer
    (:func:`_refine_from_rdp`, and the unsampled bound of the subsampled
    plans): :func:`~skdp.privacy.roots.bracket` grows the bracket from
    ``(hi * down, hi)``, then :func:`_shrink_pld` narrows it.
    """
    try:
        lo, hi = bracket(cost, epsilon, hi * down, hi, up=1.25, down=down)
    except NoCrossing:
        raise ValueError(
            f"No noise level meets epsilon={epsilon}, delta={delta} under 'pld' composition."
        ) from None
    return hi if lo is None else _shrink_pld(cost, epsilon, lo, hi, max(rtol, PLD_RTOL))


class _NotExactGaussian(Exception):
    """A plan outside the exact Gaussian composition (:func:`_replay_exact_gaussian` declines it)."""


def _exact_gaussian_delta(events, epsilon):
    """Delta at ``epsilon`` of the exact composition of a plan of plain Gaussian releases.

    ``k`` Gaussian releases with multipliers ``z_i`` compose exactly into
    one Gaussian of multiplier ``(sum count_i / z_i^2)^(-1/2)`` (Dong, Roth
    & Su 2022, Cor. 3.3), whose privacy profile is Balle & Wang's (2018,
    Thm. 8, :func:`~skdp.privacy.accountants.conversions.gaussian_delta`):
    two normal CDFs, no root search.  Raises :class:`_NotExactGaussian` for
    any other plan.
    """
    combined = 0.0
    for e in events:
        if type(e) is not GaussianEvent:
            raise _NotExactGaussian
        if e.count > 0:
            combined += e.count / e.noise_multiplier**2
    if not (combined > 0 and math.isfinite(combined)):
        raise _NotExactGaussian
    return gaussian_delta(combined**-0.5, epsilon)


#: Relative margins tried around the crossing located on the exact delta
#: (:func:`_replay_exact_gaussian`) until both ends are certified: the
#: first suffices unless epsilon is below about 1e-2.
_REPLAY_MARGINS = (1e-9, 1e-7, 1e-5, 1e-3)


def _certainty(epsilon):
    """How far the exact epsilon must be from ``epsilon`` for the costed one to be on the same side.

    The costing (:func:`~skdp.privacy.accountants.conversions.gaussian_epsilon`)
    is Brent's root of the computed profile, within ``1e-12 + 4 DBL_EPSILON
    |eps|`` of the crossing (scipy's stopping rule, kept by
    :func:`~skdp.privacy.roots.brentq`).  The computed profile and the
    composed multiplier (summed here in another order than the ledger's)
    move that crossing by a few units in the last place more.  ``1e-11 +
    1e-12 |eps|`` covers all of it tenfold.
    """
    return 1e-11 + 1e-12 * abs(epsilon)


def _replay_exact_gaussian(cost, events_at, epsilon, delta, rtol):
    """:func:`_bisect`'s answer for a plan of plain Gaussian releases, without nested searches; None for other plans.

    The cost of such a plan, under ``"rdp"`` and ``"pld"`` alike, is the
    epsilon of its exact composition (one Gaussian,
    :func:`~skdp.privacy.accountants.rdp.exact_gaussian_epsilon`), each
    costing a root search of Balle & Wang's delta in epsilon (Brent, some
    twenty evaluations); the bisection of the multiplier around it nested
    the two searches, a dozen costings.  Its answer is fixed by its
    decisions ``cost(z) <= epsilon`` alone
    (:func:`~skdp.privacy.roots.bisect`), and the profile is decreasing in
    epsilon: the exact epsilon at ``z`` is at most ``e`` exactly when the
    exact delta at ``e`` is at most ``delta``.  So:

    1. *One* search on the cheap side locates the crossing: the delta at
       the target epsilon as a function of the multiplier
       (:func:`_exact_gaussian_delta`, two normal CDFs per point), by
       :func:`~skdp.privacy.roots.illinois_bracket` to ``1e-12``.
    2. The bracket is widened by a margin (:data:`_REPLAY_MARGINS`) to
       ``(fails, meets)`` and certified, one delta each: the exact epsilon
       at ``meets`` is at most ``epsilon - t`` and the one at ``fails`` above
       ``epsilon + t``, ``t`` (:func:`_certainty`) being more than the
       costing's distance from the exact epsilon.  Every multiplier from
       ``meets`` up then costs at most ``epsilon`` and every one down
       from ``fails`` more (the exact epsilon decreases in the
       multiplier), whatever the costing's rounding.
    3. The bracket and the bisection of :func:`_bisect` run as they did,
       with those decisions taken by side and any midpoint between
       ``fails`` and ``meets`` costed (one in a few hundred calibrations):
       the same decisions, the same multiplier to the bit.

    None (the caller bisects as before) for a plan that is not only plain
    Gaussian releases, or where the search does not bracket or certify.
    """
    def delta_at(z, at=epsilon):
        return _exact_gaussian_delta(events_at(z), at)

    slack = _certainty(epsilon)
    if not epsilon > slack:
        return None
    try:
        lo, hi = bracket(delta_at, delta, 1e-3, 1.0, up=4.0, down=0.25)
        if lo is None:
            return None
        below, above = illinois_bracket(delta_at, delta, lo, hi, rtol=1e-12)
        for margin in _REPLAY_MARGINS:
            fails, meets = below / (1 + margin), above * (1 + margin)
            if delta_at(fails, epsilon + slack) > delta and delta_at(meets, epsilon - slack) <= delta:
                break
        else:
            return None
    except (_NotExactGaussian, NoCrossing, ArithmeticError, ValueError):
        return None

    def decided(z):
        # Certified sides: outside (fails, meets) the cost's side is known.
        if z >= meets:
            return 0.0
        if z <= fails:
            return math.inf
        return cost(z)

    lo, hi = bracket(decided, epsilon, 1e-3, 1.0, up=4.0, down=0.25)
    return hi if lo is None else bisect(decided, epsilon, lo, hi, rtol, located=(fails, meets))


def _bisect(cost, epsilon, delta, composition, rtol):
    """Bracket the multiplier from ``[1e-3, 1]`` by factors of 4, then bisect it (:func:`_shrink`)."""
    try:
        lo, hi = bracket(cost, epsilon, 1e-3, 1.0, up=4.0, down=0.25)
    except NoCrossing:
        raise ValueError(
            f"No noise level meets epsilon={epsilon}, delta={delta} under "
            f"{composition!r} composition (delta=0 with Gaussian noise?)."
        ) from None
    return hi if lo is None else _shrink(cost, epsilon, lo, hi, rtol)


#: Bisection of a bracket, reproducible to the bit (:func:`skdp.privacy.roots.bisect`).
_shrink = bisect

#: The calibrator's root finder (:func:`skdp.privacy.roots.illinois_bracket`),
#: for every one-dimensional search of skdp.
_crossing = illinois_bracket


def _shrink_pld(cost, epsilon, lo, hi, rtol):
    """Shrink ``[lo, hi]`` (``cost(lo) > epsilon >= cost(hi)``) to ``hi / lo <= 1 + rtol``; return ``hi``.

    The Illinois variant of false position (:func:`illinois_bracket`, with
    no limit on the costings): a handful of costings where bisection needs
    ``log2(log(hi / lo) / rtol)``, which matters when each costing builds a
    PLD.  ``hi`` is always a costed multiplier meeting the target.

    Where the search never moves ``hi``, the answer is ``exp(log(hi))``,
    which may differ from ``hi`` by an ulp: this search used to run on
    ``log z`` and return the exponential of its upper end, and the pinned
    multipliers are those.  It is returned if it is not below ``hi`` or if
    its own cost meets the target; otherwise ``hi``.
    """
    z = illinois_bracket(cost, epsilon, lo, hi, rtol, max_evals=None)[1]
    if z != hi:
        return z
    w = math.exp(math.log(hi))
    return w if w >= hi or cost(w) <= epsilon else hi


_gap = log_gap


def laplace_noise_multiplier(epsilon, n_uses=1):
    """Laplace scale over L1 sensitivity for ``n_uses`` equal-share releases.

    Basic composition of pure DP (Dwork & Roth 2014, Thm. 3.16): each release
    gets ``epsilon / n_uses``, hence scale ``sensitivity * n_uses / epsilon``.
    """
    _check_budget(epsilon, 0.0)
    return n_uses / epsilon


def gaussian_noise_multiplier(epsilon, delta, calibration="analytic"):
    """Gaussian std over L2 sensitivity for one release at (epsilon, delta).

    ``"classic"``: ``sqrt(2 log(1.25/delta)) / epsilon`` (Dwork & Roth 2014,
    Thm. A.1), valid for epsilon < 1 only.  ``"analytic"``: the smallest
    multiplier meeting the exact Gaussian privacy profile (Balle & Wang 2018,
    Thm. 8), valid for every epsilon and always smaller.
    """
    _check_budget(epsilon, delta)
    if delta <= 0:
        raise ValueError("The Gaussian mechanism needs delta > 0.")
    if calibration == "classic":
        if epsilon >= 1:
            raise ValueError("The classic Gaussian calibration requires epsilon < 1; use 'analytic'.")
        return math.sqrt(2 * math.log(1.25 / delta)) / epsilon
    if calibration != "analytic":
        raise ValueError(f"calibration must be 'analytic' or 'classic', got {calibration!r}.")

    def delta_at(z):
        return gaussian_delta(z, epsilon)

    lo, hi = bracket(delta_at, delta, 1e-3, 1.0, up=2.0, down=0.5, lowest=0.0, highest=math.inf)
    # Every midpoint evaluated (locate=False): the bisection's decisions are
    # gaussian_delta's own, bit for bit the multipliers pinned.
    return bisect(delta_at, delta, lo, hi, 1e-10, locate=False)
