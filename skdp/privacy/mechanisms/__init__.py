"""Noise mechanisms: every way skdp perturbs a statistic, each recording its event before it draws.

* :mod:`~skdp.privacy.mechanisms.additive`: Laplace and Gaussian noise on arrays;
* :mod:`~skdp.privacy.mechanisms.matrix`: symmetric-matrix noise for second moments;
* :mod:`~skdp.privacy.mechanisms.selection`: noisy histograms, report-noisy-max and the
  exponential mechanism;
* :mod:`~skdp.privacy.mechanisms.subsampled`: the Gaussian mechanism on a Poisson subsample;
* :mod:`~skdp.privacy.mechanisms.torch_noise`: Gaussian noise on torch tensors (DP-SGD);
* :mod:`~skdp.privacy.mechanisms.secure`: exact discrete samplers behind ``secure`` noise.

The additive mechanisms are importable from here (``skdp.privacy.mechanisms.GaussianMechanism``);
the others from their modules or from :mod:`skdp.privacy`.  Importing this package never
imports torch.
"""

from .additive import GaussianMechanism, LaplaceMechanism

__all__ = ["GaussianMechanism", "LaplaceMechanism"]
