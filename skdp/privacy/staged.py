"""Staged plans: a plan calibrated from an earlier private release of the same fit.

Some fits release a noisy statistic first (a noisy count of the rows, the
noisy cluster sizes of a private clustering) and plan the rest from it: the
DP-SGD sampling rate and number of steps follow from the released size, and
the gradient noise is calibrated to that plan.  The second stage's privacy
parameters are then an *adaptive* choice, a function of the first stage's
output.  Calibrating each possible outcome to ``(epsilon, delta)`` on its own
(at its own best Renyi order, or by PLD) does not give ``(epsilon, delta)``
for the fit: composition of adaptively chosen mechanisms needs one bound
that holds for every outcome, and the pointwise worst curve over the
outcomes converts to more than ``epsilon`` (1.8% more for DPGenerativeMixture
over seven size outcomes at epsilon 1).

The rule here is a Renyi-DP *privacy filter* at one order fixed before the
first release (Feldman & Zrnic 2021, "Individual privacy accounting via a
Renyi filter", Thm. 3.1 with one budget; Mironov 2017, Prop. 1, which already
allows the second mechanism to be chosen from the first one's output):

1. Before any outcome exists, from the public plan alone (the first stage's
   events, ``epsilon``, ``delta``), fix an order ``a`` and the RDP budget
   ``B(a) = epsilon - log(1 - 1/a) + (log(delta) + log(a)) / (a - 1)``, the
   largest RDP value at ``a`` whose conversion (Balle et al. 2020, Thm. 21)
   is ``epsilon``.
2. The first stage spends ``rho_1(a)`` (its events' RDP at ``a``).
3. Whatever the outcome, the second stage is calibrated so that its own
   RDP at ``a`` is at most ``B(a) - rho_1(a)`` (:meth:`StagedFilter.calibrate`).

Every outcome's second stage is then ``(a, B(a) - rho_1(a))``-RDP, so the
adaptive composition is ``(a, B(a))``-RDP (Mironov 2017, Prop. 1) and
``(epsilon, delta)``-DP: the pointwise worst curve over all outcomes meets
the claim at ``a``, which is all the conversion needs.  The order is chosen
as the best order of a reference history, the first stage composed with the
Gaussian mechanism that would spend the rest of the budget: for DP-SGD with
small sampling rates the RDP curve is close to linear in the order, like the
Gaussian's, so the fixed order is near the best order of every outcome (the
price of fixing it is a few percent of noise, measured in docs/guarantee.md).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .accountants.conversions import DEFAULT_ORDERS, rdp_to_epsilon
from .accountants.rdp import RDPAccountant
from .events import GaussianEvent
from .roots import brentq, step_up

__all__ = ["StagedFilter", "rdp_budget", "staged_filter"]


def rdp_budget(epsilon, delta, order):
    """Largest RDP value at ``order`` that converts to ``(epsilon, delta)`` (Balle et al. 2020, Thm. 21)."""
    a = float(order)
    return float(epsilon) - math.log1p(-1.0 / a) + (math.log(delta) + math.log(a)) / (a - 1.0)


def _rdp_at(events, order, neighbouring):
    total = 0.0
    for e in events:
        e = e.to_relation(neighbouring)
        total += e.count * float(RDPAccountant.curve(e, (float(order),))[0])
    return total


@dataclass(frozen=True)
class StagedFilter:
    """An RDP filter at one order for a fit whose second stage is planned from its first release.

    Attributes
    ----------
    epsilon, delta : float
        The fit's claim.
    order : float
        The Renyi order fixed before the first release.
    first_rdp : float
        RDP at ``order`` of the first stage's events.
    neighbouring : str
        Relation of the events.
    """

    epsilon: float
    delta: float
    order: float
    first_rdp: float
    neighbouring: str

    @property
    def budget(self):
        """RDP at :attr:`order` of the whole fit: the claim's (:func:`rdp_budget`)."""
        return rdp_budget(self.epsilon, self.delta, self.order)

    @property
    def remaining(self):
        """RDP at :attr:`order` left for the second stage, whatever the first stage's outcome."""
        return self.budget - self.first_rdp

    def rdp(self, events):
        """RDP at :attr:`order` of ``events``."""
        return _rdp_at(events, self.order, self.neighbouring)

    def admits(self, events):
        """Whether a second stage of ``events`` keeps the fit within the claim."""
        return self.rdp(events) <= self.remaining * (1 + 1e-9) + 1e-15

    def calibrate(self, make_events, rtol=1e-4):
        """Smallest noise multiplier ``z`` whose second stage ``make_events(z)`` the filter admits, to ``rtol``.

        ``make_events(z)`` must be decreasing in privacy loss as ``z`` grows
        (a noise multiplier).  A bracket on ``log z`` from ``[log 1e-3,
        log 10]``, widened by steps of ``log 10``, shrunk by Brent's method
        (:func:`skdp.privacy.roots.brentq`, ``xtol = rtol = rtol / 4``),
        then stepped up by factors ``1 + rtol / 4`` until admitted
        (:func:`skdp.privacy.roots.step_up`): the answer is a multiplier
        whose RDP at :attr:`order` was computed and fits in
        :attr:`remaining` (never a smaller one).  Multipliers below ``1e-3``
        are not searched: ``1e-3`` is returned if it is admitted.
        """

        def gap(log_z):
            return self.rdp(make_events(math.exp(log_z))) - self.remaining

        if self.remaining <= 0:
            raise ValueError("No noise multiplier meets the staged plan's remaining budget.")
        # Widened on log z by adding log 10 (not multiplying z by 10): the
        # same end points, hence the same Brent iterates, as the plans pinned.
        lo, hi = math.log(1e-3), math.log(10.0)
        while gap(hi) > 0:
            lo, hi = hi, hi + math.log(10.0)
            if hi > math.log(1e12):
                raise ValueError("No noise multiplier meets the staged plan's remaining budget.")
        if gap(lo) <= 0:
            return math.exp(lo)
        # Brent's last iterate may sit on either side of the root: from it, up
        # by factors 1 + rtol / 4 to the first multiplier that is admitted.
        z = math.exp(brentq(gap, lo, hi, xtol=rtol / 4, rtol=rtol / 4))
        return step_up(lambda z: gap(math.log(z)) <= 0, z, 1 + rtol / 4)


def staged_filter(first_events, epsilon, delta, neighbouring, orders=DEFAULT_ORDERS):
    """The :class:`StagedFilter` of a fit whose first stage is ``first_events`` (public: its plan, not its output).

    The order is the best one (among ``orders``) of the reference history:
    ``first_events`` composed with the Gaussian mechanism that brings the
    RDP-converted epsilon to ``epsilon`` (module docstring).  A function of
    public plan quantities only, so it is computed once per process for each
    (events, epsilon, delta, relation, orders) and the frozen result shared.

    Raises
    ------
    ValueError
        If the first stage alone spends the whole claim.
    """
    try:
        key = (
            tuple(first_events),
            float(epsilon),
            float(delta),
            neighbouring,
            tuple(map(float, np.ravel(orders))),
        )
        hash(key)
    except (TypeError, ValueError):
        return _staged_filter(first_events, epsilon, delta, neighbouring, orders)
    return _cached_staged_filter(*key)


@functools.lru_cache(maxsize=256)
def _cached_staged_filter(first_events, epsilon, delta, neighbouring, orders):
    return _staged_filter(first_events, epsilon, delta, neighbouring, orders)


def _staged_filter(first_events, epsilon, delta, neighbouring, orders):
    if not (0 < delta < 1):
        raise ValueError(f"A staged plan needs 0 < delta < 1, got delta={delta!r}.")
    orders = np.asarray(orders, dtype=float)
    first = np.zeros_like(orders)
    for e in first_events:
        e = e.to_relation(neighbouring)
        first += e.count * RDPAccountant.curve(e, orders)
    if rdp_to_epsilon(first, orders, delta) >= epsilon:
        raise ValueError(
            f"The first stage of this plan spends the whole epsilon={epsilon:g}; nothing is left for the rest."
        )

    def reference(log_z):
        gauss = RDPAccountant.curve(GaussianEvent(1, neighbouring, math.exp(log_z)), orders)
        return first + gauss

    def epsilon_gap(log_z):
        return rdp_to_epsilon(reference(log_z), orders, delta) - epsilon

    # The reference's multiplier by Brent's method on log z (scipy's
    # tolerances).  It only chooses the order: whichever side of the root it
    # lies, the filter's guarantee is the RDP bound at that order (admits).
    curve = reference(brentq(epsilon_gap, math.log(1e-4), math.log(1e6)))
    with np.errstate(divide="ignore", invalid="ignore"):
        converted = curve + np.log1p(-1.0 / orders) - (math.log(delta) + np.log(orders)) / (orders - 1)
    converted[~np.isfinite(converted)] = np.inf
    order = float(orders[int(np.argmin(converted))])
    first_rdp = float(first[int(np.argmin(converted))])
    return StagedFilter(float(epsilon), float(delta), order, first_rdp, neighbouring)
