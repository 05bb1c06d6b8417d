"""A search's plan from public quantities: the events of a candidate's fit, from a dry run on stand-in data.

skdp's fits plan their releases from public quantities only (the parameters
and the shape of the input), so the events of a fit on a stand-in of the same
shape are those of the fit on the real data; the search checks this after
each trial and after the refit.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import clone

from ..exceptions import PrivacyLeakWarning

#: Parameters of the searched estimator that the search sets on every fit:
#: a grid may list ``epsilon`` and ``delta`` (the candidates' budgets, part of
#: the plan), never ``accountant`` or ``random_state``.
BUDGET_PARAMS = ("epsilon", "delta")


def public_size(model, n_rows):
    """``n_samples=n_rows`` for every estimator (nested ones too) that would otherwise release a noisy count.

    Under replace-one neighbours the number of rows is public (the search's
    split sizes are), so an estimator's ``n_samples="auto"`` (a noisy count,
    and a plan read off it) is declared instead: its plan is then public
    and the dry run's.  A step of a pipeline sees the pipeline's rows
    (transformers keep the rows).  A declared ``n_samples`` is kept.
    """
    params = model.get_params(deep=True)
    return {
        key: int(n_rows)
        for key, value in params.items()
        if (key == "n_samples" or key.endswith("__n_samples")) and isinstance(value, str) and value == "auto"
    }


def stand_in_y(model, n_rows):
    """Stand-in labels: the declared ``classes`` repeated, else zeros."""
    classes = model.get_params().get("classes")
    if classes is not None:
        return np.resize(np.asarray(classes), n_rows)
    return np.zeros(n_rows)


def dry_events(search, params, epsilon, n_rows, delta=None):
    """Events a fit of ``params`` at ``(epsilon, delta)`` records on ``n_rows`` rows: a dry run on stand-in data.

    The stand-in is zeros of the real input's width (the declared ``classes``
    for a classifier's labels), fitted by ``search``'s inner estimator; the
    events are those of its ledger under the search's relation, cached on
    the search for the length of its fit.
    """
    params = {k: v for k, v in params.items() if k not in BUDGET_PARAMS}
    delta = search._inner_delta() if delta is None else float(delta)
    key = (tuple(sorted((k, repr(v)) for k, v in params.items())), float(epsilon), delta, int(n_rows))
    cached = search._dry_cache.get(key)
    if cached is not None:
        return cached
    # A clone: a meta-estimator's (a DPPipeline's) nested steps must not be shared.
    model = clone(search._inner)
    model.set_params(**params, epsilon=float(epsilon), delta=delta, random_state=0)
    model.set_params(**public_size(model, n_rows))
    X0 = np.zeros((n_rows, search._n_features))
    with warnings.catch_warnings():
        # The stand-in's own bounds are of no interest: a leak warning
        # here concerns fake data (the real fit warns for itself).
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        try:
            model.fit(X0) if not search._supervised else model.fit(X0, stand_in_y(model, n_rows))
        except Exception as exc:
            # The stand-in holds no private value, so its error is quoted.
            raise ValueError(
                "Could not plan a trial's privacy without the data: a dry fit of the estimator on a "
                f"stand-in of zeros failed ({type(exc).__name__}: {exc}); the estimator must plan its "
                "releases from public quantities and declared bounds."
            ) from None
    ledger = getattr(model, "privacy_ledger_", None)
    if ledger is None:
        raise ValueError("estimator must be private (a fitted model with a privacy_ledger_).")
    events = tuple(search._searched(e) for e in ledger.events if e.count > 0)
    search._dry_cache[key] = events
    return events
