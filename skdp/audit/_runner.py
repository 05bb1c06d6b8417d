"""Auditing a fitted estimator's claim by refitting on neighbouring datasets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from ._bounds import epsilon_lower_bound, mu_lower_bound


@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`~skdp.audit.audit`.

    Attributes
    ----------
    claimed_epsilon, claimed_delta : float
        The estimator's ``privacy_spent_`` (the largest over the runs).
    epsilon_lower_bound : float
        Empirical lower bound, holding with probability ``1 - alpha``.
    n_runs : int
        Fits per dataset.
    claimed_mu : float or None
        When every release of the fit is a plain Gaussian mechanism, the
        ``mu`` of the Gaussian DP its ledger implies
        (:meth:`~skdp.privacy.PrivacyLedger.gaussian_dp_mu`): the exact
        tradeoff curve behind ``privacy_spent_``.  None otherwise.
    mu_lower_bound : float or None
        Empirical lower bound on ``mu`` (:func:`mu_lower_bound`), when
        ``claimed_mu`` is known.
    """

    claimed_epsilon: float
    claimed_delta: float
    epsilon_lower_bound: float
    n_runs: int
    claimed_mu: float | None = None
    mu_lower_bound: float | None = None

    @property
    def violated(self):
        """True when the audit refutes the claim (its epsilon, or the GDP of its Gaussian ledger)."""
        if self.epsilon_lower_bound > self.claimed_epsilon:
            return True
        return self.claimed_mu is not None and self.mu_lower_bound > self.claimed_mu

    @property
    def verdict(self):
        return "VIOLATION" if self.violated else "consistent"


@dataclass(frozen=True)
class AuditCase:
    """One audit: an estimator, two neighbouring datasets and the statistic an attacker reads.

    What ``python -m skdp.audit`` runs; a file given to ``--cases`` defines
    ``CASES``, a list of them.  ``make_data()`` returns ``(X, X_neighbour)``
    or ``(X, X_neighbour, y, y_neighbour)``; ``patch()``, when given, is a
    context manager the fits run in (a broken variant installs itself
    there).  ``broken=True`` marks a case the audit must flag.
    """

    name: str
    make_estimator: Callable
    make_data: Callable  # () -> (X, X_neighbour) or (X, X_neighbour, y, y_neighbour)
    statistic: Callable
    broken: bool = False  # True: the audit is expected to flag it
    patch: Callable | None = None  # context manager factory the fits run in
    max_runs: int | None = None  # cap for estimators too slow to refit 10,000 times
    test_runs: int = 300  # fits per dataset in the test suite (broken cases: enough to flag)

    @property
    def estimator(self):
        """Display name: the audited estimator's class, which every case name starts with."""
        return self.name.removeprefix("BROKEN ").split("(")[0].split(":")[0].strip()


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

    When every release of the fit is a plain Gaussian mechanism, its ledger
    claims more than ``(epsilon, delta)``: the exact tradeoff curve of
    ``mu``-GDP (:meth:`~skdp.privacy.PrivacyLedger.gaussian_dp_mu`).  The
    same tests then also bound ``mu`` from below (:func:`mu_lower_bound`),
    which has power where a threshold test at ``delta = 1e-5`` has none: a
    Gaussian release with half its recorded noise is refuted in a few
    thousand runs.  ``alpha`` is then split evenly between the two bounds.

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
    mus = []
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
            ledger = getattr(model, "privacy_ledger_", None)
            mus.append(None if ledger is None else ledger.gaussian_dp_mu())
    delta = claimed[1]
    a, b = np.array(scores[0]), np.array(scores[1])
    if mus and all(mu is not None for mu in mus):
        claimed_mu = max(mus)
        lower = epsilon_lower_bound(a, b, delta=delta, alpha=alpha / 2)
        mu_lower = mu_lower_bound(a, b, alpha=alpha / 2)
        return AuditResult(
            float(claimed[0]), float(delta), float(lower), int(n_runs), float(claimed_mu), float(mu_lower)
        )
    lower = epsilon_lower_bound(a, b, delta=delta, alpha=alpha)
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
