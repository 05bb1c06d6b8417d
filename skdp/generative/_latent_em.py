"""DP-EM of the ``"marginals"`` generator's latent-class model (pure functions).

The latent-class model (Lazarsfeld 1950) of :mod:`~skdp.generative._marginals`
with ``K`` classes is fitted by expectation-maximisation whose every M-step
is one Gaussian release, as in DP-EM for Gaussian mixtures (Park, Foulds,
Chaudhuri & Welling 2017, Alg. 1): at iteration ``t`` every record's
responsibilities ``r_i`` (a point of the simplex, computed from the
*released* parameters of iteration ``t - 1`` and the record alone) weight its
centred statistic ``v_i = (1, x_bin - 1/2, e_b - 1/m_b, ...)``, and the
``(K, 1 + D)`` matrix ``sum_i r_i v_i^T`` is released.  One record moves it by
``r_i v_i^T``, of Frobenius norm ``||r_i||_2 ||v_i|| <= ||r_i||_1 C = C``:
the add/remove L2 sensitivity is ``C``, the row norm of the hard partition,
whatever ``K``.  ``T`` iterations are ``T`` Gaussian releases of the same
multiplier, calibrated at once with the events before them.

With a declared categorical block defining the partition, the classes are
nested in its categories (``K = m_1 * k_sub``): a record's responsibilities
are zero outside its category, so the block's dependence on every other
column is kept exactly as before, and the sub-classes add the dependence
between the other columns.  With ``k_sub = 1`` (or ``K = 1``) the
responsibilities are the hard partition, one iteration, and the release is
that of :func:`~skdp.generative._marginals.release_marginals`.

The initial parameters are data-independent: random class profiles drawn
from the fit's generator (binary columns uniform in ``[1/4, 3/4]``, declared
blocks a Dirichlet(2) draw mixed half and half with the uniform, continuous
columns a bump of width 1/4 around a uniform random location on the grid,
mixed likewise), uniform weights.

:func:`fit_marginals_generator` is the whole ``generator="marginals"`` fit
of :class:`~skdp.generative.DPGenerativeMixture` (the noisy count, the
private box, the capacity rule of :func:`marginals_capacity`, then DP-EM or
the one-release partition of :func:`~skdp.generative._marginals.fit_marginals`);
the estimator keeps the template's hooks and calls it from ``_fit_private``.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._user_warnings import _user_stacklevel
from ..privacy import ADD_REMOVE, GaussianEvent, GaussianMechanism, calibrate_noise_multiplier, clip_rows
from ..privacy.dpsgd import dataset_size_event, release_dataset_size
from ..privacy.sensitivity import row_sum_sensitivity
from ._domain import capacity, hat_log_density, release_box
from ._marginals import (
    centred_statistics,
    column_layout,
    continuous_columns,
    domain_row_norm,
    fit_marginals,
    marginal_log_likelihood,
    marginals_attributes,
    marginals_from_release,
)
from ._tree import fit_tree_generator, release_split_size, tree_cells, tree_grid, warn_outside_count

__all__ = [
    "EM_ITERATIONS",
    "EXTRA_ITERATIONS",
    "em_iterations",
    "initial_profiles",
    "class_log_likelihood",
    "fit_latent_classes",
    "fit_marginals_generator",
    "marginals_capacity",
    "warn_outside_bounds",
]

#: EM iterations when there is more than one class per group.  Each costs
#: the noise of one release (the multiplier grows as ``sqrt(T)``); from a
#: random start the latent-class EM moves most in its first few iterations.
EM_ITERATIONS = 3
#: Longer runs a fit may afford where the capacity rule is at its caps.
EXTRA_ITERATIONS = (5, 10, 20)
SMOOTH = 0.05


def em_iterations(k_sub):
    """``T``: one release for a hard partition (``k_sub == 1``), else :data:`EM_ITERATIONS`."""
    return 1 if k_sub == 1 else EM_ITERATIONS


def initial_profiles(n_classes, binary, hard_blocks, soft_blocks, n_columns, rng):
    """Data-independent random class profiles, shape ``(n_classes, n_columns)`` (module docstring)."""
    probs = np.zeros((n_classes, n_columns))
    probs[:, binary] = rng.uniform(0.25, 0.75, size=(n_classes, len(binary)))
    for cols in hard_blocks:
        m = len(cols)
        probs[:, cols] = 0.5 * rng.dirichlet(np.full(m, 2.0), size=n_classes) + 0.5 / m
    for cols in soft_blocks:
        g = np.linspace(0.0, 1.0, len(cols))
        centre = rng.random((n_classes, 1))
        bump = np.exp(-0.5 * ((g[None, :] - centre) / 0.25) ** 2)
        bump /= bump.sum(axis=1, keepdims=True)
        probs[:, cols] = 0.5 * bump + 0.5 / len(cols)
    return probs


def class_log_likelihood(X, probs, binary, hard_blocks, soft_blocks, n_bins):
    """``log f(x | class)`` of every encoded record and class, shape ``(n, K)``.

    Binary columns and declared blocks by their probabilities
    (:func:`marginal_log_likelihood`), each continuous column by its
    linear-binning density (:func:`~skdp.generative._domain.hat_log_density`).
    """
    out = marginal_log_likelihood(X, probs, binary, hard_blocks)
    for cols in soft_blocks:
        cols = list(cols)
        out += hat_log_density(X[:, cols], probs[:, cols], n_bins)
    return out


def _responsibilities(X, weights, probs, layout, groups, k_sub):
    """E-step: posterior of each record's class from the released parameters, zero outside its group."""
    binary, hard, soft, n_bins = layout
    smooth = probs.copy()
    for cols in soft:
        q = probs[:, list(cols)]
        # A noisy profile read through a kernel of a quarter of the grid.
        width = max(1, len(cols) // 8)
        kernel = np.bartlett(2 * width + 3)[1:-1]
        q = np.stack([np.convolve(row, kernel)[width : width + len(row)] for row in q])
        q /= q.sum(axis=1, keepdims=True)
        smooth[:, list(cols)] = (1 - SMOOTH) * q + SMOOTH / len(cols)
    log_post = np.log(np.maximum(weights, 1e-300))[None, :] + class_log_likelihood(
        X, smooth, binary, hard, soft, n_bins
    )
    if groups is not None:
        own = (np.arange(len(weights))[None, :] // k_sub) == groups[:, None]
        log_post = np.where(own, log_post, -np.inf)
    log_post -= log_post.max(axis=1, keepdims=True)
    post = np.exp(log_post)
    return post / post.sum(axis=1, keepdims=True)


def fit_latent_classes(
    X,
    blocks,
    groups,
    n_groups,
    k_sub,
    n_bins,
    n_iter,
    prior_events,
    plan,
    rng,
    ledger,
    rtol,
    exclude=(),
    n_soft=0,
):
    """DP-EM of ``K = n_groups * k_sub`` latent classes (module docstring); returns the released model.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_columns)
        Encoded records (binary columns, declared blocks, linear-binning
        weights of the continuous columns).
    blocks : list of tuple of int
        Every block: the declared ones first, then the last ``n_soft`` soft
        (linear-binning) blocks.
    groups : ndarray of shape (n_samples,) or None
        Category of the partition block (``blocks[0]``), or None.
    n_groups, k_sub : int
        Categories of the partition (1 without one) and classes per category.
    n_bins : int
        Grid points of a soft block.
    n_iter : int
        EM iterations ``T`` (one release each); 1 for a hard partition.
    prior_events : list
        Events already on the ledger.
    plan, rng, ledger, rtol
        As :func:`~skdp.generative._marginals.release_marginals`.
    exclude : sequence of int
        Columns left out (the raw continuous columns).
    n_soft : int
        Number of soft blocks at the end of ``blocks``.

    Returns
    -------
    sizes : ndarray of shape (K,)
    probs : ndarray of shape (K, n_columns)
    z : float
        The releases' noise multiplier.
    noise_std : float
    n_iter : int
    """
    m = X.shape[1]
    skip = None if groups is None else 0
    binary, released = column_layout(m, blocks, skip, exclude)
    bound = domain_row_norm(len(binary), [len(c) for c in released])
    stats = clip_rows(centred_statistics(X, binary, released), bound)
    n_classes = n_groups * k_sub
    sensitivity = row_sum_sensitivity(bound, n_classes * stats.shape[1], norm=2, neighbouring=ADD_REMOVE)
    z = calibrate_noise_multiplier(
        lambda z: [*prior_events, GaussianEvent(count=n_iter, neighbouring=ADD_REMOVE, noise_multiplier=z)],
        plan.epsilon,
        plan.delta,
        plan.composition,
        ADD_REMOVE,
        rtol=rtol,
        secure_noise=plan.secure_noise,
    )
    mechanism = GaussianMechanism(sensitivity, z * sensitivity, ADD_REMOVE)
    partition_block = None if groups is None else np.asarray(blocks[0])
    soft = blocks[len(blocks) - n_soft :]
    hard = [np.asarray(b) for b in blocks[: len(blocks) - n_soft]]
    layout = (binary, hard, soft, n_bins)
    if n_iter == 1:
        resp = np.zeros((X.shape[0], n_classes))
        resp[np.arange(X.shape[0]), np.zeros(X.shape[0], dtype=np.intp) if groups is None else groups] = 1.0
    else:
        probs = initial_profiles(n_classes, binary, hard, soft, m, rng)
        if partition_block is not None:
            probs[:, partition_block] = np.repeat(np.eye(n_groups), k_sub, axis=0)
        weights = np.full(n_classes, 1.0 / n_classes)
    for t in range(n_iter):
        if n_iter > 1:
            resp = _responsibilities(X, weights, probs, layout, groups, k_sub)
        noisy = mechanism.release(resp.T @ stats, rng, ledger)
        sizes, probs = marginals_from_release(
            noisy, binary, released, m, mechanism.scale, partition_block, shrink=t == n_iter - 1
        )
        weights = sizes / sizes.sum()
    del resp, stats
    return sizes, probs, z, mechanism.scale, n_iter


def fit_marginals_generator(est, data, plan, rng, ledger, rtol):
    """Alg. 1 with the latent-class generator (:func:`fit_marginals`), continuous columns on their domain.

    The ``generator="marginals"`` fit of
    :class:`~skdp.generative.DPGenerativeMixture` ``est``, whose fitted
    attributes it sets:

    1. With continuous columns or ``n_clusters="auto"``: a noisy count
       of the rows (add/remove: the size is private), the only size the
       rules read.
    2. ``bounds="auto"`` with continuous columns: the private box
       (:func:`release_box`).
    3. The capacity (``k``, ``G``) from the released size, the columns,
       epsilon and delta (:func:`marginals_capacity`), unless declared.
    4. Partition and one Gaussian release (DP-EM: :func:`fit_latent_classes`),
       calibrated to the rest of the budget (relative precision ``rtol``).
    """
    X = data.X
    m = data.n_features
    blocks = est._blocks(m)
    cont = continuous_columns(est.binary, est.categorical, m)
    declared = est._declared_bounds(m)
    k_declared = est._k()
    events, n_tilde, outside = [], None, None
    tree_possible = est.structure == "tree" or (est.structure == "auto" and k_declared is None)
    if cont.size or k_declared is None or tree_possible:
        std = plan.settings.count_noise_std
        if tree_possible and declared is not None and cont.size:
            # The count split by whether the record left the declared box: the
            # same event (a record adds one to one of two counts), and the
            # tree's out-of-domain estimate.
            n_tilde, outside = release_split_size(
                X[:, cont], declared[0][cont], declared[1][cont], std, rng, ledger
            )
        else:
            n_tilde = release_dataset_size(X.shape[0], std, rng, ledger)
        events.append(dataset_size_event(std))
    low, high = np.zeros(m), np.ones(m)
    if cont.size:
        if declared is None:
            columns = X[:, cont]
            box_low, box_high, box_events = release_box(
                lambda fn, *params: fn(columns, *params),
                n_tilde,
                cont.size,
                float(est.epsilon),
                float(est.delta),
                plan.composition,
                plan.secure_noise,
                rng,
                ledger,
            )
            events += box_events
            low[cont], high[cont] = box_low, box_high
        else:
            low[cont], high[cont] = declared[0][cont], declared[1][cont]
    mode = est._partition_mode()
    n_groups = len(blocks[0]) if mode == "categorical" else 1
    k_sub, n_bins, n_iter = marginals_capacity(est, mode, n_tilde, m, blocks, cont.size, n_groups)
    if tree_possible and mode in ("em", "categorical"):
        if (
            est.structure == "tree"
            or cont.size
            or tree_cells(est, m, None) >= classes_cells(est, mode, m, blocks, cont.size, k_sub, n_bins)
        ):
            # structure="tree", or "auto" where the tree's capacity grows
            # with n * eps (continuous columns: its grid G does), or where it
            # can release at least as many cells as the latent classes the
            # capacity rule allows (skdp.generative._tree; the user guide,
            # "Which structure").  Its multiplier is calibrated only once
            # the tree is chosen (the cells of declared columns need no grid).
            z, grid = tree_grid(est, m, cont.size, n_tilde, events, plan, rtol)
            fitted = fit_tree_generator(est, X, low, high, z, grid, n_tilde, rng, ledger, plan)
            for name, value in fitted.items():
                setattr(est, name, value)
            est.bounds_ = (low, high)
            if outside is not None:
                warn_outside_count(outside, plan.settings.count_noise_std)
            return
    indicator = declared is not None and cont.size > 0
    G = max(n_bins, 2)
    mapped, encoded = est._encode(X, low, high, G, indicator)
    _, aug_blocks, _, flag = est._augmented(m, G, indicator)
    if mode in ("categorical", "em"):
        groups = X[:, list(blocks[0])].argmax(axis=1) if mode == "categorical" else None
        sizes, probs, z, noise_std, n_iter = fit_latent_classes(
            encoded,
            aug_blocks,
            groups,
            n_groups,
            k_sub,
            G,
            n_iter,
            events,
            plan,
            rng,
            ledger,
            rtol,
            exclude=cont,
            n_soft=cont.size,
        )
        del groups
        fitted = marginals_attributes(None, probs, sizes, z, noise_std)
    else:
        if mode == "kmeans" and k_sub == 1:
            mode = "none"
        n_iter = 1
        fitted = fit_marginals(
            encoded,
            aug_blocks,
            mode,
            k_sub,
            est._cluster,
            plan.with_settings(n_clusters=k_sub),
            rng,
            ledger,
            rtol,
            prior_events=events,
            exclude=cont,
            cluster_X=mapped,
        )
    del mapped, encoded
    fitted.update(structure_="classes", tree_=None, tree_marginals_=None, tree_tables_=None)
    for name, value in fitted.items():
        setattr(est, name, value)
    est.n_iter_ = n_iter
    est.n_bins_ = n_bins if cont.size else None
    est.bounds_ = (low, high)
    if flag is not None:
        warn_outside_bounds(est.cluster_sizes_, est.marginals_, est.noise_std_, flag)


def classes_cells(est, mode, m, blocks, n_continuous, k_sub, n_bins):
    """Cells the latent classes release: every class's weight and its distribution of every attribute.

    ``k_sub`` classes per group (``n_groups`` categories of the partition
    block with ``mode="categorical"``, else one group), each releasing one
    weight and ``G`` cells per continuous column, 2 per binary column and
    one per category of every other declared block.  Compared with
    :func:`~skdp.generative._tree.tree_cells` by
    ``structure="auto"``: both sizes come from the same noise calculus (a
    cell is released only where the rule deems it estimable), so the model
    that can release more of them holds more of the data's dependence.
    Public quantities only.
    """
    n_groups = len(blocks[0]) if mode == "categorical" else 1
    released = [len(b) for i, b in enumerate(blocks) if not (mode == "categorical" and i == 0)]
    n_binary = m - n_continuous - sum(len(b) for b in blocks)
    per_class = 1 + n_continuous * max(n_bins, 2) + 2 * n_binary + sum(released)
    return k_sub * n_groups * per_class


def marginals_capacity(est, mode, n_tilde, m, blocks, n_continuous, n_groups):
    """``(classes per group, grid points, EM releases)``: declared, or :func:`capacity`'s rule.

    For ``"em"`` and ``"categorical"`` the rule sizes the classes for
    :data:`EM_ITERATIONS` releases; where that leaves one class per
    group (a hard partition) there is one release and the grid is sized
    again for it.  With a categorical partition, the rule's number of
    classes is shared among the ``n_groups`` categories.  Where the rule
    is at its caps (``MAX_CLASSES`` and ``MAX_BINS``, or no grid), the
    spare budget buys more iterations: the largest ``T`` in
    :data:`EXTRA_ITERATIONS` at which the rule still picks the same
    classes and grid.  Public and released quantities only (``est``'s
    hyperparameters and the released size ``n_tilde``).
    """
    k_declared = est._k()
    n_bins = int(est.n_bins) if n_continuous and est.n_bins != "auto" else 0
    em = mode in ("em", "categorical")
    if n_tilde is None:
        return k_declared, n_bins, (em_iterations(k_declared) if em else 1)
    released = [len(b) for i, b in enumerate(blocks) if not (mode == "categorical" and i == 0)]
    n_binary = m - n_continuous - sum(len(b) for b in blocks)
    args = (n_tilde, float(est.epsilon), float(est.delta), n_binary, released, n_continuous)
    k, G = capacity(*args, n_iter=EM_ITERATIONS if em else 1)
    k_sub = max(1, k // n_groups) if k_declared is None else k_declared
    n_iter = em_iterations(k_sub) if em else 1
    if em and k_sub == 1:
        G = capacity(*args, n_iter=1)[1]
    elif em:
        for T in EXTRA_ITERATIONS:
            if capacity(*args, n_iter=T) == (k, G):
                n_iter = T
    return k_sub, (n_bins or G), n_iter


def warn_outside_bounds(sizes, marginals, noise_std, flag):
    """Warn, naming ``bounds``, when the released indicator (column ``flag``) says records left the declared box.

    Post-processing of the accounted release (the released ``sizes``,
    ``marginals`` and the release's public ``noise_std``): the estimated
    number of out-of-domain records against three noise stds of that
    estimate (the sums' noise and half the sizes' per cluster); no data
    value is quoted.
    """
    estimate = float(sizes @ marginals[:, flag])
    noise = 3.0 * noise_std * np.sqrt(1.25 * len(sizes))
    if estimate > noise:
        warnings.warn(
            "Some records of X lie outside the declared bounds and were clipped into them (estimated "
            "from the accounted release, not read off the data): widen bounds to the data's public "
            "domain, or use bounds='auto'.",
            UserWarning,
            stacklevel=_user_stacklevel(),
        )
