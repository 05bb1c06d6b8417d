"""Private initialisation of DP-EM: a noisy histogram of the data on a public grid.

DP-EM (Park et al. 2017) starts from data-independent parameters, and with the
few iterations a budget affords a bad start is never repaired: two random
means in one cluster leave another cluster uncovered for good.  A user gets one
fit, so the start must find the clusters.  ``init_params="histogram"`` buys it
with a share ``init_budget`` of the budget:

1. rows, clipped into the unit ball, are mapped to ``p = min(d, 2)``
   coordinates (themselves when ``d <= 2``; a public random orthonormal
   projection, drawn from the fit's generator before the data is read,
   otherwise) and counted on the public grid of ``INIT_GRID ** p`` cells of
   ``[-1, 1]^p``; the count vector is released once (each row falls in one
   cell: :func:`skdp.privacy.selection.histogram_sensitivity`);
2. post-processing: the noisy counts are smoothed over ``3^p`` blocks and the
   ``K`` highest local maxima are the peaks (:func:`histogram_peaks`);
3. ``d <= 2``: each initial mean is the count-weighted centroid of its peak's
   block (post-processing, no further release).  ``d > 2``: every cell is
   given to its nearest peak (a public partition of the grid), and the sums of
   the rows of each part are released jointly (each row lies in one part:
   :func:`skdp.privacy.sensitivity.row_sum_sensitivity`); the mean of a part is
   its noisy sum over its noisy count, the histogram's counts summed over the
   part (post-processing).

Everything here is post-processing except the two sums :func:`grid_counts` and
:func:`part_sums`, which the estimator releases through the core's mechanisms.
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import maximum_filter, uniform_filter

from ._moments import clip_to_unit_ball, project_rows_to_unit_ball

#: Cells per axis of the public grid on ``[-1, 1]^p`` (unit-ball scale): width
#: 0.125, about one standard deviation of a cluster that takes a tenth of the
#: ball's radius, so a cluster's mass falls in a few cells (few noisy counts to
#: sum) and two clusters a quarter of the radius apart stay apart.
INIT_GRID = 16

#: Dimension of the histogram: a grid of ``INIT_GRID ** p`` cells must stay
#: small next to ``n`` (every cell carries noise).
INIT_DIMS = 2

#: A local maximum of the block averages is a peak only above this many
#: standard deviations of their noise: the largest of ``16^2`` pure-noise
#: block averages exceeds 4 standard deviations with probability below 1 %.
PEAK_SIGMAS = 4.0


def init_projection(n_features, rng):
    """Public map to the histogram's coordinates: None (identity) for ``d <= 2``, else a random
    ``(d, 2)`` matrix with orthonormal columns (rows of the unit ball stay in it).

    Drawn before the data is read, from the fit's generator: data-independent.
    """
    if n_features <= INIT_DIMS:
        return None
    q, _ = np.linalg.qr(rng.normal(size=(n_features, INIT_DIMS)))
    return q


def _cells(X, centre, scale, projection, grid):
    """Flat grid cell of each row (clipped into the unit ball, projected) and the unit-ball rows."""
    Xs = clip_to_unit_ball(X if centre is None else X - centre, scale)
    Z = Xs if projection is None else Xs @ projection
    idx = np.clip(np.floor((Z + 1.0) * (grid / 2.0)).astype(np.int64), 0, grid - 1)
    flat = np.ravel_multi_index(tuple(idx.T), (grid,) * Z.shape[1])
    return flat, Xs


def grid_counts(chunk, centre, scale, projection, grid):
    """Number of rows in each cell of the grid, shape ``(grid ** p,)``: summable over chunks."""
    p = chunk.shape[1] if projection is None else projection.shape[1]
    flat, _ = _cells(chunk, centre, scale, projection, grid)
    return np.bincount(flat, minlength=grid**p).astype(float)


def part_sums(chunk, centre, scale, projection, grid, part_of_cell):
    """``sum_{i in part j} x_i`` (unit-ball rows) for each part of the grid, shape ``(K, d)``."""
    flat, Xs = _cells(chunk, centre, scale, projection, grid)
    parts = part_of_cell[flat]
    out = np.zeros((int(part_of_cell.max()) + 1, Xs.shape[1]))
    np.add.at(out, parts, Xs)
    return out


def cell_centres(grid, p):
    """Centres of the grid's cells in ``[-1, 1]^p``, shape ``(grid ** p, p)``, flat order."""
    axis = -1.0 + (np.arange(grid) + 0.5) * (2.0 / grid)
    mesh = np.meshgrid(*([axis] * p), indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1)


def histogram_peaks(noisy_counts, grid, p, k, noise_std):
    """Flat indices of ``k`` peaks of a noisy histogram (post-processing).

    The counts are averaged over ``3^p`` blocks (a cluster spread over a few
    cells is one peak, and the noise of one cell is averaged); the peaks are
    the block averages' local maxima above ``PEAK_SIGMAS`` standard deviations
    of a block average's noise (``noise_std``, the public noise of one cell,
    over ``3^(p/2)``: bumps of pure noise are not peaks), highest first.
    Plateaus and neighbouring maxima count once (a cell within one cell of a
    chosen peak is skipped); with fewer than ``k`` such maxima, the highest
    remaining blocks not next to a chosen one fill in (a second peak inside a
    large blob, where two clusters overlap), and, when even those run out,
    any remaining cell.
    """
    h = np.asarray(noisy_counts, dtype=float).reshape((grid,) * p)
    smooth = uniform_filter(h, size=3, mode="constant")
    threshold = PEAK_SIGMAS * noise_std / 3.0 ** (p / 2.0)
    is_max = (smooth >= maximum_filter(smooth, size=3, mode="constant", cval=-np.inf)) & (smooth > threshold)
    order = np.argsort(-smooth.ravel(), kind="stable")
    coords = np.array(np.unravel_index(order, smooth.shape)).T
    chosen = []

    def free(c):
        return all(np.max(np.abs(c - coords_of)) > 1 for coords_of in chosen)

    maxima = is_max.ravel()[order]
    for rank in (r for r in range(order.size) if maxima[r]):
        if len(chosen) == k:
            break
        if free(coords[rank]):
            chosen.append(coords[rank])
    for rank in range(order.size):
        if len(chosen) == k:
            break
        if free(coords[rank]):
            chosen.append(coords[rank])
    taken = {tuple(c) for c in chosen}
    for rank in range(order.size):
        if len(chosen) == k:
            break
        if tuple(coords[rank]) not in taken:
            chosen.append(coords[rank])
            taken.add(tuple(coords[rank]))
    return np.array([np.ravel_multi_index(tuple(c), smooth.shape) for c in chosen])


def block_centroids(noisy_counts, grid, p, peaks):
    """Centroid of each peak's ``3^p`` block, cells weighted by their noisy counts clipped at 0.

    Post-processing; finer than the cell centre when a cluster straddles
    cells.  A block with no positive count gives its cell's centre.
    """
    h = np.clip(np.asarray(noisy_counts, dtype=float), 0.0, None).reshape((grid,) * p)
    centres = cell_centres(grid, p).reshape((grid,) * p + (p,))
    out = []
    for peak in peaks:
        c = np.array(np.unravel_index(int(peak), h.shape))
        sl = tuple(slice(max(i - 1, 0), min(i + 2, grid)) for i in c)
        w = h[sl].ravel()
        pts = centres[sl].reshape(-1, p)
        out.append(w @ pts / w.sum() if w.sum() > 0 else centres[tuple(c)])
    return project_rows_to_unit_ball(np.array(out))


def nearest_peak_partition(grid, p, peaks):
    """Part (index of the nearest peak) of every cell, by the distance of cell centres (public)."""
    centres = cell_centres(grid, p)
    d2 = ((centres[:, None, :] - centres[np.asarray(peaks)][None, :, :]) ** 2).sum(axis=2)
    return np.argmin(d2, axis=1)
