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
   ``min_num_points_in_branching_node``).  Kept nodes that do not branch are
   the leaves (a branching node whose two children are both dropped is a
   leaf too).  Which nodes exist is a function of released counts only.
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
    """SimHash code of every row: bit ``j`` (most significant first) is ``<z, g_j> < 0``."""
    bits = (Z @ planes.T) < 0
    weights = np.left_shift(np.int64(1), np.arange(planes.shape[0] - 1, -1, -1, dtype=np.int64))
    return bits.astype(np.int64) @ weights


def code_histogram(Z, planes):
    """Exact number of rows with each ``D``-bit code (shape ``(2**D,)``; private)."""
    return np.bincount(hash_codes(Z, planes), minlength=1 << planes.shape[0]).astype(float)


def leaf_sums(Z, planes, leaf_of_code, n_leaves):
    """Exact sums of the rows of every leaf (shape ``(n_leaves, dim)``; private).

    ``leaf_of_code`` maps a code to its leaf, ``-1`` for rows in no leaf.
    """
    leaves = leaf_of_code[hash_codes(Z, planes)]
    keep = leaves >= 0
    n = int(keep.sum())
    onehot = sparse.csr_matrix((np.ones(n), leaves[keep], np.arange(n + 1)), shape=(n, n_leaves))
    return np.asarray(onehot.T @ Z[keep])


def _chunk_apply(chunk, fn, feature_map, bound, *params):
    """``fn`` on the mapped, clipped rows of a chunk (module level: picklable for Dask)."""
    return fn(chunk_features(check_chunk(chunk), feature_map, bound), *params)


def reduce_rows(rows, fn, *params):
    """``fn(Z, *params)`` on all training rows: directly in memory, summed chunk by chunk otherwise."""
    if rows.chunked:
        return rows.data.map_reduce(_chunk_apply, fn, rows.feature_map, rows.bound, *params)
    return fn(rows.Z, *params)


def grow_tree(histogram, max_depth, n_samples, count_mechanism, min_node, min_branch, rng, ledger):
    """Grow the prefix tree from the exact code histogram, releasing one vector of counts per level.

    Returns
    -------
    leaves : list of (level, prefix)
        The leaves; leaf ``(l, p)`` holds the rows whose code's top ``l`` bits are ``p``.
    leaf_counts : ndarray of shape (n_leaves,)
        Their noisy counts (released; the root's is the public ``n``).
    """
    # (prefix, released count) of the branching nodes of the current level.
    branching = [(0, float(n_samples))] if n_samples >= min_branch else []
    leaves, leaf_counts = ([], []) if branching else ([(0, 0)], [float(n_samples)])
    # Every level's exact counts, by pairwise sums from the leaves up: 2 * 2**D
    # additions in all, where summing the histogram afresh per level costs
    # D * 2**D (integer counts in float64: both exact, the same numbers).
    levels = [histogram]
    for _ in range(max_depth):
        levels.append(levels[-1][0::2] + levels[-1][1::2])
    levels.reverse()  # levels[l]: the counts of the 2**l prefixes of length l
    for level in range(1, max_depth + 1):
        level_counts = levels[level]
        children = np.array([2 * p + b for p, _ in branching for b in (0, 1)], dtype=np.int64)
        # Every level is released, empty when nothing branches, so the ledger equals the plan.
        noisy = count_mechanism.release(level_counts[children], rng, ledger)
        next_branching = []
        for i, (prefix, count) in enumerate(branching):
            kept = [(children[2 * i + b], noisy[2 * i + b]) for b in (0, 1) if noisy[2 * i + b] >= min_node]
            if not kept:
                # Both children dropped: the node itself is a leaf.
                leaves.append((level - 1, prefix))
                leaf_counts.append(count)
            for child, child_count in kept:
                if level < max_depth and child_count >= min_branch:
                    next_branching.append((int(child), float(child_count)))
                else:
                    leaves.append((level, int(child)))
                    leaf_counts.append(float(child_count))
        branching = next_branching
    return leaves, np.asarray(leaf_counts, dtype=float)


def leaf_lookup(leaves, max_depth):
    """Map every ``D``-bit code to the index of its leaf (``-1``: in no leaf)."""
    table = np.full(1 << max_depth, -1, dtype=np.int64)
    for index, (level, prefix) in enumerate(leaves):
        shift = max_depth - level
        table[prefix << shift : (prefix + 1) << shift] = index
    return table


def weighted_kmeans(points, weights, n_clusters, bound, rng, project=None):
    """k centres of the weighted coreset (k-means++ and Lloyd; post-processing of releases).

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
    from sklearn.cluster import KMeans

    k = min(n_clusters, len(points))
    seed = int(rng.integers(2**31 - 1))
    km = KMeans(n_clusters=k, n_init=3, random_state=seed).fit(points, sample_weight=weights)
    centres = km.cluster_centers_
    cluster_weights = np.bincount(km.labels_, weights=weights, minlength=k)
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
    return centres, cluster_weights, n_reseeded, int(km.n_iter_)


def private_coreset(
    rows, bound, count_mechanism, sum_mechanism, max_depth, thresholds, rng, ledger, project=None
):
    """The released coreset of the (mapped, clipped) ``rows``: points, weights.

    Two passes over the rows (the code histogram, then the leaf sums),
    ``max_depth`` releases of level counts and one of the leaf sums, all
    recorded on ``ledger`` by their mechanisms.
    """
    planes = simhash_planes(rows.n_features, max_depth, rng)
    histogram = reduce_rows(rows, code_histogram, planes)
    min_node, min_branch = thresholds
    leaves, counts = grow_tree(
        histogram, max_depth, rows.n_samples, count_mechanism, min_node, min_branch, rng, ledger
    )
    del histogram
    sums = reduce_rows(rows, leaf_sums, planes, leaf_lookup(leaves, max_depth), len(leaves))
    noisy_sums = sum_mechanism.release(sums, rng, ledger)
    points = noisy_sums / np.maximum(counts, 1.0)[:, None]
    points = project_to_ball(points, bound) if project is None else project(points)
    return points, counts
