"""Bayesian neural networks with private approximate inference.

:class:`DPSEPRegressor` fits a Bayesian neural network by stochastic
expectation propagation on probabilistic backpropagation, made differentially
private as in Vinaroz & Park (DP-SEP).  Pure NumPy.
"""

from ._dpsep import DPSEPRegressor

__all__ = ["DPSEPRegressor"]
