"""BLAS thread limits of the clustering fits, at the cost of a context switch.

``threadpoolctl.threadpool_limits`` scans the process's loaded libraries
(``/proc/self/maps`` and a ``dlopen`` per candidate) every time it is
entered: about 7 ms, more than a whole DP k-means fit on 1e4 rows
spends on its own work.  scikit-learn's ``KMeans`` avoids the scan by
keeping one :class:`threadpoolctl.ThreadpoolController`; so does this
module.  A library loaded after the first limit (none that NumPy's BLAS
products use) is then left unlimited: the limit is a speed setting and
changes no output.
"""

from __future__ import annotations

import contextlib
import functools

from threadpoolctl import ThreadpoolController


@functools.cache
def _controller():
    return ThreadpoolController()


def threadpool_limits(limits=None, user_api=None):
    """Context manager limiting ``user_api``'s thread pools to ``limits`` (None: no limit, no scan).

    The same arguments and effect as :func:`threadpoolctl.threadpool_limits`,
    through one controller kept for the process.
    """
    if limits is None:
        return contextlib.nullcontext()
    return _controller().limit(limits=limits, user_api=user_api)
