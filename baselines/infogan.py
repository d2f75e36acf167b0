"""InfoGAN with the WGAN-GP objective, as Eastwood & Williams 2018 trained it on the teapot.

- InfoGAN (Chen et al. 2016, eq. 5 and section 5): min_{G,Q} max_D V(D, G) - lambda L_I(G, Q), with
  L_I = E_{c ~ P(c), x ~ G(z, c)}[log Q(c | x)] + H(c) the variational lower bound of I(c; G(z, c))
  (their eq. 4); Q shares every layer of D but its head. Continuous codes: Q(c | x) a factored Gaussian,
  here of fixed unit variance (Chen et al. section 6: "simply treating it as a factored Gaussian";
  E&W's ``fix_std=True``), so -log Q(c | x) = sum_i (c_i - mu_i(x))^2 / 2 + (1/2) log 2 pi.
- WGAN-GP (Gulrajani et al. 2017, eq. 3 and Algorithm 1): critic loss E[D(x~)] - E[D(x)] + lambda_gp
  E[(||grad_x^ D(x^)||_2 - 1)^2], x^ = eps x + (1 - eps) x~, eps ~ U[0, 1] per image; generator loss
  -E[D(G(z, c))]; n_critic critic steps per generator step; Adam lr 1e-4, betas (0, 0.9); lambda_gp 10.
- The information term enters both losses, weighted by ``info_weight`` (E&W's ``mi_coeff`` 6): the
  critic step minimises W + GP + lambda NLL over D and Q (the critic's optimiser holds the Q head, as in
  E&W's ``RegularisedGAN`` and Chen et al.'s code, where Q is part of the discriminator network), the
  generator step -E[D(G)] + lambda NLL over G.

Facts from the authors' code (cianeastwood/qedr ``models/infogan/main.py``, ``models/infogan/model.py``,
``lib/models/distributions.py``): 10 codes c ~ U(-1, 1), no unregularised noise (``noise_variables`` 0),
``critic_iters`` 5, ``gp_coeff`` 10, ``mi_coeff`` 6, batch 64, Adam 1e-4 betas (0, 0.9) for both
networks, images scaled to [-1, 1] and a tanh generator output, 50 epochs; the representation of an
image is Q's mean. Their networks are a ResNet (64 to 512 channels, 3 x 3 convolutions, layer norm in
the critic, batch norm in the generator); here the ``burgess`` or ``dlib`` conv nets of :mod:`nets`
(see BASELINES.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from factorbench.generators.errors import FactorbenchError

from .config import Family, ModelConfig, register_family
from .data import TrainingData
from .nets import build_decoder, build_encoder, feature_width
from .optim import model_adam
from .terms import Loss, _wide

__all__ = ["InfoGAN", "InfoGANBatches", "InfoGANConfig", "PHASES", "code_nll", "critic_loss", "generator_loss",
           "gradient_penalty", "infogan_loss"]

#: the two kinds of step; a batch's ``"host_phase"`` holds the index into this tuple (a numpy array kept on
#: the host, so reading it never waits for the GPU)
PHASES = ("critic", "generator")
#: architectures whose encoder can be a WGAN-GP critic (the ``mlp`` encoder has batch norm: Gulrajani et
#: al. section 4 leave it out of the critic, since the penalty is per input and batch norm mixes inputs)
CRITIC_ARCHITECTURES = ("burgess", "dlib", "burgess-2018", "chen-mlp", "locatello-sbd", "montero-small",
                        "montero-large")


@dataclass(frozen=True)
class InfoGANConfig(ModelConfig):
    """InfoGAN with WGAN-GP (Chen et al. 2016; Gulrajani et al. 2017), Eastwood & Williams 2018's settings.

    - ``latent_dim`` 10: regularised codes c ~ U(-1, 1) (E&W ``latent_codes`` 10, ``Uniform`` prior).
    - ``noise_dim`` 0: unregularised noise z ~ U(-1, 1) (E&W ``noise_variables`` 0; Chen et al. add noise).
    - ``info_weight`` 6: lambda of the information term (E&W ``mi_coeff``; Chen et al. use 1 for
      discrete codes and smaller values for continuous ones).
    - ``gp_weight`` 10: lambda of the gradient penalty (Gulrajani et al. Algorithm 1; E&W ``gp_coeff``).
    - ``n_critic`` 5: critic steps per generator step (Gulrajani et al. Algorithm 1; E&W ``critic_iters``).
      Every trainer step is one of them: steps are counted over both kinds.
    - Adam ``lr`` 1e-4, ``adam_beta1`` 0, ``adam_beta2`` 0.9 for both networks (Gulrajani et al.; E&W).
    - ``steps`` 150,000 = 25,000 generator iterations x (5 + 1) steps: E&W's 50 epochs of 500 iterations
      (``n_train // batch_size // critic_iters`` with their n_train = 0.8 x 200,000 = 160,000, counted
      before the zero-shot gap is removed; cianeastwood/qedr ``models/infogan/main.py``).
    - ``architecture`` burgess: critic body = the encoder, generator = the decoder (input ``noise_dim +
      latent_dim``), output tanh. ``reconstruction`` and ``recon_sigma`` are unused.
    """

    name: ClassVar[str] = "infogan"

    adam_beta1: float = 0.0
    adam_beta2: float = 0.9
    steps: int = 150_000
    noise_dim: int = 0
    info_weight: float = 6.0
    gp_weight: float = 10.0
    n_critic: int = 5

    def _check(self) -> None:
        super()._check()
        if self.architecture not in CRITIC_ARCHITECTURES:
            raise FactorbenchError(f"infogan: architecture {self.architecture!r} has batch norm in its encoder, which "
                                   "a gradient-penalty critic must not have (Gulrajani et al. 2017, section 4); choose "
                                   f"one of {', '.join(CRITIC_ARCHITECTURES)}")
        self._require(">= 0", "noise_dim", "info_weight", "gp_weight")
        self._require(">= 1", "n_critic", meaning="critic steps per generator step")


# --------------------------------------------------------------------------- loss terms


def gradient_penalty(critic: Callable[[torch.Tensor], torch.Tensor], real: torch.Tensor, fake: torch.Tensor,
                     eps: torch.Tensor) -> torch.Tensor:
    """E[(||grad_x^ critic(x^)||_2 - 1)^2], x^ = eps real + (1 - eps) fake (Gulrajani et al. 2017, eq. 3),
    the mean over the batch; ``eps`` (n, 1, ..., 1). The gradient keeps its graph (``create_graph``), so
    the penalty can be back-propagated into the critic; the interpolates and the norm are float32 (the
    critic itself may run under autocast; float64 inputs stay float64)."""
    eps, real, fake = _wide(eps), _wide(real), _wide(fake)
    x_hat = (eps * real + (1 - eps) * fake).detach().requires_grad_(True)
    (grad,) = torch.autograd.grad(_wide(critic(x_hat)).sum(), x_hat, create_graph=True)
    norm = _wide(grad).flatten(1).pow(2).sum(1).sqrt()
    return (norm - 1).pow(2).mean()


def code_nll(c: torch.Tensor, q_mean: torch.Tensor) -> torch.Tensor:
    """-log Q(c | x) of codes c (n, D) under unit-variance Gaussians centred at Q's predictions: sum_i
    (c_i - mu_i)^2 / 2 + (D/2) log 2 pi, the batch mean (the negative of InfoGAN's L_I without H(c);
    Chen et al. 2016, eq. 4; E&W's ``Gaussian.logli`` with ``fix_std``)."""
    return (0.5 * (_wide(c) - _wide(q_mean)).pow(2) + 0.5 * math.log(2 * math.pi)).sum(1).mean()


def critic_loss(d_real: torch.Tensor, d_fake: torch.Tensor, penalty: torch.Tensor, info: torch.Tensor,
                gp_weight: float, info_weight: float) -> torch.Tensor:
    """E[D(x~)] - E[D(x)] + gp_weight GP + info_weight NLL (Gulrajani et al. eq. 3 plus InfoGAN's term)."""
    return _wide(d_fake).mean() - _wide(d_real).mean() + gp_weight * penalty + info_weight * info


def generator_loss(d_fake: torch.Tensor, info: torch.Tensor, info_weight: float) -> torch.Tensor:
    """-E[D(G(z, c))] + info_weight NLL (Gulrajani et al. Algorithm 1 plus InfoGAN's term)."""
    return -_wide(d_fake).mean() + info_weight * info


def infogan_loss(out: dict[str, torch.Tensor], batch: dict[str, torch.Tensor], config: InfoGANConfig, step: int,
                 dataset_size: int) -> Loss:
    """Critic step: group ``critic`` (critic body, critic head, Q head). Generator step: group
    ``generator``. Logs: ``wasserstein`` = E[D(x)] - E[D(x~)] (the critic's estimate of the Wasserstein
    distance), ``gradient_penalty``, ``info_nll`` (critic steps) and ``generator_info_nll``."""
    info = code_nll(out["c"], out["q_fake"])
    if PHASES[int(batch["host_phase"][0])] == "critic":
        loss = critic_loss(out["d_real"], out["d_fake"], out["penalty"], info, config.gp_weight, config.info_weight)
        wasserstein = (out["d_real"].float().mean() - out["d_fake"].float().mean()).detach()
        return Loss({"critic": loss}, {"loss": loss, "wasserstein": wasserstein, "gradient_penalty": out["penalty"],
                                       "info_nll": info})
    loss = generator_loss(out["d_fake"], info, config.info_weight)
    return Loss({"generator": loss}, {"generator_loss": loss, "generator_info_nll": info})


# --------------------------------------------------------------------------- networks


class InfoGAN(nn.Module):
    """Generator G(z, c) (the decoder, tanh output, images in [-1, 1]); critic D and Q on one body (the
    encoder) with a 1-unit critic head (no sigmoid) and a ``latent_dim``-unit head for Q's mean.

    ``encode(x)`` of images in [0, 1] gives Q's mean (n, latent_dim), the representation E&W evaluate;
    ``decode(c)`` gives logits whose sigmoid is G(0, c) mapped to [0, 1] (2 a for the pre-tanh output a:
    (tanh a + 1) / 2 = sigmoid 2a), so the picture of a run shows G(Q(x)) as the reconstruction."""
    #: how :meth:`traversals` sweeps the code (the caption of a run's picture)
    traversal_caption = "each code swept over [-1, 1] from the first input's code"

    def __init__(self, config: InfoGANConfig, image_shape: tuple[int, int, int]) -> None:
        super().__init__()
        channels = image_shape[2]
        self.latent_dim, self.noise_dim, self.batch_size = config.latent_dim, config.noise_dim, config.batch_size
        self.generator = build_decoder(dataclasses.replace(config, latent_dim=config.noise_dim + config.latent_dim),
                                       channels)
        self.body = build_encoder(config, channels)
        self.critic_head = nn.Linear(feature_width(config), 1)
        self.q_head = nn.Linear(feature_width(config), config.latent_dim)

    def generator_parameters(self) -> list[nn.Parameter]:
        return list(self.generator.parameters())

    def critic_parameters(self) -> list[nn.Parameter]:
        return [*self.body.parameters(), *self.critic_head.parameters(), *self.q_head.parameters()]

    def critic(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(D(x) (n,), Q's mean (n, latent_dim)) of images in [-1, 1]."""
        h = self.body(x)
        return self.critic_head(h).squeeze(1), self.q_head(h)

    def critic_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)[0]

    def generate_logits(self, c: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
        """The generator's pre-tanh output of codes c (n, latent_dim) and noise z (n, noise_dim; None: 0)."""
        if z is None:
            z = c.new_zeros((len(c), self.noise_dim))
        return self.generator(torch.cat([z, c], dim=1))

    def generate(self, c: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
        """Images G(z, c) in [-1, 1], (n, C, 64, 64)."""
        return torch.tanh(self.generate_logits(c, z))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Q's mean (n, latent_dim) of images x (n, C, 64, 64) in [0, 1]."""
        return self.critic(x * 2 - 1)[1].float()

    def decode(self, c: torch.Tensor) -> torch.Tensor:
        """Logits whose sigmoid is G(0, c) in [0, 1] (n, C, 64, 64)."""
        return 2 * self.generate_logits(c)

    def traversals(self, code: torch.Tensor, n: int) -> list[tuple[str, torch.Tensor]]:
        """For the picture of a run: each code swept over [-1, 1] (the prior's support) from ``code`` (1, D)."""
        rows = []
        for d in range(self.latent_dim):
            c = code.repeat(n, 1)
            c[:, d] = torch.linspace(-1.0, 1.0, n, dtype=c.dtype, device=c.device)
            rows.append((f"c{d} (Q {float(code[0, d]):+.2f}) -1..1", c))
        return rows

    def _uniform(self, n: int, d: int, like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        return torch.rand((n, d), generator=generator, device=like.device) * 2 - 1

    def forward(self, batch: dict[str, torch.Tensor],
                generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """Critic step (``batch["images"]`` real images in [0, 1]): D of the real and generated images, Q of
        the generated ones, the gradient penalty; the generator runs without a graph. Generator step (no
        real images): D and Q of ``batch_size`` generated images. Codes, noise and eps are drawn from
        ``generator`` in that order."""
        phase = PHASES[int(batch["host_phase"][0])]
        x = batch["images"]
        n = len(x) if phase == "critic" else self.batch_size
        c = self._uniform(n, self.latent_dim, x, generator)
        z = self._uniform(n, self.noise_dim, x, generator)
        if phase == "generator":
            d_fake, q_fake = self.critic(self.generate(c, z))
            return {"c": c, "d_fake": d_fake.float(), "q_fake": q_fake.float()}
        real = x * 2 - 1
        with torch.no_grad():
            fake = self.generate(c, z).to(real.dtype)
        eps = torch.rand((n, 1, 1, 1), generator=generator, device=x.device)
        scores, q = self.critic(torch.cat([real, fake]))
        penalty = gradient_penalty(self.critic_value, real, fake, eps)
        return {"c": c, "d_real": scores[:n].float(), "d_fake": scores[n:].float(), "q_fake": q[n:].float(),
                "penalty": penalty}


def build_infogan(config: InfoGANConfig, image_shape: tuple[int, int, int]) -> InfoGAN:
    return InfoGAN(config, image_shape)


def infogan_groups(model: InfoGAN,
                   config: InfoGANConfig) -> dict[str, tuple[list[nn.Parameter], torch.optim.Optimizer]]:
    """``critic`` (body, critic head, Q head) and ``generator``, one Adam each with the config's settings."""
    def adam(params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return model_adam(params, config)

    critic, gen = model.critic_parameters(), model.generator_parameters()
    return {"critic": (critic, adam(critic)), "generator": (gen, adam(gen))}


class InfoGANBatches:
    """The step inputs: a pure function of (config.seed, step). Steps cycle through ``n_critic`` critic steps
    then one generator step (E&W's loop, Gulrajani et al. Algorithm 1). The k-th critic step gets batch k of
    ``TrainingData.batch`` (epochs counted in critic batches) and ``"host_phase"`` 0; a generator step gets no
    images (G draws its own batch) and ``"host_phase"`` 1."""

    def __init__(self, config: InfoGANConfig, data: TrainingData) -> None:
        self.data = data
        self.n_critic, self.batch_size, self.seed = config.n_critic, config.batch_size, config.seed
        self._empty = np.zeros((0, *data.image_shape), dtype=np.uint8)

    def phase(self, step: int) -> tuple[str, int]:
        """("critic", index of its real batch) or ("generator", index of the generator step) of ``step``."""
        cycle, r = divmod(step, self.n_critic + 1)
        return ("critic", cycle * self.n_critic + r) if r < self.n_critic else ("generator", cycle)

    def __call__(self, step: int) -> dict[str, np.ndarray]:
        kind, index = self.phase(step)
        if kind == "generator":
            return {"images": self._empty, "host_phase": np.array([1], dtype=np.int64)}
        return {"images": self.data.batch(index, self.batch_size, self.seed), "host_phase": np.array([0], dtype=np.int64)}


register_family(InfoGANConfig, Family(build=build_infogan, loss=infogan_loss, groups=infogan_groups,
                                      batches=InfoGANBatches))
