"""MPI3D-toy stand-in: a two-joint arm holding one of 72 objects, regenerated here (Gondal et al. 2019).

The original. ``mpi3d_toy`` (Gondal et al. 2019, rr-learning/disentanglement_dataset, CC BY 4.0) is the
simplest of the MPI3D sets: 1,036,800 RGB images, 64 x 64, simple renders of the MPI robot platform (a
round dark stage with a lit coloured ring; a robot arm with two rotary joints holding an object at its
tip; three cameras at different heights). Every combination of seven factors appears once, in C order
of the array reshape ``[6, 6, 2, 3, 3, 40, 40, 64, 64, 3]``: ``object_color`` (white, green, red, blue,
brown, olive), ``object_shape`` (cone, cube, cylinder, hexagonal, pyramid, sphere), ``object_size``
(small, large), ``camera_height`` (top, center, bottom), ``background_color`` (purple, sea green,
salmon), ``horizontal_axis`` and ``vertical_axis`` (40 positions each of the arm's two joints). Its
scene and renderer are not public, so its images cannot be remade.

This module is a regenerated stand-in, not the original's images: the same factors, names, order,
sizes and class values (0..n-1, as in disentanglement_lib and the original's README), and a scene built
here to look like the original at 64 x 64. Its constants were fitted to the two traversal animations
published with the original (``sample_gifs/toy1.gif`` and ``toy2.gif``, 7 panels of 20 frames, made by
disentanglement_lib's ``visualize_dataset``, whose frames step through known factor values: toy1 varies
each factor of a large blue pyramid, center camera, sea green ring, joints (22, 21); toy2 of a small red
cylinder, top camera, purple ring, joints (39, 27)). Least squares over the ring's edges in 36 image
columns, the arm's base for the three cameras and the object's centre in 80 frames of the joint
traversals (238 coordinates, 0.77 pixel RMS with the field of view fixed at 40 degrees and both joint
spans at 180); colours and greys were read off the frames and divided by the shading.

The scene (world units: the ring's outer radius is 1; z is up; the cameras look along +y):

- Stage: a flat floor, dark grey (sRGB 52/255, unshaded and without shadows, as in the original), and
  a flat ring between radii :data:`RING_INNER` and :data:`RING_OUTER` in the background colour.
- Arm: a washer-like base, a column and a striped head (cylinders about the z axis, greys in
  :data:`BASE_GREY` and the like), then a thin rod (radius :data:`ROD_RADIUS`, length
  :data:`ROD_LENGTH`) from the pivot at height :data:`PIVOT_HEIGHT`. The first joint (``vertical_axis``)
  turns the arm about the vertical: position j points it at azimuth ``165 - 180 j / 39`` degrees
  (counter-clockwise from the cameras' right, seen from above: j = 0 points left and a little away from
  the cameras, j = 39 right and a little towards them). The second joint (``horizontal_axis``) turns the
  rod about a horizontal axis: at position i the rod leaves the pivot at ``180 i / 39`` degrees from the
  horizontal direction opposite the arm's azimuth, through vertical (i = 19.5) to horizontal along the
  azimuth (i = 39). Both spans are 180 degrees, the rounded fit (193.5 and 171 degrees fitted freely).
- Object: its base sits at the rod's end, its axis (cone and pyramid apex, cylinder and prism axis)
  along the rod, outwards, its other axes turned with the joints. Cube edge :data:`OBJECT_SIZES`
  (large / small = sqrt 2: the original's large objects cover twice the pixels of its small ones); cone
  base diameter 0.9 and height 1.1 edges, cylinder and hexagonal prism (0.95 across flats) one edge
  long, square pyramid one edge high, sphere one edge across.
- Cameras: three pinhole cameras at distance :data:`CAMERA_DISTANCE` from their targets with a 40-degree
  vertical field of view, at elevations 46, 36.5 and 21.5 degrees (top, center, bottom): :data:`CAMERAS`.
- Light: one directional light from above and in front (:data:`LIGHT_DIRECTION`), Lambert shading
  with a small ambient term (:data:`AMBIENT`), on the object and the arm.

Colour model. Each image is a per-pixel linear combination, in sRGB-encoded values, of the object's
colour, the ring's colour and a grey term: ``image = K + O * object_colour + B * ring_colour``, where
the maps K, O and B depend only on the geometry (shape, size, camera height and the two joints: 57,600
configurations); O is the object's encoded shading times its coverage. So the object colour changes
only object pixels, and the ring colour only ring pixels, exactly. (The shading multiplies the encoded
colour; for a pure power-law encoding that equals encoding the shaded linear colour, and the sRGB
curve is close to one.)

Rendering. The maps are drawn in numpy: each object is ray cast as an exact convex solid (planes;
quadrics for the cone, cylinder and sphere) at ``samples`` points per pixel in its bounding box; the rod
is a screen-space line with analytic antialiasing and perspective-correct depth; the stage and the arm's
fixed parts are drawn once per camera; samples are composited by depth. One pass gives the three maps
(the mesh renderers of :mod:`.render` draw one colour per mesh and draw, so a two-material scene whose
depth order changes would take several passes per geometry). Every step is elementwise, so an image
does not depend on the batch it is drawn in. A geometry's maps are kept where they differ from its
camera's fixed scene (about 100 pixels, float16) and reused for its 18 colour combinations: the grid
puts the colours slowest, so a full generation at 64 x 64 draws each geometry once; the kept maps of all
57,600 geometries take about 50 MB of arrays. Memory is bounded (:data:`LAYER_CACHE_BYTES`, least
recently used dropped first): larger images redraw geometries instead.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .base import Generator, GridStepParams
from .citations import GONDAL_2019
from .errors import FactorbenchError
from .factors import Factor
from .render.scene import linear_to_srgb

# -- the factors ------------------------------------------------------------------------------------
COLOUR_NAMES = ("white", "green", "red", "blue", "brown", "olive")
SHAPE_NAMES = ("cone", "cube", "cylinder", "hexagonal", "pyramid", "sphere")
SIZE_NAMES = ("small", "large")
HEIGHT_NAMES = ("top", "center", "bottom")
BACKGROUND_NAMES = ("purple", "sea green", "salmon")
JOINT_POSITIONS = 40

# -- colours (sRGB-encoded, 0..1) -------------------------------------------------------------------
#: object colours at full light (read off the original's lit faces, divided by their shading)
OBJECT_COLOURS = np.array([[230, 230, 230], [40, 157, 39], [215, 4, 4], [41, 108, 209], [82, 51, 35],
                           [122, 121, 51]], dtype=np.float64) / 255.0
#: ring colours (the original's ring interiors)
BACKGROUND_COLOURS = np.array([[99, 74, 140], [70, 97, 93], [106, 76, 85]], dtype=np.float64) / 255.0
FLOOR_GREY = 52.0 / 255.0

# -- the scene (world units: ring outer radius 1, z up, cameras looking along +y) ------------------
RING_INNER = 0.80
RING_OUTER = 1.0
FOV_Y_DEGREES = 40.0
CAMERA_DISTANCE = 1.4
#: per camera height (top, center, bottom): elevation in degrees and the point it looks at
CAMERAS = ((46.0, (0.05, 0.0, 0.21)), (36.5, (0.01, 0.0, 0.25)), (21.5, (0.05, 0.0, 0.31)))
#: arm: base disc (radius, height, radius of its dark centre), column and head (radius, top)
BASE_RADIUS, BASE_HEIGHT, BASE_HOLE = 0.075, 0.02, 0.04
COLUMN_RADIUS, COLUMN_TOP = 0.034, 0.20
HEAD_RADIUS, HEAD_TOP = 0.045, 0.30
PIVOT_HEIGHT = 0.29
ROD_RADIUS = 0.008
#: the rod's length: the object's base (the face towards the pivot) sits at its end
ROD_LENGTH = 0.265
#: encoded albedos of the arm's parts
BASE_GREY, BASE_HOLE_GREY, COLUMN_GREY, HEAD_GREY, HEAD_STRIPE_GREY, ROD_GREY = 0.70, 0.40, 0.40, 0.62, 0.52, 0.55
#: head stripes: z intervals drawn in the stripe grey
HEAD_STRIPES = ((0.225, 0.24), (0.26, 0.275))
#: object size (edge of the cube; the other shapes are scaled from it): small, large
OBJECT_SIZES = (0.136 / math.sqrt(2.0), 0.136)
#: joints: azimuth of the arm at vertical_axis 0 and its span; the rod's angle span (degrees)
AZIMUTH_FIRST_DEGREES, AZIMUTH_SPAN_DEGREES = 165.0, 180.0
ELEVATION_SPAN_DEGREES = 180.0
#: light: direction towards the light (world), ambient and diffuse weights of the linear shading
LIGHT_DIRECTION = (0.0, -0.6, 0.8)
AMBIENT, DIFFUSE = 0.03, 0.97

#: memory for the kept maps, least recently used dropped first: at 64 x 64 the maps of all 57,600
#: geometries take about 50 MB of arrays (plus LAYER_OVERHEAD each), so each is drawn once
LAYER_CACHE_BYTES = 128 * 2 ** 20
LAYER_OVERHEAD = 400  # bytes per kept geometry besides its arrays (key, tuple, array headers), estimated


@dataclass(frozen=True)
class Mpi3dToyParams(GridStepParams):
    """``image_size`` (pixels, default 64 as the original), ``samples`` (antialiasing: 1, 4, 9 or 16 per
    pixel on a regular grid) and ``step`` (one stride per factor, ``()`` = the full grid: a smaller file
    of the same images, every ``step[k]``-th value of factor k; see
    :func:`factorbench.generators.factors.subgrid_factors`)."""

    image_size: int = 64
    samples: int = 4

    def __post_init__(self) -> None:
        size = self.image_size
        if isinstance(size, bool) or not isinstance(size, int) or not 16 <= size <= 512:
            raise FactorbenchError(f"mpi3d-toy: image_size must be an integer from 16 to 512 pixels, "
                                   f"got {self.image_size!r}")
        if self.samples not in (1, 4, 9, 16):
            raise FactorbenchError(f"mpi3d-toy: samples (antialiasing samples per pixel) must be 1, 4, 9 or 16, "
                                   f"got {self.samples!r}")


_LIGHT = np.asarray(LIGHT_DIRECTION, dtype=np.float64) / np.linalg.norm(LIGHT_DIRECTION)


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dot products over the last axis (length 3), written out: the same bits for every batch shape."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.sqrt(_dot(v, v)), 1e-300)[..., None]


def _shade(cosine: np.ndarray) -> np.ndarray:
    """Encoded Lambert shading in [0, 1] for the cosine between the normal and the light direction."""
    return linear_to_srgb(AMBIENT + DIFFUSE * np.maximum(cosine, 0.0))


# -- ray casting of convex solids -------------------------------------------------------------------
# Rays are o + t d with t the camera depth; o (..., 3) broadcasts against d (..., 3). Every operation is
# elementwise, so a ray's result does not depend on the batch it is cast in.
class _Hits:
    """Where rays enter and leave an intersection of convex regions, and which surface they enter by."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.t_in = np.full(shape, -np.inf)
        self.t_out = np.full(shape, np.inf)
        self.surface = np.full(shape, -1, dtype=np.int8)
        self.normals: list[Any] = []  # per surface: a constant unit vector, or a function of hit points

    def _enter(self, t: np.ndarray, normal: Any) -> None:
        self.normals.append(normal)
        later = t > self.t_in
        self.t_in = np.where(later, t, self.t_in)
        self.surface = np.where(later, np.int8(len(self.normals) - 1), self.surface)

    def halfspace(self, o: np.ndarray, d: np.ndarray, n: np.ndarray, c: float) -> None:
        """The region n . x <= c (n a unit vector)."""
        den = _dot(d, n)
        num = c - _dot(o, n)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = num / den
        self._enter(np.where(den < 0, t, -np.inf), np.asarray(n, dtype=np.float64))
        self.t_out = np.minimum(self.t_out, np.where(den > 0, t, np.where((den == 0) & (num < 0), -np.inf, np.inf)))

    def slab(self, o: np.ndarray, d: np.ndarray, axis: int, lo: float, hi: float) -> None:
        n = np.zeros(3)
        n[axis] = 1.0
        self.halfspace(o, d, n, hi)
        self.halfspace(o, d, -n, -lo)

    def interval(self, t0: np.ndarray, t1: np.ndarray, normal_at: Any) -> None:
        """The region entered at t0 and left at t1 (empty where t0 > t1); ``normal_at(points)`` gives its normals."""
        self._enter(t0, normal_at)
        self.t_out = np.minimum(self.t_out, t1)

    def first(self, o: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Depth of the first hit (inf where missed) and the unit normal there (zero where missed)."""
        hit = (self.t_in <= self.t_out) & (self.t_in > 0)
        t = np.where(hit, self.t_in, np.inf)
        normal = np.zeros(t.shape + (3,))
        points = None
        for k, n in enumerate(self.normals):
            mask = hit & (self.surface == k)
            if callable(n):
                if points is None:
                    points = o + np.where(hit, self.t_in, 0.0)[..., None] * d
                normal[mask] = n(points[mask])
            else:
                normal[mask] = n
        return t, normal


def _quadratic_interval(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where a t^2 + 2 b t + c <= 0 for a >= 0: [t0, t1] (t0 = inf, t1 = -inf when empty)."""
    disc = b * b - a * c
    ok = disc >= 0
    root = np.sqrt(np.where(ok, disc, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        t0 = np.where(a > 0, (-b - root) / a, -np.inf)
        t1 = np.where(a > 0, (-b + root) / a, np.inf)
    empty = ~ok | ((a <= 0) & (c > 0))
    return np.where(empty, np.inf, t0), np.where(empty, -np.inf, t1)


def _cylinder(hits: _Hits, o: np.ndarray, d: np.ndarray, radius: float, z0: float, z1: float) -> None:
    """Axis z, from z0 to z1."""
    a = d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]
    b = o[..., 0] * d[..., 0] + o[..., 1] * d[..., 1]
    c = o[..., 0] * o[..., 0] + o[..., 1] * o[..., 1] - radius * radius
    t0, t1 = _quadratic_interval(a, b, c)
    hits.interval(t0, t1, lambda p: _unit(np.stack([p[:, 0], p[:, 1], np.zeros(len(p))], axis=1)))
    hits.slab(o, d, 2, z0, z1)


def _sphere(hits: _Hits, o: np.ndarray, d: np.ndarray, radius: float) -> None:
    t0, t1 = _quadratic_interval(_dot(d, d), _dot(o, d), _dot(o, o) - radius * radius)
    hits.interval(t0, t1, _unit)


def _cone(hits: _Hits, o: np.ndarray, d: np.ndarray, radius: float, z0: float, z1: float) -> None:
    """Base disc of ``radius`` at z0, apex at z1 > z0."""
    k2 = (radius / (z1 - z0)) ** 2
    w = z1 - o[..., 2]
    a = d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1] - k2 * d[..., 2] * d[..., 2]
    b = o[..., 0] * d[..., 0] + o[..., 1] * d[..., 1] + k2 * w * d[..., 2]
    c = o[..., 0] * o[..., 0] + o[..., 1] * o[..., 1] - k2 * w * w
    disc = b * b - a * c
    ok = (disc >= 0) & (a != 0)
    root = np.sqrt(np.where(ok, disc, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        ra, rb = (-b - root) / a, (-b + root) / a
    lo, hi = np.minimum(ra, rb), np.maximum(ra, rb)
    # a > 0: inside the double cone on [lo, hi]; a < 0: on (-inf, lo] and [hi, inf), of which the lower
    # nappe (z <= apex) is the part the ray reaches going down
    up = d[..., 2] > 0
    t0 = np.where(ok, np.where(a > 0, lo, np.where(up, -np.inf, hi)), np.inf)
    t1 = np.where(ok, np.where(a > 0, hi, np.where(up, lo, np.inf)), -np.inf)
    hits.interval(t0, t1, lambda p: _unit(np.stack([p[:, 0], p[:, 1], k2 * (z1 - p[:, 2])], axis=1)))
    hits.slab(o, d, 2, z0, z1)


_HEX_NORMALS = np.array([[math.cos(k * math.pi / 3), math.sin(k * math.pi / 3), 0.0] for k in range(6)])
_PYRAMID_SIDES = ((1.0, 0.0), (-1.0, 0.0), (0.0, 1.0), (0.0, -1.0))


def _object_hits(shape: int, size: float, o: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First hits of rays with object ``shape`` of ``size`` in its own frame (centred; z along the rod,
    outwards): depth and unit normal."""
    hits = _Hits(np.broadcast_shapes(o.shape, d.shape)[:-1])
    h = size / 2
    if shape == 0:  # cone: base diameter 0.9 s, height 1.1 s, apex outwards
        _cone(hits, o, d, 0.45 * size, -0.55 * size, 0.55 * size)
    elif shape == 1:  # cube: edge s
        for axis in range(3):
            hits.slab(o, d, axis, -h, h)
    elif shape == 2:  # cylinder: diameter s, length s
        _cylinder(hits, o, d, h, -h, h)
    elif shape == 3:  # hexagonal prism: across flats 0.95 s, length s
        for n in _HEX_NORMALS:
            hits.halfspace(o, d, n, 0.475 * size)
        hits.slab(o, d, 2, -h, h)
    elif shape == 4:  # square pyramid: base edge s, height s, apex outwards
        hits.halfspace(o, d, np.array([0.0, 0.0, -1.0]), h)
        for sx, sy in _PYRAMID_SIDES:
            n = np.array([sx * size, sy * size, h])  # the side through the apex (0, 0, h) and a base edge
            n /= np.linalg.norm(n)
            hits.halfspace(o, d, n, n[2] * h)
    else:  # sphere: diameter s
        _sphere(hits, o, d, h)
    return hits.first(o, d)


def _object_radius(size: float) -> float:
    """Radius of a sphere about the object's centre that holds every shape of ``size``."""
    return 0.87 * size


def _half_length(shape: int, size: float) -> float:
    """Distance from the object's base (at the rod's end) to its centre, along the rod."""
    return (0.55 if shape == 0 else 0.5) * size


# -- cameras and the arm's pose ---------------------------------------------------------------------
@dataclass(frozen=True)
class _Camera:
    eye: np.ndarray
    right: np.ndarray
    up: np.ndarray
    forward: np.ndarray
    focal: float  # pixels
    size: int

    @classmethod
    def of_height(cls, k: int, size: int) -> "_Camera":
        elevation, target = CAMERAS[k]
        el = math.radians(elevation)
        forward = np.array([0.0, math.cos(el), -math.sin(el)])
        eye = np.asarray(target, dtype=np.float64) - CAMERA_DISTANCE * forward
        up = np.array([0.0, math.sin(el), math.cos(el)])
        focal = size / 2 / math.tan(math.radians(FOV_Y_DEGREES) / 2)
        return cls(eye, np.array([1.0, 0.0, 0.0]), up, forward, focal, size)

    def rays(self, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
        """Directions (..., 3) through image points (pixel units, y down); t along them is camera depth."""
        u = ((xs - self.size / 2) / self.focal)[..., None]
        v = ((self.size / 2 - ys) / self.focal)[..., None]
        return self.forward + u * self.right + v * self.up

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Image x, y and depth of world points (..., 3)."""
        rel = points - self.eye
        z = _dot(rel, self.forward)
        return (self.size / 2 + self.focal * _dot(rel, self.right) / z,
                self.size / 2 - self.focal * _dot(rel, self.up) / z, z)


def arm_pose(horizontal_axis: np.ndarray, vertical_axis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rod's end (..., 3) and the object's frame (..., 3, 3; columns: the second joint's axis, the
    third axis, the rod's direction) for joint positions (arrays of the same shape)."""
    azimuth = np.radians(AZIMUTH_FIRST_DEGREES - AZIMUTH_SPAN_DEGREES * np.asarray(vertical_axis, dtype=np.float64)
                         / (JOINT_POSITIONS - 1))
    angle = np.radians(ELEVATION_SPAN_DEGREES * np.asarray(horizontal_axis, dtype=np.float64) / (JOINT_POSITIONS - 1))
    ca, sa, ce, se = np.cos(azimuth), np.sin(azimuth), np.cos(angle), np.sin(angle)
    zero = np.zeros_like(ca)
    axis = np.stack([-sa, ca, zero], axis=-1)  # horizontal, perpendicular to the arm's azimuth
    rod = np.stack([-ce * ca, -ce * sa, se], axis=-1)  # from the horizontal opposite the azimuth, up and over
    third = np.stack([rod[..., 1] * axis[..., 2] - rod[..., 2] * axis[..., 1],
                      rod[..., 2] * axis[..., 0] - rod[..., 0] * axis[..., 2],
                      rod[..., 0] * axis[..., 1] - rod[..., 1] * axis[..., 0]], axis=-1)  # rod x axis
    end = np.stack([zero, zero, np.full_like(ca, PIVOT_HEIGHT)], axis=-1) + ROD_LENGTH * rod
    return end, np.stack([axis, third, rod], axis=-1)


# -- the maps ---------------------------------------------------------------------------------------
def _pixel_mean(a: np.ndarray, ss: int) -> np.ndarray:
    """Mean over each pixel's ss x ss samples of a (..., H*ss, W*ss) array, summed in a fixed order."""
    h, w = a.shape[-2] // ss, a.shape[-1] // ss
    blocks = a.reshape(a.shape[:-2] + (h, ss, w, ss))
    total = np.zeros(a.shape[:-2] + (h, w))
    for i in range(ss):
        for j in range(ss):
            total = total + blocks[..., i, :, j]
    return total / (ss * ss)


class _Stage:
    """Per-sample maps of the fixed scene seen by one camera: floor, ring and the arm's fixed parts."""

    def __init__(self, camera: _Camera, ss: int) -> None:
        n = camera.size * ss
        coords = (np.arange(n) + 0.5) / ss
        ys, xs = np.meshgrid(coords, coords, indexing="ij")
        # ring coverage of each sample, from 4 x 4 points inside it (soft, fixed edges)
        sub = (np.arange(4) + 0.5) / (4 * ss) - 0.5 / ss
        ring = np.zeros((n, n))
        for dy in sub:
            for dx in sub:
                dirs = camera.rays(xs + dx, ys + dy)
                down = dirs[..., 2] < 0
                t = -camera.eye[2] / np.where(down, dirs[..., 2], -1.0)
                r = np.hypot(camera.eye[0] + t * dirs[..., 0], camera.eye[1] + t * dirs[..., 1])
                ring += down & (r >= RING_INNER) & (r <= RING_OUTER)
        ring /= 16.0
        # the arm's fixed parts: base, column, head (cylinders about the z axis)
        dirs = camera.rays(xs, ys)
        eye = np.broadcast_to(camera.eye, dirs.shape)
        depth = np.full((n, n), np.inf)
        grey = np.zeros((n, n))
        for radius, z0, z1, part in ((BASE_RADIUS, 0.0, BASE_HEIGHT, 0), (COLUMN_RADIUS, BASE_HEIGHT, COLUMN_TOP, 1),
                                     (HEAD_RADIUS, COLUMN_TOP, HEAD_TOP, 2)):
            hits = _Hits((n, n))
            _cylinder(hits, eye, dirs, radius, z0, z1)
            t, normal = hits.first(eye, dirs)
            point = eye + np.where(np.isfinite(t), t, 0.0)[..., None] * dirs
            if part == 0:
                hole = (normal[..., 2] > 0.5) & (np.hypot(point[..., 0], point[..., 1]) < BASE_HOLE)
                albedo = np.where(hole, BASE_HOLE_GREY, BASE_GREY)
            elif part == 1:
                albedo = np.full((n, n), COLUMN_GREY)
            else:
                stripe = np.zeros((n, n), dtype=bool)
                for z0s, z1s in HEAD_STRIPES:
                    stripe |= (point[..., 2] >= z0s) & (point[..., 2] < z1s) & (normal[..., 2] < 0.5)
                albedo = np.where(stripe, HEAD_STRIPE_GREY, HEAD_GREY)
            nearer = t < depth
            depth = np.where(nearer, t, depth)
            grey = np.where(nearer, albedo * _shade(_dot(normal, _LIGHT)), grey)
        arm = np.isfinite(depth)
        self.depth = depth
        #: per sample: the grey term (the arm's grey, or the floor's where the floor shows) and the ring's weight
        self.grey = np.where(arm, grey, (1.0 - ring) * FLOOR_GREY)
        self.ring = np.where(arm, 0.0, ring)
        self.pixel_grey = _pixel_mean(self.grey, ss).astype(np.float16)
        self.pixel_ring = _pixel_mean(self.ring, ss).astype(np.float16)


def _compose(maps: np.ndarray, object_colour: np.ndarray, ring_colour: np.ndarray) -> np.ndarray:
    """uint8 RGB of maps (..., 3: grey, object, ring weights; float16) and colours (..., 3) in [0, 1]."""
    m = maps.astype(np.float32)
    value = (m[..., 0:1] + m[..., 1:2] * object_colour.astype(np.float32)
             + m[..., 2:3] * ring_colour.astype(np.float32))
    return np.rint(np.clip(value, 0.0, 1.0) * np.float32(255.0)).astype(np.uint8)


#: a geometry's maps where they differ from its camera's fixed scene: flat pixel indices (n,) and the
#: grey, object and ring weights (n, 3) float16
Layer = tuple[np.ndarray, np.ndarray]


#: geometries drawn together (sorted by the size of their region, so that padding stays small)
DRAW_CHUNK = 32


def _draw(stage: _Stage, camera: _Camera, ss: int, shape: int, size_class: int, joints: np.ndarray) -> list[Layer]:
    """The layers of G geometries of one shape, size and camera; ``joints`` (G, 2): horizontal, vertical."""
    size_px = camera.size
    size = OBJECT_SIZES[size_class]
    end, frame = arm_pose(joints[:, 0], joints[:, 1])  # (G, 3), (G, 3, 3)
    centre = end + _half_length(shape, size) * frame[..., 2]
    pivot = camera.project(np.array([0.0, 0.0, PIVOT_HEIGHT]))
    ex, ey, ez = camera.project(end)
    cx, cy, cz = camera.project(centre)
    px, py, pz = (float(v) for v in pivot)
    # pixel boxes (clamped to the image) of the object and of the rod; the region is their union
    radius = _object_radius(size)
    r_px = camera.focal * radius / np.maximum(cz - radius, 1e-6) + 1.0
    ob = np.clip(np.stack([np.floor(cy - r_px), np.ceil(cy + r_px), np.floor(cx - r_px), np.ceil(cx + r_px)], axis=1),
                 0, size_px).astype(np.int64)
    hw = camera.focal * ROD_RADIUS / np.minimum(pz, ez) + 1.0
    rb = np.clip(np.stack([np.floor(np.minimum(py, ey) - hw), np.ceil(np.maximum(py, ey) + hw),
                           np.floor(np.minimum(px, ex) - hw), np.ceil(np.maximum(px, ex) + hw)], axis=1),
                 0, size_px).astype(np.int64)
    rg = np.stack([np.minimum(ob[:, 0], rb[:, 0]), np.maximum(ob[:, 1], rb[:, 1]),
                   np.minimum(ob[:, 2], rb[:, 2]), np.maximum(ob[:, 3], rb[:, 3])], axis=1)
    layers: list[Layer] = [None] * len(joints)  # type: ignore[list-item]
    order = np.argsort((rg[:, 1] - rg[:, 0]) * (rg[:, 3] - rg[:, 2]), kind="stable")
    for a in range(0, len(order), DRAW_CHUNK):
        idx = order[a:a + DRAW_CHUNK]
        for i, layer in zip(idx, _draw_chunk(stage, camera, ss, shape, size, frame[idx], centre[idx], ob[idx], rg[idx],
                                             (px, py, pz), ex[idx], ey[idx], ez[idx])):
            layers[i] = layer
    return layers


def _draw_chunk(stage: _Stage, camera: _Camera, ss: int, shape: int, size: float, frame: np.ndarray,
                centre: np.ndarray, ob: np.ndarray, rg: np.ndarray, pivot: tuple[float, float, float],
                ex: np.ndarray, ey: np.ndarray, ez: np.ndarray) -> list[Layer]:
    """Layers of a few geometries: object frames (G, 3, 3) and centres (G, 3), object boxes and regions
    (G, 4: y0, y1, x0, x1 in pixels), the pivot's image x, y and depth and the rod end's (G,)."""
    size_px = camera.size
    g = len(frame)
    px, py, pz = pivot
    oh, ow = np.maximum(ob[:, 1] - ob[:, 0], 0), np.maximum(ob[:, 3] - ob[:, 2], 0)
    rh, rw = np.maximum(rg[:, 1] - rg[:, 0], 0), np.maximum(rg[:, 3] - rg[:, 2], 0)
    big_rh, big_rw = max(int(rh.max()), 1), max(int(rw.max()), 1)
    big_oh, big_ow = max(int(oh.max()), 1), max(int(ow.max()), 1)

    # the object, ray cast at the samples of its box (boxes padded to the largest in the group)
    oy = (ob[:, 0, None] * ss + np.arange(big_oh * ss)[None, :] + 0.5) / ss  # (G, OH)
    ox = (ob[:, 2, None] * ss + np.arange(big_ow * ss)[None, :] + 0.5) / ss
    u = ((ox - size_px / 2) / camera.focal)[:, None, :]  # (G, 1, OW)
    v = ((size_px / 2 - oy) / camera.focal)[:, :, None]  # (G, OH, 1)
    f_, r_, up_ = (np.stack([_dot(vec, frame[..., j]) for j in range(3)], axis=-1)
                   for vec in (camera.forward, camera.right, camera.up))  # camera axes in the object's frames
    d_local = np.stack([f_[:, None, None, j] + u * r_[:, None, None, j] + v * up_[:, None, None, j]
                        for j in range(3)], axis=-1)  # (G, OH, OW, 3)
    rel = camera.eye - centre
    o_local = np.stack([_dot(rel, frame[..., j]) for j in range(3)], axis=-1)[:, None, None, :]
    t_obj, n_local = _object_hits(shape, size, o_local, d_local)
    light_local = np.stack([_dot(_LIGHT, frame[..., j]) for j in range(3)], axis=-1)[:, None, None, :]
    shade_obj = _shade(_dot(n_local, light_local))

    # the region's samples: the fixed scene, then the object in front of it, then the rod
    rsy = rg[:, 0, None] * ss + np.arange(big_rh * ss)[None, :]  # (G, RH) sample rows
    rsx = rg[:, 2, None] * ss + np.arange(big_rw * ss)[None, :]
    iy, ix = np.minimum(rsy, size_px * ss - 1)[:, :, None], np.minimum(rsx, size_px * ss - 1)[:, None, :]
    depth, grey, ring = stage.depth[iy, ix], stage.grey[iy, ix], stage.ring[iy, ix]
    oy_i = (rsy - ob[:, 0, None] * ss)[:, :, None]  # sample row in the object's box
    ox_i = (rsx - ob[:, 2, None] * ss)[:, None, :]
    inside = (oy_i >= 0) & (oy_i < (oh * ss)[:, None, None]) & (ox_i >= 0) & (ox_i < (ow * ss)[:, None, None])
    gi = np.arange(g)[:, None, None]
    t_r = np.where(inside, t_obj[gi, np.clip(oy_i, 0, big_oh * ss - 1), np.clip(ox_i, 0, big_ow * ss - 1)], np.inf)
    front = t_r < depth
    obj = np.where(front, shade_obj[gi, np.clip(oy_i, 0, big_oh * ss - 1), np.clip(ox_i, 0, big_ow * ss - 1)], 0.0)
    depth = np.where(front, t_r, depth)
    grey = np.where(front, 0.0, grey)
    ring = np.where(front, 0.0, ring)
    # the rod: the screen-space line from the pivot to its end, antialiased analytically, depth
    # interpolated perspective-correctly
    sy = ((rsy + 0.5) / ss)[:, :, None]
    sx = ((rsx + 0.5) / ss)[:, None, :]
    lx, ly = (ex - px)[:, None, None], (ey - py)[:, None, None]
    length2 = lx * lx + ly * ly
    long = length2 > 1e-12
    s = np.where(long, np.clip(((sx - px) * lx + (sy - py) * ly) / np.where(long, length2, 1.0), 0.0, 1.0), 0.0)
    dist = np.hypot(sx - (px + s * lx), sy - (py + s * ly))
    rod_depth = 1.0 / ((1.0 - s) / pz + s / ez[:, None, None])
    alpha = np.clip((camera.focal * ROD_RADIUS / rod_depth - dist) * ss + 0.5, 0.0, 1.0) * (rod_depth < depth)
    grey = alpha * ROD_GREY + (1.0 - alpha) * grey
    obj = (1.0 - alpha) * obj
    ring = (1.0 - alpha) * ring

    # per pixel, float16; keep the pixels that differ from the fixed scene
    maps = np.stack([_pixel_mean(a, ss).astype(np.float16) for a in (grey, obj, ring)], axis=-1)  # (G, RH, RW, 3)
    py_i = rg[:, 0, None] + np.arange(big_rh)[None, :]  # (G, RH) pixel rows
    px_i = rg[:, 2, None] + np.arange(big_rw)[None, :]
    own = ((np.arange(big_rh)[None, :, None] < rh[:, None, None])
           & (np.arange(big_rw)[None, None, :] < rw[:, None, None]))
    cy_i, cx_i = np.minimum(py_i, size_px - 1)[:, :, None], np.minimum(px_i, size_px - 1)[:, None, :]
    changed = own & ((maps[..., 0] != stage.pixel_grey[cy_i, cx_i]) | (maps[..., 1] != 0)
                     | (maps[..., 2] != stage.pixel_ring[cy_i, cx_i]))
    gg, yy, xx = np.nonzero(changed)
    flat = (py_i[gg, yy] * size_px + px_i[gg, xx]).astype(np.uint16 if size_px * size_px <= 1 << 16 else np.uint32)
    values = maps[gg, yy, xx]
    bounds = np.cumsum(np.bincount(gg, minlength=g))[:-1]
    return list(zip(np.split(flat, bounds), np.split(values, bounds)))


class Mpi3dToy(Generator):
    name: ClassVar[str] = "mpi3d-toy"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = ("MPI3D-toy stand-in, regenerated (not the original's images): a two-joint arm "
                                  "holding 6 shapes x 6 colours x 2 sizes, 3 camera heights, 3 ring colours, "
                                  "40 x 40 joint positions (Gondal et al. 2019)")
    citation: ClassVar[str] = GONDAL_2019
    Params: ClassVar[type] = Mpi3dToyParams

    def __init__(self, params: Any = None, **overrides: Any) -> None:
        super().__init__(params, **overrides)
        self._ss = int(round(math.sqrt(self.params.samples)))
        self._cameras = tuple(_Camera.of_height(k, self.params.image_size) for k in range(len(HEIGHT_NAMES)))
        self._stages: dict[int, _Stage] = {}
        self._layers: OrderedDict[tuple, Layer] = OrderedDict()
        self._kept_bytes = 0

    def factors(self) -> tuple[Factor, ...]:
        def categorical(name: str, labels: tuple[str, ...]) -> Factor:
            return Factor(name, "categorical", values=tuple(float(i) for i in range(len(labels))),
                          description=", ".join(f"{i} {label}" for i, label in enumerate(labels)))
        joints = tuple(float(j) for j in range(JOINT_POSITIONS))
        full = (categorical("object_color", COLOUR_NAMES),
                categorical("object_shape", SHAPE_NAMES),
                categorical("object_size", SIZE_NAMES),
                categorical("camera_height", HEIGHT_NAMES),
                categorical("background_color", BACKGROUND_NAMES),
                Factor("horizontal_axis", "continuous", values=joints,
                       description="second joint (about a horizontal axis), position 0..39: the rod at "
                                   "180 j / 39 degrees from horizontal-backwards, through vertical"),
                Factor("vertical_axis", "continuous", values=joints,
                       description="first joint (about the vertical axis), position 0..39: the arm at azimuth "
                                   "165 - 180 j / 39 degrees from the cameras' right"))
        return self.stepped(full)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (self.params.image_size, self.params.image_size, 3)

    def _stage(self, height: int) -> _Stage:
        if height not in self._stages:
            self._stages[height] = _Stage(self._cameras[height], self._ss)
        return self._stages[height]

    def _classes(self, factors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Class indices (M, 5) of the categorical factors and joint positions (M, 2), checked."""
        factors = np.asarray(factors, dtype=np.float64)
        if factors.ndim != 2 or factors.shape[1] != 7:
            raise FactorbenchError(f"mpi3d-toy: factors must be an (M, 7) array, got shape {factors.shape}")
        classes = np.rint(np.nan_to_num(factors[:, :5], nan=-1.0)).astype(np.int64)
        names = (COLOUR_NAMES, SHAPE_NAMES, SIZE_NAMES, HEIGHT_NAMES, BACKGROUND_NAMES)
        for j, (f, labels) in enumerate(zip(self.factors()[:5], names)):  # any class renders, in a sub-grid too
            c = classes[:, j]
            bad = ~(np.abs(factors[:, j] - c) <= 1e-9) | (c < 0) | (c >= len(labels))
            if bad.any():
                raise FactorbenchError(f"mpi3d-toy: {f.name} must be one of 0..{len(labels) - 1}, "
                                       f"got {float(factors[np.argmax(bad), j]):g}")
        joints = factors[:, 5:]
        for j, name in ((0, "horizontal_axis"), (1, "vertical_axis")):
            bad = ~((joints[:, j] >= 0) & (joints[:, j] <= JOINT_POSITIONS - 1))
            if bad.any():
                raise FactorbenchError(f"mpi3d-toy: {name} must lie in [0, {JOINT_POSITIONS - 1}], "
                                       f"got {float(joints[np.argmax(bad), j]):g}")
        return classes, joints

    def _layers_for(self, keys: list[tuple]) -> list[Layer]:
        """The layers of ``keys``: kept ones, and the others drawn (grouped by shape, size and camera) and kept."""
        found: dict[tuple, Layer] = {}
        missing: dict[tuple[int, int, int], list[tuple]] = {}
        for key in dict.fromkeys(keys):
            if key in self._layers:
                self._layers.move_to_end(key)
                found[key] = self._layers[key]
            else:
                missing.setdefault(key[:3], []).append(key)
        for (shape, size, height), group in missing.items():
            joints = np.array([key[3:] for key in group], dtype=np.float64)
            for key, layer in zip(group, _draw(self._stage(height), self._cameras[height], self._ss, shape, size,
                                               joints)):
                found[key] = self._layers[key] = layer
                self._kept_bytes += layer[0].nbytes + layer[1].nbytes + LAYER_OVERHEAD
        while self._kept_bytes > LAYER_CACHE_BYTES and self._layers:
            _, (flat, values) = self._layers.popitem(last=False)
            self._kept_bytes -= flat.nbytes + values.nbytes + LAYER_OVERHEAD
        return [found[key] for key in keys]

    def render(self, factors: np.ndarray) -> np.ndarray:
        classes, joints = self._classes(factors)
        m, s = len(classes), self.params.image_size
        out = np.empty((m, s * s, 3), dtype=np.uint8)
        if m == 0:
            return out.reshape(m, s, s, 3)
        keys = [(int(c[1]), int(c[2]), int(c[3]), float(j[0]), float(j[1])) for c, j in zip(classes, joints)]
        # the fixed scene of each (camera, ring colour), then the pixels each geometry changes
        scenes, scene_of_row = np.unique(classes[:, [3, 4]], axis=0, return_inverse=True)
        for k, (height, background) in enumerate(scenes):
            stage = self._stage(int(height))
            fixed = np.stack([stage.pixel_grey, np.zeros_like(stage.pixel_grey), stage.pixel_ring], axis=-1)
            rows = np.flatnonzero(scene_of_row.ravel() == k)
            out[rows] = _compose(fixed, OBJECT_COLOURS[0], BACKGROUND_COLOURS[int(background)]).reshape(s * s, 3)
        layers = self._layers_for(keys)
        counts = np.array([len(flat) for flat, _ in layers])
        if counts.sum():
            row = np.repeat(np.arange(m), counts)
            flat = np.concatenate([f for f, _ in layers]).astype(np.int64)
            values = np.concatenate([v for _, v in layers])
            out[row, flat] = _compose(values, OBJECT_COLOURS[classes[row, 0]], BACKGROUND_COLOURS[classes[row, 4]])
        return out.reshape(m, s, s, 3)
