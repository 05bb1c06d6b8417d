"""``"auto"`` against declared bounds for DPSEPRegressor (issue 21, "bounds nobody has to know").

Today's declared-bounds examples of DP-SEP, refitted with
``feature_bounds="auto", target_bounds="auto"`` (the bounds released by the
exponential mechanism at a share ``bounds_budget`` of epsilon, the rest of
the budget calibrated jointly for the SEP releases):

* ``diabetes-linear``: ``examples/quickstart.py`` (Bayesian linear
  regression, 5 epochs, bounds ``(-0.1, 0.1)`` and ``(0, 400)``, 70/30 split);
* ``diabetes``, ``friedman1``, ``robot-arm``: ``benchmarks/dpsep_regression.py``
  (50 hidden units, 90/10 splits, its declared bounds).

Median over seeds (the split and the fit's ``random_state``) of the test RMSE,
R^2 and log-likelihood, at epsilon = 1 and delta = 1e-5 (both benchmarks'
budget), and the ratio of the median RMSEs ``auto / declared`` (the issue's
criterion: within 10%, i.e. at most 1.10).

Run: ``python benchmarks/auto_bounds_dpsep.py [--seeds 5] [--epochs 40]
[--n-big 10000] [--bounds-budget 0.1] [--datasets ...]``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from dpsep_regression import LINK_LENGTHS, robot_arm  # noqa: E402
from sklearn.datasets import load_diabetes, make_friedman1  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from skdp import PrivacyLeakWarning  # noqa: E402
from skdp.bnn import DPSEPRegressor  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--seeds", "1", "--epochs", "2", "--n-big", "2000")


def examples(n_big, epochs):
    """``{name: (X, y, test_size, declared feature bounds, declared target bounds, params)}``."""
    X, y = load_diabetes(return_X_y=True)
    Xf, yf = make_friedman1(n_samples=n_big, noise=1.0, random_state=0)
    Xr, yr = robot_arm(min(n_big, 8192))
    reach = LINK_LENGTHS.sum() + np.hypot(1.0, 0.5)
    network = {"hidden_layer_sizes": (50,), "n_epochs": epochs}
    return {
        "diabetes-linear": (X, y, 0.3, (-0.1, 0.1), (0.0, 400.0), {"hidden_layer_sizes": (), "n_epochs": 5}),
        "diabetes": (X, y, 0.1, (-0.2, 0.2), (0.0, 400.0), network),
        "friedman1": (Xf, yf, 0.1, (0.0, 1.0), (-10.0, 40.0), network),
        "robot-arm": (Xr, yr, 0.1, (-np.pi / 2, np.pi / 2), (0.0, reach), network),
    }


def scores(model, X, y):
    rmse = float(np.sqrt(np.mean((model.predict(X) - y) ** 2)))
    return rmse, float(model.score(X, y)), model.log_likelihood(X, y)


def run(name, example, seeds, bounds_budget):
    X, y, test_size, fb, tb, params = example
    rows = {"declared": [], "auto": []}
    for seed in range(seeds):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=test_size, random_state=seed)
        for label, bounds in (("declared", (fb, tb)), ("auto", ("auto", "auto"))):
            model = DPSEPRegressor(
                epsilon=1.0,
                delta=1e-5,
                feature_bounds=bounds[0],
                target_bounds=bounds[1],
                bounds_budget=bounds_budget,
                random_state=seed,
                **params,
            )
            with warnings.catch_warnings():
                # No leak warning: every run is covered by privacy_spent_.
                warnings.simplefilter("error", PrivacyLeakWarning)
                warnings.simplefilter("ignore", UserWarning)  # "auto" on too few rows: measured
                model.fit(Xtr, ytr)
            assert model.privacy_spent_.epsilon <= 1.0
            rows[label].append(scores(model, Xte, yte))
    return {k: np.median(np.array(v), axis=0) for k, v in rows.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--n-big", type=int, default=10000)
    parser.add_argument("--bounds-budget", type=float, default=0.5)
    parser.add_argument("--datasets", default="diabetes-linear,diabetes,friedman1,robot-arm")
    args = parser.parse_args()
    chosen = args.datasets.split(",")
    all_examples = examples(args.n_big, args.epochs)
    print(
        f"DPSEPRegressor, epsilon = 1, delta = 1e-5, bounds_budget = {args.bounds_budget}, "
        f"{args.seeds} seed(s), {args.epochs} epochs (networks), n_big = {args.n_big}; medians over seeds"
    )
    header = (
        f"{'example':<16} {'RMSE declared':>13} {'RMSE auto':>10} {'auto/decl':>9} "
        f"{'R2 declared':>11} {'R2 auto':>8} {'LL declared':>11} {'LL auto':>8} {'s':>5}"
    )
    print(header)
    print("-" * len(header))
    for name in chosen:
        t0 = time.perf_counter()
        med = run(name, all_examples[name], args.seeds, args.bounds_budget)
        d, a = med["declared"], med["auto"]
        print(
            f"{name:<16} {d[0]:>13.4g} {a[0]:>10.4g} {a[0] / d[0]:>9.3f} {d[1]:>11.3f} {a[1]:>8.3f} "
            f"{d[2]:>11.3f} {a[2]:>8.3f} {time.perf_counter() - t0:>5.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
