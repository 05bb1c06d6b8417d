"""DP-SGD accounting: the plan, the step events, their calibration and the private size.

Pure accounting, shared by every estimator that trains by DP-SGD (the nets of
:mod:`skdp.nn`, the generative mixture of :mod:`skdp.generative`); nothing
here imports torch.  The torch side (the noise drawn on tensors) is
:mod:`skdp.privacy.mechanisms.torch_noise`.

Acs et al. (2018), Alg. 4, which extends Abadi et al. (2016): a step draws a
Poisson batch (each record independently with probability ``q = L / N``),
clips every per-example gradient to L2 norm ``C`` and releases
``sum_i clipped g_i + N(0, sigma^2 C^2 I)``.  Under add/remove neighbours one
record changes the clipped sum by one clipped gradient, of norm at most ``C``:
L2 sensitivity ``C``, noise multiplier ``sigma``.  (The paper states
``sqrt(2) C``, counting replace-one neighbours; amplification by Poisson
sampling needs add/remove, as in Abadi et al.)  One step is therefore a
Poisson-subsampled Gaussian mechanism (:func:`dpsgd_step_event`), accounted
by RDP (Mironov, Talwar & Zhang 2019; Zhu & Wang 2019): the moments
accountant of Acs et al., Section II and III-D, Theorem 1.

A step's releases (the gradient sum, and with DPNorm a histogram of the same
batch's gradient norms) are recorded against the step's planned event by
:class:`DPSGDStepLedger`: the planned event goes on the fit's ledger before any
noise exists, and every mechanism of the step records its own Gaussian part,
which must add up to that event.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from .calibration import calibrate_noise_multiplier, gaussian_noise_multiplier
from .events import ADD_REMOVE, GaussianEvent, SubsampledGaussianEvent
from .ledger import DEFAULT_COMPOSITION
from .mechanisms import GaussianMechanism

__all__ = [
    "COUNT_NOISE_FACTOR",
    "DPSGDPlan",
    "DPSGDStepLedger",
    "calibrate_dpsgd_noise",
    "check_noise_setting",
    "combined_noise_multiplier",
    "count_noise_multiplier",
    "dataset_size_event",
    "dataset_size_mechanism",
    "dpsgd_plan",
    "dpsgd_step_event",
    "poisson_batch_indices",
    "release_dataset_size",
    "steps_per_epoch",
]


# --------------------------------------------------------------------------
# Step events.
# --------------------------------------------------------------------------


def combined_noise_multiplier(*noise_multipliers):
    """Noise multiplier of the adaptive composition of Gaussian mechanisms.

    Releasing ``k`` Gaussian mechanisms with multipliers ``z_i`` on the same
    data, each chosen adaptively, is exactly as private as one Gaussian
    mechanism with ``z = (sum_i z_i^-2)^(-1/2)`` (Dong, Roth & Su 2022,
    Cor. 3.3: Gaussian trade-off functions compose to ``G_mu`` with
    ``mu^2 = sum mu_i^2``).  Used when DPNorm and the gradient noise share one
    Poisson batch (see :func:`dpsgd_step_event`).
    """
    zs = [float(z) for z in noise_multipliers if z is not None]
    if not zs or any(not (math.isfinite(z) and z > 0) for z in zs):
        raise ValueError(f"noise multipliers must be positive finite numbers, got {noise_multipliers!r}.")
    return sum(z**-2 for z in zs) ** -0.5


def dpsgd_step_event(noise_multiplier, sampling_rate, clip_noise_multiplier=None, count=1):
    """Privacy event of ``count`` DP-SGD steps (Acs et al. 2018, Algorithm 4).

    One step releases the noisy clipped gradient sum of a Poisson batch drawn
    at rate ``sampling_rate``: a Poisson-subsampled Gaussian mechanism with
    multiplier ``noise_multiplier`` under add/remove neighbours.

    With DPNorm (``clip_noise_multiplier`` given) the step also releases a
    noisy histogram of the same batch's gradient norms (Alg. 3).  Acs et al.
    bound the pair with their Theorem 3 (dependent coin tosses).  We use a
    tighter and simpler argument: on a fixed batch the pair is the adaptive
    composition of two Gaussian mechanisms (histogram: L2 sensitivity 1 under
    add/remove, noise ``clip_noise_multiplier``; gradient sum: sensitivity
    ``C_s``, noise ``noise_multiplier * C_s``), which is exactly a Gaussian
    mechanism with :func:`combined_noise_multiplier`; Poisson subsampling of a
    mechanism dominated by that Gaussian is dominated by the subsampled
    Gaussian (Zhu, Dong & Wang 2022, Thm. 11), so one subsampled-Gaussian
    event per step accounts for both releases.
    """
    z = noise_multiplier
    if clip_noise_multiplier is not None:
        z = combined_noise_multiplier(noise_multiplier, clip_noise_multiplier)
    return SubsampledGaussianEvent(
        count=int(count),
        neighbouring=ADD_REMOVE,
        noise_multiplier=float(z),
        sampling_rate=float(sampling_rate),
        sampling="poisson",
    )


def calibrate_dpsgd_noise(
    epsilon,
    delta,
    sampling_rate,
    n_steps,
    clip_noise_ratio=None,
    extra_events=(),
    composition=DEFAULT_COMPOSITION,
):
    """Smallest gradient noise multiplier meeting ``(epsilon, delta)``.

    The plan is ``n_steps`` events of :func:`dpsgd_step_event`; with DPNorm the
    histogram's multiplier is ``clip_noise_ratio`` times the gradient's, so one
    scalar is bisected (:func:`skdp.privacy.calibrate_noise_multiplier`
    under ``composition``, PLD by default, add/remove neighbours).  ``extra_events`` are releases of the
    same fit whose noise is already fixed (the private dataset size of
    :func:`release_dataset_size`): they are composed with the steps, so the
    whole fit spends ``(epsilon, delta)``.
    """
    extra = list(extra_events)

    def make_events(z):
        clip_z = None if clip_noise_ratio is None else clip_noise_ratio * z
        return [*extra, dpsgd_step_event(z, sampling_rate, clip_z, count=n_steps)]

    return calibrate_noise_multiplier(
        make_events, epsilon, delta, composition=composition, neighbouring=ADD_REMOVE
    )


class DPSGDStepLedger:
    """The releases of one DP-SGD step, recorded against the step's planned event.

    Created with the fit's ``ledger`` and the step's ``planned`` event
    (:func:`dpsgd_step_event`), it records ``planned`` on ``ledger`` at once,
    before any noise of the step exists.  The step's mechanisms (the gradient
    noise, DPNorm's histogram noise) are then given this object as their
    ledger: each records its own :class:`~skdp.privacy.GaussianEvent` (add/remove
    neighbours, on the sampled batch).  Those parts compose to one Gaussian of
    multiplier ``(sum_i z_i^-2)^(-1/2)`` (:func:`combined_noise_multiplier`),
    which must be the multiplier of ``planned``: a part that would take the
    step past ``planned`` is refused before its noise is drawn, and
    :meth:`close` refuses a step whose parts do not add up to ``planned``
    exactly (a release made without recording its event).

    Parameters
    ----------
    ledger : PrivacyLedger or object with ``record``
        The fit's ledger.
    planned : SubsampledGaussianEvent
        The step's event (count 1).
    """

    #: Relative tolerance of the comparison of ``sum z_i^-2`` with the plan's
    #: (one rounding of :func:`combined_noise_multiplier`).
    RTOL = 1e-9

    def __init__(self, ledger, planned):
        if not isinstance(planned, SubsampledGaussianEvent) or planned.count != 1:
            raise ValueError(f"A DP-SGD step is one subsampled Gaussian event, got {planned!r}.")
        self.planned = planned
        self.parts = []
        self._precision = 0.0
        ledger.record(planned)

    def record(self, event):
        """Record one part of the step (a Gaussian release on the sampled batch)."""
        if type(event) is not GaussianEvent or event.neighbouring != self.planned.neighbouring:
            raise RuntimeError(f"A DP-SGD step releases Gaussian noise only; got {event!r}.")
        precision = self._precision + event.count * event.noise_multiplier**-2
        if precision > self.planned.noise_multiplier**-2 * (1 + self.RTOL):
            raise RuntimeError(
                f"The step's release {event!r} goes beyond its planned event {self.planned!r}."
            )
        self._precision = precision
        self.parts.append(event)
        return event

    def close(self):
        """Check that the parts recorded add up to the planned event."""
        expected = self.planned.noise_multiplier**-2
        if not math.isclose(self._precision, expected, rel_tol=self.RTOL):
            raise RuntimeError(
                f"The step's recorded releases {self.parts!r} do not add up to its planned event "
                f"{self.planned!r}: a release was made without recording its event."
            )


# --------------------------------------------------------------------------
# The plan: sampling rate and steps from a public (declared or noisy) size.
# --------------------------------------------------------------------------


def steps_per_epoch(n_samples, batch_size):
    """Steps of one epoch: ``round(1 / q)`` with ``q = batch_size / n_samples``.

    An epoch is the number of Poisson batches that visit every record once
    in expectation (Acs et al., Section III-B: ``|D| / L`` iterations).
    """
    return max(1, int(round(n_samples / batch_size)))


@dataclass(frozen=True)
class DPSGDPlan:
    """The public plan of a DP-SGD fit, a function of a public size only.

    Attributes
    ----------
    sampling_rate : float
        Poisson rate ``q = min(1, L / n)``.
    steps_per_epoch : int
        ``max(1, round(n / L))`` (:func:`steps_per_epoch`).
    n_steps : int
        ``max_epochs * steps_per_epoch``.
    expected_batch_size : float
        ``q * n``: the public divisor of the clipped sum (``L`` unless ``q``
        is capped at 1).
    """

    sampling_rate: float
    steps_per_epoch: int
    n_steps: int
    expected_batch_size: float


def dpsgd_plan(n_samples, batch_size, max_epochs):
    """Plan ``max_epochs`` epochs of Poisson batches of expected size ``batch_size``.

    Parameters
    ----------
    n_samples : float
        A *public* dataset size: declared by the user, or the noisy count of
        :func:`release_dataset_size` (post-processing).  Never ``len(X)``:
        under add/remove neighbours ``N`` and ``N + 1`` rows would give
        different deterministic plans, which an attacker reads off the model.
        Values below 1 (a noisy count can be) are taken as 1.
    batch_size : int
        Expected batch size ``L``, or -1 for full batches (``q = 1``).
    max_epochs : int

    Returns
    -------
    plan : DPSGDPlan
    """
    n = max(1.0, float(n_samples))
    if batch_size == -1:
        batch_size = n
    elif not (
        isinstance(batch_size, numbers.Integral) and not isinstance(batch_size, bool) and batch_size >= 1
    ):
        raise ValueError(f"batch_size must be a positive integer or -1, got {batch_size!r}.")
    q = min(1.0, batch_size / n)
    per_epoch = steps_per_epoch(n, batch_size)
    return DPSGDPlan(q, per_epoch, per_epoch * int(max_epochs), q * n)


def poisson_batch_indices(n_samples, sampling_rate, rng):
    """Indices of a Poisson batch: each record kept independently with probability ``q``.

    Algorithm 4, line 1 of Acs et al. (2018); ``q`` is ``sampling_rate``.
    """
    # The mask's nonzero() is flatnonzero's answer for a 1-D mask, without
    # its ravel (iterative fits draw a batch at every step).
    return (rng.random(n_samples) < sampling_rate).nonzero()[0]


# --------------------------------------------------------------------------
# The private dataset size.
# --------------------------------------------------------------------------

#: The count's noise over the noise of the rest of the fit (see
#: :func:`count_noise_multiplier`): its Gaussian DP ``mu`` is a tenth, so it
#: takes about 1% of ``mu^2``, which is what Gaussian mechanisms compose by.
COUNT_NOISE_FACTOR = 10.0


def count_noise_multiplier(epsilon, delta, noise_multiplier=None):
    """Noise std of the private dataset size (sensitivity 1), by a fixed rule.

    ``COUNT_NOISE_FACTOR`` (10) times the gradient's ``noise_multiplier`` when
    it is given, else 10 times the Gaussian multiplier that would spend all of
    ``(epsilon, delta)`` on one release
    (:func:`skdp.privacy.gaussian_noise_multiplier`).  Either way the count's
    Gaussian DP is a tenth of the fit's scale, a small share of the budget, and
    its relative error (std over ``N``) only rescales the expected batch size,
    never the guarantee.
    """
    if noise_multiplier is not None:
        return COUNT_NOISE_FACTOR * float(noise_multiplier)
    return COUNT_NOISE_FACTOR * gaussian_noise_multiplier(epsilon, delta)


def dataset_size_mechanism(noise_std):
    """The Gaussian mechanism of the dataset size: add/remove L2 sensitivity 1.

    Adding or removing a record changes the number of rows by exactly one.
    """
    return GaussianMechanism(sensitivity=1.0, scale=float(noise_std), neighbouring=ADD_REMOVE)


def dataset_size_event(noise_std):
    """Privacy event of :func:`~skdp.nn.release_dataset_size` (a Gaussian count, add/remove)."""
    return dataset_size_mechanism(noise_std).event()


def release_dataset_size(n_samples, noise_std, rng, ledger):
    """The number of training records plus ``N(0, noise_std^2)``, recorded on ``ledger``.

    Through :class:`skdp.privacy.GaussianMechanism` (sensitivity 1 under
    add/remove neighbours): the event is on the fit's ledger before the noisy
    count exists.  Everything planned from the returned float is
    post-processing.
    """
    return float(dataset_size_mechanism(noise_std).release(float(n_samples), rng, ledger))


# --------------------------------------------------------------------------
# The noise setting.
# --------------------------------------------------------------------------


def check_noise_setting(secure_noise):
    """Refuse DP-SGD when ``secure_noise`` (the caller's resolved setting) is True.

    DP-SGD's noise is floating-point Gaussian noise drawn by torch, hundreds of
    thousands of coordinates per step; the exact grid samplers of
    :mod:`skdp.privacy.mechanisms.secure` are scalar Python code, far too slow for that.
    Rather than silently ignore the setting, DP-SGD refuses to run under it.
    The setting is an argument: the estimator resolves it once per fit.
    """
    if secure_noise:
        raise ValueError(
            "secure_noise=True (skdp.set_config / config_context, or the estimator's secure_noise) "
            "is on, but DP-SGD adds floating-point Gaussian noise drawn by torch, not noise sampled "
            "exactly on a grid, so it refuses to run. To accept floating-point noise for this fit, "
            "pass secure_noise=False to the estimator or wrap it in "
            "skdp.config_context(secure_noise=False)."
        )
