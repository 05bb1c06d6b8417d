"""DP-SGD speed and memory: plain torch/skorch vs skdp (ghost, vmap) vs Opacus (hooks, ghost).

Two models on synthetic rows, expected batch 256, SGD, fixed noise
multiplier 1.0 and clipping bound 1.0 (no calibration in the timed part,
except the ``eps=1`` row):

* **MLP** 784-256-10 (one input row per example: ghost norms are
  ``||g||^2 ||a||^2``);
* **CNN** of Opacus' MNIST example on 1x28x28 inputs: Conv2d(1, 16, 8,
  stride 2, padding 3) -> max-pool -> Conv2d(16, 32, 4, stride 2) ->
  max-pool -> Linear(512, 32) -> Linear(32, 10).  By the mixed rule (Bu et
  al. 2022, ghost when ``2 T^2 < p d``) the first convolution (``T = 196``
  positions, ``p d = 64 x 16``) forms per-example gradients, the second
  (``T = 25``, ``p d = 256 x 32``) and the linear layers use ghost norms.

Throughput (samples/s), two views, all methods measured in the same run and
*interleaved* (round ``r`` times every method once), because the machine is
shared and its load drifts: reported are the median time over rounds and,
for the ratios and the verdicts, the median over rounds of the ratio of two
methods timed in the same round (wall time, and the process's CPU time,
which does not count the time the process waits for a core):

* **skorch level**: one epoch of plain skorch (``partial_fit`` of an
  initialised ``NeuralNetClassifier``: it does not pay the module's
  initialisation, which every DP ``fit`` does) and one ``fit`` of ours
  (``DPNeuralNetClassifier`` with ``clipping_mode='ghost'`` and ``'vmap'``,
  and with the defaults at ``epsilon=1``, a new seed per fit, hence a new
  noisy count and calibration per fit), expected samples over wall time.
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

Targets, printed as PASS/FAIL: CNN, skdp's ghost (mixed) step no slower
than the faster of skdp's vmap and Opacus' hooks; MLP, a DP fit with the
defaults (``epsilon=1``, ``n_samples="auto"``: a noisy count and a
calibration per fit) at most 1.5x the time of plain skorch; peak memory at
batch 1024 of the ghost MLP fit within 1.5x of plain.

On a GPU (``--device cuda``) every method trains on the device (inputs
moved there before timing, the noise drawn by a generator on the device),
each timing ends with ``torch.cuda.synchronize()``, torch keeps its default
CPU threads, and the memory column is the device's peak allocation
(``torch.cuda.max_memory_allocated``) in the child process instead of its
RSS. ``--rows`` sets the number of training rows (on a GPU the quick mode's
1,280 rows are 5 steps, too few to time the steps).

Run: ``python benchmarks/dpsgd_speed.py [--quick] [--device cuda] [--rows N]``.
"""

from __future__ import annotations

import argparse
import itertools
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
#: Where every method trains; set by ``--device``.
DEVICE = "cpu"


def _cuda():
    return DEVICE.startswith("cuda")


def _tensor(a):
    return torch.as_tensor(a).to(DEVICE)


class MLP(torch.nn.Module):
    def __init__(self, softmax=True):
        super().__init__()
        self.l1 = torch.nn.Linear(784, 256)
        self.l2 = torch.nn.Linear(256, 10)
        self.softmax = softmax

    def forward(self, x):
        out = self.l2(torch.relu(self.l1(x)))
        return torch.softmax(out, dim=-1) if self.softmax else out


class CNN(torch.nn.Module):
    """Opacus' MNIST example network."""

    def __init__(self, softmax=True):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 16, 8, 2, padding=3)
        self.c2 = torch.nn.Conv2d(16, 32, 4, 2)
        self.f1 = torch.nn.Linear(32 * 4 * 4, 32)
        self.f2 = torch.nn.Linear(32, 10)
        self.softmax = softmax

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2, 1)
        x = torch.nn.functional.max_pool2d(torch.relu(self.c2(x)), 2, 1)
        out = self.f2(torch.relu(self.f1(x.flatten(1))))
        return torch.softmax(out, dim=-1) if self.softmax else out


MODELS = {"mlp": MLP, "cnn": CNN}


def _data(n, seed=0, model="mlp"):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 784)).astype(np.float32)
    y = (X[:, :10].argmax(1)).astype(np.int64)
    return (X.reshape(n, 1, 28, 28) if model == "cnn" else X), y


def _sync():
    if _cuda():
        torch.cuda.synchronize()


def _time(fn):
    """``(wall seconds, CPU seconds of this process)`` of one call (the device synchronised)."""
    _sync()
    t, c = time.perf_counter(), time.process_time()
    fn()
    _sync()
    return time.perf_counter() - t, time.process_time() - c


def _paired(times, name, ref):
    """Median over rounds of ``name``'s time over ``ref``'s in the same round (wall, CPU).

    Paired within a round (the two ran seconds apart), the ratio cancels the
    load drift that a ratio of two medians keeps.
    """
    return tuple(
        float(np.median([a[k] / b[k] for a, b in zip(times[name], times[ref], strict=True)])) for k in (0, 1)
    )


# ------------------------------------------------------------ skorch level ---


def skorch_plain(X, y, batch, model="mlp"):
    net = NeuralNetClassifier(
        MODELS[model],
        lr=LR,
        max_epochs=1,
        batch_size=batch,
        train_split=None,
        verbose=0,
        iterator_train__shuffle=True,
        device=DEVICE,
    )
    net.initialize()
    return lambda: net.partial_fit(X, y)


def skorch_ours(X, y, batch, mode, model="mlp"):
    from skdp.nn import dpsgd_step_event
    from skdp.privacy import compose

    net = DPNeuralNetClassifier(
        MODELS[model],
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
        device=DEVICE,
    )
    # Warm the accountant's RDP cache so the timing is the training loop, and
    # build the module now, as the plain net does, so both memory baselines hold it.
    compose([dpsgd_step_event(SIGMA, batch / len(X))], 1e-5)
    net.initialize()
    return lambda: net.fit(X, y)


def skorch_ours_eps(X, y, batch, model="mlp"):
    """The DP net as a user fits it: ``epsilon=1``, ``n_samples="auto"`` (noisy count, calibration).

    Each call fits with a new seed, so each fit releases a new noisy count and
    plans (sampling rate, calibrated noise) from it, as fits of a user who
    does not fix ``random_state`` do: no cache of a previous fit's plan is hit.
    """
    net = DPNeuralNetClassifier(
        MODELS[model],
        lr=LR,
        max_epochs=1,
        batch_size=batch,
        epsilon=1.0,
        classes=list(range(10)),
        verbose=0,
        random_state=0,
        device=DEVICE,
    )
    net.initialize()
    seeds = itertools.count(1)

    def run():
        net.set_params(random_state=next(seeds))
        return net.fit(X, y)

    return run


# ------------------------------------------------- per optimiser step (bare) ---


def _ce(module, x, t):
    return torch.nn.functional.cross_entropy(module(x), t)


def _ce_per_example(module, x, t):
    return torch.nn.functional.cross_entropy(module(x), t, reduction="none")


def step_plain(X, y, batch, model="mlp"):
    torch.manual_seed(0)
    model = MODELS[model](softmax=False).to(DEVICE)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    Xt, yt = _tensor(X), _tensor(y)
    perm = torch.randperm(len(Xt)).to(DEVICE)
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
    Xt, yt = _tensor(X), _tensor(y)
    out = []
    for _ in range(steps_per_epoch(len(X), batch)):
        idx = _tensor(poisson_batch_indices(len(X), batch / len(X), rng))
        out.append((Xt[idx], yt[idx]))
    return out


def step_ours(X, y, batch, mode, model="mlp"):
    from skdp.nn import DPSGDEngine, FixedClipping
    from skdp.privacy import ADD_REMOVE, PrivacyLedger

    torch.manual_seed(0)
    model = MODELS[model](softmax=False).to(DEVICE)
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
        generator=torch.Generator(device=DEVICE).manual_seed(0),
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


def step_opacus(X, y, batch, mode="hooks", model="mlp"):
    from opacus import PrivacyEngine

    torch.manual_seed(0)
    net = MODELS[model](softmax=False).to(DEVICE)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.as_tensor(X), torch.as_tensor(y)), batch_size=batch
    )
    criterion = torch.nn.CrossEntropyLoss()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = PrivacyEngine(accountant="rdp").make_private(
            module=net,
            optimizer=opt,
            data_loader=loader,
            noise_multiplier=SIGMA,
            max_grad_norm=CLIP,
            poisson_sampling=True,
            grad_sample_mode=mode,
            criterion=criterion,
        )
        # Opacus' ghost mode wraps the criterion (its second backward pass).
        net, opt, criterion, loader = out if mode == "ghost" else (out[0], out[1], criterion, out[2])
        # Drawn beforehand and moved to the device: the timing excludes data loading.
        batches = [(xb.to(DEVICE), yb.to(DEVICE)) for xb, yb in loader]

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for xb, yb in batches:
                opt.zero_grad()
                criterion(net(xb), yb).backward()
                opt.step()

    return run


#: name -> (reference kind, factory, keyword arguments); one table per model.
METHODS = {
    "plain skorch": ("skorch", skorch_plain, {}),
    "ours ghost (skorch)": ("skorch", skorch_ours, {"mode": "ghost"}),
    "ours vmap (skorch)": ("skorch", skorch_ours, {"mode": "vmap"}),
    "ours eps=1 (skorch)": ("skorch", skorch_ours_eps, {}),
    "plain torch step": ("step", step_plain, {}),
    "ours ghost step": ("step", step_ours, {"mode": "ghost"}),
    "ours vmap step": ("step", step_ours, {"mode": "vmap"}),
    "opacus hooks step": ("step", step_opacus, {"mode": "hooks"}),
    "opacus ghost step": ("step", step_opacus, {"mode": "ghost"}),
}
#: Methods left out per model (Opacus' hooks on the MLP take minutes per round).
SKIP = {"mlp": (), "cnn": ("ours vmap (skorch)", "ours eps=1 (skorch)")}


def _methods(model):
    return {k: v for k, v in METHODS.items() if k not in SKIP[model]}


def _status_mb(field):
    # /proc/self/status, not getrusage: ru_maxrss keeps the parent's peak across fork + exec.
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"{field} not in /proc/self/status")


def memory_child(name, batch, n_steps, model):
    """Run in a fresh process: train ``n_steps`` steps of ``name`` at ``batch``; print JSON."""
    if not _cuda():
        torch.set_num_threads(1)
    X, y = _data(batch * n_steps, model=model)
    _, factory, kw = METHODS[name]
    run = factory(X, y, batch, model=model, **kw)
    if _cuda():
        # The device's allocations: the peak over what the method held before training.
        _sync()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated() / 2**20
        run()
        _sync()
        print(json.dumps({"before_mb": before, "peak_mb": torch.cuda.max_memory_allocated() / 2**20}))
        return
    before = _status_mb("VmRSS")
    run()
    peak = _status_mb("VmHWM")  # peak RSS of this process since exec
    print(json.dumps({"before_mb": before, "peak_mb": peak}))


def _measure_memory(name, batch, n_steps, model):
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--memory-child",
            name,
            "--batch",
            str(batch),
            "--steps",
            str(n_steps),
            "--model",
            model,
            "--device",
            DEVICE,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _load():
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def run_model(model, n, rounds, mem_steps):
    """Interleaved timing and per-method peak memory of one model; prints its table, returns the numbers."""
    methods = _methods(model)
    X, y = _data(n, model=model)
    load_start = _load()
    runs = {name: factory(X, y, BATCH, model=model, **kw) for name, (_, factory, kw) in methods.items()}
    # Warm-up (allocator, vmap tracing, Opacus hooks, the accountant's caches), untimed.
    Xw, yw = _data(1024, seed=1, model=model)
    for _, factory, kw in methods.values():
        factory(Xw, yw, BATCH, model=model, **kw)()
    times = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            times[name].append(_time(run))
    seconds = {name: float(np.median([w for w, _ in t])) for name, t in times.items()}
    load_end = _load()
    memory = {name: _measure_memory(name, 1024, mem_steps, model) for name in methods}
    print(
        f"\n{model.upper()}, N={n}, expected batch {BATCH}, {rounds} interleaved rounds (median), "
        f"device {DEVICE}, torch threads={torch.get_num_threads()}; load average (1, 5, 15 min): start {load_start}, end {load_end}"
    )
    print(
        f"{'method':<22}{'s/epoch':>9}{'samples/s':>11}{'time x plain':>13}{'CPU x plain':>12}"
        f"{'peak GPU MB' if _cuda() else 'peak RSS MB':>13}{'growth MB':>11}{'x plain':>9}"
    )
    for name, sec in seconds.items():
        kind = methods[name][0]
        ref_name = "plain skorch" if kind == "skorch" else "plain torch step"
        m, ref_m = memory[name], memory[ref_name]
        growth, ref_growth = m["peak_mb"] - m["before_mb"], ref_m["peak_mb"] - ref_m["before_mb"]
        wall, cpu = _paired(times, name, ref_name)
        print(
            f"{name:<22}{sec:>9.3f}{n / sec:>11.0f}{wall:>13.2f}{cpu:>12.2f}"
            f"{m['peak_mb']:>13.0f}{growth:>11.0f}{growth / max(ref_growth, 1.0):>9.2f}"
        )
    what = "peak device allocation" if _cuda() else "peak RSS"
    print(
        f"(s/epoch: median wall time over rounds; x plain: median over rounds of the ratio to plain in "
        f"the same round, wall and process CPU time; {what}: batch 1024, {mem_steps} steps, one child "
        "process per method)"
    )
    return seconds, memory, times


def _verdict(ok):
    return "PASS" if ok else "FAIL"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rows and rounds (a few minutes)")
    parser.add_argument("--models", default="cnn,mlp", help="comma-separated subset of cnn, mlp")
    parser.add_argument("--device", default="cpu", help="torch device every method trains on (cpu, cuda)")
    parser.add_argument(
        "--rows", type=int, default=None, help="training rows (default 1,280 quick, 7,680 full)"
    )
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    parser.add_argument("--model", default="mlp", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=1024, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    if _cuda() and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    if args.memory_child:
        memory_child(args.memory_child, args.batch, args.steps, args.model)
        return
    if not _cuda():
        torch.set_num_threads(1)
    else:
        print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    n, rounds = (1280, 11) if args.quick else (7680, 11)
    n = args.rows or n
    mem_steps = 2 if args.quick else 4
    results = {model: run_model(model, n, rounds, mem_steps) for model in args.models.split(",")}

    print()
    if "cnn" in results:
        sec, _, times = results["cnn"]
        # Per round: ghost over the faster of the two peers in that round.
        times["min(vmap, hooks)"] = [
            (min(a[0], b[0]), min(a[1], b[1]))
            for a, b in zip(times["ours vmap step"], times["opacus hooks step"], strict=True)
        ]
        ghost, ghost_cpu = _paired(times, "ours ghost step", "min(vmap, hooks)")
        print(
            f"{_verdict(ghost <= 1.0)} CNN: skdp ghost (mixed) step / min(skdp vmap, Opacus hooks) = {ghost:.2f} "
            f"(<= 1; CPU time {ghost_cpu:.2f}); medians: ghost {sec['ours ghost step']:.3f} s, "
            f"vmap {sec['ours vmap step']:.3f} s, Opacus hooks {sec['opacus hooks step']:.3f} s, "
            f"plain torch {sec['plain torch step']:.3f} s, Opacus ghost {sec['opacus ghost step']:.3f} s"
        )
    if "mlp" in results:
        sec, memory, times = results["mlp"]
        ratio, ratio_cpu = _paired(times, "ours eps=1 (skorch)", "plain skorch")
        fixed, _ = _paired(times, "ours ghost (skorch)", "plain skorch")
        print(
            f"{_verdict(ratio <= 1.5)} MLP: DP fit with defaults (epsilon=1, n_samples='auto') / plain skorch "
            f"= {ratio:.2f} (<= 1.5; CPU time {ratio_cpu:.2f}); with the noise multiplier given (no calibration) "
            f"{fixed:.2f}"
        )
        mem = memory["ours ghost (skorch)"]["peak_mb"] / memory["plain skorch"]["peak_mb"]
        what = "peak device allocation" if _cuda() else "peak RSS"
        print(f"{_verdict(mem <= 1.5)} MLP: ghost / plain skorch {what} at batch 1024 = {mem:.2f} (<= 1.5)")

    RESULTS.mkdir(exist_ok=True)
    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 3.8), squeeze=False)
    for ax, (model, (sec, _, _)) in zip(axes[0], results.items(), strict=True):
        names = list(sec)
        ax.barh(names, [n / sec[k] for k in names], color="tab:blue")
        ax.set_xlabel("training samples / s (batch 256)")
        ax.set_title(model.upper())
        ax.invert_yaxis()
    fig.suptitle(f"DP-SGD throughput on {DEVICE} (load average {_load()})")
    fig.tight_layout()
    out = RESULTS / ("dpsgd_speed.png" if DEVICE == "cpu" else f"dpsgd_speed_{DEVICE.split(':')[0]}.png")
    fig.savefig(out, dpi=120)
    print(f"plot: {out}")


if __name__ == "__main__":
    main()
