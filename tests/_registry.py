"""Every public skdp estimator, with data it accepts: shared by the cross-estimator suites.

Add each new estimator here (and to ``test_common.EXPECTED_FAILED_CHECKS``
if scikit-learn's checks need exceptions).
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from skdp.bayes import DPBetaBernoulli, DPNaiveBayesHMM
from skdp.bnn import DPSEPRegressor
from skdp.cluster import DPKernelKMeans, DPKMeans
from skdp.mixture import DPGaussianMixture


@dataclass
class Case:
    estimator: object
    make_X: Callable  # (rng, n_samples, n_features) -> valid X
    fit_kwargs: Callable = field(default=lambda X: {})
    #: Name of a method whose output must survive pickling unchanged.
    output: str = "score"
    #: True if arbitrary real values are valid input (then huge values must be clipped, not break).
    continuous: bool = True


def _binary(rng, n, d):
    return rng.binomial(1, 0.4, size=(n, d))


def _categorical(rng, n, d):
    return rng.integers(0, 3, size=(n, d))


def _normal(rng, n, d):
    return rng.normal(size=(n, d))


CASES = {
    "DPBetaBernoulli(laplace)": Case(DPBetaBernoulli(random_state=0), _binary, continuous=False),
    "DPBetaBernoulli(ops)": Case(DPBetaBernoulli(mechanism="ops", random_state=0), _binary, continuous=False),
    "DPNaiveBayesHMM(laplace)": Case(
        DPNaiveBayesHMM(n_iter=10, burn_in=5, categories=[[0, 1, 2]] * 3, random_state=0),
        _categorical,
        fit_kwargs=lambda X: {"timesteps": np.arange(len(X)) // 5},
        continuous=False,
    ),
    "DPGaussianMixture": Case(DPGaussianMixture(n_components=2, data_norm=3.0, random_state=0), _normal),
    "DPKMeans": Case(DPKMeans(n_clusters=3, data_norm=3.0, random_state=0), _normal, output="predict"),
    "DPKernelKMeans": Case(DPKernelKMeans(n_clusters=3, random_state=0), _normal, output="predict"),
    "DPSEPRegressor": Case(
        DPSEPRegressor(
            hidden_layer_sizes=(4,), n_epochs=1, feature_bounds=(-3, 3), target_bounds=(-3, 3), random_state=0
        ),
        _normal,
        fit_kwargs=lambda X: {"y": np.linspace(-1.0, 1.0, len(X))},
        output="predict",
    ),
}


def _neural_cases():
    # torch and skorch are optional.
    try:
        from skdp.nn import DPNeuralNetClassifier, DPNeuralNetRegressor
    except ImportError:
        return {}
    common = dict(noise_multiplier=1.0, epsilon=None, max_epochs=1, batch_size=16, verbose=0, random_state=0)
    from skdp.generative import DPGenerativeMixture

    return {
        "DPGenerativeMixture": Case(
            DPGenerativeMixture(
                n_clusters=2,
                hidden_units=8,
                n_components=20,
                kmeans_iter=2,
                n_epochs=1,
                batch_size=16,
                random_state=0,
            ),
            _binary,
            output="score_samples",
            continuous=False,
        ),
        "DPNeuralNetClassifier": Case(
            DPNeuralNetClassifier(classes=[0, 1], **common),
            _normal,
            fit_kwargs=lambda X: {"y": np.arange(X.shape[0]) % 2},
            output="predict_proba",
            continuous=False,  # float32 inputs: 1e300 overflows and is refused with a clear ValueError
        ),
        "DPNeuralNetRegressor": Case(
            DPNeuralNetRegressor(**common),
            _normal,
            fit_kwargs=lambda X: {"y": np.linspace(-1.0, 1.0, X.shape[0]).reshape(-1, 1)},
            output="predict",
            continuous=False,
        ),
    }


CASES.update(_neural_cases())


def _modes():
    """Every mechanism and mode of each estimator, as (case name, params to set).

    The release-surface test fits each of them: a fitted attribute, a nested
    estimator or a generator that only one mode keeps must not slip through.
    """
    modes = {
        "DPBetaBernoulli(laplace)": [{}],
        "DPBetaBernoulli(ops)": [{}],
        "DPNaiveBayesHMM(laplace)": [{}, {"mechanism": "ops"}, {"mechanism": "none"}],
        "DPGaussianMixture": [
            {},
            {"covariance_type": "tied"},
            {"covariance_type": "spherical", "mean_mechanism": "gaussian", "delta": 1e-5},
            {"estimator": "mle", "component_releases": "separate", "delta": 1e-5},
        ],
        "DPKMeans": [{}, {"mechanism": "laplace", "delta": 0.0}, {"max_iter": "auto"}],
        "DPKernelKMeans": [{}, {"kernel": "laplacian", "clip": 2.0}],
        "DPSEPRegressor": [{}, {"mechanism": "clipped"}, {"mechanism": "none"}],
        "DPGenerativeMixture": [{}, {"n_clusters": 1}, {"generator": "rbm", "clipping": 1.0}],
        "DPNeuralNetClassifier": [{}, {"clipping_mode": "vmap"}, {"noise_multiplier": None, "epsilon": 3.0}],
        "DPNeuralNetRegressor": [{}],
    }
    return [(name, params) for name, variants in modes.items() if name in CASES for params in variants]


#: (id, case, params): each mode of each registered estimator.
MODE_CASES = [
    (name + ("" if not params else "[" + ",".join(f"{k}={v}" for k, v in params.items()) + "]"), CASES[name], params)
    for name, params in _modes()
]
