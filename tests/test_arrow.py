"""The arrow's group structure: rotations act on the geometry, hue is absolute and cyclic."""

import numpy as np
import pytest
from matplotlib.colors import rgb_to_hsv

from factorbench.generators import get


@pytest.fixture(scope="module")
def grid():
    gen = get("arrow")
    values, _ = gen.sample_factors(gen.spec(), 0, 4096)
    return gen.render(values).reshape(64, 64, 64, 64, 3)  # (hue, rotation, H, W, C)


def test_a_quarter_turn_equals_rotating_the_image_by_90_degrees(grid):
    # Stated tolerance: rotating the geometry by 16 steps equals np.rot90 of the image except where a
    # supersample lies on a shape edge up to floating point: at most one supersample of 64 (4/255) in
    # at most 0.01 % of pixel values (measured: 4/255 in 0.003 %).
    rotated = np.rot90(grid, k=1, axes=(2, 3))  # counter-clockwise as displayed
    shifted = np.roll(grid, -16, axis=1)  # element j+16 (mod 64) at position j
    diff = np.abs(shifted.astype(int) - rotated.astype(int))
    assert diff.max() <= 4
    assert (diff > 0).mean() <= 1e-4


def test_rotation_is_counter_clockwise(grid):
    mask = grid[0, :, :, :, 0] > 127  # red arrows, hue 0
    rows = np.array([np.argwhere(m)[:, 0].mean() for m in mask])
    cols = np.array([np.argwhere(m)[:, 1].mean() for m in mask])
    assert cols[0] > 31.5 and abs(rows[0] - 31.5) < 0.1  # points right at rotation 0 (centre 31.5)
    assert rows[16] < 31.5 and abs(cols[16] - 31.5) < 0.1  # points up after a quarter turn


def test_arrow_pixels_have_hue_j_over_64(grid):
    hsv = rgb_to_hsv(grid.reshape(64, -1, 3) / 255.0)
    value = hsv[..., 2]
    target = (np.arange(64) / 64)[:, None]
    err = np.abs(((hsv[..., 0] - target) + 0.5) % 1.0 - 0.5)
    assert err[value >= 0.5].max() < 2e-3  # only rounding to uint8 separates the hue from j/64
    assert np.all(hsv[..., 1][value >= 0.5] > 0.99)  # fully saturated
    assert np.all(grid.reshape(64, -1, 3).max(axis=-1)[value < 1 / 255] == 0)  # black background


def test_area_is_the_same_at_every_rotation(grid):
    area = grid[0, :, :, :, 0].astype(float).sum(axis=(1, 2)) / 255
    assert area.max() - area.min() < 0.01 * area.mean()


def test_all_images_are_distinct(grid):
    assert len({row.tobytes() for row in grid.reshape(4096, -1)}) == 4096


def test_render_of_off_grid_angles_is_continuous():
    gen = get("arrow")
    a = gen.render(np.array([[0.0, 0.30], [0.0, 0.30001]])).astype(int)
    assert np.abs(a[0] - a[1]).max() <= 8
