"""DPNorm: private choice of a clipping bound from per-record norms.

Acs et al. (2018), Section III-C, Alg. 3.  The interval ``(0, c_max]`` is cut
into ``n_bins`` equal bins with upper edges ``C_j = j * c_max / n_bins``; the
histogram of the records' norms over these bins is released with Gaussian
noise and the upper edge of its noisy mode is the selected bound.

Sensitivity.  Every record falls in exactly one bin (norms above ``c_max``
are counted in the last bin, zero norms in the first), so the histogram is a
vector of counts in which one record moves one unit: L2 sensitivity
``sqrt(2)`` under replace-one neighbours (one bin loses a record, another
gains one) and ``1`` under add/remove (:func:`~skdp.privacy.histogram_sensitivity`),
whatever the norms are.  Alg. 3 line 2 adds ``N(0, sqrt(2) sigma_C)``, i.e.
noise multiplier ``sigma_C`` for replace-one neighbours.  The mode is
post-processing of the released histogram.

The paper calls the result an approximation of the *average* norm; it is the
upper edge of the *modal* bin of the norm histogram, which is what the
algorithm computes and what this module returns.

Deviation: norms above ``c_max`` are counted in the last bin instead of being
dropped (Alg. 3 counts only ``C_{j-1} < ||x|| <= C_j``): when most norms exceed
``c_max`` the bound then goes to ``c_max`` rather than to a noise-driven bin.
A NaN or infinite norm counts as infinite (the rule of
:mod:`skdp.privacy.clipping`), hence in the last bin too.  The sensitivity is
unchanged: still one bin per record.

This is the one DPNorm of skdp: the kernel k-means selects its clipping bound
with :func:`dp_norm_from_histogram` (from counts added up chunk by chunk), and
DP-SGD (:class:`skdp.nn.DPNormClipping`, the nets and the generative mixture)
bins each batch's gradient norms with :func:`norm_histogram` and releases the
counts with torch noise (:class:`~skdp.privacy.mechanisms.torch_noise.TorchGaussianMechanism`),
then reads the bound with :func:`bin_upper_edge`.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from .events import REPLACE_ONE, GaussianEvent, _check_relation
from .mechanisms import GaussianMechanism
from .mechanisms.selection import histogram_sensitivity, noisy_histogram_mode


class DPNormOptions(NamedTuple):
    """The clipping-bound parameters of an estimator that clips with a declared bound or DPNorm.

    One reading of them for every such estimator (the kernel k-means, the
    DP-SGD nets, the generative mixture): :meth:`of`.
    """

    #: The declared bound, or ``"auto"``: DPNorm chooses it.
    clip_norm: object
    #: DPNorm's ``c_max``: the upper edge of its last bin.
    clip_norm_max: float
    #: DPNorm's number of bins.
    clip_norm_bins: int
    #: DPNorm's histogram noise over the DP-SGD gradient's (None where the
    #: histogram has its own calibration: the kernel k-means).
    noise_ratio: float | None = None

    @classmethod
    def of(cls, estimator):
        """The options set on ``estimator`` (``clip_norm``, ``clip_norm_max``, ``clip_norm_bins``, ``clip_norm_noise_ratio``)."""
        return cls(
            estimator.clip_norm,
            estimator.clip_norm_max,
            estimator.clip_norm_bins,
            getattr(estimator, "clip_norm_noise_ratio", None),
        )

    @property
    def selected(self):
        """Whether DPNorm chooses the bound (``clip_norm="auto"``)."""
        return isinstance(self.clip_norm, str) and self.clip_norm == "auto"

    @property
    def histogram_noise_ratio(self):
        """DPNorm's histogram noise over the gradient's when DPNorm runs, else None."""
        return self.noise_ratio if self.selected else None


def _check_positive_real(name, value):
    if not (isinstance(value, numbers.Real) and np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}.")


def norm_bin_edges(c_max, n_bins):
    """Upper bin edges ``C_j = j * c_max / n_bins`` for ``j = 1..n_bins`` (Alg. 3 line 1)."""
    _check_positive_real("c_max", c_max)
    if not (isinstance(n_bins, numbers.Integral) and n_bins >= 1):
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}.")
    return c_max * np.arange(1, n_bins + 1) / n_bins


def norm_histogram(norms, c_max, n_bins):
    """Counts ``t_j`` of norms in ``(C_{j-1}, C_j]`` (Algorithm 3 line 2).

    A zero norm counts in the first bin, a norm above ``c_max`` (or NaN or
    infinite: counted as infinite) in the last, so that every record is in
    exactly one bin (the sensitivity argument).

    Parameters
    ----------
    norms : array-like of shape (n_records,)
        Non-negative norms (a CPU torch tensor is accepted).
    c_max : float
    n_bins : int

    Returns
    -------
    counts : ndarray of shape (n_bins,), float64
    """
    norms = np.asarray(norms, dtype=float)
    if norms.ndim != 1:
        raise ValueError(f"norms must be a 1-D array, got shape {norms.shape}.")
    if np.any(norms < 0):
        raise ValueError("norms must be non-negative.")
    edges = norm_bin_edges(c_max, n_bins)
    # searchsorted(side="left") gives the first edge >= norm: bin (C_{j-1}, C_j].
    # NaN sorts after every edge, like infinity: the last bin.
    idx = np.minimum(np.searchsorted(edges, norms, side="left"), n_bins - 1)
    return np.bincount(idx, minlength=n_bins).astype(float)


def bin_upper_edge(index, c_max, n_bins):
    """The bound ``C_j`` of bin ``index`` (0-based): what DPNorm returns for that mode."""
    return float(norm_bin_edges(c_max, n_bins)[int(index)])


def norm_selection_event(noise_multiplier, neighbouring=REPLACE_ONE, count=1):
    """Privacy event of ``count`` DPNorm calls at ``noise_multiplier`` (for calibration plans)."""
    return GaussianEvent(count=count, neighbouring=neighbouring, noise_multiplier=noise_multiplier)


def dp_norm(norms, c_max, n_bins, noise_multiplier, rng, ledger, neighbouring=REPLACE_ONE):
    """Select a clipping bound privately (Acs et al. 2018, Algorithm 3).

    Parameters
    ----------
    norms : array-like of shape (n_records,)
        Per-record L2 norms (of feature vectors, gradients, ...).
    c_max : float
        Largest bound that can be selected (public).
    n_bins : int
        Number ``w`` of candidate bounds ``C_j = j * c_max / w``.
    noise_multiplier : float
        Gaussian noise std over the histogram's L2 sensitivity (``sigma_C``).
    rng : numpy.random.Generator
    ledger : PrivacyLedger
        The fit's ledger; one :class:`~skdp.privacy.GaussianEvent` is recorded.
    neighbouring : {"replace_one", "add_remove"}, default="replace_one"

    Returns
    -------
    bound : float
        The upper edge of the noisy modal bin.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.privacy import PrivacyLedger
    >>> from skdp.privacy.norm_selection import dp_norm
    >>> norms = np.full(1000, 0.73)
    >>> ledger = PrivacyLedger()
    >>> dp_norm(norms, 1.0, 100, 2.0, np.random.default_rng(0), ledger)
    0.73
    >>> len(ledger)
    1
    """
    counts = norm_histogram(norms, c_max, n_bins)
    return dp_norm_from_histogram(counts, c_max, n_bins, noise_multiplier, rng, ledger, neighbouring)


def dp_norm_from_histogram(
    counts, c_max, n_bins, noise_multiplier, rng, ledger, neighbouring=REPLACE_ONE
):
    """:func:`~skdp.privacy.dp_norm` from the exact counts of :func:`~skdp.nn.norm_histogram`.

    Algorithm 3 of Acs et al. (2018) from line 2 onwards.  For data read chunk
    by chunk: the counts of the chunks add up to the counts of the whole data.
    Same parameters as :func:`~skdp.privacy.dp_norm`, with
    ``counts`` of shape ``(n_bins,)`` in place of the norms.
    """
    _check_positive_real("noise_multiplier", noise_multiplier)
    _check_relation(neighbouring)
    norm_bin_edges(c_max, n_bins)  # checks c_max and n_bins
    counts = np.asarray(counts, dtype=float)
    if counts.shape != (n_bins,):
        raise ValueError(f"counts must have shape ({n_bins},), got {counts.shape}.")
    sensitivity = histogram_sensitivity(2, neighbouring)
    mechanism = GaussianMechanism(sensitivity, noise_multiplier * sensitivity, neighbouring)
    mode = noisy_histogram_mode(counts, mechanism, rng, ledger)
    return bin_upper_edge(mode, c_max, n_bins)
