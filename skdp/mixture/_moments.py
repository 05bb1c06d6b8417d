"""Pure math of DP-EM for Gaussian mixtures: E-step, moments, sensitivities, M-step maps.

Everything here works in the *unit-ball scale*: rows of ``X`` have L2 norm at
most 1 (Park et al. 2017, Section 3: "datasets are pre-processed such that the
L2 norm of any x_i is less than 1"), which is what every sensitivity below
assumes.  Responsibilities ``gamma_ik`` lie in [0, 1] and sum to one over
``k``; they depend on the data only through the row itself, because the
parameters of the E-step were released by the previous iteration (public).

Sensitivities are for *replace-one* neighbours: datasets of the same size
``N`` differing in one row ``x_j -> x'_j`` (with responsibilities
``gamma_jk -> gamma'_jk``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from ..privacy.clipping import clip_rows
from ..privacy.sensitivity import outer_product_sum_sensitivity, row_sum_sensitivity

#: Smallest value the noisy effective count ``N~_k`` may take when it divides
#: a released sum; a floor applied to a released quantity is post-processing.
MIN_COUNT = 1.0


# --------------------------------------------------------------------------
# Sensitivities (replace-one neighbours, ||x|| <= 1, gamma in [0, 1])
#
# The statistics released are the sums N_k, S1_k = sum_i gamma_ik x_i and
# S2_k = sum_i gamma_ik x_i x_i^T (or its trace).  The paper releases them
# divided by a public denominator D_k (N~_k, N~_k + kappa0, N~_k + nu0 + d + 2)
# with sensitivity "Delta / D_k"; adding noise of scale z * Delta to the sum
# and dividing by D_k afterwards is the same distribution, and keeps the
# data-dependent floor of N~_k out of every sensitivity.
#
# ``joint=True`` gives the sensitivity of the K components' statistics
# stacked into one vector (one release per statistic per iteration instead of
# the paper's K): replacing row j changes component k by a term weighted by
# gamma_jk and gamma'_jk, which sum to one over k, so the joint change is
# barely larger than a single component's.
# --------------------------------------------------------------------------
def weights_sensitivity(norm=1):
    """Sensitivity of the count vector ``(N_1, ..., N_K)``, ``N_k = sum_i gamma_ik`` (Eq. 13).

    Replacing row ``j`` changes the vector by ``gamma_j - gamma'_j``, a
    difference of two probability vectors: L1 norm at most 2 (all mass moved
    from one component to another), L2 norm at most ``sqrt(2)`` (a convex
    function is maximal at a vertex ``e_k - e_k'`` of that polytope).  Dividing
    by the public ``N`` gives the paper's ``2 / N`` for ``pi``.  This is
    always one release for all K components.
    """
    return 2.0 if norm == 1 else math.sqrt(2.0)


def mean_sensitivity(n_features, norm=1, joint=False):
    """Sensitivity of ``S1_k = sum_i gamma_ik x_i`` (Eq. 14-15, Appendix A.1-A.4).

    One component: the sum changes by ``gamma_jk x_j - gamma'_jk x'_j``, of L2
    norm at most ``||x_j|| + ||x'_j|| <= 2`` and L1 norm at most ``2 sqrt(d)``
    (``||x||_1 <= sqrt(d) ||x||_2``).  Divided by ``D_k`` these are the paper's
    ``2 / N~_k`` and ``2 sqrt(d) / N~_k`` (``N~_k + kappa0`` for MAP).

    Joint (all K sums stacked): L1 ``sum_k (gamma_jk + gamma'_jk) sqrt(d) = 2 sqrt(d)``;
    L2 ``sqrt(sum_k ||gamma_jk x - gamma'_jk x'||^2) <= sum_k (gamma_jk +
    gamma'_jk) = 2``.  The same numbers: releasing all means at once costs
    what one costs.
    """
    return row_sum_sensitivity(1.0, n_features, norm)


def second_moment_sensitivity(n_features, covariance_type, norm=2, joint=False, n_components=1):
    """Sensitivity of the second moment ``S2_k = sum_i gamma_ik x_i x_i^T`` or its trace.

    ``full`` (released as the upper triangle, Analyze Gauss): with
    ``a = sqrt(gamma_jk) x_j`` and ``b = sqrt(gamma'_jk) x'_j`` (norms <= 1),
    the change is ``A - B`` with ``A = a a^T``, ``B = b b^T``, and
    ``||A - B||_F^2 = ||a||^4 + ||b||^4 - 2 (a.b)^2 <= 2``.  The upper-triangle
    vector counts each off-diagonal entry once, so its L2 norm is at most
    ``sqrt(2)`` (attained by ``a = e_1, b = e_2``; for ``d = 1``, 1).  Its L1
    norm is at most ``sum_{i<=j} |a_i a_j| + sum_{i<=j} |b_i b_j| <= d + 1``
    (``sum_{i<=j} |a_i a_j| = (||a||_1^2 + ||a||_2^2) / 2 <= (d + 1) / 2``).
    Jointly over K components, with ``A, B`` the unweighted outer products:
    ``sum_k ||gamma_jk A - gamma'_jk B||_F^2 <= sum_k gamma_jk^2 + gamma'_jk^2 <= 2``
    (``<A, B> >= 0`` for PSD matrices), still ``sqrt(2)`` (or, for ``d = 1``,
    ``sqrt(2)`` when ``K >= 2``: two components can move by 1 each); L1 still
    ``d + 1``.

    ``tied`` (the total ``S2 = sum_i x_i x_i^T``, which does not depend on
    the responsibilities): the case of one component with ``gamma = 1``,
    ``sqrt(2)`` (L2; 1 for ``d = 1``) and ``d + 1`` (L1).  Pass
    ``covariance_type="full"`` with ``joint=False`` for it.

    ``spherical`` (the trace ``sum_i gamma_ik ||x_i||^2``): one component
    changes by ``gamma_jk ||x_j||^2 - gamma'_jk ||x'_j||^2 in [-1, 1]``:
    sensitivity 1 (Park et al., Eq. 16 and Appendix B.1, Eq. 26, where it
    appears as ``1 / (d N~_k)`` after dividing by ``d N~_k``).  Jointly:
    L1 ``<= sum_k gamma_jk + gamma'_jk = 2`` and L2 ``<= sqrt(2)`` (each
    entry lies in ``[-gamma'_jk, gamma_jk]``), 1 when ``K = 1``.
    """
    several = joint and n_components > 1
    if covariance_type == "spherical" or n_features == 1:
        if not several:
            return 1.0
        return 2.0 if norm == 1 else math.sqrt(2.0)
    # One matrix of unit-ball rows: the core's outer-product bound (the joint
    # one is the same, as derived above).
    return outer_product_sum_sensitivity(1.0, n_features, norm)


def noise_weights(shares, releases, exponents):
    """Relative noise multipliers that spend ``shares`` of the budget on each statistic.

    ``shares[s]`` is the fraction of the budget spent on statistic ``s``
    (counts, first moments, second moments), spread evenly over its
    ``releases[s]`` releases; ``exponents[s]`` is 2 for Gaussian noise and 1
    for Laplace noise.  The cost of one release at noise multiplier ``z`` is
    ``1 / (2 z^2)`` in zCDP (Gaussian) and ``1 / z`` in pure DP (Laplace),
    so a release costs ``share / releases`` of the total when its multiplier
    is proportional to ``(releases / share) ** (1 / exponent)``.  The shares
    are normalised to sum to the number of releases, so that shares equal to
    the release counts (every release costs the same) give weights of exactly
    one whatever the exponents.  The common scale is left to the calibration.
    Under zCDP and basic composition the shares are then exact; RDP and
    advanced composition do not add costs linearly, and the shares fix the
    *ratios* of the multipliers.

    A statistic with no release (``releases[s] == 0``: one component's
    count, which is the public ``n``) gets an infinite multiplier and no
    share.
    """
    released = np.asarray(releases) > 0
    shares = np.where(released, np.asarray(shares, dtype=float), 0.0)
    shares = shares * (sum(releases) / shares.sum())
    return tuple(
        float((n / s) ** (1.0 / p)) if n > 0 else math.inf
        for s, n, p in zip(shares, releases, exponents, strict=True)
    )


def centre_optimal_count_share(n_features, exponent):
    """Budget share of the counts relative to the first moments that minimises a mean's error.

    A mean ``mu~_k = (S1_k + e_S) / (N_k + e_N)`` has error about
    ``(e_S - mu_k e_N) / N_k`` with ``||mu_k|| <= 1`` (the same argument as
    :func:`skdp.cluster._lloyd.count_noise_weight`).  Gaussian (L2
    sensitivities ``sqrt(2)`` and 2): squared error ``(4 d z_S^2 + 2 |mu|^2
    z_N^2) / N_k^2`` at cost ``1 / z_N^2 + 1 / z_S^2``; the Lagrange condition
    ``(z_N / z_S)^4 = 2 d / |mu|^2 >= 2 d`` gives, at the worst case
    ``|mu| = 1``, the share ratio ``(z_S / z_N)^2 = 1 / sqrt(2 d)``.  Laplace
    (L1 sensitivities 2 and ``2 sqrt(d)``, cost ``1 / z_N + 1 / z_S``):
    ``(z_N / z_S)^3 = d^2`` and the ratio ``z_S / z_N = d^(-2/3)``.
    """
    if exponent == 2:
        return 1.0 / math.sqrt(2.0 * n_features)
    return float(n_features) ** (-2.0 / 3.0)


# --------------------------------------------------------------------------
# Data scaling
# --------------------------------------------------------------------------
def clip_to_unit_ball(X, data_norm):
    """Clip rows to L2 norm ``data_norm`` and divide by it (rows end in the unit ball).

    The core's clipping rule (:func:`skdp.privacy.clipping.clip_rows`), with
    the division by ``data_norm`` in the same product.
    """
    return clip_rows(X, data_norm, unit=True)


def project_rows_to_unit_ball(V):
    """Shrink rows of norm above one onto the unit sphere (post-processing).

    The core's clipping rule (:func:`skdp.privacy.clipping.clip_rows`) at bound 1.
    """
    return clip_rows(V, 1.0)


# --------------------------------------------------------------------------
# Gaussian densities and the E-step (vectorised as in scikit-learn)
# --------------------------------------------------------------------------
def full_covariances(covariances, covariance_type, n_features, n_components=1):
    """Covariances as a stack of ``(n_components, d, d)`` matrices."""
    if covariance_type == "full":
        return covariances
    if covariance_type == "tied":
        return np.broadcast_to(covariances, (n_components, n_features, n_features))
    return covariances[:, np.newaxis, np.newaxis] * np.eye(n_features)


def compute_precision_cholesky(covariances, covariance_type):
    """Upper-triangular ``P_k`` with ``P_k P_k^T = Sigma_k^{-1}`` (spherical: ``1 / sigma_k``)."""
    if covariance_type == "spherical":
        return 1.0 / np.sqrt(covariances)
    if covariance_type == "tied":
        return compute_precision_cholesky(covariances[np.newaxis], "full")[0]
    n_components, n_features, _ = covariances.shape
    prec_chol = np.empty_like(covariances)
    eye = np.eye(n_features)
    for k in range(n_components):
        cov_chol = np.linalg.cholesky(covariances[k])
        # solve_triangular would be marginally faster; d is small.
        prec_chol[k] = np.linalg.solve(cov_chol, eye).T
    return prec_chol


def precisions_from_cholesky(prec_chol, covariance_type):
    """``Sigma_k^{-1} = P_k P_k^T`` from :func:`compute_precision_cholesky`'s factors."""
    if covariance_type == "full":
        return np.einsum("kij,klj->kil", prec_chol, prec_chol)
    if covariance_type == "tied":
        return prec_chol @ prec_chol.T
    return prec_chol**2


def sample_mixture(rng, n_samples, weights, means, covariances, covariance_type):
    """Draw ``n_samples`` rows (and their components) from a Gaussian mixture.

    Parameters
    ----------
    rng : numpy.random.Generator
        A stream of its own, never a fit's noise stream.
    n_samples : int
    weights : ndarray of shape (K,)
    means : ndarray of shape (K, d)
    covariances : ndarray
        As :func:`compute_precision_cholesky` takes them.
    covariance_type : {"full", "tied", "spherical"}

    Returns
    -------
    X : ndarray of shape (n_samples, d)
    y : ndarray of shape (n_samples,)
    """
    counts = rng.multinomial(n_samples, weights / weights.sum())
    d = means.shape[1]
    parts, labels = [], []
    for j, (mean, n_j) in enumerate(zip(means, counts, strict=True)):
        if covariance_type == "full":
            part = rng.multivariate_normal(mean, covariances[j], size=n_j)
        elif covariance_type == "tied":
            part = rng.multivariate_normal(mean, covariances, size=n_j)
        else:
            part = mean + rng.normal(size=(n_j, d)) * np.sqrt(covariances[j])
        parts.append(part)
        labels.append(np.full(n_j, j, dtype=int))
    return np.vstack(parts), np.concatenate(labels)


def log_det_cholesky(prec_chol, covariance_type, n_features):
    """``log det P_k`` (minus half the log-determinant of the covariance)."""
    if covariance_type == "spherical":
        return n_features * np.log(prec_chol)
    if covariance_type == "tied":
        return np.sum(np.log(np.diag(prec_chol)))
    return np.sum(np.log(np.diagonal(prec_chol, axis1=1, axis2=2)), axis=1)


def estimate_log_gaussian_prob(X, means, prec_chol, covariance_type):
    """``log N(x_i | mu_k, Sigma_k)`` for every row and component, shape (n, K)."""
    n_samples, n_features = X.shape
    n_components = means.shape[0]
    log_det = log_det_cholesky(prec_chol, covariance_type, n_features)
    if covariance_type == "spherical":
        precisions = prec_chol**2
        sq = np.einsum("ij,ij->i", X, X)
        maha = (
            np.sum(means**2, axis=1) * precisions
            - 2.0 * (X @ means.T) * precisions
            + np.outer(sq, precisions)
        )
    else:
        maha = np.empty((n_samples, n_components))
        for k in range(n_components):
            p = prec_chol if covariance_type == "tied" else prec_chol[k]
            y = X @ p - means[k] @ p
            maha[:, k] = np.einsum("ij,ij->i", y, y)
    return -0.5 * (n_features * math.log(2 * math.pi) + maha) + log_det


def e_step(X, weights, means, prec_chol, covariance_type):
    """Responsibilities ``gamma_ik`` (Park et al., Eq. 11) by log-sum-exp.

    Returns
    -------
    log_prob_norm : ndarray of shape (n_samples,)
        ``log sum_k pi_k N(x_i | mu_k, Sigma_k)``.
    log_resp : ndarray of shape (n_samples, n_components)
    """
    with np.errstate(divide="ignore"):
        log_weights = np.log(weights)
    weighted = estimate_log_gaussian_prob(X, means, prec_chol, covariance_type) + log_weights
    log_prob_norm = logsumexp(weighted, axis=1)
    return log_prob_norm, weighted - log_prob_norm[:, np.newaxis]


# --------------------------------------------------------------------------
# Expected sufficient statistics (the moments that are perturbed)
# --------------------------------------------------------------------------
def sufficient_statistics(X, resp, covariance_type):
    """``N_k = sum_i gamma_ik``, ``S1_k = sum_i gamma_ik x_i`` and the second moment.

    The second moment is ``S2_k = sum_i gamma_ik x_i x_i^T`` (full, shape
    (K, d, d)), its trace ``sum_i gamma_ik ||x_i||^2`` (spherical, shape (K,))
    or the total ``sum_i x_i x_i^T`` (tied, shape (d, d); the sum over k of
    the full ``S2_k``).
    """
    counts = resp.sum(axis=0)
    first = resp.T @ X
    if covariance_type == "tied":
        second = X.T @ X
    elif covariance_type == "spherical":
        second = resp.T @ np.einsum("ij,ij->i", X, X)
    else:
        second = np.empty((resp.shape[1], X.shape[1], X.shape[1]))
        for k in range(resp.shape[1]):
            second[k] = (X * resp[:, k, np.newaxis]).T @ X
    return counts, first, second


def expected_statistics(X, data_norm, weights, means, prec_chol, covariance_type):
    """E-step and :func:`sufficient_statistics` of a block of rows: ``(N_k, S1_k, S2)``.

    ``data_norm=None`` means the rows are already in the unit ball;
    otherwise they are clipped and scaled first (:func:`clip_to_unit_ball`).
    The statistics are sums over rows, so the statistics of a dataset are
    the sums of those of its chunks: this is the per-chunk map of an
    out-of-core or Dask fit (:meth:`skdp._chunks.ChunkedData.map_reduce`).
    """
    if data_norm is not None:
        X = clip_to_unit_ball(X, data_norm)
    _, log_resp = e_step(X, weights, means, prec_chol, covariance_type)
    return sufficient_statistics(X, np.exp(log_resp), covariance_type)


# --------------------------------------------------------------------------
# M-step maps from released moments to parameters (post-processing)
# --------------------------------------------------------------------------
def project_weights(noisy_weights):
    """Clip noisy weights to [0, 1] and renormalise (Park et al., footnote 4).

    If every weight is clipped to zero the uniform vector is returned (the
    projection is otherwise undefined).
    """
    w = np.clip(noisy_weights, 0.0, 1.0)
    total = w.sum()
    if total <= 0:
        return np.full_like(w, 1.0 / w.size)
    return w / total


def map_weights(counts, n_samples, alpha):
    """``pi_k^MAP = (N_k + alpha - 1) / (N + K (alpha - 1))`` (Section 4.1; supplement, Sec. 1)."""
    k = counts.size
    return (counts + alpha - 1.0) / (n_samples + k * (alpha - 1.0))


def mle_covariance(second_moment, means):
    """``Sigma_k = M_k - mu_k mu_k^T`` with ``M_k = S2_k / N_k`` (Eq. 12 expanded)."""
    return second_moment - np.einsum("ki,kj->kij", means, means)


def map_covariance(second_moment, means, counts, kappa0, cov_denominator, prior_scale):
    """MAP covariance from ``M_k = S2_k / (N_k + c)`` and ``mu_k = S1_k / (N_k + kappa0)``.

    The supplement's (Sec. 1) ``Sigma^MAP = (S0 + N_k Sigma^MLE + kappa0 N_k /
    (kappa0 + N_k) mu^MLE mu^MLE^T) / (nu0 + N_k + d + 2)`` with
    ``N_k Sigma^MLE = S2_k - S1_k S1_k^T / N_k`` and ``mu^MLE = S1_k / N_k``
    simplifies, since ``-1/N_k + kappa0 / (N_k (kappa0 + N_k)) = -1 / (N_k + kappa0)``, to

        ``(S0 + S2_k - (N_k + kappa0) mu_k^MAP mu_k^MAP^T) / (N_k + c)``,

    ``c = nu0 + d + 2``: the perturbed ``M_k`` enters linearly (Appendix B.2).
    """
    ratio = (counts + kappa0) / cov_denominator
    outer = np.einsum("ki,kj->kij", means, means)
    return (
        prior_scale[np.newaxis] / cov_denominator[:, np.newaxis, np.newaxis]
        + second_moment
        - ratio[:, np.newaxis, np.newaxis] * outer
    )


def tied_covariance(second_moment, means, counts, kappa0, denominator, prior_scale):
    """Shared covariance from the total ``S2 = sum_i x_i x_i^T`` and the means (tied model).

    Maximising the joint posterior of one covariance ``Sigma ~ IW(S0, nu0)``
    and K means ``mu_k | Sigma ~ N(0, Sigma / kappa0)`` (the paper's NIW
    prior with a shared ``Sigma``) gives ``mu_k = S1_k / (N_k + kappa0)`` and

        ``Sigma = (S0 + sum_k sum_i gamma_ik (x_i - mu_k)(x_i - mu_k)^T
        + kappa0 sum_k mu_k mu_k^T) / (N + nu0 + d + 1 + K)``;

    expanding the scatter with ``S1_k = (N_k + kappa0) mu_k`` leaves
    ``(S0 + S2 - sum_k (N_k + kappa0) mu_k mu_k^T) / (N + nu0 + d + 1 + K)``,
    linear in ``S2``.  ``kappa0 = 0``, ``S0 = 0`` and denominator ``N`` give
    the MLE (scikit-learn's tied covariance).  For K = 1 this is
    :func:`map_covariance` with ``c = nu0 + d + 2``.
    """
    weight = counts + kappa0
    scatter = np.einsum("k,ki,kj->ij", weight, means, means)
    return (prior_scale + second_moment - scatter) / denominator


def clip_eigenvalues(covariances, floor, cap, band=None):
    """Symmetrise and clip the eigenvalues of each matrix to ``[floor, cap]``.

    Post-processing: the noisy second moment minus the mean's outer product
    need not be positive definite.  In the unit ball the data's own
    covariance has eigenvalues at most 1, hence the default cap.

    ``band`` (one per matrix, or one for all): the upper edge of the noise's
    own eigenvalues (:func:`~skdp.mixture._m_step.noise_band`).  The
    eigenvalues at or below it cannot be told apart from one another by the
    released moments: they are replaced by their mean before the clipping,
    which keeps their sum (the trace the noise leaves unbiased) and their
    eigenvectors.  This is the "eigenvalue clipping" of random-matrix
    theory (Laloux, Cizeau, Bouchaud & Potters, Phys. Rev. Lett. 83, 1999;
    Bouchaud & Potters 2009, Sec. 4): a direction whose eigenvalue the noise
    pushed below the others is not taken as a real narrow direction of the
    data (a Gaussian that believes one assigns the held-out rows densities
    far below theirs).  The eigenvalues above the edge are kept as released.
    """
    sym = 0.5 * (covariances + np.swapaxes(covariances, 1, 2))
    vals, vecs = np.linalg.eigh(sym)
    if band is not None:
        edge = np.reshape(band, (-1, 1)) if np.ndim(band) else band
        inside = vals <= edge
        n_inside = inside.sum(axis=1, keepdims=True)
        mean_inside = np.where(inside, vals, 0.0).sum(axis=1, keepdims=True) / np.maximum(n_inside, 1)
        vals = np.where(inside, mean_inside, vals)
    # A floor per matrix (shape (n,)) or one for all.
    vals = np.clip(vals, np.reshape(floor, (-1, 1)) if np.ndim(floor) else floor, cap)
    return np.einsum("kij,kj,klj->kil", vecs, vals, vecs)


def expected_complete_log_likelihood(weights, means, covariances, counts, first, second, covariance_type):
    """``Q = sum_k sum_i gamma_ik log(pi_k N(x_i | mu_k, Sigma_k))`` from moments only.

    Expanding the Gaussian log-density, ``Q`` depends on the data only
    through ``N_k``, ``S1_k`` and ``S2_k``:

        ``Q_k = N_k (log pi_k - d/2 log 2 pi - 1/2 log det Sigma_k)
        - 1/2 tr(Sigma_k^{-1} (S2_k - 2 S1_k mu_k^T + N_k mu_k mu_k^T))``.

    Evaluated on the *released* moments it is post-processing.  Since the
    entropy of the responsibilities is non-negative, ``Q <= F <= log p(X)``
    (Park et al., Eq. 4): with exact moments it is a lower bound.
    """
    k, d = means.shape
    covs = full_covariances(covariances, covariance_type, d, k)
    if covariance_type == "spherical":
        second = second[:, np.newaxis, np.newaxis] * np.eye(d) / d
    elif covariance_type == "tied":
        # Only sum_k tr(P S2_k) = tr(P S2) enters Q: any split of the
        # total with the right sum gives the same value.
        second = np.concatenate([second[np.newaxis], np.zeros((k - 1, d, d))])
    with np.errstate(divide="ignore"):
        log_w = np.log(weights)
    _, logdet = np.linalg.slogdet(covs)
    prec = np.linalg.inv(covs)
    quad = (
        np.einsum("kij,kji->k", prec, second)
        - 2.0 * np.einsum("ki,kij,kj->k", first, prec, means)
        + counts * np.einsum("ki,kij,kj->k", means, prec, means)
    )
    total = counts * (log_w - 0.5 * d * math.log(2 * math.pi) - 0.5 * logdet) - 0.5 * quad
    return float(np.sum(np.where(counts > 0, total, 0.0)))
