"""Held-out log-likelihood of private HMMs on war-log-like synthetic data (Foulds et al., Fig. 6/9).

The Wikileaks war logs are not shipped, so two datasets are generated from
known models with 5 categorical features of 2-10 values:

* "afghanistan": 3 states, record counts per (region, month) skewed and
  growing over time (median ~60, as the paper's 58);
* "iraq": 2 states, heavier cells (median ~500; the paper's median is 972).

For each dataset 10% of the (sequence, timestep) cells are held out (5 random
splits, 1 with --quick), and the held-out log-likelihood per held-out cell,
``log p(X_test | X_train)`` with the states marginalised by the forward
algorithm on all cells, is reported against epsilon for laplace, OPS and the
non-private sampler ("none", the peer every ratio is taken against), with
K=10 states (the paper's Figure 6 set-up) and K=1 (naive Bayes).  OPS is shown
with both accountings: "ops-worst" is epsilon-DP for the unconverged chain
(epsilon split over the 2 n_iter Gibbs releases), "ops-conv" is the paper's
setting, epsilon-DP only if the chain has converged.  The adjusted Rand index of
the training cells' states against the generating states is reported for K=10.

Usage: python benchmarks/hmm_warlogs_synthetic.py [--quick]
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
from sklearn.metrics import adjusted_rand_score  # noqa: E402

# Run against this checkout, not whatever skdp happens to be installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy.special import logsumexp  # noqa: E402

from skdp.bayes import DPNaiveBayesHMM  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)
RESULTS = Path(__file__).resolve().parent / "results"
N_CATEGORIES = (6, 10, 2, 3, 2)  # coarse type, fine category, three binary casualty indicators


def make_warlogs(kind, seed=0):
    """Records, sequence ids, timesteps and per-cell true states of one synthetic war."""
    rng = np.random.default_rng(seed)
    if kind == "afghanistan":
        n_states, n_seq, n_steps = 3, 8, 60
        # Log-normal cell sizes whose median grows ~5x over the six years.
        median = 25 * np.exp(np.linspace(0, np.log(5), n_steps))
        sizes = np.maximum(1, rng.lognormal(np.log(median)[None, :], 0.8, size=(n_seq, n_steps)).astype(int))
    else:
        n_states, n_seq, n_steps = 2, 6, 60
        sizes = np.maximum(1, rng.lognormal(np.log(500), 0.5, size=(n_seq, n_steps)).astype(int))
    stay = 0.92
    trans = np.full((n_states, n_states), (1 - stay) / (n_states - 1)) + np.eye(n_states) * (
        stay - (1 - stay) / (n_states - 1)
    )
    z = np.zeros((n_seq, n_steps), dtype=int)
    z[:, 0] = rng.integers(0, n_states, n_seq)
    for t in range(1, n_steps):
        z[:, t] = (np.cumsum(trans[z[:, t - 1]], axis=1) < rng.random(n_seq)[:, None]).sum(axis=1)
    thetas = [rng.dirichlet(np.full(k, 1.0), size=n_states) for k in N_CATEGORIES]
    per_record = np.repeat(z.reshape(-1), sizes.reshape(-1))
    X = np.column_stack(
        [
            (np.cumsum(th[per_record], axis=1) < rng.random(per_record.size)[:, None]).sum(axis=1)
            for th in thetas
        ]
    )
    seq = np.repeat(np.repeat(np.arange(n_seq), n_steps), sizes.reshape(-1))
    ts = np.repeat(np.tile(np.arange(n_steps), n_seq), sizes.reshape(-1))
    return X, seq, ts, z.reshape(-1), n_states


def cells(seq, ts):
    """Cell of every record and the cells of every sequence in time order.

    A cell is a (sequence, timestep) pair, numbered in sorted (sequence,
    timestep) order.  Returns ``(cell_of_record, grid)`` with ``grid[r, t]``
    the ``t``-th cell of sequence ``r`` (``-1`` past its end).
    """
    seq_labels, seq_codes = np.unique(seq, return_inverse=True)
    time_labels, time_codes = np.unique(ts, return_inverse=True)
    keys, cell_of_record = np.unique(seq_codes * len(time_labels) + time_codes, return_inverse=True)
    cell_seq = keys // len(time_labels)
    lengths = np.bincount(cell_seq, minlength=len(seq_labels))
    position = np.arange(len(keys)) - np.concatenate(([0], np.cumsum(lengths)[:-1]))[cell_seq]
    grid = np.full((len(seq_labels), lengths.max()), -1)
    grid[cell_seq, position] = np.arange(len(keys))
    return cell_of_record.reshape(-1), grid


def heldout_log_likelihood(model, X, seq, ts, test_cell):
    """``log p(X_test | X_train)`` per held-out cell, states marginalised over all cells.

    Forward algorithm on the full grid of cells twice: once with every cell's
    records, once with the held-out cells' emissions removed (likelihood 1);
    the difference is the predictive log-likelihood of the held-out cells.
    Computed here from the released parameters (``startprob_``,
    ``transmat_``, ``emissionprob_``, ``categories_``) only: post-processing.
    """
    cell_of_record, grid = cells(seq, ts)
    # log p(records of a cell | state): the records of a cell are independent given its state.
    log_emission = np.zeros((grid.max() + 1, model.n_components))
    for d, (cats, probs) in enumerate(zip(model.categories_, model.emissionprob_, strict=True)):
        codes = np.searchsorted(np.asarray(cats), X[:, d])
        np.add.at(log_emission, cell_of_record, np.log(np.maximum(probs[:, codes].T, 1e-300)))
    log_start = np.log(np.maximum(model.startprob_, 1e-300))
    log_trans = np.log(np.maximum(model.transmat_, 1e-300))

    def forward(log_em):
        alpha = log_start + log_em[grid[:, 0]]
        for t in range(1, grid.shape[1]):
            step = logsumexp(alpha[:, :, None] + log_trans[None], axis=1) + log_em[grid[:, t]]
            alpha = np.where((grid[:, t] >= 0)[:, None], step, alpha)
        return logsumexp(alpha, axis=1).sum()

    masked = np.where(test_cell[:, None], 0.0, log_emission)
    return float((forward(log_emission) - forward(masked)) / test_cell.sum())


def run(kind, n_components, epsilons, n_splits, n_iter, results):
    X, seq, ts, z_true, _ = make_warlogs(kind)
    cell, _ = cells(seq, ts)
    n_cells = cell.max() + 1
    cats = [list(range(k)) for k in N_CATEGORIES]
    configs = [("none", "none", {}, [None])]
    configs += [
        ("laplace", "laplace", {}, epsilons),
        ("ops-worst", "ops", {}, epsilons),
        ("ops-conv", "ops", {"ops_accounting": "converged"}, epsilons),
    ]
    for split in range(n_splits):
        rng = np.random.default_rng(100 + split)
        test_cell = np.zeros(n_cells, bool)
        test_cell[rng.choice(n_cells, size=max(1, n_cells // 10), replace=False)] = True
        train = ~test_cell[cell]
        for label, mech, extra, eps_list in configs:
            for eps in eps_list:
                model = DPNaiveBayesHMM(
                    n_components,
                    mechanism=mech,
                    epsilon=1.0 if eps is None else eps,
                    categories=cats,
                    n_iter=n_iter,
                    burn_in=n_iter // 2,
                    random_state=split,
                    **extra,
                )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model.fit(X[train], sequence_ids=seq[train], timesteps=ts[train])
                ll = heldout_log_likelihood(model, X, seq, ts, test_cell)
                ari = adjusted_rand_score(z_true[~test_cell], model.states_)
                results.setdefault((kind, n_components, label, eps), []).append((ll, ari))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 epsilons, 1 split, 40 iterations")
    args = parser.parse_args()
    epsilons = [0.1, 1.0, 10.0] if args.quick else [0.1, 0.3, 1.0, 3.0, 10.0]
    n_splits, n_iter = (1, 40) if args.quick else (5, 200)
    results = {}
    start = time.perf_counter()
    for kind in ("afghanistan", "iraq"):
        X, *_ = make_warlogs(kind)
        print(f"{kind}: {X.shape[0]} records")
        for k in (10, 1):
            run(kind, k, epsilons, n_splits, n_iter, results)
    print(f"({time.perf_counter() - start:.0f} s, {n_splits} splits, {n_iter} iterations)\n")

    header = f"{'data':<12}{'K':>3} {'method':<10}{'eps':>6}{'heldout LL':>12}{'none LL':>10}{'ratio':>7}{'ARI':>7}"
    print(header)
    print("-" * len(header))
    for kind in ("afghanistan", "iraq"):
        for k in (10, 1):
            base = np.mean([r[0] for r in results[(kind, k, "none", None)]])
            base_ari = np.mean([r[1] for r in results[(kind, k, "none", None)]])
            print(
                f"{kind:<12}{k:>3} {'none':<10}{'inf':>6}{base:>12.2f}{base:>10.2f}{1.0:>7.2f}{base_ari:>7.2f}"
            )
            for label in ("laplace", "ops-worst", "ops-conv"):
                for eps in epsilons:
                    vals = results[(kind, k, label, eps)]
                    ll, ari = np.mean([v[0] for v in vals]), np.mean([v[1] for v in vals])
                    print(
                        f"{kind:<12}{k:>3} {label:<10}{eps:>6g}{ll:>12.2f}{base:>10.2f}{ll / base:>7.2f}{ari:>7.2f}"
                    )

    RESULTS.mkdir(exist_ok=True)
    fig, axes = plt.subplots(2, 2, figsize=(9, 6.5))
    for row, k in enumerate((1, 10)):
        for col, kind in enumerate(("afghanistan", "iraq")):
            ax = axes[row, col]
            base = np.mean([r[0] for r in results[(kind, k, "none", None)]])
            for label in ("laplace", "ops-conv", "ops-worst"):
                ax.plot(
                    epsilons,
                    [np.mean([v[0] for v in results[(kind, k, label, e)]]) for e in epsilons],
                    "o-",
                    label=label,
                )
            ax.axhline(base, color="k", ls="--", label="non-private")
            ax.set_xscale("log")
            ax.set_title(f"{kind}, K={k}" + (" (naive Bayes)" if k == 1 else ""))
            ax.set_xlabel("epsilon")
            ax.set_ylabel("held-out log-lik per cell")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    out = RESULTS / "hmm_warlogs_synthetic.png"
    fig.savefig(out, dpi=120)
    print(f"\nplot: {out}")


if __name__ == "__main__":
    main()
