"""SQLiteBudgetAccountant: one persistent budget shared by processes."""

import multiprocessing
import os
import pickle
import signal
import sqlite3
import threading

import numpy as np
import pytest
from _rendezvous import rendezvous_methods
from sklearn.model_selection import GridSearchCV

from skdp import BudgetExceededError
from skdp.bayes import DPBetaBernoulli
from skdp.privacy import SQLiteBudgetAccountant

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
    assert ledger.reservations == [(0.5, 0.0, "DPBetaBernoulli")]
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
