"""DPGenerativeMixture (Acs et al. 2018, Alg. 1) and its cluster-sampled accounting."""

import math
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
from _release_walk import release_violations
from conftest import gaussian_blobs
from scipy import integrate, stats
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from skdp.base import AFTER_FIT_COUNTER, PRIVACY_OWNER
from skdp.cluster import DPKernelKMeans
from skdp.generative import DPGenerativeMixture
from skdp.generative._mixture import cluster_schedule, clustering_events_as_add_remove, sgd_plan_event
from skdp.privacy import (
    ADD_REMOVE,
    REPLACE_ONE,
    GaussianEvent,
    PureDPEvent,
    SubsampledGaussianEvent,
    compose,
)
from skdp.privacy.accountants import _autodp
from skdp.privacy.accountants.cluster_sampling import (
    ClusterSampledGaussianEvent,
    cluster_sampled_gaussian_rdp,
    poisson_subsampled_gaussian_rdp,
)
from skdp.privacy.accountants.rdp import RDPAccountant

torch = pytest.importorskip("torch")

INT_ORDERS = np.array([2.0, 3.0, 4.0, 8.0, 16.0, 64.0])


def binary_data(n=160, m=12, seed=0):
    """Two well-separated binary prototypes with 10% bit flips."""
    rng = np.random.default_rng(seed)
    proto = np.r_[np.ones(m // 2), np.zeros(m - m // 2)]
    rows = np.where(np.arange(n)[:, None] % 2 == 0, proto, 1 - proto)
    flips = rng.random((n, m)) < 0.1
    return np.abs(rows - flips).astype(float)


def small(**kw):
    params = dict(
        n_clusters=2,
        # The DP-SGD path (the default generator is "marginals" since issue 22).
        generator="vae",
        hidden_units=8,
        n_components=20,
        kmeans_iter=2,
        batch_size=16,
        n_epochs=2,
        epsilon=3.0,
        random_state=0,
    )
    params.update(kw)
    return DPGenerativeMixture(**params)


# --------------------------------------------------------------------------
# The cluster-sampled event (skdp.privacy.accountants.cluster_sampling).
# --------------------------------------------------------------------------


@pytest.mark.parametrize("sigma,q", [(0.8, 0.05), (1.5, 0.3), (4.0, 0.9)])
def test_subsampled_rdp_matches_autodp_at_integer_orders(sigma, q):
    ours = poisson_subsampled_gaussian_rdp(sigma, q, INT_ORDERS)
    ref = _autodp.subsampled_gaussian_rdp(sigma, q, True, INT_ORDERS)
    np.testing.assert_allclose(ours, ref, rtol=1e-9)


def test_fractional_orders_are_upper_bounds():
    frac = np.array([1.5, 2.5, 3.75, 10.5])
    ours = poisson_subsampled_gaussian_rdp(1.2, 0.1, frac)
    ref = _autodp.subsampled_gaussian_rdp(1.2, 0.1, True, frac)
    assert np.all(ours >= ref * (1 - 1e-9))
    np.testing.assert_allclose(ours, poisson_subsampled_gaussian_rdp(1.2, 0.1, np.ceil(frac)))


def test_selection_probability_one_is_the_subsampled_gaussian():
    np.testing.assert_allclose(
        cluster_sampled_gaussian_rdp(1.3, 0.2, 1.0, INT_ORDERS),
        poisson_subsampled_gaussian_rdp(1.3, 0.2, INT_ORDERS),
    )


@pytest.mark.parametrize("p", [0.05, 0.3, 0.9])
def test_unsampled_cluster_step_closed_form(p):
    # q = 1: exp((a-1) eps) = 1 - p + p exp(a (a-1) / (2 z^2)).
    z = 1.7
    a = INT_ORDERS
    expected = np.log(1 - p + p * np.exp(a * (a - 1) / (2 * z**2))) / (a - 1)
    np.testing.assert_allclose(cluster_sampled_gaussian_rdp(z, 1.0, p, a), expected, rtol=1e-10)


@pytest.mark.parametrize("alpha", [2.0, 3.0])
def test_mixture_rdp_equals_numerical_divergence(alpha):
    """Renyi divergence of the joint (s, Y) by quadrature, both directions (add and remove)."""
    z, q, p = 1.0, 0.3, 0.25
    g0 = stats.norm(0.0, z).logpdf
    g1 = stats.norm(1.0, z).logpdf

    def mixed(x):
        return np.logaddexp(np.log1p(-q) + g0(x), np.log(q) + g1(x))

    def renyi_moment(P, Q):
        return integrate.quad(lambda x: np.exp(alpha * P(x) + (1 - alpha) * Q(x)), -15, 15, limit=200)[0]

    # (s, Y): with prob. 1 - p the other cluster moved (identical outputs).
    joint = [(1 - p) + p * renyi_moment(mixed, g0), (1 - p) + p * renyi_moment(g0, mixed)]
    numeric = max(math.log(m) / (alpha - 1) for m in joint)
    ours = cluster_sampled_gaussian_rdp(z, q, p, [alpha])[0]
    assert ours == pytest.approx(numeric, rel=1e-6)


def test_paper_bound_underestimates_revealed_cluster():
    """Theorem 4 accounts rate p*q; the step's true cost (the mixture) is larger."""
    z, p, q = 1.0, 0.1, 1.0
    ours = cluster_sampled_gaussian_rdp(z, q, p, INT_ORDERS)
    paper = poisson_subsampled_gaussian_rdp(z, p * q, INT_ORDERS)
    assert np.all(ours > paper)
    # ... and never above the conservative "subsampled Gaussian at rate q".
    assert np.all(ours <= poisson_subsampled_gaussian_rdp(z, q, INT_ORDERS))


def test_event_is_worst_cluster_and_validates():
    ev = ClusterSampledGaussianEvent(
        count=3,
        neighbouring=ADD_REMOVE,
        noise_multiplier=1.1,
        sampling_rates=(0.2, 0.5),
        selection_probabilities=(0.7, 0.3),
    )
    curves = [cluster_sampled_gaussian_rdp(1.1, q, p, INT_ORDERS) for q, p in [(0.2, 0.7), (0.5, 0.3)]]
    np.testing.assert_allclose(RDPAccountant.curve(ev, INT_ORDERS), np.max(curves, axis=0))
    with pytest.raises(ValueError, match="add_remove"):
        ClusterSampledGaussianEvent(count=1, neighbouring=REPLACE_ONE)
    with pytest.raises(ValueError, match="equal length"):
        ClusterSampledGaussianEvent(
            count=1, neighbouring=ADD_REMOVE, sampling_rates=(0.1,), selection_probabilities=(0.5, 0.5)
        )
    with pytest.raises(ValueError, match="converted"):
        ev.to_relation(REPLACE_ONE)


# --------------------------------------------------------------------------
# Plan helpers.
# --------------------------------------------------------------------------


def test_clustering_events_conversion():
    events = [GaussianEvent(count=2, neighbouring=REPLACE_ONE, noise_multiplier=3.0)]
    (out,) = clustering_events_as_add_remove(events)
    assert out == GaussianEvent(count=2, neighbouring=ADD_REMOVE, noise_multiplier=3.0)
    with pytest.raises(TypeError, match="PureDPEvent"):
        clustering_events_as_add_remove([PureDPEvent(count=1, neighbouring=REPLACE_ONE, epsilon=1.0)])


def test_cluster_schedule():
    probs, rates, n_steps = cluster_schedule([10.0, 30.0, -5.0], batch_size=20, n_epochs=3)
    np.testing.assert_allclose(probs, np.array([10, 30, 1]) / 41)
    np.testing.assert_allclose(rates, [1.0, 20 / 30, 1.0])
    assert n_steps == 3 * round(41 / 20)


def test_plan_event_combines_dpnorm_like_the_engine():
    from skdp.nn import dpsgd_step_event

    ev = sgd_plan_event(2.0, 5.0, [0.3], [1.0], count=1)
    ref = dpsgd_step_event(2.0, 0.3, 10.0)
    assert ev.noise_multiplier == pytest.approx(ref.noise_multiplier)
    np.testing.assert_allclose(
        RDPAccountant.curve(ev, INT_ORDERS),
        poisson_subsampled_gaussian_rdp(ref.noise_multiplier, 0.3, INT_ORDERS),
    )


# --------------------------------------------------------------------------
# The estimator.
# --------------------------------------------------------------------------


def test_import_does_not_import_torch():
    code = "import sys, skdp, skdp.generative; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_tiny_end_to_end_fit_is_fast_and_shapes():
    X = binary_data()
    # CPU time, not wall time: CI machines may be shared.
    start = time.process_time()
    gm = small().fit(X)
    assert time.process_time() - start < 20
    S, c = gm.sample(7, return_clusters=True, random_state=0)
    assert S.shape == (7, X.shape[1]) and S.dtype == np.float64
    assert set(np.unique(S)) <= {0.0, 1.0}
    assert c.shape == (7,) and c.dtype.kind == "i" and np.all((c >= 0) & (c < 2))
    assert np.all(gm.sample(4, cluster=1, return_clusters=True, random_state=0)[1] == 1)
    assert gm.score_samples(X[:5]).shape == (5,) and np.all(np.isfinite(gm.score_samples(X[:5])))
    assert gm.predict(X).shape == (len(X),)
    assert gm.transform(X[:3]).shape == (3, 2)
    assert gm.weights_.sum() == pytest.approx(1.0)
    assert gm.cluster_steps_.sum() == gm.n_steps_


def test_cluster_then_train_accounting_is_the_composition_of_its_parts():
    X = binary_data()
    gm = small(epsilon=2.0).fit(X)
    # The parts, computed independently: a DPKernelKMeans fitted alone with
    # the clustering's share, and the SGD plan from the released schedule.
    km = DPKernelKMeans(
        n_clusters=2, epsilon=2.0 * 0.2, delta=1e-5, gamma=1 / X.shape[1], n_components=20, max_iter=2
    ).fit(X)
    km_events = [
        GaussianEvent(count=e.count, neighbouring=ADD_REMOVE, noise_multiplier=e.noise_multiplier)
        for e in km.privacy_ledger_.events
    ]
    assert compose(km.privacy_ledger_.events, 1e-5).epsilon == pytest.approx(0.4, rel=1e-3)
    sgd = ClusterSampledGaussianEvent(
        count=gm.n_steps_,
        neighbouring=ADD_REMOVE,
        noise_multiplier=(gm.noise_multiplier_**-2 + gm.clip_noise_multiplier_**-2) ** -0.5,
        sampling_rates=tuple(gm.sampling_rates_),
        selection_probabilities=tuple(gm.weights_),
    )
    total = compose([*km_events, sgd], 1e-5).epsilon
    # The schedule was planned from the released sizes: the claim is the
    # staged filter's (skdp.privacy.staged), valid for every outcome of the
    # sizes; the steps' RDP at the filter's order fills what the clustering
    # left, and this outcome's own composition is below the claim.
    from skdp.privacy.staged import staged_filter

    staged = staged_filter(km_events, 2.0, 1e-5, ADD_REMOVE)
    assert staged.rdp([sgd]) == pytest.approx(staged.remaining, rel=1e-3)
    assert staged.rdp([sgd]) <= staged.remaining * (1 + 1e-9)
    assert gm.privacy_spent_.epsilon == pytest.approx(2.0, rel=1e-9)
    assert total <= 2.0
    # The test bites: half the noise, or the clustering left out, changes the total.
    half = ClusterSampledGaussianEvent(
        count=sgd.count,
        neighbouring=ADD_REMOVE,
        noise_multiplier=sgd.noise_multiplier / 2,
        sampling_rates=sgd.sampling_rates,
        selection_probabilities=sgd.selection_probabilities,
    )
    assert compose([*km_events, half], 1e-5).epsilon > 2.5
    assert compose([sgd], 1e-5).epsilon < total - 0.02
    # The fit's ledger holds one SGD event whose count is the number of steps taken.
    (sgd_logged,) = [e for e in gm.privacy_ledger_.events if isinstance(e, ClusterSampledGaussianEvent)]
    assert sgd_logged.count == gm.n_steps_ == gm.cluster_steps_.sum()


def test_every_step_adds_noise_at_the_calibrated_multiplier(monkeypatch):
    from skdp.privacy import TorchGaussianMechanism

    calls = []
    original = TorchGaussianMechanism.release

    def spy(self, value, generator, ledger):
        calls.append((self.noise_multiplier, self.sensitivity))
        return original(self, value, generator, ledger)

    monkeypatch.setattr(TorchGaussianMechanism, "release", spy)
    gm = small(clip_norm=0.5, n_clusters=1).fit(binary_data())
    # One release per step: the gradients of every parameter together.
    assert len(calls) == gm.n_steps_
    assert all(z == pytest.approx(gm.noise_multiplier_) and c == 0.5 for z, c in calls)
    # A fixed bound releases no histogram: plain subsampled Gaussian with k = 1.
    assert gm.clip_noise_multiplier_ is None
    ref = SubsampledGaussianEvent(
        count=gm.n_steps_,
        neighbouring=ADD_REMOVE,
        noise_multiplier=gm.noise_multiplier_,
        sampling_rate=gm.sampling_rates_[0],
    )
    # The steps were planned from a noisy count (n_samples="auto"): the
    # staged filter calibrated them (skdp.privacy.staged) and the fit reports
    # its claim; the steps' RDP at the filter's order is what the count left.
    from skdp.privacy.staged import staged_filter

    count = gm.privacy_ledger_.events[0]
    staged = staged_filter([count], gm.epsilon, 1e-5, ADD_REMOVE)
    assert staged.rdp([ref]) == pytest.approx(staged.remaining, rel=1e-3)
    assert compose([count, ref], 1e-5).epsilon <= gm.privacy_spent_.epsilon == gm.epsilon


def test_single_model_with_declared_size_spends_nothing_but_the_steps():
    gm = small(n_clusters=1, n_samples=160).fit(binary_data())
    assert gm.clusterer_ is None
    # One cluster picked with probability 1: plain Poisson-subsampled steps.
    (steps,) = gm.privacy_ledger_.events
    assert steps == SubsampledGaussianEvent(
        count=gm.n_steps_,
        neighbouring=ADD_REMOVE,
        noise_multiplier=steps.noise_multiplier,
        sampling_rate=16 / 160,
    )
    assert gm.sampling_rates_[0] == pytest.approx(16 / 160)
    assert gm.n_steps_ == 2 * round(160 / 16)


def test_reproducible_with_random_state():
    X = binary_data()
    a, b = small().fit(X), small().fit(X)
    for ma, mb in zip(a.generators_, b.generators_, strict=True):
        for pa, pb in zip(ma.parameters(), mb.parameters(), strict=True):
            assert torch.equal(pa, pb)
    np.testing.assert_array_equal(a.sample(20, random_state=1), b.sample(20, random_state=1))
    np.testing.assert_array_equal(a.score_samples(X), b.score_samples(X))
    c = small(random_state=1).fit(X)
    assert not np.array_equal(a.score_samples(X), c.score_samples(X))


def test_rbm_generator():
    X = binary_data()
    gm = small(generator="rbm", n_chains=10).fit(X)
    S = gm.sample(6, random_state=0)
    assert S.shape == (6, X.shape[1]) and set(np.unique(S)) <= {0.0, 1.0}
    scores = gm.score_samples(X[:4])
    assert scores.shape == (4,) and np.all(np.isfinite(scores))
    assert gm.privacy_spent_.epsilon == pytest.approx(3.0, rel=2e-3)


def test_gaussian_likelihood_continuous_records():
    X = np.random.default_rng(0).random((80, 6))
    gm = small(likelihood="gaussian", n_clusters=1).fit(X)
    S = gm.sample(10, random_state=0)
    assert np.all((S >= 0) & (S <= 1)) and len(np.unique(S)) > 2


def test_pipeline_and_grid_search():
    X = binary_data(n=120)
    pipe = make_pipeline(FunctionTransformer(lambda Z: Z), small(n_epochs=1))
    assert pipe.fit(X).predict(X).shape == (120,)
    grid = GridSearchCV(small(n_epochs=1, n_clusters=1), {"learning_rate": [1e-3, 1e-2]}, cv=2).fit(X)
    assert grid.best_params_["learning_rate"] in (1e-3, 1e-2)


def test_bad_input():
    X = binary_data(n=40)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        small().fit(bad)
    # Fewer rows than clusters is not refused (the size is private under
    # add/remove): the fit goes through (tests/test_composite_faults_single.py).
    assert small(n_clusters=4).fit(X[:3]).privacy_spent_.epsilon <= 3.0 + 1e-9
    with pytest.raises(ValueError, match="generator"):
        small(generator="gan").fit(X)
    gm = small(n_clusters=1).fit(X)
    with pytest.raises(ValueError, match="cluster"):
        gm.sample(2, cluster=3)
    with pytest.raises(ValueError, match="n_samples"):
        gm.sample(0)
    with pytest.raises(ValueError, match="features"):
        gm.predict(X[:, :3])


@pytest.mark.slow
@pytest.mark.parametrize("generator", ["vae", "rbm"])
def test_generators_learn_two_prototypes(generator):
    """At a large budget the samples sit near the data's two prototypes (uniform bits: ~4.4 flips)."""
    X = binary_data(n=400)
    proto = np.r_[np.ones(6), np.zeros(6)]
    gm = DPGenerativeMixture(
        n_clusters=1,
        generator=generator,
        hidden_units=16,
        n_chains=50,
        batch_size=32,
        n_epochs=30,
        learning_rate=1e-2,
        epsilon=100.0,
        random_state=0,
    ).fit(X)
    S = gm.sample(500, random_state=0)
    flips = np.minimum(np.abs(S - proto).sum(1), np.abs(S - (1 - proto)).sum(1))
    assert flips.mean() < 2.5


def test_vae_clips_by_ghost_norms_exactly_like_per_example_gradients():
    torch = pytest.importorskip("torch")
    from skdp.generative._vae import VAE, elbo
    from skdp.nn import GhostClipping, VmapPerExampleGradients, find_unsupported_layer

    torch.manual_seed(0)
    module = VAE(12, 16, 2, "bernoulli").to(torch.float64)
    x = torch.bernoulli(torch.full((9, 12), 0.4, dtype=torch.float64))
    eps = torch.randn(9, 2, dtype=torch.float64)
    assert find_unsupported_layer(module) is None

    # Fixed reparametrisation noise, row i for record i, so both paths see the same loss.
    def loss(m, xi, ei):
        return -elbo(m, xi, ei).mean()

    def batch_loss(m, xb, eb):
        return -elbo(m, xb, eb)

    norms = VmapPerExampleGradients().clipped_sum(module, loss, (x, eps), lambda n: 1.0).norms
    C = float(norms.median())
    ref = VmapPerExampleGradients().clipped_sum(module, loss, (x, eps), lambda n: C)
    got = GhostClipping(batch_loss).clipped_sum(module, loss, (x, eps), lambda n: C)
    assert float((got.norms - ref.norms).abs().max() / ref.norms.max()) < 1e-10
    for name, g in ref.grads.items():
        assert float((got.grads[name] - g).norm() / g.norm()) < 1e-8, name


def test_vae_mixture_trains_in_ghost_mode_and_rbm_in_vmap_mode():
    pytest.importorskip("torch")
    X = np.random.default_rng(0).binomial(1, 0.3, size=(80, 6)).astype(float)
    small = dict(hidden_units=8, n_epochs=1, batch_size=16, random_state=0)
    vae = DPGenerativeMixture(n_clusters=1, generator="vae", **small).fit(X)
    rbm = DPGenerativeMixture(n_clusters=1, generator="rbm", n_chains=10, **small).fit(X)
    assert (vae.clipping_mode_, rbm.clipping_mode_) == ("ghost", "vmap")


def test_engine_noise_other_than_the_plan_is_refused(monkeypatch):
    """The step check compares with the plan, not with the engine: a 5x quieter DPNorm histogram is caught."""
    import skdp.nn

    original = skdp.nn.DPNormClipping

    def quiet(clip_max, bins, noise_multiplier):
        return original(clip_max, bins, noise_multiplier / 5)

    monkeypatch.setattr(skdp.nn, "DPNormClipping", quiet)
    with pytest.raises(RuntimeError, match="does not match the privacy plan"):
        small(n_clusters=1).fit(binary_data())


def test_bad_device_is_a_value_error():
    with pytest.raises(ValueError, match="device='gpu0'"):
        small(n_clusters=1, device="gpu0").fit(binary_data())


# --------------------------------------------------------------------------
# What a fitted model holds (issue 18): no seed, no generator, no per-row
# array, and a plan that reads no exact N.
# --------------------------------------------------------------------------

#: Prime: no hyperparameter of these fits has this length.
PRIME_ROWS = 97


def test_walker_is_not_vacuous():
    X = binary_data(n=PRIME_ROWS)
    gm = small().fit(X)
    gm.clusterer_.random_state = 12345
    gm.kept_ = [
        np.zeros((PRIME_ROWS, 2)),
        {"g": torch.Generator()},
        np.random.default_rng(0).bit_generator.state,
    ]
    problems = "\n".join(release_violations(gm, None, n_rows=PRIME_ROWS))
    for needle in ("random_state=12345", "one entry per training row", "Generator", "generator state"):
        assert needle in problems


@pytest.mark.parametrize("random_state", [None, 0, "RandomState", "Generator"])
def test_clusterer_keeps_no_seed(random_state):
    """The nested DPKernelKMeans was built with an int seed drawn from the noise stream."""
    rs = {"RandomState": np.random.RandomState(0), "Generator": np.random.default_rng(0)}.get(
        random_state, random_state
    )
    gm = small(random_state=rs).fit(binary_data())
    assert gm.clusterer_.get_params()["random_state"] is None
    # The clustering still spent its budget from the parent's noise.
    assert any(isinstance(e, GaussianEvent) for e in gm.privacy_ledger_.events)


def test_no_labels_of_training_rows_are_stored():
    X = binary_data()
    gm = small().fit(X)
    assert not hasattr(gm, "labels_")
    assert not hasattr(gm.clusterer_, "labels_") and not hasattr(gm.clusterer_, "inertia_")


@pytest.mark.parametrize(
    "params",
    [{}, {"n_clusters": 1}, {"n_clusters": 1, "n_samples": 50}, {"generator": "rbm", "n_chains": 10}],
)
@pytest.mark.parametrize("random_state", [None, 0, "Generator"])
def test_pickled_model_holds_no_generator_seed_or_row(params, random_state):
    import pickle

    rs = np.random.default_rng(0) if random_state == "Generator" else random_state
    X = binary_data(n=PRIME_ROWS)
    gm = small(random_state=rs, **params).fit(X)
    held = set(vars(gm)) - set(gm.get_params(deep=False)) - {"_sklearn_version"}
    assert held <= type(gm)._release_surface(), held - type(gm)._release_surface()
    restored = pickle.loads(pickle.dumps(gm))
    user_seed = random_state if isinstance(random_state, int) else None
    assert release_violations(restored, user_seed, n_rows=PRIME_ROWS) == []
    # In memory the user's own Generator stays the parameter; nothing else holds one.
    in_memory = [
        p
        for p in release_violations(gm, user_seed, n_rows=PRIME_ROWS, in_memory=True)
        if not p.startswith("model.random_state")
    ]
    assert in_memory == []


def test_released_attributes_are_exactly_what_a_fit_holds():
    for params in ({}, {"n_clusters": 1}):
        gm = small(**params).fit(binary_data())
        fitted = {k for k in vars(gm) if k.endswith("_") and not k.startswith("__")} | {"privacy_ledger_"}
        # sample() takes its own random_state, so no after-fit draw counter.
        # Only a model fitted inside a composite holds its owner (PRIVACY_OWNER).
        assert fitted == set(type(gm)._release_surface()) - {
            "feature_names_in_",
            AFTER_FIT_COUNTER,
            PRIVACY_OWNER,
        }


def test_single_model_plan_is_the_same_on_neighbouring_datasets():
    """Add/remove neighbours (N and N+1 rows): with a declared size the plan reads no N."""
    rows = binary_data(n=PRIME_ROWS + 1)
    fits = [small(n_clusters=1, n_samples=100, random_state=3).fit(data) for data in (rows, rows[:-1])]
    a, b = fits
    assert a.privacy_ledger_.events == b.privacy_ledger_.events
    assert a.privacy_spent_ == b.privacy_spent_
    assert a.noise_multiplier_ == b.noise_multiplier_ and a.n_steps_ == b.n_steps_
    for name in ("sampling_rates_", "cluster_sizes_", "weights_", "cluster_steps_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.sampling_rates_[0] == pytest.approx(16 / 100)


def test_single_model_auto_size_is_a_noisy_accounted_count():
    from skdp.privacy.dpsgd import count_noise_multiplier

    n = PRIME_ROWS
    gm = small(n_clusters=1).fit(binary_data(n=n))
    count, sgd = gm.privacy_ledger_.events
    assert count == GaussianEvent(
        count=1, neighbouring=ADD_REMOVE, noise_multiplier=count_noise_multiplier(3.0, 1e-5)
    )
    # The plan is post-processing of the noisy count, never the exact N.
    assert gm.cluster_sizes_[0] != n
    assert gm.sampling_rates_[0] == pytest.approx(min(1.0, 16 / gm.cluster_sizes_[0]))
    assert gm.n_steps_ == 2 * max(1, round(gm.cluster_sizes_[0] / 16))
    assert sgd.sampling_rate == gm.sampling_rates_[0] and isinstance(sgd, SubsampledGaussianEvent)
    # The count is the first stage of the staged plan the gradient noise is
    # calibrated to (skdp.privacy.staged): its RDP at the filter's order is
    # taken off what the steps may spend, and the fit reports the claim.
    from skdp.privacy.staged import staged_filter

    staged = staged_filter([count], 3.0, 1e-5, ADD_REMOVE)
    assert staged.first_rdp > 0
    assert staged.rdp([sgd]) == pytest.approx(staged.remaining, rel=1e-3)
    assert gm.privacy_spent_.epsilon == 3.0
    assert compose([count, sgd], 1e-5).epsilon <= gm.privacy_spent_.epsilon
    assert compose([sgd], 1e-5).epsilon < compose([count, sgd], 1e-5).epsilon


def test_fit_predict_returns_labels_under_the_released_model():
    X = binary_data()
    gm = small()
    labels = gm.fit_predict(X)
    assert labels.shape == (len(X),) and set(np.unique(labels)) <= {0, 1}
    np.testing.assert_array_equal(labels, gm.predict(X))
    assert not hasattr(gm, "labels_")
    np.testing.assert_array_equal(small(n_clusters=1).fit_predict(X), np.zeros(len(X)))


@pytest.mark.parametrize("params", [{}, {"n_clusters": 1}, {"generator": "rbm", "n_chains": 10}])
def test_int_random_state_reproduces_the_fit_exactly(params):
    X = binary_data()
    a, b = small(**params).fit(X), small(**params).fit(X)
    assert a.privacy_ledger_.events == b.privacy_ledger_.events
    assert a.noise_multiplier_ == b.noise_multiplier_
    np.testing.assert_array_equal(a.cluster_sizes_, b.cluster_sizes_)
    np.testing.assert_array_equal(a.cluster_steps_, b.cluster_steps_)
    for ma, mb in zip(a.generators_, b.generators_, strict=True):
        for ta, tb in zip(ma.state_dict().values(), mb.state_dict().values(), strict=True):
            assert torch.equal(ta, tb)
    if a.clusterer_ is not None:
        np.testing.assert_array_equal(a.clusterer_.cluster_centers_, b.clusterer_.cluster_centers_)


def test_fit_neither_seeds_nor_reads_torchs_global_generator():
    X = binary_data()
    torch.manual_seed(1)
    a = small(n_clusters=1).fit(X)
    after_a = torch.randn(4)
    torch.manual_seed(2)
    b = small(n_clusters=1).fit(X)
    after_b = torch.randn(4)
    # Not read: the same seed gives the same model whatever the global state.
    for ta, tb in zip(
        a.generators_[0].state_dict().values(), b.generators_[0].state_dict().values(), strict=True
    ):
        assert torch.equal(ta, tb)
    # Not seeded: what the global generator draws next still depends on its own seed.
    assert not torch.equal(after_a, after_b)


def test_sample_with_an_int_never_replays_the_fit_stream():
    from skdp.generative._mixture import _sample_generator

    fit_stream = np.random.default_rng(0).integers(2**62, size=8)
    assert not np.any(np.isin(_sample_generator(0).integers(2**62, size=8), fit_stream))
    np.testing.assert_array_equal(_sample_generator(0).random(4), _sample_generator(0).random(4))
    gm = small(n_clusters=1).fit(binary_data())
    np.testing.assert_array_equal(gm.sample(5, random_state=4), gm.sample(5, random_state=4))
    # None: fresh entropy each call.
    assert not np.array_equal(gm.sample(50), gm.sample(50))


# ------------------------------------------------------------- parameters ---


def test_no_parameter_defaults_to_the_string_deprecated():
    params = DPGenerativeMixture().get_params()
    assert "deprecated" not in {v for v in params.values() if isinstance(v, str)}
    assert not {"clipping", "clip_max", "clip_bins", "clip_noise_ratio"} & set(params)


# --------------------------------------------------------------------------
# composition=
# --------------------------------------------------------------------------


def test_default_pld_accounts_several_clusters_by_rdp():
    X = binary_data()
    gm = small(epsilon=2.0).fit(X)
    assert gm.composition == "pld" == gm.privacy_ledger_.composition
    events = gm.privacy_ledger_.events
    assert any(isinstance(e, ClusterSampledGaussianEvent) for e in events)
    # PLD has no rule for the cluster-sampled steps: the history is composed
    # by RDP, below the staged plan's claim, which the fit reports.
    assert compose(events, 1e-5, "rdp").epsilon <= gm.privacy_spent_.epsilon == 2.0
    # Hence the same fit as composition="rdp".
    rdp = small(epsilon=2.0, composition="rdp").fit(X)
    assert rdp.noise_multiplier_ == gm.noise_multiplier_


def test_single_model_steps_are_accounted_by_pld():
    X = binary_data()
    pld = small(n_clusters=1, n_samples=160, n_epochs=10).fit(X)
    rdp = small(n_clusters=1, n_samples=160, n_epochs=10, composition="rdp").fit(X)
    (steps,) = pld.privacy_ledger_.events
    assert pld.privacy_spent_.epsilon == pytest.approx(compose([steps], 1e-5, "pld").epsilon, rel=1e-12)
    assert pld.privacy_spent_.epsilon == pytest.approx(3.0, rel=2e-3) and pld.privacy_spent_.epsilon <= 3.0
    # PLD's tighter accounting buys less noise for the same budget.
    assert pld.noise_multiplier_ < rdp.noise_multiplier_ * 0.99
    assert compose([steps], 1e-5, "rdp").epsilon > 3.0


@pytest.mark.parametrize("n_clusters", [1, 2])
@pytest.mark.parametrize("composition", ["zcdp", "moments"])
def test_unsupported_composition_is_refused_before_the_reservation(n_clusters, composition):
    from skdp.privacy import BudgetAccountant

    budget = BudgetAccountant(epsilon=100.0, neighbouring=ADD_REMOVE)
    with pytest.raises(ValueError, match="composition"):
        small(n_clusters=n_clusters, composition=composition, accountant=budget).fit(binary_data())
    assert budget.history == [] and budget.reservations == []


# --------------------------------------------------------------------------
# generator="marginals": the DP latent-class model (issue 22).
# --------------------------------------------------------------------------


def labelled_binary(n=200, m=6, n_classes=3, seed=0):
    """Binary columns whose means depend on a class, followed by the class as a one-hot block."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % n_classes
    means = np.linspace(0.1, 0.9, n_classes)[y][:, None] * np.ones(m)
    X = (rng.random((n, m)) < means).astype(float)
    return np.hstack([X, np.eye(n_classes)[y]]), y, list(range(m, m + n_classes))


def test_marginals_noise_has_the_calibrated_std_statistically():
    """One cluster, 400 columns with exactly half ones: (p_j - 1/2) * n~ is the noise of column j.

    The std is ``z * C`` with ``C = sqrt(1 + d/4)``, the norm of a centred
    record (derived here, not read from the model); 400 draws estimate it to
    about 3.5%, so the bounds [0.8, 1.2] fail for halved noise.
    """
    d, n = 400, 1000
    X = np.zeros((n, d))
    X[: n // 2] = 1.0
    gm = DPGenerativeMixture(n_clusters=1, binary=list(range(d)), epsilon=1.0, random_state=0).fit(X)
    (event,) = gm.privacy_ledger_.events
    assert event == GaussianEvent(count=1, neighbouring=ADD_REMOVE, noise_multiplier=gm.noise_multiplier_)
    expected = gm.noise_multiplier_ * math.sqrt(1 + d / 4)
    assert gm.noise_std_ == pytest.approx(expected)
    noise = (gm.marginals_[0] - 0.5) * gm.cluster_sizes_[0]
    assert 0.8 < noise.std() / expected < 1.2
    assert abs(gm.cluster_sizes_[0] - n) < 6 * expected


def test_marginals_ledger_is_the_plan_and_within_budget():
    from skdp.privacy.accountants.conversions import gaussian_delta

    Z, _, block = labelled_binary()
    eps, delta = 1.5, 1e-5
    gm = DPGenerativeMixture(
        categorical=[block], binary=list(range(6)), n_clusters=1, epsilon=eps, delta=delta, random_state=0
    ).fit(Z)
    # The partition by the declared block is free: one Gaussian release.
    assert gm.privacy_ledger_.events == [
        GaussianEvent(count=1, neighbouring=ADD_REMOVE, noise_multiplier=gm.noise_multiplier_)
    ]
    # Independent check of the cost: the analytic Gaussian's delta at eps.
    assert gaussian_delta(gm.noise_multiplier_, eps) <= delta * (1 + 1e-6)
    assert gaussian_delta(gm.noise_multiplier_ * 0.99, eps) > delta  # calibrated, not loose
    assert gm.privacy_spent_.epsilon <= eps + 1e-9
    # With DP kernel k-means the clustering's events come first.
    km = DPGenerativeMixture(
        n_clusters=2,
        partition="kmeans",
        binary=list(range(Z.shape[1])),
        n_components=20,
        kmeans_iter=2,
        epsilon=eps,
        random_state=0,
    ).fit(Z)
    events = km.privacy_ledger_.events
    assert events[:-1] == clustering_events_as_add_remove(km.clusterer_.privacy_ledger_.events)
    assert events[-1] == GaussianEvent(
        count=1, neighbouring=ADD_REMOVE, noise_multiplier=km.noise_multiplier_
    )
    spent = compose(events, delta, "rdp")
    assert spent.epsilon <= eps * (1 + 1e-6) and km.privacy_spent_.epsilon <= eps + 1e-9


def test_marginals_plan_is_public():
    """A dry run on rows of the declared domain carrying no information records the same events."""
    Z, _, block = labelled_binary()
    dry = np.zeros_like(Z)
    dry[:, block[0]] = 1.0
    binary = {"binary": list(range(6))}
    for params in (
        {"categorical": [block], **binary},
        {"categorical": [block], "n_clusters": 1, **binary},
        {"n_clusters": 1},
        {},
    ):
        a, b = (DPGenerativeMixture(epsilon=2.0, random_state=1, **params).fit(data) for data in (Z, dry))
        assert a.privacy_ledger_.events == b.privacy_ledger_.events
        assert a.noise_std_ == b.noise_std_


def test_marginals_categorical_declaration_is_validated():
    Z, _, block = labelled_binary()
    bad = Z.copy()
    bad[3, block] = 0.0  # a row with no category
    with pytest.raises(ValueError, match=r"categorical\[0\]") as info:
        DPGenerativeMixture(categorical=[block], random_state=0).fit(bad)
    assert "0." not in str(info.value)
    for declared in ([[0]], [[0, 99]], [[0, 1], [1, 2]], [[0.5, 1]], [(0, True)]):
        with pytest.raises(ValueError, match="categorical"):
            DPGenerativeMixture(categorical=declared, random_state=0).fit(Z)
    with pytest.raises(ValueError, match="categorical"):
        DPGenerativeMixture(generator="vae", categorical=[block]).fit(Z)
    with pytest.raises(ValueError, match="partition"):
        DPGenerativeMixture(partition="categorical").fit(Z)


def test_marginals_sampling_honours_declared_blocks_and_learns_the_classes():
    Z, y, block = labelled_binary(n=3000)
    other = [0, 1]  # a second declared block: not one-hot in the data, refused
    with pytest.raises(ValueError, match=r"categorical\[1\]"):
        DPGenerativeMixture(categorical=[block, other]).fit(Z)
    gm = DPGenerativeMixture(
        categorical=[block], binary=list(range(6)), n_clusters=1, epsilon=8.0, random_state=0
    ).fit(Z)
    S, c = gm.sample(4000, return_clusters=True, random_state=0)
    assert set(np.unique(S)) <= {0.0, 1.0}
    np.testing.assert_array_equal(S[:, block].sum(axis=1), 1.0)
    # The partition block is the cluster: class c's rows have mean 0.1 + 0.4 c.
    np.testing.assert_array_equal(S[:, block].argmax(axis=1), c)
    for k in range(3):
        assert S[c == k, :6].mean() == pytest.approx(0.1 + 0.4 * k, abs=0.05)
    assert gm.predict(Z).shape == (len(Z),) and np.mean(gm.predict(Z) == y) > 0.99
    assert gm.transform(Z[:4]).shape == (4, 3)
    assert np.all(np.isfinite(gm.score_samples(Z[:5])))
    # Sampling is reproducible from an int and never the fit's stream.
    np.testing.assert_array_equal(gm.sample(5, random_state=3), gm.sample(5, random_state=3))


def test_marginals_secure_noise_records_the_discrete_gaussian():
    from skdp.privacy import DiscreteGaussianEvent

    Z, _, block = labelled_binary()
    gm = DPGenerativeMixture(
        categorical=[block],
        binary=list(range(6)),
        n_clusters=1,
        epsilon=2.0,
        secure_noise=True,
        random_state=0,
    ).fit(Z)
    (event,) = gm.privacy_ledger_.events
    assert isinstance(event, DiscreteGaussianEvent) and event.neighbouring == ADD_REMOVE
    assert gm.privacy_spent_.epsilon <= 2.0 + 1e-9
    np.testing.assert_array_equal(gm.sample(50, random_state=0)[:, block].sum(axis=1), 1.0)


def test_marginals_block_outside_the_columns_is_refused_before_the_reservation():
    from skdp.privacy import BudgetAccountant

    Z, _, _ = labelled_binary()
    budget = BudgetAccountant(epsilon=10.0, delta=1e-3)
    with pytest.raises(ValueError, match=r"categorical\[0\]"):
        DPGenerativeMixture(categorical=[[0, Z.shape[1]]], accountant=budget, random_state=0).fit(Z)
    assert budget.spent.epsilon == 0.0


def test_declared_bounds_map_records_and_samples_come_back_in_the_data_units():
    # Pixels on 0..16 (digits' public domain), declared in both spellings:
    # the model works on [0, 1], the samples come back on the declared domain.
    X = binary_data() * 16.0
    d = X.shape[1]
    for bounds in ((0.0, 16.0), [(0.0, 16.0)] * d):
        gm = DPGenerativeMixture(n_clusters=1, bounds=bounds, epsilon=4.0, random_state=0).fit(X)
        out = gm.sample(2000, random_state=0)
        assert out.min() >= 0.0 and out.max() <= 16.0 and out.max() > 8.0
        np.testing.assert_allclose(gm.bounds_[0], 0.0)
        np.testing.assert_allclose(gm.bounds_[1], 16.0)
        # Linear binning keeps the column means (up to the noise and the end hats).
        assert np.abs(out.mean(axis=0) - X.mean(axis=0)).max() < 3.0
    for bad in ((1.0, 1.0), "wide", [(0.0, 1.0)] * (d - 1)):
        with pytest.raises((ValueError, TypeError), match="bounds"):
            DPGenerativeMixture(n_clusters=1, bounds=bad).fit(X)


def test_data_outside_declared_bounds_warns_naming_bounds():
    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 10.0, size=(3000, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DPGenerativeMixture(bounds=(0.0, 10.0), epsilon=2.0, random_state=0).fit(X)
    with pytest.warns(UserWarning, match="bounds") as record:
        DPGenerativeMixture(bounds=(0.0, 5.0), epsilon=2.0, random_state=0).fit(X)
    # The warning is post-processing of the accounted release and quotes no data value.
    assert not any(ch.isdigit() for ch in str(record[0].message))


def test_auto_bounds_release_a_private_box_and_samples_in_data_units():
    """Columns in the thousands: the default's private box, accounted; samples on the data's scale."""
    from skdp.privacy import compose

    rng = np.random.default_rng(1)
    X = np.column_stack([rng.normal(1000.0, 100.0, 4000), rng.normal(-5.0, 1.0, 4000)])
    eps = 2.0
    gm = DPGenerativeMixture(epsilon=eps, random_state=0).fit(X)
    low, high = gm.bounds_
    assert np.all(low < X.mean(axis=0)) and np.all(high > X.mean(axis=0))
    assert np.all(high - low < 20 * X.std(axis=0))
    S = gm.sample(4000, random_state=0)
    assert np.all(np.abs(S.mean(axis=0) - X.mean(axis=0)) < 0.5 * X.std(axis=0))
    assert np.all(np.abs(np.log(S.std(axis=0) / X.std(axis=0))) < 0.5)
    # Everything released is on the ledger: the count, the two histogram
    # releases and the model's; their composition is the budget.
    events = gm.privacy_ledger_.events
    assert all(e.neighbouring == ADD_REMOVE for e in events)
    assert len(events) == 3 + gm.n_iter_
    spent = compose(events, gm.delta, "pld")
    assert spent.epsilon == pytest.approx(eps, rel=1e-2) and gm.privacy_spent_.epsilon <= eps + 1e-9


def test_capacity_grows_with_n_and_epsilon_and_is_public():
    from skdp.generative._domain import MAX_BINS, capacity

    small = capacity(150, 1.0, 1e-5, 0, [], 4)
    assert small[0] == 1 and 2 <= small[1] < 8
    prev = (0, 0)
    for eps in (0.3, 1.0, 3.0, 10.0, 100.0):
        got = capacity(20000, eps, 1e-5, 0, [], 8)
        assert got[0] >= prev[0] and got[1] >= prev[1]
        prev = got
    assert prev[0] > 1 and prev[1] == MAX_BINS
    assert capacity(20000, 3.0, 1e-5, 0, [], 8)[0] >= capacity(2000, 3.0, 1e-5, 0, [], 8)[0]
    # More EM releases, more noise each: never more classes.
    assert capacity(5000, 3.0, 1e-5, 0, [], 8, n_iter=3)[0] <= capacity(5000, 3.0, 1e-5, 0, [], 8)[0]


def test_linear_binning_is_mean_preserving_and_uniform_is_recovered():
    from skdp.generative._domain import hat_log_density, linear_binning, sample_hat

    rng = np.random.default_rng(0)
    U = rng.random((5000, 3))
    for G in (2, 5, 17):
        W = linear_binning(U, G).reshape(5000, 3, G)
        np.testing.assert_allclose(W.sum(axis=2), 1.0)
        assert np.all((W > 0).sum(axis=2) <= 2)
        np.testing.assert_allclose(W @ np.linspace(0, 1, G), U)
        # Centred weights have norm at most sqrt((G - 1) / G), the one-hot bound.
        assert np.all(np.linalg.norm(W - 1.0 / G, axis=2) <= np.sqrt((G - 1) / G) + 1e-12)
        # The released weights of uniform data give a uniform density ...
        # (uniform data: a fine regular grid, so that p has no sampling noise).
        p = linear_binning((np.arange(100000)[:, None] + 0.5) / 100000, G).mean(axis=0, keepdims=True)
        dens = np.exp(hat_log_density(linear_binning(np.linspace(0, 1, 101)[:, None], G), p, G))
        np.testing.assert_allclose(dens, 1.0, atol=1e-3)
        # ... and sampling from it is uniform too (KS distance).
        points = rng.choice(G, size=20000, p=p[0] / p[0].sum())
        v = np.sort(sample_hat(points, G, rng))
        assert v.min() >= 0 and v.max() <= 1
        assert np.max(np.abs(v - np.arange(1, len(v) + 1) / len(v))) < 0.03


def test_em_release_sensitivity_is_the_row_norm_whatever_the_classes():
    """A record moves the released matrix by r v^T: Frobenius norm ||r||_2 ||v|| <= C for r on the simplex."""
    from skdp.generative._marginals import centred_statistics, domain_row_norm

    rng = np.random.default_rng(0)
    X = (rng.random((200, 7)) < 0.5).astype(float)
    v = centred_statistics(X, np.arange(7), [])
    C = domain_row_norm(7, [])
    for K in (1, 3, 20):
        r = rng.dirichlet(np.full(K, 0.3), size=200)
        norms = np.linalg.norm(r[:, :, None] * v[:, None, :], axis=(1, 2))
        assert norms.max() <= C + 1e-12


def test_em_classes_ledger_and_noise_statistically():
    """Latent classes by DP-EM: T releases of one multiplier, composed with the count to the budget.

    Each released size is a noisy sum of responsibilities; over the T
    releases of a fit, and over fits, the size noise's std is the recorded
    ``noise_std_`` (not halved).
    """
    from skdp.privacy import compose

    X = gaussian_blobs(0, [-2, 2], 3000, 0.5, n_features=3)
    gm = DPGenerativeMixture(epsilon=10.0, bounds=(-4.0, 4.0), structure="classes", random_state=0).fit(X)
    assert len(gm.weights_) > 1 and gm.n_iter_ > 1
    count, *steps = gm.privacy_ledger_.events
    assert steps == [
        GaussianEvent(count=1, neighbouring=ADD_REMOVE, noise_multiplier=gm.noise_multiplier_)
    ] * (gm.n_iter_)
    assert compose([count, *steps], gm.delta, "pld").epsilon == pytest.approx(10.0, rel=1e-2)
    # Two latent classes recover the two blobs (post-processing of the releases).
    pred = gm.predict(X)
    assert max(np.mean(pred[:3000] != pred[3000:]), 0) > 0.95
    S = gm.sample(6000, random_state=0)
    assert np.mean(S[:, 0] < 0) == pytest.approx(0.5, abs=0.05)
    assert np.corrcoef(S[:, 0], S[:, 1])[0, 1] > 0.8


def test_nested_classes_in_a_declared_block_keep_the_block():
    Z, y, block = labelled_binary(n=20000)
    gm = DPGenerativeMixture(
        categorical=[block], binary=list(range(6)), n_clusters=2, epsilon=8.0, random_state=0
    ).fit(Z)
    assert len(gm.weights_) == 6
    S, c = gm.sample(6000, return_clusters=True, random_state=0)
    np.testing.assert_array_equal(S[:, block].argmax(axis=1), c // 2)
    for k in range(3):
        assert S[c // 2 == k, :6].mean() == pytest.approx(0.1 + 0.4 * k, abs=0.05)
