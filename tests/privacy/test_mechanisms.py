"""Mechanisms and calibration: the noise has the claimed scale, the plan costs the target."""

import math

import numpy as np
import pytest
from scipy import stats

from skdp.privacy import (
    ADD_REMOVE,
    REPLACE_ONE,
    ExponentialMechanism,
    GaussianEvent,
    GaussianMechanism,
    LaplaceEvent,
    LaplaceMechanism,
    PrivacyLedger,
    SubsampledGaussianEvent,
    SymmetricMatrixGaussianMechanism,
    SymmetricMatrixLaplaceMechanism,
    calibrate_noise_multiplier,
    compose,
    gaussian_delta,
    gaussian_noise_multiplier,
    histogram_sensitivity,
    noisy_histogram_mode,
    project_to_psd,
)

N_DRAWS = 20_000


def _std_tolerance(kurtosis, n=N_DRAWS, n_se=5):
    # Standard error of a sample std: sqrt((kurtosis - 1) / (4 n)) relative.
    return n_se * math.sqrt((kurtosis - 1) / (4 * n))


def test_laplace_noise_scale():
    rng = np.random.default_rng(0)
    mech = LaplaceMechanism.from_epsilon(0.5, sensitivity=2.0, n_uses=4)  # scale 16
    assert mech.scale == pytest.approx(16.0)
    ledger = PrivacyLedger("basic")
    noisy = mech.release(np.full(N_DRAWS, 100.0), rng, ledger)
    # Laplace(b) has std sqrt(2) b and kurtosis 6.
    assert np.std(noisy - 100) == pytest.approx(math.sqrt(2) * 16, rel=_std_tolerance(6))
    assert len(ledger) == 1 and ledger.privacy_spent(0).epsilon == pytest.approx(0.125)
    # Two-sided, full support: both signs, far tails reached.
    assert (noisy < 100).mean() == pytest.approx(0.5, abs=0.02)


def test_gaussian_noise_scale_and_event():
    rng = np.random.default_rng(1)
    mech = GaussianMechanism(sensitivity=0.5, scale=2.0)
    ledger = PrivacyLedger("rdp")
    noisy = mech.release(np.zeros(N_DRAWS), rng, ledger)
    assert np.std(noisy) == pytest.approx(2.0, rel=_std_tolerance(3))
    assert ledger.events == [GaussianEvent(count=1, neighbouring=REPLACE_ONE, noise_multiplier=4.0)]


def test_release_rejects_non_finite():
    with pytest.raises(ValueError, match="NaN or infinity"):
        LaplaceMechanism(1.0, 1.0).release([1.0, np.nan], np.random.default_rng(), PrivacyLedger())
    with pytest.raises(ValueError, match="sensitivity"):
        LaplaceMechanism(0.0, 1.0)
    with pytest.raises(ValueError, match="scale"):
        GaussianMechanism(1.0, np.inf)


def test_gaussian_calibrations():
    eps, delta = 0.5, 1e-5
    classic = gaussian_noise_multiplier(eps, delta, "classic")
    analytic = gaussian_noise_multiplier(eps, delta)
    assert classic == pytest.approx(math.sqrt(2 * math.log(1.25 / delta)) / eps)
    assert analytic < classic
    # Analytic calibration is tight: delta is met with equality.
    assert gaussian_delta(analytic, eps) == pytest.approx(delta, rel=1e-6)
    assert gaussian_delta(analytic * 0.999, eps) > delta
    with pytest.raises(ValueError, match="epsilon < 1"):
        gaussian_noise_multiplier(2.0, delta, "classic")
    with pytest.raises(ValueError, match="delta > 0"):
        gaussian_noise_multiplier(1.0, 0.0)
    mech = GaussianMechanism.from_budget(eps, delta, sensitivity=3.0)
    assert mech.scale == pytest.approx(3.0 * analytic)


@pytest.mark.parametrize("composition", ["basic", "advanced", "zcdp", "rdp"])
def test_calibration_meets_target_tightly(composition):
    eps, delta = 1.0, 1e-6

    def plan(z):
        # A DP-EM-like iteration plan: Laplace weights, Gaussian moments.
        return [
            LaplaceEvent(count=10, neighbouring=REPLACE_ONE, noise_multiplier=z),
            GaussianEvent(count=30, neighbouring=REPLACE_ONE, noise_multiplier=0.5 * z),
        ]

    z = calibrate_noise_multiplier(plan, eps, delta, composition)
    assert compose(plan(z), delta, composition).epsilon <= eps
    assert compose(plan(z * (1 - 1e-4)), delta, composition).epsilon > eps * (1 - 1e-3)


def test_calibration_pure_laplace_is_equal_split():
    # k pure releases under basic composition: each gets eps / k, so z = k / eps.
    z = calibrate_noise_multiplier(lambda z: [LaplaceEvent(7, REPLACE_ONE, z)], 2.0, 0.0, "basic")
    assert z == pytest.approx(3.5, rel=1e-5)


def test_calibration_subsampled_and_errors():
    def plan(z):
        return [SubsampledGaussianEvent(500, ADD_REMOVE, noise_multiplier=z, sampling_rate=0.02)]

    z = calibrate_noise_multiplier(plan, 1.0, 1e-5, "rdp", neighbouring=ADD_REMOVE)
    assert compose(plan(z), 1e-5, "rdp").epsilon <= 1.0
    with pytest.raises(ValueError, match="epsilon"):
        calibrate_noise_multiplier(plan, 0.0, 1e-5)
    with pytest.raises(ValueError, match="delta"):
        calibrate_noise_multiplier(plan, 1.0, 1.0)
    with pytest.raises(ValueError, match="No noise level"):
        calibrate_noise_multiplier(lambda z: [GaussianEvent(1, REPLACE_ONE, z)], 1.0, 0.0)


def test_symmetric_matrix_gaussian_noise():
    rng = np.random.default_rng(2)
    d = 4
    mech = SymmetricMatrixGaussianMechanism(sensitivity=2.0, scale=1.5)
    ledger = PrivacyLedger()
    draws = np.array([mech.release(np.eye(d), rng, ledger) - np.eye(d) for _ in range(5000)])
    assert np.allclose(draws, np.transpose(draws, (0, 2, 1)))
    iu = np.triu_indices(d)
    upper = draws[:, iu[0], iu[1]]
    # Every upper-triangle entry (diagonal included) gets N(0, 1.5^2), independently.
    np.testing.assert_allclose(upper.std(axis=0), 1.5, rtol=_std_tolerance(3, 5000))
    corr = np.corrcoef(upper.T) - np.eye(upper.shape[1])
    assert np.abs(corr).max() < 5 / math.sqrt(5000)
    # Full support: the diagonal noise takes both signs (Wishart noise would not).
    assert (upper[:, 0] < 0).mean() == pytest.approx(0.5, abs=0.03)
    assert len(ledger) == 5000


def test_symmetric_matrix_laplace_and_validation():
    rng = np.random.default_rng(3)
    mech = SymmetricMatrixLaplaceMechanism(sensitivity=1.0, scale=0.5)
    out = mech.release(np.zeros((3, 3)), rng, PrivacyLedger("basic"))
    assert np.allclose(out, out.T)
    with pytest.raises(ValueError, match="square"):
        mech.release(np.zeros((2, 3)), rng, PrivacyLedger())
    with pytest.raises(ValueError, match="symmetric"):
        mech.release(np.triu(np.ones((3, 3))), rng, PrivacyLedger())


def test_project_to_psd():
    m = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3, -1
    p = project_to_psd(m, 0.1)
    assert np.linalg.eigvalsh(p) == pytest.approx([0.1, 3.0])
    with pytest.raises(ValueError):
        project_to_psd(m, 0.0)


def test_histogram_sensitivity_and_mode():
    assert histogram_sensitivity(1) == 2.0
    assert histogram_sensitivity(2) == pytest.approx(math.sqrt(2))
    assert histogram_sensitivity(1, ADD_REMOVE) == 1.0
    counts = np.array([0, 0, 500, 3, 0.0])
    mech = GaussianMechanism(histogram_sensitivity(2), scale=5.0)
    ledger = PrivacyLedger()
    assert noisy_histogram_mode(counts, mech, np.random.default_rng(0), ledger) == 2
    assert len(ledger) == 1


def test_exponential_mechanism_distribution():
    mech = ExponentialMechanism(epsilon=1.0, sensitivity=0.5)
    assert mech.temperature == pytest.approx(1.0)
    u = np.array([0.0, 1.0, 2.0])
    rng = np.random.default_rng(4)
    ledger = PrivacyLedger("basic")
    picks = np.bincount([mech.select(u, rng, ledger) for _ in range(6000)], minlength=3)
    expected = np.exp(u) / np.exp(u).sum() * 6000
    assert stats.chisquare(picks, expected).pvalue > 1e-3
    assert ledger.privacy_spent(0).epsilon == pytest.approx(6000.0)
    with pytest.raises(ValueError):
        mech.select([np.nan], rng, ledger)
