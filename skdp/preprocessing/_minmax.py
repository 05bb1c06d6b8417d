"""DPMinMaxScaler: min-max scaling from private quantiles, with no bounds to declare."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import FLOAT_DTYPES, check_is_fitted, validate_data

from ..base import PRIVACY_PARAMETER_CONSTRAINTS, DPEstimatorMixin, PrivacyPlan, private_fit_context
from ..privacy import DEFAULT_COMPOSITION, ExponentialMechanism
from ..privacy.quantiles import (
    check_grid,
    check_quantiles,
    private_quantiles,
    quantile_epsilon,
    rank_counts,
)


class DPMinMaxScaler(DPEstimatorMixin, OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Differentially private min-max scaling from private quantiles; no bounds needed.

    scikit-learn's :class:`~sklearn.preprocessing.MinMaxScaler` maps each
    column's minimum and maximum to ``feature_range``.  A minimum or maximum
    cannot be released privately without a declared bound (one record moves
    it arbitrarily far), so this scaler maps two private *quantiles* of each
    column (``quantiles``, the 1st and 99th percentiles by default) instead.
    Each is drawn by the exponential mechanism over a public grid of
    candidates (:func:`~skdp.privacy.quantiles.private_quantiles`: Smith 2011; Gillenwater, Joseph &
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
