"""skorch callbacks of the DP nets: epsilon spent so far as a column of the epoch table."""

from __future__ import annotations

from dataclasses import replace

from skorch.callbacks import Callback

from ..privacy import compose

__all__ = ["EpsilonSpent", "merge_events"]


class EpsilonSpent(Callback):
    """Record the epsilon spent so far (at the net's ``delta``) in ``history['epsilon']``.

    It reads the fit's privacy ledger, so the column is what ``privacy_spent_``
    would be if training stopped after this epoch.  The DP nets install it by
    default (before ``print_log``, so the column is printed).
    """

    def on_epoch_end(self, net, **kwargs):
        # The ledger of the fit in progress lives in the net's fit state,
        # which fit drops at the end (it also holds the noise generators).
        state = getattr(net, "_dp_fit", None)
        if state is not None:
            ledger = state.ledger
            spent = compose(merge_events(ledger.events), net.delta, ledger.composition)
            net.history.record("epsilon", float(spent.epsilon))


def merge_events(events):
    """Identical events merged into one with the summed count (same composition, cheaper)."""
    merged = {}
    for e in events:
        key = replace(e, count=0)
        merged[key] = merged.get(key, 0) + e.count
    return [replace(k, count=c) for k, c in merged.items()]
