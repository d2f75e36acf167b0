"""Quessard, Barrett & Clements 2020, "Learning Disentangled Representations and Group Structure of
Dynamical Environments" (NeurIPS 2020): an autoencoder whose latent lies on the unit sphere S^(n-1) and
whose actions are learned rotations of it, trained on trajectories (x_0, a_1, x_1, ..., a_T, x_T).

- Encoder (``burgess`` conv net, one dense head of ``latent_dim`` units, as Tonnaer et al. 2022 appendix:
  "a single dense layer with 4 units") -> z_0 = h / ||h|| on the unit sphere.
- One learned matrix per action, an element of SO(n): the product of the n(n-1)/2 Givens rotations
  R_ij(theta_ij), i < j, in the order (1,2), (1,3), ..., (1,n), (2,3), ..., (n-1,n) (:func:`givens_matrix`).
- Latent rollout: z_t = rho(a_t) z_(t-1); every observation x_t of a trajectory is reconstructed from z_t
  (x_0 from the encoding itself). Only x_0 is encoded.
- Loss: the Bernoulli reconstruction (sigmoid output, binary cross-entropy) *averaged* over pixels,
  channels and the T+1 observations of each trajectory, then over trajectories, plus ``lam`` times the
  entanglement regulariser (:func:`entanglement`) averaged over actions. The pixel average is the authors'
  (``F.binary_cross_entropy``'s default reduction): lambda 0.01 (Tonnaer et al. Table 3) is on their scale.
- Actions of a grid dataset: +1 and -1 grid step along each cyclic factor (2K actions for K cyclic factors,
  action 2k the +1 step of cyclic factor k, 2k+1 its -1 step), each with its own matrix, as the authors'
  environments (Flatland: up, down, left, right; teapot: +/- rotation about each axis, +/- colour).
  Non-cyclic factors (the object of the object sets) stay fixed along a trajectory.

Facts from the authors' code (IndustAI/learning-group-structure: ``fig2_flatland.ipynb``, ``fig4_teapot.ipynb``,
``src/representations.py``): Givens order and sign, the regulariser, trajectories of 5 actions in batches
of 16, Adam with lr 1e-2 on the angles, angles initialised uniformly in (-pi/n, pi/n) (Flatland notebook).
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
from .terms import Loss, project_to_sphere
from .vae import reconstruction_nll

__all__ = ["GridSteps", "QuessardBatches", "QuessardConfig", "QuessardModel", "Trajectories", "draw_trajectories",
           "entanglement", "givens_matrix", "grid_steps", "planes", "quessard_groups", "quessard_loss"]

#: tags of the random streams drawn from the seed (the trajectory pool, the order of its passes)
_POOL, _ORDER = 0x7AA7EC, 0x0DE12


@dataclass(frozen=True)
class QuessardConfig(ModelConfig):
    """Quessard et al. 2020 as Tonnaer et al. 2022 trained it on square, arrow and airplane.

    - ``latent_dim`` 4: the sphere S^3 in R^4 (Tonnaer: latent size 4 on the torus sets; one dense head).
    - ``cyclic_factors`` 2: the number K of cyclic factors of the dataset; the model has 2K actions
      (checked against the data before training). 1 on the object x rotation sets.
    - ``lam`` 0.01: weight of the entanglement regulariser (Tonnaer et al. Table 3; the Flatland notebook).
    - ``trajectories`` 3,000: the fixed pool of trajectories drawn once from the seed (Tonnaer Table 3).
    - ``trajectory_length`` 5: actions per trajectory, 6 observations (the authors' ``ep_steps = 5``).
    - ``batch_size`` 16: trajectories per step (the authors' ``batch_eps = 16``).
    - ``lr`` 1e-3 for encoder and decoder (teapot notebook, the authors' image setting), ``angle_lr`` 1e-2
      for the angles (both notebooks); Adam betas (0.9, 0.999), eps 1e-8 (PyTorch's defaults, theirs).
    - ``steps`` 10,000 (teapot notebook's ``n_sgd_steps``), ``reconstruction`` bernoulli (sigmoid output,
      binary cross-entropy), ``architecture`` burgess.
    """

    name: ClassVar[str] = "quessard"

    latent_dim: int = 4
    lr: float = 1e-3
    batch_size: int = 16
    steps: int = 10_000
    cyclic_factors: int = 2
    lam: float = 0.01
    trajectories: int = 3000
    trajectory_length: int = 5
    angle_lr: float = 1e-2

    @property
    def actions(self) -> int:
        return 2 * self.cyclic_factors

    def _check(self) -> None:
        super()._check()
        if self.latent_dim < 2:
            raise FactorbenchError(f"quessard: a rotation needs at least 2 latent dimensions, got latent_dim "
                                   f"{self.latent_dim}")
        self._require(">= 1", "cyclic_factors", meaning="the cyclic factors the actions step")
        self._require(">= 0", "lam")
        self._require(">= 1", "trajectories", "trajectory_length")
        self._require("positive", "angle_lr")


# --------------------------------------------------------------------------- rotations and regulariser


def planes(n: int) -> list[tuple[int, int]]:
    """The n(n-1)/2 planes (i, j), i < j, in the authors' order: (0,1), (0,2), ..., (0,n-1), (1,2), ..."""
    return [(i, j) for i in range(n - 1) for j in range(i + 1, n)]


def givens_matrix(angles: torch.Tensor, n: int) -> torch.Tensor:
    """prod_(i<j) R_ij(theta_ij) (Quessard et al. 2020: g(theta) = prod_(i=1)^(n-1) prod_(j=i+1)^n R_ij(theta_ij)),
    factors in :func:`planes` order, for angles (..., n(n-1)/2) -> matrices (..., n, n).

    R_ij(theta) is the identity except R[i,i] = R[j,j] = cos theta, R[i,j] = sin theta, R[j,i] = -sin theta
    (the authors' ``Representation.get_matrix``). Right-multiplying by R_ij mixes columns i and j only:
    col_i <- cos col_i - sin col_j, col_j <- sin col_i + cos col_j."""
    if angles.shape[-1] != n * (n - 1) // 2:
        raise ValueError(f"SO({n}) has {n * (n - 1) // 2} Givens angles, got {angles.shape[-1]}")
    eye = torch.eye(n, dtype=angles.dtype, device=angles.device).expand(*angles.shape[:-1], n, n)
    cols = list(eye.unbind(-1))
    cos, sin = torch.cos(angles), torch.sin(angles)
    for k, (i, j) in enumerate(planes(n)):
        c, s = cos[..., k, None], sin[..., k, None]
        cols[i], cols[j] = c * cols[i] - s * cols[j], s * cols[i] + c * cols[j]
    return torch.stack(cols, dim=-1)


def entanglement(angles: torch.Tensor) -> torch.Tensor:
    """The entanglement regulariser, averaged over actions: for each action's angles theta (m,),
    sum_k theta_k^2 - max_k theta_k^2, i.e. the squared angles of every plane but the one of largest
    |theta| (Quessard et al. 2020, the disentanglement regularisation; the authors'
    ``calc_entanglement``, averaged over the actions in ``fig2_flatland.ipynb``). Angles (A, m) -> scalar.
    0 exactly when each action rotates in at most one plane."""
    sq = angles.square()
    return (sq.sum(-1) - sq.amax(-1)).mean()


# --------------------------------------------------------------------------- trajectories


@dataclass(frozen=True, eq=False)
class GridSteps:
    """``next[r, a]``: the row reached from row ``r`` by action ``a`` (2k: +1 grid step of cyclic factor k,
    2k+1: -1 step, wrapping around); ``cyclic``: the columns of the cyclic factors."""

    next: np.ndarray
    cyclic: tuple[int, ...]


def grid_steps(classes: np.ndarray | None, factors: tuple[Any, ...], cyclic_factors: int, *,
               what: str = "the training data") -> GridSteps:
    """The action table of a grid: every row's neighbours one grid step along each cyclic factor.

    Refuses data without grid classes, a number of cyclic factors other than ``cyclic_factors``, cyclic
    grids not evenly spaced over one period, repeated grid points, and grids with holes (a neighbour
    missing: a split that leaves out grid points)."""
    names = ", ".join(f"{f.name} ({f.kind})" for f in factors)
    if classes is None:
        raise FactorbenchError(f"quessard trains on trajectories of grid steps, and {what} has no grid (its factors "
                               "are drawn i.i.d.); use a grid dataset with cyclic factors (square, arrow, airplane, "
                               "objects, modelnet40, coil100)")
    cyclic = tuple(j for j, f in enumerate(factors) if f.kind == "cyclic")
    if not cyclic:
        raise FactorbenchError(f"quessard's actions step the cyclic factors, and {what} has none among {names}")
    if len(cyclic) != cyclic_factors:
        raise FactorbenchError(f"quessard has 2 x {cyclic_factors} actions (+/- one step per cyclic factor), and "
                               f"{what} has {len(cyclic)} cyclic factor(s) among {names}; set "
                               f"cyclic_factors={len(cyclic)}")
    for j in cyclic:
        f = factors[j]
        n = f.num_values
        even = f.values is not None and np.allclose(np.diff(np.r_[f.values, f.values[0] + f.period]), f.period / n)
        if not even:
            raise FactorbenchError(f"factor {f.name!r} of {what} is cyclic but its grid is not evenly spaced over "
                                   "its period, so a grid step is not one group element; quessard cannot train on it")
    sizes = np.array([f.num_values or int(classes[:, j].max()) + 1 for j, f in enumerate(factors)], dtype=np.int64)
    keys = np.ravel_multi_index(tuple(classes.T), tuple(sizes))
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    if len(sorted_keys) > 1 and np.any(sorted_keys[1:] == sorted_keys[:-1]):
        raise FactorbenchError(f"{what} holds some grid point more than once; quessard needs one image per grid point")
    table = np.empty((len(classes), 2 * len(cyclic)), dtype=np.int64)
    for k, j in enumerate(cyclic):
        for a, delta in ((2 * k, 1), (2 * k + 1, -1)):
            moved = classes.copy()
            moved[:, j] = np.mod(moved[:, j] + delta, sizes[j])
            target = np.ravel_multi_index(tuple(moved.T), tuple(sizes))
            pos = np.searchsorted(sorted_keys, target)
            found = (pos < len(sorted_keys)) & (sorted_keys[np.minimum(pos, len(sorted_keys) - 1)] == target)
            if not found.all():
                raise FactorbenchError(f"{what} lacks {int((~found).sum())} grid neighbours along factor "
                                       f"{factors[j].name!r} (a split with holes): a trajectory could step out of it; "
                                       "train on a split holding whole grids, e.g. --split all")
            table[:, a] = order[pos]
    return GridSteps(table, cyclic)


@dataclass(frozen=True, eq=False)
class Trajectories:
    """P trajectories of T actions: ``rows`` (P, T+1) int64 indices into the split (observation t of
    trajectory p), ``actions`` (P, T) int64 (action t takes observation t to observation t+1)."""

    rows: np.ndarray
    actions: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)


def draw_trajectories(steps: GridSteps, count: int, length: int, seed: int) -> Trajectories:
    """``count`` trajectories of ``length`` actions drawn once with ``seed``: a start row uniform over the
    split, then actions uniform over the 2K actions (as the authors' ``action_space.sample()``), each
    moving to the row one grid step away."""
    rng = np.random.default_rng([seed, _POOL])
    n_rows, n_actions = steps.next.shape
    rows = np.empty((count, length + 1), dtype=np.int64)
    rows[:, 0] = rng.integers(0, n_rows, size=count)
    actions = rng.integers(0, n_actions, size=(count, length)).astype(np.int64)
    for t in range(length):
        rows[:, t + 1] = steps.next[rows[:, t], actions[:, t]]
    return Trajectories(rows, actions)


class QuessardBatches:
    """The step inputs of ``quessard`` on ``data``, a pure function of (config.seed, step): batch s holds
    trajectories ``s*B .. s*B + B - 1`` of an endless sequence of seeded passes over the fixed pool,
    ``{"images": (B (T+1), H, W, C)`` uint8 trajectory by trajectory, ``"actions": (B, T)`` int64``}``."""

    def __init__(self, config: QuessardConfig, data: TrainingData) -> None:
        self.data = data
        what = f"split {data.split!r} of {data.generator_name}"
        self.steps = grid_steps(data.factor_classes, data.factor_specs, config.cyclic_factors, what=what)
        self.pool = draw_trajectories(self.steps, config.trajectories, config.trajectory_length, config.seed)
        self.batch_size = config.batch_size
        self._order = EpochOrder(len(self.pool), (config.seed, _ORDER))

    def __call__(self, step: int) -> dict[str, np.ndarray]:
        chosen = self._order.batch(step, self.batch_size)
        return {"images": self.data.images_at(self.pool.rows[chosen].reshape(-1)),
                "actions": self.pool.actions[chosen]}


# --------------------------------------------------------------------------- model and loss


class QuessardModel(nn.Module):
    """Encoder -> dense ``latent_dim`` -> unit sphere; learned Givens angles (actions, n(n-1)/2); decoder
    logits. ``encode(x)`` gives the normalised latent (n, latent_dim), the representation the paper
    studies (and D_LSBD reads)."""
    #: how :meth:`traversals` sweeps the code (the caption of a run's picture)
    traversal_caption = "each action applied 0, 1, 2, ... times to the first input's code"

    def __init__(self, config: QuessardConfig, image_shape: tuple[int, int, int]) -> None:
        super().__init__()
        channels = image_shape[2]
        n = self.latent_dim = config.latent_dim
        self.encoder = build_encoder(config, channels)
        self.head = nn.Linear(feature_width(config), n)
        self.decoder = build_decoder(config, channels)
        # uniform in (-pi/n, pi/n), as the authors' Flatland notebook
        self.angles = nn.Parameter((2.0 * torch.rand(config.actions, n * (n - 1) // 2) - 1.0) * math.pi / n)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Unit vectors (n, latent_dim), float32."""
        return project_to_sphere(self.head(self.encoder(x)).float())

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Decoder logits (n, C, 64, 64) of latents (n, latent_dim)."""
        return self.decoder(z)

    def matrices(self) -> torch.Tensor:
        """The actions' rotations (actions, n, n), float32."""
        with torch.autocast(self.angles.device.type, enabled=False):
            return givens_matrix(self.angles.float(), self.latent_dim)

    def rollout(self, z0: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """z_t = rho(a_t) z_(t-1) from z0 (B, n) along actions (B, T) -> (B, T+1, n), float32."""
        with torch.autocast(z0.device.type, enabled=False):
            mats = self.matrices()[actions.long()]  # (B, T, n, n)
            zs = [z0.float()]
            for t in range(actions.shape[1]):
                zs.append((mats[:, t] @ zs[-1].unsqueeze(-1)).squeeze(-1))
            return torch.stack(zs, dim=1)

    def traversals(self, code: torch.Tensor, n: int) -> list[tuple[str, torch.Tensor]]:
        """For the picture of a run: each action applied 0, 1, ..., n-1 times to ``code`` (1, latent_dim)."""
        mats = self.matrices().to(code.dtype)
        rows = []
        for a in range(mats.shape[0]):
            zs = [code[0]]
            for _ in range(n - 1):
                zs.append(mats[a] @ zs[-1])
            sign = "+" if a % 2 == 0 else "-"
            rows.append((f"action {a} ({sign}1 step, cyclic factor {a // 2}) x 0..{n - 1}", torch.stack(zs)))
        return rows

    def forward(self, batch: Any, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        x, actions = batch["images"], batch["actions"]
        steps = actions.shape[1] + 1
        z = self.rollout(self.encode(x[::steps]), actions)  # only x_0 of each trajectory is encoded
        logits = self.decode(z.reshape(-1, self.latent_dim))
        return {"z": z, "logits": logits, "angles": self.angles}


def quessard_loss(out: dict[str, torch.Tensor], batch: dict[str, torch.Tensor], config: QuessardConfig, step: int,
                  dataset_size: int) -> Loss:
    """mean over the B (T+1) observations of -log p(x_t | z_t) / (C H W)  +  lam * entanglement(angles)
    (Quessard et al. 2020: reconstruction of each observation from the rotated latent, plus the
    disentanglement regularisation; the pixel mean as the authors' ``F.binary_cross_entropy``)."""
    x = batch["images"]
    recon = reconstruction_nll(out["logits"], x, config) / x[0].numel()
    reg = entanglement(out["angles"].float())
    loss = recon + config.lam * reg
    return Loss({"model": loss}, {"loss": loss, "recon": recon, "entanglement": reg})


def quessard_groups(model: QuessardModel,
                    config: QuessardConfig) -> dict[str, tuple[list[nn.Parameter], torch.optim.Optimizer]]:
    """One Adam (group ``model``): the networks at ``lr``, the angles at ``angle_lr`` (the authors' separate
    optimisers with the same Adam settings step together, as one Adam with two parameter groups)."""
    nets = [p for name, p in model.named_parameters() if name != "angles"]
    opt = model_adam([{"params": nets, "lr": config.lr}, {"params": [model.angles], "lr": config.angle_lr}], config)
    return {"model": ([*nets, model.angles], opt)}


register_family(QuessardConfig, Family(build=QuessardModel, loss=quessard_loss, groups=quessard_groups,
                                       batches=QuessardBatches))
