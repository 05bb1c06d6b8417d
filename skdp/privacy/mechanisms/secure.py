"""Exact noise sampling on a grid, immune to floating-point attacks.

Textbook Laplace noise ``b * log(U)`` computed in floating point leaks: the
set of doubles the noisy output can take depends on the noiseless value, so
an attacker who sees one output can often tell which of two neighbouring
values produced it (Mironov 2012, "On significance of the least significant
bits for differential privacy"; diffprivlib issue #94).

skdp's secure mode instead rounds the statistic to a power-of-two grid
``gamma`` and adds integer noise drawn *exactly* with integer arithmetic:
discrete Laplace and discrete Gaussian (Canonne, Kamath & Steinke 2020,
Algorithms 1-3).  Every output is ``gamma`` times an integer, a set that does
not depend on the data.

Privacy: rounding to the grid can grow each coordinate's change by one grid
step, so the integer sensitivity is ``Delta / gamma + d`` (L1) or
``Delta / gamma + sqrt(d)`` (L2) for ``d`` coordinates; the integer noise
scale is rounded *up*, in exact rational arithmetic, so that its ratio to
that sensitivity is at least the continuous mechanism's noise multiplier.

* The discrete Laplace is then pure DP at the same epsilon (its privacy loss
  is at most the integer L1 change over the scale), recorded as a
  :class:`~skdp.privacy.DiscreteLaplaceEvent`; its RDP is accounted as that of
  randomised response, the worst epsilon-DP mechanism, not with the
  continuous Laplace's curve.
* The discrete Gaussian, independent on each coordinate, satisfies the
  continuous Gaussian's RDP/zCDP bound ``alpha Delta^2 / (2 sigma^2)`` (CKS
  2020, Thm. 4, summed over the coordinates), recorded as a
  :class:`~skdp.privacy.DiscreteGaussianEvent`, whose (epsilon, delta) is
  derived from that bound rather than from the continuous Gaussian's exact
  curve.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

#: Grid steps per unit of sensitivity, as a power of two: the rounding slack
#: is at most d / 2**GRID_BITS of the sensitivity.
GRID_BITS = 30


def _uniform_int(n, rng):
    """Exact uniform integer in ``{0, ..., n - 1}`` for any Python int ``n``."""
    if n <= 2**62:
        return int(rng.integers(0, n))
    n_bytes = (n.bit_length() + 7) // 8
    limit = (256**n_bytes // n) * n
    while True:
        r = int.from_bytes(rng.bytes(n_bytes), "little")
        if r < limit:
            return r % n


def _bernoulli(p, q, rng):
    """Bernoulli(p / q) for integers ``0 <= p <= q``."""
    return _uniform_int(q, rng) < p


def bernoulli_exp(p, q, rng):
    """Bernoulli(exp(-p / q)) for integers ``p >= 0, q > 0`` (CKS 2020, Algorithm 1)."""
    while p > q:  # exp(-x) = exp(-1)^floor(x) * exp(-(x - floor(x)))
        if not bernoulli_exp(1, 1, rng):
            return False
        p -= q
    k = 1
    while _bernoulli(p, q * k, rng):
        k += 1
    return k % 2 == 1


def discrete_laplace(t, rng):
    """Integer Y with ``P(Y = y) ∝ exp(-|y| / t)`` for an integer scale ``t >= 1`` (CKS Algorithm 2)."""
    while True:
        u = _uniform_int(t, rng)
        if not bernoulli_exp(u, t, rng):
            continue
        v = 0
        while bernoulli_exp(1, 1, rng):
            v += 1
        y = u + t * v  # with s = 1, Y = floor(X / s) = X
        negative = _bernoulli(1, 2, rng)
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_gaussian(sigma2, rng):
    """Integer Y with ``P(Y = y) ∝ exp(-y^2 / (2 sigma2))`` for an integer ``sigma2 >= 1`` (CKS Algorithm 3)."""
    t = math.isqrt(sigma2) + 1
    while True:
        y = discrete_laplace(t, rng)
        # Accept with probability exp(-(|y| - sigma2/t)^2 / (2 sigma2)).
        num = (abs(y) * t - sigma2) ** 2
        if bernoulli_exp(num, 2 * sigma2 * t * t, rng):
            return y


def grid_step(sensitivity):
    """Power-of-two grid step with ``sensitivity / step`` in ``[2**GRID_BITS, 2**(GRID_BITS + 1))``."""
    return math.ldexp(1.0, math.floor(math.log2(sensitivity)) - GRID_BITS)


def _ceil_sqrt(n):
    """Smallest integer ``>= sqrt(n)`` for an integer ``n >= 0``."""
    r = math.isqrt(n)
    return r if r * r == n else r + 1


def secure_release(value, sensitivity, noise_multiplier, kind, rng):
    """Round ``value`` to the grid and add exact discrete noise (see module docstring).

    Parameters
    ----------
    value : ndarray
        Finite statistic.
    sensitivity : float
        L1 (``kind="laplace"``) or L2 (``kind="gaussian"``) sensitivity.
    noise_multiplier : float
        Continuous mechanism's noise scale over sensitivity; the discrete
        noise is at least this multiple of the integer sensitivity.
    kind : {"laplace", "gaussian"}
    """
    value = np.asarray(value, dtype=float)
    gamma = grid_step(sensitivity)
    d = max(1, value.size)
    # Exact rationals (every float is one): the noise must be at least the
    # recorded multiplier times the integer sensitivity, and a floating-point
    # product rounded down before the ceiling could fall short of it.
    multiplier = Fraction(noise_multiplier)
    grid_sensitivity = Fraction(sensitivity) / Fraction(gamma)
    if kind == "laplace":
        # Rounding moves each coordinate by at most 1/2 grid step on either
        # side of a neighbouring pair, so the integer L1 change is at most sensitivity / gamma + d.
        t = math.ceil(multiplier * (grid_sensitivity + d))
        draw = lambda: discrete_laplace(t, rng)  # noqa: E731
    elif kind == "gaussian":
        # The rounding errors form a vector of L2 norm at most sqrt(d) / 2 per
        # side, so the integer L2 change is at most sensitivity / gamma +
        # sqrt(d); _ceil_sqrt(d) is a rational upper bound of sqrt(d).
        sigma2 = math.ceil((multiplier * (grid_sensitivity + _ceil_sqrt(d))) ** 2)
        draw = lambda: discrete_gaussian(sigma2, rng)  # noqa: E731
    else:
        raise ValueError(f"kind must be 'laplace' or 'gaussian', got {kind!r}.")
    flat = value.ravel()
    out = np.empty(flat.shape)
    for i, v in enumerate(flat):
        # v / gamma is exact (power-of-two step); the sum is an exact Python int.
        out[i] = float(round(v / gamma) + draw()) * gamma
    return out.reshape(value.shape)
