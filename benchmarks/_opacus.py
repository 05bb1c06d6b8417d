"""Opacus, a benchmark-only peer: one DP-SGD set-up shared by the dpsgd benchmarks."""

import warnings

import torch


def make_private(model, X, y, lr, batch_size, noise_multiplier, max_grad_norm, grad_sample_mode="hooks"):
    """SGD on ``model`` made private by Opacus with Poisson sampling; returns (model, optimiser, loader)."""
    from opacus import PrivacyEngine

    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.as_tensor(X), torch.as_tensor(y)), batch_size=batch_size
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = PrivacyEngine(accountant="rdp")
        return engine.make_private(
            module=model,
            optimizer=opt,
            data_loader=loader,
            noise_multiplier=noise_multiplier,
            max_grad_norm=max_grad_norm,
            poisson_sampling=True,
            grad_sample_mode=grad_sample_mode,
        )
