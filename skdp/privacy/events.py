"""Privacy events: what one use of a mechanism costs, in every currency skdp composes.

An event is data (Opacus' and Google dp-accounting's idea): it records the
mechanism family, its noise *multiplier* (noise scale divided by the
sensitivity), how many times it was used and under which neighbouring relation
its sensitivity was computed.  Converting events to a privacy guarantee is the
accountant's job (:mod:`skdp.privacy.accountant`).

Neighbouring relations
----------------------
``"replace_one"``
    Datasets of the same size differing in one record (the relation of Park et
    al., Foulds et al. and Acs et al.: "differing in a single entry").
``"add_remove"``
    One dataset is the other plus one record (the usual DP-SGD relation, needed
    for amplification by Poisson sampling).

Replacing a record is removing one and adding another, so a sensitivity under
add/remove at most doubles under replace-one: an add/remove event converts to
a replace-one event with half the noise multiplier (twice the pure epsilon).
The converse does not hold in general, and subsampled events are tied to their
relation, so those conversions raise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from . import _autodp
from .conversions import DEFAULT_ORDERS, gaussian_epsilon, pure_dp_rdp, rdp_to_epsilon

REPLACE_ONE = "replace_one"
ADD_REMOVE = "add_remove"
NEIGHBOURING_RELATIONS = (REPLACE_ONE, ADD_REMOVE)


def _check_relation(neighbouring):
    if neighbouring not in NEIGHBOURING_RELATIONS:
        raise ValueError(f"neighbouring must be one of {NEIGHBOURING_RELATIONS}, got {neighbouring!r}.")


def _check_positive(name, value):
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}.")


@dataclass(frozen=True)
class PrivacyEvent:
    """Base class of privacy events.

    Subclasses give the per-use cost in each accounting currency; the
    ``count`` field says how many identical uses the event stands for.
    """

    count: int
    neighbouring: str

    def __post_init__(self):
        _check_relation(self.neighbouring)
        if int(self.count) != self.count or self.count < 0:
            raise ValueError(f"count must be a non-negative integer, got {self.count!r}.")

    #: True when the event satisfies pure epsilon-DP.
    is_pure = False

    def pure_epsilon(self):
        """Per-use epsilon of pure DP (``inf`` if the mechanism is not pure DP)."""
        return math.inf

    def zcdp_rho(self):
        """Per-use zero-concentrated DP parameter rho (Bun & Steinke 2016)."""
        raise ValueError(f"{type(self).__name__} has no zCDP characterisation; use 'rdp'.")

    def rdp(self, orders):
        """Per-use Renyi DP curve on ``orders`` (Mironov 2017)."""
        raise NotImplementedError

    def approx_epsilon(self, delta):
        """Per-use epsilon of (epsilon, delta)-DP at the given delta."""
        raise NotImplementedError

    def to_relation(self, neighbouring):
        """The same event described under another neighbouring relation."""
        _check_relation(neighbouring)
        if neighbouring == self.neighbouring:
            return self
        if self.neighbouring == ADD_REMOVE and neighbouring == REPLACE_ONE:
            return self._doubled_sensitivity()
        raise ValueError(
            f"A {type(self).__name__} accounted under {self.neighbouring!r} neighbours cannot be "
            f"converted to {neighbouring!r} neighbours."
        )

    def _doubled_sensitivity(self):
        raise ValueError(f"{type(self).__name__} cannot be converted between relations.")


@dataclass(frozen=True)
class LaplaceEvent(PrivacyEvent):
    """Laplace mechanism with scale ``noise_multiplier * L1-sensitivity`` (pure DP)."""

    noise_multiplier: float = 1.0
    is_pure = True

    def __post_init__(self):
        super().__post_init__()
        _check_positive("noise_multiplier", self.noise_multiplier)

    def pure_epsilon(self):
        return 1.0 / self.noise_multiplier

    def zcdp_rho(self):
        # Pure eps-DP implies eps^2/2-zCDP (Bun & Steinke 2016, Prop. 1.4).
        return 0.5 * self.pure_epsilon() ** 2

    def rdp(self, orders):
        return _autodp.laplace_rdp(self.noise_multiplier, orders)

    def approx_epsilon(self, delta):
        return self.pure_epsilon()

    def _doubled_sensitivity(self):
        return replace(self, noise_multiplier=self.noise_multiplier / 2, neighbouring=REPLACE_ONE)


@dataclass(frozen=True)
class PureDPEvent(PrivacyEvent):
    """Any pure ``epsilon``-DP mechanism (exponential mechanism, posterior sampling)."""

    epsilon: float = 1.0
    is_pure = True

    def __post_init__(self):
        super().__post_init__()
        _check_positive("epsilon", self.epsilon)

    def pure_epsilon(self):
        return self.epsilon

    def zcdp_rho(self):
        return 0.5 * self.epsilon**2

    def rdp(self, orders):
        return pure_dp_rdp(self.epsilon, orders)

    def approx_epsilon(self, delta):
        return self.epsilon

    def _doubled_sensitivity(self):
        return replace(self, epsilon=2 * self.epsilon, neighbouring=REPLACE_ONE)


@dataclass(frozen=True)
class GaussianEvent(PrivacyEvent):
    """Gaussian mechanism with std ``noise_multiplier * L2-sensitivity``."""

    noise_multiplier: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        _check_positive("noise_multiplier", self.noise_multiplier)

    def zcdp_rho(self):
        return 1.0 / (2.0 * self.noise_multiplier**2)

    def rdp(self, orders):
        return _autodp.gaussian_rdp(self.noise_multiplier, orders)

    def approx_epsilon(self, delta):
        return gaussian_epsilon(self.noise_multiplier, delta)

    def _doubled_sensitivity(self):
        return replace(self, noise_multiplier=self.noise_multiplier / 2, neighbouring=REPLACE_ONE)


@dataclass(frozen=True)
class DiscreteGaussianEvent(GaussianEvent):
    """Discrete Gaussian on a grid (secure noise): the Gaussian's RDP and zCDP.

    Canonne, Kamath & Steinke (2020), Thm. 4: the same ``alpha / (2 s^2)``
    RDP curve as the continuous Gaussian.  Being a distinct type keeps it out
    of the accountant's exact continuous-Gaussian composition.
    """


@dataclass(frozen=True)
class SubsampledGaussianEvent(PrivacyEvent):
    """Gaussian mechanism applied to a random subsample.

    ``sampling="poisson"``: each record enters independently with probability
    ``sampling_rate`` (add/remove neighbours).  ``sampling="without_replacement"``:
    a batch of ``sampling_rate * N`` records drawn without replacement
    (replace-one neighbours).
    """

    noise_multiplier: float = 1.0
    sampling_rate: float = 1.0
    sampling: str = "poisson"

    def __post_init__(self):
        super().__post_init__()
        _check_positive("noise_multiplier", self.noise_multiplier)
        if not 0 < self.sampling_rate <= 1:
            raise ValueError(f"sampling_rate must be in (0, 1], got {self.sampling_rate!r}.")
        expected = {"poisson": ADD_REMOVE, "without_replacement": REPLACE_ONE}.get(self.sampling)
        if expected is None:
            raise ValueError(f"sampling must be 'poisson' or 'without_replacement', got {self.sampling!r}.")
        if self.neighbouring != expected:
            raise ValueError(
                f"{self.sampling!r} sampling is accounted under {expected!r} neighbours, "
                f"not {self.neighbouring!r}."
            )

    def rdp(self, orders):
        if self.sampling_rate == 1.0:
            return _autodp.gaussian_rdp(self.noise_multiplier, orders)
        return _autodp.subsampled_gaussian_rdp(
            self.noise_multiplier, self.sampling_rate, self.sampling == "poisson", orders
        )

    def approx_epsilon(self, delta):
        return rdp_to_epsilon(self.rdp(DEFAULT_ORDERS), DEFAULT_ORDERS, delta)
