"""benchmarks/fit_speed.py runs its smallest configuration and prints its three tables.

No timing is asserted (timings belong to the benchmark's PASS/FAIL lines);
the checks are that every table is printed, that the accounting clock
restores what it wrapped, and that the budget backends report the same
total.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    saved = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location("_skdp_fit_speed", BENCHMARKS / "fit_speed.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


def test_smoke_configuration_prints_the_tables(bench, capsys):
    import skdp.privacy.calibration as calibration
    import skdp.privacy.ledger as accountant

    compose, calibrate = accountant.compose, calibration.calibrate_noise_multiplier
    report = bench.main(["--smoke"])
    out = capsys.readouterr().out
    for heading in (
        "1. DP fit / non-private twin",
        "First DP fit in a fresh process",
        "2. DP-SGD calibration",
        "3. Budget scaling",
        "Targets",
    ):
        assert heading in out
    assert "PASS" in out or "FAIL" in out
    # The accounting clock put the original functions back.
    assert accountant.compose is compose and calibration.calibrate_noise_multiplier is calibrate
    for _, _, t_dp, t_twin, _, acc in report["fits"]:
        assert t_dp > 0 and t_twin > 0 and 0 <= acc <= t_dp
    (_, t_cold, acc_cold), *_ = report["cold"]
    assert t_cold > 0 and 0 < acc_cold <= t_cold
    spent = {(backend, n): eps for backend, n, _, _, _, eps in report["budget"]}
    assert spent[("memory", 10)] == pytest.approx(spent[("sqlite", 10)], rel=1e-12)
    assert spent[("sqlite", 10)] == spent[("sqlite-process", 10)]
    assert report["fsync_ms"] > 0
