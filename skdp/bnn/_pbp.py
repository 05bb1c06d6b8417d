"""Probabilistic backpropagation (Hernandez-Lobato & Adams 2015): pure NumPy.

The network has factorised Gaussian weights ``w ~ N(m, v)`` and a Gamma
posterior ``Gamma(alpha, beta)`` over the precision of the Gaussian output
noise.  Layer ``l`` maps its input ``z`` (with a constant 1 appended for the
bias) to ``a = W z / sqrt(n_in + 1)``; hidden layers apply a ReLU, the output
layer is linear with one unit.

Forward pass (PBP, Section 3.2): the moments of ``a`` follow from those of
``z`` and of the weights (independent): ``E[a] = M E[z] / sqrt(n_in + 1)`` and
``Var[a] = (V (E[z]^2 + Var[z]) + M^2 Var[z]) / (n_in + 1)``; the output of a
ReLU of a Gaussian ``a ~ N(m, v)`` is replaced by a Gaussian with its exact
moments (:func:`relu_moments`).

The moment matching of one datapoint (PBP, Eq. 5-6 and Minka 2001) uses
``log Z = log N(y | m_L, v_L + beta / (alpha - 1))`` and its gradients with
respect to the weight means and variances:

    m_new = m + v d log Z / dm
    v_new = v - v^2 ((d log Z / dm)^2 - 2 d log Z / dv)

and the Gamma update from ``Z`` at ``alpha``, ``alpha + 1`` and ``alpha + 2``
(PBP, Eq. 7-8), i.e. matching the first two moments of the noise precision
under the tilted distribution.

Weights are kept as one flat vector; :func:`layer_shapes` gives the layout
(layer by layer, each an ``(n_out, n_in + 1)`` matrix in C order whose last
column is the bias).
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np
from scipy.special import ndtr

_LOG_2PI = math.log(2 * math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2 * math.pi)
#: Floor of a propagated variance: a unit whose inputs are all deterministic
#: has zero variance, which the ReLU formulas divide by.
_MIN_VARIANCE = 1e-12


def layer_shapes(n_features, hidden_layer_sizes):
    """Shapes ``(n_out, n_in + 1)`` of the weight matrices, input to output."""
    sizes = [int(n_features), *map(int, hidden_layer_sizes), 1]
    return [(n_out, n_in + 1) for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=True)]


def split_layers(flat, shapes):
    """Views of a flat weight vector as the layer matrices."""
    out, start = [], 0
    for shape in shapes:
        size = shape[0] * shape[1]
        out.append(flat[start : start + size].reshape(shape))
        start += size
    return out


def relu_moments(m, v):
    """Mean and variance of ``max(0, a)`` for ``a ~ N(m, v)`` (elementwise).

    With ``alpha = m / sqrt(v)``: ``E = m Phi(alpha) + sqrt(v) phi(alpha)`` and
    ``E[max(0, a)^2] = (m^2 + v) Phi(alpha) + m sqrt(v) phi(alpha)`` (PBP,
    Eq. 13-14; the moments of a rectified Gaussian).
    """
    m = np.asarray(m, dtype=float)
    v = np.maximum(np.asarray(v, dtype=float), _MIN_VARIANCE)
    s = np.sqrt(v)
    alpha = m / s
    cdf = ndtr(alpha)
    pdf = _INV_SQRT_2PI * np.exp(-0.5 * alpha * alpha)
    mean = m * cdf + s * pdf
    var = np.maximum((m * m + v) * cdf + m * s * pdf - mean * mean, _MIN_VARIANCE)
    return mean, var


def forward_moments(X, means, variances):
    """Predictive mean and variance of the network output (before noise).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    means, variances : list of ndarray
        Per-layer weight means and variances, shapes from :func:`layer_shapes`.

    Returns
    -------
    mean, var : ndarray of shape (n_samples,)
    """
    zm = np.asarray(X, dtype=float)
    zv = np.zeros_like(zm)
    n = zm.shape[0]
    for layer, (M, V) in enumerate(zip(means, variances, strict=True)):
        scale2 = 1.0 / M.shape[1]
        zm_a = np.hstack([zm, np.ones((n, 1))])
        zv_a = np.hstack([zv, np.zeros((n, 1))])
        am = (zm_a @ M.T) * math.sqrt(scale2)
        av = ((zm_a * zm_a + zv_a) @ V.T + zv_a @ (M * M).T) * scale2
        if layer == len(means) - 1:
            return am[:, 0], av[:, 0]
        zm, zv = relu_moments(am, av)
    raise ValueError("The network needs at least one layer.")


def gaussian_log_z(y, mean, var):
    """``log N(y | mean, var)``."""
    r = y - mean
    return -0.5 * (_LOG_2PI + np.log(var) + r * r / var)


class LayerFactors(NamedTuple):
    """The factors of one layer's per-datapoint gradients (outer products over the batch).

    For datapoint ``b``, output unit ``o`` and input ``i`` (the last input is
    the bias's constant 1):

        d log Z / d m[b, o, i] = g_m[b, o] z_m[b, i]
                                 (+ (g_v_raw[b, o] z_v[b, i]) mixed[o, i]),
        d log Z / d v[b, o, i] = g_v[b, o] z_sq[b, i],

    the mixed term only where the inputs are random (``z_v`` not None, every
    layer but the first); ``g_v`` is ``s^2 d log Z / d Var[a]`` (or, in the
    first layer with ``half_curvature``, ``s^2 (g_av - g_am^2 / 2)``, whose
    outer product with ``z_sq = x^2`` is ``h`` directly).
    """

    g_m: np.ndarray
    z_m: np.ndarray
    g_v: np.ndarray
    z_sq: np.ndarray
    z_v: np.ndarray | None
    g_v_raw: np.ndarray | None
    mixed: np.ndarray | None


def log_z_factors(X, y, means, variances, alpha, beta, half_curvature=False):
    """``log Z`` of a batch of datapoints and the factors of its per-datapoint gradients.

    The forward and backward passes of PBP (Eq. 5-8) vectorised over the
    batch: every datapoint is matched against the same cavity (the weights
    and the noise Gamma).  The gradients with respect to a layer's weight
    moments are outer products of per-unit and per-input vectors
    (:class:`LayerFactors`); :func:`log_z_gradients_batch` forms them as
    flat arrays, :func:`~skdp.bnn._sep.sep_sites` forms them straight into
    the sites, in the memory order fastest for each layer.

    Parameters
    ----------
    X : ndarray of shape (batch, n_features)
    y : ndarray of shape (batch,)
    means, variances : list of ndarray
        Per-layer cavity weight means and variances (all variances > 0).
    alpha, beta : float
        Cavity Gamma over the noise precision (``alpha > 1``, ``beta > 0``).
    half_curvature : bool, default=False
        See :func:`log_z_gradients_batch` (only the first layer's ``g_v``
        changes; deeper layers form ``h`` from the gradients).

    Returns
    -------
    factors : list of LayerFactors
        Input layer first.
    alpha_new, beta_new : ndarray of shape (batch,)
        Gamma matching the tilted noise precision (``nan`` when undefined).
    log_z : ndarray of shape (batch,)
        ``log Z = log N(y | m_L, v_L + beta / (alpha - 1))``.
    """
    # Every expression below is evaluated in the order written in the
    # comments (the same operations, operand by operand, rounded the same),
    # into arrays of this call instead of a new temporary per operation.
    zm = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n = zm.shape[0]
    n_layers = len(means)
    cache = []
    zv = None
    for layer, (M, V) in enumerate(zip(means, variances, strict=True)):
        n_in = M.shape[1]
        scale = 1.0 / math.sqrt(n_in)
        zm_a = np.empty((n, n_in))
        zm_a[:, :-1] = zm
        zm_a[:, -1] = 1.0
        if zv is None:  # inputs are deterministic
            zv_a = None
            zsq = zm_a * zm_a
            av = zsq @ V.T
            av *= scale * scale
        else:
            zv_a = np.empty((n, n_in))
            zv_a[:, :-1] = zv
            zv_a[:, -1] = 0.0
            # zsq = zm_a^2 + zv_a; av = (zsq V^T + zv_a (M^2)^T) scale^2
            zsq = zm_a * zm_a
            zsq += zv_a
            av = zsq @ V.T
            av += zv_a @ (M * M).T
            av *= scale * scale
        am = zm_a @ M.T
        am *= scale
        relu = None
        if layer < n_layers - 1:
            # The moments of a rectified Gaussian (relu_moments):
            # s = sqrt(max(av, floor)), ratio = am / s, cdf = Phi(ratio),
            # pdf = c exp((-0.5 ratio) ratio), zm = am cdf + s pdf,
            # zv = max((am^2 + av) cdf + (am s) pdf - zm^2, floor).
            np.maximum(av, _MIN_VARIANCE, out=av)
            s = np.sqrt(av)
            ratio = am / s
            cdf = ndtr(ratio)
            pdf = np.multiply(ratio, -0.5)
            pdf *= ratio
            np.exp(pdf, out=pdf)
            pdf *= _INV_SQRT_2PI
            zm = am * cdf
            tmp = s * pdf
            zm += tmp
            zv = np.multiply(am, am)
            zv += av
            zv *= cdf
            np.multiply(am, s, out=tmp)
            tmp *= pdf
            zv += tmp
            np.multiply(zm, zm, out=tmp)
            zv -= tmp
            np.maximum(zv, _MIN_VARIANCE, out=zv)
            relu = (cdf, pdf, s, zm)
        cache.append((zm_a, zv_a, zsq, scale, relu))

    m_out, v_out = am[:, 0], av[:, 0]
    resid = y - m_out
    resid2 = resid * resid
    # log N(y | m_L, v_L + beta / a) at a = alpha - 1 (Z), alpha and alpha + 1
    # (the Gamma update below), as one (3, batch) array: the same
    # operations on each entry, a third of the calls.
    spreads = v_out + np.array([beta / (alpha - 1.0), beta / alpha, beta / (alpha + 1.0)])[:, None]
    # log_zs = -0.5 (log 2 pi + log spreads + resid2 / spreads)
    log_zs = np.log(spreads)
    log_zs += _LOG_2PI
    log_zs += resid2 / spreads
    log_zs *= -0.5
    s0, log_z = spreads[0], log_zs[0]
    g_am = (resid / s0)[:, None]
    # g_av = 0.5 (resid2 / s0^2 - 1 / s0)
    g_av = resid2 / (s0 * s0)
    g_av -= 1.0 / s0
    g_av *= 0.5
    g_av = g_av[:, None]

    factors = [None] * n_layers
    for layer in range(n_layers - 1, -1, -1):
        M, V = means[layer], variances[layer]
        zm_a, zv_a, zsq, scale, _ = cache[layer]
        scale2 = scale * scale
        if zv_a is None:
            if half_curvature:
                # g_v = (g_av - (0.5 g_am) g_am) scale2
                g_v = np.multiply(g_am, 0.5)
                g_v *= g_am
                np.subtract(g_av, g_v, out=g_v)
                g_v *= scale2
            else:
                g_v = g_av * scale2
            factors[layer] = LayerFactors(g_am * scale, zm_a, g_v, zsq, None, None, None)
        else:
            factors[layer] = LayerFactors(
                g_am * scale, zm_a, g_av * scale2, zsq, zv_a, g_av, (2.0 * scale2) * M
            )
        if layer == 0:
            break
        # Only the layer's inputs that are units of the layer below (not
        # the bias) pass the gradient on: every product is taken on them.
        M, V = M[:, :-1], V[:, :-1]
        # The layer's inputs other than the bias are the units below
        # (zm_a[:, :-1] holds a copy of them): their contiguous array.
        cdf, pdf, s, zm_out = cache[layer - 1][4]
        if M.shape[0] == 1:
            # One unit (the output layer): each product below has a single
            # term, so broadcasting gives the matrix products' numbers
            # without their BLAS calls.
            back_v, back_m, back_mm = g_av * V, g_am * M, g_av * (M * M)
        else:
            back_v, back_m, back_mm = g_av @ V, g_am @ M, g_av @ (M * M)
        # g_zm = scale back_m + ((2 scale2) back_v) zm_out
        g_zm = np.multiply(back_m, scale, out=back_m)
        tmp = np.multiply(back_v, 2.0 * scale2)
        tmp *= zm_out
        g_zm += tmp
        # g_zv = scale2 (back_v + back_mm)
        g_zv = np.add(back_v, back_mm, out=back_mm)
        g_zv *= scale2
        # d mean/d m = Phi, d mean/d v = phi / (2 s); d E[z^2]/d m = 2 mean and
        # d E[z^2]/d v = Phi, whence the variance derivatives below:
        # g_am = g_zm cdf + ((g_zv 2) zm_out) (1 - cdf),
        # g_av = (g_zm pdf) / (2 s) + g_zv (cdf - (zm_out pdf) / s).
        g_am = g_zm * cdf
        np.multiply(g_zv, 2.0, out=tmp)
        tmp *= zm_out
        tmp *= 1.0 - cdf
        g_am += tmp
        g_av = g_zm * pdf
        g_av /= 2.0 * s
        np.multiply(zm_out, pdf, out=tmp)
        tmp /= s
        np.subtract(cdf, tmp, out=tmp)
        tmp *= g_zv
        g_av += tmp

    # Noise precision tau: E[tau] = alpha/beta Z(alpha+1)/Z(alpha) and
    # E[tau^2] = alpha (alpha+1)/beta^2 Z(alpha+2)/Z(alpha) (PBP, Eq. 7-8).
    ratios = log_zs[1:] - log_z
    np.exp(ratios, out=ratios)
    e1 = ratios[0] * alpha
    e1 /= beta
    e2 = ratios[1] * alpha
    e2 *= alpha + 1.0
    e2 /= beta * beta
    var_tau = e1 * e1
    np.subtract(e2, var_tau, out=var_tau)
    ok = np.isfinite(var_tau)
    ok &= var_tau > 0
    # alpha_new = e1^2 / var_tau, beta_new = e1 / var_tau (nan where undefined).
    alpha_new = e1 * e1
    if ok.all():
        alpha_new /= var_tau
        beta_new = e1 / var_tau
    else:
        safe = np.where(ok, var_tau, 1.0)
        alpha_new /= safe
        beta_new = e1 / safe
        bad = ~ok
        alpha_new[bad] = np.nan
        beta_new[bad] = np.nan
    return factors, alpha_new, beta_new, log_z


def log_z_gradients_batch(X, y, means, variances, alpha, beta, out=None, half_curvature=False):
    """``log Z`` of a batch of datapoints and its per-datapoint gradients.

    Every datapoint is matched against the same cavity (the weights and the
    noise Gamma), so the forward and backward passes are vectorised over the
    batch (PBP, Eq. 5-8; :func:`log_z_factors`), and the gradients formed
    from their factors as flat arrays.

    Parameters
    ----------
    X : ndarray of shape (batch, n_features)
    y : ndarray of shape (batch,)
    means, variances : list of ndarray
        Per-layer cavity weight means and variances (all variances > 0).
    alpha, beta : float
        Cavity Gamma over the noise precision (``alpha > 1``, ``beta > 0``).
    out : pair of ndarray of shape (batch, n_weights), optional
        Arrays (views allowed) the flat gradients are written into, layer
        by layer, instead of new arrays.
    half_curvature : bool, default=False
        Return ``h = d log Z / d v - (d log Z / d m)^2 / 2`` in place of
        ``d log Z / d v`` (PBP's variance update is ``v_new = v (1 + 2 v h)``,
        Eq. 6).  In a layer with deterministic inputs ``x`` (the first) both
        gradients are outer products ``s g_a x`` and ``s^2 g_v x^2``, so
        ``h = s^2 (g_v - g_a^2 / 2) x^2`` is one outer product too, written
        without forming the squares of the full gradient.

    Returns
    -------
    grad_m, grad_v : ndarray of shape (batch, n_weights)
        ``d log Z / d m`` and ``d log Z / d v`` (or ``h``) of every
        datapoint, flat (``out`` when given).
    alpha_new, beta_new : ndarray of shape (batch,)
        Gamma matching the tilted noise precision (``nan`` when undefined).
    log_z : ndarray of shape (batch,)
        ``log Z = log N(y | m_L, v_L + beta / (alpha - 1))``.
    """
    factors, alpha_new, beta_new, log_z = log_z_factors(
        X, y, means, variances, alpha, beta, half_curvature=half_curvature
    )
    n = factors[0].z_m.shape[0]
    n_weights = sum(M.size for M in means)
    if out is None:
        out = (np.empty((n, n_weights)), np.empty((n, n_weights)))
    grad_m, grad_v = out
    ends = [0, *itertools.accumulate(M.size for M in means)]
    for layer, f in enumerate(factors):
        n_out, n_in = means[layer].shape
        # The layer's block of the flat gradients, as (batch, n_out, n_in) views.
        gm = grad_m[:, ends[layer] : ends[layer + 1]].reshape(n, n_out, n_in)
        gv = grad_v[:, ends[layer] : ends[layer + 1]].reshape(n, n_out, n_in)
        # Outer products per datapoint (einsum writes them about twice as
        # fast as a broadcast multiply; the products are the same).
        np.einsum("bo,bi->boi", f.g_m, f.z_m, out=gm)
        if f.z_v is not None:
            mixed = np.einsum("bo,bi->boi", f.g_v_raw, f.z_v)
            mixed *= f.mixed[None]
            gm += mixed
        np.einsum("bo,bi->boi", f.g_v, f.z_sq, out=gv)
        if half_curvature and f.z_v is not None:
            gv -= 0.5 * gm * gm
    return grad_m, grad_v, alpha_new, beta_new, log_z


def log_z_gradients(x, y, means, variances, alpha, beta):
    """``log Z`` of one datapoint and its gradients w.r.t. the weight moments.

    The single-datapoint form of :func:`log_z_gradients_batch`.

    Parameters
    ----------
    x : ndarray of shape (n_features,)
    y : float
    means, variances : list of ndarray
        Per-layer cavity weight means and variances (all variances > 0).
    alpha, beta : float
        Cavity Gamma over the noise precision (``alpha > 1``, ``beta > 0``).

    Returns
    -------
    grad_m, grad_v : ndarray of shape (n_weights,)
        ``d log Z / d m`` and ``d log Z / d v``, flat.
    alpha_new, beta_new : float
        Gamma matching the tilted noise precision (``nan`` when undefined).
    log_z : float
        ``log Z = log N(y | m_L, v_L + beta / (alpha - 1))``.
    """
    gm, gv, a, b, lz = log_z_gradients_batch(
        np.asarray(x, dtype=float)[None], np.array([float(y)]), means, variances, alpha, beta
    )
    return gm[0], gv[0], float(a[0]), float(b[0]), float(lz[0])


def tilted_moments_batch(X, y, m, v, shapes, alpha, beta):
    """PBP moment matching of a batch of datapoints against one cavity.

    ``m, v`` are the flat cavity weight moments.  Returns the moments
    ``(m_new, v_new)`` of shape (batch, n_weights) of every projected tilted
    distribution (PBP Eq. 5-6; entries of ``v_new`` may be non-positive,
    which the caller rejects as PBP does), the matched Gammas and ``log Z``.
    """
    gm, gv, alpha_new, beta_new, log_z = log_z_gradients_batch(
        X, y, split_layers(m, shapes), split_layers(v, shapes), alpha, beta
    )
    return m + v * gm, v - v * v * (gm * gm - 2.0 * gv), alpha_new, beta_new, log_z


def tilted_moments(x, y, m, v, shapes, alpha, beta):
    """PBP moment matching of one datapoint against a cavity distribution.

    ``m, v`` are the flat cavity weight moments.  Returns the flat moments
    ``(m_new, v_new)`` of the projected tilted distribution (PBP Eq. 5-6;
    entries of ``v_new`` may be non-positive, which the caller rejects as
    PBP does), the matched Gamma ``(alpha_new, beta_new)`` and ``log Z``.
    """
    gm, gv, alpha_new, beta_new, log_z = log_z_gradients(
        x, y, split_layers(m, shapes), split_layers(v, shapes), alpha, beta
    )
    return m + v * gm, v - v * v * (gm * gm - 2.0 * gv), alpha_new, beta_new, log_z
