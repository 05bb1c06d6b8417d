"""Foulds et al. (2016), Figure 2: L1 error of private posterior samples.

Set-up of the paper: Bernoulli(p = 0.1) data, epsilon = 0.1, OPS truncation
a0 = 0.05, N from 10 to 10^4, 1000 repeats; the error of one posterior sample
``|p_sample - p|`` averaged over the repeats, for

* ``laplace``: DPBetaBernoulli(mechanism="laplace", count_release="paper"),
  a sample from the privatised posterior,
* ``ops``: DPBetaBernoulli(mechanism="ops"), the one released posterior sample,
* ``non-private``: a sample from the exact posterior Beta(1 + n+, 1 + n-).

Expected shape (the paper): OPS wins only around N = 10; Laplace then
approaches the non-private curve while OPS behaves like a posterior with fewer
observations.

Usage: ``python benchmarks/beta_bernoulli.py [--quick]``
"""

import argparse
import os
import time

import numpy as np

from skdp.bayes import DPBetaBernoulli

P_TRUE, EPSILON, A0 = 0.1, 0.1, 0.05


#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)


def l1_errors(n, repeats, seed):
    rng = np.random.default_rng(seed)
    laplace, ops, exact = [], [], []
    for _ in range(repeats):
        X = rng.binomial(1, P_TRUE, size=(n, 1))
        # The paper's release of both counts (count_release="paper"), as in its Figure 2.
        m = DPBetaBernoulli(
            epsilon=EPSILON, count_release="paper", random_state=int(rng.integers(2**31))
        ).fit(X)
        laplace.append(abs(m.posterior_sample_[0] - P_TRUE))
        m = DPBetaBernoulli(
            epsilon=EPSILON, mechanism="ops", truncation=A0, random_state=int(rng.integers(2**31))
        )
        ops.append(abs(m.fit(X).posterior_sample_[0] - P_TRUE))
        n_plus = X.sum()
        exact.append(abs(rng.beta(1 + n_plus, 1 + n - n_plus) - P_TRUE))
    return np.mean(laplace), np.mean(ops), np.mean(exact)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 repeats instead of 1000")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = parser.parse_args()
    repeats = 100 if args.quick else 1000
    sizes = [10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]

    start = time.perf_counter()
    rows = [(n, *l1_errors(n, repeats, seed=n)) for n in sizes]
    elapsed = time.perf_counter() - start

    print(
        f"Foulds et al. Fig. 2: mean L1 error of one posterior sample (p={P_TRUE}, eps={EPSILON}, a0={A0}, "
        f"{repeats} repeats)"
    )
    print(
        f"{'N':>6} {'laplace':>9} {'ops':>9} {'non-private':>12} {'laplace/non-priv':>17} {'ops/non-priv':>13}  best private"
    )
    for n, lap, ops, exact in rows:
        best = "ops" if ops < lap else "laplace"
        print(
            f"{n:>6} {lap:>9.4f} {ops:>9.4f} {exact:>12.4f} {lap / exact:>17.2f} {ops / exact:>13.2f}  {best}"
        )
    print(f"({elapsed:.1f} s)")

    os.makedirs(args.out, exist_ok=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r[0] for r in rows]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for i, label in enumerate(("Laplace mechanism", "OPS (exponential mechanism)", "non-private posterior")):
        ax.loglog(ns, [r[i + 1] for r in rows], marker="o", label=label)
    ax.set_xlabel("number of observations N")
    ax.set_ylabel("mean L1 error of a posterior sample")
    ax.set_title(f"Beta-Bernoulli, p={P_TRUE}, epsilon={EPSILON}")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(args.out, "beta_bernoulli_fig2.png")
    fig.savefig(path, dpi=120)
    print(f"plot saved to {path}")


if __name__ == "__main__":
    main()
