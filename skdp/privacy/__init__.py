"""The privacy core: noise mechanisms, calibration and accounting.

Estimators ask this package for every noise scale, clip and composition;
they never compute one inline.  DP-SGD's accounting is :mod:`skdp.privacy.dpsgd`
and its torch noise :mod:`skdp.privacy.mechanisms.torch_noise` (``import skdp.privacy``
never imports torch).
"""

from .accountants.conversions import (
    DEFAULT_ORDERS,
    advanced_composition_epsilon,
    gaussian_delta,
    gaussian_dp_mu,
    gaussian_epsilon,
    group_guarantee,
    rdp_to_epsilon,
    record_share,
    zcdp_to_epsilon,
)
from .budgets.hold import BudgetHold, hold
from .budgets.in_process import BudgetAccountant, BudgetRemaining, BudgetReservation
from .budgets.sqlite import SQLiteBudgetAccountant
from .calibration import (
    calibrate_noise_multiplier,
    gaussian_noise_multiplier,
    laplace_noise_multiplier,
)
from .clipping import clip_rows
from .events import (
    ADD_REMOVE,
    REPLACE_ONE,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    PureDPEvent,
    SubsampledGaussianEvent,
)
from .ledger import COMPOSITIONS, DEFAULT_COMPOSITION, PrivacyLedger, PrivacySpent, compose
from .mechanisms import GaussianMechanism, LaplaceMechanism
from .mechanisms.matrix import (
    SymmetricMatrixGaussianMechanism,
    SymmetricMatrixLaplaceMechanism,
    project_to_psd,
)
from .mechanisms.selection import (
    ExponentialMechanism,
    histogram_sensitivity,
    noisy_histogram,
    noisy_histogram_mode,
)
from .mechanisms.subsampled import SubsampledGaussianMechanism
from .mechanisms.torch_noise import TorchGaussianMechanism
from .norm_selection import dp_norm, dp_norm_from_histogram

__all__ = [
    "ADD_REMOVE",
    "COMPOSITIONS",
    "DEFAULT_COMPOSITION",
    "DEFAULT_ORDERS",
    "REPLACE_ONE",
    "BudgetAccountant",
    "BudgetHold",
    "BudgetRemaining",
    "BudgetReservation",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "ExponentialMechanism",
    "GaussianEvent",
    "GaussianMechanism",
    "LaplaceEvent",
    "LaplaceMechanism",
    "PrivacyLedger",
    "PrivacyEvent",
    "PrivacySpent",
    "PureDPEvent",
    "SQLiteBudgetAccountant",
    "SubsampledGaussianEvent",
    "SubsampledGaussianMechanism",
    "SymmetricMatrixGaussianMechanism",
    "SymmetricMatrixLaplaceMechanism",
    "TorchGaussianMechanism",
    "advanced_composition_epsilon",
    "calibrate_noise_multiplier",
    "clip_rows",
    "compose",
    "dp_norm",
    "dp_norm_from_histogram",
    "gaussian_delta",
    "gaussian_dp_mu",
    "gaussian_epsilon",
    "gaussian_noise_multiplier",
    "group_guarantee",
    "record_share",
    "hold",
    "histogram_sensitivity",
    "laplace_noise_multiplier",
    "noisy_histogram",
    "noisy_histogram_mode",
    "project_to_psd",
    "rdp_to_epsilon",
    "zcdp_to_epsilon",
]

