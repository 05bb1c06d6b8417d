"""Conversions between privacy currencies: pure functions of numbers.

Each function states the theorem it implements; the accountant
(:mod:`skdp.privacy.ledger`) and the calibrators call them, estimators never
do.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize, special

from ..roots import brentq

#: Renyi orders on which RDP curves are evaluated and composed.  Fractional
#: orders near 1 matter for large epsilon, large ones for tiny delta.  Long
#: DP-SGD runs have a sharp optimum in the order, so the grid is dense (steps
#: of 0.1 up to 11, the grid of Opacus' RDP accountant, then every integer to
#: 64): with exact fractional-order RDP for the subsampled Gaussian
#: (:mod:`skdp.privacy.accountants.sampled_gaussian_rdp`) a coarser grid alone costs up
#: to 1.5% of epsilon.
DEFAULT_ORDERS = tuple(
    sorted(
        {1.25, 1.75, 2.25, 2.75, 3.25, 3.5, 3.75, 4.5, 96.0, 128.0, 256.0, 512.0}
        | {round(1.0 + x / 10.0, 1) for x in range(1, 100)}
        | {float(a) for a in range(11, 65)}
    )
)


def rdp_to_epsilon(rdp, orders, delta):
    """Convert a composed RDP curve to epsilon at ``delta``.

    Uses the conversion of Balle, Barthe, Gaboardi, Hsu & Sato (2020, Thm. 21),
    also used by Opacus and Google's dp-accounting:
    ``eps = rdp(a) + log((a-1)/a) - (log(delta) + log(a)) / (a-1)``, minimised
    over the orders.  It is never looser than Mironov's original
    ``rdp(a) + log(1/delta)/(a-1)``.
    """
    rdp = np.asarray(rdp, dtype=float)
    orders = np.asarray(orders, dtype=float)
    if delta <= 0:
        return math.inf
    with np.errstate(over="ignore", invalid="ignore"):
        eps = rdp + np.log1p(-1.0 / orders) - (np.log(delta) + np.log(orders)) / (orders - 1)
    eps = eps[np.isfinite(eps)]
    if eps.size == 0:
        return math.inf
    return float(max(0.0, eps.min()))


def zcdp_to_epsilon(rho, delta):
    """Convert rho-zCDP to (epsilon, delta)-DP: ``rho + 2 sqrt(rho log(1/delta))``.

    Bun & Steinke (2016), Prop. 1.3; the conversion used for the CDP budget of
    Park et al. (DP-EM), Section 4.
    """
    if rho == 0:
        return 0.0
    if delta <= 0:
        return math.inf
    return float(rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)))


def advanced_composition_epsilon(epsilons, delta_prime):
    """Advanced composition of pure epsilons, heterogeneous form.

    Dwork & Roth (2014) Thm. 3.20 (Cor. 3.21 for equal epsilons), in the
    heterogeneous form of Dwork, Rothblum & Vadhan (2010): the composition of
    mechanisms that are (eps_i, delta_i)-DP is
    ``(sqrt(2 log(1/delta') sum eps_i^2) + sum eps_i (e^eps_i - 1), delta' + sum delta_i)``-DP.
    The result is capped by basic composition ``sum eps_i``, which always holds.
    """
    eps = np.asarray(epsilons, dtype=float)
    basic = float(eps.sum())
    if delta_prime <= 0 or eps.size == 0:
        return basic
    advanced = math.sqrt(2.0 * math.log(1.0 / delta_prime) * float(np.sum(eps**2))) + float(
        np.sum(eps * np.expm1(eps))
    )
    return min(basic, advanced)


def group_guarantee(epsilon, delta, size=2):
    """Guarantee for groups of ``size`` records from a per-record (epsilon, delta).

    Dwork & Roth (2014), Thm. 2.2 with the approximate-DP extension:
    ``(k eps, k e^((k-1) eps) delta)``.  Used to express an add/remove guarantee
    under replace-one neighbours (a replacement is one removal plus one addition).
    """
    return size * epsilon, size * math.exp((size - 1) * epsilon) * delta


def record_share(epsilon, delta, size=2):
    """The per-record ``(epsilon, delta)`` whose :func:`group_guarantee` for ``size`` records is ``(epsilon, delta)``.

    ``(eps / k, delta / (k e^((k-1) eps / k)))``: the share an add/remove
    step of a replace-one composite may spend so that its converted
    guarantee is the composite's share for it.
    """
    per_record = epsilon / size
    return per_record, delta / (size * math.exp((size - 1) * per_record))


def pure_dp_rdp(epsilon, orders):
    """Tight RDP curve of an arbitrary pure ``epsilon``-DP mechanism.

    Every epsilon-DP mechanism is a post-processing of binary randomised
    response with flip probability ``1 / (1 + e^epsilon)`` (Kairouz, Oh &
    Viswanath 2015), so its Renyi divergence of any order is bounded by that of
    randomised response: ``log(p^a q^(1-a) + q^a p^(1-a)) / (a - 1)``.
    """
    orders = np.asarray(orders, dtype=float)
    log_p = -np.logaddexp(0.0, -epsilon)  # log(e^eps / (1 + e^eps))
    log_q = -np.logaddexp(0.0, epsilon)
    log_mgf = np.logaddexp(orders * log_p + (1 - orders) * log_q, orders * log_q + (1 - orders) * log_p)
    return np.minimum(log_mgf / (orders - 1), epsilon)


def gaussian_delta(noise_multiplier, epsilon):
    """Exact delta(epsilon) of the Gaussian mechanism (Balle & Wang 2018, Theorem 8).

    ``delta = Phi(1/(2s) - eps*s) - e^eps * Phi(-1/(2s) - eps*s)`` with ``s`` the
    noise multiplier (std over L2 sensitivity).
    """
    s = noise_multiplier
    a = special.log_ndtr(1.0 / (2 * s) - epsilon * s)
    b = epsilon + special.log_ndtr(-1.0 / (2 * s) - epsilon * s)
    if b >= a:
        return 0.0
    return float(np.exp(a) * -np.expm1(b - a))


def gaussian_epsilon(noise_multiplier, delta):
    """Smallest epsilon with ``gaussian_delta(noise_multiplier, epsilon) <= delta``, to ``1e-12``.

    Brent's root (:func:`skdp.privacy.roots.brentq`, ``xtol=1e-12``), which
    may lie up to ``1e-12`` on either side of the crossing.
    """
    if delta <= 0:
        return math.inf
    if gaussian_delta(noise_multiplier, 0.0) <= delta:
        return 0.0
    hi = 1.0
    while gaussian_delta(noise_multiplier, hi) > delta:
        hi *= 2.0

    def delta_gap(epsilon):
        return gaussian_delta(noise_multiplier, epsilon) - delta

    # Brent's method (skdp.privacy.roots.brentq, scipy's iterates): the root
    # to 1e-12 absolute, on either side of it.  Not moved to the side whose
    # delta meets (brentq_meets): that would move every pinned epsilon by up
    # to 5e-13 for a guarantee already within the accountants' rounding.
    return float(brentq(delta_gap, 0.0, hi, xtol=1e-12))


def gaussian_dp_mu(noise_multipliers, counts=None):
    """mu of the Gaussian differential privacy (GDP) of composed Gaussian mechanisms.

    A Gaussian mechanism adding ``N(0, (z Delta)^2)`` noise to a query of L2
    sensitivity ``Delta`` is exactly ``(1/z)``-GDP (Dong, Roth & Su 2022,
    Thm. 2.7): no test between neighbours has power above
    ``Phi(Phi^-1(alpha) + 1/z)`` at level ``alpha``.  The adaptive
    composition of ``mu_i``-GDP mechanisms is ``sqrt(sum mu_i^2)``-GDP
    (ibid., Cor. 3.3).  This is the exact tradeoff curve of the composition,
    hence what an auditor can test in the bulk of the distributions, where a
    threshold test at ``delta = 1e-5`` sees nothing.

    Parameters
    ----------
    noise_multipliers : sequence of float
        Noise std over L2 sensitivity of each mechanism.
    counts : sequence of int, default=None
        How many times each mechanism was used (1 each by default).

    Returns
    -------
    mu : float
    """
    z = np.asarray(noise_multipliers, dtype=float)
    c = np.ones_like(z) if counts is None else np.asarray(counts, dtype=float)
    if np.any(z <= 0) or np.any(c < 0):
        raise ValueError("noise multipliers must be positive and counts non-negative.")
    return float(math.sqrt(np.sum(c / z**2)))


def _rdp_conversion(rho, log_delta, alpha):
    """Balle et al. (2020, Thm. 21) conversion of the RDP curve ``alpha * rho`` at one order."""
    return alpha * rho + math.log1p(-1.0 / alpha) - (log_delta + math.log(alpha)) / (alpha - 1.0)


@functools.lru_cache(maxsize=4096)
def zcdp_rdp_epsilon(rho, delta):
    """Smallest epsilon at ``delta`` of a mechanism whose RDP curve is ``alpha * rho``.

    Minimises :func:`_rdp_conversion` over real orders ``alpha > 1``: the grid
    :data:`DEFAULT_ORDERS`, the order minimising Mironov's simpler bound
    (``1 + sqrt(log(1/delta) / rho)``) and a bounded scalar search.  Every
    order gives a valid bound, so the smallest one found is valid however
    close it is to the true infimum.  Cached: calibration asks for the same
    values many times.
    """
    if delta <= 0:
        return math.inf
    if rho <= 0:
        return 0.0
    log_delta = math.log(delta)
    candidates = [_rdp_conversion(rho, log_delta, a) for a in DEFAULT_ORDERS]
    candidates.append(_rdp_conversion(rho, log_delta, 1.0 + math.sqrt(-log_delta / rho)))
    # Search over log(alpha - 1): the objective is smooth and unimodal there.
    result = optimize.minimize_scalar(
        lambda t: _rdp_conversion(rho, log_delta, 1.0 + math.exp(t)),
        bounds=(-12.0, 40.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    if np.isfinite(result.fun):
        candidates.append(_rdp_conversion(rho, log_delta, 1.0 + math.exp(result.x)))
    finite = [c for c in candidates if math.isfinite(c)]
    return float(max(0.0, min(finite))) if finite else math.inf
