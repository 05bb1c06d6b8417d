"""DPNaiveBayesHMM on chunked input (memmap, chunk factory, Dask array / DataFrame).

The chunked fit reads the records twice (labels, then per-cell counts), adds
the per-chunk counts up exactly and releases them once, on the driver: with
the same random_state it must give the very same fit as in memory, and make
the same mechanism releases whatever the number of chunks.
"""

import warnings

import numpy as np
import pytest

from skdp._chunks import as_chunked
from skdp.bayes import DPNaiveBayesHMM
from skdp.bayes import _sequences as sequences
from skdp.bayes._sequences import ChunkedRecords, build_layout, cell_category_counts, encode_categories
from skdp.exceptions import PrivacyLeakWarning
from skdp.privacy import LaplaceMechanism
from skdp.privacy.mechanisms.additive import _AdditiveMechanism

N_CATEGORIES = (2, 3, 4)
CATS = [list(range(k)) for k in N_CATEGORIES]


def _data(n_seq=3, n_steps=5, n_records=8, seed=0):
    """Records of a 2-state HMM in shuffled row order (cells interleave across chunks)."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 2, size=(n_seq, n_steps))
    per_record = np.repeat(z.reshape(-1), n_records)
    columns = [
        np.where(rng.random(per_record.size) < 0.8, per_record * (k - 1), rng.integers(0, k, per_record.size))
        for k in N_CATEGORIES
    ]
    X = np.column_stack(columns)
    seq = np.repeat(np.arange(n_seq) * 10 + 3, n_steps * n_records)  # labels, not codes
    ts = np.tile(np.repeat(np.arange(n_steps) * 2 + 1900, n_records), n_seq)
    perm = rng.permutation(X.shape[0])
    return X[perm], seq[perm], ts[perm]


def _model(**params):
    params = {"categories": CATS, "n_iter": 6, "burn_in": 3, "random_state": 0, **params}
    return DPNaiveBayesHMM(**params)


def _factory(X, size):
    return lambda: (X[i : i + size] for i in range(0, len(X), size))


def assert_same_fit(a, b):
    for attr in ("startprob_", "transmat_", "states_", "cell_sequence_ids_", "cell_timesteps_"):
        np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr), err_msg=attr)
        assert getattr(a, attr).dtype == getattr(b, attr).dtype, attr
    for pa, pb in zip(a.emissionprob_, b.emissionprob_, strict=True):
        np.testing.assert_array_equal(pa, pb)
    for ca, cb in zip(a.categories_, b.categories_, strict=True):
        np.testing.assert_array_equal(ca, cb)
    assert ("noisy_counts_" in a.__dict__) == ("noisy_counts_" in b.__dict__)
    if "noisy_counts_" in a.__dict__:
        np.testing.assert_array_equal(a.noisy_counts_, b.noisy_counts_)
    assert a.n_features_in_ == b.n_features_in_
    assert a.privacy_spent_ == b.privacy_spent_
    if a.mechanism != "none":
        assert [(type(e), e.count) for e in a.privacy_ledger_.events] == [
            (type(e), e.count) for e in b.privacy_ledger_.events
        ]


LABELS = {
    "seq+ts": lambda s, t: (s, t),
    "ts-only": lambda s, t: (None, t),
    "seq-only": lambda s, t: (s, None),
    "none": lambda s, t: (None, None),
}


# ---------------------------------------------------------------------------
# The counts: chunked = in memory, exactly
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("labels", LABELS, ids=str)
@pytest.mark.parametrize("chunk_size", [1, 7, 50, 10_000])
def test_chunked_counts_and_layout_equal_the_in_memory_ones(labels, chunk_size):
    X, seq, ts = _data()
    s, t = LABELS[labels](seq, ts)
    layout = build_layout(s, t, X.shape[0])
    codes = encode_categories(X, [np.array(c) for c in CATS])
    expected = cell_category_counts(codes, layout.cell_of_record, layout.n_cells, N_CATEGORIES)

    records = ChunkedRecords(as_chunked(X, chunk_size=chunk_size), s, t)
    plan = records.scan_cells(auto_categories=True)
    counts = records.cell_counts(plan, plan.categories, N_CATEGORIES)
    np.testing.assert_array_equal(counts, expected)
    assert counts.sum() == X.size
    for attr in ("sequence_labels", "timestep_labels", "lengths", "grid"):
        np.testing.assert_array_equal(getattr(plan.layout, attr), getattr(layout, attr))
    assert plan.layout.cell_of_record is None and plan.n_records == X.shape[0]
    for learned, cats in zip(plan.categories, CATS, strict=True):
        np.testing.assert_array_equal(learned, cats)


# ---------------------------------------------------------------------------
# The fit: the same released counts and everything downstream
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("labels", LABELS, ids=str)
@pytest.mark.parametrize("n_components", [1, 2])
@pytest.mark.parametrize("mechanism", ["laplace", "ops", "none"])
def test_memmap_and_factory_match_in_memory(mechanism, n_components, labels, tmp_path):
    X, seq, ts = _data()
    s, t = LABELS[labels](seq, ts)
    params = dict(mechanism=mechanism, n_components=n_components)
    ref = _model(**params).fit(X, sequence_ids=s, timesteps=t)

    np.save(tmp_path / "X.npy", X)
    mm = np.load(tmp_path / "X.npy", mmap_mode="r")
    if s is not None:
        np.save(tmp_path / "s.npy", s)
        s = np.load(tmp_path / "s.npy", mmap_mode="r")  # labels out of core too
    assert_same_fit(ref, _model(**params).fit(as_chunked(mm, chunk_size=13), sequence_ids=s, timesteps=t))
    assert_same_fit(ref, _model(**params).fit(mm, sequence_ids=s, timesteps=t))  # one default chunk
    assert_same_fit(ref, _model(**params).fit(_factory(X, 17), sequence_ids=s, timesteps=t))


def test_string_categories_auto_warn_exactly_as_in_memory():
    X, seq, ts = _data()
    seq = seq.astype(str)
    labels = np.array(["lo", "mid", "hi", "top"], dtype=object)
    Xs = labels[X]
    with warnings.catch_warnings(record=True) as in_memory:
        warnings.simplefilter("always")
        ref = DPNaiveBayesHMM(n_iter=6, burn_in=3, categories="nonprivate", random_state=0).fit(
            Xs, sequence_ids=seq, timesteps=ts
        )
    with warnings.catch_warnings(record=True) as chunked:
        warnings.simplefilter("always")
        out = DPNaiveBayesHMM(n_iter=6, burn_in=3, categories="nonprivate", random_state=0).fit(
            _factory(Xs, 11), sequence_ids=seq, timesteps=ts
        )
    assert [(w.category, str(w.message)) for w in chunked] == [
        (w.category, str(w.message)) for w in in_memory
    ]
    assert [w.category for w in chunked] == [PrivacyLeakWarning]
    assert_same_fit(ref, out)
    assert out.cell_sequence_ids_.dtype.kind == "U" and out.categories_[0].dtype == object


def test_declared_categories_are_not_read_off_the_data(monkeypatch):
    """Pass 1 learns categories only for categories='nonprivate' (the in-memory fit's only leak)."""
    calls = []
    original = sequences.learn_categories

    def spy(X, categories="auto"):
        calls.append(categories)
        return original(X, categories)

    monkeypatch.setattr(sequences, "learn_categories", spy)
    X, seq, ts = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        _model().fit(_factory(X, 9), sequence_ids=seq, timesteps=ts)
    assert "auto" not in calls
    with pytest.warns(PrivacyLeakWarning, match="categories"):
        _model(categories="nonprivate").fit(_factory(X, 9), sequence_ids=seq, timesteps=ts)
    assert calls.count("auto") == -(-X.shape[0] // 9)  # once per chunk, in the first pass


def test_predict_and_score_on_in_memory_data_after_a_chunked_fit():
    X, seq, ts = _data()
    ref = _model().fit(X, sequence_ids=seq, timesteps=ts)
    out = _model().fit(_factory(X, 10), sequence_ids=seq, timesteps=ts)
    np.testing.assert_array_equal(
        out.predict(X, sequence_ids=seq, timesteps=ts), ref.predict(X, sequence_ids=seq, timesteps=ts)
    )
    assert out.score(X, sequence_ids=seq, timesteps=ts) == ref.score(X, sequence_ids=seq, timesteps=ts)
    with pytest.raises(TypeError, match="in-memory"):
        out.predict(_factory(X, 10), sequence_ids=seq, timesteps=ts)


# ---------------------------------------------------------------------------
# Noise once per feature per fit, whatever the chunks
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("labels", ["seq+ts", "seq-only"])
@pytest.mark.parametrize("n_components", [1, 2])
def test_laplace_releases_do_not_depend_on_the_number_of_chunks(
    n_components, labels, monkeypatch, chunk_passes
):
    X, seq, ts = _data()
    s, t = LABELS[labels](seq, ts)
    releases = []
    orig_release = LaplaceMechanism.release

    def release(mech, value, rng, ledger):
        releases.append(np.shape(value))
        return orig_release(mech, value, rng, ledger)

    monkeypatch.setattr(LaplaceMechanism, "release", release)
    passes = chunk_passes
    ref = _model(n_components=n_components).fit(X, sequence_ids=s, timesteps=t)
    expected = list(releases)
    assert len(expected) == X.shape[1] == sum(e.count for e in ref.privacy_ledger_.events)
    assert not passes
    for n_chunks in (1, 5, 60):
        releases[:], passes[:] = [], []
        out = _model(n_components=n_components).fit(
            as_chunked(X, chunk_size=-(-len(X) // n_chunks)), sequence_ids=s, timesteps=t
        )
        assert releases == expected  # same number, same shapes
        assert len(passes) == 2  # labels, then counts
        assert_same_fit(ref, out)


def test_bad_chunks_fail_before_any_release(monkeypatch):
    calls = []
    monkeypatch.setattr(_AdditiveMechanism, "release", lambda *a: calls.append(a))
    X, seq, ts = _data()
    bad = X.copy()
    bad[-1, 0] = 9  # not among the declared categories
    with pytest.raises(ValueError, match="unknown categor"):
        _model().fit(_factory(bad, 10), sequence_ids=seq, timesteps=ts)
    bad_ts = ts.astype(float)
    bad_ts[-1] = np.nan
    with pytest.raises(ValueError, match="timesteps contains NaN"):
        _model().fit(_factory(X, 10), sequence_ids=seq, timesteps=bad_ts)
    nan_X = X.astype(object)
    nan_X[-1, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        _model().fit(_factory(nan_X, 10), sequence_ids=seq, timesteps=ts)
    shared = (X[i : i + 50] for i in range(0, len(X), 50))
    with pytest.raises(ValueError, match="rows in this pass"):
        _model().fit(lambda: shared, sequence_ids=seq, timesteps=ts)
    sizes = iter([50, 40])

    def rechunked():  # the same rows, other chunk boundaries in the second pass
        size = next(sizes)
        return (X[i : i + size] for i in range(0, len(X), size))

    with pytest.raises(ValueError, match="differ from those of the first pass"):
        _model().fit(rechunked, sequence_ids=seq, timesteps=ts)
    assert not calls


def test_unsupported_combinations_are_refused_clearly():
    X, seq, ts = _data()
    mm = as_chunked(X, chunk_size=10)
    with pytest.raises(TypeError, match="one-shot iterator"):
        _model().fit((X[i : i + 10] for i in range(0, len(X), 10)), sequence_ids=seq, timesteps=ts)
    with pytest.raises(TypeError, match="column names only when X is a DataFrame"):
        _model().fit(mm, sequence_ids="region")
    with pytest.raises(TypeError, match="column names only when the chunks of X are DataFrames"):
        _model().fit(_factory(X, 10), sequence_ids="region")
    with pytest.raises(ValueError, match="sequence_ids must be 1-D with one entry per row of X"):
        _model().fit(mm, sequence_ids=seq[:-1], timesteps=ts)
    with pytest.raises(ValueError, match="timesteps must be 1-D with one entry per row of X"):
        _model().fit(_factory(X, 10), sequence_ids=seq, timesteps=np.append(ts, 1))
    with pytest.raises(ValueError, match="timesteps must be 1-D with one entry per row of X"):
        _model().fit(_factory(X, 10), sequence_ids=seq, timesteps=ts[:-3])
    with pytest.raises(TypeError, match="array with one entry per row"):
        _model().fit(mm, sequence_ids=lambda: seq)
    with pytest.raises(ValueError, match="0 sample"):
        _model().fit(lambda: iter([X[:0]]))
    da = pytest.importorskip("dask.array")
    with pytest.raises(TypeError, match="sequence_ids is a Dask collection but X is not"):
        _model().fit(mm, sequence_ids=da.from_array(seq, chunks=50), timesteps=ts)
    with pytest.raises(TypeError, match="column names only when X is a DataFrame"):
        _model().fit(da.from_array(X, chunks=(50, 3)), timesteps="month")


def test_factory_of_dataframes_with_column_names():
    pd = pytest.importorskip("pandas")
    X, seq, ts = _data()
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "region": seq, "month": ts})
    ref = _model().fit(frame, sequence_ids="region", timesteps="month")
    out = _model().fit(
        lambda: (frame.iloc[i : i + 25] for i in range(0, len(frame), 25)),
        sequence_ids="region",
        timesteps="month",
    )
    assert_same_fit(ref, out)
    # A column name for one, an array for the other.
    mixed = _model().fit(
        lambda: (frame.iloc[i : i + 25].drop(columns="month") for i in range(0, len(frame), 25)),
        sequence_ids="region",
        timesteps=ts,
    )
    assert_same_fit(ref, mixed)


# ---------------------------------------------------------------------------
# Dask
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("labels", LABELS, ids=str)
def test_dask_array_and_dataframe_match_in_memory(labels):
    da = pytest.importorskip("dask.array")
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    import dask

    X, seq, ts = _data()
    s, t = LABELS[labels](seq, ts)
    ref = _model().fit(X, sequence_ids=s, timesteps=t)
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "region": seq, "month": ts})
    ddf = dd.from_pandas(frame, npartitions=4)
    names = ("region" if s is not None else None, "month" if t is not None else None)
    dlabels = [None if v is None else da.from_array(v, chunks=37) for v in (s, t)]  # other blocks than X
    unknown = da.from_array(X, chunks=(50, 3)).to_dask_dataframe().to_dask_array()
    assert np.isnan(unknown.chunks[0][0])
    with dask.config.set(scheduler="synchronous"):
        fits = {
            "array": _model().fit(da.from_array(X, chunks=(23, 1)), sequence_ids=s, timesteps=t),
            "array + dask labels": _model().fit(
                da.from_array(X, chunks=(23, 3)), sequence_ids=dlabels[0], timesteps=dlabels[1]
            ),
            "unknown chunks + numpy labels": _model().fit(unknown, sequence_ids=s, timesteps=t),
            "dataframe + column names": _model().fit(
                ddf.drop(columns=[c for c in ("region", "month") if c not in names]),
                sequence_ids=names[0],
                timesteps=names[1],
            ),
            "dataframe + dask labels": _model().fit(
                ddf[["a", "b", "c"]], sequence_ids=dlabels[0], timesteps=dlabels[1]
            ),
        }
    for out in fits.values():
        assert_same_fit(ref, out)
    assert list(fits["dataframe + column names"].feature_names_in_) == ["a", "b", "c"]
    assert not hasattr(fits["array"], "feature_names_in_")


def test_dask_labels_misaligned_with_blocks_of_unknown_length_are_caught():
    da = pytest.importorskip("dask.array")
    import dask

    X, seq, ts = _data()
    unknown_X = da.from_array(X, chunks=(50, 3)).to_dask_dataframe().to_dask_array()
    unknown_seq = da.from_array(seq, chunks=40).to_dask_dataframe().to_dask_array()
    assert unknown_X.numblocks[0] == unknown_seq.numblocks[0]
    with (
        dask.config.set(scheduler="synchronous"),
        pytest.raises(ValueError, match="not aligned with the row blocks"),
    ):
        _model().fit(unknown_X, sequence_ids=unknown_seq, timesteps=ts)


def test_dask_dataframe_string_categories_on_a_local_cluster():
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    distributed = pytest.importorskip("distributed")

    X, seq, ts = _data()
    labels = np.array(["lo", "mid", "hi", "top"], dtype=object)
    frame = pd.DataFrame(
        {"a": labels[X[:, 0]], "b": X[:, 1], "c": labels[X[:, 2]], "region": seq.astype(str), "month": ts}
    )
    with pytest.warns(PrivacyLeakWarning, match="categories"):
        ref = _model(categories="nonprivate").fit(frame, sequence_ids="region", timesteps="month")
    with (
        distributed.LocalCluster(
            processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
        pytest.warns(PrivacyLeakWarning, match="categories"),
    ):
        out = _model(categories="nonprivate").fit(
            dd.from_pandas(frame, npartitions=3), sequence_ids="region", timesteps="month"
        )
    assert_same_fit(ref, out)
    assert list(out.feature_names_in_) == ["a", "b", "c"]
