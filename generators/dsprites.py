"""dSprites: a white square, ellipse or heart on black, scaled, rotated and moved, on the original's grid.

Matthey, Higgins, Hassabis & Lerchner 2017, "dSprites: Disentanglement testing Sprites dataset"
(deepmind/dsprites-dataset, Apache 2.0), introduced with beta-VAE (Higgins et al. 2017, ICLR). The
original is a download of 737,280 binary 64 x 64 images; this module draws them again from the
published definition, so the file is made locally and checked like every other factorbench dataset.
It is a regeneration, not the original's bytes.

Factors, values and order are the original's (its ``metadata['latents_possible_values']``): shape
(1, 2, 3) = square, ellipse, heart; scale ``linspace(0.5, 1, 6)``; orientation ``linspace(0, 2 pi,
40)`` (both ends, so orientations 0 and 2 pi draw the same image, as in the original); posX and posY
``linspace(0, 1, 32)``. The original's first latent, ``color``, has a single value; a factorbench grid
factor needs at least two, so it is left out, which changes no index (its size is 1). The grid is
enumerated in C order with posY fastest, so sample ``i`` has the factors of the original's image ``i``:
``i = dot(classes, (245760, 40960, 1024, 32, 1))``.

Geometry (pixels at scale 1; ``u`` right and ``v`` up from the sprite's centre), fitted to the 320
real images of the original's README animation (``tests/perf/fit_dsprites.py``; numbers in DATASETS.md):
square of half-side 10 (side 20); ellipse of semi-axes 13.175 x 7.625, long axis horizontal at
orientation 0; heart = two elliptic lobes (semi-axes 5.225 across, 5.85 up) centred at (+-4.775, 3.9)
and the pentagon from the tip (0, -9.3) through the points where the tangents from the tip touch the
lobes, tip down at orientation 0. The shape is scaled by ``scale`` and turned counter-clockwise (as
displayed) by ``orientation`` about its centre, which lies at pixel coordinates ``(16 + 32 posX, 16 +
32 posY)`` (x right, y down, a pixel one unit wide), so posX 0 is the left and posY 0 the top.

Pixel look: binary with hard edges. A pixel is white (255) when the fraction of its 31 x 31 samples
inside the shape is at least ``0.5 + 0.405 scale`` (0.70 at scale 0.5, 0.905 at scale 1), else black
(0). The threshold above one half erodes slanted and curved edges, as the original's are (its rotated
squares have 364 to 372 pixels where the upright ones have 400), and the erosion grows with the scale,
as the original's small sprites show (fitted: 8 of 20,488 square, 20 of 15,664 ellipse and 640 of
40,858 heart pixels of the animation differ). Rendering is exact for this rule and vectorised: the
grid's positions step by 32/31 pixel, so every sprite centre of the grid lies on a lattice of 1/31
pixel; for each (shape, scale, orientation) one map of all pixel positions on that lattice is computed
(the shape as intervals per row of samples, window sums of 31 x 31 samples) and each image is a
strided slice of it. Positions off the grid are put on the nearest lattice point (at most 1/62 pixel
away).

Variants (disentanglement_lib, ``data/ground_truth/dsprites.py``, Apache 2.0), 64 x 64 x 3:
``color``: the sprite in one random colour per image, each channel uniform on [0.5, 1) (stored as
``rint(255 c)``), black background; ``noise``: the sprite white, every background pixel and channel
uniform (a random byte, 0..255, the uint8 form of U(0, 1)). disentanglement_lib draws these from the
sampler's random state; here they are a function of ``variant_seed`` and the image's grid index (from
its factor values, by a counter-based splitmix64 hash), so any batch, shard or resumed range renders
the same bytes. The ``step`` parameter makes a smaller file of the same images (every ``step[k]``-th
value of factor k; the variants' randomness still follows the full grid's index).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np

from .base import Generator, GridStepParams
from .citations import DSPRITES_2017, HIGGINS_2017
from .errors import FactorbenchError
from .factors import Factor

SIZE = 64
SHAPE_NAMES = {1: "square", 2: "ellipse", 3: "heart"}
VARIANTS = ("plain", "color", "noise")

#: Samples per pixel side. The grid's positions step by 32/31 pixel, so every sprite centre of the grid
#: lies on the 1/FINE pixel lattice and each image is a strided slice of one map (see ``pixel_map``).
FINE = 31


@dataclass(frozen=True)
class Geometry:
    """The fitted constants (pixels at scale 1; see the module docstring and ``tests/perf/fit_dsprites.py``)."""

    square_half: float = 10.0
    ellipse_axes: tuple[float, float] = (13.175, 7.625)  # semi-axes along u (at orientation 0) and v
    heart: tuple[float, ...] = (5.225, 5.85, 4.775, 3.9, -9.3)  # lobe semi-axes u, v; lobe centre |u|, v; tip v
    margin: float = 16.0  # pixel coordinate of the centre at position 0; position 1 is at SIZE - margin
    threshold_slope: float = 0.405  # a pixel is white when at least 0.5 + threshold_slope * scale of it is inside

    def reach(self, shape: int) -> float:
        """Largest distance of a point of the shape from its centre, at scale 1."""
        if shape == 1:
            return self.square_half * math.sqrt(2.0)
        if shape == 2:
            return max(self.ellipse_axes)
        rx, ry, d, yc, tip = self.heart
        return max(math.hypot(d, yc) + max(rx, ry), abs(tip))


GEOMETRY = Geometry()


def _heart_vertices(heart: tuple[float, ...]) -> list[tuple[float, float]]:
    """Counter-clockwise vertices of the heart's right quadrilateral: tip, the point where the tangent from
    the tip touches the right lobe (an ellipse), the lobe's centre, the axis at the lobe's height."""
    rx, ry, d, yc, tip = heart
    # in coordinates scaled by the lobe's semi-axes the lobe is the unit circle (tangency is affine-invariant)
    px, py = d / rx, (yc - tip) / ry
    dist = math.hypot(px, py)
    length = math.sqrt(dist * dist - 1.0)
    phi = math.atan2(py, px) - math.asin(1.0 / dist)  # direction of the outer tangent
    return [(0.0, tip), (rx * length * math.cos(phi), tip + ry * length * math.sin(phi)), (d, yc), (0.0, yc)]


def _slab(alpha: np.ndarray | float, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the interval of x with alpha x + beta >= 0 (alpha a scalar)."""
    inf = np.full_like(beta, np.inf)
    if alpha > 0:
        return -beta / alpha, inf
    if alpha < 0:
        return -inf, -beta / alpha
    return np.where(beta >= 0, -inf, inf), np.where(beta >= 0, inf, -inf)


def _disc(cu: tuple[float, float], cv: tuple[float, float], y: np.ndarray, centre: tuple[float, float],
          radius: float) -> tuple[np.ndarray, np.ndarray]:
    """Per row y, the interval of x with (u - centre_u)^2 + (v - centre_v)^2 <= radius^2."""
    b1, b2 = cu[1] * y - centre[0], cv[1] * y - centre[1]
    q = cu[0] * cu[0] + cv[0] * cv[0]
    p = cu[0] * b1 + cv[0] * b2
    disc = p * p - q * (b1 * b1 + b2 * b2 - radius * radius)
    root = np.sqrt(np.maximum(disc, 0.0))
    empty = disc < 0
    return np.where(empty, np.inf, (-p - root) / q), np.where(empty, -np.inf, (-p + root) / q)


def _row_intervals(shape: int, cu: tuple[float, float], cv: tuple[float, float], y: np.ndarray,
                   geometry: Geometry) -> list[tuple[np.ndarray, np.ndarray]]:
    """The shape as a union of intervals of x per row y (x right, y down from the centre, pixels).

    A point maps to the shape's frame by u = cu[0] x + cu[1] y, v = cv[0] x + cv[1] y. Square and
    ellipse are convex (one interval per row); the heart is two elliptic lobes and a convex pentagon.
    """
    if shape == 1:
        h = geometry.square_half
        bounds = [_slab(a * sign, sign * b * y + h) for a, b in (cu, cv) for sign in (1.0, -1.0)]
        return [(np.maximum.reduce([lo for lo, _ in bounds]), np.minimum.reduce([hi for _, hi in bounds]))]
    if shape == 2:
        a, b = geometry.ellipse_axes
        return [_disc((cu[0] / a, cu[1] / a), (cv[0] / b, cv[1] / b), y, (0.0, 0.0), 1.0)]
    rx, ry, d, yc, _ = geometry.heart
    tip, (tx, ty), _, _ = _heart_vertices(geometry.heart)
    pentagon = [tip, (tx, ty), (d, yc), (-d, yc), (-tx, ty)]  # convex, counter-clockwise
    bounds = []
    for (x0, y0), (x1, y1) in zip(pentagon, pentagon[1:] + pentagon[:1]):
        # inside on the left of the edge: (x1 - x0)(v - y0) - (y1 - y0)(u - x0) >= 0, linear in x per row
        alpha = (x1 - x0) * cv[0] - (y1 - y0) * cu[0]
        beta = (x1 - x0) * (cv[1] * y - y0) - (y1 - y0) * (cu[1] * y - x0)
        bounds.append(_slab(alpha, beta))
    poly = (np.maximum.reduce([lo for lo, _ in bounds]), np.minimum.reduce([hi for _, hi in bounds]))
    lobe_u, lobe_v = (cu[0] / rx, cu[1] / rx), (cv[0] / ry, cv[1] / ry)
    return [poly, _disc(lobe_u, lobe_v, y, (d / rx, yc / ry), 1.0), _disc(lobe_u, lobe_v, y, (-d / rx, yc / ry), 1.0)]


@lru_cache(maxsize=16)
def pixel_map(shape: int, scale: float, angle: float, geometry: Geometry = GEOMETRY) -> tuple[np.ndarray, int]:
    """Whether each pixel position relative to the sprite's centre is white, on the 1/FINE lattice.

    Returns ``(pixels, k0)``: ``pixels[a, b]`` is the value of the pixel whose top-left corner lies
    ``(k0 + a) / FINE`` pixels below and ``(k0 + b) / FINE`` pixels right of the centre. The pixel is
    white when at least a fraction ``0.5 + geometry.threshold_slope * scale`` of its FINE x FINE samples
    (the centres of the lattice's cells) lie inside the shape, scaled by ``scale`` and turned
    counter-clockwise by ``angle`` radians. Cached: a batch reuses the maps of its (shape, scale, angle).
    """
    reach = math.ceil(geometry.reach(shape) * scale + 1.0)
    k0 = -reach * FINE
    n = 2 * reach * FINE
    off = (np.arange(n, dtype=np.float64) + (k0 + 0.5)) / FINE  # fine cells' centres, from the sprite's centre
    c, s = math.cos(angle) / scale, math.sin(angle) / scale  # scalar libm: the same bits on every machine
    # image (x right, y down) -> shape frame (u right, v up): rotate by -angle in the y-up frame
    inside = np.zeros((n, n), dtype=bool)
    cells = np.arange(n)
    for lo, hi in _row_intervals(shape, (c, -s), (-s, -c), off, geometry):
        # cell j (centre off[j]) lies in [lo, hi] for first <= j <= last
        first = np.clip(np.ceil(lo * FINE - (k0 + 0.5)), 0, n).astype(np.int64)
        last = np.clip(np.floor(hi * FINE - (k0 + 0.5)), -1, n - 1).astype(np.int64)
        inside |= (cells[None, :] >= first[:, None]) & (cells[None, :] <= last[:, None])
    # samples inside each window of FINE x FINE cells, by shifted adds (cumsum along axis 0 is slow in numpy)
    need = math.ceil((0.5 + geometry.threshold_slope * scale) * FINE * FINE)
    w = n - FINE + 1
    flat = inside.view(np.uint8)
    across = flat[:, :w].copy()
    for k in range(1, FINE):
        across += flat[:, k:k + w]  # at most FINE: fits uint8
    across = across.astype(np.int16)
    box = across[:w].copy()
    for k in range(1, FINE):
        box += across[k:k + w]
    pixels = box >= need
    pixels.flags.writeable = False
    return pixels, k0


def centre_lattice(position: np.ndarray, geometry: Geometry = GEOMETRY) -> np.ndarray:
    """The sprite centre's pixel coordinate, times FINE, rounded: exact for the grid's positions."""
    return np.rint(FINE * (geometry.margin + (SIZE - 2.0 * geometry.margin) * np.asarray(position, np.float64))
                   ).astype(np.int64)


def draw(factors: np.ndarray, geometry: Geometry = GEOMETRY) -> np.ndarray:
    """Binary sprites (M, 64, 64) uint8 (0 / 255) for factor rows (shape, scale, orientation, posX, posY)."""
    factors = np.asarray(factors, dtype=np.float64)
    if factors.ndim != 2 or factors.shape[1] != 5:
        raise FactorbenchError(f"dsprites: factors must have shape (M, 5), got {factors.shape}")
    if not np.all(np.isfinite(factors)):
        raise FactorbenchError("dsprites: factor values must be finite")
    if not np.all(np.isin(factors[:, 0], (1.0, 2.0, 3.0))):
        raise FactorbenchError("dsprites: shape must be 1 (square), 2 (ellipse) or 3 (heart)")
    if not np.all(factors[:, 1] > 0):
        raise FactorbenchError("dsprites: scale must be positive")
    out = np.zeros((len(factors), SIZE, SIZE), dtype=np.uint8)
    if len(factors) == 0:
        return out
    keys = factors[:, :3].copy()
    keys[:, 2] = np.remainder(keys[:, 2], 2.0 * math.pi)  # 2 pi -> 0 exactly: the same image
    kx, ky = centre_lattice(factors[:, 3], geometry), centre_lattice(factors[:, 4], geometry)
    groups, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    for g, (shape, scale, angle) in enumerate(groups):
        pixels, k0 = pixel_map(int(shape), float(scale), float(angle), geometry)
        n = pixels.shape[0]
        rows = np.flatnonzero(inverse == g)
        # pixel p (row or column) reads the map at FINE * p - k - k0; keep those inside the map and the image
        first_x = np.maximum(0, -((k0 + kx[rows]) // -FINE))  # ceil((k + k0) / FINE)
        first_y = np.maximum(0, -((k0 + ky[rows]) // -FINE))
        stop_x = np.minimum(SIZE, (kx[rows] + k0 + n - 1) // FINE + 1)
        stop_y = np.minimum(SIZE, (ky[rows] + k0 + n - 1) // FINE + 1)
        start_x = FINE * first_x - kx[rows] - k0
        start_y = FINE * first_y - ky[rows] - k0
        for i, x0, x1, y0, y1, sx, sy in zip(rows.tolist(), first_x.tolist(), stop_x.tolist(), first_y.tolist(),
                                              stop_y.tolist(), start_x.tolist(), start_y.tolist()):
            if x1 > x0 and y1 > y0:
                out[i, y0:y1, x0:x1] = pixels[sy:sy + FINE * (y1 - y0):FINE, sx:sx + FINE * (x1 - x0):FINE]
    out *= np.uint8(255)
    return out


# -- counter-based randomness for the variants ------------------------------------------------------

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's output function (a bijection of uint64), element-wise; wraps modulo 2**64."""
    z = z ^ (z >> np.uint64(30))
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


def random_words(seed: int, stream: int, index: np.ndarray, count: int) -> np.ndarray:
    """``count`` pseudo-random uint64 words per sample, (M, count): splitmix64's sequence from a state
    that is a hash of (seed, stream, the sample's grid index). The same index always gives the same words."""
    with np.errstate(over="ignore"):
        key = _mix64(np.array([seed], dtype=np.uint64) * _GOLDEN + np.uint64(stream))
        state = _mix64(np.asarray(index, dtype=np.uint64) ^ key)  # (M,)
        steps = np.arange(1, count + 1, dtype=np.uint64) * _GOLDEN
        return _mix64(state[:, None] + steps[None, :])


_COLOR_STREAM, _NOISE_STREAM = 1, 2


@dataclass(frozen=True)
class DSpritesParams(GridStepParams):
    """``variant``: ``plain`` (the original), ``color`` or ``noise`` (disentanglement_lib's variants);
    ``variant_seed``: seed of the random colours or background noise (color and noise only); ``step``: one
    stride per factor, ``()`` = the full grid: a smaller file of the same images, every ``step[k]``-th
    value of factor k (see :func:`factorbench.generators.factors.subgrid_factors`)."""

    variant: str = "plain"
    variant_seed: int = 0

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise FactorbenchError(f"dsprites: variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        if not 0 <= self.variant_seed < 2**63:
            raise FactorbenchError(f"dsprites: variant_seed must be between 0 and 2**63 - 1, got {self.variant_seed}")
        if self.variant == "plain" and self.variant_seed != 0:
            raise FactorbenchError("dsprites: variant_seed applies to variant=color and variant=noise only "
                                   "(the plain images have no randomness); leave it at 0")


FULL_FACTORS = (
    Factor("shape", "categorical", values=(1.0, 2.0, 3.0),
           description="1 square, 2 ellipse, 3 heart (the original's values)"),
    Factor("scale", "continuous", values=tuple(np.linspace(0.5, 1.0, 6)),
           description="size relative to the largest (square side 20 px at 1)"),
    Factor("orientation", "continuous", values=tuple(np.linspace(0.0, 2.0 * math.pi, 40)),
           description="radians, counter-clockwise; the original's grid holds both 0 and 2 pi (the same image), "
                       "so it is not a factorbench cyclic factor (whose grid lies in [0, 2 pi) and whose classes "
                       "would merge the two)"),
    Factor("posX", "continuous", values=tuple(np.linspace(0.0, 1.0, 32)),
           description="horizontal position: centre at pixel x = 16 + 32 posX (0 left)"),
    Factor("posY", "continuous", values=tuple(np.linspace(0.0, 1.0, 32)),
           description="vertical position: centre at pixel y = 16 + 32 posY (0 top)"),
)
GRID_SHAPE = tuple(len(f.values) for f in FULL_FACTORS)  # (3, 6, 40, 32, 32): the original's, less color


class DSprites(Generator):
    name: ClassVar[str] = "dsprites"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = ("dSprites (Matthey et al. 2017) regenerated: square, ellipse, heart x 6 scales x 40 "
                                  "orientations x 32 x 32 positions, 64 x 64, the original's grid and order")
    citation: ClassVar[str] = DSPRITES_2017 + "\n\n" + HIGGINS_2017
    Params: ClassVar[type] = DSpritesParams

    def factors(self) -> tuple[Factor, ...]:
        return self.stepped(FULL_FACTORS)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (SIZE, SIZE, 1 if self.params.variant == "plain" else 3)

    @staticmethod
    def grid_index(factors: np.ndarray) -> np.ndarray:
        """The original's image index of each factor row (nearest value of every factor in the full grid,
        also for a ``step`` sub-grid, so that its images are those of the full file)."""
        factors = np.asarray(factors, dtype=np.float64)
        classes = [f.classes_of(factors[:, j]) for j, f in enumerate(FULL_FACTORS)]
        return np.ravel_multi_index(classes, GRID_SHAPE).astype(np.int64)

    def render(self, factors: np.ndarray) -> np.ndarray:
        factors = np.asarray(factors, dtype=np.float64)
        sprites = draw(factors)
        variant = self.params.variant
        if variant == "plain":
            return sprites[..., None]
        index = self.grid_index(factors)
        if variant == "color":
            words = random_words(self.params.variant_seed, _COLOR_STREAM, index, 3)
            colour = 0.5 + 0.5 * ((words >> np.uint64(11)).astype(np.float64) * 2.0**-53)  # U[0.5, 1) per channel
            levels = np.rint(255.0 * colour).astype(np.uint8)  # (M, 3)
            ones = sprites >> 7  # 0 / 1
            out = np.empty((len(factors), SIZE, SIZE, 3), dtype=np.uint8)
            for channel in range(3):
                np.multiply(ones, levels[:, channel, None, None], out=out[..., channel])
            return out
        words = random_words(self.params.variant_seed, _NOISE_STREAM, index, SIZE * SIZE * 3 // 8)
        noise = words.astype("<u8", copy=False).view(np.uint8).reshape(len(factors), SIZE, SIZE, 3)
        noise[sprites != 0] = 255
        return noise
