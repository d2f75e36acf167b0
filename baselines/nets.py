"""Encoders and decoders for 64 x 64 images (any number of image channels), and the FactorVAE discriminator.

- ``dlib``: disentanglement_lib's conv encoder (``methods/shared/architectures.py``): conv 32 k4 s2,
  32 k4 s2, 64 k2 s2, 64 k2 s2 (ReLU, TF "same" padding), dense 256; decoder dense 256, dense 4*4*64,
  transposed conv 64, 32, 32, C (k4 s2).
- ``burgess``: Burgess et al. 2018 / Tonnaer et al. 2022 Table 1: the same with kernel 4 in all four
  conv layers.
- ``mlp``: Tonnaer et al. 2022 Table 2: dense 512 + BN, dense 256 + BN; decoder dense 256 + BN,
  dense 512 + BN, dense 64*64*C.

Almudevar & Ortega 2025's appendix C networks, widths fixed by its tables (``channels`` and ``hidden``
unused); convolutions k4 s2 p1, ReLU:

- ``burgess-2018`` (C.1, Burgess et al. 2018): conv 32 x 4, dense 256, 256; decoder dense 256, 256,
  32*4*4, transposed conv 32, 32, 32, C.
- ``chen-mlp`` (C.2, Chen et al. 2018): dense 1200, 1200 (ReLU); decoder dense 1200, 1200, 1200 (tanh),
  64*64*C.
- C.3 (Locatello et al. 2020) is ``burgess`` at its default widths, layer for layer.
- ``locatello-sbd`` (C.4): the ``burgess`` encoder and Watters et al. 2019's spatial broadcast decoder.
- ``montero-small`` (C.5, Montero et al. 2022): conv 32, 32, 64, 64, 128 (to 2 x 2), dense 256; decoder
  dense 256, 128*2*2, transposed conv 64, 64, 32, 32, C.
- ``montero-large`` (C.6): conv 64, 64, 128, 128, 256, dense 256; decoder dense 256, 256*2*2,
  transposed conv 128, 128, 64, 64, C.

The tables' last encoder layer (dense to 2 x latent_dim, reshaped to (latent_dim, 2)) is the models'
latent heads; their decoders' sigmoid belongs to the likelihood here. Encoders return the features
before the latent heads (:func:`feature_width` of them); decoders return logits. The conv widths of
``dlib`` and ``burgess`` are ``channels`` (default 32, 32, 64, 64), their dense width ``hidden``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from factorbench.generators.errors import FactorbenchError

from .config import ModelConfig

__all__ = ["ARCHITECTURE_REGISTRY", "Architecture", "Discriminator", "SpatialBroadcastDecoder", "build_decoder",
           "build_encoder", "check_image_shape", "feature_width", "is_convolutional"]

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


def _dense_stack(widths: tuple[int, ...], activation: Callable[[], nn.Module]) -> list[nn.Module]:
    """Linear layers through ``widths``, each followed by ``activation``."""
    layers: list[nn.Module] = []
    for a, b in zip(widths[:-1], widths[1:]):
        layers += [nn.Linear(a, b), activation()]
    return layers


def _fixed_conv_encoder(channels: tuple[int, ...], dense: tuple[int, ...]) -> Callable[[ModelConfig, int], nn.Module]:
    """Convolutions k4 s2 p1 of widths ``channels`` (64 px halved per layer), flatten, ReLU dense layers."""
    def build(config: ModelConfig, in_channels: int) -> nn.Module:
        layers: list[nn.Module] = []
        width = in_channels
        for out in channels:
            layers += [nn.Conv2d(width, out, 4, stride=2, padding=1), nn.ReLU()]
            width = out
        side = IMAGE_SIZE >> len(channels)
        layers += [nn.Flatten(), *_dense_stack((width * side * side, *dense), nn.ReLU)]
        return nn.Sequential(*layers)
    return build


def _fixed_conv_decoder(dense: tuple[int, ...], channels: tuple[int, ...]) -> Callable[[ModelConfig, int], nn.Module]:
    """ReLU dense layers from the latent through ``dense`` to ``channels[0]`` maps of side 64 / 2^len, then
    transposed convolutions k4 s2 p1 through ``channels[1:]`` to the image channels (logits)."""
    def build(config: ModelConfig, out_channels: int) -> nn.Module:
        side = IMAGE_SIZE >> len(channels)
        layers = _dense_stack((config.latent_dim, *dense, channels[0] * side * side), nn.ReLU)
        layers.append(nn.Unflatten(1, (channels[0], side, side)))
        widths = (*channels, out_channels)
        for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
            layers.append(nn.ConvTranspose2d(a, b, 4, stride=2, padding=1))
            if i < len(widths) - 2:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)
    return build


def _chen_mlp_encoder(config: ModelConfig, in_channels: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), *_dense_stack((IMAGE_SIZE * IMAGE_SIZE * in_channels, 1200, 1200), nn.ReLU))


def _chen_mlp_decoder(config: ModelConfig, out_channels: int) -> nn.Module:
    return nn.Sequential(*_dense_stack((config.latent_dim, 1200, 1200, 1200), nn.Tanh),
                         nn.Linear(1200, IMAGE_SIZE * IMAGE_SIZE * out_channels), _ToImage(out_channels))


class SpatialBroadcastDecoder(nn.Module):
    """Watters et al. 2019's decoder as Almudevar & Ortega's Table 8 gives it: the latent tiled over a
    64 x 64 grid with two coordinate channels (x, y in [-1, 1]) appended, four convolutions k5 s1 p2 of
    64 channels with ReLU, then one k5 convolution to the image channels (logits)."""

    def __init__(self, latent_dim: int, out_channels: int, width: int = 64) -> None:
        super().__init__()
        line = torch.linspace(-1.0, 1.0, IMAGE_SIZE)
        yy, xx = torch.meshgrid(line, line, indexing="ij")
        self.register_buffer("grid", torch.stack((xx, yy))[None], persistent=False)
        layers: list[nn.Module] = []
        size = latent_dim + 2
        for _ in range(4):
            layers += [nn.Conv2d(size, width, 5, padding=2), nn.ReLU()]
            size = width
        layers.append(nn.Conv2d(size, out_channels, 5, padding=2))
        self.net = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        tiled = z[:, :, None, None].expand(-1, -1, IMAGE_SIZE, IMAGE_SIZE)
        grid = self.grid.to(z.dtype).expand(z.shape[0], -1, -1, -1)
        return self.net(torch.cat((tiled, grid), dim=1))


@dataclass(frozen=True)
class Architecture:
    """An encoder/decoder pair: ``encoder(config, image channels)`` gives the features before the latent
    heads (``features(config)`` of them), ``decoder(config, image channels)`` the logits (n, C, 64, 64).
    ``convolutional``: worth running channels-last."""

    encoder: Callable[[ModelConfig, int], nn.Module]
    decoder: Callable[[ModelConfig, int], nn.Module]
    features: Callable[[ModelConfig], int]
    convolutional: bool
    source: str


def _hidden(config: ModelConfig) -> int:
    return config.hidden


#: architecture name -> encoder/decoder pair (names as :data:`factorbench.baselines.config.ARCHITECTURES`)
ARCHITECTURE_REGISTRY: dict[str, Architecture] = {
    "dlib": Architecture(_conv_encoder((4, 4, 2, 2)), _conv_decoder, _hidden, True,
                         "disentanglement_lib (Locatello et al. 2019) architectures.py conv_encoder/deconv_decoder"),
    "burgess": Architecture(_conv_encoder((4, 4, 4, 4)), _conv_decoder, _hidden, True,
                            "Tonnaer et al. 2022 Table 1; layer for layer Almudevar & Ortega 2025 C.3 "
                            "(Locatello et al. 2020) at the default widths"),
    "mlp": Architecture(_mlp_encoder, _mlp_decoder, _hidden, False, "Tonnaer et al. 2022 Table 2"),
    "burgess-2018": Architecture(_fixed_conv_encoder((32, 32, 32, 32), (256, 256)),
                                 _fixed_conv_decoder((256, 256), (32, 32, 32, 32)), lambda c: 256, True,
                                 "Almudevar & Ortega 2025 C.1 (Burgess et al. 2018), Tables 2-3"),
    "chen-mlp": Architecture(_chen_mlp_encoder, _chen_mlp_decoder, lambda c: 1200, False,
                             "Almudevar & Ortega 2025 C.2 (Chen et al. 2018), Tables 4-5"),
    "locatello-sbd": Architecture(_conv_encoder((4, 4, 4, 4)),
                                  lambda config, out: SpatialBroadcastDecoder(config.latent_dim, out), _hidden, True,
                                  "Almudevar & Ortega 2025 C.4: Table 6 encoder (Locatello et al. 2020), Table 8 "
                                  "decoder (Watters et al. 2019)"),
    "montero-small": Architecture(_fixed_conv_encoder((32, 32, 64, 64, 128), (256,)),
                                  _fixed_conv_decoder((256,), (128, 64, 64, 32, 32)), lambda c: 256, True,
                                  "Almudevar & Ortega 2025 C.5 (Montero et al. 2022), Tables 9-10"),
    "montero-large": Architecture(_fixed_conv_encoder((64, 64, 128, 128, 256), (256,)),
                                  _fixed_conv_decoder((256,), (256, 128, 128, 64, 64)), lambda c: 256, True,
                                  "Almudevar & Ortega 2025 C.6 (Montero et al. 2022), Tables 11-12"),
}


def build_encoder(config: ModelConfig, in_channels: int) -> nn.Module:
    return ARCHITECTURE_REGISTRY[config.architecture].encoder(config, in_channels)


def build_decoder(config: ModelConfig, out_channels: int) -> nn.Module:
    return ARCHITECTURE_REGISTRY[config.architecture].decoder(config, out_channels)


def feature_width(config: ModelConfig) -> int:
    """Width of the encoder's output, the input of the latent heads."""
    return ARCHITECTURE_REGISTRY[config.architecture].features(config)


def is_convolutional(config: ModelConfig) -> bool:
    return ARCHITECTURE_REGISTRY[config.architecture].convolutional


class Discriminator(nn.Module):
    """FactorVAE's discriminator (Kim & Mnih 2018, appendix; disentanglement_lib): ``layers`` dense
    layers of ``width`` units with leaky ReLU (slope 0.2), then ``outputs`` logits (FactorVAE: 2, real
    joint and permuted; the AAE: 1)."""

    def __init__(self, latent_dim: int, width: int = 1000, layers: int = 6, outputs: int = 2) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        size = latent_dim
        for _ in range(layers):
            blocks += [nn.Linear(size, width), nn.LeakyReLU(0.2)]
            size = width
        blocks.append(nn.Linear(size, outputs))
        self.net = nn.Sequential(*blocks)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


def count_parameters(module: nn.Module) -> int:
    return sum(math.prod(p.shape) for p in module.parameters())
