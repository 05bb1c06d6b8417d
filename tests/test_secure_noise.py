"""Secure noise: exact discrete samplers, and Mironov's floating-point attack."""

import math

import numpy as np
import pytest
from scipy import stats

from skdp import config_context, get_config
from skdp.audit import epsilon_lower_bound
from skdp.bayes import DPBetaBernoulli
from skdp.privacy import DiscreteGaussianEvent, GaussianMechanism, LaplaceMechanism, PrivacyAccountant
from skdp.privacy.secure import bernoulli_exp, discrete_gaussian, discrete_laplace, grid_step

N = 20_000


def test_bernoulli_exp_is_exact_in_distribution():
    rng = np.random.default_rng(0)
    for p, q in ((1, 3), (5, 2), (0, 1)):
        hits = sum(bernoulli_exp(p, q, rng) for _ in range(N))
        expected = math.exp(-p / q)
        assert abs(hits / N - expected) < 5 * math.sqrt(expected * (1 - expected) / N) + 1e-12


def test_discrete_laplace_and_gaussian_pmfs():
    rng = np.random.default_rng(1)
    t = 3
    lap = np.array([discrete_laplace(t, rng) for _ in range(N)])
    ks = np.arange(-6, 7)
    pmf = np.exp(-np.abs(ks) / t) * (1 - math.exp(-1 / t)) / (1 + math.exp(-1 / t))
    observed = np.array([(lap == k).sum() for k in ks])
    assert stats.chisquare(observed, pmf * N * observed.sum() / (pmf * N).sum()).pvalue > 1e-3
    sigma2 = 4
    gau = np.array([discrete_gaussian(sigma2, rng) for _ in range(N)])
    ks = np.arange(-5, 6)
    w = np.exp(-(ks**2) / (2 * sigma2))
    observed = np.array([(gau == k).sum() for k in ks])
    assert stats.chisquare(observed, w / w.sum() * observed.sum()).pvalue > 1e-3


@pytest.mark.parametrize(
    "mechanism,std", [(LaplaceMechanism(1.0, 2.0), math.sqrt(2) * 2.0), (GaussianMechanism(1.0, 2.0), 2.0)]
)
def test_secure_release_has_the_claimed_scale_on_a_data_independent_grid(mechanism, std):
    rng = np.random.default_rng(2)
    ledger = PrivacyAccountant()
    with config_context(secure_noise=True):
        out = mechanism.release(np.full(N, 0.123456789), rng, ledger)
    assert get_config()["secure_noise"] is False  # the context restores the setting
    kurtosis = 6 if isinstance(mechanism, LaplaceMechanism) else 3
    assert np.std(out) == pytest.approx(std, rel=5 * math.sqrt((kurtosis - 1) / (4 * N)))
    gamma = grid_step(mechanism.sensitivity)
    assert np.all(np.mod(out / gamma, 1) == 0)  # every output is an integer multiple of gamma
    if isinstance(mechanism, GaussianMechanism):
        assert type(ledger.events[0]) is DiscreteGaussianEvent


def _event_impossible_under_one(outputs):
    # Outputs in (0, 0.5) that are not multiples of 2**-53: reachable as
    # 0 + n (n has finer ulps there) but never as fl(1 + n), which lands on
    # the 2**-53 grid for any n in (-1, -0.5).
    o = np.asarray(outputs)
    return (o > 0) & (o < 0.5) & (np.mod(o * 2.0**53, 1) != 0)


def _outputs(value, secure, seed):
    rng = np.random.default_rng(seed)
    with config_context(secure_noise=secure):
        return LaplaceMechanism(1.0, 1.0).release(np.full(N, value), rng, PrivacyAccountant())


def test_floating_point_attack_breaks_naive_laplace_but_not_secure():
    eps = 1.0  # sensitivity 1, scale 1
    naive_0, naive_1 = (
        _event_impossible_under_one(_outputs(0.0, False, 3)),
        _event_impossible_under_one(_outputs(1.0, False, 4)),
    )
    # Naive sampling: the event occurs under value 0 and never under value 1:
    # an infinite privacy loss that the audit measures far above epsilon.
    assert naive_0.mean() > 0.05 and naive_1.sum() == 0
    assert epsilon_lower_bound(naive_0.astype(float), naive_1.astype(float)) > 3 * eps
    secure_0, secure_1 = (
        _event_impossible_under_one(_outputs(0.0, True, 3)),
        _event_impossible_under_one(_outputs(1.0, True, 4)),
    )
    assert secure_0.sum() == 0 and secure_1.sum() == 0
    # And no other low-bit pattern distinguishes them beyond epsilon.
    low_0 = np.mod(_outputs(0.0, True, 5) * 2.0**40, 2)
    low_1 = np.mod(_outputs(1.0, True, 6) * 2.0**40, 2)
    assert epsilon_lower_bound(low_0, low_1) <= eps


def test_estimator_under_secure_noise():
    X = np.random.default_rng(0).binomial(1, 0.4, size=(400, 3))
    with config_context(secure_noise=True):
        model = DPBetaBernoulli(epsilon=1.0, random_state=0).fit(X)
    gamma = grid_step(2.0)
    counts = np.stack([(X == 0).sum(0), X.sum(0)], axis=1)
    noisy = model.noisy_counts_[model.noisy_counts_ > 0]
    assert np.all(np.mod(noisy / gamma, 1) == 0)
    assert model.privacy_spent_.epsilon == pytest.approx(1.0)
    assert np.abs(model.noisy_counts_ - counts).max() < 60  # Laplace(6) noise, 6 draws


def test_config_rejects_unknown_settings():
    with pytest.raises(TypeError, match="Unknown"):
        with config_context(fast=True):
            pass
