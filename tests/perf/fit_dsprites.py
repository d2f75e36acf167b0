"""Fit and check the dsprites generator against pictures of the original dSprites.

The pictures are not in the repository. ``--reference DIR`` (or ``$FACTORBENCH_DSPRITES_REFERENCE``)
names a folder holding, from deepmind/dsprites-dataset (Apache 2.0):

* ``dsprites.gif``: the README's animation, 320 frames of real 64 x 64 dSprites images;
* ``dsprites_density.png`` (optional): the notebook's mean of 5,000 random images, drawn by imshow.

The animation's frames are traversals (:func:`gif_frames` labels them): for the heart, ellipse and
square in turn, scale up, down and up at orientation 0 (18 frames), orientation 0..39 at scale 1 (40);
for the heart only, the position around the square posY 0..31 at posX 0, posX 0..31 at posY 1, posY
back at posX 1 and posX back at posY 0 (128); then scale down (6). All at position (0, 0) unless
traversed. The labels are checked by the fit itself: a wrong label would not reproduce.

Run from the repository root::

    python tests/perf/fit_dsprites.py --reference DIR                    # original vs factorbench
    python tests/perf/fit_dsprites.py --reference DIR --fit              # search the geometry again
    python tests/perf/fit_dsprites.py --reference DIR --sheet out.png    # originals above, renders below
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

import numpy as np

from factorbench.generators.dsprites import GEOMETRY, Geometry, draw

SCALES = np.linspace(0.5, 1.0, 6)
ORIENTATIONS = np.linspace(0.0, 2.0 * np.pi, 40)
POSITIONS = np.linspace(0.0, 1.0, 32)
SHAPE_NAMES = {1: "square", 2: "ellipse", 3: "heart"}


def reference_dir(arg: str | None = None) -> Path | None:
    """The folder of reference pictures, if given and present."""
    path = arg or os.environ.get("FACTORBENCH_DSPRITES_REFERENCE")
    if path and (Path(path) / "dsprites.gif").is_file():
        return Path(path)
    return None


def load_gif(folder: Path) -> np.ndarray:
    """The animation's frames as (320, 64, 64) bool (white = True)."""
    from PIL import Image, ImageSequence

    with Image.open(folder / "dsprites.gif") as im:
        return np.stack([np.asarray(f.convert("L")) > 127 for f in ImageSequence.Iterator(im)])


def gif_frames() -> np.ndarray:
    """Classes (shape value, scale, orientation, posX, posY) of the 320 frames, (320, 5) int."""
    rows: list[tuple[int, int, int, int, int]] = []
    for shape in (3, 2, 1):
        for s in [*range(6), *range(5, -1, -1), *range(6)]:
            rows.append((shape, s, 0, 0, 0))
        rows += [(shape, 5, o, 0, 0) for o in range(40)]
        if shape == 3:
            rows += [(shape, 5, 0, 0, y) for y in range(32)]
            rows += [(shape, 5, 0, x, 31) for x in range(32)]
            rows += [(shape, 5, 0, 31, y) for y in range(31, -1, -1)]
            rows += [(shape, 5, 0, x, 0) for x in range(31, -1, -1)]
        rows += [(shape, s, 0, 0, 0) for s in range(5, -1, -1)]
    assert len(rows) == 320
    return np.array(rows)


def orientation_frames(shape: int) -> list[int]:
    """The 40 frames of a shape's orientation traversal (scale 1, position 0), orientation 0..39."""
    start = {3: 0, 2: 192, 1: 256}[shape] + 18
    return list(range(start, start + 40))


def factor_values(classes: np.ndarray) -> np.ndarray:
    return np.stack([classes[:, 0].astype(float), SCALES[classes[:, 1]], ORIENTATIONS[classes[:, 2]],
                     POSITIONS[classes[:, 3]], POSITIONS[classes[:, 4]]], axis=1)


def render_frames(classes: np.ndarray, geometry: Geometry = GEOMETRY) -> np.ndarray:
    return draw(factor_values(classes), geometry) > 0


def mismatch(frames: np.ndarray, classes: np.ndarray, shape: int, geometry: Geometry) -> tuple[int, int]:
    """(pixels that differ, white pixels of the originals) over the frames of one shape."""
    sel = classes[:, 0] == shape
    ours = render_frames(classes[sel], geometry)
    return int((ours ^ frames[sel]).sum()), int(frames[sel].sum())


def centroids(masks: np.ndarray) -> np.ndarray:
    """(row, column) centroid of each mask, pixel indices."""
    r, c = np.mgrid[:64, :64]
    area = masks.sum(axis=(1, 2))
    return np.stack([(masks * r).sum(axis=(1, 2)) / area, (masks * c).sum(axis=(1, 2)) / area], axis=1)


# -- fitting -------------------------------------------------------------------------------------------

def _descend(cost, params: dict[str, float], steps: list[float]) -> tuple[dict[str, float], int]:
    best = cost(params)
    for step in steps:
        improved = True
        while improved:
            improved = False
            for key in params:
                for sign in (-1, 1):
                    trial = dict(params, **{key: round(params[key] + sign * step, 6)})
                    value = cost(trial)
                    if value < best:
                        params, best, improved = trial, value, True
    return params, best


def fit(frames: np.ndarray, classes: np.ndarray, start: Geometry = GEOMETRY) -> Geometry:
    """Coordinate descent on the pixels that differ: the threshold's slope on the squares and ellipses,
    the square's side on the squares, the ellipse's axes on the ellipses, the heart's five numbers on the
    hearts. A local search: start it near a solution (the current geometry)."""
    geo = start
    def cost(g: Geometry) -> int:
        return sum(mismatch(frames, classes, shape, g)[0] for shape in (1, 2))

    slope = _descend(lambda q: cost(dataclasses.replace(geo, threshold_slope=q["k"])), {"k": geo.threshold_slope},
                     [0.01, 0.005, 0.0025])[0]["k"]
    geo = dataclasses.replace(geo, threshold_slope=slope)
    half = _descend(lambda q: mismatch(frames, classes, 1, dataclasses.replace(geo, square_half=q["h"]))[0],
                    {"h": geo.square_half}, [0.1, 0.05, 0.025])[0]["h"]
    geo = dataclasses.replace(geo, square_half=half)
    e = mismatch(frames, classes, 1, geo)[0]
    print(f"threshold slope {geo.threshold_slope}; square: half side {geo.square_half}: {e} pixels differ", flush=True)
    el = lambda p: mismatch(frames, classes, 2, dataclasses.replace(geo, ellipse_axes=(p["a"], p["b"])))[0]
    p, e = _descend(el, {"a": geo.ellipse_axes[0], "b": geo.ellipse_axes[1]}, [0.2, 0.1, 0.05, 0.025])
    geo = dataclasses.replace(geo, ellipse_axes=(p["a"], p["b"]))
    print(f"ellipse: axes {geo.ellipse_axes}: {e} pixels differ", flush=True)
    names = ("rx", "ry", "d", "yc", "tip")
    he = lambda p: mismatch(frames, classes, 3, dataclasses.replace(geo, heart=tuple(p[k] for k in names)))[0]
    p, e = _descend(he, dict(zip(names, geo.heart)), [0.2, 0.1, 0.05, 0.025])
    geo = dataclasses.replace(geo, heart=tuple(p[k] for k in names))
    print(f"heart: {geo.heart}: {e} pixels differ", flush=True)
    return geo


# -- measuring -----------------------------------------------------------------------------------------

def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(intercept + slope)  # at position 0 and 1


def density_of_png(folder: Path) -> np.ndarray | None:
    """The notebook's mean image, 64 x 64 in [0, 1] (imshow normalised it from its minimum to maximum)."""
    path = folder / "dsprites_density.png"
    if not path.is_file():
        return None
    from PIL import Image

    rgb = np.asarray(Image.open(path).convert("RGB")).astype(float)[..., 0]
    inner = np.argwhere(rgb < 250)  # the axes (the figure around it is white)
    (r0, c0), (r1, c1) = inner.min(axis=0), inner.max(axis=0) + 1
    rows = (r0 + (np.arange(64) + 0.5) * (r1 - r0) / 64).astype(int)
    cols = (c0 + (np.arange(64) + 0.5) * (c1 - c0) / 64).astype(int)
    return rgb[np.ix_(rows, cols)] / 255.0


def mean_image(rows: np.ndarray | None = None, batch: int = 8192) -> np.ndarray:
    """Mean of our images over the full grid (or the given sample indices), in [0, 1]."""
    grid = (3, 6, 40, 32, 32)
    idx = np.arange(int(np.prod(grid))) if rows is None else np.asarray(rows)
    total = np.zeros((64, 64))
    for a in range(0, len(idx), batch):
        classes = np.stack(np.unravel_index(idx[a:a + batch], grid), axis=1)
        classes[:, 0] += 1
        total += (render_frames(classes)).sum(axis=0)
    return total / len(idx)


def _extent(profile: np.ndarray, level: float = 0.5) -> tuple[float, float]:
    """First and last index where a profile (normalised to its maximum) reaches ``level``, interpolated."""
    p = profile / profile.max()
    above = np.flatnonzero(p >= level)
    i, j = above[0], above[-1]
    left = i - (p[i] - level) / (p[i] - p[i - 1]) if i > 0 else float(i)
    right = j + (p[j] - level) / (p[j] - p[j + 1]) if j < len(p) - 1 else float(j)
    return float(left), float(right)


def report(folder: Path, geometry: Geometry = GEOMETRY, density_sample: int | None = None) -> dict:
    """Original vs factorbench on the animation's frames and (if present) the notebook's mean image;
    ``density_sample``: average that many random images of ours instead of all 737,280."""
    frames, classes = load_gif(folder), gif_frames()
    ours = render_frames(classes, geometry)
    out: dict = {"mismatch": {}, "area": {}, "orientation_area": {}}
    for shape, name in SHAPE_NAMES.items():
        out["mismatch"][name] = mismatch(frames, classes, shape, geometry)
        first = {int(c[1]): i for i, c in reversed(list(enumerate(classes)))
                 if c[0] == shape and c[2] == 0 and c[3] == 0 and c[4] == 0}
        out["area"][name] = [(int(frames[first[s]].sum()), int(ours[first[s]].sum())) for s in range(6)]
        turn = orientation_frames(shape)
        assert classes[turn, 2].tolist() == list(range(40))
        a, b = frames[turn].sum(axis=(1, 2)), ours[turn].sum(axis=(1, 2))
        out["orientation_area"][name] = {"original mean, min, max": (float(a.mean()), int(a.min()), int(a.max())),
                                         "factorbench mean, min, max": (float(b.mean()), int(b.min()), int(b.max()))}
    heart_x = [i for i, c in enumerate(classes) if c[0] == 3 and c[1] == 5 and c[2] == 0 and c[4] in (0, 31)
               and (c[3] not in (0, 31))]
    heart_y = [i for i, c in enumerate(classes) if c[0] == 3 and c[1] == 5 and c[2] == 0 and c[3] in (0, 31)
               and (c[4] not in (0, 31))]
    for label, sel, axis, col in (("posX -> column", heart_x, 1, 3), ("posY -> row", heart_y, 0, 4)):
        pos = POSITIONS[classes[sel, col]]
        out[label] = (_line(pos, centroids(frames[sel])[:, axis]), _line(pos, centroids(ours[sel])[:, axis]))
    # rotation: angle of the heart's centroid about the sprite's centre over the orientation traversal
    turn = orientation_frames(3)
    for label, masks in (("original", frames[turn]), ("factorbench", ours[turn])):
        cen = centroids(masks) - 15.5
        ang = np.unwrap(np.arctan2(-cen[:, 0], cen[:, 1]))  # counter-clockwise as displayed
        out[f"heart centroid turn per radian of orientation, counter-clockwise ({label})"] = float(
            np.polyfit(ORIENTATIONS[classes[turn, 2]], ang, 1)[0])
    density = density_of_png(folder)
    if density is not None:
        rng = np.random.default_rng(0)
        mine = mean_image(None if density_sample is None else rng.choice(737280, density_sample, replace=False))
        norm = (mine - mine.min()) / (mine.max() - mine.min())
        sample = mean_image(rng.choice(737280, 5000, replace=False))
        sample = (sample - sample.min()) / (sample.max() - sample.min())
        out["density"] = {
            "mean |original - factorbench| (0..1)": float(np.abs(density - norm).mean()),
            "same for 5,000 of ours vs ours (sampling noise of the original's 5,000)": float(
                np.abs(sample - norm).mean()),
            "column 50% extent original": _extent(density.mean(axis=0)),
            "column 50% extent factorbench": _extent(norm.mean(axis=0)),
            "row 50% extent original": _extent(density.mean(axis=1)),
            "row 50% extent factorbench": _extent(norm.mean(axis=1)),
            "mean pixel value of ours (all images)": float(mine.mean()),
        }
    return out


def contact_sheet(folder: Path, out: Path, geometry: Geometry = GEOMETRY) -> None:
    """Originals (upper row of each pair) above factorbench's renders of the same factors (lower row),
    magnified 3 times, for frames of every shape, scale, several orientations and positions."""
    from PIL import Image

    frames, classes = load_gif(folder), gif_frames()
    picks = [0, 2, 5, 21, 28, 33, 44, 51, 70, 100, 130, 170,               # heart
             192, 194, 197, 213, 218, 225, 232, 240,                        # ellipse
             256, 258, 261, 276, 279, 284, 290, 300]                        # square
    ours = render_frames(classes[picks], geometry)
    per_row, zoom, gap = 14, 3, 6
    n_rows = -(-len(picks) // per_row)
    tile = 64 * zoom
    sheet = np.full((n_rows * (2 * tile + 3 * gap), per_row * (tile + gap) + gap), 110, np.uint8)
    for k, (orig, mine) in enumerate(zip(frames[picks], ours)):
        r, c = divmod(k, per_row)
        y, x = r * (2 * tile + 3 * gap) + gap, c * (tile + gap) + gap
        sheet[y:y + tile, x:x + tile] = np.kron(orig.astype(np.uint8) * 255, np.ones((zoom, zoom), np.uint8))
        sheet[y + tile + gap // 2:y + 2 * tile + gap // 2, x:x + tile] = np.kron(mine.astype(np.uint8) * 255,
                                                                                 np.ones((zoom, zoom), np.uint8))
    from PIL import ImageDraw

    label_width = 110
    canvas = Image.new("L", (sheet.shape[1] + label_width, sheet.shape[0]), 110)
    canvas.paste(Image.fromarray(sheet), (label_width, 0))
    pen = ImageDraw.Draw(canvas)
    for r in range(n_rows):
        y = r * (2 * tile + 3 * gap) + gap
        pen.text((8, y + tile // 2 - 6), "original", fill=255)
        pen.text((8, y + tile + gap // 2 + tile // 2 - 6), "factorbench", fill=255)
    canvas.save(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", help="folder with dsprites.gif (default: $FACTORBENCH_DSPRITES_REFERENCE)")
    ap.add_argument("--fit", action="store_true", help="search the geometry again, starting from the current one")
    ap.add_argument("--sheet", type=Path, help="write a PNG of originals above our renders")
    args = ap.parse_args(argv)
    folder = reference_dir(args.reference)
    if folder is None:
        print("no dsprites.gif found: give --reference DIR or set FACTORBENCH_DSPRITES_REFERENCE", file=sys.stderr)
        return 2
    geometry = GEOMETRY
    if args.fit:
        geometry = fit(load_gif(folder), gif_frames())
        print(geometry)
    for key, value in report(folder, geometry).items():
        if isinstance(value, dict):
            print(key)
            for k, v in value.items():
                print(f"  {k}: {v}")
        else:
            print(f"{key}: {value}")
    if args.sheet:
        contact_sheet(folder, args.sheet, geometry)
        print(f"wrote {args.sheet}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
