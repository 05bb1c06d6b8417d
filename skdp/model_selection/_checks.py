"""Checks of a search's parameters and of its candidates' budgets (public: nothing is reserved yet).

Functions of the search's parameters (scikit-learn's pure-function style):
:class:`~skdp.model_selection.DPGridSearchCV` calls them from its template's
``_check_params`` step.
"""

from __future__ import annotations

import math
import numbers

from ..privacy import BudgetAccountant
from ..privacy.events import POISSON

#: ``n_trials_distribution`` names and their ``eta`` (Papernot & Steinke's Definition 1).
DISTRIBUTIONS = {"poisson": POISSON, "geometric": 1.0, "logarithmic": 0.0}


def _check_positive(name, value, upper=None, closed=False):
    ok = isinstance(value, numbers.Real) and math.isfinite(value) and value > 0
    if ok and upper is not None:
        ok = value <= upper if closed else value < upper
    if not ok:
        bound = "" if upper is None else f" and {'<=' if closed else '<'} {upper}"
        raise ValueError(f"{name} must be a finite number > 0{bound}, got {value!r}.")


def check_search_params(search):
    """Refuse a bad parameter of ``search`` with an error naming it (never the data)."""
    _check_positive("epsilon", search.epsilon)
    if not (isinstance(search.delta, numbers.Real) and 0 < search.delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {search.delta!r}.")
    if not (isinstance(search.n_trials_mean, numbers.Real) and 1 <= search.n_trials_mean < math.inf):
        raise ValueError(f"n_trials_mean must be a finite number >= 1, got {search.n_trials_mean!r}.")
    shape = search.n_trials_distribution
    if isinstance(shape, str):
        if shape not in DISTRIBUTIONS:
            raise ValueError(
                f"n_trials_distribution must be one of {tuple(DISTRIBUTIONS)} or a number >= 0, "
                f"got {shape!r}."
            )
    elif not (isinstance(shape, numbers.Real) and 0 <= shape < math.inf):
        raise ValueError(f"n_trials_distribution must be a name or a number >= 0, got {shape!r}.")
    _check_positive("validation_fraction", search.validation_fraction, 1)
    _check_positive("score_share", search.score_share, 1)
    if search.refit:
        _check_positive("refit_share", search.refit_share, 1)
    if search.accountant is not None and not isinstance(search.accountant, BudgetAccountant):
        raise TypeError(
            f"accountant must be a BudgetAccountant or None, got {type(search.accountant).__name__}."
        )
    params = search.estimator.get_params() if hasattr(search.estimator, "get_params") else {}
    if not {"epsilon", "delta", "accountant", "random_state"} <= params.keys():
        raise TypeError(
            "estimator must be an skdp DP estimator (with epsilon, delta, accountant and random_state "
            "parameters)."
        )
    if not (isinstance(search.verbose, numbers.Integral) and search.verbose >= 0):
        raise ValueError(f"verbose must be an integer >= 0, got {search.verbose!r}.")
    if search.scoring not in (None, "accuracy", "neg_squared_error", "score_samples") and not callable(
        search.scoring
    ):
        raise ValueError(
            "scoring must be None, 'accuracy', 'neg_squared_error', 'score_samples' or a callable, "
            f"got {search.scoring!r}."
        )
    if search._scoring() == "score_samples" and not hasattr(search.estimator, "score_samples"):
        # Refused before the reservation: the trials would fail after it.
        raise ValueError(
            f"scoring={search.scoring!r} scores each held-out row by the estimator's score_samples, which "
            f"{type(search.estimator).__name__} does not have: pass scoring='accuracy', "
            "'neg_squared_error' or a callable scoring(estimator, X, y) returning one score per row."
        )
    if search._scoring() != "accuracy":
        bounds = search.score_bounds
        ok = (
            isinstance(bounds, tuple | list)
            and len(bounds) == 2
            and all(isinstance(b, numbers.Real) and math.isfinite(b) for b in bounds)
            and bounds[0] < bounds[1]
        )
        if not ok:
            raise ValueError(
                "score_bounds must be a declared (low, high) pair of finite numbers with low < high "
                f"for scoring={search.scoring!r}: per-row scores are clipped to it, and its width over "
                "the number of validation rows is the score's sensitivity."
            )


def check_budget_grid(candidates):
    """Refuse a grid whose ``epsilon``/``delta`` values are not budgets; return the grid's epsilon scale.

    The scale is the largest ``epsilon`` the grid lists (``None`` if it lists
    none): a candidate's trials are fitted at their share of it.
    """
    for params in candidates:
        for name in ("accountant", "random_state"):
            if name in params:
                raise ValueError(
                    f"{name} cannot be a grid dimension: the search sets it on every fit (the search's "
                    f"own {name} is used)."
                )
        eps = params.get("epsilon", 1.0)
        if not (isinstance(eps, numbers.Real) and math.isfinite(eps) and eps > 0):
            raise ValueError(f"The grid's epsilon values must be finite numbers > 0, got {eps!r}.")
        dlt = params.get("delta", 0.0)
        if not (isinstance(dlt, numbers.Real) and 0 <= dlt < 1):
            raise ValueError(f"The grid's delta values must be in [0, 1), got {dlt!r}.")
    grid = [float(p["epsilon"]) for p in candidates if "epsilon" in p]
    return max(grid) if grid else None
