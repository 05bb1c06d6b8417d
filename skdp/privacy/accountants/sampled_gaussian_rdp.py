"""Exact RDP of the Poisson-subsampled Gaussian mechanism, at any order.

The sampled Gaussian mechanism (SGM) adds ``N(0, sigma^2 C^2)`` to the sum of
a Poisson subsample (every record enters independently with probability
``q``) of records clipped to L2 norm ``C``.  Under add/remove-one neighbours
its Renyi divergence of order ``alpha`` is governed by

    A_alpha = E_{z ~ mu_0} [ ((1 - q) + q mu_1(z) / mu_0(z))^alpha ],

with ``mu_0 = N(0, sigma^2)`` and ``mu_1 = N(1, sigma^2)``, and
``RDP(alpha) = log(A_alpha) / (alpha - 1)`` (Mironov, Talwar & Zhang 2019,
Sec. 3, eq. (3)-(4); Thm. 4-5 show that this direction is the larger of the
two for the SGM, which is also what Opacus and Google's dp-accounting
compute).

Integer orders (MTZ 2019, Sec. 3.3, binomial expansion of ``A_alpha``)::

    A_alpha = sum_{i=0}^{alpha} binom(alpha, i) (1 - q)^(alpha - i) q^i
              exp((i^2 - i) / (2 sigma^2)).

Fractional orders (MTZ 2019, Sec. 3.3, "fractional alpha"): split the real
line at ``z0 = sigma^2 log(1/q - 1) + 1/2``, where ``q mu_1 = (1 - q) mu_0``,
and expand ``((1 - q) mu_0 + q mu_1)^alpha`` by the generalised binomial
series on each side (it converges because the larger of the two summands is
factored out)::

    A_alpha = A_1 + A_2,
    A_1 = sum_{i>=0} binom(alpha, i) (1 - q)^(alpha - i) q^i / 2
          exp((i^2 - i) / (2 sigma^2)) erfc((i - z0) / (sqrt(2) sigma)),
    A_2 = sum_{i>=0} binom(alpha, i) (1 - q)^i q^(alpha - i) / 2
          exp(((alpha - i)^2 - (alpha - i)) / (2 sigma^2))
          erfc((z0 - (alpha - i)) / (sqrt(2) sigma)).

For non-integer ``alpha`` the coefficients ``binom(alpha, i)`` alternate in
sign once ``i > alpha + 1`` and the terms decay only polynomially (the
``erfc`` tail cancels the ``exp((i^2 - i)/(2 sigma^2))`` growth), so the sums
are evaluated in log space with signs, in vectorised blocks, until the
terms are negligible.  Everything here is a pure function of numbers; the
accountant takes the pointwise minimum of this curve and autodp's (both are
valid upper bounds), so a failure to converge (returned as ``inf``) can only
make the accounting looser, never wrong.

References
----------
.. [MTZ19] Mironov, Talwar & Zhang (2019), "Renyi Differential Privacy of the
   Sampled Gaussian Mechanism", arXiv:1908.10530, Section 3.3.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special

#: Terms are summed until they fall below ``exp(_LOG_TOL)`` times the running
#: ``A_alpha`` (which is >= 1, being a moment of a likelihood ratio of order > 1).
_LOG_TOL = -36.0
#: ... or below ``exp(_LOG_REL_TOL)`` times ``A_alpha - 1``, whichever comes first.
_LOG_REL_TOL = math.log(1e-13)
#: Past this many terms the series is abandoned (``inf``: the caller then
#: keeps the other bound).  Reached only for orders very close to 1.
_MAX_TERMS = 4_000_000


def _log_binom_and_sign(alpha, i):
    """``log|binom(alpha, i)|`` and its sign, for real ``alpha`` and integer ``i`` (broadcast)."""
    arg = alpha - i + 1.0
    log_mag = special.gammaln(alpha + 1.0) - special.gammaln(i + 1.0) - special.gammaln(arg)
    # Gamma(alpha+1) and i! are positive: the sign is that of 1/Gamma(alpha - i + 1),
    # and the coefficient vanishes where alpha - i + 1 is a non-positive integer.
    pole = (arg <= 0) & (arg == np.floor(arg))
    sign = np.where(pole, 0.0, special.gammasgn(np.where(pole, 0.5, arg)))
    return np.where(pole, -np.inf, log_mag), sign


def _log_erfc(x):
    # log(erfc(x)) without underflow for large positive x: erfc = erfcx * exp(-x^2).
    with np.errstate(divide="ignore"):
        return np.where(x > 0, np.log(special.erfcx(np.maximum(x, 0.0))) - x * x, np.log(special.erfc(x)))


def _rowwise_logsumexp(log_terms, mask):
    """``log sum exp`` of each row of ``log_terms`` over the entries where ``mask`` holds."""
    masked = np.where(mask, log_terms, -np.inf)
    top = np.max(masked, axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(np.sum(np.exp(masked - safe[:, None]), axis=1))


@functools.lru_cache(maxsize=512)
def _integer_terms(alpha):
    """The ``q``- and ``sigma``-free arrays of :func:`log_a_integer` at order ``alpha`` (read-only).

    ``(log binom(alpha, i), i, alpha - i, i^2 - i)`` for ``i = 0..alpha``: a
    calibration evaluates one order at dozens of multipliers, and these are
    the same each time (computed by the same operations, so the sum below
    is the same to the bit).
    """
    i = np.arange(alpha + 1, dtype=float)
    log_binom = special.gammaln(alpha + 1.0) - special.gammaln(i + 1.0) - special.gammaln(alpha - i + 1.0)
    arrays = (log_binom, i, alpha - i, i * i - i)
    for a in arrays:
        a.flags.writeable = False
    return arrays


def log_a_integer(q, sigma, alpha):
    """``log A_alpha`` for integer ``alpha >= 2`` by the finite binomial sum (MTZ19 Sec. 3.3)."""
    log_binom, i, alpha_minus_i, i2_minus_i = _integer_terms(int(alpha))
    log_terms = log_binom + i * math.log(q) + alpha_minus_i * math.log1p(-q) + i2_minus_i / (2 * sigma**2)
    top = np.max(log_terms)
    return float(top + np.log(np.sum(np.exp(log_terms - top))))


#: Largest ``z0 = sigma^2 log((1 - q) / q)`` (about the number of terms the
#: fractional series needs) for which :func:`sampled_gaussian_rdp` sums it;
#: beyond, a fractional order gets the next integer order's value, an upper
#: bound.
_MAX_FRACTIONAL_SERIES = 2000.0


def log_a_fractional(q, sigma, alphas):
    """``log A_alpha`` for real orders ``alpha > 1`` by the two series of MTZ19 Sec. 3.3.

    Exact for integer ``alpha`` too (the coefficients beyond ``alpha`` vanish),
    which is how the tests check it against :func:`log_a_integer`.  All orders
    are summed together, block of terms by block of terms, each until its own
    terms are negligible; an order whose series has not converged after
    ``_MAX_TERMS`` terms gets ``inf``.

    Parameters
    ----------
    q, sigma : float
        Sampling rate in (0, 1) and noise multiplier.
    alphas : array-like of float
        Orders, all > 1.

    Returns
    -------
    ndarray of ``log A_alpha``, one per order.
    """
    alphas = np.atleast_1d(np.asarray(alphas, dtype=float))
    log_q, log_1mq = math.log(q), math.log1p(-q)
    z0 = sigma**2 * (log_1mq - log_q) + 0.5
    two_s2 = 2.0 * sigma**2
    root2s = math.sqrt(2.0) * sigma
    # Before i_min the terms may still grow (left of z0, where erfc does not
    # yet damp them, or before the coefficients start alternating); the
    # stopping rule only applies after it.
    i_min = np.maximum(alphas, max(z0 + 10.0 * sigma, 0.0)) + 2.0
    out = np.full(alphas.shape, np.inf)
    log_pos = np.full(alphas.shape, -np.inf)  # positive and negative parts of A_1 + A_2
    log_neg = np.full(alphas.shape, -np.inf)
    active = np.arange(alphas.size)
    start, block = 0, 256
    while active.size and start < _MAX_TERMS:
        alpha = alphas[active, None]
        i = np.arange(start, start + block, dtype=float)[None, :]
        j = alpha - i
        log_binom, sign = _log_binom_and_sign(alpha, i)
        with np.errstate(invalid="ignore"):
            log_s1 = log_binom + i * log_q + j * log_1mq + (i * i - i) / two_s2 + _log_erfc((i - z0) / root2s)
            log_s2 = log_binom + j * log_q + i * log_1mq + (j * j - j) / two_s2 + _log_erfc((z0 - j) / root2s)
            # The i-th terms of A_1 and A_2 share the sign of binom(alpha, i).
            log_pair = np.logaddexp(log_s1, log_s2) - math.log(2.0)
        log_pos[active] = np.logaddexp(log_pos[active], _rowwise_logsumexp(log_pair, sign > 0))
        log_neg[active] = np.logaddexp(log_neg[active], _rowwise_logsumexp(log_pair, sign < 0))
        start += block
        block = min(2 * block, 16384)
        with np.errstate(invalid="ignore", divide="ignore"):
            # log(pos - neg); nan while the partial sum is not yet positive.
            log_total = log_pos[active] + np.log1p(-np.exp(log_neg[active] - log_pos[active]))
            # Stop once the next term is below 1e-13 of A - 1 (what the RDP
            # value log(A)/(alpha-1) is made of) or below float64 resolution of A.
            log_am1 = log_total + np.log(-np.expm1(-log_total))
            threshold = np.maximum(log_am1 + _LOG_REL_TOL, log_total + _LOG_TOL)
            done = (start > i_min[active]) & np.isfinite(log_total) & (log_pair[:, -1] < threshold)
        # Past i_min the tail alternates with shrinking terms, so it is at most
        # the last term in size: adding it keeps the result an upper bound.
        out[active[done]] = np.logaddexp(log_total[done], log_pair[done, -1])
        active = active[~done]
    return out


def sampled_gaussian_rdp(noise_multiplier, sampling_rate, orders):
    """RDP curve of the Poisson-subsampled Gaussian mechanism under add/remove.

    Parameters
    ----------
    noise_multiplier : float
        Noise std over the L2 sensitivity (clip norm), ``sigma > 0``.
    sampling_rate : float
        Poisson inclusion probability ``q`` in (0, 1].
    orders : array-like of float
        Renyi orders, all > 1; integer and fractional orders are exact
        (MTZ19 Sec. 3.3), except fractional orders at a noise so large that
        their series needs over ``_MAX_FRACTIONAL_SERIES`` terms, which get
        the next integer order's value (an upper bound: the curve is
        non-decreasing in the order).

    Returns
    -------
    ndarray
        ``log(A_alpha) / (alpha - 1)`` per order; ``inf`` where the value
        overflows or the fractional series fails to converge.

    Examples
    --------
    >>> from skdp.privacy.accountants.sampled_gaussian_rdp import sampled_gaussian_rdp
    >>> rdp = sampled_gaussian_rdp(1.0, 1.0, [2.0, 2.5])  # q = 1: alpha / (2 sigma^2)
    >>> [round(float(r), 12) for r in rdp]
    [1.0, 1.25]
    """
    sigma, q = float(noise_multiplier), float(sampling_rate)
    if not sigma > 0 or not math.isfinite(sigma):
        raise ValueError(f"noise_multiplier must be positive and finite, got {noise_multiplier!r}.")
    if not 0 < q <= 1:
        raise ValueError(f"sampling_rate must be in (0, 1], got {sampling_rate!r}.")
    if q < 1.0 and isinstance(orders, tuple) and len(orders) == 1:
        # One order (a staged plan's filter calibrates at one): the same
        # arithmetic in scalars, without the array bookkeeping below.
        value = _one_order(sigma, q, orders[0])
        if value is not None:
            return np.array([value])
    orders = np.asarray(orders, dtype=float)
    if np.any(~(orders > 1)) or np.any(~np.isfinite(orders)):
        raise ValueError("orders must be finite and greater than 1.")
    if q == 1.0:
        # No subsampling: the Gaussian mechanism, alpha / (2 sigma^2) (Mironov 2017, Prop. 7).
        return orders / (2 * sigma**2)
    flat = orders.ravel()
    integer = flat == np.floor(flat)
    # The fractional series only damps after about z0 = sigma^2 log((1-q)/q)
    # terms: at a large sigma (epsilon far below 1) that is tens of thousands
    # of terms per order and calibration.  Renyi divergence is non-decreasing
    # in its order (van Erven & Harremoes 2014, Thm. 3), so there the value at
    # the next integer order, exact and cheap, bounds a fractional order's.
    bounded = ~integer & (sigma**2 * (math.log1p(-q) - math.log(q)) > _MAX_FRACTIONAL_SERIES)
    exact = np.where(bounded, np.ceil(flat), flat)
    log_a = np.empty_like(flat)
    series = ~integer & ~bounded
    with np.errstate(over="ignore"):
        log_a[~series] = [log_a_integer(q, sigma, a) for a in exact[~series]]
        log_a[series] = log_a_fractional(q, sigma, flat[series])
        # A_alpha >= 1 (Jensen); rounding may leave a tiny negative log.
        out = np.maximum(log_a, 0.0) / (exact - 1.0)
    out[~np.isfinite(out)] = math.inf
    return out.reshape(orders.shape)


def _one_order(sigma, q, order):
    """:func:`sampled_gaussian_rdp` at one integer ``order > 1`` for ``q < 1``, or None (take the array path).

    The same operations on the same numbers as the array path (so the same
    value to the bit), for the integer orders, where that path evaluates
    :func:`log_a_integer`; None for any other order.
    """
    a = float(order)
    if not (a > 1 and math.isfinite(a) and a == math.floor(a)):
        return None
    with np.errstate(over="ignore"):
        log_a = log_a_integer(q, sigma, a)
    # np.maximum(log_a, 0.0) of the array path: a NaN stays NaN.
    value = log_a if math.isnan(log_a) else max(log_a, 0.0)
    value /= a - 1.0
    return value if math.isfinite(value) else math.inf
