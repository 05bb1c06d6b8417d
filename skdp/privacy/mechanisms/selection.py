"""Private selection: noisy histograms, report-noisy-max and the exponential mechanism."""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..events import ADD_REMOVE, REPLACE_ONE, PureDPEvent, _check_relation

#: Why the exponential mechanism refuses ``secure_noise=True`` (OPS is its one user).
SECURE_NOISE_REFUSAL = (
    "secure_noise=True cannot be honoured by one-posterior sampling (mechanism='ops'), "
    "the exponential mechanism: it samples in floating point and has no exact sampler. "
    "Use mechanism='laplace' for noise sampled exactly on a grid, or accept floating-point "
    "sampling with secure_noise=False for this estimator (or "
    "skdp.config_context(secure_noise=False))."
)


def histogram_sensitivity(norm, neighbouring=REPLACE_ONE):
    """Sensitivity of a histogram of counts where each record falls in one bin.

    Adding or removing a record changes one bin by one (L1 = L2 = 1); replacing
    it moves one unit between two bins (L1 = 2, L2 = sqrt(2)).
    """
    _check_relation(neighbouring)
    if norm not in (1, 2):
        raise ValueError(f"norm must be 1 or 2, got {norm!r}.")
    if neighbouring == ADD_REMOVE:
        return 1.0
    return 2.0 if norm == 1 else math.sqrt(2.0)


def noisy_histogram(counts, mechanism, rng, ledger):
    """Release a histogram of counts through ``mechanism`` (one event)."""
    return mechanism.release(counts, rng, ledger)


def noisy_histogram_mode(counts, mechanism, rng, ledger):
    """Index of the largest bin of the noisy histogram (Acs et al. 2018, Algorithm 3 line 6).

    The argmax is post-processing of the released noisy histogram, so it costs
    what the histogram release costs.
    """
    return int(np.argmax(noisy_histogram(counts, mechanism, rng, ledger)))


class ExponentialMechanism:
    """Exponential mechanism (McSherry & Talwar 2007).

    Samples a candidate with probability proportional to
    ``exp(epsilon * u / (2 * sensitivity))``; epsilon-DP when ``sensitivity``
    bounds the change of every utility between neighbouring datasets.  Its
    *temperature* ``T = 2 * sensitivity / epsilon`` is the temperature at which
    posterior sampling with log-likelihood sensitivity ``sensitivity`` is
    epsilon-DP (Wang et al. 2015; Foulds et al. 2016, Eq. 10 and 14).

    Both samplers work in floating point (``exp`` of utilities for
    :meth:`select`; inverse-CDF Beta, Dirichlet and state draws for posterior
    sampling).  Their output carries the low-order-bit leak of floating-point
    noise (Mironov 2012; Ilvento 2020 for the exponential mechanism), which
    no grid rounding removes, and its event
    (:class:`~skdp.privacy.PureDPEvent`) cannot say so.  So the mechanism has
    no exact sampler (:attr:`exact_sampler` is False): it refuses (ValueError)
    to release on a ledger opened with ``secure_noise=True``, and estimators
    using it refuse such a fit before reserving (:meth:`refuse_secure_noise`).

    Parameters
    ----------
    epsilon : float
    sensitivity : float
        Sensitivity of the utility (of the log joint density for posterior
        sampling).
    neighbouring : {"replace_one", "add_remove"}
    """

    exact_sampler = False

    @classmethod
    def refuse_secure_noise(cls):
        """Raise the ValueError of a ``secure_noise=True`` request (no exact sampler)."""
        raise ValueError(SECURE_NOISE_REFUSAL)

    def __init__(self, epsilon, sensitivity, neighbouring=REPLACE_ONE):
        for name, v in (("epsilon", epsilon), ("sensitivity", sensitivity)):
            if not (isinstance(v, numbers.Real) and np.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive finite number, got {v!r}.")
        _check_relation(neighbouring)
        self.epsilon = float(epsilon)
        self.sensitivity = float(sensitivity)
        self.neighbouring = neighbouring

    @property
    def temperature(self):
        """``2 * sensitivity / epsilon`` (Foulds et al., Eq. 14)."""
        return 2.0 * self.sensitivity / self.epsilon

    def event(self, count=1):
        return PureDPEvent(count=count, neighbouring=self.neighbouring, epsilon=self.epsilon)

    def select(self, utilities, rng, ledger):
        """Sample an index of ``utilities`` (one event)."""
        u = np.asarray(utilities, dtype=float)
        if u.ndim != 1 or u.size == 0 or not np.all(np.isfinite(u)):
            raise ValueError("utilities must be a non-empty 1-D array of finite numbers.")
        if getattr(ledger, "secure_noise", False):
            self.refuse_secure_noise()
        ledger.record(self.event())
        logits = u / self.temperature
        p = np.exp(logits - logits.max())
        return int(rng.choice(u.size, p=p / p.sum()))

    def sample(self, sampler, rng, ledger):
        """Draw one sample from a tempered distribution (one event).

        ``sampler(temperature, rng)`` must draw exactly from the density
        proportional to ``exp(u(theta) / temperature)`` over the (truncated)
        parameter space; posterior sampling passes the log joint as ``u``.
        """
        if getattr(ledger, "secure_noise", False):
            self.refuse_secure_noise()
        ledger.record(self.event())
        return sampler(self.temperature, rng)
