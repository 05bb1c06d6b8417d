"""BudgetAccountant: one privacy budget shared by many fits."""

from __future__ import annotations

import contextlib
import math
import os
import threading

from ..exceptions import BudgetExceededError
from .accountant import PrivacySpent
from .conversions import group_guarantee
from .events import ADD_REMOVE, REPLACE_ONE, _check_relation


class BudgetAccountant:
    """A privacy budget that several fits draw from (basic composition).

    Pass the same instance as ``accountant=`` to any number of skdp estimators.
    Each fit checks, before it touches the data, that its requested
    ``(epsilon, delta)`` fits in what remains, raising
    :class:`~skdp.exceptions.BudgetExceededError` otherwise, and records what
    it actually spent (its ``privacy_spent_``) when it finishes.

    Fits compose by basic composition (Dwork & Roth 2014, Thm. 3.16): the
    ledger's total is the sum of the spends.

    Cloning and model selection
        ``sklearn.base.clone`` returns the *same* ledger (``__sklearn_clone__``),
        so every clone made by ``GridSearchCV`` or ``cross_val_score`` spends
        on the user's budget instead of on a private deep copy.
    Processes
        A ledger copied into another process (``n_jobs > 1`` with joblib's
        process backends) cannot report its spends back; spending from such a
        copy raises ``RuntimeError`` rather than silently losing them.  Use
        ``n_jobs=1``, a thread backend (``joblib.parallel_backend("threading")``),
        which shares the ledger and is serialised by a lock, or
        :class:`~skdp.privacy.SQLiteBudgetAccountant`, a ledger in a database
        file that any number of processes share.

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
        self._lock = threading.Lock()

    # Storage hooks: the in-memory ledger below; a persistent backend
    # (skdp.privacy.SQLiteBudgetAccountant) overrides these three.
    def _entries(self):
        return list(self._history)

    @contextlib.contextmanager
    def _transaction(self):
        if os.getpid() != self._owner_pid:
            raise RuntimeError(
                "This BudgetAccountant is a copy in another process (n_jobs > 1?); its spends "
                "would be lost. Use n_jobs=1, the threading backend, or SQLiteBudgetAccountant."
            )
        with self._lock:
            yield

    def _append(self, epsilon, delta, label):
        self._history.append((epsilon, delta, label))

    @property
    def history(self):
        """List of ``(epsilon, delta, label)`` spends, oldest first."""
        return self._entries()

    @property
    def spent(self):
        """Total (epsilon, delta) spent so far."""
        return self._total(self._entries())

    @staticmethod
    def _total(entries):
        return PrivacySpent(
            float(sum(e for e, _, _ in entries)), min(1.0, float(sum(d for _, d, _ in entries)))
        )

    def remaining(self):
        """(epsilon, delta) still available."""
        return self._remaining(self.spent)

    def _remaining(self, spent):
        return PrivacySpent(max(0.0, self.epsilon - spent.epsilon), max(0.0, self.delta - spent.delta))

    def _converted(self, epsilon, delta, neighbouring):
        _check_relation(neighbouring)
        if neighbouring == self.neighbouring:
            return epsilon, delta
        if neighbouring == ADD_REMOVE:
            return group_guarantee(epsilon, delta, 2)
        raise ValueError("A replace-one guarantee cannot be charged to an add/remove budget.")

    def check(self, epsilon, delta, neighbouring=None):
        """Raise BudgetExceededError if ``(epsilon, delta)`` does not fit."""
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

    def __repr__(self):
        eps, delta = self.spent
        return (
            f"BudgetAccountant(epsilon={self.epsilon:g}, delta={self.delta:g}, "
            f"spent=(epsilon={eps:g}, delta={delta:g}))"
        )
