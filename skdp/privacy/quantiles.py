"""Private quantiles by the exponential mechanism over a public grid, and the bounds built from them.

One module for every place skdp needs a range nobody declared:
:class:`~skdp.preprocessing.DPMinMaxScaler` (two quantiles of each column),
``bounds="auto"`` of :class:`~skdp.preprocessing.DPStandardScaler`, and the
``"auto"`` bounds of the estimators (:func:`private_box` for the column
ranges, :func:`private_norm_bound` for a bound on the row norms).  The
mechanism is Smith (2011)'s exponential-mechanism quantile with the cells of
a public grid as candidates (:func:`private_quantiles`); a grid, not the
data, fixes where a released value can fall, so nothing is read off the data
outside the mechanism.

The scalers' column ranges (:class:`~skdp.preprocessing.DPMinMaxScaler`,
``bounds="auto"`` of :class:`~skdp.preprocessing.DPStandardScaler`) come
from :func:`private_histogram_box` instead: two noisy histograms (a shared
log-scale one with a noisy-count threshold, in the style of Google's
``ApproxBounds``, then a linear one inside the range it found), whose
worst-case error is bounded by the data's largest magnitude where the
exponential mechanism over a wide grid could land anywhere on the grid.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from .calibration import calibrate_noise_multiplier
from .events import ADD_REMOVE, REPLACE_ONE, PureDPEvent
from .mechanisms.selection import ExponentialMechanism

__all__ = [
    "announced_histogram_box",
    "GRID_DECADES",
    "GRID_POINTS_PER_DECADE",
    "RANK_SENSITIVITY",
    "check_grid",
    "check_quantiles",
    "default_grid",
    "norm_grid",
    "private_box",
    "private_norm_bound",
    "private_quantiles",
    "quantile_epsilon",
    "rank_counts",
    "rank_margin",
    "AUTO_BOUNDS_QUANTILES",
    "BOX_SHARES",
    "MISSING_ROWS_FAILURE",
    "HistogramBounds",
    "calibrate_histogram_bounds",
    "histogram_box_share",
    "HISTOGRAM_FAILURE",
    "LOG2_RANGE",
    "REFINE_BINS",
    "scale_noise_weight",
    "scale_mechanism",
    "calibrate_histogram",
    "can_locate_columns",
    "BOX_LEVELS",
    "histogram_box_level",
    "row_scale_histogram",
    "histogram_events",
    "histogram_mechanism",
    "histogram_threshold",
    "linear_histogram",
    "log_bin_edges",
    "log_bin_index",
    "log_histogram",
    "private_histogram_box",
    "warn_unlocated_columns",
    "EXTREME_FAILURE",
    "extreme_hidden_share",
    "extreme_threshold",
    "MIN_REFINE_BINS",
    "refine_bins",
    "wall_threshold",
    "OVERFLOW_FAILURE",
    "overflow_edges",
    "overflow_histogram",
]

#: Candidates per decade of the default grid.
GRID_POINTS_PER_DECADE = 50

#: Smallest and largest magnitude of the default grid (powers of ten).
GRID_DECADES = (-6, 6)

#: Change of a rank count ``#{i : x_ij <= b}`` when one record is replaced:
#: the old record leaves at most one count, the new one enters at most one,
#: and a count they both fall in is unchanged, so it moves by at most 1.
RANK_SENSITIVITY = 1.0

#: Quantiles the ``"auto"`` column bounds release by default (``bounds="auto"``
#: of :class:`~skdp.preprocessing.DPStandardScaler`; the floor of DP-SEP's
#: ``"auto"`` levels).
AUTO_BOUNDS_QUANTILES = (0.01, 0.99)


def rank_margin(n_samples, epsilon, n_cells, failure):
    """Rank margin ``2 ln(K / beta) / (epsilon n)`` of an exponential-mechanism quantile, as a fraction of ``n``.

    Over ``K = n_cells`` grid cells, a cell whose rank distance from the
    target is ``m n`` has weight ``exp(-epsilon m n / 2)`` against at least 1
    for the right cell (score sensitivity 1), so the mechanism lands that far
    off with probability at most ``K exp(-epsilon m n / 2)`` (McSherry &
    Talwar 2007); the margin is the ``m`` that makes this ``beta = failure``.
    A function of public quantities only (``n`` is public under replace-one
    neighbours, the plan's epsilon, the grid).  Used by the ``"auto"`` norm
    bound (:func:`skdp.privacy.centring.auto_norm_quantile`) and DP-SEP's
    ``"auto"`` bounds.
    """
    return 2.0 * math.log(n_cells / failure) / (epsilon * max(int(n_samples), 1))


def default_grid():
    """The public candidate values of a quantile: 0 and ``+-10^k`` on a log grid.

    ``GRID_POINTS_PER_DECADE`` points per decade from ``1e-6`` to ``1e6`` on
    each side of 0 (1,203 points, consecutive ratio ``10^(1/50)``, 4.7 %): any
    column whose quantiles lie within ``[-1e6, 1e6]`` is located to within
    4.7 % of its magnitude (or to 1e-6 of 0) without a bound being declared.
    A quantile outside that range is released as the grid's end.
    """
    lo, hi = GRID_DECADES
    positive = np.logspace(lo, hi, (hi - lo) * GRID_POINTS_PER_DECADE + 1)
    return np.concatenate([-positive[::-1], [0.0], positive])


def check_grid(grid):
    """The candidate grid as a strictly increasing finite 1-D float array (``grid`` parameter)."""
    if grid is None:
        return default_grid()
    try:
        values = np.asarray(grid, dtype=float)
    except (TypeError, ValueError):
        values = None
    if (
        values is None
        or values.ndim != 1
        or values.size < 2
        or not np.all(np.isfinite(values))
        or not np.all(np.diff(values) > 0)
    ):
        raise ValueError("grid must be None or a strictly increasing 1-D array of at least 2 finite numbers.")
    return values


def check_quantiles(quantiles):
    """``(q_low, q_high)`` with ``0 <= q_low < q_high <= 1`` (``quantiles`` parameter)."""
    try:
        low, high = (float(q) for q in quantiles)
    except (TypeError, ValueError):
        raise ValueError("quantiles must be a pair (q_low, q_high) of numbers in [0, 1].") from None
    if not (0.0 <= low < high <= 1.0):
        raise ValueError("quantiles must satisfy 0 <= q_low < q_high <= 1.")
    return low, high


def rank_counts(chunk, grid):
    """``#{i : x_ij <= grid_k}`` for every column ``j`` and candidate ``k``: shape (n_features, n_grid).

    Counts of the chunks add up to those of the whole data (a map step of
    :meth:`skdp._chunks.ChunkedData.map_reduce`).
    """
    ordered = np.sort(chunk, axis=0)
    return np.stack(
        [np.searchsorted(ordered[:, j], grid, side="right") for j in range(chunk.shape[1])]
    ).astype(float)


def quantile_epsilon(epsilon, delta, n_releases, composition, secure_noise=False):
    """Per-quantile epsilon of ``n_releases`` exponential mechanisms that compose to ``(epsilon, delta)``.

    Asked of the core's calibration: the plan is ``n_releases`` pure-DP
    events of epsilon ``1 / z``, costed by ``composition`` (under ``"basic"``
    this is ``epsilon / n_releases``; under ``"pld"`` with ``delta > 0`` the
    privacy-loss-distribution composition gives each quantile more).
    """

    def events(z):
        return [PureDPEvent(count=n_releases, neighbouring=REPLACE_ONE, epsilon=1.0 / z)]

    z = calibrate_noise_multiplier(events, epsilon, delta, composition, secure_noise=secure_noise)
    return 1.0 / z


def _cell_distances(counts, n_samples, target):
    """``dist(target, [c_k, c_{k+1}])`` for each cell, the end cells open to the outside.

    The first cell also holds every value below the grid (its lower rank is
    0) and the last every value above it (its upper rank is ``n``), so a
    quantile beyond the grid selects the end cell instead of leaving every
    cell at the same distance (a uniform draw).  ``0`` and ``n`` are public;
    each remaining rank still moves by at most 1.
    """
    below, above = counts[:-1].copy(), counts[1:].copy()
    below[0], above[-1] = 0.0, float(n_samples)
    return np.maximum(below - target, 0.0) + np.maximum(target - above, 0.0)


def private_quantiles(counts, n_samples, quantiles, grid, epsilon, rng, ledger, neighbouring=REPLACE_ONE):
    """Private quantiles of every column by the exponential mechanism over the cells of a public grid.

    Smith (2011)'s exponential-mechanism quantile (as recalled by
    Gillenwater, Joseph & Kulesza 2021, Section 3) with the cells
    ``[b_k, b_{k+1}]`` of a public ``grid`` as candidates instead of the gaps
    between data points (which are not public).  With rank counts
    ``c_k = #{i : x_ij <= b_k}``, cell ``k`` has utility
    ``u_k = -dist(q n, [c_k, c_{k+1}])``: 0 for the cells the ``q``-quantile
    can lie in, minus the number of records it is away otherwise; the end
    cells are open to the outside (``c_0 = 0``, ``c_K = n``), so a quantile
    beyond the grid is released as the grid's end cell.  Each
    ``c_k`` moves by at most :data:`RANK_SENSITIVITY` when one record is
    replaced (``n`` is public under replace-one neighbours), hence so does
    ``u_k``; the same holds when one record is added or removed, whether
    ``n`` in the target rank is public (declared, or a released count) or
    the rows' own number: ``u_k`` is the distance from ``q n`` to the
    interval ``[c_k, c_{k+1}]``, which moves by at most the largest change of the three, and each
    moves by at most 1 (``q n`` by ``q``).  One cell is drawn with
    probability proportional to
    ``exp(epsilon u_k / 2)`` (McSherry & Talwar 2007), one
    :class:`~skdp.privacy.PureDPEvent` per quantile and column, and its
    midpoint is released (post-processing: Smith draws a point uniformly
    in the interval; the midpoint halves the worst-case error within it).

    Parameters
    ----------
    counts : ndarray of shape (n_features, n_grid)
        :func:`rank_counts` of the data.
    n_samples : int
    quantiles : sequence of float
    grid : ndarray of shape (n_grid,)
    epsilon : float
        Epsilon of each release.
    rng : numpy.random.Generator
    ledger : PrivacyLedger
    neighbouring : {"replace_one", "add_remove"}, default="replace_one"
        The relation the events are recorded under (the rank counts'
        sensitivity is 1 under both).

    Returns
    -------
    ndarray of shape (len(quantiles), n_features)
    """
    mechanism = ExponentialMechanism(epsilon, RANK_SENSITIVITY, neighbouring)
    midpoints = (grid[:-1] + grid[1:]) / 2
    out = np.empty((len(quantiles), counts.shape[0]))
    for i, q in enumerate(quantiles):
        target = q * n_samples
        for j in range(counts.shape[0]):
            distance = _cell_distances(counts[j], n_samples, target)
            out[i, j] = midpoints[mechanism.select(-distance, rng, ledger)]
    return out


def private_box(counts, n_samples, quantiles, grid, epsilon, rng, ledger):
    """Private lower and upper bounds of every column: two :func:`private_quantiles`, ordered and widened.

    The released ``(q_low, q_high)`` quantiles of each column, sorted (noise
    can swap them).  Equal ends (noise, or a constant column) are widened to
    the next grid point so a map to ``[-1/2, 1/2]`` or a box of positive width
    is defined; post-processing of the released cells.  Costs
    ``2 * n_features`` pure-DP events of ``epsilon`` each.

    Parameters
    ----------
    counts : ndarray of shape (n_features, n_grid)
        :func:`rank_counts` of the data.
    n_samples : int
        Public number of rows (replace-one neighbours).
    quantiles : tuple (q_low, q_high)
    grid : ndarray of shape (n_grid,)
    epsilon : float
        Epsilon of each of the ``2 * n_features`` releases.
    rng : numpy.random.Generator
    ledger : PrivacyLedger

    Returns
    -------
    low, high : ndarray of shape (n_features,)
        ``low < high`` in every column.
    """
    low, high = np.sort(private_quantiles(counts, n_samples, quantiles, grid, epsilon, rng, ledger), axis=0)
    same = high <= low
    high[same] = grid[np.minimum(np.searchsorted(grid, low[same], side="right"), grid.size - 1)]
    # low at the grid's top end: step it down instead (high is the end).
    low[same & (high <= low)] = grid[-2]
    return low, high


def norm_grid():
    """The public candidate values of a norm bound: the non-negative half of :func:`default_grid`."""
    grid = default_grid()
    return grid[grid >= 0]


def private_norm_bound(norms, quantile, epsilon, rng, ledger, grid=None):
    """A private ``quantile`` of the row norms, released as the upper end of its grid cell.

    A clipping bound chosen privately (issue "bounds nobody has to know"):
    the exponential mechanism of :func:`private_quantiles` over the cells of
    the public non-negative log grid :func:`norm_grid` (50 cells per decade,
    4.7 % apart, from 1e-6 to 1e6).  The *upper* end of the drawn cell is
    released rather than its midpoint: a clipping bound errs better on the
    large side (a row clipped loses information; a loose bound only adds
    noise in proportion).  One :class:`~skdp.privacy.PureDPEvent` of
    ``epsilon``: each rank count ``#{i : ||x_i|| <= b_k}`` moves by at most
    1 when one record is replaced, whatever the norms (an infinite or NaN
    norm counts as above every candidate).

    Parameters
    ----------
    norms : ndarray of shape (n_samples,)
        Row norms (:func:`~skdp.privacy.clipping.row_norms`).
    quantile : float in [0, 1]
    epsilon : float
    rng : numpy.random.Generator
    ledger : PrivacyLedger
    grid : ndarray or None
        Public candidates (default :func:`norm_grid`).

    Returns
    -------
    float
        The released bound, positive.
    """
    grid = norm_grid() if grid is None else check_grid(grid)
    norms = np.where(np.isfinite(norms), norms, np.inf)
    counts = rank_counts(np.asarray(norms, dtype=float).reshape(-1, 1), grid)
    mechanism = ExponentialMechanism(epsilon, RANK_SENSITIVITY)
    target = float(quantile) * norms.shape[0]
    distance = _cell_distances(counts[0], norms.shape[0], target)
    upper = grid[1:][mechanism.select(-distance, rng, ledger)]
    return float(upper)


# ----------------------------------------------------------------------------
# Histogram bounds: a shared log-scale histogram with a noisy-count threshold
# ----------------------------------------------------------------------------
#: Magnitude bins ``[2^k, 2^(k+1))`` for ``k`` from ``LOG2_RANGE[0]`` to
#: ``LOG2_RANGE[1]`` on each side of 0 (about 1e-6 to 1e12), plus one bin for
#: ``|x| < 2^LOG2_RANGE[0]``; a magnitude beyond the top lands in the top bin.
LOG2_RANGE = (-20, 39)

#: Chance, at most, that some empty bin's noisy count passes the threshold
#: (the threshold is set for all bins of a release together).
HISTOGRAM_FAILURE = 1e-3

#: Linear bins of the second stage, inside the range the first one found.
REFINE_BINS = 32

#: Change of one column's histogram when a record is replaced: one count
#: loses 1, another gains 1 (L1 2, L2 sqrt(2) per column).
HISTOGRAM_L1_PER_COLUMN, HISTOGRAM_L2_PER_COLUMN = 2.0, math.sqrt(2.0)


def log_bin_edges():
    """``(lower, upper)`` edges of the signed log bins, in increasing order (public, data-free)."""
    lo, hi = LOG2_RANGE
    powers = 2.0 ** np.arange(lo, hi + 2)  # 2^lo ... 2^(hi+1)
    n_mag = hi - lo + 1
    neg_lower, neg_upper = -powers[1:][::-1], -powers[:-1][::-1]
    lower = np.concatenate([neg_lower, [-powers[0]], powers[:n_mag]])
    upper = np.concatenate([neg_upper, [powers[0]], powers[1 : n_mag + 1]])
    return lower, upper


def log_bin_index(values):
    """Index of each value's signed log bin (:func:`log_bin_edges`); infinities land in the end bins."""
    lo, hi = LOG2_RANGE
    n_mag = hi - lo + 1
    mag = np.abs(values)
    with np.errstate(divide="ignore", invalid="ignore"):
        j = np.clip(np.floor(np.log2(np.where(mag > 0, mag, 1.0))) - lo, 0, n_mag - 1)
    j = np.where(np.isfinite(j), j, n_mag - 1).astype(np.int64)
    small = mag < 2.0**lo
    return np.where(small, n_mag, np.where(values > 0, n_mag + 1 + j, n_mag - 1 - j))


def log_histogram(chunk):
    """Counts of every column's values in the signed log bins: shape (n_features, n_bins); summable over chunks."""
    n_bins = 2 * (LOG2_RANGE[1] - LOG2_RANGE[0] + 1) + 1
    return _column_bincount(log_bin_index(np.asarray(chunk, dtype=float)), n_bins)


def _linear_bin_index(X, lower, upper, n_bins):
    """Each value's bin among ``n_bins`` equal bins of ``[lower_j, upper_j]`` (values clipped in)."""
    u = (np.clip(X, lower, upper) - lower) / (upper - lower)
    return np.clip(np.floor(np.nan_to_num(u, nan=0.0) * n_bins), 0, n_bins - 1).astype(np.int64)


def linear_histogram(chunk, lower, upper, n_bins):
    """Counts in ``n_bins`` equal bins of ``[lower_j, upper_j]`` per column (values clipped in); summable."""
    X = np.asarray(chunk, dtype=float)
    return _column_bincount(_linear_bin_index(X, lower, upper, n_bins), n_bins)


def _column_bincount(idx, n_bins):
    d = idx.shape[1]
    flat = (idx + n_bins * np.arange(d)[None, :]).ravel()
    return np.bincount(flat, minlength=d * n_bins).reshape(d, n_bins).astype(float)


def histogram_threshold(mechanism, n_counts, failure=HISTOGRAM_FAILURE):
    """Noisy count an empty bin passes with probability at most ``failure`` over ``n_counts`` bins.

    Laplace noise of std ``s`` (scale ``b = s / sqrt(2)``): ``P(noise > t) =
    exp(-t / b) / 2``, so ``t = b ln(n_counts / (2 failure))``; Gaussian noise
    of std ``s``: ``t = s Phi^-1(1 - failure / n_counts)`` (union bound over
    the bins).  A function of the public plan only.
    """
    from scipy.stats import norm

    std = float(mechanism.std)
    if type(mechanism).__name__.startswith("Laplace"):
        return std / math.sqrt(2.0) * math.log(n_counts / (2.0 * failure))
    return std * float(norm.isf(failure / n_counts))


#: Chance, at most, that :func:`_misses_rows` says a column's range misses rows when it holds
#: all but the tails (per column).  A false alarm only widens the range (more noise on what is
#: released inside it); a missed one clips a share of the column's values, so this test is not
#: held to the union bound of the occupied-bin threshold.
MISSING_ROWS_FAILURE = 0.05


def _misses_rows(noisy, first, last, std, quantiles, n_samples):
    """Whether a column's range ``[first, last]`` of log bins clearly holds fewer rows than the quantiles keep.

    The noisy count of the range has noise std ``std sqrt(last - first +
    1)``; when even that count plus ``Phi^-1(1 - MISSING_ROWS_FAILURE)``
    of its std is below the rows the ``quantiles`` keep inside (``(q_high -
    q_low) n``), more than the tails lie outside the range (wrongly said
    with probability at most :data:`MISSING_ROWS_FAILURE` per column).
    Post-processing of the released counts, public ``n`` and plan.
    """
    from scipy.stats import norm

    held = float(noisy[first : last + 1].sum())
    margin = float(norm.isf(MISSING_ROWS_FAILURE)) * std * math.sqrt(last - first + 1)
    q_low, q_high = quantiles
    return held + margin < (q_high - q_low) * n_samples


def _occupied_ends(noisy, threshold):
    """Lowest and highest bin whose noisy count passes ``threshold`` (-1, -1 when none does)."""
    above = np.flatnonzero(noisy > threshold)
    if above.size == 0:
        return -1, -1
    return int(above[0]), int(above[-1])


def _scale_from_counts(noisy, threshold):
    """The released scale ``S`` from the noisy row-scale counts: the top of the highest occupied bin, or None.

    A bin is occupied when its noisy count passes ``threshold``; where no
    single bin does, the highest pair of adjacent bins whose sum passes
    ``sqrt(2) threshold`` (their sum's noise std is ``sqrt(2)`` times one
    count's) gives the top of its upper bin: rows whose largest magnitude
    straddles a power of 2 split over two bins.  ``threshold`` is set for
    the ``2 K`` tests together (post-processing of the released counts).
    Bin 0 is ``|x| < 2^lo``, bin ``1 + k`` is ``[2^(lo + k), 2^(lo + k + 1))``.
    """
    single = np.flatnonzero(noisy > threshold)
    if single.size:
        top = int(single[-1])
    else:
        pairs = np.flatnonzero(noisy[:-1] + noisy[1:] > math.sqrt(2.0) * threshold)
        if not pairs.size:
            return None
        top = int(pairs[-1]) + 1
    return float(2.0 ** (LOG2_RANGE[0] + top))


def _quantile_ends(noisy, quantiles, n_samples):
    """Bins of the ``q_low`` and ``q_high`` quantiles from noisy prefix and suffix sums.

    The low end is the first bin whose noisy prefix sum passes
    ``q_low n``, the high end the last whose noisy suffix sum passes
    ``(1 - q_high) n`` (0 and ``n - 1`` when none does: the whole range).
    """
    q_low, q_high = quantiles
    low_ok = np.cumsum(noisy) > q_low * n_samples
    high_ok = np.cumsum(noisy[::-1])[::-1] > (1.0 - q_high) * n_samples
    first = int(np.argmax(low_ok)) if low_ok.any() else 0
    last = int(noisy.size - 1 - np.argmax(high_ok[::-1])) if high_ok.any() else noisy.size - 1
    return min(first, last), max(first, last)


#: Chance, at most, that an end of :func:`_extreme_ends` moves outward past bins that hold no
#: rows (per end, union bound over its prefix sums).  Such an end stays inside the stage-1
#: range, and a higher threshold holds every end back from a sparse tail (clipping it), so
#: the chance is set for both errors, not at the occupied-bin test's HISTOGRAM_FAILURE.
EXTREME_FAILURE = 0.5


#: Chance, at most, that an empty log bin just beyond a column's stage-1 range passes the
#: test that widens the linear stage's overflow bin over it (:func:`overflow_edges`, per end).
#: A false alarm adds one empty bin's noise to a prefix sum; a miss keeps the end inside
#: the stage-1 range (the rule until 2026-11-27).  The extension test's 5 %.
OVERFLOW_FAILURE = MISSING_ROWS_FAILURE


def overflow_histogram(chunk, lower, upper, n_bins):
    """:func:`linear_histogram` with one overflow bin each side: ``n_bins + 2`` counts per column; summable.

    Bin 0 counts the values below ``lower_j``, bins ``1 .. n_bins`` the equal
    bins of ``[lower_j, upper_j]``, bin ``n_bins + 1`` the values above
    ``upper_j``: every row in exactly one bin of its column, so a replaced
    record moves one count down and one up, as in :func:`linear_histogram`.
    """
    X = np.asarray(chunk, dtype=float)
    idx = 1 + _linear_bin_index(X, lower, upper, n_bins)
    idx = np.where(X < lower, 0, np.where(X > upper, n_bins + 1, idx))
    return _column_bincount(idx, n_bins + 2)


def overflow_edges(low, high, log_noisy, overflow_noisy, mechanism, n_bins=REFINE_BINS):
    """Edges of a column's overflow bins and linear bins (``quantiles="auto"``): ``n_bins + 3`` values.

    The linear bins split the stage-1 range ``[low, high]``.  Where ``low``
    is a log bin's lower edge, two released counts say whether rows lie
    below it: the stage-1 noisy count of the next log bin outward
    (``log_noisy``) and the stage-2 noisy count of the overflow bin below
    (``overflow_noisy[0]``, every row below ``low``).  Where their sum
    passes ``sqrt(2)`` times what one empty count passes with probability
    :data:`OVERFLOW_FAILURE` (the sum of two independent noises of the same
    std has ``sqrt(2)`` times its std: exact for Gaussian noise, about 5 %
    for Laplace), the overflow bin below spans that log bin, so an end can
    be extrapolated into it: a tail too thin for the occupied-bin threshold
    (a normal column's last log bin) still holds rows there.  Where ``low >
    0`` the bin then reaches 0 instead: the rows below a positive range may
    lie in any of the log bins between it and 0, which together are twice
    the next one's width, and an end moved towards 0 never grows a
    magnitude (a uniform column on ``[0, 1]`` whose stage-1 range stops at
    ``1 / 32``).  Otherwise it has width 0 (its rows sit at ``low``, as
    clipped).  The same above ``high`` (towards 0 where ``high < 0``).
    Post-processing of the two releases and the public plan.  (Until
    2026-11-27 the stage-1 count alone decided, against one count's test,
    and the bin never reached past the next log bin.)
    """
    lower_edges, upper_edges = log_bin_edges()
    gate = math.sqrt(2.0) * histogram_threshold(mechanism, 1, OVERFLOW_FAILURE)
    below, above = (float(v) for v in overflow_noisy)
    outer_low, outer_high = low, high
    a = int(np.searchsorted(lower_edges, low))
    if 0 < a < lower_edges.size and lower_edges[a] == low and log_noisy[a - 1] + below > gate:
        outer_low = 0.0 if low > 0 else float(lower_edges[a - 1])
    b = int(np.searchsorted(upper_edges, high))
    if b < upper_edges.size - 1 and upper_edges[b] == high and log_noisy[b + 1] + above > gate:
        outer_high = 0.0 if high < 0 else float(upper_edges[b + 1])
    return np.concatenate([[outer_low], np.linspace(low, high, n_bins + 1), [outer_high]])


#: The fewest linear bins of the ``quantiles="auto"`` stage (:func:`refine_bins`): one halving
#: of :data:`REFINE_BINS`.  With 8 an end's resolution alone (a bin, an eighth of a stage-1 range
#: that is up to twice the column's extent) is as coarse as a declared domain rounded to one
#: significant digit.
MIN_REFINE_BINS = 16


def refine_bins(n_samples, mechanism):
    """Linear bins of the ``quantiles="auto"`` stage: :data:`REFINE_BINS`, halved where the noise is too large for them (public).

    Where the average bin of :data:`REFINE_BINS` (``n / REFINE_BINS`` rows) holds
    fewer rows than one bin's threshold (:func:`extreme_threshold` over the
    ``n_bins + 2`` counts), a column's tail bins are below the noise one by one
    and an end is resolved only by prefix sums over many of them, whose
    threshold grows as ``sqrt(k)``: halving the bins doubles every count at
    the same noise, so the rows an end needs at a given distance fall by
    ``sqrt(2)``, at the cost of a bin twice as wide (1/16 of the stage-1
    range).  Halved at most to :data:`MIN_REFINE_BINS`.  A function of the
    public ``n`` and plan only (``n`` is public under replace-one neighbours).
    """
    n_bins = REFINE_BINS
    while n_bins > MIN_REFINE_BINS and n_samples / n_bins < extreme_threshold(mechanism, n_bins + 2):
        n_bins //= 2
    return n_bins


def wall_threshold(mechanism, n_bins, n_features):
    """Noisy count one empty bin passes with probability at most :data:`HISTOGRAM_FAILURE` over all ``d (n_bins + 2)`` counts (public).

    The occupied-bin test of stage 1 (:func:`histogram_threshold`) applied to
    the linear stage's counts: a single bin above it holds rows at that
    confidence, whatever the prefix sums before it say (:func:`_extreme_ends`).
    """
    return histogram_threshold(mechanism, n_features * (n_bins + 2))


def extreme_threshold(mechanism, n_bins, failure=EXTREME_FAILURE):
    """Noisy count one bin of nothing passes with probability at most ``failure / n_bins`` (public plan).

    The prefix sum of ``k`` empty bins is compared with ``sqrt(k)`` times this
    (:func:`_extreme_ends`): its noise std is ``sqrt(k)`` times one count's, and
    a sum of ``k`` Laplace draws has lighter tails than ``sqrt(k)`` times one, so
    each of the ``n_bins`` prefix sums passes with probability at most
    ``failure / n_bins`` (union bound: ``failure`` per end).
    """
    return histogram_threshold(mechanism, n_bins, failure)


def _extreme_ends(noisy, step, edges, wall=math.inf):
    """Ends of a column's rows (``quantiles="auto"``): resolved by the prefix sums, then extrapolated.

    ``noisy`` are the stage-2 counts of the bins ``[edges[i], edges[i+1])``:
    the overflow bin below the stage-1 range, the linear bins
    (:func:`refine_bins`), the overflow bin above it (:func:`overflow_histogram`; an overflow
    bin of width 0 where the stage-1 range is not widened).  The low end:
    ``Q`` is the first bin whose noisy prefix sum passes ``step sqrt(k)``
    (``k`` bins summed; :func:`extreme_threshold`), or whose own noisy count
    passes ``wall`` (:func:`wall_threshold`, the occupied-bin test: a wall of
    rows deep inside the range, such as pixels at 16 in ``[0, 32)``, whose
    prefix sum over the empty bins before it has a threshold ``sqrt(k)``
    times higher; until the night of 2026-11-27 the prefix sums alone, which passed there
    only by the empty bins' noise or past the wall), and at least the first
    linear bin: rows certainly lie at or below it.  The rows the noisy prefix
    before ``Q`` still counts (``N = max(S_{Q-1}, 0)``, the overflow's among
    them) lie beyond ``Q``'s lower edge ``x_Q``.  With the density ``f`` of
    bin ``Q`` (its noisy count, at least ``step``, over its width) their
    tail's decay length is ``N / f``.  Under a log-concave tail (normal,
    logistic, exponential, uniform) ``log N(x)`` lies below its tangent at
    ``x_Q``, so ``N(x) <= N exp(-(x_Q - x) f / N)``: fewer than one row is left
    beyond ``x_Q - (N / f) ln N``, where the end is placed (one decay length,
    the flat tail's reach, where ``N <= e``), at most to the outer edge of
    the overflow bin.  A column whose rows stop at a wall (a dense bin, ``N``
    within the noise) keeps about ``x_Q``; a tail moves out.  As ``n
    epsilon`` grows the threshold falls, ``Q`` reaches the extreme row's bin
    and ``N`` vanishes: the ends approach the minimum and maximum.  The high
    end is the same from the top.  Where not even the whole column passes,
    ``(edges[0], edges[-1])``.  Post-processing of the released counts and
    the public plan.  (Until 2026-11-27 the end moved by one decay length
    only, and never beyond the stage-1 range.)
    """
    n_bins = noisy.size
    limit = step * np.sqrt(np.arange(1, n_bins + 1))
    widths = np.diff(edges)

    def end(counts, inner_edges, width):
        # Positions as distances inward from the outer edge: the same code for both ends.
        sums = np.cumsum(counts)
        sure = (sums > limit) | (counts > wall)
        if not sure.any():
            return None
        q = max(int(np.argmax(sure)), 1)
        before = max(float(sums[q - 1]), 0.0)
        density = max(float(counts[q]), step) / width[q]
        reach = math.log(before) if before > math.e else 1.0
        return inner_edges[q] - before / density * reach

    outer_low, outer_high = float(edges[0]), float(edges[-1])
    low = end(noisy, np.asarray(edges[:-1]) - outer_low, widths)
    top = end(noisy[::-1], outer_high - np.asarray(edges[1:][::-1]), widths[::-1])
    if low is None or top is None:
        return outer_low, outer_high
    low, high = outer_low + max(low, 0.0), outer_high - max(top, 0.0)
    return min(low, high), max(low, high)


def extreme_hidden_share(n_samples, mechanism, n_bins=REFINE_BINS):
    """Share of ``n`` the stage-2 noise hides at a typical end: ``step sqrt(n_bins / 2) / n`` (public).

    ``step`` is :func:`extreme_threshold` over the ``n_bins + 2`` stage-2
    counts (the linear bins and the two overflow bins): a prefix sum over
    half the linear bins (an end halfway into the stage-1 range) must pass
    ``step sqrt(n_bins / 2)`` before :func:`_extreme_ends` places an end
    there, so about that many rows lie beyond an end it cannot resolve.  A
    function of the public ``n`` and plan only; it falls as epsilon grows.
    """
    step = extreme_threshold(mechanism, n_bins + 2)
    return step * math.sqrt(n_bins / 2) / max(int(n_samples), 1)


def can_locate_columns(n_samples, mechanism, n_features, share_in_bin=0.5):
    """Whether a column with ``share_in_bin`` of its ``n`` values in one log bin passes the threshold (public).

    The default, a half: a column holding its values in two log bins.
    """
    n_bins = 2 * (LOG2_RANGE[1] - LOG2_RANGE[0] + 1) + 1
    return histogram_threshold(mechanism, n_bins * n_features) < share_in_bin * n_samples


#: Range of :func:`histogram_box_level`: the 5th to the 10th percentile.
BOX_LEVELS = (0.05, 0.1)


def histogram_box_level(n_samples, count_std):
    """Quantile level ``q`` of a box read off :func:`private_histogram_box`: ``8 s / n`` within ``BOX_LEVELS``.

    The box's ends are the bins where the noisy prefix and suffix sums of
    the linear stage reach ``q n`` rows (``s`` is one count's noise std,
    ``mechanism.std``).  An end half way into the stage-1 range sums 16
    counts, whose noise has std ``4 s``; with ``q n >= 8 s`` (two of those
    stds) the sum crosses at the quantile's bin rather than where the noise
    pushes it (a 1 % level at ``n = 4,000``, ``s = 15`` put an end at the
    40th row beyond the 99th percentile's bin).  At least the 5th
    percentile: a smaller level widens the box into a skewed column's tail
    and squeezes its bulk (an unseen 17,702 x 4 Friedman set with
    exponential columns: the DP net's R^2 .745 at eps 10 with a 1 % floor,
    .794 with 5 %), and once the level is at 5 % the box stops moving with
    epsilon; a normal column winsorised at its 5 % box (``+-1.645`` sd)
    keeps ``corr(x, clip(x))^2 = 0.98`` of what a linear model explains.
    At most the 10th (``+-1.28`` sd of a normal column, still holding most
    of its spread).  Used by the DP nets' input boxes
    (:func:`skdp.nn._defaults.input_box_level`) and DP-SEP's feature box
    (``docs/bnn.md``).  A function of the public size and the plan's noise
    only.
    """
    q = 8.0 * float(count_std) / max(float(n_samples), 1.0)
    return float(min(max(q, BOX_LEVELS[0]), BOX_LEVELS[1]))


def scale_noise_weight(n_features):
    """Noise multiplier of the row-scale histogram over that of the column histograms: ``sqrt(d) / 2``.

    The row-scale histogram (:func:`private_histogram_box` with
    ``scale_mechanism``) has one count per row (L2 sensitivity ``sqrt(2)``
    whatever ``d``), a column histogram's release ``sqrt(2 d)``; at
    multiplier ``sqrt(d) / 2`` times theirs its counts carry half a column
    count's noise std (``z sqrt(d / 2)`` against ``z sqrt(2 d)``): it must
    locate ``S`` where the columns cannot.  Its privacy cost is ``4 / d``
    of one column release's (Gaussian: ``1 / z^2``): twice at ``d = 2``, a
    sixteenth at ``d = 64``.  A function of the public ``d`` only.  (Until
    2026-11-27 a constant ``1 / sqrt(2)``, whose comment described ``2``:
    the scale then cost as much as both column releases at every ``d``.)
    """
    return math.sqrt(max(int(n_features), 1)) / 2.0


def histogram_events(n_features, multiplier, gaussian, scale=False, releases=2, neighbouring=REPLACE_ONE):
    """The events of :func:`private_histogram_box`: two histogram releases at noise multiplier ``multiplier``.

    ``scale=True`` adds the row-scale histogram's release (multiplier
    ``scale_noise_weight(n_features) * multiplier``).  ``neighbouring``: the
    relation the multiplier is relative to (:func:`histogram_mechanism`).
    """
    from .events import GaussianEvent, LaplaceEvent

    event = GaussianEvent if gaussian else LaplaceEvent
    events = [event(count=releases, neighbouring=neighbouring, noise_multiplier=multiplier)]
    if scale:
        events.append(
            event(
                count=1,
                neighbouring=neighbouring,
                noise_multiplier=scale_noise_weight(n_features) * multiplier,
            )
        )
    return events


def scale_mechanism(multiplier, gaussian, n_features):
    """The additive mechanism of the row-scale histogram (one count per row: :func:`histogram_mechanism` at ``d = 1``).

    Its multiplier is :func:`scale_noise_weight` of the data's ``n_features`` times ``multiplier``.
    """
    return histogram_mechanism(1, scale_noise_weight(n_features) * multiplier, gaussian)


def row_scale_histogram(chunk):
    """Counts of the rows' largest magnitude ``max_j |x_ij|`` in the magnitude log bins; summable over chunks.

    Bin 0 holds ``|x| < 2^LOG2_RANGE[0]``, bin ``1 + k`` holds
    ``[2^(lo + k), 2^(lo + k + 1))`` (the top bin also everything above, and
    infinities or NaN).  Every row lands in exactly one bin.
    """
    lo, hi = LOG2_RANGE
    n_mag = hi - lo + 1
    X = np.asarray(chunk, dtype=float)
    mag = np.max(np.abs(X), axis=1) if X.shape[1] else np.zeros(X.shape[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        j = np.floor(np.log2(np.where(mag > 0, mag, 1.0))) - lo
    j = np.where(np.isfinite(j), np.clip(j, 0, n_mag - 1), n_mag - 1).astype(np.int64)
    idx = np.where(mag < 2.0**lo, 0, 1 + j)
    return np.bincount(idx, minlength=n_mag + 1).astype(float)


def histogram_mechanism(n_features, multiplier, gaussian, neighbouring=REPLACE_ONE):
    """The additive mechanism of each histogram release of :func:`private_histogram_box`.

    One vector of ``d x n_bins`` counts; replacing one record moves one
    count of each column down by 1 and one up by 1: L1 sensitivity ``2 d``
    (Laplace) or L2 ``sqrt(2 d)`` (Gaussian).  Adding or removing one record
    (``neighbouring="add_remove"``, the DP nets' relation) moves one count of
    each column by 1: L1 ``d``, L2 ``sqrt(d)``.
    """
    from .mechanisms import GaussianMechanism, LaplaceMechanism

    half = 2.0 if neighbouring == ADD_REMOVE else 1.0
    if gaussian:
        sensitivity = HISTOGRAM_L2_PER_COLUMN / math.sqrt(half) * math.sqrt(n_features)
        return GaussianMechanism(sensitivity, multiplier * sensitivity, neighbouring)
    sensitivity = HISTOGRAM_L1_PER_COLUMN / half * n_features
    return LaplaceMechanism(sensitivity, multiplier * sensitivity, neighbouring)


def calibrate_histogram(
    epsilon,
    delta,
    n_features,
    composition,
    secure_noise=False,
    scale=False,
    releases=2,
    neighbouring=REPLACE_ONE,
):
    """Noise multiplier of the two histogram releases costing ``(epsilon, delta)`` (the core's calibration).

    Laplace noise when ``delta == 0`` (pure DP), Gaussian otherwise.
    ``scale=True``: with the row-scale histogram's release too.
    """
    gaussian = delta > 0

    def events(z):
        return histogram_events(n_features, z, gaussian, scale, releases, neighbouring)

    return calibrate_noise_multiplier(
        events,
        epsilon,
        delta,
        composition if gaussian else "basic",
        neighbouring,
        secure_noise=secure_noise,
    )


def private_histogram_box(
    reduce,
    n_samples_public,
    n_features,
    mechanism,
    quantiles,
    rng,
    ledger,
    return_located=False,
    return_pooled=False,
    scale_mechanism=None,
    extend=False,
    ends="quantiles",
):
    """Private column bounds that degrade gracefully: a log histogram, then a linear one inside it.

    In the style of Google's ``ApproxBounds`` (differential-privacy library):

    1. **Log stage.**  Every column's values are counted in the public
       signed log bins :func:`log_bin_edges` (``[2^k, 2^(k+1))`` and their
       negatives, about 1e-6 to 1e12); the ``d x 121`` counts are released
       in one vector by ``mechanism`` (Laplace or Gaussian; replacing one
       record moves one count of each column down and one up).  A bin
       counts as occupied when its noisy count passes
       :func:`histogram_threshold` (an empty bin passes it with probability
       at most :data:`HISTOGRAM_FAILURE` over all bins).  A column's range
       runs from its lowest to its highest occupied bin.  A column with no
       occupied bin (too few records for the noise) takes the range of the
       **pooled** histogram (the sum over columns: post-processing, whose
       signal grows as ``d`` and noise as ``sqrt(d)``); if the pool has
       none either, the data-free range ``[0, 1]`` (never a bin picked by
       the noise alone).
    2. **Linear stage.**  :data:`REFINE_BINS` equal bins inside each
       column's stage-1 range (values clipped into it), released the same
       way; the ``quantiles`` of the noisy prefix and suffix sums give the
       final ends (:func:`_quantile_ends`), always inside the stage-1 range.

    **Worst case.**  With probability at least ``1 - 2 HISTOGRAM_FAILURE``
    no empty bin is taken as occupied, so every released end lies in a bin
    that holds data of the column (or of the pool): a released end is never
    beyond twice the largest magnitude in the data, whatever ``n`` and
    epsilon (an exponential-mechanism quantile over a wide grid can land
    anywhere on it when ``epsilon n`` is small).  When the noise hides the
    tails the range shrinks (more clipping) instead of exploding; a column
    too small for its own bins takes the pool's range, bounded by the
    largest magnitude of any column (:func:`can_locate_columns` says, from
    public quantities, when that is expected).  The linear stage only
    narrows the stage-1 range, to about the quantiles (within
    ``1 / REFINE_BINS`` of it per end, plus the noise of the sums); with
    ``ends="extreme"`` an end may also reach one log bin beyond it (an
    overflow bin, :func:`overflow_edges`): at most four times the data's
    largest magnitude.

    Parameters
    ----------
    reduce : callable
        ``reduce(fn, *params)`` sums ``fn(chunk, *params)`` over the data.
    n_samples_public : int
        Number of rows (public under replace-one neighbours).
    n_features : int
    mechanism : additive mechanism
        :func:`histogram_mechanism`'s (multiplier from
        :func:`calibrate_histogram`), used for both stages.
    quantiles : (q_low, q_high)
    rng : numpy.random.Generator
    ledger : PrivacyLedger
    return_located : bool, default=False
        Also return which columns were located (by their own bins or the
        pool's) rather than given the data-free ``[0, 1]``.
    return_pooled : bool, default=False
        Also return (last) which columns took the pool's range: a range
        that may be far wider than the column's own values (a column of
        values near 0.01 beside columns in the thousands), which callers
        announce.
    scale_mechanism : additive mechanism or None, default=None
        With it (:func:`scale_mechanism`, planned by ``scale=True`` in
        :func:`histogram_events`), a third release comes first: the
        histogram of every row's largest magnitude ``max_j |x_ij|`` in the
        magnitude log bins (:func:`row_scale_histogram`; one count per row,
        so its sensitivity does not grow with ``d``).  Its highest occupied
        bin gives a scale ``S`` bounding every column's values (with
        probability at least ``1 - HISTOGRAM_FAILURE`` no empty bin is taken
        as occupied, so ``S`` is at most twice the data's largest
        magnitude).  A column with no occupied bin of its own then takes the
        symmetric range ``[-S, S]``, which holds its values whatever their
        sign, instead of the pool's lowest-to-highest range (which can miss
        them: a column of values near 1 beside one of values near 6 gets
        ``[4, 8]``); and the column bins above ``S`` are left out of the
        threshold's union bound (known empty), which lowers it.  Without a
        located ``S`` such a column takes ``[0, 1]``.
    extend : bool, default=False
        Extend a column's own stage-1 range while its noisy count says it
        holds clearly fewer rows than the ``quantiles`` keep inside
        (:func:`_misses_rows`): first to 0 (small magnitudes spread over
        many log bins, none passing the threshold, are the likeliest to be
        missed), then to its union with the pool's range, then, with a
        located row scale, to ``[-S, S]``.  A column of mostly exact zeros
        and values spread over 1 to 16 (pixel or count columns), or of
        values on both sides of 0 of which only one side passes, would
        otherwise get a range orders of magnitude narrower than its values,
        or miss half of them.  A range from the pool is announced (as
        pooled) where it reaches more than two log bins beyond the column's
        own largest magnitude, ``[-S, S]`` always.  Post-processing.
    ends : {"quantiles", "extreme", "range"}, default="quantiles"
        How the released ends are read (post-processing; the events are the
        plan's).  ``"quantiles"``: the bins of ``quantiles`` in the noisy
        prefix and suffix sums of the linear stage (:func:`_quantile_ends`).
        ``"extreme"``: the most extreme rows the noise resolves, extrapolated
        along a log-concave tail from the passing bin's density
        (:func:`_extreme_ends`; ``DPMinMaxScaler(quantiles="auto")``), with
        an overflow bin each side of the linear stage
        (:func:`overflow_histogram`, :func:`overflow_edges`: an end may
        reach one log bin beyond the stage-1 range, or towards 0; an end
        inside the zero bin is 0), ``quantiles`` then only
        setting the extension's test.  ``"range"``: no linear stage (one
        release, planned so by the caller); the stage-1 range is returned.
        Every other caller keeps the default, and its releases.

    Returns
    -------
    low, high : ndarray of shape (n_features,)
        ``low < high`` in every column.
    located : ndarray of bool, shape (n_features,)
        Only with ``return_located`` (post-processing of the released counts).
    pooled : ndarray of bool, shape (n_features,)
        Only with ``return_pooled`` (post-processing of the released counts).
    """
    lower_edges, upper_edges = log_bin_edges()
    scale = None
    if scale_mechanism is not None:
        scale_counts = reduce(row_scale_histogram)
        noisy_scale = scale_mechanism.release(scale_counts, rng, ledger)
        scale = _scale_from_counts(noisy_scale, histogram_threshold(scale_mechanism, 2 * noisy_scale.size))
    counts = reduce(log_histogram)
    noisy = mechanism.release(counts.ravel(), rng, ledger).reshape(counts.shape)
    # Everything below is post-processing of the released counts (and the public n).
    candidates = np.ones(counts.shape[1], dtype=bool)
    if scale is not None:
        # Bins beyond the released scale hold no row's values (up to the scale's own
        # failure chance): out of the union bound, never taken as occupied.
        candidates = np.maximum(np.abs(lower_edges), np.abs(upper_edges)) <= scale
        noisy = np.where(candidates[None, :], noisy, -np.inf)
    tau = histogram_threshold(mechanism, n_features * int(candidates.sum()))
    pooled = noisy.sum(axis=0)
    # The pool's noise has sqrt(d) times one count's std.
    pool_first, pool_last = _occupied_ends(pooled, tau * math.sqrt(n_features))
    low, high = np.empty(n_features), np.empty(n_features)
    located = np.ones(n_features, dtype=bool)
    pooled = np.zeros(n_features, dtype=bool)
    for j in range(n_features):
        first, last = _occupied_ends(noisy[j], tau)
        if extend and first >= 0:
            args = (float(mechanism.std), quantiles, n_samples_public)
            missing = _misses_rows(noisy[j], first, last, *args)
            if missing:
                # First towards 0: values of small magnitude spread over many log bins,
                # none passing the threshold, are the likeliest to be missed (a bin of
                # large magnitude is wide and holds many values).
                zero = LOG2_RANGE[1] - LOG2_RANGE[0] + 1  # the |x| < 2^lo bin
                first, last = min(first, zero), max(last, zero)
                missing = _misses_rows(noisy[j], first, last, *args)
            if missing and pool_first >= 0:
                wider = min(first, pool_first), max(last, pool_last)
                # Announced as the pool's where the pool reaches more than two log bins
                # beyond the column's own magnitude (possibly orders of magnitude wider).
                own = max(abs(lower_edges[first]), abs(upper_edges[last]))
                reach = max(abs(lower_edges[wider[0]]), abs(upper_edges[wider[1]]))
                pooled[j] = reach > 4.0 * own
                first, last = wider
                missing = _misses_rows(noisy[j], first, last, *args)
            if missing and scale is not None:
                # Still short of rows (values on one side of 0 that no bin locates):
                # the row scale's [-S, S] holds them all; announced.
                low[j], high[j], pooled[j] = -scale, scale, True
                continue
        if first < 0 and scale is not None:
            pooled[j] = True
            if pool_first >= 0:
                # The pool's range reaches 0: a column no bin of its own locates is
                # spread over several bins, towards 0 (its spread is not small
                # against its magnitude), and within [-S, S].
                low[j] = max(min(lower_edges[pool_first], 0.0), -scale)
                high[j] = min(max(upper_edges[pool_last], 0.0), scale)
            else:
                # Every value of the column lies in [-S, S], whatever its sign.
                low[j], high[j] = -scale, scale
            continue
        if first < 0:
            first, last = pool_first, pool_last
            pooled[j] = first >= 0
        if first < 0:
            # Nothing located, not even in the pool: the data-free range [0, 1]
            # (a min-max map that does nothing), never a bin chosen by noise.
            low[j], high[j], located[j] = 0.0, 1.0, False
        else:
            low[j], high[j] = lower_edges[first], upper_edges[last]
    # ends="range": one release (planned so), the stage-1 range is the answer.
    if ends == "extreme":
        # The linear bins with an overflow bin each side (the stage-1 counts say how far
        # an end may be extrapolated beyond the range: overflow_edges).
        # Fewer linear bins where the noise is too large for REFINE_BINS (refine_bins: n, plan).
        log_noisy, n_bins = noisy, refine_bins(n_samples_public, mechanism)
        counts = reduce(overflow_histogram, low, high, n_bins)
        noisy = mechanism.release(counts.ravel(), rng, ledger).reshape(counts.shape)
        step = extreme_threshold(mechanism, n_bins + 2)
        wall = wall_threshold(mechanism, n_bins, n_features)
        zero = 2.0 ** LOG2_RANGE[0]
        for j in np.flatnonzero(located):
            edges = overflow_edges(low[j], high[j], log_noisy[j], noisy[j][[0, -1]], mechanism, n_bins)
            low[j], high[j] = _extreme_ends(noisy[j], step, edges, wall)
            # The log grid does not resolve magnitudes below 2^lo (the zero bin): an end
            # inside it, the other end outside, is released as 0 (moved by at most 2^lo).
            if -zero <= low[j] <= zero < high[j]:
                low[j] = 0.0
            elif low[j] < -zero <= high[j] <= zero:
                high[j] = 0.0
    elif ends != "range":
        counts = reduce(linear_histogram, low, high, REFINE_BINS)
        noisy = mechanism.release(counts.ravel(), rng, ledger).reshape(counts.shape)
        # The ends inside the stage-1 range: an error here stays within that range.
        width = (high - low) / REFINE_BINS
        for j in np.flatnonzero(located):
            first, last = _quantile_ends(noisy[j], quantiles, n_samples_public)
            low[j], high[j] = low[j] + first * width[j], low[j] + (last + 1) * width[j]
    return (low, high) + ((located,) if return_located else ()) + ((pooled,) if return_pooled else ())


#: Shares of ``(epsilon, delta)`` a private histogram box may take when the
#: share is chosen a priori (:func:`histogram_box_share`): the smallest one
#: whose noise lets a column be located, else the last.
BOX_SHARES = (0.1, 0.2, 0.3, 0.5)


@dataclass(frozen=True)
class HistogramBounds:
    """The public plan of a :func:`private_histogram_box` release: its events and mechanism.

    Parameters
    ----------
    n_features : int
    multiplier : float
        Noise multiplier of the two histogram releases.
    gaussian : bool
        Gaussian noise (else Laplace, for ``delta == 0``).
    share : float
        Share of the fit's ``(epsilon, delta)`` the releases were calibrated to.
    """

    n_features: int
    multiplier: float
    gaussian: bool
    share: float
    scale: bool = False
    neighbouring: str = REPLACE_ONE

    def events(self):
        """The histogram releases' events (public: from the plan alone)."""
        return histogram_events(
            self.n_features, self.multiplier, self.gaussian, self.scale, neighbouring=self.neighbouring
        )

    def mechanism(self, n_features=None):
        """The additive mechanism of each histogram release (:func:`histogram_mechanism`).

        ``n_features``: the data's, for a plan made before the data's shape
        was read (its events do not depend on it; the mechanism's noise std
        does).
        """
        d = self.n_features if n_features is None else int(n_features)
        return histogram_mechanism(d, self.multiplier, self.gaussian, self.neighbouring)

    def scale_mechanism(self):
        """The row-scale histogram's mechanism (:func:`scale_mechanism`), or None without ``scale``."""
        return scale_mechanism(self.multiplier, self.gaussian, self.n_features) if self.scale else None


def calibrate_histogram_bounds(
    epsilon, delta, n_features, share, composition, secure_noise=False, scale=False, neighbouring=REPLACE_ONE
):
    """The :class:`HistogramBounds` plan costing ``(share * epsilon, share * delta)``."""
    z = calibrate_histogram(
        share * epsilon,
        share * delta,
        n_features,
        composition,
        secure_noise,
        scale,
        neighbouring=neighbouring,
    )
    return HistogramBounds(int(n_features), float(z), delta > 0, float(share), bool(scale), neighbouring)


def histogram_box_share(n_samples, epsilon, delta, n_features, composition, secure_noise=False):
    """The smallest share in :data:`BOX_SHARES` at which a column can be located (public quantities).

    A column whose ``n`` values fill at most two log bins is located when
    its counts pass the noisy-count threshold (:func:`can_locate_columns`);
    the share needed for that depends on ``n``, ``d``, epsilon and delta
    only (``n`` is public under replace-one neighbours).  When even the
    largest share cannot, the largest is taken: locating the data is then
    the dominant error, and a box that falls back to the pool's range or
    to ``[0, 1]`` is still bounded by the data's largest magnitude.
    """
    for share in BOX_SHARES:
        plan = calibrate_histogram_bounds(epsilon, delta, n_features, share, composition, secure_noise)
        if can_locate_columns(n_samples, plan.mechanism(), n_features):
            return share
    return BOX_SHARES[-1]


def announced_histogram_box(
    reduce,
    n_samples,
    n_features,
    mechanism,
    quantiles,
    rng,
    ledger,
    *,
    epsilon,
    advice,
    scale_mechanism=None,
    extend=False,
    ends="quantiles",
):
    """:func:`private_histogram_box` with ``(low, high, located, pooled)``, unlocated columns announced.

    What every estimator with a private box does: release the box, then say
    (:func:`warn_unlocated_columns`, post-processing naming no data value)
    which columns took the pool's range, the row scale's or the data-free
    ``[0, 1]``, with ``advice`` on what to declare.
    """
    low, high, located, pooled = private_histogram_box(
        reduce,
        n_samples,
        n_features,
        mechanism,
        quantiles,
        rng,
        ledger,
        return_located=True,
        return_pooled=True,
        scale_mechanism=scale_mechanism,
        extend=extend,
        ends=ends,
    )
    warn_unlocated_columns(located, pooled, n_samples, epsilon, advice)
    return low, high, located, pooled


def warn_unlocated_columns(located, pooled, n_samples, epsilon, advice):
    """Warn when a histogram box gave some column the pool's range or the data-free ``[0, 1]``.

    A function of the released counts (post-processing) and public sizes,
    naming no data value: such a column's range may be orders of magnitude
    wider than its values (the pool's) or miss them (``[0, 1]``), so the
    caller says what to declare (``advice``, the message's last sentence).
    """
    located, pooled = np.asarray(located, dtype=bool), np.asarray(pooled, dtype=bool)
    n_none, n_pool = int((~located).sum()), int((located & pooled).sum())
    if not (n_none or n_pool):
        return
    from .._user_warnings import _user_stacklevel

    parts = []
    if n_pool:
        parts.append(
            f"{n_pool} took the range pooled over all columns (possibly orders of magnitude wider "
            "than their own values)"
        )
    if n_none:
        parts.append(f"{n_none} took the data-free range [0, 1]")
    warnings.warn(
        f"The private histogram could not locate {n_pool + n_none} of {located.size} columns by their "
        f"own counts with n_samples={int(n_samples)} at epsilon={float(epsilon):.3g}: "
        + "; ".join(parts)
        + ". "
        + advice,
        UserWarning,
        stacklevel=_user_stacklevel(),
    )
