"""Shapes3D: one object in a room, six factors on a full grid (Burgess & Kim 2018, deepmind/3d-shapes).

The original (Apache 2.0) is 480,000 RGB images of 64 x 64 rendered with MuJoCo in the environment of
the Generative Query Networks (Eslami et al. 2018): a room with a floor, walls and the sky above them,
one object in the middle, a camera turning about the room's vertical axis. Its factors, in the order of
the original's ``labels`` (floor hue slowest, orientation fastest, so that the base class's C-order
enumeration gives the original's image order):

* ``floor_hue``, ``wall_hue``, ``object_hue``: 0.0, 0.1, ..., 0.9, the hue of an HSV colour at full
  saturation and value (cyclic, period 1: 0.9 is as close to 0.0 as 0.1 is);
* ``scale``: linspace(0.75, 1.25, 8), the object's size;
* ``shape``: 0 cube, 1 cylinder, 2 sphere, 3 capsule;
* ``orientation``: linspace(-30, 30, 15), the view angle in degrees (the camera's azimuth about the
  object, counter-clockwise seen from above; at -30 the room's right-hand corner is in view, at +30 the
  left-hand one).

The original's environment was not published, so the scene is fitted to the pictures published with the
dataset: its README's traversal GIF (53 frames, resampled) and the 50 images of its notebook (exact
64 x 64 pixels; their factors recovered from their colours and outlines). Units: the room's half-width;
world z is up and the object stands at the origin.

* Room: the floor z = 0 and four walls of height ``WALL_HEIGHT`` 0.577 around the square |x| <= 1,
  |y - ``ROOM_CENTRE_Y``| <= 1 (the room's centre is 0.076 behind the object); above the walls the sky,
  one flat colour ``SKY`` (153, 226, 249), as in every original image.
* Camera: on a circle of radius ``CAMERA_DISTANCE`` 0.746 about the object's axis at height
  ``CAMERA_HEIGHT`` 0.2073, looking horizontally at the axis (the horizon is the image's middle row),
  vertical field of view ``FOV_Y_DEGREES`` 46.52 degrees.
* Objects at scale s, standing on the floor: a cube of half-size 0.0989 s; a cylinder of radius 0.0993 s
  and height 0.2102 s; a sphere of radius 0.1175 s; a capsule of radius 0.0896 s whose cylinder is
  0.1878 s long (the original's sizes are proportional to the scale within 2 %).
* Light, as MuJoCo's fixed-function model writes it (linearly, no gamma; each channel clipped):
  ``value = clip(colour * gain + sheen)``. ``gain`` = ambient (floor 0.331, walls 0.347, object 0.381)
  + a headlight along the view direction (walls 0.587, object 0.567; it misses the floor, the camera
  being level) + a spot light pointing straight down from ``LIGHT_POSITION`` (-0.49, 0.13, 2.19), Lambert
  times a cos^9.5 cone (floor 1.011, walls 0.983, object 0.820). The spot light makes the pool of light
  on the floor (brightest to the left of the object, gain up to 1.25, so bright channels saturate as in
  the original) and the darker side walls. The object's shadow takes the spot light's term away (the
  shadowed floor keeps gain 0.33); it is the object's projection onto the floor from ``SHADOW_CENTRE``
  (-0.33, 0.13, 1.82), softened by a Gaussian blur of ``SHADOW_BLUR`` 0.36 pixel (cast from the light's
  own position, the shadows come out smaller and further right than the original's: 3.1/255 against
  3.0/255 mean absolute difference over the 50 notebook images). The ``sheen``, white 0.162 where the
  spot light meets the object at a Lambert cosine above 0.05 to 0.10 (smoothstep, then blurred by 1 pixel
  within the object), is the original's flat white highlight on the lit side.

How it was fitted: the camera and the room by least squares on the pixels of each surface (a flat colour
per surface and frame) in the 15 frames of the GIF's orientation traversal (0.1 pixel rms on the edges;
the final refit below moved them to 0.37 pixel rms from those edges);
the objects' sizes on the silhouettes of the GIF's shape and scale traversals; the light by least squares
on 95,684 interior pixels of the notebook images (5.9/255 rms); then every constant again, on every pixel
of the 50 notebook images rendered by this module: their mean absolute difference from the originals is
2.5/255 per channel.

Rendering: the renderer (:mod:`.render`, ``gl``, or ``cpu`` where there is no OpenGL) draws, for each
geometry (shape, scale, orientation), the coverage of every surface (white on black: light intensity 0,
ambient 1), the object's Lambert terms for the spot light and for the headlight (decoded from the
renderer's sRGB), and the object's shadow (the object flattened onto the floor by the planar projection
from ``SHADOW_CENTRE`` as its model matrix). The room's light is smooth and is evaluated per pixel on the
floor and wall points seen through the pixel centres. These make five weights per pixel and geometry
(floor, wall, object, sky, white), cached for the 480 geometries of the grid (39 MB at 64 x 64); an image
is ``clip(weights @ [floor colour, wall colour, object colour, sky, white])``, one small matrix product.
Antialiasing is the renderer's (``samples``, 16 by default: closest to the original's edges).

Not reproduced: the faint texture of the original's walls; the original's exact bytes.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np
import trimesh
from scipy.ndimage import gaussian_filter

from .base import GridStepParams
from .citations import BURGESS_KIM_2018
from .errors import FactorbenchError
from .factors import Factor
from .meshes import Mesh
from .raster import hue_to_rgb
from .render import Camera, Light, RenderSettings, get_backend, look_at
from .render.scene import srgb_to_linear
from .rendered import RenderedGenerator

SHAPES = ("cube", "cylinder", "sphere", "capsule")
HUES = tuple(k / 10 for k in range(10))
SCALES = tuple(float(s) for s in np.linspace(0.75, 1.25, 8))
ORIENTATIONS = tuple(float(o) for o in np.linspace(-30.0, 30.0, 15))

# -- the scene (units: the room's half-width; world z up, the object at the origin) -----------------
ROOM_CENTRE_Y = 0.076
WALL_HEIGHT = 0.577
CAMERA_DISTANCE = 0.746
CAMERA_HEIGHT = 0.2073
FOV_Y_DEGREES = 46.52
SKY = (153 / 255, 226 / 255, 249 / 255)
#: object dimensions at scale 1
CUBE_HALF_SIZE = 0.0989
CYLINDER_RADIUS, CYLINDER_HEIGHT = 0.0993, 0.2102
SPHERE_RADIUS = 0.1175
CAPSULE_RADIUS, CAPSULE_LENGTH = 0.0896, 0.1878  # the length of its cylinder (between the caps' centres)
#: the spot light, pointing straight down, and its cone: cos(angle from the vertical)^SPOT_EXPONENT
LIGHT_POSITION = (-0.49, 0.13, 2.19)
SPOT_EXPONENT = 9.5
#: the object's shadow is its projection onto the floor from this point
SHADOW_CENTRE = (-0.33, 0.13, 1.82)
#: gains of the ambient term, the headlight and the spot light, per surface
AMBIENT = {"floor": 0.331, "wall": 0.347, "object": 0.381}
HEADLIGHT = {"wall": 0.587, "object": 0.567}
SPOT = {"floor": 1.011, "wall": 0.983, "object": 0.820}
#: white added to the object where the spot light meets it at least at SHEEN_FROM (Lambert cosine), in full
#: from SHEEN_TO (a smoothstep between), times the cone
SHEEN, SHEEN_FROM, SHEEN_TO = 0.162, 0.05, 0.10
#: standard deviation of the sheen's blur, in pixels of a 64 x 64 image
SHEEN_BLUR = 1.0
#: the object meets the spot light as a directional light from a point of its axis at this height
OBJECT_LIGHT_HEIGHT = 0.1
#: standard deviation of the shadow's blur, in pixels of a 64 x 64 image (scaled with the image size)
SHADOW_BLUR = 0.36
#: geometries (shape, scale, orientation) whose maps are kept (the full grid has 480)
MAP_CACHE = 512
#: room cells at most this long (triangles behind the camera are not drawn; these never reach the view)
ROOM_CELL = 0.1

# the room's surfaces: name, a corner, two edge vectors, and the inward normal
_WALLS = (
    ("back", (-1.0, ROOM_CENTRE_Y + 1, 0.0), (2.0, 0.0, 0.0), (0.0, 0.0, WALL_HEIGHT), (0.0, -1.0, 0.0)),
    ("front", (-1.0, ROOM_CENTRE_Y - 1, 0.0), (2.0, 0.0, 0.0), (0.0, 0.0, WALL_HEIGHT), (0.0, 1.0, 0.0)),
    ("right", (1.0, ROOM_CENTRE_Y - 1, 0.0), (0.0, 2.0, 0.0), (0.0, 0.0, WALL_HEIGHT), (-1.0, 0.0, 0.0)),
    ("left", (-1.0, ROOM_CENTRE_Y - 1, 0.0), (0.0, 2.0, 0.0), (0.0, 0.0, WALL_HEIGHT), (1.0, 0.0, 0.0)),
)
_FLOOR = ("floor", (-1.0, ROOM_CENTRE_Y - 1, 0.0), (2.0, 0.0, 0.0), (0.0, 2.0, 0.0), (0.0, 0.0, 1.0))


@dataclass(frozen=True)
class Shapes3DParams(GridStepParams):
    """``image_size`` (pixels, 64 as the original), ``samples`` (antialiasing samples per pixel: 1, 4 or
    16) and, from :class:`GridStepParams`, ``step`` (one stride per factor, ``()`` = the full grid)."""

    image_size: int = 64
    samples: int = 16

    def __post_init__(self) -> None:
        if isinstance(self.image_size, bool) or not isinstance(self.image_size, int) or not 8 <= self.image_size <= 512:
            raise FactorbenchError(f"shapes3d: image_size must be an integer from 8 to 512 pixels, "
                                   f"got {self.image_size!r}")
        if self.samples not in (1, 4, 16):
            raise FactorbenchError(f"shapes3d: samples (antialiasing samples per pixel) must be 1, 4 or 16, "
                                   f"got {self.samples!r}")


def _grid(corner: tuple[float, ...], u: tuple[float, ...], v: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """A rectangle corner + [0, 1] u + [0, 1] v cut into cells of at most ``ROOM_CELL``."""
    nu = max(1, math.ceil(np.linalg.norm(u) / ROOM_CELL))
    nv = max(1, math.ceil(np.linalg.norm(v) / ROOM_CELL))
    a, b = np.meshgrid(np.linspace(0, 1, nu + 1), np.linspace(0, 1, nv + 1), indexing="ij")
    vertices = np.asarray(corner) + a.reshape(-1, 1) * np.asarray(u) + b.reshape(-1, 1) * np.asarray(v)
    idx = np.arange((nu + 1) * (nv + 1)).reshape(nu + 1, nv + 1)
    p, q, r, s = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    faces = np.concatenate([np.stack([p, q, r], 1), np.stack([p, r, s], 1)])
    return vertices, faces


@lru_cache(maxsize=None)
def _room_mesh(name: str) -> Mesh:
    surface = next(s for s in (_FLOOR, *_WALLS) if s[0] == name)
    return Mesh(*_grid(*surface[1:4]))


@lru_cache(maxsize=None)
def _object_mesh(shape: int) -> Mesh:
    """Shape ``shape`` at scale 1, standing on z = 0 about the z axis; sharp edges split (flat faces)."""
    if shape == 0:
        part = trimesh.creation.box(extents=[2 * CUBE_HALF_SIZE] * 3)
        part.apply_translation([0.0, 0.0, CUBE_HALF_SIZE])
    elif shape == 1:
        part = trimesh.creation.cylinder(radius=CYLINDER_RADIUS, height=CYLINDER_HEIGHT, sections=48)
        part.apply_translation([0.0, 0.0, CYLINDER_HEIGHT / 2])
    elif shape == 2:
        part = trimesh.creation.icosphere(subdivisions=3, radius=SPHERE_RADIUS)
        part.apply_translation([0.0, 0.0, SPHERE_RADIUS])
    else:
        part = trimesh.creation.capsule(height=CAPSULE_LENGTH, radius=CAPSULE_RADIUS, count=[48, 24])
        part.apply_translation([0.0, 0.0, CAPSULE_RADIUS + CAPSULE_LENGTH / 2])
    part = trimesh.graph.smooth_shade(part, angle=math.radians(30))
    return Mesh(np.asarray(part.vertices, dtype=np.float64), np.asarray(part.faces, dtype=np.int64))


def camera_views(orientation: np.ndarray) -> np.ndarray:
    """World-to-camera matrices (M, 4, 4) for view angles in degrees: the camera at distance
    ``CAMERA_DISTANCE`` from the object's axis and height ``CAMERA_HEIGHT``, looking horizontally at the
    axis; angle 0 looks along +y, positive angles move the camera counter-clockwise seen from above."""
    a = np.radians(np.asarray(orientation, dtype=np.float64).reshape(-1))
    eye = np.stack([CAMERA_DISTANCE * np.sin(a), -CAMERA_DISTANCE * np.cos(a), np.full(a.shape, CAMERA_HEIGHT)], 1)
    target = np.stack([np.zeros(a.shape), np.zeros(a.shape), np.full(a.shape, CAMERA_HEIGHT)], 1)
    return look_at(eye, target, np.tile([0.0, 0.0, 1.0], (len(a), 1)))


def _shadow_matrix() -> np.ndarray:
    """The planar projection from ``SHADOW_CENTRE`` onto the floor z = 0 (a model matrix; w = lz - z)."""
    lx, ly, lz = SHADOW_CENTRE
    return np.array([[lz, 0.0, -lx, 0.0], [0.0, lz, -ly, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, -1.0, lz]])


def _object_light() -> tuple[np.ndarray, float]:
    """Direction towards the spot light from the object, and the spot's cone factor there."""
    d = np.asarray(LIGHT_POSITION) - np.array([0.0, 0.0, OBJECT_LIGHT_HEIGHT])
    d /= np.linalg.norm(d)
    return d, float(d[2] ** SPOT_EXPONENT)


def _spot_gain(points: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """max(n . l, 0) * cone of the spot light at world points (..., 3) with normal ``normal``."""
    to_light = np.asarray(LIGHT_POSITION) - points
    to_light /= np.linalg.norm(to_light, axis=-1, keepdims=True)
    return np.maximum(to_light @ normal, 0.0) * np.maximum(to_light[..., 2], 0.0) ** SPOT_EXPONENT


class Shapes3D(RenderedGenerator):
    name: ClassVar[str] = "shapes3d"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = ("One object in a room: floor, wall and object hue, scale, shape, view angle; "
                                  "Shapes3D regenerated (Burgess & Kim 2018)")
    citation: ClassVar[str] = BURGESS_KIM_2018
    Params: ClassVar[type] = Shapes3DParams

    def __init__(self, params: Any = None, *, backend: str = "auto", **overrides: Any) -> None:
        super().__init__(params, backend=backend, **overrides)  # checks the step against the factors
        self._maps: OrderedDict[tuple[int, float, float], np.ndarray] = OrderedDict()
        self._rooms: OrderedDict[float, dict[str, np.ndarray]] = OrderedDict()

    def factors(self) -> tuple[Factor, ...]:
        hue = "hue of an HSV colour at full saturation and value"
        full = (Factor("floor_hue", "cyclic", low=0.0, high=1.0, values=HUES, period=1.0, description=hue),
                Factor("wall_hue", "cyclic", low=0.0, high=1.0, values=HUES, period=1.0, description=hue),
                Factor("object_hue", "cyclic", low=0.0, high=1.0, values=HUES, period=1.0, description=hue),
                Factor("scale", "continuous", values=SCALES, description="object size"),
                Factor("shape", "categorical", values=(0.0, 1.0, 2.0, 3.0),
                       description="0 cube, 1 cylinder, 2 sphere, 3 capsule"),
                Factor("orientation", "continuous", values=ORIENTATIONS,
                       description="view angle in degrees, counter-clockwise about the object seen from above"))
        return self.stepped(full)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (self.params.image_size, self.params.image_size, 3)

    # -- rendering ---------------------------------------------------------------------------------
    def render(self, factors: np.ndarray) -> np.ndarray:
        factors = np.asarray(factors, dtype=np.float64)
        if factors.ndim != 2 or factors.shape[1] != 6:
            raise FactorbenchError(f"shapes3d: factors must be (M, 6) (floor_hue, wall_hue, object_hue, scale, "
                                   f"shape, orientation), got {factors.shape}")
        size = self.params.image_size
        out = np.empty((len(factors), size, size, 3), dtype=np.uint8)
        if len(factors) == 0:
            return out
        keys = self._geometry_keys(factors)
        self._ensure_maps(sorted(set(keys)))
        # colours of the five weights, times 255: floor, wall, object hues, the sky, white
        colours = np.empty((len(factors), 5, 3), dtype=np.float32)
        colours[:, 0:3] = hue_to_rgb(factors[:, 0:3])
        colours[:, 3] = SKY
        colours[:, 4] = 1.0
        colours *= 255.0
        flat = out.reshape(len(factors), size * size, 3)
        buffer = np.empty((size * size, 3), dtype=np.float32)
        for i, key in enumerate(keys):
            np.matmul(self._maps[key], colours[i], out=buffer)
            np.clip(buffer, 0.0, 255.0, out=buffer)
            np.rint(buffer, out=buffer)
            flat[i] = buffer
        return out

    def _geometry_keys(self, factors: np.ndarray) -> list[tuple[int, float, float]]:
        """(shape, scale, orientation) of each row, after checking the factor values."""
        if not np.isfinite(factors).all():
            raise FactorbenchError("shapes3d: factor values must be finite")
        shape = np.rint(factors[:, 4])
        bad = (np.abs(factors[:, 4] - shape) > 1e-6) | (shape < 0) | (shape > 3)
        if bad.any():
            raise FactorbenchError(f"shapes3d: shape {float(factors[np.argmax(bad), 4])!r} is not one of 0 (cube), "
                                   "1 (cylinder), 2 (sphere), 3 (capsule)")
        bad = ~((factors[:, 3] > 0) & (factors[:, 3] <= 2))
        if bad.any():
            raise FactorbenchError(f"shapes3d: scale {float(factors[np.argmax(bad), 3])!r} is outside (0, 2] "
                                   "(the dataset's scales are 0.75 to 1.25)")
        bad = np.abs(factors[:, 5]) > 180
        if bad.any():
            raise FactorbenchError(f"shapes3d: orientation {float(factors[np.argmax(bad), 5])!r} is outside "
                                   "[-180, 180] degrees (the dataset's are -30 to 30)")
        return [(int(s), float(c), float(o)) for s, c, o in zip(shape, factors[:, 3], factors[:, 5])]

    def _ensure_maps(self, keys: list[tuple[int, float, float]]) -> None:
        missing = [k for k in keys if k not in self._maps]
        if missing:
            self._maps.update(zip(missing, self._geometry_maps(missing)))
        for key in keys:
            self._maps.move_to_end(key)
        while len(self._maps) > max(MAP_CACHE, len(keys)):
            self._maps.popitem(last=False)

    def _settings(self) -> tuple[Camera, RenderSettings]:
        return Camera(self.params.image_size, FOV_Y_DEGREES), RenderSettings((0.0, 0.0, 0.0), self.params.samples)

    def _geometry_maps(self, keys: list[tuple[int, float, float]]) -> list[np.ndarray]:
        """The weights (S*S, 5) float32 of each geometry: see the module docstring."""
        room = [self._room_maps(theta) for _, _, theta in keys]
        obj = self._object_maps(keys)
        out = []
        for k, r in enumerate(room):
            cov, gain, sheen, shadow = obj["coverage"][k], obj["gain"][k], obj["sheen"][k], obj["shadow"][k]
            behind = 1.0 - cov  # the room is seen where the object is not
            floor = behind * (r["floor_ambient"] + r["floor_spot"] * (1.0 - shadow))
            weights = np.stack([floor, behind * r["wall"], cov * gain, behind * r["sky"], cov * sheen], axis=-1)
            out.append(np.ascontiguousarray(weights.reshape(-1, 5), dtype=np.float32))
        return out

    def _object_maps(self, keys: list[tuple[int, float, float]]) -> dict[str, np.ndarray]:
        """Per geometry: the object's coverage, its gain and sheen (where covered) and the soft shadow."""
        size = self.params.image_size
        backend = get_backend(self.backend)
        camera, settings = self._settings()
        shape = np.array([k[0] for k in keys])
        scale = np.array([k[1] for k in keys])
        theta = np.array([k[2] for k in keys])
        views = camera_views(theta)
        models = np.zeros((len(keys), 4, 4))
        models[:, 0, 0] = models[:, 1, 1] = models[:, 2, 2] = scale
        models[:, 3, 3] = 1.0
        white = np.ones((len(keys), 3))
        light_dir, cone = _object_light()
        cover = np.zeros((len(keys), size, size))
        spot = np.zeros_like(cover)
        head = np.zeros_like(cover)
        hard_shadow = np.zeros_like(cover)
        shadow_models = _shadow_matrix()[None] @ models
        for s in np.unique(shape):
            rows = np.flatnonzero(shape == s)
            mesh = _object_mesh(int(s))

            def draw(light: Light, model: np.ndarray = models, which: np.ndarray = rows) -> np.ndarray:
                return backend.render(mesh, model[which], views[which], white[which], camera, light,
                                      settings)[..., 0] / 255.0

            cover[rows] = draw(Light((0.0, 0.0, 1.0), 0.0, 1.0))
            spot[rows] = draw(Light(tuple(light_dir), 1.0, 0.0))
            hard_shadow[rows] = draw(Light((0.0, 0.0, 1.0), 0.0, 1.0), shadow_models)
            for t in np.unique(theta[rows]):  # the headlight turns with the camera
                same = rows[theta[rows] == t]
                a = math.radians(t)
                head[same] = draw(Light((math.sin(a), -math.cos(a), 0.0), 1.0, 0.0), which=same)
        seen = cover > 0
        safe = np.where(seen, cover, 1.0)
        # the renderer averages sRGB-encoded samples: the mean over the covered ones, decoded
        spot = np.where(seen, srgb_to_linear(np.clip(spot / safe, 0.0, 1.0)), 0.0)
        head = np.where(seen, srgb_to_linear(np.clip(head / safe, 0.0, 1.0)), 0.0)
        gain = AMBIENT["object"] + HEADLIGHT["object"] * head + SPOT["object"] * cone * spot
        ramp = np.clip((spot - SHEEN_FROM) / (SHEEN_TO - SHEEN_FROM), 0.0, 1.0)
        sheen = SHEEN * cone * ramp * ramp * (3.0 - 2.0 * ramp)
        if SHEEN_BLUR > 0:  # soften its edge within the object (the average over the covered neighbourhood)
            blur = SHEEN_BLUR * size / 64
            near = gaussian_filter(cover, sigma=(0, blur, blur), mode="constant")
            sheen = np.where(seen, gaussian_filter(cover * sheen, sigma=(0, blur, blur), mode="constant")
                             / np.where(seen, np.maximum(near, 1e-6), 1.0), 0.0)
        sigma = SHADOW_BLUR * size / 64
        shadow = np.clip(gaussian_filter(hard_shadow, sigma=(0, sigma, sigma), mode="constant"), 0.0, 1.0)
        return {"coverage": cover, "gain": gain, "sheen": sheen, "shadow": shadow}

    def _room_maps(self, theta: float) -> dict[str, np.ndarray]:
        """The room seen at view angle ``theta`` (cached): per pixel, the floor's weight without and with
        the spot light (its ambient part and its spot part, which the shadow takes away), the walls'
        weight (coverage times gain, summed over the walls) and the sky's coverage."""
        if theta in self._rooms:
            self._rooms.move_to_end(theta)
            return self._rooms[theta]
        size = self.params.image_size
        backend = get_backend(self.backend)
        camera, settings = self._settings()
        view = camera_views(np.array([theta]))
        coverage = {}
        for name in (_FLOOR[0], *(w[0] for w in _WALLS)):
            coverage[name] = backend.render(_room_mesh(name), np.eye(4)[None], view, np.ones((1, 3)), camera,
                                            Light((0.0, 0.0, 1.0), 0.0, 1.0), settings)[0, ..., 0] / 255.0
        # the world point of each surface's plane seen through each pixel centre
        inverse = np.linalg.inv(view[0])
        eye = inverse[:3, 3]
        ndc = (np.arange(size) + 0.5) / size * 2.0 - 1.0
        t = math.tan(math.radians(FOV_Y_DEGREES) / 2)
        x, y = np.meshgrid(ndc * t, -ndc * t)
        rays = np.stack([x, y, -np.ones_like(x)], axis=-1) @ inverse[:3, :3].T

        def points(corner: tuple[float, ...], normal: tuple[float, ...]) -> np.ndarray:
            n = np.asarray(normal)
            along = rays @ n
            depth = np.where(np.abs(along) > 1e-12, (np.asarray(corner) - eye) @ n / np.where(along == 0, 1, along),
                             0.0)
            return eye + np.maximum(depth, 0.0)[..., None] * rays

        a = math.radians(theta)
        towards_camera = np.array([math.sin(a), -math.cos(a), 0.0])
        floor_points = points(_FLOOR[1], _FLOOR[4])
        maps = {"floor_ambient": coverage["floor"] * AMBIENT["floor"],
                "floor_spot": coverage["floor"] * SPOT["floor"] * _spot_gain(floor_points, np.asarray(_FLOOR[4]))}
        wall = np.zeros((size, size))
        for name, corner, _, _, normal in _WALLS:
            n = np.asarray(normal)
            gain = (AMBIENT["wall"] + HEADLIGHT["wall"] * max(float(n @ towards_camera), 0.0)
                    + SPOT["wall"] * _spot_gain(points(corner, normal), n))
            wall += coverage[name] * gain
        maps["wall"] = wall
        maps["sky"] = np.clip(1.0 - coverage["floor"] - sum(coverage[w[0]] for w in _WALLS), 0.0, 1.0)
        self._rooms[theta] = maps
        while len(self._rooms) > 64:
            self._rooms.popitem(last=False)
        return maps
