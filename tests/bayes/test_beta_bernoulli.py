"""DPBetaBernoulli: the noise, the temperature, the guarantee and the API."""

import io
import math
import pickle

import _audit_broken
import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone

from skdp import BudgetAccountant, BudgetExceededError
from skdp._input import validate_fit_input
from skdp._random import AFTER_FIT_SPAWN_TAG, generator_after_fit
from skdp.audit import _cases, epsilon_lower_bound
from skdp.bayes import DPBetaBernoulli
from skdp.bayes import _beta_bernoulli as bb_module
from skdp.bayes._conjugate import sample_truncated_beta
from skdp.privacy import LaplaceMechanism


def _data(n=1000, d=10, p=0.5, seed=0):
    return np.random.default_rng(seed).binomial(1, p, size=(n, d))


# --- the Laplace mechanism on the counts ------------------------------------------------------


def test_laplace_noise_on_counts_has_the_claimed_scale():
    d, eps = 10, 1.0
    X = _data(d=d)
    counts = np.stack([(X == 0).sum(0), X.sum(0)], axis=1)
    model = DPBetaBernoulli(epsilon=eps, count_release="paper")
    noise = np.concatenate(
        [model.set_params(random_state=s).fit(X).noisy_counts_ - counts for s in range(1000)]
    ).ravel()  # 20,000 draws; counts near 500 make the projection at 0 inactive
    # L1 sensitivity 2 per feature, budget split over d features: b = 2 d / eps.
    b = 2 * d / eps
    assert np.std(noise) == pytest.approx(math.sqrt(2) * b, rel=0.05)
    assert np.mean(np.abs(noise)) == pytest.approx(b, rel=0.05)


def test_one_count_release_has_half_the_paper_scale():
    """count_release="one": Laplace noise of scale d / eps on n_plus (L1 sensitivity 1), half the
    paper's 2 d / eps; n_minus = n - n_plus carries the same noise with the opposite sign."""
    d, eps, n = 10, 1.0, 1000
    X = _data(n=n, d=d)
    counts = np.stack([(X == 0).sum(0), X.sum(0)], axis=1)
    fits = [DPBetaBernoulli(epsilon=eps, random_state=s).fit(X).noisy_counts_ for s in range(1000)]
    noise = np.stack(fits) - counts  # (1000, d, 2); counts near 500: the clip at [0, n] is inactive
    np.testing.assert_allclose(noise[..., 0], -noise[..., 1], atol=1e-9)
    released = noise[..., 1].ravel()  # 10,000 independent draws
    b = d / eps
    # mean |Laplace(b)| = b: relative standard error 1 / sqrt(10,000) = 1%; 5 of them.  The
    # paper's scale (2b) or a halved one (b / 2) is off by 50% or more.
    assert np.mean(np.abs(released)) == pytest.approx(b, rel=0.05)
    # std: relative standard error sqrt((kurtosis - 1) / (4 n)) = sqrt(5 / 40,000) ~ 1.1%.
    assert np.std(released) == pytest.approx(math.sqrt(2) * b, rel=0.05)
    assert stats.kstest(released / b, "laplace").pvalue > 1e-3


def test_one_count_release_ledger_and_mechanism(monkeypatch):
    d, eps = 3, 0.6
    calls = []
    orig = LaplaceMechanism.release

    def spy(mech, value, rng, accountant):
        calls.append((mech.sensitivity, mech.scale, np.shape(value)))
        return orig(mech, value, rng, accountant)

    monkeypatch.setattr(LaplaceMechanism, "release", spy)
    X = _data(n=200, d=d)
    one = DPBetaBernoulli(epsilon=eps, random_state=0).fit(X)
    assert calls == [(1.0, d / eps, ())] * d  # one scalar count per feature, L1 sensitivity 1
    calls.clear()
    paper = DPBetaBernoulli(epsilon=eps, count_release="paper", random_state=0).fit(X)
    assert calls == [(2.0, 2 * d / eps, (2,))] * d
    # The same budget: d Laplace releases at multiplier (scale / sensitivity) d / eps.
    for model in (one, paper):
        events = model.privacy_ledger_.events
        assert sum(e.count for e in events) == d
        assert all(type(e).__name__ == "LaplaceEvent" for e in events)
        assert all(e.noise_multiplier == pytest.approx(d / eps) for e in events)
        assert model.privacy_spent_.epsilon == pytest.approx(eps)
        assert model.privacy_spent_.delta == 0.0


def test_one_count_release_is_clipped_and_sums_to_n():
    # Tiny n and small epsilon: the noisy success count leaves [0, n] most of the time.
    X = np.zeros((4, 6), dtype=int)
    X[:1, :3] = 1
    model = DPBetaBernoulli(prior=(2.0, 3.0), epsilon=0.05, random_state=0).fit(X)
    counts = model.noisy_counts_
    assert np.all((counts >= 0) & (counts <= 4))
    np.testing.assert_allclose(counts.sum(axis=1), 4.0)
    assert np.any(counts[:, 1] == 0) and np.any(counts[:, 1] == 4)  # both clips bit
    np.testing.assert_allclose(model.posterior_alpha_, 2.0 + counts[:, 1])
    np.testing.assert_allclose(model.posterior_beta_, 3.0 + counts[:, 0])


def test_paper_count_release_reproduces_the_pins():
    """count_release="paper" is the release of skdp before the option: the pinned numbers of the
    "DPBetaBernoulli(laplace)" case (fitted then with the default) are reproduced exactly."""
    import json
    from pathlib import Path

    from _registry import CASES

    # The old default's pin is kept as the mode "[count_release=paper]" (tests/_registry.py).
    pins = json.loads((Path(__file__).resolve().parents[1] / "pinned_releases.json").read_text())[
        "DPBetaBernoulli(laplace)[count_release=paper]"
    ]
    case = CASES["DPBetaBernoulli(laplace)"]
    rows = case.make_X(np.random.default_rng(0), 120, 3)  # tests/test_pinned_releases.py's data
    model = clone(case.estimator).set_params(count_release="paper", random_state=0).fit(rows)
    np.testing.assert_allclose(model.noisy_counts_.ravel(), pins["noisy_counts_"], rtol=1e-9)
    np.testing.assert_allclose(model.posterior_sample_, pins["posterior_sample_"], rtol=1e-9)
    assert list(model.privacy_spent_) == pins["privacy_spent_"]
    default = clone(case.estimator).set_params(random_state=0).fit(rows)
    assert not np.allclose(default.noisy_counts_.ravel(), pins["noisy_counts_"])


def test_count_release_is_ignored_by_ops_and_validated():
    X = _data(n=200, d=2)
    a = DPBetaBernoulli(mechanism="ops", count_release="one", random_state=0).fit(X)
    b = DPBetaBernoulli(mechanism="ops", count_release="paper", random_state=0).fit(X)
    np.testing.assert_array_equal(a.posterior_sample_, b.posterior_sample_)
    with pytest.raises(ValueError, match="count_release"):
        DPBetaBernoulli(count_release="two").fit(X)


def test_one_count_release_refused_under_add_remove():
    # n is private under add/remove neighbours: deriving n_minus from it is no post-processing.
    class AddRemove(DPBetaBernoulli):
        _neighbouring = "add_remove"

    X = _data(n=50, d=2)
    budget = BudgetAccountant(epsilon=1.0)
    with pytest.raises(ValueError, match="count_release"):
        AddRemove(accountant=budget).fit(X)
    assert budget.spent.epsilon == 0.0  # refused before the reservation


def test_one_count_release_with_secure_noise():
    X = _data(n=300, d=3)
    model = DPBetaBernoulli(epsilon=1.0, secure_noise=True, random_state=0).fit(X)
    np.testing.assert_allclose(model.noisy_counts_.sum(axis=1), 300.0)
    assert model.privacy_spent_.epsilon == pytest.approx(1.0)


def test_laplace_posterior_is_prior_plus_projected_counts():
    X = np.zeros((3, 2), dtype=int)  # tiny counts: the projection must bite
    model = DPBetaBernoulli(prior=(2.0, 3.0), epsilon=0.1, random_state=0).fit(X)
    assert np.all(model.noisy_counts_ >= 0)
    np.testing.assert_allclose(model.posterior_alpha_, 2.0 + model.noisy_counts_[:, 1])
    np.testing.assert_allclose(model.posterior_beta_, 3.0 + model.noisy_counts_[:, 0])
    assert model.privacy_spent_ == (0.1, 0.0)


def test_every_release_is_accounted():
    model = DPBetaBernoulli(epsilon=0.6, random_state=0).fit(_data(d=3))
    events = model.privacy_ledger_.events
    assert len(events) == 3  # one release per feature
    assert all(e.noise_multiplier == pytest.approx(3 * 2 / 0.6 / 2) for e in events)
    assert model.privacy_spent_.epsilon == pytest.approx(0.6)


# --- one posterior sample ----------------------------------------------------------------------


def test_ops_temperature_and_truncation():
    d, eps, a0 = 3, 0.5, 0.1
    model = DPBetaBernoulli(epsilon=eps, mechanism="ops", truncation=a0, random_state=0).fit(_data(d=d))
    # Foulds et al. Eq. 14-15: T = 2 d log((1 - a0) / a0) / eps.
    assert model.temperature_ == pytest.approx(2 * d * math.log((1 - a0) / a0) / eps)
    draws = model.sample_posterior(500)
    assert draws.min() >= a0 and draws.max() <= 1 - a0
    assert model.privacy_spent_ == (pytest.approx(501 * eps), 0.0)


def test_ops_sample_follows_the_tempered_truncated_posterior():
    X = _data(n=40, d=1, p=0.2, seed=3)
    n_plus = X.sum()
    eps, a0 = 1.0, 0.05
    model = DPBetaBernoulli(epsilon=eps, mechanism="ops", truncation=a0, random_state=1).fit(X)
    T = model.temperature_
    a, b = n_plus / T + 1, (40 - n_plus) / T + 1  # uniform prior: alpha - 1 = 0
    dist = stats.beta(a, b)
    lo, hi = dist.cdf(a0), dist.cdf(1 - a0)
    draws = model.sample_posterior(3000)[:, 0]
    assert stats.kstest(draws, lambda x: (dist.cdf(x) - lo) / (hi - lo)).pvalue > 1e-3


@pytest.mark.parametrize("a,b", [(2.0, 5.0), (400.0, 3.0), (3.0, 900.0), (1e4, 1e4)])
def test_truncated_beta_sampler(a, b):
    rng = np.random.default_rng(0)
    lo, hi = 0.1, 0.9
    draws = sample_truncated_beta(np.full(1, a), np.full(1, b), lo, hi, rng, size=4000)[:, 0]
    assert draws.min() >= lo and draws.max() <= hi
    dist = stats.beta(a, b)
    if dist.cdf(lo) > 0.5:  # interval in the upper tail: use survival functions for precision

        def cdf(x):
            return (dist.sf(lo) - dist.sf(x)) / (dist.sf(lo) - dist.sf(hi))

    else:

        def cdf(x):
            return (dist.cdf(x) - dist.cdf(lo)) / (dist.cdf(hi) - dist.cdf(lo))

    assert stats.kstest(draws, cdf).pvalue > 1e-3


def test_truncated_beta_sampler_underflow_goes_to_nearest_bound():
    rng = np.random.default_rng(0)
    draws = sample_truncated_beta(np.array([1e6, 2.0]), np.array([2.0, 1e6]), 0.1, 0.9, rng, size=10)
    assert np.all(draws[:, 0] == 0.9) and np.all(draws[:, 1] == 0.1)


def test_ops_further_samples_are_charged_to_the_budget():
    budget = BudgetAccountant(epsilon=2.5)
    model = DPBetaBernoulli(epsilon=1.0, mechanism="ops", accountant=budget, random_state=0).fit(_data(d=2))
    model.sample_posterior(1)
    assert budget.spent.epsilon == pytest.approx(2.0)
    with pytest.raises(BudgetExceededError):
        model.sample_posterior(1)
    assert model.privacy_spent_.epsilon == pytest.approx(2.0)


def test_ops_private_statistics_are_not_pickled():
    model = DPBetaBernoulli(mechanism="ops", random_state=0).fit(_data(d=2))
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.posterior_sample_, model.posterior_sample_)
    with pytest.raises(RuntimeError, match="refit"):
        restored.sample_posterior(1)


def test_ops_improper_tempered_posterior_is_refused():
    with pytest.raises(ValueError, match="improper"):
        DPBetaBernoulli(prior=(0.01, 1.0), epsilon=50.0, mechanism="ops", truncation=0.4).fit(
            np.zeros((5, 1))
        )


def _all_zeros_and_one_success(n=10):
    D = np.zeros((n, 1), dtype=int)
    D_prime = D.copy()
    D_prime[0] = 1
    return D, D_prime


# (epsilon, prior, a0): min(prior) <= 1 - T with T = 2 log((1 - a0) / a0) / epsilon, so the
# shape (n_plus + prior - 1) / T + 1 is <= 0 on all zeros and > 0 with one success: the old
# check on the counts raised on one neighbour and released on the other.
_IMPROPER_ON_ZEROS = [(10.0, (0.2, 0.2), 0.05), (2.0, (0.5, 0.5), 0.4)]


@pytest.mark.parametrize("epsilon,prior,a0", _IMPROPER_ON_ZEROS)
def test_ops_improper_check_is_the_same_on_neighbours(epsilon, prior, a0):
    T = 2 * math.log((1 - a0) / a0) / epsilon
    assert min(prior) <= 1 - T  # the setting is one the old code decided on the counts
    messages = []
    for X in _all_zeros_and_one_success():
        budget = BudgetAccountant(epsilon=100.0)
        model = DPBetaBernoulli(
            prior=prior, epsilon=epsilon, mechanism="ops", truncation=a0, accountant=budget
        )
        with pytest.raises(ValueError, match="improper") as info:
            model.fit(X)
        messages.append(str(info.value))
        assert budget.spent == (0.0, 0.0)  # refused before the reservation
        assert not hasattr(model, "privacy_spent_")
    assert messages[0] == messages[1]


@pytest.mark.parametrize("epsilon,prior,a0", _IMPROPER_ON_ZEROS)
def test_ops_improper_check_on_a_chunk_factory_is_the_same_on_neighbours(epsilon, prior, a0):
    # A factory's number of features is known after the pass only: the refusal
    # comes after the reservation, charged in full on both neighbours alike.
    spent, messages = [], []
    for X in _all_zeros_and_one_success():
        budget = BudgetAccountant(epsilon=100.0)
        model = DPBetaBernoulli(
            prior=prior, epsilon=epsilon, mechanism="ops", truncation=a0, accountant=budget
        )
        with pytest.raises(ValueError, match="improper") as info:
            model.fit(lambda X=X: iter([X[:5], X[5:]]))
        messages.append(str(info.value))
        spent.append(tuple(budget.spent))
    assert messages[0] == messages[1] and spent[0] == spent[1] == (epsilon, 0.0)


def test_ops_prior_just_above_the_bound_releases_on_both_neighbours():
    epsilon, a0 = 2.0, 0.4
    T = 2 * math.log((1 - a0) / a0) / epsilon
    prior = (1 - T + 1e-6, 1 - T + 1e-6)
    for X in _all_zeros_and_one_success():
        model = DPBetaBernoulli(prior=prior, epsilon=epsilon, mechanism="ops", truncation=a0, random_state=0)
        sample = model.fit(X).posterior_sample_
        assert a0 <= sample[0] <= 1 - a0
    # The threshold counts the features (d is public): d = 2 doubles T.
    ok = DPBetaBernoulli(prior=(0.5, 0.5), epsilon=epsilon, mechanism="ops", truncation=a0, random_state=0)
    assert ok.fit(np.zeros((10, 2))).temperature_ == pytest.approx(2 * T)


# --- distinguishing tests on neighbouring datasets --------------------------------------------


def _neighbours(n=20, k=7):
    D = np.zeros((n, 1), dtype=int)
    D[:k] = 1
    D_prime = D.copy()
    D_prime[k] = 1  # one failure replaced by a success: replace-one neighbours
    return D, D_prime


def _laplace_statistic(model):
    return model.noisy_counts_[0, 1] - model.noisy_counts_[0, 0]


@pytest.mark.slow
def test_laplace_distinguishing_test_respects_epsilon():
    eps, runs = 1.0, 20_000
    D, D_prime = _neighbours()
    model = DPBetaBernoulli(epsilon=eps)
    s = [_laplace_statistic(model.set_params(random_state=i).fit(D)) for i in range(runs)]
    s_p = [_laplace_statistic(model.set_params(random_state=runs + i).fit(D_prime)) for i in range(runs)]
    lower = epsilon_lower_bound(s, s_p)
    assert lower <= eps
    assert lower > 0.3 * eps  # the test has power: it sees a real privacy loss


@pytest.mark.slow
def test_distinguishing_test_catches_halved_noise(monkeypatch):
    # The same audit against a broken mechanism (Laplace scale halved) must
    # refute the claim, or the previous test proves nothing.
    eps, runs = 1.0, 20_000

    class Broken(LaplaceMechanism):
        # Records the claimed event but draws noise at half the scale: the
        # accounting cannot see the bug, only an audit of the outputs can.
        def _noise(self, rng, shape):
            return rng.laplace(0.0, self.scale / 2, size=shape)

    monkeypatch.setattr(bb_module, "LaplaceMechanism", Broken)
    D, D_prime = _neighbours()
    model = DPBetaBernoulli(epsilon=eps)
    s = [_laplace_statistic(model.set_params(random_state=i).fit(D)) for i in range(runs)]
    s_p = [_laplace_statistic(model.set_params(random_state=runs + i).fit(D_prime)) for i in range(runs)]
    assert epsilon_lower_bound(s, s_p) > eps


@pytest.mark.slow
def test_ops_distinguishing_test_respects_epsilon():
    eps, runs = 1.0, 20_000
    n = 10
    D = np.zeros((n, 1), dtype=int)  # the worst case: all failures vs one success
    D_prime = D.copy()
    D_prime[0] = 1
    model = DPBetaBernoulli(epsilon=eps, mechanism="ops", truncation=0.2)
    s = [model.set_params(random_state=i).fit(D).posterior_sample_[0] for i in range(runs)]
    s_p = [model.set_params(random_state=runs + i).fit(D_prime).posterior_sample_[0] for i in range(runs)]
    assert epsilon_lower_bound(s, s_p) <= eps


# --- API ---------------------------------------------------------------------------------------


def test_reproducible_with_random_state():
    X = _data(d=4)
    a = DPBetaBernoulli(random_state=7).fit(X)
    b = DPBetaBernoulli(random_state=7).fit(X)
    np.testing.assert_array_equal(a.noisy_counts_, b.noisy_counts_)
    np.testing.assert_array_equal(a.sample_posterior(5), b.sample_posterior(5))
    c = DPBetaBernoulli(random_state=8).fit(X)
    assert not np.array_equal(a.noisy_counts_, c.noisy_counts_)
    o1 = DPBetaBernoulli(mechanism="ops", random_state=3).fit(X).posterior_sample_
    o2 = DPBetaBernoulli(mechanism="ops", random_state=3).fit(X).posterior_sample_
    np.testing.assert_array_equal(o1, o2)


def test_score_sample_and_posterior_mean():
    X = _data(n=5000, d=3, p=0.3)
    model = DPBetaBernoulli(epsilon=2.0, random_state=0).fit(X)
    p = model.posterior_mean()
    assert np.allclose(p, 0.3, atol=0.03)
    expected = np.mean(X @ np.log(p) + (1 - X) @ np.log1p(-p))
    assert model.score(X) == pytest.approx(expected)
    synthetic = model.sample(2000)
    assert synthetic.shape == (2000, 3) and set(np.unique(synthetic)) <= {0, 1}
    assert np.allclose(synthetic.mean(0), 0.3, atol=0.05)


def test_one_d_input_is_refused_like_every_estimator():
    # A 1-D X is refused by its shape, before the hold, as by every skdp
    # estimator (issue 29); one feature is a column.
    budget = BudgetAccountant(epsilon=5.0)
    with pytest.raises(ValueError, match="got 1D array"):
        DPBetaBernoulli(random_state=0, accountant=budget).fit(np.array([0, 1, 1, 0, 1]))
    assert budget.history == []
    model = DPBetaBernoulli(random_state=0).fit(np.array([[0], [1], [1], [0], [1]]))
    assert model.n_features_in_ == 1
    assert model.score_samples(np.array([[1], [0]])).shape == (2,)


def test_fit_input_helper_reads_a_one_d_x_as_the_estimator_does():
    # validate_fit_input(ensure_2d=False) in memory: one column, n_features_in_ = 1, the
    # reading of a column; DPBetaBernoulli's own validation now refuses a 1-D X.
    x = np.array([0, 1, 1, 0, 1])
    data = validate_fit_input(helper := DPBetaBernoulli(), x, ensure_2d=False)
    assert data.X.shape == (5, 1) and (data.n_samples, data.n_features) == (5, 1)
    assert helper.n_features_in_ == 1 and not data.chunked
    np.testing.assert_array_equal(data.X, DPBetaBernoulli()._validate_X(x.reshape(-1, 1), reset=True))
    with pytest.raises(ValueError, match="2D"):
        DPBetaBernoulli()._validate_X(x, reset=True)
    with pytest.raises(ValueError, match="2D"):
        validate_fit_input(DPBetaBernoulli(), x)


@pytest.mark.parametrize(
    "X,match",
    [
        (np.array([[0.0, 0.5], [1.0, 0.0]]), "binary"),
        (np.array([[0.0, np.nan], [1.0, 0.0]]), "NaN"),
        (np.array([[0.0, np.inf], [1.0, 0.0]]), "infinity"),
        (np.zeros((0, 2)), "0 sample"),
        (np.array([["a", "b"]]), "could not convert|dtype"),
    ],
)
def test_bad_input(X, match):
    with pytest.raises(ValueError, match=match):
        DPBetaBernoulli().fit(X)


@pytest.mark.parametrize(
    "params,match",
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": np.inf}, "epsilon"),
        ({"epsilon": np.nan}, "epsilon"),
        ({"delta": 1.0}, "delta"),
        ({"delta": -0.1}, "delta"),
        ({"prior": (1.0, -1.0)}, "prior"),
        ({"truncation": 0.5}, "truncation"),
        ({"mechanism": "gauss"}, "mechanism"),
        ({"accountant": 3.0}, "accountant"),
    ],
)
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        DPBetaBernoulli(**params).fit(_data(n=10, d=1))


def test_fit_does_not_touch_hyperparameters():
    est = DPBetaBernoulli(prior=[1, 1], epsilon=0.3, random_state=0)
    before = clone(est).get_params()
    est.fit(_data(d=2))
    assert est.get_params() == before


def test_feature_mismatch_at_score():
    model = DPBetaBernoulli(random_state=0).fit(_data(d=3))
    with pytest.raises(ValueError, match="3 features"):
        model.score(_data(d=2))


def _same_fit(a, b):
    np.testing.assert_array_equal(a.noisy_counts_, b.noisy_counts_)
    assert a.privacy_spent_ == b.privacy_spent_
    assert [type(e) for e in a.privacy_ledger_.events] == [type(e) for e in b.privacy_ledger_.events]


def test_out_of_core_fit_equals_in_memory_fit(tmp_path):
    X = np.random.default_rng(0).binomial(1, 0.3, size=(1000, 3)).astype(float)
    path = tmp_path / "x.npy"
    np.save(path, X)
    ref = DPBetaBernoulli(random_state=0).fit(X)
    memmap = DPBetaBernoulli(random_state=0).fit(np.load(path, mmap_mode="r"))
    chunks = DPBetaBernoulli(random_state=0).fit(lambda: (X[i : i + 128] for i in range(0, 1000, 128)))
    for model in (memmap, chunks):
        _same_fit(model, ref)  # noise added once to the global counts, whatever the chunking
        assert model.n_features_in_ == 3


def test_out_of_core_fit_refuses_non_binary_chunks():
    X = np.zeros((10, 2))
    X[7, 1] = 0.5
    with pytest.raises(ValueError, match="binary"):
        DPBetaBernoulli(random_state=0).fit(lambda: iter([X[:5], X[5:]]))


def test_dask_fit_equals_in_memory_fit():
    da = pytest.importorskip("dask.array")
    X = np.random.default_rng(1).binomial(1, 0.6, size=(500, 4)).astype(float)
    _same_fit(
        DPBetaBernoulli(random_state=3).fit(da.from_array(X, chunks=(64, 4))),
        DPBetaBernoulli(random_state=3).fit(X),
    )


# --- seeds and generators (issue 18) -----------------------------------------------------------

_RANDOM_TYPES = (np.random.Generator, np.random.BitGenerator, np.random.RandomState, np.random.SeedSequence)
_BIT_GENERATORS = {"MT19937", "PCG64", "PCG64DXSM", "Philox", "SFC64"}


class _RecordingUnpickler(pickle.Unpickler):
    """Unpickler listing every global the pickle refers to (classes, constructors)."""

    def __init__(self, data):
        super().__init__(io.BytesIO(data))
        self.globals = []

    def find_class(self, module, name):
        self.globals.append(f"{module}.{name}")
        return super().find_class(module, name)


def _randomness_in_pickle(model):
    """(unpickled model, every generator, seed sequence or bit-generator state found in it)."""
    unpickler = _RecordingUnpickler(pickle.dumps(model))
    restored = unpickler.load()
    found = [name for name in unpickler.globals if name.startswith("numpy.random")]
    seen, stack = set(), [restored]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, _RANDOM_TYPES):
            found.append(type(item).__name__)
        if isinstance(item, dict):
            if "bit_generator" in item:  # Generator.bit_generator.state
                found.append(f"state dict {sorted(item)}")
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            if isinstance(item, tuple) and item and isinstance(item[0], str) and item[0] in _BIT_GENERATORS:
                found.append("RandomState.get_state() tuple")  # legacy state
            stack.extend(item)
        elif isinstance(item, np.ndarray) and item.dtype == object:
            stack.extend(item.ravel())
        elif hasattr(item, "__dict__") and not isinstance(item, type):
            stack.append(vars(item))
    return restored, found


def _random_states():
    return {
        "None": None,
        "int": 3,
        "RandomState": np.random.RandomState(3),
        "Generator": np.random.default_rng(3),
    }


@pytest.mark.parametrize("kind", ["None", "int", "RandomState", "Generator"])
@pytest.mark.parametrize("mechanism", ["laplace", "ops"])
def test_a_pickled_model_carries_no_generator(mechanism, kind):
    random_state = _random_states()[kind]
    model = DPBetaBernoulli(mechanism=mechanism, random_state=random_state).fit(_data(n=200, d=3))
    model.sample(5)  # later draws leave nothing behind either
    if mechanism == "laplace":
        model.sample_posterior(2)
    restored, found = _randomness_in_pickle(model)
    assert found == []
    assert restored.random_state == (3 if kind == "int" else None)
    assert set(vars(restored)) - set(restored.get_params()) <= DPBetaBernoulli._release_surface()
    np.testing.assert_array_equal(restored.posterior_sample_, model.posterior_sample_)


@pytest.mark.parametrize("count_release", ["one", "paper"])
def test_the_pickle_check_sees_a_stored_generator(count_release):
    # The check above can fail: the model as it was before issue 18 (it kept
    # its fit's generator) is caught, and the generator found in its pickle
    # steps back to the Laplace draws and gives the exact counts, for either
    # count release.
    X, _ = _cases._binary_neighbours()
    old = _audit_broken._KeepsItsGenerator(epsilon=1.0, count_release=count_release).fit(X)
    assert "Generator" in _randomness_in_pickle(old)[1]
    for seed in range(20):
        old = _audit_broken._KeepsItsGenerator(
            epsilon=1.0, count_release=count_release, random_state=seed
        ).fit(X)
        np.testing.assert_array_equal(_cases._replayed_counts(old, n_records=20), [[13, 7]])
        new = DPBetaBernoulli(epsilon=1.0, count_release=count_release, random_state=seed).fit(X)
        assert _cases._replayed_counts(new, n_records=20) is None


def test_generator_random_state_is_accepted_and_reproduces():
    X = _data(n=200, d=3)
    a = DPBetaBernoulli(random_state=np.random.default_rng(5)).fit(X)
    b = DPBetaBernoulli(random_state=np.random.default_rng(5)).fit(X)
    np.testing.assert_array_equal(a.noisy_counts_, b.noisy_counts_)
    # The user's generator is drawn from further after the fit (scikit-learn's convention).
    np.testing.assert_array_equal(a.sample_posterior(3), b.sample_posterior(3))


def test_int_seed_later_draws_are_reproducible_and_not_the_fit_stream():
    X, seed = _data(n=300, d=2), 11
    a = DPBetaBernoulli(random_state=seed).fit(X)
    b = DPBetaBernoulli(random_state=seed).fit(X)
    first, second = a.sample_posterior(4), a.sample_posterior(4)
    np.testing.assert_array_equal(first, b.sample_posterior(4))
    np.testing.assert_array_equal(second, b.sample_posterior(4))
    assert not np.array_equal(first, second)  # the k-th call has its own stream
    # The documented construction: call k draws from SeedSequence(seed, spawn_key=(tag, k)).
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(AFTER_FIT_SPAWN_TAG, 0)))
    np.testing.assert_array_equal(first, rng.beta(a.posterior_alpha_, a.posterior_beta_, size=(4, 2)))
    # A refit starts the calls again.
    np.testing.assert_array_equal(a.fit(X).sample_posterior(4), first)
    # None of the first later streams overlaps the fit's noise stream default_rng(seed).
    fit_stream = np.random.default_rng(seed).bit_generator.random_raw(100_000)
    for k in range(3):
        later = generator_after_fit(seed, k).bit_generator.random_raw(2)
        assert not np.isin(later, fit_stream).any()


def test_int_seed_later_ops_draws_are_reproducible():
    X = _data(n=300, d=2)
    a = DPBetaBernoulli(mechanism="ops", random_state=4).fit(X)
    b = DPBetaBernoulli(mechanism="ops", random_state=4).fit(X)
    np.testing.assert_array_equal(a.sample_posterior(3), b.sample_posterior(3))
    np.testing.assert_array_equal(a.sample(10), b.sample(10))


def test_no_seed_later_draws_use_fresh_entropy():
    model = DPBetaBernoulli(random_state=None).fit(_data(n=300, d=2))
    assert not np.array_equal(model.sample_posterior(5), model.sample_posterior(5))


# --- audit cases of issue 18 (fast versions; python -m skdp.audit runs them with more fits) ----


def _case(name):
    return next(c for c in _cases.CASES + _audit_broken.CASES if c.name == name)


@pytest.mark.parametrize(
    "name",
    [
        "DPBetaBernoulli: noise replayed from the pickle (laplace, eps=1)",
        "DPBetaBernoulli: OPS refusal seen (eps=2, a0=0.4, prior 0.5)",
    ],
)
def test_audit_real_estimator_resists_the_issue_18_attacks(name):
    case = _case(name)
    result = _cases.run_case(case, case.test_runs)
    assert 0.0 <= result.epsilon_lower_bound <= result.claimed_epsilon
    assert result.verdict == "consistent"


@pytest.mark.parametrize(
    "name",
    [
        "BROKEN DPBetaBernoulli: keeps its fit's generator",
        "BROKEN DPBetaBernoulli(ops): improper check reads the counts",
    ],
)
def test_audit_refutes_the_issue_18_broken_variants(name):
    # Both variants separate the neighbours perfectly: with 100 of the 200
    # runs counted, Clopper-Pearson at alpha = 0.05 bounds epsilon below by
    # about log(100 / 3) = 3.5 > the claim.
    case = _case(name)
    result = _cases.run_case(case, case.test_runs)
    assert result.epsilon_lower_bound > result.claimed_epsilon
    assert result.verdict == "VIOLATION"


def test_audit_patches_are_undone():
    with _audit_broken._keeps_its_generator():
        assert _audit_broken.DPBetaBernoulli is _audit_broken._KeepsItsGenerator
    with _audit_broken._improper_check_on_the_counts():
        pass
    assert _audit_broken.DPBetaBernoulli is DPBetaBernoulli
    assert "fit" in vars(DPBetaBernoulli) and DPBetaBernoulli._draw_ops is _audit_broken._ORIGINAL_DRAW_OPS
