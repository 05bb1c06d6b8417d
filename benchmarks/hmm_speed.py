"""Speed of DPNaiveBayesHMM's vectorised Gibbs sampler (issue 5).

The issue's workload: 50 sequences x 60 timesteps x ~100 records x 5
categorical features, 200 Gibbs iterations, under 30 s.  Reference: hmmlearn's
CategoricalHMM EM (200 iterations, tol=0) on the same state paths with a single
emission per step (the first record's 10-category feature), since hmmlearn has
no multi-record emissions.  hmmlearn is a benchmark-only peer.

Usage: python benchmarks/hmm_speed.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Run against this checkout, not whatever skdp happens to be installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skdp.bayes import DPNaiveBayesHMM  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)
RESULTS = Path(__file__).resolve().parent / "results"
N_CATEGORIES = (2, 4, 6, 8, 10)


def make_data(n_seq, n_steps, n_records, n_states=2, seed=0):
    rng = np.random.default_rng(seed)
    trans = np.full((n_states, n_states), 0.1 / max(n_states - 1, 1)) + np.eye(n_states) * (
        0.9 - 0.1 / max(n_states - 1, 1)
    )
    z = np.zeros((n_seq, n_steps), dtype=int)
    z[:, 0] = rng.integers(0, n_states, n_seq)
    for t in range(1, n_steps):
        z[:, t] = (np.cumsum(trans[z[:, t - 1]], axis=1) < rng.random(n_seq)[:, None]).sum(axis=1)
    per_record = np.repeat(z.reshape(-1), n_records)
    X = np.column_stack(
        [
            (
                np.cumsum(rng.dirichlet(np.full(k, 0.5), size=n_states)[per_record], axis=1)
                < rng.random(per_record.size)[:, None]
            ).sum(axis=1)
            for k in N_CATEGORIES
        ]
    )
    seq = np.repeat(np.arange(n_seq), n_steps * n_records)
    ts = np.tile(np.repeat(np.arange(n_steps), n_records), n_seq)
    return X, seq, ts, z


def time_ours(X, seq, ts, mechanism, n_iter, **extra):
    model = DPNaiveBayesHMM(
        2,
        mechanism=mechanism,
        epsilon=5.0,
        categories=[list(range(k)) for k in N_CATEGORIES],
        n_iter=n_iter,
        burn_in=n_iter // 2,
        random_state=0,
        **extra,
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, sequence_ids=seq, timesteps=ts)
    return time.perf_counter() - start


def time_hmmlearn(X, n_seq, n_steps, n_records, n_iter):
    """Fit time of hmmlearn's EM, or None when hmmlearn (``pip install -e .[bench]``) is missing."""
    try:
        from hmmlearn.hmm import CategoricalHMM
    except ImportError:
        return None

    first = X[::n_records, -1].reshape(-1, 1)  # one emission per step
    model = CategoricalHMM(
        n_components=2, n_iter=n_iter, tol=0.0, random_state=0, n_features=N_CATEGORIES[-1]
    )
    start = time.perf_counter()
    model.fit(first, lengths=[n_steps] * n_seq)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (for CI smoke runs)")
    args = parser.parse_args()
    n_seq, n_steps, n_records = 50, 60, 100
    n_iter = 50 if args.quick else 200
    X, seq, ts, _ = make_data(n_seq, n_steps, n_records)
    print(
        f"data: {n_seq} sequences x {n_steps} timesteps x {n_records} records x {X.shape[1]} features "
        f"= {X.shape[0]} records; {n_iter} iterations"
    )
    peer = time_hmmlearn(X, n_seq, n_steps, n_records, n_iter)
    rows = []
    for label, mech, extra in [
        ("none", "none", {}),
        ("laplace", "laplace", {}),
        ("ops (worst case)", "ops", {}),
        ("ops (converged)", "ops", {"ops_accounting": "converged"}),
    ]:
        t = time_ours(X, seq, ts, mech, n_iter, **extra)
        rows.append((label, t))
    if peer is None:
        print("hmmlearn not installed: run `pip install -e .[bench]`")
    peer_s = float("nan") if peer is None else peer
    print(f"\n{'method':<22}{'ours [s]':>10}{'hmmlearn EM [s]':>17}{'ratio':>8}")
    for label, t in rows:
        print(f"{label:<22}{t:>10.2f}{peer_s:>17.2f}{t / peer_s:>8.2f}")
    budget = 30.0 * n_iter / 200
    print(
        f"\ntarget: under {budget:.0f} s for {n_iter} iterations (30 s for 200): "
        f"{'met' if max(t for _, t in rows) < budget else 'NOT met'}"
    )

    RESULTS.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    labels = [r[0] for r in rows] + ([] if peer is None else ["hmmlearn EM\n(1 emission/step)"])
    ax.barh(
        labels, [r[1] for r in rows] + ([] if peer is None else [peer]), color=["C0"] * len(rows) + ["C1"]
    )
    ax.axvline(budget, color="k", ls="--", lw=1, label="issue target")
    ax.set_xlabel(f"fit time [s], {n_iter} iterations")
    ax.legend()
    fig.tight_layout()
    out = RESULTS / "hmm_speed.png"
    fig.savefig(out, dpi=120)
    print(f"plot: {out}")


if __name__ == "__main__":
    main()
