"""The auditing tool: consistent on real estimators, able to flag broken ones.

Every case of the suite runs here with its ``test_runs`` fits per dataset:
the real estimators' (``skdp.audit._cases.CASES``, installed) and the
deliberately broken variants (``tests/_audit_broken.py``, outside the
package).  A real estimator's empirical lower bound must not exceed its
``privacy_spent_`` (the claim), and every BROKEN variant must be flagged.
``python -m skdp.audit --all --cases tests/_audit_broken.py`` runs the same
cases with more fits.
"""

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import _audit_broken
import numpy as np
import pytest

import skdp
from skdp.audit import (
    AuditCase,
    AuditResult,
    _cases,
    audit,
    clopper_pearson,
    epsilon_lower_bound,
    mu_lower_bound,
    replace_one_neighbour,
)
from skdp.audit.__main__ import main
from skdp.audit._cases import load_cases, run_case
from skdp.bayes import DPBetaBernoulli
from skdp.cluster import DPKMeans

BROKEN_FILE = Path(_audit_broken.__file__)
#: Every case: the real estimators' and the broken variants'.
CASES = _cases.CASES + _audit_broken.CASES


def test_clopper_pearson_contains_the_truth():
    lo, hi = clopper_pearson(30, 100, 0.05)
    assert lo < 0.3 < hi
    assert clopper_pearson(0, 50, 0.05)[0] == 0.0 and clopper_pearson(50, 50, 0.05)[1] == 1.0


def test_lower_bound_on_a_known_mechanism():
    # Randomised response with flip probability 1/(1 + e): exactly eps = 1.
    rng = np.random.default_rng(0)
    p = np.e / (1 + np.e)
    a = (rng.random(50_000) < p).astype(float)
    b = (rng.random(50_000) < 1 - p).astype(float)
    lower = epsilon_lower_bound(a, b)
    assert 0.9 < lower <= 1.0


def test_audit_runs_and_reports():
    X = np.zeros((20, 1), dtype=int)
    X[:7] = 1
    X_neighbour = X.copy()
    X_neighbour[7] = 1
    result = audit(DPBetaBernoulli(epsilon=1.0), X, X_neighbour, lambda m: m.noisy_counts_[0, 1], n_runs=500)
    assert isinstance(result, AuditResult)
    assert result.claimed_epsilon == 1.0 and result.claimed_delta == 0.0
    assert result.verdict == "consistent" and 0 <= result.epsilon_lower_bound <= 1.0


def test_replace_one_neighbour_moves_one_row_to_the_boundary():
    X = np.array([[0.2, 0.9], [0.5, 0.1], [1.0, 0.4]])
    Xn = replace_one_neighbour(X, index=0)
    assert np.array_equal(Xn[1:], X[1:])
    assert np.array_equal(Xn[0], [1.0, 0.1])


# Cheap enough for the default run (under ~10 s together); the others are slow.
_FAST = {"DPBetaBernoulli(laplace, eps=1)", "DPBetaBernoulli(ops, eps=1, a0=0.2)"}


def _marked(cases):
    return [
        pytest.param(case, id=case.name, marks=() if case.name in _FAST else pytest.mark.slow)
        for case in cases
    ]


@pytest.mark.parametrize("case", _marked([c for c in CASES if not c.broken]))
def test_real_estimator_lower_bound_never_exceeds_its_claim(case):
    result = run_case(case, case.test_runs)
    assert result.n_runs == case.test_runs
    assert result.claimed_epsilon > 0
    assert 0.0 <= result.epsilon_lower_bound <= result.claimed_epsilon, case.name
    if result.claimed_mu is not None:
        assert 0.0 <= result.mu_lower_bound <= result.claimed_mu, case.name
    assert result.verdict == "consistent"


@pytest.mark.slow
@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES if c.broken])
def test_broken_variant_is_flagged(case):
    result = run_case(case, case.test_runs)
    if result.claimed_mu is None:
        assert result.epsilon_lower_bound > result.claimed_epsilon, case.name
    else:
        # A Gaussian ledger's claim is refuted through its Gaussian DP.
        assert result.mu_lower_bound > result.claimed_mu, case.name
    assert result.verdict == "VIOLATION"


def test_mu_lower_bound_on_known_gaussians():
    """Shifted unit Gaussians are exactly mu-GDP: the bound approaches mu from below, never above."""
    rng = np.random.default_rng(0)
    for mu in (0.5, 1.0):
        # 6,000 runs each: 3,000 choose the thresholds, 3,000 are counted.
        bounds = [mu_lower_bound(rng.normal(size=6000), rng.normal(mu, 1, size=6000)) for _ in range(5)]
        assert all(0.6 * mu < b <= mu for b in bounds), (mu, bounds)
    # Identical distributions: nothing to find.
    assert mu_lower_bound(rng.normal(size=3000), rng.normal(size=3000)) < 0.15


def test_gaussian_ledger_claims_its_gdp_and_others_do_not():
    X, _ = _cases._one_cluster_canary()
    model = _cases._dp_lloyd("gaussian", 2.0).set_params(random_state=0).fit(X)
    events = model.privacy_ledger_.events
    expected = np.sqrt(sum(e.count / e.noise_multiplier**2 for e in events))
    assert model.privacy_ledger_.gaussian_dp_mu() == pytest.approx(expected)
    assert _cases._dp_lloyd("laplace", 1.0).fit(X).privacy_ledger_.gaussian_dp_mu() is None


@pytest.mark.slow
def test_gaussian_audit_has_power_on_the_real_estimator():
    """The real DPKMeans(gaussian) case: the mu bound reaches 60% of the claim in 4,000 runs.

    So noise 40% below the recorded one (true mu 1/0.6 of the claim) would be
    refuted by the same run: the audit of the real estimator can fail.
    """
    case = next(c for c in CASES if c.name.startswith("DPKMeans(gaussian"))
    result = run_case(case, case.test_runs)
    assert 0.6 * result.claimed_mu < result.mu_lower_bound <= result.claimed_mu


def test_suite_covers_the_estimators_and_has_broken_variants():
    estimators = {case.estimator for case in CASES if not case.broken}
    assert {
        "DPBetaBernoulli",
        "DPNaiveBayesHMM",
        "DPKMeans",
        "DPKernelKMeans",
        "DPGaussianMixture",
        "DPSEPRegressor",
    } <= estimators
    if importlib.util.find_spec("torch") is not None:
        assert "DPNeuralNetClassifier" in estimators
    assert sum(case.broken for case in CASES) >= 3
    assert all(
        type(case.make_estimator()).__name__ == case.estimator for case in CASES if "Neural" not in case.name
    )
    # Each broken variant still claims what the real estimator claims.
    for case in CASES:
        if case.broken:
            X, _ = case.make_data()[:2]
            with case.patch():
                model = case.make_estimator().set_params(random_state=0).fit(X)
            assert model.privacy_spent_.epsilon <= case.make_estimator().epsilon * (1 + 1e-9)
            try:
                real = case.make_estimator().set_params(random_state=0).fit(X)
            except ValueError:
                continue  # the real estimator refuses what the broken one releases (OPS)
            # Equal up to the calibration's tolerance: a variant may plan from
            # other (noisy) counts, and calibration lands just under epsilon.
            assert tuple(model.privacy_spent_) == pytest.approx(tuple(real.privacy_spent_), rel=2e-3)


def test_canaries_are_neighbours_at_the_bounds():
    for case in CASES:
        data = case.make_data()
        X, X_neighbour = np.asarray(data[0]), np.asarray(data[1])
        if X_neighbour.shape[0] != X.shape[0]:
            # One record added, nothing else changed.
            assert X_neighbour.shape[0] == X.shape[0] + 1, case.name
            np.testing.assert_array_equal(X_neighbour[:-1], X)
            if len(data) == 4:  # supervised: the targets too
                np.testing.assert_array_equal(np.asarray(data[3])[:-1], data[2])
            continue
        assert X.shape == X_neighbour.shape, case.name
        changed = np.flatnonzero(np.any(X != X_neighbour, axis=1))
        if len(data) == 4:
            changed = np.union1d(changed, np.flatnonzero(np.asarray(data[2]) != np.asarray(data[3])))
        assert changed.size == 1, case.name  # replace-one: exactly one record differs
    # The DP Lloyd canary moves one row from -C to +C in the only cluster: the sums' full sensitivity 2C.
    X, Xn = _cases._one_cluster_canary()
    assert np.abs(X).max() == 1.0 and np.abs(Xn).max() == 1.0
    assert float(Xn.sum() - X.sum()) == 2.0


def test_skipping_the_blas_thread_limit_changes_no_output():
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.7, 0.7, size=(50, 2))
    init = np.array([[0.3, 0.3], [-0.3, -0.3]])
    est = DPKMeans(n_clusters=2, epsilon=1.0, data_norm=1.0, max_iter=2, init=init, random_state=3)
    reference = est.fit(X).cluster_centers_.copy()
    with _cases._no_blas_limits():
        np.testing.assert_array_equal(est.fit(X).cluster_centers_, reference)


def test_noisy_sum_statistic_and_broken_sum_sensitivity():
    X, _ = _cases._one_cluster_canary()
    est = _cases._dp_lloyd("laplace", 1.0).set_params(random_state=0)
    model = est.fit(X)
    # centre * noisy size is the released noisy sum: no re-seeding, no projection.
    assert model.noisy_counts_[0] > 100 and abs(model.cluster_centers_[0, 0]) < 1
    with _audit_broken._broken_sum_sensitivity():
        broken = est.fit(X)
        assert _cases._cluster_base.sum_sensitivity(1.0, 1, 1) == 1.0  # 2C / 2
    assert _cases._cluster_base.sum_sensitivity(1.0, 1, 1) == 2.0  # restored
    assert broken.privacy_spent_.epsilon == pytest.approx(1.0)  # still claims the budget


@pytest.mark.slow  # DP-SEP's first fit calibrates a without-replacement plan (seconds)
def test_audit_passes_targets_to_supervised_estimators():
    case = next(c for c in CASES if c.estimator == "DPSEPRegressor")
    result = run_case(case, 3)
    assert result.n_runs == 3 and result.claimed_epsilon == pytest.approx(1.0, rel=1e-3)


def test_cli_all_prints_the_table_and_fails_on_a_wrong_verdict(capsys, monkeypatch):
    cheap = [
        c for c in CASES if c.name.startswith(("DPBetaBernoulli(laplace", "BROKEN DPBetaBernoulli: Laplace"))
    ]
    monkeypatch.setattr("skdp.audit.__main__.CASES", cheap)
    monkeypatch.setattr("skdp.audit.__main__.load_cases", lambda path: [])
    # 30 fits cannot flag the halved noise: the verdict is wrong and the CLI says so.
    assert main(["--all", "--runs", "30", "--cases", "ignored.py"]) == 1
    out = capsys.readouterr().out
    for column in (
        "estimator",
        "claimed eps",
        "lower bound",
        "claimed mu",
        "mu lower",
        "verdict",
        "expected",
    ):
        assert column in out
    assert "DPBetaBernoulli" in out and "BROKEN DPBetaBernoulli: Laplace noise halved" in out
    assert "<-- WRONG" in out and "2 cases (1 broken variants); 1 unexpected verdict(s)." in out


@pytest.mark.slow
def test_cli_flags_the_broken_variant(capsys):
    assert main(["--cases", str(BROKEN_FILE), "-k", "Laplace noise halved", "--runs", "6000"]) == 0
    out = capsys.readouterr().out
    assert out.count("VIOLATION  VIOLATION") == 1 and "WRONG" not in out


def test_cli_list_and_filter(capsys):
    assert main(["--list"]) == 0  # the installed cases: the real estimators only
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == len(_cases.CASES) and not any(line.endswith("[broken variant]") for line in listed)
    assert main(["--list", "--cases", str(BROKEN_FILE)]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == len(CASES)
    assert sum(line.endswith("[broken variant]") for line in listed) == sum(c.broken for c in CASES)
    assert main(["--list", "-k", "DPNaiveBayesHMM"]) == 0
    assert all("DPNaiveBayesHMM" in line for line in capsys.readouterr().out.splitlines())


def test_no_broken_variant_is_installed():
    """The package audits the real estimators only; the broken variants live with the tests."""
    assert _cases.CASES and not any(case.broken for case in _cases.CASES)
    assert _audit_broken.CASES and all(case.broken for case in _audit_broken.CASES)
    # No module of the package builds a case with broken=True.
    package = Path(skdp.__file__).parent
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "broken":
                assert not (isinstance(node.value, ast.Constant) and node.value.value is True), path


def test_load_cases_reads_a_file_of_cases(tmp_path):
    # The broken variants' file, already imported by this module: the same module, the same cases.
    assert load_cases(BROKEN_FILE) == _audit_broken.CASES
    own = tmp_path / "my_cases.py"
    own.write_text(
        "from skdp.audit import AuditCase\nCASES = [AuditCase('DPKMeans: mine', None, None, None)]\n"
    )
    (case,) = load_cases(own)
    assert isinstance(case, AuditCase) and case.estimator == "DPKMeans"
    bad = tmp_path / "no_cases.py"
    bad.write_text("X = 1\n")
    with pytest.raises(ValueError, match="CASES"):
        load_cases(bad)


def test_python_m_skdp_audit_runs_the_broken_file(tmp_path):
    """The command line, in a fresh process, loads the broken variants from their file."""
    repository = Path(skdp.__file__).parent.parent
    out = subprocess.run(
        [sys.executable, "-m", "skdp.audit", "--list", "--cases", str(BROKEN_FILE)],
        cwd=repository,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "BROKEN DPBetaBernoulli: Laplace noise halved  [broken variant]" in out
    assert len(out.splitlines()) == len(CASES)
