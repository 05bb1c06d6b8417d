"""Synthetic digits: DPGenerativeMixture's defaults against baselines and peers (issue 22).

Data: scikit-learn's ``load_digits`` binarised at ``pixel > 7`` (64 binary
columns) with the label appended as a declared one-hot block of 10 columns;
ten records (one per digit) are held out as in
``benchmarks/generative_digits.py``, and the remaining 1,787 are split
stratified into 1,250 training and 537 test rows (split seed = run seed).
Every generator releases 1,250 synthetic rows.  Metrics, against the
training rows:

* pixel-pair error: mean absolute error over all 2-way counting queries on
  pixel pairs, i.e. over every pair ``i < j`` of the 64 pixels and every
  ``(a, b)`` in ``{0, 1}^2`` of the fraction of rows with ``x_i = a`` and
  ``x_j = b`` (4 x 2016 queries);
* label x pixel error: the same over the 10 x 64 x 2 queries "label = c and
  pixel j = a";
* TSTR: accuracy on the 537 real test rows of a LogisticRegression
  (``max_iter=2000``) trained on the synthetic rows.

This definition reproduces the issue's baselines: uniform random bits
(uniform label) .224 / .037, independent pixels at the true 1-way marginals
(label drawn from the true label marginal) .014 / .015.

Peers: smartnoise-synth's MWEM and MST, in their own environment
(smartnoise-synth 1.0.8 pins opacus < 0.15, and through smartnoise-sql
pandas < 3, which conflict with ours), built by ``python benchmarks/peers/make_env.py smartnoise`` and
run through ``benchmarks/peers/worker.py`` (``_peers.synthesize_many``).  Each
is fitted on the same 1,250 training rows as ours, as a frame of the 64 pixel
columns and the label, every column declared categorical (the peer takes each
column's category set from the rows, with ``preprocessor_eps=0``), and
samples 1,250 rows; the same metric functions score them.  MST gets
``delta=1e-5`` as ours; MWEM is pure epsilon-DP, with ``split_factor=8``
(without a split it builds one 2^64 x 10 histogram and fails; its splits are
contiguous groups of 8 columns, so the 65th, the label, is a histogram of its
own, sampled independently of the pixels: TSTR at chance, as in the issue).  The peer's noise comes from OpenDP's unseedable generator: a rerun of a
peer gives other numbers, the split (seeded) stays the same.

* MWEM runs live whenever the environment is built (5-10 s a fit); without
  it, its recorded run (``--record-peers mwem --seeds 5``, in the same file)
  is shown.
* MST's rows come from the recorded run in
  ``benchmarks/results/synthetic_data_smartnoise.json`` (per-seed metrics,
  fit times, smartnoise-synth's version, the date, the machine and the command
  that wrote it: ``python benchmarks/synthetic_data.py --record-peers mst
  --seeds 5``, which runs the named peers for ``--seeds`` and ``--epsilons``
  and writes the file after every fit).  The issue measured about 13 minutes
  a fit on 2 cores; with mbi 1.1.0 (on JAX) the recorded fits took 80-150 s on
  a loaded 2-core machine (the first 441 s), 24 minutes for 5 seeds x 2
  epsilons: too long for this script's default run.  ``--live-peers mwem mst``
  runs it here instead.
* A peer with neither environment nor recorded run shows the issue's numbers,
  labelled "quoted".

Run: ``python benchmarks/synthetic_data.py [--seeds 5] [--epsilons 1 8]``
(about 3 minutes for 5 seeds on 2 cores, mostly the LogisticRegression fits;
MWEM adds its fits when the peer is built).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from skdp.generative import DPGenerativeMixture

# benchmarks/ is a directory of scripts: the peer runner sits next to this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peers import PeerNotInstalled, build_command, synthesize_many  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--seeds", "2")
#: Peers run in their own environments (``benchmarks/peers/NAME.txt``).
PEERS = ("smartnoise",)
#: Recorded peer runs, written by ``--record-peers``.
CACHE = Path(__file__).resolve().parent / "results" / "synthetic_data_smartnoise.json"
METRICS = ("pixel_pair_error", "label_pixel_error", "tstr")
PEER_LABELS = {"mwem": "smartnoise MWEM", "mst": "smartnoise MST"}
#: Peers run live by default (MST is read from the recorded run: 13 minutes a fit).
LIVE_PEERS = ("mwem",)
N_CLASSES = 10
N_PIXELS = 64
LABEL_BLOCK = list(range(N_PIXELS, N_PIXELS + N_CLASSES))
DELTA = 1e-5

#: The issue's numbers for the peers (smartnoise-synth, 5 seeds): shown only without env and recorded run.
QUOTED = {
    1.0: {"smartnoise MWEM": (0.109, 0.047, 0.120), "smartnoise MST": (0.030, 0.013, 0.655)},
    8.0: {"smartnoise MWEM": (0.023, 0.018, 0.074), "smartnoise MST": (0.023, 0.0067, 0.737)},
}
#: The issue's targets for the defaults: (max pixel-pair error, min TSTR).
TARGETS = {1.0: (0.05, 0.40), 8.0: (0.025, 0.70)}


def load(seed):
    """(train rows with the one-hot label, train pixels, train labels), (test pixels, test labels)."""
    X, y = load_digits(return_X_y=True)
    X = (X > 7).astype(float)
    public = np.array([np.flatnonzero(y == c)[0] for c in range(N_CLASSES)])
    rest = np.setdiff1d(np.arange(len(y)), public)
    tr, te = train_test_split(rest, test_size=0.3, random_state=seed, stratify=y[rest])
    Z = np.hstack([X, np.eye(N_CLASSES)[y]])
    return (Z[tr], X[tr], y[tr]), (X[te], y[te])


def _pair_cells(Z):
    """Fractions of rows with (x_i, x_j) = (0,0), (0,1), (1,0), (1,1) for every pair i < j."""
    n = len(Z)
    p11 = Z.T @ Z / n
    p1 = Z.mean(axis=0)
    p10 = p1[:, None] - p11
    p01 = p1[None, :] - p11
    p00 = 1.0 - p11 - p10 - p01
    upper = np.triu_indices(Z.shape[1], 1)
    return np.stack([cells[upper] for cells in (p00, p01, p10, p11)])


def pixel_pair_error(real, synthetic):
    """Mean absolute error over all 2-way counting queries on pixel pairs."""
    return float(np.mean(np.abs(_pair_cells(real) - _pair_cells(synthetic))))


def label_pixel_error(real, y_real, synthetic, y_synthetic):
    """Mean absolute error over the queries "label = c and pixel j = a"."""

    def cells(X, y):
        onehot = np.eye(N_CLASSES)[y]
        ones = onehot.T @ X / len(X)
        return np.stack([ones, onehot.mean(axis=0)[:, None] - ones])

    return float(np.mean(np.abs(cells(real, y_real) - cells(synthetic, y_synthetic))))


def tstr(X_syn, y_syn, X_test, y_test):
    if len(np.unique(y_syn)) < 2:
        return float(np.mean(y_test == y_syn[0]))
    return float(LogisticRegression(max_iter=2000).fit(X_syn, y_syn).score(X_test, y_test))


def split_label(S):
    return S[:, :N_PIXELS], S[:, LABEL_BLOCK].argmax(axis=1)


def generators(epsilon, seed):
    """Name -> (fit-and-sample function); each returns 1,250 synthetic (pixels, labels)."""

    def dpgm(eps=epsilon, **params):
        def run(Z, X, y):
            # The pixels are declared binary (0/1), the label a one-hot block.
            model = DPGenerativeMixture(
                categorical=[LABEL_BLOCK],
                binary=list(range(N_PIXELS)),
                epsilon=eps,
                delta=DELTA,
                random_state=seed,
                **params,
            ).fit(Z)
            return split_label(model.sample(len(Z), random_state=seed))

        return run

    def uniform(Z, X, y):
        rng = np.random.default_rng(seed)
        return (rng.random(X.shape) < 0.5).astype(float), rng.integers(0, N_CLASSES, len(X))

    def independent(Z, X, y):
        rng = np.random.default_rng(seed)
        return (rng.random(X.shape) < X.mean(axis=0)).astype(float), rng.choice(y, len(y))

    return {
        # structure="auto" fits the latent classes or the tree of privately
        # selected 2-way marginals, whichever releases more cells (here the
        # classes, one per label); the tree is shown beside them.
        "DPGM defaults (label block declared)": dpgm(),
        "DPGM tree of marginals (structure='tree')": dpgm(structure="tree"),
        "DPGM, one class per label (n_clusters=1)": dpgm(n_clusters=1),
        "DPGM marginals, DP k-means partition (k=10)": dpgm(partition="kmeans", n_clusters=10),
        "the defaults without noise (epsilon=1e6)": dpgm(eps=1e6),
        "uniform random bits (not private)": uniform,
        "independent true marginals (not private)": independent,
    }


def peer_job(name, epsilon, seed):
    """The worker's fit for smartnoise synthesizer ``name`` on seed ``seed``'s training rows (array ``D<seed>``)."""
    (Z, X, y), _ = load(seed)
    columns = [f"p{j}" for j in range(N_PIXELS)] + ["label"]
    params = {"epsilon": float(epsilon)}
    if name == "mst":
        params["delta"] = DELTA
    if name == "mwem":
        params["split_factor"] = 8
    fit = {
        "params": params,
        "data": f"D{seed}",
        "columns": columns,
        "fit_kwargs": {"categorical_columns": columns, "preprocessor_eps": 0.0},
        "sample": len(X),
        "seed": seed,
    }
    return fit, {f"D{seed}": np.hstack([X.astype(int), y[:, None]])}


def run_peer(name, epsilon, seeds, timeout=None):
    """Fit and sample smartnoise's ``name`` once per seed, in one worker process.

    Returns ``(rows, versions)``, a metrics dict per seed.  Raises PeerNotInstalled.
    """
    fits, arrays = [], {}
    for seed in seeds:
        fit, data = peer_job(name, epsilon, seed)
        fits.append(fit)
        arrays.update(data)
    result = synthesize_many("smartnoise", name, fits, arrays, timeout=timeout)
    rows = []
    for seed, out in zip(seeds, result["fits"], strict=True):
        (Z, X, y), (X_test, y_test) = load(seed)
        S = np.asarray(out["samples"], dtype=float)
        Xs, ys = S[:, :N_PIXELS], S[:, N_PIXELS].astype(int)
        rows.append(
            {
                "seed": seed,
                "pixel_pair_error": pixel_pair_error(X, Xs),
                "label_pixel_error": label_pixel_error(X, y, Xs, ys),
                "tstr": tstr(Xs, ys, X_test, y_test),
                "fit_seconds": out["fit_seconds"],
                "sample_seconds": out["sample_seconds"],
            }
        )
    return rows, result["versions"]


def read_cache(path=CACHE):
    try:
        return json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def record_peers(names, epsilons, seeds, argv, path=CACHE):
    """Run smartnoise's ``names`` and write their per-seed rows to ``path`` after every fit.

    Seeds are the outer loop, so a run cut short still has every epsilon for its first seeds.
    """
    cache = read_cache(path)
    peers = cache.setdefault("peers", {})
    command = "python benchmarks/synthetic_data.py " + " ".join(shlex.quote(a) for a in argv)
    for name in names:
        peers[name] = {
            "command": command,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.platform()}, {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} CPUs, load average at start {os.getloadavg()[0]:.1f}",
            "seeds_requested": seeds,
            "rows": {},
        }
    for seed in range(seeds):
        for eps in epsilons:
            for name in names:
                (row,), versions = run_peer(name, eps, [seed])
                cache["versions"] = versions
                peers[name]["rows"].setdefault(f"{eps:g}", []).append(row)
                # A run stopped early keeps what it finished: seeds done at every epsilon.
                peers[name]["seeds_completed"] = min(
                    len(peers[name]["rows"].get(f"{e:g}", [])) for e in epsilons
                )
                peers[name]["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
                    timespec="seconds"
                )
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                Path(path).write_text(json.dumps(cache, indent=1) + "\n")
                print(
                    f"{name} epsilon={eps:g} seed={seed}: pixel-pair {row['pixel_pair_error']:.3f}, "
                    f"label x pixel {row['label_pixel_error']:.4f}, TSTR {row['tstr']:.3f}, "
                    f"fit {row['fit_seconds']:.0f} s",
                    flush=True,
                )


def peer_rows(eps, seeds, live=LIVE_PEERS, cache=None):
    """Rows ``(eps, label, pair, label x pixel, TSTR, seconds)`` of the peers, and notes on where they come from."""
    cache = read_cache() if cache is None else cache
    rows, notes = [], []
    for name, label in PEER_LABELS.items():
        if name in live:
            try:
                got, versions = run_peer(name, eps, list(range(seeds)))
            except PeerNotInstalled as exc:
                notes.append(str(exc))
            else:
                values = np.array([[r[k] for k in METRICS] for r in got])
                secs = np.mean([r["fit_seconds"] + r["sample_seconds"] for r in got])
                version = versions.get("smartnoise-synth")
                rows.append(
                    (
                        eps,
                        f"{label} (smartnoise-synth {version}, run here)",
                        *values.mean(axis=0),
                        f"{secs:.1f}",
                    )
                )
                continue
        recorded = cache.get("peers", {}).get(name, {})
        got = recorded.get("rows", {}).get(f"{eps:g}")
        if got:
            values = np.array([[r[k] for k in METRICS] for r in got])
            secs = np.mean([r["fit_seconds"] + r["sample_seconds"] for r in got])
            version = cache.get("versions", {}).get("smartnoise-synth")
            rows.append(
                (
                    eps,
                    f"{label} (smartnoise-synth {version}, recorded {recorded['date'][:10]}, "
                    f"{len(got)} seed(s))",
                    *values.mean(axis=0),
                    f"{secs:.0f}",
                )
            )
            notes.append(f"{label} recorded by `{recorded['command']}` on {recorded['machine']}")
        elif eps in QUOTED:
            pair, lab, acc = QUOTED[eps][label]
            rows.append((eps, f"{label} (quoted from the issue, not re-run)", pair, lab, acc, "-"))
            notes.append(
                f"{label}: no recorded run; build `{build_command('smartnoise')}` and run "
                f"`python benchmarks/synthetic_data.py --record-peers {name}`"
            )
    return rows, notes


# ----------------------------------------------------------------------------
# A generated survey-like table: capacity against epsilon
# ----------------------------------------------------------------------------
#: Category counts of the generated table's columns (a survey of 9 questions).
SURVEY_SIZES = (5, 2, 3, 4, 6, 2, 3, 4, 5)
#: Training rows of the generated table (the size of the issue's survey table).
SURVEY_ROWS = 4456


def survey_table(seed, n_latent=8):
    """Rows of 9 categorical answers drawn from a latent-class model of ``n_latent`` classes.

    Returns ``(codes, one_hot, blocks)``: ``2 * SURVEY_ROWS`` rows (the first
    half trains, the second tests), their one-hot encoding and its blocks.
    """
    rng = np.random.default_rng(seed)
    n = 2 * SURVEY_ROWS
    z = rng.choice(n_latent, n, p=rng.dirichlet(np.full(n_latent, 2.0)))
    codes = []
    for m in SURVEY_SIZES:
        P = rng.dirichlet(np.full(m, 0.5), size=n_latent)
        codes.append((rng.random(n)[:, None] > np.cumsum(P[z], axis=1)).sum(axis=1).clip(0, m - 1))
    codes = np.column_stack(codes)
    one_hot = np.hstack([np.eye(m)[codes[:, j]] for j, m in enumerate(SURVEY_SIZES)])
    starts = np.cumsum((0, *SURVEY_SIZES))
    blocks = [list(range(starts[j], starts[j + 1])) for j in range(len(SURVEY_SIZES))]
    return codes, one_hot, blocks


def two_way_tv(A, B):
    """Mean over column pairs of the total variation between the two tables' 2-way contingency tables."""
    out = []
    for i, mi in enumerate(SURVEY_SIZES):
        for j in range(i + 1, len(SURVEY_SIZES)):
            mj = SURVEY_SIZES[j]
            ha, hb = np.zeros((mi, mj)), np.zeros((mi, mj))
            np.add.at(ha, (A[:, i], A[:, j]), 1.0 / len(A))
            np.add.at(hb, (B[:, i], B[:, j]), 1.0 / len(B))
            out.append(0.5 * np.abs(ha - hb).sum())
    return float(np.mean(out))


def survey_main(seeds, epsilons):
    """Print the generated survey table's 2-way error against epsilon (defaults, one class per category, noise-free)."""
    import warnings

    rows = {}
    for seed in range(seeds):
        codes, one_hot, blocks = survey_table(seed)
        train, test = one_hot[:SURVEY_ROWS], codes[SURVEY_ROWS:]
        rng = np.random.default_rng(seed)
        independent = np.column_stack(
            [rng.choice(codes[:SURVEY_ROWS, j], len(test)) for j in range(len(blocks))]
        )
        rows.setdefault(("-", "independent true marginals (not private)"), []).append(
            (two_way_tv(independent, test), 0)
        )
        rows.setdefault(("-", "the training rows themselves (not private)"), []).append(
            (two_way_tv(codes[:SURVEY_ROWS], test), 0)
        )
        for eps in [*epsilons, 1e6]:
            for label, params in (
                ("defaults", {}),
                ("one class per category (n_clusters=1)", {"n_clusters": 1}),
            ):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = DPGenerativeMixture(
                        categorical=blocks, epsilon=eps, delta=DELTA, random_state=seed, **params
                    ).fit(train)
                synthetic = np.column_stack(
                    [model.sample(len(test), random_state=seed)[:, b].argmax(axis=1) for b in blocks]
                )
                rows.setdefault((f"{eps:g}", f"DPGM {label}"), []).append(
                    (two_way_tv(synthetic, test), len(model.weights_))
                )
    print(
        f"\nGenerated survey table: {len(SURVEY_SIZES)} categorical columns {SURVEY_SIZES}, 8 latent classes, "
        f"{SURVEY_ROWS} training and {SURVEY_ROWS} test rows, every column a declared block; "
        f"mean 2-way total variation against the test rows, mean of {seeds} seed(s)"
    )
    print("| epsilon | generator | 2-way TV | classes |")
    print("|---|---|---|---|")
    for (eps, label), values in rows.items():
        tv, k = np.mean(values, axis=0)
        print(f"| {eps} | {label} | {tv:.3f} | {k:.0f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 8.0])
    parser.add_argument(
        "--record-peers",
        nargs="+",
        choices=sorted(PEER_LABELS),
        help=f"run these smartnoise peers and write their rows to {CACHE.name} (nothing else runs)",
    )
    parser.add_argument(
        "--live-peers",
        nargs="*",
        choices=sorted(PEER_LABELS),
        default=list(LIVE_PEERS),
        help="smartnoise peers to run here when their environment is built (default: mwem; "
        "the others come from the recorded run)",
    )
    parser.add_argument(
        "--table",
        choices=("digits", "survey"),
        default="digits",
        help="the binarised digits (default, with the peers) or the generated survey-like table",
    )
    args = parser.parse_args(argv)
    if args.table == "survey":
        survey_main(args.seeds, args.epsilons)
        return
    if args.record_peers:
        record_peers(args.record_peers, args.epsilons, args.seeds, sys.argv[1:] if argv is None else argv)
        return

    rows, checks, notes = [], [], []
    cache = read_cache()
    for eps in args.epsilons:
        results = {}
        for seed in range(args.seeds):
            (Z, X, y), (X_test, y_test) = load(seed)
            for name, run in generators(eps, seed).items():
                start = time.perf_counter()
                Xs, ys = run(Z, X, y)
                secs = time.perf_counter() - start
                results.setdefault(name, []).append(
                    (
                        pixel_pair_error(X, Xs),
                        label_pixel_error(X, y, Xs, ys),
                        tstr(Xs, ys, X_test, y_test),
                        secs,
                    )
                )
        for name, values in results.items():
            mean = np.mean(values, axis=0)
            rows.append((eps, name, *mean[:3], f"{mean[3]:.1f}"))
            if name.startswith("DPGM defaults") and eps in TARGETS:
                max_pair, min_tstr = TARGETS[eps]
                checks.append((eps, "pixel-pair error", mean[0], f"<= {max_pair}", mean[0] <= max_pair))
                checks.append((eps, "TSTR", mean[2], f">= {min_tstr}", mean[2] >= min_tstr))
        got, said = peer_rows(eps, args.seeds, live=args.live_peers, cache=cache)
        rows.extend(got)
        notes.extend(n for n in said if n not in notes)

    print(
        f"\nSynthetic binarised digits: 1,250 train / 537 test rows, 1,250 synthetic rows, "
        f"delta={DELTA:g}, mean of {args.seeds} seed(s); load average {os.getloadavg()[0]:.1f}"
    )
    print("| epsilon | generator | pixel-pair error | label x pixel error | TSTR | fit+sample s |")
    print("|---|---|---|---|---|---|")
    for eps, name, pair, label, acc, secs in rows:
        print(f"| {eps:g} | {name} | {pair:.3f} | {label:.4f} | {acc:.3f} | {secs} |")
    print()
    for note in notes:
        print(f"- {note}")
    print()
    for eps, metric, value, target, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}: epsilon={eps:g} defaults {metric} {value:.3f} (target {target})")


if __name__ == "__main__":
    main()
