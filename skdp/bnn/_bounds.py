"""DP-SEP's bounds: the declared, ``"auto"`` (released) or ``"nonprivate"`` box of the data.

The features and the target are clipped to a box and mapped onto ``[-1, 1]``
before any SEP step (:class:`~skdp.bnn.DPSEPRegressor`; the user guide,
:doc:`/bnn`).  This module holds the box's release (the exponential
mechanism's quantiles, through the privacy core), the standardisation it
defines, and the data-free fallback when ``n`` is too small to locate it.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from .._user_warnings import warn_privacy_leak
from ..privacy import LaplaceMechanism
from ..privacy.clipping import clip_box
from ..privacy.quantiles import (
    AUTO_BOUNDS_QUANTILES,
    announced_histogram_box,
    can_locate_columns,
    check_grid,
    histogram_box_level,
    private_box,
    private_quantiles,
    rank_counts,
    rank_margin,
)

#: Probability, per released quantile, that the exponential mechanism picks a
#: cell on the wrong side of all the data (see :func:`auto_bound_levels`).
_AUTO_BOUNDS_FAILURE = 0.01
#: Largest quantile level of the ``"auto"`` bounds (the quartiles).
_MAX_AUTO_LEVEL = 0.25
#: Smallest quantile level of the ``"auto"`` *feature* bounds (:func:`feature_bound_levels`).
_MIN_FEATURE_LEVEL = 0.05
#: The ``"histogram"`` layout is used where a column holding this share of its
#: rows in one log bin is located (:func:`~skdp.privacy.quantiles.can_locate_columns`):
#: the scalers' margin, a column whose values lie in two log bins.  The DP nets
#: ask twice that (a quarter), because their alternative, one centred scale, lost
#: less than the boxes' noise cost near the margin; DP-SEP's alternative is the
#: shared box ``[-S, S]``, not centred, and at a half every regression set of the
#: zoo and of ``--unseen 2026`` to ``2029`` scored as well or better than at a
#: quarter (friedman-2000x10 at eps 1 .336 -> .696, unseen2026 regression-796x11
#: at eps 3 .004 -> .703; ``docs/bnn.md``).
_HISTOGRAM_SHARE_IN_BIN = 0.5


def auto_bound_levels(n_samples, bound_epsilon, n_candidates):
    """Quantile level ``q`` of the ``"auto"`` bounds (released at ``q`` and ``1 - q``) and their widening.

    The exponential mechanism over ``K = n_candidates`` grid cells gives a
    cell outside the data (rank distance ``q n`` from the ``q``-quantile)
    weight ``exp(-epsilon q n / 2)`` against at least 1 for the right cell,
    so it lands outside with probability at most ``K exp(-epsilon q n / 2)``
    (McSherry & Talwar 2007).  ``q`` is the smallest level keeping that below
    ``beta = 0.01``, ``q = 2 log(K / beta) / (epsilon n)``
    (:func:`skdp.privacy.quantiles.rank_margin`), and at least the
    core's 1st percentile (:data:`~skdp.privacy.quantiles.AUTO_BOUNDS_QUANTILES`),
    at most 0.25 (the quartiles; a level above that warns: the data is too
    small for the budget).  The released ``[a, b]`` then holds about ``1 - 2 q`` of
    each column; it is widened about its centre by ``1 / (1 - 2 q)``, which
    restores the full range of a uniform column (the declared examples'
    case).  A function of public quantities only (``n`` is public under
    replace-one); the widening is post-processing.

    Returns
    -------
    q : float
    widening : float
    """
    q = rank_margin(n_samples, bound_epsilon, n_candidates, _AUTO_BOUNDS_FAILURE)
    if q > _MAX_AUTO_LEVEL:
        # Public quantities only (n, epsilon, the grid): nothing about the data.
        warnings.warn(
            f"feature_bounds/target_bounds='auto': {n_samples} rows at {bound_epsilon:.3g} epsilon per "
            "quantile are too few for the exponential mechanism to locate the bounds reliably; "
            "declare the bounds, or raise bounds_budget or epsilon.",
            UserWarning,
            stacklevel=4,
        )
    q = min(max(q, AUTO_BOUNDS_QUANTILES[0]), _MAX_AUTO_LEVEL)
    return q, 1.0 / (1.0 - 2.0 * q)


def feature_bound_levels(n_samples, bound_epsilon, n_candidates):
    """:func:`auto_bound_levels` for the features: the level is at least :data:`_MIN_FEATURE_LEVEL` (5 %).

    The feature box maps the inputs onto ``[-1, 1]`` and the clipped sites'
    noise is relative to that interval.  As ``n epsilon`` grows the
    failure-driven level falls towards the 1st percentile and the box
    widens into the columns' tails: a heavy-tailed column (an exponential
    of a normal, counts) then has its bulk squeezed into a small part of
    ``[-1, 1]``, so a larger budget scored *lower* (a 19,942 x 27
    regression with such columns: R^2 0.818 at eps 1, 0.793 at eps 10;
    ``docs/bnn.md``).  Holding the level at 5 % once it is located there,
    the box stops changing with epsilon, so more budget only lowers the
    noise.  The cost on a normal column is bounded: the box is
    ``+-1.645 sd`` widened by ``1 / (1 - 2 q)`` to ``+-1.83 sd``, and a
    linear model on the winsorised input keeps ``corr(x, clip(x))^2 =
    0.986`` of what the exact input explains.  The target keeps
    :func:`auto_bound_levels` (its box bounds the predictions).  Public
    quantities only.
    """
    q, widening = auto_bound_levels(n_samples, bound_epsilon, n_candidates)
    if q < _MIN_FEATURE_LEVEL:
        return _MIN_FEATURE_LEVEL, 1.0 / (1.0 - 2.0 * _MIN_FEATURE_LEVEL)
    return q, widening


def _bounds_locatable(n_samples, bound_epsilon):
    """Whether ``"auto"`` bounds are located at this ``n`` and per-quantile epsilon (public only).

    The exponential mechanism finds the ``q``-quantile with failure
    probability at most 1% only for ``q <= 0.25`` here
    (:func:`auto_bound_levels`); beyond that the released box is a random
    grid cell, and a model standardised by it is worse than a constant.
    """
    grid = check_grid(None)
    return rank_margin(n_samples, bound_epsilon, grid.size - 1, _AUTO_BOUNDS_FAILURE) <= _MAX_AUTO_LEVEL


def auto_bounds_layout(n_samples, n_features, feature_auto, target_auto, epsilon_per_release, histogram=None):
    """How the ``"auto"`` bounds are released, from the public ``n``, ``d`` and epsilon only.

    Three layouts, tried in this order:

    * ``"histogram"`` (``feature_bounds="auto"`` and ``histogram`` given;
      since 2026-11-28): the features' box from the core's two noisy
      histograms (:func:`histogram_feature_box`: every column's own range,
      the release of the scalers and of the DP nets' input boxes), plus the
      target's two quantiles.  The bounds' share is split in quarters: half
      for the histograms, a quarter per target quantile (all of it for the
      histograms when the target's bounds are declared); ``histogram(part)``
      gives the histograms' plan at that part of the share.  Used where a
      column with half of its rows in one log bin is located at this
      ``n``, ``d`` and noise (:data:`_HISTOGRAM_SHARE_IN_BIN`) and the
      target's quantiles are located;
    * ``"columns"``: the ``q`` and ``1 - q`` quantiles of every feature column
      and of the target by the exponential mechanism, ``k = 2 d + 2``
      releases (``2 d`` or 2 when only one side is ``"auto"``): the layout
      of declared features with ``target_bounds="auto"``;
    * ``"pooled"`` (``feature_bounds="auto"`` only): one release for all the
      features, the ``1 - q`` quantile ``S`` of the rows' largest absolute
      entry ``max_j |x_ij|``, every column clipped to ``[-S, S]`` (Google's
      ApproxBounds idea of one shared scale; a row moves one rank count by
      at most 1, as a column quantile), plus the target's two quantiles:
      ``k = 3`` releases instead of ``2 d + 2``.

    Why the histograms first.  The exponential mechanism's share is split
    over its ``k`` releases, so the rank margin of each
    (:func:`auto_bound_levels`) grows with ``k``: with 10 features the
    per-column quantiles need about 7 times the rows of the pooled box.
    The histograms' noise grows as ``sqrt(d)`` instead (one vector release
    for all columns), so they locate every column's own range with 3 to 13
    times fewer rows than ``"columns"`` (d = 4 to 27, eps 1 to 10).  Where
    both locate, the histograms' box scored as well or better (3 seeds,
    every regression set of ``benchmarks/zoo.py`` and of its ``--unseen``
    seeds 2026-2029, ``docs/bnn.md``): an unseen 2,287 x 4 Friedman set with
    count columns R^2 .49 -> .88 at eps 3 (a quantile box of a column of
    mostly one value has zero width; the histograms' ``extend`` widens
    it), regression-1000x5 .83 -> .90 at eps 3; no cell lower by more than
    .005.  The pooled box is the fallback before the constant: it is
    centred on 0, so it flattens a column whose offset dwarfs its spread,
    or whose scale is far below the others' (an unseen 453 x 12 regression
    with column scales from 0.03 to 8,000: R^2 about 0 at eps 10 with it,
    .59 with the histograms).  ``None`` when none is located (the caller
    falls back to a private constant).

    Parameters
    ----------
    n_samples, n_features : int
    feature_auto, target_auto : bool
    epsilon_per_release : callable
        ``k -> `` the epsilon of each of ``k`` releases sharing the bounds' budget.
    histogram : callable or None, default=None
        ``part -> `` the :class:`~skdp.privacy.quantiles.HistogramBounds`
        plan costing ``part`` of the bounds' share; None: no ``"histogram"``
        layout.

    Returns
    -------
    layout : {"histogram", "columns", "pooled"} or None
    n_releases : int
        Exponential-mechanism releases of the layout (of the per-column one
        when ``layout`` is None).
    epsilon : float
        Epsilon of each of them.
    histogram_plan : HistogramBounds or None
        The features' histograms (``"histogram"`` only).
    """
    if feature_auto and histogram is not None:
        # Quarters of the share: two for the histograms, one per target quantile.
        parts = 2 + 2 * target_auto
        plan = histogram(2.0 / parts)
        target_epsilon = epsilon_per_release(parts)
        if can_locate_columns(n_samples, plan.mechanism(n_features), n_features, _HISTOGRAM_SHARE_IN_BIN) and (
            not target_auto or _bounds_locatable(n_samples, target_epsilon)
        ):
            return "histogram", 2 * target_auto, target_epsilon, plan
    k = 2 * n_features * feature_auto + 2 * target_auto
    epsilon = epsilon_per_release(k)
    if _bounds_locatable(n_samples, epsilon):
        return "columns", k, epsilon, None
    if feature_auto and n_features > 1:
        pooled = 1 + 2 * target_auto
        pooled_epsilon = epsilon_per_release(pooled)
        if _bounds_locatable(n_samples, pooled_epsilon):
            return "pooled", pooled, pooled_epsilon, None
    return None, k, epsilon, None


def histogram_feature_box(X, private, plan, rng, ledger, epsilon):
    """The ``"histogram"`` feature box: every column's ``q`` and ``1 - q`` ends from the core's histograms.

    :func:`~skdp.privacy.quantiles.announced_histogram_box` (a signed log
    histogram of every column, then a linear one inside each column's
    range, both released in one vector each by ``plan``'s mechanism;
    replace-one neighbours; ``extend=True``, as the DP nets' input boxes),
    at the level ``q`` of :func:`~skdp.privacy.quantiles.histogram_box_level`
    (5 % to 10 %), widened about its centre by ``1 / (1 - 2 q)`` as the
    other ``"auto"`` boxes (:func:`auto_bound_levels`).  A column no bin of
    its own locates takes the pool's range (announced).  The non-private
    reference runs take the exact quantiles at the same level.
    """
    n, d = X.shape
    mechanism = plan.mechanism(d)
    q = histogram_box_level(n, float(mechanism.std))
    if private:

        def reduce(fn, *args):
            return fn(X, *args)

        lower, upper, _, _ = announced_histogram_box(
            reduce,
            n,
            d,
            mechanism,
            (q, 1.0 - q),
            rng,
            ledger,
            epsilon=float(epsilon),
            advice="Declare feature_bounds=(lower, upper) from the data's known domain, or raise epsilon "
            "or bounds_budget.",
            extend=True,
        )
    else:
        lower, upper = np.quantile(X, (q, 1.0 - q), axis=0)
    # Post-processing of the released ends (see auto_bound_levels).
    widening = 1.0 / (1.0 - 2.0 * q)
    center, half = (lower + upper) / 2, (upper - lower) / 2 * widening
    half = np.where(half > 0, half, 1.0)
    return center - half, center + half


def pooled_feature_box(X, private, bound_epsilon, rng, ledger):
    """The ``"pooled"`` feature box ``[-S, S]`` of every column (:func:`auto_bounds_layout`).

    ``S`` is the ``1 - q`` quantile of ``max_j |x_ij|`` over the rows,
    released by the exponential mechanism over the core's public grid (one
    :class:`~skdp.privacy.PureDPEvent` of ``bound_epsilon``; ``q`` from
    :func:`feature_bound_levels`); the non-private reference runs take the exact
    quantile.  No widening: ``S`` bounds whole rows, so about ``1 - q`` of them
    lie inside the box in every column.  A released ``S <= 0`` (a cell below
    every row, possible under noise) becomes the grid's smallest positive
    point (post-processing).
    """
    grid = check_grid(None)
    n, d = X.shape
    scale = np.max(np.abs(X), axis=1).reshape(-1, 1)
    q, _ = feature_bound_levels(n, bound_epsilon, grid.size - 1)
    if private:
        S = float(
            private_quantiles(rank_counts(scale, grid), n, (1.0 - q,), grid, bound_epsilon, rng, ledger)[0, 0]
        )
        _warn_grid_end("feature_bounds", grid, S)
    else:
        S = float(np.quantile(scale, 1.0 - q))
    if not S > 0:
        S = float(grid[grid > 0][0])
    return np.full(d, -S), np.full(d, S)


def private_centre(y, epsilon, declared, rng, ledger):
    """The fallback's constant: a private centre of the target, and the box it was clipped to (or None).

    Three rules, chosen by the public ``n``, epsilon and the declaration
    only (never by the data), each spending at most ``epsilon`` (pure DP,
    replace-one neighbours):

    * ``declared = (lower, upper)``: the mean of the target clipped to the
      declared bounds, released by the Laplace mechanism (sensitivity
      ``(upper - lower) / n``), then clipped to them;
    * else, when the exponential mechanism locates the ``q`` and ``1 - q``
      quantiles at ``epsilon / 3`` each (``q <= 0.25``,
      :func:`auto_bound_levels`): that box, widened by ``1 / (1 - 2 q)``,
      and the Laplace mean of the target clipped to it at ``epsilon / 3``
      (the constant that scores best is the mean, not the median);
    * else, when it locates the median at ``epsilon`` (its rank margin at
      most 1/2): the private median;
    * else ``0``, the centre of the core's public grid, and nothing is
      released (``n epsilon`` below about 50).

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
    epsilon : float
    declared : tuple of ndarray or None
        The declared target bounds (arrays of shape (1,)).
    rng : numpy.random.Generator
    ledger : PrivacyLedger

    Returns
    -------
    centre : float
    box : tuple (lower, upper) or None
    """
    n = y.size
    grid = check_grid(None)
    if declared is not None:
        lower, upper = float(declared[0][0]), float(declared[1][0])
    else:
        third = epsilon / 3.0
        if rank_margin(n, third, grid.size - 1, _AUTO_BOUNDS_FAILURE) > _MAX_AUTO_LEVEL:
            if rank_margin(n, epsilon, grid.size - 1, _AUTO_BOUNDS_FAILURE) > 0.5:
                return 0.0, None
            median = private_quantiles(
                rank_counts(y.reshape(-1, 1), grid), n, (0.5,), grid, epsilon, rng, ledger
            )
            return float(median[0, 0]), None
        q, widening = auto_bound_levels(n, third, grid.size - 1)
        low, high = private_box(
            rank_counts(y.reshape(-1, 1), grid), n, (q, 1.0 - q), grid, third, rng, ledger
        )
        # Post-processing of the released quantiles, as the "auto" bounds.
        centre, half = (low[0] + high[0]) / 2, (high[0] - low[0]) / 2 * widening
        lower, upper = centre - half, centre + half
        epsilon = third
    mean = clip_box(y.reshape(-1, 1), lower, upper).mean()
    mechanism = LaplaceMechanism.from_epsilon(epsilon, (upper - lower) / n)
    noisy = float(np.asarray(mechanism.release(np.array([mean]), rng, ledger)).ravel()[0])
    return min(max(noisy, lower), upper), (lower, upper)


def _mean_std(a):
    """Column means and standard deviations that do not overflow for huge values."""
    size = np.max(np.abs(a), axis=0)
    size = np.where(size > 0, size, 1.0)
    scaled = a / size
    return size * scaled.mean(axis=0), size * scaled.std(axis=0)


def _check_bounds(bounds, name, n_columns):
    """``(lower, upper)`` arrays of shape (n_columns,) from a user's bounds."""
    try:
        lower, upper = bounds
        lower = np.broadcast_to(np.asarray(lower, dtype=float), (n_columns,)).copy()
        upper = np.broadcast_to(np.asarray(upper, dtype=float), (n_columns,)).copy()
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be a pair (lower, upper) of scalars or arrays of length {n_columns}, "
            f"got {bounds!r}."
        ) from exc
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper)) and np.all(upper > lower)):
        raise ValueError(f"{name} must be finite with upper > lower, got {bounds!r}.")
    return lower, upper


def _is(value, option):
    return isinstance(value, str) and value == option


def _warn_grid_end(name, grid, *released):
    """Warn when a released bound lies in an end cell of the public grid (the data may lie beyond it).

    A quantile beyond the grid is released as its end cell
    (:func:`~skdp.privacy.quantiles.private_quantiles`), so the box is then
    too narrow and the data is clipped to it.  Depends on the released
    values only (post-processing), and quotes the grid, not the data.
    """
    edge = grid[-2]
    if any(np.any(np.abs(np.asarray(r, dtype=float)) >= edge) for r in released):
        warnings.warn(
            f"DPSEPRegressor: {name}='auto' released a bound at the end of the public grid "
            f"(|value| >= {edge:.3g}): the data may extend beyond it and is clipped to the released box. "
            f"Declare {name} as (lower, upper) from the data's known domain, or rescale the data.",
            UserWarning,
            stacklevel=5,
        )


def bounds_box(bounds, name, a, private, bound_epsilon, rng, ledger):
    """``(lower, upper)`` a column-wise box from the declared, ``"auto"`` or ``"nonprivate"`` bounds.

    ``"auto"`` releases the :data:`~skdp.privacy.quantiles.AUTO_BOUNDS_QUANTILES` of every column
    by the exponential mechanism over the core's public log grid
    (:func:`~skdp.privacy.quantiles.private_box`, accounted at ``bound_epsilon``
    each); the non-private reference runs take the exact quantiles instead
    (they claim nothing).  ``"nonprivate"`` returns None (the caller
    standardises with the data's moments, warned).
    """
    if _is(bounds, "nonprivate"):
        return None
    if not _is(bounds, "auto"):
        return _check_bounds(bounds, name, a.shape[1])
    grid = check_grid(None)
    levels = feature_bound_levels if name == "feature_bounds" else auto_bound_levels
    q, widening = levels(a.shape[0], bound_epsilon, grid.size - 1)
    if private:
        lower, upper = private_box(
            rank_counts(a, grid), a.shape[0], (q, 1.0 - q), grid, bound_epsilon, rng, ledger
        )
        _warn_grid_end(name, grid, lower, upper)
    else:
        lower, upper = np.quantile(a, (q, 1.0 - q), axis=0)
    # Post-processing of the released quantiles (see auto_bound_levels).
    center, half = (lower + upper) / 2, (upper - lower) / 2 * widening
    half = np.where(half > 0, half, 1.0)
    return center - half, center + half


class Standardisation(NamedTuple):
    """The standardised data and the public box and scales that made it."""

    X: np.ndarray
    y: np.ndarray
    feature_bounds: np.ndarray | None
    target_bounds: np.ndarray | None
    x_center: np.ndarray
    x_scale: np.ndarray
    y_center: float
    y_scale: float


def standardise(
    X, y, feature_bounds, target_bounds, private, bound_epsilon, rng, ledger, pooled=False, histogram=None, epsilon=None
):
    """Clip to the bounds and map them to ``[-1, 1]``, or standardise with the data's moments.

    ``pooled``: ``feature_bounds="auto"`` is released as one shared box
    (:func:`pooled_feature_box`) instead of per column; ``histogram`` (a
    :class:`~skdp.privacy.quantiles.HistogramBounds` plan): by the core's
    histograms (:func:`histogram_feature_box`; ``epsilon``, the fit's, is
    quoted by its warning).
    """
    # Features first, then the target: the order of the bound releases.
    if histogram is not None and _is(feature_bounds, "auto"):
        feature_box = histogram_feature_box(X, private, histogram, rng, ledger, epsilon)
    elif pooled and _is(feature_bounds, "auto"):
        feature_box = pooled_feature_box(X, private, bound_epsilon, rng, ledger)
    else:
        feature_box = bounds_box(feature_bounds, "feature_bounds", X, private, bound_epsilon, rng, ledger)
    target_box = bounds_box(
        target_bounds, "target_bounds", y.reshape(-1, 1), private, bound_epsilon, rng, ledger
    )
    feature_bounds_ = target_bounds_ = None
    if feature_box is None:
        if private:
            warn_privacy_leak("feature_bounds", "the feature means and standard deviations")
        x_center, x_scale = _mean_std(X)
    else:
        lower, upper = feature_box
        feature_bounds_ = np.stack([lower, upper])
        x_center, x_scale = (lower + upper) / 2, (upper - lower) / 2
        # The core's box clip: the sites' sensitivity assumes nothing of
        # the data, but the standardised scale is what makes C meaningful.
        X = clip_box(X, lower, upper)
    if target_box is None:
        if private:
            warn_privacy_leak("target_bounds", "the target mean and standard deviation")
        y_center, y_scale = map(float, _mean_std(y))
    else:
        lower, upper = float(target_box[0][0]), float(target_box[1][0])
        target_bounds_ = np.array([lower, upper])
        y_center, y_scale = (lower + upper) / 2, (upper - lower) / 2
        y = clip_box(y, lower, upper)
    x_scale = np.where(x_scale > 0, x_scale, 1.0)
    y_scale = y_scale if y_scale > 0 else 1.0
    return Standardisation(
        (X - x_center) / x_scale,
        (y - y_center) / y_scale,
        feature_bounds_,
        target_bounds_,
        x_center,
        x_scale,
        y_center,
        y_scale,
    )


def warn_fallback(estimator, n_samples):
    """``UserWarning`` that the fit falls back to a constant (public quantities only).

    Issued when the ``"auto"`` bounds cannot be located at this ``n``
    and epsilon (:func:`_bounds_locatable`); names what to declare.
    Depends on ``n`` (public under replace-one), epsilon and
    ``bounds_budget`` only.
    """
    names = [name for name in ("feature_bounds", "target_bounds") if _is(getattr(estimator, name), "auto")]
    warnings.warn(
        f"DPSEPRegressor: {' and '.join(names)}='auto' cannot be released privately from "
        f"{n_samples} rows at epsilon={estimator.epsilon:g} (bounds_budget={estimator.bounds_budget:g}); "
        "the model falls back to predicting a private estimate of the target's centre (a constant). "
        f"Declare {' and '.join(names)} as (lower, upper) from the data's known domain, "
        "or raise epsilon or bounds_budget, to fit the network.",
        UserWarning,
        stacklevel=3,
    )


def constant_model(data, estimator, batch_size, rng, ledger):
    """The fitted attributes of the data-free fallback: a constant, the target's private centre.

    The centre is :func:`private_centre`'s (at most ``estimator.epsilon``,
    pure DP); the network is empty (``n_iter_ == 0``), the features are
    ignored, and the declared feature bounds, if any, are kept.
    """
    d = data.n_features
    target_bounds, feature_bounds = estimator.target_bounds, estimator.feature_bounds
    declared = None if _is(target_bounds, "auto") else _check_bounds(target_bounds, "target_bounds", 1)
    centre, box = private_centre(data.y, estimator.epsilon, declared, rng, ledger)
    noise_shape, noise_rate = (float(v) for v in estimator.noise_prior)
    feature_box = None
    if not _is(feature_bounds, "auto") and not _is(feature_bounds, "nonprivate"):
        feature_box = np.stack(_check_bounds(feature_bounds, "feature_bounds", d))
    return {
        "hidden_layer_sizes_": (),
        "coefs_mean_": [np.zeros((1, d + 1))],
        "coefs_var_": [np.zeros((1, d + 1))],
        "noise_shape_": noise_shape,
        "noise_rate_": noise_rate,
        "factor_natural_params_": np.zeros(2 * (d + 1) + 2),
        "feature_bounds_": feature_box,
        "x_center_": np.zeros(d),
        "x_scale_": np.ones(d),
        "target_bounds_": None if box is None else np.array(box, dtype=float),
        "y_center_": float(centre),
        "y_scale_": 1.0 if box is None else (box[1] - box[0]) / 2,
        "batch_size_": batch_size,
        "noise_multiplier_": None,
        "noise_scale_": None,
        "n_iter_": 0,
    }
