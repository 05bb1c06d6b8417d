"""Validating a fit's training input, in memory or chunk by chunk: one helper for every estimator.

Arrays, lists and DataFrames are validated in memory by scikit-learn's
``validate_data``; NumPy memmaps, Dask collections, callables returning an
iterable of chunks (and, for single-pass estimators, one-shot iterators) are
validated chunk by chunk (:mod:`skdp._chunks`).  Either way the estimator's
``n_features_in_`` and ``feature_names_in_`` are set as scikit-learn sets them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from sklearn.utils.validation import validate_data

from ._chunks import ChunkedData, ChunkSummary, as_chunked, is_chunked_input


class FitInput(NamedTuple):
    """A fit's validated training rows.

    Attributes
    ----------
    X : ndarray or None
        The rows, in memory; None for chunked input.
    chunks : ChunkedData or None
        The rows as chunks, already scanned (validated); None in memory.
    n_samples, n_features : int
    summary : ChunkSummary or None
        What the validating pass learnt (chunked input only; its
        ``max_norm`` is data-dependent: a bound read off it must be warned
        about with :func:`~skdp.base.warn_privacy_leak`).
    """

    X: np.ndarray | None
    chunks: ChunkedData | None
    n_samples: int
    n_features: int
    summary: ChunkSummary | None = None

    @property
    def chunked(self):
        return self.chunks is not None


def set_chunked_features(estimator, data):
    """Set ``n_features_in_``/``feature_names_in_`` from chunked input, as ``validate_data`` would."""
    estimator.n_features_in_ = int(data.n_features)
    if data.feature_names is not None:
        estimator.feature_names_in_ = data.feature_names
    elif hasattr(estimator, "feature_names_in_"):
        del estimator.feature_names_in_


def validate_fit_input(estimator, X, *, dtype=np.float64, ensure_min_samples=1, **check_params):
    """Validate the training rows of ``estimator.fit`` (in memory or chunked).

    Parameters
    ----------
    estimator : BaseEstimator
        Receives ``n_features_in_`` (and ``feature_names_in_``).
    X : array-like, memmap, Dask collection or callable
        The training rows.
    dtype : dtype or list of dtypes, default=numpy.float64
        As in ``validate_data``; chunked input is converted to float64.
    ensure_min_samples : int, default=1
        As in ``validate_data`` (in memory).
    **check_params
        Passed on to ``validate_data``.

    Returns
    -------
    FitInput
    """
    if is_chunked_input(X):
        chunks = as_chunked(X)
        summary = chunks.scan()  # validates every chunk
        set_chunked_features(estimator, chunks)
        return FitInput(None, chunks, summary.n_samples, summary.n_features, summary)
    X = validate_data(estimator, X, dtype=dtype, ensure_min_samples=ensure_min_samples, **check_params)
    return FitInput(X, None, X.shape[0], X.shape[1])
