"""Fit time of DPGaussianMixture against scikit-learn's GaussianMixture, same iterations.

Issue 3, benchmark 3: 100,000 x 10, K = 3, full covariances, 10 EM
iterations (scikit-learn with ``max_iter=10, tol=0, n_init=1``; its k-means
initialisation is excluded by passing the same public initial means, so both
time the EM loop).  Target: ratio <= 1.5.

Run: ``python benchmarks/dpem_speed.py [--quick]``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

# Run from a checkout: use this tree's skdp, whatever is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.mixture import GaussianMixture  # noqa: E402

from skdp.mixture import DPGaussianMixture  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)
RESULTS = Path(__file__).resolve().parent / "results"


def _data(n, d, k, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 3, size=(k, d))
    labels = rng.integers(k, size=n)
    return centers[labels] + rng.normal(size=(n, d)), centers


def _best_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and sizes")
    args = parser.parse_args(argv)
    d, k, iters = 10, 3, 10
    sizes = [100_000] if args.quick else [25_000, 50_000, 100_000, 200_000]
    repeats = 3 if args.quick else 5
    rows = []
    for n in sizes:
        X, centers = _data(n, d, k)
        means_init = centers + 0.5
        data_norm = float(np.quantile(np.linalg.norm(X, axis=1), 0.99))

        def fit_sklearn(X=X, means_init=means_init):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                GaussianMixture(
                    k,
                    covariance_type="full",
                    max_iter=iters,
                    tol=0,
                    n_init=1,
                    means_init=means_init,
                    random_state=0,
                ).fit(X)

        def fit_sklearn_kmeans_init(X=X):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                GaussianMixture(
                    k, covariance_type="full", max_iter=iters, tol=0, n_init=1, random_state=0
                ).fit(X)

        def fit_dp(X=X, means_init=means_init, data_norm=data_norm):
            DPGaussianMixture(
                k,
                covariance_type="full",
                max_iter=iters,
                data_norm=data_norm,
                means_init=means_init,
                random_state=0,
            ).fit(X)

        fit_dp()  # warm-up (imports, first calibration)
        t_sk = _best_time(fit_sklearn, repeats)
        t_sk_km = _best_time(fit_sklearn_kmeans_init, repeats)
        t_dp = _best_time(fit_dp, repeats)
        rows.append((n, t_sk, t_sk_km, t_dp, t_dp / t_sk))

    header = f"{'n':>8} {'sklearn (s)':>12} {'sklearn+kmeans (s)':>19} {'DP-EM (s)':>10} {'ratio':>7}"
    print(f"Fit time, d={d}, K={k}, full covariances, {iters} iterations (best of {repeats})")
    print(header)
    print("-" * len(header))
    for n, t_sk, t_sk_km, t_dp, ratio in rows:
        print(f"{n:>8} {t_sk:>12.3f} {t_sk_km:>19.3f} {t_dp:>10.3f} {ratio:>7.2f}")
    print("ratio = DP-EM / sklearn with the same initial means (target <= 1.5)")

    RESULTS.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ns = [r[0] for r in rows]
    ax.plot(ns, [r[1] for r in rows], "o-", label="sklearn GaussianMixture")
    ax.plot(ns, [r[3] for r in rows], "s-", label="DPGaussianMixture")
    ax.set_xlabel("n_samples")
    ax.set_ylabel("fit time (s)")
    ax.set_title(f"d={d}, K={k}, full, {iters} iterations")
    ax.legend()
    fig.tight_layout()
    out = RESULTS / "dpem_speed.png"
    fig.savefig(out, dpi=120)
    print(f"plot saved to {out}")
    return rows


if __name__ == "__main__":
    main()
