"""Renamed parameters: scikit-learn's deprecation cycle for an estimator's options.

A renamed parameter keeps its old name in ``__init__`` with the default
``"deprecated"`` (hidden from the constraints), so ``get_params``, ``clone``
and pickles of old models keep working for one cycle.  The estimator's
``_check_params`` (the template's first step, before anything is reserved)
calls :func:`deprecated_value` with ``warn=True``: a ``FutureWarning`` naming
the new parameter when the old one is set, a ``ValueError`` naming both when
both are.  The steps after it call the same function with ``warn=False`` to
read the value in effect, so the parameters themselves are never rewritten
(``fit`` must not change what ``get_params`` returns).

The DPNorm options (Acs et al. 2018, Alg. 3) are the first users: one
spelling, ``clip_norm`` (a float, or ``"auto"`` for DPNorm), ``clip_norm_max``,
``clip_norm_bins`` and ``clip_norm_noise_ratio``, on every estimator that
clips a norm.
"""

import inspect
import warnings

from .base import _user_stacklevel

__all__ = ["DEPRECATED", "deprecated_value", "is_set"]

#: Default of a parameter kept only for its deprecation cycle.
DEPRECATED = "deprecated"


def _default(estimator, name):
    return inspect.signature(type(estimator).__init__).parameters[name].default


def is_set(estimator, name):
    """Whether ``estimator``'s parameter ``name`` differs from its ``__init__`` default."""
    value, default = getattr(estimator, name), _default(estimator, name)
    if isinstance(value, str) or isinstance(default, str):
        # "auto" against a float default (or the reverse) is set.
        return not (isinstance(value, str) and isinstance(default, str) and value == default)
    return bool(value != default)


def deprecated_value(estimator, old, new, *, warn, conflicts=None, version="0.3"):
    """The value of the deprecated parameter ``old``, or None when it is not set.

    Parameters
    ----------
    estimator : estimator
        Holds ``old`` and ``new`` as parameters.
    old, new : str
        The deprecated name and the one replacing it.
    warn : bool
        ``True`` in ``_check_params``: a set ``old`` emits a ``FutureWarning``
        naming ``new``; ``False`` reads the value silently.
    conflicts : sequence of str, default=None
        New parameters that ``old`` stands for (default ``(new,)``); ``old``
        set together with any of them set raises a ``ValueError`` naming both.
    version : str, default="0.3"
        The release that removes ``old``.
    """
    value = getattr(estimator, old)
    if isinstance(value, str) and value == DEPRECATED:
        return None
    if warn:
        for other in conflicts or (new,):
            if is_set(estimator, other):
                raise ValueError(
                    f"{type(estimator).__name__}: both {old}={value!r} (deprecated) and "
                    f"{other}={getattr(estimator, other)!r} are set; set only {other}."
                )
        warnings.warn(
            f"{type(estimator).__name__}: {old} is deprecated and will be removed in {version}; use {new} instead.",
            FutureWarning,
            stacklevel=_user_stacklevel(),
        )
    return value
