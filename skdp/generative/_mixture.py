"""DPGenerativeMixture: a DP mixture of generative neural networks (Acs et al. 2018, Alg. 1)."""

from __future__ import annotations

import warnings
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
from .._user_warnings import _user_stacklevel
from ..base import PRIVACY_PARAMETER_CONSTRAINTS, DPEstimatorMixin, private_fit_context
from ..preprocessing._standard import check_bounds
from ..privacy import (
    ADD_REMOVE,
    COMPOSITIONS,
    DEFAULT_COMPOSITION,
    GaussianEvent,
    GaussianMechanism,
    LaplaceEvent,
)
from ..privacy.dpsgd import (
    count_noise_multiplier,
    dataset_size_event,
    release_dataset_size,
)
from ..privacy.ledger import COMPOSITION_CONSTRAINT, accountant_for
from ..privacy.mechanisms.torch_noise import TorchGaussianMechanism
from ..privacy.norm_selection import DPNormOptions
from ._clustering import (
    DEFAULT_NETWORK_CLUSTERS,
    cluster_records,
    clustering_events_as_add_remove,  # noqa: F401  (tested from here)
)
from ._domain import capacity, hat_log_density, linear_binning, release_box, sample_hat
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
from ._latent_em import EM_ITERATIONS, EXTRA_ITERATIONS, em_iterations, fit_latent_classes
from ._marginals import column_layout, declared_blocks, fit_marginals

__all__ = ["DPGenerativeMixture"]

# Relative precision of the noise calibration; the returned multiplier is the
# upper end of the bracket, so the plan never exceeds the budget.
_CALIBRATION_RTOL = 1e-3

# --------------------------------------------------------------------------
# The privacy plan: pure functions (tested directly).
# --------------------------------------------------------------------------


#: Compositions that charge every release its own (epsilon, delta) (the
#: ``basic`` and ``advanced`` accountants): no remaining curve to calibrate a
#: staged plan to (``_check_params``).
_PER_USE_COMPOSITIONS = frozenset({"basic", "advanced"})


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
}


# --------------------------------------------------------------------------
# The estimator.
# --------------------------------------------------------------------------


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
    domain (``bounds``); samples come back in the data's units.

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

    # -- helpers ---------------------------------------------------------------

    def _k(self):
        """The declared number of clusters; ``"auto"``: ten for the networks, None for the marginals (fit's rule)."""
        if self.n_clusters != "auto":
            return int(self.n_clusters)
        return None if self.generator == "marginals" else DEFAULT_NETWORK_CLUSTERS

    def _binary_columns(self, n_features):
        """The declared binary columns (``generator="marginals"``), validated; ValueError naming ``binary``."""
        if self.binary is None:
            return np.zeros(0, dtype=np.intp)
        cols = list(self.binary)
        if not all(isinstance(c, Integral) and not isinstance(c, bool) for c in cols):
            raise ValueError("binary must be a list of integer column indices.")
        if cols and (min(cols) < 0 or max(cols) >= n_features):
            raise ValueError(f"binary has a column index outside [0, {n_features}).")
        in_blocks = {c for block in self._blocks(n_features) for c in block}
        if len(set(cols)) != len(cols) or in_blocks & set(cols):
            raise ValueError("binary repeats a column or names a column of a categorical block.")
        return np.asarray(sorted(cols), dtype=np.intp)

    def _continuous_columns(self, n_features):
        """Columns that are neither declared binary nor in a declared block (marginals); none for the networks."""
        if self.generator != "marginals":
            return np.zeros(0, dtype=np.intp)
        taken = np.zeros(n_features, dtype=bool)
        taken[self._binary_columns(n_features)] = True
        for block in self._blocks(n_features):
            taken[list(block)] = True
        return np.flatnonzero(~taken)

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
        """Layout of the encoded records: ``(continuous, blocks, n_columns, indicator column or None)``.

        The encoded record is the original columns (continuous ones zeroed),
        then ``n_bins`` linear-binning weights per continuous column (a soft
        one-hot block each, appended to the declared blocks), then, with
        declared bounds, the record's out-of-domain indicator (a binary column).
        """
        cont = self._continuous_columns(n_features)
        blocks = list(self._blocks(n_features))
        start = n_features
        for _ in cont:
            blocks.append(tuple(range(start, start + n_bins)))
            start += n_bins
        flag = None
        if indicator and cont.size:
            flag, start = start, start + 1
        return cont, blocks, start, flag

    def _encode(self, X, low, high, n_bins, indicator):
        """``(mapped, encoded)``: records with continuous columns on ``[0, 1]``, and their encoding.

        Per record: continuous columns mapped by ``(x - low) / (high - low)``
        and clipped to ``[0, 1]``, other columns clipped to ``[0, 1]``; the
        encoding adds the linear-binning weights (:func:`linear_binning`)
        and, with ``indicator``, whether the record left the declared box.
        """
        cont, _, width, flag = self._augmented(X.shape[1], n_bins, indicator)
        mapped = np.clip(X, 0.0, 1.0)
        if not cont.size:
            return mapped, mapped
        raw = X[:, cont]
        U = np.clip((raw - low[cont]) / (high[cont] - low[cont]), 0.0, 1.0)
        mapped[:, cont] = U
        encoded = np.zeros((X.shape[0], width))
        encoded[:, : X.shape[1]] = mapped
        encoded[:, cont] = 0.0
        encoded[:, X.shape[1] : X.shape[1] + cont.size * n_bins] = linear_binning(U, n_bins)
        if flag is not None:
            encoded[:, flag] = np.any((raw < low[cont]) | (raw > high[cont]), axis=1)
        return mapped, encoded

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
        """The partition Alg. 1 line 1 uses: ``"categorical"``, ``"em"``, ``"kmeans"`` or ``"none"`` (one cluster).

        ``partition="auto"``: with ``generator="marginals"``, the first
        declared block's categories (a public partition function: nothing is
        spent on it) with latent classes nested in them, or without a block
        latent classes fitted by DP-EM (``"em"``); otherwise DP kernel
        k-means when ``n_clusters > 1``.
        """
        if self.partition == "categorical" or (
            self.partition == "auto" and self.generator == "marginals" and self.categorical
        ):
            if self.generator != "marginals":
                raise ValueError(
                    f"partition='categorical' needs generator='marginals', got generator={self.generator!r}."
                )
            if not self.categorical:
                raise ValueError("partition='categorical' needs at least one block declared in categorical.")
            return "categorical"
        if self.partition == "auto" and self.generator == "marginals":
            return "em"
        k = self._k()
        return "kmeans" if k is None or k > 1 else "none"

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
            self._binary_columns(m)
            self._declared_bounds(m)

    def _check_params(self):
        self._partition_mode()
        if self.composition in _PER_USE_COMPOSITIONS:
            # The generator's releases are planned from the clustering's
            # released sizes and calibrated on the remaining budget by a
            # curve (RDP at an order, or PLD); an accountant that charges an
            # (epsilon, delta) per use has no such remainder to calibrate to.
            raise ValueError(
                f"composition={self.composition!r} charges each release its own (epsilon, delta) and "
                "cannot calibrate DPGenerativeMixture's plan, whose per-cluster releases are planned from "
                "the released cluster sizes; use 'pld' (the default), 'rdp' or 'zcdp'."
            )
        if self.binary is not None and self.generator != "marginals":
            raise ValueError(
                f"binary is used by generator='marginals' only, got generator={self.generator!r}."
            )
        if self.categorical is not None and self.generator != "marginals":
            raise ValueError(
                f"categorical is used by generator='marginals' only, got generator={self.generator!r}."
            )
        if self.generator == "marginals":
            if self.categorical is not None:
                self._blocks(np.iinfo(np.intp).max)
            if not self._composition_supported(self.composition):
                raise ValueError(f"composition={self.composition!r} cannot account this fit's releases.")
            return
        import torch

        if not self._composition_supported(self.composition):
            supported = tuple(c for c in COMPOSITIONS if self._composition_supported(c))
            kind = "cluster-sampled" if self._k() > 1 else "Poisson-subsampled"
            raise ValueError(
                f"composition={self.composition!r} cannot account the {kind} Gaussian steps of "
                f"DPGenerativeMixture(n_clusters={self.n_clusters}) (it has no rule for subsampled "
                f"mechanisms); use one of {supported}."
            )
        try:
            torch.device(self.device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device={self.device!r} is not a torch device: {exc}") from None

    def _composition_supported(self, composition):
        """Whether ``composition`` (or its fallback) can account this fit's events, asked of the core.

        A representative history (any numbers: support depends on the event
        types, the sampling scheme and the relation) of the mode set by
        ``n_clusters``: the size count's Gaussian (the clustering's Gaussian
        and Laplace events are as widely supported) and the steps' event.
        """
        k = self._k() or 2
        if self.generator == "marginals":
            # The Gaussian release, and the clustering's Laplace events.
            probe = [GaussianEvent(1, ADD_REMOVE), LaplaceEvent(1, ADD_REMOVE)]
        else:
            probe = [
                dataset_size_event(1.0),
                sgd_plan_event(1.0, None, [0.5] * k, [1.0 / k] * k, 1),
            ]
        try:
            accountant_for(probe, composition)
        except ValueError:
            return False
        return True

    def _privacy_plan(self):
        plan = super()._privacy_plan()
        settings = {"clip_noise_ratio": DPNormOptions.of(self).histogram_noise_ratio}
        if self.generator == "marginals":
            if self._partition_mode() == "kmeans":
                settings["cluster_epsilon"] = self.epsilon * self.cluster_budget
            # The released size that sizes the capacity and the private box.
            settings["count_noise_std"] = count_noise_multiplier(self.epsilon, self.delta)
            return plan.with_settings(**settings)
        if self._k() > 1:
            settings["cluster_epsilon"] = self.epsilon * self.cluster_budget
        elif self.n_samples == "auto":
            settings["count_noise_std"] = count_noise_multiplier(self.epsilon, self.delta)
        return plan.with_settings(**settings)

    def _validate_input(self, X, y=None):
        X = self._validate_X(X, reset=True)
        n, m = X.shape
        # No check of n against n_clusters: under add/remove neighbours n is
        # private, and an error decided by it after the hold would release
        # it.  Any n >= 1 fits: empty clusters get noisy sizes like the
        # others (clamped to 1 by cluster_schedule), and Poisson sampling
        # runs over whatever rows a cluster holds.
        for b, cols in enumerate(self._blocks(m)):
            # The declared domain: a refusal on a finite domain, naming the
            # parameter and never a value.
            block = X[:, list(cols)]
            if not (np.all((block == 0) | (block == 1)) and np.all(block.sum(axis=1) == 1)):
                raise ValueError(
                    f"categorical[{b}] declares a one-hot block, but some rows of X are not one-hot "
                    "there (entries 0 or 1, exactly one 1)."
                )
        return FitInput(X, None, n, m)

    def _planned_events(self, noise_multiplier, cluster_events, rates, probs, n_steps):
        """Events of the whole fit at gradient noise multiplier ``noise_multiplier``.

        The events already recorded before the steps (the clustering's, or the
        size count's), then ``n_steps`` steps of Alg. 1 on the schedule
        ``(rates, probs)`` (:func:`sgd_plan_event`).
        """
        ratio = DPNormOptions.of(self).histogram_noise_ratio
        return [*cluster_events, sgd_plan_event(noise_multiplier, ratio, rates, probs, n_steps)]

    def _fit_marginals(self, data, plan, rng, ledger):
        """Alg. 1 with the latent-class generator (:func:`fit_marginals`), continuous columns on their domain.

        1. With continuous columns or ``n_clusters="auto"``: a noisy count
           of the rows (add/remove: the size is private), the only size the
           rules read.
        2. ``bounds="auto"`` with continuous columns: the private box
           (:func:`release_box`).
        3. The capacity (``k``, ``G``) from the released size, the columns,
           epsilon and delta (:func:`capacity`), unless declared.
        4. Partition and one Gaussian release, calibrated to the rest of
           the budget.
        """
        X = data.X
        m = data.n_features
        blocks = self._blocks(m)
        cont = self._continuous_columns(m)
        declared = self._declared_bounds(m)
        k_declared = self._k()
        events, n_tilde = [], None
        if cont.size or k_declared is None:
            std = plan.settings["count_noise_std"]
            n_tilde = release_dataset_size(X.shape[0], std, rng, ledger)
            events.append(dataset_size_event(std))
        low, high = np.zeros(m), np.ones(m)
        if cont.size:
            if declared is None:
                columns = X[:, cont]
                box_low, box_high, box_events = release_box(
                    lambda fn, *params: fn(columns, *params),
                    n_tilde,
                    cont.size,
                    float(self.epsilon),
                    float(self.delta),
                    plan.composition,
                    plan.secure_noise,
                    rng,
                    ledger,
                )
                events += box_events
                low[cont], high[cont] = box_low, box_high
            else:
                low[cont], high[cont] = declared[0][cont], declared[1][cont]
        mode = self._partition_mode()
        n_groups = len(blocks[0]) if mode == "categorical" else 1
        k_sub, n_bins, n_iter = self._capacity(mode, n_tilde, m, blocks, cont.size, n_groups)
        indicator = declared is not None and cont.size > 0
        G = max(n_bins, 2)
        mapped, encoded = self._encode(X, low, high, G, indicator)
        _, aug_blocks, _, flag = self._augmented(m, G, indicator)
        if mode in ("categorical", "em"):
            groups = X[:, list(blocks[0])].argmax(axis=1) if mode == "categorical" else None
            sizes, probs, z, noise_std, n_iter = fit_latent_classes(
                encoded,
                aug_blocks,
                groups,
                n_groups,
                k_sub,
                G,
                n_iter,
                events,
                plan,
                rng,
                ledger,
                _CALIBRATION_RTOL,
                exclude=cont,
                n_soft=cont.size,
            )
            del groups
            fitted = {
                "clusterer_": None,
                "generators_": None,
                "marginals_": probs,
                "weights_": sizes / sizes.sum(),
                "cluster_sizes_": sizes,
                "sampling_rates_": None,
                "n_steps_": 0,
                "cluster_steps_": None,
                "noise_multiplier_": float(z),
                "noise_std_": float(noise_std),
                "clip_noise_multiplier_": None,
                "clipping_mode_": None,
            }
        else:
            if mode == "kmeans" and k_sub == 1:
                mode = "none"
            n_iter = 1
            fitted = fit_marginals(
                encoded,
                aug_blocks,
                mode,
                k_sub,
                self._cluster,
                plan.with_settings(n_clusters=k_sub),
                rng,
                ledger,
                _CALIBRATION_RTOL,
                prior_events=events,
                exclude=cont,
                cluster_X=mapped,
            )
        del mapped, encoded
        for name, value in fitted.items():
            setattr(self, name, value)
        self.n_iter_ = n_iter
        self.n_bins_ = n_bins if cont.size else None
        self.bounds_ = (low, high)
        if flag is not None:
            self._warn_outside_bounds(flag)

    def _capacity(self, mode, n_tilde, m, blocks, n_continuous, n_groups):
        """``(classes per group, grid points, EM releases)``: declared, or :func:`capacity`'s rule.

        For ``"em"`` and ``"categorical"`` the rule sizes the classes for
        :data:`EM_ITERATIONS` releases; where that leaves one class per
        group (a hard partition) there is one release and the grid is sized
        again for it.  With a categorical partition, the rule's number of
        classes is shared among the ``n_groups`` categories.  Where the rule
        is at its caps (``MAX_CLASSES`` and ``MAX_BINS``, or no grid), the
        spare budget buys more iterations: the largest ``T`` in
        :data:`EXTRA_ITERATIONS` at which the rule still picks the same
        classes and grid.  Public and released quantities only.
        """
        k_declared = self._k()
        n_bins = int(self.n_bins) if n_continuous and self.n_bins != "auto" else 0
        em = mode in ("em", "categorical")
        if n_tilde is None:
            return k_declared, n_bins, (em_iterations(k_declared) if em else 1)
        released = [len(b) for i, b in enumerate(blocks) if not (mode == "categorical" and i == 0)]
        n_binary = m - n_continuous - sum(len(b) for b in blocks)
        args = (n_tilde, float(self.epsilon), float(self.delta), n_binary, released, n_continuous)
        k, G = capacity(*args, n_iter=EM_ITERATIONS if em else 1)
        k_sub = max(1, k // n_groups) if k_declared is None else k_declared
        n_iter = em_iterations(k_sub) if em else 1
        if em and k_sub == 1:
            G = capacity(*args, n_iter=1)[1]
        elif em:
            for T in EXTRA_ITERATIONS:
                if capacity(*args, n_iter=T) == (k, G):
                    n_iter = T
        return k_sub, (n_bins or G), n_iter

    def _warn_outside_bounds(self, flag):
        """Warn, naming ``bounds``, when the released indicator says records left the declared box.

        Post-processing of the accounted release: the estimated number of
        out-of-domain records against three noise stds of that estimate (the
        sums' noise and half the sizes' per cluster); no data value is quoted.
        """
        sizes = self.cluster_sizes_
        estimate = float(sizes @ self.marginals_[:, flag])
        noise = 3.0 * self.noise_std_ * np.sqrt(1.25 * len(sizes))
        if estimate > noise:
            warnings.warn(
                "Some records of X lie outside the declared bounds and were clipped into them (estimated "
                "from the accounted release, not read off the data): widen bounds to the data's public "
                "domain, or use bounds='auto'.",
                UserWarning,
                stacklevel=_user_stacklevel(),
            )

    def _fit_private(self, data, plan, rng, ledger):
        if self.generator == "marginals":
            return self._fit_marginals(data, plan, rng, ledger)
        declared = self._declared_bounds(data.n_features)
        m = data.n_features
        self.bounds_ = (np.zeros(m), np.ones(m)) if declared is None else declared
        self.n_bins_ = None
        self.n_iter_ = None
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
        if self.generator == "marginals":
            if self.clusterer_ is None:
                return np.argmax(self._log_joint(X), axis=1)
            X = self._encode_fitted(X)[0]
        return np.zeros(X.shape[0], dtype=np.intp) if self.clusterer_ is None else self.clusterer_.predict(X)

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
        if self.generator == "marginals":
            if self.clusterer_ is None:
                return -self._log_joint(X)
            X = self._encode_fitted(X)[0]
        return np.zeros((X.shape[0], 1)) if self.clusterer_ is None else self.clusterer_.transform(X)

    @property
    def _n_features_out(self):
        if self.generator == "marginals" and self.clusterer_ is None:
            return len(self.weights_)
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

    def sample(self, n_samples=1, cluster=None, return_clusters=False, random_state=None):
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

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
            Records in the data's units (inside ``bounds_``).
        clusters : ndarray of shape (n_samples,)
            Only when ``return_clusters`` is True.
        """
        check_is_fitted(self)
        clusters, rng = sample_clusters(self.weights_, n_samples, cluster, random_state)
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
            cont, blocks, _, _ = self._fitted_layout()
            decoded = out[:, :m].copy()
            if cont.size:
                G = self.n_bins_
                grid = out[:, m : m + cont.size * G].reshape(len(out), cont.size, G).argmax(axis=2)
                low, high = self.bounds_
                decoded[:, cont] = low[cont] + sample_hat(grid, G, rng) * (high[cont] - low[cont])
            out = decoded
        else:
            out = to_data_range(out, *self.bounds_)
        return (out, clusters) if return_clusters else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags
