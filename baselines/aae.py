"""The adversarial autoencoder (Makhzani et al. 2015, "Adversarial Autoencoders", section 2, the
deterministic encoder), as Do & Tran 2020 train it on dSprites (appendix A.2, Table 4).

A deterministic encoder maps x to z; a decoder reconstructs x from z; a discriminator D over z tells
samples of the prior p(z) = N(0, I) from codes of the data. Per step:

- autoencoder (encoder + decoder): -log p(x | z) + ``gz`` * (-log D(z)), the reconstruction (Bernoulli,
  summed per image, mean over the batch) plus the non-saturating generator loss on z;
- discriminator: -log D(z_prior) - log(1 - D(z)), the sum of the two batch means (z detached).

Its code carries no posterior: ``encode`` returns z, so evaluations of a run get plain codes, and the
metrics that need a Gaussian posterior report that they do not apply (as for PCA).
Facts from the authors' code (clarken92/DisentanglementMetrics: ``models/generative/aae.py``,
``models/enc_dec/dSprites.py``, ``working/disentanglement/dSprites/AAE/_train.py``); BASELINES.md lists
where this module differs from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from .config import Family, ModelConfig, register_family
from .nets import Discriminator, build_decoder, build_encoder, feature_width
from .optim import discriminator_groups
from .terms import Loss
from .vae import reconstruction_nll

__all__ = ["AAE", "AAEConfig", "aae_groups", "aae_loss"]


@dataclass(frozen=True)
class AAEConfig(ModelConfig):
    """AAE with Do & Tran 2020's dSprites settings: Table 4's networks (``burgess`` at ``hidden`` 128: conv
    32, 32, 64, 64 k4 s2, dense 128; decoder dense 128, 4*4*64, transposed conv 64, 32, 32, C), 10
    latents, Adam lr 1e-3 betas (0.5, 0.99) for the autoencoder and lr 1e-4 for the discriminator (5 dense
    layers of 1000, leaky ReLU 0.2, one logit), batch 64; ``gz`` 50, the coefficient of the model the
    paper analyses on dSprites (the authors' run ``1_Gz50_zdim10``)."""

    name: ClassVar[str] = "aae"
    hidden: int = 128
    lr: float = 1e-3
    adam_beta1: float = 0.5
    adam_beta2: float = 0.99
    gz: float = 50.0
    disc_width: int = 1000
    disc_layers: int = 5
    disc_lr: float = 1e-4
    disc_beta1: float = 0.5
    disc_beta2: float = 0.99

    def _check(self) -> None:
        super()._check()
        self._require(">= 0", "gz")
        self._require("positive", "disc_width", "disc_layers", "disc_lr")
        self._require("in [0, 1)", "disc_beta1", "disc_beta2")


class AAE(nn.Module):
    """Encoder -> z (one dense head of ``latent_dim``) -> decoder logits; a discriminator over z."""

    def __init__(self, config: AAEConfig, image_shape: tuple[int, int, int]) -> None:
        super().__init__()
        channels = image_shape[2]
        self.encoder = build_encoder(config, channels)
        self.z_head = nn.Linear(feature_width(config), config.latent_dim)
        self.decoder = build_decoder(config, channels)
        self.discriminator = Discriminator(config.latent_dim, config.disc_width, config.disc_layers, outputs=1)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """The code z of images x (n, C, 64, 64) in [0, 1]: deterministic, no posterior."""
        return self.z_head(self.encoder(x))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.decoder(z)

    def forward(self, x: torch.Tensor, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        z = self.encode(x).float()
        prior = torch.randn(z.shape, generator=generator, device=z.device, dtype=z.dtype)
        return {"z": z, "logits": self.decode(z), "d_code": self.discriminator(z).float()[:, 0],
                "d_code_detached": self.discriminator(z.detach()).float()[:, 0],
                "d_prior": self.discriminator(prior).float()[:, 0]}


def adversarial_losses(d_prior: torch.Tensor, d_code_detached: torch.Tensor,
                       d_code: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(discriminator loss, generator loss) from D's logits (Makhzani et al. 2015, eq. 1 with the
    non-saturating generator of Goodfellow et al. 2014): the discriminator's is
    -mean log sigmoid(D(z_prior)) - mean log(1 - sigmoid(D(z))), the encoder's -mean log sigmoid(D(z))."""
    ones, zeros = torch.ones_like(d_prior), torch.zeros_like(d_code_detached)
    disc = (F.binary_cross_entropy_with_logits(d_prior, ones)
            + F.binary_cross_entropy_with_logits(d_code_detached, zeros))
    gen = F.binary_cross_entropy_with_logits(d_code, torch.ones_like(d_code))
    return disc, gen


def aae_loss(out: dict[str, torch.Tensor], x: torch.Tensor, config: AAEConfig, step: int, dataset_size: int) -> Loss:
    """Autoencoder: -log p(x|z) + gz (-log D(z)); discriminator: -log D(z_prior) - log(1 - D(z))."""
    recon = reconstruction_nll(out["logits"], x, config)
    disc, gen = adversarial_losses(out["d_prior"], out["d_code_detached"], out["d_code"])
    loss = recon + config.gz * gen
    return Loss({"model": loss, "discriminator": disc},
                {"loss": loss, "recon": recon, "generator": gen, "disc": disc,
                 "code_std": out["z"].detach().std(0).mean()})


def aae_groups(model: AAE, config: AAEConfig) -> dict[str, tuple[list[nn.Parameter], torch.optim.Optimizer]]:
    """The model at ``lr`` (with the config's weight decay), the discriminator at ``disc_lr`` with its own betas."""
    return discriminator_groups(model, config)


register_family(AAEConfig, Family(build=AAE, loss=aae_loss, groups=aae_groups))
