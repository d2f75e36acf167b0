"""DIP-VAE-I and DIP-VAE-II (Kumar et al. 2018): the ELBO plus a penalty on the covariance of the
aggregate posterior's moments, pushing it towards the identity (eq. 6):

    lambda_od sum_{i != j} Cov_ij^2 + lambda_d sum_i (Cov_ii - 1)^2

- DIP-VAE-I: Cov = Cov_x[mu(x)] (covariance of the posterior means over the batch);
- DIP-VAE-II: Cov = E_x[diag exp(logvar(x))] + Cov_x[mu(x)] (covariance of q(z), eq. 7). Its diagonal
  holds the mean posterior variances plus the variances of the means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from factorbench.generators.errors import FactorbenchError

from .config import Family, ModelConfig, register_family
from .terms import Loss, covariance, dip_penalty
from .vae import _elbo_terms, adam_groups, build_vae

__all__ = ["DIPVAEIConfig", "DIPVAEIIConfig", "dip_vae_i_loss", "dip_vae_ii_loss"]


class _DIPCheck:
    def _check(self) -> None:
        super()._check()  # type: ignore[misc]
        self._require(">= 0", "lambda_od", "lambda_d")  # type: ignore[attr-defined]
        if self.batch_size < 2:  # type: ignore[attr-defined]
            raise FactorbenchError(f"{self.name}: the covariance needs batch_size >= 2")  # type: ignore[attr-defined]


@dataclass(frozen=True)
class DIPVAEIConfig(_DIPCheck, ModelConfig):
    """DIP-VAE-I. disentanglement_lib's grid: lambda_od in {1, 2, 5, 10, 20, 50}, lambda_d = 10 lambda_od;
    Tonnaer et al.: lambda_od 1, lambda_d 10."""

    name: ClassVar[str] = "dip-vae-i"
    lambda_od: float = 10.0
    lambda_d: float = 100.0


@dataclass(frozen=True)
class DIPVAEIIConfig(_DIPCheck, ModelConfig):
    """DIP-VAE-II. disentanglement_lib's grid: lambda_od in {1, 2, 5, 10, 20, 50}, lambda_d = lambda_od;
    Tonnaer et al.: lambda_od 1, lambda_d 1."""

    name: ClassVar[str] = "dip-vae-ii"
    lambda_od: float = 10.0
    lambda_d: float = 10.0


def dip_i_covariance(mu: torch.Tensor) -> torch.Tensor:
    """Cov[mu] over the batch (Kumar et al. 2018, DIP-VAE-I)."""
    return covariance(mu)


def dip_ii_covariance(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """E[diag exp(logvar)] + Cov[mu] (Kumar et al. 2018, eq. 7)."""
    return covariance(mu) + torch.diag_embed(logvar.float().exp().mean(0))


def _dip_loss(cov: torch.Tensor, recon: torch.Tensor, kl: torch.Tensor, config: ModelConfig) -> Loss:
    penalty = dip_penalty(cov, config.lambda_od, config.lambda_d)  # type: ignore[attr-defined]
    loss = recon + kl + penalty
    return Loss({"model": loss}, {"loss": loss, "recon": recon, "kl": kl, "dip": penalty})


def dip_vae_i_loss(out: dict[str, torch.Tensor], x: torch.Tensor, config: DIPVAEIConfig, step: int,
                   dataset_size: int) -> Loss:
    """-log p(x|z) + KL + DIP penalty on Cov[mu]."""
    recon, kl = _elbo_terms(out, x, config)
    return _dip_loss(dip_i_covariance(out["mu"]), recon, kl, config)


def dip_vae_ii_loss(out: dict[str, torch.Tensor], x: torch.Tensor, config: DIPVAEIIConfig, step: int,
                    dataset_size: int) -> Loss:
    """-log p(x|z) + KL + DIP penalty on E[Sigma] + Cov[mu]."""
    recon, kl = _elbo_terms(out, x, config)
    return _dip_loss(dip_ii_covariance(out["mu"], out["logvar"]), recon, kl, config)


register_family(DIPVAEIConfig, Family(build=build_vae, loss=dip_vae_i_loss, groups=adam_groups))
register_family(DIPVAEIIConfig, Family(build=build_vae, loss=dip_vae_ii_loss, groups=adam_groups))
