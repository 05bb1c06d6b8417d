"""Chunked data sources and the map-reduce of per-chunk sufficient statistics.

Estimators that touch the data only through sums (expected sufficient
statistics, counts) can fit on data that does not fit in memory, or that
lives on a Dask cluster: each pass computes the statistics chunk by chunk
and adds them up; the privacy noise is then added *once* to each global
sum, on the driver, exactly as in the in-memory fit.  Since the released
value is the same function of the same global sum, chunking changes
nothing in the guarantee (and, with the same ``random_state``, the result
matches the in-memory fit up to floating-point summation order).

Adopting this module in an estimator takes three steps::

    from skdp._chunks import as_chunked, is_chunked_input

    if is_chunked_input(X):                      # memmap, Dask, factory of chunks
        data = as_chunked(X)                     # validates lazily, per chunk
        summary = data.scan()                    # one pass: n_samples, n_features,
                                                 # max row norm (for data_norm="nonprivate")
        totals = data.map_reduce(stats_fn, params...)   # one reduction per call

``stats_fn(chunk, *params)`` is a *module-level* function (Dask may pickle
it to worker processes) that receives a finite ``float64`` array of shape
``(n_rows, n_features)`` and returns a NumPy array or a tuple of NumPy arrays
(or floats) of fixed shapes; :meth:`ChunkedData.map_reduce` returns their
element-wise sums over all chunks.  Noise is the caller's business: add it
to the returned totals through a :mod:`skdp.privacy` mechanism, once per
statistic per iteration.

Accepted inputs (:func:`as_chunked`):

* a NumPy array, including a :class:`numpy.memmap` (e.g.
  ``np.load(path, mmap_mode="r")``): row slices of ``chunk_size`` rows.  A
  memmap that owns its mapping is re-mapped chunk by chunk, so that pages
  read in one chunk leave the process's resident memory with it;
* a Dask array (rows may be chunked freely, even in blocks of unknown
  length; columns are merged into one chunk) or a Dask DataFrame (converted
  with ``to_dask_array()``, whose partition lengths are unknown): one
  ``dask.compute`` per :meth:`~ChunkedData.map_reduce`, on the active
  scheduler (a ``distributed.Client`` if one is active).  :meth:`~ChunkedData.scan`
  also records the number of rows of every block (``block_rows``);
* a callable returning a fresh iterable of 2-D NumPy chunks (a re-iterable
  factory, e.g. reading files one by one): called once per pass.  Every pass
  after the :meth:`~ChunkedData.scan` must yield as many rows as the scan
  counted: a callable that hands back the same (exhausted) generator is
  caught with a ``ValueError``;
* a one-shot iterator of chunks (a generator object) only with
  ``single_pass=True``, for estimators that read the data once (one
  :meth:`~ChunkedData.map_reduce` and no scan).  Otherwise it is refused with
  a ``TypeError`` naming ``X``, since iterative estimators need several
  passes.

``ensure_2d=False`` (for estimators where a 1-D ``X`` is one feature) accepts
1-D sources and chunks as one column, as the in-memory path does.

``dtype=None`` (for categorical data, e.g. the labels of
``DPNaiveBayesHMM``) keeps every chunk's own dtype (strings, objects,
integers) instead of converting it to ``float64``: the chunks are still
checked for shape and number of columns (and float chunks for NaN or
infinity), but validating the values is the caller's business, and
:meth:`ChunkedData.scan` reports ``max_norm`` as NaN for non-numeric chunks.

Validation cannot see all the data at once: every chunk is checked (2-D,
numeric, the same number of columns, no NaN or infinity) when it is used,
and a violation raises a ``ValueError`` naming ``X``.
"""

from __future__ import annotations

import functools
import mmap
import numbers
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

__all__ = ["ChunkSummary", "ChunkedData", "as_chunked", "is_chunked_input"]

#: Target size in bytes of one float64 chunk when ``chunk_size`` is not given.
DEFAULT_CHUNK_BYTES = 2**24


def is_dask_collection(X):
    """Whether ``X`` follows the Dask collection protocol (no Dask import needed)."""
    return hasattr(X, "__dask_graph__") and callable(getattr(X, "__dask_graph__", None))


def is_chunked_input(X):
    """Whether ``X`` should be fitted chunk by chunk rather than loaded in memory.

    True for a :class:`ChunkedData`, a :class:`numpy.memmap`, a Dask array or
    DataFrame, a callable (a factory of chunks) and a one-shot iterator (which
    :func:`as_chunked` refuses with a clear ``TypeError`` unless the estimator
    reads the data in a single pass).  Plain arrays, lists and pandas objects
    are left to the in-memory path.
    """
    return isinstance(X, (ChunkedData, np.memmap, Iterator)) or is_dask_collection(X) or callable(X)


class ChunkSummary(NamedTuple):
    """What one validating pass over the data learns.

    ``max_norm`` is the largest L2 row norm: a data-dependent quantity that
    leaks privacy if used as a bound (warn with ``warn_privacy_leak``).
    """

    n_samples: int
    n_features: int
    max_norm: float


def check_chunk(chunk, n_features=None, name="X", ensure_2d=True, dtype=np.float64):
    """A chunk as a finite float64 2-D array, or a ``ValueError`` naming ``name``.

    With ``ensure_2d=False`` a 1-D chunk is one column.  With ``dtype=None``
    the chunk keeps its own dtype (e.g. strings) and only float chunks are
    checked for NaN or infinity.
    """
    try:
        arr = np.asarray(chunk, dtype=dtype)
    except (TypeError, ValueError) as exc:
        # The conversion's own message may quote the value: name the input only.
        failed = exc
    else:
        failed = None
    if failed is not None:
        raise ValueError(
            f"{name} must contain only numbers; a chunk could not be converted ({type(failed).__name__})."
        )
    if arr.ndim == 1 and not ensure_2d:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise ValueError(
            f"Expected a 2D array for {name}, got a chunk of shape {arr.shape}. "
            "Reshape your data with array.reshape(-1, 1) if it has a single feature."
        )
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(f"{name} has chunks with {arr.shape[1]} and {n_features} features.")
    if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
        raise ValueError(f"Input {name} contains NaN or infinity (found in a chunk).")
    return arr


def _apply(fn, chunk, n_features, *params, dtype=np.float64):
    """Validate one chunk and apply ``fn`` to it (module level: picklable for Dask)."""
    return fn(check_chunk(chunk, n_features, dtype=dtype), *params)


def _chunk_summary(chunk):
    if chunk.dtype.kind not in "iuf":  # dtype=None: labels have no norm
        return np.array([chunk.shape[0], np.nan])
    return np.array([chunk.shape[0], np.sqrt(np.max(np.einsum("ij,ij->i", chunk, chunk), initial=0.0))])


def _add(a, b):
    """Element-wise sum of two per-chunk results (arrays, floats or tuples of them)."""
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b, strict=True))
    return a + b


def _combine_summaries(a, b):
    return np.array([a[0] + b[0], max(a[1], b[1])])


def _tree_reduce(parts, combine):
    """Pairwise reduction of a list (of Dask delayed values) in ``log2`` levels."""
    import dask

    combine = dask.delayed(combine, pure=True)
    while len(parts) > 1:
        parts = [
            combine(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
            for i in range(0, len(parts), 2)
        ]
    return parts[0]


def _default_chunk_size(n_features):
    return max(1, DEFAULT_CHUNK_BYTES // (8 * max(int(n_features), 1)))


def _no_samples():
    return ValueError("Found array with 0 sample(s) (shape=(0, ...)) while a minimum of 1 is required.")


class _OneShot:
    """A one-shot iterator of chunks seen as a factory that may be called once."""

    def __init__(self, iterator):
        self.iterator = iterator

    def __call__(self):
        if self.iterator is None:
            raise TypeError(
                "X is a one-shot iterator and has already been read; pass a callable that returns "
                "a fresh iterable of chunks to read the data again."
            )
        iterator, self.iterator = self.iterator, None
        return iterator


class ChunkedData:
    """A 2-D dataset seen as row chunks: NumPy (memmap), Dask, or a factory of chunks.

    Build it with :func:`as_chunked`.  It never holds more than one chunk
    (NumPy, factory) in memory on the driver; with Dask, the work runs on the
    scheduler's workers and only the per-chunk results travel.

    Parameters
    ----------
    source : ndarray, memmap, Dask array, Dask DataFrame or callable
        See the module docstring.
    chunk_size : int or None, default=None
        Rows per chunk for NumPy sources (about 16 MB of float64 by
        default).  Ignored for Dask (its own chunks) and factories.
    ensure_2d : bool, default=True
        If False, a 1-D source (or 1-D chunk) is one column.
    single_pass : bool, default=False
        Accept a one-shot iterator of chunks (it can be read once only).
    dtype : numpy dtype or None, default=numpy.float64
        Type the chunks are converted to; None keeps each chunk's own dtype
        (categorical data; the values are then the caller's to validate).

    Attributes
    ----------
    kind : {"numpy", "dask", "factory"}
    n_features : int or None
        Known up front for NumPy and Dask sources; for a factory, after the
        first chunk has been read.
    feature_names : ndarray of str or None
        Column names of a Dask DataFrame with all-string columns.
    n_samples : int or None
        Number of rows counted by the last :meth:`scan` (None before).
    block_rows : tuple of int or None
        Dask sources: rows of every block, in order, counted by the last
        :meth:`scan` (known even where the Dask chunk sizes are not).

    Examples
    --------
    >>> import numpy as np
    >>> from skdp._chunks import as_chunked
    >>> X = np.arange(12.0).reshape(6, 2)
    >>> data = as_chunked(X, chunk_size=4)
    >>> data.map_reduce(lambda c: (c.sum(axis=0), float(len(c))))
    (array([30., 36.]), 6.0)
    >>> data.scan().n_samples
    6
    """

    def __init__(self, source, chunk_size=None, *, ensure_2d=True, single_pass=False, dtype=np.float64):
        self.dtype = dtype
        self.feature_names = None
        self.chunk_size = chunk_size
        self.ensure_2d = ensure_2d
        self.n_samples = None
        self.block_rows = None
        if chunk_size is not None and not (
            isinstance(chunk_size, numbers.Integral) and not isinstance(chunk_size, bool) and chunk_size >= 1
        ):
            raise ValueError(f"chunk_size must be a positive integer or None, got {chunk_size!r}.")
        if is_dask_collection(source):
            self.kind = "dask"
            self.source = self._dask_rows(source)
            n_features = self.source.shape[1]
            self.n_features = int(n_features) if n_features == n_features else None
        elif callable(source):
            self.kind = "factory"
            self.source = source
            self.n_features = None
        elif isinstance(source, Iterator):
            if single_pass:
                self.kind = "factory"
                self.source = _OneShot(source)
                self.n_features = None
                return
            raise TypeError(
                "X is a one-shot iterator; an iterative fit needs several passes over the data. "
                "Pass a callable that returns a fresh iterable of chunks instead, "
                "e.g. `lambda: (np.load(f) for f in files)`."
            )
        else:
            arr = source if isinstance(source, np.ndarray) else np.asarray(source)
            if arr.ndim == 1 and not ensure_2d:
                self.kind = "numpy"
                self.source = arr  # read as one column (see _numpy_chunks)
                self.n_features = 1
                return
            if arr.ndim != 2:
                raise ValueError(
                    f"Expected a 2D array for X, got shape {arr.shape}. "
                    "Reshape your data with array.reshape(-1, 1) if it has a single feature."
                )
            self.kind = "numpy"
            self.source = arr
            self.n_features = int(arr.shape[1])

    def _dask_rows(self, source):
        """A Dask array with one chunk across the columns (rows may be chunked freely)."""
        if hasattr(source, "to_dask_array"):  # Dask DataFrame (or Series)
            columns = np.asarray(getattr(source, "columns", []))
            if len(columns) and all(isinstance(c, str) for c in columns):
                self.feature_names = columns.astype(object)
            # The partition lengths stay unknown (NaN chunks): computing them
            # here would cost a pass; scan() counts the rows of every block.
            source = source.to_dask_array()
        if source.ndim == 1 and not self.ensure_2d:
            source = source[:, None]
        if source.ndim != 2:
            raise ValueError(f"Expected a 2D array for X, got a Dask array of shape {source.shape}.")
        if len(source.chunks[1]) > 1:
            source = source.rechunk({1: -1})
        return source

    # ------------------------------------------------------------------
    # Iterating over NumPy chunks (on the driver)
    # ------------------------------------------------------------------
    def _numpy_chunks(self):
        arr = self.source
        n, d = arr.shape[0], self.n_features  # a 1-D source (ensure_2d=False) is one column
        step = self.chunk_size or _default_chunk_size(d)
        remap = (
            isinstance(arr, np.memmap)
            and isinstance(arr.base, mmap.mmap)
            and arr.flags.c_contiguous
            and getattr(arr, "filename", None) is not None
        )
        for start in range(0, n, step):
            stop = min(start + step, n)
            if remap:
                # A fresh mapping of the chunk's rows only: once the chunk is
                # dropped its pages leave the resident set, whereas slicing the
                # caller's mapping would keep every page read so far mapped.
                offset = arr.offset + start * d * arr.itemsize
                yield np.memmap(
                    arr.filename, dtype=arr.dtype, mode="r", offset=offset, shape=(stop - start, d)
                )
            else:
                chunk = arr[start:stop]
                yield chunk.reshape(-1, 1) if chunk.ndim == 1 else chunk

    def _factory_chunks(self):
        chunks = self.source()
        if isinstance(chunks, np.ndarray):
            raise TypeError("The chunk factory X must return an iterable of 2-D arrays, not one array.")
        yield from chunks

    def iter_chunks(self):
        """Validated float64 chunks, one at a time (NumPy and factory sources).

        After a :meth:`scan`, a pass that yields another number of rows than
        the scan counted (a factory handing back an exhausted generator, or
        data changed between passes) raises a ``ValueError`` at its end.
        """
        if self.kind == "dask":
            raise TypeError("Dask sources are reduced on the cluster: use map_reduce.")
        chunks = self._numpy_chunks() if self.kind == "numpy" else self._factory_chunks()
        n_features = self.n_features
        n_rows = 0
        for chunk in chunks:
            arr = check_chunk(chunk, n_features, ensure_2d=self.ensure_2d, dtype=self.dtype)
            if n_features is None:
                n_features = self.n_features = arr.shape[1]
            if arr.shape[0]:
                n_rows += arr.shape[0]
                yield arr
        if self.n_samples is not None and n_rows != self.n_samples:
            raise ValueError(
                f"The chunks of X gave {n_rows} rows in this pass but {self.n_samples} in the first "
                "one. A callable X must return a fresh iterable of the same chunks on every call "
                "(the fit reads the data several times; a generator object is exhausted after one "
                "pass): e.g. `lambda: (np.load(f) for f in files)`, not a function returning one "
                "shared generator."
            )

    # ------------------------------------------------------------------
    # Map-reduce
    # ------------------------------------------------------------------
    def map_reduce(self, fn, *params):
        """Element-wise sum over the chunks of ``fn(chunk, *params)``.

        One pass over the data: for Dask, one ``dask.compute`` of a tree
        reduction (the per-chunk results are combined on the workers and
        only the total reaches the driver).  ``fn`` must be picklable
        (module level) for a multi-process scheduler.  Data without any row
        raises the ``ValueError`` of an empty array.
        """
        total = self._reduce(fn, _add, params)
        if total is None:
            raise _no_samples()
        return total

    def scan(self):
        """One validating pass: :class:`ChunkSummary` (rows, columns, largest row norm).

        Sets :attr:`n_samples` (later passes must yield as many rows) and,
        for Dask, :attr:`block_rows` (the rows of every block: the per-block
        summaries, two numbers each, are gathered rather than tree-reduced).
        """
        self.n_samples = self.block_rows = None
        if self.kind == "dask":
            import dask

            (per_block,) = dask.compute(self._dask_parts(_chunk_summary, ()))
            self.block_rows = tuple(int(p[0]) for p in per_block)
            total = np.array([sum(self.block_rows), max((float(p[1]) for p in per_block), default=0.0)])
        else:
            total = self._reduce(_chunk_summary, _combine_summaries, ())
        if total is None or total[0] == 0:
            raise _no_samples()
        self.n_samples = int(total[0])
        return ChunkSummary(self.n_samples, int(self.n_features), float(total[1]))

    def _dask_parts(self, fn, params):
        """One delayed ``fn(block, *params)`` per row block, in row order."""
        import dask

        blocks = self.source.to_delayed().ravel().tolist()
        task = dask.delayed(functools.partial(_apply, fn, dtype=self.dtype), pure=True)
        return [task(block, self.n_features, *params) for block in blocks]

    def _reduce(self, fn, combine, params):
        if self.kind == "dask":
            import dask

            parts = self._dask_parts(fn, params)
            if not parts:
                return None
            (total,) = dask.compute(_tree_reduce(parts, combine))
            return total
        total = None
        for chunk in self.iter_chunks():
            part = fn(chunk, *params)
            total = part if total is None else combine(total, part)
        return total


def as_chunked(X, chunk_size=None, *, ensure_2d=True, single_pass=False, dtype=np.float64):
    """Wrap ``X`` as a :class:`ChunkedData` (returned unchanged if it already is one).

    Parameters
    ----------
    X : ndarray, memmap, Dask array, Dask DataFrame, callable, iterator or ChunkedData
        The data; a callable must return a fresh iterable of 2-D chunks on
        every call.  A one-shot iterator of chunks needs ``single_pass=True``.
    chunk_size : int or None, default=None
        Rows per chunk for NumPy sources.
    ensure_2d : bool, default=True
        If False, 1-D sources and chunks are read as one column.
    single_pass : bool, default=False
        Accept a one-shot iterator (for estimators that read the data once,
        with one :meth:`ChunkedData.map_reduce` and no scan).
    dtype : numpy dtype or None, default=numpy.float64
        None keeps each chunk's own dtype (categorical data).

    Returns
    -------
    data : ChunkedData
    """
    if isinstance(X, ChunkedData):
        return X
    return ChunkedData(X, chunk_size=chunk_size, ensure_2d=ensure_2d, single_pass=single_pass, dtype=dtype)
