"""A scikit-learn ``Pipeline`` that owns the privacy of its steps: one guarantee, one budget.

:class:`DPPipeline` fits its steps as scikit-learn's ``Pipeline`` does and
adds what a pipeline of DP steps needs an owner for: the composition of the
steps' privacy events into one ``privacy_spent_``, one reservation on a
shared budget, a split of one requested ``(epsilon, delta)`` among the steps,
independent noise streams from one ``random_state``, and a warning for every
step fitted without DP.  The design and its justification are in
:doc:`/pipeline`.
"""

from __future__ import annotations

import numbers
import sys
import warnings
from dataclasses import dataclass
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.pipeline import Pipeline, _name_estimators
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if

from ._random import child_generator
from .base import (
    PRIVACY_METADATA,
    PRIVACY_OWNER,
    SKLEARN_METADATA,
    DPEstimatorMixin,
    PrivacyPlan,
    _user_stacklevel,
    account_after_fit,
    composed_or_basic,
    steps_fitted_without_dp,
)
from .exceptions import BudgetExceededError, PrivacyLeakWarning
from .privacy import (
    DEFAULT_COMPOSITION,
    BudgetAccountant,
    PrivacySpent,
    compose,
    group_guarantee,
    record_share,
)
from .privacy.events import ADD_REMOVE, REPLACE_ONE
from .privacy.ledger import COMPOSITION_CONSTRAINT
from .privacy.roots import illinois_bracket, secant_within

#: The pipeline's delta when only its epsilon is given: the default of every skdp estimator.
DEFAULT_DELTA = 1e-5

#: Relative tolerance of the check that the pipeline spent no more than it reserved.
_RTOL = 1e-9

#: The composed split spends at least ``1 - _SPLIT_RTOL`` of the pipeline's epsilon (:func:`_composed_scale`).
_SPLIT_RTOL = 1e-3


def _super_has(name):
    # Pipeline's fit_transform / fit_predict exist only when the final step
    # has them (scikit-learn's available_if); ours follow the same rule.
    return lambda self: hasattr(super(DPPipeline, self), name)


def split_budget(requests, epsilon=None, delta=None):
    """Split ``(epsilon, delta)`` among steps in proportion to their own requests.

    Basic composition: steps spending ``(epsilon_i, delta_i)`` with
    ``sum epsilon_i = epsilon`` and ``sum delta_i = delta`` spend at most
    ``(epsilon, delta)`` together (Dwork & Roth 2014, Thm. 3.16), whatever
    their mechanisms, so the composition the pipeline reports (never above the
    basic sum) stays within the request.

    Parameters
    ----------
    requests : list of (float, float)
        Each DP step's own ``(epsilon_i, delta_i)``.
    epsilon, delta : float or None
        The pipeline's request; None keeps the steps' own values.

    Returns
    -------
    shares : list of (float, float)
        ``epsilon * epsilon_i / sum_j epsilon_j`` (and the same for delta; when
        every step asks for ``delta_i = 0``, each gets ``delta / k``).
    """
    eps = [float(e) for e, _ in requests]
    dlt = [float(d) for _, d in requests]
    if epsilon is not None:
        total = sum(eps)
        eps = [float(epsilon) * e / total for e in eps]
    if delta is not None:
        total = sum(dlt)
        dlt = [float(delta) * d / total for d in dlt] if total > 0 else [float(delta) / len(dlt)] * len(dlt)
    return list(zip(eps, dlt, strict=True))


@dataclass(frozen=True)
class PipelineSettings:
    """:class:`DPPipeline`'s plan: its cloned steps, from the parameters alone (no data read).

    Attributes
    ----------
    steps : list of (str, estimator)
        The cloned steps the fit trains, in order.
    dp : list of (str, estimator)
        The DP estimators among the steps and nested in them
        (:func:`dp_estimators_in`), each with its own request.
    relation : str
        The pipeline's neighbouring relation (``"replace_one"`` or
        ``"add_remove"``).
    """

    steps: list
    dp: list
    relation: str


class PostFitOwnerMixin:
    """What a composite (a :class:`DPPipeline`, a private search) does for the models it fitted.

    After its fit, the composite marks every DP estimator it fitted (nested at
    any depth, and the chosen model of a search) with itself as owner
    (:data:`skdp.base.PRIVACY_OWNER`).  A release such a model makes after
    ``fit`` (further OPS posterior samples, any call through
    :meth:`skdp.base.DPEstimatorMixin._spend_after_fit`) is charged here:
    the new events join the composite's ledger, its ``privacy_spent_`` grows
    to their composition with everything it released, and its budget (or,
    for a pipeline chosen by a search, the search's ledger and budget) is
    charged their cost.  A refusal of the budget raises
    :class:`~skdp.exceptions.BudgetExceededError` before anything is drawn,
    and nothing is recorded anywhere.
    """

    #: Whether ``privacy_spent_`` after a post-fit release may be the
    #: composition of the whole ledger (else the basic sum of the guarantee
    #: before and the release's own): False when ``privacy_spent_`` covers
    #: more than the ledger's events (a search's worst case over its refits).
    _post_fit_composes = True

    def _settled_events(self, ledger, spent):
        # A composite may report more than (or other than) its ledger's
        # composition (the basic sum of its steps, a search's worst refit):
        # the budget composes its events only when the amount is exactly
        # their guarantee (skdp.base.DPEstimatorMixin._settled_events).
        composed = ledger.privacy_spent(spent.delta)
        return ledger.events if composed.epsilon == spent.epsilon else ()

    def _charge_after_fit(self, events, label):
        """Charge ``events`` (released after this composite's fit by a model it owns); see the class docstring."""
        if "privacy_ledger_" not in self.__dict__:
            raise RuntimeError(
                f"The {type(self).__name__} that fitted this model holds no ledger (it was not fitted, or its "
                "fit failed): a release after fit cannot be charged to it. Refit the composite."
            )
        account_after_fit(
            self,
            events,
            f"{type(self).__name__}: {label}",
            self.privacy_spent_.delta,
            composes=self._post_fit_composes,
        )


def _is_composite(obj):
    return isinstance(obj, PostFitOwnerMixin)


def dp_estimators_in(name, step):
    """The DP estimators of ``step``, itself or nested: ``[(full_name, estimator), ...]``.

    Nested estimators are found through ``get_params(deep=True)``
    (``ColumnTransformer``, ``FeatureUnion``, nested ``Pipeline``,
    ``TransformedTargetRegressor``, any meta-estimator) and named as there
    (``"pre__num"``).  A DP estimator's own nested estimators are its
    business.  A composite (a :class:`DPPipeline`, a private search) inside
    ``step`` is refused: its steps belong in the outer pipeline.
    """
    if step is None or isinstance(step, str):
        return []
    if _is_composite(step):
        raise TypeError(
            f"Step {name!r} is a {type(step).__name__}: a composite holds its own budget; list its steps "
            "in this pipeline instead."
        )
    if isinstance(step, DPEstimatorMixin):
        return [(name, step)]
    if not hasattr(step, "get_params"):
        return []
    found, owned, seen = [], [], set()
    for key, value in step.get_params(deep=True).items():
        if any(key.startswith(prefix + "__") for prefix in owned):
            continue
        if _is_composite(value):
            raise TypeError(
                f"Step {name}__{key!r} is a {type(value).__name__}: a composite holds its own budget; "
                "list its steps in this pipeline instead."
            )
        if isinstance(value, DPEstimatorMixin):
            owned.append(key)
            if id(value) not in seen:
                seen.add(id(value))
                found.append((f"{name}__{key}", value))
    return found


def fitted_dp_estimators(root):
    """The fitted DP estimators in ``root``'s object graph (a fitted composite's steps), in a stable order.

    Walks the fitted state (``transformers_`` of a ``ColumnTransformer``,
    ``regressor_`` of a ``TransformedTargetRegressor``, the steps of nested
    pipelines, lists and dicts), not the parameters: containers fit clones of
    their parameters.  A DP estimator counts when it holds a guarantee
    (``privacy_spent_``); its own inner objects and owner links are not
    walked.
    """
    found, seen, stack = [], set(), [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or obj is None or isinstance(obj, str | bytes | np.ndarray):
            continue
        seen.add(id(obj))
        if isinstance(obj, DPEstimatorMixin):
            if "privacy_spent_" in obj.__dict__:
                found.append(obj)
            continue
        if isinstance(obj, list | tuple):
            children = list(obj)
        elif isinstance(obj, dict):
            children = list(obj.values())
        elif isinstance(obj, BaseEstimator):
            children = [v for k, v in vars(obj).items() if k != PRIVACY_OWNER]
        else:
            continue
        stack.extend(reversed(children))
    return found


class DPPipeline(PostFitOwnerMixin, DPEstimatorMixin, Pipeline):
    """A ``Pipeline`` of DP steps that reports one guarantee and charges one budget.

    Fits like scikit-learn's :class:`~sklearn.pipeline.Pipeline`, and also:

    1. *Plan* (no data read).  Every step is cloned; the fitted pipeline holds
       the fitted clones (as scikit-learn's ``Pipeline`` does when ``memory``
       is set), and the step objects passed in are never fitted or modified.
       The DP steps are the skdp estimators among the steps and nested in
       them (:func:`dp_estimators_in`: a ``ColumnTransformer``, a
       ``FeatureUnion``, a nested ``Pipeline``, any estimator exposing them
       through ``get_params(deep=True)``); they get their share of the pipeline's
       ``(epsilon, delta)`` (:func:`split_budget`: in proportion to their own
       ``epsilon`` and ``delta``, then, with ``split="composed"``, the epsilons
       scaled up until the steps' dry-run events compose to ``epsilon``:
       :meth:`_composed_shares`; ``epsilon=None`` keeps each step's own) and,
       with ``random_state`` set, an independent child of one generator each.
       Every step fitted without DP (``StandardScaler``, ``PCA``,
       ``LogisticRegression``, an inner step of a container such as
       ``'pre__cat'``; stateless steps such as ``FunctionTransformer`` and
       encoders with declared ``categories`` excepted) raises one
       :class:`~skdp.PrivacyLeakWarning` naming it: its fitted state is
       released with the pipeline and covered by no guarantee.
    2. *Hold* on ``accountant`` (:func:`skdp.privacy.hold`) the
       basic-composition sum of the DP steps' requests (an upper bound of
       what they can spend), before any step reads a row; a refusal raises
       :class:`~skdp.exceptions.BudgetExceededError` and nothing is fitted.
       The steps themselves charge nothing (their ``accountant`` must be
       None).  The hold is closed on every exit path.
    3. *Fit* the steps in order (scikit-learn's ``Pipeline.fit``).
    4. *Settle*: ``privacy_ledger_`` holds the events of every fitted DP
       estimator (:func:`fitted_dp_estimators`, in one neighbouring
       relation), ``privacy_spent_`` is their composition under
       ``composition`` (or the basic sum of their ``privacy_spent_`` when
       that is smaller), and the hold is settled to it with the events, so
       the budget composes them with its other fits.  If they spent more
       than the hold (a container fitted a DP step several times), the
       budget is charged what they spent, the fitted steps are dropped and
       ``RuntimeError`` is raised.
    5. *Own*: every fitted DP estimator is marked with the pipeline as its
       owner; a release it makes after ``fit`` (further OPS samples) is
       charged to the pipeline (:class:`PostFitOwnerMixin`).

    Composing the steps' events by RDP or PLD is valid because each step's
    noise plan (mechanisms, noise multipliers, counts) is fixed by its
    parameters and the public shape of its input before the data is read:
    the steps are adaptive in their *data* (each reads the previous step's
    output), not in their privacy parameters.

    Parameters
    ----------
    steps : list of (str, estimator)
        As in :class:`~sklearn.pipeline.Pipeline`.  DP steps are skdp
        estimators; each must have ``accountant=None`` (the pipeline holds
        the budget).
    epsilon : float, default=None
        The pipeline's epsilon, split among its DP steps in proportion to
        their own ``epsilon``.  None: each step keeps its own, and the
        pipeline's request is their sum.
    delta : float, default=None
        The same for delta (split in proportion to the steps' own deltas;
        equally when they are all 0).  None with ``epsilon`` set: ``1e-5``,
        the default of every skdp estimator, for the whole pipeline (0 when
        every DP step is pure, ``delta=0``); None with ``epsilon=None`` too:
        each step keeps its own, and the pipeline's delta is their sum.
    accountant : BudgetAccountant, default=None
        Charged once per fit: reserved before any row is read, settled to
        ``privacy_spent_`` with its events.  Shared, never copied, by
        ``clone``.
    composition : {"pld", "rdp", "zcdp", "advanced", "basic"}, default="pld"
        Accountant composing the steps' events into ``privacy_spent_``.  Each
        step calibrates its own noise with its own ``composition``.
    split : {"composed", "basic"}, default="composed"
        How ``epsilon`` is split among the DP steps.  ``"basic"``: shares in
        proportion to the steps' own epsilons that add up to it (their
        composition is usually well below it).  ``"composed"``: those shares
        scaled by a factor whose steps' events, from dry runs on a
        stand-in of zeros, compose under ``composition`` to at most
        ``epsilon`` (and at least ``1 - 1e-3`` of it) (:meth:`_composed_shares`; the basic shares where that
        does not apply, e.g. a step under add/remove neighbours).
    random_state : None, int, RandomState or Generator, default=None
        None: each step keeps its own ``random_state``.  Otherwise one
        generator (:func:`skdp._random.check_generator`) spawns an
        independent stream for each DP step, handed to the step's clone for
        its fit and removed (set to None) right after: no fitted step keeps a
        seed or generator, and a pickle of the pipeline carries none.  Whoever
        holds the seed can remove the noise: seeds are for experiments.
    transform_input, memory, verbose :
        As in :class:`~sklearn.pipeline.Pipeline`.

    Attributes
    ----------
    privacy_spent_ : PrivacySpent
        Guarantee of every DP step's releases together, under the relation of
        ``privacy_ledger_``.  Never above the pipeline's ``(epsilon, delta)``
        when given (an add/remove step in a replace-one pipeline spends the
        per-record share whose group-of-2 guarantee is its share:
        :func:`~skdp.privacy.record_share`); its events are converted
        exactly.  With ``epsilon=None`` the request is the steps' own
        budgets, an add/remove step's converted by group privacy.
    privacy_ledger_ : PrivacyLedger
        The DP steps' events, converted to one neighbouring relation:
        ``"add_remove"`` when every DP step refers to it, else
        ``"replace_one"``.

    See Also
    --------
    make_pipeline : Name the steps automatically.
    skdp.model_selection.DPGridSearchCV : Search a DPPipeline's parameters privately.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from skdp.mixture import DPGaussianMixture
    >>> from skdp.pipeline import make_pipeline
    >>> from skdp.preprocessing import DPStandardScaler
    >>> X, _ = load_iris(return_X_y=True)
    >>> pipe = make_pipeline(
    ...     DPStandardScaler(bounds=(0.0, 8.0)),
    ...     DPGaussianMixture(3, data_norm=6.0),
    ...     epsilon=2.0,
    ...     random_state=0,
    ... ).fit(X)
    >>> pipe.privacy_spent_.epsilon <= 2.0
    True
    """

    _parameter_constraints: dict = {
        **Pipeline._parameter_constraints,
        "epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "delta": [Interval(Real, 0, 1, closed="left"), None],
        "accountant": [BudgetAccountant, None],
        "composition": [COMPOSITION_CONSTRAINT],
        "split": [StrOptions({"composed", "basic"})],
        "random_state": ["random_state", np.random.Generator],
    }

    @classmethod
    def _release_surface(cls):
        """Every attribute a fitted pipeline holds besides its parameters (its steps are parameters)."""
        return SKLEARN_METADATA | PRIVACY_METADATA | {PRIVACY_OWNER}

    #: Tells skdp's estimators not to warn about this pipeline's other steps:
    #: the pipeline warns about all of them itself (skdp.base.steps_fitted_without_dp).
    _warns_about_its_steps = True

    def __init__(
        self,
        steps,
        *,
        epsilon=None,
        delta=None,
        accountant=None,
        composition=DEFAULT_COMPOSITION,
        split="composed",
        random_state=None,
        transform_input=None,
        memory=None,
        verbose=False,
    ):
        super().__init__(steps, transform_input=transform_input, memory=memory, verbose=verbose)
        self.epsilon = epsilon
        self.delta = delta
        self.accountant = accountant
        self.composition = composition
        self.split = split
        self.random_state = random_state

    # --- fit, fit_transform, fit_predict: one life cycle ----------------------

    def fit(self, X, y=None, **params):
        """Fit the steps (class docstring: plan, hold, fit, settle, own).

        Parameters
        ----------
        X : iterable
            Training data, for the first step.
        y : iterable, default=None
        **params : dict
            Routed to the steps as by :meth:`sklearn.pipeline.Pipeline.fit`.

        Returns
        -------
        self : DPPipeline
        """
        self._fit_as("fit", X, y, **params)
        return self

    @available_if(_super_has("fit_transform"))
    def fit_transform(self, X, y=None, **params):
        """Fit as :meth:`fit` and return the last step's ``fit_transform`` output."""
        return self._fit_as("fit_transform", X, y, **params)

    @available_if(_super_has("fit_predict"))
    def fit_predict(self, X, y=None, **params):
        """Fit as :meth:`fit` and return the last step's ``fit_predict`` output."""
        return self._fit_as("fit_predict", X, y, **params)

    def _fit_as(self, method, X, y, **params):
        """Run the template (:meth:`skdp.base.DPEstimatorMixin._private_fit`) around ``Pipeline.<method>``.

        Returns what ``Pipeline.<method>`` returned.  The steps passed in are
        kept aside for the fit's duration: a failed fit puts them back.
        """
        self._fit_method, self._given_steps = method, list(self.steps)
        try:
            self._private_fit(X, y, **params)
            return self.__dict__.get("_fit_output")
        finally:
            for name in ("_fit_method", "_given_steps", "_fit_output", "_stand_in"):
                self.__dict__.pop(name, None)

    # --- the template's steps (skdp.base.DPEstimatorMixin) ---------------------

    @property
    def _neighbouring(self):
        """The pipeline's relation, from its steps' classes (public): add/remove only if every DP step's is."""
        relations = {
            step._neighbouring
            for name, step in self.steps
            if step is not None and not isinstance(step, str)
            for _, step in dp_estimators_in(name, step)
        }
        return ADD_REMOVE if relations == {ADD_REMOVE} else REPLACE_ONE

    def _accepts_one_dimensional_input(self):
        # The first step reads X: a 1-D X is refused here, before the hold,
        # when that step is a DP estimator that would refuse it after.
        for _, step in self.steps:
            if step is None or isinstance(step, str):
                continue
            return not isinstance(step, DPEstimatorMixin) or step._accepts_one_dimensional_input()
        return True

    def _check_public_input(self, X, y=None, **params):
        # The composed split's dry runs (_composed_shares) fit the steps on a
        # stand-in of zeros of X's public shape: its rows (public under
        # replace-one, the only relation the composed split is used in) and
        # columns (a DataFrame's names and count), never a value.
        self.__dict__["_stand_in"] = _stand_in_for(X, y)

    def _check_params(self):
        self._validate_params()
        for name in ("privacy_spent_", "privacy_ledger_"):
            self.__dict__.pop(name, None)

    def _privacy_plan(self):
        """The pipeline's request and its cloned steps with their shares (:meth:`_plan`); warns about leaky steps."""
        steps, dp, relation, request = self._plan()
        self._warn_about_steps_without_dp(steps)
        return PrivacyPlan(
            request.epsilon,
            request.delta,
            self.composition,
            settings=PipelineSettings(steps, dp, relation),
        )

    def _begin_private_fit(self, plan):
        try:
            return super()._begin_private_fit(plan)
        except BudgetExceededError as refused:
            raise _explain_conversion(refused, plan.settings.dp, plan.settings.relation) from None

    def _validate_input(self, X, y=None, **params):
        # The steps read and validate the data, each in its own fit.
        return X, y, params

    def _fit_private(self, data, plan, rng, ledger):
        """Fit the cloned steps (``Pipeline.<method>``); record every fitted DP estimator's events on ``ledger``."""
        X, y, params = data
        steps, dp = plan.settings.steps, plan.settings.dp
        if self.random_state is not None:
            # One independent stream per DP step, from the fit's generator.
            for _, step in dp:
                step.set_params(random_state=child_generator(rng))
        self.steps = steps
        try:
            self._fit_output = getattr(Pipeline, self._fit_method)(self, X, y, **params)
        finally:
            if self.random_state is not None:
                # The generators handed to the steps were stepped past their
                # noise draws: no step keeps one, fitted or not (containers
                # fit clones of their parameters).
                for _, template in dp:
                    template.set_params(random_state=None)
                for step in fitted_dp_estimators(steps):
                    step.set_params(random_state=None)
        for step in fitted_dp_estimators(self.steps):
            for event in step.privacy_ledger_.events:
                ledger.record(event.to_relation(ledger.neighbouring))

    def _guarantee(self, ledger, plan):
        # The smaller of the events' composition and the basic sum of the
        # fitted DP estimators' own guarantees (both valid for the same releases).
        guarantees = [
            _in_relation(step.privacy_spent_, step._neighbouring, ledger.neighbouring)
            for step in fitted_dp_estimators(self.steps)
        ]
        return composed_or_basic(ledger, guarantees, plan.delta)

    def _overspent_message(self, spent, plan):
        # Not a calibration bug: a step's plan read the data, or a container
        # fitted a DP step more than once.
        fitted = fitted_dp_estimators(self.steps)
        return (
            f"The pipeline's DP steps spent {tuple(spent)} > the {(plan.epsilon, plan.delta)} it reserved "
            f"({len(fitted)} fitted DP estimators for {len(plan.settings.dp)} planned); the budget was "
            "charged what they spent and the pipeline is left unfitted."
        )

    def _end_private_fit(self, ledger, plan):
        super()._end_private_fit(ledger, plan)
        # Own: a release a fitted DP step makes after fit is charged here.
        for step in fitted_dp_estimators(self.steps):
            step.__dict__[PRIVACY_OWNER] = self

    def _discard_fit(self):
        # A failed fit keeps no fitted step (the hold stays charged).
        super()._discard_fit()
        if "_given_steps" in self.__dict__:
            self.steps = self._given_steps

    def _plan(self):
        """Cloned steps with their budgets and streams, from the parameters alone (no data read).

        Returns ``(steps, dp, relation, request)``: the cloned steps, the DP
        estimators among them and nested in them (``(name, estimator)``,
        :func:`dp_estimators_in`), the pipeline's neighbouring relation and its
        request (the basic sum of the DP estimators' requests in that
        relation).
        """
        self._validate_steps()
        steps, dp = _cloned_steps(self.steps)
        for name, step in dp:
            if step.get_params().get("accountant") is not None:
                raise ValueError(
                    f"Step {name!r} has its own accountant: a DPPipeline charges the budget once, "
                    "for all its steps; pass accountant= to the pipeline and leave the steps' None."
                )
        if not dp:
            raise ValueError(
                "A DPPipeline needs at least one skdp (DP) step; use sklearn's Pipeline otherwise."
            )
        requests = [(step.epsilon, step.delta) for _, step in dp]
        delta = self._resolved_delta(requests)
        relations = {step._neighbouring for _, step in dp}
        relation = ADD_REMOVE if relations == {ADD_REMOVE} else REPLACE_ONE
        shares = split_budget(requests, self.epsilon, delta)
        if self.epsilon is not None and len(relations) > 1:
            # The split is of the pipeline's (epsilon, delta) in its own relation,
            # replace-one: an add/remove step gets the per-record share whose
            # group-of-2 guarantee is its share (record_share), so the converted
            # shares add up to the request. (Until 2026-11-28 the step spent its
            # share in its own relation, and the request, (2 eps, 2 e^eps delta)
            # for it, exceeded the pipeline's epsilon and delta.)
            shares = [
                record_share(e, d) if step._neighbouring == ADD_REMOVE else (e, d)
                for (_, step), (e, d) in zip(dp, shares, strict=True)
            ]
        shares, public = self._composed_shares(dp, shares, delta)
        for (_, step), (eps, dlt) in zip(dp, shares, strict=True):
            step.set_params(epsilon=eps, delta=dlt, **_public_rows(step, public))
        converted = [
            _in_relation(PrivacySpent(e, d), step._neighbouring, relation)
            for (_, step), (e, d) in zip(dp, shares, strict=True)
        ]
        request = PrivacySpent(sum(g.epsilon for g in converted), min(1.0, sum(g.delta for g in converted)))
        if self.epsilon is not None:
            # The converted shares add up to the pipeline's (epsilon, delta) (up to
            # rounding), which is reported as given.
            request = PrivacySpent(float(self.epsilon), request.delta if delta is None else float(delta))
        return steps, dp, relation, request

    def _composed_shares(self, dp, shares, delta):
        """The basic shares scaled up until the steps' composition spends the request; ``(shares, n_rows)``.

        With ``split="composed"`` the basic split (:func:`split_budget`)
        leaves budget unspent wherever the steps compose below the sum of
        their epsilons (three Gaussian releases at 1 each compose to about
        1.7 at delta 1e-5, not 3). Every step's plan is fixed by its
        parameters and its input's public shape, so the pipeline dry-runs
        the steps on a stand-in of zeros (as a private search plans its
        trials) at shares ``s`` times the basic ones, and keeps an ``s``
        whose events compose, under ``composition`` at the requested delta,
        to at most the requested epsilon and at least ``1 - _SPLIT_RTOL`` of
        it (:func:`_composed_scale`). The real fit is checked against that
        plan at settlement (``privacy_spent_`` above the hold raises, as for
        any overspending step).

        The basic shares are kept (``n_rows`` None) where the composed split
        does not apply, a decision from public quantities only: ``split="basic"``,
        no pipeline epsilon, fewer than two DP steps, a DP step under
        add/remove neighbours (its number of rows is not public, and its
        request is converted by group privacy), ``composition="basic"``, an
        input whose shape is not public (not an array or DataFrame), or a
        dry run that fails on the stand-in.  Under replace-one neighbours
        the number of rows is public: every DP step's ``n_samples="auto"``
        is declared as it (``n_rows``), in the dry runs and the real fit alike.
        """
        stand_in = self.__dict__.get("_stand_in")
        if (
            self.split != "composed"
            or self.epsilon is None
            or len(dp) < 2
            or self.composition == "basic"
            or stand_in is None
            or any(step._neighbouring != REPLACE_ONE for _, step in dp)
        ):
            return shares, None
        total_delta = float(sum(d for _, d in shares))
        weights = [e / float(self.epsilon) for e, _ in shares]
        n_rows = stand_in[0].shape[0]

        def cost(scale):
            scaled = [(e * scale, d) for e, d in shares]
            events = self._dry_events(scaled, stand_in, n_rows)
            return compose(list(events), total_delta, self.composition).epsilon

        # The scale is a function of the plan alone (the parameters, the
        # shares and the input's public shape): a refit of the same plan
        # (another seed, a fold of the same size) reuses it.
        key = _plan_key(
            (self.steps, tuple(shares), self.composition, float(self.epsilon), stand_in[0].shape,
             tuple(getattr(stand_in[0], "columns", ())), stand_in[1] is None)
        )
        scale = _SCALES.get(key) if key is not None else None
        if scale is None:
            try:
                scale = _composed_scale(cost, float(self.epsilon), 1.0 / max(weights))
            except Exception:  # a dry run the stand-in cannot take: the basic split (public decision)
                return shares, None
            if key is not None:
                _SCALES[key] = scale
                while len(_SCALES) > _SCALES_KEPT:
                    _SCALES.pop(next(iter(_SCALES)))
        return [(e * scale, d) for e, d in shares], n_rows

    def _dry_events(self, shares, stand_in, n_rows):
        """The events the DP steps record when fitted at ``shares`` on the stand-in (zeros of the public shape)."""
        steps, dp = _cloned_steps(self.steps)
        for (_, step), (eps, dlt) in zip(dp, shares, strict=True):
            step.set_params(epsilon=eps, delta=dlt, random_state=0, **_public_rows(step, n_rows))
        _ignore_unknown_categories(steps)
        X0, y0 = stand_in
        with warnings.catch_warnings():
            # Warnings about zeros concern no private value (the real fit warns for itself).
            warnings.simplefilter("ignore")
            Pipeline(steps).fit(X0, y0)
        return tuple(
            event.to_relation(REPLACE_ONE)
            for step in fitted_dp_estimators(steps)
            for event in step.privacy_ledger_.events
            if event.count > 0
        )

    def _resolved_delta(self, requests):
        """``delta``, or its documented default when only ``epsilon`` is given (class docstring)."""
        if self.delta is not None or self.epsilon is None:
            return self.delta
        return DEFAULT_DELTA if any(d > 0 for _, d in requests) else 0.0

    def _warn_about_steps_without_dp(self, steps):
        leaky = [leak for name, step in steps for leak in steps_fitted_without_dp(name, step)]
        if leaky:
            warnings.warn(
                f"DPPipeline step(s) {', '.join(map(repr, leaky))} are fitted on the private data "
                "without differential privacy: their fitted state is released with the pipeline and "
                "not covered by privacy_spent_. Use skdp estimators (skdp.preprocessing for scalers "
                "and PCA), an encoder with declared categories, or a stateless FunctionTransformer "
                "with public constants.",
                PrivacyLeakWarning,
                stacklevel=_user_stacklevel(),
            )


def _stand_in_for(X, y):
    """Zeros of ``X``'s public shape (a DataFrame's columns kept) and stand-in labels, or None.

    Only the shape and the column names are read (public, as a net reads
    its input's width); ``y`` only for whether it is given.  None where the
    shape is not public (a list, an iterator).
    """
    shape = getattr(X, "shape", None)
    if shape is None or len(shape) != 2 or not all(isinstance(k, numbers.Integral) for k in shape):
        return None
    n_rows, width = int(shape[0]), int(shape[1])
    X0 = np.zeros((n_rows, width))
    pd = sys.modules.get("pandas")  # a DataFrame's column names select a ColumnTransformer's columns
    if pd is not None and isinstance(X, pd.DataFrame):
        X0 = pd.DataFrame(X0, columns=X.columns)
    return X0, (None if y is None else np.zeros(n_rows))


def _ignore_unknown_categories(steps):
    """Let the dry run's one-hot encoders pass the stand-in's zeros (an all-zero row, the same width).

    An encoder with declared categories refuses a 0 it was not given; its
    output width is fixed by the declaration, which is all the DP steps'
    plans read of it.
    """
    from sklearn.preprocessing import OneHotEncoder

    for _, step in steps:
        if isinstance(step, BaseEstimator):
            for obj in (step, *step.get_params(deep=True).values()):
                if isinstance(obj, OneHotEncoder):
                    obj.set_params(handle_unknown="ignore")


def _cloned_steps(steps):
    """Clones of ``steps`` (strings and None kept) and the DP estimators among and inside them (:func:`dp_estimators_in`)."""
    cloned = [(name, step if step is None or isinstance(step, str) else clone(step)) for name, step in steps]
    return cloned, [found for name, step in cloned for found in dp_estimators_in(name, step)]


def _public_rows(step, n_rows):
    """The private search's declared size (:func:`skdp.model_selection._plan.public_size`) for a DP step; ``{}`` for None."""
    if n_rows is None:
        return {}
    from .model_selection._plan import public_size  # the search imports this module

    return public_size(step, n_rows)


#: Composed-split scales by plan (:func:`_plan_key`), oldest first: a process-wide cache.
_SCALES: dict = {}
_SCALES_KEPT = 256

#: Parameters that do not enter a plan: the noise stream and the budget charged.
_NOT_PLAN = frozenset({"random_state", "accountant"})


def _plan_key(obj):
    """A hashable key of ``obj``'s plan-relevant content, or None where it holds something without one.

    Estimators by class and parameters (``random_state`` and
    ``accountant`` excepted, which do not change a plan), arrays by shape,
    dtype and bytes, numbers and strings by value.  Anything else (a
    callable, an unknown object) gives None: no cache, rather than a key
    that two different objects could share.
    """
    if obj is None or isinstance(obj, bool | int | float | str | np.generic):
        return (type(obj).__name__, repr(obj))
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            return None
        return ("ndarray", obj.shape, obj.dtype.str, obj.tobytes())
    if isinstance(obj, list | tuple):
        keys = tuple(_plan_key(v) for v in obj)
        return None if any(k is None for k in keys) else (type(obj).__name__, keys)
    if isinstance(obj, dict):
        items = tuple((repr(k), _plan_key(v)) for k, v in sorted(obj.items(), key=lambda kv: repr(kv[0])))
        return None if any(v is None for _, v in items) else ("dict", items)
    if isinstance(obj, BaseEstimator):
        params = {k: v for k, v in obj.get_params(deep=False).items() if k not in _NOT_PLAN}
        inner = _plan_key(params)
        return None if inner is None else (type(obj).__module__, type(obj).__qualname__, inner)
    return None


def _composed_scale(cost, epsilon, upper):
    """A scale ``s`` in ``[1, upper]`` with ``(1 - _SPLIT_RTOL) epsilon <= cost(s) <= epsilon``; ``cost`` increases in ``s``.

    ``cost(1)`` (the basic split's composition) is at most ``epsilon``.
    The core's secant steps on ``log cost`` against ``log z``, ``z = 1 / s``
    (:func:`~skdp.privacy.roots.secant_within`), start at ``z = 1`` with
    slope -1 (a composition about proportional to its steps' epsilons) and
    aim just inside the window: two or three dry runs near the answer.
    Where they do not land in the window, the bracket of the points costed
    so far (and ``upper``, whose largest step alone spends ``epsilon``) is
    closed by the core's Illinois regula falsi.  The returned ``s`` was
    costed and meets the target.
    """
    if upper <= 1.0 + _SPLIT_RTOL:
        return 1.0
    costs = {}

    def cost_of_z(z):
        if z not in costs:
            costs[z] = cost(1.0 / z)
        return costs[z]

    window = ((1.0 - _SPLIT_RTOL) * epsilon, epsilon)
    if cost_of_z(1.0) >= window[0]:
        return 1.0
    z = secant_within(cost_of_z, 1.0, -1.0, window, (1.0 - _SPLIT_RTOL / 2) * epsilon)
    if z is not None and 1.0 / z <= upper:
        return 1.0 / z
    meets = min((z for z, c in costs.items() if c <= epsilon and 1.0 / z <= upper), default=1.0)
    failing = [z for z, c in costs.items() if c > epsilon and 1.0 / z <= upper]
    fails = max(failing) if failing else 1.0 / upper
    if not failing and cost_of_z(fails) <= epsilon:
        return upper
    _, z = illinois_bracket(cost_of_z, epsilon, fails, meets, rtol=_SPLIT_RTOL)
    return 1.0 / z


def _explain_conversion(refused, dp, relation):
    """The budget's refusal, saying which steps' shares were converted to the pipeline's relation."""
    converted = [name for name, step in dp if step._neighbouring != relation]
    if not converted:
        return refused
    return BudgetExceededError(
        f"{refused} The pipeline's request is the sum of its DP steps' shares in one relation, "
        f"replace-one: the share of {', '.join(map(repr, converted))} (add/remove, e.g. DP-SGD's "
        "Poisson sampling) is converted by group privacy, (2 eps, 2 e^eps delta). Lower that step's "
        "share, or charge a budget created with neighbouring='add_remove' from add/remove steps only."
    )


def _in_relation(spent, neighbouring, relation):
    """``spent`` (a guarantee under ``neighbouring``) under ``relation``: group privacy if they differ."""
    if neighbouring == relation:
        return PrivacySpent(float(spent.epsilon), float(spent.delta))
    # Only add/remove -> replace-one occurs (the pipeline is add/remove only
    # when every step is): a replacement is a removal and an addition.
    eps, dlt = group_guarantee(spent.epsilon, spent.delta, 2)
    return PrivacySpent(float(eps), float(min(1.0, dlt)))


def make_pipeline(
    *steps,
    epsilon=None,
    delta=None,
    accountant=None,
    composition=DEFAULT_COMPOSITION,
    split="composed",
    random_state=None,
    transform_input=None,
    memory=None,
    verbose=False,
):
    """Build a :class:`DPPipeline` from estimators, naming the steps as scikit-learn's ``make_pipeline``.

    Parameters
    ----------
    *steps : estimators
        The steps, in order (named after their lowercased class names).
    epsilon, delta, accountant, composition, split, random_state, transform_input, memory, verbose :
        Those of :class:`DPPipeline`.

    Returns
    -------
    pipeline : DPPipeline
    """
    return DPPipeline(
        _name_estimators(steps),
        epsilon=epsilon,
        delta=delta,
        accountant=accountant,
        composition=composition,
        split=split,
        random_state=random_state,
        transform_input=transform_input,
        memory=memory,
        verbose=verbose,
    )


__all__ = [
    "DPPipeline",
    "PostFitOwnerMixin",
    "dp_estimators_in",
    "fitted_dp_estimators",
    "make_pipeline",
    "split_budget",
]
