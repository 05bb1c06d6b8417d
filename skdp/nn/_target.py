"""The trained default regressor's target map: the scale its net trains at, and the fold back.

:class:`~skdp.nn.DPNeuralNetRegressor`'s default net releases a private
centre ``c`` (median) and spread ``s`` (``1.4826`` times the median
absolute deviation: a normal target's standard deviation) of every target
column (:mod:`skdp.nn._constant`), trains on ``z = (y - c) K / s`` and then
folds the map into the output layer (``W <- W s / K``, ``b <- b s / K +
c``), so ``predict`` returns the target's units with nothing else held.

**Why a scale, and why ``K``.**  The gradients are clipped to a fixed
``C`` and noised with ``sigma C``: the output's noise is a random walk of
about ``lr sigma C sqrt(T) / B`` over the ``T`` steps of batch ``B``,
whatever the target's units.  Until 2026-11-28 the net trained on the raw
target, so its score depended on the target's units: the same table with
the target standardised and multiplied by 0.3, 1, 3, 10, 100, 1000 scored
R^2 -29, -1.6, .68, .93, .98, .86 (regression-1000x5 at eps 1), and an
unseen Friedman set whose target has standard deviation 0.33 scored -7 at
eps 1 (``benchmarks/zoo.py --unseen 2029``).  A target spread of ``K``
times that noise lets the steps resolve it (at most ``lr C`` of movement
per step and unit activation bounds how far the output can travel, so a
larger ``K`` is not better either: the best multipliers measured were 5 to
100 times the noise, 20 near their middle; ``docs/nn.md``).  ``K`` is a
function of the plan's public quantities only, at least 1.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["MAD_TO_SD", "SPREAD_TO_NOISE", "fold_output", "training_scale"]

#: A normal target's standard deviation over its median absolute deviation.
MAD_TO_SD = 1.4826
#: The trained target's spread over the output noise's random walk (module docstring).
SPREAD_TO_NOISE = 20.0


def training_scale(lr, noise_multiplier, clip_norm, n_steps, batch_size):
    """``K = max(1, SPREAD_TO_NOISE lr sigma C sqrt(T) / B)``: the trained target's spread (public only)."""
    walk = float(lr) * float(noise_multiplier) * float(clip_norm) * math.sqrt(max(int(n_steps), 1))
    return max(1.0, SPREAD_TO_NOISE * walk / max(float(batch_size), 1.0))


def fold_output(layer, centre, factor):
    """Fold ``y = c + factor z`` into the output ``Linear`` layer (post-processing of the trained weights)."""
    with torch.no_grad():
        factor_t = torch.as_tensor(np.asarray(factor), dtype=layer.weight.dtype, device=layer.weight.device)
        centre_t = torch.as_tensor(np.asarray(centre), dtype=layer.bias.dtype, device=layer.bias.device)
        layer.weight.mul_(factor_t.reshape(-1, 1))
        layer.bias.mul_(factor_t).add_(centre_t)
