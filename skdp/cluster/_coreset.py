"""A private coreset for k-means: noisy leaves of a locality-sensitive-hash prefix tree.

The design of Google's ``learning/clustering`` library (Chang, Ghazi, Kumar &
Manurangsi, "Locally private k-means in one round", ICML 2021, and the
library's README), written anew for skdp's core and replace-one neighbours:

1. **SimHash.**  ``D`` data-independent random hyperplanes through the origin
   (Charikar 2002) give every row ``z`` (already mapped, centred and clipped
   to the ball of radius ``C`` as in DP Lloyd) a ``D``-bit code,
   ``bit_j = [<z, g_j> < 0]`` with ``g_j ~ N(0, I)``.  Rows whose codes share
   a long prefix lie at a small angle from each other.
2. **Prefix tree, level by level.**  The root (all ``n`` rows; ``n`` is
   public under replace-one neighbours) branches.  At level ``l = 1..D`` the
   counts of the two children of every branching node are released with
   noise (one release per level); a child is kept when its noisy count is at
   least ``min_node`` and branches when it is at least ``min_branch = 1.5
   min_node`` (Google: ``3 min_node``; their ``min_num_points_in_node`` and
   ``min_num_points_in_branching_node``).  Children that do not branch are
   the leaves from a lower threshold, ``min_node`` less two stds of the count
   noise (:func:`leaf_threshold`; a deviation from Google's tree, whose
   dropped children's rows fall in no leaf), and a branching node none of
   whose children is a leaf or branches is a leaf itself.  Which nodes exist
   is a function of released counts only.
3. **Leaves.**  One release of the sums of the rows of every leaf; a
   coreset point is ``S~_leaf / n~_leaf`` (projected onto the ball) with
   weight ``n~_leaf``, the leaf's noisy count from step 2.
4. **k-means on the coreset.**  Weighted k-means++ and Lloyd (scikit-learn's
   ``KMeans`` with ``sample_weight``) on the released coreset: post-processing.

Sensitivities (replace-one; rows of L2 norm at most ``C``)
-----------------------------------------------------------
Given the released counts of the levels above, the nodes of level ``l`` are
fixed and every row falls in at most one of them (rows of nodes that did not
branch fall in none).  Replacing one row moves at most one unit between two
counts of the level: the level's vector of counts has L2 sensitivity
``sqrt(2)`` and L1 ``2`` (:func:`skdp.privacy.mechanisms.selection.histogram_sensitivity`).
The leaves are disjoint, so the leaf sums change by ``x' - x`` (same leaf) or
lose ``x`` and gain ``x'`` (two leaves): L2 ``2 C``, L1 ``2 sqrt(d) C``
(:func:`skdp.privacy.sensitivity.row_sum_sensitivity`).  Google's library
(add/remove) uses ``1`` and ``C``.

Privacy plan
------------
``D`` count releases at noise multiplier ``w z`` and one sum release at
``z`` (:func:`coreset_events`), ``z`` the smallest multiplier whose
composition meets ``(epsilon, delta)``
(:func:`skdp.privacy.centring.calibrate_after_bounds`, which also puts
``data_norm="auto"``'s releases first).  ``D = 20`` and ``w = 20`` are
Google's defaults (``max_depth = 20``; the counts' Laplace scale is
``laplace_param_multiplier = 20`` times the sums' Gaussian noise
multiplier): under zero-concentrated DP the counts then cost ``D / w^2 = 5%``
of the budget and the one sum release the rest.  Every level is released
even when no node branches (an empty release), so the ledger equals the
plan.  ``min_node`` is fixed a priori from public quantities
(:func:`tree_thresholds`): the smallest leaf whose noisy mean is off by at
most a tenth of ``C`` (Google's rule), capped at ``n / (2 k)`` so that every
cluster can have a leaf.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import sparse

from .._chunks import check_chunk
from ..privacy import REPLACE_ONE, GaussianEvent, LaplaceEvent
from ..privacy.centring import calibrate_after_bounds
from ._coreset_kmeans import weighted_kmeans_fit
from ._lloyd import project_to_ball, relative_centre_noise, split_largest
from ._rows import chunk_features

#: Depth ``D`` of the prefix tree (bits of the SimHash code); Google's ``max_depth``.
CORESET_MAX_DEPTH = 20
#: Noise multiplier of the level counts over that of the leaf sums (Google's
#: ``laplace_param_multiplier``): the counts take ``D / w^2 = 5%`` of a zCDP budget.
CORESET_COUNT_WEIGHT = 20.0
#: Largest noise on a leaf's mean, over ``C``, that sets the smallest kept node (Google's 0.1).
CORESET_LEAF_NOISE_RATIO = 0.1
#: A node branches from this many times the smallest kept node (Google: 3).  At the
#: ``n / (2 k)`` cap, 1.5 makes a node of one average cluster (``n / k`` rows) branch, so a
#: node holding one cluster and fragments of others is still split (measured on
#: ``benchmarks/clustering_google.py``, k = 64: median 0.006 against 0.019 with 3).
CORESET_BRANCH_FACTOR = 1.5
#: A child that does not branch is a leaf from ``min_node`` minus this many count-noise stds
#: (:func:`leaf_threshold`).
CORESET_LEAF_SIGMAS = 2.0
#: ... and from at least this many: an empty child's noisy count passes it with probability 0.0013.
CORESET_EMPTY_SIGMAS = 3.0

#: ``algorithm="auto"`` picks the coreset from this many clusters (see :func:`choose_algorithm`).
AUTO_CORESET_MIN_CLUSTERS = 16
#: ... and from this dimension (random hyperplanes through the origin separate directions only).
AUTO_CORESET_MIN_DIM = 8

ALGORITHMS = ("lloyd", "coreset", "auto")


def choose_algorithm(n_samples, n_clusters, dim, epsilon, delta):
    """``"coreset"`` or ``"lloyd"`` for ``algorithm="auto"``, from public quantities only.

    DP Lloyd pays for ``2 T`` releases whose noise on a centre grows with the
    number of clusters (a cluster has ``n / k`` rows) and starts from a
    random partition, which with many clusters leaves many centres far from
    every cluster.  The coreset spends most of its budget on one release of
    the leaf sums and seeds k-means++ on released points, so it wins when
    ``k`` is large; it loses in low dimension, where ``D`` hyperplanes
    through the origin only cut the space into cones (rows along the same
    ray from the centre are never separated).  Hence: the coreset when
    ``n_clusters >= AUTO_CORESET_MIN_CLUSTERS`` and ``dim >=
    AUTO_CORESET_MIN_DIM``, DP Lloyd otherwise.  ``n_samples`` is public under
    replace-one neighbours; ``epsilon`` and ``delta`` are accepted so that
    the rule may use them (it does not yet).  Reads no data and costs no
    privacy.
    """
    del n_samples, epsilon, delta  # public, unused by the current rule
    if n_clusters >= AUTO_CORESET_MIN_CLUSTERS and dim >= AUTO_CORESET_MIN_DIM:
        return "coreset"
    return "lloyd"


def coreset_events(noise_multiplier, max_depth, mechanism="gaussian", count_weight=CORESET_COUNT_WEIGHT):
    """Privacy events of a coreset fit at ``noise_multiplier`` (the calibration plan).

    ``max_depth`` level-count releases at ``count_weight * noise_multiplier``
    and one release of the leaf sums at ``noise_multiplier`` (module
    docstring); replace-one neighbours.
    """
    event_class = {"gaussian": GaussianEvent, "laplace": LaplaceEvent}[mechanism]
    return [
        event_class(
            count=max_depth, neighbouring=REPLACE_ONE, noise_multiplier=noise_multiplier * count_weight
        ),
        event_class(count=1, neighbouring=REPLACE_ONE, noise_multiplier=noise_multiplier),
    ]


def coreset_noise_multiplier(
    max_depth,
    mechanism,
    count_weight,
    epsilon,
    delta,
    composition,
    *,
    secure_noise=False,
    bounds=None,
):
    """Smallest noise multiplier whose :func:`coreset_events` (after ``bounds``' events) cost ``(epsilon, delta)``."""
    return calibrate_after_bounds(
        functools.partial(
            coreset_events, max_depth=max_depth, mechanism=mechanism, count_weight=count_weight
        ),
        bounds,
        epsilon,
        delta,
        composition,
        neighbouring=REPLACE_ONE,
        secure_noise=secure_noise,
    )


#: Share of the budget (under zCDP for Gaussian noise, basic composition for
#: Laplace) that DP Lloyd's private start spends on its coreset
#: (:func:`start_noise_ratio`).  Fixed a priori: with DPKMeans' ``T = 5``
#: iterations it is what the random partition's release (one iteration of
#: five) cost, so the iterations keep about their noise.
CORESET_START_SHARE = 0.2


def start_noise_ratio(
    n_iter,
    lloyd_count_weight,
    mechanism="gaussian",
    share=CORESET_START_SHARE,
    max_depth=CORESET_MAX_DEPTH,
    count_weight=CORESET_COUNT_WEIGHT,
):
    """Noise multiplier of the start's coreset over that of DP Lloyd's sums (public quantities).

    The start's releases (:func:`coreset_events` at multiplier ``a z``)
    cost ``share`` of those of the whole fit when ``z`` is the iterations'
    multiplier.  A Gaussian release at multiplier ``z`` costs ``1 / (2 z^2)``
    in zCDP, a Laplace one ``1 / z`` in epsilon (``p = 2`` or ``1``): the
    coreset costs ``(D / w^p + 1) / (a z)^p`` and the ``T`` iterations
    ``T (1 / w_L^p + 1) / z^p`` (``w_L`` the sizes' weight), so
    ``a^p = (1 - share) (D / w^p + 1) / (share T (1 / w_L^p + 1))``.
    The accountant then composes the whole plan exactly; the share is only
    how the budget is divided.
    """
    p = {"gaussian": 2.0, "laplace": 1.0}[mechanism]
    coreset_cost = max_depth / count_weight**p + 1.0
    lloyd_cost = n_iter * (1.0 / lloyd_count_weight**p + 1.0)
    return ((1.0 - share) * coreset_cost / (share * lloyd_cost)) ** (1.0 / p)


#: Leaves per cluster of average size (``n / k`` rows) that the start's coreset must afford.
CORESET_START_LEAVES = 4


def start_resolves(noise_multiplier, mechanism, n_samples, n_clusters, dim):
    """Whether a coreset at ``noise_multiplier`` can give every average cluster several leaves.

    The smallest leaf whose noisy mean is within a tenth of ``C``
    (:func:`tree_thresholds` before its cap) must hold at most ``n / (L k)``
    rows, ``L =`` :data:`CORESET_START_LEAVES`: an average cluster then
    splits into ``L`` leaves whose means are accurate, and k-means++ on the
    leaves seeds the clusters (smaller ones included) instead of the noise.
    Where it cannot (small ``n * epsilon``), the leaves are a few coarse
    cones of the data and a start from them is worse than the random
    partition.  Public quantities only.
    """
    low_noise = relative_centre_noise(noise_multiplier, mechanism, 1, 1, dim) / CORESET_LEAF_NOISE_RATIO
    return low_noise <= n_samples / (CORESET_START_LEAVES * n_clusters)


def start_events(noise_multiplier, ratio, mechanism="gaussian"):
    """The private start's events at the iterations' ``noise_multiplier``: the coreset's at ``ratio`` times it."""
    return coreset_events(noise_multiplier * ratio, CORESET_MAX_DEPTH, mechanism)


def tree_thresholds(noise_multiplier, mechanism, n_samples, n_clusters, dim):
    """``(min_node, min_branch)``: smallest kept and smallest branching noisy count.

    A leaf of ``m`` rows has a noisy mean off by about ``r / m`` times ``C``,
    ``r`` the norm of the noise on a sum over ``C``
    (:func:`~skdp.cluster._lloyd.relative_centre_noise` with one row and one
    cluster); ``m >= r / 0.1`` keeps it within a tenth of ``C`` (Google's
    default tree parameters).  Capped at ``n / (2 k)`` so that each of ``k``
    clusters of average size can still own a leaf, at least 1; a node
    branches from :data:`CORESET_BRANCH_FACTOR` times that.  Public quantities only.
    """
    low_noise = relative_centre_noise(noise_multiplier, mechanism, 1, 1, dim) / CORESET_LEAF_NOISE_RATIO
    min_node = max(1, min(int(math.ceil(low_noise)), n_samples // (2 * n_clusters)))
    return min_node, max(min_node, int(math.ceil(CORESET_BRANCH_FACTOR * min_node)))


def simhash_planes(dim, max_depth, rng):
    """``max_depth`` data-independent random hyperplane normals ``g_j ~ N(0, I_dim)`` (Charikar 2002)."""
    return rng.standard_normal((max_depth, dim))


def hash_codes(Z, planes):
    """SimHash code of every row: bit ``j`` (most significant first) is ``<z, g_j> < 0``.

    The bits are weighted by powers of two in floating point (one BLAS
    product; every code is below ``2**D <= 2**53``, so the sum is exact).
    """
    bits = (Z @ planes.T) < 0
    weights = np.ldexp(1.0, np.arange(planes.shape[0] - 1, -1, -1))
    return (bits @ weights).astype(np.int64)


def code_histogram(Z, planes):
    """Exact number of rows with each ``D``-bit code (shape ``(2**D,)``, int64; private).

    The dense form that chunk results are summed in; :func:`code_counts` keeps
    only the codes that occur.
    """
    return np.bincount(hash_codes(Z, planes), minlength=1 << planes.shape[0])


def _occurring(histogram):
    codes = np.flatnonzero(histogram)
    return codes, histogram[codes]


def code_counts(rows, planes):
    """The codes that occur, sorted, with their numbers of rows (private); and the rows' codes.

    Returns ``(codes, counts, row_codes)``; ``row_codes`` (the code of every
    row, for :func:`leaf_sums_of_codes`) is None for chunked rows, whose
    dense histograms are summed chunk by chunk.  In memory, a sort of the
    ``n`` codes replaces the ``2**D`` histogram when ``n`` is small against
    it (the same numbers).
    """
    if rows.chunked:
        return (*_occurring(reduce_rows(rows, code_histogram, planes)), None)
    row_codes = hash_codes(rows.Z, planes)
    if 8 * row_codes.size >= 1 << planes.shape[0]:
        codes, counts = _occurring(np.bincount(row_codes, minlength=1 << planes.shape[0]))
    else:
        codes, counts = np.unique(row_codes, return_counts=True)
    return codes, counts, row_codes


#: The two children of a prefix ``p``: ``2 p + b``.
_BITS = np.array([0, 1], dtype=np.int64)


class PrefixCounts:
    """Exact row counts of code prefixes, read off the sorted occurring codes.

    The prefix ``p`` of length ``l`` holds the codes in ``[p 2**(D-l), (p+1)
    2**(D-l))``: two binary searches in the sorted codes and a difference of
    cumulative counts, so a level costs ``O(m log u)`` for its ``m`` nodes and
    ``u`` occurring codes instead of a pass over ``2**D`` cells (integer
    counts: the same numbers).
    """

    def __init__(self, codes, counts, max_depth):
        self.codes = np.asarray(codes, dtype=np.int64)
        self.cumulative = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        self.max_depth = max_depth

    def __call__(self, level, prefixes):
        """Counts (float64) of the prefixes of length ``level``."""
        shift = self.max_depth - level
        lo = np.searchsorted(self.codes, prefixes << shift)
        hi = np.searchsorted(self.codes, (prefixes + 1) << shift)
        return (self.cumulative[hi] - self.cumulative[lo]).astype(float)


def leaf_threshold(min_node, count_std):
    """Smallest noisy count of a child that does not branch and is a leaf (public quantities only).

    ``min_node`` is meant for true counts, but it is applied to noisy ones: a
    child holding ``min_node`` rows is dropped half the time, and when its
    sibling is kept its rows then fall in no leaf (a cluster cut by one
    hyperplane into two such halves is lost).  A child that does not branch
    is therefore a leaf from ``min_node - 2 sigma`` (``sigma`` the level
    counts' noise std), so one at ``min_node`` is a leaf with probability
    0.977.  Never below ``min_node / 2``, where its noisy mean would be off by
    more than twice the tenth of ``C`` the kept nodes are held to, nor below
    ``3 sigma``, so that an empty child (a sibling holding no rows) is a leaf
    of pure noise with probability at most 0.0013; never above ``min_node``.
    """
    floor = max(min_node / 2, CORESET_EMPTY_SIGMAS * count_std)
    return min(int(min_node), max(1, int(math.ceil(max(floor, min_node - CORESET_LEAF_SIGMAS * count_std)))))


def grow_tree(prefix_counts, max_depth, n_samples, count_mechanism, min_node, min_branch, rng, ledger):
    """Grow the prefix tree, releasing one vector of counts per level.

    ``prefix_counts(level, prefixes)`` gives the exact counts (a
    :class:`PrefixCounts`).  Each level is handled as arrays: the children
    of the branching nodes, their noisy counts, and per node the three
    possible leaves in order (the node itself when both children are
    dropped, then each kept child that does not branch).

    Returns
    -------
    leaves : ndarray of shape (n_leaves, 2)
        The leaves ``(level, prefix)``; leaf ``(l, p)`` holds the rows whose code's top ``l`` bits are ``p``.
    leaf_counts : ndarray of shape (n_leaves,)
        Their noisy counts (released; the root's is the public ``n``).
    """
    min_leaf = leaf_threshold(min_node, count_mechanism.std)
    # Prefixes and released counts of the branching nodes of the current level.
    if n_samples >= min_branch:
        prefixes, counts = np.zeros(1, dtype=np.int64), np.array([float(n_samples)])
        leaves, leaf_counts = [], []
    else:
        prefixes, counts = np.empty(0, dtype=np.int64), np.empty(0)
        leaves, leaf_counts = [np.zeros((1, 2), dtype=np.int64)], [np.array([float(n_samples)])]
    for level in range(1, max_depth + 1):
        children = (2 * prefixes[:, None] + _BITS).ravel()
        # Every level is released, empty when nothing branches, so the ledger equals the plan.
        noisy = np.asarray(count_mechanism.release(prefix_counts(level, children), rng, ledger), dtype=float)
        if not children.size:
            continue
        kept = noisy >= min_node
        grows = kept & (noisy >= min_branch) if level < max_depth else np.zeros_like(kept)
        # A child too small to branch is a leaf from min_leaf (below min_node: its
        # rows would otherwise fall in no leaf while its sibling is kept).
        leafy = noisy >= min_leaf
        child_leaf = leafy & ~grows
        node_leaf = ~(leafy[0::2] | leafy[1::2])
        if node_leaf.any() or child_leaf.any():
            # Per node, in order: itself (both children dropped), child 0, child 1.
            m = len(prefixes)
            is_leaf = np.empty((m, 3), dtype=bool)
            is_leaf[:, 0], is_leaf[:, 1:] = node_leaf, child_leaf.reshape(m, 2)
            slot = np.empty((m, 3, 2), dtype=np.int64)
            slot[:, 0, 0], slot[:, 1:, 0] = level - 1, level
            slot[:, 0, 1], slot[:, 1:, 1] = prefixes, children.reshape(m, 2)
            slot_count = np.empty((m, 3))
            slot_count[:, 0], slot_count[:, 1:] = counts, noisy.reshape(m, 2)
            leaves.append(slot[is_leaf])
            leaf_counts.append(slot_count[is_leaf])
        prefixes, counts = children[grows], noisy[grows]
    if not leaves:
        return np.empty((0, 2), dtype=np.int64), np.empty(0)
    return np.concatenate(leaves), np.concatenate(leaf_counts)


def leaf_intervals(leaves, max_depth):
    """The leaves as code intervals: ``(starts, ends, index)`` sorted by start.

    Leaf ``index[i]`` holds the codes in ``[starts[i], ends[i])``; the leaves
    are disjoint prefixes, so the intervals do not overlap.
    """
    leaves = np.asarray(leaves, dtype=np.int64).reshape(-1, 2)
    shift = max_depth - leaves[:, 0]
    starts = leaves[:, 1] << shift
    order = np.argsort(starts, kind="stable")
    return starts[order], ((leaves[:, 1] + 1) << shift)[order], order


def leaf_of_codes(codes, intervals):
    """Index of the leaf of every code (``-1``: in no leaf), by binary search in the intervals."""
    starts, ends, index = intervals
    if not starts.size:
        return np.full(np.shape(codes), -1, dtype=np.int64)
    at = np.maximum(np.searchsorted(starts, codes, side="right") - 1, 0)
    return np.where((codes >= starts[at]) & (codes < ends[at]), index[at], -1)


def leaf_sums_of_codes(Z, codes, intervals, n_leaves):
    """Exact sums of the rows of every leaf, from the rows' codes (shape ``(n_leaves, dim)``; private)."""
    leaves = leaf_of_codes(codes, intervals)
    keep = leaves >= 0
    n = int(keep.sum())
    onehot = sparse.csr_matrix((np.ones(n), leaves[keep], np.arange(n + 1)), shape=(n, n_leaves))
    return np.asarray(onehot.T @ Z[keep])


def leaf_sums(Z, planes, intervals, n_leaves):
    """Exact sums of the rows of every leaf (shape ``(n_leaves, dim)``; private).

    ``intervals`` are the leaves' code intervals (:func:`leaf_intervals`);
    rows in no leaf are left out.
    """
    return leaf_sums_of_codes(Z, hash_codes(Z, planes), intervals, n_leaves)


def _chunk_apply(chunk, fn, feature_map, bound, *params):
    """``fn`` on the mapped, clipped rows of a chunk (module level: picklable for Dask)."""
    return fn(chunk_features(check_chunk(chunk), feature_map, bound), *params)


def reduce_rows(rows, fn, *params):
    """``fn(Z, *params)`` on all training rows: directly in memory, summed chunk by chunk otherwise."""
    if rows.chunked:
        return rows.data.map_reduce(_chunk_apply, fn, rows.feature_map, rows.bound, *params)
    return fn(rows.Z, *params)


def weighted_kmeans(points, weights, n_clusters, bound, rng, project=None, n_init=3):
    """k centres of the weighted coreset (k-means++ and Lloyd; post-processing of releases).

    scikit-learn's ``KMeans(n_init=n_init)`` with the coreset's weights
    (:func:`~skdp.cluster._coreset_kmeans.weighted_kmeans_fit`): 3 starts
    where the coreset's k-means is the answer (``algorithm="coreset"``), 1
    (scikit-learn's own ``n_init="auto"`` for k-means++) where it only seeds
    DP Lloyd (the private start), whose iterations on the rows follow.

    With fewer coreset points than clusters, the missing centres are
    re-seeded next to the heaviest ones
    (:func:`~skdp.cluster._lloyd.split_largest`).

    Returns
    -------
    centres : ndarray of shape (n_clusters, dim)
    cluster_weights : ndarray of shape (n_clusters,)
        Total coreset weight of each centre (0 for re-seeded ones).
    n_reseeded : int
    n_iter : int
        Lloyd iterations of the k-means on the coreset (post-processing).
    """
    k = min(n_clusters, len(points))
    seed = int(rng.integers(2**31 - 1))
    # scikit-learn's KMeans(n_clusters=k, n_init=3, random_state=seed) with
    # sample_weight, without its per-call overhead (the same result, bit for bit).
    centres, labels, n_iter = weighted_kmeans_fit(points, weights, k, seed, n_init=n_init)
    cluster_weights = np.bincount(labels, weights=weights, minlength=k)
    centres = project_to_ball(centres, bound) if project is None else project(centres)
    n_reseeded = n_clusters - k
    if n_reseeded:
        extra = split_largest(
            np.arange(k, n_clusters),
            np.vstack([centres, np.zeros((n_reseeded, centres.shape[1]))]),
            np.concatenate([cluster_weights, np.zeros(n_reseeded)]),
            bound,
            rng,
        )
        centres = np.vstack([centres, extra])
        cluster_weights = np.concatenate([cluster_weights, np.zeros(n_reseeded)])
    return centres, cluster_weights, n_reseeded, n_iter


def private_coreset(
    rows, bound, count_mechanism, sum_mechanism, max_depth, thresholds, rng, ledger, project=None
):
    """The released coreset of the (mapped, clipped) ``rows``: points, weights.

    Two passes over the rows (the codes' counts, then the leaf sums; in
    memory the codes of the first are kept for the second), ``max_depth``
    releases of level counts and one of the leaf sums, all recorded on
    ``ledger`` by their mechanisms.  The tree is grown on the codes that
    occur (:class:`PrefixCounts`), never on ``2**D`` cells.
    """
    planes = simhash_planes(rows.n_features, max_depth, rng)
    codes, code_rows, row_codes = code_counts(rows, planes)
    min_node, min_branch = thresholds
    leaves, counts = grow_tree(
        PrefixCounts(codes, code_rows, max_depth),
        max_depth,
        rows.n_samples,
        count_mechanism,
        min_node,
        min_branch,
        rng,
        ledger,
    )
    del codes, code_rows
    intervals = leaf_intervals(leaves, max_depth)
    if row_codes is None:
        sums = reduce_rows(rows, leaf_sums, planes, intervals, len(leaves))
    else:
        # In memory: the codes of the first pass, not hashed again.
        sums = leaf_sums_of_codes(rows.Z, row_codes, intervals, len(leaves))
    noisy_sums = sum_mechanism.release(sums, rng, ledger)
    points = noisy_sums / np.maximum(counts, 1.0)[:, None]
    points = project_to_ball(points, bound) if project is None else project(points)
    return points, counts
