"""Alg. 1 line 1 of :class:`~skdp.generative.DPGenerativeMixture`: the private partition.

DP kernel k-means (:class:`~skdp.cluster.DPKernelKMeans`, Acs et al. 2018,
Alg. 2 and 3) nested in the mixture's fit, its replace-one events expressed
under the mixture's add/remove neighbours; or, with one cluster, the
released (or declared) size of the data.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .._random import child_generator
from ..cluster import DPKernelKMeans
from ..privacy import ADD_REMOVE, REPLACE_ONE, GaussianEvent, LaplaceEvent
from ..privacy.dpsgd import dataset_size_event, release_dataset_size

#: ``n_clusters="auto"`` of the network generators (``"vae"``, ``"rbm"``): the
#: paper's ten clusters (Acs et al. 2018, Section V).
DEFAULT_NETWORK_CLUSTERS = 10


def partition_mode(partition, generator, categorical, k):
    """The partition Alg. 1 line 1 uses: ``"categorical"``, ``"em"``, ``"kmeans"`` or ``"none"`` (one cluster).

    ``partition="auto"``: with ``generator="marginals"``, the first
    declared block's categories (a public partition function: nothing is
    spent on it) with latent classes nested in them, or without a block
    latent classes fitted by DP-EM (``"em"``); otherwise DP kernel
    k-means when ``k`` (the declared number of clusters, None for the
    capacity rule) is above one.
    """
    if partition == "categorical" or (partition == "auto" and generator == "marginals" and categorical):
        if generator != "marginals":
            raise ValueError(
                f"partition='categorical' needs generator='marginals', got generator={generator!r}."
            )
        if not categorical:
            raise ValueError("partition='categorical' needs at least one block declared in categorical.")
        return "categorical"
    if partition == "auto" and generator == "marginals":
        return "em"
    return "kmeans" if k is None or k > 1 else "none"


def clustering_events_as_add_remove(events):
    """Express DPKernelKMeans' replace-one events under add/remove neighbours.

    DPKernelKMeans (Alg. 2 and 3) releases only noisy *counts* (cluster sizes,
    DPNorm's norm histogram) and noisy *sums* of clipped feature vectors.
    Adding or removing one record changes a count vector by one unit (L2
    sensitivity 1, versus ``sqrt(2)`` for replace-one) and a sum by one clipped
    vector (``C``, versus ``2C``): every add/remove sensitivity is at most the
    replace-one sensitivity the events were calibrated with, so the same noise
    has at least the recorded noise multiplier under add/remove.  Re-labelling
    each event as add/remove with its recorded multiplier is therefore a valid
    (conservative) description.  Any other event type is refused: the argument
    is specific to count and sum releases.
    """
    converted = []
    for event in events:
        if event.neighbouring == ADD_REMOVE:
            converted.append(event)
        elif isinstance(event, (GaussianEvent, LaplaceEvent)) and event.neighbouring == REPLACE_ONE:
            converted.append(replace(event, neighbouring=ADD_REMOVE))
        else:
            raise TypeError(
                f"Cannot convert a clustering event of type {type(event).__name__} to add/remove neighbours."
            )
    return converted


class _NestedKernelKMeans(DPKernelKMeans):
    """The clustering of :class:`DPGenerativeMixture` (Alg. 1 line 1): DPKernelKMeans without its row check.

    DPKernelKMeans refuses fewer rows than clusters, which is public under
    its replace-one neighbours; inside the mixture the relation is
    add/remove and ``n`` is private, so an error decided by ``n`` after the
    hold would release it.  The fit runs whatever ``n`` (empty clusters get
    noisy sizes like the others); the same releases, the same accounting.
    """

    def _check_n_samples(self, n_samples):
        pass


def cluster_records(est, X, plan, rng, ledger):
    """Alg. 1 line 1 for the mixture ``est``: returns (events, labels, public sizes, clusterer).

    ``events`` are those recorded on ``ledger`` before the DP-SGD steps
    (the clustering's, or the size count's); the sizes are released
    (noisy) or declared, never exact.

    The labels of ``X`` are returned for the fit's partition only; the
    caller must not store them (they are exact functions of every row).
    """
    n = X.shape[0]
    # The number of clusters: the plan's (the marginals generator's capacity
    # rule, from released and public quantities), else the declared one.
    n_clusters = est.n_clusters if plan.settings.n_clusters is None else plan.settings.n_clusters
    if n_clusters == "auto":
        n_clusters = DEFAULT_NETWORK_CLUSTERS
    if n_clusters == 1:
        # One model on the whole data.  Under add/remove neighbours N is
        # private: the plan reads a declared size, or a noisy count
        # whose event goes on the ledger (and into the calibration).
        labels = np.zeros(n, dtype=np.intp)
        if est.n_samples != "auto":
            return [], labels, np.array([float(est.n_samples)]), None
        count_std = plan.settings.count_noise_std
        noisy_n = release_dataset_size(n, count_std, rng, ledger)
        return [dataset_size_event(count_std)], labels, np.array([noisy_n]), None
    gamma = 1.0 / X.shape[1] if est.gamma is None else est.gamma
    km = _NestedKernelKMeans(
        n_clusters=n_clusters,
        epsilon=plan.settings.cluster_epsilon,
        delta=est.delta,
        gamma=gamma,
        n_components=est.n_components,
        max_iter=est.kmeans_iter,
        init=est.cluster_init,
        # A generator spawned from the fit's: every noise draw of the
        # clustering comes from the parent's entropy, and no seed exists
        # that a nested estimator could keep.  (Nested validation is
        # skipped inside this fit, so the Generator is accepted.)
        random_state=child_generator(rng),
        # The marginals' fit samples every release alike; the DP-SGD
        # path refuses secure noise before the clustering runs.
        **({"secure_noise": plan.secure_noise} if est.generator == "marginals" else {}),
    ).fit(X)
    # The spawned generator has been stepped past the clustering's noise
    # draws and can be run back to them: the released clusterer keeps
    # none.  Its get_params() shows random_state=None.
    km.random_state = None
    # The base mixin's per-fit ledger holds every event the clustering recorded.
    events = clustering_events_as_add_remove(km.privacy_ledger_.events)
    for event in events:
        ledger.record(event)
    return events, km.predict(X), np.asarray(km.noisy_counts_, dtype=float), km
