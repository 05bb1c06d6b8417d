"""benchmarks/preprocessing_peers.py: the worker's transform results and the fairness of its declarations.

No benchmark is run: the worker is driven with this interpreter standing in
for a peer's environment (scikit-learn's StandardScaler for the peer), as in
tests/benchmarks/test_benchmarks_runner.py.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.preprocessing import StandardScaler

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name, filename):
    saved = list(sys.path)  # the scripts put benchmarks/ on the path to import _peers
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / filename)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


@pytest.fixture(scope="module")
def bench():
    return _load("_skdp_preprocessing_peers", "preprocessing_peers.py")


@pytest.fixture(scope="module")
def peers():
    return _load("_skdp_peers_for_preprocessing", "_peers.py")


def test_worker_returns_transformed_arrays_to_the_digit(peers, monkeypatch):
    monkeypatch.setenv("SKDP_PEER_PYTHON_SKLEARN", sys.executable)
    rng = np.random.default_rng(0)
    X, Xt = rng.normal(3.0, 2.0, (30, 4)), rng.normal(3.0, 2.0, (7, 4))
    fits = [{"params": {"with_mean": m}, "X": "X", "transform": ["X", "Xt"]} for m in (True, False)]
    result = peers.fit_many("sklearn", "sklearn.preprocessing.StandardScaler", fits, {"X": X, "Xt": Xt})
    for m, fit in zip((True, False), result["fits"], strict=True):
        local = StandardScaler(with_mean=m).fit(X)
        np.testing.assert_array_equal(np.asarray(fit["transform"]["Xt"]), local.transform(Xt))
        np.testing.assert_array_equal(np.asarray(fit["transform"]["X"]), local.transform(X))
    # A fit that asks for no transform gets an empty one (existing users of fit_many are unchanged).
    plain = peers.fit_many("sklearn", "sklearn.preprocessing.StandardScaler", [{"X": "X"}], {"X": X})
    assert plain["fits"][0]["transform"] == {}


def test_breast_cancer_declaration_is_the_documented_pow10_rule(bench):
    X, _ = load_breast_cancer(return_X_y=True)
    upper = np.asarray(bench.BREAST_CANCER_UPPER, dtype=float)
    # Powers of ten computed two ways differ in the last bit on older NumPy.
    np.testing.assert_allclose(upper, 10.0 ** np.ceil(np.log10(X.max(axis=0))), rtol=1e-12, atol=0)
    assert np.linalg.norm(X, axis=1).max() <= bench.BREAST_CANCER_DATA_NORM
    # Digits: pixels in [0, 16] by definition, so 16 sqrt(64) bounds every row.
    Xd, _ = load_digits(return_X_y=True)
    assert Xd.min() >= 0 and Xd.max() <= 16
    assert bench.DIGITS_DATA_NORM == 128.0


@pytest.mark.parametrize("name", ["digits", "breast_cancer"])
def test_both_libraries_get_the_same_epsilon_bounds_and_data_norm(bench, name):
    Xtr, _, _, _, bounds, norm, _ = bench.datasets()[name]
    k = bench.N_COMPONENTS[name]
    ours = {label: make(2.0, 3) for label, make in bench.skdp_rows(k, bounds, norm, "").items()}
    theirs = {
        label: params(2.0, 3) for label, (_, params) in bench.diffprivlib_jobs(k, bounds, norm, "").items()
    }
    for est in ours.values():
        assert est.epsilon == 2.0 and est.random_state == 3
    for params in theirs.values():
        assert params["epsilon"] == 2.0 and params["random_state"] == 3
    declared = [bounds[0].tolist(), bounds[1].tolist()]
    scaler = ours["skdp DPStandardScaler(bounds=declared)"]
    assert [list(b) for b in scaler.bounds] == declared
    assert theirs["diffprivlib StandardScaler(bounds=declared)"]["bounds"] == declared
    pca = ours[f"skdp DPPCA({k}, data_norm={norm:g})"]
    their_pca = theirs[f"diffprivlib PCA({k}, data_norm={norm:g}, bounds=declared)"]
    assert pca.data_norm == their_pca["data_norm"] == norm
    assert pca.n_components == their_pca["n_components"] == k
    assert their_pca["bounds"] == declared
    # The declaration is a constant, not the training split's own range.
    assert not np.array_equal(bounds[1], Xtr.max(axis=0))
