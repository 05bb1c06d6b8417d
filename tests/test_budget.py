"""BudgetAccountant: a budget shared by many fits, clone-safe, refusing overspend."""

import multiprocessing
import pickle
import threading

import numpy as np
import pytest
from _rendezvous import rendezvous_methods
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_val_score

from skdp import BudgetAccountant, BudgetExceededError
from skdp.bayes import DPBetaBernoulli
from skdp.privacy import ADD_REMOVE
from skdp.privacy.budget import BudgetReservation


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


def test_reservation_counts_as_spent_until_settled():
    budget = BudgetAccountant(epsilon=1.0, delta=1e-5)
    budget.spend(0.25, 0.0, label="earlier")
    held = budget.reserve(0.5, 4e-6, label="fit")
    assert isinstance(held, BudgetReservation)
    assert (held.epsilon, held.delta, held.label) == (0.5, 4e-6, "fit")
    assert budget.reservations == [(0.5, 4e-6, "fit")]
    assert budget.spent == (0.75, 4e-6)
    assert budget.remaining() == (0.25, pytest.approx(6e-6))
    # The reservation is taken into account by check, spend and reserve.
    with pytest.raises(BudgetExceededError):
        budget.check(0.5, 0.0)
    with pytest.raises(BudgetExceededError):
        budget.reserve(0.5, 0.0)
    budget.settle(held, 0.375, 1e-6)
    assert budget.reservations == []
    assert budget.history == [(0.25, 0.0, "earlier"), (0.375, 1e-6, "fit")]
    assert budget.spent == (0.625, 1e-6)
    with pytest.raises(ValueError, match="not open"):
        budget.settle(held, 0.1, 0.0)  # settled twice
    assert budget.spent == (0.625, 1e-6)


def test_settle_converts_like_the_reservation_and_refuses_an_excess():
    budget = BudgetAccountant(epsilon=10.0, delta=1e-3)
    held = budget.reserve(1.0, 1e-6, neighbouring=ADD_REMOVE)
    assert (held.epsilon, held.delta) == (pytest.approx(2.0), pytest.approx(2 * np.e * 1e-6))
    budget.settle(held, 0.5, 0.0)  # the reservation's relation by default
    assert budget.spent == (pytest.approx(1.0), 0.0)
    held = budget.reserve(1.0, 0.0)
    # More than reserved: recorded all the same (the release happened), then refused.
    with pytest.raises(ValueError, match="exceeds the reservation"):
        budget.settle(held, 3.0, 0.0)
    assert budget.spent.epsilon == pytest.approx(4.0) and budget.reservations == []
    with pytest.raises(ValueError, match="another budget"):
        BudgetAccountant(epsilon=5.0).settle(budget.reserve(1.0, 0.0), 1.0, 0.0)
    with pytest.raises(TypeError, match="BudgetReservation"):
        budget.settle((0, 1.0, 0.0), 1.0, 0.0)


@pytest.mark.parametrize(
    ("epsilon", "delta", "error"),
    [
        (-0.1, 0.0, ValueError),
        (0.1, -1e-9, ValueError),
        (float("nan"), 0.0, ValueError),
        ("0.1", 0.0, TypeError),
    ],
)
def test_amounts_must_be_non_negative_reals(epsilon, delta, error):
    budget = BudgetAccountant(epsilon=1.0)
    budget.spend(0.5, 0.0)
    # A negative spend would hand budget back.
    with pytest.raises(error):
        budget.spend(epsilon, delta)
    with pytest.raises(error):
        budget.reserve(epsilon, delta)
    assert budget.history == [(0.5, 0.0, None)]


def test_concurrent_fits_cannot_both_pass_the_start(monkeypatch):
    """Two threads share a budget that admits one fit; both reach the start before either ends."""
    budget = BudgetAccountant(epsilon=1.0)
    X = _binary()
    barrier = threading.Barrier(2, timeout=30)
    touched = []
    begin_then_meet, record_touch = rendezvous_methods(barrier, touched, id)
    monkeypatch.setattr(DPBetaBernoulli, "_begin_private_fit", begin_then_meet)
    monkeypatch.setattr(DPBetaBernoulli, "_validate_X", record_touch)
    estimators = [DPBetaBernoulli(epsilon=0.8, accountant=budget, random_state=i) for i in range(2)]
    outcomes = [None, None]

    def fit(i):
        try:
            estimators[i].fit(X)
            outcomes[i] = "fitted"
        except BudgetExceededError:
            outcomes[i] = "refused"

    threads = [threading.Thread(target=fit, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcomes) == ["fitted", "refused"]
    winner, loser = (estimators[outcomes.index(o)] for o in ("fitted", "refused"))
    # The loser was refused before it read the data, and released nothing.
    assert touched == [id(winner)]
    assert not hasattr(loser, "noisy_counts_") and not hasattr(loser, "privacy_spent_")
    assert budget.history == [(pytest.approx(0.8), 0.0, "DPBetaBernoulli")]
    assert budget.reservations == []
    assert budget.spent.epsilon == pytest.approx(0.8) and budget.spent.epsilon <= budget.epsilon


def test_fit_failing_after_its_reservation_stays_charged():
    budget = BudgetAccountant(epsilon=3.0)
    bad = _binary().astype(float)
    bad[0, 0] = np.nan
    # The budget is reserved before the data is read; the NaN is found after,
    # and the error itself depends on the data, so the request stays charged.
    with pytest.raises(ValueError, match="NaN"):
        DPBetaBernoulli(epsilon=1.0, accountant=budget).fit(bad)
    assert budget.reservations == [(1.0, 0.0, "DPBetaBernoulli")]
    assert budget.spent.epsilon == pytest.approx(1.0)
    # The estimator forgets the failed fit's reservation; the budget does not.
    est = DPBetaBernoulli(epsilon=1.5, accountant=budget, random_state=0)
    with pytest.raises(ValueError, match="NaN"):
        est.fit(bad)
    est.set_params(epsilon=0.5).fit(_binary())
    assert budget.history == [
        (1.0, 0.0, "DPBetaBernoulli"),
        (1.5, 0.0, "DPBetaBernoulli"),
        (pytest.approx(0.5), 0.0, "DPBetaBernoulli"),
    ]
    assert len(budget.reservations) == 2 and budget.spent.epsilon == pytest.approx(3.0)


def test_refused_fit_charges_nothing():
    budget = BudgetAccountant(epsilon=1.0)
    DPBetaBernoulli(epsilon=0.6, accountant=budget, random_state=0).fit(_binary())
    est = DPBetaBernoulli(epsilon=0.6, accountant=budget)
    with pytest.raises(BudgetExceededError, match="only"):
        est.fit(_binary())
    assert budget.history == [(pytest.approx(0.6), 0.0, "DPBetaBernoulli")]
    assert budget.reservations == [] and budget.spent.epsilon == pytest.approx(0.6)
    assert not hasattr(est, "privacy_spent_")
    # What is left can still be reserved in full.
    DPBetaBernoulli(epsilon=0.4, accountant=budget, random_state=0).fit(_binary())
    assert budget.spent.epsilon == pytest.approx(1.0)


def test_pickled_budget_keeps_open_reservations():
    budget = BudgetAccountant(epsilon=1.0)
    held = budget.reserve(0.5, 0.0, label="fit")
    copy = pickle.loads(pickle.dumps(budget))
    assert copy.reservations == [(0.5, 0.0, "fit")] and copy.spent.epsilon == 0.5
    copy.settle(held, 0.25, 0.0)
    assert copy.spent.epsilon == 0.25
    assert budget.spent.epsilon == 0.5  # the original is a separate ledger
