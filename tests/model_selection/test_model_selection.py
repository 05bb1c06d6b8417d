"""Private model selection (issue 21): Papernot & Steinke's repeat-and-select search."""

from __future__ import annotations

import io
import math
import pickle
from numbers import Real

import numpy as np
import pytest
from _release_walk import N_ROWS, release_violations
from conftest import sign_labelled
from scipy import stats
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_array
from sklearn.utils.validation import check_is_fitted

from skdp import BudgetAccountant, BudgetExceededError
from skdp.base import PRIVACY_PARAMETER_CONSTRAINTS, DPEstimatorMixin, private_fit_context
from skdp.model_selection import DPGridSearchCV, DPRandomizedSearchCV
from skdp.privacy import DEFAULT_ORDERS, GaussianEvent, GaussianMechanism, LaplaceEvent, compose
from skdp.privacy.accountants.rdp import RDPAccountant
from skdp.privacy.accountants.repeat_select import RepeatAndSelectEvent


class _ToyMean(DPEstimatorMixin, BaseEstimator):
    """Releases the mean of rows clipped to ``[-bound, bound]`` (one Gaussian), times ``shrink``."""

    _parameter_constraints = {**PRIVACY_PARAMETER_CONSTRAINTS, "bound": [Real], "shrink": [Real]}
    _released_attributes = frozenset({"mean_"})

    def __init__(self, bound=1.0, shrink=1.0, *, epsilon=1.0, delta=1e-5, accountant=None, random_state=None):
        self.bound = bound
        self.shrink = shrink
        self.epsilon = epsilon
        self.delta = delta
        self.accountant = accountant
        self.random_state = random_state

    @private_fit_context()
    def fit(self, X, y=None):
        return self._private_fit(X)

    def _validate_input(self, X, y=None):
        return check_array(X)

    def _n_releases(self, X):
        return 1

    def _fit_private(self, data, plan, rng, ledger):
        X = np.clip(data, -self.bound, self.bound)
        n, d = X.shape
        k = self._n_releases(X)
        sensitivity = 2 * self.bound * math.sqrt(d) / n
        mechanism = GaussianMechanism.from_budget(plan.epsilon / k, plan.delta / k, sensitivity)
        for _ in range(k):
            mean = mechanism.release(X.mean(axis=0), rng, ledger)
        self.mean_ = self.shrink * mean

    def score_samples(self, X):
        return -((np.asarray(X) - self.mean_) ** 2).sum(axis=1)


class _DataDependentPlan(_ToyMean):
    # Splits its budget over two releases unless the data's mean is large (one release,
    # costlier in RDP than the two planned on the stand-in): a plan that reads the data.
    def _n_releases(self, X):
        return 1 if X.mean() > 0.25 else 2


def _data(n=400, d=2, seed=0):
    return np.random.default_rng(seed).normal(0.5, 0.3, size=(n, d))


def _search(**kwargs):
    params = (
        dict(epsilon=2.0, delta=1e-5, score_bounds=(-4.0, 0.0), random_state=0, n_trials_mean=4.0) | kwargs
    )
    return DPGridSearchCV(_ToyMean(), {"shrink": [0.0, 0.5, 1.0]}, **params)


# --- the RDP curve --------------------------------------------------------------


@pytest.mark.parametrize("z", [0.8, 2.0, 6.0])
@pytest.mark.parametrize("mean, shape", [(10.0, math.inf), (10.0, 1.0), (10.0, 0.0), (5.0, 0.5), (3.0, 2.0)])
def test_curve_matches_dp_accounting(z, mean, shape):
    from dp_accounting import dp_event
    from dp_accounting.rdp import RdpAccountant

    orders = list(DEFAULT_ORDERS)
    reference = RdpAccountant(orders=orders)
    reference.compose(dp_event.RepeatAndSelectDpEvent(dp_event.GaussianDpEvent(z), mean, shape))
    event = RepeatAndSelectEvent(1, "replace_one", (GaussianEvent(1, "replace_one", z),), mean, shape)
    curve = RDPAccountant.curve(event, orders)
    finite = np.isfinite(reference._rdp)
    np.testing.assert_allclose(curve[finite], reference._rdp[finite], rtol=0.01)
    assert compose([event], 1e-5, "rdp").epsilon == pytest.approx(reference.get_epsilon(1e-5), rel=0.01)


def test_pld_falls_back_to_rdp():
    event = RepeatAndSelectEvent(1, "replace_one", (GaussianEvent(1, "replace_one", 2.0),), 10.0, 1.0)
    assert compose([event], 1e-5, "pld") == compose([event], 1e-5, "rdp")


def test_trial_curve_is_the_max_over_candidate_plans():
    orders = np.asarray(DEFAULT_ORDERS)
    weak, strong = (GaussianEvent(1, "replace_one", 1.0),), (GaussianEvent(3, "replace_one", 4.0),)
    both = RepeatAndSelectEvent(1, "replace_one", (weak, strong), 10.0, 1.0)
    alone = RepeatAndSelectEvent(1, "replace_one", weak, 10.0, 1.0)
    np.testing.assert_array_equal(RDPAccountant.curve(both, orders), RDPAccountant.curve(alone, orders))


def test_event_refuses_mixed_relations_and_bad_parameters():
    with pytest.raises(ValueError, match="neighbours"):
        RepeatAndSelectEvent(1, "replace_one", (GaussianEvent(1, "add_remove", 1.0),), 10.0, 1.0)
    with pytest.raises(ValueError, match="mean"):
        RepeatAndSelectEvent(1, "replace_one", (GaussianEvent(1, "replace_one", 1.0),), 0.5, 1.0)
    with pytest.raises(ValueError, match="shape"):
        RepeatAndSelectEvent(1, "replace_one", (GaussianEvent(1, "replace_one", 1.0),), 2.0, -1.0)


# --- the search's accounting ----------------------------------------------------------


@pytest.mark.parametrize("refit", [True, False])
@pytest.mark.parametrize("distribution", ["geometric", "logarithmic", "poisson"])
def test_privacy_spent_within_budget_and_is_the_composition(refit, distribution):
    search = _search(refit=refit, n_trials_distribution=distribution).fit(_data())
    spent = search.privacy_spent_
    assert spent.epsilon <= 2.0 * (1 + 1e-9) and spent.delta <= 1e-5
    assert spent == compose(search.privacy_ledger_.events, 1e-5)
    assert isinstance(search.privacy_ledger_.events[0], RepeatAndSelectEvent)
    # Close to the budget (the calibration uses it, to 1%).
    assert spent.epsilon > 0.95 * 2.0
    if refit:
        assert len(search.privacy_ledger_.events) == 2  # the selection, then the refit's release


def test_every_release_is_accounted():
    # The score release is inside the trial's plan: without it the curve is smaller.
    search = _search().fit(_data())
    event = search.privacy_ledger_.events[0]
    plan = event.inner_events[0]
    assert isinstance(plan[-1], LaplaceEvent)
    without_score = RepeatAndSelectEvent(1, "replace_one", plan[:-1], event.mean, event.shape)
    assert compose([without_score], 1e-5).epsilon < compose([event], 1e-5).epsilon


def test_budget_charged_once_with_the_total():
    budget = BudgetAccountant(10.0, 1e-3)
    search = _search(accountant=budget).fit(_data())
    entries = budget.entries
    assert len(entries) == 1 and entries[0].label == "DPGridSearchCV"
    assert entries[0].epsilon == pytest.approx(search.privacy_spent_.epsilon)
    assert budget.spent.epsilon == pytest.approx(search.privacy_spent_.epsilon)


def test_parallel_trials_with_a_budget():
    budget = BudgetAccountant(10.0, 1e-3)
    search = _search(accountant=budget, n_jobs=2).fit(_data())
    assert len(budget.entries) == 1
    assert budget.spent.epsilon == pytest.approx(search.privacy_spent_.epsilon)
    serial = _search().fit(_data())
    assert search.best_params_ == serial.best_params_
    assert search.best_score_ == serial.best_score_


def test_budget_exceeded_propagates_and_fits_nothing():
    budget = BudgetAccountant(1.0, 1e-3)
    search = _search(accountant=budget)
    with pytest.raises(BudgetExceededError):
        search.fit(_data())
    assert not hasattr(search, "best_score_") and not hasattr(search, "cv_results_")
    assert budget.spent.epsilon == 0


def test_user_estimator_untouched():
    estimator = _ToyMean(bound=1.0)
    before = estimator.get_params()
    DPGridSearchCV(estimator, {"shrink": [0.5, 1.0]}, score_bounds=(-4, 0), random_state=0).fit(_data())
    assert estimator.get_params() == before and not hasattr(estimator, "mean_")


def test_no_exact_validation_score_is_held():
    exact = []

    def scoring(model, X, y):
        rows = np.clip(model.score_samples(X), -4.0, 0.0)
        exact.append(rows.mean())
        return rows

    search = _search(scoring=scoring, refit=False).fit(_data())
    assert exact, "the scorer was not called"
    held = [search.best_score_, *np.ravel(search.cv_results_["selected_score"])]
    held += [v for v in vars(search).values() if isinstance(v, float)]
    for value in held:
        if not math.isnan(value):
            assert not np.isclose(value, exact, rtol=0, atol=1e-12).any()
    # Only the chosen candidate's score is released; K and the other trials are not.
    assert np.isnan(search.cv_results_["selected_score"]).sum() == len(search.cv_results_["params"]) - 1
    assert not any("trial" in name for name in vars(search) if name.endswith("_"))


@pytest.mark.slow
def test_released_score_noise_is_the_laplace_mechanism():
    # One trial (n_trials_mean=1): best_score_ - exact is the score's noise, Laplace of scale
    # sensitivity * multiplier; a halved scale fails the KS test and the std check.
    diffs, scales = [], []
    X = _data(n=200)
    for seed in range(300):
        exact = []

        def scoring(model, X, y, exact=exact):
            rows = np.clip(model.score_samples(X), -4.0, 0.0)
            exact.append(rows.mean())
            return rows

        search = DPGridSearchCV(
            _ToyMean(),
            {"shrink": [1.0]},
            epsilon=1.0,
            scoring=scoring,
            score_bounds=(-4.0, 0.0),
            n_trials_mean=1.0,
            refit=False,
            random_state=seed,
        ).fit(X)
        laplace = search.privacy_ledger_.events[0].inner_events[0][-1]
        scales.append(4.0 / 40 * laplace.noise_multiplier)  # (high - low) / m, m = 40 held out
        diffs.append(search.best_score_ - exact[0])
    scale = scales[0]
    assert np.allclose(scales, scale)
    diffs = np.asarray(diffs)
    assert stats.kstest(diffs, stats.laplace(scale=scale).cdf).pvalue > 1e-3
    assert np.std(diffs) == pytest.approx(math.sqrt(2) * scale, rel=0.2)
    assert stats.kstest(diffs, stats.laplace(scale=scale / 2).cdf).pvalue < 1e-3


def test_data_dependent_plan_is_refused():
    search = DPGridSearchCV(_DataDependentPlan(), {"shrink": [1.0]}, score_bounds=(-4, 0), random_state=0)
    with pytest.raises(RuntimeError, match="dry run"):
        search.fit(_data())


def test_parameters_are_checked_before_anything_is_charged():
    budget = BudgetAccountant(10.0, 1e-3)
    with pytest.raises(ValueError, match="score_bounds"):
        DPGridSearchCV(_ToyMean(), {"shrink": [1.0]}, accountant=budget).fit(_data())
    with pytest.raises(ValueError, match="n_trials_distribution"):
        _search(n_trials_distribution="uniform", accountant=budget).fit(_data())
    with pytest.raises(ValueError, match="validation_fraction"):
        _search(validation_fraction=1.5, accountant=budget).fit(_data())
    assert budget.spent.epsilon == 0


def test_randomized_search_draws_n_iter_candidates():
    search = DPRandomizedSearchCV(
        _ToyMean(), {"shrink": stats.uniform(0, 1)}, n_iter=5, score_bounds=(-4, 0), random_state=0
    ).fit(_data())
    assert len(search.cv_results_["params"]) == 5
    assert search.best_params_ in search.cv_results_["params"]
    assert search.privacy_spent_.epsilon <= 1.0 * (1 + 1e-9)


def test_selection_prefers_the_good_candidate():
    # shrink=1 is the private mean, shrink=0 the origin (far from data centred at 0.5).
    X = _data(n=2000)
    picks = [
        _search(random_state=s, epsilon=4.0, score_bounds=(-2, 0)).fit(X).best_params_["shrink"]
        for s in range(5)
    ]
    assert np.mean(picks) > 0.5


@pytest.mark.slow
def test_utility_on_digits_beats_the_median_candidate():
    from sklearn.datasets import load_digits

    from skdp import DPKMeans

    X, _ = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(X))
    train, test = X[order[:1400]], X[order[1400:]]
    grid = {"n_clusters": [2, 5, 10, 20, 40, 80]}

    def scoring(model, X, y):
        return -np.min(((X[:, None, :] - model.cluster_centers_[None]) ** 2).sum(-1), axis=1)

    def quality(model):
        return np.clip(scoring(model, test, None), -4000, 0).mean()

    # Each candidate's quality at the refit's budget, averaged over seeds.
    candidate_quality = {
        k: np.mean(
            [quality(DPKMeans(k, epsilon=1.0, data_norm=60, random_state=s).fit(train)) for s in range(3)]
        )
        for k in grid["n_clusters"]
    }
    picked = [
        candidate_quality[
            DPGridSearchCV(
                DPKMeans(data_norm=60),
                grid,
                epsilon=2.0,
                scoring=scoring,
                score_bounds=(-4000, 0),
                random_state=s,
            )
            .fit(train)
            .best_params_["n_clusters"]
        ]
        for s in range(4)
    ]
    assert np.mean(picked) > np.median(list(candidate_quality.values()))


class _FailsOnRealData(_ToyMean):
    # Plans like _ToyMean (the dry run on zeros passes), fails once it reads real rows.
    def _n_releases(self, X):
        if np.any(X != 0):
            raise ValueError("a trial failed")
        return 1


def test_a_failing_trial_propagates_and_the_hold_stays_charged():
    # No error_score: a trial's failure is never swallowed into a score (a
    # silently dropped trial would be a data-dependent release), and the budget
    # held before the data was read stays charged.
    budget = BudgetAccountant(10.0, 1e-3)
    search = DPGridSearchCV(
        _FailsOnRealData(), {"shrink": [1.0]}, epsilon=2.0, score_bounds=(-4, 0), accountant=budget
    )
    with pytest.raises(ValueError, match="a trial failed"):
        search.fit(_data())
    # The hold is closed on the way out, at the amount held (never less).
    assert budget.spent.epsilon == pytest.approx(2.0) and budget.reservations == []
    assert len(budget.entries) == 1
    assert not hasattr(search, "best_estimator_")


def test_best_estimator_is_a_fitted_estimator():
    X = _data()
    search = _search().fit(X)
    best = search.best_estimator_
    check_is_fitted(best)
    assert best.get_params()["random_state"] is None and best.get_params()["accountant"] is None
    np.testing.assert_array_equal(search.score_samples(X[:5]), best.score_samples(X[:5]))
    # Only the methods the chosen model has are offered (_ToyMean has no score).
    assert not hasattr(search, "score") and not hasattr(search, "predict")
    restored = pickle.loads(pickle.dumps(search))
    np.testing.assert_array_equal(restored.score_samples(X[:5]), best.score_samples(X[:5]))
    assert restored.best_params_ == search.best_params_
    # The search's clone is unfitted, and so is the estimator it was given.
    with pytest.raises(NotFittedError):
        clone(search).score_samples(X[:5])


_STATES = {
    "None": lambda: None,
    "int": lambda: 7,
    "RandomState": lambda: np.random.RandomState(7),
    "Generator": lambda: np.random.default_rng(7),
}


@pytest.mark.parametrize("state_kind", list(_STATES))
@pytest.mark.parametrize("kind", ["grid", "randomized"])
def test_pickled_search_holds_only_releases(kind, state_kind):
    # tests/test_release_surface.py's walk (the searches are not in the
    # registry: they wrap an estimator rather than being one): no generator
    # or its state, no per-row array, no undeclared attribute, in memory and
    # once pickled.
    random_state = _STATES[state_kind]()
    X = _data(n=N_ROWS, d=3)
    common = dict(epsilon=2.0, score_bounds=(-4.0, 0.0), n_trials_mean=3.0, random_state=random_state)
    if kind == "grid":
        search = DPGridSearchCV(_ToyMean(), {"shrink": [0.5, 1.0]}, **common)
    else:
        search = DPRandomizedSearchCV(_ToyMean(), {"shrink": stats.uniform(0, 1)}, n_iter=3, **common)
    search.fit(X)
    user_seed = random_state if isinstance(random_state, int) else None
    # The user's own objects are parameters: the generator passed as
    # random_state (in memory only) and scipy's distributions, which carry
    # NumPy's global RandomState (the candidates drawn from them are public).
    user_objects = ("model.random_state", "model.__dict__['random_state']", "model.param_distributions")
    in_memory = [
        p for p in release_violations(search, user_seed, in_memory=True) if not p.startswith(user_objects)
    ]
    assert not in_memory, "\n".join(in_memory)
    buffer = io.BytesIO()
    pickle.dump(search, buffer)
    problems = [
        p
        for p in release_violations(pickle.loads(buffer.getvalue()), user_seed)
        if not p.startswith("model.param_distributions")
    ]
    assert not problems, "\n".join(problems)


def test_release_walk_catches_a_search_that_keeps_its_trials():
    # The walk is not vacuous on a search: a kept generator or an undeclared
    # attribute (the other trials' scores) is caught.
    search = _search(random_state=np.random.default_rng(0)).fit(_data(n=N_ROWS))
    search.trial_scores_ = np.zeros(3)
    problems = release_violations(search, None)
    assert any("trial_scores_" in p for p in problems)
    assert any("generator" in p for p in problems)


def _small_net_problem():
    """120 rows of a linearly separable 3-feature problem and a one-layer DP net for it."""
    import torch

    from skdp.nn import DPNeuralNetClassifier

    torch.manual_seed(0)
    X, y = sign_labelled(0, 120, 3)
    module = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Softmax(dim=-1))
    net = DPNeuralNetClassifier(module, classes=[0, 1], batch_size=40, max_epochs=1, verbose=0)
    return X, y, net


def test_dp_sgd_nets_can_be_searched():
    # DP-SGD's Poisson steps (add/remove) become replace-one
    # WeakTrianglePoissonEvents, whose RDP curve the selection's theorem uses;
    # n_samples="auto" is declared to the (public) split sizes.
    pytest.importorskip("torch")
    from skdp.privacy.accountants.repeat_select import WeakTrianglePoissonEvent

    X, y, net = _small_net_problem()
    search = DPGridSearchCV(net, {"lr": [0.5]}, epsilon=4.0, n_trials_mean=2.0, random_state=0).fit(X, y)
    spent = search.privacy_spent_
    assert 0.95 * 4.0 < spent.epsilon <= 4.0 * (1 + 1e-9)
    assert spent == compose(search.privacy_ledger_.events, 1e-5)
    trial = search.privacy_ledger_.events[0].inner_events[0]
    assert any(isinstance(e, WeakTrianglePoissonEvent) for e in trial)
    assert all(not isinstance(e, GaussianEvent) or e.count == 0 for e in trial), "no noisy count"
    refit = search.privacy_ledger_.events[1:]
    assert refit and all(isinstance(e, WeakTrianglePoissonEvent) for e in refit)
    assert search.best_estimator_.get_params()["n_samples"] == 120
    assert search.predict(X[:4]).shape == (4,)


def test_a_regressor_is_searched_by_its_squared_error_by_default():
    """scoring=None on a DP regressor: minus each held-out row's squared error, clipped to score_bounds.

    Until 2026-11-28 the default for every non-classifier was score_samples,
    which the regressors do not have: the search failed after its
    reservation.  Now the regressors' default is "neg_squared_error", and a
    search whose resolved scoring the estimator cannot compute is refused
    before anything is charged.
    """
    from skdp.bnn import DPSEPRegressor
    from skdp.preprocessing import DPStandardScaler

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(400, 3))
    y = X @ np.array([1.0, -0.5, 0.25]) + 0.1 * rng.normal(size=400)
    # Without replacement: the search accounts its trials by RDP (Poisson batches under replace-one have no RDP curve).
    model = DPSEPRegressor(
        n_epochs=2, feature_bounds=(-1.0, 1.0), target_bounds=(-3.0, 3.0), sampling="without_replacement"
    )
    search = DPGridSearchCV(
        model, {"n_epochs": [1, 2]}, epsilon=4.0, n_trials_mean=1.5, score_bounds=(-4.0, 0.0), random_state=0
    ).fit(X, y)
    assert search._scoring() == "neg_squared_error"
    assert -4.0 <= search.best_score_ <= 0.0 and search.privacy_spent_.epsilon <= 4.0 * (1 + 1e-9)
    assert search.score(X, y) > 0.5  # the refitted model's R^2 (about .9)
    # An estimator without score_samples and no scoring: refused, nothing charged.
    budget = BudgetAccountant(epsilon=10.0, delta=1e-4)
    refused = DPGridSearchCV(
        DPStandardScaler(bounds=(-1.0, 1.0)),
        {"epsilon": [1.0]},
        epsilon=4.0,
        score_bounds=(-1.0, 1.0),
        accountant=budget,
    )
    with pytest.raises(ValueError, match="scoring=None .* score_samples"):
        refused.fit(X)
    assert budget.spent.epsilon == 0.0 and not budget.entries


def test_dpsep_with_its_default_poisson_batches_can_be_searched():
    """DP-SEP's default batches (Poisson, replace-one) have no RDP curve: its trials calibrate under its own "pld".

    Until 2026-11-28 the search set every trial to composition="rdp", which
    DP-SEP refuses for Poisson batches: a search over a default DP-SEP failed
    in its plan. The search still accounts the trials in RDP, each Poisson
    step as a WeakTrianglePoissonEvent (the bound through an intermediate
    dataset), within its budget.
    """
    from skdp.bnn import DPSEPRegressor
    from skdp.privacy.events import WeakTrianglePoissonEvent

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(1000, 3))
    y = X @ np.array([1.0, -0.5, 0.25]) + 0.1 * rng.normal(size=1000)
    model = DPSEPRegressor(n_epochs=2, feature_bounds=(-1.0, 1.0), target_bounds=(-3.0, 3.0))
    assert model.sampling == "poisson"
    search = DPGridSearchCV(model, {"n_epochs": [1, 2]}, epsilon=4.0, score_bounds=(-4.0, 0.0), random_state=0)
    search.fit(X, y)
    assert search.privacy_spent_.epsilon <= 4.0 * (1 + 1e-9)
    assert search.best_estimator_.composition == "pld"
    assert any(isinstance(e, WeakTrianglePoissonEvent) for e in search.privacy_ledger_.events)
    assert search.score(X, y) > 0.5  # the refitted model's R^2 (about .95)
    # An estimator that can calibrate by RDP still does (the cheaper currency).
    wor = DPGridSearchCV(
        clone(model).set_params(sampling="without_replacement"),
        {"n_epochs": [1]},
        epsilon=4.0,
        score_bounds=(-4.0, 0.0),
    )
    assert wor._inner_estimator().composition == "rdp"
    assert search._inner_estimator().composition == "pld"


def test_a_searched_net_gets_the_per_column_input_boxes_of_a_net_fitted_alone():
    """A search declares ``n_samples`` (its split sizes); the net's plan still reads X's width.

    The class is in a column of scale 1e-2 beside columns up to 1e4.  Fitted
    alone (``n_samples="auto"``) the default net releases a box per column;
    inside a search its plan was made with a declared size and, until
    2026-11-28, without the width of X, so it took one scale for all columns
    and predicted the majority (.50 on these rows).  The width is public
    (the shape, read before the reservation), so the searched pipeline's
    net now plans the same boxes, and the trials' dry runs (on zeros of that
    width) the same events.
    """
    pytest.importorskip("torch")
    from skdp.nn import DPNeuralNetClassifier
    from skdp.pipeline import make_pipeline

    rng = np.random.default_rng(1)
    n, d = 5000, 6
    y = (rng.random(n) < 0.5).astype(np.int64)
    scales = np.array([1e-2, 1e4, 3e3, 1e2, 1.0, 5e3])
    Z = rng.normal(size=(n, d))
    Z[:, 0] += 2.0 * y
    X = (Z * scales + 3 * scales).astype(np.float32)
    net = DPNeuralNetClassifier(classes=[0, 1], verbose=0)
    search = DPGridSearchCV(
        make_pipeline(net),
        {"dpneuralnetclassifier__max_epochs": [2]},
        epsilon=6.0,
        n_trials_mean=1.5,
        random_state=0,
    )
    search.fit(X[:4000], y[:4000])
    best = search.best_estimator_[-1]
    assert best.get_params()["n_samples"] == 4000
    assert best.input_clip_ == 4.0 and np.ptp(best.input_scale_) > 0
    assert search.privacy_spent_.epsilon <= 6.0 * (1 + 1e-9)
    assert search.privacy_spent_ == compose(search.privacy_ledger_.events, 1e-5)
    assert search.score(X[4000:], y[4000:]) >= 0.75  # about .84; the majority .50


# --- composites own every release (faults 1, 2 and 4 of the composites issue) -----------


def test_post_fit_draws_of_the_chosen_model_are_charged_to_the_search():
    # Fault 1: draws from best_estimator_ left privacy_spent_ and the budget unchanged.
    from skdp.bayes import DPBetaBernoulli

    budget = BudgetAccountant(20.0, 1e-3)
    Xb = (np.random.default_rng(0).random((200, 3)) < 0.4).astype(int)
    search = DPGridSearchCV(
        DPBetaBernoulli(mechanism="ops"),
        {"prior": [(1.0, 1.0), (2.0, 2.0)]},
        epsilon=2.0,
        score_bounds=(-5.0, 0.0),
        n_trials_mean=2.0,
        accountant=budget,
        random_state=0,
    ).fit(Xb)
    before, on_budget = search.privacy_spent_.epsilon, budget.spent.epsilon
    best = search.best_estimator_
    n_events = len(best.privacy_ledger_.events)
    best.sample_posterior(4)
    draws = best.privacy_ledger_.events[n_events:]  # the model's own ledger records them too
    # Charged to the search: the draws' own guarantee at the search's delta
    # (four pure-DP releases, composed), added to what the search spent.
    charged = search.privacy_ledger_.events[-len(draws) :]
    assert charged == [search._searched(e) for e in draws]
    cost = compose(charged, search.delta).epsilon
    assert 3.5 * best.epsilon < cost <= 4 * best.epsilon * (1 + 1e-9)
    assert search.privacy_spent_.epsilon == pytest.approx(before + cost)
    assert budget.spent.epsilon == pytest.approx(on_budget + cost)
    with pytest.raises(BudgetExceededError):
        best.sample_posterior(1000)
    assert budget.spent.epsilon == pytest.approx(on_budget + cost)
    copy = pickle.loads(pickle.dumps(search))
    assert copy.best_estimator_._privacy_owner is copy


def test_epsilon_is_a_grid_dimension():
    # Fault 4: TypeError "set_params() got multiple values for keyword argument 'epsilon'".
    budget = BudgetAccountant(10.0, 1e-3)
    grid = {"epsilon": [0.5, 1.0], "shrink": [1.0]}
    search = DPGridSearchCV(
        _ToyMean(),
        grid,
        epsilon=3.0,
        score_bounds=(-4, 0),
        n_trials_mean=3.0,
        accountant=budget,
        random_state=0,
    ).fit(_data())
    best = search.best_estimator_
    assert best.epsilon == search.best_params_["epsilon"]  # refitted at the candidate's own budget
    spent = search.privacy_spent_
    assert spent.epsilon <= 3.0 * (1 + 1e-9)
    # The reported guarantee covers whichever candidate the selection chose:
    # the selection composed with the worst refit, at least the chosen one's.
    selection = search.privacy_ledger_.events[0]
    worst = max(
        compose([selection, GaussianEvent(1, "replace_one", z)], 1e-5).epsilon
        for z in (_noise_multiplier(0.5), _noise_multiplier(1.0))
    )
    assert spent.epsilon == pytest.approx(worst, rel=1e-6)
    assert spent.epsilon >= compose(search.privacy_ledger_.events, 1e-5).epsilon
    assert budget.spent.epsilon == pytest.approx(spent.epsilon)
    # The trials keep the candidates' ratio: the cheaper one runs at half the budget.
    plans = selection.inner_events
    assert len(plans) == 2
    zs = sorted(p[0].noise_multiplier for p in plans)
    assert zs[1] / zs[0] > 1.5
    # A grid whose refits alone exceed the total is refused before anything is charged.
    with pytest.raises(ValueError, match="grid's epsilon"):
        DPGridSearchCV(
            _ToyMean(), {"epsilon": [5.0]}, epsilon=3.0, score_bounds=(-4, 0), accountant=budget
        ).fit(_data())
    with pytest.raises(ValueError, match="random_state cannot be a grid dimension"):
        DPGridSearchCV(_ToyMean(), {"random_state": [0, 1]}, score_bounds=(-4, 0)).fit(_data())
    assert budget.spent.epsilon == pytest.approx(spent.epsilon)


def _noise_multiplier(epsilon, delta=1e-5, n=400, d=2, bound=1.0):
    """The noise multiplier of _ToyMean's one Gaussian release at (epsilon, delta), from skdp's calibration."""
    return (
        GaussianMechanism.from_budget(epsilon, delta, 2 * bound * math.sqrt(d) / n).event().noise_multiplier
    )


def test_an_epsilon_grid_search_is_reproduced_by_dp_accounting():
    # The search's privacy_spent_ against an independent accountant: Google's
    # dp-accounting RDP accountant composing its own RepeatAndSelectDpEvent
    # (Papernot & Steinke 2022) of the dominating candidate's trial (its fit's
    # Gaussian and its noisy score's Laplace) with the worst refit (the
    # candidate with the larger epsilon).  Same orders; the two conversions
    # from RDP agree to the curve tolerance of test_curve_matches_dp_accounting.
    from dp_accounting import dp_event
    from dp_accounting.rdp import RdpAccountant

    search = DPGridSearchCV(
        _ToyMean(),
        {"epsilon": [0.5, 1.0], "shrink": [1.0]},
        epsilon=3.0,
        score_bounds=(-4, 0),
        n_trials_mean=3.0,
        random_state=0,
    ).fit(_data())
    selection = search.privacy_ledger_.events[0]
    assert isinstance(selection, RepeatAndSelectEvent)
    plans = [list(plan) for plan in selection.inner_events]
    assert all(isinstance(e, GaussianEvent | LaplaceEvent) and e.count == 1 for plan in plans for e in plan)
    dominating = min(
        plans, key=lambda plan: min(e.noise_multiplier for e in plan if isinstance(e, GaussianEvent))
    )
    trial = dp_event.ComposedDpEvent(
        [
            dp_event.GaussianDpEvent(e.noise_multiplier)
            if isinstance(e, GaussianEvent)
            else dp_event.LaplaceDpEvent(e.noise_multiplier)
            for e in dominating
        ]
    )
    reference = RdpAccountant(orders=list(DEFAULT_ORDERS))
    reference.compose(dp_event.RepeatAndSelectDpEvent(trial, selection.mean, selection.shape))
    reference.compose(dp_event.GaussianDpEvent(_noise_multiplier(1.0)))  # the worst refit
    assert search.privacy_spent_.epsilon == pytest.approx(reference.get_epsilon(1e-5), rel=0.01)
    assert search.privacy_spent_.epsilon <= 3.0 * (1 + 1e-9)


def test_a_dpkmeans_budget_grid_search_is_reproduced_by_dp_accounting():
    # The issue's own case (fault 4): DPKMeans searched over epsilon.  Each
    # candidate's refit is the candidate refitted at its own epsilon; the
    # search reports the selection composed with the worst of them, which
    # dp-accounting's RDP accountant rebuilds from the events alone.
    from dp_accounting import dp_event
    from dp_accounting.rdp import RdpAccountant

    from skdp.cluster import DPKMeans

    def dp_events(events):
        out = []
        for e in events:
            assert isinstance(e, GaussianEvent | LaplaceEvent) and e.neighbouring == "replace_one"
            one = (dp_event.GaussianDpEvent if isinstance(e, GaussianEvent) else dp_event.LaplaceDpEvent)(
                e.noise_multiplier
            )
            out.append(dp_event.SelfComposedDpEvent(one, e.count))
        return dp_event.ComposedDpEvent(out)

    X = _data(n=600)
    search = DPGridSearchCV(
        DPKMeans(2, data_norm=2.0),
        {"epsilon": [0.5, 1.0]},
        epsilon=3.0,
        scoring=lambda model, X, y: -(model.transform(X).min(axis=1) ** 2),  # per row: minus the k-means cost
        score_bounds=(-4, 0),
        random_state=0,
    ).fit(X)
    selection = search.privacy_ledger_.events[0]
    delta = search.best_estimator_.delta
    worst = 0.0
    for epsilon in (0.5, 1.0):
        refit = DPKMeans(2, data_norm=2.0, epsilon=epsilon, delta=delta, random_state=0).fit(X)
        reference = RdpAccountant(orders=list(DEFAULT_ORDERS))
        trials = [dp_events(plan) for plan in selection.inner_events]
        # The trial is the pointwise larger of the candidates' curves: the
        # larger epsilon's plan (less noise everywhere) dominates.
        gaussian = [
            [e.event.noise_multiplier for e in t.events if isinstance(e.event, dp_event.GaussianDpEvent)]
            for t in trials
        ]
        dominating = trials[int(np.argmin([min(z) for z in gaussian]))]
        reference.compose(dp_event.RepeatAndSelectDpEvent(dominating, selection.mean, selection.shape))
        reference.compose(dp_events(refit.privacy_ledger_.events))
        worst = max(worst, reference.get_epsilon(1e-5))
    assert search.privacy_spent_.epsilon == pytest.approx(worst, rel=1e-9)
    assert search.privacy_spent_.epsilon <= 3.0 * (1 + 1e-9)


def test_a_search_whose_trials_spent_more_settles_it_and_is_left_unfitted():
    # Fault 2: the search raised on a trial that released more than planned,
    # with the budget left at the reservation and nothing said about the excess.
    budget = BudgetAccountant(10.0, 1e-3)
    search = DPGridSearchCV(
        _DataDependentPlan(),
        {"shrink": [1.0]},
        epsilon=2.0,
        score_bounds=(-4, 0),
        accountant=budget,
        random_state=0,
    )
    with pytest.raises(RuntimeError, match="charged what was released"):
        search.fit(_data())
    # Settled (no open reservation): what the trials released, and never less than the hold.
    assert budget.reservations == [] and len(budget.entries) == 1
    assert budget.spent.epsilon == pytest.approx(2.0)
    assert not any(hasattr(search, name) for name in ("best_estimator_", "privacy_spent_", "cv_results_"))


def test_verbose_prints_a_line_per_fit_and_is_silent_by_default(capsys):
    _search(n_trials_mean=2.0).fit(_data())
    assert capsys.readouterr().out == ""
    _search(n_trials_mean=2.0, verbose=1).fit(_data())
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith("[DPGridSearchCV") for line in lines)
    assert sum("refitted" in line for line in lines) == 1
    with pytest.raises(ValueError, match="verbose"):
        _search(verbose=-1).fit(_data())


@pytest.mark.slow
def test_a_pipeline_with_a_net_is_searched_like_the_net():
    # Fault 4: the dry run failed with "composition='rdp' cannot account
    # SubsampledGaussianEvent (replace_one); use 'pld' or 'rdp'": the search
    # forced the pipeline's own composition to "rdp", and the net's
    # n_samples="auto" inside the pipeline planned from a noisy count.
    pytest.importorskip("torch")
    from skdp.pipeline import make_pipeline
    from skdp.preprocessing import DPStandardScaler

    X, y, net = _small_net_problem()
    pipe = make_pipeline(DPStandardScaler(bounds=(-4.0, 4.0)), net)
    search = DPGridSearchCV(
        pipe, {"dpneuralnetclassifier__lr": [0.1, 0.3]}, epsilon=4.0, n_trials_mean=2.0, random_state=0
    ).fit(X, y)
    assert search.privacy_spent_.epsilon <= 4.0 * (1 + 1e-9)
    assert search.best_estimator_.steps[-1][1].get_params()["n_samples"] == 120
    assert search.best_estimator_._privacy_owner is search
    assert search.predict(X[:4]).shape == (4,)
