"""Run every benchmark and write one Markdown report.

Usage::

    python benchmarks/run_all.py --quick      # each benchmark's quick mode (minutes)
    python benchmarks/run_all.py --full       # the full protocols of the issues (long)

Each benchmark script prints its own table (ours vs peer vs non-private,
measured in the same run, with ratios) and saves its plots in
``benchmarks/results/``; this runner collects the tables and the plots into
``benchmarks/results/report.md``, so the project's claims are reproduced by one
command.
"""

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def _benchmarks(only):
    names = sorted(
        f[:-3] for f in os.listdir(HERE) if f.endswith(".py") and not f.startswith(("_", "run_all"))
    )
    return [n for n in names if not only or any(o in n for o in only)]


def _progress(items):
    try:
        from tqdm import tqdm
    except ImportError:  # progress bars are a nicety
        return items
    return tqdm(items, desc="benchmarks", unit="script")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="pass --quick to every benchmark (default)")
    mode.add_argument("--full", action="store_true", help="run the full protocols")
    parser.add_argument("only", nargs="*", help="run only benchmarks whose name contains one of these")
    args = parser.parse_args(argv)
    os.makedirs(RESULTS, exist_ok=True)
    sections, failures = [], []
    for name in _progress(_benchmarks(args.only)):
        before = set(os.listdir(RESULTS))
        cmd = [sys.executable, os.path.join(HERE, f"{name}.py")] + ([] if args.full else ["--quick"])
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        new_plots = sorted(f for f in set(os.listdir(RESULTS)) - before if f.endswith(".png"))
        plots = new_plots or sorted(
            f for f in os.listdir(RESULTS) if f.startswith(name) and f.endswith(".png")
        )
        status = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode})"
        if proc.returncode:
            failures.append(name)
        body = [
            f"## {name}",
            "",
            f"`{' '.join(['python', f'benchmarks/{name}.py'] + cmd[2:])}` — {status}, {elapsed:.0f} s",
            "",
        ]
        body += ["```", proc.stdout.rstrip() or "(no output)", "```", ""]
        if proc.returncode:
            body += ["```", proc.stderr.rstrip()[-3000:], "```", ""]
        body += [f"![{p}]({p})" for p in plots] + [""]
        sections.append("\n".join(body))
    header = [
        "# skdp benchmark report",
        "",
        f"Generated {datetime.datetime.now().isoformat(timespec='seconds')} on {platform.platform()}, "
        f"Python {platform.python_version()}, {os.cpu_count()} cores, mode: {'full' if args.full else 'quick'}.",
        "",
    ]
    path = os.path.join(RESULTS, "report.md")
    with open(path, "w") as fh:
        fh.write("\n".join(header + sections))
    print(f"report written to {path}" + (f"; failed: {', '.join(failures)}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
