"""The training rows of a DP Lloyd fit: in memory, or chunked (memmap, Dask, factory).

DP Lloyd touches the data only through per-cluster sums and sizes (and, for
DPNorm, a histogram of norms): exact statistics that add up over row chunks.
Both sources below return the same exact statistics; the noise is added by the
caller, once per statistic and iteration, on the driver
(:mod:`skdp._chunks`).  Chunking therefore changes nothing in the guarantee.

The random-partition step labels every row with public randomness only.  In
memory the labels are one draw of ``n`` integers; chunk by chunk they are the
same draws taken in row order (a NumPy ``Generator`` gives the same stream
either way), so both paths release the same statistics.  For Dask, the labels
are drawn on the driver in the same way, block by block in row order, and
shipped with their blocks (``n`` integers of the smallest unsigned type that
holds ``n_clusters - 1``, one byte each for up to 256 clusters).  The number
of rows of every block comes from the validating scan
(:attr:`skdp._chunks.ChunkedData.block_rows`), so blocks of unknown length (a
Dask DataFrame, or an array with NaN chunk sizes) need no extra pass, and the
Dask fit equals the in-memory fit for any chunking.
"""

from __future__ import annotations

import numpy as np

from .._chunks import _add, _tree_reduce, check_chunk
from ..privacy.norm_selection import norm_histogram
from . import _lloyd as lloyd
from ._fourier import random_fourier_features
from ._lloyd import assign, clip_rows, row_norms


def apply_feature_map(X, feature_map):
    """``X`` itself (``feature_map=None``), its random Fourier features ``(W, b)``, or ``feature_map(X)``.

    A callable is a picklable map of public parameters (DPKMeans' private
    centring, :class:`skdp.cluster._lloyd.Shift`).
    """
    if feature_map is None:
        return X
    if callable(feature_map):
        return feature_map(X)
    return random_fourier_features(X, *feature_map)


def training_rows(data):
    """The validated training input (a :class:`skdp._input.FitInput`) as a source of exact statistics.

    The rows are in the input space until :meth:`map_features` is called
    (the feature map is drawn from the fit's generator after validation).
    """
    if data.chunked:
        return ChunkedRows(data.chunks, data.summary)
    return InMemoryRows(data.X)


def chunk_features(chunk, feature_map, bound):
    """Mapped rows of ``chunk``, clipped to ``bound`` when it is given."""
    Z = apply_feature_map(chunk, feature_map)
    return Z if bound is None else clip_rows(Z, bound)


def chunk_statistics(chunk, feature_map, bound, centres):
    """Sizes and sums of the mapped, clipped rows of a chunk, assigned to ``centres``."""
    Z = chunk_features(chunk, feature_map, bound)
    return lloyd.cluster_statistics(Z, assign(Z, centres), centres.shape[0])


def chunk_labelled_statistics(chunk, labels, feature_map, bound, n_clusters):
    """Sizes and sums of a chunk under given (public, random) labels."""
    chunk = check_chunk(chunk)
    labels = np.asarray(labels, dtype=np.intp)
    if labels.shape != (chunk.shape[0],):
        raise ValueError(
            f"X changed between passes: a block has {chunk.shape[0]} rows, the scan counted {labels.size}."
        )
    return lloyd.cluster_statistics(chunk_features(chunk, feature_map, bound), labels, n_clusters)


def chunk_norm_histogram(chunk, feature_map, c_max, n_bins):
    """Histogram of the feature norms of a chunk (Alg. 3's ``t_j``)."""
    return norm_histogram(row_norms(apply_feature_map(chunk, feature_map)), c_max, n_bins)


class InMemoryRows:
    """Validated rows held in memory, mapped once."""

    chunked = False

    def __init__(self, X):
        self.Z = X
        self.n_samples, self.n_features = X.shape
        self.bound = None

    def map_features(self, feature_map):
        """Map the rows to the clustering space, once (before :meth:`clip`)."""
        self.Z = apply_feature_map(self.Z, feature_map)

    def max_norm(self):
        return float(row_norms(self.Z).max()) if self.n_samples else 0.0

    def norm_histogram(self, c_max, n_bins):
        return norm_histogram(row_norms(self.Z), c_max, n_bins)

    def clip(self, bound):
        self.Z = clip_rows(self.Z, bound)
        self.bound = bound

    def random_partition_statistics(self, n_clusters, rng):
        labels = rng.integers(n_clusters, size=self.n_samples)
        return lloyd.cluster_statistics(self.Z, labels, n_clusters)

    def statistics(self, centres):
        return lloyd.cluster_statistics(self.Z, assign(self.Z, centres), centres.shape[0])

    def labels(self, centres):
        """Nearest centre of every mapped, clipped row (``predict`` on these rows)."""
        return assign(self.Z, centres)


class ChunkedRows:
    """Rows read chunk by chunk through :class:`skdp._chunks.ChunkedData`."""

    chunked = True

    def __init__(self, data, summary):
        self.data = data
        self.summary = summary
        self.n_samples, self.n_features = summary.n_samples, summary.n_features
        self.feature_map = None
        self.bound = None

    def map_features(self, feature_map):
        """Map every chunk to the clustering space as it is read (before :meth:`clip`)."""
        self.feature_map = feature_map

    def max_norm(self):
        """Largest row norm of the raw rows (from the validating scan; identity map only)."""
        if self.feature_map is not None:
            raise ValueError("max_norm of chunked rows is only known for the identity map.")
        return self.summary.max_norm

    def norm_histogram(self, c_max, n_bins):
        return self.data.map_reduce(chunk_norm_histogram, self.feature_map, c_max, n_bins)

    def clip(self, bound):
        self.bound = bound

    def random_partition_statistics(self, n_clusters, rng):
        if self.data.kind != "dask":
            total = None
            for chunk in self.data.iter_chunks():
                labels = rng.integers(n_clusters, size=chunk.shape[0])
                part = lloyd.cluster_statistics(
                    chunk_features(chunk, self.feature_map, self.bound), labels, n_clusters
                )
                total = part if total is None else _add(total, part)
            return total
        import dask

        block_rows = self.data.block_rows
        if block_rows is None:  # not scanned yet (rows of unknown-length blocks)
            self.data.scan()
            block_rows = self.data.block_rows
        label_dtype = np.min_scalar_type(max(n_clusters - 1, 0))
        task = dask.delayed(chunk_labelled_statistics, pure=True)
        parts = [
            # The same draws as in memory, taken block by block in row order.
            task(
                block,
                rng.integers(n_clusters, size=rows).astype(label_dtype),
                self.feature_map,
                self.bound,
                n_clusters,
            )
            for block, rows in zip(self.data.source.to_delayed().ravel().tolist(), block_rows, strict=True)
        ]
        (total,) = dask.compute(_tree_reduce(parts, _add))
        return total

    def statistics(self, centres):
        return self.data.map_reduce(chunk_statistics, self.feature_map, self.bound, centres)

    def labels(self, centres):
        """Nearest centre of every mapped, clipped row, in row order (one more pass)."""
        if self.data.kind == "dask":
            source = self.data.source
            labels = source.map_blocks(
                _chunk_labels, self.feature_map, self.bound, centres, drop_axis=1, dtype=np.intp
            ).compute()
        else:
            labels = np.concatenate(
                [_chunk_labels(c, self.feature_map, self.bound, centres) for c in self.data.iter_chunks()]
            )
        return np.asarray(labels, dtype=np.intp)


def _chunk_labels(chunk, feature_map, bound, centres):
    chunk = check_chunk(chunk)
    return assign(chunk_features(chunk, feature_map, bound), centres)
