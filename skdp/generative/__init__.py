"""Differentially private generative models for synthetic data release.

* :class:`DPGenerativeMixture`: Acs et al. (2018), Alg. 1: a private
  partition, then one generative model per cluster: by default a DP
  latent-class model (per-cluster Bernoulli/categorical marginals, one
  Gaussian release), or VAEs / RBMs trained by DP-SGD; with
  ``n_clusters="auto"`` (the default) a tree of privately selected and
  measured 2-way marginals (MST, McKenna et al. 2021).

Importing this subpackage does not import torch; fitting does.
"""

from ._mixture import DPGenerativeMixture

__all__ = ["DPGenerativeMixture"]
