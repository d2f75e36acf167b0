"""ModelNet40: one category of ModelNet40 on a turntable (Tonnaer et al. 2022), from local files.

Tonnaer et al. 2022 rendered the 626 training airplanes of ModelNet40 (Wu et al. 2015) at 64 orientations
about the vertical axis: 40,064 images, factors object id and rotation. factorbench does not download
ModelNet40: the user passes the extracted ``ModelNet40/`` folder or ``ModelNet40.zip`` (from the Princeton
ModelNet page, https://modelnet.cs.princeton.edu/) as the run-time option ``source``
(``factorbench generate modelnet40 --source PATH``). The path is not part of the dataset spec.

The objects are the files ``<category>/<subset>/*.off`` (in the zip: ``ModelNet40/<category>/<subset>/*.off``),
or ``*.ply`` (ASCII or binary) in a copy converted to PLY, sorted by name, object id k being the k-th file.
Each is read with :func:`load_off` (ModelNet's run-together ``OFF490 518 0`` header included; trimesh's
OFF reader would silently drop the faces of a truncated file) or :func:`load_ply` (through trimesh), its faces wound consistently (:meth:`Mesh.consistently_oriented`:
ModelNet's files mix both windings, which left dark speckles under one-sided shading), turned so that
``up_axis`` becomes +z (``y``: a +90 degree turn about x), and rendered as in :mod:`.turntable` (light
grey, camera at 20 degrees elevation, light from above).

Identity of the data: the parameter ``source_digest`` is the sha256 of the selected files (see
:func:`source_digest`: their names relative to the ``ModelNet40`` root, sorted, and their bytes), so the
extracted folder and the zip give the same spec. It is computed when ``source`` is given and stored in the
generator's params; a non-empty ``source_digest`` given by the user that differs is refused, so a spec
written elsewhere can be regenerated only from the same files.

Without ``source`` the generator can be built (for ``factorbench info``), with the object count of the
published protocol where it is known (airplane: 626 train, 100 test); ``render`` and ``spec`` then raise an
error that says where to get the data.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from .citations import TONNAER_2022
from .errors import FactorbenchError
from .factors import Factor
from .meshes import Mesh, load_off, load_ply
from .spec import DatasetSpec
from .turntable import TurntableGenerator, TurntableParams

WU_2015 = """@inproceedings{wu2015shapenets,
  title     = {3D ShapeNets: A Deep Representation for Volumetric Shapes},
  author    = {Wu, Zhirong and Song, Shuran and Khosla, Aditya and Yu, Fisher and Zhang, Linguang and Tang, Xiaoou and Xiao, Jianxiong},
  booktitle = {Proceedings of the IEEE Conference on Computer Vision and Pattern Recognition (CVPR)},
  pages     = {1912--1920},
  year      = {2015}
}"""

ROOT = "ModelNet40"
#: object counts of ModelNet40 for ``info`` without ``source`` (the published protocol's category)
KNOWN_COUNTS: dict[tuple[str, str], int] = {("airplane", "train"): 626, ("airplane", "test"): 100}
SUBSETS = ("train", "test")
UP_AXES = ("z", "y")
#: rotations taking the given up axis to +z (proper rotations)
_UP_ROTATIONS = {"z": np.eye(3), "y": np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])}

NOT_DOWNLOADED = (
    "ModelNet40 is not downloaded by factorbench. Get ModelNet40.zip from the Princeton ModelNet page "
    "(https://modelnet.cs.princeton.edu/, file ModelNet40.zip), then pass it with --source "
    "/path/to/ModelNet40.zip, or unzip it and pass --source /path/to/ModelNet40 "
    "(in Python: get('modelnet40', source=...))")


@dataclass(frozen=True)
class ModelNet40Params(TurntableParams):
    category: str = "airplane"
    subset: str = "train"
    up_axis: str = "z"
    source_digest: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not re.fullmatch(r"[A-Za-z0-9_\-]+", self.category):
            raise FactorbenchError(f"modelnet40: category must be a ModelNet40 folder name such as 'airplane', "
                                   f"got {self.category!r}")
        if self.subset not in SUBSETS:
            raise FactorbenchError(f"modelnet40: subset must be 'train' or 'test', got {self.subset!r}")
        if self.up_axis not in UP_AXES:
            raise FactorbenchError(f"modelnet40: up_axis must be 'z' or 'y', got {self.up_axis!r}")
        if self.source_digest and not re.fullmatch(r"[0-9a-f]{64}", self.source_digest):
            raise FactorbenchError(f"modelnet40: source_digest must be 64 lowercase hex digits (a sha256), "
                                   f"got {self.source_digest!r}")


def _mesh_suffix(names: list[str]) -> str:
    """The mesh format of a copy's files: ``.off`` (ModelNet40's own) where there is any, else ``.ply`` (as
    some copies convert them, often to binary PLY), else ''. One format per copy, so a folder holding both
    never counts an object twice and an OFF copy keeps its digest."""
    lowered = [n.lower() for n in names]
    return next((s for s in (".off", ".ply") if any(n.endswith(s) for n in lowered)), "")


class _Source:
    """The selected OFF files of a ModelNet40 folder or zip: relative names (``airplane/train/x.off``),
    their sha256, and their bytes on demand."""

    def __init__(self, path: str | os.PathLike, category: str, subset: str) -> None:
        self.path = Path(path).expanduser()
        self.category, self.subset = category, subset
        if not self.path.exists():
            raise FactorbenchError(f"modelnet40: source {self.path} does not exist; pass the extracted ModelNet40 "
                                   "folder or ModelNet40.zip")
        self.is_zip = self.path.is_file()
        self.names: list[str] = []  # relative to the ModelNet40 root, sorted
        self._where: dict[str, str | Path] = {}  # name -> zip member name or file path
        if self.is_zip:
            self._list_zip()
        else:
            self._list_folder()
        self._zip: zipfile.ZipFile | None = None
        self._zip_pid = 0
        self.hashes: dict[str, str] = {}
        digest = hashlib.sha256()
        for name in self.names:
            data = self.read(name, check=False)
            self.hashes[name] = hashlib.sha256(data).hexdigest()
            digest.update(name.encode("utf-8") + b"\0" + len(data).to_bytes(8, "little"))
            digest.update(data)
        self.digest = digest.hexdigest()

    def _where_label(self) -> str:
        return f"{self.category}/{self.subset}"

    def _list_folder(self) -> None:
        root = self.path
        if not (root / self.category).is_dir() and (root / ROOT / self.category).is_dir():
            root = root / ROOT  # the folder that holds ModelNet40/
        folder = root / self.category / self.subset
        if not folder.is_dir():
            found = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
            what = (f"categories found there: {', '.join(found[:50])}" + (", ..." if len(found) > 50 else "")
                    if found else "it has no category folders")
            raise FactorbenchError(f"modelnet40: no folder {self._where_label()} in {root} ({what}); check "
                                   "--param category=... and subset=..., and that --source is the extracted "
                                   "ModelNet40 folder")
        present = [p for p in folder.iterdir() if p.is_file()]
        suffix = _mesh_suffix([p.name for p in present])
        files = sorted(p for p in present if p.suffix.lower() == suffix)
        if not files:
            raise FactorbenchError(f"modelnet40: no .off or .ply files in {folder}")
        for p in files:
            name = f"{self.category}/{self.subset}/{p.name}"
            self.names.append(name)
            self._where[name] = p

    def _list_zip(self) -> None:
        try:
            with zipfile.ZipFile(self.path) as z:
                members = [m for m in z.namelist() if not m.startswith("__MACOSX/")]
        except (zipfile.BadZipFile, OSError) as exc:
            raise FactorbenchError(f"modelnet40: cannot read {self.path} as a zip file ({exc}); pass "
                                   "ModelNet40.zip or the extracted ModelNet40 folder") from None
        wanted = f"{self.category}/{self.subset}/"
        for prefix in (f"{ROOT}/", ""):
            inside = [m for m in members if m.startswith(prefix + wanted) and "/" not in m[len(prefix + wanted):]]
            suffix = _mesh_suffix(inside)
            chosen = {m[len(prefix):]: m for m in inside if suffix and m.lower().endswith(suffix)}
            if chosen or any(m.startswith(prefix + wanted) for m in members):
                break
        else:
            cats = sorted({m.split("/")[1] for m in members if m.startswith(f"{ROOT}/") and m.count("/") >= 2})
            what = f"categories found: {', '.join(cats[:50])}" if cats else f"no {ROOT}/<category>/ folders"
            raise FactorbenchError(f"modelnet40: {self.path} has no folder {ROOT}/{wanted} ({what}); check "
                                   "--param category=... and subset=...")
        if not chosen:
            raise FactorbenchError(f"modelnet40: no .off or .ply files in {self.path}:{prefix}{wanted}")
        self.names = sorted(chosen)
        self._where = dict(chosen)

    def label(self, name: str) -> str:
        where = self._where[name]
        return f"{self.path}:{where}" if self.is_zip else str(where)

    def read(self, name: str, check: bool = True) -> bytes:
        where = self._where[name]
        try:
            if self.is_zip:
                if self._zip is None or self._zip_pid != os.getpid():  # one handle per process
                    self._zip, self._zip_pid = zipfile.ZipFile(self.path), os.getpid()
                data = self._zip.read(str(where))
            else:
                data = Path(where).read_bytes()
        except (OSError, KeyError, zipfile.BadZipFile) as exc:
            raise FactorbenchError(f"modelnet40: cannot read {self.label(name)}: {exc}") from None
        if check and hashlib.sha256(data).hexdigest() != self.hashes[name]:
            raise FactorbenchError(f"modelnet40: {self.label(name)} changed while the dataset was being made; "
                                   "start again")
        return data


def source_digest(path: str | os.PathLike, category: str = "airplane", subset: str = "train") -> str:
    """sha256 over the selected files, in sorted order of their names relative to the ModelNet40 root
    (``airplane/train/airplane_0001.off``; byte-wise order): for each, the name (UTF-8), a NUL byte, the
    file's size as 8 little-endian bytes, then its bytes (the scheme of ``coil100``). Other files are
    ignored, so the extracted folder and the zip give the same digest."""
    return _Source(path, category, subset).digest


class ModelNet40(TurntableGenerator):
    name: ClassVar[str] = "modelnet40"
    version: ClassVar[str] = "1.3.0"
    description: ClassVar[str] = ("ModelNet40 objects of one category (default the 626 training airplanes) x 64 "
                                  "rotations about the vertical axis (Tonnaer et al. 2022); needs --source")
    citation: ClassVar[str] = TONNAER_2022 + "\n\n" + WU_2015
    Params: ClassVar[type] = ModelNet40Params
    options: ClassVar[tuple[str, ...]] = ("backend", "source")
    #: the data is read from local files given as ``source`` (``spec`` and ``render`` need it)
    needs_source: ClassVar[bool] = True
    #: ModelNet's files store open sheets (wings, mattresses) and many faces twice, once in each winding;
    #: both sides are shaded, as Blender shaded them for Tonnaer et al. (1.3.0; 1.2.0 shaded one side)
    two_sided: ClassVar[bool] = True
    mesh_cache_size: ClassVar[int] = 8  # ModelNet meshes can be large; objects are rendered in order

    def __init__(self, params: Any = None, *, backend: str = "auto", source: str | os.PathLike | None = None,
                 **overrides: Any) -> None:
        super().__init__(params, backend=backend, **overrides)
        self.source: _Source | None = None
        if source is not None:
            src = _Source(source, self.params.category, self.params.subset)
            given = self.params.source_digest
            if given and given != src.digest:
                raise FactorbenchError(
                    f"modelnet40: the files of {self.params.category}/{self.params.subset} in {src.path} have "
                    f"sha256 {src.digest}, but source_digest={given} was asked for: these are not the files that "
                    "spec was made from (a different or modified copy of ModelNet40)")
            self.params = dataclasses.replace(self.params, source_digest=src.digest)
            self.source = src

    def _require_source(self) -> _Source:
        if self.source is None:
            raise FactorbenchError(f"modelnet40: {NOT_DOWNLOADED}")
        return self.source

    @property
    def files(self) -> list[str]:
        """The objects' file names relative to the ModelNet40 root, in object order."""
        return list(self._require_source().names)

    def num_objects(self) -> int:
        if self.source is not None:
            return len(self.source.names)
        key = (self.params.category, self.params.subset)
        if key not in KNOWN_COUNTS:
            raise FactorbenchError(f"modelnet40: the number of {key[0]}/{key[1]} objects is known only from the "
                                   f"data; {NOT_DOWNLOADED}")
        return KNOWN_COUNTS[key]

    def factors(self) -> tuple[Factor, ...]:
        obj, rotation = super().factors()
        where = ("the k-th file of " if self.source is not None else "ModelNet40's count; with --source, the files of ")
        obj = dataclasses.replace(obj, description=f"object id 0..{len(obj.values) - 1}: {where}"
                                  f"{self.params.category}/{self.params.subset}, sorted by name")
        return (obj, rotation)

    def mesh(self, k: int) -> Mesh:
        src = self._require_source()
        name = src.names[k]
        try:
            reader = load_ply if name.lower().endswith(".ply") else load_off
            mesh = reader(src.read(name)).consistently_oriented()  # ModelNet winds faces inconsistently
            if self.params.up_axis != "z":
                mesh = mesh.rotated(_UP_ROTATIONS[self.params.up_axis])
            mesh.centred_and_scaled(1.0)  # fails here, naming the file, for a mesh whose vertices coincide
        except FactorbenchError as exc:
            raise FactorbenchError(f"modelnet40: {src.label(name)}: {exc}") from None
        return mesh

    def spec(self, seed: int = 0, n: int | None = None) -> DatasetSpec:
        self._require_source()
        return super().spec(seed, n)

    def render(self, factors: np.ndarray) -> np.ndarray:
        self._require_source()
        return super().render(factors)

    def info(self) -> dict[str, Any]:
        out = super().info()
        if self.source is None:
            out["note"] = (f"object count {self.num_objects()} is that of ModelNet40's {self.params.category}/"
                           f"{self.params.subset}; {NOT_DOWNLOADED}")
        return out
