"""Tests of factorbench.generators.meshes: the Mesh type, the teapot tessellation and the PLY/OFF loaders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import trimesh
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial.transform import Rotation

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.meshes import Mesh, airplane, load_off, load_ply, newell_teapot

# A unit cube, 8 vertices and 12 triangles, counter-clockwise seen from outside.
CUBE_V = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0],
                   [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]], dtype=float)
CUBE_F = np.array([[0, 2, 1], [0, 3, 2], [4, 5, 6], [4, 6, 7], [0, 1, 5], [0, 5, 4],
                   [1, 2, 6], [1, 6, 5], [2, 3, 7], [2, 7, 6], [3, 0, 4], [3, 4, 7]])


@pytest.fixture(scope="module")
def teapot() -> Mesh:
    return newell_teapot()


def _edge_lengths(mesh: Mesh) -> np.ndarray:
    v = mesh.vertices[mesh.faces]
    return np.linalg.norm(v - np.roll(v, 1, axis=1), axis=2)


# ----------------------------------------------------------------------------------------------- Mesh


def test_cube_normals_area_volume():
    cube = Mesh(CUBE_V, CUBE_F)
    assert cube.vertices.dtype == np.float64 and cube.faces.dtype == np.int64
    assert cube.area == pytest.approx(6.0)
    assert cube.volume == pytest.approx(1.0)
    # Outward: each face normal points away from the cube's centre.
    centres = cube.vertices[cube.faces].mean(axis=1)
    assert np.all(np.einsum("ij,ij->i", cube.face_normals, centres - 0.5) > 0)
    np.testing.assert_allclose(np.linalg.norm(cube.face_normals, axis=1), 1.0)
    # Vertex normals of a corner point along the diagonal away from the centre.
    np.testing.assert_allclose(np.linalg.norm(cube.vertex_normals, axis=1), 1.0)
    assert np.all(np.einsum("ij,ij->i", cube.vertex_normals, cube.vertices - 0.5) > 0.5)
    np.testing.assert_array_equal(cube.bounds, [[0, 0, 0], [1, 1, 1]])
    with pytest.raises(ValueError):
        cube.vertices[0, 0] = 5.0  # read-only


def test_volume_matches_trimesh_on_closed_mesh():
    sphere = trimesh.creation.icosphere(subdivisions=3, radius=2.0)
    mesh = Mesh(sphere.vertices + [1.0, -2.0, 3.0], sphere.faces)
    assert mesh.volume == pytest.approx(sphere.volume, rel=1e-9)
    assert mesh.area == pytest.approx(sphere.area, rel=1e-9)


@pytest.mark.parametrize(("vertices", "faces", "message"), [
    (np.zeros((4, 2)), [[0, 1, 2]], "shape"),
    (np.zeros((0, 3)), [[0, 1, 2]], "shape"),
    ([[0, 0, 0], [1, 0, 0], [0, np.nan, 0]], [[0, 1, 2]], "finite"),
    ([[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 3]], "outside 0..2"),
    ([[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, -1, 2]], "outside 0..2"),
    ([[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 2, 0]], "shape"),
    ([[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0.0, 1.0, 2.0]], "integer"),
])
def test_mesh_validation(vertices, faces, message):
    with pytest.raises(FactorbenchError, match=message):
        Mesh(np.asarray(vertices, dtype=float), np.asarray(faces))


def test_centred_and_scaled_keeps_shape(teapot):
    scaled = teapot.centred_and_scaled(radius=2.0)
    lo, hi = scaled.bounds
    np.testing.assert_allclose((lo + hi) / 2, 0.0, atol=1e-12)  # bounding-box centre at the origin
    assert np.linalg.norm(scaled.vertices, axis=1).max() == pytest.approx(2.0)
    t_lo, t_hi = teapot.bounds
    factor = 2.0 / np.linalg.norm(teapot.vertices - (t_lo + t_hi) / 2, axis=1).max()
    assert scaled.area == pytest.approx(teapot.area * factor**2, rel=1e-9)
    # The teapot is open, so its signed volume depends on the origin; use a closed mesh for the volume.
    cube = Mesh(CUBE_V * 3 + 7, CUBE_F).centred_and_scaled()
    assert cube.volume == pytest.approx((2 / np.sqrt(3)) ** 3)
    assert cube.area == pytest.approx(6 * (2 / np.sqrt(3)) ** 2)
    np.testing.assert_array_equal(scaled.faces, teapot.faces)
    with pytest.raises(FactorbenchError, match="radius"):
        teapot.centred_and_scaled(radius=0.0)


def test_rotated_preserves_edges_and_orientation(teapot):
    rot = Rotation.from_euler("xyz", [30, -50, 110], degrees=True).as_matrix()
    turned = teapot.rotated(rot)
    np.testing.assert_allclose(_edge_lengths(turned), _edge_lengths(teapot), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(turned.face_normals, teapot.face_normals @ rot.T, atol=1e-9)
    assert turned.volume == pytest.approx(teapot.volume, rel=1e-9)  # about the origin, which is fixed
    with pytest.raises(FactorbenchError, match="rotation"):
        teapot.rotated(np.diag([1.0, 1.0, -1.0]))  # a reflection
    with pytest.raises(FactorbenchError, match="rotation"):
        teapot.rotated(2 * np.eye(3))


# --------------------------------------------------------------------------------------------- teapot


def test_teapot_counts_and_bounds(teapot):
    assert 0 < len(teapot.faces) <= 32 * 8 * 8 * 2
    # 4 lid-knob and 4 bottom patches have a pole (one collapsed row): 8 degenerate triangles each.
    assert len(teapot.faces) == 4096 - 8 * 8
    assert len(teapot.vertices) < 0.85 * 32 * 81  # welded
    assert len(np.unique(teapot.faces)) == len(teapot.vertices)  # no unused vertices
    assert np.all(teapot.face_areas > 1e-8)  # no degenerate triangles
    lo, hi = teapot.bounds
    np.testing.assert_allclose(lo, [-3.0, -2.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(hi[1:], [2.0, 3.15], atol=1e-9)
    assert hi[0] == pytest.approx(3.43, abs=0.01)
    # Welding is exact: no two vertices closer than the tolerance.
    distances = np.linalg.norm(teapot.vertices[teapot.faces] - np.roll(teapot.vertices[teapot.faces], 1, 1), axis=2)
    assert distances.min() > 1e-6
    assert len(newell_teapot(2).faces) == 32 * 2 * 2 * 2 - 8 * 2


def test_teapot_faces_point_outwards(teapot):
    """Orientation, checked three ways: (1) the welded mesh is consistently wound (every directed edge
    occurs once, so neighbouring patches agree); (2) each connected part (body+handle, spout, lid) has a
    positive signed volume about its own bounding-box centre, so no part is inside out; (3) the whole
    teapot's signed volume is positive and within 10 % of trimesh's (the two formulas differ only on open
    meshes), and normals at the bottom point down and at the knob up."""
    f = teapot.faces
    edges = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
    assert len(np.unique(edges, axis=0)) == len(edges)
    n = len(teapot.vertices)
    graph = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    n_parts, labels = connected_components(graph, directed=False)
    assert n_parts == 3
    for part in range(n_parts):
        faces = f[labels[f[:, 0]] == part]
        lo, hi = teapot.vertices[faces].min(axis=(0, 1)), teapot.vertices[faces].max(axis=(0, 1))
        assert Mesh(teapot.vertices - (lo + hi) / 2, faces).volume > 0
    assert teapot.volume > 20
    assert teapot.volume == pytest.approx(trimesh.Trimesh(teapot.vertices, f, process=False).volume, rel=0.1)
    centres = teapot.vertices[f].mean(axis=1)
    assert np.all(teapot.face_normals[centres[:, 2] < 0.01, 2] < -0.9)
    assert np.all(teapot.face_normals[centres[:, 2] > 3.14, 2] > 0.9)
    lo, hi = teapot.bounds
    away = np.einsum("ij,ij->i", teapot.face_normals, centres - (lo + hi) / 2) > 0
    assert teapot.face_areas[away].sum() > 0.85 * teapot.area
    np.testing.assert_allclose(np.linalg.norm(teapot.vertex_normals, axis=1), 1.0)


def test_teapot_rejects_bad_subdivisions():
    for bad in (0, -1, 2.5, True):
        with pytest.raises(FactorbenchError, match="subdivisions"):
            newell_teapot(bad)


# ------------------------------------------------------------------------------------------------ PLY


def test_airplane():
    plane = airplane()
    assert len(plane.vertices) == 1335
    assert len(plane.faces) == 2452
    extents = np.ptp(plane.vertices, axis=0)
    assert np.argmin(extents) == 2  # z is up: the smallest extent is the height
    assert extents[0] > extents[1]  # wings span x, fuselage along y
    unit = plane.centred_and_scaled()
    assert np.linalg.norm(unit.vertices, axis=1).max() == pytest.approx(1.0)


def _rewound(mesh: Mesh, fraction: float, seed: int) -> Mesh:
    """The same triangles with a random ``fraction`` of them wound the other way."""
    flip = np.random.default_rng(seed).random(len(mesh.faces)) < fraction
    return Mesh(mesh.vertices, np.where(flip[:, None], mesh.faces[:, ::-1], mesh.faces))


@pytest.mark.parametrize("fraction", [0.0, 0.3, 0.5, 1.0])
def test_consistent_orientation_undoes_any_rewinding(teapot, fraction):
    sphere = trimesh.creation.icosphere(3)
    for mesh in (Mesh(sphere.vertices, sphere.faces), teapot, airplane()):
        # these meshes are wound consistently outwards already: orienting them changes nothing ...
        np.testing.assert_array_equal(mesh.consistently_oriented().faces, mesh.faces)
        # ... and every rewinding of their faces comes back to exactly them
        np.testing.assert_array_equal(_rewound(mesh, fraction, seed=3).consistently_oriented().faces, mesh.faces)


def test_consistent_orientation_of_repeated_vertices_and_separate_parts():
    # a polygon soup as in ModelNet40 files: every triangle has its own copies of its vertices, two
    # separate closed boxes, one turned inside out, random faces rewound; duplicate positions count as one
    boxes = [trimesh.creation.box(extents=(1.0, 0.4, 0.3)), trimesh.creation.box(extents=(0.2, 0.2, 0.9))]
    boxes[1].apply_translation((2.0, 0.0, 0.0))
    faces = np.concatenate([boxes[0].faces, boxes[1].faces[:, ::-1] + len(boxes[0].vertices)])
    vertices = np.concatenate([boxes[0].vertices, boxes[1].vertices])
    soup = Mesh(vertices[faces.ravel()], np.arange(faces.size).reshape(-1, 3))
    fixed = _rewound(soup, 0.5, seed=1).consistently_oriented()
    volumes = [Mesh(fixed.vertices, fixed.faces[:12]).volume, Mesh(fixed.vertices, fixed.faces[12:]).volume]
    np.testing.assert_allclose(volumes, [1.0 * 0.4 * 0.3, 0.2 * 0.2 * 0.9], rtol=1e-12)
    assert fixed.vertices is soup.vertices or np.array_equal(fixed.vertices, soup.vertices)
    # each face keeps its vertices (possibly in reverse order)
    np.testing.assert_array_equal(np.sort(fixed.faces, axis=1), np.sort(soup.faces, axis=1))


def test_consistent_orientation_of_faces_stored_twice_with_both_windings():
    # "double-sided" faces, as some ModelNet40 files store them: every face twice, wound both ways; the
    # summed vertex normals cancel to zero. Each copy is turned to face outwards, so the normals come back
    box = trimesh.creation.box(extents=(1.0, 0.4, 0.3))
    clean = Mesh(box.vertices, box.faces)
    doubled = Mesh(box.vertices, np.concatenate([box.faces, box.faces[:, ::-1]]))
    np.testing.assert_allclose(np.linalg.norm(doubled.vertex_normals, axis=1), 0.0, atol=1e-12)
    fixed = doubled.consistently_oriented()
    np.testing.assert_array_equal(fixed.faces, np.concatenate([box.faces, box.faces]))
    np.testing.assert_allclose(fixed.vertex_normals, clean.vertex_normals, atol=1e-12)


def test_load_ply_round_trip(tmp_path: Path):
    cube = Mesh(CUBE_V, CUBE_F)
    lines = ["ply", "format ascii 1.0", "comment written by the test", "element vertex 8",
             "property float x", "property float y", "property float z", "property uchar red",
             "element face 7", "property list uchar int vertex_indices", "end_header"]
    lines += [f"{x} {y} {z} 255" for x, y, z in CUBE_V]
    # The bottom as one quad (its fan gives the triangles 0 3 2 and 0 2 1), then six triangles; CRLF line ends.
    lines += ["4 0 3 2 1"] + [f"3 {a} {b} {c}" for a, b, c in CUBE_F[2:]][:6]
    path = tmp_path / "cube.ply"
    path.write_text("\r\n".join(lines) + "\r\n")
    mesh = load_ply(path)
    np.testing.assert_array_equal(mesh.vertices, CUBE_V)
    # trimesh's order: the triangles, then each quad as (0, 1, 2), (2, 3, 0): the fan's two triangles
    np.testing.assert_array_equal(mesh.faces[:6], CUBE_F[2:8])
    np.testing.assert_array_equal(mesh.faces[6:], [[0, 3, 2], [2, 1, 0]])
    assert mesh.volume == pytest.approx(Mesh(CUBE_V, np.concatenate([[[0, 3, 2], [0, 2, 1]], CUBE_F[2:8]])).volume)
    assert load_ply(path.read_bytes()).faces.shape == (8, 3)

    full = ["ply", "format ascii 1.0", "element vertex 8", "property double x", "property double y",
            "property double z", "element face 12", "property list uchar int vertex_indices", "end_header"]
    full += [" ".join(repr(float(x)) for x in v) for v in cube.vertices] + [f"3 {a} {b} {c}" for a, b, c in cube.faces]
    again = load_ply("\n".join(full).encode())
    np.testing.assert_array_equal(again.vertices, cube.vertices)
    np.testing.assert_array_equal(again.faces, cube.faces)
    assert again.volume == pytest.approx(1.0)


def test_load_ply_binary_and_full_precision(tmp_path: Path):
    """Binary PLY (as ModelNet40 copies often come) reads through trimesh; an ASCII file's coordinates are
    read at double precision even where its header says float32."""
    box = trimesh.creation.box(extents=(1.0, 0.4, 0.3))
    for encoding in ("binary", "ascii"):
        data = trimesh.exchange.ply.export_ply(box, encoding=encoding)
        mesh = load_ply(data)
        np.testing.assert_allclose(mesh.vertices, box.vertices, rtol=0, atol=1e-7)
        np.testing.assert_array_equal(mesh.faces, box.faces)
    text = (b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float32 x\nproperty float32 y\nproperty float32 z\n"
            b"element face 1\nproperty list uchar int vertex_indices\nend_header\n0.1 0 0\n1 0 0\n0 1 0.3\n3 0 1 2\n")
    assert load_ply(text).vertices[0, 0] == 0.1 and load_ply(text).vertices[2, 2] == 0.3  # not float32's 0.1000000015
    truncated = trimesh.exchange.ply.export_ply(box, encoding="binary")[:-20]
    with pytest.raises(FactorbenchError, match=r"PLY data cannot be read \(ValueError"):
        load_ply(truncated)


def test_load_ply_errors(tmp_path: Path):
    with pytest.raises(FactorbenchError, match="needs 'vertex' and 'face' elements, found \\['vertex'\\]"):
        load_ply(b"ply\nformat binary_little_endian 1.0\nelement vertex 0\nend_header\n")
    with pytest.raises(FactorbenchError, match="does not start with 'ply'"):
        load_ply(b"OFF\n")
    with pytest.raises(FactorbenchError, match="truncated: its header promises 3 vertices and 1 face, it has 2 lines"):
        load_ply(b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
                 b"property float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n"
                 b"0 0 0\n1 0 0\n")
    with pytest.raises(FactorbenchError, match="out of range"):
        load_ply(b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
                 b"property float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n"
                 b"0 0 0\n1 0 0\n0 1 0\n3 0 1 3\n")
    with pytest.raises(FactorbenchError, match="Cannot read"):
        load_ply(tmp_path / "missing.ply")


# ------------------------------------------------------------------------------------------------ OFF

SQUARE_PYRAMID = """OFF
# a square pyramid: a quad base and four triangles
5 5 8

0 0 0
1 0 0
1 1 0
0 1 0
0.5 0.5 1
4 0 3 2 1
3 0 1 4
3 1 2 4   # trailing comment
3 2 3 4
3 3 0 4
"""


def test_load_off_normal_file(tmp_path: Path):
    path = tmp_path / "pyramid.off"
    path.write_text(SQUARE_PYRAMID)
    mesh = load_off(path)
    assert mesh.vertices.shape == (5, 3)
    assert mesh.faces.shape == (6, 3)  # the quad becomes two triangles
    np.testing.assert_array_equal(mesh.faces[:2], [[0, 3, 2], [0, 2, 1]])
    np.testing.assert_array_equal(mesh.vertices[4], [0.5, 0.5, 1.0])
    assert mesh.volume == pytest.approx(1 / 3)
    assert load_off(str(path)).faces.shape == (6, 3)


def test_load_off_run_together_header_and_bytes():
    text = SQUARE_PYRAMID.replace("OFF\n# a square pyramid: a quad base and four triangles\n5 5 8\n\n", "OFF5 5 8\n")
    assert text.startswith("OFF5 5 8\n0 0 0")
    mesh = load_off(text.encode())
    assert mesh.faces.shape == (6, 3)
    assert mesh.volume == pytest.approx(1 / 3)
    # Counts on the OFF line, separated by a space; CRLF line ends.
    spaced = load_off(text.replace("OFF5", "OFF 5").replace("\n", "\r\n").encode())
    np.testing.assert_array_equal(spaced.faces, mesh.faces)


def test_load_off_errors(tmp_path: Path):
    truncated = tmp_path / "truncated.off"
    truncated.write_text("\n".join(SQUARE_PYRAMID.splitlines()[:-2]))
    with pytest.raises(FactorbenchError, match=r"truncated.*5 faces.*found 5 vertex and 3 face"):
        load_off(truncated)
    out_of_range = tmp_path / "bad_index.off"
    out_of_range.write_text(SQUARE_PYRAMID.replace("3 3 0 4", "3 3 0 5"))
    with pytest.raises(FactorbenchError, match=r"bad_index.off: face 4 has vertex index 5 out of range 0..4"):
        load_off(out_of_range)
    with pytest.raises(FactorbenchError, match="bad counts"):
        load_off(b"OFF\nfive 5 0\n")
    with pytest.raises(FactorbenchError, match="bad counts"):
        load_off(b"OFF\n5 -1 0\n")
    with pytest.raises(FactorbenchError, match="does not start with 'OFF'"):
        load_off(b"PLY\n3 1 0\n")
    with pytest.raises(FactorbenchError, match="promises 4 indices"):
        load_off(b"OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n4 0 1 2\n")
    with pytest.raises(FactorbenchError, match="at least 3"):
        load_off(b"OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n2 0 1\n")
    with pytest.raises(FactorbenchError, match="binary"):
        load_off(b"OFF BINARY\n\x00\x01")
