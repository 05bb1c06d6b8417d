"""Package-wide settings, in the style of ``sklearn.get_config``.

The one setting, ``secure_noise``, is the *default* of every estimator's
``secure_noise`` parameter: an estimator whose ``secure_noise`` is None reads
it once, at the start of ``fit`` (:meth:`skdp.base.DPEstimatorMixin._private_fit`),
and from then on passes the resolved value explicitly, through its
:class:`~skdp.base.PrivacyPlan`, to the calibration and to the mechanisms
(the fit's :class:`~skdp.privacy.PrivacyLedger` says how its noise is
sampled).  Nothing deeper reads it.

It is read through two layers:

* the **process-wide value**, changed by :func:`set_config`, and initialised
  at import from the environment variable ``SKDP_SECURE_NOISE`` (so a whole
  job can be switched on from outside).  It is a module global under a lock,
  so every thread of the process sees it, including the worker threads of
  ``GridSearchCV(n_jobs=...)`` and of joblib's threading backend.
* **thread-local overrides**, pushed by :func:`config_context` and popped when
  it exits: seen by the thread that entered the context only, never by the
  worker threads or processes a parallel search starts inside it.

Worker *processes* (joblib's loky backend, ``multiprocessing``) do not read
this process's settings: they get the setting through the estimator they are
sent.  An estimator pickled while its ``secure_noise`` is None and the
process-wide value is True carries ``secure_noise=True``
(:meth:`skdp.base.DPEstimatorMixin.__getstate__`), so a worker, fresh or
started long before, samples exactly as the parent would; an explicit
``secure_noise`` travels as it is.  :func:`set_config` does not write the
environment.  See :doc:`/privacy`, "Secure noise".
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

#: Environment variable giving the process-wide ``secure_noise`` at import
#: (read once, when skdp is imported; :func:`set_config` never writes it).
SECURE_NOISE_ENV = "SKDP_SECURE_NOISE"

_DEFAULTS = {"secure_noise": False}
_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})


def _parse_environment(environ):
    """Process-wide settings at import: the defaults, overridden by ``SKDP_SECURE_NOISE``."""
    settings = dict(_DEFAULTS)
    raw = environ.get(SECURE_NOISE_ENV)
    if raw is None:
        return settings
    word = raw.strip().lower()
    if word in _TRUE_WORDS:
        settings["secure_noise"] = True
    elif word in _FALSE_WORDS:
        settings["secure_noise"] = False
    else:
        # A typo must not silently fall back to floating-point noise.
        raise ValueError(
            f"The environment variable {SECURE_NOISE_ENV} (skdp's secure_noise) must be one of "
            f"{sorted(_TRUE_WORDS | _FALSE_WORDS - {''})} or empty, got {raw!r}."
        )
    return settings


_lock = threading.Lock()
_global = _parse_environment(os.environ)
_local = threading.local()


def _overrides():
    """This thread's stack of :func:`config_context` layers (innermost last)."""
    stack = getattr(_local, "overrides", None)
    if stack is None:
        stack = _local.overrides = []
    return stack


def _is_bool(value):
    # numpy is not imported here (``import skdp`` stays light): a value can
    # only be a numpy boolean if numpy is already loaded.
    numpy = sys.modules.get("numpy")
    return isinstance(value, bool) or (numpy is not None and isinstance(value, numpy.bool_))


def _check_secure_noise(value):
    # numpy booleans are accepted (they come out of parameter grids); 0/1 are
    # not, so a misplaced argument cannot switch the noise silently.
    if value is not None and not _is_bool(value):
        raise TypeError(f"secure_noise must be True, False or None, got {value!r}.")
    return None if value is None else bool(value)


def get_config():
    """Current skdp settings (a copy).

    The process-wide values of :func:`set_config`, overridden by the
    :func:`config_context` blocks the calling thread is in.

    Returns
    -------
    config : dict
        ``secure_noise`` : bool
            Sample Laplace and Gaussian noise exactly on a grid (discrete
            Laplace and discrete Gaussian, Canonne, Kamath & Steinke 2020)
            instead of with floating-point inverse-CDF sampling, whose
            low-order bits leak the noiseless value (Mironov 2012).  Mechanisms
            with no exact sampler (subsampled Gaussians, the exponential
            mechanism) refuse to run while it is on.  See :doc:`/privacy`,
            "Secure noise".
    """
    with _lock:
        config = dict(_global)
    for layer in _overrides():
        config.update(layer)
    return config


def set_config(secure_noise=None):
    """Set skdp settings for the whole process (see :func:`get_config`).

    The value is visible at once from every thread.  It is the default of the
    estimators whose own ``secure_noise`` is None, read once at the start of
    each ``fit``; worker processes get it with the estimators they are sent
    (see the module docstring), not through the environment.  Inside a
    :func:`config_context` block the block's own value stays in force for the
    calling thread until the block exits.

    Parameters
    ----------
    secure_noise : bool or None, default=None
        None leaves the setting unchanged.
    """
    secure_noise = _check_secure_noise(secure_noise)
    if secure_noise is None:
        return
    with _lock:
        _global["secure_noise"] = secure_noise


@contextlib.contextmanager
def config_context(**new):
    """Temporarily change skdp settings in the calling thread.

    ``with config_context(secure_noise=True): ...``.  The change is a
    thread-local layer over the process-wide settings, removed on exit (even
    on error), so the previous value comes back; other threads, and worker
    threads started inside the block, do not see it: use :func:`set_config`
    or the estimator's ``secure_noise`` for parallel fits.

    Parameters
    ----------
    **new
        Settings to change; a value of None leaves that setting as it is.

    Raises
    ------
    TypeError
        For an unknown setting or a ``secure_noise`` that is not a boolean.
    """
    unknown = set(new) - set(_DEFAULTS)
    if unknown:
        raise TypeError(f"Unknown skdp setting(s): {sorted(unknown)}.")
    layer = {}
    if "secure_noise" in new:
        value = _check_secure_noise(new["secure_noise"])
        if value is not None:
            layer["secure_noise"] = value
    stack = _overrides()
    stack.append(layer)
    try:
        yield
    finally:
        # Remove this very layer: a generator finalised out of order must not
        # pop somebody else's.
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is layer:
                del stack[i]
                break


def resolve_secure_noise(value):
    """The ``secure_noise`` a fit uses: ``value``, or the current setting if it is None.

    Called once per fit (or per release after ``fit``), by the estimator; the
    result is then passed explicitly to whatever samples or costs noise.

    Raises
    ------
    ValueError
        If ``value`` is neither None nor a boolean (numpy booleans included).
    """
    if value is None:
        return get_config()["secure_noise"]
    if not _is_bool(value):
        raise ValueError(f"secure_noise must be None, False or True, got {value!r}.")
    return bool(value)
