"""The DP estimator base: budget checks, leak warnings, the spent-never-above-request rule."""

import subprocess
import sys

import numpy as np
import pytest
from conftest import iris_rows
from sklearn.base import BaseEstimator

from skdp import BudgetAccountant, BudgetExceededError, PrivacyLeakWarning
from skdp._random import check_generator
from skdp.base import PRIVACY_PARAMETER_CONSTRAINTS, DPEstimatorMixin, PrivacyPlan, warn_privacy_leak
from skdp.privacy import LaplaceMechanism


class _ToyMean(DPEstimatorMixin, BaseEstimator):
    """A DP mean of values in [0, 1] (sensitivity 1/n), optionally overspending or failing."""

    _parameter_constraints = dict(PRIVACY_PARAMETER_CONSTRAINTS)

    def __init__(
        self, epsilon=1.0, delta=0.0, accountant=None, random_state=None, overspend=False, fail=False
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.accountant = accountant
        self.random_state = random_state
        self.overspend = overspend
        self.fail = fail

    def fit(self, X):
        plan = PrivacyPlan(self.epsilon, self.delta, "basic", secure_noise=self._resolve_secure_noise())
        ledger, rng = self._begin_private_fit(plan)
        X = np.asarray(X, dtype=float)
        eps = 2 * self.epsilon if self.overspend else self.epsilon
        mech = LaplaceMechanism.from_epsilon(eps, 1.0 / len(X))
        self.mean_ = mech.release(X.mean(), rng, ledger)
        if self.fail:
            raise RuntimeError("interrupted after the release")
        self._end_private_fit(ledger, plan)
        return self


def test_spent_above_request_is_refused():
    X = np.linspace(0, 1, 50)
    assert _ToyMean(random_state=0).fit(X).privacy_spent_ == (1.0, 0.0)
    with pytest.raises(RuntimeError, match="Internal error"):
        _ToyMean(overspend=True).fit(X)


def test_fit_settles_its_reservation_to_what_it_spent():
    budget = BudgetAccountant(epsilon=2.0)
    est = _ToyMean(epsilon=0.75, accountant=budget, random_state=0).fit(np.linspace(0, 1, 50))
    assert est.privacy_spent_ == (0.75, 0.0)
    assert budget.history == [(0.75, 0.0, "_ToyMean")] and budget.reservations == []
    assert "_budget_reservation" not in vars(est)


def test_fit_failing_after_a_release_stays_charged():
    budget = BudgetAccountant(epsilon=2.0)
    est = _ToyMean(epsilon=0.75, accountant=budget, fail=True)
    with pytest.raises(RuntimeError, match="interrupted"):
        est.fit(np.linspace(0, 1, 50))
    # A noisy mean exists in memory, unaccounted by privacy_spent_: the budget
    # must keep the whole request.
    assert hasattr(est, "mean_") and not hasattr(est, "privacy_spent_")
    assert budget.reservations == [(0.75, 0.0, "_ToyMean")]
    assert budget.spent.epsilon == 0.75
    with pytest.raises(BudgetExceededError):
        _ToyMean(epsilon=1.5, accountant=budget).fit(np.linspace(0, 1, 50))
    assert budget.spent.epsilon == 0.75  # the refusal charged nothing


def test_overspending_fit_is_charged_what_it_really_spent():
    budget = BudgetAccountant(epsilon=5.0)
    with pytest.raises(RuntimeError, match="Internal error"):
        _ToyMean(epsilon=1.0, accountant=budget, overspend=True).fit(np.linspace(0, 1, 50))
    # The noise was drawn at epsilon 2: the ledger records 2, not the requested 1.
    assert budget.history == [(pytest.approx(2.0), 0.0, "_ToyMean")] and budget.reservations == []


def test_warn_privacy_leak_names_the_parameter():
    with pytest.warns(PrivacyLeakWarning, match="data_norm is 'nonprivate': the maximum row norm"):
        warn_privacy_leak("data_norm", "the maximum row norm")


def test_leak_warning_points_at_the_users_call():
    from skdp.cluster import DPKMeans

    with pytest.warns(PrivacyLeakWarning) as record:
        DPKMeans(n_clusters=2, data_norm="nonprivate", random_state=0).fit(
            np.random.default_rng(0).normal(size=(30, 2))
        )
    assert record[0].filename == __file__


@pytest.mark.parametrize("seed", [0, np.int64(3)])
def test_check_generator_reproducible(seed):
    assert check_generator(seed).random() == check_generator(seed).random()


def test_check_generator_other_inputs():
    g = np.random.default_rng(1)
    assert check_generator(g) is g
    rs = np.random.RandomState(2)
    assert isinstance(check_generator(rs), np.random.Generator)
    assert isinstance(check_generator(None), np.random.Generator)
    with pytest.raises(ValueError, match="random_state"):
        check_generator(True)
    with pytest.raises(ValueError, match="random_state"):
        check_generator("seed")


def test_every_public_estimator_imports_from_the_top_level_without_torch():
    # A fresh interpreter: the top level exports every estimator, and only
    # touching a DP-SGD net imports torch.
    code = (
        "import sys, skdp\n"
        "from skdp import DPBetaBernoulli, DPNaiveBayesHMM, DPGaussianMixture, DPKMeans, DPKernelKMeans\n"
        "from skdp import DPSEPRegressor, DPGenerativeMixture\n"
        "assert 'torch' not in sys.modules, 'import skdp imported torch'\n"
        "assert set(skdp.__all__) <= set(dir(skdp))\n"
        "from skdp import DPNeuralNetClassifier, DPNeuralNetRegressor\n"
        "import skdp.nn\n"
        "assert DPNeuralNetClassifier is skdp.nn.DPNeuralNetClassifier\n"
        "assert 'torch' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_sklearn_search_warns_once_that_its_selection_is_not_private():
    # Issue 21: scikit-learn's searches select on exact validation scores;
    # the fits keep their guarantees, the selection has none.
    import warnings

    from sklearn.model_selection import GridSearchCV, cross_val_score

    from skdp import DPGaussianMixture
    from skdp.exceptions import PrivacyLeakWarning

    X = iris_rows()
    model = DPGaussianMixture(3, data_norm=10.0, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        GridSearchCV(model, {"epsilon": [1.0, 2.0]}, cv=3).fit(X)
    leaks = [w for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    assert len(leaks) == 1  # 2 x 3 fits + the refit: one warning per search
    assert "DPGridSearchCV" in str(leaks[0].message)
    assert leaks[0].filename == __file__  # points at the user's call
    # No selection, no warning: cross-validation alone, and a plain fit.
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        cross_val_score(model, X, cv=3)
        model.fit(X)


def test_pipeline_warns_about_steps_fitted_without_dp():
    # Issue 21: a stateful scikit-learn step in front of a DP estimator is
    # fitted on the private rows with no noise; stateless and DP steps pass.
    import warnings

    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, StandardScaler

    from skdp import DPGaussianMixture, DPStandardScaler
    from skdp.exceptions import PrivacyLeakWarning

    X = iris_rows()
    model = DPGaussianMixture(3, data_norm=10.0, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_pipeline(StandardScaler(), FunctionTransformer(np.tanh), model).fit(X)
    leaks = [w for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    assert len(leaks) == 1 and leaks[0].filename == __file__
    message = str(leaks[0].message)
    assert "'standardscaler'" in message and "functiontransformer" not in message
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        make_pipeline(FunctionTransformer(np.log1p), model).fit(X)
        make_pipeline(DPStandardScaler(bounds=(0.0, 8.0), random_state=0), model).fit(X)
