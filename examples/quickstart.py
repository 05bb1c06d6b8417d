"""
Quickstart: private models next to their non-private baselines
==============================================================

Fits every skdp estimator on data shipped with scikit-learn and prints, for
each, its utility, the non-private baseline's utility on the same metric, and
the privacy guarantee ``privacy_spent_`` of the fitted model.  All private
fits draw from one shared ``BudgetAccountant``.  The last row is one private
workflow from end to end: ``DPStandardScaler -> DPPCA -> DPGaussianMixture``
in a :class:`~skdp.pipeline.DPPipeline`, its PCA size chosen by
``DPGridSearchCV``, with one ``privacy_spent_`` for all of it.

Run with ``python examples/quickstart.py``: each row is printed as soon as it
is measured; the whole demo takes about a minute on two idle cores (the DP-SGD
nets and the generative mixture take most of it).
"""

# sphinx_gallery_thumbnail_path = "_static/quickstart_thumbnail.png"

import time
import warnings

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_diabetes, load_digits, make_blobs
from sklearn.linear_model import BayesianRidge
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import GaussianMixture
from sklearn.model_selection import train_test_split

from skdp import BudgetAccountant, PrivacyLeakWarning
from skdp.bayes import DPBetaBernoulli, DPNaiveBayesHMM
from skdp.bnn import DPSEPRegressor
from skdp.cluster import DPKernelKMeans, DPKMeans
from skdp.mixture import DPGaussianMixture


def beta_bernoulli(budget):
    """Binarised digits pixels as independent Bernoulli features."""
    X = (load_digits().data > 7).astype(int)
    X_train, X_test = train_test_split(X, test_size=0.3, random_state=0)
    p = (X_train.sum(0) + 1) / (len(X_train) + 2)  # exact conjugate posterior mean
    baseline = float(np.mean(X_test @ np.log(p) + (1 - X_test) @ np.log1p(-p)))
    for mechanism in ("laplace", "ops"):
        model = DPBetaBernoulli(epsilon=1.0, mechanism=mechanism, accountant=budget, random_state=0)
        model.fit(X_train)
        yield f"DPBetaBernoulli({mechanism})", "test log-lik/row", model.score(X_test), baseline, model
    print(
        "  (ops releases one draw from the posterior, whose spread at epsilon=1 on 1,257 rows is most of the\n"
        "   gap: about -30 at epsilon=3 and -26.4 at 30 (3 seeds); the Laplace mechanism is already near sklearn's)",
        flush=True,
    )


def naive_bayes_hmm(budget):
    """Binarised digits grouped into cells by class: a 10-state naive-Bayes HMM."""
    X, y = load_digits(return_X_y=True)
    X = (X > 7).astype(int)

    def fit(mechanism, accountant):
        return DPNaiveBayesHMM(
            10,
            mechanism=mechanism,
            epsilon=5.0,
            categories=[[0, 1]] * 64,
            n_iter=60,
            burn_in=30,
            accountant=accountant,
            random_state=0,
        ).fit(X[::2], timesteps=y[::2])

    private, base = fit("laplace", budget), fit("none", None)
    score = private.score(X[1::2], timesteps=y[1::2])
    yield "DPNaiveBayesHMM(laplace)", "test log-lik", score, base.score(X[1::2], timesteps=y[1::2]), private
    print(
        "  (10 states x 64 pixels of counts from 899 rows at epsilon=5, noised in each of the 60 sweeps: about\n"
        "   -2,100 to -2,330 at epsilon=20 (2 seeds); more rows or a larger epsilon closes the gap)",
        flush=True,
    )


def gaussian_mixture(budget):
    """Three Gaussian blobs (scikit-learn's generator: its bundled sets are too small for DP-EM)."""
    X, _ = make_blobs(n_samples=20_000, centers=3, random_state=0)
    X_train, X_test = train_test_split(X, test_size=0.3, random_state=0)
    model = DPGaussianMixture(
        3, max_iter=5, data_norm=12.0, epsilon=1.0, delta=1e-5, accountant=budget, random_state=0
    ).fit(X_train)
    baseline = GaussianMixture(3, random_state=0).fit(X_train).score(X_test)
    yield "DPGaussianMixture", "test log-lik/row", model.score(X_test), baseline, model
    # One covariance shared by the components: released once per fit, not once per iteration.
    tied = DPGaussianMixture(
        3, covariance_type="tied", data_norm=12.0, epsilon=1.0, delta=1e-5, accountant=budget, random_state=0
    ).fit(X_train)
    baseline = GaussianMixture(3, covariance_type="tied", random_state=0).fit(X_train).score(X_test)
    yield "DPGaussianMixture(tied)", "test log-lik/row", tied.score(X_test), baseline, tied


def clustering(budget):
    """Digits scaled to [0, 1]: private k-means, plain and with random Fourier features."""
    X, y = load_digits(return_X_y=True)
    X_train, X_test, _, y_test = train_test_split(X / 16, y, test_size=0.3, random_state=0)
    baseline = adjusted_rand_score(y_test, KMeans(10, n_init=1, random_state=0).fit(X_train).predict(X_test))
    models = {
        "DPKMeans": DPKMeans(10, epsilon=3.0, data_norm=8.0, accountant=budget, random_state=0),
        "DPKernelKMeans": DPKernelKMeans(
            10, epsilon=3.0, gamma=0.05, n_components=50, accountant=budget, random_state=0
        ),
    }
    for name, model in models.items():
        model.fit(X_train)
        yield name, "test ARI", adjusted_rand_score(y_test, model.predict(X_test)), baseline, model
    print(
        "  (10 centres in 64 dimensions from 1,257 rows at epsilon=3: each iteration's noisy centres average\n"
        "   about 125 rows; ARI 0.31-0.46 (k-means) and 0.36-0.43 (kernel) at epsilon=10, 0.43-0.50 and\n"
        "   0.40-0.46 at 30 (3 seeds): more rows or a larger epsilon closes the gap)",
        flush=True,
    )


def sep_regression(budget):
    """Diabetes progression: Bayesian linear regression by DP stochastic EP."""
    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
    model = DPSEPRegressor(
        hidden_layer_sizes=(),
        n_epochs=5,
        epsilon=1.0,
        feature_bounds=(-0.1, 0.1),
        target_bounds=(0, 400),
        accountant=budget,
        random_state=0,
    ).fit(X_train, y_train)
    baseline = BayesianRidge().fit(X_train, y_train).score(X_test, y_test)
    yield "DPSEPRegressor(linear)", "test R^2", model.score(X_test, y_test), baseline, model


def dp_sgd_networks(budget):
    """DP-SGD MLPs next to the same skorch MLPs trained without DP (needs the torch/skorch extra)."""
    try:
        import torch
        from skorch import NeuralNetClassifier, NeuralNetRegressor

        from skdp.nn import DPNeuralNetClassifier, DPNeuralNetRegressor
        from skdp.nn._net import DefaultMLP
    except ImportError:
        print("(DPNeuralNetClassifier/Regressor skipped: pip install -e '.[torch]' to add them)", flush=True)
        return

    # Digits classification, pixels scaled by their public bound 16.
    X, y = load_digits(return_X_y=True)
    X = (X / 16).astype("float32")
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    net = DPNeuralNetClassifier(
        classes=list(range(10)),
        module__hidden_units=128,
        epsilon=2.0,
        delta=1e-5,
        lr=2.0,
        max_epochs=4,
        batch_size=64,
        verbose=0,
        accountant=budget,
        random_state=0,
    ).fit(X_train, y_train)
    torch.manual_seed(0)
    plain = NeuralNetClassifier(
        DefaultMLP, module__n_features=64, module__n_outputs=10, module__hidden_units=128,
        lr=0.5, max_epochs=20, batch_size=64, train_split=None, verbose=0,
    ).fit(X_train, y_train)  # fmt: skip
    baseline = float(np.mean(plain.predict(X_test) == y_test))
    yield "DPNeuralNetClassifier", "test accuracy", net.score(X_test, y_test), baseline, net

    # Diabetes regression; features lie in [-0.2, 0.2] and targets in [0, 400],
    # public ranges mapped to [-1, 1] (no statistic of the data is used).
    X, y = load_diabetes(return_X_y=True)
    X, y = (X / 0.2).astype("float32"), ((y - 200) / 200).astype("float32")
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
    reg = DPNeuralNetRegressor(
        module__hidden_units=16,
        epsilon=2.0,
        delta=1e-5,
        lr=0.2,
        max_epochs=10,
        batch_size=32,
        verbose=0,
        accountant=budget,
        random_state=0,
    ).fit(X_train, y_train)
    torch.manual_seed(0)
    plain = NeuralNetRegressor(
        DefaultMLP, module__n_features=10, module__n_outputs=1, module__hidden_units=16,
        module__softmax=False, lr=0.2, max_epochs=100, batch_size=32, train_split=None, verbose=0,
    ).fit(X_train, y_train.reshape(-1, 1))  # fmt: skip
    baseline = plain.score(X_test, y_test.reshape(-1, 1))
    yield "DPNeuralNetRegressor", "test R^2", reg.score(X_test, y_test), baseline, reg


def generative_mixture(budget):
    """Synthetic binarised digits (with their labels) from the default generator; a classifier trained on them only."""
    from sklearn.linear_model import LogisticRegression

    from skdp.generative import DPGenerativeMixture

    X, y = load_digits(return_X_y=True)
    X = (X > 7).astype(float)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
    records = np.hstack([X_train, np.eye(10)[y_train]])  # a label is one more categorical block
    model = DPGenerativeMixture(
        # Public layout: 64 binary pixels, then the label as a one-hot block. The default
        # generator (latent classes of independent marginals, sized from n and epsilon) is
        # add/remove DP: the replace-one budget's ledger entry is the group-of-2 conversion.
        binary=list(range(64)),
        categorical=[list(range(64, 74))],
        epsilon=2.0,
        accountant=budget,
        random_state=0,
    ).fit(records)
    synthetic = model.sample(4 * len(X_train), random_state=0)
    clf = LogisticRegression(max_iter=2000).fit(synthetic[:, :64], synthetic[:, 64:].argmax(1))
    baseline = LogisticRegression(max_iter=2000).fit(X_train, y_train).score(X_test, y_test)
    yield "DPGenerativeMixture", "synth->real acc", clf.score(X_test, y_test), baseline, model


def private_pipeline(budget):
    """End to end: DP scaler -> DP PCA -> DP-EM, its PCA size chosen by a private search, one guarantee."""
    from sklearn.decomposition import PCA
    from sklearn.pipeline import make_pipeline as sklearn_pipeline
    from sklearn.preprocessing import StandardScaler

    from skdp.model_selection import DPGridSearchCV
    from skdp.pipeline import make_pipeline
    from skdp.preprocessing import DPPCA, DPStandardScaler

    X, y = load_digits(return_X_y=True)
    X_train, X_test, _, y_test = train_test_split(X, y, random_state=0)
    pipe = make_pipeline(  # pixels lie in the public range [0, 16]; scaled rows are clipped to norm 8
        DPStandardScaler(bounds=(0.0, 16.0)),
        DPPCA(3, data_norm=8.0),
        DPGaussianMixture(10, covariance_type="tied", data_norm=8.0, max_iter=5),
    )
    with warnings.catch_warnings(record=True) as caught:
        # Shown below as one line each (a warning's default display names this file's path).
        warnings.simplefilter("always", UserWarning)
        warnings.simplefilter("error", PrivacyLeakWarning)
        search = DPGridSearchCV(
            pipe,
            {"dppca__n_components": [3, 5]},
            epsilon=4.0,
            delta=1e-5,
            n_trials_mean=3,
            score_bounds=(-40.0, 0.0),  # per-row test log-likelihood, clipped: the score's public range
            accountant=budget,
            random_state=0,
        ).fit(X_train)
    notes = dict.fromkeys(str(w.message).split(". ")[0] for w in caught)
    plain = sklearn_pipeline(StandardScaler(), PCA(search.best_params_["dppca__n_components"]))
    plain.steps.append(("gaussianmixture", GaussianMixture(10, covariance_type="tied", random_state=0)))
    baseline = adjusted_rand_score(y_test, plain.fit(X_train).predict(X_test))
    score = adjusted_rand_score(y_test, search.predict(X_test))
    yield "DPGridSearchCV(pipeline)", "test ARI", score, baseline, search
    print(
        "  (search + scaler + PCA + DP-EM under one privacy_spent_; lower than sklearn's because 1,347 rows "
        "share epsilon=4 among\n   the search's trials and three releases: more rows or a larger epsilon "
        "closes the gap; the user guide's\n   'Private pipelines' page explains the split)",
        flush=True,
    )
    for note in notes:  # e.g. the mixture fitting fewer components than its noise can resolve
        print(f"  (note: {note}.)", flush=True)


DEMOS = [
    beta_bernoulli,
    naive_bayes_hmm,
    gaussian_mixture,
    clustering,
    sep_regression,
    dp_sgd_networks,
    generative_mixture,
    private_pipeline,
]


def main():
    budget = BudgetAccountant(epsilon=40.0, delta=1e-3)
    header = (
        f"{'model':<26} {'metric':<17} {'private':>10} {'non-private':>12}   "
        f"{'privacy_spent_':<30} charged to the budget"
    )
    print(header)
    print("-" * len(header), flush=True)
    start = time.perf_counter()
    with warnings.catch_warnings():
        # The demos declare their bounds; anything else would be shown here.
        warnings.simplefilter("error", PrivacyLeakWarning)
        for demo in DEMOS:
            seen = len(budget.history)
            for name, metric, score, baseline, model in demo(budget):
                eps, delta = model.privacy_spent_
                add_remove = getattr(model, "privacy_ledger_", None) is not None and any(
                    e.neighbouring == "add_remove" for e in model.privacy_ledger_.events
                )
                spent = f"(epsilon={eps:.3g}, delta={delta:.0e}){' *' if add_remove else ''}"
                charged = budget.history[seen:]
                seen = len(budget.history)
                charge = ", ".join(f"({e:.3g}, {d:.1e})" for e, d, _ in charged)
                # flush: each row appears as soon as it is measured.
                print(
                    f"{name:<26} {metric:<17} {score:>10.3f} {baseline:>12.3f}   {spent:<30} {charge}",
                    flush=True,
                )
    spent = budget.spent
    summed = sum(e for e, _, _ in budget.history), sum(d for _, d, _ in budget.history)
    print(
        f"""
* add/remove guarantee (DP-SGD's Poisson sampling; the generative mixture's releases). The budget is
  replace-one, so its ledger entry for such a fit is the group-of-2 conversion
  (2 epsilon, 2 e^epsilon delta): a net at (2, 1e-5) is charged (4, 1.5e-4). A workflow of
  add/remove fits only can use BudgetAccountant(..., neighbouring="add_remove"), which
  charges them as they are (and refuses replace-one fits).

Shared BudgetAccountant (replace-one neighbours, {len(budget.history)} fits): the ledger entries add up
to (epsilon={summed[0]:.3g}, delta={summed[1]:.1e}), what charging them one after the other would
cost. The budget composes the fits' privacy events instead ({budget.composition.upper()}; add/remove
events converted exactly, which costs less than the group-of-2 entries; entries it cannot compose
add up): spent (epsilon={spent.epsilon:.3g}, delta={spent.delta:.1e}). Its delta is the sum of the
entries' deltas, the add/remove fits' converted ones included. {time.perf_counter() - start:.0f} s""",
        flush=True,
    )


if __name__ == "__main__":
    main()
