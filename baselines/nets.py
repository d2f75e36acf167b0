"""Encoders and decoders for 64 x 64 images (any number of image channels), and the FactorVAE discriminator.

- ``dlib``: disentanglement_lib's conv encoder (``methods/shared/architectures.py``): conv 32 k4 s2,
  32 k4 s2, 64 k2 s2, 64 k2 s2 (ReLU, TF "same" padding), dense 256; decoder dense 256, dense 4*4*64,
  transposed conv 64, 32, 32, C (k4 s2).
- ``burgess``: Burgess et al. 2018 / Tonnaer et al. 2022 Table 1: the same with kernel 4 in all four
  conv layers.
- ``mlp``: Tonnaer et al. 2022 Table 2: dense 512 + BN, dense 256 + BN; decoder dense 256 + BN,
  dense 512 + BN, dense 64*64*C.

Encoders return the features before the latent heads (``hidden`` units); decoders return logits
(the sigmoid belongs to the likelihood). The conv widths are ``channels`` (default 32, 32, 64, 64).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from factorbench.generators.errors import FactorbenchError

from .config import ModelConfig

__all__ = ["ENCODERS", "DECODERS", "Discriminator", "build_decoder", "build_encoder", "check_image_shape"]

IMAGE_SIZE = 64


def check_image_shape(config: ModelConfig, image_shape: tuple[int, int, int]) -> None:
    """Every architecture here is built for 64 x 64 images (H, W, C)."""
    if len(image_shape) != 3 or tuple(image_shape[:2]) != (IMAGE_SIZE, IMAGE_SIZE) or image_shape[2] < 1:
        raise FactorbenchError(f"the {config.architecture} architecture takes 64 x 64 images; this dataset's "
                               f"images are {' x '.join(map(str, image_shape))} (generate it with image_size=64)")


def _conv_encoder(kernels: tuple[int, ...]) -> Callable[[ModelConfig, int], nn.Module]:
    def build(config: ModelConfig, in_channels: int) -> nn.Module:
        layers: list[nn.Module] = []
        width = in_channels
        for out, k in zip(config.channels, kernels):
            # TF "same" padding for stride 2 on an even input: (k - 2) / 2 on each side
            layers += [nn.Conv2d(width, out, k, stride=2, padding=(k - 2) // 2), nn.ReLU()]
            width = out
        layers += [nn.Flatten(), nn.Linear(width * 4 * 4, config.hidden), nn.ReLU()]
        return nn.Sequential(*layers)
    return build


class _Unflatten(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.channels = channels

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h.view(h.shape[0], self.channels, 4, 4)


def _conv_decoder(config: ModelConfig, out_channels: int) -> nn.Module:
    c1, c2, c3, c4 = config.channels
    return nn.Sequential(
        nn.Linear(config.latent_dim, config.hidden), nn.ReLU(),
        nn.Linear(config.hidden, c4 * 4 * 4), nn.ReLU(), _Unflatten(c4),
        nn.ConvTranspose2d(c4, c3, 4, stride=2, padding=1), nn.ReLU(),
        nn.ConvTranspose2d(c3, c2, 4, stride=2, padding=1), nn.ReLU(),
        nn.ConvTranspose2d(c2, c1, 4, stride=2, padding=1), nn.ReLU(),
        nn.ConvTranspose2d(c1, out_channels, 4, stride=2, padding=1),
    )


def _mlp_encoder(config: ModelConfig, in_channels: int) -> nn.Module:
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(IMAGE_SIZE * IMAGE_SIZE * in_channels, 512), nn.ReLU(), nn.BatchNorm1d(512),
        nn.Linear(512, config.hidden), nn.ReLU(), nn.BatchNorm1d(config.hidden),
    )


class _ToImage(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.channels = channels

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h.view(h.shape[0], self.channels, IMAGE_SIZE, IMAGE_SIZE)


def _mlp_decoder(config: ModelConfig, out_channels: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(config.latent_dim, config.hidden), nn.ReLU(), nn.BatchNorm1d(config.hidden),
        nn.Linear(config.hidden, 512), nn.ReLU(), nn.BatchNorm1d(512),
        nn.Linear(512, IMAGE_SIZE * IMAGE_SIZE * out_channels), _ToImage(out_channels),
    )


#: architecture -> encoder builder (config, image channels) -> module giving ``hidden`` features
ENCODERS: dict[str, Callable[[ModelConfig, int], nn.Module]] = {
    "dlib": _conv_encoder((4, 4, 2, 2)),
    "burgess": _conv_encoder((4, 4, 4, 4)),
    "mlp": _mlp_encoder,
}
#: architecture -> decoder builder (config, image channels) -> module giving logits (n, C, 64, 64)
DECODERS: dict[str, Callable[[ModelConfig, int], nn.Module]] = {
    "dlib": _conv_decoder,
    "burgess": _conv_decoder,
    "mlp": _mlp_decoder,
}


def build_encoder(config: ModelConfig, in_channels: int) -> nn.Module:
    return ENCODERS[config.architecture](config, in_channels)


def build_decoder(config: ModelConfig, out_channels: int) -> nn.Module:
    return DECODERS[config.architecture](config, out_channels)


class Discriminator(nn.Module):
    """FactorVAE's discriminator (Kim & Mnih 2018, appendix; disentanglement_lib): ``layers`` dense
    layers of ``width`` units with leaky ReLU (slope 0.2), then 2 logits (real joint, permuted)."""

    def __init__(self, latent_dim: int, width: int = 1000, layers: int = 6) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        size = latent_dim
        for _ in range(layers):
            blocks += [nn.Linear(size, width), nn.LeakyReLU(0.2)]
            size = width
        blocks.append(nn.Linear(size, 2))
        self.net = nn.Sequential(*blocks)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


def count_parameters(module: nn.Module) -> int:
    return sum(math.prod(p.shape) for p in module.parameters())
