"""Composition of privacy events into one (epsilon, delta) guarantee.

One interface (Opacus' shape: record events, then ask for epsilon at a delta),
four composition theorems selected by name:

``"basic"``
    Sum of per-use epsilons and deltas (Dwork & Roth 2014, Thm. 3.16).
``"advanced"``
    Advanced composition (Dwork & Roth 2014, Thm. 3.20 / Cor. 3.21), the
    baseline of Park et al. (DP-EM), capped by basic composition.
``"zcdp"``
    Sum of zCDP parameters, converted by ``rho + 2 sqrt(rho log(1/delta))``
    (Bun & Steinke 2016; Park et al.'s "CDP" budgeting).
``"rdp"``
    Renyi DP / moments accountant (Mironov 2017; Abadi et al. 2016), RDP
    curves from autodp, converted with Balle et al. (2020).  When every event is
    a plain Gaussian the exact composition (a Gaussian with the combined noise
    multiplier, Balle & Wang 2018) is used instead, being tighter.

Any pure-DP history is also reported by basic composition with ``delta = 0``
when that is smaller: every bound here is valid, so the smallest one is.
"""

from __future__ import annotations

import math
import warnings
from collections import namedtuple

import numpy as np

from .conversions import (
    DEFAULT_ORDERS,
    advanced_composition_epsilon,
    gaussian_dp_mu,
    gaussian_epsilon,
    rdp_to_epsilon,
    zcdp_to_epsilon,
)
from .events import REPLACE_ONE, GaussianEvent, PrivacyEvent, _check_relation

COMPOSITIONS = ("basic", "advanced", "zcdp", "rdp")

PrivacySpent = namedtuple("PrivacySpent", ["epsilon", "delta"])
PrivacySpent.__doc__ = """(epsilon, delta) differential-privacy guarantee of a release."""


def _check_composition(composition):
    if composition not in COMPOSITIONS:
        raise ValueError(f"composition must be one of {COMPOSITIONS}, got {composition!r}.")


def _approx_events(events):
    return [e for e in events if not e.is_pure and e.count > 0]


def _basic(events, delta):
    approx = _approx_events(events)
    n_approx = sum(e.count for e in approx)
    per_use_delta = delta / n_approx if n_approx else 0.0
    return sum(e.count * (e.pure_epsilon() if e.is_pure else e.approx_epsilon(per_use_delta)) for e in events)


def _advanced(events, delta):
    approx = _approx_events(events)
    n_approx = sum(e.count for e in approx)
    # delta' of the composition theorem gets half the budget when some events
    # also need a delta of their own, all of it otherwise.
    delta_prime = delta / 2 if n_approx else delta
    per_use_delta = delta / (2 * n_approx) if n_approx else 0.0
    eps = []
    for e in events:
        e_i = e.pure_epsilon() if e.is_pure else e.approx_epsilon(per_use_delta)
        eps.extend([e_i] * int(e.count))
    return advanced_composition_epsilon(eps, delta_prime)


def _zcdp(events, delta):
    rho = sum(e.count * e.zcdp_rho() for e in events)
    return zcdp_to_epsilon(rho, delta)


def _rdp(events, delta, orders=DEFAULT_ORDERS):
    orders = np.asarray(orders, dtype=float)
    total = np.zeros_like(orders)
    for e in events:
        if e.count:
            total += e.count * e.rdp(orders)
    eps = rdp_to_epsilon(total, orders, delta)
    if events and all(type(e) is GaussianEvent for e in events):
        # k Gaussians compose exactly into one with multiplier (sum 1/s_i^2)^(-1/2).
        combined = sum(e.count / e.noise_multiplier**2 for e in events)
        if combined > 0:
            eps = min(eps, gaussian_epsilon(combined**-0.5, delta))
    return eps


_COMPOSE = {"basic": _basic, "advanced": _advanced, "zcdp": _zcdp, "rdp": _rdp}


def compose(events, delta, composition="rdp"):
    """Epsilon of the composition of ``events`` at ``delta``.

    Parameters
    ----------
    events : sequence of PrivacyEvent
        Events under one neighbouring relation.
    delta : float
        Target delta in [0, 1).
    composition : {"basic", "advanced", "zcdp", "rdp"}
        Composition theorem.

    Returns
    -------
    spent : PrivacySpent
        ``(epsilon, delta)``; delta is 0 when the history is pure DP and basic
        composition gives the smaller epsilon.
    """
    _check_composition(composition)
    events = [e for e in events if e.count > 0]
    if not events:
        return PrivacySpent(0.0, 0.0)
    relations = {e.neighbouring for e in events}
    if len(relations) > 1:
        raise ValueError(f"Cannot compose events under different relations {relations}.")
    if all(e.is_pure for e in events):
        pure = sum(e.count * e.pure_epsilon() for e in events)
        if composition == "basic" or delta <= 0:
            return PrivacySpent(float(pure), 0.0)
        eps = _COMPOSE[composition](events, delta)
        return PrivacySpent(float(pure), 0.0) if pure <= eps else PrivacySpent(float(eps), delta)
    if delta <= 0:
        return PrivacySpent(math.inf, 0.0)
    return PrivacySpent(float(_COMPOSE[composition](events, delta)), float(delta))


class PrivacyLedger:
    """Ledger of the privacy events of one fit.

    Estimators create one per call to ``fit``; every noisy release records its
    event here (the mechanisms do it), and ``privacy_spent_`` is read off at the
    end.  It is not a hyperparameter and never shared between fits: the
    cross-fit budget is :class:`skdp.privacy.BudgetAccountant`.

    Parameters
    ----------
    composition : {"rdp", "zcdp", "advanced", "basic"}, default="rdp"
        Composition theorem used by :meth:`privacy_spent`.
    neighbouring : {"replace_one", "add_remove"}, default="replace_one"
        Relation the reported guarantee refers to.  Add/remove events are
        converted to replace-one by doubling their sensitivity; the converse
        conversion is refused.
    secure_noise : bool, default=False
        How this fit samples its noise, resolved once by the estimator
        (:class:`~skdp.base.PrivacyPlan`): True, every release is sampled
        exactly on a grid.  The mechanisms read it here, from the ledger they
        record on, and the ledger refuses any event of a floating-point
        sampler (before its noise is drawn, since mechanisms record first):
        a mechanism that cannot honour the setting can never release under it.
    """

    def __init__(self, composition="rdp", neighbouring=REPLACE_ONE, *, secure_noise=False):
        _check_composition(composition)
        _check_relation(neighbouring)
        self.composition = composition
        self.neighbouring = neighbouring
        self.secure_noise = bool(secure_noise)
        self.events = []

    def record(self, event):
        """Record one event (converted to this ledger's relation) and return it."""
        if not isinstance(event, PrivacyEvent):
            raise TypeError(f"event must be a PrivacyEvent, got {type(event).__name__}.")
        if self.secure_noise and not event.sampled_exactly:
            # A mechanism recording a floating-point event here ignored the
            # fit's setting; the estimator should have refused before reserving.
            raise ValueError(
                f"secure_noise=True: this fit's ledger accepts only noise sampled exactly on a grid, "
                f"but a {type(event).__name__} (floating-point noise) was about to be released."
            )
        event = event.to_relation(self.neighbouring)
        self.events.append(event)
        return event

    def privacy_spent(self, delta):
        """(epsilon, delta) of everything recorded so far."""
        return compose(self.events, delta, self.composition)

    def gaussian_dp_mu(self):
        """mu-GDP of the history when every event is a plain Gaussian mechanism, else None.

        Plain Gaussian releases compose exactly into ``sqrt(sum count / z^2)``-GDP
        (:func:`~skdp.privacy.gaussian_dp_mu`), a claim about the whole
        tradeoff curve between neighbours that the audit
        (:func:`~skdp.audit.mu_lower_bound`) can test with far fewer runs than
        the ``(epsilon, delta)`` it implies.  Laplace, subsampled and discrete
        (secure) Gaussian releases are not exactly GDP: None.
        """
        events = [e for e in self.events if e.count > 0]
        if not events or any(type(e) is not GaussianEvent for e in events):
            return None
        return gaussian_dp_mu([e.noise_multiplier for e in events], [e.count for e in events])

    def __len__(self):
        return sum(e.count for e in self.events)

    def __setstate__(self, state):
        # Ledgers pickled before the setting existed recorded no secure flag.
        self.__dict__.update({"secure_noise": False, **state})

    def __repr__(self):
        return (
            f"PrivacyLedger(composition={self.composition!r}, "
            f"neighbouring={self.neighbouring!r}, n_events={len(self)})"
        )


def __getattr__(name):
    # PEP 562: the old name of PrivacyLedger, kept for one release.
    if name == "PrivacyAccountant":
        warnings.warn(
            "PrivacyAccountant was renamed PrivacyLedger (the per-fit ledger, not to be confused "
            "with the accountant= parameter, a BudgetAccountant); the old name will be removed in "
            "the next release.",
            FutureWarning,
            stacklevel=2,
        )
        return PrivacyLedger
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
