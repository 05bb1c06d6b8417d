"""The nets' device under test.

``SKDP_TEST_DEVICE=cuda python -m pytest tests/nn`` fits every net of these
tests on that device: skorch's ``device`` parameter defaults to it for each
net a test builds without naming one (``benchmarks/cuda_check.sh``). Tests
that build tensors and engines by hand stay on the CPU; tests that pin a
release to the bit compare CPU random streams and are expected to differ on
another device. Unset (CI), nothing changes.
"""

import functools
import os

import pytest

DEVICE = os.environ.get("SKDP_TEST_DEVICE")


@pytest.fixture(autouse=True)
def _nets_on_the_device_under_test(monkeypatch):
    if not DEVICE or DEVICE == "cpu":
        yield
        return
    skorch = pytest.importorskip("skorch")
    original = skorch.NeuralNet.__init__

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("device", DEVICE)
        original(self, *args, **kwargs)

    monkeypatch.setattr(skorch.NeuralNet, "__init__", __init__)
    yield
