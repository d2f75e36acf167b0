"""COIL-100: 100 real objects photographed on a turntable, 72 views each (5 degrees apart).

Nene, Nayar & Murase 1996, "Columbia Object Image Library (COIL-100)", Technical Report CUCS-006-96.
Tonnaer et al. 2022 use it (through tensorflow-datasets) rescaled from 128 x 128 to 64 x 64: 7,200
images, factors object (categorical) and angle (cyclic, SO(2)).

factorbench does not download COIL-100. The run-time option ``source`` names a local copy:

* ``coil-100.zip`` as distributed by the Columbia CAVE lab (members ``coil-100/objN__A.png``),
* a folder of the extracted PNGs (the folder itself, or one holding a ``coil-100`` folder), or
* a tensorflow-datasets data directory in which ``coil100`` has already been prepared (needs the
  optional extra ``factorbench[tfds]``; nothing is downloaded).

The generator is a grid lookup: each factor row must be one of the photographed views. The sha256
of the source (``source_digest``) is recorded in the dataset's params, so a file records exactly
which copy of COIL-100 made its pixels, and passing ``source_digest=...`` refuses any other copy.

Digest definition. Zip and folder forms: sha256 over the expected members ``objN__A.png`` (N =
1..num_objects, A = 0, 5, ..., 355) in sorted (byte-wise) order of name, each contributing
``name`` (ASCII), a NUL byte, its size as 8 little-endian bytes, then its bytes; other files are
ignored, so the zip and the extracted folder give the same digest. tensorflow-datasets form: sha256
over ``b"coil100 tfds decoded\\0"`` then the decoded 128 x 128 x 3 uint8 images in (object, angle)
order (its PNGs are re-encoded by tensorflow-datasets, so this digest differs from the zip's).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import math
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator

import numpy as np

from .base import Generator
from .errors import FactorbenchError
from .factors import Factor
from .spec import DatasetSpec

NUM_OBJECTS = 100
NUM_ANGLES = 72
ANGLE_STEP_DEG = 5
ORIGINAL_SIZE = 128

HOMEPAGE = "https://www.cs.columbia.edu/CAVE/software/softlib/coil-100.php"
ZIP_URL = "http://www.cs.columbia.edu/CAVE/databases/SLAM_coil-20_coil-100/coil-100/coil-100.zip"

NENE_1996 = """@techreport{nene1996coil100,
  title       = {Columbia Object Image Library (COIL-100)},
  author      = {Nene, Sameer A. and Nayar, Shree K. and Murase, Hiroshi},
  institution = {Department of Computer Science, Columbia University},
  number      = {CUCS-006-96},
  year        = {1996}
}"""

RESAMPLE_FILTERS = ("box", "lanczos")
_MEMBER = re.compile(r"obj(\d+)__(\d+)\.png")
_TOLERANCE = 1e-6  # how far a factor value may be from its grid value (objects: units; angles: radians)
_CONVERTIBLE_MODES = ("RGB", "RGBA", "L", "LA", "P")
_TFDS_DIGEST_PREFIX = b"coil100 tfds decoded\0"

#: Decoded, resized images per process: (source_digest, image_size, resample) -> (objects, 72, S, S, 3).
_IMAGES: dict[tuple[str, int, str], np.ndarray] = {}


def member_name(obj: int, angle_index: int) -> str:
    """File name of object ``obj`` (0-based) at angle index ``angle_index`` (5 degrees per step)."""
    return f"obj{obj + 1}__{angle_index * ANGLE_STEP_DEG}.png"


@dataclass(frozen=True)
class Coil100Params:
    image_size: int = 64  # side of the output images (the originals are 128 x 128)
    resample: str = "box"  # "box" (area averaging; 128 -> 64 is the mean of each 2x2 block) or "lanczos"
    num_objects: int = NUM_OBJECTS  # use objects 1..num_objects only (COIL-100 has 100)
    source_digest: str = ""  # sha256 of the source (see the module docstring); set from --source

    def __post_init__(self) -> None:
        if not 4 <= self.image_size <= ORIGINAL_SIZE:
            raise FactorbenchError(f"coil100: image_size must be between 4 and {ORIGINAL_SIZE}, got {self.image_size}")
        if self.resample not in RESAMPLE_FILTERS:
            raise FactorbenchError(f"coil100: resample must be one of {', '.join(RESAMPLE_FILTERS)}, "
                                   f"got {self.resample!r}")
        if not 2 <= self.num_objects <= NUM_OBJECTS:
            raise FactorbenchError(f"coil100: num_objects must be between 2 and {NUM_OBJECTS}, got {self.num_objects}")
        if self.source_digest and not re.fullmatch(r"[0-9a-f]{64}", self.source_digest):
            raise FactorbenchError(f"coil100: source_digest must be 64 lowercase hex digits (a sha256), "
                                   f"got {self.source_digest!r}")


# -- sources ------------------------------------------------------------------------------------

class _FileSource:
    """``coil-100.zip`` or a folder of its PNGs: expected member name -> where its bytes are."""

    def __init__(self, kind: str, path: Path, where: dict[str, str], num_objects: int) -> None:
        self.kind, self.path, self.num_objects = kind, path, num_objects
        expected = [member_name(o, a) for o in range(num_objects) for a in range(NUM_ANGLES)]
        missing = [name for name in expected if name not in where]
        if missing:
            raise FactorbenchError(
                f"COIL-100 source {path} lacks {missing[0]}" + (f" (and {len(missing) - 1} more of the "
                f"{len(expected)} expected files)" if len(missing) > 1 else "")
                + "; pass the complete coil-100.zip or the folder of all its extracted PNGs")
        self.where = {name: where[name] for name in expected}
        self.index = {member_name(o, a): (o, a) for o in range(num_objects) for a in range(NUM_ANGLES)}

    def label(self, name: str) -> str:
        return f"{self.path}:{self.where[name]}" if self.kind == "zip" else self.where[name]

    def members(self) -> Iterator[tuple[str, bytes]]:
        """(name, bytes) of every expected member in sorted name order."""
        names = sorted(self.where)
        if self.kind == "zip":
            with zipfile.ZipFile(self.path) as zf:
                for name in names:
                    yield name, zf.read(self.where[name])
        else:
            for name in names:
                yield name, Path(self.where[name]).read_bytes()

    def digest(self) -> str:
        """The source digest; also checks that every member is a readable 128 x 128 image."""
        from PIL import Image, UnidentifiedImageError

        h = hashlib.sha256()
        for name, data in self.members():
            _update(h, name, data)
            try:
                with Image.open(io.BytesIO(data)) as im:
                    size, mode = im.size, im.mode
            except (UnidentifiedImageError, OSError) as exc:
                raise FactorbenchError(f"COIL-100 file {self.label(name)} is not a readable image ({exc})") from None
            _check_image(self.label(name), size, mode)
        return h.hexdigest()

    def load(self, digest: str, size: int, resample: str) -> np.ndarray:
        """Decode and resize every member, checking that the bytes still have ``digest``."""
        from PIL import Image

        out = np.empty((self.num_objects, NUM_ANGLES, size, size, 3), np.uint8)
        h = hashlib.sha256()
        for name, data in self.members():
            _update(h, name, data)
            try:
                with Image.open(io.BytesIO(data)) as im:
                    _check_image(self.label(name), im.size, im.mode)
                    rgb = im.convert("RGB")
            except FactorbenchError:
                raise
            except Exception as exc:  # truncated or corrupt PNG data
                raise FactorbenchError(f"COIL-100 file {self.label(name)} cannot be decoded ({exc})") from None
            o, a = self.index[name]
            out[o, a] = _resize(rgb, size, resample)
        if h.hexdigest() != digest:
            raise FactorbenchError(f"COIL-100 source {self.path} changed since it was opened (sha256 "
                                   f"{h.hexdigest()[:16]}..., was {digest[:16]}...); open it again")
        return out


class _TfdsSource:
    """A tensorflow-datasets data directory in which ``coil100`` is prepared; read, never downloaded."""

    kind = "tfds"

    def __init__(self, data_dir: Path, num_objects: int) -> None:
        self.path, self.num_objects = data_dir, num_objects
        self._originals: np.ndarray | None = None

    def _read(self) -> np.ndarray:
        try:
            import tensorflow_datasets as tfds
        except ImportError:
            raise FactorbenchError(
                f"{self.path} looks like a tensorflow-datasets data directory, but tensorflow-datasets is not "
                "installed: pip install 'factorbench[tfds]' (or pass coil-100.zip or its extracted folder)") from None
        try:
            builder = tfds.builder("coil100", data_dir=str(self.path))
            ds = builder.as_dataset(split="train", shuffle_files=False)
        except Exception as exc:  # not prepared, unreadable, or an incompatible version
            raise FactorbenchError(
                f"tensorflow-datasets could not read a prepared coil100 from {self.path} ({exc}); factorbench "
                "never downloads it: prepare it with tensorflow-datasets first, or pass coil-100.zip") from None
        originals = np.zeros((self.num_objects, NUM_ANGLES, ORIGINAL_SIZE, ORIGINAL_SIZE, 3), np.uint8)
        seen = np.zeros((self.num_objects, NUM_ANGLES), bool)
        for ex in tfds.as_numpy(ds):
            obj, ang = _tfds_labels(ex)
            if obj >= self.num_objects:
                continue
            if not 0 <= ang < NUM_ANGLES or obj < 0:
                raise FactorbenchError(f"tensorflow-datasets coil100 in {self.path}: unexpected labels "
                                       f"object {obj}, angle index {ang}")
            if seen[obj, ang]:
                raise FactorbenchError(f"tensorflow-datasets coil100 in {self.path} has "
                                       f"{member_name(obj, ang)} twice")
            img = np.asarray(ex["image"])
            if img.ndim == 3 and img.shape[2] == 1:
                img = np.repeat(img, 3, axis=2)
            if img.shape != (ORIGINAL_SIZE, ORIGINAL_SIZE, 3) or img.dtype != np.uint8:
                raise FactorbenchError(f"tensorflow-datasets coil100 in {self.path}: image of "
                                       f"{member_name(obj, ang)} is {img.dtype} {img.shape}, expected uint8 "
                                       f"({ORIGINAL_SIZE}, {ORIGINAL_SIZE}, 3)")
            originals[obj, ang] = img
            seen[obj, ang] = True
        if not seen.all():
            o, a = np.argwhere(~seen)[0]
            raise FactorbenchError(f"tensorflow-datasets coil100 in {self.path} lacks {member_name(int(o), int(a))} "
                                   f"({int((~seen).sum())} of {seen.size} views missing)")
        return originals

    def digest(self) -> str:
        self._originals = self._read()
        h = hashlib.sha256(_TFDS_DIGEST_PREFIX)
        for img in self._originals.reshape(-1, ORIGINAL_SIZE, ORIGINAL_SIZE, 3):
            h.update(np.ascontiguousarray(img).tobytes())
        return h.hexdigest()

    def load(self, digest: str, size: int, resample: str) -> np.ndarray:
        from PIL import Image

        if self._originals is None:
            if self.digest() != digest:
                raise FactorbenchError(f"tensorflow-datasets coil100 in {self.path} changed since it was opened")
        originals, self._originals = self._originals, None  # the resized copy is cached; free the originals
        out = np.empty((self.num_objects, NUM_ANGLES, size, size, 3), np.uint8)
        for o in range(self.num_objects):
            for a in range(NUM_ANGLES):
                out[o, a] = _resize(Image.fromarray(originals[o, a]), size, resample)
        return out


def _tfds_labels(ex: dict[str, Any]) -> tuple[int, int]:
    """(object index 0..99, angle index 0..71) of a tensorflow-datasets coil100 example (v1 or v2)."""
    obj = ex["object_id"]
    if isinstance(obj, (bytes, str)):  # version 1.0.0: "obj5"
        text = obj.decode() if isinstance(obj, bytes) else obj
        obj = int(re.fullmatch(r"obj(\d+)", text).group(1)) - 1
    if "angle_label" in ex:
        ang = int(ex["angle_label"])
    else:  # version 1.0.0 called the angle class "label"
        ang = int(ex["label"])
    return int(obj), ang


def _update(h: Any, name: str, data: bytes) -> None:
    h.update(name.encode("ascii") + b"\0" + len(data).to_bytes(8, "little"))
    h.update(data)


def _check_image(label: str, size: tuple[int, int], mode: str) -> None:
    if tuple(size) != (ORIGINAL_SIZE, ORIGINAL_SIZE) or mode not in _CONVERTIBLE_MODES:
        raise FactorbenchError(f"COIL-100 file {label} is a {size[0]}x{size[1]} {mode} image; expected "
                               f"{ORIGINAL_SIZE}x{ORIGINAL_SIZE} RGB (RGBA or greyscale are converted)")


def _resize(im: Any, size: int, resample: str) -> np.ndarray:
    from PIL import Image

    if size != im.size[0] or size != im.size[1]:
        flt = Image.Resampling.BOX if resample == "box" else Image.Resampling.LANCZOS
        im = im.resize((size, size), flt)
    return np.asarray(im, dtype=np.uint8)


def _not_available() -> FactorbenchError:
    return FactorbenchError(
        "coil100: COIL-100 is not downloaded by factorbench. Get coil-100.zip from the Columbia CAVE COIL-100 "
        f"page ({HOMEPAGE}; {ZIP_URL}) and pass --source /path/to/coil-100.zip (or the folder of its extracted "
        "PNGs, or a tensorflow-datasets data directory in which coil100 is prepared); in Python: "
        "get('coil100', source=PATH)")


def open_source(source: str | Path, num_objects: int = NUM_OBJECTS) -> _FileSource | _TfdsSource:
    """Detect what ``source`` is: coil-100.zip, a folder of its PNGs, or a tensorflow-datasets data dir."""
    if not str(source).strip():
        raise FactorbenchError("coil100: --source is empty; pass the path of coil-100.zip, the folder of its "
                               "extracted PNGs, or a tensorflow-datasets data directory in which coil100 is prepared")
    path = Path(source).expanduser()
    if not path.exists():
        raise FactorbenchError(f"coil100: --source {path} does not exist")
    if path.is_file():
        if not zipfile.is_zipfile(path):
            raise FactorbenchError(f"coil100: --source {path} is a file but not a zip archive; pass coil-100.zip, "
                                   "the folder of its extracted PNGs, or a prepared tensorflow-datasets data dir")
        where: dict[str, str] = {}
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                base = info.filename.rsplit("/", 1)[-1]
                if info.is_dir() or not _MEMBER.fullmatch(base):
                    continue
                if base in where:
                    raise FactorbenchError(f"coil100: {path} holds {base} twice ({where[base]} and {info.filename})")
                where[base] = info.filename
        return _FileSource("zip", path, where, num_objects)
    for folder in (path, path / "coil-100"):
        if folder.is_dir():
            where = {p.name: str(p) for p in folder.iterdir() if _MEMBER.fullmatch(p.name) and p.is_file()}
            if where:
                return _FileSource("folder", folder, where, num_objects)
    if (path / "coil100").is_dir():
        return _TfdsSource(path, num_objects)
    if path.name == "coil100" and path.parent.is_dir():
        return _TfdsSource(path.parent, num_objects)
    raise FactorbenchError(f"coil100: --source {path} holds no COIL-100 PNGs (objN__A.png, directly or in a "
                           "coil-100 folder) and no tensorflow-datasets coil100 directory")


# -- the generator ------------------------------------------------------------------------------

class Coil100(Generator):
    name: ClassVar[str] = "coil100"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = ("COIL-100 photographs: 100 objects x 72 turntable angles (5 degrees), 128 -> 64 x 64 "
                                  "(Nene et al. 1996; needs --source coil-100.zip)")
    citation: ClassVar[str] = NENE_1996
    Params: ClassVar[type] = Coil100Params
    options: ClassVar[tuple[str, ...]] = ("source",)

    def __init__(self, params: Any = None, *, source: str | Path | None = None, **overrides: Any) -> None:
        super().__init__(params, **overrides)
        self._source: _FileSource | _TfdsSource | None = None
        if source is None:
            return
        src = open_source(source, self.params.num_objects)
        digest = src.digest()
        wanted = self.params.source_digest
        if wanted and wanted != digest:
            raise FactorbenchError(f"coil100: --source {src.path} has sha256 {digest}, not the requested "
                                   f"source_digest {wanted}: it is a different copy (or subset) of COIL-100")
        self.params = dataclasses.replace(self.params, source_digest=digest)
        self._source = src

    def factors(self) -> tuple[Factor, ...]:
        objects = tuple(float(i) for i in range(self.params.num_objects))
        return (Factor("object", "categorical", values=objects,
                       description="object N-1 of COIL-100 (files objN__*.png)"),
                Factor.cyclic_grid("angle", NUM_ANGLES, "turntable angle, element k = 5k degrees (files obj*__5k.png)"))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (self.params.image_size, self.params.image_size, 3)

    def renderer_identity(self) -> str:
        kind = self._source.kind if self._source is not None else "no"
        return f"{super().renderer_identity()} from a {kind} source"

    def spec(self, seed: int = 0, n: int | None = None) -> DatasetSpec:
        if self._source is None:
            raise _not_available()
        return super().spec(seed=seed, n=n)

    def classes(self, factors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(object, angle) class of each row of ``factors``; refuses values that are not photographed views."""
        factors = np.asarray(factors, dtype=np.float64)
        if factors.ndim != 2 or factors.shape[1] != 2:
            raise FactorbenchError(f"coil100: factors must have shape (M, 2) (object, angle), got {factors.shape}")
        f_obj, f_ang = self.factors()
        finite = np.isfinite(factors).all(axis=1)
        safe = np.where(finite[:, None], factors, 0.0)
        obj, ang = f_obj.classes_of(safe[:, 0]), f_ang.classes_of(safe[:, 1])
        off_obj = np.abs(safe[:, 0] - np.asarray(f_obj.values)[obj]) > _TOLERANCE
        d = safe[:, 1] - np.asarray(f_ang.values)[ang]
        off_ang = np.abs(np.remainder(d + math.pi, 2 * math.pi) - math.pi) > _TOLERANCE
        bad = ~finite | off_obj | off_ang
        if bad.any():
            i = int(np.argmax(bad))
            o, a = (float(v) for v in factors[i])
            raise FactorbenchError(
                f"coil100: row {i} (object {o:.6g}, angle {a:.6g} rad = "
                f"{math.degrees(a) if math.isfinite(a) else a:.6g} degrees) is not a photographed view: "
                f"COIL-100 has objects 0..{self.params.num_objects - 1} and only "
                f"its {NUM_ANGLES} angles 2*pi*k/{NUM_ANGLES} (multiples of {ANGLE_STEP_DEG} degrees); "
                f"{int(bad.sum())} row(s) off the grid")
        return obj, ang

    def images(self) -> np.ndarray:
        """All images (num_objects, 72, S, S, 3) uint8, decoded once per process."""
        if self._source is None:
            raise _not_available()
        p = self.params
        key = (p.source_digest, p.image_size, p.resample)
        if key not in _IMAGES:
            _IMAGES[key] = self._source.load(p.source_digest, p.image_size, p.resample)
            _IMAGES[key].setflags(write=False)
        return _IMAGES[key]

    def render(self, factors: np.ndarray) -> np.ndarray:
        """The photographed view of each (object, angle) row, resized to image_size."""
        if self._source is None:
            raise _not_available()
        obj, ang = self.classes(factors)
        return self.images()[obj, ang]
