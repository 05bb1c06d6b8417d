"""Symmetric-matrix noise for second-moment and covariance statistics.

"Analyze Gauss" (Dwork, Talwar, Thakurta & Zhang 2014): perturb a symmetric
matrix statistic by drawing i.i.d. noise on its upper triangle (diagonal
included) and mirroring it.  The released matrix is a function of the
``d (d + 1) / 2`` noisy upper-triangle entries only, so its privacy is that of
the Gaussian (or Laplace) mechanism applied to that vector, whose sensitivity
is bounded by the Frobenius (or entrywise L1) sensitivity of the matrix.

The noise has full support on symmetric matrices.  One-sided noise such as
Wishart ``Z Z^T`` (used by Park et al. for covariances) has a support that
moves with the data, so no epsilon bounds it; skdp never ships it.  A
covariance that must be positive definite is obtained afterwards by
:func:`project_to_psd`, which is post-processing.
"""

from __future__ import annotations

import numpy as np

from .additive import GaussianMechanism, LaplaceMechanism, _check_value, _secure


class _SymmetricMatrixMixin:
    def release(self, value, rng, ledger):
        """Return the symmetric ``value`` plus mirrored upper-triangle noise."""
        value = _check_value(value)
        if value.ndim != 2 or value.shape[0] != value.shape[1]:
            raise ValueError(f"Expected a square matrix, got shape {value.shape}.")
        if not np.allclose(value, value.T):
            raise ValueError("The matrix to privatise must be symmetric.")
        d = value.shape[0]
        iu = np.triu_indices(d)
        secure = _secure(ledger)
        ledger.record(self.event(secure_noise=secure))
        out = np.zeros((d, d))
        out[iu] = self._perturb(value[iu], rng, secure)
        return out + np.triu(out, 1).T


class SymmetricMatrixGaussianMechanism(_SymmetricMatrixMixin, GaussianMechanism):
    """Gaussian noise on the upper triangle of a symmetric matrix, mirrored.

    Parameters
    ----------
    sensitivity : float
        L2 sensitivity of the upper-triangle vector; the Frobenius sensitivity
        of the matrix bounds it.  For ``A = sum_i w_i x_i x_i^T`` with
        ``||x_i|| <= 1`` and weights ``0 <= w_i <= w``, replacing one record changes
        ``A`` by ``w a a^T - w b b^T`` (norms <= 1), whose Frobenius norm is
        ``w sqrt(||a||^4 + ||b||^4 - 2 (a.b)^2) <= sqrt(2) w`` (tight for ``a``
        orthogonal to ``b``).
    scale : float
        Standard deviation of each upper-triangle entry's noise.
    """


class SymmetricMatrixLaplaceMechanism(_SymmetricMatrixMixin, LaplaceMechanism):
    """Laplace noise on the upper triangle of a symmetric matrix, mirrored.

    Parameters
    ----------
    sensitivity : float
        L1 sensitivity of the upper-triangle vector.  For ``x x^T`` with
        ``||x||_2 <= 1`` it is at most ``sum_{i<=j} |x_i x_j| <= (||x||_1^2 + ||x||_2^2) / 2
        <= (d + 1) / 2`` per record.
    scale : float
        Laplace scale of each upper-triangle entry's noise.
    """


def project_to_psd(matrix, min_eigenvalue):
    """Nearest (Frobenius) symmetric matrix whose eigenvalues are ``>= min_eigenvalue``.

    Post-processing of a released matrix: it uses no private data, so it costs
    no privacy.
    """
    if not min_eigenvalue > 0:
        raise ValueError(f"min_eigenvalue must be positive, got {min_eigenvalue!r}.")
    sym = (matrix + matrix.T) / 2
    vals, vecs = np.linalg.eigh(sym)
    return (vecs * np.maximum(vals, min_eigenvalue)) @ vecs.T
