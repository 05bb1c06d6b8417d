"""DPPipeline (issue 21): one guarantee composed from the steps' events, one budget, no seed kept."""

import math
import pickle
import warnings

import numpy as np
import pytest
from conftest import iris_rows
from scipy.optimize import brentq
from scipy.stats import norm
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from skdp import DPPCA, BudgetAccountant, BudgetExceededError, DPGaussianMixture, DPStandardScaler
from skdp.exceptions import PrivacyLeakWarning
from skdp.model_selection import DPGridSearchCV, DPRandomizedSearchCV
from skdp.pipeline import DPPipeline, make_pipeline, split_budget
from skdp.privacy import GaussianEvent, compose

X = iris_rows()


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
    # split="basic": the shares add up to the request (the composed split is tested below).
    pipe = make_pipeline(*_steps(), epsilon=2.0, delta=1e-5, split="basic", random_state=0).fit(X)
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


def test_the_composed_split_spends_the_request_and_no_more():
    """split="composed" (the default): the basic shares scaled until the steps' events compose to epsilon.

    Three steps at a third of 2.0 each (13 Gaussian releases) compose to
    about 1.13 (the basic split left 43 % of the budget unspent); the
    composed split fits each step at about 1.16 instead of 0.67: less noise
    for the same guarantee.
    """
    dp_accounting = pytest.importorskip("dp_accounting")
    pytest.importorskip("dp_accounting.pld")
    budget = BudgetAccountant(epsilon=2.0, delta=1e-5)
    pipe = make_pipeline(*_steps(), epsilon=2.0, delta=1e-5, accountant=budget, random_state=0).fit(X)
    basic = make_pipeline(*_steps(), epsilon=2.0, delta=1e-5, split="basic", random_state=0).fit(X)
    steps = [step for _, step in pipe.steps]
    events = [e for step in steps for e in step.privacy_ledger_.events]
    assert list(pipe.privacy_ledger_.events) == events
    # Spent: the request, to the scale's precision (1e-3), never above it.
    assert 2.0 * (1 - 2e-3) <= pipe.privacy_spent_.epsilon <= 2.0 * (1 + 1e-9)
    assert tuple(budget.spent) == pytest.approx(tuple(pipe.privacy_spent_))
    # Independently: the exact mu-GDP composition and dp-accounting's PLD of the same releases.
    zs = [e.noise_multiplier for e in events for _ in range(e.count)]
    assert _exact_gaussian_epsilon(zs, 1e-5) == pytest.approx(pipe.privacy_spent_.epsilon, rel=1e-6)
    # skdp's multiplier is the std over the relation's L2 sensitivity: dp-accounting's unit-sensitivity Gaussian.
    accountant = dp_accounting.pld.PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    for e in events:
        accountant.compose(dp_accounting.GaussianDpEvent(e.noise_multiplier), e.count)
    assert accountant.get_epsilon(1e-5) == pytest.approx(pipe.privacy_spent_.epsilon, rel=1e-2)
    # The shares grew in proportion (equal here), and every release is less noisy than the basic split's.
    assert [s.epsilon for s in steps] == pytest.approx([steps[0].epsilon] * 3) and steps[0].epsilon > 1.1
    basic_events = [e for _, step in basic.steps for e in step.privacy_ledger_.events]
    assert [type(e) for e in basic_events] == [type(e) for e in events]
    assert all(e.noise_multiplier < b.noise_multiplier for e, b in zip(events, basic_events, strict=True))
    assert basic.privacy_spent_.epsilon < 0.6 * 2.0


def test_the_composed_split_applies_only_where_its_plan_is_public():
    # An add/remove step (DP-SGD: its number of rows is not public, its
    # request converted by group privacy), a single DP step, split="basic",
    # composition="basic", an input without a public shape: the basic shares.
    pytest.importorskip("torch")
    from skdp.nn import DPNeuralNetClassifier

    net = DPNeuralNetClassifier(classes=[0, 1, 2], epsilon=1.0)
    stand_in = (np.zeros((150, 4)), np.zeros(150))
    cases = [
        make_pipeline(DPStandardScaler(bounds=(0.0, 8.0)), net, epsilon=2.0),
        make_pipeline(DPStandardScaler(bounds=(0.0, 8.0)), epsilon=2.0),
        make_pipeline(*_steps(), epsilon=2.0, split="basic"),
        make_pipeline(*_steps(), epsilon=2.0, composition="basic"),
        make_pipeline(*_steps(), epsilon=2.0),
    ]
    for i, pipe in enumerate(cases):
        if i < 4:
            pipe.__dict__["_stand_in"] = stand_in
        _, dp, _, _ = pipe._plan()
        k = len(dp)
        # The basic shares, an add/remove step's as its per-record share (e / 2).
        expected = [2.0 / k / (2 if step._neighbouring == "add_remove" else 1) for _, step in dp]
        assert [step.epsilon for _, step in dp] == pytest.approx(expected)
    # With a public stand-in the same steps get more.
    pipe = make_pipeline(*_steps(), epsilon=2.0)
    pipe.__dict__["_stand_in"] = (np.zeros((150, 4)), None)
    _, dp, _, request = pipe._plan()
    assert all(step.epsilon > 1.1 for _, step in dp) and request.epsilon == 2.0


@pytest.mark.parametrize(
    ("cost", "upper"),
    [
        (lambda s: 0.6 * s, 3.0),  # proportional: the first secant step lands
        (lambda s: 0.6 * s**0.5, 3.0),  # Gaussian-like, sublinear
        (lambda s: 0.05 * math.exp(2.5 * s), 3.0),  # steep: the bracket closes it
        (lambda s: 0.2 * s, 2.0),  # even the largest scale spends less than epsilon
        (lambda s: 0.4 * s**4, 2.0),  # the secant overshoots past upper
    ],
)
def test_composed_scale_meets_the_target_from_below(cost, upper):
    from skdp.pipeline import _SPLIT_RTOL, _composed_scale

    costed = []
    scale = _composed_scale(lambda s: costed.append(s) or cost(s), 1.0, upper)
    assert 1.0 <= scale <= upper and cost(scale) <= 1.0
    assert scale in costed  # a costed point, never an interpolated one
    if cost(upper) > 1.0:
        # Within the window, or (the bracket's answer) within its precision of the crossing.
        crossing = brentq(lambda s: cost(s) - 1.0, 1.0, upper, xtol=1e-14)
        assert cost(scale) >= (1 - _SPLIT_RTOL) or scale >= crossing * (1 - 2 * _SPLIT_RTOL)
    else:
        assert scale == upper


def test_the_composed_scale_is_reused_for_the_same_plan_only(monkeypatch):
    import skdp.pipeline as module

    calls = []
    solve = module._composed_scale
    monkeypatch.setattr(module, "_composed_scale", lambda *a: calls.append(1) or solve(*a))
    monkeypatch.setattr(module, "_SCALES", {})
    first = make_pipeline(*_steps(), epsilon=2.0, random_state=0).fit(X)
    again = make_pipeline(*_steps(), epsilon=2.0, random_state=1).fit(X)  # another seed: the same plan
    assert len(calls) == 1
    assert [s.epsilon for _, s in again.steps] == [s.epsilon for _, s in first.steps]
    make_pipeline(*_steps(), epsilon=2.5, random_state=0).fit(X)  # another epsilon
    make_pipeline(*_steps(), epsilon=2.0, random_state=0).fit(X[:100])  # another number of rows
    other = _steps()
    other[2].set_params(max_iter=6)  # another parameter of a step
    make_pipeline(*other, epsilon=2.0, random_state=0).fit(X)
    assert len(calls) == 4
    # Arrays by content; anything without a faithful key (a callable) is not cached.
    assert module._plan_key(np.arange(3.0)) != module._plan_key(np.arange(3.0) + 1e-12)
    assert module._plan_key(FunctionTransformer(np.tanh)) is None


def test_epsilon_is_split_in_proportion_to_the_steps_own():
    shares = split_budget([(1.0, 1e-5), (3.0, 3e-5)], 2.0, 4e-6)
    np.testing.assert_allclose(shares, [(0.5, 1e-6), (1.5, 3e-6)], rtol=1e-12)
    assert split_budget([(1.0, 0.0), (1.0, 0.0)], None, 1e-6) == [(1.0, 5e-7), (1.0, 5e-7)]
    user = _steps(eps=(1.0, 1.0, 2.0))
    pipe = make_pipeline(*user, epsilon=2.0, split="basic", random_state=0).fit(X)
    assert [s.epsilon for _, s in pipe.steps] == pytest.approx([0.5, 0.5, 1.0])
    # The composed split (the default) keeps the proportions, scaled up.
    composed = make_pipeline(*user, epsilon=2.0, random_state=0).fit(X)
    shares = [s.epsilon for _, s in composed.steps]
    assert shares == pytest.approx([shares[0], shares[0], 2 * shares[0]]) and shares[0] > 0.5
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
        # Only its shape is public (read before the hold, as by every skdp fit).
        shape = (150, 4)

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


def test_a_search_fits_its_pipelines_with_the_basic_split_and_loses_nothing():
    """The search's budget solver scales every trial's and the refit's epsilon until their events meet its budget.

    The pipeline's composed split would repeat that scaling by dry runs
    inside every one of the search's dry runs (a 3-candidate search: 12.3 s
    instead of 1.6 s); a search sets split="basic" on its pipeline, and the
    same seed gives the same search whichever split the pipeline was given.
    """
    grid = {"dppca__n_components": [1, 2]}
    kwargs = dict(epsilon=3.0, score_bounds=(-20.0, 5.0), n_trials_mean=2, random_state=0)
    composed = DPGridSearchCV(make_pipeline(*_steps()), grid, **kwargs).fit(X)
    basic = DPGridSearchCV(make_pipeline(*_steps(), split="basic"), grid, **kwargs).fit(X)
    assert composed._inner_estimator().split == "basic"
    assert composed.privacy_spent_ == basic.privacy_spent_
    assert list(composed.privacy_ledger_.events) == list(basic.privacy_ledger_.events)
    assert composed.best_estimator_.split == "basic"


def test_sklearn_grid_search_fits_pipelines_and_warns_once_about_its_selection():
    pipe = make_pipeline(DPStandardScaler(bounds=(0.0, 8.0)), DPGaussianMixture(3, data_norm=4.0, max_iter=5))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search = GridSearchCV(pipe, {"dpgaussianmixture__n_components": [2, 3]}, cv=2).fit(X)
    leaks = [w for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    assert len(leaks) == 1 and "selects the best candidate" in str(leaks[0].message)
    assert leaks[0].filename == __file__
    assert search.best_estimator_.privacy_spent_.epsilon <= 2.0


# --- composites own every release (faults 1 to 3 of the composites issue) ---------------


def _mixed_columns(n=200, seed=0):
    """Two numeric columns and one categorical column (codes 0, 1, 2)."""
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.normal(size=n), rng.normal(size=n), rng.integers(0, 3, n)])


def _column_pipeline(categories=((0, 1, 2),), **kwargs):
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import OneHotEncoder

    from skdp import DPKMeans

    encoder = OneHotEncoder(categories="auto" if categories == "auto" else [list(c) for c in categories])
    pre = ColumnTransformer(
        [("num", DPStandardScaler(epsilon=1.0, bounds=(-4.0, 4.0)), [0, 1]), ("cat", encoder, [2])]
    )
    return DPPipeline([("pre", pre), ("km", DPKMeans(3, epsilon=1.0, data_norm=5.0))], **kwargs)


def test_dp_steps_nested_in_a_column_transformer_are_composed():
    # Fault 3: the scaler inside the ColumnTransformer spent its own budget,
    # which the pipeline neither split nor reported; and 'pre' was called
    # "fitted without differential privacy".
    dp_accounting = pytest.importorskip("dp_accounting")
    pytest.importorskip("dp_accounting.pld")
    budget = BudgetAccountant(10.0, 1e-4)
    pipe = _column_pipeline(epsilon=2.0, delta=1e-5, accountant=budget, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # declared categories: public
        pipe.fit(_mixed_columns())
    scaler = pipe.steps[0][1].named_transformers_["num"]
    kmeans = pipe.steps[1][1]
    # The composed split: equal shares (the steps' own epsilons are equal), scaled
    # up from the basic 1.0 each until the two steps compose to the request.
    assert scaler.epsilon == pytest.approx(kmeans.epsilon) and scaler.epsilon > 1.2
    events = [*scaler.privacy_ledger_.events, *kmeans.privacy_ledger_.events]
    assert list(pipe.privacy_ledger_.events) == events
    assert pipe.privacy_spent_.epsilon <= 2.0 * (1 + 1e-9)
    assert tuple(budget.spent) == pytest.approx(tuple(pipe.privacy_spent_))
    # Independently, dp-accounting's PLD of every DP step's Gaussian releases.
    # skdp's noise multiplier is the std over the relation's L2 sensitivity, so
    # each release is dp-accounting's unit-sensitivity Gaussian.
    assert all(type(e) is GaussianEvent for e in events)
    accountant = dp_accounting.pld.PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    for e in events:
        accountant.compose(dp_accounting.GaussianDpEvent(e.noise_multiplier), e.count)
    reference = accountant.get_epsilon(1e-5)
    assert pipe.privacy_spent_.epsilon == pytest.approx(reference, rel=1e-2)
    # Only the sum of the two steps' own epsilons (2.0) was ever the cap: the
    # composed guarantee is below it, and above either step alone.
    assert max(scaler.privacy_spent_.epsilon, kmeans.privacy_spent_.epsilon) < pipe.privacy_spent_.epsilon


def test_inner_steps_without_dp_are_named_and_declared_categories_are_public():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _column_pipeline(categories="auto", random_state=0).fit(_mixed_columns())
    leaks = [str(w.message) for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    assert len(leaks) == 1 and "'pre__cat'" in leaks[0] and "'pre'" not in leaks[0]


def test_feature_union_nested_pipeline_and_target_transformer_are_walked():
    from sklearn.compose import TransformedTargetRegressor
    from sklearn.pipeline import FeatureUnion, Pipeline

    union = FeatureUnion([("a", DPStandardScaler(bounds=(0.0, 8.0))), ("b", StandardScaler())])
    inner = Pipeline([("scale", DPStandardScaler(bounds=(-8.0, 8.0))), ("pca", DPPCA(2, data_norm=8.0))])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pipe = DPPipeline([("union", union), ("inner", inner)], epsilon=3.0, random_state=0).fit(X)
    leaks = [str(w.message) for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    assert len(leaks) == 1 and "'union__b'" in leaks[0]
    fitted = [pipe.steps[0][1].transformer_list[0][1], *(s for _, s in pipe.steps[1][1].steps)]
    assert [s.epsilon for s in fitted] == pytest.approx([fitted[0].epsilon] * 3) and fitted[0].epsilon > 1.0
    assert list(pipe.privacy_ledger_.events) == [e for s in fitted for e in s.privacy_ledger_.events]
    assert pipe.privacy_spent_.epsilon <= 3.0 * (1 + 1e-9)
    assert all(s.get_params()["random_state"] is None for s in fitted)
    assert _no_generator_in(pipe)
    # A DP transformer of the target: found through TransformedTargetRegressor.
    from skdp.pipeline import dp_estimators_in

    ttr = TransformedTargetRegressor(transformer=DPStandardScaler(bounds=(0.0, 8.0)))
    assert [name for name, _ in dp_estimators_in("ttr", ttr)] == ["ttr__transformer"]


class _FitsClones(TransformerMixin, BaseEstimator):
    """A container that fits several clones of its estimator (as one-vs-rest or bagging do)."""

    def __init__(self, estimator=None, n_fits=6):
        self.estimator = estimator
        self.n_fits = n_fits

    def fit(self, X, y=None):
        self.estimators_ = [clone(self.estimator).fit(X) for _ in range(self.n_fits)]
        return self

    def transform(self, X):
        return self.estimators_[0].transform(X)


def test_a_pipeline_whose_steps_spent_more_settles_it_and_is_left_unfitted():
    # Fault 2: the steps released more than the pipeline reserved (here a
    # container fitted its DP step six times): the budget is charged what was
    # released, no fitted step stays on the pipeline, and the fit raises.
    budget = BudgetAccountant(10.0, 1e-3)
    user = [("clones", _FitsClones(DPStandardScaler(bounds=(0.0, 8.0)))), ("pca", DPPCA(2, data_norm=8.0))]
    pipe = DPPipeline(user, epsilon=2.0, accountant=budget, random_state=0)
    with pytest.raises(RuntimeError, match="charged what they spent"), warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # the container is not a known one
        pipe.fit(X)
    assert budget.reservations == []
    assert budget.spent.epsilon > 2.0 * 1.05  # not the reservation: what was released
    assert pipe.steps == user and not hasattr(pipe.steps[0][1], "estimators_")
    assert not hasattr(pipe, "privacy_spent_")
    with pytest.raises(BudgetExceededError):
        # The next fit sees the real total.
        DPPipeline([("pca", DPPCA(2, data_norm=8.0))], epsilon=10.0 - 2.0, accountant=budget).fit(X)


def _ops_pipeline(**kwargs):
    from skdp.bayes import DPBetaBernoulli

    return DPPipeline([("bb", DPBetaBernoulli(mechanism="ops"))], **kwargs)


def _binary(n=100, ones=50):
    Xb = np.zeros((n, 1), dtype=int)
    Xb[:ones] = 1
    return Xb


def test_post_fit_draws_of_a_step_are_charged_to_the_pipeline():
    # Fault 1: 40,000 draws from pipe[-1] were charged to nobody.
    budget = BudgetAccountant(5.0)
    pipe = _ops_pipeline(epsilon=0.5, accountant=budget).fit(_binary())
    assert pipe.privacy_spent_.epsilon == pytest.approx(0.5)
    pipe[-1].sample_posterior(3)
    assert pipe.privacy_spent_.epsilon == pytest.approx(2.0)
    assert budget.spent.epsilon == pytest.approx(2.0)
    assert len(pipe.privacy_ledger_.events) == 2
    # A draw the budget refuses changes nothing anywhere.
    with pytest.raises(BudgetExceededError):
        pipe[-1].sample_posterior(100)
    assert pipe.privacy_spent_.epsilon == pytest.approx(2.0) and budget.spent.epsilon == pytest.approx(2.0)
    # The owner link travels with a pickle (to the copy's own pipeline);
    # clone drops it with the fit.
    copy = pickle.loads(pickle.dumps(pipe))
    assert copy[-1]._privacy_owner is copy
    assert "_privacy_owner" not in vars(clone(pipe)[-1])
    # Without a budget the pipeline's guarantee still grows.
    free = _ops_pipeline(epsilon=0.5).fit(_binary())
    free[-1].sample_posterior(2)
    assert free.privacy_spent_.epsilon == pytest.approx(1.5)
