"""DPPCA: principal components of a noisy second-moment matrix ("Analyze Gauss")."""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
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
    ExponentialMechanism,
    GaussianEvent,
    GaussianMechanism,
    SymmetricMatrixGaussianMechanism,
)
from ..privacy.centring import (
    DEFAULT_BOUNDS_BUDGET,
    auto_bounds_plan,
    calibrate_after_bounds,
    private_centring,
)
from ..privacy.clipping import clip_rows, row_norms
from ..privacy.sensitivity import outer_product_sum_sensitivity, row_sum_sensitivity


def pca_statistics(chunk, data_norm, centre=None):
    """``(sum_i x_i, sum_i x_i x_i^T)`` of the rows (shifted by ``centre``) clipped to ``data_norm``.

    Returns shape ``(d + 1, d)``, one summable array: the first row is the
    sum, the rest the second-moment matrix (a map step of
    :meth:`skdp._chunks.ChunkedData.map_reduce`).  ``centre`` is a released
    centre (``data_norm="auto"``), or None.
    """
    clipped = clip_rows(chunk if centre is None else chunk - centre, data_norm)
    return np.vstack([clipped.sum(axis=0), clipped.T @ clipped])


def _max_row_norm(chunk):
    return row_norms(chunk).max()


@dataclass(frozen=True)
class PCASettings:
    """:class:`DPPCA`'s plan (its ``_calibrate``).

    Attributes
    ----------
    noise_multiplier : float
        Gaussian noise multiplier of the second-moment matrix (and the sum).
    bounds : AutoBounds or None
        The private centre and row norm of ``data_norm="auto"``
        (:class:`~skdp.privacy.centring.AutoBounds`), else None.
    """

    noise_multiplier: float
    bounds: object = None


class DPPCA(DPEstimatorMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Differentially private PCA by "Analyze Gauss" (Dwork, Talwar, Thakurta & Zhang 2014).

    Rows are clipped to L2 norm ``data_norm`` (the core's clipping rule); the
    second-moment matrix ``A = sum_i x_i x_i^T`` is released with symmetric
    Gaussian noise (i.i.d. on the upper triangle, mirrored:
    :class:`~skdp.privacy.SymmetricMatrixGaussianMechanism`, Algorithm 1 of
    the paper), whose Frobenius sensitivity under replace-one neighbours is
    ``sqrt(2) C^2`` (``C^2`` for one feature; :func:`~skdp.privacy.sensitivity.outer_product_sum_sensitivity`).  The components are
    the top eigenvectors of the released covariance (post-processing).

    Centring (``centered``):

    ``centered=False`` (default)
        The mean is released too, from the same clipped rows: the sum
        ``sum_i x_i`` with Gaussian noise, L2 sensitivity ``2 C``.  Both
        releases share one noise multiplier, calibrated so that the two
        Gaussian events compose to ``(epsilon, delta)`` (the core's
        ``"pld"`` accountant; two Gaussians at multiplier ``z`` are one at
        ``z / sqrt(2)``).  The covariance is
        ``(A~ - n mu~ mu~^T) / (n - 1)`` (post-processing; ``n`` is public
        under replace-one neighbours).
    ``centered=True``
        The data is declared centred at 0 (public knowledge, e.g. features
        standardised by public constants): ``mean_`` is 0, not released, and
        the whole budget goes to ``A``; the covariance is ``A~ / n``.

    The noise on each entry of the covariance has std about
    ``z sqrt(2) C^2 / n``: ``n`` must be large against ``d``'s share of the
    spectrum for the top components to survive it (Dwork et al., Thm. 3).

    ``data_norm="nonprivate"`` reads the largest row norm off the data and raises a
    :class:`~skdp.PrivacyLeakWarning`: the guarantee then holds only for
    neighbours with the same largest norm.  ``data_norm="auto"`` releases
    the bound instead, with a share ``bounds_budget`` of the budget
    (:mod:`skdp.privacy.centring`): with ``centered=False`` a private centre
    ``c`` (a noisy mean of the rows clipped to a private quantile of their
    norms) and a private quantile ``R`` of ``||x - c||``; the fit above then
    runs on ``x - c`` clipped to ``R`` and its own mean release refines the
    centre (``mean_ = c + S~ / n``: the centre of the bounds, at a tenth of
    the budget and the raw norms' sensitivity, is coarse; the refinement's
    sensitivity is the centred ``2 R``).  With ``centered=True`` only ``R``
    (a quantile of ``||x||``) is released.

    The guarantee (``privacy_spent_``) refers to replace-one neighbours.

    Parameters
    ----------
    n_components : int or None, default=None
        Number of components kept; None keeps all ``n_features``.
    epsilon : float, default=1.0
    delta : float in (0, 1), default=1e-5
        Gaussian noise needs ``delta > 0``.
    data_norm : float, "auto" or "nonprivate", default="auto"
        Public bound on the L2 norm of a row; rows are clipped to it.
        ``"auto"`` (default): released privately (see above), so a fit with
        nothing declared has a true guarantee; ``"nonprivate"`` (opt-in): read
        off the data, warned.
    centered : bool, default=False
        Declare the data centred at 0 (no mean released); see above.
    bounds_budget : float in (0, 1), default=0.1
        Share of ``(epsilon, delta)`` spent on the bounds when
        ``data_norm="auto"``; the PCA releases are calibrated so that the
        whole fit composes to ``(epsilon, delta)``.
    accountant : BudgetAccountant, default=None
        Shared budget charged with ``privacy_spent_``.
    random_state : None, int, RandomState or Generator, default=None
        Source of the noise; None (fresh OS entropy) for a release, an int to
        reproduce a fit (whoever holds it can replay the noise).
    secure_noise : bool or None, default=None
        Sample the Gaussian noise exactly on a grid (discrete Gaussian,
        Canonne, Kamath & Steinke 2020) instead of in floating point
        (Mironov 2012).  None follows the package default
        (:func:`skdp.set_config`).  ``data_norm="auto"`` uses the
        exponential mechanism, which has no exact sampler, and raises a
        ValueError under secure noise.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Released principal axes (rows, unit norm, by decreasing eigenvalue;
        the sign makes the largest entry of each positive).
    explained_variance_ : ndarray of shape (n_components,)
        Eigenvalues of the released covariance for those axes, floored at 0.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``explained_variance_`` over the sum of the floored eigenvalues.
    covariance_ : ndarray of shape (n_features, n_features)
        The released covariance the components come from.
    mean_ : ndarray of shape (n_features,)
        Released mean (0 with ``centered=True``).
    data_norm_ : float
        The bound the rows were clipped to (declared, released by ``"auto"``,
        or read off the data).
    centre_ : ndarray of shape (n_features,)
        The released centre of ``data_norm="auto"`` with ``centered=False``
        (absent otherwise).
    n_components_ : int
    n_samples_ : int
        Number of training records (public under replace-one neighbours).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features,)
    privacy_spent_ : PrivacySpent
    privacy_ledger_ : PrivacyLedger
        One Gaussian event for the matrix (and one for the mean).

    See Also
    --------
    sklearn.decomposition.PCA : the non-private PCA.

    References
    ----------
    C. Dwork, K. Talwar, A. Thakurta, L. Zhang. Analyze Gauss: optimal bounds
    for privacy-preserving principal component analysis. STOC 2014.

    B. Balle, Y.-X. Wang. Improving the Gaussian mechanism for differential
    privacy: analytical calibration and optimal denoising. ICML 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.preprocessing import DPPCA
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 3)) * [3.0, 1.0, 0.3]
    >>> pca = DPPCA(n_components=1, data_norm=10.0, random_state=0).fit(X)
    >>> np.abs(pca.components_).round(1)
    array([[1., 0., 0.]])
    """

    # Released: the noisy second-moment matrix and (centered=False) the noisy
    # sum, two Gaussian events, and their post-processing (covariance_,
    # components_, explained variances, mean_); data_norm_ declared (or read
    # off the data, warned); n public under replace-one neighbours.
    _released_attributes = frozenset(
        {
            "components_",
            "explained_variance_",
            "explained_variance_ratio_",
            "covariance_",
            "mean_",
            "data_norm_",
            "centre_",
            "n_components_",
            "n_samples_",
        }
    )

    _parameter_constraints = {
        **PRIVACY_PARAMETER_CONSTRAINTS,
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "data_norm": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto", "nonprivate"})],
        "centered": ["boolean"],
        "bounds_budget": [Interval(Real, 0, 1, closed="neither")],
    }

    def __init__(
        self,
        n_components=None,
        epsilon=1.0,
        delta=1e-5,
        data_norm="auto",
        centered=False,
        bounds_budget=DEFAULT_BOUNDS_BUDGET,
        accountant=None,
        random_state=None,
        secure_noise=None,
    ):
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.centered = centered
        self.bounds_budget = bounds_budget
        self.accountant = accountant
        self.random_state = random_state
        self.secure_noise = secure_noise

    def _check_n_components(self, n_features):
        if self.n_components is not None and self.n_components > n_features:
            raise ValueError(
                f"n_components={self.n_components} must be at most the number of features ({n_features})."
            )
        return n_features if self.n_components is None else int(self.n_components)

    # The template's steps (skdp.base.DPEstimatorMixin._private_fit).
    def _check_public_input(self, X, y=None):
        shape = getattr(X, "shape", None)
        # An X with no column is left to validation, whose message names it.
        if shape is not None and len(shape) == 2 and isinstance(shape[1], Integral) and shape[1] >= 1:
            self._check_n_components(int(shape[1]))

    def _noise_mechanisms(self):
        if self._auto_bounds() is not None:
            return (SymmetricMatrixGaussianMechanism, ExponentialMechanism)
        return (SymmetricMatrixGaussianMechanism,)

    def _auto_bounds(self, secure_noise=False):
        """The :class:`~skdp.privacy.centring.AutoBounds` plan of ``data_norm="auto"``, else None."""
        return auto_bounds_plan(
            self.data_norm,
            self.epsilon,
            self.delta,
            self.bounds_budget,
            centre=not self.centered,
            neighbouring=self._neighbouring,
            secure_noise=secure_noise,
        )

    def _privacy_plan(self):
        return PrivacyPlan(self.epsilon, self.delta, DEFAULT_COMPOSITION)

    def _calibrate(self, data, plan):
        n_releases = 1 if self.centered else 2

        def events(z):
            return [GaussianEvent(count=n_releases, neighbouring=self._neighbouring, noise_multiplier=z)]

        bounds = self._auto_bounds(plan.secure_noise)
        z = calibrate_after_bounds(
            events, bounds, plan.epsilon, plan.delta, plan.composition, secure_noise=plan.secure_noise
        )
        return plan.with_settings(PCASettings(noise_multiplier=z, bounds=bounds))

    def _fit_private(self, data, plan, rng, ledger):
        d = data.n_features
        k = self._check_n_components(d)
        self.__dict__.pop("centre_", None)
        centre = None
        if plan.settings.bounds is not None:
            centre, norm = private_centring(data.reduce, data.n_samples, d, plan.settings.bounds, rng, ledger)
            if self.centered:
                centre = None  # declared centred at 0: c = 0, not released
            else:
                self.centre_ = centre
        elif self.data_norm == "nonprivate":
            warn_privacy_leak("data_norm", "the largest row norm")
            norm = data.summary.max_norm if data.chunked else float(row_norms(data.X).max())
            # An all-zero dataset has no norm to clip to: any positive bound is exact.
            norm = norm if norm > 0 else 1.0
        else:
            norm = float(self.data_norm)
        self.data_norm_ = norm
        stats = (
            data.chunks.map_reduce(pca_statistics, norm, centre)
            if data.chunked
            else pca_statistics(data.X, norm, centre)
        )
        n = self.n_samples_ = int(data.n_samples)
        z = plan.settings.noise_multiplier
        moment_sens = outer_product_sum_sensitivity(norm, d)
        moments = SymmetricMatrixGaussianMechanism(moment_sens, z * moment_sens).release(
            (stats[1:] + stats[1:].T) / 2, rng, ledger
        )
        # Post-processing of the released matrix (and sum) from here on.
        if self.centered:
            self.mean_ = np.zeros(d)
            covariance = moments / n
        else:
            sum_sens = row_sum_sensitivity(norm, d)
            total = GaussianMechanism(sum_sens, z * sum_sens).release(stats[0], rng, ledger)
            shifted_mean = total / n
            # Covariance of the shifted rows (a shift does not change it); the mean back in place.
            covariance = (moments - n * np.outer(shifted_mean, shifted_mean)) / max(n - 1, 1)
            self.mean_ = shifted_mean if centre is None else shifted_mean + centre
        self.covariance_ = covariance
        values, vectors = np.linalg.eigh(covariance)
        order = np.argsort(values)[::-1]
        values, vectors = np.maximum(values[order], 0.0), vectors[:, order].T
        # Deterministic signs (as scikit-learn's svd_flip): largest entry positive.
        signs = np.sign(vectors[np.arange(d), np.argmax(np.abs(vectors), axis=1)])
        vectors *= np.where(signs == 0, 1.0, signs)[:, None]
        self.n_components_ = k
        self.components_ = vectors[:k]
        self.explained_variance_ = values[:k]
        total_variance = values.sum()
        self.explained_variance_ratio_ = values[:k] / total_variance if total_variance > 0 else np.zeros(k)

    @private_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Release the private covariance and its principal components.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A 2-D ``numpy.memmap``, Dask array or DataFrame, or a callable
            returning chunks, is read chunk by chunk (:doc:`/scale_out`).
        y : None
            Ignored.

        Returns
        -------
        self : DPPCA
        """
        return self._private_fit(X)

    def transform(self, X):
        """Project ``X`` on the released components: ``(X - mean_) @ components_.T`` (free).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=FLOAT_DTYPES)
        return (X - self.mean_) @ self.components_.T

    def inverse_transform(self, X):
        """Map projections back to feature space: ``X @ components_ + mean_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components)

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        X = np.asarray(X, dtype=float)
        return X @ self.components_ + self.mean_

    @property
    def _n_features_out(self):
        """Number of output features (ClassNamePrefixFeaturesOutMixin)."""
        return self.components_.shape[0]
