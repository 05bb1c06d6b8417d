"""The ``"marginals"`` generator: a DP latent-class model (pure functions).

Within each cluster of the private partition every binary column is an
independent Bernoulli and every declared categorical block (one-hot columns)
an independent categorical: the mixture over clusters is a latent-class
model (Lazarsfeld 1950), the generator a small cluster can afford.  Its
sufficient statistics are, per cluster, the size and the sums of the
*centred* records

    M[c] = sum_{i in c} (1, x_i^bin - 1/2, e_i^(1) - 1/m_1, ...),

released at once by one Gaussian mechanism.  Centring at the middle of the
domain is what makes the release cheap: a record contributes a vector of L2
norm at most ``C = sqrt(1 + d_bin / 4 + sum_b (m_b - 1) / m_b)`` (binary
entries move by ``1/2`` at most; a centred one-hot block has squared norm
``(1 - 1/m)^2 + (m - 1)/m^2 = (m - 1)/m``) to its own cluster's row, against
``sqrt(1 + d_bin + n_blocks)`` for raw counts: on 64 binary pixels the noise
std is halved (``sqrt(17)`` against ``sqrt(65)``).  The rows are clipped to
``C`` by the core (:func:`skdp.privacy.clip_rows`, a no-op on the declared
domain that makes the bound hold whatever the input) and the sensitivity is
the core's :func:`skdp.privacy.sensitivity.row_sum_sensitivity` of rows of
norm ``C``.

:func:`release_marginals` makes that release through the core.  Everything
after it is post-processing: sizes floored at 1,
per-column estimates ``(S + n~/2) / n~`` shrunk towards the pooled estimate
across clusters by a James-Stein factor computed from the released numbers
and the public noise scale, clipped to ``[0, 1]`` and, for a block,
renormalised onto the simplex.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np

from ..privacy import ADD_REMOVE, GaussianEvent, GaussianMechanism, calibrate_noise_multiplier, clip_rows
from ..privacy.sensitivity import row_sum_sensitivity

__all__ = [
    "marginals_attributes",
    "declared_blocks",
    "binary_columns",
    "continuous_columns",
    "check_one_hot",
    "release_marginals",
    "centred_statistics",
    "column_layout",
    "domain_row_norm",
    "marginal_log_likelihood",
    "marginals_from_release",
    "sample_marginals",
]


def declared_blocks(categorical, n_features):
    """The declared one-hot blocks as tuples of column indices, validated against ``n_features``.

    Parameters
    ----------
    categorical : list of list of int or None
        The ``categorical`` hyperparameter of
        :class:`~skdp.generative.DPGenerativeMixture`.
    n_features : int
        The public number of columns.

    Returns
    -------
    blocks : list of tuple of int

    Raises
    ------
    ValueError
        Naming the block (``categorical[b]``) that is too short, not integer,
        out of range or overlapping another.
    """
    if categorical is None:
        return []
    blocks, seen = [], set()
    for b, cols in enumerate(categorical):
        if not isinstance(cols, (list, tuple, np.ndarray)) or len(cols) < 2:
            raise ValueError(f"categorical[{b}] must be a list of at least two column indices.")
        if not all(isinstance(c, Integral) and not isinstance(c, bool) for c in cols):
            raise ValueError(f"categorical[{b}] must hold integer column indices.")
        cols = tuple(int(c) for c in cols)
        if min(cols) < 0 or max(cols) >= n_features:
            raise ValueError(f"categorical[{b}] has a column index outside [0, {n_features}).")
        if len(set(cols)) != len(cols) or seen & set(cols):
            raise ValueError(f"categorical[{b}] repeats a column: blocks must be disjoint.")
        seen |= set(cols)
        blocks.append(cols)
    return blocks


def binary_columns(binary, categorical, n_features):
    """The declared binary columns (``generator="marginals"``), validated; ValueError naming ``binary``."""
    if binary is None:
        return np.zeros(0, dtype=np.intp)
    cols = list(binary)
    if not all(isinstance(c, Integral) and not isinstance(c, bool) for c in cols):
        raise ValueError("binary must be a list of integer column indices.")
    if cols and (min(cols) < 0 or max(cols) >= n_features):
        raise ValueError(f"binary has a column index outside [0, {n_features}).")
    in_blocks = {c for block in declared_blocks(categorical, n_features) for c in block}
    if len(set(cols)) != len(cols) or in_blocks & set(cols):
        raise ValueError("binary repeats a column or names a column of a categorical block.")
    return np.asarray(sorted(cols), dtype=np.intp)


def continuous_columns(binary, categorical, n_features):
    """Columns that are neither declared binary nor in a declared block (``generator="marginals"``)."""
    taken = np.zeros(n_features, dtype=bool)
    taken[binary_columns(binary, categorical, n_features)] = True
    for block in declared_blocks(categorical, n_features):
        taken[list(block)] = True
    return np.flatnonzero(~taken)


def check_one_hot(X, blocks):
    """Refuse, naming ``categorical[b]`` and never a value, a declared block whose rows are not one-hot."""
    for b, cols in enumerate(blocks):
        block = X[:, list(cols)]
        if not (np.all((block == 0) | (block == 1)) and np.all(block.sum(axis=1) == 1)):
            raise ValueError(
                f"categorical[{b}] declares a one-hot block, but some rows of X are not one-hot "
                "there (entries 0 or 1, exactly one 1)."
            )


def column_layout(n_features, blocks, skip_block=None, exclude=()):
    """Binary columns and released blocks of a record of ``n_features`` columns.

    Parameters
    ----------
    n_features : int
    blocks : list of tuple of int
        Declared one-hot blocks (disjoint column indices).
    skip_block : int or None
        A block that defines the partition: its columns are constant within
        a cluster, hence neither released nor counted in the sensitivity.

    Returns
    -------
    binary : ndarray of int
        Columns modelled as independent Bernoulli.
    released_blocks : list of ndarray of int
    """
    in_block = np.zeros(n_features, dtype=bool)
    for cols in blocks:
        in_block[list(cols)] = True
    in_block[list(exclude)] = True
    binary = np.flatnonzero(~in_block)
    released = [np.asarray(cols, dtype=np.intp) for b, cols in enumerate(blocks) if b != skip_block]
    return binary, released


def domain_row_norm(n_binary, block_sizes):
    """Largest L2 norm of a record's centred statistic ``(1, x - 1/2, e - 1/m, ...)``.

    ``1`` for the size, ``1/4`` per binary column in ``[0, 1]``, and
    ``(m - 1) / m`` per one-hot block of ``m`` categories.
    """
    return float(np.sqrt(1.0 + n_binary / 4.0 + sum((m - 1.0) / m for m in block_sizes)))


def centred_statistics(X, binary, blocks):
    """Per-record statistic ``(1, x_bin - 1/2, e_b - 1/m_b, ...)``, shape ``(n, 1 + D)``."""
    parts = [np.ones((X.shape[0], 1)), X[:, binary] - 0.5]
    parts += [X[:, cols] - 1.0 / len(cols) for cols in blocks]
    return np.hstack(parts)


def _shrink(estimates, sizes, noise_std):
    """James-Stein shrinkage of per-cluster column estimates towards their pooled value.

    ``estimates`` (k, D) are unbiased up to noise of variance
    ``v_c = (noise_std / n~_c)^2``.  For each column the between-cluster
    signal variance ``s^2 = max(0, sum_c w_c (d_c^2 - v_c))`` (``w_c``
    proportional to ``n~_c^2``, the precision of class ``c``; ``d`` the
    deviation from the size-weighted pooled value) gives the factor
    ``s^2 / (s^2 + v_c)`` (Efron & Morris 1973).  Post-processing: every
    input is released or public.
    """
    weights = sizes / sizes.sum()
    pooled = weights @ estimates
    dev = estimates - pooled
    var = (noise_std / sizes)[:, None] ** 2
    # Precision-weighted moments (weights n~_c^2, proportional to 1 / v_c): a
    # class the release left (nearly) empty has a noise variance as large as
    # noise_std^2, which would otherwise swamp the estimate and shrink every
    # class to the pooled value.
    precision = sizes**2 / np.sum(sizes**2)
    signal = np.maximum(0.0, precision @ dev**2 - precision @ var)
    return pooled + dev * (signal / (signal + var))


def marginals_from_release(noisy, binary, blocks, n_features, noise_std, partition_block=None, shrink=True):
    """Mixture weights and per-cluster column probabilities from the released ``noisy`` sums.

    Parameters
    ----------
    noisy : ndarray of shape (k, 1 + D)
        The released centred sums (:func:`centred_statistics` summed per cluster, plus noise).
    binary, blocks : the layout (:func:`column_layout`).
    n_features : int
    noise_std : float
        Public std of the noise of every entry.
    partition_block : ndarray of int or None
        Columns of the block defining the partition: cluster ``c`` lies in
        its category ``c // (k / m)`` (probability one).

    shrink : bool, default=True
        James-Stein shrinkage across clusters (off for DP-EM's intermediate
        iterations, where it would pull classes that are still separating
        back together).

    Returns
    -------
    sizes : ndarray of shape (k,)
        Released sizes floored at 1.
    probs : ndarray of shape (k, n_features)
        ``P(x_j = 1 | cluster)``; each block's entries sum to one.
    """
    k = noisy.shape[0]
    sizes = np.maximum(noisy[:, 0], 1.0)
    probs = np.zeros((k, n_features))
    start = 1
    nb = len(binary)
    est = noisy[:, start : start + nb] / sizes[:, None] + 0.5
    shrunk = _shrink if shrink else (lambda est, sizes, noise_std: est)
    probs[:, binary] = np.clip(shrunk(est, sizes, noise_std), 0.0, 1.0)
    start += nb
    for cols in blocks:
        m = len(cols)
        est = noisy[:, start : start + m] / sizes[:, None] + 1.0 / m
        q = np.clip(shrunk(est, sizes, noise_std), 0.0, None)
        total = q.sum(axis=1, keepdims=True)
        # A row shrunk to all zeros carries no information: uniform.
        probs[:, cols] = np.where(total > 0, q / np.where(total > 0, total, 1.0), 1.0 / m)
        start += m
    if partition_block is not None:
        # Class c lies in the block's category c // (k / m): one class per
        # category, or several latent classes nested in each.
        m = len(partition_block)
        probs[:, partition_block] = np.repeat(np.eye(m), k // m, axis=0)
    return sizes, probs


def sample_marginals(probs, binary, blocks, clusters, rng):
    """Records drawn from the clusters' product distributions (``blocks`` one-hot)."""
    n = len(clusters)
    out = np.zeros((n, probs.shape[1]))
    p = probs[clusters]
    out[:, binary] = rng.random((n, len(binary))) < p[:, binary]
    for cols in blocks:
        cum = np.cumsum(p[:, cols], axis=1)
        pick = np.minimum((rng.random((n, 1)) > cum).sum(axis=1), len(cols) - 1)
        out[np.arange(n), np.asarray(cols)[pick]] = 1.0
    return out


def marginal_log_likelihood(X, probs, binary, blocks, floor=1e-6):
    """``log P(x | cluster)`` for every record and cluster, shape ``(n, k)``.

    Probabilities are floored at ``floor`` so that a record the model gives
    probability zero scores finitely.
    """
    p = np.clip(probs, floor, 1.0 - floor)
    xb = X[:, binary]
    out = xb @ np.log(p[:, binary]).T + (1.0 - xb) @ np.log1p(-p[:, binary]).T
    for cols in blocks:
        out += X[:, cols] @ np.log(p[:, cols]).T
    return out


def release_marginals(X, labels, k, blocks, skip, prior_events, plan, rng, ledger, rtol, exclude=()):
    """Release the clusters' centred sums at once and map them to marginals.

    Acs et al. (2018), Alg. 1 with the latent-class generator in place of
    lines 3-6: every record's centred statistic (size, binary columns, the
    blocks other than the partition's) is clipped by the core to the
    domain's norm ``C`` (:func:`domain_row_norm`) and summed per cluster;
    the ``(k, 1 + D)`` sums are released by the Gaussian mechanism with
    add/remove L2 sensitivity ``C`` (a record is one row of norm at most
    ``C`` in its own cluster's block), its multiplier calibrated so that
    the composition with ``prior_events`` is ``(epsilon, delta)``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Records in ``[0, 1]``.
    labels : ndarray of shape (n_samples,)
        The partition (never returned).
    k : int
        Number of clusters.
    blocks : list of tuple of int
        Declared one-hot blocks.
    skip : int or None
        Index of the block that is the partition (not released), or None.
    prior_events : list
        Events already on the ledger (the clustering's).
    plan : PrivacyPlan
        ``epsilon``, ``delta``, ``composition`` and ``secure_noise``.
    rng : numpy.random.Generator
    ledger : PrivacyLedger
    rtol : float
        Relative precision of the calibration.
    exclude : sequence of int
        Columns left out of the release (:func:`column_layout`).

    Returns
    -------
    sizes : ndarray of shape (k,)
        Released sizes, floored at 1.
    probs : ndarray of shape (k, n_features)
        The marginals (post-processing).
    z : float
        The release's noise multiplier.
    noise_std : float
        The release's noise std ``z * C``.
    """
    m = X.shape[1]
    binary, released = column_layout(m, blocks, skip, exclude)
    bound = domain_row_norm(len(binary), [len(c) for c in released])
    stats = clip_rows(centred_statistics(X, binary, released), bound)
    sums = np.zeros((k, stats.shape[1]))
    np.add.at(sums, labels, stats)
    del stats
    sensitivity = row_sum_sensitivity(bound, sums.size, norm=2, neighbouring=ADD_REMOVE)
    z = calibrate_noise_multiplier(
        lambda z: [*prior_events, GaussianEvent(count=1, neighbouring=ADD_REMOVE, noise_multiplier=z)],
        plan.epsilon,
        plan.delta,
        plan.composition,
        ADD_REMOVE,
        rtol=rtol,
        secure_noise=plan.secure_noise,
    )
    mechanism = GaussianMechanism(sensitivity, z * sensitivity, ADD_REMOVE)
    noisy = mechanism.release(sums, rng, ledger)
    partition_block = None if skip is None else np.asarray(blocks[0])
    sizes, probs = marginals_from_release(noisy, binary, released, m, mechanism.scale, partition_block)
    return sizes, probs, z, mechanism.scale


def fit_marginals(
    X, blocks, mode, n_clusters, cluster, plan, rng, ledger, rtol, prior_events=(), exclude=(), cluster_X=None
):
    """Alg. 1 with the latent-class generator: partition, then one Gaussian release.

    The partition (line 1, ``mode``) is the first declared block's
    categories (public function, nothing spent), DP kernel k-means
    (``cluster(X, plan, rng, ledger)``, its events first on the ledger), or
    a single cluster.  Then every record's centred statistic (size, binary
    columns, the other blocks) is clipped by the core to the domain's norm
    ``C`` and summed per cluster, and the ``(k, 1 + D)`` sums are released
    at once by the Gaussian mechanism with add/remove L2 sensitivity ``C``
    (a record is one row of norm at most ``C`` in its own cluster's block),
    its multiplier calibrated so the whole composition is ``(epsilon,
    delta)`` (:func:`release_marginals`).

    ``prior_events`` are already on the ledger (the size count, the private
    box); ``exclude`` are the columns left out of the release (the original
    continuous columns, released through their linear-binning blocks);
    ``cluster_X`` is what the clustering reads (default ``X``).

    Returns the fitted attributes of the mixture, by name; the partition of
    the training rows is not among them.
    """
    clusterer, cluster_events, skip = None, [], None
    cluster_X = X if cluster_X is None else cluster_X
    if mode == "categorical":
        skip = 0
        labels = X[:, list(blocks[0])].argmax(axis=1)
        k = len(blocks[0])
    elif mode == "kmeans":
        cluster_events, labels, _, clusterer = cluster(cluster_X, plan, rng, ledger)
        k = n_clusters
    else:
        labels = np.zeros(X.shape[0], dtype=np.intp)
        k = 1
    sizes, probs, z, noise_std = release_marginals(
        X, labels, k, blocks, skip, [*prior_events, *cluster_events], plan, rng, ledger, rtol, exclude
    )
    del labels  # the partition of the training rows is never stored
    return marginals_attributes(clusterer, probs, sizes, z, noise_std)


def marginals_attributes(clusterer, probs, sizes, z, noise_std):
    """The fitted attributes of the marginals generator (no networks), from its releases."""
    return {
        "clusterer_": clusterer,
        "generators_": None,
        "marginals_": probs,
        "weights_": sizes / sizes.sum(),
        "cluster_sizes_": sizes,
        "sampling_rates_": None,
        "n_steps_": 0,
        "cluster_steps_": None,
        "noise_multiplier_": float(z),
        "noise_std_": float(noise_std),
        "clip_noise_multiplier_": None,
        "clipping_mode_": None,
    }
