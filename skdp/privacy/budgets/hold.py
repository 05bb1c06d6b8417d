"""BudgetHold: the one reservation primitive every fit path uses.

A hold is a part of a :class:`~skdp.privacy.BudgetAccountant` set aside for
one fit (or one composite fit: a pipeline, a search) before it reads any
data.  It can grow while the plan grows (:meth:`BudgetHold.extend`, an
atomic check-and-record like the reservation itself), it tracks the fit's
:class:`~skdp.privacy.PrivacyLedger`, and it is closed on every exit path
(a context manager): settled to what was spent when the fit ends, and, when
the fit raises first, to at least what the ledger released and never less
than the hold.
"""

from __future__ import annotations

import threading

from ..events import REPLACE_ONE, _check_relation
from .in_process import _SETTLE_RTOL, _check_amount, _check_events


def _exceeds(amount, held):
    return amount > held * (1 + _SETTLE_RTOL) + 1e-12


class BudgetHold:
    """A reservation on a budget, held for one fit and closed on every exit path.

    Returned by :meth:`BudgetAccountant.hold` (or :func:`skdp.privacy.hold`,
    which returns a no-op hold when there is no budget, so that callers
    never branch).  Until it is settled the held amount counts as spent on
    the budget.

    Life cycle
        ``with budget.hold(eps, delta, relation, label) as hold:`` reserves
        (raising :class:`~skdp.exceptions.BudgetExceededError`, charging
        nothing, if the request does not fit); :meth:`track` attaches the
        fit's ledger; :meth:`extend` reserves more for a plan that grows
        after an earlier release; :meth:`settle` replaces the hold by what
        was spent.  Leaving the ``with`` block without a settlement (an
        exception, a forgotten settle) closes the hold conservatively: the
        budget is charged the larger of the held amount and what the
        tracked ledger released (:meth:`close`).  A fit that failed after
        reading the data may have released something outside its ledger (an
        error that depends on the data, a noisy statistic still in memory),
        so the whole hold stays charged; a ledger that released more than
        the hold (a calibration bug) is charged in full, with its events.

    Attributes
    ----------
    budget : BudgetAccountant or None
        The budget held on (None: a no-op hold, which still tracks a ledger
        and checks its settlement against the hold).
    reservation : BudgetReservation or None
        The budget's entry (its ``epsilon, delta`` are those first reserved,
        in the budget's relation; :attr:`held` is the current amount).
    neighbouring : str
        Relation of the amounts passed to :meth:`extend` and :meth:`settle`.
    label : str or None
    ledger : PrivacyLedger or None
        The tracked ledger (:meth:`track`).
    settled : bool
        Whether the hold is closed.
    """

    def __init__(self, budget, reservation, epsilon, delta, neighbouring=REPLACE_ONE, label=None):
        self.budget = budget
        self.reservation = reservation
        self.neighbouring = neighbouring
        self.label = label
        self.ledger = None
        self.settled = False
        # The hold in its own relation (what the caller asked for in all)
        # and in the budget's (what the budget's entry holds).
        self._held = (float(epsilon), float(delta))
        self._charged = (
            (float(reservation.epsilon), float(reservation.delta)) if reservation is not None else self._held
        )
        self._lock = threading.RLock()

    @property
    def held(self):
        """``(epsilon, delta)`` held so far, in the hold's relation."""
        from ..ledger import PrivacySpent

        return PrivacySpent(*self._held)

    def __repr__(self):
        state = "settled" if self.settled else "open"
        eps, dlt = self._held
        return f"BudgetHold(epsilon={eps:g}, delta={dlt:g}, label={self.label!r}, {state})"

    # --- life cycle -----------------------------------------------------------

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self.settled:
            self.close()
        return False

    def track(self, ledger):
        """Attach the fit's :class:`~skdp.privacy.PrivacyLedger` (read if the hold closes unsettled); return it."""
        self.ledger = ledger
        return ledger

    def _check_open(self, action):
        if self.settled:
            raise ValueError(f"This hold is already settled; it cannot {action}.")

    def extend(self, epsilon, delta):
        """Reserve ``(epsilon, delta)`` more (in the hold's relation) for a plan that grows.

        One atomic check-and-record on the budget, like the first
        reservation: if the extension does not fit in what remains,
        :class:`~skdp.exceptions.BudgetExceededError` is raised and nothing
        more is charged (the hold keeps its amount).  Thread-safe.

        Returns
        -------
        held : PrivacySpent
            The new :attr:`held`.
        """
        _check_amount("epsilon", epsilon)
        _check_amount("delta", delta)
        with self._lock:
            self._check_open("extend")
            total = (self._held[0] + float(epsilon), self._held[1] + float(delta))
            if self.budget is None:
                self._held = self._charged = total
                return self.held
            # The budget's relation may differ: convert the new total (group
            # privacy is not additive in delta) and reserve the difference.
            eps, dlt = self.budget._converted(*total, self.neighbouring)
            self.budget._extend_reservation(
                self.reservation, max(0.0, eps - self._charged[0]), max(0.0, dlt - self._charged[1])
            )
            self._held = total
            self._charged = (max(eps, self._charged[0]), max(dlt, self._charged[1]))
        return self.held

    def settle(self, epsilon, delta, events=None):
        """Replace the hold by what was spent, ``(epsilon, delta)`` with its ``events``.

        Parameters
        ----------
        epsilon, delta : float
            Amount spent, in the hold's relation; at most :attr:`held`.
        events : sequence of PrivacyEvent, default=None
            The events ``(epsilon, delta)`` is a guarantee of (the fit's
            ``privacy_ledger_.events``): the budget composes them
            (:class:`~skdp.privacy.BudgetAccountant`).

        Raises
        ------
        ValueError
            If the hold is settled already, or if the amount exceeds the
            hold: the excess is recorded on the budget first (the release
            happened; the ledger never under-reports it).
        """
        _check_amount("epsilon", epsilon)
        _check_amount("delta", delta)
        events = _check_events(events)
        with self._lock:
            self._check_open("be settled again")
            self.settled = True
            if self.budget is not None:
                self.budget.settle(self.reservation, epsilon, delta, self.neighbouring, events=events)
                return
        held_eps, held_delta = self._held
        if _exceeds(epsilon, held_eps) or _exceeds(delta, held_delta):
            raise ValueError(
                f"Settled (epsilon={epsilon:g}, delta={delta:g}) exceeds the hold "
                f"(epsilon={held_eps:g}, delta={held_delta:g})."
            )

    def close(self):
        """Close an unsettled hold conservatively (what ``__exit__`` does): never less than the hold.

        The amount charged is the hold, or, when the tracked ledger's
        ``privacy_spent`` (at the held delta) exceeds it, that amount with
        the ledger's events.  No-op on a settled hold.
        """
        with self._lock:
            if self.settled:
                return
            eps, dlt = self._held
            events = None
            if self.ledger is not None and self.ledger.events:
                try:
                    spent = self.ledger.privacy_spent(dlt)
                    released = (float(spent.epsilon), float(spent.delta))
                except ValueError:
                    released = None  # the ledger's accountant cannot compose it: keep the hold
                if released is not None and (_exceeds(released[0], eps) or _exceeds(released[1], dlt)):
                    eps, dlt = max(eps, released[0]), max(dlt, released[1])
                    events = list(self.ledger.events)
            try:
                self.settle(eps, dlt, events)
            except ValueError:
                pass  # an excess is recorded before settle complains


def hold(budget, epsilon, delta, neighbouring=None, label=None):
    """Hold ``(epsilon, delta)`` on ``budget`` for one fit; a no-op hold when ``budget`` is None.

    Parameters
    ----------
    budget : BudgetAccountant or None
    epsilon, delta : float
        The request, in the relation ``neighbouring``.
    neighbouring : {"replace_one", "add_remove"}, default=None
        Relation of the request (None: the budget's, or replace-one).
    label : str, default=None
        Label of the budget's entry.

    Returns
    -------
    hold : BudgetHold

    Raises
    ------
    BudgetExceededError
        If the request does not fit in what remains; nothing is charged.
    """
    if budget is not None:
        return budget.hold(epsilon, delta, neighbouring, label)
    _check_amount("epsilon", epsilon)
    _check_amount("delta", delta)
    neighbouring = neighbouring or REPLACE_ONE
    _check_relation(neighbouring)
    return BudgetHold(None, None, epsilon, delta, neighbouring, label)
