"""Continuous columns of the ``"marginals"`` generator: declared or private domain, linear binning, capacity.

A continuous column is mapped onto ``[0, 1]`` by its domain ``[low, high]``
(declared in ``bounds``, or a private box released by the core's noisy
histograms, :func:`skdp.privacy.quantiles.private_histogram_box`) and
encoded by **linear binning** on the public grid ``g_j = j / (G - 1)``,
``j = 0 .. G - 1`` (Hall & Wand 1996): a value ``u`` between ``g_j`` and
``g_{j+1}`` gives weight ``1 - t`` to ``j`` and ``t`` to ``j + 1``
(``t = (u - g_j) (G - 1)``).  The weights of a record form a point of the
simplex with at most two non-zero entries, so the centred vector
``w - 1/G`` has squared norm at most ``(G - 1) / G``, the same bound as a
one-hot block of ``G`` categories: each continuous column enters the one
Gaussian release of :mod:`~skdp.generative._marginals` as a *soft* one-hot
block.  The released per-cluster weights ``p_j`` define the density

    f(u) = sum_j p_j h_j(u) / a_j,

``h_j`` the hat function of grid point ``j`` and ``a_j`` its area
(``1 / (G - 1)``, half of it at the two ends).  Encoding is mean-preserving,
and when the data are uniform the estimate is exactly uniform.
:func:`sample_hat` draws from ``f``: a grid point by ``p``, then a
triangular offset reflected into ``[0, 1]``.

:func:`capacity` chooses the grid size ``G`` and the number of latent
classes ``k`` a priori from the released size ``n~``, the number and kind
of columns, epsilon and delta (the user guide, "Capacity").
"""

from __future__ import annotations

import math

import numpy as np

from ..privacy import ADD_REMOVE, GaussianMechanism, gaussian_noise_multiplier
from ..privacy.quantiles import (
    AUTO_BOUNDS_QUANTILES,
    HISTOGRAM_L2_PER_COLUMN,
    announced_histogram_box,
    calibrate_histogram_bounds,
    histogram_box_share,
)

__all__ = [
    "MAX_BINS",
    "MAX_CLASSES",
    "BOX_SHARE_CAP",
    "CELL_SNR",
    "capacity",
    "linear_binning",
    "hat_areas",
    "hat_log_density",
    "sample_hat",
    "release_box",
    "encoded_layout",
    "encode_records",
    "decode_records",
]

#: Largest grid (points per continuous column) and number of latent classes
#: the ``"auto"`` rules choose: past them the noise-free model's error no
#: longer moves the 2-way error much, while the sums cost memory ``k * d * G``.
MAX_BINS, MAX_CLASSES = 32, 50
#: Largest share of ``(epsilon, delta)`` the private box may take (the core
#: picks the smallest share of ``BOX_SHARES`` that locates a column).
BOX_SHARE_CAP = 0.3
#: Expected count of one cell (a grid point of one column in one class) over
#: the noise std of a released sum that :func:`capacity` asks for.
CELL_SNR = 8.0


def capacity(n_tilde, epsilon, delta, n_binary, block_sizes, n_continuous, n_iter=1):
    """The grid size ``G`` and the number ``k`` of latent classes, a priori.

    With ``sigma = z(epsilon, delta) sqrt(T) * C`` the noise std of every
    released sum (``z`` the Gaussian multiplier of the whole budget spent on
    one release, ``T = n_iter`` the number of releases, ``C`` the
    largest row norm ``sqrt(1 + d_bin / 4 + sum (m - 1)/m + d_cont)``):

    * ``G = round(sqrt(n~ / sigma))`` in ``[2, MAX_BINS]``: the noise of a
      column's estimated distribution (total variation about
      ``G sigma / n~``) against the bias of ``G`` grid points (about
      ``1 / G``) is balanced at ``G ~ sqrt(n~ / sigma)``;
    * ``k = floor(n~ / (CELL_SNR * sigma * G))`` in ``[1, MAX_CLASSES]``
      (``G`` is 2 without continuous columns): each class keeps an expected
      count of ``CELL_SNR`` noise stds per cell, so more rows or more budget
      buy more classes (the dependence between columns), never noise.

    Parameters
    ----------
    n_tilde : float
        Released (noisy) number of rows.
    epsilon, delta : float
    n_binary : int
    block_sizes : list of int
        Sizes of the released one-hot blocks.
    n_continuous : int
    n_iter : int, default=1
        Releases the budget is split over (EM iterations).

    Returns
    -------
    k : int
    n_bins : int
        ``G`` (0 without continuous columns).
    """
    n_tilde = max(float(n_tilde), 1.0)
    row_norm = math.sqrt(1.0 + n_binary / 4.0 + sum((m - 1.0) / m for m in block_sizes) + n_continuous)
    sigma = gaussian_noise_multiplier(epsilon, delta) * math.sqrt(n_iter) * row_norm
    n_bins = 0
    if n_continuous:
        n_bins = int(np.clip(round(math.sqrt(n_tilde / sigma)), 2, MAX_BINS))
    cells = max(n_bins, 2)
    k = int(np.clip(math.floor(n_tilde / (CELL_SNR * sigma * cells)), 1, MAX_CLASSES))
    return k, n_bins


def linear_binning(U, n_bins):
    """Linear-binning weights of ``U`` (values in ``[0, 1]``) on ``n_bins`` grid points, per column.

    Returns an array of shape ``(n, d * n_bins)``: column ``c``'s weights
    occupy ``[c * n_bins, (c + 1) * n_bins)``; each row of a column's block
    sums to one with at most two non-zero entries.
    """
    n, d = U.shape
    pos = np.clip(U, 0.0, 1.0) * (n_bins - 1)
    left = np.minimum(np.floor(pos).astype(np.intp), n_bins - 2)
    t = pos - left
    out = np.zeros((n, d, n_bins))
    rows, cols = np.arange(n)[:, None], np.arange(d)[None, :]
    out[rows, cols, left] = 1.0 - t
    out[rows, cols, left + 1] += t
    return out.reshape(n, d * n_bins)


def hat_areas(n_bins):
    """Area of each grid point's hat function on ``[0, 1]`` (half at the two ends)."""
    a = np.full(n_bins, 1.0 / (n_bins - 1))
    a[[0, -1]] /= 2.0
    return a


def hat_log_density(weights, probs, n_bins):
    """``log f(u)`` of one column for every record and class, shape ``(n, k)``.

    ``weights`` are the records' linear-binning weights (``(n, n_bins)``),
    ``probs`` the classes' released grid probabilities (``(k, n_bins)``):
    ``f(u) = sum_j p_j h_j(u) / a_j`` and ``h_j(u)`` is the weight of ``j``.
    """
    density = weights @ (probs / hat_areas(n_bins)).T
    return np.log(np.maximum(density, 1e-12))


def sample_hat(points, n_bins, rng):
    """Values in ``[0, 1]`` drawn from the normalised hats of the grid ``points`` (any shape).

    ``g_j + T / (G - 1)`` with ``T`` triangular on ``[-1, 1]`` (the sum of
    two uniforms minus one), reflected at 0 and 1: the end points' half hats.
    """
    h = 1.0 / (n_bins - 1)
    tri = rng.random(points.shape) + rng.random(points.shape) - 1.0
    v = np.abs(points * h + tri * h)
    return 1.0 - np.abs(1.0 - v)


def release_box(reduce, n_tilde, n_features, epsilon, delta, composition, secure_noise, rng, ledger):
    """The private box of the continuous columns (``bounds="auto"``), through the core; returns ``(low, high)``.

    :func:`~skdp.privacy.quantiles.private_histogram_box` (a log histogram,
    then a linear one inside it; ends at about the 1st and 99th
    percentiles) with the share of ``(epsilon, delta)`` the core's
    :func:`~skdp.privacy.quantiles.histogram_box_share` picks from the
    released size ``n~`` (at most :data:`BOX_SHARE_CAP`).  The core's
    histogram mechanism is calibrated for replace-one neighbours (L2
    sensitivity ``sqrt(2 d)``); adding or removing a record moves one count
    per column (``sqrt(d)``), so recording the same mechanism under
    add/remove with that multiplier is conservative.  A column the noise
    hides is announced (post-processing), the warning naming ``bounds``.
    """
    share = min(
        histogram_box_share(n_tilde, epsilon, delta, n_features, composition, secure_noise), BOX_SHARE_CAP
    )
    plan = calibrate_histogram_bounds(epsilon, delta, n_features, share, composition, secure_noise)
    sensitivity = HISTOGRAM_L2_PER_COLUMN * math.sqrt(n_features)
    mechanism = GaussianMechanism(sensitivity, plan.multiplier * sensitivity, ADD_REMOVE)
    low, high, located, pooled = announced_histogram_box(
        reduce,
        max(n_tilde, 1.0),
        n_features,
        mechanism,
        AUTO_BOUNDS_QUANTILES,
        rng,
        ledger,
        epsilon=epsilon,
        advice="Declare bounds=(lows, highs) for the continuous columns from public knowledge, or raise epsilon.",
    )
    return low, high, [mechanism.event(), mechanism.event()]


def encoded_layout(continuous, blocks, n_features, n_bins, indicator):
    """Layout of the encoded records: ``(continuous, blocks, n_columns, indicator column or None)``.

    The encoded record is the original columns (continuous ones zeroed),
    then ``n_bins`` linear-binning weights per continuous column (a soft
    one-hot block each, appended to the declared ``blocks``), then, with
    ``indicator`` (declared bounds), the record's out-of-domain indicator
    (a binary column).
    """
    blocks = list(blocks)
    start = n_features
    for _ in continuous:
        blocks.append(tuple(range(start, start + n_bins)))
        start += n_bins
    flag = None
    if indicator and continuous.size:
        flag, start = start, start + 1
    return continuous, blocks, start, flag


def encode_records(X, low, high, n_bins, layout):
    """``(mapped, encoded)``: records with continuous columns on ``[0, 1]``, and their encoding.

    Per record: continuous columns mapped by ``(x - low) / (high - low)``
    and clipped to ``[0, 1]``, other columns clipped to ``[0, 1]``; the
    encoding (``layout``: :func:`encoded_layout`) adds the linear-binning
    weights (:func:`linear_binning`) and, with an indicator column, whether
    the record left the declared box.
    """
    cont, _, width, flag = layout
    mapped = np.clip(X, 0.0, 1.0)
    if not cont.size:
        return mapped, mapped
    raw = X[:, cont]
    U = np.clip((raw - low[cont]) / (high[cont] - low[cont]), 0.0, 1.0)
    mapped[:, cont] = U
    encoded = np.zeros((X.shape[0], width))
    encoded[:, : X.shape[1]] = mapped
    encoded[:, cont] = 0.0
    encoded[:, X.shape[1] : X.shape[1] + cont.size * n_bins] = linear_binning(U, n_bins)
    if flag is not None:
        encoded[:, flag] = np.any((raw < low[cont]) | (raw > high[cont]), axis=1)
    return mapped, encoded


def decode_records(drawn, n_features, continuous, n_bins, low, high, rng):
    """Records in the data's units from drawn encodings: a point of each continuous column's hat (post-processing)."""
    decoded = drawn[:, :n_features].copy()
    if continuous.size:
        grid = drawn[:, n_features : n_features + continuous.size * n_bins]
        grid = grid.reshape(len(drawn), continuous.size, n_bins).argmax(axis=2)
        span = high[continuous] - low[continuous]
        decoded[:, continuous] = low[continuous] + sample_hat(grid, n_bins, rng) * span
    return decoded
