"""Accounting at closed-form speed: the fast paths report what the PLD path reports, or less.

* A plain-Gaussian history is reported by its exact composition (Balle &
  Wang 2018 with Dong, Roth & Su 2022's mu), without building a PLD; the
  PLD path (``PLDAccountant(closed_forms=False)``, the accounting before the
  fast path) is a pessimistic discretisation of the same pair, so the fast
  value may only be below it, or above by dp-accounting's own rounding
  (1e-9 relative at most, at delta = 1e-9, where its value is below the
  true epsilon).
* PLDs are built once per mechanism and composed by counts; caches never
  change a result.
* A budget composes each settled fit once: a reservation costs one
  composition of the distinct mechanisms, and the total equals the S_k
  chain of :class:`~skdp.privacy.BudgetAccountant` computed from scratch.
"""

import functools
import math
import pickle
import re

import numpy as np
import pytest
from scipy import optimize, special

from skdp.privacy import (
    ADD_REMOVE,
    REPLACE_ONE,
    BudgetAccountant,
    GaussianEvent,
    LaplaceEvent,
    SQLiteBudgetAccountant,
    SubsampledGaussianEvent,
    calibrate_noise_multiplier,
    calibration,
    compose,
)
from skdp.privacy.accountants import pld as pld_module
from skdp.privacy.accountants.conversions import DEFAULT_ORDERS, rdp_to_epsilon
from skdp.privacy.accountants.pld import PLDAccountant
from skdp.privacy.accountants.rdp import RDPAccountant
from skdp.privacy.budgets import in_process as budget_module

pytest.importorskip("dp_accounting")

#: dp-accounting's pessimistic PLD falls below the true epsilon by float
#: rounding at tiny deltas (4.5e-10 and 9.6e-10 relative at delta = 1e-9 and
#: z = 0.3, 0.7; checked against a 50-digit evaluation of the exact profile).
PLD_ROUNDING = 1e-9
#: The same where NumPy's vectorised exp / log1p round otherwise than the C
#: library's (:func:`_vector_libm_matches_c`; the array PLD's inversion runs
#: on them, dp-accounting's on ``math``): 3.1e-9 relative measured at delta =
#: 1e-9, z = 0.7 and 1.4, with NumPy 1.25 on such a CPU (the oldest-deps run).
PLD_VECTOR_ROUNDING = 1e-8


def _gdp_epsilon(mu, delta):
    """Exact epsilon of mu-GDP at delta, written independently of skdp (Dong, Roth & Su 2022)."""

    def gap(eps):
        a = special.log_ndtr(-eps / mu + mu / 2)
        b = eps + special.log_ndtr(-eps / mu - mu / 2)
        return math.exp(a) - math.exp(b) - delta

    if gap(0.0) <= 0:
        return 0.0
    hi = 1.0
    while gap(hi) > 0:
        hi *= 2
    return optimize.brentq(gap, 0.0, hi, xtol=1e-13, rtol=1e-15)


GAUSSIAN_HISTORIES = [
    [GaussianEvent(1, REPLACE_ONE, 4.84)],
    [GaussianEvent(3, REPLACE_ONE, 2.0), GaussianEvent(1, REPLACE_ONE, 7.5)],
    [GaussianEvent(10, ADD_REMOVE, 12.0)],
    [GaussianEvent(1, REPLACE_ONE, 0.7), GaussianEvent(1, REPLACE_ONE, 1.4)],
    [SubsampledGaussianEvent(5, ADD_REMOVE, 3.0, 1.0), GaussianEvent(1, ADD_REMOVE, 30.0)],
]


@pytest.mark.parametrize("events", GAUSSIAN_HISTORIES)
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-7, 1e-9])
def test_gaussian_histories_report_their_exact_composition(events, delta):
    fast = PLDAccountant().epsilon(events, delta)
    mu = math.sqrt(sum(e.count / e.noise_multiplier**2 for e in events))
    assert fast == pytest.approx(_gdp_epsilon(mu, delta), rel=1e-10, abs=1e-12)
    # Never above the PLD path (the accounting before the fast path) but by
    # dp-accounting's rounding below the truth.
    rounding = PLD_ROUNDING if _vector_libm_matches_c() else PLD_VECTOR_ROUNDING
    assert fast <= PLDAccountant(closed_forms=False).epsilon(events, delta) * (1 + rounding)
    # Nor above RDP's conversion of the same history.
    curve = sum(e.count * RDPAccountant.curve(e) for e in events)
    assert fast <= rdp_to_epsilon(curve, DEFAULT_ORDERS, delta) * (1 + 1e-12)
    if all(type(e) is GaussianEvent for e in events):
        assert RDPAccountant().epsilon(events, delta) == fast


def test_a_gaussian_history_builds_no_pld():
    before = pld_module._one_use_pld.cache_info().misses
    # Multipliers no other test uses: a build would be a cache miss.
    spent = compose([GaussianEvent(2, REPLACE_ONE, 3.1713), GaussianEvent(1, REPLACE_ONE, 5.2)], 1e-5)
    assert pld_module._one_use_pld.cache_info().misses == before
    assert spent.epsilon > 0
    # A mixed history still is discretised (the fast path is for exact forms only).
    mixed = [GaussianEvent(1, REPLACE_ONE, 3.1713), LaplaceEvent(1, REPLACE_ONE, 7.3)]
    assert compose(mixed, 1e-5).epsilon == PLDAccountant(closed_forms=False).epsilon(mixed, 1e-5)
    assert pld_module._one_use_pld.cache_info().misses > before


def test_gaussian_calibration_is_unchanged_by_the_fast_path(monkeypatch):
    # The calibration of a two-release Gaussian plan with the fast path, and
    # with every costing through the PLD path (the calibration before it):
    # the same costings up to rounding, hence the same multiplier (the
    # pinned releases rest on this).
    def plan(z):
        return [GaussianEvent(1, REPLACE_ONE, z), GaussianEvent(1, REPLACE_ONE, 1.37 * z)]

    fast = calibrate_noise_multiplier(plan, 0.8137, 1e-5)
    original = PLDAccountant.epsilon
    monkeypatch.setattr(
        PLDAccountant,
        "epsilon",
        lambda self, events, delta: original(PLDAccountant(closed_forms=False), events, delta),
    )
    calibration._cached_plan_cost.cache_clear()
    try:
        slow = calibrate_noise_multiplier(plan, 0.8137, 1e-5)
    finally:
        calibration._cached_plan_cost.cache_clear()
    assert fast == pytest.approx(slow, rel=1e-12)


def test_pld_built_once_and_composed_by_counts():
    q, z = 0.0173, 1.9321
    events = [SubsampledGaussianEvent(3, ADD_REMOVE, z, q, "poisson")]
    builds = pld_module._one_use_pld.cache_info().misses
    first = PLDAccountant().epsilon(events, 1e-5)
    assert pld_module._one_use_pld.cache_info().misses == builds + 1
    # Another count of the same mechanism convolves the cached PLD.
    more = PLDAccountant().epsilon([SubsampledGaussianEvent(7, ADD_REMOVE, z, q, "poisson")], 1e-5)
    assert pld_module._one_use_pld.cache_info().misses == builds + 1
    assert more > first
    # The caches never change a result.
    pld_module._one_use_pld.cache_clear()
    pld_module._self_composed.cache_clear()
    assert PLDAccountant().epsilon(events, 1e-5) == first


def _plans(laplace=False):
    """Ten Gaussian plans (an epsilon grid), and a Laplace one, as (request, spent, delta, events)."""
    plans = []
    for eps in np.linspace(0.2, 2.0, 10):
        events = (GaussianEvent(1, REPLACE_ONE, 3.0 / eps), GaussianEvent(2, REPLACE_ONE, 5.0 / eps))
        spent = compose(events, 1e-6).epsilon
        plans.append((1.2 * spent, spent, 1e-6, events))
    if laplace:
        plans.append((1.0, 0.25, 0.0, (LaplaceEvent(1, REPLACE_ONE, 4.0),)))
    return plans


def _chain_from_scratch(entries, composition="pld"):
    """S_n of BudgetAccountant's docstring, recomputed from the settled entries in order."""
    events, delta, value = [], 0.0, 0.0
    for eps_k, delta_k, events_k in entries:
        events.extend(events_k)
        delta += delta_k
        value = min(compose(events, delta, composition).epsilon, value + eps_k)
    return value, delta


def _fill(budget, n_fits, laplace=False):
    plans, settled = _plans(laplace), []
    for i in range(n_fits):
        request, eps, delta, events = plans[i % len(plans)]
        held = budget.reserve(request, max(delta, 1e-6))
        budget.settle(held, eps, delta, events=events)
        settled.append((eps, delta, events))
    budget.spend(0.05, 1e-7)  # an entry without events adds by basic composition
    return settled


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@pytest.mark.parametrize("composition", ["pld", "rdp"])
def test_budget_total_equals_the_chain_from_scratch(backend, composition, tmp_path):
    # Under "rdp" the group mixes Gaussian and Laplace releases (no closed
    # form); under "pld" it is Gaussian (the exact composition).
    if backend == "memory":
        budget = BudgetAccountant(epsilon=1e6, delta=1.0, composition=composition)
    else:
        budget = SQLiteBudgetAccountant(
            tmp_path / "b.sqlite", epsilon=1e6, delta=1.0, composition=composition
        )
    settled = _fill(budget, 37, laplace=composition == "rdp")
    open_held = budget.reserve(0.5, 1e-6)  # an open reservation counts at its amount
    group_eps, group_delta = _chain_from_scratch(settled, composition)
    spent = budget.spent
    assert spent.epsilon == pytest.approx(group_eps + 0.05 + 0.5, rel=1e-12)
    assert spent.delta == pytest.approx(group_delta + 1e-7 + 1e-6, rel=1e-12)
    # The same from a budget with no cached state (pickled), and unchanged by reading it again.
    if backend == "memory":
        assert pickle.loads(pickle.dumps(budget)).spent == spent
    assert budget.spent == spent
    budget.settle(open_held, 0.1, 0.0)
    assert budget.spent.epsilon == pytest.approx(group_eps + 0.05 + 0.1, rel=1e-12)


def test_a_reservation_composes_the_distinct_mechanisms_once(monkeypatch):
    budget = BudgetAccountant(epsilon=1e6, delta=1.0)
    _fill(budget, 200)
    calls = []
    original = budget_module.compose

    def counting(events, delta, composition):
        calls.append(len(events))
        return original(events, delta, composition)

    monkeypatch.setattr(budget_module, "compose", counting)
    request, eps, delta, events = _plans()[3]
    held = budget.reserve(request, 1e-6)
    budget.settle(held, eps, delta, events=events)
    budget.reserve(request, 1e-6)
    # One composition for the one fit settled since the last total, of the
    # distinct mechanisms (19: two plans share one), not of 201 fits' events.
    distinct = {(type(e), e.noise_multiplier) for plan in _plans() for e in plan[3]}
    assert calls == [len(distinct)] == [19]


@functools.cache
def _vector_libm_matches_c():
    # Whether NumPy's exp and log1p round as the C library's on this CPU (a probe on many points).
    x = np.linspace(-30.0, 30.0, 20001)
    return bool(
        np.array_equal(np.exp(x), [math.exp(v) for v in x])
        and np.array_equal(np.log1p(np.abs(x)), [math.log1p(abs(v)) for v in x])
    )


@pytest.mark.parametrize(
    "standard_deviation, sampling_prob, replace_one",
    [(1.7, 256 / 20000, False), (0.6, 0.1, False), (3.0, 1.0, False), (1.2, 0.05, True), (0.8, 1.0, True)],
)
def test_array_pld_is_dp_accountings_pld(standard_deviation, sampling_prob, replace_one):
    # The connect-the-dots build, the self-composition and the epsilon
    # read-off on arrays are dp-accounting's algorithms: the same PMFs and
    # the same epsilon, to rounding.  A probability is a second
    # difference of hockey-stick deltas (values in [0, 1]) over
    # expm1(interval): a few ulps of a delta, which depend on how the
    # installed SciPy evaluates the normal CDF (scipy.stats.norm against the
    # special functions called here), become ulp / expm1(1e-4) ~ 2e-12 in a
    # probability.  The inversion here runs on NumPy's vectorised exp and
    # log1p, dp-accounting's on the C library's: they may differ by an ulp,
    # and which does depends on the CPU's instruction set (equal to the bit
    # on some machines, not on others).  The epsilon read off a 300-fold
    # composition at delta = 1e-9 reads the tail, where those probabilities
    # differ by ~1e-5 relative: it moves by up to ~1.3e-7 relative either way
    # (measured on such a CPU), a hundredth of the PLD's own discretisation
    # error (the grid interval, 1e-4 in loss): compared to 1e-6 there.
    atol = 16 * np.finfo(float).eps / math.expm1(1e-4)
    rel = 1e-12 if _vector_libm_matches_c() else 1e-6
    from dp_accounting import NeighboringRelation
    from dp_accounting.pld import privacy_loss_distribution

    relation = NeighboringRelation.REPLACE_ONE if replace_one else NeighboringRelation.ADD_OR_REMOVE_ONE
    reference = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation, sampling_prob=sampling_prob, neighboring_relation=relation
    )
    mine = pld_module._connect_dots_gaussian_pld(standard_deviation, 1e-4, sampling_prob, replace_one)
    for a, b in [(reference._pmf_remove, mine._pmf_remove), (reference._pmf_add, mine._pmf_add)]:
        a, b = a.to_dense_pmf(), b.to_dense_pmf()
        assert a._lower_loss == b._lower_loss
        np.testing.assert_allclose(a._probs, b._probs, rtol=0, atol=atol)
        assert a._infinity_mass == b._infinity_mass
    for count in (1, 7, 300):
        composed = reference.self_compose(count)
        remove = pld_module._self_compose_pmf(mine._pmf_remove, count)
        add = remove if mine._symmetric else pld_module._self_compose_pmf(mine._pmf_add, count)
        ours = type(mine)(remove) if mine._symmetric else type(mine)(remove, add)
        for delta in (1e-5, 1e-9):
            assert pld_module._epsilon_for_delta(ours, delta) == pytest.approx(
                composed.get_epsilon_for_delta(delta), rel=rel
            )


@pytest.mark.parametrize("steps", [300, 2000])
def test_subsampled_calibration_meets_the_target_near_dp_accountings_sigma(steps):
    # DP-SGD calibration: located on coarse PLDs, accepted on the fine one.
    # The plan meets the target, leaves at most PLD_SLACK of it unspent, and
    # its sigma is within 0.5% of dp-accounting's own PLD calibration
    # (the tolerance; in practice 2e-4).
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    from skdp.privacy.dpsgd import calibrate_dpsgd_noise, dpsgd_step_event

    q, epsilon, delta = 256 / 20000, 1.0, 1e-5
    sigma = calibrate_dpsgd_noise(epsilon, delta, q, steps)
    spent = compose([dpsgd_step_event(sigma, q, count=steps)], delta, "pld").epsilon
    assert epsilon * (1 - calibration.PLD_SLACK) <= spent <= epsilon

    def make_event(s):
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(s)), steps
        )

    reference = dp_accounting.calibrate_dp_mechanism(
        pld_privacy_accountant.PLDAccountant,
        make_event,
        epsilon,
        delta,
        dp_accounting.ExplicitBracketInterval(0.8 * sigma, 1.2 * sigma),
        tol=1e-5 * sigma,
    )
    assert sigma == pytest.approx(reference, rel=5e-3)
    assert sigma >= reference * (1 - 1e-4)  # never less noise than the reference answer needs


def test_subsampled_calibration_falls_back_when_the_coarse_search_fails(monkeypatch):
    # Any difficulty of the coarse search (here: no starting guess) leaves
    # the calibration to the RDP-bracketed PLD search, which still meets
    # the target.
    from skdp.privacy.dpsgd import calibrate_dpsgd_noise, dpsgd_step_event

    monkeypatch.setattr(calibration, "_clt_guess", lambda *args: None)
    q = 0.05
    sigma = calibrate_dpsgd_noise(2.0, 1e-5, q, 50)
    assert compose([dpsgd_step_event(sigma, q, count=50)], 1e-5, "pld").epsilon <= 2.0


@pytest.mark.parametrize("neighbouring", ["replace_one", "add_remove"])
def test_subsampled_calibration_at_large_epsilon_starts_near_the_root(monkeypatch, neighbouring):
    # At epsilon 100 the central-limit guess misses the multiplier by a
    # factor of about 2 (either way); growing the bracket from it by
    # squared steps costed coarse PLDs far from the root (below it: wide
    # loss ranges, the slowest costings).  The secant start keeps the
    # later coarse costings near the root and their count small; the plan
    # still meets the target, in the window moved down by PLD_SLACK above
    # PLD_RELATIVE_FROM, on the fine PLD.
    from skdp.privacy.dpsgd import dpsgd_step_event

    costed = []
    original = PLDAccountant.pld_epsilon

    def recording(self, events, delta):
        if self.value_discretization_interval == calibration._coarse_interval(epsilon):
            costed.append(events[0].noise_multiplier)
        return original(self, events, delta)

    monkeypatch.setattr(PLDAccountant, "pld_epsilon", recording)
    q, steps, epsilon, delta = 0.16, 250, 100.0, 1e-5
    z = calibration.calibrate_noise_multiplier(
        lambda s: [dpsgd_step_event(s, q, count=steps)], epsilon, delta, "pld", neighbouring
    )
    event = dpsgd_step_event(z, q, count=steps).to_relation(neighbouring)
    assert epsilon * (1 - 2 * calibration.PLD_SLACK) <= compose([event], delta, "pld").epsilon
    assert compose([event], delta, "pld").epsilon <= epsilon * (1 - calibration.PLD_SLACK)
    # Costed multipliers are the events' after conversion to the relation.
    # The central-limit guess and the probe from it may be far off; every
    # later costing is within 25% of the root (the old search: 11 costings,
    # its third at 0.66 of the root).
    assert 3 <= len(costed) <= 9
    assert min(costed[2:]) >= event.noise_multiplier / 1.25


def test_dpsgd_calibration_below_what_rdp_can_certify_bisects_on_pld():
    # At epsilon 1e-3 (delta 1e-5) RDP's default orders cannot certify any
    # noise level; the calibration used to refuse ("noise beyond 1e12") or,
    # before the fractional-order bound, run for minutes.  PLD can: the
    # multiplier meets the target and 1% less noise does not.
    from skdp.privacy import compose
    from skdp.privacy.dpsgd import calibrate_dpsgd_noise, dpsgd_step_event

    q, steps = 256 / 20000, 1000
    z = calibrate_dpsgd_noise(1e-3, 1e-5, q, steps)
    assert compose([dpsgd_step_event(z, q, count=steps)], 1e-5, "pld").epsilon <= 1e-3
    assert compose([dpsgd_step_event(0.99 * z, q, count=steps)], 1e-5, "pld").epsilon > 1e-3


def _gaussian_plans():
    """Plain-Gaussian plans: one release, self-compositions, weighted releases, a fixed prefix, add/remove."""
    return {
        "one": (lambda z: [GaussianEvent(1, REPLACE_ONE, z)], REPLACE_ONE),
        "count40": (lambda z: [GaussianEvent(40, REPLACE_ONE, z)], REPLACE_ONE),
        "count1000": (lambda z: [GaussianEvent(1000, REPLACE_ONE, z)], REPLACE_ONE),
        "weighted": (
            lambda z: [GaussianEvent(1, REPLACE_ONE, z), GaussianEvent(3, REPLACE_ONE, 2.5 * z)],
            REPLACE_ONE,
        ),
        "prefix": (
            lambda z: [GaussianEvent(2, REPLACE_ONE, 30.0), GaussianEvent(1, REPLACE_ONE, z)],
            REPLACE_ONE,
        ),
        "add_remove": (lambda z: [GaussianEvent(2, ADD_REMOVE, z)], REPLACE_ONE),
    }


def _nested_calibration(monkeypatch, *args, **kwargs):
    """The calibration as it was: every decision of the bisection costed (Brent inside bisection)."""
    with monkeypatch.context() as patch:
        patch.setattr(calibration, "_replay_exact_gaussian", lambda *a, **k: None)
        calibration._cached_plan_cost.cache_clear()
        try:
            return calibrate_noise_multiplier(*args, **kwargs)
        finally:
            calibration._cached_plan_cost.cache_clear()


@pytest.mark.parametrize("composition", ["rdp", "pld"])
@pytest.mark.parametrize("plan", sorted(_gaussian_plans()))
def test_gaussian_plan_calibration_is_the_nested_search_to_the_bit(monkeypatch, plan, composition):
    # The replay locates the crossing on the exact delta and decides the bisection by its
    # certified sides: the same decisions as the nested search, hence the same multiplier
    # (not a close one), and the same reported epsilon, on a grid of epsilon and delta.
    make_events, relation = _gaussian_plans()[plan]
    for delta in (1e-3, 1e-5, 1e-10):
        for epsilon in (0.01, 0.1, 0.3, 1.0, 1.123, 2.5, 10.0, 50.0):
            calibration._cached_plan_cost.cache_clear()
            try:
                slow = _nested_calibration(monkeypatch, make_events, epsilon, delta, composition, relation)
            except ValueError as exc:  # the fixed prefix alone spends more: the same refusal
                with pytest.raises(ValueError, match=re.escape(str(exc))):
                    calibrate_noise_multiplier(make_events, epsilon, delta, composition, relation)
                continue
            fast = calibrate_noise_multiplier(make_events, epsilon, delta, composition, relation)
            assert fast == slow, (epsilon, delta)
            events = [e.to_relation(relation) for e in make_events(fast)]
            assert compose(events, delta, composition).epsilon <= epsilon


def test_gaussian_plan_calibration_costs_a_handful_of_compositions(monkeypatch):
    # The nested search costed a dozen multipliers (each a Brent root of the profile); the
    # replay costs only those inside its certified bracket under "rdp" (almost never), and
    # the "pld" refinement's few on top.
    counted = {"n": 0}
    original = calibration.compose

    def counting(*args, **kwargs):
        counted["n"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(calibration, "compose", counting)
    make_events, relation = _gaussian_plans()["weighted"]
    for composition, most in (("rdp", 1), ("pld", 7)):
        for epsilon in (0.2, 1.3, 4.0):
            calibration._cached_plan_cost.cache_clear()
            counted["n"] = 0
            calibrate_noise_multiplier(make_events, epsilon, 1e-5, composition, relation)
            assert counted["n"] <= most, (composition, epsilon, counted["n"])
    calibration._cached_plan_cost.cache_clear()
    counted["n"] = 0
    _nested_calibration(monkeypatch, make_events, 1.3, 1e-5, "rdp", relation)
    assert counted["n"] >= 8  # what the replay saves


def test_replay_certificate_puts_the_costed_epsilon_on_its_side():
    # The certificate: an exact epsilon at least _certainty(eps) from eps puts Brent's costed
    # epsilon (gaussian_epsilon) on the same side, at multipliers spanning 1e-2 to 1e4.
    from skdp.privacy.accountants.conversions import gaussian_delta, gaussian_epsilon

    rng = np.random.default_rng(3)
    for _ in range(400):
        s = 10 ** rng.uniform(-2, 4)
        delta = 10 ** rng.uniform(-12, -1.5)
        eps = gaussian_epsilon(s, delta)
        if eps <= 0:
            continue
        for target in (eps * (1 + 1e-9), eps * (1 - 1e-9), eps + 3e-11, eps - 3e-11):
            slack = calibration._certainty(target)
            if gaussian_delta(s, target - slack) <= delta:
                assert eps <= target
            if gaussian_delta(s, target + slack) > delta:
                assert eps > target


def test_replay_declines_plans_outside_the_exact_gaussian_composition():
    def mixed(z):
        return [GaussianEvent(1, REPLACE_ONE, z), LaplaceEvent(1, REPLACE_ONE, 3.0)]

    def events_at(z):
        return tuple(mixed(z))

    assert calibration._replay_exact_gaussian(lambda z: 0.0, events_at, 1.0, 1e-5, 1e-6) is None
    z = calibrate_noise_multiplier(mixed, 1.0, 1e-5, "rdp")
    assert compose(mixed(z), 1e-5, "rdp").epsilon <= 1.0


def test_block_read_is_dp_accountings_read():
    # The epsilon read block by block from the largest loss down is dp-accounting's loop:
    # on a composed PMF of tens of thousands of points (many blocks), at deltas whose
    # stopping loss lies in the first block, in a later one, and where the loop saturates.
    from dp_accounting.pld import privacy_loss_distribution

    reference = privacy_loss_distribution.from_gaussian_mechanism(0.9, sampling_prob=0.05)
    composed = reference.self_compose(200)
    assert len(composed._pmf_remove.to_dense_pmf()._probs) > 8 * pld_module._READ_BLOCK
    for delta in (0.9, 0.3, 1e-2, 1e-5, 1e-9, 1e-13, 1e-300):
        for pmf in (composed._pmf_remove, composed._pmf_add):
            dense = pmf.to_dense_pmf()
            assert pld_module._pmf_epsilon(dense, delta) == pytest.approx(
                dense.get_epsilon_for_delta(delta), rel=1e-12, abs=1e-12
            )


def _dpsep_plan(z):
    return [SubsampledGaussianEvent(534, REPLACE_ONE, z, sampling_rate=15 / 200)]


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 10.0])
def test_subsampled_calibration_builds_few_fine_plds_and_the_ledger_reads_none(monkeypatch, epsilon):
    # A DP-SEP-sized plan (534 replace-one Poisson steps at q = 0.075): the fine PLD (the
    # ledger's grid) is built for at most three multipliers, and the ledger's composition of
    # the calibrated history reads its epsilon from the calibration's read, with no new
    # PLD and no new read-off.
    built, read = [], []
    compose_pld, read_off = pld_module._connect_dots_gaussian_pld, pld_module._epsilon_for_delta
    monkeypatch.setattr(
        pld_module,
        "_connect_dots_gaussian_pld",
        lambda sd, interval, *args: built.append(interval) or compose_pld(sd, interval, *args),
    )
    monkeypatch.setattr(pld_module, "_epsilon_for_delta", lambda *a: read.append(1) or read_off(*a))
    pld_module._one_use_pld.cache_clear()
    pld_module._self_composed.cache_clear()
    pld_module._history_epsilon.cache_clear()
    calibration._cached_plan_cost.cache_clear()
    z = calibrate_noise_multiplier(_dpsep_plan, epsilon, 1e-5, "pld", REPLACE_ONE, 1e-3)
    assert 1 <= built.count(pld_module.VALUE_DISCRETIZATION_INTERVAL) <= 3
    built.clear(), read.clear()
    spent = compose(_dpsep_plan(z), 1e-5, "pld").epsilon
    assert built == [] and read == []
    assert epsilon * (1 - calibration.PLD_SLACK) <= spent <= epsilon


@pytest.mark.parametrize("count", [1, 2, 3, 7, 300, 534])
@pytest.mark.parametrize("sampling_prob", [0.01, 0.075, 0.3])
def test_hermitian_power_is_the_whole_power_to_the_bit(count, sampling_prob):
    # The self-composition raises the transform of a real PMF to the count:
    # computed on the lower half and conjugated, it equals NumPy's power of
    # the whole spectrum bit for bit, at even and odd transform lengths
    # (a power below 100 is NumPy's repeated products, above it libm's cpow;
    # ``** 2`` is NumPy's square, which rounds otherwise).
    from scipy import fft

    pmf = pld_module._connect_dots_gaussian_pld(0.6, 1e-4, sampling_prob, True)._pmf_remove
    probs = pmf._probs
    for length in (len(probs) * 3, len(probs) * 3 + 1):
        spectrum = fft.fft(probs, length)
        np.testing.assert_array_equal(pld_module._hermitian_power(spectrum, count), spectrum**count)


def test_hermitian_power_falls_back_on_an_asymmetric_spectrum():
    rng = np.random.default_rng(0)
    spectrum = rng.normal(size=101) + 1j * rng.normal(size=101)
    np.testing.assert_array_equal(pld_module._hermitian_power(spectrum, 300), spectrum**300)


@pytest.mark.parametrize("epsilon", [30.0, 100.0])
def test_subsampled_calibration_above_ten_reports_at_most_the_former_window(epsilon):
    # Above PLD_RELATIVE_FROM the multiplier is located on a coarse grid
    # widening as sqrt(epsilon) and accepted in [eps (1 - 2 S), eps (1 - S)]:
    # the reported epsilon is never above the former search's (at least
    # eps (1 - S)), and the plan costed by dp-accounting itself at its
    # default grid meets the target.
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    slack = calibration.PLD_SLACK
    assert calibration._coarse_interval(epsilon) == pytest.approx(
        calibration.PLD_COARSE_INTERVAL * math.sqrt(epsilon / 10.0), rel=1e-15
    )
    z = calibrate_noise_multiplier(_dpsep_plan, epsilon, 1e-5, "pld", REPLACE_ONE, 1e-3)
    spent = compose(_dpsep_plan(z), 1e-5, "pld").epsilon
    assert epsilon * (1 - 2 * slack) <= spent <= epsilon * (1 - slack)
    accountant = pld_privacy_accountant.PLDAccountant(dp_accounting.NeighboringRelation.REPLACE_ONE)
    accountant.compose(
        dp_accounting.PoissonSampledDpEvent(15 / 200, dp_accounting.GaussianDpEvent(2 * z)), 534
    )
    assert accountant.get_epsilon(1e-5) == pytest.approx(spent, rel=1e-9)
    assert accountant.get_epsilon(1e-5) <= epsilon


def test_ledger_composes_on_its_pld_interval_and_only_under_pld():
    # compose(..., pld_interval) is the PLD on that grid (an upper bound above the
    # default grid's), the RDP fallback ignores it, and a ledger pickled before
    # the attribute existed composes on the default grid.
    from skdp.privacy import PrivacyLedger
    from skdp.privacy.accountants.pld import VALUE_DISCRETIZATION_INTERVAL

    events = _dpsep_plan(0.5)
    coarse = compose(events, 1e-5, "pld", 1e-3).epsilon
    assert coarse == PLDAccountant(value_discretization_interval=1e-3).epsilon(events, 1e-5)
    assert coarse >= compose(events, 1e-5, "pld").epsilon
    assert compose(events, 1e-5, "pld", VALUE_DISCRETIZATION_INTERVAL) == compose(events, 1e-5, "pld")
    add_remove = [SubsampledGaussianEvent(100, "add_remove", 1.0, sampling_rate=0.05)]
    assert compose(add_remove, 1e-5, "rdp", 1e-3) == compose(add_remove, 1e-5, "rdp")
    ledger = PrivacyLedger()
    for e in events:
        ledger.record(e)
    ledger.pld_interval = 1e-3
    assert ledger.privacy_spent(1e-5).epsilon == coarse
    state = dict(pickle.loads(pickle.dumps(ledger)).__dict__)
    del state["pld_interval"]
    old = PrivacyLedger.__new__(PrivacyLedger)
    old.__setstate__(state)
    assert old.privacy_spent(1e-5) == compose(events, 1e-5, "pld")


@pytest.mark.parametrize("epsilon", [30.0, 100.0])
def test_calibration_on_the_relative_grid_meets_the_target_on_both_grids(epsilon):
    # The multiplier accepted on pld_interval_for(epsilon) costs at most
    # epsilon (1 - PLD_SLACK) on that grid and no more on dp-accounting's default one.
    interval = calibration.pld_interval_for(epsilon)
    assert calibration.pld_interval_for(10.0) is None
    z = calibrate_noise_multiplier(_dpsep_plan, epsilon, 1e-5, "pld", REPLACE_ONE, 1e-3, pld_interval=interval)
    spent = compose(_dpsep_plan(z), 1e-5, "pld", interval).epsilon
    assert epsilon * (1 - 2 * calibration.PLD_SLACK) <= spent <= epsilon * (1 - calibration.PLD_SLACK)
    assert compose(_dpsep_plan(z), 1e-5, "pld").epsilon <= spent
