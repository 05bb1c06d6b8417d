"""BudgetAccountant: one privacy budget shared by many fits."""

from __future__ import annotations

import contextlib
import math
import os
import threading
import uuid
from dataclasses import dataclass
from numbers import Real

from ..exceptions import BudgetExceededError
from .accountant import PrivacySpent
from .conversions import group_guarantee
from .events import ADD_REMOVE, REPLACE_ONE, _check_relation

#: Relative slack a settlement may exceed its reservation by: the same
#: floating-point tolerance with which a fit's ``privacy_spent_`` is compared
#: to its request (:meth:`skdp.base.DPEstimatorMixin._end_private_fit`).
_SETTLE_RTOL = 1e-9


@dataclass(frozen=True)
class BudgetReservation:
    """A part of a budget set aside for one fit, returned by :meth:`~skdp.privacy.BudgetAccountant.reserve`.

    Pass it to :meth:`BudgetAccountant.settle` once the fit knows what it
    spent.  Until then the reserved amount counts as spent.

    Attributes
    ----------
    key : int
        The reservation's entry in its ledger.
    epsilon, delta : float
        Amount reserved, in the budget's neighbouring relation.
    neighbouring : str
        Relation of the request (the default of :meth:`~BudgetAccountant.settle`).
    label : str or None
        Label of the ledger entry.
    ledger : str
        Identity of the ledger the reservation was made on.
    """

    key: int
    epsilon: float
    delta: float
    neighbouring: str
    label: str | None
    ledger: str


def _check_amount(name, value):
    # A negative or NaN amount would credit the budget (or poison every later
    # comparison): refuse it rather than under-report what was spent.
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}.")
    if not (value >= 0):
        raise ValueError(f"{name} must be non-negative, got {value!r}.")


class BudgetAccountant:
    """A privacy budget that several fits draw from (basic composition).

    Pass the same instance as ``accountant=`` to any number of skdp estimators.
    Each fit *reserves* its requested ``(epsilon, delta)`` before it touches
    the data (:meth:`reserve`), raising
    :class:`~skdp.exceptions.BudgetExceededError` and charging nothing if it
    does not fit in what remains, and *settles* the reservation when it
    finishes (:meth:`settle`): the reservation is replaced by what the fit
    actually spent (its ``privacy_spent_``, never more than the request).
    The check and the record of a reservation are one atomic step, so two
    concurrent fits can never both be admitted on budget only one of them
    fits; the second is refused before it reads any data.

    A fit that fails after its reservation (bad data, an interrupted
    training, a crash) keeps its reservation charged: it may already have
    looked at the data or drawn a noisy statistic, so the conservative
    choice is to count the whole request as spent.  Open reservations count
    in :attr:`spent`, :meth:`remaining` and :attr:`history`, and are listed by
    :attr:`reservations`.

    Fits compose by basic composition (Dwork & Roth 2014, Thm. 3.16): the
    ledger's total is the sum of the spends.

    Cloning and model selection
        ``sklearn.base.clone`` returns the *same* ledger (``__sklearn_clone__``),
        so every clone made by ``GridSearchCV`` or ``cross_val_score`` spends
        on the user's budget instead of on a private deep copy.
    Processes
        A ledger copied into another process (``n_jobs > 1`` with joblib's
        process backends) cannot report its spends back; reserving or spending
        from such a copy raises ``RuntimeError`` rather than silently losing
        them.  Use ``n_jobs=1``, a thread backend
        (``joblib.parallel_backend("threading")``), which shares the ledger and
        is serialised by a lock, or :class:`~skdp.privacy.SQLiteBudgetAccountant`,
        a ledger in a database file that any number of processes share.

    Parameters
    ----------
    epsilon : float, default=inf
        Total epsilon budget.
    delta : float, default=1.0
        Total delta budget.
    neighbouring : {"replace_one", "add_remove"}, default="replace_one"
        Relation the budget refers to.  Spends under add/remove neighbours are
        converted by group privacy (``(2 eps, 2 e^eps delta)``).

    Examples
    --------
    >>> from skdp.privacy import BudgetAccountant
    >>> budget = BudgetAccountant(epsilon=1.0)
    >>> budget.spend(0.3, 0.0)
    >>> budget.remaining()
    PrivacySpent(epsilon=0.7, delta=1.0)
    >>> held = budget.reserve(0.5, 0.0, label="my release")
    >>> budget.reservations
    [(0.5, 0.0, 'my release')]
    >>> budget.settle(held, 0.2, 0.0)
    >>> budget.spent
    PrivacySpent(epsilon=0.5, delta=0.0)
    """

    def __init__(self, epsilon=math.inf, delta=1.0, neighbouring=REPLACE_ONE):
        if not (epsilon > 0):
            raise ValueError(f"epsilon must be positive, got {epsilon!r}.")
        if not (0 <= delta <= 1):
            raise ValueError(f"delta must be in [0, 1], got {delta!r}.")
        _check_relation(neighbouring)
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.neighbouring = neighbouring
        self._history = []
        self._open = set()  # indices into _history of unsettled reservations
        self._uid = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._owner_pid = os.getpid()

    # Shared, never copied, by scikit-learn's clone.
    def __sklearn_clone__(self):
        return self

    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        # Pickles made before reservations existed have no open ones.
        self.__dict__.setdefault("_open", set())
        self.__dict__.setdefault("_uid", uuid.uuid4().hex)
        self._lock = threading.Lock()

    # Storage hooks: the in-memory ledger below; a persistent backend
    # (skdp.privacy.SQLiteBudgetAccountant) overrides all of them.  The ones
    # that write are only called inside _transaction().
    def _entries(self):
        return list(self._history)

    def _open_entries(self):
        # Under the lock: a settlement on another thread changes _open and
        # _history together.
        with self._lock:
            return [self._history[i] for i in sorted(self._open)]

    @contextlib.contextmanager
    def _transaction(self):
        if os.getpid() != self._owner_pid:
            raise RuntimeError(
                "This BudgetAccountant is a copy in another process (n_jobs > 1?); its spends "
                "would be lost. Use n_jobs=1, the threading backend, or SQLiteBudgetAccountant."
            )
        with self._lock:
            yield

    def _append(self, epsilon, delta, label, reserved=False):
        self._history.append((epsilon, delta, label))
        key = len(self._history) - 1
        if reserved:
            self._open.add(key)
        return key

    def _open_entry(self, key):
        """``(epsilon, delta, label)`` of the open reservation ``key``, or None."""
        return self._history[key] if key in self._open else None

    def _close_entry(self, key, epsilon, delta):
        label = self._history[key][2]
        self._history[key] = (epsilon, delta, label)
        self._open.discard(key)

    def _ledger_id(self):
        return self._uid

    @property
    def history(self):
        """List of ``(epsilon, delta, label)`` spends, oldest first (open reservations included)."""
        return self._entries()

    @property
    def reservations(self):
        """List of ``(epsilon, delta, label)`` of the reservations not settled yet.

        They are charged (part of :attr:`history` and :attr:`spent`): a fit in
        progress, or one that failed after reserving.
        """
        return self._open_entries()

    @property
    def spent(self):
        """Total (epsilon, delta) spent so far, open reservations included."""
        return self._total(self._entries())

    @staticmethod
    def _total(entries):
        return PrivacySpent(
            float(sum(e for e, _, _ in entries)), min(1.0, float(sum(d for _, d, _ in entries)))
        )

    def remaining(self):
        """(epsilon, delta) still available (open reservations count as spent)."""
        return self._remaining(self.spent)

    def _remaining(self, spent):
        return PrivacySpent(max(0.0, self.epsilon - spent.epsilon), max(0.0, self.delta - spent.delta))

    def _converted(self, epsilon, delta, neighbouring):
        _check_amount("epsilon", epsilon)
        _check_amount("delta", delta)
        _check_relation(neighbouring)
        if neighbouring == self.neighbouring:
            return epsilon, delta
        if neighbouring == ADD_REMOVE:
            return group_guarantee(epsilon, delta, 2)
        raise ValueError("A replace-one guarantee cannot be charged to an add/remove budget.")

    def check(self, epsilon, delta, neighbouring=None):
        """Raise BudgetExceededError if ``(epsilon, delta)`` does not fit.

        A query only: nothing is reserved, so a concurrent fit may take the
        budget before a later :meth:`spend`.  Fits use :meth:`reserve`.
        """
        self._check_against(self.spent, epsilon, delta, neighbouring)

    def _check_against(self, spent, epsilon, delta, neighbouring):
        epsilon, delta = self._converted(epsilon, delta, neighbouring or self.neighbouring)
        eps_left, delta_left = self._remaining(spent)
        tol = 1e-12
        if epsilon > eps_left + tol or delta > delta_left + tol:
            raise BudgetExceededError(
                f"Privacy budget exceeded: this fit needs (epsilon={epsilon:g}, delta={delta:g}) "
                f"but only (epsilon={eps_left:g}, delta={delta_left:g}) remains of "
                f"(epsilon={self.epsilon:g}, delta={self.delta:g})."
            )
        return epsilon, delta

    def spend(self, epsilon, delta, neighbouring=None, label=None):
        """Charge ``(epsilon, delta)`` to the budget, after checking it fits.

        The check and the record happen atomically: two concurrent spends can
        never both pass a check that only one of them fits.
        """
        with self._transaction():
            eps, dlt = self._check_against(self._total(self._entries()), epsilon, delta, neighbouring)
            self._append(float(eps), float(dlt), label)

    def reserve(self, epsilon, delta, neighbouring=None, label=None):
        """Set ``(epsilon, delta)`` aside for a release about to be made.

        Atomically checks that the request fits in what remains and records it
        as an open reservation, which counts as spent until :meth:`settle`
        replaces it by the amount actually spent.  A reservation that is never
        settled (the release failed or its process died) stays charged.

        Parameters
        ----------
        epsilon, delta : float
            Largest guarantee the release may spend.
        neighbouring : {"replace_one", "add_remove"}, default=None
            Relation of the request (None: the budget's).
        label : str, default=None
            Label of the ledger entry (skdp's estimators use their class name).

        Returns
        -------
        reservation : BudgetReservation

        Raises
        ------
        BudgetExceededError
            If the request does not fit; nothing is reserved then.
        """
        neighbouring = neighbouring or self.neighbouring
        with self._transaction():
            eps, dlt = self._check_against(self._total(self._entries()), epsilon, delta, neighbouring)
            key = self._append(float(eps), float(dlt), label, reserved=True)
        return BudgetReservation(int(key), float(eps), float(dlt), neighbouring, label, self._ledger_id())

    def settle(self, reservation, epsilon, delta, neighbouring=None):
        """Replace an open reservation by what the release actually spent.

        Parameters
        ----------
        reservation : BudgetReservation
            Returned by :meth:`reserve` on this budget, not settled yet.
        epsilon, delta : float
            Amount spent, at most the reservation.
        neighbouring : {"replace_one", "add_remove"}, default=None
            Relation of the amount (None: the reservation's).

        Raises
        ------
        TypeError
            If ``reservation`` is not a :class:`BudgetReservation`.
        ValueError
            If ``reservation`` is not an open reservation of this budget, or if
            the amount exceeds it.  An excess is nevertheless recorded (the
            release happened, and the ledger never under-reports it) before
            the error is raised, and may take the total past the budget.
        """
        if not isinstance(reservation, BudgetReservation):
            raise TypeError(f"reservation must be a BudgetReservation, got {type(reservation).__name__}.")
        if reservation.ledger != self._ledger_id():
            raise ValueError("This reservation was made on another budget.")
        eps, dlt = self._converted(epsilon, delta, neighbouring or reservation.neighbouring)
        eps, dlt = float(eps), float(dlt)
        with self._transaction():
            held = self._open_entry(reservation.key)
            if held is None:
                raise ValueError(
                    f"Reservation {reservation.key} is not open on this budget (already settled?)."
                )
            self._close_entry(reservation.key, eps, dlt)
        if eps > held[0] * (1 + _SETTLE_RTOL) + 1e-12 or dlt > held[1] * (1 + _SETTLE_RTOL) + 1e-12:
            raise ValueError(
                f"Settled (epsilon={eps:g}, delta={dlt:g}) exceeds the reservation "
                f"(epsilon={held[0]:g}, delta={held[1]:g}); the larger amount was charged."
            )

    def __repr__(self):
        eps, delta = self.spent
        return (
            f"BudgetAccountant(epsilon={self.epsilon:g}, delta={self.delta:g}, "
            f"spent=(epsilon={eps:g}, delta={delta:g}))"
        )
