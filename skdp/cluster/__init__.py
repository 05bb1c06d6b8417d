"""Differentially private clustering: DP Lloyd k-means and its kernel version."""

from ._kernel_kmeans import DPKernelKMeans
from ._kmeans import DPKMeans

__all__ = ["DPKMeans", "DPKernelKMeans"]
