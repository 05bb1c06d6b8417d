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


def epsilon_lower_bound(scores, scores_neighbour, delta=0.0, alpha=0.05, n_thresholds=50):
    """High-confidence lower bound on epsilon from two samples of a statistic.

    Parameters
    ----------
    scores, scores_neighbour : array-like of shape (n_runs,)
        The statistic of independent runs on D and on D'.
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
    a = np.asarray(scores, dtype=float)
    b = np.asarray(scores_neighbour, dtype=float)
    if a.ndim != 1 or b.ndim != 1 or a.size == 0 or b.size == 0:
        raise ValueError("scores and scores_neighbour must be non-empty 1-D arrays.")
    thresholds = np.quantile(np.concatenate([a, b]), np.linspace(0.01, 0.99, n_thresholds))
    level = alpha / (4 * n_thresholds)
    best = 0.0
    for t in thresholds:
        for p_side, q_side in ((a, b), (b, a)):
            for above in (True, False):
                k_p = int(np.sum(p_side > t) if above else np.sum(p_side <= t))
                k_q = int(np.sum(q_side > t) if above else np.sum(q_side <= t))
                # P[M(q) in S] <= e^eps P[M(p) in S] + delta, so
                # eps >= log((P_q - delta) / P_p) with P_q low and P_p high.
                q_lo = clopper_pearson(k_q, q_side.size, 2 * level)[0]
                p_hi = clopper_pearson(k_p, p_side.size, 2 * level)[1]
                if q_lo - delta > 0 and p_hi > 0:
                    best = max(best, math.log((q_lo - delta) / p_hi))
    return best
