"""The airplane: rotation about the vertical axis and an absolute cyclic hue."""

import math

import numpy as np
import pytest
from matplotlib.colors import rgb_to_hsv

from factorbench.generators import get

STEP = 2 * math.pi / 64


def _srgb_to_linear(u8):
    x = u8 / 255.0
    return np.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)


@pytest.fixture(scope="module")
def plane():
    gen = get("airplane", {"samples": 1}, backend="cpu")
    return gen


def test_grid_and_factors():
    gen = get("airplane")
    assert gen.full_size() == 4096 and [f.name for f in gen.factors()] == ["hue", "rotation"]


def test_a_full_turn_returns_to_the_start_and_a_half_turn_mirrors_the_view(plane):
    img = plane.render(np.array([[0.0, 5 * STEP], [0.0, 5 * STEP + 2 * math.pi], [0.0, 37 * STEP],
                                 [0.0, -5 * STEP]]))
    assert np.abs(img[0].astype(int) - img[1]).max() <= 1
    # the airplane is mirror-symmetric in x (S_x P = P); seen from +x, R(t + pi) P = R(t) S_y P = S_y R(-t) P,
    # and S_y flips the picture left-right: rotation 5 + 32 is rotation -5 mirrored (up to mesh asymmetries)
    a = np.any(img[2] != 255, axis=-1)
    b = np.fliplr(np.any(img[3] != 255, axis=-1))
    assert (a & b).sum() / (a | b).sum() > 0.9


def test_every_lit_pixel_has_hue_j_over_64(plane):
    for j in (0, 11, 40):
        img = plane.render(np.array([[j * STEP, 0.7]]))[0]
        hsv = rgb_to_hsv(_srgb_to_linear(img))  # the hue is the material's, in linear RGB
        body = (hsv[..., 1] > 0.99) & (hsv[..., 2] > 0.5)  # fully inside the airplane: no white blended in
        assert body.sum() > 100
        err = np.abs(((hsv[..., 0][body] - j / 64) + 0.5) % 1.0 - 0.5)
        assert err.max() < 0.01


def test_recognisable_at_every_angle(plane):
    values = np.array([[0.0, k * STEP] for k in range(0, 64, 4)])
    masks = np.any(plane.render(values) != 255, axis=-1)
    coverage = masks.mean(axis=(1, 2))
    assert coverage.min() > 0.03 and coverage.max() < 0.5  # never vanishes, never fills the frame
    assert not masks[:, 0, :].any() and not masks[:, -1, :].any()  # whole airplane in frame
    assert not masks[:, :, 0].any() and not masks[:, :, -1].any()
    assert len({m.tobytes() for m in masks}) == len(masks)


@pytest.mark.parametrize("name", ["airplane", "objects"])
def test_camera_too_close_or_too_steep_is_rejected(name):
    """The unit-radius object fits the 48-degree view cone from 1 / sin(24 deg) = 2.459 on."""
    from factorbench.generators import FactorbenchError

    get(name, {"camera_distance": 2.46})  # just far enough
    with pytest.raises(FactorbenchError, match="too close.*at least 2.459"):
        get(name, {"camera_distance": 2.0})
    with pytest.raises(FactorbenchError, match="elevation_degrees"):
        get(name, {"elevation_degrees": 90.0})
