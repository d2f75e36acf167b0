"""HFS-VAE (Roth et al. 2022, "Disentanglement of Correlated Factors via Hausdorff Factorized Support",
ICLR 2023): the beta-VAE objective plus a penalty that asks the support of the code, not its density, to
factorise, so that factors that are correlated but vary over a product of ranges can still be given
separate codes.

For a pair (i, j) of latent dimensions and a batch of posterior means m_1..m_B, the factorized support
is the product set {(m_a,i, m_b,j)} of the batch's values on i and on j; the penalty is the (directed,
squared) Hausdorff distance from that set to the batch itself,

    h_ij = max_{a, b} min_c [(m_a,i - m_c,i)^2 + (m_b,j - m_c,j)^2],

0 when the batch's support on (i, j) is already a product set. The loss is

    -log p(x|z) + beta KL(q(z|x) || N(0, I)) + gamma sum_{(i, j) in P} h_ij,

with P ``hfs_pairs`` pairs drawn without replacement among the D(D - 1)/2 each step (all when fewer).
Facts from the authors' code (facebookresearch/disentangling-correlated-factors,
``dent/losses/factorizedsupportvae.py``, mode ``hausdorff_hard`` with ``full`` support estimation,
``parameters.py`` defaults); BASELINES.md lists the settings and where this module differs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import ClassVar

import torch

from factorbench.generators.errors import FactorbenchError

from .config import Family, ModelConfig, register_family
from .terms import Loss, _wide
from .vae import _elbo_terms, adam_groups, build_vae

__all__ = ["HFSVAEConfig", "hausdorff_factorized_support", "hfs_vae_loss", "latent_pairs"]

#: tag of the random stream that picks each step's pairs
_PAIRS = 0x4F5


@dataclass(frozen=True)
class HFSVAEConfig(ModelConfig):
    """HFS-VAE with the authors' defaults (``parameters.py``): beta 1 (the KL weight), gamma 1 (the
    support penalty's weight), 25 pairs per step (of 45 for 10 latents). Their paper's sweeps: beta in
    {0, 1, 2, 4, 6, 8, 10, 16}, gamma in {0.1, 1, 10, 100, 1000, 10000} (``grid_searches/
    correlation_benchmark``)."""

    name: ClassVar[str] = "hfs-vae"
    beta: float = 1.0
    gamma: float = 1.0
    #: pairs of latent dimensions penalised per step, drawn anew each step (capped at all pairs)
    hfs_pairs: int = 25

    def _check(self) -> None:
        super()._check()
        self._require(">= 0", "beta", "gamma")
        self._require("positive", "hfs_pairs")
        if self.latent_dim < 2:
            raise FactorbenchError("hfs-vae: the support penalty acts on pairs of latent dimensions; latent_dim must "
                                   f"be >= 2, got {self.latent_dim}")
        if self.batch_size < 2:
            raise FactorbenchError("hfs-vae: the support estimate needs batch_size >= 2")


def latent_pairs(latent_dim: int, count: int, seed: int, step: int) -> torch.Tensor:
    """``min(count, D(D-1)/2)`` pairs (i < j) of latent dimensions, (P, 2), drawn without replacement, a pure
    function of (seed, step) (the authors draw them from numpy's global generator each step)."""
    every = torch.tensor(list(itertools.combinations(range(latent_dim), 2)), dtype=torch.long)
    if count >= len(every):
        return every
    gen = torch.Generator().manual_seed((seed * 0x9E3779B1 + step * 0x85EBCA77 + _PAIRS) % (2**63))
    return every[torch.randperm(len(every), generator=gen)[:count].sort().values]


def hausdorff_factorized_support(m: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """sum over ``pairs`` (P, 2) of h_ij = max_{a,b} min_c [(m_ai - m_ci)^2 + (m_bj - m_cj)^2] for codes m
    (B, D): the squared directed Hausdorff distance from the product of the batch's values on (i, j) to
    the batch (authors' ``dists.min(1)[0].max(0)[0].sum()``).

    The B^2 x B distances of each pair are searched without gradient, in blocks (B = 256 would otherwise
    hold 16.7 M floats per pair); the value is then recomputed from the chosen (a, b, c), which gives the
    same value and the same gradient as differentiating through the min and max."""
    m = _wide(m)
    total = m.new_zeros(())
    for i, j in pairs.tolist():
        u, v = m[:, i], m[:, j]
        with torch.no_grad():
            du = (u[:, None] - u[None, :]).square()  # (a, c)
            dv = (v[:, None] - v[None, :]).square()  # (b, c)
            best, where = None, None
            block = max(1, (1 << 22) // (len(u) * len(u)))
            for start in range(0, len(u), block):
                d = du[start:start + block, None, :] + dv[None, :, :]  # (a, b, c)
                inner, c = d.min(dim=2)  # (a, b)
                value, flat = inner.flatten().max(dim=0)
                if best is None or value > best:
                    a, b = divmod(int(flat), len(u))
                    best, where = value, (start + a, b, int(c[a, b]))
        a, b, c = where
        total = total + (u[a] - u[c]).square() + (v[b] - v[c]).square()
    return total


def hfs_vae_loss(out: dict[str, torch.Tensor], x: torch.Tensor, config: HFSVAEConfig, step: int,
                 dataset_size: int) -> Loss:
    """-log p(x|z) + beta KL + gamma sum_pairs h_ij on the posterior means (Roth et al. 2022; the authors'
    ``FactorizedSupportVAE``)."""
    recon, kl = _elbo_terms(out, x, config)
    hfs = hausdorff_factorized_support(out["mu"], latent_pairs(config.latent_dim, config.hfs_pairs, config.seed, step))
    loss = recon + config.beta * kl + config.gamma * hfs
    return Loss({"model": loss}, {"loss": loss, "recon": recon, "kl": kl, "hfs": hfs})


register_family(HFSVAEConfig, Family(build=build_vae, loss=hfs_vae_loss, groups=adam_groups))
