"""COIL-100 from a local source: a small fake coil-100.zip (3 objects x 72 angles) whose PNGs encode
their own (object, angle), so every lookup, the 128 -> 64 box resize and the source digest are checked
exactly. Testing hook: the parameter ``num_objects`` (default 100) limits the objects to 1..N; the
72 angles are always all present."""

from __future__ import annotations

import importlib
import io
import math
import zipfile

import numpy as np
import pytest
from PIL import Image

from factorbench.benchmark import verify
from factorbench.generators import FactorbenchError, get, list_datasets, write_dataset
from factorbench.generators import base

N_OBJ = 3
STEP = 2 * math.pi / 72


@pytest.fixture(scope="module", autouse=True)
def coil100_module():
    """Import (and so register) coil100 for these tests only, unless the package already registers it:
    other test modules enumerate the registry, and coil100 needs a --source they do not give."""
    was_registered = "coil100" in list_datasets()
    module = importlib.import_module("factorbench.generators.coil100")
    base._REGISTRY.setdefault("coil100", module.Coil100)
    yield module
    if not was_registered:
        base._REGISTRY.pop("coil100", None)


def original(obj: int, k: int) -> np.ndarray:
    """The fake 128 x 128 view of object ``obj`` (0-based) at angle index ``k``. Every 2 x 2 block has an
    integer mean: red 80*obj + 6, green 3*k + 1, blue 2*col + row + 2 (row, col of the 64 x 64 pixel)."""
    y, x = np.mgrid[0:128, 0:128]
    r = 80 * obj + 4 * (y % 2) + 8 * (x % 2)
    g = 3 * k + 2 * (x % 2) + 0 * y
    b = 2 * (x // 2) + (y // 2) + 4 * ((x + y) % 2)
    return np.stack([r, g, b], axis=-1).astype(np.uint8)


def expected_64(obj: int, k: int) -> np.ndarray:
    row, col = np.mgrid[0:64, 0:64]
    return np.stack([np.full((64, 64), 80 * obj + 6), np.full((64, 64), 3 * k + 1), 2 * col + row + 2],
                    axis=-1).astype(np.uint8)


def png(img: np.ndarray, mode: str | None = None) -> bytes:
    buf = io.BytesIO()
    im = Image.fromarray(img)
    if mode is not None:
        im = im.convert(mode)
    im.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def name(obj: int, k: int) -> str:
    return f"obj{obj + 1}__{5 * k}.png"


@pytest.fixture(scope="module")
def members() -> dict[str, bytes]:
    out = {name(o, k): png(original(o, k)) for o in range(N_OBJ) for k in range(72)}
    out[name(1, 1)] = png(original(1, 1), "RGBA")  # RGBA is converted to RGB
    return out


def write_zip(path, members: dict[str, bytes], extra: bool = True):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        if extra:
            zf.writestr("coil-100/convertGroupppm2png.pl", b"# not an image\n")
        for n, data in members.items():
            zf.writestr(f"coil-100/{n}", data)
    return path


@pytest.fixture(scope="module")
def fake_zip(tmp_path_factory, members):
    return write_zip(tmp_path_factory.mktemp("zip") / "coil-100.zip", members)


@pytest.fixture(scope="module")
def fake_folder(tmp_path_factory, fake_zip):
    root = tmp_path_factory.mktemp("folder")
    with zipfile.ZipFile(fake_zip) as zf:
        zf.extractall(root)
    return root  # holds coil-100/objN__A.png


@pytest.fixture(scope="module")
def gen(fake_zip):
    return get("coil100", {"num_objects": N_OBJ}, source=str(fake_zip))


def test_defaults_and_info_without_a_source():
    g = get("coil100")
    assert g.grid_shape == (100, 72) and g.full_size() == 7200 and g.image_shape == (64, 64, 3)
    assert g.params.image_size == 64 and g.params.resample == "box" and g.params.num_objects == 100
    obj, ang = g.factors()
    assert obj.kind == "categorical" and obj.values == tuple(float(i) for i in range(100))
    assert ang.kind == "cyclic" and ang.values[1] == pytest.approx(math.radians(5)) and len(ang.values) == 72
    info = g.info()
    assert info["n"] == 7200 and "CUCS-006-96" in info["citation"] and "\n" not in info["description"]
    for call in (g.spec, lambda: g.render(np.zeros((1, 2)))):
        with pytest.raises(FactorbenchError, match=r"not downloaded by factorbench.*Columbia.*coil-100\.zip.*--source"):
            call()


def test_render_returns_the_view_of_each_factor_row(gen):
    spec = gen.spec()
    assert spec.n == N_OBJ * 72 and len(spec.params["source_digest"]) == 64
    values, classes = gen.sample_factors(spec, 0, spec.n)
    imgs = gen.render(values)
    assert imgs.dtype == np.uint8 and imgs.shape == (N_OBJ * 72, 64, 64, 3)
    for i in range(spec.n):
        assert np.array_equal(imgs[i], expected_64(*classes[i])), classes[i]
    # any order, repeats, and an angle one full turn on (2 pi + 5 degrees is angle index 1)
    rows = np.array([[2.0, 70 * STEP], [0.0, 2 * math.pi + STEP], [2.0, 70 * STEP], [1.0, 0.0]])
    out = gen.render(rows)
    for img, (o, k) in zip(out, [(2, 70), (0, 1), (2, 70), (1, 0)]):
        assert np.array_equal(img, expected_64(o, k))


def test_box_resize_is_the_exact_mean_of_each_2x2_block(gen):
    img = gen.render(np.array([[1.0, 7 * STEP]]))[0]
    block_mean = original(1, 7).astype(np.float64).reshape(64, 2, 64, 2, 3).mean(axis=(1, 3))
    assert np.array_equal(img, block_mean.astype(np.uint8)) and np.array_equal(block_mean, np.rint(block_mean))


def test_full_size_and_lanczos(fake_zip):
    full = get("coil100", {"num_objects": N_OBJ, "image_size": 128}, source=fake_zip)
    assert np.array_equal(full.render(np.array([[2.0, 9 * STEP]]))[0], original(2, 9))
    lz = get("coil100", {"num_objects": N_OBJ, "resample": "lanczos"}, source=fake_zip)
    img = lz.render(np.array([[0.0, 0.0]]))[0]
    assert img.shape == (64, 64, 3) and not np.array_equal(img, expected_64(0, 0))
    assert np.abs(img.astype(int) - expected_64(0, 0)).max() <= 8  # same picture, another filter
    with pytest.raises(FactorbenchError, match="resample must be one of box, lanczos"):
        get("coil100", {"resample": "bilinear"})


def test_zip_and_folder_give_the_same_digest_and_images(gen, fake_folder):
    for path in (fake_folder, fake_folder / "coil-100"):
        other = get("coil100", {"num_objects": N_OBJ}, source=str(path))
        assert other.params.source_digest == gen.params.source_digest
        rows = np.array([[o, k * STEP] for o in range(N_OBJ) for k in (0, 13, 71)], dtype=np.float64)
        assert np.array_equal(other._source.load(other.params.source_digest, 64, "box")[:, [0, 13, 71]],
                              gen.render(rows).reshape(N_OBJ, 3, 64, 64, 3))
    assert other.renderer_identity().endswith("from a folder source")
    assert gen.renderer_identity().endswith("from a zip source")


def test_a_changed_file_changes_the_digest_and_a_wrong_digest_is_refused(gen, members, tmp_path):
    digest = gen.params.source_digest
    changed = dict(members)
    img = original(2, 40)
    img[0, 0, 0] ^= 1
    changed[name(2, 40)] = png(img)
    other = get("coil100", {"num_objects": N_OBJ}, source=write_zip(tmp_path / "changed.zip", changed))
    assert other.params.source_digest != digest
    # the expected digest is accepted; another one is refused
    same = get("coil100", {"num_objects": N_OBJ, "source_digest": digest}, source=write_zip(tmp_path / "same.zip",
                                                                                          members, extra=False))
    assert same.params.source_digest == digest
    with pytest.raises(FactorbenchError, match="not the requested source_digest"):
        get("coil100", {"num_objects": N_OBJ, "source_digest": digest}, source=tmp_path / "changed.zip")
    with pytest.raises(FactorbenchError, match="64 lowercase hex"):
        get("coil100", {"source_digest": "abc"})


def test_missing_bad_and_greyscale_files(members, tmp_path):
    missing = {k: v for k, v in members.items() if k not in (name(1, 35), name(2, 3))}
    with pytest.raises(FactorbenchError, match=r"lacks obj2__175\.png \(and 1 more"):
        get("coil100", {"num_objects": N_OBJ}, source=write_zip(tmp_path / "missing.zip", missing))
    with pytest.raises(FactorbenchError, match=r"lacks obj4__0\.png"):  # the fake has only 3 objects
        get("coil100", {"num_objects": 4}, source=write_zip(tmp_path / "three.zip", members))
    bad = dict(members)
    bad[name(0, 2)] = png(np.zeros((100, 128, 3), np.uint8))
    with pytest.raises(FactorbenchError, match=r"coil-100/obj1__10\.png is a 128x100 RGB image; expected 128x128"):
        get("coil100", {"num_objects": N_OBJ}, source=write_zip(tmp_path / "bad.zip", bad))
    bad[name(0, 2)] = b"not a png"
    with pytest.raises(FactorbenchError, match=r"obj1__10\.png is not a readable image"):
        get("coil100", {"num_objects": N_OBJ}, source=write_zip(tmp_path / "junk.zip", bad))
    grey = dict(members)
    grey[name(0, 5)] = png(np.full((128, 128, 3), 77, np.uint8), "L")
    g = get("coil100", {"num_objects": N_OBJ}, source=write_zip(tmp_path / "grey.zip", grey))
    assert np.array_equal(g.render(np.array([[0.0, 5 * STEP]]))[0], np.full((64, 64, 3), 77, np.uint8))


def test_off_grid_values_are_refused(gen):
    for row in ([0.0, 2.5 * STEP], [0.5, 0.0], [3.0, 0.0], [-1.0, 0.0], [0.0, np.nan]):
        with pytest.raises(FactorbenchError, match="not a photographed view.*only its 72 angles"):
            gen.render(np.array([[0.0, 0.0], row]))
    with pytest.raises(FactorbenchError, match=r"row 1 \(object 0, angle 0.0218166 rad = 1.25 degrees\)"):
        gen.render(np.array([[0.0, 0.0], [0.0, 0.25 * STEP]]))


def test_bad_sources_are_explained(tmp_path):
    with pytest.raises(FactorbenchError, match="does not exist"):
        get("coil100", source=tmp_path / "nope.zip")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FactorbenchError, match="holds no COIL-100 PNGs"):
        get("coil100", source=tmp_path / "empty")
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(FactorbenchError, match="not a zip archive"):
        get("coil100", source=tmp_path / "x.txt")
    with pytest.raises(FactorbenchError, match="takes no --backend"):
        get("coil100", backend="cpu")


def test_write_dataset_and_verify(fake_zip, tmp_path):
    g = get("coil100", {"num_objects": N_OBJ}, source=str(fake_zip))
    out = write_dataset(g, tmp_path / "coil.h5", progress=False)
    assert verify(out).ok
    from factorbench.benchmark import load
    with load(out) as ds:
        assert len(ds) == N_OBJ * 72 and ds.spec.params["source_digest"] == g.params.source_digest
        assert np.array_equal(ds.images[75], expected_64(1, 3))


def test_tensorflow_datasets_source(tmp_path):
    (tmp_path / "coil100").mkdir()
    try:
        import tensorflow_datasets  # noqa: F401
    except ImportError:
        with pytest.raises(FactorbenchError, match=r"pip install 'factorbench\[tfds\]'"):
            get("coil100", source=tmp_path)
        pytest.skip("tensorflow-datasets is not installed: only its absence is checked")
    with pytest.raises(FactorbenchError, match="never downloads"):  # an unprepared data dir is not downloaded
        get("coil100", source=tmp_path)
