"""L2 clipping: the one rule every estimator bounds a record's contribution with.

A vector ``x`` is clipped to L2 norm ``C`` by ``x * min(1, C / ||x||)``
(Abadi et al. 2016, Alg. 1 line 8; Acs et al. 2018, Alg. 2 line 5 and
Alg. 4 line 5), computed as ``x * (C / max(||x||, C))``: vectors inside the
ball are kept unchanged (the factor is exactly 1) and a zero vector needs no
division by zero.  Every sensitivity that assumes clipped records (sums of
clipped rows ``2C``, DP-SGD's ``C``, DP-SEP's sites) holds only if the
clipped vector really has norm at most ``C``, so the rule fixes what happens
when the norm itself cannot be computed:

* a norm that overflows (rows of huge finite entries) is computed exactly
  by rescaling (:func:`row_norms`), so huge rows are clipped, not lost;
* a norm that is still infinite or NaN (a row holding an infinity or a NaN,
  or, in torch, an overflowed squared norm met by ``inf * 0``) counts as
  infinite: the factor is 0 and the clipped vector is the zero vector, which
  is within the bound.  Never NaN or infinity: one such value would turn a
  whole noisy sum into NaN.

The NumPy functions work on rows of a 2-D array; :func:`torch_clip_factors`
gives the same factors for a tensor of per-example norms (DP-SGD's
strategies), importing torch only when called.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["clip_box", "clip_factors", "clip_rows", "clip_vector", "row_norms", "torch_clip_factors"]


def row_norms(X):
    """L2 norm of every row of ``X``, without overflow for rows of huge (finite) entries.

    Rows holding an infinity or a NaN get a NaN or infinite norm, which the
    clipping rule counts as infinite.
    """
    with np.errstate(over="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    overflow = ~np.isfinite(norms)
    if overflow.any():
        # Rescale by the largest entry before squaring (the slow path is rare).
        big = X[overflow]
        scale = np.abs(big).max(axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            norms[overflow] = scale * np.sqrt(
                np.einsum("ij,ij->i", big / scale[:, None], big / scale[:, None])
            )
    return norms


def clip_factors(norms, bound, *, unit=False):
    """The factors ``C / max(||x||, C)`` of the clipping rule (``1 / max(||x||, C)`` if ``unit``).

    A NaN or infinite norm gives the factor 0 (see the module docstring).
    """
    norms = np.asarray(norms, dtype=float)
    bad = ~np.isfinite(norms)
    if bad.any():
        norms = np.where(bad, np.inf, norms)
    return (1.0 if unit else bound) / np.maximum(norms, bound)


def clip_rows(X, bound, *, unit=False, norms=None):
    """Clip every row of ``X`` to L2 norm at most ``bound``.

    Each row ``x`` becomes ``x * (C / max(||x||, C))`` with ``C = bound``
    (Abadi et al. 2016, Algorithm 1 line 8): rows inside the ball are kept
    unchanged, a norm that overflows is computed exactly by rescaling, and a
    row whose norm is NaN or infinite becomes the zero row.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features)
    bound : float
        The clipping bound ``C`` (positive, finite).
    unit : bool, default=False
        Also divide by ``bound``, in the same product: rows end in the unit
        ball (``x / max(||x||, C)``), the scaling of DP-EM's moments.
    norms : ndarray of shape (n_rows,), default=None
        The rows' norms, if already computed (as
        ``skdp.privacy.clipping.row_norms`` computes them).

    Returns
    -------
    ndarray of shape (n_rows, n_features)
        Finite rows of norm at most ``bound`` (at most 1 with ``unit``); a row
        whose norm is NaN or infinite becomes the zero row.
    """
    if norms is None:
        norms = row_norms(X)
    factors = clip_factors(norms, bound, unit=unit)
    clipped = X * factors[:, None]
    zero = factors == 0
    if zero.any():
        # inf * 0 and NaN * 0 are NaN: the zero factor means the zero row.
        clipped[zero] = 0.0
    return clipped


def clip_vector(x, bound):
    """Clip one vector ``x`` to L2 norm at most ``bound`` (:func:`clip_rows` on one row).

    The norm of a single vector is its BLAS dot product (what single-vector
    callers always computed, so their results are unchanged), with
    :func:`row_norms`' rescaling when that overflows.
    """
    x = np.asarray(x)
    if x.dtype != np.float64:
        with np.errstate(over="ignore", invalid="ignore"):
            norm = np.sqrt(np.dot(x, x))
        if not np.isfinite(norm):
            norm = row_norms(x[None, :])[0]
        return clip_rows(x[None, :], bound, norms=np.array([norm]))[0]
    # Float64 (iterative fits clip one at every step): clip_rows' factor and
    # product without its 2-D detour, the same operations on the same
    # numbers.  np.vdot of two real vectors is np.dot's BLAS product without
    # its floating-point warning (an overflow is handled below, as the
    # errstate above silences it), and a correctly rounded square root is
    # the same number in math and NumPy.
    squared = float(np.vdot(x, x))
    if squared < math.inf:
        norm = math.sqrt(squared)
    else:
        # Overflowed, or a NaN or infinite entry.
        norm = float(row_norms(x[None, :])[0])
        if not math.isfinite(norm):
            return np.zeros_like(x)  # the factor 0: the zero vector
    return x * (bound / max(norm, bound))


def clip_box(X, lower, upper):
    """Clip every column ``j`` of ``X`` to ``[lower_j, upper_j]``: the box rule of declared or private bounds.

    A coordinate bound (``bounds``, ``feature_bounds``, ``"auto"`` column
    ranges) is enforced by moving each value onto the nearest end, so a
    record's contribution to a sum of column ``j`` lies in an interval of
    length ``upper_j - lower_j`` whatever it was.  A NaN cannot be placed
    anywhere in the box; it is mapped to the box's midpoint, a value the
    sensitivity already allows (and ``+-inf`` go to the ends, as any large
    value), so no NaN reaches a noisy sum.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features) or (n_samples,)
    lower, upper : array-like broadcastable to a row of ``X``
        ``lower <= upper``.

    Returns
    -------
    ndarray
        A new array with every value in its column's box.
    """
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    clipped = np.clip(np.asarray(X, dtype=float), lower, upper)
    nan = np.isnan(clipped)
    if nan.any():
        clipped[nan] = np.broadcast_to((lower + upper) / 2, clipped.shape)[nan]
    return clipped


def torch_clip_factors(norms, bound):
    """The factors ``min(1, C / ||g_i||)`` of a tensor of per-example norms.

    The rule of :func:`clip_factors` in torch: a NaN norm (an overflowed
    squared norm met by ``inf * 0``) or an infinite one gives 0.  Computed as
    ``min(1, C / max(||g_i||, tiny))``, which equals ``C / max(||g_i||, C)``
    in exact arithmetic and needs no second pass over the norms.
    """
    import torch

    norms = torch.nan_to_num(norms, nan=torch.inf, posinf=torch.inf)
    return (bound / norms.clamp(min=torch.finfo(norms.dtype).tiny)).clamp(max=1.0)
