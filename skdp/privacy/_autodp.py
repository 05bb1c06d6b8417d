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
"""

from __future__ import annotations

import contextlib
import functools
import warnings

import numpy as np


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


def gaussian_rdp(noise_multiplier, orders):
    """RDP curve of the Gaussian mechanism with std ``noise_multiplier * L2-sensitivity``."""
    return np.asarray(_gaussian_rdp(float(noise_multiplier), tuple(map(float, orders))))


def laplace_rdp(noise_multiplier, orders):
    """RDP curve of the Laplace mechanism with scale ``noise_multiplier * L1-sensitivity``."""
    return np.asarray(_laplace_rdp(float(noise_multiplier), tuple(map(float, orders))))


def subsampled_gaussian_rdp(noise_multiplier, sampling_rate, poisson, orders):
    """RDP curve of a subsampled Gaussian mechanism.

    ``poisson=True`` is Poisson sampling at rate ``sampling_rate`` under
    add/remove-one neighbours; ``poisson=False`` is sampling a fixed-size batch
    without replacement under replace-one neighbours.
    """
    return np.asarray(
        _subsampled_gaussian_rdp(
            float(noise_multiplier), float(sampling_rate), bool(poisson), tuple(map(float, orders))
        )
    )
