"""Accountants: one class per composition theorem, each a plug-in.

An accountant turns a history of privacy events (:mod:`skdp.privacy.events`,
plain data: which mechanism, which noise, how often, under which
neighbouring relation) into one ``(epsilon, delta)`` guarantee.  It knows
which event types it can compose (:meth:`Accountant.supports`) and how
(its rules, one per event type, in its own module).  This is the shape of
Opacus' accountants and Google dp-accounting's ``PrivacyAccountant``: events
are data, accountants are code.

Adding an accountant is adding one module to this package that defines a
subclass of :class:`Accountant` with a ``name``: the package imports every
module it holds, and the subclass registers itself under its name, after
which ``composition="<name>"`` works everywhere (estimators, ledgers,
budgets, calibration).

The package also holds what the accountants compute with: the conversions
between currencies (:mod:`~skdp.privacy.accountants.conversions`), the RDP
curves of the subsampled Gaussian (:mod:`~skdp.privacy.accountants.sampled_gaussian_rdp`),
of DP-SGD on one sampled cluster (:mod:`~skdp.privacy.accountants.cluster_sampling`)
and of private selection by repetition (:mod:`~skdp.privacy.accountants.repeat_select`),
and the adapter to autodp (``_autodp``).  They define no accountant class, so
importing them registers nothing.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._base import ACCOUNTANTS, Accountant, UnsupportedEventError, get_accountant

# Import every accountant module so that its class registers itself.
for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["ACCOUNTANTS", "Accountant", "UnsupportedEventError", "get_accountant"]
