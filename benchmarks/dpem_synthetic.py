"""DP-EM on the paper's synthetic mixture (Park et al. 2017, Figure 2A).

Three isotropic 2-D Gaussians scaled into the unit ball; for each training
size N, 20 random initialisations of non-private EM (scikit-learn's
``GaussianMixture``) and of ``DPGaussianMixture`` at epsilon = 0.9 under RDP,
zCDP and advanced composition (spherical covariances, Laplace means, MAP).
Reported: test log-likelihood per point, interquartile mean (25-75%) over
the initialisations, averaged over datasets.  Target: RDP at least as good as
zCDP at every N, both approaching the non-private curve by N = 256k.

Run: ``python benchmarks/dpem_synthetic.py [--quick]``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

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
CENTERS = np.array([[-0.5, -0.3], [0.4, 0.4], [0.2, -0.5]])
STD = 0.1
COMPOSITIONS = ("rdp", "zcdp", "advanced")


def make_data(n_train, seed):
    """Train and test sets (test = 10% of train, as the paper), scaled into the unit ball."""
    rng = np.random.default_rng(seed)

    def draw(n):
        labels = rng.integers(3, size=n)
        return CENTERS[labels] + rng.normal(0, STD, size=(n, 2))

    train, test = draw(n_train), draw(max(n_train // 10, 100))
    scale = np.linalg.norm(train, axis=1).max()  # the paper's pre-processing; public here (synthetic)
    return train / scale, test / scale


def interquartile_mean(values):
    values = np.sort(np.asarray(values))
    lo, hi = np.percentile(values, [25, 75])
    return float(values[(values >= lo) & (values <= hi)].mean())


def run(sizes, n_inits, n_datasets, epsilon, delta, max_iter, init_params="random"):
    table = {name: [] for name in ("non-private", *COMPOSITIONS)}
    for n in sizes:
        per = {name: [] for name in table}
        for ds in range(n_datasets):
            train, test = make_data(n, seed=1000 * ds + n % 997)
            scores = {name: [] for name in table}
            for init in range(n_inits):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    gm = GaussianMixture(
                        3, covariance_type="spherical", init_params="random_from_data", random_state=init
                    )
                    scores["non-private"].append(gm.fit(train).score(test))
                for comp in COMPOSITIONS:
                    dp = DPGaussianMixture(
                        3,
                        covariance_type="spherical",
                        composition=comp,
                        max_iter=max_iter,
                        init_params=init_params,
                        data_norm=1.0,
                        epsilon=epsilon,
                        delta=delta,
                        random_state=init,
                    )
                    scores[comp].append(dp.fit(train).score(test))
            for name in table:
                per[name].append(interquartile_mean(scores[name]))
        for name in table:
            table[name].append(float(np.mean(per[name])))
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes, initialisations and datasets")
    parser.add_argument("--epsilon", type=float, default=0.9)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--max-iter", type=int, default=10)
    # The paper's protocol: 20 data-independent starts.  Single fits of the
    # private histogram start (the default): benchmarks/dpem_single_fit.py.
    parser.add_argument("--init", choices=("random", "histogram"), default="random")
    args = parser.parse_args(argv)
    if args.quick:
        sizes, n_inits, n_datasets = [1000, 8000, 64000, 256000], 5, 1
    else:
        sizes, n_inits, n_datasets = [1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000], 20, 5
    table = run(sizes, n_inits, n_datasets, args.epsilon, args.delta, args.max_iter, args.init)

    print(
        f"Test log-likelihood per point (interquartile mean over {n_inits} inits, mean over "
        f"{n_datasets} dataset(s)); epsilon={args.epsilon}, delta={args.delta}, J={args.max_iter}"
    )
    header = f"{'N':>8} {'non-private':>12} {'rdp':>8} {'zcdp':>8} {'advanced':>9} {'rdp-zcdp':>9} {'rdp/np gap':>11}"
    print(header)
    print("-" * len(header))
    for i, n in enumerate(sizes):
        npv, r, z, a = (table[name][i] for name in ("non-private", *COMPOSITIONS))
        print(f"{n:>8} {npv:>12.3f} {r:>8.3f} {z:>8.3f} {a:>9.3f} {r - z:>9.3f} {npv - r:>11.3f}")
    print("rdp-zcdp >= 0 means RDP at least as good; 'rdp/np gap' = non-private minus RDP")

    RESULTS.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    styles = {"non-private": "k:", "rdp": "C3o-", "zcdp": "C0s-", "advanced": "C7^-"}
    for name, values in table.items():
        ax.plot(sizes, values, styles[name], label=name)
    ax.set_xscale("log")
    ax.set_xlabel("training points N")
    ax.set_ylabel("test log-likelihood per point")
    ax.set_title(f"DP-EM, 3 isotropic 2-D Gaussians, epsilon={args.epsilon}")
    ax.legend()
    fig.tight_layout()
    out = RESULTS / "dpem_synthetic.png"
    fig.savefig(out, dpi=120)
    print(f"plot saved to {out}")
    return table


if __name__ == "__main__":
    main()
