"""DP-EM in "k-means mode" against DPLloyd (Park et al. 2017, Figure 3A).

The paper clusters 1% subsets of Gowalla check-in locations (2-D, scaled into
the unit ball) and reports the normalised intra-cluster variance (NICV) over
epsilon in [0.01, 1].  No data may be downloaded here, so the data set is a
synthetic location-like one: 12,500 points around "cities" of very different
sizes and spreads plus a uniform background, scaled into the unit ball.

Methods (each fit on the same subset; NICV = mean squared distance of a
point to its nearest released centre, in the unit-ball scale):

* DPLloyd (diffprivlib): diffprivlib's ``KMeans`` (Su et al.'s DPLloyd,
  Laplace noise on counts and coordinate sums, pure epsilon-DP under basic
  composition), bounds [-1, 1]^2: the kind of baseline of the paper's
  Figure 3, whose DPLloyd adds ``Lap((d + 1) J / epsilon)`` noise;
* DPKMeans (skdp): our DPLloyd, Gaussian noise, RDP accounting,
  ``delta=1e-5``, its default size/sum noise ratio, ``max_iter=J``;
* DP-EM (pure): ``DPGaussianMixture`` with a tied covariance
  (``--covariance-type``; k-means is the limit of EM with one shared
  covariance, and the tied model releases its second moment once per fit
  instead of once per iteration), Laplace noise everywhere and ``delta=0``
  (pure epsilon-DP, like diffprivlib's);
* DP-EM (rdp): Gaussian noise everywhere (the paper's CDPgau), RDP
  accounting and ``delta=1e-5``, ``max_iter=J``;
* non-private k-means (scikit-learn) as the floor.

Both private Lloyd and DP-EM get the same tuning: the same number of
iterations ``J`` (``--max-iter``, default 5, the documented default of both
``DPKMeans`` and ``DPGaussianMixture``) and their default budget split
between sizes/weights and sums/means (the same centre-error rule in both).
Only the data-independent initialisations differ (random partition for
DPKMeans, narrow components uniform in the unit ball for DP-EM), each the
estimator's default.

diffprivlib 0.6.6 needs scikit-learn < 1.8, so it runs in its own environment
with scikit-learn 1.7.2 (``python benchmarks/peers/make_env.py diffprivlib``;
without it the DPLloyd column reads "not installed").  Target (issue 3): DP-EM
below DPLloyd at every epsilon.
The ratio columns compare like with like: pure DP-EM against diffprivlib's
pure DPLloyd, RDP DP-EM against RDP DPKMeans.

Run: ``python benchmarks/dpem_kmeans_mode.py [--quick]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.cluster import KMeans  # noqa: E402

from skdp.cluster import DPKMeans  # noqa: E402
from skdp.mixture import DPGaussianMixture  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peers import PeerNotInstalled, describe, fit_many  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)
#: Peers run in their own environment (``benchmarks/peers/``).
PEERS = ("diffprivlib",)

RESULTS = Path(__file__).resolve().parent / "results"


def dplloyd_centres(subsets, epsilons, k):
    """diffprivlib's KMeans (bounds [-1, 1]^2) on every subset and epsilon, in its own environment.

    Returns ``(centres, versions)`` with ``centres[rep][eps]`` the released
    ``cluster_centers_``; raises ``PeerNotInstalled`` when
    ``benchmarks/.venvs/diffprivlib`` is not built.
    """
    fits = [
        {
            "params": {
                "n_clusters": k,
                "epsilon": eps,
                "bounds": [[-1.0, -1.0], [1.0, 1.0]],
                "random_state": rep,
            },
            "X": f"X{rep}",
            "attributes": ["cluster_centers_"],
        }
        for rep in range(len(subsets))
        for eps in epsilons
    ]
    arrays = {f"X{rep}": X for rep, X in enumerate(subsets)}
    result = fit_many("diffprivlib", "diffprivlib.models.KMeans", fits, arrays, tuple_params=["bounds"])
    out = iter(np.asarray(f["attributes"]["cluster_centers_"]) for f in result["fits"])
    return [{eps: next(out) for eps in epsilons} for _ in subsets], describe(result)


def location_data(n, seed=0):
    """Check-in-like 2-D points: heavy-tailed city sizes, a background, scaled into the unit ball."""
    rng = np.random.default_rng(seed)
    n_cities = 12
    centers = rng.uniform(-0.7, 0.7, size=(n_cities, 2))
    sizes = rng.pareto(1.2, n_cities) + 0.2
    spreads = rng.uniform(0.02, 0.08, n_cities)
    n_bg = n // 10
    labels = rng.choice(n_cities, size=n - n_bg, p=sizes / sizes.sum())
    pts = centers[labels] + rng.normal(size=(n - n_bg, 2)) * spreads[labels, None]
    pts = np.vstack([pts, rng.uniform(-0.8, 0.8, size=(n_bg, 2))])
    norms = np.linalg.norm(pts, axis=1)
    return pts / np.maximum(norms, 1.0)[:, None]


def public_centres(k, seed):
    """Data-independent starting centres, uniform in the disc of radius 0.8 (the data's box)."""
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=(k, 2))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return direction * np.sqrt(rng.random((k, 1))) * 0.8


def nicv(X, centers):
    d2 = ((X[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
    return float(d2.min(axis=1).mean())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and epsilons")
    parser.add_argument("--n-clusters", type=int, default=5)
    parser.add_argument("--max-iter", type=int, default=5, help="J of DPKMeans and DP-EM")
    parser.add_argument(
        "--covariance-type", default="tied", choices=("tied", "spherical", "full"), help="of DP-EM"
    )
    parser.add_argument("--reps", type=int, default=None, help="subsets (default 20, quick 5)")
    parser.add_argument(
        "--shared-init",
        action="store_true",
        help="start DPKMeans and both DP-EM runs from the same public centres "
        "(uniform in the disc of radius 0.8, drawn per subset; the paper's protocol)",
    )
    args = parser.parse_args(argv)
    epsilons = [0.01, 0.1, 1.0] if args.quick else [0.01, 0.03, 0.1, 0.3, 1.0]
    reps = args.reps or (5 if args.quick else 20)
    k = args.n_clusters
    X_all = location_data(125_000, seed=0)
    rng = np.random.default_rng(1)

    methods = ("DPLloyd", "DPKMeans", "DP-EM pure", "DP-EM rdp")
    results = {m: {e: [] for e in epsilons} for m in methods}
    floor = []
    subsets = [X_all[rng.choice(len(X_all), size=12_500, replace=False)] for _ in range(reps)]  # 10% each
    try:
        lloyd, peer = dplloyd_centres(subsets, epsilons, k)
    except PeerNotInstalled as exc:
        lloyd, peer = None, str(exc)
    for rep, X in enumerate(subsets):
        init = public_centres(k, seed=100 + rep) if args.shared_init else None
        floor.append(nicv(X, KMeans(k, n_init=1, random_state=rep).fit(X).cluster_centers_))
        for eps in epsilons:
            results["DPLloyd"][eps].append(nicv(X, lloyd[rep][eps]) if lloyd else np.nan)
            ours = DPKMeans(
                k,
                epsilon=eps,
                data_norm=1.0,
                max_iter=args.max_iter,
                init="random" if init is None else init,
                random_state=rep,
            ).fit(X)
            results["DPKMeans"][eps].append(nicv(X, ours.cluster_centers_))
            for name, delta, mech in (("DP-EM pure", 0.0, "laplace"), ("DP-EM rdp", 1e-5, "gaussian")):
                em = DPGaussianMixture(
                    k,
                    covariance_type=args.covariance_type,
                    mean_mechanism=mech,
                    max_iter=args.max_iter,
                    data_norm=1.0,
                    epsilon=eps,
                    delta=delta,
                    means_init=init,
                    random_state=rep,
                ).fit(X)
                results[name][eps].append(nicv(X, em.means_))

    print(
        f"NICV (median over {reps} subsets of 12,500 points; lower is better), K={k}, "
        f"J={args.max_iter} for DPKMeans and DP-EM ({args.covariance_type}); "
        f"{'shared public initial centres' if args.shared_init else 'default initialisations'}; "
        f"non-private k-means: {np.median(floor):.4f}"
    )
    print(f"DPLloyd: {peer}")
    header = (
        f"{'epsilon':>8} {'DPLloyd(dpl)':>12} {'DPKMeans':>9} {'DP-EM pure':>11} {'DP-EM rdp':>10} "
        f"{'pure/dpl':>9} {'rdp/DPKMeans':>13}"
    )
    print(header)
    print("-" * len(header))
    med = {m: [float(np.median(results[m][e])) for e in epsilons] for m in methods}
    for i, eps in enumerate(epsilons):
        lloyd, ours, pure, rdp = (med[m][i] for m in methods)
        print(
            f"{eps:>8g} {lloyd:>12.4f} {ours:>9.4f} {pure:>11.4f} {rdp:>10.4f} "
            f"{pure / lloyd:>9.2f} {rdp / ours:>13.2f}"
        )
    print("ratio < 1: DP-EM better than the DPLloyd it is compared with")

    RESULTS.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for m, style in zip(methods, ("C7^-", "C2v-", "C0o-", "C3s-"), strict=True):
        if m == "DPLloyd" and lloyd is None:
            continue  # diffprivlib's environment is not built
        q = np.array([np.percentile(results[m][e], [25, 50, 75]) for e in epsilons])
        label = {"DPLloyd": "DPLloyd (diffprivlib, pure)", "DPKMeans": "DPKMeans (skdp, rdp)"}.get(m, m)
        ax.plot(epsilons, q[:, 1], style, label=label)
        ax.fill_between(epsilons, q[:, 0], q[:, 2], color=style[:2], alpha=0.15)
    ax.axhline(np.median(floor), color="k", ls=":", label="k-means (non-private)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("NICV")
    ax.set_title("k-means mode on 2-D location-like data")
    ax.legend()
    fig.tight_layout()
    out = RESULTS / "dpem_kmeans_mode.png"
    fig.savefig(out, dpi=120)
    print(f"plot saved to {out}")
    return med


if __name__ == "__main__":
    main()
