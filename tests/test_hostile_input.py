"""Hostile and malformed input, and persistence, across every estimator.

Nothing may crash with an unhelpful traceback or return NaN parameters:
bad input gets a ValueError/TypeError, good input a finite model.  Every
estimator of ``tests/_registry.py`` is tested, and the pickle suite
round-trips every mode of each (``MODE_CASES``).
"""

import io
import pickle

import joblib
import numpy as np
import pytest
import scipy.sparse as sp
from _registry import CASES, MODE_CASES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from sklearn.base import clone

pytestmark = pytest.mark.filterwarnings("ignore::skdp.PrivacyLeakWarning")
NAMES = sorted(CASES)


def _fitted_arrays(model):
    """Float arrays among the fitted attributes (lists of arrays, like ``coefs_``, unpacked).

    The weights of fitted torch modules (the DP-SGD nets' ``module_``, the
    generative mixture's ``generators_``) are parameters too.
    """
    for name, value in vars(model).items():
        if not name.endswith("_") or name.startswith("_"):
            continue
        parts = value if isinstance(value, list) else [value]
        for i, part in enumerate(parts):
            if isinstance(part, (np.ndarray, float)) and np.asarray(part).dtype.kind == "f":
                yield f"{name}[{i}]", np.asarray(part)
            elif hasattr(part, "named_parameters"):  # a torch module
                for pname, p in part.named_parameters():
                    yield f"{name}[{i}].{pname}", p.detach().cpu().numpy()


def _fit(case, X, params=None):
    est = clone(case.estimator).set_params(**(params or {}))
    return est.fit(X, **case.fit_kwargs(X))


def _valid(case, n=40, d=3, seed=0):
    return case.make_X(np.random.default_rng(seed), n, d)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_are_rejected(name, bad):
    case = CASES[name]
    X = _valid(case).astype(float)
    X[3, 1] = bad
    with pytest.raises(ValueError, match="NaN|infinity|finite"):
        _fit(case, X)


@pytest.mark.parametrize("name", NAMES)
def test_empty_and_wrong_dtype(name):
    case = CASES[name]
    with pytest.raises(ValueError):
        _fit(case, np.empty((0, 3)))
    X = _valid(case).astype(str).astype(object)
    X[0, 0] = "a"
    with pytest.raises((ValueError, TypeError)):
        _fit(case, X)


@pytest.mark.parametrize("name", NAMES)
def test_sparse_input_is_accepted_or_refused_clearly(name):
    case = CASES[name]
    X = sp.csr_matrix(_valid(case))
    try:
        model = _fit(case, X)
    except (TypeError, ValueError) as exc:
        assert "sparse" in str(exc).lower()
    else:
        for attr, arr in _fitted_arrays(model):
            assert np.all(np.isfinite(arr)), attr


@pytest.mark.parametrize("name", NAMES)
def test_dataframe_keeps_feature_names(name):
    pd = pytest.importorskip("pandas")
    case = CASES[name]
    X = pd.DataFrame(_valid(case), columns=["a", "b", "c"])
    model = _fit(case, X)
    assert list(model.feature_names_in_) == ["a", "b", "c"]


@pytest.mark.parametrize("name", [n for n in NAMES if CASES[n].continuous])
def test_huge_magnitudes_give_finite_models(name):
    case = CASES[name]
    X = _valid(case).astype(float)
    X[0] = 1e300
    X[1] = -1e300
    for attr, arr in _fitted_arrays(_fit(case, X)):
        assert np.all(np.isfinite(arr)), attr


@pytest.mark.parametrize(("name", "case", "params"), MODE_CASES, ids=[c[0] for c in MODE_CASES])
def test_pickle_and_joblib_round_trip(name, case, params):
    X = _valid(case, n=60)
    model = _fit(case, X, params)
    expected = getattr(model, case.output)(X)
    for restored in (pickle.loads(pickle.dumps(model)), _joblib_round_trip(model)):
        assert restored.privacy_spent_ == model.privacy_spent_
        np.testing.assert_array_equal(getattr(restored, case.output)(X), expected)


def _joblib_round_trip(model):
    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    buffer.seek(0)
    return joblib.load(buffer)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    X=hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=12),
        elements=st.floats(allow_nan=True, allow_infinity=True, width=64),
    )
)
def test_arbitrary_arrays_never_crash_or_give_nan(name, X):
    case = CASES[name]
    try:
        model = _fit(case, X)
    except (ValueError, TypeError) as exc:
        assert str(exc)  # a message, not a bare error
        return
    for attr, arr in _fitted_arrays(model):
        assert np.all(np.isfinite(arr)), attr
