"""DPKMeans(algorithm="coreset"): the private LSH coreset (skdp.cluster._coreset)."""

import math
import pickle
import warnings

import numpy as np
import pytest
from _release_walk import N_ROWS, release_violations
from scipy import stats
from sklearn.datasets import make_blobs

import skdp.cluster._base as base_module
from skdp._chunks import as_chunked
from skdp.cluster import DPKMeans
from skdp.cluster import _coreset as cs
from skdp.cluster import _lloyd as lloyd

dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting import dp_event  # noqa: E402
from dp_accounting.pld import pld_privacy_accountant  # noqa: E402


def blobs(n=2000, dim=10, k=4, seed=0):
    X, _ = make_blobs(n_samples=n, n_features=dim, centers=k, cluster_std=0.3, random_state=seed)
    return X


def coreset(**params):
    base = dict(n_clusters=4, epsilon=2.0, delta=1e-5, data_norm=15.0, algorithm="coreset", random_state=0)
    return DPKMeans(**{**base, **params})


def test_plan_matches_dp_accounting():
    # The plan: D level counts at w z and one leaf-sum release at z, composed
    # by an independent PLD accountant (Gaussian multipliers are std over the
    # replace-one sensitivity, so the relation does not change the curve).
    km = coreset().fit(blobs())
    z = km.noise_multiplier_
    acc = pld_privacy_accountant.PLDAccountant()
    acc.compose(dp_event.GaussianDpEvent(z * cs.CORESET_COUNT_WEIGHT), cs.CORESET_MAX_DEPTH)
    acc.compose(dp_event.GaussianDpEvent(z))
    eps = acc.get_epsilon(1e-5)
    assert eps == pytest.approx(2.0, rel=2e-2)
    assert km.privacy_spent_.epsilon == pytest.approx(eps, rel=2e-2)
    assert km.privacy_spent_.epsilon <= 2.0 * (1 + 1e-9)
    # Every level is recorded (even empty ones): the ledger is the plan.
    events = km.privacy_ledger_.events
    assert sum(e.count for e in events) == cs.CORESET_MAX_DEPTH + 1


def _capture_leaf_sums(monkeypatch):
    """Record (exact, released) of every 2-D release (the leaf sums) of the next fits."""
    seen = []
    original = base_module._MECHANISMS["gaussian"][0].release

    def release(self, value, rng, accountant):
        out = original(self, value, rng, accountant)
        if np.ndim(value) == 2:
            seen.append(out - np.asarray(value))
        return out

    monkeypatch.setattr(base_module._MECHANISMS["gaussian"][0], "release", release)
    return seen


def _std_within_chi2(noise, std, alpha=1e-6):
    """Whether the empirical variance of ``noise`` is within the two-sided chi-square interval of ``std**2``."""
    n = noise.size
    ratio = float(np.sum(noise**2) / std**2)
    return stats.chi2.ppf(alpha / 2, n) <= ratio <= stats.chi2.ppf(1 - alpha / 2, n)


def test_leaf_sum_noise_has_the_planned_std(monkeypatch):
    seen = _capture_leaf_sums(monkeypatch)
    km = coreset().fit(blobs())
    (noise,) = seen
    # Sensitivity 2 C (replace-one, rows of norm <= C) times the plan's multiplier.
    assert _std_within_chi2(noise, 2 * 15.0 * km.noise_multiplier_)


def test_halved_leaf_sum_noise_is_caught(monkeypatch):
    seen = _capture_leaf_sums(monkeypatch)
    # Halve the sums' noise behind the accountant's back (sensitivity and scale halved).
    monkeypatch.setattr(base_module, "sum_sensitivity", lambda bound, norm, dim: bound)
    km = coreset().fit(blobs())
    (noise,) = seen
    assert not _std_within_chi2(noise, 2 * 15.0 * km.noise_multiplier_)


def test_level_counts_and_leaf_sums_sensitivity():
    # Replacing one row moves each level's vector of counts by at most sqrt(2)
    # (L2) and the leaf sums by at most 2 C.
    rng = np.random.default_rng(1)
    depth, dim, C = 8, 5, 1.0
    planes = cs.simhash_planes(dim, depth, rng)
    leaves = [(2, 0), (3, 2), (3, 3), (1, 1)]
    intervals = cs.leaf_intervals(leaves, depth)
    for _ in range(50):
        X = rng.standard_normal((40, dim))
        X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True) / C)
        Xp = X.copy()
        Xp[rng.integers(40)] = -X[rng.integers(40)]
        h, hp = cs.code_histogram(X, planes), cs.code_histogram(Xp, planes)
        for level in range(1, depth + 1):
            diff = h.reshape(1 << level, -1).sum(1) - hp.reshape(1 << level, -1).sum(1)
            assert np.linalg.norm(diff) <= math.sqrt(2) + 1e-12
        ds = cs.leaf_sums(X, planes, intervals, 4) - cs.leaf_sums(Xp, planes, intervals, 4)
        assert np.linalg.norm(ds) <= 2 * C + 1e-12


def test_leaves_partition_the_codes_and_thresholds_are_public():
    # Leaves given out of code order, and codes in no leaf (-1).
    intervals = cs.leaf_intervals([(2, 2), (1, 0), (3, 7)], 4)
    table = cs.leaf_of_codes(np.arange(16), intervals)
    assert np.array_equal(table, [1] * 8 + [0] * 4 + [-1] * 2 + [2] * 2)
    assert np.array_equal(cs.leaf_of_codes(np.arange(4), cs.leaf_intervals(np.empty((0, 2)), 2)), [-1] * 4)
    min_node, min_branch = cs.tree_thresholds(4.0, "gaussian", 100_000, 64, 100)
    assert min_node == 100_000 // 128 and min_node <= min_branch < 100_000 // 64


class _ListLedger:
    """Records events; enough of a ledger for the mechanisms' ``release``."""

    secure_noise = False

    def __init__(self):
        self.events = []

    def record(self, event):
        self.events.append(event)


def _reference_tree(histogram, max_depth, n, mechanism, min_node, min_branch, rng, ledger):
    """The tree grown node by node from the dense ``2**D`` histogram (the definition)."""
    branching = [(0, float(n))] if n >= min_branch else []
    leaves, counts = ([], []) if branching else ([(0, 0)], [float(n)])
    for level in range(1, max_depth + 1):
        level_counts = histogram.reshape(1 << level, -1).sum(axis=1).astype(float)
        children = np.array([2 * p + b for p, _ in branching for b in (0, 1)], dtype=np.int64)
        noisy = mechanism.release(level_counts[children], rng, ledger)
        following = []
        # A child branches from min_branch (kept: min_node <= min_branch) and is a leaf from min_leaf.
        min_leaf = cs.leaf_threshold(min_node, mechanism.std)
        for i, (prefix, count) in enumerate(branching):
            kept = [(children[2 * i + b], noisy[2 * i + b]) for b in (0, 1) if noisy[2 * i + b] >= min_leaf]
            if not kept:
                leaves.append((level - 1, prefix))
                counts.append(count)
            for child, child_count in kept:
                if level < max_depth and child_count >= min_branch:
                    following.append((int(child), float(child_count)))
                else:
                    leaves.append((level, int(child)))
                    counts.append(float(child_count))
        branching = following
    return leaves, counts


@pytest.mark.parametrize(
    "n, min_node, scale", [(3000, 40, 5.0), (500, 5, 1.0), (30, 40, 1.0), (2000, 1, 0.5)]
)
def test_tree_on_arrays_equals_the_node_by_node_definition(n, min_node, scale):
    # The level-by-level arrays (sorted codes, binary searches, masks) give the
    # same releases, leaves (in the same order) and counts as the node-by-node
    # tree on the dense histogram, from the same generator state.
    from skdp.cluster._rows import InMemoryRows
    from skdp.privacy import GaussianMechanism

    depth, dim = 10, 4
    X = blobs(n=n, dim=dim, k=5, seed=n)
    X /= np.linalg.norm(X, axis=1, keepdims=True).max()
    planes = cs.simhash_planes(dim, depth, np.random.default_rng(0))
    mechanism = GaussianMechanism(math.sqrt(2), scale * math.sqrt(2))
    min_branch = int(math.ceil(cs.CORESET_BRANCH_FACTOR * min_node))
    codes, code_rows, row_codes = cs.code_counts(InMemoryRows(X), planes)
    ours, theirs = _ListLedger(), _ListLedger()
    leaves, counts = cs.grow_tree(
        cs.PrefixCounts(codes, code_rows, depth),
        depth,
        n,
        mechanism,
        min_node,
        min_branch,
        np.random.default_rng(7),
        ours,
    )
    ref_leaves, ref_counts = _reference_tree(
        cs.code_histogram(X, planes),
        depth,
        n,
        mechanism,
        min_node,
        min_branch,
        np.random.default_rng(7),
        theirs,
    )
    assert [tuple(leaf) for leaf in leaves.tolist()] == ref_leaves
    assert counts.tolist() == ref_counts
    assert len(ours.events) == len(theirs.events) == depth
    # The leaves partition the codes they cover; every row's leaf by interval search.
    table = cs.leaf_of_codes(np.arange(1 << depth), cs.leaf_intervals(leaves, depth))
    for index, (level, prefix) in enumerate(ref_leaves):
        shift = depth - level
        assert np.all(table[prefix << shift : (prefix + 1) << shift] == index)
    assert np.array_equal(cs.leaf_of_codes(row_codes, cs.leaf_intervals(leaves, depth)), table[row_codes])


class _ExactCounts:
    """A count mechanism that releases the exact counts and reports noise of std 10."""

    std = 10.0

    def release(self, value, rng, ledger):
        return np.asarray(value, dtype=float)


def test_a_child_below_min_node_but_above_the_leaf_threshold_is_a_leaf():
    # Codes of depth 2: 100 rows under 00, 40 under 01, none under 1.  With
    # min_node 50 and count noise of std 10 the leaf threshold is
    # max(50 - 2 * 10, 50 / 2, 3 * 10) = 30: the 40 rows of 01 are a leaf of
    # their own beside 00's (before, they fell in no leaf, as a cluster cut in
    # two by a hyperplane did), and the empty child 1 is none.
    assert cs.leaf_threshold(50, 10.0) == 30
    assert cs.leaf_threshold(50, 20.0) == 50  # 3 std above min_node: min_node
    assert cs.leaf_threshold(50, 1.0) == 48
    assert cs.leaf_threshold(50, 14.0) == 42  # 3 std = 42 above min_node - 2 std = 22
    counts = cs.PrefixCounts(np.array([0, 1]), np.array([100, 40]), 2)
    leaves, leaf_counts = cs.grow_tree(counts, 2, 140, _ExactCounts(), 50, 75, None, None)
    assert [tuple(leaf) for leaf in leaves.tolist()] == [(2, 0), (2, 1)]
    assert leaf_counts.tolist() == [100.0, 40.0]
    # 25 rows (below the threshold) stay out, as before.
    counts = cs.PrefixCounts(np.array([0, 1]), np.array([100, 25]), 2)
    leaves, _ = cs.grow_tree(counts, 2, 125, _ExactCounts(), 50, 75, None, None)
    assert [tuple(leaf) for leaf in leaves.tolist()] == [(2, 0)]


def test_fitted_model_holds_releases_only():
    X = blobs(n=N_ROWS, dim=3, k=3)
    km = coreset(n_clusters=3, data_norm=10.0, random_state=3).fit(X)
    assert km.algorithm_ == "coreset" and km.n_leaves_ >= 1 and km.n_iter_ >= 1
    assert km.cluster_centers_.shape == (3, 3)
    problems = release_violations(pickle.loads(pickle.dumps(km)), 3)
    assert not problems, "\n".join(problems)


def test_random_state_reproduces_the_fit():
    X = blobs()
    a, b = coreset(random_state=5).fit(X), coreset(random_state=5).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    assert not np.array_equal(a.cluster_centers_, coreset(random_state=6).fit(X).cluster_centers_)


def test_finds_separated_clusters():
    # Four blobs at least 5 apart: every true centre has its own released
    # centre within 2 (the noise on a leaf mean of ~250 rows is ~0.5 here).
    X, _, centres = make_blobs(
        n_samples=4000, n_features=10, centers=4, cluster_std=0.3, random_state=0, return_centers=True
    )
    km = coreset(epsilon=8.0, data_norm=40.0).fit(X)
    d = np.linalg.norm(centres[:, None, :] - km.cluster_centers_[None, :, :], axis=2)
    assert len(set(d.argmin(axis=1))) == 4
    assert d.min(axis=1).max() < 2.0


def test_bad_algorithm_and_init_are_refused():
    with pytest.raises(ValueError, match="algorithm"):
        coreset(algorithm="tree").fit(blobs())
    with pytest.raises(ValueError, match="init"):
        coreset(init=np.zeros((4, 10))).fit(blobs())


def test_chunked_input_matches_in_memory():
    X = blobs()
    ref = coreset().fit(X)
    chunked = coreset().fit(as_chunked(X, chunk_size=300))
    np.testing.assert_allclose(chunked.cluster_centers_, ref.cluster_centers_, rtol=1e-9, atol=1e-9)
    assert chunked.n_leaves_ == ref.n_leaves_


def test_auto_rule_reads_public_quantities_only():
    assert cs.choose_algorithm(100_000, 64, 100, 1.0, 1e-6) == "coreset"
    assert cs.choose_algorithm(100_000, 8, 100, 1.0, 1e-6) == "lloyd"
    assert cs.choose_algorithm(150, 3, 4, 1.0, 1e-5) == "lloyd"
    assert cs.choose_algorithm(10_000, 32, 2, 1.0, 1e-5) == "lloyd"
    X = blobs(n=400, dim=8)
    assert DPKMeans(16, data_norm=15.0, random_state=0).fit(X).algorithm_ == "coreset"
    assert DPKMeans(4, data_norm=15.0, random_state=0).fit(X).algorithm_ == "lloyd"
    # Public init centres keep Lloyd.
    init = np.zeros((16, 8))
    assert DPKMeans(16, data_norm=15.0, init=init, random_state=0).fit(X).algorithm_ == "lloyd"


def test_laplace_leaf_sums_have_the_l1_scale(monkeypatch):
    # Laplace: L1 sensitivity 2 sqrt(d) C, noise std sqrt(2) times the scale.
    seen = []
    laplace = base_module._MECHANISMS["laplace"][0]
    original = laplace.release

    def release(self, value, rng, accountant):
        out = original(self, value, rng, accountant)
        if np.ndim(value) == 2:
            seen.append(out - np.asarray(value))
        return out

    monkeypatch.setattr(laplace, "release", release)
    X = blobs()
    for seed in range(30):
        km = coreset(mechanism="laplace", epsilon=20.0, random_state=seed).fit(X)
    noise = np.concatenate([n.ravel() for n in seen])
    std = math.sqrt(2.0) * 2.0 * math.sqrt(10) * 15.0 * km.noise_multiplier_
    # Laplace's fourth moment is 6 std^4: the variance estimate of N entries has
    # relative std sqrt(5 / N); 6 of those (N >= 2,000 here) stays below the 0.75
    # a halved noise would give.
    assert noise.size >= 2_000
    rel = float(np.mean(noise**2) / std**2)
    assert abs(rel - 1.0) < 6 * math.sqrt(5.0 / noise.size)
    assert km.privacy_spent_.epsilon <= 20.0 * (1 + 1e-9)


def test_secure_noise_coreset_fits_within_budget():
    km = coreset(secure_noise=True).fit(blobs())
    assert km.privacy_ledger_.secure_noise
    assert km.privacy_spent_.epsilon <= 2.0 * (1 + 1e-9)
    assert sum(e.count for e in km.privacy_ledger_.events) == cs.CORESET_MAX_DEPTH + 1


def _capture_level_counts(monkeypatch):
    """Record (released - exact) of every 1-D release (the tree's level counts) of the next fits."""
    seen = []
    gaussian = base_module._MECHANISMS["gaussian"][0]
    original = gaussian.release

    def release(self, value, rng, accountant):
        out = original(self, value, rng, accountant)
        if np.ndim(value) == 1:
            seen.append(np.asarray(out) - np.asarray(value))
        return out

    monkeypatch.setattr(gaussian, "release", release)
    return seen


def _level_count_std(km):
    # L2 sensitivity sqrt(2) (replace-one) at count_weight times the sums' multiplier.
    return math.sqrt(2.0) * cs.CORESET_COUNT_WEIGHT * km.noise_multiplier_


def test_level_count_noise_has_the_planned_std(monkeypatch):
    seen = _capture_level_counts(monkeypatch)
    km = coreset(epsilon=8.0).fit(blobs())
    noise = np.concatenate(seen)
    assert noise.size >= 50
    assert _std_within_chi2(noise, _level_count_std(km))


def test_halved_level_count_noise_is_caught(monkeypatch):
    seen = _capture_level_counts(monkeypatch)
    # Halve the counts' noise behind the accountant's back.
    monkeypatch.setattr(base_module, "count_sensitivity", lambda norm: math.sqrt(2.0) / 2.0)
    km = coreset(epsilon=8.0).fit(blobs())
    noise = np.concatenate(seen)
    assert not _std_within_chi2(noise, _level_count_std(km))


def test_weighted_kmeans_equals_scikit_learn_kmeans():
    # The coreset's k-means is scikit-learn's KMeans(n_init=3) with weights, bit
    # for bit: small and large coresets, k up to n, duplicated points, integer weights.
    from sklearn.cluster import KMeans

    from skdp.cluster._coreset_kmeans import weighted_kmeans_fit

    rng = np.random.default_rng(0)
    for trial in range(60):
        n = int(rng.choice([1, 2, 5, 9, 40, 300]))
        k, dim = int(rng.integers(1, min(n, 20) + 1)), int(rng.integers(1, 12))
        points = rng.standard_normal((n, dim)) * rng.uniform(0.01, 10.0)
        if trial % 4 == 0 and n > 2:
            points[1] = points[0]
        weights = rng.uniform(0.5, 3000.0, n)
        if trial % 3 == 0:
            weights = np.round(weights)
        seed = int(rng.integers(2**31 - 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            km = KMeans(n_clusters=k, n_init=3, random_state=seed).fit(points, sample_weight=weights)
            centres, labels, n_iter = weighted_kmeans_fit(points, weights, k, seed)
        np.testing.assert_array_equal(centres, km.cluster_centers_)
        np.testing.assert_array_equal(labels, km.labels_)
        assert n_iter == km.n_iter_


def test_blas_limit_is_applied_and_restored():
    # The clustering fits' BLAS limit (one kept threadpoolctl controller): one
    # thread inside, the previous setting after, no limit (and no scan) for None.
    import threadpoolctl

    from skdp.cluster._blas import threadpool_limits

    def blas_threads():
        return [m["num_threads"] for m in threadpoolctl.threadpool_info() if m["user_api"] == "blas"]

    if not blas_threads():
        pytest.skip("no BLAS library that threadpoolctl can control")
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):  # a known setting above one
        before = blas_threads()
        assert all(n == 2 for n in before)
        with threadpool_limits(limits=1, user_api="blas"):
            assert all(n == 1 for n in blas_threads())
        assert blas_threads() == before
        with threadpool_limits(limits=None, user_api="blas"):
            assert blas_threads() == before


# --- DP Lloyd's private start: k-means++ on a coreset released first (DPKMeans, algorithm="lloyd") ---
def unequal(n=3000, dim=8, seed=3):
    """Clusters of 0.6 / 0.3 / 0.1 of the rows and spreads 0.5 / 1.5 / 3 (the zoo's unequal set)."""
    sizes = [int(0.6 * n), int(0.3 * n), n - int(0.6 * n) - int(0.3 * n)]
    X, _ = make_blobs(n_samples=sizes, n_features=dim, cluster_std=[0.5, 1.5, 3.0], random_state=seed)
    return X


def started(**params):
    base = dict(n_clusters=3, epsilon=4.0, delta=1e-5, data_norm=30.0, bounds=None, random_state=0)
    return DPKMeans(**{**base, **params})


def _start_accounted(km, epsilon=4.0, delta=1e-5):
    """Whether the ledger and ``privacy_spent_`` hold the start's coreset and the ``T`` iterations.

    An independent PLD accountant composes the plan at the fitted multiplier
    ``z``: ``D`` level counts at ``a w z`` and one leaf-sum release at ``a z``
    (``a`` the start's ratio, ``w`` the coreset's count weight), then ``T``
    sizes at ``w_L z`` and ``T`` sums at ``z``; it must come to the requested
    epsilon, as must ``privacy_spent_``, and the ledger must hold every release.
    """
    z, T = km.noise_multiplier_, km.n_iter_
    w_lloyd = lloyd.count_noise_weight("gaussian", km.n_features_in_)
    a = cs.start_noise_ratio(T, w_lloyd)
    acc = pld_privacy_accountant.PLDAccountant()
    acc.compose(dp_event.GaussianDpEvent(a * cs.CORESET_COUNT_WEIGHT * z), cs.CORESET_MAX_DEPTH)
    acc.compose(dp_event.GaussianDpEvent(a * z))
    acc.compose(dp_event.GaussianDpEvent(w_lloyd * z), T)
    acc.compose(dp_event.GaussianDpEvent(z), T)
    eps = acc.get_epsilon(delta)
    n_released = sum(e.count for e in km.privacy_ledger_.events)
    return (
        abs(eps - epsilon) <= 2e-2 * epsilon
        and abs(km.privacy_spent_.epsilon - eps) <= 2e-2 * eps
        and km.privacy_spent_.epsilon <= epsilon * (1 + 1e-9)
        and n_released == cs.CORESET_MAX_DEPTH + 1 + 2 * T
    )


def test_private_start_plan_matches_dp_accounting():
    km = started().fit(unequal())
    assert km.algorithm_ == "lloyd"
    assert _start_accounted(km)


def test_unaccounted_start_is_caught(monkeypatch):
    # The start's releases kept off the ledger (and out of the plan): the check must fail.
    import skdp.cluster._kmeans as kmeans_module

    original = kmeans_module.private_coreset

    class Unrecorded:
        """The fit's ledger, except that it records nothing."""

        def __init__(self, ledger):
            self._ledger = ledger

        def record(self, *args, **kwargs):
            pass

        def __getattr__(self, name):
            return getattr(self._ledger, name)

    def unrecorded(rows, bound, count_mechanism, sum_mechanism, max_depth, thresholds, rng, ledger, project):
        return original(
            rows,
            bound,
            count_mechanism,
            sum_mechanism,
            max_depth,
            thresholds,
            rng,
            Unrecorded(ledger),
            project,
        )

    monkeypatch.setattr(kmeans_module, "private_coreset", unrecorded)
    assert not _start_accounted(started().fit(unequal()))
    # Recorded but left out of the plan: the fit spends more than it reserved, and the template refuses it.
    monkeypatch.setattr(kmeans_module.DPKMeans, "_start_events", lambda self, n_iter, count_weight: None)
    monkeypatch.setattr(kmeans_module, "private_coreset", original)
    with pytest.raises(RuntimeError, match="spent"):
        started().fit(unequal())


def test_private_start_leaf_sums_have_the_planned_std(monkeypatch):
    seen = _capture_leaf_sums(monkeypatch)
    km = started().fit(unequal())
    # The first 2-D release is the start's leaf sums: sensitivity 2 C times a z.
    w_lloyd = lloyd.count_noise_weight("gaussian", 8)
    a = cs.start_noise_ratio(km.n_iter_, w_lloyd)
    assert len(seen) == 1 + km.n_iter_
    assert _std_within_chi2(seen[0], 2 * 30.0 * a * km.noise_multiplier_)
    assert not _std_within_chi2(seen[0], 2 * 30.0 * a * km.noise_multiplier_ / 2)


def test_private_start_only_where_the_coreset_resolves_the_clusters():
    # n * eps small: the smallest accurate leaf is larger than a quarter of an average
    # cluster (start_resolves), so the start-free plan (2 T releases) runs.
    small = started(epsilon=1.0).fit(unequal(n=600))
    assert sum(e.count for e in small.privacy_ledger_.events) == 2 * small.n_iter_
    w_lloyd = lloyd.count_noise_weight("gaussian", 8)
    a = cs.start_noise_ratio(small.n_iter_, w_lloyd)
    assert not cs.start_resolves(a * small.noise_multiplier_, "gaussian", 600, 3, 8)
    # A public init or a declared box's diagonal start: no start either.
    init = np.zeros((3, 8))
    public = started(init=init).fit(unequal())
    assert sum(e.count for e in public.privacy_ledger_.events) == 2 * public.n_iter_
    # The rule reads public quantities only: the same plan on other data of that shape.
    other = started().fit(np.random.default_rng(0).normal(size=(3000, 8)))
    assert sum(e.count for e in other.privacy_ledger_.events) == cs.CORESET_MAX_DEPTH + 1 + 2 * other.n_iter_


def test_private_start_reaches_the_optimum_on_unequal_clusters():
    # Lloyd from the random partition converges to a poor local optimum on these
    # clusters at small noise (the zoo's rule-3 FAIL: cost 2.27 times the optimum at
    # eps 10); the coreset's k-means++ seeds every cluster.
    from sklearn.cluster import KMeans

    X = unequal()
    twin = KMeans(3, n_init=10, random_state=0).fit(X)
    for seed in range(3):
        km = DPKMeans(3, epsilon=10.0, random_state=seed).fit(X)
        assert -km.score(X) <= 1.05 * twin.inertia_


def test_private_start_chunked_releases_the_same():
    X = unequal()
    memory = started().fit(X)

    def chunks():
        return (X[i : i + 700] for i in range(0, len(X), 700))

    chunked = started().fit(chunks)
    assert (
        sum(e.count for e in memory.privacy_ledger_.events) == cs.CORESET_MAX_DEPTH + 1 + 2 * memory.n_iter_
    )
    np.testing.assert_allclose(chunked.cluster_centers_, memory.cluster_centers_, rtol=1e-9, atol=1e-9)
    assert chunked.privacy_spent_ == memory.privacy_spent_
