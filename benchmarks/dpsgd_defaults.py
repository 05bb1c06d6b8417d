"""The DP nets' defaults on tables nobody tuned them for: ``DPNeuralNetClassifier(classes=..., epsilon=eps)``.

Generated sets of several shapes (n 500 to 50,000, d 2 to 64, feature
scales 1e-2 to 1e4, an offset, imbalanced classes) and scikit-learn's
bundled tables (digits, breast cancer, iris), 70/30 stratified splits;
beside each median accuracy over seeds: the majority class (data-free) and
scikit-learn's LogisticRegression on standardised inputs (non-private twin).
Rules checked: at eps >= 1 never below the majority class; the eps 10
median at least the eps 1 median (within 0.02).

    python -m benchmarks.dpsgd_defaults [--quick]
"""

import argparse
import sys
import time
import warnings

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdp.nn import DPNeuralNetClassifier

#: The run of benchmarks/run_all.py (quick mode).
QUICK_ARGS = ("--quick",)


def data_sets(quick=False):
    """(name, X, y): generated shapes and bundled tables (no downloads)."""
    out = []
    X, y = make_classification(500, 2, n_informative=2, n_redundant=0, n_clusters_per_class=1, random_state=3)
    out.append(("gen n500 d2 x1e-2", X * 1e-2, y))
    X, y = make_classification(2000, 20, n_informative=5, weights=[0.8], random_state=2)
    out.append(("gen n2k d20 x1e4+3e4 imb", X * 1e4 + 3e4, y))
    X, y = make_classification(5000, 32, n_informative=8, n_classes=4, random_state=5)
    out.append(("gen n5k d32 4cls", X, y))
    if not quick:
        X, y = make_classification(
            20000, 8, n_informative=6, n_redundant=0, n_classes=5, n_clusters_per_class=1, random_state=1
        )
        out.append(("gen n20k d8 5cls", X, y))
        X, y = make_classification(50000, 64, n_informative=10, n_classes=3, random_state=4)
        scales = np.logspace(-2, 4, 64)
        out.append(("gen n50k d64 scales 1e-2..1e4", X * scales, y))
        X, y = make_classification(3000, 6, n_informative=4, n_classes=3, weights=[0.7, 0.2, 0.1], random_state=6)
        out.append(("gen n3k d6 imb 70/20/10 x100", X * 100, y))
    for name, loader in (("digits", load_digits), ("breast_cancer", load_breast_cancer), ("iris", load_iris)):
        X, y = loader(return_X_y=True)
        out.append((name, X, y))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--eps", default="0.3,1,3,10")
    parser.add_argument("--only", default="", help="comma-separated substrings of the data sets to run")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    eps_list = [float(e) for e in args.eps.split(",")]
    print(f"{'data':32s} {'maj':>5s} {'LR':>5s} " + " ".join(f"eps={e:<5g}" for e in eps_list) + "  rules")
    failures = 0
    only = [o for o in args.only.split(",") if o]
    for name, X, y in data_sets(args.quick):
        if only and not any(o in name for o in only):
            continue
        X = X.astype(np.float32)
        classes = np.unique(y)
        acc = {e: [] for e in eps_list}
        maj, twin = [], []
        t0 = time.time()
        for seed in range(args.seeds):
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
            maj.append(np.mean(yte == np.bincount(ytr).argmax()))
            lr = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(Xtr, ytr)
            twin.append(lr.score(Xte, yte))
            for e in eps_list:
                net = DPNeuralNetClassifier(classes=classes, epsilon=e, random_state=seed).fit(Xtr, ytr)
                acc[e].append(net.score(Xte, yte))
        med = {e: float(np.median(v)) for e, v in acc.items()}
        m = float(np.median(maj))
        ok_floor = all(med[e] >= m - 0.01 for e in eps_list if e >= 1)
        ok_mono = 10.0 not in med or 1.0 not in med or med[10.0] >= med[1.0] - 0.02
        failures += (not ok_floor) + (not ok_mono)
        row = " ".join(f"{med[e]:9.3f}" for e in eps_list)
        rules = ("floor PASS" if ok_floor else "floor FAIL") + " " + ("eps PASS" if ok_mono else "eps FAIL")
        print(f"{name:32s} {m:5.3f} {np.median(twin):5.3f} {row}  {rules}  ({time.time() - t0:.0f} s)", flush=True)
    return failures


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
