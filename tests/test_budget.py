"""BudgetAccountant: a budget shared by many fits, clone-safe, refusing overspend."""

import multiprocessing
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_val_score

from skdp import BudgetAccountant, BudgetExceededError
from skdp.bayes import DPBetaBernoulli
from skdp.privacy import ADD_REMOVE


def _binary(n=300, d=3, seed=0):
    return np.random.default_rng(seed).binomial(1, 0.4, size=(n, d))


def test_spend_check_and_remaining():
    budget = BudgetAccountant(epsilon=1.0, delta=1e-5)
    budget.spend(0.4, 0.0)
    budget.spend(0.5, 5e-6)
    assert budget.spent == (pytest.approx(0.9), pytest.approx(5e-6))
    assert budget.remaining().epsilon == pytest.approx(0.1)
    with pytest.raises(BudgetExceededError, match="only"):
        budget.spend(0.2, 0.0)
    with pytest.raises(BudgetExceededError):
        budget.check(0.05, 1e-5)
    assert len(budget.history) == 2


def test_add_remove_spend_is_converted_by_group_privacy():
    budget = BudgetAccountant(epsilon=10.0, delta=1e-3)
    budget.spend(1.0, 1e-6, neighbouring=ADD_REMOVE)
    eps, delta = budget.spent
    assert eps == pytest.approx(2.0) and delta == pytest.approx(2 * np.e * 1e-6)


def test_clone_shares_the_ledger():
    budget = BudgetAccountant(epsilon=5.0)
    est = DPBetaBernoulli(epsilon=1.0, accountant=budget)
    assert clone(est).accountant is budget
    assert clone(budget) is budget


def test_fit_charges_and_refuses_before_touching_data():
    budget = BudgetAccountant(epsilon=1.5)
    DPBetaBernoulli(epsilon=1.0, accountant=budget, random_state=0).fit(_binary())
    assert budget.spent.epsilon == pytest.approx(1.0)
    bad = _binary().astype(float)
    bad[0, 0] = np.nan
    # The budget error comes first: the NaN in the data is never looked at.
    with pytest.raises(BudgetExceededError):
        DPBetaBernoulli(epsilon=1.0, accountant=budget).fit(bad)
    assert budget.spent.epsilon == pytest.approx(1.0)


def test_grid_search_spends_the_sum_of_its_fits():
    budget = BudgetAccountant(epsilon=100.0)
    grid = GridSearchCV(
        DPBetaBernoulli(accountant=budget, random_state=0), {"epsilon": [0.1, 0.5, 2.0]}, cv=3
    ).fit(_binary(600))
    expected = 3 * (0.1 + 0.5 + 2.0) + grid.best_params_["epsilon"]  # 9 CV fits + refit
    assert budget.spent.epsilon == pytest.approx(expected)
    assert len(budget.history) == 10


def test_cross_val_score_with_exhausted_budget_fails_loudly():
    budget = BudgetAccountant(epsilon=1.0)
    with pytest.raises(BudgetExceededError):
        cross_val_score(DPBetaBernoulli(epsilon=0.4, accountant=budget), _binary(), cv=3, error_score="raise")
    assert budget.spent.epsilon == pytest.approx(0.8)


def _spend_in_child(budget, queue):
    try:
        budget.spend(0.1, 0.0)
        queue.put("spent")
    except RuntimeError as exc:
        queue.put(str(exc))


def test_copy_in_another_process_refuses_to_spend():
    budget = BudgetAccountant(epsilon=1.0)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_spend_in_child, args=(budget, queue))
    proc.start()
    message = queue.get(timeout=60)
    proc.join(60)
    assert "another process" in message
    assert budget.spent.epsilon == 0.0
    # Same process: a pickled copy keeps working (e.g. a saved model).
    pickle.loads(pickle.dumps(budget)).spend(0.1, 0.0)


def test_validation():
    with pytest.raises(ValueError, match="epsilon"):
        BudgetAccountant(epsilon=0)
    with pytest.raises(ValueError, match="delta"):
        BudgetAccountant(delta=2)
