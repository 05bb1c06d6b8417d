"""Exact RDP of the Poisson-subsampled Gaussian (MTZ 2019, Sec. 3.3) against independent references."""

import logging
import math
import warnings

import numpy as np
import pytest

from skdp.privacy import (
    ADD_REMOVE,
    DEFAULT_ORDERS,
    SubsampledGaussianEvent,
    compose,
    rdp_to_epsilon,
)
from skdp.privacy.accountants import _autodp
from skdp.privacy.accountants import sampled_gaussian_rdp as sg

DELTA = 1e-5
GRID_Q = [0.01, 0.05, 0.2, 0.5]
GRID_SIGMA = [0.6, 1.0, 2.0, 5.0]


def _event(sigma, q, count=1):
    return SubsampledGaussianEvent(
        count=count, neighbouring=ADD_REMOVE, noise_multiplier=sigma, sampling_rate=q
    )


def _mpmath_rdp(q, sigma, alpha):
    """RDP by numerical integration of A_alpha = E_mu0[((1-q) + q mu1/mu0)^alpha] (MTZ19 eq. (3))."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    q, s, a = mp.mpf(q), mp.mpf(sigma), mp.mpf(alpha)

    def integrand(z):
        return mp.npdf(z, 0, s) * ((1 - q) + q * mp.exp((2 * z - 1) / (2 * s * s))) ** a

    z0 = s**2 * mp.log(1 / q - 1) + mp.mpf(1) / 2
    area = mp.quad(integrand, [-mp.inf, -10 * s, 0, z0, z0 + 10 * s, mp.inf])
    return float(mp.log(area) / (a - 1))


# --- the two series against the integer closed form ------------------------------------------


@pytest.mark.parametrize("q", GRID_Q)
@pytest.mark.parametrize("sigma", GRID_SIGMA)
def test_fractional_series_equals_integer_closed_form_at_integer_orders(q, sigma):
    alphas = np.array([2.0, 3.0, 5.0, 10.0, 32.0])
    frac = sg.log_a_fractional(q, sigma, alphas) / (alphas - 1)
    closed = np.array([sg.log_a_integer(q, sigma, a) for a in alphas]) / (alphas - 1)
    np.testing.assert_allclose(frac, closed, rtol=1e-10)


def test_integer_closed_form_by_hand():
    # alpha = 2: A = (1-q)^2 + 2q(1-q) + q^2 e^{1/sigma^2} = 1 + q^2 (e^{1/sigma^2} - 1).
    q, sigma = 0.1, 1.5
    expected = math.log1p(q**2 * math.expm1(1 / sigma**2))
    assert sg.sampled_gaussian_rdp(sigma, q, [2.0])[0] == pytest.approx(expected, rel=1e-13)


# --- against Opacus and dp-accounting -------------------------------------------------------


@pytest.mark.parametrize("q", GRID_Q)
@pytest.mark.parametrize("sigma", GRID_SIGMA)
def test_matches_opacus_compute_rdp(q, sigma):
    rdp = pytest.importorskip("opacus.accountants.analysis.rdp")
    orders = [1.5, 1.75, 2.0, 2.5, 3.7, 7.5, 12.0, 12.5, 30.5, 64.0]
    ours = sg.sampled_gaussian_rdp(sigma, q, orders)
    theirs = rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=orders)
    np.testing.assert_allclose(ours, theirs, rtol=1e-8)


@pytest.mark.parametrize("q", GRID_Q)
@pytest.mark.parametrize("sigma", GRID_SIGMA)
def test_dp_accounting_equal_at_integers_and_looser_at_fractions(q, sigma):
    # dp-accounting 0.6 sums |binom(alpha, i)| times the terms in its
    # fractional series: an upper bound of the alternating series, never below
    # the exact value, and equal to it where no coefficient is negative.
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting import rdp as dpa_rdp

    orders = [2.0, 3.0, 8.0, 1.5, 2.5, 3.7, 12.5]
    acc = dpa_rdp.RdpAccountant(orders)
    logging.disable(logging.WARNING)  # it logs (and drops) orders it cannot sum
    try:
        acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), 1)
    finally:
        logging.disable(logging.NOTSET)
    ours = sg.sampled_gaussian_rdp(sigma, q, orders)
    np.testing.assert_allclose(ours[:3], acc._rdp[:3], rtol=1e-10)
    assert np.all(ours[3:] <= acc._rdp[3:] * (1 + 1e-10))


@pytest.mark.parametrize(
    "q,sigma,alpha",
    [
        (0.001, 0.5, 1.05),
        (0.001, 5.0, 1.1),
        (0.01, 10.0, 1.1),
        (0.05, 1.0, 1.3),
        (0.2, 2.0, 2.5),
        (0.5, 0.7, 6.5),
    ],
)
def test_matches_numerical_integration(q, sigma, alpha):
    # Independent of every series: here, at small q and alpha near 1, Opacus'
    # absolute stopping rule leaves errors up to 1e-6 relative; ours stays at
    # the float64 limit (A_alpha - 1 ~ 1e-9 carries ~1e-8 relative rounding).
    assert sg.sampled_gaussian_rdp(sigma, q, [alpha])[0] == pytest.approx(
        _mpmath_rdp(q, sigma, alpha), rel=1e-8
    )


# --- properties and bad input ---------------------------------------------------------------


def test_no_subsampling_is_the_gaussian():
    orders = np.array([1.5, 2.0, 7.25])
    np.testing.assert_allclose(sg.sampled_gaussian_rdp(2.0, 1.0, orders), orders / 8.0, rtol=1e-15)


def test_curve_grows_with_order_and_q_and_shrinks_with_sigma():
    orders = np.asarray(DEFAULT_ORDERS)
    base = sg.sampled_gaussian_rdp(1.0, 0.05, orders)
    assert np.all(np.diff(base) >= -1e-15)  # RDP is non-decreasing in alpha (Mironov 2017, Prop. 9)
    assert np.all(sg.sampled_gaussian_rdp(1.0, 0.1, orders) > base)
    assert np.all(sg.sampled_gaussian_rdp(0.5, 0.05, orders) > base)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"noise_multiplier": 0.0},
        {"noise_multiplier": np.inf},
        {"sampling_rate": 0.0},
        {"sampling_rate": 1.5},
        {"orders": [1.0, 2.0]},
        {"orders": [np.nan]},
    ],
)
def test_bad_input(kwargs):
    args = {"noise_multiplier": 1.0, "sampling_rate": 0.1, "orders": [2.0], **kwargs}
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=name):
        sg.sampled_gaussian_rdp(**args)


def test_unconverged_series_falls_back_to_autodp(monkeypatch):
    monkeypatch.setattr(sg, "_MAX_TERMS", 256)
    assert np.isinf(sg.log_a_fractional(0.2, 0.6, [1.1])[0])
    # A sigma no other test uses, so the adapter's cache cannot answer.
    sigma, q, orders = 0.61234, 0.2, (1.1, 1.25, 3.0)
    got = _autodp.subsampled_gaussian_rdp(sigma, q, True, orders)
    autodp_only = _autodp._subsampled_gaussian_rdp(sigma, q, True, orders)
    assert np.all(np.isfinite(got))
    assert got[0] == autodp_only[0]  # 1.1: the exact series gave up, autodp alone
    assert got[1] == pytest.approx(min(autodp_only[1], sg.sampled_gaussian_rdp(sigma, q, [1.25])[0]))


# --- routing through the accountant ---------------------------------------------------------


def test_accountant_uses_the_minimum_of_exact_and_autodp():
    sigma, q, steps = 1.0532, 64 / 1347, 631
    orders = np.asarray(DEFAULT_ORDERS)
    exact = sg.sampled_gaussian_rdp(sigma, q, orders)
    picked = [o in _autodp._AUTODP_POISSON_ORDERS for o in DEFAULT_ORDERS]
    autodp = np.full(orders.shape, np.inf)
    autodp[picked] = _autodp._subsampled_gaussian_rdp(sigma, q, True, tuple(orders[picked]))
    expected = rdp_to_epsilon(steps * np.minimum(exact, autodp), orders, DELTA)
    assert compose([_event(sigma, q, steps)], DELTA, "rdp").epsilon == pytest.approx(expected, rel=1e-12)
    # The exact curve is what lowers epsilon: autodp alone (on its own grid) is looser.
    assert expected < rdp_to_epsilon(steps * autodp[picked], orders[picked], DELTA) * (1 - 1e-3)


# Issue 7's digits benchmark: q = 64/1347, 30 epochs (631 steps) or 3 (63),
# noise multipliers our calibration gives at epsilon 0.5 / 1 / 2 / 8.
ISSUE7 = [
    (9.2526, 64 / 1347, 631),
    (4.9545, 64 / 1347, 631),
    (2.7302, 64 / 1347, 631),
    (1.0532, 64 / 1347, 631),
    (3.2032, 64 / 1347, 63),
    (1.9019, 64 / 1347, 63),
    (1.2649, 64 / 1347, 63),
    (0.6819, 64 / 1347, 63),
    # issue 7's accountant test and a larger data set
    (1.0, 0.01, 1000),
    (2.0, 0.25, 40),
    (0.8, 0.05, 200),
    (0.6764, 256 / 60000, 2344),
]


@pytest.mark.parametrize("sigma,q,steps", ISSUE7)
def test_total_epsilon_matches_opacus_rdp_accountant(sigma, q, steps):
    pytest.importorskip("opacus")
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    acc.history = [(sigma, q, steps)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns when its optimum is its largest order
        theirs = acc.get_epsilon(DELTA)
    ours = compose([_event(sigma, q, steps)], DELTA, "rdp").epsilon
    assert ours == pytest.approx(theirs, rel=0.005)


def test_fractional_orders_at_a_large_noise_take_the_next_integer_orders_bound():
    # Beyond _MAX_FRACTIONAL_SERIES the fractional series (tens of thousands
    # of terms per order at sigma 100) is replaced by the next integer order's
    # exact value: an upper bound, since the curve is non-decreasing in the
    # order, and equal to the series' value at integer orders.
    from skdp.privacy.accountants.sampled_gaussian_rdp import (
        _MAX_FRACTIONAL_SERIES,
        log_a_fractional,
        log_a_integer,
        sampled_gaussian_rdp,
    )

    q, sigma = 256 / 20000, 100.0
    assert sigma**2 * (np.log1p(-q) - np.log(q)) > _MAX_FRACTIONAL_SERIES
    orders = np.array([1.5, 2.5, 10.25])
    bounded = sampled_gaussian_rdp(sigma, q, orders)
    ceil = np.ceil(orders)
    expected = np.array([log_a_integer(q, sigma, a) for a in ceil]) / (ceil - 1)
    np.testing.assert_allclose(bounded, expected, rtol=1e-12)
    exact = log_a_fractional(q, sigma, orders) / (orders - 1)
    assert np.all(bounded >= exact * (1 - 1e-9))


@pytest.mark.parametrize("order", [2.0, 3.0, 18.0, 64.0, 1024.0, 2.5, 1.25])
def test_one_order_path_equals_the_array_path_to_the_bit(order):
    # A staged plan calibrates at one order, through the scalar path for a
    # one-order tuple; it must give exactly what the array path gives (a
    # calibrated multiplier, hence a seeded release, depends on every bit).
    rng = np.random.default_rng(int(order * 4))
    for _ in range(100):
        sigma = float(np.exp(rng.uniform(np.log(0.05), np.log(200.0))))
        q = float(np.exp(rng.uniform(np.log(1e-6), np.log(0.99))))
        with np.errstate(all="ignore"):
            one = sg.sampled_gaussian_rdp(sigma, q, (order,))
            many = sg.sampled_gaussian_rdp(sigma, q, np.array([order, 1.5]))
        assert one.shape == (1,) and one.dtype == np.float64
        assert one[0] == many[0] or (np.isinf(one[0]) and np.isinf(many[0])), (sigma, q)
