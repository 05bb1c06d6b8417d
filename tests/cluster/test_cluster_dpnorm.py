"""DPNorm (Acs et al., Alg. 3): skdp.privacy.norm_selection."""

import math

import numpy as np
import pytest

from skdp.privacy import ADD_REMOVE, GaussianEvent, PrivacyLedger
from skdp.privacy.mechanisms import additive as mech_module
from skdp.privacy.norm_selection import (
    dp_norm,
    norm_bin_edges,
    norm_histogram,
    norm_selection_event,
)


def test_bin_edges_are_upper_bounds():
    np.testing.assert_allclose(norm_bin_edges(2.0, 4), [0.5, 1.0, 1.5, 2.0])


def test_histogram_bins_are_left_open_right_closed():
    # (0, .5], (.5, 1], (1, 1.5], (1.5, 2]; 0 goes to the first bin, 7 to the last.
    counts = norm_histogram([0.0, 0.5, 0.50001, 1.0, 1.2, 2.0, 7.0], 2.0, 4)
    np.testing.assert_array_equal(counts, [2, 2, 1, 2])


def test_every_record_is_counted_once():
    norms = np.random.default_rng(0).exponential(3.0, size=1000)
    assert norm_histogram(norms, 2.0, 50).sum() == 1000


@pytest.mark.parametrize("bad", [[-1.0], [[1.0]]])
def test_bad_norms_rejected(bad):
    with pytest.raises(ValueError, match="norms"):
        norm_histogram(bad, 1.0, 10)


def test_nan_and_infinite_norms_count_as_infinite():
    # The clipping rule's reading of a norm that cannot be computed: above
    # every bound, so in the last bin, and still one bin per record.
    counts = norm_histogram([np.nan, np.inf, 0.3], 1.0, 10)
    np.testing.assert_array_equal(counts, [0, 0, 1, 0, 0, 0, 0, 0, 0, 2])


@pytest.mark.parametrize(("kwargs", "name"), [({"c_max": 0.0}, "c_max"), ({"n_bins": 0}, "n_bins")])
def test_bad_parameters_rejected(kwargs, name):
    args = {"c_max": 1.0, "n_bins": 10, **kwargs}
    with pytest.raises(ValueError, match=name):
        dp_norm([0.5], args["c_max"], args["n_bins"], 1.0, np.random.default_rng(0), PrivacyLedger())


def test_selects_mode_bin_and_records_one_event():
    rng = np.random.default_rng(1)
    # 3000 norms in (0.6, 0.62], 1000 spread elsewhere: the mode bin wins by
    # far more than the noise (std sqrt(2) * 2 ~ 2.8 per bin).
    norms = np.r_[rng.uniform(0.601, 0.62, 3000), rng.uniform(0, 1.4, 1000)]
    ledger = PrivacyLedger()
    bound = dp_norm(norms, math.sqrt(2), 100, 2.0, rng, ledger)
    edges = norm_bin_edges(math.sqrt(2), 100)
    assert bound == edges[np.searchsorted(edges, 0.61)]
    assert ledger.events == [GaussianEvent(count=1, neighbouring="replace_one", noise_multiplier=2.0)]


@pytest.mark.parametrize(("neighbouring", "sensitivity"), [("replace_one", math.sqrt(2)), (ADD_REMOVE, 1.0)])
def test_histogram_noise_scale(monkeypatch, neighbouring, sensitivity):
    """The histogram gets N(0, sensitivity * z) per bin (Alg. 3 line 2: sqrt(2) sigma_C)."""
    seen = []
    original = mech_module._AdditiveMechanism.release

    def spy(self, value, rng, accountant):
        out = original(self, value, rng, accountant)
        seen.append((self.sensitivity, self.scale, out - np.asarray(value)))
        return out

    monkeypatch.setattr(mech_module._AdditiveMechanism, "release", spy)
    z = 3.0
    ledger = PrivacyLedger(neighbouring=neighbouring)
    dp_norm(np.full(10, 0.5), 1.0, 20000, z, np.random.default_rng(0), ledger, neighbouring=neighbouring)
    ((sens, scale, noise),) = seen
    assert sens == pytest.approx(sensitivity)
    assert scale == pytest.approx(z * sensitivity)
    # 20000 bins: the sample std is within 4 standard errors (std / sqrt(2n)).
    assert abs(noise.std() - z * sensitivity) < 4 * z * sensitivity / math.sqrt(2 * noise.size)


def test_event_helper_matches_release():
    ledger = PrivacyLedger()
    dp_norm([0.3, 0.4], 1.0, 10, 1.5, np.random.default_rng(0), ledger)
    assert ledger.events == [norm_selection_event(1.5)]


def test_histogram_sensitivity_holds_for_replacements():
    """Replacing one norm by any other moves at most one unit between two bins."""
    rng = np.random.default_rng(2)
    norms = rng.uniform(0, 3, 200)
    base = norm_histogram(norms, 2.0, 25)
    worst = 0.0
    for new in np.r_[0.0, rng.uniform(0, 3, 50), 10.0]:
        changed = norms.copy()
        changed[rng.integers(200)] = new
        worst = max(worst, np.linalg.norm(norm_histogram(changed, 2.0, 25) - base))
    assert worst == pytest.approx(math.sqrt(2))
