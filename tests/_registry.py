"""Every public skdp estimator, with data it accepts: the one registry of the cross-estimator suites.

scikit-learn's checks (``tests/test_common.py``), the hostile-input and
pickle suites (``tests/test_hostile_input.py``), the release-surface test
(``tests/test_release_surface.py``) and the pinned releases
(``tests/test_pinned_releases.py``) all read it, and
``test_common.test_registry_lists_every_public_estimator`` fails when a
public estimator is missing.  A new estimator gets every one of those suites
by one entry in ``CASES`` (with the instances scikit-learn's checks run on,
and the checks each instance is expected to fail, each with its reason and
the exception it must raise) and its modes in ``_modes``.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from sklearn.utils.validation import validate_data

from skdp.bayes import DPBetaBernoulli, DPNaiveBayesHMM
from skdp.bnn import DPSEPRegressor
from skdp.cluster import DPKernelKMeans, DPKMeans
from skdp.mixture import DPGaussianMixture
from skdp.preprocessing import DPPCA, DPMinMaxScaler, DPStandardScaler


@dataclass(frozen=True)
class ExpectedFailure:
    """A scikit-learn check that one instance must fail, why, and with which exception.

    Strict: an unexpected pass, or another exception, fails the test.
    """

    reason: str
    raises: type[BaseException] | tuple[type[BaseException], ...]
    #: A bug of the check itself, fixed in this scikit-learn release: below
    #: it the check must fail, from it on it must pass.
    sklearn_below: str | None = None


@dataclass(frozen=True)
class Tolerance:
    """Run a check with its array comparisons at this tolerance instead of its own, and why."""

    reason: str
    rtol: float
    atol: float


@dataclass
class Checked:
    """One instance scikit-learn's estimator checks run on (``tests/test_common.py``)."""

    #: Test id: the class name, and the mode in brackets.
    id: str
    estimator: object
    #: Check name (``check_clustering``, ...) -> why and how it must fail.
    expected_failures: dict = field(default_factory=dict)
    #: Check name -> the comparison tolerance it runs at.
    tolerances: dict = field(default_factory=dict)
    #: Runs with the slow tests only.
    slow: bool = False


@dataclass
class Case:
    estimator: object
    make_X: Callable  # (rng, n_samples, n_features) -> valid X
    fit_kwargs: Callable = field(default=lambda X: {})
    #: Name of a method whose output must survive pickling unchanged.
    output: str = "score"
    #: True if arbitrary real values are valid input (then huge values must be clipped, not break).
    continuous: bool = True
    #: The instances scikit-learn's checks run on.
    checked: list = field(default_factory=list)


def _binary(rng, n, d):
    return rng.binomial(1, 0.4, size=(n, d))


def _categorical(rng, n, d):
    return rng.integers(0, 3, size=(n, d))


def _normal(rng, n, d):
    return rng.normal(size=(n, d))


# --- adapters and expected failures of scikit-learn's checks -------------------------------------


class BinarisingBetaBernoulli(DPBetaBernoulli):
    """Test-only DPBetaBernoulli that thresholds X at 0 after validation.

    scikit-learn's checks feed continuous data; thresholding lets every check
    exercise DPBetaBernoulli's real code paths (validation of NaN, shapes,
    dtypes, pickling, cloning) on data the model accepts.
    """

    def _validate_X(self, X, reset):
        X = validate_data(self, X, reset=reset, dtype=np.float64)
        return super()._validate_X((X > 0).astype(np.float64), reset)

    def _chunked_counts(self, data):
        # Memmaps take the out-of-core path: threshold each chunk there too.
        return super()._chunked_counts(_BinarisedChunks(data))


class _BinarisedChunks:
    def __init__(self, data):
        self.data, self.feature_names = data, data.feature_names

    def map_reduce(self, fn):
        return self.data.map_reduce(_binarised, fn)


def _binarised(chunk, fn):
    return fn((chunk > 0).astype(np.float64))


# Checks that feed continuous data to an estimator whose model is defined on
# binary data only: DPBetaBernoulli rejects them with a ValueError, as the
# issue requires (a silent binarisation would be a wrong answer).
_BINARY_ONLY = ExpectedFailure(
    "the model is defined for binary X; the check feeds continuous data, which is rejected", ValueError
)
_BETA_BERNOULLI_CONTINUOUS = dict.fromkeys(
    [
        "check_dict_unchanged",
        "check_dont_overwrite_parameters",
        "check_dtype_object",
        "check_estimators_dtypes",
        "check_estimators_fit_returns_self",
        "check_estimators_nan_inf",
        "check_estimators_overwrite_params",
        "check_estimators_pickle",
        "check_f_contiguous_array_estimator",
        "check_fit2d_predict1d",
        "check_fit_check_is_fitted",
        "check_fit_idempotent",
        "check_fit_score_takes_y",
        "check_methods_sample_order_invariance",
        "check_methods_subset_invariance",
        "check_n_features_in",
        "check_n_features_in_after_fitting",
        "check_pipeline_consistency",
        "check_readonly_memmap_input",
    ],
    _BINARY_ONLY,
) | dict.fromkeys(
    # These checks catch the estimator's error and fail on its message or type.
    ["check_fit2d_1feature", "check_fit2d_1sample", "check_positive_only_tag_during_fit"],
    ExpectedFailure(_BINARY_ONLY.reason + " (the check reports it as an AssertionError)", AssertionError),
)

# scikit-learn 1.6's check subtracts the mean in place from the int X it made
# for an estimator with the categorical tag (a casting error, raised before
# the estimator is called); 1.7 makes X float first.
_CATEGORICAL_X_CHECK_BUG = {
    "check_positive_only_tag_during_fit": ExpectedFailure(
        "scikit-learn < 1.7: the check does X -= X.mean() on the int X of a categorical-tag estimator",
        TypeError,
        sklearn_below="1.7",
    )
}

# The DP clusterers and the generative mixture hold no labels_ (exact labels
# of the training rows are outside the guarantee; fit_predict returns them,
# never stores them), and check_clustering reads clusterer.labels_ first.  Only the AttributeError:
# should labels_ ever come back, the check gets past it and this test fails
# (whether the rest of the check passes or not).
_NO_TRAINING_LABELS = {
    "check_clustering": ExpectedFailure(
        "no labels_: training-row labels are outside the guarantee; fit_predict returns them", AttributeError
    )
}


def _hmm(**params):
    # scikit-learn's checks feed data of their own: its categories are read off it (a leak, warned).
    return DPNaiveBayesHMM(n_iter=20, burn_in=10, categories="nonprivate", random_state=0, **params)


def _gmm(**params):
    return DPGaussianMixture(n_components=2, data_norm=10.0, random_state=0, **params)


CASES = {
    "DPBetaBernoulli(laplace)": Case(
        DPBetaBernoulli(random_state=0),
        _binary,
        continuous=False,
        checked=[
            Checked("DPBetaBernoulli", DPBetaBernoulli(random_state=0), _BETA_BERNOULLI_CONTINUOUS),
            Checked("DPBetaBernoulli[binarised]", BinarisingBetaBernoulli(random_state=0), {}),
        ],
    ),
    "DPBetaBernoulli(ops)": Case(
        DPBetaBernoulli(mechanism="ops", random_state=0),
        _binary,
        continuous=False,
        checked=[
            Checked(
                "DPBetaBernoulli[binarised,ops]",
                BinarisingBetaBernoulli(mechanism="ops", random_state=0),
                {},
            )
        ],
    ),
    "DPNaiveBayesHMM(laplace)": Case(
        DPNaiveBayesHMM(n_iter=10, burn_in=5, categories=[[0, 1, 2]] * 3, random_state=0),
        _categorical,
        fit_kwargs=lambda X: {"timesteps": np.arange(len(X)) // 5},
        continuous=False,
        checked=[
            Checked("DPNaiveBayesHMM", _hmm(), _CATEGORICAL_X_CHECK_BUG),
            Checked("DPNaiveBayesHMM[ops]", _hmm(mechanism="ops"), _CATEGORICAL_X_CHECK_BUG),
            Checked("DPNaiveBayesHMM[none]", _hmm(mechanism="none"), _CATEGORICAL_X_CHECK_BUG),
        ],
    ),
    "DPGaussianMixture": Case(
        DPGaussianMixture(n_components=2, data_norm=3.0, random_state=0),
        _normal,
        checked=[
            Checked("DPGaussianMixture", DPGaussianMixture(random_state=0)),
            Checked(
                "DPGaussianMixture[spherical,mle,gaussian]",
                _gmm(covariance_type="spherical", estimator="mle", mean_mechanism="gaussian"),
            ),
            Checked("DPGaussianMixture[separate,pure]", _gmm(component_releases="separate", delta=0.0)),
            Checked("DPGaussianMixture[tied]", _gmm(covariance_type="tied")),
            Checked(
                "DPGaussianMixture[tied,mle,pure,split]",
                _gmm(covariance_type="tied", estimator="mle", delta=0.0, budget_split=(1, 2, 1)),
            ),
        ],
    ),
    "DPStandardScaler": Case(
        DPStandardScaler(bounds=(-3.0, 3.0), random_state=0),
        _normal,
        output="transform",
        checked=[
            Checked("DPStandardScaler", DPStandardScaler(bounds=(-3.0, 3.0), random_state=0)),
            Checked(
                "DPStandardScaler[laplace,mean-only]",
                DPStandardScaler(bounds=(-3.0, 3.0), delta=0.0, with_std=False, random_state=0),
            ),
            Checked("DPStandardScaler[auto]", DPStandardScaler(bounds="auto", random_state=0)),
        ],
    ),
    "DPMinMaxScaler": Case(
        DPMinMaxScaler(random_state=0),
        _normal,
        output="transform",
        checked=[
            Checked("DPMinMaxScaler", DPMinMaxScaler(random_state=0)),
            Checked(
                "DPMinMaxScaler[pld,noclip]",
                DPMinMaxScaler(delta=1e-5, feature_range=(-1, 1), clip=False, random_state=0),
            ),
        ],
    ),
    "DPPCA": Case(
        DPPCA(n_components=2, data_norm=3.0, random_state=0),
        _normal,
        output="transform",
        checked=[
            Checked("DPPCA", DPPCA(n_components=1, data_norm=5.0, random_state=0)),
            Checked("DPPCA[centered,all]", DPPCA(data_norm=5.0, centered=True, random_state=0)),
        ],
    ),
    "DPKMeans": Case(
        DPKMeans(n_clusters=3, data_norm=3.0, random_state=0),
        _normal,
        output="predict",
        checked=[
            Checked("DPKMeans", DPKMeans(random_state=0), _NO_TRAINING_LABELS),
            Checked(
                "DPKMeans[auto]",
                DPKMeans(data_norm=10.0, max_iter="auto", random_state=0),
                _NO_TRAINING_LABELS,
            ),
            Checked(
                "DPKMeans[laplace]",
                DPKMeans(data_norm=3.0, mechanism="laplace", delta=0.0, random_state=0),
                _NO_TRAINING_LABELS,
            ),
            Checked(
                "DPKMeans[coreset]",
                DPKMeans(data_norm=3.0, algorithm="coreset", random_state=0),
                _NO_TRAINING_LABELS,
            ),
        ],
    ),
    "DPKernelKMeans": Case(
        DPKernelKMeans(n_clusters=3, random_state=0),
        _normal,
        output="predict",
        checked=[
            Checked("DPKernelKMeans", DPKernelKMeans(random_state=0), _NO_TRAINING_LABELS),
            Checked(
                "DPKernelKMeans[auto,20]",
                DPKernelKMeans(n_components=20, max_iter="auto", random_state=0),
                _NO_TRAINING_LABELS,
            ),
            Checked(
                "DPKernelKMeans[clip_norm=auto]",
                DPKernelKMeans(clip_norm="auto", random_state=0),
                _NO_TRAINING_LABELS,
            ),
        ],
    ),
    "DPSEPRegressor": Case(
        DPSEPRegressor(
            hidden_layer_sizes=(4,), n_epochs=1, feature_bounds=(-3, 3), target_bounds=(-3, 3), random_state=0
        ),
        _normal,
        fit_kwargs=lambda X: {"y": np.linspace(-1.0, 1.0, len(X))},
        output="predict",
        checked=[
            Checked(
                "DPSEPRegressor[clipped]",
                DPSEPRegressor(
                    hidden_layer_sizes=(5,),
                    n_epochs=2,
                    mechanism="clipped",
                    feature_bounds="nonprivate",
                    target_bounds="nonprivate",
                    random_state=0,
                ),
            ),
            # The private instance recalibrates its noise for every sample size
            # the checks use (seconds each, via autodp's subsampled RDP).
            Checked(
                "DPSEPRegressor[dp]",
                DPSEPRegressor(
                    hidden_layer_sizes=(5,),
                    n_epochs=2,
                    feature_bounds="nonprivate",
                    target_bounds="nonprivate",
                    random_state=0,
                ),
                slow=True,
            ),
        ],
    ),
}


# skorch's own NeuralNet.__init__ sets history_, initialized_ and virtual_params_.
_SKORCH_INIT = {
    "check_no_attributes_set_in_init": ExpectedFailure(
        "skorch's NeuralNet.__init__ sets history_, initialized_, virtual_params_", AssertionError
    )
}

# The nets compute in float32, and the check compares a permuted batch's
# outputs at atol=1e-9, a float64 tolerance.  Which kernel (and so which
# summation order) computes a row depends on where the row falls in the batch,
# and a float32 dot product of length k changes by at most gamma_k =
# k u / (1 - k u) of sum |x_i w_i| when the order changes (Higham 2002, eq.
# 3.5; u = 2**-24).  The DefaultMLP's widest fan-in is its 32 hidden units
# (gamma_32 = 1.9e-6); 1e-5 leaves a factor 5 for the output layer and the
# softmax.  A real dependence on the other rows moves outputs by O(1).
_FLOAT32_ORDER = {
    "check_methods_sample_order_invariance": Tolerance(
        "float32 network: summation order moves outputs by ~1e-7 (bound 32 * 2**-24 per layer)",
        rtol=1e-5,
        atol=1e-5,
    )
}


def _neural_cases():
    # torch and skorch are optional.
    try:
        from skdp.nn import DPNeuralNetClassifier, DPNeuralNetRegressor
    except ImportError:
        return {}
    common = dict(noise_multiplier=1.0, epsilon=None, max_epochs=1, batch_size=16, verbose=0, random_state=0)
    checked = dict(common, max_epochs=2, lr=0.1)
    from skdp.generative import DPGenerativeMixture

    small = dict(generator="vae", hidden_units=8, n_epochs=2, batch_size=16, random_state=0)
    return {
        "DPGenerativeMixture": Case(
            DPGenerativeMixture(
                n_clusters=2,
                generator="vae",
                hidden_units=8,
                n_components=20,
                kmeans_iter=2,
                n_epochs=1,
                batch_size=16,
                random_state=0,
            ),
            _binary,
            output="score_samples",
            continuous=False,
            checked=[
                Checked(
                    "DPGenerativeMixture",
                    DPGenerativeMixture(n_clusters=2, n_components=20, kmeans_iter=2, **small),
                    _NO_TRAINING_LABELS,
                ),
                Checked(
                    "DPGenerativeMixture[marginals]",
                    DPGenerativeMixture(n_clusters=2, n_components=20, kmeans_iter=2, random_state=0),
                    _NO_TRAINING_LABELS,
                ),
                Checked(
                    "DPGenerativeMixture[rbm,1]",
                    DPGenerativeMixture(n_clusters=1, **{**small, "generator": "rbm"}, n_chains=10),
                    _NO_TRAINING_LABELS,
                ),
            ],
        ),
        "DPNeuralNetClassifier": Case(
            DPNeuralNetClassifier(classes=[0, 1], **common),
            _normal,
            fit_kwargs=lambda X: {"y": np.arange(X.shape[0]) % 2},
            output="predict_proba",
            continuous=False,  # float32 inputs: 1e300 overflows and is refused with a clear ValueError
            checked=[
                Checked(
                    "DPNeuralNetClassifier",
                    # scikit-learn's checks fit many label sets: the opt-in non-private mode.
                    DPNeuralNetClassifier(classes="nonprivate", **checked),
                    _SKORCH_INIT,
                    _FLOAT32_ORDER,
                ),
                Checked(
                    "DPNeuralNetClassifier[vmap]",
                    DPNeuralNetClassifier(classes="nonprivate", clipping_mode="vmap", **checked),
                    _SKORCH_INIT,
                    _FLOAT32_ORDER,
                ),
            ],
        ),
        "DPNeuralNetRegressor": Case(
            DPNeuralNetRegressor(**common),
            _normal,
            fit_kwargs=lambda X: {"y": np.linspace(-1.0, 1.0, X.shape[0]).reshape(-1, 1)},
            output="predict",
            continuous=False,
            checked=[
                Checked("DPNeuralNetRegressor", DPNeuralNetRegressor(**checked), _SKORCH_INIT, _FLOAT32_ORDER)
            ],
        ),
    }


CASES.update(_neural_cases())


def _modes():
    """Every mechanism and mode of each estimator, as (case name, params to set).

    The release-surface test fits each of them: a fitted attribute, a nested
    estimator or a generator that only one mode keeps must not slip through.
    """
    modes = {
        # The issue-20 defaults' predecessors stay pinned as modes: the paper's
        # two-count release, Laplace means under RDP, RDP composition, DP-SEP's
        # batches without replacement.
        "DPBetaBernoulli(laplace)": [{}, {"count_release": "paper"}],
        "DPBetaBernoulli(ops)": [{}],
        "DPNaiveBayesHMM(laplace)": [{}, {"mechanism": "ops"}, {"mechanism": "none"}],
        "DPGaussianMixture": [
            {},
            {"covariance_type": "tied"},
            {"covariance_type": "spherical", "mean_mechanism": "gaussian", "delta": 1e-5},
            {"estimator": "mle", "component_releases": "separate", "delta": 1e-5},
            {"mean_mechanism": "laplace", "composition": "rdp"},
            {"data_norm": "auto"},
        ],
        "DPKMeans": [{}, {"mechanism": "laplace", "delta": 0.0}, {"max_iter": "auto"}, {"data_norm": "auto"}],
        "DPKernelKMeans": [{}, {"kernel": "laplacian", "clip_norm": 2.0}, {"composition": "rdp"}],
        "DPSEPRegressor": [
            {},
            {"mechanism": "clipped"},
            {"mechanism": "none"},
            {"sampling": "without_replacement", "composition": "rdp"},
            # 3 features: "auto" bounds are located (else refused) from n * epsilon = 1,498
            # on; the tests fit 40 to 120 rows.  RDP calibrates a large epsilon in
            # milliseconds (PLD in seconds).
            {
                "feature_bounds": "auto",
                "target_bounds": "auto",
                "epsilon": 50.0,
                "sampling": "without_replacement",
                "composition": "rdp",
            },
        ],
        "DPStandardScaler": [
            {},
            {"delta": 0.0},
            {"bounds": "nonprivate"},
            {"bounds": "auto"},
            {"with_std": False},
        ],
        "DPMinMaxScaler": [{}, {"delta": 0.0}],
        "DPPCA": [{}, {"centered": True}, {"data_norm": "nonprivate"}, {"data_norm": "auto"}],
        "DPGenerativeMixture": [
            {},
            {"n_clusters": 1},
            {"generator": "rbm", "clip_norm": 1.0},
            {"generator": "marginals"},
        ],
        "DPNeuralNetClassifier": [
            {},
            {"clipping_mode": "vmap"},
            {"noise_multiplier": None, "epsilon": 3.0},
            {"noise_multiplier": None, "epsilon": 3.0, "composition": "rdp"},
        ],
        "DPNeuralNetRegressor": [{}],
    }
    return [(name, params) for name, variants in modes.items() if name in CASES for params in variants]


#: (id, case, params): each mode of each registered estimator.
MODE_CASES = [
    (
        name + ("" if not params else "[" + ",".join(f"{k}={v}" for k, v in params.items()) + "]"),
        CASES[name],
        params,
    )
    for name, params in _modes()
]


# --- composites: the public estimators made of other estimators ---------------------------------


@dataclass
class Composite:
    """A public composite (pipeline, search) with data it accepts.

    scikit-learn's estimator checks do not run on meta-estimators (they need
    the steps or the estimator they wrap); ``tests/test_common.py`` instead
    fits each composite here once and checks what every public estimator
    promises: ``privacy_spent_`` within the request, ``clone`` and pickle round
    trips that keep the parameters and the output.
    """

    estimator: Callable  # () -> an unfitted instance
    make_X: Callable  # (rng) -> X
    #: Method whose output must survive pickling unchanged.
    output: str = "predict"


def _composites():
    from skdp.cluster import DPKMeans as _KMeans
    from skdp.model_selection import DPGridSearchCV, DPRandomizedSearchCV
    from skdp.pipeline import DPPipeline, make_pipeline

    def pipeline():
        return make_pipeline(
            DPStandardScaler(bounds=(-4.0, 4.0)),
            _KMeans(2, data_norm=6.0),
            epsilon=2.0,
            delta=1e-5,
            random_state=0,
        )

    def named_pipeline():
        return DPPipeline(
            [("scale", DPStandardScaler(bounds=(-4.0, 4.0))), ("gm", DPGaussianMixture(2, data_norm=6.0))],
            epsilon=2.0,
            delta=1e-5,
            random_state=0,
        )

    search_params = dict(
        epsilon=2.0, delta=1e-5, n_trials_mean=2.0, score_bounds=(-20.0, 0.0), random_state=0
    )

    def grid():
        return DPGridSearchCV(DPGaussianMixture(data_norm=6.0), {"n_components": [1, 2]}, **search_params)

    def randomized():
        return DPRandomizedSearchCV(
            DPGaussianMixture(data_norm=6.0), {"n_components": [1, 2]}, n_iter=2, **search_params
        )

    def blobs(rng):
        return np.concatenate([rng.normal(-2.0, 0.5, size=(300, 2)), rng.normal(2.0, 0.5, size=(300, 2))])

    return {
        "DPPipeline(make_pipeline)": Composite(pipeline, blobs),
        "DPPipeline": Composite(named_pipeline, blobs, output="score_samples"),
        "DPGridSearchCV": Composite(grid, blobs),
        "DPRandomizedSearchCV": Composite(randomized, blobs),
    }


#: Public composites (pipelines, searches), by test id.
COMPOSITES = _composites()
