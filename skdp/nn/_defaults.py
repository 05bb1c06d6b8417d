"""The DP nets' ``"auto"`` training schedule: batch size, epochs, learning rate and width.

A function of public quantities only: the declared or noisy dataset size
``n`` (under add/remove neighbours ``len(X)`` is private), the number of
features ``d`` and outputs ``k`` (the data's shape), and the target
``epsilon``.  Nothing here reads a value of the data: each constant is
argued below and in :doc:`/nn`, which also names the few alternatives
compared on the zoo's data sets before these were kept.

**Why the schedule barely matters, and the width does.**  Linearise DP-SGD
around its path: ``T`` steps of the mean clipped gradient (norm at most
``C``) plus Gaussian noise of std ``sigma C / B`` per coordinate.  At a fixed
number of steps the calibrated ``sigma`` grows like ``q sqrt(T)`` (Poisson
amplification, ``q = B / n``), so the noise of the mean gradient,
``sigma / B ~ sqrt(T log(1/delta)) / (n epsilon)``, does not depend on the
batch size; the signal accumulated over ``T`` steps grows like ``T`` and the
noise (a random walk in ``P`` coordinates) like ``sqrt(T) sqrt(T P) / (n
epsilon)``, so their ratio is about ``n epsilon / sqrt(P log(1/delta))``:
neither ``T`` nor ``B`` moves it, the number of parameters ``P`` does.  The
schedule is therefore chosen for the optimiser and the wall clock, and the
width for the noise:

* ``TARGET_STEPS = 400`` steps at small ``n epsilon``, enough for SGD at
  the learning rate below to converge on a small MLP with inputs at the
  scale below, few enough that the fit and its PLD calibration stay in
  seconds; more steps where the budget has room for them (next item);
* **steps grow with the budget**: ``T = TARGET_STEPS * g``, ``g = rho /
  STEPS_SNR`` within ``[1, MAX_STEP_GAIN] = [1, 4]``, for ``rho = n epsilon
  / sqrt(2 log(1/delta))``.  The ratio over the whole run does not depend
  on ``T`` (above), but the noise of *one* step relative to its signal is
  ``sqrt(T P log(1/delta)) / (n epsilon)``, which grows like ``sqrt(T)``: a
  noisy step through a non-convex loss (dead or saturated units) costs
  more than the linearisation says, so the steps are not raised
  everywhere.  With ``T`` proportional to ``rho`` the per-step ratio falls
  like ``1 / sqrt(rho)`` as ``n epsilon`` grows: more budget never gets
  fewer steps nor noisier ones.  ``STEPS_SNR = TARGET_SNR * MAX_WIDTH =
  512``: the ``rho`` at which the widest default net (``h = 64``) on ``d + k
  = 64`` inputs and outputs meets the width rule's signal-to-noise target;
  below it the budget buys width, above it steps too.  ``MAX_STEP_GAIN``
  bounds the wall clock (1,600 steps).  A function of ``n``, ``epsilon``
  and ``delta`` only, never of ``d``: with a declared ``n_samples`` the
  steps are planned, and their noise calibrated, before the data's shape
  is read;
* ``B = n / STEPS_PER_EPOCH`` (``STEPS_PER_EPOCH = 25``) within
  ``[MIN_BATCH, MAX_BATCH] = [32, 1024]``: a sampling rate of about 4 %,
  in the amplified regime, and batches large enough that the noise of one
  step is averaged over many records;
* ``epochs = ceil(T B / n)``, at most ``MAX_EPOCHS = 100``;
* **inputs at a fixed scale, lr from that scale**.  The nets' private
  input scaling (``scale_inputs``) maps every column from its released box
  (its ``q`` and ``1 - q`` quantiles from the scalers' noisy histograms,
  :func:`input_box_level`) to ``+-Phi^-1(1 - q) INPUT_RMS``: a normal
  column reaches the module at about ``INPUT_RMS = 0.5`` rms whatever its
  own scale and offset and whatever the budget, where the noise lets a
  column be located; elsewhere one scale for all columns, a released median
  of ``||x - c||`` mapped to ``INPUT_RMS sqrt(d)`` (the only map until
  2026-11-28, which leaves columns far smaller than the others at about 0).  The
  first layer's step in function space is about ``lr * INPUT_RMS^2`` per
  unit of (clipped, norm at most ``C = 1``) gradient, so the rate is
  derived from the scale: ``lr = FUNCTION_STEP / INPUT_RMS^2`` with
  ``FUNCTION_STEP = 1/8``, the step with which plain SGD neither diverges
  nor stalls on softmax and squared losses: ``lr = 0.5`` with inputs at
  0.5 to 0.75 per coordinate is the regime in which the previous rule (a
  clip-bound quantile for the scale) trained on small data.  ``lr = 0.5``;
* the hidden width ``h`` keeps the signal-to-noise ratio above
  ``TARGET_SNR = 8``: ``P ~ h (d + k)`` parameters, so
  ``h = (n epsilon / (8 sqrt(2 log(1/delta))))^2 / (d + k)``, rounded down
  to a power of two within ``[MIN_WIDTH, MAX_WIDTH] = [8, 64]``.  Small ``n epsilon``
  gets a narrow, nearly linear net; more budget buys width (a larger
  ``epsilon`` never gets a narrower net);
* **no net where even the narrowest one is mostly noise** (the regressor):
  at ``h = MIN_WIDTH`` the run's ratio is ``rho / sqrt(MIN_WIDTH (d + k))``;
  below ``MIN_TRAIN_SNR = 6`` (at or above the ratio where a trained
  net's R^2 crossed a constant's on 7 of the 9 shapes measured in
  :doc:`/nn`; the other two, a weak signal, cross near 8) the default regressor
  releases a private median of the target instead and predicts it for
  every row (:mod:`skdp.nn._constant`): a noisy net's error adds the
  variance of its output noise to the target's, and a constant's does not.
  A function of ``n``, ``d``, ``k``, ``epsilon`` and ``delta`` only
  (:func:`trains_default_net`); the level is argued in :doc:`/nn`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..privacy.quantiles import BOX_LEVELS, histogram_box_level

__all__ = ["TrainingSchedule", "auto_schedule", "min_training_rho", "trains_default_net"]

TARGET_STEPS = 400
STEPS_PER_EPOCH = 25
MIN_BATCH, MAX_BATCH = 32, 1024
MAX_EPOCHS = 100
TARGET_SNR = 8.0
MIN_WIDTH, MAX_WIDTH = 8, 64
#: ``rho = n epsilon / sqrt(2 log(1/delta))`` above which the steps grow (module docstring).
STEPS_SNR = TARGET_SNR * MAX_WIDTH
#: Largest factor on ``TARGET_STEPS`` (the wall clock).
MAX_STEP_GAIN = 4.0
#: Rms per coordinate of a typical scaled row: each column's released box ``[a_j, b_j]`` (its ``q`` and
#: ``1 - q`` quantiles, :func:`input_box_level`) is mapped to ``+-Phi^-1(1 - q) INPUT_RMS``, so a normal
#: column reaches the module at about ``INPUT_RMS`` rms.
INPUT_RMS = 0.5
#: Quantile of ``||x - c||`` of the one-scale input map (where no column can be located).
INPUT_SCALE_QUANTILE = 0.5
#: Bound on a scaled input with the per-column boxes: eight times ``INPUT_RMS``.
INPUT_CLIP = 8 * INPUT_RMS
#: Range of the input box's quantile level (:func:`input_box_level`).
MIN_BOX_LEVEL, MAX_BOX_LEVEL = BOX_LEVELS
#: ``lr * INPUT_RMS**2``: the first layer's step in function space per unit of clipped gradient.
FUNCTION_STEP = 0.125
LEARNING_RATE = FUNCTION_STEP / INPUT_RMS**2
#: Width when no epsilon drives the plan (``noise_multiplier`` given).
DEFAULT_WIDTH = 32
#: Ratio ``rho / sqrt(MIN_WIDTH (d + k))`` below which the default regressor predicts a private constant.
MIN_TRAIN_SNR = 6.0


@dataclass(frozen=True)
class TrainingSchedule:
    """The resolved ``batch_size``, ``max_epochs``, ``lr`` and hidden width of a fit."""

    batch_size: int
    max_epochs: int
    lr: float
    hidden_units: int


def auto_batch_size(n_samples):
    """``n / STEPS_PER_EPOCH`` within ``[MIN_BATCH, MAX_BATCH]``, at most ``n``: public ``n`` only."""
    n = max(1.0, float(n_samples))
    return int(max(1, min(max(round(n / STEPS_PER_EPOCH), MIN_BATCH), MAX_BATCH, math.ceil(n))))


def budget_rho(n_samples, epsilon, delta):
    """``rho = n epsilon / sqrt(2 log(1/delta))``: the budget that both the width and the steps rules read."""
    return max(1.0, float(n_samples)) * float(epsilon) / math.sqrt(2.0 * math.log(1.0 / float(delta)))


def auto_steps(n_samples, epsilon, delta):
    """``TARGET_STEPS`` times ``rho / STEPS_SNR`` within ``[1, MAX_STEP_GAIN]`` (module docstring).

    ``rho = n epsilon / sqrt(2 log(1/delta))``: public ``n``, ``epsilon`` and
    ``delta`` only; ``TARGET_STEPS`` without epsilon (``noise_multiplier`` given).
    """
    if epsilon is None:
        return float(TARGET_STEPS)
    return TARGET_STEPS * min(max(budget_rho(n_samples, epsilon, delta) / STEPS_SNR, 1.0), MAX_STEP_GAIN)


def auto_epochs(n_samples, batch_size, epsilon=None, delta=1e-5):
    """``ceil(T B / n)`` within ``[1, MAX_EPOCHS]``, ``T`` from :func:`auto_steps`."""
    n = max(1.0, float(n_samples))
    steps = auto_steps(n_samples, epsilon, delta)
    return int(min(max(math.ceil(steps * batch_size / n), 1), MAX_EPOCHS))


def auto_width(n_samples, n_features, n_outputs, epsilon, delta):
    """Hidden width from the signal-to-noise rule (module docstring); ``DEFAULT_WIDTH`` without epsilon."""
    if epsilon is None:
        return DEFAULT_WIDTH
    raw = (budget_rho(n_samples, epsilon, delta) / TARGET_SNR) ** 2 / max(1, n_features + n_outputs)
    width = 2 ** math.floor(math.log2(max(raw, 1.0)))
    return int(min(max(width, MIN_WIDTH), MAX_WIDTH))


def min_training_rho(n_features, n_outputs):
    """The ``rho`` at which the narrowest default net's run reaches ``MIN_TRAIN_SNR``: ``6 sqrt(8 (d + k))``."""
    return MIN_TRAIN_SNR * math.sqrt(MIN_WIDTH * max(1, n_features + n_outputs))


def trains_default_net(n_samples, n_features, n_outputs, epsilon, delta):
    """Whether ``rho = n epsilon / sqrt(2 log(1/delta))`` reaches :func:`min_training_rho` (module docstring).

    Public ``n`` (declared or the noisy count), the data's shape, ``epsilon``
    and ``delta`` only.  False: the default regressor predicts a private
    constant instead of training a net that would be mostly noise.
    """
    return budget_rho(n_samples, epsilon, delta) >= min_training_rho(n_features, n_outputs)


def auto_schedule(
    n_samples,
    n_features,
    n_outputs,
    epsilon,
    delta,
    *,
    batch_size="auto",
    max_epochs="auto",
    lr="auto",
    hidden_units="auto",
):
    """The :class:`TrainingSchedule` with every ``"auto"`` entry resolved (module docstring).

    Parameters
    ----------
    n_samples : float
        Public size: declared ``n_samples``, or the noisy count.
    n_features, n_outputs : int or None
        The data's public shape (None when unknown: the width is then
        ``DEFAULT_WIDTH``).
    epsilon : float or None
        The fit's target epsilon (None when ``noise_multiplier`` is given).
    delta : float
    batch_size, max_epochs, lr, hidden_units : "auto" or value
        A value given by the user is kept.
    """
    b = auto_batch_size(n_samples) if _auto(batch_size) else batch_size
    e = (
        auto_epochs(n_samples, b if b != -1 else n_samples, epsilon, delta)
        if _auto(max_epochs)
        else max_epochs
    )
    rate = LEARNING_RATE if _auto(lr) else lr
    if _auto(hidden_units):
        h = (
            DEFAULT_WIDTH
            if n_features is None
            else auto_width(n_samples, n_features, n_outputs, epsilon, delta)
        )
    else:
        h = hidden_units
    return TrainingSchedule(b, e, rate, h)


def _auto(value):
    return isinstance(value, str) and value == "auto"


def input_box_level(n_samples, count_std):
    """Quantile level ``q`` of the input box of ``scale_inputs``: ``8 s / n`` within ``[0.05, 0.1]`` (public).

    The core's rule (:func:`~skdp.privacy.quantiles.histogram_box_level`,
    with its reasons), shared with DP-SEP's feature box.  The map is
    matched to the level (``+-Phi^-1(1 - q) INPUT_RMS``), so a normal
    column reaches the module at about ``INPUT_RMS`` rms at every level.
    """
    return histogram_box_level(n_samples, count_std)
