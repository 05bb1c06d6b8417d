"""A persistent, process-safe privacy budget in an SQLite database file."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sqlite3
import threading
import time

from ..events import REPLACE_ONE
from ..ledger import DEFAULT_COMPOSITION, _check_composition
from .in_process import BudgetAccountant, _Record
from .records import events_from_json, events_to_json

#: The schema version this code writes (``PRAGMA user_version``).  0: the
#: ledgers of skdp before versioning (with or without the ``status`` column);
#: 2: the fits' events and the budget's composition are stored.
SCHEMA_VERSION = 2

# ``status`` is 'reserved' for a fit's open reservation and 'spent' once
# settled (or for a plain spend).  Both count against the budget.  ``events``
# is the JSON list of the entry's event records (skdp.privacy.budgets.records),
# NULL for an entry without events; ``joined`` its rank among the entries
# with events, in the order they got them (the order the budget composes
# them in, see BudgetAccountant).  ``composition`` is NULL only for a budget
# written before version 2 and not opened since.
_TABLES = (
    """CREATE TABLE IF NOT EXISTS budgets (
    dataset TEXT PRIMARY KEY,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    neighbouring TEXT NOT NULL,
    composition TEXT
)""",
    """CREATE TABLE IF NOT EXISTS spends (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL REFERENCES budgets(dataset),
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    label TEXT,
    pid INTEGER,
    created REAL,
    status TEXT NOT NULL DEFAULT 'spent',
    events TEXT,
    joined INTEGER
)""",
    "CREATE INDEX IF NOT EXISTS spends_dataset ON spends(dataset)",
)

# Indexes on columns added since the first schema (created after the migration
# below): the next join rank, MAX(joined), in O(log n) instead of a scan of
# every row.  An earlier skdp opening the file keeps them up to date.
_INDEXES = ("CREATE INDEX IF NOT EXISTS spends_joined ON spends(dataset, joined)",)

#: Values of ``durability`` (:class:`SQLiteBudgetAccountant`).
DURABILITIES = ("charges", "process")

# Columns added since the first released schema, added to older files.
_ADDED_COLUMNS = (
    ("spends", "status", "TEXT NOT NULL DEFAULT 'spent'"),
    ("spends", "events", "TEXT"),
    ("spends", "joined", "INTEGER"),
    ("budgets", "composition", "TEXT"),
)


#: Connections inherited through ``fork`` from the parent process: kept
#: referenced in the child so that they are never used nor closed there.
_INHERITED = []


@functools.lru_cache(maxsize=8192)
def _parsed_events(text):
    """The events of one row's JSON, parsed once per process.

    Every total reads every row; a row's events never change once written,
    so the same text gives the same tuple, which the budget's composition
    state (:meth:`BudgetAccountant._group_events`) recognises without
    converting and merging it again.
    """
    try:
        return events_from_json(text)
    except ValueError:
        # An unreadable record counts by basic composition at the row's
        # own amount, which is always valid.
        return None


@functools.lru_cache(maxsize=1024)
def _cached_events_json(events):
    return events_to_json(events)


def _events_json(events):
    """The JSON of ``events`` (a tuple), written once per process for the same events.

    A search settles the same plan's events fit after fit.
    """
    try:
        return _cached_events_json(events)
    except TypeError:  # an event that is not hashable
        return events_to_json(events)


class SQLiteBudgetAccountant(BudgetAccountant):
    """A :class:`~skdp.privacy.BudgetAccountant` kept in an SQLite file, shared by processes and threads.

    Several processes (``GridSearchCV(n_jobs=-1)``, notebooks, a nightly job)
    spend from one budget per dataset.  Each spend, reservation and
    settlement runs its check and its write inside one ``BEGIN IMMEDIATE``
    transaction, which SQLite serialises across processes with a file lock:
    no lost update, no spend or reservation admitted past the limit.  A fit
    reserves its request before it touches the data and settles it to its
    ``privacy_spent_`` and its events when it ends; the budget composes the
    fits' events (see :class:`BudgetAccountant` for the rule, why it is
    valid, and when to choose ``composition="basic"``).

    Crash safety: a process killed mid-transaction leaves no partial row
    (SQLite's write-ahead log holds no uncommitted transaction after a
    crash); a fit killed between its reservation and its settlement leaves
    its reservation charged (a row with ``status='reserved'``, listed by
    :attr:`reservations`), so the ledger still records everything that may
    have been released.  With ``durability="charges"`` (the default) every
    transaction that may raise the charged total is on disk before the call
    returns, so not even a power failure or an operating-system crash can
    undo a charge; only a settlement within its reservation (which lowers
    the total) is not waited for: lost, its reservation stays charged, an
    over-count.  The file must be on a local file system (SQLite's locks
    and its log's shared index need one).

    Threads: a transaction's connection belongs to the thread that opened it
    (thread-local), and reads outside a transaction open their own
    connection, so they only ever see committed rows.

    Schema versions
        The file's ``PRAGMA user_version`` is :data:`SCHEMA_VERSION` (2):
        the ``spends`` table stores each entry's events as JSON
        (:mod:`skdp.privacy.budgets.records`) and the rank in which it joined
        the composed group, the ``budgets`` table the budget's composition.
        A file written by an earlier skdp (version 0) is migrated when it is
        opened, inside the write lock (``ALTER TABLE ... ADD COLUMN``, then
        the version), so concurrent openers agree; its rows have no events
        and keep counting by basic composition, while fits settled from then
        on compose.  A file whose version is newer than this code knows is
        refused with ValueError (naming ``path``) rather than opened: its
        totals might depend on columns this code would ignore.  (An earlier
        skdp opening a version-2 file reads every row by basic composition,
        a larger and still valid total.)

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
    composition : {"pld", "rdp", "zcdp", "advanced", "basic"} or None, default=None
        Accountant composing the fits' events.  Stored with the budget by the
        first accountant opened on it (None: ``"pld"``); later ones must
        agree, or pass None to adopt it.  A budget migrated from version 0
        has none stored: the first opener's choice (None: ``"pld"``) is
        stored.
    durability : {"charges", "process"}, default="charges"
        What a commit waits for.  ``"charges"``: a spend, a reservation, an
        extension and a settlement above its reservation wait until the log
        is synced to disk (one ``fsync`` each, a few milliseconds on most
        disks); a settlement within its reservation does not.  ``"process"``:
        no commit waits for the disk (SQLite's ``synchronous=NORMAL``): every
        committed transaction survives the crash of any process, but the last
        ones may be undone by a power failure or an operating-system crash,
        which could then forget a charge whose fit's output already left the
        machine.  A setting of this handle, not of the file.
    """

    def __init__(
        self,
        path,
        epsilon=None,
        delta=None,
        neighbouring=REPLACE_ONE,
        dataset="default",
        timeout=60.0,
        composition=None,
        durability="charges",
    ):
        if composition is not None:
            _check_composition(composition)
        if durability not in DURABILITIES:
            raise ValueError(f"durability must be one of {DURABILITIES}, got {durability!r}.")
        self.path = os.fspath(path)
        self.dataset = str(dataset)
        self.timeout = float(timeout)
        self.durability = durability
        self._local = threading.local()
        with self._connection() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                self._open_schema(con)
                row = con.execute(
                    "SELECT epsilon, delta, neighbouring, composition FROM budgets WHERE dataset = ?",
                    (self.dataset,),
                ).fetchone()
                if row is None:
                    stored = (
                        math.inf if epsilon is None else float(epsilon),
                        1.0 if delta is None else float(delta),
                        neighbouring,
                        composition or DEFAULT_COMPOSITION,
                    )
                    super().__init__(*stored)
                    con.execute("INSERT INTO budgets VALUES (?, ?, ?, ?, ?)", (self.dataset, *stored))
                else:
                    requested = (epsilon, delta, neighbouring, composition)
                    for name, want, have in zip(
                        ("epsilon", "delta", "neighbouring", "composition"), requested, row, strict=True
                    ):
                        if want is not None and have is not None and want != have:
                            raise ValueError(
                                f"The ledger {self.path!r} holds dataset {self.dataset!r} with "
                                f"{name}={have!r}, not {want!r}."
                            )
                    if row[3] is None:  # migrated from version 0: the first opener chooses
                        stored_composition = composition or DEFAULT_COMPOSITION
                        con.execute(
                            "UPDATE budgets SET composition = ? WHERE dataset = ?",
                            (stored_composition, self.dataset),
                        )
                    else:
                        stored_composition = row[3]
                    super().__init__(*row[:3], stored_composition)
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    def _open_schema(self, con):
        """Create or migrate the schema (inside the opener's write transaction)."""
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise ValueError(
                f"path {self.path!r} holds a ledger of schema version {version}, newer than this "
                f"skdp knows ({SCHEMA_VERSION}); open it with the skdp that wrote it or a newer one."
            )
        for statement in _TABLES:
            con.execute(statement)
        if version < SCHEMA_VERSION:
            for table, column, declaration in _ADDED_COLUMNS:
                columns = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
                if column not in columns:
                    con.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
            con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        for statement in _INDEXES:
            con.execute(statement)

    @contextlib.contextmanager
    def _connection(self):
        """This thread's connection to the file, opened once per thread and process.

        A connection kept open keeps its compiled statements (sqlite3's
        statement cache) and spares an open and a close per transaction.  It
        belongs to the thread that opened it (sqlite3 forbids sharing it,
        and a reader on another thread must not see its uncommitted rows),
        and to the process: after a ``fork`` the child opens its own, since
        SQLite connections must not cross a fork.
        """
        yield self._thread_connection()

    def _thread_connection(self):
        local = self._local
        con = getattr(local, "connection", None)
        if con is not None and local.pid == os.getpid():
            return con
        if con is not None:
            # Inherited through fork: never used, nor closed, here.
            _INHERITED.append(con)
        con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        # Write-ahead log: a commit appends to the log instead of rewriting a
        # rollback journal and the file (several syncs per commit), and
        # readers never block the writer.  Persistent in the file; where the
        # file system cannot share the log's index (no shared memory), SQLite
        # keeps its rollback journal, and every commit then syncs in full.
        mode = con.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        local.wal = str(mode).lower() == "wal"
        local.synchronous = None
        local.connection, local.pid = con, os.getpid()
        return con

    def _set_synchronous(self, con, durable):
        """``PRAGMA synchronous`` for the next commit: FULL for a durable one (docs/budget.md)."""
        level = "FULL" if durable or not self._local.wal else "NORMAL"
        if self._local.synchronous != level:
            con.execute(f"PRAGMA synchronous = {level}")
            self._local.synchronous = level

    def _query(self, sql, params=()):
        # Through this thread's connection: inside its own transaction it
        # sees its own uncommitted writes; outside one each statement is its
        # own read transaction and sees committed rows only.
        return [tuple(r) for r in self._thread_connection().execute(sql, params)]

    def _entries(self):
        return self._query(
            "SELECT epsilon, delta, label FROM spends WHERE dataset = ? ORDER BY id", (self.dataset,)
        )

    def _records(self):
        rows = self._query(
            "SELECT id, epsilon, delta, label, status, events, joined FROM spends "
            "WHERE dataset = ? ORDER BY id",
            (self.dataset,),
        )
        return [
            _Record(key, eps, dlt, label, status == "reserved", self._events_of(events), joined)
            for key, eps, dlt, label, status, events, joined in rows
        ]

    def _records_from(self, key):
        # Row ids only grow (AUTOINCREMENT, one writer at a time), so the
        # rows from ``key`` on are those at or after it: a total reads the
        # rows that may have changed since the last one, not every row.
        if key is None:
            return self._records()
        rows = self._query(
            "SELECT id, epsilon, delta, label, status, events, joined FROM spends "
            "WHERE dataset = ? AND id >= ? ORDER BY id",
            (self.dataset, key),
        )
        return [
            _Record(key, eps, dlt, label, status == "reserved", self._events_of(events), joined)
            for key, eps, dlt, label, status, events, joined in rows
        ]

    @staticmethod
    def _events_of(text):
        if text is None:
            return None
        return _parsed_events(text)

    def _open_entries(self):
        return self._query(
            "SELECT epsilon, delta, label FROM spends WHERE dataset = ? AND status = 'reserved' ORDER BY id",
            (self.dataset,),
        )

    @contextlib.contextmanager
    def _transaction(self, raises_charge=True):
        # The lock only keeps this process's threads from queueing on SQLite's
        # busy timeout; BEGIN IMMEDIATE is what serialises processes.  A
        # transaction that may raise the charged total is on disk when it
        # returns (durability="charges"); one that only lowers it is not
        # waited for (lost to a power failure, the reservation stays charged).
        with self._lock, self._connection() as con:
            self._set_synchronous(con, raises_charge and self.durability == "charges")
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

    def _events_columns(self, events):
        """``(events JSON, joined rank)`` of an entry getting ``events`` (NULLs for none)."""
        if events is None:
            return None, None
        try:
            text = _events_json(tuple(events))
        except ValueError:
            # An event type the file cannot name (defined outside skdp's
            # core): the row counts by basic composition, never lost.
            return None, None
        rank = self._write(
            "SELECT COALESCE(MAX(joined), -1) + 1 FROM spends WHERE dataset = ?", (self.dataset,)
        ).fetchone()[0]
        return text, rank

    def _append(self, epsilon, delta, label, reserved=False, events=None):
        text, rank = self._events_columns(events)
        cursor = self._write(
            "INSERT INTO spends (dataset, epsilon, delta, label, pid, created, status, events, joined) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.dataset,
                epsilon,
                delta,
                label,
                os.getpid(),
                time.time(),
                "reserved" if reserved else "spent",
                text,
                rank,
            ),
        )
        return cursor.lastrowid

    def _open_entry(self, key):
        rows = self._query(
            "SELECT epsilon, delta, label FROM spends WHERE id = ? AND dataset = ? AND status = 'reserved'",
            (key, self.dataset),
        )
        return rows[0] if rows else None

    def _close_entry(self, key, epsilon, delta, events=None):
        text, rank = self._events_columns(events)
        self._write(
            "UPDATE spends SET epsilon = ?, delta = ?, status = 'spent', events = ?, joined = ? "
            "WHERE id = ? AND dataset = ?",
            (epsilon, delta, text, rank, key, self.dataset),
        )

    def _resize_entry(self, key, epsilon, delta):
        self._write(
            "UPDATE spends SET epsilon = ?, delta = ? WHERE id = ? AND dataset = ? AND status = 'reserved'",
            (epsilon, delta, key, self.dataset),
        )

    def _ledger_id(self):
        # Row ids are unique within the file; any accountant opened on the
        # same file and dataset (in any process) may settle the reservation.
        # Resolved once (two per fit otherwise, each a walk of the path).
        ledger_id = self.__dict__.get("_ledger_id_cache")
        if ledger_id is None:
            ledger_id = self._ledger_id_cache = f"sqlite:{os.path.realpath(self.path)}:{self.dataset}"
        return ledger_id

    def __getstate__(self):
        state = super().__getstate__()
        del state["_local"]
        state.pop("_ledger_id_cache", None)  # resolved again where it is unpickled
        return state

    def __setstate__(self, state):
        state.pop("_con", None)  # pickles made before connections were thread-local
        state.setdefault("durability", "charges")  # pickles made before the setting
        super().__setstate__(state)
        self._local = threading.local()

    def __repr__(self):
        eps, delta = self.spent
        return (
            f"SQLiteBudgetAccountant({self.path!r}, dataset={self.dataset!r}, epsilon={self.epsilon:g}, "
            f"delta={self.delta:g}, composition={self.composition!r}, "
            f"spent=(epsilon={eps:g}, delta={delta:g}))"
        )
