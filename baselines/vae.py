"""The Gaussian VAE and its KL-weighted variants: VAE, beta-VAE, AnnealedVAE.

- VAE (Kingma & Welling 2014): -log p(x|z) + KL(q(z|x) || N(0, I)).
- beta-VAE (Higgins et al. 2017, eq. 4): -log p(x|z) + beta KL.
- AnnealedVAE (Burgess et al. 2018, eq. 8; Tonnaer et al.'s "CC-VAE"): -log p(x|z) + gamma |KL - C|,
  C growing linearly from 0 to ``c_max`` over ``c_steps`` steps (disentanglement_lib ``AnnealedVAE``).

Terms are summed per image and averaged over the batch (see :mod:`factorbench.baselines.terms`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn


from .config import Family, ModelConfig, register_family
from .nets import build_decoder, build_encoder, feature_width
from .optim import model_adam
from .terms import Loss, bernoulli_nll, capacity, gaussian_kl, gaussian_nll, reparameterise

__all__ = ["AnnealedVAEConfig", "BetaVAEConfig", "GaussianVAE", "VAEConfig", "adam_groups", "reconstruction_nll"]


class GaussianVAE(nn.Module):
    """Encoder -> (mu, log-variance) heads of ``latent_dim`` units -> sample -> decoder logits."""

    def __init__(self, config: ModelConfig, image_shape: tuple[int, int, int]) -> None:
        super().__init__()
        channels = image_shape[2]
        self.encoder = build_encoder(config, channels)
        self.mu_head = nn.Linear(feature_width(config), config.latent_dim)
        self.logvar_head = nn.Linear(feature_width(config), config.latent_dim)
        self.decoder = build_decoder(config, channels)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior mean and log-variance of images x (n, C, 64, 64) in [0, 1]."""
        h = self.encoder(x)
        return self.mu_head(h), self.logvar_head(h)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Decoder logits (n, C, 64, 64)."""
        return self.decoder(z)

    def forward(self, x: torch.Tensor, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        mu, logvar = self.encode(x)
        z = reparameterise(mu, logvar, generator)
        return {"mu": mu.float(), "logvar": logvar.float(), "z": z, "logits": self.decode(z)}


def build_vae(config: ModelConfig, image_shape: tuple[int, int, int]) -> GaussianVAE:
    return GaussianVAE(config, image_shape)


#: likelihood name -> (decoder logits, images in [0, 1], config) -> -log p(x|z) per image, batch mean
RECONSTRUCTION = {
    "bernoulli": lambda logits, x, config: bernoulli_nll(logits, x),
    "gaussian": lambda logits, x, config: gaussian_nll(logits, x, config.recon_sigma),
}


def reconstruction_nll(logits: torch.Tensor, x: torch.Tensor, config: ModelConfig) -> torch.Tensor:
    return RECONSTRUCTION[config.reconstruction](logits, x, config)


def adam_groups(model: nn.Module, config: ModelConfig) -> dict[str, tuple[list[nn.Parameter], torch.optim.Optimizer]]:
    """One Adam optimiser over every parameter (group ``"model"``)."""
    params = list(model.parameters())
    return {"model": (params, model_adam(params, config))}


def _elbo_terms(out: dict[str, torch.Tensor], x: torch.Tensor, config: ModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    recon = reconstruction_nll(out["logits"], x, config)
    kl = gaussian_kl(out["mu"], out["logvar"]).sum(1).mean()
    return recon, kl


@dataclass(frozen=True)
class VAEConfig(ModelConfig):
    """VAE (Kingma & Welling 2014)."""

    name: ClassVar[str] = "vae"


def vae_loss(out: dict[str, torch.Tensor], x: torch.Tensor, config: VAEConfig, step: int, dataset_size: int) -> Loss:
    """-log p(x|z) + KL."""
    recon, kl = _elbo_terms(out, x, config)
    loss = recon + kl
    return Loss({"model": loss}, {"loss": loss, "recon": recon, "kl": kl})


@dataclass(frozen=True)
class BetaVAEConfig(ModelConfig):
    """beta-VAE (Higgins et al. 2017). disentanglement_lib's grid: beta in {1, 2, 4, 6, 8, 16}; Tonnaer et
    al. use 5, Eastwood & Williams 6."""

    name: ClassVar[str] = "beta-vae"
    beta: float = 4.0

    def _check(self) -> None:
        super()._check()
        self._require(">= 0", "beta")


def beta_vae_loss(out: dict[str, torch.Tensor], x: torch.Tensor, config: BetaVAEConfig, step: int,
                  dataset_size: int) -> Loss:
    """-log p(x|z) + beta KL (Higgins et al. 2017, eq. 4)."""
    recon, kl = _elbo_terms(out, x, config)
    loss = recon + config.beta * kl
    return Loss({"model": loss}, {"loss": loss, "recon": recon, "kl": kl})


@dataclass(frozen=True)
class AnnealedVAEConfig(ModelConfig):
    """AnnealedVAE / CC-VAE (Burgess et al. 2018). disentanglement_lib's grid: c_max in {5, 10, 25, 50, 75,
    100}, gamma 1000, c_steps 100,000; Tonnaer et al.: c_max 15, c_steps 3,500, gamma 1000."""

    name: ClassVar[str] = "annealed-vae"
    gamma: float = 1000.0
    c_max: float = 25.0
    c_steps: int = 100_000

    def _check(self) -> None:
        super()._check()
        self._require(">= 0", "gamma", "c_max")
        self._require("positive", "c_steps")


def annealed_vae_loss(out: dict[str, torch.Tensor], x: torch.Tensor, config: AnnealedVAEConfig, step: int,
                      dataset_size: int) -> Loss:
    """-log p(x|z) + gamma |KL - C(step)| (Burgess et al. 2018, eq. 8)."""
    recon, kl = _elbo_terms(out, x, config)
    c = capacity(step, config.c_max, config.c_steps)
    loss = recon + config.gamma * (kl - c).abs()
    # the capacity logged as a tensor where the loss lives (a fill there; no host tensor per step)
    return Loss({"model": loss},
                {"loss": loss, "recon": recon, "kl": kl, "capacity": torch.full_like(kl.detach(), c)})


def _family(loss: Any) -> Family:
    return Family(build=build_vae, loss=loss, groups=adam_groups)


register_family(VAEConfig, _family(vae_loss))
register_family(BetaVAEConfig, _family(beta_vae_loss))
register_family(AnnealedVAEConfig, _family(annealed_vae_loss))
