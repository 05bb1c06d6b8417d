"""Tree-structured marginals of DPGenerativeMixture (skdp.generative._tree): releases, accounting, sampling."""

import math

import numpy as np
import pytest

from skdp.generative import DPGenerativeMixture
from skdp.generative._tree import (
    ALL_PAIRS_MAX_ATTRIBUTES,
    measure_all_pairs,
    measure_mst,
    project_simplex,
    sample_tree,
    selection_epsilon,
    systematic_counts,
    tree_method,
    tree_plan_events,
)
from skdp.privacy import ADD_REMOVE, GaussianEvent, PrivacyLedger, PureDPEvent, compose
from skdp.privacy.accountants.conversions import gaussian_delta


def _ledger():
    return PrivacyLedger(neighbouring=ADD_REMOVE)


def chain_data(n=4000, d=3, seed=0):
    """Continuous columns on [0, 10], each a noisy copy of the previous one (a chain)."""
    rng = np.random.default_rng(seed)
    cols = [rng.uniform(0, 10, n)]
    for _ in range(d - 1):
        cols.append(np.clip(cols[-1] + rng.normal(0, 0.5, n), 0, 10))
    return np.column_stack(cols)


def test_all_pairs_release_noise_has_the_calibrated_std_statistically():
    """Every cell of the P tables gets N(0, (z sqrt(P))^2): a record adds one count to each of P tables.

    The std ``z sqrt(P)`` is derived here (P = 6 pairs of 4 attributes of 5
    values: 150 cells per release, 40 releases, 6000 draws: the estimate is
    within 2% of the truth), so the bounds [0.9, 1.1] fail for halved noise.
    """
    rng = np.random.default_rng(0)
    sizes = [5, 5, 5, 5]
    codes = rng.integers(0, 5, size=(300, 4))
    z, P = 1.7, 6
    noise = []
    for _ in range(40):
        ledger = _ledger()
        tables, std = measure_all_pairs(codes, sizes, z, rng, ledger)
        assert ledger.events == [GaussianEvent(count=1, neighbouring=ADD_REMOVE, noise_multiplier=z)]
        assert std == pytest.approx(z * math.sqrt(P))
        for (i, j), t in tables.items():
            true = np.zeros((5, 5))
            np.add.at(true, (codes[:, i], codes[:, j]), 1.0)
            noise.append((t - true).ravel())
    noise = np.concatenate(noise)
    assert abs(noise.mean()) < 0.1 * z * math.sqrt(P)
    assert 0.9 < noise.std() / (z * math.sqrt(P)) < 1.1


def test_mst_releases_selection_and_noise_statistically():
    """MST: 1-way tables at std z sqrt(a), a - 1 exponential-mechanism rounds, chosen 2-way tables at z sqrt(a - 1)."""
    rng = np.random.default_rng(1)
    a, m = 8, 4
    sizes = [m] * a
    codes = rng.integers(0, m, size=(500, a))
    # A strong chain 0 - 1 - 2: the selection must find it at small noise.
    codes[:, 1] = codes[:, 0]
    codes[:, 2] = codes[:, 1]
    z = 0.05
    one_noise, two_noise = [], []
    for _ in range(20):
        ledger = _ledger()
        one_way, std1, tables, std2 = measure_mst(codes, sizes, z, rng, ledger)
        select = PureDPEvent(count=1, neighbouring=ADD_REMOVE, epsilon=selection_epsilon(z, a))
        gauss = GaussianEvent(count=1, neighbouring=ADD_REMOVE, noise_multiplier=z)
        assert ledger.events == [gauss, *[select] * (a - 1), gauss]
        assert std1 == pytest.approx(z * math.sqrt(a)) and std2 == pytest.approx(z * math.sqrt(a - 1))
        assert len(tables) == a - 1
        # Columns 0, 1, 2 are copies: two of the tree's edges join them (any two of the three pairs).
        assert sum(set(e) <= {0, 1, 2} for e in tables) == 2
        for i, t in enumerate(one_way):
            one_noise.append(t - np.bincount(codes[:, i], minlength=m))
        for (i, j), t in tables.items():
            true = np.zeros((m, m))
            np.add.at(true, (codes[:, i], codes[:, j]), 1.0)
            two_noise.append((t - true).ravel())
    # 640 and 2240 draws: within 6% and 3%; halved noise fails both.
    assert 0.85 < np.concatenate(one_noise).std() / (z * math.sqrt(a)) < 1.15
    assert 0.9 < np.concatenate(two_noise).std() / (z * math.sqrt(a - 1)) < 1.1


def test_method_rule_and_plan_events():
    assert tree_method(ALL_PAIRS_MAX_ATTRIBUTES, False) == "all_pairs"
    assert tree_method(ALL_PAIRS_MAX_ATTRIBUTES + 1, False) == "mst"
    assert tree_method(30, True) == "all_pairs"  # no exact sampler for the exponential mechanism
    # The rule: all pairs is tighter (a selected table's std) while P <= 3 (a - 1).
    for a in range(2, 12):
        assert (a * (a - 1) / 2 <= 3 * (a - 1)) == (a <= ALL_PAIRS_MAX_ATTRIBUTES)
    events = tree_plan_events(2.0, "mst", 5)
    assert len(events) == 1 + 4 + 1 and events[1].epsilon == pytest.approx(1 / (2.0 * 2.0))


@pytest.mark.parametrize("d", [3, 8])
def test_tree_fit_ledger_is_the_plan_and_the_budget(d):
    X = chain_data(2000, d)
    eps, delta = 1.5, 1e-5
    gm = DPGenerativeMixture(epsilon=eps, delta=delta, bounds=(0.0, 10.0), random_state=0).fit(X)
    assert gm.structure_ == "tree" and gm.tree_.shape == (d - 1, 2)
    count, *rest = gm.privacy_ledger_.events
    z = gm.noise_multiplier_
    method = "all_pairs" if d <= ALL_PAIRS_MAX_ATTRIBUTES else "mst"
    planned = tree_plan_events(z, method, d)
    assert [type(e) for e in rest] == [type(e) for e in planned]
    for got, want in zip(rest, planned, strict=True):
        assert got.neighbouring == ADD_REMOVE and got.count == want.count
        for name in ("noise_multiplier", "epsilon"):
            if hasattr(want, name):
                assert getattr(got, name) == pytest.approx(getattr(want, name), rel=1e-12)
    n_tables = d * (d - 1) // 2 if method == "all_pairs" else d - 1
    assert gm.noise_std_ == pytest.approx(z * math.sqrt(n_tables))
    assert compose(gm.privacy_ledger_.events, delta, "pld").epsilon == pytest.approx(eps, rel=1e-2)
    assert gm.privacy_spent_.epsilon <= eps + 1e-9
    if method == "all_pairs":
        # Independent check: two Gaussian releases compose to one of mu^2 = 1/z_c^2 + 1/z^2.
        mu2 = 1 / count.noise_multiplier**2 + 1 / z**2
        assert gaussian_delta(1 / math.sqrt(mu2), eps) <= delta * (1 + 1e-3)
        assert gaussian_delta(1 / math.sqrt(mu2 * 1.02), eps) > delta  # calibrated, not loose


def test_tree_plan_is_public():
    """Neighbouring-free check: the events do not depend on the rows (a dry run on constant rows)."""
    X = chain_data(1500, 8)
    a, b = (
        DPGenerativeMixture(epsilon=2.0, bounds=(0.0, 10.0), random_state=3).fit(data)
        for data in (X, np.zeros_like(X))
    )
    assert a.privacy_ledger_.events == b.privacy_ledger_.events


def test_tree_learns_the_chain_and_samples_in_the_data_units():
    X = chain_data(20000, 4)
    gm = DPGenerativeMixture(epsilon=8.0, bounds=(0.0, 10.0), structure="tree", random_state=0).fit(X)
    S = gm.sample(20000, random_state=0)
    assert S.min() >= 0.0 and S.max() <= 10.0
    for j in range(3):
        assert np.corrcoef(S[:, j], S[:, j + 1])[0, 1] > 0.9
    assert np.abs(S.mean(axis=0) - X.mean(axis=0)).max() < 0.3
    np.testing.assert_array_equal(gm.sample(7, random_state=4), gm.sample(7, random_state=4))
    iid = gm.sample(20000, random_state=0, balanced=False)
    assert np.corrcoef(iid[:, 0], iid[:, 1])[0, 1] > 0.9
    assert gm.predict(X[:5]).tolist() == [0] * 5
    assert np.all(np.isfinite(gm.score_samples(X[:50])))
    assert gm.transform(X[:3]).shape == (3, 1)


def labelled_bits(n=6000, seed=0):
    """4 bits whose rates depend on a 3-category label, then the label one-hot (columns 4-6)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    bits = (rng.random((n, 4)) < (0.1 + 0.4 * y)[:, None]).astype(float)
    return np.hstack([bits, np.eye(3)[y]])


def test_tree_with_declared_blocks_and_binary_columns():
    Z = labelled_bits()
    gm = DPGenerativeMixture(
        categorical=[[4, 5, 6]], binary=[0, 1, 2, 3], epsilon=4.0, structure="tree", random_state=0
    ).fit(Z)
    assert gm.structure_ == "tree" and gm.n_bins_ is None
    S = gm.sample(6000, random_state=0)
    assert set(np.unique(S)) <= {0.0, 1.0}
    np.testing.assert_array_equal(S[:, 4:].sum(axis=1), 1.0)
    label = S[:, 4:].argmax(axis=1)
    # The block's dependence on the bits is kept by the tree (every bit hangs near the label).
    assert S[label == 2, :4].mean() - S[label == 0, :4].mean() > 0.5


def test_secure_noise_measures_all_pairs_with_discrete_gaussians():
    from skdp.privacy import DiscreteGaussianEvent

    X = chain_data(1000, 8)
    gm = DPGenerativeMixture(epsilon=2.0, bounds=(0.0, 10.0), secure_noise=True, random_state=0).fit(X)
    assert all(isinstance(e, DiscreteGaussianEvent) for e in gm.privacy_ledger_.events)
    assert len(gm.privacy_ledger_.events) == 2 and gm.privacy_spent_.epsilon <= 2.0 + 1e-9


def test_structure_is_validated():
    X = chain_data(300, 3)
    with pytest.raises(ValueError, match="structure"):
        DPGenerativeMixture(generator="vae", structure="tree").fit(X)
    with pytest.raises(ValueError, match="structure"):
        DPGenerativeMixture(partition="kmeans", structure="tree", n_clusters=2).fit(X)
    gm = DPGenerativeMixture(structure="classes", bounds=(0.0, 10.0), random_state=0).fit(X)
    assert gm.structure_ == "classes" and gm.tree_ is None


def test_projection_and_systematic_counts():
    rng = np.random.default_rng(0)
    for _ in range(20):
        v = rng.normal(0, 3, 12)
        p = project_simplex(v, 5.0)
        assert p.min() >= 0 and p.sum() == pytest.approx(5.0)
        # Optimality (KKT): the projection is v shifted by one constant on its support.
        shift = (v - p)[p > 0]
        assert np.ptp(shift) < 1e-9 and np.all(v[p == 0] <= shift[0] + 1e-9)
    probs = np.array([0.05, 0.5, 0.2, 0.25])
    draws = np.array([systematic_counts(37, probs, rng) for _ in range(4000)])
    assert np.all(draws.sum(axis=1) == 37) and np.all(np.abs(draws - 37 * probs) < 1)
    np.testing.assert_allclose(draws.mean(axis=0), 37 * probs, atol=0.05)
    # Balanced sampling keeps each record's distribution: the sample's tables match the model.
    marg = [np.array([0.3, 0.7]), np.array([0.5, 0.5])]
    joint = [np.array([[0.25, 0.05], [0.25, 0.45]])]
    codes = sample_tree(marg, [(0, 1)], joint, 10000, rng)
    table = np.bincount(codes[:, 0] * 2 + codes[:, 1], minlength=4).reshape(2, 2) / 10000
    np.testing.assert_allclose(table, joint[0], atol=2e-3)


def test_the_fit_releases_its_tables_at_the_recorded_noise(monkeypatch):
    """Through the estimator: every released cell's noise has std ``noise_std_`` (halved noise fails).

    The Gaussian mechanism of the tree's module is wrapped to keep each
    (true, released) pair; 12 fits of all pairs of 4 columns on a 5-bin grid
    give 12 * 6 * 25 = 1800 cells, whose noise std is within 5% of the truth.
    """
    import skdp.generative._tree as tree_module

    seen = []

    class Recording(tree_module.GaussianMechanism):
        def release(self, value, rng, ledger):
            out = super().release(value, rng, ledger)
            seen.append((np.asarray(value, dtype=float), np.asarray(out), self.scale))
            return out

    monkeypatch.setattr(tree_module, "GaussianMechanism", Recording)
    X = chain_data(500, 4)
    stds = []
    for seed in range(12):
        gm = DPGenerativeMixture(epsilon=1.0, bounds=(0.0, 10.0), n_bins=5, random_state=seed).fit(X)
        stds.append(gm.noise_std_)
    assert len(seen) == 12 and all(v.size == 6 * 25 for v, _, _ in seen)
    np.testing.assert_allclose([s for _, _, s in seen], stds)
    noise = np.concatenate([(out - v) / s for v, out, s in seen])
    assert 0.9 < noise.std() < 1.1 and abs(noise.mean()) < 0.1
    # The recorded std is the calibrated multiplier times sqrt(P), P = 6 tables.
    assert stds[0] == pytest.approx(gm.noise_multiplier_ * math.sqrt(6))


def test_auto_structure_fits_the_model_that_releases_more_cells():
    # structure="auto": on declared binary columns and blocks, the tree where a
    # spanning tree of the attributes can release at least as many cells as the
    # latent classes the capacity rule allows, else the classes; with continuous
    # columns the tree (public sizes only: the rule never reads a value).
    from skdp.generative._latent_em import classes_cells, marginals_capacity
    from skdp.generative._tree import attribute_sizes, tree_attributes

    n = 6000
    Z = labelled_bits(n)
    # 4 bits and a 3-category label: a tree holds at most 3 * (8 + 3 - 3) = 24
    # cells (the star on the label), one class per label 3 * (1 + 8) = 27.
    blocks_model = DPGenerativeMixture(
        categorical=[[4, 5, 6]], binary=[0, 1, 2, 3], epsilon=4.0, random_state=0
    )
    sizes = attribute_sizes(tree_attributes(blocks_model, 7), None)
    assert max(sizes) * (sum(sizes) - max(sizes)) == 24
    mode = blocks_model._partition_mode()
    k_sub = marginals_capacity(blocks_model, mode, float(n), 7, blocks_model._blocks(7), 0, 3)[0]
    assert classes_cells(blocks_model, mode, 7, blocks_model._blocks(7), 0, k_sub, 0) >= 27 > 24
    assert blocks_model.fit(Z).structure_ == "classes"
    # Continuous columns: the tree, even at a budget where the classes would hold more cells.
    X = chain_data(20000, 4)
    assert DPGenerativeMixture(epsilon=1e3, bounds=(0.0, 10.0), random_state=0).fit(X).structure_ == "tree"


def test_within_bin_density_keeps_the_mass_and_slopes_toward_the_heavier_neighbour():
    """The linear density within a bin: ends at the means of neighbouring masses, integral 1, drawn exactly.

    Bin 1 of masses (.1, .2, .3, .4): ends f_L = .15, f_R = .25 (bin 0: f_L = p_0 = .1), so
    a = 2 f_L / (f_L + f_R) = .75 and b = 1.25; a uniform column gives a = b = 1
    everywhere (uniform within bins).  Offsets drawn from g(t) = a + (b - a) t have
    mean a / 2 + (b - a) / 3 = 0.5417 (uniform: 0.5) and CDF a t + (b - a) t^2 / 2.
    """
    from skdp.generative._tree import within_bin_offsets, within_bin_slopes

    probs = np.array([0.1, 0.2, 0.3, 0.4])
    a, b = within_bin_slopes(np.array([0, 1, 2, 3]), probs)
    np.testing.assert_allclose(a, [2 * 0.1 / 0.25, 0.75, 2 * 0.25 / 0.6, 2 * 0.35 / 0.75])
    np.testing.assert_allclose(a + b, 2.0)  # each bin keeps its mass: the integral of g is (a + b) / 2
    a_u, b_u = within_bin_slopes(np.arange(5), np.full(5, 0.2))
    np.testing.assert_allclose([a_u, b_u], 1.0)
    n = 200_000
    t = within_bin_offsets(np.ones(n, dtype=np.intp), probs, np.random.default_rng(0))
    assert t.min() >= 0.0 and t.max() < 1.0
    sd = math.sqrt(1.0 / 12.0 / n)  # at most about the uniform's std of the mean
    assert abs(t.mean() - (0.375 + 0.5 / 3.0)) < 5 * sd
    assert abs(t.mean() - 0.5) > 20 * sd  # not uniform within the bin
    for q in (0.25, 0.5, 0.75):
        cdf = 0.75 * q + 0.5 * q * q / 2.0
        assert abs(np.mean(t <= q) - cdf) < 5 * math.sqrt(cdf * (1 - cdf) / n)


def test_tree_samples_keep_their_bins_and_score_samples_is_the_sampled_density():
    """Decoded values fall in the bins drawn (the tables are reproduced at the grid); the density integrates to 1."""
    from skdp.generative._tree import attribute_codes, attributes, decode_tree

    attrs = attributes([0, 1], [], [])
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 6, size=(5000, 2))
    marginals = [np.array([0.05, 0.1, 0.4, 0.3, 0.1, 0.05])] * 2
    low, high = np.array([-1.0, 0.0]), np.array([1.0, 10.0])
    X = decode_tree(codes, attrs, 2, low, high, 6, rng, marginals)
    np.testing.assert_array_equal(attribute_codes(X, attrs, low, high, 6), codes)
    gm = DPGenerativeMixture(epsilon=3.0, bounds=(0.0, 10.0), structure="tree", random_state=0)
    gm.fit(chain_data(2000, 2))
    grid = (np.arange(400) + 0.5) / 400 * 10.0
    pts = np.column_stack([np.repeat(grid, 400), np.tile(grid, 400)])
    # score_samples is per unit of the domain mapped onto [0, 1]: its mean over the square is the integral.
    assert abs(np.exp(gm.score_samples(pts)).mean() - 1.0) < 0.01


def test_tree_sample_and_score_samples_use_the_within_bin_density():
    """``sample`` places values within bins by that density, and ``score_samples`` scores the same density.

    On a skewed column (mass falling to the right) the mean offset within bins is
    ``sum_j p_j (a_j / 2 + (b_j - a_j) / 3)`` (the sample's is within 5 of its
    standard errors), far from the uniform's 0.5; two points of one bin differ in
    log-density by ``log(g(t1) / g(t2))``.
    """
    from skdp.generative._tree import within_bin_slopes

    rng = np.random.default_rng(1)
    X = np.column_stack([10 * rng.beta(1.0, 4.0, 20000), rng.uniform(0, 10, 20000)])
    gm = DPGenerativeMixture(epsilon=8.0, bounds=(0.0, 10.0), structure="tree", random_state=0).fit(X)
    G, p = gm.n_bins_, np.asarray(gm.tree_marginals_[0])
    a, b = within_bin_slopes(np.arange(G), p)
    expected = float(np.sum(p * (a / 2 + (b - a) / 3)))
    n = 200_000
    u = gm.sample(n, random_state=0)[:, 0] / 10.0 * G
    t = u - np.floor(u)
    sd = math.sqrt(1.0 / 12.0 / n)
    assert abs(expected - 0.5) > 10 * sd
    assert abs(t.mean() - expected) < 5 * sd
    j = 1
    pts = np.array([[(j + 0.1) * 10.0 / G, 5.0], [(j + 0.9) * 10.0 / G, 5.0]])
    ga, gb = a[j] + (b[j] - a[j]) * 0.1, a[j] + (b[j] - a[j]) * 0.9
    s = gm.score_samples(pts)
    np.testing.assert_allclose(s[0] - s[1], math.log(ga / gb), rtol=1e-9, atol=1e-9)
    assert abs(math.log(ga / gb)) > 0.05


def test_tree_grid_balances_noise_and_keeps_one_expected_record_per_cell():
    """``G = min(round(sqrt(2 n~ / s)), floor(sqrt(n~)))`` in ``[2, 32]``: the noise rule, capped at ``G^2 <= n~``.

    With ``s = 8`` the noise rule binds (``sqrt(2 * 400 / 8) = 10 < 20``); with
    ``s = 0.5`` (``sqrt(1600) = 40``) the cap ``G^2 <= 400`` gives 20, and on 112
    records at ``s = 0.5`` (noise rule 21) it gives 10; the cap binds only below ``s = 2``.
    """
    from skdp.generative._tree import tree_bins

    assert tree_bins(400.0, 8.0, 32) == 10
    assert tree_bins(400.0, 0.5, 32) == 20
    assert tree_bins(112.0, 0.5, 32) == 10
    assert tree_bins(112.0, 3.75, 32) == 8
    assert tree_bins(1e6, 0.5, 32) == 32 and tree_bins(3.0, 0.1, 32) == 2
    for n in (50.0, 300.0, 5000.0):
        for s in (0.3, 1.0, 2.5, 10.0):
            g = tree_bins(n, s, 1000)
            assert g * g <= n and (g == round(math.sqrt(2 * n / s)) or s < 2.0)
