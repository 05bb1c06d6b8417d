"""RDP of the Gaussian mechanism on a fixed-size batch drawn without replacement, as arrays.

Wang, Balle & Kasiviswanathan (2019), "Subsampled Renyi differential privacy
and analytical moments accountant", AISTATS, Thm. 27 (the improved bound for
mechanisms with a tight, order-uniform worst pair, which the Gaussian is): for
an integer order ``alpha`` and sampling ratio ``gamma`` the subsampled
mechanism's cumulant ``(alpha - 1) eps'(alpha)`` is at most

.. math::

    \\log\\Big(1 + \\gamma^2 \\binom{\\alpha}{2}
        \\min\\{4 (e^{\\epsilon(2)} - 1), 2 e^{\\epsilon(2)}\\}
      + \\sum_{j=3}^{\\alpha} \\gamma^j \\binom{\\alpha}{j}
        \\min\\{4 \\sqrt{|\\Delta^{2\\lfloor j/2\\rfloor}|\\,
                          |\\Delta^{2\\lceil j/2\\rceil}|},
                2 e^{(j - 1)\\epsilon(j)}\\}\\Big),

with ``epsilon(a) = a / (2 sigma^2)`` the Gaussian's RDP and ``Delta^k`` the
k-th forward difference of ``exp((l - 1) eps(l))`` (the paper's Eq. 9).  A
fractional order interpolates the cumulant linearly between its integer
neighbours (a valid bound: the cumulant is convex in the order).

This module evaluates autodp's implementation of that bound
(``anaRDPacct.compose_subsampled_mechanism(..., improved_bound_flag=True)``,
autodp 0.2.3) with the same floating-point operations, a whole order grid at a
time.  autodp evaluates it term by term in Python and tabulates every integer
order to 100 on each call (0.1 s per curve); calibrating a noise multiplier
evaluates a dozen curves and a private search calibrates every trial, so a
search over DP-SEP spent 20 of its 22 s here.  The values are autodp's
(tests/privacy/test_wor_gaussian_rdp.py checks them to 1e-12 relative on a
grid of multipliers, ratios and orders), including its choices:

* the forward differences are those of ``autodp.utils.get_forward_diffs``
  (repeated differences in log scale of the sequence ``1, exp(cgf(0)),
  exp(cgf(1)), ...``, tabulated to order ``_TABLED = 100``);
* orders above ``_TABLED`` use only the second branch of each minimum (the
  paper's Thm. 9 terms, autodp's "linear" path), orders above
  ``_LINEAR_MAX = 10000`` get ``inf``.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.special import gammaln

#: autodp's ``anaRDPacct(m=100)``: forward differences tabulated to this order.
_TABLED = 100
#: autodp's ``m_lin_max``: no bound above this order.
_LINEAR_MAX = 10000
_LOG2 = np.log(2)
_LOG4 = np.log(4)


def _forward_differences(log_values):
    """``log |Delta^(i+1) s|`` at 0 for ``s = exp(log_values)`` (positive), for every ``i``.

    autodp's ``get_forward_diffs`` with its in-place pass
    (``stable_inplace_diff_in_log``) done a whole pass at a time: within one
    pass each entry reads only the previous pass's entries ``j`` and ``j + 1``,
    so the pass is elementwise.
    """
    vec = np.asarray(log_values, dtype=float).copy()
    signs = np.ones(vec.size, dtype=bool)
    out = np.empty(vec.size - 1)
    with np.errstate(all="ignore"):
        for i in range(vec.size - 1):
            n = vec.size - 1 - i
            x, y = vec[:n], vec[1 : n + 1]
            sx, sy = signs[:n], signs[1 : n + 1]
            same = sx == sy
            # stable_log_diff_exp(x, y): log |e^y - e^x| with sign of e^y - e^x.
            up = y > x
            down = y < x
            mag = np.where(
                up, y + np.log(1 - np.exp(x - y)), np.where(down, x + np.log(1 - np.exp(y - x)), -np.inf)
            )
            diff_sign = np.where(up | ~down, True, False)
            diff_sign = np.where(sy, diff_sign, ~diff_sign)
            # stable_logsumexp_two(x, y) where the signs differ.
            a = np.maximum(x, y)
            total = a + np.log(np.exp(x - a) + np.exp(y - a))
            vec[:n] = np.where(same, mag, total)
            signs[:n] = np.where(same, diff_sign, sy)
            out[i] = vec[0]
    return out


@functools.lru_cache(maxsize=4096)
def _cumulants(noise_multiplier: float, sampling_rate: float, integer_orders: tuple) -> dict:
    """Bound on ``(alpha - 1) eps'(alpha)`` at each integer order (module docstring)."""
    half_inv_var = 0.5 / noise_multiplier**2

    def rdp(a):  # autodp's RDP_gaussian: 0.5 / sigma ** 2 * alpha
        return half_inv_var * a

    def cgf(x):
        return x * rdp(x + 1)

    # get_forward_diffs(cgf, 100): the sequence is [0, cgf(0), ..., cgf(101)] in log scale.
    seq = np.concatenate([[0.0], cgf(np.arange(_TABLED + 2, dtype=float))])
    deltas = _forward_differences(seq)
    with np.errstate(divide="ignore"):
        log_q = np.log(sampling_rate)
    f2 = rdp(2.0)
    # eps_inf = inf for the Gaussian: min(2 (eps_inf + log(1 - e^-eps_inf)), log 2) = log 2.
    second_factor = np.minimum(_LOG4 + f2 + np.log(1 - np.exp(-f2)), f2 + _LOG2)
    out = {}
    for mm in integer_orders:
        if mm > _LINEAR_MAX:
            out[mm] = np.inf
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            moments_two = 2 * log_q + _logcomb(mm, 2) + second_factor
            j = np.arange(3, mm + 1)
            linear = _LOG2 + cgf(j - 1.0)
            if mm <= _TABLED:
                lo = deltas[(2 * np.floor(j / 2.0)).astype(int) - 1]
                hi = deltas[(2 * np.ceil(j / 2.0)).astype(int) - 1]
                first = np.minimum(_LOG4 + 0.5 * lo + 0.5 * hi, linear)
            else:
                first = linear
            moments = first + j * log_q + _logcomb(mm, j)
            terms = np.concatenate([[0.0, moments_two], moments])
            top = np.max(terms)
            out[mm] = top + np.log(np.sum(np.exp(terms - top)))
    return out


def _logcomb(n, k):
    return gammaln(n + 1) - gammaln(n - k + 1) - gammaln(k + 1)


def wor_subsampled_gaussian_rdp(noise_multiplier, sampling_rate, orders):
    """RDP curve of the Gaussian on a batch of ratio ``sampling_rate`` drawn without replacement.

    Replace-one neighbours (Wang, Balle & Kasiviswanathan 2019, Thm. 27; the
    module docstring).  Equal to autodp's ``AmplificationBySampling(
    PoissonSampling=False)(GaussianMechanism(sigma), q, improved_bound_flag=True)
    .RenyiDP`` at every order >= 1.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the L2 sensitivity.
    sampling_rate : float
        Batch size over the number of rows, in [0, 1].
    orders : array-like of float
        Renyi orders, each >= 1.

    Returns
    -------
    ndarray
        The RDP epsilon at each order.
    """
    z = float(noise_multiplier)
    q = float(sampling_rate)
    orders = np.asarray(orders, dtype=float)
    if q == 1.0:
        return 0.5 / z**2 * orders
    ints = sorted(
        {2} | {int(np.floor(a)) for a in orders if a > 2} | {int(np.ceil(a)) for a in orders if a > 2}
    )
    cum = _cumulants(z, q, tuple(ints))
    out = np.empty(orders.size)
    for i, x in enumerate(orders):
        # autodp's subsample_func (epsinf = inf for the Gaussian).
        if 1.0 <= x <= 2.0:
            out[i] = cum[2] / (2.0 - 1)
        elif x % 1 == 0:
            out[i] = cum[int(x)] / (x - 1)
        else:
            xf, xc = np.floor(x), np.ceil(x)
            interp = ((x - xf) * cum[int(xc)] + (1 - (x - xf)) * cum[int(xf)]) / (x - 1)
            out[i] = min(0.5 / z**2 * x, interp)
    return out
