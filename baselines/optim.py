"""Optimisers from a config: Adam with the config's rate, betas, eps and weight decay, and the step
learning-rate schedule (:meth:`factorbench.baselines.config.ModelConfig.lr_factor`) applied by the trainer."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

from .config import ModelConfig

__all__ = ["apply_lr_schedule", "discriminator_groups", "model_adam"]


def model_adam(params: Iterable[torch.nn.Parameter] | list[dict], config: ModelConfig) -> torch.optim.Adam:
    """Adam over ``params`` (parameters, or param groups with their own ``lr``) with ``lr``, ``adam_beta1``,
    ``adam_beta2``, ``adam_eps`` and ``weight_decay`` of ``config`` (PyTorch's L2 form: the decay is added
    to the gradient, as Almudevar & Ortega's ``Adam(weight_decay=4e-5)``); PyTorch's fused kernel where every
    parameter is on a CUDA device. Optimisers with settings of their own (the discriminators) are built by
    :func:`discriminator_groups`."""
    params = list(params)
    tensors = [p for g in params for p in (g["params"] if isinstance(g, dict) else [g])]
    fused = bool(tensors) and all(p.is_cuda for p in tensors)  # one kernel per step on the GPU
    return torch.optim.Adam(params, lr=config.lr, betas=(config.adam_beta1, config.adam_beta2), eps=config.adam_eps,
                            weight_decay=config.weight_decay, **({"fused": True} if fused else {}))


def apply_lr_schedule(optimizers: Mapping[str, torch.optim.Optimizer], config: ModelConfig, step: int) -> None:
    """Set every param group's rate to its initial rate times ``config.lr_factor(step)`` (the initial rate
    is kept in the group as ``initial_lr``, as PyTorch's schedulers do, and so travels in checkpoints).
    Nothing is touched when the config has no schedule, so unscheduled runs stay bit-identical."""
    if not config.lr_decay_every:
        return
    factor = config.lr_factor(step)
    for opt in optimizers.values():
        for group in opt.param_groups:
            group.setdefault("initial_lr", group["lr"])
            group["lr"] = group["initial_lr"] * factor


def discriminator_groups(model: torch.nn.Module,
                         config: ModelConfig) -> dict[str, tuple[list[torch.nn.Parameter], torch.optim.Optimizer]]:
    """Two optimiser groups for a model with an adversary (``model.discriminator``: FactorVAE, the AAE):
    ``model`` (every other parameter, :func:`model_adam`) and ``discriminator`` (Adam at the config's
    ``disc_lr`` with betas ``(disc_beta1, disc_beta2)``, no weight decay)."""
    disc = list(model.discriminator.parameters())
    ids = {id(p) for p in disc}
    rest = [p for p in model.parameters() if id(p) not in ids]
    return {
        "model": (rest, model_adam(rest, config)),
        "discriminator": (disc, torch.optim.Adam(disc, lr=getattr(config, "disc_lr"), eps=config.adam_eps,
                                                 betas=(getattr(config, "disc_beta1"), getattr(config, "disc_beta2")))),
    }
