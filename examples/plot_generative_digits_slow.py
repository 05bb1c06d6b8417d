"""
Synthetic digits from a DP mixture of generative networks
=========================================================

Acs et al. (2018), Figure 3: binarised 8x8 digits are clustered by DP kernel
k-means and one variational autoencoder per cluster is trained by DP-SGD
(:class:`skdp.generative.DPGenerativeMixture`).  The labels are appended as
ten one-hot columns, so every synthetic record carries a label, and a
logistic regression trained on synthetic records only is tested on real
ones.  Ten public records (one per digit, held out) initialise the
clustering, as the paper's footnote 3 suggests.
"""

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from skdp.generative import DPGenerativeMixture

torch.set_num_threads(1)
X, y = load_digits(return_X_y=True)
X = (X > 7).astype(float)
public = np.array([np.flatnonzero(y == c)[0] for c in range(10)])
rest = np.setdiff1d(np.arange(len(y)), public)
train, test = train_test_split(rest, test_size=0.3, random_state=0, stratify=y[rest])
Z = np.hstack([X, np.eye(10)[y]])

gm = DPGenerativeMixture(
    n_clusters=10,
    generator="vae",
    hidden_units=64,
    gamma=0.02,
    kmeans_iter=1,
    cluster_init=Z[public],
    cluster_budget=0.1,
    batch_size=16,
    n_epochs=30,
    learning_rate=1e-2,
    epsilon=8.0,
    delta=1e-5,
    random_state=0,
).fit(Z[train])
print(f"privacy spent (add/remove neighbours): {gm.privacy_spent_}")

# %%
# Eight samples per cluster (one row per cluster model).  Expect blurry,
# noisy digits: each cluster's network is trained on about 120 records by
# DP-SGD, whose gradient noise is large against so few records, so the
# samples keep the strokes shared by a cluster and lose the detail.  More
# records per cluster (or a larger epsilon) sharpen them; a user who needs
# useful synthetic data from 1,250 rows should expect the accuracy printed
# below, not the real-data one.
rows = []
for s in range(gm.n_clusters):
    S = gm.sample(8, cluster=s, random_state=s)[:, :64]
    rows.append(np.hstack([np.pad(img.reshape(8, 8), 1, constant_values=0.5) for img in S]))
fig, ax = plt.subplots(figsize=(5, 6))
ax.imshow(np.vstack(rows), cmap="gray_r", vmin=0, vmax=1)
ax.set_title(f"DPGM samples per cluster, epsilon = {gm.privacy_spent_.epsilon:.1f}")
_ = ax.axis("off")

# %%
# Train on synthetic, test on real.  Synthetic rows whose label block is not
# exactly one-hot are dropped (post-processing).
S = gm.sample(4 * len(train), random_state=0)
keep = S[:, 64:].sum(1) == 1
X_syn, y_syn = S[keep, :64], S[keep, 64:].argmax(1)
synthetic = LogisticRegression(max_iter=2000).fit(X_syn, y_syn).score(X[test], y[test])
real = LogisticRegression(max_iter=2000).fit(X[train], y[train]).score(X[test], y[test])
print(f"accuracy on real test digits: trained on synthetic {synthetic:.3f}, trained on real {real:.3f}")
plt.show()
