"""DPGenerativeMixture on binarised digits: samples per cluster and train-on-synthetic accuracy.

Acs et al. (2018), Figure 3 protocol on scikit-learn's ``load_digits`` (8x8
images, binarised at 8/16): the labels are appended as 10 one-hot binary
columns so the generators produce labelled records.  For every epsilon
(delta = 1e-5):

(a) a grid of 8 samples per cluster of the DP mixture (Figure 3c) and of the
    single DP VAE without clustering (Figure 3b), saved to
    ``benchmarks/results/generative_digits.png``;
(b) accuracy on the real test set of a LogisticRegression trained on
    synthetic records ("train on synthetic, test on real"), for the mixture
    (k = 10 clusters) and a single DP VAE (k = 1) with the same DP-SGD
    settings, next to training on the real records.

Ten records (one per digit, held out from train and test) play the public
records of Alg. 2 line 6 / footnote 3 that initialise the kernel k-means.
Synthetic records are kept when their label block is exactly one-hot
(post-processing).

Run: ``python benchmarks/generative_digits.py [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from skdp.generative import DPGenerativeMixture  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
N_CLASSES = 10


def load(seed=0):
    """Binarised digits with one-hot labels; (train, test, public init rows)."""
    X, y = load_digits(return_X_y=True)
    X = (X > 7).astype(float)
    public = np.array([np.flatnonzero(y == c)[0] for c in range(N_CLASSES)])
    rest = np.setdiff1d(np.arange(len(y)), public)
    tr, te = train_test_split(rest, test_size=0.3, random_state=seed, stratify=y[rest])
    onehot = np.eye(N_CLASSES)
    Z = np.hstack([X, onehot[y]])
    return (Z[tr], X[tr], y[tr]), (X[te], y[te]), Z[public]


def labelled_synthetic(model, n, seed, max_rounds=20):
    """Synthetic (images, labels): rows whose label block is exactly one-hot."""
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for _ in range(max_rounds):
        S = model.sample(2 * n, random_state=rng)
        block = S[:, -N_CLASSES:]
        keep = block.sum(1) == 1
        images.append(S[keep, :-N_CLASSES])
        labels.append(block[keep].argmax(1))
        if sum(len(y) for y in labels) >= n:
            break
    return np.concatenate(images)[:n], np.concatenate(labels)[:n]


def tstr(model, n, X_test, y_test, seed):
    Xs, ys = labelled_synthetic(model, n, seed)
    if len(np.unique(ys)) < 2:
        return float("nan")
    clf = LogisticRegression(max_iter=2000).fit(Xs, ys)
    return float(clf.score(X_test, y_test))


def make_model(n_clusters, epsilon, init, args, seed):
    return DPGenerativeMixture(
        generator="vae",
        n_clusters=n_clusters,
        hidden_units=args.hidden_units,
        latent_dim=args.latent_dim,
        gamma=args.gamma,
        kmeans_iter=args.kmeans_iter,
        cluster_init=init if n_clusters > 1 else "random",
        cluster_budget=args.cluster_budget,
        batch_size=args.batch_size,
        n_epochs=args.epochs,
        learning_rate=args.learning_rate,
        clip_norm=args.clip_norm if args.clip_norm == "auto" else float(args.clip_norm),
        epsilon=epsilon,
        delta=1e-5,
        random_state=seed,
    )


def sample_grid(ax, model, title, seed):
    """8 samples per cluster, one row per cluster (Figure 3c/d)."""
    k = len(model.generators_)
    rows = []
    for s in range(k):
        S = model.sample(8, cluster=s, random_state=1000 * seed + s)[:, :64]
        rows.append(np.hstack([np.pad(img.reshape(8, 8), 1, constant_values=0.5) for img in S]))
    ax.imshow(np.vstack(rows), cmap="gray_r", vmin=0, vmax=1)
    ax.set_title(title, fontsize=8)
    ax.axis("off")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two epsilons, few epochs (< ~2 min)")
    parser.add_argument("--epsilons", type=float, nargs="+", default=None)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--hidden-units", type=int, default=64)
    parser.add_argument("--latent-dim", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=1e-2)
    parser.add_argument("--clip-norm", default="auto")
    parser.add_argument("--gamma", type=float, default=0.02)
    parser.add_argument("--kmeans-iter", type=int, default=1)
    parser.add_argument("--cluster-budget", type=float, default=0.1)
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.epsilons is None:
        args.epsilons = [1.0, 8.0] if args.quick else [1.0, 2.0, 8.0]
    if args.epochs is None:
        args.epochs = 3 if args.quick else 30

    (Z, X_train, y_train), (X_test, y_test), init = load()
    real = float(LogisticRegression(max_iter=2000).fit(X_train, y_train).score(X_test, y_test))
    rows, grids = [], []
    for eps in args.epsilons:
        acc = {1: [], 10: []}
        secs = {1: [], 10: []}
        for seed in range(args.seeds):
            for k in (10, 1):
                start = time.perf_counter()
                model = make_model(k, eps, init, args, seed).fit(Z)
                secs[k].append(time.perf_counter() - start)
                acc[k].append(tstr(model, len(Z), X_test, y_test, seed))
                if seed == 0:
                    grids.append((eps, k, model))
        rows.append((eps, np.mean(acc[10]), np.mean(acc[1]), real, np.mean(secs[10]), np.mean(secs[1])))
        print(f"epsilon={eps:g}: mixture {acc[10]}, single {acc[1]}", file=sys.stderr, flush=True)

    load_avg = os.getloadavg()[0]
    print(
        f"\nTrain on synthetic, test on real (LogisticRegression), binarised digits, "
        f"{len(Z)} train / {len(X_test)} test records, delta=1e-5, {args.epochs} epochs, "
        f"{args.seeds} seed(s); load average {load_avg:.1f}"
    )
    print(
        "| epsilon | DPGM k=10 | single DP VAE | train on real | DPGM / single | DPGM / real | fit s (k=10, k=1) |"
    )
    print("|---|---|---|---|---|---|---|")
    for eps, mix, single, real_acc, s10, s1 in rows:
        print(
            f"| {eps:g} | {mix:.3f} | {single:.3f} | {real_acc:.3f} | {mix / single:.2f} | "
            f"{mix / real_acc:.2f} | {s10:.0f}, {s1:.0f} |"
        )

    fig, axes = plt.subplots(1, len(grids), figsize=(3 * len(grids), 4.5))
    for ax, (eps, k, model) in zip(np.atleast_1d(axes), grids, strict=True):
        name = "DPGM, k=10" if k == 10 else "single DP VAE"
        sample_grid(ax, model, f"{name}, eps={eps:g}", 0)
    fig.tight_layout()
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, "generative_digits.png")
    fig.savefig(path, dpi=120)
    print(f"\nSample grids: {path}")


if __name__ == "__main__":
    main()
