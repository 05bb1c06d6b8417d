"""A private centre and norm bound for ``data_norm="auto"``: clip bounds nobody has to know.

The estimators that clip rows to an L2 ball (:class:`~skdp.cluster.DPKMeans`,
:class:`~skdp.mixture.DPGaussianMixture`, :class:`~skdp.preprocessing.DPPCA`)
need a radius ``C`` the user may not know, and a ball centred at 0 wastes the
budget on an uncentred dataset (rows near ``(10, ..., 10)`` need
``C = 10 sqrt(d)`` although they spread over a far smaller ball).  With
``data_norm="auto"`` a declared share ``bounds_budget`` of the budget buys
three releases, in this order (:func:`private_centring`):

1. ``R0``: a private quantile of the raw row norms ``||x_i||``
   (:func:`~skdp.privacy.quantiles.private_norm_bound`'s exponential
   mechanism over the public log grid :func:`~skdp.privacy.quantiles.norm_grid`;
   one :class:`~skdp.privacy.PureDPEvent`);
2. ``c``: a noisy mean of the rows clipped to ``R0``: the sum has L2
   sensitivity ``2 R0`` under replace-one neighbours (``||a - b|| <= 2 R0``
   for two clipped rows; L1 ``2 sqrt(d) R0``), released by the Gaussian
   mechanism (Laplace when ``delta == 0``), divided by the public ``n``
   (post-processing);
3. ``R``: the same private quantile of the centred norms ``||x_i - c||``
   (``c`` is released, hence public, so each rank count still moves by at
   most 1).

The estimator then fits on ``x - c`` clipped to ``R`` exactly as with a
declared ``data_norm=R``, and reports its parameters in the original
coordinates (``+ c``).  An estimator whose data is declared centred at 0
(:class:`~skdp.preprocessing.DPPCA`'s ``centered=True``) skips 1 and 2
(``centre=False``): ``c = 0`` and the whole share goes to ``R``.

**Which quantile.**  The exponential mechanism picks a cell at distance
``u`` (in records) from the target rank with weight ``exp(-eps u / 2)``.
Every cell of the grid above the largest norm is ``n (1 - q)`` records away
from the ``q``-quantile, and a wide public grid has hundreds of them, so a
quantile too close to 1 at a small ``eps n`` is released as a huge bound (a
cell far above the data).  :func:`auto_norm_quantile` therefore takes the
highest quantile whose ``n (1 - q)`` margin keeps the total weight of those
cells below ``AUTO_FAILURE`` (5 %) of the correct cell's:
``n (1 - q) >= 2 ln(K / 0.05) / eps`` for ``K`` cells, within
``[AUTO_MIN_QUANTILE, AUTO_MAX_QUANTILE] = [0.5, 0.99]``.  A function of the
public ``n``, the plan's epsilon and the grid, fixed a priori (never tuned
on an evaluation set): large data clip at the 99th percentile, small data
at a lower one rather than at a bound far above the data.  Below
``epsilon n = 4 ln(K / 0.05)`` not even the median can be located
(:func:`can_locate_quantile`); the fit then warns (a ``UserWarning`` about
the public ``n`` and epsilon) that a bound should be declared.

**Budget.**  The bounds' releases are calibrated to ``(bounds_budget *
epsilon, bounds_budget * delta)`` by the basic theorem
(:func:`calibrate_auto_bounds`): each quantile takes ``QUANTILE_SHARE / 2``
of that epsilon (pure DP, exact under basic composition), and the centre's
Gaussian the rest at the share's delta (its exact privacy profile).  Basic
composition has no floor at small epsilon, unlike an RDP conversion (whose
``log(1 / delta) / (alpha - 1)`` term at the largest order exceeds a share of
0.02 at ``delta = 1e-6``), so the share is met at any budget.  The estimator's own plan is then
calibrated with the bounds' events in front
(:func:`calibrate_after_bounds`), so the whole fit composes to at most
``(epsilon, delta)`` under its accountant and the estimator gets at least
what ``(1 - bounds_budget)`` of the budget would buy (more under a
sublinear composition).  Every event is public: a dry run on zeros records
the same events.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from .._user_warnings import _user_stacklevel
from .calibration import calibrate_noise_multiplier
from .clipping import clip_rows, row_norms
from .events import REPLACE_ONE, GaussianEvent, LaplaceEvent, PureDPEvent
from .mechanisms import GaussianMechanism, LaplaceMechanism
from .mechanisms.selection import ExponentialMechanism
from .quantiles import RANK_SENSITIVITY, _cell_distances, norm_grid, rank_counts, rank_margin

__all__ = [
    "AUTO_FAILURE",
    "AUTO_MAX_QUANTILE",
    "AUTO_MIN_QUANTILE",
    "DEFAULT_BOUNDS_BUDGET",
    "QUANTILE_SHARE",
    "AutoBounds",
    "auto_norm_quantile",
    "calibrate_after_bounds",
    "auto_bounds_plan",
    "calibrate_auto_bounds",
    "can_locate_quantile",
    "centred_norm_counts",
    "clipped_sum",
    "private_centring",
]

#: Default share of the budget the ``"auto"`` bounds take.
DEFAULT_BOUNDS_BUDGET = 0.1

#: Share of the bounds' epsilon spent on the two norm quantiles (half each);
#: the rest buys the centre.  Both quantiles and the centre matter about
#: equally: a bad ``R`` clips or inflates every later release, a bad ``c``
#: inflates ``R``.
QUANTILE_SHARE = 0.5

#: Largest weight the cells above the data may have together, relative to
#: the correct cell (the chance, at most, of releasing a bound above every norm).
AUTO_FAILURE = 0.05

#: Range of the quantile :func:`auto_norm_quantile` picks.
AUTO_MIN_QUANTILE, AUTO_MAX_QUANTILE = 0.5, 0.99


def can_locate_quantile(n_samples, epsilon, n_cells=None):
    """Whether :func:`auto_norm_quantile`'s margin fits below the median (public quantities only).

    ``2 ln(K / AUTO_FAILURE) / (epsilon n) <= 1 / 2``: otherwise even the
    median has cells outside the data within reach of the mechanism, on
    both sides, and the released bound is likely far from every norm.
    """
    if n_cells is None:
        n_cells = norm_grid().size - 1
    return rank_margin(n_samples, epsilon, n_cells, AUTO_FAILURE) <= 0.5


def auto_norm_quantile(n_samples, epsilon, n_cells=None):
    """The norm quantile of ``"auto"``: the highest whose margin keeps the bound near the data.

    ``q = 1 - 2 ln(K / AUTO_FAILURE) / (epsilon n)`` for ``K`` grid cells,
    clipped to ``[AUTO_MIN_QUANTILE, AUTO_MAX_QUANTILE]`` (module docstring).
    Public: ``n`` (replace-one neighbours), the plan's epsilon and the grid.
    """
    if n_cells is None:
        n_cells = norm_grid().size - 1
    margin = rank_margin(n_samples, epsilon, n_cells, AUTO_FAILURE)
    return float(min(max(1.0 - margin, AUTO_MIN_QUANTILE), AUTO_MAX_QUANTILE))


@dataclass(frozen=True)
class AutoBounds:
    """The public plan of the ``"auto"`` bounds: what is released, at which cost.

    The events depend on these parameters alone; the quantile (a function of
    the public ``n``, :func:`auto_norm_quantile`) is fixed at fit time.

    Parameters
    ----------
    quantile_epsilon : float
        Epsilon of each exponential mechanism.
    centre : bool
        Whether a centre is released (else ``c = 0`` and one quantile).
    centre_multiplier : float or None
        Noise multiplier (std or scale over sensitivity) of the centre's sum.
    gaussian : bool
        Gaussian noise on the centre (else Laplace, for ``delta == 0``).
    neighbouring : str
    """

    quantile_epsilon: float
    centre: bool
    centre_multiplier: float | None
    gaussian: bool
    neighbouring: str = REPLACE_ONE

    def events(self):
        """The events the bounds record, in order of release (public)."""
        nb = self.neighbouring
        if not self.centre:
            return [PureDPEvent(count=1, neighbouring=nb, epsilon=self.quantile_epsilon)]
        event = GaussianEvent if self.gaussian else LaplaceEvent
        return [
            PureDPEvent(count=2, neighbouring=nb, epsilon=self.quantile_epsilon),
            event(count=1, neighbouring=nb, noise_multiplier=self.centre_multiplier),
        ]

    def centre_mechanism(self, bound, n_features):
        """The mechanism of the centre's sum of rows clipped to ``bound``.

        L2 sensitivity ``2 R0`` (Gaussian) or L1 ``2 sqrt(d) R0`` (Laplace):
        replacing one clipped row ``a`` by ``b`` moves the sum by ``b - a``.
        """
        if self.gaussian:
            sensitivity = 2.0 * bound
            return GaussianMechanism(sensitivity, self.centre_multiplier * sensitivity, self.neighbouring)
        sensitivity = 2.0 * math.sqrt(n_features) * bound
        return LaplaceMechanism(sensitivity, self.centre_multiplier * sensitivity, self.neighbouring)


def calibrate_auto_bounds(
    epsilon,
    delta,
    bounds_budget=DEFAULT_BOUNDS_BUDGET,
    *,
    centre=True,
    neighbouring=REPLACE_ONE,
    secure_noise=False,
):
    """The :class:`AutoBounds` plan costing ``(bounds_budget * epsilon, bounds_budget * delta)``.

    Each quantile gets ``QUANTILE_SHARE / 2`` of the share's epsilon (all of
    it without a centre); the centre's noise multiplier is the smallest
    whose basic composition with the quantiles meets the share (the core's
    calibration; module docstring).  Gaussian noise when
    ``delta > 0``, Laplace otherwise.
    """
    eps_b, delta_b = bounds_budget * epsilon, bounds_budget * delta
    gaussian = delta > 0
    if not centre:
        return AutoBounds(eps_b, False, None, gaussian, neighbouring)
    eps_q = QUANTILE_SHARE * eps_b / 2

    def events(z):
        return AutoBounds(eps_q, True, z, gaussian, neighbouring).events()

    z = calibrate_noise_multiplier(events, eps_b, delta_b, "basic", neighbouring, secure_noise=secure_noise)
    return AutoBounds(eps_q, True, z, gaussian, neighbouring)


def auto_bounds_plan(
    data_norm, epsilon, delta, bounds_budget, *, centre=True, neighbouring=REPLACE_ONE, secure_noise=False
):
    """The :class:`AutoBounds` plan of an estimator's ``data_norm="auto"``, else None.

    The one place the estimators with a ``data_norm`` parameter
    (:class:`~skdp.cluster.DPKMeans`, :class:`~skdp.mixture.DPGaussianMixture`,
    :class:`~skdp.preprocessing.DPPCA`) turn their hyperparameters into the
    bounds' plan (:func:`calibrate_auto_bounds`); a declared bound or
    ``"nonprivate"`` releases nothing.
    """
    if not (isinstance(data_norm, str) and data_norm == "auto"):
        return None
    return calibrate_auto_bounds(
        float(epsilon),
        float(delta),
        float(bounds_budget),
        centre=centre,
        neighbouring=neighbouring,
        secure_noise=secure_noise,
    )


def calibrate_after_bounds(make_events, bounds, epsilon, delta, composition, *args, **kwargs):
    """The estimator's noise multiplier with the bounds' events in front: the fit composes to the request.

    ``calibrate_noise_multiplier`` of ``bounds.events() + make_events(z)``;
    ``bounds=None`` (declared bounds) calibrates ``make_events`` alone.
    """
    if bounds is None:
        return calibrate_noise_multiplier(make_events, epsilon, delta, composition, *args, **kwargs)
    prefix = bounds.events()
    return calibrate_noise_multiplier(
        lambda z: prefix + list(make_events(z)), epsilon, delta, composition, *args, **kwargs
    )


def centred_norm_counts(chunk, centre, grid):
    """Rank counts ``#{i : ||x_i - c|| <= b_k}`` of a chunk, shape (1, n_grid): summable over chunks."""
    norms = row_norms(chunk - centre)
    norms = np.where(np.isfinite(norms), norms, np.inf)
    return rank_counts(norms.reshape(-1, 1), grid)


def clipped_sum(chunk, bound):
    """``sum_i clip(x_i, bound)`` of a chunk (the core's clipping rule): summable over chunks."""
    return clip_rows(chunk, bound).sum(axis=0)


def _norm_bound(counts, n_samples, quantile, epsilon, grid, rng, ledger, neighbouring=REPLACE_ONE):
    """:func:`~skdp.privacy.quantiles.private_norm_bound` from rank counts (chunked or not).

    Each rank count moves by at most 1 under either relation (the target
    ``quantile * n_samples`` is public), so the sensitivity is the same.
    """
    mechanism = ExponentialMechanism(epsilon, RANK_SENSITIVITY, neighbouring)
    distance = _cell_distances(counts[0], n_samples, quantile * n_samples)
    return float(grid[1:][mechanism.select(-distance, rng, ledger)])


def private_centring(reduce, n_samples, n_features, bounds, rng, ledger, *, scale_quantile=None):
    """Release ``(c, R)``: a private centre and a private bound on ``||x - c||`` (module docstring).

    Parameters
    ----------
    reduce : callable
        ``reduce(fn, *params)`` returns the sum over the data of
        ``fn(chunk, *params)`` (the whole array in memory, or
        :meth:`skdp._chunks.ChunkedData.map_reduce`): the same releases
        either way.
    n_samples, n_features : int
        Public size.
    bounds : AutoBounds
    rng : numpy.random.Generator
    ledger : PrivacyLedger
    scale_quantile : float in (0, 1) or None, default=None
        The quantile of ``||x - c||`` that ``R`` estimates; None: the
        ``"auto"`` level (:func:`auto_norm_quantile`, which rises with
        ``epsilon n``).  A fixed level suits a caller that divides by ``R``
        (a scale, not a clip bound: the DP nets' ``scale_inputs``), whose
        inputs would otherwise shrink as the budget grows.  The clip bound
        ``R0`` of the centre's sum keeps the ``"auto"`` level either way.
        The events are the same (one exponential mechanism per quantile).

    Returns
    -------
    centre : ndarray of shape (n_features,)
        Released (zeros when ``bounds.centre`` is False).
    bound : float
        Released, positive.
    """
    if scale_quantile is not None and not 0.0 < float(scale_quantile) < 1.0:
        raise ValueError(f"scale_quantile must be in (0, 1) or None, got {scale_quantile!r}.")
    grid = norm_grid()
    eps = bounds.quantile_epsilon
    quantile = auto_norm_quantile(n_samples, eps, grid.size - 1)
    if not can_locate_quantile(n_samples, eps, grid.size - 1):
        # A statement about the public n and the plan's epsilon, not about the data.
        warnings.warn(
            f'data_norm="auto" cannot locate a norm quantile with n_samples={int(n_samples)} at '
            f"epsilon={eps:.3g} per quantile: the released bound is likely far from the data. "
            "Declare data_norm from public knowledge, or raise epsilon or bounds_budget.",
            UserWarning,
            stacklevel=_user_stacklevel(),
        )
    centre = np.zeros(n_features)
    if bounds.centre:
        counts = reduce(centred_norm_counts, centre, grid)
        raw = _norm_bound(counts, n_samples, quantile, eps, grid, rng, ledger, bounds.neighbouring)
        total = bounds.centre_mechanism(raw, n_features).release(reduce(clipped_sum, raw), rng, ledger)
        # Post-processing: the mean of rows clipped to R0 lies in that ball.
        centre = clip_rows((total / n_samples)[None, :], raw)[0]
    scale_level = quantile if scale_quantile is None else float(scale_quantile)
    counts = reduce(centred_norm_counts, centre, grid)
    bound = _norm_bound(counts, n_samples, scale_level, eps, grid, rng, ledger, bounds.neighbouring)
    return centre, bound
