"""DPGenerativeMixture (Acs et al. 2018, Alg. 1) and its cluster-sampled accounting."""

import math
import subprocess
import sys
import time

import numpy as np
import pytest
from scipy import integrate, stats
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from skdp.cluster import DPKernelKMeans
from skdp.generative import DPGenerativeMixture
from skdp.generative._mixture import cluster_schedule, clustering_events_as_add_remove, sgd_plan_event
from skdp.privacy import (
    ADD_REMOVE,
    REPLACE_ONE,
    GaussianEvent,
    PureDPEvent,
    SubsampledGaussianEvent,
    _autodp,
    compose,
)
from skdp.privacy.cluster_sampling import (
    ClusterSampledGaussianEvent,
    cluster_sampled_gaussian_rdp,
    poisson_subsampled_gaussian_rdp,
)

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
# The cluster-sampled event (skdp.privacy.cluster_sampling).
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
    np.testing.assert_allclose(ev.rdp(INT_ORDERS), np.max(curves, axis=0))
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
        ev.rdp(INT_ORDERS), poisson_subsampled_gaussian_rdp(ref.noise_multiplier, 0.3, INT_ORDERS)
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
    assert gm.labels_.shape == (len(X),)
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
        for e in km._privacy_ledger.events
    ]
    assert compose(km._privacy_ledger.events, 1e-5).epsilon == pytest.approx(0.4, rel=1e-3)
    sgd = ClusterSampledGaussianEvent(
        count=gm.n_steps_,
        neighbouring=ADD_REMOVE,
        noise_multiplier=(gm.noise_multiplier_**-2 + gm.clip_noise_multiplier_**-2) ** -0.5,
        sampling_rates=tuple(gm.sampling_rates_),
        selection_probabilities=tuple(gm.weights_),
    )
    total = compose([*km_events, sgd], 1e-5).epsilon
    assert gm.privacy_spent_.epsilon == pytest.approx(total, rel=1e-9)
    assert gm.privacy_spent_.epsilon == pytest.approx(2.0, rel=2e-3)
    assert gm.privacy_spent_.epsilon <= 2.0
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
    (sgd_logged,) = [e for e in gm._privacy_ledger.events if isinstance(e, ClusterSampledGaussianEvent)]
    assert sgd_logged.count == gm.n_steps_ == gm.cluster_steps_.sum()


def test_every_step_adds_noise_at_the_calibrated_multiplier(monkeypatch):
    from skdp.nn import _engine

    calls = []
    original = _engine.GaussianNoise.add_to

    def spy(self, tensor, generator=None):
        calls.append((self.noise_multiplier, self.sensitivity))
        return original(self, tensor, generator)

    monkeypatch.setattr(_engine.GaussianNoise, "add_to", spy)
    gm = small(clipping=0.5, n_clusters=1).fit(binary_data())
    n_tensors = len(list(gm.generators_[0].parameters()))
    assert len(calls) == gm.n_steps_ * n_tensors
    assert all(z == pytest.approx(gm.noise_multiplier_) and c == 0.5 for z, c in calls)
    # A fixed bound releases no histogram: plain subsampled Gaussian with k = 1.
    assert gm.clip_noise_multiplier_ is None
    ref = SubsampledGaussianEvent(
        count=gm.n_steps_,
        neighbouring=ADD_REMOVE,
        noise_multiplier=gm.noise_multiplier_,
        sampling_rate=gm.sampling_rates_[0],
    )
    assert gm.privacy_spent_.epsilon <= compose([ref], 1e-5).epsilon * 1.05


def test_single_model_spends_nothing_on_clustering():
    gm = small(n_clusters=1).fit(binary_data())
    assert gm.clusterer_ is None
    assert all(isinstance(e, ClusterSampledGaussianEvent) for e in gm._privacy_ledger.events)
    assert gm.sampling_rates_[0] == pytest.approx(16 / 160)


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
    with pytest.raises(ValueError, match="n_samples=3"):
        small(n_clusters=4).fit(X[:3])
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
    vae = DPGenerativeMixture(n_clusters=1, **small).fit(X)
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
