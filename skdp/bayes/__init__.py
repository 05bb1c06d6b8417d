"""Private Bayesian inference for conjugate exponential-family models (Foulds et al. 2016)."""

from ._beta_bernoulli import DPBetaBernoulli

__all__ = ["DPBetaBernoulli"]
