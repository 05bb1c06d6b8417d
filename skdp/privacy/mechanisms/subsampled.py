"""Gaussian mechanism applied to a random subsample, for iterative algorithms.

:class:`~skdp.privacy.GaussianMechanism` records a plain
:class:`~skdp.privacy.GaussianEvent`; a release computed from a random
subsample of the data is cheaper (amplification by subsampling) and must be
recorded as a :class:`~skdp.privacy.SubsampledGaussianEvent` instead, with the
sampling rate and scheme it relied on.

Iterative algorithms (DP-SEP, DP-SGD) make hundreds of thousands of identical
releases; :meth:`SubsampledGaussianMechanism.session` lets them release step
after step while the ledger receives one event whose ``count`` is the number of
releases actually made (recorded even if the loop is interrupted).
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..events import ADD_REMOVE, REPLACE_ONE, SubsampledGaussianEvent
from .additive import GaussianMechanism, _check_value, _secure

#: Neighbouring relation each sampling scheme's amplification theorem refers to.
SAMPLING_RELATION = {"poisson": ADD_REMOVE, "without_replacement": REPLACE_ONE}


SECURE_NOISE_REFUSAL = (
    "secure_noise=True is not supported by subsampled Gaussian mechanisms "
    "(DP-SEP, DP-SGD): set secure_noise=False for this estimator."
)


class SubsampledGaussianMechanism(GaussianMechanism):
    """Gaussian mechanism whose input is computed from a random subsample.

    It has no exact sampler (:attr:`exact_sampler` is False): the grid
    samplers are scalar Python, and the amplification bounds behind
    :class:`~skdp.privacy.SubsampledGaussianEvent` are proved for the
    continuous Gaussian.  It refuses to release on a ledger opened with
    ``secure_noise=True``; estimators using it refuse such a fit before
    reserving (:meth:`refuse_secure_noise`).

    Parameters
    ----------
    sensitivity : float
        L2 sensitivity of the released array, for subsamples that differ
        as ``sampling``'s relation says (one record replaced for
        ``"without_replacement"``, one record added or removed for
        ``"poisson"``).
    scale : float
        Standard deviation of the noise.
    sampling_rate : float
        ``batch_size / n_samples`` (without replacement) or the inclusion
        probability of every record (Poisson), in (0, 1].
    sampling : {"without_replacement", "poisson"}, default="without_replacement"
        How the subsample of every release is drawn; fixes the neighbouring
        relation (``"replace_one"`` or ``"add_remove"``).

    Notes
    -----
    The caller must draw every subsample afresh and independently of the
    data, as the scheme says; the mechanism cannot check it.
    """

    def __init__(self, sensitivity, scale, sampling_rate, sampling="without_replacement"):
        if sampling not in SAMPLING_RELATION:
            raise ValueError(f"sampling must be 'poisson' or 'without_replacement', got {sampling!r}.")
        if not (isinstance(sampling_rate, (int, float, np.floating)) and 0 < sampling_rate <= 1):
            raise ValueError(f"sampling_rate must be in (0, 1], got {sampling_rate!r}.")
        super().__init__(sensitivity, scale, SAMPLING_RELATION[sampling])
        self.sampling_rate = float(sampling_rate)
        self.sampling = sampling

    exact_sampler = False

    @classmethod
    def refuse_secure_noise(cls):
        """Raise the ValueError of a ``secure_noise=True`` request (no exact sampler)."""
        raise ValueError(SECURE_NOISE_REFUSAL)

    def event(self, count=1, *, secure_noise=False):
        """Privacy event of ``count`` releases, each on a fresh subsample."""
        if secure_noise:
            self.refuse_secure_noise()
        return SubsampledGaussianEvent(
            count=count,
            neighbouring=self.neighbouring,
            noise_multiplier=self.noise_multiplier,
            sampling_rate=self.sampling_rate,
            sampling=self.sampling,
        )

    def release(self, value, rng, ledger):
        """One release on a fresh subsample (see :meth:`session` for loops)."""
        if _secure(ledger):
            self.refuse_secure_noise()
        return super().release(value, rng, ledger)

    @contextlib.contextmanager
    def session(self, rng, ledger):
        """Context giving a ``release(value)`` function for a loop of releases.

        On exit (normal or not) one event with ``count`` equal to the number
        of releases made is recorded on ``ledger``.

        Examples
        --------
        >>> import numpy as np
        >>> from skdp.privacy import PrivacyLedger
        >>> mech = SubsampledGaussianMechanism(1.0, 2.0, sampling_rate=0.01)
        >>> ledger = PrivacyLedger()
        >>> with mech.session(np.random.default_rng(0), ledger) as release:
        ...     for _ in range(3):
        ...         _ = release(np.zeros(2))
        >>> ledger.events[0].count
        3
        """
        if _secure(ledger):
            self.refuse_secure_noise()
        made = 0
        scale = self.scale

        def release(value):
            nonlocal made
            value = _check_value(value)
            made += 1
            return value + rng.normal(0.0, scale, size=value.shape)

        try:
            yield release
        finally:
            if made:
                ledger.record(self.event(count=made))

    def __repr__(self):
        return (
            f"{type(self).__name__}(sensitivity={self.sensitivity:g}, scale={self.scale:g}, "
            f"sampling_rate={self.sampling_rate:g}, sampling={self.sampling!r})"
        )
