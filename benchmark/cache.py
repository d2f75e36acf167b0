"""The data cache: datasets a protocol needs are generated on first use, then checked on every use.

Files live in ``$FACTORBENCH_DATA`` (default ``$XDG_CACHE_HOME/factorbench``, i.e.
``~/.cache/factorbench``), one file per dataset spec, named ``<generator>-<spec hash[:16]>.h5``.
Generation shows a progress bar and resumes after an interruption (the writer keeps a ``.partial``
file). A file is fully verified (every content hash recomputed, :func:`~factorbench.benchmark.verify.verify`)
on first use and again whenever it changed since its last verification: the verification is recorded
beside the file (``<file>.verified.json``: its size, inode, modification and status-change times, and
the hashes found), and any change of those re-runs it, so a file rewritten in place (valid HDF5,
other pixels) is noticed. :func:`verified_hashes` returns the hashes of the data as verified; they go
into every result. Every use also checks, exactly, that the file's spec hash is the protocol's, that
its factor values equal the ones the spec defines and that each split's indices equal the ones its
split spec assigns.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from factorbench import generators
from factorbench.generators.errors import FactorbenchError
from factorbench.generators.outputs import check_writable_dir, write_atomically
from factorbench.generators.params import params_to_dict
from factorbench.generators.presets import default_partition, resolve_split
from factorbench.generators.spec import DatasetSpec, canonical_json
from factorbench.generators.splits import SplitSpec, split_from_dict
from factorbench.generators.writer import add_split, write_dataset

from .dataset import Dataset, load
from .protocols.base import DatasetRef
from .verify import verify

__all__ = ["DataChanged", "data_dir", "dataset_spec", "expected_rows", "file_state", "prepare_dataset",
           "verified_hashes"]

#: suffix of the record of a cached file's last full verification
STAMP_SUFFIX = ".verified.json"


class DataChanged(FactorbenchError):
    """A dataset file changed since it was last verified, or while it was being read."""


def data_dir() -> Path:
    """Where protocol datasets are cached: ``$FACTORBENCH_DATA``, else ``$XDG_CACHE_HOME/factorbench``."""
    if os.environ.get("FACTORBENCH_DATA"):
        return Path(os.environ["FACTORBENCH_DATA"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "factorbench"


def _ensure_data_dir(directory: Path) -> None:
    """Create the cache folder, or say clearly why it cannot be (a file in the way, no permission)."""
    setting = "$FACTORBENCH_DATA" if os.environ.get("FACTORBENCH_DATA") else "the cache folder"
    if directory.exists() and not directory.is_dir():
        raise FactorbenchError(f"{setting} {directory} is a file, not a directory; point FACTORBENCH_DATA at a "
                               "folder (it is created if missing)")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FactorbenchError(f"cannot create {setting} {directory} ({exc.strerror or exc}); point "
                               "FACTORBENCH_DATA at a writable folder") from None
    check_writable_dir(directory, f"the dataset cache ({setting})")


def file_state(path: str | os.PathLike) -> dict[str, int]:
    """What changes whenever a file's bytes do: size, inode, modification and status-change times
    (the status-change time cannot be set back by a user)."""
    st = os.stat(path)
    return {"size": st.st_size, "inode": st.st_ino, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + STAMP_SUFFIX)


def verified_hashes(path: str | os.PathLike, *, force: bool = False, progress: bool = False) -> dict[str, str]:
    """The sha256 of every array of ``path`` (images, factors, classes, splits), as recomputed by a
    full verification. The file is re-verified when it changed since its last verification (or with
    ``force``); a file that fails raises :class:`DataChanged`."""
    path = Path(path)
    state = file_state(path)
    stamp = _stamp_path(path)
    if not force:
        try:
            record = json.loads(stamp.read_text())
            if record.get("file") == state and isinstance(record.get("sha256"), dict):
                return dict(record["sha256"])
        except (OSError, ValueError):
            pass
        if stamp.exists() and progress:
            print(f"{path} changed since it was last verified: verifying every hash again", file=sys.stderr)
    report = verify(path)
    if not report.ok:
        raise DataChanged(f"{path} failed verification ({'; '.join(report.problems)}): it changed since it was "
                          "written; delete it (and its .verified.json) and run again to regenerate it")
    with load(path) as ds:
        hashes = dict(ds.manifest["sha256"])  # verified: equal to the hashes of the bytes read
    if file_state(path) != state:
        raise DataChanged(f"{path} changed while it was being verified; make sure nothing else writes it, "
                          "then run again")
    try:  # a read-only cache still works: it is verified in full on every use
        write_atomically(stamp, json.dumps({"file": state, "sha256": hashes}, indent=1, sort_keys=True))
    except OSError:
        pass
    return hashes


def _generator(ref: DatasetRef, source: str | os.PathLike | None, backend: str | None):
    options: dict[str, Any] = {}
    if source is not None:
        options["source"] = str(source)
    if backend is not None:
        options["backend"] = backend
    return generators.get(ref.generator, ref.params, **options)


def dataset_spec(ref: DatasetRef, source: str | os.PathLike | None = None) -> DatasetSpec:
    """The dataset spec a reference stands for (reading ``source`` for outside data)."""
    return _generator(ref, source, None).spec(ref.seed, ref.n)


def _extra_splits(ref: DatasetRef, spec: DatasetSpec, names: tuple[str, ...] | None = None) -> list[SplitSpec]:
    """The split specs of the presets ``names`` (default: ``ref``'s extra splits) on ``spec``'s data."""
    partition = default_partition(spec.splits, spec.seed)
    return [resolve_split(name, spec.factors, partition) for name in (ref.extra_splits if names is None else names)]


def _splits_of_every_protocol(ref: DatasetRef, spec: DatasetSpec) -> list[SplitSpec]:
    """The extra splits of every registered protocol whose data is the same spec as ``ref``'s, ``ref``'s own
    first: written into a cached file once, when it is built, so that protocols sharing the file never
    need to write to it (a file another process reads cannot be opened for writing)."""
    from .protocols import PROTOCOLS

    names = list(ref.extra_splits)
    for protocol in PROTOCOLS.values():
        other = protocol.dataset
        if other.generator == ref.generator and not other.needs_source and other.seed == ref.seed \
                and other.n == ref.n and dataset_spec_params(other) == dataset_spec_params(ref):
            names += [name for name in other.extra_splits if name not in names]
    return _extra_splits(ref, spec, tuple(names))


def _check(ds: Dataset, gen: Any, spec: DatasetSpec, extra: list[SplitSpec]) -> None:
    """Factor values and split indices of ``ds`` equal the ones ``spec`` defines (exactly)."""
    if ds.spec.hash() != spec.hash():
        raise FactorbenchError(f"{ds.path} holds a different dataset (spec hash {ds.spec.hash()[:16]}, expected "
                               f"{spec.hash()[:16]}); delete it and run again to regenerate it")
    values, classes = gen.sample_factors(spec, 0, spec.n)
    if not np.array_equal(ds.factors, values) or (classes is not None and not np.array_equal(ds.factor_classes, classes)):
        raise FactorbenchError(f"{ds.path}: factor values differ from the ones its spec defines; the file is "
                               "corrupted or was made by another version: delete it and run again")
    table = ds.factor_table()
    for split in [split_from_dict(s) for s in spec.splits] + extra:
        for name, idx in split.assign(table).items():
            if not np.array_equal(np.sort(ds.split_indices(name)), np.sort(idx)):
                raise FactorbenchError(f"{ds.path}: split {name!r} differs from the one its split spec defines; "
                                       "delete the file and run again")


def _find_cached(ref: DatasetRef, directory: Path) -> Path:
    """For outside data without ``source``: the one cached file made from this reference."""
    found = []
    for path in sorted(directory.glob(f"{ref.generator}-*.h5")):
        try:
            with load(path) as ds:
                params = {k: v for k, v in ds.spec.params.items() if k != "source_digest"}
                wanted = {k: v for k, v in dataset_spec_params(ref).items() if k != "source_digest"}
                if params == wanted and ds.spec.seed == ref.seed:
                    found.append(path)
        except FactorbenchError:
            continue
    if len(found) == 1:
        return found[0]
    if not found:
        raise FactorbenchError(f"this protocol renders {ref.generator} from outside data that factorbench never "
                               f"downloads, and no cached copy exists in {directory}: pass the data once with "
                               f"--source PATH (Python: source=PATH); `factorbench info {ref.generator}` says "
                               "where the data comes from")
    raise FactorbenchError(f"several cached {ref.generator} datasets match ({', '.join(map(str, found))}); "
                           "pass --source PATH to say which data to use")


def dataset_spec_params(ref: DatasetRef) -> dict[str, Any]:
    """The generator's full parameter dict for a reference (defaults filled in), as canonical JSON
    values (tuples become lists), the form a file's spec holds."""
    return json.loads(canonical_json(params_to_dict(generators.get(ref.generator, ref.params).params)))


def expected_rows(ref: DatasetRef, *, source: str | os.PathLike | None = None,
                  directory: str | os.PathLike | None = None) -> int:
    """How many images the dataset file of ``ref`` holds, without generating it."""
    if ref.needs_source and source is None:
        with load(_find_cached(ref, Path(directory) if directory is not None else data_dir())) as ds:
            return len(ds)
    return dataset_spec(ref, source).n


def prepare_dataset(ref: DatasetRef, *, source: str | os.PathLike | None = None, backend: str | None = None,
                    directory: str | os.PathLike | None = None, progress: bool = True,
                    verify_images: bool = False, workers: int = 1) -> Path:
    """The cached file of ``ref``: generated on first use, fully verified on first use and whenever it
    changed since (``verify_images=True``: always), checked on every use, with the reference's extra
    splits added. Returns its path; :func:`verified_hashes` gives the hashes of its data.

    ``backend`` picks the renderer of a 3D dataset when it is generated; a cached copy rendered by
    another backend is refused (use another cache folder to keep both). ``workers`` processes generate it
    (:func:`~factorbench.generators.write_dataset`; the same data as one)."""
    directory = Path(directory) if directory is not None else data_dir()
    if directory.exists() and not directory.is_dir():
        _ensure_data_dir(directory)  # raises the clear error
    if ref.needs_source and source is None:
        path = _find_cached(ref, directory)
        with load(path) as ds:
            spec = ds.spec
        gen = generators.get(ref.generator, spec.params)
    else:
        gen = _generator(ref, source, backend)
        spec = gen.spec(ref.seed, ref.n)
        path = directory / f"{ref.generator}-{spec.hash()[:16]}.h5"
    extra = _extra_splits(ref, spec)
    if not path.exists():
        _ensure_data_dir(directory)
        if progress:
            print(f"generating {ref.generator} ({spec.n} images) into {path} (first use; later runs reuse it)",
                  file=sys.stderr)
        building = path.with_name(path.name + ".building")  # renamed to path with every protocol's splits in
        if not building.exists():  # (an interrupted build resumes: write_dataset continues its .partial file)
            write_dataset(gen, building, seed=ref.seed, n=ref.n, progress=progress, workers=workers)
        for split in _splits_of_every_protocol(ref, spec):
            add_split(building, split, force=True)
        os.replace(building, path)
    with load(path) as ds:
        present = set(ds.split_names)
        renderer = str(ds.manifest.get("renderer", ""))
    if backend is not None and backend != "auto" and f" via {backend}" not in renderer:
        raise FactorbenchError(f"{path} was rendered by {renderer or 'another renderer'}, not the {backend} backend; "
                               "use another cache folder (FACTORBENCH_DATA) to keep copies of both")
    for split in extra:
        if not set(split.names) <= present:
            add_split(path, split)
    verified_hashes(path, force=verify_images, progress=progress)
    with load(path) as ds:
        _check(ds, gen, spec, extra)
    return path
