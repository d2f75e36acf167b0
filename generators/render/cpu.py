"""A vectorised numpy z-buffer rasteriser: the backend that needs no OpenGL, and the oracle for ``gl``.

For a batch of instances, every triangle's pixel candidates are enumerated in a k x k window over its
bounding box (triangles grouped by size, k a power of two), tested with edge functions at the pixel
centres, and the nearest fragment per pixel wins (one lexsort per batch). Antialiasing renders at
sqrt(samples) times the resolution and averages the sRGB-encoded samples. Conventions: :mod:`.scene`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from . import Backend
from .scene import Camera, Light, RenderSettings, linear_to_srgb, vertex_colours

#: instances rasterised together (bounds the memory of the fragment arrays)
BATCH_INSTANCES = 16


def _edge(ax: np.ndarray, ay: np.ndarray, bx: np.ndarray, by: np.ndarray, px: np.ndarray, py: np.ndarray) -> np.ndarray:
    return (bx - ax) * (py - ay) - (by - ay) * (px - ax)


class CpuBackend(Backend):
    name: ClassVar[str] = "cpu"

    def identity(self) -> str:
        return "cpu (numpy z-buffer rasteriser)"

    def render(self, mesh: Any, model: np.ndarray, view: np.ndarray, colours: np.ndarray, camera: Camera,
               light: Light, settings: RenderSettings) -> np.ndarray:
        out = np.empty((len(model), camera.image_size, camera.image_size, 3), dtype=np.uint8)
        vertices = np.asarray(mesh.vertices, dtype=np.float64)
        faces = np.asarray(mesh.faces, dtype=np.int64)
        normals = np.asarray(mesh.vertex_normals, dtype=np.float64)
        for a in range(0, len(model), BATCH_INSTANCES):
            b = min(a + BATCH_INSTANCES, len(model))
            out[a:b] = self._render_batch(vertices, faces, normals, model[a:b], view[a:b], colours[a:b], camera,
                                          light, settings)
        return out

    def _render_batch(self, vertices: np.ndarray, faces: np.ndarray, normals: np.ndarray, model: np.ndarray,
                      view: np.ndarray, colours: np.ndarray, camera: Camera, light: Light,
                      settings: RenderSettings) -> np.ndarray:
        m = len(model)
        ss = int(round(math.sqrt(settings.samples)))
        size = camera.image_size * ss
        mvp = camera.projection()[None] @ view @ model
        clip = np.einsum("mij,vj->mvi", mvp, np.c_[vertices, np.ones(len(vertices))])
        w = clip[..., 3]
        safe_w = np.where(w > 1e-12, w, 1.0)
        sx = (clip[..., 0] / safe_w + 1.0) * 0.5 * size
        sy = (1.0 - clip[..., 1] / safe_w) * 0.5 * size
        sz = clip[..., 2] / safe_w
        vcol = linear_to_srgb(vertex_colours(normals, model, colours, light))  # (m, V, 3) encoded

        # per-triangle screen data (m*F,)
        tri = faces[None, :, :]
        inst = np.repeat(np.arange(m), len(faces))
        x = sx[np.arange(m)[:, None, None], tri].reshape(-1, 3)
        y = sy[np.arange(m)[:, None, None], tri].reshape(-1, 3)
        z = sz[np.arange(m)[:, None, None], tri].reshape(-1, 3)
        ww = w[np.arange(m)[:, None, None], tri].reshape(-1, 3)
        vidx = np.broadcast_to(tri, (m, *faces.shape)).reshape(-1, 3)
        area = _edge(x[:, 0], y[:, 0], x[:, 1], y[:, 1], x[:, 2], y[:, 2])
        x0 = np.ceil(x.min(axis=1) - 0.5).clip(0, size)
        x1 = np.floor(x.max(axis=1) - 0.5).clip(-1, size - 1)
        y0 = np.ceil(y.min(axis=1) - 0.5).clip(0, size)
        y1 = np.floor(y.max(axis=1) - 0.5).clip(-1, size - 1)
        keep = (np.abs(area) > 1e-12) & np.all(ww > camera.near, axis=1) & (x1 >= x0) & (y1 >= y0)
        if settings.cull_back_faces:  # front faces wind counter-clockwise in NDC: clockwise in pixel rows (y down)
            keep &= area < 0
        extent = np.maximum(x1 - x0, y1 - y0) + 1

        frags_pix, frags_depth, frags_col = [], [], []
        window = 1
        remaining = keep.copy()
        while remaining.any():
            group = np.flatnonzero(remaining & (extent <= window))
            remaining[group] = False
            if len(group):
                pix, depth, col = self._fragments(group, window, x, y, z, ww, area, x0, x1, y0, y1, inst, vidx,
                                                  vcol, size)
                frags_pix.append(pix)
                frags_depth.append(depth)
                frags_col.append(col)
            window *= 2

        encoded_bg = np.asarray(settings.background, dtype=np.float64)
        frame = np.broadcast_to(encoded_bg, (m * size * size, 3)).copy()
        if frags_pix:
            pix = np.concatenate(frags_pix)
            depth = np.concatenate(frags_depth)
            col = np.concatenate(frags_col)
            order = np.lexsort((depth, pix))
            pix_sorted = pix[order]
            first = np.ones(len(order), dtype=bool)
            first[1:] = pix_sorted[1:] != pix_sorted[:-1]
            winners = order[first]
            frame[pix[winners]] = col[winners]
        frame = frame.reshape(m, camera.image_size, ss, camera.image_size, ss, 3).mean(axis=(2, 4))
        return np.rint(frame * 255.0).astype(np.uint8)

    @staticmethod
    def _fragments(group: np.ndarray, k: int, x: np.ndarray, y: np.ndarray, z: np.ndarray, ww: np.ndarray,
                   area: np.ndarray, x0: np.ndarray, x1: np.ndarray, y0: np.ndarray, y1: np.ndarray,
                   inst: np.ndarray, vidx: np.ndarray, vcol: np.ndarray, size: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Covered pixels of triangles ``group`` (all with bounding boxes of at most k x k pixels).

        Edge functions are evaluated on the whole k x k window by broadcasting their linear
        coefficients; only covered pixels are gathered."""
        off = np.arange(k, dtype=np.float64) + 0.5
        cx = x0[group, None, None] + off[None, None, :]  # (n, 1, k) pixel centres
        cy = y0[group, None, None] + off[None, :, None]  # (n, k, 1)
        xs, ys = x[group], y[group]
        sign = np.sign(area[group])[:, None, None]
        covered = (cx <= x1[group, None, None] + 0.5) & (cy <= y1[group, None, None] + 0.5)
        edges = []
        for a, b in ((1, 2), (2, 0), (0, 1)):  # edge opposite vertex 0, 1, 2
            ax, ay, bx, by = xs[:, a, None, None], ys[:, a, None, None], xs[:, b, None, None], ys[:, b, None, None]
            e = (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)
            covered = covered & (e * sign >= 0)
            edges.append(e)
        t, r, c = np.nonzero(covered)
        tri = group[t]
        bary = np.stack([e[t, r, c] for e in edges], axis=1) / area[tri, None]
        depth = np.einsum("ij,ij->i", bary, z[tri])
        in_range = (depth >= -1.0) & (depth <= 1.0)
        tri, t, r, c, bary, depth = tri[in_range], t[in_range], r[in_range], c[in_range], bary[in_range], depth[in_range]
        persp = bary / ww[tri]
        persp /= persp.sum(axis=1, keepdims=True)
        cols = vcol[inst[tri][:, None], vidx[tri]]  # (n, 3, 3)
        colour = np.einsum("ij,ijk->ik", persp, cols)
        px = x0[tri].astype(np.int64) + c
        py = y0[tri].astype(np.int64) + r
        pix = (inst[tri] * size + py) * size + px
        return pix, depth, colour
