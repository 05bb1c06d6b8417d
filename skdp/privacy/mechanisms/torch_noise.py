"""Gaussian noise on torch tensors: the torch twin of :class:`~skdp.privacy.GaussianMechanism`.

DP-SGD releases tensors that live on an accelerator (the clipped gradient sum,
DPNorm's norm histogram); drawing their noise with NumPy would copy them to the
host every step.  :class:`TorchGaussianMechanism` draws it with torch, and like
every mechanism of the core its only way to add noise is :meth:`release`,
which records the mechanism's event on the ledger it is given before the noisy
value exists.  Within a DP-SGD step that ledger is the step's
:class:`~skdp.privacy.dpsgd.DPSGDStepLedger`, which checks the step's parts
against its planned subsampled event.

torch is imported when noise is drawn, never by ``import skdp.privacy``.
The noise is floating point: the mechanism has no exact sampler
(``exact_sampler = False``) and refuses a ledger opened with
``secure_noise=True`` (:func:`~skdp.privacy.dpsgd.check_noise_setting`).
"""

from __future__ import annotations

import math

from ..dpsgd import check_noise_setting
from ..events import ADD_REMOVE, GaussianEvent, _check_relation

__all__ = ["TorchGaussianMechanism"]


class TorchGaussianMechanism:
    """Gaussian noise of std ``noise_multiplier * sensitivity``, drawn by torch.

    Parameters
    ----------
    sensitivity : float
        L2 sensitivity of the whole released tensor (or of all the tensors of
        one :meth:`release` together).
    noise_multiplier : float
        Noise std over sensitivity.
    neighbouring : {"add_remove", "replace_one"}, default="add_remove"
        The relation ``sensitivity`` was derived under (DP-SGD's is
        add/remove, the one Poisson sampling amplifies).
    """

    #: DP-SGD's noise is drawn by torch in floating point; no exact sampler.
    exact_sampler = False

    @classmethod
    def refuse_secure_noise(cls):
        """Raise the ValueError of a ``secure_noise=True`` request (no exact sampler)."""
        check_noise_setting(True)

    def __init__(self, sensitivity, noise_multiplier, neighbouring=ADD_REMOVE):
        for name, v in (("sensitivity", sensitivity), ("noise_multiplier", noise_multiplier)):
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive finite number, got {v!r}.")
        _check_relation(neighbouring)
        self.sensitivity = float(sensitivity)
        self.noise_multiplier = float(noise_multiplier)
        self.neighbouring = neighbouring

    @property
    def scale(self):
        """Standard deviation of the noise."""
        return self.noise_multiplier * self.sensitivity

    def event(self, count=1):
        """Privacy event of ``count`` releases."""
        return GaussianEvent(
            count=count, neighbouring=self.neighbouring, noise_multiplier=self.noise_multiplier
        )

    def release(self, value, generator, ledger):
        """``value`` plus i.i.d. ``N(0, scale^2)`` noise, one event recorded on ``ledger`` first.

        Parameters
        ----------
        value : tensor, or dict or list of tensors
            One release: ``sensitivity`` bounds the change of all of it
            together (the gradients of every parameter are one vector).
            Noise of each tensor's shape, dtype and device is drawn in the
            order of the tensors.
        generator : torch.Generator or None
            The noise's generator (None: torch's global one); second, as the
            ``rng`` of the NumPy mechanisms' ``release(value, rng, ledger)``.
        ledger : PrivacyLedger or DPSGDStepLedger

        Returns
        -------
        The noisy value, of the same structure.
        """
        check_noise_setting(getattr(ledger, "secure_noise", False))
        ledger.record(self.event())
        if isinstance(value, dict):
            return {k: self._perturb(v, generator) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self._perturb(v, generator) for v in value)
        return self._perturb(value, generator)

    def _perturb(self, tensor, generator):
        import torch

        noise = torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype, device=tensor.device)
        # tensor + scale * noise, in the noise's buffer (the same sum: IEEE addition commutes).
        return noise.mul_(self.scale).add_(tensor)

    def __repr__(self):
        return (
            f"{type(self).__name__}(sensitivity={self.sensitivity:g}, "
            f"noise_multiplier={self.noise_multiplier:g}, neighbouring={self.neighbouring!r})"
        )
