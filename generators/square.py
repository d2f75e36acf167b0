"""Square: a white square on black, shifted vertically and horizontally with periodic boundaries.

Tonnaer et al. 2022, "Quantifying and Learning Linear Symmetry-Based Disentanglement", section
"Datasets" and supplementary: 64 x 64 vertical x horizontal shifts of one pixel = 4,096 images,
group SO(2) x SO(2) acting by cyclic translation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .base import Generator
from .citations import TONNAER_2022
from .errors import FactorbenchError
from .factors import Factor
from .raster import to_uint8

SIZE = 64
STEPS = 64


@dataclass(frozen=True)
class SquareParams:
    side: int = 4  # side of the square in pixels (the paper: 4; the authors' scripts also used 8 and 16)

    def __post_init__(self) -> None:
        if not 1 <= self.side < SIZE:
            raise FactorbenchError(f"square: side must be between 1 and {SIZE - 1} pixels, got {self.side}")


def periodic_coverage(start: np.ndarray, length: float, size: int) -> np.ndarray:
    """Overlap of each pixel [p, p+1) with the interval [start, start+length) on a circle of ``size``.

    ``start`` has shape (M,); returns (M, size). Exact for any real ``start`` (sub-pixel shifts blend).
    """
    a = np.remainder(np.asarray(start, dtype=np.float64), size)[:, None, None] + size * np.array([-1, 0, 1])[None, None, :]
    p = np.arange(size, dtype=np.float64)[None, :, None]
    overlap = np.minimum(p + 1, a + length) - np.maximum(p, a)
    return np.clip(overlap, 0.0, 1.0).sum(axis=-1)


class Square(Generator):
    name: ClassVar[str] = "square"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = ("White square on black, 64 x 64 periodic vertical x horizontal shifts "
                                  "(SO(2)xSO(2), Tonnaer et al. 2022)")
    citation: ClassVar[str] = TONNAER_2022
    Params: ClassVar[type] = SquareParams

    def factors(self) -> tuple[Factor, ...]:
        return (Factor.cyclic_grid("vertical_shift", STEPS, "downward shift, element j = j pixels"),
                Factor.cyclic_grid("horizontal_shift", STEPS, "rightward shift, element j = j pixels"))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (SIZE, SIZE, 3)

    def render(self, factors: np.ndarray) -> np.ndarray:
        """Element (j, k) places the square's top-left corner at row r0 + j, column r0 + k (mod 64),
        r0 = (64 - side) / 2, so (0, 0) is centred. Non-integer shifts give exact area coverage."""
        factors = np.asarray(factors, dtype=np.float64)
        origin = (SIZE - self.params.side) / 2
        shift = factors * (STEPS / (2 * math.pi))
        rows = periodic_coverage(origin + shift[:, 0], self.params.side, SIZE)
        cols = periodic_coverage(origin + shift[:, 1], self.params.side, SIZE)
        grey = to_uint8(rows[:, :, None] * cols[:, None, :])
        return np.repeat(grey[..., None], 3, axis=-1)
