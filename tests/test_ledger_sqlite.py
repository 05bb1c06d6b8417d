"""SQLiteBudgetAccountant: one persistent budget shared by processes."""

import multiprocessing
import os
import signal

import numpy as np
import pytest
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


def test_ledger_intact_after_a_process_is_killed_mid_spend(tmp_path):
    path = tmp_path / "ledger.db"
    SQLiteBudgetAccountant(path, epsilon=1.0).spend(0.25, 0.0, label="before")
    queue = CTX.Queue()
    proc = CTX.Process(target=_die_inside_transaction, args=(path, queue))
    proc.start()
    assert queue.get(timeout=60) == "inside"
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    ledger = SQLiteBudgetAccountant(path, timeout=10)
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
