"""Validating a fit's training input, in memory or chunk by chunk: one helper for every estimator.

Arrays, lists and DataFrames are validated in memory by scikit-learn's
``validate_data``; NumPy memmaps, Dask collections, callables returning an
iterable of chunks (and, for single-pass estimators, one-shot iterators) are
validated chunk by chunk (:mod:`skdp._chunks`).  Either way the estimator's
``n_features_in_`` and ``feature_names_in_`` are set as scikit-learn sets them
(a single-pass estimator sets them with :func:`set_chunked_features` after
its pass).
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
        The rows as chunks, already scanned (validated), or not yet read
        (``single_pass``); None in memory.
    n_samples, n_features : int or None
        None for ``single_pass`` chunked input, which is read later in the
        estimator's own pass (``n_features`` is known up front for NumPy
        and Dask sources).
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

    def reduce(self, fn, *params):
        """``fn(rows, *params)`` over all training rows: on the array in memory, summed chunk by chunk otherwise.

        The one reduction every sufficient statistic goes through (private bounds,
        centring, moments): ``fn`` returns a sum over its rows (an array or a tuple
        of arrays), so the chunked total equals the in-memory one up to the order
        of the additions.
        """
        if self.chunked:
            return self.chunks.map_reduce(fn, *params)
        return fn(self.X, *params)


def set_chunked_features(estimator, data):
    """Set ``n_features_in_``/``feature_names_in_`` from chunked input, as ``validate_data`` would."""
    estimator.n_features_in_ = int(data.n_features)
    if data.feature_names is not None:
        estimator.feature_names_in_ = data.feature_names
    elif hasattr(estimator, "feature_names_in_"):
        del estimator.feature_names_in_


def validate_fit_input(
    estimator,
    X,
    *,
    dtype=np.float64,
    ensure_min_samples=1,
    ensure_2d=True,
    single_pass=False,
    validate=None,
    **check_params,
):
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
    ensure_2d : bool, default=True
        If False, a 1-D ``X`` (or 1-D chunk) is one feature, in memory and
        chunked alike.
    single_pass : bool, default=False
        For an estimator that reads chunked input once, in one pass of its
        own (e.g. one :meth:`~skdp._chunks.ChunkedData.map_reduce`): the
        chunks are not scanned first (a scan would be a second pass), a
        one-shot iterator of chunks is accepted, and the estimator calls
        :func:`set_chunked_features` after its pass.
    validate : callable or None, default=None
        The estimator's own in-memory validation, called as
        ``validate(X, reset=True)`` instead of ``validate_data`` (a
        ``_validate_X`` shared with its predict methods; it sets
        ``n_features_in_`` and returns a 2-D array).
    **check_params
        Passed on to ``validate_data``.

    Returns
    -------
    FitInput
    """
    if is_chunked_input(X):
        chunks = as_chunked(X, ensure_2d=ensure_2d, single_pass=single_pass)
        if single_pass:
            return FitInput(None, chunks, None, chunks.n_features)
        summary = chunks.scan()  # validates every chunk
        set_chunked_features(estimator, chunks)
        return FitInput(None, chunks, summary.n_samples, summary.n_features, summary)
    if validate is not None:
        X = validate(X, reset=True)
        return FitInput(X, None, X.shape[0], X.shape[1])
    X = validate_data(
        estimator, X, dtype=dtype, ensure_min_samples=ensure_min_samples, ensure_2d=ensure_2d, **check_params
    )
    if X.ndim == 1:  # ensure_2d=False: one feature (validate_data sets no n_features_in_ for 1-D)
        X = X.reshape(-1, 1)
        estimator.n_features_in_ = 1
    return FitInput(X, None, X.shape[0], X.shape[1])
