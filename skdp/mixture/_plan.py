"""The public release plan of DP-EM: what a fit releases, and at which noise.

Everything here is a function of hyperparameters and of the public number of
columns ``d``; none of it reads the data.  :class:`EMPlan` lists the releases
of a whole fit (Park et al. 2017, Alg. 1: ``J`` iterations of the counts, the
first moments and the second moments, plus the histogram start of
:mod:`skdp.mixture._init`), shares the budget between the statistics
(``budget_split``) and gives the events the core's calibrator composes
(:func:`skdp.privacy.calibration.calibrate_noise_multiplier`).  The derivation
of every sensitivity and share is in the user guide (:doc:`/mixture`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..privacy import GaussianEvent, LaplaceEvent
from ..privacy.calibration import calibrate_noise_multiplier
from ._init import INIT_DIMS
from ._m_step import noise_floor
from ._moments import centre_optimal_count_share, noise_weights

#: Iterations of ``max_iter="auto"`` after the histogram start and after any
#: other start (Park et al.'s data-independent start needs several; see the
#: ``max_iter`` parameter of :class:`~skdp.mixture.DPGaussianMixture`).
AUTO_ITER_HISTOGRAM, AUTO_ITER_RANDOM = 1, 5

#: Default share of the budget the ``init_params="histogram"`` start takes.
DEFAULT_INIT_BUDGET = 0.1


def resolution_ratio(z_second, n_samples, n_features, n_components, covariance_type, family, joint):
    """Noise floor of a component's variance over the variance a component of ``K`` can have (public).

    The floor (:func:`~skdp.mixture._m_step.noise_floor`) of a component
    holding ``n / K`` of the rows (all ``n`` rows for the tied model's shared
    covariance) against ``K^(-2/d) / (d + 2)``: the per-coordinate variance
    of the uniform distribution on the unit ball (``1 / (d + 2)``), the
    widest data the fit sees, split into ``K`` equal cells (each of radius
    ``K^(-1/d)``).  Above 1 the noise alone is at least as wide as such a
    component: ``K`` components cannot be told apart from the noise, and a
    fit with fewer wins (the user guide's measurements).  A function of
    ``n``, ``d``, ``K`` and the calibrated multiplier only.
    """
    tied = covariance_type == "tied"
    den = float(n_samples) if tied else n_samples / n_components
    floor = noise_floor(
        z_second,
        n_features,
        np.array([den]),
        family=family,
        covariance_type=covariance_type,
        joint=joint,
        n_components=n_components,
        reg_covar=0.0,
        tied=tied,
    )[0]
    return float(floor) * (n_features + 2.0) * n_components ** (2.0 / n_features)


def resolvable_components(z_second, n_samples, n_features, n_components, covariance_type, family, joint):
    """The largest ``K' <= K`` whose :func:`resolution_ratio` is at most 1, else 1 (public).

    ``z_second`` is the second moments' multiplier of the ``K``-component
    plan: with joint releases it does not depend on ``K``.
    """
    for k in range(n_components, 1, -1):
        if resolution_ratio(z_second, n_samples, n_features, k, covariance_type, family, joint) <= 1.0:
            return k
    return 1


def resolve_mean_mechanism(mean_mechanism, delta):
    """``mean_mechanism`` with ``"auto"`` resolved.

    Parameters
    ----------
    mean_mechanism : {"auto", "laplace", "gaussian"}
        The hyperparameter (never rewritten: resolved at fit time).
    delta : float
        The fit's ``delta``.

    Returns
    -------
    mechanism : {"laplace", "gaussian"}
        ``"gaussian"`` if ``delta > 0`` and ``"laplace"`` otherwise (pure DP,
        which the Gaussian mechanism cannot give), unless forced.
    """
    if mean_mechanism == "auto":
        return "gaussian" if delta > 0 else "laplace"
    return mean_mechanism


def mechanism_families(mean_mechanism, delta):
    """Event classes of the (weights and means, second moments) releases.

    Parameters
    ----------
    mean_mechanism : {"auto", "laplace", "gaussian"}
        Noise of the weights and means (Park et al.'s CDPlap and CDPgau).
    delta : float
        The second moments get Gaussian noise when ``delta > 0`` ("Analyze
        Gauss", Dwork et al. 2014) and Laplace noise under pure DP.

    Returns
    -------
    first, second : type
        :class:`~skdp.privacy.LaplaceEvent` or :class:`~skdp.privacy.GaussianEvent`.
    """
    first = LaplaceEvent if resolve_mean_mechanism(mean_mechanism, delta) == "laplace" else GaussianEvent
    second = GaussianEvent if delta > 0 else LaplaceEvent
    return first, second


def uses_histogram_init(init_params, means_init, n_features):
    """Whether the fit releases a histogram start.

    ``"histogram"``, or ``"auto"`` with ``d <= 2``; never with ``means_init``.
    ``"auto"`` is a rule on the public ``d``: in one or two dimensions the
    grid is the data's own space; beyond, the histogram of a random 2-D
    projection merges clusters that overlap in it, and one or two iterations
    from such a start do worse than Park et al.'s random start with five (the
    user guide's measurements).

    Parameters
    ----------
    init_params : {"auto", "histogram", "random"}
    means_init : array-like or None
    n_features : int

    Returns
    -------
    histogram : bool
    """
    if means_init is not None:
        return False
    return init_params == "histogram" or (init_params == "auto" and n_features <= INIT_DIMS)


def n_iter_rule(max_iter, histogram_init):
    """EM iterations: ``max_iter``, or the ``"auto"`` rule.

    Parameters
    ----------
    max_iter : int or "auto"
    histogram_init : bool
        Whether the fit starts from the histogram (:func:`uses_histogram_init`).

    Returns
    -------
    n_iter : int
        ``AUTO_ITER_HISTOGRAM`` after the histogram start, ``AUTO_ITER_RANDOM``
        after any other (a public rule; the user guide's measurements).
    """
    if max_iter != "auto":
        return int(max_iter)
    return AUTO_ITER_HISTOGRAM if histogram_init else AUTO_ITER_RANDOM


def check_budget_shares(data_norm, init_budget, bounds_budget, init_params, means_init, n_features=None):
    """Refuse ``init_budget + bounds_budget >= 1`` when the fit would spend both.

    Public: hyperparameters and the number of columns only, so the check runs
    before the budget is held (a failed fit is not charged).

    Parameters
    ----------
    data_norm : float, "auto" or "nonprivate"
        The bounds are released only for ``"auto"``.
    init_budget, bounds_budget : float
        Shares of the budget of the histogram start and of the bounds.
    init_params : {"auto", "histogram", "random"}
    means_init : array-like or None
    n_features : int or None, default=None
        None before the data's shape is known: only ``"histogram"`` is sure
        to release the start.

    Raises
    ------
    ValueError
        If both are spent and their shares leave nothing for the EM iterations.
    """
    auto = isinstance(data_norm, str) and data_norm == "auto"
    if not auto or init_budget + bounds_budget < 1:
        return
    histogram = (
        means_init is None and init_params == "histogram"
        if n_features is None
        else uses_histogram_init(init_params, means_init, n_features)
    )
    if histogram:
        raise ValueError(
            "init_budget + bounds_budget must be below 1 (the EM iterations need the rest), "
            f"got {init_budget!r} + {bounds_budget!r}."
        )


@dataclass(frozen=True, eq=False)
class EMPlan:
    """The releases of one DP-EM fit, from hyperparameters and ``d`` only.

    Parameters
    ----------
    n_features : int
        The public number of columns ``d``.
    n_components : int
        ``K``.
    covariance_type : {"full", "tied", "spherical"}
    component_releases : {"joint", "separate"}
        One release per statistic per iteration, or one per component
        (Park et al.'s ``2K + 1``, footnote 7).
    budget_split : {"auto", "equal"} or array-like of shape (3,)
        Shares of (counts, first moments, second moments).
    first_family, second_family : type
        Event classes of the weights/means and of the second moments
        (:func:`mechanism_families`).
    n_iter : int
        EM iterations ``J``: ``max_iter`` or the ``"auto"`` rule.
    histogram_init : bool
        Whether the histogram start is released (:func:`uses_histogram_init`).
    neighbouring : str
        The neighbouring relation of the events.
    """

    n_features: int
    n_components: int
    covariance_type: str
    component_releases: str
    budget_split: object
    first_family: type
    second_family: type
    n_iter: int
    histogram_init: bool
    neighbouring: str

    @classmethod
    def for_estimator(cls, estimator, n_features):
        """The plan of a :class:`~skdp.mixture.DPGaussianMixture`'s hyperparameters at ``n_features`` columns."""
        first, second = mechanism_families(estimator.mean_mechanism, estimator.delta)
        histogram = uses_histogram_init(estimator.init_params, estimator.means_init, n_features)
        if estimator.n_components == 1 and estimator.init_params == "auto":
            # One component needs no start and one iteration (EM is exact after one M-step).
            histogram = False
            n_iter = 1 if estimator.max_iter == "auto" else int(estimator.max_iter)
        else:
            n_iter = n_iter_rule(estimator.max_iter, histogram)
        return cls(
            n_features=n_features,
            n_components=estimator.n_components,
            covariance_type=estimator.covariance_type,
            component_releases=estimator.component_releases,
            budget_split=estimator.budget_split,
            first_family=first,
            second_family=second,
            n_iter=n_iter,
            histogram_init=histogram,
            neighbouring=estimator._neighbouring,
        )

    def with_components(self, n_components, max_iter):
        """The same plan with fewer components (the small-``n epsilon`` fallback).

        One component needs one iteration (its responsibilities are all 1,
        whatever the start: EM is exact after one M-step) and no start, so
        ``max_iter="auto"`` runs 1 and no histogram start is released.
        """
        if n_components == 1:
            n_iter = 1 if max_iter == "auto" else int(max_iter)
            return replace(self, n_components=1, n_iter=n_iter, histogram_init=False)
        return replace(self, n_components=n_components)

    @property
    def joint(self):
        """Whether the K components are stacked into one release per statistic."""
        return self.component_releases == "joint"

    def releases_per_iteration(self):
        """(releases of the first family, releases of the second family) per iteration."""
        if self.joint:
            return 2, 1  # counts, stacked means | stacked second moments
        return 1 + self.n_components, self.n_components  # the paper's 2K + 1 (footnote 7)

    def releases_per_fit(self):
        """Releases of (counts, first moments, second moments) over the whole fit.

        The tied model's second moment ``sum_i x_i x_i^T`` does not depend on
        the responsibilities: it is released once, in the first iteration,
        and the released value is reused (post-processing).  One component's
        count is the public ``n`` (every responsibility is 1): it is not
        released, and its share goes to the moments.
        """
        n_first, n_second = self.releases_per_iteration()
        j = self.n_iter
        counts = 0 if self.n_components == 1 else j
        return counts, j * (n_first - 1), 1 if self.covariance_type == "tied" else j * n_second

    def budget_shares(self):
        """Shares of the budget spent on (counts, first moments, second moments).

        ``"equal"``: one share per release.  ``"auto"``: the counts get the
        share that minimises the error of a released mean
        (:func:`~skdp.mixture._moments.centre_optimal_count_share`), the rule
        of :class:`~skdp.cluster.DPKMeans`.  Three positive numbers are used
        as given.

        Raises
        ------
        ValueError
            If ``budget_split`` is neither a known string nor three positive finite shares.
        """
        releases = self.releases_per_fit()
        if isinstance(self.budget_split, str):
            if self.budget_split == "equal":
                return releases
            exponent = 1 if self.first_family is LaplaceEvent else 2
            share = centre_optimal_count_share(self.n_features, exponent)
            return (share * releases[0], releases[1], releases[2])
        shares = np.asarray(self.budget_split, dtype=float)
        if shares.shape != (3,) or not np.all(np.isfinite(shares)) or np.any(shares <= 0):
            raise ValueError(
                "budget_split must be 'equal', 'auto' or three positive finite shares "
                f"(counts, means, second moments), got {self.budget_split!r}."
            )
        return tuple(shares)

    def noise_weights(self):
        """Noise multipliers of (counts, first moments, second moments) relative to ``z``."""
        exponents = [
            1 if f is LaplaceEvent else 2 for f in (self.first_family, self.first_family, self.second_family)
        ]
        return noise_weights(self.budget_shares(), self.releases_per_fit(), exponents)

    def events(self, z):
        """Events of the EM iterations at noise multiplier ``z``: every release of every iteration."""
        families = (self.first_family, self.first_family, self.second_family)
        return [
            family(count=count, neighbouring=self.neighbouring, noise_multiplier=z * w)
            for family, count, w in zip(families, self.releases_per_fit(), self.noise_weights(), strict=True)
            if count > 0
        ]

    def init_events(self, z):
        """Events of the histogram start at noise multiplier ``z`` (:mod:`skdp.mixture._init`).

        One release (the histogram) for ``d <= 2``, two (histogram and part
        sums) otherwise; the family of the weights' and means' noise.  Public:
        a function of ``d`` and hyperparameters.
        """
        if not self.histogram_init:
            return []
        count = 1 if self.n_features <= INIT_DIMS else 2
        return [self.first_family(count=count, neighbouring=self.neighbouring, noise_multiplier=z)]

    def calibrate_init(self, init_budget, epsilon, delta, composition, secure_noise=False):
        """Noise multiplier of the histogram start: its events cost ``init_budget`` of the budget.

        Parameters
        ----------
        init_budget : float in (0, 1)
            Share of ``(epsilon, delta)`` the start spends.
        epsilon, delta : float
            Budget of the whole fit.
        composition : str
            Accountant of the calibration.
        secure_noise : bool, default=False
            Whether the releases are sampled on a grid.

        Returns
        -------
        z : float or None
            None when the fit releases no histogram start.
        """
        if not self.histogram_init:
            return None
        return calibrate_noise_multiplier(
            self.init_events,
            float(init_budget * epsilon),
            float(init_budget * delta),
            composition,
            self.neighbouring,
            secure_noise=secure_noise,
        )
