"""Tests of skdp.nn: the DP-SGD engine and the skorch DP nets."""

import math
import pickle
import warnings

import numpy as np
import pytest
from _release_walk import release_violations

torch = pytest.importorskip("torch")
pytest.importorskip("skorch")

from conftest import sign_labelled  # noqa: E402
from scipy import stats  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skdp.exceptions import BudgetExceededError, PrivacyLeakWarning  # noqa: E402
from skdp.nn import (  # noqa: E402
    DPNeuralNetClassifier,
    DPNeuralNetRegressor,
    DPNormClipping,
    DPSGDEngine,
    FixedClipping,
    GaussianNoise,
    PoissonBatchIterator,
    VmapPerExampleGradients,
    calibrate_dpsgd_noise,
    check_per_example_support,
    combined_noise_multiplier,
    count_noise_multiplier,
    dataset_size_event,
    dpsgd_plan,
    dpsgd_step_event,
    norm_histogram,
    poisson_batch_indices,
    steps_per_epoch,
)
from skdp.nn._callbacks import merge_events  # noqa: E402
from skdp.privacy import (  # noqa: E402
    ADD_REMOVE,
    BudgetAccountant,
    GaussianEvent,
    PrivacyLedger,
    PureDPEvent,
    SubsampledGaussianEvent,
    compose,
    gaussian_noise_multiplier,
)

DELTA = 1e-5


class MLP(torch.nn.Module):
    def __init__(self, n_features=4, hidden_units=8, n_out=2, softmax=True, dropout=0.0):
        super().__init__()
        self.l1 = torch.nn.Linear(n_features, hidden_units)
        self.drop = torch.nn.Dropout(dropout)
        self.l2 = torch.nn.Linear(hidden_units, n_out)
        self.softmax = softmax

    def forward(self, x):
        out = self.l2(self.drop(torch.relu(self.l1(x))))
        return torch.softmax(out, dim=-1) if self.softmax else out


def _ce_loss(module, x, y):
    out = module(x)
    return torch.nn.functional.cross_entropy(out, y), out


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    return X, y


def _net(**kw):
    params = dict(
        module=MLP,
        classes=[0, 1],
        lr=0.5,
        max_epochs=2,
        batch_size=50,
        verbose=0,
        random_state=0,
        noise_multiplier=1.0,
        # The data fixture's size, declared public: the plan is then the same as
        # the test's arithmetic (q = 50 / 200); n_samples='auto' is tested apart.
        n_samples=200,
    )
    params.update(kw)
    return DPNeuralNetClassifier(**params)


def _reference_per_example(module, X, y):
    grads = []
    for i in range(len(X)):
        module.zero_grad()
        loss, _ = _ce_loss(module, X[i : i + 1], y[i : i + 1])
        loss.backward()
        grads.append({k: p.grad.detach().clone() for k, p in module.named_parameters()})
    return grads


# ---------------------------------------------------------------- engine ---


def test_per_example_gradients_equal_loop_of_single_backward_passes():
    torch.manual_seed(0)
    module = MLP(n_features=5, hidden_units=7, n_out=3, softmax=False).double()
    X, y = torch.randn(9, 5, dtype=torch.float64), torch.randint(0, 3, (9,))
    ref = _reference_per_example(module, X, y)
    res = VmapPerExampleGradients().clipped_sum(module, _ce_loss, (X, y), lambda norms: 1e12)
    ref_norms = torch.stack([torch.sqrt(sum(g.pow(2).sum() for g in r.values())) for r in ref])
    torch.testing.assert_close(res.norms, ref_norms, rtol=1e-10, atol=0)
    for name in res.grads:
        torch.testing.assert_close(res.grads[name], sum(r[name] for r in ref), rtol=1e-10, atol=1e-12)
    assert res.losses.shape == (9,) and res.aux.shape == (9, 3)


def test_clipped_sum_equals_reference_clipping_and_respects_the_bound():
    torch.manual_seed(1)
    module = MLP(n_features=5, hidden_units=7, n_out=3, softmax=False).double()
    X, y = 3 * torch.randn(12, 5, dtype=torch.float64), torch.randint(0, 3, (12,))
    ref = _reference_per_example(module, X, y)
    norms = [math.sqrt(sum(float(g.pow(2).sum()) for g in r.values())) for r in ref]
    C = float(np.median(norms))  # half the examples are clipped
    res = VmapPerExampleGradients().clipped_sum(module, _ce_loss, (X, y), lambda n: C)
    for name in res.grads:
        expect = sum(r[name] * min(1.0, C / n) for r, n in zip(ref, norms, strict=True))
        torch.testing.assert_close(res.grads[name], expect, rtol=1e-5, atol=1e-9)
    # One example at a time: the clipped gradient never exceeds C.
    for i in range(12):
        one = VmapPerExampleGradients().clipped_sum(
            module, _ce_loss, (X[i : i + 1], y[i : i + 1]), lambda n: C
        )
        total = math.sqrt(sum(float(g.pow(2).sum()) for g in one.grads.values()))
        assert total <= C * (1 + 1e-6)


def test_gaussian_noise_std_is_noise_multiplier_times_sensitivity():
    gen = torch.Generator().manual_seed(0)
    noise = GaussianNoise(sensitivity=0.7, noise_multiplier=1.3)
    n = 200_000
    ledger = PrivacyLedger(neighbouring=ADD_REMOVE)
    sample = noise.release(torch.zeros(n, dtype=torch.float64), gen, ledger)
    # The release is on the ledger: one Gaussian event of the mechanism's multiplier.
    assert ledger.events == [GaussianEvent(count=1, neighbouring=ADD_REMOVE, noise_multiplier=1.3)]
    std = float(sample.std())
    # std of a Gaussian sample has relative standard error 1/sqrt(2n) ~ 0.16%.
    assert abs(std / (0.7 * 1.3) - 1) < 5 / math.sqrt(2 * n)
    assert abs(float(sample.mean())) < 5 * 0.91 / math.sqrt(n)


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
        ),
    ],
)
def test_engine_noise_on_the_summed_gradient_is_sigma_times_clip(device):
    """The statistical test of Alg. 4 line 6: std of (L * grad - clipped sum) equals sigma * C.

    On a GPU too: the noise is drawn there by the device's generator.
    """
    torch.manual_seed(0)
    module = MLP(n_features=5, hidden_units=16, n_out=3, softmax=False).to(device)
    X, y = torch.randn(20, 5).to(device), torch.randint(0, 3, (20,)).to(device)
    C, sigma, L = 0.3, 1.7, 10.0
    clipped = VmapPerExampleGradients().clipped_sum(module, _ce_loss, (X, y), lambda n: C).grads
    engine = DPSGDEngine(
        module,
        _ce_loss,
        noise_multiplier=sigma,
        sampling_rate=0.5,
        expected_batch_size=L,
        clipping=FixedClipping(C),
        max_steps=100,
        generator=torch.Generator(device=device).manual_seed(1),
    )
    ledger = PrivacyLedger(neighbouring=ADD_REMOVE)
    residuals = []
    for _ in range(40):
        engine.step((X, y), ledger)
        assert all(p.grad.device.type == device for p in module.parameters())
        residuals += [(p.grad * L - clipped[k]).flatten() for k, p in module.named_parameters()]
    r = torch.cat(residuals).double()
    n = r.numel()
    assert n > 5000
    # The sample std of n Gaussian draws has relative standard error 1/sqrt(2n).
    assert abs(float(r.std()) / (sigma * C) - 1) < 5 / math.sqrt(2 * n)
    assert abs(float(r.mean())) < 5 * sigma * C / math.sqrt(n)
    assert len(ledger) == 40
    assert all(e == dpsgd_step_event(sigma, 0.5) for e in ledger.events)


def test_engine_refuses_steps_beyond_the_plan():
    module = torch.nn.Linear(3, 2)
    engine = DPSGDEngine(
        module,
        _ce_loss,
        noise_multiplier=1.0,
        sampling_rate=0.5,
        expected_batch_size=2,
        clipping=FixedClipping(1.0),
        max_steps=2,
    )
    ledger = PrivacyLedger(neighbouring=ADD_REMOVE)
    batch = (torch.randn(4, 3), torch.randint(0, 2, (4,)))
    engine.step(batch, ledger)
    engine.step(batch, ledger)
    with pytest.raises(RuntimeError, match="allows 2 DP-SGD steps"):
        engine.step(batch, ledger)
    assert len(ledger) == 2


def test_empty_poisson_batch_still_gets_noise_and_an_event():
    module = torch.nn.Linear(3, 2)
    engine = DPSGDEngine(
        module,
        _ce_loss,
        noise_multiplier=1.0,
        sampling_rate=0.01,
        expected_batch_size=1.0,
        clipping=FixedClipping(2.0),
        max_steps=5,
        generator=torch.Generator().manual_seed(0),
    )
    ledger = PrivacyLedger(neighbouring=ADD_REMOVE)
    res = engine.step((torch.zeros(0, 3), torch.zeros(0, dtype=torch.long)), ledger)
    assert res.batch_size == 0 and len(ledger) == 1
    assert float(module.weight.grad.abs().sum()) > 0


def test_batchnorm_is_refused_with_the_layer_name():
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    with pytest.raises(ValueError, match=r"'1' \(BatchNorm1d\)"):
        check_per_example_support(module)
    check_per_example_support(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4)))
    X = np.zeros((20, 3), dtype=np.float32)
    y = np.zeros(20, dtype=np.int64)
    with pytest.raises(ValueError, match="BatchNorm1d"):
        _net(module=module, batch_size=5).fit(X, y)


# -------------------------------------------------------------- sampling ---


def test_poisson_batches_have_binomial_sizes():
    rng = np.random.default_rng(0)
    n, q, reps = 500, 0.1, 4000
    sizes = np.array([poisson_batch_indices(n, q, rng).size for _ in range(reps)])
    mean, var = n * q, n * q * (1 - q)
    assert abs(sizes.mean() - mean) < 5 * math.sqrt(var / reps)
    # A shuffled fixed-size loader would have variance 0.
    assert abs(sizes.var(ddof=1) / var - 1) < 5 * math.sqrt(2 / reps)


def test_poisson_iterator_on_skorch_dataset_and_generic_dataset():
    from skorch.dataset import Dataset

    X = np.arange(40, dtype=np.float32).reshape(20, 2)
    y = np.arange(20)
    it = PoissonBatchIterator(Dataset(X, y), 0.3, 7, np.random.default_rng(0))
    batches = list(it)
    assert len(batches) == len(it) == 7
    for Xi, yi in batches:
        assert isinstance(Xi, torch.Tensor) and Xi.shape[1] == 2 and len(Xi) == len(yi)
        np.testing.assert_array_equal(Xi[:, 0].numpy() / 2, yi.numpy())
    tds = torch.utils.data.TensorDataset(torch.as_tensor(X), torch.as_tensor(y))
    empty = PoissonBatchIterator(tds, 1e-9, 2, np.random.default_rng(0))
    for Xi, yi in empty:
        assert Xi.shape == (0, 2) and yi.shape == (0,)


def test_steps_per_epoch():
    assert steps_per_epoch(1000, 100) == 10
    assert steps_per_epoch(1000, 300) == 3
    assert steps_per_epoch(10, 100) == 1


# ------------------------------------------------------------ accounting ---


def test_step_event_is_a_poisson_subsampled_gaussian_under_add_remove():
    e = dpsgd_step_event(1.2, 0.05, count=7)
    assert e == SubsampledGaussianEvent(
        count=7, neighbouring=ADD_REMOVE, noise_multiplier=1.2, sampling_rate=0.05, sampling="poisson"
    )
    adaptive = dpsgd_step_event(1.2, 0.05, clip_noise_multiplier=2.4)
    assert adaptive.noise_multiplier == pytest.approx((1.2**-2 + 2.4**-2) ** -0.5)
    assert combined_noise_multiplier(3.0, 4.0) == pytest.approx(12 / 5)


def test_calibration_meets_the_target_exactly():
    # The plan of test_fit_privacy_spent_matches_calibration_and_ledger (RDP curves are cached).
    q, steps = 0.25, 12
    # RDP bisects to 1e-6 of the multiplier, PLD to 1e-4 (PLD_RTOL): both from above.
    for composition, rel in (("rdp", 1e-5), ("pld", 1e-3)):
        z = calibrate_dpsgd_noise(1.5, DELTA, q, steps, composition=composition)
        spent = compose([dpsgd_step_event(z, q, count=steps)], DELTA, composition).epsilon
        assert spent == pytest.approx(1.5, rel=rel) and spent <= 1.5
        # Slightly less noise would overspend.
        assert compose([dpsgd_step_event(0.98 * z, q, count=steps)], DELTA, composition).epsilon > 1.5


def test_fit_privacy_spent_matches_calibration_and_ledger(data):
    X, y = data
    net = _net(noise_multiplier=None, epsilon=1.5, max_epochs=3, verbose=1).fit(X, y)
    # PLD calibration: within its 1e-4 bisection of the target, from below.
    assert net.privacy_spent_.epsilon == pytest.approx(1.5, rel=1e-3) and net.privacy_spent_.epsilon <= 1.5
    assert net.privacy_spent_.delta == DELTA
    assert net.sampling_rate_ == 50 / 200 and net.n_steps_ == 3 * 4
    events = net.privacy_ledger_.events
    assert sum(e.count for e in events) == net.n_steps_
    assert {e.noise_multiplier for e in events} == {net.noise_multiplier_}
    assert {e.sampling_rate for e in events} == {0.25}
    # Independent recomputation from the plan.
    expect = compose([dpsgd_step_event(net.noise_multiplier_, 0.25, count=12)], DELTA)
    assert net.privacy_spent_.epsilon == pytest.approx(expect.epsilon, rel=1e-9)
    # The epoch table's epsilon column grows to the total.
    eps = net.history[:, "epsilon"]
    assert len(eps) == 3 and np.all(np.diff(eps) > 0)
    assert eps[-1] == pytest.approx(net.privacy_spent_.epsilon, rel=1e-9)


def test_every_step_adds_noise_to_every_parameter(data, monkeypatch):
    X, y = data
    calls = []
    original = GaussianNoise.release

    def counting(self, value, generator, ledger):
        calls.append((self.scale, sorted(value)))
        return original(self, value, generator, ledger)

    monkeypatch.setattr(GaussianNoise, "release", counting)
    net = _net(noise_multiplier=0.9, clip_norm=0.4).fit(X, y)
    names = sorted(name for name, _ in net.module_.named_parameters())
    # One release per step, of the gradients of every parameter together.
    assert len(calls) == net.n_steps_
    assert all(scale == pytest.approx(0.9 * 0.4) and keys == names for scale, keys in calls)


def test_a_step_whose_noise_is_not_recorded_fails(monkeypatch):
    """The step checks its recorded releases against its planned event: noise added off the ledger is refused."""
    module = torch.nn.Linear(3, 2)

    def unrecorded(self, value, generator, ledger):
        return {k: v + self.scale * torch.randn(v.shape, generator=generator) for k, v in value.items()}

    engine = DPSGDEngine(
        module,
        _ce_loss,
        noise_multiplier=1.0,
        sampling_rate=0.5,
        expected_batch_size=2,
        clipping=FixedClipping(1.0),
        max_steps=2,
    )
    batch = (torch.randn(4, 3), torch.randint(0, 2, (4,)))
    engine.step(batch, PrivacyLedger(neighbouring=ADD_REMOVE))
    monkeypatch.setattr(GaussianNoise, "release", unrecorded)
    with pytest.raises(RuntimeError, match="without recording its event"):
        engine.step(batch, PrivacyLedger(neighbouring=ADD_REMOVE))


def test_a_step_release_beyond_the_plan_is_refused_before_its_noise():
    from skdp.privacy.dpsgd import DPSGDStepLedger

    ledger = PrivacyLedger(neighbouring=ADD_REMOVE)
    step = DPSGDStepLedger(ledger, dpsgd_step_event(1.0, 0.5, 2.0))
    assert ledger.events == [dpsgd_step_event(1.0, 0.5, 2.0)]
    GaussianNoise(1.0, 2.0).release(torch.zeros(3), None, step)
    with pytest.raises(RuntimeError, match="goes beyond its planned event"):
        GaussianNoise(1.0, 0.5).release(torch.zeros(3), None, step)
    GaussianNoise(1.0, 1.0).release(torch.zeros(3), None, step)
    step.close()


def test_explicit_noise_multiplier_reports_epsilon(data):
    X, y = data
    net = _net(noise_multiplier=2.0, epsilon=None, max_epochs=2).fit(X, y)
    expect = compose([dpsgd_step_event(2.0, 0.25, count=8)], DELTA).epsilon
    assert net.privacy_spent_.epsilon == pytest.approx(expect, rel=1e-9)
    assert net.noise_multiplier_ == 2.0


def test_epsilon_agrees_with_opacus_rdp_accountant():
    pytest.importorskip("opacus")
    from opacus.accountants import RDPAccountant

    for z, q, steps in [(1.0, 0.01, 1000), (2.0, 0.25, 40), (0.8, 0.05, 200)]:
        acc = RDPAccountant()
        acc.history = [(z, q, steps)]
        theirs = acc.get_epsilon(DELTA)
        ours = compose([dpsgd_step_event(z, q, count=steps)], DELTA, "rdp").epsilon
        assert ours == pytest.approx(theirs, rel=0.02)


def test_merge_events_preserves_the_composition():
    events = [dpsgd_step_event(1.0, 0.1)] * 5 + [dpsgd_step_event(2.0, 0.1)] * 3
    merged = merge_events(events)
    assert sorted(e.count for e in merged) == [3, 5]
    for composition in ("rdp", "pld"):
        # PLD convolves a merged event at once, the events one by one otherwise:
        # the same bound up to the discretisation's rounding.
        assert compose(merged, DELTA, composition).epsilon == pytest.approx(
            compose(events, DELTA, composition).epsilon, rel=1e-9
        )


# ------------------------------------------------------- adaptive (DPNorm) ---


def test_norm_histogram_bins_and_sensitivity():
    # float64: the edges C_j = j / 10 are compared with the norms' exact values
    # (0.1 in float32 is above the edge 0.1).
    norms = torch.tensor([0.0, 0.05, 0.1, 0.15, 0.95, 1.0, 3.0], dtype=torch.float64)
    counts = norm_histogram(norms, 1.0, 10)
    # Bins (C_{j-1}, C_j]: 0 and 0.05 and 0.1 in bin 1; 0.15 in bin 2; 0.95, 1.0 and 3.0 in bin 10.
    np.testing.assert_array_equal(counts, [3, 1, 0, 0, 0, 0, 0, 0, 0, 3])
    # Adding one record changes one count by one: L2 sensitivity 1 (add/remove).
    for extra in [0.0, 0.33, 0.5, 2.0, math.inf, math.nan]:
        diff = (
            norm_histogram(torch.cat([norms, torch.tensor([extra], dtype=torch.float64)]), 1.0, 10) - counts
        )
        assert float(np.linalg.norm(diff)) == 1.0


def test_dpnorm_histogram_noise_std_and_mode():
    clip = DPNormClipping(max_norm=2.0, n_bins=8, noise_multiplier=1.5)
    gen = torch.Generator().manual_seed(0)
    norms = torch.full((100,), 0.6)
    exact = torch.as_tensor(norm_histogram(norms, 2.0, 8), dtype=norms.dtype)
    reps = 3000
    ledger = PrivacyLedger(neighbouring=ADD_REMOVE)
    noise = torch.stack([clip.noisy_histogram(norms, ledger, gen) - exact for _ in range(reps)]).double()
    n = noise.numel()
    assert abs(float(noise.std()) / 1.5 - 1) < 5 / math.sqrt(2 * n)
    # Every release is recorded: sensitivity 1 under add/remove, multiplier sigma_C.
    assert ledger.events == [GaussianEvent(count=1, neighbouring=ADD_REMOVE, noise_multiplier=1.5)] * reps
    # The mode of 100 identical norms in bin 3 survives noise of std 1.5.
    assert clip.threshold(norms, ledger, gen) == pytest.approx(3 * 2.0 / 8)


def test_adaptive_fit_accounts_histogram_and_gradient_together(data):
    X, y = data
    net = _net(
        noise_multiplier=None, epsilon=2.0, clip_norm="auto", clip_norm_noise_ratio=3.0, clip_norm_max=5.0
    )
    net.fit(X, y)
    assert net.privacy_spent_.epsilon == pytest.approx(2.0, rel=1e-3)
    assert net.clip_noise_multiplier_ == pytest.approx(3.0 * net.noise_multiplier_)
    combined = combined_noise_multiplier(net.noise_multiplier_, net.clip_noise_multiplier_)
    assert [e.noise_multiplier for e in net.privacy_ledger_.events] == pytest.approx(
        [combined] * len(net.privacy_ledger_.events)
    )
    clip_norms = [b["clip_norm"] for epoch in net.history for b in epoch["batches"]]
    assert len(clip_norms) == net.n_steps_
    assert all(0 < c <= 5.0 for c in clip_norms)
    # Paying for the histogram means more gradient noise than fixed clipping at the same budget.
    fixed = _net(noise_multiplier=None, epsilon=2.0).fit(X, y)
    assert net.noise_multiplier_ > fixed.noise_multiplier_


# --------------------------------------------------- scikit-learn / skorch ---


def test_learns_and_predicts(data):
    X, y = data
    net = _net(noise_multiplier=None, epsilon=8.0, max_epochs=8, lr=1.0).fit(X, y)
    assert net.score(X, y) > 0.8
    assert net.predict_proba(X).shape == (200, 2)


def test_regressor(data):
    X, _ = data
    y = X @ np.array([1.0, -1.0, 0.5, 0.0], dtype=np.float32)
    net = DPNeuralNetRegressor(
        torch.nn.Linear(4, 1), epsilon=8.0, lr=0.2, max_epochs=8, batch_size=50, verbose=0, random_state=0
    ).fit(X, y)
    assert net.predict(X).shape == (200,)
    assert net.score(X, y) > 0.5
    assert net.privacy_spent_.epsilon == pytest.approx(8.0, rel=1e-5)


def test_reproducible_with_random_state(data):
    X, y = data
    net = _net(module__dropout=0.2)
    p1 = clone(net).fit(X, y).predict_proba(X)
    p2 = clone(net).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(p1, p2)
    p3 = clone(net).set_params(random_state=1).fit(X, y).predict_proba(X)
    assert not np.allclose(p1, p3)


def test_clone_and_get_params_do_not_carry_fit_state(data):
    X, y = data
    net = _net().fit(X, y)
    params = net.get_params(deep=False)
    assert not any(k.startswith("_") or k.endswith("_") for k in params)
    c = clone(net)
    assert not hasattr(c, "privacy_spent_")
    assert c.get_params(deep=False).keys() == params.keys()


def test_pickle_round_trip(data):
    X, y = data
    net = _net().fit(X, y)
    loaded = pickle.loads(pickle.dumps(net))
    np.testing.assert_allclose(loaded.predict_proba(X), net.predict_proba(X))
    assert loaded.privacy_spent_ == net.privacy_spent_


def test_grid_search_and_pipeline(data):
    X, y = data
    pipe = make_pipeline(StandardScaler(), _net(max_epochs=5, noise_multiplier=0.8))
    grid = GridSearchCV(
        pipe,
        {
            "dpneuralnetclassifier__lr": [0.5, 1.0],
            "dpneuralnetclassifier__module__hidden_units": [4, 8],
        },
        cv=2,
    )
    grid.fit(X, y)
    best = grid.best_estimator_[-1]
    assert best.module_.l1.out_features == grid.best_params_["dpneuralnetclassifier__module__hidden_units"]
    assert grid.best_score_ > 0.7


def test_grid_search_over_epsilon_spends_on_one_budget(data):
    X, y = data
    budget = BudgetAccountant(epsilon=100.0, delta=1.0, neighbouring=ADD_REMOVE)
    net = _net(noise_multiplier=None, accountant=budget, max_epochs=3)
    # One split training on all 200 rows: every fit has the plan (q = 0.25, 12 steps) of
    # test_fit_privacy_spent_matches_calibration_and_ledger, so calibrations are cached.
    split = [(np.arange(200), np.arange(200))]
    grid = GridSearchCV(net, {"epsilon": [1.5, 3.0]}, cv=split).fit(X, y)
    # 2 candidates x 1 split + the refit, all charged to the shared budget,
    # which composes the three fits' events (issue 20): far less than the sum
    # of their epsilons, exactly what a "basic" budget would charge.
    assert len(budget.history) == 3
    total = 1.5 + 3.0 + grid.best_params_["epsilon"]
    events = [e for entry in budget.entries for e in entry.events]
    deltas = sum(d for _, d, _ in budget.history)
    assert budget.spent.epsilon == pytest.approx(compose(events, deltas, "pld").epsilon, rel=1e-6)
    assert budget.spent.epsilon < 0.75 * total


def test_budget_is_checked_before_training(data, monkeypatch):
    X, y = data
    budget = BudgetAccountant(epsilon=1.0, neighbouring=ADD_REMOVE)
    stepped = []
    monkeypatch.setattr(DPSGDEngine, "step", lambda *a, **k: stepped.append(1))
    with pytest.raises(BudgetExceededError):
        _net(noise_multiplier=None, epsilon=2.0, accountant=budget).fit(X, y)
    with pytest.raises(BudgetExceededError):
        _net(noise_multiplier=0.3, accountant=budget).fit(X, y)  # planned epsilon >> 1
    assert stepped == [] and budget.history == []


def test_accountant_is_charged_what_was_spent(data):
    X, y = data
    budget = BudgetAccountant(epsilon=10.0, neighbouring=ADD_REMOVE)
    net = _net(noise_multiplier=1.5, accountant=budget).fit(X, y)
    assert budget.spent.epsilon == pytest.approx(net.privacy_spent_.epsilon)


def test_classes_none_is_refused_before_the_budget(data):
    X, y = data
    budget = BudgetAccountant(epsilon=10.0, delta=1e-3, neighbouring="add_remove")
    with pytest.raises(ValueError, match="declare the labels.*classes='nonprivate'"):
        _net(classes=None, max_epochs=1, accountant=budget).fit(X, y)
    assert budget.spent.epsilon == 0


def test_classes_from_y_is_the_opt_in_non_private_mode(data):
    X, y = data
    with pytest.warns(PrivacyLeakWarning, match="classes"):
        net = _net(classes="nonprivate", max_epochs=1).fit(X, y)
    np.testing.assert_array_equal(net.classes_, [0, 1])


def test_verbose_table_has_epsilon_column(data, capsys):
    X, y = data
    _net(verbose=1, max_epochs=1).fit(X, y)
    assert "epsilon" in capsys.readouterr().out


# ------------------------------------------------------------- bad input ---


@pytest.mark.parametrize(
    "params, match",
    [
        ({"noise_multiplier": None, "epsilon": 0.0}, "epsilon"),
        ({"noise_multiplier": None, "epsilon": float("inf")}, "epsilon"),
        ({"delta": 0.0}, "delta"),
        ({"clip_norm": -1.0}, "clip_norm"),
        ({"clip_norm": "adaptive"}, "clip_norm"),
        ({"clip_norm": "auto", "clip_norm_max": 0.0}, "clip_norm_max"),
        ({"clipping": "auto"}, "clipping"),
        ({"noise_multiplier": 0.0}, "noise_multiplier"),
        ({"clip_norm_bins": 0}, "clip_norm_bins"),
        ({"clip_norm_noise_ratio": float("nan")}, "clip_norm_noise_ratio"),
        ({"warm_start": True}, "warm_start"),
        ({"max_epochs": 0}, "max_epochs"),
    ],
)
def test_bad_parameters(data, params, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        _net(**params).fit(X, y)


def test_bad_accountant(data):
    X, y = data
    with pytest.raises(TypeError, match="accountant"):
        _net(accountant=1.0).fit(X, y)


def test_bad_data(data):
    X, y = data
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        _net().fit(Xn, y)
    with pytest.raises(ValueError, match="NaN"):
        _net().fit(torch.as_tensor(Xn), torch.as_tensor(y))
    with pytest.raises(ValueError, match="inconsistent"):
        _net().fit(X, y[:-1])
    with pytest.raises(ValueError, match="not in `classes`") as err:
        _net().fit(X, np.where(y == 1, "a", "b"))
    # Labels are data: the message names the parameter, never the values.
    assert "'a'" not in str(err.value) and "'b'" not in str(err.value)
    with pytest.raises(ValueError, match="Unknown label type"):
        _net().fit(X, X[:, 0])
    with pytest.raises(ValueError, match="requires y"):
        _net().fit(X, None)
    with pytest.raises(TypeError, match="fit parameters"):
        _net().fit(X, y, sample_weight=np.ones(len(y)))


def test_string_labels_map_through_classes(data):
    X, y = data
    labels = np.where(y == 1, "yes", "no")
    net = _net(classes=["yes", "no"], noise_multiplier=0.5, max_epochs=4).fit(X, labels)
    pred = net.predict(X)
    assert set(pred) <= {"yes", "no"}
    assert net.score(X, labels) > 0.7
    # Output column j of the module is classes[j].
    proba = net.predict_proba(X)
    np.testing.assert_array_equal(pred, np.array(["yes", "no"])[proba.argmax(1)])


def test_default_module_is_sized_from_the_data(data):
    X, y = data
    with pytest.warns(PrivacyLeakWarning):
        net = DPNeuralNetClassifier(
            classes="nonprivate", noise_multiplier=1.0, epsilon=None, max_epochs=1, verbose=0
        ).fit(X, y)
    assert net.module_.hidden.in_features == 4 and net.module_.output.out_features == 2
    with pytest.raises(ValueError, match="features"):
        net.predict(X[:, :3])
    ce = DPNeuralNetClassifier(
        criterion=torch.nn.CrossEntropyLoss,
        classes=[0, 1],
        noise_multiplier=1.0,
        epsilon=None,
        max_epochs=1,
        verbose=0,
    ).fit(X, y)
    assert ce.module_.softmax is False
    np.testing.assert_allclose(ce.predict_proba(X).sum(1), 1.0, rtol=1e-5)


def test_partial_fit_is_refused(data):
    X, y = data
    net = _net()
    assert not hasattr(net, "partial_fit")
    with pytest.raises(AttributeError, match="partial_fit"):
        net.partial_fit(X, y)


# ------------------------------------------------------ distinguishing test ---


def _clopper_pearson(k, n, alpha):
    lo = stats.beta.ppf(alpha / 2, k, n - k + 1) if k > 0 else 0.0
    hi = stats.beta.ppf(1 - alpha / 2, k + 1, n - k) if k < n else 1.0
    return lo, hi


@pytest.mark.slow
def test_empirical_epsilon_of_one_step_does_not_exceed_the_claim():
    """Neighbouring datasets: D has 20 records of gradient 0, D' adds one with gradient at the clip bound.

    One full-batch step (q = 1) is a Gaussian mechanism; thresholding the
    released gradient and bounding the likelihood ratio with Clopper-Pearson
    intervals gives an empirical lower bound on epsilon, which must stay below
    the accountant's claim (with half the noise it would not).
    """
    # sigma = 2: the claim is 2.17; the empirical bound is ~1.1, and ~2.3 with half the noise.
    sigma, C, reps = 2.0, 1.0, 20_000

    def loss(module, x):
        return (module(x)).sum()

    def releases(n_extra, seed):
        module = torch.nn.Linear(1, 1, bias=False)
        engine = DPSGDEngine(
            module,
            loss,
            noise_multiplier=sigma,
            sampling_rate=1.0,
            expected_batch_size=1.0,
            clipping=FixedClipping(C),
            max_steps=reps,
            generator=torch.Generator().manual_seed(seed),
        )
        x = torch.zeros(20 + n_extra, 1)
        x[20:] = 10.0  # gradient 10, clipped to C
        ledger = PrivacyLedger(neighbouring=ADD_REMOVE)
        out = np.empty(reps)
        for i in range(reps):
            engine.step((x,), ledger)
            out[i] = float(module.weight.grad)
        return out, ledger

    out_d, _ = releases(0, 1)
    out_d1, ledger = releases(1, 2)
    claim = compose(ledger.events[:1], DELTA).epsilon
    best = 0.0
    for t in np.linspace(1.0, 8.0, 22):
        k1, k0 = int((out_d1 > t).sum()), int((out_d > t).sum())
        lo1, _ = _clopper_pearson(k1, reps, 0.01)
        _, hi0 = _clopper_pearson(k0, reps, 0.01)
        if lo1 > DELTA:
            best = max(best, math.log(max(lo1 - DELTA, 1e-300) / hi0))
    assert 0.5 < best <= claim


# ------------------------------------- the plan never reads N (issue 18, break 4) ---

_PLAN_ATTRIBUTES = (
    "sampling_rate_",
    "n_steps_",
    "noise_multiplier_",
    "clip_noise_multiplier_",
    "noisy_n_samples_",
)


def _plan_of(net):
    return {name: getattr(net, name) for name in _PLAN_ATTRIBUTES}


@pytest.mark.parametrize("budget", [{"noise_multiplier": None, "epsilon": 1.5}, {"noise_multiplier": 1.0}])
def test_declared_plan_is_the_same_on_n_and_n_plus_one_rows(data, budget):
    """Add/remove neighbours: with n_samples declared, nothing released about the plan moves.

    Before the fix q and the steps were read off len(X), so N and N + 1 rows
    gave different deterministic sampling_rate_, n_steps_ and noise_multiplier_.
    """
    X, y = data
    nets = [_net(**budget).fit(X[:n], y[:n]) for n in (199, 200)]
    assert _plan_of(nets[0]) == _plan_of(nets[1])
    assert nets[0].privacy_ledger_.events == nets[1].privacy_ledger_.events
    assert nets[0].privacy_spent_ == nets[1].privacy_spent_
    assert nets[0].history[:, "train_batch_count"] == nets[1].history[:, "train_batch_count"]
    # Declaring the size of the data reproduces the old plan: q = 50 / 200, 4 steps an epoch.
    assert nets[0].sampling_rate_ == 0.25 and nets[0].n_steps_ == 8 and nets[0].noisy_n_samples_ is None


def test_auto_plan_is_post_processing_of_a_noisy_count_on_the_ledger(data):
    X, y = data
    net = _net(n_samples="auto", noise_multiplier=None, epsilon=1.5).fit(X, y)
    count, steps = net.privacy_ledger_.events[0], net.privacy_ledger_.events[1:]
    std = count_noise_multiplier(1.5, DELTA)
    assert count == dataset_size_event(std) == GaussianEvent(1, ADD_REMOVE, std)
    assert std == pytest.approx(10 * gaussian_noise_multiplier(1.5, DELTA))
    # The plan is a function of the released noisy count (and hyperparameters) only.
    plan = dpsgd_plan(net.noisy_n_samples_, 50, 2)
    assert net.noisy_n_samples_ != 200.0
    assert (net.sampling_rate_, net.n_steps_) == (plan.sampling_rate, plan.n_steps)
    assert all(e == dpsgd_step_event(net.noise_multiplier_, plan.sampling_rate) for e in steps)
    assert len(steps) == net.n_steps_
    # Count and steps compose to the requested budget.
    assert net.privacy_spent_.epsilon == pytest.approx(1.5, rel=1e-3)
    # Same noise draw, one more row: the count moves by exactly one, the plan only through it.
    other = _net(n_samples="auto", noise_multiplier=None, epsilon=1.5).fit(X[:199], y[:199])
    assert other.noisy_n_samples_ == pytest.approx(net.noisy_n_samples_ - 1)


def test_auto_plan_privacy_spent_matches_dp_accounting(data):
    dp_accounting = pytest.importorskip("dp_accounting")
    X, y = data
    net = _net(n_samples="auto", noise_multiplier=0.9, max_epochs=3, composition="rdp").fit(X, y)
    std = count_noise_multiplier(None, DELTA, 0.9)
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(std))
    acc.compose(
        dp_accounting.PoissonSampledDpEvent(net.sampling_rate_, dp_accounting.GaussianDpEvent(0.9)),
        net.n_steps_,
    )
    assert net.privacy_spent_.epsilon == pytest.approx(acc.get_epsilon(DELTA), rel=0.02)
    # Without the count the same steps cost less: the count is accounted.
    steps_only = compose(
        [dpsgd_step_event(0.9, net.sampling_rate_, count=net.n_steps_)], DELTA, "rdp"
    ).epsilon
    assert net.privacy_spent_.epsilon > steps_only


def test_history_and_printout_hold_no_exact_training_statistic(data, capsys):
    X, y = data
    net = _net(verbose=1, max_epochs=2, clip_norm="auto").fit(X, y)
    out = capsys.readouterr().out
    keys = set()
    for epoch in net.history:
        keys |= set(epoch)
        for batch in epoch["batches"]:
            keys |= set(batch)
    # The epsilon spent, DPNorm's noisy bounds and the plan's batch count only.
    assert keys == {"epoch", "epsilon", "train_batch_count", "batches", "clip_norm"}
    assert "loss" not in out and "dur" not in out and "epsilon" in out


def test_user_train_split_warns_that_validation_is_outside_the_guarantee(data):
    from skorch.dataset import ValidSplit

    X, y = data
    with pytest.warns(PrivacyLeakWarning, match="train_split"):
        _net(train_split=ValidSplit(4), max_epochs=1).fit(X, y)
    assert DPNeuralNetClassifier().train_split is None


@pytest.mark.parametrize("n_samples", [200, "auto"])
def test_budget_is_reserved_before_the_data_with_a_given_noise(data, n_samples, monkeypatch):
    X, y = data
    Xn = X.copy()
    Xn[0, 0] = np.nan
    order = []
    original = DPNeuralNetClassifier._validate_input

    def validating(self, X, y):
        order.append(("data", len(budget.history)))
        return original(self, X, y)

    monkeypatch.setattr(DPNeuralNetClassifier, "_validate_input", validating)
    budget = BudgetAccountant(epsilon=100.0, neighbouring=ADD_REMOVE)
    with pytest.raises(ValueError, match="NaN"):
        _net(noise_multiplier=1.0, n_samples=n_samples, accountant=budget).fit(Xn, y)
    # The data was read after one hold, which is closed charged in full.
    assert order == [("data", 1)] and len(budget.history) == 1 and not budget.reservations
    if n_samples == "auto":
        expect = compose([dataset_size_event(count_noise_multiplier(None, DELTA, 1.0))], DELTA)
    else:
        expect = compose([dpsgd_step_event(1.0, 0.25, count=8)], DELTA)
    assert budget.history[0][0] == pytest.approx(expect.epsilon)


def test_auto_plan_with_a_given_noise_charges_what_it_spent(data):
    X, y = data
    budget = BudgetAccountant(epsilon=100.0, neighbouring=ADD_REMOVE)
    net = _net(noise_multiplier=1.0, n_samples="auto", accountant=budget).fit(X, y)
    assert budget.reservations == []
    assert budget.spent.epsilon == pytest.approx(net.privacy_spent_.epsilon, rel=1e-9)


def test_fitted_net_holds_no_generator_or_fit_state(data):
    X, y = data
    net = _net(n_samples="auto", random_state=np.random.default_rng(3), clip_norm="auto").fit(X, y)
    assert not any(k.startswith("_dp") for k in vars(net))
    params = set(net.get_params(deep=False))
    assert set(vars(net)) - params <= type(net)._release_surface()
    # Nothing in the pickle but releases: no numpy or torch generator, no state.
    assert release_violations(pickle.loads(pickle.dumps(net)), None, n_rows=len(X)) == []


def test_bad_n_samples_is_refused_before_the_budget(data):
    X, y = data
    budget = BudgetAccountant(epsilon=100.0, neighbouring=ADD_REMOVE)
    for bad in (0, -3, 2.5, True, "all"):
        with pytest.raises(ValueError, match="n_samples"):
            _net(n_samples=bad, accountant=budget).fit(X, y)
    assert budget.history == []


def test_fit_runs_the_privacy_template(data, monkeypatch):
    """fit is the template's _private_fit: checks, plan, reservation, data, training, settle, in that order."""
    X, y = data
    budget = BudgetAccountant(epsilon=100.0, neighbouring=ADD_REMOVE)
    calls, plans = [], []
    for name in ("_check_params", "_privacy_plan", "_begin_private_fit", "_validate_input", "_fit_private"):
        original = getattr(DPNeuralNetClassifier, name)

        def step(self, *args, _name=name, _original=original, **kwargs):
            calls.append((_name, len(budget.history)))
            out = _original(self, *args, **kwargs)
            if _name == "_privacy_plan":
                plans.append(out)
            return out

        monkeypatch.setattr(DPNeuralNetClassifier, name, step)
    net = _net(noise_multiplier=None, epsilon=1.5, accountant=budget).fit(X, y)
    # Nothing is reserved before _begin_private_fit; the data is read after it.
    assert calls == [
        ("_check_params", 0),
        ("_privacy_plan", 0),
        ("_begin_private_fit", 0),
        ("_validate_input", 1),
        ("_fit_private", 1),
    ]
    (plan,) = plans
    # The declared size fixes the whole plan before the data: the fit trains at it.
    assert (plan.epsilon, plan.delta, plan.composition) == (1.5, DELTA, "pld")
    assert plan.settings.noise_multiplier == net.noise_multiplier_
    assert plan.settings.dpsgd_plan.n_steps == net.n_steps_ == 8
    assert budget.spent.epsilon == pytest.approx(1.5, rel=1e-3) and budget.reservations == []


def test_train_split_warning_points_at_the_callers_line(data):
    from skorch.dataset import ValidSplit

    X, y = data
    with pytest.warns(PrivacyLeakWarning, match="train_split") as record:
        _net(train_split=ValidSplit(4), max_epochs=1).fit(X, y)
    assert [w.filename for w in record if w.category is PrivacyLeakWarning] == [__file__]


@pytest.mark.parametrize(
    "params", [{"noise_multiplier": None, "epsilon": 2.0}, {"noise_multiplier": 1.0, "n_samples": "auto"}]
)
def test_failed_training_drops_the_fit_state_and_stays_charged(data, params):
    from skorch.callbacks import Callback

    class Stop(Callback):
        def on_epoch_end(self, net, **kwargs):
            raise RuntimeError("stopped by the test")

    X, y = data
    budget = BudgetAccountant(epsilon=100.0, neighbouring=ADD_REMOVE)
    net = _net(accountant=budget, callbacks=[("stop", Stop())], **params)
    with pytest.raises(RuntimeError, match="stopped by the test"):
        net.fit(X, y)
    # The state (noise generators, engine) and the fitted module are gone;
    # the hold is closed charged in full: with a given noise and
    # n_samples='auto', the count's, extended by the steps' (from the noisy
    # count, before the first step).
    assert "_dp_fit" not in vars(net) and not hasattr(net, "module_")
    assert len(budget.history) == 1 and not budget.reservations
    if params["noise_multiplier"] is None:
        assert budget.spent.epsilon == pytest.approx(2.0)
    else:
        full = _net(**params).fit(X, y)
        assert budget.spent.epsilon == pytest.approx(full.privacy_spent_.epsilon, rel=1e-9)


# ------------------------------------------- deprecated DPNorm spellings ---


def _trained(net, X, y):
    torch.manual_seed(0)  # the module's initialisation follows torch's global seed
    net.fit(X, y)
    clip_norms = [b["clip_norm"] for epoch in net.history for b in epoch["batches"]]
    return [p.detach().numpy().copy() for p in net.module_.parameters()], clip_norms, net.privacy_spent_


def test_no_parameter_defaults_to_the_string_deprecated():
    for cls in (DPNeuralNetClassifier, DPNeuralNetRegressor):
        params = cls(classes=[0, 1]).get_params() if cls is DPNeuralNetClassifier else cls().get_params()
        assert "deprecated" not in {v for v in params.values() if isinstance(v, str)}
        assert not {"max_grad_norm", "clipping", "clipping_bins", "clipping_noise_ratio"} & set(params)


# ------------------------------------------------------------ composition ---

#: The multiplier skdp calibrated before the "pld" default (the hard-coded
#: "rdp" of 0.2, commit 92a3489) for q = 50 / 200, 12 steps, (1.5, 1e-5).
OLD_RDP_MULTIPLIER = 2.87918885359542


def test_default_composition_is_pld_and_the_ledger_composes_with_it(data):
    X, y = data
    net = _net(noise_multiplier=None, epsilon=1.5, max_epochs=3).fit(X, y)
    assert net.get_params()["composition"] == "pld" == net.privacy_ledger_.composition
    steps = [dpsgd_step_event(net.noise_multiplier_, 0.25, count=12)]
    assert net.privacy_spent_.epsilon == pytest.approx(compose(steps, DELTA, "pld").epsilon, rel=1e-9)
    assert net.privacy_spent_.epsilon == pytest.approx(1.5, rel=1e-3) and net.privacy_spent_.epsilon <= 1.5
    # PLD is the tighter accountant: less noise than RDP needs, which would overspend under RDP.
    assert net.noise_multiplier_ < OLD_RDP_MULTIPLIER * 0.99
    assert compose(steps, DELTA, "rdp").epsilon > 1.5 * 1.01


def test_rdp_composition_reproduces_the_old_calibration(data):
    X, y = data
    net = _net(noise_multiplier=None, epsilon=1.5, max_epochs=3, composition="rdp", verbose=1).fit(X, y)
    assert net.noise_multiplier_ == pytest.approx(OLD_RDP_MULTIPLIER, rel=1e-12)
    assert net.privacy_ledger_.composition == "rdp"
    steps = [dpsgd_step_event(OLD_RDP_MULTIPLIER, 0.25, count=12)]
    assert net.privacy_spent_.epsilon == pytest.approx(compose(steps, DELTA, "rdp").epsilon, rel=1e-9)
    # The epoch table's column is composed by the same accountant.
    assert net.history[-1, "epsilon"] == pytest.approx(net.privacy_spent_.epsilon, rel=1e-9)


@pytest.mark.parametrize("composition", ["basic", "advanced"])
def test_per_step_compositions_account_dpsgd(data, composition):
    X, y = data
    net = _net(noise_multiplier=2.0, epsilon=None, max_epochs=1, composition=composition).fit(X, y)
    steps = [dpsgd_step_event(2.0, 0.25, count=4)]
    assert net.privacy_spent_.epsilon == pytest.approx(compose(steps, DELTA, composition).epsilon, rel=1e-9)
    # Looser than composing the subsampled curves, as it must be.
    assert net.privacy_spent_.epsilon > compose(steps, DELTA, "rdp").epsilon


@pytest.mark.parametrize("composition", ["zcdp", "moments", None])
@pytest.mark.parametrize("noise_multiplier", [None, 1.0])
def test_unsupported_composition_is_refused_before_the_reservation(data, composition, noise_multiplier):
    X, y = data
    budget = BudgetAccountant(epsilon=100.0, neighbouring=ADD_REMOVE)
    net = _net(composition=composition, noise_multiplier=noise_multiplier, epsilon=1.0, accountant=budget)
    with pytest.raises(ValueError, match="composition"):
        net.fit(X, y)
    assert budget.history == [] and budget.reservations == []
    assert budget.spent.epsilon == 0.0


def _dp_accounting_pld_multiplier(epsilon, delta, q, steps):
    """Coarse bisection of dp-accounting's own PLDAccountant (independent of skdp's accountants)."""
    import dp_accounting

    def eps(z):
        acc = dp_accounting.pld.PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
        acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)), steps)
        return acc.get_epsilon(delta)

    lo, hi = 0.5, 20.0
    while hi / lo > 1.001:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if eps(mid) <= epsilon else (mid, hi)
    return hi


@pytest.mark.slow
def test_pld_calibration_matches_dp_accounting():
    pytest.importorskip("dp_accounting")
    q, steps = 64 / 1347, 630  # the digits benchmark's plan, declared size
    ours = calibrate_dpsgd_noise(1.0, DELTA, q, steps, composition="pld")
    theirs = _dp_accounting_pld_multiplier(1.0, DELTA, q, steps)
    assert ours == pytest.approx(theirs, rel=5e-3)
    # RDP needs visibly more noise: the comparison can tell the two apart.
    assert calibrate_dpsgd_noise(1.0, DELTA, q, steps, composition="rdp") > theirs * 1.03


# ------------------------------------------------------- the "auto" defaults ---


def test_default_net_learns_on_unscaled_inputs(capsys):
    # Defaults only (classes and epsilon): two separable classes at scale
    # 1e3 around an offset of 5e3.  The skorch-era defaults (lr=0.01 on raw
    # inputs) predicted the majority class; the private input scaling and
    # the "auto" schedule must beat it by far.
    rng = np.random.default_rng(0)
    n = 1500
    y = (rng.random(n) < 0.6).astype(np.int64)
    X = (rng.normal(size=(n, 5)) + 2.0 * y[:, None]) * 1e3 + 5e3
    net = DPNeuralNetClassifier(classes=[0, 1], epsilon=3.0, random_state=0).fit(X[:1000], y[:1000])
    majority = max(np.mean(y[1000:]), 1 - np.mean(y[1000:]))
    assert net.score(X[1000:], y[1000:]) >= majority + 0.2
    # Silent by default; the plan and the scaling are released attributes.
    assert capsys.readouterr().out == ""
    assert net.input_centre_.shape == (5,) and net.input_scale_.shape == (5,) and np.all(net.input_scale_ > 0)
    assert net.batch_size_ >= 32 and net.max_epochs_ >= 1 and net.lr_ == 0.5
    # The scaling's releases are on the ledger and within the target.
    assert net.privacy_spent_.epsilon <= 3.0 * (1 + 1e-3)
    assert len(net.privacy_ledger_.events) >= 3


def test_auto_schedule_is_a_public_rule():
    from skdp.nn._defaults import auto_schedule

    small, large = auto_schedule(500, 8, 2, 1.0, 1e-5), auto_schedule(50_000, 8, 2, 1.0, 1e-5)
    assert small.batch_size == 32 and large.batch_size == 1024
    # About 400 steps at a small n epsilon, 1,600 (the cap) at a large one.
    assert 400 <= small.max_epochs * math.ceil(500 / small.batch_size) <= 800
    assert 1600 <= large.max_epochs * math.ceil(50_000 / large.batch_size) <= 1700
    # More budget never narrows the net.
    widths = [auto_schedule(2000, 30, 2, e, 1e-5).hidden_units for e in (0.1, 0.3, 1, 3, 10)]
    assert widths == sorted(widths) and widths[0] == 8
    # A value given by the user is kept.
    assert auto_schedule(500, 8, 2, 1.0, 1e-5, lr=0.1, batch_size=7).batch_size == 7


def test_auto_steps_grow_with_the_budget_and_not_with_the_shape():
    """T = 400 max(1, min(rho / 512, 4)), rho = n eps / sqrt(2 log(1/delta)); never of d or k."""
    from skdp.nn._defaults import MAX_STEP_GAIN, STEPS_SNR, TARGET_STEPS, auto_schedule, auto_steps

    scale = math.sqrt(2 * math.log(1e5))
    assert STEPS_SNR == 512 and MAX_STEP_GAIN == 4
    assert auto_steps(1000, 1.0, 1e-5) == TARGET_STEPS  # rho = 208: below the threshold
    assert auto_steps(20_000, 1.0, 1e-5) == 4 * TARGET_STEPS  # rho = 4,160: the cap
    n = 2 * STEPS_SNR * scale  # rho = 1,024 at epsilon 1: twice the steps
    assert auto_steps(n, 1.0, 1e-5) == pytest.approx(2 * TARGET_STEPS)
    assert auto_steps(n, None, 1e-5) == TARGET_STEPS  # noise_multiplier given: no epsilon
    # Monotone in epsilon: more budget never gets fewer steps.
    steps = [auto_steps(14_000, e, 1e-5) for e in (0.1, 0.3, 1, 3, 10, 100)]
    assert steps == sorted(steps) and steps[0] < steps[-1]
    # The plan of a declared n_samples is made before d and k are known: the same epochs.
    for n, eps in ((300, 1.0), (14_000, 0.3), (14_000, 10.0)):
        unknown = auto_schedule(n, None, None, eps, 1e-5)
        assert all(
            auto_schedule(n, d, k, eps, 1e-5).max_epochs == unknown.max_epochs for d, k in ((2, 3), (64, 10))
        )


def test_input_scale_is_per_column_and_does_not_shrink_with_epsilon():
    """scale_inputs maps each column's released box (its q and 1 - q quantiles) to +-Phi^-1(1 - q) * 0.5.

    A normal column then reaches the module at about 0.5 rms whatever its
    scale or offset, and at every budget (the box's level does not move
    with epsilon).
    """
    from skdp.nn._defaults import INPUT_RMS, LEARNING_RATE, input_box_level

    assert LEARNING_RATE * INPUT_RMS**2 == 0.125
    # The box's level: 8 count stds of rows, within [5 %, 10 %].
    assert input_box_level(4000, 40.0) == pytest.approx(0.08)
    assert input_box_level(10**7, 15.0) == 0.05 and input_box_level(100, 15.0) == 0.1
    rng = np.random.default_rng(0)
    n, d = 4000, 8
    scales = np.array([1e-2, 1e-1, 1.0, 10.0, 1e2, 1e3, 1e4, 3e4])
    X = (rng.normal(size=(n, d)) * scales + 5 * scales).astype(np.float32)
    y = (X[:, 0] > 5e-2).astype(np.int64)
    rms = {}
    for eps in (3.0, 20.0):
        net = DPNeuralNetClassifier(classes=[0, 1], epsilon=eps, max_epochs=1, random_state=0).fit(X, y)
        scaled = (X - net.input_centre_) / net.input_scale_
        # The boxes are on the ledger: the count, then two Gaussian histogram releases (the
        # one-scale map records two exponential mechanisms and one Gaussian centre instead),
        # then the steps; the whole fit within its epsilon.
        kinds = [(type(e).__name__, e.neighbouring) for e in net.privacy_ledger_.events]
        assert kinds[:3] == [("GaussianEvent", "add_remove")] * 3 and "PureDPEvent" not in str(kinds)
        assert net.input_clip_ == 4.0
        assert net.privacy_spent_.epsilon <= eps * (1 + 1e-6)
        rms[eps] = np.sqrt(np.mean(scaled**2, axis=0))
        # About 0.5 rms and centred: an end is where a noisy suffix of up to 16 counts (std 4 s)
        # passes q n >= 8 s rows, so a few of the 16 ends cross a few bins early by noise (about
        # 5 % each): the median column is near the target, every column within a factor 2.
        # One scale for all columns gives these columns rms from 1e-6 to 1.4.
        assert 0.4 < np.median(rms[eps]) < 0.6 and np.all((rms[eps] > 0.25) & (rms[eps] < 1.0)), rms[eps]
        centres = np.abs(np.mean(scaled, axis=0))
        assert np.median(centres) < 0.25 and np.all(centres < 1.0), centres
    assert np.median(rms[20.0]) == pytest.approx(np.median(rms[3.0]), rel=0.2)


def test_input_boxes_where_a_column_can_be_located_else_one_scale():
    """The per-column boxes need n eps / sqrt(d) large enough; below, and for a declared size, one scale."""
    from skdp.nn._plan import input_bounds_plan
    from skdp.privacy.centring import AutoBounds
    from skdp.privacy.quantiles import HistogramBounds

    net = DPNeuralNetClassifier(classes=[0, 1], epsilon=1.0)
    assert isinstance(input_bounds_plan(net, 50_000, n_features=8), HistogramBounds)
    # digits-like: 1,348 rows of 64 columns at eps 1 cannot locate a column's bins.
    assert isinstance(input_bounds_plan(net, 1348, n_features=64), AutoBounds)
    # A declared size plans before the shape is read: one scale.
    assert isinstance(input_bounds_plan(net, 50_000), AutoBounds)
    # The rule is monotone: more rows (or budget) never step back from the boxes.
    kinds = [
        isinstance(input_bounds_plan(net, n, n_features=20), HistogramBounds) for n in (10**3, 10**4, 10**5)
    ]
    assert kinds == sorted(kinds)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    small = DPNeuralNetClassifier(classes=[0, 1], epsilon=1.0, max_epochs=1, random_state=0).fit(
        X, (X[:, 0] > 0).astype(np.int64)
    )
    assert small.input_clip_ is None and np.ptp(small.input_scale_) == 0


def test_default_net_learns_from_a_small_column_beside_large_ones():
    """The class is in a column of scale 1e-2 beside columns up to 1e4 (shapes of ``zoo.py --unseen``).

    One scale for all columns (the rule until 2026-11-28: the median of
    ``||x - c||``) left that column at about 0 and predicted the majority;
    per-column boxes put it at 0.5 rms.
    """
    rng = np.random.default_rng(1)
    n, d = 6000, 6
    y = (rng.random(n) < 0.5).astype(np.int64)
    scales = np.array([1e-2, 1e4, 3e3, 1e2, 1.0, 5e3])
    Z = rng.normal(size=(n, d))
    Z[:, 0] += 2.0 * y
    X = (Z * scales + 3 * scales).astype(np.float32)
    net = DPNeuralNetClassifier(classes=[0, 1], epsilon=3.0, random_state=0).fit(X[:4000], y[:4000])
    assert net.score(X[4000:], y[4000:]) >= 0.75  # about 0.84 without noise; majority 0.5


def test_repr_shows_the_privacy_target_like_scikit_learn():
    # device named: skorch's default, left out of the repr, also under SKDP_TEST_DEVICE (conftest.py).
    text = repr(DPNeuralNetClassifier(classes=[0, 1], epsilon=2.0, lr=0.3, device="cpu"))
    assert text == "DPNeuralNetClassifier(epsilon=2.0, classes=[0, 1], max_epochs='auto', lr=0.3)"
    assert repr(DPNeuralNetRegressor(device="cpu")) == "DPNeuralNetRegressor(epsilon=1.0, max_epochs='auto')"


def test_a_failed_fit_leaves_a_fresh_uninitialized_net():
    # A fit that fails after its hold forgets what it fitted (the template's
    # _discard_fit); the net keeps skorch's own bookkeeping, so predict
    # refuses and the next fit trains as a fresh net would.
    from skorch.exceptions import NotInitializedError

    X, y = sign_labelled(0, 80, 3)
    net = DPNeuralNetClassifier(
        classes=[0, 1], batch_size=20, max_epochs=1, noise_multiplier=1.0, epsilon=None, random_state=0
    )
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError):
        net.fit(bad, y)
    assert not net.initialized_ and "privacy_spent_" not in vars(net)
    with pytest.raises(NotInitializedError):
        net.predict(X)
    assert net.fit(X, y).predict(X).shape == (80,)


def _fallback_data(n=120, d=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    return X, (150.0 + 70.0 * rng.normal(size=n)).astype(np.float32)


def test_regressor_predicts_a_private_median_where_the_public_rule_says_no_net_trains():
    """Below rho = 6 sqrt(8 (d + k)) the default regressor releases a median and predicts it (docs/nn.md)."""
    from skdp.nn._defaults import min_training_rho, trains_default_net

    scale = math.sqrt(2 * math.log(1 / DELTA))
    # d + k = 2: n epsilon must reach 6 sqrt(16) sqrt(2 log(1/delta)) = 115.
    assert min_training_rho(1, 1) == pytest.approx(24.0)
    assert not trains_default_net(120, 1, 1, 23.9 * scale / 120, DELTA)
    assert trains_default_net(120, 1, 1, 24.1 * scale / 120, DELTA)
    # More budget or more rows never turn training back into the constant.
    rule = [trains_default_net(n, 10, 1, e, DELTA) for n in (100, 300, 1000) for e in (0.1, 0.3, 1, 3)]
    assert rule == [False, False, False, True, False, False, True, True, False, True, True, True]
    X, y = _fallback_data()
    from skdp.nn._constant import spread_n_epsilon

    # The target's centre and spread (two medians within half of epsilon) need more: about 161.
    assert spread_n_epsilon(1) == pytest.approx(161.4, abs=0.1)
    with pytest.warns(
        UserWarning, match=r"n \* epsilon = 60 .* below 161,.*115 for the narrowest.*at least 1\.34"
    ):
        net = DPNeuralNetRegressor(epsilon=0.5, n_samples=120, random_state=0).fit(X, y)
    assert net.n_steps_ == 0 and net.max_epochs_ == 0 and net.noise_multiplier_ is None
    assert net.input_centre_ is None and net.target_centre_.shape == (1,)
    np.testing.assert_allclose(net.predict(X[:5]), np.full(5, net.target_centre_[0]), rtol=1e-6)
    # The median lies in the bulk of the target (its cells are 4.7 % wide).
    assert np.quantile(y, 0.2) <= net.target_centre_[0] <= np.quantile(y, 0.8)
    # The one release is on the ledger, at the whole budget (a declared size: no count).
    (event,) = net.privacy_ledger_.events
    assert isinstance(event, PureDPEvent) and event.neighbouring == ADD_REMOVE and event.count == 1
    assert event.epsilon == pytest.approx(0.5, rel=1e-4)
    assert net.privacy_spent_.epsilon == pytest.approx(0.5, rel=1e-3) and net.privacy_spent_.epsilon <= 0.5
    # With the noisy count (300 rows, d + k = 11: n epsilon 150 against 270):
    # the count, then the median at what the staged filter leaves, within the budget.
    X10, y10 = _fallback_data(300, 10)
    with pytest.warns(UserWarning, match="private median"):
        auto = DPNeuralNetRegressor(epsilon=0.5, random_state=0).fit(X10, y10)
    assert [type(e).__name__ for e in auto.privacy_ledger_.events] == ["GaussianEvent", "PureDPEvent"]
    assert auto.privacy_spent_.epsilon <= 0.5 * (1 + 1e-9) and auto.noisy_n_samples_ >= 1
    # A width given by the user, or a budget above the rule: the net trains.
    assert (
        DPNeuralNetRegressor(epsilon=0.5, n_samples=120, module__hidden_units=8, max_epochs=1)
        .fit(X, y)
        .n_steps_
        > 0
    )
    trained = DPNeuralNetRegressor(epsilon=20.0, n_samples=120, max_epochs=1, random_state=0).fit(X, y)
    # The trained default net starts at a private median (at 2 % of epsilon here).
    assert trained.target_centre_.shape == (1,) and trained.n_steps_ > 0


def test_trained_regressor_is_equivariant_to_the_target_units():
    """The default net trains on (y - c) K / s and folds the map back: the target's units do not matter.

    Until 2026-11-28 the net trained on the raw target, whose units set the
    output noise's share: a target of standard deviation 0.33 scored R^2 -7
    at eps 1 (an unseen Friedman set), the same rows times 100 +0.14.  The
    centre and spread are exponential-mechanism medians over the core's log
    grid (50 points per decade), so a target scaled by 100 or 0.01 has its
    cells, its draws and its releases scaled exactly: the same net, its
    predictions scaled by the same factor.
    """
    rng = np.random.default_rng(2)
    n, d = 800, 4
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = (1.3 + 0.3 * np.tanh(X @ np.array([1.0, -0.5, 0.3, 0.0])) + 0.05 * rng.normal(size=n)).astype(
        np.float32
    )
    fits = {}
    for factor in (0.01, 1.0, 100.0):
        fits[factor] = DPNeuralNetRegressor(epsilon=1.0, n_samples=600, random_state=0).fit(
            X[:600], (factor * y[:600]).astype(np.float32)
        )
    base = fits[1.0]
    # The target scale is about the target's standard deviation (its median absolute deviation x 1.4826).
    assert 0.5 * y[:600].std() < base.target_scale_[0] < 2.0 * y[:600].std()
    for factor, net in fits.items():
        np.testing.assert_allclose(net.target_scale_, factor * base.target_scale_, rtol=1e-5)
        # The targets differ in their last float32 bits, which hundreds of noisy steps amplify a
        # little: within 5 % of the target's spread (on the raw target the nets differed by all of it).
        gap = np.max(np.abs(net.predict(X[600:]) - factor * base.predict(X[600:])))
        assert gap <= 0.05 * factor * y[:600].std(), (factor, gap)
    # Above the constant (about .6 without noise); on the raw target at this scale, far below it.
    assert base.score(X[600:], y[600:]) > 0.0


def test_the_fallback_median_is_drawn_at_its_accounted_epsilon():
    """The median's cell is drawn with probability exp(-eps u / 2) / sum: fails if its noise is halved.

    76 rows at 1.01 and 44 at 9.5: the cell of 1.01 is at rank distance 0
    from N / 2 = 60, the ~50 cells up to 9.5 at distance 16, the rest at 60.
    At the accounted epsilon 0.5 the right cell is drawn with probability
    ``p = 1 / (1 + G exp(-4))`` (about 0.52); at epsilon 1 (noise halved)
    about 0.98, at 0.25 about 0.13.  The hits of 80 fits are binomial(80, p):
    accepted within 4.5 standard deviations.
    """
    from skdp.privacy.quantiles import check_grid

    n, low, high = 120, 1.01, 9.5
    y = np.r_[np.full(76, low), np.full(44, high)].astype(np.float32)
    X = np.zeros((n, 1), dtype=np.float32)
    # The exponential mechanism's weights over the grid's cells, written out.
    grid = check_grid(None)
    counts = np.searchsorted(np.sort(y.astype(np.float64)), grid, side="right").astype(float)
    below, above = counts[:-1].copy(), counts[1:].copy()
    below[0], above[-1] = 0.0, n
    distance = np.maximum(below - n / 2, 0) + np.maximum(n / 2 - above, 0)
    weights = np.exp(-0.5 * distance / 2)
    right = int(np.argmin(distance))
    p = weights[right] / weights.sum()
    assert 0.3 < p < 0.7
    midpoint = (grid[right] + grid[right + 1]) / 2
    trials = 80
    hits = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for seed in range(trials):
            net = DPNeuralNetRegressor(epsilon=0.5, n_samples=n, random_state=seed).fit(X, y)
            hits += bool(np.isclose(net.target_centre_[0], midpoint))
    (event,) = net.privacy_ledger_.events
    assert event.epsilon == pytest.approx(0.5, rel=1e-4)
    sd = math.sqrt(trials * p * (1 - p))
    assert abs(hits - trials * p) <= 4.5 * sd


def test_trained_regressor_centre_is_on_the_ledger_at_its_epsilon():
    """The trained default net's starting centre: on the ledger, charged to the steps, drawn at its epsilon.

    ``centre_epsilon`` (public ``n``, ``epsilon``, ``k``): at least 2 % of
    epsilon, at least the epsilon that locates a median (``4 ln(K / 0.05) /
    n``), None above 25 %.  With a declared size and with the noisy count
    the centre is a PureDPEvent at that epsilon on the ledger and the
    steps are calibrated to what is left (``privacy_spent_`` composes the
    ledger and stays within epsilon; a release off the ledger fails the
    first assertion, a step plan that ignores it the second).  The draw:
    80 rows at 1.01 and 40 at 9.5, so the cell of 1.01 is at rank distance
    0 from N / 2 = 60, the ~50 cells up to 9.5 at distance 20, the rest at
    60; at the accounted epsilon (0.337 at n = 120, eps 10) the right cell
    is drawn with probability about 0.37, at twice it (noise halved) about
    0.94.  The hits of 80 fits are binomial(80, p): accepted within 4.5
    standard deviations.
    """
    from skdp.nn._constant import centre_epsilon, median_locatable
    from skdp.privacy.quantiles import check_grid

    n = 120
    assert centre_epsilon(n, 20.0, 1) == pytest.approx(0.4)
    assert centre_epsilon(n, 10.0, 1) == pytest.approx(4 * math.log((check_grid(None).size - 1) / 0.05) / n)
    assert median_locatable(n, centre_epsilon(n, 10.0, 1))
    assert centre_epsilon(n, 1.0, 1) is None  # locating would take a third of epsilon
    X, y = _fallback_data()
    for n_samples in (n, "auto"):
        net = DPNeuralNetRegressor(epsilon=10.0, n_samples=n_samples, max_epochs=1, random_state=0).fit(X, y)
        size = n if n_samples == n else net.noisy_n_samples_
        # The centre and the spread (the target map, since 2026-11-28): two medians at the
        # epsilon of 2 k releases (here the locating one, as for k releases).
        assert centre_epsilon(size, 10.0, 2, 0.5) == centre_epsilon(size, 10.0, 1)
        centres = [
            e
            for e in net.privacy_ledger_.events
            if isinstance(e, PureDPEvent) and e.epsilon == centre_epsilon(size, 10.0, 2, 0.5)
        ]
        assert len(centres) == 2 and all(e.neighbouring == ADD_REMOVE for e in centres)
        assert net.target_centre_.shape == (1,) and net.target_scale_.shape == (1,)
        spent = compose(net.privacy_ledger_.events, DELTA, net.composition)
        # A declared size reports the ledger's composition; the noisy count's
        # staged filter its guarantee, which covers it.
        assert spent.epsilon <= net.privacy_spent_.epsilon * (1 + 1e-9) <= 10.0 * (1 + 1e-9) ** 2
        if n_samples == n:
            assert net.privacy_spent_.epsilon == pytest.approx(spent.epsilon, rel=1e-9)
    # A module or a width given by the user: no centre, no scale.
    given = DPNeuralNetRegressor(epsilon=10.0, n_samples=n, module__hidden_units=8, max_epochs=1).fit(X, y)
    assert given.target_centre_ is None and given.target_scale_ is None

    low, high = 1.01, 9.5
    y = np.r_[np.full(80, low), np.full(40, high)].astype(np.float32)
    X = np.random.default_rng(0).normal(size=(n, 1)).astype(np.float32)
    eps = centre_epsilon(n, 10.0, 1)
    grid = check_grid(None)
    counts = np.searchsorted(np.sort(y.astype(np.float64)), grid, side="right").astype(float)
    below, above = counts[:-1].copy(), counts[1:].copy()
    below[0], above[-1] = 0.0, n
    distance = np.maximum(below - n / 2, 0) + np.maximum(n / 2 - above, 0)
    right = int(np.argmin(distance))

    def p_right(epsilon):
        weights = np.exp(-epsilon * distance / 2)
        return weights[right] / weights.sum()

    p = p_right(eps)
    assert 0.3 < p < 0.45 and p_right(2 * eps) > 0.9
    midpoint = (grid[right] + grid[right + 1]) / 2
    trials, hits = 80, 0
    for seed in range(trials):
        net = DPNeuralNetRegressor(epsilon=10.0, n_samples=n, max_epochs=1, random_state=seed).fit(X, y)
        hits += bool(np.isclose(net.target_centre_[0], midpoint))
    sd = math.sqrt(trials * p * (1 - p))
    assert abs(hits - trials * p) <= 4.5 * sd
