"""skdp.preprocessing: DPStandardScaler, DPMinMaxScaler and DPPCA.

Noise scales are tested statistically against the mechanism's theoretical
standard deviation, with chi-square (or kurtosis-aware) bounds at a false
alarm rate of 1e-4 per test, so halving the noise fails every one of them.
"""

import math
import pickle
import warnings

import numpy as np
import pytest
from _release_walk import N_ROWS, release_violations
from scipy import stats
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import check_estimator

from skdp import PrivacyLeakWarning
from skdp.preprocessing import DPPCA, DPMinMaxScaler, DPStandardScaler
from skdp.privacy import (
    BudgetAccountant,
    GaussianEvent,
    LaplaceEvent,
    PrivacyLedger,
    PureDPEvent,
    gaussian_noise_multiplier,
)
from skdp.privacy.quantiles import private_quantiles, rank_counts

#: False-alarm rate of each statistical test.
ALPHA = 1e-4


def _instances():
    return [
        DPStandardScaler(bounds=(-3.0, 3.0), random_state=0),
        DPStandardScaler(bounds=(-3.0, 3.0), delta=0.0, with_std=False, random_state=0),
        DPStandardScaler(bounds="auto", random_state=0),
        DPMinMaxScaler(random_state=0),
        DPMinMaxScaler(delta=1e-5, feature_range=(-1, 1), clip=False, random_state=0),
        DPPCA(n_components=1, data_norm=5.0, random_state=0),
        DPPCA(data_norm=5.0, centered=True, random_state=0),
    ]


def _ids():
    return [f"{type(e).__name__}-{i}" for i, e in enumerate(_instances())]


def _fit_quietly(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return est.fit(X)


def _check_variance(samples, sigma):
    """Chi-square test that i.i.d. Gaussian ``samples`` have std ``sigma`` (two-sided, ALPHA)."""
    k = samples.size
    statistic = np.sum(samples**2) / sigma**2  # mean 0 known: k degrees of freedom
    low, high = stats.chi2.ppf([ALPHA / 2, 1 - ALPHA / 2], k)
    assert low <= statistic <= high, (statistic / k, low / k, high / k)


# --- scikit-learn API -------------------------------------------------------------------------------


@pytest.mark.parametrize("est", _instances(), ids=_ids())
def test_sklearn_check_estimator(est):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(est)


@pytest.mark.parametrize("est", _instances(), ids=_ids())
def test_clone_params_and_set_output_pandas(est):
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(np.random.default_rng(0).normal(size=(300, 3)), columns=["a", "b", "c"])
    copy = clone(est).set_params(epsilon=2.0)
    assert copy.get_params()["epsilon"] == 2.0 and est.get_params()["epsilon"] == 1.0
    out = _fit_quietly(copy.set_output(transform="pandas"), X).transform(X)
    assert isinstance(out, pd.DataFrame)
    names = list(copy.get_feature_names_out())
    assert list(out.columns) == names
    if isinstance(est, DPPCA):
        assert names == [f"dppca{i}" for i in range(copy.n_components_)]
    else:
        assert names == ["a", "b", "c"]


def test_pipeline_with_logistic_regression_on_breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, random_state=0, stratify=y)
    # Public bounds: 0 to 1.2 times each feature's largest value (a stand-in for domain knowledge).
    bounds = (0.0, 1.2 * X.max(axis=0))
    pipe = make_pipeline(DPStandardScaler(bounds=bounds, random_state=0), LogisticRegression(max_iter=1000))
    assert pipe.fit(Xtr, ytr).score(Xte, yte) > 0.9
    pipe = make_pipeline(
        DPPCA(n_components=5, data_norm=5000.0, random_state=0), LogisticRegression(max_iter=5000)
    )
    assert pipe.fit(Xtr, ytr).score(Xte, yte) > 0.85


# --- noise scales ----------------------------------------------------------------------------------


def test_standard_scaler_gaussian_noise_scale():
    # Constant data at the centre of the bounds: mean_ = width * noise / n,
    # never clipped (noise std 0.015 against a half-width of 1).
    n, d, fits = 1000, 2, 300
    X = np.zeros((n, d))
    means = np.array([DPStandardScaler(bounds=(-1, 1), random_state=s).fit(X).mean_ for s in range(fits)])
    # 2d statistics of sensitivity 1 each: L2 sensitivity sqrt(2d); a single
    # Gaussian release at (1, 1e-5) has the analytic multiplier.
    sigma = gaussian_noise_multiplier(1.0, 1e-5) * math.sqrt(2 * d)
    _check_variance(means.ravel() * n / 2.0, sigma)


def test_standard_scaler_laplace_noise_scale():
    n, d, fits = 1000, 2, 500
    X = np.zeros((n, d))
    noise = np.array(
        [DPStandardScaler(bounds=(-1, 1), delta=0.0, random_state=s).fit(X).mean_ for s in range(fits)]
    ).ravel() * (n / 2.0)
    b = 2 * d / 1.0  # L1 sensitivity 2d at epsilon 1
    # Sample variance of k Laplace draws: mean 2 b^2, variance (E x^4 - (2b^2)^2) / k = 20 b^4 / k.
    k = noise.size
    z = (np.mean(noise**2) - 2 * b**2) / math.sqrt(20 * b**4 / k)
    assert abs(z) < stats.norm.ppf(1 - ALPHA / 2), z
    assert stats.kstest(noise, stats.laplace(scale=b).cdf).pvalue > ALPHA


def test_standard_scaler_variance_floor_and_clipping():
    X = np.full((200, 2), 7.0)  # constant: exact variance 0
    s = DPStandardScaler(bounds=(0, 10), random_state=0).fit(X)
    assert np.all(s.var_ > 0) and np.all(np.isfinite(s.transform(X)))
    assert np.all((s.mean_ >= 0) & (s.mean_ <= 10))
    # Values outside the bounds are clipped before the sums: a huge outlier moves nothing.
    Y = np.zeros((1000, 1))
    Y[0] = 1e300
    a = DPStandardScaler(bounds=(-1, 1), random_state=0).fit(Y)
    Y[0] = 1.0
    b = DPStandardScaler(bounds=(-1, 1), random_state=0).fit(Y)
    np.testing.assert_allclose(a.mean_, b.mean_)


def test_pca_matrix_noise_scale():
    n, d, C, fits = 500, 3, 2.0, 100
    X = np.zeros((n, d))
    iu = np.triu_indices(d)
    entries = np.array(
        [DPPCA(data_norm=C, centered=True, random_state=s).fit(X).covariance_[iu] for s in range(fits)]
    )
    # Frobenius sensitivity sqrt(2) C^2 (replace-one), one Gaussian release at (1, 1e-5).
    sigma = gaussian_noise_multiplier(1.0, 1e-5) * math.sqrt(2.0) * C**2 / n
    _check_variance(entries.ravel(), sigma)


def test_pca_mean_noise_scale():
    n, d, C, fits = 500, 3, 2.0, 200
    X = np.zeros((n, d))
    means = np.array([DPPCA(data_norm=C, random_state=s).fit(X).mean_ for s in range(fits)])
    # Two Gaussian releases at multiplier z compose as one at z / sqrt(2):
    # z = sqrt(2) times the single-release multiplier; sum sensitivity 2C.
    z = math.sqrt(2.0) * gaussian_noise_multiplier(1.0, 1e-5)
    _check_variance(means.ravel(), z * 2 * C / n)


def test_exponential_quantile_probabilities():
    # All records in cell [1, 2] of the grid 0..4: the cells' distances to the
    # target rank are known, and the draw frequencies must follow exp(-eps dist / 2).
    grid = np.arange(5.0)
    X = np.full((10, 1), 1.5)
    counts = rank_counts(X, grid)
    q, eps, draws = 0.5, 1.0, 4000
    rng = np.random.default_rng(0)
    ledger = PrivacyLedger(composition="basic")
    out = np.array([private_quantiles(counts, 10, [q], grid, eps, rng, ledger)[0, 0] for _ in range(draws)])
    distance = np.array([5.0, 0.0, 5.0, 5.0])  # target 5 against counts (0,0), (0,10), (10,10), (10,10)
    p = np.exp(-eps * distance / 2)
    p /= p.sum()
    observed = np.array([np.sum(out == m) for m in (0.5, 1.5, 2.5, 3.5)])
    assert observed.sum() == draws
    assert stats.chisquare(observed, p * draws).pvalue > ALPHA
    assert len(ledger) == draws and ledger.privacy_spent(0.0).epsilon == pytest.approx(draws * eps)


# --- accounting ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("est", "events"),
    [
        (DPStandardScaler(bounds=(-1, 1), random_state=0), [GaussianEvent]),
        (DPStandardScaler(bounds=(-1, 1), delta=0.0, random_state=0), [LaplaceEvent]),
        (DPStandardScaler(bounds="auto", random_state=0), [GaussianEvent] * 4),
        (DPStandardScaler(bounds="auto", delta=0.0, random_state=0), [LaplaceEvent] * 4),
        (DPMinMaxScaler(delta=0.0, quantiles=(0.01, 0.99), random_state=0), [LaplaceEvent] * 2),
        (DPMinMaxScaler(quantiles=(0.01, 0.99), random_state=0), [GaussianEvent] * 2),
        # quantiles="auto" at n = 400, d = 3, epsilon = 1: the linear stage's noise hides at
        # most half the rows at a typical end (0.42 Laplace, 0.28 Gaussian), so both stages
        # are released (the one-histogram plan is test_min_max_auto_falls_back_...).
        (DPMinMaxScaler(delta=0.0, random_state=0), [LaplaceEvent] * 2),
        (DPMinMaxScaler(random_state=0), [GaussianEvent] * 2),
        (DPPCA(data_norm=3.0, random_state=0), [GaussianEvent, GaussianEvent]),
        (DPPCA(data_norm=3.0, centered=True, random_state=0), [GaussianEvent]),
    ],
)
def test_ledger_privacy_spent_and_accountant(est, events):
    X = np.random.default_rng(0).normal(size=(400, 3))
    budget = BudgetAccountant(epsilon=10.0, delta=1e-3)
    est.set_params(accountant=budget, epsilon=1.0).fit(X)
    assert sorted(type(e).__name__ for e in est.privacy_ledger_.events) == sorted(e.__name__ for e in events)
    eps, delta = est.privacy_spent_
    assert eps <= 1.0 and eps == pytest.approx(1.0, rel=1e-3)
    assert delta == est.delta
    # The budget recomposes the fit's events under its own accountant ("pld"),
    # never above what the fit reports.
    assert 0.8 * eps < budget.spent[0] <= eps * (1 + 1e-6)
    if isinstance(est, DPMinMaxScaler) and est.delta == 0:
        # Basic composition of two Laplace histograms: epsilon / 2 each, L1 sensitivity 2d.
        multipliers = [e.noise_multiplier for e in est.privacy_ledger_.events]
        expected = [2.0, 2.0]
        assert multipliers == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize(("n", "eps", "share"), [(150, 1.0, 0.7), (150, 3.0, 0.5), (5000, 1.0, 0.5)])
def test_auto_bounds_share_is_the_larger_where_no_column_can_be_located(n, eps, share):
    """bounds_budget="auto": 0.5 where the histograms can locate a column (public n, d, eps), else 0.7;
    the ledger's histogram releases carry the multiplier of that share, and the total meets epsilon."""
    from skdp.preprocessing._standard import auto_bounds_share
    from skdp.privacy.quantiles import calibrate_histogram, can_locate_columns, histogram_mechanism

    d = 4
    assert auto_bounds_share(n, d, eps, 1e-5, "pld") == share
    z_half = calibrate_histogram(eps * 0.5, 1e-5 * 0.5, d, "pld", scale=True)
    assert can_locate_columns(n, histogram_mechanism(d, z_half, True), d) == (share == 0.5)
    X = np.random.default_rng(0).normal(5.0, 1.0, size=(n, d))
    est = DPStandardScaler(epsilon=eps, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
    z = calibrate_histogram(eps * share, 1e-5 * share, d, "pld", scale=True)
    multipliers = sorted(e.noise_multiplier for e in est.privacy_ledger_.events)
    assert any(m == pytest.approx(z, rel=1e-9) for m in multipliers)
    # A declared share is used as given.
    declared = DPStandardScaler(epsilon=eps, bounds_budget=0.5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        declared.fit(X)
    assert any(e.noise_multiplier == pytest.approx(z_half, rel=1e-9) for e in declared.privacy_ledger_.events)
    assert est.privacy_spent_.epsilon == pytest.approx(eps, rel=1e-3)


def test_a_column_whose_private_range_is_the_zero_bin_keeps_the_identity_map():
    """Mostly zeros, the rest hidden by the noise: no scale of 1e-7 that transform multiplies the rest by.

    On digits at epsilon 1, 11 pixel columns (85 % to 99.9 % zeros, values
    up to 15) got a released range inside the log grid's zero bin and a
    scale of about 1e-7; the transformed columns had standard deviations up
    to 7.8e6 (a PCA after the scaler saw only them). Those columns now keep
    the data-free map, mean 0 and scale 1.
    """
    from sklearn.datasets import load_digits

    from skdp.privacy.quantiles import LOG2_RANGE

    X = load_digits().data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DPStandardScaler(epsilon=1.0, random_state=0).fit(X)
    in_zero = np.maximum(np.abs(est.bounds_[0]), np.abs(est.bounds_[1])) <= 2.0**LOG2_RANGE[0]
    assert in_zero.sum() >= 5 and np.any(X[:, in_zero] != 0)  # the case: zero-bin ranges over non-zero values
    np.testing.assert_array_equal(est.mean_[in_zero], 0.0)
    np.testing.assert_array_equal(est.scale_[in_zero], 1.0)
    # Every transformed column within a few of its own spread (the raw pixels' sd is at most 6.4 here).
    assert est.transform(X).std(axis=0).max() < 20.0


def test_auto_bounds_run_under_secure_noise():
    # The histograms are Laplace or Gaussian releases: exact samplers exist.
    X = np.random.default_rng(0).normal(size=(300, 2))
    for est in (DPStandardScaler(), DPMinMaxScaler(), DPMinMaxScaler(delta=0.0)):
        est.set_params(secure_noise=True, random_state=0).fit(X)
        assert est.privacy_spent_.epsilon <= 1.0


def test_secure_noise_standard_scaler_and_pca():
    X = np.random.default_rng(0).normal(size=(300, 3))
    for est in (
        DPStandardScaler(bounds=(-3, 3)),
        DPStandardScaler(bounds=(-3, 3), delta=0.0),
        DPPCA(data_norm=5.0),
    ):
        est.set_params(secure_noise=True, random_state=0).fit(X)
        assert est.privacy_spent_.epsilon <= 1.0


@pytest.mark.parametrize("est", _instances(), ids=_ids())
def test_release_surface(est):
    X = np.random.default_rng(1).normal(size=(N_ROWS, 3))
    model = _fit_quietly(clone(est), X)
    assert release_violations(model, 0, in_memory=True) == []
    assert release_violations(pickle.loads(pickle.dumps(model)), 0) == []


# --- bounds and leaks -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("est", "warns"),
    [
        (DPStandardScaler(bounds="nonprivate", random_state=0), True),
        (DPStandardScaler(random_state=0), False),  # the default "auto" reads nothing off the data
        (DPStandardScaler(bounds=(-5, 5), random_state=0), False),
        (DPStandardScaler(bounds="auto", random_state=0), False),
        (DPMinMaxScaler(random_state=0), False),
        (DPPCA(data_norm="nonprivate", random_state=0), True),
        (DPPCA(random_state=0), False),  # the default "auto" reads nothing off the data
        (DPPCA(data_norm=5.0, random_state=0), False),
    ],
)
def test_privacy_leak_warning_only_when_bounds_read_off_data(est, warns):
    X = np.random.default_rng(0).normal(size=(100, 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X)
    leaks = [w for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    assert bool(leaks) == warns
    if warns:
        assert ("bounds" if isinstance(est, DPStandardScaler) else "data_norm") in str(leaks[0].message)


def test_min_max_scaler_needs_no_bounds_and_finds_the_quantiles():
    # Large n: the log stage finds the occupied magnitudes, the linear stage
    # the quantiles within one of its 32 bins (plus the noise of the sums).
    n = 20000
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(1000.0, 100.0, n), rng.exponential(0.01, n)])
    scaler = DPMinMaxScaler(epsilon=1.0, quantiles=(0.01, 0.99), random_state=0).fit(X)
    true = np.quantile(X, [0.01, 0.99], axis=0)
    spread = true[1] - true[0]
    # The stage-1 range is at most 4x the column's largest magnitude; one
    # linear bin is 1/32 of it, and the ends are within two bins.
    tolerance = 2 * 4 * np.abs(X).max(axis=0) / 32
    assert np.all(np.abs(scaler.data_min_ - true[0]) <= tolerance)
    assert np.all(np.abs(scaler.data_max_ - true[1]) <= tolerance)
    assert np.all(scaler.data_range_ < 3 * spread)
    Xt = scaler.transform(X)
    assert Xt.min() == 0.0 and Xt.max() == 1.0


def _min_max_error(scaler, X):
    low, high = X.min(axis=0), X.max(axis=0)
    return (np.abs(scaler.data_min_ - low) + np.abs(scaler.data_max_ - high)) / (high - low)


def test_min_max_auto_ends_approach_the_minimum_and_maximum_as_n_epsilon_grows():
    # quantiles="auto" releases the most extreme rows the noise can resolve: at large
    # n * epsilon the ends reach the minimum and maximum (within a fraction of one of
    # the 32 linear bins), where the fixed 1st and 99th percentiles stay ~2 sd inside.
    rng = np.random.default_rng(1)
    n = 50_000
    X = np.column_stack([rng.uniform(3.0, 50.0, n), rng.normal(-200.0, 30.0, n), rng.uniform(-1, 1, n)])
    err = {}
    for eps in (1.0, 10.0):
        err[eps] = np.mean(
            [_min_max_error(DPMinMaxScaler(epsilon=eps, random_state=s).fit(X), X) for s in range(3)], axis=0
        )
    fixed = np.mean(
        [
            _min_max_error(DPMinMaxScaler(epsilon=10.0, quantiles=(0.01, 0.99), random_state=s).fit(X), X)
            for s in range(3)
        ],
        axis=0,
    )
    # Within about one linear bin (1/32 of a stage-1 range up to ~2x the column's extent)
    # per end; the percentiles are off by ~1.8 sd per end on the normal column (0.43).
    assert np.all(err[10.0] < 0.08), err[10.0]
    assert np.all(err[10.0] <= err[1.0] + 0.01), (err[1.0], err[10.0])
    assert err[10.0][1] < fixed[1] / 3, (err[10.0], fixed)
    assert np.all(err[10.0] <= fixed + 1e-3), (err[10.0], fixed)


def _bin_unit_ends(counts, step):
    # The 32 linear bins in bin units, with overflow bins of width 0 (no stage-1 widening).
    from skdp.privacy.quantiles import _extreme_ends

    edges = np.concatenate([[0.0], np.arange(33.0), [32.0]])
    return _extreme_ends(np.concatenate([[0.0], counts, [0.0]]), step, edges)


def test_min_max_auto_ends_unit_rules():
    # Noise-free counts (a threshold below one row): the ends are the outer edges of the
    # first and last occupied bins.
    counts = np.zeros(32)
    counts[5:20] = 10.0
    assert _bin_unit_ends(counts, 0.5) == (5.0, 20.0)
    # A sparse tail below a wall: the prefix before the first passing bin still holds rows
    # (4), the tail's decay length is 4 / 40 bins, and a log-concave tail leaves its last
    # row within ln 4 such lengths.
    counts = np.zeros(32)
    counts[3], counts[4], counts[5:20] = 2.0, 2.0, 40.0
    low, high = _bin_unit_ends(counts, 5.0)
    assert high == 20.0 and low == pytest.approx(5 - 4.0 / 40.0 * math.log(4.0))
    # Under e rows before it (here 2): one decay length, the flat tail's reach.
    counts[3] = 0.0
    low, _ = _bin_unit_ends(counts, 5.0)
    assert low == pytest.approx(5 - 2.0 / 40.0)
    # Nothing passes (the whole column hidden by the noise): the whole stage-1 range.
    assert _bin_unit_ends(np.ones(32), 100.0) == (0.0, 32.0)
    # An end never leaves the range (overflow bins of width 0): a tail whose reach (3 bins
    # of 90 rows at 30 a bin: 3 ln 90 = 13.5 bins) passes the range's edge stops at it.
    counts = np.zeros(32)
    counts[0:10], counts[10:20] = 30.0, 40.0
    low, _ = _bin_unit_ends(counts, 50.0)
    assert low == 0.0


def test_min_max_auto_ends_wall_test():
    # A wall of rows (pixels at one value) 15 empty bins inside the range: its prefix sum
    # (400 rows) is below the threshold over 16 bins (130 * 4 = 520), so the prefix sums pass
    # only past it (k = 18: 600 > 551), where the wall's rows, read as a tail before a bin
    # of 100, extrapolate to the range's edge.  Its own count passes the occupied-bin test
    # (wall): the end is the wall's edge.
    from skdp.privacy.quantiles import _extreme_ends

    counts = np.zeros(32)
    counts[15], counts[16:] = 400.0, 100.0
    edges = np.concatenate([[0.0], np.arange(33.0), [32.0]])
    noisy = np.concatenate([[0.0], counts, [0.0]])
    assert _extreme_ends(noisy, 130.0, edges)[0] == 0.0
    assert _extreme_ends(noisy, 130.0, edges, wall=300.0)[0] == 15.0
    # A wall below its test leaves the prefix-sum rule as it was.
    assert _extreme_ends(noisy, 130.0, edges, wall=500.0)[0] == 0.0


def test_min_max_auto_refine_bins():
    # 32 linear bins where the average bin (n / 32 rows) holds at least one bin's threshold,
    # else 16 (one halving, never fewer): a public function of n and the plan.
    from skdp.privacy.quantiles import MIN_REFINE_BINS, extreme_threshold, histogram_mechanism, refine_bins

    mechanism = histogram_mechanism(5, 3.0, True)
    step = extreme_threshold(mechanism, 34)
    assert refine_bins(int(32 * step) + 1, mechanism) == 32
    assert refine_bins(int(32 * step) - 1, mechanism) == 16
    assert refine_bins(10, mechanism) == MIN_REFINE_BINS == 16


def test_min_max_auto_ends_reach_a_gaussian_tails_last_row():
    # Noise-free expected counts of a standard normal column of n = 1000 rows in 32 bins
    # over [-4, 4]: at every threshold the released end lies within two bins (0.5) of the
    # point one row is expected beyond (Phi^-1(1 / n) = -3.09), where the flat tail's
    # reach (one decay length, the rule until 2026-11-27) stops short by more.
    from scipy.stats import norm

    from skdp.privacy.quantiles import _extreme_ends

    n, linear = 1000, np.linspace(-4.0, 4.0, 33)
    edges = np.concatenate([[-4.0], linear, [4.0]])
    counts = np.concatenate([[0.0], n * np.diff(norm.cdf(linear)), [0.0]])
    last_row = norm.ppf(1.0 / n)
    for step in (5.0, 10.0, 20.0, 40.0):
        low, high = _extreme_ends(counts, step, edges)
        assert abs(low - last_row) < 0.5 and abs(high + last_row) < 0.5, (step, low)
        # The flat tail's end from the same counts.
        sums = np.cumsum(counts)
        q = int(np.argmax(sums > step * np.sqrt(np.arange(1, 35))))
        flat = edges[q] - 0.25 * sums[q - 1] / max(counts[q], step)
        assert abs(low - last_row) < abs(flat - last_row), (step, low, flat)
    # A stage-1 range [-2, 2] that missed the tails' log bins [-4, -2) and [2, 4): their
    # rows land in the overflow bins, and the ends reach into them as far as the last row.
    linear = np.linspace(-2.0, 2.0, 33)
    edges = np.concatenate([[-4.0], linear, [4.0]])
    inside = n * np.diff(norm.cdf(linear))
    counts = np.concatenate([[n * norm.cdf(-2.0)], inside, [n * norm.cdf(-2.0)]])
    for step in (5.0, 10.0, 20.0):
        low, high = _extreme_ends(counts, step, edges)
        assert low < -2.3 and high > 2.3, (step, low)
        if step < 20.0:
            assert abs(low - last_row) < 0.5 and abs(high + last_row) < 0.5, (step, low)
        # (At 20 the first linear bin's 7.6 rows are below the threshold, whose floor on
        # the density shortens the decay length: the end stops at -2.44.)


def test_min_max_auto_overflow_bins():
    from skdp.privacy.quantiles import (
        OVERFLOW_FAILURE,
        histogram_mechanism,
        histogram_threshold,
        log_bin_edges,
        log_bin_index,
        overflow_edges,
        overflow_histogram,
    )

    # Every row in one bin of its column: below, 32 linear bins, above.
    X = np.array([[-5.0, 0.5], [0.0, 1.0], [0.999, 2.0], [7.0, 0.75]])
    counts = overflow_histogram(X, np.array([0.0, 0.5]), np.array([1.0, 1.0]), 32)
    assert counts.shape == (2, 34) and np.all(counts.sum(axis=1) == 4)
    assert counts[0, 0] == 1 and counts[0, 33] == 1 and counts[0, 1] == 1 and counts[0, 32] == 1
    assert counts[1, 33] == 1 and counts[1, 1] == 1 and counts[1, 32] == 1
    # The overflow bin spans the next log bin outward only where its stage-1 count and the
    # stage-2 overflow count together pass sqrt(2) times what one empty count passes with
    # probability OVERFLOW_FAILURE (the sum carries sqrt(2) times one count's noise std).
    mechanism = histogram_mechanism(3, 2.0, True)
    gate = math.sqrt(2.0) * histogram_threshold(mechanism, 1, OVERFLOW_FAILURE)
    lower, upper = log_bin_edges()
    below, above = log_bin_index(np.array([-3.0, 3.0]))  # [-4, -2) and [2, 4)
    log_noisy = np.zeros(lower.size)
    edges = overflow_edges(-2.0, 2.0, log_noisy, (0.0, 0.0), mechanism)
    assert edges.size == 35 and edges[0] == edges[1] == -2.0 and edges[-1] == edges[-2] == 2.0
    log_noisy[below], log_noisy[above] = gate / 2 + 1.0, gate / 2 - 1.0
    edges = overflow_edges(-2.0, 2.0, log_noisy, (gate / 2, gate / 2), mechanism)
    assert lower[below] == -4.0 and edges[0] == -4.0 and edges[-1] == 2.0
    # Either count alone short of the gate: not widened.
    edges = overflow_edges(-2.0, 2.0, log_noisy, (0.0, 0.0), mechanism)
    assert edges[0] == -2.0 and edges[-1] == 2.0
    # A positive range's bin below reaches 0 (the log bins down to 0 together), a negative
    # range's bin above too: an end moved towards 0 never grows a magnitude.
    log_noisy[:] = gate + 1.0
    edges = overflow_edges(2.0, 4.0, log_noisy, (0.0, 0.0), mechanism)
    assert edges[0] == 0.0 and edges[1] == 2.0 and edges[-1] == 8.0
    edges = overflow_edges(-4.0, -2.0, log_noisy, (0.0, 0.0), mechanism)
    assert edges[0] == -8.0 and edges[-1] == 0.0
    # A range that is not a log bin's edge (the pool's, the row scale's) is never widened.
    log_noisy[:] = 1e9
    edges = overflow_edges(-1.5, 2.5, log_noisy, (1e9, 1e9), mechanism)
    assert edges[0] == -1.5 and edges[-1] == 2.5


@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_min_max_auto_falls_back_to_one_log_histogram_where_the_public_rule_says(delta):
    # The public rule: the linear stage is kept iff the rows its noise hides at a typical
    # end (extreme_hidden_share of n, d, epsilon, delta) are at most AUTO_HIDDEN_SHARE.
    from skdp.preprocessing._minmax import AUTO_HIDDEN_SHARE
    from skdp.privacy.quantiles import calibrate_histogram, extreme_hidden_share, histogram_mechanism

    d, eps = 4, 1.0
    composition = "basic" if delta == 0 else "pld"
    mechanism = histogram_mechanism(d, calibrate_histogram(eps, delta, d, composition), delta > 0)
    share_n = extreme_hidden_share(1, mechanism)  # the share is this over n
    n_switch = int(np.ceil(share_n / AUTO_HIDDEN_SHARE))  # smallest n that keeps the linear stage
    rng = np.random.default_rng(0)
    for n, releases in ((n_switch - 1, 1), (n_switch, 2)):
        X = rng.normal(100.0, 10.0, size=(n, d))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scaler = DPMinMaxScaler(epsilon=eps, delta=delta, random_state=0).fit(X)
        events = scaler.privacy_ledger_.events
        assert sum(e.count for e in events) == releases, (n, events)
        assert scaler.privacy_spent_[0] == pytest.approx(eps, rel=1e-3)
        if releases == 1:
            # The ends are the log bins' edges: [64, 128) holds every value near 100.
            edges = 2.0 ** np.arange(-20, 41)
            ends = np.abs(np.concatenate([scaler.data_min_, scaler.data_max_]))
            assert np.all(np.isin(ends, np.concatenate([edges, [0.0]])))


@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_min_max_auto_switch_is_monotone_in_epsilon_and_public(delta):
    # The plan keeps the linear stage iff the hidden share (n, d, epsilon, delta) is at most
    # AUTO_HIDDEN_SHARE; the share falls as epsilon grows, so once a budget buys the
    # linear stage every larger one does (the plan never steps back to one histogram).
    from skdp.preprocessing._minmax import AUTO_HIDDEN_SHARE
    from skdp.privacy.quantiles import calibrate_histogram, extreme_hidden_share, histogram_mechanism

    composition = "basic" if delta == 0 else "pld"
    epsilons = np.geomspace(0.05, 30.0, 25)
    for n in (50, 400, 2000, 20000):
        for d in (1, 4, 30):
            shares = [
                extreme_hidden_share(
                    n, histogram_mechanism(d, calibrate_histogram(eps, delta, d, composition), delta > 0)
                )
                for eps in epsilons
            ]
            assert np.all(np.diff(shares) < 0), (n, d)
            linear = np.array(shares) <= AUTO_HIDDEN_SHARE
            assert np.all(np.diff(linear.astype(int)) >= 0), (n, d)
    # The same public n, d, epsilon, delta give the same plan whatever the data: a wall of
    # uniform values and a heavy-tailed column far from 0 record the same events.
    rng = np.random.default_rng(1)
    tables = (rng.uniform(0.0, 1.0, size=(600, 3)), 1e4 + 1e3 * rng.standard_t(2, size=(600, 3)))
    for eps in (0.3, 1.0, 3.0):
        plans = []
        for X in tables:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                scaler = DPMinMaxScaler(epsilon=eps, delta=delta, random_state=0).fit(X)
            plans.append(
                [(type(e).__name__, e.count, e.noise_multiplier) for e in scaler.privacy_ledger_.events]
            )
        assert plans[0] == plans[1], eps


@pytest.mark.parametrize("eps", [0.3, 1.0, 10.0])
@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_min_max_scaler_range_never_explodes_on_small_tables(eps, delta):
    # Digits: 1,797 rows, 64 columns in 0..16.  The exponential-mechanism
    # quantiles over a grid to 1e6 released ranges like [-489908, 512997]
    # here; the histogram's ends lie in occupied bins (or are the data-free
    # [0, 1]), so no range exceeds twice the data's largest magnitude; the
    # "auto" ends may reach one log bin further (an overflow bin: four times).
    from sklearn.datasets import load_digits

    X = load_digits().data
    for seed in range(3):
        scaler = DPMinMaxScaler(epsilon=eps, delta=delta, random_state=seed).fit(X)
        assert np.all(scaler.data_min_ >= -64.0) and np.all(scaler.data_max_ <= 64.0)
        fixed = DPMinMaxScaler(epsilon=eps, delta=delta, quantiles=(0.01, 0.99), random_state=seed).fit(X)
        assert np.all(fixed.data_min_ >= -32.0) and np.all(fixed.data_max_ <= 32.0)
    std = DPStandardScaler(epsilon=eps, delta=delta if delta else 0.0, random_state=0).fit(X)
    assert np.all(std.bounds_ >= -32.0) and np.all(std.bounds_ <= 32.0)


def test_histogram_bounds_fall_back_to_data_free_range_when_nothing_is_located():
    # 20 rows at epsilon 0.01: no bin's noisy count can pass the threshold.
    X = np.full((20, 3), 1e5)
    scaler = DPMinMaxScaler(epsilon=0.01, random_state=0).fit(X)
    np.testing.assert_array_equal(scaler.data_min_, 0.0)
    np.testing.assert_array_equal(scaler.data_max_, 1.0)


def test_histogram_bounds_warn_when_nothing_is_located():
    X = np.full((20, 3), 1e5)
    with pytest.warns(UserWarning, match=r"3 took the data-free range \[0, 1\]"):
        DPMinMaxScaler(epsilon=0.01, random_state=0).fit(X)
    with pytest.warns(UserWarning, match="Declare bounds"):
        DPStandardScaler(epsilon=0.01, random_state=0).fit(X)


def test_histogram_bounds_warn_when_a_column_takes_the_pooled_range():
    """A column of values near 0.01 beside columns in the thousands, too few rows for its own bins
    at this epsilon: it takes the pool's range, orders of magnitude wider, and the fit says so."""
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(1000, 4000, (400, 8)), rng.uniform(0.001, 0.05, 400)])
    with pytest.warns(UserWarning, match="pooled over all columns"):
        scaler = DPMinMaxScaler(epsilon=0.5, quantiles=(0.01, 0.99), random_state=0).fit(X)
    assert scaler.data_max_[-1] > 100 * 0.05  # the pooled range: why the warning is needed
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # every column located: silent
        DPMinMaxScaler(epsilon=0.5, quantiles=(0.01, 0.99), random_state=0).fit(X[:, :8])
        DPMinMaxScaler(epsilon=0.5, random_state=0).fit(X[:, :8])


def test_histogram_noise_is_the_planned_std():
    # Each histogram count carries noise of std z * sqrt(2 d) (Gaussian): the
    # counts of an all-zero column, seen through the ledger-free core function.
    from skdp.privacy.quantiles import calibrate_histogram, histogram_mechanism, log_histogram

    d = 3
    z = calibrate_histogram(1.0, 1e-5, d, "pld")
    mechanism = histogram_mechanism(d, z, True)
    counts = log_histogram(np.zeros((100, d)))
    rng = np.random.default_rng(0)
    ledger = PrivacyLedger()
    noise = np.concatenate(
        [mechanism.release(counts.ravel(), rng, ledger) - counts.ravel() for _ in range(50)]
    )
    _check_variance(noise, z * math.sqrt(2 * d))


@pytest.mark.parametrize(
    "bounds", [([0, 0, 0], [1, 2, 3]), [(0, 1), (0, 2), (0, 3)], [[0, 1], [0, 2], [0, 3]]]
)
def test_per_column_bounds_in_both_spellings(bounds):
    X = np.random.default_rng(0).uniform(size=(50, 3))
    est = DPStandardScaler(bounds=bounds, random_state=0).fit(X)
    np.testing.assert_array_equal(est.bounds_, [[0, 0, 0], [1, 2, 3]])


def test_two_column_bounds_list_of_tuples_is_per_column():
    X = np.random.default_rng(0).uniform(size=(50, 2))
    assert DPStandardScaler(bounds=[(0, 1), (0, 2)]).fit(X).bounds_.tolist() == [[0, 0], [1, 2]]
    assert DPStandardScaler(bounds=([0, 0], [1, 2])).fit(X).bounds_.tolist() == [[0, 0], [1, 2]]


def test_chunked_input_matches_in_memory():
    X = np.random.default_rng(0).normal(size=(1000, 3))

    def factory():
        return (X[i : i + 128] for i in range(0, len(X), 128))

    for est in (DPStandardScaler(bounds=(-3, 3)), DPMinMaxScaler(), DPPCA(data_norm=4.0)):
        a = clone(est).set_params(random_state=0).fit(X)
        b = clone(est).set_params(random_state=0).fit(factory)
        for name in ("mean_", "scale_", "data_min_", "data_max_", "components_"):
            if hasattr(a, name):
                np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-9, atol=1e-12)


# --- bad parameters --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("est", "name"),
    [
        (DPStandardScaler(epsilon=-1.0), "epsilon"),
        (DPStandardScaler(bounds=(1.0, 0.0)), "bounds"),
        (DPStandardScaler(bounds=([0, 0], [1, 1])), "bounds"),  # 2 columns for 3 features
        (DPStandardScaler(bounds="everything"), "bounds"),
        (DPStandardScaler(bounds_budget=1.0), "bounds_budget"),
        (DPStandardScaler(bounds_budget="half"), "bounds_budget"),
        (DPMinMaxScaler(quantiles=(0.9, 0.1)), "quantiles"),
        (DPMinMaxScaler(feature_range=(1, 0)), "feature_range"),
        (DPMinMaxScaler(grid=[0.0, 2.0, 1.0]), "grid"),
        (DPStandardScaler(bounds=None), "bounds"),
        (DPMinMaxScaler(delta=1.5), "delta"),
        (DPPCA(n_components=4, data_norm=1.0), "n_components"),
        (DPPCA(n_components=0, data_norm=1.0), "n_components"),
        (DPPCA(delta=0.0, data_norm=1.0), "delta"),
        (DPPCA(data_norm=-1.0), "data_norm"),
        (DPPCA(centered="yes"), "centered"),
    ],
)
def test_bad_parameters_raise_naming_the_parameter_before_charging(est, name):
    budget = BudgetAccountant(epsilon=10.0, delta=1e-3)
    with pytest.raises((ValueError, TypeError), match=name):
        est.set_params(accountant=budget).fit(np.zeros((20, 3)))
    assert budget.spent[0] == 0


# --- DPPCA data_norm="auto": a private centre and bound (skdp.privacy.centring) ----


def _pca_signature(events):
    # A recorded multiplier is scale / sensitivity: the planned one up to the last bit.
    return [
        (type(e), e.count, getattr(e, "epsilon", None), round(getattr(e, "noise_multiplier", 0.0), 12))
        for e in events
    ]


def _pca_data(n=5000, shift=10.0):
    return np.random.default_rng(0).normal(size=(n, 3)) * [3.0, 1.0, 0.3] + shift


def test_pca_auto_data_norm_events_and_mean():
    from skdp.preprocessing import DPPCA
    from skdp.privacy import GaussianEvent
    from skdp.privacy.centring import calibrate_auto_bounds

    X = _pca_data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        pca = DPPCA(n_components=1, data_norm="auto", epsilon=2.0, random_state=0).fit(X)
    events = pca.privacy_ledger_.events
    quantile, centre = calibrate_auto_bounds(2.0, 1e-5, 0.1).events()
    single = PureDPEvent(count=1, neighbouring="replace_one", epsilon=quantile.epsilon)
    assert _pca_signature(events[:3]) == _pca_signature([single, centre, single])
    assert [type(e) for e in events[3:]] == [GaussianEvent, GaussianEvent]
    assert pca.privacy_spent_.epsilon <= 2.0 * (1 + 1e-9)
    np.testing.assert_allclose(pca.mean_, 10.0, atol=0.3)  # the refined mean, in place
    assert pca.data_norm_ < 12.0  # of x - c; ||x|| is about 17
    np.testing.assert_allclose(np.abs(pca.components_), [[1.0, 0.0, 0.0]], atol=0.05)
    # centered=True: one quantile of ||x||, no centre.
    declared = DPPCA(n_components=1, data_norm="auto", centered=True, epsilon=2.0, random_state=0)
    declared.fit(X - 10.0)
    assert [type(e) for e in declared.privacy_ledger_.events] == [PureDPEvent, GaussianEvent]
    assert not hasattr(declared, "centre_") and not declared.mean_.any()


def test_pca_auto_plan_is_public_chunks_and_outlier():
    from skdp._chunks import as_chunked
    from skdp.preprocessing import DPPCA

    X = _pca_data(n=2000)
    params = dict(n_components=2, data_norm="auto", epsilon=8.0, random_state=0)
    pca = DPPCA(**params).fit(X)
    dry = DPPCA(**params).fit(np.zeros_like(X))
    assert _pca_signature(pca.privacy_ledger_.events) == _pca_signature(dry.privacy_ledger_.events)
    chunked = DPPCA(**params).fit(as_chunked(X, chunk_size=300))
    np.testing.assert_allclose(chunked.mean_, pca.mean_, rtol=1e-9)
    np.testing.assert_allclose(chunked.covariance_, pca.covariance_, rtol=1e-8, atol=1e-8)
    far = X.copy()
    far[0] = 1e6
    moved = DPPCA(**params).fit(far)
    assert moved.data_norm_ < 15.0
    # Clipped to R: the mean moves by O(R / n), not 1e6 sqrt(3) / 2000 = 866.
    assert np.linalg.norm(moved.mean_ - pca.mean_) < 0.2


@pytest.mark.parametrize("n, epsilon", [(2000, 3.0), (20000, 1.0)])
def test_min_max_auto_reaches_a_wall_at_zero(n, epsilon):
    # Uniform columns on [0, 1]: the log bins near 0 are narrow and each holds few rows, so
    # the stage-1 range can stop at 1/32; the overflow bin below a positive range reaches 0
    # once the rows below it are counted, and an end inside the zero bin (|x| < 2^-20, what
    # the log grid cannot resolve) is 0, so the ends are the walls (up to the grid).
    from skdp.preprocessing import DPMinMaxScaler

    X = np.random.default_rng(0).uniform(0.0, 1.0, size=(n, 10))
    for seed in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = DPMinMaxScaler(epsilon=epsilon, random_state=seed).fit(X)
        assert np.all(est.data_min_ == 0.0) and np.all(est.data_max_ == 1.0), seed
