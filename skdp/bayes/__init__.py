"""Private Bayesian inference for conjugate exponential-family models (Foulds et al. 2016)."""

from ._beta_bernoulli import DPBetaBernoulli
from ._naive_bayes_hmm import DPNaiveBayesHMM

__all__ = ["DPBetaBernoulli", "DPNaiveBayesHMM"]
