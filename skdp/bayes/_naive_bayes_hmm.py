"""DPNaiveBayesHMM: private HMM with naive-Bayes categorical emissions (Foulds et al. 2016, Sec. 4-5)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._chunks import ChunkedData, is_chunked_input
from .._input import set_chunked_features
from .._random import check_generator
from ..base import (
    PRIVACY_PARAMETER_CONSTRAINTS,
    DPEstimatorMixin,
    PrivacyPlan,
    _user_stacklevel,
    private_fit_context,
    warn_privacy_leak,
)
from ..exceptions import PrivacyLeakWarning
from ..privacy import (
    ExponentialMechanism,
    LaplaceEvent,
    LaplaceMechanism,
    PureDPEvent,
    calibrate_noise_multiplier,
    laplace_noise_multiplier,
)
from ..privacy.ledger import COMPOSITION_CONSTRAINT
from ._conjugate import dirichlet_log_likelihood_sensitivity, project_counts
from ._gibbs import (
    emission_log_likelihood,
    gibbs_sampler,
    posterior_marginals,
    safe_log,
    sample_sequences,
    viterbi,
)
from ._sequences import (
    ChunkedRecords,
    build_layout,
    cell_category_counts,
    encode_categories,
    learn_categories,
    split_frame,
)

#: L1 sensitivity of one feature's count tensor ``n_{:,:,d,:}`` under
#: replace-one neighbours (Foulds et al., Appendix E.1): a record adds the
#: indicator vector e_{x_d} to the count vector of its own cell only.
#: Replacing it removes e_{x_d} from its cell and adds e_{x'_d} to the new
#: record's cell: L1 change 2 whether the cells coincide or not.
COUNT_L1_SENSITIVITY = 2.0


def default_truncation(n_categories):
    """Foulds et al.'s OPS truncation ``a0_d = 1 / (100 K_d)`` (Figure 7, Appendix E.2)."""
    return 1.0 / (100.0 * np.asarray(n_categories, dtype=float))


def ops_gibbs_epsilon(epsilon_per_update, n_iter, n_components=2):
    """Worst-case cost of an unconverged OPS chain under basic composition.

    Foulds et al., Section 5: every iteration makes two data-dependent
    exponential-mechanism releases (all latent states, then all emission
    parameters), so ``epsilon^(Gibbs) <= 2 n_iter epsilon`` (400 epsilon for
    200 iterations).  The transition update reads only the states; with one
    state (naive Bayes) the state update does not read the data either.
    """
    per_iteration = 2 if n_components > 1 else 1
    return per_iteration * n_iter * epsilon_per_update


@dataclass(frozen=True)
class NaiveBayesHMMSettings:
    """:class:`DPNaiveBayesHMM`'s plan: what its calibration decides from public quantities.

    Attributes
    ----------
    noise_multiplier : float or None
        ``mechanism="laplace"``: Laplace scale of the counts over their L1
        sensitivity (Foulds et al. 2016, Eq. 16).
    truncation : ndarray of shape (n_features,) or None
        ``mechanism="ops"``: OPS truncation ``a0`` per feature (Foulds et al.
        2016, Eq. 14).
    mechanism : ExponentialMechanism or None
        ``mechanism="ops"``: the tempered posterior sample's mechanism.
    """

    noise_multiplier: float | None = None
    truncation: np.ndarray | None = None
    mechanism: ExponentialMechanism | None = None


class DPNaiveBayesHMM(DPEstimatorMixin, DensityMixin, BaseEstimator):
    """Differentially private HMM with naive-Bayes categorical emissions (Foulds et al. 2016).

    Records are grouped into cells ``(r, t)`` (sequence ``r``, timestep
    ``t``; the paper's region and month).  Each cell has a latent state
    ``z_{r,t}`` in ``{0..K-1}`` following a Markov chain with
    ``Dirichlet(alpha)`` transition rows (and initial distribution), and each
    record of the cell has ``D`` categorical features drawn independently from
    ``theta^(z, d) ~ Dirichlet(beta)`` (Foulds et al., Appendix E, Eq. 67).
    ``n_components=1`` is naive Bayes.  Inference is Gibbs sampling (Eq. 68,
    69) with one of three mechanisms:

    ``mechanism="laplace"`` (Section 4.2, Appendix E.1)
        The per-cell count vectors ``n_{r,t,d,:}`` (Eq. 70-71) are privatised
        once, before sampling, by the Laplace mechanism: for each feature the
        whole ``(n_cells, K_d)`` count array is one release with L1
        sensitivity 2 (a record adds one indicator vector to its own cell's
        count vector; replacing the record moves one unit between categories
        and possibly between cells, L1 change 2, Eq. 17), and the budget is
        split over the ``D`` features (scale ``2 D / epsilon`` under basic
        composition; the noise multiplier is calibrated for the chosen
        ``composition``).  The counts are projected to be non-negative (Eq.
        16), and the whole chain runs on them as post-processing, converged or
        not.  Pure epsilon-DP.  With ``n_components=1`` (naive Bayes) the
        likelihood depends on the corpus-wide counts only, and those are
        released instead (same sensitivity, one row instead of one per cell).
    ``mechanism="ops"`` (Section 4.1, Eq. 19)
        The chain targets the posterior tempered at ``T = 2 Delta /
        epsilon_u`` with the emission distributions truncated to
        ``theta_j >= a0_d``; ``Delta = sum_d log((1 - (K_d - 1) a0_d) /
        a0_d)`` bounds the change of the log joint density when a record is
        replaced (Eq. 15 generalised), so each data-dependent Gibbs update is
        an exponential-mechanism release costing ``epsilon_u``.
        ``ops_accounting="worst_case"`` (default) accounts every update of an
        unconverged chain, the paper's ``epsilon^(Gibbs) = 2 n_iter
        epsilon_u`` (two releases per iteration; one for ``n_components=1``,
        whose state update ignores the data): ``epsilon`` is the total
        and ``epsilon_u`` is calibrated so that the composition meets it.
        ``ops_accounting="converged"`` releases only the final sample and
        accounts it as one OPS sample at ``epsilon`` (the paper's Figure 9
        setting); that holds only if the chain has converged, and a
        :class:`~skdp.exceptions.PrivacyLeakWarning` says so.
    ``mechanism="none"``
        The non-private sampler (baseline); ``privacy_spent_`` is
        ``(inf, 0)`` and no accountant may be given.

    The guarantee (``privacy_spent_``) refers to replace-one neighbours:
    datasets with the same records except one, whose features (and cell) may
    differ, over the same set of (sequence, timestep) cells.  The cell
    layout (which cells exist) is public by declaration, as in the paper
    (regions and months are public; the counts in them are private): it is
    released as is, in ``cell_sequence_ids_``, ``cell_timesteps_`` and the
    length of ``states_``, and the guarantee says nothing about it.  A cell
    that exists only because of one record (a month with a single report)
    therefore reveals that record's sequence and timestep: pass
    ``sequence_ids`` and ``timesteps`` whose set of cells is public.  With
    ``timesteps=None`` every record is its own cell, so the layout is the
    number of records of each sequence.  Everything else the model holds is
    accounted (``noisy_counts_``, the OPS draws) or a function of accounted
    releases and the layout (``startprob_``, ``transmat_``,
    ``emissionprob_``, ``states_``), or public (``categories_`` when
    declared, ``temperature_`` and ``truncation_``).  With
    ``categories="nonprivate"`` the category values are read off the data and a
    :class:`~skdp.exceptions.PrivacyLeakWarning` is raised; the default,
    None, refuses a private fit until they are declared.  With declared
    ``categories``, a training value outside them makes ``fit`` raise a
    ``ValueError`` after the budget is reserved (the reservation stays
    charged): the guarantee covers datasets inside the declared domain, and
    the message names neither the value nor its feature.

    Parameters
    ----------
    n_components : int, default=2
        Number of latent states ``K``.
    alpha : float, default=1.0
        Concentration of the Dirichlet prior of every transition row.
    beta : float, default=1.0
        Concentration of the Dirichlet prior of every emission distribution.
    mechanism : {"laplace", "ops", "none"}, default="laplace"
    epsilon : float, default=1.0
        Total privacy budget of the fit.
    delta : float, default=0.0
        Used only by ``"advanced"``, ``"zcdp"``, ``"rdp"`` and ``"pld"``
        composition; both mechanisms are pure DP.
    truncation : float or None, default=None
        OPS truncation ``a0`` (the same for every feature, ``a0 K_d < 1``);
        None uses ``1 / (100 K_d)`` per feature as the paper.
    n_iter : int, default=200
        Gibbs iterations.
    burn_in : int, default=100
        Iterations discarded before averaging (must be below ``n_iter``).
    ops_accounting : {"worst_case", "converged"}, default="worst_case"
        OPS accounting, see above.
    categories : list of array-like, "nonprivate" or None, default=None
        Categories of each feature, as :class:`~sklearn.preprocessing.OrdinalEncoder`:
        the public domain of the records.  Every training value must be
        among them (``fit`` raises a ``ValueError`` otherwise, without
        quoting the value).  None (the default) asks for them: a private fit
        refuses, before anything is charged, until they are declared (with
        ``mechanism="none"``, nothing private, they are read off the data).
        ``"nonprivate"`` reads them off the data in a private fit too: the set of
        values each feature takes is released outside the guarantee (a
        :class:`~skdp.exceptions.PrivacyLeakWarning` says so).
    handle_unknown : {"error", "ignore"}, default="error"
        Unknown categories at predict/score time raise, or are left out of
        the likelihood (the feature is treated as missing for that record).
        It does not apply to ``fit``.
    composition : {"basic", "advanced", "zcdp", "rdp", "pld"}, default="basic"
        Accountant of the fit's releases (:mod:`skdp.privacy.accountants`).
        Both mechanisms are pure DP and ``delta`` defaults to 0, where basic
        composition is exact; with ``delta > 0``, ``"pld"`` trades a little
        delta for a smaller epsilon.
    accountant : BudgetAccountant, default=None
    random_state : int, RandomState instance or None, default=None

    secure_noise : bool or None, default=None
        Sample every Laplace and Gaussian release exactly on a grid (discrete
        Laplace / discrete Gaussian, Canonne, Kamath & Steinke 2020) instead of
        in floating point, whose low-order bits leak the noiseless value
        (Mironov 2012).  None follows the package default
        (:func:`skdp.set_config`), read once at the start of ``fit`` and
        carried by the estimator to worker processes.
        ``mechanism="ops"`` samples the Gibbs updates in floating point, has no
        exact sampler, and raises a ValueError when this is (or resolves to)
        True, before the budget or the data is touched.

    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features,)
    categories_ : list of ndarray
        Categories of each feature (as ``OrdinalEncoder.categories_``).
    startprob_ : ndarray of shape (n_components,)
        Posterior mean of the initial-state distribution.
    transmat_ : ndarray of shape (n_components, n_components)
        Posterior mean of the transition matrix (post-burn-in average; for
        ``ops_accounting="converged"`` the released final sample).
    emissionprob_ : list of ndarray of shape (n_components, K_d)
        Emission distribution of each feature, same convention.
    states_ : ndarray of shape (n_cells,)
        Most frequent post-burn-in state of each training cell (final sample
        for ``ops_accounting="converged"``): a function of the noisy counts
        or of accounted OPS draws.
    cell_sequence_ids_, cell_timesteps_ : ndarray of shape (n_cells,)
        Labels of the training cells, in the order of ``states_``: the cell
        layout, public by declaration (see the privacy paragraph above).
    noisy_counts_ : ndarray of shape (n_cells, n_features, max K_d)
        Released count vectors after projection (``"laplace"`` only; one row
        of corpus-wide counts when ``n_components=1``).
    temperature_ : float
        OPS temperature ``T`` (``"ops"`` only).
    truncation_ : ndarray of shape (n_features,)
        OPS truncation per feature (``"ops"`` only).
    privacy_spent_ : PrivacySpent

    See Also
    --------
    DPBetaBernoulli : the conjugate building block (K = 1, binary features).

    References
    ----------
    J. Foulds, J. Geumlek, M. Welling, K. Chaudhuri. On the theory and
    practice of privacy-preserving Bayesian data analysis. UAI 2016,
    Sections 4-5 and Appendix E.

    K.-T. Fang, Z. Geng, G.-L. Tian. Statistical inference for truncated
    Dirichlet distribution and its application in misclassification.
    Biometrical Journal 42(8), 2000.

    C. K. Carter, R. Kohn. On Gibbs sampling for state space models.
    Biometrika 81(3), 1994.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.bayes import DPNaiveBayesHMM
    >>> rng = np.random.default_rng(0)
    >>> states = np.repeat([0, 1, 0, 1], 5)              # one sequence, 20 timesteps
    >>> timesteps = np.repeat(np.arange(20), 200)        # 200 records per timestep
    >>> X = rng.binomial(1, np.where(states[timesteps] == 1, 0.9, 0.1)[:, None], size=(4000, 2))
    >>> model = DPNaiveBayesHMM(n_components=2, epsilon=1.0, categories=[[0, 1], [0, 1]],
    ...                         n_iter=50, burn_in=25, random_state=0)
    >>> model = model.fit(X, timesteps=timesteps)
    >>> z = model.states_
    >>> bool(np.all(z == states) or np.all(z == 1 - states))
    True
    >>> model.privacy_spent_
    PrivacySpent(epsilon=1.0, delta=0.0)
    """

    # Accounted: noisy_counts_ (Laplace) and the OPS draws behind the fitted
    # parameters and states_.  Public: the cell layout (cell_sequence_ids_,
    # cell_timesteps_; the neighbouring relation keeps it fixed, see the class
    # docstring), declared categories_ (with "auto", an announced leak), and
    # the OPS temperature_ and truncation_ (from the budget and categories_).
    _released_attributes = frozenset(
        {
            "categories_",
            "startprob_",
            "transmat_",
            "emissionprob_",
            "states_",
            "cell_sequence_ids_",
            "cell_timesteps_",
            "noisy_counts_",
            "temperature_",
            "truncation_",
        }
    )

    _parameter_constraints = {
        **PRIVACY_PARAMETER_CONSTRAINTS,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "beta": [Interval(Real, 0, None, closed="neither")],
        "mechanism": [StrOptions({"laplace", "ops", "none"})],
        "truncation": [Interval(Real, 0, 1, closed="neither"), None],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "burn_in": [Interval(Integral, 0, None, closed="left")],
        "ops_accounting": [StrOptions({"worst_case", "converged"})],
        "categories": [StrOptions({"nonprivate"}), list, None],
        "handle_unknown": [StrOptions({"error", "ignore"})],
        "composition": [COMPOSITION_CONSTRAINT],
    }

    def __init__(
        self,
        n_components=2,
        *,
        alpha=1.0,
        beta=1.0,
        mechanism="laplace",
        epsilon=1.0,
        delta=0.0,
        truncation=None,
        n_iter=200,
        burn_in=100,
        ops_accounting="worst_case",
        categories=None,
        handle_unknown="error",
        composition="basic",
        accountant=None,
        random_state=None,
        secure_noise=None,
    ):
        self.n_components = n_components
        self.alpha = alpha
        self.beta = beta
        self.mechanism = mechanism
        self.epsilon = epsilon
        self.delta = delta
        self.truncation = truncation
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.ops_accounting = ops_accounting
        self.categories = categories
        self.handle_unknown = handle_unknown
        self.composition = composition
        self.accountant = accountant
        self.random_state = random_state
        self.secure_noise = secure_noise

    # ------------------------------------------------------------------ input

    def _encode(self, X, sequence_ids, timesteps, reset):
        if not reset and (callable(X) or isinstance(X, (Iterator, ChunkedData))):
            raise TypeError(
                "predict, predict_proba and score take in-memory arrays or DataFrames; only fit "
                "reads chunked input (a callable or iterator of chunks, a ChunkedData)."
            )
        X, sequence_ids, timesteps = split_frame(X, sequence_ids, timesteps)
        X = validate_data(self, X, reset=reset, dtype=None)
        if reset:
            self.categories_ = learn_categories(X, "auto" if self._reads_categories() else self.categories)
        codes = encode_categories(X, self.categories_, self.handle_unknown, "fit" if reset else "transform")
        layout = build_layout(sequence_ids, timesteps, X.shape[0])
        counts = cell_category_counts(codes, layout.cell_of_record, layout.n_cells, self._n_categories)
        return counts, layout

    def _encode_chunked(self, X, sequence_ids, timesteps):
        """The per-cell counts and layout of a chunked ``X``, in two passes (``_sequences``).

        Pass 1 reads what the in-memory fit reads before counting: the row
        count, the sequence and timestep labels (the set of cells) and, only
        for ``categories="nonprivate"``, the values of each feature.  Pass 2 counts
        the records of every cell chunk by chunk and adds the counts up on the
        driver: the same array as in memory, exactly (integers).
        """
        records = ChunkedRecords(X, sequence_ids, timesteps)
        auto = self._reads_categories()
        plan = records.scan_cells(auto_categories=auto)
        set_chunked_features(self, records)
        # A declared codebook is checked against the number of features only.
        declared = None if auto else learn_categories(np.empty((0, records.n_features)), self.categories)
        self.categories_ = plan.categories if auto else declared
        return records.cell_counts(plan, self.categories_, self._n_categories), plan.layout

    @property
    def _n_categories(self):
        return np.array([len(c) for c in self.categories_])

    def _category_mask(self):
        k = self._n_categories
        return np.arange(k.max())[None, :] < k[:, None]

    # -------------------------------------------------------------------- fit

    @private_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, *, sequence_ids=None, timesteps=None):
        """Run the private Gibbs sampler on records grouped into (sequence, timestep) cells.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_records, n_features)
            Categorical features of each record (any labels: they are encoded
            as :class:`~sklearn.preprocessing.OrdinalEncoder` does).  A NumPy
            memmap, a Dask array or DataFrame, or a callable returning a fresh
            iterable of chunks (2-D arrays or pandas DataFrames) is read chunk
            by chunk, in two passes (out of core; see :doc:`/scale_out`), with
            the same result as in memory.
        y : None
            Ignored.
        sequence_ids : array-like of shape (n_records,) or str, default=None
            Sequence of each record (a column name of a DataFrame ``X`` is
            accepted); None puts all records in one sequence.  For a chunked
            ``X``: a column name (Dask DataFrame, or a callable yielding
            pandas DataFrames), a NumPy array or memmap read in the row
            ranges of ``X``'s chunks, or, for a Dask ``X``, a Dask array or
            Series (aligned with ``X``'s row blocks).
        timesteps : array-like of shape (n_records,) or str, default=None
            Timestep of each record (sortable labels); None makes every record
            its own timestep in row order (global row order for a chunked
            ``X``).  Chunked ``X``: as ``sequence_ids``.

        Returns
        -------
        self : DPNaiveBayesHMM
        """
        return self._private_fit(X, sequence_ids=sequence_ids, timesteps=timesteps)

    # The template's steps (skdp.base.DPEstimatorMixin._private_fit): the
    # plan is the requested budget under ``composition``, or no plan at all
    # for ``mechanism="none"``; the noise is calibrated once the number of
    # features and of categories is known.
    def _reads_categories(self):
        """Whether ``fit`` reads the category values off the data (``categories`` docstring)."""
        return self.categories == "nonprivate" or (self.categories is None and self.mechanism == "none")

    def _check_params(self):
        if self.categories is None and self.mechanism != "none":
            raise ValueError(
                "categories must be declared for a private fit: pass each feature's possible values, "
                "e.g. categories=[[0, 1], ['a', 'b', 'c']] (the public domain of the records). "
                "categories='nonprivate' reads them off the data, which releases them outside the guarantee."
            )
        if self.burn_in >= self.n_iter:
            raise ValueError(f"burn_in ({self.burn_in}) must be smaller than n_iter ({self.n_iter}).")
        if self.mechanism == "ops":
            if not self._reads_categories():
                # K_d is declared: the OPS plan's checks need no data, so a bad
                # truncation, alpha or beta is refused before the reservation.
                self._ops_mechanism([np.asarray(c).size for c in self.categories])
        if self.mechanism == "none" and self.accountant is not None:
            raise ValueError("mechanism='none' is not private: it cannot be charged to an accountant.")

    def _noise_mechanisms(self):
        # Floating-point exponential-mechanism draws: the template refuses
        # secure noise before the budget is checked or X is read.
        return {"ops": (ExponentialMechanism,), "laplace": (LaplaceMechanism,)}.get(self.mechanism, ())

    def _privacy_plan(self):
        return PrivacyPlan(self.epsilon, self.delta, self.composition, private=self.mechanism != "none")

    def _validate_input(self, X, y=None, *, sequence_ids=None, timesteps=None):
        """The per-cell counts and the :class:`CellLayout` (sets ``categories_``)."""
        if self.mechanism != "none" and self._reads_categories():
            warn_privacy_leak("categories", "the set of category values of each feature")
        if is_chunked_input(X):
            return self._encode_chunked(X, sequence_ids, timesteps)
        return self._encode(X, sequence_ids, timesteps, reset=True)

    def _calibrate(self, data, plan):
        """Laplace: the noise multiplier of the counts; OPS: the truncation and the mechanism."""
        if self.mechanism == "laplace":
            z = self._noise_multiplier(len(self.categories_), secure_noise=plan.secure_noise)
            return plan.with_settings(NaiveBayesHMMSettings(noise_multiplier=z))
        if self.mechanism == "ops":
            truncation, mech = self._ops_mechanism(self._n_categories)
            return plan.with_settings(NaiveBayesHMMSettings(truncation=truncation, mechanism=mech))
        return plan

    def _fit_private(self, data, plan, rng, ledger):
        """Gibbs sampling on the Laplace counts, through OPS releases, or non-privately."""
        counts, layout = data
        for attr in ("noisy_counts_", "temperature_", "truncation_"):
            self.__dict__.pop(attr, None)

        mask = self._category_mask()
        grid = layout.grid
        if self.n_components == 1:
            # Naive Bayes: every cell has the one state, so the likelihood sees
            # only the corpus-wide counts n_{d,:} (Foulds et al., Section 5).
            # Releasing those (same sensitivity 2 per feature) instead of every
            # cell's counts keeps the noise from adding up over the cells.
            counts, grid = counts.sum(axis=0, keepdims=True), np.zeros((1, 1), dtype=np.int64)
        chain = dict(counts=counts, grid=grid, mask=mask, rng=rng, n_states=self.n_components)
        chain.update(alpha=self.alpha, beta=self.beta, n_iter=self.n_iter, burn_in=self.burn_in)
        if self.mechanism == "laplace":
            z = plan.settings.noise_multiplier
            chain["counts"] = self.noisy_counts_ = self._privatise_counts(counts, mask, z, rng, ledger)
            result = gibbs_sampler(**chain)
        elif self.mechanism == "none":
            result = gibbs_sampler(**chain)
        else:
            result = self._fit_ops(chain, plan.settings.truncation, plan.settings.mechanism, ledger)

        self.startprob_, self.transmat_, theta, self.states_ = result
        if self.n_components == 1:
            self.states_ = np.zeros(layout.n_cells, dtype=np.int64)
        self.emissionprob_ = [theta[:, d, :k] for d, k in enumerate(self._n_categories)]
        self.cell_sequence_ids_ = layout.sequence_labels
        self.cell_timesteps_ = layout.timestep_labels

    def _n_ops_releases(self):
        """Exponential-mechanism releases of an OPS fit (one if the chain is taken as converged)."""
        if self.ops_accounting == "converged":
            return 1
        return ops_gibbs_epsilon(1, self.n_iter, self.n_components)

    def _planned_events(self, noise_multiplier, n_features):
        """Events of the whole fit at ``noise_multiplier`` (Laplace scale / sensitivity, or 1 / epsilon_u)."""
        nb, z = self._neighbouring, noise_multiplier
        if self.mechanism == "laplace":
            # One release per feature: its per-cell count vectors (Appendix E.1).
            return [LaplaceEvent(count=n_features, neighbouring=nb, noise_multiplier=z)]
        return [PureDPEvent(count=self._n_ops_releases(), neighbouring=nb, epsilon=1.0 / z)]

    def _noise_multiplier(self, n_features, *, secure_noise=False):
        """The noise multiplier of the plan, smallest whose composition meets ``(epsilon, delta)``.

        Under basic composition the equal split ``n_releases / epsilon`` is
        exact (Dwork & Roth 2014, Thm. 3.16); otherwise the core calibrator
        bisects the composed cost of :meth:`_planned_events`.
        """
        if self.composition == "basic":
            n_releases = n_features if self.mechanism == "laplace" else self._n_ops_releases()
            return laplace_noise_multiplier(self.epsilon, n_releases)
        return calibrate_noise_multiplier(
            lambda z: self._planned_events(z, n_features),
            self.epsilon,
            self.delta,
            self.composition,
            self._neighbouring,
            secure_noise=secure_noise,
        )

    def _privatise_counts(self, counts, mask, noise_multiplier, rng, ledger):
        """Laplace release of every feature's per-cell count vectors, once (Appendix E.1)."""
        scale = noise_multiplier * COUNT_L1_SENSITIVITY
        mech = LaplaceMechanism(COUNT_L1_SENSITIVITY, scale, self._neighbouring)
        noisy = np.zeros_like(counts)
        for d, k in enumerate(self._n_categories):
            noisy[:, d, :k] = mech.release(counts[:, d, :k], rng, ledger)
        return project_counts(noisy) * mask[None]

    def _ops_mechanism(self, k):
        """OPS truncation per feature and exponential mechanism for ``K_d = k``.

        Reads only parameters and the number of categories, so with declared
        ``categories`` ``fit`` calls it before the reservation: a bad
        ``truncation``, ``alpha`` or ``beta`` then charges nothing.
        """
        k = np.asarray(k)
        a0 = default_truncation(k) if self.truncation is None else np.full(k.shape, float(self.truncation))
        if np.any((k > 1) & (a0 * k >= 1)):
            raise ValueError(
                f"truncation={self.truncation} is too large: it must satisfy truncation * K_d < 1 "
                f"for every feature (K_d = {k.tolist()})."
            )
        sensitivity = dirichlet_log_likelihood_sensitivity(k, a0)
        # Every feature has one category: the likelihood ignores the data, any
        # positive sensitivity is a valid (conservative) bound.
        sensitivity = sensitivity if sensitivity > 0 else 1.0
        z = self._noise_multiplier(k.shape[0])
        mech = ExponentialMechanism(1.0 / z, sensitivity, self._neighbouring)
        lowest = min(self.alpha, self.beta)
        if lowest <= 1 - mech.temperature:
            raise ValueError(
                f"The tempered OPS conditionals are improper: raise alpha and beta above "
                f"1 - temperature = {1 - mech.temperature:.3g}, or lower epsilon."
            )
        return a0, mech

    def _fit_ops(self, chain, a0, mech, ledger):
        self.truncation_ = a0
        temperature = self.temperature_ = mech.temperature
        converged = self.ops_accounting == "converged"
        if converged:
            warnings.warn(
                "ops_accounting='converged': privacy_spent_ is the cost of one exact sample from the "
                "tempered posterior, which holds only if the Gibbs chain has converged. The worst case "
                f"for this unconverged chain is {ops_gibbs_epsilon(1, self.n_iter, self.n_components)} "
                f"releases at epsilon={self.epsilon}.",
                PrivacyLeakWarning,
                stacklevel=_user_stacklevel(),
            )
            rng = chain.pop("rng")
            return mech.sample(
                lambda t, r: gibbs_sampler(**chain, rng=r, temperature=t, truncation=a0, keep_last=True),
                rng,
                ledger,
            )
        return gibbs_sampler(**chain, temperature=temperature, truncation=a0, release=(mech, ledger))

    # ---------------------------------------------------------------- predict

    def _log_params(self):
        mask = self._category_mask()
        theta = np.zeros((self.n_components,) + mask.shape)
        for d, probs in enumerate(self.emissionprob_):
            theta[:, d, : probs.shape[1]] = probs
        log_theta = np.where(mask[None], safe_log(np.maximum(theta, 1e-300)), 0.0)
        return log_theta, safe_log(self.startprob_), safe_log(self.transmat_)

    def _infer(self, X, sequence_ids, timesteps):
        check_is_fitted(self)
        counts, layout = self._encode(X, sequence_ids, timesteps, reset=False)
        log_theta, log_start, log_trans = self._log_params()
        return emission_log_likelihood(counts, log_theta), log_start, log_trans, layout

    def predict(self, X, *, sequence_ids=None, timesteps=None):
        """Most probable state of each record's cell (Viterbi on the released parameters).

        Post-processing of the released model: free.  The input convention is
        that of :meth:`fit`; every record gets its cell's state.

        Returns
        -------
        labels : ndarray of shape (n_records,)
        """
        log_emission, log_start, log_trans, layout = self._infer(X, sequence_ids, timesteps)
        return viterbi(log_emission, log_start, log_trans, layout.grid)[layout.cell_of_record]

    def predict_proba(self, X, *, sequence_ids=None, timesteps=None):
        """Posterior state probabilities of each record's cell (forward-backward).

        Returns
        -------
        proba : ndarray of shape (n_records, n_components)
        """
        log_emission, log_start, log_trans, layout = self._infer(X, sequence_ids, timesteps)
        proba, _ = posterior_marginals(log_emission, log_start, log_trans, layout.grid)
        return proba[layout.cell_of_record]

    def score(self, X, y=None, *, sequence_ids=None, timesteps=None):
        """Log-likelihood per timestep of the sequences, the states marginalised.

        ``sum_r log p(X^(r, .)) / n_cells`` by the forward algorithm on the
        released parameters (the held-out metric of Foulds et al., Figures 6
        and 9).

        Returns
        -------
        score : float
        """
        log_emission, log_start, log_trans, layout = self._infer(X, sequence_ids, timesteps)
        _, log_likelihood = posterior_marginals(log_emission, log_start, log_trans, layout.grid)
        return float(log_likelihood.sum() / layout.n_cells)

    def sample(self, n_sequences=1, n_timesteps=10, n_records=1, random_state=None):
        """Synthetic sequences of records from the released model (free).

        Parameters
        ----------
        n_sequences, n_timesteps, n_records : int
            Number of sequences, timesteps per sequence and records per timestep.
        random_state : int, Generator or None
            None derives the generator from the estimator's ``random_state``.

        Returns
        -------
        X : ndarray of shape (n_sequences * n_timesteps * n_records, n_features)
            Records in the original category labels.
        sequence_ids, timesteps, states : ndarray of shape (n_records_total,)
        """
        check_is_fitted(self)
        for name, v in (("n_sequences", n_sequences), ("n_timesteps", n_timesteps), ("n_records", n_records)):
            if not (isinstance(v, Integral) and v >= 1):
                raise ValueError(f"{name} must be a positive integer, got {v!r}.")
        rng = check_generator(self.random_state if random_state is None else random_state)
        params = (self.startprob_, self.transmat_, self.emissionprob_, self.categories_)
        return sample_sequences(*params, n_sequences, n_timesteps, n_records, rng)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        tags.input_tags.categorical = True
        return tags
