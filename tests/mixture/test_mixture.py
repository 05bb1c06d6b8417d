"""DPGaussianMixture: moments math, sensitivities, noise, accounting and sklearn API."""

import math
import warnings

import numpy as np
import pytest
from conftest import gaussian_blobs
from scipy import optimize, stats
from scipy.special import logsumexp
from sklearn.mixture import GaussianMixture
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdp.exceptions import PrivacyLeakWarning
from skdp.mixture import DPGaussianMixture as _DPGaussianMixture
from skdp.mixture import _moments as mom
from skdp.mixture._moments import centre_optimal_count_share, noise_weights
from skdp.privacy import (
    BudgetAccountant,
    GaussianEvent,
    GaussianMechanism,
    LaplaceEvent,
    LaplaceMechanism,
    compose,
)
from skdp.privacy.mechanisms.additive import _AdditiveMechanism
from skdp.privacy.mechanisms.matrix import _SymmetricMatrixMixin


def DPGaussianMixture(*args, **kwargs):  # noqa: N802
    """The estimator with Park et al.'s random start unless a test names ``init_params``.

    Most tests here check the EM plan's releases one by one; the histogram
    start (the default in 1-2 dimensions) adds its own, tested below.
    """
    kwargs.setdefault("init_params", "random")
    return _DPGaussianMixture(*args, **kwargs)


def _blobs(n_per=2000, seed=0, scale=0.1):
    return gaussian_blobs(seed, [[-0.5, -0.3], [0.4, 0.4], [0.2, -0.5]], n_per, scale)


def _unit_ball(rng, n, d):
    v = rng.normal(size=(n, d))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v * rng.random((n, 1)) ** (1 / d)


def _gamma(rng, n, k):
    g = rng.random((n, k)) ** 3
    return g / g.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------------------
# Sensitivities: never exceeded by random neighbours, attained by an extreme pair
# (so a halved sensitivity would be violated).
# ---------------------------------------------------------------------------
def test_weights_sensitivity_bound_and_tight():
    rng = np.random.default_rng(0)
    k = 3
    g, g2 = _gamma(rng, 5000, k), _gamma(rng, 5000, k)
    assert np.abs(g - g2).sum(axis=1).max() <= mom.weights_sensitivity(1) + 1e-12
    assert np.linalg.norm(g - g2, axis=1).max() <= mom.weights_sensitivity(2) + 1e-12
    # All mass moved from one component to another attains both bounds.
    e = np.eye(k)
    assert np.abs(e[0] - e[1]).sum() == pytest.approx(mom.weights_sensitivity(1))
    assert np.linalg.norm(e[0] - e[1]) == pytest.approx(mom.weights_sensitivity(2))


@pytest.mark.parametrize("d", [1, 2, 5])
def test_mean_sensitivity_bound_and_tight(d):
    """Per component and jointly over K components (stacked sums)."""
    rng = np.random.default_rng(1)
    n, k = 4000, 3
    x, x2 = _unit_ball(rng, n, d), _unit_ball(rng, n, d)
    g, g2 = _gamma(rng, n, k), _gamma(rng, n, k)
    diff = g[:, :, None] * x[:, None, :] - g2[:, :, None] * x2[:, None, :]  # (n, k, d)
    for joint in (False, True):
        per = diff.reshape(n, -1) if joint else diff[:, 0, :]
        assert np.abs(per).sum(axis=1).max() <= mom.mean_sensitivity(d, 1, joint) + 1e-12
        assert np.linalg.norm(per, axis=1).max() <= mom.mean_sensitivity(d, 2, joint) + 1e-12
    # x = u, x' = -u in the same component attains both (u = (1..1)/sqrt(d) for L1).
    u = np.ones(d) / math.sqrt(d)
    assert np.abs(2 * u).sum() == pytest.approx(mom.mean_sensitivity(d, 1))
    assert np.linalg.norm(2 * u) == pytest.approx(mom.mean_sensitivity(d, 2))


def _outer(v):
    return np.einsum("ni,nj->nij", v, v)


@pytest.mark.parametrize("d", [1, 2, 4])
@pytest.mark.parametrize("k", [1, 3])
def test_second_moment_sensitivity_bound_and_tight(d, k):
    rng = np.random.default_rng(2)
    n = 3000
    iu = np.triu_indices(d)
    x, x2 = _unit_ball(rng, n, d), _unit_ball(rng, n, d)
    g, g2 = _gamma(rng, n, k), _gamma(rng, n, k)
    # (n, k, d, d) changes of every component's S2.
    diffs = g[:, :, None, None] * _outer(x)[:, None] - g2[:, :, None, None] * _outer(x2)[:, None]
    upper = diffs[:, :, iu[0], iu[1]]
    traces = np.einsum("nkii->nk", diffs)
    for joint in (False, True):
        up = upper.reshape(n, -1) if joint else upper[:, 0]
        tr = traces if joint else traces[:, :1]

        def sens(ct, norm, joint=joint):
            return mom.second_moment_sensitivity(d, ct, norm, joint=joint, n_components=k)

        assert np.linalg.norm(up, axis=1).max() <= sens("full", 2) + 1e-12
        assert np.abs(up).sum(axis=1).max() <= sens("full", 1) + 1e-12
        assert np.linalg.norm(tr, axis=1).max() <= sens("spherical", 2) + 1e-12
        assert np.abs(tr).sum(axis=1).max() <= sens("spherical", 1) + 1e-12
    # Extreme pairs attain the bounds.
    e = np.eye(d)
    single = mom.second_moment_sensitivity(d, "full", 2)
    if d > 1:  # e_1 vs e_2 in one component
        assert np.linalg.norm((np.outer(e[0], e[0]) - np.outer(e[1], e[1]))[iu]) == pytest.approx(single)
    else:  # x = 1 vs x' = 0
        assert single == 1.0
    assert mom.second_moment_sensitivity(d, "spherical", 2) == 1.0  # ||x||^2 = 1 vs 0
    if k > 1:  # ||x|| = 1 entirely in component 1 vs ||x'|| = 1 entirely in component 2
        joint_tr = np.linalg.norm([1.0, -1.0] + [0.0] * (k - 2))
        assert mom.second_moment_sensitivity(
            d, "spherical", 2, joint=True, n_components=k
        ) == pytest.approx(joint_tr)
        assert mom.second_moment_sensitivity(d, "spherical", 1, joint=True, n_components=k) == 2.0
    u = np.ones(d) / math.sqrt(d)
    # One record's L1 norm of the upper triangle of u u^T is (d + 1) / 2; two records: d + 1.
    assert 2 * np.abs(np.outer(u, u)[iu]).sum() == pytest.approx(
        mom.second_moment_sensitivity(d, "full", 1) if d > 1 else 2.0
    )


# ---------------------------------------------------------------------------
# E-step, statistics and M-step maps against direct evaluations
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("cov_type", ["full", "tied", "spherical"])
def test_e_step_matches_sklearn(cov_type):
    X = _blobs(200, seed=3)
    ref = GaussianMixture(3, covariance_type=cov_type, random_state=0, max_iter=3).fit(X)
    log_norm, log_resp = mom.e_step(X, ref.weights_, ref.means_, ref.precisions_cholesky_, cov_type)
    ref_norm, ref_resp = ref._estimate_log_prob_resp(X)
    np.testing.assert_allclose(log_norm, ref_norm, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(log_resp, ref_resp, rtol=1e-10, atol=1e-10)
    prec_chol = mom.compute_precision_cholesky(ref.covariances_, cov_type)
    np.testing.assert_allclose(prec_chol, ref.precisions_cholesky_, rtol=1e-10)


def test_sufficient_statistics_direct():
    rng = np.random.default_rng(4)
    X, g = _unit_ball(rng, 50, 3), _gamma(rng, 50, 2)
    counts, first, second = mom.sufficient_statistics(X, g, "full")
    _, _, trace = mom.sufficient_statistics(X, g, "spherical")
    for k in range(2):
        assert counts[k] == pytest.approx(sum(g[i, k] for i in range(50)))
        np.testing.assert_allclose(first[k], sum(g[i, k] * X[i] for i in range(50)))
        direct = sum(g[i, k] * np.outer(X[i], X[i]) for i in range(50))
        np.testing.assert_allclose(second[k], direct)
        assert trace[k] == pytest.approx(np.trace(direct))


def test_map_formulas_against_supplement():
    """The simplified MAP covariance equals the supplement's Sec. 1 formula evaluated directly."""
    rng = np.random.default_rng(5)
    n, d, k = 40, 3, 2
    X, g = _unit_ball(rng, n, d), _gamma(rng, n, k)
    kappa0, nu0, alpha = 1.0, d + 2.0, 2.0
    s0 = 0.1 * np.eye(d)
    counts, first, second = mom.sufficient_statistics(X, g, "full")
    c = nu0 + d + 2
    mu_map = first / (counts + kappa0)[:, None]
    got = mom.map_covariance(second / (counts + c)[:, None, None], mu_map, counts, kappa0, counts + c, s0)
    for j in range(k):
        nk = g[:, j].sum()
        mu_mle = (g[:, j, None] * X).sum(0) / nk
        sigma_mle = sum(g[i, j] * np.outer(X[i] - mu_mle, X[i] - mu_mle) for i in range(n)) / nk
        direct = (s0 + nk * sigma_mle + kappa0 * nk / (kappa0 + nk) * np.outer(mu_mle, mu_mle)) / (
            nu0 + nk + d + 2
        )
        np.testing.assert_allclose(got[j], direct, rtol=1e-10)
        np.testing.assert_allclose(mu_map[j], nk * mu_mle / (nk + kappa0))
    pi_mle = counts / n
    direct_pi = (n * pi_mle + alpha - 1) / (n + k * alpha - k)
    np.testing.assert_allclose(mom.map_weights(counts, n, alpha), direct_pi)
    np.testing.assert_allclose(
        mom.mle_covariance(second / counts[:, None, None], first / counts[:, None]),
        [
            sum(
                g[i, j] * np.outer(X[i] - first[j] / counts[j], X[i] - first[j] / counts[j]) for i in range(n)
            )
            / counts[j]
            for j in range(k)
        ],
        rtol=1e-10,
    )


@pytest.mark.parametrize("cov_type", ["full", "tied", "spherical"])
def test_expected_complete_log_likelihood_direct(cov_type):
    X = _blobs(100, seed=6)
    ref = GaussianMixture(3, covariance_type=cov_type, random_state=0).fit(X)
    _, log_resp = ref._estimate_log_prob_resp(X)
    g = np.exp(log_resp)
    counts, first, second = mom.sufficient_statistics(X, g, cov_type)
    got = mom.expected_complete_log_likelihood(
        ref.weights_, ref.means_, ref.covariances_, counts, first, second, cov_type
    )
    direct = np.sum(g * ref._estimate_weighted_log_prob(X))
    assert got == pytest.approx(direct, rel=1e-9)
    # A lower bound: Q <= sum_i log p(x_i).
    assert got <= ref.score(X) * X.shape[0] + 1e-9


def test_tied_covariance_against_sklearn_and_direct_map():
    """MLE: scikit-learn's tied M-step.  MAP: the mode of the joint posterior evaluated directly."""
    from sklearn.mixture._gaussian_mixture import _estimate_gaussian_parameters

    rng = np.random.default_rng(15)
    n, d, k = 60, 3, 3
    X, g = _unit_ball(rng, n, d), _gamma(rng, n, k)
    counts, first, second = mom.sufficient_statistics(X, g, "tied")
    np.testing.assert_allclose(second, X.T @ X)
    _, _, ref = _estimate_gaussian_parameters(X, g, 0.0, "tied")
    got = mom.tied_covariance(second, first / counts[:, None], counts, 0.0, float(n), 0.0)
    np.testing.assert_allclose(got, ref, rtol=1e-10)
    kappa0, nu0 = 1.0, d + 2.0
    s0 = 0.1 * np.eye(d)
    mu = first / (counts + kappa0)[:, None]
    scatter = sum(g[i, j] * np.outer(X[i] - mu[j], X[i] - mu[j]) for i in range(n) for j in range(k))
    direct = (s0 + scatter + kappa0 * sum(np.outer(m, m) for m in mu)) / (n + nu0 + d + 1 + k)
    got = mom.tied_covariance(second, mu, counts, kappa0, n + nu0 + d + 1 + k, s0)
    np.testing.assert_allclose(got, direct, rtol=1e-10)
    # K = 1: the per-component MAP formula with c = nu0 + d + 2.
    c1, f1, s1 = mom.sufficient_statistics(X, np.ones((n, 1)), "full")
    mu1 = f1 / (c1 + kappa0)[:, None]
    one = mom.map_covariance(s1 / (c1 + nu0 + d + 2)[:, None, None], mu1, c1, kappa0, c1 + nu0 + d + 2, s0)
    np.testing.assert_allclose(
        mom.tied_covariance(X.T @ X, mu1, c1, kappa0, n + nu0 + d + 2, s0), one[0], rtol=1e-10
    )
    # Sensitivity of the total second moment: one record with gamma = 1, attained at e1 -> e2.
    e1, e2 = np.eye(d)[0], np.eye(d)[1]
    iu = np.triu_indices(d)
    diff = (np.outer(e1, e1) - np.outer(e2, e2))[iu]
    assert np.linalg.norm(diff) == pytest.approx(mom.second_moment_sensitivity(d, "full", 2))


def test_weight_projection_and_clipping_helpers():
    np.testing.assert_allclose(mom.project_weights(np.array([-0.2, 0.6, 1.4])), [0, 0.375, 0.625])
    np.testing.assert_allclose(mom.project_weights(np.array([-1.0, -2.0])), [0.5, 0.5])
    X = np.array([[3.0, 4.0], [0.3, 0.4]])
    np.testing.assert_allclose(mom.clip_to_unit_ball(X, 1.0), [[0.6, 0.8], [0.3, 0.4]])
    np.testing.assert_allclose(mom.clip_to_unit_ball(X, 10.0), X / 10)
    cov = np.array([[[1.0, 2.0], [2.0, 1.0]]])  # eigenvalues -1, 3
    vals = np.linalg.eigvalsh(mom.clip_eigenvalues(cov, 0.01, 1.0)[0])
    np.testing.assert_allclose(vals, [0.01, 1.0])


# ---------------------------------------------------------------------------
# Noise and accounting, observed on the releases an actual fit makes
# ---------------------------------------------------------------------------
class _Recorder:
    """Records (mechanism, exact value, released value) of every release."""

    def __init__(self, monkeypatch):
        self.calls = []
        orig_add, orig_sym = _AdditiveMechanism.release, _SymmetricMatrixMixin.release
        recorder = self

        def add(mech, value, rng, accountant):
            out = orig_add(mech, value, rng, accountant)
            recorder.calls.append((mech, np.asarray(value, dtype=float), out))
            return out

        def sym(mech, value, rng, accountant):
            out = orig_sym(mech, value, rng, accountant)
            recorder.calls.append((mech, np.asarray(value, dtype=float), out))
            return out

        monkeypatch.setattr(_AdditiveMechanism, "release", add)
        monkeypatch.setattr(_SymmetricMatrixMixin, "release", sym)


@pytest.mark.parametrize(
    "cov_type, estimator, mean_mechanism, releases",
    [
        ("full", "map", "laplace", "joint"),
        ("full", "mle", "gaussian", "separate"),
        ("spherical", "map", "gaussian", "joint"),
        ("spherical", "mle", "laplace", "separate"),
        ("full", "map", "laplace", "separate"),
    ],
)
def test_releases_follow_the_plan(monkeypatch, cov_type, estimator, mean_mechanism, releases):
    """Releases per iteration (3 joint, 2K+1 separate), each with scale z * its sensitivity,
    and means noise equal to the paper's z * Delta / D_k at the released N~_k."""
    rec = _Recorder(monkeypatch)
    X = _blobs(300, seed=7) * 3.0
    n, d = X.shape
    k, j = 3, 4
    est = DPGaussianMixture(
        k,
        covariance_type=cov_type,
        estimator=estimator,
        mean_mechanism=mean_mechanism,
        component_releases=releases,
        budget_split="equal",
        max_iter=j,
        data_norm=3.0,
        epsilon=2.0,
        delta=1e-5,
        random_state=0,
    ).fit(X)
    z = est.noise_multiplier_
    per_iter = 3 if releases == "joint" else 2 * k + 1
    assert len(rec.calls) == j * per_iter
    l1 = mean_mechanism == "laplace"
    first_cls = LaplaceMechanism if l1 else GaussianMechanism
    for it in range(j):
        block = rec.calls[it * per_iter : (it + 1) * per_iter]
        w_mech = block[0][0]
        assert isinstance(w_mech, first_cls)
        assert w_mech.sensitivity == (2.0 if l1 else math.sqrt(2))
        mean_calls = block[1:2] if releases == "joint" else block[1 : k + 1]
        second_calls = block[2:] if releases == "joint" else block[k + 1 :]
        for mech, value, _ in mean_calls:
            assert isinstance(mech, first_cls)
            assert mech.sensitivity == (2 * math.sqrt(d) if l1 else 2.0)
            assert value.shape == ((k, d) if releases == "joint" else (d,))
        for mech, value, _ in second_calls:
            assert "Gaussian" in type(mech).__name__
            if cov_type == "spherical":
                expected = math.sqrt(2) if releases == "joint" else 1.0
                assert value.shape == ((k,) if releases == "joint" else ())
            else:
                expected = math.sqrt(2)
                assert value.shape == ((k * d, k * d) if releases == "joint" else (d, d))
            assert mech.sensitivity == pytest.approx(expected)
        for mech, _, _ in block:
            assert mech.scale == pytest.approx(z * mech.sensitivity)
    events = est.privacy_ledger_.events
    assert sum(e.count for e in events) == j * per_iter
    assert all(e.noise_multiplier == pytest.approx(z) for e in events)


def test_noise_scales_statistically(monkeypatch):
    """Empirical noise of each release type matches its claimed scale (a halved noise fails)."""
    rec = _Recorder(monkeypatch)
    X = _blobs(200, seed=8)
    for seed in range(20):
        DPGaussianMixture(
            3, mean_mechanism="laplace", max_iter=5, data_norm=1.0, epsilon=1.0, random_state=seed
        ).fit(X)
    groups = {"LaplaceMechanism": [], "SymmetricMatrixGaussianMechanism": []}
    for mech, value, out in rec.calls:
        groups[type(mech).__name__].append(((out - value) / mech.scale).ravel())
    lap = np.concatenate(groups["LaplaceMechanism"])
    gau = np.concatenate(groups["SymmetricMatrixGaussianMechanism"])
    # Matrices: mirrored noise, so the standardised upper triangle is N(0, 1).
    d = 2
    iu = np.triu_indices(d)
    gau_upper = np.concatenate(
        [
            ((out - value) / mech.scale)[iu]
            for mech, value, out in rec.calls
            if "Matrix" in type(mech).__name__
        ]
    )
    # Laplace(0, 1) has std sqrt(2); std of the sample std ~ sigma * sqrt((kurt - 1) / (4 n)).
    n_l = lap.size
    assert np.std(lap) == pytest.approx(math.sqrt(2), abs=4 * math.sqrt(2) * math.sqrt(5 / (4 * n_l)))
    n_g = gau_upper.size
    assert np.std(gau_upper) == pytest.approx(1.0, abs=4 * math.sqrt(2 / (4 * n_g)))
    assert stats.kstest(lap, "laplace").pvalue > 1e-3
    assert stats.kstest(gau_upper, "norm").pvalue > 1e-3
    # Mirrored: the released noise matrix is symmetric.
    assert all(
        np.allclose(out - value, (out - value).T)
        for mech, value, out in rec.calls
        if np.ndim(value) == 2 and value.shape[0] == value.shape[1] and "Matrix" in type(mech).__name__
    )
    assert gau.size > gau_upper.size


def test_second_moment_noise_has_full_support(monkeypatch):
    """Every released moment can move both ways: the noise of the second moments is indefinite.

    Wishart noise Z Z^T would always be PSD (all eigenvalues >= 0) and Gamma
    noise always positive, so no output below the true statistic could occur:
    that one-sidedness is what breaks the paper's epsilon.
    """
    rec = _Recorder(monkeypatch)
    X = _blobs(100, seed=9)
    for cov_type in ("full", "spherical"):
        DPGaussianMixture(
            2,
            covariance_type=cov_type,
            component_releases="separate",
            max_iter=10,
            data_norm=1.0,
            random_state=1,
        ).fit(X)
    mat = [out - value for mech, value, out in rec.calls if "Matrix" in type(mech).__name__]
    eig = np.array([np.linalg.eigvalsh(m) for m in mat])
    assert np.mean(eig[:, 0] < 0) > 0.5 and np.mean(eig[:, -1] > 0) > 0.5
    scalars = [float(out - value) for mech, value, out in rec.calls if np.ndim(value) == 0]
    assert len(scalars) == 20
    assert 0 < np.mean(np.array(scalars) < 0) < 1
    # Means and weights: two-sided as well.
    vec = np.concatenate([(out - value).ravel() for mech, value, out in rec.calls if np.ndim(value) == 1])
    assert 0.3 < np.mean(vec < 0) < 0.7


def _independent_gaussian_epsilon(z, delta):
    """Exact epsilon of a Gaussian mechanism with multiplier z (Balle & Wang 2018, Thm. 8)."""

    def excess(eps):
        return stats.norm.cdf(0.5 / z - eps * z) - math.exp(eps) * stats.norm.cdf(-0.5 / z - eps * z) - delta

    return optimize.brentq(excess, 0.0, 100.0)


@pytest.mark.parametrize("releases", ["joint", "separate"])
@pytest.mark.parametrize("composition", ["rdp", "zcdp", "advanced"])
@pytest.mark.parametrize("mean_mechanism", ["laplace", "gaussian"])
def test_budget_split_meets_target(composition, mean_mechanism, releases):
    X = _blobs(50, seed=10)
    k, j = 2, 3
    est = DPGaussianMixture(
        k,
        max_iter=j,
        mean_mechanism=mean_mechanism,
        composition=composition,
        component_releases=releases,
        budget_split="equal",
        data_norm=1.0,
        epsilon=0.8,
        delta=1e-6,
        random_state=0,
        reduce_components=False,  # the K-component plan's accounting
    ).fit(X)
    assert est.privacy_spent_.epsilon == pytest.approx(0.8, rel=1e-4)
    assert est.privacy_spent_.epsilon <= 0.8
    n_first, n_second = (2, 1) if releases == "joint" else (k + 1, k)
    z, n_rel = est.noise_multiplier_, j * (n_first + n_second)
    events = est.privacy_ledger_.events
    first = LaplaceEvent if mean_mechanism == "laplace" else GaussianEvent
    types = [type(e) for e in events]
    assert len(events) == n_rel
    assert types.count(first) == (j * n_first if first is LaplaceEvent else n_rel)
    assert types.count(GaussianEvent) == (j * n_second if first is LaplaceEvent else n_rel)
    # Independent closed forms.
    if composition == "zcdp":
        rho = n_rel / (2 * z**2)
        assert rho + 2 * math.sqrt(rho * math.log(1 / 1e-6)) == pytest.approx(0.8, rel=1e-4)
    if composition == "rdp" and mean_mechanism == "gaussian":
        assert _independent_gaussian_epsilon(z / math.sqrt(n_rel), 1e-6) == pytest.approx(0.8, rel=1e-4)


def test_rdp_spends_less_than_zcdp_and_advanced_for_the_same_noise():
    X = _blobs(50, seed=11)
    est = DPGaussianMixture(3, max_iter=10, data_norm=1.0, epsilon=1.0, random_state=0).fit(X)
    events = est.privacy_ledger_.events
    rdp = compose(events, 1e-5, "rdp").epsilon
    zcdp = compose(events, 1e-5, "zcdp").epsilon
    adv = compose(events, 1e-5, "advanced").epsilon
    assert rdp == pytest.approx(1.0, rel=1e-4)
    assert rdp < 0.9 * zcdp and zcdp < adv
    # Calibrated noise is ordered the same way.
    z = {
        c: DPGaussianMixture(3, max_iter=10, data_norm=1.0, composition=c, random_state=0)
        .fit(X)
        .noise_multiplier_
        for c in ("rdp", "zcdp", "advanced")
    }
    assert z["rdp"] < z["zcdp"] < z["advanced"]


def test_pure_dp_with_delta_zero():
    X = _blobs(50, seed=12)
    for cov_type in ("full", "spherical"):
        est = DPGaussianMixture(
            2,
            covariance_type=cov_type,
            max_iter=3,
            data_norm=1.0,
            epsilon=1.0,
            delta=0.0,
            composition="advanced",
            random_state=0,
        ).fit(X)
        assert est.privacy_spent_.delta == 0.0
        assert all(isinstance(e, LaplaceEvent) for e in est.privacy_ledger_.events)
        # Basic composition of 3 iterations x 3 joint Laplace releases at multiplier z
        # (2 when one component is fitted: its count is the public n, not released).
        per_iteration = 3 if est.n_components_fitted_ > 1 else 2
        assert len(est.privacy_ledger_.events) == 3 * per_iteration
        assert 3 * per_iteration / est.noise_multiplier_ == pytest.approx(1.0, rel=1e-4)


def test_budget_accountant_is_charged():
    acc = BudgetAccountant(epsilon=1.5, delta=1e-4)
    X = _blobs(50, seed=13)
    DPGaussianMixture(2, max_iter=2, data_norm=1.0, epsilon=1.0, accountant=acc, random_state=0).fit(X)
    assert acc.spent.epsilon == pytest.approx(1.0, rel=1e-4)
    from skdp.exceptions import BudgetExceededError

    with pytest.raises(BudgetExceededError):
        DPGaussianMixture(2, max_iter=2, data_norm=1.0, epsilon=1.0, accountant=acc, random_state=0).fit(X)


# ---------------------------------------------------------------------------
# Behaviour
# ---------------------------------------------------------------------------
def test_accuracy_close_to_non_private_with_large_n():
    X = _blobs(30000, seed=14)
    Xt = _blobs(2000, seed=15)
    ref = GaussianMixture(3, covariance_type="spherical", random_state=0).fit(X).score(Xt)
    scores = [
        DPGaussianMixture(
            3, covariance_type="spherical", data_norm=1.0, max_iter=5, epsilon=1.0, random_state=s
        )
        .fit(X)
        .score(Xt)
        for s in range(5)
    ]
    assert np.median(scores) > ref - 0.3


def test_original_scale_and_equivariance():
    X = _blobs(300, seed=16)
    a = DPGaussianMixture(3, data_norm=1.0, max_iter=3, random_state=3).fit(X)
    b = DPGaussianMixture(3, data_norm=10.0, max_iter=3, random_state=3).fit(X * 10)
    np.testing.assert_allclose(b.means_, 10 * a.means_, rtol=1e-8)
    # atol: an off-diagonal entry that is zero up to rounding (1e-18 against 0)
    # in one scale; the entries themselves are of order 0.1.
    np.testing.assert_allclose(b.covariances_, 100 * a.covariances_, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(b.weights_, a.weights_, rtol=1e-8)
    assert b.score(X * 10) == pytest.approx(a.score(X) - 2 * math.log(10))
    assert b.lower_bound_ == pytest.approx(a.lower_bound_ - 2 * math.log(10))
    np.testing.assert_allclose(b.precisions_, np.linalg.inv(b.covariances_), rtol=1e-8, atol=1e-12)
    np.testing.assert_array_equal(a.predict(X), b.predict(X * 10))


def test_lower_bound_is_post_processing_and_no_early_stop():
    X = _blobs(3000, seed=17)
    est = DPGaussianMixture(3, data_norm=1.0, max_iter=7, epsilon=1e6, tol=1e-2, random_state=0).fit(X)
    assert est.n_iter_ == 7 and len(est.lower_bounds_) == 7
    # With (almost) no noise Q is a lower bound close to the training log-likelihood.
    assert est.lower_bound_ <= est.score(X) + 1e-3
    assert est.lower_bound_ == pytest.approx(est.score(X), abs=0.05)
    assert est.converged_


def test_non_positive_noisy_counts_are_handled():
    rng = np.random.default_rng(18)
    X = rng.normal(size=(6, 3))
    for estimator in ("mle", "map"):
        for cov_type in ("full", "spherical"):
            est = DPGaussianMixture(
                4,
                estimator=estimator,
                covariance_type=cov_type,
                data_norm=3.0,
                epsilon=0.05,
                max_iter=5,
                random_state=0,
            ).fit(X)
            for attr in ("weights_", "means_", "covariances_", "precisions_cholesky_"):
                assert np.all(np.isfinite(getattr(est, attr)))
            assert est.weights_.sum() == pytest.approx(1.0)
            assert np.all(np.linalg.norm(est.means_, axis=1) <= 3.0 + 1e-9)
            assert np.all(np.isfinite(est.score_samples(X)))


def test_reproducible_with_random_state():
    X = _blobs(100, seed=19)
    a = DPGaussianMixture(3, data_norm=1.0, random_state=5).fit(X)
    b = DPGaussianMixture(3, data_norm=1.0, random_state=5).fit(X)
    c = DPGaussianMixture(3, data_norm=1.0, random_state=6).fit(X)
    np.testing.assert_array_equal(a.means_, b.means_)
    np.testing.assert_array_equal(a.sample(10)[0], b.sample(10)[0])
    assert not np.allclose(a.means_, c.means_)


def test_data_norm_none_warns_and_public_init():
    X = _blobs(100, seed=20)
    with pytest.warns(PrivacyLeakWarning, match="data_norm"):
        # The non-private mode is opt-in (data_norm="nonprivate"); the default is "auto".
        est = DPGaussianMixture(3, data_norm="nonprivate", random_state=0).fit(X)
    assert est.data_norm_ == pytest.approx(np.linalg.norm(X, axis=1).max())
    assert DPGaussianMixture().data_norm == "auto"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = DPGaussianMixture(
            3,
            data_norm=1.0,
            means_init=[[-0.5, -0.3], [0.4, 0.4], [0.2, -0.5]],
            weights_init=[0.2, 0.3, 0.5],
            max_iter=1,
            epsilon=1e6,
            random_state=0,
        ).fit(X)
    np.testing.assert_allclose(est.means_, [[-0.5, -0.3], [0.4, 0.4], [0.2, -0.5]], atol=0.05)


def test_sample_bic_aic_predict():
    X = _blobs(500, seed=21)
    est = DPGaussianMixture(3, data_norm=1.0, epsilon=5.0, random_state=0).fit(X)
    S, y = est.sample(300)
    assert S.shape == (300, 2) and y.shape == (300,) and set(np.unique(y)) <= {0, 1, 2}
    proba = est.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(proba.argmax(axis=1), est.predict(X))
    ll = est.score(X) * X.shape[0]
    assert est.bic(X) == pytest.approx(-2 * ll + (3 * 3 + 3 * 2 + 2) * math.log(X.shape[0]))
    assert est.aic(X) == pytest.approx(-2 * ll + 2 * (3 * 3 + 3 * 2 + 2))
    np.testing.assert_allclose(est.score_samples(X), logsumexp(est._weighted_log_prob(X), axis=1))
    labels = DPGaussianMixture(3, data_norm=1.0, epsilon=5.0, random_state=0).fit_predict(X)
    np.testing.assert_array_equal(labels, est.predict(X))


def test_grid_search_in_pipeline():
    X = _blobs(400, seed=22) * 5 + 3
    pipe = make_pipeline(StandardScaler(), DPGaussianMixture(data_norm=4.0, max_iter=3, random_state=0))
    grid = GridSearchCV(
        pipe, {"dpgaussianmixture__epsilon": [0.5, 5.0], "dpgaussianmixture__n_components": [1, 3]}, cv=3
    ).fit(X)
    assert grid.best_params_["dpgaussianmixture__n_components"] == 3
    assert np.isfinite(grid.best_score_)


@pytest.mark.parametrize(
    "X, params, error, match",
    [
        (np.zeros((2, 2)), {"n_components": 3}, ValueError, "n_samples >= n_components"),
        (np.array([[0.0, np.nan], [1.0, 2.0]]), {}, ValueError, "NaN"),
        (np.array([[0.0, np.inf], [1.0, 2.0]]), {}, ValueError, "infinity"),
        (np.arange(5.0), {}, ValueError, "2D array"),
        (np.zeros((5, 2)), {"n_components": 0}, ValueError, "n_components"),
        (np.zeros((5, 2)), {"covariance_type": "diag"}, ValueError, "covariance_type"),
        (np.zeros((5, 2)), {"mean_mechanism": "gaussian", "delta": 0.0}, ValueError, "delta"),
        (np.zeros((5, 2)), {"means_init": [[0, 0, 0]]}, ValueError, "means_init"),
        (np.zeros((5, 2)), {"weights_init": [0.5, 0.6]}, ValueError, "weights_init"),
        (np.zeros((5, 2)), {"covariance_prior": [[1.0, 2.0], [0.0, 1.0]]}, ValueError, "covariance_prior"),
        (np.zeros((5, 2)), {"epsilon": -1.0}, ValueError, "epsilon"),
        (np.zeros((5, 2)), {"data_norm": 0.0}, ValueError, "data_norm"),
    ],
)
def test_bad_input(X, params, error, match):
    params = {"data_norm": 1.0, **params}
    if "weights_init" in params:
        params["n_components"] = 2
    with pytest.raises(error, match=match):
        DPGaussianMixture(random_state=0, **params).fit(X)


# ---------------------------------------------------------------------------
# Distinguishing test on neighbouring datasets
# ---------------------------------------------------------------------------
def _clopper_pearson(k, n, alpha):
    lo = stats.beta.ppf(alpha / 2, k, n - k + 1) if k > 0 else 0.0
    hi = stats.beta.ppf(1 - alpha / 2, k + 1, n - k) if k < n else 1.0
    return lo, hi


def _empirical_epsilon(D, D2, params, trials):
    """Largest Clopper-Pearson (99%) lower bound on epsilon over thresholds of means_[0, 0]."""
    out_d = np.array([DPGaussianMixture(**params, random_state=s).fit(D).means_[0, 0] for s in range(trials)])
    out_d2 = np.array(
        [DPGaussianMixture(**params, random_state=10**6 + s).fit(D2).means_[0, 0] for s in range(trials)]
    )
    best = 0.0
    for thr in np.quantile(np.r_[out_d, out_d2], np.linspace(0.02, 0.98, 49)):
        p_lo, _ = _clopper_pearson(int(np.sum(out_d > thr)), trials, 0.01)
        _, q_hi = _clopper_pearson(int(np.sum(out_d2 > thr)), trials, 0.01)
        if p_lo > 0:
            best = max(best, math.log(p_lo / q_hi))
    return best


@pytest.mark.slow
def test_neighbouring_datasets_cannot_be_distinguished_beyond_epsilon(monkeypatch):
    """Fit on D and D' (one record moved across the ball) and threshold means_[0, 0].

    With K = 1 the weight is always 1, so ``means_`` is post-processing of the
    mean release alone, which is ``1 / z``-DP (pure, delta = 0): the empirical
    lower bound must stay below ``1 / z`` (here 3, the whole fit 6: one
    component releases no count).  With the
    noise halved behind the ledger's back the same test exceeds it, so it has
    power.
    """
    rng = np.random.default_rng(23)
    base = rng.uniform(-0.3, 0.3, size=(9, 1))
    D = np.vstack([base, [[1.0]]])
    D2 = np.vstack([base, [[-1.0]]])
    params = dict(
        n_components=1,
        covariance_type="spherical",
        data_norm=1.0,
        max_iter=1,
        epsilon=6.0,
        delta=0.0,
        estimator="mle",
        mean_mechanism="laplace",
    )
    z = DPGaussianMixture(**params, random_state=0).fit(D).noise_multiplier_
    # 2 pure releases (means, second moment; one component's count is the public n),
    # basic composition: 2 / z = 6.
    assert z == pytest.approx(1 / 3, rel=1e-4)
    assert _empirical_epsilon(D, D2, params, 1000) <= 1 / z

    monkeypatch.setattr(
        LaplaceMechanism, "_noise", lambda self, rng, shape: rng.laplace(0.0, self.scale / 2, shape)
    )
    assert _empirical_epsilon(D, D2, params, 1000) > 1 / z


def test_noise_weights_spend_the_shares():
    """Each statistic's cost (zCDP rho, or pure epsilon) is its share of the total."""
    releases, shares = (1, 3, 3), (0.2, 0.5, 0.3)
    w = noise_weights(shares, releases, (2, 2, 2))
    rho = [n / (2 * wi**2) for n, wi in zip(releases, w, strict=True)]
    assert np.allclose(np.array(rho) / sum(rho), shares)
    w = noise_weights(shares, releases, (1, 1, 1))
    eps = [n / wi for n, wi in zip(releases, w, strict=True)]
    assert np.allclose(np.array(eps) / sum(eps), shares)
    # Shares equal to the release counts: every release at the common multiplier.
    assert noise_weights(releases, releases, (1, 2, 2)) == pytest.approx((1.0, 1.0, 1.0))
    assert centre_optimal_count_share(2, 2) == pytest.approx(0.5)
    assert centre_optimal_count_share(8, 1) == pytest.approx(0.25)


@pytest.mark.parametrize(
    "split, mean_mechanism, expected",
    [
        ("auto", "gaussian", (0.5, 1.0, 1.0)),  # 1 / sqrt(2 d), d = 2
        ("auto", "laplace", (2 ** (-2 / 3), 1.0, 1.0)),
        ((0.2, 0.5, 0.3), "gaussian", (0.2, 0.5, 0.3)),
    ],
)
def test_budget_split_shares_under_zcdp(split, mean_mechanism, expected):
    """The ledger's per-statistic zCDP costs (Gaussian) or epsilons (Laplace) follow the shares,
    and the total meets the target; a skipped or mis-scaled release breaks both."""
    X = _blobs(60, seed=21)
    j = 3
    est = DPGaussianMixture(
        2,
        max_iter=j,
        mean_mechanism=mean_mechanism,
        composition="zcdp",
        budget_split=split,
        data_norm=1.0,
        epsilon=0.8,
        delta=1e-6,
        # Two components (one would release no count: its count is the public n).
        reduce_components=False,
        random_state=0,
    ).fit(X)
    assert est.privacy_spent_.epsilon == pytest.approx(0.8, rel=1e-4)
    z = est.noise_multipliers_
    if mean_mechanism == "gaussian":
        cost = np.array([j / (2 * z[s] ** 2) for s in ("weights", "means", "second_moments")])
        rho = cost.sum()
        assert rho + 2 * math.sqrt(rho * math.log(1e6)) == pytest.approx(0.8, rel=1e-4)
    else:
        cost = np.array([j / z["weights"], j / z["means"]])
        expected = expected[:2]
    assert cost / cost.sum() == pytest.approx(np.array(expected) / sum(expected), rel=1e-6)
    # Every release used its statistic's multiplier.
    events = est.privacy_ledger_.events
    assert sum(e.count for e in events) == 3 * j
    got = sorted(e.noise_multiplier for e in events)
    want = sorted([z["weights"]] * j + [z["means"]] * j + [z["second_moments"]] * j)
    assert got == pytest.approx(want)


def test_bad_budget_split():
    X = _blobs(40, seed=22)
    for bad in ((1.0, 2.0), (1.0, 0.0, 1.0), (1.0, np.nan, 1.0)):
        with pytest.raises(ValueError, match="budget_split"):
            DPGaussianMixture(2, budget_split=bad, data_norm=1.0).fit(X)


@pytest.mark.parametrize("mean_mechanism, delta", [("gaussian", 1e-5), ("laplace", 0.0)])
def test_tied_releases_second_moment_once(monkeypatch, mean_mechanism, delta):
    """Tied: counts and means every iteration, the total second moment once, at its own
    multiplier; the plan's cost meets the target (a per-iteration release would exceed it)."""
    rec = _Recorder(monkeypatch)
    X = _blobs(300, seed=23) * 2.0
    j, k, d = 4, 3, 2
    est = DPGaussianMixture(
        k,
        covariance_type="tied",
        mean_mechanism=mean_mechanism,
        max_iter=j,
        data_norm=2.0,
        epsilon=1.0,
        delta=delta,
        composition="zcdp" if delta else "advanced",
        random_state=0,
    ).fit(X)
    assert len(rec.calls) == 2 * j + 1
    matrix_calls = [c for c in rec.calls if c[1].ndim == 2 and c[1].shape == (d, d)]
    assert len(matrix_calls) == 1
    mech, value, out = matrix_calls[0]
    Xs = X / 2.0 / np.maximum(np.linalg.norm(X / 2.0, axis=1), 1.0)[:, None]
    np.testing.assert_allclose(value, Xs.T @ Xs)
    z = est.noise_multipliers_
    expected_sens = math.sqrt(2) if delta else d + 1.0
    assert mech.sensitivity == pytest.approx(expected_sens)
    assert mech.scale == pytest.approx(z["second_moments"] * expected_sens)
    assert est.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-4)
    assert sum(e.count for e in est.privacy_ledger_.events) == 2 * j + 1
    if delta:
        rho = j / (2 * z["weights"] ** 2) + j / (2 * z["means"] ** 2) + 1 / (2 * z["second_moments"] ** 2)
        assert rho + 2 * math.sqrt(rho * math.log(1 / delta)) == pytest.approx(1.0, rel=1e-4)
    else:
        assert j / z["weights"] + j / z["means"] + 1 / z["second_moments"] == pytest.approx(1.0, rel=1e-4)
    assert est.covariances_.shape == (d, d)
    assert np.all(np.linalg.eigvalsh(est.covariances_) > 0)
    assert est.precisions_ @ est.covariances_ == pytest.approx(np.eye(d), abs=1e-8)
    assert est.sample(5)[0].shape == (5, d)
    assert est._n_parameters() == 3 + k * d + k - 1


def test_tied_close_to_sklearn_with_large_budget():
    X = _blobs(2000, seed=24)
    ref = GaussianMixture(3, covariance_type="tied", random_state=0).fit(X)
    est = DPGaussianMixture(
        3, covariance_type="tied", estimator="mle", max_iter=10, data_norm=1.0, epsilon=50.0, random_state=0
    ).fit(X)
    assert est.score(X) == pytest.approx(ref.score(X), abs=0.05)


# ---------------------------------------------------------------------------
# mean_mechanism="auto" (the default): Gaussian when delta > 0, Laplace when delta == 0
# ---------------------------------------------------------------------------
def _event_kinds(est):
    """Event class of each entry of the fit's ledger."""
    return [type(e) for e in est.privacy_ledger_.events]


def test_auto_mean_mechanism_resolves_on_delta():
    X = _blobs(80, seed=31)
    common = dict(max_iter=2, data_norm=1.0, epsilon=1.0, random_state=0)
    default = DPGaussianMixture(2, **common).fit(X)
    assert default.mean_mechanism == "auto"  # resolved at fit time, never written back
    assert set(_event_kinds(default)) == {GaussianEvent}
    gauss = DPGaussianMixture(2, mean_mechanism="gaussian", **common).fit(X)
    np.testing.assert_array_equal(default.means_, gauss.means_)
    assert default.noise_multipliers_ == gauss.noise_multipliers_

    pure = DPGaussianMixture(2, delta=0.0, composition="advanced", **common).fit(X)
    assert pure.mean_mechanism == "auto"
    assert set(_event_kinds(pure)) == {LaplaceEvent}
    assert pure.privacy_spent_.delta == 0.0
    lap0 = DPGaussianMixture(2, mean_mechanism="laplace", delta=0.0, composition="advanced", **common).fit(X)
    np.testing.assert_array_equal(pure.means_, lap0.means_)

    # Explicit values behave as before: Laplace counts and means next to
    # Gaussian second moments when delta > 0 ...
    lap = DPGaussianMixture(2, mean_mechanism="laplace", **common).fit(X)
    assert sum(e.count for e in lap.privacy_ledger_.events if isinstance(e, LaplaceEvent)) == 4
    assert sum(e.count for e in lap.privacy_ledger_.events if isinstance(e, GaussianEvent)) == 2
    # ... and an explicit Gaussian request with delta=0 still raises, naming it.
    with pytest.raises(ValueError, match="mean_mechanism"):
        DPGaussianMixture(2, mean_mechanism="gaussian", delta=0.0, **common).fit(X)
    with pytest.raises(ValueError, match="mean_mechanism"):
        DPGaussianMixture(2, mean_mechanism="normal", **common).fit(X)


def test_default_means_noise_is_gaussian_statistically(monkeypatch):
    """At the defaults (delta > 0) the means' sums get Gaussian noise of std z_means * 2 (L2
    sensitivity 2), not Laplace noise of std sqrt(2) z * 2 sqrt(d): here (d = 10) the latter
    is about 4 times larger, and a halved noise would give a ratio of 0.5."""
    rec = _Recorder(monkeypatch)
    d, k = 10, 2
    rng = np.random.default_rng(32)
    X = _unit_ball(rng, 400, d) * 0.5
    fits = [DPGaussianMixture(k, max_iter=3, data_norm=1.0, random_state=s).fit(X) for s in range(40)]
    z_means = fits[0].noise_multipliers_["means"]
    assert all(f.noise_multipliers_["means"] == z_means for f in fits)
    noise = np.concatenate([(out - value).ravel() for mech, value, out in rec.calls if value.shape == (k, d)])
    assert noise.size == 40 * 3 * k * d
    sigma = z_means * 2.0
    # Sample std of n normal draws: relative standard error 1 / sqrt(2 n); 5 of them.
    ratio = np.std(noise) / sigma
    assert ratio == pytest.approx(1.0, abs=5 / math.sqrt(2 * noise.size))
    assert stats.kstest(noise / sigma, "norm").pvalue > 1e-3
    # The Laplace alternative at the same budget is far larger (the reason for the default).
    lap = DPGaussianMixture(k, mean_mechanism="laplace", max_iter=3, data_norm=1.0, random_state=0).fit(X)
    assert math.sqrt(2) * lap.noise_multipliers_["means"] * 2 * math.sqrt(d) > 3 * sigma


# --- data_norm="auto": a private centre and bound (skdp.privacy.centring) ---------


def _auto_mixture_data(shift=10.0, n=4000):
    return gaussian_blobs(0, [-2, 2], n // 2, 0.5, n_features=2) + shift


def _signature(events):
    # A recorded multiplier is scale / sensitivity: the planned one up to the last bit.
    return [
        (type(e), e.count, getattr(e, "epsilon", None), round(getattr(e, "noise_multiplier", 0.0), 12))
        for e in events
    ]


def test_gmm_auto_data_norm_events_and_original_coordinates():
    from skdp.privacy import PureDPEvent
    from skdp.privacy.centring import calibrate_auto_bounds

    X = _auto_mixture_data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        gm = DPGaussianMixture(2, data_norm="auto", max_iter=3, epsilon=3.0, random_state=0).fit(X)
    events = gm.privacy_ledger_.events
    quantile, centre = calibrate_auto_bounds(3.0, 1e-5, 0.1).events()
    single = PureDPEvent(count=1, neighbouring="replace_one", epsilon=quantile.epsilon)
    assert _signature(events[:3]) == _signature([single, centre, single])
    assert len(events) == 3 + 3 * 3
    assert gm.privacy_spent_.epsilon <= 3.0 * (1 + 1e-9)
    np.testing.assert_allclose(gm.centre_, 10.0, atol=0.5)
    assert 2.0 < gm.data_norm_ < 6.0  # ||x - c|| of the centred blobs, not ||x|| ~ 14
    np.testing.assert_allclose(np.sort(gm.means_[:, 0]), [8.0, 12.0], atol=0.2)
    # The uncentred data fit as well as the centred (the private centre absorbs the shift):
    # both near the true model's -2.15 per row (two N(., 0.25 I) halves: -ln(pi / 2) - 1 - ln 2).
    centred = DPGaussianMixture(2, data_norm="auto", max_iter=3, epsilon=3.0, random_state=0).fit(X - 10.0)
    assert centred.score(X - 10.0) > -2.7 and gm.score(X) > -2.7


def test_gmm_auto_plan_is_public_and_chunks_release_the_same():
    from skdp._chunks import as_chunked

    X = _auto_mixture_data(n=2000)
    params = dict(n_components=2, data_norm="auto", max_iter=2, epsilon=1.0, random_state=0)
    gm = DPGaussianMixture(**params).fit(X)
    dry = DPGaussianMixture(**params).fit(np.zeros_like(X))
    assert _signature(gm.privacy_ledger_.events) == _signature(dry.privacy_ledger_.events)
    chunked = DPGaussianMixture(**params).fit(as_chunked(X, chunk_size=500))
    np.testing.assert_allclose(chunked.centre_, gm.centre_, rtol=1e-9)
    assert chunked.data_norm_ == gm.data_norm_
    np.testing.assert_allclose(chunked.means_, gm.means_, rtol=1e-8, atol=1e-8)
    gm.set_params(data_norm=20.0).fit(X)
    assert not hasattr(gm, "centre_")


def test_gmm_auto_clips_an_outlier():
    X = _auto_mixture_data(n=2000)
    far = X.copy()
    far[0] = 1e6
    params = dict(n_components=2, data_norm="auto", max_iter=1, epsilon=8.0, random_state=0)
    a, b = DPGaussianMixture(**params).fit(X), DPGaussianMixture(**params).fit(far)
    assert b.data_norm_ < 10.0
    assert np.linalg.norm(a.centre_ - b.centre_) < 0.1  # unclipped: 1e6 sqrt(2) / 2000 = 707


def _expected_box_share(n, epsilon, d, delta=1e-5, composition="rdp"):
    """The box's share: the smallest that locates a column, else (none does) the smallest of all."""
    from skdp.privacy.quantiles import BOX_SHARES, calibrate_histogram_bounds, can_locate_columns

    for share in BOX_SHARES:
        plan = calibrate_histogram_bounds(epsilon, delta, d, share, composition)
        if can_locate_columns(n, plan.mechanism(), d):
            return share
    return BOX_SHARES[0]


@pytest.mark.parametrize(
    "n, d, epsilon",
    [(150, 2, 1.0), (150, 4, 2.0), (150, 4, 3.0), (1000, 2, 1.0), (3500, 4, 1.0), (20000, 3, 0.3)],
)
def test_gmm_auto_bounds_budget_is_a_public_rule(n, d, epsilon):
    # bounds_budget="auto" (the default): the smallest share at which the norm quantile can be
    # located, else the histogram box; computed here from (n, d, epsilon) through the core alone.
    from skdp.mixture._bounds import bounds_plan
    from skdp.privacy.centring import AutoBounds, calibrate_auto_bounds, can_locate_quantile
    from skdp.privacy.quantiles import BOX_SHARES, HistogramBounds

    gm = DPGaussianMixture(2, epsilon=epsilon)
    assert gm.bounds_budget == "auto" and gm.data_norm == "auto"
    plan = bounds_plan(gm, shape=(n, d))
    located = [
        s
        for s in BOX_SHARES
        if can_locate_quantile(n, calibrate_auto_bounds(epsilon, 1e-5, s).quantile_epsilon)
    ]
    if located:
        assert isinstance(plan, AutoBounds)
        assert _signature(plan.events()) == _signature(
            calibrate_auto_bounds(epsilon, 1e-5, located[0]).events()
        )
    else:
        assert isinstance(plan, HistogramBounds)
        assert plan.share == _expected_box_share(n, epsilon, d)
    # Large n * epsilon keeps the 0.1 share of a declared bounds_budget=0.1, event for event.
    if n * epsilon >= 3500:
        declared = bounds_plan(DPGaussianMixture(2, epsilon=epsilon, bounds_budget=0.1), shape=(n, d))
        assert _signature(plan.events()) == _signature(declared.events())


def test_gmm_small_n_epsilon_falls_back_to_the_private_box():
    from skdp.privacy.quantiles import calibrate_histogram_bounds, scale_noise_weight

    n, d, epsilon = 150, 2, 1.0
    X = _auto_mixture_data(shift=3.0, n=n)
    params = dict(n_components=2, epsilon=epsilon, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        gm = DPGaussianMixture(**params).fit(X)
        dry = DPGaussianMixture(**params).fit(np.zeros_like(X))
    # The events come from the public plan: the box's row-scale and two column histogram
    # releases first, then DP-EM.
    share = _expected_box_share(n, epsilon, d)
    plan = calibrate_histogram_bounds(epsilon, 1e-5, d, share, "rdp", scale=True)
    box = plan.events()
    events = gm.privacy_ledger_.events
    n_box = sum(e.count for e in box)
    assert n_box == 3
    assert [type(e) for e in events[:n_box]] == [type(box[0])] * n_box
    assert sum(e.count for e in events[:n_box]) == n_box
    # The row scale first (its multiplier sqrt(d) / 2 times the columns'), then the columns.
    assert events[0].noise_multiplier == pytest.approx(scale_noise_weight(d) * plan.multiplier, rel=1e-6)
    for e in events[1:n_box]:
        assert e.noise_multiplier == pytest.approx(plan.multiplier, rel=1e-6)
    assert _signature(events) == _signature(dry.privacy_ledger_.events)
    assert gm.privacy_spent_.epsilon <= epsilon * (1 + 1e-9)
    # The bound is the box's half-diagonal: never beyond twice the data's magnitude (the
    # exponential mechanism's unlocated quantile released 1e-6 or 1e5 here).
    assert 0 < gm.data_norm_ <= 2 * np.abs(X).max() * math.sqrt(d)
    assert np.all(np.isfinite(gm.means_)) and np.isfinite(gm.score(X))
    # Chunked rows release the same box (the histograms are summed over chunks).
    from skdp._chunks import as_chunked

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        chunked = DPGaussianMixture(**params).fit(as_chunked(X, chunk_size=40))
    assert chunked.data_norm_ == gm.data_norm_
    np.testing.assert_allclose(chunked.means_, gm.means_, rtol=1e-8, atol=1e-8)
    # A declared share keeps the centre and norm bound (the exponential mechanism).
    from skdp.privacy import PureDPEvent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        declared = DPGaussianMixture(**params, bounds_budget=0.1).fit(X)
    assert isinstance(declared.privacy_ledger_.events[0], PureDPEvent)


# --- init_params="histogram" (the default in 1-2 dimensions): a private start ---------


def _three_blobs(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    centres = np.array([[-0.5, -0.3], [0.4, 0.4], [0.2, -0.5]])
    return centres, centres[rng.integers(3, size=n)] + rng.normal(0, 0.08, size=(n, 2))


def test_histogram_start_events_match_the_plan_and_compose():
    from skdp.privacy.calibration import calibrate_noise_multiplier

    _, X = _three_blobs()
    gm = _DPGaussianMixture(3, covariance_type="spherical", data_norm=1.0, epsilon=1.0, random_state=0).fit(X)
    assert gm.init_params == "auto" and gm.max_iter == "auto" and gm.n_iter_ == 1
    events = gm.privacy_ledger_.events
    # The start's share, calibrated independently of the estimator: 10 % of (epsilon, delta).
    z_init = calibrate_noise_multiplier(
        lambda z: [GaussianEvent(count=1, neighbouring="replace_one", noise_multiplier=z)], 0.1, 1e-6, "pld"
    )
    assert _signature(events[:1]) == _signature(
        [GaussianEvent(count=1, neighbouring="replace_one", noise_multiplier=z_init)]
    )
    assert len(events) == 1 + 3  # the histogram, then one iteration's counts, means, traces
    em = [round(e.noise_multiplier, 12) for e in events[1:]]
    assert em == [round(gm.noise_multipliers_[k], 12) for k in ("weights", "means", "second_moments")]
    assert gm.privacy_spent_.epsilon <= 1.0 * (1 + 1e-9) and gm.privacy_spent_.delta <= 1e-5
    # The EM releases get the rest: cheaper than spending the whole budget on them alone.
    alone = _DPGaussianMixture(
        3, covariance_type="spherical", data_norm=1.0, init_params="random", max_iter=1, random_state=0
    ).fit(X)
    assert gm.noise_multiplier_ > alone.noise_multiplier_


def test_histogram_start_noise_scale(monkeypatch):
    from skdp.mixture._init import INIT_GRID

    rec = _Recorder(monkeypatch)
    _, X = _three_blobs()
    gm = _DPGaussianMixture(3, covariance_type="spherical", data_norm=1.0, random_state=1).fit(X)
    mech, value, out = rec.calls[0]
    # The released vector is the grid count of the rows, computed here independently.
    edges = np.linspace(-1, 1, INIT_GRID + 1)
    exact, _, _ = np.histogram2d(X[:, 0], X[:, 1], bins=[edges, edges])
    np.testing.assert_array_equal(value, exact.ravel())
    z_init = gm.privacy_ledger_.events[0].noise_multiplier
    assert mech.sensitivity == pytest.approx(math.sqrt(2))  # replace-one histogram, L2
    sigma = z_init * math.sqrt(2)
    noise = out - value
    # 256 independent N(0, sigma^2) draws: the variance ratio has sd sqrt(2/256) = 0.09; the
    # bounds are 3.4 sd away, and halving the noise gives a ratio of 0.25.
    ratio = noise.var() / sigma**2
    assert 0.7 < ratio < 1.35
    assert abs(noise.mean()) < 4 * sigma / math.sqrt(noise.size)


@pytest.mark.parametrize("n_features", [2, 4])
def test_histogram_start_plan_is_public_and_seeded(n_features):
    rng = np.random.default_rng(3)
    X = np.tile(_three_blobs(1500)[1], (1, n_features // 2)) / math.sqrt(n_features // 2)
    X = X + 0.01 * rng.normal(size=X.shape)
    params = dict(n_components=3, init_params="histogram", data_norm=1.0, random_state=5)
    gm = _DPGaussianMixture(**params).fit(X)
    dry = _DPGaussianMixture(**params).fit(np.zeros_like(X))
    assert _signature(gm.privacy_ledger_.events) == _signature(dry.privacy_ledger_.events)
    events = gm.privacy_ledger_.events
    n_init = 1 if n_features <= 2 else 2  # the histogram (and, beyond 2-D, the part sums)
    assert len(events) == n_init + 3 and gm.n_iter_ == 1
    assert len({round(e.noise_multiplier, 12) for e in events[:n_init]}) == 1
    again = _DPGaussianMixture(**params).fit(X)
    np.testing.assert_array_equal(gm.means_, again.means_)
    other = _DPGaussianMixture(**{**params, "random_state": 6}).fit(X)
    assert not np.array_equal(gm.means_, other.means_)


def test_histogram_start_finds_the_clusters_in_one_fit():
    centres, X = _three_blobs(6000, seed=2)
    for seed in range(3):
        gm = _DPGaussianMixture(3, covariance_type="spherical", data_norm=1.0, random_state=seed).fit(X)
        got = gm.means_[np.argsort(gm.means_[:, 0])]
        np.testing.assert_allclose(got, centres[np.argsort(centres[:, 0])], atol=0.05)


def test_init_auto_rule_and_budget_check():
    X3 = np.random.default_rng(0).normal(0, 0.2, (300, 3))
    gm = _DPGaussianMixture(2, data_norm=1.0, random_state=0).fit(X3)
    assert gm.n_iter_ == 5 and len(gm.privacy_ledger_.events) == 3 * 5  # d > 2: the random start
    gm = _DPGaussianMixture(2, data_norm=1.0, means_init=np.zeros((2, 3)), random_state=0).fit(X3)
    assert gm.n_iter_ == 5  # a public start: no histogram
    with pytest.raises(ValueError, match="init_budget"):
        _DPGaussianMixture(2, data_norm="auto", init_budget=0.5, bounds_budget=0.5).fit(X3[:, :2])


def test_covariance_eigenvalues_are_floored_at_the_noise_level():
    # 13 columns, 178 rows, epsilon 1 (the moderate-dimension case where
    # clipping at reg_covar alone gave a held-out log-likelihood of about -300
    # per row): no eigenvalue of a released covariance is below the noise
    # std of one entry of the released second moments over the component's
    # public count, in the unit-ball scale.
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(250, 13, centers=3, cluster_std=2.0, random_state=0)
    X = (X - X.min(0)) / (X.max(0) - X.min(0)) - 0.5
    radius = np.sqrt(13) / 2
    gm = DPGaussianMixture(3, data_norm=radius, epsilon=1.0, random_state=0).fit(X[:178])
    vals = np.linalg.eigvalsh(gm.covariances_ / radius**2)
    assert vals.min() > 10 * gm.reg_covar
    # The held-out density stays within a few nats per row per dimension of
    # the uniform density on the declared ball (log(1 / vol) = -7.6 here).
    assert gm.score(X[178:]) > -7.6 - 2 * 13


def test_small_n_epsilon_falls_back_to_fewer_components():
    """Issue 31, rule 2: an a-priori rule from n, d and epsilon, warned; the shapes stay K's."""
    from skdp.mixture._plan import resolution_ratio, resolvable_components

    X = _blobs(50, seed=3)  # 150 rows, 2 columns
    with pytest.warns(UserWarning, match="reduce_components"):
        est = _DPGaussianMixture(3, data_norm=1.0, epsilon=0.5, random_state=0).fit(X)
    assert est.n_components_fitted_ == 1
    assert est.n_iter_ == 1  # one component: EM is exact after one M-step
    assert est.weights_.shape == (3,) and est.means_.shape == (3, 2) and est.covariances_.shape == (3, 2, 2)
    assert est.weights_.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(est.means_, est.means_[[0, 0, 0]])
    assert est.privacy_spent_.epsilon == pytest.approx(0.5, rel=1e-4)
    # The same fit as one component with one iteration, released as copies.
    one = _DPGaussianMixture(1, max_iter=1, data_norm=1.0, epsilon=0.5, random_state=0).fit(X)
    np.testing.assert_allclose(est.score_samples(X), one.score_samples(X))
    # Opt-out keeps every component (and no warning about them).
    kept = _DPGaussianMixture(3, data_norm=1.0, epsilon=0.5, random_state=0, reduce_components=False).fit(X)
    assert kept.n_components_fitted_ == 3
    # Public means are a start the user chose: never reduced.
    public = _DPGaussianMixture(3, means_init=X[:3], data_norm=1.0, epsilon=0.5, random_state=0).fit(X)
    assert public.n_components_fitted_ == 3
    # The rule: monotone in n, a function of public quantities only.
    args = (2, 3, "full", GaussianEvent, True)
    assert resolution_ratio(5.0, 150, *args) > resolution_ratio(5.0, 15000, *args)
    assert resolvable_components(20.0, 150, *args) == 1
    assert resolvable_components(5.0, 150_000, *args) == 3


def test_large_n_epsilon_keeps_every_component():
    X = _blobs(4000, seed=4)
    est = _DPGaussianMixture(3, data_norm=1.0, epsilon=1.0, random_state=0).fit(X)
    assert est.n_components_fitted_ == 3


def test_clip_eigenvalues_averages_the_noise_band_and_keeps_its_trace():
    """Eigenvalues at or below the noise's edge are replaced by their mean (trace and eigenvectors kept)."""
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    vals = np.array([-0.02, 0.01, 0.05, 0.4])
    cov = (q * vals) @ q.T
    out = mom.clip_eigenvalues(cov[np.newaxis], 1e-3, 1.0, band=0.1)[0]
    got = np.linalg.eigvalsh(out)
    inside = vals[:3].mean()
    assert got == pytest.approx(np.sort([inside, inside, inside, 0.4]), abs=1e-12)
    assert np.trace(out) == pytest.approx(vals.sum(), abs=1e-12)
    # The spike's direction is kept.
    assert out @ q[:, 3] == pytest.approx(0.4 * q[:, 3], abs=1e-12)
    # Without a band: plain clipping at the floor.
    plain = np.linalg.eigvalsh(mom.clip_eigenvalues(cov[np.newaxis], 1e-3, 1.0)[0])
    assert plain == pytest.approx([1e-3, 0.01, 0.05, 0.4], abs=1e-12)


def test_noise_band_is_the_semicircle_edge_of_the_entry_noise():
    from skdp.mixture._m_step import noise_band, noise_floor, noise_level
    from skdp.privacy import GaussianEvent

    args = dict(family=GaussianEvent, covariance_type="full", joint=True, n_components=1)
    den = np.array([100.0])
    level = noise_level(3.0, 5, den, **args)
    assert level == pytest.approx(3.0 * math.sqrt(2.0) / 100.0)
    assert noise_band(3.0, 5, den, reg_covar=1e-3, **args) == pytest.approx(2 * math.sqrt(5) * level)
    assert noise_floor(3.0, 5, den, reg_covar=1e-3, **args) == pytest.approx(level)


def test_noise_dominated_covariance_has_its_small_eigenvalues_averaged(monkeypatch):
    """Eigenvalues inside the noise band (below 2 sqrt(d) times the noise level) come out equal:
    the noise cannot order them; those above it are kept, and with the noise removed (epsilon 1e3)
    all four are the data's.  Without the band the same fit's two smallest differ."""
    import skdp.mixture._m_step as m_step

    rng = np.random.default_rng(3)
    X = rng.normal(size=(2000, 4)) * np.sqrt([0.2, 0.05, 0.04, 0.03])
    low = DPGaussianMixture(1, data_norm=1.5, epsilon=0.7, random_state=0).fit(X)
    vals = np.linalg.eigvalsh(low.covariances_[0])
    assert vals[1] == pytest.approx(vals[0], rel=1e-9)
    assert vals[3] > 2 * vals[0]  # the spike: above the band, kept
    high = DPGaussianMixture(1, data_norm=1.5, epsilon=1e3, random_state=0).fit(X)
    assert np.linalg.eigvalsh(high.covariances_[0]) == pytest.approx([0.03, 0.04, 0.05, 0.2], rel=0.15)
    monkeypatch.setattr(m_step, "noise_band", lambda *args, **kwargs: 0.0)
    plain = DPGaussianMixture(1, data_norm=1.5, epsilon=0.7, random_state=0).fit(X)
    vals = np.linalg.eigvalsh(plain.covariances_[0])
    assert vals[1] > 1.05 * vals[0]


def test_one_component_releases_no_count():
    """One component's count is the public n: two releases per iteration, weight 1, full budget."""
    X = _blobs(80, seed=5)
    est = DPGaussianMixture(1, max_iter=2, data_norm=1.0, epsilon=1.0, random_state=0).fit(X)
    assert len(est.privacy_ledger_.events) == 2 * 2
    assert est.weights_ == pytest.approx([1.0])
    assert math.isinf(est.noise_multipliers_["weights"])
    assert est.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-4)
