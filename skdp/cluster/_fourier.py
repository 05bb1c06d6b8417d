"""Random Fourier features of a shift-invariant kernel (Rahimi & Recht 2007; Acs et al. 2018, Eq. 2).

The map ``z(x) = sqrt(2/d) cos(x W + b)`` of :class:`~skdp.cluster.DPKernelKMeans`:
``z(x) . z(y)`` approximates ``k(x - y)``, so Lloyd's algorithm on ``z`` is
kernel k-means (Chitta, Jin & Jain 2012).  Its own module because both the
estimator (which draws ``W, b``) and the row sources of :mod:`skdp.cluster._rows`
(which apply them, chunk by chunk) need it.
"""

from __future__ import annotations

import math

import numpy as np

#: ``|z(x)|^2 = (2/d) sum_i cos^2(.) <= 2`` for every x: the a-priori largest
#: norm of a cosine random-feature vector (Acs et al., Eq. 2).
MAX_FEATURE_NORM = math.sqrt(2.0)


def draw_fourier_weights(kernel, gamma, n_features, n_components, rng):
    """Random frequencies ``W`` (n_features, d) and phases ``b`` (d,) of Eq. 2.

    ``W`` is drawn from the Fourier transform of the kernel (Bochner; Rahimi &
    Recht 2007): ``N(0, 2 gamma)`` per entry for ``exp(-gamma |x - y|_2^2)``
    (scikit-learn's ``RBFSampler``), standard Cauchy scaled by ``gamma`` for
    ``exp(-gamma |x - y|_1)``; ``b ~ U[0, 2 pi]``.  Data-independent: only
    the public shape of the data is used.
    """
    if kernel == "rbf":
        weights = math.sqrt(2.0 * gamma) * rng.standard_normal((n_features, n_components))
    elif kernel == "laplacian":
        weights = gamma * rng.standard_cauchy((n_features, n_components))
    else:
        raise ValueError(f"kernel must be 'rbf' or 'laplacian', got {kernel!r}.")
    offsets = rng.uniform(0.0, 2.0 * np.pi, size=n_components)
    return weights, offsets


def random_fourier_features(X, weights, offsets):
    """``z(x) = sqrt(2/d) cos(x W + b)`` (Acs et al., Eq. 2; Alg. 2 line 3)."""
    d = weights.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        phases = X @ weights + offsets
    # Rows so large that the phase overflows have no meaningful features; any
    # fixed value keeps z a function of x, and the clip bounds it regardless.
    phases[~np.isfinite(phases)] = 0.0
    return math.sqrt(2.0 / d) * np.cos(phases)
