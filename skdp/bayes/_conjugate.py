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
