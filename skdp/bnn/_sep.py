"""Stochastic expectation propagation algebra in natural parameters.

Vinaroz & Park (DP-SEP) and Li, Hernandez-Lobato & Turner (2015, SEP).  The
approximate posterior is ``q = p0 f^N`` (Eq. 2): a prior ``p0`` times ``N``
copies of one average site ``f``.  Every distribution here is a product of
independent Gaussians over the ``P`` weights and one Gamma over the noise
precision, so each is a point in natural-parameter space, laid out as one
vector of length ``2 P + 2``::

    [m / v (P entries), -1 / (2 v) (P entries), alpha - 1, -beta]

In that space multiplying densities adds vectors and powers scale them:

* posterior ``theta_q = theta_0 + N theta_f`` (Eq. 2);
* cavity ``theta_cav = theta_0 + (N - 1) theta_f`` (Eq. 3);
* site of datapoint n ``theta_fn = theta(proj[tilted]) - theta_cav``
  (Algorithm 3, line 6);
* damped update ``theta_f <- (1 - gamma/N) theta_f + (gamma/N) theta_fn``
  (SEP's ``f <- f^(1 - gamma/N) f_n^(gamma/N)``, Algorithm 2 line 5).

Sites may be improper (negative precision); only the cavity and the
posterior must be proper, which :func:`from_natural` enforces by a projection
(post-processing of the released sites).
"""

from __future__ import annotations

import math

import numpy as np

from ._pbp import tilted_moments


def to_natural(m, v, alpha, beta):
    """Natural parameters of ``prod_j N(m_j, v_j) x Gamma(alpha, beta)``."""
    m = np.asarray(m, dtype=float)
    v = np.asarray(v, dtype=float)
    return np.concatenate([m / v, -0.5 / v, [alpha - 1.0, -beta]])


def from_natural(theta, min_precision, min_alpha, noise_variance_bounds=(0.0, np.inf), max_abs_mean=np.inf):
    """Moments ``(m, v, alpha, beta)`` of a natural-parameter vector, made proper.

    Precisions below ``min_precision`` are raised to it (keeping ``m / v``),
    means are clipped to ``[-max_abs_mean, max_abs_mean]``, ``alpha`` is
    floored and ``beta`` clipped so that the expected noise variance
    ``beta / (alpha - 1)`` lies in ``noise_variance_bounds``: a projection of
    the (noisy) natural parameters onto proper, bounded distributions, so
    post-processing.
    """
    theta = np.asarray(theta, dtype=float)
    n_weights = (theta.size - 2) // 2
    precision = np.maximum(-2.0 * theta[n_weights : 2 * n_weights], min_precision)
    v = 1.0 / precision
    m = np.clip(theta[:n_weights] * v, -max_abs_mean, max_abs_mean)
    alpha = max(float(theta[-2]) + 1.0, min_alpha)
    lo, hi = noise_variance_bounds
    beta = min(max(-float(theta[-1]), lo * (alpha - 1.0)), hi * (alpha - 1.0))
    return m, v, alpha, beta


def clip_l2(theta, clip_norm):
    """Scale ``theta`` down to L2 norm at most ``clip_norm`` (DP-SEP's clipping)."""
    norm = float(np.sqrt(np.dot(theta, theta)))
    if norm > clip_norm:
        return theta * (clip_norm / norm)
    return theta


def site_from_tilted(theta_cavity, m_new, v_new, alpha_new, beta_new):
    """Site ``proj[tilted] / cavity`` in natural parameters (Algorithm 3, line 6).

    The moment-matching step of PBP can return a non-positive variance (or an
    undefined Gamma); PBP then skips the update, and so do we, coordinate by
    coordinate: the site of a rejected weight (or of the Gamma) is zero, i.e.
    ``f_n = 1`` there.  The site stays a function of one datapoint and the
    public cavity, so the sensitivity argument is unchanged.
    """
    n_weights = m_new.size
    site = np.empty_like(theta_cavity)
    ok = (v_new > 0) & np.isfinite(v_new) & np.isfinite(m_new)
    inv_v = np.where(ok, 1.0 / np.where(ok, v_new, 1.0), 0.0)
    site[:n_weights] = np.where(ok, m_new * inv_v - theta_cavity[:n_weights], 0.0)
    site[n_weights : 2 * n_weights] = np.where(
        ok, -0.5 * inv_v - theta_cavity[n_weights : 2 * n_weights], 0.0
    )
    if alpha_new > 0 and beta_new > 0 and math.isfinite(alpha_new) and math.isfinite(beta_new):
        site[-2] = alpha_new - 1.0 - theta_cavity[-2]
        site[-1] = -beta_new - theta_cavity[-1]
    else:
        site[-2:] = 0.0
    return site


def damped_update(theta_f, site, rate):
    """SEP's ``f^(1 - rate) f_n^rate`` with ``rate = gamma / N``."""
    return (1.0 - rate) * theta_f + rate * site


def factor_sensitivity(clip_norm, damping, n_samples):
    """L2 sensitivity of the new factor's natural parameters (Proposition 1).

    Under replace-one neighbours the visited datapoint's clipped site changes
    from ``theta_fn`` to ``theta_fn'``, both of norm at most ``C``, while the
    previous (released) factor is the same:

        ||theta_f_new - theta_f_new'|| = (gamma / N) ||theta_fn - theta_fn'||
                                      <= 2 gamma C / N.
    """
    return 2.0 * damping * clip_norm / n_samples


def sep_site(theta_f, theta_0, n_samples, x, y, shapes, floors):
    """Site of one datapoint ``(x, y)`` given the current factor (Algorithm 3, lines 4-6).

    Forms the cavity (Eq. 3), made proper by :func:`from_natural` with
    ``floors = (min_precision, min_alpha, noise_variance_bounds, max_abs_mean)``, runs PBP's moment
    matching on it and returns ``theta(proj[tilted]) - theta_cavity``
    (unclipped).
    """
    cavity = theta_0 + (n_samples - 1) * theta_f
    m, v, alpha, beta = from_natural(cavity, *floors)
    n_weights = m.size
    # The projected cavity in natural parameters: m / v is unchanged.
    cavity[n_weights : 2 * n_weights] = -0.5 / v
    cavity[-2], cavity[-1] = alpha - 1.0, -beta
    m_new, v_new, alpha_new, beta_new, _ = tilted_moments(x, y, m, v, shapes, alpha, beta)
    site = site_from_tilted(cavity, m_new, v_new, alpha_new, beta_new)
    # An overflow on an extreme datapoint must not stop the (private) loop:
    # such coordinates get no update, like rejected ones.
    return np.where(np.isfinite(site), site, 0.0)
