"""Two-sided shading (``Mesh.two_sided`` drawn with back faces culled): closed meshes look as before, an
open sheet seen from its back is lit as its front would be, on the cpu and gl backends alike."""

from __future__ import annotations

import math

import numpy as np
import pytest
import trimesh

from factorbench.generators.airplane import LIGHT
from factorbench.generators.meshes import Mesh
from factorbench.generators.render import Camera, RenderSettings, get_backend, orbit_views, rotation_z
from factorbench.generators.render.gl import GlBackend
from factorbench.generators.render.scene import linear_to_srgb

BACKENDS = ["cpu"] + (["gl"] if GlBackend.unavailable_reason() is None else [])
TURNS = 8
VIEW = orbit_views(np.zeros(TURNS), np.full(TURNS, math.radians(20.0)), 2.6)  # the turntable camera
MODEL = rotation_z(np.linspace(0, 2 * math.pi, TURNS, endpoint=False))
GREY = np.full((TURNS, 3), 0.8)
CAMERA = Camera(64, 48.0)
#: a horizontal square, wound so that its normal points down (away from the light, which is above)
SHEET = Mesh([[-0.7, -0.7, 0.0], [0.7, -0.7, 0.0], [0.7, 0.7, 0.0], [-0.7, 0.7, 0.0]], [[0, 2, 1], [0, 3, 2]])


def _render(backend: str, mesh: Mesh, two_sided: bool, n: int = TURNS, samples: int = 4) -> np.ndarray:
    return get_backend(backend).render(mesh.two_sided() if two_sided else mesh, MODEL[:n], VIEW[:n], GREY[:n],
                                       CAMERA, LIGHT, RenderSettings(samples=samples, cull_back_faces=two_sided))


def test_two_sided_doubles_the_faces_with_negated_normals():
    box = trimesh.creation.box(extents=(1.0, 0.6, 0.4))
    mesh = Mesh(box.vertices, box.faces)
    both = mesh.two_sided()
    assert len(both.vertices) == 2 * len(mesh.vertices) and len(both.faces) == 2 * len(mesh.faces)
    np.testing.assert_allclose(both.vertex_normals[:len(mesh.vertices)], mesh.vertex_normals, atol=1e-12)
    np.testing.assert_allclose(both.vertex_normals[len(mesh.vertices):], -mesh.vertex_normals, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_closed_consistently_wound_meshes_look_the_same(backend):
    box = trimesh.creation.box(extents=(1.0, 0.6, 0.4))
    sphere = trimesh.creation.icosphere(2)
    for mesh in (Mesh(box.vertices, box.faces), Mesh(0.9 * sphere.vertices, sphere.faces)):
        one, two = _render(backend, mesh, False), _render(backend, mesh, True)
        if backend == "cpu":
            assert np.array_equal(one, two)
        else:  # gl: a back face could win a depth tie on a silhouette edge when drawn one-sided
            differ = (one != two).any(axis=-1)
            assert differ.mean() < 1e-3


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sheet_seen_from_its_back_is_lit_as_its_front(backend):
    """The camera looks down on a sheet whose normal points down: one-sided, only the ambient term lights
    it, colour 0.8 x ambient; two-sided, the normal turned towards the camera points at the light:
    0.8 x (intensity + ambient). Both sRGB-encoded (the sheet's normals are uniform: flat colour)."""
    flat_back = round(255 * float(linear_to_srgb(np.array(0.8 * LIGHT.ambient))))
    flat_lit = round(255 * float(linear_to_srgb(np.array(0.8 * (LIGHT.intensity + LIGHT.ambient)))))
    assert (flat_back, flat_lit) == (170, 231)
    one, two = _render(backend, SHEET, False, n=1, samples=1), _render(backend, SHEET, True, n=1, samples=1)
    assert (one[0, 32, 32] == flat_back).all() and (two[0, 32, 32] == flat_lit).all()
    # turned upside down (its normal up), the sheet is lit either way
    up = Mesh(SHEET.vertices, SHEET.faces[:, ::-1])
    assert (_render(backend, up, False, n=1, samples=1)[0, 32, 32] == flat_lit).all()
    assert (_render(backend, up, True, n=1, samples=1)[0, 32, 32] == flat_lit).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_faces_stored_in_both_windings_are_lit_once_two_sided(backend):
    """As in many ModelNet40 files, every face of the sheet is stored twice, once in each winding: whatever
    orientation repair makes of them, the two-sided render is the sheet's lit front."""
    doubled = Mesh(SHEET.vertices, np.concatenate([SHEET.faces, SHEET.faces[:, ::-1]])).consistently_oriented()
    lit = _render(backend, Mesh(SHEET.vertices, SHEET.faces[:, ::-1]), True, n=1, samples=1)
    assert np.array_equal(_render(backend, doubled, True, n=1, samples=1)[0, 28:36, 28:36], lit[0, 28:36, 28:36])
