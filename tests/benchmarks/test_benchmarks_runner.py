"""The benchmark runner (``python -m benchmarks``) and its peer environments, without running any benchmark."""

import ast
import datetime
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import gaussian_blobs

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def _load(name, filename):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / filename)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run_all():
    return _load("_skdp_run_all", "run_all.py")


@pytest.fixture(scope="module")
def peers():
    return _load("_skdp_peers", "_peers.py")


def test_discovers_every_script_but_the_runner_and_helpers(run_all):
    names = run_all.discover()
    scripts = {p.stem for p in BENCHMARKS.glob("*.py")}
    assert set(names) == {n for n in scripts if not n.startswith("_") and n != "run_all"}
    assert names == sorted(names)
    assert "run_all" not in names and "__main__" not in names
    assert run_all.discover(["no-such-benchmark"]) == []
    some = names[0]
    assert some in run_all.discover([some])


def test_quick_mode_is_the_declared_constant_not_a_grep(run_all, monkeypatch, tmp_path):
    (tmp_path / "declared.py").write_text('import argparse\nQUICK_ARGS = ("--quick", "--reps", "1")\n')
    (tmp_path / "annotated.py").write_text('QUICK_ARGS: tuple = ("--small",)\n')
    # Mentions --quick (even parses it) but declares nothing: runs as is.
    (tmp_path / "mentions.py").write_text(
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--quick')\n"
    )
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    assert run_all._command("declared", full=False)[2:] == ["--quick", "--reps", "1"]
    assert run_all._command("declared", full=True)[2:] == []
    assert run_all._command("annotated", full=False)[2:] == ["--small"]
    assert run_all._command("mentions", full=False)[2:] == []
    assert run_all.discover() == ["annotated", "declared", "mentions"]


def test_every_benchmark_with_a_quick_option_declares_it(run_all):
    for name in run_all.discover():
        source = (BENCHMARKS / f"{name}.py").read_text()
        if '"--quick"' in source:
            assert run_all.quick_args(name) == ("--quick",), name
        for peer in run_all.declared(name, "PEERS"):
            assert (BENCHMARKS / "peers" / f"{peer}.txt").exists(), (name, peer)


def test_no_benchmark_patches_scikit_learn_or_imports_private_skdp():
    for path in BENCHMARKS.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("skdp"):
                assert not any(part.startswith("_") for part in node.module.split(".")), (
                    path.name,
                    node.module,
                )
                assert not any(a.name.startswith("_") for a in node.names), (path.name, node.module)
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    # ``module.Class.attr = ...`` on an imported library is a monkeypatch.
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute):
                        assert ast.unparse(target).split(".")[0] not in {"sklearn", "linear_model", "tree"}, (
                            path.name,
                            ast.unparse(target),
                        )


def test_report_keeps_tables_plots_failures_peers_and_note(run_all, tmp_path, monkeypatch):
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
            "peers": ["diffprivlib"],
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
    path = tmp_path / "report.md"
    peers = {
        "diffprivlib": "diffprivlib not installed: run `python benchmarks/peers/make_env.py diffprivlib`"
    }
    run_all.write_report(
        runs,
        "quick",
        datetime.datetime(2026, 1, 1),
        "load average 0",
        path,
        note="Quick run, shared machine",
        peers=peers,
    )
    text = path.read_text()
    assert text.splitlines()[2] == "**Quick run, shared machine**"
    assert "by `python -m benchmarks --quick` at commit " in text
    # The Markdown table is kept verbatim (rendered), the rest fenced.
    assert "\n| 1.0 | 2.0 | 0.5 |\n" in text
    assert "```\nheader line\n```" in text
    assert "![fake_ok.png](fake_ok.png)" in text
    assert "| [fake_ok](#fake-ok) | ok | 3 | diffprivlib | 1 |" in text
    assert "| [fake_broken](#fake-broken) | FAILED (exit 1) | 0 | - | 0 |" in text
    assert (
        "| diffprivlib | diffprivlib not installed: run `python benchmarks/peers/make_env.py diffprivlib` |"
        in text
    )
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
    assert run_all.main(["--output", str(results / "first.md"), "--note", "Shared machine"]) == 0
    assert (results / "runs" / "good.json").exists()
    (tmp_path / "good.py").write_text("raise SystemExit(1)\n")  # would fail if it were run again
    assert run_all.main(["--report-only", "--output", str(results / "again.md"), "--note", "Rebuilt"]) == 0
    first, again = (results / "first.md").read_text(), (results / "again.md").read_text()
    assert "| x | y |" in again
    # The rebuilt report keeps when, how and under what load the runs were made; the note is not the command.
    generated = [line for line in first.splitlines() if line.startswith("Generated ")]
    assert generated and generated[0] in again.splitlines()
    assert "by `python -m benchmarks --quick --output " in generated[0] and "Shared" not in generated[0]
    assert "**Rebuilt**" in again


def test_a_missing_peer_environment_is_a_message_naming_its_build_command(peers, tmp_path, monkeypatch):
    monkeypatch.setattr(peers, "VENVS", tmp_path)
    monkeypatch.delenv("SKDP_PEER_PYTHON_DIFFPRIVLIB", raising=False)
    assert not peers.is_installed("diffprivlib")
    with pytest.raises(peers.PeerNotInstalled, match=r"python benchmarks/peers/make_env\.py diffprivlib"):
        peers.fit_many("diffprivlib", "diffprivlib.models.KMeans", [], {"X": np.zeros((2, 2))})
    assert peers.status("diffprivlib").startswith(
        "diffprivlib not installed: run `python benchmarks/peers/make_env.py"
    )
    # A half-built environment (interpreter, no freeze written last) is not taken for a built one.
    (tmp_path / "diffprivlib" / "bin").mkdir(parents=True)
    (tmp_path / "diffprivlib" / "bin" / "python").write_text("")
    assert not peers.is_installed("diffprivlib")
    # An override pointing nowhere is "not installed" too, not a crash.
    monkeypatch.setenv("SKDP_PEER_PYTHON_DIFFPRIVLIB", str(tmp_path / "nowhere"))
    assert not peers.is_installed("diffprivlib")


def test_worker_fits_in_another_process_and_returns_json_numbers(peers, monkeypatch):
    # This interpreter stands in for a peer's environment; scikit-learn's KMeans for the peer.
    monkeypatch.setenv("SKDP_PEER_PYTHON_SKLEARN", sys.executable)
    from sklearn.cluster import KMeans
    from sklearn.linear_model import LogisticRegression

    X = gaussian_blobs(0, [0, 3], 20, 0.1, n_features=2)
    y = np.repeat([0, 1], 20)
    fits = [
        {
            "params": {"n_clusters": 2, "n_init": 1, "random_state": s},
            "X": "X",
            "predict": ["X"],
            "attributes": ["cluster_centers_"],
        }
        for s in (0, 1)
    ]
    result = peers.fit_many("sklearn", "sklearn.cluster.KMeans", fits, {"X": X})
    assert len(result["fits"]) == 2 and set(result["versions"]) == {"sklearn"}
    for s, fit in zip((0, 1), result["fits"], strict=True):
        local = KMeans(n_clusters=2, n_init=1, random_state=s).fit(X)
        np.testing.assert_array_equal(fit["predict"]["X"], local.predict(X))
        # JSON keeps every digit of a float64 (repr round-trips).
        np.testing.assert_array_equal(
            np.asarray(fit["attributes"]["cluster_centers_"]), local.cluster_centers_
        )
        assert fit["fit_seconds"] > 0
    scored = peers.fit_many(
        "sklearn",
        "sklearn.linear_model.LogisticRegression",
        [{"params": {}, "X": "X", "y": "y", "score": [["X", "y"]]}],
        {"X": X, "y": y},
    )
    assert scored["fits"][0]["score"] == [LogisticRegression().fit(X, y).score(X, y)]
    # JSON has no tuples: lists named in tuple_params reach the constructor as tuples
    # (MinMaxScaler, like diffprivlib's bounds, accepts a tuple and refuses a list).
    job = [{"params": {"feature_range": [0.0, 2.0]}, "X": "X", "attributes": ["data_max_"]}]
    done = peers.fit_many(
        "sklearn", "sklearn.preprocessing.MinMaxScaler", job, {"X": X}, tuple_params=["feature_range"]
    )
    np.testing.assert_array_equal(done["fits"][0]["attributes"]["data_max_"], X.max(axis=0))
    with pytest.raises(RuntimeError, match="peer sklearn failed"):
        peers.fit_many("sklearn", "sklearn.preprocessing.MinMaxScaler", job, {"X": X})


def test_peer_requirements_pin_the_conflicting_scikit_learn():
    make_env = _load("_skdp_make_env", "peers/make_env.py")
    assert "diffprivlib" in make_env.available()
    pins = (BENCHMARKS / "peers" / "diffprivlib.txt").read_text().splitlines()
    assert "diffprivlib==0.6.6" in pins and "scikit-learn==1.7.2" in pins
    assert str(make_env.env_dir("diffprivlib")).endswith(str(Path("benchmarks", ".venvs", "diffprivlib")))


def test_report_holds_no_machine_path_and_dates_a_rerun_section(run_all, tmp_path, monkeypatch):
    monkeypatch.setattr(run_all, "RESULTS", tmp_path)
    root = str(run_all.ROOT)
    runs = [
        {
            "name": "fake_plot",
            "command": "python benchmarks/fake_plot.py",
            "status": "ok",
            "seconds": 1.0,
            "stdout": f"plot saved to {root}/benchmarks/results/fake_plot.png",
            "stderr": "",
            "plots": [],
            "revision": "aaaaaaa",
        },
        {
            "name": "fake_rerun",
            "command": "python benchmarks/fake_rerun.py",
            "status": "ok",
            "seconds": 1.0,
            "stdout": "done",
            "stderr": "",
            "plots": [],
            "revision": "bbbbbbb",
            "date": "2026-01-02T03:04:05",
        },
    ]
    peers = {
        "diffprivlib": "diffprivlib 0.6.6 (`/home/someone/checkout/benchmarks/.venvs/diffprivlib/bin/python`)"
    }
    path = tmp_path / "report.md"
    run_all.write_report(
        runs, "quick", datetime.datetime(2026, 1, 1), "load 0", path, peers=peers, revision="aaaaaaa"
    )
    text = path.read_text()
    assert root not in text and "/home/someone" not in text
    assert "plot saved to benchmarks/results/fake_plot.png" in text
    assert "(`benchmarks/.venvs/diffprivlib/bin/python`)" in text
    # The section run on the header's commit says nothing more; a rerun names its commit and date.
    assert "`python benchmarks/fake_plot.py`: ok, 1 s\n" in text
    assert "`python benchmarks/fake_rerun.py`: ok, 1 s, run 2026-01-02T03:04:05 at commit bbbbbbb\n" in text
