"""DPBetaBernoulli: the noise, the temperature, the guarantee and the API."""

import math
import pickle

import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone

from skdp import BudgetAccountant, BudgetExceededError
from skdp.audit import epsilon_lower_bound
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
    model = DPBetaBernoulli(epsilon=eps)
    noise = np.concatenate(
        [model.set_params(random_state=s).fit(X).noisy_counts_ - counts for s in range(1000)]
    ).ravel()  # 20,000 draws; counts near 500 make the projection at 0 inactive
    # L1 sensitivity 2 per feature, budget split over d features: b = 2 d / eps.
    b = 2 * d / eps
    assert np.std(noise) == pytest.approx(math.sqrt(2) * b, rel=0.05)
    assert np.mean(np.abs(noise)) == pytest.approx(b, rel=0.05)


def test_laplace_posterior_is_prior_plus_projected_counts():
    X = np.zeros((3, 2), dtype=int)  # tiny counts: the projection must bite
    model = DPBetaBernoulli(prior=(2.0, 3.0), epsilon=0.1, random_state=0).fit(X)
    assert np.all(model.noisy_counts_ >= 0)
    np.testing.assert_allclose(model.posterior_alpha_, 2.0 + model.noisy_counts_[:, 1])
    np.testing.assert_allclose(model.posterior_beta_, 3.0 + model.noisy_counts_[:, 0])
    assert model.privacy_spent_ == (0.1, 0.0)


def test_every_release_is_accounted():
    model = DPBetaBernoulli(epsilon=0.6, random_state=0).fit(_data(d=3))
    events = model._privacy_ledger.events
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


def test_one_d_input_is_one_feature():
    model = DPBetaBernoulli(random_state=0).fit(np.array([0, 1, 1, 0, 1]))
    assert model.n_features_in_ == 1
    assert model.score_samples(np.array([[1], [0]])).shape == (2,)


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
    assert [type(e) for e in a._privacy_ledger.events] == [type(e) for e in b._privacy_ledger.events]


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
