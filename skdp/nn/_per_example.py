"""Per-example gradients materialised by ``torch.func``, and what every strategy returns.

A per-example strategy is an object with one method, ``clipped_sum(module,
loss_fn, batch, threshold_fn)``: it computes the per-example gradient norms,
asks ``threshold_fn`` for the clipping bound (DPNorm needs the norms first),
and returns the sum of the clipped gradients as a :class:`ClippedSum`.
:class:`VmapPerExampleGradients` is the reference strategy;
:class:`~skdp.nn.GhostClipping` (:mod:`skdp.nn._ghost`) builds on the helpers
here.  Clipping follows the rule of :mod:`skdp.privacy.clipping`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch.func import functional_call, grad_and_value, vmap

from ..privacy.clipping import torch_clip_factors

__all__ = ["ClippedSum", "VmapPerExampleGradients"]


# --------------------------------------------------------------------------
# Per-example gradient strategies.
# --------------------------------------------------------------------------


@dataclass
class ClippedSum:
    """What a per-example strategy returns for one batch."""

    grads: dict  # parameter name -> sum of clipped per-example gradients
    norms: torch.Tensor  # per-example gradient norms before clipping, shape (B,)
    threshold: float  # clipping bound C used for this batch
    losses: torch.Tensor  # per-example losses, shape (B,)
    aux: object  # per-example auxiliary outputs (e.g. predictions), batched


class _LossModule(torch.nn.Module):
    """Makes ``loss_fn(module, *example)`` a module so functional_call can swap the parameters."""

    def __init__(self, net, loss_fn):
        super().__init__()
        self.net = net
        self._loss_fn = loss_fn

    def forward(self, *example):
        return self._loss_fn(self.net, *example)


def _tree_map(fn, obj):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _tree_map(fn, v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_tree_map(fn, v) for v in obj)
    return obj


@functools.cache
def _cpu_only():
    """Whether torch has no accelerator backend to seed (no CUDA, MPS, XPU, MTIA or custom device)."""
    checks = (
        lambda: torch.cuda.is_available(),
        lambda: torch.backends.mps.is_available(),
        lambda: torch.xpu.is_available(),
        lambda: torch.mtia.is_available(),
        # A registered custom device (privateuse1) has a module on torch.
        lambda: hasattr(torch, torch._C._get_privateuse1_backend_name()),
    )
    for check in checks:
        try:
            if check():
                return False
        except (AttributeError, RuntimeError):
            return False  # a backend this torch cannot query: seed everything
    return True


def manual_seed(seed):
    """``torch.manual_seed(seed)``, at the cost of seeding the CPU generator where that is all there is.

    ``torch.manual_seed`` also seeds every accelerator backend; a backend
    that is not initialised queues the call with a formatted stack trace
    (about a millisecond per call, and a queue that grows by one entry each
    time).  With no accelerator available the CPU generator is the only one
    to seed, so the two calls have the same effect.
    """
    if _cpu_only():
        torch.default_generator.manual_seed(int(seed))
    else:
        torch.manual_seed(seed)


def _batch_len(batch):
    for leaf in _leaves(batch):
        return int(leaf.shape[0])
    raise ValueError("The batch holds no tensor.")


def _leaves(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _leaves(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _leaves(v)


def _as_loss_and_aux(out):
    if isinstance(out, tuple):
        loss, aux = out
    else:
        # torch.func's has_aux needs a pytree of tensors: () stands for "no aux".
        loss, aux = out, ()
    return loss.reshape(()), aux


def _empty_clipped_sum(module, threshold_fn):
    # An empty Poisson batch still gets its noise (the event is recorded).
    trainable = {k: v.detach() for k, v in module.named_parameters() if v.requires_grad}
    ref = next(iter(trainable.values()))
    grads = {k: torch.zeros_like(v) for k, v in trainable.items()}
    norms = torch.zeros(0, dtype=ref.dtype, device=ref.device)
    threshold = threshold_fn(norms)
    return ClippedSum(grads, norms, threshold, torch.zeros(0, device=ref.device), None)


class VmapPerExampleGradients:
    """Per-example gradients materialised by ``torch.func`` (the reference strategy).

    ``vmap(grad_and_value(f))`` where ``f`` evaluates ``loss_fn`` on one example
    through ``functional_call``; memory grows with batch size times the number
    of parameters.  Dropout draws different masks per example
    (``randomness="different"``).
    """

    name = "vmap"

    def clipped_sum(self, module, loss_fn, batch, threshold_fn):
        """Clipped gradient sum of ``batch``: a ``ClippedSum`` (grads, norms, threshold, losses, aux)."""
        wrapper = _LossModule(module, loss_fn)
        trainable = {f"net.{k}": v.detach() for k, v in module.named_parameters() if v.requires_grad}
        frozen = {f"net.{k}": v.detach() for k, v in module.named_parameters() if not v.requires_grad}
        frozen.update({f"net.{k}": v for k, v in module.named_buffers()})
        n = _batch_len(batch)
        if n == 0:
            return _empty_clipped_sum(module, threshold_fn)

        def one(params, example):
            example = _tree_map(lambda t: t.unsqueeze(0), example)
            loss, aux = _as_loss_and_aux(functional_call(wrapper, (params, frozen), tuple(example)))
            return loss, _tree_map(lambda t: t[0], aux)

        per_grads, (losses, aux) = vmap(
            grad_and_value(one, has_aux=True), in_dims=(None, 0), randomness="different"
        )(trainable, tuple(batch))
        # vector_norm reads the (B, *shape) tensors once without a squared copy.
        per_param = [torch.linalg.vector_norm(g.reshape(n, -1), dim=1) for g in per_grads.values()]
        norms = torch.linalg.vector_norm(torch.stack(per_param, dim=1), dim=1)
        threshold = float(threshold_fn(norms.detach()))
        # min(1, C / norm), exact for every non-zero norm (a zero gradient
        # needs no scaling); 0 for a NaN or infinite norm (skdp.privacy.clipping).
        factors = torch_clip_factors(norms, threshold)
        zero = factors == 0
        if bool(zero.any()):
            # Such an example's gradient may hold inf or NaN, and inf * 0 is
            # NaN: its clipped gradient is the zero vector.
            per_grads = {
                k: torch.where(zero.view(-1, *([1] * (g.dim() - 1))), torch.zeros_like(g), g)
                for k, g in per_grads.items()
            }
        grads = {k[4:]: torch.tensordot(factors, g, dims=1) for k, g in per_grads.items()}
        return ClippedSum(
            grads, norms.detach(), threshold, losses, None if isinstance(aux, tuple) and not aux else aux
        )
