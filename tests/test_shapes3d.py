"""Shapes3D: the factor grid and its order, which pixels each factor moves, the scene, the backends."""

import math

import numpy as np
import pytest
from scipy.ndimage import binary_erosion

import factorbench.generators.shapes3d as shapes3d  # registers the dataset
from factorbench.benchmark import load
from factorbench.generators import FactorbenchError, get, write_dataset
from factorbench.generators.render.gl import GlBackend

FAST = {"samples": 4}
SKY = (153, 226, 249)


@pytest.fixture(scope="module")
def gen():
    return get("shapes3d", FAST, backend="cpu")


def rows(*changes, base=(0.0, 0.5, 0.3, 1.0, 0.0, 0.0)):
    """Factor rows (floor_hue, wall_hue, object_hue, scale, shape, orientation): ``base`` with each dict of
    changes applied in turn."""
    names = ("floor_hue", "wall_hue", "object_hue", "scale", "shape", "orientation")
    out = []
    for change in changes or ({},):
        row = dict(zip(names, base))
        row.update(change)
        out.append([row[n] for n in names])
    return np.array(out, dtype=np.float64)


def test_factors_are_the_originals_in_the_originals_order():
    g = get("shapes3d")
    assert [f.name for f in g.factors()] == ["floor_hue", "wall_hue", "object_hue", "scale", "shape", "orientation"]
    assert g.full_size() == 480_000 and g.grid_shape == (10, 10, 10, 8, 4, 15) and g.image_shape == (64, 64, 3)
    hue = g.factors()[0]
    assert hue.values == tuple(k / 10 for k in range(10)) and hue.kind == "cyclic" and hue.period == 1.0
    assert np.array_equal(g.factors()[3].values, np.linspace(0.75, 1.25, 8))
    assert g.factors()[4].values == (0.0, 1.0, 2.0, 3.0) and g.factors()[4].kind == "categorical"
    assert np.array_equal(g.factors()[5].values, np.linspace(-30, 30, 15))
    # the original's index of a class tuple (its notebook's get_index): orientation fastest, floor hue slowest
    spec = g.spec()
    bases = np.array([48_000, 4_800, 480, 60, 15, 1])
    for classes in ([0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 1, 0], [0, 0, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0],
                    [9, 3, 7, 5, 2, 11], [4, 9, 0, 7, 3, 14]):
        index = int(np.dot(classes, bases))
        values, got = g.sample_factors(spec, index, index + 1)
        assert got[0].tolist() == classes
        assert values[0].tolist() == [f.values[c] for f, c in zip(g.factors(), classes)]


def test_each_hue_colours_only_its_own_surface(gen):
    base, floor, wall, obj = gen.render(rows({}, {"floor_hue": 0.6}, {"wall_hue": 0.9}, {"object_hue": 0.7}))
    moved = lambda img: np.any(img != base, axis=-1)  # noqa: E731
    on_object = binary_erosion(moved(obj), iterations=1)
    assert 300 < on_object.sum() < 1500
    assert not moved(floor)[on_object].any() and not moved(wall)[on_object].any()
    assert (moved(floor) & moved(wall) & moved(obj)).sum() <= 4  # where the outline crosses the floor line
    # the sky (the top 14 rows) never changes; the floor is below the horizon, the walls do not reach the
    # bottom rows, the object touches neither
    assert all((img[:14] == SKY).all() for img in (base, floor, wall, obj))
    assert not moved(floor)[:32].any() and not moved(wall)[56:].any() and not moved(obj)[:20].any()
    # flat colours, written linearly: a red floor has no green or blue, and neither has a cyan object red
    # beyond the white sheen
    floor_only = moved(floor) & ~moved(obj) & ~moved(wall)
    assert (base[floor_only][:, 1:] == 0).all()
    cyan = gen.render(rows({"object_hue": 0.5}))[0]
    assert cyan[on_object][:, 0].max() <= round(255 * shapes3d.SHEEN) + 1


def test_gl_and_cpu_agree():
    if GlBackend.unavailable_reason() is not None:
        pytest.skip(f"gl backend unavailable: {GlBackend.unavailable_reason()}")
    values = rows({}, {"shape": 1, "orientation": -30.0, "scale": 0.75}, {"shape": 2, "orientation": 21.4},
                  {"shape": 3, "scale": 1.25, "orientation": 30.0, "floor_hue": 0.2, "wall_hue": 0.0})
    for samples in (1, 16):
        a = get("shapes3d", {"samples": samples}, backend="gl").render(values).astype(int)
        b = get("shapes3d", {"samples": samples}, backend="cpu").render(values).astype(int)
        diff = np.abs(a - b)
        assert diff.mean() < 0.5 and (diff <= 8).mean() > 0.99, samples


def test_pixels_do_not_depend_on_the_batch(gen):
    values = rows({}, {"shape": 1, "orientation": 30.0}, {"shape": 2, "scale": 0.75}, {"floor_hue": 0.9},
                  {"shape": 3, "orientation": -25.714285714285715}, {"shape": 1, "orientation": 30.0})
    together = gen.render(values)
    fresh = get("shapes3d", FAST, backend="cpu")  # empty caches, filled in another order
    alone = np.concatenate([fresh.render(values[i:i + 1]) for i in reversed(range(len(values)))][::-1])
    assert together.tobytes() == alone.tobytes()
    assert together[1].tobytes() == together[5].tobytes() and together[0].tobytes() != together[1].tobytes()
    # the factor values of any range of the grid are those of the whole grid
    spec = gen.spec()
    whole = gen.sample_factors(spec, 0, 1000)
    parts = [gen.sample_factors(spec, a, b) for a, b in ((0, 97), (97, 500), (500, 1000))]
    assert np.array_equal(np.concatenate([p[0] for p in parts]), whole[0])
    assert np.array_equal(np.concatenate([p[1] for p in parts]), whole[1])


def test_geometry_is_mirror_symmetric_and_the_light_is_on_the_left(gen):
    """Turning the view angle to its negative mirrors what is seen (the room and the objects are symmetric
    about the plane x = 0); the light is not: it stands to the left, so shadows fall to the right."""
    for theta in (12.857142857142854, 30.0):
        for shape in (0, 3):
            maps = gen._object_maps([(shape, 1.0, theta), (shape, 1.0, -theta)])
            cover = maps["coverage"]
            assert np.abs(cover[0][:, ::-1] - cover[1]).max() <= 2 / 16 + 1e-9
            assert np.abs(cover[0][:, ::-1] - cover[1]).mean() < 1e-3
            for k in (0, 1):
                cols = np.arange(64)
                object_x = (cover[k].sum(axis=0) * cols).sum() / cover[k].sum()
                shadow = maps["shadow"][k] * (1 - cover[k])
                assert (shadow.sum(axis=0) * cols).sum() / shadow.sum() > object_x + 1
        left, right = gen._room_maps(theta), gen._room_maps(-theta)
        assert np.abs(left["sky"][:, ::-1] - right["sky"]).max() <= 2 / 16 + 1e-9


def test_the_room_as_in_the_original(gen):
    """Measured on the original's traversal: at view angle 0 the walls' top edge is at row 17.3 and the floor
    line at row 40.5, with no corner in view; at -30 the right-hand corner is at column 44, at +30 the
    left-hand one at column 20 (the side walls are darker than the back wall)."""
    sky = gen._room_maps(0.0)["sky"]
    assert sky[:, 5:59].sum(axis=0).mean() == pytest.approx(17.3, abs=0.4)
    floor = gen._room_maps(0.0)["floor_ambient"] / shapes3d.AMBIENT["floor"]
    assert 64 - floor[:, 5:59].sum(axis=0).mean() == pytest.approx(40.5, abs=0.4)
    for theta, corner in ((0.0, None), (-30.0, 44), (30.0, 20)):
        wall = gen._room_maps(theta)["wall"][28]
        dark = np.flatnonzero(wall < 0.85 * wall.max())
        if corner is None:
            assert len(dark) == 0
        else:
            edge = dark.min() if corner > 32 else dark.max()
            assert abs(edge - corner) <= 1.5, (theta, edge)


def test_scale_grows_each_object(gen):
    for shape in range(4):
        area = [gen._object_maps([(shape, s, 0.0)])["coverage"][0].sum() for s in shapes3d.SCALES]
        assert all(b > a for a, b in zip(area, area[1:])), shape
        # about (1.25 / 0.75)^2 = 2.8 times the area (more for the cube, whose front face comes closer)
        assert 2.6 < area[-1] / area[0] < 3.4, shape


def test_step_writes_a_sub_grid_of_the_same_images(tmp_path):
    small = get("shapes3d", {"samples": 1, "step": [5, 5, 5, 4, 2, 7]}, backend="cpu")
    assert small.grid_shape == (2, 2, 2, 2, 2, 3)
    path = write_dataset(small, tmp_path / "s.h5", progress=False)
    with load(path) as ds:
        assert np.array_equal(ds.factors[:, 5], np.tile([-30.0, 0.0, 30.0], 32))
        full = get("shapes3d", {"samples": 1}, backend="cpu")
        assert np.array_equal(ds.images[[0, 37, 95]], full.render(ds.factors[[0, 37, 95]]))


def test_parameters_and_factor_values_are_checked(gen):
    with pytest.raises(FactorbenchError, match="image_size"):
        get("shapes3d", {"image_size": 4})
    with pytest.raises(FactorbenchError, match="samples"):
        get("shapes3d", {"samples": 3})
    with pytest.raises(FactorbenchError, match="6 factors"):
        get("shapes3d", {"step": [2, 2]})
    with pytest.raises(FactorbenchError, match="unknown parameter"):
        get("shapes3d", {"fov": 50})
    with pytest.raises(FactorbenchError, match="shape 1.5"):
        gen.render(rows({"shape": 1.5}))
    with pytest.raises(FactorbenchError, match="scale"):
        gen.render(rows({"scale": 0.0}))
    with pytest.raises(FactorbenchError, match="orientation"):
        gen.render(rows({"orientation": 200.0}))
    with pytest.raises(FactorbenchError, match=r"\(M, 6\)"):
        gen.render(np.zeros((2, 5)))
    assert gen.render(np.zeros((0, 6))).shape == (0, 64, 64, 3)


def test_other_image_sizes_frame_the_same_scene():
    big = get("shapes3d", {"image_size": 96}, backend="cpu")
    small = get("shapes3d", {"image_size": 32}, backend="cpu")
    values = rows({"shape": 2})
    a, b = big.render(values)[0], small.render(values)[0]
    assert a.shape == (96, 96, 3) and b.shape == (32, 32, 3)
    assert (a[:20] == SKY).all() and (b[:7] == SKY).all()
    cover = lambda g: g._object_maps([(2, 1.0, 0.0)])["coverage"][0].mean()  # noqa: E731
    assert cover(big) == pytest.approx(cover(small), rel=0.05)
    assert math.isclose(big._room_maps(0.0)["sky"].mean(), small._room_maps(0.0)["sky"].mean(), rel_tol=0.01)
