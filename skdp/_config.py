"""Package-wide settings, in the style of ``sklearn.get_config``.

A setting is read through two layers:

* the **process-wide value**, changed by :func:`set_config`.  It is a module
  global under a lock, so every thread of the process sees it, including the
  worker threads of ``GridSearchCV(n_jobs=...)`` and of joblib's threading
  backend, whenever they were started.  :func:`set_config` also writes it to
  the environment variable ``SKDP_SECURE_NOISE``, which this module reads at
  import: worker *processes* started afterwards (joblib's loky backend,
  ``multiprocessing`` with the spawn start method, or forkserver when its
  server starts afterwards) inherit the environment and import skdp with the
  same value; forked children copy the global itself.
* **thread-local overrides**, pushed by :func:`config_context` and popped when
  it exits.  They are what an estimator's own ``secure_noise`` parameter uses
  during ``fit`` (:mod:`skdp.base`), so one estimator's setting can never leak
  into a fit running concurrently in another thread.  The flip side: an
  override is seen by the thread that entered the context only, never by the
  workers a parallel search starts inside it.

What cannot be reached: a worker process that was already running when the
process-wide value changed keeps the value it imported (joblib's loky backend
keeps its workers alive between calls, for 300 s of inactivity by default).
:func:`set_config` warns when it can see such workers.  A per-estimator
``secure_noise=True`` travels with the estimator (it is a hyperparameter:
cloned and pickled with it), so it is honoured in any worker, old or new: it is
the robust route for parallel model selection (:doc:`/privacy`, "Secure noise").
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings

import numpy as np

from .exceptions import PrivacyLeakWarning

#: Environment variable carrying the process-wide ``secure_noise`` to child
#: processes (read once, when skdp is imported).
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


def _check_secure_noise(value):
    # numpy booleans are accepted (they come out of parameter grids); 0/1 are
    # not, so a misplaced argument cannot switch the noise silently.
    if value is not None and not isinstance(value, (bool, np.bool_)):
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


def _live_loky_workers():
    """True if joblib's reusable loky executor has live worker processes.

    Best effort: it inspects loky's module state without importing joblib, and
    says False when that state is not where loky 3.x keeps it.
    """
    module = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(module, "_executor", None)
    if executor is None:
        return False
    flags = getattr(executor, "_flags", None)
    if flags is not None and (getattr(flags, "shutdown", False) or getattr(flags, "broken", None)):
        return False
    return bool(getattr(executor, "_processes", None))


def set_config(secure_noise=None):
    """Set skdp settings for the whole process (see :func:`get_config`).

    The value is visible at once from every thread, and child processes
    started afterwards inherit it through the environment variable
    ``SKDP_SECURE_NOISE``.  Inside a :func:`config_context` block the block's
    own value stays in force for the calling thread until the block exits.

    Parameters
    ----------
    secure_noise : bool or None, default=None
        None leaves the setting unchanged.

    Warns
    -----
    PrivacyLeakWarning
        When secure noise is switched on while joblib's loky backend still
        has worker processes started before: they keep sampling in floating
        point until they exit.  Shut them down
        (``joblib.externals.loky.get_reusable_executor().shutdown(wait=True)``)
        or pass ``secure_noise=True`` to the estimators themselves.
    """
    secure_noise = _check_secure_noise(secure_noise)
    if secure_noise is None:
        return
    with _lock:
        changed = _global["secure_noise"] != secure_noise
        _global["secure_noise"] = secure_noise
        os.environ[SECURE_NOISE_ENV] = "1" if secure_noise else "0"
    if changed and secure_noise and _live_loky_workers():
        warnings.warn(
            "skdp.set_config(secure_noise=True): joblib's loky backend has worker processes that "
            "were started before this call and keep the old setting, so estimators fitted there "
            "with secure_noise=None would sample floating-point noise. Shut them down with "
            "joblib.externals.loky.get_reusable_executor().shutdown(wait=True), or pass "
            "secure_noise=True to the estimators themselves.",
            PrivacyLeakWarning,
            stacklevel=2,
        )


@contextlib.contextmanager
def config_context(**new):
    """Temporarily change skdp settings in the calling thread.

    ``with config_context(secure_noise=True): ...``.  The change is a
    thread-local layer over the process-wide settings, removed on exit (even
    on error), so the previous value comes back; other threads, and worker
    threads or processes started inside the block, do not see it: use
    :func:`set_config` or the estimator's ``secure_noise`` for parallel fits.

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
