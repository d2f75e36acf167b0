"""ModelNet40 from local files: a tiny fake ModelNet40 folder and zip written by the tests."""

import math
import zipfile

import numpy as np
import pytest
import trimesh

import factorbench.generators.modelnet40 as modelnet40_module  # noqa: F401  (registers the dataset)
from factorbench.benchmark import load, verify
from factorbench.generators import FactorbenchError, get, write_dataset
from factorbench.generators.meshes import airplane
from factorbench.generators.modelnet40 import source_digest

STEP = 2 * math.pi / 64
FAST = {"samples": 1, "steps": 8}


def _off(vertices, faces, quirk=False):
    vertices, faces = np.asarray(vertices, float), [list(f) for f in faces]
    head = f"OFF{len(vertices)} {len(faces)} 0\n" if quirk else f"OFF\n{len(vertices)} {len(faces)} 0\n"
    body = "".join(f"{x:.6f} {y:.6f} {z:.6f}\n" for x, y, z in vertices)
    return (head + body + "".join(f"{len(f)} {' '.join(map(str, f))}\n" for f in faces)).encode()


def _box():  # an elongated box; ModelNet's run-together header "OFF8 12 0"
    box = trimesh.creation.box(extents=(1.0, 0.3, 0.5))
    return _off(box.vertices, box.faces, quirk=True)


def _tetra():  # an irregular tetrahedron
    hull = trimesh.Trimesh([[0, 0, 0], [1, 0, 0], [0, 0.5, 0], [0.2, 0.1, 0.8]]).convex_hull
    return _off(hull.vertices, hull.faces)


def _pyramid(vertices=None):  # a square base (one quad face, triangulated as a fan) and an off-centre apex
    v = [[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0.3, 0.1, 0.7]] if vertices is None else vertices
    return _off(v, [[0, 3, 2, 1], [0, 1, 4], [1, 2, 4], [2, 3, 4], [3, 0, 4]])


FILES = {"airplane_0003.off": _tetra(), "airplane_0001.off": _box(), "airplane_0002.off": _pyramid()}


def _folder(root, files=FILES, category="airplane", subset="train"):
    folder = root / "ModelNet40" / category / subset
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (folder.parent / "test").mkdir(exist_ok=True)
    (folder / "README.txt").write_text("not an OFF file: ignored")
    return root / "ModelNet40"


def _zip(path, files=FILES, category="airplane", subset="train"):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("ModelNet40/README.txt", "ignored")
        for name, data in reversed(list(files.items())):  # member order does not matter
            z.writestr(f"ModelNet40/{category}/{subset}/{name}", data)
        z.writestr("ModelNet40/chair/train/chair_0001.off", _box())
    return path


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("modelnet")
    return _folder(root / "extracted"), _zip(root / "ModelNet40.zip")


@pytest.fixture(scope="module")
def from_folder(sources):
    return get("modelnet40", FAST, backend="cpu", source=str(sources[0]))


def test_files_are_sorted_by_name_and_make_the_factor_grid(from_folder):
    gen = from_folder
    assert gen.files == ["airplane/train/airplane_0001.off", "airplane/train/airplane_0002.off",
                         "airplane/train/airplane_0003.off"]
    assert gen.grid_shape == (3, 8) and gen.full_size() == 24
    obj, rot = gen.factors()
    assert (obj.name, obj.kind, obj.values) == ("object", "categorical", (0.0, 1.0, 2.0))
    assert (rot.name, rot.kind, len(rot.values)) == ("rotation", "cyclic", 8)
    spec = gen.spec()
    _, classes = gen.sample_factors(spec, 0, spec.n)
    assert classes[:, 0].tolist() == [0] * 8 + [1] * 8 + [2] * 8
    assert "source" not in spec.params and spec.params["source_digest"] == gen.params.source_digest
    assert len(spec.params["source_digest"]) == 64
    # the box is object 0: read despite the run-together header "OFF8 12 0"
    assert len(gen.mesh(0).vertices) == 8 and len(gen.mesh(0).faces) == 12
    assert len(gen.mesh(1).faces) == 6  # the quad base became two triangles


def test_folder_and_zip_give_the_same_digest_spec_and_images(sources, from_folder):
    folder, archive = sources
    from_zip = get("modelnet40", FAST, backend="cpu", source=str(archive))
    assert from_zip.params.source_digest == from_folder.params.source_digest == source_digest(folder)
    assert from_zip.spec().hash() == from_folder.spec().hash()
    # the folder that holds ModelNet40/ works too
    assert get("modelnet40", FAST, source=folder.parent).params.source_digest == from_folder.params.source_digest
    values = np.array([[0, 0.0], [1, STEP * 8], [2, STEP * 40]])
    assert np.array_equal(from_zip.render(values), from_folder.render(values))


def test_render_determinism_full_turn_distinct_objects_and_visible_rotation(from_folder):
    values = np.array([[k, j * 8 * STEP] for k in range(3) for j in range(8)], dtype=float)
    images = from_folder.render(values)
    assert np.array_equal(images, from_folder.render(values))
    turned = from_folder.render(values + [0.0, 2 * math.pi])
    assert np.abs(turned.astype(int) - images).max() <= 1
    masks = np.any(images != 255, axis=-1).reshape(3, 8, 64, 64)
    assert masks.mean(axis=(2, 3)).min() > 0.02
    assert not masks[:, :, 0].any() and not masks[:, :, -1].any()
    assert len({images[k * 8].tobytes() for k in range(3)}) == 3
    for k in range(3):
        iou = (masks[k, 0] & masks[k, 2]).sum() / (masks[k, 0] | masks[k, 2]).sum()  # a quarter turn
        assert iou < 0.9, (k, iou)


def _rewound_off(vertices, faces, fraction, seed, soup=False):
    """A ModelNet40-style OFF file: run-together header, a random ``fraction`` of the faces wound the
    other way, and with ``soup`` every face with its own copies of its vertices."""
    faces = np.asarray(faces)
    flip = np.random.default_rng(seed).random(len(faces)) < fraction
    faces = np.where(flip[:, None], faces[:, ::-1], faces)
    if soup:
        vertices, faces = np.asarray(vertices)[faces.ravel()], np.arange(faces.size).reshape(-1, 3)
    return _off(vertices, faces, quirk=True)


def test_inconsistently_wound_files_render_as_the_consistent_ones(tmp_path):
    # real ModelNet40 airplanes wind their faces inconsistently; one-sided shading of their averaged
    # vertex normals left dark speckles. The meshes are now oriented consistently when read, so the
    # images equal those of the same files wound consistently
    plane = airplane()
    box = trimesh.creation.box(extents=(1.0, 0.3, 0.5))
    clean = {"airplane_0001.off": _off(plane.vertices, plane.faces, quirk=True),
             "airplane_0002.off": _rewound_off(box.vertices, box.faces, 0.0, seed=1, soup=True)}
    messy = {"airplane_0001.off": _rewound_off(plane.vertices, plane.faces, 0.5, seed=0),
             "airplane_0002.off": _rewound_off(box.vertices, box.faces, 0.5, seed=1, soup=True)}
    values = np.array([[k, j * 4 * STEP] for k in range(2) for j in range(16)], dtype=float)
    images = [get("modelnet40", {"samples": 1}, backend="cpu", source=_folder(tmp_path / name, files)).render(values)
              for name, files in (("clean", clean), ("messy", messy))]
    plane_pixels = np.any(images[0][:16] != 255, axis=-1)
    darker = (images[0][:16].astype(int) - images[1][:16]).max(axis=-1) > 25
    assert darker[plane_pixels].mean() == 0.0  # before: 39 % of the airplane's pixels
    np.testing.assert_array_equal(images[1], images[0])


def test_up_axis_y_turns_y_up_files_upright(tmp_path, from_folder):
    # the pyramid with z-up coordinates (x, y, z) written y-up as (x, z, -y) renders as the z-up original
    z_up = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0.3, 0.1, 0.7]], float)
    y_up = np.c_[z_up[:, 0], z_up[:, 2], -z_up[:, 1]]
    files = {"a.off": _box(), "b.off": _pyramid(y_up.tolist())}
    gen = get("modelnet40", {**FAST, "up_axis": "y"}, backend="cpu", source=_folder(tmp_path, files))
    values = np.array([[1, 0.0], [1, 3 * STEP]])
    expected = from_folder.render(values)  # object 1 there is the z-up pyramid
    assert np.abs(gen.render(values).astype(int) - expected).max() <= 1
    as_z = get("modelnet40", FAST, backend="cpu", source=tmp_path / "ModelNet40")
    lying, upright = np.any(as_z.render(values) != 255, axis=-1), np.any(expected != 255, axis=-1)
    assert ((lying & upright).sum(axis=(1, 2)) / (lying | upright).sum(axis=(1, 2))).max() < 0.8  # on its side


def test_digest_changes_with_a_changed_file_and_a_wrong_digest_is_refused(tmp_path, from_folder):
    changed = dict(FILES, **{"airplane_0002.off": _pyramid()[:-1] + b" \n"})  # one more byte
    folder = _folder(tmp_path, changed)
    assert source_digest(folder) != from_folder.params.source_digest
    renamed = {k.replace("0003", "0004"): v for k, v in FILES.items()}
    assert source_digest(_folder(tmp_path / "renamed", renamed)) != from_folder.params.source_digest
    with pytest.raises(FactorbenchError, match="not the files that spec was made from"):
        get("modelnet40", {"source_digest": from_folder.params.source_digest}, source=folder)
    same = get("modelnet40", {**FAST, "source_digest": source_digest(folder)}, source=folder)
    assert same.params.source_digest == source_digest(folder)
    with pytest.raises(FactorbenchError, match="64 lowercase hex"):
        get("modelnet40", {"source_digest": "abc"})


def test_without_source_info_works_and_spec_and_render_say_where_to_get_the_data():
    gen = get("modelnet40")
    assert gen.full_size() == 626 * 64 and gen.info()["n"] == 40064
    assert get("modelnet40", {"subset": "test"}).full_size() == 100 * 64
    for call in (gen.spec, lambda: gen.render(np.zeros((1, 2)))):
        with pytest.raises(FactorbenchError) as err:
            call()
        msg = str(err.value)
        assert "not downloaded by factorbench" in msg and "ModelNet40.zip" in msg and "--source" in msg
        assert "modelnet.cs.princeton.edu" in msg
    with pytest.raises(FactorbenchError, match="known only from the data"):
        get("modelnet40", {"category": "chair"}).full_size()
    with pytest.raises(FactorbenchError, match="takes no --source"):
        get("airplane", source="x")


def test_clear_errors_for_missing_category_empty_folder_bad_files_and_bad_sources(tmp_path, sources):
    folder, archive = sources
    with pytest.raises(FactorbenchError, match=r"no folder sofa/train .*categories found there: airplane"):
        get("modelnet40", {"category": "sofa"}, source=folder)
    with pytest.raises(FactorbenchError, match=r"no folder ModelNet40/sofa/train/ .*airplane, chair"):
        get("modelnet40", {"category": "sofa"}, source=archive)
    with pytest.raises(FactorbenchError, match=r"no \.off or \.ply files in .*airplane[/\\]test"):
        get("modelnet40", {"subset": "test"}, source=folder)
    with pytest.raises(FactorbenchError, match="does not exist"):
        get("modelnet40", source=tmp_path / "nowhere")
    (tmp_path / "junk.zip").write_bytes(b"not a zip")
    with pytest.raises(FactorbenchError, match="cannot read .*junk.zip as a zip"):
        get("modelnet40", source=tmp_path / "junk.zip")
    with pytest.raises(FactorbenchError, match="subset must be 'train' or 'test'"):
        get("modelnet40", {"subset": "val"})
    broken = dict(FILES, **{"airplane_0002.off": b"OFF\n5 1 0\n0 0 0\n"})  # truncated
    for src in (_folder(tmp_path / "broken", broken), _zip(tmp_path / "broken.zip", broken)):
        gen = get("modelnet40", FAST, backend="cpu", source=src)  # listing and hashing do not parse
        gen.render(np.array([[0, 0.0]]))
        with pytest.raises(FactorbenchError, match=r"airplane_0002\.off.*truncated"):
            gen.render(np.array([[1, 0.0]]))


def test_written_file_verifies(tmp_path, sources):
    gen = get("modelnet40", {"samples": 1, "steps": 4, "image_size": 32}, backend="cpu", source=sources[1])
    path = write_dataset(gen, tmp_path / "modelnet40.h5", progress=False)
    assert verify(path).ok
    with load(path) as ds:
        assert len(ds) == 12 and ds.factor_names == ("object", "rotation")
        assert ds.spec.params["source_digest"] == gen.params.source_digest and ds.spec.params["category"] == "airplane"
        assert np.array_equal(gen.render(ds.factors[[0, 5, 11]]), ds.images[[0, 5, 11]])


def test_a_copy_converted_to_binary_ply_renders_the_same_objects(tmp_path, from_folder):
    """Some ModelNet40 copies come as binary PLY: the same meshes (here each OFF file converted with
    trimesh) give the same images; a folder holding both formats reads its OFF files only."""
    from factorbench.generators.meshes import load_off

    converted = {name.replace(".off", ".ply"): trimesh.exchange.ply.export_ply(
        trimesh.Trimesh(load_off(data).vertices, load_off(data).faces, process=False), encoding="binary")
        for name, data in FILES.items()}
    ply_copy = get("modelnet40", FAST, backend="cpu", source=str(_folder(tmp_path / "ply", converted)))
    assert ply_copy.params.source_digest != from_folder.params.source_digest  # other bytes, other copy
    values = np.array([[0, 0.0], [1, STEP * 8], [2, STEP * 40]])
    assert np.array_equal(ply_copy.render(values), from_folder.render(values))
    both = get("modelnet40", FAST, source=str(_folder(tmp_path / "both", {**FILES, **converted})))
    assert both.params.source_digest == from_folder.params.source_digest
    with pytest.raises(FactorbenchError, match="no .off or .ply files"):
        get("modelnet40", FAST, source=str(_folder(tmp_path / "none", {"readme.txt": b"x"}))).spec()


def test_open_sheets_stored_in_both_windings_are_shaded_on_both_sides(tmp_path):
    """1.3.0 shades both sides: a horizontal sheet (a wing, a mattress) whose faces the file stores once in
    each winding is lit from the light above, 0.8 x (intensity + ambient) sRGB-encoded, not left to the
    ambient term."""
    from factorbench.generators.airplane import LIGHT
    from factorbench.generators.render.scene import linear_to_srgb

    v = [[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]]
    faces = [[0, 2, 1], [0, 3, 2]]  # normal down
    sheet = _off(v, faces + [f[::-1] for f in faces])
    gen = get("modelnet40", FAST, backend="cpu", source=str(_folder(tmp_path / "sheet",
                                                                     {"airplane_0001.off": sheet, "airplane_0002.off": _box()})))
    assert gen.two_sided and gen.version == "1.3.0"
    lit = round(255 * float(linear_to_srgb(np.array(0.8 * (LIGHT.intensity + LIGHT.ambient)))))
    assert (gen.render(np.array([[0, 0.0]]))[0, 32, 32] == lit).all()
