"""Secure noise: exact discrete samplers, and Mironov's floating-point attack."""

import math
import warnings

import numpy as np
import pytest
from _registry import CASES
from scipy import stats
from sklearn.base import clone

from skdp import config_context, get_config
from skdp.audit import epsilon_lower_bound
from skdp.bayes import DPBetaBernoulli
from skdp.cluster import DPKMeans
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


# Event types whose noise is sampled in floating point: none may appear on a
# ledger while secure noise is on.
_FLOAT_NOISE_EVENTS = {"GaussianEvent", "SubsampledGaussianEvent"}
# Estimators built on subsampled Gaussian mechanisms (DP-SEP, DP-SGD) have no
# secure sampler: they must refuse, naming the setting, before any release.
_REFUSES_SECURE = ("DPSEPRegressor", "DPNeuralNet", "DPGenerativeMixture")


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_estimator_honours_secure_noise(name):
    case = CASES[name]
    X = case.make_X(np.random.default_rng(0), 60, 3)
    model = clone(case.estimator)
    with config_context(secure_noise=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name.startswith(_REFUSES_SECURE):
            with pytest.raises(ValueError, match="secure_noise"):
                model.fit(X, **case.fit_kwargs(X))
            assert not hasattr(model, "privacy_spent_")
            return
        model.fit(X, **case.fit_kwargs(X))
    released = {type(event).__name__ for event in model._privacy_ledger.events}
    assert not released & _FLOAT_NOISE_EVENTS, released
    assert model.privacy_spent_.epsilon <= model.epsilon * (1 + 1e-9)


@pytest.mark.parametrize("name", ["DPKMeans", "DPKernelKMeans"])
def test_calibration_cache_follows_the_noise_setting(name):
    # A plain fit followed by a secure fit of the same plan must recalibrate:
    # discrete-Gaussian events cost more than the exact continuous Gaussian.
    case = CASES[name]
    X = case.make_X(np.random.default_rng(1), 60, 3)
    plain = clone(case.estimator).fit(X)
    with config_context(secure_noise=True):
        secure = clone(case.estimator).fit(X)
    assert secure.privacy_spent_.epsilon <= secure.epsilon * (1 + 1e-9)
    secure_noise = np.array([e.noise_multiplier for e in secure._privacy_ledger.events])
    plain_noise = np.array([e.noise_multiplier for e in plain._privacy_ledger.events])
    assert np.all(secure_noise > plain_noise)


def test_per_estimator_setting_overrides_the_package_setting():
    X = np.random.default_rng(2).normal(size=(80, 2))
    secure = DPKMeans(n_clusters=2, data_norm=3.0, secure_noise=True, random_state=0).fit(X)
    assert {type(e) for e in secure._privacy_ledger.events} == {DiscreteGaussianEvent}
    assert get_config()["secure_noise"] is False  # the fit's setting does not leak out
    with config_context(secure_noise=True):
        plain = DPKMeans(n_clusters=2, data_norm=3.0, secure_noise=False, random_state=0).fit(X)
    assert {type(e).__name__ for e in plain._privacy_ledger.events} == {"GaussianEvent"}
    for model in (secure, plain):
        assert model.privacy_spent_.epsilon <= 1.0 + 1e-9
    # Counts released on the discrete-Laplace grid only when asked for.
    B = np.random.default_rng(3).binomial(1, 0.4, size=(300, 2))
    counts = DPBetaBernoulli(secure_noise=True, random_state=0).fit(B).noisy_counts_
    assert np.all(np.mod(counts[counts > 0] / grid_step(2.0), 1) == 0)
