"""
DP-SGD classifier in a Pipeline, tuned by GridSearchCV over epsilon
===================================================================

:class:`~skdp.nn.DPNeuralNetClassifier` is a skorch net trained by DP-SGD
(Abadi et al. 2016): Poisson-sampled batches, per-example gradients clipped to
``clip_norm`` and Gaussian noise calibrated so that ``max_epochs`` epochs
spend exactly ``epsilon``. It is a scikit-learn estimator, so it goes in a
``Pipeline`` and ``GridSearchCV`` searches over its ``epsilon`` like any other
hyperparameter.

Two privacy points this example makes:

* The preprocessing must not look at the data: a ``StandardScaler`` fitted on
  the training set would leak its means and variances. Pixels of the digits
  lie in ``[0, 16]``, a public fact, so a fixed ``FunctionTransformer`` scales
  them to ``[0, 1]``.
* Every fit of the search spends budget: 3 values of epsilon x 3 folds plus
  the refit. A shared :class:`~skdp.privacy.BudgetAccountant` records them
  all, because ``clone`` shares the ledger instead of copying it. DP-SGD's
  guarantee refers to add/remove neighbours, so the budget is declared under
  that relation. (The *choice* of the best epsilon from cross-validation
  scores is itself not private; the fits are.)
"""

import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from skdp.nn import DPNeuralNetClassifier
from skdp.privacy import BudgetAccountant

torch.set_num_threads(1)
torch.manual_seed(0)
start = time.perf_counter()

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def scale_pixels(X):
    """Map the public pixel range [0, 16] to [0, 1] (no statistic of the data)."""
    return (np.asarray(X) / 16.0).astype(np.float32)


# %%
# The pipeline and the search
# ---------------------------
# ``classes`` is declared (the ten digits are public); leaving it out would
# read the label set off ``y`` and raise a PrivacyLeakWarning.

budget = BudgetAccountant(epsilon=20.0, delta=1e-3, neighbouring="add_remove")
net = DPNeuralNetClassifier(
    classes=list(range(10)),
    module__hidden_units=64,
    clip_norm=1.0,
    lr=1.0,
    max_epochs=10,
    batch_size=200,
    delta=1e-5,
    accountant=budget,
    verbose=0,
    random_state=0,
)
pipe = make_pipeline(FunctionTransformer(scale_pixels), net)
search = GridSearchCV(pipe, {"dpneuralnetclassifier__epsilon": [0.3, 1.0, 3.0]}, cv=3)
search.fit(X_train, y_train)

epsilons = np.array(search.cv_results_["param_dpneuralnetclassifier__epsilon"], dtype=float)
cv_mean = search.cv_results_["mean_test_score"]
cv_std = search.cv_results_["std_test_score"]
best = search.best_estimator_[-1]
test_accuracy = search.score(X_test, y_test)
print(f"best epsilon {best.epsilon}: test accuracy {test_accuracy:.3f}, privacy_spent_ {best.privacy_spent_}")
print(f"the search charged {len(budget.history)} fits to the budget: {budget}")

# %%
# Non-private baseline
# --------------------
# The same architecture (one hidden layer of 64 ReLU units) without clipping
# or noise.

baseline = make_pipeline(
    FunctionTransformer(scale_pixels), MLPClassifier(hidden_layer_sizes=(64,), max_iter=1000, random_state=0)
)
baseline_accuracy = baseline.fit(X_train, y_train).score(X_test, y_test)
print(f"non-private MLP test accuracy {baseline_accuracy:.3f}")

# %%
# Accuracy against epsilon, and what the search spent
# ---------------------------------------------------

fig, (ax, ax_budget) = plt.subplots(1, 2, figsize=(9, 3.6), gridspec_kw={"width_ratios": [3, 2]})
ax.errorbar(epsilons, cv_mean, yerr=cv_std, marker="o", capsize=3, label="DP-SGD, 3-fold CV accuracy")
ax.scatter([best.epsilon], [test_accuracy], color="tab:red", zorder=3, label="refit on all, test accuracy")
ax.axhline(baseline_accuracy, color="k", ls="--", lw=1, label="non-private MLP, test accuracy")
ax.set_xscale("log")
ax.set_xticks(epsilons, [f"{e:g}" for e in epsilons])
ax.minorticks_off()
ax.set_xlabel("epsilon (add/remove, delta = 1e-5)")
ax.set_ylabel("accuracy")
ax.set_ylim(0, 1.02)
ax.legend(loc="lower right", fontsize=8)

spends = np.array([eps for eps, _, _ in budget.history])
ax_budget.bar(np.arange(1, len(spends) + 1), np.cumsum(spends), color="tab:blue")
ax_budget.axhline(budget.epsilon, color="tab:red", lw=1, label="budget")
ax_budget.set_xlabel("fit number (3 folds x 3 epsilons + refit)")
ax_budget.set_ylabel("cumulative epsilon")
ax_budget.legend(fontsize=8)
fig.tight_layout()
print(f"example ran in {time.perf_counter() - start:.0f} s")
plt.show()
