"""Additive noise mechanisms: Laplace and Gaussian.

A mechanism is a small object holding a sensitivity, a noise scale and the
neighbouring relation the sensitivity was derived under.  Its only way to
touch data is :meth:`release`, which records the mechanism's privacy event on
the fit's :class:`~skdp.privacy.PrivacyLedger` before returning the noisy
value, so a release can never escape the accounting.

Secure noise is explicit: the ledger a release records on says how the fit
samples (``PrivacyLedger(secure_noise=...)``, set by the estimator from its
resolved ``secure_noise``).  On a secure ledger the Laplace and Gaussian
mechanisms sample exactly on a grid (:mod:`skdp.privacy.mechanisms.secure`) and record
the discrete events; each mechanism class declares whether it has such an
exact sampler (:attr:`exact_sampler`), so an estimator can refuse an
unsupported request before anything is reserved.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..calibration import _as_released, gaussian_noise_multiplier, laplace_noise_multiplier
from ..events import (
    REPLACE_ONE,
    GaussianEvent,
    LaplaceEvent,
    _check_relation,
)
from .secure import secure_release


def _check_scale(name, value, allow_zero=False):
    ok = isinstance(value, numbers.Real) and np.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        raise ValueError(
            f"{name} must be a {'non-negative' if allow_zero else 'positive'} finite number, got {value!r}."
        )


def _secure(ledger):
    """The ``secure_noise`` of the fit ``ledger`` belongs to (False for a ledger without one)."""
    return bool(getattr(ledger, "secure_noise", False))


def _check_value(value):
    value = np.asarray(value, dtype=float)
    # The method, not np.all: the same answer without the wrapper's cost
    # (iterative fits release at every step).
    if not np.isfinite(value).all():
        raise ValueError("The statistic to privatise contains NaN or infinity.")
    return value


class _AdditiveMechanism:
    #: Whether the mechanism can sample exactly on a grid under secure noise.
    exact_sampler = True

    def __init__(self, sensitivity, scale, neighbouring=REPLACE_ONE):
        _check_scale("sensitivity", sensitivity)
        _check_scale("scale", scale)
        _check_relation(neighbouring)
        self.sensitivity = float(sensitivity)
        self.scale = float(scale)
        self.neighbouring = neighbouring

    @property
    def noise_multiplier(self):
        """Noise scale over sensitivity: the mechanism's privacy in one number."""
        return self.scale / self.sensitivity

    def release(self, value, rng, ledger):
        """Return ``value`` plus noise, recording one event on ``ledger``.

        The whole array is one release: its sensitivity must bound the norm of
        the change of the whole array between neighbouring datasets.  The
        noise is sampled exactly on a grid when the ledger
        says ``secure_noise``.
        """
        value = _check_value(value)
        secure = _secure(ledger)
        ledger.record(self.event(secure_noise=secure))
        return self._perturb(value, rng, secure)

    def _perturb(self, value, rng, secure):
        if secure:
            return secure_release(value, self.sensitivity, self.noise_multiplier, self._kind, rng)
        return value + self._noise(rng, value.shape)

    def event(self, count=1, *, secure_noise=False):
        """Privacy event of ``count`` releases.

        With ``secure_noise`` the exact grid samplers record their own event
        types (:class:`DiscreteLaplaceEvent`, :class:`DiscreteGaussianEvent`);
        the mapping is the one calibration costs plans with, so a plan and
        its releases cannot disagree.
        """
        planned = self._event_class(
            count=count, neighbouring=self.neighbouring, noise_multiplier=self.noise_multiplier
        )
        return _as_released(planned, secure_noise)

    def __repr__(self):
        return (
            f"{type(self).__name__}(sensitivity={self.sensitivity:g}, scale={self.scale:g}, "
            f"neighbouring={self.neighbouring!r})"
        )


class LaplaceMechanism(_AdditiveMechanism):
    """Laplace mechanism (Dwork, McSherry, Nissim & Smith 2006).

    Adds i.i.d. ``Laplace(0, scale)`` noise to every coordinate; with
    ``scale = sensitivity / epsilon`` for the L1 ``sensitivity`` it is
    epsilon-DP.

    Parameters
    ----------
    sensitivity : float
        L1 sensitivity of the released array under ``neighbouring``.
    scale : float
        Laplace scale b (std is ``sqrt(2) * b``).
    neighbouring : {"replace_one", "add_remove"}
    """

    _event_class = LaplaceEvent
    _kind = "laplace"

    @classmethod
    def from_epsilon(cls, epsilon, sensitivity, neighbouring=REPLACE_ONE, n_uses=1):
        """Mechanism spending ``epsilon / n_uses`` per release (basic composition)."""
        return cls(sensitivity, sensitivity * laplace_noise_multiplier(epsilon, n_uses), neighbouring)

    @property
    def epsilon(self):
        """Pure epsilon of one release."""
        return 1.0 / self.noise_multiplier

    @property
    def std(self):
        """Standard deviation of the noise on one coordinate, ``sqrt(2) * scale`` (public)."""
        return math.sqrt(2.0) * self.scale

    def _noise(self, rng, shape):
        return rng.laplace(0.0, self.scale, size=shape)


class GaussianMechanism(_AdditiveMechanism):
    """Gaussian mechanism (Dwork & Roth 2014, Appendix A; Balle & Wang 2018).

    Adds i.i.d. ``N(0, scale^2)`` noise; its privacy is that of the noise
    multiplier ``scale / sensitivity`` for the L2 ``sensitivity``, in whatever
    composition the accountant uses.

    Parameters
    ----------
    sensitivity : float
        L2 sensitivity of the released array under ``neighbouring``.
    scale : float
        Standard deviation of the noise.
    neighbouring : {"replace_one", "add_remove"}
    """

    _event_class = GaussianEvent
    _kind = "gaussian"

    @classmethod
    def from_budget(cls, epsilon, delta, sensitivity, neighbouring=REPLACE_ONE, calibration="analytic"):
        """Single-release Gaussian mechanism at (epsilon, delta).

        ``calibration="analytic"`` (default) is exact (Balle & Wang 2018);
        ``"classic"`` is Dwork & Roth Thm. A.1 (epsilon < 1 only).
        """
        z = gaussian_noise_multiplier(epsilon, delta, calibration)
        return cls(sensitivity, sensitivity * z, neighbouring)

    @property
    def std(self):
        """Standard deviation of the noise on one coordinate, ``scale`` (public)."""
        return self.scale

    def _noise(self, rng, shape):
        return rng.normal(0.0, self.scale, size=shape)
