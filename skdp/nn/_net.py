"""skorch nets trained by DP-SGD: DPNeuralNetClassifier and DPNeuralNetRegressor.

The nets override exactly the steps of skorch's training loop that DP changes
(skorch's design: small overridable methods, no forked loop):

* ``get_iterator(training=True)`` plans the privacy (sampling rate, number of
  steps, noise multiplier), builds the :class:`~skdp.nn.DPSGDEngine` and
  returns a Poisson-sampling iterator;
* ``train_step`` hands each batch to the engine, which writes the noisy
  clipped gradient into ``param.grad``, then runs the optimiser;
* ``fit`` wraps skorch's fit in the privacy life cycle of
  :class:`skdp.base.DPEstimatorMixin` (budget reservation and settlement,
  ledger, ``privacy_spent_``).
"""

from __future__ import annotations

import contextlib
import math
import numbers

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_consistent_length, column_or_1d, validate_data
from skorch import NeuralNet, NeuralNetClassifier, NeuralNetRegressor
from skorch.dataset import unpack_data
from skorch.utils import TeeGenerator, is_dataset, to_tensor

from .._random import check_generator
from ..base import DPEstimatorMixin, warn_privacy_leak
from ..privacy import ADD_REMOVE, BudgetAccountant, PrivacyAccountant, PrivacySpent, compose
from ._adaptive_clipping import DPNormClipping
from ._callbacks import EpsilonSpent
from ._engine import (
    DPSGDEngine,
    FixedClipping,
    PoissonBatchIterator,
    calibrate_dpsgd_noise,
    check_noise_setting,
    steps_per_epoch,
)

__all__ = ["DPNeuralNetClassifier", "DPNeuralNetRegressor", "DefaultMLP"]

_DP_PARAMS = (
    "epsilon",
    "delta",
    "max_grad_norm",
    "clipping",
    "noise_multiplier",
    "clipping_bins",
    "clipping_noise_ratio",
    "clipping_mode",
    "secure_noise",
    "accountant",
    "random_state",
)


def _is_positive_real(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0


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
        out = self.output(torch.relu(self.hidden(X)))
        return torch.softmax(out, dim=-1) if self.softmax else out


class _DPNeuralNetMixin(DPEstimatorMixin):
    """DP-SGD life cycle shared by the classifier and the regressor."""

    # Poisson sampling amplifies only under add/remove neighbours.
    _neighbouring = ADD_REMOVE

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
        callbacks = list(super()._default_callbacks)
        names = [name for name, _ in callbacks]
        at = names.index("print_log") if "print_log" in names else len(callbacks)
        callbacks.insert(at, ("epsilon", EpsilonSpent()))
        return callbacks

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        tags.input_tags.allow_nan = False
        tags.non_deterministic = self.random_state is None
        return tags

    def _check_dp_params(self):
        if self.noise_multiplier is None or self.epsilon is not None:
            if not _is_positive_real(self.epsilon):
                raise ValueError(f"epsilon must be a positive finite number, got {self.epsilon!r}.")
        if not (isinstance(self.delta, numbers.Real) and 0 < self.delta < 1):
            raise ValueError(f"delta must be in (0, 1) (DP-SGD adds Gaussian noise), got {self.delta!r}.")
        if not _is_positive_real(self.max_grad_norm):
            raise ValueError(f"max_grad_norm must be a positive finite number, got {self.max_grad_norm!r}.")
        if self.clipping not in ("fixed", "adaptive"):
            raise ValueError(f"clipping must be 'fixed' or 'adaptive', got {self.clipping!r}.")
        if self.noise_multiplier is not None and not _is_positive_real(self.noise_multiplier):
            raise ValueError(
                f"noise_multiplier must be None or a positive finite number, got {self.noise_multiplier!r}."
            )
        if not (isinstance(self.clipping_bins, numbers.Integral) and self.clipping_bins >= 1):
            raise ValueError(f"clipping_bins must be a positive integer, got {self.clipping_bins!r}.")
        if not _is_positive_real(self.clipping_noise_ratio):
            raise ValueError(
                f"clipping_noise_ratio must be a positive finite number, got {self.clipping_noise_ratio!r}."
            )
        if self.clipping_mode not in ("ghost", "vmap"):
            raise ValueError(f"clipping_mode must be 'ghost' or 'vmap', got {self.clipping_mode!r}.")
        if self.secure_noise not in (None, False, True):
            raise ValueError(f"secure_noise must be None, False or True, got {self.secure_noise!r}.")
        if self.accountant is not None and not isinstance(self.accountant, BudgetAccountant):
            raise TypeError(
                f"accountant must be a BudgetAccountant or None, got {type(self.accountant).__name__}."
            )
        if not (isinstance(self.max_epochs, numbers.Integral) and self.max_epochs >= 1):
            raise ValueError(f"max_epochs must be a positive integer, got {self.max_epochs!r}.")
        if self.warm_start:
            raise ValueError(
                "warm_start=True would continue training outside the privacy plan of a fit; "
                "DP nets always train from scratch (set warm_start=False)."
            )

    def initialize_module(self):
        """skorch's module initialisation, or :class:`DefaultMLP` sized from the data when ``module=None``."""
        if self.module is not None:
            return super().initialize_module()
        shape = getattr(self, "_dp_default_sizes", None)
        if shape is None:
            # Before any data: a placeholder; fit rebuilds it from the data's shape.
            shape = (1, 1)
        kwargs = self.get_params_for("module")
        crit = self.criterion if isinstance(self.criterion, type) else type(self.criterion)
        # CrossEntropyLoss takes logits (skorch's predict_proba then applies the softmax).
        softmax = self._default_softmax and not issubclass(crit, torch.nn.CrossEntropyLoss)
        kwargs.setdefault("softmax", softmax)
        self.module_ = DefaultMLP(*shape, **kwargs)
        return self

    # -- data validation -----------------------------------------------------

    def _validate_dp_data(self, X, y):
        if _passes_through(X):
            for leaf in _tensor_leaves(X if not is_dataset(X) else None):
                if not torch.isfinite(leaf).all():
                    raise ValueError("Input X contains NaN or infinity.")
            return X, y
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None "
                "(pass a Dataset as X to provide targets another way)."
            )
        X = validate_data(self, X, reset=True, dtype=np.float32, allow_nd=True)
        y = check_array(y, ensure_2d=False, dtype=None, input_name="y")
        check_consistent_length(X, y)
        y = self._validate_target(y)
        if self.module is None:
            if X.ndim != 2:
                raise ValueError(f"module=None needs 2-D X, got shape {X.shape}; pass a module.")
            self._dp_default_sizes = (X.shape[1], self._n_outputs(y))
        return X, y

    def _validate_predict_X(self, X):
        if _passes_through(X):
            return X
        return validate_data(self, X, reset=False, dtype=np.float32, allow_nd=True)

    def predict_proba(self, X):
        """skorch's ``predict_proba`` after validating ``X`` like ``fit`` did."""
        return super().predict_proba(self._validate_predict_X(X))

    # -- fit -------------------------------------------------------------------

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
        self._check_dp_params()
        with self._noise_context():
            # Before the budget check and the data: DP-SGD has no secure sampler.
            check_noise_setting()
            return self._fit_private(X, y)

    def _fit_private(self, X, y):
        if self.noise_multiplier is None:
            # The request is known before the data: reserve the budget first.
            ledger, rng = self._begin_private_fit(composition="rdp")
        else:
            ledger = PrivacyAccountant(composition="rdp", neighbouring=self._neighbouring)
            rng = check_generator(self.random_state)
        X, y = self._validate_dp_data(X, y)
        self._dp_ledger, self._dp_rng, self._dp_fitting = ledger, rng, True
        try:
            with _torch_seeded(rng if self.random_state is not None else None):
                # NeuralNet.fit without its call to the (refused) public partial_fit.
                self.initialize()
                NeuralNet.partial_fit(self, X, y, _routing_method="fit")
            # Ghost clipping may have fallen back to vmap during training.
            self.clipping_mode_ = self._dp_engine.clipping_mode
            self._finish_private_fit(ledger)
        finally:
            self._dp_fitting = False
            for name in ("_dp_engine", "_dp_rng"):
                self.__dict__.pop(name, None)
        return self

    @property
    def partial_fit(self):
        """Not available: each fit is one privacy plan (epsilon, steps, noise).

        Accessing it raises ``AttributeError`` (so ``hasattr(net, "partial_fit")``
        is False and scikit-learn does not try incremental fitting); call
        :meth:`fit`, which trains from scratch.
        """
        raise AttributeError(
            f"{type(self).__name__} does not support partial_fit: each fit is one privacy plan "
            "(epsilon, steps, noise). Call fit instead."
        )

    def _finish_private_fit(self, ledger):
        if self.noise_multiplier is None:
            self._end_private_fit(ledger)
            return
        # epsilon is reported, not enforced, when the noise was given; the
        # budget was reserved for the planned steps in get_iterator, and a
        # run never takes more steps than planned.
        spent = ledger.privacy_spent(self.delta)
        self.privacy_spent_ = PrivacySpent(float(spent.epsilon), float(spent.delta))
        self._privacy_ledger = ledger
        self._settle_budget(self.privacy_spent_)

    def get_iterator(self, dataset, training=False):
        """Poisson-sampling iterator for training (and skorch's loader otherwise).

        Building the training iterator is where the privacy plan is made, as
        this is the first point where the training-set size ``N`` is known:
        ``q = batch_size / N``, ``steps = max_epochs * round(N / batch_size)``,
        the noise multiplier calibrated to ``(epsilon, delta)`` unless given.
        ``N`` is treated as public, as in Abadi et al. and Opacus.
        """
        if not training:
            return super().get_iterator(dataset, training=False)
        if not getattr(self, "_dp_fitting", False):
            raise RuntimeError("DP training batches are only drawn inside fit.")
        n = len(dataset)
        if n < 1:
            raise ValueError("The training set is empty.")
        batch_size = self.get_params_for("iterator_train").get("batch_size", self.batch_size)
        batch_size = n if batch_size == -1 else batch_size
        if not (isinstance(batch_size, numbers.Integral) and batch_size >= 1):
            raise ValueError(f"batch_size must be a positive integer or -1, got {batch_size!r}.")
        q = min(1.0, batch_size / n)
        per_epoch = steps_per_epoch(n, batch_size)
        n_steps = per_epoch * self.max_epochs
        adaptive = self.clipping == "adaptive"
        ratio = self.clipping_noise_ratio if adaptive else None
        if self.noise_multiplier is None:
            z = calibrate_dpsgd_noise(self.epsilon, self.delta, q, n_steps, ratio)
        else:
            z = float(self.noise_multiplier)
        if adaptive:
            clipping = DPNormClipping(self.max_grad_norm, self.clipping_bins, ratio * z)
        else:
            clipping = FixedClipping(self.max_grad_norm)
        device = next(self.module_.parameters()).device
        generator = torch.Generator(device=device)
        generator.manual_seed(int(self._dp_rng.integers(2**62)))
        engine = DPSGDEngine(
            self.module_,
            self._per_example_loss,
            noise_multiplier=z,
            sampling_rate=q,
            expected_batch_size=q * n,
            clipping=clipping,
            max_steps=n_steps,
            generator=generator,
            batch_loss_fn=self._batch_per_example_loss,
            clipping_mode=self.clipping_mode,
        )
        if self.noise_multiplier is not None and self.accountant is not None:
            # The cost of a given noise is known only now (it depends on N):
            # reserve it before the first batch is drawn.
            planned = compose([engine.event(n_steps)], self.delta, "rdp")
            self._reserve_budget(planned.epsilon, planned.delta)
        self._dp_engine = engine
        self.noise_multiplier_ = z
        self.clip_noise_multiplier_ = clipping.clip_noise_multiplier
        self.sampling_rate_ = q
        self.n_steps_ = n_steps
        self.clipping_mode_ = engine.clipping_mode
        return PoissonBatchIterator(dataset, q, per_epoch, self._dp_rng)

    def _per_example_loss(self, module, Xi, yi):
        y_pred = module(**Xi) if isinstance(Xi, dict) else module(Xi)
        return self.get_loss(y_pred, yi, X=Xi, training=True), y_pred

    def _batch_per_example_loss(self, module, Xi, yi):
        # One forward pass of the whole batch (ghost clipping hooks it); the
        # criterion, vmapped over examples, gives each example's loss exactly
        # as _per_example_loss computes it on that example alone.
        y_pred = module(**Xi) if isinstance(Xi, dict) else module(Xi)

        def one(yp, yt, x):
            yp, yt, x = (_tree_unsqueeze(v) for v in (yp, yt, x))
            return self.get_loss(yp, yt, X=x, training=True).reshape(())

        losses = torch.func.vmap(one, randomness="different")(y_pred, yi, Xi)
        return losses, y_pred

    def train_step(self, batch, **fit_params):
        """One DP-SGD step (Acs et al., Alg. 4) followed by the optimiser step."""
        self._set_training(True)
        Xi, yi = unpack_data(batch)
        Xi, yi = to_tensor(Xi, self.device), to_tensor(yi, self.device)
        self._zero_grad_optimizer()
        result = self._dp_engine.step((Xi, yi), self._dp_ledger)
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
        torch.manual_seed(int(rng.integers(2**62)))
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
    2016): Poisson batches with rate ``q = batch_size / N``, per-example
    gradient norms (ghost clipping, or ``torch.func`` per-example gradients), clipping to ``max_grad_norm`` (or to a bound
    chosen per batch by DPNorm, Alg. 3, with ``clipping='adaptive'``),
    Gaussian noise ``N(0, sigma^2 C^2)`` on the clipped sum, division by the
    expected batch size, then skorch's optimiser step.  Every other skorch
    feature (``module__`` parameters, callbacks, ``history``, ``device``) is
    unchanged.

    Privacy
        ``privacy_spent_`` is an (epsilon, delta) guarantee under **add/remove**
        neighbours (datasets differing by the presence of one record), the
        relation under which Poisson sampling amplifies privacy; it covers the
        trained parameters and everything computed from them.  It does *not*
        cover ``history``'s ``train_loss`` (a non-private diagnostic for the
        data owner) nor, if ``train_split`` is set, the validation scores and
        the records of the validation split (not trained on, but scored without
        noise).  The training-set size ``N`` (hence ``q``) is treated as public.
        Each step's sensitivity: one record changes the clipped gradient sum by
        at most ``C`` in L2 norm (add/remove), so noise ``sigma * C`` is a
        Gaussian mechanism with multiplier ``sigma``; with DPNorm the norm
        histogram (sensitivity 1, noise ``clipping_noise_ratio * sigma``) and
        the gradient of the same batch are accounted as one Gaussian with the
        combined multiplier (see :func:`skdp.nn.dpsgd_step_event`).  All steps
        compose by RDP (the moments accountant, Acs et al. Theorem 1).

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
    max_grad_norm : float, default=1.0
        Clipping bound ``C`` (``clipping='fixed'``), or the largest candidate
        bound ``C_max`` of DPNorm (``clipping='adaptive'``).
    clipping : {"fixed", "adaptive"}, default="fixed"
        Fixed bound, or DPNorm's noisy mode of the batch's gradient-norm
        histogram (Acs et al. Alg. 3).
    noise_multiplier : float or None, default=None
        sigma of Alg. 4 (noise std over ``C``).  None: calibrated from
        ``epsilon, delta, q, max_epochs``.
    clipping_bins : int, default=20
        DPNorm's number of candidate bounds ``w``.
    clipping_noise_ratio : float, default=5.0
        DPNorm's histogram noise ``sigma_C`` as a multiple of sigma.  Large
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
        None follows ``skdp.get_config()['secure_noise']``.  DP-SGD's noise is
        floating-point Gaussian noise drawn by torch (no exact grid sampler
        is fast enough for a gradient per step), so under ``secure_noise=True``
        ``fit`` raises a ``ValueError`` before touching the data or the
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
    **kwargs
        Any other skorch parameter (``lr``, ``max_epochs``, ``batch_size``,
        ``optimizer``, ``callbacks``, ``device``, ``module__*``, ...).
        ``batch_size`` is the *expected* Poisson batch size ``L``.

    Attributes
    ----------
    privacy_spent_ : PrivacySpent
        (epsilon, delta) spent by the fit (add/remove neighbours).
    noise_multiplier_ : float
        sigma used by the fit.
    clip_noise_multiplier_ : float or None
        DPNorm's sigma_C (None with fixed clipping).
    sampling_rate_ : float
        Poisson sampling rate ``q``.
    n_steps_ : int
        DP-SGD steps of the plan.
    clipping_mode_ : str
        The strategy used (``"ghost"``, or ``"vmap"`` after a fallback).
    history_ : skorch History
        skorch's history, with the columns ``epsilon`` (spent so far) per
        epoch and ``clip_norm`` per batch.
"""


class DPNeuralNetClassifier(_DPNeuralNetMixin, NeuralNetClassifier):
    __doc__ = (
        """skorch NeuralNetClassifier trained with differentially private SGD.
"""
        + _COMMON_DOC
        + """
    classes : array-like or None, default=None
        Class labels, in the order of the module's outputs.  None reads them
        off ``y`` (sorted), which leaks the label set (a PrivacyLeakWarning
        says so).  The module is trained on class indices (skorch's
        convention) and ``predict`` returns labels from ``classes_``.

    See Also
    --------
    DPNeuralNetRegressor : the regression twin.
    skdp.nn.DPSGDEngine : the DP-SGD step, reusable for any torch model.

    References
    ----------
    G. Acs, L. Melis, C. Castelluccia, E. De Cristofaro. Differentially private
    mixture of generative neural networks. IEEE TKDE 2018 (Alg. 3-4, Sec. III).
    M. Abadi et al. Deep learning with differential privacy. CCS 2016.

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
        max_grad_norm=1.0,
        clipping="fixed",
        noise_multiplier=None,
        clipping_bins=20,
        clipping_noise_ratio=5.0,
        clipping_mode="ghost",
        secure_noise=None,
        accountant=None,
        random_state=None,
        train_split=None,
        **kwargs,
    ):
        super().__init__(module, *args, train_split=train_split, **kwargs)
        self._store_dp_params(
            epsilon=epsilon,
            delta=delta,
            max_grad_norm=max_grad_norm,
            clipping=clipping,
            noise_multiplier=noise_multiplier,
            clipping_bins=clipping_bins,
            clipping_noise_ratio=clipping_noise_ratio,
            clipping_mode=clipping_mode,
            secure_noise=secure_noise,
            accountant=accountant,
            random_state=random_state,
        )

    _default_softmax = True

    def _validate_target(self, y):
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        if self.classes is None:
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
            unknown = np.setdiff1d(y, classes)
            raise ValueError(
                f"y has labels {unknown[:5].tolist()} that are not in classes={classes.tolist()}."
            )
        return idx.astype(np.int64)

    def _n_outputs(self, y):
        return len(self.classes_)

    def check_data(self, X, y):
        # In fit, y holds class indices: classes_ come from ``classes`` or from
        # the raw labels (set by _validate_target), not from the indices.
        if not (getattr(self, "_dp_fitting", False) and y is not None):
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

    See Also
    --------
    DPNeuralNetClassifier : the classification twin.

    References
    ----------
    G. Acs, L. Melis, C. Castelluccia, E. De Cristofaro. Differentially private
    mixture of generative neural networks. IEEE TKDE 2018 (Alg. 3-4, Sec. III).
    M. Abadi et al. Deep learning with differential privacy. CCS 2016.

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

    def __init__(
        self,
        module=None,
        *args,
        epsilon=1.0,
        delta=1e-5,
        max_grad_norm=1.0,
        clipping="fixed",
        noise_multiplier=None,
        clipping_bins=20,
        clipping_noise_ratio=5.0,
        clipping_mode="ghost",
        secure_noise=None,
        accountant=None,
        random_state=None,
        train_split=None,
        **kwargs,
    ):
        super().__init__(module, *args, train_split=train_split, **kwargs)
        self._store_dp_params(
            epsilon=epsilon,
            delta=delta,
            max_grad_norm=max_grad_norm,
            clipping=clipping,
            noise_multiplier=noise_multiplier,
            clipping_bins=clipping_bins,
            clipping_noise_ratio=clipping_noise_ratio,
            clipping_mode=clipping_mode,
            secure_noise=secure_noise,
            accountant=accountant,
            random_state=random_state,
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
