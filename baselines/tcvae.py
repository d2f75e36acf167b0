"""beta-TCVAE (Chen et al. 2018): the ELBO with the total-correlation part of the KL weighted by beta.

Chen et al. decompose E[KL(q(z|x) || p(z))] = MI(x; z) + TC(z) + sum_j KL(q(z_j) || p(z_j)) and weight
the parts alpha, beta, gamma (eq. 4); with alpha = gamma = 1 the objective is -log p(x|z) + KL +
(beta - 1) TC, written out here in full (the KL is not re-scaled). TC is the minibatch-weighted sampling
estimate (:func:`factorbench.baselines.terms.total_correlation`), which needs the training set size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from factorbench.generators.errors import FactorbenchError

from .config import Family, ModelConfig, register_family
from .terms import Loss, total_correlation
from .vae import _elbo_terms, adam_groups, build_vae

__all__ = ["BetaTCVAEConfig", "beta_tcvae_loss"]


@dataclass(frozen=True)
class BetaTCVAEConfig(ModelConfig):
    """beta-TCVAE. disentanglement_lib's grid: beta in {1, 2, 4, 6, 8, 10}."""

    name: ClassVar[str] = "beta-tcvae"
    beta: float = 6.0

    def _check(self) -> None:
        super()._check()
        self._require(">= 0", "beta")
        if self.batch_size < 2:
            raise FactorbenchError("beta-tcvae: the total-correlation estimate needs batch_size >= 2")


def beta_tcvae_loss(out: dict[str, torch.Tensor], x: torch.Tensor, config: BetaTCVAEConfig, step: int,
                    dataset_size: int) -> Loss:
    """-log p(x|z) + KL + (beta - 1) TC (Chen et al. 2018, eq. 4 with alpha = gamma = 1)."""
    recon, kl = _elbo_terms(out, x, config)
    tc = total_correlation(out["z"], out["mu"], out["logvar"], dataset_size)
    loss = recon + kl + (config.beta - 1.0) * tc
    return Loss({"model": loss}, {"loss": loss, "recon": recon, "kl": kl, "tc": tc})


register_family(BetaTCVAEConfig, Family(build=build_vae, loss=beta_tcvae_loss, groups=adam_groups))
