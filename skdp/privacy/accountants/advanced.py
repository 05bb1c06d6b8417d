"""Advanced composition (Dwork & Roth 2014, Thm. 3.20 / Cor. 3.21), capped by basic.

The baseline of Park et al. (DP-EM).  Half of delta goes to the composition
theorem's ``delta'`` when some events also need a delta of their own, all of
it otherwise; per-use epsilons come from :class:`BasicAccountant`'s rules.
"""

from __future__ import annotations

from ._base import Accountant
from .basic import BasicAccountant, per_use_epsilons
from .conversions import advanced_composition_epsilon


class AdvancedAccountant(Accountant):
    """Advanced composition of the per-use epsilons (module docstring)."""

    name = "advanced"

    @classmethod
    def _rule_for(cls, event):
        # The per-use conversions are basic composition's.
        return BasicAccountant._rule_for(event)

    def epsilon(self, events, delta):
        n_approx = sum(e.count for e in events if not e.is_pure)
        delta_prime = delta / 2 if n_approx else delta
        per_use = per_use_epsilons(self, events, delta / 2 if n_approx else 0.0)
        eps = []
        for e, e_i in zip(events, per_use, strict=True):
            eps.extend([e_i] * int(e.count))
        return advanced_composition_epsilon(eps, delta_prime)
