"""Differentially private neural networks (DP-SGD) for scikit-learn, built on skorch.

Importing this subpackage imports torch and skorch; ``import skdp`` does not.

* :class:`DPNeuralNetClassifier`, :class:`DPNeuralNetRegressor`: skorch nets
  trained by DP-SGD (Acs et al. 2018, Alg. 3-4; Abadi et al. 2016).
* :class:`DPSGDEngine`: the private step itself, reusable for any torch model
  and loss (generative models included), with a swappable per-example
  gradient strategy: :class:`GhostClipping` (per-example norms from
  activations and output gradients, no per-example gradients; the default
  of the nets) or :class:`VmapPerExampleGradients`.
* :func:`dpsgd_plan`, :func:`release_dataset_size`: the plan (sampling rate,
  steps) from a public dataset size, declared or privately estimated.

The DP-SGD accounting (plan, step events, calibration, the private dataset
size), DPNorm's binning and the torch noise mechanism (:class:`GaussianNoise`,
which records its event on the ledger it is given) live in the privacy core
(:mod:`skdp.privacy.dpsgd`, :mod:`skdp.privacy.norm_selection`,
:mod:`skdp.privacy.mechanisms.torch_noise`); they are re-exported here under the names
users import.
"""

from ..privacy.dpsgd import (
    COUNT_NOISE_FACTOR,
    DPSGDPlan,
    calibrate_dpsgd_noise,
    combined_noise_multiplier,
    count_noise_multiplier,
    dataset_size_event,
    dpsgd_plan,
    dpsgd_step_event,
    poisson_batch_indices,
    release_dataset_size,
    steps_per_epoch,
)
from ..privacy.mechanisms.torch_noise import TorchGaussianMechanism as GaussianNoise
from ..privacy.norm_selection import norm_histogram
from ._adaptive_clipping import DPNormClipping
from ._callbacks import EpsilonSpent
from ._engine import (
    DPSGDEngine,
    FixedClipping,
    PoissonBatchIterator,
    check_per_example_support,
)
from ._ghost import GhostClipping, GhostClippingFallbackWarning, find_unsupported_layer
from ._net import DefaultMLP, DPNeuralNetClassifier, DPNeuralNetRegressor
from ._per_example import VmapPerExampleGradients

__all__ = [
    "COUNT_NOISE_FACTOR",
    "DPNeuralNetClassifier",
    "DPNeuralNetRegressor",
    "DPNormClipping",
    "DPSGDEngine",
    "DPSGDPlan",
    "DefaultMLP",
    "EpsilonSpent",
    "FixedClipping",
    "GaussianNoise",
    "GhostClipping",
    "GhostClippingFallbackWarning",
    "PoissonBatchIterator",
    "VmapPerExampleGradients",
    "calibrate_dpsgd_noise",
    "check_per_example_support",
    "combined_noise_multiplier",
    "count_noise_multiplier",
    "dataset_size_event",
    "dpsgd_plan",
    "dpsgd_step_event",
    "find_unsupported_layer",
    "norm_histogram",
    "poisson_batch_indices",
    "release_dataset_size",
    "steps_per_epoch",
]
