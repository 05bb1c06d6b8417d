"""The audit suite: neighbouring datasets and statistics of the real estimators.

Each case fits an estimator on a small dataset and on a worst-case
neighbour under the relation its ``privacy_spent_`` refers to (replace-one,
or add/remove for DP-SGD): one extreme record at the clip bound or the
declared bounds, placed so that the released statistic moves by its full
sensitivity.  The fitted model is reduced to the scalar an attacker would
look at (a noisy count or sum, a posterior sample, a prediction at the
canary).

Only the real estimators are audited from here.  The deliberately broken
variants (wrong mechanisms whose ledgers still claim the original epsilon,
which the audit must flag to show that it can fail) are not part of the
installed package: they live with the tests, in a file of cases that
``python -m skdp.audit --cases FILE`` adds to these (:func:`load_cases`).

Two DPBetaBernoulli cases audit more than the noise.  The replay attacker
reads the pickle of a released model and, if it finds a generator there,
steps it back to the fit's Laplace draws and recovers the exact counts.  The
refusal case makes a raised error an observable outcome: an OPS prior that
can make the tempered posterior improper must be refused on every dataset
alike.

Cases not covered, and why: DPNaiveBayesHMM with several states (the
released counts are per cell; the naive-Bayes case audits the same Laplace
release with one cell), and any estimator whose fit takes more than ~50 ms on
tiny data.  Audits of Gaussian mechanisms at (epsilon, 1e-5) have little
power with a few thousand runs: a threshold test cannot see the 1e-5 tail,
so their epsilon lower bounds sit well below the claim even when tight.
The composite case fits a :class:`~skdp.pipeline.DPPipeline` with an OPS
step and lets the attacker draw further posterior samples from the fitted
step before the claim is read: the pipeline owns those releases and its
``privacy_spent_`` must grow with them.
When every release of a fit is a plain Gaussian mechanism the audit also
tests the Gaussian DP (``mu``) its ledger implies, which it can measure in
the bulk of the distributions.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import numbers
import pickle
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.base import clone

from ..bayes import DPBetaBernoulli, DPNaiveBayesHMM, _beta_bernoulli
from ..bnn import DPSEPRegressor
from ..cluster import DPKernelKMeans, DPKMeans
from ..cluster import _base as _cluster_base
from ..generative import DPGenerativeMixture
from ..mixture import DPGaussianMixture
from ..privacy import PrivacySpent
from ._runner import AuditCase, audit


def _binary_neighbours(n=20, k=7, d=1):
    X = np.zeros((n, d), dtype=int)
    X[:k] = 1
    X_neighbour = X.copy()
    X_neighbour[k] = 1  # a failure becomes a success in every feature
    return X, X_neighbour


def _count_gap(model):
    counts = model.noisy_counts_
    return float(np.sum(counts[:, 1] - counts[:, 0]))


class _patched:
    def __init__(self, module, name, value):
        self.module, self.name, self.value = module, name, value

    def __enter__(self):
        self.old = getattr(self.module, self.name)
        setattr(self.module, self.name, self.value)

    def __exit__(self, *exc):
        setattr(self.module, self.name, self.old)


def _generators_in(obj):
    """Every numpy Generator reachable from ``obj`` (attributes, containers)."""
    seen, stack = set(), [obj]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, np.random.Generator):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        elif hasattr(item, "__dict__") and not isinstance(item, type):
            stack.append(vars(item))


def _replayed_counts(model, n_records, max_steps=2000):
    """The replay attack: exact counts from a generator left in a released model, or None.

    The attacker holds the pickle of a model released with
    ``random_state=None`` (the audit's int seeds stand in for fresh entropy
    and are forgotten here).  PCG64 runs backwards (``advance`` by
    ``2**128 - k``): for each guess ``k`` of the draws made since the Laplace
    noise, the attacker regenerates that noise (public scale ``2 d /
    epsilon``) and subtracts it; the right guess is the one whose counts are
    integers adding up to the public ``n_records``.  Only counts the
    projection at 0 left unchanged are used.
    """
    model.random_state = None
    released = pickle.loads(pickle.dumps(model))
    noisy = released.noisy_counts_
    d = noisy.shape[0]
    if getattr(released, "count_release", "paper") == "one":
        return _replayed_success_counts(released, noisy, d, n_records, max_steps)
    scale = _beta_bernoulli.COUNT_L1_SENSITIVITY * d / released.epsilon
    kept = noisy > 0
    for gen in _generators_in(released):
        bits = gen.bit_generator
        if not hasattr(bits, "advance"):
            continue
        end = bits.state
        for k in range(2 * d, 2 * d + max_steps):
            bits.state = end
            bits.advance(2**128 - k)
            counts = noisy - gen.laplace(0.0, scale, size=(d, 2))
            exact = np.round(counts)
            if not np.all(np.abs(counts - exact)[kept] < 1e-6):
                continue
            n_plus = np.where(kept[:, 1], exact[:, 1], n_records - exact[:, 0])
            if np.all(kept.any(axis=1)) and np.all((n_plus >= 0) & (n_plus <= n_records)):
                return np.column_stack([n_records - n_plus, n_plus])
    return None


def _replayed_success_counts(released, noisy, d, n_records, max_steps):
    """The replay attack on the one-count release: ``d`` Laplace draws of scale ``d / epsilon``.

    Only the success counts strictly inside ``(0, n)`` (left unchanged by the
    release's clipping) are checked for integrality.
    """
    scale = _beta_bernoulli.SUCCESS_COUNT_L1_SENSITIVITY * d / released.epsilon
    plus = noisy[:, 1]
    kept = (plus > 0) & (plus < n_records)
    if not kept.any():
        return None
    for gen in _generators_in(released):
        bits = gen.bit_generator
        if not hasattr(bits, "advance"):
            continue
        end = bits.state
        for k in range(d, d + max_steps):
            bits.state = end
            bits.advance(2**128 - k)
            counts = plus - gen.laplace(0.0, scale, size=d)
            exact = np.round(counts)
            if np.all(np.abs(counts - exact)[kept] < 1e-6) and np.all((exact >= 0) & (exact <= n_records)):
                n_plus = np.where(kept, exact, plus)
                return np.column_stack([n_records - n_plus, n_plus])
    return None


def _replay_attack(model):
    # The exact count of successes when the pickle lets the attacker replay
    # the noise; otherwise the best test without it (the noisy count gap).
    counts = _replayed_counts(model, n_records=20)
    return _count_gap(model) if counts is None else float(counts[0, 1])


# An OPS configuration whose tempered posterior can be improper: the prior
# 0.5 is below 1 - T = 0.59 (T = 2 log(0.6 / 0.4) / 2).  Deciding that on the
# counts raised on all zeros and released on the neighbour with one 1.
_OPS_IMPROPER = dict(epsilon=2.0, mechanism="ops", truncation=0.4, prior=(0.5, 0.5))


@contextlib.contextmanager
def _refusal_observed():
    """The attacker sees whether ``fit`` raised: a refused fit has no sample.

    A refusal claims the requested budget (the most it can have charged), so
    the audit compares the outcome against the estimator's claim.
    """
    fit = DPBetaBernoulli.fit

    def observed_fit(self, X, y=None):
        try:
            return fit(self, X, y)
        except ValueError:
            self.privacy_spent_ = PrivacySpent(float(self.epsilon), 0.0)
            return self

    with _patched(DPBetaBernoulli, "fit", observed_fit):
        yield


def _refused_or_sample(model):
    return float(model.posterior_sample_[0]) if hasattr(model, "posterior_sample_") else -1.0


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


@contextlib.contextmanager
def _no_blas_limits():
    # DP Lloyd limits BLAS to one thread with threadpoolctl, whose library
    # scan costs ~35 ms per fit: 5x the whole fit on 20 rows.  The limit
    # changes no output (tests/audit/test_audit.py checks), so the cluster cases
    # skip it to afford thousands of refits.
    with _patched(_cluster_base, "threadpool_limits", lambda **kwargs: contextlib.nullcontext()):
        yield


def _one_cluster_canary(n=200):
    """One feature, one cluster: ``n`` rows at 0 and the changed row at ``-C`` or ``+C``.

    ``C = data_norm = 1``.  With a single cluster the sizes are the same on
    both datasets and the sum moves by ``2 C``: the sums' full sensitivity,
    in L1 and L2 alike (one feature).  Many rows at 0 keep the noisy size far
    from 0, so the centre is never re-seeded or projected onto the ball and
    ``centre * noisy size`` is exactly the released noisy sum.
    """
    X = np.zeros((n + 1, 1))
    X[0] = -1.0
    X_neighbour = X.copy()
    X_neighbour[0] = 1.0
    return X, X_neighbour


def _dp_lloyd(mechanism, epsilon):
    # Size noise 10x the sums' puts most of the budget on the sums (91% of a
    # Laplace budget, 99% of a Gaussian one), which the statistic reads; the
    # accounting covers both releases either way.
    return DPKMeans(
        n_clusters=1,
        epsilon=epsilon,
        delta=1e-5 if mechanism == "gaussian" else 0.0,
        data_norm=1.0,
        # The declared ball alone (at this n * epsilon bounds="auto" would
        # release a box first, taking budget from the sums the statistic reads).
        bounds=None,
        max_iter=1,
        init=np.zeros((1, 1)),
        mechanism=mechanism,
        composition="rdp" if mechanism == "gaussian" else "basic",
        count_noise_weight=10.0,
    )


def _dp_em_means():
    # One spherical component on the one-cluster canary: the canary moves the
    # first-moment sum by its full sensitivity 2 and leaves the second moment
    # (x^2 = 1 either way) unchanged.  The budget is put on the means (98%)
    # so that the statistic, the released mean, carries almost all of the
    # ledger's Gaussian DP and the audit of mu has power.
    return DPGaussianMixture(
        n_components=1,
        covariance_type="spherical",
        max_iter=1,
        data_norm=1.0,
        epsilon=2.0,
        delta=1e-5,
        mean_mechanism="gaussian",
        budget_split=(0.01, 0.98, 0.01),
    )


def _noisy_sum(model):
    return float(model.cluster_centers_[0, 0] * model.noisy_counts_[0])


def _kernel_kmeans_neighbours():
    # Two tight groups far apart for the RBF kernel (gamma=1), public centres
    # on them; the canary moves a record of group 0 to the far point (0, 6),
    # out of its cluster: size 0 drops by one, size 1 grows by one.
    X = np.zeros((20, 2))
    X[10:] = [3.0, 3.0]
    X_neighbour = X.copy()
    X_neighbour[0] = [3.0, 3.0]
    return X, X_neighbour


def _categorical_neighbours(n=20, k=7):
    # One binary feature, ``k`` records in category 1; the neighbour moves a
    # category-0 record to category 1 (L1 change 2 of the count vector, the
    # released array's full sensitivity).
    X = np.zeros((n, 1), dtype=int)
    X[:k] = 1
    X_neighbour = X.copy()
    X_neighbour[k] = 1
    return X, X_neighbour


def _hmm(mechanism, **params):
    # Naive Bayes (one state): the corpus-wide counts are the release; two
    # Gibbs sweeps keep a fit at ~10 ms.  Categories are declared (public).
    return DPNaiveBayesHMM(
        n_components=1, mechanism=mechanism, epsilon=1.0, n_iter=2, burn_in=1, categories=[[0, 1]], **params
    )


def _sep_neighbours():
    # Linear DP-SEP on declared bounds [-1, 1]: twenty records (x, -x; 0) on a
    # grid; the neighbour replaces the first, (-1, 1; 0), by the opposite
    # corner with the extreme target, (1, 1; 1).
    x = np.linspace(-1.0, 1.0, 20)
    X = np.column_stack([x, -x])
    y = np.zeros(20)
    X_neighbour, y_neighbour = X.copy(), y.copy()
    X_neighbour[0], y_neighbour[0] = [1.0, 1.0], 1.0
    return X, X_neighbour, y, y_neighbour


def _sep():
    return DPSEPRegressor(
        hidden_layer_sizes=(),
        n_epochs=1,
        epsilon=1.0,
        delta=1e-5,
        feature_bounds=(-1.0, 1.0),
        target_bounds=(-1.0, 1.0),
    )


def _predict_at_canary(model):
    return float(model.predict(np.array([[1.0, 1.0]]))[0])


CASES = [
    AuditCase(
        "DPBetaBernoulli(laplace, eps=1)",
        lambda: DPBetaBernoulli(epsilon=1.0),
        _binary_neighbours,
        _count_gap,
        test_runs=500,
    ),
    AuditCase(
        "DPBetaBernoulli(ops, eps=1, a0=0.2)",
        lambda: DPBetaBernoulli(epsilon=1.0, mechanism="ops", truncation=0.2),
        lambda: _binary_neighbours(n=10, k=0),
        lambda m: float(m.posterior_sample_[0]),
        test_runs=300,
    ),
    AuditCase(
        "DPKMeans(eps=1, delta=1e-5, 1 iteration)",
        lambda: DPKMeans(n_clusters=2, epsilon=1.0, delta=1e-5, data_norm=1.0, max_iter=1, init=_KMEANS_INIT),
        _kmeans_neighbours,
        lambda m: float(m.cluster_centers_[0, 0] + m.cluster_centers_[0, 1]),
        patch=_no_blas_limits,
        max_runs=2000,
        test_runs=200,
    ),
    AuditCase(
        "DPGaussianMixture(gaussian, eps=2, 1 component, 1 iter, canary -C -> +C)",
        _dp_em_means,
        _one_cluster_canary,
        lambda m: float(m.means_[0, 0]),
        max_runs=3000,
        test_runs=1500,
    ),
    AuditCase(
        "DPBetaBernoulli: noise replayed from the pickle (laplace, eps=1)",
        lambda: DPBetaBernoulli(epsilon=1.0),
        _binary_neighbours,
        _replay_attack,
        test_runs=300,
    ),
    AuditCase(
        "DPBetaBernoulli: OPS refusal seen (eps=2, a0=0.4, prior 0.5)",
        lambda: DPBetaBernoulli(**_OPS_IMPROPER),
        lambda: _binary_neighbours(n=10, k=0),
        _refused_or_sample,
        patch=_refusal_observed,
        test_runs=200,
    ),
    AuditCase(
        "DPNaiveBayesHMM(laplace, eps=1, naive Bayes)",
        lambda: _hmm("laplace"),
        _categorical_neighbours,
        lambda m: float(m.noisy_counts_[0, 0, 1] - m.noisy_counts_[0, 0, 0]),
        max_runs=5000,
        test_runs=300,
    ),
    AuditCase(
        "DPNaiveBayesHMM(ops, eps=1, a0=0.2, naive Bayes)",
        lambda: _hmm("ops", truncation=0.2),
        lambda: _categorical_neighbours(n=10, k=0),
        lambda m: float(m.emissionprob_[0][0, 1]),
        max_runs=3000,
        test_runs=200,
    ),
    AuditCase(
        "DPKMeans(gaussian, eps=2, delta=1e-5, 1 cluster, canary -C -> +C)",
        lambda: _dp_lloyd("gaussian", 2.0),
        _one_cluster_canary,
        _noisy_sum,
        patch=_no_blas_limits,
        max_runs=5000,
        test_runs=4000,
    ),
    AuditCase(
        "DPKMeans(laplace, eps=1, 1 cluster, canary -C -> +C)",
        lambda: _dp_lloyd("laplace", 1.0),
        _one_cluster_canary,
        _noisy_sum,
        patch=_no_blas_limits,
        max_runs=5000,
        test_runs=300,
    ),
    AuditCase(
        "DPKernelKMeans(eps=1, delta=1e-5, RFF d=20, 1 iteration)",
        lambda: DPKernelKMeans(
            n_clusters=2,
            epsilon=1.0,
            delta=1e-5,
            gamma=1.0,
            n_components=20,
            max_iter=1,
            init=np.array([[0.0, 0.0], [3.0, 3.0]]),
            count_noise_weight=1.0,
        ),
        _kernel_kmeans_neighbours,
        lambda m: float(m.noisy_counts_[1] - m.noisy_counts_[0]),
        patch=_no_blas_limits,
        max_runs=3000,
        test_runs=200,
    ),
    AuditCase(
        "DPSEPRegressor(linear, 1 epoch, eps=1, delta=1e-5)",
        _sep,
        _sep_neighbours,
        _predict_at_canary,
        max_runs=500,
        test_runs=100,
    ),
]


def _torch_available():
    return importlib.util.find_spec("torch") is not None and importlib.util.find_spec("skorch") is not None


@functools.cache
def _zero_linear_module():
    import torch

    class ZeroLinear(torch.nn.Module):
        """Softmax regression on two features started at zero weights (public, data-independent)."""

        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(2, 2)
            torch.nn.init.zeros_(self.linear.weight)
            torch.nn.init.zeros_(self.linear.bias)

        def forward(self, x):
            return torch.softmax(self.linear(x), dim=-1)

    return ZeroLinear


def _dpsgd_net():
    import torch

    from ..nn import DPNeuralNetClassifier

    torch.set_num_threads(1)
    return DPNeuralNetClassifier(
        _zero_linear_module(), epsilon=1.0, delta=1e-5, clip_norm=1.0, max_epochs=1, batch_size=10, lr=1.0,
        verbose=0, classes=[0, 1],
    )  # fmt: skip


def _dpsgd_neighbours():
    # Add/remove (DP-SGD's relation): twenty rows at x = 0 (no gradient on
    # the weights), and the neighbour adds the canary x = (5, 5), label 1,
    # whose gradient is clipped to the full bound C = clip_norm.
    X = np.zeros((20, 2), dtype=np.float32)
    y = np.tile([0, 1], 10).astype(np.int64)
    X_neighbour = np.vstack([X, np.full((1, 2), 5.0, dtype=np.float32)])
    y_neighbour = np.append(y, 1)
    return X, X_neighbour, y, y_neighbour


def _canary_logit_gap(model):
    weight = model.module_.linear.weight.detach().cpu().numpy()
    return float((weight[1] - weight[0]).sum())


if _torch_available():
    CASES.append(
        AuditCase(
            "DPNeuralNetClassifier(eps=1, delta=1e-5, add/remove canary)",
            _dpsgd_net,
            _dpsgd_neighbours,
            _canary_logit_gap,
            max_runs=500,
            test_runs=100,
        )
    )


def run_case(case, n_runs=None, random_state=0):
    """Audit one case with ``n_runs`` fits per dataset (default: ``case.max_runs`` or 10,000).

    Returns
    -------
    result : AuditResult
    """
    n_runs = n_runs or case.max_runs or 10_000
    data = case.make_data()
    X, X_neighbour = data[:2]
    y, y_neighbour = data[2:] if len(data) == 4 else (None, None)
    with case.patch() if case.patch else contextlib.nullcontext():
        return audit(
            case.make_estimator(),
            X,
            X_neighbour,
            case.statistic,
            n_runs=n_runs,
            y=y,
            y_neighbour=y_neighbour,
            random_state=random_state,
        )


# -- DP-SGD's plan under add/remove (issue 18): N and N + 1 rows --------------


@functools.cache
def _net_on_x_alone():
    # The audit refits from X alone (tests/audit/test_audit.py checks broken cases
    # with fit(X)); the target is 0 for every record, a per-record constant,
    # so the neighbours still differ by exactly one record.
    from ..nn import DPNeuralNetRegressor

    class DPNeuralNetRegressorOnX(DPNeuralNetRegressor):
        def fit(self, X, y=None, **fit_params):
            y = np.zeros(len(X), dtype=np.float32) if y is None else y
            return super().fit(X, y, **fit_params)

    return DPNeuralNetRegressorOnX


def _dpsgd_plan_net():
    import torch

    torch.set_num_threads(1)
    # epsilon=1: the count's noise is 37 (COUNT_NOISE_FACTOR times the
    # one-release multiplier); the two steps are calibrated to the rest.
    return _net_on_x_alone()(
        torch.nn.Linear(1, 1), epsilon=1.0, delta=1e-5, max_epochs=1, batch_size=10, verbose=0,
        n_samples="auto",
    )  # fmt: skip


def _dpsgd_plan_neighbours():
    # Add/remove: twenty rows, and the neighbour adds a twenty-first (target
    # 0 everywhere).  The rows' values do not matter to the statistic: the
    # plan can only see N.
    X, y = np.zeros((20, 1), dtype=np.float32), np.zeros(20, dtype=np.float32)
    return X, np.vstack([X, X[:1]]), y, np.append(y, np.float32(0.0))


def _plan_statistic(model):
    return float(model.sampling_rate_)


if _torch_available():
    CASES.append(
        AuditCase(
            "DPNeuralNetRegressor(plan, n_samples='auto', eps=1, add/remove N -> N + 1)",
            _dpsgd_plan_net,
            _dpsgd_plan_neighbours,
            _plan_statistic,
            max_runs=1000,
            test_runs=200,
        )
    )


# -- A nested estimator keeps its seed (issue 18, break 2) ---------------------
#
# DPGenerativeMixture fits a DPKernelKMeans inside its fit.  It once built it
# with random_state=int(rng.integers(2**32)) and kept it in clusterer_: the
# pickle then handed anyone the seed of every noise draw of the clustering.
# The attacker below knows every record but the canary (the audit's model of
# the adversary), reads the nested seed if there is one, refits the
# clusterer on the dataset without the canary and compares its noisy counts
# with the released ones: equal means "no canary", with certainty.


def _generative_mixture():
    import torch

    torch.set_num_threads(1)
    # partition="kmeans": the nested DPKernelKMeans whose seed the attack looks for (the
    # marginals generator's "auto" partition is DP-EM's latent classes, with no clusterer).
    return DPGenerativeMixture(
        n_clusters=2, partition="kmeans", hidden_units=4, latent_dim=2, n_components=20, kmeans_iter=1,
        n_epochs=1, batch_size=8, epsilon=1.0, delta=1e-5,
    )  # fmt: skip


@functools.cache
def _generative_neighbours():
    # Add/remove: twenty binary records; the neighbour adds a canary (all ones).
    X = (np.arange(20 * 4).reshape(20, 4) % 3 == 0).astype(np.float64)
    return X, np.vstack([X, np.ones((1, 4))])


def _nested_seed_replay(model):
    """1.0 if the replayed clustering says the canary was in, 0.0 if not; else the count gap."""
    released = pickle.loads(pickle.dumps(model))
    clusterer = released.clusterer_
    seed = clusterer.get_params()["random_state"]
    if seed is None or isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        # No seed to replay: the best test left is the noisy total count.
        return float(np.sum(clusterer.noisy_counts_))
    replay = clone(clusterer).set_params(random_state=int(seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        replay.fit(_generative_neighbours()[0])
    return 0.0 if np.array_equal(replay.noisy_counts_, clusterer.noisy_counts_) else 1.0


if _torch_available():
    CASES.append(
        AuditCase(
            "DPGenerativeMixture: nested seed replayed from the pickle (eps=1, add/remove canary)",
            _generative_mixture,
            _generative_neighbours,
            _nested_seed_replay,
            max_runs=400,
            test_runs=60,
        )
    )


# -- composites: a pipeline's post-fit releases are charged to the pipeline ----

#: Further OPS samples the composite case's statistic draws after the fit.
_FURTHER_DRAWS = 300


def _ops_pipeline():
    from ..pipeline import DPPipeline

    return DPPipeline([("bb", DPBetaBernoulli(mechanism="ops", truncation=0.2))], epsilon=1.0)


def _mean_of_further_draws(model):
    """The attacker draws further posterior samples from the released pipeline's step and averages them.

    The audit reads the pipeline's ``privacy_spent_`` after this statistic,
    so the claim covers the draws when the pipeline charges them.
    """
    draws = model[-1].sample_posterior(_FURTHER_DRAWS)[:, 0]
    return float(np.mean(np.r_[draws, model[-1].posterior_sample_[0]]))


CASES.append(
    AuditCase(
        f"DPPipeline(OPS step, eps=1, a0=0.2) + {_FURTHER_DRAWS} further draws",
        _ops_pipeline,
        lambda: _binary_neighbours(n=10, k=0),
        _mean_of_further_draws,
        max_runs=1000,
        test_runs=150,
    )
)


def load_cases(path):
    """The cases (``CASES``, a list of :class:`AuditCase`) defined by the Python file at ``path``.

    How cases defined outside the package are audited (``python -m skdp.audit
    --cases FILE``): the deliberately broken variants of the test suite, or
    an audit of one's own estimator.  The file is imported as a module, under
    its own name unless another module holds that name; importing it twice
    returns the same module (a case's patch finds its own globals).

    Raises
    ------
    ValueError
        If the file has no ``CASES`` list of :class:`AuditCase`.
    """
    path = Path(path).resolve()
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) and Path(module.__file__).resolve() == path:
            break
    else:
        name = path.stem if path.stem not in sys.modules else f"{path.stem}_{abs(hash(str(path))):x}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or not path.is_file():
            raise ValueError(f"cases must name a Python file, got {str(path)!r}.")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # registered first: dataclasses and patches look the module up
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    cases = getattr(module, "CASES", None)
    if not isinstance(cases, list) or not all(isinstance(case, AuditCase) for case in cases):
        raise ValueError(f"{path.name} must define CASES, a list of skdp.audit.AuditCase.")
    return list(cases)
