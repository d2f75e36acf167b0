"""The MPI3D-toy stand-in: grid and factor order, colour separation, joints, sizes, determinism, parameters."""

import math

import numpy as np
import pytest

import factorbench.generators.mpi3d_toy as mpi3d  # noqa: F401  (registers the dataset)
from factorbench.generators import FactorbenchError, get

SIZES = (6, 6, 2, 3, 3, 40, 40)
NAMES = ("object_color", "object_shape", "object_size", "camera_height", "background_color", "horizontal_axis",
         "vertical_axis")
WHITE, BLUE, CENTER, LARGE, SMALL = 0, 3, 1, 1, 0


@pytest.fixture(scope="module")
def gen():
    return get("mpi3d-toy")


def _rows(*tuples):
    return np.array(tuples, dtype=np.float64)


def _object_mask(gen, shape, size, height, h, v):
    """Pixels that change between a white and a blue object (the object's pixels, by the colour model)."""
    white, blue = gen.render(_rows((WHITE, shape, size, height, 0, h, v), (BLUE, shape, size, height, 0, h, v)))
    return np.any(white != blue, axis=-1)


def _centroid(mask):
    ys, xs = np.nonzero(mask)
    return xs.mean(), ys.mean()


def test_grid_names_order_and_values(gen):
    assert gen.full_size() == 1_036_800 and gen.grid_shape == SIZES and gen.image_shape == (64, 64, 3)
    factors = gen.factors()
    assert tuple(f.name for f in factors) == NAMES
    assert [f.kind for f in factors] == ["categorical"] * 5 + ["continuous"] * 2
    for f, n in zip(factors, SIZES):
        assert f.values == tuple(float(i) for i in range(n))  # class indices, as disentanglement_lib
    assert factors[0].description.startswith("0 white, 1 green, 2 red, 3 blue, 4 brown, 5 olive")
    assert factors[1].description == "0 cone, 1 cube, 2 cylinder, 3 hexagonal, 4 pyramid, 5 sphere"
    spec = gen.spec()
    _, classes = gen.sample_factors(spec, 0, 42)  # vertical_axis varies fastest, then horizontal_axis
    assert classes[:3].tolist() == [[0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 2]]
    assert classes[40].tolist() == [0, 0, 0, 0, 0, 1, 0]
    # the original's reshape [6, 6, 2, 3, 3, 40, 40]: strides 172800, 28800, 14400, 4800, 1600, 40, 1
    row = 3 * 172_800 + 4 * 28_800 + 1 * 14_400 + 1 * 4_800 + 1 * 1_600 + 22 * 40 + 21
    values, classes = gen.sample_factors(spec, row, row + 1)
    assert classes[0].tolist() == [3, 4, 1, 1, 1, 22, 21] and values[0].tolist() == [3, 4, 1, 1, 1, 22, 21]
    _, classes = gen.sample_factors(spec, spec.n - 1, spec.n)
    assert classes[0].tolist() == [n - 1 for n in SIZES]
    assert "stand-in" in gen.description and "Gondal" in gen.citation and "NeurIPS" not in gen.citation


@pytest.mark.parametrize("geometry", [(0, LARGE, CENTER, 22, 21), (2, SMALL, 0, 39, 27), (4, LARGE, 2, 1, 22),
                                      (5, SMALL, CENTER, 30, 5), (3, LARGE, 0, 10, 35)])
def test_object_colour_changes_only_the_objects_pixels(gen, geometry):
    shape, size, height, h, v = geometry
    images = gen.render(_rows(*[(c, shape, size, height, 1, h, v) for c in range(6)]))
    changed = np.any(images != images[:1], axis=(0, -1))
    assert changed.sum() >= 15
    # every changed pixel lies within the object's bounding sphere, projected
    camera = mpi3d._Camera.of_height(height, 64)
    end, frame = mpi3d.arm_pose(np.array([h]), np.array([v]))
    centre = end[0] + mpi3d._half_length(shape, mpi3d.OBJECT_SIZES[size]) * frame[0, :, 2]
    x, y, z = (float(a) for a in camera.project(centre))
    reach = camera.focal * mpi3d._object_radius(mpi3d.OBJECT_SIZES[size]) / z + 1.5
    ys, xs = np.nonzero(changed)
    assert np.hypot(xs + 0.5 - x, ys + 0.5 - y).max() < reach
    # the object's brightest pixel is the colour itself, shaded: white is brighter than brown everywhere
    assert np.all(images[0][changed].astype(int).sum(-1) >= images[4][changed].astype(int).sum(-1))


def _ring_pixels(height, margin=0.02):
    """Pixels whose footprint on the floor meets the ring (from their corners' rays)."""
    camera = mpi3d._Camera.of_height(height, 64)
    corners = np.arange(65, dtype=np.float64)
    ys, xs = np.meshgrid(corners, corners, indexing="ij")
    d = camera.rays(xs, ys)
    t = -camera.eye[2] / np.minimum(d[..., 2], -1e-9)
    r = np.hypot(camera.eye[0] + t * d[..., 0], camera.eye[1] + t * d[..., 1])
    r = np.where(d[..., 2] < 0, r, np.inf)
    quad = np.stack([r[:-1, :-1], r[1:, :-1], r[:-1, 1:], r[1:, 1:]])
    return (quad.min(axis=0) <= mpi3d.RING_OUTER + margin) & (quad.max(axis=0) >= mpi3d.RING_INNER - margin)


@pytest.mark.parametrize("height", [0, 1, 2])
def test_background_colour_changes_only_the_rings_pixels(gen, height):
    images = gen.render(_rows(*[(2, 1, LARGE, height, b, 20, 20) for b in range(3)]))
    changed = np.any(images != images[:1], axis=(0, -1))
    ring = _ring_pixels(height)
    assert changed.sum() > 200 and not (changed & ~ring).any()
    # a ring pixel away from the arm and the image's edge shows the ring colour; the floor its grey
    col = 6
    rows = np.flatnonzero(_ring_pixels(height, margin=-0.03)[:, col])
    for b in range(3):
        assert np.abs(images[b, rows[len(rows) // 2], col].astype(int) - mpi3d.BACKGROUND_COLOURS[b] * 255).max() <= 1
    assert np.all(images[:, 63, 0] == 52)


def test_moving_a_joint_moves_the_object(gen):
    # the rod horizontal along the arm (horizontal_axis 39): the first joint swings it from the left,
    # behind the arm, to the right (azimuth 165 to -15 degrees)
    xs = [_centroid(_object_mask(gen, 1, LARGE, CENTER, 39, v))[0] for v in range(0, 40, 3)]
    assert np.all(np.diff(xs) > 0) and xs[0] < 20 and xs[-1] > 44
    # the arm pointing left (vertical_axis 0): the second joint lifts the rod from the right, over the top,
    # to the left (and a little away); the object is highest when the rod is vertical (horizontal_axis 19.5)
    centroids = np.array([_centroid(_object_mask(gen, 1, LARGE, CENTER, h, 0)) for h in range(0, 37, 3)])
    assert np.all(np.diff(centroids[:, 0]) < 0) and centroids[0, 0] - centroids[-1, 0] > 30
    assert 5 <= np.argmin(centroids[:, 1]) <= 8  # h = 15..24
    # a joint between two positions puts the object between their images
    half = _centroid(_object_mask(gen, 1, LARGE, CENTER, 39, 10.5))[0]
    assert _centroid(_object_mask(gen, 1, LARGE, CENTER, 39, 10))[0] < half < _centroid(
        _object_mask(gen, 1, LARGE, CENTER, 39, 11))[0]


@pytest.mark.parametrize("shape", range(6))
def test_a_large_object_covers_more_pixels_than_a_small_one(gen, shape):
    for height, h, v in ((CENTER, 22, 21), (0, 39, 27), (2, 5, 30)):
        small = _object_mask(gen, shape, SMALL, height, h, v).sum()
        large = _object_mask(gen, shape, LARGE, height, h, v).sum()
        assert small > 5 and 1.5 < large / small < 2.7  # twice the area, as in the original


def test_images_do_not_depend_on_batches_ranges_or_what_was_drawn_before(gen):
    spec = gen.spec()
    start = 4 * 28_800 + 1_600 - 300  # crosses a change of background colour
    values, _ = gen.sample_factors(spec, start, start + 700)
    parts = [gen.sample_factors(spec, a, min(a + 97, start + 700))[0] for a in range(start, start + 700, 97)]
    assert np.array_equal(np.concatenate(parts), values)
    whole = gen.render(values)
    fresh = get("mpi3d-toy")
    assert np.array_equal(np.concatenate([fresh.render(p) for p in parts]), whole)
    assert np.array_equal(get("mpi3d-toy").render(values[::-1])[::-1], whole)
    assert np.array_equal(gen.render(values), whole)  # drawn again from the kept maps
    rows = np.random.default_rng(1).choice(spec.n, 40, replace=False)
    scattered = np.concatenate([gen.sample_factors(spec, r, r + 1)[0] for r in rows])
    assert np.array_equal(get("mpi3d-toy").render(scattered), np.concatenate([gen.render(s[None]) for s in scattered]))


def test_kept_maps_stay_within_their_memory_and_change_nothing(monkeypatch):
    values = get("mpi3d-toy").sample_factors(get("mpi3d-toy").spec(), 0, 2 * 4_800)[0][::7]
    expected = get("mpi3d-toy").render(values)
    monkeypatch.setattr(mpi3d, "LAYER_CACHE_BYTES", 40_000)
    tight = get("mpi3d-toy")
    assert np.array_equal(np.concatenate([tight.render(values[a:a + 50]) for a in range(0, len(values), 50)]), expected)
    assert np.array_equal(tight.render(values), expected)
    assert 0 < tight._kept_bytes <= 40_000 and len(tight._layers) < len(values)


def test_image_size_samples_and_step():
    small = get("mpi3d-toy", {"image_size": 32, "samples": 1})
    image = small.render(_rows((2, 1, LARGE, CENTER, 1, 20, 20)))
    assert image.shape == (1, 32, 32, 3) and image.dtype == np.uint8
    a, b = (get("mpi3d-toy", {"samples": s}).render(_rows((2, 1, LARGE, CENTER, 1, 20, 20)))[0] for s in (4, 16))
    assert 0 < np.abs(a.astype(int) - b).mean() < 2  # antialiasing changes edges only
    sub = get("mpi3d-toy", {"step": "1,2,1,1,1,8,8"})
    assert sub.full_size() == 6 * 3 * 2 * 3 * 3 * 5 * 5 and sub.factors()[1].values == (0.0, 2.0, 4.0)
    assert sub.spec().params == {"image_size": 64, "samples": 4, "step": [1, 2, 1, 1, 1, 8, 8]}
    values, _ = sub.sample_factors(sub.spec(), 30, 31)
    assert np.array_equal(sub.render(values), get("mpi3d-toy").render(values))  # the same images


@pytest.mark.parametrize("params, message", [
    ({"image_size": 8}, "image_size must be an integer from 16 to 512"),
    ({"image_size": "big"}, "'image_size' expects int"),
    ({"samples": 3}, "samples .* must be 1, 4, 9 or 16, got 3"),
    ({"colour": 1}, "unknown parameter 'colour'"),
    ({"step": "1,1"}, "2 strides given but the dataset has 7 factors"),
    ({"step": "1,1,1,1,1,40,1"}, "stride 40 leaves 1 value of factor 'horizontal_axis'"),
])
def test_bad_parameters_are_refused(params, message):
    with pytest.raises(FactorbenchError, match=message):
        get("mpi3d-toy", params)


@pytest.mark.parametrize("row, message", [
    ((6, 0, 0, 0, 0, 0, 0), "object_color must be one of 0..5, got 6"),
    ((0, 2.5, 0, 0, 0, 0, 0), "object_shape must be one of 0..5, got 2.5"),
    ((0, 0, -1, 0, 0, 0, 0), "object_size must be one of 0..1"),
    ((0, 0, 0, math.nan, 0, 0, 0), "camera_height must be one of 0..2"),
    ((0, 0, 0, 0, 3, 0, 0), "background_color must be one of 0..2"),
    ((0, 0, 0, 0, 0, 39.5, 0), r"horizontal_axis must lie in \[0, 39\]"),
    ((0, 0, 0, 0, 0, 0, -0.1), r"vertical_axis must lie in \[0, 39\]"),
])
def test_bad_factor_values_are_refused(gen, row, message):
    with pytest.raises(FactorbenchError, match=message):
        gen.render(_rows(row))
    with pytest.raises(FactorbenchError, match="must be an \\(M, 7\\) array"):
        gen.render(np.zeros((2, 6)))
