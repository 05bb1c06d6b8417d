"""Thin adapter around autodp, the only module of skdp that imports it.

autodp has two warts under NumPy 2 and recent SciPy that this adapter hides:

* ``autodp.converter`` still refers to ``np.infty`` (removed in NumPy 2.0) on
  its approximate-DP to RDP path; we provide the alias while autodp runs.
* Its RDP evaluation calls ``scipy.optimize`` routines that emit a
  ``RuntimeWarning`` ("invalid value encountered in scalar divide") on every
  conversion; the warning carries no information for us, so it is silenced
  inside the adapter only.

Everything returned here is plain NumPy: RDP curves evaluated on a fixed grid
of orders.  Results are cached because calibration bisects over the noise
multiplier and evaluates the same curve many times.

The Poisson-subsampled Gaussian is the one curve where autodp is not the whole
story: autodp is exact at integer orders only, so its curve is combined
(pointwise minimum, both being valid upper bounds) with the exact curve at
every order of :mod:`skdp.privacy.accountants.sampled_gaussian_rdp` (Mironov, Talwar &
Zhang 2019, Sec. 3.3).
"""

from __future__ import annotations

import contextlib
import functools
import warnings

import numpy as np

from .sampled_gaussian_rdp import sampled_gaussian_rdp
from .wor_gaussian_rdp import wor_subsampled_gaussian_rdp

#: Orders at which autodp's Poisson-subsampled Gaussian curve was evaluated
#: (the grid it served alone before the exact curve existed); it is now
#: evaluated only where the exact series gives up.  At integer
#: orders it equals the exact curve (MTZ19 Sec. 3.3 and Zhu & Wang 2019 Thm. 8
#: both expand the same binomial sum); at a fractional order it is an upper
#: bound of the exact value, so evaluating it on a finer grid (0.1 s per
#: curve, and calibration evaluates dozens) could not lower the minimum.
_AUTODP_POISSON_ORDERS = frozenset(
    (1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 14.0,
     16.0, 20.0, 24.0, 28.0, 32.0, 48.0, 64.0, 96.0, 128.0, 256.0, 512.0)
)  # fmt: skip


@contextlib.contextmanager
def _quiet_autodp():
    had_infty = hasattr(np, "infty")  # noqa: NPY201
    if not had_infty:
        vars(np)["infty"] = np.inf  # NumPy 2 removed the alias that autodp still uses
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            yield
    finally:
        if not had_infty:
            vars(np).pop("infty", None)


def _import_autodp():
    with _quiet_autodp():
        from autodp import mechanism_zoo, transformer_zoo
    return mechanism_zoo, transformer_zoo


@functools.lru_cache(maxsize=4096)
def _gaussian_rdp(noise_multiplier: float, orders: tuple) -> tuple:
    mechanism_zoo, _ = _import_autodp()
    with _quiet_autodp():
        mech = mechanism_zoo.GaussianMechanism(sigma=noise_multiplier, approxDP_off=True)
        return tuple(float(mech.RenyiDP(a)) for a in orders)


@functools.lru_cache(maxsize=4096)
def _laplace_rdp(noise_multiplier: float, orders: tuple) -> tuple:
    mechanism_zoo, _ = _import_autodp()
    with _quiet_autodp():
        mech = mechanism_zoo.LaplaceMechanism(b=noise_multiplier)
        return tuple(float(mech.RenyiDP(a)) for a in orders)


@functools.lru_cache(maxsize=4096)
def _subsampled_gaussian_rdp(
    noise_multiplier: float, sampling_rate: float, poisson: bool, orders: tuple
) -> tuple:
    mechanism_zoo, transformer_zoo = _import_autodp()
    with _quiet_autodp():
        mech = mechanism_zoo.GaussianMechanism(sigma=noise_multiplier, approxDP_off=True)
        # autodp tags a mechanism with the neighbouring relation its RDP curve
        # refers to and refuses to amplify under the wrong one.
        mech.neighboring = "add_remove" if poisson else "replace_one"
        amplify = transformer_zoo.AmplificationBySampling(PoissonSampling=poisson)
        # The improved bounds (Zhu & Wang 2019 Thm. 8 for Poisson, Wang, Balle &
        # Kasiviswanathan 2019 Thm. 27 without replacement) hold for the
        # Gaussian mechanism.
        sub = amplify(mech, sampling_rate, improved_bound_flag=True)
        return tuple(float(sub.RenyiDP(a)) for a in orders)


@functools.lru_cache(maxsize=4096)
def _poisson_subsampled_gaussian_rdp(noise_multiplier: float, sampling_rate: float, orders: tuple) -> tuple:
    exact = sampled_gaussian_rdp(noise_multiplier, sampling_rate, orders)
    # Where the exact series gave up (inf), autodp's bound is all there is.
    # Elsewhere the exact curve is the RDP itself: autodp's bound (ten times
    # the cost) was found no lower than it by more than float rounding
    # (2e-11 relative on DP-SGD plans, 1e-12 of the composed epsilon), so it
    # is not evaluated there.
    use_autodp = ~np.isfinite(exact)
    if use_autodp.any():
        picked = tuple(np.asarray(orders)[use_autodp])
        bound = _subsampled_gaussian_rdp(noise_multiplier, sampling_rate, True, picked)
        exact[use_autodp] = np.minimum(exact[use_autodp], bound)
    return tuple(float(e) for e in exact)


def gaussian_rdp(noise_multiplier, orders):
    """RDP curve of the Gaussian mechanism with std ``noise_multiplier * L2-sensitivity``."""
    return np.asarray(_gaussian_rdp(float(noise_multiplier), tuple(map(float, orders))))


def laplace_rdp(noise_multiplier, orders):
    """RDP curve of the Laplace mechanism with scale ``noise_multiplier * L1-sensitivity``."""
    return np.asarray(_laplace_rdp(float(noise_multiplier), tuple(map(float, orders))))


def subsampled_gaussian_rdp(noise_multiplier, sampling_rate, poisson, orders):
    """RDP curve of a subsampled Gaussian mechanism.

    ``poisson=True`` is Poisson sampling at rate ``sampling_rate`` under
    add/remove-one neighbours, the pointwise minimum of autodp's curve and the
    exact one (MTZ19 Sec. 3.3); ``poisson=False`` is sampling a fixed-size
    batch without replacement under replace-one neighbours: autodp's bound
    (WBK19 Thm. 27), evaluated as arrays by
    :mod:`skdp.privacy.accountants.wor_gaussian_rdp` (equal to autodp's
    values, 25 times faster).
    """
    if poisson and sampling_rate < 1:
        return np.asarray(
            _poisson_subsampled_gaussian_rdp(
                float(noise_multiplier), float(sampling_rate), tuple(map(float, orders))
            )
        )
    if not poisson:
        return wor_subsampled_gaussian_rdp(noise_multiplier, sampling_rate, orders)
    return np.asarray(
        _subsampled_gaussian_rdp(
            float(noise_multiplier), float(sampling_rate), bool(poisson), tuple(map(float, orders))
        )
    )
