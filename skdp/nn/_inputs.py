"""The DP nets' private input map (``scale_inputs``): a box per column, or one scale for all.

A pure function of the plan (:func:`._plan.input_bounds_plan`), the public
size and the data, used by the nets' ``_prepare_inputs``: it releases what
the plan says, on the ledger, and returns the affine map the module sees,
``clip((x - centre) / scale, -clip, clip)`` (``docs/nn.md``, "Inputs at a
fixed scale, column by column, privately").
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
from scipy.stats import norm

from ..privacy.centring import AutoBounds, private_centring
from ..privacy.quantiles import announced_histogram_box
from ._defaults import INPUT_CLIP, INPUT_RMS, INPUT_SCALE_QUANTILE, input_box_level


class InputMap(NamedTuple):
    """The released input map: ``clip((x - centre) / scale, -clip, clip)`` (``clip`` None: no clip)."""

    centre: np.ndarray
    scale: np.ndarray
    clip: float | None


def release_input_map(plan, X, n_public, rng, ledger, epsilon):
    """Release the input map of ``plan`` on ``X`` (its events on ``ledger``).

    * :class:`~skdp.privacy.centring.AutoBounds`: one scale for all
      columns, a centre ``c`` and the median ``R`` of ``||x - c||``
      (:func:`~skdp.privacy.centring.private_centring` at
      ``INPUT_SCALE_QUANTILE``), the module seeing ``INPUT_RMS sqrt(d) (x -
      c) / R``;
    * :class:`~skdp.privacy.quantiles.HistogramBounds`: a box per column at
      its ``q`` and ``1 - q`` quantiles (:func:`._defaults.input_box_level`),
      mapped to ``+-Phi^-1(1 - q) INPUT_RMS`` and clipped to ``+-INPUT_CLIP``
      (a column's box can be far narrower than its rare values: a column of
      mostly zeros whose box is the zero bin).
    """
    n_features = X.shape[1]
    # Converted once: every release reads the same float64 rows.
    rows = np.asarray(X, dtype=np.float64)

    def reduce(fn, *args):
        return fn(rows, *args)

    if isinstance(plan, AutoBounds):
        with warnings.catch_warnings():
            # The core's message names data_norm; the plan's warning names the nets' parameter.
            warnings.filterwarnings("ignore", message='data_norm="auto"', category=UserWarning)
            centre, bound = private_centring(
                reduce, n_public, n_features, plan, rng, ledger, scale_quantile=INPUT_SCALE_QUANTILE
            )
        scale = np.full(n_features, float(bound) / (INPUT_RMS * math.sqrt(n_features)))
        return InputMap(np.asarray(centre, dtype=np.float64), scale, None)
    n_rows = max(int(round(n_public)), 1)
    mechanism = plan.mechanism(n_features)
    level = input_box_level(n_rows, float(mechanism.std))
    # One private box per column (the scalers' noisy histograms): a column's centre and
    # scale from its own range, whatever the other columns' scales and offsets.
    low, high, _, _ = announced_histogram_box(
        reduce,
        n_rows,
        n_features,
        mechanism,
        (level, 1.0 - level),
        rng,
        ledger,
        epsilon=float(epsilon),
        advice="Standardise X with public constants (and set scale_inputs=False), or raise epsilon.",
        extend=True,
    )
    scale = (high - low) / 2.0 / (float(norm.isf(level)) * INPUT_RMS)
    return InputMap((low + high) / 2.0, scale, INPUT_CLIP)
