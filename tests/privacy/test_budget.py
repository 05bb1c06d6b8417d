"""BudgetAccountant: a budget shared by many fits, clone-safe, refusing overspend."""

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
from conftest import iris_rows
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_val_score

from skdp import BudgetAccountant, BudgetExceededError
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
from skdp.privacy.accountants.cluster_sampling import ClusterSampledGaussianEvent
from skdp.privacy.budgets.in_process import BudgetReservation
from skdp.privacy.budgets.records import (
    EVENT_CLASSES,
    event_from_record,
    event_to_record,
    events_from_json,
    events_to_json,
)
from skdp.privacy.budgets.sqlite import SCHEMA_VERSION


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
    # The budget is held before the data is read; the NaN is found after,
    # and the error itself depends on the data, so the hold is closed
    # charged in full.
    with pytest.raises(ValueError, match="NaN"):
        DPBetaBernoulli(epsilon=1.0, accountant=budget).fit(bad)
    assert budget.history == [(1.0, 0.0, "DPBetaBernoulli")] and budget.reservations == []
    assert budget.spent.epsilon == pytest.approx(1.0)
    # The estimator forgets the failed fit's hold; the budget does not.
    est = DPBetaBernoulli(epsilon=1.5, accountant=budget, random_state=0)
    with pytest.raises(ValueError, match="NaN"):
        est.fit(bad)
    est.set_params(epsilon=0.5).fit(_binary())
    assert budget.history == [
        (1.0, 0.0, "DPBetaBernoulli"),
        (1.5, 0.0, "DPBetaBernoulli"),
        (pytest.approx(0.5), 0.0, "DPBetaBernoulli"),
    ]
    assert budget.reservations == [] and budget.spent.epsilon == pytest.approx(3.0)


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


# ----------------------------------------------- composition of fits' events ---


def _gauss(z, relation=REPLACE_ONE, count=1):
    return GaussianEvent(count, relation, z)


def _settled(budget, events, delta, label=None, neighbouring=None):
    """Settle a fit of ``events`` at their own guarantee (what a fit's template does)."""
    relation = neighbouring or budget.neighbouring
    spent = compose([e.to_relation(relation) for e in events], delta, "pld")
    budget.settle(budget.reserve(*spent, neighbouring=relation, label=label), *spent, events=events)
    return spent


def _grid_search_gmm(budget):
    X = iris_rows()
    est = DPGaussianMixture(
        n_components=3,
        mean_mechanism="gaussian",
        delta=1e-5,
        data_norm=10.0,
        accountant=budget,
        random_state=0,
    )
    return GridSearchCV(est, {"epsilon": [0.5, 1.0]}, cv=5).fit(X)


def test_composition_is_validated():
    with pytest.raises(ValueError, match="composition"):
        BudgetAccountant(composition="moments")
    assert "composition='pld'" in repr(BudgetAccountant())
    assert "composition='rdp'" in repr(BudgetAccountant(composition="rdp"))


def test_grid_search_of_gaussian_mixtures_composes_its_fits():
    # 2 epsilons x 5 folds + refit = 11 fits of DP-EM with Gaussian means (docs/budget.md).
    budget = BudgetAccountant(epsilon=1e3, delta=1e-2, composition="pld")
    grid = _grid_search_gmm(budget)
    summed = sum(eps for eps, _, _ in budget.history)
    assert len(budget.history) == 11
    assert summed == pytest.approx(5 * (0.5 + 1.0) + grid.best_params_["epsilon"], rel=1e-6)
    assert all(entry.composed and entry.events for entry in budget.entries)
    # Measured 0.307 x the sum: the fits compose, they do not add up.
    assert budget.spent.epsilon <= 0.5 * summed
    # Every fit's delta is still charged.
    assert budget.spent.delta == pytest.approx(sum(d for _, d, _ in budget.history))
    # The same grid on a basic budget charges the sum (the old behaviour).
    basic = BudgetAccountant(epsilon=1e3, delta=1e-2, composition="basic")
    _grid_search_gmm(basic)
    assert basic.spent.epsilon == pytest.approx(sum(eps for eps, _, _ in basic.history))


def test_spent_is_the_composition_of_the_settled_events():
    budget = BudgetAccountant(epsilon=100.0, delta=1e-3)
    fits = [[_gauss(3.0, count=2)], [_gauss(5.0), _gauss(4.0)], [_gauss(3.0)]]
    amounts = [_settled(budget, events, 1e-5) for events in fits]
    delta_c = sum(d for _, d in amounts)
    composed = compose([e for events in fits for e in events], delta_c, "pld").epsilon
    assert budget.spent.delta == pytest.approx(delta_c)
    assert budget.spent.epsilon <= composed + 1e-9
    assert budget.spent.epsilon <= sum(eps for eps, _ in amounts) * 0.7
    # Never below the composition of what the group's events guarantee at its
    # delta (the chain only adds valid bounds of the prefixes).
    assert (
        budget.spent.epsilon >= compose([e for events in fits for e in events], delta_c, "rdp").epsilon * 0.8
    )
    assert budget.history == [(eps, d, None) for eps, d in amounts]


def test_open_reservations_and_plain_spends_add_by_basic_composition():
    budget = BudgetAccountant(epsilon=100.0, delta=1e-3)
    for _ in range(3):
        _settled(budget, [_gauss(4.0)], 1e-5)
    group = budget.spent
    held = budget.reserve(0.7, 1e-6, label="open")
    assert budget.spent.epsilon == pytest.approx(group.epsilon + 0.7)
    assert budget.spent.delta == pytest.approx(group.delta + 1e-6)
    budget.spend(0.4, 2e-6, label="by hand")
    assert budget.spent.epsilon == pytest.approx(group.epsilon + 1.1)
    assert [e.composed for e in budget.entries] == [True, True, True, False, False]
    # Settled without events: basic too.
    budget.settle(held, 0.5, 1e-6)
    assert budget.spent.epsilon == pytest.approx(group.epsilon + 0.9)
    # The request is checked by basic addition on top of the composed total.
    left = budget.epsilon - budget.spent.epsilon
    with pytest.raises(BudgetExceededError):
        budget.reserve(left + 1e-6, 0.0)
    budget.reserve(left - 1e-6, 0.0)


def test_a_settlement_with_events_lowers_the_total():
    budget = BudgetAccountant(epsilon=100.0, delta=1e-3)
    before = []
    for _ in range(4):
        spent = compose([_gauss(4.0)], 1e-5)
        held = budget.reserve(*spent)
        before.append(budget.spent.epsilon)
        budget.settle(held, *spent, events=[_gauss(4.0)])
        assert budget.spent.epsilon <= before[-1] + 1e-12
    assert budget.spent.epsilon < 0.6 * 4 * spent.epsilon


def test_settling_never_raises_the_total_past_the_reservation():
    # RDP's bound for a Gaussian-and-Laplace history exceeds the Gaussian's
    # exact epsilon plus the Laplace's: the chain keeps the smaller sum, so
    # settling the Laplace fit adds at most its own epsilon.
    budget = BudgetAccountant(epsilon=100.0, delta=1e-3, composition="rdp")
    _settled(budget, [_gauss(4.0)], 1e-5)
    first = budget.spent.epsilon
    assert first == pytest.approx(compose([_gauss(4.0)], 1e-5, "rdp").epsilon)
    held = budget.reserve(1.0, 0.0)
    budget.settle(held, 1.0, 0.0, events=[LaplaceEvent(1, REPLACE_ONE, 1.0)])
    assert budget.spent.epsilon <= first + 1.0 + 1e-12
    joint = compose([_gauss(4.0), LaplaceEvent(1, REPLACE_ONE, 1.0)], 1e-5, "rdp").epsilon
    assert joint > first + 1.0  # the case the chain exists for


def test_basic_composition_is_the_sum():
    budget = BudgetAccountant(epsilon=100.0, delta=1e-3, composition="basic")
    amounts = [_settled(budget, [_gauss(4.0)], 1e-5) for _ in range(3)]
    assert budget.spent.epsilon == pytest.approx(sum(eps for eps, _ in amounts))


def _poisson_steps(z=1.2, q=0.1, steps=30):
    return [SubsampledGaussianEvent(steps, ADD_REMOVE, z, q)]


def test_add_remove_events_convert_to_the_replace_one_budget():
    # A DP-SGD fit (add/remove) on a replace-one budget: its Poisson events
    # convert exactly (half the multiplier) and PLD composes them.
    events = _poisson_steps()
    spent = compose(events, 1e-5, "pld")
    budget = BudgetAccountant(epsilon=100.0, delta=1e-2, composition="pld")
    _settled(budget, events, 1e-5, neighbouring=ADD_REMOVE)
    grouped = budget.history[0]
    assert grouped[0] == pytest.approx(2 * spent.epsilon)  # the amount: group privacy
    assert budget.entries[0].composed
    assert budget.entries[0].events == tuple(e.to_relation(REPLACE_ONE) for e in events)
    expected = compose([e.to_relation(REPLACE_ONE) for e in events], grouped[1], "pld").epsilon
    assert budget.spent.epsilon == pytest.approx(expected)
    assert budget.spent.epsilon < 0.9 * grouped[0]
    # RDP has no rule for the replace-one Poisson event: basic, at 2 eps.
    rdp = BudgetAccountant(epsilon=100.0, delta=1e-2, composition="rdp")
    _settled(rdp, events, 1e-5, neighbouring=ADD_REMOVE)
    assert not rdp.entries[0].composed
    assert rdp.spent.epsilon == pytest.approx(2 * spent.epsilon)


def test_events_that_cannot_convert_or_compose_add_by_basic_composition():
    budget = BudgetAccountant(epsilon=100.0, delta=1e-2)
    cluster = ClusterSampledGaussianEvent(10, ADD_REMOVE, 2.0, (0.1, 0.2), (0.5, 0.5))
    held = budget.reserve(1.5, 1e-5, neighbouring=ADD_REMOVE)
    budget.settle(held, 1.5, 1e-5, events=[cluster])  # cannot convert to replace-one
    wor = SubsampledGaussianEvent(10, REPLACE_ONE, 2.0, 0.1, sampling="without_replacement")
    budget.settle(budget.reserve(0.8, 1e-5), 0.8, 1e-5, events=[wor])  # no PLD rule
    assert [e.composed for e in budget.entries] == [False, False]
    assert budget.entries[0].events == (cluster,)  # kept as recorded
    assert budget.spent.epsilon == pytest.approx(3.0 + 0.8)
    # Replace-one events on an add/remove budget cannot convert either.
    add_remove = BudgetAccountant(epsilon=100.0, delta=1e-2, neighbouring=ADD_REMOVE)
    add_remove.spend(0.5, 1e-6, events=[_gauss(9.0)])
    add_remove.spend(0.5, 1e-6, events=[_gauss(9.0)])
    assert add_remove.spent.epsilon == pytest.approx(1.0)
    with pytest.raises(TypeError, match="events"):
        budget.spend(0.1, 0.0, events=_gauss(9.0))
    with pytest.raises(TypeError, match="events"):
        budget.spend(0.1, 0.0, events=[0.5])


def test_pickled_budget_keeps_its_events_and_composition():
    budget = BudgetAccountant(epsilon=100.0, delta=1e-3, composition="rdp")
    for _ in range(3):
        _settled(budget, [_gauss(4.0)], 1e-5)
    copy = pickle.loads(pickle.dumps(budget))
    assert copy.composition == "rdp" and copy.entries == budget.entries
    assert copy.spent == budget.spent
    assert clone(copy) is copy
    # A pickle made before budgets composed events keeps basic composition.
    state = budget.__getstate__()
    for key in ("composition", "_events", "_order"):
        del state[key]
    old = BudgetAccountant.__new__(BudgetAccountant)
    old.__setstate__(state)
    assert old.composition == "basic"
    assert old.spent.epsilon == pytest.approx(sum(eps for eps, _, _ in budget.history))


def test_fits_settle_with_their_ledger_events():
    budget = BudgetAccountant(epsilon=10.0)
    est = DPBetaBernoulli(epsilon=1.0, accountant=budget, random_state=0).fit(_binary())
    (entry,) = budget.entries
    assert entry.events == tuple(est.privacy_ledger_.events) and entry.composed
    assert (entry.epsilon, entry.delta) == tuple(est.privacy_spent_)


def test_further_ops_samples_are_charged_with_their_events():
    budget = BudgetAccountant(epsilon=10.0)
    est = DPBetaBernoulli(epsilon=1.0, mechanism="ops", accountant=budget, random_state=0).fit(_binary())
    est.sample_posterior(n_samples=2)
    fit, samples = budget.entries
    assert samples.composed and len(samples.events) == 1 and samples.events[0].count == 2
    # Pure DP: the samples' own guarantee is the growth of privacy_spent_.
    assert samples.epsilon == pytest.approx(est.privacy_spent_.epsilon - fit.epsilon)
    assert budget.spent.epsilon == pytest.approx(est.privacy_spent_.epsilon)


def test_thread_safe_settlements_with_events():
    budget = BudgetAccountant(epsilon=1e3, delta=0.5)
    errors = []

    def worker():
        try:
            for _ in range(10):
                _settled(budget, [_gauss(6.0)], 1e-6)
                budget.spent  # noqa: B018 -- reads interleaved with settlements
        except Exception as exc:  # noqa: BLE001 -- reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert len(budget.history) == 40 and all(e.composed for e in budget.entries)
    expected = compose([GaussianEvent(40, REPLACE_ONE, 6.0)], 40e-6).epsilon
    assert budget.spent.epsilon == pytest.approx(expected, rel=1e-6)


def _interleaved_ledger(budget, seed):
    """Reserve, settle (with events, without, or an unconvertible add/remove amount) and spend, interleaved.

    Yields after each operation, so the caller can compare the incremental
    total with one computed from scratch.
    """
    rng = np.random.default_rng(seed)
    mechanisms = [
        GaussianEvent(1, "replace_one", 3.0),
        GaussianEvent(2, "replace_one", 5.0),
        SubsampledGaussianEvent(10, "add_remove", 1.5, 0.05, "poisson"),
        LaplaceEvent(1, "replace_one", 4.0),
    ]
    held = []
    for _ in range(40):
        action = rng.integers(4)
        if action == 0 or not held:
            held.append(budget.reserve(0.6, 1e-6))
        elif action == 1:
            reservation = held.pop(int(rng.integers(len(held))))
            k = int(rng.integers(1, 3))
            events = [mechanisms[int(i)] for i in rng.choice(len(mechanisms), size=k, replace=False)]
            budget.settle(reservation, 0.5, 1e-6, events=events)
        elif action == 2:
            budget.settle(held.pop(0), 0.3, 0.0)  # no events: basic composition
        else:
            budget.spend(0.1, 0.0, events=[mechanisms[0]])
        yield


@pytest.mark.parametrize("composition", ["rdp", "zcdp", "basic"])
def test_incremental_total_equals_the_total_from_scratch(composition):
    # The total keeps the state of the entries up to the first open
    # reservation; interleaved reservations, settlements in another order
    # and spends must give exactly what a fresh copy (no state) computes.
    # (The accountant only changes the composed values; "pld" would build
    # a PLD per mixed history, minutes of it, for the same bookkeeping.)
    budget = BudgetAccountant(composition=composition)
    for _ in _interleaved_ledger(budget, seed=3):
        fresh = pickle.loads(pickle.dumps(budget))  # a copy starts with no cached state
        assert budget.spent == fresh.spent


def test_reservation_cost_does_not_grow_with_the_settled_fits(monkeypatch):
    # A reservation reads the entries from the first open one on, not every
    # fit settled before: count the records it builds.
    import skdp.privacy.budgets.in_process as budget_module

    built = []
    original = budget_module.BudgetAccountant._records_from

    def counting(self, key):
        records = original(self, key)
        built.append(len(records))
        return records

    monkeypatch.setattr(budget_module.BudgetAccountant, "_records_from", counting)
    budget = BudgetAccountant(composition="pld")
    event = GaussianEvent(1, "replace_one", 3.0)
    for _ in range(300):
        held = budget.reserve(0.5, 1e-6)
        budget.settle(held, 0.4, 1e-6, events=[event])
    assert max(built[-50:]) <= 2
    fresh = pickle.loads(pickle.dumps(budget))
    assert budget.spent == fresh.spent


# --- SQLiteBudgetAccountant: one persistent budget shared by processes. (was test_ledger_sqlite.py) ---

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


def _binary_sqlite(n=200, d=2, seed=0):
    return np.random.default_rng(seed).binomial(1, 0.4, size=(n, d))


def _fit_at_rendezvous(path, barrier, queue):
    # In a forked child: patching the class here leaves the parent's alone.
    touched = []
    begin_then_meet, record_touch = rendezvous_methods(barrier, touched, lambda est: True)
    DPBetaBernoulli._begin_private_fit = begin_then_meet
    DPBetaBernoulli._validate_X = record_touch
    est = DPBetaBernoulli(epsilon=0.75, accountant=SQLiteBudgetAccountant(path), random_state=0)
    try:
        est.fit(_binary_sqlite())
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
    DPBetaBernoulli(epsilon=0.5, accountant=SQLiteBudgetAccountant(path)).fit(_binary_sqlite())


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
    bad = _binary_sqlite().astype(float)
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        DPBetaBernoulli(epsilon=0.5, accountant=ledger).fit(bad)
    with pytest.raises(BudgetExceededError):
        DPBetaBernoulli(epsilon=1.0, accountant=ledger).fit(_binary_sqlite())
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
    X = iris_rows()
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


# ------------------------------------------------- SQLite: journal, durability, connections ---


def _synchronous_log(ledger, monkeypatch):
    """Record, for each transaction, the ``PRAGMA synchronous`` its commit runs under."""
    log = []
    original = SQLiteBudgetAccountant._set_synchronous

    def spy(self, con, durable):
        original(self, con, durable)
        log.append(con.execute("PRAGMA synchronous").fetchone()[0])  # 2 FULL, 1 NORMAL

    monkeypatch.setattr(SQLiteBudgetAccountant, "_set_synchronous", spy)
    return log


def test_sqlite_ledger_is_a_write_ahead_log_whose_charges_are_durable(tmp_path, monkeypatch):
    # Every transaction that may raise the charge (spend, reserve, extend, a
    # settlement above its reservation) commits with a sync of the log
    # (FULL); a settlement within its reservation only lowers the total and
    # is not waited for (NORMAL).
    path = tmp_path / "ledger.sqlite"
    ledger = SQLiteBudgetAccountant(path, epsilon=10.0, delta=1e-3)
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()
    log = _synchronous_log(ledger, monkeypatch)
    ledger.spend(0.5, 0.0)
    held = ledger.reserve(1.0, 1e-5)
    ledger.settle(held, 0.5, 1e-6, events=[GaussianEvent(1, REPLACE_ONE, 3.0)])
    with ledger.hold(1.0, 1e-5) as hold:
        hold.extend(1.5, 1e-5)
        hold.settle(1.2, 1e-5)  # above the first reservation, within the extended one
    held = ledger.reserve(0.5, 0.0)
    with pytest.raises(ValueError, match="exceeds the reservation"):
        ledger.settle(held, 0.75, 0.0)
    assert log == [2, 2, 1, 2, 2, 2, 2, 2]
    assert ledger.spent.epsilon == pytest.approx(0.5 + 0.5 + 1.2 + 0.75)
    # durability="process": no commit waits for the disk; the same ledger.
    fast = SQLiteBudgetAccountant(path, durability="process")
    log.clear()
    fast.settle(fast.reserve(0.5, 0.0), 0.25, 0.0)
    assert log == [1, 1]
    assert fast.spent == ledger.spent == SQLiteBudgetAccountant(path).spent
    with pytest.raises(ValueError, match="durability"):
        SQLiteBudgetAccountant(path, durability="none")
    assert pickle.loads(pickle.dumps(fast)).durability == "process"


def _spend_inherited(ledger, queue):
    # The parent's accountant, inherited through fork: the child opens its own connection.
    try:
        ledger.spend(0.25, 0.0, label="child")
        queue.put(ledger.spent.epsilon)
    except Exception as exc:  # noqa: BLE001 -- reported to the parent
        queue.put(repr(exc))


def test_sqlite_connection_is_reopened_after_fork(tmp_path):
    ledger = SQLiteBudgetAccountant(tmp_path / "ledger.sqlite", epsilon=2.0, delta=0.0)
    ledger.spend(0.5, 0.0, label="parent")  # the parent's connection is open
    queue = CTX.Queue()
    child = CTX.Process(target=_spend_inherited, args=(ledger, queue))
    child.start()
    assert queue.get(timeout=60) == pytest.approx(0.75)
    child.join(30)
    ledger.spend(0.5, 0.0, label="parent")  # the parent's connection still works
    assert ledger.history == [(0.5, 0.0, "parent"), (0.25, 0.0, "child"), (0.5, 0.0, "parent")]
    assert ledger.spent.epsilon == pytest.approx(1.25)
