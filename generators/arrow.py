"""Arrow: a coloured arrow rotated in the image plane, with a cyclic hue.

Tonnaer et al. 2022, section "Datasets": 64 in-plane rotations (counter-clockwise, about the image
centre) x 64 hues = 4,096 images, group SO(2) x SO(2). The original base image is not public; this
arrow (shaft plus head) is drawn here. The geometry is rotated, not the pixels, and rasterised with
s x s supersampling, so the group action is exact up to rasterisation. Every arrow pixel has hue j/64
(absolute), full saturation, and value equal to its coverage.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np

from .base import Generator
from .citations import TONNAER_2022
from .errors import FactorbenchError
from .factors import Factor
from .raster import coverage, hue_to_rgb, to_uint8

SIZE = 64
STEPS = 64

# The arrow points along +u at rotation 0, centred on the image centre (units: pixels).
SHAFT_U = (-20.0, 6.0)
SHAFT_HALF_WIDTH = 3.5
HEAD_U = (6.0, 23.0)
HEAD_HALF_WIDTH = 11.0


def inside_arrow(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """True inside the arrow: a rectangle (shaft) and an isosceles triangle (head)."""
    shaft = (u >= SHAFT_U[0]) & (u <= SHAFT_U[1]) & (np.abs(v) <= SHAFT_HALF_WIDTH)
    head = (u >= HEAD_U[0]) & (np.abs(v) <= HEAD_HALF_WIDTH * (HEAD_U[1] - u) / (HEAD_U[1] - HEAD_U[0]))
    return shaft | head


@dataclass(frozen=True)
class ArrowParams:
    supersampling: int = 8  # s x s samples per pixel for anti-aliasing

    def __post_init__(self) -> None:
        if not 1 <= self.supersampling <= 32:
            raise FactorbenchError(f"arrow: supersampling must be between 1 and 32, got {self.supersampling}")


@lru_cache(maxsize=256)
def _arrow_coverage(angle: float, supersampling: int) -> np.ndarray:
    return coverage(inside_arrow, SIZE, supersampling, angle)


class Arrow(Generator):
    name: ClassVar[str] = "arrow"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = ("Coloured arrow, 64 cyclic hues x 64 in-plane rotations "
                                  "(SO(2)xSO(2), Tonnaer et al. 2022)")
    citation: ClassVar[str] = TONNAER_2022
    Params: ClassVar[type] = ArrowParams

    def factors(self) -> tuple[Factor, ...]:
        return (Factor.cyclic_grid("hue", STEPS, "hue = angle / (2 pi), saturation = value = 1"),
                Factor.cyclic_grid("rotation", STEPS, "counter-clockwise in-plane rotation about the centre"))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (SIZE, SIZE, 3)

    def render(self, factors: np.ndarray) -> np.ndarray:
        factors = np.asarray(factors, dtype=np.float64)
        rgb = hue_to_rgb(factors[:, 0] / (2 * np.pi))  # (M, 3)
        masks = np.stack([_arrow_coverage(float(a), self.params.supersampling) for a in factors[:, 1]])
        return to_uint8(masks[..., None] * rgb[:, None, None, :])
