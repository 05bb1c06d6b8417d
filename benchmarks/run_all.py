"""Run every benchmark and write one Markdown report.

Usage (from the repository root)::

    python -m benchmarks --quick           # each benchmark's quick mode (minutes)
    python -m benchmarks --full            # the full protocols of the issues (long)
    python -m benchmarks --quick dpsgd hmm # only benchmarks whose name contains one of these
    python benchmarks/run_all.py --quick   # the same, as a script

Every ``benchmarks/*.py`` script (except this runner and the ``_*.py``
helpers) is discovered and run in its own process, so a benchmark added by a
later issue is picked up without editing this file, and one that crashes or
runs past ``--timeout`` is reported as failed without stopping the others.
A script declares its quick mode as a module constant, ``QUICK_ARGS =
("--quick",)`` (the arguments ``--quick`` passes it; without one it runs as
is), and the peers it compares against in their own environments as
``PEERS = ("diffprivlib",)``; both are read from the source with ``ast``,
without importing the script.  Peers whose pins conflict with skdp's run in
``benchmarks/.venvs/NAME``, built by ``python benchmarks/peers/make_env.py
NAME`` (see ``benchmarks/_peers.py``); a peer that is not built is a "not
installed" line of the report, never a crash.

Each script prints its own tables (ours vs peer vs non-private, measured in the
same run, with ratios) and saves its plots in ``benchmarks/results/``; the
runner collects the tables and the plots written during the run into
``benchmarks/results/report.md``, so the project's claims are reproduced by
one command. A progress bar (tqdm if installed, else one line per script)
shows which benchmark runs and for how long.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _peers  # noqa: E402

ROOT = HERE.parent
RESULTS = HERE / "results"
RUNS = RESULTS / "runs"  # one JSON record per benchmark run, for --report-only
_NOT_BENCHMARKS = {"run_all.py", "__main__.py", "__init__.py"}
_PLOT_SUFFIXES = (".png", ".svg", ".jpg")


def discover(only=()):
    """Names of the benchmark scripts in ``benchmarks/``, sorted, filtered by ``only``."""
    names = sorted(
        p.stem for p in HERE.glob("*.py") if p.name not in _NOT_BENCHMARKS and not p.name.startswith("_")
    )
    return [n for n in names if not only or any(o in n for o in only)]


def declared(name, attribute, default=()):
    """The literal a benchmark script assigns to module constant ``attribute``, else ``default``.

    Read from the source with ``ast`` (no import: the scripts import torch,
    dask, ...), so the declaration must be a literal such as ``("--quick",)``.
    """
    tree = ast.parse((HERE / f"{name}.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == attribute for t in targets):
            return tuple(ast.literal_eval(value))
    return tuple(default)


def quick_args(name):
    """Arguments of the quick mode of benchmark ``name`` (its ``QUICK_ARGS``; none if undeclared)."""
    return declared(name, "QUICK_ARGS")


def _command(name, full):
    args = [] if full else list(quick_args(name))
    return [sys.executable, str(HERE / f"{name}.py"), *args]


def peer_status(names):
    """``{peer: status}`` for every peer the benchmarks ``names`` declare (``PEERS``)."""
    peers = sorted({p for n in names for p in declared(n, "PEERS")})
    return {p: _peers.status(p) for p in peers}


class _Progress:
    """tqdm over the scripts when available, plain lines otherwise."""

    def __init__(self, names):
        self.total = len(names)
        try:
            from tqdm import tqdm
        except ImportError:  # progress bars are a nicety, not a dependency
            self.bar = None
        else:
            self.bar = tqdm(total=self.total, desc="benchmarks", unit="script", dynamic_ncols=True)
        self.done = 0

    def running(self, name, elapsed):
        if self.bar is not None:
            self.bar.set_postfix_str(f"{name} ({elapsed:.0f} s)")

    def start(self, name):
        if self.bar is None:
            print(f"[{self.done + 1}/{self.total}] {name} ...", file=sys.stderr, flush=True)
        else:
            self.running(name, 0.0)

    def finish(self, name, status, elapsed):
        self.done += 1
        if self.bar is None:
            print(
                f"[{self.done}/{self.total}] {name}: {status} ({elapsed:.0f} s)", file=sys.stderr, flush=True
            )
        else:
            self.bar.write(f"{name}: {status} ({elapsed:.0f} s)")
            self.bar.update(1)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def run_one(name, full, timeout, progress):
    """Run one benchmark script; return a dict describing the run."""
    cmd = _command(name, full)
    env = dict(
        os.environ,
        MPLBACKEND="Agg",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    start_wall, start = time.time(), time.perf_counter()
    progress.start(name)
    out_path, err_path = RUNS / f".{name}.stdout", RUNS / f".{name}.stderr"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT, env=env, text=True)
        timed_out = False
        while proc.poll() is None:
            elapsed = time.perf_counter() - start
            if timeout and elapsed > timeout:
                proc.kill()
                proc.wait()
                timed_out = True
                break
            progress.running(name, elapsed)
            time.sleep(1.0)
    elapsed = time.perf_counter() - start
    stdout, stderr = out_path.read_text(errors="replace"), err_path.read_text(errors="replace")
    out_path.unlink()
    err_path.unlink()
    if timed_out:
        status = f"FAILED (timed out after {timeout:.0f} s)"
    elif proc.returncode:
        status = f"FAILED (exit {proc.returncode})"
    else:
        status = "ok"
    progress.finish(name, status, elapsed)
    return {
        "name": name,
        "command": " ".join(["python", f"benchmarks/{name}.py", *cmd[2:]]),
        "status": status,
        "seconds": elapsed,
        "stdout": stdout,
        "stderr": stderr,
        "plots": attribute_plots(name, stdout, start_wall),
        "peers": list(declared(name, "PEERS")),
        # A script rerun on a later commit (``python -m benchmarks NAME``, then
        # ``--report-only``) says so in its section.
        "revision": _git_revision(),
        "date": datetime.datetime.fromtimestamp(start_wall).isoformat(timespec="seconds"),
    }


def attribute_plots(name, stdout, since):
    """Plots of benchmark ``name``: those its output names, else ``name*`` files written since ``since``.

    Other processes may write into ``results/`` at the same time (another
    benchmark run, a developer's script), so a file is not attributed to a
    benchmark merely because it changed during its run.
    """
    present = sorted(p.name for p in RESULTS.iterdir() if p.suffix in _PLOT_SUFFIXES)
    named = [p for p in present if p in stdout]
    if named:
        return named
    return [p for p in present if p.startswith(name) and (RESULTS / p).stat().st_mtime >= since - 1]


def _markdown_output(text):
    """Stdout as Markdown: ``|``-tables verbatim, everything else in code blocks."""
    lines, blocks = text.rstrip().splitlines(), []
    for line in lines:
        kind = "table" if line.lstrip().startswith("|") else "text"
        if blocks and blocks[-1][0] == kind:
            blocks[-1][1].append(line)
        else:
            blocks.append((kind, [line]))
    parts = []
    for kind, block in blocks:
        if kind == "table":
            parts += ["", *[b.strip() for b in block], ""]
        elif any(b.strip() for b in block):
            parts += ["```", *block, "```"]
    return parts or ["(no output)"]


def _load():
    try:
        return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except (AttributeError, OSError):
        return "load average unknown"


def _git_revision():
    """``abc1234`` (``+ uncommitted changes`` when the tree is dirty), or ``unknown``."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + (" + uncommitted changes" if dirty else "")


def write_report(
    runs,
    mode,
    started,
    load_before,
    path,
    note=None,
    peers=None,
    command=None,
    load_after=None,
    revision=None,
):
    """Write the Markdown report of ``runs`` to ``path``.

    ``note`` is a paragraph put under the title (e.g. "quick run on a shared
    machine"); ``peers`` maps each peer to its status (:func:`peer_status`);
    ``command`` is the command line that made the runs; ``load_after`` and
    ``revision`` default to the present load and commit.
    """
    command = command or f"python -m benchmarks --{mode}"
    header_revision = revision or _git_revision()
    lines = ["# skdp benchmark report", ""]
    if note:
        lines += [f"**{note}**", ""]
    lines += [
        f"Generated {started.isoformat(timespec='seconds')} by `{command}` at commit "
        f"{header_revision} on {platform.platform()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores; "
        f"{load_before} before the run, {load_after or _load()} after it (timings are noisy under load).",
        "",
        "Each section is one script of `benchmarks/`: its command, the tables it printed (ours vs the "
        "named peer vs the non-private baseline, measured in the same run) and the plots it saved "
        "(in `benchmarks/results/`, not committed).",
        "",
    ]
    if peers:
        lines += ["| peer | environment |", "|---|---|"]
        lines += [f"| {p} | {status} |" for p, status in sorted(peers.items())]
        lines.append("")
    lines += [
        "| benchmark | status | time (s) | peers | plots |",
        "|---|---|---:|---|---|",
    ]
    for r in runs:
        lines.append(
            f"| [{r['name']}](#{r['name'].replace('_', '-')}) | {r['status']} | {r['seconds']:.0f} "
            f"| {', '.join(r.get('peers', [])) or '-'} | {len(r['plots'])} |"
        )
    lines.append(f"| total | | {sum(r['seconds'] for r in runs):.0f} | | |")
    lines.append("")
    for r in runs:
        where = ""
        if r.get("revision") and r["revision"] != header_revision:
            where = f", run {r.get('date', '')} at commit {r['revision']}"
        lines += [f"## {r['name']}", "", f"`{r['command']}`: {r['status']}, {r['seconds']:.0f} s{where}", ""]
        lines += _markdown_output(r["stdout"])
        lines.append("")
        if r["status"] != "ok":
            lines += ["stderr (last 3000 characters):", "", "```", r["stderr"].rstrip()[-3000:], "```", ""]
        lines += [f"![{p}]({Path(os.path.relpath(RESULTS / p, path.parent)).as_posix()})" for p in r["plots"]]
        lines.append("")
    path.write_text(scrub_paths("\n".join(lines)), encoding="utf-8")


def scrub_paths(text, root=ROOT):
    """``text`` without this machine's paths: the repository root dropped, peer environments by name.

    The scripts print where they saved plots (absolute paths) and a peer's
    interpreter may be given by an absolute ``SKDP_PEER_PYTHON_*`` path; a
    committed report names them relative to the repository.
    """
    text = text.replace(str(root) + os.sep, "")
    return re.sub(r"(?<![\w.])/\S*?/(benchmarks/\.venvs/)", r"\1", text)


def _command_line(argv, full):
    """``python -m benchmarks ...`` as typed, without ``--note`` and its text."""
    kept, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--note":
            skip = True
        elif not a.startswith("--note="):
            kept.append(a)
    if "--full" not in kept and "--quick" not in kept:
        kept.insert(0, "--full" if full else "--quick")
    return " ".join(["python -m benchmarks", *kept])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="run each benchmark with its QUICK_ARGS (default)")
    mode.add_argument("--full", action="store_true", help="run the full protocols")
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds before a script is killed (default: none)"
    )
    parser.add_argument("--list", action="store_true", help="list the benchmarks that would run, and exit")
    parser.add_argument("--output", type=Path, default=RESULTS / "report.md", help="report path")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rebuild the report from the runs saved in results/runs/ without running anything",
    )
    parser.add_argument(
        "--note", default=None, help="a line put under the report's title (e.g. where and how it was run)"
    )
    parser.add_argument("only", nargs="*", help="run only benchmarks whose name contains one of these")
    args = parser.parse_args(argv)
    names = discover(args.only)
    if args.list:
        for n in names:
            peers = "".join(f"  [{p}: {_peers.status(p)}]" for p in declared(n, "PEERS"))
            print(" ".join(_command(n, args.full)[1:]) + peers)
        return 0
    if not names:
        print(f"no benchmark matches {args.only}", file=sys.stderr)
        return 1
    RUNS.mkdir(parents=True, exist_ok=True)
    session_path = RUNS / "_session.json"  # when, where and how the saved runs were made
    if args.report_only:
        runs = [json.loads((RUNS / f"{n}.json").read_text()) for n in names if (RUNS / f"{n}.json").exists()]
        if session_path.exists():
            session = json.loads(session_path.read_text())
        else:
            session = {
                "started": datetime.datetime.now().isoformat(),
                "load_before": "rebuilt from the runs saved in results/runs/ (each section gives its own time)",
                "load_after": None,
                "revision": None,
                "mode": "full" if args.full else "quick",
                "command": None,
            }
    else:
        session = {
            "started": datetime.datetime.now().isoformat(),
            "load_before": _load(),
            "mode": "full" if args.full else "quick",
            # The command as typed, less the note (printed under the title).
            "command": _command_line(argv if argv is not None else sys.argv[1:], args.full),
            "revision": _git_revision(),
        }
        progress = _Progress(names)
        try:
            runs = []
            for name in names:
                runs.append(run_one(name, args.full, args.timeout, progress))
                # Saved as it finishes, so an interrupted run keeps its results.
                (RUNS / f"{name}.json").write_text(json.dumps(runs[-1], indent=1))
        finally:
            progress.close()
        session["load_after"] = _load()
        session_path.write_text(json.dumps(session, indent=1))
    write_report(
        runs,
        session["mode"],
        datetime.datetime.fromisoformat(session["started"]),
        session["load_before"],
        args.output,
        args.note,
        peer_status(names),
        session["command"],
        session["load_after"],
        session["revision"],
    )
    failed = [r["name"] for r in runs if r["status"] != "ok"]
    print(f"report written to {args.output}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
