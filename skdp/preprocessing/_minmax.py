"""DPMinMaxScaler: min-max scaling from private quantiles, with no bounds to declare."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import FLOAT_DTYPES, check_is_fitted, validate_data

from ..base import PRIVACY_PARAMETER_CONSTRAINTS, DPEstimatorMixin, PrivacyPlan, private_fit_context
from ..privacy import (
    DEFAULT_COMPOSITION,
    REPLACE_ONE,
    ExponentialMechanism,
    PureDPEvent,
    calibrate_noise_multiplier,
)

#: Candidates per decade of the default grid.
GRID_POINTS_PER_DECADE = 50

#: Smallest and largest magnitude of the default grid (powers of ten).
GRID_DECADES = (-6, 6)

#: Change of a rank count ``#{i : x_ij <= b}`` when one record is replaced:
#: the old record leaves at most one count, the new one enters at most one,
#: and a count they both fall in is unchanged, so it moves by at most 1.
RANK_SENSITIVITY = 1.0


def default_grid():
    """The public candidate values of a quantile: 0 and ``+-10^k`` on a log grid.

    ``GRID_POINTS_PER_DECADE`` points per decade from ``1e-6`` to ``1e6`` on
    each side of 0 (1,203 points, consecutive ratio ``10^(1/50)``, 4.7 %): any
    column whose quantiles lie within ``[-1e6, 1e6]`` is located to within
    4.7 % of its magnitude (or to 1e-6 of 0) without a bound being declared.
    A quantile outside that range is released as the grid's end.
    """
    lo, hi = GRID_DECADES
    positive = np.logspace(lo, hi, (hi - lo) * GRID_POINTS_PER_DECADE + 1)
    return np.concatenate([-positive[::-1], [0.0], positive])


def check_grid(grid):
    """The candidate grid as a strictly increasing finite 1-D float array (``grid`` parameter)."""
    if grid is None:
        return default_grid()
    try:
        values = np.asarray(grid, dtype=float)
    except (TypeError, ValueError):
        values = None
    if (
        values is None
        or values.ndim != 1
        or values.size < 2
        or not np.all(np.isfinite(values))
        or not np.all(np.diff(values) > 0)
    ):
        raise ValueError("grid must be None or a strictly increasing 1-D array of at least 2 finite numbers.")
    return values


def check_quantiles(quantiles):
    """``(q_low, q_high)`` with ``0 <= q_low < q_high <= 1`` (``quantiles`` parameter)."""
    try:
        low, high = (float(q) for q in quantiles)
    except (TypeError, ValueError):
        raise ValueError("quantiles must be a pair (q_low, q_high) of numbers in [0, 1].") from None
    if not (0.0 <= low < high <= 1.0):
        raise ValueError("quantiles must satisfy 0 <= q_low < q_high <= 1.")
    return low, high


def rank_counts(chunk, grid):
    """``#{i : x_ij <= grid_k}`` for every column ``j`` and candidate ``k``: shape (n_features, n_grid).

    Counts of the chunks add up to those of the whole data (a map step of
    :meth:`skdp._chunks.ChunkedData.map_reduce`).
    """
    ordered = np.sort(chunk, axis=0)
    return np.stack(
        [np.searchsorted(ordered[:, j], grid, side="right") for j in range(chunk.shape[1])]
    ).astype(float)


def quantile_epsilon(epsilon, delta, n_releases, composition, secure_noise=False):
    """Per-quantile epsilon of ``n_releases`` exponential mechanisms that compose to ``(epsilon, delta)``.

    Asked of the core's calibration: the plan is ``n_releases`` pure-DP
    events of epsilon ``1 / z``, costed by ``composition`` (under ``"basic"``
    this is ``epsilon / n_releases``; under ``"pld"`` with ``delta > 0`` the
    privacy-loss-distribution composition gives each quantile more).
    """

    def events(z):
        return [PureDPEvent(count=n_releases, neighbouring=REPLACE_ONE, epsilon=1.0 / z)]

    z = calibrate_noise_multiplier(events, epsilon, delta, composition, secure_noise=secure_noise)
    return 1.0 / z


def private_quantiles(counts, n_samples, quantiles, grid, epsilon, rng, ledger):
    """Private quantiles of every column by the exponential mechanism over the cells of a public grid.

    Smith (2011)'s exponential-mechanism quantile (as recalled by
    Gillenwater, Joseph & Kulesza 2021, Section 3) with the cells
    ``[b_k, b_{k+1}]`` of a public ``grid`` as candidates instead of the gaps
    between data points (which are not public).  With rank counts
    ``c_k = #{i : x_ij <= b_k}``, cell ``k`` has utility
    ``u_k = -dist(q n, [c_k, c_{k+1}])``: 0 for the cells the ``q``-quantile
    can lie in, minus the number of records it is away otherwise.  Each
    ``c_k`` moves by at most :data:`RANK_SENSITIVITY` when one record is
    replaced (``n`` is public under replace-one neighbours), hence so does
    ``u_k``.  One cell is drawn with probability proportional to
    ``exp(epsilon u_k / 2)`` (McSherry & Talwar 2007), one
    :class:`~skdp.privacy.PureDPEvent` per quantile and column, and its
    midpoint is released (post-processing: Smith draws a point uniformly
    in the interval; the midpoint halves the worst-case error within it).

    Parameters
    ----------
    counts : ndarray of shape (n_features, n_grid)
        :func:`rank_counts` of the data.
    n_samples : int
    quantiles : sequence of float
    grid : ndarray of shape (n_grid,)
    epsilon : float
        Epsilon of each release.
    rng : numpy.random.Generator
    ledger : PrivacyLedger

    Returns
    -------
    ndarray of shape (len(quantiles), n_features)
    """
    mechanism = ExponentialMechanism(epsilon, RANK_SENSITIVITY)
    midpoints = (grid[:-1] + grid[1:]) / 2
    out = np.empty((len(quantiles), counts.shape[0]))
    for i, q in enumerate(quantiles):
        target = q * n_samples
        for j in range(counts.shape[0]):
            below, above = counts[j, :-1], counts[j, 1:]
            distance = np.maximum(below - target, 0.0) + np.maximum(target - above, 0.0)
            out[i, j] = midpoints[mechanism.select(-distance, rng, ledger)]
    return out


class DPMinMaxScaler(DPEstimatorMixin, OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Differentially private min-max scaling from private quantiles; no bounds needed.

    scikit-learn's :class:`~sklearn.preprocessing.MinMaxScaler` maps each
    column's minimum and maximum to ``feature_range``.  A minimum or maximum
    cannot be released privately without a declared bound (one record moves
    it arbitrarily far), so this scaler maps two private *quantiles* of each
    column (``quantiles``, the 1st and 99th percentiles by default) instead.
    Each is drawn by the exponential mechanism over a public grid of
    candidates (:func:`private_quantiles`: Smith 2011; Gillenwater, Joseph &
    Kulesza 2021), so no bound on the data is declared and none is read off
    the data: a grid of 0 and ``+-10^k`` for ``k`` in ``[-6, 6]``, 50 points
    per decade, locates any quantile within ``[-1e6, 1e6]`` to a relative
    4.7 % (``grid`` replaces it).

    Budget.  ``2 d`` releases (two quantiles of each of the ``d`` columns),
    each epsilon'-DP; epsilon' is asked of the core's calibration so that
    they compose to ``(epsilon, delta)``: basic composition when
    ``delta == 0`` (epsilon' = epsilon / 2d), the privacy-loss-distribution
    accountant (``"pld"``) when ``delta > 0``, which gives each quantile a
    larger epsilon'.  The rank error of each quantile is about
    ``(2 / epsilon') log(n_grid / beta)`` records with probability
    ``1 - beta``: the scaler needs ``n`` well above ``4 d log(n_grid) / epsilon``
    records per tail to find them (tens of thousands of records at
    ``d = 30, epsilon = 1``; on a few hundred the released range is mostly
    noise).

    Transform.  ``X * scale_ + min_`` as in scikit-learn, with ``scale_`` and
    ``min_`` from the released quantiles; ``clip=True`` (default, unlike
    scikit-learn, whose range holds every training value) clips the output to
    ``feature_range``, since about ``q_low + 1 - q_high`` of the training
    values lie outside the quantiles by construction.  A released pair with
    ``high <= low`` (noise) is reordered, and equal ends give scale 1 (both
    post-processing).

    The guarantee (``privacy_spent_``) refers to replace-one neighbours.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy budget of the fit.
    delta : float, default=0.0
        0 for pure epsilon-DP (basic composition of the ``2 d`` exponential
        mechanisms); a positive delta composes them under ``"pld"``.
    feature_range : tuple (min, max), default=(0, 1)
        Desired range of the transformed data.
    quantiles : tuple (q_low, q_high), default=(0.01, 0.99)
        The quantiles mapped to ``feature_range``; ``0 <= q_low < q_high <= 1``.
    clip : bool, default=True
        Clip transformed values to ``feature_range``.
    grid : array-like of shape (n_grid,) or None, default=None
        Public, strictly increasing candidate values of the quantiles, shared
        by every column; None is the log grid above.  Must not be derived from
        the data.
    accountant : BudgetAccountant, default=None
        Shared budget charged with ``privacy_spent_``.
    random_state : None, int, RandomState or Generator, default=None
        Source of the noise; None (fresh OS entropy) for a release, an int to
        reproduce a fit (whoever holds it can replay the draws).
    secure_noise : bool or None, default=None
        The exponential mechanism samples in floating point and has no exact
        sampler: ``True`` (or a package default of True when None) raises a
        ValueError before anything is reserved.

    Attributes
    ----------
    data_min_, data_max_ : ndarray of shape (n_features,)
        The released lower and upper quantiles (reordered if needed); named
        as scikit-learn's for drop-in use, but they are quantiles, not the
        minimum and maximum.
    data_range_ : ndarray of shape (n_features,)
        ``data_max_ - data_min_``.
    scale_, min_ : ndarray of shape (n_features,)
        Per-feature scaling and offset: ``X * scale_ + min_``.
    n_samples_seen_ : int
        Number of training records (public under replace-one neighbours).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features,)
    privacy_spent_ : PrivacySpent
    privacy_ledger_ : PrivacyLedger
        One :class:`~skdp.privacy.PureDPEvent` per quantile and column.

    See Also
    --------
    DPStandardScaler : standardisation from declared bounds.
    sklearn.preprocessing.MinMaxScaler : the non-private scaler.

    References
    ----------
    A. Smith. Privacy-preserving statistical estimation with optimal
    convergence rates. STOC 2011.

    J. Gillenwater, M. Joseph, A. Kulesza. Differentially private quantiles.
    ICML 2021.

    F. McSherry, K. Talwar. Mechanism design via differential privacy.
    FOCS 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.preprocessing import DPMinMaxScaler
    >>> X = np.random.default_rng(0).uniform(0, 50, size=(20000, 2))
    >>> scaler = DPMinMaxScaler(epsilon=1.0, random_state=0).fit(X)
    >>> (scaler.data_min_ < 2) & (scaler.data_max_ > 45)
    array([ True,  True])
    >>> float(scaler.transform(X).min()), float(scaler.transform(X).max())
    (0.0, 1.0)
    """

    # Released: the 2 d quantiles (exponential mechanism, on the ledger) and
    # their post-processing (range, scale, offset); n is public under
    # replace-one neighbours.
    _released_attributes = frozenset(
        {"data_min_", "data_max_", "data_range_", "scale_", "min_", "n_samples_seen_"}
    )

    _parameter_constraints = {
        **PRIVACY_PARAMETER_CONSTRAINTS,
        "feature_range": [tuple, list],
        "quantiles": [tuple, list],
        "clip": ["boolean"],
        "grid": ["array-like", None],
    }

    def __init__(
        self,
        epsilon=1.0,
        delta=0.0,
        feature_range=(0, 1),
        quantiles=(0.01, 0.99),
        clip=True,
        grid=None,
        accountant=None,
        random_state=None,
        secure_noise=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.feature_range = feature_range
        self.quantiles = quantiles
        self.clip = clip
        self.grid = grid
        self.accountant = accountant
        self.random_state = random_state
        self.secure_noise = secure_noise

    def _feature_range(self):
        try:
            low, high = (float(v) for v in self.feature_range)
        except (TypeError, ValueError):
            raise ValueError("feature_range must be a pair (min, max) of numbers.") from None
        if not (np.isfinite(low) and np.isfinite(high) and low < high):
            raise ValueError("feature_range must be finite with min < max.")
        return low, high

    # The template's steps (skdp.base.DPEstimatorMixin._private_fit).
    def _check_params(self):
        self._feature_range()
        check_quantiles(self.quantiles)
        check_grid(self.grid)

    def _noise_mechanisms(self):
        return (ExponentialMechanism,)

    def _privacy_plan(self):
        composition = "basic" if self.delta == 0 else DEFAULT_COMPOSITION
        return PrivacyPlan(self.epsilon, self.delta, composition)

    def _calibrate(self, data, plan):
        n_releases = 2 * data.n_features
        epsilon = quantile_epsilon(plan.epsilon, plan.delta, n_releases, plan.composition, plan.secure_noise)
        return plan.with_settings(quantile_epsilon=epsilon)

    def _fit_private(self, data, plan, rng, ledger):
        grid = check_grid(self.grid)
        counts = data.chunks.map_reduce(rank_counts, grid) if data.chunked else rank_counts(data.X, grid)
        low, high = np.sort(
            private_quantiles(
                counts,
                data.n_samples,
                check_quantiles(self.quantiles),
                grid,
                plan.settings["quantile_epsilon"],
                rng,
                ledger,
            ),
            axis=0,
        )
        self.n_samples_seen_ = int(data.n_samples)
        self.data_min_, self.data_max_ = low, high
        self.data_range_ = high - low
        fr_min, fr_max = self._feature_range()
        # Equal ends (possible only by noise or a constant column): scale 1,
        # as scikit-learn's _handle_zeros_in_scale.
        self.scale_ = (fr_max - fr_min) / np.where(self.data_range_ > 0, self.data_range_, 1.0)
        self.min_ = fr_min - low * self.scale_

    @private_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Release the private quantiles of every column.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A 2-D ``numpy.memmap``, Dask array or DataFrame, or a callable
            returning chunks, is read chunk by chunk (:doc:`/scale_out`).
        y : None
            Ignored.

        Returns
        -------
        self : DPMinMaxScaler
        """
        return self._private_fit(X)

    def transform(self, X):
        """Scale ``X`` by the released quantiles (post-processing: free).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_tr : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=FLOAT_DTYPES, copy=True)
        X = X * self.scale_ + self.min_
        if self.clip:
            X = np.clip(X, *self._feature_range())
        return X

    def inverse_transform(self, X):
        """Undo the scaling (clipped values stay at the quantiles).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=FLOAT_DTYPES, copy=True)
        return (X - self.min_) / self.scale_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
