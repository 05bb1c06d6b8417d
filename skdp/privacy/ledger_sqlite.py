"""A persistent, process-safe privacy budget in an SQLite database file."""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import threading
import time

from .budget import BudgetAccountant
from .events import REPLACE_ONE

_SCHEMA = """
CREATE TABLE IF NOT EXISTS budgets (
    dataset TEXT PRIMARY KEY,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    neighbouring TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS spends (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL REFERENCES budgets(dataset),
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    label TEXT,
    pid INTEGER,
    created REAL
);
CREATE INDEX IF NOT EXISTS spends_dataset ON spends(dataset);
"""


class SQLiteBudgetAccountant(BudgetAccountant):
    """A :class:`BudgetAccountant` kept in an SQLite file, shared by processes.

    Several processes (``GridSearchCV(n_jobs=-1)``, notebooks, a nightly job)
    spend from one budget per dataset.  Each spend runs its check and its
    insert inside one ``BEGIN IMMEDIATE`` transaction, which SQLite serialises
    across processes with a file lock: no lost update, no spend admitted past
    the limit.  A process killed mid-transaction leaves no partial row (SQLite
    rolls its journal back), and a fit killed before it finishes has spent
    nothing, since fits are charged when they end.

    Parameters
    ----------
    path : str or path-like
        Database file (created if missing).
    epsilon, delta : float
        Total budget of ``dataset``.  The first accountant opened on a dataset
        stores it; later ones must agree (``epsilon=None`` and ``delta=None``
        adopt the stored budget).
    neighbouring : {"replace_one", "add_remove"}, default="replace_one"
    dataset : str, default="default"
        Name of the budget inside the file.
    timeout : float, default=60.0
        Seconds to wait for another process's transaction.
    """

    def __init__(
        self, path, epsilon=None, delta=None, neighbouring=REPLACE_ONE, dataset="default", timeout=60.0
    ):
        self.path = os.fspath(path)
        self.dataset = str(dataset)
        self.timeout = float(timeout)
        with self._connection() as con:
            con.executescript(_SCHEMA)
            con.execute("BEGIN IMMEDIATE")
            row = con.execute(
                "SELECT epsilon, delta, neighbouring FROM budgets WHERE dataset = ?", (self.dataset,)
            ).fetchone()
            if row is None:
                stored = (
                    math.inf if epsilon is None else float(epsilon),
                    1.0 if delta is None else float(delta),
                    neighbouring,
                )
                super().__init__(*stored)
                con.execute("INSERT INTO budgets VALUES (?, ?, ?, ?)", (self.dataset, *stored))
            else:
                requested = (epsilon, delta, neighbouring)
                for name, want, have in zip(
                    ("epsilon", "delta", "neighbouring"), requested, row, strict=True
                ):
                    if want is not None and want != have:
                        con.execute("ROLLBACK")
                        raise ValueError(
                            f"The ledger {self.path!r} holds dataset {self.dataset!r} with "
                            f"{name}={have!r}, not {want!r}."
                        )
                super().__init__(*row)
            con.execute("COMMIT")
        self._con = None

    @contextlib.contextmanager
    def _connection(self):
        con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        try:
            yield con
        finally:
            con.close()

    def _entries(self):
        query = "SELECT epsilon, delta, label FROM spends WHERE dataset = ? ORDER BY id"
        if self._con is not None:  # inside this thread's open transaction
            return [tuple(r) for r in self._con.execute(query, (self.dataset,))]
        with self._connection() as con:
            return [tuple(r) for r in con.execute(query, (self.dataset,))]

    @contextlib.contextmanager
    def _transaction(self):
        with self._lock, self._connection() as con:
            con.execute("BEGIN IMMEDIATE")
            self._con = con
            try:
                yield
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            finally:
                self._con = None

    def _append(self, epsilon, delta, label):
        self._con.execute(
            "INSERT INTO spends (dataset, epsilon, delta, label, pid, created) VALUES (?, ?, ?, ?, ?, ?)",
            (self.dataset, epsilon, delta, label, os.getpid(), time.time()),
        )

    def __getstate__(self):
        state = super().__getstate__()
        state["_con"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self):
        eps, delta = self.spent
        return (
            f"SQLiteBudgetAccountant({self.path!r}, dataset={self.dataset!r}, epsilon={self.epsilon:g}, "
            f"delta={self.delta:g}, spent=(epsilon={eps:g}, delta={delta:g}))"
        )
