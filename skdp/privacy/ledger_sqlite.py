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

# ``status`` is 'reserved' for a fit's open reservation and 'spent' once
# settled (or for a plain spend).  Both count against the budget.
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
    created REAL,
    status TEXT NOT NULL DEFAULT 'spent'
);
CREATE INDEX IF NOT EXISTS spends_dataset ON spends(dataset);
"""


class SQLiteBudgetAccountant(BudgetAccountant):
    """A :class:`~skdp.privacy.BudgetAccountant` kept in an SQLite file, shared by processes and threads.

    Several processes (``GridSearchCV(n_jobs=-1)``, notebooks, a nightly job)
    spend from one budget per dataset.  Each spend, reservation and
    settlement runs its check and its write inside one ``BEGIN IMMEDIATE``
    transaction, which SQLite serialises across processes with a file lock:
    no lost update, no spend or reservation admitted past the limit.  A fit
    reserves its request before it touches the data and settles it to its
    ``privacy_spent_`` when it ends (see :class:`BudgetAccountant`).

    Crash safety: a process killed mid-transaction leaves no partial row
    (SQLite rolls its journal back); a fit killed between its reservation
    and its settlement leaves its reservation charged (a row with
    ``status='reserved'``, listed by :attr:`reservations`), so the ledger
    still records everything that may have been released.

    Threads: a transaction's connection belongs to the thread that opened it
    (thread-local), and reads outside a transaction open their own
    connection, so they only ever see committed rows.

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
        self._local = threading.local()
        with self._connection() as con:
            con.executescript(_SCHEMA)
            con.execute("BEGIN IMMEDIATE")
            # Ledgers written before reservations existed lack the status
            # column; added under the write lock so concurrent openers agree.
            columns = {row[1] for row in con.execute("PRAGMA table_info(spends)")}
            if "status" not in columns:
                con.execute("ALTER TABLE spends ADD COLUMN status TEXT NOT NULL DEFAULT 'spent'")
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

    @contextlib.contextmanager
    def _connection(self):
        con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        try:
            yield con
        finally:
            con.close()

    def _query(self, sql, params=()):
        # Inside this thread's own transaction, read through its connection
        # (to see its own uncommitted writes); otherwise open a connection for
        # this read alone.  Never another thread's connection: sqlite3 forbids
        # it, and it would expose that thread's uncommitted rows.
        con = getattr(self._local, "con", None)
        if con is not None:
            return [tuple(r) for r in con.execute(sql, params)]
        with self._connection() as con:
            return [tuple(r) for r in con.execute(sql, params)]

    def _entries(self):
        return self._query(
            "SELECT epsilon, delta, label FROM spends WHERE dataset = ? ORDER BY id", (self.dataset,)
        )

    def _open_entries(self):
        return self._query(
            "SELECT epsilon, delta, label FROM spends WHERE dataset = ? AND status = 'reserved' ORDER BY id",
            (self.dataset,),
        )

    @contextlib.contextmanager
    def _transaction(self):
        # The lock only keeps this process's threads from queueing on SQLite's
        # busy timeout; BEGIN IMMEDIATE is what serialises processes.
        with self._lock, self._connection() as con:
            con.execute("BEGIN IMMEDIATE")
            self._local.con = con
            try:
                yield
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            finally:
                self._local.con = None

    def _write(self, sql, params):
        con = getattr(self._local, "con", None)
        if con is None:
            raise RuntimeError("SQLiteBudgetAccountant writes only inside _transaction().")
        return con.execute(sql, params)

    def _append(self, epsilon, delta, label, reserved=False):
        cursor = self._write(
            "INSERT INTO spends (dataset, epsilon, delta, label, pid, created, status) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                self.dataset,
                epsilon,
                delta,
                label,
                os.getpid(),
                time.time(),
                "reserved" if reserved else "spent",
            ),
        )
        return cursor.lastrowid

    def _open_entry(self, key):
        rows = self._query(
            "SELECT epsilon, delta, label FROM spends WHERE id = ? AND dataset = ? AND status = 'reserved'",
            (key, self.dataset),
        )
        return rows[0] if rows else None

    def _close_entry(self, key, epsilon, delta):
        self._write(
            "UPDATE spends SET epsilon = ?, delta = ?, status = 'spent' WHERE id = ? AND dataset = ?",
            (epsilon, delta, key, self.dataset),
        )

    def _ledger_id(self):
        # Row ids are unique within the file; any accountant opened on the
        # same file and dataset (in any process) may settle the reservation.
        return f"sqlite:{os.path.realpath(self.path)}:{self.dataset}"

    def __getstate__(self):
        state = super().__getstate__()
        del state["_local"]
        return state

    def __setstate__(self, state):
        state.pop("_con", None)  # pickles made before connections were thread-local
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._local = threading.local()

    def __repr__(self):
        eps, delta = self.spent
        return (
            f"SQLiteBudgetAccountant({self.path!r}, dataset={self.dataset!r}, epsilon={self.epsilon:g}, "
            f"delta={self.delta:g}, spent=(epsilon={eps:g}, delta={delta:g}))"
        )
