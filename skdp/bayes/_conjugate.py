"""Conjugate Beta/Dirichlet machinery: pure functions on arrays.

Shared by :class:`~skdp.bayes.DPBetaBernoulli` and the categorical models; the
Beta-Bernoulli case is the two-category Dirichlet-categorical case.
"""

from __future__ import annotations

import numpy as np
from scipy import special


def category_counts(X_codes, n_categories):
    """Counts ``n[j, k]`` of records with ``X[:, j] == k``.

    These are the sufficient statistics of a product of categorical
    likelihoods; for binary data ``n[:, 1] = n_plus`` and ``n[:, 0] = n_minus``
    (Foulds et al., Section 3.1).
    """
    n_features = X_codes.shape[1]
    counts = np.zeros((n_features, n_categories))
    for k in range(n_categories):
        counts[:, k] = (X_codes == k).sum(axis=0)
    return counts


def project_counts(noisy_counts):
    """Project noisy counts onto the non-negative orthant (Foulds et al., Eq. 16 "proj")."""
    return np.maximum(noisy_counts, 0.0)


def sample_truncated_beta(a, b, lower, upper, rng, size=None):
    """Exact draws from ``Beta(a, b)`` restricted to ``[lower, upper]``.

    Inverse-CDF sampling on the truncated interval.  When the interval lies in
    the upper tail the survival function is inverted instead, so the draws stay
    accurate where the lower-tail CDF rounds to 1.  If the interval's mass
    underflows entirely, the draw is the endpoint nearest the distribution's
    bulk (the limit of the truncated law).

    Parameters
    ----------
    a, b : array-like
        Positive shape parameters (broadcast together).
    lower, upper : float
        Truncation bounds, ``0 <= lower < upper <= 1``.
    """
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    shape = a.shape if size is None else (size,) + a.shape
    u = rng.random(shape)
    a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    cdf_lo, cdf_hi = special.betainc(a, b, lower), special.betainc(a, b, upper)
    sf_lo, sf_hi = special.betaincc(a, b, lower), special.betaincc(a, b, upper)
    upper_tail = cdf_lo > 0.5
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        from_cdf = special.betaincinv(a, b, cdf_lo + u * (cdf_hi - cdf_lo))
        from_sf = special.betainccinv(a, b, sf_hi + u * (sf_lo - sf_hi))
    draw = np.where(upper_tail, from_sf, from_cdf)
    mass = np.where(upper_tail, sf_lo - sf_hi, cdf_hi - cdf_lo)
    mean = a / (a + b)
    fallback = np.where(mean < lower, lower, upper)
    draw = np.where((mass > 0) & np.isfinite(draw), draw, fallback)
    return np.clip(draw, lower, upper)


def bernoulli_log_likelihood(X, p):
    """Row-wise ``sum_j log Bernoulli(X[:, j] | p[j])``."""
    p = np.clip(p, 1e-300, 1 - 1e-16)
    return X @ np.log(p) + (1 - X) @ np.log1p(-p)


def dirichlet_log_likelihood_sensitivity(n_categories, truncation):
    """Exponential-mechanism sensitivity of a truncated categorical log-likelihood.

    Dirichlet-categorical generalisation of Foulds et al., Eq. 15: a record's
    feature ``d`` contributes ``log theta_j`` with ``theta`` on the simplex
    truncated to ``theta_j >= a0_d`` for all ``K_d`` categories, so
    ``a0_d <= theta_j <= 1 - (K_d - 1) a0_d`` and replacing the record changes
    the contribution by at most ``log((1 - (K_d - 1) a0_d) / a0_d)``.  The
    features of a record add up.  For ``K_d = 2`` this is Eq. 15 exactly.

    Parameters
    ----------
    n_categories : array-like of int, shape (n_features,)
    truncation : array-like of float, shape (n_features,)
        ``a0_d``, each in ``(0, 1 / K_d)`` (a single category needs none: its
        probability is 1 and it contributes 0).
    """
    k = np.asarray(n_categories, dtype=float)
    a0 = np.broadcast_to(np.asarray(truncation, dtype=float), k.shape)
    upper = 1.0 - (k - 1.0) * a0
    terms = np.where(k > 1, np.log(np.where(k > 1, upper, 1.0)) - np.log(a0), 0.0)
    return float(np.sum(terms))


def sample_dirichlet(shapes, mask, rng):
    """Dirichlet draws along the last axis, restricted to the ``mask`` coordinates.

    Rows of ragged length (features with different numbers of categories) are
    stored padded; padded coordinates get probability 0.
    """
    shapes = np.where(mask, shapes, 1.0)
    g = np.where(mask, rng.standard_gamma(shapes), 0.0)
    total = g.sum(axis=-1, keepdims=True)
    # A row whose gammas all underflow (tiny shapes) is a point mass at a
    # vertex in the limit; pick the vertex with the largest shape.
    degenerate = total[..., 0] <= 0
    if np.any(degenerate):
        vertex = np.argmax(np.where(mask, shapes, -np.inf), axis=-1)
        g[degenerate] = 0.0
        g[degenerate, vertex[degenerate]] = 1.0
        total = g.sum(axis=-1, keepdims=True)
    return g / total


def _beta_interval_log_mass(a, b, lower, upper):
    """``log P(lower <= V <= upper)`` for ``V ~ Beta(a, b)``, robust in the tails.

    Uses the survival function in the upper tail; when the mass underflows,
    the leading term of the tail expansion
    ``P(V >= x) ~ x^a (1 - x)^b / (b B(a, b))`` is used instead (it is only
    ever compared with the same expression at another ``x``).
    """
    cdf_lo, cdf_hi = special.betainc(a, b, lower), special.betainc(a, b, upper)
    sf_lo, sf_hi = special.betaincc(a, b, lower), special.betaincc(a, b, upper)
    upper_tail = cdf_lo > 0.5
    mass = np.where(upper_tail, sf_lo - sf_hi, cdf_hi - cdf_lo)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.log(mass)
        tail = a * np.log(lower) + b * np.log1p(-lower) - np.log(b) - special.betaln(a, b)
    return np.where(mass > 0, exact, tail)


def sample_truncated_dirichlet(shapes, mask, lower, rng, max_rounds=10_000):
    """Exact draws from ``Dirichlet(shapes)`` truncated to ``theta_j >= lower``.

    The sequential truncated-Beta construction (stick breaking, Fang et al.
    2000, used by Foulds et al., Appendix E.2) draws the stick
    ``v_j = theta_j / (1 - sum_{i<j} theta_i)`` from ``Beta(g_j, sum_{i>j} g_i)``
    truncated to the interval that keeps every remaining coordinate feasible,
    ``[a0 / r_j, 1 - (K - j) a0 / r_j]`` with ``r_j`` the remaining stick.
    On its own this is *not* the truncated Dirichlet: the proposal density is
    the target divided by ``prod_j Z_j(r_j)``, the truncated-Beta masses, which
    depend on earlier draws.  The draw is therefore accepted with probability
    ``prod_j Z_j(r_j) / Z_j(r_j^max)`` (``Z_j`` increases with ``r_j``, whose
    largest feasible value is ``1 - (j - 1) a0``), which makes it exact.
    Coordinates are broken off in increasing order of their shape, so the
    coordinates pressed against the truncation are placed first and the
    acceptance probability stays close to 1 both when the truncation binds and
    when it does not.  Where a truncated Beta's mass underflows (below ~1e-300)
    :func:`sample_truncated_beta` returns the nearest endpoint, and only there
    is the draw not exact.

    Parameters
    ----------
    shapes : ndarray of shape (..., K)
        Positive Dirichlet shapes (padded coordinates arbitrary).
    mask : ndarray of bool, broadcastable to ``shapes``
        Real coordinates of each row; the real coordinates of a row come first.
    lower : ndarray, broadcastable to ``shapes.shape[:-1]``
        Truncation ``a0`` of each row, with ``a0 * K_row < 1``.
    rng : numpy.random.Generator
    max_rounds : int
        Rejection rounds before giving up with a RuntimeError.

    Returns
    -------
    theta : ndarray of shape (..., K)
    """
    shapes = np.asarray(shapes, dtype=float)
    batch = shapes.shape[:-1]
    kmax = shapes.shape[-1]
    mask = np.broadcast_to(mask, shapes.shape)
    flat_shapes = shapes.reshape(-1, kmax)
    flat_mask = mask.reshape(-1, kmax)
    a0 = np.broadcast_to(np.asarray(lower, dtype=float), batch).reshape(-1)
    k_row = flat_mask.sum(axis=1)
    if np.any(a0 * k_row >= 1):
        raise ValueError("Truncation a0 must satisfy a0 * n_categories < 1 for every row.")
    out = np.zeros_like(flat_shapes)
    # Padded coordinates sort last (shape +inf) and are never drawn.
    order = np.argsort(np.where(flat_mask, flat_shapes, np.inf), axis=1, kind="stable")
    sorted_shapes = np.take_along_axis(flat_shapes, order, axis=1)
    pending = np.flatnonzero(k_row > 1)
    out[k_row == 1] = flat_mask[k_row == 1].astype(float)
    for _ in range(max_rounds):
        if pending.size == 0:
            break
        theta, log_accept = _sequential_truncated_beta(
            sorted_shapes[pending], k_row[pending], a0[pending], rng
        )
        accepted = np.log(rng.random(pending.size)) < log_accept
        rows = pending[accepted]
        unsorted = np.zeros_like(theta[accepted])
        np.put_along_axis(unsorted, order[rows], theta[accepted], axis=1)
        out[rows] = unsorted
        pending = pending[~accepted]
    else:
        if pending.size:
            raise RuntimeError("sample_truncated_dirichlet: rejection sampler did not terminate.")
    return out.reshape(shapes.shape)


def _sequential_truncated_beta(sorted_shapes, k_row, a0, rng):
    """One stick-breaking proposal per row and its log acceptance probability."""
    n, kmax = sorted_shapes.shape
    theta = np.zeros((n, kmax))
    remaining = np.ones(n)
    log_accept = np.zeros(n)
    # tail[:, j] = sum of the real shapes after coordinate j.
    real = np.arange(kmax)[None, :] < k_row[:, None]
    shapes = np.where(real, sorted_shapes, 0.0)
    tail = np.cumsum(shapes[:, ::-1], axis=1)[:, ::-1] - shapes
    for j in range(kmax - 1):
        active = j < k_row - 1
        if not np.any(active):
            break
        idx = np.flatnonzero(active)
        a, b, r = shapes[idx, j], tail[idx, j], remaining[idx]
        after = k_row[idx] - j - 1  # coordinates still to place after this one
        lo, hi = a0[idx] / r, 1.0 - after * a0[idx] / r
        v = sample_truncated_beta(a, b, lo, hi, rng)
        if j > 0:
            r_max = 1.0 - j * a0[idx]
            lo_max, hi_max = a0[idx] / r_max, 1.0 - after * a0[idx] / r_max
            log_accept[idx] += _beta_interval_log_mass(a, b, lo, hi) - _beta_interval_log_mass(
                a, b, lo_max, hi_max
            )
        theta[idx, j] = v * r
        remaining[idx] = r * (1.0 - v)
    last = k_row - 1
    theta[np.arange(n), last] = remaining
    return theta, np.minimum(log_accept, 0.0)
