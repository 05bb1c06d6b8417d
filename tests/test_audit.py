"""The auditing tool: consistent on real estimators, able to flag broken ones."""

import numpy as np
import pytest

from skdp.audit import AuditResult, audit, clopper_pearson, epsilon_lower_bound, replace_one_neighbour
from skdp.audit.__main__ import main
from skdp.bayes import DPBetaBernoulli


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


@pytest.mark.slow
def test_cli_flags_broken_variants_and_passes_real_ones(capsys):
    assert main(["--runs", "5000"]) == 0
    out = capsys.readouterr().out
    assert out.count("VIOLATION    VIOLATION") == 2
    assert "WRONG" not in out
