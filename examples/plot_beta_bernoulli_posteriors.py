"""
Private Beta-Bernoulli posteriors: Laplace mechanism vs one posterior sample
============================================================================

Foulds et al. (2016), Figure 1: with epsilon = 1, p = 0.3, N = 20 and OPS
truncation a0 = 0.2, the Laplace mechanism's privatised posteriors (one per
privatising draw) scatter around the true posterior, while OPS samples from a
posterior flattened by its temperature T = 2 log((1 - a0) / a0) / epsilon.
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy import stats

from skdp.bayes import DPBetaBernoulli

rng = np.random.default_rng(0)
X = rng.binomial(1, 0.3, size=(20, 1))
grid = np.linspace(0.001, 0.999, 500)

fig, ax = plt.subplots(figsize=(6, 3.5))
for seed in range(30):
    model = DPBetaBernoulli(epsilon=1.0, random_state=seed).fit(X)
    a, b = model.posterior_alpha_[0], model.posterior_beta_[0]
    ax.plot(grid, stats.beta(a, b).pdf(grid), color="tab:blue", alpha=0.2, lw=1)

ops = DPBetaBernoulli(epsilon=1.0, mechanism="ops", truncation=0.2, random_state=0).fit(X)
T = ops.temperature_
n_plus = X.sum()
a, b = n_plus / T + 1, (len(X) - n_plus) / T + 1
dens = np.where((grid >= 0.2) & (grid <= 0.8), stats.beta(a, b).pdf(grid), 0.0)
dens /= np.trapezoid(dens, grid)
ax.plot(grid, dens, color="tab:orange", lw=2, label=f"OPS posterior (T = {T:.2f})")
ax.plot(
    grid, stats.beta(1 + n_plus, 1 + len(X) - n_plus).pdf(grid), "k--", lw=2, label="non-private posterior"
)
ax.plot([], [], color="tab:blue", label="Laplace mechanism (30 draws)")
ax.axvline(0.3, color="grey", lw=1)
ax.set_xlabel("p")
ax.set_ylabel("density")
ax.legend()
fig.tight_layout()
print(f"OPS released sample: {ops.posterior_sample_[0]:.3f}; privacy_spent_ = {ops.privacy_spent_}")
