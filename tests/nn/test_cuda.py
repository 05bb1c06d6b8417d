"""DP-SGD on a CUDA device: the same guarantee as on the CPU.

Skipped where torch sees no CUDA device (CI has none). Run on a GPU with
``python -m pytest tests/nn/test_cuda.py``; ``benchmarks/cuda_check.sh`` runs
these and the rest of ``tests/nn`` with the nets on the GPU
(``SKDP_TEST_DEVICE=cuda``, see ``tests/conftest.py``) and records the
result.

What must hold on the device, each checked here:

* the noise of a step is Gaussian with std ``sigma * C`` on the summed
  clipped gradient (Abadi et al. 2016, Alg. 1 line 8), drawn on the device by
  the device's generator, and is on the ledger (the device case of
  ``tests/nn/test_nn.py``'s engine noise test, parametrised by device);
* each example's clipped gradient has norm at most ``C``, and the ghost
  norms equal the per-sample-gradient (vmap) norms, as on the CPU;
* a net fitted on the device spends exactly what the same fit spends on the
  CPU (the accounting does not depend on the device), and ``random_state``
  reproduces the fit.
"""

import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("skorch")

from skdp.nn import (  # noqa: E402
    DPNeuralNetClassifier,
    GhostClipping,
    VmapPerExampleGradients,
)

#: The device under test: CUDA, or what ``SKDP_TEST_DEVICE`` names (``cpu`` checks these tests' own logic).
DEVICE = os.environ.get("SKDP_TEST_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(
    DEVICE.startswith("cuda") and not torch.cuda.is_available(), reason="no CUDA device"
)


class MLP(torch.nn.Module):
    def __init__(self, n_features=5, hidden_units=16, n_out=3, softmax=False):
        super().__init__()
        self.l1 = torch.nn.Linear(n_features, hidden_units)
        self.l2 = torch.nn.Linear(hidden_units, n_out)
        self.softmax = softmax

    def forward(self, x):
        out = self.l2(torch.relu(self.l1(x)))
        return torch.softmax(out, dim=-1) if self.softmax else out


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.f1 = torch.nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        return self.f1(torch.relu(self.c1(x)).flatten(1))


def _ce_loss(module, x, y):
    out = module(x)
    return torch.nn.functional.cross_entropy(out, y), out


def _ce_per_example(module, x, y):
    return torch.nn.functional.cross_entropy(module(x), y, reduction="none")


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_ghost_norms_equal_vmap_norms_on_the_device(model):
    torch.manual_seed(2)
    if model == "mlp":
        module = MLP().to(DEVICE).double()
        X = 3 * torch.randn(16, 5, device=DEVICE, dtype=torch.float64)
    else:
        module = CNN().to(DEVICE).double()
        X = torch.randn(16, 1, 6, 6, device=DEVICE, dtype=torch.float64)
    y = torch.randint(0, 3, (16,), device=DEVICE)
    vmap = VmapPerExampleGradients().clipped_sum(module, _ce_loss, (X, y), lambda n: 1e12)
    C = float(vmap.norms.median())
    ref = VmapPerExampleGradients().clipped_sum(module, _ce_loss, (X, y), lambda n: C)
    ghost = GhostClipping(_ce_per_example).clipped_sum(module, _ce_loss, (X, y), lambda n: C)
    assert float((ghost.norms - vmap.norms).norm() / vmap.norms.norm()) < 1e-10
    for name in ref.grads:
        torch.testing.assert_close(ghost.grads[name], ref.grads[name], rtol=1e-7, atol=1e-10)
    # One example at a time (a huge one included): the clipped gradient never exceeds C.
    X1 = X.clone()
    X1[0] *= 1e6
    for i in range(4):
        one = GhostClipping(_ce_per_example).clipped_sum(
            module, _ce_loss, (X1[i : i + 1], y[i : i + 1]), lambda n: C
        )
        total = math.sqrt(sum(float(g.pow(2).sum()) for g in one.grads.values()))
        assert total <= C * (1 + 1e-9)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    return X, y


def _net(device, **kw):
    return DPNeuralNetClassifier(
        epsilon=3.0, classes=[0, 1], max_epochs=3, verbose=0, random_state=0, device=device, **kw
    )


def test_net_on_the_device_spends_what_the_cpu_fit_spends_and_learns(data):
    X, y = data
    gpu = _net(DEVICE).fit(X, y)
    cpu = _net("cpu").fit(X, y)
    assert all(p.device.type == torch.device(DEVICE).type for p in gpu.module_.parameters())
    # The plan (noisy count, sampling rate, calibrated noise) is drawn on the host from
    # random_state, so the guarantee is the CPU fit's to the bit.
    assert gpu.privacy_spent_ == cpu.privacy_spent_
    assert gpu.privacy_spent_.epsilon <= 3.0
    assert gpu.predict(X).shape == (len(X),)
    # Majority class is about 0.5 here; eps = 3 on 400 rows learns this linear rule.
    assert gpu.score(X, y) > 0.7


def test_random_state_reproduces_a_fit_on_the_device(data):
    X, y = data
    a = _net(DEVICE).fit(X, y)
    b = _net(DEVICE).fit(X, y)
    for pa, pb in zip(a.module_.parameters(), b.module_.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=0, atol=0)
