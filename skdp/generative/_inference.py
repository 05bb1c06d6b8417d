"""Post-fit inference of :class:`~skdp.generative.DPGenerativeMixture` (pure functions).

Everything here is post-processing of the released model: the cluster of a
record, its score, and synthetic records.  No function reads training data
or keeps a generator.
"""

from __future__ import annotations

import copy
from numbers import Integral

import numpy as np

from .._random import check_generator
from ._marginals import marginal_log_likelihood, sample_marginals

#: Spawn key of the stream ``sample(random_state=<int>)`` draws from.  A fit
#: with the same int uses the root stream (spawn key ``()``) and spawns
#: ``(0,)`` for its clustering; this key is neither, so a sample is
#: reproducible from its int but never replays a draw of any fit's noise.
_SAMPLE_SPAWN_KEY = (0x73616D70,)


def sample_generator(random_state):
    """Generator of :meth:`DPGenerativeMixture.sample`: never the stream of a fit.

    ``None`` gives fresh OS entropy; an int seeds the child
    ``SeedSequence(random_state, spawn_key=_SAMPLE_SPAWN_KEY)``, reproducible
    and distinct from ``default_rng(random_state)``, the stream a fit with
    the same int draws its noise from; a RandomState or Generator is the
    caller's own stream (:func:`skdp._random.check_generator`).
    """
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        return np.random.default_rng(np.random.SeedSequence(int(random_state), spawn_key=_SAMPLE_SPAWN_KEY))
    return check_generator(random_state)


def to_data_range(out, lo, hi):
    """Samples on ``[0, 1]`` mapped back onto ``[lo, hi]`` (identity for the default ``(0, 1)``)."""
    if np.all(lo == 0.0) and np.all(hi == 1.0):
        return out
    return lo + out * (hi - lo)


def log_joint(X, weights, marginals, layout):
    """``log p_s + log P(x | s)`` under the released latent-class model, shape ``(n, k)``.

    ``layout`` is ``(binary, blocks)`` of :func:`column_layout`.
    """
    binary, blocks = layout
    return np.log(weights)[None, :] + marginal_log_likelihood(X, marginals, binary, blocks)


def network_score_samples(X, generator, generators, weights, labels):
    """Per-record score of the DP-SGD generators (``"vae"`` or ``"rbm"``).

    VAE: ``log sum_s p_s exp(ELBO_s(x))``, a lower bound on the mixture's
    log-likelihood (each ELBO averaged over 10 fixed latent draws, the same
    for every record).  RBM: the negative free energy ``-F(x)`` of the
    record's own cluster model (``labels``), its log-probability up to that
    model's log partition function.  Computed in float64 copies: a record's
    score does not depend on the batch it comes in.
    """
    import torch

    Xt = torch.as_tensor(X, dtype=torch.float64)
    if generator == "rbm":
        from ._rbm import rbm_score

        out = np.empty(X.shape[0])
        for s in np.unique(labels):
            module = copy.deepcopy(generators[s]).double()
            out[labels == s] = rbm_score(module, Xt[labels == s]).numpy()
        return out
    from ._vae import elbo

    gen = torch.Generator().manual_seed(0)
    scores = []
    for module in generators:
        module = copy.deepcopy(module).double()
        noise = torch.randn(10, module.latent_dim, generator=gen, dtype=torch.float64)
        with torch.no_grad():
            draws = torch.stack([elbo(module, Xt, eps.expand(Xt.shape[0], -1)) for eps in noise])
        scores.append(draws.mean(0).numpy())
    log_w = np.log(weights)[:, None]
    return np.logaddexp.reduce(np.asarray(scores) + log_w, axis=0)


def sample_clusters(weights, n_samples, cluster, random_state):
    """``(clusters, rng)``: the cluster of every synthetic record and the generator of the draw.

    Each cluster is drawn with ``weights``, or is the one ``cluster`` asked
    for; ``rng`` is :func:`sample_generator` of ``random_state``.
    """
    if not (isinstance(n_samples, Integral) and n_samples >= 1):
        raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}.")
    rng = sample_generator(random_state)
    return _pick_clusters(weights, n_samples, cluster, rng), rng


def _pick_clusters(weights, n_samples, cluster, rng):
    k = len(weights)
    if cluster is None:
        return rng.choice(k, size=n_samples, p=weights)
    if isinstance(cluster, Integral) and 0 <= cluster < k:
        return np.full(n_samples, int(cluster), dtype=np.intp)
    raise ValueError(f"cluster must be None or an integer in [0, {k}), got {cluster!r}.")


def draw_records(generator, clusters, n_features, rng, *, marginals=None, layout=None, generators=None):
    """Synthetic records on ``[0, 1]``, one per entry of ``clusters``, from that cluster's model."""
    if generator == "marginals":
        binary, blocks = layout
        return sample_marginals(marginals, binary, blocks, clusters, rng)
    import torch

    # A local generator, dropped on return: nothing of it stays on the model.
    gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
    if generator == "vae":
        from ._vae import vae_sample as draw
    else:
        from ._rbm import rbm_sample as draw
    out = np.empty((len(clusters), n_features))
    with torch.no_grad():
        for s in np.unique(clusters):
            mask = clusters == s
            out[mask] = draw(generators[s], int(mask.sum()), gen).numpy()
    return out
