"""Objects: seeded procedural objects on a turntable, the embedded default of the object x rotation protocol.

The ModelNet40 protocol of Tonnaer et al. 2022 (object id x 64 rotations about the vertical axis) needs
ModelNet40, which factorbench does not download (see ``modelnet40``). This dataset has the same structure
with objects built here: ``num_objects`` (default 64) objects, each the union of 2 to 4 primitives (box,
cylinder, cone, ellipsoid; ``trimesh.creation``) with seeded sizes, positions and orientations, drawn from
``numpy.random.default_rng([mesh_seed, k])`` for object k (so object k does not depend on how many objects
there are). The parts are concatenated into one mesh (they may intersect; the z-buffer resolves that), and
objects that come out nearly symmetric under a turn about the vertical axis (by pi, 2 pi/3, pi/2, 2 pi/5 or
pi/3) are redrawn from the same stream, so every rotation is visible. Rendering as in
:mod:`.turntable`: light grey objects, camera at 20 degrees elevation, light from above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import trimesh
from scipy.spatial import cKDTree

from .citations import TONNAER_2022
from .errors import FactorbenchError
from .meshes import Mesh
from .turntable import TurntableGenerator, TurntableParams

PRIMITIVES = ("box", "cylinder", "cone", "ellipsoid")
SECTIONS = 24  # facets around cylinders and cones
#: turns about z under which an object must not look the same (checked on the normalised vertices)
SYMMETRY_TURNS = (math.pi, 2 * math.pi / 3, math.pi / 2, 2 * math.pi / 5, math.pi / 3)
#: minimum mean distance (unit-radius object) between the vertices and their turned copies' nearest vertices
ASYMMETRY_MIN = 0.04
MAX_TRIES = 50


@dataclass(frozen=True)
class ObjectsParams(TurntableParams):
    num_objects: int = 64
    mesh_seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_objects < 2:
            raise FactorbenchError(f"objects: num_objects must be at least 2, got {self.num_objects}")
        if self.mesh_seed < 0:
            raise FactorbenchError(f"objects: mesh_seed must be a non-negative integer, got {self.mesh_seed}")


def _random_rotation(rng: np.random.Generator) -> np.ndarray:
    """A uniformly random 3x3 rotation (unit quaternion from four normal draws)."""
    q = rng.normal(size=4)
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _primitive(kind: str, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(vertices, faces) of one primitive centred near the origin; ``size`` is 3 extents in [0.2, 0.9]."""
    if kind == "box":
        part = trimesh.creation.box(extents=size)
    elif kind == "cylinder":
        part = trimesh.creation.cylinder(radius=size[0] / 2, height=size[2], sections=SECTIONS)
    elif kind == "cone":
        part = trimesh.creation.cone(radius=size[0] / 2, height=size[2], sections=SECTIONS)
        part.apply_translation([0.0, 0.0, -size[2] / 2])  # trimesh puts the base at z = 0
    else:
        part = trimesh.creation.icosphere(subdivisions=2, radius=1.0)
        part.apply_scale(size / 2)
    return np.asarray(part.vertices, dtype=np.float64), np.asarray(part.faces, dtype=np.int64)


def _asymmetry(vertices: np.ndarray) -> float:
    """The smallest, over the turns in ``SYMMETRY_TURNS``, of the mean distance from the turned vertices
    (about the vertical axis through the bounding-box centre, scaled to unit radius) to the nearest vertex."""
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    v = vertices - (lo + hi) / 2
    v = v / np.linalg.norm(v, axis=1).max()
    tree = cKDTree(v)
    worst = math.inf
    for t in SYMMETRY_TURNS:
        c, s = math.cos(t), math.sin(t)
        turned = v @ np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]).T
        worst = min(worst, float(tree.query(turned)[0].mean()))
    return worst


def procedural_object(seed: int, k: int) -> Mesh:
    """Object ``k`` of the set ``seed``: 2 to 4 primitives at seeded positions, sizes and orientations."""
    rng = np.random.default_rng([seed, k])
    for _ in range(MAX_TRIES):
        n_parts = int(rng.integers(2, 5))
        vertices, faces, offset = [], [], 0
        for part in range(n_parts):
            kind = PRIMITIVES[int(rng.integers(len(PRIMITIVES)))]
            size = rng.uniform(0.2, 0.9, size=3)
            rotation = _random_rotation(rng)
            # the first part sits at the origin, the others around it, touching or overlapping it
            position = np.zeros(3) if part == 0 else rng.uniform(-0.45, 0.45, size=3)
            v, f = _primitive(kind, size)
            vertices.append(v @ rotation.T + position)
            faces.append(f + offset)
            offset += len(v)
        joined = np.concatenate(vertices)
        if _asymmetry(joined) >= ASYMMETRY_MIN:
            return Mesh(joined, np.concatenate(faces))
    raise FactorbenchError(f"objects: no asymmetric object for mesh_seed {seed}, object {k} "  # pragma: no cover
                           f"in {MAX_TRIES} tries")


class Objects(TurntableGenerator):
    name: ClassVar[str] = "objects"
    version: ClassVar[str] = "1.1.0"
    description: ClassVar[str] = ("Procedural objects (unions of boxes, cylinders, cones, ellipsoids), 64 objects x "
                                  "64 rotations about the vertical axis (embedded ModelNet40-style protocol)")
    citation: ClassVar[str] = TONNAER_2022
    Params: ClassVar[type] = ObjectsParams

    def __init__(self, params: Any = None, *, backend: str = "auto", **overrides: Any) -> None:
        super().__init__(params, backend=backend, **overrides)
        self._meshes: list[Mesh] | None = None

    def meshes(self) -> list[Mesh]:
        if self._meshes is None:
            self._meshes = [procedural_object(self.params.mesh_seed, k) for k in range(self.params.num_objects)]
        return list(self._meshes)

    def num_objects(self) -> int:
        return self.params.num_objects

    def mesh(self, k: int) -> Mesh:
        if self._meshes is not None:
            return self._meshes[k]
        return procedural_object(self.params.mesh_seed, k)
