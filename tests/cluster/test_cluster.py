"""DPKMeans and DPKernelKMeans: math helpers, privacy plan, API (fast tests)."""

import functools
import math
import pickle
import warnings

import numpy as np
import pytest
from conftest import three_blobs as blobs
from scipy.stats import norm
from sklearn.base import clone
from sklearn.datasets import make_circles
from sklearn.metrics import adjusted_rand_score
from sklearn.metrics.pairwise import euclidean_distances
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline

from skdp.cluster import DPKernelKMeans, DPKMeans
from skdp.cluster import _coreset as cs
from skdp.cluster import _lloyd as lloyd
from skdp.cluster._fourier import draw_fourier_weights, random_fourier_features
from skdp.exceptions import PrivacyLeakWarning
from skdp.privacy import BudgetAccountant, GaussianEvent, LaplaceEvent, PrivacyLedger
from skdp.privacy.mechanisms import additive as mech_module


@pytest.fixture
def release_spy(monkeypatch):
    """Record (sensitivity, scale, noise, event) of every additive-mechanism release."""
    seen = []
    original = mech_module._AdditiveMechanism.release

    def spy(self, value, rng, accountant):
        out = original(self, value, rng, accountant)
        seen.append((self.sensitivity, self.scale, out - np.asarray(value, dtype=float), self.event()))
        return out

    monkeypatch.setattr(mech_module._AdditiveMechanism, "release", spy)
    return seen


# --------------------------------------------------------------------------
# pure functions
# --------------------------------------------------------------------------


def test_clip_rows_bounds_every_row_and_keeps_small_rows():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(500, 4)) * rng.exponential(3, size=(500, 1))
    clipped = lloyd.clip_rows(Z, 2.0)
    norms = np.linalg.norm(Z, axis=1)
    assert np.all(np.linalg.norm(clipped, axis=1) <= 2.0 * (1 + 1e-12))
    np.testing.assert_array_equal(clipped[norms <= 2], Z[norms <= 2])
    big = norms > 2
    # Same direction, norm exactly the bound.
    np.testing.assert_allclose(clipped[big] * (norms[big] / 2.0)[:, None], Z[big])
    assert np.all(np.isfinite(lloyd.clip_rows(np.zeros((3, 2)), 1.0)))


def test_squared_distances_and_assign_match_sklearn():
    rng = np.random.default_rng(1)
    Z, C = rng.normal(size=(200, 5)), rng.normal(size=(7, 5))
    np.testing.assert_allclose(
        lloyd.squared_distances(Z, C), euclidean_distances(Z, C, squared=True), atol=1e-10
    )
    np.testing.assert_array_equal(lloyd.assign(Z, C), euclidean_distances(Z, C).argmin(axis=1))


def test_cluster_statistics_match_loop():
    rng = np.random.default_rng(2)
    Z, labels = rng.normal(size=(300, 3)), rng.integers(4, size=300)
    counts, sums = lloyd.cluster_statistics(Z, labels, 5)
    np.testing.assert_array_equal(counts, [np.sum(labels == j) for j in range(5)])
    np.testing.assert_allclose(sums, [Z[labels == j].sum(axis=0) for j in range(5)])


def _statistics_change(Z, Zp, centres, bound):
    labels, labels_p = lloyd.assign(Z, centres), lloyd.assign(Zp, centres)
    c, s = lloyd.cluster_statistics(lloyd.clip_rows(Z, bound), labels, len(centres))
    cp, sp = lloyd.cluster_statistics(lloyd.clip_rows(Zp, bound), labels_p, len(centres))
    return c - cp, s - sp


def test_sum_and_count_sensitivity_hold_and_are_attained():
    """Adversarial replace-one neighbours never exceed the sensitivities; 2C is reached.

    The paper's sqrt(2) C for the sums would be exceeded by a record replaced
    by its opposite inside the same cluster.
    """
    rng = np.random.default_rng(3)
    bound, m = 1.5, 3
    worst_count = worst_sum2 = worst_sum1 = 0.0
    for _ in range(300):
        Z = rng.normal(size=(30, m)) * 2
        centres = rng.normal(size=(4, m)) * 0.1
        i = rng.integers(30)
        Zp = Z.copy()
        Zp[i] = -Z[i] if rng.random() < 0.5 else rng.normal(size=m) * 5
        dc, ds = _statistics_change(Z, Zp, centres, bound)
        worst_count = max(worst_count, np.linalg.norm(dc))
        worst_sum2 = max(worst_sum2, np.linalg.norm(ds))
        worst_sum1 = max(worst_sum1, np.abs(ds).sum())
    assert worst_count <= lloyd.count_sensitivity(2) + 1e-12
    assert worst_sum2 <= lloyd.sum_sensitivity(bound, 2, m) + 1e-12
    assert worst_sum1 <= lloyd.sum_sensitivity(bound, 1, m) + 1e-12
    assert worst_count == pytest.approx(math.sqrt(2))
    assert worst_sum2 > math.sqrt(2) * bound * 1.2
    # Attained: a record replaced by its opposite, both nearest the centre at 0.
    Z = rng.normal(size=(30, m))
    Z[0] = [3.0, 0.0, 0.0]
    Zp = Z.copy()
    Zp[0] = -Z[0]
    centres = np.array([[0.0, 0.0, 0.0], [0.0, 50.0, 0.0]])
    _, ds = _statistics_change(Z, Zp, centres, bound)
    assert np.linalg.norm(ds) == pytest.approx(2 * bound)


def test_sensitivity_values():
    assert lloyd.count_sensitivity(2) == pytest.approx(math.sqrt(2))
    assert lloyd.count_sensitivity(1) == 2.0
    assert lloyd.sum_sensitivity(3.0, 2, 10) == 6.0
    assert lloyd.sum_sensitivity(3.0, 1, 4) == 12.0
    with pytest.raises(ValueError, match="norm"):
        lloyd.sum_sensitivity(1.0, 3, 2)


def test_count_noise_weight_minimises_the_centre_error():
    """(2d)^(1/4) minimises 4C^2 d z_S^2 + 2C^2 z_n^2 at fixed 1/z_n^2 + 1/z_S^2."""
    d = 64
    w = lloyd.count_noise_weight("gaussian", d)
    assert w == pytest.approx(128**0.25)

    def error(weight):  # fixed budget 1/z_n^2 + 1/z_S^2 = 1
        z_s = math.sqrt(1 + 1 / weight**2)
        return 4 * d * z_s**2 + 2 * (weight * z_s) ** 2

    grid = np.linspace(0.5, 10, 2000)
    assert abs(grid[np.argmin([error(g) for g in grid])] - w) < 0.01
    assert lloyd.count_noise_weight("laplace", 8) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="mechanism"):
        lloyd.count_noise_weight("exponential", 2)


def test_projection_and_reseeding():
    rng = np.random.default_rng(4)
    sums = np.array([[30.0, 40.0], [1.0, 1.0], [3.0, 0.0]])
    counts = np.array([10.0, -2.0, 0.5])
    centres, reseeded = lloyd.centres_from_noisy_statistics(
        counts, sums, 2.0, lambda idx, c, n: np.full((len(idx), 2), 9.0)
    )
    np.testing.assert_array_equal(reseeded, [False, True, True])
    np.testing.assert_allclose(centres[0], [1.2, 1.6])  # (3, 4) projected on the ball of radius 2
    np.testing.assert_array_equal(centres[1:], 9.0)
    # split_largest copies the largest kept cluster, moved by jitter * bound.
    kept = np.array([[0.0, 1.0], [5.0, 5.0], [0.5, 0.0]])
    out = lloyd.split_largest(np.array([1]), kept, np.array([3.0, 100.0, 50.0]), 2.0, rng, jitter=1e-3)
    assert np.linalg.norm(out[0] - kept[2]) == pytest.approx(2e-3)


def test_fourier_features_approximate_the_kernels():
    """z(x).z(y) is an unbiased estimate of the kernel with std <= sqrt(2/d)."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(6, 3))
    d = 20000
    for kernel, exact in [
        ("rbf", np.exp(-0.3 * euclidean_distances(X, squared=True))),
        ("laplacian", np.exp(-0.3 * np.abs(X[:, None] - X[None]).sum(-1))),
    ]:
        W, b = draw_fourier_weights(kernel, 0.3, 3, d, rng)
        Z = random_fourier_features(X, W, b)
        assert np.all(np.linalg.norm(Z, axis=1) <= math.sqrt(2))
        np.testing.assert_allclose(Z @ Z.T, exact, atol=5 * math.sqrt(2 / d))
    with pytest.raises(ValueError, match="kernel"):
        draw_fourier_weights("poly", 1.0, 2, 3, rng)


# --------------------------------------------------------------------------
# privacy plan and accounting
# --------------------------------------------------------------------------


def _analytic_gaussian_delta(multiplier, epsilon):
    # Balle & Wang (2018), Thm. 8, for sensitivity 1 and std `multiplier`.
    a = 1 / (2 * multiplier)
    return norm.cdf(a - epsilon * multiplier) - math.exp(epsilon) * norm.cdf(-a - epsilon * multiplier)


@pytest.mark.parametrize(("epsilon", "max_iter", "weight"), [(1.0, 5, 1.0), (0.3, 10, 3.0), (4.0, 2, 2.0)])
def test_calibration_reproduces_epsilon_independently(epsilon, max_iter, weight):
    """The T Gaussian pairs compose into one Gaussian with (sum 1/z_i^2)^(-1/2)."""
    delta = 1e-5
    z = lloyd.lloyd_noise_multiplier(max_iter, "gaussian", 0, weight, epsilon, delta, "rdp")
    combined = (max_iter / z**2 + max_iter / (weight * z) ** 2) ** -0.5
    assert _analytic_gaussian_delta(combined, epsilon) <= delta * (1 + 1e-6)
    assert _analytic_gaussian_delta(combined, epsilon) >= delta * 0.999
    # 5 % less noise breaks the target.
    assert _analytic_gaussian_delta(combined * 0.95, epsilon) > delta


def test_laplace_basic_calibration_closed_form():
    z = lloyd.lloyd_noise_multiplier(3, "laplace", 0, 4.0, 1.0, 0.0, "basic")
    # epsilon = T / (w z) + T / z
    assert 3 / (4 * z) + 3 / z == pytest.approx(1.0, rel=1e-5)


@pytest.mark.parametrize("clip_norm", [1.0, "auto"])
def test_kernel_ledger_matches_plan(clip_norm):
    X, _ = blobs(600)
    km = DPKernelKMeans(
        3, epsilon=1.0, gamma=1.0, n_components=50, clip_norm=clip_norm, max_iter=4, random_state=0
    ).fit(X)
    z, w = km.noise_multiplier_, lloyd.count_noise_weight("gaussian", 50)
    events = km.privacy_ledger_.events
    n_norm = int(clip_norm == "auto")
    assert len(events) == 8 + n_norm
    assert all(type(e) is GaussianEvent and e.neighbouring == "replace_one" for e in events)
    multipliers = sorted(e.noise_multiplier for e in events)
    expected = sorted([z] * (4 + n_norm) + [z * w] * 4)
    np.testing.assert_allclose(multipliers, expected, rtol=1e-12)
    assert km.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-4)
    assert km.privacy_spent_.epsilon <= 1.0
    assert km.privacy_spent_.delta == 1e-5


def test_gaussian_noise_scales(release_spy):
    """Sizes get N(0, sqrt(2) w z), sums N(0, 2 C z): checked on the mechanisms and the noise."""
    X, _ = blobs(1000)
    km = DPKernelKMeans(3, epsilon=0.5, gamma=1.0, n_components=2000, max_iter=3, random_state=1).fit(X)
    z, w = km.noise_multiplier_, lloyd.count_noise_weight("gaussian", 2000)
    assert len(release_spy) == 6
    counts, sums = release_spy[0::2], release_spy[1::2]
    for sens, scale, _, _ in counts:
        assert sens == pytest.approx(math.sqrt(2)) and scale == pytest.approx(math.sqrt(2) * w * z)
    for sens, scale, _, _ in sums:
        assert sens == pytest.approx(2.0) and scale == pytest.approx(2.0 * z)
    noise = np.concatenate([n.ravel() for _, _, n, _ in sums])  # 18000 draws
    assert abs(noise.std() - 2 * z) < 4 * 2 * z / math.sqrt(2 * noise.size)


def test_laplace_scales_and_pure_dp(release_spy):
    X, _ = blobs(1000)
    km = DPKMeans(
        3, epsilon=2.0, delta=0.0, data_norm=5.0, mechanism="laplace", composition="basic", max_iter=2
    )
    km.set_params(random_state=0).fit(X)
    z, w = km.noise_multiplier_, lloyd.count_noise_weight("laplace", 2)
    assert [type(e[3]) for e in release_spy] == [LaplaceEvent] * 4
    assert release_spy[0][0] == 2.0 and release_spy[0][1] == pytest.approx(2 * w * z)
    assert release_spy[1][0] == pytest.approx(2 * math.sqrt(2) * 5.0)
    assert release_spy[1][1] == pytest.approx(2 * math.sqrt(2) * 5.0 * z)
    assert km.privacy_spent_.delta == 0.0
    assert km.privacy_spent_.epsilon == pytest.approx(2.0, rel=1e-5)


def test_every_row_is_clipped(monkeypatch):
    seen = []
    original = lloyd.cluster_statistics

    def spy(Z, labels, k):
        seen.append(np.linalg.norm(Z, axis=1).max())
        return original(Z, labels, k)

    monkeypatch.setattr(lloyd, "cluster_statistics", spy)
    X, _ = blobs(500)
    DPKMeans(3, data_norm=0.7, max_iter=3, random_state=0).fit(X * 100)
    assert len(seen) == 3 and max(seen) <= 0.7 * (1 + 1e-12)
    seen.clear()
    DPKernelKMeans(3, clip_norm=0.4, max_iter=2, random_state=0).fit(X)
    assert len(seen) == 2 and max(seen) <= 0.4 * (1 + 1e-12)


def test_budget_accountant_is_charged():
    from skdp.privacy import BudgetAccountant

    budget = BudgetAccountant(epsilon=1.5, delta=1e-4)
    X, _ = blobs(300)
    DPKMeans(3, epsilon=1.0, data_norm=6.0, accountant=budget, random_state=0).fit(X)
    with pytest.raises(Exception, match="(?i)budget"):
        DPKMeans(3, epsilon=1.0, data_norm=6.0, accountant=budget, random_state=0).fit(X)


# --------------------------------------------------------------------------
# behaviour and API
# --------------------------------------------------------------------------


def test_dpkmeans_recovers_blobs_with_public_init():
    X, y = blobs(6000)
    init = np.array([[-1.0, -1.0], [1.0, -1.0], [0.0, 1.0]])
    km = DPKMeans(3, epsilon=1.0, data_norm=5.0, init=init, max_iter=5, random_state=0).fit(X)
    assert adjusted_rand_score(y, km.predict(X)) > 0.95
    np.testing.assert_allclose(km.cluster_centers_, [[-3, -3], [3, -3], [0, 3]], atol=0.3)


def test_dpkmeans_random_init_finds_blobs():
    X, y = blobs(6000)
    scores = [
        adjusted_rand_score(
            y, DPKMeans(3, epsilon=3.0, data_norm=5.0, max_iter=6, random_state=s).fit_predict(X)
        )
        for s in range(5)
    ]
    assert np.median(scores) > 0.9


def test_kernel_kmeans_separates_circles_where_kmeans_cannot():
    X, y = make_circles(n_samples=4000, factor=0.3, noise=0.05, random_state=0)
    init = [[0.0, 0.0], [1.0, 0.0]]  # public: a point of each circle
    # With 200 random features one draw in four or so separates the circles
    # poorly (a feature map, not the noise): judge the method by its median.
    kernel = [DPKernelKMeans(2, epsilon=3.0, gamma=5.0, init=init, random_state=s).fit(X) for s in range(5)]
    linear = DPKMeans(2, epsilon=3.0, data_norm=1.2, init=init, random_state=0).fit(X)
    assert np.median([adjusted_rand_score(y, k.predict(X)) for k in kernel]) > 0.9
    assert adjusted_rand_score(y, linear.predict(X)) < 0.2


def test_post_processing_api_is_consistent():
    X, _ = blobs(900)
    for km in (
        DPKMeans(3, data_norm=5.0, random_state=0).fit(X),
        DPKernelKMeans(3, gamma=0.2, random_state=0).fit(X),
    ):
        D = km.transform(X)
        assert D.shape == (900, 3)
        np.testing.assert_array_equal(km.predict(X), D.argmin(axis=1))
        assert km.score(X) == pytest.approx(-(D.min(axis=1) ** 2).sum())
        assert km.n_iter_ == 5
        assert list(km.get_feature_names_out()) == [f"{type(km).__name__.lower()}{i}" for i in range(3)]
    assert km.cluster_centers_.shape == (3, 200)
    assert km.random_weights_.shape == (2, 200) and km.random_offset_.shape == (200,)


CLUSTERERS = [
    DPKMeans(3, data_norm=5.0, random_state=0),
    DPKMeans(
        3, data_norm=5.0, init=[[-3, -3], [3, -3], [0, 3]], mechanism="laplace", delta=0.0, random_state=0
    ),
    DPKernelKMeans(3, gamma=0.2, n_components=50, random_state=0),
    DPKernelKMeans(3, gamma=0.2, n_components=50, clip_norm="auto", random_state=0),
]


def _arrays(obj, seen=None):
    """Every ndarray reachable from ``obj`` through dicts, lists, tuples and __dict__."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _arrays(value, seen)
    elif isinstance(obj, list | tuple | set | frozenset):
        for value in obj:
            yield from _arrays(value, seen)
    elif hasattr(obj, "__dict__"):
        yield from _arrays(vars(obj), seen)


@pytest.mark.parametrize("est", CLUSTERERS, ids=lambda e: f"{type(e).__name__}-{e.mechanism}")
def test_fitted_clusterer_holds_nothing_per_training_row(est):
    """No labels_, no inertia_, no array with a row per training record, in the model or its pickle."""
    X, _ = blobs(301)  # a row count no other dimension of the model has
    km = clone(est).fit(X)
    restored = pickle.loads(pickle.dumps(km))
    for model in (km, restored):
        assert not hasattr(model, "labels_") and not hasattr(model, "inertia_")
        fitted = set(vars(model)) - set(model.get_params()) - {"_sklearn_version"}
        assert fitted <= type(model)._release_surface(), fitted - type(model)._release_surface()
        assert not [a.shape for a in _arrays(model) if a.ndim and a.shape[0] == len(X)]
    np.testing.assert_array_equal(restored.predict(X), km.predict(X))


@pytest.mark.parametrize("est", CLUSTERERS, ids=lambda e: f"{type(e).__name__}-{e.mechanism}")
def test_fit_predict_returns_labels_of_X_and_stores_none(est):
    X, _ = blobs(301)
    km = clone(est)
    labels = km.fit_predict(X)
    assert labels.shape == (301,) and labels.dtype.kind == "i"
    np.testing.assert_array_equal(labels, km.predict(X))
    # The same fit as fit(): same releases, same guarantee.
    ref = clone(est).fit(X)
    np.testing.assert_array_equal(km.cluster_centers_, ref.cluster_centers_)
    assert km.privacy_spent_ == ref.privacy_spent_
    assert not hasattr(km, "labels_") and not hasattr(km, "inertia_")
    # The opt-in diagnostic: -score(X) is the exact objective of X, computed
    # on request and never stored.
    D = km.transform(X)
    assert -km.score(X) == pytest.approx((D.min(axis=1) ** 2).sum())
    assert not hasattr(km, "inertia_")


def test_fit_predict_reserves_and_validates_like_fit():
    budget = BudgetAccountant(epsilon=1.0, delta=1e-5)
    X, _ = blobs(300)
    DPKMeans(3, epsilon=0.6, data_norm=5.0, accountant=budget, random_state=0).fit_predict(X)
    with pytest.raises(Exception, match="(?i)budget"):
        DPKMeans(3, epsilon=0.6, data_norm=5.0, accountant=budget, random_state=0).fit_predict(X)
    with pytest.raises(ValueError, match="n_clusters"):
        DPKMeans(n_clusters=0).fit_predict(X)


def test_reproducible_with_random_state():
    X, _ = blobs(500)
    for est in (DPKMeans(3, data_norm=5.0), DPKernelKMeans(3, clip_norm="auto")):
        a = clone(est).set_params(random_state=7).fit(X).cluster_centers_
        b = clone(est).set_params(random_state=7).fit(X).cluster_centers_
        c = clone(est).set_params(random_state=8).fit(X).cluster_centers_
        np.testing.assert_array_equal(a, b)
        assert not np.allclose(a, c)


def test_data_norm_none_warns_and_uses_max_norm():
    X, _ = blobs(500)
    with pytest.warns(PrivacyLeakWarning, match="data_norm"):
        km = DPKMeans(3, data_norm="nonprivate", random_state=0).fit(X)
    assert km.data_norm_ == pytest.approx(np.linalg.norm(X, axis=1).max())
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        DPKMeans(3, data_norm=5.0, random_state=0).fit(X)
        DPKernelKMeans(3, random_state=0).fit(X)


def test_reseeding_keeps_centres_finite_and_bounded():
    X, _ = blobs(200)
    km = DPKMeans(20, epsilon=0.05, data_norm=5.0, max_iter=5, random_state=0).fit(X)
    assert km.n_reseeded_ > 0
    assert np.all(np.isfinite(km.cluster_centers_))
    assert np.all(np.linalg.norm(km.cluster_centers_, axis=1) <= 5.0 * (1 + 1e-9))


def test_public_init_is_reseed_source():
    X, _ = blobs(300)
    init = np.array([[0.0, 0.0], [50.0, 50.0]])  # second centre is clipped to the ball, far from data
    km = DPKMeans(2, epsilon=0.5, data_norm=4.0, init=init, max_iter=1, random_state=3).fit(X)
    if km.n_reseeded_:
        np.testing.assert_allclose(km.cluster_centers_[1], init[1] * 4.0 / np.linalg.norm(init[1]))
    kernel = DPKernelKMeans(2, init=init, random_state=0).fit(X)
    assert kernel.cluster_centers_.shape == (2, 200)


def test_grid_search_and_pipeline_over_epsilon():
    X, _ = blobs(1500)
    pipe = Pipeline([("km", DPKMeans(3, data_norm=5.0, max_iter=5, random_state=0))])
    search = GridSearchCV(pipe, {"km__epsilon": [0.01, 10.0]}, cv=3).fit(X)
    # Higher epsilon, less noise, lower held-out k-means objective.
    assert search.best_params_ == {"km__epsilon": 10.0}
    assert search.best_estimator_["km"].privacy_spent_.epsilon <= 10.0


# --------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------


@pytest.mark.parametrize("Est", [DPKMeans, DPKernelKMeans])
def test_bad_input(Est):
    X, _ = blobs(100)
    with pytest.raises(ValueError, match="NaN"):
        Est(3, random_state=0).fit(np.where(np.arange(200).reshape(100, 2) == 5, np.nan, X))
    with pytest.raises(ValueError, match="infinity|inf"):
        Est(3, random_state=0).fit(np.where(np.arange(200).reshape(100, 2) == 5, np.inf, X))
    with pytest.raises(ValueError, match="n_samples=2 should be >= n_clusters=3"):
        Est(3, random_state=0).fit(X[:2])
    with pytest.raises(ValueError, match="2D array"):
        Est(3, random_state=0).fit(X[:, 0])
    with pytest.raises(ValueError, match="init"):
        Est(3, init=np.zeros((2, 2)), random_state=0).fit(X)
    with pytest.raises(ValueError, match="init"):
        Est(3, init=np.full((3, 2), np.nan), random_state=0).fit(X)
    with pytest.raises(ValueError, match="epsilon"):
        Est(3, epsilon=0.0).fit(X)
    with pytest.raises(ValueError, match="delta"):
        Est(3, delta=0.0).fit(X)
    with pytest.raises(ValueError, match="n_clusters"):
        Est(0).fit(X)
    km = Est(3, random_state=0, **({"data_norm": 5.0} if Est is DPKMeans else {})).fit(X)
    with pytest.raises(ValueError, match="features"):
        km.predict(np.zeros((3, 5)))


def test_bad_hyperparameters_named():
    X, _ = blobs(100)
    with pytest.raises(ValueError, match="data_norm"):
        DPKMeans(3, data_norm=-1.0).fit(X)
    with pytest.raises(ValueError, match="mechanism"):
        DPKMeans(3, mechanism="exponential").fit(X)
    with pytest.raises(ValueError, match="clip_norm"):
        DPKernelKMeans(3, clip_norm="max").fit(X)
    with pytest.raises(ValueError, match="kernel"):
        DPKernelKMeans(3, kernel="poly").fit(X)
    with pytest.raises(ValueError, match="gamma"):
        DPKernelKMeans(3, gamma=0).fit(X)
    with pytest.raises(ValueError, match="count_noise_weight"):
        DPKernelKMeans(3, count_noise_weight=-1).fit(X)
    with pytest.raises(ValueError, match="composition"):
        DPKernelKMeans(3, composition="moments").fit(X)


def test_ledger_is_fresh_per_fit():
    X, _ = blobs(300)
    # bounds=None: the declared ball alone, nothing released but the iterations' 2 T events.
    km = DPKMeans(3, data_norm=5.0, bounds=None, max_iter=2, random_state=0)
    km.fit(X)
    km.fit(X)
    assert isinstance(km.privacy_ledger_, PrivacyLedger)
    assert len(km.privacy_ledger_) == 4
    # With the default bounds="auto" at this n * epsilon the box's events come first, once per fit.
    boxed = DPKMeans(3, data_norm=5.0, max_iter=2, random_state=0).fit(X)
    n_events = len(boxed.privacy_ledger_)
    assert n_events > 4 and len(boxed.fit(X).privacy_ledger_) == n_events


def test_huge_finite_rows_are_handled():
    Z = np.array([[1e300, 1e300], [3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(lloyd.row_norms(Z), [math.sqrt(2) * 1e300, 5.0, 0.0])
    np.testing.assert_allclose(np.linalg.norm(lloyd.clip_rows(Z, 1.0), axis=1), [1.0, 1.0, 0.0])
    W, b = draw_fourier_weights("rbf", 1.0, 2, 10, np.random.default_rng(0))
    assert np.all(np.isfinite(random_fourier_features(np.array([[1.7e308, 1.7e308]]), W * 1e10, b)))
    X, _ = blobs(100)
    X[0] = 1.5e308
    with pytest.raises(ValueError, match="data_norm"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DPKMeans(3, data_norm="nonprivate", random_state=0).fit(X)
    km = DPKMeans(3, data_norm=5.0, random_state=0).fit(X)
    assert np.all(np.isfinite(km.cluster_centers_))


# --------------------------------------------------------------------------
# max_iter="auto": a public rule for the number of iterations
# --------------------------------------------------------------------------


def test_relative_centre_noise_closed_form():
    # Gaussian: 2 z per coordinate, sqrt(d) coordinates, over n / k rows.
    assert lloyd.relative_centre_noise(3.0, "gaussian", 1000, 10, 100) == pytest.approx(
        2 * 3 * 10 * 10 / 1000
    )
    # Laplace: std sqrt(2) b, b = 2 sqrt(m) z.
    expected = math.sqrt(2) * 2 * math.sqrt(4) * 3.0 * math.sqrt(4) * 10 / 1000
    assert lloyd.relative_centre_noise(3.0, "laplace", 1000, 10, 4) == pytest.approx(expected)
    with pytest.raises(ValueError, match="mechanism"):
        lloyd.relative_centre_noise(1.0, "cauchy", 10, 2, 2)


def test_auto_max_iter_picks_largest_admissible_iteration_count():
    # z(T) = sqrt(T): relative noise 2 sqrt(T) sqrt(d) k / n = 0.2 sqrt(T) for
    # n = 100, k = 10, d = 1; <= 0.5 iff T <= 6.25.
    calls = []

    def z_of(T):
        calls.append(T)
        return math.sqrt(T)

    assert lloyd.auto_max_iter(z_of, "gaussian", 100, 10, 1) == 6
    assert calls == list(range(1, 8))  # stops at the first T over the ratio
    assert lloyd.auto_max_iter(z_of, "gaussian", 10**6, 10, 1) == lloyd.AUTO_MAX_ITER
    # Even a hopeless plan runs one iteration.
    assert lloyd.auto_max_iter(z_of, "gaussian", 10, 10, 1) == 1


@pytest.mark.parametrize("Est", [DPKMeans, DPKernelKMeans])
def test_auto_max_iter_in_fit_matches_rule_and_plan(Est):
    X, _ = blobs(3000)
    kwargs = {"data_norm": 5.0} if Est is DPKMeans else {"n_components": 20, "gamma": 1.0}
    km = Est(3, epsilon=2.0, max_iter="auto", random_state=0, **kwargs).fit(X)
    dim = km.cluster_centers_.shape[1]
    w = lloyd.count_noise_weight("gaussian", dim)
    # DPKMeans at n * eps = 6000 starts from its private coreset (its events first in the plan).
    started = Est is DPKMeans

    def z_of(T):
        start = functools.partial(cs.start_events, ratio=cs.start_noise_ratio(T, w)) if started else None
        return lloyd.lloyd_noise_multiplier(T, "gaussian", 0, w, 2.0, 1e-5, "pld", start=start)

    if Est is DPKMeans:  # DPKMeans' own rule: a floor of 5, a tenth of C, at most 20
        rule = dict(
            ratio=lloyd.KMEANS_AUTO_NOISE_RATIO,
            max_iter=lloyd.KMEANS_AUTO_MAX_ITER,
            min_iter=lloyd.KMEANS_AUTO_MIN_ITER,
        )
    else:
        rule = {}
    T = lloyd.auto_max_iter(z_of, "gaussian", 3000, 3, dim, **rule)
    assert 1 < T <= rule.get("max_iter", lloyd.AUTO_MAX_ITER)
    assert km.n_iter_ == T
    assert km.noise_multiplier_ == pytest.approx(z_of(T), rel=1e-12)
    events = km.privacy_ledger_.events
    z = z_of(T)
    planned = [z] * T + [w * z] * T
    if started:
        a = cs.start_noise_ratio(T, w)
        assert cs.start_resolves(a * z, "gaussian", 3000, 3, dim)
        planned += [a * cs.CORESET_COUNT_WEIGHT * z] * cs.CORESET_MAX_DEPTH + [a * z]
    assert sum(e.count for e in events) == len(planned)
    got = [e.noise_multiplier for e in events for _ in range(e.count)]
    assert sorted(got) == pytest.approx(sorted(planned))
    assert km.privacy_spent_.epsilon == pytest.approx(2.0, rel=1e-4)
    # The rule reads the shape only: other data of the same shape, same T.
    other = km.set_params(random_state=1).fit(np.random.default_rng(0).normal(size=X.shape))
    assert other.n_iter_ == T


def test_auto_max_iter_grows_with_n_and_epsilon():
    def n_iter(n, eps):
        X, _ = blobs(n)
        return DPKMeans(3, epsilon=eps, data_norm=5.0, max_iter="auto", random_state=0).fit(X).n_iter_

    # n = 30, eps = 0.1: z(1) ~ 30, noise 2 z sqrt(2) 3 / 30 >> 0.1: the floor of 5.
    assert n_iter(30, 0.1) == lloyd.KMEANS_AUTO_MIN_ITER
    assert n_iter(30, 0.1) <= n_iter(300, 0.5) <= n_iter(3000, 0.5) <= n_iter(3000, 5.0)
    assert n_iter(3000, 5.0) > lloyd.KMEANS_AUTO_MIN_ITER


def test_kernel_kmeans_features_do_not_come_from_the_noise_stream():
    # random_weights_ is released verbatim: thousands of consecutive outputs of
    # the noise generator would let PCG64's state, hence the noise, be
    # recovered.  They come from a spawned child stream instead, still
    # reproducible from an int seed.
    X = np.random.default_rng(0).normal(size=(60, 3))
    model = DPKernelKMeans(n_clusters=2, gamma=0.5, random_state=11).fit(X)
    again = DPKernelKMeans(n_clusters=2, gamma=0.5, random_state=11).fit(X)
    np.testing.assert_array_equal(model.random_weights_, again.random_weights_)
    noise_stream = np.random.default_rng(11).standard_normal(model.random_weights_.shape)
    assert not np.allclose(model.random_weights_, np.sqrt(2 * 0.5) * noise_stream)
    child = np.random.default_rng(np.random.SeedSequence(11).spawn(1)[0])
    np.testing.assert_allclose(
        model.random_weights_, np.sqrt(2 * 0.5) * child.standard_normal(noise_stream.shape)
    )


def _cluster_import_graph():
    """Relative imports between the modules of skdp.cluster, function-level imports included."""
    import ast
    from pathlib import Path

    import skdp.cluster

    modules = {p.stem: p for p in Path(skdp.cluster.__file__).parent.glob("*.py")}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
        graph[name] = deps & modules.keys()
    return graph


def _cycles(graph):
    """Every module that can reach itself through the graph."""
    cyclic = []
    for start in graph:
        seen, stack = set(), list(graph[start])
        while stack:
            node = stack.pop()
            if node == start:
                cyclic.append(start)
                break
            if node not in seen:
                seen.add(node)
                stack.extend(graph[node])
    return cyclic


def test_cluster_modules_import_no_cycle():
    # The check can fail: a graph with the old _rows <-> _kernel_kmeans edge is cyclic.
    assert _cycles({"_rows": {"_kernel_kmeans"}, "_kernel_kmeans": {"_rows"}}) == ["_rows", "_kernel_kmeans"]
    graph = _cluster_import_graph()
    assert graph["_rows"] >= {"_fourier"} and graph["_kernel_kmeans"] >= {"_fourier"}
    assert _cycles(graph) == []


# ------------------------------- no parameter whose value is 'deprecated' ---


@pytest.mark.parametrize("old", ["clip", "clip_max", "n_bins"])
def test_kernel_has_no_deprecated_parameters(old):
    # The pre-release spellings are gone: get_params carries no 'deprecated' value.
    assert all(value != "deprecated" for value in DPKernelKMeans().get_params().values())
    with pytest.raises(TypeError, match=old):
        DPKernelKMeans(3, **{old: 1.0})


# --- data_norm="auto": a private centre and bound (skdp.privacy.centring) ---------


def _auto_blobs(shift=10.0):
    X, y = blobs()
    return X + shift, y


def _event_signature(events):
    """Type, count and cost of each event; multipliers to 12 digits.

    A mechanism records ``scale / sensitivity``, which for a released bound
    ``R`` (sensitivity ``2 R``) is the planned multiplier up to the last bit.
    """
    return [
        (type(e), e.count, getattr(e, "epsilon", None), round(getattr(e, "noise_multiplier", 0.0), 12))
        for e in events
    ]


def test_kmeans_auto_data_norm_events_and_original_coordinates():
    """Bounds' events first (their calibrated cost), the plan's after; the total meets the request."""
    from skdp.privacy import PureDPEvent
    from skdp.privacy.centring import calibrate_auto_bounds

    X, y = _auto_blobs()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # nothing read off the data
        # Public initial centres in the original coordinates (shifted with the rows).
        init = [[6.0, 6.0], [14.0, 6.0], [10.0, 14.0]]
        km = DPKMeans(3, epsilon=5.0, data_norm="auto", max_iter=3, init=init, random_state=0).fit(X)
    events = km.privacy_ledger_.events
    bounds = calibrate_auto_bounds(5.0, 1e-5, 0.1)
    quantile, centre = bounds.events()
    assert (
        _event_signature(events[:3])
        == _event_signature(
            [PureDPEvent(count=1, neighbouring="replace_one", epsilon=quantile.epsilon), centre] * 2
        )[:3]
    )
    assert len(events) == 3 + 2 * 3 and all(type(e) is GaussianEvent for e in events[3:])
    assert km.privacy_spent_.epsilon <= 5.0 * (1 + 1e-9)
    # Centred at the data's middle (10, 10 - 1), bound of the centred rows, centres back in place.
    np.testing.assert_allclose(km.centre_, [10.0, 9.0], atol=0.5)
    assert 2.0 < km.data_norm_ < 6.0
    truth = np.array([[7.0, 7.0], [13.0, 7.0], [10.0, 13.0]])
    assert euclidean_distances(truth, km.cluster_centers_).min(axis=1).max() < 0.5
    assert adjusted_rand_score(y, km.predict(X)) > 0.95
    assert -km.score(X) / len(X) < 1.0


def test_kmeans_auto_plan_is_public_and_chunks_release_the_same():
    from skdp._chunks import as_chunked

    X, _ = _auto_blobs()
    params = dict(n_clusters=3, epsilon=1.0, data_norm="auto", max_iter=2, random_state=0)
    km = DPKMeans(**params).fit(X)
    dry = DPKMeans(**params).fit(np.zeros_like(X))
    assert _event_signature(km.privacy_ledger_.events) == _event_signature(dry.privacy_ledger_.events)
    chunked = DPKMeans(**params).fit(as_chunked(X, chunk_size=700))
    np.testing.assert_allclose(chunked.centre_, km.centre_, rtol=1e-9)
    np.testing.assert_allclose(chunked.cluster_centers_, km.cluster_centers_, rtol=1e-9, atol=1e-9)
    assert chunked.data_norm_ == km.data_norm_
    # A declared bound holds no centre (one from an earlier auto fit is dropped).
    km.set_params(data_norm=20.0).fit(X)
    assert not hasattr(km, "centre_")


def test_kmeans_auto_clips_an_outlier():
    """One row moved to 1e6 moves the released centre by O(R0 / n), not by 1e6 / n."""
    X, _ = _auto_blobs()
    far = X.copy()
    far[0] = 1e6
    params = dict(n_clusters=3, epsilon=8.0, data_norm="auto", max_iter=1, random_state=0)
    a, b = DPKMeans(**params).fit(X), DPKMeans(**params).fit(far)
    assert b.data_norm_ < 10.0
    assert np.linalg.norm(a.centre_ - b.centre_) < 0.1  # unclipped: 1e6 sqrt(2) / 3000 = 471


def test_kmeans_auto_refuses_secure_noise():
    with pytest.raises(ValueError, match="secure"):
        DPKMeans(3, data_norm="auto", secure_noise=True).fit(_auto_blobs()[0])


def test_kmeans_auto_share_grows_until_the_quantile_can_be_located():
    """bounds_budget="auto": the centring's share is the smallest in BOX_SHARES that locates a
    quantile with the public n; a declared share is used as given."""
    from skdp.privacy.centring import calibrate_auto_bounds, can_locate_quantile
    from skdp.privacy.quantiles import BOX_SHARES

    X, _ = _auto_blobs()
    for n, eps in ((3000, 1.0), (150, 3.0), (150, 10.0)):
        km = DPKMeans(3, epsilon=eps, random_state=0).fit(X[:n])
        first = km.privacy_ledger_.events[0]
        share = next(
            s
            for s in BOX_SHARES
            if can_locate_quantile(n, calibrate_auto_bounds(eps, 1e-5, s).quantile_epsilon)
        )
        assert first.epsilon == pytest.approx(calibrate_auto_bounds(eps, 1e-5, share).quantile_epsilon)
        assert not hasattr(km, "bounds_") and km.privacy_spent_.epsilon <= eps * (1 + 1e-9)
    assert share > 0.1  # n = 150 at epsilon 10 needs more than the declared default share
    km = DPKMeans(3, epsilon=10.0, bounds_budget=0.1, random_state=0).fit(X[:150])
    assert km.privacy_ledger_.events[0].epsilon == pytest.approx(
        calibrate_auto_bounds(10.0, 1e-5, 0.1).quantile_epsilon
    )


def test_kmeans_small_n_epsilon_releases_a_box_near_the_data():
    """Where no share locates a norm quantile, the default releases a histogram box (its events
    first, from the public plan), never far beyond the data, and fits as with a declared box."""
    from skdp.privacy.quantiles import calibrate_histogram_bounds, histogram_box_share

    X, _ = _auto_blobs(shift=100.0)  # rows near (100, 100): a ball at the origin would be far off
    X = X[:150]
    km = DPKMeans(3, epsilon=1.0, random_state=0).fit(X)
    share = histogram_box_share(150, 1.0, 1e-5, 2, "pld")
    plan = calibrate_histogram_bounds(1.0, 1e-5, 2, share, "pld", scale=True)
    events = km.privacy_ledger_.events
    # The row-scale histogram, then two column histograms, recorded one by one.
    planned, planned_scale = plan.events()
    assert planned.count == 2 and planned_scale.count == 1
    assert planned_scale.noise_multiplier == pytest.approx(planned.noise_multiplier / np.sqrt(2))
    assert (
        _event_signature(events[:3])
        == [(GaussianEvent, 1, None, round(planned_scale.noise_multiplier, 12))]
        + [(GaussianEvent, 1, None, round(planned.noise_multiplier, 12))] * 2
    )
    assert all(type(e) is GaussianEvent for e in events)
    assert km.privacy_spent_.epsilon <= 1.0 * (1 + 1e-9)
    low, high = km.bounds_
    # Every released end lies in a log bin that holds data (or is the data-free [0, 1]).
    assert np.all(low >= -2 * np.abs(X).max()) and np.all(high <= 2 * np.abs(X).max())
    np.testing.assert_allclose(km.centre_, (low + high) / 2)
    assert km.data_norm_ == pytest.approx(np.linalg.norm(high - low) / 2)
    assert np.all(km.cluster_centers_ >= low - 1e-9) and np.all(km.cluster_centers_ <= high + 1e-9)
    # The plan reads only public quantities: zeros record the same events.
    dry = DPKMeans(3, epsilon=1.0, random_state=0).fit(np.zeros_like(X))
    assert _event_signature(dry.privacy_ledger_.events) == _event_signature(events)
    # Chunked rows release the same box and centres.
    from skdp._chunks import as_chunked

    chunked = DPKMeans(3, epsilon=1.0, random_state=0).fit(as_chunked(X, chunk_size=40))
    np.testing.assert_allclose(chunked.bounds_, km.bounds_)
    np.testing.assert_allclose(chunked.cluster_centers_, km.cluster_centers_, rtol=1e-9, atol=1e-9)
    # A refit at a declared norm and no box forgets the released box.
    km.set_params(data_norm=200.0, bounds=None).fit(X)
    assert not hasattr(km, "bounds_") and not hasattr(km, "centre_")


def test_declared_norm_at_small_n_epsilon_releases_a_box_inside_its_ball():
    """A declared data_norm C with bounds="auto", where n * epsilon is too small to locate a
    norm quantile: the histogram box is released as with data_norm="auto" (its events first),
    post-processed into [-C, C]; a column it cannot locate takes [-C, C], the declared domain,
    not the data-free [0, 1]; the rows' bound is at most C.  Where a quantile can be located the
    declared ball alone is used, as with bounds=None."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 0.5, size=(150, 4))  # a corner of the unit ball
    km = DPKMeans(3, epsilon=1.0, data_norm=1.0, random_state=0).fit(X)
    low, high = km.bounds_
    assert np.all(low >= -1.0) and np.all(high <= 1.0) and np.all(low < high)
    assert km.data_norm_ <= 1.0
    free = DPKMeans(3, epsilon=1.0, random_state=0).fit(X)
    # The same plan as the default's box (the declared norm adds no release).
    assert _event_signature(km.privacy_ledger_.events[:3]) == _event_signature(free.privacy_ledger_.events[:3])
    assert km.privacy_spent_.epsilon <= 1.0 * (1 + 1e-9)
    # Too few rows for any column: every column takes [-C, C].
    tiny = DPKMeans(3, epsilon=0.05, data_norm=1.0, random_state=0).fit(X)
    np.testing.assert_array_equal(tiny.bounds_[0], -1.0)
    np.testing.assert_array_equal(tiny.bounds_[1], 1.0)
    # Many rows: the declared ball, nothing released but the iterations.
    big = rng.uniform(0.0, 0.5, size=(20_000, 4))
    ball = DPKMeans(3, epsilon=1.0, data_norm=1.0, random_state=0).fit(big)
    assert not hasattr(ball, "bounds_") and ball.data_norm_ == 1.0
    assert len(ball.privacy_ledger_.events) == len(
        DPKMeans(3, epsilon=1.0, data_norm=1.0, bounds=None, random_state=0).fit(big).privacy_ledger_.events
    )


def test_a_ball_under_heavy_noise_takes_the_box_rules_on_its_inscribed_cube():
    """The ball around DPKMeans' released centre (data_norm="auto", no box): where the noise on an
    average centre exceeds BALL_PRIOR_NOISE of the radius (public), the fit starts on the diagonal of
    the cube inscribed in the ball and shrinks every update towards the previous centres with the
    ball's uniform prior variance C^2 / (d + 2); below it the plain update (no prior) is kept, and
    a declared ball (not necessarily centred on the data) and DPKernelKMeans keep it always."""
    from unittest import mock

    import skdp.cluster._base as base
    from skdp.cluster._lloyd import relative_centre_noise

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)) + 50.0

    def run(**params):
        km = DPKMeans(3, bounds=None, max_iter=3, random_state=0, **params)
        with (
            mock.patch.object(base, "box_diagonal_centres", wraps=base.box_diagonal_centres) as diagonal,
            mock.patch.object(base, "release_centres", wraps=base.release_centres) as release,
        ):
            km.fit(X)
        noise = relative_centre_noise(km.noise_multiplier_, "gaussian", 300, 3, 4)
        priors = [call.kwargs.get("prior_var") for call in release.call_args_list]
        return km, noise, diagonal, priors

    km, noise, diagonal, priors = run(epsilon=0.3)
    assert noise > base.BALL_PRIOR_NOISE
    (lower, upper, k), _ = diagonal.call_args
    np.testing.assert_allclose(upper, km.data_norm_ / 2.0)
    np.testing.assert_allclose(lower, -km.data_norm_ / 2.0)
    assert k == 3
    assert len(priors) == 3 and all(p is not None for p in priors)
    np.testing.assert_allclose(priors[0], km.data_norm_**2 / 6.0)
    assert np.all(np.linalg.norm(km.cluster_centers_ - km.centre_, axis=1) <= km.data_norm_ * (1 + 1e-9))
    km, noise, diagonal, priors = run(epsilon=50.0)
    assert noise < base.BALL_PRIOR_NOISE and not diagonal.called and all(p is None for p in priors)
    km, noise, diagonal, priors = run(epsilon=0.3, data_norm=80.0)
    assert noise > base.BALL_PRIOR_NOISE and not diagonal.called and all(p is None for p in priors)
    with mock.patch.object(base, "release_centres", wraps=base.release_centres) as release:
        DPKernelKMeans(3, epsilon=0.05, max_iter=2, random_state=0).fit(X)
    assert all(call.kwargs.get("prior_var") is None for call in release.call_args_list)


def test_kmeans_box_that_locates_nothing_warns():
    """Too few rows for the histogram's noise: the data-free [0, 1] per column, with a warning
    naming what to declare (no data value)."""
    X, _ = _auto_blobs(shift=100.0)
    with pytest.warns(UserWarning, match="Declare bounds"):
        km = DPKMeans(3, epsilon=0.3, random_state=0).fit(X[:60])
    assert hasattr(km, "bounds_")


def test_kmeans_bounds_none_keeps_the_centring():
    X, _ = _auto_blobs()
    km = DPKMeans(3, epsilon=1.0, bounds=None, random_state=0)
    with pytest.warns(UserWarning, match="cannot locate"):
        km.fit(X[:150])
    assert not hasattr(km, "bounds_") and hasattr(km, "centre_")


# --- bounds: a declared box gives the centre and the radius for free ------------------------


IRIS_BOX = (np.array([4.0, 2.0, 1.0, 0.0]), np.array([8.0, 4.5, 7.0, 2.5]))


def test_kmeans_box_is_free_and_reads_only_declared_quantities():
    """The box's centre and half-diagonal are public: no bounds event, and data shifted inside the box
    (or any other data) gives the same events, plan, centre and radius."""
    rng = np.random.default_rng(0)
    lower, upper = IRIS_BOX
    X = rng.uniform(lower + 0.5, upper - 1.0, size=(300, 4))
    params = dict(n_clusters=3, epsilon=1.0, bounds=IRIS_BOX, random_state=0)
    km = DPKMeans(**params).fit(X)
    shifted = DPKMeans(**params).fit(X + 0.4)  # still inside the box
    outside = DPKMeans(**params).fit(rng.normal(50.0, 10.0, size=X.shape))  # clipped into the box
    events = _event_signature(km.privacy_ledger_.events)
    assert events == _event_signature(shifted.privacy_ledger_.events)
    assert events == _event_signature(outside.privacy_ledger_.events)
    assert all(type(e) is GaussianEvent for e in km.privacy_ledger_.events)  # no bounds release
    assert len(km.privacy_ledger_.events) == 2 * km.n_iter_
    for other in (shifted, outside):
        assert other.n_iter_ == km.n_iter_ and other.noise_multiplier_ == km.noise_multiplier_
        assert other.data_norm_ == km.data_norm_
        np.testing.assert_array_equal(other.centre_, km.centre_)
    np.testing.assert_allclose(km.centre_, (lower + upper) / 2)
    assert km.data_norm_ == pytest.approx(np.linalg.norm(upper - lower) / 2)
    assert km.privacy_spent_.epsilon <= 1.0 + 1e-9
    # The same plan as a declared data_norm of the half-diagonal.
    plain = DPKMeans(3, epsilon=1.0, data_norm=km.data_norm_, bounds=None, random_state=0).fit(X - km.centre_)
    assert plain.noise_multiplier_ == km.noise_multiplier_ and plain.n_iter_ == km.n_iter_


def test_kmeans_box_shifts_clips_and_projects(release_spy):
    """Rows are clipped into the box and centred at its centre (the sums' sensitivity is the
    half-diagonal's 2 C); the released centres lie in the box, reported in the original coordinates."""
    lower, upper = IRIS_BOX
    X = np.vstack(
        [np.random.default_rng(1).uniform(lower, upper, size=(200, 4)), [[100.0, -100.0, 0.0, 9.0]]]
    )
    km = DPKMeans(3, epsilon=0.2, bounds=IRIS_BOX, max_iter=3, random_state=0).fit(X)
    C = np.linalg.norm(upper - lower) / 2
    sums = [s for s in release_spy if s[1] and s[0] > 2]
    assert sums and all(s[0] == pytest.approx(2 * C) for s in sums)
    # Heavy noise at epsilon = 0.2: the projection still keeps every centre in the box.
    assert np.all(km.cluster_centers_ >= lower - 1e-12) and np.all(km.cluster_centers_ <= upper + 1e-12)
    # predict clips and shifts new rows the same way (the outlier goes where its clipped image goes).
    clipped = np.clip(X[-1:], lower, upper)
    assert km.predict(X[-1:]) == km.predict(clipped)
    # A declared data_norm below the half-diagonal tightens the radius; above it, the box wins.
    assert DPKMeans(3, bounds=IRIS_BOX, data_norm=2.0, max_iter=1, random_state=0).fit(X).data_norm_ == 2.0
    assert DPKMeans(3, bounds=IRIS_BOX, data_norm=50.0, max_iter=1, random_state=0).fit(X).data_norm_ == C


@pytest.mark.parametrize(
    ("bounds", "match"),
    [
        ((0.0,), "pair"),
        (([0.0, 0.0], [1.0, 1.0]), "shape"),
        ((1.0, 0.0), "lower < upper"),
        ((0.0, np.inf), "finite"),
    ],
)
def test_kmeans_bad_bounds_named(bounds, match):
    X, _ = blobs(60)
    with pytest.raises(ValueError, match="bounds") as info:
        DPKMeans(3, bounds=bounds, max_iter=1).fit(np.column_stack([X, X[:, :1]]))
    assert match.split()[0] in str(info.value) or match == "shape"


def test_kmeans_auto_iteration_rule_is_public_and_at_least_five():
    """max_iter="auto": T >= 5, more only while the noise on a centre is below C / 10 (the default is 5)."""
    assert DPKMeans().max_iter == 5 and DPKMeans().data_norm == "auto"
    small = DPKMeans(3, epsilon=0.1, data_norm=5.0, max_iter="auto", random_state=0).fit(blobs(150)[0])
    assert small.n_iter_ == lloyd.KMEANS_AUTO_MIN_ITER
    # The rule with z(T) = sqrt(T) (n = 100, k = 10, d = 1: noise 0.2 sqrt(T)): never below the floor;
    # with noise 0.002 sqrt(T) (n = 10^4) the largest T with noise <= 0.1 (capped at 20).
    rule = dict(
        ratio=lloyd.KMEANS_AUTO_NOISE_RATIO,
        max_iter=lloyd.KMEANS_AUTO_MAX_ITER,
        min_iter=lloyd.KMEANS_AUTO_MIN_ITER,
    )
    assert lloyd.auto_max_iter(math.sqrt, "gaussian", 100, 10, 1, **rule) == 5
    assert lloyd.auto_max_iter(math.sqrt, "gaussian", 10**4, 10, 1, **rule) == 20
    # noise 0.02 sqrt(T) <= 0.1 iff T <= 25, capped at 20; 0.04 sqrt(T) <= 0.1 iff T <= 6.
    assert lloyd.auto_max_iter(math.sqrt, "gaussian", 500, 10, 1, **rule) == 6


def test_shrink_to_prior_is_the_gaussian_posterior_mean():
    """Posterior mean p + tau^2 / (tau^2 + v) (m - p), v = (s_S^2 + p^2 s_n^2) / max(n~^2 - s_n^2, 1)."""
    prior = np.array([[1.0, -2.0], [0.0, 0.5]])
    m = np.array([[3.0, 0.0], [4.0, -1.5]])
    counts = np.array([4.0, 0.2])  # the second is floored to 1
    tau2 = np.array([2.0, 0.5])
    out = lloyd.shrink_to_prior(m, prior, counts, tau2, count_std=1.5, sum_std=2.0)
    v = (4.0 + prior**2 * 2.25) / np.array([[16.0 - 2.25], [1.0]])
    np.testing.assert_allclose(out, prior + tau2 / (tau2 + v) * (m - prior))
    # No noise: Lloyd's update unchanged; overwhelming noise: the prior.
    np.testing.assert_allclose(lloyd.shrink_to_prior(m, prior, counts, tau2, 0.0, 0.0), m)
    np.testing.assert_allclose(lloyd.shrink_to_prior(m, prior, counts, tau2, 0.0, 1e9), prior, atol=1e-9)


def test_public_start_and_prior_variance_read_only_declared_quantities():
    lower, upper = np.array([0.0, -1.0]), np.array([4.0, 1.0])
    start = lloyd.box_diagonal_centres(lower, upper, 4)
    np.testing.assert_allclose(start, [[0.5, -0.75], [1.5, -0.25], [2.5, 0.25], [3.5, 0.75]])
    np.testing.assert_allclose(lloyd.uniform_variance(9.0, 2, (lower, upper)), [16 / 12, 4 / 12])
    np.testing.assert_allclose(lloyd.uniform_variance(2.0, 3), np.full(3, 4.0 / 5.0))
    # Noise stds of the mechanisms are their public scales (Laplace: sqrt(2) b).
    from skdp.privacy import GaussianMechanism, LaplaceMechanism

    assert GaussianMechanism(1.0, 3.0).std == 3.0
    assert LaplaceMechanism(1.0, 3.0).std == pytest.approx(3.0 * math.sqrt(2.0))


def test_kmeans_box_starts_on_the_diagonal_and_heavy_noise_keeps_it(monkeypatch):
    """With a declared box, init="random" starts from the box's diagonal (no partition release:
    every one of the 2 T events is a Lloyd step), and at a tiny epsilon the posterior mean keeps
    the centres near it instead of throwing them towards the box's corners."""
    lower, upper = IRIS_BOX
    X = np.random.default_rng(0).uniform(lower, upper, size=(150, 4))
    diagonal = lloyd.box_diagonal_centres(lower, upper, 3)

    def mean_distance():
        out = []
        for s in range(10):
            km = DPKMeans(3, epsilon=1e-3, bounds=IRIS_BOX, max_iter=1, random_state=s).fit(X)
            assert len(km.privacy_ledger_.events) == 2 * km.n_iter_
            out.append(np.abs(km.cluster_centers_ - diagonal).mean())
        return np.mean(out)

    # Measured: about 0.03 with the shrinkage, about 1 (a box of width 2.5 to 6) without it
    # (factor 1): the noise on a centre of 50 rows at epsilon 1e-3 is thousands of widths.
    assert mean_distance() < 0.15
    monkeypatch.setattr(lloyd, "shrink_to_prior", lambda centres, *args, **kwargs: centres)
    assert mean_distance() > 0.5


def test_box_fit_never_splits_when_the_sizes_noise_hides_the_largest(monkeypatch):
    # Count noise above KEEP_UNUSABLE_COUNT_NOISE average cluster sizes: an
    # unusable centre keeps its previous value at every iteration (splitting
    # the "largest" noisy cluster would pick a random one).  Below it, the
    # split still runs (it is what re-seeds an empty cluster on digits).
    from skdp.cluster import _base
    from skdp.cluster._lloyd import count_noise_weight

    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 1.0, size=(150, 4))
    box = (np.zeros(4), np.ones(4))
    calls = []
    real_split = _base.split_largest

    def spy(*args, **kwargs):
        calls.append(1)
        return real_split(*args, **kwargs)

    monkeypatch.setattr(_base, "split_largest", spy)

    def ratio(km):
        return km.noise_multiplier_ * count_noise_weight("gaussian", 4) * np.sqrt(2.0) / (150 / 3)

    for seed in range(5):
        km = DPKMeans(3, epsilon=0.05, bounds=box, random_state=seed).fit(X)
        assert ratio(km) > _base.KEEP_UNUSABLE_COUNT_NOISE
        assert km.n_reseeded_ >= 0
    assert not calls
    # At epsilon 0.5 (ratio about 0.9) the sizes inform: some of 20 fits split.
    for seed in range(20):
        km = DPKMeans(3, epsilon=0.5, bounds=box, random_state=seed).fit(X)
    assert ratio(km) < _base.KEEP_UNUSABLE_COUNT_NOISE
    assert calls


def test_histogram_box_scale_keeps_unlocated_columns_near_the_data():
    """With the row-scale release, a column its own bins cannot locate takes a range inside
    [-S, S], S the top of the highest occupied row-scale bin (at most twice the largest
    magnitude), never the data-free [0, 1] far from the data; three releases are recorded."""
    from skdp.privacy.ledger import PrivacyLedger
    from skdp.privacy.quantiles import calibrate_histogram_bounds, private_histogram_box

    rng = np.random.default_rng(0)
    # Spread over many signed log bins around -6: no column bin holds enough rows.
    X = rng.normal(-6.0, 4.0, size=(150, 2))
    plan = calibrate_histogram_bounds(1.0, 1e-5, 2, 0.5, "pld", scale=True)
    ledger = PrivacyLedger()
    low, high, located = private_histogram_box(
        lambda fn, *p: fn(X, *p),
        150,
        2,
        plan.mechanism(),
        (0.01, 0.99),
        np.random.default_rng(1),
        ledger,
        return_located=True,
        scale_mechanism=plan.scale_mechanism(),
    )
    top = 2 * np.abs(X).max()
    assert located.all()
    assert np.all(low >= -top) and np.all(high <= top) and np.all(high > low)
    assert [e.count for e in ledger.events] == [1, 1, 1]


def test_kernel_auto_gamma_from_a_released_box():
    """gamma="auto": a private histogram box (its three releases first, from the public plan),
    gamma_ = 12 / |high - low|^2 (uniform variance on the box), the whole fit at epsilon; the
    width follows the data's scale, so scaling the data by 1000 leaves the clustering good."""
    from sklearn.metrics import adjusted_rand_score

    from skdp.cluster._kernel_kmeans import auto_gamma
    from skdp.privacy.quantiles import calibrate_histogram_bounds, histogram_box_share

    X, y = blobs(600)
    for seed in range(4):
        km = DPKernelKMeans(3, epsilon=3.0, random_state=seed).fit(X * 1000.0)
        low, high = km.bounds_
        assert km.gamma_ == pytest.approx(12.0 / np.sum((high - low) ** 2))
        assert km.gamma_ == pytest.approx(auto_gamma("rbf", low, high))
        assert km.privacy_spent_.epsilon == pytest.approx(3.0, rel=1e-4)
        # At least two of the three clusters told apart (ARI 0.57: two merged); gamma=1 sees noise.
        assert adjusted_rand_score(y, km.predict(X * 1000.0)) > 0.5
        fixed = DPKernelKMeans(3, epsilon=3.0, gamma=1.0, random_state=seed).fit(X * 1000.0)
        assert adjusted_rand_score(y, fixed.predict(X * 1000.0)) < 0.1
    km = DPKernelKMeans(3, epsilon=3.0, random_state=0).fit(X)
    share = histogram_box_share(600, 3.0, 1e-5, X.shape[1], "pld")
    plan = calibrate_histogram_bounds(3.0, 1e-5, X.shape[1], share, "pld", scale=True)
    planned, planned_scale = plan.events()
    events = km.privacy_ledger_.events
    assert [round(e.noise_multiplier, 12) for e in events[:3]] == [
        round(planned_scale.noise_multiplier, 12),
        *[round(planned.noise_multiplier, 12)] * 2,
    ]
    # The plan reads only public quantities: zeros record the same events.
    dry = DPKernelKMeans(3, epsilon=3.0, random_state=0).fit(np.zeros_like(X))
    assert _event_signature(dry.privacy_ledger_.events) == _event_signature(events)
    # A declared gamma releases no box.
    fixed = DPKernelKMeans(3, epsilon=3.0, gamma=0.5, random_state=0).fit(X)
    assert fixed.gamma_ == 0.5 and not hasattr(fixed, "bounds_")
    assert auto_gamma("laplacian", low, high) == pytest.approx(3.0 / np.sum(high - low))


def test_row_scale_histogram_sensitivity_and_noise():
    """One count per row (so replacing a record moves two counts by 1: L2 sqrt(2), whatever d),
    and the release's noise is the planned scale_noise_weight(d) * z * sqrt(2) = z sqrt(d / 2), half a
    column count's z sqrt(2 d), checked on draws."""
    from skdp.privacy.ledger import PrivacyLedger
    from skdp.privacy.quantiles import LOG2_RANGE, histogram_mechanism, row_scale_histogram, scale_mechanism

    rng = np.random.default_rng(0)
    X = rng.normal(0.0, 10.0, size=(200, 7)) * rng.choice([1e-3, 1.0, 1e3], size=(200, 1))
    counts = row_scale_histogram(X)
    assert counts.sum() == 200
    Xp = X.copy()
    Xp[5] = 1e9  # beyond every bin: the top one
    diff = row_scale_histogram(Xp) - counts
    assert np.abs(diff).sum() <= 2 and np.linalg.norm(diff) <= np.sqrt(2)
    # The bin of the row's largest magnitude: its top edge bounds it, half of it does not.
    top = 2.0 ** (LOG2_RANGE[0] + np.flatnonzero(counts)[-1])  # bin 1 + k is [2^(lo+k), 2^(lo+k+1))
    assert top > np.abs(X).max() >= top / 2
    z = 3.0
    d = 8
    mechanism = scale_mechanism(z, True, d)
    assert mechanism.std == pytest.approx(z * np.sqrt(d / 2))
    assert mechanism.std == pytest.approx(histogram_mechanism(d, z, True).std / 2)
    ledger = PrivacyLedger()
    draws = np.stack([mechanism.release(np.zeros(50), np.random.default_rng(s), ledger) for s in range(40)])
    assert len(ledger.events) == 40
    # 2000 draws: the sample std is within 5 % of the planned one (about 3 standard errors);
    # halved noise would be 50 % off.
    assert np.std(draws) == pytest.approx(mechanism.std, rel=0.05)
