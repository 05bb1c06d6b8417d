"""DPBetaBernoulli: private posterior inference for independent Bernoulli features."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._chunks import is_chunked_input
from .._input import set_chunked_features, validate_fit_input
from ..base import PRIVACY_PARAMETER_CONSTRAINTS, DPEstimatorMixin, PrivacyPlan, private_fit_context
from ..privacy import REPLACE_ONE, ExponentialMechanism, LaplaceMechanism, histogram_sensitivity
from ._conjugate import bernoulli_log_likelihood, category_counts, project_counts, sample_truncated_beta

#: L1 sensitivity of one feature's counts (n_minus, n_plus) under replace-one
#: neighbours: a changed record moves one unit from one count to the other
#: (Foulds et al., Eq. 17 with S(x) = [x, 1 - x]), the replace-one L1
#: sensitivity of a histogram (2).  ``count_release="paper"``.
COUNT_L1_SENSITIVITY = histogram_sensitivity(1, REPLACE_ONE)

#: L1 sensitivity of one feature's success count n_plus alone under
#: replace-one neighbours (``count_release="one"``): the histogram's change of
#: 2 is one unit out of one bin and one unit into the other, so each of the two
#: bins moves by at most half of it (S(x) = x, |x - x'| <= 1).
SUCCESS_COUNT_L1_SENSITIVITY = COUNT_L1_SENSITIVITY / 2


def ops_log_likelihood_sensitivity(truncation, n_features):
    """Exponential-mechanism sensitivity of the truncated Beta-Bernoulli log joint.

    Foulds et al., Eq. 15: per feature
    ``sup |log Pr(x|p) - log Pr(x'|p)| = log((1 - a0) / a0)`` over
    ``p in [a0, 1 - a0]``; the features of a record add up.
    """
    return n_features * (math.log1p(-truncation) - math.log(truncation))


def binary_chunk_counts(chunk):
    """``(n_minus, n_plus)`` per feature of one chunk of binary rows (a map step)."""
    if not np.isin(chunk, (0.0, 1.0)).all():
        raise ValueError("X must be binary: every entry 0 or 1 (or boolean).")
    n_plus = chunk.sum(axis=0)
    return np.stack([chunk.shape[0] - n_plus, n_plus], axis=1)


def _public_n_features(X):
    """Number of features read off ``X``'s shape (public), or None when a pass is needed.

    Arrays, DataFrames, memmaps and Dask collections carry their shape; a
    nested list is converted for its shape only.  Chunk factories and
    iterators are read in the fit's one pass, after the reservation.
    """
    shape = getattr(X, "shape", None)
    if shape is None and not (callable(X) or is_chunked_input(X)):
        try:
            shape = np.shape(X)
        except (TypeError, ValueError):  # ragged: validation refuses it later
            return None
    if shape is None or len(shape) not in (1, 2):
        return None
    n_features = 1 if len(shape) == 1 else shape[1]
    return int(n_features) if isinstance(n_features, Integral) and n_features >= 1 else None



@dataclass(frozen=True)
class BetaBernoulliSettings:
    """:class:`DPBetaBernoulli`'s plan (public: from its parameters alone).

    Attributes
    ----------
    prior : ndarray of shape (2,)
        The Beta prior ``(alpha, beta)``, checked once before the fit.
    """

    prior: np.ndarray

class DPBetaBernoulli(DPEstimatorMixin, BaseEstimator):
    """Differentially private Beta-Bernoulli posterior (Foulds et al. 2016).

    A conjugate ``Beta(alpha, beta)`` prior over the success probability
    ``p_j`` of each of ``d`` independent binary features.  Two private
    inference methods:

    ``mechanism="laplace"`` (Foulds et al., Section 3.2, Eq. 16-17)
        Laplace noise on the sufficient statistics of every feature, the
        budget split equally over the ``d`` features.  The posterior
        ``Beta(alpha + n_plus~, beta + n_minus~)`` is post-processing of the
        released counts: any number of posterior samples, moments or
        synthetic records is free.  Pure epsilon-DP.  Two releases of the
        counts (``count_release``):

        ``"one"`` (default)
            Under replace-one neighbours the number of records ``n`` is
            public (neighbours have the same size), so ``n_minus = n - n_plus``
            carries no information beyond ``n_plus``.  Only ``n_plus`` is
            released, with L1 sensitivity 1 per feature (scale
            ``d / epsilon``, half the paper's at the same epsilon); the noisy
            count is clipped to ``[0, n]`` and ``n_minus~ = n - n_plus~``
            (post-processing), so the released pair is non-negative and sums
            to ``n``.
        ``"paper"``
            The paper's release: both ``(n_minus, n_plus)``, L1 sensitivity 2
            per feature (scale ``2 d / epsilon``), then projection to
            non-negative counts (Eq. 16).  Reproduces Foulds et al.'s
            Figure 2 and the fits of skdp before ``count_release`` existed.
    ``mechanism="ops"`` (one posterior sample; Section 3.1, Eq. 14-15)
        One sample from the posterior truncated to ``[a0, 1 - a0]`` and
        tempered at ``T = 2 Delta / epsilon`` with
        ``Delta = d log((1 - a0) / a0)``: the exponential mechanism with the
        log joint density as utility, epsilon-DP per sample.  Each further
        sample drawn with :meth:`sample_posterior` costs ``epsilon`` again and
        ``privacy_spent_`` grows accordingly; the exact statistics needed for
        that are kept in memory but never pickled.  The draws are
        floating-point, so OPS refuses ``secure_noise=True`` (a ValueError,
        before the budget or the data is touched).  The tempered posterior
        has the Beta shapes ``(n + prior - 1) / T + 1``, positive for every
        dataset only if ``min(prior) > 1 - T``: otherwise the fit raises a
        ValueError decided by ``prior``, ``epsilon``, ``truncation`` and the
        number of features alone (public), never by the counts, so
        neighbouring datasets cannot be told apart by it.  It is raised
        before the budget is reserved whenever the number of features can be
        read off ``X``'s shape (arrays, DataFrames, memmaps, Dask arrays,
        lists); for a chunk factory only after the pass over the data, with
        the budget charged as for any error after the reservation.

    The guarantee (``privacy_spent_``) refers to replace-one neighbours:
    datasets with the same number of records differing in one record.

    Parameters
    ----------
    prior : tuple of (float, float), default=(1.0, 1.0)
        ``(alpha, beta)`` of the Beta prior, shared by all features.
    epsilon : float, default=1.0
        Privacy budget of the fit (for ``"ops"``: of each released sample).
    delta : float, default=0.0
        Accepted for API uniformity; both mechanisms are pure DP, so the
        reported delta is 0.
    mechanism : {"laplace", "ops"}, default="laplace"
    count_release : {"one", "paper"}, default="one"
        How ``mechanism="laplace"`` releases the counts of a feature: the
        success count alone, the failure count derived from the public ``n``
        (``"one"``, half the noise), or both counts as in the paper
        (``"paper"``); see above.  Ignored by ``mechanism="ops"``, which
        releases a posterior sample and no counts.  It relies on ``n`` being
        public, which holds for the replace-one neighbours this estimator
        is accounted under; a subclass accounted under add/remove neighbours
        (where ``n`` is private) must use ``"paper"``: ``"one"`` raises a
        ValueError there, before the budget is reserved.
    truncation : float, default=0.05
        OPS truncation point ``a0`` in (0, 0.5).
    accountant : BudgetAccountant, default=None
        Shared budget charged with ``privacy_spent_``.
    random_state : None, int, RandomState or Generator, default=None
        Source of the noise.  ``None`` (fresh OS entropy) is the only choice
        for a release: anyone who holds the seed, or the ``RandomState`` /
        ``Generator`` object passed here, can regenerate the noise and remove
        it, recovering the exact counts.  Seeds are for experiments: an int
        reproduces a fit exactly.  The fit's generator is never stored on the
        model, and a pickle never carries one (a ``RandomState`` or
        ``Generator`` passed here is pickled as ``None``).  Draws made after
        ``fit`` (:meth:`sample_posterior`, :meth:`sample`) use fresh entropy
        for ``None``; for an int, the ``k``-th such call since the fit uses a
        stream spawned from the seed with the key ``k`` (:doc:`/guarantee`,
        "Seeds and randomness"), reproducible but never the fit's noise
        stream; a ``RandomState`` or ``Generator`` is drawn from
        further.

    secure_noise : bool or None, default=None
        Sample every Laplace and Gaussian release exactly on a grid (discrete
        Laplace / discrete Gaussian, Canonne, Kamath & Steinke 2020) instead of
        in floating point, whose low-order bits leak the noiseless value
        (Mironov 2012).  None follows the package default
        (:func:`skdp.set_config`), read once at the start of ``fit`` and
        carried by the estimator to worker processes.
        ``mechanism="ops"`` has no exact sampler and raises a ValueError when
        this is (or resolves to) True, in ``fit`` and in
        :meth:`sample_posterior`.

    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features,)
        Defined when X has feature names that are all strings.
    noisy_counts_ : ndarray of shape (n_features, 2)
        Released ``(n_minus, n_plus)`` per feature after projection
        (``"laplace"`` only); with ``count_release="one"`` each row sums to
        the number of records.
    posterior_alpha_, posterior_beta_ : ndarray of shape (n_features,)
        Parameters of the privatised posterior (``"laplace"`` only).
    temperature_ : float
        Temperature of the OPS posterior (``"ops"`` only).
    posterior_sample_ : ndarray of shape (n_features,)
        One posterior sample of ``p``: the OPS release, or a free draw from the
        privatised posterior.
    privacy_spent_ : PrivacySpent
        ``(epsilon, delta)`` of everything released so far.

    See Also
    --------
    sklearn.naive_bayes.BernoulliNB : the non-private Bernoulli likelihood.

    References
    ----------
    J. Foulds, J. Geumlek, M. Welling, K. Chaudhuri. On the theory and
    practice of privacy-preserving Bayesian data analysis. UAI 2016.

    Y.-X. Wang, S. Fienberg, A. Smola. Privacy for free: posterior sampling and
    stochastic gradient Monte Carlo. ICML 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.bayes import DPBetaBernoulli
    >>> X = np.random.default_rng(0).binomial(1, 0.3, size=(5000, 2))
    >>> model = DPBetaBernoulli(epsilon=1.0, random_state=0).fit(X)
    >>> model.posterior_mean().round(2)
    array([0.3, 0.3])
    >>> model.privacy_spent_
    PrivacySpent(epsilon=1.0, delta=0.0)
    """

    # Everything a fitted model holds (besides scikit-learn's and the privacy
    # metadata): the Laplace release (noisy_counts_) and its post-processing
    # (posterior_alpha_, posterior_beta_, the free posterior_sample_); or the
    # OPS release (posterior_sample_) and its public temperature_, a function
    # of epsilon, truncation and the number of features; and the number of
    # random calls made since the fit, which the user made (public).  One
    # exception, OPS only: _ops_posterior, the exact tempered posterior (a
    # function of the exact counts), is no release but the private input of
    # the exponential mechanism behind sample_posterior, whose every draw is
    # charged; it lives in memory only (``_working_state``: never pickled).
    # No generator, no seed.
    _released_attributes = frozenset(
        {
            "noisy_counts_",
            "posterior_alpha_",
            "posterior_beta_",
            "posterior_sample_",
            "temperature_",
        }
    )
    _working_state = frozenset({"_ops_posterior"})

    _parameter_constraints = {
        **PRIVACY_PARAMETER_CONSTRAINTS,
        "prior": [tuple, list],
        "mechanism": [StrOptions({"laplace", "ops"})],
        "count_release": [StrOptions({"one", "paper"})],
        "truncation": [Interval(Real, 0, 0.5, closed="neither")],
    }

    def __init__(
        self,
        prior=(1.0, 1.0),
        epsilon=1.0,
        delta=0.0,
        mechanism="laplace",
        count_release="one",
        truncation=0.05,
        accountant=None,
        random_state=None,
        secure_noise=None,
    ):
        self.prior = prior
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.count_release = count_release
        self.truncation = truncation
        self.accountant = accountant
        self.random_state = random_state
        self.secure_noise = secure_noise

    def _check_prior(self):
        prior = np.asarray(self.prior, dtype=float)
        if prior.shape != (2,) or not np.all(np.isfinite(prior)) or np.any(prior <= 0):
            raise ValueError(f"prior must be a pair of positive numbers (alpha, beta), got {self.prior!r}.")
        return prior

    def _validate_X(self, X, reset):
        # 2-D only, like every estimator (a 1-D X is refused, without its values).
        X = validate_data(self, X, reset=reset, dtype=np.float64)
        if reset:
            self.n_features_in_ = X.shape[1]
        elif X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input."
            )
        if not np.isin(X, (0.0, 1.0)).all():
            raise ValueError("X must be binary: every entry 0 or 1 (or boolean).")
        return X

    @private_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Release the private posterior of ``p`` from binary data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples,)
            Binary data; a 1-D array is one feature.  A 2-D ``numpy.memmap``,
            Dask array or DataFrame, or a callable returning chunks is read
            chunk by chunk (out of core; see :doc:`/scale_out`).
        y : None
            Ignored.

        Returns
        -------
        self : DPBetaBernoulli
        """
        return self._private_fit(X)

    # The template's steps (skdp.base.DPEstimatorMixin._private_fit).  The
    # plan is pure epsilon-DP under basic composition; the mechanisms are
    # calibrated in _fit_private, once the single pass has given the number
    # of features of a chunk factory or iterator.
    def _check_public_input(self, X, y=None):
        """OPS's plan checked against ``X``'s shape where it shows ``d``.

        The number of features is public when it can be read off the shape
        of ``X`` without reading a value (arrays, DataFrames, memmaps, Dask
        arrays, lists): OPS's refusal of a possibly improper tempered
        posterior, decided by public quantities only, then comes before the
        reservation, as every other parameter error.  A chunk factory or an
        iterator shows ``d`` only in the fit's one pass (the refusal then
        comes from ``_fit_private``, with the budget charged).
        """
        n_features = _public_n_features(X) if self.mechanism == "ops" else None
        if n_features is not None:
            self._ops_mechanism(self._check_prior(), n_features)

    def _check_params(self):
        self._check_prior()
        if self.mechanism == "laplace" and self.count_release == "one" and self._neighbouring != REPLACE_ONE:
            # Deriving n_minus from n is free only when n is public, as under
            # replace-one neighbours; under add/remove it is not.
            raise ValueError(
                "count_release='one' derives the failure counts from the number of records, "
                "which is public only under replace-one neighbours: use count_release='paper'."
            )

    def _noise_mechanisms(self):
        # OPS samples in floating point: the template refuses secure noise
        # before the budget is checked or X is read.
        return (ExponentialMechanism,) if self.mechanism == "ops" else (LaplaceMechanism,)

    def _privacy_plan(self):
        return PrivacyPlan(self.epsilon, self.delta, "basic", settings=BetaBernoulliSettings(self._check_prior()))

    def _validate_input(self, X, y=None):
        # One pass over chunked input (a one-shot iterator is accepted), made
        # by _chunked_counts; a 1-D X is one feature, in memory and chunked.
        return validate_fit_input(self, X, single_pass=True, validate=self._validate_X)

    def _fit_private(self, data, plan, rng, ledger):
        """Release the counts (Laplace, Eq. 16-17; see ``count_release``) or one tempered posterior sample (OPS, Eq. 14)."""
        prior = plan.settings.prior
        if data.chunked:
            counts = self._chunked_counts(data.chunks)
            set_chunked_features(self, data.chunks)
        else:
            counts = category_counts(data.X.astype(np.int64), 2)  # columns: (n_minus, n_plus)
        d = counts.shape[0]
        for attr in (
            "noisy_counts_",
            "posterior_alpha_",
            "posterior_beta_",
            "temperature_",
            "_ops_posterior",
        ):
            self.__dict__.pop(attr, None)
        self._n_draws_after_fit = 0
        if self.mechanism == "laplace":
            if self.count_release == "paper":
                mech = LaplaceMechanism.from_epsilon(self.epsilon, COUNT_L1_SENSITIVITY, n_uses=d)
                noisy = np.vstack([mech.release(counts[j], rng, ledger) for j in range(d)])
                self.noisy_counts_ = project_counts(noisy)
            else:
                # n_plus alone; n (public under replace-one) gives n_minus.
                # Clipping to [0, n] keeps both counts non-negative.
                n = float(counts[0].sum())
                mech = LaplaceMechanism.from_epsilon(self.epsilon, SUCCESS_COUNT_L1_SENSITIVITY, n_uses=d)
                n_plus = np.array([mech.release(counts[j, 1], rng, ledger) for j in range(d)], dtype=float)
                n_plus = np.clip(n_plus, 0.0, n)
                self.noisy_counts_ = np.column_stack([n - n_plus, n_plus])
            self.posterior_alpha_ = prior[0] + self.noisy_counts_[:, 1]
            self.posterior_beta_ = prior[1] + self.noisy_counts_[:, 0]
            self.posterior_sample_ = rng.beta(self.posterior_alpha_, self.posterior_beta_)
        else:
            # Same decision as before the reservation (d is public); reached
            # first here only when X's shape could not be read without a pass.
            mech = self._ops_mechanism(prior, d)
            self.temperature_ = mech.temperature
            # Eq. 14: the log joint (prior included) divided by T is a Beta
            # log-density with these shapes, positive for any counts >= 0
            # since min(prior) > 1 - T.
            a = (counts[:, 1] + prior[0] - 1) / mech.temperature + 1
            b = (counts[:, 0] + prior[1] - 1) / mech.temperature + 1
            self._ops_posterior = (a, b, mech)
            self.posterior_sample_ = mech.sample(self._draw_ops, rng, ledger)

    def _ops_mechanism(self, prior, n_features):
        """The OPS exponential mechanism, refusing an improper tempered posterior.

        The shapes ``(n + prior - 1) / T + 1`` are positive for every count
        ``n >= 0`` if and only if ``min(prior) > 1 - T``.  The check reads
        only public quantities (prior, epsilon, truncation, number of
        features): deciding it on the counts would raise on one dataset and
        release on its neighbour (all zeros against a single one).
        """
        mech = ExponentialMechanism(self.epsilon, ops_log_likelihood_sensitivity(self.truncation, n_features))
        if prior.min() <= 1 - mech.temperature:
            raise ValueError(
                "The tempered OPS posterior can be improper: the prior must exceed "
                f"1 - temperature = {1 - mech.temperature:.3g} (temperature = 2 d log((1 - a0) / a0) "
                "/ epsilon); raise the prior or the truncation, or lower epsilon."
            )
        return mech

    def _chunked_counts(self, data):
        """Exact per-feature counts of a memmap, Dask collection, chunk factory or iterator.

        The fit's one pass: one reduction over the chunks (:mod:`skdp._chunks`);
        the noise is then added once to the global counts, exactly as in the
        in-memory fit.
        """
        return data.map_reduce(binary_chunk_counts)

    def _draw_ops(self, temperature, rng, size=None):
        a, b, _ = self._ops_posterior
        return sample_truncated_beta(a, b, self.truncation, 1 - self.truncation, rng, size=size)

    def sample_posterior(self, n_samples=1):
        """Draw posterior samples of ``p``.

        Free for ``"laplace"`` (post-processing of the released counts).  For
        ``"ops"`` each sample is a new release costing ``epsilon``: the user's
        budget is checked first and ``privacy_spent_`` is increased; a
        ValueError is raised instead, before any charge, when secure noise is
        on (the estimator's ``secure_noise``, or the package setting if that
        is None), because the draws are floating-point.

        Parameters
        ----------
        n_samples : int, default=1

        Returns
        -------
        samples : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        if not (isinstance(n_samples, (int, np.integer)) and n_samples >= 1):
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}.")
        if self.mechanism == "laplace":
            return self._generator_after_fit().beta(
                self.posterior_alpha_, self.posterior_beta_, size=(n_samples, self.n_features_in_)
            )
        if getattr(self, "_ops_posterior", None) is None:
            raise RuntimeError(
                "This OPS model was unpickled without its private statistics; refit it to draw "
                "further samples (posterior_sample_ holds the released one)."
            )
        mech = self._ops_posterior[2]
        if self._resolve_secure_noise():
            # The template's resolution, for this release: refuse before the
            # budget is charged.
            mech.refuse_secure_noise()
        self._spend_after_fit([mech.event(count=n_samples)])
        return self._draw_ops(mech.temperature, self._generator_after_fit(), size=n_samples)

    def posterior_mean(self):
        """Point estimate of ``p``: the privatised posterior mean (laplace) or the OPS sample.

        Returns
        -------
        p : ndarray of shape (n_features,)
        """
        check_is_fitted(self)
        if self.mechanism == "laplace":
            return self.posterior_alpha_ / (self.posterior_alpha_ + self.posterior_beta_)
        return self.posterior_sample_.copy()

    def score_samples(self, X):
        """Log posterior-predictive likelihood of each row.

        The posterior predictive of a Beta-Bernoulli record is
        ``Bernoulli(posterior_mean())`` per feature (for OPS, the released
        sample plays the posterior's role).
        """
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        return bernoulli_log_likelihood(X, self.posterior_mean())

    def score(self, X, y=None):
        """Mean log posterior-predictive likelihood of the rows of ``X``."""
        return float(np.mean(self.score_samples(X)))

    def sample(self, n_samples=1):
        """Synthetic binary records from the posterior predictive (free).

        One ``p`` is drawn from the privatised posterior (for OPS, the released
        sample is used) and the records are i.i.d. Bernoulli(p) given it.

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        if not (isinstance(n_samples, (int, np.integer)) and n_samples >= 1):
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}.")
        rng = self._generator_after_fit()
        if self.mechanism == "laplace":
            p = rng.beta(self.posterior_alpha_, self.posterior_beta_)
        else:
            p = self.posterior_sample_
        return (rng.random((n_samples, self.n_features_in_)) < p).astype(np.int64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.estimator_type = "density_estimator"
        tags.target_tags.required = False
        return tags
