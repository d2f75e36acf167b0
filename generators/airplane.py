"""Airplane: a rendered airplane turned about its vertical axis, with a cyclic hue (Tonnaer et al. 2022).

64 rotations (out-of-plane: about the vertical axis, counter-clockwise seen from above) x 64 hues =
4,096 images, group SO(2) x SO(2). The original rendered one ModelNet40 airplane with Blender, settings
not public; here the classic PLY sample airplane (shipped, see DATASETS.md) is centred on its bounding
box, scaled to unit radius, and seen from a camera at a fixed elevation (default 20 degrees) and
distance 2.6, lit from straight above (intensity 0.5, ambient 0.5: no channel clips, so shading keeps
the hue, and the light does not change as the airplane turns). Colour: hue j/64 at full saturation and
value (linear RGB).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np

from .citations import TONNAER_2022
from .factors import Factor
from .meshes import Mesh, airplane
from .raster import hue_to_rgb
from .render import Camera, Light, RenderSettings, check_orbit_camera, get_backend, orbit_views, rotation_z
from .rendered import RenderedGenerator

STEPS = 64
CAMERA_AZIMUTH = 0.0  # the camera sits on +x; at rotation 0 the fuselage (along y) is seen side-on
#: light straight above; intensity + ambient = 1, so no channel clips and every pixel keeps the hue j/64
LIGHT = Light((0.0, 0.0, 1.0), 0.5, 0.5)


@dataclass(frozen=True)
class AirplaneParams:
    elevation_degrees: float = 20.0
    camera_distance: float = 2.6
    image_size: int = 64
    samples: int = 4
    background: tuple[float, ...] = (1.0, 1.0, 1.0)

    def __post_init__(self) -> None:
        check_orbit_camera("airplane", self.elevation_degrees, self.camera_distance, Camera().fov_y_degrees)
        RenderSettings(background=self.background, samples=self.samples)
        Camera(self.image_size)


@lru_cache(maxsize=1)
def _mesh() -> Mesh:
    return airplane().centred_and_scaled(1.0)


class Airplane(RenderedGenerator):
    name: ClassVar[str] = "airplane"
    version: ClassVar[str] = "1.1.0"
    description: ClassVar[str] = ("Rendered airplane, 64 cyclic hues x 64 rotations about the vertical axis "
                                  "(SO(2)xSO(2), Tonnaer et al. 2022)")
    citation: ClassVar[str] = TONNAER_2022
    Params: ClassVar[type] = AirplaneParams

    def factors(self) -> tuple[Factor, ...]:
        return (Factor.cyclic_grid("hue", STEPS, "hue = angle / (2 pi), saturation = value = 1"),
                Factor.cyclic_grid("rotation", STEPS, "counter-clockwise about the vertical axis, seen from above"))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (self.params.image_size, self.params.image_size, 3)

    def render(self, factors: np.ndarray) -> np.ndarray:
        factors = np.asarray(factors, dtype=np.float64)
        p = self.params
        m = len(factors)
        view = orbit_views(np.full(m, CAMERA_AZIMUTH), np.full(m, math.radians(p.elevation_degrees)),
                           p.camera_distance)
        colours = hue_to_rgb(factors[:, 0] / (2 * math.pi))
        return get_backend(self.backend).render(
            _mesh(), rotation_z(factors[:, 1]), view, colours, Camera(p.image_size),
            LIGHT, RenderSettings(tuple(p.background), p.samples))
