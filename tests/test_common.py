"""scikit-learn's estimator checks on every instance the registry lists.

The instances, the checks each must fail (with the reason and the exception it
must raise) and the checks run at another comparison tolerance are declared
per instance in ``tests/_registry.py``.  Every expected failure is strict and
keyed by instance and check: an unexpected pass, or another exception, fails
the test, and so does an expected failure naming a check that no longer runs
on its instance.
"""

import functools

import pytest
import sklearn
from _registry import CASES
from packaging.version import Version
from sklearn.base import BaseEstimator
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import estimator_checks_generator

import skdp

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
    """Every public estimator has a registry entry and at least one instance the checks run on.

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
    registered = {type(case.estimator) for case in CASES.values()}
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
