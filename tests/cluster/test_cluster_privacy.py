"""Distinguishing tests of DPKMeans on neighbouring datasets (slow).

D has n/2 records at -C and n/2 at +C (C = data_norm = 1, one cluster, one
iteration); D' replaces one record -C by +C, the worst case of the sums'
sensitivity 2C inside one cluster.  The released centre is thresholded and a
Clopper-Pearson lower bound on epsilon is computed from many fits on each
dataset; it must not exceed the claim.  The power check halves the sums'
noise behind the accountant's back and requires the same test to catch it.
"""

import math

import numpy as np
import pytest
from scipy.stats import beta

from skdp.cluster import DPKMeans, _base

N_FITS = 2500
N_RECORDS = 2000


def neighbours():
    D = np.r_[-np.ones(N_RECORDS // 2), np.ones(N_RECORDS // 2)].reshape(-1, 1)
    Dp = D.copy()
    Dp[0] = 1.0
    return D, Dp


def empirical_epsilon(out, out_p, threshold, delta, alpha=0.05):
    """Lower confidence bound on epsilon from the event {output > threshold}.

    ``P'(E) <= e^eps P(E) + delta`` gives ``eps >= log((P'(E) - delta) / P(E))``;
    Clopper-Pearson bounds (two-sided ``alpha``) make it a lower bound.
    """
    k, kp, n = int(np.sum(out > threshold)), int(np.sum(out_p > threshold)), len(out)
    p_hi = beta.ppf(1 - alpha / 2, k + 1, n - k) if k < n else 1.0
    pp_lo = beta.ppf(alpha / 2, kp, n - kp + 1) if kp > 0 else 0.0
    return math.log(max(pp_lo - delta, 1e-300) / p_hi)


def max_empirical_epsilon(out, out_p, thresholds, delta, alpha=0.05):
    """Largest lower bound over a priori thresholds, Bonferroni-corrected."""
    return max(empirical_epsilon(out, out_p, t, delta, alpha / len(thresholds)) for t in thresholds)


def centres(est, X, seeds):
    return np.array([est.set_params(random_state=s).fit(X).cluster_centers_[0, 0] for s in seeds])


def laplace_estimator():
    # Most of the budget on the sums (count weight 10): z = 1.1, the sums'
    # own epsilon is 1 / 1.1, close to the claim, so halving is visible.
    return DPKMeans(
        1,
        epsilon=1.0,
        delta=0.0,
        data_norm=1.0,
        max_iter=1,
        mechanism="laplace",
        composition="basic",
        count_noise_weight=10.0,
    )


def laplace_thresholds():
    # A priori thresholds: S~ on D' is 2 + Laplace(b) with b = 2 C z = 2.2 as
    # claimed; P'(S~ > t) = 0.1 at t = 2 + b log 5.  Scales b / 4 .. 2 b are
    # tried so that a mis-scaled noise is caught at its own best threshold.
    return [(2 + f * 2.2 * math.log(5)) / N_RECORDS for f in (0.25, 0.5, 1.0, 2.0)]


@pytest.mark.slow
def test_laplace_dpkmeans_distinguishing():
    D, Dp = neighbours()
    est = laplace_estimator()
    out = centres(est, D, range(N_FITS))
    out_p = centres(est, Dp, range(N_FITS, 2 * N_FITS))
    assert est.noise_multiplier_ == pytest.approx(1.1, rel=1e-5)
    assert est.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-5)
    eps_lb = max_empirical_epsilon(out, out_p, laplace_thresholds(), 0.0)
    assert eps_lb <= est.privacy_spent_.epsilon
    # The test is not vacuous: it sees a real difference between D and D'.
    assert eps_lb > 0.2


@pytest.mark.slow
def test_distinguishing_test_catches_halved_noise(monkeypatch):
    """Same test, sums' noise secretly halved: the empirical epsilon exceeds the claim."""
    monkeypatch.setattr(_base, "sum_sensitivity", lambda bound, norm, m: _orig_sum(bound, norm, m) / 2)
    D, Dp = neighbours()
    est = laplace_estimator()
    out = centres(est, D, range(N_FITS))
    out_p = centres(est, Dp, range(N_FITS, 2 * N_FITS))
    assert est.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-5)
    assert max_empirical_epsilon(out, out_p, laplace_thresholds(), 0.0) > est.privacy_spent_.epsilon


_orig_sum = _base.sum_sensitivity


@pytest.mark.slow
def test_gaussian_dpkmeans_distinguishing():
    D, Dp = neighbours()
    est = DPKMeans(1, epsilon=1.0, delta=1e-5, data_norm=1.0, max_iter=1, count_noise_weight=10.0)
    out = centres(est, D, range(N_FITS))
    out_p = centres(est, Dp, range(N_FITS, 2 * N_FITS))
    # S~ on D' is 2 + N(0, (2 C z)^2): threshold where P'(S~ > t) = 0.05.
    s = 2 * est.noise_multiplier_
    threshold = (2 + 1.645 * s) / N_RECORDS
    eps_lb = empirical_epsilon(out, out_p, threshold, est.delta)
    assert eps_lb <= est.privacy_spent_.epsilon
    assert eps_lb > 0.1
