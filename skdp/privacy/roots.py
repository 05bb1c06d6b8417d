"""Root finding: the one place skdp solves a monotone equation in one unknown.

Every search of skdp for "the smallest value that meets a target" goes
through this module: the calibrator's noise multiplier
(:func:`skdp.privacy.calibration.calibrate_noise_multiplier`), the analytic
Gaussian multiplier and its inverse (:func:`~skdp.privacy.calibration.gaussian_noise_multiplier`,
:func:`~skdp.privacy.accountants.conversions.gaussian_epsilon`), the staged
plan's filter (:mod:`skdp.privacy.staged`), the repeat-and-select
distribution's parameter (:mod:`skdp.privacy.accountants.repeat_select`)
and the private search's per-trial budget
(:mod:`skdp.model_selection._search`).  It sits below the whole privacy core
(it imports nothing of skdp), so the accountants use it as well as the
calibrator; :mod:`skdp.privacy.calibration` re-exports it.

One convention throughout: ``f`` is *non-increasing* in its positive
argument ``z`` (a cost that falls as the noise grows), and a value *meets*
the target when ``f(z) <= target``.  Every search keeps a bracket of two
evaluated points, ``f(fails) > target >= f(meets)``, and returns it (or its
``meets`` end): the answer is always a point that was evaluated and met the
target, never an interpolated guess on the wrong side, so a calibrated plan
never exceeds its target whatever the tolerance.  The searches that called scipy's
``brentq`` use :func:`brentq`, its port, so that they return the same
floats as before: the staged plan steps Brent's multiplier up to the side that
meets (:func:`step_up`); the Gaussian epsilon keeps Brent's root, within
``1e-12`` of the crossing on either side.  A search for an
increasing function runs on ``1 / z``.  Steps are taken on ``log z`` and
``log f - log target`` (costs and multipliers span decades; the log-log
curve of a privacy cost against its noise is smooth and nearly linear).

Functions
---------
:func:`bracket`
    Widen a bracket geometrically until it straddles the target.
:func:`bracket_near`
    Grow a bracket from one good guess by squaring steps.
:func:`illinois_bracket`
    Shrink a bracket by the Illinois variant of false position (Dowell &
    Jarratt 1971): superlinear, a handful of evaluations.
:func:`secant_within`
    Secant steps from a good guess and its slope until a value falls in a
    window (no bracket: for costings too expensive to bracket).
:func:`bisect`
    Shrink a bracket by geometric bisection, whose answer is fixed by its
    decisions alone (reproducible to the bit), located first by
    :func:`illinois_bracket` so that only the decisions near the crossing
    cost an evaluation.
"""

from __future__ import annotations

import math

__all__ = [
    "NoCrossing",
    "bisect",
    "bracket",
    "bracket_near",
    "brentq",
    "brentq_meets",
    "illinois_bracket",
    "secant_within",
    "step_up",
]


class NoCrossing(ValueError):
    """No value within the search's limits meets the target."""


def log_gap(value, target):
    """``log(value / target)``: ``<= 0`` exactly when ``value`` meets ``target`` (``target > 0``).

    A value of 0 (or below) meets any positive target: ``-inf``.
    """
    if value <= 0:
        return -math.inf if target > 0 else 0.0
    return math.log(value) - math.log(target)


def bracket(f, target, lo, hi, *, up, down, lowest=1e-12, highest=1e12):
    """Widen ``[lo, hi]`` geometrically until ``f(lo) > target >= f(hi)``.

    ``hi`` is multiplied by ``up`` (``> 1``) while it fails, the last
    failing ``hi`` becoming ``lo``; then, if ``lo`` meets the target too,
    ``lo`` is multiplied by ``down`` (``< 1``) while it meets, the last
    meeting ``lo`` becoming ``hi``.  ``f`` may be evaluated twice at a
    point (callers that cost expensively cache).

    Parameters
    ----------
    f : callable
        Non-increasing in ``z > 0``.
    target : float
    lo, hi : float
        Starting points, ``0 < lo < hi``.
    up, down : float
        Growth factors, ``up > 1 > down > 0``.
    lowest, highest : float
        Limits of the search.

    Returns
    -------
    lo, hi : float or None, float
        ``lo`` is None when every point down to ``lowest`` met the target
        (``hi`` is then the smallest evaluated point that met it).

    Raises
    ------
    NoCrossing
        If ``hi`` passes ``highest`` and still fails.
    """
    while f(hi) > target:
        lo, hi = hi, hi * up
        if hi > highest:
            raise NoCrossing(f"No value up to {highest:g} meets the target {target!r}.")
    while f(lo) <= target:
        hi, lo = lo, lo * down
        if lo < lowest:
            return None, hi
    return lo, hi


def bracket_near(f, target, z, width, rtol=1e-7, tries=12):
    """The ``meets`` end of a bracket of ``f(w) = target`` found from ``z``, to ``rtol``; None if none is found.

    ``z`` is evaluated first; the bracket is then grown on the side the
    target lies, by steps of ``width`` squared each time (a good guess
    costs two points, a poor one a few more, at most ``tries``), and
    shrunk by :func:`illinois_bracket`.
    """
    step = width
    if f(z) > target:
        lo = z
        for _ in range(tries):
            hi = lo * step
            if f(hi) <= target:
                break
            lo, step = hi, step * step
        else:
            return None
    else:
        hi = z
        for _ in range(tries):
            lo = hi / step
            if f(lo) > target:
                break
            hi, step = lo, step * step
        else:
            return None
    return illinois_bracket(f, target, lo, hi, rtol)[1]


def illinois_bracket(f, target, lo, hi, rtol=1e-9, max_evals=40):
    """A bracket ``(fails, meets)`` of evaluated points, ``f(fails) > target >= f(meets)``.

    Illinois false position (Dowell & Jarratt 1971) on ``log f - log
    target`` (:func:`log_gap`) against ``log z``, from ``[lo, hi]`` (which
    must satisfy the same, ``target > 0``), until ``meets / fails <= 1 +
    rtol`` or ``max_evals`` evaluations (None: no limit).  Each step is
    kept a thousandth of the bracket inside it; a bisection step replaces
    it where a value is not finite.  Whenever one end is kept twice in a
    row, its value is halved (the Illinois rule), which keeps the
    convergence superlinear where plain false position would stall.  Any
    bracket returned is valid, however wide.
    """
    z_lo, z_hi = lo, hi  # the evaluated points (their logs are x_lo, x_hi)
    x_lo, x_hi = math.log(lo), math.log(hi)
    f_lo, f_hi = log_gap(f(lo), target), log_gap(f(hi), target)
    stale = 0  # +1: hi moved last time (lo kept), -1: lo moved
    evals = 0
    while max_evals is None or evals < max_evals:
        width = x_hi - x_lo
        if width <= math.log1p(rtol):
            break
        if math.isfinite(f_lo) and math.isfinite(f_hi) and f_lo > f_hi:
            x = x_hi - f_hi * width / (f_hi - f_lo)
            x = min(max(x, x_lo + 1e-3 * width), x_hi - 1e-3 * width)
        else:
            x = x_lo + 0.5 * width
        z = math.exp(x)
        f_z = log_gap(f(z), target)
        evals += 1
        if f_z <= 0:
            x_hi, f_hi, z_hi = x, f_z, z
            if stale == 1:
                f_lo *= 0.5
            stale = 1
        else:
            x_lo, f_lo, z_lo = x, f_z, z
            if stale == -1:
                f_hi *= 0.5
            stale = -1
    return z_lo, z_hi


def bisect(f, target, lo, hi, rtol, locate=True, *, located=None):
    """Geometric bisection of ``[lo, hi]`` (``f(lo) > target >= f(hi)``) to ``hi / lo <= 1 + rtol``; returns ``hi``.

    The answer is fixed by the decisions ``f(mid) <= target`` at the
    midpoints ``sqrt(lo * hi)``, so it is reproducible to the bit from the
    same bracket.  The crossing is first located to ``1e-9`` by
    :func:`illinois_bracket` (a handful of evaluations); ``f`` being
    monotone, every midpoint outside that bracket is decided by its side
    of it, and only a midpoint inside it is evaluated.  Same decisions,
    same answer, in a third of the evaluations.  With ``locate=False``
    every midpoint is evaluated: the answer then rests on ``f``'s own
    decisions, also where rounding makes ``f`` not quite monotone near the
    crossing (the located bracket would decide those midpoints by its side).
    ``located=(below, above)``: the crossing located by the caller (two
    points it evaluated, ``f(below) > target >= f(above)``, found by a
    cheaper route), used instead of the search; the decisions, hence the
    answer, are the same wherever ``f`` is monotone.
    """
    if located is not None:
        below, above = located
    else:
        below, above = illinois_bracket(f, target, lo, hi) if locate else (lo, hi)
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        if mid >= above:
            meets = True  # f(mid) <= f(above) <= target
        elif mid <= below:
            meets = False  # f(mid) >= f(below) > target
        else:
            meets = f(mid) <= target
        if meets:
            hi = mid
        else:
            lo = mid
    return hi


def secant_within(f, z, slope, window, aim, max_evals=5):
    """A point whose value lies in ``window``, by secant steps on ``log f`` against ``log z``; None if none is found.

    Starts at ``z`` with the log-log ``slope`` (negative) of ``f`` there
    (from a cheaper approximation of ``f``), and steps along it to ``aim``;
    once two points are evaluated, along their secant.  Stops at the first
    point with ``low <= f(z) <= high`` (``window = (low, high)``), or
    returns None after ``max_evals`` evaluations or on a non-finite or
    non-negative slope or a value that is not finite and positive (the
    caller then brackets).
    """
    low, high = window
    target = math.log(aim)
    previous = None
    for _ in range(max_evals):
        if not (math.isfinite(slope) and slope < 0):
            return None
        value = f(z)
        if low <= value <= high:
            return z
        if not (math.isfinite(value) and value > 0):
            return None
        point = (math.log(z), math.log(value))
        if previous is not None and point[0] != previous[0]:
            slope = (point[1] - previous[1]) / (point[0] - previous[0])
        previous = point
        z = math.exp(point[0] + (target - point[1]) / slope)
    return None


#: scipy's smallest relative tolerance of ``brentq`` (``4 * DBL_EPSILON``), its default.
BRENT_RTOL = 4 * 2.220446049250313e-16


def _brent(f, xa, xb, xtol, rtol, maxiter):
    """Brent's iteration: ``(xcur, fcur, xblk, fblk)``, the last iterate and the opposite end of its bracket.

    A line-by-line port of scipy's ``brentq`` (``scipy/optimize/Zeros/
    brentq.c``, C. Harris): the same floating-point operations in the same
    order, so the iterates equal scipy's to the bit (Python floats are the
    C doubles).  ``fblk`` is None where an end point is a root.
    """
    xpre, xcur = float(xa), float(xb)
    xblk = fblk = spre = scur = 0.0
    fpre = float(f(xpre))
    fcur = float(f(xcur))
    if math.isnan(fpre) or math.isnan(fcur):
        raise ValueError("The function value at an end of the bracket is NaN.")
    if fpre == 0:
        return xpre, fpre, xpre, None
    if fcur == 0:
        return xcur, fcur, xcur, None
    if math.copysign(1.0, fpre) == math.copysign(1.0, fcur):
        raise NoCrossing("f(a) and f(b) must have different signs.")
    for _ in range(maxiter):
        if fpre != 0 and fcur != 0 and math.copysign(1.0, fpre) != math.copysign(1.0, fcur):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + rtol * abs(xcur)) / 2
        sbis = (xblk - xcur) / 2
        if fcur == 0 or abs(sbis) < delta:
            return xcur, fcur, xblk, fblk
        if abs(spre) > delta and abs(fcur) < abs(fpre):
            if xpre == xblk:
                stry = -fcur * (xcur - xpre) / (fcur - fpre)  # interpolate
            else:
                dpre = (fpre - fcur) / (xpre - xcur)  # extrapolate (inverse quadratic)
                dblk = (fblk - fcur) / (xblk - xcur)
                stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
            if 2 * abs(stry) < min(abs(spre), 3 * abs(sbis) - delta):
                spre, scur = scur, stry  # a good short step
            else:
                spre = scur = sbis
        else:
            spre = scur = sbis
        xpre, fpre = xcur, fcur
        if abs(scur) > delta:
            xcur += scur
        else:
            xcur += delta if sbis > 0 else -delta
        fcur = float(f(xcur))
        if math.isnan(fcur):
            raise ValueError(f"The function value at x={xcur} is NaN.")
    raise RuntimeError(f"Brent's method did not converge in {maxiter} iterations.")


def brentq(f, a, b, xtol=2e-12, rtol=BRENT_RTOL, maxiter=100):
    """A root of ``f`` in ``[a, b]`` by Brent's method: ``scipy.optimize.brentq`` to the bit.

    Brent (1973), *Algorithms for Minimization Without Derivatives*, ch. 4:
    inverse quadratic interpolation, secant and bisection steps on a
    bracket of a sign change, to ``|x - root| <= xtol + rtol * |x|``.  The
    same defaults and the same iterates as scipy's (a port of its C code),
    so a search that called scipy returns the same float.

    Raises
    ------
    NoCrossing
        If ``f(a)`` and ``f(b)`` have the same sign.
    RuntimeError
        If ``maxiter`` iterations do not converge.
    """
    return _brent(f, a, b, xtol, rtol, maxiter)[0]


def brentq_meets(gap, a, b, xtol=2e-12, rtol=BRENT_RTOL, maxiter=100):
    """:func:`brentq` on ``gap`` (a value meets where ``gap <= 0``), returning a point that meets.

    Brent's answer is the last iterate, which lies on either side of the
    root; where it does not meet (``gap > 0``, a value it computed), the
    other end of its final bracket is returned: evaluated, of opposite sign,
    within ``xtol + rtol * |x|`` of it.  Either way the answer is a point
    whose gap was computed and is ``<= 0``, and it equals scipy's ``brentq``
    wherever that one meets.
    """
    xcur, fcur, xblk, fblk = _brent(gap, a, b, xtol, rtol, maxiter)
    if fcur <= 0 or fblk is None:
        return xcur
    return xblk


def step_up(meets, z, factor):
    """``z`` multiplied by ``factor`` (``> 1``) until ``meets(z)``: the first point of that walk that meets.

    For a search whose answer (Brent's last iterate, say) may lie just on
    the failing side of a root it located to a relative tolerance: one
    step of that tolerance, rarely two, puts it on the side that meets.
    """
    while not meets(z):
        z *= factor
    return z
