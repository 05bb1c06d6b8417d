"""Pieces of a search's trial loop: the number of trials, the search's seed, the released results.

Pure functions of public quantities and the search's own randomness
(Papernot & Steinke 2022, Definition 1 for the number of trials).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..privacy.accountants.repeat_select import truncated_negative_binomial_gamma
from ..privacy.events import POISSON


def draw_n_trials(rng, shape, mean):
    """The number of trials ``K``: Poisson, or truncated negative binomial of ``shape`` (``eta``) and ``mean``."""
    mean = float(mean)
    if shape == POISSON:
        return int(rng.poisson(mean))
    if mean == 1:
        return 1
    gamma = truncated_negative_binomial_gamma(shape, mean)
    if shape == 0:
        # Logarithmic: P[K = k] proportional to (1 - gamma)^k / k.
        return int(rng.logseries(1.0 - gamma))
    while True:
        # Negative binomial conditioned on K >= 1 (Definition 1).
        k = int(rng.negative_binomial(shape, gamma))
        if k >= 1:
            return k


def seed_entropy(random_state):
    """The entropy of the search's streams (splits, picks, the trials' seeds) from ``random_state``."""
    if random_state is None:
        return None
    if isinstance(random_state, numbers.Integral):
        return int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**63))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(2**31))
    raise ValueError(
        f"random_state must be None, an int, a RandomState or a Generator, got {random_state!r}."
    )


def search_results(candidates, best_index, best_score):
    """``cv_results_``: every candidate (public), the selected one's noisy score only."""
    scores = np.full(len(candidates), np.nan)
    if not math.isnan(best_score):
        scores[best_index] = best_score
    results = {"params": [dict(p) for p in candidates], "selected_score": scores}
    for name in sorted({k for p in candidates for k in p}):
        column = np.ma.masked_all(len(candidates), dtype=object)
        for i, p in enumerate(candidates):
            if name in p:
                column[i] = p[name]
        results[f"param_{name}"] = column
    results["selected"] = np.arange(len(candidates)) == best_index
    return results
