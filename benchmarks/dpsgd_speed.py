"""DP-SGD speed and memory: plain skorch vs skdp (ghost, vmap) vs Opacus (issues 7 and 12).

MLP 784-256-10 on synthetic rows, expected batch 256, SGD, fixed noise
multiplier 1.0 and clipping bound 1.0 (no calibration in the timed part).

Throughput (samples/s), two views, all methods measured in the same run and
*interleaved* (round ``r`` times every method once, the median over rounds
is reported), because the machine is shared and its load drifts:

* **skorch level**: one epoch of ``fit`` of plain skorch
  (``NeuralNetClassifier``) and of ours (``DPNeuralNetClassifier`` with
  ``clipping_mode='ghost'`` and ``'vmap'``), expected samples over wall time.
* **per optimiser step, excluding data loading**: the batches are drawn
  beforehand (Poisson batches for the DP methods, a shuffled partition for
  plain); timed is ``zero_grad``, the (private) gradient and the optimiser
  step: plain torch, ours (``DPSGDEngine`` ghost / vmap) and Opacus
  (``make_private``, ``grad_sample_mode='hooks'``).

Peak memory: each method trains a few steps at batch 1024 in a fresh child
process (``VmHWM`` of ``/proc/self/status``, the kernel's peak RSS of the
process; ``getrusage``'s ``ru_maxrss`` would keep the parent's peak across
``fork`` + ``exec``); also reported is the
growth of the peak over the process's RSS just before training (imports and
data excluded).

Targets (issue 12): ghost throughput >= 50% of plain skorch; peak memory at
batch 1024 within 1.5x of plain.

Run: ``python benchmarks/dpsgd_speed.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
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
from skorch import NeuralNetClassifier  # noqa: E402

from skdp.nn import DPNeuralNetClassifier  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)
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


# ------------------------------------------------------------ skorch level ---


def skorch_plain(X, y, batch):
    net = NeuralNetClassifier(
        MLP, lr=LR, max_epochs=1, batch_size=batch, train_split=None, verbose=0, iterator_train__shuffle=True
    )
    net.initialize()
    return lambda: net.partial_fit(X, y)


def skorch_ours(X, y, batch, mode):
    from skdp.nn import dpsgd_step_event
    from skdp.privacy import compose

    net = DPNeuralNetClassifier(
        MLP,
        lr=LR,
        max_epochs=1,
        batch_size=batch,
        noise_multiplier=SIGMA,
        clip_norm=CLIP,
        epsilon=None,
        classes=list(range(10)),
        verbose=0,
        random_state=0,
        clipping_mode=mode,
    )
    # Warm the accountant's RDP cache so the timing is the training loop, and
    # build the module now, as the plain net does, so both memory baselines hold it.
    compose([dpsgd_step_event(SIGMA, batch / len(X))], 1e-5)
    net.initialize()
    return lambda: net.fit(X, y)


# ------------------------------------------------- per optimiser step (bare) ---


def _ce(module, x, t):
    return torch.nn.functional.cross_entropy(module(x), t)


def _ce_per_example(module, x, t):
    return torch.nn.functional.cross_entropy(module(x), t, reduction="none")


def step_plain(X, y, batch):
    torch.manual_seed(0)
    model = MLP(softmax=False)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    perm = torch.randperm(len(Xt))
    batches = [(Xt[perm[i : i + batch]], yt[perm[i : i + batch]]) for i in range(0, len(Xt), batch)]

    def run():
        for xb, yb in batches:
            opt.zero_grad()
            _ce(model, xb, yb).backward()
            opt.step()

    return run


def _poisson_batches(X, y, batch):
    from skdp.nn import poisson_batch_indices, steps_per_epoch

    rng = np.random.default_rng(0)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    out = []
    for _ in range(steps_per_epoch(len(X), batch)):
        idx = torch.as_tensor(poisson_batch_indices(len(X), batch / len(X), rng))
        out.append((Xt[idx], yt[idx]))
    return out


def step_ours(X, y, batch, mode):
    from skdp.nn import DPSGDEngine, FixedClipping
    from skdp.privacy import ADD_REMOVE, PrivacyLedger

    torch.manual_seed(0)
    model = MLP(softmax=False)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    batches = _poisson_batches(X, y, batch)
    engine = DPSGDEngine(
        model,
        _ce,
        noise_multiplier=SIGMA,
        sampling_rate=batch / len(X),
        expected_batch_size=batch,
        clipping=FixedClipping(CLIP),
        max_steps=10**9,
        generator=torch.Generator().manual_seed(0),
        batch_loss_fn=_ce_per_example,
        clipping_mode=mode,
    )
    ledger = PrivacyLedger(neighbouring=ADD_REMOVE)

    def run():
        for xb, yb in batches:
            opt.zero_grad()
            engine.step((xb, yb), ledger)
            opt.step()

    return run


def step_opacus(X, y, batch, mode="hooks"):
    from _opacus import make_private

    torch.manual_seed(0)
    model, opt, loader = make_private(MLP(softmax=False), X, y, LR, batch, SIGMA, CLIP, grad_sample_mode=mode)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batches = list(loader)

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for xb, yb in batches:
                opt.zero_grad()
                _ce(model, xb, yb).backward()
                opt.step()

    return run


METHODS = {
    "plain skorch": ("skorch", skorch_plain, {}),
    "ours ghost (skorch)": ("skorch", skorch_ours, {"mode": "ghost"}),
    "ours vmap (skorch)": ("skorch", skorch_ours, {"mode": "vmap"}),
    "plain torch step": ("step", step_plain, {}),
    "ours ghost step": ("step", step_ours, {"mode": "ghost"}),
    "ours vmap step": ("step", step_ours, {"mode": "vmap"}),
    "opacus hooks step": ("step", step_opacus, {}),
}


def _status_mb(field):
    # /proc/self/status, not getrusage: ru_maxrss keeps the parent's peak across fork + exec.
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"{field} not in /proc/self/status")


def memory_child(name, batch, n_steps):
    """Run in a fresh process: train ``n_steps`` steps of ``name`` at ``batch``; print JSON."""
    torch.set_num_threads(1)
    X, y = _data(batch * n_steps)
    _, factory, kw = METHODS[name]
    run = factory(X, y, batch, **kw)
    before = _status_mb("VmRSS")
    run()
    peak = _status_mb("VmHWM")  # peak RSS of this process since exec
    print(json.dumps({"before_mb": before, "peak_mb": peak}))


def _measure_memory(name, batch, n_steps):
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", name, "--batch", str(batch), "--steps", str(n_steps)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _load():
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rows and rounds (well under 2 minutes)")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=1024, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        memory_child(args.memory_child, args.batch, args.steps)
        return
    torch.set_num_threads(1)
    n, rounds = (1280, 3) if args.quick else (7680, 5)
    X, y = _data(n)
    load_start = _load()
    runs = {name: factory(X, y, BATCH, **kw) for name, (_, factory, kw) in METHODS.items()}
    # Warm-up (allocator, vmap tracing, Opacus hooks), untimed.
    Xw, yw = _data(1024, seed=1)
    for _, factory, kw in METHODS.values():
        factory(Xw, yw, BATCH, **kw)()
    times = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            times[name].append(_time(run))
    throughput = {name: n / float(np.median(t)) for name, t in times.items()}
    load_end = _load()

    mem_steps = 2 if args.quick else 4
    memory = {name: _measure_memory(name, 1024, mem_steps) for name in METHODS}
    load_mem = _load()

    print(
        f"\nMLP 784-256-10, N={n}, expected batch {BATCH}, {rounds} interleaved rounds (median), "
        f"torch threads=1"
    )
    print(f"load average (1, 5, 15 min): start {load_start}; end of timing {load_end}")
    print(
        f"\n{'method':<22}{'samples/s':>11}{'vs plain':>10}"
        f"{'peak RSS MB':>13}{'vs plain':>10}{'growth MB':>11}{'vs plain':>10}"
    )
    for name, tp in throughput.items():
        kind = METHODS[name][0]
        ref_name = "plain skorch" if kind == "skorch" else "plain torch step"
        m, ref_m = memory[name], memory[ref_name]
        growth, ref_growth = m["peak_mb"] - m["before_mb"], ref_m["peak_mb"] - ref_m["before_mb"]
        print(
            f"{name:<22}{tp:>11.0f}{tp / throughput[ref_name]:>10.3f}"
            f"{m['peak_mb']:>13.0f}{m['peak_mb'] / ref_m['peak_mb']:>10.2f}"
            f"{growth:>11.0f}{growth / max(ref_growth, 1.0):>10.2f}"
        )
    print(f"(peak RSS: batch 1024, {mem_steps} steps, one child process per method; load average {load_mem})")
    ghost = throughput["ours ghost (skorch)"] / throughput["plain skorch"]
    ghost_step = throughput["ours ghost step"] / throughput["plain torch step"]
    opacus = throughput["ours ghost step"] / throughput["opacus hooks step"]
    mem = memory["ours ghost (skorch)"]["peak_mb"] / memory["plain skorch"]["peak_mb"]
    print(f"\nghost / plain skorch throughput = {ghost:.2f} (target >= 0.5)")
    print(f"ghost / plain per optimiser step = {ghost_step:.2f}; ghost / Opacus hooks = {opacus:.1f}x")
    print(f"ghost / plain skorch peak RSS at batch 1024 = {mem:.2f} (target <= 1.5)")

    RESULTS.mkdir(exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    names = list(throughput)
    ax1.barh(names, [throughput[k] for k in names], color="tab:blue")
    ax1.set_xlabel("training samples / s (batch 256)")
    ax1.invert_yaxis()
    ax2.barh(names, [memory[k]["peak_mb"] for k in names], color="tab:orange")
    ax2.set_xlabel("peak RSS, MB (batch 1024)")
    ax2.invert_yaxis()
    ax2.set_yticklabels([])
    fig.suptitle(f"DP-SGD, MLP 784-256-10 (load average {load_end})")
    fig.tight_layout()
    out = RESULTS / "dpsgd_speed.png"
    fig.savefig(out, dpi=120)
    print(f"plot: {out}")


if __name__ == "__main__":
    main()
