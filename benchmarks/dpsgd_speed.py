"""DP-SGD training throughput: plain skorch vs skdp's DP nets vs Opacus (issue 7).

MLP 784-256-10 on 20,000 synthetic rows, expected batch 256, SGD, fixed
noise multiplier 1.0 and clipping bound 1.0 (no calibration in the timed
part).  Measured in the same run: plain torch loop, plain skorch
(``NeuralNetClassifier``), ours (``DPNeuralNetClassifier``, vmap per-example
gradients) and Opacus' ``make_private`` in ``hooks`` and ``functorch`` modes,
both with Poisson sampling.  Throughput is training samples per second
(expected samples, i.e. ``epochs * N``, over wall time of the training loop).
Ours is timed twice: as the skorch net (``fit``, skorch's per-batch overhead
included) and as the bare engine loop (``DPSGDEngine`` + ``PoissonBatchIterator``
in a plain torch loop, the same loop shape as the Opacus runs).
Target: ours / Opacus >= 1.0.

Run: ``python benchmarks/dpsgd_speed.py [--quick]``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _opacus import make_private  # noqa: E402
from skorch import NeuralNetClassifier  # noqa: E402

from skdp.nn import DPNeuralNetClassifier  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
BATCH, SIGMA, CLIP, LR = 256, 1.0, 1.0, 0.1


class MLP(torch.nn.Module):
    def __init__(self, softmax=True):
        super().__init__()
        self.l1 = torch.nn.Linear(784, 256)
        self.l2 = torch.nn.Linear(256, 10)
        self.softmax = softmax

    def forward(self, x):
        out = self.l2(torch.relu(self.l1(x)))
        return torch.softmax(out, dim=-1) if self.softmax else out


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 784)).astype(np.float32)
    y = (X[:, :10].argmax(1)).astype(np.int64)
    return X, y


def _time(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def plain_torch(X, y, epochs):
    torch.manual_seed(0)
    model = MLP(softmax=False)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)

    def run():
        for _ in range(epochs):
            perm = torch.randperm(len(Xt))
            for i in range(0, len(Xt), BATCH):
                idx = perm[i : i + BATCH]
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(Xt[idx]), yt[idx]).backward()
                opt.step()

    return _time(run)


def plain_skorch(X, y, epochs):
    net = NeuralNetClassifier(
        MLP,
        lr=LR,
        max_epochs=epochs,
        batch_size=BATCH,
        train_split=None,
        verbose=0,
        iterator_train__shuffle=True,
    )
    net.initialize()
    return _time(lambda: net.partial_fit(X, y))


def ours(X, y, epochs):
    net = DPNeuralNetClassifier(
        MLP,
        lr=LR,
        max_epochs=epochs,
        batch_size=BATCH,
        noise_multiplier=SIGMA,
        max_grad_norm=CLIP,
        epsilon=None,
        classes=list(range(10)),
        verbose=0,
        random_state=0,
    )
    # Warm the accountant's RDP cache so the timing is the training loop.
    from skdp.nn import dpsgd_step_event
    from skdp.privacy import compose

    compose([dpsgd_step_event(SIGMA, BATCH / len(X))], 1e-5)
    return _time(lambda: net.fit(X, y))


def ours_engine(X, y, epochs):
    """The DP engine in a bare torch loop (no skorch overhead), like the Opacus runs."""
    from skdp.nn import DPSGDEngine, FixedClipping, PoissonBatchIterator, steps_per_epoch
    from skdp.privacy import ADD_REMOVE, PrivacyAccountant

    torch.manual_seed(0)
    model = MLP(softmax=False)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    n, q = len(X), BATCH / len(X)
    per_epoch = steps_per_epoch(n, BATCH)

    def loss_fn(module, x, t):
        return torch.nn.functional.cross_entropy(module(x), t)

    engine = DPSGDEngine(
        model,
        loss_fn,
        noise_multiplier=SIGMA,
        sampling_rate=q,
        expected_batch_size=BATCH,
        clipping=FixedClipping(CLIP),
        max_steps=per_epoch * epochs,
        generator=torch.Generator().manual_seed(0),
    )
    ledger = PrivacyAccountant(neighbouring=ADD_REMOVE)
    data = torch.utils.data.TensorDataset(torch.as_tensor(X), torch.as_tensor(y))
    batches = PoissonBatchIterator(data, q, per_epoch, np.random.default_rng(0))

    def run():
        for _ in range(epochs):
            for xb, yb in batches:
                opt.zero_grad()
                engine.step((xb, yb), ledger)
                opt.step()

    return _time(run)


def opacus(X, y, epochs, mode):
    torch.manual_seed(0)
    model, opt, loader = make_private(MLP(softmax=False), X, y, LR, BATCH, SIGMA, CLIP, grad_sample_mode=mode)

    def run():
        for _ in range(epochs):
            for xb, yb in loader:
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _time(run)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2,560 rows, 1 epoch (well under 2 minutes)")
    args = parser.parse_args(argv)
    n, epochs = (2560, 1) if args.quick else (20_000, 1)
    X, y = _data(n)
    runs = {
        "plain torch": lambda: plain_torch(X, y, epochs),
        "plain skorch": lambda: plain_skorch(X, y, epochs),
        "skdp DP net (vmap)": lambda: ours(X, y, epochs),
        "skdp engine, bare loop": lambda: ours_engine(X, y, epochs),
        "opacus hooks": lambda: opacus(X, y, epochs, "hooks"),
        "opacus functorch": lambda: opacus(X, y, epochs, "functorch"),
    }
    # One untimed warm-up epoch per method (imports, allocator, vmap tracing).
    Xw, yw = _data(1024, seed=1)
    plain_skorch(Xw, yw, 1)
    ours(Xw, yw, 1)
    ours_engine(Xw, yw, 1)
    opacus(Xw, yw, 1, "hooks")
    opacus(Xw, yw, 1, "functorch")
    throughput = {name: epochs * n / fn() for name, fn in runs.items()}
    ref = throughput["skdp DP net (vmap)"]
    print(
        f"\nMLP 784-256-10, N={n}, batch {BATCH}, {epochs} epoch(s), torch threads={torch.get_num_threads()}"
    )
    print(f"{'method':<22}{'samples/s':>12}{'vs plain skorch':>17}{'ours / this':>13}")
    for name, tp in throughput.items():
        print(f"{name:<22}{tp:>12.0f}{tp / throughput['plain skorch']:>17.3f}{ref / tp:>13.3f}")
    best_opacus = max(throughput["opacus hooks"], throughput["opacus functorch"])
    bare = throughput["skdp engine, bare loop"]
    print(f"\nours (skorch net) / best Opacus = {ref / best_opacus:.3f} (target >= 1.0)")
    print(f"ours (bare engine loop) / best Opacus = {bare / best_opacus:.3f} (same loop shape as Opacus)")
    RESULTS.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.barh(list(throughput), list(throughput.values()), color="tab:blue")
    ax.set_xlabel("training samples / s")
    ax.set_title(f"DP-SGD throughput, MLP 784-256-10, batch {BATCH}")
    fig.tight_layout()
    out = RESULTS / "dpsgd_speed.png"
    fig.savefig(out, dpi=120)
    print(f"plot: {out}")


if __name__ == "__main__":
    main()
