"""Scene description shared by every rendering backend: camera, light, poses, shading, colour space.

Conventions (world space): z is up. A batch of M instances draws the same mesh M times, instance i
with its own object-to-world ``model[i]`` (4x4), world-to-camera ``view[i]`` (4x4, OpenGL convention:
the camera looks down its -z axis, +y up) and base colour ``colours[i]`` (linear RGB in [0, 1]).

Shading is per-vertex Lambertian with an ambient term, as in the teapot's original renderer (OpenDR;
Eastwood & Williams 2018): vertex colour = colour * (intensity * max(n . l, 0) + ambient), with n the
world-space vertex normal and l the direction towards the light. Vertex colours are clamped to [0, 1]
and encoded with the sRGB curve (IEC 61966-2-1: 12.92 x below 0.0031308, else 1.055 x^(1/2.4) - 0.055),
then interpolated across triangles perspective-correctly (Gouraud shading of the encoded colours, as
the original renderer interpolated its vertex colours; every backend does the same); antialiasing
averages encoded samples.
The background colour is given in the output (sRGB-encoded) space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import FactorbenchError


@dataclass(frozen=True)
class Camera:
    """A perspective camera: square images of ``image_size`` pixels, vertical field of view in degrees."""

    image_size: int = 64
    fov_y_degrees: float = 48.0
    near: float = 0.01
    far: float = 100.0

    def __post_init__(self) -> None:
        if self.image_size < 1 or not 0 < self.fov_y_degrees < 180 or not 0 < self.near < self.far:
            raise FactorbenchError(f"invalid camera {self}")

    def projection(self) -> np.ndarray:
        """The OpenGL perspective matrix (clip = P @ camera-space point; NDC z in [-1, 1])."""
        f = 1.0 / math.tan(math.radians(self.fov_y_degrees) / 2)
        n, fa = self.near, self.far
        return np.array([[f, 0, 0, 0], [0, f, 0, 0], [0, 0, (fa + n) / (n - fa), 2 * fa * n / (n - fa)],
                         [0, 0, -1, 0]], dtype=np.float64)


@dataclass(frozen=True)
class Light:
    """A directional light: ``direction`` points from the scene towards the light (world space)."""

    direction: tuple[float, float, float] = (0.0, 0.0, 1.0)
    intensity: float = 1.0
    ambient: float = 0.5

    def unit_direction(self) -> np.ndarray:
        d = np.asarray(self.direction, dtype=np.float64)
        norm = np.linalg.norm(d)
        if not norm > 0:
            raise FactorbenchError("the light direction must be a non-zero vector")
        return d / norm


@dataclass(frozen=True)
class RenderSettings:
    """Output settings: background colour (sRGB-encoded, in [0, 1]) and antialiasing samples per pixel
    (1 = off; the cpu and gl backends render sqrt(samples) x sqrt(samples) sub-pixels on a regular grid
    and average them; pyrender uses its 4x MSAA). ``cull_back_faces``: draw only faces wound
    counter-clockwise on screen (with :meth:`Mesh.two_sided`, two-sided shading)."""

    background: tuple[float, float, float] = (1.0, 1.0, 1.0)
    samples: int = 4
    cull_back_faces: bool = False

    def __post_init__(self) -> None:
        if self.samples not in (1, 4, 16):
            raise FactorbenchError(f"antialiasing samples must be 1, 4 or 16, got {self.samples}")
        if len(self.background) != 3 or not all(0.0 <= c <= 1.0 for c in self.background):
            raise FactorbenchError(f"background must be three values in [0, 1], got {self.background}")


def check_orbit_camera(owner: str, elevation_degrees: float, camera_distance: float, fov_y_degrees: float,
                       radius: float = 1.0) -> None:
    """Reject an orbiting camera that cannot see a ``radius`` sphere about its target whole: the sphere
    fits the view cone when ``camera_distance >= radius / sin(fov_y / 2)``; elevation in (-90, 90)."""
    if not -90.0 < elevation_degrees < 90.0:
        raise FactorbenchError(f"{owner}: elevation_degrees must be in (-90, 90), got {elevation_degrees}")
    nearest = radius / math.sin(math.radians(fov_y_degrees / 2))
    if not camera_distance >= nearest:
        raise FactorbenchError(f"{owner}: camera_distance {camera_distance} is too close to see the object whole "
                               f"(radius {radius}, field of view {fov_y_degrees} degrees); use at least {nearest:.3f}")


def look_at(eye: np.ndarray, target: np.ndarray, up: np.ndarray) -> np.ndarray:
    """World-to-camera matrices (M, 4, 4) for cameras at ``eye`` (M, 3) looking at ``target`` (3,) or
    (M, 3), with ``up`` (M, 3) (any vector not parallel to the viewing direction)."""
    eye = np.atleast_2d(np.asarray(eye, dtype=np.float64))
    target = np.broadcast_to(np.asarray(target, dtype=np.float64), eye.shape)
    up = np.broadcast_to(np.asarray(up, dtype=np.float64), eye.shape)
    forward = target - eye
    forward /= np.linalg.norm(forward, axis=1, keepdims=True)
    right = np.cross(forward, up)
    right /= np.linalg.norm(right, axis=1, keepdims=True)
    true_up = np.cross(right, forward)
    view = np.zeros((len(eye), 4, 4))
    view[:, 0, :3], view[:, 1, :3], view[:, 2, :3] = right, true_up, -forward
    view[:, 0, 3] = -np.einsum("ij,ij->i", right, eye)
    view[:, 1, 3] = -np.einsum("ij,ij->i", true_up, eye)
    view[:, 2, 3] = np.einsum("ij,ij->i", forward, eye)
    view[:, 3, 3] = 1.0
    return view


def orbit_views(azimuth: np.ndarray, elevation: np.ndarray, distance: float,
                target: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> np.ndarray:
    """Views (M, 4, 4) from a camera on a sphere around ``target``: elevation 0 looks horizontally (side
    view), pi/2 straight down (top view); azimuth turns counter-clockwise about z from the +x axis.
    The camera's up vector is the elevation tangent, so the top view is well defined."""
    az, el = np.asarray(azimuth, dtype=np.float64), np.asarray(elevation, dtype=np.float64)
    direction = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=1)
    up = np.stack([-np.sin(el) * np.cos(az), -np.sin(el) * np.sin(az), np.cos(el)], axis=1)
    return look_at(np.asarray(target) + distance * direction, np.asarray(target), up)


def rotation_z(angle: np.ndarray) -> np.ndarray:
    """Model matrices (M, 4, 4) rotating counter-clockwise by ``angle`` about the world z axis."""
    a = np.asarray(angle, dtype=np.float64)
    m = np.zeros((len(a), 4, 4))
    m[:, 0, 0], m[:, 0, 1], m[:, 1, 0], m[:, 1, 1] = np.cos(a), -np.sin(a), np.sin(a), np.cos(a)
    m[:, 2, 2] = m[:, 3, 3] = 1.0
    return m


def vertex_colours(normals: np.ndarray, model: np.ndarray, colours: np.ndarray, light: Light) -> np.ndarray:
    """Linear vertex colours (M, V, 3): colour * (intensity * max(n_world . l, 0) + ambient)."""
    world_normals = np.einsum("mij,vj->mvi", model[:, :3, :3], normals)
    world_normals /= np.maximum(np.linalg.norm(world_normals, axis=-1, keepdims=True), 1e-12)
    lambert = np.maximum(world_normals @ light.unit_direction(), 0.0)
    return colours[:, None, :] * (light.intensity * lambert + light.ambient)[..., None]


def linear_to_srgb(x: np.ndarray) -> np.ndarray:
    """The sRGB transfer curve (IEC 61966-2-1) on values clamped to [0, 1]."""
    x = np.clip(x, 0.0, 1.0)
    return np.where(x <= 0.0031308, 12.92 * x, 1.055 * np.power(x, 1 / 2.4) - 0.055)


def srgb_to_linear(x: np.ndarray) -> np.ndarray:
    """The inverse of :func:`linear_to_srgb` on values in [0, 1]."""
    return np.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)


def check_batch(model: np.ndarray, view: np.ndarray, colours: np.ndarray) -> tuple[np.ndarray, ...]:
    """Validate and broadcast a batch: model (M,4,4), view (M,4,4), colours (M,3)."""
    model, view, colours = (np.asarray(a, dtype=np.float64) for a in (model, view, colours))
    m = max(len(model), len(view), len(colours))
    try:
        model = np.broadcast_to(model, (m, 4, 4))
        view = np.broadcast_to(view, (m, 4, 4))
        colours = np.broadcast_to(colours, (m, 3))
    except ValueError:
        raise FactorbenchError(f"render batch: model {model.shape}, view {view.shape} and colours {colours.shape} "
                               "must be (M, 4, 4), (M, 4, 4) and (M, 3)") from None
    return model, view, colours
