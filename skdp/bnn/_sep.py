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
* damped update ``theta_f <- (1 - gamma B/N) theta_f + (gamma/N) sum_n theta_fn``
  over a batch of ``B`` datapoints (SEP's ``f <- f^(1 - gamma/N) f_n^(gamma/N)``,
  Algorithm 2 line 5, for ``B = 1``).

Sites may be improper (negative precision); only the cavity and the
posterior must be proper, which :func:`from_natural` enforces by a projection
(post-processing of the released sites).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..privacy.clipping import clip_factors, clip_vector, row_norms
from ..privacy.clipping import clip_rows as _clip_rows
from ._pbp import log_z_factors, split_layers


def to_natural(m, v, alpha, beta):
    """Natural parameters of ``prod_j N(m_j, v_j) x Gamma(alpha, beta)``."""
    m = np.asarray(m, dtype=float)
    v = np.asarray(v, dtype=float)
    return np.concatenate([m / v, -0.5 / v, [alpha - 1.0, -beta]])


def from_natural(
    theta,
    min_precision,
    min_alpha,
    noise_variance_bounds=(0.0, np.inf),
    max_abs_mean=np.inf,
    mean_precision=0.0,
    prior_mean=0.0,
    *,
    out=None,
):
    """Moments ``(m, v, alpha, beta)`` of a natural-parameter vector, made proper.

    Precisions ``lambda = -2 theta_2`` below ``min_precision`` are raised to
    it (keeping ``m / v``); the means are

        m = prior_mean + (theta_1 - lambda prior_mean) / max(lambda, mean_precision),

    i.e. ``theta_1 / lambda`` whenever ``lambda >= mean_precision``, and
    shrunk towards ``prior_mean`` when the precision is too small to be told
    apart from the privacy noise (with noise of standard deviation ``s`` on
    ``theta_1``, the shrunk mean moves by about ``s / mean_precision`` instead
    of ``s / lambda``); then clipped to ``[-max_abs_mean, max_abs_mean]``.
    ``alpha`` is floored and ``beta`` clipped so that the expected noise
    variance ``beta / (alpha - 1)`` lies in ``noise_variance_bounds``.  A
    fixed map of the (noisy) natural parameters onto proper, bounded
    distributions, so post-processing.

    ``out``: four arrays of length ``P`` (``m``, ``v`` and two of scratch)
    to write into instead of new ones (the SEP loop's cavity at every step).
    """
    theta = np.asarray(theta, dtype=float)
    n_weights = (theta.size - 2) // 2
    m, v, precision, denominator = (np.empty(n_weights) for _ in range(4)) if out is None else out
    np.multiply(theta[n_weights : 2 * n_weights], -2.0, out=precision)
    np.maximum(precision, min_precision, out=precision)
    np.divide(1.0, precision, out=v)
    # theta_1 / lambda, except that a precision below mean_precision (one the
    # released noise could have produced) shrinks m towards the prior mean.
    np.maximum(precision, mean_precision, out=denominator)
    # m = prior_mean + (theta_1 - precision prior_mean) / denominator
    np.multiply(precision, prior_mean, out=m)
    np.subtract(theta[:n_weights], m, out=m)
    m /= denominator
    m += prior_mean
    # np.clip's numbers, without its wrapper's cost (this runs once per SEP step).
    np.minimum(np.maximum(m, -max_abs_mean, out=m), max_abs_mean, out=m)
    alpha = max(float(theta[-2]) + 1.0, min_alpha)
    lo, hi = noise_variance_bounds
    beta = min(max(-float(theta[-1]), lo * (alpha - 1.0)), hi * (alpha - 1.0))
    return m, v, alpha, beta


def release_scaling(n_params, rate_scale):
    """Diagonal ``D`` of the space in which sites are clipped and factors released.

    Ones, except ``rate_scale`` on the last coordinate (``-beta`` of the noise
    Gamma).  DP-SEP clips ``D theta_fn`` and releases ``D theta_f``; ``D`` is
    public and fixed, so the sensitivity argument (Proposition 1) holds in
    that space and ``theta_f = D^-1 (released)`` is post-processing.
    """
    scale = np.ones(n_params)
    scale[-1] = rate_scale
    return scale


def stationary_noise(noise_scale, rate):
    """Standard deviation of the noise accumulated in the factor, per coordinate.

    The factor is an exponential moving average ``u <- (1 - rate) u + ... + e``
    with independent ``e ~ N(0, noise_scale^2)`` per step; its stationary
    noise variance is ``noise_scale^2 / (rate (2 - rate))``.
    """
    return noise_scale / math.sqrt(rate * (2.0 - rate))


def clip_l2(theta, clip_norm):
    """Scale ``theta`` down to L2 norm at most ``clip_norm`` (DP-SEP's clipping).

    The core's clipping rule on one vector (:func:`skdp.privacy.clipping.clip_vector`).
    """
    return clip_vector(theta, clip_norm)


def site_from_tilted(theta_cavity, m_new, v_new, alpha_new, beta_new):
    """Sites ``proj[tilted] / cavity`` in natural parameters (Algorithm 3, line 6).

    ``m_new, v_new`` have shape (n_weights,) or (batch, n_weights) (one row
    per datapoint, all against the same cavity) and ``alpha_new, beta_new``
    are scalars or arrays of shape (batch,); the result has the matching
    shape (n_params,) or (batch, n_params).

    The moment-matching step of PBP can return a non-positive variance (or an
    undefined Gamma); PBP then skips the update, and so do we, coordinate by
    coordinate: the site of a rejected weight (or of the Gamma) is zero, i.e.
    ``f_n = 1`` there.  Each site stays a function of one datapoint and the
    public cavity, so the sensitivity argument is unchanged.
    """
    single = np.ndim(m_new) == 1
    m_new, v_new = np.atleast_2d(m_new), np.atleast_2d(v_new)
    alpha_new = np.atleast_1d(np.asarray(alpha_new, dtype=float))
    beta_new = np.atleast_1d(np.asarray(beta_new, dtype=float))
    n_weights = m_new.shape[1]
    site = np.empty((m_new.shape[0], theta_cavity.size))
    with np.errstate(all="ignore"):
        ok = (v_new > 0) & np.isfinite(v_new) & np.isfinite(m_new)
        inv_v = np.where(ok, 1.0 / np.where(ok, v_new, 1.0), 0.0)
        site[:, :n_weights] = np.where(ok, m_new * inv_v - theta_cavity[:n_weights], 0.0)
        site[:, n_weights : 2 * n_weights] = np.where(
            ok, -0.5 * inv_v - theta_cavity[n_weights : 2 * n_weights], 0.0
        )
        good = (alpha_new > 0) & (beta_new > 0) & np.isfinite(alpha_new) & np.isfinite(beta_new)
        site[:, -2] = np.where(good, alpha_new - 1.0 - theta_cavity[-2], 0.0)
        site[:, -1] = np.where(good, -beta_new - theta_cavity[-1], 0.0)
    return site[0] if single else site


def factor_sensitivity(clip_norm, damping, n_samples):
    """L2 sensitivity of the new factor's natural parameters (Proposition 1).

    The new factor is ``(1 - gamma B / N) theta_f + (gamma / N) sum_n theta_fn``
    over the batch.  The previous factor was released (it is the same for
    neighbouring datasets, given the past releases) and the batch's indices
    are drawn independently of the data, so under replace-one neighbours
    only the replaced record's clipped site changes, from ``theta_fn`` to
    ``theta_fn'``, both of norm at most ``C``:

        ||theta_f_new - theta_f_new'|| = (gamma / N) ||theta_fn - theta_fn'||
                                      <= 2 gamma C / N,

    whatever the batch size ``B`` (Proposition 1 is ``B = 1``).
    """
    return 2.0 * damping * clip_norm / n_samples


def cavity_moments(theta_f, theta_0, n_samples, floors):
    """Moments ``(m, v, alpha, beta)`` of the cavity ``q_-1 = p0 f^(N-1)`` (Eq. 3), made proper by :func:`from_natural`."""
    return from_natural(theta_0 + (n_samples - 1) * theta_f, *floors)


def project_cavity(theta_f, theta_0, n_samples, floors):
    """Cavity ``q_-1 = p0 f^(N-1)`` (Eq. 3), made proper by :func:`from_natural`.

    Returns its moments ``(m, v, alpha, beta)`` (:func:`cavity_moments`) and
    its natural parameters after the projection (``m / v`` is kept, so only
    the precisions and the Gamma may change).
    """
    m, v, alpha, beta = cavity_moments(theta_f, theta_0, n_samples, floors)
    cavity = np.empty(theta_f.shape)
    n_weights = m.size
    cavity[:n_weights] = m / v
    cavity[n_weights : 2 * n_weights] = -0.5 / v
    cavity[-2], cavity[-1] = alpha - 1.0, -beta
    return (m, v, alpha, beta), cavity


class _BatchViews(NamedTuple):
    """A :class:`SiteWorkspace`'s views for one batch size (see :meth:`SiteWorkspace.batch`)."""

    site: np.ndarray
    #: Per layer: the sites' two blocks and the three temporaries, in the layer's layout.
    layers: tuple
    gamma_m: np.ndarray
    gamma_v: np.ndarray


class SiteWorkspace:
    """Arrays :func:`sep_sites` writes into, kept from one SEP step to the next.

    A batch's site array is ``B x (2 P + 2)`` floats and each layer's three
    temporaries ``B x`` (its weights) (about 1 MB and 0.4 MB at ``P = 601``
    and ``B = 100``): fresh ones at every step cost page faults and cache
    misses that rival the arithmetic.  The workspace holds them for the
    largest batch seen so far (Poisson batches vary in size) and hands out
    views of the first rows; the views of each batch size are built once
    (a step's Python work is a good part of its time).  The cavity's
    moments live in held arrays too, so that their per-layer views (and
    the transposed copies of the first layer's) are built once.  Scratch
    memory only: every entry read is written first in the same step.
    """

    def __init__(self):
        self._scale = self._columns = None
        self._shapes = self._shapes_given = None
        self._rows = 0
        self._arrays = None
        self._views = {}

    def scaled_columns(self, scale):
        """Indices of the entries of ``scale`` other than 1, computed once per scale array."""
        if self._scale is not scale:
            self._scale, self._columns = scale, np.flatnonzero(scale != 1.0)
        return self._columns

    def _layout(self, shapes):
        """Hold the cavity's arrays and their per-layer views for ``shapes`` (once per layout)."""
        self._shapes_given = shapes
        shapes = tuple(tuple(s) for s in shapes)
        if shapes == self._shapes:
            return
        self._shapes, self._rows, self._arrays, self._views = shapes, 0, None, {}
        n_weights = sum(a * b for a, b in shapes)
        self.m, self.v, self.precision, self.denominator = (np.empty(n_weights) for _ in range(4))
        # Per layer: views of m and v, and the products 2 v and -2 m of
        # _layer_sites in the layer's layout (units innermost when there are
        # more units than inputs: C-ordered transposed copies).
        self.layer_moments = []
        for M, V in zip(split_layers(self.m, shapes), split_layers(self.v, shapes), strict=True):
            n_out, n_in = M.shape
            transposed = n_out > n_in
            layout = (n_in, n_out) if transposed else (n_out, n_in)
            self.layer_moments.append((M, V, np.empty(layout), np.empty(layout), transposed))
        self.means = [moments[0] for moments in self.layer_moments]
        self.variances = [moments[1] for moments in self.layer_moments]

    def batch(self, n_rows, n_params):
        """The site array and every layer's blocks and temporaries for a batch of ``n_rows``.

        Views of held arrays, built once per batch size; the arrays grow (an
        eighth beyond the largest batch seen) when a larger batch comes.
        The layers are those of the last :meth:`cavity`.
        """
        views = self._views.get(n_rows)
        if views is not None:
            return views
        if n_rows > self._rows:
            self._rows = max(n_rows + n_rows // 8, 8)
            self._arrays = (
                np.empty((self._rows, n_params)),
                [
                    tuple(np.empty((self._rows, *moments[2].shape)) for _ in range(3))
                    for moments in self.layer_moments
                ],
            )
            self._views = {}
        site_all, temporaries = self._arrays
        site = site_all[:n_rows]
        n_weights = self.m.size
        layers, start = [], 0
        for (M, _, _, _, transposed), held in zip(self.layer_moments, temporaries, strict=True):
            n_out, n_in = M.shape
            stop = start + M.size
            block_m = site[:, start:stop].reshape(n_rows, n_out, n_in)
            block_v = site[:, n_weights + start : n_weights + stop].reshape(n_rows, n_out, n_in)
            if transposed:
                block_m, block_v = block_m.transpose(0, 2, 1), block_v.transpose(0, 2, 1)
            layers.append((block_m, block_v, *(a[:n_rows] for a in held)))
            start = stop
        views = self._views[n_rows] = _BatchViews(site, tuple(layers), site[:, -2], site[:, -1])
        return views

    def cavity(self, theta_f, theta_0, n_samples, floors, shapes):
        """:func:`cavity_moments` into the held arrays, with each layer's ``2 v`` and ``-2 m``.

        Returns ``(alpha, beta)``; the weights' moments are ``self.m``,
        ``self.v``, their layers ``self.means``, ``self.variances`` and
        ``self.layer_moments``.
        """
        if shapes is not self._shapes_given:
            self._layout(shapes)
        _, _, alpha, beta = from_natural(
            theta_0 + (n_samples - 1) * theta_f,
            *floors,
            out=(self.m, self.v, self.precision, self.denominator),
        )
        for M, V, m2, v2, transposed in self.layer_moments:
            if transposed:
                M, V = M.T, V.T
            np.multiply(V, 2.0, out=v2)
            np.multiply(M, -2.0, out=m2)
        return alpha, beta


def _outer(u, w, out, transposed):
    """``out[b, o, i] = u[b, o] w[b, i]``, or ``out[b, i, o]`` when ``transposed``.

    One product per entry (the numbers do not depend on the layout); the
    layout puts the longer of the two axes last, where NumPy's inner loop runs.
    A layer of one unit (the output layer) is a row of products per
    datapoint: a broadcast product, without einsum's set-up.  einsum adds
    each product to the zeroed output (``u w + 0``, which turns a product
    of -0 into +0): so does that path, for the same bits.
    """
    if transposed:
        np.einsum("bo,bi->bio", u, w, out=out)
    elif u.shape[1] == 1:
        np.multiply(u[:, :, None], w[:, None, :], out=out)
        out += 0.0
    else:
        np.einsum("bo,bi->boi", u, w, out=out)


def _layer_sites(f, m2, v2, site_m, site_v, work, transposed):
    """One layer's block of the sites, written into ``site_m`` and ``site_v``.

    ``f`` is the layer's :class:`~skdp.bnn._pbp.LayerFactors` (with the
    half curvature ``h`` in the first layer), ``m2, v2`` the layer's
    cavity moments times -2 and 2, and ``site_m, site_v`` views of the
    layer's block of the sites, all in the layout of ``work``'s three
    ``(batch, *shape)`` temporaries (``(n_in, n_out)`` per datapoint when
    ``transposed``, else ``(n_out, n_in)``).  The operations of
    :func:`sep_sites`' formula, entry by entry the same products and sums as
    forming the flat gradients first.
    """
    H, R, G = work
    # h = d log Z / d v - (d log Z / d m)^2 / 2.
    _outer(f.g_v, f.z_sq, H, transposed)
    if f.z_v is not None:
        _outer(f.g_m, f.z_m, G, transposed)
        _outer(f.g_v_raw, f.z_v, R, transposed)  # the mixed term of d log Z / d m
        R *= np.ascontiguousarray(f.mixed.T) if transposed else f.mixed
        G += R
        np.multiply(G, 0.5, out=R)
        R *= G
        H -= R
    # r = 1 / (1 + 2 v h), a non-positive 1 + 2 v h (or NaN) rejected.
    np.multiply(H, v2, out=R)
    R += 1.0
    reject = None if R.min() > 0 else ~(R > 0)
    np.divide(1.0, R, out=R)
    # site_v = h r; site_m = (g_m - 2 m h) r.
    np.multiply(H, R, out=site_v)
    H *= m2
    if f.z_v is None:
        _outer(f.g_m, f.z_m, G, transposed)
    G += H
    np.multiply(G, R, out=site_m)
    if reject is not None:
        np.copyto(site_m, 0.0, where=reject)
        np.copyto(site_v, 0.0, where=reject)


def sep_sites(
    theta_f, theta_0, n_samples, X, y, shapes, floors, scale=None, with_norms=False, workspace=None
):
    """Sites of a batch of datapoints given the current factor (Algorithm 3, lines 4-6).

    Forms the cavity (Eq. 3), made proper by :func:`from_natural` with
    ``floors = (min_precision, min_alpha, noise_variance_bounds, max_abs_mean)``,
    runs PBP's moment matching of every row of ``X`` against it and returns
    ``theta(proj[tilted_n]) - theta_cavity``, one unclipped site per row,
    multiplied by ``scale`` (the release space's ``D``,
    :func:`release_scaling`) when given.

    The batch is one array computation.  With ``h = g_v - g_m^2 / 2``
    (``g_m, g_v`` the gradients with respect to the cavity means and
    variances) PBP's update is ``v_new = v (1 + 2 v h)`` and
    ``m_new = m + v g_m`` (Eq. 5-6), so the site's natural parameters
    reduce to

        m_new / v_new - m / v = (g_m - 2 m h) / (1 + 2 v h),
        -1 / (2 v_new) + 1 / (2 v) = h / (1 + 2 v h),

    the same numbers as :func:`tilted_moments_batch` followed by
    :func:`site_from_tilted`, without subtracting two precisions of order
    ``N`` (fewer passes over the batch, and no cancellation).  A weight
    whose ``1 + 2 v h`` is not positive (a non-positive ``v_new``) is
    rejected, as PBP does.  The gradients are outer products per layer
    (:func:`~skdp.bnn._pbp.log_z_factors`); each layer's are formed in
    temporaries laid out with the longer axis innermost (a first layer of
    50 units on 10 inputs runs its inner loops over the 50 units, not the
    11 inputs) and the last product is written into the site array.

    ``with_norms=True`` also returns the sites' L2 norms (after ``scale``),
    for :func:`clipped_sum`; they double as the check that every entry is
    finite.  With a :class:`SiteWorkspace` the sites are written into its
    arrays (valid until the next call with the same workspace).
    """
    if workspace is None:
        workspace = SiteWorkspace()
    # Only the projected cavity's Gamma entries are read below (the
    # weights' sites use the moments m, v directly): no project_cavity.
    alpha, beta = workspace.cavity(theta_f, theta_0, n_samples, floors, shapes)
    cavity_shape, cavity_rate = alpha - 1.0, -beta
    X = np.asarray(X, dtype=float)
    batch = workspace.batch(X.shape[0], np.size(theta_0))
    site = batch.site
    moments = workspace.layer_moments
    with np.errstate(all="ignore"):
        factors, alpha_new, beta_new, _ = log_z_factors(
            X, y, workspace.means, workspace.variances, alpha, beta, half_curvature=True
        )
        for f, (_, _, m2, v2, transposed), (block_m, block_v, *work) in zip(
            factors, moments, batch.layers, strict=True
        ):
            _layer_sites(f, m2, v2, block_m, block_v, work, transposed)
        # The Gamma's site: alpha_new - 1 - cavity's, -beta_new - cavity's,
        # zero where the matched Gamma is undefined (NaN) or improper.
        gamma_m, gamma_v = batch.gamma_m, batch.gamma_v
        np.subtract(alpha_new, 1.0, out=gamma_m)
        gamma_m -= cavity_shape
        np.negative(beta_new, out=gamma_v)
        gamma_v -= cavity_rate
        # All alpha_new, beta_new > 0 (a NaN makes the minimum NaN) and both
        # columns finite: nothing to zero.
        if site.shape[0] and not (
            alpha_new.min() > 0 and beta_new.min() > 0 and np.isfinite(site[:, -2:]).all()
        ):
            good = alpha_new > 0
            good &= beta_new > 0
            good &= np.isfinite(alpha_new)
            good &= np.isfinite(beta_new)
            bad = ~good
            gamma_m[bad] = 0.0
            gamma_v[bad] = 0.0
        if scale is not None:
            # Only the coordinates D rescales (x * 1 is x): DP-SEP's one
            # column, a column at a time.
            for col in workspace.scaled_columns(scale):
                site[:, col] *= scale[col]
    # An overflow on an extreme datapoint must not stop the (private) loop:
    # such coordinates get no update, like rejected ones.  (A row's norm is
    # finite when all its entries are, except when they overflow it: one
    # pass for both the check and the clipping's norms.)
    norms = row_norms(site)
    if not np.isfinite(norms).all():
        bad = ~np.isfinite(site)
        if bad.any():
            site[bad] = 0.0
            norms = row_norms(site)
    return (site, norms) if with_norms else site


def sep_site(theta_f, theta_0, n_samples, x, y, shapes, floors):
    """Site of one datapoint ``(x, y)``: the single-row form of :func:`sep_sites`."""
    return sep_sites(
        theta_f, theta_0, n_samples, np.asarray(x, dtype=float)[None], np.array([y]), shapes, floors
    )[0]


def clip_rows(sites, clip_norm):
    """Clip every row of ``sites`` to L2 norm at most ``clip_norm`` (Algorithm 3, line 6).

    The core's clipping rule (:func:`skdp.privacy.clipping.clip_rows`).
    """
    return _clip_rows(sites, clip_norm)


def clipped_sum(sites, clip_norm, norms=None):
    """``sum_n clip(theta_fn)``: the batch's sites clipped to L2 norm ``clip_norm`` and summed.

    The core's clipping rule (:func:`skdp.privacy.clipping.clip_factors` of
    :func:`~skdp.privacy.clipping.row_norms`: every row times
    ``C / max(||row||, C)``, a non-finite norm giving the zero row), the
    weighted sum taken as one matrix-vector product instead of a clipped
    copy of the batch followed by a sum: the same numbers up to the order
    of the floating-point additions.
    """
    factors = clip_factors(row_norms(sites) if norms is None else norms, clip_norm)
    if not (factors > 0).all():
        # inf * 0 is NaN: rows the rule zeroes are left out of the product.
        keep = factors > 0
        sites, factors = sites[keep], factors[keep]
    return factors @ sites
