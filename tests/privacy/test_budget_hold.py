"""BudgetHold: the one reservation primitive (issue 29), on both budget backends."""

import threading

import numpy as np
import pytest

from skdp import BudgetExceededError
from skdp.privacy import (
    ADD_REMOVE,
    BudgetAccountant,
    BudgetHold,
    GaussianEvent,
    LaplaceEvent,
    PrivacyLedger,
    SQLiteBudgetAccountant,
    hold,
)


@pytest.fixture(params=["memory", "sqlite"])
def make_budget(request, tmp_path):
    def make(epsilon, delta=1.0, **kwargs):
        if request.param == "memory":
            return BudgetAccountant(epsilon, delta, **kwargs)
        return SQLiteBudgetAccountant(tmp_path / "ledger.db", epsilon, delta, **kwargs)

    return make


def test_hold_settles_to_what_was_spent(make_budget):
    budget = make_budget(1.0, 1e-5)
    with budget.hold(0.5, 1e-6, label="fit") as held:
        assert isinstance(held, BudgetHold) and held.held == (0.5, 1e-6)
        assert budget.reservations == [(0.5, 1e-6, "fit")]
        held.settle(0.25, 1e-6, events=[LaplaceEvent(1, "replace_one", 4.0)])
    assert held.settled and budget.reservations == []
    assert budget.history == [(0.25, 1e-6, "fit")]


def test_refused_hold_charges_nothing(make_budget):
    budget = make_budget(1.0)
    budget.spend(0.75, 0.0)
    with pytest.raises(BudgetExceededError):
        budget.hold(0.5, 0.0)
    with pytest.raises(BudgetExceededError):
        hold(budget, 0.5, 0.0)
    assert budget.history == [(0.75, 0.0, None)]


def test_exception_keeps_the_hold_charged(make_budget):
    budget = make_budget(2.0)
    with pytest.raises(KeyError), budget.hold(0.75, 0.0, label="fit") as held:
        held.track(PrivacyLedger("basic")).record(LaplaceEvent(1, "replace_one", 4.0))  # eps 0.25
        raise KeyError("after a release")
    # The ledger released 0.25 < 0.75: the whole hold stays charged, settled.
    assert held.settled and budget.reservations == []
    assert budget.history == [(0.75, 0.0, "fit")]


def test_exception_charges_a_ledger_above_the_hold_with_its_events(make_budget):
    budget = make_budget(5.0)
    with pytest.raises(KeyError), budget.hold(1.0, 0.0) as held:
        ledger = held.track(PrivacyLedger("basic"))
        ledger.record(LaplaceEvent(3, "replace_one", 1.0))  # eps 3 > the hold
        raise KeyError("interrupted")
    assert budget.history == [(pytest.approx(3.0), 0.0, None)]
    (entry,) = budget.entries
    assert entry.events == (LaplaceEvent(3, "replace_one", 1.0),) and not entry.reserved


def test_exit_without_settle_and_without_ledger_keeps_the_hold(make_budget):
    budget = make_budget(2.0)
    with budget.hold(0.5, 0.0):
        pass
    assert budget.history == [(0.5, 0.0, None)] and budget.reservations == []


def test_extend_grows_the_hold_atomically_or_charges_nothing(make_budget):
    budget = make_budget(1.0)
    with budget.hold(0.25, 0.0, label="net") as held:
        assert held.extend(0.5, 0.0) == (0.75, 0.0)
        assert budget.reservations == [(0.75, 0.0, "net")]
        with pytest.raises(BudgetExceededError):
            held.extend(0.5, 0.0)
        assert held.held == (0.75, 0.0) and budget.spent.epsilon == pytest.approx(0.75)
        held.settle(0.7, 0.0)
    assert budget.history == [(0.7, 0.0, "net")]


def test_extend_in_add_remove_converts_the_total(make_budget):
    budget = make_budget(10.0, 1e-3)
    held = budget.hold(0.5, 1e-6, neighbouring=ADD_REMOVE)
    held.extend(0.5, 1e-6)
    # Group privacy of the total (2 eps, 2 e^eps delta), not the sum of conversions.
    ((eps, dlt, _),) = budget.reservations
    assert eps == pytest.approx(2.0) and dlt == pytest.approx(2 * np.e * 2e-6)
    held.settle(1.0, 2e-6)  # exactly the hold: no excess
    assert budget.reservations == []


def test_excess_is_recorded_then_refused(make_budget):
    budget = make_budget(10.0)
    held = budget.hold(1.0, 0.0)
    with pytest.raises(ValueError, match="exceeds the reservation"):
        held.settle(3.0, 0.0)
    assert budget.spent.epsilon == pytest.approx(3.0) and budget.reservations == []


def test_double_settle_and_extend_after_settle_raise(make_budget):
    budget = make_budget(10.0)
    held = budget.hold(1.0, 0.0)
    held.settle(0.5, 0.0)
    with pytest.raises(ValueError, match="already settled"):
        held.settle(0.5, 0.0)
    with pytest.raises(ValueError, match="already settled"):
        held.extend(0.5, 0.0)
    assert budget.spent.epsilon == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("epsilon", "error"), [(-0.1, ValueError), (float("nan"), ValueError), ("1", TypeError)]
)
def test_bad_amounts_are_refused(make_budget, epsilon, error):
    budget = make_budget(10.0)
    held = budget.hold(1.0, 0.0)
    with pytest.raises(error):
        held.extend(epsilon, 0.0)
    with pytest.raises(error):
        held.settle(epsilon, 0.0)
    assert not held.settled and budget.reservations == [(1.0, 0.0, None)]


def test_noop_hold_without_a_budget():
    with hold(None, 1.0, 1e-6, label="x") as held:
        assert held.budget is None and held.held == (1.0, 1e-6)
        held.extend(0.5, 0.0)
        assert held.held == (1.5, 1e-6)
        ledger = held.track(PrivacyLedger())
        assert held.ledger is ledger
        held.settle(1.5, 1e-6)
    with pytest.raises(ValueError, match="already settled"):
        held.settle(1.0, 0.0)
    with pytest.raises(ValueError, match="exceeds the hold"):
        hold(None, 1.0, 0.0).settle(2.0, 0.0)
    # Exception path: closes quietly, the exception passes through.
    with pytest.raises(KeyError), hold(None, 1.0, 0.0) as held:
        held.track(PrivacyLedger("basic")).record(LaplaceEvent(5, "replace_one", 1.0))
        raise KeyError
    assert held.settled
    with pytest.raises(ValueError):
        hold(None, -1.0, 0.0)


def test_sqlite_hold_is_visible_to_another_accountant(tmp_path):
    path = tmp_path / "shared.db"
    budget = SQLiteBudgetAccountant(path, 1.0)
    other = SQLiteBudgetAccountant(path)
    held = budget.hold(0.25, 0.0, label="fit")
    held.extend(0.5, 0.0)
    assert other.reservations == [(0.75, 0.0, "fit")]
    with pytest.raises(BudgetExceededError):
        other.hold(0.5, 0.0)
    held.settle(0.5, 0.0, events=[GaussianEvent(1, "replace_one", 5.0)])
    assert other.reservations == [] and other.spent.epsilon == pytest.approx(0.5)


def test_concurrent_extends_never_overspend(make_budget):
    budget = make_budget(1.0)
    holds = [budget.hold(0.05, 0.0) for _ in range(4)]  # 0.2 held
    admitted = []
    barrier = threading.Barrier(len(holds), timeout=60)

    def grow(h):
        barrier.wait()
        for _ in range(10):
            try:
                h.extend(0.05, 0.0)
                admitted.append(1)
            except BudgetExceededError:
                pass

    threads = [threading.Thread(target=grow, args=(h,)) for h in holds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    # 0.8 was left: exactly 16 extensions of 0.05 fit, whatever the interleaving.
    assert len(admitted) == 16
    assert budget.spent.epsilon == pytest.approx(1.0)
    assert sum(h.held.epsilon for h in holds) == pytest.approx(1.0)


def test_concurrent_extends_of_one_hold_are_serialised(make_budget):
    budget = make_budget(100.0)
    held = budget.hold(0.0, 0.0)
    threads = [threading.Thread(target=lambda: [held.extend(0.125, 0.0) for _ in range(8)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert held.held.epsilon == pytest.approx(4.0)
    assert budget.reservations == [(pytest.approx(4.0), 0.0, None)]
