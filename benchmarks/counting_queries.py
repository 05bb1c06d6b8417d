"""Counting queries on synthetic records: DPGenerativeMixture vs MWEM (Acs et al., Figure 5).

Data: a generated call-detail-record-like binary dataset (no download): ``m``
cell towers, ``N`` users in a few latent "home regions"; each user visits a
handful of towers drawn from a region-specific distribution, so records are
sparse (a few ones out of ``m``) and correlated.

Queries: a query is a set ``S`` of towers and counts the users who visited at
least one of them.  1,000 random queries in 5 length classes: the lengths of
class ``i`` are uniform in ``[1, i * max|x|_1 / 5]`` and the towers uniform
from the universe (Section IV).  Error: mean relative error
``|Q(D^) - Q(D)| / max(Q(D), s)`` with sanity bound ``s = 0.1% N``.

Ours: DPGenerativeMixture (VAE) at ``(epsilon, delta = 1e-5)`` under add/remove
neighbours, then ``N`` synthetic records and the exact counts on them.

MWEM (Hardt, Ligett & McSherry 2012), implemented here as in the paper's
footnote 7: records are clipped to ``c`` towers (``c`` = the public average
record size, rounded up) and the data is the tower histogram, whose total mass
is released first with 5% of the budget; each of ``T = 50`` rounds spends ``0.95 epsilon / (2T)`` on an exponential-mechanism choice of the
worst-answered workload query (a sum of tower counts, sensitivity ``c``) and
``0.95 epsilon / (2T)`` on its Laplace measurement, followed by multiplicative-weights
updates over all measurements.  A set query is then answered from the learned
tower frequencies ``f`` assuming independent towers:
``N (1 - prod_{i in S} (1 - f_i))`` (``N`` public), which is more accurate
than the raw sum of tower counts.  MWEM is pure epsilon-DP (replace-one
histogram neighbours), so it is favoured over ours.

Run: ``python benchmarks/counting_queries.py [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from skdp.generative import DPGenerativeMixture  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
N_CLASSES = 5


def make_cdr(n_users, n_towers, n_regions=6, mean_visits=4.0, seed=0):
    """Sparse binary visit records with regional structure."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 1, size=(n_regions, 2))
    towers = rng.uniform(0, 1, size=(n_towers, 2))
    # Region-specific tower preferences: nearby towers are far more likely.
    d2 = ((centres[:, None, :] - towers[None, :, :]) ** 2).sum(-1)
    prefs = np.exp(-d2 / 0.05)
    prefs = 0.9 * prefs / prefs.sum(1, keepdims=True) + 0.1 / n_towers
    region = rng.choice(n_regions, size=n_users, p=rng.dirichlet(np.full(n_regions, 3.0)))
    X = np.zeros((n_users, n_towers))
    sizes = np.minimum(n_towers, 1 + rng.poisson(mean_visits - 1, size=n_users))
    for u in range(n_users):
        X[u, rng.choice(n_towers, size=sizes[u], replace=False, p=prefs[region[u]])] = 1.0
    return X


def make_queries(n_towers, max_len, n_queries=1000, seed=1):
    """List of (tower index array, length class) as in Section IV."""
    rng = np.random.default_rng(seed)
    queries = []
    for i in range(n_queries):
        cls = i * N_CLASSES // n_queries + 1
        length = rng.integers(1, max(1, cls * max_len // N_CLASSES) + 1)
        queries.append((rng.choice(n_towers, size=min(length, n_towers), replace=False), cls))
    return queries


def answer(X, queries):
    return np.array([float(np.any(X[:, S] > 0, axis=1).sum()) for S, _ in queries])


def relative_errors(true, est, n):
    return np.abs(est - true) / np.maximum(true, 1e-3 * n)


def mwem(X, queries, epsilon, clip, n_rounds, rng):
    """MWEM over the tower histogram (records clipped to ``clip`` towers); returns answers."""
    n, m = X.shape
    Xc = X.copy()
    for u in np.flatnonzero(X.sum(1) > clip):
        on = np.flatnonzero(X[u])
        Xc[u, rng.choice(on, size=len(on) - clip, replace=False)] = 0.0
    hist = Xc.sum(0)
    # The histogram's mass (number of visits) is private: 5% of the budget
    # releases it (Laplace, sensitivity clip); the rounds share the rest.
    total = max(1.0, hist.sum() + rng.laplace(0.0, clip / (0.05 * epsilon)))
    epsilon = 0.95 * epsilon
    Q = np.zeros((len(queries), m))
    for j, (S, _) in enumerate(queries):
        Q[j, S] = 1.0
    true_lin = Q @ hist
    A = np.full(m, total / m)
    eps_round = epsilon / (2 * n_rounds)
    measured = []
    for _ in range(n_rounds):
        # Exponential mechanism on |q(A) - q(hist)|, sensitivity clip.
        score = np.abs(Q @ A - true_lin)
        logits = eps_round * score / (2 * clip)
        probs = np.exp(logits - logits.max())
        j = rng.choice(len(queries), p=probs / probs.sum())
        measured.append((j, true_lin[j] + rng.laplace(0.0, clip / eps_round)))
        for _ in range(5):  # multiplicative weights over all measurements so far
            for jj, value in measured:
                A = A * np.exp(Q[jj] * (value - Q[jj] @ A) / (2 * total))
                A *= total / A.sum()
    freq = np.clip(A / n, 0.0, 1.0)
    return np.array([n * (1 - np.prod(1 - freq[S])) for S, _ in queries])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--n-clusters", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    n_users, n_towers = (2000, 60) if args.quick else (6000, 100)
    epsilons = [1.0, 4.0] if args.quick else [0.5, 1.0, 2.0, 4.0]
    epochs = args.epochs or (3 if args.quick else 10)

    X = make_cdr(n_users, n_towers)
    max_len = int(X.sum(1).max())
    clip = int(np.ceil(X.sum(1).mean()))
    queries = make_queries(n_towers, max_len)
    classes = np.array([c for _, c in queries])
    true = answer(X, queries)
    rows = []
    for eps in epsilons:
        start = time.perf_counter()
        gm = DPGenerativeMixture(
            generator="vae",
            n_clusters=args.n_clusters,
            hidden_units=64,
            latent_dim=4,
            batch_size=64,
            n_epochs=epochs,
            learning_rate=1e-2,
            epsilon=eps,
            delta=1e-5,
            random_state=0,
        ).fit(X)
        fit_s = time.perf_counter() - start
        ours = relative_errors(true, answer(gm.sample(n_users, random_state=0), queries), n_users)
        base = relative_errors(true, mwem(X, queries, eps, clip, 50, np.random.default_rng(0)), n_users)
        for cls in range(1, N_CLASSES + 1):
            mask = classes == cls
            rows.append((eps, cls, ours[mask].mean(), base[mask].mean()))
        rows.append((eps, "all", ours.mean(), base.mean()))
        print(
            f"epsilon={eps:g}: ours {ours.mean():.4f}, MWEM {base.mean():.4f}, fit {fit_s:.0f} s", flush=True
        )

    print(
        f"\nMean relative error of 1,000 counting queries (sanity bound 0.1% N), N={n_users}, m={n_towers}, "
        f"max|x|_1={max_len}, avg|x|_1={X.sum(1).mean():.2f}; DPGM k={args.n_clusters} VAE, {epochs} epochs, "
        f"delta=1e-5; MWEM T=50, clip={clip}; load average {os.getloadavg()[0]:.1f}"
    )
    print("| epsilon | query length class | DPGM | MWEM | DPGM / MWEM |")
    print("|---|---|---|---|---|")
    for eps, cls, ours, base in rows:
        label = "all" if cls == "all" else f"{20 * cls}%"
        print(f"| {eps:g} | {label} | {ours:.4f} | {base:.4f} | {ours / base:.2f} |")

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, col in (("DPGM", 2), ("MWEM", 3)):
        ax.plot(epsilons, [r[col] for r in rows if r[1] == "all"], marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("mean relative error")
    ax.set_title("Counting queries (Acs et al., Fig. 5 protocol)")
    ax.legend()
    fig.tight_layout()
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, "counting_queries.png")
    fig.savefig(path, dpi=120)
    print(f"\nPlot: {path}")


if __name__ == "__main__":
    main()
