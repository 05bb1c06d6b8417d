"""``python -m skdp.audit [--all] [--runs N]``: audit the estimators' privacy claims.

Prints one row per case: the estimator, its claimed epsilon, the empirical
lower bound (95% confidence) and the verdict.  Broken variants must come out
as VIOLATION; a real estimator must not.  Exits 1 if any verdict is wrong.
"""

import argparse
import contextlib
import sys
import time

from ._cases import CASES
from ._runner import audit


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m skdp.audit", description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="run every case (the default)")
    parser.add_argument("--runs", type=int, default=10_000, help="fits per dataset (default 10000)")
    parser.add_argument("-k", default="", help="only cases whose name contains this text")
    args = parser.parse_args(argv)
    print(f"{'case':<58} {'claimed eps':>11} {'lower bound':>11}  {'runs':>6}  verdict      expected")
    wrong = 0
    for case in CASES:
        if args.k not in case.name:
            continue
        start = time.perf_counter()
        X, X_neighbour = case.make_data()
        with case.patch() if case.patch else contextlib.nullcontext():
            n_runs = min(args.runs, case.max_runs or args.runs)
            result = audit(case.make_estimator(), X, X_neighbour, case.statistic, n_runs=n_runs)
        expected = "VIOLATION" if case.broken else "consistent"
        ok = result.verdict == expected
        wrong += not ok
        print(
            f"{case.name:<58} {result.claimed_epsilon:>11.3f} {result.epsilon_lower_bound:>11.3f}  {n_runs:>6}  "
            f"{result.verdict:<12} {expected}{'' if ok else '   <-- WRONG'}  ({time.perf_counter() - start:.0f} s)"
        )
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
