"""DPPipeline's budget split: basic shares against the composed split, same steps, same seeds.

A ``DPPipeline`` of skdp defaults (``DPStandardScaler`` -> ``DPPCA(k)`` ->
``DPGaussianMixture(c)``, nothing declared but ``n_components``) fitted at a
requested epsilon with ``split="basic"`` (shares that add up to epsilon, whose
composition is far below it) and ``split="composed"`` (the default: shares
scaled until the steps' events compose to epsilon; docs/pipeline.md, "The
composed split").  Per data set and epsilon, medians over seeds of:

* ``spent``: the pipeline's ``privacy_spent_.epsilon`` (at most the request);
* ``ARI``: adjusted Rand index of the predicted components against the labels
  on held-out rows (25 %);
* ``fit s``: wall time of the fit, median over seeds (after the first seed the composed
  split's scale comes from its cache: the same plan), and ``cold s``, the first seed's (the
  composed split's dry runs on zeros);

beside the non-private twin (scikit-learn's ``StandardScaler`` -> ``PCA`` ->
``GaussianMixture``, same k and c) and the data-free reference (one
component for every row: ARI 0).  PASS lines: the composed split never spends
more than the request, and its ARI median is at least the basic split's
minus the larger seed spread.

Run: ``python benchmarks/pipeline_split.py [--quick] [--seeds S]``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, make_blobs  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402
from sklearn.mixture import GaussianMixture  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.pipeline import make_pipeline as sk_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skdp.mixture import DPGaussianMixture  # noqa: E402
from skdp.pipeline import make_pipeline  # noqa: E402
from skdp.preprocessing import DPPCA, DPStandardScaler  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)


def _datasets(quick):
    X, y = make_blobs(n_samples=5000, n_features=8, centers=3, cluster_std=2.0, random_state=0)
    sets = [
        ("iris", *load_iris(return_X_y=True), 2, 3),
        ("breast_cancer", *load_breast_cancer(return_X_y=True), 2, 2),
        ("blobs-5000x8", X * np.array([1, 10, 100, 1, 1, 0.1, 1, 1]), y, 2, 3),
    ]
    if not quick:
        sets.append(("digits", *load_digits(return_X_y=True), 5, 10))
    return sets


def _dp(k, c, eps, split, seed):
    return make_pipeline(
        DPStandardScaler(),
        DPPCA(n_components=k),
        DPGaussianMixture(n_components=c),
        epsilon=eps,
        split=split,
        random_state=seed,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds, epsilon 1 and 3, three data sets")
    parser.add_argument("--seeds", type=int, default=None)
    args = parser.parse_args(argv)
    seeds = range(args.seeds or (3 if args.quick else 10))
    epsilons = (1.0, 3.0) if args.quick else (0.3, 1.0, 3.0, 10.0)
    print(f"DPPipeline(DPStandardScaler, DPPCA(k), DPGaussianMixture(c)), defaults; {len(seeds)} seeds; medians")
    print(
        f"{'data':<15}{'eps':>5}{'split':>10}{'spent':>8}{'ARI':>8}{'ARI std':>9}{'fit s':>7}{'cold s':>8}"
        f"{'twin ARI':>10}{'data-free':>10}"
    )
    verdicts = []
    for name, X, y, k, c in _datasets(args.quick):
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=0)
        twin = sk_pipeline(StandardScaler(), PCA(k), GaussianMixture(c, random_state=0)).fit(X_tr)
        twin_ari = adjusted_rand_score(y_te, twin.predict(X_te))
        for eps in epsilons:
            rows = {}
            for split in ("basic", "composed"):
                spent, ari, secs = [], [], []
                for seed in seeds:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        start = time.perf_counter()
                        pipe = _dp(k, c, eps, split, seed).fit(X_tr)
                        secs.append(time.perf_counter() - start)
                        ari.append(adjusted_rand_score(y_te, pipe.predict(X_te)))
                    spent.append(pipe.privacy_spent_.epsilon)
                rows[split] = (max(spent), float(np.median(ari)), float(np.std(ari)))
                print(
                    f"{name:<15}{eps:>5g}{split:>10}{np.median(spent):>8.3f}{np.median(ari):>8.3f}"
                    f"{np.std(ari):>9.3f}{np.median(secs):>7.2f}{secs[0]:>8.2f}{twin_ari:>10.3f}{0.0:>10.3f}"
                )
            (spent_c, ari_c, std_c), (_, ari_b, std_b) = rows["composed"], rows["basic"]
            verdicts.append(
                (f"{name}, eps={eps:g}: composed spends at most the request ({spent_c:.4f})", spent_c <= eps * (1 + 1e-9))
            )
            verdicts.append(
                (
                    f"{name}, eps={eps:g}: composed ARI {ari_c:.3f} >= basic {ari_b:.3f} - spread {max(std_b, std_c):.3f}",
                    ari_c >= ari_b - max(std_b, std_c),
                )
            )
    print()
    for text, ok in verdicts:
        print(("PASS " if ok else "FAIL ") + text)


if __name__ == "__main__":
    main()
