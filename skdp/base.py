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
3. *reserve* the plan's budget on the user's
   :class:`~skdp.privacy.BudgetAccountant` (an atomic check-and-record that
   raises :class:`~skdp.exceptions.BudgetExceededError` and charges nothing
   if the request does not fit), open the fit's
   :class:`~skdp.privacy.PrivacyLedger` and derive the noise generator;
4. validate the input (:meth:`~DPEstimatorMixin._validate_input`; one helper,
   :func:`skdp._input.validate_fit_input`, for arrays, memmaps, Dask and
   factories of chunks);
5. calibrate the noise to the plan and the public size
   (:meth:`~DPEstimatorMixin._calibrate`);
6. fit and release (:meth:`~DPEstimatorMixin._fit_private`): every noisy
   release goes through a mechanism that records its event on the ledger;
7. *settle*: ``privacy_spent_`` is read off the ledger, checked against the
   request, and the reservation is settled to it.

An estimator writes its plan and its releases, nothing else.  A non-private
reference mode (``PrivacyPlan(private=False)``) is one switch: it skips 3
and 7 and reports ``privacy_spent_ = (inf, 0)``.

A fit that raises between 3 and 7 leaves its reservation charged in full: it
may have read the data (even an input error depends on the data) or drawn a
noisy statistic that is still in memory, so skdp never assumes it released
nothing.  Errors raised before 3 (parameters, plan) reserve nothing.

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
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
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
from .exceptions import PrivacyLeakWarning, without_data_values
from .privacy import BudgetAccountant, PrivacyLedger, PrivacySpent
from .privacy.accountant import DEFAULT_COMPOSITION
from .privacy.events import REPLACE_ONE

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
    settings : mapping, default={}
        The estimator's own public choices (noise multipliers, iteration
        counts, mechanisms) for the ``_calibrate`` and ``_fit_private`` steps
        of :class:`DPEstimatorMixin`; public by construction, since nothing
        here has seen the data.
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
    settings: Mapping[str, Any] = field(default_factory=dict)
    secure_noise: bool = False

    def with_settings(self, **settings):
        """A copy with ``settings`` updated (calibration adds what it derived)."""
        return replace(self, settings={**self.settings, **settings})


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
    warnings.warn(
        f"delta={delta:g} is not below 1/n_samples (n_samples={n}, public): at such a delta, "
        "publishing one training row at random meets the guarantee. Use a delta well below "
        "1/n_samples (1e-5, the default, or 1/n_samples**1.1).",
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


def fitted_without_dp(step):
    """Whether a pipeline step learns from the data without differential privacy.

    skdp estimators, ``None``/``"passthrough"`` and stateless steps
    (scikit-learn's ``requires_fit=False`` tag, e.g. a ``FunctionTransformer``)
    do not; any other step (``StandardScaler``, ``PCA``, a third-party step
    without tags) is assumed to.
    """
    from sklearn.utils import get_tags

    if step is None or isinstance(step, str) or isinstance(step, DPEstimatorMixin):
        return False
    if getattr(step, "_warns_about_its_steps", False):  # a nested DPPipeline
        return False
    try:
        return bool(get_tags(step).requires_fit)
    except Exception:  # a third-party step without tags: assume it learns
        return True


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
        if fitted_without_dp(step):
            leaky.append(name)
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
    3. reserve the plan's budget on the user's
       :class:`~skdp.privacy.BudgetAccountant` (charging nothing if it does
       not fit) and open the fit's :class:`~skdp.privacy.PrivacyLedger`;
    4. ``_validate_input(X, ...)``: read the training data (after the
       reservation: an error there depends on the data too);
    5. ``_calibrate(data, plan)``: the noise scales, from the plan and the
       public size;
    6. ``_fit_private(data, plan, rng, ledger)``: fit and set the released
       attributes, every release through a mechanism that records its event
       on ``ledger``;
    7. settle: ``privacy_spent_`` is read off the ledger, checked against the
       request, and the reservation is settled to it.

    A plan with ``private=False`` (a non-private reference mode) skips 3 and
    7: ``privacy_spent_`` is ``(inf, 0)`` and the model holds no
    ``privacy_ledger_``.  A fit that raises between 3 and 7 leaves its
    reservation charged in full.  What a fitted model may hold is declared in
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
        return SKLEARN_METADATA | PRIVACY_METADATA | {AFTER_FIT_COUNTER} | frozenset(cls._released_attributes)

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
        data = self._validate_input(X, y, **fit_params)
        plan = self._calibrate(data, plan)
        self._fit_private(data, plan, rng, ledger)
        self._end_private_fit(ledger)
        return self

    def _check_params(self):
        """Checks of the parameters beyond ``_parameter_constraints`` (public: nothing reserved yet)."""

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
        # Last: whatever fails after the reservation keeps it charged, so
        # nothing that can fail without the data comes after it.
        self._reserve_budget(plan.epsilon, plan.delta)
        return ledger, rng

    def _reserve_budget(self, epsilon, delta):
        """Reserve ``(epsilon, delta)`` on the user's budget (if any) for this fit.

        Raises :class:`~skdp.exceptions.BudgetExceededError` with nothing
        reserved if the request does not fit.  A reservation left over by an
        earlier fit of this estimator that failed stays charged on the budget;
        it is only forgotten here.
        """
        self._budget_reservation = None
        if self.accountant is not None:
            self._budget_reservation = self.accountant.reserve(
                epsilon, delta, self._neighbouring, type(self).__name__
            )

    def _settle_budget(self, spent, events=None):
        """Replace this fit's reservation by ``spent`` (its ``privacy_spent_``) and its events.

        The budget composes the fits' events (:class:`~skdp.privacy.BudgetAccountant`),
        which needs ``spent`` to be a guarantee of exactly those events:
        ``events`` when given, else the fit's ``privacy_ledger_.events`` when
        ``spent`` is its ``privacy_spent_``.  Any other amount (part of a fit
        settled in pieces) is settled without events, by basic composition.
        """
        reservation = self.__dict__.pop("_budget_reservation", None)
        if self.accountant is None:
            return
        if reservation is None:
            # Every path that charges an accountant reserves first; charging
            # without a reservation would reopen the check-then-spend race.
            raise RuntimeError("Internal error: a fit finished without a budget reservation.")
        ledger = self.__dict__.get("privacy_ledger_")
        if events is None and ledger is not None and tuple(spent) == tuple(self.privacy_spent_):
            events = ledger.events
        self.accountant.settle(reservation, *spent, self._neighbouring, events=events)

    def _end_private_fit(self, ledger):
        """Set ``privacy_spent_`` from the fit's ledger and settle the user's budget."""
        spent = ledger.privacy_spent(self.delta)
        if spent.epsilon > self.epsilon * (1 + 1e-9) or spent.delta > self.delta * (1 + 1e-9):
            # A calibration bug, never a user error: refuse to release.  The
            # noise was drawn already, so the budget is charged what was
            # really spent (settle records an excess before it complains).
            with contextlib.suppress(ValueError):
                self._settle_budget(spent, ledger.events)
            raise RuntimeError(
                f"Internal error: the fit spent {tuple(spent)} > requested ({self.epsilon}, {self.delta})."
            )
        self.privacy_spent_ = PrivacySpent(float(spent.epsilon), float(spent.delta))
        self.privacy_ledger_ = ledger
        # Cannot raise BudgetExceededError: the amount is within the reservation.
        self._settle_budget(self.privacy_spent_, ledger.events)

    def _spend_after_fit(self, ledger_events):
        """Account releases made after ``fit`` (e.g. further OPS samples).

        Called before the release is made.  Its exact cost is known, so it is
        charged to the user's budget at once by ``spend`` (one atomic
        check-and-record, a reservation settled on the spot): a refusal
        raises :class:`~skdp.exceptions.BudgetExceededError` before anything
        is drawn, and two concurrent calls cannot both pass a check only one
        fits.  ``privacy_spent_`` grows to the composition of everything
        released so far.

        The budget is charged the guarantee of the new releases *on their
        own*, with their events, so that the entry joins the budget's
        composed group (:class:`~skdp.privacy.BudgetAccountant`, whose
        validity argument needs every entry's amount to be a guarantee of its
        own events).  The increase of ``privacy_spent_`` is not such a
        guarantee in general (a sublinear composition makes it smaller than
        the new releases' own cost); for pure-DP releases (OPS samples) the
        two are equal.
        """
        trial = PrivacyLedger(self.privacy_ledger_.composition, self._neighbouring)
        trial.events = list(self.privacy_ledger_.events)
        alone = PrivacyLedger(self.privacy_ledger_.composition, self._neighbouring)
        for event in ledger_events:
            trial.record(event)
            alone.record(event)
        total = trial.privacy_spent(self.delta)
        if self.accountant is not None:
            self.accountant.spend(
                *alone.privacy_spent(self.delta), self._neighbouring, type(self).__name__, events=alone.events
            )
        self.privacy_ledger_ = trial
        self.privacy_spent_ = PrivacySpent(float(total.epsilon), float(total.delta))
        return trial
