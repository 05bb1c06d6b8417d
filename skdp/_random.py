"""Turning ``random_state`` into the NumPy Generator every noise draw uses."""

from __future__ import annotations

import numbers

import numpy as np


def check_generator(random_state):
    """Return a ``numpy.random.Generator`` for ``random_state``.

    ``None`` gives fresh OS entropy; an int seeds a new generator (so seeding
    reproduces a fit exactly); a ``RandomState`` seeds one from its stream; a
    ``Generator`` is used as is.  Noise must be unpredictable to be private:
    fixing ``random_state`` is for reproducible experiments, not for releases.
    """
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**32 - 1, size=4))
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return np.random.default_rng(int(random_state))
    raise ValueError(
        f"random_state must be None, an int, a RandomState or a Generator; got {random_state!r}."
    )
