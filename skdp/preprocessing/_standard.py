"""DPStandardScaler: standardisation by a private mean and variance from declared bounds."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import FLOAT_DTYPES, check_is_fitted, validate_data

from ..base import (
    PRIVACY_PARAMETER_CONSTRAINTS,
    DPEstimatorMixin,
    PrivacyPlan,
    private_fit_context,
    warn_privacy_leak,
)
from ..privacy import (
    DEFAULT_COMPOSITION,
    GaussianEvent,
    GaussianMechanism,
    LaplaceEvent,
    LaplaceMechanism,
    calibrate_noise_multiplier,
)
from ..privacy.clipping import clip_box
from ..privacy.quantiles import (
    AUTO_BOUNDS_QUANTILES,
    LOG2_RANGE,
    announced_histogram_box,
    calibrate_histogram,
    can_locate_columns,
    histogram_events,
    histogram_mechanism,
    scale_mechanism,
)


def _in_zero_bin(lower, upper):
    """Columns whose released range lies inside the log grid's zero bin, ``|x| < 2^LOG2_RANGE[0]``.

    Every row the histograms' noise resolved is (about) 0 there: a column
    of mostly zeros whose other values the noise hid (digits' edge pixels
    at epsilon 1: 85 % zeros, the rest up to 8, released range
    ``+-9.5e-07``).  The moments of the rows clipped into that range are
    those of the zeros, and the scale floored at the noise's
    (:meth:`DPStandardScaler._fit_private`) is about ``1e-7``, so ``transform``
    (which does not clip) multiplies the hidden rows by ``1e7``: standard
    deviations of ``7.8e6`` came out of a column of standard deviation 0.9,
    and a PCA after it saw nothing else.  Such columns keep the data-free
    map (mean 0, scale 1), as a column no bin locates.  Post-processing of
    the released range.
    """
    zero = 2.0 ** LOG2_RANGE[0]
    return np.maximum(np.abs(lower), np.abs(upper)) <= zero


#: Sensitivity of each released statistic under replace-one neighbours.  A
#: value clipped to ``[l, u]`` is mapped to ``t = (x - (l + u) / 2) / (u - l)``
#: in ``[-1/2, 1/2]``; the statistics are ``sum_i t_i`` and ``sum_i 4 t_i^2``
#: per column, each term in an interval of length 1, so replacing one record
#: moves each statistic by at most 1.
STATISTIC_SENSITIVITY = 1.0

#: Shares of ``(epsilon, delta)`` that ``bounds_budget="auto"`` gives the
#: private bounds: the first where the column histograms can locate a column
#: at it (:func:`~skdp.privacy.quantiles.can_locate_columns`, public ``n``,
#: ``d`` and plan), else the second.  Where no share locates a column, a
#: column's range comes from the row scale and the linear histogram's noisy
#: prefix sums, and a range that misses the column's values costs it far more
#: than the noise of its moments (``width z / n`` on the mean) inside a range
#: that holds them: the bounds then get the larger share.  (Measured at 8
#: seeds on four tables of 150 to 569 rows at epsilon 0.3 and 1, every share
#: from 0.6 to 0.75 gave about the same error, all below 0.5's: docs/bounds.md.)
AUTO_BOUNDS_SHARES = (0.5, 0.7)


def auto_bounds_share(n_samples, n_features, epsilon, delta, composition, secure_noise=False):
    """The share of ``bounds_budget="auto"`` (:data:`AUTO_BOUNDS_SHARES`); public quantities only."""
    gaussian = delta > 0
    for share in AUTO_BOUNDS_SHARES[:-1]:
        z = calibrate_histogram(
            epsilon * share, delta * share, n_features, composition, secure_noise, scale=True
        )
        if can_locate_columns(n_samples, histogram_mechanism(n_features, z, gaussian), n_features):
            return share
    return AUTO_BOUNDS_SHARES[-1]


def check_bounds(bounds, n_features, name="bounds"):
    """``(lower, upper)`` arrays of shape (n_features,) from declared bounds.

    Two spellings are accepted: ``(lows, highs)`` (two scalars or two arrays
    of length ``n_features``) and ``[(lo_1, hi_1), ..., (lo_d, hi_d)]`` (one
    pair per column).  When ``n_features == 2`` both read as a 2 x 2 table;
    a list of tuples is then taken as per-column pairs, anything else as
    ``(lows, highs)``.
    """
    message = (
        f"{name} must be 'auto', a pair (lows, highs) of scalars or arrays of length {n_features}, "
        f"or a list of {n_features} pairs (low, high)."
    )
    try:
        table = np.asarray(bounds, dtype=float)
    except (TypeError, ValueError):
        table = None
    per_column = (
        table is not None
        and table.shape == (n_features, 2)
        and (n_features != 2 or (isinstance(bounds, list) and all(isinstance(b, tuple) for b in bounds)))
    )
    try:
        if per_column:
            lower, upper = table[:, 0].copy(), table[:, 1].copy()
        else:
            lower, upper = bounds
            lower = np.broadcast_to(np.asarray(lower, dtype=float), (n_features,)).copy()
            upper = np.broadcast_to(np.asarray(upper, dtype=float), (n_features,)).copy()
    except (TypeError, ValueError):
        raise ValueError(message) from None
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper)) and np.all(upper > lower)):
        raise ValueError(f"{name} must be finite with upper > lower in every column.")
    return lower, upper


def moment_statistics(chunk, lower, upper, n_statistics):
    """``sum_i t_ij`` (and ``sum_i 4 t_ij^2``) of the clipped, unit-scaled columns: shape (n_statistics, d).

    ``t = (clip(x, l, u) - (l + u) / 2) / (u - l)`` lies in ``[-1/2, 1/2]``
    (:data:`STATISTIC_SENSITIVITY`).  A column with ``u == l`` (a constant
    column's data-read range) gives ``t = 0``.  Summable over chunks.
    """
    width = upper - lower
    # Box clipping of each coordinate to its declared bounds: what the
    # sensitivity assumes (an infinite value lands on its bound).
    t = (clip_box(chunk, lower, upper) - (lower + upper) / 2) / np.where(width > 0, width, 1.0)
    stats = [t.sum(axis=0)]
    if n_statistics == 2:
        stats.append(4.0 * np.einsum("ij,ij->j", t, t))
    return np.stack(stats)


def _column_range(chunk):
    return chunk.min(axis=0), chunk.max(axis=0)


@dataclass(frozen=True)
class StandardScalerSettings:
    """:class:`DPStandardScaler`'s plan (its ``_calibrate``).

    Attributes
    ----------
    bounds_mechanism : object or None
        The histogram mechanism of the private bounds (``bounds="auto"``), else None.
    scale_mechanism : object or None
        The row-scale histogram's mechanism of the private bounds
        (``bounds="auto"``: columns the own histograms cannot locate take a
        range within the released row scale), else None.
    mechanism : LaplaceMechanism or GaussianMechanism or None
        The mechanism of the clipped moments (None: no moment is released).
    """

    bounds_mechanism: object = None
    scale_mechanism: object = None
    mechanism: object = None


class DPStandardScaler(DPEstimatorMixin, OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Differentially private standardisation: ``(x - mean) / std`` with a noisy mean and variance.

    Each column is clipped to its bounds ``[l, u]`` and mapped to
    ``t = (x - (l + u) / 2) / (u - l)`` in ``[-1/2, 1/2]``; the sums
    ``S1 = sum_i t_i`` and ``S2 = sum_i 4 t_i^2`` of every column are released
    in one noisy vector of ``2 d`` statistics (``d`` when only the mean is
    needed), each moving by at most 1 when one record is replaced (L1
    sensitivity ``2 d``, L2 sensitivity ``sqrt(2 d)``):

    * ``delta == 0``: Laplace noise (Dwork, McSherry, Nissim & Smith 2006),
      pure epsilon-DP;
    * ``delta > 0`` (default): Gaussian noise (the analytic calibration of
      Balle & Wang 2018, asked of the core), whose L2 sensitivity grows as
      ``sqrt(d)`` rather than ``d``: at ``d = 30`` its per-statistic std is a
      third of Laplace's at the same epsilon.

    The number of records ``n`` is public under replace-one neighbours, so
    ``mean = (l + u) / 2 + (u - l) S1 / n`` and
    ``var = (u - l)^2 (S2 / 4n - (S1 / n)^2)``, both post-processing.  The mean
    is clipped to ``[l, u]`` and the variance to ``[v_min, (u - l)^2 / 4]``,
    where the floor ``v_min`` is the standard deviation of the noise on
    ``var`` itself (``(u - l)^2`` times the noise std of ``S2 / 4n``): a
    variance below it cannot be told from 0 and would blow the scaled column
    up by noise (scikit-learn replaces a zero variance by 1).

    This is diffprivlib's design (its ``StandardScaler`` takes
    ``bounds=(lower, upper)``, clips and adds Laplace noise to the mean and
    variance of each column, splitting epsilon over them) released through
    skdp's core: one release for all columns, Gaussian noise by default,
    ``n`` not spent on, and the budget reported on a ledger.

    ``bounds="auto"`` (default) releases the bounds privately: the 1st and
    99th percentiles of each column from two noisy histograms
    (:func:`~skdp.privacy.quantiles.private_histogram_box`, the mechanism of
    :class:`DPMinMaxScaler`: a log-scale histogram with a noisy-count
    threshold, then a linear one inside the range it found), with a share
    ``bounds_budget`` of ``(epsilon, delta)``; the moments are calibrated
    with the bounds' events in front, so the whole fit composes to
    ``(epsilon, delta)``.  A third, cheaper release comes first: the
    histogram of every row's largest magnitude (one count per row, so its
    noise does not grow with ``d``), whose top gives a scale ``S`` bounding
    the data.  Where ``n * epsilon`` is too small for a column's own bins,
    the column takes a range inside ``[-S, S]`` (the pool's reaching 0, or
    ``[-S, S]`` itself; also where its own bins clearly miss rows, e.g.
    values on both sides of 0), announced by a warning, and its moments
    are released inside it; only where not even ``S`` is located, or where
    the released range lies inside the log grid's zero bin (a column of
    mostly zeros whose other values the noise hid: :func:`_in_zero_bin`),
    does the column keep the data-free map (mean 0, scale 1).  A released range is
    never wider than about twice the data's largest magnitude (see
    :class:`DPMinMaxScaler`); a column far smaller than the largest one
    that takes a range from ``S`` can get a scale orders of magnitude too
    large, which the warning says.
    ``bounds="nonprivate"`` reads each column's range off the data and
    raises a :class:`~skdp.PrivacyLeakWarning`: the guarantee then holds
    only for neighbours with the same ranges (opt-in, named as such).

    The guarantee (``privacy_spent_``) refers to replace-one neighbours.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy budget of the fit.
    delta : float, default=1e-5
        0 for Laplace noise and pure epsilon-DP; positive for Gaussian noise.
    bounds : "auto", "nonprivate", (lows, highs) or list of (low, high), default="auto"
        Public bounds of each column: ``(lows, highs)`` (scalars, or arrays
        of length ``n_features``) or one pair ``(low, high)`` per column;
        values outside are clipped to them.  "auto" releases them privately
        (see above); "nonprivate" reads them off the data (warned, not
        covered by the guarantee).
    with_mean : bool, default=True
        Centre the data before scaling.
    with_std : bool, default=True
        Scale the data to unit variance.  ``with_mean=True, with_std=False``
        releases the ``d`` column sums only.
    bounds_budget : float in (0, 1) or "auto", default="auto"
        Share of ``(epsilon, delta)`` spent on the bounds when
        ``bounds="auto"``.  "auto": half where the column histograms can
        locate a column at that share (a function of the public ``n``,
        ``d``, epsilon and delta), else 0.7
        (:data:`AUTO_BOUNDS_SHARES`): the moments are averages over all
        ``n`` rows (their noise on the mean is about ``width z / n``), while
        the histograms locate a column only where its records in a bin
        outnumber a multiple of the count noise, so the bounds are the
        harder release at small ``n epsilon``, and a range that misses a
        column's values costs more than the moments' noise inside one that
        holds them.
    accountant : BudgetAccountant, default=None
        Shared budget charged with ``privacy_spent_``.
    random_state : None, int, RandomState or Generator, default=None
        Source of the noise; None (fresh OS entropy) for a release, an int to
        reproduce a fit (whoever holds it can replay the noise).
    secure_noise : bool or None, default=None
        Sample the Laplace or Gaussian noise exactly on a grid (Canonne,
        Kamath & Steinke 2020) instead of in floating point (Mironov 2012).
        None follows the package default (:func:`skdp.set_config`).

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,) or None
        Released mean of every column (None when neither ``with_mean`` nor
        ``with_std``).
    var_ : ndarray of shape (n_features,) or None
        Released variance (None when ``with_std=False``), floored as above.
    scale_ : ndarray of shape (n_features,) or None
        ``sqrt(var_)`` (None when ``with_std=False``).
    bounds_ : ndarray of shape (2, n_features)
        The bounds the columns were clipped to: declared, released
        (``"auto"``) or read off the data (``"nonprivate"``, warned).
    n_samples_seen_ : int
        Number of training records (public under replace-one neighbours).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features,)
    privacy_spent_ : PrivacySpent
    privacy_ledger_ : PrivacyLedger
        One Laplace or Gaussian event (and the row-scale and two column
        histogram releases of ``bounds="auto"`` in front).

    See Also
    --------
    DPMinMaxScaler : scaling from private quantiles, no bounds needed.
    sklearn.preprocessing.StandardScaler : the non-private scaler.

    References
    ----------
    C. Dwork, F. McSherry, K. Nissim, A. Smith. Calibrating noise to
    sensitivity in private data analysis. TCC 2006.

    B. Balle, Y.-X. Wang. Improving the Gaussian mechanism for differential
    privacy: analytical calibration and optimal denoising. ICML 2018.

    N. Holohan, S. Braghin, P. Mac Aonghusa, K. Levacher. Diffprivlib: the IBM
    differential privacy library. arXiv:1907.02444, 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.preprocessing import DPStandardScaler
    >>> X = np.random.default_rng(0).normal(5.0, 2.0, size=(10000, 2))
    >>> scaler = DPStandardScaler(epsilon=1.0, bounds=(-5, 15), random_state=0).fit(X)
    >>> scaler.mean_.round(1), scaler.scale_.round(1)
    (array([5., 5.]), array([2., 2.]))
    """

    # Released: the noisy sums (one ledger event) through post-processing
    # (mean_, var_, scale_); the bounds: declared (public), released
    # ("auto", on the ledger) or read off the data (warned); n is public
    # under replace-one neighbours.
    _released_attributes = frozenset({"mean_", "var_", "scale_", "bounds_", "n_samples_seen_"})

    _parameter_constraints = {
        **PRIVACY_PARAMETER_CONSTRAINTS,
        "bounds": [tuple, list, StrOptions({"auto", "nonprivate"})],
        "with_mean": ["boolean"],
        "with_std": ["boolean"],
        "bounds_budget": [Interval(Real, 0, 1, closed="neither"), StrOptions({"auto"})],
    }

    def __init__(
        self,
        epsilon=1.0,
        delta=1e-5,
        bounds="auto",
        with_mean=True,
        with_std=True,
        bounds_budget="auto",
        accountant=None,
        random_state=None,
        secure_noise=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.with_mean = with_mean
        self.with_std = with_std
        self.bounds_budget = bounds_budget
        self.accountant = accountant
        self.random_state = random_state
        self.secure_noise = secure_noise

    def _n_statistics(self):
        """Statistics per column: the sum, and the sum of squares when a variance is needed."""
        if self.with_std:
            return 2
        return 1 if self.with_mean else 0

    # The template's steps (skdp.base.DPEstimatorMixin._private_fit).
    def _check_public_input(self, X, y=None):
        shape = getattr(X, "shape", None)
        if not isinstance(self.bounds, str) and shape is not None and len(shape) == 2:
            check_bounds(self.bounds, int(shape[1]))

    def _noise_mechanisms(self):
        return (LaplaceMechanism,) if self.delta == 0 else (GaussianMechanism,)

    def _auto_bounds(self):
        return isinstance(self.bounds, str) and self.bounds == "auto"

    def _privacy_plan(self):
        # Laplace releases are exact under "basic"; Gaussian ones (the
        # histograms of "auto" and the moments) are composed under "pld".
        composition = "basic" if self.delta == 0 else DEFAULT_COMPOSITION
        return PrivacyPlan(self.epsilon, self.delta, composition)

    def _calibrate(self, data, plan):
        m = self._n_statistics() * data.n_features
        settings = {}
        prefix = []
        gaussian = self.delta > 0
        if self._auto_bounds():
            share = self.bounds_budget
            if isinstance(share, str):
                share = auto_bounds_share(
                    data.n_samples,
                    data.n_features,
                    plan.epsilon,
                    plan.delta,
                    plan.composition,
                    plan.secure_noise,
                )
            z_bounds = calibrate_histogram(
                plan.epsilon * share,
                plan.delta * share,
                data.n_features,
                plan.composition,
                plan.secure_noise,
                scale=True,
            )
            settings["bounds_mechanism"] = histogram_mechanism(data.n_features, z_bounds, gaussian)
            settings["scale_mechanism"] = scale_mechanism(z_bounds, gaussian, data.n_features)
            prefix = histogram_events(data.n_features, z_bounds, gaussian, scale=True)
        if m:
            if not gaussian:
                sensitivity = m * STATISTIC_SENSITIVITY  # L1

                def events(z):
                    return prefix + [
                        LaplaceEvent(count=1, neighbouring=self._neighbouring, noise_multiplier=z)
                    ]

                mechanism = LaplaceMechanism
            else:
                sensitivity = math.sqrt(m) * STATISTIC_SENSITIVITY  # L2

                def events(z):
                    return prefix + [
                        GaussianEvent(count=1, neighbouring=self._neighbouring, noise_multiplier=z)
                    ]

                mechanism = GaussianMechanism
            # The moments get what is left once the bounds' releases are counted.
            z = calibrate_noise_multiplier(
                events, plan.epsilon, plan.delta, plan.composition, secure_noise=plan.secure_noise
            )
            settings["mechanism"] = mechanism(sensitivity, z * sensitivity)
        return plan.with_settings(StandardScalerSettings(**settings))

    def _column_bounds(self, data, plan, rng, ledger):
        d = data.n_features
        if self._auto_bounds():
            # A pooled range can be orders of magnitude wider than a column's values: say so.
            low, high, located, pooled = announced_histogram_box(
                data.reduce,
                data.n_samples,
                d,
                plan.settings.bounds_mechanism,
                AUTO_BOUNDS_QUANTILES,
                rng,
                ledger,
                epsilon=plan.epsilon,
                advice="Declare bounds=(lows, highs) from public knowledge, or raise epsilon.",
                extend=True,
                scale_mechanism=plan.settings.scale_mechanism,
            )
            return low, high, located
        if isinstance(self.bounds, str) and self.bounds == "nonprivate":
            warn_privacy_leak("bounds", "the range of every column")
            if data.chunked:
                lows, highs = zip(*(_column_range(c) for c in data.chunks.iter_chunks()), strict=True)
                return np.min(lows, axis=0), np.max(highs, axis=0), None
            return (*_column_range(data.X), None)
        return (*check_bounds(self.bounds, d), None)

    def _fit_private(self, data, plan, rng, ledger):
        lower, upper, located = self._column_bounds(data, plan, rng, ledger)
        self.bounds_ = np.stack([lower, upper])
        self.n_samples_seen_ = n = int(data.n_samples)
        self.mean_ = self.var_ = self.scale_ = None
        k = self._n_statistics()
        if k == 0:
            return
        exact = (
            data.chunks.map_reduce(moment_statistics, lower, upper, k)
            if data.chunked
            else moment_statistics(data.X, lower, upper, k)
        )
        mechanism = plan.settings.mechanism
        noisy = mechanism.release(exact.ravel(), rng, ledger).reshape(exact.shape)
        # Everything below is post-processing of the noisy sums and public n.
        width = upper - lower
        mean_t = np.clip(noisy[0] / n, -0.5, 0.5)
        self.mean_ = (lower + upper) / 2 + width * mean_t
        if k == 2:
            # Std of the noise on S2 / 4n, in units of width^2.
            noise_std = mechanism.std / (4 * n)
            var_t = np.clip(noisy[1] / (4 * n) - mean_t**2, noise_std, 0.25)
            # A column of zero width (constant, read off the data) has variance 0: scale 1.
            self.var_ = np.where(width > 0, width**2 * var_t, 0.0)
            self.scale_ = np.where(width > 0, np.sqrt(self.var_), 1.0)
        if located is not None:
            located = located & ~_in_zero_bin(lower, upper)
        if located is not None and not located.all():
            # "auto" located nothing for these columns (n * epsilon too small):
            # the data-free answer, a map that leaves them unchanged, rather
            # than moments of data clipped into an arbitrary [0, 1].
            self.mean_ = np.where(located, self.mean_, 0.0)
            if k == 2:
                self.var_ = np.where(located, self.var_, 1.0)
                self.scale_ = np.where(located, self.scale_, 1.0)

    @private_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Release the private mean and variance of every column.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A 2-D ``numpy.memmap``, Dask array or DataFrame, or a callable
            returning chunks, is read chunk by chunk (:doc:`/scale_out`).
        y : None
            Ignored.

        Returns
        -------
        self : DPStandardScaler
        """
        return self._private_fit(X)

    def transform(self, X):
        """Standardise ``X`` with the released mean and scale (post-processing: free).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_tr : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=FLOAT_DTYPES, copy=True)
        if self.with_mean:
            X = X - self.mean_
        if self.with_std:
            X = X / self.scale_
        return X

    def inverse_transform(self, X):
        """Undo the standardisation.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=FLOAT_DTYPES, copy=True)
        if self.with_std:
            X = X * self.scale_
        if self.with_mean:
            X = X + self.mean_
        return X
