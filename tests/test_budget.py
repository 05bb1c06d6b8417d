"""BudgetAccountant: a budget shared by many fits, clone-safe, refusing overspend."""

import multiprocessing
import pickle
import threading

import numpy as np
import pytest
from _rendezvous import rendezvous_methods
from sklearn.base import clone
from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV, cross_val_score

from skdp import BudgetAccountant, BudgetExceededError
from skdp.bayes import DPBetaBernoulli
from skdp.mixture import DPGaussianMixture
from skdp.privacy import (
    ADD_REMOVE,
    REPLACE_ONE,
    GaussianEvent,
    LaplaceEvent,
    SubsampledGaussianEvent,
    compose,
)
from skdp.privacy.budget import BudgetReservation
from skdp.privacy.cluster_sampling import ClusterSampledGaussianEvent


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
    X = load_iris().data
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
    import skdp.privacy.budget as budget_module

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
