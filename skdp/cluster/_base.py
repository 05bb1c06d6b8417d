"""Template of a DP Lloyd estimator: the loop and the budget live here.

Subclasses say how rows are mapped to the space the clustering runs in
(identity for :class:`~skdp.cluster.DPKMeans`, random Fourier features for
:class:`~skdp.cluster.DPKernelKMeans`) and how the clipping bound is chosen;
the base class owns the plan, the calibration, the iterations and the
scikit-learn clustering API.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits

from ..base import PRIVACY_PARAMETER_CONSTRAINTS, DPEstimatorMixin
from ..privacy import COMPOSITIONS, GaussianMechanism, LaplaceMechanism
from ._lloyd import (
    assign,
    clip_rows,
    count_noise_weight,
    count_sensitivity,
    dp_lloyd_step,
    lloyd_noise_multiplier,
    random_partition_step,
    split_largest,
    squared_distances,
    sum_sensitivity,
)

_MECHANISMS = {"gaussian": (GaussianMechanism, 2), "laplace": (LaplaceMechanism, 1)}


class _BaseDPLloyd(
    DPEstimatorMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin, BaseEstimator
):
    """DP Lloyd's algorithm in a feature space given by the subclass."""

    _parameter_constraints = {
        **PRIVACY_PARAMETER_CONSTRAINTS,
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"random"}), "array-like"],
        "composition": [StrOptions(set(COMPOSITIONS))],
        "count_noise_weight": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
    }

    #: Mechanism family; DPKMeans makes it a hyperparameter.
    mechanism = "gaussian"

    # --- hooks -----------------------------------------------------------
    def _fit_feature_map(self, n_features, rng):
        """Draw any data-independent randomness of the feature map (default: none)."""

    def _features(self, X):
        """Map validated rows to the clustering space (before clipping)."""
        return X

    def _n_norm_selections(self):
        """How many DPNorm releases the plan contains."""
        return 0

    def _select_bound(self, Z, noise_multiplier, rng, ledger):
        """Clipping bound of the rows of ``Z``; may release through ``ledger``."""
        raise NotImplementedError

    # --- fit ---------------------------------------------------------------
    def _check_init(self, n_features):
        if isinstance(self.init, str):
            return None
        init = np.asarray(self.init, dtype=float)
        if init.shape != (self.n_clusters, n_features):
            raise ValueError(
                f"init must be 'random' or an array of shape (n_clusters, n_features) = "
                f"({self.n_clusters}, {n_features}), got shape {init.shape}."
            )
        if not np.all(np.isfinite(init)):
            raise ValueError("init contains NaN or infinity.")
        return init

    def _count_weight(self, dim):
        if self.count_noise_weight == "auto":
            return count_noise_weight(self.mechanism, dim)
        return float(self.count_noise_weight)

    def _noise_multiplier(self, count_weight):
        return lloyd_noise_multiplier(
            int(self.max_iter),
            self.mechanism,
            self._n_norm_selections(),
            float(count_weight),
            float(self.epsilon),
            float(self.delta),
            self.composition,
        )

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Release ``n_clusters`` private centres of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows.
        y : None
            Ignored.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        if self.mechanism == "gaussian" and self.delta <= 0:
            raise ValueError("delta must be positive with the Gaussian mechanism; got delta=0.")
        # Small (n, k) products: one BLAS thread avoids oversubscription, as
        # scikit-learn's KMeans does.
        with threadpool_limits(limits=1, user_api="blas"):
            return self._fit(X)

    def _fit(self, X):
        ledger, rng = self._begin_private_fit(composition=self.composition)
        X = validate_data(self, X, dtype=np.float64)
        if X.shape[0] < self.n_clusters:
            raise ValueError(f"n_samples={X.shape[0]} should be >= n_clusters={self.n_clusters}.")
        init = self._check_init(X.shape[1])
        self._fit_feature_map(X.shape[1], rng)
        Z = self._features(X)
        count_weight = self._count_weight(Z.shape[1])
        noise_multiplier = self._noise_multiplier(count_weight)
        bound = self._select_bound(Z, noise_multiplier, rng, ledger)
        Z = clip_rows(Z, bound)

        mechanism_class, norm = _MECHANISMS[self.mechanism]
        count_sens = count_sensitivity(norm)
        sum_sens = sum_sensitivity(bound, norm, Z.shape[1])
        count_mechanism = mechanism_class(count_sens, noise_multiplier * count_weight * count_sens)
        sum_mechanism = mechanism_class(sum_sens, noise_multiplier * sum_sens)

        k = self.n_clusters
        n_reseeded = 0
        if init is None:

            def reseed(idx, centres, noisy_counts):
                return split_largest(idx, centres, noisy_counts, bound, rng)

            # The first iteration starts from a random partition (data-independent).
            centres, noisy_counts, reseeded = random_partition_step(
                Z, k, count_mechanism, sum_mechanism, bound, reseed, rng, ledger
            )
            n_reseeded += int(reseeded.sum())
            n_remaining = self.max_iter - 1
        else:
            public = clip_rows(self._features(init), bound)
            centres = public.copy()

            def reseed(idx, centres, noisy_counts):
                return public[idx]

            n_remaining = self.max_iter
        for _ in range(n_remaining):
            centres, noisy_counts, reseeded = dp_lloyd_step(
                Z, centres, count_mechanism, sum_mechanism, bound, reseed, rng, ledger
            )
            n_reseeded += int(reseeded.sum())
        self._end_private_fit(ledger)

        self.noise_multiplier_ = noise_multiplier
        self.clip_bound_ = float(bound)
        self.cluster_centers_ = centres
        self.noisy_counts_ = noisy_counts
        self.n_reseeded_ = n_reseeded
        self.n_iter_ = int(self.max_iter)
        # Functions of the private training rows, outside the guarantee (class docstring).
        self.labels_ = assign(Z, centres)
        self.inertia_ = float(squared_distances(Z, centres)[np.arange(len(Z)), self.labels_].sum())
        return self

    # --- post-processing of the released centres ----------------------------
    def _clipped_features(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return clip_rows(self._features(X), self.clip_bound_)

    def predict(self, X):
        """Index of the nearest released centre for each row (post-processing).

        Rows are mapped and clipped as in training before the assignment.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return assign(self._clipped_features(X), self.cluster_centers_)

    def fit_predict(self, X, y=None):
        """Fit and return ``labels_`` (not covered by the guarantee; see the class docstring).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return self.fit(X).labels_

    def transform(self, X):
        """Euclidean distances of the mapped, clipped rows to every released centre.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        distances : ndarray of shape (n_samples, n_clusters)
        """
        return np.sqrt(squared_distances(self._clipped_features(X), self.cluster_centers_))

    def score(self, X, y=None):
        """Opposite of the k-means objective of ``X`` against the released centres.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        score : float
        """
        d2 = squared_distances(self._clipped_features(X), self.cluster_centers_)
        return -float(d2.min(axis=1).sum())

    @property
    def _n_features_out(self):
        return self.cluster_centers_.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags
