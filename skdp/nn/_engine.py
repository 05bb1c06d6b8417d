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
    (:func:`dpsgd_step_event`), accounted by RDP in the privacy core
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
import numbers
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import functional_call, grad_and_value, vmap
from torch.utils.data import default_collate

from .._config import get_config
from ..privacy import (
    ADD_REMOVE,
    GaussianMechanism,
    SubsampledGaussianEvent,
    calibrate_noise_multiplier,
    gaussian_noise_multiplier,
)

__all__ = [
    "COUNT_NOISE_FACTOR",
    "DPSGDEngine",
    "DPSGDPlan",
    "FixedClipping",
    "GaussianNoise",
    "PoissonBatchIterator",
    "VmapPerExampleGradients",
    "calibrate_dpsgd_noise",
    "check_noise_setting",
    "check_per_example_support",
    "combined_noise_multiplier",
    "count_noise_multiplier",
    "dataset_size_event",
    "dpsgd_plan",
    "dpsgd_step_event",
    "poisson_batch_indices",
    "release_dataset_size",
    "steps_per_epoch",
]


# --------------------------------------------------------------------------
# Accounting: pure functions shared by the plan (calibration) and the fit.
# --------------------------------------------------------------------------


def combined_noise_multiplier(*noise_multipliers):
    """Noise multiplier of the adaptive composition of Gaussian mechanisms.

    Releasing ``k`` Gaussian mechanisms with multipliers ``z_i`` on the same
    data, each chosen adaptively, is exactly as private as one Gaussian
    mechanism with ``z = (sum_i z_i^-2)^(-1/2)`` (Dong, Roth & Su 2022,
    Cor. 3.3: Gaussian trade-off functions compose to ``G_mu`` with
    ``mu^2 = sum mu_i^2``).  Used when DPNorm and the gradient noise share one
    Poisson batch (see :func:`dpsgd_step_event`).
    """
    zs = [float(z) for z in noise_multipliers if z is not None]
    if not zs or any(not (math.isfinite(z) and z > 0) for z in zs):
        raise ValueError(f"noise multipliers must be positive finite numbers, got {noise_multipliers!r}.")
    return sum(z**-2 for z in zs) ** -0.5


def dpsgd_step_event(noise_multiplier, sampling_rate, clip_noise_multiplier=None, count=1):
    """Privacy event of ``count`` DP-SGD steps (Acs et al., Alg. 4).

    One step releases the noisy clipped gradient sum of a Poisson batch drawn
    at rate ``sampling_rate``: a Poisson-subsampled Gaussian mechanism with
    multiplier ``noise_multiplier`` under add/remove neighbours.

    With DPNorm (``clip_noise_multiplier`` given) the step also releases a
    noisy histogram of the same batch's gradient norms (Alg. 3).  Acs et al.
    bound the pair with their Theorem 3 (dependent coin tosses).  We use a
    tighter and simpler argument: on a fixed batch the pair is the adaptive
    composition of two Gaussian mechanisms (histogram: L2 sensitivity 1 under
    add/remove, noise ``clip_noise_multiplier``; gradient sum: sensitivity
    ``C_s``, noise ``noise_multiplier * C_s``), which is exactly a Gaussian
    mechanism with :func:`combined_noise_multiplier`; Poisson subsampling of a
    mechanism dominated by that Gaussian is dominated by the subsampled
    Gaussian (Zhu, Dong & Wang 2022, Thm. 11), so one subsampled-Gaussian
    event per step accounts for both releases.
    """
    z = noise_multiplier
    if clip_noise_multiplier is not None:
        z = combined_noise_multiplier(noise_multiplier, clip_noise_multiplier)
    return SubsampledGaussianEvent(
        count=int(count),
        neighbouring=ADD_REMOVE,
        noise_multiplier=float(z),
        sampling_rate=float(sampling_rate),
        sampling="poisson",
    )


def steps_per_epoch(n_samples, batch_size):
    """Steps of one epoch: ``round(1 / q)`` with ``q = batch_size / n_samples``.

    An epoch is the number of Poisson batches that visit every record once
    in expectation (Acs et al., Section III-B: ``|D| / L`` iterations).
    """
    return max(1, int(round(n_samples / batch_size)))


def calibrate_dpsgd_noise(epsilon, delta, sampling_rate, n_steps, clip_noise_ratio=None, extra_events=()):
    """Smallest gradient noise multiplier meeting ``(epsilon, delta)``.

    The plan is ``n_steps`` events of :func:`dpsgd_step_event`; with DPNorm the
    histogram's multiplier is ``clip_noise_ratio`` times the gradient's, so one
    scalar is bisected (:func:`skdp.privacy.calibrate_noise_multiplier`, RDP
    composition, add/remove neighbours).  ``extra_events`` are releases of the
    same fit whose noise is already fixed (the private dataset size of
    :func:`release_dataset_size`): they are composed with the steps, so the
    whole fit spends ``(epsilon, delta)``.
    """
    extra = list(extra_events)

    def make_events(z):
        clip_z = None if clip_noise_ratio is None else clip_noise_ratio * z
        return [*extra, dpsgd_step_event(z, sampling_rate, clip_z, count=n_steps)]

    return calibrate_noise_multiplier(make_events, epsilon, delta, composition="rdp", neighbouring=ADD_REMOVE)


# --------------------------------------------------------------------------
# The plan: sampling rate and steps from a public (declared or noisy) size.
# --------------------------------------------------------------------------

#: The count's noise over the noise of the rest of the fit (see
#: :func:`count_noise_multiplier`): its Gaussian DP ``mu`` is a tenth, so it
#: takes about 1% of ``mu^2``, which is what Gaussian mechanisms compose by.
COUNT_NOISE_FACTOR = 10.0


@dataclass(frozen=True)
class DPSGDPlan:
    """The public plan of a DP-SGD fit, a function of a public size only.

    Attributes
    ----------
    sampling_rate : float
        Poisson rate ``q = min(1, L / n)``.
    steps_per_epoch : int
        ``max(1, round(n / L))`` (:func:`steps_per_epoch`).
    n_steps : int
        ``max_epochs * steps_per_epoch``.
    expected_batch_size : float
        ``q * n``: the public divisor of the clipped sum (``L`` unless ``q``
        is capped at 1).
    """

    sampling_rate: float
    steps_per_epoch: int
    n_steps: int
    expected_batch_size: float


def dpsgd_plan(n_samples, batch_size, max_epochs):
    """Plan ``max_epochs`` epochs of Poisson batches of expected size ``batch_size``.

    Parameters
    ----------
    n_samples : float
        A *public* dataset size: declared by the user, or the noisy count of
        :func:`release_dataset_size` (post-processing).  Never ``len(X)``:
        under add/remove neighbours ``N`` and ``N + 1`` rows would give
        different deterministic plans, which an attacker reads off the model.
        Values below 1 (a noisy count can be) are taken as 1.
    batch_size : int
        Expected batch size ``L``, or -1 for full batches (``q = 1``).
    max_epochs : int

    Returns
    -------
    plan : DPSGDPlan
    """
    n = max(1.0, float(n_samples))
    if batch_size == -1:
        batch_size = n
    elif not (
        isinstance(batch_size, numbers.Integral) and not isinstance(batch_size, bool) and batch_size >= 1
    ):
        raise ValueError(f"batch_size must be a positive integer or -1, got {batch_size!r}.")
    q = min(1.0, batch_size / n)
    per_epoch = steps_per_epoch(n, batch_size)
    return DPSGDPlan(q, per_epoch, per_epoch * int(max_epochs), q * n)


def count_noise_multiplier(epsilon, delta, noise_multiplier=None):
    """Noise std of the private dataset size (sensitivity 1), by a fixed rule.

    ``COUNT_NOISE_FACTOR`` (10) times the gradient's ``noise_multiplier`` when
    it is given, else 10 times the Gaussian multiplier that would spend all of
    ``(epsilon, delta)`` on one release
    (:func:`skdp.privacy.gaussian_noise_multiplier`).  Either way the count's
    Gaussian DP is a tenth of the fit's scale, a small share of the budget, and
    its relative error (std over ``N``) only rescales the expected batch size,
    never the guarantee.
    """
    if noise_multiplier is not None:
        return COUNT_NOISE_FACTOR * float(noise_multiplier)
    return COUNT_NOISE_FACTOR * gaussian_noise_multiplier(epsilon, delta)


def dataset_size_event(noise_std):
    """Privacy event of :func:`release_dataset_size` (a Gaussian count, add/remove)."""
    return _count_mechanism(noise_std).event()


def _count_mechanism(noise_std):
    # Adding or removing a record changes the number of rows by exactly one.
    return GaussianMechanism(sensitivity=1.0, scale=float(noise_std), neighbouring=ADD_REMOVE)


def release_dataset_size(n_samples, noise_std, rng, ledger):
    """The number of training records plus ``N(0, noise_std^2)``, recorded on ``ledger``.

    Through :class:`skdp.privacy.GaussianMechanism` (sensitivity 1 under
    add/remove neighbours): the event is on the fit's ledger before the noisy
    count exists.  Everything planned from the returned float is
    post-processing.
    """
    return float(_count_mechanism(noise_std).release(float(n_samples), rng, ledger))


# --------------------------------------------------------------------------
# Torch-side Gaussian noise.
# --------------------------------------------------------------------------


def check_noise_setting():
    """Refuse DP-SGD under ``skdp.set_config(secure_noise=True)`` (issue 10).

    DP-SGD's noise is floating-point Gaussian noise drawn by torch, hundreds of
    thousands of coordinates per step; the exact grid samplers of
    :mod:`skdp.privacy.secure` are scalar Python code, far too slow for that.
    Rather than silently ignore the setting, DP-SGD refuses to run under it.
    """
    if get_config()["secure_noise"]:
        raise ValueError(
            "secure_noise=True (skdp.set_config / config_context, or the estimator's secure_noise) "
            "is on, but DP-SGD adds floating-point Gaussian noise drawn by torch, not noise sampled "
            "exactly on a grid, so it refuses to run. To accept floating-point noise for this fit, "
            "pass secure_noise=False to the estimator or wrap it in "
            "skdp.config_context(secure_noise=False)."
        )


class GaussianNoise:
    """Gaussian noise of std ``noise_multiplier * sensitivity``, drawn in torch.

    The torch twin of :class:`skdp.privacy.GaussianMechanism` for tensors that
    live on an accelerator.  It does not record an event itself: a DP-SGD step
    releases the gradient sum and (with DPNorm) a histogram of one Poisson
    batch, which the engine records as a single subsampled event
    (:func:`dpsgd_step_event`).

    Parameters
    ----------
    sensitivity : float
        L2 sensitivity of the released tensor.
    noise_multiplier : float
        Noise std over sensitivity.
    """

    def __init__(self, sensitivity, noise_multiplier):
        for name, v in (("sensitivity", sensitivity), ("noise_multiplier", noise_multiplier)):
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive finite number, got {v!r}.")
        self.sensitivity = float(sensitivity)
        self.noise_multiplier = float(noise_multiplier)

    @property
    def scale(self):
        """Standard deviation of the noise."""
        return self.noise_multiplier * self.sensitivity

    def add_to(self, tensor, generator=None):
        """``tensor`` plus i.i.d. ``N(0, scale^2)`` noise of its shape, dtype and device."""
        noise = torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype, device=tensor.device)
        return tensor + self.scale * noise


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

    def threshold(self, norms, generator=None):
        """The fixed bound (``norms`` are not looked at)."""
        return self.max_grad_norm


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
        """Clipped gradient sum of ``batch`` (see :class:`ClippedSum`)."""
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
        # min(1, C / norm), exact for every non-zero norm (a zero gradient needs no scaling).
        factors = (threshold / norms.clamp(min=torch.finfo(norms.dtype).tiny)).clamp(max=1.0)
        grads = {k[4:]: torch.tensordot(factors, g, dims=1) for k, g in per_grads.items()}
        return ClippedSum(
            grads, norms.detach(), threshold, losses, None if isinstance(aux, tuple) and not aux else aux
        )


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
    from ._ghost import GhostClipping, find_unsupported_layer, warn_fallback

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
    """One DP-SGD step (Acs et al. 2018, Alg. 4) on any torch module.

    :meth:`step` computes the clipped per-example gradient sum of a Poisson
    batch, adds ``N(0, sigma^2 C^2)``, divides by the expected batch size and
    writes the result into ``param.grad`` of every trainable parameter; the
    caller then runs its optimiser.  Each step records one event
    (:func:`dpsgd_step_event`) on the fit's ledger, and the engine refuses to
    take more than ``max_steps`` steps, so training can never spend more than
    its plan.

    Parameters
    ----------
    module : torch.nn.Module
        The model; checked with :func:`check_per_example_support`.
    loss_fn : callable
        ``loss_fn(module, *example_batch)`` returns the loss of a batch of one
        example, or ``(loss, aux)`` where ``aux`` (e.g. the prediction) is
        returned batched in :class:`StepResult`.
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
        Source of the noise (seed it for reproducible experiments).  The noise
        is floating-point: under ``skdp.set_config(secure_noise=True)`` the
        engine refuses to step (:func:`check_noise_setting`).
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
        layer is supported, else :class:`VmapPerExampleGradients` with a
        :class:`~skdp.nn.GhostClippingFallbackWarning` naming the layer
        (once, here).  ``"vmap"``: always per-example gradients.  None:
        ``"ghost"`` if ``batch_loss_fn`` is given, else ``"vmap"``.  Both
        give the same clipped sum up to rounding, hence the same privacy.

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
    ):
        check_per_example_support(module)
        check_noise_setting()
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
        check_noise_setting()
        if self.steps_taken >= self.max_steps:
            raise RuntimeError(
                f"The privacy plan allows {self.max_steps} DP-SGD steps; refusing to take another one "
                "(it would exceed the budget)."
            )
        result = self.per_example.clipped_sum(
            self.module, self.loss_fn, batch, lambda norms: self.clipping.threshold(norms, self.generator)
        )
        noise = GaussianNoise(sensitivity=result.threshold, noise_multiplier=self.noise_multiplier)
        # Record before the noisy gradient exists, so no release escapes the ledger.
        ledger.record(self.event())
        self.steps_taken += 1
        for name, param in self.module.named_parameters():
            if not param.requires_grad:
                continue
            param.grad = noise.add_to(result.grads[name], self.generator) / self.expected_batch_size
        return StepResult(_batch_len(batch), result.threshold, result.losses, result.aux)


# --------------------------------------------------------------------------
# Poisson sampling.
# --------------------------------------------------------------------------


def poisson_batch_indices(n_samples, sampling_rate, rng):
    """Indices of a Poisson batch: each record kept independently with prob. ``q`` (Alg. 4, line 1)."""
    return np.flatnonzero(rng.random(n_samples) < sampling_rate)


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

    def __len__(self):
        return self.n_steps

    def __iter__(self):
        n = len(self.dataset)
        for _ in range(self.n_steps):
            yield self._fetch(poisson_batch_indices(n, self.sampling_rate, self.rng))

    def _fetch(self, idx):
        from skorch.dataset import Dataset as SkorchDataset

        if isinstance(self.dataset, SkorchDataset):
            Xi, yi = self.dataset[idx]
            return _to_tensors(Xi), _to_tensors(yi)
        if len(idx):
            return default_collate([self.dataset[int(i)] for i in idx])
        # Collate one example only to learn the batch structure, then keep none of it.
        return _tree_map(lambda t: t[:0], default_collate([self.dataset[0]]))


def _to_tensors(obj):
    if isinstance(obj, np.ndarray):
        return torch.as_tensor(obj)
    if isinstance(obj, dict):
        return {k: _to_tensors(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_tensors(v) for v in obj)
    return obj
