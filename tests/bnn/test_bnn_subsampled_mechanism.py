"""Tests of skdp.privacy.mechanisms.subsampled (the mechanism DP-SEP releases through)."""

import math

import numpy as np
import pytest

from skdp.privacy import ADD_REMOVE, REPLACE_ONE, PrivacyLedger, SubsampledGaussianEvent, compose
from skdp.privacy.mechanisms.subsampled import SubsampledGaussianMechanism


def test_event_carries_sampling_and_relation():
    mech = SubsampledGaussianMechanism(0.5, 1.5, sampling_rate=0.01)
    event = mech.event(count=7)
    assert isinstance(event, SubsampledGaussianEvent)
    assert (event.count, event.noise_multiplier, event.sampling_rate) == (7, 3.0, 0.01)
    assert event.sampling == "without_replacement" and event.neighbouring == REPLACE_ONE
    poisson = SubsampledGaussianMechanism(0.5, 1.5, sampling_rate=0.01, sampling="poisson")
    assert poisson.neighbouring == ADD_REMOVE
    assert poisson.event().sampling == "poisson"


def test_release_adds_noise_of_the_stated_scale_and_records():
    mech = SubsampledGaussianMechanism(2.0, 3.0, sampling_rate=0.1)
    ledger = PrivacyLedger()
    n = 200_000
    out = mech.release(np.zeros(n), np.random.default_rng(0), ledger)
    assert abs(out.std() / 3.0 - 1) < 5 / math.sqrt(2 * n)
    assert len(ledger) == 1


def test_session_records_one_event_with_the_number_of_releases():
    mech = SubsampledGaussianMechanism(1.0, 2.0, sampling_rate=0.05)
    ledger = PrivacyLedger()
    rng = np.random.default_rng(1)
    outs = []
    with mech.session(rng, ledger) as release:
        for _ in range(500):
            outs.append(release(np.zeros(100)))
    (event,) = ledger.events
    assert event.count == 500
    noise = np.concatenate(outs)
    assert abs(noise.std() / 2.0 - 1) < 5 / math.sqrt(2 * noise.size)
    # The ledger's guarantee is that of 500 subsampled releases.
    assert ledger.privacy_spent(1e-5).epsilon == pytest.approx(compose([mech.event(500)], 1e-5).epsilon)


def test_session_records_partial_loops_and_rejects_nan():
    mech = SubsampledGaussianMechanism(1.0, 2.0, sampling_rate=0.05)
    ledger = PrivacyLedger()
    with pytest.raises(RuntimeError):
        with mech.session(np.random.default_rng(0), ledger) as release:
            release(np.zeros(3))
            release(np.zeros(3))
            raise RuntimeError("interrupted")
    assert ledger.events[0].count == 2
    with pytest.raises(ValueError, match="NaN"):
        with mech.session(np.random.default_rng(0), PrivacyLedger()) as release:
            release(np.array([np.nan]))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"sampling_rate": 0.0}, "sampling_rate"),
        ({"sampling_rate": 1.5}, "sampling_rate"),
        ({"sampling_rate": 0.1, "sampling": "shuffle"}, "sampling"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SubsampledGaussianMechanism(1.0, 1.0, **kwargs)


def test_poisson_release_on_a_replace_one_ledger_is_dpseps_event():
    """DP-SEP's Poisson release: described under add/remove at sensitivity gamma C / N,
    recorded on its replace-one ledger at multiplier sigma (std over 2 gamma C / N),
    and composed by PLD as dp-accounting's REPLACE_ONE pair with std 2 sigma."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    sigma, q, steps, unit = 2.4, 0.01, 400, 1.5e-4  # unit = gamma C / N
    mech = SubsampledGaussianMechanism(unit, sigma * 2 * unit, sampling_rate=q, sampling="poisson")
    ledger = PrivacyLedger(composition="pld", neighbouring=REPLACE_ONE)
    with mech.session(np.random.default_rng(0), ledger) as release:
        for _ in range(steps):
            release(np.zeros(3))
    (event,) = ledger.events
    assert event.neighbouring == REPLACE_ONE and event.sampling == "poisson"
    assert event.noise_multiplier == pytest.approx(sigma, rel=1e-12)
    assert event.count == steps and event.sampling_rate == q
    reference = pld_privacy_accountant.PLDAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    reference.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(2 * sigma)), steps)
    assert ledger.privacy_spent(1e-5).epsilon == pytest.approx(reference.get_epsilon(1e-5), rel=0.01)
    # RDP has no curve for it.
    with pytest.raises(ValueError, match="composition"):
        compose(ledger.events, 1e-5, "rdp")
