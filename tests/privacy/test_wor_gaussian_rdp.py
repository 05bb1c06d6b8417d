"""The array evaluation of WBK19 Thm. 27 (sampling without replacement) against autodp's own."""

import numpy as np
import pytest

from skdp.privacy import DEFAULT_ORDERS, REPLACE_ONE, SubsampledGaussianEvent, compose, rdp_to_epsilon
from skdp.privacy.accountants import _autodp
from skdp.privacy.accountants.wor_gaussian_rdp import wor_subsampled_gaussian_rdp

# The default grid plus orders outside it: 1, one beyond the tabled 100, the
# linear path's range and a fractional order there.
ORDERS = np.array((1.0, *DEFAULT_ORDERS, 150.0, 700.0, 1000.5))


@pytest.mark.parametrize("sigma", [0.3, 0.8, 1.7, 7.0, 20.0])
@pytest.mark.parametrize("q", [1e-4, 0.0128, 0.2, 0.9, 0.999])
def test_equals_autodp_at_every_order(sigma, q):
    # autodp's curve, evaluated term by term by autodp itself (not through
    # skdp's dispatch, which now uses the array version).
    theirs = np.asarray(_autodp._subsampled_gaussian_rdp(sigma, q, False, tuple(ORDERS)))
    ours = wor_subsampled_gaussian_rdp(sigma, q, ORDERS)
    np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(theirs))
    finite = np.isfinite(theirs)
    # Same operations in the same order: equal to float rounding (measured: bit-equal).
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-12, atol=0)


def test_full_batch_is_the_gaussian_and_an_empty_batch_is_free():
    np.testing.assert_allclose(wor_subsampled_gaussian_rdp(2.0, 1.0, ORDERS), ORDERS / 8.0)
    assert np.all(wor_subsampled_gaussian_rdp(2.0, 0.0, ORDERS) == 0.0)


def test_the_accountant_uses_it_and_reports_autodps_epsilon():
    event = SubsampledGaussianEvent(300, REPLACE_ONE, 1.1, 0.02, sampling="without_replacement")
    curve = 300 * np.asarray(_autodp._subsampled_gaussian_rdp(1.1, 0.02, False, DEFAULT_ORDERS))
    expected = rdp_to_epsilon(curve, np.asarray(DEFAULT_ORDERS), 1e-5)
    assert compose([event], 1e-5, "rdp").epsilon == pytest.approx(expected, rel=1e-12)
    # Halving the noise is not the same curve (the test can fail).
    halved = SubsampledGaussianEvent(300, REPLACE_ONE, 0.55, 0.02, sampling="without_replacement")
    assert compose([halved], 1e-5, "rdp").epsilon > 1.5 * expected
