"""Renyi DP (the moments accountant): Mironov 2017; Abadi et al. 2016.

Each event contributes an RDP curve on :data:`~skdp.privacy.DEFAULT_ORDERS`
(autodp's curves behind :mod:`skdp.privacy._autodp`, the exact
fractional-order curve of the Poisson-subsampled Gaussian, Mironov, Talwar &
Zhang 2019); curves add under composition and the sum is converted to
``(epsilon, delta)`` by Balle, Barthe, Gaboardi, Hsu & Sato (2020, Thm. 21).
When every event is a plain (continuous) Gaussian the exact composition, one
Gaussian with multiplier ``(sum count / z^2)^(-1/2)`` (Balle & Wang 2018), is
reported instead, being tighter.
"""

from __future__ import annotations

import numpy as np

from .. import _autodp
from ..cluster_sampling import ClusterSampledGaussianEvent, cluster_sampled_gaussian_rdp
from ..conversions import DEFAULT_ORDERS, gaussian_epsilon, pure_dp_rdp, rdp_to_epsilon
from ..events import (
    ADD_REMOVE,
    REPLACE_ONE,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    SubsampledGaussianEvent,
)
from ._base import Accountant


class RDPAccountant(Accountant):
    """Renyi-DP composition on a grid of orders (module docstring)."""

    name = "rdp"

    def __init__(self, orders=DEFAULT_ORDERS):
        self.orders = tuple(float(a) for a in orders)

    @classmethod
    def curve(cls, event, orders=DEFAULT_ORDERS):
        """Per-use RDP curve of ``event`` on ``orders``."""
        return np.asarray(cls._apply(event, np.asarray(orders, dtype=float)), dtype=float)

    def epsilon(self, events, delta):
        orders = np.asarray(self.orders)
        total = np.zeros_like(orders)
        for e in events:
            total += e.count * self.curve(e, orders)
        eps = rdp_to_epsilon(total, orders, delta)
        return min(eps, exact_gaussian_epsilon(events, delta))


def exact_gaussian_epsilon(events, delta):
    """Exact epsilon of a history of plain Gaussian releases, else ``inf``.

    ``k`` continuous Gaussian mechanisms with multipliers ``z_i`` compose
    exactly into one Gaussian with ``(sum count_i / z_i^2)^(-1/2)`` (Dong,
    Roth & Su 2022, Cor. 3.3), whose privacy profile is Balle & Wang's (2018,
    Thm. 8).  Discrete (secure) and subsampled Gaussians are excluded.
    """
    if not events or any(type(e) is not GaussianEvent for e in events):
        return np.inf
    combined = sum(e.count / e.noise_multiplier**2 for e in events)
    return gaussian_epsilon(combined**-0.5, delta) if combined > 0 else 0.0


@RDPAccountant.rule(LaplaceEvent)
def _laplace(event, orders):
    # Mironov (2017), Prop. 6; convex in the shift, so an L1 shift split over
    # coordinates is no worse than the whole shift on one.
    return _autodp.laplace_rdp(event.noise_multiplier, orders)


@RDPAccountant.rule(DiscreteLaplaceEvent, PureDPEvent)
def _pure(event, orders):
    # Any epsilon-DP mechanism: the curve of randomised response, the largest
    # (see DiscreteLaplaceEvent).
    epsilon = 1.0 / event.noise_multiplier if isinstance(event, LaplaceEvent) else event.epsilon
    return pure_dp_rdp(epsilon, orders)


@RDPAccountant.rule(GaussianEvent)
def _gaussian(event, orders):
    # Continuous and discrete Gaussian alike (DiscreteGaussianEvent's notes).
    return _autodp.gaussian_rdp(event.noise_multiplier, orders)


def _subsampled_supported(event):
    # Poisson sampling has an RDP curve under add/remove only; a replace-one
    # Poisson event is accounted by the "pld" accountant.
    return event.sampling_rate == 1.0 or (event.sampling, event.neighbouring) in {
        ("poisson", ADD_REMOVE),
        ("without_replacement", REPLACE_ONE),
    }


@RDPAccountant.rule(SubsampledGaussianEvent, applies=_subsampled_supported)
def _subsampled(event, orders):
    if event.sampling_rate == 1.0:
        return _autodp.gaussian_rdp(event.noise_multiplier, orders)
    return _autodp.subsampled_gaussian_rdp(
        event.noise_multiplier, event.sampling_rate, event.sampling == "poisson", orders
    )


@RDPAccountant.rule(ClusterSampledGaussianEvent)
def _cluster_sampled(event, orders):
    # Worst case over the cluster of the differing record; clusters with the
    # same (rate, probability) share one curve.
    pairs = sorted(set(zip(event.sampling_rates, event.selection_probabilities, strict=True)))
    curves = [cluster_sampled_gaussian_rdp(event.noise_multiplier, q, p, orders) for q, p in pairs]
    return np.max(curves, axis=0)


# Papernot & Steinke (2022): private selection by random repetition (issue 21).
from ..repeat_select import RepeatAndSelectEvent, repeat_and_select_rdp  # noqa: E402


@RDPAccountant.rule(RepeatAndSelectEvent)
def _repeat_and_select(event, orders):
    # One trial: the sum of its events' curves, maximised over the candidate
    # plans it draws from (a mixture that names its candidate); then
    # Theorem 2 (truncated negative binomial) or Theorem 6 (Poisson).
    trial = np.max(
        [sum(e.count * RDPAccountant.curve(e, orders) for e in plan) for plan in event.inner_events], axis=0
    )
    return repeat_and_select_rdp(orders, trial, event.mean, event.shape)
