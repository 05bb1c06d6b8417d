"""Parameter checks of the DP nets (skorch has no parameter validation).

:func:`check_net_params` is the body of the nets' ``_check_params`` hook of
the privacy template (:class:`skdp.base.DPEstimatorMixin`): a function of the
parameters alone, run before the budget and the data.
"""

from __future__ import annotations

import math
import numbers
import warnings

from ..base import _user_stacklevel
from ..exceptions import PrivacyLeakWarning
from ..privacy import COMPOSITIONS, BudgetAccountant
from ..privacy.dpsgd import dataset_size_event, dpsgd_step_event
from ..privacy.ledger import COMPOSITION_CONSTRAINT, accountant_for
from ..privacy.norm_selection import DPNormOptions


def _is_auto(v):
    return isinstance(v, str) and v == "auto"


def _is_positive_real(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _supports_dpsgd(composition):
    # Asks the core: a representative step (any q < 1: support depends on the
    # sampling scheme and relation, not on the numbers) and the noisy count.
    try:
        accountant_for([dataset_size_event(1.0), dpsgd_step_event(1.0, 0.5)], composition)
    except ValueError:
        return False
    return True


def _check_dpsgd_composition(composition):
    """Refuse a ``composition`` that cannot account DP-SGD's steps (before any reservation)."""
    # skorch has no parameter validation: the one constraint of every estimator's composition=.
    if not COMPOSITION_CONSTRAINT.is_satisfied_by(composition):
        raise ValueError(f"composition must be {COMPOSITION_CONSTRAINT}, got {composition!r}.")
    if not _supports_dpsgd(composition):
        supported = tuple(c for c in COMPOSITIONS if _supports_dpsgd(c))
        raise ValueError(
            f"composition={composition!r} cannot account DP-SGD's Poisson-subsampled Gaussian steps "
            f"(it has no rule for subsampled mechanisms); use one of {supported}."
        )


def check_net_params(net):
    """Refuse the parameters of a DP net that no fit can honour (the nets' ``_check_params``)."""
    if net.noise_multiplier is None or net.epsilon is not None:
        if not _is_positive_real(net.epsilon):
            raise ValueError(f"epsilon must be a positive finite number, got {net.epsilon!r}.")
    if not (isinstance(net.delta, numbers.Real) and 0 < net.delta < 1):
        raise ValueError(f"delta must be in (0, 1) (DP-SGD adds Gaussian noise), got {net.delta!r}.")
    _check_dpsgd_composition(net.composition)
    clip_norm, clip_norm_max, clip_norm_bins, clip_norm_noise_ratio = DPNormOptions.of(net)
    if clip_norm != "auto" and not _is_positive_real(clip_norm):
        raise ValueError(f"clip_norm must be 'auto' or a positive finite number, got {clip_norm!r}.")
    if not _is_positive_real(clip_norm_max):
        raise ValueError(f"clip_norm_max must be a positive finite number, got {clip_norm_max!r}.")
    if net.noise_multiplier is not None and not _is_positive_real(net.noise_multiplier):
        raise ValueError(
            f"noise_multiplier must be None or a positive finite number, got {net.noise_multiplier!r}."
        )
    if not (isinstance(clip_norm_bins, numbers.Integral) and clip_norm_bins >= 1):
        raise ValueError(f"clip_norm_bins must be a positive integer, got {clip_norm_bins!r}.")
    if not _is_positive_real(clip_norm_noise_ratio):
        raise ValueError(
            f"clip_norm_noise_ratio must be a positive finite number, got {clip_norm_noise_ratio!r}."
        )
    if net.clipping_mode not in ("ghost", "vmap"):
        raise ValueError(f"clipping_mode must be 'ghost' or 'vmap', got {net.clipping_mode!r}.")
    if net.accountant is not None and not isinstance(net.accountant, BudgetAccountant):
        raise TypeError(
            f"accountant must be a BudgetAccountant or None, got {type(net.accountant).__name__}."
        )
    if not (
        _is_auto(net.max_epochs) or (isinstance(net.max_epochs, numbers.Integral) and net.max_epochs >= 1)
    ):
        raise ValueError(f"max_epochs must be 'auto' or a positive integer, got {net.max_epochs!r}.")
    if not (_is_auto(net.lr) or _is_positive_real(net.lr)):
        raise ValueError(f"lr must be 'auto' or a positive finite number, got {net.lr!r}.")
    if not (_is_auto(net.scale_inputs) or isinstance(net.scale_inputs, bool)):
        raise ValueError(f"scale_inputs must be 'auto', True or False, got {net.scale_inputs!r}.")
    if net.scale_inputs is True and net.noise_multiplier is not None:
        raise ValueError(
            "scale_inputs=True spends a share of epsilon on the input scaling: it needs epsilon "
            "(noise_multiplier=None); with noise_multiplier given set scale_inputs=False or 'auto'."
        )
    if not (_is_positive_real(net.bounds_budget) and net.bounds_budget < 1):
        raise ValueError(f"bounds_budget must be in (0, 1), got {net.bounds_budget!r}.")
    if not (
        (isinstance(net.n_samples, str) and net.n_samples == "auto")
        or (
            isinstance(net.n_samples, numbers.Integral)
            and not isinstance(net.n_samples, bool)
            and net.n_samples >= 1
        )
    ):
        raise ValueError(f"n_samples must be 'auto' or a positive integer, got {net.n_samples!r}.")
    batch_size = net._batch_size_param()
    if not (_is_auto(batch_size) or batch_size == -1) and not (
        isinstance(batch_size, numbers.Integral) and not isinstance(batch_size, bool) and batch_size >= 1
    ):
        raise ValueError(f"batch_size must be 'auto', a positive integer or -1, got {batch_size!r}.")
    if net.warm_start:
        raise ValueError(
            "warm_start=True would continue training outside the privacy plan of a fit; "
            "DP nets always train from scratch (set warm_start=False)."
        )
    if net.train_split is not None:
        warnings.warn(
            "train_split is set: the validation records are scored without noise, so the validation "
            "scores in history (valid_loss, valid_acc, ...) and anything chosen from them are outside "
            "privacy_spent_, which covers the training split only. Use train_split=None and "
            "validate on public data.",
            PrivacyLeakWarning,
            stacklevel=_user_stacklevel(),
        )
