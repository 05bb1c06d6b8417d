"""Warnings of fits that scikit-learn's cross-validation runs: once per call site, at the user's line.

``GridSearchCV``, ``cross_val_score`` and friends run every fit through
``sklearn.model_selection._validation._fit_and_score`` (and a search its
refit through its own ``fit``), inside scikit-learn's
``Parallel``, which wraps each task in ``warnings.catch_warnings()``: that
resets Python's "once per location" memory, so a warning a fit raises (an
undeclared bound, a private estimate that may be poor) prints once per fit,
12 times for a 12-fit search, and points at joblib's source line.

:func:`once_per_cross_validation` decorates ``fit``: outside cross-validation
it changes nothing.  Inside it, the fit's warnings are collected and shown
again, each distinct warning once:

* in the process that called the search (``n_jobs=1``), at the user's line
  (the first frame outside skdp, scikit-learn and joblib), once per line, as
  Python's default filter would without the reset;
* in a worker (``n_jobs > 1``: a loky process, or a thread of the threading
  backend, with no user frame on its stack), attributed to
  ``<cross-validation worker>`` (no library source line), once per worker
  and kind of warning (numbers in the message ignored: the same warning at
  another candidate's epsilon is not new).

The user's warning filters still apply (scikit-learn sends them to its
workers): ``"error"`` still raises, ``"ignore"`` still silences.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
import warnings

#: Directories whose frames are not the user's.
_LIBRARIES = None
_SHOWN = set()
_LOCK = threading.Lock()
_COLLECTING = threading.local()
_NUMBER = re.compile(r"[-+]?\d[\d.]*(?:e[-+]?\d+)?")
WORKER = "<cross-validation worker>"


def _libraries():
    global _LIBRARIES
    if _LIBRARIES is None:
        import joblib
        import sklearn

        packages = (sys.modules["skdp"], sklearn, joblib)
        dirs = [os.path.dirname(os.path.abspath(m.__file__)) for m in packages]
        dirs.append(os.path.dirname(os.path.abspath(os.__file__)))  # the standard library
        _LIBRARIES = tuple(d + os.sep for d in dirs)
    return _LIBRARIES


def _under_cross_validation(frame):
    """Whether ``frame`` runs inside scikit-learn's model selection, and the user's frame above it.

    No user frame (None) in a worker: its stack ends in joblib, loky and the
    standard library (processes, threads).
    """
    selection = os.path.join(os.path.dirname(_libraries()[1]), "model_selection", "")
    while frame is not None:
        if frame.f_code.co_filename.startswith(selection):  # _fit_and_score, a search's refit
            break
        frame = frame.f_back
    else:
        return False, None
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_libraries()) and not filename.startswith("<"):
            return True, frame
        frame = frame.f_back
    return True, None


def _show(record, user):
    message = str(record.message)
    if user is not None:
        filename, lineno = user.f_code.co_filename, user.f_lineno
        key = (filename, lineno, record.category, message)
        module = user.f_globals.get("__name__", "__main__")
    else:
        filename, lineno, module = WORKER, 0, "skdp"
        key = (WORKER, record.category, _NUMBER.sub("#", message))
    with _LOCK:
        if key in _SHOWN:
            return
        _SHOWN.add(key)
    warnings.warn_explicit(record.message, record.category, filename, lineno, module=module, registry={})


def once_per_cross_validation(method):
    """Decorate ``fit`` so its warnings under cross-validation show once (module docstring)."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        if getattr(_COLLECTING, "on", False):  # a step of a composite: its owner's fit collects
            return method(*args, **kwargs)
        inside, user = _under_cross_validation(sys._getframe(1))
        if not inside:
            return method(*args, **kwargs)
        caught = []
        _COLLECTING.on = True
        try:
            # The user's filters stay: "error" raises here, "ignore" drops.
            with warnings.catch_warnings(record=True) as caught:
                return method(*args, **kwargs)
        finally:
            _COLLECTING.on = False
            for record in caught:
                _show(record, user)

    return wrapper
