"""What a new user reads: warnings under scikit-learn's searches, and refusals that name their cause."""

import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest
from conftest import sign_labelled
from sklearn.model_selection import GridSearchCV

from skdp import BudgetAccountant, BudgetExceededError, PrivacyLeakWarning
from skdp.mixture import DPGaussianMixture
from skdp.privacy import BudgetRemaining

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _search(n_jobs):
    X = np.random.default_rng(0).normal(size=(120, 2))
    model = DPGaussianMixture(2, data_norm="nonprivate", max_iter=2, random_state=0)  # warns: data_norm not set
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
        "data_norm is 'nonprivate'",
    ], messages
    assert {w.filename for w in leaks} == {__file__}


def test_a_users_error_filter_still_raises_under_a_search():
    # Every fit raises it; scikit-learn then reports that all fits failed, quoting it.
    with (
        warnings.catch_warnings(),
        pytest.raises((PrivacyLeakWarning, ValueError), match="data_norm is 'nonprivate'"),
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
    lines = [line for line in result.stderr.splitlines() if "data_norm is 'nonprivate'" in line]
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


def test_cross_validation_on_a_spent_budget_says_the_budget_ran_out():
    from sklearn.exceptions import FitFailedWarning
    from sklearn.model_selection import cross_val_score

    from skdp.bayes import DPBetaBernoulli

    X = np.random.default_rng(0).binomial(1, 0.4, size=(90, 3))
    budget = BudgetAccountant(epsilon=1.5)
    with pytest.warns(FitFailedWarning, match="BudgetExceededError: Privacy budget exceeded"):
        scores = cross_val_score(DPBetaBernoulli(epsilon=1.0, accountant=budget), X, cv=3)
    assert np.isfinite(scores[0]) and np.isnan(scores[1:]).all()


def test_pipeline_refusal_names_the_converted_steps():
    pytest.importorskip("torch")
    pytest.importorskip("skorch")
    from skdp.nn import DPNeuralNetClassifier
    from skdp.pipeline import make_pipeline
    from skdp.preprocessing import DPStandardScaler

    # epsilon=None: each step keeps its own budget, the net's converted by group privacy.
    pipe = make_pipeline(
        DPStandardScaler(bounds=(-4.0, 4.0)),
        DPNeuralNetClassifier(classes=[0, 1], max_epochs=1, verbose=0),
        accountant=BudgetAccountant(10.0, 1e-5),
    )
    X = np.zeros((40, 2), dtype="float32")
    with pytest.raises(BudgetExceededError) as refused:
        pipe.fit(X, np.arange(40) % 2)
    message = str(refused.value)
    assert "'dpneuralnetclassifier' (add/remove" in message and "(2 eps, 2 e^eps delta)" in message


def test_a_pipeline_epsilon_is_honoured_with_an_add_remove_step():
    """The split is of the pipeline's (epsilon, delta) in its relation: the net gets the per-record share.

    Until 2026-11-28 the net spent its share (1, 5e-6) add/remove, whose
    replace-one conversion (2, 2e x 5e-6) made the pipeline's request
    (3, 3.2e-5) for epsilon=2, delta=1e-5: a (2, 1e-5) budget refused it.
    """
    pytest.importorskip("torch")
    pytest.importorskip("skorch")
    from skdp.nn import DPNeuralNetClassifier
    from skdp.pipeline import make_pipeline
    from skdp.preprocessing import DPStandardScaler
    from skdp.privacy import group_guarantee

    budget = BudgetAccountant(2.0, 1e-5)
    pipe = make_pipeline(
        DPStandardScaler(bounds=(-4.0, 4.0)),
        DPNeuralNetClassifier(classes=[0, 1], max_epochs=1, verbose=0),
        epsilon=2.0,
        accountant=budget,
        random_state=0,
    )
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2)).astype("float32")
    pipe.fit(X, (X[:, 0] > 0).astype(int))
    scaler, net = (step for _, step in pipe.steps)
    assert (scaler.epsilon, scaler.delta) == pytest.approx((1.0, 5e-6))
    assert group_guarantee(net.epsilon, net.delta) == pytest.approx((1.0, 5e-6), rel=1e-12)
    assert pipe.privacy_spent_.epsilon <= 2.0 * (1 + 1e-9) and pipe.privacy_spent_.delta <= 1e-5 * (1 + 1e-9)
    assert tuple(budget.spent) == pytest.approx(tuple(pipe.privacy_spent_))


def test_pipeline_delta_defaults_to_the_estimators_default_when_only_epsilon_is_given():
    from skdp.pipeline import DEFAULT_DELTA, make_pipeline
    from skdp.preprocessing import DPStandardScaler

    X = np.random.default_rng(0).normal(size=(200, 2))
    pipe = make_pipeline(
        DPStandardScaler(bounds=(-4.0, 4.0)), DPGaussianMixture(2, data_norm=5.0), epsilon=1.0
    )
    assert DEFAULT_DELTA == 1e-5
    assert pipe.fit(X).privacy_spent_.delta == pytest.approx(1e-5)  # not the steps' sum, 2e-5
    pure = make_pipeline(DPStandardScaler(bounds=(-4.0, 4.0), delta=0.0), epsilon=1.0)
    assert pure.fit(X).privacy_spent_.delta == 0.0
    # Neither given: each step keeps its own, the pipeline's delta is their sum.
    both = make_pipeline(DPStandardScaler(bounds=(-4.0, 4.0)), DPGaussianMixture(2, data_norm=5.0))
    assert both.fit(X).privacy_spent_.delta == pytest.approx(2e-5)


@pytest.mark.parametrize(
    ("params", "cause"),
    [
        ({"epsilon": 1e-9}, "epsilon=1e-09, delta=1e-05 under 'pld' composition: epsilon is too small"),
        # Basic composition of a few hundred without-replacement steps: each
        # step's RDP conversion on its own share of delta has a floor no
        # noise lowers (until 2026-11-28 the message said to raise epsilon
        # as if noise could reach it).
        (
            {"composition": "basic", "sampling": "without_replacement"},
            "whatever the noise (each of its uses is converted to (epsilon, delta) on its own share of delta",
        ),
    ],
)
def test_calibration_failure_names_the_parameter_and_the_cause(params, cause):
    from skdp.bnn import DPSEPRegressor

    X = np.random.default_rng(0).normal(size=(200, 2))
    model = DPSEPRegressor(feature_bounds=(-3.0, 3.0), target_bounds=(-3.0, 3.0), **params)
    with pytest.raises(ValueError, match="No noise level meets") as failed:
        model.fit(X, X[:, 0])
    assert cause in str(failed.value) and "nan" not in str(failed.value)


@pytest.mark.parametrize(
    ("sampling", "remedy"),
    [
        ("poisson", "use composition='pld' (or sampling='without_replacement' for 'rdp')"),
        ("without_replacement", "use composition='rdp' (or 'pld', which composes these batches by RDP)"),
    ],
)
def test_dpsep_names_a_remedy_that_applies_to_its_sampling(sampling, remedy):
    from skdp.bnn import DPSEPRegressor

    X = np.random.default_rng(0).normal(size=(200, 2))
    model = DPSEPRegressor(composition="zcdp", sampling=sampling, feature_bounds=(-3.0, 3.0), target_bounds=(-3.0, 3.0))
    with pytest.raises(ValueError, match="cannot account DP-SEP") as refused:
        model.fit(X, X[:, 0])
    assert remedy in str(refused.value)


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
def test_a_net_at_a_tiny_epsilon_names_epsilon_and_the_staged_plan_before_the_budget(kind):
    pytest.importorskip("torch")
    from skdp.nn import DPNeuralNetClassifier, DPNeuralNetRegressor

    X, y = sign_labelled(0, 100, 3)
    if kind == "classifier":
        net = DPNeuralNetClassifier(epsilon=1e-9, classes=[0, 1], max_epochs=1)
    else:
        net, y = DPNeuralNetRegressor(epsilon=1e-9, max_epochs=1), X[:, :1]
    budget = BudgetAccountant(10.0, 1e-3)
    net.set_params(accountant=budget)
    with pytest.raises(ValueError, match=r"epsilon=1e-09 is too small for this net at delta=1e-05") as failed:
        net.fit(X, y)
    message = str(failed.value)
    # The real cause (the staged plan's Renyi bound and its floor), not a composition the user did not pick.
    assert "n_samples='auto'" in message and "below about 0.0084" in message
    assert "'rdp'" not in message and "nan" not in message
    # A check of public parameters: refused before the hold, nothing charged.
    assert budget.spent.epsilon == 0.0 and budget.spent.delta == 0.0


def test_calibration_at_delta_zero_with_gaussian_noise_says_so():
    from skdp.privacy import GaussianEvent, calibrate_noise_multiplier

    with pytest.raises(ValueError, match="Gaussian noise needs delta > 0"):
        calibrate_noise_multiplier(lambda z: [GaussianEvent(1, "replace_one", z)], 1.0, 0.0, "pld")


def test_delta_at_least_one_over_a_public_n_warns_before_the_data_is_read():
    X = np.random.default_rng(0).normal(size=(50, 2))
    # reduce_components=False: the small-n fallback's own warning is not the subject here.
    with pytest.warns(UserWarning, match=r"delta=0.05 is not below 1/n_samples \(n_samples=50, public\)"):
        DPGaussianMixture(2, data_norm=5.0, delta=0.05, reduce_components=False).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        DPGaussianMixture(2, data_norm=5.0, delta=1e-3, reduce_components=False).fit(X)


def test_the_delta_warning_suggests_a_delta_below_one_over_n_at_every_n():
    from skdp.preprocessing import DPStandardScaler

    bounds = (np.full(2, -5.0), np.full(2, 5.0))
    # At n = 1e5 the default delta (1e-5) is 1/n itself: the warning must not recommend it.
    X = np.zeros((100_000, 2))
    with pytest.warns(UserWarning, match=r"\(1/n_samples\*\*1.1 = 3.2e-06\)") as record:
        DPStandardScaler(bounds=bounds).fit(X)
    assert not any("the default" in str(w.message) for w in record)
    # At n = 50 a delta of 0.05 warns, and the default is a valid suggestion there.
    with pytest.warns(UserWarning, match=r"\(1e-5, the default, or 1/n_samples\*\*1.1 = 1.4e-02\)"):
        DPStandardScaler(bounds=bounds, delta=0.05).fit(X[:50])


def test_a_large_delta_is_calibrated_and_warned_not_refused():
    # delta=0.5 used to fail with "noise_multiplier must be ... nan"; the plan is met (the PLD
    # certifies it) and the fit says that such a delta protects nothing.
    from skdp.bnn import DPSEPRegressor

    X = np.random.default_rng(0).normal(size=(200, 2))
    model = DPSEPRegressor(feature_bounds=(-3.0, 3.0), target_bounds=(-3.0, 3.0), delta=0.5)
    with pytest.warns(UserWarning, match=r"delta=0.5 is not below 1/n_samples \(n_samples=200, public\)"):
        model.fit(X, X[:, 0])
    assert model.privacy_spent_.epsilon <= 1.0 and model.privacy_spent_.delta <= 0.5


def test_delta_under_add_remove_warns_only_from_a_declared_size():
    from skdp.base import _public_n_samples
    from skdp.generative import DPGenerativeMixture

    X = np.zeros((50, 3))
    assert _public_n_samples(DPGenerativeMixture(2), X) is None  # the size is private
    assert _public_n_samples(DPGenerativeMixture(2, n_samples=40), X) == 40
    assert _public_n_samples(DPGaussianMixture(2), X) == 50
