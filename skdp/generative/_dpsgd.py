"""DP-SGD training of the per-cluster generative models (Acs et al. 2018, Alg. 1 lines 3-6).

After the partition (line 1), ``T_S`` steps each pick a cluster ``s`` with the
public probability ``p_s`` (line 4) and update only that cluster's model on a
Poisson batch drawn from it at rate ``q_s`` (Alg. 4), through the core's
DP-SGD engine (:class:`~skdp.nn.DPSGDEngine`: per-example clipping, fixed or
by DPNorm, and Gaussian noise).  The engine records a plain subsampled
Gaussian per step; the scheme's true cost is the cluster-sampled event of
:func:`sgd_plan_event`, which :class:`_StepLedger` records for the steps
taken.  The plan functions (:func:`sgd_plan_event`, :func:`cluster_schedule`)
read public quantities only: the released noisy sizes and hyperparameters.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..privacy import ADD_REMOVE, GaussianEvent, LaplaceEvent, calibrate_noise_multiplier
from ..privacy.dpsgd import (
    combined_noise_multiplier,
    dataset_size_event,
    dpsgd_step_event,
    poisson_batch_indices,
    steps_per_epoch,
)
from ..privacy.events import ClusterSampledGaussianEvent
from ..privacy.ledger import accountant_for
from ..privacy.norm_selection import DPNormOptions


def sgd_plan_event(noise_multiplier, clip_noise_ratio, sampling_rates, selection_probabilities, count):
    """Event of ``count`` steps of Alg. 1 lines 3-6 (see :mod:`skdp.privacy.accountants.cluster_sampling`).

    With DPNorm (``clip_noise_ratio`` not None) a step also releases a noisy
    norm histogram of the same batch with multiplier ``clip_noise_ratio * z``;
    the pair is one Gaussian mechanism with the combined multiplier
    (:func:`skdp.privacy.dpsgd.combined_noise_multiplier`), exactly as the
    DP-SGD engine accounts it.

    With one cluster (picked with probability 1) a step is plain Poisson
    subsampling at rate ``q``: the event is the DP-SGD step's own
    (:func:`skdp.privacy.dpsgd.dpsgd_step_event`, a
    :class:`~skdp.privacy.SubsampledGaussianEvent`), whose RDP curve is the
    cluster-sampled one with ``p = 1`` and which, unlike it, the ``"pld"``
    accountant composes directly.  Several clusters give a
    :class:`~skdp.privacy.accountants.cluster_sampling.ClusterSampledGaussianEvent`,
    which only ``"rdp"`` (and basic / advanced composition, per step)
    can account.
    """
    z = float(noise_multiplier)
    if clip_noise_ratio is not None:
        z = combined_noise_multiplier(z, clip_noise_ratio * z)
    if len(sampling_rates) == 1 and float(selection_probabilities[0]) == 1.0:
        return dpsgd_step_event(z, float(sampling_rates[0]), count=count)
    return ClusterSampledGaussianEvent(
        count=int(count),
        neighbouring=ADD_REMOVE,
        noise_multiplier=z,
        sampling_rates=tuple(float(q) for q in sampling_rates),
        selection_probabilities=tuple(float(p) for p in selection_probabilities),
    )


def cluster_schedule(cluster_sizes, batch_size, n_epochs):
    """Selection probabilities, sampling rates and number of steps of Alg. 1.

    ``p_s = n_s / sum n`` (line 4), ``q_s = min(1, L / n_s)`` (Alg. 4 line 1:
    expected batch ``L`` from cluster ``s``), and ``n_epochs`` epochs of
    ``round(sum n / L)`` steps (Section III-B: an epoch visits every record
    once in expectation).  ``cluster_sizes`` must be public (noisy sizes).
    """
    sizes = np.maximum(np.asarray(cluster_sizes, dtype=float), 1.0)
    probs = sizes / sizes.sum()
    rates = np.minimum(1.0, batch_size / sizes)
    n_steps = int(n_epochs) * steps_per_epoch(float(sizes.sum()), batch_size)
    return probs, rates, n_steps


class _StepLedger:
    """Stands in for the fit's ledger inside :meth:`DPSGDEngine.step`.

    The engine records a plain subsampled-Gaussian event per step; in Alg. 1
    the step is part of a cluster-sampled scheme whose cost is
    :class:`ClusterSampledGaussianEvent`.  This adapter checks the engine's
    event against ``expected``, which the caller derives from the *plan's*
    parameters (gradient multiplier, DPNorm multiplier, the cluster's rate),
    never from the engine itself, so an engine built with other multipliers
    than the plan calibrated is refused; it counts the steps, and
    :meth:`flush` records the plan's event for the steps taken.
    """

    def __init__(self):
        self.expected = None
        self.count = 0

    def record(self, event):
        if event != self.expected:
            raise RuntimeError(
                f"DP-SGD step event {event!r} does not match the privacy plan {self.expected!r}."
            )
        self.count += 1
        return event

    def flush(self, ledger, make_event):
        if self.count:
            ledger.record(make_event(self.count))
        self.count = 0


def build_generator(
    kind, n_features, init_generator, *, hidden_units, latent_dim, likelihood, n_chains, device
):
    """One generative model, initialised from ``init_generator`` (CPU), on ``device``.

    Parameters
    ----------
    kind : {"vae", "rbm"}
        Variational autoencoder (Section II-B) or binary RBM (Section II-A, Eq. 1).
    n_features : int
    init_generator : torch.Generator
        CPU generator of the initial weights.
    hidden_units, latent_dim : int
    likelihood : {"bernoulli", "gaussian"}
        The VAE decoder's likelihood.
    n_chains : int
        Persistent chains of the RBM.
    device : str

    Returns
    -------
    module, loss, batch_loss
        The VAE's losses take the reparametrisation noise as a second input;
        the RBM has no batch loss (its per-example gradients go through the
        engine's vmap path).
    """
    import torch

    if kind == "vae":
        from ._vae import VAE, vae_batch_loss, vae_loss

        module = VAE(n_features, hidden_units, latent_dim, likelihood, init_generator)
        return module.to(device), vae_loss, vae_batch_loss
    from ._rbm import RBM, rbm_loss

    module = RBM(n_features, hidden_units, n_chains, init_generator)
    with torch.no_grad():
        module = module.to(device)
    # The RBM's weights are raw Parameters, not ghost-supported layers:
    # its per-example CD gradients go through the engine's vmap path.
    return module, rbm_loss, None


def train_cluster_models(
    X,
    labels,
    sizes,
    schedule,
    z,
    clip_noise_ratio,
    rng,
    ledger,
    *,
    kind,
    build,
    clipping,
    learning_rate,
    device,
):
    """Alg. 1 lines 3-6: ``T_S`` DP-SGD steps, each on one cluster's model.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Records in ``[0, 1]``.
    labels : ndarray of shape (n_samples,)
        The partition of the rows (post-processing of the released centres);
        only the members of each cluster are kept, never the labels.
    sizes : ndarray of shape (k,)
        Public (noisy or declared) cluster sizes.
    schedule : tuple
        ``(probs, rates, n_steps)`` of :func:`cluster_schedule`.
    z : float
        Calibrated gradient noise multiplier ``sigma_S``.
    clip_noise_ratio : float or None
        DPNorm's multiplier over ``z`` (None: a fixed clipping bound).
    rng : numpy.random.Generator
        The fit's stream: seeds the local torch generators, picks the
        clusters and draws the Poisson batches.
    ledger : PrivacyLedger
        Receives one :func:`sgd_plan_event` for the steps taken.
    kind : {"vae", "rbm"}
        The VAE gets its reparametrisation noise as an input; the RBM
        advances its fantasy chains after each step.
    build : callable
        ``build(init_generator) -> (module, loss, batch_loss)``
        (:func:`build_generator` with the model's hyperparameters).
    clipping : callable
        ``clipping(clip_z) -> ClippingStrategy`` of one engine.
    learning_rate : float
        Adam learning rate (the paper's optimiser).
    device : str
        Torch device.

    Returns
    -------
    modules : list of torch.nn.Module
        The trained models, on the CPU, frozen.
    picks : ndarray of shape (k,)
        Steps taken on each cluster's model.
    clip_z : float or None
        DPNorm's noise multiplier.
    clipping_mode : {"ghost", "vmap"}
    """
    import torch

    from ..nn import DPSGDEngine

    probs, rates, n_steps = schedule
    k = len(sizes)
    clip_z = None if clip_noise_ratio is None else clip_noise_ratio * z
    members = [np.flatnonzero(labels == s) for s in range(k)]
    step_ledger = _StepLedger()
    picks = np.zeros(k, dtype=np.intp)
    # Local torch generators, seeded from the fit's generator and dropped
    # when fit returns: torch's global RNG is neither seeded nor read, and
    # no generator (or its state) stays on the model.  init_gen draws the
    # initial weights (on the CPU, where the modules are built); model_gen
    # the VAE's reparametrisation noise and the RBM's Gibbs sweeps;
    # noise_gen the gradient and DPNorm noise, alone, so nothing the
    # released models carry (the RBM's fantasy chains) comes from the
    # stream of the privacy noise.
    init_gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
    model_gen = torch.Generator(device=device).manual_seed(int(rng.integers(2**62)))
    noise_gen = torch.Generator(device=device).manual_seed(int(rng.integers(2**62)))
    Xt = torch.as_tensor(X, dtype=torch.float32, device=device)
    modules, engines, optimizers = [], [], []
    for s in range(k):
        module, loss, batch_loss = build(init_gen)
        engines.append(
            DPSGDEngine(
                module,
                loss,
                batch_loss_fn=batch_loss,
                noise_multiplier=z,
                sampling_rate=float(rates[s]),
                expected_batch_size=float(rates[s] * max(sizes[s], 1.0)),
                clipping=clipping(clip_z),
                max_steps=n_steps,
                generator=noise_gen,
                # The template refused secure noise before the reservation.
                secure_noise=False,
            )
        )
        modules.append(module)
        optimizers.append(torch.optim.Adam(module.parameters(), lr=learning_rate))
    try:
        for _ in range(n_steps):
            s = int(rng.choice(k, p=probs))  # Alg. 1 line 4
            picks[s] += 1
            idx = members[s][poisson_batch_indices(len(members[s]), rates[s], rng)]
            batch = (Xt[torch.as_tensor(idx, device=device)],)
            if kind == "vae":
                # The VAE's reparametrisation noise, one row per record,
                # enters as an input: each record's loss is then a fixed
                # function of the record and its own row (ghost
                # clipping's contract), and no global RNG is read.
                batch += (torch.randn(len(idx), modules[s].latent_dim, generator=model_gen, device=device),)
            step_ledger.expected = dpsgd_step_event(z, float(rates[s]), clip_z)
            engines[s].step(batch, step_ledger)
            optimizers[s].step()
            if kind == "rbm":
                modules[s].advance_chains(model_gen)
    finally:
        step_ledger.flush(ledger, lambda count: sgd_plan_event(z, clip_noise_ratio, rates, probs, count))

    for module in modules:
        module.zero_grad(set_to_none=True)
        module.to("cpu").eval()
        module.requires_grad_(False)
    return modules, picks, clip_z, engines[0].clipping_mode


def fit_networks(est, X, plan, rng, ledger, rtol):
    """Alg. 1 with a network generator: partition, calibrate, then ``T_S`` DP-SGD steps.

    ``est`` is the :class:`DPGenerativeMixture` (its hyperparameters, its
    clustering ``est._cluster`` and its plan's calibration); the gradient
    noise multiplier is calibrated on the whole composition (or, when the
    cluster sizes were released, staged after them) and the models are
    trained by :func:`train_cluster_models`.  Returns the fitted attributes
    by name; the partition of the training rows is not among them.
    """
    from ..nn import DPNormClipping, FixedClipping

    m = X.shape[1]
    cluster_events, labels, sizes, clusterer = est._cluster(X, plan, rng, ledger)
    probs, rates, n_steps = cluster_schedule(sizes, est.batch_size, est.n_epochs)
    ratio = plan.settings.clip_noise_ratio
    clip_norm, clip_norm_max, clip_norm_bins, _ = DPNormOptions.of(est)
    # Post-processing of the released sizes: the schedule, hence the
    # steps' events, are public once the clustering is on the ledger.
    # When the sizes were released (not declared) the schedule is an
    # adaptive choice: the template's staged-plan step calibrates it so
    # the claim holds whatever the sizes came out as.
    if cluster_events:
        z = est._calibrate_staged(
            ledger,
            lambda z: est._planned_events(z, [], rates, probs, n_steps),
            plan.epsilon,
            plan.delta,
        )
    else:
        z = calibrate_noise_multiplier(
            lambda z: est._planned_events(z, cluster_events, rates, probs, n_steps),
            plan.epsilon,
            plan.delta,
            plan.composition,
            ADD_REMOVE,
            rtol=rtol,
        )
    modules, picks, clip_z, clipping_mode = train_cluster_models(
        X,
        labels,
        sizes,
        (probs, rates, n_steps),
        z,
        ratio,
        rng,
        ledger,
        kind=est.generator,
        build=partial(
            build_generator,
            est.generator,
            m,
            hidden_units=est.hidden_units,
            latent_dim=est.latent_dim,
            likelihood=est.likelihood,
            n_chains=est.n_chains,
            device=est.device,
        ),
        clipping=lambda clip_z: (
            DPNormClipping(clip_norm_max, clip_norm_bins, clip_z)
            if ratio is not None
            else FixedClipping(float(clip_norm))
        ),
        learning_rate=est.learning_rate,
        device=est.device,
    )
    del labels  # the partition of the training rows is never stored
    return {
        "clusterer_": clusterer,
        "generators_": modules,
        "weights_": probs,
        "cluster_sizes_": np.maximum(sizes, 1.0),
        "sampling_rates_": rates,
        "n_steps_": int(n_steps),
        "cluster_steps_": picks,
        "noise_multiplier_": float(z),
        "clip_noise_multiplier_": clip_z,
        "clipping_mode_": clipping_mode,
        "marginals_": None,
        "noise_std_": None,
    }


def composition_supported(composition, generator, k):
    """Whether ``composition`` (or its fallback) can account a fit's events, asked of the core.

    A representative history (any numbers: support depends on the event
    types, the sampling scheme and the relation) of the mode set by the
    declared number of clusters ``k`` (None: the capacity rule): the size
    count's Gaussian (the clustering's Gaussian and Laplace events are as
    widely supported) and the steps' event.
    """
    k = k or 2
    if generator == "marginals":
        # The Gaussian release, and the clustering's Laplace events.
        probe = [GaussianEvent(1, ADD_REMOVE), LaplaceEvent(1, ADD_REMOVE)]
    else:
        probe = [
            dataset_size_event(1.0),
            sgd_plan_event(1.0, None, [0.5] * k, [1.0 / k] * k, 1),
        ]
    try:
        accountant_for(probe, composition)
    except ValueError:
        return False
    return True
