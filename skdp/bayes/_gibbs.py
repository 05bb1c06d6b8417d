"""HMM inference on (sequence, timestep) cells, vectorised over sequences.

Pure functions on arrays shared by the Gibbs sampler of
:class:`~skdp.bayes.DPNaiveBayesHMM` and its predict/score methods.  Every
recursion loops over the positions of the padded ``(n_sequences, max_length)``
grid of cells (:class:`~skdp.bayes._sequences.CellLayout`) and is vectorised
over sequences and states; nothing loops over records.

The state update is a blocked forward-filtering backward-sampling (FFBS) draw
of each sequence's whole state path from its full conditional (Carter & Kohn
1994), at an optional temperature ``T`` (the exponential-mechanism sampler of
Foulds et al., Eq. 19, targets the joint density to the power ``1/T``).
"""

from __future__ import annotations

import numpy as np

from ._conjugate import sample_dirichlet, sample_truncated_dirichlet


def emission_log_likelihood(counts, log_theta):
    """``L[c, k] = sum_d sum_j n[c, d, j] log theta[k, d, j]`` (Foulds et al., Eq. 71).

    Parameters
    ----------
    counts : ndarray of shape (n_cells, n_features, n_categories_max)
    log_theta : ndarray of shape (n_states, n_features, n_categories_max)
        Padded coordinates must be 0 (their counts are 0).
    """
    c = counts.reshape(counts.shape[0], -1)
    return c @ log_theta.reshape(log_theta.shape[0], -1).T


def _grid_emissions(log_emission, grid):
    valid = grid >= 0
    emission = log_emission[np.where(valid, grid, 0)]
    emission[~valid] = 0.0
    return emission, valid


def forward(log_emission, log_start, log_trans, grid):
    """Scaled forward recursion.

    Returns
    -------
    alpha : ndarray of shape (n_sequences, max_length, n_states)
        Filtered state probabilities ``p(z_t | x_{1..t})`` (undefined past the
        end of a sequence).
    log_likelihood : ndarray of shape (n_sequences,)
        ``log p(x_{1..T})`` of each sequence, the state marginalised.
    """
    emission, valid = _grid_emissions(log_emission, grid)
    n_seq, length, k = emission.shape
    trans = np.exp(log_trans)
    alpha = np.empty((n_seq, length, k))
    log_likelihood = np.zeros(n_seq)
    prev = np.broadcast_to(np.exp(log_start), (n_seq, k))
    for t in range(length):
        pred = prev if t == 0 else prev @ trans
        m = emission[:, t].max(axis=1, keepdims=True)
        a = pred * np.exp(emission[:, t] - m)
        scale = a.sum(axis=1, keepdims=True)
        a = a / scale
        live = valid[:, t]
        log_likelihood += np.where(live, np.log(scale[:, 0]) + m[:, 0], 0.0)
        prev = np.where(live[:, None], a, prev)
        alpha[:, t] = prev
    return alpha, log_likelihood


def sample_states(log_emission, log_start, log_trans, grid, rng):
    """FFBS: one joint draw of every sequence's state path.

    Draws ``z_r ~ p(z_r | x_r) propto p(z_r | start, trans) p(x_r | z_r)`` with
    the densities as given (pass them divided by ``T`` for a tempered draw).

    Returns
    -------
    states : ndarray of int, shape (n_cells,)
    """
    alpha, _ = forward(log_emission, log_start, log_trans, grid)
    valid = grid >= 0
    n_seq, length, k = alpha.shape
    last = valid.sum(axis=1) - 1
    trans = np.exp(log_trans)
    z = np.zeros((n_seq, length), dtype=np.int64)
    for t in range(length - 1, -1, -1):
        p = alpha[:, t]
        if t + 1 < length:
            inner = t < last
            p = np.where(inner[:, None], p * trans[:, z[:, t + 1]].T, p)
        z[:, t] = _categorical(p, rng)
    states = np.empty(int(valid.sum()), dtype=np.int64)
    states[grid[valid]] = z[valid]
    return states


def _categorical(p, rng):
    cum = np.cumsum(p, axis=1)
    u = rng.random(p.shape[0]) * cum[:, -1]
    return np.minimum((cum < u[:, None]).sum(axis=1), p.shape[1] - 1)


def posterior_marginals(log_emission, log_start, log_trans, grid):
    """Smoothed ``p(z_t | x_{1..T})`` per cell by forward-backward.

    Returns
    -------
    proba : ndarray of shape (n_cells, n_states)
    log_likelihood : ndarray of shape (n_sequences,)
    """
    alpha, log_likelihood = forward(log_emission, log_start, log_trans, grid)
    emission, valid = _grid_emissions(log_emission, grid)
    n_seq, length, k = alpha.shape
    last = valid.sum(axis=1) - 1
    trans = np.exp(log_trans)
    beta = np.ones((n_seq, k))
    gamma = np.empty_like(alpha)
    for t in range(length - 1, -1, -1):
        if t + 1 < length:
            inner = t < last
            nxt = np.exp(emission[:, t + 1] - emission[:, t + 1].max(axis=1, keepdims=True)) * beta
            b = nxt @ trans.T
            b = b / b.sum(axis=1, keepdims=True)
            beta = np.where(inner[:, None], b, 1.0)
        g = alpha[:, t] * beta
        gamma[:, t] = g / g.sum(axis=1, keepdims=True)
    proba = np.empty((int(valid.sum()), k))
    proba[grid[valid]] = gamma[valid]
    return proba, log_likelihood


def viterbi(log_emission, log_start, log_trans, grid):
    """Most probable state path of every sequence.

    Returns
    -------
    states : ndarray of int, shape (n_cells,)
    """
    emission, valid = _grid_emissions(log_emission, grid)
    n_seq, length, k = emission.shape
    last = valid.sum(axis=1) - 1
    back = np.zeros((n_seq, length, k), dtype=np.int64)
    delta = log_start[None, :] + emission[:, 0]
    for t in range(1, length):
        scores = delta[:, :, None] + log_trans[None, :, :]
        back[:, t] = np.argmax(scores, axis=1)
        step = scores.max(axis=1) + emission[:, t]
        delta = np.where(valid[:, t][:, None], step, delta)
    z = np.zeros((n_seq, length), dtype=np.int64)
    z_next = np.argmax(delta, axis=1)
    for t in range(length - 1, -1, -1):
        # Past a sequence's end keep its final argmax; at and before it follow the pointers.
        z[:, t] = np.where(t <= last, z_next, 0)
        if t > 0:
            z_next = np.where(t <= last, back[np.arange(n_seq), t, z_next], z_next)
    states = np.empty(int(valid.sum()), dtype=np.int64)
    states[grid[valid]] = z[valid]
    return states


def transition_counts(states, grid, n_states):
    """Initial-state counts and transition counts of the state paths.

    ``n_{0,k}`` counts sequences starting in ``k`` (the paper's dummy state
    ``z_{r,0} = 0``, Appendix E) and ``n_{k,k'}`` the transitions ``k -> k'``.
    """
    valid = grid >= 0
    z = np.where(valid, states[np.where(valid, grid, 0)], -1)
    start = np.bincount(z[:, 0][z[:, 0] >= 0], minlength=n_states).astype(float)
    pairs = valid[:, 1:] & valid[:, :-1]
    flat = z[:, :-1][pairs] * n_states + z[:, 1:][pairs]
    trans = np.bincount(flat, minlength=n_states * n_states).reshape(n_states, n_states).astype(float)
    return start, trans


def state_category_counts(states, counts, n_states):
    """``n_{d,k,:} = sum_{(r,t): z_{r,t} = k} n_{r,t,d,:}`` (Foulds et al., Eq. 69)."""
    one_hot = np.zeros((counts.shape[0], n_states))
    one_hot[np.arange(counts.shape[0]), states] = 1.0
    return (one_hot.T @ counts.reshape(counts.shape[0], -1)).reshape((n_states,) + counts.shape[1:])


def safe_log(p):
    """``log p`` with ``log 0 = -inf`` silenced (padded or impossible entries)."""
    with np.errstate(divide="ignore"):
        return np.log(p)


def dirichlet_row_means(shapes):
    """Means of Dirichlet rows (last axis)."""
    return shapes / shapes.sum(axis=-1, keepdims=True)


def gibbs_sampler(
    counts,
    grid,
    mask,
    rng,
    *,
    n_states,
    alpha,
    beta,
    n_iter,
    burn_in,
    temperature=1.0,
    truncation=None,
    release=None,
    keep_last=False,
):
    """Blocked Gibbs sampler (Eq. 68-69, transitions sampled rather than collapsed).

    Parameters
    ----------
    counts : ndarray of shape (n_cells, n_features, n_categories_max)
        Per-cell category counts (noisy for ``mechanism="laplace"``).
    grid : ndarray of shape (n_sequences, max_length)
        Cell index of each position, -1 for padding (:class:`CellLayout`).
    mask : ndarray of shape (n_features, n_categories_max)
        True on each feature's real categories.
    rng : numpy.random.Generator
    n_states, alpha, beta, n_iter, burn_in :
        The estimator's ``n_components``, priors and schedule.
    temperature : float, default=1.0
        OPS temperature ``T`` (Foulds et al., Eq. 19): the conditionals are
        those of the joint density to the power ``1/T``.
    truncation : ndarray of shape (n_features,) or None
        OPS truncation ``a0_d`` of the emission distributions.
    release : (ExponentialMechanism, PrivacyLedger) or None
        Routes each data-dependent update through the exponential mechanism
        (one event each); the initial values and the transition updates never
        read the data.
    keep_last : bool, default=False
        Return the final sample instead of the post-burn-in averages.

    Returns
    -------
    startprob, transmat, theta, states
        Post-burn-in means and most frequent state of each cell, or the
        final sample when ``keep_last``.
    """
    n_features, kmax = mask.shape
    full_mask = np.broadcast_to(mask, (n_states, n_features, kmax))

    def draw(fn, reads_data=True):
        if release is None or not reads_data:
            return fn(temperature, rng)
        mech, ledger = release
        return mech.sample(fn, rng, ledger)

    def draw_theta(shapes, t, r):
        if truncation is None:
            return sample_dirichlet(shapes, full_mask, r)
        lower = np.broadcast_to(truncation, (n_states, n_features))
        return sample_truncated_dirichlet(shapes, full_mask, lower, r)

    def tempered(c, prior, t):
        return (c + prior - 1.0) / t + 1.0

    # Data-independent start: parameters from the (truncated) prior.
    theta = draw_theta(np.full((n_states, n_features, kmax), beta), temperature, rng)
    start = rng.dirichlet(np.full(n_states, alpha))
    trans = rng.dirichlet(np.full(n_states, alpha), size=n_states)
    n_kept = n_iter - burn_in
    sums = [np.zeros(n_states), np.zeros((n_states, n_states)), np.zeros_like(theta)]
    state_hist = np.zeros((counts.shape[0], n_states))
    for it in range(n_iter):
        log_theta = np.where(full_mask, safe_log(np.maximum(theta, 1e-300)), 0.0)
        log_emission = emission_log_likelihood(counts, log_theta)
        # With one state the state update ignores the data: no release.
        z = draw(
            lambda t, r, e=log_emission, s=start, a=trans: sample_states(
                e / t, safe_log(s) / t, safe_log(a) / t, grid, r
            ),
            reads_data=n_states > 1,
        )
        start_counts, trans_counts = transition_counts(z, grid, n_states)
        start = rng.dirichlet(tempered(start_counts, alpha, temperature))
        trans = sample_dirichlet(
            tempered(trans_counts, alpha, temperature), np.ones((n_states, n_states), bool), rng
        )
        shapes = tempered(state_category_counts(z, counts, n_states), beta, temperature)
        theta = draw(lambda t, r, s=shapes: draw_theta(s, t, r))
        if it >= burn_in:
            for acc, value in zip(sums, (start, trans, theta), strict=True):
                acc += value
            state_hist[np.arange(z.shape[0]), z] += 1
    if keep_last:
        return start, trans, theta, z
    return sums[0] / n_kept, sums[1] / n_kept, sums[2] / n_kept, np.argmax(state_hist, axis=1)


def sample_sequences(startprob, transmat, emissionprob, categories, n_sequences, n_timesteps, n_records, rng):
    """Synthetic records from HMM parameters (:meth:`DPNaiveBayesHMM.sample`).

    Draws each sequence's state path from ``startprob`` and ``transmat``,
    then ``n_records`` records per cell, feature by feature, from
    ``emissionprob``; returns ``(X, sequence_ids, timesteps, states)`` with
    ``X`` in the labels of ``categories``.
    """
    n_states = startprob.shape[0]
    z = np.empty((n_sequences, n_timesteps), dtype=np.int64)
    cum_start, cum_trans = np.cumsum(startprob), np.cumsum(transmat, axis=1)
    z[:, 0] = _inverse_cdf(np.broadcast_to(cum_start, (n_sequences, n_states)), rng)
    for t in range(1, n_timesteps):
        z[:, t] = _inverse_cdf(cum_trans[z[:, t - 1]], rng)
    states = np.repeat(z.reshape(-1), n_records)
    codes = np.column_stack([_inverse_cdf(np.cumsum(probs, axis=1)[states], rng) for probs in emissionprob])
    columns = [cats[codes[:, d]] for d, cats in enumerate(categories)]
    kinds = {c.dtype.kind for c in columns}
    X = np.column_stack(columns) if len(kinds) == 1 and "O" not in kinds else _object_stack(columns)
    sequence_ids = np.repeat(np.arange(n_sequences), n_timesteps * n_records)
    timesteps = np.tile(np.repeat(np.arange(n_timesteps), n_records), n_sequences)
    return X, sequence_ids, timesteps, states


def _inverse_cdf(cum, rng):
    u = rng.random(cum.shape[0]) * cum[:, -1]
    return np.minimum((cum < u[:, None]).sum(axis=1), cum.shape[1] - 1)


def _object_stack(columns):
    out = np.empty((columns[0].shape[0], len(columns)), dtype=object)
    for d, column in enumerate(columns):
        out[:, d] = column
    return out
