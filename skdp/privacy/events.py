"""Privacy events: what one use of a mechanism costs, in every currency skdp composes.

An event is data (Opacus' and Google dp-accounting's idea): it records the
mechanism family, its noise *multiplier* (noise scale divided by the
sensitivity), how many times it was used and under which neighbouring relation
its sensitivity was computed.  Converting events to a privacy guarantee is the
accountant's job (:mod:`skdp.privacy.ledger`).

Every event type of the core is defined here, the mechanisms' (Laplace,
Gaussian, their discrete twins, subsampled Gaussian) and the composite
procedures' (Acs et al.'s cluster-sampled DP-SGD steps, Papernot & Steinke's
repeat-and-select); the RDP curves of the last two live with their proofs in
:mod:`skdp.privacy.accountants.cluster_sampling` and :mod:`skdp.privacy.accountants.repeat_select`.

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

    #: True for the releases of an exact sampler on a grid (secure noise,
    #: see :doc:`/privacy`); a ledger opened with ``secure_noise=True``
    #: accepts no other kind.
    sampled_exactly = False

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
    """Laplace mechanism with scale ``noise_multiplier * L1-sensitivity`` (pure DP).

    Floating-point Laplace noise; the secure release records
    :class:`DiscreteLaplaceEvent` instead.  Pure ``1 / noise_multiplier``-DP,
    hence ``1 / (2 noise_multiplier^2)``-zCDP (Bun & Steinke 2016, Prop. 1.4),
    and Mironov's (2017, Prop. 6) closed-form RDP curve.
    """

    noise_multiplier: float = 1.0
    is_pure = True

    def __post_init__(self):
        super().__post_init__()
        _check_positive("noise_multiplier", self.noise_multiplier)

    def _doubled_sensitivity(self):
        # Also valid for the discrete release: the integer change of a
        # replacement is at most the sum of the integer changes of its removal
        # and its addition (triangle inequality on the rounded statistic).
        return replace(self, noise_multiplier=self.noise_multiplier / 2, neighbouring=REPLACE_ONE)


@dataclass(frozen=True)
class DiscreteLaplaceEvent(LaplaceEvent):
    """Discrete Laplace on a grid (secure noise): pure DP, the RDP curve of randomised response.

    The secure release (``secure_noise=True``, see :doc:`/privacy`) rounds
    the statistic to a grid and adds exact discrete Laplace noise (Canonne, Kamath & Steinke
    2020, Algorithm 2) of scale ``noise_multiplier`` times the integer L1
    sensitivity.  It is pure ``1 / noise_multiplier``-DP like the continuous
    Laplace, with the same zCDP bound, but not the continuous Laplace's RDP
    curve: shifted by one grid step (the integer sensitivity of one
    coordinate can be 1), its privacy loss takes only the values
    ``+-epsilon``, with probabilities ``e^eps / (1 + e^eps)`` and
    ``1 / (1 + e^eps)``, which is binary randomised response, the epsilon-DP
    mechanism with the largest Renyi divergence of every order.  It is given
    that curve (``skdp.privacy.accountants.conversions.pure_dp_rdp``, valid for every
    epsilon-DP mechanism), never below the continuous one.  A distinct type
    also lets a ledger tell secure releases from floating-point ones.
    """

    sampled_exactly = True


@dataclass(frozen=True)
class PureDPEvent(PrivacyEvent):
    """Any pure ``epsilon``-DP mechanism (exponential mechanism, posterior sampling)."""

    epsilon: float = 1.0
    is_pure = True

    def __post_init__(self):
        super().__post_init__()
        _check_positive("epsilon", self.epsilon)

    def _doubled_sensitivity(self):
        return replace(self, epsilon=2 * self.epsilon, neighbouring=REPLACE_ONE)


@dataclass(frozen=True)
class GaussianEvent(PrivacyEvent):
    """Gaussian mechanism with std ``noise_multiplier * L2-sensitivity``."""

    noise_multiplier: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        _check_positive("noise_multiplier", self.noise_multiplier)

    def _doubled_sensitivity(self):
        return replace(self, noise_multiplier=self.noise_multiplier / 2, neighbouring=REPLACE_ONE)


@dataclass(frozen=True)
class DiscreteGaussianEvent(GaussianEvent):
    """Discrete Gaussian on a grid (secure noise): zCDP/RDP, and (epsilon, delta) derived from them.

    The secure release (``secure_noise=True``, see :doc:`/privacy`) rounds a
    ``d``-dimensional statistic to the integer grid and adds independent
    discrete Gaussian noise ``N_Z(0, sigma^2)`` to every coordinate, with
    ``sigma >= noise_multiplier * Delta_int`` for an integer L2 sensitivity
    ``Delta_int`` that bounds the change of the rounded vector.  Being a
    distinct type keeps it out of the accountant's exact continuous-Gaussian
    composition.

    Notes
    -----
    Privacy of one use:

    * **RDP / zCDP.**  For integer means ``mu, nu``,
      ``D_alpha(N_Z(mu, sigma^2) || N_Z(nu, sigma^2)) <= alpha (mu - nu)^2 / (2 sigma^2)``
      (Canonne, Kamath & Steinke 2020, Thm. 4, applied to the two datasets),
      and the Renyi divergence of independent coordinates is the sum of theirs
      (van Erven & Harremoes 2014, Thm. 28).  Summing over the ``d``
      coordinates gives ``alpha ||mu - nu||^2 / (2 sigma^2) <= alpha / (2 noise_multiplier^2)``:
      the continuous Gaussian's RDP curve and ``rho = 1 / (2 noise_multiplier^2)``,
      with no multivariate slack.  (The slack of CKS's multivariate
      statements belongs to their sharper approximate-DP bound, which tracks
      the continuous Gaussian's exact curve; that bound is not used here.)
    * **(epsilon, delta).**  The continuous Gaussian's exact curve (Balle &
      Wang 2018), which :class:`GaussianEvent` uses, is *not* proved for the
      discrete Gaussian in ``d`` dimensions.  :meth:`approx_epsilon` instead
      converts the RDP curve ``alpha rho``:
      ``epsilon = min_{alpha > 1} alpha rho + log(1 - 1/alpha) - (log(delta) + log(alpha)) / (alpha - 1)``
      (Balle, Barthe, Gaboardi, Hsu & Sato 2020, Thm. 21; the same as CKS
      2020's conversion of zCDP to approximate DP), valid at every ``alpha``,
      hence at the numerically found minimiser.  Because the continuous
      Gaussian satisfies the same RDP curve, this is never below its exact
      epsilon: secure releases cost a little more under basic and advanced
      composition, and calibration (which costs plans with the released event
      type) adds the matching noise.

    References
    ----------
    C. L. Canonne, G. Kamath, T. Steinke. The discrete Gaussian for differential
    privacy. NeurIPS 2020.

    B. Balle, G. Barthe, M. Gaboardi, J. Hsu, T. Sato. Hypothesis testing
    interpretations and Renyi differential privacy. AISTATS 2020.
    """

    sampled_exactly = True


@dataclass(frozen=True)
class SubsampledGaussianEvent(PrivacyEvent):
    """Gaussian mechanism applied to a random subsample.

    ``sampling="poisson"``: each record enters independently with probability
    ``sampling_rate`` (DP-SGD's batches, DP-SEP's), under either relation.
    ``sampling="without_replacement"``: a batch of ``sampling_rate * N``
    records drawn without replacement (replace-one neighbours only).

    ``noise_multiplier`` is the noise std over the sensitivity of the
    un-subsampled sum under the event's relation: one record's contribution
    bound ``C`` under add/remove, ``2 C`` under replace-one (a replacement
    swaps one contribution for another).  The same Poisson mechanism
    described under replace-one therefore has half its add/remove multiplier
    (:meth:`to_relation`), and is accounted directly by the ``"pld"``
    accountant (dp-accounting's ``REPLACE_ONE`` pair), not by group privacy.
    """

    noise_multiplier: float = 1.0
    sampling_rate: float = 1.0
    sampling: str = "poisson"

    def __post_init__(self):
        super().__post_init__()
        _check_positive("noise_multiplier", self.noise_multiplier)
        if not 0 < self.sampling_rate <= 1:
            raise ValueError(f"sampling_rate must be in (0, 1], got {self.sampling_rate!r}.")
        if self.sampling not in ("poisson", "without_replacement"):
            raise ValueError(f"sampling must be 'poisson' or 'without_replacement', got {self.sampling!r}.")
        if self.sampling == "without_replacement" and self.neighbouring != REPLACE_ONE:
            raise ValueError(
                f"'without_replacement' sampling is accounted under {REPLACE_ONE!r} neighbours, "
                f"not {self.neighbouring!r}."
            )

    def _doubled_sensitivity(self):
        if self.sampling != "poisson":
            return super()._doubled_sensitivity()
        # The same Poisson mechanism: a replacement moves the sum by at most
        # twice what an addition or a removal does.
        return replace(self, noise_multiplier=self.noise_multiplier / 2, neighbouring=REPLACE_ONE)


# --- Acs et al.'s steps on one randomly chosen cluster (their RDP curve: skdp.privacy.accountants.cluster_sampling)


@dataclass(frozen=True)
class ClusterSampledGaussianEvent(PrivacyEvent):
    """``count`` steps of Alg. 1 of Acs et al.: pick a cluster, DP-SGD step on it.

    Cluster ``s`` is picked with probability ``selection_probabilities[s]``
    and its Poisson batch is drawn at rate ``sampling_rates[s]``; the step is
    a Gaussian mechanism with multiplier ``noise_multiplier`` on that batch
    (Poisson sampling, add/remove neighbours only).  Its RDP curve, and why
    it is not the paper's Theorem 4, are in :mod:`skdp.privacy.accountants.cluster_sampling`.

    Parameters
    ----------
    count : int
    neighbouring : "add_remove"
    noise_multiplier : float
    sampling_rates : tuple of float
    selection_probabilities : tuple of float
        Public probabilities (they need not sum to one exactly: each enters
        the bound of its own cluster only).
    """

    noise_multiplier: float = 1.0
    sampling_rates: tuple = (1.0,)
    selection_probabilities: tuple = (1.0,)

    def __post_init__(self):
        super().__post_init__()
        _check_positive("noise_multiplier", self.noise_multiplier)
        if self.neighbouring != ADD_REMOVE:
            raise ValueError(
                f"Poisson sampling is accounted under 'add_remove' neighbours, not {self.neighbouring!r}."
            )
        rates, probs = tuple(self.sampling_rates), tuple(self.selection_probabilities)
        if len(rates) != len(probs) or not rates:
            raise ValueError(
                "sampling_rates and selection_probabilities must be non-empty and of equal length."
            )
        if not all(0 < q <= 1 for q in rates):
            raise ValueError(f"sampling rates must be in (0, 1], got {rates!r}.")
        if not all(0 < p <= 1 for p in probs):
            raise ValueError(f"selection probabilities must be in (0, 1], got {probs!r}.")
        object.__setattr__(self, "sampling_rates", tuple(float(q) for q in rates))
        object.__setattr__(self, "selection_probabilities", tuple(float(p) for p in probs))


# --- Papernot & Steinke's private selection by random repetition (RDP curve: skdp.privacy.accountants.repeat_select)

#: ``shape`` of the Poisson distribution of the number of trials.
POISSON = math.inf


@dataclass(frozen=True)
class RepeatAndSelectEvent(PrivacyEvent):
    """Best of a random number of trials, each drawing one of several candidate plans.

    Data only; the ``"rdp"`` accountant has its rule
    (:func:`~skdp.privacy.accountants.repeat_select.repeat_and_select_rdp`), the
    ``"pld"`` accountant none (a history holding one is composed by
    ``"rdp"``: :func:`~skdp.privacy.compose`'s fallback).

    Parameters
    ----------
    count : int
        Number of independent repeat-and-select procedures.
    neighbouring : {"replace_one", "add_remove"}
        Relation of every inner event.
    inner_events : tuple of PrivacyEvent, or tuple of tuples of PrivacyEvent
        One trial's events.  A tuple of tuples lists the plans of the
        candidates a trial draws from (independently of the data): the trial's
        RDP curve is the pointwise maximum over the candidates of the sum of
        their events' curves (:mod:`skdp.privacy.accountants.repeat_select`).
    mean : float
        ``E[K] >= 1``, the mean number of trials.
    shape : float
        ``eta >= 0`` of the truncated negative binomial (0: logarithmic,
        1: geometric), or ``inf`` (:data:`POISSON`) for Poisson.
    """

    inner_events: tuple = ()
    mean: float = 1.0
    shape: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        plans = tuple(self.inner_events)
        if plans and all(isinstance(e, PrivacyEvent) for e in plans):
            plans = (plans,)
        plans = tuple(tuple(plan) for plan in plans)
        if not plans or not all(plans) or not all(isinstance(e, PrivacyEvent) for p in plans for e in p):
            raise ValueError("inner_events must be a non-empty tuple of PrivacyEvent (or of tuples of them).")
        if any(e.neighbouring != self.neighbouring for p in plans for e in p):
            raise ValueError(f"Every inner event must be accounted under {self.neighbouring!r} neighbours.")
        # Frozen: normalise the field in place once (tuple of candidate plans).
        object.__setattr__(self, "inner_events", plans)
        if not (math.isfinite(self.mean) and self.mean >= 1):
            raise ValueError(f"mean must be a finite number >= 1, got {self.mean!r}.")
        if math.isnan(self.shape) or self.shape < 0:
            raise ValueError(f"shape must be >= 0 (inf for Poisson), got {self.shape!r}.")

    def to_relation(self, neighbouring):
        if neighbouring == self.neighbouring:
            return self
        plans = tuple(tuple(e.to_relation(neighbouring) for e in plan) for plan in self.inner_events)
        return replace(self, inner_events=plans, neighbouring=neighbouring)


@dataclass(frozen=True)
class WeakTrianglePoissonEvent(SubsampledGaussianEvent):
    """A replace-one Poisson-subsampled Gaussian that needs an RDP curve (a searched DP-SGD step).

    The same mechanism as a replace-one, Poisson
    :class:`~skdp.privacy.events.SubsampledGaussianEvent` (the DP-SGD and
    DP-SEP steps converted to the search's relation), with the same fields.
    The ``"pld"`` accountant accounts it tightly (its rule covers the
    subclass); the ``"rdp"`` accountant, which has no exact replace-one curve
    for Poisson sampling, bounds it through an intermediate dataset by the
    weak triangle inequality
    (:func:`~skdp.privacy.accountants.rdp.replace_one_poisson_rdp`).  Only
    the search records it, because a repeat-and-select event needs each
    trial's RDP curve; an estimator's own replace-one Poisson steps stay on
    the tight ``"pld"`` accounting, and ``composition="rdp"`` keeps refusing
    them.
    """

    def __post_init__(self):
        super().__post_init__()
        if self.neighbouring != REPLACE_ONE or self.sampling != "poisson":
            raise ValueError("A WeakTrianglePoissonEvent is a replace-one, Poisson-sampled event.")

    @classmethod
    def of(cls, event):
        """``event`` as this class if it is a replace-one Poisson Gaussian, else ``event`` unchanged."""
        if (
            type(event) is SubsampledGaussianEvent
            and event.sampling == "poisson"
            and (event.neighbouring == REPLACE_ONE)
        ):
            return cls(event.count, event.neighbouring, event.noise_multiplier, event.sampling_rate)
        return event
