"""DPGaussianMixture's bounds and size rules: which bounds to release, and how many components fit.

Pure functions of the estimator's public hyperparameters, ``n`` and ``d``
(read before the data), and one release (:func:`release_box`), so that the
class keeps only the template's hooks (as scikit-learn's ``GaussianMixture``
keeps its steps in ``_base.py`` and ``_gaussian_mixture.py``'s functions):

* :func:`auto_shares`, :func:`bounds_share`, :func:`bounds_plan`: the plan of
  ``data_norm="auto"``: a private centre and norm bound at the smallest share
  of the budget that locates the norm quantile, else a private histogram box
  (:ref:`auto-data-norm`, :doc:`/bounds`);
* :func:`release_box`: the histogram box's centre and half-diagonal;
* :func:`fitted_components`: how many components the noise can resolve
  (``reduce_components``, :ref:`mixture-fallback`).
"""

from __future__ import annotations

import warnings

import numpy as np

from .._user_warnings import _user_stacklevel
from ..privacy.centring import auto_bounds_plan, calibrate_auto_bounds, can_locate_quantile
from ..privacy.quantiles import (
    AUTO_BOUNDS_QUANTILES,
    BOX_SHARES,
    announced_histogram_box,
    calibrate_histogram_bounds,
    can_locate_columns,
    histogram_box_share,
)
from ._plan import resolvable_components

__all__ = ["auto_shares", "bounds_plan", "bounds_share", "fitted_components", "release_box"]


def auto_shares(init_budget):
    """The shares ``bounds_budget="auto"`` may take: those that leave the EM iterations some budget."""
    shares = tuple(s for s in BOX_SHARES if s + float(init_budget) < 1)
    return shares or BOX_SHARES[:1]


def bounds_share(estimator, n_samples):
    """The centring's share: declared, or (``"auto"``) the smallest that locates its quantile.

    ``bounds_budget="auto"``: the smallest share in
    :data:`~skdp.privacy.quantiles.BOX_SHARES` (below ``1 - init_budget``)
    whose quantile epsilon lets the exponential mechanism locate a norm
    quantile with ``n`` rows
    (:func:`~skdp.privacy.centring.can_locate_quantile`); None when
    none does (the private histogram box then takes over).  Public
    quantities only: ``n``, epsilon, delta and the hyperparameters.
    """
    if not isinstance(estimator.bounds_budget, str):
        return float(estimator.bounds_budget)
    for share in auto_shares(estimator.init_budget):
        plan = calibrate_auto_bounds(
            float(estimator.epsilon), float(estimator.delta), share, neighbouring=estimator._neighbouring
        )
        if can_locate_quantile(n_samples, plan.quantile_epsilon):
            return share
    return None


def bounds_plan(estimator, secure_noise=False, shape=None):
    """The bounds' plan of ``data_norm="auto"``, else None (nothing released).

    The centre and norm bound's :class:`~skdp.privacy.centring.AutoBounds`
    with :func:`bounds_share`; where ``bounds_budget="auto"`` and no
    share locates the norm quantile (``n * epsilon`` too small), the
    private histogram box's :class:`~skdp.privacy.quantiles.HistogramBounds`,
    its share the smallest at which a column can be located
    (:func:`~skdp.privacy.quantiles.histogram_box_share`).  ``shape`` is
    the public ``(n_samples, n_features)``; without it (before ``fit``)
    the centring at the smallest share stands in.
    """
    est = estimator
    if not (isinstance(est.data_norm, str) and est.data_norm == "auto"):
        return None
    shares = auto_shares(est.init_budget)
    if shape is None:
        share = shares[0] if isinstance(est.bounds_budget, str) else est.bounds_budget
    else:
        share = bounds_share(est, shape[0])
    if share is None:
        n_samples, n_features = shape
        epsilon, delta = float(est.epsilon), float(est.delta)
        share = min(
            histogram_box_share(n_samples, epsilon, delta, n_features, est.composition, secure_noise),
            shares[-1],
        )
        largest = calibrate_histogram_bounds(epsilon, delta, n_features, share, est.composition, secure_noise)
        if not can_locate_columns(n_samples, largest.mechanism(), n_features):
            # No share locates a column (public n, d, epsilon): the box falls back to
            # the pool's range or [0, 1] whatever it spends, so it spends the least and
            # leaves the EM releases the rest (the user guide's measurements).
            share = shares[0]
        return calibrate_histogram_bounds(
            epsilon, delta, n_features, share, est.composition, secure_noise, scale=True
        )
    return auto_bounds_plan(
        est.data_norm,
        est.epsilon,
        est.delta,
        share,
        neighbouring=est._neighbouring,
        secure_noise=secure_noise,
    )


def release_box(epsilon, reduce, n_samples, n_features, bounds, rng, ledger):
    """Small ``n * epsilon``: the private histogram box's centre and half-diagonal as ``(centre, scale)``.

    The box (:func:`~skdp.privacy.quantiles.private_histogram_box`, its
    events the plan's first, with the row-scale histogram in front and
    ``extend``, as :class:`~skdp.cluster.DPKMeans`'s box) never lies beyond
    twice the data's largest magnitude; the fit then runs on rows centred at its middle and
    clipped to its half-diagonal, as with a declared ``data_norm``.  A
    column it cannot locate by its own counts is announced (from the
    released counts only).
    """
    low, high, located, pooled = announced_histogram_box(
        reduce,
        n_samples,
        n_features,
        bounds.mechanism(),
        AUTO_BOUNDS_QUANTILES,
        rng,
        ledger,
        epsilon=epsilon,
        advice="Declare data_norm from public knowledge, or raise epsilon.",
        scale_mechanism=bounds.scale_mechanism(),
        extend=True,
    )
    scale = float(np.linalg.norm(high - low) / 2.0)
    return (low + high) / 2.0, scale if scale > 0 else 1.0


def fitted_components(estimator, em, z, n_samples):
    """How many components the fit can resolve (:func:`~skdp.mixture._plan.resolvable_components`).

    Public: ``n``, ``d``, ``K`` and the calibrated plan.  Warns when it
    is fewer than ``n_components`` (what to do: more rows or epsilon,
    fewer components, or ``reduce_components=False``).
    """
    est = estimator
    k = em.n_components
    if not est.reduce_components or k == 1 or est.means_init is not None or est.weights_init is not None:
        return k
    z_second = z * em.noise_weights()[2]
    fitted = resolvable_components(
        z_second, n_samples, em.n_features, k, em.covariance_type, em.second_family, em.joint
    )
    if fitted < k:
        warnings.warn(
            f"With n_samples={int(n_samples)}, {em.n_features} features and epsilon="
            f"{float(est.epsilon):.3g}, the noise of the released second moments is wider than "
            f"{k} components can be: fitting {fitted} instead (copied into n_components={k} rows; "
            "see 'reduce_components'). Raise epsilon, fit fewer components, or set "
            "reduce_components=False to fit all of them anyway.",
            UserWarning,
            stacklevel=_user_stacklevel(),
        )
    return fitted
