"""Private model selection (issue 21): DPGridSearchCV's pick against hindsight and scikit-learn.

On digits and breast_cancer, at a total budget of ``epsilon`` = 2 and 8
(delta = 1e-5, replace-one neighbours), :class:`skdp.model_selection.DPGridSearchCV`
searches a grid of 6 DP-SGD logistic regressions
(:class:`skdp.nn.DPNeuralNetClassifier`, learning rate x epochs) and refits
its pick on the whole training split.  Its test accuracy is compared with

* the best candidate in hindsight and the median candidate: every candidate
  fitted as the refit was (same training split, same per-fit ``epsilon``,
  the refit's), scored on the test split.  Those fits draw their own noise,
  so the picked candidate's hindsight fit is printed too: the refit's score
  minus it is the refit's noise draw, the rest is the selection's quality;
* scikit-learn's ``GridSearchCV`` (3 folds, refit) over the same grid, every
  fit at that same per-fit ``epsilon``: its selection reads exact validation
  scores and is accounted nowhere, and its fits alone cost the composition of
  its 19 fits (printed beside it, composed by :func:`skdp.privacy.compose`
  under replace-one neighbours, like the search's).

The table reports medians over seeds (split, noise).  Targets (the issue's):
at ``epsilon = 8`` the pick beats the median candidate and is within 0.03 of
the best in hindsight; ``privacy_spent_`` never exceeds the budget.

Features are scaled to [-0.5, 0.5] by documented ranges only (digits:
pixels in 0..16; breast_cancer: the min/max table of its description), so
no preprocessing reads the data.

Run: ``python benchmarks/private_model_selection.py [--quick] [--seeds N]``
(``--quick``: breast_cancer only, one seed).
"""

from __future__ import annotations

import argparse
import re
import time
import warnings

import numpy as np
import torch
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import GridSearchCV, ParameterGrid, train_test_split

from skdp.exceptions import PrivacyLeakWarning
from skdp.model_selection import DPGridSearchCV
from skdp.nn import DPNeuralNetClassifier
from skdp.privacy import compose

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)

DELTA = 1e-5
BUDGETS = (2.0, 8.0)
GRID = {"lr": [0.3, 2.0, 8.0], "max_epochs": [2, 8]}
#: Three trials per candidate on average, a rule fixed before looking at any
#: score: with a geometric number of trials of mean m, a run of mean 6 on six
#: candidates often tries one or two of them (the pick can only be one it
#: tried); 3 per candidate tries most of them at a modest cost in epsilon.
N_TRIALS_MEAN = 3.0 * len(GRID["lr"]) * len(GRID["max_epochs"])

#: The fits scikit-learn's GridSearchCV makes, each with its ledger's events.
_GRIDSEARCH_FITS = []


class _LedgerRecordingNet(DPNeuralNetClassifier):
    """The same net; each fit appends its ledger's events to ``_GRIDSEARCH_FITS`` (for the cost)."""

    def fit(self, X, y=None, **fit_params):
        super().fit(X, y, **fit_params)
        _GRIDSEARCH_FITS.append(tuple(self.privacy_ledger_.events))
        return self


def load(name):
    """Features scaled to [-0.5, 0.5] by documented ranges (public), labels, batch size."""
    if name == "digits":
        X, y = load_digits(return_X_y=True)
        return (X / 16.0 - 0.5).astype(np.float32), y.astype(np.int64), 128
    data = load_breast_cancer()
    # The dataset's documentation (its DESCR's "Summary Statistics" table)
    # declares every feature's range, in the order of feature_names.
    ranges = np.array(re.findall(r"^[a-z ()]+:\s+([\d.]+)\s+([\d.]+)\s*$", data.DESCR, re.M), dtype=float)
    if ranges.shape != (data.data.shape[1], 2):
        raise RuntimeError("breast_cancer's documented feature ranges could not be read.")
    X = (data.data - ranges[:, 0]) / (ranges[:, 1] - ranges[:, 0]) - 0.5
    return X.astype(np.float32), data.target.astype(np.int64), 32


def make_net(cls, n_features, classes, batch_size):
    module = torch.nn.Sequential(torch.nn.Linear(n_features, len(classes)), torch.nn.Softmax(dim=-1))
    return cls(module, classes=list(classes), batch_size=batch_size, verbose=0, delta=DELTA)


def accuracy(model, X, y):
    return float(np.mean(model.predict(X) == y))


def run_one(name, budget, seed, n_trials_mean=N_TRIALS_MEAN):
    X, y, batch_size = load(name)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y, random_state=seed)
    classes = np.unique(y)  # public: the datasets' documented label sets
    torch.manual_seed(seed)  # the module's initial weights, the same for every fit below
    net = make_net(DPNeuralNetClassifier, X.shape[1], classes, batch_size)

    start = time.perf_counter()
    search = DPGridSearchCV(
        net, GRID, epsilon=budget, delta=DELTA, n_trials_mean=n_trials_mean, random_state=seed
    ).fit(X_train, y_train)
    search_seconds = time.perf_counter() - start
    refit = search.best_estimator_
    per_fit = float(refit.get_params()["epsilon"])
    picked = accuracy(search, X_test, y_test)

    # Every candidate as the refit was fitted (its epsilon, all training rows).
    candidates, grid = [], list(ParameterGrid(GRID))
    for params in grid:
        # From the unfitted net (a clone of the refit would start from its
        # trained module: skorch trains a module instance in place).
        model = clone(net).set_params(
            **params, epsilon=per_fit, composition="rdp", n_samples=len(X_train), random_state=seed
        )
        candidates.append(accuracy(model.fit(X_train, y_train), X_test, y_test))

    # scikit-learn's GridSearchCV over the same grid at the same per-fit epsilon.
    _GRIDSEARCH_FITS.clear()
    torch.manual_seed(seed)
    sk_net = make_net(_LedgerRecordingNet, X.shape[1], classes, batch_size).set_params(
        epsilon=per_fit, composition="rdp", random_state=seed
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # the point of the comparison
        sk = GridSearchCV(sk_net, GRID, cv=3).fit(X_train, y_train)
    events = [e.to_relation("replace_one") for fit in _GRIDSEARCH_FITS for e in fit]
    sk_cost = compose(events, DELTA).epsilon
    return {
        "picked": picked,
        "picked_hindsight": candidates[grid.index(search.best_params_)],
        "best": max(candidates),
        "median": float(np.median(candidates)),
        "sklearn": accuracy(sk, X_test, y_test),
        "sklearn_cost": sk_cost,
        "sklearn_fits": len(_GRIDSEARCH_FITS),
        "spent": search.privacy_spent_.epsilon,
        "per_fit": per_fit,
        "pick": search.best_params_,
        "seconds": search_seconds,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="breast_cancer only, one seed")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per setting (full mode)")
    parser.add_argument("--lr", type=float, nargs="+", default=GRID["lr"], help="learning rates of the grid")
    parser.add_argument(
        "--n-trials-mean", type=float, default=N_TRIALS_MEAN, help="DPGridSearchCV's n_trials_mean"
    )
    args = parser.parse_args()
    GRID["lr"] = list(args.lr)
    torch.set_num_threads(1)  # tiny models: threads only contend
    datasets = ("breast_cancer",) if args.quick else ("digits", "breast_cancer")
    seeds = range(1 if args.quick else args.seeds)

    checks, rows = [], []
    for name in datasets:
        for budget in BUDGETS:
            runs = [run_one(name, budget, s, args.n_trials_mean) for s in seeds]
            med = {k: float(np.median([r[k] for r in runs])) for k in runs[0] if k != "pick"}
            worst_spent = max(r["spent"] for r in runs)
            rows.append((name, budget, med, worst_spent, [r["pick"] for r in runs]))
            checks.append(
                (
                    f"{name}, eps={budget:g}: privacy_spent_ <= budget in every run",
                    worst_spent <= budget * (1 + 1e-9),
                    f"max {worst_spent:.4f} <= {budget:g}",
                )
            )
            if budget == 8.0:
                checks.append(
                    (
                        f"{name}, eps=8: pick beats the median candidate",
                        med["picked"] > med["median"],
                        f"{med['picked']:.3f} vs {med['median']:.3f}",
                    )
                )
                checks.append(
                    (
                        f"{name}, eps=8: pick's candidate (hindsight fit, same noise draws as the others) "
                        "beats the median candidate",
                        med["picked_hindsight"] > med["median"],
                        f"{med['picked_hindsight']:.3f} vs {med['median']:.3f}",
                    )
                )
                checks.append(
                    (
                        f"{name}, eps=8: pick within 0.03 of the best in hindsight",
                        med["picked"] >= med["best"] - 0.03,
                        f"{med['picked']:.3f} vs {med['best']:.3f}",
                    )
                )

    n_seeds = len(seeds)
    print(
        f"\n## DPGridSearchCV vs hindsight and GridSearchCV (test accuracy, median of {n_seeds} seed(s); "
        f"grid {GRID}, n_trials_mean={args.n_trials_mean:g}, delta={DELTA:g}, replace-one)\n"
    )
    print(
        "| data | budget eps | DPGridSearchCV pick (its refit) | pick's candidate (hindsight fit) | "
        "best in hindsight | median candidate | "
        "GridSearchCV (same per-fit eps) | GridSearchCV real cost (fits only) | search privacy_spent_ "
        "| per-fit eps (refit) | search seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, budget, med, worst, _ in rows:
        print(
            f"| {name} | {budget:g} | {med['picked']:.3f} | {med['picked_hindsight']:.3f} | "
            f"{med['best']:.3f} | {med['median']:.3f} | "
            f"{med['sklearn']:.3f} | {med['sklearn_cost']:.2f} ({med['sklearn_fits']:.0f} fits; selection "
            f"not accounted) | {med['spent']:.3f} (max {worst:.3f}) | {med['per_fit']:.3f} | "
            f"{med['seconds']:.0f} |"
        )
    print("\nPicks per seed: " + "; ".join(f"{n} eps={b:g}: {p}" for n, b, _, _, p in rows))
    print()
    for label, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'}: {label} ({detail})")


if __name__ == "__main__":
    main()
