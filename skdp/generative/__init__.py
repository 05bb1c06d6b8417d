"""Differentially private generative models for synthetic data release.

* :class:`DPGenerativeMixture`: a mixture of generative neural networks
  (VAEs or RBMs), one per cluster of a DP kernel k-means partition, trained by
  DP-SGD (Acs et al. 2018, Alg. 1).

Importing this subpackage does not import torch; fitting does.
"""

from ._mixture import DPGenerativeMixture

__all__ = ["DPGenerativeMixture"]
