"""DPKMeans by what the user declares: a norm, a box, or nothing; and the ball under heavy noise.

Three tables, all measured in this run, on the same rows and seeds for
every method:

1. **Iris mapped into [0, 0.5]^4** (ACC, the best matching of clusters to
   species): ``DPKMeans`` with only ``data_norm=1`` declared (the default
   ``bounds="auto"``, and ``bounds=None``, the bare ball), with nothing
   declared, and with the box ``[0, 0.5]^4`` declared; diffprivlib's
   ``KMeans`` handed the same box, in its own environment
   (``python benchmarks/peers/make_env.py diffprivlib``); scikit-learn's
   ``KMeans``.  Declaring more must not cost utility: PASS when the declared
   norm's median is at least the median with nothing declared at every
   epsilon, within the seed spread.
2. **A declared ball at small n * epsilon** (k-means objective over
   scikit-learn's, lower is better): ``data_norm`` the rows' largest norm
   rounded up, the ball alone (``bounds=None``) against the default
   ``bounds="auto"`` (the private box inside the ball where no norm quantile
   can be located); the data-free reference puts every centre at the ball's
   centre.
3. **The ball around the released centre under heavy noise**
   (``data_norm="auto"``, digits raw and shifted by 10): objective and ACC
   with the box's rules on the ball's inscribed cube (the default,
   ``BALL_PRIOR_NOISE``) and with the plain update (the rule switched off
   on the class, for the comparison only).

Run: ``python benchmarks/kmeans_declarations.py [--quick] [--seeds N]``
(quick: 3 seeds; default 10).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, make_blobs

from skdp.cluster import DPKMeans

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clustering_digits import clustering_accuracy  # noqa: E402
from clustering_peers import diffprivlib_kmeans  # noqa: E402

QUICK_ARGS = ("--quick",)
PEERS = ("diffprivlib",)
DELTA = 1e-5


def _cost(X, centres):
    return float(((X[:, None, :] - centres[None]) ** 2).sum(axis=2).min(axis=1).sum())


def _fit(X, **params):
    """``DPKMeans(delta=DELTA, **params)`` fitted on ``X``, its warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fits' warnings name no data value; the tables say enough
        return DPKMeans(delta=DELTA, **params).fit(X)


def iris_table(seeds, epsilons=(0.3, 1.0, 3.0)):
    X, y = load_iris(return_X_y=True)
    X = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0)) * 0.5
    box = (np.zeros(4), np.full(4, 0.5))
    variants = {
        "data_norm=1": dict(data_norm=1.0),
        "data_norm=1, bounds=None": dict(data_norm=1.0, bounds=None),
        "nothing declared": {},
        "box declared": dict(bounds=box),
    }
    rows = {}
    for name, params in variants.items():
        rows[name] = []
        for eps in epsilons:
            accs = []
            for s in seeds:
                km = _fit(X, n_clusters=3, epsilon=eps, random_state=s, **params)
                accs.append(clustering_accuracy(y, km.predict(X)))
            rows[name].append(accs)
    fits, peer = diffprivlib_kmeans(X, 3, box, epsilons, seeds)
    if fits is not None:
        vals = [clustering_accuracy(y, np.asarray(f["predict"]["X"])) for f in fits]
        ns = len(seeds)
        rows["diffprivlib, box declared"] = [vals[i * ns : (i + 1) * ns] for i in range(len(epsilons))]
    sk = clustering_accuracy(y, KMeans(3, n_init=10, random_state=0).fit(X).predict(X))
    print(f"\n1. Iris in [0, 0.5]^4: ACC, median [min, max] of {len(seeds)} seeds (scikit-learn {sk:.3f})")
    print(f"{'':>28}" + "".join(f"{'eps ' + format(e, 'g'):>22}" for e in epsilons))
    for name, cells in rows.items():
        print(f"{name:>28}" + "".join(
            f"{np.median(c):>8.3f} [{min(c):.2f}, {max(c):.2f}]" for c in cells
        ))
    print(f"   diffprivlib: {peer}")
    verdicts = []
    for i, eps in enumerate(epsilons):
        declared, free = rows["data_norm=1"][i], rows["nothing declared"][i]
        spread = float(np.std(declared))
        ok = np.median(declared) >= np.median(free) - spread
        verdicts.append(
            f"{'PASS' if ok else 'FAIL'}: iris eps {eps:g}: declared norm {np.median(declared):.3f} >= "
            f"nothing declared {np.median(free):.3f} - seed spread {spread:.3f}"
        )
    return verdicts


def _ball_sets():
    X, _ = make_blobs(300, centers=3, random_state=0)
    yield "blobs-300x2 (centred)", X - X.mean(axis=0)
    X, _ = make_blobs(500, n_features=5, centers=4, random_state=1)
    yield "blobs-500x5", X
    yield "iris", load_iris().data
    X = load_iris().data
    yield "iris in [0, 0.5]^4", (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0)) * 0.5
    X = load_breast_cancer().data
    yield "breast_cancer (standardised)", (X - X.mean(axis=0)) / X.std(axis=0)
    X, _ = make_blobs(200, n_features=10, centers=3, random_state=2)
    yield "blobs-200x10", X


def ball_table(seeds, epsilons=(0.3, 1.0, 3.0), k=3):
    print(
        f"\n2. A declared ball (data_norm = the largest row norm rounded up), k = {k}: objective over "
        f"scikit-learn's, median of {len(seeds)} seeds; 'ball' is bounds=None, 'auto' the default"
    )
    print(f"{'':>30}{'free':>8}" + "".join(f"{'eps ' + format(e, 'g') + ' ball / auto':>24}" for e in epsilons))
    for name, X in _ball_sets():
        C = float(np.ceil(np.linalg.norm(X, axis=1).max()))
        twin = _cost(X, KMeans(k, n_init=10, random_state=0).fit(X).cluster_centers_)
        free = _cost(X, np.zeros((k, X.shape[1]))) / twin
        line = f"{name:>30}{free:>8.2f}"
        for eps in epsilons:
            cells = []
            for bounds in (None, "auto"):
                vals = []
                for s in seeds:
                    km = _fit(X, n_clusters=k, epsilon=eps, data_norm=C, bounds=bounds, random_state=s)
                    vals.append(_cost(X, km.cluster_centers_) / twin)
                cells.append(float(np.median(vals)))
            line += f"{cells[0]:>15.2f} / {cells[1]:>6.2f}"
        print(line)
    print("   free: every centre at the ball's centre (0), the data-free answer of a declared ball")


def heavy_noise_table(seeds, epsilons=(0.3, 1.0, 3.0)):
    X, y = load_digits(return_X_y=True)
    print(
        f"\n3. Digits, data_norm='auto' (the ball around the released centre), k = 10: objective over "
        f"scikit-learn's / ACC, median of {len(seeds)} seeds; 'rule' is the default (the box's rules on "
        "the ball's inscribed cube where the centre noise exceeds half the radius), 'plain' the update without it"
    )
    print(f"{'':>14}" + "".join(f"{'eps ' + format(e, 'g') + ' plain -> rule':>34}" for e in epsilons))
    default = DPKMeans._ball_prior
    try:
        for shift in (0.0, 10.0):
            Z = X + shift
            twin = _cost(Z, KMeans(10, n_init=10, random_state=0).fit(Z).cluster_centers_)
            line = f"{'digits + ' + format(shift, 'g'):>14}"
            for eps in epsilons:
                out = {}
                for mode in ("plain", "rule"):
                    DPKMeans._ball_prior = default if mode == "rule" else False
                    objective, acc = [], []
                    for s in seeds:
                        km = _fit(Z, n_clusters=10, epsilon=eps, random_state=s)
                        objective.append(_cost(Z, km.cluster_centers_) / twin)
                        acc.append(clustering_accuracy(y, km.predict(Z)))
                    out[mode] = (float(np.median(objective)), float(np.median(acc)))
                line += (
                    f"  {out['plain'][0]:.2f}/{out['plain'][1]:.3f} -> {out['rule'][0]:.2f}/{out['rule'][1]:.3f}"
                    .rjust(34)
                )
            print(line)
    finally:
        DPKMeans._ball_prior = default


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds")
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    seeds = range(3 if args.quick else args.seeds)
    start = time.perf_counter()
    verdicts = iris_table(seeds)
    ball_table(seeds)
    heavy_noise_table(seeds)
    print(f"\n({time.perf_counter() - start:.0f} s)")
    for v in verdicts:
        print(v)


if __name__ == "__main__":
    main()
