"""skdp: differentially private estimators for scikit-learn.

Every estimator takes ``epsilon`` and ``delta``, accounts every noisy release
through :mod:`skdp.privacy`, and reports ``privacy_spent_`` after ``fit``.
Every public name can be imported from here: the estimators (``from skdp
import DPGaussianMixture``), the private workflow around them
(:class:`~skdp.pipeline.DPPipeline`, :func:`~skdp.pipeline.make_pipeline`,
:class:`~skdp.model_selection.DPGridSearchCV`,
:class:`~skdp.model_selection.DPRandomizedSearchCV`) and the budgets
(:class:`~skdp.privacy.BudgetAccountant`,
:class:`~skdp.privacy.SQLiteBudgetAccountant`).

``import skdp`` is light: it loads the settings and the exceptions only, and
each name is imported from its subpackage on first use (a module
``__getattr__``, PEP 562), so a script pays for scikit-learn and SciPy when it
first asks for an estimator, and for torch and skorch only when it asks for a
DP-SGD net (which need the ``torch`` extra).
"""

import importlib
from typing import TYPE_CHECKING

from ._config import config_context, get_config, set_config
from .exceptions import BudgetExceededError, PrivacyLeakWarning

__version__ = "0.1.0"

#: Public name -> the subpackage that defines it, imported on first access.
_LAZY = {
    "BudgetAccountant": "skdp.privacy",
    "BudgetRemaining": "skdp.privacy",
    "DPBetaBernoulli": "skdp.bayes",
    "DPGaussianMixture": "skdp.mixture",
    "DPGenerativeMixture": "skdp.generative",
    "DPGridSearchCV": "skdp.model_selection",
    "DPKMeans": "skdp.cluster",
    "DPKernelKMeans": "skdp.cluster",
    "DPMinMaxScaler": "skdp.preprocessing",
    "DPNaiveBayesHMM": "skdp.bayes",
    "DPNeuralNetClassifier": "skdp.nn",
    "DPNeuralNetRegressor": "skdp.nn",
    "DPPCA": "skdp.preprocessing",
    "DPPipeline": "skdp.pipeline",
    "DPRandomizedSearchCV": "skdp.model_selection",
    "DPSEPRegressor": "skdp.bnn",
    "DPStandardScaler": "skdp.preprocessing",
    "PrivacySpent": "skdp.privacy",
    "SQLiteBudgetAccountant": "skdp.privacy",
    "make_pipeline": "skdp.pipeline",
}

#: Subpackages reachable as attributes (``skdp.privacy``) after ``import skdp``.
_SUBMODULES = frozenset(
    {
        "audit",
        "base",
        "bayes",
        "bnn",
        "cluster",
        "exceptions",
        "generative",
        "mixture",
        "model_selection",
        "nn",
        "pipeline",
        "preprocessing",
        "privacy",
    }
)

#: Every public name (``_LAZY``'s and the ones imported above); a test checks they agree.
__all__ = [
    "BudgetAccountant",
    "BudgetExceededError",
    "BudgetRemaining",
    "DPBetaBernoulli",
    "DPGaussianMixture",
    "DPGenerativeMixture",
    "DPGridSearchCV",
    "DPKMeans",
    "DPKernelKMeans",
    "DPMinMaxScaler",
    "DPNaiveBayesHMM",
    "DPNeuralNetClassifier",
    "DPNeuralNetRegressor",
    "DPPCA",
    "DPPipeline",
    "DPRandomizedSearchCV",
    "DPSEPRegressor",
    "DPStandardScaler",
    "PrivacyLeakWarning",
    "PrivacySpent",
    "SQLiteBudgetAccountant",
    "__version__",
    "config_context",
    "get_config",
    "make_pipeline",
    "set_config",
]

if TYPE_CHECKING:  # static analysers and IDEs see the real imports
    from .bayes import DPBetaBernoulli, DPNaiveBayesHMM
    from .bnn import DPSEPRegressor
    from .cluster import DPKernelKMeans, DPKMeans
    from .generative import DPGenerativeMixture
    from .mixture import DPGaussianMixture
    from .model_selection import DPGridSearchCV, DPRandomizedSearchCV
    from .nn import DPNeuralNetClassifier, DPNeuralNetRegressor
    from .pipeline import DPPipeline, make_pipeline
    from .preprocessing import DPPCA, DPMinMaxScaler, DPStandardScaler
    from .privacy import BudgetAccountant, BudgetRemaining, PrivacySpent, SQLiteBudgetAccountant


def __getattr__(name):
    # PEP 562: a public name, or a subpackage, is imported when first asked for
    # and then cached in the module's namespace (later lookups are plain).
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'skdp' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__) | _SUBMODULES)
