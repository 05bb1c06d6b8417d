"""What a new user reads: warnings under scikit-learn's searches, and refusals that name their cause."""

import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

from skdp import BudgetAccountant, BudgetExceededError, PrivacyLeakWarning
from skdp.mixture import DPGaussianMixture
from skdp.privacy import BudgetRemaining

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _search(n_jobs):
    X = np.random.default_rng(0).normal(size=(120, 2))
    model = DPGaussianMixture(2, data_norm=None, max_iter=2, random_state=0)  # warns: data_norm not set
    return GridSearchCV(model, {"epsilon": [0.5, 1.0, 2.0, 4.0]}, cv=3, n_jobs=n_jobs).fit(X)


def test_a_search_shows_each_warning_once_at_the_users_line():
    # 12 fits and a refit: scikit-learn resets Python's "once" memory around
    # every fit, which printed the undeclared-bound warning 13 times.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        _search(n_jobs=1)
    leaks = [w for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    messages = sorted(str(w.message).split(":")[0] for w in leaks)
    assert messages == [
        "GridSearchCV fits DPGaussianMixture with its guarantee, but selects the best candidate by "
        "validation scores computed exactly on private rows",
        "data_norm was not set",
    ], messages
    assert {w.filename for w in leaks} == {__file__}


def test_a_users_error_filter_still_raises_under_a_search():
    # Every fit raises it; scikit-learn then reports that all fits failed, quoting it.
    with (
        warnings.catch_warnings(),
        pytest.raises((PrivacyLeakWarning, ValueError), match="data_norm was not set"),
    ):
        warnings.simplefilter("error", PrivacyLeakWarning)
        _search(n_jobs=1)


@pytest.mark.slow
def test_parallel_search_workers_warn_once_each_without_joblib_lines():
    code = (
        "import sys; sys.path.insert(0, 'tests'); import test_messages as t; t._search(n_jobs=2); print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "data_norm was not set" in line]
    # At most one per worker (2) and one for the refit in the parent, instead of one per fit (13).
    assert 1 <= len(lines) <= 3, result.stderr
    assert "joblib" not in result.stderr and "parallel.py" not in result.stderr


def test_budget_refusal_names_the_add_remove_conversion_and_the_parameter():
    budget = BudgetAccountant(epsilon=3.0, delta=1e-4)
    with pytest.raises(BudgetExceededError) as refused:
        budget.reserve(2.0, 1e-5, neighbouring="add_remove")
    message = str(refused.value)
    assert "add/remove (epsilon=2, delta=1e-05) converted" in message
    assert "(2 eps, 2 e^eps delta)" in message and "neighbouring='add_remove'" in message
    # The same request on an add/remove budget is charged as it is.
    BudgetAccountant(epsilon=3.0, delta=1e-4, neighbouring="add_remove").reserve(
        2.0, 1e-5, neighbouring="add_remove"
    )
    # A same-relation refusal says nothing about conversions.
    with pytest.raises(BudgetExceededError) as refused:
        budget.reserve(4.0, 0.0)
    assert "converted" not in str(refused.value)


def test_remaining_is_named_for_what_it_is():
    budget = BudgetAccountant(epsilon=1.0, delta=1e-5)
    budget.spend(0.25, 0.0)
    left = budget.remaining()
    assert isinstance(left, BudgetRemaining) and left == (0.75, 1e-5)
    assert repr(left) == "BudgetRemaining(epsilon=0.75, delta=1e-05)"
