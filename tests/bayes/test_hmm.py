"""DPNaiveBayesHMM: the count noise, the OPS accounting, the sampler and the API."""

import itertools
import math
import pickle
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone
from sklearn.metrics import adjusted_rand_score

from skdp import BudgetAccountant
from skdp.audit import epsilon_lower_bound
from skdp.bayes import _naive_bayes_hmm as hmm_module
from skdp.bayes._beta_bernoulli import ops_log_likelihood_sensitivity
from skdp.bayes._conjugate import dirichlet_log_likelihood_sensitivity, sample_truncated_dirichlet
from skdp.bayes._gibbs import (
    posterior_marginals,
    sample_states,
    state_category_counts,
    transition_counts,
    viterbi,
)
from skdp.bayes._naive_bayes_hmm import DPNaiveBayesHMM
from skdp.bayes._sequences import build_layout, cell_category_counts
from skdp.exceptions import PrivacyLeakWarning
from skdp.privacy import ExponentialMechanism, LaplaceEvent, LaplaceMechanism, PureDPEvent

N_CATEGORIES = (2, 3, 4)


def _hmm_data(n_seq=6, n_steps=12, n_records=40, sep=0.8, seed=0):
    """Records from a well-separated 2-state HMM with three categorical features."""
    rng = np.random.default_rng(seed)
    trans = np.array([[0.8, 0.2], [0.2, 0.8]])
    z = np.zeros((n_seq, n_steps), dtype=int)
    z[:, 0] = rng.integers(0, 2, n_seq)
    for t in range(1, n_steps):
        z[:, t] = (rng.random(n_seq) < trans[z[:, t - 1], 1]).astype(int)
    per_record = np.repeat(z.reshape(-1), n_records)
    columns = []
    for k in N_CATEGORIES:
        # State 0 favours category 0, state 1 the last category.
        theta = np.full((2, k), (1 - sep) / (k - 1))
        theta[0, 0] = theta[1, -1] = sep
        u = rng.random(per_record.size)
        columns.append((np.cumsum(theta[per_record], axis=1) < u[:, None]).sum(axis=1))
    X = np.column_stack(columns)
    seq = np.repeat(np.arange(n_seq), n_steps * n_records)
    ts = np.tile(np.repeat(np.arange(n_steps), n_records), n_seq)
    return X, seq, ts, z.reshape(-1)


CATS = [list(range(k)) for k in N_CATEGORIES]


def _model(**params):
    params = {"categories": CATS, "n_iter": 30, "burn_in": 15, "random_state": 0, **params}
    return DPNaiveBayesHMM(**params)


# --- pure functions: cells, counts ---------------------------------------------------------


def test_layout_groups_records_into_sorted_cells():
    seq = np.array(["b", "a", "b", "a", "a"])
    ts = np.array([5, 2, 1, 2, 9])
    layout = build_layout(seq, ts, 5)
    assert layout.sequence_labels.tolist() == ["a", "a", "b", "b"]
    assert layout.timestep_labels.tolist() == [2, 9, 1, 5]
    assert layout.cell_of_record.tolist() == [3, 0, 2, 0, 1]
    assert layout.lengths.tolist() == [2, 2]
    np.testing.assert_array_equal(layout.grid, [[0, 1], [2, 3]])


def test_layout_without_timesteps_uses_row_order_per_sequence():
    layout = build_layout(np.array([1, 0, 1, 1]), None, 4)
    np.testing.assert_array_equal(layout.grid, [[0, -1, -1], [1, 2, 3]])
    assert layout.cell_of_record.tolist() == [1, 0, 2, 3]


def test_cell_counts_are_the_sufficient_statistics():
    codes = np.array([[0, 2], [1, 2], [1, 0], [-1, 1]])
    counts = cell_category_counts(codes, np.array([0, 0, 1, 1]), 2, [2, 3])
    np.testing.assert_array_equal(counts[0], [[1, 1, 0], [0, 0, 2]])
    np.testing.assert_array_equal(counts[1], [[0, 1, 0], [1, 1, 0]])  # -1 is not counted


# --- pure functions: HMM recursions against brute-force enumeration ------------------------


def _tiny_hmm(seed=0, k=3, length=4):
    rng = np.random.default_rng(seed)
    log_emission = rng.normal(size=(length, k)) * 2
    log_start = np.log(rng.dirichlet(np.ones(k)))
    log_trans = np.log(rng.dirichlet(np.ones(k), size=k))
    return log_emission, log_start, log_trans


def _path_log_joint(path, log_emission, log_start, log_trans):
    lp = log_start[path[0]] + log_emission[0, path[0]]
    for t in range(1, len(path)):
        lp += log_trans[path[t - 1], path[t]] + log_emission[t, path[t]]
    return lp


def _enumerate(log_emission, log_start, log_trans):
    length, k = log_emission.shape
    paths = list(itertools.product(range(k), repeat=length))
    lj = np.array([_path_log_joint(p, log_emission, log_start, log_trans) for p in paths])
    return paths, lj


def test_forward_backward_and_viterbi_match_enumeration():
    log_emission, log_start, log_trans = _tiny_hmm()
    paths, lj = _enumerate(log_emission, log_start, log_trans)
    # Two sequences of different lengths share the same padded grid.
    grid = np.array([[0, 1, 2, 3], [4, 5, -1, -1]])
    emissions = np.vstack([log_emission, log_emission[:2]])
    proba, loglik = posterior_marginals(emissions, log_start, log_trans, grid)
    np.testing.assert_allclose(loglik[0], np.logaddexp.reduce(lj), rtol=1e-10)
    w = np.exp(lj - lj.max())
    w /= w.sum()
    expected = np.array([[w[[p[t] == s for p in paths]].sum() for s in range(3)] for t in range(4)])
    np.testing.assert_allclose(proba[:4], expected, atol=1e-10)
    short_paths, short_lj = _enumerate(log_emission[:2], log_start, log_trans)
    np.testing.assert_allclose(loglik[1], np.logaddexp.reduce(short_lj), rtol=1e-10)
    best = viterbi(emissions, log_start, log_trans, grid)
    assert tuple(best[:4]) == paths[int(np.argmax(lj))]
    assert tuple(best[4:]) == short_paths[int(np.argmax(short_lj))]


def test_ffbs_draws_paths_from_the_exact_posterior():
    log_emission, log_start, log_trans = _tiny_hmm(seed=1, k=2, length=3)
    paths, lj = _enumerate(log_emission, log_start, log_trans)
    p = np.exp(lj - np.logaddexp.reduce(lj))
    n_rep = 4000
    grid = np.arange(3 * n_rep).reshape(n_rep, 3)
    states = sample_states(
        np.tile(log_emission, (n_rep, 1)), log_start, log_trans, grid, np.random.default_rng(0)
    )
    observed = np.bincount([paths.index(tuple(s)) for s in states.reshape(n_rep, 3)], minlength=len(paths))
    assert stats.chisquare(observed, p * n_rep).pvalue > 1e-3


def test_transition_and_state_counts():
    grid = np.array([[0, 1, 2], [3, 4, -1]])
    states = np.array([0, 1, 1, 1, 0])
    start, trans = transition_counts(states, grid, 2)
    np.testing.assert_array_equal(start, [1, 1])
    np.testing.assert_array_equal(trans, [[0, 1], [1, 1]])
    counts = np.arange(5 * 2 * 2, dtype=float).reshape(5, 2, 2)
    per_state = state_category_counts(states, counts, 2)
    np.testing.assert_array_equal(per_state[0], counts[0] + counts[4])
    np.testing.assert_array_equal(per_state[1], counts[1:4].sum(axis=0))


# --- truncated Dirichlet --------------------------------------------------------------------


def test_dirichlet_sensitivity_generalises_eq15():
    a0 = 0.05
    assert dirichlet_log_likelihood_sensitivity([2, 2, 2], [a0] * 3) == pytest.approx(
        ops_log_likelihood_sensitivity(a0, 3)
    )
    # K_d = 4: theta_j in [a0, 1 - 3 a0].
    assert dirichlet_log_likelihood_sensitivity([4], [a0]) == pytest.approx(math.log((1 - 3 * a0) / a0))
    assert dirichlet_log_likelihood_sensitivity([1], [0.5]) == 0.0


# Shapes where the truncation binds: the later coordinates are often below a0.
@pytest.mark.parametrize("shapes", [(5.0, 0.5, 0.5), (2.0, 0.6, 0.6, 0.6), (0.7, 2.0, 5.0)])
def test_truncated_dirichlet_matches_rejection_from_the_dirichlet(shapes):
    shapes = np.array(shapes)
    a0, n = 0.1, 5_000
    rng = np.random.default_rng(0)
    mask = np.ones(shapes.size, bool)
    draws = sample_truncated_dirichlet(np.tile(shapes, (n, 1)), mask, a0, rng)
    assert draws.min() >= a0 - 1e-12
    np.testing.assert_allclose(draws.sum(axis=1), 1.0)
    reference = rng.dirichlet(shapes, size=30 * n)
    reference = reference[(reference >= a0).all(axis=1)][:n]
    assert reference.shape[0] == n
    for j in range(shapes.size):
        # Two-sample KS per coordinate: the uncorrected sequential construction fails this.
        assert stats.ks_2samp(draws[:, j], reference[:, j]).pvalue > 1e-3


def test_uncorrected_sequential_construction_would_be_detected():
    # Without the acceptance step the first coordinate follows a plain
    # truncated Beta: show that the reference test separates the two laws, so
    # the test above has power against that mistake.
    shapes, a0, n = np.array([5.0, 0.5, 0.5]), 0.1, 8_000
    rng = np.random.default_rng(1)
    from skdp.bayes._conjugate import sample_truncated_beta

    naive_first = sample_truncated_beta(shapes[0], shapes[1:].sum(), a0, 1 - 2 * a0, rng, size=n)
    reference = rng.dirichlet(shapes, size=30 * n)
    reference = reference[(reference >= a0).all(axis=1)][:n]
    assert stats.ks_2samp(naive_first, reference[:, 0]).pvalue < 1e-3


def test_truncated_dirichlet_pressed_against_the_truncation():
    shapes = np.array([[1.0, 1.0, 1e5]])
    draws = sample_truncated_dirichlet(
        np.repeat(shapes, 200, axis=0), np.ones(3, bool), 1e-3, np.random.default_rng(0)
    )
    assert draws[:, :2].min() >= 1e-3
    assert np.all(draws[:, :2] < 1e-3 + 1e-3)  # within a few 1/shape of the bound


# --- the Laplace mechanism on the counts ----------------------------------------------------


class _Spy:
    """Counts the releases of the mechanisms built by the estimator module."""

    def __init__(self, monkeypatch):
        self.laplace, self.exponential = [], []
        spy = self

        class SpyLaplace(LaplaceMechanism):
            def release(self, value, rng, accountant):
                spy.laplace.append((self.sensitivity, self.scale, np.shape(value)))
                return super().release(value, rng, accountant)

        class SpyExponential(ExponentialMechanism):
            def sample(self, sampler, rng, accountant):
                spy.exponential.append((self.epsilon, self.sensitivity))
                return super().sample(sampler, rng, accountant)

        monkeypatch.setattr(hmm_module, "LaplaceMechanism", SpyLaplace)
        monkeypatch.setattr(hmm_module, "ExponentialMechanism", SpyExponential)


@pytest.mark.parametrize("n_iter", [5, 40])
def test_counts_are_privatised_exactly_once_per_fit(monkeypatch, n_iter):
    spy = _Spy(monkeypatch)
    X, seq, ts, _ = _hmm_data()
    eps, d = 0.5, X.shape[1]
    model = _model(epsilon=eps, n_iter=n_iter, burn_in=n_iter // 2).fit(X, sequence_ids=seq, timesteps=ts)
    # One release per feature, whatever the number of Gibbs iterations.
    assert len(spy.laplace) == d and not spy.exponential
    n_cells = 6 * 12
    assert [shape for _, _, shape in spy.laplace] == [(n_cells, k) for k in N_CATEGORIES]
    for sensitivity, scale, _ in spy.laplace:
        assert sensitivity == 2.0
        assert scale == pytest.approx(2.0 * d / eps)
    events = model.privacy_ledger_.events
    assert sum(e.count for e in events) == d
    assert all(isinstance(e, LaplaceEvent) and e.noise_multiplier == pytest.approx(d / eps) for e in events)
    assert model.privacy_spent_ == pytest.approx((eps, 0.0))


def test_count_noise_has_the_claimed_scale():
    # Every category of every cell is observed 500 times, so the projection
    # never clips and the released counts minus the true ones are pure noise.
    n_cells, d, k, eps = 50, 2, 4, 1.0
    codes = np.tile(np.repeat(np.arange(k), 500), n_cells)
    X = np.column_stack([codes] * d)
    ts = np.repeat(np.arange(n_cells), 500 * k)
    model = DPNaiveBayesHMM(
        2, epsilon=eps, categories=[list(range(k))] * d, n_iter=1, burn_in=0, random_state=0
    )
    noise = (model.fit(X, timesteps=ts).noisy_counts_ - 500.0).reshape(-1)
    scale = 2.0 * d / eps  # L1 sensitivity 2 per feature, epsilon split over d features
    n = noise.size
    # Laplace(b): mean |Y| = b with std b / sqrt(n) for the mean of n draws.
    assert abs(np.mean(np.abs(noise)) - scale) < 4 * scale / math.sqrt(n)
    assert stats.kstest(noise, stats.laplace(scale=scale).cdf).pvalue > 1e-3
    assert stats.kstest(noise, stats.laplace(scale=scale / 2).cdf).pvalue < 1e-3


def test_laplace_with_rdp_composition_meets_the_target():
    X, seq, ts, _ = _hmm_data(n_seq=3, n_steps=5)
    model = _model(epsilon=1.0, delta=1e-6, composition="rdp").fit(X, sequence_ids=seq, timesteps=ts)
    assert model.privacy_spent_.epsilon <= 1.0 + 1e-9
    assert model.privacy_spent_.epsilon > 0.99


def _move_one_record(n=30):
    # Two cells of one sequence, one binary feature: the record of D in
    # cell 0 is in cell 1 in D' (replace-one, the record changes cell).
    X = np.zeros((n, 1), dtype=int)
    ts = np.repeat([0, 1], n // 2)
    ts_prime = ts.copy()
    ts_prime[0] = 1
    return X, ts, ts_prime


def _count_statistic(model):
    return model.noisy_counts_[0, 0, 0] - model.noisy_counts_[1, 0, 0]


@pytest.mark.slow
def test_laplace_distinguishing_test_respects_epsilon():
    eps, runs = 1.0, 4_000
    X, ts, ts_prime = _move_one_record()
    model = DPNaiveBayesHMM(2, epsilon=eps, categories=[[0, 1]], n_iter=1, burn_in=0)
    s = [_count_statistic(model.set_params(random_state=i).fit(X, timesteps=ts)) for i in range(runs)]
    s_p = [
        _count_statistic(model.set_params(random_state=runs + i).fit(X, timesteps=ts_prime))
        for i in range(runs)
    ]
    lower = epsilon_lower_bound(s, s_p)
    assert lower <= eps
    assert lower > 0.2 * eps  # the audit has power


@pytest.mark.slow
def test_distinguishing_test_catches_sensitivity_one(monkeypatch):
    # Calibrating for L1 sensitivity 1 (forgetting that a record may move
    # between cells) halves the noise: the same audit must refute it.
    eps, runs = 1.0, 4_000
    monkeypatch.setattr(hmm_module, "COUNT_L1_SENSITIVITY", 1.0)
    X, ts, ts_prime = _move_one_record()
    model = DPNaiveBayesHMM(2, epsilon=eps, categories=[[0, 1]], n_iter=1, burn_in=0)
    s = [_count_statistic(model.set_params(random_state=i).fit(X, timesteps=ts)) for i in range(runs)]
    s_p = [
        _count_statistic(model.set_params(random_state=runs + i).fit(X, timesteps=ts_prime))
        for i in range(runs)
    ]
    assert epsilon_lower_bound(s, s_p) > eps


# --- OPS ------------------------------------------------------------------------------------


def test_ops_worst_case_accounts_every_gibbs_update(monkeypatch):
    spy = _Spy(monkeypatch)
    X, seq, ts, _ = _hmm_data(n_seq=3, n_steps=6)
    eps, n_iter = 2.0, 10
    model = _model(mechanism="ops", epsilon=eps, n_iter=n_iter, burn_in=5).fit(
        X, sequence_ids=seq, timesteps=ts
    )
    a0 = 1 / (100 * np.array(N_CATEGORIES))
    delta_u = sum(math.log((1 - (k - 1) * a) / a) for k, a in zip(N_CATEGORIES, a0, strict=True))
    # Two data-dependent releases per iteration (states, emissions): epsilon^(Gibbs) = 2 n_iter eps_u.
    assert len(spy.exponential) == 2 * n_iter and not spy.laplace
    eps_u = eps / (2 * n_iter)
    assert all(e == pytest.approx(eps_u) and s == pytest.approx(delta_u) for e, s in spy.exponential)
    assert model.temperature_ == pytest.approx(2 * delta_u / eps_u)
    events = model.privacy_ledger_.events
    assert sum(e.count for e in events) == 2 * n_iter
    assert all(isinstance(e, PureDPEvent) for e in events)
    assert model.privacy_spent_ == pytest.approx((eps, 0.0))
    assert hmm_module.ops_gibbs_epsilon(eps_u, n_iter) == pytest.approx(eps)


def test_ops_worst_case_with_zcdp_composition_gets_a_larger_share(monkeypatch):
    spy = _Spy(monkeypatch)
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=3, n_records=5)
    eps, delta, n_iter = 2.0, 1e-5, 200
    model = _model(mechanism="ops", epsilon=eps, delta=delta, composition="zcdp", n_iter=n_iter, burn_in=100)
    model.fit(X, sequence_ids=seq, timesteps=ts)
    eps_u = spy.exponential[0][0]
    # Independent closed form: 400 eps_u-DP releases are rho = 400 eps_u^2 / 2 zCDP
    # (Bun & Steinke 2016, Prop. 1.4), and rho + 2 sqrt(rho log(1/delta)) = eps
    # gives sqrt(rho) as the positive root of x^2 + 2 sqrt(log(1/delta)) x - eps.
    b = 2 * math.sqrt(math.log(1 / delta))
    rho = ((-b + math.sqrt(b * b + 4 * eps)) / 2) ** 2
    assert eps_u == pytest.approx(math.sqrt(2 * rho / (2 * n_iter)), rel=1e-4)
    assert eps_u > 3 * eps / (2 * n_iter)  # four times basic composition's share here
    assert len(spy.exponential) == 2 * n_iter
    assert model.privacy_spent_.epsilon == pytest.approx(eps, rel=1e-4)


def test_naive_bayes_releases_corpus_wide_counts(monkeypatch):
    spy = _Spy(monkeypatch)
    X, seq, ts, _ = _hmm_data(n_seq=3, n_steps=6)
    model = _model(n_components=1, epsilon=1.0).fit(X, sequence_ids=seq, timesteps=ts)
    assert [shape for _, _, shape in spy.laplace] == [(1, k) for k in N_CATEGORIES]
    assert model.noisy_counts_.shape == (1, 3, 4)
    assert model.states_.shape == (18,) and np.all(model.states_ == 0)
    # OPS: the one-state "state update" reads no data, so only the emission updates are released.
    ops = _model(n_components=1, mechanism="ops", n_iter=8, burn_in=4).fit(X, sequence_ids=seq, timesteps=ts)
    assert len(spy.exponential) == 8
    assert ops.privacy_spent_ == pytest.approx((1.0, 0.0))


def test_ops_converged_accounts_one_release_and_warns(monkeypatch):
    spy = _Spy(monkeypatch)
    X, seq, ts, _ = _hmm_data(n_seq=3, n_steps=6)
    with pytest.warns(PrivacyLeakWarning, match="converged"):
        model = _model(mechanism="ops", ops_accounting="converged", epsilon=1.0).fit(
            X, sequence_ids=seq, timesteps=ts
        )
    assert len(spy.exponential) == 1
    assert sum(e.count for e in model.privacy_ledger_.events) == 1
    delta_u = dirichlet_log_likelihood_sensitivity(N_CATEGORIES, 1 / (100 * np.array(N_CATEGORIES)))
    assert model.temperature_ == pytest.approx(2 * delta_u)
    assert model.privacy_spent_ == pytest.approx((1.0, 0.0))


def test_ops_parameters_respect_the_truncation():
    X, seq, ts, _ = _hmm_data(n_seq=3, n_steps=6)
    model = _model(mechanism="ops", truncation=0.05, ops_accounting="converged", epsilon=5.0)
    with pytest.warns(PrivacyLeakWarning):
        model.fit(X, sequence_ids=seq, timesteps=ts)
    for probs in model.emissionprob_:
        assert probs.min() >= 0.05 - 1e-12
    np.testing.assert_allclose(model.truncation_, 0.05)


def test_ops_bad_truncation_and_improper_prior():
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=3, n_records=5)
    with pytest.raises(ValueError, match="truncation"):
        _model(mechanism="ops", truncation=0.3).fit(X, sequence_ids=seq, timesteps=ts)
    with pytest.raises(ValueError, match="improper"):
        _model(mechanism="ops", ops_accounting="converged", epsilon=1e4, alpha=0.1).fit(
            X, sequence_ids=seq, timesteps=ts
        )


# --- the sampler ----------------------------------------------------------------------------


def test_gibbs_recovers_a_well_separated_two_state_model_without_noise():
    X, seq, ts, z = _hmm_data(n_seq=10, n_steps=20, seed=3)
    model = _model(mechanism="none").fit(X, sequence_ids=seq, timesteps=ts)
    assert adjusted_rand_score(z, model.states_) == 1.0
    # Relabel so that state 0 favours category 0 of the first feature.
    order = np.argsort(-model.emissionprob_[0][:, 0])
    for probs in model.emissionprob_:
        theta = probs[order]
        # Tolerance: ~ 240 * 40 / 2 records per state, so the std of a frequency is < 0.01.
        assert theta[0, 0] == pytest.approx(0.8, abs=0.04)
        assert theta[1, -1] == pytest.approx(0.8, abs=0.04)
    np.testing.assert_allclose(model.transmat_.sum(axis=1), 1.0)
    assert model.privacy_spent_ == (math.inf, 0.0)
    assert np.all(np.diag(model.transmat_) > 0.6)


def test_laplace_recovers_the_states_with_enough_records():
    X, seq, ts, z = _hmm_data(n_seq=10, n_steps=20, n_records=60, seed=4)
    model = _model(epsilon=1.0).fit(X, sequence_ids=seq, timesteps=ts)
    assert adjusted_rand_score(z, model.states_) > 0.95


def test_predict_decodes_new_sequences():
    X, seq, ts, z = _hmm_data(n_seq=8, n_steps=15, seed=5)
    model = _model(mechanism="none").fit(X, sequence_ids=seq, timesteps=ts)
    X2, seq2, ts2, z2 = _hmm_data(n_seq=4, n_steps=10, seed=6)
    labels = model.predict(X2, sequence_ids=seq2, timesteps=ts2)
    assert labels.shape == (X2.shape[0],)
    per_cell = labels[::40]
    assert adjusted_rand_score(z2, per_cell) == 1.0
    proba = model.predict_proba(X2, sequence_ids=seq2, timesteps=ts2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.array_equal(np.argmax(proba, axis=1), labels)


def test_score_is_the_forward_log_likelihood_per_timestep():
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=3, n_records=4)
    model = _model(mechanism="none").fit(X, sequence_ids=seq, timesteps=ts)
    # Brute force over the 2^3 paths of each sequence.
    log_theta = [np.log(p) for p in model.emissionprob_]
    total = 0.0
    for r in range(2):
        rows = seq == r
        emis = np.array(
            [
                [sum(log_theta[d][s, X[rows & (ts == t), d]].sum() for d in range(3)) for s in range(2)]
                for t in range(3)
            ]
        )
        _, lj = _enumerate(emis, np.log(model.startprob_), np.log(model.transmat_))
        total += np.logaddexp.reduce(lj)
    assert model.score(X, sequence_ids=seq, timesteps=ts) == pytest.approx(total / 6, rel=1e-10)


def test_naive_bayes_case_is_one_state():
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=4)
    model = _model(n_components=1, mechanism="none").fit(X, sequence_ids=seq, timesteps=ts)
    assert model.transmat_.shape == (1, 1)
    freq = np.bincount(X[:, 0], minlength=2) / X.shape[0]
    np.testing.assert_allclose(model.emissionprob_[0][0], freq, atol=0.02)
    assert np.all(model.predict(X, sequence_ids=seq, timesteps=ts) == 0)


def test_sample_synthetic_records():
    X, seq, ts, _ = _hmm_data()
    model = _model().fit(X, sequence_ids=seq, timesteps=ts)
    Xs, seq_s, ts_s, states = model.sample(n_sequences=3, n_timesteps=4, n_records=5, random_state=0)
    assert Xs.shape == (60, 3) and seq_s.shape == ts_s.shape == states.shape == (60,)
    for d, k in enumerate(N_CATEGORIES):
        assert set(np.unique(Xs[:, d])) <= set(range(k))
    # All records of a cell share its state.
    assert np.all(states.reshape(12, 5) == states.reshape(12, 5)[:, :1])


# --- API ------------------------------------------------------------------------------------


def test_reproducible_with_random_state():
    X, seq, ts, _ = _hmm_data(n_seq=3, n_steps=5)
    for mechanism in ("laplace", "ops"):
        a = _model(mechanism=mechanism, random_state=3).fit(X, sequence_ids=seq, timesteps=ts)
        b = _model(mechanism=mechanism, random_state=3).fit(X, sequence_ids=seq, timesteps=ts)
        np.testing.assert_array_equal(a.transmat_, b.transmat_)
        np.testing.assert_array_equal(a.states_, b.states_)
        c = _model(mechanism=mechanism, random_state=4).fit(X, sequence_ids=seq, timesteps=ts)
        assert not np.array_equal(a.transmat_, c.transmat_)


def test_string_categories_and_auto_categories_warn():
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=4)
    labels = np.array(["lo", "mid", "hi", "top"], dtype=object)
    Xs = labels[X]
    with pytest.warns(PrivacyLeakWarning, match="categories"):
        model = DPNaiveBayesHMM(n_iter=4, burn_in=2, categories="nonprivate", random_state=0).fit(
            Xs, sequence_ids=seq, timesteps=ts
        )
    assert [list(c) for c in model.categories_] == [sorted(labels[:k]) for k in N_CATEGORIES]
    Xs_new, *_ = model.sample(n_sequences=1, n_timesteps=2, n_records=3)
    assert set(Xs_new.reshape(-1)) <= set(labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        _model().fit(X, sequence_ids=seq, timesteps=ts)  # declared categories: no warning


def test_undeclared_categories_refuse_a_private_fit_before_anything_is_charged():
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=4)
    budget = BudgetAccountant(epsilon=5.0)
    for mechanism in ("laplace", "ops"):
        model = DPNaiveBayesHMM(n_iter=4, burn_in=2, mechanism=mechanism, accountant=budget)
        with pytest.raises(ValueError, match=r"categories must be declared for a private fit: pass each"):
            model.fit(X, sequence_ids=seq, timesteps=ts)
    assert budget.history == []
    # Not private: nothing to protect, the values are read off the data without a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        model = DPNaiveBayesHMM(n_iter=4, burn_in=2, mechanism="none", random_state=0)
        model.fit(X, sequence_ids=seq, timesteps=ts)
    assert [len(c) for c in model.categories_] == [len(np.unique(X[:, d])) for d in range(X.shape[1])]


def test_unknown_categories_at_predict_time():
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=4)
    X_new = X.copy()
    X_new[0, 0] = 7
    model = _model().fit(X, sequence_ids=seq, timesteps=ts)
    with pytest.raises(ValueError, match="unknown categor"):
        model.predict(X_new, sequence_ids=seq, timesteps=ts)
    tolerant = _model(handle_unknown="ignore").fit(X, sequence_ids=seq, timesteps=ts)
    # The unknown value is left out of the likelihood: same as dropping that entry's feature.
    assert np.isfinite(tolerant.score(X_new, sequence_ids=seq, timesteps=ts))


SECRET = "secret-category-7391"


@pytest.mark.parametrize("chunked", [False, True], ids=["in-memory", "chunked"])
def test_unknown_category_at_fit_is_refused_without_quoting_it(chunked):
    """The message names the parameter, never the private value (nor its feature)."""
    from skdp._chunks import as_chunked

    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=4)
    X = X.astype(object)
    X[17, 1] = SECRET
    acc = BudgetAccountant(epsilon=10.0)
    model = _model(epsilon=1.0, accountant=acc)
    with pytest.raises(ValueError, match="categories") as info:
        model.fit(as_chunked(X, chunk_size=50) if chunked else X, sequence_ids=seq, timesteps=ts)
    message = str(info.value)
    assert SECRET not in message and "7391" not in message
    assert "feature 1" not in message and "categories[1]" not in message
    # Refused after the hold (the data was read), which is closed charged in
    # full, as docs/privacy.md says.
    assert acc.spent.epsilon == pytest.approx(1.0) and len(acc.history) == 1 and not acc.reservations

    numeric = _hmm_data(n_seq=2, n_steps=4)[0]
    numeric[3, 2] = 987654
    with pytest.raises(ValueError, match="categories") as info:
        _model().fit(numeric, sequence_ids=seq, timesteps=ts)
    assert "987654" not in str(info.value)


def test_unknown_category_at_predict_time_is_not_quoted():
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=4)
    model = _model().fit(X, sequence_ids=seq, timesteps=ts)
    X_new = X.astype(object)
    X_new[0, 2] = SECRET
    with pytest.raises(ValueError, match="handle_unknown") as info:
        model.score(X_new, sequence_ids=seq, timesteps=ts)
    assert SECRET not in str(info.value)


def test_ops_plan_errors_charge_nothing_when_categories_are_declared():
    """K_d is declared: a bad truncation or prior is refused before the reservation and the read."""
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=3, n_records=5)
    acc = BudgetAccountant(epsilon=10.0)
    reads = []

    def factory():
        reads.append(None)
        return iter([X])

    with pytest.raises(ValueError, match="truncation"):
        _model(mechanism="ops", truncation=0.3, accountant=acc).fit(factory, sequence_ids=seq, timesteps=ts)
    with pytest.raises(ValueError, match="improper"):
        _model(mechanism="ops", ops_accounting="converged", epsilon=1e4, alpha=0.1, accountant=acc).fit(
            factory, sequence_ids=seq, timesteps=ts
        )
    assert acc.spent.epsilon == 0.0 and not acc.history and not reads


@pytest.mark.parametrize(
    "params",
    [{}, {"n_components": 1}, {"mechanism": "ops"}, {"mechanism": "ops", "ops_accounting": "converged"}],
    ids=["laplace", "naive-bayes", "ops", "ops-converged"],
)
def test_fitted_state_is_the_declared_release_surface(params):
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        model = _model(**params).fit(X, sequence_ids=seq, timesteps=ts)
    restored = pickle.loads(pickle.dumps(model))
    for m in (model, restored):
        fitted = set(vars(m)) - set(m.get_params()) - {"_sklearn_version"}
        assert fitted <= DPNaiveBayesHMM._release_surface(), fitted - DPNaiveBayesHMM._release_surface()
    # The per-cell arrays follow the public cell layout (8 cells), not the records.
    assert model.states_.shape == model.cell_sequence_ids_.shape == model.cell_timesteps_.shape == (8,)


def test_dataframe_with_column_names():
    pd = pytest.importorskip("pandas")
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=4)
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "region": seq, "month": ts})
    model = _model().fit(frame, sequence_ids="region", timesteps="month")
    assert list(model.feature_names_in_) == ["a", "b", "c"]
    ref = _model().fit(X, sequence_ids=seq, timesteps=ts)
    np.testing.assert_array_equal(model.states_, ref.states_)


def test_budget_accountant_is_charged():
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=4)
    acc = BudgetAccountant(epsilon=1.5)
    _model(epsilon=1.0, accountant=acc).fit(X, sequence_ids=seq, timesteps=ts)
    assert acc.spent.epsilon == pytest.approx(1.0)
    with pytest.raises(ValueError):
        _model(epsilon=1.0, accountant=acc).fit(X, sequence_ids=seq, timesteps=ts)
    with pytest.raises(ValueError, match="not private"):
        _model(mechanism="none", accountant=BudgetAccountant()).fit(X, sequence_ids=seq, timesteps=ts)


def test_non_private_refit_drops_the_ledger_and_reads_no_data_when_refused(monkeypatch):
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=4)
    model = _model().fit(X, sequence_ids=seq, timesteps=ts)
    assert model.privacy_ledger_.events
    # The template's non-private switch: no reservation, no ledger, (inf, 0).
    model.set_params(mechanism="none").fit(X, sequence_ids=seq, timesteps=ts)
    assert model.privacy_spent_ == (math.inf, 0.0) and not hasattr(model, "privacy_ledger_")
    # An accountant with mechanism="none" is refused before the data is read.
    read = []
    monkeypatch.setattr(DPNaiveBayesHMM, "_encode", lambda *a, **k: read.append(1))
    with pytest.raises(ValueError, match="not private"):
        _model(mechanism="none", accountant=BudgetAccountant()).fit(X, sequence_ids=seq, timesteps=ts)
    assert read == []


def test_fit_does_not_touch_hyperparameters_and_pickles():
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=4)
    model = _model()
    before = clone(model).get_params()
    model.fit(X, sequence_ids=seq, timesteps=ts)
    assert model.get_params() == before
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(
        restored.predict(X, sequence_ids=seq, timesteps=ts), model.predict(X, sequence_ids=seq, timesteps=ts)
    )


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda X, s, t: (np.where(X == 0, np.nan, X), s, t), "NaN"),
        (lambda X, s, t: (X, s[:-1], t), "sequence_ids"),
        (lambda X, s, t: (X, s, np.where(t == 0, np.inf, t)), "timesteps"),
        (lambda X, s, t: (X[:0], s[:0], t[:0]), "sample"),
    ],
)
def test_bad_input(change, match):
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=4)
    with pytest.raises(ValueError, match=match):
        X_bad, seq_bad, ts_bad = change(X.astype(float), seq, ts.astype(float))
        _model().fit(X_bad, sequence_ids=seq_bad, timesteps=ts_bad)


def test_bad_parameters():
    X, seq, ts, _ = _hmm_data(n_seq=2, n_steps=4)
    with pytest.raises(ValueError, match="burn_in"):
        _model(n_iter=10, burn_in=10).fit(X, sequence_ids=seq, timesteps=ts)
    with pytest.raises(ValueError, match="mechanism"):
        _model(mechanism="gauss").fit(X, sequence_ids=seq, timesteps=ts)
    with pytest.raises(TypeError, match="column names"):
        _model().fit(X, sequence_ids="region")
    with pytest.raises(ValueError, match="features"):
        _model().fit(X, sequence_ids=seq, timesteps=ts).predict(X[:, :2], sequence_ids=seq, timesteps=ts)


# --- scikit-learn composition ---------------------------------------------------------------


@pytest.fixture
def routing():
    import sklearn

    with sklearn.config_context(enable_metadata_routing=True):
        yield


def test_pipeline_routes_sequence_metadata(routing):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    X, seq, ts, z = _hmm_data(n_seq=6, n_steps=10, seed=8)
    hmm = _model(mechanism="none")
    for method in ("fit", "score", "predict"):
        getattr(hmm, f"set_{method}_request")(sequence_ids=True, timesteps=True)
    pipe = make_pipeline(FunctionTransformer(), hmm).fit(X, sequence_ids=seq, timesteps=ts)
    labels = pipe.predict(X, sequence_ids=seq, timesteps=ts)
    assert adjusted_rand_score(z, labels[::40]) == 1.0
    # (Pipeline.score itself forwards sample_weight=None under routing, which
    # an estimator without sample weights cannot accept; GridSearchCV below
    # scores through the routed score method.)


def test_grid_search_over_sequences(routing):
    from sklearn.model_selection import GridSearchCV, GroupKFold

    X, seq, ts, _ = _hmm_data(n_seq=6, n_steps=8, seed=9)
    hmm = _model(mechanism="none").set_fit_request(sequence_ids=True, timesteps=True)
    hmm.set_score_request(sequence_ids=True, timesteps=True)
    search = GridSearchCV(hmm, {"n_components": [1, 2]}, cv=GroupKFold(3))
    search.fit(X, sequence_ids=seq, timesteps=ts, groups=seq)
    # The data have two well-separated states: the held-out likelihood must say so.
    assert search.best_params_ == {"n_components": 2}
