"""Weighted k-means of a released coreset: scikit-learn's ``KMeans``, without its per-call overhead.

The coreset (:mod:`skdp.cluster._coreset`) has a few tens to a few hundred
weighted points, and k-means on it is post-processing of releases.  On so
few points scikit-learn's ``KMeans(n_init=3).fit`` spends about 4 ms in
validation and in the array-API dispatch of the distances of its k-means++
seeding (Arthur & Vassilvitskii 2007, with ``2 + ln k`` greedy local
trials per centre), more than a DP fit of 1e4 rows spends on its own
noise and tree.  :func:`weighted_kmeans_fit` runs the same algorithm with
the same random stream and the same floating-point operations, in the
same order:

1. the points are copied and centred on their mean, the tolerance is
   ``tol`` times the mean of the coordinates' variances (before centring),
   as in ``KMeans.fit``;
2. each of ``n_init`` starts seeds by greedy k-means++
   (:func:`kmeans_plusplus`, the computation of scikit-learn's
   ``_kmeans_plusplus``: squared distances as ``-2 c.x + |c|^2 + |x|^2``
   clipped at 0, candidates drawn on the cumulative weighted potential)
   and runs scikit-learn's compiled Lloyd iterations
   (``sklearn.cluster._kmeans._kmeans_single_lloyd``);
3. the start of least inertia is kept (a later start must both lower the
   inertia and differ as a clustering), and the mean is added back.

The result equals ``KMeans(n_clusters, n_init=n_init,
random_state=seed).fit(points, sample_weight=weights)`` bit for bit (the
test suite checks it on many inputs).  Where scikit-learn's private Lloyd
routine cannot be imported, ``KMeans`` itself runs.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

try:  # scikit-learn's compiled Lloyd iterations and its comparison of two clusterings
    from sklearn.cluster._kmeans import _is_same_clustering, _kmeans_single_lloyd
    from sklearn.utils._openmp_helpers import _openmp_effective_n_threads
except ImportError:  # pragma: no cover - another scikit-learn layout: KMeans itself
    _kmeans_single_lloyd = None

#: ``KMeans``'s defaults, which the coreset's k-means keeps.
MAX_ITER = 300
TOL = 1e-4


def kmeans_plusplus(X, n_clusters, x_squared_norms, sample_weight, random_state):
    """Greedy weighted k-means++ seeds of ``X`` (scikit-learn's ``_kmeans_plusplus`` on dense float64).

    ``2 + floor(ln k)`` candidates per centre, drawn with probability
    proportional to weight times squared distance to the closest centre;
    the one that most lowers the weighted potential is kept.
    """
    n_samples, n_features = X.shape
    centers = np.empty((n_clusters, n_features), dtype=X.dtype)
    n_local_trials = 2 + int(np.log(n_clusters))
    center_id = random_state.choice(n_samples, p=sample_weight / sample_weight.sum())
    centers[0] = X[center_id]
    closest_dist_sq = _squared_distances(centers[0, np.newaxis], X, x_squared_norms)
    current_pot = closest_dist_sq @ sample_weight
    for c in range(1, n_clusters):
        rand_vals = random_state.uniform(size=n_local_trials) * current_pot
        candidate_ids = np.searchsorted(np.cumsum(sample_weight * closest_dist_sq), rand_vals)
        np.clip(candidate_ids, None, closest_dist_sq.size - 1, out=candidate_ids)
        distance_to_candidates = _squared_distances(X[candidate_ids], X, x_squared_norms)
        np.minimum(closest_dist_sq, distance_to_candidates, out=distance_to_candidates)
        candidates_pot = distance_to_candidates @ sample_weight.reshape(-1, 1)
        best = np.argmin(candidates_pot)
        current_pot = candidates_pot[best]
        closest_dist_sq = distance_to_candidates[best]
        centers[c] = X[candidate_ids[best]]
    return centers


def _squared_distances(C, X, x_squared_norms):
    """``max(0, -2 C X^T + |c|^2 + |x|^2)``, the operations of scikit-learn's ``_euclidean_distances``."""
    distances = -2 * (C @ X.T)
    distances += np.einsum("ij,ij->i", C, C)[:, None]
    distances += x_squared_norms.reshape(1, -1)
    np.maximum(distances, 0.0, out=distances)
    return distances


def weighted_kmeans_fit(points, weights, n_clusters, seed, n_init=3):
    """``(centres, labels, n_iter)`` of ``KMeans(n_clusters, n_init=n_init, random_state=seed)`` on weighted points.

    Parameters
    ----------
    points : ndarray of shape (n_points, dim)
    weights : ndarray of shape (n_points,)
        Positive weights.
    n_clusters : int
        At most ``n_points``.
    seed : int
        Seed of the starts' ``RandomState`` (``KMeans``'s ``random_state``).
    n_init : int, default=3
    """
    if _kmeans_single_lloyd is None:  # pragma: no cover
        from sklearn.cluster import KMeans

        km = KMeans(n_clusters=n_clusters, n_init=n_init, random_state=seed).fit(
            points, sample_weight=weights
        )
        return km.cluster_centers_, km.labels_, int(km.n_iter_)
    X = np.array(points, dtype=np.float64, order="C")
    sample_weight = np.array(weights, dtype=np.float64)
    tol = np.mean(np.var(X, axis=0)) * TOL
    random_state = np.random.RandomState(seed)
    n_threads = _openmp_effective_n_threads()
    X_mean = X.mean(axis=0)
    X -= X_mean
    x_squared_norms = np.einsum("ij,ij->i", X, X)
    best_inertia = best_labels = best_centers = best_n_iter = None
    for _ in range(n_init):
        centers_init = kmeans_plusplus(X, n_clusters, x_squared_norms, sample_weight, random_state)
        labels, inertia, centers, n_iter = _kmeans_single_lloyd(
            X, sample_weight, centers_init, max_iter=MAX_ITER, tol=tol, n_threads=n_threads
        )
        if best_inertia is None or (
            inertia < best_inertia and not _is_same_clustering(labels, best_labels, n_clusters)
        ):
            best_labels, best_centers, best_inertia, best_n_iter = labels, centers, inertia, n_iter
    best_centers += X_mean
    if len(set(best_labels)) < n_clusters:
        warnings.warn(
            f"Number of distinct clusters ({len(set(best_labels))}) found smaller than "
            f"n_clusters ({n_clusters}). Possibly due to duplicate points in X.",
            ConvergenceWarning,
            stacklevel=2,
        )
    return best_centers, best_labels, int(best_n_iter)
