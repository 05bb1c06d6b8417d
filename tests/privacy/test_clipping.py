"""The one L2 clipping rule (skdp.privacy.clipping) and the calibration cache."""

import math
import warnings

import numpy as np
import pytest

from skdp import config_context
from skdp.privacy import GaussianEvent, calibrate_noise_multiplier
from skdp.privacy import calibration as calibration_module
from skdp.privacy.clipping import clip_factors, clip_rows, clip_vector, row_norms


def test_rows_inside_the_ball_are_unchanged_and_outside_are_on_the_sphere():
    X = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    out = clip_rows(X, 1.0)
    np.testing.assert_array_equal(out[1:], X[1:])
    assert np.linalg.norm(out[0]) == pytest.approx(1.0, rel=1e-15)
    np.testing.assert_allclose(clip_rows(X, 10.0, unit=True), X / 10.0)


def test_huge_finite_rows_are_clipped_not_lost():
    X = np.array([[1e300, 1e300], [-3e307, 4e307]])
    norms = row_norms(X)
    assert np.all(np.isfinite(norms))
    out = clip_rows(X, 2.0)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), [2.0, 2.0], rtol=1e-12)
    np.testing.assert_allclose(out[1], [-1.2, 1.6], rtol=1e-12)


@pytest.mark.parametrize("bad", [[np.inf, 1.0], [np.nan, 1.0], [-np.inf, np.inf]])
def test_a_nan_or_infinite_norm_clips_to_the_zero_vector(bad):
    X = np.array([bad, [3.0, 4.0]])
    out = clip_rows(X, 1.0)
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[0], [0.0, 0.0])
    np.testing.assert_allclose(out[1], [0.6, 0.8])
    np.testing.assert_array_equal(clip_vector(np.array(bad), 1.0), [0.0, 0.0])
    assert clip_factors([math.nan, math.inf, 0.5, 2.0], 1.0).tolist() == [0.0, 0.0, 1.0, 0.5]


def test_clip_vector_is_clip_rows_on_one_row_bit_for_bit():
    """The single-vector path (float64 without the 2-D detour) gives clip_rows' numbers and dtype."""
    rng = np.random.default_rng(3)
    vectors = [rng.normal(scale=s, size=50) for s in (1e-3, 0.05, 0.2, 1.0, 30.0)]
    vectors += [
        np.array([1e300, -1e300, 5e299]),
        np.zeros(4),
        np.array([3, 4]),
        np.array([3.0, 4.0], np.float32),
    ]
    for x in vectors:
        for bound in (0.5, 1.0, 7):
            # The former single-vector route: the BLAS norm, row_norms' rescaling if it overflows.
            with np.errstate(over="ignore"):
                norm = np.sqrt(np.dot(x, x))
            if not np.isfinite(norm):
                norm = row_norms(x[None, :])[0]
            expected = clip_rows(x[None, :], bound, norms=np.array([norm]))[0]
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # an overflowed norm is handled, not warned about
                out = clip_vector(x, bound)
            assert out.dtype == expected.dtype
            np.testing.assert_array_equal(out, expected)


def test_torch_factors_follow_the_same_rule():
    torch = pytest.importorskip("torch")
    from skdp.privacy.clipping import torch_clip_factors

    norms = torch.tensor([math.nan, math.inf, 0.0, 0.5, 2.0], dtype=torch.float64)
    expected = clip_factors(norms.numpy(), 1.0)
    np.testing.assert_array_equal(torch_clip_factors(norms, 1.0).numpy(), expected)


def test_calibration_caches_plan_costs_keyed_by_the_released_events(monkeypatch):
    def plan(z):
        return [GaussianEvent(count=7, neighbouring="replace_one", noise_multiplier=z)]

    calibration_module._cached_plan_cost.cache_clear()
    z = calibrate_noise_multiplier(plan, 0.9, 1e-5)
    misses = calibration_module._cached_plan_cost.cache_info().misses
    assert calibrate_noise_multiplier(plan, 0.9, 1e-5) == z
    # The second calibration costs nothing new.
    assert calibration_module._cached_plan_cost.cache_info().misses == misses
    # Under secure_noise the same plan is costed with discrete-Gaussian events:
    # a different key, a different (larger) multiplier, never the cached one.
    z_secure = calibrate_noise_multiplier(plan, 0.9, 1e-5, secure_noise=True)
    with config_context(secure_noise=True):  # the package setting is not read by the core
        assert calibrate_noise_multiplier(plan, 0.9, 1e-5) == z
    assert calibration_module._cached_plan_cost.cache_info().misses > misses
    assert z_secure > z
