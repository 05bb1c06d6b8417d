"""Zero-concentrated DP (Bun & Steinke 2016): rhos add, converted by ``rho + 2 sqrt(rho log(1/delta))``.

Park et al.'s "CDP" budgeting.  Pure ``epsilon``-DP is ``epsilon^2 / 2``-zCDP
(Prop. 1.4); a Gaussian with multiplier ``z``, continuous or discrete
(Canonne, Kamath & Steinke 2020, Thm. 4), is ``1 / (2 z^2)``-zCDP.
Subsampled mechanisms have no zCDP characterisation: use ``"rdp"`` or
``"pld"``.
"""

from __future__ import annotations

from ..events import GaussianEvent, LaplaceEvent, PureDPEvent
from ._base import Accountant
from .basic import pure_epsilon
from .conversions import zcdp_to_epsilon


class ZCDPAccountant(Accountant):
    """Sum of zCDP parameters (module docstring)."""

    name = "zcdp"

    @classmethod
    def rho(cls, event):
        """Per-use zCDP parameter of ``event``."""
        return cls._apply(event)

    def epsilon(self, events, delta):
        return zcdp_to_epsilon(sum(e.count * self.rho(e) for e in events), delta)


@ZCDPAccountant.rule(LaplaceEvent, PureDPEvent)
def _pure(event):
    return 0.5 * pure_epsilon(event) ** 2


@ZCDPAccountant.rule(GaussianEvent)
def _gaussian(event):
    return 1.0 / (2.0 * event.noise_multiplier**2)
