"""``data_norm="auto"`` against a declared ``data_norm``, on today's declared-bounds examples.

For each estimator that clips rows to an L2 ball (DPGaussianMixture, DPKMeans,
DPPCA) and each example where the docs or benchmarks declare ``data_norm``,
fits with the declared bound and with ``data_norm="auto"`` (a private centre
and bound, ``bounds_budget=0.1``: :mod:`skdp.privacy.centring`), at several
epsilons and seeds, and prints the median utility of each:

* ``gmm-blobs3``: examples/quickstart.py's three blobs (20,000 rows, 30 %
  held out), ``data_norm=12``, full covariances, 5 iterations: held-out
  log-likelihood per row;
* ``gmm-dpem``: the DP-EM synthetic set of benchmarks/dpem_synthetic.py (3
  spherical Gaussians scaled into the unit ball, 10,000 rows),
  ``data_norm=1``, 10 iterations: held-out log-likelihood per row;
* ``gmm-digits``: load_digits / 16 (pixels in [0, 1], so ``data_norm=8 =
  sqrt(64)``), 10 tied components: log-likelihood per row (training rows);
* ``kmeans-digits``: load_digits / 16, ``data_norm=8``, k = 10 (the
  quickstart's and clustering_digits.py's set-up): clustering accuracy
  (Hungarian-matched);
* ``kmeans-blobs3``: the quickstart's blobs, ``data_norm=12``, k = 3:
  minus the k-means objective per row (raw rows, released centres);
* ``kmeans-iris``: iris (150 rows), ``data_norm=10`` (every row of iris has
  norm below 10), k = 3: accuracy;
* ``pca-digits``: load_digits / 16, ``data_norm=8``, 10 components: the
  share of the top-10 variance the released components capture
  (``tr(V S V^T) / sum of the top 10 eigenvalues of S``, ``S`` the exact
  covariance).

Every set is also shifted by +10 in every coordinate (``+10``): a declared
bound must then grow by ``10 sqrt(d)`` (the triangle inequality, all a user
knows without looking), while "auto" centres privately.  ``rel`` is
``(auto - declared) / |declared|`` on the same (shifted or not) data:
``>= -0.10`` is "within 10 %".

Run: ``python benchmarks/auto_bounds.py [--quick]`` (``--quick``: 2 seeds,
epsilons 1 and 3).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from scipy.optimize import linear_sum_assignment  # noqa: E402
from sklearn.datasets import load_digits, load_iris, make_blobs  # noqa: E402
from sklearn.metrics import confusion_matrix  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from skdp.cluster import DPKMeans  # noqa: E402
from skdp.mixture import DPGaussianMixture  # noqa: E402
from skdp.preprocessing import DPPCA  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)
SHIFT = 10.0


def accuracy(y, labels):
    """Clustering accuracy: the best matching of clusters to classes."""
    m = confusion_matrix(y, labels)
    rows, cols = linear_sum_assignment(-m)
    return m[rows, cols].sum() / len(y)


def blobs():
    X, y = make_blobs(n_samples=20_000, centers=3, random_state=0)
    return X, y


def dpem_data():
    centres = np.array([[-0.5, -0.3], [0.4, 0.4], [0.2, -0.5]])
    rng = np.random.default_rng(0)
    X = centres[rng.integers(3, size=11_000)] + rng.normal(0, 0.1, size=(11_000, 2))
    return X / np.linalg.norm(X, axis=1).max()


def digits():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


def gmm_case(X_train, X_test, norm, **params):
    def run(data_norm, eps, seed, shift):
        model = DPGaussianMixture(
            data_norm=data_norm, epsilon=eps, delta=1e-5, random_state=seed, **params
        ).fit(X_train + shift)
        return model.score(X_test + shift)

    return run, norm, X_train.shape[1]


def kmeans_case(X, y, norm, k, metric):
    def run(data_norm, eps, seed, shift):
        model = DPKMeans(k, epsilon=eps, data_norm=data_norm, random_state=seed).fit(X + shift)
        if metric == "acc":
            return accuracy(y, model.predict(X + shift))
        d2 = ((X[:, None, :] + shift - model.cluster_centers_[None]) ** 2).sum(axis=2)
        return -float(d2.min(axis=1).mean())

    return run, norm, X.shape[1]


def pca_case(X, norm, k):
    values, vectors = np.linalg.eigh(np.cov(X.T))
    top = np.sort(values)[::-1][:k].sum()
    cov = np.cov(X.T)

    def run(data_norm, eps, seed, shift):
        model = DPPCA(k, epsilon=eps, data_norm=data_norm, random_state=seed).fit(X + shift)
        V = model.components_
        return float(np.trace(V @ cov @ V.T) / top)

    return run, norm, X.shape[1]


def cases():
    Xb, yb = blobs()
    Xb_train, Xb_test = train_test_split(Xb, test_size=0.3, random_state=0)
    Xe = dpem_data()
    Xd, yd = digits()
    Xi, yi = load_iris(return_X_y=True)
    return {
        "gmm-blobs3": gmm_case(Xb_train, Xb_test, 12.0, n_components=3, max_iter=5),
        "gmm-dpem": gmm_case(
            Xe[:10_000], Xe[10_000:], 1.0, n_components=3, covariance_type="spherical", max_iter=10
        ),
        "gmm-digits": gmm_case(Xd, Xd, 8.0, n_components=10, covariance_type="tied", max_iter=5),
        "kmeans-digits": kmeans_case(Xd, yd, 8.0, 10, "acc"),
        "kmeans-blobs3": kmeans_case(Xb, yb, 12.0, 3, "objective"),
        "kmeans-iris": kmeans_case(Xi, yi, 10.0, 3, "acc"),
        "pca-digits": pca_case(Xd, 8.0, 10),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.3, 1.0, 3.0])
    parser.add_argument("--cases", nargs="+", default=None)
    args = parser.parse_args(argv)
    seeds = range(2 if args.quick else args.seeds)
    epsilons = [1.0, 3.0] if args.quick else args.epsilons
    header = f"{'case':<14} {'eps':>4} | {'declared':>9} {'auto':>9} {'rel':>7} | "
    header += f"{'decl+10':>9} {'auto+10':>9} {'rel+10':>7} | {'auto+10 vs auto':>15}"
    print(header)
    print("-" * len(header))
    for name, (run, norm, d) in cases().items():
        if args.cases and name not in args.cases:
            continue
        shifted_norm = norm + SHIFT * np.sqrt(d)
        for eps in epsilons:
            med = {}
            for label, data_norm, shift in (
                ("declared", norm, 0.0),
                ("auto", "auto", 0.0),
                ("decl+10", shifted_norm, SHIFT),
                ("auto+10", "auto", SHIFT),
            ):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    med[label] = float(np.median([run(data_norm, eps, s, shift) for s in seeds]))

            def rel(a, b, med=med):
                return (med[a] - med[b]) / abs(med[b])

            print(
                f"{name:<14} {eps:>4g} | {med['declared']:>9.4f} {med['auto']:>9.4f} "
                f"{rel('auto', 'declared'):>+7.1%} | {med['decl+10']:>9.4f} {med['auto+10']:>9.4f} "
                f"{rel('auto+10', 'decl+10'):>+7.1%} | {rel('auto+10', 'auto'):>+15.1%}",
                flush=True,
            )


if __name__ == "__main__":
    main()
