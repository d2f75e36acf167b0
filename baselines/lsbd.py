"""LSBD-VAE (Tonnaer et al. 2022, "Quantifying and Learning Linear Symmetry-Based Disentanglement", section 5):
a Delta-VAE whose latent space is a product of circles (and optionally R^E), trained on unlabelled images
and on L pairs of images labelled with the transformation between them.

- Latent space S^1 x ... x S^1 (x R^E): each circle a unit 2-vector (S^1 x S^1 for square, arrow,
  airplane; S^1 x R^5 for the object x rotation sets). The group acts on circle k by the rotation of
  cyclic factor k and trivially on R^E.
- Posterior on each circle (the Delta-VAE, Perez Rey et al. 2020): location Pi(dense(h)), log diffusion
  time log t = a tanh clamp of dense(h) into (log_t_min, log_t_max); a sample is a projected Brownian
  random walk of ``walk_steps`` steps; KL to the uniform prior by the closed-form small-t approximation
  (:func:`~factorbench.baselines.terms.delta_vae_kl`). R^E: a Gaussian posterior and N(0, I) prior.
- Unlabelled step: -log p(x|z) + KL, batch mean.
- Labelled step, P pairs (M = 2, g_1 = e): the decoder gets rho(g_m) z_bar instead of z_m, z_bar the
  projected mean of the anchored samples rho(g_m^-1) z_m; loss -log p(x|z) + KL + gamma L_LSBD (eq. 11:
  the mean over the members, each circle compared on its own; the authors' code sums over the members
  and compares whole concatenated codes, see BASELINES.md).
- Schedule (the authors' ``fit_semi_supervised``): alternately one pass over the L labelled pairs in
  batches of batch_size / 2 pairs and one pass over the unlabelled images (every image not in a labelled
  pair) in batches of batch_size; each kind of step has its own Adam optimiser, as the authors' code
  (its two Keras sub-models are compiled with ``"adam"`` each).

Every batch is a pure function of (seed, step): the L pairs are drawn once from the split's grid classes
with the seed (nested: the first L of one seeded order of disjoint candidate pairs), the order of each
pass from ``EpochOrder``. Facts from the authors' code: luis-armando-perez-rey/lsbd-vae,
``lsbd_vae/models/latentspace.py``, ``lsbd_vae/models/lsbd_vae.py``, ``lsbd_vae/data_utils/factor_dataset.py``,
``experiments/run.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from factorbench.generators.errors import FactorbenchError

from .config import Family, ModelConfig, register_family
from .data import EpochOrder, TrainingData
from .nets import build_decoder, build_encoder, feature_width
from .optim import model_adam
from .terms import (Loss, anchored_mean, delta_vae_kl, equivariance_loss, gaussian_kl, limit_log_t,
                    project_to_sphere, projected_random_walk, reparameterise, rotate)
from .vae import reconstruction_nll

__all__ = ["LSBDBatches", "LSBDVAE", "LSBDVAEConfig", "LabelledPairs", "PAPER_SETTINGS", "draw_pairs",
           "lsbd_vae_loss"]

#: tags of the random streams drawn from the seed (pairs, order of the labelled and unlabelled passes)
_PAIRS, _LABELLED, _UNLABELLED = 0x9A1125, 0x1ABE11, 0x0B5E2D


@dataclass(frozen=True)
class LSBDVAEConfig(ModelConfig):
    """LSBD-VAE (Tonnaer et al. 2022). Defaults: the paper's setting for square, arrow and airplane.

    - ``latent_dim`` 4 and ``circles`` 2: S^1 x S^1 (paper section 6); the latent is ``circles`` unit
      2-vectors then ``latent_dim - 2 circles`` Euclidean dimensions (object sets: circles 1, latent_dim 7,
      i.e. S^1 x R^5).
    - ``labelled_pairs`` L: 0 (unsupervised: the Delta-VAE, "LSBD-VAE/0") to N/2 (paper section 6:
      L in {0, 256, ..., 2048} on the 4,096-image sets).
    - ``gamma`` 100: weight of L_LSBD on the torus sets (paper section 6, Table 4); 1 on ModelNet40 and
      COIL-100.
    - ``log_t_min`` -10, ``log_t_max`` -9: Table 4 gives t in [10^-10, 10^-9] (square, arrow, airplane)
      and [10^-10, 10^-5] (ModelNet40, COIL-100); the authors' code clamps the natural log of t with
      ``log_t_limit=(-10, logt)``, ``--logt`` default -5 (``experiments/run.py``): the table's exponents
      are these limits.
    - ``walk_steps`` 10: steps of the random walk (``HyperSphericalLatentSpace(steps=10)``).
    - ``reconstruction`` gaussian with ``recon_sigma`` 1/sqrt 2 on a sigmoid output (``gaussian_loss``,
      ``dec_std=1/sqrt 2``; sigmoid last layer in ``architectures.py``).
    - ``architecture`` burgess (Table 1: conv 32, 32, 64, 64, k4 s2; dense 256).
    - Adam ``lr`` 1e-3, betas (0.9, 0.999), ``adam_eps`` 1e-7: Keras' defaults (``compile(optimizer="adam")``).
    - ``batch_size`` 100 (``run.py`` default); ``steps`` 60,000, about the paper's 1,500 epochs (Table 4)
      on a 4,096-image set at L = 1,024 (42 steps per epoch pair).
    """

    name: ClassVar[str] = "lsbd-vae"

    architecture: str = "burgess"
    latent_dim: int = 4
    reconstruction: str = "gaussian"
    lr: float = 1e-3
    adam_eps: float = 1e-7
    batch_size: int = 100
    steps: int = 60_000
    circles: int = 2
    labelled_pairs: int = 0
    gamma: float = 100.0
    log_t_min: float = -10.0
    log_t_max: float = -9.0
    walk_steps: int = 10

    @property
    def euclidean_dims(self) -> int:
        return self.latent_dim - 2 * self.circles

    def _check(self) -> None:
        super()._check()
        self._require(">= 1", "circles", "walk_steps")
        self._require(">= 0", "labelled_pairs", meaning="0: unsupervised")
        self._require(">= 0", "gamma")
        if self.euclidean_dims < 0:
            raise FactorbenchError(f"lsbd-vae: latent_dim {self.latent_dim} cannot hold {self.circles} circles "
                                   f"(2 dimensions each); give latent_dim >= {2 * self.circles}")
        if not self.log_t_min < self.log_t_max:
            raise FactorbenchError(f"lsbd-vae: need log_t_min < log_t_max, got {self.log_t_min} and "
                                   f"{self.log_t_max}")
        if self.labelled_pairs and self.batch_size < 2:
            raise FactorbenchError("lsbd-vae: a labelled batch holds batch_size / 2 pairs; give batch_size >= 2")


#: the paper's settings per dataset (Tonnaer et al. 2022, section 6 and Table 4), as ``--param`` overrides
PAPER_SETTINGS: dict[str, dict[str, Any]] = {
    **{name: {} for name in ("square", "arrow", "airplane")},
    **{name: {"circles": 1, "latent_dim": 7, "gamma": 1.0, "log_t_max": -5.0}
       for name in ("objects", "modelnet40", "coil100")},
}


# --------------------------------------------------------------------------- labelled pairs


@dataclass(frozen=True, eq=False)
class LabelledPairs:
    """L disjoint pairs of rows of a split: ``first``, ``second`` (L,) int64 indices into the split;
    ``angles`` (L, K) the rotation in [0, 2 pi) of each cyclic factor taking ``first`` to ``second``."""

    first: np.ndarray
    second: np.ndarray
    angles: np.ndarray

    def __len__(self) -> int:
        return len(self.first)


def _angles(values: np.ndarray, factors: tuple[Any, ...], columns: list[int]) -> np.ndarray:
    return np.stack([2.0 * math.pi * (values[:, j] - factors[j].low) / factors[j].period for j in columns], axis=1)


def draw_pairs(values: np.ndarray, classes: np.ndarray | None, factors: tuple[Any, ...], n_pairs: int, seed: int,
               *, circles: int, euclidean_dims: int, what: str = "the training data") -> LabelledPairs:
    """``n_pairs`` disjoint pairs of rows, drawn with ``seed`` from the grid classes of the factors.

    Rows are grouped by the classes of their non-cyclic factors (the object of the object x rotation
    sets; one group on the torus sets), each group shuffled and cut into disjoint pairs, and the first
    ``n_pairs`` of one seeded order of all these candidates are kept (so the pairs for L are among those
    for any larger L). A pair's transformation is the rotation of each cyclic factor, from its values:
    2 pi (v_second - v_first) / period mod 2 pi. As the authors' ``setup_circles_dataset_labelled_pairs``
    (any two points of the torus) and ``setup_cylinder_dataset_labelled_pairs`` (two rotations of one
    object)."""
    cyclic = [j for j, f in enumerate(factors) if f.kind == "cyclic"]
    others = [j for j, f in enumerate(factors) if f.kind != "cyclic"]
    if classes is None:
        raise FactorbenchError(f"labelled pairs are drawn from the grid classes of the factors, and {what} has no "
                               "grid (its factors are drawn i.i.d.); train with labelled_pairs=0 (unsupervised), or "
                               "on a grid dataset (square, arrow, airplane, objects, modelnet40, coil100)")
    names = ", ".join(f"{f.name} ({f.kind})" for f in factors)
    if len(cyclic) != circles:
        raise FactorbenchError(f"lsbd-vae has {circles} circle(s), one per cyclic factor, and {what} has "
                               f"{len(cyclic)} cyclic factor(s) among {names}; set circles={len(cyclic)}")
    if others and euclidean_dims == 0:
        raise FactorbenchError(f"{what} has non-cyclic factors ({', '.join(factors[j].name for j in others)}) that "
                               "a product of circles cannot hold; give the latent Euclidean dimensions: latent_dim = "
                               f"2 x circles + E (the paper: circles=1, latent_dim=7, gamma=1, log_t_max=-5)")
    rng = np.random.default_rng([seed, _PAIRS])
    if others:
        _, group = np.unique(classes[:, others], axis=0, return_inverse=True)
        group = group.reshape(-1)
    else:
        group = np.zeros(len(values), dtype=np.int64)
    candidates = []
    for g in range(int(group.max()) + 1 if len(group) else 0):
        rows = rng.permutation(np.flatnonzero(group == g))
        usable = len(rows) // 2 * 2
        candidates.append(rows[:usable].reshape(-1, 2))
    pairs = np.concatenate(candidates) if candidates else np.empty((0, 2), dtype=np.int64)
    if n_pairs > len(pairs):
        within = " of one object" if others else ""
        raise FactorbenchError(f"labelled_pairs={n_pairs}: {what} ({len(values):,} images) has at most {len(pairs):,} "
                               f"disjoint pairs{within}; choose labelled_pairs <= {len(pairs)}")
    pairs = pairs[rng.permutation(len(pairs))[:n_pairs]].astype(np.int64)
    theta = _angles(values, factors, cyclic)
    angles = np.mod(theta[pairs[:, 1]] - theta[pairs[:, 0]], 2.0 * math.pi)
    return LabelledPairs(pairs[:, 0].copy(), pairs[:, 1].copy(), angles)


class LSBDBatches:
    """The step inputs of LSBD-VAE on ``data``: a pure function of (config.seed, step).

    A cycle is ``labelled_steps`` batches of ``pair_batch`` labelled pairs (``{"images": (2P, H, W, C)`` in
    pair order, ``"angles": (P, 2, K)``, the first member the anchor with angle 0}) then
    ``unlabelled_steps`` batches of ``image_batch`` unlabelled images (``{"images"}``): one pass over each
    set, as the authors' alternating epochs."""

    def __init__(self, config: LSBDVAEConfig, data: TrainingData) -> None:
        self.data = data
        n = len(data)
        what = f"split {data.split!r} of {data.generator_name}"
        L = config.labelled_pairs
        if L:
            self.pairs = draw_pairs(data.factors, data.factor_classes, data.factor_specs, L, config.seed,
                                    circles=config.circles, euclidean_dims=config.euclidean_dims, what=what)
            labelled = np.concatenate([self.pairs.first, self.pairs.second])
        else:
            self.pairs = LabelledPairs(np.empty(0, np.int64), np.empty(0, np.int64), np.empty((0, config.circles)))
            labelled = np.empty(0, np.int64)
        self.unlabelled = np.setdiff1d(np.arange(n, dtype=np.int64), labelled)
        self.pair_batch = min(config.batch_size // 2, L)
        self.image_batch = min(config.batch_size, len(self.unlabelled))
        self.labelled_steps = -(-L // self.pair_batch) if L else 0
        self.unlabelled_steps = -(-len(self.unlabelled) // self.image_batch) if len(self.unlabelled) else 0
        self._pair_order = EpochOrder(L, (config.seed, _LABELLED)) if L else None
        self._image_order = EpochOrder(len(self.unlabelled), (config.seed, _UNLABELLED)) \
            if len(self.unlabelled) else None

    def kind(self, step: int) -> tuple[str, int]:
        """("labelled" or "unlabelled", index of the batch in that stream) of ``step``."""
        cycle, r = divmod(step, self.labelled_steps + self.unlabelled_steps)
        if r < self.labelled_steps:
            return "labelled", cycle * self.labelled_steps + r
        return "unlabelled", cycle * self.unlabelled_steps + r - self.labelled_steps

    def __call__(self, step: int) -> dict[str, np.ndarray]:
        kind, index = self.kind(step)
        if kind == "unlabelled":
            assert self._image_order is not None
            return {"images": self.data.images_at(self.unlabelled[self._image_order.batch(index, self.image_batch)])}
        assert self._pair_order is not None
        chosen = self._pair_order.batch(index, self.pair_batch)
        rows = np.stack([self.pairs.first[chosen], self.pairs.second[chosen]], axis=1).reshape(-1)
        angles = np.zeros((len(chosen), 2, self.pairs.angles.shape[1]), dtype=np.float32)
        angles[:, 1] = self.pairs.angles[chosen]
        return {"images": self.data.images_at(rows), "angles": angles}


# --------------------------------------------------------------------------- model and loss


class LSBDVAE(nn.Module):
    """Encoder -> per circle a location on S^1 and a clamped log t (and a Gaussian on R^E) -> sample ->
    decoder logits. ``encode(x)`` gives the code the metrics read: the circles' (cos, sin) pairs then the
    Euclidean means, (n, latent_dim); it is not a Gaussian posterior, so no log-variance is returned."""
    #: how :meth:`traversals` sweeps the code (the caption of a run's picture)
    traversal_caption = "each circle turned through a full turn, each Euclidean latent over [-2.5, 2.5]"

    def __init__(self, config: LSBDVAEConfig, image_shape: tuple[int, int, int]) -> None:
        super().__init__()
        channels = image_shape[2]
        self.circles, self.euclidean_dims = config.circles, config.euclidean_dims
        self.log_t_range = (config.log_t_min, config.log_t_max)
        self.walk_steps = config.walk_steps
        self.encoder = build_encoder(config, channels)
        self.loc_head = nn.Linear(feature_width(config), 2 * self.circles)
        # zero-initialised, as the authors' log t and log sigma layers: log t starts mid-range, sigma at 1
        self.log_t_head = nn.Linear(feature_width(config), self.circles)
        self.mu_head = nn.Linear(feature_width(config), self.euclidean_dims) if self.euclidean_dims else None
        self.logvar_head = nn.Linear(feature_width(config), self.euclidean_dims) if self.euclidean_dims else None
        for layer in (self.log_t_head, self.logvar_head):
            if layer is not None:
                nn.init.zeros_(layer.weight)
                nn.init.zeros_(layer.bias)
        self.decoder = build_decoder(config, channels)

    def posterior(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """``loc`` (n, K, 2) unit vectors, ``log_t`` (n, K), ``mu`` and ``logvar`` (n, E), float32."""
        h = self.encoder(x)
        loc = project_to_sphere(self.loc_head(h).float().view(len(x), self.circles, 2))
        log_t = limit_log_t(self.log_t_head(h).float(), *self.log_t_range)
        if self.mu_head is None or self.logvar_head is None:
            mu = logvar = loc.new_zeros((len(x), 0))
        else:
            mu, logvar = self.mu_head(h).float(), self.logvar_head(h).float()
        return {"loc": loc, "log_t": log_t, "mu": mu, "logvar": logvar}

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        post = self.posterior(x)
        return torch.cat([post["loc"].flatten(1), post["mu"]], dim=1)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Decoder logits (n, C, 64, 64) of codes (n, latent_dim)."""
        return self.decoder(z)

    def traversals(self, code: torch.Tensor, n: int) -> list[tuple[str, torch.Tensor]]:
        """For the picture of a run: each circle turned through n angles in [0, 2 pi) from ``code`` (1, D),
        each Euclidean dimension swept over [-2.5, 2.5]."""
        rows = []
        for k in range(self.circles):
            z = code.repeat(n, 1)
            theta = torch.arange(n, dtype=z.dtype, device=z.device) * (2 * math.pi / n)
            z[:, 2 * k], z[:, 2 * k + 1] = torch.cos(theta), torch.sin(theta)
            rows.append((f"circle {k}: angle 0..2pi", z))
        for d in range(self.euclidean_dims):
            z = code.repeat(n, 1)
            z[:, 2 * self.circles + d] = torch.linspace(-2.5, 2.5, n, dtype=z.dtype, device=z.device)
            rows.append((f"e{d} (mean {float(code[0, 2 * self.circles + d]):+.2f})", z))
        return rows

    def forward(self, batch: Any, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        x = batch["images"] if isinstance(batch, dict) else batch
        post = self.posterior(x)
        z = projected_random_walk(post["loc"], post["log_t"], self.walk_steps, generator)  # (n, K, 2)
        e = reparameterise(post["mu"], post["logvar"], generator)
        z_in, e_in = z, e
        if isinstance(batch, dict) and "angles" in batch:
            angles = batch["angles"].float()  # (P, M, K)
            p, m = angles.shape[:2]
            # the decoder gets rho(g_m) z_bar (paper section 5, after eq. 11); R^E: the mean over the group
            z_in = rotate(anchored_mean(z.view(p, m, self.circles, 2), angles), angles).reshape(z.shape)
            e_in = e.view(p, m, e.shape[1]).mean(1, keepdim=True).expand(p, m, e.shape[1]).reshape(e.shape)
        logits = self.decode(torch.cat([z_in.flatten(1), e_in], dim=1))
        return {**post, "z": z, "e": e, "logits": logits}


def lsbd_vae_loss(out: dict[str, torch.Tensor], batch: dict[str, torch.Tensor], config: LSBDVAEConfig, step: int,
                  dataset_size: int) -> Loss:
    """Unlabelled batch: -log p(x|z) + KL (group ``unlabelled``). Labelled batch: -log p(x|z) + KL +
    gamma L_LSBD (eq. 11, mean over pairs; group ``labelled``). KL: the Delta-VAE approximation summed
    over circles plus the Gaussian KL over R^E; every term summed per image and averaged over images."""
    recon = reconstruction_nll(out["logits"], batch["images"], config)
    kl = (delta_vae_kl(out["log_t"]).sum(1) + gaussian_kl(out["mu"], out["logvar"]).sum(1)).mean()
    log_t = out["log_t"].mean().detach()
    if "angles" not in batch:
        loss = recon + kl
        return Loss({"unlabelled": loss}, {"loss": loss, "recon": recon, "kl": kl, "log_t": log_t})
    angles = batch["angles"]
    p, m = angles.shape[:2]
    e = out["e"]
    equivariance = equivariance_loss(out["z"].view(p, m, config.circles, 2), angles, e.view(p, m, e.shape[1]))
    loss = recon + kl + config.gamma * equivariance
    return Loss({"labelled": loss}, {"loss": loss, "recon_labelled": recon, "kl_labelled": kl,
                                     "equivariance": equivariance, "log_t": log_t})


def lsbd_vae_groups(model: LSBDVAE,
                    config: LSBDVAEConfig) -> dict[str, tuple[list[nn.Parameter], torch.optim.Optimizer]]:
    """One Adam over every parameter per kind of step (``unlabelled``; ``labelled`` when L > 0)."""
    params = list(model.parameters())

    def adam() -> torch.optim.Optimizer:
        return model_adam(params, config)

    groups = {"unlabelled": (params, adam())}
    if config.labelled_pairs:
        groups["labelled"] = (params, adam())
    return groups


register_family(LSBDVAEConfig, Family(build=LSBDVAE, loss=lsbd_vae_loss, groups=lsbd_vae_groups, batches=LSBDBatches))
