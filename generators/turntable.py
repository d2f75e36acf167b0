"""Base class of the "object x rotation" datasets: K objects, each turned about the vertical axis.

Factors: ``object`` (categorical grid, values 0..K-1, the slowest) and ``rotation`` (cyclic grid of
``steps`` angles ``2*pi*j/steps``, counter-clockwise seen from above). The full grid is enumerated by
the base class in C order, so all rotations of object 0 come first, then object 1, and so on.

Each object's mesh is centred on its bounding box and scaled to unit radius
(:meth:`Mesh.centred_and_scaled`), turned by ``rotation_z(angle)`` and seen as the airplane is: a camera
on +x at a fixed elevation (default 20 degrees) and distance 2.6 with a 48-degree vertical field of view,
one light straight above (intensity 0.5, ambient 0.5), white background, 4 samples per pixel. Every
object has the same light grey base colour (linear 0.8, 0.8, 0.8): objects differ by shape only, and the
shading does not change as an object turns (the light is on the rotation axis).

Subclasses provide :meth:`TurntableGenerator.num_objects` and :meth:`TurntableGenerator.mesh` (objects
are loaded one at a time, as rendering needs them).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .airplane import CAMERA_AZIMUTH, LIGHT
from .errors import FactorbenchError
from .factors import Factor
from .meshes import Mesh
from .render import Camera, RenderSettings, check_orbit_camera, get_backend, orbit_views, rotation_z
from .rendered import RenderedGenerator

# the camera (on +x) and the light (straight above, intensity + ambient = 1) are the airplane's
FOV_Y_DEGREES = 48.0
#: the base colour of every object (linear RGB): a light grey
BASE_COLOUR = (0.8, 0.8, 0.8)
#: normalised meshes kept per generator (objects are rendered in order, so a batch touches only a few)
MESH_CACHE_SIZE = 128


@dataclass(frozen=True)
class TurntableParams:
    """Image and view parameters shared by the turntable datasets."""

    steps: int = 64
    elevation_degrees: float = 20.0
    camera_distance: float = 2.6
    image_size: int = 64
    samples: int = 4
    background: tuple[float, ...] = (1.0, 1.0, 1.0)

    def __post_init__(self) -> None:
        if self.steps < 2:
            raise FactorbenchError(f"steps must be at least 2 rotations, got {self.steps}")
        check_orbit_camera("turntable", self.elevation_degrees, self.camera_distance, FOV_Y_DEGREES)
        RenderSettings(background=tuple(self.background), samples=self.samples)
        Camera(self.image_size, FOV_Y_DEGREES)


class TurntableGenerator(RenderedGenerator, register=False):
    """K objects x ``steps`` rotations about the vertical axis; subclasses provide the meshes."""

    Params: ClassVar[type] = TurntableParams
    base_colour: ClassVar[tuple[float, float, float]] = BASE_COLOUR
    mesh_cache_size: ClassVar[int] = MESH_CACHE_SIZE
    #: shade both sides of every face (:meth:`Mesh.two_sided`, back faces culled): for meshes made by
    #: others, whose open sheets may face away from the camera (ModelNet40)
    two_sided: ClassVar[bool] = False

    def __init__(self, params: Any = None, *, backend: str = "auto", **overrides: Any) -> None:
        super().__init__(params, backend=backend, **overrides)
        self._normalised: OrderedDict[int, Mesh] = OrderedDict()

    # -- what subclasses provide -------------------------------------------------------------
    @abstractmethod
    def num_objects(self) -> int:
        """K, the number of objects."""

    @abstractmethod
    def mesh(self, k: int) -> Mesh:
        """Object ``k``'s mesh as stored (it is centred and scaled when rendered)."""

    def meshes(self) -> list[Mesh]:
        """All meshes, in object order."""
        return [self.mesh(k) for k in range(self.num_objects())]

    # -- the dataset ---------------------------------------------------------------------------
    def factors(self) -> tuple[Factor, ...]:
        k = self.num_objects()
        if k < 2:
            raise FactorbenchError(f"{self.name}: needs at least 2 objects, got {k}")
        return (Factor("object", "categorical", values=tuple(float(i) for i in range(k)),
                       description=f"object id 0..{k - 1}"),
                Factor.cyclic_grid("rotation", self.params.steps,
                                   "counter-clockwise about the vertical axis, seen from above"))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (self.params.image_size, self.params.image_size, 3)

    def normalised_mesh(self, k: int) -> Mesh:
        """Object ``k`` centred on its bounding box and scaled to unit radius (and doubled for two-sided
        shading where the generator shades both sides; cached)."""
        if k in self._normalised:
            self._normalised.move_to_end(k)
            return self._normalised[k]
        mesh = self.mesh(k).centred_and_scaled(1.0)
        if self.two_sided:
            mesh = mesh.two_sided()
        self._normalised[k] = mesh
        while len(self._normalised) > self.mesh_cache_size:
            self._normalised.popitem(last=False)
        return mesh

    def render(self, factors: np.ndarray) -> np.ndarray:
        factors = np.asarray(factors, dtype=np.float64).reshape(-1, 2)
        p = self.params
        m = len(factors)
        out = np.empty((m, p.image_size, p.image_size, 3), dtype=np.uint8)
        if m == 0:
            return out
        objects = np.rint(factors[:, 0]).astype(np.int64)
        k = self.num_objects()
        if np.any(np.abs(factors[:, 0] - objects) > 1e-6) or objects.min() < 0 or objects.max() >= k:
            bad = factors[np.argmax((objects < 0) | (objects >= k) | (np.abs(factors[:, 0] - objects) > 1e-6)), 0]
            raise FactorbenchError(f"{self.name}: object id {bad!r} is not one of 0..{k - 1}")
        backend = get_backend(self.backend)
        camera = Camera(p.image_size, FOV_Y_DEGREES)
        settings = RenderSettings(tuple(p.background), p.samples, cull_back_faces=self.two_sided)
        for obj in np.unique(objects):
            rows = np.flatnonzero(objects == obj)
            view = orbit_views(np.full(len(rows), CAMERA_AZIMUTH),
                               np.full(len(rows), math.radians(p.elevation_degrees)), p.camera_distance)
            colours = np.broadcast_to(np.asarray(self.base_colour, dtype=np.float64), (len(rows), 3))
            out[rows] = backend.render(self.normalised_mesh(int(obj)), rotation_z(factors[rows, 1]), view, colours,
                                       camera, LIGHT, settings)
        return out
