"""Private hyperparameter search: repeat a random candidate a random number of times, keep the best.

Papernot & Steinke (2022), "Hyperparameter tuning with Renyi differential
privacy" (ICLR), Theorems 2 and 6; the privacy computation is
:mod:`skdp.privacy.accountants.repeat_select`.  See the docstring of
:class:`DPGridSearchCV` and :doc:`/model_selection`.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass, replace

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier, is_regressor
from sklearn.model_selection import ParameterGrid, ParameterSampler
from sklearn.utils import _safe_indexing
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import _num_features, _num_samples, check_is_fitted, indexable

from ..base import PRIVACY_METADATA, PRIVACY_OWNER, SKLEARN_METADATA, DPEstimatorMixin, PrivacyPlan
from ..pipeline import PostFitOwnerMixin
from ..privacy import LaplaceMechanism, PrivacyLedger, PrivacySpent, compose
from ..privacy.accountants.conversions import DEFAULT_ORDERS, rdp_to_epsilon
from ..privacy.accountants.rdp import RDPAccountant
from ..privacy.calibration import illinois_bracket
from ..privacy.clipping import clip_rows
from ..privacy.events import REPLACE_ONE, RepeatAndSelectEvent, WeakTrianglePoissonEvent
from ..privacy.ledger import DEFAULT_COMPOSITION
from ._checks import DISTRIBUTIONS, check_budget_grid, check_search_params
from ._plan import BUDGET_PARAMS as _BUDGET_PARAMS
from ._plan import dry_events, public_size
from ._trials import draw_n_trials, search_results, seed_entropy

#: Relative precision of the bisection over the per-trial budget.
_RTOL = 1e-2

#: Tolerance of the check that a fit spent no more than its dry run planned.
_CURVE_RTOL = 1e-9


def _curve(events):
    """RDP curve on the default orders of the composition of ``events``."""
    orders = np.asarray(DEFAULT_ORDERS)
    return sum((e.count * RDPAccountant.curve(e, orders) for e in events), np.zeros_like(orders))


def _estimator_has(name):
    def check(self):
        return hasattr(self.best_estimator_ if hasattr(self, "best_estimator_") else self.estimator, name)

    return check


def _fit_trial(estimator, params, X, y, rng, verbose=0, label=""):
    """Fit one candidate on the training part (no budget: the search holds it)."""
    model = clone(estimator).set_params(**params)
    model.set_params(random_state=rng)
    try:
        model.fit(X) if y is None else model.fit(X, y)
    finally:
        # The generator was stepped past this fit's noise draws and can be
        # run backwards to them: the model must not keep it.
        model.set_params(random_state=None)
    if verbose:
        # Public: the candidate (drawn independently of the data) and its budget.
        print(f"[{label}] fitted {params}", flush=True)
    return model


@dataclass(frozen=True)
class SearchSettings:
    """A private search's plan, from public quantities before the data is read (``_BaseDPSearch._plan``).

    Attributes
    ----------
    n_rows : int
        The public number of rows (training plus held-out) the trials plan for.
    trial_epsilon : float
        Each trial's budget (its fit's and its score's).
    fit_epsilon : float
        The share of ``trial_epsilon`` a trial's fit gets (the rest scores it).
    search_event : RepeatAndSelectEvent or WeakTrianglePoissonEvent
        The event of the whole random-stopping search (Papernot & Steinke 2022).
    t_refit : float or None
        The refit's budget (None without ``refit``).
    worst_case : float
        The epsilon of the worst case over the refits the selection could
        choose: what the search reports.
    planned : list of ndarray
        Each candidate's RDP curve (its trial's planned events).
    """

    n_rows: int
    trial_epsilon: float
    fit_epsilon: float
    search_event: object
    t_refit: float | None
    worst_case: float
    planned: list


class _BaseDPSearch(PostFitOwnerMixin, DPEstimatorMixin, MetaEstimatorMixin, BaseEstimator):
    """Repeat-and-select search (docstring of :class:`DPGridSearchCV`)."""

    _neighbouring = REPLACE_ONE

    #: privacy_spent_ is the worst case over the refits the selection could
    #: have chosen, which the ledger (the chosen refit's events) does not
    #: show: a release after fit adds its own cost to it (basic composition).
    _post_fit_composes = False

    #: What a fitted search holds besides its parameters (the release-surface
    #: rule of :class:`~skdp.base.DPEstimatorMixin`): the chosen candidate,
    #: its noisy score and model, the public candidate list.
    _released_attributes = frozenset(
        {"best_estimator_", "best_params_", "best_index_", "best_score_", "cv_results_"}
    )

    @classmethod
    def _release_surface(cls):
        """Every attribute name a fitted search may hold besides its parameters."""
        return SKLEARN_METADATA | PRIVACY_METADATA | {PRIVACY_OWNER} | cls._released_attributes

    def __init__(
        self,
        estimator,
        *,
        epsilon=1.0,
        delta=1e-5,
        n_trials_mean=10.0,
        n_trials_distribution="geometric",
        validation_fraction=0.2,
        scoring=None,
        score_bounds=None,
        score_share=0.25,
        refit=True,
        refit_share=0.5,
        accountant=None,
        random_state=None,
        n_jobs=None,
        verbose=0,
    ):
        self.estimator = estimator
        self.epsilon = epsilon
        self.delta = delta
        self.n_trials_mean = n_trials_mean
        self.n_trials_distribution = n_trials_distribution
        self.validation_fraction = validation_fraction
        self.scoring = scoring
        self.score_bounds = score_bounds
        self.score_share = score_share
        self.refit = refit
        self.refit_share = refit_share
        self.accountant = accountant
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    # --- checks of the parameters (public: nothing reserved yet) -------------

    def _scoring(self):
        if self.scoring is None:
            if is_classifier(self.estimator):
                return "accuracy"
            return "neg_squared_error" if is_regressor(self.estimator) else "score_samples"
        return self.scoring

    def _shape(self):
        name = self.n_trials_distribution
        return DISTRIBUTIONS[name] if isinstance(name, str) else float(name)

    def _score_range(self):
        return (0.0, 1.0) if self._scoring() == "accuracy" else tuple(float(b) for b in self.score_bounds)

    # --- the plan, from public quantities ---------------------------------

    def _inner_estimator(self):
        # Trials never charge the user's budget (the search reserved it whole)
        # and calibrate under RDP, the currency the search is accounted in
        # (only the speed of the dry runs changes: the bisection below finds
        # the noise level either way).
        inner = clone(self.estimator).set_params(accountant=None)
        if "composition" in inner.get_params() and not isinstance(inner, PostFitOwnerMixin):
            # A composite (a DPPipeline) keeps its own: its ledger composes
            # steps of several relations (a scaler's replace-one, a net's
            # add/remove converted), which only "pld" accounts tightly.
            own = inner.get_params()["composition"]
            inner.set_params(composition="rdp")
            try:
                # The estimator's own checks of its parameters (public,
                # nothing reserved): an estimator whose releases have no RDP
                # curve under its settings refuses "rdp" here (DP-SEP's
                # default Poisson batches under replace-one). It then
                # calibrates its trials under its own composition; the
                # search still accounts them in RDP, through _searched.
                getattr(inner, "_check_params", lambda: None)()
            except ValueError:
                inner.set_params(composition=own)
        if isinstance(inner, PostFitOwnerMixin) and "split" in inner.get_params(deep=False):
            # A DPPipeline's composed split scales its steps' shares until
            # they compose to its epsilon, by dry runs; the search's own
            # budget solver (_largest_budget) already scales every trial's
            # and the refit's epsilon until the composed events meet the
            # search's budget, so the split's dry runs would only repeat it
            # (a 3-candidate search over scaler + PCA + DP-EM: 12.3 s with
            # them, 1.6 s without, the same privacy_spent_).
            inner.set_params(split="basic")
        return inner

    def _searched(self, event):
        """``event`` under the search's relation, as the search accounts it.

        A Poisson-subsampled Gaussian (DP-SGD's steps) under replace-one has
        no exact RDP curve, which the selection's theorem needs: it becomes a
        :class:`~skdp.privacy.accountants.repeat_select.WeakTrianglePoissonEvent`, bounded
        in RDP through an intermediate dataset (a removal, then an addition).
        """
        return WeakTrianglePoissonEvent.of(event.to_relation(self._neighbouring))

    def _inner_delta(self):
        return float(self.delta)

    def _score_mechanism(self, trial_epsilon):
        low, high = self._score_range()
        # Replace-one: one held-out row moves the mean of m clipped scores by
        # at most (high - low) / m.
        sensitivity = (high - low) / self._n_validation
        return LaplaceMechanism.from_epsilon(
            self.score_share * trial_epsilon, sensitivity, self._neighbouring
        )

    def _trial_budget(self, params, fit_epsilon):
        """``(epsilon, delta)`` of a trial of ``params``: a candidate's grid epsilon scales the trial's.

        A candidate whose ``epsilon`` is in the grid is fitted in its trials at
        ``fit_epsilon * epsilon / max(grid's epsilons)`` (the candidates'
        budgets keep their ratios; the largest gets the trial's budget) and
        refitted at its own ``epsilon``; its ``delta`` (the search's if not in
        the grid) is used as is.
        """
        eps = fit_epsilon
        if "epsilon" in params:
            eps = fit_epsilon * float(params["epsilon"]) / self._epsilon_scale
        return float(eps), float(params.get("delta", self._inner_delta()))

    def _refit_budget(self, params, t):
        """``(epsilon, delta)`` of the refit of ``params``: its grid epsilon, else ``t``."""
        return float(params.get("epsilon", t)), float(params.get("delta", self._inner_delta()))

    def _refit_events(self, params, t, n):
        eps, dlt = self._refit_budget(params, t)
        return dry_events(self, params, eps, n, dlt)

    def _trial_events(self, params, fit_epsilon):
        eps, dlt = self._trial_budget(params, fit_epsilon)
        return dry_events(self, params, eps, self._n_train, dlt)

    def _trial_plans(self, trial_epsilon):
        fit_epsilon = (1.0 - self.score_share) * trial_epsilon
        score = self._score_mechanism(trial_epsilon).event(secure_noise=self._secure)
        plans = (self._trial_events(params, fit_epsilon) + (score,) for params in self._candidates)
        # Candidates with the same plan share one curve: list each plan once.
        return tuple(dict.fromkeys(plans))

    def _search_event(self, trial_epsilon):
        return RepeatAndSelectEvent(
            1, self._neighbouring, self._trial_plans(trial_epsilon), float(self.n_trials_mean), self._shape()
        )

    def _refit_curve(self, t, n, candidates=None):
        """Pointwise maximum over the candidates of their refit's RDP curve (refit budget ``t``).

        The refit's candidate is the selection's output, so the refit is
        chosen adaptively; its RDP curve, for composition with the selection,
        is one that holds whichever candidate is chosen: the maximum over
        them (the curve of the worst outcome, not each outcome at its own
        best order).
        """
        candidates = self._candidates if candidates is None else candidates
        curves = [_curve(self._refit_events(p, t, n)) for p in candidates]
        return np.max(curves, axis=0) if curves else np.zeros(len(DEFAULT_ORDERS))

    def _curve_cost(self, curve):
        return float(rdp_to_epsilon(curve, np.asarray(DEFAULT_ORDERS), self.delta))

    def _cost(self, events):
        return compose(list(events), self.delta, DEFAULT_COMPOSITION).epsilon

    def _largest_budget(self, cost, target, upper):
        """A ``t <= upper`` with ``cost(t) <= target``, within ``_RTOL`` of the largest; cost increases in ``t``.

        Every evaluation of ``cost`` dry-runs the candidates (for DP-SGD nets,
        a calibration each), so the bracket is searched by the calibrator's
        regula falsi on ``log cost`` against ``log t`` (the Illinois variant,
        Dowell & Jarratt 1971; :data:`skdp.privacy.calibration.illinois_bracket`,
        on ``z = 1 / t``, for which the cost decreases) rather than by bisection:
        it stops once the bracket is within ``_RTOL``, usually after 2 to 5
        evaluations instead of 7.  The returned ``t`` is a costed one that meets the target.
        """
        lo, hi = upper / 2.0, upper
        c_hi = cost(hi)
        if c_hi <= target:
            return hi
        c_lo = cost(lo)
        while c_lo > target:
            hi, c_hi, lo = lo, c_lo, lo / 2.0
            if lo < upper * 1e-6:
                raise ValueError(
                    f"No per-trial budget meets epsilon={self.epsilon}, delta={self.delta} with "
                    f"n_trials_mean={self.n_trials_mean}: raise epsilon or lower n_trials_mean."
                )
            c_lo = cost(lo)
        # z -> the t costed for it (both ends are costed already).
        budgets, costs = {1.0 / hi: hi, 1.0 / lo: lo}, {1.0 / hi: c_hi, 1.0 / lo: c_lo}

        def cost_of_z(z):
            if z not in costs:
                budgets[z] = 1.0 / z
                costs[z] = cost(budgets[z])
            return costs[z]

        _, z = illinois_bracket(cost_of_z, target, 1.0 / hi, 1.0 / lo, rtol=_RTOL)
        return budgets[z]

    # --- fit ----------------------------------------------------------------

    def fit(self, X, y=None):
        """Select a candidate privately (Papernot & Steinke 2022) and fit it.

        Runs the template of every skdp fit (:mod:`skdp.base`): checks of the
        parameters and of the public shape of ``X``, the plan (per-trial
        budget, from dry runs on stand-in data), hold of the whole
        ``(epsilon, delta)`` on ``accountant``, the trials, the selection, the
        refit, then settlement of ``privacy_spent_``.  A fit whose trials or
        refit released more than their dry runs planned settles what they
        really spent, keeps no fitted attribute and raises ``RuntimeError``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None

        Returns
        -------
        self
        """
        try:
            return self._private_fit(X, y)
        finally:
            for name in (
                "_candidates",
                "_inner",
                "_dry_cache",
                "_secure",
                "_supervised",
                "_n_train",
                "_n_features",
                "_n_validation",
                "_epsilon_scale",
            ):
                self.__dict__.pop(name, None)

    # --- the template's steps (skdp.base.DPEstimatorMixin) ---------------------

    def _check_params(self):
        check_search_params(self)
        self._secure = self._resolve_secure_noise()
        candidates = self._candidate_list()
        if not candidates:
            raise ValueError("The search has no candidate (empty param_grid / param_distributions).")
        self._epsilon_scale = check_budget_grid(candidates)
        for name in (*self._released_attributes, "privacy_spent_", "privacy_ledger_", "n_features_in_"):
            self.__dict__.pop(name, None)
        self._candidates = candidates

    def _accepts_one_dimensional_input(self):
        # The searched estimator reads X: refuse a 1-D X here, before the
        # hold, when it would refuse it after.
        inner = self.estimator
        return not isinstance(inner, DPEstimatorMixin) or inner._accepts_one_dimensional_input()

    def _check_public_input(self, X, y=None):
        # The number of rows and columns (public under replace-one) fix the split's sizes.
        n = _num_samples(X)
        self._n_features = _num_features(X)
        self._supervised = y is not None
        self._n_validation = max(1, int(round(self.validation_fraction * n)))
        self._n_train = n - self._n_validation
        if self._n_train < 2:
            raise ValueError("validation_fraction leaves fewer than 2 training rows.")

    def _privacy_plan(self):
        """The whole ``(epsilon, delta)``, and the search's plan from public quantities (:meth:`_plan`)."""
        self._inner = self._inner_estimator()
        self._dry_cache = {}
        n = self._n_train + self._n_validation
        trial_epsilon, search_event, t_refit, total = self._plan(n)
        fit_epsilon = (1.0 - self.score_share) * trial_epsilon
        score_event = self._score_mechanism(trial_epsilon).event(secure_noise=self._secure)
        settings = SearchSettings(
            n_rows=n,
            trial_epsilon=trial_epsilon,
            fit_epsilon=fit_epsilon,
            search_event=search_event,
            t_refit=t_refit,
            worst_case=total,
            planned=[_curve(self._trial_events(p, fit_epsilon) + (score_event,)) for p in self._candidates],
        )
        return PrivacyPlan(self.epsilon, self.delta, DEFAULT_COMPOSITION, settings=settings)

    def _begin_private_fit(self, plan):
        # The search's ledger composes what the trials' and the refit's own
        # ledgers recorded (each enforced secure_noise on its releases); it
        # releases nothing itself.
        return super()._begin_private_fit(replace(plan, secure_noise=False))

    def _validate_input(self, X, y=None):
        return indexable(X, y)

    def _guarantee(self, ledger, plan):
        # The worst case over the refits the selection could have chosen (the
        # ledger holds the chosen one's events only), or their composition if larger.
        composed = ledger.privacy_spent(plan.delta)
        return PrivacySpent(float(max(plan.settings.worst_case, composed.epsilon)), float(plan.delta))

    def _end_private_fit(self, ledger, plan):
        super()._end_private_fit(ledger, plan)
        if "best_estimator_" in self.__dict__:
            # A release the chosen model makes after fit is charged here.
            self.best_estimator_.__dict__[PRIVACY_OWNER] = self

    def _plan(self, n):
        """The search's plan from public quantities: per-trial budget, events, refit budget and total."""
        candidates = self._candidates
        literal = [p for p in candidates if "epsilon" in p]
        free = [p for p in candidates if "epsilon" not in p]
        fixed = self._refit_curve(None, n, literal) if (self.refit and literal) else 0.0
        if not self.refit:
            target = self.epsilon
        elif literal and not free:
            target = self.epsilon
        else:
            target = self.epsilon * (1.0 - self.refit_share)
        if self.refit and literal and self._curve_cost(fixed + np.zeros(len(DEFAULT_ORDERS))) >= target:
            raise ValueError(
                f"The grid's epsilon values (largest {self._epsilon_scale}) are refitted at their own "
                f"budget, which leaves nothing of epsilon={self.epsilon} for the selection: raise the "
                "search's epsilon (the total) or lower the grid's."
            )
        trial_epsilon = self._largest_budget(
            lambda t: self._curve_cost(_curve([self._search_event(t)]) + fixed), target, target
        )
        search_event = self._search_event(trial_epsilon)
        search_curve = _curve([search_event])
        t_refit = None
        if self.refit:
            worst = lambda t: self._curve_cost(search_curve + self._refit_curve(t, n))  # noqa: E731
            t_refit = self._largest_budget(worst, self.epsilon, self.epsilon) if free else 0.0
            total = worst(t_refit)
        else:
            total = self._curve_cost(search_curve)
        return trial_epsilon, search_event, t_refit, total

    def _fit_private(self, data, plan, rng, ledger):
        """The trials, the selection and the refit, inside the template's hold; events on ``ledger``."""
        X, y = data
        candidates = self._candidates
        settings = plan.settings
        n, trial_epsilon, t_refit = settings.n_rows, settings.trial_epsilon, settings.t_refit
        search_event, planned, fit_epsilon = settings.search_event, settings.planned, settings.fit_epsilon
        # The search's own streams: splits, picks and the trials' seeds, from one entropy.
        seeds = np.random.SeedSequence(seed_entropy(self.random_state))
        rng = np.random.default_rng(seeds.spawn(1)[0])
        label = type(self).__name__
        order = rng.permutation(n)
        validation, train = order[: self._n_validation], order[self._n_validation :]
        X_train, X_val = _safe_indexing(X, train), _safe_indexing(X, validation)
        y_train = None if y is None else _safe_indexing(y, train)
        y_val = None if y is None else _safe_indexing(y, validation)

        n_trials = draw_n_trials(rng, self._shape(), self.n_trials_mean)
        picks = rng.integers(len(candidates), size=n_trials)
        trial_rngs = [np.random.default_rng(s) for s in seeds.spawn(n_trials)]
        inner = clone(self._inner)
        inner.set_params(**public_size(inner, self._n_train))
        jobs = []
        for c in picks:
            params = {k: v for k, v in candidates[c].items() if k not in _BUDGET_PARAMS}
            eps, dlt = self._trial_budget(candidates[c], fit_epsilon)
            jobs.append({**params, "epsilon": eps, "delta": dlt})
        models = Parallel(n_jobs=self.n_jobs)(
            delayed(_fit_trial)(inner, job, X_train, y_train, r, self.verbose, f"{label} trial {k + 1}")
            for k, (job, r) in enumerate(zip(jobs, trial_rngs, strict=True))
        )
        mechanism = self._score_mechanism(trial_epsilon)
        best, excess = None, []
        for k, (c, model) in enumerate(zip(picks, models, strict=True)):
            score_ledger = PrivacyLedger("rdp", self._neighbouring, secure_noise=self._secure)
            score = float(mechanism.release(self._mean_score(model, X_val, y_val), rng, score_ledger)[()])
            events = self._spent_events(model, score_ledger)
            if np.any(_curve(events) > planned[c] * (1 + _CURVE_RTOL) + 1e-12):
                excess.append(events)
            # Ties (probability 0 under continuous noise) go to the earlier trial.
            if best is None or score > best[0]:
                best = (score, int(c), k)
        if excess:
            # Every trial ran and released its score: the selection's
            # event covers the plans the trials really had.
            real = RepeatAndSelectEvent(
                1,
                self._neighbouring,
                (*search_event.inner_events, *excess),
                search_event.mean,
                search_event.shape,
            )
            self._refuse_excess(ledger, [real], "a trial")
        ledger.record(search_event)
        if best is None:
            # K = 0 (Poisson only): the procedure outputs nothing; a candidate
            # drawn uniformly (public randomness) stands in for the choice.
            warnings.warn(
                "The search drew 0 trials (Poisson): best_params_ was drawn at random.",
                UserWarning,
                stacklevel=4,
            )
            best_index, best_score, trial_model = int(rng.integers(len(candidates))), math.nan, None
        else:
            best_score, best_index, trial_model = best[0], best[1], models[best[2]]
        models = None  # the other trials' models are never released
        best_estimator = trial_model
        if self.refit:
            best_estimator = self._refit(X, y, candidates[best_index], t_refit, n, seeds)
            refit_spent = self._spent_events(best_estimator, None)
            planned_refit = _curve(self._refit_events(candidates[best_index], t_refit, n))
            if np.any(_curve(refit_spent) > planned_refit * (1 + _CURVE_RTOL) + 1e-12):
                self._refuse_excess(ledger, refit_spent, "the refit")
            for e in refit_spent:
                ledger.record(e)
        self.best_index_, self.best_score_ = best_index, best_score
        self.best_params_ = dict(candidates[best_index])
        if best_estimator is not None:
            self.best_estimator_ = best_estimator
        self.cv_results_ = search_results(candidates, best_index, best_score)
        self.n_features_in_ = self._n_features

    def _refuse_excess(self, ledger, events, what):
        """Record what was really released on the fit's ledger and raise: the template's hold settles it.

        The hold is tracking ``ledger``; the exception closes it charged
        the ledger's composition (with its events) or the hold, whichever is
        larger, and the template forgets the fit (:class:`~skdp.base.DPEstimatorMixin`).
        """
        for event in events:
            ledger.record(event)
        released = ledger.privacy_spent(self.delta)
        raise RuntimeError(
            f"Internal error: {what} of {type(self).__name__} recorded more privacy loss than its dry run on "
            "stand-in data planned (its plan depends on the data and cannot be searched); the budget was "
            f"charged what was released, and at least the hold: released {tuple(released)}, held "
            f"({self.epsilon}, {self.delta}); the search is left unfitted."
        )

    def _refit(self, X, y, params, t, n, seeds):
        """Fit the chosen candidate on all rows at its planned refit budget."""
        eps, dlt = self._refit_budget(params, t)
        rest = {k: v for k, v in params.items() if k not in _BUDGET_PARAMS}
        model = clone(self._inner).set_params(**rest, epsilon=eps, delta=dlt)
        model.set_params(**public_size(model, n))
        model.set_params(random_state=np.random.default_rng(seeds.spawn(1)[0]))
        try:
            model.fit(X) if y is None else model.fit(X, y)
        finally:
            model.set_params(random_state=None)
        if self.verbose:
            print(f"[{type(self).__name__}] refitted {params} at epsilon={eps:.4g}", flush=True)
        return model

    def _spent_events(self, model, score_ledger):
        """The events a fitted trial (and its score) released, as the search accounts them."""
        events = [self._searched(e) for e in model.privacy_ledger_.events]
        if score_ledger is not None:
            events += score_ledger.events
        return events

    def _mean_score(self, model, X, y):
        """Mean of the per-row scores on the held-out rows, each clipped to the declared range."""
        scoring = self._scoring()
        if scoring == "accuracy":
            rows = np.asarray(model.predict(X) == np.asarray(y), dtype=float)
        elif scoring == "score_samples":
            rows = np.asarray(model.score_samples(X), dtype=float)
        elif scoring == "neg_squared_error":
            # Minus the row's squared error, summed over the target's columns.
            error = np.asarray(y, dtype=float).reshape(len(y), -1) - np.asarray(
                model.predict(X), dtype=float
            ).reshape(len(y), -1)
            rows = -np.sum(error * error, axis=1)
        else:
            rows = np.asarray(scoring(model, X, y), dtype=float)
        if rows.shape != (self._n_validation,):
            raise ValueError("scoring must return one score per held-out row.")
        low, high = self._score_range()
        middle, half = 0.5 * (low + high), 0.5 * (high - low)
        # The core's clipping rule on the centred scores: an interval clip,
        # with a NaN or infinite score sent to the middle (never propagated).
        clipped = middle + clip_rows((rows - middle)[:, None], half)[:, 0]
        return np.array(clipped.mean())

    # --- the chosen model's methods -------------------------------------------

    @available_if(_estimator_has("predict"))
    def predict(self, X):
        """``best_estimator_.predict``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """``best_estimator_.predict_proba``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict_proba(X)

    @available_if(_estimator_has("transform"))
    def transform(self, X):
        """``best_estimator_.transform``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.transform(X)

    @available_if(_estimator_has("score_samples"))
    def score_samples(self, X):
        """``best_estimator_.score_samples``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.score_samples(X)

    @available_if(_estimator_has("score"))
    def score(self, X, y=None):
        """``best_estimator_.score`` (on data you pass: a release of *that* data, not accounted)."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.score(X) if y is None else self.best_estimator_.score(X, y)


class DPGridSearchCV(_BaseDPSearch):
    """Differentially private grid search (Papernot & Steinke 2022, repeat-and-select).

    scikit-learn's ``GridSearchCV`` picks a candidate by validation scores
    computed exactly on the private rows, and that choice is accounted
    nowhere.  This search releases only a private choice:

    1. *Plan* (no data read).  The rows are split once, at random, into a
       training part and ``validation_fraction`` held out (the sizes are
       public under replace-one neighbours).  A *trial* draws one candidate
       uniformly from the grid, fits a clone of ``estimator`` with it on the
       training part at budget ``((1 - score_share) t, delta)`` and releases
       the mean of its per-row validation scores, each clipped to a declared
       range ``[low, high]``, by the Laplace mechanism at pure
       ``score_share * t`` (sensitivity ``(high - low) / m`` for ``m``
       held-out rows).  The number of trials ``K`` is random, independent of
       the data: truncated negative binomial (``"geometric"``,
       ``"logarithmic"``, or its ``eta``) or ``"poisson"``, with mean
       ``n_trials_mean``.
    2. *Run* ``K`` trials (in parallel with ``n_jobs``) and keep only the
       output of the best one (its candidate, model and noisy score); ``K``,
       the other trials' candidates, scores and models are never released.
    3. *Refit* (``refit=True``) the chosen candidate on all rows with what is
       left of the budget, or return the chosen trial's model
       (``refit=False``).

    The selection's RDP curve is Papernot & Steinke's Theorem 2 (truncated
    negative binomial) or Theorem 6 (Poisson) applied to the worst
    candidate's trial, composed with the refit's events; each candidate's
    events are read off a *dry run* on zeros of the same shape (an skdp fit
    plans from public quantities only), and every real fit is checked
    against its dry run.  A black-box estimator, with no RDP curve, cannot
    be searched.  ``privacy_spent_`` refers to replace-one neighbours.

    Read more in the :doc:`User Guide </model_selection>`: the method and its
    proof, budgets and parallel trials, searching over ``epsilon``, DP-SGD
    nets (accounted through a removal then an addition), and a benchmark
    against scikit-learn's ``GridSearchCV``.

    Parameters
    ----------
    estimator : skdp estimator
        Cloned for every fit; never modified.  Its ``epsilon``, ``delta``,
        ``accountant`` and ``random_state`` are set by the search.
    param_grid : dict or list of dicts
        As in scikit-learn's ``GridSearchCV`` (public).  May list the
        estimator's ``epsilon`` and ``delta``: each candidate is refitted at
        its own, its trials run at the trial budget times its ``epsilon`` over
        the grid's largest, and the search's ``epsilon`` is the total (the
        refit is planned as the worst case over the candidates).
    epsilon : float, default=1.0
        Budget of the whole procedure (trials, scores, selection, refit).
    delta : float, default=1e-5
        Delta of the whole procedure (trials, scores, selection, refit).
    n_trials_mean : float, default=10.0
        ``E[K]``, the mean number of trials (>= 1).
    n_trials_distribution : {"geometric", "logarithmic", "poisson"} or float, default="geometric"
        Law of ``K``: a truncated negative binomial with ``eta = 1`` (geometric)
        or ``eta = 0`` (logarithmic; cheapest in privacy, but ``K = 1`` about
        a quarter of the time at mean 10), any ``eta >= 0``, or Poisson
        (may draw ``K = 0``: then a uniformly random candidate is returned with
        ``best_score_ = nan``).
    validation_fraction : float, default=0.2
        Share of the rows held out for the scores.
    scoring : None, "accuracy", "neg_squared_error", "score_samples" or callable, default=None
        Per-row validation score: ``"accuracy"`` (bounds ``(0, 1)``, the
        default for classifiers), ``"neg_squared_error"`` (minus the row's
        squared error, summed over the target's columns; the default for
        regressors), ``"score_samples"`` (the estimator's per-row
        ``score_samples``, the default otherwise), or
        ``scoring(estimator, X, y)`` returning one score per row.
    score_bounds : (float, float), default=None
        Declared range of the per-row score (required unless ``"accuracy"``);
        scores are clipped to it (never read off the data).
    score_share : float, default=0.25
        Share of a trial's budget spent on its score release.
    refit : bool, default=True
        Refit the chosen candidate on all rows (``True``) or return the
        chosen trial's model, fitted on the training part (``False``).
    refit_share : float, default=0.5
        Share of ``epsilon`` set aside for the refit (the refit gets whatever
        the selection leaves, at least this).
    accountant : BudgetAccountant, default=None
        Charged once: the whole ``(epsilon, delta)`` is reserved before any
        row is read and settled to ``privacy_spent_`` afterwards; the trials
        themselves never touch it (so ``n_jobs > 1`` works).
        :class:`~skdp.exceptions.BudgetExceededError` propagates.
    random_state : None, int, RandomState or Generator, default=None
        Seeds the split, ``K``, the candidates and every fit's noise (an int
        replays the noise: for experiments, never for releases).
    n_jobs : int, default=None
        Trials fitted in parallel (joblib).
    verbose : int, default=0
        0: silent.  1 or more: one line per fit (each trial's candidate and
        budget, then the refit), printed as it ends; public quantities only.

    Attributes
    ----------
    best_estimator_ : estimator
        The chosen candidate refitted on all rows (or its trial's model).
        Its releases after ``fit`` (further OPS samples) are charged to the
        search: its ``privacy_spent_``, ledger and budget.
    best_params_ : dict
        The chosen candidate's parameters (a release: the selection).
    best_index_ : int
        Index of the chosen candidate in ``cv_results_["params"]``.
    best_score_ : float
        The chosen trial's *noisy* validation score (a release).
    cv_results_ : dict
        Every candidate (public) and ``selected_score``: the chosen one's
        noisy score, NaN for the others (released by no one: the theorems
        cover the best output only).
    privacy_spent_ : PrivacySpent
        Guarantee of everything above.
    privacy_ledger_ : PrivacyLedger
        The search's event and the refit's events.

    See Also
    --------
    DPRandomizedSearchCV : The same selection over candidates drawn from distributions.
    skdp.pipeline.DPPipeline : A pipeline of DP steps, searched like one estimator.

    References
    ----------
    N. Papernot, T. Steinke. Hyperparameter tuning with Renyi differential
    privacy. ICLR 2022.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from skdp import BudgetAccountant, DPGaussianMixture
    >>> from skdp.model_selection import DPGridSearchCV
    >>> X, _ = load_iris(return_X_y=True)
    >>> budget = BudgetAccountant(epsilon=5.0, delta=1e-4)
    >>> search = DPGridSearchCV(
    ...     DPGaussianMixture(data_norm=10.0, max_iter=3),
    ...     {"n_components": [2, 3], "epsilon": [0.5, 1.0]},
    ...     epsilon=4.0,
    ...     n_trials_mean=3.0,
    ...     score_bounds=(-30.0, 0.0),
    ...     accountant=budget,
    ...     random_state=0,
    ... ).fit(X)
    >>> search.best_estimator_.epsilon == search.best_params_["epsilon"]
    True
    >>> search.privacy_spent_.epsilon <= 4.0
    True
    >>> budget.spent.epsilon == search.privacy_spent_.epsilon
    True
    """

    def __init__(
        self,
        estimator,
        param_grid,
        *,
        epsilon=1.0,
        delta=1e-5,
        n_trials_mean=10.0,
        n_trials_distribution="geometric",
        validation_fraction=0.2,
        scoring=None,
        score_bounds=None,
        score_share=0.25,
        refit=True,
        refit_share=0.5,
        accountant=None,
        random_state=None,
        n_jobs=None,
        verbose=0,
    ):
        super().__init__(
            estimator,
            epsilon=epsilon,
            delta=delta,
            n_trials_mean=n_trials_mean,
            n_trials_distribution=n_trials_distribution,
            validation_fraction=validation_fraction,
            scoring=scoring,
            score_bounds=score_bounds,
            score_share=score_share,
            refit=refit,
            refit_share=refit_share,
            accountant=accountant,
            random_state=random_state,
            n_jobs=n_jobs,
            verbose=verbose,
        )
        self.param_grid = param_grid

    def _candidate_list(self):
        return list(ParameterGrid(self.param_grid))


class DPRandomizedSearchCV(_BaseDPSearch):
    """Differentially private randomized search (Papernot & Steinke 2022, repeat-and-select).

    ``n_iter`` candidates are drawn from ``param_distributions`` before any
    row is read (scikit-learn's ``ParameterSampler``, seeded by
    ``random_state``: the candidates are public, independent of the data);
    the search then runs exactly as :class:`DPGridSearchCV` on that list:

    1. *Plan* (no data read).  The rows are split once, at random, into a
       training part and ``validation_fraction`` held out; the whole
       ``(epsilon, delta)`` is held on ``accountant``.
    2. *Run* a random number ``K`` of trials (mean ``n_trials_mean``,
       independent of the data).  A trial draws one candidate uniformly,
       fits it on the training part and releases the mean of its per-row
       validation scores, clipped to ``score_bounds``, with Laplace noise.
       Only the best trial's output is kept.
    3. *Refit* the chosen candidate on all rows with what is left of the
       budget, and settle ``privacy_spent_``: the repeat-and-select bound
       (Theorem 2 or 6) composed with the worst-case refit, for replace-one
       neighbours.

    Read more in the :doc:`User Guide </model_selection>`.

    Parameters
    ----------
    estimator : skdp estimator or DPPipeline
        Cloned for every fit; never modified.  Its ``epsilon``, ``delta``,
        ``accountant`` and ``random_state`` are set by the search.
    param_distributions : dict or list of dicts
        As in scikit-learn's ``RandomizedSearchCV``: lists (sampled
        uniformly) or frozen ``scipy.stats`` distributions (``rvs``).  May
        include ``epsilon`` and ``delta`` (see ``param_grid`` of
        :class:`DPGridSearchCV`).
    n_iter : int, default=10
        Number of candidates drawn (duplicates are kept: a candidate drawn
        twice is twice as likely in each trial).
    epsilon : float, default=1.0
        Budget of the whole procedure (trials, scores, selection, refit).
    delta : float, default=1e-5
        Delta of the whole procedure.
    n_trials_mean : float, default=10.0
        ``E[K]``, the mean number of trials (>= 1).
    n_trials_distribution : {"geometric", "logarithmic", "poisson"} or float, default="geometric"
        Law of ``K``: a truncated negative binomial with ``eta = 1``
        (geometric) or ``eta = 0`` (logarithmic), any ``eta >= 0``, or
        Poisson (may draw ``K = 0``: then a uniformly random candidate is
        returned with ``best_score_ = nan``).
    validation_fraction : float, default=0.2
        Share of the rows held out for the scores.
    scoring : None, "accuracy", "neg_squared_error", "score_samples" or callable, default=None
        Per-row validation score: ``"accuracy"`` (the default for
        classifiers), ``"neg_squared_error"`` (the default for regressors),
        ``"score_samples"`` (the default otherwise), or
        ``scoring(estimator, X, y)`` returning one score per row.
    score_bounds : (float, float), default=None
        Declared range of the per-row score (required unless ``"accuracy"``);
        scores are clipped to it (never read off the data).
    score_share : float, default=0.25
        Share of a trial's budget spent on its score release.
    refit : bool, default=True
        Refit the chosen candidate on all rows (``True``) or return the
        chosen trial's model (``False``).
    refit_share : float, default=0.5
        Share of ``epsilon`` set aside for the refit.
    accountant : BudgetAccountant, default=None
        Charged once: the whole ``(epsilon, delta)`` is held before any row
        is read and settled to ``privacy_spent_`` afterwards.
    random_state : None, int, RandomState or Generator, default=None
        Seeds the candidates' draw, the split, ``K`` and every fit's noise
        (an int replays the noise: for experiments, never for releases).
    n_jobs : int, default=None
        Trials fitted in parallel (joblib).
    verbose : int, default=0
        0: silent.  1 or more: one line per fit, public quantities only.

    Attributes
    ----------
    best_estimator_ : estimator
        The chosen candidate refitted on all rows (or its trial's model);
        its releases after ``fit`` are charged to the search.
    best_params_ : dict
        The chosen candidate's parameters (a release: the selection).
    best_index_ : int
        Index of the chosen candidate in ``cv_results_["params"]``.
    best_score_ : float
        The chosen trial's *noisy* validation score (a release).
    cv_results_ : dict
        The ``n_iter`` drawn candidates (public) and ``selected_score``: the
        chosen one's noisy score, NaN for the others.
    privacy_spent_ : PrivacySpent
        Guarantee of everything above.
    privacy_ledger_ : PrivacyLedger
        The search's event and the refit's events.

    See Also
    --------
    DPGridSearchCV : The same selection over an explicit grid.

    References
    ----------
    N. Papernot, T. Steinke. Hyperparameter tuning with Renyi differential
    privacy. ICLR 2022.

    Examples
    --------
    >>> from scipy.stats import uniform
    >>> from sklearn.datasets import load_iris
    >>> from skdp import DPGaussianMixture
    >>> from skdp.model_selection import DPRandomizedSearchCV
    >>> X, _ = load_iris(return_X_y=True)
    >>> search = DPRandomizedSearchCV(
    ...     DPGaussianMixture(3, data_norm=10.0, max_iter=3),
    ...     {"reg_covar": uniform(1e-3, 1e-1), "n_components": [2, 3]},
    ...     n_iter=4,
    ...     epsilon=3.0,
    ...     n_trials_mean=3.0,
    ...     score_bounds=(-30.0, 0.0),
    ...     random_state=0,
    ... ).fit(X)
    >>> len(search.cv_results_["params"])
    4
    >>> search.privacy_spent_.epsilon <= 3.0
    True
    """

    def __init__(
        self,
        estimator,
        param_distributions,
        *,
        n_iter=10,
        epsilon=1.0,
        delta=1e-5,
        n_trials_mean=10.0,
        n_trials_distribution="geometric",
        validation_fraction=0.2,
        scoring=None,
        score_bounds=None,
        score_share=0.25,
        refit=True,
        refit_share=0.5,
        accountant=None,
        random_state=None,
        n_jobs=None,
        verbose=0,
    ):
        super().__init__(
            estimator,
            epsilon=epsilon,
            delta=delta,
            n_trials_mean=n_trials_mean,
            n_trials_distribution=n_trials_distribution,
            validation_fraction=validation_fraction,
            scoring=scoring,
            score_bounds=score_bounds,
            score_share=score_share,
            refit=refit,
            refit_share=refit_share,
            accountant=accountant,
            random_state=random_state,
            n_jobs=n_jobs,
            verbose=verbose,
        )
        self.param_distributions = param_distributions
        self.n_iter = n_iter

    def _candidate_list(self):
        if not (isinstance(self.n_iter, numbers.Integral) and self.n_iter >= 1):
            raise ValueError(f"n_iter must be a positive integer, got {self.n_iter!r}.")
        seed = None if self.random_state is None else seed_entropy(self.random_state) % (2**32)
        return list(ParameterSampler(self.param_distributions, self.n_iter, random_state=seed))
