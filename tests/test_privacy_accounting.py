"""Accounting: conversions, the autodp adapter and composition, against independent references.

The closed forms and numerical integrals need nothing beyond the package's
own dependencies and always run; the cross-checks against Google's
``dp_accounting`` (a test extra) skip, one by one, where it is not installed.
"""

import math
import pickle
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

from skdp.privacy import (
    ADD_REMOVE,
    DEFAULT_ORDERS,
    REPLACE_ONE,
    DiscreteGaussianEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyLedger,
    PureDPEvent,
    SubsampledGaussianEvent,
    _autodp,
    advanced_composition_epsilon,
    compose,
    gaussian_delta,
    gaussian_epsilon,
    rdp_to_epsilon,
    zcdp_to_epsilon,
)
from skdp.privacy.accountants.basic import per_use_epsilon
from skdp.privacy.accountants.rdp import RDPAccountant
from skdp.privacy.accountants.zcdp import ZCDPAccountant
from skdp.privacy.cluster_sampling import ClusterSampledGaussianEvent
from skdp.privacy.conversions import pure_dp_rdp

ORDERS = np.asarray(DEFAULT_ORDERS)


def _dp_accounting():
    """Google's dp_accounting, the independent reference; the calling test skips without it."""
    pytest.importorskip("dp_accounting.rdp")  # the RDP accountant, a submodule
    return pytest.importorskip("dp_accounting")


def _dpa_epsilon(event, count, delta, relation=ADD_REMOVE):
    dp_accounting = _dp_accounting()
    rel = (
        dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
        if relation == ADD_REMOVE
        else dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    acc = dp_accounting.rdp.RdpAccountant(list(DEFAULT_ORDERS), neighboring_relation=rel)
    acc.compose(event, count)
    return acc.get_epsilon(delta)


# --- the autodp adapter against closed forms -------------------------------------------------


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0])
def test_gaussian_rdp_closed_form(sigma):
    # Mironov 2017, Prop. 7: alpha / (2 sigma^2).
    np.testing.assert_allclose(_autodp.gaussian_rdp(sigma, ORDERS), ORDERS / (2 * sigma**2), rtol=1e-10)


@pytest.mark.parametrize("b", [0.5, 1.0, 4.0])
def test_laplace_rdp_closed_form(b):
    # Mironov 2017, Prop. 6.
    a = ORDERS
    log_terms = np.logaddexp(np.log(a / (2 * a - 1)) + (a - 1) / b, np.log((a - 1) / (2 * a - 1)) - a / b)
    expected = log_terms / (a - 1)
    np.testing.assert_allclose(_autodp.laplace_rdp(b, ORDERS), expected, rtol=1e-8)


@pytest.mark.parametrize("sigma,q", [(0.8, 0.01), (1.0, 0.05), (2.0, 0.2), (1.1, 0.004)])
def test_subsampled_gaussian_rdp_matches_dp_accounting(sigma, q):
    dp_accounting = _dp_accounting()
    ours = SubsampledGaussianEvent(count=1, neighbouring=ADD_REMOVE, noise_multiplier=sigma, sampling_rate=q)
    # autodp evaluates fractional orders at the next integer (a valid, looser
    # bound since RDP grows with the order): compare on integer orders.
    integer = np.array([o for o in DEFAULT_ORDERS if float(o).is_integer()])
    acc = dp_accounting.rdp.RdpAccountant(list(integer))
    acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), 1)
    np.testing.assert_allclose(RDPAccountant.curve(ours, integer), acc._rdp, rtol=0.02)


@pytest.mark.parametrize("sigma,n,batch", [(1.0, 10_000, 100), (2.0, 1_000, 200)])
def test_without_replacement_rdp_matches_dp_accounting(sigma, n, batch):
    dp_accounting = _dp_accounting()
    ours = SubsampledGaussianEvent(
        count=1,
        neighbouring=REPLACE_ONE,
        noise_multiplier=sigma,
        sampling_rate=batch / n,
        sampling="without_replacement",
    )
    integer = np.array([o for o in DEFAULT_ORDERS if float(o).is_integer()])
    acc = dp_accounting.rdp.RdpAccountant(
        list(integer), neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    acc.compose(
        dp_accounting.SampledWithoutReplacementDpEvent(n, batch, dp_accounting.GaussianDpEvent(sigma)), 1
    )
    np.testing.assert_allclose(RDPAccountant.curve(ours, integer), acc._rdp, rtol=0.02)


def test_adapter_hides_autodp_warts():
    had = hasattr(np, "infty")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with _autodp._quiet_autodp():
            assert np.infty == np.inf  # noqa: NPY201 - the alias autodp needs
            from autodp.converter import approxdp_to_approxrdp

            assert approxdp_to_approxrdp(1.0, 1e-5)(2.0, 0.0) == math.inf
        # A fresh curve goes through scipy's optimiser, which warns inside autodp.
        _autodp.subsampled_gaussian_rdp(0.93, 0.011, True, (2.0, 8.0, 64.0))
    assert hasattr(np, "infty") == had


# --- conversions -------------------------------------------------------------------------------


@pytest.mark.parametrize("sigma", [0.7, 1.5, 5.0])
def test_gaussian_delta_against_numerical_integration(sigma):
    # delta(eps) = int max(0, p(x) - e^eps q(x)) dx for p = N(1, s^2), q = N(0, s^2).
    for eps in (0.1, 1.0, 3.0):
        p, q = stats.norm(1, sigma), stats.norm(0, sigma)
        x0 = sigma**2 * eps + 0.5  # where p = e^eps q
        ref = p.sf(x0) - math.exp(eps) * q.sf(x0)

        def excess(x, p=p, q=q, eps=eps):
            return max(0.0, p.pdf(x) - math.exp(eps) * q.pdf(x))

        ref_int = integrate.quad(excess, x0, x0 + 40 * sigma)[0]
        assert gaussian_delta(sigma, eps) == pytest.approx(ref, rel=1e-6, abs=1e-15)
        assert gaussian_delta(sigma, eps) == pytest.approx(ref_int, rel=1e-5, abs=1e-12)
        assert gaussian_delta(sigma, gaussian_epsilon(sigma, 1e-5)) == pytest.approx(1e-5, rel=1e-6)


def test_rdp_to_epsilon_matches_dp_accounting():
    dp_accounting = _dp_accounting()
    for sigma, k in ((1.0, 10), (4.0, 300)):
        rdp = k * ORDERS / (2 * sigma**2)
        ref = _dpa_epsilon(dp_accounting.GaussianDpEvent(sigma), k, 1e-5)
        assert rdp_to_epsilon(rdp, ORDERS, 1e-5) == pytest.approx(ref, rel=1e-9)


def test_zcdp_and_advanced_closed_forms():
    rho, delta = 0.05, 1e-6
    assert zcdp_to_epsilon(rho, delta) == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1 / delta)))
    eps0, k, dp = 0.01, 1000, 1e-6
    dwork_roth = math.sqrt(2 * k * math.log(1 / dp)) * eps0 + k * eps0 * math.expm1(eps0)
    assert advanced_composition_epsilon([eps0] * k, dp) == pytest.approx(dwork_roth)
    # Few large epsilons: basic composition is smaller and is what holds.
    assert advanced_composition_epsilon([1.0, 1.0], 1e-6) == pytest.approx(2.0)


def test_pure_dp_rdp_is_randomised_response():
    eps = 0.8
    p = math.exp(eps) / (1 + math.exp(eps))
    a = 3.0
    rr = math.log(p**a * (1 - p) ** (1 - a) + (1 - p) ** a * p ** (1 - a)) / (a - 1)
    assert pure_dp_rdp(eps, [a])[0] == pytest.approx(rr)
    # Laplace is eps-DP, so randomised response's curve dominates it.
    lap = RDPAccountant.curve(
        LaplaceEvent(count=1, neighbouring=REPLACE_ONE, noise_multiplier=1 / eps), ORDERS
    )
    assert np.all(pure_dp_rdp(eps, ORDERS) >= lap - 1e-12)
    assert np.all(pure_dp_rdp(eps, ORDERS) <= eps + 1e-12)


# --- composition --------------------------------------------------------------------------------


def test_pure_history_is_basic_with_zero_delta():
    events = [
        LaplaceEvent(count=3, neighbouring=REPLACE_ONE, noise_multiplier=10.0),
        PureDPEvent(1, REPLACE_ONE, 0.2),
    ]
    for method in ("basic", "advanced", "zcdp", "rdp"):
        spent = compose(events, 1e-5, method)
        assert spent.epsilon <= 0.5 + 1e-12
    assert compose(events, 1e-5, "basic") == (pytest.approx(0.5), 0.0)


def test_subsampled_composition_matches_dp_accounting():
    dp_accounting = _dp_accounting()
    sigma, q, steps, delta = 1.1, 0.01, 2000, 1e-5
    acc = PrivacyLedger("rdp", neighbouring=ADD_REMOVE)
    acc.record(
        SubsampledGaussianEvent(count=steps, neighbouring=ADD_REMOVE, noise_multiplier=sigma, sampling_rate=q)
    )
    ref = _dpa_epsilon(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps, delta
    )
    assert acc.privacy_spent(delta).epsilon == pytest.approx(ref, rel=0.02)


def test_gaussian_composition_orders_and_exactness():
    events = [GaussianEvent(count=100, neighbouring=REPLACE_ONE, noise_multiplier=20.0)]
    rdp = compose(events, 1e-5, "rdp").epsilon
    zcdp = compose(events, 1e-5, "zcdp").epsilon
    adv = compose(events, 1e-5, "advanced").epsilon
    assert rdp < zcdp < adv
    # 100 Gaussians with multiplier 20 are exactly one with multiplier 2.
    assert rdp == pytest.approx(gaussian_epsilon(2.0, 1e-5), rel=1e-9)


def test_gaussian_composition_is_no_looser_than_dp_accounting():
    events = [GaussianEvent(count=100, neighbouring=REPLACE_ONE, noise_multiplier=20.0)]
    ref = _dpa_epsilon(_dp_accounting().GaussianDpEvent(20.0), 100, 1e-5)
    assert compose(events, 1e-5, "rdp").epsilon <= ref + 1e-9


def test_zcdp_sums_rho():
    events = [
        GaussianEvent(count=4, neighbouring=REPLACE_ONE, noise_multiplier=2.0),
        LaplaceEvent(count=2, neighbouring=REPLACE_ONE, noise_multiplier=5.0),
    ]
    rho = 4 / (2 * 4.0) + 2 * 0.5 * 0.2**2
    assert compose(events, 1e-6, "zcdp").epsilon == pytest.approx(zcdp_to_epsilon(rho, 1e-6))


def test_basic_splits_delta_over_gaussian_uses():
    events = [GaussianEvent(count=4, neighbouring=REPLACE_ONE, noise_multiplier=3.0)]
    assert compose(events, 1e-4, "basic").epsilon == pytest.approx(4 * gaussian_epsilon(3.0, 1e-4 / 4))


def test_neighbouring_relations():
    lap = LaplaceEvent(count=1, neighbouring=ADD_REMOVE, noise_multiplier=2.0)
    acc = PrivacyLedger("basic", neighbouring=REPLACE_ONE)
    acc.record(lap)
    # A replacement is a removal and an addition: twice the add/remove epsilon.
    assert acc.privacy_spent(0).epsilon == pytest.approx(1.0)
    with pytest.raises(ValueError, match="cannot be converted"):
        PrivacyLedger(neighbouring=ADD_REMOVE).record(LaplaceEvent(1, REPLACE_ONE, 2.0))
    # A Poisson-subsampled Gaussian is the same mechanism under replace-one:
    # a replacement moves the sum by at most 2C, so the multiplier halves.
    poisson = SubsampledGaussianEvent(3, ADD_REMOVE, noise_multiplier=1.1, sampling_rate=0.1)
    converted = PrivacyLedger(neighbouring=REPLACE_ONE).record(poisson)
    assert converted == SubsampledGaussianEvent(
        3, REPLACE_ONE, noise_multiplier=0.55, sampling_rate=0.1, sampling="poisson"
    )
    # ... and it is never cheaper under replace-one than under add/remove.
    assert compose([converted], 1e-5).epsilon > compose([poisson], 1e-5).epsilon
    # Without-replacement batches and Acs et al.'s cluster-sampled steps are
    # tied to their relation: both directions refuse.
    wor = SubsampledGaussianEvent(1, REPLACE_ONE, 1.0, 0.1, sampling="without_replacement")
    with pytest.raises(ValueError, match="cannot be converted"):
        PrivacyLedger(neighbouring=ADD_REMOVE).record(wor)
    cluster = ClusterSampledGaussianEvent(1, ADD_REMOVE, 1.0, (0.1,), (1.0,))
    with pytest.raises(ValueError, match="cannot be converted"):
        PrivacyLedger(neighbouring=REPLACE_ONE).record(cluster)
    with pytest.raises(ValueError, match="cannot be converted"):
        PrivacyLedger(neighbouring=ADD_REMOVE).record(converted)
    with pytest.raises(ValueError, match="different relations"):
        compose([lap, LaplaceEvent(1, REPLACE_ONE, 1.0)], 0.0)
    with pytest.raises(ValueError, match="without_replacement"):
        SubsampledGaussianEvent(1, ADD_REMOVE, 1.0, 0.1, sampling="without_replacement")


def test_accountant_validation_and_pickle():
    with pytest.raises(ValueError, match="composition"):
        PrivacyLedger("moments")
    with pytest.raises(TypeError, match="PrivacyEvent"):
        PrivacyLedger().record((1.0, 0.0))
    with pytest.raises(ValueError, match="noise_multiplier"):
        GaussianEvent(1, REPLACE_ONE, noise_multiplier=0.0)
    acc = PrivacyLedger("zcdp")
    acc.record(GaussianEvent(2, REPLACE_ONE, 1.0))
    assert pickle.loads(pickle.dumps(acc)).privacy_spent(1e-5) == acc.privacy_spent(1e-5)
    assert len(acc) == 2


# --- the discrete Gaussian (secure noise) ---------------------------------------------------------


def _balle_conversion(rho, delta, alphas):
    # Balle et al. 2020, Thm. 21, for the RDP curve alpha * rho.
    return alphas * rho + np.log1p(-1 / alphas) - (math.log(delta) + np.log(alphas)) / (alphas - 1)


@pytest.mark.parametrize("sigma", [0.4, 1.0, 3.0, 50.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-5, 0.1])
def test_discrete_gaussian_epsilon_is_derived_from_its_zcdp(sigma, delta):
    event = DiscreteGaussianEvent(count=1, neighbouring=REPLACE_ONE, noise_multiplier=sigma)
    rho = 1 / (2 * sigma**2)
    assert ZCDPAccountant.rho(event) == pytest.approx(rho)
    np.testing.assert_allclose(RDPAccountant.curve(event, ORDERS), ORDERS * rho, rtol=1e-10)
    eps = per_use_epsilon(event, delta)
    # The continuous Gaussian's exact curve (Balle & Wang) is never above it ...
    assert eps >= gaussian_epsilon(sigma, delta)
    # ... and it is the RDP-to-DP conversion of alpha * rho, minimised over real orders.
    dense = max(0.0, float(_balle_conversion(rho, delta, 1 + np.geomspace(1e-4, 1e7, 400_001)).min()))
    assert eps == pytest.approx(dense, rel=1e-6, abs=1e-12)
    assert eps <= rdp_to_epsilon(RDPAccountant.curve(event, ORDERS), ORDERS, delta) + 1e-12
    # Basic and advanced composition use it, never the continuous curve.
    k = 4
    events = [DiscreteGaussianEvent(count=k, neighbouring=REPLACE_ONE, noise_multiplier=sigma)]
    assert compose(events, delta, "basic").epsilon == pytest.approx(k * per_use_epsilon(event, delta / k))
    plain = [GaussianEvent(count=k, neighbouring=REPLACE_ONE, noise_multiplier=sigma)]
    for method in ("basic", "advanced", "rdp"):
        assert compose(events, delta, method).epsilon >= compose(plain, delta, method).epsilon


def _discrete_gaussian_renyi(sigma2, shift, alpha, support=200):
    ys = np.arange(-support, support + 1)
    log_p = -(ys**2) / (2 * sigma2)
    log_q = -((ys - shift) ** 2) / (2 * sigma2)
    log_z = np.logaddexp.reduce(log_p)  # integer shift: same normaliser
    return np.logaddexp.reduce(alpha * log_p + (1 - alpha) * log_q - log_z) / (alpha - 1)


@pytest.mark.parametrize("sigma2", [0.3, 1.0, 4.0])
def test_discrete_gaussian_vector_release_is_within_its_rdp_curve(sigma2):
    # The secure Gaussian adds independent N_Z(0, sigma^2) to each coordinate of
    # an integer vector: its Renyi divergence is the sum over the coordinates
    # (independence), each bounded by CKS 2020 Thm. 4.  Check the sum, computed
    # exactly, against the event's curve for an integer shift of L2 norm Delta.
    shift = (2, 1, 1)  # ||shift||_2 = sqrt(6)
    multiplier = math.sqrt(sigma2 / 6)
    orders = np.array([1.5, 2.0, 3.0, 8.0, 32.0])
    exact = np.array([sum(_discrete_gaussian_renyi(sigma2, k, a) for k in shift) for a in orders])
    bound = RDPAccountant.curve(DiscreteGaussianEvent(1, REPLACE_ONE, noise_multiplier=multiplier), orders)
    assert np.all(exact <= bound * (1 + 1e-9)), (exact, bound)


def test_privacy_accountant_is_a_deprecated_alias_of_privacy_ledger():
    import skdp.privacy
    from skdp.privacy import PrivacyLedger

    with pytest.warns(FutureWarning, match="renamed PrivacyLedger"):
        alias = skdp.privacy.PrivacyAccountant
    assert alias is PrivacyLedger
    with pytest.warns(FutureWarning):
        from skdp.privacy.accountant import PrivacyAccountant
    assert PrivacyAccountant is PrivacyLedger
