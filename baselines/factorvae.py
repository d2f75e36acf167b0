"""FactorVAE (Kim & Mnih 2018): a VAE plus gamma times a discriminator's estimate of the total correlation.

The discriminator tells samples of q(z) from samples of prod_j q(z_j) (each latent column permuted
independently across the batch, Algorithm 1). Its logits D give the density-ratio estimate
TC ~ E[D_real(z) - D_permuted(z)] (eq. 3 with the 2-logit form of disentanglement_lib), and the VAE
minimises -log p(x|z) + KL + gamma TC. The discriminator has its own optimiser (Adam lr 1e-4, betas
(0.5, 0.9)) and minimises the cross-entropy of (z -> real, permuted z -> permuted); both optimisers
step once per training step, on the same batch, as in disentanglement_lib.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from factorbench.generators.errors import FactorbenchError

from .config import Family, ModelConfig, register_family
from .nets import Discriminator
from .optim import discriminator_groups
from .terms import Loss, permute_dims
from .vae import GaussianVAE, _elbo_terms

__all__ = ["FactorVAE", "FactorVAEConfig", "factor_vae_loss"]


@dataclass(frozen=True)
class FactorVAEConfig(ModelConfig):
    """FactorVAE. disentanglement_lib's grid: gamma in {10, 20, 30, 40, 50, 100}; Tonnaer et al.: gamma 1."""

    name: ClassVar[str] = "factor-vae"
    gamma: float = 10.0
    disc_width: int = 1000
    disc_layers: int = 6
    disc_lr: float = 1e-4
    disc_beta1: float = 0.5
    disc_beta2: float = 0.9

    def _check(self) -> None:
        super()._check()
        self._require(">= 0", "gamma")
        self._require("positive", "disc_width", "disc_layers", "disc_lr")
        if self.batch_size < 2:
            raise FactorbenchError("factor-vae: the permutation needs batch_size >= 2")


class FactorVAE(GaussianVAE):
    def __init__(self, config: FactorVAEConfig, image_shape: tuple[int, int, int]) -> None:
        super().__init__(config, image_shape)
        self.discriminator = Discriminator(config.latent_dim, config.disc_width, config.disc_layers)

    def forward(self, x: torch.Tensor, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        out = super().forward(x, generator)
        permuted = permute_dims(out["z"].detach(), generator)
        out["d_real"] = self.discriminator(out["z"]).float()
        out["d_permuted"] = self.discriminator(permuted).float()
        return out


def factor_vae_loss(out: dict[str, torch.Tensor], x: torch.Tensor, config: FactorVAEConfig, step: int,
                    dataset_size: int) -> Loss:
    """Model: -log p(x|z) + KL + gamma E[D_0(z) - D_1(z)]; discriminator: cross-entropy of z as class 0 and
    permuted z as class 1, each half-weighted (Kim & Mnih 2018, eqs. 2-3)."""
    recon, kl = _elbo_terms(out, x, config)
    tc = (out["d_real"][:, 0] - out["d_real"][:, 1]).mean()
    loss = recon + kl + config.gamma * tc
    real = torch.zeros(len(x), dtype=torch.long, device=x.device)
    disc = 0.5 * (F.cross_entropy(out["d_real"], real) + F.cross_entropy(out["d_permuted"], real + 1))
    return Loss({"model": loss, "discriminator": disc},
                {"loss": loss, "recon": recon, "kl": kl, "tc": tc, "disc": disc})


def factor_vae_groups(model: FactorVAE,
                      config: FactorVAEConfig) -> dict[str, tuple[list[nn.Parameter], torch.optim.Optimizer]]:
    """The model at ``lr`` (with the config's weight decay), the discriminator at ``disc_lr`` with its own betas."""
    return discriminator_groups(model, config)


register_family(FactorVAEConfig, Family(build=FactorVAE, loss=factor_vae_loss, groups=factor_vae_groups))
