"""Empirical lower bounds on epsilon from a distinguishing test.

Given a scalar statistic of many outputs of a mechanism run on a dataset D and
on a neighbouring dataset D', any threshold test "statistic > t" gives an
(epsilon, delta)-DP mechanism no power beyond ``P[M(D') in S] <= e^eps P[M(D) in S] + delta``.
Estimating both probabilities with Clopper-Pearson intervals turns the test
into a high-confidence *lower bound* on the epsilon the mechanism really has
(Jagielski, Ullman & Oprea 2020; Nasr et al. 2021).  A lower bound above a
claimed epsilon refutes the claim; one below it is consistent with it.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def clopper_pearson(k, n, alpha):
    """Two-sided ``1 - alpha`` Clopper-Pearson interval for a binomial proportion."""
    lo = 0.0 if k == 0 else stats.beta.ppf(alpha / 2, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(1 - alpha / 2, k + 1, n - k)
    return float(lo), float(hi)


def _test_rates(scores, scores_neighbour, alpha, n_thresholds):
    """Confidence bounds ``(q_lo, p_hi)`` of every threshold test, both directions.

    The runs are split in two (even and odd positions, independent draws):
    the thresholds ``t`` are quantiles of the pooled first halves, and the
    rates are counted on the second halves only, so every Clopper-Pearson
    interval is computed for a threshold fixed independently of the runs it
    counts (choosing thresholds on the counted runs would void the
    intervals' coverage).  For each threshold and each event ``S`` in
    {above t, at or below t}, with ``(p, q)`` either ordering of the two
    samples: ``q_lo`` is a lower confidence bound on ``P[M(q) in S]`` and
    ``p_hi`` an upper one on ``P[M(p) in S]``.  The level ``alpha`` is split
    (Bonferroni) over the ``4 n_thresholds`` tests, so all the bounds hold
    together with probability at least ``1 - alpha``.
    """
    a = np.asarray(scores, dtype=float)
    b = np.asarray(scores_neighbour, dtype=float)
    if a.ndim != 1 or b.ndim != 1 or a.size < 2 or b.size < 2:
        raise ValueError("scores and scores_neighbour must be 1-D arrays of at least 2 runs each.")
    thresholds = np.quantile(np.concatenate([a[::2], b[::2]]), np.linspace(0.01, 0.99, n_thresholds))
    a, b = a[1::2], b[1::2]
    level = alpha / (4 * n_thresholds)
    for t in thresholds:
        for p_side, q_side in ((a, b), (b, a)):
            for above in (True, False):
                k_p = int(np.sum(p_side > t) if above else np.sum(p_side <= t))
                k_q = int(np.sum(q_side > t) if above else np.sum(q_side <= t))
                q_lo = clopper_pearson(k_q, q_side.size, 2 * level)[0]
                p_hi = clopper_pearson(k_p, p_side.size, 2 * level)[1]
                yield q_lo, p_hi


def epsilon_lower_bound(scores, scores_neighbour, delta=0.0, alpha=0.05, n_thresholds=50):
    """High-confidence lower bound on epsilon from two samples of a statistic.

    Parameters
    ----------
    scores, scores_neighbour : array-like of shape (n_runs,)
        The statistic of independent runs on D and on D' (at least 2 each:
        half of the runs choose the thresholds, the other half are counted).
    delta : float, default=0.0
        The delta of the claim being audited.
    alpha : float, default=0.05
        The bound holds with probability at least ``1 - alpha``; the level is
        split (Bonferroni) over the thresholds and the four events tested at
        each (above/below, both directions).
    n_thresholds : int, default=50
        Thresholds tried, at quantiles of the pooled scores.

    Returns
    -------
    epsilon : float
        Lower bound (0 when the test finds nothing).
    """
    best = 0.0
    for q_lo, p_hi in _test_rates(scores, scores_neighbour, alpha, n_thresholds):
        # P[M(q) in S] <= e^eps P[M(p) in S] + delta, so
        # eps >= log((P_q - delta) / P_p) with P_q low and P_p high.
        if q_lo - delta > 0 and p_hi > 0:
            best = max(best, math.log((q_lo - delta) / p_hi))
    return best


def mu_lower_bound(scores, scores_neighbour, alpha=0.05, n_thresholds=50):
    """High-confidence lower bound on the mu of Gaussian DP from two samples of a statistic.

    A ``mu``-GDP mechanism (Dong, Roth & Su 2022) admits no test whose power
    exceeds ``Phi(Phi^-1(level) + mu)``: for every event ``S``,
    ``P[M(q) in S] <= Phi(Phi^-1(P[M(p) in S]) + mu)``, hence
    ``mu >= Phi^-1(P_q) - Phi^-1(P_p)``, bounded below with the confidence
    bounds of :func:`epsilon_lower_bound`'s tests.  Unlike a bound on epsilon
    at ``delta = 1e-5``, which needs events of probability far below
    ``1 / n_runs``, this reads the bulk of the distributions: a few thousand
    runs measure ``mu`` to a few hundredths.

    Parameters
    ----------
    scores, scores_neighbour : array-like of shape (n_runs,)
    alpha : float, default=0.05
    n_thresholds : int, default=50

    Returns
    -------
    mu : float
        Lower bound (0 when the test finds nothing).
    """
    best = 0.0
    for q_lo, p_hi in _test_rates(scores, scores_neighbour, alpha, n_thresholds):
        if q_lo > 0 and p_hi < 1:
            best = max(best, float(stats.norm.ppf(q_lo) - stats.norm.ppf(p_hi)))
    return best
