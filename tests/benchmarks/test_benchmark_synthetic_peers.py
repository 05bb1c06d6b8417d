"""benchmarks/synthetic_data.py's smartnoise peers: the worker's synthesizer path, the recorded run, the fallback.

smartnoise-synth is not installed here (CI builds no peer environment): a stand-in
``snsynth`` package, bootstrapping the training frame, plays the peer, run by this
interpreter through the same worker protocol.
"""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"

FAKE_SNSYNTH = """
import numpy as np
import pandas as pd


class _Bootstrap:
    def __init__(self, epsilon, **params):
        self.params = dict(params, epsilon=epsilon)

    def fit(self, data, categorical_columns=(), preprocessor_eps=0.0):
        assert list(categorical_columns) == list(data.columns)
        self.data = data

    def sample(self, n):
        return self.data.iloc[np.random.randint(0, len(self.data), n)].reset_index(drop=True)


class Synthesizer:
    @staticmethod
    def create(name, **params):
        assert name in ("mwem", "mst")
        return _Bootstrap(**params)
"""


@pytest.fixture
def synthetic_data(tmp_path, monkeypatch):
    (tmp_path / "snsynth").mkdir()
    (tmp_path / "snsynth" / "__init__.py").write_text(FAKE_SNSYNTH)
    # The worker runs with PYTHONPATH removed: a wrapper interpreter puts the stand-in on the path.
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("SKDP_PEER_PYTHON_SMARTNOISE", str(wrapper))
    spec = importlib.util.spec_from_file_location("_skdp_synthetic_data", BENCHMARKS / "synthetic_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in interpreter is a shell script")
@pytest.mark.filterwarnings("ignore:self.within_class_std_dev_:UserWarning")
def test_record_writes_per_seed_rows_and_the_command_then_the_table_reads_them(
    synthetic_data, tmp_path, monkeypatch
):
    from sklearn.neighbors import NearestCentroid

    # TSTR's LogisticRegression(max_iter=2000) takes seconds; a nearest-centroid classifier
    # shows as well whether the labels came back with their own pixels.
    monkeypatch.setattr(
        synthetic_data, "tstr", lambda Xs, ys, Xt, yt: float(NearestCentroid().fit(Xs, ys).score(Xt, yt))
    )
    cache = tmp_path / "recorded.json"
    argv = ["--record-peers", "mst", "--seeds", "1", "--epsilons", "1"]
    synthetic_data.record_peers(["mst"], [1.0], 1, argv, path=cache)
    recorded = json.loads(cache.read_text())
    mst = recorded["peers"]["mst"]
    assert mst["command"] == "python benchmarks/synthetic_data.py " + " ".join(argv)
    assert mst["seeds_completed"] == 1 and {"date", "machine", "finished"} <= set(mst)
    (row,) = mst["rows"]["1"]
    # The stand-in resamples the training rows: its pixel-pair error is sampling error only, far
    # below the independent-marginals baseline (.014); its label travels with its pixels.
    assert row["seed"] == 0 and row["pixel_pair_error"] < 0.01 and row["tstr"] > 0.7
    assert recorded["versions"]["numpy"] == np.__version__

    rows, notes = synthetic_data.peer_rows(1.0, 1, live=(), cache=recorded)
    by_label = {r[1].split(" (")[0]: r for r in rows}
    assert "recorded" in by_label["smartnoise MST"][1] and "1 seed(s)" in by_label["smartnoise MST"][1]
    assert by_label["smartnoise MST"][2:5] == (row["pixel_pair_error"], row["label_pixel_error"], row["tstr"])
    # MWEM neither live nor recorded here: the numbers, labelled as quoted.
    assert "quoted" in by_label["smartnoise MWEM"][1]
    assert any(mst["command"] in n for n in notes)


def test_without_environment_or_recording_the_peers_are_quoted(synthetic_data, monkeypatch, tmp_path):
    monkeypatch.setenv("SKDP_PEER_PYTHON_SMARTNOISE", str(tmp_path / "nowhere"))
    rows, notes = synthetic_data.peer_rows(8.0, 2, cache={})
    assert [r[1] for r in rows] == [
        "smartnoise MWEM (quoted from the issue, not re-run)",
        "smartnoise MST (quoted from the issue, not re-run)",
    ]
    assert rows[1][2:5] == synthetic_data.QUOTED[8.0]["smartnoise MST"]
    assert any("make_env.py smartnoise" in n for n in notes)
