"""
DP-SGD classifier, its epsilon chosen by a private grid search
==============================================================

:class:`~skdp.nn.DPNeuralNetClassifier` is a skorch net trained by DP-SGD
(Abadi et al. 2016): Poisson-sampled batches, per-example gradients clipped to
``clip_norm`` and Gaussian noise calibrated so that ``max_epochs`` epochs
spend exactly ``epsilon``.  Which epsilon to train with is a hyperparameter
like any other, but choosing it by scikit-learn's ``GridSearchCV`` would pick
the best candidate by validation scores computed exactly on the private rows:
the choice itself would be released unaccounted.
:class:`~skdp.model_selection.DPGridSearchCV` makes the choice private too
(Papernot & Steinke 2022: a random candidate, repeated a random number of
times, each scored with noise, only the best released), and the whole search
(every trial, the scores, the pick and the refit) has one ``privacy_spent_``
within the search's own ``epsilon``.

The preprocessing does not look at the data either: pixels of the digits lie
in ``[0, 16]``, a public fact, so they are scaled by that constant.
DP-SGD's guarantee refers to add/remove neighbours, but a search's refers to
replace-one neighbours (it splits the rows into training and validation
parts, and selects among trials): the search converts its trials' and its
refit's add/remove steps itself, and the budget it charges is a replace-one
budget (the default).
"""

import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

from skdp import BudgetAccountant, DPGridSearchCV
from skdp.nn import DPNeuralNetClassifier

torch.set_num_threads(1)
start = time.perf_counter()

X, y = load_digits(return_X_y=True)
X = (X / 16.0).astype(np.float32)  # the public pixel range, no statistic of the data
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)

# %%
# The private search over epsilon
# -------------------------------
# ``classes`` is declared (the ten digits are public); ``score_bounds`` is the
# public range of the score (accuracy), which the search clips and noises.

budget = BudgetAccountant(epsilon=10.0, delta=1e-4)
net = DPNeuralNetClassifier(
    classes=list(range(10)),
    module__hidden_units=64,
    clip_norm=1.0,
    lr=1.0,
    max_epochs=5,
    batch_size=200,
    verbose=0,
)
search = DPGridSearchCV(
    net,
    {"epsilon": [0.5, 1.0, 2.0]},
    epsilon=6.0,
    delta=1e-5,
    score_bounds=(0.0, 1.0),
    accountant=budget,
    random_state=0,
).fit(X_train, y_train)

test_accuracy = search.score(X_test, y_test)
print(f"picked {search.best_params_}: test accuracy {test_accuracy:.3f}")
print(f"the whole search: privacy_spent_ {search.privacy_spent_} (replace-one)")
print(f"the budget: spent {budget.spent}, remaining {budget.remaining()}")

# %%
# Each candidate on its own, and a non-private baseline
# -----------------------------------------------------
# For the figure only (not private, outside the budget): each epsilon of the
# grid trained once on the training rows and scored on the test rows, and the
# same architecture without clipping or noise.

single = [
    DPNeuralNetClassifier(**{**net.get_params(), "epsilon": eps, "random_state": 0}).fit(X_train, y_train)
    for eps in (0.5, 1.0, 2.0)
]
baseline = MLPClassifier(hidden_layer_sizes=(64,), max_iter=1000, random_state=0).fit(X_train, y_train)
baseline_accuracy = baseline.score(X_test, y_test)
print(f"non-private MLP test accuracy {baseline_accuracy:.3f}")

fig, ax = plt.subplots(figsize=(6, 3.6))
epsilons = [0.5, 1.0, 2.0]
ax.plot(epsilons, [m.score(X_test, y_test) for m in single], marker="o", label="DP-SGD at each epsilon")
ax.scatter(
    [search.best_params_["epsilon"]], [test_accuracy], color="tab:red", zorder=3, label="the private search's pick"
)
ax.axhline(baseline_accuracy, color="k", ls="--", lw=1, label="non-private MLP")
ax.set_xscale("log")
ax.set_xticks(epsilons, [f"{e:g}" for e in epsilons])
ax.minorticks_off()
ax.set_xlabel("epsilon of one fit (add/remove, delta = 1e-5)")
ax.set_ylabel("test accuracy")
ax.set_ylim(0, 1.02)
ax.set_title(f"search: privacy_spent_ epsilon {search.privacy_spent_.epsilon:.2f} of {search.epsilon:g}")
ax.legend(loc="lower right", fontsize=8)
fig.tight_layout()
print(f"example ran in {time.perf_counter() - start:.0f} s")
plt.show()
