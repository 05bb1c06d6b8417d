"""DPNorm: a private per-batch clipping bound (Acs et al. 2018, Alg. 3, Section III-C).

The range ``(0, C_max]`` is cut into ``w`` equal bins with upper edges
``C_j = j C_max / w``; the batch's per-example gradient norms are counted per
bin, Gaussian noise is added to every count, and the upper edge of the bin
with the largest noisy count is the clipping bound ``C_s`` of that batch
(Alg. 3, line 2: the noisy mode, which is near the norms of many records).

Sensitivity
    Each record falls in exactly one bin, so under add/remove neighbours one
    record changes one count by one: L2 sensitivity 1 (Acs et al. state
    ``sqrt(2)`` for replace-one, noise ``N(0, sqrt(2) sigma_C)``; here the noise
    std is ``sigma_C * 1``).  The argmax is post-processing.  The histogram and
    the gradient sum of the same Poisson batch are accounted together by
    :func:`skdp.nn.dpsgd_step_event`.

Deviation
    Norms above ``C_max`` are counted in the last bin instead of being dropped
    (Alg. 3 counts only ``C_{j-1} < ||g|| <= C_j``): when most gradients exceed
    ``C_max`` the bound then goes to ``C_max`` rather than to a noise-driven
    bin.  The sensitivity is unchanged (still one bin per record).
"""

from __future__ import annotations

import math

import torch

from ._engine import GaussianNoise

__all__ = ["DPNormClipping", "norm_histogram"]


def norm_histogram(norms, max_norm, n_bins):
    """Counts of ``norms`` in the bins ``(C_{j-1}, C_j]``, ``C_j = j max_norm / n_bins``.

    Norms above ``max_norm`` go to the last bin; exact zeros to the first.
    """
    idx = torch.ceil(norms / (max_norm / n_bins)).long() - 1
    idx = idx.clamp(min=0, max=n_bins - 1)
    counts = torch.zeros(n_bins, dtype=norms.dtype if norms.is_floating_point() else torch.float32)
    counts = counts.to(norms.device)
    return counts.index_add_(0, idx, torch.ones_like(idx, dtype=counts.dtype))


class DPNormClipping:
    """Clipping bound chosen per batch by DPNorm (Acs et al., Alg. 3).

    Parameters
    ----------
    max_norm : float
        ``C_max``, the upper end of the grid of candidate bounds.
    n_bins : int
        ``w``, the number of candidate bounds.
    noise_multiplier : float
        ``sigma_C``: std of the noise on each count (sensitivity 1).
    """

    def __init__(self, max_norm, n_bins, noise_multiplier):
        if not (math.isfinite(max_norm) and max_norm > 0):
            raise ValueError(f"max_norm must be a positive finite number, got {max_norm!r}.")
        if int(n_bins) != n_bins or n_bins < 1:
            raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}.")
        self.max_norm = float(max_norm)
        self.n_bins = int(n_bins)
        self._noise = GaussianNoise(sensitivity=1.0, noise_multiplier=noise_multiplier)

    @property
    def clip_noise_multiplier(self):
        """``sigma_C``, for the step's privacy event."""
        return self._noise.noise_multiplier

    def noisy_histogram(self, norms, generator=None):
        """The released noisy counts (Alg. 3, line 2, before the argmax)."""
        return self._noise.add_to(norm_histogram(norms, self.max_norm, self.n_bins), generator)

    def threshold(self, norms, generator=None):
        """Upper edge of the bin with the largest noisy count."""
        j = int(torch.argmax(self.noisy_histogram(norms, generator)).item())
        return (j + 1) * self.max_norm / self.n_bins
