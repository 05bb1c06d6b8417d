"""Package-wide settings, in the style of ``sklearn.get_config``."""

from __future__ import annotations

import contextlib
import threading

_DEFAULTS = {"secure_noise": False}
_local = threading.local()


def _settings():
    if not hasattr(_local, "settings"):
        _local.settings = dict(_DEFAULTS)
    return _local.settings


def get_config():
    """Current skdp settings (a copy).

    ``secure_noise`` : bool
        Sample Laplace and Gaussian noise exactly on a grid (discrete Laplace
        and discrete Gaussian, Canonne, Kamath & Steinke 2020) instead of with
        floating-point inverse-CDF sampling, whose low-order bits leak the
        noiseless value (Mironov 2012).  See :mod:`skdp.privacy.secure`.
    """
    return dict(_settings())


def set_config(secure_noise=None):
    """Set skdp settings for the current thread (see :func:`get_config`)."""
    if secure_noise is not None:
        _settings()["secure_noise"] = bool(secure_noise)


@contextlib.contextmanager
def config_context(**new):
    """Temporarily change skdp settings: ``with config_context(secure_noise=True): ...``."""
    old = get_config()
    unknown = set(new) - set(_DEFAULTS)
    if unknown:
        raise TypeError(f"Unknown skdp setting(s): {sorted(unknown)}.")
    set_config(**new)
    try:
        yield
    finally:
        set_config(**old)
