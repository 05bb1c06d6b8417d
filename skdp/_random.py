"""Turning ``random_state`` into the NumPy Generators the noise and later draws use.

Two rules, whatever the estimator:

* the generator that draws a fit's noise is never stored on the model.  PCG64
  and MT19937 can be run backwards from their state, so a model that kept it
  (in memory or in a pickle) would let anyone replay the noise and subtract
  it from the released statistics;
* draws made after ``fit`` (further posterior samples, synthetic records) use
  :func:`generator_after_fit`: fresh entropy, or a stream spawned from an int
  seed that is never the fit's own stream.
"""

from __future__ import annotations

import numbers

import numpy as np

#: First word of the spawn key of every stream drawn after ``fit`` from an int
#: ``random_state``.  The fit itself uses the root ``SeedSequence(seed)`` (spawn
#: key ``()``) and ``SeedSequence.spawn`` children have one-word keys ``(i,)``,
#: so the two-word keys ``(AFTER_FIT_SPAWN_TAG, k)`` collide with neither.
AFTER_FIT_SPAWN_TAG = 0x61667472  # "aftr"


def _is_int_seed(random_state):
    return isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool)


def check_generator(random_state):
    """Return the ``numpy.random.Generator`` a fit draws its noise from.

    Parameters
    ----------
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        ``None`` gives fresh OS entropy: the only choice for a release.  An
        int seeds a new generator, so seeding reproduces a fit exactly; a
        ``RandomState`` seeds one from its stream; a ``Generator`` is used as
        is (and is stepped by the fit's draws).

    Returns
    -------
    rng : numpy.random.Generator

    Notes
    -----
    Noise must be unpredictable to be private.  Anyone who holds the seed, or
    the ``RandomState`` / ``Generator`` object passed in (whose state can be
    run backwards to the fit's draws), can regenerate the noise and remove it
    from the released statistics: seeds are for experiments and tests, ``None``
    is for releases.  The generator returned here is never stored on the
    fitted model, and a pickle of a model never carries a generator (a
    ``RandomState`` or ``Generator`` passed as ``random_state`` is pickled as
    ``None``, see :class:`skdp.base.DPEstimatorMixin`).
    """
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**32 - 1, size=4))
    if _is_int_seed(random_state):
        return np.random.default_rng(int(random_state))
    raise ValueError(
        f"random_state must be None, an int, a RandomState or a Generator; got {random_state!r}."
    )


def generator_after_fit(random_state, draw):
    """Return the Generator of the ``draw``-th random call made after ``fit``.

    Parameters
    ----------
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        The estimator's ``random_state`` parameter.
    draw : int
        Index (0, 1, ...) of the call among those made since the last fit;
        the estimator counts its calls, so repeated calls differ.

    Returns
    -------
    rng : numpy.random.Generator
        ``None``: fresh OS entropy.  An int: a generator seeded with
        ``SeedSequence(seed, spawn_key=(AFTER_FIT_SPAWN_TAG, draw))``, so a
        fit followed by the same calls reproduces exactly, while no later
        stream is the fit's noise stream (which ``default_rng(seed)`` is).  A
        ``RandomState`` or ``Generator``: :func:`check_generator` of it, which
        continues the user's object as scikit-learn does.
    """
    if _is_int_seed(random_state):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int; got {random_state!r}.")
        seq = np.random.SeedSequence(int(random_state), spawn_key=(AFTER_FIT_SPAWN_TAG, int(draw)))
        return np.random.default_rng(seq)
    return check_generator(random_state)


def child_generator(rng):
    """An independent child of ``rng``, spawned through its ``SeedSequence``.

    Two uses, one rule.  Randomness released as drawn (the random Fourier
    features of :class:`~skdp.cluster.DPKernelKMeans`, ``random_weights_``,
    thousands of normal draws) must not be consecutive outputs of the
    stream that then draws the noise: PCG64's state can be recovered from a
    few hundred of its outputs (Bouillaguet, Martinez & Sauvage 2020), hence
    the noise.  And a nested estimator's fit (the clusterer of
    :class:`~skdp.generative.DPGenerativeMixture`) must draw its noise from
    the parent's entropy without any seed a nested estimator could keep.  A
    child spawned through the ``SeedSequence`` is a different stream, says
    nothing of ``rng``'s outputs, and consumes none of them.

    Parameters
    ----------
    rng : numpy.random.Generator
        The fit's noise generator (:func:`check_generator`).

    Returns
    -------
    child : numpy.random.Generator
    """
    bit_generator = rng.bit_generator
    seed_seq = getattr(bit_generator, "seed_seq", None) or getattr(bit_generator, "_seed_seq", None)
    if isinstance(seed_seq, np.random.SeedSequence):
        return np.random.default_rng(seed_seq.spawn(1)[0])
    # A generator built from an explicit state has no SeedSequence: seed the
    # child with 256 fresh bits from the OS (never with draws of ``rng``,
    # which would tie the child's outputs to the parent's); reproducibility
    # is given up only for this unusual input.
    return np.random.default_rng()
