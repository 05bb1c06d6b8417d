"""The private M-step of DP-EM: release the moments, map them to parameters.

Park et al. (2017), Alg. 1, lines 4-7: with responsibilities computed from the
previous (public) parameters, one iteration releases the counts ``N_k``
(Eq. 13), the sums ``S1_k`` (Eq. 14-15, Appendix A) and the second moments
``S2_k`` (Eq. 16-18, Appendix B) with additive noise through the core's
mechanisms (:mod:`skdp.privacy`), then maps them to weights, means and
covariances (post-processing).  The second moments get two-sided noise of full
support instead of the paper's Gamma and Wishart noise, which give no finite
epsilon (the user guide, :doc:`/mixture`, "Deviation from the paper").

The plan values (noise multipliers, families, how components are released)
come from :class:`~skdp.mixture._plan.EMPlan`; nothing here reads an estimator.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import block_diag

from ..privacy import (
    GaussianEvent,
    GaussianMechanism,
    LaplaceEvent,
    LaplaceMechanism,
    SymmetricMatrixGaussianMechanism,
    SymmetricMatrixLaplaceMechanism,
)
from ._moments import (
    MIN_COUNT,
    clip_eigenvalues,
    expected_complete_log_likelihood,
    map_covariance,
    map_weights,
    mean_sensitivity,
    mle_covariance,
    project_rows_to_unit_ball,
    project_weights,
    second_moment_sensitivity,
    tied_covariance,
    weights_sensitivity,
)


def niw_prior(
    n_features, weight_concentration_prior, mean_precision_prior, degrees_of_freedom_prior, covariance_prior
):
    """The Dirichlet / Normal-inverse-Wishart prior of MAP-EM in the unit-ball scale.

    Park et al. (2017), Section 4.1 and Appendix B.2.

    Parameters
    ----------
    n_features : int
        ``d``.
    weight_concentration_prior : float
        Dirichlet ``alpha``.
    mean_precision_prior : float
        NIW ``kappa0``.
    degrees_of_freedom_prior : float or None
        NIW ``nu0``; None means ``d + 2``.
    covariance_prior : float, array-like of shape (d, d) or None
        NIW scale ``S0``; None means ``0.1 I``, a float ``s`` means ``s I``.

    Returns
    -------
    alpha, kappa0, c, s0 : float, float, float, ndarray of shape (d, d)
        ``c = nu0 + d + 2``, the MAP covariance's extra denominator.

    Raises
    ------
    ValueError
        If ``covariance_prior`` is not a symmetric PSD ``(d, d)`` matrix or a non-negative float.
    """
    nu0 = n_features + 2.0 if degrees_of_freedom_prior is None else degrees_of_freedom_prior
    if covariance_prior is None:
        s0 = 0.1 * np.eye(n_features)
    elif np.ndim(covariance_prior) == 0:
        s0 = float(covariance_prior) * np.eye(n_features)
    else:
        s0 = np.asarray(covariance_prior, dtype=float)
        if (
            s0.shape != (n_features, n_features)
            or not np.all(np.isfinite(s0))
            or not np.allclose(s0, s0.T)
            or np.linalg.eigvalsh(s0).min() < 0
        ):
            raise ValueError(
                f"covariance_prior must be a symmetric PSD matrix of shape ({n_features}, "
                f"{n_features}) or a non-negative float."
            )
    return float(weight_concentration_prior), float(mean_precision_prior), nu0 + n_features + 2.0, s0


def private_m_step(
    stats, n_samples, multipliers, prior, rng, ledger, plan, estimator, reg_covar, tied_second=None
):
    """Release the moments of one M-step and map them to parameters.

    Park et al. (2017), Alg. 1, lines 4-7.  Every release adds noise of scale
    ``z * sensitivity`` to a *sum* (counts, ``S1``, ``S2``); dividing by the
    public denominators afterwards reproduces the paper's noise on the
    normalised moments.

    Parameters
    ----------
    stats : tuple of ndarray
        The exact ``(N_k, S1_k, S2_k)`` of the rows in the unit ball
        (:func:`~skdp.mixture._moments.expected_statistics`); never returned.
    n_samples : int
        ``N``, public under replace-one neighbours.
    multipliers : tuple of float
        Noise multipliers of the (counts, first moments, second moments).
    prior : tuple
        :func:`niw_prior`.
    rng : numpy.random.Generator
        The fit's noise stream.
    ledger : PrivacyLedger
        Where every release records its event.
    plan : EMPlan
        Families, ``component_releases``, ``covariance_type``, neighbouring.
    estimator : {"map", "mle"}
    reg_covar : float
        Least eigenvalue floor (:func:`noise_floor`).
    tied_second : ndarray or None, default=None
        The tied model's released total second moment: None in the first
        iteration (released here), passed back in later ones and reused.

    Returns
    -------
    weights, means, covariances : ndarray
        Parameters in the unit-ball scale.
    bound : float
        The lower bound ``Q`` (Eq. 4) computed from the released moments only.
    tied_second : ndarray or None
        The released total second moment (tied model), else None.
    """
    counts, first, second = stats
    z_counts, z_first, z_second = multipliers
    alpha, kappa0, c, s0 = prior
    k, d = first.shape
    is_map = estimator == "map"
    joint = plan.joint
    nb = plan.neighbouring
    first_family, second_family = plan.first_family, plan.second_family
    vector_mech = LaplaceMechanism if first_family is LaplaceEvent else GaussianMechanism
    norm = 1 if first_family is LaplaceEvent else 2

    # 1. Weights (Eq. 13): one release of the K counts.  One component's
    # count is the public n (its responsibilities are all 1): not released.
    if k == 1:
        pi_mle = np.ones(1)
    else:
        sens = weights_sensitivity(norm)
        mech = vector_mech(sensitivity=sens, scale=z_counts * sens, neighbouring=nb)
        pi_mle = project_weights(mech.release(counts, rng, ledger) / n_samples)
    n_tilde = np.maximum(n_samples * pi_mle, MIN_COUNT)
    weights = map_weights(n_samples * pi_mle, n_samples, alpha) if is_map else pi_mle

    # 2. Means (Eq. 14-15, Appendix A): the sums S1_k, jointly or one by one.
    sens = mean_sensitivity(d, norm, joint=joint)
    mech = vector_mech(sensitivity=sens, scale=z_first * sens, neighbouring=nb)
    if joint:
        noisy_first = mech.release(first, rng, ledger)
    else:
        noisy_first = np.vstack([mech.release(first[j], rng, ledger) for j in range(k)])
    mean_den = n_tilde + kappa0 if is_map else n_tilde
    means = project_rows_to_unit_ball(noisy_first / mean_den[:, np.newaxis])

    # 3. Second moments (Eq. 16-18, Appendix B, with two-sided noise).
    floor_args = dict(
        family=second_family,
        covariance_type=plan.covariance_type,
        joint=joint,
        n_components=plan.n_components,
        reg_covar=reg_covar,
    )
    release_args = dict(
        family=second_family, covariance_type=plan.covariance_type, joint=joint, neighbouring=nb
    )
    if plan.covariance_type == "tied":
        if tied_second is None:
            tied_second = release_second_moments(second, z_second, rng, ledger, **release_args)
        noisy_second = tied_second
        # MAP: N + nu0 + d + 1 + K = N + c + K - 1 (tied_covariance).
        den = n_samples + c + k - 1 if is_map else float(n_samples)
        floor = noise_floor(z_second, d, np.array([den]), tied=True, **floor_args)
        covariances = clip_eigenvalues(
            tied_covariance(
                noisy_second, means, n_tilde, kappa0 if is_map else 0.0, den, s0 if is_map else 0.0
            )[np.newaxis],
            floor,
            1.0,
            band=noise_band(z_second, d, np.array([den]), tied=True, **floor_args),
        )[0]
        bound = expected_complete_log_likelihood(
            weights, means, covariances, n_tilde, means * mean_den[:, np.newaxis], noisy_second, "tied"
        )
        return weights, means, covariances, bound, tied_second
    noisy_second = release_second_moments(second, z_second, rng, ledger, **release_args)
    cov_den = n_tilde + c if is_map else n_tilde
    per_unit = cov_den[:, np.newaxis, np.newaxis] if second.ndim == 3 else cov_den
    covariances = covariances_from_moments(
        noisy_second / per_unit,
        means,
        n_tilde,
        kappa0,
        cov_den,
        s0,
        is_map,
        plan.covariance_type,
        noise_floor(z_second, d, cov_den, **floor_args),
        noise_band(z_second, d, cov_den, **floor_args),
    )
    bound = expected_complete_log_likelihood(
        weights,
        means,
        covariances,
        n_tilde,
        means * mean_den[:, np.newaxis],
        noisy_second,
        plan.covariance_type,
    )
    return weights, means, covariances, bound, None


def _matrix_mechanism(family):
    return SymmetricMatrixGaussianMechanism if family is GaussianEvent else SymmetricMatrixLaplaceMechanism


def release_second_moments(second, z, rng, ledger, *, family, covariance_type, joint, neighbouring):
    """Noisy ``S2_k`` (full) or traces (spherical), jointly or one by one; tied: the total.

    Park et al. (2017), Eq. 16-18 and Appendix B, with two-sided noise
    ("Analyze Gauss", Dwork et al. 2014: symmetric-matrix Gaussian noise on
    the upper triangle; symmetric Laplace noise under pure DP).

    Parameters
    ----------
    second : ndarray
        ``(K, d, d)`` (full), ``(K,)`` traces (spherical) or ``(d, d)`` (tied).
    z : float
        Noise multiplier of the second moments.
    rng : numpy.random.Generator
    ledger : PrivacyLedger
    family : type
        :class:`~skdp.privacy.GaussianEvent` or :class:`~skdp.privacy.LaplaceEvent`.
    covariance_type : {"full", "tied", "spherical"}
    joint : bool
        One release of the K stacked components (their sensitivity is one
        component's: the responsibilities of a row sum to one) or K releases.
    neighbouring : str

    Returns
    -------
    noisy_second : ndarray
        Same shape as ``second``.
    """
    norm = 2 if family is GaussianEvent else 1
    if covariance_type == "tied":
        d = second.shape[0]
        sens = second_moment_sensitivity(d, "full", norm, joint=False)
        mech = _matrix_mechanism(family)(sensitivity=sens, scale=z * sens, neighbouring=neighbouring)
        return mech.release(second, rng, ledger)
    k = second.shape[0]
    d = second.shape[1] if second.ndim == 3 else 1
    sens = second_moment_sensitivity(d, covariance_type, norm, joint=joint, n_components=k)
    if covariance_type == "spherical":
        mech_cls = GaussianMechanism if family is GaussianEvent else LaplaceMechanism
        mech = mech_cls(sensitivity=sens, scale=z * sens, neighbouring=neighbouring)
        if joint:
            return mech.release(second, rng, ledger)
        return np.array([mech.release(second[j], rng, ledger) for j in range(k)])
    mech = _matrix_mechanism(family)(sensitivity=sens, scale=z * sens, neighbouring=neighbouring)
    if not joint:
        return np.stack([mech.release(second[j], rng, ledger) for j in range(k)])
    # One symmetric release of the block-diagonal stack: the off-diagonal
    # blocks are identically zero under every dataset, so the sensitivity
    # of the whole upper triangle is the joint one; their noise is dropped.
    noisy = mech.release(block_diag(*second), rng, ledger)
    return np.stack([noisy[j * d : (j + 1) * d, j * d : (j + 1) * d] for j in range(k)])


def noise_floor(z, d, den, *, family, covariance_type, joint, n_components, reg_covar, tied=False):
    """Eigenvalue floor of each released covariance: ``reg_covar`` or the noise's own level.

    Post-processing of public quantities.  The second moments carry
    symmetric noise of per-entry std ``s = z * sensitivity`` (``sqrt(2)``
    times the scale for Laplace), so after the division by the public
    denominator ``den_k`` each variance is known only to within
    ``s / den_k``: a smaller eigenvalue is not resolved, and a Gaussian
    that believes it assigns densities far below the data's (with the
    paper's clipping at ``reg_covar`` the held-out log-likelihood falls
    under a uniform density on the domain in moderate dimension, where
    ``d (d + 1) / 2`` noisy entries push the smallest eigenvalues down by
    up to ``2 s sqrt(d) / den_k``).  The floor lifts every such direction
    to the noise level ``s / den_k`` instead, capped at 1 (the unit ball's
    largest variance); it vanishes as ``n epsilon`` grows.  For
    ``"spherical"`` the released trace has noise ``s`` and the variance
    is the trace over ``d``.

    Parameters
    ----------
    z : float
        Noise multiplier of the second moments.
    d : int
        Number of features.
    den : array-like
        Public denominators ``den_k`` of the covariances.
    family : type
        Event class of the second moments.
    covariance_type : {"full", "tied", "spherical"}
    joint : bool
        Whether the components' moments are released jointly.
    n_components : int
    reg_covar : float
        Least floor.
    tied : bool, default=False
        The tied model's total second moment (one full matrix, released alone).

    Returns
    -------
    floor : ndarray
        Per-denominator floor in ``[reg_covar, 1]``.
    """
    level = noise_level(
        z, d, den, family=family, covariance_type=covariance_type, joint=joint, n_components=n_components, tied=tied
    )
    return np.clip(level, reg_covar, 1.0)


def noise_level(z, d, den, *, family, covariance_type, joint, n_components, tied=False, **_):
    """Noise std of each entry of a released covariance: ``s / den_k`` (public).

    ``s = z * sensitivity`` (``sqrt(2)`` times the scale for Laplace) is the
    per-entry std of the released second moment; ``"spherical"``: the
    trace's over ``d``.  Arguments as :func:`noise_floor`'s.
    """
    norm = 2 if family is GaussianEvent else 1
    cov_type = "full" if tied else covariance_type
    k = 1 if tied else n_components
    sens = second_moment_sensitivity(d, cov_type, norm, joint=joint and not tied, n_components=k)
    entry_std = z * sens * (1.0 if family is GaussianEvent else math.sqrt(2.0))
    level = entry_std / d if cov_type == "spherical" else entry_std
    return level / np.asarray(den, dtype=float)


def noise_band(z, d, den, **kwargs):
    """Upper edge ``2 sqrt(d) s / den_k`` of the eigenvalues the noise alone gives a covariance (public).

    A symmetric ``d x d`` matrix of independent entries of std ``s`` has its
    eigenvalues in ``[-2 s sqrt(d), 2 s sqrt(d)]`` (Wigner's semicircle,
    the edge reached as ``d`` grows); added to the data's covariance it
    moves every eigenvalue by up to that much.  Eigenvalues of a released
    covariance at or below the edge are the noise's as much as the data's:
    :func:`~skdp.mixture._moments.clip_eigenvalues` replaces them by their
    mean (``band``).  Arguments as :func:`noise_floor`'s (``reg_covar`` is
    ignored: the band is the noise's, not a floor).
    """
    return 2.0 * math.sqrt(d) * noise_level(z, d, den, **kwargs)


def covariances_from_moments(
    noisy_second, means, n_tilde, kappa0, cov_den, s0, is_map, covariance_type, floor, band=None
):
    """Post-processing: noisy second moment -> covariance with eigenvalues in ``[floor, 1]``.

    MLE: ``S2~_k / N~_k - mu_k mu_k^T``; MAP: Park et al. (2017), Appendix
    B.2 (:func:`~skdp.mixture._moments.map_covariance`); spherical: the trace
    of the same formula over ``d``.

    Parameters
    ----------
    noisy_second : ndarray
        Released second moments divided by ``cov_den``.
    means : ndarray of shape (K, d)
        Released means (unit-ball scale).
    n_tilde : ndarray of shape (K,)
        Public noisy counts.
    kappa0 : float
    cov_den : ndarray of shape (K,)
        Public denominators.
    s0 : ndarray of shape (d, d)
        NIW scale.
    is_map : bool
    covariance_type : {"full", "spherical"}
    floor : float or ndarray
        Eigenvalue floor (:func:`noise_floor`).
    band : float or ndarray or None, default=None
        Edge of the noise's eigenvalues (:func:`noise_band`): the
        eigenvalues of a full covariance at or below it are averaged
        (:func:`~skdp.mixture._moments.clip_eigenvalues`).

    Returns
    -------
    covariances : ndarray
    """
    d = means.shape[1]
    if covariance_type == "spherical":
        # The trace of the matrix formula (MLE or MAP), divided by d.
        prior_trace = np.trace(s0) / cov_den if is_map else 0.0
        ratio = (n_tilde + kappa0) / cov_den if is_map else 1.0
        var = (noisy_second + prior_trace - ratio * np.sum(means**2, axis=1)) / d
        return np.clip(var, floor, 1.0)
    if is_map:
        covs = map_covariance(noisy_second, means, n_tilde, kappa0, cov_den, s0)
    else:
        covs = mle_covariance(noisy_second, means)
    return clip_eigenvalues(covs, floor, 1.0, band=band)
