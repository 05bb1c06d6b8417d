"""The privacy life cycle of every skdp fit, as one template (like scikit-learn's ``BaseMixture``).

:meth:`DPEstimatorMixin._private_fit` runs, in this order and nowhere else:

1. resolve ``secure_noise`` once (the estimator's, or the package default of
   :func:`skdp.set_config`) and validate the parameters (scikit-learn's
   ``_parameter_constraints``, by :func:`private_fit_context`, then
   :meth:`~DPEstimatorMixin._check_params`, the refusal of secure noise by a
   mechanism with no exact sampler, and
   :meth:`~DPEstimatorMixin._check_public_input` against what is public
   about the input: its shape, never a value);
2. build the privacy plan from public quantities only
   (:meth:`~DPEstimatorMixin._privacy_plan`, a :class:`PrivacyPlan`);
3. *hold* the plan's budget on the user's
   :class:`~skdp.privacy.BudgetAccountant` (a
   :class:`~skdp.privacy.BudgetHold`: an atomic check-and-record that
   raises :class:`~skdp.exceptions.BudgetExceededError` and charges nothing
   if the request does not fit; it can grow, :meth:`~skdp.privacy.BudgetHold.extend`,
   and is closed on every exit path), open the fit's
   :class:`~skdp.privacy.PrivacyLedger` and derive the noise generator;
4. validate the input (:meth:`~DPEstimatorMixin._validate_input`; one helper,
   :func:`skdp._input.validate_fit_input`, for arrays, memmaps, Dask and
   factories of chunks);
5. calibrate the noise to the plan and the public size
   (:meth:`~DPEstimatorMixin._calibrate`);
6. fit and release (:meth:`~DPEstimatorMixin._fit_private`): every noisy
   release goes through a mechanism that records its event on the ledger;
   a plan that depends on an earlier release of the fit (a noisy count,
   noisy cluster sizes) is calibrated by the staged-plan step
   (:meth:`~DPEstimatorMixin._calibrate_staged`, an RDP filter valid
   whatever that release's outcome);
7. *settle*: ``privacy_spent_`` is read off the ledger, checked against the
   request, and the hold is settled to it.

An estimator writes its plan and its releases, nothing else.  A non-private
reference mode (``PrivacyPlan(private=False)``) is one switch: it skips 3
and 7 and reports ``privacy_spent_ = (inf, 0)``.

A fit that raises between 3 and 7 closes its hold charged in full (or at
what its ledger released, if more): it may have read the data (even an
input error depends on the data) or drawn a noisy statistic that is still
in memory, so skdp never assumes it released nothing; and it forgets what
it fitted (:meth:`DPEstimatorMixin._discard_fit`), so a failed model never
predicts.  Errors raised before 3 (parameters, plan) reserve nothing.

Hyperparameters are never written in ``fit``; anything derived from the data
ends in ``_``; what a fitted model may hold is declared in one place
(:attr:`DPEstimatorMixin._released_attributes`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import numbers
import os
import sys
import warnings
import weakref
from dataclasses import dataclass, is_dataclass, replace
from numbers import Real
from typing import Any

import numpy as np
import sklearn
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval

from ._config import resolve_secure_noise
from ._cv_warnings import once_per_cross_validation
from ._input import validate_fit_input
from ._random import check_generator, generator_after_fit
from ._user_warnings import _user_stacklevel, warn_privacy_leak  # noqa: F401 (estimators import it from here)
from .exceptions import PrivacyLeakWarning, without_data_values
from .privacy import BudgetAccountant, PrivacyLedger, PrivacySpent, hold
from .privacy.events import REPLACE_ONE
from .privacy.ledger import DEFAULT_COMPOSITION

#: Constraints every DP estimator merges into its ``_parameter_constraints``.
PRIVACY_PARAMETER_CONSTRAINTS = {
    "epsilon": [Interval(Real, 0, None, closed="neither")],
    "delta": [Interval(Real, 0, 1, closed="left")],
    "accountant": [BudgetAccountant, None],
    # scikit-learn's "random_state" accepts None, ints and RandomState; a
    # Generator is accepted too (check_generator uses it as is).  Whichever is
    # passed, whoever holds it can replay the noise: see skdp._random.
    "random_state": ["random_state", np.random.Generator],
    "secure_noise": ["boolean", None],
}


#: scikit-learn's fitted metadata: the columns the user handed to ``fit``
#: (their number and names), public by declaration on every estimator.
SKLEARN_METADATA = frozenset({"n_features_in_", "feature_names_in_"})

#: What every DP fit holds besides its own releases: the guarantee and the
#: ledger of data-independent events it was computed from.
PRIVACY_METADATA = frozenset({"privacy_spent_", "privacy_ledger_"})

#: How many random calls (``sample``, further posterior samples) were made
#: since ``fit``: the user's own calls, counted so that an int ``random_state``
#: gives each its own reproducible stream (:func:`generator_after_fit`).
AFTER_FIT_COUNTER = "_n_draws_after_fit"

#: The composite (a :class:`~skdp.pipeline.DPPipeline`, a private search)
#: whose fit produced this fitted estimator, set by the composite after its
#: fit.  A release the estimator makes after ``fit`` is charged to that owner
#: (its ``privacy_spent_``, its ledger, its budget or its own owner), never to
#: the step alone: :meth:`DPEstimatorMixin._spend_after_fit`.  A plain
#: reference, so pickling, ``copy.deepcopy`` and process boundaries carry the
#: link with the model; ``clone`` (an unfitted copy) drops it.
PRIVACY_OWNER = "_privacy_owner"


@dataclass(frozen=True)
class PrivacyPlan:
    """What a fit will release, decided from public quantities before the data is read.

    Parameters
    ----------
    epsilon, delta : float
        The guarantee requested, reserved on the user's budget before the
        data is read.
    composition : str, default="pld"
        How the fit's ledger composes its events (an accountant of
        :mod:`skdp.privacy.accountants`).
    private : bool, default=True
        False for a non-private reference mode: nothing is reserved or
        accounted, and ``privacy_spent_`` is ``(inf, 0)``.
    settings : frozen dataclass, default=None
        The estimator's own typed plan: its public choices (noise
        multipliers, iteration counts, mechanisms) for the ``_calibrate`` and
        ``_fit_private`` steps of :class:`DPEstimatorMixin`, as one frozen
        dataclass per estimator whose fields are typed and documented (e.g.
        ``skdp.bayes._naive_bayes_hmm.NaiveBayesHMMSettings``), read as
        attributes (``plan.settings.noise_multiplier``).  Public by
        construction, since nothing here has seen the data.  None until the
        estimator's ``_privacy_plan`` or ``_calibrate`` sets it.
    secure_noise : bool, default=False
        Whether every release of the fit samples its noise exactly on a grid:
        the estimator's ``secure_noise``, or the package default when that is
        None, resolved once at the start of the fit and set by the template.
        The calibration (``calibrate_noise_multiplier(...,
        secure_noise=plan.secure_noise)``) and the fit's ledger (which the
        mechanisms read) take it from here; nothing reads the package setting
        later in the fit.
    """

    epsilon: float
    delta: float
    composition: str = DEFAULT_COMPOSITION
    private: bool = True
    settings: Any = None
    secure_noise: bool = False

    def with_settings(self, settings=None, /, **changes):
        """A copy with ``settings`` (an estimator's plan dataclass), or the current ones updated by ``changes``.

        ``changes`` are applied with :func:`dataclasses.replace`, so a field
        the estimator's plan does not declare is a ``TypeError``, never a
        silently ignored key.
        """
        settings = self.settings if settings is None else settings
        if not is_dataclass(settings):
            raise TypeError(f"A plan's settings are a frozen dataclass, got {type(settings).__name__}.")
        return replace(self, settings=replace(settings, **changes) if changes else settings)


def private_fit_context(prefer_skip_nested_validation=True):
    """scikit-learn's ``_fit_context``, with errors that never quote the data.

    Decorates ``fit`` (and any other method that releases): parameters are
    validated as in scikit-learn, and an error whose message would quote a
    value of the data (NumPy's conversion errors) is re-raised without the
    value.  The estimator's ``secure_noise`` is not applied here: the
    template resolves it once (:meth:`DPEstimatorMixin._private_fit`) and
    passes it on explicitly.
    """

    def decorator(method):
        validated = _fit_context(prefer_skip_nested_validation=prefer_skip_nested_validation)(method)
        # Under scikit-learn's cross-validation, each distinct warning once (skdp._cv_warnings).
        return errors_without_data_values(once_per_cross_validation(functools.wraps(method)(validated)))

    return decorator


def errors_without_data_values(method):
    """Decorate a method that reads the data so its errors never quote a value.

    A ``ValueError``/``TypeError`` whose message quotes a value of the data
    (NumPy's conversion errors) is re-raised as
    :func:`~skdp.exceptions.without_data_values` makes it, unchained; any
    other error passes through unchanged.
    """

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except (ValueError, TypeError) as exc:
            clean = without_data_values(exc)
            if clean is exc:
                raise
        # Raised outside the ``except`` so the original message, which
        # quotes a training value, is not chained into the traceback.
        raise clean

    return wrapper


def _public_n_samples(estimator, X):
    """The number of training rows where it is public, or None (nothing of ``X`` is read).

    Under replace-one neighbours the size is public by definition (neighbours
    have the same size): the length of ``X``.  Under add/remove it is private:
    only a size the user declared (``n_samples=int``) counts.
    """
    if getattr(estimator, "_neighbouring", REPLACE_ONE) != REPLACE_ONE:
        declared = estimator.get_params().get("n_samples")
        return int(declared) if isinstance(declared, numbers.Integral) else None
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape) >= 1 and isinstance(shape[0], numbers.Integral):
        return int(shape[0])
    return len(X) if isinstance(X, list | tuple) else None


def _warn_if_delta_reaches_one_over_n(estimator, X):
    """Warn when ``delta >= 1/n``: then releasing one row at random meets the guarantee.

    Fires before the reservation and only from a public (or declared) size,
    so whether it fires releases nothing (rule 2 of the brief).
    """
    delta = getattr(estimator, "delta", 0.0)
    n = _public_n_samples(estimator, X)
    if not delta or n is None or delta * n < 1:
        return
    # The suggestion is a function of the public n alone; the package default (1e-5) is named
    # only where it is itself below 1/n (at n >= 1e5 it is not).
    suggestion = f"1/n_samples**1.1 = {n ** -1.1:.1e}"
    if 1e-5 * n < 1:
        suggestion = f"1e-5, the default, or {suggestion}"
    warnings.warn(
        f"delta={delta:g} is not below 1/n_samples (n_samples={n}, public): at such a delta, "
        f"publishing one training row at random meets the guarantee. Use a delta well below "
        f"1/n_samples ({suggestion}).",
        UserWarning,
        stacklevel=_user_stacklevel(),
    )


#: scikit-learn searches already warned about (once per search object).
_WARNED_SEARCHES = weakref.WeakSet()


def _warn_under_sklearn_search(estimator):
    """Warn, once per search, that scikit-learn's search selects on exact validation scores.

    ``GridSearchCV`` and friends fit each candidate with its own guarantee
    (charged to a shared budget, if any), but pick the best by scores
    computed exactly on private rows, and the choice is released through
    ``best_params_`` unaccounted.  Detected from the calling frames, so only
    for fits in this process (``n_jobs=1`` or a thread backend); the docs of
    :mod:`skdp.model_selection` say so too.
    """
    from sklearn.model_selection._search import BaseSearchCV

    search, stacklevel = _fitting_caller(BaseSearchCV)
    if search is None or search in _WARNED_SEARCHES:
        return
    _WARNED_SEARCHES.add(search)
    warnings.warn(
        f"{type(search).__name__} fits {type(estimator).__name__} with its guarantee, but "
        "selects the best candidate by validation scores computed exactly on private rows: "
        "the selection (best_params_, best_score_, cv_results_) is not covered by any "
        "privacy_spent_. Use skdp.model_selection.DPGridSearchCV or DPRandomizedSearchCV "
        "for a private selection.",
        PrivacyLeakWarning,
        stacklevel=stacklevel,
    )


def _declared_categories(step):
    # An encoder whose categories are declared (not "auto") and that keeps no
    # frequency rule (min_frequency / max_categories count the rows) learns
    # nothing from the data: its fitted categories are the declaration.
    params = step.get_params(deep=False)
    return (
        not isinstance(params.get("categories", "auto"), str)
        and params.get("min_frequency") is None
        and params.get("max_categories") is None
    )


def _nested_steps(step):
    """``(name, estimator)`` of a scikit-learn container's inner estimators, or None for any other step.

    Containers (``Pipeline``, ``FeatureUnion``, ``ColumnTransformer``,
    ``TransformedTargetRegressor``) release nothing of their own beyond
    public metadata (column indices, output widths) and what their inner
    estimators release, so their inner estimators are judged one by one.
    """
    from sklearn.compose import ColumnTransformer, TransformedTargetRegressor
    from sklearn.pipeline import FeatureUnion, Pipeline

    if isinstance(step, Pipeline):
        return list(step.steps)
    if isinstance(step, FeatureUnion):
        return list(step.transformer_list)
    if isinstance(step, ColumnTransformer):
        inner = [(name, est) for name, est, _ in step.transformers]
        return [*inner, ("remainder", step.remainder)]
    if isinstance(step, TransformedTargetRegressor):
        from sklearn.linear_model import LinearRegression

        inner = [("regressor", LinearRegression() if step.regressor is None else step.regressor)]
        # transformer=None: the identity, or a stateless FunctionTransformer of func.
        return inner if step.transformer is None else [*inner, ("transformer", step.transformer)]
    return None


def steps_fitted_without_dp(name, step):
    """The names of the estimators in ``step`` that learn from the data without DP.

    skdp estimators, ``None``/``"passthrough"``/``"drop"``, stateless steps
    (scikit-learn's ``requires_fit=False`` tag, e.g. a
    ``FunctionTransformer``) and encoders with declared ``categories`` (and
    no ``min_frequency``/``max_categories``) do not.  A container
    (``Pipeline``, ``FeatureUnion``, ``ColumnTransformer``,
    ``TransformedTargetRegressor``) is judged by its inner estimators, named
    as in ``get_params`` (``"pre__cat"`` for the step ``"cat"`` of a
    ``ColumnTransformer`` step ``"pre"``).  Any other step
    (``StandardScaler``, ``PCA``, a third-party step without tags) is assumed
    to learn.

    Parameters
    ----------
    name : str
        The step's name ("" for none: inner names are then used alone).
    step : estimator, str or None

    Returns
    -------
    names : list of str
    """
    from sklearn.utils import get_tags

    if step is None or isinstance(step, str) or isinstance(step, DPEstimatorMixin):
        return []
    if getattr(step, "_warns_about_its_steps", False):  # a nested DPPipeline
        return []
    inner = _nested_steps(step)
    if inner is not None:
        return [
            leaky
            for inner_name, est in inner
            for leaky in steps_fitted_without_dp(f"{name}__{inner_name}" if name else inner_name, est)
        ]
    if "categories" in step.get_params(deep=False) and _declared_categories(step):
        return []
    try:
        learns = bool(get_tags(step).requires_fit)
    except Exception:  # a third-party step without tags: assume it learns
        learns = True
    return [name or type(step).__name__] if learns else []


def _warn_after_non_private_steps(estimator):
    """Warn when ``estimator`` is fitted in a ``Pipeline`` after a step fitted without DP.

    A stateful scikit-learn step in front (``StandardScaler``, ``PCA``, a
    ``ColumnTransformer``) was fitted on the same private rows with no noise:
    its fitted statistics are released with the pipeline and covered by no
    ``privacy_spent_``.  Steps that are skdp estimators, ``"passthrough"``,
    and stateless steps (scikit-learn's ``requires_fit=False`` tag, e.g. a
    ``FunctionTransformer``) pass.  Detected from the calling frames (the
    pipeline's own ``fit``), so in-process fits only.
    """
    from sklearn.pipeline import Pipeline

    pipeline, stacklevel = _fitting_caller(Pipeline)
    if pipeline is None or getattr(pipeline, "_warns_about_its_steps", False):
        # skdp.pipeline.DPPipeline checks all its steps itself, once per fit.
        return
    leaky = []
    for name, step in pipeline.steps:
        if step is estimator:
            break
        leaky += steps_fitted_without_dp(name, step)
    else:
        return  # not one of this pipeline's steps
    if leaky:
        warnings.warn(
            f"Pipeline step(s) {', '.join(map(repr, leaky))} before {type(estimator).__name__} "
            "were fitted on the private data without differential privacy: their fitted "
            "statistics are released with the pipeline and not covered by privacy_spent_. Use "
            "skdp.preprocessing (DPStandardScaler, DPMinMaxScaler, DPPCA) or a stateless "
            "FunctionTransformer with public constants.",
            PrivacyLeakWarning,
            stacklevel=stacklevel,
        )


def _fitting_caller(cls):
    """The innermost ``cls`` instance whose ``fit*`` method is on the stack, and where its user called it.

    Returns ``(owner, stacklevel)``: ``stacklevel`` makes a ``warnings.warn``
    in the function that called this one point at the first frame above the
    owner's ``fit`` that is not scikit-learn's own code (the user's line); or
    ``(None, None)``.  Only frames of this process are visible.
    """
    frame, level = sys._getframe(2), 2
    while frame is not None:
        owner = frame.f_locals.get("self") if frame.f_code.co_name.startswith("fit") else None
        if isinstance(owner, cls):
            sklearn_dir = os.path.dirname(sklearn.__file__)
            while frame.f_back is not None and frame.f_code.co_filename.startswith(sklearn_dir):
                frame, level = frame.f_back, level + 1
            return owner, level
        frame, level = frame.f_back, level + 1
    return None, None


class DPEstimatorMixin:
    """Privacy life cycle of a DP estimator: the one template every ``fit`` runs.

    Subclasses store ``epsilon``, ``delta``, ``accountant``, ``random_state``
    (and ``secure_noise``) in ``__init__``.  Their public ``fit``, decorated by
    :func:`private_fit_context`, returns ``self._private_fit(X, ...)``, which
    runs, in this order and nowhere else:

    1. ``secure_noise`` is resolved once (the parameter, or the package
       default); under it a fit whose mechanisms (``_noise_mechanisms()``)
       include one without an exact sampler is refused; then
       ``_check_params()`` and ``_check_public_input(X, ...)``: checks of the
       parameters, alone and against what is public about the input (its
       shape, never a value); nothing is reserved yet;
    2. ``_privacy_plan()``: the :class:`PrivacyPlan`, from the parameters
       alone;
    3. hold the plan's budget on the user's
       :class:`~skdp.privacy.BudgetAccountant` (a
       :class:`~skdp.privacy.BudgetHold`, charging nothing if it does not
       fit) and open the fit's :class:`~skdp.privacy.PrivacyLedger`;
    4. ``_validate_input(X, ...)``: read the training data (after the
       reservation: an error there depends on the data too);
    5. ``_calibrate(data, plan)``: the noise scales, from the plan and the
       public size;
    6. ``_fit_private(data, plan, rng, ledger)``: fit and set the released
       attributes, every release through a mechanism that records its event
       on ``ledger``;
    7. settle: ``privacy_spent_`` is read off the ledger, checked against the
       request, and the hold is settled to it.

    A plan with ``private=False`` (a non-private reference mode) skips 3 and
    7: ``privacy_spent_`` is ``(inf, 0)`` and the model holds no
    ``privacy_ledger_``.  A fit that raises between 3 and 7 closes its hold
    charged in full (at least what its ledger released) and forgets what it
    fitted.  What a fitted model may hold is declared in
    ``_released_attributes``; anything else is a release outside the
    guarantee, which skdp's release-surface test refuses.
    """

    #: Neighbouring relation ``privacy_spent_`` refers to.
    _neighbouring = REPLACE_ONE

    #: The fitted state this estimator releases, in one place: every name here
    #: is accounted on the ledger, a public quantity the user declared, or a
    #: function of those alone (post-processing).  Anything else a fitted model
    #: holds is a release outside the guarantee; the common release-surface
    #: test (``tests/test_release_surface.py``) refuses it, walking the whole
    #: pickled object graph.  :data:`SKLEARN_METADATA` and
    #: :data:`PRIVACY_METADATA` are added by :meth:`_release_surface`.
    _released_attributes = frozenset()

    #: Private working state: statistics of the data that a fitted model keeps
    #: *in memory only*, because a release it makes after ``fit`` needs them and
    #: charges that release to the budget when it happens (OPS's further
    #: posterior samples).  Never a release: :meth:`__getstate__` drops every
    #: name here, so no pickle, copy by pickling, or process boundary carries
    #: them, and the release-surface test checks that.
    _working_state = frozenset()

    @classmethod
    def _release_surface(cls):
        """Every attribute name a fitted instance may hold besides its parameters."""
        return (
            SKLEARN_METADATA
            | PRIVACY_METADATA
            | {AFTER_FIT_COUNTER, PRIVACY_OWNER}
            | frozenset(cls._released_attributes)
        )

    def __getstate__(self):
        # A Generator or RandomState handed in as ``random_state`` has been
        # stepped past this fit's noise draws; MT19937 and PCG64 can both be
        # run backwards from that state to the draws, hence to the noiseless
        # statistics.  The user holds the object (and knows it removes the
        # noise, see the docstring); a pickle of the model must not carry it.
        state = super().__getstate__() if hasattr(super(), "__getstate__") else self.__dict__.copy()
        if isinstance(state.get("random_state"), np.random.Generator | np.random.RandomState):
            state = dict(state, random_state=None)
        if "secure_noise" in state and state["secure_noise"] is None and resolve_secure_noise(None):
            # Worker processes (joblib's loky, multiprocessing) never see this
            # process's set_config: the estimator carries the package default
            # with it, so a fit sent there samples exactly as it would here.
            # Only True is carried: the copy can never sample less securely
            # than the receiving process's own default.
            state = dict(state, secure_noise=True)
        if self._working_state & state.keys():
            state = {k: v for k, v in state.items() if k not in self._working_state}
        return state

    def _resolve_secure_noise(self):
        """This fit's (or this release's) ``secure_noise``: the parameter, or the package default.

        Read once per fit, at the start of :meth:`_private_fit`, and once per
        release made after ``fit``; the result is passed on explicitly.
        """
        return resolve_secure_noise(getattr(self, "secure_noise", None))

    def _noise_mechanisms(self):
        """The mechanism classes this fit releases through, from the parameters alone.

        Each class says whether it can sample exactly on a grid
        (``exact_sampler``); under ``secure_noise`` the template refuses the
        fit, before anything is reserved, if one cannot
        (its ``refuse_secure_noise()``).  Listing only the mechanisms without
        an exact sampler is enough; the fit's ledger refuses any
        floating-point release under secure noise anyway, so an omission
        cannot release, it only refuses later (with the budget charged).
        """
        return ()

    def _refuse_secure_noise_without_exact_sampler(self):
        """Raise the refusal of the first mechanism of this fit that has no exact sampler."""
        for mechanism in self._noise_mechanisms():
            if not mechanism.exact_sampler:
                mechanism.refuse_secure_noise()

    def _generator_after_fit(self):
        """Generator of the next random call made after ``fit`` (``sample`` and the like).

        Never the fit's noise stream: fresh entropy for ``random_state=None``;
        for an int seed the ``k``-th call since the fit draws from a stream
        spawned from that seed (:func:`skdp._random.generator_after_fit`), so a
        fit followed by the same calls reproduces exactly; a ``RandomState`` or
        ``Generator`` the user passed is drawn from further.
        """
        draw = self.__dict__.get(AFTER_FIT_COUNTER, 0)
        setattr(self, AFTER_FIT_COUNTER, draw + 1)
        return generator_after_fit(self.random_state, draw)

    def _fit_generator(self):
        """The generator of this fit's noise: used during ``fit``, never stored.

        Also restarts the count of the calls made after ``fit``.
        """
        self.__dict__.pop(AFTER_FIT_COUNTER, None)
        return check_generator(self.random_state)

    # --- the template -------------------------------------------------------

    def _private_fit(self, X, y=None, **fit_params):
        """Run the privacy life cycle of one fit (see the module docstring); return self.

        Each estimator's ``fit`` (decorated by :func:`private_fit_context`)
        calls this, with its own signature and docstring in front.
        """
        _warn_under_sklearn_search(self)
        _warn_after_non_private_steps(self)
        secure = self._resolve_secure_noise()  # once: the package setting may change meanwhile
        if secure:
            self._refuse_secure_noise_without_exact_sampler()
        self._check_params()
        self._refuse_one_dimensional_input(X)
        self._check_public_input(X, y, **fit_params)
        _warn_if_delta_reaches_one_over_n(self, X)
        plan = replace(self._privacy_plan(), secure_noise=secure)
        if not plan.private:
            rng = self._fit_generator()
            data = self._validate_input(X, y, **fit_params)
            self._fit_private(data, self._calibrate(data, plan), rng, None)
            self.__dict__.pop("privacy_ledger_", None)
            self.privacy_spent_ = PrivacySpent(math.inf, 0.0)
            return self
        ledger, rng = self._begin_private_fit(plan)
        try:
            # The hold is closed on every exit path: settled by
            # _end_private_fit, or, if anything below raises, charged at
            # least the hold and at least what the ledger released.
            with self._budget_hold:
                data = self._validate_input(X, y, **fit_params)
                plan = self._calibrate(data, plan)
                self._fit_private(data, plan, rng, ledger)
                self._end_private_fit(ledger, plan)
        except BaseException:
            # Whatever the failed fit set may hold unaccounted releases.
            self._discard_fit()
            raise
        finally:
            self.__dict__.pop("_budget_hold", None)
            self.__dict__.pop("_staged_filter", None)
        return self

    def _check_params(self):
        """Checks of the parameters beyond ``_parameter_constraints`` (public: nothing reserved yet)."""

    def _accepts_one_dimensional_input(self):
        """Whether a 1-D ``X`` is valid input (a net whose module reads one index per row); else refused."""
        return False

    def _refuse_one_dimensional_input(self, X):
        """Refuse a 1-D ``X`` by its shape alone (public), before the hold, every estimator alike.

        scikit-learn's own refusal prints the array (``array=[...]``): a
        release.  This one names the shape only.
        """
        shape = getattr(X, "shape", None)
        if shape is None and isinstance(X, list | tuple) and X and np.ndim(X[0]) == 0:
            shape = (len(X),)
        if shape is not None and len(shape) == 1 and not self._accepts_one_dimensional_input():
            raise ValueError(
                f"Expected 2D array, got 1D array instead: {type(self).__name__} expects X of shape "
                "(n_samples, n_features); reshape it with X.reshape(-1, 1) if it has a single feature."
            )

    def _check_public_input(self, X, y=None, **fit_params):
        """Checks that read only what is public about the input, before the reservation.

        What can be known without reading a value (the number of columns of
        an array, a DataFrame, a memmap or a Dask array) is public; a check
        of the parameters against it belongs here, so that it refuses
        before anything is charged.  Never read a value of ``X`` here.
        """

    def _privacy_plan(self):
        """The :class:`PrivacyPlan` of this fit, from the parameters alone."""
        return PrivacyPlan(self.epsilon, self.delta, getattr(self, "composition", DEFAULT_COMPOSITION))

    def _validate_input(self, X, y=None, **fit_params):
        """The validated training data (after the reservation: reading it is a release)."""
        return validate_fit_input(self, X)

    def _calibrate(self, data, plan):
        """Complete ``plan`` with what needs the public size of ``data`` (noise scales)."""
        return plan

    def _fit_private(self, data, plan, rng, ledger):
        """Fit on ``data`` and set the released attributes; every release records on ``ledger``."""
        raise NotImplementedError

    # --- the steps the template is made of ------------------------------------

    def _begin_private_fit(self, plan):
        """Reserve ``plan``'s budget before touching data; return (ledger, rng).

        ``plan`` (a :class:`PrivacyPlan`) gives the ledger's composition and
        ``secure_noise`` and the ``(epsilon, delta)`` reserved.
        """
        ledger = PrivacyLedger(
            composition=plan.composition, neighbouring=self._neighbouring, secure_noise=plan.secure_noise
        )
        rng = self._fit_generator()
        # Last: whatever fails after the hold is charged at least the hold,
        # so nothing that can fail without the data comes after it.
        self._reserve_budget(plan.epsilon, plan.delta).track(ledger)
        return ledger, rng

    def _reserve_budget(self, epsilon, delta):
        """Hold ``(epsilon, delta)`` on the user's budget for this fit; return the hold.

        A :class:`~skdp.privacy.BudgetHold` (a no-op one without a budget,
        so that the steps after it never branch), kept as ``_budget_hold``
        for the fit's duration only.  Raises
        :class:`~skdp.exceptions.BudgetExceededError` with nothing charged
        if the request does not fit.  A hold left open by an earlier fit of
        this estimator that failed outside the template stays charged on the
        budget; it is only forgotten here.
        """
        self._budget_hold = hold(self.accountant, epsilon, delta, self._neighbouring, type(self).__name__)
        return self._budget_hold

    def _settle_budget(self, spent, events=None):
        """Replace this fit's hold by ``spent`` (its ``privacy_spent_``) and its events.

        The budget composes the fits' events (:class:`~skdp.privacy.BudgetAccountant`),
        which needs ``spent`` to be a guarantee of exactly those events:
        ``events`` when given, else the fit's ``privacy_ledger_.events`` when
        ``spent`` is its ``privacy_spent_``.  Any other amount is settled
        without events, by basic composition.  An amount above the hold is
        recorded, then ValueError (:meth:`~skdp.privacy.BudgetHold.settle`).
        """
        held = self.__dict__.pop("_budget_hold", None)
        if held is None:
            # Every path that settles holds first; charging without a hold
            # would reopen the check-then-spend race.
            raise RuntimeError("Internal error: a fit finished without a budget hold.")
        ledger = self.__dict__.get("privacy_ledger_")
        if events is None and ledger is not None and tuple(spent) == tuple(self.privacy_spent_):
            events = ledger.events
        held.settle(*spent, events=events)

    def _discard_fit(self):
        """Forget everything a fit set (names ending in ``_``, the working state, the draw counter).

        Called when a fit fails after its hold: what it set may hold
        releases its ``privacy_spent_`` does not cover, and a model that
        failed must not stay usable (predicting with half a fit).  The
        parameters stay.
        """
        params = set(self.get_params(deep=False)) if hasattr(self, "get_params") else set()
        surface = self._release_surface() | self._working_state
        for name in list(vars(self)):
            if name in params:
                continue
            if name in surface or (name.endswith("_") and not name.startswith("__")):
                del self.__dict__[name]

    def _calibrate_staged(self, ledger, make_events, epsilon=None, delta=None):
        """The staged-plan step: calibrate a plan that depends on a release already on ``ledger``.

        For fits that release a noisy statistic first (a noisy count, noisy
        cluster sizes) and plan the rest from it.  The events on ``ledger``
        so far are the first stage (their plan is public; their outcome is
        not read here); ``make_events(z)`` gives the second stage's events
        at noise multiplier ``z`` for the plan the outcome chose.  The
        calibration is an RDP filter at one order fixed from the first
        stage's events alone (:mod:`skdp.privacy.staged`): every possible
        outcome's second stage fits in the same remaining RDP, so the
        adaptive composition meets ``(epsilon, delta)`` (default: the
        estimator's).  The fit then reports that claim (the filter's
        guarantee, or the ledger's composition if larger) and settles the
        budget by basic composition, not by the events of one outcome.

        Returns
        -------
        noise_multiplier : float
        """
        from .privacy.staged import staged_filter

        epsilon = self.epsilon if epsilon is None else epsilon
        delta = self.delta if delta is None else delta
        staged = staged_filter(ledger.events, epsilon, delta, ledger.neighbouring)
        self._staged_filter = staged
        return staged.calibrate(make_events)

    def _guarantee(self, ledger, plan):
        """What this fit's releases cost: the ledger's composition at the plan's delta.

        A composite overrides it (:class:`~skdp.pipeline.DPPipeline`: the
        smaller of the composition and the basic sum of its steps'
        guarantees; a search: its worst case over the refits it could have
        made).
        """
        return ledger.privacy_spent(plan.delta)

    def _settled_events(self, ledger, spent):
        """The events the budget composes for this fit, or ``()`` to add ``spent`` by basic composition.

        The budget composes an entry by its events only when ``spent`` is
        exactly their guarantee (:class:`~skdp.privacy.BudgetAccountant`).
        """
        return ledger.events

    def _overspent_message(self, spent, plan):
        """The error of a fit that released more than its plan reserved."""
        return (
            f"Internal error: {type(self).__name__}'s fit spent {tuple(spent)} > the "
            f"({plan.epsilon}, {plan.delta}) it reserved; the budget was charged what was spent and "
            "the fit was discarded."
        )

    def _end_private_fit(self, ledger, plan):
        """Set ``privacy_spent_`` from the fit's ledger, check it against ``plan``'s request, settle the budget."""
        staged = self.__dict__.pop("_staged_filter", None)
        # A staged plan: the filter's claim holds whatever the first
        # release's outcome, once every event on the ledger fits in its
        # RDP budget at its order; the ledger's own composition of this
        # outcome's events does not (it assumes a fixed plan), and under
        # "basic" or "advanced" it is far looser than the claim, so it is
        # not computed (a PLD composition per fit).  Events beyond the
        # filter's budget fall back to the larger of the two, which fails
        # the check below.
        if staged is not None and staged.rdp(ledger.events) <= staged.budget * (1 + 1e-9) + 1e-15:
            spent = PrivacySpent(staged.epsilon, staged.delta)
        else:
            spent = self._guarantee(ledger, plan)
            if staged is not None:
                spent = PrivacySpent(max(spent.epsilon, staged.epsilon), max(spent.delta, staged.delta))
        if spent.epsilon > plan.epsilon * (1 + 1e-9) or spent.delta > plan.delta * (1 + 1e-9):
            # A calibration bug, never a user error: refuse to release.  The
            # noise was drawn already, so the budget is charged what was
            # really spent (settle records an excess before it complains),
            # and the model forgets the fit: it must not predict from it.
            with contextlib.suppress(ValueError):
                self._settle_budget(spent, ledger.events)
            message = self._overspent_message(spent, plan)
            self._discard_fit()
            raise RuntimeError(message)
        self.privacy_spent_ = PrivacySpent(float(spent.epsilon), float(spent.delta))
        self.privacy_ledger_ = ledger
        # Cannot raise: the amount is within the hold.  A staged fit adds to
        # the budget by basic composition (its events are one outcome's).
        events = () if staged is not None else self._settled_events(ledger, self.privacy_spent_)
        self._settle_budget(self.privacy_spent_, events)

    def _spend_after_fit(self, ledger_events):
        """Account releases made after ``fit`` (e.g. further OPS samples), before they are drawn.

        Charged to the composite that owns the fit (:data:`PRIVACY_OWNER`: a
        :class:`~skdp.pipeline.DPPipeline`, a private search), or else to
        this estimator's budget; ``privacy_spent_`` grows to cover everything
        released so far.  A refusal raises
        :class:`~skdp.exceptions.BudgetExceededError` before anything is
        drawn or recorded.  See :func:`account_after_fit`.
        """
        return account_after_fit(self, ledger_events, type(self).__name__, self.delta)


def account_after_fit(holder, events, label, delta, *, composes=True):
    """Charge ``events``, released by ``holder`` after its fit, and grow its guarantee; return its new ledger.

    The one path of every release made after ``fit``, for an estimator
    (:meth:`DPEstimatorMixin._spend_after_fit`) and a composite that owns
    fitted models (:meth:`skdp.pipeline.PostFitOwnerMixin._charge_after_fit`).
    Called before the release is drawn:

    1. the events are put in ``holder``'s relation and costed on their own
       (at ``delta``);
    2. they are charged to ``holder``'s owner (:data:`PRIVACY_OWNER`, the
       composite that fitted it), which charges its own owner or budget the
       same way, or else to ``holder``'s budget by ``spend`` (one atomic
       check-and-record); a refusal raises
       :class:`~skdp.exceptions.BudgetExceededError` before anything is
       drawn, and nothing is recorded anywhere;
    3. ``holder``'s ledger gains the events and its ``privacy_spent_``
       becomes the smaller of their composition with everything released so
       far and the basic sum of the guarantee before and the new releases'
       own (``composes=False``: that sum only, for a holder whose
       ``privacy_spent_`` covers more than its ledger's events, a search's
       worst case over its refits).

    The budget is charged the new releases' own guarantee, with their
    events, so that the entry joins the budget's composed group (its
    validity argument needs every entry's amount to be a guarantee of its
    own events); the increase of ``privacy_spent_`` is not such a guarantee
    in general.
    """
    ledger, before = holder.privacy_ledger_, holder.privacy_spent_
    events = [event.to_relation(ledger.neighbouring) for event in events]
    alone = PrivacyLedger(ledger.composition, ledger.neighbouring)
    alone.events = list(events)
    alone_spent = alone.privacy_spent(delta)
    trial = PrivacyLedger(ledger.composition, ledger.neighbouring)
    trial.events = [*ledger.events, *events]
    if composes:
        total = composed_or_basic(trial, [before, alone_spent], delta)
    else:
        total = basic_sum([before, alone_spent])
    owner = holder.__dict__.get(PRIVACY_OWNER)
    if owner is not None:
        # The owner charges its own ledger, budget and owner first; a
        # refusal there leaves this holder unchanged.
        owner._charge_after_fit(events, label)
    elif holder.accountant is not None:
        holder.accountant.spend(*alone_spent, ledger.neighbouring, label, events=alone.events)
    holder.privacy_ledger_ = trial
    holder.privacy_spent_ = total
    return trial


def basic_sum(guarantees):
    """Basic composition of ``(epsilon, delta)`` guarantees (Dwork & Roth 2014, Thm. 3.16)."""
    return PrivacySpent(
        float(sum(g.epsilon for g in guarantees)), float(min(1.0, sum(g.delta for g in guarantees)))
    )


def composed_or_basic(ledger, guarantees, delta):
    """The smaller of the ledger's composition at ``delta`` and the basic sum of ``guarantees``.

    Both are guarantees of the same releases (the first by the ledger's
    accountant, the second by basic composition of the parts' own
    guarantees), so a composite, or a model charged after fit, reports the
    one with the smaller epsilon.
    """
    composed = ledger.privacy_spent(delta)
    basic = basic_sum(guarantees)
    if math.isfinite(composed.epsilon) and composed.epsilon <= basic.epsilon:
        return PrivacySpent(float(composed.epsilon), float(composed.delta))
    return basic
