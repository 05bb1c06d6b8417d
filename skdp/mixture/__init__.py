"""Differentially private mixture models."""

from ._gaussian_mixture import DPGaussianMixture

__all__ = ["DPGaussianMixture"]
