"""The DP-SGD plan of the DP nets, from public quantities only.

Functions of the net's parameters and of a public size (declared, or the
noisy count): what the template reserves (:func:`privacy_plan`, the body of
the nets' ``_privacy_plan`` hook), the floor of a staged plan's epsilon
(:func:`check_staged_epsilon`), the releases of ``scale_inputs``
(:func:`input_bounds_plan`), and the composed cost of a plan, cached
(:func:`_plan_cost`).  ``net`` is a :class:`~skdp.nn.DPNeuralNetClassifier`
or :class:`~skdp.nn.DPNeuralNetRegressor`; the plan is read through its
methods (``_schedule``, ``_planned_events``, ...), which subclasses may
override.
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Any

from ..base import PrivacyPlan, _user_stacklevel
from ..privacy import ADD_REMOVE, compose
from ..privacy.accountants.conversions import DEFAULT_ORDERS
from ..privacy.centring import calibrate_auto_bounds, can_locate_quantile
from ..privacy.dpsgd import calibrate_dpsgd_noise, count_noise_multiplier, dataset_size_event, dpsgd_plan
from ..privacy.ledger import _merged
from ..privacy.norm_selection import DPNormOptions
from ..privacy.quantiles import calibrate_histogram_bounds, can_locate_columns
from ..privacy.staged import staged_filter

#: Largest share of the budget ``scale_inputs`` may take on a small ``n epsilon``.
_MAX_SCALE_SHARE = 0.5
#: The per-column input boxes are released where a column with this share of its rows in one log
#: bin (one sign's half of a column over two octaves) passes the occupied-bin threshold at the
#: share ``bounds_budget``: twice the scalers' margin (a half, two log bins).  At the scalers' margin
#: the boxes were released where their noise cost more than one scale's loss (``docs/nn.md``).
_BOX_SHARE_IN_BIN = 0.25


def _plan_cost(events, delta, composition):
    """``compose(events, delta, composition)``, computed once per process for each plan.

    The events of a fit with ``noise_multiplier`` given are a function of
    public quantities (the multiplier, the declared or noisy size, the
    schedule): the reservation, the hold's extension and the settle compose
    the same history, and refits with the same plan compose it again.  The
    steps are merged into one event with their count, as :func:`compose`
    does, so the key is the same whether the steps are planned or recorded.
    """
    try:
        key = tuple(_merged(e for e in events if e.count > 0))
        hash(key)
    except TypeError:
        return compose(events, delta, composition)
    return _composed(key, float(delta), composition)


@functools.lru_cache(maxsize=256)
def _composed(events, delta, composition):
    return compose(list(events), delta, composition)


@dataclass(frozen=True)
class NetSettings:
    """The nets' plan (:func:`privacy_plan`): what the parameters fix before the data is read.

    The fit copies these into its fit state, where ``fit_loop`` completes
    what ``n_samples="auto"`` leaves open (from the noisy count).

    Attributes
    ----------
    batch_size : int
        Expected batch size of the Poisson batches (``-1``: full batches).
    clip_noise_ratio : float or None
        Share of the noise given to the DPNorm histogram of the clip bound
        (``clip_norm="auto"``), else None.
    dpsgd_plan : DPSGDPlan or None
        Sampling rate and number of steps (:func:`skdp.privacy.dpsgd.dpsgd_plan`),
        when ``n_samples`` is declared; None: planned from the noisy count.
    noise_multiplier : float or None
        The steps' noise multiplier: given, or calibrated to ``(epsilon,
        delta)`` when the plan is known; None: calibrated by the staged
        plan after the count.
    count_noise_std : float or None
        Noise multiplier of the released row count (``n_samples="auto"``).
    schedule : Any
        The training schedule (batch size, epochs) for a declared size, else None.
    input_bounds : AutoBounds, HistogramBounds or None
        The releases of ``scale_inputs`` for a declared size, else None.
    input_n_features : int or None
        The public number of columns that plan was made for (read from the
        shape of ``X`` before the reservation), else None.
    """

    batch_size: int
    clip_noise_ratio: float | None = None
    dpsgd_plan: Any = None
    noise_multiplier: float | None = None
    count_noise_std: float | None = None
    schedule: Any = None
    input_bounds: Any = None
    input_n_features: int | None = None


def privacy_plan(net):
    """What is reserved before the data, and the DP-SGD plan as far as the parameters fix it.

    With ``n_samples`` declared the whole plan (rate, steps, and the noise
    calibrated to ``(epsilon, delta)``) is made here; with ``"auto"`` only
    the count's noise, and ``fit_loop`` makes the rest from the noisy
    count.  With ``noise_multiplier`` given, epsilon is reported, not
    requested: the plan reserves the cost of what is known now (the
    whole plan, or the count; the steps' cost is reserved by
    ``_plan_training`` before the first step).
    """
    batch_size = net._batch_size_param()
    ratio = DPNormOptions.of(net).histogram_noise_ratio
    z = None if net.noise_multiplier is None else float(net.noise_multiplier)
    plan = count_std = schedule = input_bounds = None
    # The public width of X (its shape, read before the reservation by
    # _check_public_input), so that a declared size (a search's split size)
    # gets the same per-column plan as a noisy count would.
    n_features = net.__dict__.get("_public_n_features")
    if net.n_samples == "auto":
        # The size is released with noise in fit_loop; its noise is fixed now.
        count_std = count_noise_multiplier(net.epsilon, net.delta, net.noise_multiplier)
        if z is None:
            # Public parameters only: refused before the budget and the data.
            net._check_staged_epsilon([dataset_size_event(count_std)])
    else:
        schedule = net._schedule(net.n_samples)
        plan = dpsgd_plan(net.n_samples, schedule.batch_size, schedule.max_epochs)
        # Warned by the fit (_prepare_inputs), which knows whether inputs are scaled at all.
        input_bounds = net._input_bounds_plan(net.n_samples, warn=False, n_features=n_features)
    epsilon, delta = net.epsilon, net.delta
    if z is None and plan is not None:
        z = calibrate_dpsgd_noise(
            net.epsilon,
            net.delta,
            plan.sampling_rate,
            plan.n_steps,
            ratio,
            extra_events=() if input_bounds is None else input_bounds.events(),
            composition=net.composition,
        )
    elif z is not None:
        planned = [dataset_size_event(count_std)] if plan is None else net._planned_events(z, plan)
        cost = _plan_cost(planned, net.delta, net.composition)
        epsilon, delta = float(cost.epsilon), float(cost.delta)
    settings = NetSettings(
        batch_size=batch_size,
        clip_noise_ratio=ratio,
        dpsgd_plan=plan,
        noise_multiplier=z,
        count_noise_std=count_std,
        schedule=schedule,
        input_bounds=input_bounds,
        input_n_features=n_features,
    )
    return PrivacyPlan(epsilon, delta, net.composition, settings=settings)


def check_staged_epsilon(net, first_events):
    """Refuse an ``epsilon`` that the staged plan of ``n_samples='auto'`` cannot certify.

    The steps are planned from the noisy count, so their noise is
    calibrated by an RDP filter at one order
    (:func:`~skdp.privacy.staged.staged_filter`).  An RDP bound converts
    to at least ``min_a [log(1 - 1/a) + (log(1/delta) - log a) / (a - 1)]``
    over the accountant's orders ``a`` (Balle et al. 2020, Thm. 21), about
    0.0085 at ``delta=1e-5``: below it (plus the count's share) no noise
    level meets the claim.  ``first_events`` are the first stage's (the
    count's, and the input scaling's once released); a function of the
    parameters, never of the data.
    """
    try:
        staged_filter(first_events, net.epsilon, net.delta, net._neighbouring)
    except ValueError:
        floor = min(
            math.log1p(-1.0 / a) + (math.log(1.0 / net.delta) - math.log(a)) / (a - 1.0)
            for a in DEFAULT_ORDERS
        )
        raise ValueError(
            f"epsilon={net.epsilon:g} is too small for this net at delta={net.delta:g}: with "
            "n_samples='auto' the DP-SGD steps are planned from a noisy count of the rows, and "
            "such a staged plan is accounted at one Renyi order, whose bound cannot certify an "
            f"epsilon below about {floor:.2g} at this delta (more once the count and the input "
            "scaling take their share). Raise epsilon (or delta)."
        ) from None


def public_width(net, X):
    """The number of columns of a 2-D ``X`` from its shape alone (public: read before the reservation), else None.

    The plan of a declared ``n_samples`` (a search's split sizes) is made
    before the data is read; with the width it chooses the per-column input
    boxes as a net fitted alone does (:func:`input_bounds_plan`).  None for
    a module given by the user (its inputs are not scaled by default) and
    for inputs whose shape does not say it (a list; the net leaves tensors,
    dicts and Datasets unscaled).
    """
    if net.module is not None or not hasattr(X, "shape"):
        return None
    shape = X.shape
    width = shape[1] if len(shape) == 2 else None
    return int(width) if isinstance(width, numbers.Integral) else None


def input_bounds_plan(net, n_public, warn=True, n_features=None):
    """The releases of ``scale_inputs`` for a public size, or None.

    Two plans, chosen from public quantities only:

    * **per column** (:class:`~skdp.privacy.quantiles.HistogramBounds`, where
      ``n_features`` is known): a private box of every column
      (:func:`~skdp.privacy.quantiles.private_histogram_box`, add/remove
      neighbours) at the share ``bounds_budget``, where its noise lets a
      column with a quarter of its ``n`` values in one log bin be located at
      this ``d`` (:func:`~skdp.privacy.quantiles.can_locate_columns`,
      :data:`_BOX_SHARE_IN_BIN`): columns of
      any scale and offset, side by side, each reach the module at about
      0.5 rms;
    * else **one scale for all columns**
      (:class:`~skdp.privacy.centring.AutoBounds`): a centre ``c`` and a
      private median of ``||x - c||`` at the share ``bounds_budget`` when
      that share locates a quantile
      (:func:`~skdp.privacy.centring.can_locate_quantile`); otherwise one
      quantile of the raw norms (no centre), the share raised in steps of
      25 % until it locates, at most ``_MAX_SCALE_SHARE`` of the budget.

    A declared ``n_samples`` plans before the reservation, from the width of
    ``X`` where its shape says it (an array, a DataFrame: public), else with
    ``n_features=None``: one scale.  None when inputs are not scaled, or
    when no share locates a quantile (a warning names the parameter, unless
    ``warn`` is False).
    """
    if not net._scales_inputs():
        return None
    eps, delta, share = float(net.epsilon), float(net.delta), float(net.bounds_budget)
    if n_features is not None:
        columns = calibrate_histogram_bounds(eps, delta, 1, share, "basic", neighbouring=ADD_REMOVE)
        if can_locate_columns(n_public, columns.mechanism(n_features), int(n_features), _BOX_SHARE_IN_BIN):
            return columns
    plan = calibrate_auto_bounds(eps, delta, share, neighbouring=ADD_REMOVE)
    if can_locate_quantile(n_public, plan.quantile_epsilon):
        return plan
    while share <= _MAX_SCALE_SHARE:
        plan = calibrate_auto_bounds(eps, delta, share, centre=False, neighbouring=ADD_REMOVE)
        if can_locate_quantile(n_public, plan.quantile_epsilon):
            return plan
        share *= 1.25
    if not warn:
        return None
    # A statement about the public size and epsilon, not about the data.
    warnings.warn(
        f"scale_inputs: about {int(n_public)} records at epsilon={eps:g} cannot locate the input "
        "scale privately; the inputs are used as given. Standardise X with public constants "
        "(and set scale_inputs=False), or raise epsilon.",
        UserWarning,
        stacklevel=_user_stacklevel(),
    )
    return None
