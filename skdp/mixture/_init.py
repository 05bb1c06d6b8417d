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
   cell: :func:`skdp.privacy.mechanisms.selection.histogram_sensitivity`);
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
:func:`part_sums`, which :func:`histogram_start` releases through the core's
mechanisms.  The module also holds the data-independent start
(:func:`random_start`, Park et al.'s) and the user's public one
(:func:`public_start`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.ndimage import maximum_filter, uniform_filter

from ..privacy import GaussianEvent, GaussianMechanism, LaplaceMechanism
from ..privacy.mechanisms.selection import histogram_sensitivity, noisy_histogram
from ..privacy.sensitivity import row_sum_sensitivity
from ._moments import MIN_COUNT, clip_to_unit_ball, project_rows_to_unit_ball

#: Per-coordinate variance of the initial components in the unit-ball scale.
INIT_VARIANCE = 0.01

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


def histogram_start(reduce, centre, scale, z, rng, ledger, *, plan):
    """Initial means (unit-ball scale) from a noisy histogram on a public grid.

    Releases the grid counts (one event) and, for ``d > 2``, the sums of the
    rows of each peak's part of the grid (one event), through the core's
    mechanisms at noise multiplier ``z``; the rest is post-processing (steps
    1-3 of the module's docstring).

    Parameters
    ----------
    reduce : callable
        ``reduce(fn, *params)`` sums ``fn(chunk, *params)`` over the data
        (in memory or chunk by chunk).
    centre : ndarray of shape (d,) or None
        Released centre the rows are shifted by.
    scale : float
        Row norm bound: rows are clipped to it and divided by it.
    z : float
        Noise multiplier of both releases
        (:meth:`~skdp.mixture._plan.EMPlan.calibrate_init`).
    rng : numpy.random.Generator
        The fit's stream: the public projection is drawn from it before the
        data is read, then the noise.
    ledger : PrivacyLedger
    plan : EMPlan
        The fit's :class:`~skdp.mixture._plan.EMPlan`: ``d``, ``K``, the
        weights' and means' noise family and the neighbouring relation.

    Returns
    -------
    means : ndarray of shape (n_components, n_features)
    """
    n_features, n_components = plan.n_features, plan.n_components
    gaussian = plan.first_family is GaussianEvent
    nb = plan.neighbouring
    mech_cls = GaussianMechanism if gaussian else LaplaceMechanism
    projection = init_projection(n_features, rng)  # public: drawn before the data is read
    p = min(n_features, INIT_DIMS)
    sens = histogram_sensitivity(2 if gaussian else 1, nb)
    counts = reduce(grid_counts, centre, scale, projection, INIT_GRID)
    noisy = noisy_histogram(counts, mech_cls(sens, z * sens, nb), rng, ledger)
    peaks = histogram_peaks(
        noisy, INIT_GRID, p, n_components, z * sens if gaussian else math.sqrt(2) * z * sens
    )
    if projection is None:
        return block_centroids(noisy, INIT_GRID, p, peaks)
    part_of_cell = nearest_peak_partition(INIT_GRID, p, peaks)
    sens = row_sum_sensitivity(1.0, n_features, 2 if gaussian else 1, nb)
    sums = reduce(part_sums, centre, scale, projection, INIT_GRID, part_of_cell)
    noisy_sums = mech_cls(sens, z * sens, nb).release(sums, rng, ledger)
    part_counts = np.bincount(part_of_cell, weights=noisy, minlength=n_components)
    means = noisy_sums / np.maximum(part_counts, MIN_COUNT)[:, np.newaxis]
    # A part whose noisy count is not positive has no usable mean: its peak's cell centre, lifted back.
    fallback = cell_centres(INIT_GRID, p)[peaks] @ projection.T
    means = np.where((part_counts > MIN_COUNT)[:, np.newaxis], means, fallback)
    return project_rows_to_unit_ball(means)


def public_start(weights_init, means_init, n_components, n_features, scale, centre=None):
    """The user's public initial parameters in the unit-ball scale, or None.

    Parameters
    ----------
    weights_init : array-like of shape (K,) or None
        Non-negative weights summing to one.
    means_init : array-like of shape (K, d) or None
        Means in the original scale; shifted by ``centre``, divided by
        ``scale`` and projected onto the unit ball.
    n_components, n_features : int
    scale : float
    centre : ndarray of shape (d,) or None, default=None
        A released centre.

    Returns
    -------
    weights, means : ndarray or None

    Raises
    ------
    ValueError
        If a given array has the wrong shape or values (the message quotes the parameter).
    """
    weights = means = None
    k = n_components
    if weights_init is not None:
        weights = np.asarray(weights_init, dtype=float)
        if weights.shape != (k,) or not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise ValueError(f"weights_init must be {k} non-negative finite numbers, got {weights_init!r}.")
        if not np.isclose(weights.sum(), 1.0):
            raise ValueError(f"weights_init must sum to 1, got sum {weights.sum():g}.")
    if means_init is not None:
        means = np.asarray(means_init, dtype=float)
        if means.shape != (k, n_features) or not np.all(np.isfinite(means)):
            raise ValueError(
                f"means_init must be a finite array of shape ({k}, {n_features}), got shape {means.shape}."
            )
        means = project_rows_to_unit_ball((means if centre is None else means - centre) / scale)
    return weights, means


def random_start(rng, n_components, n_features, covariance_type, public_weights=None, public_means=None):
    """Park et al.'s data-independent starting point inside the unit ball.

    Uniform weights, means uniform in the unit ball (a uniform direction and
    radius ``U^(1/d)``), covariances ``INIT_VARIANCE * I``; public weights or
    means replace the drawn ones (none is drawn for public means).

    Parameters
    ----------
    rng : numpy.random.Generator
    n_components, n_features : int
    covariance_type : {"full", "tied", "spherical"}
    public_weights, public_means : ndarray or None
        From :func:`public_start` or :func:`histogram_start`.

    Returns
    -------
    weights, means, covariances : ndarray
    """
    k = n_components
    weights = np.full(k, 1.0 / k) if public_weights is None else public_weights
    if public_means is None:
        direction = rng.normal(size=(k, n_features))
        direction /= np.linalg.norm(direction, axis=1, keepdims=True)
        means = direction * rng.random((k, 1)) ** (1.0 / n_features)
    else:
        means = public_means
    # Narrow components make the first E-step nearly hard (k-means-like),
    # so EM moves fast in the few iterations a budget affords; broad ones
    # (e.g. the 1/d the unit ball allows) give soft responsibilities
    # and slow, noise-dominated progress.
    if covariance_type == "full":
        covariances = np.tile(np.eye(n_features) * INIT_VARIANCE, (k, 1, 1))
    elif covariance_type == "tied":
        covariances = np.eye(n_features) * INIT_VARIANCE
    else:
        covariances = np.full(k, INIT_VARIANCE)
    return weights, means, covariances
