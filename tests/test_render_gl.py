"""The moderngl backend: tile ordering over several draw calls, colour space, orientation, antialiasing."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from factorbench.generators import get
from factorbench.generators.render.gl import GlBackend, _box
from factorbench.generators.render.scene import Camera, Light, RenderSettings, look_at, orbit_views, rotation_z

if GlBackend.unavailable_reason() is not None:
    pytest.skip(f"gl backend unavailable: {GlBackend.unavailable_reason()}", allow_module_level=True)


def octahedron(radius: float = 1.0) -> SimpleNamespace:
    """An octahedron with (smooth) vertex normals pointing outwards."""
    v = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], dtype=np.float64)
    f = np.array([[0, 2, 4], [2, 1, 4], [1, 3, 4], [3, 0, 4], [2, 0, 5], [1, 2, 5], [3, 1, 5], [0, 3, 5]])
    return SimpleNamespace(vertices=v * radius, faces=f, vertex_normals=v.copy())


def quad(half: float = 0.5) -> SimpleNamespace:
    """A flat square in the z = 0 plane, normals +z (facing a camera above it)."""
    v = np.array([[-half, -half, 0], [half, -half, 0], [half, half, 0], [-half, half, 0]], dtype=np.float64)
    f = np.array([[0, 1, 2], [0, 2, 3]])
    return SimpleNamespace(vertices=v, faces=f, vertex_normals=np.tile([0.0, 0.0, 1.0], (4, 1)))


@pytest.fixture(scope="module")
def gl() -> GlBackend:
    return GlBackend(max_tiles=64)  # small grid: batches of more than 64 need several draw calls


#: a camera on the +z axis looking down at the origin, image up = world +y, image right = world +x
TOP = look_at(np.array([[0.0, 0.0, 3.0]]), np.zeros(3), np.array([[0.0, 1.0, 0.0]]))
BG = (0.2, 0.4, 0.6)  # exact multiples of 1/255: 51, 102, 153


def translation(xyz: np.ndarray) -> np.ndarray:
    m = np.tile(np.eye(4), (len(xyz), 1, 1))
    m[:, :3, 3] = xyz
    return m


def test_identity(gl: GlBackend) -> None:
    assert gl.identity().startswith("gl (moderngl ")
    assert "GL_RENDERER" in gl.identity()


def random_scenes(m: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    model = rotation_z(rng.uniform(0, 2 * np.pi, m)) @ translation(rng.uniform(-0.4, 0.4, (m, 3)))
    view = orbit_views(rng.uniform(0, 2 * np.pi, m), rng.uniform(-1.2, 1.2, m), 3.5)
    return model, view, rng.uniform(0.05, 1, (m, 3))


@pytest.mark.parametrize("samples", [1, 4])
def test_tile_independence_over_several_draw_calls(gl: GlBackend, samples: int) -> None:
    """Instance i's pixels are byte-identical whatever tile it lands in and whatever else is drawn."""
    m = 300  # > 64 tiles per call: five draw calls
    model, view, colours = random_scenes(m)
    cam, light = Camera(image_size=32), Light((0.3, -0.4, 1.0), 0.7, 0.3)
    settings = RenderSettings(BG, samples)
    batch = gl.render(octahedron(0.8), model, view, colours, cam, light, settings)
    assert batch.shape == (m, 32, 32, 3) and batch.dtype == np.uint8
    for i in sorted(set(range(0, m, 23)) | {0, 1, 62, 63, 64, 65, 127, 128, 200, m - 1}):
        alone = gl.render(octahedron(0.8), model[i:i + 1], view[i:i + 1], colours[i:i + 1], cam, light, settings)
        assert alone[0].tobytes() == batch[i].tobytes(), i
    # and distinct instances do give distinct images
    assert not np.array_equal(batch[0], batch[1])


@pytest.mark.parametrize("samples", [1, 4])
def test_batch_layout_does_not_change_pixels(gl: GlBackend, samples: int) -> None:
    """Different grids (64 tiles: 8 x 8; 25 tiles: 5 x 5) put the instances in different places."""
    m = 300
    model, view, colours = random_scenes(m, seed=3)
    cam, light, settings = Camera(image_size=32), Light((0.3, -0.4, 1.0), 0.7, 0.3), RenderSettings(BG, samples)
    other = GlBackend(max_tiles=25)
    a = gl.render(octahedron(0.8), model, view, colours, cam, light, settings)
    b = other.render(octahedron(0.8), model, view, colours, cam, light, settings)
    assert a.tobytes() == b.tobytes()
    # batches split differently (as in a resumed run or a shard) give the same bytes too
    c = np.concatenate([gl.render(octahedron(0.8), model[s:s + 37], view[s:s + 37], colours[s:s + 37], cam, light,
                                  settings) for s in range(0, m, 37)])
    assert a.tobytes() == c.tobytes()


def test_objects_crossing_the_tile_edge(gl: GlBackend) -> None:
    """Objects larger than the image (triangles clipped at the tile's edges) are still tile-independent."""
    m = 150
    model, view, colours = random_scenes(m, seed=5)
    cam, light, settings = Camera(image_size=24), Light((0.3, -0.4, 1.0), 0.7, 0.3), RenderSettings(BG, 4)
    batch = gl.render(octahedron(2.0), model, view, colours, cam, light, settings)
    assert (batch[:, 0] != np.array([51, 102, 153], dtype=np.uint8)).any()  # the object does reach the edge
    for i in (0, 63, 64, 100, m - 1):
        alone = gl.render(octahedron(2.0), model[i:i + 1], view[i:i + 1], colours[i:i + 1], cam, light, settings)
        assert alone[0].tobytes() == batch[i].tobytes(), i


def test_triangles_behind_the_camera_are_dropped(gl: GlBackend) -> None:
    """A documented limitation: a triangle with a vertex behind the near plane is not drawn at all."""
    # the camera at z = 3 looks down; a vertical quad (the plane y = 0) from z = 0.5 to z = 5.5 passes
    # through the camera: both its triangles have a vertex behind it, so nothing is drawn ...
    upright = np.array([[[1.0, 0, 0, 0], [0, 0, -1, 0], [0, 1, 0, 3.0], [0, 0, 0, 1]]])
    img = gl.render(quad(2.5), upright, TOP, np.ones((1, 3)), Camera(), Light(), RenderSettings(BG, 1))[0]
    assert (img == np.array([51, 102, 153], dtype=np.uint8)).all()
    # ... while the object in front is drawn, unaffected
    both = gl.render(octahedron(0.5), np.eye(4)[None], TOP, np.ones((1, 3)), Camera(), Light(), RenderSettings(BG, 1))
    assert (both[0] != np.array([51, 102, 153], dtype=np.uint8)).any()


def test_guard_bound_classifies_like_every_vertex() -> None:
    """The bounding-sphere shortcut of the near-camera check gives the vertex-by-vertex answer, cameras
    far from, near and inside the object included."""
    rng = np.random.default_rng(3)
    vertices = rng.normal(size=(300, 3)) * [1.0, 0.5, 2.0] + [0.3, -0.2, 0.1]
    distance = rng.uniform(0.05, 8.0, 400)
    view = orbit_views(rng.uniform(0, 2 * np.pi, 400), rng.uniform(-1.5, 1.5, 400), 1.0)
    view[:, 2, 3] -= distance  # pull the cameras back along their viewing axis
    mvp = Camera(near=0.1).projection()[None] @ view
    got = GlBackend._guarded_instances(mvp, vertices, 0.1)
    w = np.einsum("mj,vj->mv", mvp[:, 3], np.c_[vertices, np.ones(len(vertices))])
    assert got.tolist() == (w.min(axis=1) <= 2.0 * 0.1).tolist()
    assert 0 < got.sum() < len(got)


def test_instances_near_the_camera_in_a_batch(gl: GlBackend) -> None:
    """Instances with a vertex behind the camera (drawn by the geometry-shader program) mixed with ordinary
    ones: each instance's pixels still do not depend on the batch, and the dropped triangles stay dropped."""
    m = 90
    model, view, colours = random_scenes(m, seed=7)
    upright = np.array([[1.0, 0, 0, 0], [0, 0, -1, 0], [0, 1, 0, 3.0], [0, 0, 0, 1]])
    near = np.arange(m) % 3 == 0
    model[near] = upright  # with the TOP view below: a quad through the camera
    view[near] = TOP[0]
    cam, light, settings = Camera(image_size=32), Light((0.3, -0.4, 1.0), 0.7, 0.3), RenderSettings(BG, 4)
    batch = gl.render(quad(2.5), model, view, colours, cam, light, settings)
    assert (batch[near] == np.array([51, 102, 153], dtype=np.uint8)).all()
    assert (batch[~near] != np.array([51, 102, 153], dtype=np.uint8)).any(axis=(1, 2, 3)).mean() > 0.5
    for i in (0, 1, 2, 63, 64, 65, m - 1):
        alone = gl.render(quad(2.5), model[i:i + 1], view[i:i + 1], colours[i:i + 1], cam, light, settings)
        assert alone[0].tobytes() == batch[i].tobytes(), i


def test_nothing_is_drawn_beyond_the_far_plane_as_in_the_cpu_backend(gl: GlBackend) -> None:
    """A quad tilted away from the camera, from depth 1.6 to 4.4, with the far plane at 3: the half
    beyond is not drawn, by gl (clipping) as by cpu (dropped fragments)."""
    from factorbench.generators.render.cpu import CpuBackend

    c, s = np.cos(np.pi / 4), np.sin(np.pi / 4)
    tilted = np.array([[[1.0, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1]]])  # y -> depth
    light, settings = Light((0, 0, 1), 1.0, 0.0), RenderSettings(BG, 4)
    cut = Camera(image_size=32, fov_y_degrees=90.0, far=3.0)
    whole = Camera(image_size=32, fov_y_degrees=90.0, far=100.0)
    got = gl.render(quad(2.0), tilted, TOP, np.ones((1, 3)), cut, light, settings)[0].astype(int)
    want = CpuBackend().render(quad(2.0), tilted, TOP, np.ones((1, 3)), cut, light, settings)[0]
    full = gl.render(quad(2.0), tilted, TOP, np.ones((1, 3)), whole, light, settings)[0].astype(int)
    background = (got == [51, 102, 153]).all(axis=-1)
    assert background.sum() > (full == [51, 102, 153]).all(axis=-1).sum() + 32  # rows lost at the far end
    assert np.abs(got - want).mean() < 0.5 and (np.abs(got - want) <= 8).mean() > 0.99


def test_geometry_shader_fallback_gives_the_same_pixels(gl: GlBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a vertex-shader gl_Layer extension every instance takes the geometry-shader program."""
    import factorbench.generators.render.gl as glmod

    monkeypatch.setattr(glmod, "_LAYER_EXTENSIONS", ())
    fallback = GlBackend(max_tiles=16)
    assert fallback._fast is None
    assert fallback._reducer(2) is not None and fallback._reducer(4) is not None  # the block average too
    model, view, colours = random_scenes(40, seed=11)
    for samples in (1, 4, 16):
        args = (octahedron(0.8), model, view, colours, Camera(image_size=32), Light((0.3, -0.4, 1.0), 0.7, 0.3),
                RenderSettings(BG, samples))
        assert fallback.render(*args).tobytes() == gl.render(*args).tobytes()


def test_background_exact(gl: GlBackend) -> None:
    far_away = translation(np.array([[50.0, 0.0, 0.0]]))
    for samples in (1, 4, 16):
        img = gl.render(octahedron(), far_away, TOP, np.ones((1, 3)), Camera(), Light(), RenderSettings(BG, samples))
        assert (img == np.array([51, 102, 153], dtype=np.uint8)).all()


def centre(img: np.ndarray) -> np.ndarray:
    s = img.shape[0]
    return img[s // 2 - 4:s // 2 + 4, s // 2 - 4:s // 2 + 4].reshape(-1, 3)


def test_lit_and_ambient_values(gl: GlBackend) -> None:
    eye = np.eye(4)[None]
    full = gl.render(quad(), eye, TOP, np.ones((1, 3)), Camera(), Light((0, 0, 1), 1.0, 0.0),
                     RenderSettings((0, 0, 0), 1))[0]
    assert (centre(full) == 255).all()
    ambient = gl.render(quad(), eye, TOP, np.ones((1, 3)), Camera(), Light((0, 0, 1), 0.0, 0.5),
                        RenderSettings((0, 0, 0), 1))[0]
    assert (centre(ambient) == 188).all()  # round(255 * srgb(0.5))
    # light from below: only the ambient term remains
    below = gl.render(quad(), eye, TOP, np.full((1, 3), 1.0), Camera(), Light((0, 0, -1), 1.0, 0.5),
                      RenderSettings((0, 0, 0), 1))[0]
    assert (centre(below) == 188).all()
    # a dark colour uses the linear part of the curve: 12.92 * 0.002 * 255 = 6.59 -> 7
    dark = gl.render(quad(), eye, TOP, np.full((1, 3), 0.002), Camera(), Light((0, 0, 1), 1.0, 0.0),
                     RenderSettings((0, 0, 0), 1))[0]
    assert (centre(dark) == 7).all()


def silhouette_centre(img: np.ndarray, background: tuple[int, int, int]) -> tuple[float, float]:
    """(row, column) centroid of the pixels that are not background."""
    rows, cols = np.nonzero((img != np.array(background, dtype=np.uint8)).any(axis=-1))
    return rows.mean(), cols.mean()


def test_orientation(gl: GlBackend) -> None:
    shifts = np.array([[0, 0, 0], [0.5, 0, 0], [0, 0.5, 0]], dtype=np.float64)
    imgs = gl.render(octahedron(0.3), translation(shifts), TOP, np.ones((3, 3)), Camera(), Light(),
                     RenderSettings(BG, 1))
    r0, c0 = silhouette_centre(imgs[0], (51, 102, 153))
    r1, c1 = silhouette_centre(imgs[1], (51, 102, 153))
    r2, c2 = silhouette_centre(imgs[2], (51, 102, 153))
    assert abs(r0 - 31.5) < 1 and abs(c0 - 31.5) < 1  # centred
    assert c1 > c0 + 5 and abs(r1 - r0) < 1  # world +x (image right) -> right
    assert r2 < r0 - 5 and abs(c2 - c0) < 1  # world +y (image up) -> up: smaller row index
    # with the z-up side view (elevation 0, azimuth 0: camera on +x looking at the origin), world +z is up
    side = orbit_views(np.zeros(2), np.zeros(2), 3.0)
    up = gl.render(octahedron(0.3), translation(np.array([[0, 0, 0], [0, 0, 0.5]], dtype=np.float64)), side,
                   np.ones((2, 3)), Camera(), Light(), RenderSettings(BG, 1))
    assert silhouette_centre(up[1], (51, 102, 153))[0] < silhouette_centre(up[0], (51, 102, 153))[0] - 5


def test_antialiasing(gl: GlBackend) -> None:
    # a flat-lit, slightly rotated square: one colour inside, background outside
    model = rotation_z(np.array([0.3]))
    args = (quad(0.6), model, TOP, np.ones((1, 3)), Camera(), Light((0, 0, 1), 1.0, 0.0))
    hard = gl.render(*args, RenderSettings((0, 0, 0), 1))[0]
    assert set(np.unique(hard)) == {0, 255}
    for samples in (4, 16):
        soft = gl.render(*args, RenderSettings((0, 0, 0), samples))[0]
        values = np.unique(soft)
        assert len(values) > 3 and values.min() == 0 and values.max() == 255
        assert (np.abs(soft.astype(int) - hard) > 0).mean() < 0.1  # only edge pixels change


def test_deterministic(gl: GlBackend) -> None:
    rng = np.random.default_rng(1)
    m = 80
    model = rotation_z(rng.uniform(0, 6, m))
    view = orbit_views(rng.uniform(0, 6, m), rng.uniform(-1, 1, m), 3.0)
    colours = rng.uniform(0, 1, (m, 3))
    for samples in (1, 4):
        a = gl.render(octahedron(), model, view, colours, Camera(), Light(), RenderSettings(BG, samples))
        b = gl.render(octahedron(), model, view, colours, Camera(), Light(), RenderSettings(BG, samples))
        assert a.tobytes() == b.tobytes()


def test_empty_batch(gl: GlBackend) -> None:
    out = gl.render(octahedron(), np.zeros((0, 4, 4)), np.zeros((0, 4, 4)), np.zeros((0, 3)), Camera(), Light(),
                    RenderSettings())
    assert out.shape == (0, 64, 64, 3)


def test_unavailable_message(monkeypatch: pytest.MonkeyPatch) -> None:
    import factorbench.generators.render.gl as glmod

    monkeypatch.setattr(glmod, "_EGL_PID", [])
    monkeypatch.setattr(glmod, "_PROBE", {})
    monkeypatch.setattr(glmod, "_PROBE_SCRIPT", "raise SystemExit('no EGL display')")
    reason = GlBackend.unavailable_reason()
    assert reason is not None and "apt-get install libegl1 libgl1-mesa-dri" in reason and "cpu" in reason
    assert "no EGL display" in reason


# -- the f x f block average on the GL side ------------------------------------------------------


def test_box_is_the_mean_rounded_half_to_even() -> None:
    rng = np.random.default_rng(2)
    for f in (2, 3, 4):
        img = rng.integers(0, 256, (3, 5 * f, 5 * f, 3), dtype=np.uint8)
        mean = img.reshape(3, 5, f, 5, f, 3).astype(np.float64).mean(axis=(2, 4))
        assert np.array_equal(_box(img, f), np.rint(mean).astype(np.uint8))
    # ties go to the even neighbour: (1 + 2) / 2 -> 2, (2 + 3) / 2 -> 2
    assert _box(np.array([[[[1], [2]], [[1], [2]]]], dtype=np.uint8), 2).item() == 2
    assert _box(np.array([[[[2], [3]], [[2], [3]]]], dtype=np.uint8), 2).item() == 2


def on_cpu(backend: GlBackend, f: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Leave the f x f average to the cpu (_box), as where the GL side cannot do it."""
    monkeypatch.setitem(backend._reducers, f, None)


@pytest.mark.parametrize("samples", [4, 16])
def test_gl_block_average_is_byte_identical_to_box(gl: GlBackend, samples: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 1 to 130 over draw calls of at most 64 layers (full chunks read straight into the result,
    partial ones through a copy), even and odd image sizes: the same bytes as averaging on the cpu."""
    f = int(np.sqrt(samples))
    assert gl._reducer(f) is not None  # this GL can average on its side
    model, view, colours = random_scenes(130, seed=13)
    light = Light((0.3, -0.4, 1.0), 0.7, 0.3)
    results = {}
    for size in (32, 21):
        for m in (1, 5, 63, 64, 65, 100, 130):
            args = (octahedron(0.8), model[:m], view[:m], colours[:m], Camera(image_size=size), light,
                    RenderSettings(BG, samples))
            results[size, m] = gl.render(*args)
    on_cpu(gl, f, monkeypatch)
    for (size, m), image in results.items():
        args = (octahedron(0.8), model[:m], view[:m], colours[:m], Camera(image_size=size), light,
                RenderSettings(BG, samples))
        assert image.tobytes() == gl.render(*args).tobytes(), (size, m)
        assert image.tobytes() == results[size, 130][:m].tobytes(), (size, m)  # and batch-independent
    assert len(np.unique(results[32, 130])) > 100  # many intermediate values: real averaging was compared


@pytest.mark.parametrize("samples", [4, 16])
def test_teapot_block_average_is_byte_identical_to_box(gl: GlBackend, samples: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The teapot dataset's scenes, through the dataset's renderer (the cached backend) and through one
    drawing at most 64 layers a call (batches across chunk boundaries)."""
    import factorbench.generators.render as render

    gen = get("teapot", {"samples": samples}, backend="gl")
    values, _ = gen.sample_factors(gen.spec(n=200), 0, 200)
    f = int(np.sqrt(samples))
    gpu = {m: gen.render(values[:m]) for m in (1, 97, 200)}
    monkeypatch.setitem(render._INSTANCES, "gl", gl)
    chunked = {m: gen.render(values[:m]) for m in (64, 65, 130)}
    on_cpu(gl, f, monkeypatch)
    cpu = gen.render(values)
    for m, images in (gpu | chunked).items():
        assert images.tobytes() == cpu[:m].tobytes(), m


def test_block_average_falls_back_to_box(gl: GlBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block-average pass that does not build, or that disagrees with _box (here: a truncated mean), is not
    used: the cpu averages and the bytes stay the same."""
    import factorbench.generators.render.gl as glmod

    model, view, colours = random_scenes(40, seed=17)
    args = (octahedron(0.8), model, view, colours, Camera(image_size=32), Light((0.3, -0.4, 1.0), 0.7, 0.3),
            RenderSettings(BG, 4))
    expected = gl.render(*args)
    rounding = "q + (uvec4(greaterThan(r2, uvec4(n))) | (uvec4(equal(r2, uvec4(n))) & (q & 1u)))"
    assert rounding in glmod._REDUCE_FRAGMENT_SHADER
    for shader in (glmod._REDUCE_FRAGMENT_SHADER.replace(rounding, "q"),
                   glmod._REDUCE_FRAGMENT_SHADER.replace("uvec4 total", "not glsl")):
        monkeypatch.setattr(glmod, "_REDUCE_FRAGMENT_SHADER", shader)
        other = GlBackend(max_tiles=16)
        assert other._reducer(2) is None
        assert other.render(*args).tobytes() == expected.tobytes()
