"""Ghost clipping: per-example gradient norms without per-example gradients.

DP-SGD needs, for every example ``i`` of a batch, the norm of its own
gradient ``||grad l_i||`` and then the clipped sum
``sum_i min(1, C / ||grad l_i||) grad l_i``.  Materialising the per-example
gradients (``vmap(grad)``, Opacus' hooks) costs batch size times parameter
count of memory.  For the layers below both quantities follow from what one
ordinary backward pass already has: each layer's input activations ``a`` and
the gradients ``g`` of the summed loss ``sum_i l_i`` with respect to its
outputs (examples do not interact in the forward pass, so the rows of ``g``
for example ``i`` are exactly ``d l_i / d output_i``; this per-example
contract is checked on a synthetic batch before the first step, see
:meth:`GhostClipping._probe_contract`).

Linear layer, ``T`` positions per example (Goodfellow 2015; Li et al. 2021,
Sec. 4, "ghost clipping"; Bu et al. 2022)
    The example's weight gradient is ``G_i^T A_i`` with ``A_i`` (T x d) the
    inputs and ``G_i`` (T x p) the output gradients, so

    ``||G_i^T A_i||_F^2 = sum_{t,s} (a_t . a_s)(g_t . g_s) = <A_i A_i^T, G_i G_i^T>``

    (the Gram-matrix form; ``||g_i||^2 ||a_i||^2`` for ``T = 1``), and the bias
    gradient is ``sum_t g_t``.  Cost ``O(T^2 (d + p))`` per example instead of
    ``O(T d p)``; when ``T^2 > d p`` the per-example gradient is cheaper and is
    formed instead (the "mixed" rule of Bu et al. 2022).
Conv1d / Conv2d
    ``unfold`` turns a convolution into a Linear layer over ``T = L`` output
    positions with ``d = C_in k / groups`` (per group), so the same formula
    holds per group (Bu et al. 2022).
Embedding
    The weight gradient of example ``i`` is ``sum_t e_{x_t} g_t^T``, so
    ``||.||^2 = sum_{t,s} [x_t = x_s] (g_t . g_s)`` (the embedding case of
    ghost clipping in Li et al. 2021); rows at ``padding_idx`` get no gradient.
LayerNorm
    The per-example gradients ``sum_t g_t * xhat_t`` (weight) and
    ``sum_t g_t`` (bias) have the layer's small size and are formed directly.

Clipped sum ("book-keeping", Bu et al. 2023)
    With the per-example factors ``w_i = min(1, C / ||grad l_i||)`` the
    clipped sum is ``sum_i w_i G_i^T A_i``: one matrix product per layer with
    the output gradients scaled row-wise by ``w``, which replaces the second
    backward pass of Li et al. (same result, one backward instead of two).

The result is exactly the per-example clipping of Abadi et al. up to
floating-point rounding, so the privacy analysis of the engine is unchanged.
"""

from __future__ import annotations

import contextlib
import math
import random
import types
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from ..privacy.clipping import torch_clip_factors
from ._per_example import (
    ClippedSum,
    VmapPerExampleGradients,
    _batch_len,
    _empty_clipped_sum,
    _leaves,
    _tree_map,
    manual_seed,
)

__all__ = [
    "GhostClipping",
    "GhostClippingFallbackWarning",
    "find_unsupported_layer",
    "linear_form_sq_norms",
    "uses_ghost_norm",
]


class GhostClippingFallbackWarning(UserWarning):
    """Ghost clipping cannot handle a layer; per-example gradients (vmap) are used instead."""


_SUPPORTED = (
    torch.nn.Linear,
    torch.nn.Conv1d,
    torch.nn.Conv2d,
    torch.nn.Embedding,
    torch.nn.LayerNorm,
)


def _unsupported_reason(layer):
    # Exact types only: a subclass may use its parameters outside forward
    # (MultiheadAttention's out_proj), which the hooks would not see.
    if type(layer) not in _SUPPORTED:
        return f"{type(layer).__name__} has trainable parameters and no ghost-norm rule"
    if isinstance(layer, torch.nn.Embedding):
        if layer.sparse:
            return "Embedding(sparse=True)"
        if layer.scale_grad_by_freq:
            return "Embedding(scale_grad_by_freq=True) scales gradients by batch-wide counts"
        if layer.max_norm is not None:
            return "Embedding(max_norm=...) renormalises the weight inside forward"
    return None


def find_unsupported_layer(module):
    """``(name, reason)`` of the first layer ghost clipping cannot handle, or None.

    A layer is supported when it is exactly one of Linear, Conv1d, Conv2d,
    Embedding (dense, no ``max_norm``/``scale_grad_by_freq``) or LayerNorm.
    Layers without trainable parameters of their own (activations, dropout,
    pooling, containers) need no rule.  A parameter shared by two layers
    (tied weights) is not supported.
    """
    owner = {}
    for name, layer in module.named_modules():
        own = [p for p in layer.parameters(recurse=False) if p.requires_grad]
        if not own:
            continue
        reason = _unsupported_reason(layer)
        for p in own:
            # A tied parameter's per-example gradient is the sum over its layers,
            # whose norm is not the sum of the layers' squared norms.
            if id(p) in owner:
                reason = f"shares a parameter with layer {owner[id(p)]!r} (tied weights)"
            owner.setdefault(id(p), name or "<root>")
        if reason is not None:
            return name or "<root>", reason
    return None


def warn_fallback(name, reason):
    """The one-time notice of a fit that falls back to vmap per-example gradients.

    ``name`` is the layer to blame, or None when the module as a whole fails
    the per-example contract (:meth:`GhostClipping._probe_contract`).
    """
    what = "this module" if name is None else f"layer {name!r}"
    warnings.warn(
        f"Ghost clipping does not support {what} ({reason}); falling back to vmap "
        "per-example gradients, which evaluate each example alone (same privacy, more memory "
        "and time). Pass clipping_mode='vmap' to silence this notice.",
        GhostClippingFallbackWarning,
        stacklevel=3,
    )


# --------------------------------------------------------------------------
# Linear form: per-example weight gradient G_i A_i^T per group.
# --------------------------------------------------------------------------


def uses_ghost_norm(T, d, p):
    """Whether a linear-form layer takes the ghost (Gram) branch: ``2 T^2 < p d``.

    The mixed rule of Bu, Mao & Xu (2022, Sec. 4): the ghost norm of one
    example costs the two ``T x T`` Gram matrices (``2 T^2`` entries), its
    per-example weight gradient ``p x d`` entries; the smaller is formed.
    ``T`` counts the positions of all calls of the layer (weight sharing),
    ``d`` its inputs and ``p`` its outputs per group.  ``T = 1`` (a Linear
    layer on one row) is always ghost: ``||g||^2 ||a||^2``.
    """
    return T == 1 or 2 * T * T < p * d


def linear_form_sq_norms(A, G):
    """Per-example ``||G_i A_i^T||_F^2`` summed over groups, by the mixed rule.

    Parameters
    ----------
    A : tensor of shape (B, h, d, T)
        Inputs at ``T`` positions, ``h`` groups (``unfold``'s layout).
    G : tensor of shape (B, h, p, T)
        Output gradients.

    Returns
    -------
    tensor of shape (B,)
        ``<A_i^T A_i, G_i^T G_i>`` (the Gram form of ghost clipping) when
        :func:`uses_ghost_norm`, else the squared norm of the formed
        per-example gradient.
    """
    return _linear_form_norms_and_state(A, G)[0]


def _linear_form_norms_and_state(A, G):
    """``(sq, per_example)``: per-example squared norms, and the gradients when formed (else None)."""
    B, h, d, T = A.shape
    p = G.shape[2]
    if T == 1:
        return (A.square().sum((2, 3)) * G.square().sum((2, 3))).sum(1), None
    if uses_ghost_norm(T, d, p):
        gram_a = torch.matmul(A.transpose(-1, -2), A)  # (B, h, T, T)
        gram_g = torch.matmul(G.transpose(-1, -2), G)
        return (gram_a * gram_g).sum((1, 2, 3)), None
    per_example = torch.matmul(G, A.transpose(-1, -2))  # (B, h, p, d)
    return per_example.square().sum((1, 2, 3)), per_example


def _linear_form_clipped(A, G, w):
    """``sum_i w_i G_i A_i^T`` per group, shape (h, p, d), from the unfolded inputs."""
    B, h, d, T = A.shape
    p = G.shape[2]
    Gw = G * w.view(B, 1, 1, 1).to(G.dtype)
    if T == 1:
        if h == 1:
            return (Gw.reshape(B, p).T @ A.reshape(B, d)).unsqueeze(0)
        return torch.matmul(Gw.reshape(B, h, p).permute(1, 2, 0), A.reshape(B, h, d).transpose(0, 1))
    return torch.einsum("bhpt,bhdt->hpd", Gw, A)


# --------------------------------------------------------------------------
# Per-layer rules: (input, output gradient) of every call -> norms, clipped sums.
# --------------------------------------------------------------------------


def _linear_parts(layer, x, g):
    """Linear call as the linear form: ``(B, 1, d, T)`` inputs, ``(B, 1, p, T)`` output gradients."""
    B = x.shape[0]
    return (
        x.reshape(B, -1, x.shape[-1]).transpose(1, 2).unsqueeze(1),
        g.reshape(B, -1, g.shape[-1]).transpose(1, 2).unsqueeze(1),
    )


def _conv_geometry(layer):
    """``(padded-input transform, kernel, dilation, stride)`` of a Conv1d/Conv2d as a 2-D unfold."""
    if isinstance(layer, torch.nn.Conv1d):
        return (1, *layer.kernel_size), (1, *layer.dilation), (1, *layer.stride)
    return layer.kernel_size, layer.dilation, layer.stride


def _conv_padded(layer, x):
    """The input as the convolution sees it: padded by the layer's mode, 2-D (Conv1d gets a unit height)."""
    pads = layer._reversed_padding_repeated_twice
    if any(pads):  # no copy for an unpadded convolution
        mode = "constant" if layer.padding_mode == "zeros" else layer.padding_mode
        x = F.pad(x, pads, mode=mode)
    return x.unsqueeze(2) if isinstance(layer, torch.nn.Conv1d) else x


def _unfold(x, kernel, dilation, stride):
    """``F.unfold(x, kernel, dilation, padding=0, stride)`` of a 4-D ``x``: the same values.

    The patches as a strided view of ``x`` (no index arithmetic per
    element), copied once into unfold's ``(B, C kh kw, L)`` layout; faster
    than torch's CPU ``im2col`` (about half the time on the layers of
    small CNNs).
    """
    B, C, H, W = x.shape
    (kh, kw), (dh, dw), (sh, sw) = kernel, dilation, stride
    oh, ow = (H - dh * (kh - 1) - 1) // sh + 1, (W - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        return F.unfold(x, kernel, dilation=dilation, padding=0, stride=stride)
    sB, sC, sH, sW = x.stride()
    patches = x.as_strided((B, C, kh, kw, oh, ow), (sB, sC, sH * dh, sW * dw, sH * sh, sW * sw), x.storage_offset())
    return patches.reshape(B, C * kh * kw, oh * ow)


def _conv_parts(layer, x, g):
    """Conv call as the linear form: ``unfold`` gives ``(B, h, C_in k / h, L)``; gradients ``(B, h, C_out / h, L)``."""
    B = x.shape[0]
    kernel, dilation, stride = _conv_geometry(layer)
    cols = _unfold(_conv_padded(layer, x), kernel, dilation, stride)
    h = layer.groups
    L = cols.shape[-1]
    # unfold orders channels slowest, so consecutive channel blocks are the groups.
    return cols.view(B, h, -1, L), g.reshape(B, h, -1, L)


def _cat1(parts):
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def _cat_positions(parts):
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)


def _conv_weight_grad(layer, x, g):
    """``sum_i`` of the weight gradients of a Conv call with output gradients ``g``: torch's own conv backward."""
    kernel, dilation, stride = _conv_geometry(layer)
    xp = _conv_padded(layer, x)
    g2 = g.unsqueeze(2) if isinstance(layer, torch.nn.Conv1d) else g
    shape = (layer.out_channels, layer.in_channels // layer.groups, *kernel)
    grad = torch.nn.grad.conv2d_weight(
        xp, shape, g2, stride=stride, padding=0, dilation=dilation, groups=layer.groups
    )
    return grad.reshape(layer.weight.shape)


def _conv_per_example_weight_grads(layer, x, g):
    """Per-example weight gradients of a Conv call, shape (B, *weight.shape)."""
    kernel, dilation, stride = _conv_geometry(layer)
    xp = _conv_padded(layer, x)
    g2 = g.unsqueeze(2) if isinstance(layer, torch.nn.Conv1d) else g
    shape = (layer.out_channels, layer.in_channels // layer.groups, *kernel)

    def one(xi, gi):
        return torch.nn.grad.conv2d_weight(
            xi[None], shape, gi[None], stride=stride, padding=0, dilation=dilation, groups=layer.groups
        )

    return torch.func.vmap(one)(xp, g2).reshape(x.shape[0], *layer.weight.shape)


class _LinearRule:
    """Linear and Conv layers through the linear form, ghost or per-example per layer (mixed rule)."""

    @staticmethod
    def parts(layer, x, g):
        if isinstance(layer, torch.nn.Linear):
            return _linear_parts(layer, x, g)
        return _conv_parts(layer, x, g)

    @staticmethod
    def bias_per_example(layer, g):
        if isinstance(layer, torch.nn.Linear):
            return g.reshape(g.shape[0], -1, g.shape[-1]).sum(1)
        return g.reshape(g.shape[0], g.shape[1], -1).sum(-1)

    @staticmethod
    def form(layer, calls):
        """``(T, d, p)`` of the layer's linear form: positions of all calls, inputs and outputs per group."""
        if isinstance(layer, torch.nn.Linear):
            T = sum(math.prod(g.shape[1:-1]) for _, g in calls)
            return T, layer.in_features, layer.out_features
        T = sum(math.prod(g.shape[2:]) for _, g in calls)
        h = layer.groups
        return T, layer.in_channels // h * math.prod(layer.kernel_size), layer.out_channels // h

    @classmethod
    def norms_and_state(cls, layer, calls):
        # Several calls of one layer (weight sharing) are more positions of one example.
        state = {"calls": calls, "bias": None, "per_example": None, "unfolded": None}
        B = calls[0][0].shape[0]
        sq = None
        if layer.weight.requires_grad:
            T, d, p = cls.form(layer, calls)
            if isinstance(layer, torch.nn.Linear) or uses_ghost_norm(T, d, p):
                A, G = (
                    _cat_positions(parts)
                    for parts in zip(*(cls.parts(layer, x, g) for x, g in calls), strict=True)
                )
                sq, state["per_example"] = _linear_form_norms_and_state(A, G)
                if state["per_example"] is None and isinstance(layer, torch.nn.Linear):
                    state["unfolded"] = (A, G)
            else:
                # Mixed rule's per-example branch for a convolution: torch's
                # conv backward batched by vmap (a grouped convolution), no unfold.
                pe = sum(_conv_per_example_weight_grads(layer, x, g) for x, g in calls)
                state["per_example"] = pe
                sq = pe.reshape(B, -1).square().sum(1)
        if layer.bias is not None and layer.bias.requires_grad:
            bias = sum(cls.bias_per_example(layer, g) for _, g in calls)
            state["bias"] = bias
            sq = bias.square().sum(1) if sq is None else sq + bias.square().sum(1)
        if sq is None:
            ref = calls[0][1]
            sq = torch.zeros(B, dtype=ref.dtype, device=ref.device)
        return sq, state

    @staticmethod
    def clipped(layer, state, w):
        out = {}
        if layer.weight.requires_grad:
            if state["per_example"] is not None:
                # Mixed rule's per-example branch: the gradients exist, weight them.
                pe = state["per_example"]
                out["weight"] = torch.tensordot(w.to(pe.dtype), pe, dims=1).reshape(layer.weight.shape)
            elif state["unfolded"] is not None:
                A, G = state["unfolded"]
                out["weight"] = _linear_form_clipped(A, G, w).reshape(layer.weight.shape)
            else:
                # Book-keeping (Bu et al. 2023) for a convolution: the weight
                # gradient of the output gradients scaled row-wise by w, by
                # torch's conv backward (no unfolded copy).
                out["weight"] = sum(
                    _conv_weight_grad(layer, x, g * w.view(-1, *([1] * (g.dim() - 1))).to(g.dtype))
                    for x, g in state["calls"]
                )
        if state["bias"] is not None:
            out["bias"] = w.to(state["bias"].dtype) @ state["bias"]
        return out


class _EmbeddingRule:
    @staticmethod
    def norms_and_state(layer, calls):
        B = calls[0][0].shape[0]
        idx = _cat1([x.reshape(B, -1) for x, _ in calls])
        G = _cat1([g.reshape(B, -1, g.shape[-1]) for _, g in calls])
        if layer.padding_idx is not None:
            G = G * (idx != layer.padding_idx).unsqueeze(-1).to(G.dtype)
        if idx.shape[1] == 1:
            sq = G.square().sum((1, 2))
        else:
            same = (idx.unsqueeze(2) == idx.unsqueeze(1)).to(G.dtype)
            sq = (same * torch.matmul(G, G.transpose(1, 2))).sum((1, 2))
        return sq, (idx, G)

    @staticmethod
    def clipped(layer, state, w):
        idx, G = state
        Gw = (G * w.view(-1, 1, 1).to(G.dtype)).reshape(-1, G.shape[-1])
        grad = torch.zeros_like(layer.weight)
        return {"weight": grad.index_add_(0, idx.reshape(-1), Gw)}


class _LayerNormRule:
    @staticmethod
    def norms_and_state(layer, calls):
        grads = {}
        for x, g in calls:
            B = x.shape[0]
            xhat = F.layer_norm(x, layer.normalized_shape, None, None, layer.eps)
            parts = {}
            if layer.weight is not None and layer.weight.requires_grad:
                parts["weight"] = (g * xhat).reshape(B, -1, *layer.normalized_shape).sum(1)
            if layer.bias is not None and layer.bias.requires_grad:
                parts["bias"] = g.reshape(B, -1, *layer.normalized_shape).sum(1)
            for name, v in parts.items():
                grads[name] = grads[name] + v if name in grads else v
        B = calls[0][0].shape[0]
        ref = calls[0][1]
        sq = torch.zeros(B, dtype=ref.dtype, device=ref.device)
        for v in grads.values():
            sq = sq + v.reshape(B, -1).square().sum(1)
        return sq, grads

    @staticmethod
    def clipped(layer, state, w):
        return {name: torch.tensordot(w.to(v.dtype), v, dims=1) for name, v in state.items()}


def _rule(layer):
    if isinstance(layer, torch.nn.Embedding):
        return _EmbeddingRule
    if isinstance(layer, torch.nn.LayerNorm):
        return _LayerNormRule
    return _LinearRule


# --------------------------------------------------------------------------
# The strategy.
# --------------------------------------------------------------------------


def _leading_dim_problem(in_shape, out_shape, n):
    """Why a layer call is not batch-first for a batch of ``n``, or None."""
    if len(in_shape) == 0 or in_shape[0] != n or len(out_shape) == 0 or out_shape[0] != n:
        lead = in_shape[0] if len(in_shape) else "none"
        return (
            f"its input (leading dimension {lead}) or output is not batch-first for a batch of {n} "
            "(a sequence-first or batch-shared tensor)"
        )
    return None


#: Rows of the synthetic batch of the per-example contract probe (two
#: interleaved halves of 4; a half-batch run gives the second batch size).
_PROBE_ROWS = 8
#: Public seed of the probe's inputs, perturbations and torch random state:
#: the probe's outcome may depend on the module and the batch's trailing
#: shapes and dtypes only, never on the values of private records.
_PROBE_SEED = 0x5EED


def _synthetic_batch(batch, m, seed):
    """A data-independent batch of ``m`` rows with ``batch``'s structure, trailing shapes and dtypes.

    Floating leaves are uniform on ``[0, 1)`` (valid for probabilities,
    logarithms, Bernoulli targets); other leaves (indices, class labels,
    masks) are zeros, the one value valid for every index range.  Only
    shapes and dtypes of the real batch are read, never its values.
    """
    gen = torch.Generator().manual_seed(seed)

    def leaf(t):
        shape = (m, *t.shape[1:]) if t.dim() > 0 else ()
        if t.is_floating_point():
            return torch.rand(shape, generator=gen, dtype=torch.float64).to(device=t.device, dtype=t.dtype)
        return torch.zeros(shape, dtype=t.dtype, device=t.device)

    return _tree_map(leaf, tuple(batch))


#: Torch's dropout layers: masks drawn per element, or per example and
#: channel, so they keep the per-example contract; the probe runs them in
#: eval mode so that its passes are deterministic (exact types: a subclass
#: may override ``forward``).
_DROPOUTS = (
    torch.nn.Dropout,
    torch.nn.Dropout1d,
    torch.nn.Dropout2d,
    torch.nn.Dropout3d,
    torch.nn.AlphaDropout,
    torch.nn.FeatureAlphaDropout,
)


@contextlib.contextmanager
def _probe_context(module):
    """Run probe passes without a trace on training.

    Torch's random state (CPU and the module's CUDA devices) is restored,
    so training draws what it would have drawn; buffers a custom forward
    may update are restored; dropout layers run in eval mode meanwhile.
    """
    cuda = sorted({p.device.index or 0 for p in module.parameters() if p.device.type == "cuda"})
    dropouts = [layer for layer in module.modules() if type(layer) in _DROPOUTS and layer.training]
    buffers = [(b, b.detach().clone()) for b in module.buffers()]
    try:
        with torch.random.fork_rng(devices=cuda):
            for layer in dropouts:
                layer.eval()
            yield
    finally:
        for layer in dropouts:
            layer.train()
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)


# --------------------------------------------------------------------------
# Probe outcomes, cached per contract key.
# --------------------------------------------------------------------------


class _Uncacheable(Exception):
    """A configuration value without a key that determines it (the probe then runs)."""


#: torch.nn.Module internals of ``vars(module)``: the parameters, buffers and
#: submodules are keyed by their metadata; hooks make a module uncacheable;
#: state-dict hooks and buffer bookkeeping do not run in forward.
_MODULE_INTERNALS = frozenset(
    {
        "_parameters",
        "_buffers",
        "_modules",
        "_non_persistent_buffers_set",
        "_state_dict_hooks",
        "_state_dict_pre_hooks",
        "_load_state_dict_pre_hooks",
        "_load_state_dict_post_hooks",
        "_forward_hooks_with_kwargs",
        "_forward_hooks_always_called",
        "_forward_pre_hooks_with_kwargs",
    }
)
_MODULE_HOOKS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
)
_GLOBAL_HOOKS = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
)
_PLAIN_TYPES = (
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
)


def _config_key(value):
    """A hashable key that determines a plain configuration value, or raise :class:`_Uncacheable`.

    Numbers, strings, dtypes and devices by value (with their type: ``1``
    and ``True`` differ); tuples, lists and dicts of them element by element;
    classes and closure-free functions by identity (the key holds them, so
    an identity is never reused by another object).  Anything else (a
    tensor, a generator, an arbitrary object, a closure) is uncacheable.
    """
    kind = type(value)
    if kind in _PLAIN_TYPES:
        return kind, value
    if kind in (tuple, list, torch.Size):
        return kind, tuple(_config_key(v) for v in value)
    if isinstance(value, dict) and kind.__module__ in ("builtins", "collections"):
        return kind, tuple((_config_key(k), _config_key(v)) for k, v in value.items())
    if isinstance(value, type) or isinstance(value, types.BuiltinFunctionType):
        return "identity", value
    if isinstance(value, types.FunctionType) and value.__closure__ is None:
        return "identity", value
    raise _Uncacheable(kind.__name__)


def _class_key(cls):
    """The attributes of ``cls`` and of its bases below ``torch.nn.Module``.

    A module's ``forward`` may read class attributes and call methods that
    are replaced at run time; plain values are keyed by value, anything else
    (methods, descriptors, objects) by identity.
    """
    parts = []
    for klass in cls.__mro__:
        if klass is torch.nn.Module or not issubclass(klass, torch.nn.Module):
            continue
        for k, v in vars(klass).items():
            if k in ("__dict__", "__weakref__", "__doc__"):
                continue
            try:
                parts.append((k, _config_key(v)))
            except _Uncacheable:
                parts.append((k, _ByIdentity(v)))
    return cls, tuple(parts)


class _ByIdentity:
    """A key part equal only for the same object (hashable whatever the object; it holds the object, so the id stays unique)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _ByIdentity) and other.obj is self.obj


def _tensor_meta(t):
    if t is None:
        return None
    return tuple(t.shape), t.dtype, t.device, t.requires_grad, type(t)


def module_config_key(module):
    """A key of ``module``'s code and configuration, not of its parameter and buffer values; or None.

    For every submodule: its name, class and the attributes of its class
    and bases (:func:`_class_key`: ``forward`` and every method it may
    call), training flag, the names, shapes, dtypes, devices and
    ``requires_grad`` of its parameters and buffers, and every other
    attribute by :func:`_config_key`.  None when a submodule has an attribute without
    such a key (a tensor attribute, a generator of its own, an arbitrary
    object) or any forward or backward hook, or when torch has global
    module hooks: what such a module computes is not determined by the key.
    """
    module_mod = torch.nn.modules.module
    if any(getattr(module_mod, name, None) for name in _GLOBAL_HOOKS):
        return None
    parts = []
    try:
        for name, sub in module.named_modules(remove_duplicate=False):
            attrs = vars(sub)
            if any(attrs.get(h) for h in _MODULE_HOOKS):
                return None
            other = tuple(
                (k, _config_key(v))
                for k, v in attrs.items()
                if k not in _MODULE_INTERNALS and k not in _MODULE_HOOKS
            )
            params = tuple((k, _tensor_meta(p)) for k, p in sub._parameters.items())
            buffers = tuple((k, _tensor_meta(b)) for k, b in sub._buffers.items())
            parts.append((name, _class_key(type(sub)), other, params, buffers))
    except _Uncacheable:
        return None
    return tuple(parts)


def _batch_signature(batch):
    """The structure, trailing shapes, dtypes and devices of ``batch`` (what a synthetic batch is made of)."""
    if isinstance(batch, torch.Tensor):
        return "tensor", tuple(batch.shape[1:]), batch.dim() == 0, batch.dtype, batch.device, type(batch)
    if isinstance(batch, dict):
        return type(batch), tuple((_config_key(k), _batch_signature(v)) for k, v in batch.items())
    if isinstance(batch, (list, tuple)):
        return type(batch), tuple(_batch_signature(v) for v in batch)
    return _config_key(batch)


def loss_contract_key(batch_loss_fn):
    """The ``contract_key`` attribute its caller gave a ``batch_loss_fn`` (the nets do), or None.

    A bare function is not keyed: what it computes may depend on state that
    no key sees (globals, a closure, the object of a bound method).
    """
    return getattr(batch_loss_fn, "contract_key", None)


#: Probe outcomes (None, or the ``(layer, reason)`` of a fallback) by
#: :meth:`GhostClipping._contract_key`; bounded, oldest dropped first.
_PROBE_OUTCOMES = {}
_PROBE_OUTCOMES_MAX = 256


def _remember_outcome(key, outcome):
    if len(_PROBE_OUTCOMES) >= _PROBE_OUTCOMES_MAX:
        with contextlib.suppress(RuntimeError, StopIteration, KeyError):  # fits in other threads
            _PROBE_OUTCOMES.pop(next(iter(_PROBE_OUTCOMES)))
    _PROBE_OUTCOMES[key] = outcome


def _global_random_states():
    """Python's and NumPy's global random states (a probe that draws from them is not cached)."""
    name, keys, pos, has_gauss, cached = np.random.get_state()  # noqa: NPY002 -- the legacy global state is what is watched
    return random.getstate(), (name, keys.tobytes(), pos, has_gauss, cached)


def _rows_where(mask, new, old):
    """``old`` with the rows of ``mask`` taken from ``new`` (leaf by leaf; scalars stay)."""
    if isinstance(old, torch.Tensor):
        if old.dim() == 0:
            return old
        return torch.where(mask.to(old.device).view(-1, *([1] * (old.dim() - 1))), new, old)
    if isinstance(old, dict):
        return {k: _rows_where(mask, new[k], v) for k, v in old.items()}
    if isinstance(old, (list, tuple)):
        return type(old)(_rows_where(mask, a, b) for a, b in zip(new, old, strict=True))
    return old


def _close(a, b, tol):
    """``|a - b| <= tol * max(|a|, |b|)`` elementwise, scale taken over the whole tensors."""
    scale = torch.maximum(a.abs().max(), b.abs().max())
    return bool(((a - b).abs() <= tol * scale).all())


def _split_loss(out, n):
    losses, aux = out if isinstance(out, tuple) else (out, None)
    if not isinstance(losses, torch.Tensor) or losses.shape != (n,):
        shape = getattr(losses, "shape", type(losses).__name__)
        raise ValueError(
            f"batch_loss_fn must return per-example losses of shape ({n},) (or a tuple (losses, aux)), "
            f"got {shape}."
        )
    return losses, aux


class GhostClipping:
    """Per-example clipping by ghost norms (Li et al. 2021; Bu et al. 2022).

    A strategy for :class:`~skdp.nn.DPSGDEngine` (the ``clipped_sum`` slot):
    one forward pass of the whole batch through ``batch_loss_fn`` with hooks
    on the parameterised layers, one backward pass to the layers' outputs,
    the per-example norms from activations and output gradients
    (the rules of the ghost clipping section of :doc:`/nn`),
    then the clipped sum layer by layer.  Memory stays that of ordinary
    training: no per-example gradient tensor is formed (except, by the mixed
    rule, where it is smaller than the Gram matrices).

    Every layer with trainable parameters must be supported
    (:func:`~skdp.nn.find_unsupported_layer`) and use its parameters only through its
    ``forward``.  The result equals
    :class:`~skdp.nn.VmapPerExampleGradients` up to rounding.  A layer whose
    input or output is modified in place after its forward
    (``ReLU(inplace=True)``) is detected on the first step, which then, like
    every later one, is computed by vmap (with the fallback notice).  So is
    a layer whose calls are not batch-first (a sequence-first tensor, a
    positional ``Embedding(arange(T))`` shared by the batch): leading
    dimensions are checked on every step and, once, on a forward pass of a
    synthetic batch of another size.

    Per-example contract: loss ``i`` of ``batch_loss_fn`` depends on
    example ``i`` alone, in value and gradient.  Ghost clipping reads
    example ``i``'s gradient off row ``i`` of the gradients of the summed
    loss, so a module that mixes examples (``x - x.mean(0)``, a softmax or
    attention across the batch, mixup, an output scaled by the batch size)
    gives each row every example's contribution, and one added record moves
    the clipped sum by far more than the clipping bound ``C``: the
    sensitivity of the engine's privacy analysis would be false.  BatchNorm
    is refused outright (:func:`~skdp.nn.check_per_example_support`); any
    other module is checked once, on the first non-empty batch, by a
    probe: gradient, value and batch-size checks on a
    synthetic batch built from the real batch's trailing shapes and dtypes
    only (no value of a record is read, so the outcome, which is released
    through the notice and ``clipping_mode``, reveals nothing about the
    data).  A module that fails, or on which the probe cannot run, is
    computed by vmap from then on, with the fallback notice: vmap evaluates
    ``loss_fn`` on each example alone (a batch of one), so the contract
    holds for it by construction, whatever the module does with its batch.
    The probe is a test on one synthetic batch, not a proof; a module that
    mixes examples only for some values or batch sizes needs
    ``clipping_mode='vmap'``.

    Parameters
    ----------
    batch_loss_fn : callable
        ``batch_loss_fn(module, *batch)`` returns the per-example losses of
        the whole batch, shape ``(B,)``, or ``(losses, aux)``; loss ``i`` must
        equal ``loss_fn`` on example ``i`` alone.

    See Also
    --------
    skdp.nn.VmapPerExampleGradients : the reference strategy.
    skdp.nn.DPSGDEngine : selects it with ``clipping_mode='ghost'``.

    References
    ----------
    I. Goodfellow. Efficient per-example gradient computations. 2015.
    X. Li, F. Tramer, P. Liang, T. Hashimoto. Large language models can be
    strong differentially private learners. ICLR 2022 (Sec. 4).
    Z. Bu, J. Mao, S. Xu. Scalable and efficient training of large
    convolutional neural networks with differential privacy. NeurIPS 2022.
    Z. Bu, Y.-X. Wang, S. Zha, G. Karypis. Differentially private
    optimization on large model at small cost. ICML 2023 (book-keeping).

    Examples
    --------
    >>> import torch
    >>> from skdp.nn import GhostClipping, VmapPerExampleGradients
    >>> _ = torch.manual_seed(0)
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).double()
    >>> x, y = torch.randn(5, 3, dtype=torch.float64), torch.tensor([0, 1, 1, 0, 1])
    >>> def loss(m, x, y):
    ...     return torch.nn.functional.cross_entropy(m(x), y)
    >>> def batch_loss(m, x, y):
    ...     return torch.nn.functional.cross_entropy(m(x), y, reduction="none")
    >>> ghost = GhostClipping(batch_loss).clipped_sum(net, loss, (x, y), lambda norms: 0.1)
    >>> ref = VmapPerExampleGradients().clipped_sum(net, loss, (x, y), lambda norms: 0.1)
    >>> all(torch.allclose(ghost.grads[k], ref.grads[k]) for k in ref.grads)
    True
    """

    name = "ghost"

    def __init__(self, batch_loss_fn):
        self.batch_loss_fn = batch_loss_fn
        self._fallback = None
        self._probed = False

    def _fall_back(self, name, reason, module, loss_fn, batch, threshold_fn):
        warn_fallback(name, reason)
        self._fallback = VmapPerExampleGradients()
        self.name = self._fallback.name
        return self._fallback.clipped_sum(module, loss_fn, batch, threshold_fn)

    def _probe_layout(self, module, layers, batch, n):
        """``(name, reason)`` of a layer whose calls are not batch-first, or None.

        The rules read example ``i`` from row ``i`` of a layer's input and
        output.  A layer fed a sequence-first tensor, a tensor shared by the
        batch (a positional ``Embedding(arange(T))``) or a flattened batch
        breaks that, and its norms would be wrong, possibly too small, which
        breaks the sensitivity.  Checking that leading dimensions equal the
        batch size catches these unless a constant leading dimension happens
        to equal ``n``; a forward pass of a batch of another size (1, or 2
        when ``n = 1``) cannot coincide with the same constant, so the two
        checks together are exact for shapes.  That batch is synthetic
        (:func:`_synthetic_batch`: the real batch's trailing shapes and
        dtypes, no values).  The probe runs once, without gradients, and
        restores torch's random state (dropout, a VAE's reparameterisation),
        so training draws what it would have drawn.
        """
        m = 2 if n == 1 else 1
        sub = _synthetic_batch(batch, m, _PROBE_SEED)
        seen = {name: [] for name, _ in layers}

        def tap(name):
            def hook(layer, inputs, output):
                seen[name].append((inputs[0].shape, output.shape))

            return hook

        handles = [layer.register_forward_hook(tap(name)) for name, layer in layers]
        try:
            with _probe_context(module), torch.no_grad():
                self.batch_loss_fn(module, *sub)
        finally:
            for h in handles:
                h.remove()
        for name, _ in layers:
            for in_shape, out_shape in seen[name]:
                problem = _leading_dim_problem(in_shape, out_shape, m)
                if problem is not None:
                    return name, problem
        return None

    def _probe_contract(self, module, layers, batch):
        """Why the module breaks the per-example contract on a probe batch, or None.

        The contract: loss ``i`` of ``batch_loss_fn`` depends on example
        ``i`` alone, through values and gradients.  Ghost clipping reads
        example ``i``'s gradient off row ``i`` of the output gradients of
        the summed loss; a module that mixes examples (``x - x.mean(0)``,
        attention or a softmax across the batch, mixup) makes that row
        carry the other examples' losses too, and one added record then
        moves every clipped gradient: the sensitivity ``C`` is false.  On a
        synthetic batch of :data:`_PROBE_ROWS` rows (:func:`_synthetic_batch`),
        torch's random state reseeded to the same public seed before every
        pass (dropout masks and reparameterisation noise are then the same
        in every pass), the checks are:

        1. gradients (one pass): the gradient of the summed losses of one
           half of the rows (even, then odd) with respect to the floating
           inputs and to every parameterised layer's outputs is zero on the
           other half's rows.  Per-example arithmetic gives exact zeros, so
           the tolerance is one rounding, ``eps * max|grad|``;
        2. values: with the other half's floating inputs redrawn and noise
           added to its rows of every parameterised layer's output (this
           also varies examples whose inputs are all integer zeros), the
           half's losses are unchanged.  This catches mixing that autograd
           does not see (``x - x.mean(0).detach()``, integer arithmetic);
        3. batch size: the first half evaluated alone gives the same
           losses (unless the losses are random under torch's global
           generator, which a pass with another seed tells).

        Checks 2 and 3 compare passes, so they need the losses to repeat
        under the same seed; a module drawing from a generator of its own
        (the VAE of :mod:`skdp.generative`) does not, is checked by 1 only,
        and its generator advances by the probe's passes (data-independent
        draws).  Values are compared up to ``sqrt(eps) * max|loss|``
        (``eps`` of the losses' dtype; 3.5e-4 in float32): batches of
        different sizes may round differently, while mixing of any
        practical strength moves the losses by far more.  Cost, once per
        fit: four forward passes of 8 rows and one of 4 (one more when the
        batch-size check fails) and two backward passes of 8 rows.

        Torch ``Dropout`` layers are put in eval mode for the probe: their
        masks are drawn per element (per example and channel), so they keep
        the contract, and without them the batch-size check is meaningful.
        The probe is a test, not a proof: a module that mixes examples only
        on some inputs or batch sizes can pass it (use
        ``clipping_mode='vmap'`` for such modules).
        """
        m = _PROBE_ROWS
        base = _synthetic_batch(batch, m, _PROBE_SEED)
        other = _synthetic_batch(batch, m, _PROBE_SEED + 1)
        even = torch.arange(m) % 2 == 0
        halves = (even, ~even)
        state = {"changed": None, "gen": None, "outputs": []}

        def hook(layer, inputs, output):
            rows_ok = isinstance(output, torch.Tensor) and output.is_floating_point() and output.dim() > 0
            if not (rows_ok and output.shape[0] == m):
                return None
            changed = state["changed"]
            if changed is None:
                state["outputs"].append(output)
                return None
            noise = torch.randn(output.shape, generator=state["gen"], dtype=torch.float64)
            noise = noise.to(device=output.device, dtype=output.dtype)
            return output + noise * changed.to(output.device).view(-1, *([1] * (output.dim() - 1)))

        def run(inputs, seed, changed=None):
            state.update(changed=changed, gen=torch.Generator().manual_seed(_PROBE_SEED + 2), outputs=[])
            manual_seed(seed)
            return _split_loss(self.batch_loss_fn(module, *inputs), _batch_len(inputs))[0]

        leaves = [t.requires_grad_() for t in _leaves(base) if t.is_floating_point() and t.dim() > 0]
        # Clones enter the module, so that it may modify its inputs in place.
        inputs = _tree_map(lambda t: t.clone() if t.requires_grad else t, base)
        handles = [layer.register_forward_hook(hook) for _, layer in layers]
        try:
            with _probe_context(module):
                with torch.enable_grad():
                    losses = run(inputs, _PROBE_SEED)
                if not bool(torch.isfinite(losses).all()):
                    return "its losses on the synthetic probe batch are not finite, so the contract cannot be checked"
                eps = torch.finfo(losses.dtype).eps
                targets = leaves + [o for o in state["outputs"] if o.requires_grad]
                if losses.requires_grad and targets:
                    for part in halves:
                        grads = torch.autograd.grad(
                            losses[part].sum(), targets, retain_graph=True, allow_unused=True
                        )
                        for g in grads:
                            if g is not None and g[~part].abs().max() > eps * g.abs().max():
                                return "the gradient of one example's loss reaches other examples' inputs"
                losses = losses.detach()
                tol = eps**0.5
                with torch.no_grad():
                    if not _close(run(base, _PROBE_SEED), losses, tol):
                        # Random beyond torch's global generator (a generator
                        # of the module's own): passes cannot be compared, and
                        # only the one-pass gradient check applies.
                        return None
                    for part in halves:
                        moved = run(_rows_where(~part, other, base), _PROBE_SEED, changed=~part)
                        if not _close(moved[part], losses[part], tol):
                            return "one example's loss changes when other examples of the batch change"
                    h = m // 2
                    alone = run(_tree_map(lambda t: t[:h] if t.dim() > 0 else t, base), _PROBE_SEED)
                    if not _close(alone, losses[:h], tol):
                        reseeded = run(base, _PROBE_SEED + 1)
                        if _close(reseeded, losses, tol):  # deterministic: the size itself matters
                            return "one example's loss changes with the batch size"
        finally:
            for h in handles:
                h.remove()
        return None

    def _contract_key(self, module, batch, n):
        """What the probes' outcome is a function of, as a hashable key; None when it cannot be told.

        The probes read no value of the batch or of the module's parameters
        that training does not change anyway: they run on a synthetic batch
        made from the real batch's structure, trailing shapes and dtypes,
        once per fit, at the parameters' initial values (training then moves
        them without probing again).  Their outcome is therefore taken as a
        function of the module's code and configuration
        (:func:`module_config_key`), of the per-example loss
        (:func:`loss_contract_key`: a ``contract_key`` the caller attached,
        as the nets do for their criterion and loss path),
        of the batch's signature and of whether ``n = 1`` (the layout
        probe's batch size).  None when any part has no such key.
        """
        loss_key = loss_contract_key(self.batch_loss_fn)
        if loss_key is None:
            return None
        module_key = module_config_key(module)
        if module_key is None:
            return None
        try:
            key = (module_key, loss_key, _batch_signature(batch), n == 1, torch.get_default_dtype())
            hash(key)
        except (_Uncacheable, TypeError):
            return None
        return key

    def _probe(self, module, layers, batch, n):
        """``(layer name or None, reason)`` of a module that breaks the layout or the contract, or None.

        The layout probe (:meth:`_probe_layout`), then the per-example
        contract probe (:meth:`_probe_contract`).  Their outcome is cached
        in the process by :meth:`_contract_key`, so the fits of one
        configuration (a search, refits with new seeds) probe once: not
        cached are a probe that raised (then ``problem`` says so and vmap is
        used for this fit) and one that drew from Python's or NumPy's global
        random state (the next fit would then draw differently).
        """
        key = self._contract_key(module, batch, n)
        if key is not None and key in _PROBE_OUTCOMES:
            return _PROBE_OUTCOMES[key]
        before = None if key is None else _global_random_states()
        try:
            problem = self._probe_layout(module, layers, batch, n)
            if problem is None:
                reason = self._probe_contract(module, layers, batch)
                problem = None if reason is None else (None, reason)
        except Exception as exc:  # noqa: BLE001 -- any failure means "unchecked": vmap is exact
            return (
                None,
                "the per-example contract could not be checked on a synthetic probe batch: "
                f"{type(exc).__name__}: {exc}",
            )
        if key is not None and _global_random_states() == before:
            _remember_outcome(key, problem)
        return problem

    def clipped_sum(self, module, loss_fn, batch, threshold_fn):
        """Clipped gradient sum of ``batch``: a ``ClippedSum`` (grads, norms, threshold, losses, aux)."""
        if self._fallback is not None:
            return self._fallback.clipped_sum(module, loss_fn, batch, threshold_fn)
        unsupported = find_unsupported_layer(module)
        if unsupported is not None:
            # Norms of such a layer would be silently wrong, hence too small.
            raise ValueError(f"GhostClipping cannot handle layer {unsupported[0]!r}: {unsupported[1]}.")
        n = _batch_len(batch)
        if n == 0:
            return _empty_clipped_sum(module, threshold_fn)
        layers = [
            (name, layer)
            for name, layer in module.named_modules()
            if any(p.requires_grad for p in layer.parameters(recurse=False))
        ]
        calls = {name: [] for name, _ in layers}

        def tap(name):
            def hook(layer, inputs, output):
                calls[name].append((inputs[0].detach(), inputs[0]._version, output, output._version))

            return hook

        handles = [layer.register_forward_hook(tap(name)) for name, layer in layers]
        try:
            with torch.enable_grad():
                losses, aux = _split_loss(self.batch_loss_fn(module, *batch), n)
        finally:
            for h in handles:
                h.remove()
        if not self._probed:
            # After the real forward, so that a loss of the wrong shape is
            # reported for the real batch; the probes touch no real value.
            self._probed = True
            problem = self._probe(module, layers, batch, n)
            if problem is not None:
                return self._fall_back(*problem, module, loss_fn, batch, threshold_fn)
        for name, _ in layers:
            for x, _, out, _ in calls[name]:
                problem = _leading_dim_problem(x.shape, out.shape, n)
                if problem is not None:
                    return self._fall_back(name, problem, module, loss_fn, batch, threshold_fn)
        outputs = [c[2] for name, _ in layers for c in calls[name]]
        out_grads = torch.autograd.grad(losses.sum(), outputs, allow_unused=True) if outputs else ()
        it = iter(out_grads)
        sq = torch.zeros(n, dtype=losses.dtype, device=losses.device)
        states = []
        for name, layer in layers:
            used = []
            for x, x_version, out, out_version in calls[name]:
                g = next(it)
                if x._version != x_version or out._version != out_version:
                    # The captured tensors no longer hold what the backward used.
                    return self._fall_back(
                        name,
                        "its input or output is modified in place, e.g. by ReLU(inplace=True)",
                        module,
                        loss_fn,
                        batch,
                        threshold_fn,
                    )
                if g is not None:
                    used.append((x, g.detach()))
            if not used:  # the layer did not influence the loss: zero gradient
                states.append((name, layer, None))
                continue
            layer_sq, state = _rule(layer).norms_and_state(layer, used)
            sq = sq + layer_sq.to(sq.dtype)
            states.append((name, layer, state))
        # A squared norm that overflowed the float type meets a zero factor
        # (inf * 0, e.g. a huge input through a ReLU that is off) as NaN.
        # Counted as infinite, the example's factor is 0: it contributes
        # nothing, which is within the bound, where a NaN factor would turn
        # the whole clipped sum into NaN.
        sq = torch.nan_to_num(sq, nan=math.inf, posinf=math.inf)  # torch maps inf to the largest float by default
        norms = sq.clamp(min=0).sqrt()
        threshold = float(threshold_fn(norms.detach()))
        factors = torch_clip_factors(norms, threshold)
        grads = {}
        for name, layer, state in states:
            sums = _rule(layer).clipped(layer, state, factors) if state is not None else {}
            for pname, p in layer.named_parameters(recurse=False):
                if p.requires_grad:
                    key = f"{name}.{pname}" if name else pname
                    grads[key] = sums[pname].to(p.dtype) if pname in sums else torch.zeros_like(p)
        if aux is not None:
            aux = aux.detach() if isinstance(aux, torch.Tensor) else aux
        return ClippedSum(grads, norms.detach(), threshold, losses.detach(), aux)
