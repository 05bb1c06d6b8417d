"""DPNorm: a private per-batch clipping bound (Acs et al. 2018, Alg. 3, Section III-C).

The range ``(0, C_max]`` is cut into ``w`` equal bins with upper edges
``C_j = j C_max / w``; the batch's per-example gradient norms are counted per
bin, Gaussian noise is added to every count, and the upper edge of the bin
with the largest noisy count is the clipping bound ``C_s`` of that batch
(Alg. 3, line 2: the noisy mode, which is near the norms of many records).

The binning is the one DPNorm of skdp (:func:`skdp.privacy.norm_selection.norm_histogram`,
also used by the kernel k-means); here the counts are released with torch
noise on the batch's device (:class:`~skdp.privacy.mechanisms.torch_noise.TorchGaussianMechanism`),
recorded on the DP-SGD step's ledger.

Sensitivity
    Each record falls in exactly one bin, so under add/remove neighbours one
    record changes one count by one: L2 sensitivity 1 (Acs et al. state
    ``sqrt(2)`` for replace-one, noise ``N(0, sqrt(2) sigma_C)``; here the noise
    std is ``sigma_C * 1``).  The argmax is post-processing.  The histogram and
    the gradient sum of the same Poisson batch are accounted together by
    :func:`skdp.privacy.dpsgd.dpsgd_step_event`.

Deviation
    Norms above ``C_max`` are counted in the last bin instead of being dropped
    (see :mod:`skdp.privacy.norm_selection`).
"""

from __future__ import annotations

import math

import torch

from ..privacy.events import ADD_REMOVE
from ..privacy.mechanisms.selection import histogram_sensitivity
from ..privacy.mechanisms.torch_noise import TorchGaussianMechanism
from ..privacy.norm_selection import bin_upper_edge, norm_histogram

__all__ = ["DPNormClipping"]


class DPNormClipping:
    """Clipping bound chosen per batch by DPNorm (Acs et al. 2018, Algorithm 3).

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
        # One record moves one count by one under add/remove neighbours.
        self._noise = TorchGaussianMechanism(
            sensitivity=histogram_sensitivity(2, ADD_REMOVE), noise_multiplier=noise_multiplier
        )

    @property
    def clip_noise_multiplier(self):
        """``sigma_C``, for the step's privacy event."""
        return self._noise.noise_multiplier

    def noisy_histogram(self, norms, ledger, generator=None):
        """The released noisy counts (Alg. 3, line 2, before the argmax); one event on ``ledger``."""
        counts = norm_histogram(norms.detach().cpu().double().numpy(), self.max_norm, self.n_bins)
        dtype = norms.dtype if norms.is_floating_point() else torch.float32
        exact = torch.as_tensor(counts, dtype=dtype, device=norms.device)
        return self._noise.release(exact, generator, ledger)

    def threshold(self, norms, ledger, generator=None):
        """Upper edge of the bin with the largest noisy count."""
        j = int(torch.argmax(self.noisy_histogram(norms, ledger, generator)).item())
        return bin_upper_edge(j, self.max_norm, self.n_bins)
