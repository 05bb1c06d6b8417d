"""
Private kernel k-means vs private k-means on digits
===================================================

Acs et al. (2018), Figure 4, on scikit-learn's 8x8 digits (1,797 rows; the
paper used 60,000 MNIST rows): clustering accuracy (ACC, Hungarian matching of
the 10 clusters to the 10 digits) of :class:`~skdp.cluster.DPKernelKMeans`
(random Fourier features of an RBF kernel, clipped to norm 1) and of
:class:`~skdp.cluster.DPKMeans` (DP Lloyd on the pixels, clipped to the public
bound ``sqrt(64)``) as epsilon grows.  Both pick their number of iterations
with the same public rule (``max_iter="auto"``: as many as the noise allows,
from the budget and the number of rows only).

The grey band marks what centres carrying no information about the data
reach (the Voronoi cells of random points): on so few rows, fits at
``epsilon <= 1`` are close to it.  The kernel's noise does not grow with the
64 pixels, only with the number of random features ``d``; at this size a small
``d`` wins.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from sklearn.kernel_approximation import RBFSampler
from sklearn.metrics import confusion_matrix

from skdp.cluster import DPKernelKMeans, DPKMeans


def accuracy(y, labels):
    cm = confusion_matrix(y, labels, labels=range(10))
    rows, cols = linear_sum_assignment(-cm)
    return cm[rows, cols].sum() / len(y)


X, y = load_digits(return_X_y=True)
X = X / 16.0  # public pixel range [0, 16] -> [0, 1]
epsilons = [0.3, 1.0, 3.0, 10.0]
seeds = range(5)
gamma = 0.05  # RBF width fixed a priori for pixels in [0, 1]

models = {
    "DPKernelKMeans (d=50)": lambda eps, s: DPKernelKMeans(
        10, epsilon=eps, gamma=gamma, n_components=50, max_iter="auto", random_state=s
    ),
    "DPKernelKMeans (d=200)": lambda eps, s: DPKernelKMeans(
        10, epsilon=eps, gamma=gamma, n_components=200, max_iter="auto", random_state=s
    ),
    "DPKMeans": lambda eps, s: DPKMeans(10, epsilon=eps, data_norm=8.0, max_iter="auto", random_state=s),
}
acc = {name: np.zeros((len(epsilons), len(seeds))) for name in models}
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for i, eps in enumerate(epsilons):
        for j, s in enumerate(seeds):
            for name, make in models.items():
                # Labels of the training rows: fine for this plot, but they
                # are not covered by the guarantee (the model stores none).
                acc[name][i, j] = accuracy(y, make(eps, s).fit_predict(X))

rff = RBFSampler(gamma=gamma, n_components=200, random_state=0).fit_transform(X)
reference = accuracy(y, KMeans(10, random_state=0).fit_predict(rff))
rng = np.random.default_rng(0)
chance = np.mean(
    [accuracy(y, np.argmin(((X[:, None] - rng.uniform(0, 1, (10, 64))) ** 2).sum(-1), axis=1)) for _ in seeds]
)

fig, ax = plt.subplots(figsize=(6, 4))
for name, values in acc.items():
    ax.errorbar(epsilons, values.mean(1), yerr=values.std(1), marker="o", capsize=3, label=name)
ax.axhline(reference, color="k", ls="--", label="RFF + KMeans (non-private)")
ax.axhspan(0, chance, color="grey", alpha=0.2, label="random centres (no data)")
ax.set_xscale("log")
ax.set_xlabel("epsilon (delta = 1e-5)")
ax.set_ylabel("clustering accuracy (ACC)")
ax.set_ylim(0, 1)
ax.legend(fontsize=8, loc="upper left")
fig.tight_layout()
plt.show()

for name, values in acc.items():
    print(
        f"{name:>24}: "
        + "  ".join(f"eps={e:g}: {m:.2f}" for e, m in zip(epsilons, values.mean(1), strict=True))
    )
