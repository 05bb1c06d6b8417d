"""Pure functions of DP Lloyd's algorithm, shared by DPKMeans and DPKernelKMeans.

One DP Lloyd iteration (Blum et al. 2005, "SuLQ" k-means; Su et al. 2016,
"DPLloyd"; Acs et al. 2018, Alg. 2 lines 9-11):

1. assign every (clipped) row to its nearest released centre (the centres are
   already public, so this step costs nothing by itself);
2. release the vector of cluster sizes ``n_i`` with noise;
3. release the per-cluster sums ``S_i`` of the rows with noise;
4. the new centres ``S~_i / n~_i`` are post-processing.

Sensitivities under replace-one neighbours, rows clipped to L2 norm ``C``
----------------------------------------------------------------------------
Conditioned on the released centres, replacing a record ``x`` (in cluster
``i``) by ``x'`` (in cluster ``j``) changes no other record's assignment.

Counts (Acs et al., Section III-D): if ``i != j`` one count drops by one and
another grows by one: L2 ``sqrt(2)``, L1 ``2``; if ``i == j`` nothing changes.

Sums: if ``i != j``, ``S_i`` loses ``x`` and ``S_j`` gains ``x'``: L2 change
``sqrt(|x|^2 + |x'|^2) <= sqrt(2) C``.  If ``i == j``, ``S_i`` changes by
``x' - x``, whose L2 norm reaches ``2 C`` (``x' = -x``, both on the sphere of
radius ``C``, both nearest to the same centre, e.g. a centre at the origin).
The L2 sensitivity of the sums is therefore ``2 C``.  Acs et al. (Section
III-A and III-D) state ``sqrt(2) C``, which only covers a record that changes
cluster; skdp uses ``2 C`` (see ``docs/cluster.md``).  For the Laplace
mechanism the L1 sensitivity is ``2 C_1`` where ``C_1 = sqrt(m) C`` bounds the
L1 norm of an m-dimensional row of L2 norm at most ``C``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import sparse

from ..privacy import (
    REPLACE_ONE,
    GaussianEvent,
    LaplaceEvent,
    histogram_sensitivity,
)
from ..privacy.centring import calibrate_after_bounds
from ..privacy.clipping import clip_rows as _clip_rows
from ..privacy.clipping import row_norms  # noqa: F401 -- the core's, imported from here by the package
from ..privacy.norm_selection import norm_selection_event
from ..privacy.sensitivity import row_sum_sensitivity


def clip_rows(Z, bound):
    """Scale every row of ``Z`` to L2 norm at most ``bound`` (Acs et al., Alg. 2 line 5).

    ``z / max(1, |z| / bound)``: rows inside the ball are kept unchanged; the
    core's one clipping rule (:func:`skdp.privacy.clipping.clip_rows`).
    """
    return _clip_rows(Z, bound)


class Shift:
    """The map ``x -> x - centre`` to the clustering space of a privately centred fit (picklable).

    ``centre`` is released (``data_norm="auto"``, :mod:`skdp.privacy.centring`),
    so the map is public; chunked rows apply it chunk by chunk.
    """

    def __init__(self, centre):
        self.centre = np.asarray(centre, dtype=float)

    def __call__(self, X):
        return X - self.centre


class BoxShift:
    """The map ``x -> clip(x, lower, upper) - centre`` of a declared box (picklable, public).

    ``centre = (lower + upper) / 2``.  Clipping every coordinate into the
    declared box and shifting by its centre reads no data: the rows then lie
    in the ball of radius ``||upper - lower|| / 2`` (the half-diagonal), a
    public norm bound, at no privacy cost.
    """

    def __init__(self, lower, upper):
        self.lower = np.asarray(lower, dtype=float)
        self.upper = np.asarray(upper, dtype=float)
        self.centre = (self.lower + self.upper) / 2.0

    def __call__(self, X):
        return np.clip(X, self.lower, self.upper) - self.centre


class BoxBallProjection:
    """Post-processing of noisy centres onto the box ``[lower - c, upper - c]`` and the ball of radius ``bound``.

    The exact mean of rows that lie in both convex sets lies in both, so
    pulling a noisy centre into them reads nothing but released and public
    quantities.  Clipping into the box (which contains the origin) and then
    scaling towards the origin keeps the point in the box, so the result is
    in the intersection.  In the noise-dominated regime this keeps the
    centres in the region of the data (a noisy centre projected onto the
    sphere alone lands at a corner-distance from every row).
    """

    def __init__(self, box, bound):
        self.lower = box.lower - box.centre
        self.upper = box.upper - box.centre
        self.bound = float(bound)

    def __call__(self, centres):
        return project_to_ball(np.clip(centres, self.lower, self.upper), self.bound)


def project_to_ball(centres, bound):
    """Project centres onto the L2 ball of radius ``bound``.

    The exact mean of rows clipped to ``bound`` lies in that (convex) ball, so
    the projection never moves a noisy centre further from it: pure
    post-processing that can only reduce the error.
    """
    return clip_rows(centres, bound)


def count_sensitivity(norm):
    """Sensitivity of the cluster-size vector under replace-one neighbours (``norm`` 1 or 2)."""
    return histogram_sensitivity(norm)


def sum_sensitivity(bound, norm, n_features):
    """Sensitivity of the per-cluster sums of rows clipped to L2 norm ``bound``.

    Replace-one neighbours (module docstring): L2 ``2 * bound``; L1
    ``2 * sqrt(n_features) * bound`` (the core's
    :func:`~skdp.privacy.sensitivity.row_sum_sensitivity`).
    """
    if norm not in (1, 2):
        raise ValueError(f"norm must be 1 or 2, got {norm!r}.")
    return row_sum_sensitivity(bound, n_features, norm)


def squared_distances(Z, centres):
    """Squared Euclidean distances of every row to every centre, shape (n, k)."""
    # |z - c|^2 = |z|^2 - 2 z.c + |c|^2; clipped at 0 against round-off.
    d2 = (Z * Z).sum(axis=1)[:, None] - 2.0 * (Z @ centres.T) + (centres * centres).sum(axis=1)[None, :]
    return np.maximum(d2, 0.0)


def assign(Z, centres):
    """Index of the nearest centre of every row (Alg. 2 line 9)."""
    # The row norms do not change the argmin.
    scores = (centres * centres).sum(axis=1)[None, :] - 2.0 * (Z @ centres.T)
    return np.argmin(scores, axis=1)


def cluster_statistics(Z, labels, n_clusters):
    """Cluster sizes ``n_i`` and sums ``S_i`` of the rows of ``Z`` (exact, private)."""
    n = Z.shape[0]
    # Row i of the (n, k) one-hot matrix has its single 1 in column labels[i].
    onehot = sparse.csr_matrix((np.ones(n), labels, np.arange(n + 1)), shape=(n, n_clusters))
    counts = np.bincount(labels, minlength=n_clusters).astype(float)
    sums = np.asarray(onehot.T @ Z)
    return counts, sums


def centres_from_noisy_statistics(
    noisy_counts, noisy_sums, bound, reseed, min_count=1.0, project=None, shrinkage=None
):
    """New centres ``S~_i / n~_i`` (Alg. 2 line 11), post-processing only.

    A cluster whose noisy size is below ``min_count`` (empty, or noise drove it
    to zero or below) has no usable mean: it is re-seeded with
    ``reseed(indices, centres, noisy_counts)``, which may use only released
    quantities and data-independent randomness.  The others are shrunk
    towards their previous centres when ``shrinkage`` is given
    (:func:`shrink_to_prior` with its prior and noise stds bound, called
    with ``noisy_counts`` and ``min_count``), then projected onto
    the ball of radius ``bound`` (:func:`project_to_ball`), or by ``project``
    (a public convex set holding every clipped row, e.g.
    :class:`BoxBallProjection`).

    Returns
    -------
    centres : ndarray of shape (n_clusters, n_features)
    reseeded : ndarray of bool, shape (n_clusters,)
    """
    noisy_counts = np.asarray(noisy_counts, dtype=float)
    reseeded = noisy_counts < min_count
    centres = noisy_sums / np.maximum(noisy_counts, min_count)[:, None]
    if shrinkage is not None:
        centres = shrinkage(centres, noisy_counts=noisy_counts, min_count=min_count)
    centres = project_to_ball(centres, bound) if project is None else project(centres)
    if reseeded.any():
        centres[reseeded] = reseed(np.flatnonzero(reseeded), centres, noisy_counts)
    return centres, reseeded


def uniform_variance(bound, dim, box=None):
    """Per-coordinate variance of the uniform distribution on the public region of the rows.

    The exact centre of any cluster lies in the region that holds every
    clipped row: the declared box ``[lower, upper]`` (variance
    ``(upper - lower)^2 / 12`` per coordinate) or else the ball of radius
    ``bound`` in ``dim`` dimensions (``bound^2 / (dim + 2)``, the second
    moment of the uniform ball over ``dim``).  It is the prior variance of
    :func:`shrink_to_prior`: what is known about a centre before the data
    speak, fixed a priori from public quantities.

    Returns
    -------
    ndarray of shape (dim,)
    """
    if box is not None:
        lower, upper = box
        return (np.asarray(upper, dtype=float) - np.asarray(lower, dtype=float)) ** 2 / 12.0
    return np.full(dim, float(bound) ** 2 / (dim + 2.0))


def shrink_to_prior(centres, prior, noisy_counts, prior_var, count_std, sum_std, min_count=1.0):
    r"""Posterior mean of noisy centres under a Gaussian prior at public ``prior`` centres.

    Post-processing of released values (Bayes / James--Stein shrinkage,
    e.g. Efron & Morris 1973): the noisy centre ``m_i = S~_i / n~_i`` is
    about the true centre ``mu_i`` plus noise ``(e_S - mu_i e_n) / n_i``
    (the delta method of :func:`count_noise_weight`), whose variance per
    coordinate is

    .. math:: v_{ij} = (\sigma_S^2 + p_{ij}^2 \sigma_n^2) / \max(\tilde n_i^2 - \sigma_n^2, 1)

    with the mechanisms' public noise stds ``sigma_S`` and ``sigma_n``, the
    prior centre ``p_i`` standing for ``mu_i`` and ``n~_i^2 - sigma_n^2``
    (unbiased, floored at 1; 1 when ``n~_i < 1``) for ``n_i^2``: a noisy
    size that is mostly noise does not make its centre look precise.  With the prior ``mu_ij ~ N(p_ij, tau_j^2)`` the posterior
    mean is

    .. math:: p_{ij} + \frac{\tau_j^2}{\tau_j^2 + v_{ij}} (m_{ij} - p_{ij}).

    When the noise on a centre is much larger than what the region allows
    (``v >> tau^2``: a small cluster, or a small budget) the centre stays
    at its prior instead of jumping to a random point of the region; when
    the noise is small the factor is close to 1 and the update is Lloyd's.
    It reads only released values (``m``, ``n~``) and public ones (the
    prior centres, ``tau^2`` from :func:`uniform_variance`, the plan's
    scales), so it costs no privacy.

    Parameters
    ----------
    centres : ndarray of shape (n_clusters, dim)
        Noisy centres ``S~_i / max(n~_i, min_count)``.
    prior : ndarray of shape (n_clusters, dim)
        Public prior centres (the previous released ones).
    noisy_counts : ndarray of shape (n_clusters,)
        Released sizes.
    prior_var : ndarray of shape (dim,)
        Prior variance ``tau_j^2`` per coordinate.
    count_std, sum_std : float
        Noise std of one released size and of one coordinate of a sum.
    min_count : float, default=1.0
        Floor of the size in the noise variance (as in the division).

    Returns
    -------
    ndarray of shape (n_clusters, dim)
    """
    # E[n~^2] = n^2 + sigma_n^2: the squared size is estimated by n~^2 - sigma_n^2 (floored);
    # a size that is mostly noise then gives the centre the large variance it has.
    noisy_counts = np.asarray(noisy_counts, dtype=float)
    size2 = np.maximum(noisy_counts**2 - count_std**2, min_count**2)
    size2 = np.where(noisy_counts < min_count, min_count**2, size2)[:, None]
    noise_var = (sum_std**2 + prior**2 * count_std**2) / size2
    tau2 = np.asarray(prior_var, dtype=float)[None, :]
    return prior + tau2 / (tau2 + noise_var) * (centres - prior)


def box_diagonal_centres(lower, upper, n_clusters):
    """``n_clusters`` public starting centres evenly spaced on the main diagonal of a box.

    ``lower + (2 i + 1) / (2 k) * (upper - lower)`` for ``i = 0 .. k - 1``:
    the midpoints of ``k`` equal cells of the diagonal from ``lower`` to
    ``upper``.  Data-independent (only the declared box), so it costs no
    privacy, and spread over the region of the data, unlike the first
    release of a random partition, whose cells all have the global mean
    for centre (the released centres are then the global mean plus noise).
    The diagonal is the one segment of the box that passes through the
    ranges of every feature at once; on data whose features grow together
    (sizes, intensities) it runs along the data's main direction.

    Returns
    -------
    ndarray of shape (n_clusters, n_features)
    """
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    t = (2.0 * np.arange(n_clusters) + 1.0) / (2.0 * n_clusters)
    return lower + t[:, None] * (upper - lower)


def split_largest(indices, centres, noisy_counts, bound, rng, jitter=1e-3):
    """Re-seed centres ``indices`` next to the clusters of largest noisy size.

    Each re-seeded centre is a copy of a kept centre (the largest first)
    moved by ``jitter * bound`` in a uniformly random direction: the next
    assignment then cuts that cluster in two by a random hyperplane through
    its centre.  Uses released quantities and fresh randomness only.
    """
    order = np.argsort(-np.where(np.isin(np.arange(len(centres)), indices), -np.inf, noisy_counts))
    donors = order[np.arange(len(indices)) % max(1, len(centres) - len(indices))]
    return project_to_ball(
        centres[donors] + uniform_sphere(len(indices), centres.shape[1], jitter * bound, rng), bound
    )


def release_centres(
    counts,
    sums,
    count_mechanism,
    sum_mechanism,
    bound,
    reseed,
    rng,
    ledger,
    project=None,
    prior=None,
    prior_var=None,
):
    """Release exact sizes and sums with noise, and turn them into centres.

    Two releases, each recorded on ``ledger`` by its mechanism: the
    cluster sizes (Alg. 2 line 10) and the cluster sums (line 11); the
    centres are post-processing (:func:`centres_from_noisy_statistics`).
    With ``prior`` (public centres, e.g. the previous iteration's) and
    ``prior_var`` (the public per-coordinate prior variance,
    :func:`uniform_variance`) every centre is the posterior mean of
    :func:`shrink_to_prior`, whose noise variances come from the two
    mechanisms' public scales.

    Returns
    -------
    centres : ndarray of shape (n_clusters, n_features)
    noisy_counts : ndarray of shape (n_clusters,)
    reseeded : ndarray of bool, shape (n_clusters,)
    """
    noisy_counts = count_mechanism.release(counts, rng, ledger)
    noisy_sums = sum_mechanism.release(sums, rng, ledger)
    shrinkage = None
    if prior is not None:
        shrinkage = functools.partial(
            shrink_to_prior,
            prior=prior,
            prior_var=prior_var,
            count_std=count_mechanism.std,
            sum_std=sum_mechanism.std,
        )
    new_centres, reseeded = centres_from_noisy_statistics(
        noisy_counts, noisy_sums, bound, reseed, project=project, shrinkage=shrinkage
    )
    return new_centres, noisy_counts, reseeded


def random_partition_step(Z, n_clusters, count_mechanism, sum_mechanism, bound, reseed, rng, ledger):
    """A DP Lloyd iteration whose assignment is uniformly random (data-independent init).

    The "random partition" initialisation: the released centres are noisy
    means of the cells of a uniformly random partition, all near the mean of
    the data and spread apart by the noise and the sampling.  Its releases
    have the same sensitivities as any Lloyd iteration (the assignment does
    not depend on the data), so it is one of the ``max_iter`` iterations.
    """
    labels = rng.integers(n_clusters, size=Z.shape[0])
    counts, sums = cluster_statistics(Z, labels, n_clusters)
    return release_centres(counts, sums, count_mechanism, sum_mechanism, bound, reseed, rng, ledger)


def dp_lloyd_step(Z, centres, count_mechanism, sum_mechanism, bound, reseed, rng, ledger):
    """One private Lloyd iteration on rows ``Z`` already clipped to ``bound``.

    Returns
    -------
    centres : ndarray of shape (n_clusters, n_features)
    noisy_counts : ndarray of shape (n_clusters,)
    reseeded : ndarray of bool, shape (n_clusters,)
    """
    labels = assign(Z, centres)
    counts, sums = cluster_statistics(Z, labels, centres.shape[0])
    return release_centres(counts, sums, count_mechanism, sum_mechanism, bound, reseed, rng, ledger)


def uniform_sphere(n, dim, radius, rng):
    """``n`` points uniform on the L2 sphere of ``radius`` in ``dim`` dimensions."""
    directions = rng.standard_normal((n, dim))
    directions /= np.maximum(np.linalg.norm(directions, axis=1, keepdims=True), np.finfo(float).tiny)
    return radius * directions


def count_noise_weight(mechanism, dim):
    """Ratio of the sizes' noise multiplier to the sums' that minimises the centres' error.

    A centre ``(S + e_S) / (n + e_n)`` has error about ``(e_S - mu e_n) / n``
    with ``|mu| <= C``.  Gaussian: with multipliers ``z_n, z_S`` the squared
    error is ``(4 C^2 d z_S^2 + 2 |mu|^2 z_n^2) / n^2`` (sensitivities ``2 C``
    and ``sqrt(2)``) and the cost (zCDP / RDP) is proportional to
    ``1 / z_n^2 + 1 / z_S^2``; Lagrange gives ``(z_n / z_S)^4 = 4 C^2 d /
    (2 |mu|^2) >= 2 d``, so ``(2 d)^(1/4)`` at the worst case ``|mu| = C``.
    Laplace (basic composition, cost ``1 / z_n + 1 / z_S``, L1 sensitivities
    ``2 sqrt(d) C`` and ``2``, variance ``2 b^2`` per coordinate):
    ``(z_n / z_S)^3 = d^2 C^2 / |mu|^2 >= d^2``, so ``d^(2/3)``.
    Acs et al. (Alg. 2) use one ``sigma_K`` for both, i.e. weight 1.
    """
    if mechanism == "gaussian":
        return (2.0 * dim) ** 0.25
    if mechanism == "laplace":
        return float(dim) ** (2.0 / 3.0)
    raise ValueError(f"mechanism must be 'gaussian' or 'laplace', got {mechanism!r}.")


def _planned_events(
    noise_multiplier, max_iter, mechanism="gaussian", n_norm_selections=0, count_weight=1.0, start=None
):
    """Privacy events of a whole DP Lloyd fit at ``noise_multiplier`` (the calibration plan).

    ``max_iter`` iterations of two releases each (sizes, sums), both at the
    same noise multiplier (Acs et al., Alg. 2 lines 10-11 use ``sigma_K`` for
    both), plus ``n_norm_selections`` DPNorm calls (Alg. 3), also at that
    multiplier.  This is the moments-accountant composition of Eq. 3 with
    ``sigma_C = sigma_K``, except that DPNorm runs once rather than ``T`` times.
    ``start`` (a function of the noise multiplier, or None) gives the events
    of a private start released before the iterations
    (:func:`~skdp.cluster._coreset.start_events`); they come first.
    """
    event_class = {"gaussian": GaussianEvent, "laplace": LaplaceEvent}[mechanism]
    events = [
        event_class(
            count=max_iter, neighbouring=REPLACE_ONE, noise_multiplier=noise_multiplier * count_weight
        ),
        event_class(count=max_iter, neighbouring=REPLACE_ONE, noise_multiplier=noise_multiplier),
    ]
    if n_norm_selections:
        events.append(norm_selection_event(noise_multiplier, REPLACE_ONE, count=n_norm_selections))
    return events if start is None else list(start(noise_multiplier)) + events


def lloyd_noise_multiplier(
    max_iter,
    mechanism,
    n_norm_selections,
    count_weight,
    epsilon,
    delta,
    composition,
    *,
    secure_noise=False,
    bounds=None,
    start=None,
):
    """Smallest noise multiplier whose :func:`_planned_events` costs at most ``(epsilon, delta)``.

    With ``bounds`` (an :class:`~skdp.privacy.centring.AutoBounds` plan, for
    ``data_norm="auto"``) the bounds' events come first and the whole fit
    composes to ``(epsilon, delta)``
    (:func:`~skdp.privacy.centring.calibrate_after_bounds`).  Grid searches
    refit the same plan many times: the calibration caches plan costs itself
    (:func:`skdp.privacy.calibrate_noise_multiplier`, keyed by the events,
    which ``secure_noise`` (the fit's plan's) changes).  ``start``: the
    events of a private start, as in :func:`_planned_events`.
    """
    return calibrate_after_bounds(
        functools.partial(
            _planned_events,
            max_iter=max_iter,
            mechanism=mechanism,
            n_norm_selections=n_norm_selections,
            count_weight=count_weight,
            start=start,
        ),
        bounds,
        epsilon,
        delta,
        composition,
        neighbouring=REPLACE_ONE,
        secure_noise=secure_noise,
    )


#: Largest relative centre noise the ``max_iter="auto"`` rule accepts.
AUTO_NOISE_RATIO = 0.5
#: Largest number of iterations ``max_iter="auto"`` picks (Acs et al. run T = 20
#: on 60,000 rows; a few iterations from a random partition reach most of the
#: non-private accuracy).
AUTO_MAX_ITER = 10


#: DPKMeans' ``max_iter="auto"`` (its default): the plain T = 5 of Su et al. as a
#: floor, more iterations while the noise on an average centre stays below a
#: tenth of the clipping radius, at most Acs et al.'s T = 20.  Fixed a priori
#: (round numbers; the floor makes the rule never run fewer iterations than
#: the old default, the ratio keeps every added iteration's noise well below
#: the scale of the data), not tuned per dataset.
KMEANS_AUTO_NOISE_RATIO = 0.1
KMEANS_AUTO_MIN_ITER = 5
KMEANS_AUTO_MAX_ITER = 20


def relative_centre_noise(noise_multiplier, mechanism, n_samples, n_clusters, dim):
    """Norm of the noise on an average-size centre, over the clipping bound ``C``.

    A cluster of ``n / k`` rows has its sum perturbed per coordinate with
    standard deviation ``2 C z`` (Gaussian) or ``sqrt(2) 2 sqrt(m) C z``
    (Laplace, ``m = dim``); over ``dim`` coordinates and divided by the size
    this is ``s sqrt(dim) k / n`` with ``s`` the per-coordinate std at
    ``C = 1``.  A function of public quantities only: the plan, ``k``, the
    dimension and ``n`` (public under replace-one neighbours, where both
    datasets have the same size).
    """
    if mechanism == "gaussian":
        per_coordinate = 2.0 * noise_multiplier
    elif mechanism == "laplace":
        per_coordinate = math.sqrt(2.0) * 2.0 * math.sqrt(dim) * noise_multiplier
    else:
        raise ValueError(f"mechanism must be 'gaussian' or 'laplace', got {mechanism!r}.")
    return per_coordinate * math.sqrt(dim) * n_clusters / n_samples


def auto_max_iter(
    noise_multiplier_of,
    mechanism,
    n_samples,
    n_clusters,
    dim,
    ratio=AUTO_NOISE_RATIO,
    max_iter=AUTO_MAX_ITER,
    min_iter=1,
):
    """Largest ``T <= max_iter`` whose per-iteration centre noise stays below ``ratio * C``.

    The budget is split over ``T`` iterations, so each one is noisier as
    ``T`` grows; past the point where the noise on a centre is a sizeable
    fraction of the clipping radius, an extra iteration moves the centres by
    noise rather than by data.  ``noise_multiplier_of(T)`` is the calibrated
    multiplier of the whole plan with ``T`` iterations; the rule reads only
    public quantities (:func:`relative_centre_noise`), so it costs no privacy.
    At least one iteration is always run.  ``ratio = 0.5`` is a round number
    fixed a priori (noise on a centre of at most half the clipping radius),
    not tuned on any evaluation set.  ``min_iter`` is a floor
    (:data:`KMEANS_AUTO_MIN_ITER` for DPKMeans): the rule then only adds
    iterations to it.
    """
    best = min_iter
    for T in range(min_iter, max_iter + 1):
        noise = relative_centre_noise(noise_multiplier_of(T), mechanism, n_samples, n_clusters, dim)
        if noise > ratio:
            break
        best = T
    return best
