"""DPGaussianMixture beyond memory: a 20M x 10 memmap on disk, and a local Dask cluster.

Issue 11: the estimator touches the data only through sums, so it can fit
chunk by chunk (``skdp._chunks``) with the noise added once per statistic
per iteration on the driver.  This script

1. writes 20 million x 10 float64 rows (1.6 GB; 2 million with ``--quick``)
   from a 3-component mixture to a ``.npy`` file under ``/tmp`` (never in the
   repository), chunk by chunk, so that writing needs little memory;
2. fits ``DPGaussianMixture(3, covariance_type="full", max_iter=5)`` on
   ``np.load(path, mmap_mode="r")`` in a fresh process, reporting wall time
   and peak RSS (``getrusage``; target < 2 GB);
3. fits the same model on a Dask array read from the same file by
   per-chunk tasks, on ``LocalCluster(n_workers=2, threads_per_worker=1)``
   (worker processes), reporting wall time and the peak summed RSS of the
   driver and workers (sampled with psutil);
4. fits scikit-learn's ``GaussianMixture`` (same iterations, in memory) on
   the first 2 million rows, for scale: the per-row cost of the out-of-core
   DP fit against the in-memory non-private one.

The memmap and Dask fits use the same ``random_state``; their parameters
agree to floating-point tolerance, which the table checks.

Run: ``python benchmarks/scale_out.py [--quick] [--rows N] [--keep]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)
RESULTS = Path(__file__).resolve().parent / "results"
N_FEATURES = 10
N_COMPONENTS = 3
MAX_ITER = 5
DATA_NORM = 8.0
WRITE_CHUNK = 500_000
DASK_CHUNK = 2**18


def write_npy(path, n_rows, seed=0):
    """A float64 ``.npy`` of ``n_rows`` x 10 rows from a 3-component mixture, written chunk by chunk."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-3, 3, size=(N_COMPONENTS, N_FEATURES))
    scales = rng.uniform(0.5, 1.0, size=N_COMPONENTS)
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float64)), "fortran_order": False}
    header["shape"] = (n_rows, N_FEATURES)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        for start in range(0, n_rows, WRITE_CHUNK):
            m = min(WRITE_CHUNK, n_rows - start)
            labels = rng.integers(N_COMPONENTS, size=m)
            rows = centres[labels] + rng.normal(size=(m, N_FEATURES)) * scales[labels, None]
            f.write(np.ascontiguousarray(rows).tobytes())


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def make_model():
    from skdp.mixture import DPGaussianMixture

    return DPGaussianMixture(
        N_COMPONENTS,
        covariance_type="full",
        max_iter=MAX_ITER,
        data_norm=DATA_NORM,
        epsilon=1.0,
        delta=1e-6,
        random_state=0,
    )


def summary(model):
    order = np.argsort(model.means_[:, 0])
    return {
        "means": model.means_[order].tolist(),
        "weights": model.weights_[order].tolist(),
        "covariances": model.covariances_[order].tolist(),
        "epsilon": model.privacy_spent_.epsilon,
    }


def run_memmap(path):
    X = np.load(path, mmap_mode="r")
    base = peak_rss_mb()
    t0 = time.perf_counter()
    model = make_model().fit(X)
    return {
        "seconds": time.perf_counter() - t0,
        "peak_rss_mb": peak_rss_mb(),
        "rss_before_mb": base,
    } | summary(model)


def load_rows(path, start, stop):
    """One chunk of the ``.npy`` file (a task: it maps only its own rows, then copies them)."""
    X = np.load(path, mmap_mode="r")
    return np.array(X[start:stop])


class TreeRSS:
    """Peak of the summed RSS of this process and its children, sampled in a thread."""

    def __init__(self, interval=0.1):
        import psutil

        self.proc, self.interval, self.peak, self._stop = psutil.Process(), interval, 0.0, False
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import psutil

        while not self._stop:
            total = 0
            for p in [self.proc, *self.proc.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total / 2**20)
            time.sleep(self.interval)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop = True
        self.thread.join()


def run_dask(path):
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster

    n_rows = np.load(path, mmap_mode="r").shape[0]
    load = dask.delayed(load_rows, pure=True)
    X = da.concatenate(
        [
            da.from_delayed(
                load(path, s, min(s + DASK_CHUNK, n_rows)), (min(DASK_CHUNK, n_rows - s), N_FEATURES), float
            )
            for s in range(0, n_rows, DASK_CHUNK)
        ]
    )
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster),
        TreeRSS() as rss,
    ):
        t0 = time.perf_counter()
        model = make_model().fit(X)
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "peak_rss_mb": rss.peak, "driver_peak_rss_mb": peak_rss_mb()} | summary(model)


def run_sklearn(path, n_rows):
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    X = np.array(np.load(path, mmap_mode="r")[:n_rows])
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        GaussianMixture(N_COMPONENTS, max_iter=MAX_ITER, init_params="random_from_data", random_state=0).fit(
            X
        )
    return {"seconds": time.perf_counter() - t0, "peak_rss_mb": peak_rss_mb(), "rows": n_rows}


def child(kind, path, extra=None):
    """Run one measurement in a fresh interpreter so that its peak RSS is its own."""
    cmd = [sys.executable, __file__, "--child", kind, "--path", str(path)]
    if extra is not None:
        cmd += ["--rows", str(extra)]
    out = subprocess.run(
        cmd, check=True, capture_output=True, text=True, env=os.environ | {"OMP_NUM_THREADS": "1"}
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 million rows instead of 20 million")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--path", default=None, help="where to write the .npy (default under /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the .npy file afterwards")
    parser.add_argument("--no-dask", action="store_true", help="skip the LocalCluster run")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        result = {
            "memmap": lambda: run_memmap(args.path),
            "dask": lambda: run_dask(args.path),
            "sklearn": lambda: run_sklearn(args.path, args.rows),
        }[args.child]()
        print(json.dumps(result))
        return result

    n_rows = args.rows or (2_000_000 if args.quick else 20_000_000)
    path = Path(args.path or f"/tmp/skdp_scale_out_{n_rows}x{N_FEATURES}.npy")
    if not (path.exists() and np.load(path, mmap_mode="r").shape == (n_rows, N_FEATURES)):
        t0 = time.perf_counter()
        write_npy(path, n_rows)
        print(f"wrote {path} ({path.stat().st_size / 2**30:.2f} GiB) in {time.perf_counter() - t0:.1f} s")
    try:
        results = {"memmap": child("memmap", path)}
        if not args.no_dask:
            results["dask"] = child("dask", path)
        results["sklearn"] = child("sklearn", path, min(n_rows, 2_000_000))
    finally:
        if not args.keep:
            path.unlink(missing_ok=True)

    load = os.getloadavg()
    print(
        f"DPGaussianMixture(K={N_COMPONENTS}, full, J={MAX_ITER}, epsilon=1) on {n_rows:,} x {N_FEATURES} "
        f"float64 rows ({n_rows * N_FEATURES * 8 / 2**30:.2f} GiB on disk); load average "
        f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores"
    )
    header = f"{'run':<34} {'rows':>11} {'wall s':>8} {'peak RSS MB':>12} {'s per M rows':>13}"
    print(header)
    print("-" * len(header))
    rows = [
        ("DP-EM, numpy memmap (1 process)", n_rows, results["memmap"]),
        *([("DP-EM, Dask LocalCluster(2 workers)", n_rows, results["dask"])] if "dask" in results else []),
        ("sklearn GaussianMixture, in memory", results["sklearn"]["rows"], results["sklearn"]),
    ]
    for name, n, r in rows:
        print(
            f"{name:<34} {n:>11,} {r['seconds']:>8.1f} {r['peak_rss_mb']:>12.0f} {r['seconds'] / n * 1e6:>13.2f}"
        )
    print("peak RSS: getrusage of the fitting process; Dask: summed RSS of driver and workers (psutil)")
    if "dask" in results:
        diff = max(
            float(np.max(np.abs(np.subtract(results["memmap"][key], results["dask"][key]))))
            for key in ("means", "weights", "covariances")
        )
        print(f"max |memmap - dask| over the released parameters: {diff:.2e} (same random_state)")
    mem_ok = results["memmap"]["peak_rss_mb"] < 2048
    print(f"memmap peak RSS < 2 GB: {'yes' if mem_ok else 'NO'}")

    RESULTS.mkdir(parents=True, exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
    names = [r[0].replace(", ", "\n") for r in rows]
    ax1.barh(names, [r[2]["seconds"] / r[1] * 1e6 for r in rows], color=["C0", "C1", "C7"][: len(rows)])
    ax1.set_xlabel("seconds per million rows")
    ax2.barh(names, [r[2]["peak_rss_mb"] for r in rows], color=["C0", "C1", "C7"][: len(rows)])
    ax2.axvline(2048, color="k", ls=":", label="2 GB")
    ax2.set_xlabel("peak RSS (MB)")
    ax2.legend()
    ax2.set_yticks([])
    fig.suptitle(f"DPGaussianMixture on {n_rows:,} x {N_FEATURES} rows on disk")
    fig.tight_layout()
    out = RESULTS / "scale_out.png"
    fig.savefig(out, dpi=120)
    print(f"plot saved to {out}")
    return results


if __name__ == "__main__":
    main()
