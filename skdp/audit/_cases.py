"""The audit suite: neighbouring datasets, statistics and broken variants.

Each case fits an estimator on a small dataset and on a worst-case
replace-one neighbour (an extreme record), and reduces the fitted model to
the scalar an attacker would look at.  The broken variants are deliberately
wrong mechanisms whose ledgers still claim the original epsilon: the audit
must flag them, which shows that it can fail.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..bayes import DPBetaBernoulli, _beta_bernoulli
from ..cluster import DPKMeans
from ..mixture import DPGaussianMixture
from ..privacy import LaplaceMechanism


@dataclass(frozen=True)
class AuditCase:
    name: str
    make_estimator: Callable
    make_data: Callable  # () -> (X, X_neighbour)
    statistic: Callable
    broken: bool = False  # True: the audit is expected to flag it
    patch: Callable | None = None  # context manager factory installing a broken variant
    max_runs: int | None = None  # cap for estimators too slow to refit 10,000 times


def _binary_neighbours(n=20, k=7, d=1):
    X = np.zeros((n, d), dtype=int)
    X[:k] = 1
    X_neighbour = X.copy()
    X_neighbour[k] = 1  # a failure becomes a success in every feature
    return X, X_neighbour


def _count_gap(model):
    counts = model.noisy_counts_
    return float(np.sum(counts[:, 1] - counts[:, 0]))


class _HalvedNoiseLaplace(LaplaceMechanism):
    # Records the claimed event, draws half the noise.
    def _noise(self, rng, shape):
        return rng.laplace(0.0, self.scale / 2, size=shape)


class _UnsplitBudgetLaplace(LaplaceMechanism):
    # Forgets to split epsilon over the releases (a sensitivity d times too small).
    @classmethod
    def from_epsilon(cls, epsilon, sensitivity, neighbouring="replace_one", n_uses=1):
        mech = super().from_epsilon(epsilon, sensitivity, neighbouring, n_uses)
        mech.scale /= n_uses
        mech._claimed = n_uses
        return mech

    def event(self, count=1):
        # Claim the split-budget multiplier the caller asked for.
        event = super().event(count)
        return type(event)(
            count=count,
            neighbouring=self.neighbouring,
            noise_multiplier=self.noise_multiplier * self._claimed,
        )


class _patched:
    def __init__(self, module, name, value):
        self.module, self.name, self.value = module, name, value

    def __enter__(self):
        self.old = getattr(self.module, self.name)
        setattr(self.module, self.name, self.value)

    def __exit__(self, *exc):
        setattr(self.module, self.name, self.old)


def _kmeans_neighbours():
    # Public initial centres; the canary replaces a central row by a row on the
    # clip sphere (data_norm = 1), pulling the first cluster's sum the most.
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.3, 0.3, size=(20, 2)) + [0.5, 0.5]
    X[10:] -= 1.0
    X_neighbour = X.copy()
    X_neighbour[0] = [-0.7071, -0.7071]
    return X, X_neighbour


_KMEANS_INIT = np.array([[0.5, 0.5], [-0.5, -0.5]])

CASES = [
    AuditCase(
        "DPBetaBernoulli(laplace, eps=1)",
        lambda: DPBetaBernoulli(epsilon=1.0),
        _binary_neighbours,
        _count_gap,
    ),
    AuditCase(
        "DPBetaBernoulli(ops, eps=1, a0=0.2)",
        lambda: DPBetaBernoulli(epsilon=1.0, mechanism="ops", truncation=0.2),
        lambda: _binary_neighbours(n=10, k=0),
        lambda m: float(m.posterior_sample_[0]),
    ),
    AuditCase(
        "DPKMeans(eps=1, delta=1e-5, 1 iteration)",
        lambda: DPKMeans(n_clusters=2, epsilon=1.0, delta=1e-5, data_norm=1.0, max_iter=1, init=_KMEANS_INIT),
        _kmeans_neighbours,
        lambda m: float(m.cluster_centers_[0, 0] + m.cluster_centers_[0, 1]),
        max_runs=2000,
    ),
    AuditCase(
        "DPGaussianMixture(eps=1, delta=1e-5, 1 component, 1 iter)",
        lambda: DPGaussianMixture(
            n_components=1, max_iter=1, data_norm=1.0, epsilon=1.0, delta=1e-5, mean_mechanism="gaussian"
        ),
        lambda: _kmeans_neighbours(),
        lambda m: float(m.means_[0].sum()),
        max_runs=3000,
    ),
    AuditCase(
        "BROKEN DPBetaBernoulli: Laplace noise halved",
        lambda: DPBetaBernoulli(epsilon=1.0),
        _binary_neighbours,
        _count_gap,
        broken=True,
        patch=lambda: _patched(_beta_bernoulli, "LaplaceMechanism", _HalvedNoiseLaplace),
    ),
    AuditCase(
        "BROKEN DPBetaBernoulli: budget not split over 3 features",
        lambda: DPBetaBernoulli(epsilon=1.0),
        lambda: _binary_neighbours(d=3),
        _count_gap,
        broken=True,
        patch=lambda: _patched(_beta_bernoulli, "LaplaceMechanism", _UnsplitBudgetLaplace),
    ),
]
