"""Binary restricted Boltzmann machine trained by persistent contrastive divergence.

Acs et al., Section II-A: energy ``E(v, h) = -v'Wh - b'v - c'h`` (Eq. 1), free
energy ``F(v) = -b'v - sum_i softplus(c_i + (v'W)_i)`` so that
``p(v) = exp(-F(v)) / Z``.  The log-likelihood gradient of a record is
``-grad F(v) + E_model[grad F(v~)]``; persistent contrastive divergence
(Tieleman 2008) estimates the model expectation with persistent Gibbs chains
``v~_1..v~_M`` that are advanced by one Gibbs sweep after every update.

Per-record "loss" for DP-SGD.  The CD gradient of record ``v`` is the
gradient of ``F(v) - mean_j F(v~_j)`` with the chains held fixed, so the
engine's per-example gradient machinery computes it unchanged and clips it
like any other gradient.  The chains are a function of the released
parameters and of data-independent randomness only (they never see a
record), so each clipped per-record CD gradient depends on that record alone
and the sensitivity argument of DP-SGD holds as is.  This module imports torch.
"""

from __future__ import annotations

import torch

#: Gibbs sweeps used to draw fresh samples from a trained RBM.
SAMPLE_SWEEPS = 500


class RBM(torch.nn.Module):
    """Bernoulli-Bernoulli RBM with ``n_chains`` persistent fantasy particles.

    Initialisation follows Section IV: ``W ~ N(0, 0.01^2)``, zero biases.

    Parameters
    ----------
    n_features : int
    hidden_units : int
    n_chains : int
    generator : torch.Generator
        Seeds the weights and the chains.
    """

    def __init__(self, n_features, hidden_units, n_chains, generator):
        super().__init__()
        self.W = torch.nn.Parameter(0.01 * torch.randn(n_features, hidden_units, generator=generator))
        self.b = torch.nn.Parameter(torch.zeros(n_features))
        self.c = torch.nn.Parameter(torch.zeros(hidden_units))
        self.register_buffer(
            "chains", torch.bernoulli(torch.full((n_chains, n_features), 0.5), generator=generator)
        )

    def free_energy(self, v):
        return -(v @ self.b) - torch.nn.functional.softplus(v @ self.W + self.c).sum(-1)

    @torch.no_grad()
    def gibbs(self, v, generator, sweeps=1):
        """``sweeps`` alternating updates ``h ~ p(h|v)``, ``v ~ p(v|h)``."""
        for _ in range(sweeps):
            h = torch.bernoulli(torch.sigmoid(v @ self.W + self.c), generator=generator)
            v = torch.bernoulli(torch.sigmoid(h @ self.W.T + self.b), generator=generator)
        return v

    @torch.no_grad()
    def advance_chains(self, generator):
        """One persistent-CD sweep of the fantasy particles (after each update)."""
        self.chains.copy_(self.gibbs(self.chains, generator))


def rbm_loss(module, v):
    """``F(v) - mean_j F(chain_j)``: its gradient is the negative CD log-likelihood gradient."""
    return module.free_energy(v).mean() - module.free_energy(module.chains).mean()


def rbm_sample(module, n_samples, generator):
    """Fresh samples: chains started from ``Bernoulli(sigmoid(b))``, ``SAMPLE_SWEEPS`` sweeps."""
    start = torch.sigmoid(module.b.detach()).expand(n_samples, -1)
    return module.gibbs(torch.bernoulli(start, generator=generator), generator, SAMPLE_SWEEPS)


def rbm_score(module, v):
    """Negative free energy ``-F(v) = log p(v) + log Z`` (unnormalised log-probability)."""
    with torch.no_grad():
        return -module.free_energy(v)
