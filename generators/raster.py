"""Small exact 2-D drawing helpers: supersampled coverage and cyclic colour."""

from __future__ import annotations

from typing import Callable

import numpy as np


def sample_points(size: int, supersampling: int) -> tuple[np.ndarray, np.ndarray]:
    """Centred sample coordinates (u right, v up) of a size x size image, s x s samples per pixel.

    Arrays have shape (size, size, s*s); the image centre is (0, 0). The set of points is invariant
    under rotations by multiples of 90 degrees about the centre, so rotating a shape by 90 degrees
    rotates its rasterisation exactly (up to floating point on shape edges).
    """
    offsets = (np.arange(supersampling) + 0.5) / supersampling
    coords = (np.arange(size)[:, None] + offsets[None, :]).reshape(-1) - size / 2  # (size*s,)
    u = np.broadcast_to(coords[None, :], (coords.size, coords.size))
    v = np.broadcast_to(-coords[:, None], (coords.size, coords.size))

    def per_pixel(a: np.ndarray) -> np.ndarray:
        a = a.reshape(size, supersampling, size, supersampling)
        return a.transpose(0, 2, 1, 3).reshape(size, size, supersampling * supersampling)

    return per_pixel(u), per_pixel(v)


def coverage(inside: Callable[[np.ndarray, np.ndarray], np.ndarray], size: int, supersampling: int,
             angle: float = 0.0) -> np.ndarray:
    """Fraction of each pixel covered by the shape ``inside(u, v)`` rotated counter-clockwise by ``angle``.

    The geometry is rotated (the samples are rotated by ``-angle`` into the shape's frame), not the pixels.
    """
    u, v = sample_points(size, supersampling)
    c, s = np.cos(angle), np.sin(angle)
    return inside(c * u + s * v, -s * u + c * v).mean(axis=-1)


def hue_to_rgb(hue: np.ndarray) -> np.ndarray:
    """RGB in [0, 1] of fully saturated, full-value colours with hue in [0, 1) (HSV with s = v = 1)."""
    h6 = 6.0 * np.remainder(np.asarray(hue, dtype=np.float64), 1.0)
    r = np.clip(np.abs(h6 - 3.0) - 1.0, 0.0, 1.0)
    g = np.clip(2.0 - np.abs(h6 - 2.0), 0.0, 1.0)
    b = np.clip(2.0 - np.abs(h6 - 4.0), 0.0, 1.0)
    return np.stack([r, g, b], axis=-1)


def to_uint8(x: np.ndarray) -> np.ndarray:
    """Values in [0, 1] to uint8 with round-half-to-even."""
    return np.rint(np.clip(x, 0.0, 1.0) * 255.0).astype(np.uint8)
