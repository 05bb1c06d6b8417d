"""The core's private quantiles: norm bounds and boxes for ``"auto"`` bounds, and the box clip."""

import math

import numpy as np
import pytest
from scipy import stats

from skdp.privacy import PrivacyLedger
from skdp.privacy.clipping import clip_box
from skdp.privacy.quantiles import norm_grid, private_box, private_norm_bound, rank_counts

#: Significance of the statistical checks (one false alarm in 10^4 runs).
ALPHA = 1e-4


def test_norm_bound_probabilities_follow_the_exponential_mechanism():
    # Ten norms of 1.5 on the public grid 0..4: the cells' distances to the
    # target rank 9 (quantile 0.9) are 9, 0, 1, 1, so the draw frequencies of
    # the cells' upper ends must follow exp(-eps * distance / 2).  Halving the
    # noise (eps doubled) moves the expected counts by far more than chance.
    grid = np.arange(5.0)
    norms = np.full(10, 1.5)
    eps, draws = 1.0, 4000
    rng = np.random.default_rng(0)
    ledger = PrivacyLedger(composition="basic")
    out = np.array([private_norm_bound(norms, 0.9, eps, rng, ledger, grid=grid) for _ in range(draws)])
    distance = np.array([9.0, 0.0, 1.0, 1.0])
    p = np.exp(-eps * distance / 2)
    p /= p.sum()
    observed = np.array([np.sum(out == upper) for upper in (1.0, 2.0, 3.0, 4.0)])
    assert observed.sum() == draws
    assert stats.chisquare(observed, p * draws).pvalue > ALPHA
    q = np.exp(-2 * eps * distance / 2)
    q /= q.sum()
    assert stats.chisquare(observed, q * draws).pvalue < ALPHA
    assert len(ledger) == draws and ledger.privacy_spent(0.0).epsilon == pytest.approx(draws * eps)


def test_norm_bound_counts_nan_and_inf_above_every_candidate():
    grid = np.arange(5.0)
    counts_clean = rank_counts(np.full((10, 1), np.inf), grid)
    assert np.all(counts_clean == 0)
    rng = np.random.default_rng(1)
    ledger = PrivacyLedger(composition="basic")
    # All norms non-finite: the quantile lies above the grid, so at large
    # epsilon the last cell (upper end 4) is drawn.
    out = private_norm_bound(np.array([np.nan] * 5 + [np.inf] * 5), 0.5, 50.0, rng, ledger, grid=grid)
    assert out == 4.0


def test_norm_bound_locates_a_quantile_on_the_default_grid():
    rng = np.random.default_rng(2)
    norms = np.abs(rng.normal(size=5000)) * 3.0
    ledger = PrivacyLedger(composition="basic")
    bound = private_norm_bound(norms, 0.95, 1.0, rng, ledger)
    true = np.quantile(norms, 0.95)
    # A cell of the log grid is 4.7 % wide; at eps = 1 on 5,000 rows the
    # rank error is a few dozen rows, a fraction of a percent in value here.
    assert true <= bound * 1.0001 and bound <= true * 1.10
    assert norm_grid()[0] == 0.0 and np.all(np.diff(norm_grid()) > 0)


def test_private_box_orders_and_widens():
    grid = np.arange(5.0)
    X = np.full((20, 2), 1.5)
    counts = rank_counts(X, grid)
    rng = np.random.default_rng(3)
    ledger = PrivacyLedger(composition="basic")
    low, high = private_box(counts, 20, (0.01, 0.99), grid, 50.0, rng, ledger)
    # Both quantiles fall in cell [1, 2] (midpoint 1.5): equal ends are
    # widened to the next grid point so the box has positive width.
    assert np.all(low == 1.5) and np.all(high == 2.0)
    assert len(ledger) == 4


def test_clip_box():
    X = np.array([[-5.0, 0.5], [np.nan, np.inf], [0.2, -np.inf]])
    out = clip_box(X, [0.0, 0.0], [1.0, 2.0])
    assert np.array_equal(out, [[0.0, 0.5], [0.5, 2.0], [0.2, 0.0]])
    assert np.isnan(X[1, 0])  # the input is not modified


def test_rank_margin_bounds_the_worst_case_miss_of_the_mechanism():
    # Worst case of the exponential mechanism: the right cell scores 0 and all
    # K - 1 others sit exactly m n ranks away (weight exp(-eps m n / 2) each).
    from skdp.privacy.quantiles import rank_margin

    n, eps, cells, failure = 2_000, 0.5, 1_202, 0.01
    m = rank_margin(n, eps, cells, failure)

    def miss(margin):
        w = (cells - 1) * np.exp(-eps * margin * n / 2.0)
        return w / (1.0 + w)

    assert miss(m) <= failure
    # Tight: at the margin the miss is within a factor (K - 1) / K of beta, and
    # half the margin misses far more often (a wrong factor 2 would pass neither).
    assert miss(m) >= failure * (cells - 1) / cells / (1.0 + failure)
    assert miss(m / 2) > 10 * failure


def test_histogram_box_extends_a_zero_inflated_column_to_the_pool():
    """Mostly exact zeros beside values spread over 1 to 16 (pixel or count columns): the zero bin
    alone passes the threshold, the others do not.  Without ``extend`` the range is the zero bin's
    (a width near 0 for values up to 16); with it, the column's own count shows the bin misses
    rows and the range takes the pool's, which covers the values."""
    from skdp.privacy.quantiles import calibrate_histogram, histogram_mechanism, private_histogram_box

    rng = np.random.default_rng(0)
    n, d = 1800, 64
    X = np.where(rng.random((n, d)) < 0.7, 0.0, rng.integers(1, 17, size=(n, d)).astype(float))
    mechanism = histogram_mechanism(d, calibrate_histogram(1.0, 1e-5, d, "pld"), True)

    def reduce(fn, *params):
        return fn(X, *params)

    for extend, expected in ((False, 0.0), (True, 16.0)):
        _, high = private_histogram_box(
            reduce, n, d, mechanism, (0.01, 0.99), np.random.default_rng(0), PrivacyLedger(), extend=extend
        )
        assert np.median(high) == pytest.approx(expected, abs=1e-3)


def test_histogram_under_add_remove_has_half_the_replace_one_sensitivity_and_its_noise():
    """Adding or removing a record moves one count per column (L2 sqrt(d), L1 d); replacing one moves two.

    The DP nets' input box (add/remove neighbours) releases its counts with
    that sensitivity: the noise std is ``z sqrt(d)`` (Gaussian), measured on
    released zeros; the event carries the relation, and its cost equals an
    independent accountant's Gaussian at that multiplier.
    """
    from skdp.privacy.events import ADD_REMOVE
    from skdp.privacy.quantiles import calibrate_histogram_bounds, histogram_mechanism

    d, z = 9, 3.0
    gauss = histogram_mechanism(d, z, True, ADD_REMOVE)
    assert gauss.sensitivity == pytest.approx(3.0) and gauss.std == pytest.approx(9.0)
    assert histogram_mechanism(d, z, True).sensitivity == pytest.approx(math.sqrt(2 * d))
    laplace = histogram_mechanism(d, z, False, ADD_REMOVE)
    assert laplace.sensitivity == pytest.approx(d)
    ledger = PrivacyLedger(neighbouring=ADD_REMOVE)
    draws = np.concatenate(
        [gauss.release(np.zeros(2000), np.random.default_rng(s), ledger) for s in range(5)]
    )
    # 10,000 draws: the std within 3 % (its standard error is 0.7 %); half the noise fails.
    assert np.std(draws) == pytest.approx(9.0, rel=0.03)
    plan = calibrate_histogram_bounds(2.0, 1e-5, 1, 0.1, "basic", neighbouring=ADD_REMOVE)
    assert all(e.neighbouring == ADD_REMOVE for e in plan.events())
    assert plan.mechanism(d).std == pytest.approx(plan.multiplier * math.sqrt(d))
    # Each of the two releases meets (0.1, 0.5e-5)-DP at the share (0.2, 1e-6) split in two, by the
    # Gaussian's exact profile (dp-accounting's, if installed).
    dp_accounting = pytest.importorskip("dp_accounting")
    pld = dp_accounting.pld.privacy_loss_distribution
    eps_one = pld.from_gaussian_mechanism(
        plan.multiplier, value_discretization_interval=1e-4
    ).get_epsilon_for_delta(1e-6 / 2)
    assert eps_one <= 0.1 * (1 + 1e-3)
