"""Compare the mpi3d-toy stand-in with the original's traversal animations, and fit its scene again.

The pictures are not in the repository. ``--reference DIR`` (or ``$FACTORBENCH_REFERENCE_IMAGES``; by
default ``../shared/data/reference-images`` beside the repository, if it exists) names a folder holding
``mpi3d_toy1.gif`` and ``mpi3d_toy2.gif``, the original's ``sample_gifs/toy1.gif`` and ``toy2.gif``
(rr-learning/disentanglement_dataset, CC BY 4.0). Each is disentanglement_lib's ``visualize_dataset``
output: 20 frames of seven 64 x 64 panels, panel j stepping factor j through ``cycle_factor`` from a
base image while the others stay at the base's values. The bases (found by matching the frames):
toy1 a large blue pyramid, center camera, sea green ring, joints (22, 21); toy2 a small red cylinder,
top camera, purple ring, joints (39, 27).

By default the script renders the same 280 factor tuples with the generator and prints, per animation
and panel, the object's pixel count (ours / original) and the distance between the object's centroids;
the ring's edges in 12 columns of the three cameras (ours against the original's); and the residual of
the module's constants in the fit's model. ``--fit`` re-runs the least-squares fit of the geometry on
238 coordinates measured on the originals: the ring's upper and lower edges in 12 columns of each camera,
the arm's base point (the middle of the widest rows of its grey base) for each camera, and the object's
centroid in the 80 frames of the joint traversals. Its unknowns: the focal length, the cameras' distance,
each camera's elevation and target (x, z), the ring's inner radius, the pivot's height, the distance from
the pivot to the object's centre (small and large object) and the two joints' angle at position 0 and
step. First free (several starts), then with the field of view fixed at 40 degrees and both joints'
spans at 180 degrees (azimuth from 165, rod from 180), the module's choice. Not re-fitted here: colours,
greys, light, the arm's radii and the objects' shapes (read off the frames by eye).

Run from the repository root::

    python tests/perf/fit_mpi3d_toy.py                       # original vs stand-in
    python tests/perf/fit_mpi3d_toy.py --fit                 # and the geometric fit
    python tests/perf/fit_mpi3d_toy.py --out mpi3d_compare.png
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Callable

import numpy as np
from scipy.optimize import least_squares

from factorbench.generators import get
from factorbench.generators import mpi3d_toy as M

from reference_images import reference_folder

FACTOR_NAMES = ("object_color", "object_shape", "object_size", "camera_height", "background_color",
                "horizontal_axis", "vertical_axis")
SIZES = (6, 6, 2, 3, 3, 40, 40)
CAMERA_NAMES = ("top", "center", "bottom")
Mask = Callable[[np.ndarray], np.ndarray]
#: per animation: the base factors and the object's colour mask (on int RGB)
ANIMATIONS: dict[str, tuple[tuple[int, ...], Mask]] = {
    "mpi3d_toy1.gif": ((3, 4, 1, 1, 1, 22, 21),
                       lambda im: (im[..., 2] - im[..., 0] > 40) & (im[..., 2] - im[..., 1] > 20)),  # blue
    "mpi3d_toy2.gif": ((2, 2, 0, 0, 0, 39, 27), lambda im: im[..., 0] - im[..., 1] > 60),  # red
}
RING_COLUMNS = (0, 4, 8, 12, 16, 20, 44, 48, 52, 56, 60, 63)  # clear of the arm
#: the fit's unknowns: focal (px), distance, (elevation, target x, target z) per camera, ring inner radius,
#: pivot height, pivot-to-centre of the small and the large object, azimuth at 0 and step, rod angle at 0 and step
NAMES = ("focal", "distance", *(f"{c} {k}" for c in CAMERA_NAMES for k in ("elevation", "target x", "target z")),
         "ring inner", "pivot height", "centre small", "centre large", "azimuth 0", "azimuth step", "rod 0",
         "rod step")
ANGLES = {2, 5, 8, 15, 16, 17, 18}  # indices in radians (printed in degrees)


def cycle_factor(start: int, n: int, frames: int = 20) -> np.ndarray:
    """disentanglement_lib's visualize_util.cycle_factor: start, up to n - 1, back down, up to start."""
    grid = np.ceil(np.linspace(start, start + 2 * n, frames, endpoint=False)).astype(np.int64)
    grid -= np.maximum(0, 2 * grid - 2 * n + 1)
    grid += np.maximum(0, -2 * grid - 1)
    return grid


def load_panels(path: Path) -> np.ndarray:
    """The animation's panels, (7, 20, 64, 64, 3) uint8: a 2 x 4 grid of 64-pixel panels, 10 apart."""
    from PIL import Image, ImageSequence

    with Image.open(path) as im:
        frames = np.stack([np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(im)])
    assert frames.shape == (20, 154, 306, 3), frames.shape
    return np.stack([frames[:, 6 + 74 * (p // 4):70 + 74 * (p // 4), 10 + 74 * (p % 4):74 + 74 * (p % 4)]
                     for p in range(7)])


def traversal_factors(base: tuple[int, ...]) -> np.ndarray:
    """The factor values of each panel's frames, (7, 20, 7)."""
    out = np.repeat(np.array(base, dtype=np.float64)[None, None], 7, axis=0).repeat(20, axis=1)
    for j, n in enumerate(SIZES):
        out[j, :, j] = cycle_factor(base[j], n)
    return out


def centroid(mask: np.ndarray) -> np.ndarray:
    """(x, y) of a mask's centroid, pixel units (pixel centres at k + 0.5); NaN where empty."""
    ys, xs = np.nonzero(mask)
    return np.array([xs.mean() + 0.5, ys.mean() + 0.5]) if len(xs) else np.full(2, np.nan)


def ring_edges(image: np.ndarray) -> np.ndarray:
    """(upper, lower) edge of the coloured ring in each of RING_COLUMNS, rows (pixel top edges)."""
    sat = image.max(axis=-1).astype(int) - image.min(axis=-1)
    out = []
    for x in RING_COLUMNS:
        ys = np.flatnonzero(sat[:50, x] > 12)
        out.append((ys.min(), ys.max() + 1.0) if len(ys) else (np.nan, np.nan))
    return np.array(out)


def base_point(image: np.ndarray) -> np.ndarray:
    """(x, y) of the arm's base: the middle of the widest rows of its grey silhouette (below row 36)."""
    im = image.astype(int)
    grey = (im.max(-1) - im.min(-1) < 10) & (im.mean(-1) > 62)
    grey[:, :15] = grey[:, 45:] = grey[:36] = False
    width = np.array([np.ptp(np.flatnonzero(row)) + 1 if row.any() else 0 for row in grey])
    rows = np.flatnonzero(width == width.max())
    xs = [np.flatnonzero(grey[r]) for r in rows]
    return np.array([np.mean([(x.min() + x.max()) / 2 + 0.5 for x in xs]), rows.mean() + 0.5])


def camera_frames(panels: np.ndarray, base: tuple[int, ...]) -> dict[int, np.ndarray]:
    """One frame per camera height from the camera panel (only the camera differs between them)."""
    cams = cycle_factor(base[3], 3)
    return {int(c): panels[3, int(np.argmax(cams == c))] for c in range(3)}


# -- the geometric model ---------------------------------------------------------------------------

class Measurements:
    """What the fit matches, measured on the originals."""

    def __init__(self, panels: dict[str, np.ndarray]) -> None:
        frames = {name: camera_frames(panels[name], base) for name, (base, _) in ANIMATIONS.items()}
        self.ring = {c: ring_edges(im) for c, im in frames["mpi3d_toy1.gif"].items()}  # sea green: the clearest
        self.base = {c: np.mean([base_point(f[c]) for f in frames.values()], axis=0) for c in range(3)}
        rows = []  # camera, size, horizontal, vertical, x, y
        for name, (base, mask) in ANIMATIONS.items():
            for panel in (5, 6):
                for k, f in enumerate(traversal_factors(base)[panel]):
                    rows.append((base[3], base[2], f[5], f[6], *centroid(mask(panels[name][panel, k].astype(int)))))
        self.objects = np.array(rows)


def _project(q: np.ndarray, camera: int, points: np.ndarray) -> np.ndarray:
    """Image (x, y) of world points (N, 3) seen by a camera of parameters q (see NAMES)."""
    focal, distance = q[0], q[1]
    elevation, tx, tz = q[2 + 3 * camera:5 + 3 * camera]
    forward = np.array([0.0, math.cos(elevation), -math.sin(elevation)])
    up = np.array([0.0, math.sin(elevation), math.cos(elevation)])
    rel = points - (np.array([tx, 0.0, tz]) - distance * forward)
    depth = rel @ forward
    return np.stack([32 + focal * rel[:, 0] / depth, 32 - focal * (rel @ up) / depth], axis=1)


def residuals(q: np.ndarray, data: Measurements) -> np.ndarray:
    """Model minus measurement (pixels) of the ring's edges, the base points and the objects' centres."""
    out = []
    theta = np.linspace(0.0, math.pi, 721)  # the ring's far half
    for c in range(3):
        columns = np.array(RING_COLUMNS) + 0.5
        for radius, side in ((1.0, 0), (q[11], 1)):  # outer radius: upper edge; inner: lower edge
            xy = _project(q, c, np.stack([radius * np.cos(theta), radius * np.sin(theta), 0 * theta], axis=1))
            order = np.argsort(xy[:, 0])
            out.append(np.interp(columns, xy[order, 0], xy[order, 1]) - data.ring[c][:, side])
        out.append(_project(q, c, np.zeros((1, 3)))[0] - data.base[c])
    pivot, l_small, l_large, a0, a1, e0, e1 = q[12:19]
    for c in np.unique(data.objects[:, 0]).astype(int):
        rows = data.objects[data.objects[:, 0] == c]
        az, el = a0 + a1 * rows[:, 3], e0 + e1 * rows[:, 2]
        length = np.where(rows[:, 1] == 1, l_large, l_small)
        points = np.stack([length * np.cos(el) * np.cos(az), length * np.cos(el) * np.sin(az),
                           pivot + length * np.sin(el)], axis=1)
        out.append((_project(q, c, points) - rows[:, 4:6]).ravel())
    return np.concatenate([np.ravel(r) for r in out])


def module_parameters() -> np.ndarray:
    """The module's constants in the fit's parameters. The fit's object centres are the centroids of
    the objects' pixels: here the small cylinder's centre (rod end + half its length) and the large
    pyramid's centroid (rod end + a quarter of its height)."""
    q = [32 / math.tan(math.radians(M.FOV_Y_DEGREES) / 2), M.CAMERA_DISTANCE]
    for elevation, (tx, _, tz) in M.CAMERAS:
        q += [math.radians(elevation), tx, tz]
    small, large = M.OBJECT_SIZES
    q += [M.RING_INNER, M.PIVOT_HEIGHT, M.ROD_LENGTH + small / 2, M.ROD_LENGTH + large / 4,
          math.radians(M.AZIMUTH_FIRST_DEGREES), -math.radians(M.AZIMUTH_SPAN_DEGREES) / 39,
          math.pi, -math.radians(M.ELEVATION_SPAN_DEGREES) / 39]
    return np.array(q)


def fit(data: Measurements, start: np.ndarray, fixed: dict[int, float]) -> np.ndarray:
    """Least squares over the parameters not in ``fixed`` (index: value), from ``start``."""
    free = [i for i in range(len(start)) if i not in fixed]

    def full(p: np.ndarray) -> np.ndarray:
        q = start.copy()
        q[free] = p
        q[list(fixed)] = list(fixed.values())
        return q

    return full(least_squares(lambda p: residuals(full(p), data), start[free]).x)


def fit_free(data: Measurements) -> np.ndarray:
    """Every parameter free: the best of starts from the module's constants with other focal lengths
    and distances."""
    best, cost = None, np.inf
    for focal in (50, 70, 100, 140):
        for distance in (1.5, 2.5, 4.0, 6.0):
            start = module_parameters()
            start[:2] = focal, distance
            q = fit(data, start, {})
            c = float(np.sum(residuals(q, data) ** 2))
            if c < cost:
                best, cost = q, c
    return best


def describe(q: np.ndarray, data: Measurements) -> str:
    r = residuals(q, data)
    az = math.degrees(q[15]), math.degrees(q[15] + 39 * q[16])
    el = math.degrees(q[17]), math.degrees(q[17] + 39 * q[18])
    return (f"{math.sqrt(np.mean(r ** 2)):.3f} pixel RMS over {len(r)} coordinates (largest {np.abs(r).max():.2f}); "
            f"field of view {math.degrees(2 * math.atan(32 / q[0])):.2f} deg; azimuth {az[0]:.1f} to {az[1]:.1f} "
            f"(span {az[0] - az[1]:.1f}), rod {el[0]:.1f} to {el[1]:.1f} (span {el[0] - el[1]:.1f})")


def print_fit(data: Measurements) -> None:
    module = module_parameters()
    print(f"\nthe module's constants in this model: {describe(module, data)}")
    free = fit_free(data)
    print(f"fit, all free: {describe(free, data)}")
    fixed = {i: module[i] for i in (0, 15, 16, 17, 18)}  # focal length, the joints' angles at 0 and steps
    q = fit(data, free, fixed)
    print(f"fit, field of view 40, spans 180 (the module's choice): {describe(q, data)}")
    print(f"  {'parameter':<18} {'fitted':>9} {'module':>9}")
    for i, name in enumerate(NAMES):
        if i not in fixed:
            a, b = (math.degrees(q[i]), math.degrees(module[i])) if i in ANGLES else (q[i], module[i])
            print(f"  {name:<18} {a:9.3f} {b:9.3f}")
    print("  (centre small, large: pivot to the centroid of toy2's small cylinder and toy1's large pyramid;\n"
          "   module: ROD_LENGTH + half the cylinder's length, + a quarter of the pyramid's height)")


# -- comparison -------------------------------------------------------------------------------------

def compare(panels: dict[str, np.ndarray], ours: dict[str, np.ndarray]) -> None:
    for name, (base, mask) in ANIMATIONS.items():
        print(f"{name}: base {dict(zip(FACTOR_NAMES, base))}")
        print(f"  {'panel':<16} {'pixels ours/orig':>16} {'centroid dist mean':>19} {'max':>6}")
        for p in (1, 2, 3, 5, 6):
            a, b = mask(panels[name][p].astype(int)), mask(ours[name][p].astype(int))
            dist = [np.hypot(*(centroid(x) - centroid(y))) for x, y in zip(a, b) if x.any() and y.any()]
            print(f"  {FACTOR_NAMES[p]:<16} {b.sum() / a.sum():16.2f} {np.mean(dist):19.2f} {np.max(dist):6.2f}")
    toy1 = "mpi3d_toy1.gif"
    orig = camera_frames(panels[toy1], ANIMATIONS[toy1][0])
    mine = camera_frames(ours[toy1], ANIMATIONS[toy1][0])
    print(f"ring edges (toy1's camera frames, columns {', '.join(map(str, RING_COLUMNS))}): ours minus original")
    for c in range(3):
        d = ring_edges(mine[c]) - ring_edges(orig[c])
        print(f"  {CAMERA_NAMES[c]:<7} upper edge mean {np.nanmean(d[:, 0]):+.2f}, lower {np.nanmean(d[:, 1]):+.2f}; "
              f"RMS {math.sqrt(np.nanmean(d ** 2)):.2f} rows, largest {np.nanmax(np.abs(d)):.0f}")


def sheet(panels: dict[str, np.ndarray], ours: dict[str, np.ndarray], out: Path) -> None:
    """Every other frame of each panel, the original's row above the stand-in's."""
    from PIL import Image, ImageDraw

    frames, label, gap = list(range(0, 20, 2)), 150, 6
    rows = []
    for name in ANIMATIONS:
        for p in range(7):
            rows += [(f"{name[:-4]}: {FACTOR_NAMES[p]}", panels[name][p, frames]), ("stand-in", ours[name][p, frames])]
    canvas = Image.new("RGB", (label + 64 * len(frames), len(rows) * 64 + len(rows) // 2 * gap), "white")
    pen = ImageDraw.Draw(canvas)
    for k, (text, strip) in enumerate(rows):
        y = k * 64 + k // 2 * gap
        canvas.paste(Image.fromarray(np.concatenate(list(strip), axis=1)), (label, y))
        pen.text((4, y + 26), text, fill="black")
    canvas.save(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", help="folder with mpi3d_toy1.gif and mpi3d_toy2.gif (default: "
                                        "$FACTORBENCH_REFERENCE_IMAGES, else ../shared/data/reference-images)")
    ap.add_argument("--fit", action="store_true", help="re-run the least-squares fit of the geometry")
    ap.add_argument("--out", type=Path, help="write a PNG of original frames above the stand-in's")
    args = ap.parse_args(argv)
    folder = reference_folder(args.reference, ANIMATIONS)
    panels = {name: load_panels(folder / name) for name in ANIMATIONS}
    gen = get("mpi3d-toy")
    ours = {name: gen.render(traversal_factors(base).reshape(-1, 7)).reshape(7, 20, 64, 64, 3)
            for name, (base, _) in ANIMATIONS.items()}
    compare(panels, ours)
    data = Measurements(panels)
    if args.fit:
        print_fit(data)
    else:
        print(f"the module's constants in the fit's model: {describe(module_parameters(), data)}")
    if args.out:
        sheet(panels, ours, args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
