"""The fast backend: moderngl with a headless EGL context, many instances per draw call.

Layered rendering: a chunk of up to ``max_tiles`` instances is drawn with one instanced draw call into a
2D texture array (RGBA8, with a layered 24-bit depth texture array, made through EGL's
``glTexStorage3D``/``glFramebufferTexture`` as moderngl has no depth arrays): instance ``k`` of the chunk
writes layer ``k`` (``gl_Layer``, set by the vertex shader through ``GL_ARB_shader_viewport_layer_array``
or ``GL_AMD_vertex_shader_layer``). Every instance is drawn at the same window coordinates, so the
rasteriser, depth test and (perspective-correct) attribute interpolation do exactly the same arithmetic for
an instance whatever layer, chunk or batch it lands in: pixels are byte-identical whatever the batch
size, with no snapping, geometry shader or hand-made interpolation. Layers are read back bottom row
first and flipped so that image row 0 is the top.

Depth: GL clips at the far plane, where the cpu backend drops the fragments beyond it. Limitation, as in
the cpu backend: a triangle with a vertex at or behind the camera's near distance (``clip.w <= near``) is
not drawn at all, so no drawn triangle reaches the near plane. The vertex shader cannot drop a triangle,
so instances with a vertex at ``clip.w <= GUARD * near`` (decided per instance in numpy, element-wise, so
never by the batch) are drawn in a second call by a program whose geometry shader drops such triangles
and sets ``gl_Layer``; where neither extension exists, every instance takes that program. Scenes keep
the object in front of the camera, so the datasets never need it. Shading is per vertex as in
:func:`.scene.vertex_colours`, clamped and sRGB-encoded per vertex; the encoded colour is interpolated
into the RGBA8 target.

Antialiasing: ``samples`` = ``f * f`` (1, 4, 16) renders the layers at ``f`` times the resolution and
averages each ``f x f`` block of the encoded bytes, rounded half to even: the cpu backend's ordered
sub-pixel grid (llvmpipe's MSAA in an earlier design cost as much and agreed worse). The average is a
second, instanced pass on the GL side: instance ``k`` draws one quad into an integer texture array of the
output size (``RGB8UI``, or ``RGBA8UI`` where that cannot be rendered to), whose fragment shader
``texelFetch``es the block's bytes from layer ``k`` of the supersampled target, sums them as integers and
writes their mean, rounded half to even exactly as :func:`_box` does. A layer of that target holds several
images one above the other (``BAND_HEIGHT`` pixels in all: more tiles for llvmpipe's threads), each top
row first, so only the output images are read back, in order, straight into the result. Where that pass
cannot be built, or where it disagrees with :func:`_box` on random blocks (checked the first time each
``f`` is used), the whole supersampled layers are read back and :func:`_box` averages them on the CPU.
Per chunk, the number of layers is a power of two (bounded by ``MAX_FRAMEBUFFER_SAMPLES`` and
``GL_MAX_ARRAY_TEXTURE_LAYERS``), so few targets are ever made; those of the last image size are kept.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections import OrderedDict
from typing import Any, ClassVar

import numpy as np

from ..errors import FactorbenchError
from . import Backend, probe_in_child
from .scene import Camera, Light, RenderSettings

_INSTANCE_FLOATS = 29  # mat4 mvp (16) + mat3 model (9) + colour (3) + layer (1)

_VERTEX_SHADER = """
#version 330
%(extension)s
in vec3 in_position;
in vec3 in_normal;
in mat4 in_mvp;
in mat3 in_model3;
in vec3 in_colour;
in float in_layer;        // the instance's layer of the target (an integer)

uniform vec3 light_dir;   // unit vector towards the light (world)
uniform float intensity;
uniform float ambient;

out vec3 %(prefix)scolour;    // sRGB-encoded vertex colour, interpolated perspective-correctly
%(guard_out)s

void main() {
    gl_Position = in_mvp * vec4(in_position, 1.0);
    %(layer)s
    vec3 n = in_model3 * in_normal;
    n = n / max(length(n), 1e-12);
    vec3 x = clamp(in_colour * (intensity * max(dot(n, light_dir), 0.0) + ambient), 0.0, 1.0);
    %(prefix)scolour = mix(1.055 * pow(x, vec3(1.0 / 2.4)) - 0.055, 12.92 * x, lessThanEqual(x, vec3(0.0031308)));
}
"""

# only for instances with a vertex near or behind the camera (and where the vertex shader cannot set gl_Layer)
_GEOMETRY_SHADER = """
#version 330
layout(triangles) in;
layout(triangle_strip, max_vertices = 3) out;
in vec3 g_colour[];
flat in int g_layer[];
uniform float near;       // camera near distance: triangles with a vertex at clip.w <= near are not drawn
out vec3 v_colour;

void main() {
    if (gl_in[0].gl_Position.w <= near || gl_in[1].gl_Position.w <= near || gl_in[2].gl_Position.w <= near) return;
    for (int i = 0; i < 3; i++) {
        gl_Position = gl_in[i].gl_Position;
        gl_Layer = g_layer[0];
        v_colour = g_colour[i];
        EmitVertex();
    }
    EndPrimitive();
}
"""

_FRAGMENT_SHADER = """
#version 330
in vec3 v_colour;
out vec4 f_colour;

void main() {
    f_colour = vec4(v_colour, 1.0);
}
"""

# the f x f block average: instance k averages supersampled layer k into band k % bands (a horizontal strip
# of the output size) of layer k / bands of the target, so that a layer of the target holds ``bands``
# images one above the other, image row 0 at the bottom of each: read back, the bytes are the images in
# order, top row first (taller layers also give llvmpipe's threads several tiles to share)
_REDUCE_VERTEX_SHADER = """
#version 330
%(extension)s
uniform int bands;
flat out int %(prefix)slayer;  // the source layer

void main() {
    // a triangle strip over the band: x from -1 to 1, y from -1 + 2 band / bands to -1 + 2 (band + 1) / bands
    float band = float(gl_InstanceID %% bands);
    float y = -1.0 + 2.0 * (band + float(gl_VertexID >> 1)) / float(bands);
    gl_Position = vec4(float((gl_VertexID & 1) * 2 - 1), y, 0.0, 1.0);
    %(prefix)slayer = gl_InstanceID;
    %(layer)s
}
"""

# where the vertex shader cannot set gl_Layer
_REDUCE_GEOMETRY_SHADER = """
#version 330
layout(triangles) in;
layout(triangle_strip, max_vertices = 3) out;
uniform int bands;
flat in int g_layer[];
flat out int v_layer;

void main() {
    for (int i = 0; i < 3; i++) {
        gl_Position = gl_in[i].gl_Position;
        gl_Layer = g_layer[0] / bands;
        v_layer = g_layer[0];
        EmitVertex();
    }
    EndPrimitive();
}
"""

# output pixel (x, y) of a band, y counted from the band's bottom and standing for image row y (from the top),
# is the block of f x f texels whose bottom-left texel is (f x, f (rows - 1 - y)) in the supersampled layer
# (stored bottom row first); the integer mean of the block's bytes, rounded half to even: q = total / n,
# and q + 1 where 2 (total - q n) > n or where it is n and q is odd
_REDUCE_FRAGMENT_SHADER = """
#version 330
uniform sampler2DArray source;  // the supersampled layers (RGBA8)
flat in int v_layer;
out uvec4 f_colour;

void main() {
    int rows = textureSize(source, 0).y / %(f)d;
    ivec2 p = ivec2(gl_FragCoord.xy);
    ivec2 corner = ivec2(p.x, rows - 1 - p.y %% rows) * %(f)d;
    uvec4 total = uvec4(0u);
    for (int j = 0; j < %(f)d; j++) {
        for (int i = 0; i < %(f)d; i++) {
            // a texel holds byte / 255: the byte back exactly
            total += uvec4(texelFetch(source, ivec3(corner + ivec2(i, j), v_layer), 0) * 255.0 + 0.5);
        }
    }
    uint n = %(n)du;
    uvec4 q = total / n;
    uvec4 r2 = 2u * (total - q * n);
    f_colour = q + (uvec4(greaterThan(r2, uvec4(n))) | (uvec4(equal(r2, uvec4(n))) & (q & 1u)));
}
"""

#: extensions that let a vertex shader write gl_Layer (else a geometry shader does it for every instance)
_LAYER_EXTENSIONS = ("GL_ARB_shader_viewport_layer_array", "GL_AMD_vertex_shader_layer")
_GL_TEXTURE_2D_ARRAY = 0x8C1A
_GL_DEPTH_COMPONENT24 = 0x81A6
_GL_FRAMEBUFFER = 0x8D40
_GL_DEPTH_ATTACHMENT = 0x8D00
#: meshes whose buffers are kept on the GPU
MESH_CACHE = 8
#: most samples (layers x pixels, supersampled) per draw call: bounds the memory (about 8 bytes each)
MAX_FRAMEBUFFER_SAMPLES = 1 << 24
#: an instance with a vertex at clip.w <= GUARD * near takes the geometry-shader path
GUARD = 2.0
#: the block-average target stacks output images up to this height per layer
BAND_HEIGHT = 256

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


class _GlFunctions:
    """The few GL entry points moderngl does not wrap (a layered depth texture), through EGL."""

    def __init__(self) -> None:
        import ctypes

        egl = ctypes.CDLL("libEGL.so.1")
        egl.eglGetProcAddress.restype = ctypes.c_void_p
        egl.eglGetProcAddress.argtypes = [ctypes.c_char_p]
        u, i = ctypes.c_uint, ctypes.c_int

        def load(name: str, *args: Any) -> Any:
            address = egl.eglGetProcAddress(name.encode())
            if not address:
                raise FactorbenchError(f"gl: no {name} in this OpenGL")
            return ctypes.CFUNCTYPE(None, *args)(address)

        self._ctypes = ctypes
        self.gen_textures = load("glGenTextures", i, ctypes.POINTER(u))
        self.delete_textures = load("glDeleteTextures", i, ctypes.POINTER(u))
        self.bind_texture = load("glBindTexture", u, u)
        self.tex_storage_3d = load("glTexStorage3D", u, i, u, i, i, i)
        self.bind_framebuffer = load("glBindFramebuffer", u, u)
        self.framebuffer_texture = load("glFramebufferTexture", u, u, u, i)

    def depth_array(self, size: int, layers: int) -> int:
        name = self._ctypes.c_uint(0)
        self.gen_textures(1, self._ctypes.byref(name))
        self.bind_texture(_GL_TEXTURE_2D_ARRAY, name.value)
        self.tex_storage_3d(_GL_TEXTURE_2D_ARRAY, 1, _GL_DEPTH_COMPONENT24, size, size, layers)
        self.bind_texture(_GL_TEXTURE_2D_ARRAY, 0)
        return name.value

    def attach_depth(self, framebuffer: int, texture: int) -> None:
        self.bind_framebuffer(_GL_FRAMEBUFFER, framebuffer)
        self.framebuffer_texture(_GL_FRAMEBUFFER, _GL_DEPTH_ATTACHMENT, texture, 0)
        self.bind_framebuffer(_GL_FRAMEBUFFER, 0)

    def delete_texture(self, texture: int) -> None:
        name = self._ctypes.c_uint(texture)
        self.delete_textures(1, self._ctypes.byref(name))


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
        self._gl = _GlFunctions()
        self.max_size = min(max_framebuffer, int(info["GL_MAX_TEXTURE_SIZE"]),
                            *(int(d) for d in info["GL_MAX_VIEWPORT_DIMS"]))
        self.max_layers = max(1, min(int(max_tiles), int(info.get("GL_MAX_ARRAY_TEXTURE_LAYERS", 256))))
        extension = next((e for e in _LAYER_EXTENSIONS if e in self.ctx.extensions), None)
        self._extension = extension
        guard_vs = _VERTEX_SHADER % {"extension": "", "prefix": "g_", "guard_out": "flat out int g_layer;",
                                     "layer": "g_layer = int(in_layer);"}
        self._guarded = self.ctx.program(vertex_shader=guard_vs, geometry_shader=_GEOMETRY_SHADER,
                                         fragment_shader=_FRAGMENT_SHADER)
        self._fast = None
        if extension is not None:
            fast_vs = _VERTEX_SHADER % {"extension": f"#extension {extension} : require", "prefix": "v_",
                                        "guard_out": "", "layer": "gl_Layer = int(in_layer);"}
            self._fast = self.ctx.program(vertex_shader=fast_vs, fragment_shader=_FRAGMENT_SHADER)
        self._meshes: OrderedDict[bytes, tuple[Any, ...]] = OrderedDict()
        self._targets: dict[tuple[int, int], tuple[Any, Any, int]] = {}
        self._reducers: dict[int, Any] = {}  # f -> vertex array of the block-average pass, or None (cpu)
        self._reduced: dict[tuple[int, int], tuple[Any, Any]] = {}
        self._components: int | None = None  # of the block-average targets: 3 (RGB8UI), or 4 (RGBA8UI) where
        # RGB8UI cannot be rendered to; decided by the first block-average pass made
        self._instances = [self.ctx.buffer(reserve=self.max_layers * _INSTANCE_FLOATS * 4) for _ in range(2)]
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

                failure = probe_in_child(_PROBE_SCRIPT)
                _PROBE["reason"] = None if failure is None else _unavailable(failure)
            except Exception as error:  # noqa: BLE001 -- any failure means "no GL here"
                _PROBE["reason"] = _unavailable(f"{type(error).__name__}: {error}")
        return _PROBE["reason"]

    def identity(self) -> str:
        return self._identity

    # -- resources -------------------------------------------------------------------------------

    def _mesh(self, mesh: Any) -> tuple[Any, ...]:
        """(fast vertex array or None, guarded vertex array, index count, vertices) for ``mesh``, uploaded
        once and cached by content."""
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
            vaos = [None if prog is None else self.ctx.vertex_array(
                prog, [(vbo, "3f 3f", "in_position", "in_normal"),
                       (instances, "16f 9f 3f 1f/i", "in_mvp", "in_model3", "in_colour", "in_layer")],
                index_buffer=ibo, index_element_size=4)
                for prog, instances in ((self._fast, self._instances[0]), (self._guarded, self._instances[1]))]
            used = vertices[np.unique(faces)].astype(np.float64)  # only vertices of faces can be behind the camera
            self._meshes[key] = (vaos[0], vaos[1], len(faces) * 3, used, vbo, ibo)
            while len(self._meshes) > MESH_CACHE:
                old = self._meshes.popitem(last=False)[1]
                for resource in (old[0], old[1], old[4], old[5]):
                    if resource is not None:
                        resource.release()
        self._meshes.move_to_end(key)
        return self._meshes[key][:4]

    def _target(self, size: int, layers: int) -> tuple[Any, Any, int]:
        """(framebuffer, colour texture array, depth texture name): ``layers`` layers of ``size`` pixels."""
        key = (size, layers)
        if key not in self._targets:
            for old in [k for k in self._targets if k[0] != size]:  # keep only this image size's targets
                framebuffer, colour, depth = self._targets.pop(old)
                framebuffer.release()
                colour.release()
                self._gl.delete_texture(depth)
            colour = self.ctx.texture_array((size, size, layers), 4)
            framebuffer = self.ctx.framebuffer(color_attachments=[colour])
            depth = self._gl.depth_array(size, layers)
            self._gl.attach_depth(framebuffer.glo, depth)
            framebuffer.depth_mask = True  # moderngl does not know of the depth attachment
            self._targets[key] = (framebuffer, colour, depth)
        return self._targets[key]

    def _bands(self, size: int, layers: int) -> int:
        """Images stacked in a layer of the block-average target (a power of two dividing ``layers``)."""
        return min(layers, _pow2_at_most(min(BAND_HEIGHT, self.max_size) // size))

    def _reduced_target(self, size: int, layers: int) -> tuple[Any, Any]:
        """(framebuffer, integer colour texture array) of the block-average pass for ``layers`` images of
        ``size`` pixels (the output size), stacked :meth:`_bands` to a layer."""
        key = (size, layers)
        if key not in self._reduced:
            for old in [k for k in self._reduced if k[0] != size]:  # keep only this image size's targets
                for resource in self._reduced.pop(old):
                    resource.release()
            bands = self._bands(size, layers)
            colour = self.ctx.texture_array((size, size * bands, layers // bands), self._components, dtype="u1")
            try:
                framebuffer = self.ctx.framebuffer(color_attachments=[colour])
            except self._moderngl.Error:
                colour.release()
                raise
            self._reduced[key] = (framebuffer, colour)
        return self._reduced[key]

    def _reducer(self, f: int) -> Any:
        """The vertex array of the ``f x f`` block-average pass, or None where the averaging is left to
        :func:`_box`: made on first use, and kept only if it builds and agrees with :func:`_box` byte for
        byte on random blocks (ties of both parities included)."""
        if f not in self._reducers:
            try:
                self._reducers[f] = self._make_reducer(f)
            except self._moderngl.Error:  # a shader feature missing here
                self._reducers[f] = None
        return self._reducers[f]

    def _make_reducer(self, f: int) -> Any:
        fragment = _REDUCE_FRAGMENT_SHADER % {"f": f, "n": f * f}
        if self._extension is not None:
            vertex = _REDUCE_VERTEX_SHADER % {"extension": f"#extension {self._extension} : require",
                                              "prefix": "v_", "layer": "gl_Layer = gl_InstanceID / bands;"}
            program = self.ctx.program(vertex_shader=vertex, fragment_shader=fragment)
        else:
            vertex = _REDUCE_VERTEX_SHADER % {"extension": "", "prefix": "g_", "layer": ""}
            program = self.ctx.program(vertex_shader=vertex, geometry_shader=_REDUCE_GEOMETRY_SHADER,
                                       fragment_shader=fragment)
        program["source"].value = 0  # texture unit 0
        vao = self.ctx.vertex_array(program, [])
        for components in (3, 4) if self._components is None else (self._components,):
            self._components = components
            try:
                if self._reduction_agrees(vao, f):
                    return vao
            except self._moderngl.Error:  # this integer format is not renderable here
                continue
            break
        vao.release()
        program.release()
        return None

    def _reduction_agrees(self, vao: Any, f: int) -> bool:
        """Whether the block-average pass gives :func:`_box`'s bytes on random layers."""
        rng = np.random.default_rng(0)
        side = 5
        layers = 2 * self._bands(side, 1 << 30)  # two layers of the target, several bands to each
        data = rng.integers(0, 256, (layers, side * f, side * f, 4), dtype=np.uint8)
        data[0, :f, :f], data[1, :f, :f] = 0, 255
        source = self.ctx.texture_array((side * f, side * f, layers), 4, data.tobytes())
        got = np.empty((layers, side, side, 3), dtype=np.uint8)
        try:
            self._reduce(vao, source, side, layers, layers, got)
        finally:
            source.release()
        return got.tobytes() == _box(data[:, ::-1, :, :3], f).tobytes()

    def _reduce(self, vao: Any, source: Any, size: int, layers: int, k: int, out: np.ndarray) -> None:
        """Average the blocks of the first ``k`` of the ``layers`` supersampled layers of ``source`` into
        ``out`` (k, size, size, 3), image row 0 at the top; only these bytes are read back."""
        framebuffer, colour = self._reduced_target(size, layers)
        framebuffer.use()
        source.use(location=0)
        vao.program["bands"].value = self._bands(size, layers)
        vao.render(self._moderngl.TRIANGLE_STRIP, vertices=4, instances=k)
        if self._components == 3 and k == layers and out.flags.c_contiguous:
            colour.read_into(out)  # straight into the result: no copy
        else:
            raw = np.frombuffer(colour.read(), dtype=np.uint8)
            out[...] = raw.reshape(layers, size, size, self._components)[:k, :, :, :3]  # bands in order

    def _layers(self, size: int, m: int) -> int:
        """Layers per draw call for ``m`` instances of ``size`` pixels (a power of two: few targets)."""
        most = min(self.max_layers, max(1, MAX_FRAMEBUFFER_SAMPLES // (size * size)))
        return min(_pow2_at_least(m), _pow2_at_most(most))

    @staticmethod
    def _guarded_instances(mvp: np.ndarray, vertices: np.ndarray, near: float) -> np.ndarray:
        """Which instances have a vertex at clip.w <= GUARD * near (element-wise, so that an instance's
        answer does not depend on the batch). A bound over the vertices' bounding sphere clears most
        instances at once: w = r . v + r_3 >= r . c + r_3 - |r| rho for |v - c| <= rho; the vertices are
        checked one by one only for the others. (Rounding at the threshold cannot change an image: an
        instance with every vertex near GUARD * near has no triangle behind near, so both programs draw it
        alike.)"""
        out = np.zeros(len(mvp), dtype=bool)
        if len(vertices) == 0:
            return out
        lo, hi = vertices.min(axis=0), vertices.max(axis=0)
        centre = (lo + hi) / 2.0
        rho = float(np.sqrt(((vertices - centre) ** 2).sum(axis=1)).max())
        r = mvp[:, 3]
        bound = (r[:, 0] * centre[0] + r[:, 1] * centre[1]) + (r[:, 2] * centre[2] + r[:, 3]) \
            - np.sqrt(r[:, 0] ** 2 + r[:, 1] ** 2 + r[:, 2] ** 2) * rho
        check = np.flatnonzero(~(bound > GUARD * near))
        step = max(1, (1 << 22) // len(vertices))
        for a in range(0, len(check), step):
            rows = r[check[a:a + step]]
            w = (rows[:, 0:1] * vertices[:, 0] + rows[:, 1:2] * vertices[:, 1]) \
                + (rows[:, 2:3] * vertices[:, 2] + rows[:, 3:4])
            out[check[a:a + step]] = w.min(axis=1) <= GUARD * near
        return out

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
        fast_vao, guarded_vao, n_indices, vertices = self._mesh(mesh)
        f = math.isqrt(settings.samples)
        if f * f != settings.samples:
            raise FactorbenchError(f"gl: {settings.samples} samples per pixel is not a square")
        size = out_size * f
        if size > self.max_size:
            raise FactorbenchError(f"gl: image size {out_size} x {f} (antialiasing) exceeds the texture limit "
                                   f"{self.max_size}")

        mvp = camera.projection()[None] @ view @ model
        # per-instance attributes, column-major matrices: mat4 (16) + mat3 (9) + colour (3) + layer (1)
        data = np.empty((m, _INSTANCE_FLOATS), dtype=np.float32)
        data[:, :16] = mvp.transpose(0, 2, 1).reshape(m, 16)
        data[:, 16:25] = model[:, :3, :3].transpose(0, 2, 1).reshape(m, 9)
        data[:, 25:28] = colours
        guarded = np.ones(m, dtype=bool) if fast_vao is None else \
            self._guarded_instances(mvp, vertices, float(camera.near))

        uniforms = {"light_dir": tuple(float(v) for v in light.unit_direction()),
                    "intensity": float(light.intensity), "ambient": float(light.ambient)}
        for prog in (self._fast, self._guarded):
            if prog is not None:
                for name, value in uniforms.items():
                    prog[name].value = value
        self._guarded["near"].value = float(camera.near)

        reducer = self._reducer(f) if f > 1 else None
        ctx = self.ctx
        ctx.enable(self._moderngl.DEPTH_TEST)  # the block-average target has no depth buffer: no effect there
        ctx.disable(self._moderngl.CULL_FACE)
        background = tuple(float(c) for c in settings.background)
        layers = self._layers(size, m)
        for a in range(0, m, layers):
            b = min(a + layers, m)
            k = b - a
            n_layers = _pow2_at_least(k) if k < layers else layers
            framebuffer, colour, _ = self._target(size, n_layers)
            chunk = data[a:b]
            chunk[:, 28] = np.arange(k)
            framebuffer.use()
            framebuffer.clear(*background, 1.0, depth=1.0)
            if settings.cull_back_faces:  # counter-clockwise on screen is front (OpenGL's default, our winding)
                ctx.enable(self._moderngl.CULL_FACE)
            for vao, buffer, which in ((fast_vao, self._instances[0], ~guarded[a:b]),
                                       (guarded_vao, self._instances[1], guarded[a:b])):
                count = int(which.sum())
                if count:
                    buffer.write(np.ascontiguousarray(chunk[which]).tobytes())
                    vao.render(self._moderngl.TRIANGLES, vertices=n_indices, instances=count)
            ctx.disable(self._moderngl.CULL_FACE)  # never for the block-average pass
            if reducer is not None:
                self._reduce(reducer, colour, out_size, n_layers, k, out[a:b])
                continue
            raw = colour.read()
            img = np.frombuffer(raw, dtype=np.uint8).reshape(-1, size, size, 4)[:k, ::-1, :, :3]
            out[a:b] = img if f == 1 else _box(img, f)
        return out


def _box(img: np.ndarray, f: int) -> np.ndarray:
    """The mean of each f x f block of uint8 images (k, S, S, 3), rounded half to even (as np.rint)."""
    rows = img[:, 0::f].astype(np.uint16)
    for i in range(1, f):
        rows += img[:, i::f]
    total = rows[:, :, 0::f].copy()
    for j in range(1, f):
        total += rows[:, :, j::f]
    n = f * f
    q = total // n
    r2 = 2 * (total - q * n)
    q += (r2 > n) | ((r2 == n) & (q % 2 == 1))
    return q.astype(np.uint8)


__all__ = ["GlBackend"]
