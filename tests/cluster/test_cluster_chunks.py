"""DPKMeans / DPKernelKMeans on chunked input (memmap, chunk factory, Dask).

The chunked fit computes the same exact statistics chunk by chunk and adds
the noise once, on the driver: with the same random_state it must release the
same centres as the in-memory fit (up to summation order) and record the same
privacy events.
"""

import numpy as np
import pytest
from conftest import three_blobs

from skdp._chunks import as_chunked
from skdp.cluster import DPKernelKMeans, DPKMeans
from skdp.cluster import _lloyd as lloyd
from skdp.exceptions import PrivacyLeakWarning
from skdp.privacy.mechanisms.additive import _AdditiveMechanism


def data(n=600):
    return three_blobs(n)[0]


ESTIMATORS = [
    DPKMeans(3, epsilon=2.0, data_norm=6.0, max_iter=4, random_state=0),
    DPKMeans(3, epsilon=2.0, data_norm=6.0, max_iter=3, mechanism="laplace", delta=0.0, random_state=0),
    DPKernelKMeans(3, epsilon=2.0, gamma=0.5, n_components=30, max_iter="auto", random_state=0),
    DPKernelKMeans(3, epsilon=2.0, gamma=0.5, n_components=30, clip_norm="auto", max_iter=3, random_state=0),
    DPKernelKMeans(
        3, epsilon=2.0, gamma=0.5, n_components=30, init=[[-3, -3], [3, -3], [0, 3]], random_state=0
    ),
]


def assert_same_fit(a, b):
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(a.noisy_counts_, b.noisy_counts_, rtol=1e-9, atol=1e-9)
    bound = a._bound_attribute
    assert a.n_iter_ == b.n_iter_ and getattr(a, bound) == getattr(b, bound)
    assert [(type(e), e.count, e.noise_multiplier) for e in a.privacy_ledger_.events] == [
        (type(e), e.count, e.noise_multiplier) for e in b.privacy_ledger_.events
    ]
    assert a.privacy_spent_ == b.privacy_spent_


@pytest.mark.parametrize("est", ESTIMATORS, ids=lambda e: f"{type(e).__name__}-{e.max_iter}")
def test_memmap_and_factory_match_in_memory(est, tmp_path):
    X = data()
    ref = est.fit(X)
    ref = type(ref)(**ref.get_params()).fit(X)
    path = tmp_path / "X.npy"
    np.save(path, X)
    mm = np.load(path, mmap_mode="r")
    chunked = type(est)(**est.get_params()).fit(as_chunked(mm, chunk_size=200))
    assert_same_fit(ref, chunked)

    def factory():
        return (X[i : i + 333] for i in range(0, len(X), 333))

    assert_same_fit(ref, type(est)(**est.get_params()).fit(factory))
    assert chunked.n_features_in_ == 2
    np.testing.assert_array_equal(chunked.predict(X), ref.predict(X))
    # fit_predict on chunks: the labels of every row in row order, as predict
    # on the in-memory rows (and nothing per row left on the model).
    from_chunks = type(est)(**est.get_params())
    np.testing.assert_array_equal(from_chunks.fit_predict(factory), ref.predict(X))
    assert not hasattr(from_chunks, "labels_") and not hasattr(from_chunks, "inertia_")


def test_dask_matches_in_memory():
    da = pytest.importorskip("dask.array")
    X = data()
    for est in ESTIMATORS[:3]:
        ref = type(est)(**est.get_params()).fit(X)
        out = type(est)(**est.get_params()).fit(da.from_array(X, chunks=(400, 1)))
        assert_same_fit(ref, out)
        labels = type(est)(**est.get_params()).fit_predict(da.from_array(X, chunks=(400, 1)))
        np.testing.assert_array_equal(labels, ref.predict(X))


def test_chunked_rows_are_clipped(monkeypatch):
    seen = []
    original = lloyd.cluster_statistics

    def spy(Z, labels, k):
        seen.append(np.linalg.norm(Z, axis=1).max())
        return original(Z, labels, k)

    monkeypatch.setattr(lloyd, "cluster_statistics", spy)
    X = data(600) * 100

    def factory():
        return (X[i : i + 100] for i in range(0, len(X), 100))

    DPKMeans(3, data_norm=0.7, max_iter=3, random_state=0).fit(factory)
    assert len(seen) == 3 * 6 and max(seen) <= 0.7 * (1 + 1e-12)


def test_chunked_data_norm_none_warns_and_bad_chunks_rejected():
    X = data(300)
    with pytest.warns(PrivacyLeakWarning):
        km = DPKMeans(3, data_norm="nonprivate", max_iter=2, random_state=0).fit(as_chunked(X, chunk_size=64))
    assert km.data_norm_ == pytest.approx(np.linalg.norm(X, axis=1).max())
    bad = X.copy()
    bad[-1, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        DPKMeans(3, data_norm=5.0, random_state=0).fit(as_chunked(bad, chunk_size=64))
    with pytest.raises(ValueError, match="n_clusters"):
        DPKMeans(3, data_norm=5.0, random_state=0).fit(as_chunked(X[:2], chunk_size=1))


# ---------------------------------------------------------------------------
# Dask collections whose row chunk sizes are unknown (a Dask DataFrame)
# ---------------------------------------------------------------------------
RANDOM_INIT = [
    DPKMeans(3, epsilon=2.0, data_norm=6.0, max_iter=4, random_state=0),
    DPKernelKMeans(3, epsilon=2.0, gamma=0.5, n_components=30, clip_norm="auto", max_iter=3, random_state=0),
]


@pytest.mark.parametrize("est", RANDOM_INIT, ids=lambda e: type(e).__name__)
def test_dask_dataframe_and_unknown_chunks_match_in_memory(est):
    """The random partition is drawn per block from the scan's row counts: no NaN chunk sizes needed."""
    da = pytest.importorskip("dask.array")
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    import dask

    X = data()
    ref = type(est)(**est.get_params()).fit(X)
    df = dd.from_pandas(pd.DataFrame(X, columns=["u", "v"]), npartitions=3)
    unknown = da.from_array(X, chunks=(250, 2)).to_dask_dataframe().to_dask_array()
    assert np.isnan(unknown.chunks[0][0])
    with dask.config.set(scheduler="synchronous"):
        from_df = type(est)(**est.get_params()).fit(df)
        from_unknown = type(est)(**est.get_params()).fit(unknown)
    assert_same_fit(ref, from_df)
    assert_same_fit(ref, from_unknown)
    assert list(from_df.feature_names_in_) == ["u", "v"] and from_df.n_features_in_ == 2
    assert not hasattr(from_unknown, "feature_names_in_")


def test_dask_fit_on_a_local_cluster_with_a_dataframe():
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    distributed = pytest.importorskip("distributed")

    X = data(300)
    est = RANDOM_INIT[0]
    ref = type(est)(**est.get_params()).fit(X)
    with (
        distributed.LocalCluster(
            processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
    ):
        out = type(est)(**est.get_params()).fit(dd.from_pandas(pd.DataFrame(X), npartitions=2))
    assert_same_fit(ref, out)


# ---------------------------------------------------------------------------
# Iterators and factories that cannot be read several times
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("est", RANDOM_INIT, ids=lambda e: type(e).__name__)
def test_one_shot_iterator_is_refused_with_a_clear_error(est):
    X = data(300)
    with pytest.raises(TypeError, match="X is a one-shot iterator.*callable that returns a fresh iterable"):
        type(est)(**est.get_params()).fit(X[i : i + 100] for i in range(0, 300, 100))


@pytest.mark.parametrize("est", RANDOM_INIT, ids=lambda e: type(e).__name__)
def test_factory_returning_the_same_generator_is_caught(est, monkeypatch):
    calls = []
    monkeypatch.setattr(_AdditiveMechanism, "release", lambda *a: calls.append(a))
    X = data(300)
    shared = (X[i : i + 100] for i in range(0, 300, 100))
    with pytest.raises(ValueError, match="0 rows in this pass but 300.*fresh iterable"):
        type(est)(**est.get_params()).fit(lambda: shared)
    assert not calls  # caught at the first pass after the scan, before any release

    sizes = iter([300, 200])  # data changed between passes

    def changing():
        return iter([X[: next(sizes)]])

    with pytest.raises(ValueError, match="200 rows in this pass but 300"):
        type(est)(**est.get_params()).fit(changing)


# ---------------------------------------------------------------------------
# Noise once per statistic per iteration, whatever the number of chunks
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("est", ESTIMATORS, ids=lambda e: f"{type(e).__name__}-{e.max_iter}")
def test_noise_added_once_per_statistic_per_iteration_whatever_the_chunks(est, monkeypatch, chunk_passes):
    """1, 5 or 60 chunks: the same mechanism releases, and the same passes over the data."""
    X = data()
    releases = []
    orig_release = _AdditiveMechanism.release

    def release(mech, value, rng, ledger):
        releases.append(type(mech).__name__)
        return orig_release(mech, value, rng, ledger)

    monkeypatch.setattr(_AdditiveMechanism, "release", release)
    passes = chunk_passes
    ref = type(est)(**est.get_params()).fit(X)
    expected = 2 * ref.n_iter_ + ref._n_norm_selections()
    assert len(releases) == expected == sum(e.count for e in ref.privacy_ledger_.events)
    assert not passes
    for n_chunks in (1, 5, 60):
        releases[:], passes[:] = [], []
        out = type(est)(**est.get_params()).fit(as_chunked(X, chunk_size=-(-len(X) // n_chunks)))
        assert len(releases) == expected
        # scan + DPNorm histogram + one pass per Lloyd iteration: fit reads
        # nothing else (no labels or objective of the training rows).
        assert len(passes) == 1 + ref._n_norm_selections() + ref.n_iter_
        assert_same_fit(ref, out)
    # fit_predict: the same releases, and one more pass for the labels.
    releases[:], passes[:] = [], []
    type(est)(**est.get_params()).fit_predict(as_chunked(X, chunk_size=100))
    assert len(releases) == expected
    assert len(passes) == 1 + ref._n_norm_selections() + ref.n_iter_ + 1
