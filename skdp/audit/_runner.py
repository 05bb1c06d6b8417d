"""Auditing a fitted estimator's claim by refitting on neighbouring datasets."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from ._bounds import epsilon_lower_bound


@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit`.

    Attributes
    ----------
    claimed_epsilon, claimed_delta : float
        The estimator's ``privacy_spent_`` (the largest over the runs).
    epsilon_lower_bound : float
        Empirical lower bound, holding with probability ``1 - alpha``.
    n_runs : int
        Fits per dataset.
    """

    claimed_epsilon: float
    claimed_delta: float
    epsilon_lower_bound: float
    n_runs: int

    @property
    def violated(self):
        """True when the audit refutes the claim."""
        return self.epsilon_lower_bound > self.claimed_epsilon

    @property
    def verdict(self):
        return "VIOLATION" if self.violated else "consistent"


def audit(
    estimator,
    X,
    X_neighbour,
    statistic,
    n_runs=1000,
    fit_params=None,
    alpha=0.05,
    random_state=0,
    y=None,
    y_neighbour=None,
):
    """Empirical lower bound on the epsilon of ``estimator`` (Jagielski et al. 2020).

    Fits ``clone(estimator)`` ``n_runs`` times on ``X`` and on its neighbour
    ``X_neighbour`` with distinct seeds, reduces each fitted model to a scalar
    with ``statistic``, and bounds epsilon from below with a Clopper-Pearson
    threshold test (:func:`epsilon_lower_bound`).  The bound holds with
    probability at least ``1 - alpha``; a bound above the estimator's
    ``privacy_spent_`` refutes the claim.

    Parameters
    ----------
    estimator : DP estimator
        Must take ``random_state``.
    X, X_neighbour : array-like
        Neighbouring datasets under the relation the estimator claims
        (replace-one: same size, one record changed; see
        :func:`replace_one_neighbour`).
    statistic : callable
        ``statistic(fitted_estimator) -> float``; the audit is as strong as
        the statistic is informative about the changed record.
    n_runs : int, default=1000
    fit_params : dict, default=None
        Passed to ``fit``.
    alpha : float, default=0.05
    random_state : int, default=0
        Seeds the runs (run ``i`` on ``X`` uses ``random_state + i``).
    y, y_neighbour : array-like, default=None
        Targets of ``X`` and ``X_neighbour`` for supervised estimators (the
        changed record may differ in its target too); ``y_neighbour``
        defaults to ``y``.

    Returns
    -------
    result : AuditResult
    """
    fit_params = fit_params or {}
    scores = [], []
    claimed = (0.0, 0.0)
    if y_neighbour is None:
        y_neighbour = y
    targets = (y, y_neighbour)
    for which, data in enumerate((X, X_neighbour)):
        args = (data,) if targets[which] is None else (data, targets[which])
        for i in range(n_runs):
            seed = random_state + which * n_runs + i
            model = clone(estimator).set_params(random_state=seed).fit(*args, **fit_params)
            scores[which].append(float(statistic(model)))
            claimed = max(claimed, tuple(model.privacy_spent_))
    delta = claimed[1]
    lower = epsilon_lower_bound(np.array(scores[0]), np.array(scores[1]), delta=delta, alpha=alpha)
    return AuditResult(float(claimed[0]), float(delta), float(lower), int(n_runs))


def replace_one_neighbour(X, index=0, record=None):
    """Replace-one neighbour of ``X``: row ``index`` replaced by ``record``.

    Without ``record`` the canary is the row's reflection through the data's
    centre, pushed to the boundary of the data's box: an extreme record at
    the bound, the worst case for sum-based statistics.
    """
    X = np.array(X, dtype=float, copy=True)
    if record is None:
        lo, hi = X.min(axis=0), X.max(axis=0)
        row = X[index]
        record = np.where(row - lo < hi - row, hi, lo)
    X[index] = record
    return X
