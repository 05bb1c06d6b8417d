"""Variational autoencoder of one mixture component (Acs et al., Section II-B).

One hidden layer of ReLU units in the encoder and in the decoder, a Gaussian
recognition model ``q(z|x) = N(mu(x), diag(exp(logvar(x))))``, a standard
normal prior, and a Bernoulli or Gaussian likelihood ``p(x|z)`` whose mean is
``sigmoid(decoder(z))`` (records live in ``[0, 1]^m``).  The per-record loss
is the negative ELBO (Kingma & Welling 2014)

``-ELBO(x) = -E_q[log p(x|z)] + KL(q(z|x) || N(0, I))``

with one reparametrised sample ``z = mu + exp(logvar / 2) * eps``.  This
module imports torch; :mod:`skdp.generative` imports it only inside ``fit``.
"""

from __future__ import annotations

import math

import torch

#: Standard deviation of the Gaussian likelihood's pixels (fixed, public).
GAUSSIAN_STD = 0.1

# exp(logvar) must not overflow in float32 before the first steps settle it.
_LOGVAR_RANGE = (-12.0, 8.0)


class VAE(torch.nn.Module):
    """Encoder ``x -> (mu, logvar)`` and decoder ``z -> logits`` with one hidden layer each.

    Parameters
    ----------
    n_features : int
    hidden_units : int
    latent_dim : int
    likelihood : {"bernoulli", "gaussian"}
    generator : torch.Generator or None, default=None
        Draws the initial weights (torch's default ``Linear`` initialisation)
        from this generator instead of torch's global one, which a fit must
        neither seed nor read; ``None`` keeps the global one.
    """

    def __init__(self, n_features, hidden_units, latent_dim, likelihood, generator=None):
        super().__init__()
        self.encoder = torch.nn.Linear(n_features, hidden_units)
        self.mu = torch.nn.Linear(hidden_units, latent_dim)
        self.logvar = torch.nn.Linear(hidden_units, latent_dim)
        self.decoder = torch.nn.Linear(latent_dim, hidden_units)
        self.output = torch.nn.Linear(hidden_units, n_features)
        self.latent_dim = int(latent_dim)
        self.likelihood = likelihood
        if generator is not None:
            self._reset_parameters(generator)

    @torch.no_grad()
    def _reset_parameters(self, generator):
        # The same distributions as torch.nn.Linear.reset_parameters, drawn
        # from ``generator``.
        for layer in (self.encoder, self.mu, self.logvar, self.decoder, self.output):
            torch.nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
            bound = 1.0 / math.sqrt(layer.in_features)
            torch.nn.init.uniform_(layer.bias, -bound, bound, generator=generator)

    def encode(self, x):
        h = torch.relu(self.encoder(x))
        return self.mu(h), self.logvar(h).clamp(*_LOGVAR_RANGE)

    def decode(self, z):
        """Logits of the pixel means, ``sigmoid`` of which is ``E[x | z]``."""
        return self.output(torch.relu(self.decoder(z)))


def log_likelihood(logits, x, likelihood):
    """``log p(x | z)`` summed over features, per record."""
    if likelihood == "bernoulli":
        return -torch.nn.functional.binary_cross_entropy_with_logits(logits, x, reduction="none").sum(-1)
    mean = torch.sigmoid(logits)
    const = x.shape[-1] * math.log(math.sqrt(2 * math.pi) * GAUSSIAN_STD)
    return -0.5 * ((x - mean) / GAUSSIAN_STD).pow(2).sum(-1) - const


def elbo(module, x, noise=None):
    """Per-record ELBO with one reparametrised sample (``noise`` = eps, drawn if None)."""
    mu, logvar = module.encode(x)
    if noise is None:
        noise = torch.randn_like(mu)
    z = mu + torch.exp(0.5 * logvar) * noise
    kl = 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(-1)
    return log_likelihood(module.decode(z), x, module.likelihood) - kl


def vae_loss(module, x, noise=None):
    """Negative ELBO of a batch (the DP-SGD engine calls it on one record at a time).

    ``noise``: the reparametrisation draws, one row per record (see
    :func:`vae_batch_loss`); drawn from torch's global generator if None.
    """
    return -elbo(module, x, noise).mean()


def vae_sample(module, n_samples, generator):
    """Draw records: ``z ~ N(0, I)``, then ``x ~ p(x | z)`` (Gaussian draws clipped to [0, 1])."""
    z = torch.randn(n_samples, module.latent_dim, generator=generator)
    mean = torch.sigmoid(module.decode(z))
    if module.likelihood == "bernoulli":
        return torch.bernoulli(mean, generator=generator)
    noisy = mean + GAUSSIAN_STD * torch.randn(mean.shape, generator=generator)
    return noisy.clamp(0.0, 1.0)


def vae_batch_loss(module, x, noise=None):
    """Per-record negative ELBO of a whole batch, shape ``(B,)``.

    Lets the DP-SGD engine clip by ghost norms (one backward pass, no
    per-example gradient tensor): the VAE is made of Linear layers only.
    ``noise`` holds the reparametrisation draws, row ``i`` for record ``i``:
    passed with the batch, it makes each record's loss a deterministic
    function of that record and its own noise row (ghost clipping's
    per-example contract, checked by its probe), and training reads no
    global random state.  Drawn from torch's global generator if None.
    """
    return -elbo(module, x, noise)
