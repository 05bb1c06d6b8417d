"""
Quickstart: private models next to their non-private baselines
==============================================================

Fits every skdp estimator that exists on data shipped with scikit-learn and
prints, for each, its utility, the non-private baseline's utility, and the
privacy guarantee ``privacy_spent_`` of the fitted model.

Run with ``python examples/quickstart.py``.
"""

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from skdp import BudgetAccountant
from skdp.bayes import DPBetaBernoulli


def _row(name, score, baseline, spent):
    eps = f"{spent.epsilon:.3g}"
    return f"{name:<40} {score:>12.4f} {baseline:>12.4f}   (epsilon={eps}, delta={spent.delta:.0e})"


def beta_bernoulli_rows(budget):
    # Binarised digits images: each pixel is a Bernoulli feature.
    X = (load_digits().data > 7).astype(int)
    X_train, X_test = train_test_split(X, test_size=0.3, random_state=0)
    # Non-private closed form: the exact conjugate posterior mean.
    p = (X_train.sum(0) + 1) / (len(X_train) + 2)
    baseline = float(np.mean(X_test @ np.log(p) + (1 - X_test) @ np.log1p(-p)))
    rows = []
    for mechanism in ("laplace", "ops"):
        model = DPBetaBernoulli(epsilon=1.0, mechanism=mechanism, accountant=budget, random_state=0)
        model.fit(X_train)
        rows.append(
            _row(
                f"DPBetaBernoulli({mechanism}) on digits", model.score(X_test), baseline, model.privacy_spent_
            )
        )
    return rows


def main():
    budget = BudgetAccountant(epsilon=10.0)
    header = f"{'model (metric: test log-likelihood/row)':<40} {'private':>12} {'non-private':>12}   privacy_spent_"
    print(header)
    print("-" * len(header))
    for line in beta_bernoulli_rows(budget):
        print(line)
    print(f"\nTotal spent on the shared BudgetAccountant: {budget.spent}")


if __name__ == "__main__":
    main()
