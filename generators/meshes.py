"""Triangle meshes for the 3-D datasets: a validated :class:`Mesh` and loaders for the shipped models and files.

Sources of the formats and data:

* Newell teapot: Martin Newell's 1975 bicubic Bezier patches (public domain), shipped as
  ``data/newell_teapot.txt`` (patch count, 16 1-based control-point indices per patch, point count,
  ``x,y,z`` points; z up). Tessellated with the cubic Bernstein basis (Farin, *Curves and Surfaces for
  CAGD*, ch. 4-6).
* PLY: Greg Turk's Polygon File Format (Stanford, 1994), ASCII and binary, read through trimesh
  (:func:`load_ply`).
  ``data/airplane.ply`` is the classic PLY sample model as shipped in the MIT-licensed pyvista wheel
  (``pyvista/examples/airplane.ply``, pyvista 0.49.1).
* OFF: the Object File Format of Geomview (``OFF``, then ``nV nF nE``, vertices, then ``n i j k ...``
  faces), as used by ModelNet (Wu et al., *3D ShapeNets*, CVPR 2015), including ModelNet's run-together
  first line (``OFF490 518 0``).

Conventions: faces are triangles of 0-based vertex indices, counter-clockwise seen from outside, so that
``(v1 - v0) x (v2 - v0)`` points outwards. Polygons are triangulated as fans ``(p0, pi, pi+1)``.
All functions are pure; meshes are immutable (their arrays are read-only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Union

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components
from scipy.spatial import cKDTree

from .errors import FactorbenchError

PathOrBytes = Union[str, "os.PathLike[str]", bytes]


@dataclass(frozen=True, eq=False)
class Mesh:
    """An immutable triangle mesh.

    ``vertices`` is (V, 3) float64, ``faces`` is (F, 3) int64 of 0-based vertex indices, counter-clockwise
    seen from outside (the cross product ``(v1 - v0) x (v2 - v0)`` points outwards). Inputs are copied,
    converted and made read-only; :class:`FactorbenchError` is raised for wrong shapes, non-finite
    coordinates, non-integer or out-of-range face indices, or an empty mesh.
    """

    vertices: np.ndarray
    faces: np.ndarray

    def __post_init__(self) -> None:
        try:
            vertices = np.array(self.vertices, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise FactorbenchError(f"Mesh vertices must be an array of numbers of shape (V, 3): {exc}") from None
        if vertices.ndim != 2 or vertices.shape[1] != 3 or vertices.shape[0] == 0:
            raise FactorbenchError(f"Mesh vertices must have shape (V, 3) with V >= 1, got {vertices.shape}.")
        if not np.isfinite(vertices).all():
            bad = int(np.flatnonzero(~np.isfinite(vertices).all(axis=1))[0])
            raise FactorbenchError(f"Mesh vertices must be finite; vertex {bad} is {vertices[bad].tolist()}.")
        faces_in = np.asarray(self.faces)
        if faces_in.size and not np.issubdtype(faces_in.dtype, np.integer):
            raise FactorbenchError(f"Mesh faces must be integer vertex indices, got dtype {faces_in.dtype}.")
        faces = faces_in.astype(np.int64, copy=True)
        if faces.ndim != 2 or faces.shape[1] != 3 or faces.shape[0] == 0:
            raise FactorbenchError(f"Mesh faces must have shape (F, 3) with F >= 1 (triangles), got {faces.shape}.")
        out = (faces < 0) | (faces >= len(vertices))
        if out.any():
            bad = int(np.flatnonzero(out.any(axis=1))[0])
            raise FactorbenchError(
                f"Mesh face {bad} has vertex indices {faces[bad].tolist()} outside 0..{len(vertices) - 1}.")
        vertices.flags.writeable = False
        faces.flags.writeable = False
        object.__setattr__(self, "vertices", vertices)
        object.__setattr__(self, "faces", faces)

    def __repr__(self) -> str:
        return f"Mesh(vertices={len(self.vertices)}, faces={len(self.faces)})"

    @property
    def _cross(self) -> np.ndarray:
        """(F, 3) cross products (v1 - v0) x (v2 - v0): outward, with length twice the face area."""
        v0, v1, v2 = (self.vertices[self.faces[:, k]] for k in range(3))
        return np.cross(v1 - v0, v2 - v0)

    @property
    def face_normals(self) -> np.ndarray:
        """(F, 3) unit outward face normals; zero vectors for degenerate (zero-area) faces."""
        return _normalise(self._cross)

    @property
    def vertex_normals(self) -> np.ndarray:
        """(V, 3) unit vertex normals: area-weighted mean of adjacent face normals (zero if none)."""
        cross = self._cross  # area-weighted normals (2 * area * unit normal)
        summed = np.zeros_like(self.vertices)
        for k in range(3):
            np.add.at(summed, self.faces[:, k], cross)
        return _normalise(summed)

    @property
    def face_areas(self) -> np.ndarray:
        """(F,) triangle areas."""
        return 0.5 * np.linalg.norm(self._cross, axis=1)

    @property
    def area(self) -> float:
        """Total surface area."""
        return float(self.face_areas.sum())

    @property
    def volume(self) -> float:
        """Signed enclosed volume by the divergence theorem, sum of (v0 . (v1 x v2)) / 6.

        Positive when faces are oriented outwards; exact for closed meshes, an approximation otherwise.
        """
        v0, v1, v2 = (self.vertices[self.faces[:, k]] for k in range(3))
        return float(np.einsum("ij,ij->", v0, np.cross(v1, v2)) / 6.0)

    @property
    def bounds(self) -> np.ndarray:
        """(2, 3) array: per-axis minimum (row 0) and maximum (row 1) of the vertices."""
        return np.stack([self.vertices.min(axis=0), self.vertices.max(axis=0)])

    def centred_and_scaled(self, radius: float = 1.0) -> Mesh:
        """Translate the bounding-box centre (not the centroid) to the origin, then scale uniformly so the
        farthest vertex is at distance ``radius`` from the origin. Orientation is kept."""
        if not (np.isfinite(radius) and radius > 0):
            raise FactorbenchError(f"radius must be a positive finite number, got {radius!r}.")
        lo, hi = self.bounds
        shifted = self.vertices - (lo + hi) / 2.0
        farthest = float(np.linalg.norm(shifted, axis=1).max())
        if farthest == 0.0:
            raise FactorbenchError("Cannot scale a mesh whose vertices all coincide.")
        return Mesh(shifted * (radius / farthest), self.faces)

    def consistently_oriented(self) -> Mesh:
        """The same triangles, each wound so that neighbours agree and every connected part faces outwards.

        Files such as ModelNet40's wind their faces inconsistently; averaged vertex normals then point
        every way and one-sided shading leaves dark speckles. Here two faces are neighbours when they
        share an edge that no other face has (vertices at the same position count as one, since such
        files repeat vertices). A breadth-first tree over each connected part, from its lowest-numbered
        face, flips every face to agree with its parent (a neighbour traverses the shared edge the other
        way); then a part is turned over as a whole if the sum over its faces of
        ``((v1 - v0) x (v2 - v0)) . (face centre - bounding-box centre)`` is negative, i.e. if its normals
        point inwards (for a closed part: a negative enclosed volume). Faces keep their vertices and their
        order in the mesh; a flipped face ``(a, b, c)`` becomes ``(c, b, a)``. The result depends only on
        the geometry and the face order, not on how the faces were wound: any rewinding of the same faces
        gives the same mesh. Non-manifold edges (three or more faces, as where a face is stored twice, once
        in each winding) join nothing: such faces are turned outwards each on its own, and a part that
        cannot be oriented consistently is only as consistent as its tree.
        """
        faces = self.faces
        n_faces = len(faces)
        _, vertex_id = np.unique(self.vertices, axis=0, return_inverse=True)
        ids = vertex_id.ravel()[faces]
        start, end = ids.ravel(), ids[:, [1, 2, 0]].ravel()
        face_of = np.repeat(np.arange(n_faces), 3)
        key = np.minimum(start, end) * (int(ids.max()) + 1) + np.maximum(start, end)
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        first = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
        count = np.diff(np.r_[first, len(sorted_key)])
        pair = first[count == 2]
        h1, h2 = order[pair], order[pair + 1]
        f1, f2 = face_of[h1], face_of[h2]
        # the same direction along the shared edge: the two faces disagree (one must be flipped)
        disagree = (start[h1] < end[h1]) == (start[h2] < end[h2])
        keep = (f1 != f2) & (start[h1] != end[h1])
        f1, f2, disagree = f1[keep], f2[keep], disagree[keep]
        # a virtual node n_faces joined to the first face of every part: one search covers every part
        n_parts, part = connected_components(
            coo_matrix((np.ones(len(f1)), (f1, f2)), shape=(n_faces, n_faces)), directed=False)
        roots = np.unique(part, return_index=True)[1]
        rows = np.concatenate([f1, f2, np.full(n_parts, n_faces)])
        cols = np.concatenate([f2, f1, roots])
        weight = np.concatenate([disagree, disagree, np.zeros(n_parts, dtype=bool)]).astype(np.float64) + 1.0
        graph = coo_matrix((weight, (rows, cols)), shape=(n_faces + 1, n_faces + 1)).tocsr()
        visit, parent = breadth_first_order(graph, n_faces, directed=True, return_predecessors=True)
        nodes = visit[1:]
        ups = parent[nodes]
        turn = (np.asarray(graph[ups, nodes]).ravel() == 2.0).tolist()
        flips = [False] * (n_faces + 1)
        for node, up, t in zip(nodes.tolist(), ups.tolist(), turn):  # parents come before their children
            flips[node] = flips[up] ^ t
        flip = np.array(flips[:n_faces], dtype=bool)
        oriented = np.where(flip[:, None], faces[:, ::-1], faces)
        v0, v1, v2 = (self.vertices[oriented[:, k]] for k in range(3))
        lo, hi = self.bounds
        outward = np.einsum("ij,ij->i", np.cross(v1 - v0, v2 - v0), (v0 + v1 + v2) / 3.0 - (lo + hi) / 2.0)
        inward_parts = np.bincount(part, weights=outward, minlength=n_parts) < 0
        oriented = np.where(inward_parts[part][:, None], oriented[:, ::-1], oriented)
        return Mesh(self.vertices, oriented)

    def two_sided(self) -> Mesh:
        """Every face twice: as it is, and reversed on a copy of the vertices, whose vertex normals are
        then the negated ones. Drawn with back faces culled (``RenderSettings(cull_back_faces=True)``),
        each surface shows the copy that faces the camera, lit by a normal turned towards the camera:
        two-sided shading, as Blender's (Tonnaer et al.'s renderer) and OpenGL's two-sided lighting. A
        closed, consistently wound mesh looks the same as drawn one-sided; an open sheet seen from its
        back is lit instead of left to the ambient term."""
        n = len(self.vertices)
        return Mesh(np.concatenate([self.vertices, self.vertices]),
                    np.concatenate([self.faces, self.faces[:, ::-1] + n]))

    def rotated(self, matrix: np.ndarray) -> Mesh:
        """Rotate the vertices about the origin by a 3x3 rotation matrix (``v' = matrix @ v``).

        The matrix must be orthonormal with determinant +1 (a reflection would turn faces inside out).
        """
        rot = np.asarray(matrix, dtype=np.float64)
        if rot.shape != (3, 3) or not np.isfinite(rot).all():
            raise FactorbenchError(f"rotation matrix must be a finite 3x3 array, got shape {rot.shape}.")
        if not np.allclose(rot @ rot.T, np.eye(3), atol=1e-6) or np.linalg.det(rot) <= 0:
            raise FactorbenchError("rotation matrix must be orthonormal with determinant +1 (a proper rotation).")
        return Mesh(self.vertices @ rot.T, self.faces)


def _normalise(vectors: np.ndarray) -> np.ndarray:
    """Unit vectors along the rows; rows of (near) zero length become zero instead of NaN."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    out = np.zeros_like(vectors)
    np.divide(vectors, norms, out=out, where=norms > 1e-300)
    return out


def _fan(polygons: list[list[int]]) -> np.ndarray:
    """Fan triangulation (p0, pi, pi+1) of polygons with >= 3 vertices, as an (F, 3) int64 array."""
    if polygons and all(len(p) == 3 for p in polygons):
        return np.asarray(polygons, dtype=np.int64)
    tris = [(p[0], p[i], p[i + 1]) for p in polygons for i in range(1, len(p) - 1)]
    return np.asarray(tris, dtype=np.int64).reshape(-1, 3)


def _data_text(name: str) -> str:
    """Text of a file shipped in ``factorbench/generators/data``."""
    return (resources.files("factorbench.generators") / "data" / name).read_text(encoding="utf-8")


def _read_bytes(path_or_bytes: PathOrBytes, what: str) -> tuple[bytes, str]:
    """(bytes, label for messages) of a path or of raw bytes."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return bytes(path_or_bytes), f"{what} data"
    label = f"{what} file {os.fspath(path_or_bytes)!s}"
    try:
        return Path(path_or_bytes).read_bytes(), label
    except OSError as exc:
        raise FactorbenchError(f"Cannot read {label}: {exc}") from None


def _read_text(path_or_bytes: PathOrBytes, what: str) -> tuple[str, str]:
    """(text, label for messages) of a path or of raw bytes."""
    raw, label = _read_bytes(path_or_bytes, what)
    try:
        return raw.decode("utf-8"), label
    except UnicodeDecodeError:
        raise FactorbenchError(f"{label} is not a text (ASCII) file; binary files are not supported.") from None


# --------------------------------------------------------------------------------------------- teapot


def _bernstein3(t: np.ndarray) -> np.ndarray:
    """(len(t), 4) cubic Bernstein basis B_i(t) = C(3, i) t^i (1 - t)^(3 - i)."""
    s = 1.0 - t
    return np.stack([s**3, 3 * t * s**2, 3 * t**2 * s, t**3], axis=1)


def _parse_patches(text: str) -> tuple[np.ndarray, np.ndarray]:
    """(P, 16) 0-based control-point indices and (N, 3) points from the Newell patch file format."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    try:
        n_patches = int(lines[0])
        indices = np.array([[int(t) for t in line.split(",")] for line in lines[1:1 + n_patches]], dtype=np.int64)
        n_points = int(lines[1 + n_patches])
        points = np.array([[float(t) for t in line.split(",")]
                           for line in lines[2 + n_patches:2 + n_patches + n_points]], dtype=np.float64)
    except (IndexError, ValueError) as exc:
        raise FactorbenchError(f"Malformed Bezier patch file: {exc}") from None
    if indices.shape != (n_patches, 16) or points.shape != (n_points, 3):
        raise FactorbenchError(f"Malformed Bezier patch file: expected {n_patches} patches of 16 indices and "
                               f"{n_points} points of 3 coordinates, got {indices.shape} and {points.shape}.")
    if indices.min() < 1 or indices.max() > n_points:
        raise FactorbenchError(f"Bezier patch file has control-point indices outside 1..{n_points}.")
    return indices - 1, points


def _weld(vertices: np.ndarray, faces: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Merge vertices closer than ``tol`` (transitively); returns the first-seen representatives and the
    re-indexed faces, keeping vertex order of first occurrence."""
    pairs = cKDTree(vertices).query_pairs(tol, output_type="ndarray")
    n = len(vertices)
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(first)  # renumber clusters by first occurrence
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return vertices[first[order]], rank[inverse.ravel()][faces]


def newell_teapot(subdivisions: int = 8) -> Mesh:
    """The Utah (Newell, 1975) teapot, tessellated from its 32 bicubic Bezier patches.

    Each patch is evaluated with the cubic Bernstein basis on an (n+1) x (n+1) grid of (u, v) in [0, 1]^2
    (n = ``subdivisions``), each grid cell split into two triangles, so at most 32 * n * n * 2 triangles.
    Coincident vertices (patch borders, poles) are welded with a tolerance of 1e-6 times the bounding-box
    diagonal, and degenerate (zero-area) triangles at the poles of the lid knob and the bottom are dropped
    (n = 8: 4,032 triangles and 2,081 vertices instead of 32 * 81 = 2,592 grid points).

    Orientation: the surface of one patch is oriented consistently by its parametrisation, so faces are
    oriented patch by patch. Each patch is flipped if the area-weighted sum of
    ``normal . (face centre - bounding-box centre)`` is negative, i.e. if its normals point towards the
    centre on average. This test does not depend on the ordering conventions of any one copy of the data
    (some copies have reversed patches). For the shipped data every patch comes out with the same flip, and
    the welded mesh is consistently wound across patch borders (checked in the tests).

    Coordinates as in the file: z up, base at z = 0, x in about [-3, 3.43] (handle at -x, spout at +x),
    y in [-2, 2], z in [0, 3.15]. The mesh is not watertight: it has three connected parts (the body with the
    handle, which touches it only at single vertices; the spout; the lid) and open borders at the rim and the
    lid's edge (which do not meet), at the spout's tip and where the handle and spout end against the body.
    """
    if isinstance(subdivisions, bool) or not isinstance(subdivisions, (int, np.integer)) or subdivisions < 1:
        raise FactorbenchError(f"subdivisions must be a positive integer, got {subdivisions!r}.")
    n = int(subdivisions)
    indices, points = _parse_patches(_data_text("newell_teapot.txt"))
    basis = _bernstein3(np.linspace(0.0, 1.0, n + 1))  # (n+1, 4)
    grid = np.arange((n + 1) ** 2).reshape(n + 1, n + 1)
    a, b, c, d = grid[:-1, :-1].ravel(), grid[1:, :-1].ravel(), grid[1:, 1:].ravel(), grid[:-1, 1:].ravel()
    cell_faces = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])  # (2 n^2, 3)
    lo, hi = points.min(axis=0), points.max(axis=0)
    centre = (lo + hi) / 2.0  # of the control polygon; the surface lies in its convex hull

    all_vertices, all_faces = [], []
    for p, patch in enumerate(indices):
        control = points[patch].reshape(4, 4, 3)
        surface = np.einsum("ui,vj,ijk->uvk", basis, basis, control).reshape(-1, 3)
        tri = surface[cell_faces]
        cross = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        outward = float(np.einsum("ij,ij->", cross, tri.mean(axis=1) - centre))
        faces = cell_faces[:, ::-1] if outward < 0 else cell_faces
        all_vertices.append(surface)
        all_faces.append(faces + p * len(surface))
    vertices = np.concatenate(all_vertices)
    faces = np.concatenate(all_faces)

    tol = 1e-6 * float(np.linalg.norm(hi - lo))
    vertices, faces = _weld(vertices, faces, tol)
    distinct = (faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])
    faces = faces[distinct]
    v0, v1, v2 = (vertices[faces[:, k]] for k in range(3))
    area2 = np.linalg.norm(np.cross(v1 - v0, v2 - v0), axis=1)
    faces = faces[area2 > tol * tol]
    used = np.unique(faces)
    remap = np.full(len(vertices), -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    return Mesh(vertices[used], remap[faces])


# ------------------------------------------------------------------------------------------------ PLY


def load_ply(path: PathOrBytes) -> Mesh:
    """Read a PLY file (Turk 1994), ASCII or binary, from a path or its bytes, through trimesh: a ``vertex``
    element with ``x y z`` and a ``face`` element with a list property ``vertex_indices`` (or
    ``vertex_index``); polygons become triangle fans, other elements and properties are skipped.

    What factorbench adds around trimesh's reader: the coordinates of an ASCII file are read at full
    double precision whatever the header declares (its ``float32`` would round the decimal text; the shipped
    airplane's pinned images depend on the exact values), and a file is checked against its header, which
    trimesh does not do for ASCII files (a truncated file or a face index out of range is an error, not a
    smaller mesh)."""
    import io
    import re

    import trimesh

    raw, label = _read_bytes(path, "PLY")
    head, sep, body = raw.partition(b"end_header")
    if not raw.startswith(b"ply"):
        raise FactorbenchError(f"{label} does not start with 'ply'.")
    if not sep:
        raise FactorbenchError(f"{label} has no 'end_header' line.")
    header = head.decode("ascii", errors="replace").splitlines()
    fmt = next((line.split()[1] for line in header if line.split()[:1] == ["format"] and len(line.split()) > 1), "")
    elements: list[tuple[str, int]] = []
    for line in header:
        tokens = line.split()
        if tokens[:1] == ["element"]:
            try:
                elements.append((tokens[1], int(tokens[2])))
            except (IndexError, ValueError):
                raise FactorbenchError(f"{label}: bad element line {line.strip()!r}.") from None
    counts = dict(elements)
    if "vertex" not in counts or "face" not in counts:
        raise FactorbenchError(f"{label} needs 'vertex' and 'face' elements, found {[e[0] for e in elements]}.")
    if fmt == "ascii":
        head = re.sub(rb"(property\s+)(float32|float)(\s)", rb"\1float64\3", head)
        rows = [line for line in body.splitlines()[1:] if line.strip()]
        if len(rows) < sum(counts.values()):
            raise FactorbenchError(f"{label} is truncated: its header promises {counts['vertex']} vertices and "
                                   f"{counts['face']} face{'s' if counts['face'] != 1 else ''}"
                                   + (" (and other elements)" if len(counts) > 2 else "")
                                   + f", it has {len(rows)} lines of data.")
    try:
        mesh = trimesh.load(io.BytesIO(head + sep + body), file_type="ply", process=False, force="mesh")
    except Exception as exc:  # trimesh raises many kinds (ValueError, IndexError, KeyError) on bad files
        raise FactorbenchError(f"{label} cannot be read ({type(exc).__name__}: {exc}).") from None
    vertices = np.asarray(getattr(mesh, "vertices", np.zeros((0, 3))), dtype=np.float64).reshape(-1, 3)
    faces = np.asarray(getattr(mesh, "faces", np.zeros((0, 3))), dtype=np.int64).reshape(-1, 3)
    if len(vertices) != counts["vertex"]:
        raise FactorbenchError(f"{label}: its header promises {counts['vertex']} vertices, {len(vertices)} were read.")
    return _checked_mesh(vertices, faces.tolist(), label)


def _checked_mesh(vertices: np.ndarray, polygons: list[list[int]], label: str) -> Mesh:
    """Mesh from vertices and polygons, with messages naming the file and the offending face."""
    if not polygons:
        raise FactorbenchError(f"{label} has no faces.")
    sizes = np.fromiter(map(len, polygons), dtype=np.int64, count=len(polygons))
    if sizes.min() < 3:
        k = int(np.argmax(sizes < 3))
        raise FactorbenchError(f"{label}: face {k} has {sizes[k]} vertices; faces need at least 3.")
    faces = _fan(polygons)
    if faces.min() < 0 or faces.max() >= len(vertices):
        for k, poly in enumerate(polygons):  # find the first offending polygon for the message
            bad = [i for i in poly if i < 0 or i >= len(vertices)]
            if bad:
                raise FactorbenchError(
                    f"{label}: face {k} has vertex index {bad[0]} out of range 0..{len(vertices) - 1}.")
    try:
        return Mesh(vertices, faces)
    except FactorbenchError as exc:
        raise FactorbenchError(f"{label}: {exc}") from None


def airplane() -> Mesh:
    """The classic PLY airplane (shipped ``data/airplane.ply``; from the pyvista 0.49.1 examples), as stored:
    1,335 vertices, 2,452 triangles, coordinates of order 1,000 (use :meth:`Mesh.centred_and_scaled`).

    Axes (from the bounding box): **z is up** (height 300: the tail fin's top is the highest point),
    the fuselage runs along **y** (extent 1,288; nose at -y, tail at +y), and the wings span **x**
    (extent 1,516, wing tips at x = 139 and 1,655).
    """
    return load_ply((resources.files("factorbench.generators") / "data" / "airplane.ply").read_bytes())


# ------------------------------------------------------------------------------------------------ OFF


def load_off(path_or_bytes: PathOrBytes) -> Mesh:
    """Read an ASCII OFF file (Geomview's Object File Format, as used by ModelNet40) from a path or bytes.

    Layout: ``OFF``, then ``nV nF nE``, then nV lines ``x y z``, then nF lines ``n i0 ... i(n-1)`` (0-based;
    extra tokens such as colours are ignored). Handles ModelNet's run-together header (``OFF490 518 0``)
    and counts on the ``OFF`` line, ``#`` comments and blank lines; polygons become triangle fans.
    Truncated files, bad counts and out-of-range indices raise :class:`FactorbenchError`.
    """
    text, label = _read_text(path_or_bytes, "OFF")
    rows = []  # (line number, tokens) of non-blank, comment-stripped lines
    for number, line in enumerate(text.splitlines(), start=1):
        tokens = (line[:line.index("#")] if "#" in line else line).split()
        if tokens:
            rows.append((number, tokens))
    if not rows or not rows[0][1][0].upper().startswith("OFF"):
        raise FactorbenchError(f"{label} does not start with 'OFF'.")
    first = rows[0][1]
    rest_of_header = [first[0][3:]] + first[1:] if len(first[0]) > 3 else first[1:]
    if "BINARY" in (t.upper() for t in rest_of_header):
        raise FactorbenchError(f"{label}: binary OFF is not supported.")
    cursor = 1
    if not rest_of_header:  # counts on the next line
        if len(rows) < 2:
            raise FactorbenchError(f"{label} is truncated: no vertex/face counts after 'OFF'.")
        rest_of_header, cursor = rows[1][1], 2
    counts_line = rows[cursor - 1][0]
    try:
        counts = [int(t) for t in rest_of_header[:3]]
    except ValueError:
        raise FactorbenchError(f"{label}, line {counts_line}: bad counts {' '.join(rest_of_header)!r}; "
                               "expected 'nV nF nE' integers.") from None
    if len(counts) < 2 or any(c < 0 for c in counts):
        raise FactorbenchError(f"{label}, line {counts_line}: bad counts {' '.join(rest_of_header)!r}; "
                               "expected non-negative 'nV nF [nE]'.")
    n_vertices, n_faces = counts[0], counts[1]
    vertex_rows = rows[cursor:cursor + n_vertices]
    face_rows = rows[cursor + n_vertices:cursor + n_vertices + n_faces]
    if len(vertex_rows) < n_vertices or len(face_rows) < n_faces:
        raise FactorbenchError(f"{label} is truncated: header promises {n_vertices} vertices and {n_faces} faces, "
                               f"found {len(vertex_rows)} vertex and {len(face_rows)} face lines.")
    try:  # fast path: three numbers on every vertex line
        vertices = np.array([tokens[:3] for _, tokens in vertex_rows], dtype=np.float64).reshape(n_vertices, 3)
        vertex_rows = []
    except ValueError:
        vertices = np.empty((n_vertices, 3), dtype=np.float64)
    for k, (number, tokens) in enumerate(vertex_rows):
        if len(tokens) < 3:
            raise FactorbenchError(f"{label}, line {number}: vertex needs 3 coordinates, got {' '.join(tokens)!r}.")
        try:
            vertices[k] = [float(t) for t in tokens[:3]]
        except ValueError:
            raise FactorbenchError(f"{label}, line {number}: bad vertex {' '.join(tokens)!r}.") from None
    polygons: list[list[int]] = []
    for number, tokens in face_rows:
        try:
            size = int(tokens[0])
            poly = [int(t) for t in tokens[1:1 + size]]
        except ValueError:
            raise FactorbenchError(f"{label}, line {number}: bad face {' '.join(tokens)!r}.") from None
        if len(poly) != size:
            raise FactorbenchError(f"{label}, line {number}: face promises {size} indices, has {len(poly)}.")
        polygons.append(poly)
    return _checked_mesh(vertices, polygons, label)
