"""The default regressor's private target median: its fallback constant, or its trained net's starting output.

Where the public budget rule of :func:`skdp.nn._defaults.trains_default_net`
says that even the narrowest default net would be mostly noise (``n
epsilon`` small against ``sqrt(d + k)``), :class:`~skdp.nn.DPNeuralNetRegressor`
trains no net: it spends its budget (what the noisy count leaves) on one
private median per target column and predicts it for every row.  A
constant's squared error is the target's variance plus its distance to the
mean; a noisy net's adds the variance of its output noise, which at that
budget exceeds the target's own (the zoo's diabetes table at eps 0.3:
predictions with 1 to 3 times the target's standard deviation, R^2 -3.5;
:doc:`/nn`).

The median is Smith (2011)'s exponential-mechanism quantile over the core's
public grid (:func:`~skdp.privacy.quantiles.private_quantiles`; one
:class:`~skdp.privacy.PureDPEvent` per column, add/remove neighbours: a
cell's rank distance from ``N / 2`` moves by at most 1 when a record is
added or removed, ``N`` the rows' own number, which enters only the
mechanism's utility; :func:`release_target_median`).  Its epsilon is calibrated by
the core with the count in front (the staged filter, or the accountant
with a declared ``n_samples``), so the fit spends at most ``(epsilon,
delta)``.  Where even the median cannot be located (the core's rule,
:func:`~skdp.privacy.centring.can_locate_quantile`: ``n epsilon`` below
about 40 for the median's own epsilon) nothing is released and the
constant is 0, the centre of the public grid.

Where the default net trains, the same median is released at a small
share of the budget (:func:`centre_epsilon`, public ``n`` and ``epsilon``
only) and the output layer's bias starts at it
(:class:`~skdp.nn.DPNeuralNetRegressor`): the net then fits the target's
deviations from its centre, and the clipped, noisy steps are not spent
carrying the bias from 0 to the target's offset (make_friedman1's target
sits at about 3 standard deviations from 0; :doc:`/nn`, "The trained
net's starting centre").  The share is the smallest that locates a median
(:func:`median_locatable`), at least ``MIN_CENTRE_SHARE = 2 %`` of
epsilon (where that is more than locating needs, a finer median costs
little), and no centre is released where locating would take more than
``MAX_CENTRE_SHARE = 25 %``.
"""

from __future__ import annotations

import numpy as np

from ..privacy import ADD_REMOVE
from ..privacy.centring import AUTO_FAILURE, can_locate_quantile
from ..privacy.events import PureDPEvent
from ..privacy.quantiles import check_grid, private_quantiles, rank_counts, rank_margin

__all__ = [
    "centre_epsilon",
    "constant_events",
    "median_locatable",
    "release_target_median",
    "release_target_spread",
    "spread_n_epsilon",
]

#: Smallest share of epsilon the trained net's target centre takes (module docstring).
MIN_CENTRE_SHARE = 0.02
#: Largest share: where locating a median needs more, no centre is released.
MAX_CENTRE_SHARE = 0.25
#: Largest share of the trained net's target map (a centre and a spread per
#: column, :mod:`skdp.nn._target`): where locating both needs more, the
#: default regressor predicts the constant.  Half: without the map the
#: net's output noise has no known relation to the target's spread (R^2 -7
#: measured on a target of standard deviation 0.33), so the map is worth up
#: to as much as the steps.
MAX_MAP_SHARE = 0.5


def constant_events(n_outputs, epsilon):
    """The fallback's events: one pure ``epsilon``-DP median per target column (add/remove)."""
    return [PureDPEvent(count=int(n_outputs), neighbouring=ADD_REMOVE, epsilon=float(epsilon))]


def median_locatable(n_samples, epsilon):
    """Whether the exponential mechanism locates a median at ``epsilon`` over the signed grid (public only).

    The core's rule for the ``"auto"`` norm quantiles
    (:func:`~skdp.privacy.centring.can_locate_quantile`: the rank margin
    ``2 ln(K / 0.05) / (epsilon n)`` at most 1/2) over the ``K`` cells of
    the signed grid the median is drawn from.
    """
    return can_locate_quantile(n_samples, epsilon, check_grid(None).size - 1)


def centre_epsilon(n_samples, epsilon, n_outputs, max_share=MAX_CENTRE_SHARE):
    """Epsilon of each column's centre median for the trained default net, or None (public only).

    The smallest epsilon that locates a median over the signed grid
    (:func:`median_locatable`: ``4 ln(K / 0.05) / n``, about ``40 / n``),
    at least ``MIN_CENTRE_SHARE epsilon / k``; None where the ``k`` columns
    would take more than ``max_share`` of ``epsilon`` (basic
    composition of the ``k`` pure releases).  A function of the public
    size (declared or the noisy count), ``epsilon`` and the number of
    target columns only.
    """
    k = max(1, int(n_outputs))
    # rank_margin is proportional to 1 / epsilon: the margin at epsilon 1,
    # doubled, is the epsilon whose margin is the locating 1/2 (a hair
    # above it, so that the float comparison in median_locatable agrees).
    locate = 2.0 * rank_margin(n_samples, 1.0, check_grid(None).size - 1, AUTO_FAILURE) * (1.0 + 1e-9)
    per_column = max(MIN_CENTRE_SHARE * float(epsilon) / k, locate)
    return per_column if per_column * k <= max_share * float(epsilon) else None


def release_target_median(y, n_samples, epsilon, rng, ledger):
    """The private median of every column of ``y``, shape ``(n_outputs,)`` (module docstring).

    Parameters
    ----------
    y : ndarray of shape (n_rows, n_outputs)
    n_samples : float
        Public size (declared ``n_samples`` or the noisy count): only whether a
        median can be located at ``epsilon`` is read from it.
    epsilon : float
        Epsilon of each column's release.
    rng : numpy.random.Generator
    ledger : PrivacyLedger

    Returns
    -------
    ndarray of shape (n_outputs,)
        Released medians; zeros, with nothing released, when
        :func:`median_locatable` is False.
    """
    if not median_locatable(n_samples, epsilon):
        return np.zeros(y.shape[1])
    grid = check_grid(None)
    counts = rank_counts(np.asarray(y, dtype=np.float64), grid)
    # The rank target is half the rows' own number, inside the utility: a
    # cell's distance from the median, max(c_k - N/2, 0) + max(N/2 - c_{k+1}, 0),
    # moves by at most 1/2 + 1/2 when a record is added or removed (N and
    # each count move by at most 1 together), so the sensitivity stays 1 and
    # nothing but the mechanism's draw is released; the noisy count's
    # error (std 10 times the budget's multiplier) would otherwise move the
    # target rank by up to a sixth of the rows at eps 0.3.
    n_rows = y.shape[0]
    return private_quantiles(counts, n_rows, (0.5,), grid, epsilon, rng, ledger, neighbouring=ADD_REMOVE)[0]


def spread_n_epsilon(n_outputs):
    """The ``n epsilon`` below which :func:`centre_epsilon` of ``2 k`` medians is None (public only).

    The trained default net releases a centre and a spread per target
    column (:func:`release_target_spread`): ``2 k`` medians at the locating
    epsilon ``4 ln(K / 0.05) / n`` each, within ``MAX_MAP_SHARE`` of
    epsilon: ``n epsilon >= 16 k ln(K / 0.05)``, about 160 per target
    column.
    """
    locate = 2.0 * rank_margin(1, 1.0, check_grid(None).size - 1, AUTO_FAILURE)
    return 2 * max(1, int(n_outputs)) * locate / MAX_MAP_SHARE


def release_target_spread(y, centre, n_samples, epsilon, rng, ledger):
    """The private median of ``|y - centre|`` of every column (its median absolute deviation), shape ``(n_outputs,)``.

    The trained default net's target scale (``1.4826`` times it, the
    standard deviation of a normal target; :mod:`skdp.nn._target`).  The
    same release as :func:`release_target_median` on the deviations from
    the released (public) centre: one exponential-mechanism median per
    column over the core's grid, add/remove neighbours, ``N / 2`` inside
    the utility (one record moves one deviation), one
    :class:`~skdp.privacy.PureDPEvent` of ``epsilon`` per column.  Zeros,
    with nothing released, where :func:`median_locatable` is False.
    """
    deviations = np.abs(np.asarray(y, dtype=np.float64) - np.asarray(centre, dtype=np.float64))
    return release_target_median(deviations, n_samples, epsilon, rng, ledger)
