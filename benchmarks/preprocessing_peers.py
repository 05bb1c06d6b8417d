"""DP preprocessing vs diffprivlib at equal epsilon: downstream accuracy of one non-private classifier (issue 21).

Each preprocessing is fitted on the training rows, then scikit-learn's
``LogisticRegression(max_iter=5000)`` (non-private, the same for every row,
fitted here in skdp's environment) is trained on the transformed training
rows and scored on the transformed test rows: the comparison isolates the
preprocessing.  The downstream model is not private, so no row is an
end-to-end guarantee.

Data: ``load_digits`` (1,797 x 64) and ``load_breast_cancer`` (569 x 30), one
fixed stratified 75/25 split (``random_state=0``); the seeds vary only the
noise of the private fits (``random_state=seed`` on both sides).  Mean ± std
of the test accuracy over the seeds.

Compared, at each epsilon:

* skdp ``DPStandardScaler`` (declared bounds; ``delta=0``, pure epsilon-DP as
  diffprivlib's; ``bounds="auto"``, private quantiles, nothing declared),
  ``DPMinMaxScaler`` (no bounds needed) and ``DPPCA`` (Analyze Gauss);
* diffprivlib 0.6.6's ``StandardScaler(bounds=...)`` and
  ``PCA(data_norm=..., bounds=...)``, run in ``benchmarks/.venvs/diffprivlib``
  (``python benchmarks/peers/make_env.py diffprivlib``; without it the table
  says "not installed").  diffprivlib 0.6.6 has no ``MinMaxScaler``.
  diffprivlib is pure epsilon-DP (delta = 0); skdp's ``DPPCA`` needs
  ``delta > 0`` (1e-5 here), a weaker guarantee than diffprivlib's PCA at the
  same epsilon;
* the non-private scikit-learn ``StandardScaler``, ``MinMaxScaler``, ``PCA``
  and the raw features: the ceilings.

Declared bounds, the same for both libraries:

* digits: pixels in ``[0, 16]`` (public: the dataset's definition), so every
  row has L2 norm at most ``16 sqrt(64) = 128`` (``data_norm``);
* breast_cancer has no public bounds.  ``BREAST_CANCER_BOUNDS`` is
  ``[0, 10^ceil(log10(max))]`` per feature and ``data_norm = 10^4``, the
  "pow10" stand-ins for domain knowledge of ``docs/preprocessing.md``: written
  here as constants, but they were read (coarsely) off the data's maxima, so
  rows using them are marked † (the guarantee assumes the declaration is
  public).  diffprivlib's ``StandardScaler`` and ``PCA`` read each column's
  min and max off the data when ``bounds`` is omitted (a
  ``PrivacyLeakWarning``, not DP), so they are only run with the declaration.
  skdp's ``DPStandardScaler(bounds="auto")``, ``DPMinMaxScaler()`` and
  ``DPPCA`` (which needs only ``data_norm``: its mean comes from the clipped
  rows) are also shown with nothing declared where they can be.

Run: ``python benchmarks/preprocessing_peers.py [--quick]`` (``--quick``: 2
seeds, epsilon in {1, 8}).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import FunctionTransformer, MinMaxScaler, StandardScaler
from threadpoolctl import threadpool_limits

# Run as a script from the repository root: skdp (one level up) and the peers helper (here).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import PeerNotInstalled, describe, fit_many  # noqa: E402

from skdp.preprocessing import DPPCA, DPMinMaxScaler, DPStandardScaler  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)
#: Peers run in their own environment (``benchmarks/peers/``).
PEERS = ("diffprivlib",)
EPSILONS = (0.5, 1.0, 2.0, 8.0)
QUICK_EPSILONS = (1.0, 8.0)
DELTA = 1e-5
SEEDS = 5
QUICK_SEEDS = 2
#: Components kept by every PCA (private or not) on each dataset.
N_COMPONENTS = {"digits": 20, "breast_cancer": 10}
#: ``[0, 10^ceil(log10(max))]`` of each breast_cancer feature (the "pow10"
#: stand-ins of docs/preprocessing.md; coarse, but read off the data: †).
BREAST_CANCER_UPPER = (
    (100, 100, 1000, 1e4, 1, 1, 1, 1, 1, 0.1)
    + (10, 10, 100, 1000, 0.1, 1, 1, 0.1, 0.1, 0.1)
    + (100, 100, 1000, 1e4, 1, 10, 10, 1, 1, 1)
)
BREAST_CANCER_DATA_NORM = 1e4
DIGITS_DATA_NORM = 16.0 * np.sqrt(64)


def datasets():
    """``name -> (Xtr, Xte, ytr, yte, (lower, upper), data_norm, declared_is_public)``."""
    out = {}
    X, y = load_digits(return_X_y=True)
    d = X.shape[1]
    out["digits"] = (X, y, (np.zeros(d), np.full(d, 16.0)), DIGITS_DATA_NORM, True)
    X, y = load_breast_cancer(return_X_y=True)
    upper = np.asarray(BREAST_CANCER_UPPER, dtype=float)
    out["breast_cancer"] = (X, y, (np.zeros_like(upper), upper), BREAST_CANCER_DATA_NORM, False)
    split = {}
    for name, (X, y, bounds, norm, public) in out.items():
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
        split[name] = (Xtr, Xte, ytr, yte, bounds, norm, public)
    return split


def downstream_accuracy(Ztr, ytr, Zte, yte):
    """Test accuracy of the (non-private) classifier on already transformed rows."""
    clf = LogisticRegression(max_iter=5000).fit(Ztr, ytr)
    return float(clf.score(Zte, yte))


def skdp_rows(k, bounds, norm, mark):
    """``label -> factory(epsilon, seed)`` of the skdp transformers."""
    b = (bounds[0].tolist(), bounds[1].tolist())
    return {
        f"skdp DPStandardScaler(bounds=declared){mark}": lambda e, s: DPStandardScaler(
            epsilon=e, delta=DELTA, bounds=b, random_state=s
        ),
        f"skdp DPStandardScaler(bounds=declared, delta=0){mark}": lambda e, s: DPStandardScaler(
            epsilon=e, delta=0.0, bounds=b, random_state=s
        ),
        'skdp DPStandardScaler(bounds="auto")': lambda e, s: DPStandardScaler(
            epsilon=e, delta=DELTA, bounds="auto", random_state=s
        ),
        "skdp DPMinMaxScaler()": lambda e, s: DPMinMaxScaler(epsilon=e, random_state=s),
        "skdp DPMinMaxScaler(delta=0)": lambda e, s: DPMinMaxScaler(epsilon=e, delta=0.0, random_state=s),
        f"skdp DPPCA({k}, data_norm={norm:g}){mark}": lambda e, s: DPPCA(
            k, epsilon=e, delta=DELTA, data_norm=norm, random_state=s
        ),
    }


def diffprivlib_jobs(k, bounds, norm, mark):
    """``label -> (class path, params(epsilon, seed))`` of the diffprivlib transformers."""
    b = [bounds[0].tolist(), bounds[1].tolist()]
    return {
        f"diffprivlib StandardScaler(bounds=declared){mark}": (
            "diffprivlib.models.StandardScaler",
            lambda e, s: {"epsilon": e, "bounds": b, "random_state": s},
        ),
        f"diffprivlib PCA({k}, data_norm={norm:g}, bounds=declared){mark}": (
            "diffprivlib.models.PCA",
            lambda e, s: {"n_components": k, "epsilon": e, "data_norm": norm, "bounds": b, "random_state": s},
        ),
    }


def diffprivlib_accuracy(label, job, Xtr, Xte, ytr, yte, epsilons, seeds):
    """Accuracy array (epsilon, seed) of one diffprivlib transformer; its versions line."""
    path, params = job
    fits = [
        {"params": params(e, s), "X": "Xtr", "transform": ["Xtr", "Xte"]} for e in epsilons for s in seeds
    ]
    result = fit_many("diffprivlib", path, fits, {"Xtr": Xtr, "Xte": Xte}, tuple_params=["bounds"])
    acc = np.array(
        [
            downstream_accuracy(
                np.asarray(f["transform"]["Xtr"]), ytr, np.asarray(f["transform"]["Xte"]), yte
            )
            for f in result["fits"]
        ]
    )
    return acc.reshape(len(epsilons), len(seeds)), describe(result)


def ceilings(name, Xtr, Xte, ytr, yte, k):
    """Non-private references (no epsilon): ``label -> accuracy``."""
    steps = {
        "none (raw features)": FunctionTransformer(),
        "StandardScaler": StandardScaler(),
        "MinMaxScaler": MinMaxScaler(),
        f"PCA({k}) (raw features)": PCA(k),
    }
    if name == "digits":
        # Dividing by the public pixel range is free (no data read).
        steps["X / 16 (public range, no budget)"] = FunctionTransformer(lambda X: X / 16.0)
    out = {}
    for label, step in steps.items():
        step.fit(Xtr)
        out[label] = downstream_accuracy(step.transform(Xtr), ytr, step.transform(Xte), yte)
    return out


def run_dataset(name, data, epsilons, seeds):
    Xtr, Xte, ytr, yte, bounds, norm, public = data
    k = N_COMPONENTS[name]
    mark = "" if public else " †"
    acc = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label, make in skdp_rows(k, bounds, norm, mark).items():
            a = np.zeros((len(epsilons), len(seeds)))
            for i, e in enumerate(epsilons):
                for j, s in enumerate(seeds):
                    t = make(e, s).fit(Xtr)
                    a[i, j] = downstream_accuracy(t.transform(Xtr), ytr, t.transform(Xte), yte)
            acc[label] = a
    peer = None
    for label, job in diffprivlib_jobs(k, bounds, norm, mark).items():
        try:
            acc[label], peer = diffprivlib_accuracy(label, job, Xtr, Xte, ytr, yte, epsilons, seeds)
        except PeerNotInstalled as exc:
            peer = str(exc)
            acc[label] = None
    return acc, ceilings(name, Xtr, Xte, ytr, yte, k), peer


def print_table(name, data, acc, base, peer, epsilons, seeds):
    Xtr, Xte = data[0], data[1]
    print(
        f"{name}: {len(Xtr)} train / {len(Xte)} test rows, {Xtr.shape[1]} features; "
        f"LogisticRegression(max_iter=5000) test accuracy, mean ± std over {len(seeds)} seeds; "
        f"skdp delta = {DELTA:g} unless the row says delta=0, diffprivlib delta = 0"
    )
    print()
    print("| preprocessing | " + " | ".join(f"eps = {e:g}" for e in epsilons) + " |")
    print("|---|" + "---:|" * len(epsilons))
    for label, value in base.items():
        print(f"| {label} (non-private) | {value:.3f} |" + " |" * (len(epsilons) - 1))
    for label, a in acc.items():
        if a is None:
            print(f"| {label} | not installed |" + " |" * (len(epsilons) - 1))
            continue
        cells = " | ".join(f"{m:.3f} ± {s:.3f}" for m, s in zip(a.mean(1), a.std(1), strict=True))
        print(f"| {label} | {cells} |")
    print("| diffprivlib MinMaxScaler | does not exist in diffprivlib 0.6.6 |" + " |" * (len(epsilons) - 1))
    print()
    print(f"diffprivlib: {peer}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_SEEDS} seeds, epsilon in {QUICK_EPSILONS}"
    )
    args = parser.parse_args(argv)
    epsilons = QUICK_EPSILONS if args.quick else EPSILONS
    seeds = list(range(QUICK_SEEDS if args.quick else SEEDS))
    # The peer's process (started by fit_many, which passes this environment on) too.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    start = time.perf_counter()
    for n, (name, data) in enumerate(datasets().items()):
        # One BLAS thread: these fits are small, and on a shared machine
        # oversubscribed BLAS threads made each LogisticRegression 100x slower.
        with threadpool_limits(1):
            acc, base, peer = run_dataset(name, data, epsilons, seeds)
        if n:
            print()
        print_table(name, data, acc, base, peer, epsilons, seeds)
        sys.stdout.flush()  # one table per dataset as it finishes (the full run takes minutes)
    print()
    print(
        "† declared bounds / data_norm of breast_cancer: the pow10 stand-ins (BREAST_CANCER_UPPER, "
        "data_norm 1e4), coarse but read off the data's maxima; the same for both libraries."
    )
    print(f"total time {time.perf_counter() - start:.0f} s; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
