"""DP clustering on load_digits: ACC vs epsilon (Acs et al., Fig. 4) and fit time.

Compares, in the same run, on load_digits and on a clearly labelled synthetic
augmentation of it (jittered copies, ~18,000 rows; the paper used
60,000 MNIST rows):

* ``DPKernelKMeans`` (RBF random Fourier features, C = 1, Acs et al. Alg. 2),
* ``DPKMeans`` (DP Lloyd, rows clipped to the public bound sqrt(64) = 8 on
  digits scaled to [0, 1], the paper's C_s = sqrt(m) for its baseline),
* diffprivlib's ``KMeans`` with the same public bounds (box [0, 1]^64), run
  in its own environment with scikit-learn 1.7.2 (built by ``python
  benchmarks/peers/make_env.py diffprivlib``; without it the tables say
  "not installed" and leave its column out),
* non-private scikit-learn ``KMeans`` and ``RBFSampler`` + ``KMeans``, and
  two ceilings for a private run from a data-independent start: the same
  ``RBFSampler`` + ``KMeans`` with ``init="random"`` (no k-means++
  seeding, which reads the data) and ``DPKernelKMeans`` at epsilon = 1e6.

Accuracy is the unsupervised clustering accuracy (Hungarian matching of
clusters to labels, ``scipy.optimize.linear_sum_assignment``), averaged over
seeds.  The timing part fits 100,000 x 64 generated rows with the same number
of Lloyd iterations as scikit-learn's ``KMeans`` (``init="random"``,
``n_init=1``, ``tol=0``).

Run: ``python benchmarks/clustering_digits.py [--quick]``.  Writes
``benchmarks/results/clustering_digits.png``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.optimize import linear_sum_assignment  # noqa: E402
from sklearn.cluster import KMeans  # noqa: E402
from sklearn.datasets import load_digits, make_blobs  # noqa: E402
from sklearn.kernel_approximation import RBFSampler  # noqa: E402
from sklearn.metrics import confusion_matrix  # noqa: E402

from skdp.cluster import DPKernelKMeans, DPKMeans  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import PeerNotInstalled, describe, fit_many  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)
#: Peers run in their own environment (``benchmarks/peers/``).
PEERS = ("diffprivlib",)
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)
DELTA = 1e-5
K = 10
#: RBF width: fixed a priori for digits scaled to [0, 1] (not tuned per epsilon
#: nor on the labels; it is also the width of the non-private reference).
GAMMA = 0.05
#: Lloyd iterations of both skdp estimators: the public rule of
#: ``skdp.cluster._lloyd.auto_max_iter`` (same rule for both), and the old fixed 5.
MAX_ITER = "auto"
#: A budget at which the noise is negligible: the algorithm's own ceiling.
NOISELESS_EPSILON = 1e6
#: Copies of every digit in the augmented set (1,797 x 10 = 17,970 rows).
AUGMENT_COPIES = 10


def diffprivlib_labels(X, seeds):
    """diffprivlib's KMeans (box [0, 1]^m) for every (epsilon, seed), in its own environment.

    Returns ``(labels, versions)`` with ``labels[i][j]`` the ``predict(X)``
    of the fit at ``EPSILONS[i]`` and ``seeds[j]``; ``PeerNotInstalled``
    when ``benchmarks/.venvs/diffprivlib`` is not built.
    """
    m = X.shape[1]
    fits = [
        {
            "params": {"n_clusters": K, "epsilon": eps, "bounds": [[0.0] * m, [1.0] * m], "random_state": s},
            "X": "X",
            "predict": ["X"],
        }
        for eps in EPSILONS
        for s in seeds
    ]
    result = fit_many("diffprivlib", "diffprivlib.models.KMeans", fits, {"X": X}, tuple_params=["bounds"])
    labels = [np.asarray(f["predict"]["X"]) for f in result["fits"]]
    return [labels[i * len(seeds) : (i + 1) * len(seeds)] for i in range(len(EPSILONS))], describe(result)


def clustering_accuracy(y, labels):
    """ACC of Acs et al. (Section IV): best one-to-one map of clusters to labels."""
    n = max(y.max(), labels.max()) + 1
    cm = confusion_matrix(y, labels, labels=range(n))
    rows, cols = linear_sum_assignment(-cm)
    return cm[rows, cols].sum() / len(y)


def augmented_digits(X, y, copies=AUGMENT_COPIES, noise=0.1, seed=0):
    """A larger digits-like set: every digit repeated with small pixel jitter.

    Synthetic (clearly not load_digits itself): each copy adds N(0, 0.1^2)
    noise to every pixel, clipped back to the public range [0, 1].  (Shifts
    are left out: one pixel is an eighth of an 8x8 image, and k-means then
    clusters by position rather than by digit.)  Only shows how the methods
    scale with n (the paper used 60,000 MNIST rows); nothing is tuned on it.
    """
    rng = np.random.default_rng(seed)
    out = [np.clip(X + rng.normal(0.0, noise, X.shape), 0.0, 1.0) for _ in range(copies)]
    return np.vstack(out), np.tile(y, copies)


def methods(X):
    m = X.shape[1]
    out = {
        "DPKernelKMeans": lambda eps, s: DPKernelKMeans(
            K, epsilon=eps, delta=DELTA, gamma=GAMMA, max_iter=MAX_ITER, random_state=s
        ),
        "DPKernelKMeans d=50": lambda eps, s: DPKernelKMeans(
            K, epsilon=eps, delta=DELTA, gamma=GAMMA, n_components=50, max_iter=MAX_ITER, random_state=s
        ),
        "DPKMeans": lambda eps, s: DPKMeans(
            K, epsilon=eps, delta=DELTA, data_norm=np.sqrt(m), max_iter=MAX_ITER, random_state=s
        ),
        "DPKernelKMeans T=5": lambda eps, s: DPKernelKMeans(
            K, epsilon=eps, delta=DELTA, gamma=GAMMA, max_iter=5, random_state=s
        ),
        "DPKMeans T=5": lambda eps, s: DPKMeans(
            K, epsilon=eps, delta=DELTA, data_norm=np.sqrt(m), max_iter=5, random_state=s
        ),
    }
    return out


def accuracy_table(X, y, seeds):
    """ACC of every method, epsilon and seed; diffprivlib's when its environment is built.

    The last value returned is diffprivlib's versions, or the "not installed"
    message naming the command that builds its environment.
    """
    fits = methods(X)
    acc = {name: np.zeros((len(EPSILONS), len(seeds))) for name in fits}
    n_iter = {name: [None] * len(EPSILONS) for name in fits}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, eps in enumerate(EPSILONS):
            for j, s in enumerate(seeds):
                for name, make in fits.items():
                    est = make(eps, s).fit(X)
                    # The DP clusterers store no training labels (outside the
                    # guarantee); predict(X) is what labels_ held, here and
                    # in diffprivlib.
                    acc[name][i, j] = clustering_accuracy(y, est.predict(X))
                    n_iter[name][i] = getattr(est, "n_iter_", None)
    try:
        labels, peer = diffprivlib_labels(X, list(seeds))
    except PeerNotInstalled as exc:
        peer = str(exc)
    else:
        # diffprivlib's KMeans.predict (nearest released centre), as for ours.
        acc["diffprivlib"] = np.array([[clustering_accuracy(y, lab) for lab in row] for row in labels])
        n_iter["diffprivlib"] = [None] * len(EPSILONS)
    rff = {s: RBFSampler(gamma=GAMMA, n_components=200, random_state=s).fit_transform(X) for s in seeds}
    baselines = {
        "KMeans": [clustering_accuracy(y, KMeans(K, random_state=s).fit_predict(X)) for s in seeds],
        "RFF+KMeans": [clustering_accuracy(y, KMeans(K, random_state=s).fit_predict(rff[s])) for s in seeds],
        # What Lloyd's algorithm reaches on the same features without noise
        # and without k-means++ (whose seeding reads the data): the ceiling of
        # any private run from a data-independent start.
        "RFF+KMeans (random init)": [
            clustering_accuracy(y, KMeans(K, init="random", n_init=1, random_state=s).fit_predict(rff[s]))
            for s in seeds
        ],
        "DPKernelKMeans (no noise)": [
            clustering_accuracy(
                y,
                DPKernelKMeans(
                    K, epsilon=NOISELESS_EPSILON, delta=DELTA, gamma=GAMMA, max_iter=10, random_state=s
                ).fit_predict(X),
            )
            for s in seeds
        ],
        # Centres carrying no information about X: ACC of the Voronoi cells of
        # k random points of the box (what a fit reduces to when noise dominates).
        "chance (random centres)": [
            clustering_accuracy(
                y,
                np.argmin(
                    ((X[:, None, :] - np.random.default_rng(s).uniform(0, 1, (K, X.shape[1]))) ** 2).sum(-1),
                    axis=1,
                ),
            )
            for s in seeds
        ],
    }
    return acc, n_iter, {k: float(np.mean(v)) for k, v in baselines.items()}, peer


def print_table(title, acc, n_iter, base):
    names = list(acc)
    print(title)
    print("ACC mean over seeds (sd in the plot); [T] = iterations the auto rule chose")
    header = f"{'epsilon':>7} " + " ".join(f"{n:>20}" for n in names)
    header += f" {'ker/DPKMeans':>12} {'ker/diffprivlib':>15} {'RFF+KM - ker':>12}"
    print(header)
    for i, eps in enumerate(EPSILONS):
        cells = []
        for n in names:
            t = n_iter[n][i]
            tag = f"[{t}]" if t is not None and n.startswith("DPK") and "T=" not in n else ""
            cells.append(f"{acc[n][i].mean():>15.3f}{tag:>5}")
        ker = acc["DPKernelKMeans"][i].mean()
        r1 = ker / acc["DPKMeans"][i].mean()
        r2 = ker / acc["diffprivlib"][i].mean() if "diffprivlib" in acc else float("nan")
        print(f"{eps:>7g} {' '.join(cells)} {r1:>12.2f} {r2:>15.2f} {base['RFF+KMeans'] - ker:>12.3f}")
    print(
        "non-private: KMeans {KMeans:.3f}, RBFSampler(d=200)+KMeans {RFF+KMeans:.3f}; "
        "chance (random centres) {chance (random centres):.3f}".format(**base)
    )
    print(
        "ceilings from a data-independent start: RBFSampler+KMeans(init='random') "
        "{RFF+KMeans (random init):.3f}, DPKernelKMeans T=10 at epsilon=1e6 "
        "{DPKernelKMeans (no noise):.3f}".format(**base)
    )


def plot(ax, acc, base, title):
    for n in acc:
        ax.errorbar(EPSILONS, acc[n].mean(axis=1), yerr=acc[n].std(axis=1), marker="o", capsize=3, label=n)
    for label, style in (("KMeans", ":"), ("RFF+KMeans", "--"), ("chance (random centres)", "-.")):
        ax.axhline(base[label], color="grey", linestyle=style, label=f"{label} (non-private)")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon (delta = 1e-5)")
    ax.set_ylabel("clustering accuracy (ACC)")
    ax.set_title(title, fontsize=9)


def timing(n_repeats, max_iter=10):
    X, _ = make_blobs(n_samples=100_000, n_features=64, centers=K, random_state=0)
    X /= np.linalg.norm(X, axis=1).max()

    def best_of(fit):
        times = []
        for _ in range(n_repeats):
            t0 = time.perf_counter()
            fit()
            times.append(time.perf_counter() - t0)
        return min(times)

    def sk_kmeans(Z):
        return KMeans(K, init="random", n_init=1, max_iter=max_iter, tol=0.0, random_state=0).fit(Z)

    rows = []
    t_dp = best_of(lambda: DPKMeans(K, data_norm=1.0, max_iter=max_iter, random_state=0).fit(X))
    t_sk = best_of(lambda: sk_kmeans(X))
    rows.append(("DPKMeans vs KMeans", t_dp, t_sk))
    t_dpk = best_of(lambda: DPKernelKMeans(K, gamma=1.0, max_iter=max_iter, random_state=0).fit(X))
    t_rff = best_of(
        lambda: sk_kmeans(RBFSampler(gamma=1.0, n_components=200, random_state=0).fit_transform(X))
    )
    rows.append(("DPKernelKMeans vs RBFSampler+KMeans", t_dpk, t_rff))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds, one timing repeat")
    args = parser.parse_args(argv)
    seeds = range(3) if args.quick else range(20)
    seeds_aug = range(2) if args.quick else range(10)

    X, y = load_digits(return_X_y=True)
    X = X / 16.0  # public range of the pixels: [0, 16]
    acc, n_iter, base, peer = accuracy_table(X, y, seeds)
    print_table(
        f"load_digits (n={len(X)}, k={K}, delta={DELTA}, {len(seeds)} seeds, gamma={GAMMA})",
        acc,
        n_iter,
        base,
    )
    print(f"diffprivlib: {peer}")

    Xa, ya = augmented_digits(X, y)
    acc_a, n_iter_a, base_a, _ = accuracy_table(Xa, ya, seeds_aug)
    print()
    print_table(
        f"AUGMENTED digits (synthetic: {AUGMENT_COPIES} jittered copies, n={len(Xa)}, "
        f"{len(seeds_aug)} seeds)",
        acc_a,
        n_iter_a,
        base_a,
    )

    print("\nFit time, 100,000 x 64, 10 Lloyd iterations (best of runs)")
    print(f"{'comparison':>36} {'skdp (s)':>9} {'sklearn (s)':>12} {'ratio':>6}")
    for label, t_ours, t_peer in timing(1 if args.quick else 3):
        print(f"{label:>36} {t_ours:>9.3f} {t_peer:>12.3f} {t_ours / t_peer:>6.2f}")
    print(f"load average: {os.getloadavg()[0]:.2f}")

    os.makedirs(RESULTS, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    plot(axes[0], acc, base, f"load_digits, k = 10, n = {len(X)}")
    plot(axes[1], acc_a, base_a, f"augmented digits (synthetic), n = {len(Xa)}")
    axes[1].legend(fontsize=6)
    fig.tight_layout()
    path = os.path.join(RESULTS, "clustering_digits.png")
    fig.savefig(path, dpi=120)
    print(f"\nplot: {path}")


if __name__ == "__main__":
    main()
