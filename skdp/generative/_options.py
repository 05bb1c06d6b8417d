"""DPGenerativeMixture's option checks: what each generator accepts, before any data is read.

Pure functions of the estimator's parameters (``_check_params`` of the
template, :class:`skdp.base.DPEstimatorMixin`): a refusal names the
parameter, never a value of the data, and comes before the budget is held.
"""

from __future__ import annotations

import numpy as np

from ..privacy import COMPOSITIONS
from ._dpsgd import composition_supported

__all__ = ["check_options"]

#: Compositions that charge every release its own (epsilon, delta) (the
#: ``basic`` and ``advanced`` accountants): no remaining curve to calibrate a
#: staged plan to.
PER_USE_COMPOSITIONS = frozenset({"basic", "advanced"})

#: Options of ``generator="marginals"`` only, with their "unused" values.
_MARGINALS_ONLY = (("binary", None), ("categorical", None), ("structure", "auto"))


def check_options(est):
    """Refuse options that do not fit together (``ValueError`` naming the parameter).

    Parameters
    ----------
    est : DPGenerativeMixture
        Read: ``composition``, ``generator``, ``binary``, ``categorical``,
        ``structure``, ``partition`` (through ``est._partition_mode()``),
        ``n_clusters`` (``est._k()``) and ``device``.
    """
    mode = est._partition_mode()
    if est.composition in PER_USE_COMPOSITIONS:
        # The generator's releases are planned from the clustering's
        # released sizes and calibrated on the remaining budget by a
        # curve (RDP at an order, or PLD); an accountant that charges an
        # (epsilon, delta) per use has no such remainder to calibrate to.
        raise ValueError(
            f"composition={est.composition!r} charges each release its own (epsilon, delta) and "
            "cannot calibrate DPGenerativeMixture's plan, whose per-cluster releases are planned from "
            "the released cluster sizes; use 'pld' (the default), 'rdp' or 'zcdp'."
        )
    for name, unused in _MARGINALS_ONLY:
        value = getattr(est, name)
        given = value is not None if unused is None else not (isinstance(value, str) and value == unused)
        if given and est.generator != "marginals":
            raise ValueError(
                f"{name} is used by generator='marginals' only, got generator={est.generator!r}."
            )
    if est.structure == "tree" and mode == "kmeans":
        raise ValueError(
            "structure='tree' models the columns directly and cannot follow partition='kmeans'; "
            "use partition='auto' or structure='classes'."
        )
    k = est._k()
    if est.generator == "marginals":
        if est.categorical is not None:
            est._blocks(np.iinfo(np.intp).max)
        if not composition_supported(est.composition, est.generator, k):
            raise ValueError(f"composition={est.composition!r} cannot account this fit's releases.")
        return
    import torch

    if not composition_supported(est.composition, est.generator, k):
        supported = tuple(c for c in COMPOSITIONS if composition_supported(c, est.generator, k))
        kind = "cluster-sampled" if k > 1 else "Poisson-subsampled"
        raise ValueError(
            f"composition={est.composition!r} cannot account the {kind} Gaussian steps of "
            f"DPGenerativeMixture(n_clusters={est.n_clusters}) (it has no rule for subsampled "
            f"mechanisms); use one of {supported}."
        )
    try:
        torch.device(est.device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={est.device!r} is not a torch device: {exc}") from None
