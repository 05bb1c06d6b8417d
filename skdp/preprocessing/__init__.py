"""Differentially private preprocessing: scalers and PCA whose fitted statistics are releases.

A scikit-learn scaler or PCA fitted on private data publishes its statistics
(means, ranges, principal axes) without noise; these transformers release
them through :mod:`skdp.privacy` and report ``privacy_spent_``, so a
``Pipeline`` of them and a DP model is private from end to end
(:doc:`/preprocessing`).
"""

from ._minmax import DPMinMaxScaler
from ._pca import DPPCA
from ._standard import DPStandardScaler

__all__ = ["DPPCA", "DPMinMaxScaler", "DPStandardScaler"]
