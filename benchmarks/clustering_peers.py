"""DPKMeans against its peers on iris, digits and blobs: ACC / objective vs epsilon, one command.

For every dataset and epsilon in {0.1, 0.3, 1, 3, 10} (delta = 1e-5 for
skdp; diffprivlib is pure epsilon-DP), in the same run:

* ``ours``: ``DPKMeans`` with its defaults plus the declared public box
  (``bounds=``, the same box diffprivlib gets) where the dataset has one;
  blobs has no public box, so ``ours`` is the bare defaults
  (``data_norm="auto"``: a private centre and radius).  With a box and a
  relative centre noise above 0.2 (iris and digits at epsilon <= 3),
  ``init="random"`` starts from public centres on the box's main diagonal
  (no release spent on a random partition); otherwise from a random
  partition.  With a box, every noisy centre is post-processed into its
  posterior mean under a prior at the previous centre with the variance of
  the uniform distribution on the box; ``max_iter=5``;
* ``ours T=auto``: the same with ``max_iter="auto"`` (the a-priori
  iteration rule; the default is ``max_iter=5`` because this rule is not
  never-worse: the last PASS/FAIL lines say where);
* ``centred``: the user centring by hand (the exact mean, a non-private
  yardstick) with ``data_norm`` the exact largest centred norm, ``max_iter=5``
  (the issue's "centred" rows);
* diffprivlib's ``KMeans`` with the same box (blobs: the box of the data
  rounded out to integers, which diffprivlib needs), in its own environment
  (``benchmarks/.venvs/diffprivlib``, scikit-learn 1.7.2; built by
  ``python benchmarks/peers/make_env.py diffprivlib``), via
  ``benchmarks/_peers.py``;
* non-private scikit-learn ``KMeans`` (k-means++, ``n_init=10``).

Iris and digits report ACC (Hungarian matching of clusters to labels,
``clustering_accuracy`` of ``clustering_digits.py``), blobs the k-means
objective of the released centres over scikit-learn's; median over seeds.
The declared boxes: iris ``[4, 8] x [2, 4.5] x [1, 7] x [0, 2.5]`` (cm,
round public ranges of the measurements), digits ``[0, 16]^64`` (the pixel
range).  The last lines are PASS/FAIL for the issue's targets.

Medians over 5 seeds move by several points of ACC from seed to seed on
iris (150 rows); the choices behind the defaults were measured on 30 seeds
(iris) and 20 seeds (digits), with diffprivlib on the same 30 seeds
(``--seeds 30``).

Run: ``python benchmarks/clustering_peers.py [--quick] [--seeds N]`` (quick: 3 seeds).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits, load_iris, make_blobs

from skdp.cluster import DPKMeans

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import PeerNotInstalled, describe, fit_many  # noqa: E402
from clustering_digits import clustering_accuracy  # noqa: E402

QUICK_ARGS = ("--quick",)
PEERS = ("diffprivlib",)
EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)
DELTA = 1e-5
#: The issue's "centred by hand" digits numbers (ACC per epsilon), the digits target.
DIGITS_CENTRED = (0.24, 0.21, 0.24, 0.44, 0.69)


def datasets():
    X, y = load_iris(return_X_y=True)
    iris = (X, y, 3, (np.array([4.0, 2.0, 1.0, 0.0]), np.array([8.0, 4.5, 7.0, 2.5])), "acc")
    X, y = load_digits(return_X_y=True)
    digits = (X, y, 10, (np.zeros(64), np.full(64, 16.0)), "acc")
    X, y = make_blobs(n_samples=10_000, n_features=10, centers=5, random_state=0)
    blobs = (X, y, 5, None, "objective")
    return {"iris": iris, "digits": digits, "blobs (10k x 10, k=5)": blobs}


def diffprivlib_kmeans(X, k, box, epsilons, seeds, score=False):
    """diffprivlib's ``KMeans`` handed ``box`` on ``X``, one fit per epsilon and seed (in that order).

    Returns ``(fits, peer)``: the peer's per-fit results (``predict["X"]``,
    and ``score`` on ``X`` when ``score``), or None when its environment is
    not built, and the line describing the peer (its versions, or why not).
    """
    fits = [
        {
            "params": {
                "n_clusters": k,
                "epsilon": eps,
                "bounds": [np.asarray(box[0]).tolist(), np.asarray(box[1]).tolist()],
                "random_state": s,
            },
            "X": "X",
            "predict": ["X"],
            "score": [["X", "X"]] if score else [],
        }
        for eps in epsilons
        for s in seeds
    ]
    try:
        result = fit_many("diffprivlib", "diffprivlib.models.KMeans", fits, {"X": X}, tuple_params=["bounds"])
    except PeerNotInstalled as exc:
        return None, str(exc)
    return result["fits"], describe(result)


def ours(k, eps, seed, box, **params):
    return DPKMeans(k, epsilon=eps, delta=DELTA, bounds=box, random_state=seed, **params)


def measure(X, y, km, metric, base):
    if metric == "acc":
        return clustering_accuracy(y, km.predict(X))
    return -km.score(X) / base


def run_dataset(X, y, k, box, metric, seeds):
    base = -KMeans(k, n_init=10, random_state=0).fit(X).score(X)
    sk = np.median([measure(X, y, KMeans(k, n_init=10, random_state=s).fit(X), metric, base) for s in seeds])
    Xc = X - X.mean(axis=0)
    c_norm = float(np.linalg.norm(Xc, axis=1).max())
    rows = {"ours": [], "ours T=auto": [], "centred": []}
    n_iter = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for eps in EPSILONS:
            runs = {name: [] for name in rows}
            for s in seeds:
                km = ours(k, eps, s, box).fit(X)
                n_iter.append(km.n_iter_)
                runs["ours"].append(measure(X, y, km, metric, base))
                runs["ours T=auto"].append(
                    measure(X, y, ours(k, eps, s, box, max_iter="auto").fit(X), metric, base)
                )
                cent = DPKMeans(k, epsilon=eps, delta=DELTA, data_norm=c_norm, max_iter=5, random_state=s)
                cent.fit(Xc)
                # The objective of the centred fit: its centres shifted back, on X.
                # Its objective on Xc equals that of its centres shifted back on X.
                runs["centred"].append(measure(Xc, y, cent, metric, base))
            for name in rows:
                rows[name].append(float(np.median(runs[name])))
    dbox = box if box is not None else (np.floor(X.min(axis=0)), np.ceil(X.max(axis=0)))
    fits, peer = diffprivlib_kmeans(X, k, dbox, EPSILONS, seeds, score=metric == "objective")
    if fits is not None:
        vals = []
        for f in fits:
            if metric == "acc":
                vals.append(clustering_accuracy(y, np.asarray(f["predict"]["X"])))
            else:
                vals.append(-f["score"][0] / base)
        ns = len(seeds)
        rows["diffprivlib"] = [float(np.median(vals[i * ns : (i + 1) * ns])) for i in range(len(EPSILONS))]
    rows["scikit-learn"] = [float(sk)] * len(EPSILONS)
    return rows, sorted(set(n_iter)), peer


def print_table(name, rows, metric, n_iter, peer, n_seeds):
    what = "ACC" if metric == "acc" else "objective / non-private"
    print(f"\n{name}: {what}, median of {n_seeds} seeds; ours' iterations: {n_iter}")
    print(f"{'epsilon':>8} " + " ".join(f"{m:>13}" for m in rows))
    for i, eps in enumerate(EPSILONS):
        print(f"{eps:>8g} " + " ".join(f"{rows[m][i]:>13.3f}" for m in rows))
    print(f"diffprivlib: {peer}")


def verdicts(results):
    out = []
    iris = results["iris"]
    if "diffprivlib" in iris:
        ok = all(a >= b for a, b in zip(iris["ours"], iris["diffprivlib"], strict=True))
        out.append(("iris: ours >= diffprivlib at every epsilon", ok))
    dig = results["digits"]
    ok = all(a >= b for a, b in zip(dig["ours"], DIGITS_CENTRED, strict=True))
    out.append((f"digits: ours >= the issue's centred numbers {DIGITS_CENTRED}", ok))
    ok = all(a >= b for a, b in zip(dig["ours"][:2], DIGITS_CENTRED[:2], strict=True))
    out.append((f"digits: ours >= the centred numbers at small epsilon (0.1, 0.3) {DIGITS_CENTRED[:2]}", ok))
    out.append(
        (
            "digits: ours >= 0.75 x scikit-learn at epsilon = 10",
            dig["ours"][-1] >= 0.75 * dig["scikit-learn"][-1],
        )
    )
    bl = results["blobs (10k x 10, k=5)"]
    ok = all(v <= 1.2 for e, v in zip(EPSILONS, bl["ours"], strict=True) if e >= 1)
    out.append(("blobs: objective <= 1.2 x non-private at epsilon >= 1", ok))
    for name in results:
        r = results[name]
        sign = 1 if name != "blobs (10k x 10, k=5)" else -1
        ok = all(sign * (b - a) >= -1e-12 for a, b in zip(r["ours"], r["ours T=auto"], strict=True))
        out.append((f"{name}: max_iter='auto' never worse than the default T = 5 (medians)", ok))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds instead of 5")
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds (default 5)")
    args = parser.parse_args(argv)
    seeds = range(3) if args.quick else range(args.seeds)
    results = {}
    for name, (X, y, k, box, metric) in datasets().items():
        rows, n_iter, peer = run_dataset(X, y, k, box, metric, seeds)
        results[name] = rows
        print_table(name, rows, metric, n_iter, peer, len(seeds))
        sys.stdout.flush()
    print()
    for label, ok in verdicts(results):
        print(f"{'PASS' if ok else 'FAIL'}: {label}")


if __name__ == "__main__":
    main()
