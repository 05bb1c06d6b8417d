"""Digits accuracy of DP-SGD nets vs Opacus and diffprivlib (issue 7).

``load_digits`` (1,797 images, 64 features scaled by the public bound 16),
75/25 stratified split, epsilon in {0.5, 1, 2, 8}, delta = 1e-5.  In the same
run:

* ours: ``DPNeuralNetClassifier`` (MLP 64-128-10), noise multiplier
  calibrated by skdp for the plan (q = 64/N, E epochs);
* Opacus: the same MLP, the same noise multiplier, clipping, number of steps
  and learning rate through ``make_private`` (Poisson sampling at Opacus' rate
  ``1 / len(loader)``, within a few percent of ours); Opacus' RDP accountant's
  epsilon for *our* plan (q, sigma, steps) is printed next to ours (they
  should agree within 2%);
* diffprivlib's ``LogisticRegression`` at the same epsilon (pure epsilon-DP,
  replace-one neighbours, so a stricter guarantee than our add/remove
  (epsilon, delta)), run in its own environment with scikit-learn 1.7.2
  (``python benchmarks/peers/make_env.py diffprivlib``; without it its
  column reads "nan" and a "not installed" line says so);
* non-private references: the same MLP by skorch, scikit-learn's
  LogisticRegression.

Accuracies are means over ``--repeats`` seeds.

Run: ``python benchmarks/dpsgd_accuracy.py [--quick]``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from skorch import NeuralNetClassifier  # noqa: E402

from skdp.nn import DPNeuralNetClassifier  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _opacus import make_private  # noqa: E402
from _peers import PeerNotInstalled, describe, fit_many  # noqa: E402

#: Arguments of the quick mode, read by ``python -m benchmarks --quick``.
QUICK_ARGS = ("--quick",)
#: Peers run in their own environment (``benchmarks/peers/``).
PEERS = ("diffprivlib",)

RESULTS = Path(__file__).resolve().parent / "results"
DELTA, BATCH, CLIP, LR = 1e-5, 64, 1.0, 2.0


class MLP(torch.nn.Module):
    def __init__(self, hidden_units=128, softmax=True):
        super().__init__()
        self.l1 = torch.nn.Linear(64, hidden_units)
        self.l2 = torch.nn.Linear(hidden_units, 10)
        self.softmax = softmax

    def forward(self, x):
        out = self.l2(torch.relu(self.l1(x)))
        return torch.softmax(out, dim=-1) if self.softmax else out


def diffprivlib_accuracy(X, y, Xt, yt, epsilons, repeats):
    """Test accuracy of diffprivlib's LogisticRegression per (epsilon, seed), in its own environment.

    ``data_norm=8`` is the public bound of a row (64 pixels in [0, 1]).
    Returns ``(accuracy[i][seed], versions)``; raises ``PeerNotInstalled``
    when ``benchmarks/.venvs/diffprivlib`` is not built.
    """
    fits = [
        {
            "params": {"epsilon": eps, "data_norm": 8.0, "max_iter": 1000, "random_state": seed},
            "X": "X",
            "y": "y",
            "score": [["Xt", "yt"]],
        }
        for eps in epsilons
        for seed in range(repeats)
    ]
    arrays = {"X": X, "y": y, "Xt": Xt, "yt": yt}
    result = fit_many("diffprivlib", "diffprivlib.models.LogisticRegression", fits, arrays)
    scores = [f["score"][0] for f in result["fits"]]
    return [scores[i * repeats : (i + 1) * repeats] for i in range(len(epsilons))], describe(result)


def ours(X, y, Xt, yt, epsilon, epochs, seed):
    net = DPNeuralNetClassifier(
        MLP,
        # Logits + cross-entropy, as in the Opacus run (softmax + NLL saturates under heavy noise).
        module__softmax=False,
        criterion=torch.nn.CrossEntropyLoss,
        epsilon=epsilon,
        delta=DELTA,
        clip_norm=CLIP,
        lr=LR,
        max_epochs=epochs,
        batch_size=BATCH,
        classes=list(range(10)),
        verbose=0,
        random_state=seed,
    ).fit(X, y)
    return net.score(Xt, yt), net


def opacus(X, y, Xt, yt, net, epochs, seed):
    torch.manual_seed(seed)
    model, opt, loader = make_private(MLP(softmax=False), X, y, LR, BATCH, net.noise_multiplier_, CLIP)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Same number of steps as ours (Opacus' epoch is len(loader) batches).
        steps = 0
        while steps < net.n_steps_:
            for xb, yb in loader:
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
                steps += 1
                if steps == net.n_steps_:
                    break
    # Opacus' loader samples at 1/len(loader), not exactly batch/N: compare the
    # accountants on *our* plan (q, sigma, steps) with Opacus' RDP accountant.
    from opacus.accountants import RDPAccountant

    acct = RDPAccountant()
    acct.history = [(net.noise_multiplier_, net.sampling_rate_, net.n_steps_)]
    eps = acct.get_epsilon(DELTA)
    with torch.no_grad():
        acc = float((model(torch.as_tensor(Xt)).argmax(1).numpy() == yt).mean())
    return acc, eps


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer epochs and one seed (under 2 minutes)")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args(argv)
    epochs = 3 if args.quick else 30
    repeats = args.repeats or (1 if args.quick else 3)
    epsilons = [0.5, 1.0, 2.0, 8.0]

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)  # public pixel bound
    X, Xt, y, yt = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    try:
        dpl_acc, peer = diffprivlib_accuracy(X, y, Xt, yt, epsilons, repeats)
    except PeerNotInstalled as exc:
        dpl_acc, peer = [[np.nan] * repeats for _ in epsilons], str(exc)

    base_mlp = NeuralNetClassifier(
        MLP,
        lr=0.5,
        max_epochs=30,
        batch_size=BATCH,
        train_split=None,
        verbose=0,
        iterator_train__shuffle=True,
    )
    torch.manual_seed(0)
    mlp_acc = base_mlp.fit(X, y.astype(np.int64)).score(Xt, yt)
    lr_acc = LogisticRegression(max_iter=2000).fit(X, y).score(Xt, yt)

    rows = []
    for eps, acc_d in zip(epsilons, dpl_acc, strict=True):
        acc_o, acc_p, eps_o, eps_p = [], [], [], []
        for seed in range(repeats):
            a, net = ours(X, y.astype(np.int64), Xt, yt, eps, epochs, seed)
            acc_o.append(a)
            eps_o.append(net.privacy_spent_.epsilon)
            a, e = opacus(X, y.astype(np.int64), Xt, yt, net, epochs, seed)
            acc_p.append(a)
            eps_p.append(e)
        rows.append(
            (
                eps,
                net.noise_multiplier_,
                np.mean(eps_o),
                np.mean(eps_p),
                np.mean(acc_o),
                np.mean(acc_p),
                np.mean(acc_d),
            )
        )

    print(f"\ndigits, delta={DELTA}, batch {BATCH}, {epochs} epochs, clip {CLIP}, lr {LR}, {repeats} seed(s)")
    print(f"non-private: skorch MLP (30 epochs) {mlp_acc:.3f}, sklearn LogisticRegression {lr_acc:.3f}")
    print(f"diffprivlib LogisticRegression: {peer}")
    head = (
        f"{'epsilon':>8}{'sigma':>8}{'eps ours':>10}{'eps opacus':>12}{'eps ratio':>10}"
        f"{'acc ours':>10}{'acc opacus':>12}{'acc dpl LR':>12}{'ours/opacus':>13}{'ours/dpl':>10}"
    )
    print(head)
    for eps, sigma, eo, ep, ao, ap, ad in rows:
        print(
            f"{eps:>8.1f}{sigma:>8.3f}{eo:>10.4f}{ep:>12.4f}{eo / ep:>10.4f}"
            f"{ao:>10.3f}{ap:>12.3f}{ad:>12.3f}{ao / ap:>13.3f}{ao / ad:>10.3f}"
        )

    RESULTS.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(epsilons, [r[4] for r in rows], "o-", label="skdp DP MLP")
    ax.plot(epsilons, [r[5] for r in rows], "s--", label="Opacus DP MLP (same noise)")
    ax.plot(epsilons, [r[6] for r in rows], "^-.", label="diffprivlib LogisticRegression")
    ax.axhline(mlp_acc, color="grey", lw=0.8, label="non-private MLP")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"digits, delta={DELTA}")
    ax.legend()
    fig.tight_layout()
    out = RESULTS / "dpsgd_accuracy.png"
    fig.savefig(out, dpi=120)
    print(f"plot: {out}")


if __name__ == "__main__":
    main()
