"""The reference backend: pyrender (the maintained fork ``pyrender-maintained``) through EGL.

pyrender has no batching: each instance is one ``pyrender.Scene`` render (one mesh node with pose
``model[i]``, one camera node with pose ``inverse(view[i])``), on one ``OffscreenRenderer`` kept per
framebuffer size. pyrender's physically based shading is not used: the shading model of
:mod:`.scene` is computed on the CPU (:func:`.scene.vertex_colours`) and handed over as per-vertex
colours (``COLOR_0``) drawn with ``RenderFlags.FLAT`` (pyrender's unlit shader:
``frag_color = clamp(base_color_factor * color_0)`` with the default material's factor of ones).

Colour space: with ``FLAT`` pyrender writes the fragment colour unchanged into a plain (not sRGB)
RGBA8 renderbuffer and applies no gamma or tone mapping of its own, and ``bg_color`` is written
unchanged by ``glClear``. The linear colour therefore cannot be sRGB-encoded per fragment (that would
need a float framebuffer, or a shader of our own); encoding the 8-bit linear result afterwards would
lose most of the precision in dark tones, average linear rather than encoded samples, and re-encode
the background. Instead each vertex colour is clamped and sRGB-encoded on the CPU and the *encoded*
colours are interpolated (perspective-correctly) by pyrender. The consequence: inside a triangle the
value is ``encode(clamp(c_a)) * w_a + ...`` instead of ``encode(clamp(c_a * w_a + ...))`` (the sRGB
curve is concave, so interiors come out very slightly darker where shading varies across a triangle,
and where a triangle crosses the clamp at 1 the saturated region is interpolated, not flat); edges and
the background are exact in the conventions (MSAA averages encoded samples; the background is the
given encoded colour, bit for bit).

Antialiasing: pyrender always draws into a 4x MSAA renderbuffer and resolves it with a blit.
``samples=4`` is exactly that; ``samples=16`` renders at twice the resolution (4x MSAA each) and
averages 2 x 2 blocks of the encoded result; ``samples=1`` disables ``GL_MULTISAMPLE`` for the draw
(pyrender re-enables it in every pass, so its ``glEnable`` is filtered for the duration of our call),
which makes every fragment cover all samples of its pixel: one sample at the pixel centre.
Back faces are drawn (``SKIP_CULL_FACES``), as in the other backends.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, ClassVar, Iterator

import numpy as np

from ..errors import FactorbenchError
from . import Backend, probe_in_child
from .scene import Camera, Light, RenderSettings, linear_to_srgb, vertex_colours

_PROBE: dict[str, Any] = {}
#: the process that initialised EGL here (Mesa's EGL state does not survive fork)
_EGL_PID: list[int] = []

_PROBE_SCRIPT = ("import os; os.environ['PYOPENGL_PLATFORM'] = 'egl'; import pyrender; "
                 "r = pyrender.OffscreenRenderer(8, 8); "
                 "from OpenGL.GL import glGetString, GL_RENDERER; print(glGetString(GL_RENDERER).decode()); "
                 "r.delete()")
_INSTALL = "pip install 'factorbench[pyrender]' (package pyrender-maintained)"
_FORK_MESSAGE = ("the pyrender backend cannot be used in a process forked from one that had already initialised "
                 "EGL; create the backend only in the worker processes, or use the 'spawn' start method")
_GL_MULTISAMPLE = 0x809D


def _unavailable(detail: str) -> str:
    return (f"pyrender cannot render offscreen here ({detail}); it needs {_INSTALL} and a working EGL "
            "(on Debian/Ubuntu: apt-get install libegl1 libgl1-mesa-dri)")


def _import_pyrender() -> Any:
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    import pyrender

    return pyrender


def _version(pyrender: Any) -> str:
    try:
        from importlib.metadata import version

        return f"pyrender-maintained {version('pyrender-maintained')}"
    except Exception:  # noqa: BLE001 -- installed some other way
        return f"pyrender {getattr(pyrender, '__version__', '?')}"


@contextlib.contextmanager
def _multisampling_off(pyrender: Any) -> Iterator[None]:
    """Keep GL_MULTISAMPLE disabled while pyrender renders (its forward pass enables it every time)."""
    module = sys.modules["pyrender.renderer"]
    original = module.glEnable

    def gl_enable(cap: int) -> None:
        if int(cap) == _GL_MULTISAMPLE:
            module.glDisable(cap)
        else:
            original(cap)

    module.glEnable = gl_enable
    try:
        yield
    finally:
        module.glEnable = original


class PyrenderBackend(Backend):
    name: ClassVar[str] = "pyrender"

    def __init__(self) -> None:
        reason = self.unavailable_reason()
        if reason:
            raise FactorbenchError(f"render backend 'pyrender' is not available: {reason}")
        self._pyrender = _import_pyrender()
        self._renderers: dict[int, Any] = {}
        self._pid = os.getpid()
        self._identity = f"pyrender ({_version(self._pyrender)}, EGL)"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Tried once per process, in a child process (this one does not initialise EGL just to ask)."""
        if "reason" not in _PROBE:
            if _EGL_PID and _EGL_PID[0] == os.getpid():
                return None  # a renderer already exists here
            platform = os.environ.get("PYOPENGL_PLATFORM", "egl")
            if platform != "egl":
                return _unavailable(f"PYOPENGL_PLATFORM is {platform!r}; this backend uses EGL only")
            try:
                import importlib.util

                if importlib.util.find_spec("pyrender") is None:
                    _PROBE["reason"] = _unavailable("pyrender is not installed")
                    return _PROBE["reason"]
                failure = probe_in_child(_PROBE_SCRIPT)
                _PROBE["reason"] = None if failure is None else _unavailable(failure)
            except Exception as error:  # noqa: BLE001 -- any failure means "not here"
                _PROBE["reason"] = _unavailable(f"{type(error).__name__}: {error}")
        return _PROBE["reason"]

    def identity(self) -> str:
        return self._identity

    def _renderer(self, size: int) -> Any:
        if os.getpid() != self._pid or (_EGL_PID and _EGL_PID[0] != os.getpid()):
            raise FactorbenchError(_FORK_MESSAGE)
        if size not in self._renderers:
            self._renderers[size] = self._pyrender.OffscreenRenderer(size, size)
            if not _EGL_PID:
                _EGL_PID.append(os.getpid())
        return self._renderers[size]

    def close(self) -> None:
        """Free the renderers (their EGL contexts)."""
        for renderer in self._renderers.values():
            renderer.delete()
        self._renderers.clear()

    def render(self, mesh: Any, model: np.ndarray, view: np.ndarray, colours: np.ndarray, camera: Camera,
               light: Light, settings: RenderSettings) -> np.ndarray:
        pr = self._pyrender
        size = camera.image_size
        factor = 2 if settings.samples == 16 else 1  # 16 = 2 x 2 supersampling of 4x MSAA
        renderer = self._renderer(size * factor)
        vertices = np.asarray(mesh.vertices, dtype=np.float32)
        faces = np.asarray(mesh.faces, dtype=np.uint32)
        normals = np.asarray(mesh.vertex_normals, dtype=np.float64)
        m = len(model)
        out = np.empty((m, size, size, 3), dtype=np.uint8)
        if m == 0:
            return out

        scene = pr.Scene(bg_color=np.array([*settings.background, 1.0]), ambient_light=np.zeros(3))
        pr_camera = pr.PerspectiveCamera(yfov=np.radians(camera.fov_y_degrees), znear=camera.near,
                                         zfar=camera.far, aspectRatio=1.0)
        camera_node = scene.add(pr_camera, pose=np.eye(4))
        flags = pr.RenderFlags.FLAT | (pr.RenderFlags.NONE if settings.cull_back_faces else pr.RenderFlags.SKIP_CULL_FACES)
        material = pr.MetallicRoughnessMaterial(baseColorFactor=np.ones(4), metallicFactor=0.0,
                                                roughnessFactor=1.0, alphaMode="OPAQUE")
        alpha = np.ones((len(vertices), 1), dtype=np.float32)
        mesh_node = None
        sampling = _multisampling_off(pr) if settings.samples == 1 else contextlib.nullcontext()
        with sampling:
            for i in range(m):
                encoded = linear_to_srgb(vertex_colours(normals, model[i:i + 1], colours[i:i + 1], light)[0])
                primitive = pr.Primitive(positions=vertices, indices=faces, mode=pr.constants.GLTF.TRIANGLES,
                                         color_0=np.hstack([encoded.astype(np.float32), alpha]),
                                         material=material)
                if mesh_node is not None:
                    scene.remove_node(mesh_node)
                mesh_node = scene.add(pr.Mesh([primitive]), pose=model[i])
                scene.set_pose(camera_node, np.linalg.inv(view[i]))
                colour, _ = renderer.render(scene, flags=flags)
                if factor == 1:
                    out[i] = colour[..., :3]
                else:
                    blocks = colour[..., :3].reshape(size, factor, size, factor, 3).astype(np.float64)
                    out[i] = np.rint(blocks.mean(axis=(1, 3))).astype(np.uint8)
        return out
