"""DPGenerativeMixture: a DP mixture of generative neural networks (Acs et al. 2018, Alg. 1)."""

from __future__ import annotations

from dataclasses import dataclass, replace
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

from .._input import FitInput
from ..base import PRIVACY_PARAMETER_CONSTRAINTS, DPEstimatorMixin, private_fit_context
from ..preprocessing._standard import check_bounds
from ..privacy import (
    ADD_REMOVE,
    DEFAULT_COMPOSITION,
    GaussianMechanism,
)
from ..privacy.dpsgd import (
    count_noise_multiplier,
)
from ..privacy.ledger import COMPOSITION_CONSTRAINT
from ..privacy.mechanisms.torch_noise import TorchGaussianMechanism
from ..privacy.norm_selection import DPNormOptions
from ._clustering import (
    DEFAULT_NETWORK_CLUSTERS,
    cluster_records,
    clustering_events_as_add_remove,  # noqa: F401  (tested from here)
    partition_mode,
)
from ._domain import decode_records, encode_records, encoded_layout, hat_log_density
from ._dpsgd import (
    cluster_schedule,  # noqa: F401  (tested from here)
    fit_networks,
    sgd_plan_event,
)
from ._inference import (
    draw_records,
    log_joint,
    network_score_samples,
    sample_clusters,
    to_data_range,
)
from ._inference import sample_generator as _sample_generator  # noqa: F401  (tested from here)
from ._latent_em import fit_marginals_generator
from ._marginals import binary_columns, check_one_hot, column_layout, continuous_columns, declared_blocks
from ._options import check_options
from ._tree import fitted_tree_log_likelihood, sample_fitted_tree

__all__ = ["DPGenerativeMixture"]

# Relative precision of the noise calibration; the returned multiplier is the
# upper end of the bracket, so the plan never exceeds the budget.
_CALIBRATION_RTOL = 1e-3

# --------------------------------------------------------------------------
# The privacy plan.  The math is in pure functions: the marginals fit in
# _latent_em.py, the column layout in _marginals.py and _domain.py, the
# partition and the composition probe in _clustering.py and _dpsgd.py.
# --------------------------------------------------------------------------


# Everything a fitted model holds besides its parameters (and
# n_features_in_, feature_names_in_, privacy_spent_, privacy_ledger_).
# No labels_: the partition of the training rows is an exact function of
# every row; fit_predict returns it, never stores it.
_RELEASED_ATTRIBUTES = frozenset(
    {
        # Released: its centres, sizes and DPNorm bound are accounted
        # (its events are on the ledger); its random features are
        # data-independent; its random_state is None (no seed kept).
        "clusterer_",
        # Trained by DP-SGD (accounted steps) from data-independent
        # initialisation; the RBM's chains never see a record.
        "generators_",
        # Post-processing of the released noisy sizes (or the declared
        # n_samples): p_s, the sizes floored at 1, q_s, T_S.
        "weights_",
        "cluster_sizes_",
        "sampling_rates_",
        "n_steps_",
        # Drawn from the public p_s with data-independent randomness;
        # the accounting treats the model updated at each step as public.
        "cluster_steps_",
        # Calibrated from the public plan (functions of the above and of
        # the clustering's data-independent plan).
        "noise_multiplier_",
        "clip_noise_multiplier_",
        # "ghost" or "vmap": chosen from the model's layer types only.
        "clipping_mode_",
        # generator="marginals": post-processing of the one accounted
        # Gaussian release of the clusters' centred sums (None otherwise),
        # and that release's public noise std.
        "marginals_",
        "noise_std_",
        # The continuous columns' domain: declared, or the private box
        # (two accounted histogram releases); the grid size G, chosen from
        # the released size and public quantities (or declared).
        "bounds_",
        "n_bins_",
        # Number of DP-EM releases: chosen from the number of classes.
        "n_iter_",
        # "tree" or "classes": chosen from public quantities and the released
        # size; the tree's edges (selected by the accounted exponential
        # mechanism, or post-processing of the accounted 2-way tables) and its
        # 1-way and 2-way distributions (post-processing of accounted releases).
        "structure_",
        "tree_",
        "tree_marginals_",
        "tree_tables_",
    }
)

_PARAMETER_CONSTRAINTS = {
    **PRIVACY_PARAMETER_CONSTRAINTS,
    "delta": [Interval(Real, 0, 1, closed="neither")],
    "n_clusters": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    "generator": [StrOptions({"marginals", "vae", "rbm"})],
    "categorical": [list, tuple, None],
    "binary": [list, tuple, None],
    "n_bins": [Interval(Integral, 2, None, closed="left"), StrOptions({"auto"})],
    "partition": [StrOptions({"auto", "kmeans", "categorical"})],
    "hidden_units": [Interval(Integral, 1, None, closed="left")],
    "latent_dim": [Interval(Integral, 1, None, closed="left")],
    "likelihood": [StrOptions({"bernoulli", "gaussian"})],
    "n_components": [Interval(Integral, 1, None, closed="left")],
    "gamma": [Interval(Real, 0, None, closed="neither"), None],
    "kmeans_iter": [Interval(Integral, 1, None, closed="left")],
    "cluster_init": [StrOptions({"random"}), "array-like"],
    "cluster_budget": [Interval(Real, 0, 1, closed="neither")],
    "batch_size": [Interval(Integral, 1, None, closed="left")],
    "n_epochs": [Interval(Integral, 1, None, closed="left")],
    "learning_rate": [Interval(Real, 0, None, closed="neither")],
    "clip_norm": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
    "clip_norm_max": [Interval(Real, 0, None, closed="neither")],
    "clip_norm_bins": [Interval(Integral, 1, None, closed="left")],
    "clip_norm_noise_ratio": [Interval(Real, 0, None, closed="neither")],
    "n_chains": [Interval(Integral, 1, None, closed="left")],
    "n_samples": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    "device": [str],
    "composition": [COMPOSITION_CONSTRAINT],
    "bounds": ["array-like", StrOptions({"auto"})],
    "structure": [StrOptions({"auto", "tree", "classes"})],
}


# --------------------------------------------------------------------------
# The estimator.
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class GenerativeMixtureSettings:
    """:class:`DPGenerativeMixture`'s plan: public choices made before the data is read.

    Attributes
    ----------
    clip_noise_ratio : float or None
        Share of the DP-SGD noise given to the DPNorm histogram of the clip
        bound (``clip_norm="auto"``), else None.
    cluster_epsilon : float or None
        Budget of the private partition (``epsilon * cluster_budget``) when
        the rows are clustered before the per-cluster models, else None.
    count_noise_std : float or None
        Noise multiplier of the released row count, when the plan needs a
        size it was not given (``n_samples="auto"``, the marginals
        generator's capacity and box), else None.
    n_clusters : int or None
        Number of clusters the partition uses when a plan step chose it (the
        marginals generator's capacity rule, from released and public
        quantities); None: the declared ``n_clusters``.
    """

    clip_noise_ratio: float | None = None
    cluster_epsilon: float | None = None
    count_noise_std: float | None = None
    n_clusters: int | None = None


class DPGenerativeMixture(
    DPEstimatorMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin, BaseEstimator
):
    """Differentially private mixture of generative neural networks (DPGM).

    Acs et al. (2018), Alg. 1: the records are partitioned into ``k``
    clusters (DP kernel k-means, :class:`~skdp.cluster.DPKernelKMeans`, or a
    declared categorical column), then each cluster gets a generative model:
    latent-class marginals released by one Gaussian mechanism (the default),
    or a VAE or an RBM trained by ``T_S`` DP-SGD steps, each on the model of
    a cluster picked with the released noisy sizes' probabilities.
    :meth:`sample` picks a cluster with the weights ``p`` and draws from its
    model.  Continuous columns live on a declared or privately released
    domain (``bounds``); samples come back in the data's units.  With
    ``n_clusters="auto"`` (the default) the marginals generator is instead a
    tree of privately selected and measured 2-way marginals (MST, McKenna,
    Miklau & Sheldon 2021; ``structure``), which keeps every column's
    strongest dependence.

    ``privacy_spent_`` is under *add/remove* neighbours.

    Read more in the :doc:`User Guide </generative>`: the generators, the
    sensitivity of every release, the accounting, the deviations from the
    paper.

    Parameters
    ----------
    n_clusters : int or "auto", default="auto"
        Latent classes (per category of a partition block) or clusters; ``"auto"``: the capacity rule.
    generator : {"marginals", "vae", "rbm"}, default="marginals"
        Model of each cluster: released marginals, or a network trained by DP-SGD.
    categorical : list of list of int or None, default=None
        Declared one-hot blocks (column indices), ``generator="marginals"`` only.
    binary : list of int or None, default=None
        Declared binary (0/1) columns, ``generator="marginals"`` only; other columns are continuous.
    n_bins : int or "auto", default="auto"
        Grid points of each continuous column's linear binning; ``"auto"``: the capacity rule.
    partition : {"auto", "kmeans", "categorical"}, default="auto"
        Alg. 1 line 1: DP-EM classes (nested in the first block's categories) or DP kernel k-means.
    hidden_units : int, default=200
        Hidden units of the VAE's encoder and decoder, or of the RBM.
    latent_dim : int, default=2
        Latent dimension of the VAE.
    likelihood : {"bernoulli", "gaussian"}, default="bernoulli"
        Likelihood of the VAE's decoder.
    n_components : int, default=200
        Random Fourier features ``d`` of the kernel k-means.
    gamma : float or None, default=None
        RBF kernel width of the kernel k-means; ``None`` is ``1 / n_features``.
    kmeans_iter : int, default=20
        Iterations ``T_K`` of the private kernel k-means.
    cluster_init : "random" or array-like of shape (n_clusters, n_features), default="random"
        Initial centres of the kernel k-means: ``"random"`` or *public* records.
    cluster_budget : float in (0, 1), default=0.2
        Share of ``epsilon`` given to the clustering.
    batch_size : int, default=32
        Expected batch size ``L`` of every step.
    n_epochs : int, default=20
        Epochs; one epoch is ``round(sum n~ / L)`` steps.
    learning_rate : float, default=1e-3
        Adam learning rate.
    clip_norm : "auto" or float, default="auto"
        ``"auto"``: DPNorm's per-batch bound (Alg. 3); a float: a fixed clipping bound ``C``.
    clip_norm_max : float, default=10.0
        ``C_max`` of DPNorm.
    clip_norm_bins : int, default=100
        Candidate bounds ``w`` of DPNorm.
    clip_norm_noise_ratio : float, default=5.0
        DPNorm histogram's noise multiplier over the gradient's.
    n_chains : int, default=100
        Persistent chains of each RBM.
    n_samples : int or "auto", default="auto"
        Declared (public) training-set size when ``n_clusters == 1``; ``"auto"`` releases a noisy count.
    epsilon : float, default=1.0
        Privacy budget of the whole fit.
    delta : float, default=1e-5
        Privacy parameter delta (positive: the noise is Gaussian).
    composition : {"pld", "rdp", "advanced", "basic"}, default="pld"
        Accountant that calibrates the noise and reports ``privacy_spent_``.
    device : str, default="cpu"
        Torch device of the training.
    accountant : BudgetAccountant, default=None
        Shared budget charged with ``privacy_spent_``.
    random_state : int, RandomState instance or None, default=None
        Seeds the fit; a known seed lets anyone remove the noise.  No seed is kept.
    secure_noise : bool or None, default=None
        Sample Laplace and Gaussian releases exactly on a grid; None follows :func:`skdp.set_config`.
    bounds : "auto", (lows, highs) or list of (low, high), default="auto"
        Domain of the continuous columns; ``"auto"``: a private box (accounted).
    structure : {"auto", "tree", "classes"}, default="auto"
        Model of ``generator="marginals"``: a tree of privately selected and
        measured 2-way marginals (MST, McKenna et al. 2021), latent classes
        by DP-EM, or ``"auto"``: with ``n_clusters="auto"`` the tree on
        continuous columns, else whichever can release more cells at the
        rules' sizes (public sizes only; the user guide, "Which structure");
        ``n_clusters`` is unused by the tree.

    Attributes
    ----------
    clusterer_ : DPKernelKMeans or None
        The fitted private clustering (None without kernel k-means).
    weights_ : ndarray of shape (n_clusters,)
        Mixture weights ``p_s`` from the noisy cluster sizes.
    cluster_sizes_ : ndarray of shape (n_clusters,)
        Released noisy (or declared) cluster sizes.
    sampling_rates_ : ndarray of shape (n_clusters,)
        Poisson rates ``q_s`` of the batches.
    n_steps_ : int
        DP-SGD steps ``T_S`` taken.
    cluster_steps_ : ndarray of shape (n_clusters,)
        Steps taken on each cluster's model.
    clipping_mode_ : {"ghost", "vmap"}
        How per-example gradients were clipped.
    noise_multiplier_ : float
        Calibrated noise multiplier ``sigma_S``.
    clip_noise_multiplier_ : float or None
        DPNorm's noise multiplier (None with a fixed bound).
    generators_ : list of torch.nn.Module or None
        The trained models (None with ``generator="marginals"``).
    marginals_ : ndarray of shape (n_classes, n_encoded) or None
        Class-wise column and grid probabilities with ``generator="marginals"``.
    noise_std_ : float or None
        Std of the marginals release's Gaussian noise.
    bounds_ : tuple of two ndarrays of shape (n_features,)
        The domain used: declared or privately released.
    n_bins_ : int or None
        Grid points of the continuous columns.
    n_iter_ : int or None
        DP-EM releases of the marginals generator.
    structure_ : {"tree", "classes"} or None
        The model fitted by ``generator="marginals"`` (None for the networks).
    tree_ : ndarray of shape (n_attributes - 1, 2) or None
        The tree's edges ``(parent, child)`` in sampling order (attributes:
        the columns, a declared block counting as one).
    tree_marginals_ : list of ndarray or None
        Each attribute's released 1-way distribution.
    tree_tables_ : list of ndarray or None
        Each edge's released 2-way distribution (rows: the parent's values).
    privacy_spent_ : PrivacySpent
        ``(epsilon, delta)`` of the fit, under add/remove neighbours.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features,)

    See Also
    --------
    skdp.cluster.DPKernelKMeans : the clustering step.
    skdp.nn.DPSGDEngine : the DP-SGD step.

    References
    ----------
    G. Acs, L. Melis, C. Castelluccia, E. De Cristofaro. Differentially private
    mixture of generative neural networks. IEEE TKDE 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.generative import DPGenerativeMixture
    >>> rng = np.random.default_rng(0)
    >>> X = (rng.random((200, 16)) < np.r_[np.full(8, 0.9), np.full(8, 0.1)]).astype(float)
    >>> gm = DPGenerativeMixture(n_clusters=2, generator="vae", hidden_units=16, n_epochs=2,
    ...                          kmeans_iter=3, epsilon=4.0, random_state=0).fit(X)
    >>> gm.sample(5, random_state=0).shape
    (5, 16)
    >>> round(gm.privacy_spent_.epsilon, 2)
    4.0
    """

    _neighbouring = ADD_REMOVE

    _released_attributes = _RELEASED_ATTRIBUTES
    _parameter_constraints = _PARAMETER_CONSTRAINTS

    def __init__(
        self,
        n_clusters="auto",
        *,
        generator="marginals",
        categorical=None,
        binary=None,
        n_bins="auto",
        partition="auto",
        hidden_units=200,
        latent_dim=2,
        likelihood="bernoulli",
        n_components=200,
        gamma=None,
        kmeans_iter=20,
        cluster_init="random",
        cluster_budget=0.2,
        batch_size=32,
        n_epochs=20,
        learning_rate=1e-3,
        clip_norm="auto",
        clip_norm_max=10.0,
        clip_norm_bins=100,
        clip_norm_noise_ratio=5.0,
        n_chains=100,
        n_samples="auto",
        epsilon=1.0,
        delta=1e-5,
        composition=DEFAULT_COMPOSITION,
        device="cpu",
        accountant=None,
        random_state=None,
        secure_noise=None,
        bounds="auto",
        structure="auto",
    ):
        self.n_clusters = n_clusters
        self.generator = generator
        self.categorical = categorical
        self.binary = binary
        self.n_bins = n_bins
        self.partition = partition
        self.hidden_units = hidden_units
        self.latent_dim = latent_dim
        self.likelihood = likelihood
        self.n_components = n_components
        self.gamma = gamma
        self.kmeans_iter = kmeans_iter
        self.cluster_init = cluster_init
        self.cluster_budget = cluster_budget
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.learning_rate = learning_rate
        self.clip_norm = clip_norm
        self.clip_norm_max = clip_norm_max
        self.clip_norm_bins = clip_norm_bins
        self.clip_norm_noise_ratio = clip_norm_noise_ratio
        self.n_chains = n_chains
        self.n_samples = n_samples
        self.epsilon = epsilon
        self.delta = delta
        self.composition = composition
        self.device = device
        self.accountant = accountant
        self.random_state = random_state
        self.secure_noise = secure_noise
        self.bounds = bounds
        self.structure = structure

    # -- helpers ---------------------------------------------------------------

    def _k(self):
        """The declared number of clusters; ``"auto"``: ten for the networks, None for the marginals (fit's rule)."""
        if self.n_clusters != "auto":
            return int(self.n_clusters)
        return None if self.generator == "marginals" else DEFAULT_NETWORK_CLUSTERS

    def _declared_bounds(self, n_features):
        """The declared ``(lows, highs)`` of shape ``(n_features,)`` each, or None for ``bounds="auto"``.

        Both spellings of the other estimators (``(lows, highs)`` and
        ``[(lo, hi), ...]``), through the same check
        (:func:`skdp.preprocessing._standard.check_bounds`).
        """
        if isinstance(self.bounds, str):
            return None
        return check_bounds(self.bounds, n_features)

    def _validate_X(self, X, reset):
        X = validate_data(self, X, reset=reset, dtype=np.float64)
        if self.generator == "marginals":
            # Mapped per column by _encode (the domain may be released in fit).
            return X
        # The networks' domain is [0, 1]: the declared bounds are mapped onto
        # it, and the map and the clipping are per record (no data read).
        declared = self._declared_bounds(X.shape[1])
        lo, hi = (0.0, 1.0) if declared is None else declared
        return np.clip((X - lo) / (hi - lo), 0.0, 1.0)

    def _augmented(self, n_features, n_bins, indicator):
        """Layout of the encoded records (:func:`encoded_layout`)."""
        cont = continuous_columns(self.binary, self.categorical, n_features)
        return encoded_layout(cont, self._blocks(n_features), n_features, n_bins, indicator)

    def _encode(self, X, low, high, n_bins, indicator):
        """``(mapped, encoded)`` records (:func:`encode_records`)."""
        return encode_records(X, low, high, n_bins, self._augmented(X.shape[1], n_bins, indicator))

    def _cluster(self, X, plan, rng, ledger):
        """Alg. 1 line 1: (events, labels, public sizes, clusterer) (:func:`cluster_records`)."""
        return cluster_records(self, X, plan, rng, ledger)

    # -- fit ---------------------------------------------------------------------

    @private_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Cluster privately, then train one generative model per cluster by DP-SGD.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Records; continuous columns are mapped by ``bounds`` (clipped to it).
        y : None
            Ignored.

        Returns
        -------
        self : object
        """
        return self._private_fit(X)

    # The template's steps (skdp.base.DPEstimatorMixin._private_fit).  The
    # plan fixes, from the parameters alone, the clustering's budget and the
    # noise of the size count; the gradient noise is calibrated inside
    # _fit_private, once the clustering has released the noisy sizes that the
    # schedule (and so the plan's events) is a function of.
    def _noise_mechanisms(self):
        if self.generator == "marginals":
            # One Gaussian release (exact grid sampler under secure noise);
            # the clustering's mechanisms are those of DPKernelKMeans.
            from ..cluster import DPKernelKMeans

            extra = DPKernelKMeans()._noise_mechanisms() if self._partition_mode() == "kmeans" else ()
            return (GaussianMechanism, *extra)
        # DP-SGD's torch noise has no exact sampler: the template refuses
        # secure_noise=True before anything is reserved.
        return (TorchGaussianMechanism,)

    def _partition_mode(self):
        """The partition Alg. 1 line 1 uses (:func:`partition_mode`)."""
        return partition_mode(self.partition, self.generator, self.categorical, self._k())

    def _blocks(self, n_features):
        """The declared one-hot blocks (:func:`~skdp.generative._marginals.declared_blocks`)."""
        return declared_blocks(self.categorical, n_features)

    def _check_public_input(self, X, y=None):
        """The declared blocks checked against the number of columns, read off ``X``'s shape (public).

        So a block naming a column ``X`` does not have is refused before the
        reservation; the one-hot check reads values and comes after it.
        """
        shape = getattr(X, "shape", None)
        if shape is not None and len(shape) == 2:
            m = int(shape[1])
            if self.categorical is not None:
                self._blocks(m)
            binary_columns(self.binary, self.categorical, m)
            self._declared_bounds(m)

    def _check_params(self):
        """Options that do not fit together are refused here (:func:`check_options`)."""
        check_options(self)

    def _privacy_plan(self):
        plan = super()._privacy_plan()
        settings = GenerativeMixtureSettings(clip_noise_ratio=DPNormOptions.of(self).histogram_noise_ratio)
        if self.generator == "marginals":
            if self._partition_mode() == "kmeans":
                settings = replace(settings, cluster_epsilon=self.epsilon * self.cluster_budget)
            # The released size that sizes the capacity and the private box.
            settings = replace(settings, count_noise_std=count_noise_multiplier(self.epsilon, self.delta))
            return plan.with_settings(settings)
        if self._k() > 1:
            settings = replace(settings, cluster_epsilon=self.epsilon * self.cluster_budget)
        elif self.n_samples == "auto":
            settings = replace(settings, count_noise_std=count_noise_multiplier(self.epsilon, self.delta))
        return plan.with_settings(settings)

    def _validate_input(self, X, y=None):
        X = self._validate_X(X, reset=True)
        n, m = X.shape
        # No check of n against n_clusters: under add/remove neighbours n is
        # private, and an error decided by it after the hold would release
        # it.  Any n >= 1 fits: empty clusters get noisy sizes like the
        # others (clamped to 1 by cluster_schedule), and Poisson sampling
        # runs over whatever rows a cluster holds.
        # The declared domain: a refusal on a finite domain, naming the
        # parameter and never a value.
        check_one_hot(X, self._blocks(m))
        return FitInput(X, None, n, m)

    def _planned_events(self, noise_multiplier, cluster_events, rates, probs, n_steps):
        """Events of the whole fit at gradient noise multiplier ``noise_multiplier``.

        The events already recorded before the steps (the clustering's, or the
        size count's), then ``n_steps`` steps of Alg. 1 on the schedule
        ``(rates, probs)`` (:func:`sgd_plan_event`).
        """
        ratio = DPNormOptions.of(self).histogram_noise_ratio
        return [*cluster_events, sgd_plan_event(noise_multiplier, ratio, rates, probs, n_steps)]

    def _fit_private(self, data, plan, rng, ledger):
        if self.generator == "marginals":
            return fit_marginals_generator(self, data, plan, rng, ledger, _CALIBRATION_RTOL)
        declared = self._declared_bounds(data.n_features)
        m = data.n_features
        self.bounds_ = (np.zeros(m), np.ones(m)) if declared is None else declared
        self.n_bins_ = None
        self.n_iter_ = None
        self.structure_ = self.tree_ = self.tree_marginals_ = self.tree_tables_ = None
        fitted = fit_networks(self, data.X, plan, rng, ledger, _CALIBRATION_RTOL)
        for name, value in fitted.items():
            setattr(self, name, value)

    # -- post-processing ---------------------------------------------------------

    def predict(self, X):
        """Cluster of each record: its nearest released centre, or its most probable cluster.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        if self._is_tree():
            return np.zeros(X.shape[0], dtype=np.intp)
        if self.generator == "marginals":
            if self.clusterer_ is None:
                return np.argmax(self._log_joint(X), axis=1)
            X = self._encode_fitted(X)[0]
        return np.zeros(X.shape[0], dtype=np.intp) if self.clusterer_ is None else self.clusterer_.predict(X)

    def _is_tree(self):
        return getattr(self, "structure_", None) == "tree"

    def _log_joint(self, X):
        """``log p_s + log f(x | s)``, shape ``(n, k)`` (:func:`log_joint`), continuous columns on ``[0, 1]``.

        Binary columns and declared blocks by their probabilities, each
        continuous column by its linear-binning density
        (:func:`hat_log_density`); the out-of-domain indicator is left out.
        """
        encoded = self._encode_fitted(X)[1]
        cont, blocks, _, _ = self._fitted_layout()
        declared = blocks[: len(blocks) - cont.size]
        binary, _ = self._layout()
        out = log_joint(encoded, self.weights_, self.marginals_, (binary, declared))
        for cols in blocks[len(declared) :]:
            cols = list(cols)
            out += hat_log_density(encoded[:, cols], self.marginals_[:, cols], self.n_bins_)
        return out

    def _fitted_layout(self):
        return self._augmented(self.n_features_in_, self.n_bins_ or 2, self._has_indicator())

    def _has_indicator(self):
        return not isinstance(self.bounds, str)

    def _encode_fitted(self, X):
        """:meth:`_encode` with the fitted domain and grid."""
        low, high = self.bounds_
        return self._encode(X, low, high, self.n_bins_ or 2, self._has_indicator())

    def _layout(self):
        """Binary columns of the encoded record (the indicator excluded) and every released block."""
        cont, blocks, width, flag = self._fitted_layout()
        exclude = list(cont) + ([] if flag is None else [flag])
        return column_layout(width, blocks, None, exclude)

    def fit_predict(self, X, y=None):
        """Fit, then return the cluster of every record of ``X`` under the released model.

        ``fit(X).predict(X)``: the nearest released centre of each record.
        The labels are returned, never stored on the model: labels of the
        *training* records are exact functions of those records, not covered
        by the guarantee, and publishing them is the caller's decision.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return self.fit(X).predict(X)

    def transform(self, X):
        """Distances to the released centres in the random feature space (marginals: ``-log_joint``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        distances : ndarray of shape (n_samples, n_clusters)
        """
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        if self._is_tree():
            return -fitted_tree_log_likelihood(self, X)[:, None]
        if self.generator == "marginals":
            if self.clusterer_ is None:
                return -self._log_joint(X)
            X = self._encode_fitted(X)[0]
        return np.zeros((X.shape[0], 1)) if self.clusterer_ is None else self.clusterer_.transform(X)

    @property
    def _n_features_out(self):
        return len(self.weights_)

    def score_samples(self, X):
        """Per-record log-likelihood (marginals), ELBO bound (VAE) or ``-F(x)`` (RBM); the user guide.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        if self._is_tree():
            return fitted_tree_log_likelihood(self, X)
        if self.generator == "marginals":
            return np.logaddexp.reduce(self._log_joint(X), axis=1)
        labels = self.predict(X) if self.generator == "rbm" else None
        return network_score_samples(X, self.generator, self.generators_, self.weights_, labels)

    def score(self, X, y=None):
        """Mean of :meth:`score_samples`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        score : float
        """
        return float(np.mean(self.score_samples(X)))

    def sample(self, n_samples=1, cluster=None, return_clusters=False, random_state=None, balanced=True):
        """Draw synthetic records from the released models (post-processing, free).

        Parameters
        ----------
        n_samples : int, default=1
        cluster : int or None, default=None
            Draw from this cluster's model only; ``None`` draws each record's
            cluster with ``weights_``.
        return_clusters : bool, default=False
            Also return the cluster of every record.
        random_state : int, RandomState instance or None, default=None
            An int reproduces the draw from a stream spawned for sampling,
            never a fit's stream; the model's own ``random_state`` is unused.
        balanced : bool, default=True
            With ``structure_ == "tree"``: sample down the tree in systematic
            counts, shuffled within each parent's group (every record's
            distribution is the model's, with less Monte Carlo noise in the
            sample's tables); False: i.i.d. records.  Ignored otherwise.

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
            Records in the data's units (inside ``bounds_``).
        clusters : ndarray of shape (n_samples,)
            Only when ``return_clusters`` is True.
        """
        check_is_fitted(self)
        clusters, rng = sample_clusters(self.weights_, n_samples, cluster, random_state)
        if self._is_tree():
            out = sample_fitted_tree(self, n_samples, rng, balanced)
            return (out, clusters) if return_clusters else out
        out = draw_records(
            self.generator,
            clusters,
            self.n_features_in_,
            rng,
            marginals=self.marginals_,
            layout=self._layout() if self.generator == "marginals" else None,
            generators=self.generators_,
        )
        m = self.n_features_in_
        if self.generator == "marginals":
            cont = self._fitted_layout()[0]
            out = decode_records(out, m, cont, self.n_bins_, *self.bounds_, rng)
        else:
            out = to_data_range(out, *self.bounds_)
        return (out, clusters) if return_clusters else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags
