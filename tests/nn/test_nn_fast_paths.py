"""The DP nets' fast paths compute exactly what the general paths compute.

Each shortcut of a DP-SGD fit (per-example losses without vmap, batches
indexed from tensors, noise added in place, seeding the CPU generator only,
a staged fit that does not compose the ledger whose value it replaces, a
fixed-noise plan composed once) must release the same numbers and record the
same events as the path it replaces: compared here bitwise, or to the value
of the general path.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("skorch")

from skorch.dataset import Dataset  # noqa: E402

import skdp.nn._plan as plan_module  # noqa: E402
from skdp.nn import DPNeuralNetClassifier, DPNeuralNetRegressor, PoissonBatchIterator  # noqa: E402
from skdp.nn._net import DefaultMLP  # noqa: E402
from skdp.nn._per_example import manual_seed  # noqa: E402
from skdp.privacy import PrivacyLedger, compose  # noqa: E402
from skdp.privacy.mechanisms.torch_noise import TorchGaussianMechanism  # noqa: E402
from skdp.privacy.staged import staged_filter  # noqa: E402

DELTA = 1e-5


def _data(n=60, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    return X, (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 1).astype(np.int64)


def _on(net, a):
    """``a`` as a tensor on the net's device (the CPU, or ``SKDP_TEST_DEVICE``: tests/conftest.py)."""
    return torch.as_tensor(a).to(net.device)


def _losses_and_grads(net, X, y, fast):
    """Per-example losses and the gradients of a weighted sum, by the fast path or by vmap."""
    net._dp_fit = type("State", (), {"validated_targets": True})()
    module = net.module_
    module.zero_grad()
    if not fast:
        net._unreduced_loss = lambda *args: None
    try:
        losses, _ = net._batch_per_example_loss(module, _on(net, X), _on(net, y))
    finally:
        net.__dict__.pop("_unreduced_loss", None)
    weights = torch.linspace(0.5, 1.5, len(losses), dtype=losses.dtype, device=losses.device)
    (losses * weights).sum().backward()
    return losses.detach().clone(), [p.grad.clone() for p in module.parameters()]


def _classifier(criterion):
    softmax = criterion is torch.nn.NLLLoss
    return DPNeuralNetClassifier(
        DefaultMLP,
        criterion=criterion,
        classes=[0, 1, 2],
        module__n_features=4,
        module__n_outputs=3,
        module__softmax=softmax,
    ).initialize()


@pytest.mark.parametrize("criterion", [torch.nn.NLLLoss, torch.nn.CrossEntropyLoss])
def test_unreduced_classification_loss_equals_the_vmapped_criterion_bitwise(criterion):
    X, y = _data()
    net = _classifier(criterion)
    net._dp_fit = type("State", (), {"validated_targets": True})()
    assert net._unreduced_loss(net.module_(_on(net, X)), _on(net, y)) is not None
    fast, slow = _losses_and_grads(net, X, y, True), _losses_and_grads(net, X, y, False)
    assert torch.equal(fast[0], slow[0])
    assert all(torch.equal(a, b) for a, b in zip(fast[1], slow[1], strict=True))


@pytest.mark.parametrize("criterion", [torch.nn.MSELoss, torch.nn.L1Loss])
@pytest.mark.parametrize("n_targets", [1, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unreduced_regression_loss_equals_the_vmapped_criterion_bitwise(criterion, n_targets, dtype):
    X, _ = _data()
    X = X.astype(dtype)
    y = np.random.default_rng(1).normal(size=(len(X), n_targets)).astype(dtype)
    module = torch.nn.Linear(4, n_targets).to(torch.float64 if dtype == np.float64 else torch.float32)
    net = DPNeuralNetRegressor(module, criterion=criterion).initialize()
    fast, slow = _losses_and_grads(net, X, y, True), _losses_and_grads(net, X, y, False)
    assert torch.equal(fast[0], slow[0])
    assert all(torch.equal(a, b) for a, b in zip(fast[1], slow[1], strict=True))


class _CustomLoss(DPNeuralNetClassifier):
    def get_loss(self, y_pred, y_true, *args, **kwargs):
        self.__dict__.setdefault("loss_rows_", []).append(y_pred.shape[0])
        return super().get_loss(y_pred, y_true, *args, **kwargs) * 2


@pytest.mark.parametrize(
    "make, validated",
    [
        (lambda: _classifier(torch.nn.NLLLoss), False),  # targets of a Dataset or tensor: not checked
        (
            lambda: _classifier(torch.nn.NLLLoss).set_params(criterion__weight=torch.ones(3)).initialize(),
            True,
        ),
        (lambda: _classifier(torch.nn.NLLLoss).set_params(criterion__ignore_index=0).initialize(), True),
        (
            lambda: (
                _classifier(torch.nn.CrossEntropyLoss).set_params(criterion__label_smoothing=0.1).initialize()
            ),
            True,
        ),
        (lambda: _classifier(torch.nn.NLLLoss).set_params(criterion__reduction="sum").initialize(), True),
        (
            lambda: _CustomLoss(
                DefaultMLP, classes=[0, 1, 2], module__n_features=4, module__n_outputs=3
            ).initialize(),
            True,
        ),
    ],
)
def test_unreduced_loss_declines_what_it_cannot_reproduce(make, validated):
    X, y = _data()
    net = make()
    net._dp_fit = type("State", (), {"validated_targets": validated})()
    assert net._unreduced_loss(net.module_(_on(net, X)), _on(net, y)) is None


def test_custom_get_loss_is_vmapped_over_examples():
    X, y = _data(200)
    kw = dict(classes=[0, 1, 2], module__n_features=4, module__n_outputs=3, max_epochs=1, batch_size=50)
    kw.update(epsilon=2.0, n_samples=200, random_state=0, lr=0.1)
    net = _CustomLoss(DefaultMLP, **kw)
    net.fit(X, y)
    # The overridden loss is evaluated on each example alone (batches of one row under vmap).
    assert net.__dict__.get("loss_rows_") and set(net.loss_rows_) == {1}


def _batches(dataset, seed):
    iterator = PoissonBatchIterator(dataset, 0.3, 4, np.random.default_rng(seed))
    return list(iterator)


def test_poisson_batches_indexed_from_tensors_equal_skorchs_indexing():
    X, y = _data(50)
    dataset = Dataset(X, y)
    fast = _batches(dataset, 3)
    assert PoissonBatchIterator(dataset, 0.3, 4, np.random.default_rng(3))._tensors is not None

    class Transformed(Dataset):  # a subclass may transform: skorch's own indexing
        pass

    slow = _batches(Transformed(X, y), 3)
    assert PoissonBatchIterator(Transformed(X, y), 0.3, 4, np.random.default_rng(3))._tensors is None
    assert len(fast) == len(slow) == 4
    for (xf, yf), (xs, ys) in zip(fast, slow, strict=True):
        assert xf.dtype == xs.dtype and yf.dtype == ys.dtype
        assert torch.equal(xf, xs) and torch.equal(yf, ys)


def test_manual_seed_seeds_like_torch_manual_seed():
    manual_seed(123)
    ours = torch.rand(5)
    torch.manual_seed(123)
    assert torch.equal(ours, torch.rand(5))


def test_torch_noise_is_value_plus_scaled_draws_bitwise():
    value = {"a": torch.linspace(-1, 1, 7), "b": torch.ones(2, 3, dtype=torch.float64)}
    mech = TorchGaussianMechanism(sensitivity=0.7, noise_multiplier=1.3)
    noisy = mech.release(value, torch.Generator().manual_seed(5), PrivacyLedger(neighbouring="add_remove"))
    gen = torch.Generator().manual_seed(5)
    for name, v in value.items():
        expected = v + mech.scale * torch.randn(v.shape, generator=gen, dtype=v.dtype)
        assert torch.equal(noisy[name], expected)


def test_staged_fit_reports_the_filters_claim_without_composing_its_ledger(monkeypatch):
    X, y = _data(300)

    def refuse(self, delta):
        raise AssertionError("the staged fit composed its ledger")

    monkeypatch.setattr(PrivacyLedger, "privacy_spent", refuse)
    net = DPNeuralNetClassifier(
        DefaultMLP,
        classes=[0, 1, 2],
        module__n_features=4,
        module__n_outputs=3,
        max_epochs=2,
        batch_size=50,
        epsilon=1.5,
        random_state=0,
        lr=0.1,
    ).fit(X, y)
    assert tuple(net.privacy_spent_) == (1.5, DELTA)
    # The claim holds: the ledger's events fit in the filter's RDP budget.
    events = net.privacy_ledger_.events
    staged = staged_filter(events[:1], 1.5, DELTA, "add_remove")
    assert staged.rdp(events) <= staged.budget * (1 + 1e-9)
    assert len(events) == 1 + net.n_steps_  # still one event per step


def test_fixed_noise_plan_is_composed_once_and_reported_exactly(monkeypatch):
    X, y = _data(300)
    calls = []
    original = plan_module.compose

    def counting(events, delta, composition):
        calls.append(list(events))
        return original(events, delta, composition)

    monkeypatch.setattr(plan_module, "compose", counting)
    plan_module._composed.cache_clear()
    net = DPNeuralNetClassifier(
        DefaultMLP,
        classes=[0, 1, 2],
        module__n_features=4,
        module__n_outputs=3,
        max_epochs=2,
        batch_size=50,
        noise_multiplier=1.2345,
        epsilon=None,
        random_state=0,
        lr=0.1,
    ).fit(X, y)
    # The count's reservation, then the whole plan (hold extension and settle share it).
    assert len(calls) == 2
    assert net.privacy_spent_ == compose(net.privacy_ledger_.events, DELTA)
