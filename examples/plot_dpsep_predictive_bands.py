"""
DP-SEP Bayesian neural network: predictive bands of SEP and DP-SEP
==================================================================

Vinaroz & Park (DP-SEP) on a 1-D toy regression: a Bayesian neural network
with 20 ReLU units fitted by stochastic expectation propagation on
probabilistic backpropagation, without privacy (``mechanism="none"``), with
clipping only (``"clipped"``) and differentially private at epsilon = 1
(``"dp"``).  Each panel shows the posterior predictive mean and a band of
+-2 predictive standard deviations (weight uncertainty plus the learned
noise).  The inputs and targets are standardised with declared public
bounds, so the private fit leaks nothing beyond ``privacy_spent_``.
"""

import matplotlib.pyplot as plt
import numpy as np

from skdp.bnn import DPSEPRegressor

rng = np.random.default_rng(0)
n = 4000
X = rng.uniform(-3, 3, size=(n, 1))
y = np.sin(1.5 * X[:, 0]) + 0.3 * X[:, 0] + 0.2 * rng.normal(size=n)
grid = np.linspace(-3.5, 3.5, 300)[:, None]

common = dict(
    hidden_layer_sizes=(20,),
    n_epochs=10,
    batch_size=64,
    feature_bounds=(-3, 3),
    target_bounds=(-3, 3),
    random_state=0,
)
fits = [
    ("SEP (no privacy)", DPSEPRegressor(mechanism="none", **common)),
    ("SEP, clipped (no privacy)", DPSEPRegressor(mechanism="clipped", **common)),
    ("DP-SEP, epsilon = 1", DPSEPRegressor(mechanism="dp", epsilon=1.0, delta=1e-5, **common)),
]

fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), sharey=True)
for ax, (title, model) in zip(axes, fits, strict=True):
    model.fit(X, y)
    mean, std = model.predict(grid, return_std=True)
    ax.scatter(X[::10, 0], y[::10], s=3, color="grey", alpha=0.4, label="data (1 in 10)")
    ax.plot(grid[:, 0], mean, color="tab:blue", lw=2, label="predictive mean")
    ax.fill_between(grid[:, 0], mean - 2 * std, mean + 2 * std, color="tab:blue", alpha=0.25, label="+-2 std")
    spent = model.privacy_spent_
    eps = (
        "not private"
        if np.isinf(spent.epsilon)
        else f"(epsilon, delta) = ({spent.epsilon:.2f}, {spent.delta:g})"
    )
    ax.set_title(f"{title}\nR^2 = {model.score(X, y):.2f}, {eps}", fontsize=9)
    ax.set_xlabel("x")
axes[0].set_ylabel("y")
axes[0].legend(loc="upper left", fontsize=8)
fig.tight_layout()
plt.show()
