"""Warnings pointed at the user's line: below the privacy core and the estimators, which both warn.

:mod:`skdp.privacy` never imports the estimator layer (:mod:`skdp.base`);
a core function that warns (``data_norm="auto"`` that cannot locate its
quantile) and an estimator that warns share these helpers.
"""

from __future__ import annotations

import os
import sys
import warnings

import sklearn

from .exceptions import PrivacyLeakWarning


def _user_stacklevel():
    # Point the warning at the first frame outside skdp and scikit-learn (the
    # user's call to fit), however deep the estimator's own call stack is.
    skip = (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(sklearn.__file__))
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(skip):
        frame, level = frame.f_back, level + 1
    return level


def warn_privacy_leak(parameter, quantity):
    """Warn that ``quantity`` was read off the data: ``parameter`` asked for it (``"nonprivate"``)."""
    warnings.warn(
        f"{parameter} is 'nonprivate': {quantity} was computed from the data, which leaks "
        f"privacy outside the reported guarantee. Declare {parameter} from public knowledge, "
        "or leave its private default, to remove this leak.",
        PrivacyLeakWarning,
        stacklevel=_user_stacklevel(),
    )
