"""The pyrender backend: agreement with the cpu oracle, colour space, background, antialiasing modes."""

from __future__ import annotations

import numpy as np
import pytest

from factorbench.generators.meshes import Mesh
from factorbench.generators.render import (Camera, Light, RenderSettings, backend_class, get_backend, look_at,
                                           orbit_views, rotation_z)
from factorbench.generators.render import pyrender_backend
from factorbench.generators.render.pyrender_backend import PyrenderBackend
from factorbench.generators.render.scene import linear_to_srgb

if PyrenderBackend.unavailable_reason() is not None:
    pytest.skip(f"pyrender backend unavailable: {PyrenderBackend.unavailable_reason()}", allow_module_level=True)

BG = (0.2, 0.4, 0.6)  # exact multiples of 1/255: 51, 102, 153
LIGHT = Light((0.3, -0.4, 1.0), 0.9, 0.4)


def icosphere() -> Mesh:
    trimesh = pytest.importorskip("trimesh")
    ico = trimesh.creation.icosphere(subdivisions=3)  # 1280 triangles
    return Mesh(np.asarray(ico.vertices, dtype=np.float64), np.asarray(ico.faces))


def quad(half: float = 1.0) -> Mesh:
    v = np.array([[-half, -half, 0], [half, -half, 0], [half, half, 0], [-half, half, 0]], dtype=np.float64)
    return Mesh(v, np.array([[0, 1, 2], [0, 2, 3]]))


TOP = look_at(np.array([[0.0, 0.0, 2.0]]), np.zeros(3), np.array([[0.0, 1.0, 0.0]]))


def scene_batch(m: int = 12, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    model = rotation_z(rng.uniform(0, 2 * np.pi, m))
    model[:, :3, 3] = rng.uniform(-0.3, 0.3, (m, 3))
    view = orbit_views(rng.uniform(0, 2 * np.pi, m), rng.uniform(-1.2, 1.2, m), 3.0)
    return model, view, rng.uniform(0.05, 1.0, (m, 3))


@pytest.fixture(scope="module")
def pr() -> PyrenderBackend:
    return get_backend("pyrender")


@pytest.fixture(scope="module")
def sphere() -> Mesh:
    return icosphere()


def compare(pr: PyrenderBackend, mesh: Mesh, samples: int, size: int = 64) -> tuple[np.ndarray, float, float]:
    model, view, colours = scene_batch()
    settings = RenderSettings(BG, samples)
    a = pr.render(mesh, model, view, colours, Camera(size), LIGHT, settings).astype(int)
    b = get_backend("cpu").render(mesh, model, view, colours, Camera(size), LIGHT, settings).astype(int)
    assert a.shape == b.shape == (len(model), size, size, 3) and a.dtype == b.dtype
    d = np.abs(a - b)
    return d.mean(axis=(0, 1, 2)), float((d <= 8).mean()), float((d <= 2).mean())


def test_registry_and_identity(pr: PyrenderBackend) -> None:
    assert backend_class("pyrender") is PyrenderBackend
    assert isinstance(pr, PyrenderBackend)
    assert pr.identity().startswith("pyrender (pyrender-maintained ") and pr.identity().endswith(", EGL)")


def test_unavailable_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pyrender_backend, "_PROBE", {})
    monkeypatch.setattr(pyrender_backend, "_EGL_PID", [])
    monkeypatch.setenv("PYOPENGL_PLATFORM", "osmesa")
    reason = PyrenderBackend.unavailable_reason()
    assert reason is not None and "pip install 'factorbench[pyrender]'" in reason and "EGL" in reason


def test_agrees_with_cpu_at_4_samples(pr: PyrenderBackend, sphere: Mesh) -> None:
    # measured (12 icospheres, 64 px): mean |diff| 0.34, 0.23, 0.16 per channel; 99.1 % within 8/255. The
    # differences are at silhouettes: 4x MSAA samples a rotated grid, the cpu backend a 2 x 2 ordered grid
    mad, within8, _ = compare(pr, sphere, 4)
    assert (mad < 1.0).all(), mad
    assert within8 > 0.98, within8


def test_agrees_with_cpu_at_1_and_16_samples(pr: PyrenderBackend, sphere: Mesh) -> None:
    # one sample at the pixel centre: the same image up to rounding (measured: max |diff| 2, all within 2/255)
    mad, within8, within2 = compare(pr, sphere, 1)
    assert (mad < 0.1).all() and within2 > 0.999, (mad, within2)
    # 16 = 2 x 2 supersampling of 4x MSAA (measured: mean |diff| <= 0.17, 99.8 % within 8/255)
    mad, within8, _ = compare(pr, sphere, 16)
    assert (mad < 0.5).all() and within8 > 0.99, (mad, within8)


def test_background_exact(pr: PyrenderBackend, sphere: Mesh) -> None:
    far_away = np.eye(4)[None].copy()
    far_away[0, 0, 3] = 50.0
    for samples in (1, 4, 16):
        img = pr.render(sphere, far_away, TOP, np.ones((1, 3)), Camera(32), LIGHT, RenderSettings(BG, samples))
        assert (img == np.array([51, 102, 153], dtype=np.uint8)).all(), samples
        # and around a drawn object
        model, view, colours = scene_batch(2)
        img = pr.render(sphere, model, view, colours, Camera(32), LIGHT, RenderSettings(BG, samples))
        assert (img[:, 0, 0] == [51, 102, 153]).all() and (img[:, -1, -1] == [51, 102, 153]).all()


@pytest.mark.parametrize("linear", [0.002, 0.2, 0.5, 0.9])
def test_colour_is_srgb_encoded(pr: PyrenderBackend, linear: float) -> None:
    # ambient only: the vertex colour is the base colour; pyrender's FLAT path must not re-encode it
    img = pr.render(quad(), np.eye(4)[None], TOP, np.full((1, 3), linear), Camera(16), Light(intensity=0.0,
                    ambient=1.0), RenderSettings(BG, 4))
    expected = int(np.rint(255 * linear_to_srgb(np.array(linear))))
    assert (img[0, 4:12, 4:12] == expected).all(), (img[0, 8, 8], expected)


def test_orientation(pr: PyrenderBackend) -> None:
    # a quad in the +x half seen from the top (image right = +x, image up = +y) fills the right half
    model = np.eye(4)[None].copy()
    model[0, :3, 3] = [0.5, 0.0, 0.0]
    img = pr.render(quad(0.45), model, TOP, np.ones((1, 3)), Camera(32), Light(), RenderSettings((0, 0, 0), 1))[0]
    lit = img.sum(axis=2) > 0
    assert lit[:, 16:].sum() > 50 and lit[:, :16].sum() == 0
    model[0, :3, 3] = [0.0, 0.5, 0.0]
    img = pr.render(quad(0.45), model, TOP, np.ones((1, 3)), Camera(32), Light(), RenderSettings((0, 0, 0), 1))[0]
    lit = img.sum(axis=2) > 0
    assert lit[:16].sum() > 50 and lit[16:].sum() == 0  # +y is up: image rows 0..15
