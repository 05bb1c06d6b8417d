"""skdp.privacy.centring: the private centre and norm bound of ``data_norm="auto"``."""

import math

import numpy as np
import pytest

from skdp.privacy import GaussianEvent, LaplaceEvent, PrivacyLedger, PureDPEvent
from skdp.privacy.centring import (
    AUTO_MAX_QUANTILE,
    AUTO_MIN_QUANTILE,
    QUANTILE_SHARE,
    auto_norm_quantile,
    calibrate_after_bounds,
    calibrate_auto_bounds,
    private_centring,
)
from skdp.privacy.ledger import compose
from skdp.privacy.quantiles import norm_grid, private_norm_bound


def in_memory(X):
    def reduce(fn, *params):
        return fn(X, *params)

    return reduce


def test_bounds_cost_their_share():
    """The three releases compose to (b epsilon, b delta) by the basic theorem; quantiles QUANTILE_SHARE / 2 each."""
    from skdp.privacy.accountants.conversions import gaussian_epsilon

    bounds = calibrate_auto_bounds(2.0, 1e-5, 0.1)
    events = bounds.events()
    assert [type(e) for e in events] == [PureDPEvent, GaussianEvent]
    assert events[0].count == 2 and events[0].epsilon == pytest.approx(QUANTILE_SHARE * 0.2 / 2)
    # The centre's Gaussian gets the rest at the whole share's delta (its exact profile, Balle & Wang).
    assert gaussian_epsilon(bounds.centre_multiplier, 1e-6) == pytest.approx(0.1, rel=1e-4)
    assert compose(events, 1e-6, "basic").epsilon <= 0.2 * (1 + 1e-9)
    assert compose(events, 1e-6, "pld").epsilon <= 0.2 * (1 + 1e-6)  # tight: never above basic
    # Small budgets too (an RDP conversion cannot certify 0.01 at delta 1e-6).
    assert calibrate_auto_bounds(0.1, 1e-5, 0.1).centre_multiplier > 0
    laplace = calibrate_auto_bounds(2.0, 0.0, 0.1).events()
    assert type(laplace[1]) is LaplaceEvent
    # Laplace under basic composition: exactly 1 / multiplier each.
    assert 2 * laplace[0].epsilon + 1 / laplace[1].noise_multiplier == pytest.approx(0.2, rel=1e-5)


def test_estimator_plan_after_bounds_meets_the_request():
    bounds = calibrate_auto_bounds(1.0, 1e-5, 0.1)

    def plan(z):
        return [GaussianEvent(count=10, neighbouring="replace_one", noise_multiplier=z)]

    z = calibrate_after_bounds(plan, bounds, 1.0, 1e-5, "pld")
    assert compose(bounds.events() + plan(z), 1e-5, "pld").epsilon <= 1.0 * (1 + 1e-9)
    # At least what (1 - b) epsilon buys alone, and less than the whole budget buys.
    assert z <= calibrate_after_bounds(plan, None, 0.9, 0.9e-5, "pld") * (1 + 1e-6)
    assert z > calibrate_after_bounds(plan, None, 1.0, 1e-5, "pld")


def test_auto_quantile_rule():
    """The margin n (1 - q) = 2 ln(K / 0.05) / epsilon, within [0.5, 0.99]."""
    cells = norm_grid().size - 1
    n, eps = 10_000, 0.1
    assert 1 - auto_norm_quantile(n, eps) == pytest.approx(2 * math.log(cells / 0.05) / (eps * n))
    assert auto_norm_quantile(10**9, 1.0) == AUTO_MAX_QUANTILE
    assert auto_norm_quantile(100, 0.01) == AUTO_MIN_QUANTILE


def test_centring_matches_core_quantile_and_records_its_events():
    """R0 is the core's private_norm_bound (the same draw from the same stream); three events."""
    X = np.random.default_rng(0).normal(5.0, 1.0, size=(3000, 4))
    bounds = calibrate_auto_bounds(4.0, 1e-5, 0.5)
    ledger = PrivacyLedger()
    centre, bound = private_centring(in_memory(X), 3000, 4, bounds, np.random.default_rng(1), ledger)
    q = auto_norm_quantile(3000, bounds.quantile_epsilon)
    norms = np.linalg.norm(X, axis=1)
    raw = private_norm_bound(norms, q, bounds.quantile_epsilon, np.random.default_rng(1), PrivacyLedger())
    assert np.quantile(norms, q - 0.1) <= raw <= norms.max() * 1.1
    assert [type(e) for e in ledger.events] == [PureDPEvent, GaussianEvent, PureDPEvent]
    np.testing.assert_allclose(centre, 5.0, atol=0.5)
    centred = np.linalg.norm(X - centre, axis=1)
    assert np.quantile(centred, q - 0.1) <= bound <= np.quantile(centred, min(q + 0.05, 1.0)) * 1.2


def test_centre_noise_scale():
    """The centre's noise has std 2 R0 z / n per coordinate; fails if it is halved (or doubled).

    All-zero rows: R0 is the upper end of the grid's first cell whatever the
    draw (every rank count is n there), the exact mean is 0, so
    ``c n / (2 R0 z)`` is standard normal in each of the d coordinates.
    """
    n, d = 2000, 400
    bounds = calibrate_auto_bounds(30.0, 1e-5, 0.5)
    centre, _ = private_centring(
        in_memory(np.zeros((n, d))), n, d, bounds, np.random.default_rng(3), PrivacyLedger()
    )
    r0 = norm_grid()[1]
    z = bounds.centre_multiplier
    assert np.linalg.norm(centre) < r0  # not projected: the residual is the noise itself
    std = np.std(centre * n / (2 * r0 * z))
    # Sample std of d = 400 normals: sd about 1 / sqrt(2 d) = 0.035; 5 of those.
    assert abs(std - 1.0) < 5 / math.sqrt(2 * d)


def test_centring_without_centre():
    X = np.random.default_rng(0).normal(size=(5000, 3))
    bounds = calibrate_auto_bounds(2.0, 1e-5, 0.2, centre=False)
    ledger = PrivacyLedger()
    centre, bound = private_centring(in_memory(X), 5000, 3, bounds, np.random.default_rng(0), ledger)
    assert not centre.any()
    assert [type(e) for e in ledger.events] == [PureDPEvent]
    assert ledger.events[0].epsilon == pytest.approx(0.4)
    assert 1.0 < bound < 6.0


def test_warns_when_no_quantile_can_be_located():
    """epsilon n below 4 ln(K / 0.05): a UserWarning about the public n and epsilon, nothing else."""
    from skdp.privacy.centring import can_locate_quantile

    cells = norm_grid().size - 1
    threshold = 4 * math.log(cells / 0.05)
    assert can_locate_quantile(1000, 1.01 * threshold / 1000)
    assert not can_locate_quantile(1000, 0.99 * threshold / 1000)
    bounds = calibrate_auto_bounds(1.0, 1e-5, 0.1)
    X = np.random.default_rng(0).normal(size=(150, 2))
    with pytest.warns(UserWarning, match="n_samples=150") as caught:
        private_centring(in_memory(X), 150, 2, bounds, np.random.default_rng(0), PrivacyLedger())
    assert len(caught) == 1


def test_scale_quantile_fixes_the_level_of_R_only():
    """``scale_quantile`` moves R to that quantile of ||x - c||; R0, the centre and the events are unchanged.

    At n = 20,000 and a large epsilon the "auto" level is 0.99, far above the
    median: a scale_quantile that were ignored would release R near the 99th
    percentile and fail the bracket below.
    """
    n = 20_000
    X = np.random.default_rng(0).normal(3.0, 1.0, size=(n, 8))
    bounds = calibrate_auto_bounds(10.0, 1e-5, 0.1)
    assert auto_norm_quantile(n, bounds.quantile_epsilon) == AUTO_MAX_QUANTILE
    auto_ledger, median_ledger = PrivacyLedger(), PrivacyLedger()
    c_auto, r_auto = private_centring(in_memory(X), n, 8, bounds, np.random.default_rng(1), auto_ledger)
    c_med, r_med = private_centring(
        in_memory(X), n, 8, bounds, np.random.default_rng(1), median_ledger, scale_quantile=0.5
    )
    np.testing.assert_array_equal(c_auto, c_med)  # the same R0 and centre draws
    assert median_ledger.events == auto_ledger.events
    centred = np.linalg.norm(X - c_med, axis=1)
    # The grid's cells are about 5 % wide; the mechanism is within a few records of the target.
    assert np.quantile(centred, 0.45) / 1.06 <= r_med <= np.quantile(centred, 0.55) * 1.06
    assert r_auto >= np.quantile(centred, 0.95)
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="scale_quantile"):
            private_centring(in_memory(X), n, 8, bounds, np.random.default_rng(1), PrivacyLedger(), scale_quantile=bad)
