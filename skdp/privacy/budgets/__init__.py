"""Budgets: privacy shared by many fits, reserved before and settled after each one.

* :mod:`~skdp.privacy.budgets.in_process`: :class:`~skdp.privacy.BudgetAccountant`, a budget
  kept in memory and composed by the events of the fits settled on it;
* :mod:`~skdp.privacy.budgets.sqlite`: :class:`~skdp.privacy.SQLiteBudgetAccountant`, the same
  budget in an SQLite file shared by processes;
* :mod:`~skdp.privacy.budgets.hold`: :func:`~skdp.privacy.hold`, the one reservation primitive
  every fit path uses;
* :mod:`~skdp.privacy.budgets.records`: events as JSON-ready records for ledgers kept outside
  the process.
"""

from .hold import BudgetHold, hold
from .in_process import BudgetAccountant, BudgetRemaining, BudgetReservation
from .sqlite import SQLiteBudgetAccountant

__all__ = ["BudgetAccountant", "BudgetHold", "BudgetRemaining", "BudgetReservation", "SQLiteBudgetAccountant", "hold"]
