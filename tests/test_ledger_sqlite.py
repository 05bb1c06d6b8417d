"""SQLiteBudgetAccountant: one persistent budget shared by processes."""

import json
import multiprocessing
import os
import pickle
import signal
import sqlite3
import threading
from dataclasses import dataclass

import numpy as np
import pytest
from _rendezvous import rendezvous_methods
from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV

from skdp import BudgetExceededError
from skdp.bayes import DPBetaBernoulli
from skdp.mixture import DPGaussianMixture
from skdp.privacy import (
    ADD_REMOVE,
    REPLACE_ONE,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    SQLiteBudgetAccountant,
    SubsampledGaussianEvent,
    compose,
)
from skdp.privacy.budget import BudgetReservation
from skdp.privacy.cluster_sampling import ClusterSampledGaussianEvent
from skdp.privacy.event_records import (
    EVENT_CLASSES,
    event_from_record,
    event_to_record,
    events_from_json,
    events_to_json,
)
from skdp.privacy.ledger_sqlite import SCHEMA_VERSION

CTX = multiprocessing.get_context("fork")


def _hammer(path, n_spends, amount, queue):
    ledger = SQLiteBudgetAccountant(path)
    admitted = refused = 0
    for _ in range(n_spends):
        try:
            ledger.spend(amount, 0.0, label=f"pid {os.getpid()}")
            admitted += 1
        except BudgetExceededError:
            refused += 1
    queue.put((admitted, refused))


@pytest.mark.slow
def test_concurrent_spends_are_neither_lost_nor_overspent(tmp_path):
    path = tmp_path / "ledger.db"
    SQLiteBudgetAccountant(path, epsilon=1.0, delta=0.0)
    n_proc, n_spends, amount = 8, 200, 0.001  # 1.6 epsilon asked of a 1.0 budget
    queue = CTX.Queue()
    procs = [CTX.Process(target=_hammer, args=(path, n_spends, amount, queue)) for _ in range(n_proc)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
    admitted = sum(a for a, _ in results)
    assert sum(r for _, r in results) == n_proc * n_spends - admitted
    ledger = SQLiteBudgetAccountant(path)
    assert len(ledger.history) == admitted  # no lost update
    assert ledger.spent.epsilon == pytest.approx(admitted * amount)
    assert ledger.spent.epsilon <= 1.0 + 1e-9  # no overspend
    assert admitted == round(1.0 / amount)  # and the budget was used up


def _die_inside_transaction(path, queue):
    ledger = SQLiteBudgetAccountant(path)
    with ledger._transaction():
        ledger._append(0.5, 0.0, "doomed")
        queue.put("inside")
        signal.pause()


def _kill_when(target, path, ready):
    """Run ``target(path, queue)`` in a child, SIGKILL it once it reports ``ready``, reopen the ledger."""
    queue = CTX.Queue()
    proc = CTX.Process(target=target, args=(path, queue))
    proc.start()
    assert queue.get(timeout=60) == ready
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    return SQLiteBudgetAccountant(path, timeout=10)


def test_ledger_intact_after_a_process_is_killed_mid_spend(tmp_path):
    path = tmp_path / "ledger.db"
    SQLiteBudgetAccountant(path, epsilon=1.0).spend(0.25, 0.0, label="before")
    ledger = _kill_when(_die_inside_transaction, path, "inside")
    assert ledger.history == [(0.25, 0.0, "before")]
    ledger.spend(0.5, 0.0)  # the dead process's lock is gone
    assert ledger.spent.epsilon == pytest.approx(0.75)


def test_persistence_and_budget_agreement(tmp_path):
    path = tmp_path / "ledger.db"
    SQLiteBudgetAccountant(path, epsilon=2.0, dataset="patients").spend(1.5, 0.0)
    again = SQLiteBudgetAccountant(path, dataset="patients")
    assert again.epsilon == 2.0 and again.spent.epsilon == pytest.approx(1.5)
    with pytest.raises(BudgetExceededError):
        again.spend(1.0, 0.0)
    with pytest.raises(ValueError, match="epsilon=2.0"):
        SQLiteBudgetAccountant(path, epsilon=5.0, dataset="patients")
    other = SQLiteBudgetAccountant(path, epsilon=1.0, dataset="census")
    assert other.spent.epsilon == 0.0


@pytest.mark.slow
def test_grid_search_with_process_workers_spends_on_the_shared_file(tmp_path):
    ledger = SQLiteBudgetAccountant(tmp_path / "ledger.db", epsilon=50.0)
    X = np.random.default_rng(0).binomial(1, 0.3, size=(300, 2))
    grid = GridSearchCV(
        DPBetaBernoulli(accountant=ledger, random_state=0), {"epsilon": [0.5, 1.0]}, cv=2, n_jobs=2
    ).fit(X)
    assert ledger.spent.epsilon == pytest.approx(2 * 1.5 + grid.best_params_["epsilon"])
    assert len({label for _, _, label in ledger.history}) == 1


def _binary(n=200, d=2, seed=0):
    return np.random.default_rng(seed).binomial(1, 0.4, size=(n, d))


def _fit_at_rendezvous(path, barrier, queue):
    # In a forked child: patching the class here leaves the parent's alone.
    touched = []
    begin_then_meet, record_touch = rendezvous_methods(barrier, touched, lambda est: True)
    DPBetaBernoulli._begin_private_fit = begin_then_meet
    DPBetaBernoulli._validate_X = record_touch
    est = DPBetaBernoulli(epsilon=0.75, accountant=SQLiteBudgetAccountant(path), random_state=0)
    try:
        est.fit(_binary())
        outcome = "fitted"
    except BudgetExceededError:
        outcome = "refused"
    released = hasattr(est, "noisy_counts_") or hasattr(est, "privacy_spent_")
    queue.put((outcome, len(touched), released))


def test_concurrent_fits_in_two_processes_cannot_both_pass_the_start(tmp_path):
    path = tmp_path / "ledger.db"
    SQLiteBudgetAccountant(path, epsilon=1.0, delta=0.0)
    barrier, queue = CTX.Barrier(2, timeout=30), CTX.Queue()
    procs = [CTX.Process(target=_fit_at_rendezvous, args=(path, barrier, queue)) for _ in range(2)]
    for p in procs:
        p.start()
    results = sorted(queue.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(30)
    # One fit ran; the other was refused before reading the data or releasing anything.
    assert results == [("fitted", 1, True), ("refused", 0, False)]
    ledger = SQLiteBudgetAccountant(path)
    assert ledger.history == [(pytest.approx(0.75), 0.0, "DPBetaBernoulli")]
    assert ledger.reservations == []
    assert ledger.spent.epsilon <= 1.0 + 1e-12


def _die_between_reserve_and_settle(path, queue):
    def read_then_die(self, X, reset):
        queue.put("reading")
        signal.pause()

    DPBetaBernoulli._validate_X = read_then_die  # forked child only
    DPBetaBernoulli(epsilon=0.5, accountant=SQLiteBudgetAccountant(path)).fit(_binary())


def test_process_killed_between_reserve_and_settle_leaves_the_reservation_charged(tmp_path):
    path = tmp_path / "ledger.db"
    SQLiteBudgetAccountant(path, epsilon=1.0, delta=0.0).spend(0.25, 0.0, label="before")
    ledger = _kill_when(_die_between_reserve_and_settle, path, "reading")
    # Every row is intact and the dead fit's whole request is still charged.
    assert ledger.history == [(0.25, 0.0, "before"), (0.5, 0.0, "DPBetaBernoulli")]
    assert ledger.reservations == [(0.5, 0.0, "DPBetaBernoulli")]
    assert ledger.spent.epsilon == pytest.approx(0.75)
    with pytest.raises(BudgetExceededError):
        ledger.spend(0.5, 0.0)
    ledger.spend(0.25, 0.0)
    assert ledger.spent.epsilon == pytest.approx(1.0)


def test_reserve_settle_and_failures_persist(tmp_path):
    path = tmp_path / "ledger.db"
    ledger = SQLiteBudgetAccountant(path, epsilon=2.0, delta=0.0)
    held = ledger.reserve(1.0, 0.0, label="fit")
    other = SQLiteBudgetAccountant(path)  # another handle (e.g. another process) sees it
    assert other.reservations == [(1.0, 0.0, "fit")] and other.remaining().epsilon == 1.0
    with pytest.raises(BudgetExceededError):
        other.reserve(1.5, 0.0)
    other.settle(held, 0.75, 0.0)  # any handle on the same file and dataset may settle
    assert ledger.history == [(0.75, 0.0, "fit")] and ledger.reservations == []
    with pytest.raises(ValueError, match="not open"):
        ledger.settle(held, 0.5, 0.0)
    with pytest.raises(ValueError, match="another budget"):
        SQLiteBudgetAccountant(path, epsilon=1.0, dataset="other").settle(held, 0.5, 0.0)
    # A fit that fails after its reservation leaves it charged; a refused fit charges nothing.
    bad = _binary().astype(float)
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        DPBetaBernoulli(epsilon=0.5, accountant=ledger).fit(bad)
    with pytest.raises(BudgetExceededError):
        DPBetaBernoulli(epsilon=1.0, accountant=ledger).fit(_binary())
    assert ledger.history == [(0.75, 0.0, "fit"), (0.5, 0.0, "DPBetaBernoulli")]
    assert ledger.reservations == []  # the failed fit's hold is closed, charged in full
    assert ledger.spent.epsilon == pytest.approx(1.25)
    copy = pickle.loads(pickle.dumps(ledger))
    copy.settle(copy.reserve(0.25, 0.0), 0.125, 0.0)
    assert ledger.spent.epsilon == pytest.approx(1.375)


def test_ledger_written_before_reservations_is_upgraded(tmp_path):
    path = tmp_path / "ledger.db"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE budgets (dataset TEXT PRIMARY KEY, epsilon REAL NOT NULL, delta REAL NOT NULL,
                              neighbouring TEXT NOT NULL);
        CREATE TABLE spends (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL,
                             epsilon REAL NOT NULL, delta REAL NOT NULL, label TEXT, pid INTEGER,
                             created REAL);
        INSERT INTO budgets VALUES ('default', 1.0, 0.0, 'replace_one');
        INSERT INTO spends (dataset, epsilon, delta, label) VALUES ('default', 0.5, 0.0, 'old');
        """
    )
    con.commit()
    con.close()
    ledger = SQLiteBudgetAccountant(path)
    assert ledger.history == [(0.5, 0.0, "old")] and ledger.reservations == []
    ledger.settle(ledger.reserve(0.5, 0.0, label="new"), 0.25, 0.0)
    assert ledger.spent.epsilon == pytest.approx(0.75)


def test_threads_share_one_ledger_safely(tmp_path):
    """8 threads x 50 spends on one SQLiteBudgetAccountant while others read it."""
    amount = 2.0**-7  # exact in binary, so the sums below are exact
    limit = 300 * amount  # 400 spends asked, 300 fit
    ledger = SQLiteBudgetAccountant(tmp_path / "ledger.db", epsilon=limit, delta=0.0)
    admitted, errors, seen = [], [], {0: [], 1: []}
    writing = threading.Event()
    writing.set()

    def spender():
        try:
            for _ in range(50):
                try:
                    ledger.spend(amount, 0.0, label="thread")
                    admitted.append(1)
                except BudgetExceededError:
                    pass
        except Exception as exc:  # noqa: BLE001 -- reported by the assertion below
            errors.append(exc)

    def reader(i):
        try:
            while writing.is_set():
                seen[i].append((ledger.remaining().epsilon, ledger.spent.epsilon, len(ledger.history)))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    spenders = [threading.Thread(target=spender) for _ in range(8)]
    readers = [threading.Thread(target=reader, args=(i,)) for i in range(2)]
    for t in readers + spenders:
        t.start()
    for t in spenders:
        t.join(300)
    writing.clear()
    for t in readers:
        t.join(60)
    assert errors == []
    assert len(admitted) == 300  # the budget was used up, no more
    assert len(ledger.history) == 300  # no lost update
    assert ledger.spent.epsilon == limit and ledger.remaining().epsilon == 0.0
    for reads in seen.values():
        assert len(reads) > 0
        for remaining, spent, _ in reads:
            assert 0.0 <= remaining <= limit and spent <= limit
        # Committed rows only ever accumulate: each reader's successive reads never go back.
        for column in range(3):
            values = [read[column] for read in reads]
            order = sorted(values, reverse=column == 0)
            assert values == order


# ----------------------------------------------- events, composition, schema ---

# The schema of skdp before versioning (user_version 0), as it created files.
_SCHEMA_V0 = """
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


def _every_event():
    return [
        GaussianEvent(3, REPLACE_ONE, 4.5),
        GaussianEvent(1, ADD_REMOVE, 0.7),
        DiscreteGaussianEvent(2, REPLACE_ONE, 3.25),
        LaplaceEvent(5, ADD_REMOVE, 12.0),
        DiscreteLaplaceEvent(1, REPLACE_ONE, 0.1 + 0.2),  # a float that is not short in decimal
        PureDPEvent(4, REPLACE_ONE, 0.3),
        SubsampledGaussianEvent(100, ADD_REMOVE, 1.1, 0.01),
        SubsampledGaussianEvent(100, REPLACE_ONE, 0.55, 0.01),
        SubsampledGaussianEvent(7, REPLACE_ONE, 2.0, 0.2, sampling="without_replacement"),
        ClusterSampledGaussianEvent(9, ADD_REMOVE, 1.5, (0.1, 0.25), (0.5, 0.5)),
    ]


def test_every_event_type_round_trips_through_json():
    events = _every_event()
    assert {type(e).__name__ for e in events} == set(EVENT_CLASSES)  # none forgotten
    for event in events:
        record = event_to_record(event)
        assert json.loads(json.dumps(record)) == record
        back = event_from_record(json.loads(json.dumps(record)))
        assert back == event and type(back) is type(event) and hash(back) == hash(event)
    assert events_from_json(events_to_json(events)) == tuple(events)


@dataclass(frozen=True)
class _ForeignEvent(GaussianEvent):
    """An event type defined outside skdp's core."""


def test_unknown_or_malformed_records_are_refused():
    with pytest.raises(ValueError, match="type"):
        event_from_record({"type": "os.system", "count": 1})
    with pytest.raises(ValueError, match="type"):
        event_from_record({"count": 1})
    with pytest.raises(ValueError, match="record"):
        event_from_record([1, 2])
    with pytest.raises(ValueError, match="fields"):
        event_from_record({"type": "GaussianEvent", "count": 1, "neighbouring": REPLACE_ONE, "extra": 1})
    with pytest.raises(ValueError, match="noise_multiplier"):
        event_from_record(
            {"type": "GaussianEvent", "count": 1, "neighbouring": REPLACE_ONE, "noise_multiplier": -1}
        )
    with pytest.raises(ValueError, match="event"):
        event_to_record(_ForeignEvent(1, REPLACE_ONE, 2.0))
    with pytest.raises(ValueError, match="JSON"):
        events_from_json("not json")


def _old_file(path):
    con = sqlite3.connect(path)
    con.executescript(
        _SCHEMA_V0
        + """
        INSERT INTO budgets VALUES ('default', 50.0, 1e-2, 'replace_one');
        INSERT INTO spends (dataset, epsilon, delta, label, status) VALUES ('default', 0.5, 1e-6, 'old', 'spent');
        INSERT INTO spends (dataset, epsilon, delta, label, status) VALUES ('default', 0.75, 0.0, 'crashed', 'reserved');
        """
    )
    con.commit()
    con.close()


def _settle_gaussian(ledger, z=4.0, delta=1e-5):
    spent = compose([GaussianEvent(1, REPLACE_ONE, z)], delta)
    ledger.settle(ledger.reserve(*spent, label="fit"), *spent, events=[GaussianEvent(1, REPLACE_ONE, z)])
    return spent


def test_a_file_of_the_unversioned_schema_is_migrated(tmp_path):
    path = tmp_path / "old.db"
    _old_file(path)
    ledger = SQLiteBudgetAccountant(path)
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    assert con.execute("SELECT composition FROM budgets").fetchall() == [("pld",)]
    con.close()
    # The old rows count as before: by basic composition, the reservation included.
    assert ledger.composition == "pld"
    assert ledger.history == [(0.5, 1e-6, "old"), (0.75, 0.0, "crashed")]
    assert ledger.reservations == [(0.75, 0.0, "crashed")]
    assert ledger.spent == (pytest.approx(1.25), pytest.approx(1e-6))
    assert [e.composed for e in ledger.entries] == [False, False]
    # New fits compose with each other, on top of the old rows.
    amounts = [_settle_gaussian(ledger) for _ in range(4)]
    summed = sum(eps for eps, _ in amounts)
    assert ledger.spent.epsilon < 1.25 + 0.6 * summed
    assert ledger.spent.epsilon >= 1.25
    again = SQLiteBudgetAccountant(path, composition="pld")
    assert again.spent == ledger.spent and [e.composed for e in again.entries] == [False] * 2 + [True] * 4
    # An old reservation can still be settled (its key is the row id).
    held = BudgetReservation(2, 0.75, 0.0, REPLACE_ONE, "crashed", again._ledger_id())
    again.settle(held, 0.5, 0.0)
    assert again.reservations == []


def test_the_first_opener_of_a_migrated_budget_chooses_its_composition(tmp_path):
    path = tmp_path / "old.db"
    _old_file(path)
    assert SQLiteBudgetAccountant(path, composition="basic").composition == "basic"
    assert SQLiteBudgetAccountant(path).composition == "basic"  # None adopts it
    with pytest.raises(ValueError, match="composition='basic'"):
        SQLiteBudgetAccountant(path, composition="rdp")
    with pytest.raises(ValueError, match="composition"):
        SQLiteBudgetAccountant(path, composition="moments")


def test_a_file_of_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.db"
    SQLiteBudgetAccountant(path, epsilon=1.0).spend(0.5, 0.0)
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 3")
    con.commit()
    con.close()
    with pytest.raises(ValueError, match="path .* schema version 3"):
        SQLiteBudgetAccountant(path)
    # Refused before writing anything.
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 3
    con.close()


def test_events_are_stored_as_json_and_compose(tmp_path):
    path = tmp_path / "ledger.db"
    ledger = SQLiteBudgetAccountant(path, epsilon=100.0, delta=1e-2, composition="pld")
    amounts = [_settle_gaussian(ledger) for _ in range(3)]
    ledger.spend(0.25, 0.0, label="by hand")
    # An event type the file cannot name is kept out (NULL): the row counts by basic composition.
    ledger.settle(ledger.reserve(0.5, 1e-6), 0.5, 1e-6, events=[_ForeignEvent(1, REPLACE_ONE, 4.0)])
    con = sqlite3.connect(path)
    rows = con.execute("SELECT events, joined FROM spends ORDER BY id").fetchall()
    con.close()
    assert [json.loads(text)[0]["type"] for text, _ in rows[:3]] == ["GaussianEvent"] * 3
    assert [joined for _, joined in rows] == [0, 1, 2, None, None]
    group = compose([GaussianEvent(3, REPLACE_ONE, 4.0)], 3e-5).epsilon
    assert ledger.spent.epsilon == pytest.approx(group + 0.25 + 0.5)
    assert ledger.spent.epsilon < sum(eps for eps, _ in amounts) + 0.75
    assert "composition='pld'" in repr(ledger)
    copy = pickle.loads(pickle.dumps(ledger))
    assert copy.spent == ledger.spent and copy.composition == "pld"


def test_settlement_order_not_row_order_is_the_composition_order(tmp_path):
    ledger = SQLiteBudgetAccountant(tmp_path / "ledger.db", epsilon=100.0, delta=1e-2)
    first = ledger.reserve(2.0, 1e-5)
    _settle_gaussian(ledger)
    before = ledger.spent.epsilon
    ledger.settle(
        first,
        *compose([GaussianEvent(1, REPLACE_ONE, 3.0)], 1e-5),
        events=[GaussianEvent(1, REPLACE_ONE, 3.0)],
    )
    assert ledger.spent.epsilon <= before
    assert [e.composed for e in ledger.entries] == [True, True]


def test_grid_search_of_gaussian_mixtures_composes_on_the_file(tmp_path):
    ledger = SQLiteBudgetAccountant(tmp_path / "ledger.db", epsilon=1e3, delta=1e-2, composition="pld")
    X = load_iris().data
    est = DPGaussianMixture(
        n_components=3,
        mean_mechanism="gaussian",
        delta=1e-5,
        data_norm=10.0,
        accountant=ledger,
        random_state=0,
    )
    GridSearchCV(est, {"epsilon": [0.5, 1.0]}, cv=5).fit(X)
    summed = sum(eps for eps, _, _ in ledger.history)
    assert len(ledger.history) == 11
    assert ledger.spent.epsilon <= 0.5 * summed  # measured 0.307 x
    assert SQLiteBudgetAccountant(tmp_path / "ledger.db").spent == ledger.spent


def test_incremental_total_sees_every_writer(tmp_path):
    # Each accountant keeps the state of the rows up to its first open
    # reservation and reads the rows from there on: rows written by another
    # accountant on the same file (another process, in practice), open
    # reservations settled out of order, and plain spends must all be in its
    # total, equal to the total of an accountant opened afresh.
    path = tmp_path / "ledger.sqlite"
    a = SQLiteBudgetAccountant(path, composition="rdp")
    b = SQLiteBudgetAccountant(path)
    events = [GaussianEvent(1, REPLACE_ONE, 3.0), LaplaceEvent(1, REPLACE_ONE, 4.0)]
    first = a.reserve(0.6, 1e-6)
    assert a.spent.epsilon == pytest.approx(0.6)
    for k in range(6):
        writer = (a, b)[k % 2]
        held = writer.reserve(0.6, 1e-6)
        writer.settle(held, 0.5, 1e-6, events=events[k % 2 :])
        b.spend(0.1, 0.0)
        assert a.spent == b.spent == SQLiteBudgetAccountant(path).spent
    a.settle(first, 0.2, 1e-6, events=events)
    assert a.spent == b.spent == SQLiteBudgetAccountant(path).spent
