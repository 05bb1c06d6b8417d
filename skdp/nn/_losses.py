"""Per-example losses of a batch without vmap, where skorch's loss allows it.

:func:`unreduced_loss` is the body of the nets' ``_unreduced_loss`` (the fast
path of ``_batch_per_example_loss``, used by ghost clipping and by vmap);
:func:`batch_loss_key` says what that per-example loss is a function of, so
that ghost clipping probes its per-example contract once per configuration.
"""

from __future__ import annotations

import torch
from skorch import NeuralNet, NeuralNetClassifier

from ._ghost import module_config_key

#: skorch's own ``get_loss`` methods (``criterion_(y_pred, y_true)``, after a
#: log for ``NLLLoss`` in the classifier): a net that keeps one of them gets
#: its per-example losses without vmap (:func:`unreduced_loss`).
_SKORCH_GET_LOSSES = (NeuralNet.get_loss, NeuralNetClassifier.get_loss)


def unreduced_loss(net, y_pred, y_true):
    """Per-example losses of a batch from the criterion without reduction, or None.

    With skorch's own ``get_loss`` and a stock criterion that averages
    (``reduction="mean"``), the loss of one example alone is the mean over
    that example's elements, which is what the criterion computes row by
    row with ``reduction="none"``: the same values, and the same
    gradients, as vmapping ``get_loss`` over the examples, without
    vmap's cost per batch.  Covered: ``NLLLoss`` (after skorch's
    ``log(p + eps)``) and ``CrossEntropyLoss`` on class indices
    validated by ``fit`` (no class weights, no label smoothing, a
    negative ``ignore_index`` that no index can equal), ``MSELoss`` and
    ``L1Loss`` on targets of the prediction's shape.  Anything else
    (another criterion or ``get_loss``, unvalidated targets): None, and
    the caller vmaps.
    """
    state = getattr(net, "_dp_fit", None)
    crit = getattr(net, "criterion_", None)
    if (
        state is None
        or not state.validated_targets
        or type(net).get_loss not in _SKORCH_GET_LOSSES
        or not isinstance(y_pred, torch.Tensor)
        or not isinstance(y_true, torch.Tensor)
        or getattr(crit, "reduction", None) != "mean"
        or y_pred.dim() < 1
        or y_pred.device != y_true.device
    ):
        return None
    kind = type(crit)
    if kind in (torch.nn.NLLLoss, torch.nn.CrossEntropyLoss):
        if (
            crit.weight is not None
            or crit.ignore_index >= 0
            or getattr(crit, "label_smoothing", 0.0) != 0.0
            or y_pred.dim() != 2
            or y_true.shape != y_pred.shape[:1]
            or y_true.dtype != torch.int64
        ):
            return None
        if kind is torch.nn.NLLLoss:
            # skorch's NeuralNetClassifier.get_loss: NLLLoss of log-probabilities.
            logp = torch.log(y_pred + torch.finfo(y_pred.dtype).eps)
            return torch.nn.functional.nll_loss(
                logp, y_true, ignore_index=crit.ignore_index, reduction="none"
            )
        return torch.nn.functional.cross_entropy(
            y_pred, y_true, ignore_index=crit.ignore_index, reduction="none"
        )
    if kind in (torch.nn.MSELoss, torch.nn.L1Loss):
        if y_true.shape != y_pred.shape or y_true.dtype != y_pred.dtype:
            return None
        fn = torch.nn.functional.mse_loss if kind is torch.nn.MSELoss else torch.nn.functional.l1_loss
        per_element = fn(y_pred, y_true, reduction="none")
        return per_element.reshape(per_element.shape[0], -1).mean(1)
    return None


class KeyedBatchLoss:
    """A ``batch_loss_fn`` with the ``contract_key`` of what it computes.

    Ghost clipping caches the outcome of its per-example contract probe by
    this key (:meth:`skdp.nn.GhostClipping._contract_key`); calling it calls
    ``fn``.
    """

    __slots__ = ("fn", "contract_key")

    def __init__(self, fn, contract_key):
        self.fn = fn
        self.contract_key = contract_key

    def __call__(self, *args):
        return self.fn(*args)


def batch_loss_key(net):
    """The key of a net's per-example loss of a batch, or None when it cannot be told.

    With skorch's own ``get_loss`` the loss is ``criterion_(y_pred, y_true)``
    (after skorch's log for ``NLLLoss``), without vmap where
    :func:`unreduced_loss` applies: a function of the ``get_loss`` method,
    the criterion's class and configuration
    (:func:`~skdp.nn._ghost.module_config_key`), whether the targets were
    validated by ``fit``, and the net's device.  The caller checks that the
    net's ``_batch_per_example_loss`` and ``_unreduced_loss`` are skdp's.
    """
    if type(net).get_loss not in _SKORCH_GET_LOSSES:
        return None
    crit = getattr(net, "criterion_", None)
    crit_key = module_config_key(crit) if isinstance(crit, torch.nn.Module) else None
    state = getattr(net, "_dp_fit", None)
    if crit_key is None or state is None:
        return None
    return ("skdp.nn net loss", type(net).get_loss, crit_key, bool(state.validated_targets), str(net.device))
