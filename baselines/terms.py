"""Pure loss terms (tensors in, tensors out; no state). Computed in float32 whatever the autocast (float64
inputs stay float64).

Reduction convention (as disentanglement_lib): a per-image term is **summed over pixels and channels
(reconstruction) or latent dimensions (KL), then averaged over the batch**. beta, gamma and lambda
values are therefore comparable with disentanglement_lib's and the original papers', not with suites
that average over pixels (disent's default ``mean`` reduction scales the reconstruction by 1/(64*64*C),
so its beta values are about 1/12,288 of these on RGB images).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

__all__ = ["Loss", "anchored_mean", "bernoulli_nll", "capacity", "covariance", "delta_vae_kl", "dip_penalty",
           "equivariance_loss", "gaussian_kl", "gaussian_log_density", "gaussian_nll", "limit_log_t", "permute_dims",
           "project_to_sphere", "projected_random_walk", "reparameterise", "rotate", "sphere_volume",
           "total_correlation"]

_LOG_2PI = math.log(2.0 * math.pi)


def _wide(t: torch.Tensor) -> torch.Tensor:
    """float32, or float64 if already so (autocast outputs are bfloat16 or float16)."""
    return t if t.dtype == torch.float64 else t.float()


@dataclass
class Loss:
    """One scalar per optimiser group (``"model"``, and e.g. ``"discriminator"``), plus scalars to log."""

    groups: dict[str, torch.Tensor]
    logs: dict[str, torch.Tensor] = field(default_factory=dict)


def bernoulli_nll(logits: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """-log p(x | z) for a Bernoulli decoder: sigmoid cross-entropy on logits, summed per image, mean over
    the batch (disentanglement_lib ``bernoulli_loss``; x in [0, 1])."""
    per_pixel = F.binary_cross_entropy_with_logits(_wide(logits), _wide(x), reduction="none")
    return per_pixel.flatten(1).sum(1).mean()


def gaussian_nll(logits: torch.Tensor, x: torch.Tensor, sigma: float) -> torch.Tensor:
    """-log p(x | z) up to its constant for a Gaussian decoder with mean sigmoid(logits) and fixed std
    ``sigma``: sum of (x - mean)^2 / (2 sigma^2) per image, mean over the batch (sigma = 1/sqrt 2 gives
    disentanglement_lib's ``l2_loss``)."""
    diff = torch.sigmoid(_wide(logits)) - _wide(x)
    return (diff.square().flatten(1).sum(1) / (2.0 * sigma * sigma)).mean()


def gaussian_kl(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mu, exp(logvar)) || N(0, 1)) per sample and dimension, (B, D) (Kingma & Welling 2014, app. B):
    0.5 (mu^2 + exp(logvar) - logvar - 1)."""
    mu, logvar = _wide(mu), _wide(logvar)
    return 0.5 * (mu.square() + logvar.exp() - logvar - 1.0)


def reparameterise(mu: torch.Tensor, logvar: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """z = mu + exp(logvar / 2) * eps, eps ~ N(0, 1) drawn from ``generator`` (float32)."""
    mu, logvar = _wide(mu), _wide(logvar)
    eps = torch.randn(mu.shape, generator=generator, device=mu.device, dtype=mu.dtype)
    return mu + torch.exp(0.5 * logvar) * eps


def gaussian_log_density(z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """log N(z; mu, exp(logvar)), elementwise (broadcasting)."""
    return -0.5 * (_LOG_2PI + logvar + (z - mu).square() * torch.exp(-logvar))


def total_correlation(z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor, dataset_size: int) -> torch.Tensor:
    """Minibatch-weighted sampling estimate of TC(z) = KL(q(z) || prod_j q(z_j)) (Chen et al. 2018, sec. 3.1
    and app. C.1): with a batch of M samples from a dataset of N,

        log q(z_i)   ~ logsumexp_k log q(z_i | x_k) - log(N M)
        log q(z_ij)  ~ logsumexp_k log q(z_ij | x_k) - log(N M)

    averaged over the batch. Log-sum-exp throughout (no products of densities). disentanglement_lib's
    ``total_correlation`` leaves out the log(N M) terms, which shifts the estimate by (D - 1) log(N M): a
    constant, so the gradients and the trained model are the same; only the logged ``tc`` differs."""
    z, mu, logvar = _wide(z), _wide(mu), _wide(logvar)
    batch = z.shape[0]
    log_norm = math.log(dataset_size * batch)
    pairwise = gaussian_log_density(z[:, None, :], mu[None, :, :], logvar[None, :, :])  # (M, M, D): i, k, j
    log_qz = torch.logsumexp(pairwise.sum(2), dim=1) - log_norm
    log_prod_qzj = (torch.logsumexp(pairwise, dim=1) - log_norm).sum(1)
    return (log_qz - log_prod_qzj).mean()


def permute_dims(z: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Each column of z permuted independently across the batch: samples of prod_j q(z_j) (Kim & Mnih 2018,
    Algorithm 1)."""
    keys = torch.rand(z.shape, generator=generator, device=z.device)
    return torch.gather(z, 0, torch.argsort(keys, dim=0))


def covariance(x: torch.Tensor) -> torch.Tensor:
    """Biased (1/n) covariance of the rows of x, (D, D): E[x x^T] - E[x] E[x]^T."""
    x = _wide(x)
    centred = x - x.mean(0, keepdim=True)
    return centred.T @ centred / x.shape[0]


def dip_penalty(cov: torch.Tensor, lambda_od: float, lambda_d: float) -> torch.Tensor:
    """DIP-VAE's moment penalty (Kumar et al. 2018, eq. 6): lambda_od sum_{i != j} cov_ij^2 +
    lambda_d sum_i (cov_ii - 1)^2."""
    diag = torch.diagonal(cov)
    off = cov - torch.diag_embed(diag)
    return lambda_od * off.square().sum() + lambda_d * (diag - 1.0).square().sum()


def capacity(step: int, c_max: float, c_steps: int) -> float:
    """Burgess et al. 2018's KL capacity at ``step``: linear from 0 to ``c_max`` over ``c_steps`` steps,
    then constant (disentanglement_lib ``AnnealedVAE``)."""
    return min(c_max, c_max * step / c_steps)


# --------------------------------------------------------------------------- hyperspherical latents (Delta-VAE)


def sphere_volume(d: int) -> float:
    """Surface area of the unit d-sphere S^d in R^(d+1): 2 pi^((d+1)/2) / Gamma((d+1)/2) (S^1: 2 pi, S^2: 4 pi)."""
    return 2.0 * math.pi ** ((d + 1) / 2.0) / math.gamma((d + 1) / 2.0)


def project_to_sphere(z: torch.Tensor) -> torch.Tensor:
    """Pi(z) = z / ||z|| over the last axis (Perez Rey et al. 2020; Tonnaer et al. 2022, section 5)."""
    return F.normalize(_wide(z), dim=-1, eps=1e-12)


def limit_log_t(raw: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """The authors' smooth clamp of the log diffusion time: (high - low)/2 tanh(raw) + (high + low)/2, in
    (low, high) (lsbd-vae ``latentspace.py``, ``HyperSphericalLatentSpace.limit_log_t``)."""
    return 0.5 * (high - low) * torch.tanh(_wide(raw)) + 0.5 * (high + low)


def projected_random_walk(loc: torch.Tensor, log_t: torch.Tensor, steps: int,
                          generator: torch.Generator | None) -> torch.Tensor:
    """A sample of the Delta-VAE posterior on the sphere: Brownian motion for time t from ``loc`` (unit
    vectors, (..., D+1)), approximated by ``steps`` Gaussian steps of variance t / steps in the embedding
    space, each projected back onto the sphere (Perez Rey et al. 2020, the reparameterisation by a random
    walk; lsbd-vae ``HyperSphericalLatentSpace.sampling``: 10 steps). ``log_t`` (...) broadcasts over the
    last axis.
    Differentiable in ``loc`` and ``log_t`` (reparameterisation)."""
    z = _wide(loc)
    scale = torch.exp(0.5 * _wide(log_t))[..., None] / math.sqrt(steps)
    for _ in range(steps):
        eps = torch.randn(z.shape, generator=generator, device=z.device, dtype=z.dtype)
        z = project_to_sphere(z + scale * eps)
    return z


def delta_vae_kl(log_t: torch.Tensor, d: int = 1) -> torch.Tensor:
    """The Delta-VAE's closed-form approximation of KL(q(z|x) || uniform on S^d) for the heat kernel of
    time t, elementwise (Perez Rey et al. 2020, the small-t approximation; lsbd-vae
    ``HyperSphericalLatentSpace.kl_loss``):

        KL ~ -(d/2) log t - (d/2) log(2 pi) - d/2 + log vol(S^d) + d (d - 1) t / 4,

    the negative entropy of a d-dimensional Gaussian of variance t plus the log-volume of the sphere, with
    a scalar-curvature correction (d(d-1); 0 on the circle). On the circle it is exact while the Gaussian
    has no mass beyond +-pi (every t the clamp allows); for larger t it falls short of the true KL by a
    few times that mass, is 0 where the Gaussian's entropy reaches the uniform's (t = 2 pi / e) and
    negative beyond, where the true KL tends to 0."""
    log_t = _wide(log_t)
    return (-0.5 * d * log_t - 0.5 * d * _LOG_2PI - 0.5 * d + math.log(sphere_volume(d))
            + d * (d - 1) * torch.exp(log_t) / 4.0)


def rotate(z: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rotate 2-vectors z (..., 2) by ``angle`` (...) radians counter-clockwise: rho(g) z for g in SO(2)."""
    c, s = torch.cos(angle), torch.sin(angle)
    x, y = z[..., 0], z[..., 1]
    return torch.stack((c * x - s * y, s * x + c * y), dim=-1)


def anchored_mean(z: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """z_bar = Pi((1/M) sum_m rho(g_m^-1) z_m) for transformation-labelled groups: z (P, M, K, 2) codes on K
    circles of the M members of P groups, ``angles`` (P, M, K) the rotation g_m taking the anchor to member m
    (Tonnaer et al. 2022, eq. 11). Returns (P, 1, K, 2)."""
    anchored = rotate(_wide(z), -_wide(angles))
    return project_to_sphere(anchored.mean(dim=1, keepdim=True))


def equivariance_loss(z: torch.Tensor, angles: torch.Tensor, euclidean: torch.Tensor | None = None) -> torch.Tensor:
    """L_LSBD (Tonnaer et al. 2022, eq. 11), averaged over P transformation-labelled groups of M members:

        (1/M) sum_m || rho(g_m^-1) z_m - Pi((1/M) sum_m' rho(g_m'^-1) z_m') ||^2

    with z (P, M, K, 2) on a product of K circles (the squared norm is the sum over circles of the chordal
    distance 2 (1 - cos)); ``euclidean`` (P, M, E), if given, is the R^E part of the latent, on which
    the group acts trivially and Pi is the identity: it adds || e_m - mean_m' e_m' ||^2."""
    z, angles = _wide(z), _wide(angles)
    anchored = rotate(z, -angles)
    per_member = (anchored - anchored_mean(z, angles)).square().sum(dim=(-1, -2))  # (P, M)
    if euclidean is not None and euclidean.shape[-1] > 0:
        e = _wide(euclidean)
        per_member = per_member + (e - e.mean(dim=1, keepdim=True)).square().sum(-1)
    return per_member.mean()
