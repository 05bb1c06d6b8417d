"""Input convention of the sequence models: records grouped into (sequence, timestep) cells.

Foulds et al. (Appendix E, Table 2) observe ``N_{r,t}`` records at timestep
``t`` of sequence (region) ``r``.  scikit-learn passes one row per record, so
two aligned arrays say where each record belongs:

``sequence_ids``
    Label of the record's sequence (any sortable labels).  ``None``: all the
    records form one sequence.
``timesteps``
    Label of the record's timestep (sortable; the chain visits the observed
    timesteps of each sequence in sorted order, so gaps are skipped as the
    paper's preprocessing does).  ``None``: every record is its own timestep,
    in row order within its sequence (an ordinary HMM with one emission per
    step).

This module turns them into a :class:`CellLayout` and aggregates records into
per-cell category counts ``n_{r,t,d,j}`` (Eq. 70-71), in memory or, for a
chunked ``X`` (memmap, Dask, factory of chunks; :class:`ChunkedRecords`), in
two passes over the chunks with the same result.
"""

from __future__ import annotations

import copy
import numbers
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from sklearn.utils import check_array

from .._chunks import ChunkedData, _no_samples, as_chunked, check_chunk, is_dask_collection


@dataclass(frozen=True)
class CellLayout:
    """Cells in chain order and the padded ``(n_sequences, max_length)`` grid over them.

    Attributes
    ----------
    cell_of_record : ndarray of shape (n_records,) or None
        Index of each record's cell (None for a chunked fit, which never
        holds all the records).
    sequence_labels, timestep_labels : ndarray of shape (n_cells,)
        Labels of each cell, cells sorted by sequence then timestep.
    lengths : ndarray of shape (n_sequences,)
        Number of cells (timesteps) of each sequence.
    grid : ndarray of shape (n_sequences, max(lengths))
        ``grid[r, t]`` is the cell at position ``t`` of sequence ``r``, -1 past
        the end of the sequence.
    """

    cell_of_record: np.ndarray
    sequence_labels: np.ndarray
    timestep_labels: np.ndarray
    lengths: np.ndarray
    grid: np.ndarray

    @property
    def n_cells(self):
        return self.sequence_labels.shape[0]


def split_frame(X, sequence_ids, timesteps):
    """Take ``sequence_ids`` / ``timesteps`` given as column names out of a DataFrame."""
    names = [v for v in (sequence_ids, timesteps) if isinstance(v, str)]
    if not names:
        return X, sequence_ids, timesteps
    if not hasattr(X, "columns"):
        raise TypeError(
            "sequence_ids and timesteps may be column names only when X is a DataFrame; "
            "otherwise pass arrays with one entry per row."
        )
    for name in names:
        if name not in X.columns:
            raise ValueError(f"Column {name!r} is not in X.")
    if isinstance(sequence_ids, str):
        sequence_ids = X[sequence_ids].to_numpy()
    if isinstance(timesteps, str):
        timesteps = X[timesteps].to_numpy()
    return X.drop(columns=names), sequence_ids, timesteps


def _as_labels(values, name, n_records):
    values = np.asarray(values)
    if values.ndim != 1 or values.shape[0] != n_records:
        raise ValueError(
            f"{name} must be 1-D with one entry per row of X ({n_records}), got shape {values.shape}."
        )
    if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
        raise ValueError(f"{name} contains NaN or infinity.")
    if values.dtype.kind == "O":
        try:
            values = values.astype(str) if all(isinstance(v, str) for v in values) else values.astype(float)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must hold numbers or strings.") from exc
        if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
            raise ValueError(f"{name} contains NaN or infinity.")
    return values


def build_layout(sequence_ids, timesteps, n_records):
    """Group records into cells (see module docstring for the convention).

    Returns
    -------
    layout : CellLayout
    """
    if sequence_ids is None:
        seq_codes = np.zeros(n_records, dtype=np.int64)
        seq_labels = np.zeros(1, dtype=np.int64)
    else:
        seq_labels, seq_codes = np.unique(
            _as_labels(sequence_ids, "sequence_ids", n_records), return_inverse=True
        )
    if timesteps is None:
        # Row order within each sequence is the time axis.
        order = np.argsort(seq_codes, kind="stable")
        time_codes = np.empty(n_records, dtype=np.int64)
        starts = np.searchsorted(seq_codes[order], np.arange(seq_labels.shape[0]))
        time_codes[order] = np.arange(n_records) - starts[seq_codes[order]]
        time_labels = np.arange(max(n_records, 1))
    else:
        time_labels, time_codes = np.unique(
            _as_labels(timesteps, "timesteps", n_records), return_inverse=True
        )
    n_times = max(time_labels.shape[0], 1)
    keys = seq_codes.astype(np.int64) * n_times + time_codes
    cell_keys, cell_of_record = np.unique(keys, return_inverse=True)
    return layout_from_cells(cell_keys, n_times, seq_labels, time_labels, cell_of_record.reshape(-1))


def layout_from_cells(cell_keys, n_times, seq_labels, time_labels, cell_of_record=None):
    """The :class:`CellLayout` of the cells ``cell_keys = seq_code * n_times + time_code`` (sorted)."""
    cell_seq, cell_time = np.divmod(cell_keys, n_times)
    lengths = np.bincount(cell_seq, minlength=seq_labels.shape[0])
    # Sequences with no record cannot occur (labels come from the records).
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    position = np.arange(cell_keys.shape[0]) - starts[cell_seq]
    grid = np.full((lengths.shape[0], int(lengths.max(initial=0))), -1, dtype=np.int64)
    grid[cell_seq, position] = np.arange(cell_keys.shape[0])
    return CellLayout(
        cell_of_record=cell_of_record,
        sequence_labels=seq_labels[cell_seq],
        timestep_labels=time_labels[cell_time],
        lengths=lengths,
        grid=grid,
    )


def cell_category_counts(codes, cell_of_record, n_cells, n_categories):
    """Counts ``n[c, d, j]`` of records of cell ``c`` with feature ``d`` equal to ``j``.

    Foulds et al., Eq. 70-71: the sufficient statistics of the cell's
    naive-Bayes likelihood.  Stored padded to ``max(n_categories)``; codes
    below 0 (unknown categories to ignore) are not counted.

    Parameters
    ----------
    codes : ndarray of int, shape (n_records, n_features)
    cell_of_record : ndarray of int, shape (n_records,)
    n_cells : int
    n_categories : sequence of int, length n_features

    Returns
    -------
    counts : ndarray of shape (n_cells, n_features, max(n_categories))
    """
    n_records, n_features = codes.shape
    kmax = int(max(n_categories, default=1))
    flat = (cell_of_record[:, None] * n_features + np.arange(n_features)[None, :]) * kmax + codes
    flat = flat[codes >= 0]
    counts = np.bincount(flat, minlength=n_cells * n_features * kmax)
    return counts.reshape(n_cells, n_features, kmax).astype(float)


def _check_column(column, d):
    if column.dtype.kind == "O":
        for value in column:
            if not isinstance(value, (str, numbers.Number)):
                # Neither the value, its type nor its feature: at fit this
                # fires after the reservation, on private training data.
                # (The wording matches scikit-learn's check_dtype_object.)
                raise TypeError(
                    "X must hold categorical labels: every value's argument must be a string or a number."
                )
    return column


def learn_categories(X, categories="auto"):
    """Categories of each column, as :class:`~sklearn.preprocessing.OrdinalEncoder` learns them.

    ``"auto"``: the sorted unique values of each column.  A list gives them
    per feature (any order; the code of a value is its position); every
    training value must be among them.
    """
    n_features = X.shape[1]
    if isinstance(categories, str):
        return [np.unique(_check_column(X[:, d], d)) for d in range(n_features)]
    if len(categories) != n_features:
        raise ValueError(f"categories has {len(categories)} entries, but X has {n_features} features.")
    learned = []
    for d, cats in enumerate(categories):
        cats = np.asarray(cats)
        if cats.ndim != 1 or cats.size == 0:
            raise ValueError(f"categories[{d}] must be a non-empty 1-D list of values.")
        if np.unique(cats).size != cats.size:
            raise ValueError(f"categories[{d}] has duplicate values.")
        learned.append(cats)
    return learned


def encode_categories(X, categories, handle_unknown="error", context="fit"):
    """Codes ``j`` with ``X[:, d] == categories[d][j]``; unknown values raise or give -1.

    At ``context="fit"`` an unknown value always raises: the guarantee covers
    datasets inside the declared ``categories`` only.  The message names the
    parameter and never the values, nor which feature holds them: the fit
    has reserved its budget by then and the values are private training
    data.  At predict/score time (``context="transform"``) the rows are the
    caller's own, and the message names the feature.

    Returns
    -------
    codes : ndarray of int, shape (n_records, n_features)
    """
    codes = np.empty(X.shape, dtype=np.int64)
    for d, cats in enumerate(categories):
        column = _check_column(X[:, d], d)
        order = np.argsort(cats, kind="stable")
        ordered = cats[order]
        try:
            pos = np.searchsorted(ordered, column)
            pos_ok = np.minimum(pos, ordered.size - 1)
            known = (pos < ordered.size) & (ordered[pos_ok] == column)
            codes_d = order[pos_ok]
        except TypeError:
            # Values that do not compare with the categories (a string in a
            # column of numbers) are unknown values like any other: raising a
            # different error would tell which feature holds them.
            lookup = {value: j for j, value in enumerate(cats.tolist())}
            codes_d = np.array([_lookup(lookup, value) for value in column.tolist()], dtype=np.int64)
            known = codes_d >= 0
        if not np.all(known):
            if context == "fit":
                raise ValueError(
                    "X contains unknown categories: every training value of feature d must be one of "
                    "categories[d]. The values are not shown (they are private training data); check X "
                    "against the declared categories."
                )
            if handle_unknown == "error":
                raise ValueError(
                    f"X contains unknown categories in feature {d} (values not in categories_[{d}]) "
                    f"during {context}; set handle_unknown='ignore' to leave them out of the likelihood."
                )
        codes[:, d] = np.where(known, codes_d, -1)
    return codes


def _lookup(lookup, value):
    """Code of ``value`` in ``lookup`` (a category -> code dict), -1 if unknown or unhashable."""
    try:
        return lookup.get(value, -1)
    except TypeError:
        return -1


# ---------------------------------------------------------------------------
# Chunked input: the same cells and counts, one chunk of records at a time
# ---------------------------------------------------------------------------
#
# Two passes over the records (``X`` with its row-aligned ``sequence_ids`` and
# ``timesteps``), never all of them in memory:
#
# 1. ``ChunkedRecords.scan_cells``: every chunk reports its row count, its
#    sequence labels (with counts), its (sequence, timestep) pairs and, for
#    ``categories="nonprivate"`` only, the values of every feature.  The driver
#    takes the unions: the global labels, the set of cells (public metadata,
#    as in memory) and the :class:`CellLayout`, plus, for every chunk, the
#    global cell of each of its local (sequence, timestep) pairs.
# 2. ``ChunkedRecords.cell_counts``: every chunk returns
#    :func:`cell_category_counts` of its records restricted to the cells it
#    touches; the driver adds them into the global ``(n_cells, D, K)`` array.
#    Counts are integers, so the total equals the in-memory counts exactly.
#
# With ``timesteps=None`` every record is its own cell (its rank within its
# sequence, in global row order): a chunk's cells follow from the number of
# records of each sequence in the earlier chunks, which pass 1 provides.


class CellPlan(NamedTuple):
    """What the first chunked pass learns: the layout and how to place each chunk's records."""

    layout: CellLayout
    n_records: int
    categories: list | None
    chunk_params: list


class _SplitFrames:
    """A factory of DataFrame chunks whose label columns are set aside for each chunk.

    ``last`` holds the label columns of the chunk most recently handed to
    the caller (the chunks are read lazily, one at a time).
    """

    def __init__(self, factory, names):
        self.factory = factory
        self.names = names
        self.last = None

    def __call__(self):
        chunks = self.factory()
        if isinstance(chunks, np.ndarray) or hasattr(chunks, "columns"):
            raise TypeError("The chunk factory X must return an iterable of DataFrames, not one.")
        return self._split(chunks)

    def _split(self, chunks):
        drop = [n for n in self.names if n is not None]
        for chunk in chunks:
            if not hasattr(chunk, "columns"):
                raise TypeError(
                    "sequence_ids and timesteps may be column names only when the chunks of X are "
                    f"DataFrames; got a chunk of type {type(chunk).__name__}."
                )
            for name in drop:
                if name not in chunk.columns:
                    raise ValueError(f"Column {name!r} is not in a chunk of X.")
            self.last = [None if n is None else chunk[n].to_numpy() for n in self.names]
            yield chunk.drop(columns=drop)


def _check_companion_length(values, name, n_records):
    if values.ndim != 1 or values.shape[0] != n_records:
        raise ValueError(
            f"{name} must be 1-D with one entry per row of X ({n_records}), got shape {values.shape}."
        )


class ChunkedRecords:
    """A chunked ``X`` (see :mod:`skdp._chunks`) with its row-aligned sequence and timestep labels.

    ``sequence_ids`` and ``timesteps`` may each be

    * ``None`` (as in memory: one sequence; every record its own timestep,
      in global row order);
    * a column name, when ``X`` is a Dask DataFrame or a callable yielding
      pandas DataFrames (the column is taken out of ``X``);
    * a 1-D array with one entry per row of ``X``: a NumPy array or memmap
      (read in the row ranges of ``X``'s chunks), or, when ``X`` is a Dask
      collection, also a Dask array or Series.  For a Dask ``X`` the labels
      are cut into ``X``'s row blocks: rechunked to them (if ``X``'s blocks
      have unknown lengths, as a Dask DataFrame's, one extra pass counts
      them), or, when the labels' own blocks have unknown lengths and are as
      many as ``X``'s (columns of the same DataFrame), paired block by block,
      every pair checked to have the same number of rows.

    Anything else raises a ``TypeError``.
    """

    _NAMES = ("sequence_ids", "timesteps")

    def __init__(self, X, sequence_ids, timesteps):
        with warnings.catch_warnings():
            # Dask warns that string columns become object arrays: as in memory.
            warnings.filterwarnings(
                "ignore", "Dask currently has limited support for converting", UserWarning
            )
            self._init(X, sequence_ids, timesteps)

    def _init(self, X, sequence_ids, timesteps):
        labels = [sequence_ids, timesteps]
        names = [v if isinstance(v, str) else None for v in labels]
        self._splitter = None
        if isinstance(X, ChunkedData):
            # Categorical labels keep their dtype, whatever the wrapper was built with.
            X = copy.copy(X)
            X.dtype = None
        if any(names):
            if is_dask_collection(X) and hasattr(X, "columns"):
                for name in filter(None, names):
                    if name not in X.columns:
                        raise ValueError(f"Column {name!r} is not in X.")
                labels = [X[n] if n is not None else v for n, v in zip(names, labels, strict=True)]
                X = X.drop(columns=[n for n in names if n is not None])
            elif callable(X) and not isinstance(X, ChunkedData) and not is_dask_collection(X):
                X = self._splitter = _SplitFrames(X, names)
            else:
                raise TypeError(
                    "sequence_ids and timesteps may be column names only when X is a DataFrame "
                    "(a pandas or Dask DataFrame, or a callable yielding pandas DataFrames); "
                    "otherwise pass arrays with one entry per row."
                )
        self.data = as_chunked(X, dtype=None)
        self._dask = self.data.kind == "dask"
        self._labels = []
        for i, (name, values) in enumerate(zip(self._NAMES, labels, strict=True)):
            if values is None or names[i] is not None and self._splitter is not None:
                self._labels.append(None if values is None else "frame")
                continue
            if is_dask_collection(values):
                if not self._dask:
                    raise TypeError(
                        f"{name} is a Dask collection but X is not: pass X as a Dask array or "
                        f"DataFrame too, or {name} as a NumPy array."
                    )
                if hasattr(values, "to_dask_array"):
                    values = values.to_dask_array()
            elif callable(values) or not hasattr(values, "__len__"):
                raise TypeError(f"{name} must be an array with one entry per row of X, or a column name.")
            else:
                values = values if isinstance(values, np.ndarray) else np.asarray(values)
                if self.data.kind == "numpy":
                    _check_companion_length(values, name, self.data.source.shape[0])
            if values.ndim != 1:
                raise ValueError(f"{name} must be 1-D with one entry per row of X, got shape {values.shape}.")
            self._labels.append(values)

    @property
    def n_features(self):
        return self.data.n_features

    @property
    def feature_names(self):
        return self.data.feature_names

    # ---------------------------------------------------------------- passes

    def _map(self, fn, chunk_params, *params):
        """``fn(chunk, seq, time, chunk_param, *params)`` of every chunk, in row order.

        An iterator for NumPy and factory sources (one chunk in memory at a
        time); a list from one ``dask.compute`` for Dask (``None`` for the
        empty blocks).
        """
        if self._dask:
            return self._map_dask(fn, chunk_params, params)
        return self._map_local(fn, chunk_params, params)

    def _map_local(self, fn, chunk_params, params):
        start = index = 0
        for index, chunk in enumerate(self.data.iter_chunks(), start=1):
            stop = start + chunk.shape[0]
            pieces = []
            for j, (name, values) in enumerate(zip(self._NAMES, self._labels, strict=True)):
                if values is None:
                    piece = None
                elif isinstance(values, str):  # a column of the DataFrame chunk
                    piece = self._splitter.last[j]
                else:
                    piece = np.asarray(values[start:stop])
                    if piece.shape[0] != stop - start:
                        raise ValueError(
                            f"{name} must be 1-D with one entry per row of X: it has "
                            f"{values.shape[0]} entries, X has more rows."
                        )
                pieces.append(piece)
            if chunk_params is not None and index > len(chunk_params):
                raise _changed()
            yield fn(chunk, *pieces, None if chunk_params is None else chunk_params[index - 1], *params)
            start = stop
        if chunk_params is not None and index != len(chunk_params):
            raise _changed()
        for name, values in zip(self._NAMES, self._labels, strict=True):
            if values is not None and not isinstance(values, str):
                _check_companion_length(values, name, start)

    def _dask_label_blocks(self, values, name, n_blocks):
        """The blocks of ``values`` aligned with the row blocks of ``X`` (delayed objects)."""
        import dask.array as da

        if values is None:
            return [None] * n_blocks
        unknown = lambda a: any(np.isnan(c) for c in a.chunks[0])  # noqa: E731
        if is_dask_collection(values) and unknown(values) and values.numblocks[0] == n_blocks:
            # Partitions of the same DataFrame (or the same blocking): zipped, and
            # every block's length is checked against the block of X it goes with.
            return values.to_delayed().ravel().tolist()
        rows = self.data.source.chunks[0]
        if unknown(self.data.source):
            if self.data.block_rows is None:
                self.data.scan()  # counts the rows of every block of X
            rows = self.data.block_rows
        rows = tuple(int(r) for r in rows)
        if not is_dask_collection(values):
            _check_companion_length(values, name, sum(rows))
            values = da.from_array(values, chunks=(rows,))
        else:
            if unknown(values):
                values = values.compute_chunk_sizes()
            _check_companion_length(values, name, sum(rows))
            if tuple(values.chunks[0]) != rows:
                values = values.rechunk((rows,))
        return values.to_delayed().ravel().tolist()

    def _map_dask(self, fn, chunk_params, params):
        import dask

        blocks = self.data.source.to_delayed().ravel().tolist()
        if chunk_params is not None and len(chunk_params) != len(blocks):
            raise _changed()
        labels = [
            self._dask_label_blocks(values, name, len(blocks))
            for name, values in zip(self._NAMES, self._labels, strict=True)
        ]
        task = dask.delayed(_dask_task, pure=True)
        parts = [
            task(
                fn,
                block,
                self.n_features,
                labels[0][i],
                labels[1][i],
                None if chunk_params is None else chunk_params[i],
                *params,
            )
            for i, block in enumerate(blocks)
        ]
        (results,) = dask.compute(parts)
        return results

    def scan_cells(self, auto_categories):
        """Pass 1: the :class:`CellPlan` (and the categories when ``auto_categories``)."""
        summaries = list(self._map(_chunk_labels, None, bool(auto_categories)))
        present = [s for s in summaries if s is not None]
        n_records = sum(s[0] for s in present)
        if n_records == 0:
            raise _no_samples()
        if not self._dask:
            self.data.n_samples = n_records  # later passes must yield as many rows
        categories = None
        if auto_categories:
            categories = [
                np.unique(np.concatenate([s[5][d] for s in present])) for d in range(self.n_features)
            ]
        has_seq = self._labels[0] is not None
        seq_labels = (
            np.unique(np.concatenate([s[1] for s in present])) if has_seq else np.zeros(1, dtype=np.int64)
        )

        def seq_codes(s):
            return np.searchsorted(seq_labels, s[1]) if has_seq else np.zeros(1, dtype=np.int64)

        if self._labels[1] is not None:
            time_labels = np.unique(np.concatenate([s[3] for s in present]))
            n_times = max(time_labels.shape[0], 1)
            global_keys = []
            for s in present:
                local_seq, local_time = np.divmod(s[4], s[3].shape[0])
                time_codes = np.searchsorted(time_labels, s[3])
                global_keys.append(seq_codes(s)[local_seq] * n_times + time_codes[local_time])
            cell_keys = np.unique(np.concatenate(global_keys))
            cells = iter(global_keys)
            chunk_params = [
                None if s is None else (s[0], s[4], np.searchsorted(cell_keys, next(cells)))
                for s in summaries
            ]
        else:
            # Every record is its own timestep, ranked in row order within its sequence.
            time_labels = np.arange(max(n_records, 1))
            n_times = n_records
            lengths = np.zeros(seq_labels.shape[0], dtype=np.int64)
            for s in present:
                lengths[seq_codes(s)] += s[2] if has_seq else s[0]
            starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
            first_key = np.arange(lengths.shape[0]) * n_times - starts
            cell_keys = np.repeat(first_key, lengths) + np.arange(n_records)
            following = starts.copy()  # global cell of the next record of each sequence
            chunk_params = []
            for s in summaries:
                if s is None:
                    chunk_params.append(None)
                    continue
                codes = seq_codes(s)
                chunk_params.append((s[0], following[codes].copy()))
                following[codes] += s[2] if has_seq else s[0]
        layout = layout_from_cells(cell_keys, n_times, seq_labels, time_labels)
        return CellPlan(layout, n_records, categories, chunk_params)

    def cell_counts(self, plan, categories, n_categories):
        """Pass 2: the per-cell category counts ``n[c, d, j]`` of all the records."""
        kmax = int(max(n_categories, default=1))
        counts = np.zeros((plan.layout.n_cells, self.n_features, kmax))
        for part in self._map(_chunk_cell_counts, plan.chunk_params, categories, n_categories):
            if part is not None:
                cells, chunk_counts = part
                counts[cells] += chunk_counts
        return counts


def _changed():
    return ValueError(
        "The chunks of X differ from those of the first pass (number of chunks, their rows or "
        "their sequence and timestep labels): the fit reads the data twice, and a callable X "
        "must return the same chunks on every call."
    )


def _dask_task(fn, block, n_features, seq, time, chunk_param, *params):
    """Validate one Dask block, check its labels line up with it, and apply ``fn``."""
    chunk = check_chunk(block, n_features, dtype=None)
    pieces = []
    for name, values in (("sequence_ids", seq), ("timesteps", time)):
        if values is not None:
            values = np.asarray(values)
            if values.shape != (chunk.shape[0],):
                raise ValueError(
                    f"{name} is not aligned with the row blocks of X: a block of X has "
                    f"{chunk.shape[0]} rows and the matching block of {name} has shape {values.shape}."
                )
        pieces.append(values)
    if chunk.shape[0] == 0:
        return None
    return fn(chunk, *pieces, chunk_param, *params)


def _rank_within(codes, n_groups):
    """Rank of every entry among the entries with the same code, in order."""
    order = np.argsort(codes, kind="stable")
    starts = np.searchsorted(codes[order], np.arange(n_groups))
    rank = np.empty(codes.shape[0], dtype=np.int64)
    rank[order] = np.arange(codes.shape[0]) - starts[codes[order]]
    return rank


def _local_codes(values, name, n_records):
    """Sorted unique labels of one chunk, the code of each record and the counts."""
    if values is None:
        return None, np.zeros(n_records, dtype=np.int64), None
    labels, codes, counts = np.unique(
        _as_labels(values, name, n_records), return_inverse=True, return_counts=True
    )
    return labels, codes.reshape(-1), counts


def _chunk_labels(chunk, seq, time, _, auto_categories):
    """Pass 1 on one chunk: ``(n_rows, seq_labels, seq_counts, time_labels, pair_keys, categories)``.

    ``pair_keys = local_seq_code * len(time_labels) + local_time_code`` lists
    the chunk's (sequence, timestep) pairs; ``categories`` only when learned
    from the data (``categories="nonprivate"``).
    """
    n = chunk.shape[0]
    chunk = check_array(chunk, dtype=None, input_name="X")  # the in-memory checks (NaN in objects)
    seq_labels, seq_codes, seq_counts = _local_codes(seq, "sequence_ids", n)
    time_labels = pairs = None
    if time is not None:
        time_labels, time_codes, _ = _local_codes(time, "timesteps", n)
        pairs = np.unique(seq_codes * time_labels.shape[0] + time_codes)
    categories = learn_categories(chunk, "auto") if auto_categories else None
    return n, seq_labels, seq_counts, time_labels, pairs, categories


def _chunk_cell_counts(chunk, seq, time, chunk_param, categories, n_categories):
    """Pass 2 on one chunk: ``(cells, counts)``, the counts of the cells its records fall in."""
    n = chunk.shape[0]
    if chunk_param is None or chunk_param[0] != n:
        raise _changed()
    codes = encode_categories(chunk, categories, "error", "fit")
    seq_labels, seq_codes, _ = _local_codes(seq, "sequence_ids", n)
    if time is not None:
        _, pairs, pair_cells = chunk_param
        time_labels, time_codes, _ = _local_codes(time, "timesteps", n)
        keys = seq_codes * time_labels.shape[0] + time_codes
        pos = np.minimum(np.searchsorted(pairs, keys), pairs.shape[0] - 1)
        if not np.array_equal(pairs[pos], keys):
            raise _changed()
        cell = pair_cells[pos]
    else:
        _, first_cell = chunk_param
        n_seq = 1 if seq_labels is None else seq_labels.shape[0]
        if n_seq != first_cell.shape[0]:
            raise _changed()
        cell = first_cell[seq_codes] + _rank_within(seq_codes, n_seq)
    cells, cell_of_record = np.unique(cell, return_inverse=True)
    return cells, cell_category_counts(codes, cell_of_record.reshape(-1), cells.shape[0], n_categories)
