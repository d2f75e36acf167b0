"""The fast backend: moderngl with a headless EGL context, many instances per draw call.

One large framebuffer holds a grid of tiles, each ``image_size`` pixels square with a few pixels of
padding between them. A chunk of up to ``cols * rows`` instances is drawn with a single instanced draw
call: instance ``k`` of the call (``gl_InstanceID``) goes to tile ``k`` (row-major from the bottom-left
of the framebuffer; rows are flipped on read-back so that image row 0 is the top).

Tile independence (byte-identical pixels for an instance whatever tile it lands in, hence whatever the
batch size): the vertex shader divides by w itself, snaps the tile-local window position to a 1/256
pixel grid and adds the tile's integer origin; the framebuffer's sides are powers of two, so the
framebuffer NDC it outputs (with w = 1) is exact and every tile's rasteriser sees the same sub-pixel
positions. A geometry shader hands each fragment its triangle's tile-local vertex positions, depths and
(colour / w, 1 / w) as flat values; the fragment shader interpolates them itself from the exact
tile-local pixel centre (perspective-correctly, and writes the depth), because the rasteriser's own
attribute planes are anchored at the framebuffer origin and round differently in every tile. Triangles
are clipped to their tile with four ``gl_ClipDistance`` planes in tile-local terms (the padding absorbs
the clipper's rounding), depth clamping replaces near/far clipping. Limitation: a triangle with a vertex
at or behind the camera's near distance (``clip.w <= near``) is not drawn at all (scenes keep the object
in front of the camera). Shading is per vertex as in :func:`.scene.vertex_colours`; the interpolated
linear colour is clamped and sRGB-encoded per fragment into an RGBA8 target.

Antialiasing: ``samples`` up to ``GL_MAX_SAMPLES`` use MSAA renderbuffers resolved with
``copy_framebuffer`` (the resolve averages encoded samples). Larger counts (16 on llvmpipe, whose
maximum is 4) render at ``f`` times the resolution with ``samples / f**2`` MSAA samples and average
``f x f`` blocks of the encoded result on the CPU.
"""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
from collections import OrderedDict
from typing import Any, ClassVar

import numpy as np

from ..errors import FactorbenchError
from . import Backend
from .scene import Camera, Light, RenderSettings

_VERTEX_SHADER = """
#version 330
in vec3 in_position;
in vec3 in_normal;
in mat4 in_mvp;
in mat3 in_model3;
in vec3 in_colour;

uniform int cols;
uniform float size;       // tile size in framebuffer pixels
uniform float pitch;      // tile pitch in framebuffer pixels (size + PAD)
uniform vec2 to_ndc;      // 2 / framebuffer size (the size is a power of two, so this is exact)
uniform float near;       // camera near distance: vertices with clip.w <= near are not drawn
uniform vec3 light_dir;   // unit vector towards the light (world)
uniform float intensity;
uniform float ambient;

out vec2 g_p;         // tile-local window position (pixels, on the 1/256 grid)
flat out vec2 g_origin;
out float g_front;
out vec4 g_attr;      // linear colour / w, 1 / w
out float g_z;        // NDC depth

void main() {
    vec4 clip = in_mvp * vec4(in_position, 1.0);
    bool front = clip.w > near;
    float w = front ? clip.w : near;  // never divide by ~0 (such triangles are dropped below)
    vec3 ndc = clip.xyz / w;
    // tile-local window position on a grid of 1/256 pixel: exact, and the same in every tile
    vec2 p = floor((ndc.xy * 0.5 + 0.5) * size * 256.0 + 0.5) / 256.0;
    int col = gl_InstanceID % cols;
    int row = gl_InstanceID / cols;
    vec2 origin = vec2(float(col), float(row)) * pitch;   // integer pixels
    vec2 big = (origin + p) * to_ndc - 1.0;               // exact while the framebuffer is < 2^15 pixels
    gl_Position = vec4(big, ndc.z, 1.0);
    g_front = front ? 1.0 : 0.0;
    g_p = p;
    g_origin = origin;
    g_z = ndc.z;

    vec3 n = in_model3 * in_normal;
    n = n / max(length(n), 1e-12);
    float lambert = max(dot(n, light_dir), 0.0);
    g_attr.w = 1.0 / w;
    g_attr.xyz = in_colour * (intensity * lambert + ambient) * g_attr.w;
}
"""

_GEOMETRY_SHADER = """
#version 330
layout(triangles) in;
layout(triangle_strip, max_vertices = 3) out;
in vec2 g_p[];
flat in vec2 g_origin[];
in float g_front[];
in vec4 g_attr[];
in float g_z[];
uniform float size;
flat out vec2 f_origin;
flat out vec2 f_p0;
flat out vec2 f_p1;
flat out vec2 f_p2;
flat out vec4 f_a0;
flat out vec4 f_a1;
flat out vec4 f_a2;
flat out vec3 f_z;
out gl_PerVertex { vec4 gl_Position; float gl_ClipDistance[4]; };

void main() {
    if (g_front[0] * g_front[1] * g_front[2] == 0.0) return;  // a vertex behind the camera: not drawn
    for (int i = 0; i < 3; i++) {
        gl_Position = gl_in[i].gl_Position;
        // clip to the tile's square, in tile-local terms (the padding absorbs rounding in the clipper)
        gl_ClipDistance[0] = g_p[i].x;
        gl_ClipDistance[1] = size - g_p[i].x;
        gl_ClipDistance[2] = g_p[i].y;
        gl_ClipDistance[3] = size - g_p[i].y;
        f_origin = g_origin[0];
        f_p0 = g_p[0]; f_p1 = g_p[1]; f_p2 = g_p[2];
        f_a0 = g_attr[0]; f_a1 = g_attr[1]; f_a2 = g_attr[2];
        f_z = vec3(g_z[0], g_z[1], g_z[2]);
        EmitVertex();
    }
    EndPrimitive();
}
"""

_FRAGMENT_SHADER = """
#version 330
flat in vec2 f_origin;
flat in vec2 f_p0;
flat in vec2 f_p1;
flat in vec2 f_p2;
flat in vec4 f_a0;
flat in vec4 f_a1;
flat in vec4 f_a2;
flat in vec3 f_z;
out vec4 f_colour;

float edge(vec2 a, vec2 b, vec2 q) { return (b.x - a.x) * (q.y - a.y) - (b.y - a.y) * (q.x - a.x); }

void main() {
    // interpolation by hand, in tile-local coordinates (exact pixel centres): the rasteriser's own
    // attribute planes are anchored at the framebuffer origin and round differently in every tile
    vec2 q = gl_FragCoord.xy - f_origin;
    vec3 b = vec3(edge(f_p1, f_p2, q), edge(f_p2, f_p0, q), edge(f_p0, f_p1, q));
    b = b / (b.x + b.y + b.z);
    vec4 a = b.x * f_a0 + b.y * f_a1 + b.z * f_a2;
    gl_FragDepth = clamp(dot(b, f_z) * 0.5 + 0.5, 0.0, 1.0);
    vec3 x = clamp(a.xyz / a.w, 0.0, 1.0);  // perspective-correct
    vec3 lo = 12.92 * x;
    vec3 hi = 1.055 * pow(x, vec3(1.0 / 2.4)) - 0.055;
    f_colour = vec4(mix(hi, lo, lessThanEqual(x, vec3(0.0031308))), 1.0);
}
"""

_GL_CLIP_DISTANCE0 = 0x3000
_N_CLIP = 4
_GL_DEPTH_CLAMP = 0x864F
#: pixels of padding between tiles (absorbs rounding where triangles are clipped at a tile edge)
PAD = 2
#: meshes whose buffers are kept on the GPU
MESH_CACHE = 8
#: most framebuffer samples (pixels x MSAA samples) per draw call: bounds the memory (about 8 bytes each)
MAX_FRAMEBUFFER_SAMPLES = 1 << 24

_PROBE: dict[str, Any] = {}
#: the process that initialised EGL here (Mesa's EGL/llvmpipe state does not survive fork)
_EGL_PID: list[int] = []

_PROBE_SCRIPT = ("import moderngl; ctx = moderngl.create_standalone_context(backend='egl'); "
                 "print(ctx.info['GL_RENDERER']); ctx.release()")
_FORK_MESSAGE = ("the gl backend cannot be used in a process forked from one that had already initialised EGL "
                 "(Mesa hangs); create the backend only in the worker processes, or use the 'spawn' start method")


def _pow2_at_most(n: int) -> int:
    return 1 << (max(1, int(n)).bit_length() - 1)


def _pow2_at_least(n: int) -> int:
    return 1 << (max(1, int(n)) - 1).bit_length()


def _create_context() -> Any:
    import moderngl

    if _EGL_PID and _EGL_PID[0] != os.getpid():
        raise FactorbenchError(_FORK_MESSAGE)
    ctx = moderngl.create_standalone_context(backend="egl")
    if not _EGL_PID:
        _EGL_PID.append(os.getpid())
    return ctx


def _unavailable(detail: str) -> str:
    return (f"cannot create a headless OpenGL context with moderngl and EGL ({detail}); EGL or Mesa is probably "
            "missing (on Debian/Ubuntu: apt-get install libegl1 libgl1-mesa-dri; and pip install moderngl); "
            "the cpu backend is used instead")


class GlBackend(Backend):
    name: ClassVar[str] = "gl"

    def __init__(self, max_tiles: int = 1024, max_framebuffer: int = 4096) -> None:
        reason = self.unavailable_reason()
        if reason:
            raise FactorbenchError(f"render backend 'gl' is not available: {reason}")
        import moderngl

        self._moderngl = moderngl
        self.ctx = _create_context()
        self._pid = os.getpid()
        info = self.ctx.info
        self.max_samples = int(self.ctx.max_samples)
        limit = min(int(info["GL_MAX_TEXTURE_SIZE"]), *(int(d) for d in info["GL_MAX_VIEWPORT_DIMS"]),
                    int(info.get("GL_MAX_RENDERBUFFER_SIZE", max_framebuffer)))
        self.max_framebuffer = min(max_framebuffer, limit)
        self.max_tiles = max(1, int(max_tiles))
        self.program = self.ctx.program(vertex_shader=_VERTEX_SHADER, geometry_shader=_GEOMETRY_SHADER,
                                       fragment_shader=_FRAGMENT_SHADER)
        self._meshes: OrderedDict[bytes, tuple[Any, int, Any, Any]] = OrderedDict()
        self._targets: dict[tuple[int, int], tuple[Any, ...]] = {}
        cols, rows = self._layout(1)[:2]  # the largest grid: instances per draw call for any image size
        self._instance_buffer = self.ctx.buffer(reserve=cols * rows * 28 * 4)
        self._identity = (f"gl (moderngl {moderngl.__version__}, EGL, GL_RENDERER: {info['GL_RENDERER']}, "
                          f"GL_VERSION {info['GL_VERSION']})")

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Tried once per process, in a child process so that this one never initialises EGL just to ask
        (a forked worker could not use it afterwards)."""
        if "reason" not in _PROBE:
            if _EGL_PID and _EGL_PID[0] == os.getpid():
                return None  # a context already exists here
            try:
                import moderngl  # noqa: F401

                probe = subprocess.run([sys.executable, "-c", _PROBE_SCRIPT], capture_output=True, text=True,
                                       timeout=120)
                if probe.returncode == 0 and probe.stdout.strip():
                    _PROBE["reason"] = None
                else:
                    lines = (probe.stderr or probe.stdout).strip().splitlines()
                    _PROBE["reason"] = _unavailable(lines[-1] if lines else f"exit status {probe.returncode}")
            except Exception as error:  # noqa: BLE001 -- any failure means "no GL here"
                _PROBE["reason"] = _unavailable(f"{type(error).__name__}: {error}")
        return _PROBE["reason"]

    def identity(self) -> str:
        return self._identity

    # -- resources -------------------------------------------------------------------------------

    def _mesh(self, mesh: Any) -> tuple[Any, int]:
        """(vertex array, index count) for ``mesh``, uploaded once and cached by content."""
        vertices = np.ascontiguousarray(mesh.vertices, dtype=np.float32)
        normals = np.ascontiguousarray(mesh.vertex_normals, dtype=np.float32)
        faces = np.ascontiguousarray(mesh.faces, dtype=np.int32)
        if vertices.ndim != 2 or vertices.shape[1] != 3 or normals.shape != vertices.shape or faces.ndim != 2 \
                or faces.shape[1] != 3:
            raise FactorbenchError(f"mesh: vertices {vertices.shape}, vertex_normals {normals.shape} and faces "
                                   f"{faces.shape} must be (V, 3), (V, 3) and (F, 3)")
        if len(faces) and (faces.min() < 0 or faces.max() >= len(vertices)):
            raise FactorbenchError("mesh: face index out of range")
        digest = hashlib.blake2b(digest_size=16)
        for a in (vertices, normals, faces):
            digest.update(str(a.shape).encode())
            digest.update(a.tobytes())
        key = digest.digest()
        if key not in self._meshes:
            vbo = self.ctx.buffer(np.concatenate([vertices, normals], axis=1).tobytes())
            ibo = self.ctx.buffer(faces.tobytes())
            vao = self.ctx.vertex_array(
                self.program, [(vbo, "3f 3f", "in_position", "in_normal"),
                               (self._instance_buffer, "16f 9f 3f/i", "in_mvp", "in_model3", "in_colour")],
                index_buffer=ibo, index_element_size=4)
            self._meshes[key] = (vao, len(faces) * 3, vbo, ibo)
            while len(self._meshes) > MESH_CACHE:
                old_vao, _, old_vbo, old_ibo = self._meshes.popitem(last=False)[1]
                for resource in (old_vao, old_vbo, old_ibo):
                    resource.release()
        self._meshes.move_to_end(key)
        return self._meshes[key][:2]

    def _layout(self, size: int, msaa: int = 1) -> tuple[int, int, int, int, int]:
        """(cols, rows, pitch, width, height) of the tile grid for tiles of ``size`` pixels with ``msaa``
        samples each; the framebuffer's width and height are powers of two (exact NDC conversion)."""
        pitch = size + PAD
        full = _pow2_at_most(self.max_framebuffer)
        if size > full:
            raise FactorbenchError(f"gl: image size {size} exceeds the framebuffer limit {full}")
        side = max(_pow2_at_least(size), min(full, _pow2_at_most(math.isqrt(MAX_FRAMEBUFFER_SAMPLES // msaa))))
        fit = max(1, (side + PAD) // pitch)
        cols = max(1, min(fit, math.ceil(math.sqrt(self.max_tiles))))
        rows = max(1, min(fit, math.ceil(self.max_tiles / cols)))
        return cols, rows, pitch, _pow2_at_least(cols * pitch - PAD), _pow2_at_least(rows * pitch - PAD)

    def _target(self, size: int, msaa: int) -> tuple[Any, ...]:
        key = (size, msaa)
        if key not in self._targets:
            cols, rows, pitch, width, height = self._layout(size, msaa)
            ctx = self.ctx
            resolve = ctx.framebuffer(color_attachments=[ctx.renderbuffer((width, height), 4)],
                                      depth_attachment=ctx.depth_renderbuffer((width, height)) if msaa == 1 else None)
            draw = resolve
            if msaa > 1:
                draw = ctx.framebuffer(color_attachments=[ctx.renderbuffer((width, height), 4, samples=msaa)],
                                       depth_attachment=ctx.depth_renderbuffer((width, height), samples=msaa))
            self._targets[key] = (draw, resolve, cols, rows, pitch, width, height)
        return self._targets[key]

    def _sampling(self, samples: int) -> tuple[int, int]:
        """(supersampling factor f, MSAA samples) with f * f * msaa == samples."""
        for msaa in (samples, 16, 8, 4, 2, 1):
            if msaa <= min(samples, max(self.max_samples, 1)) and samples % msaa == 0:
                f = math.isqrt(samples // msaa)
                if f * f * msaa == samples:
                    return f, msaa
        raise FactorbenchError(f"gl: cannot make {samples} samples per pixel")

    # -- rendering -------------------------------------------------------------------------------

    def render(self, mesh: Any, model: np.ndarray, view: np.ndarray, colours: np.ndarray, camera: Camera,
               light: Light, settings: RenderSettings) -> np.ndarray:
        if os.getpid() != self._pid:
            raise FactorbenchError(_FORK_MESSAGE)
        with self.ctx:  # make the context current (the calling thread may differ from the creating one)
            return self._render(mesh, model, view, colours, camera, light, settings)

    def _render(self, mesh: Any, model: np.ndarray, view: np.ndarray, colours: np.ndarray, camera: Camera,
                light: Light, settings: RenderSettings) -> np.ndarray:
        model = np.asarray(model, dtype=np.float64)
        view = np.asarray(view, dtype=np.float64)
        colours = np.asarray(colours, dtype=np.float64)
        m, out_size = len(model), camera.image_size
        out = np.empty((m, out_size, out_size, 3), dtype=np.uint8)
        if m == 0:
            return out
        vao, n_indices = self._mesh(mesh)
        f, msaa = self._sampling(settings.samples)
        size = out_size * f
        draw, resolve, cols, rows, pitch, width, height = self._target(size, msaa)
        tiles = cols * rows

        mvp = camera.projection()[None] @ view @ model
        # per-instance attributes, column-major matrices: mat4 (16) + mat3 (9) + colour (3)
        data = np.empty((m, 28), dtype=np.float32)
        data[:, :16] = mvp.transpose(0, 2, 1).reshape(m, 16)
        data[:, 16:25] = model[:, :3, :3].transpose(0, 2, 1).reshape(m, 9)
        data[:, 25:] = colours

        prog = self.program
        prog["cols"].value = cols
        prog["size"].value = float(size)
        prog["pitch"].value = float(pitch)
        prog["to_ndc"].value = (2.0 / width, 2.0 / height)
        prog["near"].value = float(camera.near)
        prog["light_dir"].value = tuple(float(v) for v in light.unit_direction())
        prog["intensity"].value = float(light.intensity)
        prog["ambient"].value = float(light.ambient)

        ctx = self.ctx
        ctx.enable(self._moderngl.DEPTH_TEST)
        ctx.disable(self._moderngl.CULL_FACE)
        ctx.enable_direct(_GL_DEPTH_CLAMP)  # no near/far clipping: it would round differently per tile
        for i in range(_N_CLIP):
            ctx.enable_direct(_GL_CLIP_DISTANCE0 + i)
        background = tuple(float(c) for c in settings.background)
        try:
            for a in range(0, m, tiles):
                b = min(a + tiles, m)
                k = b - a
                self._instance_buffer.write(data[a:b].tobytes())
                draw.use()
                draw.viewport = (0, 0, width, height)
                draw.clear(*background, 1.0, depth=1.0)
                vao.render(self._moderngl.TRIANGLES, vertices=n_indices, instances=k)
                if draw is not resolve:
                    ctx.copy_framebuffer(resolve, draw)
                used_rows = math.ceil(k / cols)
                read_h = min(height, used_rows * pitch)
                read_w = min(width, cols * pitch)
                raw = resolve.read(viewport=(0, 0, read_w, read_h), components=3, alignment=1)
                img = np.frombuffer(raw, dtype=np.uint8).reshape(read_h, read_w, 3)
                img = np.pad(img, ((0, used_rows * pitch - read_h), (0, cols * pitch - read_w), (0, 0)))
                grid = img.reshape(used_rows, pitch, cols, pitch, 3)[:, :size, :, :size]
                grid = grid.transpose(0, 2, 1, 3, 4).reshape(used_rows * cols, size, size, 3)[:k, ::-1]
                if f > 1:
                    grid = grid.reshape(k, out_size, f, out_size, f, 3).mean(axis=(2, 4), dtype=np.float64)
                    grid = np.rint(grid).astype(np.uint8)
                out[a:b] = grid
        finally:
            ctx.disable_direct(_GL_DEPTH_CLAMP)
            for i in range(_N_CLIP):
                ctx.disable_direct(_GL_CLIP_DISTANCE0 + i)
        return out


__all__ = ["GlBackend"]
