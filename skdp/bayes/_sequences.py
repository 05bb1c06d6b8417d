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
per-cell category counts ``n_{r,t,d,j}`` (Eq. 70-71).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CellLayout:
    """Cells in chain order and the padded ``(n_sequences, max_length)`` grid over them.

    Attributes
    ----------
    cell_of_record : ndarray of shape (n_records,)
        Index of each record's cell.
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
    cell_seq, cell_time = np.divmod(cell_keys, n_times)
    lengths = np.bincount(cell_seq, minlength=seq_labels.shape[0])
    # Sequences with no record cannot occur (labels come from the records).
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    position = np.arange(cell_keys.shape[0]) - starts[cell_seq]
    grid = np.full((lengths.shape[0], int(lengths.max(initial=0))), -1, dtype=np.int64)
    grid[cell_seq, position] = np.arange(cell_keys.shape[0])
    return CellLayout(
        cell_of_record=cell_of_record.reshape(-1),
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
                raise TypeError(
                    f"Feature {d}: every value's argument must be a string or a number, "
                    f"got {type(value).__name__}."
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
        except TypeError as exc:
            raise TypeError(f"Feature {d} mixes values that cannot be compared with its categories.") from exc
        if not np.all(known):
            if handle_unknown == "error" or context == "fit":
                unknown = np.unique(column[~known])[:5]
                raise ValueError(f"Found unknown categories {list(unknown)} in feature {d} during {context}.")
        codes[:, d] = np.where(known, order[pos_ok], -1)
    return codes
