"""skdp: differentially private estimators for scikit-learn.

Every estimator takes ``epsilon`` and ``delta``, accounts every noisy release
through :mod:`skdp.privacy`, and reports ``privacy_spent_`` after ``fit``.
Neural estimators (torch, skorch) are imported lazily from their own
subpackages, so this package works without them.
"""

from ._config import config_context, get_config, set_config
from .bayes import DPBetaBernoulli
from .exceptions import BudgetExceededError, PrivacyLeakWarning
from .privacy import BudgetAccountant, PrivacySpent

__version__ = "0.1.0"

__all__ = [
    "BudgetAccountant",
    "BudgetExceededError",
    "DPBetaBernoulli",
    "PrivacyLeakWarning",
    "PrivacySpent",
    "__version__",
    "config_context",
    "get_config",
    "set_config",
]
