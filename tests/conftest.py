"""Shared fixtures and data helpers of the test suite."""

import functools
import os

import numpy as np
import pytest
from sklearn.datasets import load_iris, make_blobs


@pytest.fixture
def chunk_passes(monkeypatch):
    """A list that grows by one entry per pass any chunked fit makes over its data.

    Patches :meth:`skdp._chunks.ChunkedData.iter_chunks` for the test; clear the
    list (``passes[:] = []``) between fits.
    """
    from skdp._chunks import ChunkedData

    passes = []
    original = ChunkedData.iter_chunks

    def iter_chunks(self):
        passes.append(None)
        return original(self)

    monkeypatch.setattr(ChunkedData, "iter_chunks", iter_chunks)
    return passes


#: The nets' device under test: ``SKDP_TEST_DEVICE=cuda python -m pytest tests/nn`` fits every net
#: a test builds without naming a device on that device (``benchmarks/cuda_check.sh``). Unset (CI),
#: nothing changes.
TEST_DEVICE = os.environ.get("SKDP_TEST_DEVICE")


@pytest.fixture(autouse=True)
def _nets_on_the_device_under_test(request):
    """skorch's ``device`` defaults to ``SKDP_TEST_DEVICE`` for the nets a test builds.

    Tests that build tensors and engines by hand stay on the CPU; tests that pin a release
    to the bit compare CPU random streams and are expected to differ on another device.
    """
    if not TEST_DEVICE or TEST_DEVICE == "cpu":
        yield
        return
    skorch = pytest.importorskip("skorch")
    monkeypatch = request.getfixturevalue("monkeypatch")
    original = skorch.NeuralNet.__init__

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("device", TEST_DEVICE)
        original(self, *args, **kwargs)

    monkeypatch.setattr(skorch.NeuralNet, "__init__", __init__)
    yield


# --- the small data sets many test files build ------------------------------------------------
#
# Plain functions (import them: ``from conftest import gaussian_blobs``), each the one
# definition of a data set that several files built by hand; same draws as before, so no
# test's data changed when they moved here.

#: The three well-separated centres of the clustering tests (``three_blobs``).
THREE_CENTRES = [[-3, -3], [3, -3], [0, 3]]


def _generator(rng):
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def gaussian_blobs(rng, centres, n_per, scale, n_features=None):
    """``n_per`` rows around each centre, isotropic Gaussian of std ``scale``, stacked centre by centre.

    ``rng`` is a Generator (drawn from, in place) or a seed; a scalar centre
    needs ``n_features``.
    """
    rng = _generator(rng)
    return np.vstack(
        [rng.normal(c, scale, (n_per, n_features if n_features is not None else len(c))) for c in centres]
    )


def three_blobs(n=3000, k=3, seed=0):
    """``(X, y)``: scikit-learn's ``make_blobs`` around the first ``k`` of :data:`THREE_CENTRES`, std 0.5."""
    return make_blobs(n_samples=n, centers=THREE_CENTRES[:k], cluster_std=0.5, random_state=seed)


def sign_labelled(rng, n, d):
    """``(X, y)`` for the nets: standard normal float32 rows, label ``x_0 > 0`` (int64)."""
    X = _generator(rng).normal(size=(n, d)).astype(np.float32)
    return X, (X[:, 0] > 0).astype(np.int64)


def linear_regression_data(n=400, d=3, noise=0.3, seed=0):
    """``(X, y)``: rows uniform on ``[-1, 1]^d``, ``y = X w + noise * N(0, 1)`` with ``w`` from 1 to -1."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = X @ np.linspace(1.0, -1.0, d) + noise * rng.normal(size=n)
    return X, y


def iris_rows():
    """The iris measurements (150 rows, 4 columns; scikit-learn's bundled copy)."""
    return load_iris().data
