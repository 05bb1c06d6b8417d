"""Make two concurrent fits meet after their budget reservation, before either reads data."""

import contextlib
import threading

from skdp.bayes import DPBetaBernoulli


def rendezvous_methods(barrier, touched, mark):
    """``_begin_private_fit`` and ``_validate_X`` replacements for :class:`DPBetaBernoulli`.

    The first waits at ``barrier`` once its reservation is made (a refused
    fit aborts the barrier, freeing the other one); the second appends
    ``mark(self)`` to ``touched`` whenever a fit reads its data.
    """
    begin, validate = DPBetaBernoulli._begin_private_fit, DPBetaBernoulli._validate_X

    def begin_then_meet(self, *args, **kwargs):
        try:
            out = begin(self, *args, **kwargs)
        except BaseException:
            barrier.abort()  # a refused fit frees the one waiting for it
            raise
        # Wait until the other fit has started too (or has been refused).
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait()
        return out

    def record_touch(self, X, reset):
        touched.append(mark(self))
        return validate(self, X, reset)

    return begin_then_meet, record_touch
