"""
Tracking one privacy budget across a workflow
=============================================

A data owner grants an analyst a total budget of epsilon = 2 (delta = 1e-4)
on a dataset. Every private fit of the analysis draws from that budget through
one shared :class:`~skdp.privacy.BudgetAccountant`:

1. exploration: per-pixel ink probabilities with
   :class:`~skdp.bayes.DPBetaBernoulli`;
2. clustering with :class:`~skdp.cluster.DPKMeans`;
3. model selection: ``cross_val_score`` of a
   :class:`~skdp.mixture.DPGaussianMixture`, whose three folds each spend;
4. the final mixture;
5. one more fit that asks for more than remains, and is refused with
   :class:`~skdp.exceptions.BudgetExceededError` *before* it touches the data.

The ledger here is a :class:`~skdp.privacy.SQLiteBudgetAccountant`: the spends
live in a database file, so a later session (or several processes at once)
keeps drawing from the same budget. Fits compose by basic composition on the
ledger: the total is the sum of the fits' ``privacy_spent_``.
"""

import os
import shutil
import tempfile

import matplotlib.pyplot as plt
from sklearn.datasets import load_digits
from sklearn.model_selection import cross_val_score

from skdp.bayes import DPBetaBernoulli
from skdp.cluster import DPKMeans
from skdp.exceptions import BudgetExceededError
from skdp.mixture import DPGaussianMixture
from skdp.privacy import SQLiteBudgetAccountant

X, _ = load_digits(return_X_y=True)
X = X / 16.0  # the public pixel range [0, 16] mapped to [0, 1]
# Declared from public knowledge, never read off the data: 64 pixels in [0, 1].
DATA_NORM = 8.0

workdir = tempfile.mkdtemp()
ledger_path = os.path.join(workdir, "budgets.db")
budget = SQLiteBudgetAccountant(ledger_path, epsilon=2.0, delta=1e-4, dataset="digits")
stages = []  # (stage name, number of ledger entries it added)


def record(stage, before):
    stages.append((stage, len(budget.history) - before))


# %%
# The workflow
# ------------

before = len(budget.history)
ink = DPBetaBernoulli(epsilon=0.2, accountant=budget, random_state=0).fit(X > 0.5)
record("exploration\nDPBetaBernoulli", before)

before = len(budget.history)
kmeans = DPKMeans(n_clusters=10, epsilon=0.5, data_norm=DATA_NORM, accountant=budget, random_state=0).fit(X)
record("clustering\nDPKMeans", before)

before = len(budget.history)
gmm = DPGaussianMixture(
    n_components=10,
    covariance_type="spherical",
    epsilon=0.2,
    data_norm=DATA_NORM,
    accountant=budget,
    random_state=0,
)
scores = cross_val_score(gmm, X, cv=3)
record("model selection\n3-fold CV", before)

before = len(budget.history)
final = DPGaussianMixture(
    n_components=10,
    covariance_type="spherical",
    epsilon=0.5,
    data_norm=DATA_NORM,
    accountant=budget,
    random_state=1,
).fit(X)
record("final\nDPGaussianMixture", before)

refused = 1.0  # the epsilon the last fit asks for
try:
    DPKMeans(n_clusters=10, epsilon=refused, data_norm=DATA_NORM, accountant=budget).fit(X)
except BudgetExceededError as error:
    print("refused:", error)

print(budget)
for eps, delta, label in budget.history:
    print(f"  {label:20s} epsilon={eps:.3f} delta={delta:.1e}")

# %%
# A later session opens the same ledger and sees every spend
# ----------------------------------------------------------

later = SQLiteBudgetAccountant(ledger_path, dataset="digits")
print(f"reopened: spent {later.spent}, remaining {later.remaining()}")

# %%
# The figure
# ----------
# Left: the budget drawn down stage by stage (each block one fit), and the
# refused request. Right: the released ink probabilities (posterior means),
# free to reuse: post-processing costs no budget.

history = budget.history
shutil.rmtree(workdir)  # the example's ledger file is not needed any more
fig, (ax, ax_ink) = plt.subplots(1, 2, figsize=(9.5, 3.8), gridspec_kw={"width_ratios": [3, 1.3]})
bottom, entry, colors = 0.0, 0, plt.cm.tab10.colors
for i, (_, n_fits) in enumerate(stages):
    for _ in range(n_fits):
        eps = history[entry][0]
        ax.bar(i, eps, bottom=bottom, color=colors[i], edgecolor="white")
        bottom += eps
        entry += 1
ax.bar(len(stages), refused, bottom=bottom, color="none", edgecolor="tab:red", hatch="//")
ax.text(len(stages), bottom + refused / 2, "refused", ha="center", va="center", color="tab:red", fontsize=8)
ax.axhline(budget.epsilon, color="tab:red", lw=1.5)
ax.text(-0.4, budget.epsilon + 0.04, f"budget epsilon = {budget.epsilon:g}", color="tab:red", fontsize=8)
ax.set_xticks(range(len(stages) + 1), [s for s, _ in stages] + ["DPKMeans\nepsilon = 1"], fontsize=7)
ax.set_ylabel("cumulative epsilon spent")
ax.set_ylim(0, 3.2)

ax_ink.imshow(
    (ink.posterior_alpha_ / (ink.posterior_alpha_ + ink.posterior_beta_)).reshape(8, 8), cmap="gray_r"
)
ax_ink.set_title("P(pixel inked),\nepsilon = 0.2", fontsize=9)
ax_ink.set_axis_off()
fig.tight_layout()
plt.show()
