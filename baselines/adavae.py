"""Ada-GVAE and Ada-ML-VAE (Locatello et al. 2020, "Weakly-Supervised Disentanglement Without Compromises",
ICML 2020, section 4): a Gaussian VAE trained on pairs of images that differ in a few factors, whose two
posteriors are made equal on the latent dimensions that the pair seems to share.

Per pair (x1, x2) with diagonal Gaussian posteriors q(z|x1), q(z|x2):

- delta_i = KL(q(z_i|x1) || q(z_i|x2)) for each latent dimension i;
- the threshold tau = (max_i delta_i + min_i delta_i) / 2 and the shared set S = {i : delta_i < tau}
  (the "Ada" estimate of which dimensions did not change: k need not be known);
- on S both posteriors are replaced by a(q(z_i|x1), q(z_i|x2)): the average of the two Gaussians' means
  and variances for Ada-GVAE (the Group-VAE rule, Hosoya 2019), their precision-weighted average (the
  normalised geometric mean, as disentanglement_lib's ML-VAE rule after Bouchacourt et al. 2018) for
  Ada-ML-VAE; elsewhere each keeps its own;
- loss: the beta-VAE ELBO of both images with these posteriors, -log p(x_m|z_m) + beta KL(q~(z|x_m) || N(0, I)),
  z_m drawn from q~(z|x_m); summed per image, averaged over the 2P images of P pairs.

Pairs come from the dataset's grid: the first image of each pair in a seeded epoch order, then k factors
chosen at random and a partner drawn among the images of the split that agree with it on every other
factor and differ on each of the k (so exactly k factors change), all a pure function of (seed, step).
Facts from the authors' code: google-research/disentanglement_lib, ``methods/weak/weak_vae.py``
(``GroupVAEBase``, ``MLVae``, ``aggregate_argmax``, ``compute_kl``) and ``methods/weak/train_weak_lib.py``
(``simple_dynamics``); peers: nmichlo/disent ``frameworks/vae/_weaklysupervised__adavae.py``. See
BASELINES.md for where this module differs from them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from factorbench.generators.errors import FactorbenchError

from .config import Family, ModelConfig, register_family
from .data import EpochOrder, TrainingData
from .terms import Loss, gaussian_kl, reparameterise
from .vae import GaussianVAE, adam_groups, reconstruction_nll

__all__ = ["AVERAGING", "AdaGVAEConfig", "AdaMLVAEConfig", "AdaVAE", "AdaVAEConfig", "PairBatches", "ada_vae_loss",
           "adaptive_average", "gvae_average", "posterior_kl", "precision_average", "shared_dimensions"]

#: tags of the random streams drawn from the seed (order of the first images, choice of the partners)
_FIRST, _PARTNER = 0xADA001, 0xADA002
#: at most this many (pair, group member) cells are compared at once when partners are looked up
_VECTOR_CELLS = 1 << 16

Gaussian = tuple[torch.Tensor, torch.Tensor]


# --------------------------------------------------------------------------- adaptive averaging (pure)


def posterior_kl(mu1: torch.Tensor, logvar1: torch.Tensor, mu2: torch.Tensor, logvar2: torch.Tensor) -> torch.Tensor:
    """delta_i = KL(N(mu1_i, v1_i) || N(mu2_i, v2_i)) per dimension (Locatello et al. 2020, section 4: the
    distance between the two posteriors of a pair):

        0.5 (v1 / v2 + (mu2 - mu1)^2 / v2 - 1 + log v2 - log v1).

    disentanglement_lib's ``compute_kl`` is twice this (no 0.5), which leaves the threshold's choice unchanged."""
    return 0.5 * (torch.exp(logvar1 - logvar2) + (mu2 - mu1).square() * torch.exp(-logvar2) - 1.0
                  + logvar2 - logvar1)


def shared_dimensions(delta: torch.Tensor) -> torch.Tensor:
    """The dimensions a pair is taken to share (Locatello et al. 2020, section 4, the adaptive choice of k):
    tau = (max_i delta_i + min_i delta_i) / 2 over the last axis, shared = delta_i < tau (strictly).

    A dimension exactly at tau is not shared (disentanglement_lib's two equal-width histogram bins put
    the midpoint in the upper bin); if every delta_i is equal (identical posteriors, or one latent
    dimension) nothing is below tau and nothing is shared."""
    tau = 0.5 * (delta.amax(dim=-1, keepdim=True) + delta.amin(dim=-1, keepdim=True))
    return delta < tau


def gvae_average(mu1: torch.Tensor, logvar1: torch.Tensor, mu2: torch.Tensor, logvar2: torch.Tensor) -> Gaussian:
    """Ada-GVAE's a(q1, q2) (Locatello et al. 2020, section 4; the Group-VAE of Hosoya 2019): the Gaussian
    whose mean is the mean of the means and whose variance is the mean of the variances,

        mu = (mu1 + mu2) / 2,   v = (v1 + v2) / 2,

    returned as (mu, log v), log v = logaddexp(log v1, log v2) - log 2. (disent issue 32: a regression there
    averaged the means wrongly; this is the plain mean.)"""
    return 0.5 * (mu1 + mu2), torch.logaddexp(logvar1, logvar2) - math.log(2.0)


def precision_average(mu1: torch.Tensor, logvar1: torch.Tensor, mu2: torch.Tensor,
                      logvar2: torch.Tensor) -> Gaussian:
    """Ada-ML-VAE's a(q1, q2) as the authors' code computes it (disentanglement_lib ``MLVae``, after the ML-VAE
    of Bouchacourt et al. 2018): the normalised geometric mean sqrt(q1 q2) of the two Gaussians, precisions
    averaged and means weighted by precision,

        1 / v = (1 / v1 + 1 / v2) / 2,   mu = v (mu1 / v1 + mu2 / v2) / 2,

    i.e. v = 2 v1 v2 / (v1 + v2): the product of experts' mean with twice its variance. Returned as
    (mu, log v), log v = log 2 - logaddexp(-log v1, -log v2). Two identical Gaussians are kept unchanged."""
    w1 = torch.sigmoid(logvar2 - logvar1)  # (1 / v1) / (1 / v1 + 1 / v2)
    return w1 * mu1 + (1.0 - w1) * mu2, math.log(2.0) - torch.logaddexp(-logvar1, -logvar2)


#: averaging rule name -> a(q1, q2) on (mu1, logvar1, mu2, logvar2)
AVERAGING: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], Gaussian]] = {
    "gvae": gvae_average,
    "ml-vae": precision_average,
}


def adaptive_average(mu1: torch.Tensor, logvar1: torch.Tensor, mu2: torch.Tensor, logvar2: torch.Tensor,
                     average: Callable[..., Gaussian]) -> tuple[Gaussian, Gaussian, torch.Tensor]:
    """The posteriors q~(z|x1), q~(z|x2) of a batch of pairs (P, D) (Locatello et al. 2020, section 4): on the
    shared dimensions S = :func:`shared_dimensions` of :func:`posterior_kl`, both are ``average(q1, q2)``;
    elsewhere each keeps its own. Returns ((mu1~, logvar1~), (mu2~, logvar2~), S as a bool (P, D) mask)."""
    shared = shared_dimensions(posterior_kl(mu1, logvar1, mu2, logvar2))
    mu, logvar = average(mu1, logvar1, mu2, logvar2)
    first = (torch.where(shared, mu, mu1), torch.where(shared, logvar, logvar1))
    second = (torch.where(shared, mu, mu2), torch.where(shared, logvar, logvar2))
    return first, second, shared


# --------------------------------------------------------------------------- configs


@dataclass(frozen=True)
class AdaVAEConfig(ModelConfig):
    """Settings of both adaptive models (not a model itself: ``ada-gvae`` and ``ada-ml-vae`` set the rule).

    - ``beta`` 1: the KL weight (Tonnaer et al. 2022, Table 3: beta 1 for both).
    - ``k`` 2: the number of factors in which the two images of a pair differ. Tonnaer et al. (appendix):
      "for our datasets, two factors change"; all their datasets have exactly two factors, so every factor
      changes between the two images (square, arrow, airplane: both shifts / hue and rotation; the
      object sets: the object and its rotation). Locatello et al. study k = 1 .. d - 1 (at least one factor
      shared) and k drawn at random per pair; ``k=1`` is their setting on two-factor sets.
    - Everything else: disentanglement_lib's defaults (``ModelConfig``); ``batch_size`` counts pairs (2 x
      batch_size images per step), as disentanglement_lib's weak training.
    """

    averaging: ClassVar[str] = ""
    beta: float = 1.0
    k: int = 2

    def _check(self) -> None:
        super()._check()
        self._require(">= 0", "beta")
        self._require(">= 1", "k", meaning="the number of factors that change within a pair")


@dataclass(frozen=True)
class AdaGVAEConfig(AdaVAEConfig):
    """Ada-GVAE (Locatello et al. 2020): shared dimensions take the average of the two Gaussians."""

    name: ClassVar[str] = "ada-gvae"
    averaging: ClassVar[str] = "gvae"


@dataclass(frozen=True)
class AdaMLVAEConfig(AdaVAEConfig):
    """Ada-ML-VAE (Locatello et al. 2020): shared dimensions take the product of the two Gaussians."""

    name: ClassVar[str] = "ada-ml-vae"
    averaging: ClassVar[str] = "ml-vae"


# --------------------------------------------------------------------------- pairs


def _group_sizes(classes: np.ndarray, columns: list[int]) -> np.ndarray:
    """For each row, the number of rows with the same classes in ``columns`` (itself included)."""
    if not columns:
        return np.full(len(classes), len(classes), dtype=np.int64)
    _, inverse, counts = np.unique(classes[:, columns], axis=0, return_inverse=True, return_counts=True)
    return counts[inverse.reshape(-1)].astype(np.int64)


class PairBatches:
    """The step inputs of the adaptive models on ``data``: ``{"images": (2P, H, W, C)}``, P = batch_size pairs
    in pair order (rows 2p and 2p + 1 are a pair), a pure function of (config.seed, step).

    The first image of each pair runs through seeded epochs over the split (every image that has a partner
    once per epoch); then a set S of k factors is drawn uniformly among those for which it has a partner,
    and the partner uniformly among the images of the split that agree with it on every factor outside S
    and differ on every factor in S. ``partners[i, s]``: how many partners row i has for ``subsets[s]``
    (counted by inclusion-exclusion over the factors of S, so incomplete grids are handled exactly)."""

    def __init__(self, config: AdaVAEConfig, data: TrainingData) -> None:
        what = f"split {data.split!r} of {data.generator_name}"
        classes = data.factor_classes
        names = ", ".join(f.name for f in data.factor_specs)
        if classes is None:
            raise FactorbenchError(f"{config.name} trains on pairs of images that differ in k factors, drawn from the "
                                   f"grid of the factors, and {what} has no grid (its factors are drawn i.i.d.); "
                                   "train it on a grid dataset (square, arrow, airplane, objects, modelnet40, coil100)")
        d = classes.shape[1]
        if config.k > d:
            raise FactorbenchError(f"{config.name}: k={config.k}, but {what} has {d} factor(s) ({names}); a pair can "
                                   f"differ in at most {d}: choose 1 <= k <= {d}")
        self.data, self.batch_size, self.seed = data, config.batch_size, config.seed
        self.classes = np.ascontiguousarray(classes, dtype=np.int64)
        self.subsets = list(itertools.combinations(range(d), config.k))
        n = len(self.classes)
        self.partners = np.zeros((n, len(self.subsets)), dtype=np.int64)
        self._groups = []
        for s, subset in enumerate(self.subsets):
            rest = [j for j in range(d) if j not in subset]
            for size in range(len(subset) + 1):
                for agree in itertools.combinations(subset, size):
                    self.partners[:, s] += (-1) ** size * _group_sizes(self.classes, sorted(rest + list(agree)))
            # the rows of each group that agrees outside the subset, contiguous, for drawing partners
            if rest:
                _, key = np.unique(self.classes[:, rest], axis=0, return_inverse=True)
                key = key.reshape(-1)
            else:
                key = np.zeros(n, dtype=np.int64)
            order = np.argsort(key, kind="stable")
            starts = np.searchsorted(key[order], np.arange(int(key.max()) + 2))
            self._groups.append((key, order, starts, self.classes[order][:, list(subset)]))
        self._columns = [np.array(subset) for subset in self.subsets]
        self.eligible = np.flatnonzero(self.partners.sum(1) > 0)
        if len(self.eligible) == 0:
            raise FactorbenchError(f"no two images of {what} ({n:,} images; factors {names}) differ in exactly "
                                   f"{config.k} factor(s); choose another k or a split with more of the grid")
        self._order = EpochOrder(len(self.eligible), (config.seed, _FIRST))

    def pairs(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Row indices (into the split) of the first and second images of the pairs of ``step``.

        Pair by pair, the subset is drawn uniformly among those with a partner, then the partner's rank
        among the partners (``partners[i, s]`` of them), in one stream; then every pair's partner is looked
        up, all pairs of one subset at once where their groups are small."""
        first = self.eligible[self._order.batch(step, self.batch_size)]
        rng = np.random.default_rng([self.seed, _PARTNER, step])
        chosen = np.empty(len(first), dtype=np.int64)
        rank = np.empty(len(first), dtype=np.int64)
        draw = rng.integers
        for p, counts in enumerate(self.partners[first].tolist()):
            valid = [s for s, count in enumerate(counts) if count > 0]
            s = valid[draw(len(valid))]
            chosen[p], rank[p] = s, draw(counts[s])
        second = np.empty_like(first)
        for s in np.unique(chosen).tolist():
            at = np.flatnonzero(chosen == s)
            second[at] = self._partner(s, first[at], rank[at])
        return first, second

    def _partner(self, s: int, rows: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """The ``rank``-th partner (in split order) of each of ``rows`` for subset ``s``."""
        key, order, starts, subset_classes = self._groups[s]
        lo, hi = starts[key[rows]], starts[key[rows] + 1]
        own = self.classes[rows][:, self._columns[s]]
        width = int((hi - lo).max())
        if len(rows) * width <= _VECTOR_CELLS:  # padded to the widest group: all rows at once
            offsets = np.minimum(lo[:, None] + np.arange(width), len(order) - 1)
            inside = np.arange(width) < (hi - lo)[:, None]
            differs = np.all(subset_classes[offsets] != own[:, None, :], axis=2) & inside
            return order[lo + np.argmax(np.cumsum(differs, axis=1) > rank[:, None], axis=1)]
        out = np.empty_like(rows)
        for p in range(len(rows)):  # wide groups (k close to the number of factors): row by row
            differs = np.flatnonzero(np.all(subset_classes[lo[p]:hi[p]] != own[p], axis=1))
            out[p] = order[lo[p] + differs[rank[p]]]
        return out

    def __call__(self, step: int) -> dict[str, np.ndarray]:
        first, second = self.pairs(step)
        return {"images": self.data.images_at(np.stack([first, second], axis=1).reshape(-1))}


# --------------------------------------------------------------------------- model and loss


class AdaVAE(GaussianVAE):
    """The Gaussian VAE (encoder, mean and log-variance heads, decoder) whose forward pass on a batch of pairs
    replaces the two posteriors of each pair by their adaptive average before sampling. ``encode(x)``: the
    Gaussian (mu, logvar) of single images, as :class:`GaussianVAE`."""

    def __init__(self, config: AdaVAEConfig, image_shape: tuple[int, int, int]) -> None:
        super().__init__(config, image_shape)
        self.average = AVERAGING[config.averaging]

    def forward(self, batch: Any, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """``batch["images"]`` (or a tensor) (2P, C, H, W) in pair order. Outputs: ``mu``, ``logvar`` the
        averaged posteriors q~ (2P, D), ``mu_encoder``, ``logvar_encoder`` the encoder's own, ``shared`` (P, D),
        ``z`` samples of q~ and the decoder ``logits``."""
        x = batch["images"] if isinstance(batch, dict) else batch
        if len(x) % 2:
            raise ValueError(f"a batch of pairs needs an even number of images, got {len(x)}")
        mu, logvar = self.encode(x)
        mu, logvar = mu.float(), logvar.float()
        (mu1, lv1), (mu2, lv2), shared = adaptive_average(mu[0::2], logvar[0::2], mu[1::2], logvar[1::2], self.average)
        mu_avg = torch.stack([mu1, mu2], dim=1).reshape(mu.shape)
        logvar_avg = torch.stack([lv1, lv2], dim=1).reshape(logvar.shape)
        z = reparameterise(mu_avg, logvar_avg, generator)
        return {"mu": mu_avg, "logvar": logvar_avg, "mu_encoder": mu, "logvar_encoder": logvar, "shared": shared,
                "z": z, "logits": self.decode(z)}


def ada_vae_loss(out: dict[str, torch.Tensor], batch: Any, config: AdaVAEConfig, step: int,
                 dataset_size: int) -> Loss:
    """-log p(x_m|z_m) + beta KL(q~(z|x_m) || N(0, I)) with the averaged posteriors q~ (Locatello et al. 2020,
    section 4: the ELBO of both images of each pair), summed per image and averaged over the 2P images
    (disentanglement_lib's 0.5 (term of x1 + term of x2), batch mean; the paper sums the two, a factor 2)."""
    x = batch["images"] if isinstance(batch, dict) else batch
    recon = reconstruction_nll(out["logits"], x, config)
    kl = gaussian_kl(out["mu"], out["logvar"]).sum(1).mean()
    loss = recon + config.beta * kl
    shared = out["shared"].float().sum(1).mean()
    return Loss({"model": loss}, {"loss": loss, "recon": recon, "kl": kl, "shared_dims": shared})


def _family() -> Family:
    return Family(build=AdaVAE, loss=ada_vae_loss, groups=adam_groups, batches=PairBatches)


register_family(AdaGVAEConfig, _family())
register_family(AdaMLVAEConfig, _family())
