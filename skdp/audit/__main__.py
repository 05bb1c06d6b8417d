"""``python -m skdp.audit [--all] [--runs N] [-k TEXT] [--list] [--cases FILE]``: audit the estimators' privacy claims.

Prints one row per case: the estimator, its claimed epsilon (and delta), the
empirical lower bound on epsilon (95% confidence, Clopper-Pearson), for fits
made only of Gaussian releases the Gaussian-DP ``mu`` their ledger implies
and its empirical lower bound, the number of fits per dataset and the
verdict.  The cases are the real estimators' (``skdp.audit._cases``) and
those of every ``--cases FILE``, a Python file defining ``CASES``, a list of
:class:`~skdp.audit.AuditCase` (the test suite's deliberately BROKEN
variants: ``--cases tests/_audit_broken.py``).  ``--all`` runs every case,
which is also what happens without ``-k``.  Broken variants must come out as
VIOLATION; a real estimator must not.  Exits 1 if any verdict is not the
expected one.
"""

import argparse
import sys
import time

from ._cases import CASES, load_cases, run_case


def _selected(args):
    cases = list(CASES)
    for path in args.cases:
        cases += load_cases(path)
    if args.all:
        return cases
    return [case for case in cases if args.k in case.name]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m skdp.audit", description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="run every case, --cases included (default)")
    parser.add_argument(
        "--runs",
        type=int,
        default=10_000,
        help="fits per dataset (default 10000; capped per case for slow estimators)",
    )
    parser.add_argument("-k", default="", help="only cases whose name contains this text")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument(
        "--cases",
        action="append",
        default=[],
        metavar="FILE",
        help="also run the CASES of this Python file (repeatable), e.g. tests/_audit_broken.py",
    )
    args = parser.parse_args(argv)
    cases = _selected(args)
    if args.list:
        for case in cases:
            print(f"{case.estimator:<18} {case.name}{'  [broken variant]' if case.broken else ''}")
        return 0
    header = (
        f"{'estimator':<22} {'case':<66} {'claimed eps':>11} {'delta':>7} {'lower bound':>11} "
        f"{'claimed mu':>10} {'mu lower':>8} {'runs':>6}  {'verdict':<10} {'expected':<10}"
    )
    print(header)
    print("-" * len(header))
    wrong = 0
    for case in cases:
        start = time.perf_counter()
        n_runs = min(args.runs, case.max_runs or args.runs)
        result = run_case(case, n_runs)
        expected = "VIOLATION" if case.broken else "consistent"
        ok = result.verdict == expected
        wrong += not ok
        mu, mu_lower = (
            ("-", "-")
            if result.claimed_mu is None
            else (f"{result.claimed_mu:.3f}", f"{result.mu_lower_bound:.3f}")
        )
        print(
            f"{case.estimator:<22} {case.name:<66} {result.claimed_epsilon:>11.3f} {result.claimed_delta:>7.0e} "
            f"{result.epsilon_lower_bound:>11.3f} {mu:>10} {mu_lower:>8} {n_runs:>6}  {result.verdict:<10} "
            f"{expected:<10}"
            f"{'' if ok else '  <-- WRONG'}  ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    flagged = sum(case.broken for case in cases)
    print(f"\n{len(cases)} cases ({flagged} broken variants); {wrong} unexpected verdict(s).")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
