"""DPMinMaxScaler: min-max scaling from private ends (or quantiles), with no bounds to declare."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import FLOAT_DTYPES, check_is_fitted, validate_data

from ..base import PRIVACY_PARAMETER_CONSTRAINTS, DPEstimatorMixin, PrivacyPlan, private_fit_context
from ..privacy import DEFAULT_COMPOSITION, GaussianMechanism, LaplaceMechanism
from ..privacy.quantiles import (
    REFINE_BINS,
    announced_histogram_box,
    calibrate_histogram,
    check_quantiles,
    extreme_hidden_share,
    extreme_threshold,
    histogram_mechanism,
)

#: ``quantiles="auto"`` keeps the linear stage where the rows its noise hides at a
#: typical end (:func:`~skdp.privacy.quantiles.extreme_hidden_share`) are at most this
#: share of ``n``: beyond half, no prefix sum passes before the middle of the range, so
#: the linear stage resolves no end to extrapolate from, and one log histogram on the
#: whole budget gives the ranges.  (A quarter until 2026-11-27, when the ends moved by
#: one decay length only; docs/bounds.md, "DPMinMaxScaler's ends".)
AUTO_HIDDEN_SHARE = 0.5


@dataclass(frozen=True)
class MinMaxSettings:
    """:class:`DPMinMaxScaler`'s plan (its ``_calibrate``).

    Attributes
    ----------
    mechanism : object
        The histogram mechanism of the columns' private quantiles.
    """

    mechanism: object
    ends: str = "quantiles"


class DPMinMaxScaler(DPEstimatorMixin, OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Differentially private min-max scaling from private quantiles; no bounds needed.

    scikit-learn's :class:`~sklearn.preprocessing.MinMaxScaler` maps each
    column's minimum and maximum to ``feature_range``.  A minimum or maximum
    cannot be released privately without a declared bound (one record moves
    it arbitrarily far), so this scaler maps two private ends of each column
    found by :func:`~skdp.privacy.quantiles.private_histogram_box`: by default
    (``quantiles="auto"``) the most extreme rows the noise can resolve, which
    approach the minimum and maximum as ``n * epsilon`` grows; with a tuple,
    two fixed quantiles.  In the style of
    Google's ``ApproxBounds``: no bound on the data is declared and none is
    read off the data.

    1. A histogram of every column's values over public signed log bins
       (``[2^k, 2^(k+1))`` and their negatives, about 1e-6 to 1e12) is
       released in one noisy vector; a bin is occupied when its noisy count
       passes a threshold that an empty bin passes with probability at most
       5 % over all bins.  A column's range runs from its lowest to its
       highest occupied bin; a column with none takes the range of the
       pooled histogram (sum over columns), and if that has none either,
       ``[0, 1]`` (the data-free map).  A column whose range clearly holds
       fewer rows than the quantiles keep (its noisy count says so) is
       extended towards 0, then to the pool's range (``extend`` of
       :func:`~skdp.privacy.quantiles.private_histogram_box`).
    2. A histogram over 32 equal bins inside that range is released the
       same way (with ``"auto"``, 16 where the average bin holds fewer rows
       than one bin's noise threshold: :func:`~skdp.privacy.quantiles.refine_bins`);
       its noisy prefix and suffix sums give the released ends.
       With a tuple, the bins of the quantiles, inside the stage-1 range.
       ``quantiles="auto"``: the first bin whose prefix sum over ``k`` bins
       passes ``sqrt(k)`` times a noise threshold
       (:func:`~skdp.privacy.quantiles.extreme_threshold`), or whose own
       count passes the occupied-bin test (a wall of rows:
       :func:`~skdp.privacy.quantiles.wall_threshold`), moved outward
       by ``(N / f) ln N`` where ``N`` is the rows the noisy prefix before
       it still counts and ``f`` that bin's density: where a log-concave
       tail (normal, logistic, uniform) leaves its last row.  A sparse tail
       moves the end out, a wall of rows keeps it.  The 32 bins have an
       overflow bin each side for the rows beyond the stage-1 range, which
       spans the next log bin outward (below a positive range: down to 0)
       where that bin's stage-1 noisy count plus the overflow bin's own
       noisy count pass ``sqrt(2)`` times what one empty count passes with
       probability 5 % (:func:`~skdp.privacy.quantiles.overflow_edges`): an
       end can then be extrapolated into a tail too thin for the
       occupied-bin threshold.  An end inside the log grid's zero bin
       (``|x| < 2^-20``) is released as 0.

    ``quantiles="auto"`` decides from public ``n``, ``d``, epsilon and
    delta whether stage 2 is worth its release: where the rows its noise
    hides at a typical end (:func:`~skdp.privacy.quantiles.extreme_hidden_share`)
    exceed half of ``n`` (``AUTO_HIDDEN_SHARE``; no end is resolved before
    the middle of the range), the stage-1 log histogram alone is released,
    on the whole budget, and its range is the answer (fewer, larger
    releases; a range that holds the column's values, within a factor 2
    of their magnitude, rather than ends set by noise).  The hidden share
    falls as epsilon grows, so a larger budget never steps back to the
    one-histogram plan.  See :doc:`/bounds`, "DPMinMaxScaler's ends".

    Worst case: with probability at least 0.9 every stage-1 end lies in a
    bin that holds data of its column (or of the pool), so a released range
    is never wider than about twice the data's largest magnitude (four
    times with ``"auto"``, whose ends may reach one log bin further into an
    overflow bin), whatever ``n`` and epsilon.  When the noise hides a
    column's tails the range shrinks (more clipping), it does not explode.

    Budget.  Two releases of ``d x n_bins`` counts (one where the
    ``"auto"`` rule drops stage 2); replacing one record
    moves one count of each column down and one up (L1 sensitivity ``2 d``,
    L2 ``sqrt(2 d)``).  ``delta > 0`` (default): Gaussian noise, calibrated
    by the core under ``"pld"``; ``delta == 0``: Laplace noise and pure
    epsilon-DP (basic composition), ``sqrt(2 d)`` times noisier at the same
    epsilon.  A column is located when a few times the noise std of one
    count (``sqrt(2 d)`` times the noise multiplier) of its records share a
    log bin: at ``d = 64, epsilon = 1`` a few hundred records.

    Transform.  ``X * scale_ + min_`` as in scikit-learn, with ``scale_`` and
    ``min_`` from the released quantiles; ``clip=True`` (default, unlike
    scikit-learn, whose range holds every training value) clips the output to
    ``feature_range``, since the training values beyond the released ends
    (about ``q_low + 1 - q_high`` of them with a tuple; the rows the noise
    hides with ``"auto"``) fall outside it.  A released pair with
    ``high <= low`` (noise) is reordered, and equal ends give scale 1 (both
    post-processing).

    The guarantee (``privacy_spent_``) refers to replace-one neighbours.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy budget of the fit.
    delta : float, default=1e-5
        Positive for Gaussian noise on the histograms (composed under
        ``"pld"``); 0 for Laplace noise and pure epsilon-DP.
    feature_range : tuple (min, max), default=(0, 1)
        Desired range of the transformed data.
    quantiles : "auto" or tuple (q_low, q_high), default="auto"
        ``"auto"``: the most extreme rows the noise resolves (the ends
        approach the minimum and maximum as ``n * epsilon`` grows), or the
        stage-1 log-bin range where the public rule says stage 2 cannot
        resolve them.  A tuple: the quantiles mapped to ``feature_range``,
        ``0 <= q_low < q_high <= 1`` (the default until 2026-11-27 was
        ``(0.01, 0.99)``).
    clip : bool, default=True
        Clip transformed values to ``feature_range``.
    grid : None
        Kept for compatibility; must be None (the bins are fixed and public).
    accountant : BudgetAccountant, default=None
        Shared budget charged with ``privacy_spent_``.
    random_state : None, int, RandomState or Generator, default=None
        Source of the noise; None (fresh OS entropy) for a release, an int to
        reproduce a fit (whoever holds it can replay the draws).
    secure_noise : bool or None, default=None
        Sample the Laplace or Gaussian noise exactly on a grid (Canonne,
        Kamath & Steinke 2020) instead of in floating point; None follows the
        package default.

    Attributes
    ----------
    data_min_, data_max_ : ndarray of shape (n_features,)
        The released lower and upper ends (reordered if needed); named as
        scikit-learn's for drop-in use, but they are private estimates (or
        quantiles), not the exact minimum and maximum.
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
        Two histogram releases, or one where ``quantiles="auto"`` drops
        stage 2 (Gaussian or Laplace events).

    See Also
    --------
    DPStandardScaler : standardisation from declared bounds.
    sklearn.preprocessing.MinMaxScaler : the non-private scaler.

    References
    ----------
    Google differential-privacy library, ``ApproxBounds`` (log-scale
    histogram with a noisy-count threshold).

    C. Dwork, F. McSherry, K. Nissim, A. Smith. Calibrating noise to
    sensitivity in private data analysis. TCC 2006.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.preprocessing import DPMinMaxScaler
    >>> X = np.random.default_rng(0).uniform(0, 50, size=(20000, 2))
    >>> scaler = DPMinMaxScaler(epsilon=1.0, random_state=0).fit(X)
    >>> (scaler.data_min_ < 2) & (scaler.data_max_ > 45)
    array([ True,  True])
    >>> Xt = scaler.transform(X)
    >>> bool(Xt.min() >= 0.0 and Xt.max() <= 1.0)
    True
    """

    # Released: the two noisy histograms (on the ledger) through
    # their post-processing (range, scale, offset); n is public under
    # replace-one neighbours.
    _released_attributes = frozenset(
        {"data_min_", "data_max_", "data_range_", "scale_", "min_", "n_samples_seen_"}
    )

    _parameter_constraints = {
        **PRIVACY_PARAMETER_CONSTRAINTS,
        "feature_range": [tuple, list],
        "quantiles": [tuple, list, StrOptions({"auto"})],
        "clip": ["boolean"],
        "grid": ["array-like", None],
    }

    def __init__(
        self,
        epsilon=1.0,
        delta=1e-5,
        feature_range=(0, 1),
        quantiles="auto",
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
        if not (isinstance(self.quantiles, str) and self.quantiles == "auto"):
            check_quantiles(self.quantiles)
        if self.grid is not None:
            raise ValueError("grid must be None: the histogram's bins are fixed and public.")

    def _noise_mechanisms(self):
        return (LaplaceMechanism,) if self.delta == 0 else (GaussianMechanism,)

    def _privacy_plan(self):
        composition = "basic" if self.delta == 0 else DEFAULT_COMPOSITION
        return PrivacyPlan(self.epsilon, self.delta, composition)

    def _calibrate(self, data, plan):
        def multiplier(releases):
            return calibrate_histogram(
                plan.epsilon,
                plan.delta,
                data.n_features,
                plan.composition,
                plan.secure_noise,
                releases=releases,
            )

        gaussian = plan.delta > 0
        mechanism = histogram_mechanism(data.n_features, multiplier(2), gaussian)
        if not isinstance(self.quantiles, str):
            return plan.with_settings(MinMaxSettings(mechanism, "quantiles"))
        # quantiles="auto": keep the linear stage only where its noise can resolve the ends
        # (a public rule: n, d, epsilon, delta); else one log histogram on the whole budget.
        if extreme_hidden_share(data.n_samples, mechanism) <= AUTO_HIDDEN_SHARE:
            return plan.with_settings(MinMaxSettings(mechanism, "extreme"))
        mechanism = histogram_mechanism(data.n_features, multiplier(1), gaussian)
        return plan.with_settings(MinMaxSettings(mechanism, "range"))

    def _fit_private(self, data, plan, rng, ledger):
        mechanism, ends = plan.settings.mechanism, plan.settings.ends
        if ends == "quantiles":
            quantiles = check_quantiles(self.quantiles)
        else:
            # The extension's test (rows the range should hold): all but the rows the
            # noise can hide, at most the 1st and 99th percentiles.
            q = min(0.01, extreme_threshold(mechanism, REFINE_BINS) / max(int(data.n_samples), 1))
            quantiles = (q, 1.0 - q)
        # A pooled range can be orders of magnitude wider than a column's values: say so.
        low, high, located, pooled = announced_histogram_box(
            data.reduce,
            data.n_samples,
            data.n_features,
            mechanism,
            quantiles,
            rng,
            ledger,
            epsilon=plan.epsilon,
            advice="Raise epsilon, or scale by declared ranges (DPStandardScaler(bounds=...)).",
            extend=True,
            ends=ends,
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
