"""Sensitivities of the sums every estimator releases, under each neighbouring relation.

One place for the two statistics of clipped rows that skdp's estimators add
noise to, so that no estimator derives a sensitivity inline:

* the sum of rows ``S = sum_i x_i`` (k-means' cluster sums, DP-EM's weighted
  means, DPPCA's and DPStandardScaler's means), and
* the sum of outer products ``M = sum_i x_i x_i^T``, released as its upper
  triangle (Dwork et al. 2014, "Analyze Gauss"; DP-EM's covariances, DPPCA).

Rows are clipped to L2 norm ``C`` (:mod:`skdp.privacy.clipping`).  Under
*replace-one* neighbours one row ``a`` becomes ``b``; under *add/remove* one
row ``a`` appears or disappears (``b = 0``).  Histograms of counts are
:func:`skdp.privacy.mechanisms.selection.histogram_sensitivity`.
"""

from __future__ import annotations

import math
import numbers

from .events import ADD_REMOVE, REPLACE_ONE, _check_relation

__all__ = ["outer_product_sum_sensitivity", "row_sum_sensitivity"]


def _check(bound, n_features, norm, neighbouring):
    _check_relation(neighbouring)
    if not (isinstance(bound, numbers.Real) and math.isfinite(bound) and bound > 0):
        raise ValueError(f"bound must be a positive finite number, got {bound!r}.")
    if not (isinstance(n_features, numbers.Integral) and n_features >= 1):
        raise ValueError(f"n_features must be a positive integer, got {n_features!r}.")
    if norm not in (1, 2):
        raise ValueError(f"norm must be 1 or 2, got {norm!r}.")


def row_sum_sensitivity(bound, n_features, norm=2, neighbouring=REPLACE_ONE):
    """Sensitivity of ``sum_i x_i`` over rows of L2 norm at most ``bound``.

    Replace-one: the sum moves by ``a - b``, of L2 norm at most
    ``||a|| + ||b|| <= 2 C`` (attained by ``b = -a``) and L1 norm at most
    ``2 sqrt(d) C`` (``||x||_1 <= sqrt(d) ||x||_2``).  Add/remove: by ``a``,
    ``C`` and ``sqrt(d) C``.  (Acs et al. 2018, Sec. III-A, state
    ``sqrt(2) C`` for replace-one, which holds only when ``a`` and ``b`` fall
    in different clusters; see :mod:`skdp.cluster._lloyd`.)

    Parameters
    ----------
    bound : float
        The clipping norm ``C``.
    n_features : int
        ``d``, used by the L1 sensitivity.
    norm : {1, 2}
    neighbouring : {"replace_one", "add_remove"}

    Returns
    -------
    float
    """
    _check(bound, n_features, norm, neighbouring)
    scale = 2.0 if neighbouring == REPLACE_ONE else 1.0
    return scale * bound * (math.sqrt(n_features) if norm == 1 else 1.0)


def outer_product_sum_sensitivity(bound, n_features, norm=2, neighbouring=REPLACE_ONE):
    """Sensitivity of the upper triangle of ``sum_i x_i x_i^T`` over rows of L2 norm at most ``bound``.

    Replace-one: the change is ``A - B`` with ``A = a a^T``, ``B = b b^T``, and
    ``||A - B||_F^2 = ||a||^4 + ||b||^4 - 2 (a.b)^2 <= 2 C^4``; the upper
    triangle counts each off-diagonal entry once, so its L2 norm is at most
    ``sqrt(2) C^2`` (attained by orthogonal ``a``, ``b`` of norm ``C``), and
    ``C^2`` when ``d = 1`` (one entry, ``|a^2 - b^2| <= C^2``).  L1:
    ``sum_{i<=j} |a_i a_j| = (||a||_1^2 + ||a||_2^2) / 2 <= (d + 1) C^2 / 2``
    for each of ``A`` and ``B``, so ``(d + 1) C^2`` (``C^2`` when ``d = 1``:
    ``a^2`` and ``b^2`` have the same sign).  Add/remove: one of the
    two terms, ``C^2`` (L2) and ``(d + 1) C^2 / 2`` (L1).

    Parameters
    ----------
    bound : float
        The clipping norm ``C``.
    n_features : int
        ``d``.
    norm : {1, 2}
    neighbouring : {"replace_one", "add_remove"}

    Returns
    -------
    float
    """
    _check(bound, n_features, norm, neighbouring)
    square = bound * bound
    if neighbouring == ADD_REMOVE:
        return square * ((n_features + 1) / 2.0 if norm == 1 else 1.0)
    if n_features == 1:
        return square
    return square * (n_features + 1.0 if norm == 1 else math.sqrt(2.0))
