"""Basic composition: per-use epsilons and deltas add up (Dwork & Roth 2014, Thm. 3.16).

Valid for fully adaptive choices of every mechanism and its parameters
(Rogers, Roth, Ullman & Vadhan 2016, privacy filters), and the only
composition of an ``(epsilon, delta)`` charged by hand.  The target delta is
split evenly over the uses that need one (the non-pure events).
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..events import (
    ClusterSampledGaussianEvent,
    DiscreteGaussianEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    SubsampledGaussianEvent,
)
from ._base import Accountant
from .conversions import gaussian_epsilon, zcdp_rdp_epsilon


def pure_epsilon(event):
    """Per-use epsilon of pure DP of ``event`` (``inf`` if it is not pure DP)."""
    if isinstance(event, LaplaceEvent):
        return 1.0 / event.noise_multiplier
    if isinstance(event, PureDPEvent):
        return event.epsilon
    return math.inf


def per_use_epsilons(accountant, events, delta):
    """Per-use epsilon of each event at an even share of ``delta`` over the non-pure uses."""
    n_approx = sum(e.count for e in events if not e.is_pure)
    per_use_delta = delta / n_approx if n_approx else 0.0
    return [accountant._apply(e, per_use_delta) for e in events]


class BasicAccountant(Accountant):
    """Sum of per-use epsilons (module docstring)."""

    name = "basic"

    def epsilon(self, events, delta):
        return sum(
            e.count * eps for e, eps in zip(events, per_use_epsilons(self, events, delta), strict=True)
        )


@BasicAccountant.rule(LaplaceEvent, PureDPEvent)
def _pure(event, delta):
    return pure_epsilon(event)


@BasicAccountant.rule(GaussianEvent)
def _gaussian(event, delta):
    # The exact privacy profile (Balle & Wang 2018, Thm. 8).
    return gaussian_epsilon(event.noise_multiplier, delta)


@BasicAccountant.rule(DiscreteGaussianEvent)
def _discrete_gaussian(event, delta):
    # From its RDP curve alpha rho (DiscreteGaussianEvent's notes).
    return zcdp_rdp_epsilon(1.0 / (2.0 * event.noise_multiplier**2), delta)


@BasicAccountant.rule(SubsampledGaussianEvent, ClusterSampledGaussianEvent)
def _sampled(event, delta):
    # One use, converted by the tightest accountant that has a curve for it.
    from . import get_accountant  # the package's registry (import cycle at load)

    one = [replace(event, count=1)]
    bounds = [
        get_accountant(name).epsilon(one, delta)
        for name in ("rdp", "pld")
        if get_accountant(name).supports(one[0])
    ]
    return min(bounds) if bounds else math.inf


def per_use_epsilon(event, delta):
    """Epsilon at ``delta`` of one use of ``event`` (basic composition's per-use conversion)."""
    return BasicAccountant._apply(event, delta)
