"""The benchmark runner (``python -m benchmarks``): discovery and report, without running any benchmark."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run_all():
    spec = importlib.util.spec_from_file_location("_skdp_run_all", ROOT / "benchmarks" / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_discovers_every_script_but_the_runner_and_helpers(run_all):
    names = run_all.discover()
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("*.py")}
    assert set(names) == {n for n in scripts if not n.startswith("_") and n != "run_all"}
    assert names == sorted(names)
    assert "run_all" not in names and "__main__" not in names
    assert run_all.discover(["no-such-benchmark"]) == []
    some = names[0]
    assert some in run_all.discover([some])


def test_quick_flag_only_for_scripts_that_accept_it(run_all, monkeypatch, tmp_path):
    (tmp_path / "with_quick.py").write_text(
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--quick')\n"
    )
    (tmp_path / "without.py").write_text("print('| a | b |')\n")
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    assert run_all._command("with_quick", full=False)[2:] == ["--quick"]
    assert run_all._command("with_quick", full=True)[2:] == []
    assert run_all._command("without", full=False)[2:] == []
    assert run_all.discover() == ["with_quick", "without"]


def test_report_keeps_tables_plots_and_failures(run_all, tmp_path, monkeypatch):
    monkeypatch.setattr(run_all, "RESULTS", tmp_path)
    runs = [
        {
            "name": "fake_ok",
            "command": "python benchmarks/fake_ok.py --quick",
            "status": "ok",
            "seconds": 3.2,
            "stdout": "header line\n| ours | peer | ratio |\n|---|---|---|\n| 1.0 | 2.0 | 0.5 |\ntrailer",
            "stderr": "",
            "plots": ["fake_ok.png"],
        },
        {
            "name": "fake_broken",
            "command": "python benchmarks/fake_broken.py --quick",
            "status": "FAILED (exit 1)",
            "seconds": 0.4,
            "stdout": "",
            "stderr": "Traceback: boom",
            "plots": [],
        },
    ]
    import datetime

    path = tmp_path / "report.md"
    run_all.write_report(runs, "quick", datetime.datetime(2026, 1, 1), "load average 0", path)
    text = path.read_text()
    # The Markdown table is kept verbatim (rendered), the rest fenced.
    assert "\n| 1.0 | 2.0 | 0.5 |\n" in text
    assert "```\nheader line\n```" in text
    assert "![fake_ok.png](fake_ok.png)" in text
    assert "| [fake_broken](#fake-broken) | FAILED (exit 1) |" in text
    assert "Traceback: boom" in text
    assert "(no output)" in text


def test_a_failing_script_does_not_stop_the_run(run_all, tmp_path, monkeypatch):
    (tmp_path / "good.py").write_text("print('| x |')\n")
    (tmp_path / "bad.py").write_text("raise SystemExit(3)\n")
    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    monkeypatch.setattr(run_all, "RESULTS", results)
    monkeypatch.setattr(run_all, "RUNS", results / "runs")
    monkeypatch.setattr(sys, "argv", ["run_all"])
    code = run_all.main(["--output", str(results / "report.md")])
    text = (results / "report.md").read_text()
    assert code == 1
    assert "| [bad](#bad) | FAILED (exit 3) |" in text
    assert "| [good](#good) | ok |" in text


def test_plots_are_attributed_by_name_not_by_time(run_all, tmp_path, monkeypatch):
    monkeypatch.setattr(run_all, "RESULTS", tmp_path)
    for name in ("mine.png", "mine_extra.png", "someone_elses.png"):
        (tmp_path / name).write_bytes(b"")
    # Output naming its plot wins; a file another process wrote meanwhile is not taken.
    assert run_all.attribute_plots("mine", "plot saved to /x/results/mine.png", since=0) == ["mine.png"]
    # Silent scripts get the files carrying their name, written during the run.
    assert run_all.attribute_plots("mine", "no plot named", since=0) == ["mine.png", "mine_extra.png"]
    assert run_all.attribute_plots("mine", "no plot named", since=2e9) == []


def test_report_only_rebuilds_from_saved_runs(run_all, tmp_path, monkeypatch):
    (tmp_path / "good.py").write_text("print('| x | y |')\n")
    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    monkeypatch.setattr(run_all, "RESULTS", results)
    monkeypatch.setattr(run_all, "RUNS", results / "runs")
    assert run_all.main(["--output", str(results / "first.md")]) == 0
    assert (results / "runs" / "good.json").exists()
    (tmp_path / "good.py").write_text("raise SystemExit(1)\n")  # would fail if it were run again
    assert run_all.main(["--report-only", "--output", str(results / "again.md")]) == 0
    assert "| x | y |" in (results / "again.md").read_text()
