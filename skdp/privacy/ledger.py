"""Composition of a fit's privacy events into one (epsilon, delta) guarantee.

One entry point, :func:`compose` (Opacus' shape: record events, then ask for
epsilon at a delta), and the per-fit :class:`PrivacyLedger`.  The composition
theorems are plug-ins of :mod:`skdp.privacy.accountants`, selected by name:

``"pld"`` (the default)
    Privacy loss distributions through Google's dp-accounting, pessimistically
    discretised (an upper bound): the tightest, about 9% below RDP on long
    DP-SGD runs, and the only one that accounts a Poisson-subsampled Gaussian
    under replace-one neighbours directly.  A history of plain Gaussian
    releases is reported by its exact composition instead, without building
    a PLD (the true epsilon of the pair the PLD discretises; see
    :mod:`skdp.privacy.accountants.pld`).  Never looser than ``"rdp"``
    (it reports the smaller of the two); a history holding an event it has
    no rule for (secure noise's discrete Gaussian, fixed-size batches drawn
    without replacement, Acs et al.'s cluster-sampled steps) is composed by
    ``"rdp"`` instead.
``"rdp"``
    Renyi DP / moments accountant (Mironov 2017; Abadi et al. 2016), curves
    from autodp, converted with Balle et al. (2020); plain Gaussian histories
    get their exact composition (Balle & Wang 2018).
``"zcdp"``
    Sum of zCDP parameters, converted by ``rho + 2 sqrt(rho log(1/delta))``
    (Bun & Steinke 2016; Park et al.'s "CDP" budgeting).
``"advanced"``
    Advanced composition (Dwork & Roth 2014, Thm. 3.20 / Cor. 3.21), the
    baseline of Park et al. (DP-EM), capped by basic composition.
``"basic"``
    Sum of per-use epsilons and deltas (Dwork & Roth 2014, Thm. 3.16).

Any pure-DP history is also reported by basic composition with ``delta = 0``
when that is smaller: every bound here is valid, so the smallest one is.
"""

from __future__ import annotations

import math
from collections import namedtuple
from dataclasses import replace

from sklearn.utils._param_validation import StrOptions

from .accountants import ACCOUNTANTS, get_accountant
from .accountants.basic import pure_epsilon
from .accountants.conversions import gaussian_dp_mu
from .events import REPLACE_ONE, GaussianEvent, PrivacyEvent, _check_relation

#: The ``composition=`` names, the accountants of :mod:`skdp.privacy.accountants`.
COMPOSITIONS = tuple(ACCOUNTANTS)

#: The one ``_parameter_constraints`` entry of every ``composition=`` parameter
#: (estimators, pipelines): a view of the live registry, not a snapshot, so an
#: accountant registered after import (a module added to the package, or a
#: subclass defined in the user's code) is accepted by every estimator, and its
#: error message lists the accountants registered when it is raised.
COMPOSITION_CONSTRAINT = StrOptions(ACCOUNTANTS.keys())

#: The composition of every estimator's ledger unless it is told otherwise.
DEFAULT_COMPOSITION = "pld"

#: Where an accountant has no rule for some event of a history, the
#: accountant that composes it instead (documented on "pld").
_FALLBACK = {"pld": "rdp"}

PrivacySpent = namedtuple("PrivacySpent", ["epsilon", "delta"])
PrivacySpent.__doc__ = """(epsilon, delta) differential-privacy guarantee of a release."""


def _check_composition(composition):
    # The live registry, not COMPOSITIONS (a snapshot taken at import): an
    # accountant registered later, outside this package, is usable too.
    if not isinstance(composition, str) or composition not in ACCOUNTANTS:
        raise ValueError(f"composition must be one of {tuple(ACCOUNTANTS)}, got {composition!r}.")


def accountant_for(events, composition, pld_interval=None):
    """The accountant that composes ``events`` under ``composition`` (with its fallback).

    ``pld_interval``: the grid step of a ``"pld"`` composition, when it is
    not dp-accounting's default (a plan's relative grid,
    :func:`~skdp.privacy.calibration.pld_interval_for`); the fallback
    accountant is never affected.  Raises ValueError naming
    ``composition`` when neither it nor its fallback has a rule for every
    event.
    """
    _check_composition(composition)
    accountant = get_accountant(composition)
    if pld_interval is not None and composition == "pld" and not accountant.unsupported(events):
        from .accountants.pld import PLDAccountant

        return PLDAccountant(value_discretization_interval=pld_interval)
    missing = accountant.unsupported(events)
    if missing and composition in _FALLBACK:
        accountant = get_accountant(_FALLBACK[composition])
        missing = accountant.unsupported(events)
    if missing:
        kinds = sorted({f"{type(e).__name__} ({e.neighbouring})" for e in missing})
        # Name the compositions that can (never the one that just refused).
        able = [
            name
            for name in sorted(ACCOUNTANTS, key=lambda name: name != DEFAULT_COMPOSITION)
            if name != composition and not get_accountant(name).unsupported(events)
        ]
        hint = f"use {' or '.join(map(repr, able))}" if able else "no composition has a rule for it"
        raise ValueError(f"composition={composition!r} cannot account {', '.join(kinds)}; {hint}.")
    return accountant


def _merged(events):
    """``events`` with the uses of identical mechanisms counted once each.

    A ledger records one event per release (DP-SGD: one per step); the
    composition only depends on how often each mechanism was used, and PLD
    composes ``k`` uses of one mechanism by one self-convolution instead of
    ``k`` convolutions.  Order is kept (first use); unhashable events are left
    as they are.  An event whose mechanism occurs once is returned as it is
    (no copy), so merging a history of distinct mechanisms costs one dict
    lookup per event.
    """
    groups = {}
    try:
        for e in events:
            key = _mechanism(e)
            group = groups.get(key)
            if group is None:
                groups[key] = [e, e.count]
            else:
                group[1] += e.count
    except TypeError:
        return list(events)
    return [e if e.count == total else replace(e, count=total) for e, total in groups.values()]


def _mechanism(event):
    """A hashable key of ``event`` without its count: its type and its other fields."""
    fields = getattr(event, "__dict__", None)
    if fields is None:
        return replace(event, count=1)
    return (type(event), *(value for name, value in fields.items() if name != "count"))


def compose(events, delta, composition=DEFAULT_COMPOSITION, pld_interval=None):
    """Epsilon of the composition of ``events`` at ``delta``.

    Parameters
    ----------
    events : sequence of PrivacyEvent
        Events under one neighbouring relation.
    delta : float
        Target delta in [0, 1).
    composition : {"pld", "rdp", "zcdp", "advanced", "basic"}, default="pld"
        Accountant (:mod:`skdp.privacy.accountants`).
    pld_interval : float or None, default=None
        Grid step of a ``"pld"`` composition (None: dp-accounting's
        ``1e-4``); see :func:`accountant_for`.

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
    events = _merged(events)
    accountant = accountant_for(events, composition, pld_interval)
    if all(e.is_pure for e in events):
        pure = sum(e.count * pure_epsilon(e) for e in events)
        if composition == "basic" or delta <= 0:
            return PrivacySpent(float(pure), 0.0)
        eps = accountant.epsilon(events, delta)
        return PrivacySpent(float(pure), 0.0) if pure <= eps else PrivacySpent(float(eps), delta)
    if delta <= 0:
        return PrivacySpent(math.inf, 0.0)
    return PrivacySpent(float(accountant.epsilon(events, delta)), float(delta))


class PrivacyLedger:
    """Ledger of the privacy events of one fit.

    Estimators create one per call to ``fit``; every noisy release records its
    event here (the mechanisms do it), and ``privacy_spent_`` is read off at the
    end.  It is not a hyperparameter and never shared between fits: the
    cross-fit budget is :class:`skdp.privacy.BudgetAccountant`.

    Parameters
    ----------
    composition : {"pld", "rdp", "zcdp", "advanced", "basic"}, default="pld"
        Accountant used by :meth:`privacy_spent` (:func:`compose`).
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

    Attributes
    ----------
    pld_interval : float or None
        Grid step of the ``"pld"`` composition (None: dp-accounting's
        ``1e-4``).  A fit whose noise was calibrated on a relative grid
        (:func:`~skdp.privacy.calibration.pld_interval_for`, a rule of the
        public target epsilon) sets it, before its first release, to the
        grid its calibration accepted the multiplier on, so that the ledger
        composes what the calibration costed.
    """

    def __init__(self, composition=DEFAULT_COMPOSITION, neighbouring=REPLACE_ONE, *, secure_noise=False):
        _check_composition(composition)
        _check_relation(neighbouring)
        self.composition = composition
        self.neighbouring = neighbouring
        self.secure_noise = bool(secure_noise)
        self.pld_interval = None
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
        return compose(self.events, delta, self.composition, self.pld_interval)

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
        self.__dict__.update({"secure_noise": False, "pld_interval": None, **state})

    def __repr__(self):
        return (
            f"PrivacyLedger(composition={self.composition!r}, "
            f"neighbouring={self.neighbouring!r}, n_events={len(self)})"
        )

