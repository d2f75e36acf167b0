"""The square's group structure: cyclic translations act by rolling the image."""

import math

import numpy as np
import pytest

from factorbench.generators import get

STEP = 2 * math.pi / 64


@pytest.fixture(scope="module")
def grid():
    gen = get("square")
    values, classes = gen.sample_factors(gen.spec(), 0, 4096)
    return gen, values, gen.render(values).reshape(64, 64, 64, 64, 3)


def test_one_step_equals_rolling_the_image(grid):
    _, _, imgs = grid
    # vertical element j+1 = element j rolled down one row; horizontal k+1 = rolled right one column
    assert np.array_equal(imgs[1:], np.roll(imgs[:-1], 1, axis=2))
    assert np.array_equal(imgs[0], np.roll(imgs[63], 1, axis=1))  # wrap-around: 63 -> 0
    assert np.array_equal(imgs[:, 1:], np.roll(imgs[:, :-1], 1, axis=3))
    assert np.array_equal(imgs[:, 0], np.roll(imgs[:, 63], 1, axis=2))


def test_sixty_four_steps_return_to_the_start(grid):
    gen, _, imgs = grid
    full_turn = gen.render(np.array([[2 * math.pi, 0.0], [0.0, 2 * math.pi], [2 * math.pi + 5 * STEP, 7 * STEP]]))
    assert np.array_equal(full_turn[0], imgs[0, 0]) and np.array_equal(full_turn[1], imgs[0, 0])
    assert np.array_equal(full_turn[2], imgs[5, 7])


def test_every_image_is_a_whole_white_square(grid):
    _, _, imgs = grid
    assert set(np.unique(imgs)) == {0, 255}
    assert np.all((imgs[..., 0] == 255).sum(axis=(2, 3)) == 16)
    assert np.all(imgs[..., 0] == imgs[..., 2])
    # element (0, 0) is centred: rows and columns 30..33
    assert np.array_equal(np.argwhere(imgs[0, 0, :, :, 0])[[0, -1]], [[30, 30], [33, 33]])


def test_all_images_are_distinct(grid):
    _, _, imgs = grid
    flat = imgs.reshape(4096, -1)
    assert len({row.tobytes() for row in flat}) == 4096


def test_side_parameter_and_subpixel_shifts_conserve_area():
    gen = get("square", {"side": 8})
    img = gen.render(np.array([[0.0, 0.0], [0.5 * STEP, 0.25 * STEP]]))
    assert (img[0, ..., 0] == 255).sum() == 64
    # a half-pixel shift blends two rows at 50 %: the total brightness stays 64 pixels' worth
    assert img[1, ..., 0].sum() / 255 == pytest.approx(64, abs=0.5)
