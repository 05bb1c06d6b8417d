"""Base mixin shared by every skdp estimator.

The mixin owns the privacy life cycle of a fit, the same for every model:

1. before the data is touched: validate the budget, check it against the
   user's :class:`~skdp.privacy.BudgetAccountant` (raising
   :class:`~skdp.exceptions.BudgetExceededError`), and derive the noise
   generator from ``random_state``;
2. during the fit: every release goes through a mechanism that records its
   event on a fresh per-fit :class:`~skdp.privacy.PrivacyAccountant`;
3. after the fit: ``privacy_spent_`` is read off that ledger, checked against
   the request, and charged to the user's budget.

Hyperparameters are never written in ``fit``; anything derived from the data
ends in ``_``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from numbers import Real

import sklearn
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval

from ._config import config_context
from ._random import check_generator
from .exceptions import PrivacyLeakWarning
from .privacy import BudgetAccountant, PrivacyAccountant, PrivacySpent
from .privacy.events import REPLACE_ONE

#: Constraints every DP estimator merges into its ``_parameter_constraints``.
PRIVACY_PARAMETER_CONSTRAINTS = {
    "epsilon": [Interval(Real, 0, None, closed="neither")],
    "delta": [Interval(Real, 0, 1, closed="left")],
    "accountant": [BudgetAccountant, None],
    "random_state": ["random_state"],
    "secure_noise": ["boolean", None],
}


def private_fit_context(prefer_skip_nested_validation=True):
    """scikit-learn's ``_fit_context`` plus the estimator's ``secure_noise``.

    Decorates ``fit`` (and any other method that releases): parameters are
    validated as in scikit-learn, and the whole call runs under
    ``config_context(secure_noise=estimator.secure_noise)`` unless that is
    ``None`` (follow the package-wide setting).  Calibration and mechanisms
    read the same setting, so the plan a fit calibrates and the events its
    mechanisms record always agree.
    """

    def decorator(method):
        validated = _fit_context(prefer_skip_nested_validation=prefer_skip_nested_validation)(method)

        @functools.wraps(method)
        def wrapper(estimator, *args, **kwargs):
            with estimator._noise_context():
                return validated(estimator, *args, **kwargs)

        return wrapper

    return decorator


def _user_stacklevel():
    # Point the warning at the first frame outside skdp and scikit-learn (the
    # user's call to fit), however deep the estimator's own call stack is.
    skip = (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(sklearn.__file__))
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(skip):
        frame, level = frame.f_back, level + 1
    return level


def warn_privacy_leak(parameter, quantity):
    """Warn that ``quantity`` was read off the data because ``parameter`` was not set."""
    warnings.warn(
        f"{parameter} was not set: {quantity} was computed from the data, which leaks "
        f"privacy outside the reported guarantee. Set {parameter} from public knowledge "
        "to remove this leak.",
        PrivacyLeakWarning,
        stacklevel=_user_stacklevel(),
    )


class DPEstimatorMixin:
    """Privacy life cycle of a DP estimator (see module docstring).

    Subclasses store ``epsilon``, ``delta``, ``accountant`` and
    ``random_state`` in ``__init__`` and call :meth:`_begin_private_fit` and
    :meth:`_end_private_fit` around the part of ``fit`` that touches data.
    """

    #: Neighbouring relation ``privacy_spent_`` refers to.
    _neighbouring = REPLACE_ONE

    def _noise_context(self):
        """Context applying this estimator's ``secure_noise`` (None: package setting)."""
        secure = getattr(self, "secure_noise", None)
        return contextlib.nullcontext() if secure is None else config_context(secure_noise=secure)

    def _begin_private_fit(self, composition="rdp"):
        """Check the budget before touching data; return (ledger, rng)."""
        if self.accountant is not None:
            self.accountant.check(self.epsilon, self.delta, self._neighbouring)
        ledger = PrivacyAccountant(composition=composition, neighbouring=self._neighbouring)
        return ledger, check_generator(self.random_state)

    def _end_private_fit(self, ledger):
        """Set ``privacy_spent_`` from the fit's ledger and charge the user's budget."""
        spent = ledger.privacy_spent(self.delta)
        if spent.epsilon > self.epsilon * (1 + 1e-9) or spent.delta > self.delta * (1 + 1e-9):
            # A calibration bug, never a user error: refuse to release.
            raise RuntimeError(
                f"Internal error: the fit spent {tuple(spent)} > requested ({self.epsilon}, {self.delta})."
            )
        self.privacy_spent_ = PrivacySpent(float(spent.epsilon), float(spent.delta))
        self._privacy_ledger = ledger
        if self.accountant is not None:
            self.accountant.spend(*self.privacy_spent_, self._neighbouring, type(self).__name__)

    def _spend_after_fit(self, ledger_events):
        """Account releases made after ``fit`` (e.g. further OPS samples).

        The user's budget is checked first; ``privacy_spent_`` grows to the
        composition of everything released so far.
        """
        trial = PrivacyAccountant(self._privacy_ledger.composition, self._neighbouring)
        trial.events = list(self._privacy_ledger.events)
        for event in ledger_events:
            trial.record(event)
        total = trial.privacy_spent(self.delta)
        extra = PrivacySpent(
            total.epsilon - self.privacy_spent_.epsilon, max(0.0, total.delta - self.privacy_spent_.delta)
        )
        if self.accountant is not None:
            self.accountant.spend(*extra, self._neighbouring, type(self).__name__)
        self._privacy_ledger = trial
        self.privacy_spent_ = PrivacySpent(float(total.epsilon), float(total.delta))
        return trial
