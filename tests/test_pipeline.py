"""DPPipeline (issue 21): one guarantee composed from the steps' events, one budget, no seed kept."""

import math
import pickle
import warnings

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm
from sklearn.base import clone
from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from skdp import DPPCA, BudgetAccountant, BudgetExceededError, DPGaussianMixture, DPStandardScaler
from skdp.exceptions import PrivacyLeakWarning
from skdp.model_selection import DPGridSearchCV, DPRandomizedSearchCV
from skdp.pipeline import DPPipeline, make_pipeline, split_budget
from skdp.privacy import GaussianEvent, compose

X, _ = load_iris(return_X_y=True)


def _steps(eps=(1.0, 1.0, 1.0)):
    return (
        DPStandardScaler(bounds=(0.0, 8.0), epsilon=eps[0]),
        DPPCA(2, data_norm=4.0, epsilon=eps[1]),
        DPGaussianMixture(3, data_norm=4.0, max_iter=5, epsilon=eps[2]),
    )


def _exact_gaussian_epsilon(noise_multipliers, delta):
    """Epsilon of composed Gaussian releases at ``delta``: mu-GDP and its exact privacy profile.

    Dong, Roth & Su (2022), Cor. 2.13: ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``
    with ``mu = sqrt(sum 1 / z_i^2)``; written here from the paper, not read off skdp.
    """
    mu = math.sqrt(sum(1.0 / z**2 for z in noise_multipliers))
    profile = lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta  # noqa: E731
    return brentq(profile, 0.0, 100.0, xtol=1e-12)


def _no_generator_in(obj):
    blob = pickle.dumps(obj)
    return not any(name in blob for name in (b"PCG64", b"MT19937", b"SeedSequence", b"Generator"))


def test_privacy_spent_is_the_composition_of_the_steps_events():
    pipe = make_pipeline(*_steps(), epsilon=2.0, delta=1e-5, random_state=0).fit(X)
    steps = [step for _, step in pipe.steps]
    events = [e for step in steps for e in step.privacy_ledger_.events]
    assert list(pipe.privacy_ledger_.events) == events
    assert tuple(pipe.privacy_spent_) == tuple(compose(events, 1e-5, "pld"))
    # Independently: every release is a plain Gaussian, so the steps compose
    # exactly into mu-GDP, whose privacy profile the "pld" accountant uses exactly.
    assert all(type(e) is GaussianEvent for e in events)
    zs = [e.noise_multiplier for e in events for _ in range(e.count)]
    exact = _exact_gaussian_epsilon(zs, 1e-5)
    assert pipe.privacy_spent_.epsilon == pytest.approx(exact, rel=1e-6)
    # Below the basic sum of the steps' own guarantees, which the split keeps at the request.
    summed = sum(step.privacy_spent_.epsilon for step in steps)
    assert summed == pytest.approx(2.0, rel=1e-6)
    assert pipe.privacy_spent_.epsilon < 0.7 * summed
    assert pipe.privacy_spent_.delta == pytest.approx(1e-5)


def test_epsilon_is_split_in_proportion_to_the_steps_own():
    shares = split_budget([(1.0, 1e-5), (3.0, 3e-5)], 2.0, 4e-6)
    np.testing.assert_allclose(shares, [(0.5, 1e-6), (1.5, 3e-6)], rtol=1e-12)
    assert split_budget([(1.0, 0.0), (1.0, 0.0)], None, 1e-6) == [(1.0, 5e-7), (1.0, 5e-7)]
    user = _steps(eps=(1.0, 1.0, 2.0))
    pipe = make_pipeline(*user, epsilon=2.0, random_state=0).fit(X)
    assert [s.epsilon for _, s in pipe.steps] == pytest.approx([0.5, 0.5, 1.0])
    # The step objects passed in are never fitted or modified; clones are.
    assert [s.epsilon for s in user] == [1.0, 1.0, 2.0]
    assert not any(hasattr(s, "privacy_spent_") for s in user)
    assert all(s is not u for (_, s), u in zip(pipe.steps, user, strict=True))
    # epsilon=None: the steps keep their own budgets; the request is their sum.
    pipe = make_pipeline(*_steps(eps=(0.5, 0.5, 1.0)), random_state=0).fit(X)
    assert [s.epsilon for _, s in pipe.steps] == [0.5, 0.5, 1.0]
    assert pipe.privacy_spent_.epsilon <= 2.0


def test_budget_is_reserved_once_and_settled_to_the_composition():
    budget = BudgetAccountant(epsilon=2.0, delta=1e-4)
    pipe = make_pipeline(*_steps(), epsilon=2.0, delta=1e-5, accountant=budget, random_state=0).fit(X)
    assert [label for *_, label in budget.history] == ["DPPipeline"]
    assert budget.reservations == []
    assert tuple(budget.spent) == pytest.approx(tuple(pipe.privacy_spent_))
    assert all(s.accountant is None for _, s in pipe.steps)  # the steps charged nothing themselves


def test_refused_budget_raises_before_any_row_is_read():
    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError(f"the data was read ({name})")

        def __array__(self, *args, **kwargs):
            raise AssertionError("the data was read")

    budget = BudgetAccountant(epsilon=1.9)  # the reservation is the request, 2.0
    user = _steps()
    pipe = make_pipeline(*user, epsilon=2.0, delta=1e-5, accountant=budget, random_state=0)
    with pytest.raises(BudgetExceededError):
        pipe.fit(Untouchable())
    assert budget.history == [] and pipe.steps[0][1] is user[0]
    assert not any(hasattr(s, "privacy_spent_") for s in user)


def test_steps_fitted_without_dp_warn_by_name_and_stateless_ones_pass():
    pipe = make_pipeline(StandardScaler(), FunctionTransformer(np.tanh), DPGaussianMixture(3, data_norm=4.0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pipe.set_params(random_state=0).fit(X)
    leaks = [w for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    assert len(leaks) == 1 and leaks[0].filename == __file__
    assert "'standardscaler'" in str(leaks[0].message)
    assert "functiontransformer" not in str(leaks[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        make_pipeline(FunctionTransformer(np.log1p), *_steps(), random_state=0).fit(X)


def test_refuses_a_step_with_its_own_budget_and_a_pipeline_without_dp_step():
    budget = BudgetAccountant(epsilon=10.0)
    with pytest.raises(ValueError, match="'dppca' has its own accountant"):
        make_pipeline(DPPCA(2, data_norm=4.0, accountant=budget)).fit(X)
    with pytest.raises(ValueError, match="at least one"):
        make_pipeline(FunctionTransformer(np.tanh)).fit(X)
    assert budget.history == []


def test_random_state_reproduces_and_no_seed_is_kept():
    fits = [make_pipeline(*_steps(), random_state=seed).fit(X) for seed in (0, 0, 1)]
    means = [pipe[-1].means_ for pipe in fits]
    np.testing.assert_array_equal(means[0], means[1])
    assert not np.allclose(means[0], means[2])
    for pipe in fits:
        assert all(s.random_state is None for _, s in pipe.steps)
    # The DP steps draw independent streams: no two steps see the same noise.
    scaler, pca = fits[0][0], fits[0][1]
    assert scaler.privacy_ledger_.events != [] and pca.privacy_ledger_.events != []
    pipe = make_pipeline(*_steps(), random_state=np.random.default_rng(0)).fit(X)
    assert isinstance(pipe.random_state, np.random.Generator)  # the user's own parameter
    assert _no_generator_in(pipe)
    assert pickle.loads(pickle.dumps(pipe)).random_state is None


def test_clone_get_params_set_params():
    budget = BudgetAccountant(epsilon=10.0)
    pipe = make_pipeline(*_steps(), epsilon=2.0, delta=1e-5, accountant=budget, random_state=0)
    params = pipe.get_params()
    for name in ("epsilon", "delta", "accountant", "composition", "random_state", "dppca__n_components"):
        assert name in params
    copy = clone(pipe).set_params(dppca__n_components=1, composition="rdp")
    assert copy.accountant is budget  # the ledger is shared, never copied
    assert pipe.get_params()["dppca__n_components"] == 2
    assert isinstance(copy, DPPipeline) and copy.fit(X)[1].components_.shape == (1, 4)
    assert copy.privacy_ledger_.composition == "rdp"


def test_fit_transform_is_accounted_like_fit():
    budget = BudgetAccountant(epsilon=10.0)
    pipe = make_pipeline(*_steps()[:2], accountant=budget, random_state=0)
    Z = pipe.fit_transform(X)
    assert Z.shape == (len(X), 2)
    assert [label for *_, label in budget.history] == ["DPPipeline"]
    assert tuple(budget.spent) == pytest.approx(tuple(pipe.privacy_spent_))


@pytest.mark.parametrize("search", [DPGridSearchCV, DPRandomizedSearchCV])
def test_private_searches_over_a_pipeline_stay_within_their_budget(search):
    budget = BudgetAccountant(epsilon=3.0, delta=1e-4)
    grid = {"dppca__n_components": [1, 2]}
    kwargs = dict(epsilon=3.0, score_bounds=(-20.0, 5.0), n_trials_mean=2, accountant=budget, random_state=0)
    kwargs.update({"n_iter": 2} if search is DPRandomizedSearchCV else {})
    fitted = search(make_pipeline(*_steps()), grid, **kwargs).fit(X)
    assert fitted.privacy_spent_.epsilon <= 3.0 * (1 + 1e-9)
    assert [label for *_, label in budget.history] == [search.__name__]
    best = fitted.best_estimator_
    assert isinstance(best, DPPipeline) and best.privacy_spent_.epsilon < 3.0
    assert all(s.random_state is None for _, s in best.steps) and best.random_state is None
    assert _no_generator_in(fitted)


def test_sklearn_grid_search_fits_pipelines_and_warns_once_about_its_selection():
    pipe = make_pipeline(DPStandardScaler(bounds=(0.0, 8.0)), DPGaussianMixture(3, data_norm=4.0, max_iter=5))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search = GridSearchCV(pipe, {"dpgaussianmixture__n_components": [2, 3]}, cv=2).fit(X)
    leaks = [w for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    assert len(leaks) == 1 and "selects the best candidate" in str(leaks[0].message)
    assert leaks[0].filename == __file__
    assert search.best_estimator_.privacy_spent_.epsilon <= 2.0
