"""Compare the shapes3d generator with pictures of the original Shapes3D, and fit its geometry again.

The pictures are not in the repository. ``--reference DIR`` (or ``$FACTORBENCH_REFERENCE_IMAGES``; by
default ``../shared/data/reference-images`` beside the repository, if it exists) names a folder holding,
from deepmind/3d-shapes (Apache 2.0):

* ``3dshapes_samples.png`` and ``3dshapes_fixed_floor_hue.png``: the notebook's two 5 x 5 grids of
  exact 64 x 64 images (25 random ones; 25 with the floor red). Their factors are not published: the
  table :data:`NOTEBOOK_LABELS` holds the ones recovered from their colours and outlines, and the
  script checks them (each image's geometry is the best of all 480 with its hues, each hue the best of
  its ten with the rest of the label);
* ``3dshapes.gif``: the README's traversals, 53 frames of 223 pixels inside a grey border, box-filtered
  here to 64 x 64. Frames 0-14 turn a cube (scale 0.75) from -30 to +30 degrees, 15 and 16 show a
  cylinder and a sphere (scale 0.75, +30), 17-24 grow a capsule (+30) through the eight scales; all with
  a red floor, a blue wall and a green object (hues 0, 0.6, 0.3). The later frames (hue traversals)
  are not used.

By default the script renders the same factors with the generator and prints what the card quotes: the
mean absolute difference per channel over the 50 notebook images, the sky, the mean images, the object's
pixel area per scale and shape against the GIF's, and the room's edges (the wall tops and the floor
line, in every column clear of the cube) against the GIF's orientation traversal.

``--fit`` re-fits the geometry on the GIF, from the module's constants: the camera (distance, height,
field of view) and the room (wall height, the centre's offset) by least squares on those edges, through
the analytic projection of the room, and each object's size by a search over a factor on its scale that
makes the generator's object pixels (green over red and blue) match the original's (through the
generator, so with the module's camera). The objects' proportions (the cylinder's and capsule's height
to radius) and the light (gains, the spot light, the shadow, the sheen) are not re-fitted: they, and
every constant together, were last fitted on all pixels of the notebook images through the renderer,
which this script does not repeat.

Run from the repository root::

    python tests/perf/fit_shapes3d.py                          # original vs factorbench
    python tests/perf/fit_shapes3d.py --fit                    # and the geometric fit
    python tests/perf/fit_shapes3d.py --out shapes3d_compare.png
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from factorbench.generators import get
from factorbench.generators import shapes3d as S

from reference_images import reference_folder

FILES = ("3dshapes_samples.png", "3dshapes_fixed_floor_hue.png", "3dshapes.gif")
SCALES = np.array(S.SCALES)
ORIENTATIONS = np.array(S.ORIENTATIONS)
#: the notebook images' factors, in reading order (samples, then fixed floor hue): floor, wall and object
#: hue (tenths), shape, scale index, orientation index (two digits)
NOTEBOOK_LABELS = """
0102604 3851500 4721506 5250408 4580105 6242400 8390510 3202707 2882004 0033507 5961206 1323600 5510010
0173308 9290711 1093510 7262102 8720114 0663007 3750602 4741703 2893703 3321101 5571206 4411106
0470406 0981002 0200214 0150200 0062408 0952102 0173504 0350708 0933400 0131712 0713001 0441300 0122107
0803113 0193110 0670411 0060604 0120210 0133307 0640014 0202208 0101708 0402013 0433602 0900104
""".split()
GIF_HUES = (0.0, 0.6, 0.3)
SHAPE_NAMES = ("cube", "cylinder", "sphere", "capsule")
#: the GIF frames of each shape's size (cube: the orientation traversal; capsule: the scale traversal)
SIZE_FRAMES = {0: list(range(15)), 1: [15], 2: [16], 3: list(range(17, 25))}
#: the module's size constants of each shape
SIZE_CONSTANTS = {0: ("CUBE_HALF_SIZE",), 1: ("CYLINDER_RADIUS", "CYLINDER_HEIGHT"), 2: ("SPHERE_RADIUS",),
                  3: ("CAPSULE_RADIUS", "CAPSULE_LENGTH")}
ROOM = ("CAMERA_DISTANCE", "CAMERA_HEIGHT", "FOV_Y_DEGREES", "WALL_HEIGHT", "ROOM_CENTRE_Y")


def _runs(index: np.ndarray) -> list[tuple[int, int]]:
    """Runs of consecutive integers, (first, last)."""
    breaks = np.flatnonzero(np.diff(index) != 1)
    return list(zip(index[np.r_[0, breaks + 1]], index[np.r_[breaks, len(index) - 1]]))


def load_notebook(folder: Path) -> np.ndarray:
    """The 50 notebook images, (50, 64, 64, 3) uint8: each image of a grid sampled at its pixel centres."""
    from PIL import Image

    out = []
    for name in FILES[:2]:
        a = np.asarray(Image.open(folder / name).convert("RGB"))
        ink = a.astype(int).sum(axis=-1) < 760
        for r0, r1 in _runs(np.flatnonzero(ink.mean(axis=1) > 0.3)):
            for c0, c1 in _runs(np.flatnonzero(ink.mean(axis=0) > 0.3)):
                rows = (r0 + (np.arange(64) + 0.5) * (r1 + 1 - r0) / 64).astype(int)
                cols = (c0 + (np.arange(64) + 0.5) * (c1 + 1 - c0) / 64).astype(int)
                out.append(a[np.ix_(rows, cols)])
    assert len(out) == 50
    return np.stack(out)


def load_gif(folder: Path) -> np.ndarray:
    """The GIF's 53 frames, (53, 64, 64, 3) uint8: the picture inside the 1-pixel grey border, box-filtered."""
    from PIL import Image, ImageSequence

    with Image.open(folder / FILES[2]) as im:
        frames = [f.convert("RGB") for f in ImageSequence.Iterator(im)]
    ink = np.flatnonzero((np.asarray(frames[0]).astype(int).sum(axis=-1) < 760).mean(axis=0) > 0.3)
    box = (ink[0] + 1, ink[0] + 1, ink[-1], ink[-1])  # inside the border, square
    return np.stack([np.asarray(f.crop(box).resize((64, 64), Image.BOX)) for f in frames])


def notebook_factors() -> np.ndarray:
    """Factor values (50, 6) of the notebook images, from NOTEBOOK_LABELS."""
    return np.array([[int(c[0]) / 10, int(c[1]) / 10, int(c[2]) / 10, SCALES[int(c[4])], int(c[3]),
                      ORIENTATIONS[int(c[5:])]] for c in NOTEBOOK_LABELS])


def gif_factors(size: dict[int, float] | None = None) -> np.ndarray:
    """Factor values (25, 6) of GIF frames 0-24; ``size`` multiplies a shape's scale."""
    rows = [(0, 0.75, t) for t in ORIENTATIONS] + [(1, 0.75, 30.0), (2, 0.75, 30.0)] + [(3, s, 30.0) for s in SCALES]
    k = size or {}
    return np.array([[*GIF_HUES, s * k.get(shape, 1.0), shape, t] for shape, s, t in rows])


def mae(a: np.ndarray, b: np.ndarray, axis: tuple[int, ...] | None = None) -> np.ndarray:
    return np.abs(a.astype(np.float64) - b.astype(np.float64)).mean(axis=axis)


def _geometry(f: np.ndarray) -> str:
    return f"{SHAPE_NAMES[int(f[4])]} scale {f[3]:.3f} orientation {f[5]:+.1f}"


def check_labels(gen: S.Shapes3D, images: np.ndarray, factors: np.ndarray) -> list[str]:
    """Where a label is not the best match: its geometry among all 480, each hue among its ten."""
    geometries = np.array([(s, shape, t) for s in SCALES for shape in range(4) for t in ORIENTATIONS])
    notes = []
    for k, (image, f) in enumerate(zip(images, factors)):
        trial = np.concatenate([np.tile(f[:3], (len(geometries), 1)), geometries], axis=1)
        err = mae(gen.render(trial), image[None], axis=(1, 2, 3))
        best, own = int(np.argmin(err)), float(err[np.all(np.isclose(trial, f), axis=1)][0])
        if err[best] < own:
            notes.append(f"image {k}: {_geometry(trial[best])} fits better ({err[best]:.2f}/255) than the label's "
                         f"{_geometry(f)} ({own:.2f}/255)")
        for j in range(3):
            trial = np.tile(f, (10, 1))
            trial[:, j] = np.arange(10) / 10
            hue = trial[np.argmin(mae(gen.render(trial), image[None], axis=(1, 2, 3))), j]
            if hue != f[j]:
                notes.append(f"image {k}: {('floor', 'wall', 'object')[j]} hue {hue} fits better than {f[j]}")
    return notes


def object_area(image: np.ndarray) -> int:
    """Pixels of the GIF's bright green object (the card's area table)."""
    r, g, b = (image[..., c].astype(int) for c in range(3))
    return int(((g > 170) & (b < 100) & (r < 150)).sum())


def object_mask(image: np.ndarray) -> np.ndarray:
    """Pixels where the green object dominates the red floor and the blue wall."""
    r, g, b = (image[..., c].astype(int) for c in range(3))
    return (g > r) & (g > b)


# -- the room's edges -----------------------------------------------------------------------------------

def room_edges(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column: the wall's top (the rows of sky above it, counted from the red channel: sky 153, wall
    0) and the floor line (row 28 plus the rows of wall below it, from the blue channel: floor 0)."""
    red, blue = image[..., 0].astype(float), image[..., 2].astype(float)
    top = np.clip(red[:32] / 153.0, 0.0, 1.0).sum(axis=0)
    wall = np.maximum(blue[28:32].mean(axis=0), 1.0)
    return top, 28 + np.clip(blue[28:] / wall, 0.0, 1.0).sum(axis=0)


def clear_columns(*images: np.ndarray) -> np.ndarray:
    """Columns 1..62 at least two pixels away from the object in any of the images."""
    near = np.zeros(64, bool)
    for image in images:
        near |= np.convolve(object_mask(image)[28:].any(axis=0), np.ones(5), "same") > 0
    near[[0, 63]] = True
    return ~near


def edge_model(p: np.ndarray, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the wall's top and the floor line in each column (through its centre) for the camera and
    room ``p`` (ROOM's order) at view angle ``theta`` degrees: where the column's vertical plane leaves
    the room |x| <= 1, |y - centre| <= 1."""
    distance, height, fov, wall, centre = p
    a, t = math.radians(theta), math.tan(math.radians(fov) / 2)
    eye = np.array([distance * math.sin(a), -distance * math.cos(a)])
    x = ((np.arange(64) + 0.5) / 32 - 1) * t
    d = np.array([-math.sin(a), math.cos(a)])[None] + x[:, None] * np.array([math.cos(a), math.sin(a)])[None]
    lo, hi = np.array([-1.0, centre - 1]), np.array([1.0, centre + 1])
    with np.errstate(divide="ignore"):
        depth = np.where(d > 0, (hi - eye) / d, (lo - eye) / d).min(axis=1)  # the view's depth (forward = 1)
    return 32 * (1 - (wall - height) / (depth * t)), 32 * (1 + height / (depth * t))


def edge_residuals(p: np.ndarray, frames: np.ndarray, clear: list[np.ndarray]) -> np.ndarray:
    out = []
    for image, theta, ok in zip(frames, ORIENTATIONS, clear):
        (top, floor), (mt, mf) = room_edges(image), edge_model(p, theta)
        out += [(mt - top)[1:63], (mf - floor)[ok]]
    return np.concatenate(out)


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


def fit_room(gif: np.ndarray, ours: np.ndarray) -> None:
    frames = gif[:15]
    clear = [clear_columns(a, b) for a, b in zip(frames, ours[:15])]
    module = np.array([getattr(S, n) for n in ROOM])
    fitted = least_squares(lambda p: edge_residuals(p, frames, clear), module).x
    n = len(edge_residuals(module, frames, clear))
    print(f"\nroom and camera, least squares on {n} edge rows of the GIF's orientation traversal (analytic model):")
    print(f"  RMS: fitted {rms(edge_residuals(fitted, frames, clear)):.3f} pixel, "
          f"module's constants {rms(edge_residuals(module, frames, clear)):.3f}")
    check = least_squares(lambda p: edge_residuals(p, ours[:15], clear), module)
    print(f"  {'constant':<16} {'fitted':>8} {'module':>8} {'check':>8}")
    for name, a, b, c in zip(ROOM, fitted, module, check.x):
        print(f"  {name:<16} {a:8.4f} {b:8.4f} {c:8.4f}")
    print(f"  (check: the same fit on our own renders of those frames, {rms(check.fun):.3f} pixel RMS, against the "
          "module's constants: what the measurement and the model recover)")


def fit_sizes(gen: S.Shapes3D, gif: np.ndarray) -> None:
    """Per shape, the factor on its scale (0.85 to 1.15, steps of 0.005) whose object pixels differ least."""
    print("\nobject sizes: a factor on each shape's scale, pixels of object colour matched on its GIF frames:")
    factors = np.linspace(0.85, 1.15, 61)
    for shape, frames in SIZE_FRAMES.items():
        target = object_mask(gif[frames])
        cost = [int((object_mask(gen.render(gif_factors({shape: k})[frames])) ^ target).sum()) for k in factors]
        k = factors[int(np.argmin(cost))]
        values = ", ".join(f"{n} {getattr(S, n) * k:.4f} (module {getattr(S, n)})" for n in SIZE_CONSTANTS[shape])
        print(f"  {SHAPE_NAMES[shape]:<8} factor {k:.3f}: {values}; pixels that differ {min(cost)} "
              f"(module: {cost[int(np.argmin(np.abs(factors - 1)))]}) on {len(frames)} frame(s)")


# -- comparison -------------------------------------------------------------------------------------------

def full_grid_mean(gen: S.Shapes3D) -> np.ndarray:
    """Mean of all 480,000 images (float64), rendered 4,800 at a time."""
    total = np.zeros((64, 64, 3))
    rest = np.array(np.meshgrid(np.arange(10) / 10, SCALES, np.arange(4), ORIENTATIONS, indexing="ij")).reshape(4, -1).T
    for floor in range(10):
        for wall in range(10):
            total += gen.render(np.c_[np.tile([floor / 10, wall / 10], (len(rest), 1)), rest]).sum(axis=0)
    return total / 480_000


def compare_notebook(notebook: np.ndarray, ours: np.ndarray) -> None:
    err = np.abs(ours.astype(float) - notebook.astype(float))
    per_image = err.mean(axis=(1, 2, 3))
    print(f"50 notebook images: mean |difference| {err.mean():.2f}/255 per channel (median image "
          f"{np.median(per_image):.2f}, worst {per_image.max():.2f}); {100 * (err <= 8).mean():.1f} % of the channel "
          f"values within 8/255, 95th percentile {np.percentile(err, 95):.0f}/255")
    print(f"  per channel (R, G, B): {', '.join(f'{v:.2f}' for v in err.mean(axis=(0, 1, 2)))}")
    sky = np.round(np.array(S.SKY) * 255).astype(np.uint8)
    print(f"  top-left pixel is the sky {tuple(int(v) for v in sky)}: in all 50 originals "
          f"{bool((notebook[:, 0, 0] == sky).all())}, in ours {bool((ours[:, 0, 0] == sky).all())}")
    for name, part in (("random", slice(0, 25)), ("fixed floor hue", slice(25, 50))):
        print(f"  mean image of the 25 {name} images vs ours of the same factors: "
              f"{mae(notebook[part].mean(axis=0), ours[part].mean(axis=0)):.2f}/255")


def compare_means(gen: S.Shapes3D, originals: np.ndarray) -> None:
    """The 25 random originals' mean image against the mean of all our images, and the sampling noise of 25."""
    everything = full_grid_mean(gen)
    rng = np.random.default_rng(0)
    noise = [mae(everything, gen.render(np.c_[rng.integers(0, 10, (25, 3)) / 10, rng.choice(SCALES, 25),
                                              rng.integers(0, 4, 25), rng.choice(ORIENTATIONS, 25)]).mean(axis=0))
             for _ in range(20)]
    print(f"  mean of all 480,000 of ours vs the 25 random originals' mean: {mae(everything, originals.mean(0)):.1f}"
          f"/255 (25 random of ours vs all of ours, mean of 20 draws: {np.mean(noise):.1f}/255)")


def compare_gif(gif: np.ndarray, ours: np.ndarray) -> None:
    print("object pixel area (green > 170, red < 150, blue < 100) in the GIF's frames, original / ours:")
    names = [f"capsule scale {s:.3f}" for s in SCALES] + ["cube -30", "cube 0", "cube +30", "cylinder 0.75",
                                                           "sphere 0.75"]
    for name, i in zip(names, [*range(17, 25), 0, 7, 14, 15, 16]):
        print(f"  {name:<20} {object_area(gif[i]):4d} {object_area(ours[i]):4d}")
    d = []
    for a, b in zip(gif[:15], ours[:15]):
        (top, floor), (our_top, our_floor), ok = room_edges(a), room_edges(b), clear_columns(a, b)
        d += [(our_top - top)[1:63], (our_floor - floor)[ok]]
    d = np.concatenate(d)
    print(f"room edges (wall tops, floor line) in the 15 frames of the GIF's orientation traversal, ours - "
          f"original: mean {d.mean():+.2f}, RMS {rms(d):.2f} pixel over {len(d)} rows")


def sheet(images: list[tuple[np.ndarray, np.ndarray]], out: Path, zoom: int = 2) -> None:
    """Pairs (original | ours), five pairs a row, magnified."""
    from PIL import Image

    gap, per_row = 6, 5
    tiles = [np.concatenate([a, np.full((64, 2, 3), 255, np.uint8), b], axis=1) for a, b in images]
    rows = -(-len(tiles) // per_row)
    canvas = np.full((rows * (64 + gap) + gap, per_row * (130 + gap) + gap, 3), 255, np.uint8)
    for k, tile in enumerate(tiles):
        y, x = gap + (k // per_row) * (64 + gap), gap + (k % per_row) * (130 + gap)
        canvas[y:y + 64, x:x + 130] = tile
    Image.fromarray(canvas).resize((canvas.shape[1] * zoom, canvas.shape[0] * zoom), Image.NEAREST).save(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", help="folder with the 3dshapes pictures (default: $FACTORBENCH_REFERENCE_IMAGES, "
                                        "else ../shared/data/reference-images)")
    ap.add_argument("--fit", action="store_true", help="re-fit the camera, the room and the objects' sizes")
    ap.add_argument("--out", type=Path, help="write a PNG of the originals (left) beside ours (right)")
    args = ap.parse_args(argv)
    folder = reference_folder(args.reference, FILES)
    notebook, gif = load_notebook(folder), load_gif(folder)
    gen = get("shapes3d")
    factors = notebook_factors()
    ours, gif_ours = gen.render(factors), gen.render(gif_factors())
    notes = check_labels(gen, notebook, factors)
    print(f"notebook labels: {50 - len({n.split(':')[0] for n in notes})} of 50 are the best match"
          + "".join(f"\n  {n}" for n in notes))
    compare_notebook(notebook, ours)
    compare_means(gen, notebook[:25])
    compare_gif(gif, gif_ours)
    if args.fit:
        fit_room(gif, gif_ours)
        fit_sizes(gen, gif)
    if args.out:
        sheet(list(zip(notebook, ours)) + list(zip(gif[:25], gif_ours)), args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
