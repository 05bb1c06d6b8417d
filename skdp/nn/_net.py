"""skorch nets trained by DP-SGD: DPNeuralNetClassifier and DPNeuralNetRegressor.

The nets override exactly the steps of skorch's training loop that DP changes
(skorch's design: small overridable methods, no forked loop):

* ``fit`` runs the privacy template of :class:`skdp.base.DPEstimatorMixin`
  (``_private_fit``): the parameters (``_check_params``), the plan from the
  parameters alone (``_privacy_plan``: what is reserved, and the whole DP-SGD
  plan when ``n_samples`` is declared), the reservation, before the data is
  read on every path, the data (``_validate_input``), skorch's
  ``initialize`` and fit loop (``_fit_private``), and the settle
  (``_end_private_fit``; with ``noise_multiplier`` given, epsilon is
  reported, not enforced);
* ``fit_loop`` makes the plan (sampling rate, number of steps, noise
  multiplier) from a *public* dataset size -- ``n_samples`` when declared,
  else a noisy count released on the fit's ledger -- and builds the
  :class:`~skdp.nn.DPSGDEngine`;
* ``get_iterator(training=True)`` returns the Poisson-sampling iterator of
  that plan;
* ``train_step`` hands each batch to the engine, which writes the noisy
  clipped gradient into ``param.grad``, then runs the optimiser;
* ``run_single_epoch`` records only released quantities in the history (no
  exact training loss, no realised batch size).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import numbers
import warnings
from types import SimpleNamespace

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_consistent_length, column_or_1d, validate_data
from skorch import NeuralNet, NeuralNetClassifier, NeuralNetRegressor
from skorch.dataset import unpack_data
from skorch.utils import TeeGenerator, is_dataset, to_tensor

from ..base import (
    AFTER_FIT_COUNTER,
    PRIVACY_OWNER,
    DPEstimatorMixin,
    _user_stacklevel,
    errors_without_data_values,
    warn_privacy_leak,
)
from ..privacy import ADD_REMOVE, DEFAULT_COMPOSITION, PrivacySpent
from ..privacy.calibration import calibrate_noise_multiplier
from ..privacy.centring import DEFAULT_BOUNDS_BUDGET
from ..privacy.dpsgd import (
    calibrate_dpsgd_noise,
    dataset_size_event,
    dpsgd_plan,
    dpsgd_step_event,
    release_dataset_size,
)
from ..privacy.mechanisms.torch_noise import TorchGaussianMechanism
from ..privacy.norm_selection import DPNormOptions
from ._adaptive_clipping import DPNormClipping
from ._callbacks import EpsilonSpent
from ._checks import _is_auto, check_net_params
from ._constant import (
    MAX_MAP_SHARE,
    centre_epsilon,
    constant_events,
    release_target_median,
    release_target_spread,
    spread_n_epsilon,
)
from ._defaults import (
    MIN_TRAIN_SNR,
    MIN_WIDTH,
    auto_schedule,
    min_training_rho,
    trains_default_net,
)
from ._engine import DPSGDEngine, FixedClipping, PoissonBatchIterator
from ._inputs import release_input_map
from ._losses import KeyedBatchLoss, batch_loss_key, unreduced_loss
from ._per_example import manual_seed
from ._plan import _plan_cost, check_staged_epsilon, input_bounds_plan, privacy_plan, public_width
from ._target import MAD_TO_SD, fold_output, training_scale

__all__ = ["DPNeuralNetClassifier", "DPNeuralNetRegressor", "DefaultMLP"]

_DP_PARAMS = (
    "epsilon",
    "delta",
    "composition",
    "clip_norm",
    "clip_norm_max",
    "noise_multiplier",
    "clip_norm_bins",
    "clip_norm_noise_ratio",
    "clipping_mode",
    "secure_noise",
    "accountant",
    "random_state",
    "n_samples",
    "scale_inputs",
    "bounds_budget",
)

#: Relative noise of the released count (std over the noisy count) above
#: which a fit with ``n_samples="auto"`` warns that declaring the size would
#: give an exact plan: at 10% the realised batch sizes are off by about 10%.
COARSE_COUNT = 0.1

#: Batch size of prediction when ``batch_size="auto"`` (not part of any plan).
_PREDICT_BATCH = 1024

#: What a fitted net holds besides its parameters (see
#: ``DPEstimatorMixin._released_attributes``).  skorch's own state: the
#: module, optimiser and criterion (trained by DP-SGD: post-processing of the
#: accounted steps), the callbacks and the history (which records only the
#: epsilon spent and the clipping bounds, see ``run_single_epoch``), and
#: skorch's bookkeeping of which of them exist.  The plan attributes are
#: functions of hyperparameters and of the declared or noisy dataset size.
_NET_RELEASED_ATTRIBUTES = frozenset(
    {
        # skorch
        "module_",
        "optimizer_",
        "criterion_",
        "history_",
        "callbacks_",
        "initialized_",
        "virtual_params_",
        "prefixes_",
        "cuda_dependent_attributes_",
        "init_context_",
        "_modules",
        "_optimizers",
        "_criteria",
        "_params_to_validate",
        # the DP plan
        "noise_multiplier_",
        "clip_noise_multiplier_",
        "sampling_rate_",
        "n_steps_",
        "noisy_n_samples_",
        "clipping_mode_",
        # the "auto" schedule and the private input scaling
        "batch_size_",
        "max_epochs_",
        "lr_",
        "input_centre_",
        "input_scale_",
        "input_clip_",
    }
)


_MISSING = object()


def _same(value, default):
    """Whether a parameter is at its default (for the repr); arrays and lists compared by value."""
    if default is _MISSING:
        return False
    try:
        return (
            bool(np.array_equal(value, default)) if not isinstance(value, (str, type)) else value == default
        )
    except Exception:  # noqa: BLE001 - a value that cannot be compared is shown
        return value is default


def _short_repr(value):
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, torch.nn.Module):
        return f"{type(value).__name__}(...)"
    if isinstance(value, np.ndarray):
        return repr(value.tolist())
    return repr(value)


class DefaultMLP(torch.nn.Module):
    """The module used when ``module=None``: one hidden ReLU layer.

    Its sizes come from the data's shape (``n_features``, and the number of
    classes or targets), which are public; ``module__hidden_units`` sets the
    width.

    Parameters
    ----------
    n_features : int
    n_outputs : int
    hidden_units : int, default=32
    softmax : bool, default=True
        Return class probabilities (classifier with skorch's default NLLLoss)
        or raw outputs (regressor, or classifier with ``CrossEntropyLoss``).
    """

    def __init__(self, n_features, n_outputs, hidden_units=32, softmax=True):
        super().__init__()
        self.hidden = torch.nn.Linear(n_features, hidden_units)
        self.output = torch.nn.Linear(hidden_units, n_outputs)
        self.softmax = softmax

    def forward(self, X):
        """Class probabilities (``softmax=True``) or raw outputs of ``X``, shape ``(n, n_outputs)``."""
        out = self.output(torch.relu(self.hidden(X)))
        return torch.softmax(out, dim=-1) if self.softmax else out


_NO_PARTIAL_FIT = (
    "{} does not support partial_fit: each fit is one privacy plan (epsilon, steps, noise). Call fit instead."
)


class _InstanceAttributeError:
    """A method that exists on the class (for introspection) and not on instances."""

    def __init__(self, function):
        self.function = function
        functools.update_wrapper(self, function)

    def __get__(self, instance, owner=None):
        if instance is None:
            return self.function
        raise AttributeError(_NO_PARTIAL_FIT.format(type(instance).__name__))


class _DPNeuralNetMixin(DPEstimatorMixin):
    """DP-SGD life cycle shared by the classifier and the regressor."""

    # Poisson sampling amplifies only under add/remove neighbours.
    _neighbouring = ADD_REMOVE

    _released_attributes = _NET_RELEASED_ATTRIBUTES

    def _store_dp_params(self, **params):
        for name in _DP_PARAMS:
            setattr(self, name, params[name])

    # -- scikit-learn / skorch plumbing ------------------------------------

    def _get_param_names(self):
        # skorch lists every public-looking attribute; our private fit state
        # (ledger, engine, flags) must not leak into get_params / clone.
        return [k for k in super()._get_param_names() if not k.startswith("_")]

    @property
    def _default_callbacks(self):
        # skorch's train_loss (the exact mean loss of the private batches) and
        # epoch_timer (the wall time of Poisson batches of unnoised sizes) are
        # releases outside the guarantee: not installed.  The validation
        # scorers only act when the user sets train_split (warned in fit).
        # The epsilon column (composed by the accountant at each epoch's end,
        # seconds under PLD) is installed when the table is printed
        # (verbose >= 1); silent fits (the default) skip it.
        dropped = {"train_loss", "epoch_timer"}
        callbacks = [(name, cb) for name, cb in super()._default_callbacks if name not in dropped]
        silent = isinstance(self.verbose, numbers.Integral) and not self.verbose
        if not silent:
            names = [name for name, _ in callbacks]
            at = names.index("print_log") if "print_log" in names else len(callbacks)
            callbacks.insert(at, ("epsilon", EpsilonSpent()))
        return callbacks

    #: Parameters the repr always shows (the privacy target and the training length).
    _repr_always = ("epsilon", "max_epochs")

    def __repr__(self):
        """scikit-learn's style: the class, the privacy target, then every parameter set away from its default.

        (skorch's repr lists the module only.)  Classes and modules are
        shown by name, a module instance as ``Name(...)``.
        """
        defaults = {}
        for cls in reversed(type(self).__mro__):
            init = cls.__dict__.get("__init__")
            if init is None:
                continue
            for name, param in inspect.signature(init).parameters.items():
                if param.default is not inspect.Parameter.empty:
                    defaults[name] = param.default
        params = self.get_params(deep=False)
        names = [n for n in self._repr_always if n in params]
        names += sorted(
            n for n, v in params.items() if n not in names and not _same(v, defaults.get(n, _MISSING))
        )
        body = ", ".join(f"{n}={_short_repr(params[n])}" for n in names)
        return f"{type(self).__name__}({body})"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        tags.input_tags.allow_nan = False
        tags.non_deterministic = self.random_state is None
        return tags

    def _check_params(self):
        """Refuse bad parameters before the budget and the data (:func:`._checks.check_net_params`)."""
        check_net_params(self)

    def _batch_size_param(self):
        return self.get_params_for("iterator_train").get("batch_size", self.batch_size)

    def initialize_module(self):
        """skorch's module initialisation, or :class:`DefaultMLP` sized from the data when ``module=None``."""
        if self.module is not None:
            return super().initialize_module()
        state = getattr(self, "_dp_fit", None)
        shape = None if state is None else state.default_sizes
        if shape is None:
            # Before any data: a placeholder; fit rebuilds it from the data's shape.
            shape = (1, 1)
        kwargs = self.get_params_for("module")
        crit = self.criterion if isinstance(self.criterion, type) else type(self.criterion)
        # CrossEntropyLoss takes logits (skorch's predict_proba then applies the softmax).
        softmax = self._default_softmax and not issubclass(crit, torch.nn.CrossEntropyLoss)
        kwargs.setdefault("softmax", softmax)
        schedule = None if state is None else state.schedule
        if schedule is not None and "hidden_units" not in kwargs:
            # The width of the "auto" rule (skdp.nn._defaults.auto_width).
            kwargs["hidden_units"] = schedule.hidden_units
        self.module_ = DefaultMLP(*shape, **kwargs)
        return self

    def get_params_for_optimizer(self, prefix, named_parameters):
        """skorch's optimiser arguments, with ``lr="auto"`` resolved (the schedule's rate)."""
        args, kwargs = super().get_params_for_optimizer(prefix, named_parameters)
        if _is_auto(kwargs.get("lr")):
            state = getattr(self, "_dp_fit", None)
            schedule = None if state is None else state.schedule
            kwargs["lr"] = auto_schedule(1, None, None, None, 0.5).lr if schedule is None else schedule.lr
        return args, kwargs

    # -- data validation -----------------------------------------------------

    def _validate_input(self, X, y=None):
        """The training data, validated after the reservation (reading it is a release).

        Returns ``X`` and ``y`` as skorch will get them, and the sizes of
        :class:`DefaultMLP` (``module=None``) from the data's public shape.
        """
        if _passes_through(X):
            for leaf in _tensor_leaves(X if not is_dataset(X) else None):
                if not torch.isfinite(leaf).all():
                    raise ValueError("Input X contains NaN or infinity.")
            return SimpleNamespace(X=X, y=y, default_sizes=None, validated_targets=False)
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None "
                "(pass a Dataset as X to provide targets another way)."
            )
        X = validate_data(self, X, reset=True, dtype=np.float32, allow_nd=True)
        y = check_array(y, ensure_2d=False, dtype=None, input_name="y")
        check_consistent_length(X, y)
        y = self._validate_target(y)
        default_sizes = None
        if self.module is None:
            if X.ndim != 2:
                raise ValueError(f"module=None needs 2-D X, got shape {X.shape}; pass a module.")
            default_sizes = (X.shape[1], self._n_outputs(y))
        return SimpleNamespace(X=X, y=y, default_sizes=default_sizes, validated_targets=True)

    def _validate_predict_X(self, X):
        if _passes_through(X):
            return X
        X = validate_data(self, X, reset=False, dtype=np.float32, allow_nd=True)
        return self._scale(X)

    def _scale(self, X):
        """``(X - c) / s`` with the released centre and scale of ``scale_inputs`` (identity without)."""
        centre = getattr(self, "input_centre_", None)
        if centre is None:
            return X
        scaled = (X - centre.astype(np.float32)) / np.asarray(self.input_scale_, dtype=np.float32)
        clip = getattr(self, "input_clip_", None)
        if clip is not None:
            scaled = np.clip(scaled, -clip, clip)
        return scaled.astype(np.float32)

    def predict_proba(self, X):
        """skorch's ``predict_proba`` after validating ``X`` like ``fit`` did."""
        return super().predict_proba(self._validate_predict_X(X))

    # -- fit: the privacy template (skdp.base.DPEstimatorMixin._private_fit) -----

    @errors_without_data_values
    def fit(self, X, y=None, **fit_params):
        """Train the module with DP-SGD and set ``privacy_spent_``.

        Parameters
        ----------
        X : array-like, tensor, dict or Dataset
            Training inputs (anything skorch accepts).
        y : array-like or None
            Targets.
        **fit_params : dict
            Not supported (per-example gradients need every forward argument
            batched with the examples); pass extra inputs through a dict ``X``.

        Returns
        -------
        self
        """
        if fit_params:
            raise TypeError(
                f"fit parameters {sorted(fit_params)} are not supported by DP nets; pass extra inputs in a dict X."
            )
        # skorch nets have no _parameter_constraints, so fit is not decorated
        # by private_fit_context; the template resolves (and checks) the
        # estimator's secure_noise itself.
        try:
            return self._private_fit(X, y)
        finally:
            # The fit state (_fit_private) holds the noise generators
            # (numpy and torch) and the engine: none of it outlives the fit.
            self.__dict__.pop("_dp_fit", None)
            self.__dict__.pop("_public_n_features", None)

    def _check_public_input(self, X, y=None, **fit_params):  # X's width, for a declared size's plan
        self.__dict__["_public_n_features"] = None if _passes_through(X) else public_width(self, X)

    def _accepts_one_dimensional_input(self):
        # A user's module may read one value per row (token ids); the
        # default module refuses 1-D X in _validate_input, naming the shape.
        return self.module is not None

    def _noise_mechanisms(self):
        # DP-SGD's torch noise has no exact sampler: the template refuses
        # secure_noise=True before the budget and the data.
        return (TorchGaussianMechanism,)

    def _privacy_plan(self):
        """What is reserved, and the DP-SGD plan the parameters fix (:func:`._plan.privacy_plan`)."""
        return privacy_plan(self)

    def _check_staged_epsilon(self, first_events):
        """Refuse an epsilon a staged plan cannot certify (:func:`._plan.check_staged_epsilon`)."""
        check_staged_epsilon(self, first_events)

    def _scales_inputs(self):
        # "auto": the default module, when epsilon drives the plan.
        return self.scale_inputs is True or (
            _is_auto(self.scale_inputs) and self.module is None and self.noise_multiplier is None
        )

    def _input_bounds_plan(self, n_public, warn=True, n_features=None):
        """The releases of ``scale_inputs`` for a public size, or None (:func:`._plan.input_bounds_plan`)."""
        return input_bounds_plan(self, n_public, warn, n_features)

    def _schedule(self, n_public, n_features=None, n_outputs=None):
        """The :class:`~skdp.nn._defaults.TrainingSchedule` for a public size (``"auto"`` entries resolved)."""
        return auto_schedule(
            n_public,
            n_features,
            n_outputs,
            self.epsilon if self.noise_multiplier is None else None,
            self.delta,
            batch_size=self._batch_size_param(),
            max_epochs=self.max_epochs,
            lr=self.lr,
            hidden_units=self.get_params_for("module").get("hidden_units", "auto"),
        )

    def _planned_events(self, noise_multiplier, plan, count_std=None):
        """Events of the fit at gradient noise multiplier ``noise_multiplier``.

        The noisy count's (``count_std`` given: ``n_samples='auto'``), then
        ``plan.n_steps`` DP-SGD steps at the plan's rate
        (:func:`~skdp.nn.dpsgd_step_event`, DPNorm's histogram included).
        """
        ratio = DPNormOptions.of(self).histogram_noise_ratio
        clip_z = None if ratio is None else ratio * noise_multiplier
        steps = dpsgd_step_event(noise_multiplier, plan.sampling_rate, clip_z, count=plan.n_steps)
        return [steps] if count_std is None else [dataset_size_event(count_std), steps]

    # _validate_input is the data validation above; no _calibrate: the plan
    # is completed in fit_loop, where the training set is known.

    def _fit_private(self, data, plan, rng, ledger):
        # The fit state: read by fit_loop, get_iterator, train_step, the
        # EpsilonSpent callback and the settle; dropped by fit.
        self._dp_fit = state = SimpleNamespace(
            ledger=ledger,
            rng=rng,
            engine=None,
            default_sizes=data.default_sizes,
            validated_targets=data.validated_targets,
            noisy_n=None,
            constant=None,
            **vars(plan.settings),
        )
        X = self._prepare_inputs(state, data)
        with _torch_seeded(rng if self.random_state is not None else None):
            # NeuralNet.fit without its call to the (refused) public partial_fit.
            self.initialize()
            NeuralNet.partial_fit(self, X, data.y, _routing_method="fit")
        # Ghost clipping may have fallen back to vmap during training.
        self.clipping_mode_ = self.clipping_mode if state.engine is None else state.engine.clipping_mode

    def _prepare_inputs(self, state, data):
        """Release what the default module needs before it is built; return the inputs skorch trains on.

        With an array ``X`` and no validation split (the training set is
        then all of ``X``), the noisy count of ``n_samples='auto'`` is
        released here rather than in ``fit_loop``: the ``"auto"`` width and
        the input scaling need the public size.  ``scale_inputs`` then
        releases (where a column can be located at this ``n`` and ``d``,
        :func:`._plan.input_bounds_plan`; else the one-scale map of
        :func:`~skdp.privacy.centring.private_centring`, the median of
        ``||x - c||``) a box ``[a_j, b_j]`` of every column, about its ``q`` and
        ``1 - q`` quantiles (``q`` from :func:`._defaults.input_box_level`,
        5 % to 10 %; :func:`~skdp.privacy.quantiles.announced_histogram_box`:
        a log histogram and a linear one inside each column's range,
        add/remove neighbours, the public size in the quantiles' ranks), and
        the module is trained on ``(x_j - c_j) / s_j`` with ``c_j = (a_j +
        b_j) / 2`` and ``s_j = (b_j - a_j) / (2 Phi^-1(1 - q) INPUT_RMS)``: a
        normal column reaches it at about ``INPUT_RMS = 0.5`` rms, whatever
        the other columns' scales and offsets (since 2026-11-28; before, one
        scale for all columns, the median of ``||x - c||``, which left a
        column a thousand times smaller than the others at about 0: shapes
        drawn by ``benchmarks/zoo.py --unseen`` trained nothing);
        ``predict`` applies the same released map.
        """
        self.input_centre_ = self.input_scale_ = self.input_clip_ = None
        X = data.X
        if data.default_sizes is None or self.train_split is not None:
            return X
        n_public = self._public_size(state, X.shape[0])
        state.schedule = self._schedule(n_public, *data.default_sizes)
        if self._predicts_constant(n_public, *data.default_sizes):
            # No net, no input scaling: the budget buys the constant.
            state.constant = self._release_constant(state, data.y, n_public)
            return X
        if self.n_samples == "auto" or state.input_bounds is None:
            # A declared size's plan was made before the data, silently: the
            # same public rule gives the same plan here, and warns if inputs
            # are to be scaled and cannot be.
            # The per-column plan needs d: the noisy count's reads it, a declared size's saw its own.
            d = X.shape[1] if self.n_samples == "auto" else state.input_n_features
            state.input_bounds = self._input_bounds_plan(n_public, n_features=d)
        if state.input_bounds is None:
            return X
        released = release_input_map(state.input_bounds, X, n_public, state.rng, state.ledger, self.epsilon)
        self.input_centre_, self.input_scale_, self.input_clip_ = released
        return self._scale(X)

    def _predicts_constant(self, n_public, n_features, n_outputs):
        """Whether the default falls back to a private constant (the regressor's rule; never for the classifier)."""
        return False

    def _public_size(self, state, n_rows):
        """The declared ``n_samples``, or the noisy count of ``n_rows`` (released once per fit)."""
        if self.n_samples != "auto":
            return self.n_samples
        if state.noisy_n is None:
            # Rounded (post-processing): a count is a whole number, and whole
            # numbers repeat across fits, so their RDP curves are cached.
            state.noisy_n = max(
                1, round(release_dataset_size(n_rows, state.count_noise_std, state.rng, state.ledger))
            )
            if state.count_noise_std > COARSE_COUNT * state.noisy_n:
                # Decided from the released count and its public std
                # (post-processing): the plan's batch sizes are off by about
                # this much, which a declared size avoids.
                warnings.warn(
                    f"n_samples='auto': the training size was released with noise of std "
                    f"{state.count_noise_std:.3g} (the fixed share of the budget a count costs), about "
                    f"{state.count_noise_std / state.noisy_n:.0%} of the noisy count, so the plan's batch "
                    "sizes and steps are off by about as much. If the number of training rows is public, "
                    "declare it (n_samples=len(X)): no count is released and the plan is exact.",
                    UserWarning,
                    stacklevel=_user_stacklevel(),
                )
        return state.noisy_n

    def _discard_fit(self):
        # skorch's own bookkeeping, set in __init__ and not a release (its
        # private names and the virtual parameters the user set), survives,
        # and the net is left uninitialized: predict refuses and the next fit
        # starts as a fresh net's would.
        # Not kept: the fit's state (its generator and ledger), and skdp's own
        # fitted metadata (the draw counter, the owning composite).
        dropped = {"_dp_fit", AFTER_FIT_COUNTER, PRIVACY_OWNER} | set(self._working_state)
        kept = {
            k: v
            for k, v in vars(self).items()
            if k.startswith("_") and not k.startswith("__") and k not in dropped
        }
        kept["virtual_params_"] = self.__dict__.get("virtual_params_", {})
        super()._discard_fit()
        self.__dict__.update(kept)
        self.initialized_ = False
        self.history_ = None  # skorch re-creates it on the next initialize

    def _end_private_fit(self, ledger, plan):
        if self.noise_multiplier is None:
            super()._end_private_fit(ledger, plan)
            return
        # epsilon is reported, not enforced, when the noise was given; the
        # hold covers the planned steps before they were taken (extended
        # from the noisy count with n_samples='auto'), and a run never takes
        # more steps than planned.
        # The ledger holds the planned events (one per step, merged by the
        # composition): the plan's cost, composed once per plan.
        spent = _plan_cost(ledger.events, self.delta, ledger.composition)
        self.privacy_spent_ = PrivacySpent(float(spent.epsilon), float(spent.delta))
        self.privacy_ledger_ = ledger
        self._settle_budget(self.privacy_spent_)

    def partial_fit(self, X, y=None, classes=None, **fit_params):
        """Not available: each fit is one privacy plan (epsilon, steps, noise).

        Read from a net, ``partial_fit`` raises ``AttributeError`` (so
        ``hasattr(net, "partial_fit")`` is False and scikit-learn does not try
        incremental fitting); call :meth:`fit`, which trains from scratch.
        """
        raise AttributeError(_NO_PARTIAL_FIT.format(type(self).__name__))

    # A descriptor rather than a property: read from the class it is the
    # function above, with skorch's ``classes`` parameter, which scikit-learn
    # < 1.9's metadata routing looks for (skorch declares
    # ``__metadata_request__partial_fit = {"classes": UNUSED}``); read from an
    # instance it raises, as a missing method would.
    partial_fit = _InstanceAttributeError(partial_fit)

    def fit_loop(self, X, y=None, epochs=None, *, _routing_method="fit", **fit_params):
        """skorch's fit loop with the DP-SGD plan made where the training set is known.

        With ``n_samples='auto'`` the number of training records is released
        with Gaussian noise (:func:`~skdp.nn.release_dataset_size`, on the
        fit's ledger) and the plan is computed from that noisy count; with a
        declared ``n_samples`` it was made before the data.  The loop runs
        the plan's ``max_epochs`` epochs (``epochs`` cannot change a plan).
        """
        state = getattr(self, "_dp_fit", None)
        if state is None:
            raise RuntimeError("DP nets train only inside fit.")
        if fit_params:
            raise TypeError(f"fit parameters {sorted(fit_params)} are not supported by DP nets.")
        self.check_data(X, y)
        self.check_training_readiness()
        dataset_train, dataset_valid = self.get_split_datasets(X, y)
        self._plan_training(state, dataset_train)
        on_epoch_kwargs = {"dataset_train": dataset_train, "dataset_valid": dataset_valid}
        if not self.max_epochs_:
            # The constant of the regressor's fallback: no step is planned.
            return self
        iterator_train = self.get_iterator(dataset_train, training=True)
        iterator_valid = None if dataset_valid is None else self.get_iterator(dataset_valid, training=False)
        for _ in range(self.max_epochs_):
            self.notify("on_epoch_begin", **on_epoch_kwargs)
            self.run_single_epoch(iterator_train, training=True, prefix="train", step_fn=self.train_step)
            self.run_single_epoch(
                iterator_valid, training=False, prefix="valid", step_fn=self.validation_step
            )
            self.notify("on_epoch_end", **on_epoch_kwargs)
        return self

    def _plan_training(self, state, dataset):
        if len(dataset) < 1:
            raise ValueError("The training set is empty.")
        if state.constant is not None:
            self._set_constant_module(state)
            return
        # The input scaling's releases (an array X) are on the ledger already:
        # the staged calibration below counts them in the first stage.
        if state.dpsgd_plan is None:
            noisy_n = self._public_size(state, len(dataset))
            if state.schedule is None:
                state.schedule = self._schedule(noisy_n)
            plan = dpsgd_plan(noisy_n, state.schedule.batch_size, state.schedule.max_epochs)
            state.dpsgd_plan = plan
            if state.noise_multiplier is None:
                # A staged plan: the steps are planned from the noisy count,
                # so the template's filter calibrates them (valid whatever
                # the count's outcome).
                self._check_staged_epsilon(state.ledger.events)
                state.noise_multiplier = self._calibrate_staged(
                    state.ledger, lambda z: self._planned_events(z, plan)
                )
            else:
                # The steps' cost is a function of the noisy count (public):
                # the hold grows to the whole plan's before the first step.
                events = self._planned_events(state.noise_multiplier, plan, state.count_noise_std)
                total, first = _plan_cost(events, self.delta, self.composition), self._budget_hold.held
                self._budget_hold.extend(
                    max(0.0, total.epsilon - first.epsilon), max(0.0, total.delta - first.delta)
                )
            self.noisy_n_samples_ = noisy_n
        else:
            self.noisy_n_samples_ = None
        plan, z = state.dpsgd_plan, state.noise_multiplier
        schedule = state.schedule
        self.batch_size_, self.max_epochs_, self.lr_ = schedule.batch_size, schedule.max_epochs, schedule.lr
        if _is_auto(self.lr) and "lr" not in self.get_params_for("optimizer"):
            for group in self.optimizer_.param_groups:
                # skorch built the optimiser before the public size was known.
                group["lr"] = schedule.lr
        clip_norm, clip_norm_max, clip_norm_bins, _ = DPNormOptions.of(self)
        if state.clip_noise_ratio is not None:
            clipping = DPNormClipping(clip_norm_max, clip_norm_bins, state.clip_noise_ratio * z)
        else:
            clipping = FixedClipping(clip_norm)
        device = next(self.module_.parameters()).device
        generator = torch.Generator(device=device)
        generator.manual_seed(int(state.rng.integers(2**62)))
        state.engine = DPSGDEngine(
            self.module_,
            self._per_example_loss,
            noise_multiplier=z,
            sampling_rate=plan.sampling_rate,
            expected_batch_size=plan.expected_batch_size,
            clipping=clipping,
            max_steps=plan.n_steps,
            generator=generator,
            batch_loss_fn=self._keyed_batch_loss(),
            clipping_mode=self.clipping_mode,
            # The template refused secure noise before the reservation.
            secure_noise=False,
        )
        self.noise_multiplier_ = z
        self.clip_noise_multiplier_ = clipping.clip_noise_multiplier
        self.sampling_rate_ = plan.sampling_rate
        self.n_steps_ = plan.n_steps
        self.clipping_mode_ = state.engine.clipping_mode

    def get_iterator(self, dataset, training=False):
        """Poisson-sampling iterator of the fit's plan for training (skorch's loader otherwise).

        Every record of ``dataset`` enters each batch independently with the
        plan's rate ``q``, ``steps_per_epoch`` batches per epoch; ``len(dataset)``
        only sets how many coins are flipped, never ``q`` or the steps.
        """
        if not training:
            if _is_auto(self.batch_size) and "batch_size" not in self.get_params_for("iterator_valid"):
                # Inference batches are not part of any plan.
                return self.iterator_valid(
                    dataset, **{**self.get_params_for("iterator_valid"), "batch_size": _PREDICT_BATCH}
                )
            return super().get_iterator(dataset, training=False)
        state = getattr(self, "_dp_fit", None)
        if state is None or state.engine is None:
            raise RuntimeError("DP training batches are only drawn inside fit.")
        plan = state.dpsgd_plan
        return PoissonBatchIterator(dataset, plan.sampling_rate, plan.steps_per_epoch, state.rng)

    def run_single_epoch(self, iterator, training, prefix, step_fn, **fit_params):
        """skorch's epoch, recording only released quantities when training.

        skorch records each training batch's exact mean loss and its size; under
        Poisson sampling both are unnoised functions of the private batch, so
        the training epoch records neither (``train_step`` records the batch's
        clipping bound, public or DPNorm's noisy choice).  The number of
        batches is the plan's.  Validation (only with a user-set
        ``train_split``) is skorch's, outside the guarantee.
        """
        if not training:
            return super().run_single_epoch(iterator, training, prefix, step_fn, **fit_params)
        for batch in iterator:
            self.notify("on_batch_begin", batch=batch, training=training)
            step = step_fn(batch, **fit_params)
            self.notify("on_batch_end", batch=batch, training=training, **step)
        self.history.record(prefix + "_batch_count", len(iterator))

    def _per_example_loss(self, module, Xi, yi):
        y_pred = module(**Xi) if isinstance(Xi, dict) else module(Xi)
        return self.get_loss(y_pred, yi, X=Xi, training=True), y_pred

    def _batch_per_example_loss(self, module, Xi, yi):
        # One forward pass of the whole batch (ghost clipping hooks it); the
        # criterion, vmapped over examples, gives each example's loss exactly
        # as _per_example_loss computes it on that example alone.
        y_pred = module(**Xi) if isinstance(Xi, dict) else module(Xi)
        losses = self._unreduced_loss(y_pred, yi)
        if losses is not None:
            return losses, y_pred

        def one(yp, yt, x):
            yp, yt, x = (_tree_unsqueeze(v) for v in (yp, yt, x))
            return self.get_loss(yp, yt, X=x, training=True).reshape(())

        losses = torch.func.vmap(one, randomness="different")(y_pred, yi, Xi)
        return losses, y_pred

    def _keyed_batch_loss(self):
        """``_batch_per_example_loss`` with the key ghost clipping caches its contract probe by (bare if none).

        Keyed only while the net computes its per-example losses with skdp's
        own methods (:func:`._losses.batch_loss_key` covers the criterion
        and ``get_loss``); a subclass that overrides them is probed every fit.
        """
        cls = type(self)
        stock = (
            cls._batch_per_example_loss is _DPNeuralNetMixin._batch_per_example_loss
            and cls._unreduced_loss is _DPNeuralNetMixin._unreduced_loss
        )
        key = batch_loss_key(self) if stock else None
        return (
            self._batch_per_example_loss if key is None else KeyedBatchLoss(self._batch_per_example_loss, key)
        )

    def _unreduced_loss(self, y_pred, y_true):
        """Per-example losses of a batch without vmap, or None (:func:`._losses.unreduced_loss`)."""
        return unreduced_loss(self, y_pred, y_true)

    def train_step(self, batch, **fit_params):
        """One DP-SGD step (Acs et al., Alg. 4) followed by the optimiser step."""
        self._set_training(True)
        Xi, yi = unpack_data(batch)
        Xi, yi = to_tensor(Xi, self.device), to_tensor(yi, self.device)
        self._zero_grad_optimizer()
        state = self._dp_fit
        result = state.engine.step((Xi, yi), state.ledger)
        self.notify(
            "on_grad_computed",
            named_parameters=TeeGenerator(self.get_all_learnable_params()),
            batch=batch,
            training=True,
        )
        self._step_optimizer(None)
        self.history.record_batch("clip_norm", result.threshold)
        if result.batch_size == 0:
            with torch.no_grad():
                y_pred = self.infer(Xi)
            return {"loss": torch.tensor(float("nan")), "y_pred": y_pred}
        return {"loss": result.losses.mean().detach(), "y_pred": result.aux.detach()}


@contextlib.contextmanager
def _torch_seeded(rng):
    """Seed torch's global RNG (module initialisation, dropout) from ``rng`` for the block.

    The caller's global torch RNG state is restored afterwards, so a seeded fit
    is reproducible without disturbing the user's stream.
    """
    if rng is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        manual_seed(int(rng.integers(2**62)))
        yield


def _tree_unsqueeze(obj):
    if isinstance(obj, torch.Tensor):
        return obj.unsqueeze(0)
    if isinstance(obj, dict):
        return {k: _tree_unsqueeze(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_tree_unsqueeze(v) for v in obj)
    return obj


def _passes_through(X):
    """Inputs handed to skorch as they are (Datasets, tensors, dicts of inputs)."""
    # A scipy dok_matrix is a dict: it must meet check_array's sparse refusal.
    return not sp.issparse(X) and (is_dataset(X) or isinstance(X, (dict, torch.Tensor)))


def _tensor_leaves(obj):
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point():
            yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensor_leaves(v)


_COMMON_DOC = """
    The module is trained by DP-SGD (Acs et al. 2018, Alg. 4; Abadi et al.
    2016): Poisson batches with rate ``q = batch_size / n`` for a *public*
    size ``n`` (``n_samples``, or a noisy count), per-example
    gradient norms (ghost clipping, or ``torch.func`` per-example gradients), clipping to ``clip_norm`` (or to a bound
    chosen per batch by DPNorm, Alg. 3, with ``clip_norm="auto"``),
    Gaussian noise ``N(0, sigma^2 C^2)`` on the clipped sum, division by the
    expected batch size, then skorch's optimiser step.  Every other skorch
    feature (``module__`` parameters, callbacks, ``history``, ``device``) is
    unchanged.

    Privacy
        ``privacy_spent_`` is an (epsilon, delta) guarantee under **add/remove**
        neighbours (datasets differing by the presence of one record), the
        relation under which Poisson sampling amplifies privacy; it covers the
        trained parameters, the plan attributes, the history (the epsilon
        spent per epoch and the clipping bound per batch: skorch's exact
        ``train_loss``, realised batch sizes and epoch timings are not
        recorded) and everything computed from them.  It does *not* cover,
        if ``train_split`` is set, the validation scores and the records of
        the validation split (scored without noise; ``fit`` warns).
        The plan (``q``, steps, calibrated noise) never reads ``len(X)``:
        under add/remove, ``N`` and ``N + 1`` rows would otherwise give
        different deterministic plans.  It comes from ``n_samples`` when
        declared (public), else from the number of training records
        released once with Gaussian noise (sensitivity 1, std
        ``COUNT_NOISE_FACTOR = 10`` times ``noise_multiplier``, or 10 times the
        multiplier spending all of ``(epsilon, delta)`` on one release),
        recorded on the ledger and composed with the steps.
        Each step's sensitivity: one record changes the clipped gradient sum by
        at most ``C`` in L2 norm (add/remove), so noise ``sigma * C`` is a
        Gaussian mechanism with multiplier ``sigma``; with DPNorm the norm
        histogram (sensitivity 1, noise ``clip_norm_noise_ratio * sigma``) and
        the gradient of the same batch are accounted as one Gaussian with the
        combined multiplier (see :func:`skdp.nn.dpsgd_step_event`).  The
        count and the steps are composed by the accountant ``composition``
        (privacy loss distributions by default; RDP, the moments accountant
        of Acs et al. Theorem 1, with ``composition="rdp"``), and the noise
        is calibrated with the same accountant.

    Parameters
    ----------
    module : torch.nn.Module class or instance, or None, default=None
        The network (skorch semantics; ``module__*`` parameters route to it).
        Layers that mix the examples of a batch (BatchNorm) are refused.
        None: :class:`DefaultMLP` sized from the data's (public) shape.
    epsilon : float, default=1.0
        Target epsilon; the noise multiplier is calibrated so that
        ``max_epochs`` epochs spend exactly it.  Ignored (may be None) when
        ``noise_multiplier`` is given: epsilon is then reported, not enforced.
    delta : float, default=1e-5
        Target delta, in (0, 1).
    composition : {"pld", "rdp", "advanced", "basic"}, default="pld"
        Accountant that composes the fit's events (the noisy count and the
        Poisson-subsampled Gaussian steps), both to calibrate the noise and
        to report ``privacy_spent_`` (:mod:`skdp.privacy.accountants`):

        * ``"pld"``: privacy loss distributions, composed by convolution
          and discretised pessimistically (an upper bound) by Google's
          dp-accounting (Doroshenko et al. 2022, "Connect the dots"; Koskela
          et al. 2020); never looser than ``"rdp"``.  The default because it
          is the tightest: on long runs about 9% less epsilon than RDP at the
          same noise (q = 256/60000, sigma = 1.1, 60 epochs, delta = 1e-5:
          2.38 against 2.59; Opacus' PRV accountant gives 2.39), or less
          noise at the same epsilon (8% less on the digits benchmark's
          plan at epsilon 1, 630 steps at q = 64/1347: :doc:`/nn`).
        * ``"rdp"``: Renyi DP, the moments accountant (Abadi et al. 2016;
          Mironov, Talwar & Zhang 2019; Acs et al. Theorem 1), converted by
          Balle et al. (2020); the accounting of skdp before 0.3 and of
          Opacus' ``"rdp"`` accountant.
        * ``"advanced"``, ``"basic"``: advanced (Dwork & Roth 2014,
          Cor. 3.21) or basic composition of per-step epsilons (each step's
          own ``(epsilon, delta)`` from the tightest single-use bound); much
          looser on many steps, for comparison with papers that use them.

        ``"zcdp"`` has no rule for subsampled mechanisms and is refused by
        ``fit`` with a ``ValueError``, before anything is reserved.
    clip_norm : float or "auto", default=1.0
        Clipping bound ``C`` of the per-example gradients, or ``"auto"``:
        per batch, DPNorm's noisy mode of the batch's gradient-norm histogram
        (Acs et al. Alg. 3).
    clip_norm_max : float, default=1.0
        The largest candidate bound ``C_max`` of DPNorm, with
        ``clip_norm="auto"``.
    noise_multiplier : float or None, default=None
        sigma of Alg. 4 (noise std over ``C``).  None: calibrated from
        ``epsilon, delta, q, max_epochs`` (and the count's event with
        ``n_samples='auto'``).  Given, its plan's cost is reserved on
        ``accountant`` before the data is read (with ``n_samples='auto'``:
        the count's cost before the data, the steps' from the noisy count
        before the first step).
    clip_norm_bins : int, default=20
        DPNorm's number of candidate bounds ``w``, with ``clip_norm="auto"``.
    clip_norm_noise_ratio : float, default=5.0
        DPNorm's histogram noise ``sigma_C`` as a multiple of sigma, with
        ``clip_norm="auto"``.  Large
        values make the histogram nearly free: the step is accounted with
        ``(sigma^-2 + sigma_C^-2)^(-1/2)``.
    clipping_mode : {"ghost", "vmap"}, default="ghost"
        How per-example gradient norms and the clipped sum are computed.
        ``"ghost"``: from each layer's activations and output gradients
        (ghost clipping, Li et al. 2021; Bu et al. 2022), without
        per-example gradients, at near non-private speed and memory, for
        modules whose parameterised layers are all Linear, Conv1d, Conv2d,
        Embedding or LayerNorm; any other layer makes the fit fall back to
        ``"vmap"`` with a ``GhostClippingFallbackWarning`` naming it.
        ``"vmap"``: per-example gradients with ``torch.func``.  Both clip
        exactly the same per-example gradients, so the privacy is the same.
    secure_noise : bool or None, default=None
        None follows the package default (:func:`skdp.set_config`), read once
        at the start of ``fit`` and carried by the estimator to worker
        processes.  DP-SGD's noise is floating-point Gaussian noise drawn by
        torch (no exact grid sampler is fast enough for a gradient per step),
        so under ``secure_noise=True`` ``fit`` raises a ``ValueError`` before touching the data or the
        budget; ``False`` accepts floating-point noise for this estimator even
        when the package-wide setting is on.
    accountant : BudgetAccountant or None, default=None
        User budget the fit reserves its request on (before training) and settles
        to ``privacy_spent_`` at the end; a fit that fails in between stays charged.
    random_state : int, Generator or None, default=None
        Seeds the Poisson sampling and the noise (module initialisation
        follows torch's global seed, as in skorch).
    train_split : callable or None, default=None
        skorch's validation split; None (the default) trains on all records.
        A split is outside the guarantee (validation scores are exact):
        ``fit`` raises a ``PrivacyLeakWarning``.
    n_samples : int or "auto", default="auto"
        Public number of training records the plan is made for:
        ``q = min(1, batch_size / n_samples)``, ``max_epochs *
        round(n_samples / batch_size)`` steps, gradient sums divided by
        ``q * n_samples``.  Declaring it costs nothing and the guarantee holds
        whatever the true size (Poisson sampling at rate ``q`` over the given
        rows); a wrong value only changes the realised batch sizes.
        ``"auto"``: the size is released with Gaussian noise on the ledger
        (see Privacy) and the plan made from the rounded noisy count.
    scale_inputs : {"auto", True, False}, default="auto"
        Scale the inputs privately, as part of the model.  Where a column
        can be located at this ``n``, ``d`` and epsilon (a public rule; with
        ``n_samples="auto"``), a share ``bounds_budget`` of ``(epsilon,
        delta)`` releases a box of every column from two noisy histograms
        (add/remove neighbours;
        :func:`~skdp.privacy.quantiles.private_histogram_box`), about its
        ``q`` and ``1 - q`` quantiles (``q`` of 5 % to 10 %, from the public
        size and the counts' noise), and the module sees each column mapped
        from its box to ``+-0.5 Phi^-1(1 - q)``: columns of any scale or
        offset, also beside columns a million times larger, reach it at
        about 0.5 rms.  Elsewhere (and with a declared ``n_samples``, planned
        before the data's shape is read) one scale for all columns: a
        centre ``c`` and a private median ``R`` of ``||x - c||``
        (:mod:`skdp.privacy.centring`), the module seeing ``0.5 (x - c)
        sqrt(d) / R``.  ``fit`` and ``predict`` apply the released map
        (``input_centre_``, ``input_scale_``), which the default learning
        rate assumes.
        ``"auto"``: with the default module (``module=None``) when epsilon
        drives the plan (``noise_multiplier=None``); ``True``: also with a
        given module (needs epsilon); ``False``: inputs as given (already
        scaled with public constants).  Only for an array ``X`` trained
        without ``train_split``.
    bounds_budget : float in (0, 1), default=0.1
        Share of ``(epsilon, delta)`` spent by ``scale_inputs``; the steps are
        calibrated to spend the rest (composed with it by ``composition``).
    lr : float or "auto", default="auto"
        skorch's learning rate.  ``"auto"``: ``0.5`` (plain SGD on the mean of
        gradients clipped to ``clip_norm``, derived from the input scale of
        ``scale_inputs``; see :doc:`/nn`).
    max_epochs : int or "auto", default="auto"
        Epochs of the plan.  ``"auto"``: about ``T`` steps,
        ``ceil(T batch_size / n)`` epochs for the public size ``n``
        (declared ``n_samples`` or the noisy count), at most 100; ``T = 400``
        up to ``n epsilon / sqrt(2 log(1/delta)) = 512``, then growing in
        proportion to it up to 1,600 (:doc:`/nn`).
    batch_size : int, -1 or "auto", default="auto"
        Expected Poisson batch size ``L``.  ``"auto"``: ``n / 25`` within
        ``[32, 1024]`` (a sampling rate of about 4 %).
    verbose : int, default=0
        0: silent.  1: skorch's epoch table, with the ``epsilon`` column
        (the epsilon spent so far, composed by the accountant at each epoch's
        end: seconds per epoch under ``"pld"``, so only when asked).
    **kwargs
        Any other skorch parameter (``optimizer``, ``callbacks``, ``device``,
        ``module__*``, ...).  ``module__hidden_units`` sets the width of the
        default module; without it the width follows ``n epsilon`` (from 8
        for a small ``n epsilon`` to 64, :doc:`/nn`).

    Attributes
    ----------
    privacy_spent_ : PrivacySpent
        (epsilon, delta) spent by the fit (add/remove neighbours), as
        composed by ``composition``.
    noise_multiplier_ : float
        sigma used by the fit.
    clip_noise_multiplier_ : float or None
        DPNorm's sigma_C (None with fixed clipping).
    sampling_rate_ : float
        Poisson sampling rate ``q`` (from ``n_samples`` or the noisy count).
    n_steps_ : int
        DP-SGD steps of the plan.
    noisy_n_samples_ : int or None
        The released noisy number of training records (rounded, at least 1)
        with ``n_samples='auto'``; None when ``n_samples`` is declared.
    clipping_mode_ : str
        The strategy used (``"ghost"``, or ``"vmap"`` after a fallback).
    batch_size_, max_epochs_ : int
        The plan's expected batch size and number of epochs (``"auto"``
        resolved from the public size).
    lr_ : float
        The learning rate in effect.
    input_centre_ : ndarray of shape (n_features,) or None
        The released centre of ``scale_inputs`` (None when inputs are not scaled).
    input_scale_ : ndarray of shape (n_features,) or None
        The released scale of each column (its box's half width over
        ``0.5 Phi^-1(1 - q)``), or the one scale ``R / (0.5 sqrt(d))`` in
        every column.
    input_clip_ : float or None
        With the per-column boxes, the scaled inputs are clipped to
        ``+-input_clip_`` (4, eight times the target rms: a public constant),
        so a value far outside its column's box (a rare value of a column
        of mostly zeros) stays bounded; None with the one-scale map.
    history_ : skorch History
        skorch's history with only released columns: ``train_batch_count``
        (the plan's) per epoch, ``clip_norm`` per batch, and with
        ``verbose >= 1`` ``epsilon`` (spent so far) per epoch.  No
        ``train_loss``, ``train_batch_size`` or ``dur``.

    Raises
    ------
    ValueError
        From ``fit``, for labels outside ``classes`` (classifier): the
        message names the parameter, never the labels; the budget reserved
        before the data stays charged, as for any input error.
"""


class DPNeuralNetClassifier(_DPNeuralNetMixin, NeuralNetClassifier):
    __doc__ = (
        """skorch NeuralNetClassifier trained with differentially private SGD.
"""
        + _COMMON_DOC
        + """
    classes : array-like, "nonprivate" or None, default=None
        Class labels, in the order of the module's outputs: public, declared
        by the user.  None (not declared) is refused by ``fit`` before
        anything is reserved, with a message saying to declare them.
        ``"nonprivate"`` opts into the non-private mode that reads them off ``y``
        (sorted): the label set is then released outside the guarantee (a
        PrivacyLeakWarning says so).  The module is trained on class indices
        (skorch's convention) and ``predict`` returns labels from
        ``classes_``.

    See Also
    --------
    DPNeuralNetRegressor : the regression twin.
    skdp.nn.DPSGDEngine : the DP-SGD step, reusable for any torch model.

    References
    ----------
    G. Acs, L. Melis, C. Castelluccia, E. De Cristofaro. Differentially private
    mixture of generative neural networks. IEEE TKDE 2018 (Alg. 3-4, Sec. III).
    M. Abadi et al. Deep learning with differential privacy. CCS 2016.
    V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi. Connect the
    dots: tighter discrete approximations of privacy loss distributions.
    PETS 2022 (Google's dp-accounting, the ``"pld"`` accountant).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from skdp.nn import DPNeuralNetClassifier
    >>> X = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
    >>> y = (X[:, 0] > 0).astype(np.int64)
    >>> module = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Softmax(dim=-1))
    >>> net = DPNeuralNetClassifier(module, epsilon=2.0, classes=[0, 1], lr=0.5,
    ...                             max_epochs=3, batch_size=50, verbose=0, random_state=0)
    >>> net = net.fit(X, y)
    >>> round(net.privacy_spent_.epsilon, 3)
    2.0
    >>> net.predict(X[:3]).shape
    (3,)
"""
    )

    def __init__(
        self,
        module=None,
        *args,
        epsilon=1.0,
        delta=1e-5,
        composition=DEFAULT_COMPOSITION,
        clip_norm=1.0,
        clip_norm_max=1.0,
        noise_multiplier=None,
        clip_norm_bins=20,
        clip_norm_noise_ratio=5.0,
        clipping_mode="ghost",
        secure_noise=None,
        accountant=None,
        random_state=None,
        train_split=None,
        n_samples="auto",
        scale_inputs="auto",
        bounds_budget=DEFAULT_BOUNDS_BUDGET,
        lr="auto",
        max_epochs="auto",
        batch_size="auto",
        verbose=0,
        **kwargs,
    ):
        super().__init__(
            module,
            *args,
            train_split=train_split,
            lr=lr,
            max_epochs=max_epochs,
            batch_size=batch_size,
            verbose=verbose,
            **kwargs,
        )
        self._store_dp_params(
            epsilon=epsilon,
            delta=delta,
            composition=composition,
            clip_norm=clip_norm,
            clip_norm_max=clip_norm_max,
            noise_multiplier=noise_multiplier,
            clip_norm_bins=clip_norm_bins,
            clip_norm_noise_ratio=clip_norm_noise_ratio,
            clipping_mode=clipping_mode,
            secure_noise=secure_noise,
            accountant=accountant,
            random_state=random_state,
            n_samples=n_samples,
            scale_inputs=scale_inputs,
            bounds_budget=bounds_budget,
        )

    _default_softmax = True
    _repr_always = ("epsilon", "classes", "max_epochs")

    def _check_params(self):
        super()._check_params()
        if self.classes is None:
            raise ValueError(
                "classes is not declared: declare the labels the data may hold, classes=[...] (public, "
                "in the order of the module's outputs); classes='nonprivate' reads them off y outside the "
                "privacy guarantee (non-private)."
            )

    def _validate_target(self, y):
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        if isinstance(self.classes, str) and self.classes == "nonprivate":
            warn_privacy_leak("classes", "the set of class labels")
            classes = np.unique(y)
            self.classes_inferred_ = classes
        else:
            classes = np.asarray(self.classes)
            if classes.ndim != 1 or len(classes) < 1 or len(np.unique(classes)) != len(classes):
                raise ValueError(f"classes must be a 1-D list of distinct labels, got {self.classes!r}.")
        # Train on class indices (skorch's convention); predict maps back.
        sorter = np.argsort(classes, kind="stable")
        pos = np.clip(np.searchsorted(classes, y, sorter=sorter), 0, len(classes) - 1)
        idx = sorter[pos]
        if not np.all(classes[idx] == y):
            # Never quote the offending labels: they are data.  The budget is
            # already reserved (and stays charged), as for any input error.
            raise ValueError(
                "y has labels that are not in `classes`; declare every label the data may hold in "
                "classes (the labels are not quoted: they are private data)."
            )
        return idx.astype(np.int64)

    def _n_outputs(self, y):
        return len(self.classes_)

    @property
    def classes_(self):
        """The declared ``classes`` (an array), or the labels read off ``y`` with ``classes="nonprivate"``."""
        if isinstance(self.classes, str) and self.classes == "nonprivate":
            try:
                return self.classes_inferred_
            except AttributeError:
                raise AttributeError(
                    f"{type(self).__name__} has no attribute 'classes_' before fit."
                ) from None
        return NeuralNetClassifier.classes_.fget(self)

    def check_data(self, X, y):
        # In fit, y holds class indices: classes_ come from ``classes`` or from
        # the raw labels (set by _validate_target), not from the indices.
        if not (getattr(self, "_dp_fit", None) is not None and y is not None):
            super().check_data(X, y)

    def predict(self, X):
        """Class labels (``classes_``) of the most probable class."""
        idx = super().predict(X)
        try:
            classes = np.asarray(self.classes_)
        except AttributeError:
            return idx
        return classes[idx] if len(classes) else idx


class DPNeuralNetRegressor(_DPNeuralNetMixin, NeuralNetRegressor):
    __doc__ = (
        """skorch NeuralNetRegressor trained with differentially private SGD.
"""
        + _COMMON_DOC
        + """
    Targets are float32; a 1-D ``y`` is reshaped to a column (skorch's
    regressors expect 2-D targets) and ``predict`` then returns 1-D output.

    Where no net can train (the default only: ``module=None``, no
    ``module__hidden_units``, epsilon given): when
    ``rho = n epsilon / sqrt(2 log(1/delta))`` is below
    ``6 sqrt(8 (d + k))`` (the narrowest default net's signal-to-noise
    ratio below 6, ``n`` declared or the noisy count; :doc:`/nn`), the
    fit trains no net, releases a private
    median of each target column (the exponential mechanism over the
    core's public grid, add/remove neighbours, at what the budget leaves
    after the count) and predicts it for every row, with a
    ``UserWarning`` naming the ``n epsilon`` the net would need.  The
    released median is ``target_centre_`` (shape ``(n_outputs,)``),
    ``n_steps_`` is then 0 and no input scaling is released.  The same
    fallback is taken where the trained net's target map (below) cannot be
    located within half of epsilon.

    Where the default net trains, the same median and a private spread
    (the median absolute deviation from it, times 1.4826), released at a
    small share of epsilon (the smallest that locates both, at least 2 %,
    at most half: public ``n`` and ``epsilon`` only; below that share the
    fit predicts the constant, warned), map the target: the net trains on
    ``(y - c) K / s`` with ``K`` from the plan's public noise, and the map
    is folded back into the output layer, so the target's units do not
    change the fit (:doc:`/nn`, "The trained net's target map").  They are
    kept in ``target_centre_`` and ``target_scale_``; None when none was
    released (a module or width given by the user).

    See Also
    --------
    DPNeuralNetClassifier : the classification twin.

    References
    ----------
    G. Acs, L. Melis, C. Castelluccia, E. De Cristofaro. Differentially private
    mixture of generative neural networks. IEEE TKDE 2018 (Alg. 3-4, Sec. III).
    M. Abadi et al. Deep learning with differential privacy. CCS 2016.
    V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi. Connect the
    dots: tighter discrete approximations of privacy loss distributions.
    PETS 2022 (Google's dp-accounting, the ``"pld"`` accountant).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from skdp.nn import DPNeuralNetRegressor
    >>> X = np.random.default_rng(0).normal(size=(200, 3)).astype(np.float32)
    >>> y = X @ np.array([1.0, -1.0, 0.5], dtype=np.float32)
    >>> net = DPNeuralNetRegressor(torch.nn.Linear(3, 1), epsilon=1.0, lr=0.1,
    ...                            max_epochs=2, batch_size=50, verbose=0, random_state=0)
    >>> net = net.fit(X, y)
    >>> net.predict(X[:4]).shape
    (4,)
    >>> net.privacy_spent_.epsilon <= 1.0
    True
"""
    )

    #: skorch's regressor also keeps ``y_ndim_``, the number of dimensions of
    #: ``y`` (its shape, public like ``n_features_in_``).
    _released_attributes = _NET_RELEASED_ATTRIBUTES | {"y_ndim_", "target_centre_", "target_scale_"}

    def __init__(
        self,
        module=None,
        *args,
        epsilon=1.0,
        delta=1e-5,
        composition=DEFAULT_COMPOSITION,
        clip_norm=1.0,
        clip_norm_max=1.0,
        noise_multiplier=None,
        clip_norm_bins=20,
        clip_norm_noise_ratio=5.0,
        clipping_mode="ghost",
        secure_noise=None,
        accountant=None,
        random_state=None,
        train_split=None,
        n_samples="auto",
        scale_inputs="auto",
        bounds_budget=DEFAULT_BOUNDS_BUDGET,
        lr="auto",
        max_epochs="auto",
        batch_size="auto",
        verbose=0,
        **kwargs,
    ):
        super().__init__(
            module,
            *args,
            train_split=train_split,
            lr=lr,
            max_epochs=max_epochs,
            batch_size=batch_size,
            verbose=verbose,
            **kwargs,
        )
        self._store_dp_params(
            epsilon=epsilon,
            delta=delta,
            composition=composition,
            clip_norm=clip_norm,
            clip_norm_max=clip_norm_max,
            noise_multiplier=noise_multiplier,
            clip_norm_bins=clip_norm_bins,
            clip_norm_noise_ratio=clip_norm_noise_ratio,
            clipping_mode=clipping_mode,
            secure_noise=secure_noise,
            accountant=accountant,
            random_state=random_state,
            n_samples=n_samples,
            scale_inputs=scale_inputs,
            bounds_budget=bounds_budget,
        )

    _default_softmax = False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        # Gradient noise: a short private fit need not reach R^2 = 0.5 on the check's data.
        tags.regressor_tags.poor_score = True
        return tags

    def _n_outputs(self, y):
        return y.shape[1]

    def _prepare_inputs(self, state, data):
        # None unless the fallback or the trained net's centre (and spread) releases it.
        self.target_centre_ = self.target_scale_ = None
        state.target_offset = state.target_map = None
        X = super()._prepare_inputs(state, data)
        if state.constant is None and data.default_sizes is not None and self.train_split is None:
            self._release_target_offset(state, data.y)
        return X

    def _is_default_net(self):
        """The default (``module=None``, no ``module__hidden_units``, epsilon driving the plan): public parameters."""
        return (
            self.module is None
            and self.noise_multiplier is None
            and "hidden_units" not in self.get_params_for("module")
        )

    def _release_target_offset(self, state, y):
        """Release the trained default net's target map: a private median and spread per target column.

        Both at :func:`~skdp.nn._constant.centre_epsilon` of the public size
        (declared or the noisy count), ``epsilon`` and ``2 k`` releases, on
        the fit's ledger before the steps are calibrated: with the noisy
        count the staged filter calibrates the steps to what the count, the
        input scaling and these leave; with a declared size the plan's noise
        is calibrated again here over the same releases (the data's shape,
        public, fixes the number of columns).  ``_plan_training`` maps the
        target to the scale the net trains at and ``_fit_private`` folds the
        map back into the output layer (:mod:`skdp.nn._target`), so
        ``predict`` needs no map.  Nothing is released for a module or width
        given by the user.
        """
        if not self._is_default_net():
            return
        n_public = self._public_size(state, y.shape[0])
        epsilon = centre_epsilon(n_public, self.epsilon, 2 * y.shape[1], MAX_MAP_SHARE)
        if epsilon is None:
            return
        self.target_centre_ = release_target_median(y, n_public, epsilon, state.rng, state.ledger)
        spread = release_target_spread(y, self.target_centre_, n_public, epsilon, state.rng, state.ledger)
        self.target_scale_ = MAD_TO_SD * spread
        state.target_offset = self.target_centre_
        if self.n_samples != "auto":
            plan = state.dpsgd_plan
            state.noise_multiplier = calibrate_dpsgd_noise(
                self.epsilon,
                self.delta,
                plan.sampling_rate,
                plan.n_steps,
                DPNormOptions.of(self).histogram_noise_ratio,
                extra_events=list(state.ledger.events),
                composition=self.composition,
            )

    def _plan_training(self, state, dataset):
        super()._plan_training(state, dataset)
        if state.constant is None and state.target_offset is not None:
            # The net trains on (y - c) K / s, K from the plan's public noise (_target.training_scale).
            options = DPNormOptions.of(self)
            clip = options.clip_norm_max if options.selected else options.clip_norm
            scale = training_scale(
                self.lr_, state.noise_multiplier, clip, state.dpsgd_plan.n_steps, self.batch_size_
            )
            factor = np.maximum(self.target_scale_, np.finfo(np.float32).tiny) / scale
            dataset.y = ((np.asarray(dataset.y, dtype=np.float64) - self.target_centre_) / factor).astype(
                np.float32
            )
            state.target_map = (self.target_centre_, factor)

    def _fit_private(self, data, plan, rng, ledger):
        super()._fit_private(data, plan, rng, ledger)
        target_map = getattr(self._dp_fit, "target_map", None)
        if target_map is not None:
            fold_output(self.module_.output, *target_map)

    def _predicts_constant(self, n_public, n_features, n_outputs):
        """The public rule of :func:`~skdp.nn._defaults.trains_default_net` for the default net.

        Only the default (``module=None``, no ``module__hidden_units``, epsilon
        driving the plan); a module or a width given by the user is trained
        whatever the budget.  Warns, with public quantities only (the
        declared size or the released count, epsilon, delta, the shape),
        what ``n epsilon`` the net would need.
        """
        # The net's target map needs a centre and a spread located (_release_target_offset).
        if not self._is_default_net() or (
            trains_default_net(n_public, n_features, n_outputs, self.epsilon, self.delta)
            and centre_epsilon(n_public, self.epsilon, 2 * n_outputs, MAX_MAP_SHARE) is not None
        ):
            return False
        scale = math.sqrt(2.0 * math.log(1.0 / self.delta))
        snr, spread = min_training_rho(n_features, n_outputs) * scale, spread_n_epsilon(n_outputs)
        needed = max(snr, spread)
        size = "declared n_samples" if self.n_samples != "auto" else "noisy count of the rows"
        warnings.warn(
            f"{type(self).__name__}: n * epsilon = {n_public * self.epsilon:.3g} (n = {int(n_public)}, the "
            f"{size}) is below {needed:.3g}, what the default net needs: {snr:.3g} for the narrowest net "
            f"({MIN_WIDTH} hidden units on {n_features} features and {n_outputs} targets) to reach a "
            f"signal-to-noise ratio of {MIN_TRAIN_SNR:g} at delta={self.delta:g}, and {spread:.3g} to locate "
            "the target's centre and spread (the scale it trains at) within half of epsilon; below "
            "that a trained net scores below a constant on most data, so the model predicts a private "
            f"median of the target (a constant, target_centre_) instead. Raise epsilon to at least "
            f"{needed / n_public:.3g} with this many rows to train the net, or set module__hidden_units to "
            "train one anyway.",
            UserWarning,
            stacklevel=_user_stacklevel(),
        )
        return True

    def _release_constant(self, state, y, n_public):
        """Release the fallback's constant (:mod:`skdp.nn._constant`) on the fit's ledger.

        Its epsilon is what the budget leaves after the noisy count (the
        staged filter, as the steps' noise would be), or the whole
        ``(epsilon, delta)`` with a declared ``n_samples``, calibrated by
        the core over the events of :func:`~skdp.nn._constant.constant_events`.
        """
        n_outputs = y.shape[1]

        def events(z):
            return constant_events(n_outputs, 1.0 / z)

        if self.n_samples == "auto":
            z = self._calibrate_staged(state.ledger, events)
        else:
            z = calibrate_noise_multiplier(events, self.epsilon, self.delta, self.composition, ADD_REMOVE)
        self.target_centre_ = release_target_median(y, n_public, 1.0 / z, state.rng, state.ledger)
        return self.target_centre_

    def _set_constant_module(self, state):
        """The default module predicting ``target_centre_`` for every row; no step is taken (post-processing)."""
        schedule = state.schedule
        self.noisy_n_samples_ = state.noisy_n if self.n_samples == "auto" else None
        self.batch_size_, self.lr_, self.max_epochs_ = schedule.batch_size, schedule.lr, 0
        self.noise_multiplier_ = self.clip_noise_multiplier_ = None
        self.sampling_rate_, self.n_steps_ = 0.0, 0
        with torch.no_grad():
            for param in self.module_.parameters():
                param.zero_()
            bias = self.module_.output.bias
            bias.copy_(torch.as_tensor(state.constant, dtype=bias.dtype))

    def _validate_target(self, y):
        y = check_array(y, ensure_2d=False, dtype=np.float32, input_name="y")
        self.y_ndim_ = y.ndim
        return (y.reshape(-1, 1) if y.ndim == 1 else y).astype(np.float32)

    @property
    def predict_proba(self):
        """Not available on a regressor (use :meth:`predict`)."""
        raise AttributeError(f"{type(self).__name__} has no predict_proba; use predict.")

    def predict(self, X):
        """Predictions (float64); 1-D when the net was fitted on a 1-D ``y``."""
        y = NeuralNet.predict_proba(self, self._validate_predict_X(X)).astype(np.float64)
        return y.ravel() if getattr(self, "y_ndim_", 2) == 1 and y.ndim == 2 and y.shape[1] == 1 else y
