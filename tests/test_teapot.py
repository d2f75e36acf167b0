"""The teapot: factor-to-image consistency, the scene's conventions, and its standard splits."""

import math

import numpy as np
import pytest

from factorbench.benchmark import load
from factorbench.generators import get, write_dataset


@pytest.fixture(scope="module")
def teapot():
    gen = get("teapot", {"samples": 1}, backend="cpu")
    return gen


def _srgb_to_linear(u8):
    x = u8 / 255.0
    return np.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)


def test_factors_and_defaults():
    gen = get("teapot")
    assert [f.name for f in gen.factors()] == ["azimuth", "elevation", "red", "green", "blue"]
    assert gen.full_size() == 200_000 and gen.image_shape == (64, 64, 3)
    values, classes = gen.sample_factors(gen.spec(seed=1, n=5000), 0, 5000)
    assert classes is None and values[:, 0].max() < 2 * math.pi and values[:, 1].max() <= math.pi / 2


def test_tessellation_follows_the_image_size_unless_given():
    """subdivisions 0 (default) picks ceil(8 sqrt(size / 64)) cells per patch side; a given value is used."""
    from factorbench.generators import FactorbenchError
    from factorbench.generators.teapot import auto_subdivisions

    assert [auto_subdivisions(s) for s in (16, 32, 64, 128, 256, 512)] == [4, 6, 8, 12, 16, 23]
    values = np.array([[0.3, 0.5, 0.8, 0.4, 0.2]])
    auto = get("teapot", {"samples": 1, "image_size": 32}, backend="cpu").render(values)
    given = get("teapot", {"samples": 1, "image_size": 32, "subdivisions": 6}, backend="cpu").render(values)
    finer = get("teapot", {"samples": 1, "image_size": 32, "subdivisions": 12}, backend="cpu").render(values)
    assert auto.tobytes() == given.tobytes() and auto.tobytes() != finer.tobytes()
    # a finer mesh moves a few edge pixels only
    assert (np.abs(auto.astype(int) - finer) > 8).any(axis=-1).mean() < 0.03
    with pytest.raises(FactorbenchError, match="subdivisions"):
        get("teapot", {"subdivisions": -1})


def test_azimuth_is_cyclic_and_a_quarter_turn_from_above_rotates_the_image(teapot):
    v = np.array([[0.3, 0.6, 0.8, 0.4, 0.2], [0.3 + 2 * math.pi, 0.6, 0.8, 0.4, 0.2],
                  [0.3, math.pi / 2, 0.8, 0.4, 0.2], [0.3 + math.pi / 2, math.pi / 2, 0.8, 0.4, 0.2]])
    img = teapot.render(v).astype(int)
    assert np.abs(img[0] - img[1]).max() <= 1
    # seen from straight above, turning the camera a quarter turn counter-clockwise turns the picture clockwise
    assert np.abs(np.rot90(img[2], k=-1) - img[3]).max() <= 1


def test_colour_factor_is_the_pixel_colour_up_to_shading(teapot):
    colour = np.array([0.8, 0.4, 0.2])
    img = teapot.render(np.array([[1.0, 0.5, *colour]]))[0]
    teapot_pixels = np.any(img != 255, axis=-1)
    assert 0.15 < teapot_pixels.mean() < 0.7  # the teapot fills a good part of the frame, not all of it
    lin = _srgb_to_linear(img[teapot_pixels].astype(float))
    bright = lin[:, 0] > 0.1
    # shading scales all channels alike: green / red = 0.5 and blue / red = 0.25 (uint8 rounding aside)
    assert np.median(lin[bright, 1] / lin[bright, 0]) == pytest.approx(0.5, abs=0.02)
    assert np.median(lin[bright, 2] / lin[bright, 0]) == pytest.approx(0.25, abs=0.02)
    # light from above plus ambient 0.5: no pixel is brighter than colour * 1.5 or darker than colour * 0.5
    assert lin[:, 0].max() <= 0.8 * 1.5 + 0.01 and lin[:, 0].min() >= 0.8 * 0.5 - 0.01


def test_lit_from_above_and_upright(teapot):
    side, top = teapot.render(np.array([[0.0, 0.0, 1, 1, 1], [0.0, math.pi / 2, 1, 1, 1]]) * [1, 1, 0.5, 0.5, 0.5])
    lum = lambda im: im[np.any(im != 255, axis=-1)].mean()
    assert lum(top) > lum(side)  # the lid faces the light
    rows = np.argwhere(np.any(side != 255, axis=-1))[:, 0]
    assert 10 < rows.min() < rows.max() < 54  # side view: whole teapot in frame, centred vertically
    cols = np.argwhere(np.any(side != 255, axis=-1))[:, 1]
    assert cols.min() > 0 and cols.max() < 63


def test_standard_splits_and_the_zero_shot_gap(tmp_path, teapot):
    path = write_dataset(teapot, tmp_path / "t.h5", n=2000, seed=3, progress=False)
    with load(path) as ds:
        f = ds.factors
        gap = (f[:, 2] > f[:, 3] + 0.15) & (f[:, 2] > f[:, 4] + 0.15) & (f[:, 1] > math.pi / 4)
        assert np.array_equal(ds.split_indices("zeroshot"), np.flatnonzero(gap))
        assert np.array_equal(ds.split_indices("train"), np.flatnonzero(~gap[:1600]))
        assert np.array_equal(ds.split_indices("validation"), 1600 + np.flatnonzero(~gap[1600:1800]))
        assert np.array_equal(ds.split_indices("test"), 1800 + np.flatnonzero(~gap[1800:]))
        assert "cpu" in ds.manifest["renderer"]
    large = get("teapot", {"gap_margin": 0.7, "gap_elevation": math.pi / 2.5}).default_splits(0)[0]
    assert [str(w) for w in large.where] == ["red - green > 0.7", "red - blue > 0.7", f"elevation > {math.pi / 2.5:g}"]


def test_same_seed_same_bytes(tmp_path, teapot):
    a = write_dataset(teapot, tmp_path / "a.h5", n=100, seed=5, progress=False)
    b = write_dataset(teapot, tmp_path / "b.h5", n=100, seed=5, progress=False, batch_size=33)
    assert load(a).manifest == load(b).manifest
