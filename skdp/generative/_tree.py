"""Tree-structured marginals (MST, McKenna, Miklau & Sheldon 2021) for the ``"marginals"`` generator.

Every column becomes an *attribute* with a small public set of values: a
continuous column its bin among ``G`` equal bins of its domain (declared,
or the private box), a declared binary column its value, a declared one-hot
block its category.  The model is a tree of 2-way marginals (a Chow-Liu
tree, Chow & Liu 1968): the root's 1-way marginal, then each child drawn
from the conditional of its parent's value in their 2-way table; a
continuous value is drawn uniformly within its bin, in the data's units.

Two ways to choose and measure the tree, both through the privacy core
(:class:`~skdp.privacy.GaussianMechanism`,
:class:`~skdp.privacy.ExponentialMechanism`, one multiplier ``z``
calibrated by :func:`~skdp.privacy.calibrate_noise_multiplier` with the
events already on the ledger):

* **all pairs** (:func:`measure_all_pairs`): the ``P = a (a - 1) / 2``
  2-way tables of the ``a`` attributes, released at once (a record adds one
  count to each table: add/remove L2 sensitivity ``sqrt(P)``); the tree is
  the maximum spanning tree of the released tables' mutual information and
  the 1-way marginals are the tables' margins (post-processing);
* **MST** (:func:`measure_mst`, McKenna et al. 2021, Alg. 1): the ``a``
  1-way marginals (sensitivity ``sqrt(a)``), then ``a - 1`` rounds of the
  exponential mechanism, each picking among the pairs that join two
  components of the forest the one whose counts are furthest, in L1, from
  the product of the released 1-way marginals (a score a record moves by at
  most 1, every other input being released), then the ``a - 1`` selected
  2-way tables (sensitivity ``sqrt(a - 1)``).

Costed by the core, the three parts of MST get equal shares: the Gaussian
releases the same multiplier ``z``, each selection round
``epsilon_r = 1 / (z sqrt(a - 1))`` (``a - 1`` pure-DP rounds cost about
what one Gaussian of multiplier ``z`` costs, ``(a - 1) epsilon_r^2 / 2 =
1 / (2 z^2)`` in zCDP).  A selected table's noise std is then about
``sqrt(3) z_1 sqrt(a - 1)`` (``z_1`` the multiplier of the whole budget on
one release) against ``z_1 sqrt(P)`` for all pairs: all pairs is tighter
while ``P <= 3 (a - 1)``, i.e. ``a <= 6`` (:data:`ALL_PAIRS_MAX_ATTRIBUTES`),
and also chooses its tree from every pair's table at no extra cost.  Under
``secure_noise`` (no exact sampler for the exponential mechanism) every
fit measures all pairs.

Everything after the releases is post-processing (:func:`consistent_tree`):
each released table is projected onto the simplex (Euclidean: small cells
are set to zero, the rest shifted by one constant), the 1-way marginals are
the inverse-variance combination of every released estimate of them, and
each edge's table is fitted to its two 1-way marginals by iterative
proportional fitting, so that sampling down the tree reproduces them.

The grid ``G`` of a continuous column is chosen a priori from the released
size ``n~`` and the public noise std ``s`` of one cell of a 2-way table
(:func:`tree_bins`): ``G = min(sqrt(2 n~ / s), sqrt(n~))`` in
``[2, MAX_BINS]``.  A column's binned distribution errs by the noise of the
``G`` or so cells that hold its mass (total variation about ``G s / n~``;
the projection sets most empty cells to zero) and by the bias of ``G`` bins
(about ``1 / G``), which balance at ``G ~ sqrt(n~ / s)`` (the constant 2
from a sweep, docs/generative.md).  That balance weighs the noise of a cell
only, not its sampling error: a cell of a 2-way table holding a share ``p``
of ``n~`` records errs with variance ``n~ p + s^2``, and as ``s`` falls the
noise rule lets ``G^2`` exceed ``n~``, fewer than one expected record per
cell of a table spread over its cells, where each cell's count is mostly
sampling error (relative error ``sqrt(G^2 / n~) > 1``) and a finer grid
only spreads the same records over more cells whose noise must be paid
for.  The cap ``G^2 <= n~`` binds where ``s < 2`` (large ``n epsilon``
per table).  The grid, hence the resolution of every dependence, grows with
``n`` and ``epsilon``.

A continuous value is placed within its bin by a linear density that keeps
the bin's released mass (:func:`within_bin_offsets`): second-order error in
the bin width for a smooth density, instead of the first-order error of a
uniform placement.
"""

from __future__ import annotations

import math

import numpy as np

from ..privacy import (
    ADD_REMOVE,
    ExponentialMechanism,
    GaussianEvent,
    GaussianMechanism,
    PureDPEvent,
    calibrate_noise_multiplier,
)
from ..privacy.sensitivity import row_sum_sensitivity
from ._marginals import marginals_attributes

__all__ = [
    "tree_cells",
    "tree_grid",
    "fitted_tree_log_likelihood",
    "sample_fitted_tree",
    "ALL_PAIRS_MAX_ATTRIBUTES",
    "IPF_ITERATIONS",
    "attributes",
    "attribute_codes",
    "grid_position",
    "tree_method",
    "tree_plan_events",
    "calibrate_tree",
    "tree_bins",
    "project_simplex",
    "measure_all_pairs",
    "measure_mst",
    "consistent_tree",
    "maximum_spanning_tree",
    "fit_tree",
    "sample_tree",
    "tree_log_likelihood",
    "within_bin_offsets",
    "within_bin_slopes",
]

#: Largest number of attributes measured by all pairs (``P <= 3 (a - 1)``); MST above.
ALL_PAIRS_MAX_ATTRIBUTES = 6
#: Constant of the grid rule ``G = sqrt(BIN_SCALE n~ / s)`` (module docstring).
BIN_SCALE = 2.0
#: Standard deviations above its mean the noise's chi-square may reach before a table counts as dependent.
PRETEST_SDS = 1.0
#: Rounds of iterative proportional fitting of an edge's table to its two 1-way marginals.
IPF_ITERATIONS = 50


def attributes(continuous, binary, blocks):
    """The attributes of a record: ``[(kind, columns), ...]`` ordered by their first column.

    ``kind`` is ``"cont"`` (one column, binned), ``"bin"`` (one declared
    binary column) or ``"block"`` (a declared one-hot block).
    """
    out = [("cont", (int(c),)) for c in continuous] + [("bin", (int(c),)) for c in binary]
    out += [("block", tuple(int(c) for c in b)) for b in blocks]
    return sorted(out, key=lambda a: a[1][0])


def attribute_sizes(attrs, n_bins):
    """Number of values of every attribute: ``G``, 2, or the block's categories."""
    return [n_bins if kind == "cont" else (2 if kind == "bin" else len(cols)) for kind, cols in attrs]


def grid_position(column, low, high, n_bins):
    """A continuous column's values on its grid of ``n_bins`` bins, in ``[0, n_bins]`` (clipped into the domain)."""
    return np.clip((column - low) / (high - low), 0.0, 1.0) * n_bins


def attribute_codes(X, attrs, low, high, n_bins):
    """Each record's value of every attribute, shape ``(n, a)`` (records clipped into the domain)."""
    codes = np.empty((X.shape[0], len(attrs)), dtype=np.intp)
    for i, (kind, cols) in enumerate(attrs):
        if kind == "cont":
            c = cols[0]
            position = grid_position(X[:, c], low[c], high[c], n_bins)
            codes[:, i] = np.minimum(position.astype(np.intp), n_bins - 1)
        elif kind == "bin":
            codes[:, i] = np.clip(X[:, cols[0]], 0.0, 1.0) >= 0.5
        else:
            codes[:, i] = X[:, list(cols)].argmax(axis=1)
    return codes


def tree_method(n_attributes, secure_noise):
    """``"all_pairs"`` for at most :data:`ALL_PAIRS_MAX_ATTRIBUTES` attributes or under secure noise, else ``"mst"``."""
    if n_attributes < 2:
        return "one_way"
    return "all_pairs" if secure_noise or n_attributes <= ALL_PAIRS_MAX_ATTRIBUTES else "mst"


def selection_epsilon(z, n_attributes):
    """Epsilon of one MST selection round at multiplier ``z``: ``1 / (z sqrt(a - 1))`` (module docstring)."""
    return 1.0 / (z * math.sqrt(n_attributes - 1))


def tree_plan_events(z, method, n_attributes):
    """The events of the tree's releases at multiplier ``z`` (add/remove), in the order they happen."""
    gauss = GaussianEvent(count=1, neighbouring=ADD_REMOVE, noise_multiplier=z)
    if method != "mst":
        return [gauss]
    select = PureDPEvent(count=1, neighbouring=ADD_REMOVE, epsilon=selection_epsilon(z, n_attributes))
    return [gauss, *([select] * (n_attributes - 1)), gauss]


def calibrate_tree(prior_events, method, n_attributes, plan, rtol):
    """The multiplier ``z`` that spends the rest of ``(epsilon, delta)`` after ``prior_events``."""
    return calibrate_noise_multiplier(
        lambda z: [*prior_events, *tree_plan_events(z, method, n_attributes)],
        plan.epsilon,
        plan.delta,
        plan.composition,
        ADD_REMOVE,
        rtol=rtol,
        secure_noise=plan.secure_noise,
    )


def cell_noise_std(z, method, n_attributes):
    """Public noise std of one cell of a released 2-way table (1-way with one attribute)."""
    if method == "one_way":
        return z
    n_tables = n_attributes * (n_attributes - 1) // 2 if method == "all_pairs" else n_attributes - 1
    return z * math.sqrt(n_tables)


def tree_bins(n_tilde, noise_std, max_bins):
    """``G = min(round(sqrt(BIN_SCALE n~ / s)), floor(sqrt(n~)))`` in ``[2, max_bins]``; public inputs only.

    The first term balances the bias of ``G`` bins against the noise of the
    cells that hold a column's mass; the second keeps ``G^2 <= n~``, at
    least one expected record per cell of a 2-way table on uniform data,
    beyond which the table's cells are mostly sampling error (module
    docstring).
    """
    n = max(float(n_tilde), 1.0)
    noise_rule = round(math.sqrt(BIN_SCALE * n / noise_std))
    return int(np.clip(min(noise_rule, math.floor(math.sqrt(n))), 2, max_bins))


def project_simplex(v, total=1.0):
    """Euclidean projection of ``v`` onto ``{x >= 0, sum x = total}`` (Duchi et al. 2008)."""
    v = np.asarray(v, dtype=float).ravel()
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - total
    idx = np.arange(1, v.size + 1)
    rho = np.nonzero(u - css / idx > 0)[0][-1]
    return np.maximum(v - css[rho] / (rho + 1.0), 0.0)


def _pair_counts(codes, sizes, i, j):
    return np.bincount(codes[:, i] * sizes[j] + codes[:, j], minlength=sizes[i] * sizes[j]).astype(float)


def _release(vector, n_tables, z, rng, ledger):
    """One Gaussian release of ``n_tables`` concatenated count tables (add/remove L2 sensitivity ``sqrt(n_tables)``).

    A record adds one count to each table: the concatenated one-hot row has
    L2 norm ``sqrt(n_tables)`` (the core's row-sum sensitivity of such rows).
    """
    sensitivity = row_sum_sensitivity(math.sqrt(n_tables), vector.size, norm=2, neighbouring=ADD_REMOVE)
    mechanism = GaussianMechanism(sensitivity, z * sensitivity, ADD_REMOVE)
    return mechanism.release(vector, rng, ledger), mechanism.scale


def measure_all_pairs(codes, sizes, z, rng, ledger):
    """Release every 2-way table at once; returns ``({(i, j): noisy table}, cell noise std)``."""
    a = len(sizes)
    pairs = [(i, j) for i in range(a) for j in range(i + 1, a)]
    counts = [_pair_counts(codes, sizes, i, j) for i, j in pairs]
    noisy, std = _release(np.concatenate(counts), len(pairs), z, rng, ledger)
    del counts
    out, start = {}, 0
    for i, j in pairs:
        width = sizes[i] * sizes[j]
        out[(i, j)] = noisy[start : start + width].reshape(sizes[i], sizes[j])
        start += width
    return out, std


def measure_one_way(codes, sizes, z, rng, ledger):
    """Release every 1-way table at once; returns ``([noisy table], cell noise std)``."""
    counts = np.concatenate(
        [np.bincount(codes[:, i], minlength=m).astype(float) for i, m in enumerate(sizes)]
    )
    noisy, std = _release(counts, len(sizes), z, rng, ledger)
    return list(np.split(noisy, np.cumsum(sizes)[:-1])), std


def measure_mst(codes, sizes, z, rng, ledger):
    """MST (McKenna et al. 2021, Alg. 1): 1-way tables, ``a - 1`` exponential-mechanism rounds, the chosen 2-way tables.

    Returns ``(one_way, one_way_std, {(i, j): noisy table}, two_way_std)``.
    The selection's score of a pair is ``|| C_ij - n^ m^_i m^_j^T ||_1``,
    ``C_ij`` its true counts and ``n^ m^_i`` the released 1-way tables
    projected onto the simplex: a record moves it by at most 1.
    """
    a = len(sizes)
    one_way, std1 = measure_one_way(codes, sizes, z, rng, ledger)
    n_hat = float(np.mean([max(t.sum(), 1.0) for t in one_way]))
    probs = [project_simplex(t, n_hat) / n_hat for t in one_way]
    pairs = [(i, j) for i in range(a) for j in range(i + 1, a)]
    scores = np.array(
        [
            np.abs(_pair_counts(codes, sizes, i, j) - n_hat * np.outer(probs[i], probs[j]).ravel()).sum()
            for i, j in pairs
        ]
    )
    mechanism = ExponentialMechanism(selection_epsilon(z, a), 1.0, ADD_REMOVE)
    component = list(range(a))

    def root(i):
        while component[i] != i:
            component[i] = component[component[i]]
            i = component[i]
        return i

    chosen = []
    for _ in range(a - 1):
        candidates = [p for p, (i, j) in enumerate(pairs) if root(i) != root(j)]
        pick = candidates[mechanism.select(scores[candidates], rng, ledger)]
        i, j = pairs[pick]
        component[root(i)] = root(j)
        chosen.append((i, j))
    del scores
    counts = [_pair_counts(codes, sizes, i, j) for i, j in chosen]
    noisy, std2 = _release(np.concatenate(counts), len(chosen), z, rng, ledger)
    tables, start = {}, 0
    for i, j in chosen:
        width = sizes[i] * sizes[j]
        tables[(i, j)] = noisy[start : start + width].reshape(sizes[i], sizes[j])
        start += width
    return one_way, std1, tables, std2


def _denoise(t, n_hat):
    """The projection of a released table onto the simplex of total ``n^``, as probabilities."""
    return project_simplex(t, n_hat).reshape(t.shape) / n_hat


def _mutual_information(p):
    pi, pj = p.sum(axis=1, keepdims=True), p.sum(axis=0, keepdims=True)
    mask = p > 0
    return float(np.sum(p[mask] * np.log(p[mask] / (pi @ pj)[mask])))


def maximum_spanning_tree(n_attributes, weights):
    """Edges of the maximum spanning tree of ``weights`` (``{(i, j): w}``), by Prim from attribute 0."""
    inside, edges = {0}, []
    while len(inside) < n_attributes:
        best = max(
            ((w, e) for e, w in weights.items() if (e[0] in inside) != (e[1] in inside)),
            key=lambda t: t[0],
        )
        edges.append(best[1])
        inside |= set(best[1])
    return edges


def shrink_to_independence(table, n_hat, row, col, noise_std):
    """A released 2-way table, or the product of its 1-way marginals where the noise explains its dependence.

    ``D = T - n^ row col^T`` is the table's departure from independence plus
    noise of public variance ``s^2`` in each of its ``c`` cells.  Under
    independence ``sum D^2 / s^2`` is about a chi-square with ``c`` degrees
    of freedom (mean ``c``, std ``sqrt(2 c)``); a table below
    ``c + 3 sqrt(2 c)`` is replaced by the product (a pre-test estimator),
    so that the noise of a pair nobody can tell from independent is not
    sampled as dependence; other tables are kept.  Post-processing.
    """
    expected = n_hat * np.outer(row, col)
    cells = table.size
    if np.sum((table - expected) ** 2) / noise_std**2 <= cells + PRETEST_SDS * math.sqrt(2.0 * cells):
        return expected
    return table


def _ipf(table, row, col, n_iter=IPF_ITERATIONS):
    """Iterative proportional fitting of a non-negative ``table`` to the margins ``row`` and ``col``."""
    p = table + 1e-9 / table.size
    for _ in range(n_iter):
        p *= (row / np.maximum(p.sum(axis=1), 1e-300))[:, None]
        p *= (col / np.maximum(p.sum(axis=0), 1e-300))[None, :]
    return p / p.sum()


def consistent_tree(sizes, tables, table_std, one_way=None, one_way_std=None, edges=None):
    """Post-processing of the releases: 1-way marginals, the tree and its consistent edge tables.

    Parameters
    ----------
    sizes : list of int
    tables : dict
        ``{(i, j): noisy counts of shape (sizes[i], sizes[j])}``.
    table_std : float
        Noise std of one cell of a table.
    one_way : list of ndarray or None
        Released 1-way tables (MST), else None.
    one_way_std : float or None
    edges : list of (i, j) or None
        The selected tree (MST); None: the maximum spanning tree of the
        tables' mutual information (all pairs).

    Returns
    -------
    marginals : list of ndarray
        Each attribute's 1-way distribution.
    tree : list of (parent, child)
        Edges in sampling order from attribute 0.
    joint : list of ndarray
        Each edge's 2-way distribution, shape ``(sizes[parent], sizes[child])``.
    """
    a = len(sizes)
    # Every released estimate of a 1-way table with its per-cell variance.
    estimates = [[] for _ in range(a)]
    if one_way is not None:
        for i, t in enumerate(one_way):
            estimates[i].append((t, one_way_std**2))
    for (i, j), t in tables.items():
        estimates[i].append((t.sum(axis=1), sizes[j] * table_std**2))
        estimates[j].append((t.sum(axis=0), sizes[i] * table_std**2))
    # The number of records: inverse-variance mean of every table's total.
    totals = [(t.sum(), t.size * table_std**2) for t in tables.values()]
    if one_way is not None:
        totals += [(t.sum(), t.size * one_way_std**2) for t in one_way]
    w = np.array([1.0 / v for _, v in totals])
    n_hat = max(float(np.dot(w, [s for s, _ in totals]) / w.sum()), 1.0)
    marginals = []
    for est in estimates:
        w = np.array([1.0 / v for _, v in est])
        mean = sum(wi * t for wi, (t, _) in zip(w, est, strict=True)) / w.sum()
        marginals.append(project_simplex(mean, n_hat) / n_hat)
    projected = {
        e: _denoise(t, n_hat)
        for e, t in (
            (e, shrink_to_independence(t, n_hat, marginals[e[0]], marginals[e[1]], table_std))
            for e, t in tables.items()
        )
    }
    if edges is None:
        edges = (
            maximum_spanning_tree(a, {e: _mutual_information(p) for e, p in projected.items()})
            if a > 1
            else []
        )
    # Orient the edges away from attribute 0 (breadth first).
    adjacent = {i: [] for i in range(a)}
    for i, j in edges:
        adjacent[i].append(j)
        adjacent[j].append(i)
    order, seen, tree = [0], {0}, []
    for parent in order:
        for child in sorted(adjacent[parent]):
            if child not in seen:
                seen.add(child)
                order.append(child)
                tree.append((parent, child))
    joint = []
    for parent, child in tree:
        p = projected[(parent, child)] if (parent, child) in projected else projected[(child, parent)].T
        joint.append(_ipf(p, marginals[parent], marginals[child]))
    return marginals, tree, joint


def fit_tree(codes, sizes, method, z, rng, ledger):
    """Measure (``method``) and post-process; returns ``(marginals, tree, joint, cell noise std)``."""
    if method == "one_way":
        one_way, std = measure_one_way(codes, sizes, z, rng, ledger)
        marginals, tree, joint = consistent_tree(sizes, {}, 1.0, one_way, std, edges=[])
        return marginals, tree, joint, std
    if method == "all_pairs":
        tables, std = measure_all_pairs(codes, sizes, z, rng, ledger)
        return (*consistent_tree(sizes, tables, std), std)
    one_way, std1, tables, std2 = measure_mst(codes, sizes, z, rng, ledger)
    return (*consistent_tree(sizes, tables, std2, one_way, std1, edges=list(tables)), std2)


def _draw(probs, rng):
    """One index per row of ``probs`` (rows sum to one)."""
    cum = np.cumsum(probs, axis=1)
    return np.minimum((rng.random((len(probs), 1)) > cum).sum(axis=1), probs.shape[1] - 1)


def _conditional(joint):
    rows = joint.sum(axis=1, keepdims=True)
    return np.where(rows > 0, joint / np.where(rows > 0, rows, 1.0), joint.sum(axis=0, keepdims=True))


def systematic_counts(n, probs, rng):
    """Counts of ``n`` draws from ``probs`` by systematic sampling: ``E[count_j] = n p_j``, ``|count_j - n p_j| < 1``.

    The draws are the points ``u + k`` (``k = 0 .. n - 1``, ``u`` uniform on
    ``[0, 1)``) on the cumulative scale ``n * cumsum(p)`` (Madow 1949).
    """
    cum = n * np.cumsum(probs) / np.sum(probs)
    edges = np.floor(np.concatenate([[0.0], cum]) + rng.random())
    edges[-1] = n + edges[0]
    return np.diff(edges).astype(np.intp)


def _balanced(n, probs, rng):
    """``n`` values with :func:`systematic_counts`, in a uniformly random order."""
    return rng.permutation(np.repeat(np.arange(len(probs)), systematic_counts(n, probs, rng)))


def sample_tree(marginals, tree, joint, n_samples, rng, balanced=True):
    """Attribute values of ``n_samples`` records drawn down the tree, shape ``(n_samples, a)``.

    ``balanced=False``: i.i.d. records (the root by its marginal, each child
    by its parent's row of the conditional).  ``balanced=True``: the same
    tree, sampled with less Monte Carlo noise: the root's values in
    systematic-sampling counts, and each child's values, within each group
    of records sharing its parent's value, in systematic counts of that
    row of the conditional, shuffled within the group (so that siblings stay
    independent given their parent).  Every record's distribution is the
    model's; the sample's 1-way and edge tables are within one record of
    their expectations instead of ``sqrt(n)``.
    """
    a = len(marginals)
    codes = np.zeros((n_samples, a), dtype=np.intp)
    root = marginals[0] / marginals[0].sum()
    if balanced:
        codes[:, 0] = _balanced(n_samples, root, rng)
    else:
        codes[:, 0] = rng.choice(len(root), size=n_samples, p=root)
    for (parent, child), table in zip(tree, joint, strict=True):
        cond = _conditional(table)
        if not balanced:
            codes[:, child] = _draw(cond[codes[:, parent]], rng)
            continue
        for value in np.unique(codes[:, parent]):
            rows = np.flatnonzero(codes[:, parent] == value)
            codes[rows, child] = _balanced(rows.size, cond[value], rng)
    return codes


def within_bin_slopes(codes, probs):
    """The linear density of each record's position within its bin: ``(a, b)``, its values at the bin's two ends.

    A bin ``j`` of a column's ``G`` equal bins holds the released mass
    ``p_j``; uniform within the bin (a histogram) errs at first order in the
    bin width wherever the density slopes.  Here the density within the bin
    is linear, its ends proportional to the means of neighbouring bins'
    masses, ``f_L = (p_{j-1} + p_j) / 2`` and ``f_R = (p_j + p_{j+1}) / 2``
    (at the domain's ends the missing neighbour is ``p_j``: nothing lies
    outside), scaled so that the bin keeps its mass: on the offset ``t`` in
    ``[0, 1)``, ``g(t) = a + (b - a) t`` with ``a = 2 f_L / (f_L + f_R)``,
    ``b = 2 - a`` (both in ``[0, 2]``).  For a smooth density ``f`` the ends
    estimate ``f`` at the bin's edges to second order, so the placement
    within bins errs at second order in the bin width (the idea of the
    frequency polygon, Scott 1985), while the released tables are reproduced
    exactly at the grid (a frequency polygon moves mass across bins).
    Post-processing of the released 1-way distribution ``probs``.
    """
    padded = np.concatenate([[probs[0]], probs, [probs[-1]]])
    left = 0.5 * (padded[:-2] + padded[1:-1])[codes]
    right = 0.5 * (padded[1:-1] + padded[2:])[codes]
    total = left + right
    a = np.where(total > 0, 2.0 * left / np.where(total > 0, total, 1.0), 1.0)
    return a, 2.0 - a


def within_bin_offsets(codes, probs, rng):
    """Each record's offset ``t`` in ``[0, 1)`` within its bin, drawn from :func:`within_bin_slopes`' density.

    Inverse CDF of ``g(t) = a + (b - a) t``: ``a t + (b - a) t^2 / 2 = U``,
    ``t = 2 U / (a + sqrt(a^2 + 2 (b - a) U))`` (the root in ``[0, 1]``,
    written without dividing by ``b - a``); one uniform per record.
    """
    a, b = within_bin_slopes(codes, probs)
    u = rng.random(len(codes))
    root = a + np.sqrt(np.maximum(a * a + 2.0 * (b - a) * u, 0.0))
    return np.clip(2.0 * u / np.maximum(root, 1e-300), 0.0, 1.0 - 1e-12)


def decode_tree(codes, attrs, n_features, low, high, n_bins, rng, marginals):
    """Records in the data's units: a continuous value within its bin, a binary value, a one-hot block.

    A continuous value's offset within its bin follows
    :func:`within_bin_offsets` on its attribute's 1-way distribution
    (``marginals``).
    """
    out = np.zeros((len(codes), n_features))
    for i, (kind, cols) in enumerate(attrs):
        if kind == "cont":
            c = cols[0]
            t = within_bin_offsets(codes[:, i], np.asarray(marginals[i], dtype=float), rng)
            u = (codes[:, i] + t) / n_bins
            out[:, c] = low[c] + u * (high[c] - low[c])
        elif kind == "bin":
            out[:, cols[0]] = codes[:, i]
        else:
            out[np.arange(len(codes)), np.asarray(cols)[codes[:, i]]] = 1.0
    return out


def tree_log_likelihood(codes, attrs, marginals, tree, joint, n_bins, offsets, floor=1e-12):
    """``log f(x)`` of every record under the tree; a continuous column's density on its domain mapped to ``[0, 1]``.

    ``offsets`` (shape ``(n, a)``, the records' positions ``t`` within their
    bins) add the log of :func:`within_bin_slopes`' density, the one
    ``sample`` draws from.
    """
    out = np.log(np.maximum(marginals[0][codes[:, 0]], floor))
    for (parent, child), table in zip(tree, joint, strict=True):
        out += np.log(np.maximum(_conditional(table)[codes[:, parent], codes[:, child]], floor))
    for i, (kind, _) in enumerate(attrs):
        if kind != "cont":
            continue
        out += math.log(n_bins)
        a, b = within_bin_slopes(codes[:, i], np.asarray(marginals[i], dtype=float))
        out += np.log(np.maximum(a + (b - a) * offsets[:, i], floor))
    return out


# --------------------------------------------------------------------------
# The estimator's tree fit (DPGenerativeMixture, generator="marginals").
# --------------------------------------------------------------------------


def release_split_size(columns, low, high, noise_std, rng, ledger):
    """The number of rows, split into those inside and outside the declared box, by the count's mechanism.

    A record adds one to exactly one of the two counts (add/remove L2
    sensitivity 1): the core's dataset-size mechanism and event
    (:func:`skdp.privacy.dpsgd.dataset_size_mechanism`) hold for the pair as
    for the count.  Returns ``(n~, outside~)``: their sum and the second.
    """
    from ..privacy.dpsgd import dataset_size_mechanism

    outside = np.any((columns < low) | (columns > high), axis=1)
    counts = np.array([outside.size - outside.sum(), outside.sum()], dtype=float)
    del outside
    noisy = dataset_size_mechanism(noise_std).release(counts, rng, ledger)
    return float(noisy.sum()), float(noisy[1])


def warn_outside_count(outside, noise_std):
    """Warn, naming ``bounds``, when the released count of out-of-box records exceeds three noise stds.

    Post-processing of the accounted split count (:func:`release_split_size`); no data value is quoted.
    """
    import warnings

    from .._user_warnings import _user_stacklevel

    if outside > 3.0 * noise_std:
        warnings.warn(
            "Some records of X lie outside the declared bounds and were clipped into them (estimated "
            "from the accounted release, not read off the data): widen bounds to the data's public "
            "domain, or use bounds='auto'.",
            UserWarning,
            stacklevel=_user_stacklevel(),
        )


def tree_attributes(est, n_features):
    """The attributes of ``est``'s records (:func:`attributes`) from its declarations (public)."""
    from ._marginals import binary_columns, continuous_columns, declared_blocks

    cont = continuous_columns(est.binary, est.categorical, n_features)
    binary = binary_columns(est.binary, est.categorical, n_features)
    return attributes(cont, binary, declared_blocks(est.categorical, n_features))


def tree_cells(est, n_features, n_bins):
    """The most 2-way cells a spanning tree of ``est``'s attributes releases (public sizes only).

    With edge weights ``s_i s_j`` the maximum spanning tree is the star on
    the largest attribute: ``s_max (sum(s) - s_max)``.  ``n_bins`` is the
    continuous columns' grid (unused without them).
    """
    sizes = attribute_sizes(tree_attributes(est, n_features), n_bins)
    largest = max(sizes)
    return largest * (sum(sizes) - largest)


def tree_grid(est, n_features, n_continuous, n_tilde, prior_events, plan, rtol):
    """``(z, G)``: the tree's multiplier and the continuous columns' grid.

    ``z`` is calibrated with the events already on the ledger (the count,
    the private box); the grid ``G`` comes from the released size and the
    public cell noise std (:func:`tree_bins`, unless ``n_bins`` is
    declared; None without continuous columns).  Public quantities only.
    """
    from ._domain import MAX_BINS

    n_attributes = len(tree_attributes(est, n_features))
    method = tree_method(n_attributes, plan.secure_noise)
    z = calibrate_tree(prior_events, method, n_attributes, plan, rtol)
    n_bins = None
    if n_continuous:
        std = cell_noise_std(z, method, n_attributes)
        n_bins = int(est.n_bins) if est.n_bins != "auto" else tree_bins(n_tilde, std, MAX_BINS)
    return z, n_bins


def fit_tree_generator(est, X, low, high, z, n_bins, n_tilde, rng, ledger, plan):
    """The tree's fit of :class:`~skdp.generative.DPGenerativeMixture` ``est``; returns its fitted attributes.

    ``z`` and the grid ``n_bins`` come from :func:`tree_grid`; then the
    releases of :func:`fit_tree`.
    """
    attrs = tree_attributes(est, X.shape[1])
    method = tree_method(len(attrs), plan.secure_noise)
    sizes = attribute_sizes(attrs, n_bins)
    codes = attribute_codes(X, attrs, low, high, n_bins)
    marginals, tree, joint, noise_std = fit_tree(codes, sizes, method, z, rng, ledger)
    del codes
    size = max(float(n_tilde), 1.0)
    # One class of the released size: the marginals generator's attributes
    # with no class marginals, then the tree's own.
    return {
        **marginals_attributes(None, None, np.array([size]), z, noise_std),
        "n_iter_": 1,
        "n_bins_": n_bins,
        "structure_": "tree",
        "tree_": np.asarray(tree, dtype=np.intp).reshape(-1, 2),
        "tree_marginals_": marginals,
        "tree_tables_": joint,
    }


def fitted_tree_log_likelihood(est, X):
    """``log f(x)`` of each record under a fitted estimator's released tree (:func:`tree_log_likelihood`).

    Parameters
    ----------
    est : DPGenerativeMixture
        Fitted with ``structure_ == "tree"``.
    X : ndarray of shape (n_samples, n_features)
        Validated records in the data's units.

    Returns
    -------
    log_f : ndarray of shape (n_samples,)
    """
    attrs = tree_attributes(est, est.n_features_in_)
    low, high = est.bounds_
    codes = attribute_codes(X, attrs, low, high, est.n_bins_)
    offsets = np.zeros(codes.shape)
    for i, (kind, cols) in enumerate(attrs):
        if kind == "cont":
            c = cols[0]
            position = grid_position(X[:, c], low[c], high[c], est.n_bins_)
            offsets[:, i] = np.clip(position - codes[:, i], 0.0, 1.0)
    return tree_log_likelihood(
        codes, attrs, est.tree_marginals_, est.tree_, est.tree_tables_, est.n_bins_, offsets
    )


def sample_fitted_tree(est, n_samples, rng, balanced):
    """``n_samples`` records in the data's units from a fitted estimator's tree (:func:`sample_tree`, :func:`decode_tree`).

    Post-processing of the released tables, drawn with ``rng`` (the sampling
    stream, never a fit's).
    """
    codes = sample_tree(est.tree_marginals_, est.tree_, est.tree_tables_, n_samples, rng, balanced)
    attrs = tree_attributes(est, est.n_features_in_)
    return decode_tree(codes, attrs, est.n_features_in_, *est.bounds_, est.n_bins_, rng, est.tree_marginals_)
