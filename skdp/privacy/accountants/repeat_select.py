"""Private selection by random repetition (Papernot & Steinke 2022): the event and its RDP curve.

A *trial* ``Q`` is any DP algorithm whose output carries a score (a
candidate model and its noisy validation score).  The repeat-and-select
algorithm ``A`` draws a random number of trials ``K`` from a distribution
independent of the data, runs ``K`` independent copies of ``Q`` and outputs
only the best (by score) of their outputs.  Papernot & Steinke (2022) bound
the Renyi DP of ``A`` by that of one trial:

* ``K`` truncated negative binomial ``D_{eta, gamma}`` (their Definition 1;
  ``eta = 0`` is the logarithmic distribution, ``eta = 1`` the geometric),
  **Theorem 2**: if ``Q`` is ``(lambda, eps)``- and ``(lambda_hat, eps_hat)``-RDP,
  ``A`` is ``(lambda, eps')``-RDP with
  ``eps' = eps + (1 + eta) ((1 - 1/lambda_hat) eps_hat + log(1/gamma) / lambda_hat) + log(E[K]) / (lambda - 1)``;
  minimised here over ``lambda_hat`` on the grid of orders, then made
  non-decreasing in ``lambda`` (RDP is monotone in the order, so the bound at
  a larger order holds at a smaller one).
* ``K ~ Poisson(mu)``, **Theorem 6**: if ``Q`` is ``(lambda, eps)``-RDP and
  ``(eps_hat, delta_hat)``-DP with ``eps_hat = log(1 + 1/(lambda - 1))``,
  ``A`` is ``(lambda, eps + mu delta_hat + log(mu) / (lambda - 1))``-RDP;
  ``delta_hat`` comes from ``Q``'s own RDP curve (the conversion of Canonne,
  Kamath & Steinke 2020, Prop. 12, and the total-variation bound
  ``sqrt(1 - exp(-KL))``).  ``K = 0`` outputs nothing (``A``'s ``bottom``).

This is the computation of Google's dp-accounting
(``_compute_rdp_repeat_and_select`` for its ``RepeatAndSelectDpEvent``),
mirrored order for order and cross-checked against it in the tests.

A trial that first draws its candidate uniformly from a finite list and then
runs that candidate's DP fit is a *mixture*; since its output names the
candidate, its Renyi divergence of order ``lambda`` is
``log(mean_c exp((lambda - 1) D_c)) / (lambda - 1) <= max_c D_c``, so the
pointwise maximum of the candidates' curves is an RDP curve of the trial.

References
----------
N. Papernot, T. Steinke. Hyperparameter tuning with Renyi differential
privacy. ICLR 2022 (arXiv:2110.03620).

J. Liu, K. Talwar. Private selection from private candidates. STOC 2019.
"""

from __future__ import annotations

import math

import numpy as np

# The events live with every other event; importable from here as well.
from ..events import POISSON, RepeatAndSelectEvent, WeakTrianglePoissonEvent
from ..roots import bracket, illinois_bracket

__all__ = [
    "POISSON",
    "RepeatAndSelectEvent",
    "WeakTrianglePoissonEvent",
    "repeat_and_select_rdp",
    "truncated_negative_binomial_gamma",
    "truncated_negative_binomial_mean",
]


def truncated_negative_binomial_mean(gamma, shape):
    """``E[K]`` of Papernot & Steinke's ``D_{eta, gamma}`` (their Definition 1 and Sec. 2.2)."""
    if shape == 1:
        return 1.0 / gamma
    if shape == 0:
        # Logarithmic: (1/gamma - 1) / log(1/gamma).
        return (1.0 / gamma - 1.0) / math.log(1.0 / gamma) if gamma < 1 else 1.0
    if gamma == 1:
        return 1.0
    return shape * (1.0 / gamma - 1.0) / (1.0 - gamma**shape)


def truncated_negative_binomial_gamma(shape, mean, tolerance=1e-9):
    """``gamma`` of ``D_{eta, gamma}`` with mean ``mean``: the smaller end of a bracket, to ``tolerance``.

    The mean decreases in ``gamma``; returning the lower end of the final
    bracket (:func:`skdp.privacy.roots.illinois_bracket`, an evaluated
    ``gamma`` whose mean is above ``mean``) errs towards a larger mean,
    hence a larger ``log(1/gamma)`` in Theorem 2 (dp-accounting's
    conservative choice).
    """
    if shape == 1:
        return 1.0 / mean

    def mean_at(gamma):
        return truncated_negative_binomial_mean(gamma, shape)

    hi = min(1.0, 2.0 * (shape + 1.0) / mean)
    lo, hi = bracket(mean_at, mean, 0.5 * hi, hi, up=2.0, down=0.5, lowest=0.0, highest=1.0)
    return illinois_bracket(mean_at, mean, lo, hi, rtol=tolerance, max_evals=None)[0]


def _rdp_delta(orders, rdp, epsilon):
    """``delta`` at ``epsilon`` of an RDP curve (dp-accounting's ``compute_delta``)."""
    best = math.inf
    for a, r in zip(orders, rdp, strict=True):
        if not math.isfinite(r):
            continue
        # Total variation <= sqrt(1 - exp(-KL)) and KL <= D_a for a >= 1.
        log_delta = -math.inf if r <= 0 else 0.5 * math.log1p(-math.exp(-r))
        if a > 1.01:
            # Canonne, Kamath & Steinke (2020), Prop. 12.
            log_delta = min(log_delta, (a - 1) * (r - epsilon + math.log1p(-1 / a)) - math.log(a))
        best = min(best, log_delta)
    return min(math.exp(best), 1.0)


def repeat_and_select_rdp(orders, trial_rdp, mean, shape):
    """RDP curve of the best of ``K`` trials, from one trial's curve (module docstring).

    Parameters
    ----------
    orders : array of float
        Renyi orders (> 1).
    trial_rdp : array of float
        One trial's RDP curve on ``orders``.
    mean : float
        ``E[K]``.
    shape : float
        ``eta`` of the truncated negative binomial, or ``inf`` for Poisson.

    Returns
    -------
    rdp : ndarray
        The procedure's RDP curve on ``orders`` (``inf`` at orders <= 1).
    """
    orders = np.asarray(orders, dtype=float)
    trial_rdp = np.asarray(trial_rdp, dtype=float)
    out = np.full_like(orders, np.inf)
    valid = orders > 1
    if shape == POISSON:
        # Theorem 6.
        for i in np.flatnonzero(valid):
            eps_hat = math.log1p(1.0 / (orders[i] - 1.0))
            delta_hat = _rdp_delta(orders, trial_rdp, eps_hat)
            out[i] = trial_rdp[i] + mean * delta_hat + math.log(mean) / (orders[i] - 1.0)
        return out
    # Theorem 2, minimised over lambda_hat on the grid.
    gamma = truncated_negative_binomial_gamma(shape, mean)
    with np.errstate(invalid="ignore"):
        inner = (1.0 - 1.0 / orders) * trial_rdp - math.log(gamma) / orders
    constant = (1.0 + shape) * np.min(inner[np.isfinite(inner)]) if np.isfinite(inner).any() else np.inf
    out[valid] = trial_rdp[valid] + math.log(mean) / (orders[valid] - 1.0) + constant
    # Monotonicity of RDP in the order: the bound at any larger order holds.
    return np.array([out[orders >= a].min() for a in orders])
