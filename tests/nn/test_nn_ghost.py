"""Ghost clipping (issue 12): exact equivalence with per-example clipping, fallback, accounting."""

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("skorch")

from skdp.nn import (  # noqa: E402
    DPNeuralNetClassifier,
    DPNeuralNetRegressor,
    DPSGDEngine,
    FixedClipping,
    GhostClipping,
    GhostClippingFallbackWarning,
    VmapPerExampleGradients,
    dpsgd_step_event,
    find_unsupported_layer,
)
from skdp.nn._ghost import _synthetic_batch, linear_form_sq_norms, uses_ghost_norm  # noqa: E402
from skdp.privacy import ADD_REMOVE, PrivacyLedger  # noqa: E402

F64 = torch.float64


# ------------------------------------------------------------ random models ---


class SeqModel(torch.nn.Module):
    """Embedding -> LayerNorm -> Linear on sequences -> Conv1d -> Linear."""

    def __init__(self, hidden=6, seq_linear_out=5):
        super().__init__()
        self.emb = torch.nn.Embedding(11, hidden, padding_idx=0)
        self.norm = torch.nn.LayerNorm(hidden)
        self.lin = torch.nn.Linear(hidden, seq_linear_out)
        self.conv = torch.nn.Conv1d(seq_linear_out, 4, 3, padding=2, dilation=2, padding_mode="reflect")
        self.out = torch.nn.Linear(4, 3)

    def forward(self, x):
        h = torch.tanh(self.lin(self.norm(self.emb(x))))
        return self.out(self.conv(h.transpose(1, 2)).mean(-1))


class ImageModel(torch.nn.Module):
    """Conv2d (stride, 'valid') -> grouped dilated Conv2d ('same') -> LayerNorm over (C, H, W) -> Linear."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(2, 4, 3, stride=2)
        self.c2 = torch.nn.Conv2d(4, 6, 3, padding="same", groups=2, dilation=2, padding_mode="circular")
        self.norm = torch.nn.LayerNorm((6, 4, 4))
        self.lin = torch.nn.Linear(96, 3)

    def forward(self, x):
        h = torch.relu(self.c2(torch.relu(self.c1(x))))
        return self.lin(self.norm(h).flatten(1))


class SharedLinear(torch.nn.Module):
    """One Linear applied twice (weight sharing: the uses add up per example)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 5)
        self.out = torch.nn.Linear(5, 3)

    def forward(self, x):
        return self.out(torch.tanh(self.lin(torch.tanh(self.lin(x)))))


class MixedCNN(torch.nn.Module):
    """One layer in each branch of the mixed rule (2 T^2 < p d: ghost), Conv1d and Conv2d."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 4, 3)  # 10x10 -> 8x8: T = 64, d = 9, p = 4: per-example
        self.c2 = torch.nn.Conv2d(4, 16, 3, stride=2)  # -> 3x3: T = 9, d = 36, p = 16: ghost
        self.c3 = torch.nn.Conv1d(16, 8, 3, padding=1, groups=2)  # T = 9, d = 24, p = 4: per-example
        self.c4 = torch.nn.Conv1d(8, 12, 7, stride=3)  # T = 1, d = 56, p = 12: ghost
        self.lin = torch.nn.Linear(12, 3)

    def forward(self, x):
        h = torch.relu(self.c2(torch.relu(self.c1(x))))
        h = torch.tanh(self.c3(h.flatten(2)))
        return self.lin(torch.tanh(self.c4(h)).flatten(1))


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 3))


def _long_sequence():
    # 40 positions, d * p = 2 * 3 < 40^2: the mixed rule forms per-example gradients.
    return torch.nn.Sequential(
        torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Flatten(), torch.nn.Linear(120, 3)
    )


def _frozen_bias():
    m = _mlp()
    m[0].bias.requires_grad_(False)
    return m


CASES = {
    "linear": (_mlp, lambda g: torch.randn(9, 5, generator=g, dtype=F64)),
    "sequence+embedding+layernorm+conv1d": (SeqModel, lambda g: torch.randint(0, 11, (9, 8), generator=g)),
    "conv2d+layernorm": (ImageModel, lambda g: torch.randn(9, 2, 9, 9, generator=g, dtype=F64)),
    "linear, long sequence (mixed rule)": (
        _long_sequence,
        lambda g: torch.randn(9, 40, 2, generator=g, dtype=F64),
    ),
    "conv, both branches of the mixed rule": (
        MixedCNN,
        lambda g: torch.randn(9, 1, 10, 10, generator=g, dtype=F64),
    ),
    "shared weights": (SharedLinear, lambda g: torch.randn(9, 5, generator=g, dtype=F64)),
    "frozen parameter": (_frozen_bias, lambda g: torch.randn(9, 5, generator=g, dtype=F64)),
}


def _loss(module, x, y):
    out = module(x)
    return torch.nn.functional.cross_entropy(out, y), out


def _batch_loss(module, x, y):
    out = module(x)
    return torch.nn.functional.cross_entropy(out, y, reduction="none"), out


def _make(case, seed):
    torch.manual_seed(seed)
    factory, make_x = CASES[case]
    module = factory().to(F64)
    g = torch.Generator().manual_seed(seed)
    x, y = make_x(g), torch.randint(0, 3, (9,), generator=g)
    return module, x, y


def _rel_err(a, b):
    return float((a - b).norm() / b.norm().clamp(min=1e-300))


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_ghost_clipped_sum_equals_vmap_reference(case, seed):
    module, x, y = _make(case, seed)
    assert find_unsupported_layer(module) is None
    norms = VmapPerExampleGradients().clipped_sum(module, _loss, (x, y), lambda n: 1.0).norms
    C = float(norms.median())  # clips about half of the examples, so the factors matter
    ref = VmapPerExampleGradients().clipped_sum(module, _loss, (x, y), lambda n: C)
    got = GhostClipping(_batch_loss).clipped_sum(module, _loss, (x, y), lambda n: C)
    assert 0 < int((ref.norms > C).sum()) < len(y)
    assert _rel_err(got.norms, ref.norms) < 1e-10
    assert set(got.grads) == set(ref.grads) == {k for k, p in module.named_parameters() if p.requires_grad}
    for name in ref.grads:
        assert got.grads[name].shape == ref.grads[name].shape
        assert _rel_err(got.grads[name], ref.grads[name]) < 1e-5, name
    torch.testing.assert_close(got.losses, ref.losses)
    torch.testing.assert_close(got.aux, ref.aux)


def test_linear_form_norms_equal_explicit_per_example_gradients():
    g = torch.Generator().manual_seed(0)
    for T, d, p in [(1, 4, 3), (3, 4, 3), (9, 2, 3)]:  # T = 1, Gram form, mixed rule
        A, G = (
            torch.randn(5, 2, d, T, generator=g, dtype=F64),
            torch.randn(5, 2, p, T, generator=g, dtype=F64),
        )
        explicit = torch.stack(
            [sum((G[i, h] @ A[i, h].T).square().sum() for h in range(2)) for i in range(5)]
        )
        torch.testing.assert_close(linear_form_sq_norms(A, G), explicit, rtol=1e-12, atol=0)


def test_mixed_rule_is_bu_et_al_2T2_below_pd():
    assert uses_ghost_norm(1, 1, 1)  # one position: ||g||^2 ||a||^2
    assert uses_ghost_norm(4, 9, 8) and not uses_ghost_norm(6, 9, 8)  # 32 < 72 < 72 is false
    assert not uses_ghost_norm(6, 8, 9) and uses_ghost_norm(5, 8, 9)


def test_each_layer_takes_the_branch_of_the_rule_and_both_branches_give_exact_norms(monkeypatch):
    """Per layer: ghost (no per-example tensor) iff 2 T^2 < p d, norms equal torch.func's per layer."""
    from torch.func import functional_call, grad, vmap

    from skdp.nn import _ghost

    module, x, y = _make("conv, both branches of the mixed rule", 0)
    seen = {}
    original = _ghost._LinearRule.norms_and_state.__func__

    def spy(cls, layer, calls):
        sq, state = original(cls, layer, calls)
        seen[layer] = (cls.form(layer, calls), state["per_example"] is not None, sq.detach().clone())
        return sq, state

    monkeypatch.setattr(_ghost._LinearRule, "norms_and_state", classmethod(spy))
    GhostClipping(_batch_loss).clipped_sum(module, _loss, (x, y), lambda n: 1.0)
    params = {k: v.detach() for k, v in module.named_parameters()}

    def one(p, xi, yi):
        return torch.nn.functional.cross_entropy(functional_call(module, p, (xi[None],)), yi[None])

    per_sample = vmap(grad(one), in_dims=(None, 0, 0))(params, x, y)
    expected_branch = {"c1": False, "c2": True, "c3": False, "c4": True, "lin": True}
    for name, layer in module.named_children():
        (T, d, p), formed = seen[layer][:2]
        assert formed == (not uses_ghost_norm(T, d, p)), name
        assert formed == (not expected_branch[name]), name
        exact = per_sample[f"{name}.weight"].flatten(1).square().sum(1)
        exact = exact + per_sample[f"{name}.bias"].square().sum(1)
        torch.testing.assert_close(seen[layer][2], exact, rtol=1e-10, atol=0)


def test_padding_idx_gets_no_gradient():
    module, x, y = _make("sequence+embedding+layernorm+conv1d", 0)
    x[:, :3] = 0
    got = GhostClipping(_batch_loss).clipped_sum(module, _loss, (x, y), lambda n: 1.0)
    ref = VmapPerExampleGradients().clipped_sum(module, _loss, (x, y), lambda n: 1.0)
    assert float(got.grads["emb.weight"][0].abs().max()) == 0.0
    assert _rel_err(got.grads["emb.weight"], ref.grads["emb.weight"]) < 1e-10


def test_each_clipped_example_respects_the_bound():
    module, x, y = _make("conv2d+layernorm", 3)
    for i in range(4):
        one = GhostClipping(_batch_loss).clipped_sum(
            module, _loss, (x[i : i + 1], y[i : i + 1]), lambda n: 0.05
        )
        total = math.sqrt(sum(float(v.square().sum()) for v in one.grads.values()))
        assert one.norms[0] > 0.05 and total == pytest.approx(0.05, rel=1e-9)


def test_batch_loss_of_wrong_shape_is_refused():
    module, x, y = _make("linear", 0)
    with pytest.raises(ValueError, match=r"per-example losses of shape \(9,\)"):
        GhostClipping(_loss).clipped_sum(module, _loss, (x, y), lambda n: 1.0)


# ------------------------------------------------------------ engine / modes ---


def _engine(module, **kw):
    params = dict(
        noise_multiplier=1.3,
        sampling_rate=0.5,
        expected_batch_size=4.0,
        clipping=FixedClipping(0.7),
        max_steps=50,
        generator=torch.Generator().manual_seed(0),
        batch_loss_fn=_batch_loss,
    )
    params.update(kw)
    return DPSGDEngine(module, _loss, **params)


def test_engine_mode_selection():
    assert _engine(_mlp()).clipping_mode == "ghost"
    assert _engine(_mlp(), clipping_mode="vmap").clipping_mode == "vmap"
    # Without a batch loss the engine keeps its former behaviour (vmap).
    assert _engine(_mlp(), batch_loss_fn=None).clipping_mode == "vmap"
    with pytest.raises(ValueError, match="needs batch_loss_fn"):
        _engine(_mlp(), batch_loss_fn=None, clipping_mode="ghost")
    with pytest.raises(ValueError, match="clipping_mode must be"):
        _engine(_mlp(), clipping_mode="fast")
    with pytest.raises(ValueError, match="not both"):
        _engine(_mlp(), per_example=VmapPerExampleGradients(), clipping_mode="ghost")


class WithGroupNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 4)
        self.gn = torch.nn.GroupNorm(2, 4)
        self.head = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.head(torch.relu(self.gn(self.lin(x))))


def test_unsupported_layer_falls_back_to_vmap_once_with_its_name():
    with pytest.warns(GhostClippingFallbackWarning, match=r"'gn' \(GroupNorm") as record:
        engine = _engine(WithGroupNorm())
    assert len(record) == 1 and engine.clipping_mode == "vmap"
    assert find_unsupported_layer(torch.nn.MultiheadAttention(4, 2))[0] == "<root>"
    assert (
        "scale_grad_by_freq" in find_unsupported_layer(torch.nn.Embedding(3, 2, scale_grad_by_freq=True))[1]
    )
    # The steps themselves warn no more.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            engine.step(
                (torch.randn(6, 5), torch.randint(0, 3, (6,))), PrivacyLedger(neighbouring=ADD_REMOVE)
            )


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(6, 4)
        self.out = torch.nn.Linear(4, 6)
        self.out.weight = self.emb.weight

    def forward(self, x):
        return self.out(torch.tanh(self.emb(x)))


def test_tied_weights_are_unsupported():
    module = Tied()
    name, reason = find_unsupported_layer(module)
    assert name == "out" and "tied" in reason
    with pytest.warns(GhostClippingFallbackWarning, match="tied"):
        assert _engine(module).clipping_mode == "vmap"
    # Used directly, the strategy refuses rather than return a wrong (too small) norm.
    with pytest.raises(ValueError, match="tied"):
        GhostClipping(_batch_loss).clipped_sum(
            module, _loss, (torch.tensor([1, 2]), torch.tensor([0, 1])), float
        )


def test_in_place_activation_falls_back_once():
    module = torch.nn.Sequential(
        torch.nn.Linear(5, 7), torch.nn.ReLU(inplace=True), torch.nn.Linear(7, 3)
    ).double()
    x, y = torch.randn(9, 5, dtype=F64), torch.randint(0, 3, (9,))
    ref = VmapPerExampleGradients().clipped_sum(module, _loss, (x, y), lambda n: 0.5)
    strategy = GhostClipping(_batch_loss)
    with pytest.warns(GhostClippingFallbackWarning, match="in place"):
        got = strategy.clipped_sum(module, _loss, (x, y), lambda n: 0.5)
    assert strategy.name == "vmap"
    for name in ref.grads:
        torch.testing.assert_close(got.grads[name], ref.grads[name])


@pytest.mark.parametrize("mode", ["ghost", "vmap"])
def test_engine_noise_is_sigma_times_clip_in_both_modes(mode):
    """std of (L * grad - clipped sum) is sigma * C: fails if the noise is halved or skipped."""
    module, x, y = _make("linear", 0)
    C, sigma, L = 0.3, 1.7, 4.0
    clipped = VmapPerExampleGradients().clipped_sum(module, _loss, (x, y), lambda n: C).grads
    engine = _engine(module, clipping_mode=mode, clipping=FixedClipping(C), noise_multiplier=sigma)
    ledger = PrivacyLedger(neighbouring=ADD_REMOVE)
    residuals = []
    for _ in range(50):
        engine.step((x, y), ledger)
        residuals += [(p.grad * L - clipped[k]).flatten() for k, p in module.named_parameters()]
    r = torch.cat(residuals)
    assert abs(float(r.std()) / (sigma * C) - 1) < 5 / math.sqrt(2 * r.numel())
    assert ledger.events == [dpsgd_step_event(sigma, 0.5)] * 50


def test_ghost_engine_empty_batch_gets_noise_and_an_event():
    module = _mlp()
    engine = _engine(module)
    ledger = PrivacyLedger(neighbouring=ADD_REMOVE)
    res = engine.step((torch.zeros(0, 5), torch.zeros(0, dtype=torch.long)), ledger)
    assert res.batch_size == 0 and len(ledger) == 1
    assert all(float(p.grad.abs().sum()) > 0 for p in module.parameters())


# ------------------------------------------------------------------- nets ---


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 5)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    return X, y


def _net(cls=DPNeuralNetClassifier, **kw):
    params = dict(lr=0.5, max_epochs=2, batch_size=30, verbose=0, random_state=0, epsilon=1.0)
    if cls is DPNeuralNetClassifier:
        params["classes"] = [0, 1]
    params.update(kw)
    return cls(**params)


@pytest.mark.parametrize("clip_norm", [0.5, "auto"])
def test_nets_ghost_and_vmap_train_the_same_model_with_the_same_privacy(data, clip_norm):
    X, y = data
    kw = dict(clip_norm=clip_norm, clip_norm_max=3.0)
    ghost = _net(**kw).fit(X, y)
    vmap = _net(clipping_mode="vmap", **kw).fit(X, y)
    assert ghost.clipping_mode_ == "ghost" and vmap.clipping_mode_ == "vmap"
    assert ghost.privacy_spent_ == vmap.privacy_spent_
    assert ghost.privacy_ledger_.events == vmap.privacy_ledger_.events
    # Same seeds, same clipped sums up to rounding: the same noisy steps and parameters.
    clip_g = [b["clip_norm"] for e in ghost.history for b in e["batches"]]
    clip_v = [b["clip_norm"] for e in vmap.history for b in e["batches"]]
    assert clip_g == clip_v
    for (name, pg), (_, pv) in zip(
        ghost.module_.named_parameters(), vmap.module_.named_parameters(), strict=True
    ):
        torch.testing.assert_close(pg, pv, rtol=1e-4, atol=1e-5, msg=name)
    # (The history records no training loss: an exact loss is not a release.)
    np.testing.assert_allclose(ghost.predict_proba(X), vmap.predict_proba(X), rtol=1e-4, atol=1e-5)


def test_regressor_ghost_matches_vmap(data):
    X, y = data
    yr = X @ np.array([1.0, -1.0, 0.5, 0.0, 0.0], dtype=np.float32)
    kw = dict(module=torch.nn.Linear, module__in_features=5, module__out_features=1, lr=0.1)
    ghost = _net(DPNeuralNetRegressor, **kw).fit(X, yr)
    vmap = _net(DPNeuralNetRegressor, clipping_mode="vmap", **kw).fit(X, yr)
    assert ghost.clipping_mode_ == "ghost"
    np.testing.assert_allclose(ghost.predict(X), vmap.predict(X), rtol=1e-4, atol=1e-5)
    assert ghost.privacy_spent_ == vmap.privacy_spent_


def test_net_with_unsupported_layer_falls_back_with_one_notice(data):
    X, y = data
    with pytest.warns(GhostClippingFallbackWarning, match="'gn'") as record:
        net = _net(module=WithGroupNorm, criterion=torch.nn.CrossEntropyLoss, classes=[0, 1, 2]).fit(X, y)
    assert len([w for w in record if w.category is GhostClippingFallbackWarning]) == 1
    assert net.clipping_mode_ == "vmap"
    assert net.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-5)


def test_net_bad_clipping_mode(data):
    X, y = data
    with pytest.raises(ValueError, match="clipping_mode must be 'ghost' or 'vmap'"):
        _net(clipping_mode="ghostly").fit(X, y)


# ---------------------------------------------------- secure noise (issue 10) ---


def test_secure_noise_setting_is_refused_before_data_and_budget(data):
    from skdp import config_context
    from skdp.privacy import BudgetAccountant

    X, y = data
    X_bad = X.copy()
    X_bad[0, 0] = np.nan  # the refusal comes before data validation
    budget = BudgetAccountant(epsilon=10.0, delta=1e-3, neighbouring=ADD_REMOVE)
    with config_context(secure_noise=True):
        with pytest.raises(ValueError, match="secure_noise=True"):
            _net(accountant=budget).fit(X_bad, y)
        with pytest.raises(ValueError, match="secure_noise=True"):
            _net(clipping_mode="vmap").fit(X, y)
        # The estimator's own setting overrides the package-wide one.
        net = _net(secure_noise=False, accountant=budget).fit(X, y)
    assert net.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-5)
    assert len(budget.history) == 1 and budget.spent.epsilon == pytest.approx(1.0, rel=1e-5)
    with pytest.raises(ValueError, match="secure_noise=True"):
        _net(secure_noise=True).fit(X, y)
    with pytest.raises(ValueError, match="secure_noise must be"):
        _net(secure_noise="yes").fit(X, y)


def test_engine_refuses_to_step_under_secure_noise():
    from skdp import config_context

    module = _mlp()
    with config_context(secure_noise=True), pytest.raises(ValueError, match="secure_noise=True"):
        _engine(module)
    engine = _engine(module)
    ledger = PrivacyLedger(neighbouring=ADD_REMOVE)
    with config_context(secure_noise=True), pytest.raises(ValueError, match="floating-point"):
        engine.step((torch.randn(4, 5), torch.randint(0, 3, (4,))), ledger)
    assert len(ledger) == 0 and all(p.grad is None for p in module.parameters())


# ------------------------------------------------- layers that are not batch-first ---


class PositionalEmbedding(torch.nn.Module):
    """Token embedding plus a positional Embedding(arange(T)) shared by the whole batch."""

    def __init__(self, T=4):
        super().__init__()
        self.tok = torch.nn.Embedding(7, 3)
        self.pos = torch.nn.Embedding(T, 3)
        self.out = torch.nn.Linear(3, 3)

    def forward(self, x):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        return self.out(h.mean(1))


class SequenceFirst(torch.nn.Module):
    """A Linear fed (T, B, d): its leading dimension is T, not the batch."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 3)
        self.out = torch.nn.Linear(3, 3)

    def forward(self, x):  # x: (B, T, 2)
        return self.out(torch.tanh(self.lin(x.transpose(0, 1))).mean(0))


class BatchShared(torch.nn.Module):
    """A Linear applied to a constant (1, d) tensor whose output is broadcast over the batch."""

    def __init__(self):
        super().__init__()
        self.bias_net = torch.nn.Linear(2, 3)
        self.out = torch.nn.Linear(5, 3)

    def forward(self, x):
        return self.out(x) + self.bias_net(torch.ones(1, 2, dtype=x.dtype))


NOT_BATCH_FIRST = {
    # T == B == 4: the leading dimensions coincide with the batch on the real step.
    "positional embedding, T == B": (
        PositionalEmbedding,
        lambda g: torch.randint(0, 7, (4, 4), generator=g),
        "pos",
    ),
    "positional embedding, T != B": (
        PositionalEmbedding,
        lambda g: torch.randint(0, 7, (6, 4), generator=g),
        "pos",
    ),
    "sequence-first Linear, T == B": (
        SequenceFirst,
        lambda g: torch.randn(5, 5, 2, generator=g, dtype=F64),
        "lin",
    ),
    "batch-shared Linear": (BatchShared, lambda g: torch.randn(6, 5, generator=g, dtype=F64), "bias_net"),
}


@pytest.mark.parametrize("case", list(NOT_BATCH_FIRST))
def test_layer_that_is_not_batch_first_falls_back_to_exact_clipping(case):
    """Ghost norms of such a layer would be wrong (too small: a broken sensitivity); vmap is exact."""
    factory, make_x, layer = NOT_BATCH_FIRST[case]
    torch.manual_seed(0)
    module = factory().to(F64)
    g = torch.Generator().manual_seed(0)
    x = make_x(g)
    y = torch.randint(0, 3, (x.shape[0],), generator=g)
    ref = VmapPerExampleGradients().clipped_sum(module, _loss, (x, y), lambda n: 0.05)
    strategy = GhostClipping(_batch_loss)
    with pytest.warns(GhostClippingFallbackWarning, match=f"'{layer}'.*batch-first"):
        got = strategy.clipped_sum(module, _loss, (x, y), lambda n: 0.05)
    assert strategy.name == "vmap"
    torch.testing.assert_close(got.norms, ref.norms)
    for name in ref.grads:
        torch.testing.assert_close(got.grads[name], ref.grads[name])
    # The notice is given once: later steps go straight to vmap.
    with warnings.catch_warnings():
        warnings.simplefilter("error", GhostClippingFallbackWarning)
        strategy.clipped_sum(module, _loss, (x, y), lambda n: 0.05)


def test_layout_probe_leaves_torch_random_state_alone():
    """The one-off probe forward must not shift the draws of training (dropout here)."""
    module = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Dropout(0.5), torch.nn.Linear(7, 3)).double()
    x, y = torch.randn(9, 5, dtype=F64), torch.randint(0, 3, (9,))
    torch.manual_seed(3)
    GhostClipping(_batch_loss).clipped_sum(module, _loss, (x, y), lambda n: 0.5)
    after_probe = torch.rand(3)
    probed = GhostClipping(_batch_loss)
    probed._probed = True  # as if probed before: same step without the probe
    torch.manual_seed(3)
    probed.clipped_sum(module, _loss, (x, y), lambda n: 0.5)
    torch.testing.assert_close(torch.rand(3), after_probe)


# ------------------------------------- per-example contract (issue 18, break 5) ---


class Centred(torch.nn.Module):
    """Hidden units centred over the batch: every loss depends on every example."""

    def __init__(self, detach=False):
        super().__init__()
        self.lin = torch.nn.Linear(5, 16)
        self.out = torch.nn.Linear(16, 3)
        self.detach = detach

    def forward(self, x):
        h = self.lin(x)
        mean = h.mean(0)
        return self.out(torch.relu(h - (mean.detach() if self.detach else mean)))


class TimesBatchSize(torch.nn.Module):
    """Outputs scaled by the batch size: no value of another example is read, but one more moves all."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 3)

    def forward(self, x):
        return self.lin(x) * x.shape[0]


class TokensCentred(torch.nn.Module):
    """Integer inputs; embeddings centred over the batch outside autograd."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 4)
        self.out = torch.nn.Linear(4, 3)

    def forward(self, x):
        e = self.emb(x).mean(1)
        return self.out(e - e.mean(0).detach())


class Mixup(torch.nn.Module):
    """Training-time mixing of each example with a random other one (dropout-like randomness too)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 8)
        self.drop = torch.nn.Dropout(0.3)
        self.out = torch.nn.Linear(8, 3)

    def forward(self, x):
        h = self.drop(torch.tanh(self.lin(x)))
        if self.training:
            h = 0.5 * (h + h[torch.randperm(h.shape[0])])
        return self.out(h)


MIXING = {
    "x - x.mean(0)": (Centred, lambda g: torch.randn(9, 5, generator=g)),
    "x - x.mean(0).detach()": (lambda: Centred(detach=True), lambda g: torch.randn(9, 5, generator=g)),
    "output * batch size": (TimesBatchSize, lambda g: torch.randn(9, 5, generator=g)),
    "integer inputs, detached centring": (TokensCentred, lambda g: torch.randint(0, 11, (9, 3), generator=g)),
    "mixup in training mode": (Mixup, lambda g: torch.randn(9, 5, generator=g)),
}


def _summed_clipped_step(module, x, y, C, mode=None):
    """One engine step with negligible noise; returns expected_batch_size * grad = the clipped sum."""
    engine = _engine(
        module,
        clipping_mode=mode,
        clipping=FixedClipping(C),
        noise_multiplier=1e-12,
        expected_batch_size=1.0,
    )
    engine.step((x, y), PrivacyLedger(neighbouring=ADD_REMOVE))
    return torch.cat([p.grad.flatten() for p in module.parameters()]), engine


@pytest.mark.parametrize("mode", [None, "ghost", "vmap"])
def test_one_added_record_moves_the_clipped_sum_by_at_most_C_for_a_batch_mixing_module(mode):
    """Neighbouring batches (one record added) under the default (ghost) engine.

    Ghost norms of a module computing ``h - h.mean(0)`` read every example's
    loss off each row, so without the contract check the sum moved by about
    6 C here (vmap evaluates each example alone: exactly C).
    """
    torch.manual_seed(0)
    module = Centred()
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(21, 5, generator=g), torch.randint(0, 3, (21,), generator=g)
    x[-1] *= 100  # the added record: a large gradient, clipped to C
    C = 0.1
    sums, notices, modes = [], [], []
    for n in (20, 21):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always", GhostClippingFallbackWarning)
            total, engine = _summed_clipped_step(module, x[:n], y[:n], C, mode)
        sums.append(total)
        notices += [w for w in record if w.category is GhostClippingFallbackWarning]
        modes.append(engine.clipping_mode)
    assert float((sums[1] - sums[0]).norm()) <= C * (1 + 1e-5)
    assert modes == ["vmap", "vmap"]
    assert len(notices) == (0 if mode == "vmap" else 2)  # one per engine (fit)
    assert all("this module" in str(w.message) for w in notices)


@pytest.mark.parametrize("case", list(MIXING))
def test_batch_mixing_modules_fall_back_to_vmap_with_one_notice(case):
    factory, make_x = MIXING[case]
    torch.manual_seed(0)
    module = factory()
    g = torch.Generator().manual_seed(1)
    x = make_x(g)
    y = torch.randint(0, 3, (x.shape[0],), generator=g)
    strategy = GhostClipping(_batch_loss)
    with pytest.warns(GhostClippingFallbackWarning, match="this module") as record:
        strategy.clipped_sum(module, _loss, (x, y), lambda n: 0.1)
    assert len(record) == 1 and strategy.name == "vmap"
    with warnings.catch_warnings():
        warnings.simplefilter("error", GhostClippingFallbackWarning)
        strategy.clipped_sum(module, _loss, (x, y), lambda n: 0.1)


def _dropout_mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(5, 7), torch.nn.Dropout(0.5), torch.nn.ReLU(), torch.nn.Linear(7, 3)
    )


def _own_generator_noise():
    """A Linear net adding noise from a generator of its own (as the VAE's reparametrisation does)."""

    class Noisy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(5, 3)
            self.gen = torch.Generator().manual_seed(0)

        def forward(self, x):
            out = self.lin(x)
            return out + torch.randn(out.shape, generator=self.gen, dtype=out.dtype)

    return Noisy()


PER_EXAMPLE = {
    **CASES,
    "dropout": (_dropout_mlp, CASES["linear"][1]),
    "own random generator": (_own_generator_noise, CASES["linear"][1]),
}


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("case", list(PER_EXAMPLE))
def test_per_example_modules_keep_ghost_clipping_without_notice(case, dtype):
    """MLP, Embedding, LayerNorm, Conv, shared weights, dropout: the probe passes in float32 and float64."""
    torch.manual_seed(0)
    factory, make_x = PER_EXAMPLE[case]
    module = factory().to(dtype)
    g = torch.Generator().manual_seed(0)
    x = make_x(g)
    x = x.to(dtype) if x.is_floating_point() else x
    y = torch.randint(0, 3, (x.shape[0],), generator=g)
    strategy = GhostClipping(_batch_loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GhostClippingFallbackWarning)
        strategy.clipped_sum(module, _loss, (x, y), lambda n: 0.5)
        assert _engine(module).clipping_mode == "ghost"
    assert strategy.name == "ghost" and strategy._fallback is None


def test_contract_probe_reads_shapes_and_dtypes_only():
    """The decision is the same for a batch of NaNs: the probe never evaluates the real values."""
    x, y = torch.randn(9, 5, dtype=F64), torch.randint(0, 3, (9,))
    nan = torch.full_like(x, float("nan"))
    torch.testing.assert_close(
        _synthetic_batch((x, y), 8, 0), _synthetic_batch((nan, y + 1), 8, 0), equal_nan=False
    )
    for module, expected in ((_mlp().double(), "ghost"), (Centred().double(), "vmap")):
        for batch in ((x, y), (nan, y)):
            strategy = GhostClipping(_batch_loss)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", GhostClippingFallbackWarning)
                strategy.clipped_sum(module, _loss, batch, lambda n: 0.5)
            assert strategy.name == expected


def test_contract_probe_leaves_the_module_as_it_found_it():
    """Dropout back in training mode, buffers a custom forward updates restored, no .grad written."""

    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = _dropout_mlp()
            self.register_buffer("calls", torch.zeros(()))

        def forward(self, x):
            self.calls += 1
            return self.net(x)

    module = Counting().double()
    x, y = torch.randn(9, 5, dtype=F64), torch.randint(0, 3, (9,))
    GhostClipping(_batch_loss).clipped_sum(module, _loss, (x, y), lambda n: 0.5)
    assert module.net[1].training
    assert float(module.calls) == 1  # the real forward only; the probes' passes are undone
    assert all(p.grad is None for p in module.parameters())


def test_net_with_batch_mixing_module_falls_back_with_one_notice(data):
    X, y = data
    with pytest.warns(GhostClippingFallbackWarning, match="this module") as record:
        net = _net(module=Centred, criterion=torch.nn.CrossEntropyLoss, classes=[0, 1, 2]).fit(X, y)
    assert len([w for w in record if w.category is GhostClippingFallbackWarning]) == 1
    assert net.clipping_mode_ == "vmap"


def test_overflowing_norms_clip_to_zero_not_nan():
    # One row of 6e18 (found by the hostile-input suite): in float32 the
    # activation's squared norm overflows to inf and meets the zero output
    # gradient of a ReLU that is off, inf * 0 = NaN.  The example must count
    # as infinitely large (factor 0, contribution 0 <= C), not poison the sum.
    X = np.full((1, 9), 6.1489146e18)
    net = DPNeuralNetClassifier(
        classes=[0, 1],
        noise_multiplier=1.0,
        epsilon=None,
        max_epochs=1,
        batch_size=16,
        random_state=0,
        verbose=0,
    ).fit(X, np.array([1]))
    assert net.clipping_mode_ == "ghost"
    for name, p in net.module_.named_parameters():
        assert torch.isfinite(p).all(), name


def test_a_norm_that_overflows_the_float_type_gets_a_zero_factor():
    # Found by tests/test_hostile_input.py (X = [[1.18e29]]): the float32 squared norm
    # overflows to inf, which torch.nan_to_num used to turn into the largest float
    # (a norm of 1.8e19), so the factor was tiny but not 0 and the "clipped" sum
    # overflowed to inf: a gradient beyond the bound C. Inf must stay inf (factor 0).
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(1, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    x = torch.tensor([[1.18e29], [0.5]], dtype=torch.float32)
    y = torch.zeros(2, 1)

    def loss(m, x, y):
        out = m(x)
        return torch.nn.functional.mse_loss(out, y), out

    def batch_loss(m, x, y):
        out = m(x)
        return torch.nn.functional.mse_loss(out, y, reduction="none").sum(1), out

    result = GhostClipping(batch_loss).clipped_sum(net, loss, (x, y), lambda norms: 1.0)
    assert math.isinf(float(result.norms[0])) and math.isfinite(float(result.norms[1]))
    total = torch.sqrt(sum(g.double().square().sum() for g in result.grads.values()))
    assert math.isfinite(float(total)) and float(total) <= 1.0 + 1e-6  # only the finite row, clipped to C


# ----------------------------- probe outcomes cached per configuration (issue 30) ---


@pytest.fixture
def probe_cache(monkeypatch):
    """An empty cache of probe outcomes, and a counter of the contract probes that ran."""
    from skdp.nn import _ghost

    monkeypatch.setattr(_ghost, "_PROBE_OUTCOMES", {})
    runs = []
    original = GhostClipping._probe_contract

    def counted(self, *args):
        runs.append(type(args[0]).__name__)
        return original(self, *args)

    monkeypatch.setattr(GhostClipping, "_probe_contract", counted)
    return runs


class Switch(torch.nn.Module):
    """Per-example unless ``centre`` (a plain attribute, not a parameter): then ``h - h.mean(0)``."""

    def __init__(self, centre=False):
        super().__init__()
        self.lin = torch.nn.Linear(5, 16)
        self.out = torch.nn.Linear(16, 3)
        self.centre = centre

    def forward(self, x):
        h = self.lin(x)
        return self.out(torch.relu(h - h.mean(0) if self.centre else h))


def _keyed_step(module, x, y, key="loss"):
    from skdp.nn._losses import KeyedBatchLoss

    strategy = GhostClipping(KeyedBatchLoss(_batch_loss, key))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always", GhostClippingFallbackWarning)
        strategy.clipped_sum(module, _loss, (x, y), lambda n: 0.5)
    return strategy.name, len([w for w in record if w.category is GhostClippingFallbackWarning])


def test_probe_outcome_is_reused_for_the_same_configuration_only(probe_cache):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(9, 5, generator=g), torch.randint(0, 3, (9,), generator=g)
    torch.manual_seed(0)
    assert _keyed_step(Switch(), x, y) == ("ghost", 0)
    assert _keyed_step(Switch(), x, y) == ("ghost", 0)  # new parameter values, same configuration
    assert probe_cache == ["Switch"]
    # Another value of a plain attribute, another loss key, another batch
    # signature or batch dtype: probed again, and the mixing is caught.
    assert _keyed_step(Switch(centre=True), x, y) == ("vmap", 1)
    assert _keyed_step(Switch(centre=True), x, y) == ("vmap", 1)  # a cached fallback still notifies
    assert probe_cache == ["Switch", "Switch"]
    _keyed_step(Switch(), x, y, key="other loss")
    _keyed_step(Switch(), 2.0 * x, y)  # other values, same signature: cached
    assert len(probe_cache) == 3
    _keyed_step(Switch().double(), x.double(), y)
    assert len(probe_cache) == 4


def test_modules_without_a_configuration_key_are_probed_every_time(probe_cache):
    from skdp.nn._ghost import module_config_key

    class WithTensorAttribute(Switch):
        def __init__(self):
            super().__init__()
            self.mix = torch.zeros(())  # not a parameter or buffer: its value is not in any key

    class WithGenerator(Switch):
        def __init__(self):
            super().__init__()
            self.gen = torch.Generator()

    def closure_attribute():
        module = Switch()
        scale = 1.0
        module.act = lambda h: h * scale
        return module

    hooked = Switch()
    hooked.lin.register_forward_hook(lambda m, i, o: o)
    for module in (WithTensorAttribute(), WithGenerator(), closure_attribute(), hooked):
        assert module_config_key(module) is None
    assert module_config_key(Switch()) == module_config_key(Switch())
    assert module_config_key(Switch()) != module_config_key(Switch(centre=True))
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(9, 5, generator=g), torch.randint(0, 3, (9,), generator=g)
    for _ in range(2):
        _keyed_step(WithTensorAttribute(), x, y)
        GhostClipping(_batch_loss).clipped_sum(Switch(), _loss, (x, y), lambda n: 0.5)  # no loss key
    assert len(probe_cache) == 4
    # torch's global hooks may change any module's forward.
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: o)
    try:
        assert module_config_key(Switch()) is None
    finally:
        handle.remove()


def test_a_probe_that_draws_from_numpy_global_state_is_not_cached(probe_cache):
    class NumpyNoise(Switch):
        def forward(self, x):
            h = self.lin(x)
            return self.out(h + float(np.random.standard_normal()))  # noqa: NPY002 -- the global state

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(9, 5, generator=g), torch.randint(0, 3, (9,), generator=g)
    for _ in range(2):
        _keyed_step(NumpyNoise(), x, y)
    assert len(probe_cache) == 2


def test_net_refits_probe_once_and_a_cached_probe_leaves_the_fit_unchanged(data, probe_cache):
    X, y = data
    first = _net(module=Switch, criterion=torch.nn.CrossEntropyLoss, classes=[0, 1, 2]).fit(X, y)
    again = _net(module=Switch, criterion=torch.nn.CrossEntropyLoss, classes=[0, 1, 2]).fit(X, y)
    assert probe_cache == ["Switch"]
    assert first.clipping_mode_ == again.clipping_mode_ == "ghost"
    for a, b in zip(first.module_.parameters(), again.module_.parameters(), strict=True):
        assert torch.equal(a, b)
    assert first.privacy_spent_ == again.privacy_spent_
    # Another criterion is another loss key; the mixing configuration is caught on its first fit.
    _net(module=Switch, criterion=torch.nn.NLLLoss, classes=[0, 1, 2], module__centre=False).fit(X, y)
    with pytest.warns(GhostClippingFallbackWarning, match="this module"):
        mixing = _net(module=Switch, module__centre=True, criterion=torch.nn.CrossEntropyLoss, classes=[0, 1, 2])
        assert mixing.fit(X, y).clipping_mode_ == "vmap"
    assert len(probe_cache) == 3


def test_strided_unfold_equals_torch_unfold_to_the_bit():
    # Ghost norms of a convolution read its patches from _unfold (a strided
    # view copied once) instead of F.unfold: the same tensor, for every
    # kernel, dilation and stride, and for inputs that are not contiguous.
    import itertools

    import torch.nn.functional as F

    from skdp.nn._ghost import _unfold

    g = torch.Generator().manual_seed(0)
    checked = 0
    for B, C, H, W in [(3, 2, 9, 11), (1, 4, 5, 5), (2, 1, 1, 17)]:
        x = torch.randn(B, C, H, W, generator=g, dtype=F64)
        for kh, kw, dh, dw, sh, sw in itertools.product((1, 3), (1, 2), (1, 2), (1, 3), (1, 2), (1, 3)):
            for xx in (x, x.transpose(2, 3).contiguous().transpose(2, 3), x[:, :, 1:]):
                try:
                    ref = F.unfold(xx, (kh, kw), dilation=(dh, dw), stride=(sh, sw))
                except RuntimeError:  # the kernel does not fit: no convolution either
                    continue
                assert torch.equal(_unfold(xx, (kh, kw), (dh, dw), (sh, sw)), ref)
                checked += 1
    assert checked > 100


def test_a_class_changed_at_run_time_is_another_configuration(monkeypatch):
    from skdp.nn._ghost import module_config_key

    class Local(Switch):
        pass

    before = module_config_key(Local())
    assert module_config_key(Local()) == before
    monkeypatch.setattr(Local, "centre", True, raising=False)  # a class attribute forward reads
    assert module_config_key(Local()) != before
    monkeypatch.undo()
    assert module_config_key(Local()) == before
    forward = Local.forward
    monkeypatch.setattr(Local, "forward", lambda self, x: forward(self, x))
    assert module_config_key(Local()) != before
