"""Teapot: the Newell teapot under five independent factors (Eastwood & Williams 2018, section 5.1).

Factors, i.i.d. uniform: azimuth [0, 2 pi), elevation [0, pi/2], red, green, blue [0, 1]; 200,000
images of 64 x 64 by default. Scene after the original renderer (OpenDR, see DATASETS.md): white
background; the teapot in the base colour (red, green, blue); one directional light straight down the
vertical axis (intensity 1) plus ambient 0.5, Lambertian; camera on a sphere of radius 0.4 around the
teapot's centre, vertical field of view 48 degrees; elevation 0 is a side view and pi/2 a top view.
Shading does not depend on azimuth. The original mesh is lost: the Newell teapot is centred on its
bounding box and scaled so that its farthest vertex is 0.15 from the centre, which keeps it whole in
the frame from every view (the view cone's inscribed sphere has radius 0.4 sin 24 deg = 0.163).

Standard splits: train / validation / test = the first 80 / 10 / 10 % in generation order, with the
zero-shot gap (red - green > margin, red - blue > margin, elevation > threshold; margin 0.15 and
threshold pi/4 by default) removed from all three and kept as ``zeroshot``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np

from .citations import EASTWOOD_2018
from .errors import FactorbenchError
from .factors import Factor
from .meshes import Mesh, newell_teapot
from .presets import teapot_gap
from .render import Camera, Light, RenderSettings, get_backend, orbit_views
from .rendered import RenderedGenerator
from .splits import OrderedSplit, SplitSpec

RADIUS = 0.15
CAMERA_DISTANCE = 0.4


@dataclass(frozen=True)
class TeapotParams:
    image_size: int = 64
    samples: int = 4  # antialiasing samples per pixel: 1, 4 or 16
    background: tuple[float, ...] = (1.0, 1.0, 1.0)  # sRGB, in [0, 1]
    fov_y_degrees: float = 48.0
    subdivisions: int = 0  # tessellation of each Bezier patch (n x n cells, 2 triangles each); 0: auto_subdivisions
    gap_margin: float = 0.15  # zero-shot gap: red - green > margin and red - blue > margin ...
    gap_elevation: float = math.pi / 4  # ... and elevation > this (large gap: 0.7 and pi/2.5)

    def __post_init__(self) -> None:
        if not 8 <= self.image_size <= 512:
            raise FactorbenchError(f"teapot: image_size must be between 8 and 512, got {self.image_size}")
        if not 0 <= self.subdivisions <= 32:
            raise FactorbenchError(f"teapot: subdivisions must be between 1 and 32 (or 0: chosen from the image "
                                   f"size), got {self.subdivisions}")
        RenderSettings(background=self.background, samples=self.samples)  # validates both
        Camera(self.image_size, self.fov_y_degrees)


def auto_subdivisions(image_size: int) -> int:
    """Cells per patch side for ``image_size`` pixels: ceil(8 sqrt(image_size / 64)), at most 32.

    The tessellation's distance to the Bezier surface falls as 1/n^2 while a pixel shrinks as 1/size, so
    n ~ sqrt(size) keeps the error in pixels constant. At 64 x 64, n = 8 (4,032 triangles) renders within
    0.26/255 (mean absolute difference, 4 samples) of a 24 x 24 tessellation (n = 6: 0.46/255)."""
    return min(32, math.ceil(8 * math.sqrt(image_size / 64)))


@lru_cache(maxsize=4)
def _mesh(subdivisions: int) -> Mesh:
    return newell_teapot(subdivisions).centred_and_scaled(RADIUS)


class Teapot(RenderedGenerator):
    name: ClassVar[str] = "teapot"
    version: ClassVar[str] = "1.1.0"
    description: ClassVar[str] = ("Newell teapot, i.i.d. azimuth, elevation and RGB colour "
                                  "(Eastwood & Williams 2018)")
    citation: ClassVar[str] = EASTWOOD_2018
    Params: ClassVar[type] = TeapotParams
    default_n: ClassVar[int] = 200_000

    def factors(self) -> tuple[Factor, ...]:
        return (Factor("azimuth", "cyclic", low=0.0, high=2 * math.pi, period=2 * math.pi,
                       description="camera azimuth, counter-clockwise about the vertical axis"),
                Factor("elevation", "continuous", low=0.0, high=math.pi / 2,
                       description="camera elevation: 0 side view, pi/2 top view"),
                Factor("red", "continuous", low=0.0, high=1.0, description="base colour (linear)"),
                Factor("green", "continuous", low=0.0, high=1.0, description="base colour (linear)"),
                Factor("blue", "continuous", low=0.0, high=1.0, description="base colour (linear)"))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (self.params.image_size, self.params.image_size, 3)

    def default_splits(self, seed: int) -> tuple[SplitSpec, ...]:
        elevation = repr(self.params.gap_elevation)
        return (teapot_gap(self.params.gap_margin, elevation, OrderedSplit()),)

    def render(self, factors: np.ndarray) -> np.ndarray:
        factors = np.asarray(factors, dtype=np.float64)
        p = self.params
        model = np.eye(4)[None].repeat(len(factors), axis=0)
        view = orbit_views(factors[:, 0], factors[:, 1], CAMERA_DISTANCE)
        mesh = _mesh(p.subdivisions or auto_subdivisions(p.image_size))
        return get_backend(self.backend).render(
            mesh, model, view, factors[:, 2:5], Camera(p.image_size, p.fov_y_degrees),
            Light((0.0, 0.0, 1.0), 1.0, 0.5), RenderSettings(tuple(p.background), p.samples))
