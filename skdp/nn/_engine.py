"""The DP-SGD engine: one private gradient step on any torch module.

Acs et al. (2018), Alg. 4, which extends Abadi et al. (2016):

1. *Sampling* (line 1): each record enters the batch independently with
   probability ``q = L / N`` (Poisson sampling, :class:`PoissonBatchIterator`).
2. *Per-example gradients* (line 2): the gradient of each record's own loss.
3. *Clipping* (lines 3-5): ``g_i / max(1, ||g_i||_2 / C)``, with ``C`` fixed
   (:class:`FixedClipping`) or chosen per batch by DPNorm (Alg. 3,
   :class:`~skdp.nn.DPNormClipping`).
4. *Noise* (line 6): ``(sum_i clipped g_i + N(0, sigma^2 C^2 I)) / L``.

Privacy (sensitivity derivation)
    Under add/remove neighbours one record changes the clipped sum of line 6 by
    one clipped gradient, of L2 norm at most ``C``: the L2 sensitivity is ``C``
    and the Gaussian noise of std ``sigma * C`` is a Gaussian mechanism with
    noise multiplier ``sigma``.  (The paper states ``sqrt(2) C`` because it
    counts replace-one neighbours; amplification by Poisson sampling needs
    add/remove, as in Abadi et al.)  The divisor ``L`` is the *expected* batch
    size, a public constant, so the released mean is post-processing.  One
    step is therefore a Poisson-subsampled Gaussian mechanism
    (:func:`~skdp.privacy.dpsgd.dpsgd_step_event`), accounted by RDP in the privacy core
    (Mironov, Talwar & Zhang 2019; Zhu & Wang 2019) -- the moments accountant of
    Acs et al., Section II and III-D, Theorem 1.

Swappable pieces
    How per-example gradient norms and the clipped sum are obtained is a
    *strategy* object with one method, ``clipped_sum(module, loss_fn, batch,
    threshold_fn)``: it computes the per-example norms, asks ``threshold_fn``
    for the clipping bound (DPNorm needs the norms first), and returns the sum
    of the clipped gradients.  :class:`VmapPerExampleGradients` materialises
    per-example gradients with ``torch.func`` (``functional_call`` +
    ``vmap(grad)``); :class:`~skdp.nn.GhostClipping` (``clipping_mode='ghost'``,
    :mod:`skdp.nn._ghost`) gets the norms from activations and output
    gradients and the clipped sum from one reweighted product per layer,
    without per-example gradients, in the same slot.  The engine is not tied to
    classification: ``loss_fn(module, *batch)`` is any per-example loss (a
    VAE's negative ELBO works the same way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import default_collate

from .._config import resolve_secure_noise
from ..privacy.dpsgd import (
    DPSGDStepLedger,
    check_noise_setting,
    dpsgd_step_event,
    poisson_batch_indices,
)
from ..privacy.mechanisms.torch_noise import TorchGaussianMechanism
from ._ghost import GhostClipping, find_unsupported_layer, warn_fallback
from ._per_example import VmapPerExampleGradients, _batch_len, _tree_map

__all__ = [
    "DPSGDEngine",
    "FixedClipping",
    "PoissonBatchIterator",
    "check_per_example_support",
]


# --------------------------------------------------------------------------
# Clipping bounds.
# --------------------------------------------------------------------------


class FixedClipping:
    """Clip every per-example gradient to L2 norm ``max_grad_norm`` (Abadi et al.).

    ``clip_noise_multiplier`` is ``None``: choosing the bound costs no privacy.
    """

    clip_noise_multiplier = None

    def __init__(self, max_grad_norm):
        if not (math.isfinite(max_grad_norm) and max_grad_norm > 0):
            raise ValueError(f"max_grad_norm must be a positive finite number, got {max_grad_norm!r}.")
        self.max_grad_norm = float(max_grad_norm)

    def threshold(self, norms, ledger=None, generator=None):
        """The fixed bound (``norms`` are not looked at; nothing is released)."""
        return self.max_grad_norm


# --------------------------------------------------------------------------
# Layer support.
# --------------------------------------------------------------------------


def check_per_example_support(module):
    """Raise ``ValueError`` naming the first layer that mixes examples of a batch.

    BatchNorm (and InstanceNorm with running statistics) normalises with
    statistics of the whole batch, so one record's "gradient" depends on the
    others and clipping it bounds nothing.  GroupNorm and LayerNorm are
    per-example and allowed.
    """
    bad = (torch.nn.modules.batchnorm._BatchNorm,)
    for name, layer in module.named_modules():
        is_bad = isinstance(layer, bad) or (
            isinstance(layer, torch.nn.modules.instancenorm._InstanceNorm) and layer.track_running_stats
        )
        if is_bad:
            raise ValueError(
                f"Layer {name or '<root>'!r} ({type(layer).__name__}) mixes the examples of a batch, so "
                "per-example gradients (and their clipping) are undefined for it. Replace it by "
                "torch.nn.GroupNorm or torch.nn.LayerNorm."
            )


def _select_strategy(module, per_example, batch_loss_fn, clipping_mode):
    if clipping_mode not in (None, "ghost", "vmap"):
        raise ValueError(f"clipping_mode must be 'ghost', 'vmap' or None, got {clipping_mode!r}.")
    if per_example is not None:
        if clipping_mode is not None:
            raise ValueError("Give either per_example (a strategy object) or clipping_mode, not both.")
        return per_example
    if clipping_mode is None:
        clipping_mode = "ghost" if batch_loss_fn is not None else "vmap"
    if clipping_mode == "vmap":
        return VmapPerExampleGradients()
    if batch_loss_fn is None:
        raise ValueError(
            "clipping_mode='ghost' needs batch_loss_fn (per-example losses of a whole batch, shape (B,)); "
            "give it or use clipping_mode='vmap'."
        )
    unsupported = find_unsupported_layer(module)
    if unsupported is not None:
        warn_fallback(*unsupported)
        return VmapPerExampleGradients()
    return GhostClipping(batch_loss_fn)


# --------------------------------------------------------------------------
# The engine.
# --------------------------------------------------------------------------


@dataclass
class StepResult:
    """Diagnostics of one private step (the noisy gradient is in ``param.grad``)."""

    batch_size: int
    threshold: float
    losses: torch.Tensor
    aux: object


class DPSGDEngine:
    """One DP-SGD step (Acs et al. 2018, Algorithm 4) on any torch module.

    :meth:`step` computes the clipped per-example gradient sum of a Poisson
    batch, adds ``N(0, sigma^2 C^2)``, divides by the expected batch size and
    writes the result into ``param.grad`` of every trainable parameter; the
    caller then runs its optimiser.  Each step records one event
    (:func:`~skdp.nn.dpsgd_step_event`) on the fit's ledger, and the engine refuses to
    take more than ``max_steps`` steps, so training can never spend more than
    its plan.

    Parameters
    ----------
    module : torch.nn.Module
        The model; checked with :func:`~skdp.nn.check_per_example_support`.
    loss_fn : callable
        ``loss_fn(module, *example_batch)`` returns the loss of a batch of one
        example, or ``(loss, aux)`` where ``aux`` (e.g. the prediction) is
        returned batched in the ``StepResult`` that :meth:`step` returns.
    noise_multiplier : float
        sigma of Alg. 4, line 6 (noise std over clipping bound).
    sampling_rate : float
        Poisson sampling rate ``q`` of the batches fed to :meth:`step`.
    expected_batch_size : float
        ``L = q N``, the public divisor of line 6.
    clipping : FixedClipping or DPNormClipping
        How the clipping bound ``C`` is chosen.
    max_steps : int
        Steps the privacy plan allows.
    per_example : object, default=None
        Per-example strategy (an object with ``clipped_sum``); overrides
        ``clipping_mode``.
    generator : torch.Generator, default=None
        Source of the noise (seed it for reproducible experiments).
    batch_loss_fn : callable, default=None
        ``batch_loss_fn(module, *batch)`` returns the per-example losses of a
        whole batch, shape ``(B,)`` (or ``(losses, aux)``), loss ``i`` equal
        to ``loss_fn`` on example ``i`` alone (e.g. a criterion with
        ``reduction='none'``, or a VAE's negative ELBO summed over features
        only).  Needed by ghost clipping.
    clipping_mode : {"ghost", "vmap"} or None, default=None
        How per-example norms and the clipped sum are computed.  ``"ghost"``
        (:class:`~skdp.nn.GhostClipping`: norms from activations and output
        gradients, no per-example gradient tensor) when every parameterised
        layer is supported, else :class:`~skdp.nn.VmapPerExampleGradients` with a
        :class:`~skdp.nn.GhostClippingFallbackWarning` naming the layer
        (once, here).  ``"vmap"``: always per-example gradients.  None:
        ``"ghost"`` if ``batch_loss_fn`` is given, else ``"vmap"``.  Both
        give the same clipped sum up to rounding, hence the same privacy.
    secure_noise : bool or None, default=None
        The noise is floating-point, so ``True`` is refused
        (``skdp.privacy.dpsgd.check_noise_setting``), at construction and
        at every step.  None follows the package setting
        (``skdp.get_config()["secure_noise"]``), read at construction and at
        every step; the DP estimators pass ``False``, having refused secure
        noise themselves before reserving.

    """

    def __init__(
        self,
        module,
        loss_fn,
        *,
        noise_multiplier,
        sampling_rate,
        expected_batch_size,
        clipping,
        max_steps,
        per_example=None,
        generator=None,
        batch_loss_fn=None,
        clipping_mode=None,
        secure_noise=None,
    ):
        check_per_example_support(module)
        self.secure_noise = secure_noise
        check_noise_setting(resolve_secure_noise(secure_noise))
        if not any(p.requires_grad for p in module.parameters()):
            raise ValueError("The module has no trainable parameter.")
        if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
            raise ValueError(f"noise_multiplier must be a positive finite number, got {noise_multiplier!r}.")
        if not 0 < sampling_rate <= 1:
            raise ValueError(f"sampling_rate must be in (0, 1], got {sampling_rate!r}.")
        self.module = module
        self.loss_fn = loss_fn
        self.noise_multiplier = float(noise_multiplier)
        self.sampling_rate = float(sampling_rate)
        self.expected_batch_size = float(expected_batch_size)
        self.clipping = clipping
        self.max_steps = int(max_steps)
        self.batch_loss_fn = batch_loss_fn
        self.per_example = _select_strategy(module, per_example, batch_loss_fn, clipping_mode)
        self.generator = generator
        self.steps_taken = 0

    @property
    def clipping_mode(self):
        """The per-example strategy in use: ``"ghost"``, ``"vmap"`` or a custom strategy's name."""
        return getattr(self.per_example, "name", type(self.per_example).__name__)

    def event(self, count=1):
        """Privacy event of ``count`` steps of this engine."""
        return dpsgd_step_event(
            self.noise_multiplier, self.sampling_rate, self.clipping.clip_noise_multiplier, count
        )

    def step(self, batch, ledger):
        """Write the noisy clipped mean gradient of ``batch`` into ``param.grad``.

        ``batch`` is a tuple of tensors (and dicts of tensors) with the examples
        along the first axis, as passed to ``loss_fn``.
        """
        check_noise_setting(resolve_secure_noise(self.secure_noise))
        if self.steps_taken >= self.max_steps:
            raise RuntimeError(
                f"The privacy plan allows {self.max_steps} DP-SGD steps; refusing to take another one "
                "(it would exceed the budget)."
            )
        # The step's event goes on the ledger before any of its noise exists;
        # its releases (DPNorm's histogram, the gradient sum) record their
        # parts on the step, which checks that they add up to the event.
        step = DPSGDStepLedger(ledger, self.event())
        self.steps_taken += 1
        result = self.per_example.clipped_sum(
            self.module,
            self.loss_fn,
            batch,
            lambda norms: self.clipping.threshold(norms, step, self.generator),
        )
        trainable = [(name, p) for name, p in self.module.named_parameters() if p.requires_grad]
        # One release: the clipped sum of all parameters together has L2
        # sensitivity C (one example's clipped gradient), whatever the split.
        noise = TorchGaussianMechanism(sensitivity=result.threshold, noise_multiplier=self.noise_multiplier)
        noisy = noise.release({name: result.grads[name] for name, _ in trainable}, self.generator, step)
        step.close()
        for name, param in trainable:
            # The noisy sums are fresh tensors: divided in place.
            param.grad = noisy[name].div_(self.expected_batch_size)
        return StepResult(_batch_len(batch), result.threshold, result.losses, result.aux)


# --------------------------------------------------------------------------
# Poisson sampling.
# --------------------------------------------------------------------------


class PoissonBatchIterator:
    """Iterable of ``n_steps`` Poisson batches of ``dataset`` per pass.

    Replaces the shuffled DataLoader: the accounting assumes Poisson sampling,
    which a fixed-size shuffled partition does not give.  Batch sizes vary
    (and may be 0).  Each pass (epoch) draws fresh batches from ``rng``.

    Parameters
    ----------
    dataset : torch.utils.data.Dataset
        Indexable; skorch datasets are indexed with the whole index array at
        once, others example by example and collated.
    sampling_rate : float
    n_steps : int
        Batches per pass.
    rng : numpy.random.Generator
    """

    def __init__(self, dataset, sampling_rate, n_steps, rng):
        self.dataset = dataset
        self.sampling_rate = float(sampling_rate)
        self.n_steps = int(n_steps)
        self.rng = rng
        self._tensors = _row_indexed_tensors(dataset)

    def __len__(self):
        return self.n_steps

    def __iter__(self):
        n = len(self.dataset)
        for _ in range(self.n_steps):
            yield self._fetch(poisson_batch_indices(n, self.sampling_rate, self.rng))

    def _fetch(self, idx):
        from skorch.dataset import Dataset as SkorchDataset

        if self._tensors is not None:
            # The rows skorch's Dataset would return, without its per-batch
            # index-type checks (a Python pass over the indices).
            rows = torch.from_numpy(idx)
            # index_select: the rows of t[rows], without advanced indexing's overhead (5x on CPU).
            return tuple(torch.index_select(t, 0, rows.to(t.device)) for t in self._tensors)
        if isinstance(self.dataset, SkorchDataset):
            Xi, yi = self.dataset[idx]
            return _to_tensors(Xi), _to_tensors(yi)
        if len(idx):
            return default_collate([self.dataset[int(i)] for i in idx])
        # Collate one example only to learn the batch structure, then keep none of it.
        return _tree_map(lambda t: t[:0], default_collate([self.dataset[0]]))


def _row_indexed_tensors(dataset):
    """``(X, y)`` as tensors where a batch of ``dataset`` is their rows at the batch's indices, else None.

    That is skorch's own ``Dataset`` (not a subclass, which may transform)
    holding an array or tensor ``X`` and ``y``: ``dataset[idx]`` is then
    ``(X[idx], y[idx])``, which :meth:`PoissonBatchIterator._fetch` turns
    into tensors.  ``torch.as_tensor`` shares the arrays' memory.
    """
    from skorch.dataset import Dataset as SkorchDataset

    if type(dataset) is not SkorchDataset or dataset.X_is_ndframe:
        return None
    arrays = (dataset.X, dataset.y)
    if not all(isinstance(a, (np.ndarray, torch.Tensor)) and a.ndim >= 1 for a in arrays):
        return None
    try:
        return tuple(torch.as_tensor(a) for a in arrays)
    except (TypeError, ValueError, RuntimeError):  # dtypes or strides torch cannot share: skorch's path
        return None


def _to_tensors(obj):
    if isinstance(obj, np.ndarray):
        return torch.as_tensor(obj)
    if isinstance(obj, dict):
        return {k: _to_tensors(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_tensors(v) for v in obj)
    return obj
