"""The cpu rasteriser and the scene conventions, checked against values known in closed form."""

import math

import numpy as np
import pytest

from factorbench.generators import FactorbenchError
from factorbench.generators.meshes import Mesh
from factorbench.generators.render import Camera, Light, RenderSettings, get_backend, look_at, orbit_views, render
from factorbench.generators.render.scene import linear_to_srgb


def quad(size=1.0):
    """A square in the z = 0 plane, facing +z."""
    h = size / 2
    return Mesh(np.array([[-h, -h, 0], [h, -h, 0], [h, h, 0], [-h, h, 0]], float), np.array([[0, 1, 2], [0, 2, 3]]))


def front_view(n=1, distance=3.0):
    """Cameras on +z looking down at the origin, image up = +y."""
    return look_at(np.tile([0.0, 0.0, distance], (n, 1)), np.zeros(3), np.tile([0.0, 1.0, 0.0], (n, 1)))


def translated(x=0.0, y=0.0):
    m = np.eye(4)
    m[0, 3], m[1, 3] = x, y
    return m[None]


def draw(mesh=None, model=None, view=None, colours=((1.0, 1.0, 1.0),), light=Light((0, 0, 1), 1.0, 0.0),
         samples=1, background=(0.0, 0.0, 0.0), size=32):
    return render(mesh or quad(), translated() if model is None else model, front_view() if view is None else view,
                  np.asarray(colours, float), Camera(size, 30.0), light, RenderSettings(background, samples), "cpu")


def test_lit_interior_background_and_ambient_values():
    img = draw(background=(0.0, 0.5, 1.0))[0]
    assert np.all(img[16, 16] == 255)  # lit head-on, colour 1, no ambient: 1.0 -> 255
    assert tuple(img[0, 0]) == (0, 128, 255)  # background, already encoded: round(0.5 * 255)
    ambient = draw(light=Light((0, 0, 1), 0.0, 0.5))[0]
    assert tuple(ambient[16, 16]) == (188,) * 3  # sRGB(0.5) = 0.7354 -> 188
    assert round(255 * float(linear_to_srgb(np.array(0.5)))) == 188
    tilted = draw(light=Light((0, math.sin(math.pi / 3), math.cos(math.pi / 3)), 1.0, 0.0))[0]
    assert tuple(tilted[16, 16]) == (round(255 * float(linear_to_srgb(np.array(0.5)))),) * 3  # cos 60 = 0.5


def test_silhouette_size_follows_the_camera():
    img = draw(size=64)[0]
    covered = (img[..., 0] > 0).sum()
    # a unit square at distance 3 with a 30-degree field of view spans 1 / (2 * 3 * tan 15 deg) of the frame
    expected = (64 / (2 * 3 * math.tan(math.radians(15))))**2
    assert abs(covered - expected) / expected < 0.05


def test_image_axes_right_is_plus_x_and_up_is_plus_y():
    base = draw()[0][..., 0] > 0
    right = draw(model=translated(x=0.5))[0][..., 0] > 0
    up = draw(model=translated(y=0.5))[0][..., 0] > 0
    cols = lambda m: np.argwhere(m)[:, 1].mean()
    rows = lambda m: np.argwhere(m)[:, 0].mean()
    assert cols(right) > cols(base) + 3 and abs(rows(right) - rows(base)) < 0.5
    assert rows(up) < rows(base) - 3 and abs(cols(up) - cols(base)) < 0.5


def test_nearest_surface_wins():
    near, far = quad(0.5), quad(1.0)
    both = Mesh(np.r_[far.vertices, near.vertices + [0, 0, 0.5]], np.r_[far.faces, near.faces + 4])
    colours = np.array([[1.0, 0.0, 0.0]])
    img = render(both, translated(), front_view(), colours, Camera(32, 30.0), Light((0, 0, 1), 1.0, 0.0),
                 RenderSettings((0, 0, 0), 1), "cpu")[0]
    assert tuple(img[16, 16]) == (255, 0, 0)


def test_antialiasing_blends_edges_only():
    hard = draw(samples=1, model=translated(x=0.013))[0][..., 0]
    soft = draw(samples=16, model=translated(x=0.013))[0][..., 0]
    assert set(np.unique(hard)) == {0, 255}
    assert len(np.unique(soft)) > 3 and soft[16, 16] == 255 and soft[0, 0] == 0


def test_orbit_views_elevation_and_azimuth():
    # the camera sits at distance d, at the given elevation, counter-clockwise azimuth from +x
    views = orbit_views(np.array([0.0, math.pi / 2, 0.3]), np.array([0.0, 0.0, math.pi / 2]), 2.0)
    eyes = np.array([-np.linalg.inv(v)[:3, :3] @ np.zeros(3) + np.linalg.inv(v)[:3, 3] for v in views])
    assert np.allclose(eyes, [[2, 0, 0], [0, 2, 0], [0, 0, 2]], atol=1e-12)
    assert np.allclose(views[:, :3, :3] @ views[:, :3, :3].transpose(0, 2, 1), np.eye(3), atol=1e-12)


def test_determinism_and_batch_independence():
    model = np.concatenate([translated(x) for x in np.linspace(-0.5, 0.5, 20)])
    views = front_view(20)
    colours = np.random.default_rng(0).random((20, 3))
    a = render(quad(), model, views, colours, Camera(32, 30), Light(), RenderSettings(samples=4), "cpu")
    b = render(quad(), model, views, colours, Camera(32, 30), Light(), RenderSettings(samples=4), "cpu")
    assert a.tobytes() == b.tobytes()
    for i in (0, 7, 19):  # instance i alone gives tile i
        alone = render(quad(), model[i:i + 1], views[i:i + 1], colours[i:i + 1], Camera(32, 30), Light(),
                       RenderSettings(samples=4), "cpu")[0]
        assert np.array_equal(alone, a[i])


def test_bad_settings_are_rejected():
    with pytest.raises(FactorbenchError, match="samples must be 1, 4 or 16"):
        RenderSettings(samples=3)
    with pytest.raises(FactorbenchError, match="background"):
        RenderSettings(background=(2, 0, 0))
    with pytest.raises(FactorbenchError, match="unknown render backend"):
        get_backend("vulkan")
    with pytest.raises(FactorbenchError, match="must be"):
        render(quad(), np.eye(4)[None].repeat(2, 0), front_view(3), np.ones((2, 3)), backend="cpu")
