"""What a private fit costs beside its non-private twin, and how much of it is accounting.

Three tables, all measured in one run on the same machine:

1. **DP fit / non-private twin** at 1e4 and 1e5 rows (and 1e6 with
   ``--full``), d = 10 (d = 20 for PCA), one BLAS thread.  Each DP fit is at
   an epsilon not fitted before in the process (what a search over budgets
   does), paired with its twin (A, B, A, B, median of 3), after a warm-up fit
   of both; beside it the share of the DP fit spent in accounting and
   calibration (time inside :func:`skdp.privacy.compose` and the
   calibrators), and the first DP fit in a fresh process ("cold").
2. **DP-SGD calibration** (eps = 1, delta = 1e-5, q = 256/20000) for 1k,
   5k and 15k steps: skdp's PLD and RDP calibrations beside
   Opacus' RDP and PRV and dp-accounting's PLD calibration, each sigma
   compared with dp-accounting's.
3. **Budget scaling**: 10, 100 and 1,000 fits settled on one
   :class:`~skdp.privacy.BudgetAccountant` (and an SQLite one) over a
   10-point epsilon grid of DPGaussianMixture plans; total accounting time
   and the time of one reservation at the start and at the end.

Targets (issue "a private fit costs what its computation costs") are printed
as PASS/FAIL lines.  Read the ratios, not the seconds, on a loaded machine.

Run: ``python benchmarks/fit_speed.py [--quick | --full | --smoke]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

# Run from a checkout: use this tree's skdp, whatever is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)

D = 10
BOUNDS = (-1.0, 1.0)


# --------------------------------------------------------------------------
# The estimators and their twins.
# --------------------------------------------------------------------------


def _data(n, d, seed=0):
    """Five blobs inside the declared box [-1, 1]^d."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-0.6, 0.6, size=(5, d))
    X = centres[rng.integers(5, size=n)] + rng.normal(0, 0.15, size=(n, d))
    return np.clip(X, *BOUNDS)


def _cases():
    """``name -> (d, make_dp(epsilon), make_twin(), one_release)``."""
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.mixture import GaussianMixture
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler, StandardScaler

    from skdp.cluster import DPKernelKMeans, DPKMeans
    from skdp.mixture import DPGaussianMixture
    from skdp.preprocessing import DPPCA, DPMinMaxScaler, DPStandardScaler

    norm = float(np.sqrt(D))
    return {
        "DPGaussianMixture": (
            D,
            lambda eps: DPGaussianMixture(3, max_iter=10, data_norm=norm, epsilon=eps, random_state=0),
            lambda: GaussianMixture(3, max_iter=10, tol=0, n_init=1, init_params="random", random_state=0),
            False,
        ),
        "DPKMeans (lloyd)": (
            D,
            lambda eps: DPKMeans(5, bounds=BOUNDS, algorithm="lloyd", epsilon=eps, random_state=0),
            lambda: KMeans(5, init="random", n_init=1, max_iter=5, tol=0, random_state=0),
            False,
        ),
        "DPKMeans (coreset)": (
            D,
            lambda eps: DPKMeans(5, bounds=BOUNDS, algorithm="coreset", epsilon=eps, random_state=0),
            lambda: KMeans(5, init="random", n_init=1, max_iter=5, tol=0, random_state=0),
            False,
        ),
        "DPKernelKMeans": (
            D,
            lambda eps: DPKernelKMeans(3, n_components=200, max_iter=5, epsilon=eps, random_state=0),
            lambda: make_pipeline(
                RBFSampler(gamma=1.0, n_components=200, random_state=0),
                KMeans(3, init="random", n_init=1, max_iter=5, tol=0, random_state=0),
            ),
            False,
        ),
        "DPStandardScaler": (
            D,
            lambda eps: DPStandardScaler(bounds=BOUNDS, epsilon=eps, random_state=0),
            StandardScaler,
            True,
        ),
        "DPMinMaxScaler": (
            D,
            lambda eps: DPMinMaxScaler(epsilon=eps, random_state=0),
            MinMaxScaler,
            True,
        ),
        "DPPCA": (
            2 * D,
            lambda eps: DPPCA(5, data_norm=float(np.sqrt(2 * D)), epsilon=eps, random_state=0),
            lambda: PCA(5, random_state=0),
            True,
        ),
    }


# --------------------------------------------------------------------------
# Time spent accounting: inside compose() and the calibrators.
# --------------------------------------------------------------------------

_TIMED = ("compose", "calibrate_noise_multiplier", "gaussian_noise_multiplier", "calibrate_dpsgd_noise")


class AccountingClock:
    """Wall time spent inside the accounting entry points, counted once when they nest.

    The functions are replaced, for the clock's lifetime, in every loaded
    ``skdp`` module that imported them by name (estimators import the
    calibrators directly), so nothing of skdp is modified on disk or
    instrumented otherwise.
    """

    def __init__(self):
        self.seconds = 0.0
        self._depth = 0
        self._patched = []

    def _wrap(self, function):
        clock = self

        def timed(*args, **kwargs):
            clock._depth += 1
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                clock._depth -= 1
                if clock._depth == 0:
                    clock.seconds += time.perf_counter() - start

        return timed

    def __enter__(self):
        import skdp.privacy.calibration as calibration
        import skdp.privacy.dpsgd as dpsgd
        import skdp.privacy.ledger as accountant

        originals = {
            "compose": accountant.compose,
            "calibrate_noise_multiplier": calibration.calibrate_noise_multiplier,
            "gaussian_noise_multiplier": calibration.gaussian_noise_multiplier,
            "calibrate_dpsgd_noise": dpsgd.calibrate_dpsgd_noise,
        }
        wrapped = {name: self._wrap(f) for name, f in originals.items()}
        for module in list(sys.modules.values()):
            if not getattr(module, "__name__", "").startswith("skdp"):
                continue
            for name in _TIMED:
                if getattr(module, name, None) is originals[name]:
                    setattr(module, name, wrapped[name])
                    self._patched.append((module, name, originals[name]))
        return self

    def __exit__(self, *exc):
        for module, name, original in self._patched:
            setattr(module, name, original)
        self._patched.clear()


def _fit_time(make, X):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        make().fit(X)
    return time.perf_counter() - start


def _epsilons():
    # Epsilons never fitted before in this process (no calibration reused).
    k = 0
    while True:
        k += 1
        yield round(1.0 + 0.0173 * k, 6)


def fit_table(sizes, repeats, names=None):
    """Rows ``(name, n, dp_s, twin_s, ratio, accounting_s)`` of table 1 (warm, new epsilon)."""
    cases = _cases()
    fresh = _epsilons()
    rows = []
    for name, (d, make_dp, make_twin, _) in cases.items():
        if names and name not in names:
            continue
        # Warm-up: imports, first-use caches of both libraries.
        X = _data(2000, d)
        _fit_time(lambda make_dp=make_dp: make_dp(1.0), X)
        _fit_time(make_twin, X)
        for n in sizes:
            X = _data(n, d)
            dp, twin, acc = [], [], []
            for _ in range(repeats):
                eps = next(fresh)
                with AccountingClock() as clock:
                    dp.append(_fit_time(lambda eps=eps, make_dp=make_dp: make_dp(eps), X))
                acc.append(clock.seconds)
                twin.append(_fit_time(make_twin, X))
            t_dp, t_twin = statistics.median(dp), statistics.median(twin)
            rows.append((name, n, t_dp, t_twin, t_dp / t_twin, statistics.median(acc)))
    return rows


_COLD_SCRIPT = """
import sys, time, json, warnings
sys.path.insert(0, {root!r})
sys.path.insert(0, {here!r})
import fit_speed as fs
name, n = {name!r}, {n}
d, make_dp, make_twin, _ = fs._cases()[name]
X = fs._data(n, d)
with fs.AccountingClock() as clock:
    t = fs._fit_time(lambda: make_dp(1.0), X)
print(json.dumps([t, clock.seconds]))
"""


def cold_fit(name, n):
    """``(fit_s, accounting_s)`` of the first DP fit in a fresh process (libraries imported)."""
    here = Path(__file__).resolve().parent
    code = _COLD_SCRIPT.format(root=str(here.parent), here=str(here), name=name, n=n)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True
    ).stdout
    return tuple(json.loads(out.strip().splitlines()[-1]))


# --------------------------------------------------------------------------
# DP-SGD calibration.
# --------------------------------------------------------------------------

Q = 256 / 20000
EPS, DELTA = 1.0, 1e-5


def _dp_accounting_sigma(steps, upper):
    """dp-accounting's own PLD calibration, bracketed by ``[0.8 upper, upper]`` (an RDP answer)."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    def make_event(sigma):
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(Q, dp_accounting.GaussianDpEvent(sigma)), steps
        )

    return dp_accounting.calibrate_dp_mechanism(
        pld_privacy_accountant.PLDAccountant,
        make_event,
        EPS,
        DELTA,
        dp_accounting.ExplicitBracketInterval(0.8 * upper, upper),
        tol=1e-4 * upper,
    )


def _timed(fn):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = fn()
    return value, time.perf_counter() - start


def calibration_table(step_counts, peers=("opacus", "dp-accounting"), pld=True):
    """Rows ``(steps, method, sigma, seconds)``; None sigma where a library is missing.

    Every library is warmed up first (imports, first calls).  skdp's PLD
    calibration of a subsampled plan does not use the RDP answer, so the
    skdp RDP row is timed cold; dp-accounting's calibration is bracketed by
    that RDP answer (an upper end).
    """
    from skdp.privacy.dpsgd import calibrate_dpsgd_noise

    # Warm-up, untimed: every library imported and past its first call (a
    # 10-step plan, not calibrated again below), so that the rows compare
    # the calibrations, not the imports.
    _timed(lambda: calibrate_dpsgd_noise(EPS, DELTA, Q, 10))
    for _, fn in _opacus_methods(10) if "opacus" in peers else ():
        if fn is not None:
            _timed(fn)
    rows = []
    for steps in step_counts:
        methods = []
        if pld:
            methods.append(("skdp PLD", lambda s=steps: calibrate_dpsgd_noise(EPS, DELTA, Q, s)))
        methods.append(
            ("skdp RDP", lambda s=steps: calibrate_dpsgd_noise(EPS, DELTA, Q, s, composition="rdp"))
        )
        if "opacus" in peers:
            methods.extend(_opacus_methods(steps))
        if "dp-accounting" in peers:
            try:
                import dp_accounting  # noqa: F401
            except ImportError:
                rows.append((steps, "dp-accounting", None, None))
            else:
                # Bracketed by skdp's RDP answer, computed (and cached) by the
                # skdp RDP row before this one runs.
                methods.append(
                    (
                        "dp-accounting PLD",
                        lambda s=steps: _dp_accounting_sigma(
                            s, calibrate_dpsgd_noise(EPS, DELTA, Q, s, composition="rdp")
                        ),
                    )
                )
        for label, fn in methods:
            if fn is None:
                rows.append((steps, label, None, None))
                continue
            sigma, seconds = _timed(fn)
            rows.append((steps, label, float(sigma), seconds))
    return rows


def _opacus_methods(steps):
    try:
        from opacus.accountants.utils import get_noise_multiplier
    except ImportError:
        return [("Opacus", None)]
    return [
        (
            f"Opacus {acc.upper()}",
            lambda a=acc: get_noise_multiplier(
                target_epsilon=EPS, target_delta=DELTA, sample_rate=Q, steps=steps, accountant=a
            ),
        )
        for acc in ("rdp", "prv")
    ]


# --------------------------------------------------------------------------
# Budget scaling.
# --------------------------------------------------------------------------


def _grid_plans():
    """Ten DPGaussianMixture fits' ``(request, epsilon, delta, events)`` over an epsilon grid."""
    from skdp.mixture import DPGaussianMixture

    X = _data(1000, D)
    plans = []
    for eps in np.round(np.linspace(0.2, 2.0, 10), 3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = DPGaussianMixture(3, max_iter=10, data_norm=float(np.sqrt(D)), epsilon=float(eps)).fit(X)
        spent = model.privacy_spent_
        plans.append((float(eps), spent.epsilon, spent.delta, tuple(model.privacy_ledger_.events)))
    return plans


#: The budgets of table 3: in memory, and on an SQLite file with each ``durability``.
BUDGET_BACKENDS = ("memory", "sqlite", "sqlite-process")


def fsync_ms(directory, repeats=50):
    """Median milliseconds of one ``fsync`` of a small append in ``directory``.

    The floor of a durable commit: an SQLite budget with
    ``durability="charges"`` syncs its log once per reservation.
    """
    times = []
    path = Path(directory) / "fsync.probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for _ in range(repeats):
            os.write(fd, b"x" * 512)
            start = time.perf_counter()
            os.fsync(fd)
            times.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(times) * 1e3


def budget_table(fit_counts, sqlite_max=1000):
    """Rows ``(backend, n_fits, total_s, first_reserve_ms, last_reserve_ms, spent_epsilon)``, and the fsync ms.

    ``backend`` is one of :data:`BUDGET_BACKENDS`: ``"sqlite"`` is an
    :class:`~skdp.privacy.SQLiteBudgetAccountant` with its default
    ``durability="charges"``, ``"sqlite-process"`` one with
    ``durability="process"``.
    """
    from skdp.privacy import BudgetAccountant, SQLiteBudgetAccountant

    plans = _grid_plans()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sync_ms = fsync_ms(tmp)
        for backend in BUDGET_BACKENDS:
            for n_fits in fit_counts:
                if backend != "memory" and n_fits > sqlite_max:
                    continue
                if backend == "memory":
                    budget = BudgetAccountant(composition="pld")
                else:
                    durability = "process" if backend == "sqlite-process" else "charges"
                    budget = SQLiteBudgetAccountant(
                        Path(tmp) / f"{backend}{n_fits}.sqlite", composition="pld", durability=durability
                    )
                reserves = []
                start = time.perf_counter()
                for i in range(n_fits):
                    request, eps, delta, events = plans[i % len(plans)]
                    t0 = time.perf_counter()
                    held = budget.reserve(request, 1e-5)
                    reserves.append(time.perf_counter() - t0)
                    budget.settle(held, eps, delta, events=events)
                spent = budget.spent.epsilon  # one more total, as a caller reads it
                total = time.perf_counter() - start
                last = statistics.median(reserves[-10:])
                rows.append((backend, n_fits, total, reserves[0] * 1e3, last * 1e3, spent))
    return rows, sync_ms


# --------------------------------------------------------------------------
# Report.
# --------------------------------------------------------------------------


def _verdict(ok):
    return "PASS" if ok else "FAIL"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="1e4 and 1e5 rows, 1k/5k/15k DP-SGD steps")
    mode.add_argument("--full", action="store_true", help="1e4, 1e5 and 1e6 rows, 1k/5k/15k steps")
    mode.add_argument("--smoke", action="store_true", help="the smallest configuration (tests)")
    args = parser.parse_args(argv)
    calibration = {}
    if args.smoke:
        sizes, repeats, steps, fits, names = [2000], 1, [1000], [10], ["DPStandardScaler", "DPKMeans (lloyd)"]
        cold_names = ["DPStandardScaler"]
        calibration = {"peers": (), "pld": False}
    elif args.full:
        sizes, repeats, steps, fits, names = (
            [10_000, 100_000, 1_000_000],
            3,
            [1000, 5000, 15000],
            [10, 100, 1000],
            None,
        )
        cold_names = list(_cases())
    else:
        sizes, repeats, steps, fits, names = [10_000, 100_000], 3, [1000, 5000, 15000], [10, 100, 1000], None
        cold_names = list(_cases())

    report = {}
    print("1. DP fit / non-private twin, a new epsilon each DP fit (warm), median of", repeats)
    rows = fit_table(sizes, repeats, names)
    header = f"{'estimator':<20}{'n':>9}{'DP (s)':>9}{'twin (s)':>10}{'DP/twin':>9}{'accounting (s)':>16}{'share':>7}"
    print(header)
    print("-" * len(header))
    for name, n, t_dp, t_twin, ratio, acc in rows:
        print(f"{name:<20}{n:>9}{t_dp:>9.3f}{t_twin:>10.3f}{ratio:>9.2f}{acc:>16.4f}{acc / t_dp:>7.1%}")
    report["fits"] = rows

    print(f"\nFirst DP fit in a fresh process (cold), n = {sizes[0]}")
    cold = []
    for name in cold_names:
        t, acc = cold_fit(name, sizes[0])
        cold.append((name, t, acc))
        print(f"{name:<20}{t:>9.3f} s, of which accounting {acc:.4f} s ({acc / t:.1%})")
    report["cold"] = cold

    print("\n2. DP-SGD calibration, eps = 1, delta = 1e-5, q = 256/20000")
    cal = calibration_table(steps, **calibration)
    reference = {s: sigma for s, label, sigma, _ in cal if label == "dp-accounting PLD"}
    header = f"{'steps':>6}  {'method':<18}{'sigma':>9}{'time (s)':>10}{'vs dp-accounting':>18}"
    print(header)
    print("-" * len(header))
    for s, label, sigma, seconds in cal:
        if sigma is None:
            print(f"{s:>6}  {label:<18}{'not installed':>18}")
            continue
        ref = reference.get(s)
        rel = f"{sigma / ref - 1:+.2%}" if ref else "-"
        print(f"{s:>6}  {label:<18}{sigma:>9.4f}{seconds:>10.3f}{rel:>18}")
    report["calibration"] = cal

    print(
        "\n3. Budget scaling: fits over a 10-point epsilon grid (DPGaussianMixture plans), composition='pld'"
    )
    # The SQLite ledger's own cost is its transactions: a write lock per
    # reservation and per settlement, and with durability="charges" one sync
    # of the log per reservation (the fsync time printed below is its floor).
    budget, sync_ms = budget_table(fits, sqlite_max=max(fits))
    header = f"{'backend':<15}{'fits':>6}{'total (s)':>11}{'1st reserve (ms)':>18}{'last reserves (ms)':>20}{'spent eps':>11}"
    print(header)
    print("-" * len(header))
    for backend, n_fits, total, first, last, spent in budget:
        print(f"{backend:<15}{n_fits:>6}{total:>11.3f}{first:>18.2f}{last:>20.2f}{spent:>11.4f}")
    print(
        f"sqlite: durability='charges' (the default); sqlite-process: durability='process'. "
        f"One fsync on this disk: {sync_ms:.2f} ms (median of 50)."
    )
    report["budget"] = budget
    report["fsync_ms"] = sync_ms

    print("\nTargets")
    by = {(r[0], r[1]): r for r in rows}
    small, large = sizes[0], (sizes[1] if len(sizes) > 1 else sizes[0])
    limits = {
        "DPGaussianMixture": 1.5,
        "DPKernelKMeans": 1.5,
        "DPKMeans (lloyd)": 3.0,
        "DPKMeans (coreset)": 3.0,
    }
    for name, limit in limits.items():
        if (name, small) in by:
            ratio = by[(name, small)][4]
            print(f"  {_verdict(ratio <= limit)}  {name} DP/twin at n={small}: {ratio:.2f} (<= {limit})")
    for name in ("DPStandardScaler", "DPMinMaxScaler", "DPPCA"):
        if (name, small) in by:
            acc = by[(name, small)][5]
            print(
                f"  {_verdict(acc <= 0.05)}  {name} accounting + calibration: {acc * 1e3:.1f} ms (<= 50 ms)"
            )
    for (name, n), r in by.items():
        if n == large:
            share = r[5] / r[2]
            print(f"  {_verdict(share <= 0.10)}  {name} accounting share at n={n}: {share:.1%} (<= 10%)")
    for s in steps:
        mine = next((c for c in cal if c[0] == s and c[1] == "skdp PLD"), None)
        opacus = next((c for c in cal if c[0] == s and c[1] == "Opacus RDP"), None)
        ref = reference.get(s)
        if mine and opacus and opacus[3] is not None:
            print(
                f"  {_verdict(mine[3] <= opacus[3])}  DP-SGD PLD calibration, {s} steps: "
                f"{mine[3]:.3f} s vs Opacus RDP {opacus[3]:.3f} s"
            )
        if mine and ref:
            print(
                f"  {_verdict(abs(mine[2] / ref - 1) <= 0.005)}  sigma within 0.5% of dp-accounting ({s} steps)"
            )
    for backend in BUDGET_BACKENDS:
        thousand = [b for b in budget if b[0] == backend and b[1] == max(fits)]
        if thousand:
            total = thousand[0][2]
            floor = (
                f"; {max(fits)} fsyncs alone take {max(fits) * sync_ms / 1e3:.2f} s"
                if backend == "sqlite"
                else ""
            )
            print(
                f"  {_verdict(total <= 5.0)}  {max(fits)} fits on one {backend} budget: "
                f"{total:.2f} s of accounting (<= 5 s){floor}"
            )
    for backend in BUDGET_BACKENDS:
        runs = sorted((b for b in budget if b[0] == backend), key=lambda b: b[1])
        if len(runs) > 1:
            # Flat: the last reservations after the most fits cost at most
            # twice those after the fewest (plus 0.5 ms of timer noise).
            few, many = runs[0], runs[-1]
            flat = many[4] <= 2 * few[4] + 0.5
            print(
                f"  {_verdict(flat)}  {backend} reservation flat in the number of fits: "
                f"{few[4]:.2f} ms after {few[1]}, {many[4]:.2f} ms after {many[1]}"
            )
    return report


if __name__ == "__main__":
    main()
