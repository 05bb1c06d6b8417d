"""The audit's deliberately broken variants: cases the audit must flag, to show that it can fail.

Each is a wrong mechanism or a leak whose ledger still claims what the real
estimator claims: noise halved, a budget not split, a sensitivity taken as
``C`` instead of ``2C``, a generator or a nested seed kept on the model, a
refusal decided on the counts, a plan read off ``len(X)``, post-fit draws
charged to nobody.  They patch the package while they run, so they live
here, outside the installed package; ``tests/audit/test_audit.py`` runs them, and

    python -m skdp.audit --cases tests/_audit_broken.py

adds them to the real estimators' cases (:mod:`skdp.audit._cases`), whose
neighbours and statistics they share.
"""

from __future__ import annotations

import contextlib
import importlib
import sys

import numpy as np

from skdp.audit import AuditCase
from skdp.audit._cases import (
    _FURTHER_DRAWS,
    _OPS_IMPROPER,
    _binary_neighbours,
    _count_gap,
    _dp_lloyd,
    _dpsgd_plan_neighbours,
    _dpsgd_plan_net,
    _generative_mixture,
    _generative_neighbours,
    _mean_of_further_draws,
    _nested_seed_replay,
    _no_blas_limits,
    _noisy_sum,
    _one_cluster_canary,
    _ops_pipeline,
    _patched,
    _plan_statistic,
    _refusal_observed,
    _refused_or_sample,
    _replay_attack,
    _torch_available,
)
from skdp.bayes import DPBetaBernoulli, _beta_bernoulli
from skdp.cluster import _base as _cluster_base
from skdp.generative import DPGenerativeMixture
from skdp.privacy import ExponentialMechanism, GaussianMechanism, LaplaceMechanism


class _HalvedNoiseLaplace(LaplaceMechanism):
    # Records the claimed event, draws half the noise.
    def _noise(self, rng, shape):
        return rng.laplace(0.0, self.scale / 2, size=shape)


class _HalvedNoiseGaussian(GaussianMechanism):
    # Records the claimed event, draws half the noise.
    def _noise(self, rng, shape):
        return rng.normal(0.0, self.scale / 2, size=shape)


class _UnsplitBudgetLaplace(LaplaceMechanism):
    # Forgets to split epsilon over the releases (a sensitivity d times too small).
    @classmethod
    def from_epsilon(cls, epsilon, sensitivity, neighbouring="replace_one", n_uses=1):
        mech = super().from_epsilon(epsilon, sensitivity, neighbouring, n_uses)
        mech.scale /= n_uses
        mech._claimed = n_uses
        return mech

    def event(self, count=1, *, secure_noise=False):
        # Claim the split-budget multiplier the caller asked for.
        event = super().event(count, secure_noise=secure_noise)
        return type(event)(
            count=count,
            neighbouring=self.neighbouring,
            noise_multiplier=self.noise_multiplier * self._claimed,
        )


class _KeepsItsGenerator(DPBetaBernoulli):
    # BROKEN: keeps its fit's noise generator on the model, as DPBetaBernoulli
    # once did (issue 18).  The ledger is untouched: only an attacker who reads
    # the pickle can tell.
    def _begin_private_fit(self, *args, **kwargs):
        ledger, rng = super()._begin_private_fit(*args, **kwargs)
        self._rng = rng
        return ledger, rng


def _keeps_its_generator():
    # The cases build ``DPBetaBernoulli`` through this module's global name.
    return _patched(sys.modules[__name__], "DPBetaBernoulli", _KeepsItsGenerator)


_ORIGINAL_DRAW_OPS = DPBetaBernoulli._draw_ops


def _ops_mechanism_unchecked(self, prior, n_features):
    return ExponentialMechanism(
        self.epsilon, _beta_bernoulli.ops_log_likelihood_sensitivity(self.truncation, n_features)
    )


def _draw_ops_checking_the_counts(self, temperature, rng, size=None):
    # The old check: the shapes are functions of the counts.
    a, b, _ = self._ops_posterior
    if np.any(a <= 0) or np.any(b <= 0):
        raise ValueError("The tempered OPS posterior is improper.")
    return _ORIGINAL_DRAW_OPS(self, temperature, rng, size)


@contextlib.contextmanager
def _improper_check_on_the_counts():
    with (
        _refusal_observed(),
        _patched(DPBetaBernoulli, "_ops_mechanism", _ops_mechanism_unchecked),
        _patched(DPBetaBernoulli, "_draw_ops", _draw_ops_checking_the_counts),
    ):
        yield


def _halved_sum_sensitivity(bound, norm, n_features):
    # The classic slip: a replaced record "moves the sum by at most C".
    return _ORIGINAL_SUM_SENSITIVITY(bound, norm, n_features) / 2


_ORIGINAL_SUM_SENSITIVITY = _cluster_base.sum_sensitivity


@contextlib.contextmanager
def _broken_sum_sensitivity():
    with _no_blas_limits(), _patched(_cluster_base, "sum_sensitivity", _halved_sum_sensitivity):
        yield


@contextlib.contextmanager
def _halved_gaussian_noise():
    mechanisms = {**_cluster_base._MECHANISMS, "gaussian": (_HalvedNoiseGaussian, 2)}
    with _no_blas_limits(), _patched(_cluster_base, "_MECHANISMS", mechanisms):
        yield


@contextlib.contextmanager
def _plan_from_len_x():
    # The bug: q and the steps read off len(X).  The ledger still records the
    # count's event, so the claim is the real estimator's.
    from skdp.nn import _net

    def exact_size(n_samples, noise_std, rng, ledger):
        ledger.record(_net.dataset_size_event(noise_std))
        return float(n_samples)

    with _patched(_net, "release_dataset_size", exact_size):
        yield


_CLUSTER = DPGenerativeMixture._cluster


def _cluster_keeping_its_seed(self, X, plan, rng, ledger):
    # BROKEN: the nested clusterer is seeded with an int drawn from the fit's
    # generator and keeps it, as DPGenerativeMixture once did.
    seed = int(rng.integers(2**32))
    with _patched(_generative_clustering_module(), "child_generator", lambda _rng: seed):
        out = _CLUSTER(self, X, plan, rng, ledger)
    out[3].random_state = seed
    return out


def _keeps_nested_seed():
    return _patched(DPGenerativeMixture, "_cluster", _cluster_keeping_its_seed)


def _generative_clustering_module():
    return importlib.import_module("skdp.generative._clustering")


def _draws_charged_to_nobody():
    # BROKEN: the composite ignores the releases of the steps it owns, as
    # DPPipeline once did: its privacy_spent_ stays at the fit's.
    from skdp.pipeline import PostFitOwnerMixin

    return _patched(PostFitOwnerMixin, "_charge_after_fit", lambda self, events, label: None)


CASES = [
    AuditCase(
        "BROKEN DPBetaBernoulli: Laplace noise halved",
        lambda: DPBetaBernoulli(epsilon=1.0),
        _binary_neighbours,
        _count_gap,
        broken=True,
        patch=lambda: _patched(_beta_bernoulli, "LaplaceMechanism", _HalvedNoiseLaplace),
        test_runs=6000,
    ),
    AuditCase(
        "BROKEN DPBetaBernoulli: budget not split over 3 features",
        lambda: DPBetaBernoulli(epsilon=1.0),
        lambda: _binary_neighbours(d=3),
        _count_gap,
        broken=True,
        patch=lambda: _patched(_beta_bernoulli, "LaplaceMechanism", _UnsplitBudgetLaplace),
        test_runs=3000,
    ),
    AuditCase(
        "BROKEN DPBetaBernoulli: keeps its fit's generator",
        lambda: DPBetaBernoulli(epsilon=1.0),
        _binary_neighbours,
        _replay_attack,
        broken=True,
        patch=_keeps_its_generator,
        test_runs=200,
    ),
    AuditCase(
        "BROKEN DPBetaBernoulli(ops): improper check reads the counts",
        lambda: DPBetaBernoulli(**_OPS_IMPROPER),
        lambda: _binary_neighbours(n=10, k=0),
        _refused_or_sample,
        broken=True,
        patch=_improper_check_on_the_counts,
        test_runs=200,
    ),
    AuditCase(
        "BROKEN DPKMeans(gaussian): Gaussian noise halved",
        lambda: _dp_lloyd("gaussian", 2.0),
        _one_cluster_canary,
        _noisy_sum,
        broken=True,
        patch=_halved_gaussian_noise,
        max_runs=5000,
        test_runs=2000,
    ),
    AuditCase(
        "BROKEN DPKMeans(gaussian): sum sensitivity C, not 2C",
        lambda: _dp_lloyd("gaussian", 2.0),
        _one_cluster_canary,
        _noisy_sum,
        broken=True,
        patch=_broken_sum_sensitivity,
        max_runs=5000,
        test_runs=2000,
    ),
    AuditCase(
        "BROKEN DPKMeans(laplace): sum sensitivity C, not 2C",
        lambda: _dp_lloyd("laplace", 1.0),
        _one_cluster_canary,
        _noisy_sum,
        broken=True,
        patch=_broken_sum_sensitivity,
        max_runs=5000,
        test_runs=3000,
    ),
    AuditCase(
        f"BROKEN DPPipeline: {_FURTHER_DRAWS} further draws of its OPS step charged to nobody",
        _ops_pipeline,
        lambda: _binary_neighbours(n=10, k=0),
        _mean_of_further_draws,
        broken=True,
        patch=_draws_charged_to_nobody,
        max_runs=1000,
        test_runs=150,
    ),
]

if _torch_available():
    CASES += [
        AuditCase(
            "BROKEN DPNeuralNetRegressor: plan read off len(X)",
            _dpsgd_plan_net,
            _dpsgd_plan_neighbours,
            _plan_statistic,
            broken=True,
            patch=_plan_from_len_x,
            max_runs=1000,
            test_runs=200,
        ),
        AuditCase(
            "BROKEN DPGenerativeMixture: the clusterer keeps its seed",
            _generative_mixture,
            _generative_neighbours,
            _nested_seed_replay,
            broken=True,
            patch=_keeps_nested_seed,
            max_runs=400,
            test_runs=80,
        ),
    ]
