"""scikit-learn's estimator checks on every instance the registry lists.

The instances, the checks each must fail (with the reason and the exception it
must raise) and the checks run at another comparison tolerance are declared
per instance in ``tests/_registry.py``.  Every expected failure is strict and
keyed by instance and check: an unexpected pass, or another exception, fails
the test, and so does an expected failure naming a check that no longer runs
on its instance.
"""

import functools
import importlib
import pathlib
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
import sklearn
from _registry import CASES, COMPOSITES
from packaging.version import Version
from sklearn.base import BaseEstimator, clone
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import estimator_checks_generator

import skdp
from skdp.exceptions import PrivacyLeakWarning

SKLEARN_VERSION = Version(sklearn.__version__)

CHECKED = [checked for case in CASES.values() for checked in case.checked]


def _check_name(check):
    """The check function's name (``check_clustering``), the key of the registry's tables."""
    while isinstance(check, functools.partial):
        check = check.func
    return check.__name__


def _check_id(check):
    """The name with the keywords that make a variant (``check_clustering(readonly_memmap=True)``)."""
    keywords = check.keywords if isinstance(check, functools.partial) else {}
    suffix = ",".join(f"{k}={v}" for k, v in keywords.items())
    return _check_name(check) + (f"({suffix})" if suffix else "")


def _applies(expected):
    return expected.sklearn_below is None or SKLEARN_VERSION < Version(expected.sklearn_below)


def _params():
    for checked in CHECKED:
        for estimator, check in estimator_checks_generator(checked.estimator, legacy=True, mark=None):
            name = _check_name(check)
            marks = [pytest.mark.slow] if checked.slow else []
            expected = checked.expected_failures.get(name)
            if expected is not None and _applies(expected):
                marks.append(pytest.mark.xfail(strict=True, raises=expected.raises, reason=expected.reason))
            tolerance = checked.tolerances.get(name)
            yield pytest.param(
                estimator, check, tolerance, id=f"{checked.id}-{_check_id(check)}", marks=marks
            )


def _compare_at(tolerance, original):
    """scikit-learn's array comparison at the registry's tolerance, for one check."""

    def assert_allclose_dense_sparse(x, y, rtol=1e-07, atol=1e-9, err_msg=""):
        original(x, y, rtol=max(rtol, tolerance.rtol), atol=max(atol, tolerance.atol), err_msg=err_msg)

    return assert_allclose_dense_sparse


@pytest.mark.parametrize(("estimator", "check", "tolerance"), list(_params()))
def test_sklearn_compatible_estimator(estimator, check, tolerance, monkeypatch):
    if tolerance is not None:
        original = estimator_checks.assert_allclose_dense_sparse
        monkeypatch.setattr(
            estimator_checks, "assert_allclose_dense_sparse", _compare_at(tolerance, original)
        )
    check(estimator)


@pytest.mark.parametrize("checked", CHECKED, ids=[c.id for c in CHECKED])
def test_expected_failures_name_checks_that_run(checked):
    """A stale entry (a check renamed or removed by scikit-learn, or a typo) is an error, not a silent no-op."""
    run = {_check_name(check) for _, check in estimator_checks_generator(checked.estimator, legacy=True)}
    stale = (set(checked.expected_failures) | set(checked.tolerances)) - run
    assert not stale, f"{checked.id}: no such check runs on it: {sorted(stale)}"
    assert not set(checked.expected_failures) & set(checked.tolerances), "a check either fails or is compared"


def test_registry_lists_every_public_estimator():
    """Every public estimator has a registry entry: a single estimator with at least one
    instance the checks run on, or a composite (pipeline, search) in ``COMPOSITES``.

    Without torch and skorch the nets are absent from both sides.
    """
    public = set()
    for name in skdp.__all__:
        try:
            obj = getattr(skdp, name)
        except ImportError:  # a DP-SGD net without torch or skorch
            continue
        if isinstance(obj, type) and issubclass(obj, BaseEstimator):
            public.add(obj)
    composites = {type(composite.estimator()) for composite in COMPOSITES.values()}
    registered = {type(case.estimator) for case in CASES.values()} | composites
    assert registered == public, (
        f"missing from tests/_registry.py: {sorted(c.__name__ for c in public - registered)}; "
        f"not public: {sorted(c.__name__ for c in registered - public)}"
    )
    for name, case in CASES.items():
        assert case.checked, f"{name}: no instance for scikit-learn's checks"
        for checked in case.checked:
            assert isinstance(checked.estimator, type(case.estimator)), checked.id
    ids = [c.id for c in CHECKED]
    assert len(ids) == len(set(ids)), "instance ids must be unique"


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_keeps_its_promises(name):
    """Each public composite: a guarantee within its request, clone and pickle round trips."""
    composite = COMPOSITES[name]
    estimator = composite.estimator()
    assert clone(estimator).get_params(deep=False).keys() == estimator.get_params(deep=False).keys()
    X = composite.make_X(np.random.default_rng(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        estimator.fit(X)
    spent = estimator.privacy_spent_
    assert 0 < spent.epsilon <= estimator.epsilon * (1 + 1e-9)
    assert spent.delta <= estimator.delta * (1 + 1e-9)
    output = getattr(estimator, composite.output)(X)
    restored = pickle.loads(pickle.dumps(estimator))
    np.testing.assert_array_equal(getattr(restored, composite.output)(X), output)
    assert restored.privacy_spent_ == spent


# --- finding things: ``from skdp import ...`` and a light ``import skdp`` ----------------------

#: Subpackage that defines each public name (an import from ``skdp`` must give that very object).
_HOME = {
    "BudgetAccountant": "skdp.privacy",
    "BudgetExceededError": "skdp.exceptions",
    "BudgetRemaining": "skdp.privacy",
    "DPBetaBernoulli": "skdp.bayes",
    "DPGaussianMixture": "skdp.mixture",
    "DPGenerativeMixture": "skdp.generative",
    "DPGridSearchCV": "skdp.model_selection",
    "DPKMeans": "skdp.cluster",
    "DPKernelKMeans": "skdp.cluster",
    "DPMinMaxScaler": "skdp.preprocessing",
    "DPNaiveBayesHMM": "skdp.bayes",
    "DPNeuralNetClassifier": "skdp.nn",
    "DPNeuralNetRegressor": "skdp.nn",
    "DPPCA": "skdp.preprocessing",
    "DPPipeline": "skdp.pipeline",
    "DPRandomizedSearchCV": "skdp.model_selection",
    "DPSEPRegressor": "skdp.bnn",
    "DPStandardScaler": "skdp.preprocessing",
    "PrivacyLeakWarning": "skdp.exceptions",
    "PrivacySpent": "skdp.privacy",
    "SQLiteBudgetAccountant": "skdp.privacy",
    "config_context": "skdp",
    "get_config": "skdp",
    "set_config": "skdp",
    "make_pipeline": "skdp.pipeline",
}


def test_every_public_name_has_a_home():
    assert set(skdp.__all__) - {"__version__"} == set(_HOME)


def _run(code):
    """Run ``code`` in a fresh interpreter (imports are process state) from the repository root."""
    root = pathlib.Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("name", sorted(_HOME))
def test_public_name_imports_from_skdp(name):
    """``from skdp import NAME`` gives the object its subpackage defines (the nets need torch)."""
    if _HOME[name] == "skdp.nn":
        pytest.importorskip("torch")
        pytest.importorskip("skorch")
    obj = getattr(skdp, name)
    assert obj is getattr(importlib.import_module(_HOME[name]), name)
    assert name in dir(skdp)


def test_import_skdp_is_light():
    """``import skdp`` loads neither scikit-learn, NumPy, SciPy nor torch: each comes with the first
    name that needs it (the module's ``__getattr__``), so the import itself takes milliseconds."""
    heavy = ("numpy", "scipy", "sklearn", "pandas", "torch", "skorch", "dask", "dp_accounting", "joblib")
    loaded = _run(
        f"import sys, skdp; print(sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r})))"
    )
    assert loaded.strip() == "[]", loaded
    # A name resolves on first access, and is then a plain module attribute.
    out = _run(
        "import sys, skdp; from skdp import DPPipeline, SQLiteBudgetAccountant; "
        "print('torch' in sys.modules, 'DPPipeline' in vars(skdp), skdp.privacy.__name__)"
    )
    assert out.split() == ["False", "True", "skdp.privacy"]


def test_unknown_name_raises_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'DPLinearRegression'"):
        skdp.DPLinearRegression  # noqa: B018
    with pytest.raises(ImportError):
        exec("from skdp import DPLinearRegression", {})


def test_all_lists_the_lazy_names_and_the_eager_ones():
    eager = {
        "BudgetExceededError",
        "PrivacyLeakWarning",
        "__version__",
        "config_context",
        "get_config",
        "set_config",
    }
    assert set(skdp.__all__) == set(skdp._LAZY) | eager
    assert skdp.__all__ == sorted(skdp.__all__)
