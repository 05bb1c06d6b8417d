"""Speed cost of secure (exact, grid-based) noise against floating-point sampling.

Usage: ``python benchmarks/secure_noise.py [--quick]``
"""

import argparse
import functools
import time

import numpy as np

from skdp.bayes import DPBetaBernoulli
from skdp.privacy import GaussianMechanism, LaplaceMechanism, PrivacyLedger

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)


def _time(fn, repeats=3):
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 2_000 if args.quick else 20_000
    rng = np.random.default_rng(0)
    X = rng.binomial(1, 0.3, size=(10_000, 20))
    cases = {
        f"Laplace release, {n} values": lambda secure: LaplaceMechanism(1.0, 2.0).release(
            np.zeros(n), rng, PrivacyLedger(secure_noise=secure)
        ),
        f"Gaussian release, {n} values": lambda secure: GaussianMechanism(1.0, 2.0).release(
            np.zeros(n), rng, PrivacyLedger(secure_noise=secure)
        ),
        "DPBetaBernoulli fit, 10000 x 20": lambda secure: DPBetaBernoulli(
            random_state=0, secure_noise=secure
        ).fit(X),
    }
    print(f"{'operation':<34} {'float (s)':>10} {'secure (s)':>11} {'secure/float':>13}")
    for name, fn in cases.items():
        # The setting is explicit: the fit's ledger (mechanisms) or the estimator's parameter.
        fast = _time(functools.partial(fn, False))
        slow = _time(functools.partial(fn, True))
        print(f"{name:<34} {fast:>10.4f} {slow:>11.4f} {slow / fast:>13.1f}")


if __name__ == "__main__":
    main()
