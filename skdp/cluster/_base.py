"""Template of a DP Lloyd estimator: the loop and the budget live here.

Subclasses say how rows are mapped to the space the clustering runs in
(identity for :class:`~skdp.cluster.DPKMeans`, random Fourier features for
:class:`~skdp.cluster.DPKernelKMeans`) and how the clipping bound is chosen;
the base class owns the plan, the calibration, the iterations and the
scikit-learn clustering API.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._input import validate_fit_input
from ..base import PRIVACY_PARAMETER_CONSTRAINTS, DPEstimatorMixin, private_fit_context
from ..privacy import GaussianMechanism, LaplaceMechanism
from ..privacy.ledger import COMPOSITION_CONSTRAINT
from ._blas import threadpool_limits
from ._lloyd import (
    BoxBallProjection,
    assign,
    auto_max_iter,
    box_diagonal_centres,
    clip_rows,
    count_noise_weight,
    count_sensitivity,
    lloyd_noise_multiplier,
    project_to_ball,
    relative_centre_noise,
    release_centres,
    split_largest,
    squared_distances,
    sum_sensitivity,
    uniform_variance,
)
from ._rows import apply_feature_map, training_rows

_MECHANISMS = {"gaussian": (GaussianMechanism, 2), "laplace": (LaplaceMechanism, 1)}

#: Relative centre noise (:func:`~skdp.cluster._lloyd.relative_centre_noise`) above which a
#: declared box gives ``init="random"`` the diagonal start rather than the random partition.
DIAGONAL_START_NOISE = 0.2

#: Relative centre noise above which a fit on the ball around a released centre (no box;
#: DPKMeans' ``data_norm="auto"``, ``_ball_prior``) takes a box's rules on the cube
#: inscribed in the ball, ``[-C / sqrt(d), C / sqrt(d)]^d``:
#: the public start along its diagonal, the posterior shrinkage towards the previous
#: centres with the ball's uniform prior variance ``C^2 / (d + 2)``, and unusable centres
#: kept.  Above it the noise moves an average centre by more than half the radius, so
#: the plain update puts the centres at random points of the ball.  Below it the plain
#: update is kept: at the box's 0.2 the shrinkage changed which local minimum
#: blobs-5000x64 and breast_cancer fell into (the zoo, 5 seeds: -8.3 -> -10.4 at eps
#: 0.3, -2.55 -> -2.77 at eps 1).
BALL_PRIOR_NOISE = 0.5

#: Noise std of a released cluster size, over the average size ``n / k``, above
#: which a declared box's fit never splits a cluster to re-seed an unusable
#: centre (it keeps its previous centre).  With the sizes' noise at three
#: average clusters, a noisy size below 1 no longer tells an empty cluster
#: from a full one, and the largest noisy size picks the cluster to split
#: nearly at random: on iris at epsilon 0.1 (ratio 3.8) splitting put two
#: centres together (30-seed ACC .660; keeping, .853).  A round number fixed
#: from public quantities (``n`` is public under replace-one), chosen above
#: the ratio where splitting still pays (digits at epsilon 0.1, ratio 1.9:
#: keeping costs ACC .243 -> .112).
KEEP_UNUSABLE_COUNT_NOISE = 3.0

#: Rows times clusters from which the assignment products use every BLAS thread.
_BLAS_PARALLEL_WORK = 200_000


def _blas_threads(rows, n_clusters):
    """BLAS thread limit of a fit: 1 for small products, None (no limit) for large ones.

    Small ``(n, k)`` products run faster on one thread (no oversubscription,
    as in scikit-learn's KMeans); from a few hundred thousand row-centre
    pairs the assignment's matrix product gains from every core.  Chunked
    input is read in large chunks, so it is never limited.
    """
    if rows.chunked:
        return None
    return 1 if rows.n_samples * n_clusters < _BLAS_PARALLEL_WORK else None


def _keep(previous):
    """Re-seeding that puts an unusable centre back at its ``previous`` (public) value."""

    def reseed(idx, centres, noisy_counts):
        return previous[idx]

    return reseed


@dataclass(frozen=True)
class LloydSettings:
    """The DP Lloyd plan (``_BaseDPLloyd._calibrate``), from the public ``n`` and dimension.

    Attributes
    ----------
    dim : int
        Dimension of the clustering space (the input's, or the random features').
    count_weight : float
        Noise of the sizes relative to the sums' (Acs et al., Alg. 2).
    noise_multiplier : float
        The sums' noise multiplier; the sizes get ``count_weight`` times it.
    n_iter : int or None
        Number of Lloyd iterations, each released (None for a coreset fit).
    """

    dim: int
    count_weight: float
    noise_multiplier: float
    n_iter: int | None = None


class _BaseDPLloyd(
    DPEstimatorMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin, BaseEstimator
):
    """DP Lloyd's algorithm in a feature space given by the subclass."""

    #: The estimator's plan type (a subclass adds its own fields).
    _settings_type = LloydSettings

    #: The fitted attribute holding the row bound in the clustering space: ``data_norm_``
    #: (a bound on the input rows, :class:`DPKMeans`) or ``clip_norm_`` (on the random
    #: features, :class:`DPKernelKMeans`), named after the parameter that sets it.
    _bound_attribute = "data_norm_"

    #: Whether a fit on a ball takes a box's rules under heavy noise (:data:`BALL_PRIOR_NOISE`):
    #: DPKMeans' ball around its released centre only.  DPKernelKMeans keeps the plain
    #: update (with the rule its zoo rows moved both ways, blobs-150x2 at eps 10 -1.04 -> -2.66).
    _ball_prior = False

    _parameter_constraints = {
        **PRIVACY_PARAMETER_CONSTRAINTS,
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "init": [StrOptions({"random"}), "array-like"],
        "composition": [COMPOSITION_CONSTRAINT],
        "count_noise_weight": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
    }

    #: Mechanism family; DPKMeans makes it a hyperparameter.
    mechanism = "gaussian"

    # --- hooks -----------------------------------------------------------
    def _fit_feature_map(self, n_features, rng):
        """Draw any data-independent randomness of the feature map (default: none)."""

    def _feature_map(self):
        """Picklable description of the map to the clustering space (``None``: identity)."""
        return None

    def _feature_dim(self, n_features):
        """Dimension of the clustering space."""
        return n_features

    def _features(self, X):
        """Map validated rows to the clustering space (before clipping)."""
        return apply_feature_map(X, self._feature_map())

    def _n_norm_selections(self):
        """How many DPNorm releases the plan contains."""
        return 0

    def _select_bound(self, rows, noise_multiplier, rng, ledger):
        """Clipping bound of the mapped ``rows`` (a row source); may release through ``ledger``."""
        raise NotImplementedError

    def _projection(self, bound):
        """Post-processing of noisy centres onto a public convex set (``None``: the ball of radius ``bound``)."""
        return None

    def _public_box(self, project):
        """The declared box in the clustering space, ``(lower, upper)``, or None.

        Read off the projection (:class:`BoxBallProjection`, public): it
        gives ``init="random"`` its diagonal start and the shrinkage its
        prior variance.
        """
        if isinstance(project, BoxBallProjection):
            return project.lower, project.upper
        return None

    def _released_centres(self, centres):
        """``cluster_centers_`` from the centres in the clustering space (default: the same)."""
        return centres

    def _space_centres(self):
        """The released centres in the clustering space (the inverse of :meth:`_released_centres`)."""
        return self.cluster_centers_

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

    #: Keyword arguments of :func:`~skdp.cluster._lloyd.auto_max_iter` for
    #: ``max_iter="auto"`` (the rule's ratio, floor and cap); a subclass
    #: with its own rule sets its own.
    _auto_max_iter_rule = {}

    def _n_iter(self, n_samples, dim, count_weight, *, secure_noise=False, start=False):
        """``max_iter``, or the ``"auto"`` rule (public quantities only; ``start``: the plan with a private start)."""
        if self.max_iter != "auto":
            return int(self.max_iter)
        return auto_max_iter(
            lambda T: self._noise_multiplier(count_weight, T, secure_noise=secure_noise, start=start),
            self.mechanism,
            n_samples,
            self.n_clusters,
            dim,
            **self._auto_max_iter_rule,
        )

    def _bounds_plan(self, secure_noise=False):
        """The plan of the releases that locate the data before Lloyd's, composed first; None: none."""
        return None

    def _start_events(self, n_iter, count_weight):
        """Events of a private start released before the iterations, as a function of the noise multiplier.

        Read for a plan with a private start only (``start=True`` in
        :meth:`_calibrate`).  None (the default): no private start.
        """
        return None

    def _private_start(self, rows, settings, bound, project, rng, ledger):
        """Privately chosen starting centres in the clustering space, or None (default: none).

        Called on the mapped, clipped ``rows`` before the iterations, with
        ``init="random"``; its releases must be the plan's
        (:meth:`_start_events`).
        """
        return None

    def _noise_multiplier(self, count_weight, n_iter, *, secure_noise=False, start=False):
        return lloyd_noise_multiplier(
            int(n_iter),
            self.mechanism,
            self._n_norm_selections(),
            float(count_weight),
            float(self.epsilon),
            float(self.delta),
            self.composition,
            secure_noise=secure_noise,
            bounds=self._bounds_plan(secure_noise),
            start=self._start_events(n_iter, count_weight) if start else None,
        )

    @private_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Release ``n_clusters`` private centres of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or chunked rows
            Training rows.  A ``numpy.memmap``, a Dask array or DataFrame,
            or a callable returning a fresh iterable of 2-D chunks is read
            chunk by chunk, with the same releases and the same guarantee
            (see :doc:`/scale_out`).
        y : None
            Ignored.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        return self._private_fit(X)

    @private_fit_context(prefer_skip_nested_validation=True)
    def fit_predict(self, X, y=None):
        """Fit, then return the nearest released centre of every row of ``X``.

        The same fit as :meth:`fit`; the labels are the released centres
        applied to ``X`` (``predict(X)`` on the fitted model, also for chunked
        ``X``).  They are returned to the caller and never stored on the
        model: labels of the *training* rows are exact functions of every
        row, so they are not covered by the guarantee, and publishing them
        is the caller's decision (see the class docstring).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or chunked rows
            Training rows, as in :meth:`fit`.
        y : None
            Ignored.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Index of the nearest released centre of each (mapped, clipped) row.
        """
        # The fit's own (mapped, clipped) rows come back through this list,
        # so labelling them costs no second mapping in memory and one pass
        # when chunked; the list dies with this call.
        fitted_rows = []
        self._private_fit(X, rows_out=fitted_rows)
        (rows,) = fitted_rows
        with threadpool_limits(limits=_blas_threads(rows, self.n_clusters), user_api="blas"):
            return rows.labels(self._space_centres())

    # The template's steps (skdp.base.DPEstimatorMixin._private_fit).
    def _check_params(self):
        if self.mechanism == "gaussian" and self.delta <= 0:
            raise ValueError("delta must be positive with the Gaussian mechanism; got delta=0.")

    def _check_n_samples(self, n_samples):
        # Under replace-one neighbours n is public: scikit-learn's refusal.
        if n_samples < self.n_clusters:
            raise ValueError(f"n_samples={n_samples} should be >= n_clusters={self.n_clusters}.")

    def _validate_input(self, X, y=None, rows_out=None):
        """The training rows as a source of exact statistics (in memory or chunked: one scan)."""
        rows = training_rows(validate_fit_input(self, X))
        self._check_n_samples(rows.n_samples)
        if rows_out is not None:
            rows_out.append(rows)
        return rows

    def _calibrate(self, rows, plan, *, start=False):
        """Iterations and noise multiplier of the whole fit, from the public ``n`` and dimension.

        ``start``: the plan begins with a private start's releases
        (:meth:`_start_events`), composed with the iterations'.
        """
        dim = self._feature_dim(rows.n_features)
        count_weight = self._count_weight(dim)
        secure = plan.secure_noise
        n_iter = self._n_iter(rows.n_samples, dim, count_weight, secure_noise=secure, start=start)
        noise_multiplier = self._noise_multiplier(count_weight, n_iter, secure_noise=secure, start=start)
        return plan.with_settings(
            self._settings_type(
                dim=dim, count_weight=count_weight, n_iter=n_iter, noise_multiplier=noise_multiplier
            )
        )

    def _bounded_rows_and_mechanisms(self, rows, dim, count_weight, noise_multiplier, rng, ledger):
        """Map, bound and clip ``rows`` in place; the plan's count and sum mechanisms.

        Acs et al., Alg. 2 lines 6-10: the rows are clipped to the bound
        ``C`` (declared, the box's, or released by ``data_norm="auto"``), and
        the sizes and sums get the sensitivities of :func:`count_sensitivity`
        and :func:`sum_sensitivity` at the plan's noise multipliers.  Shared
        by DP Lloyd and the private coreset (which release the same kinds of
        statistics).

        Returns
        -------
        bound : float
        count_mechanism, sum_mechanism : mechanisms of :mod:`skdp.privacy`
        """
        rows.map_features(self._feature_map())
        bound = self._select_bound(rows, noise_multiplier, rng, ledger)
        rows.clip(bound)
        return (bound, *self._count_and_sum_mechanisms(bound, dim, count_weight, noise_multiplier))

    def _count_and_sum_mechanisms(self, bound, dim, count_weight, noise_multiplier):
        """The count and sum mechanisms of rows clipped to ``bound``, at the plan's noise multipliers.

        Sensitivities :func:`count_sensitivity` and :func:`sum_sensitivity`
        in the mechanism's norm; the counts' multiplier is ``count_weight``
        times the sums'.
        """
        mechanism_class, norm = _MECHANISMS[self.mechanism]
        count_sens = count_sensitivity(norm)
        sum_sens = sum_sensitivity(bound, norm, dim)
        count_mechanism = mechanism_class(count_sens, noise_multiplier * count_weight * count_sens)
        sum_mechanism = mechanism_class(sum_sens, noise_multiplier * sum_sens)
        return count_mechanism, sum_mechanism

    def _store_fit(self, noise_multiplier, bound, centres, noisy_counts, n_reseeded, n_iter):
        """Set the fitted attributes every fit releases (centres in the clustering space)."""
        self.noise_multiplier_ = noise_multiplier
        setattr(self, self._bound_attribute, float(bound))
        self.cluster_centers_ = self._released_centres(centres)
        self.noisy_counts_ = noisy_counts
        self.n_reseeded_ = n_reseeded
        self.n_iter_ = n_iter

    def _fit_private(self, rows, plan, rng, ledger):
        """``n_iter`` DP Lloyd iterations (Acs et al., Alg. 2 lines 5-11), every one released."""
        init = self._check_init(rows.n_features)
        self._fit_feature_map(rows.n_features, rng)
        s = plan.settings
        dim, count_weight, n_iter, noise_multiplier = s.dim, s.count_weight, s.n_iter, s.noise_multiplier
        with threadpool_limits(limits=_blas_threads(rows, self.n_clusters), user_api="blas"):
            bound, count_mechanism, sum_mechanism = self._bounded_rows_and_mechanisms(
                rows, dim, count_weight, noise_multiplier, rng, ledger
            )
            project = self._projection(bound)
            box = self._public_box(project)
            k = self.n_clusters
            noise = relative_centre_noise(noise_multiplier, self.mechanism, rows.n_samples, k, dim)
            # The posterior-mean shrinkage's prior variance: the uniform
            # distribution on the declared box.  Without a box (a ball of
            # radius C around a released or declared centre) the plain update
            # is kept where the noise is moderate (on blobs the shrinkage
            # changed which seeds fall into local minima, for no gain at
            # epsilon >= 1); under heavy noise the ball takes the box's rules
            # on its inscribed cube (BALL_PRIOR_NOISE, public quantities).
            prior_var = None if box is None else uniform_variance(bound, dim, box)
            if box is None and self._ball_prior and noise > BALL_PRIOR_NOISE:
                half = bound / np.sqrt(dim)
                box = (np.full(dim, -half), np.full(dim, half))
                prior_var = uniform_variance(bound, dim)
                if project is None:
                    project = functools.partial(project_to_ball, bound=bound)
            n_reseeded = 0
            # With a box and no public init, an unusable centre keeps its
            # previous value instead of being split off the largest cluster:
            # in the last iteration (nothing later would estimate the split),
            # and at every iteration when the sizes' noise hides which cluster
            # is largest (public: the plan's count noise and n, replace-one).
            keeps_unusable = box is not None and init is None
            sizes_uninformative = count_mechanism.std / (rows.n_samples / k) > KEEP_UNUSABLE_COUNT_NOISE
            if init is None:

                def reseed(idx, centres, noisy_counts):
                    return split_largest(idx, centres, noisy_counts, bound, rng)

                start = self._private_start(rows, s, bound, project, rng, ledger)
                if start is not None:
                    # A privately chosen start (accounted in the plan): every
                    # iteration is a Lloyd step.
                    centres = start
                    n_remaining = n_iter
                elif box is not None and noise > DIAGONAL_START_NOISE:
                    # A declared box: public centres spread along its diagonal,
                    # so every iteration is a Lloyd step (no release is spent on
                    # a random partition, whose cells all share the global mean).
                    centres = project(box_diagonal_centres(*box, k))
                    n_remaining = n_iter
                else:
                    # The first iteration starts from a random partition (data-independent).
                    counts, sums = rows.random_partition_statistics(k, rng)
                    centres, noisy_counts, reseeded = release_centres(
                        counts, sums, count_mechanism, sum_mechanism, bound, reseed, rng, ledger, project
                    )
                    n_reseeded += int(reseeded.sum())
                    n_remaining = n_iter - 1
            else:
                public = clip_rows(self._features(init), bound)
                centres = public.copy()
                reseed = _keep(public)
                n_remaining = n_iter
            for it in range(n_remaining):
                counts, sums = rows.statistics(centres)
                keep = keeps_unusable and (it == n_remaining - 1 or sizes_uninformative)
                centres, noisy_counts, reseeded = release_centres(
                    counts,
                    sums,
                    count_mechanism,
                    sum_mechanism,
                    bound,
                    _keep(centres) if keep else reseed,
                    rng,
                    ledger,
                    project,
                    prior=None if prior_var is None else centres,
                    prior_var=prior_var,
                )
                n_reseeded += int(reseeded.sum())

        self._store_fit(noise_multiplier, bound, centres, noisy_counts, n_reseeded, n_iter)
        # No labels_ or inertia_: labels and objective of the training rows
        # are exact functions of every row, outside the guarantee.
        # fit_predict and score compute them on request, without storing.

    # --- post-processing of the released centres ----------------------------
    def _clipped_features(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return clip_rows(self._features(X), getattr(self, self._bound_attribute))

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
        return assign(self._clipped_features(X), self._space_centres())

    def transform(self, X):
        """Euclidean distances of the mapped, clipped rows to every released centre.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        distances : ndarray of shape (n_samples, n_clusters)
        """
        return np.sqrt(squared_distances(self._clipped_features(X), self._space_centres()))

    def score(self, X, y=None):
        """Opposite of the k-means objective of ``X`` against the released centres.

        Post-processing of the centres for any ``X``.  On the *training* rows
        it is the exact inertia (the objective scikit-learn's ``KMeans``
        stores as ``inertia_``): a function of every row, not covered by the
        guarantee.  A diagnostic the caller asks for: it is returned, never
        stored on the model, and must not be published as private.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        score : float
            Minus the sum of squared distances of the mapped, clipped rows
            to their nearest released centre.
        """
        d2 = squared_distances(self._clipped_features(X), self._space_centres())
        return -float(d2.min(axis=1).sum())

    @property
    def _n_features_out(self):
        return self.cluster_centers_.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags
