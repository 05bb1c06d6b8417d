"""Out-of-core and Dask fits: skdp._chunks and DPGaussianMixture on chunked input."""

import warnings

import numpy as np
import pytest
from conftest import gaussian_blobs

from skdp._chunks import ChunkedData, as_chunked, is_chunked_input
from skdp.bayes import DPBetaBernoulli
from skdp.exceptions import PrivacyLeakWarning
from skdp.mixture import DPGaussianMixture
from skdp.mixture._moments import compute_precision_cholesky, expected_statistics
from skdp.privacy.mechanisms.additive import _AdditiveMechanism
from skdp.privacy.mechanisms.matrix import _SymmetricMatrixMixin
from skdp.privacy.mechanisms.selection import ExponentialMechanism


def _data(n_per=400, seed=0, d=3):
    rng = np.random.default_rng(seed)
    return gaussian_blobs(rng, rng.uniform(-1.5, 1.5, size=(3, d)), n_per, 0.3)


def _factory(X, size):
    return lambda: (X[i : i + size] for i in range(0, len(X), size))


def _params(d, k=3, cov_type="full", seed=1):
    rng = np.random.default_rng(seed)
    weights = np.full(k, 1.0 / k)
    means = rng.uniform(-0.5, 0.5, size=(k, d))
    covs = {
        "full": np.tile(np.eye(d) * 0.05, (k, 1, 1)),
        "tied": np.eye(d) * 0.05,
        "spherical": np.full(k, 0.05),
    }[cov_type]
    return weights, means, compute_precision_cholesky(covs, cov_type), cov_type


@pytest.fixture
def memmap_path(tmp_path):
    X = _data(500, seed=3)
    path = tmp_path / "X.npy"
    np.save(path, X)
    return X, path


# ---------------------------------------------------------------------------
# The chunk module on its own
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("chunk_size", [1, 7, 128, 10_000])
def test_map_reduce_equals_direct_sums(chunk_size):
    X = _data(100, seed=1)
    data = as_chunked(X, chunk_size=chunk_size)
    total, count = data.map_reduce(lambda c: (c.sum(axis=0), float(len(c))))
    np.testing.assert_allclose(total, X.sum(axis=0), rtol=1e-12)
    assert count == len(X)
    summary = data.scan()
    assert summary.n_samples == len(X) and summary.n_features == X.shape[1]
    assert summary.max_norm == pytest.approx(np.linalg.norm(X, axis=1).max(), rel=1e-12)


@pytest.mark.parametrize("cov_type", ["full", "tied", "spherical"])
def test_chunked_statistics_match_in_memory(cov_type):
    X = _data(300, seed=2)
    params = _params(X.shape[1], cov_type=cov_type)
    whole = expected_statistics(X, 3.0, *params)
    for chunked in (as_chunked(X, chunk_size=97), as_chunked(_factory(X, 50))):
        parts = chunked.map_reduce(expected_statistics, 3.0, *params)
        for a, b in zip(parts, whole, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    # Counts sum to N: every row's responsibilities were counted exactly once.
    assert parts[0].sum() == pytest.approx(len(X))


def test_memmap_is_remapped_chunk_by_chunk(memmap_path):
    X, path = memmap_path
    Xm = np.load(path, mmap_mode="r")
    data = as_chunked(Xm, chunk_size=333)
    chunks = list(data.iter_chunks())
    # Fresh mappings of the file, not views of the caller's mapping.
    assert len(chunks) == 5 and not any(np.shares_memory(c, Xm) for c in chunks)
    np.testing.assert_array_equal(np.vstack(chunks), X)
    # A sliced (non-owning) memmap view falls back to plain slicing.
    view = Xm[100:700]
    chunks = list(as_chunked(view, chunk_size=64).iter_chunks())
    assert all(np.shares_memory(c, Xm) for c in chunks)
    np.testing.assert_array_equal(np.vstack(chunks), X[100:700])


def test_input_kinds_and_validation():
    X = _data(20)
    assert not is_chunked_input(X) and not is_chunked_input(X.tolist())
    assert is_chunked_input(_factory(X, 5)) and is_chunked_input(as_chunked(X))
    assert as_chunked(as_chunked(X)).kind == "numpy"
    with pytest.raises(TypeError, match="one-shot iterator"):
        as_chunked(iter([X]))
    # A generator reaches the chunked path (and its clear error), not np.asarray.
    assert is_chunked_input(iter([X])) and is_chunked_input(c for c in [X])
    once = as_chunked(iter([X[:7], X[7:]]), single_pass=True)
    np.testing.assert_allclose(once.map_reduce(lambda c: c.sum(axis=0)), X.sum(axis=0))
    with pytest.raises(TypeError, match="already been read"):
        once.map_reduce(lambda c: c.sum(axis=0))
    with pytest.raises(ValueError, match="chunk_size"):
        as_chunked(X, chunk_size=0)
    with pytest.raises(ValueError, match="2D"):
        as_chunked(X[:, 0])
    with pytest.raises(ValueError, match="2D"):
        as_chunked(lambda: iter([X[:, 0]])).scan()
    for one_column in (
        as_chunked(X[:, 0], chunk_size=6, ensure_2d=False),
        as_chunked(lambda: iter([X[:, 0]]), ensure_2d=False),
    ):
        assert one_column.scan().n_features == 1
        np.testing.assert_allclose(one_column.map_reduce(lambda c: c.sum(axis=0)), [X[:, 0].sum()])
    bad = X.copy()
    bad[-1, 1] = np.nan  # in the last chunk only: every chunk is checked
    with pytest.raises(ValueError, match="NaN or infinity"):
        as_chunked(bad, chunk_size=7).scan()
    with pytest.raises(ValueError, match="features"):
        as_chunked(lambda: iter([X[:5], X[5:, :2]])).scan()
    with pytest.raises(ValueError, match="numbers"):
        as_chunked(lambda: iter([np.array([["a", "b"]])])).scan()
    with pytest.raises(ValueError, match="0 sample"):
        as_chunked(lambda: iter([])).scan()
    with pytest.raises(ValueError, match="0 sample"):
        as_chunked(lambda: iter([])).map_reduce(np.sum)
    # After a scan, every pass must see the same rows: a shared generator is caught.
    shared = iter([X[:7], X[7:]])
    data = as_chunked(lambda: shared)
    assert data.scan().n_samples == len(X)
    with pytest.raises(ValueError, match=f"0 rows in this pass but {len(X)}.*fresh iterable"):
        data.map_reduce(np.sum)


# ---------------------------------------------------------------------------
# DPGaussianMixture on chunked input
# ---------------------------------------------------------------------------
_FIT = dict(n_components=3, data_norm=3.0, epsilon=1.0, delta=1e-5, max_iter=4, random_state=0)


def _assert_same_fit(a, b):
    np.testing.assert_allclose(a.weights_, b.weights_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.means_, b.means_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.covariances_, b.covariances_, rtol=1e-9, atol=1e-12)
    assert a.privacy_spent_ == b.privacy_spent_
    assert a.lower_bound_ == pytest.approx(b.lower_bound_, rel=1e-9)


@pytest.mark.parametrize("cov_type", ["full", "tied", "spherical"])
def test_same_random_state_same_fit_on_every_input_kind(memmap_path, cov_type):
    X, path = memmap_path
    ref = DPGaussianMixture(covariance_type=cov_type, **_FIT).fit(X)
    inputs = [
        np.load(path, mmap_mode="r"),
        as_chunked(np.load(path, mmap_mode="r"), chunk_size=101),
        _factory(X, 256),
    ]
    for inp in inputs:
        _assert_same_fit(DPGaussianMixture(covariance_type=cov_type, **_FIT).fit(inp), ref)


class _ReleaseCounter:
    def __init__(self, monkeypatch):
        self.calls = 0
        counter = self
        for cls in (_AdditiveMechanism, _SymmetricMatrixMixin):
            orig = cls.release

            def release(mech, value, rng, ledger, _orig=orig):
                counter.calls += 1
                return _orig(mech, value, rng, ledger)

            monkeypatch.setattr(cls, "release", release)


@pytest.mark.parametrize("cov_type, per_fit", [("full", lambda j: 3 * j), ("tied", lambda j: 2 * j + 1)])
def test_noise_added_once_per_statistic_per_iteration_whatever_the_chunks(monkeypatch, cov_type, per_fit):
    """1, 5 or 60 chunks: the same releases (and one reduction per iteration plus one scan)."""
    X = _data(200, seed=4)
    counter = _ReleaseCounter(monkeypatch)
    passes = []
    orig = ChunkedData.map_reduce

    def counting(self, fn, *params):
        passes.append(fn)
        return orig(self, fn, *params)

    monkeypatch.setattr(ChunkedData, "map_reduce", counting)
    j = _FIT["max_iter"]
    fits = []
    for n_chunks in (1, 5, 60):
        counter.calls, passes[:] = 0, []
        est = DPGaussianMixture(covariance_type=cov_type, **_FIT)
        fits.append(est.fit(as_chunked(X, chunk_size=-(-len(X) // n_chunks))))
        assert counter.calls == per_fit(j)
        assert len(passes) == j
        assert sum(e.count for e in est.privacy_ledger_.events) == per_fit(j)
    for other in fits[1:]:
        _assert_same_fit(other, fits[0])


def test_chunked_data_norm_none_warns_and_uses_the_max_norm():
    X = _data(100, seed=5)
    with pytest.warns(PrivacyLeakWarning, match="data_norm"):
        est = DPGaussianMixture(n_components=2, max_iter=2, data_norm="nonprivate", random_state=0).fit(
            _factory(X, 30)
        )
    assert est.data_norm_ == pytest.approx(np.linalg.norm(X, axis=1).max())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        ref = DPGaussianMixture(n_components=2, max_iter=2, data_norm="nonprivate", random_state=0).fit(X)
    _assert_same_fit(est, ref)


def test_chunked_bad_input_fails_before_any_release(monkeypatch):
    counter = _ReleaseCounter(monkeypatch)
    X = _data(50, seed=6)
    bad = X.copy()
    bad[-3, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or infinity"):
        DPGaussianMixture(n_components=2, data_norm=3.0).fit(as_chunked(bad, chunk_size=16))
    with pytest.raises(ValueError, match="n_samples >= n_components"):
        DPGaussianMixture(n_components=5, data_norm=3.0).fit(_factory(X[:3], 2))
    assert counter.calls == 0


def test_generators_are_refused_or_caught_with_clear_errors():
    X = _data(50, seed=9)
    with pytest.raises(TypeError, match="X is a one-shot iterator.*callable that returns a fresh iterable"):
        DPGaussianMixture(**_FIT).fit(X[i : i + 30] for i in range(0, len(X), 30))
    shared = (X[i : i + 30] for i in range(0, len(X), 30))
    with pytest.raises(ValueError, match="fresh iterable"):
        DPGaussianMixture(**_FIT).fit(lambda: shared)


# ---------------------------------------------------------------------------
# DPBetaBernoulli: one pass, so a one-shot iterator is accepted
# ---------------------------------------------------------------------------
def _binary(n=600, d=3, seed=0):
    return np.random.default_rng(seed).binomial(1, 0.3, size=(n, d)).astype(float)


def _same_counts(a, b):
    np.testing.assert_array_equal(a.noisy_counts_, b.noisy_counts_)
    np.testing.assert_array_equal(a.posterior_sample_, b.posterior_sample_)
    assert a.privacy_spent_ == b.privacy_spent_
    assert [(type(e), e.count) for e in a.privacy_ledger_.events] == [
        (type(e), e.count) for e in b.privacy_ledger_.events
    ]


def test_beta_bernoulli_accepts_a_one_shot_iterator():
    X = _binary()
    ref = DPBetaBernoulli(random_state=0).fit(X)
    est = DPBetaBernoulli(random_state=0).fit(X[i : i + 100] for i in range(0, len(X), 100))
    _same_counts(est, ref)
    assert est.n_features_in_ == 3 and est.privacy_spent_.epsilon == 1.0


def test_beta_bernoulli_no_chunk_is_the_empty_array_error():
    with pytest.raises(ValueError, match="0 sample"):
        DPBetaBernoulli(random_state=0).fit(np.empty((0, 3)))
    for empty in (lambda: iter([]), iter([]), lambda: iter([np.empty((0, 3))])):
        with pytest.raises(ValueError, match="0 sample"):
            DPBetaBernoulli(random_state=0).fit(empty)


def test_beta_bernoulli_one_dimensional_chunked_input_is_refused(tmp_path):
    # A 1-D X is refused like every estimator's (issue 29), out of core too;
    # chunks declared one-column (ensure_2d=False) are one feature.
    x = _binary(d=1)[:, 0]
    ref = DPBetaBernoulli(random_state=0).fit(x.reshape(-1, 1))
    path = tmp_path / "x.npy"
    np.save(path, x)
    refused = [np.load(path, mmap_mode="r"), lambda: (x[i : i + 100] for i in range(0, len(x), 100))]
    da = pytest.importorskip("dask.array")
    refused.append(da.from_array(x, chunks=150))
    for inp in refused:
        with pytest.raises(ValueError, match="2D array"):
            DPBetaBernoulli(random_state=0).fit(inp)
    est = DPBetaBernoulli(random_state=0).fit(
        as_chunked(np.load(path, mmap_mode="r"), chunk_size=64, ensure_2d=False)
    )
    _same_counts(est, ref)
    assert est.n_features_in_ == 1


@pytest.mark.parametrize("mechanism", ["laplace", "ops"])
def test_beta_bernoulli_noise_added_once_whatever_the_chunks(monkeypatch, mechanism, chunk_passes):
    """1, 5 or 60 chunks: one release per feature (Laplace) or one sample (OPS), one pass."""
    X = _binary(d=4)
    counter = _ReleaseCounter(monkeypatch)
    orig_sample = ExponentialMechanism.sample

    def sample(mech, sampler, rng, ledger):
        counter.calls += 1
        return orig_sample(mech, sampler, rng, ledger)

    monkeypatch.setattr(ExponentialMechanism, "sample", sample)
    passes = chunk_passes
    expected = X.shape[1] if mechanism == "laplace" else 1
    ref = DPBetaBernoulli(mechanism=mechanism, random_state=0).fit(X)
    assert counter.calls == expected
    for n_chunks in (1, 5, 60):
        counter.calls, passes[:] = 0, []
        est = DPBetaBernoulli(mechanism=mechanism, random_state=0)
        est.fit(as_chunked(X, chunk_size=-(-len(X) // n_chunks)))
        assert counter.calls == expected and len(passes) == 1
        assert sum(e.count for e in est.privacy_ledger_.events) == expected
        if mechanism == "laplace":
            _same_counts(est, ref)
        np.testing.assert_array_equal(est.posterior_sample_, ref.posterior_sample_)


# ---------------------------------------------------------------------------
# Dask
# ---------------------------------------------------------------------------
def test_dask_array_and_dataframe_match_in_memory():
    da = pytest.importorskip("dask.array")
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    import dask

    X = _data(300, seed=7)
    ref = DPGaussianMixture(covariance_type="tied", **_FIT).fit(X)
    with dask.config.set(scheduler="synchronous"):
        # Column chunks are merged; row chunks are reduced in a tree.
        est = DPGaussianMixture(covariance_type="tied", **_FIT).fit(da.from_array(X, chunks=(70, 2)))
        _assert_same_fit(est, ref)
        unknown = da.from_array(X, chunks=(70, 3)).to_dask_dataframe().to_dask_array()  # NaN row chunks
        _assert_same_fit(DPGaussianMixture(covariance_type="tied", **_FIT).fit(unknown), ref)
        df = dd.from_pandas(pd.DataFrame(X, columns=["a", "b", "c"]), npartitions=4)
        est = DPGaussianMixture(covariance_type="tied", **_FIT).fit(df)
        _assert_same_fit(est, ref)
        data = as_chunked(df)
        assert data.scan().n_samples == len(X) and sum(data.block_rows) == len(X)
    assert list(est.feature_names_in_) == ["a", "b", "c"] and est.n_features_in_ == 3
    bad = X.copy()
    bad[5, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        DPGaussianMixture(**_FIT).fit(da.from_array(bad, chunks=(100, 3)))


def test_fit_on_a_local_dask_cluster():
    pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    import dask.array as da

    X = _data(500, seed=8)
    ref = DPGaussianMixture(**_FIT).fit(X)
    with (
        distributed.LocalCluster(
            processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
    ):
        est = DPGaussianMixture(**_FIT).fit(da.from_array(X, chunks=(250, 3)))
    _assert_same_fit(est, ref)
    assert est.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-4)
