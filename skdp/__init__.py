"""skdp: differentially private estimators for scikit-learn.

Every estimator takes ``epsilon`` and ``delta``, accounts every noisy release
through :mod:`skdp.privacy`, and reports ``privacy_spent_`` after ``fit``.
Every public estimator can be imported from here (``from skdp import
DPGaussianMixture``).  The DP-SGD nets need torch and skorch: they are
imported on first use (a module ``__getattr__``), so ``import skdp`` never
imports torch and works without it.
"""

import importlib

from . import pipeline  # noqa: F401  (skdp.pipeline.DPPipeline, make_pipeline)
from ._config import config_context, get_config, set_config
from .bayes import DPBetaBernoulli, DPNaiveBayesHMM
from .bnn import DPSEPRegressor
from .cluster import DPKernelKMeans, DPKMeans
from .exceptions import BudgetExceededError, PrivacyLeakWarning
from .generative import DPGenerativeMixture
from .mixture import DPGaussianMixture
from .preprocessing import DPPCA, DPMinMaxScaler, DPStandardScaler
from .privacy import BudgetAccountant, PrivacySpent

__version__ = "0.1.0"

#: Public names whose subpackage imports torch: loaded on first access.
_LAZY = {
    "DPNeuralNetClassifier": "skdp.nn",
    "DPNeuralNetRegressor": "skdp.nn",
}

__all__ = [
    "BudgetAccountant",
    "BudgetExceededError",
    "DPBetaBernoulli",
    "DPGaussianMixture",
    "DPGenerativeMixture",
    "DPKMeans",
    "DPKernelKMeans",
    "DPMinMaxScaler",
    "DPNaiveBayesHMM",
    "DPNeuralNetClassifier",
    "DPNeuralNetRegressor",
    "DPPCA",
    "DPSEPRegressor",
    "DPStandardScaler",
    "PrivacyLeakWarning",
    "PrivacySpent",
    "__version__",
    "config_context",
    "get_config",
    "set_config",
]


def __getattr__(name):
    # PEP 562: the torch-backed estimators are imported when first asked for.
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'skdp' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
