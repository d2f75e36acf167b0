"""The data cache: datasets a protocol needs are generated on first use, then checked on every use.

Files live in ``$FACTORBENCH_DATA`` (default ``$XDG_CACHE_HOME/factorbench``, i.e.
``~/.cache/factorbench``), one file per dataset spec, named ``<generator>-<spec hash[:16]>.h5``.
Generation shows a progress bar, resumes after an interruption (the writer keeps a ``.partial``
file) and ends with a full :func:`~factorbench.benchmark.verify.verify` (every content hash). Every
later use checks, cheaply and exactly, that the file's spec hash is the protocol's, that its factor
values equal the ones the spec defines and that each split's indices equal the ones its split spec
assigns; ``verify_images=True`` re-hashes the images against the manifest as well.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from factorbench import generators
from factorbench.generators.errors import FactorbenchError
from factorbench.generators.params import params_to_dict
from factorbench.generators.presets import default_partition, resolve_split
from factorbench.generators.spec import DatasetSpec, canonical_json
from factorbench.generators.splits import SplitSpec, split_from_dict
from factorbench.generators.writer import add_split, write_dataset

from .dataset import Dataset, load
from .protocols.base import DatasetRef
from .verify import verify

__all__ = ["data_dir", "dataset_spec", "prepare_dataset"]


def data_dir() -> Path:
    """Where protocol datasets are cached: ``$FACTORBENCH_DATA``, else ``$XDG_CACHE_HOME/factorbench``."""
    if os.environ.get("FACTORBENCH_DATA"):
        return Path(os.environ["FACTORBENCH_DATA"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "factorbench"


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


def _extra_splits(ref: DatasetRef, spec: DatasetSpec) -> list[SplitSpec]:
    partition = default_partition(spec.splits, spec.seed)
    return [resolve_split(name, spec.factors, partition) for name in ref.extra_splits]


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


def prepare_dataset(ref: DatasetRef, *, source: str | os.PathLike | None = None, backend: str | None = None,
                    directory: str | os.PathLike | None = None, progress: bool = True,
                    verify_images: bool = False) -> Path:
    """The cached file of ``ref``: generated (and fully verified) on first use, checked on every use,
    with the reference's extra splits added. Returns its path."""
    directory = Path(directory) if directory is not None else data_dir()
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
        directory.mkdir(parents=True, exist_ok=True)
        if progress:
            print(f"generating {ref.generator} ({spec.n} images) into {path} (first use; later runs reuse it)")
        write_dataset(gen, path, seed=ref.seed, n=ref.n, progress=progress)
        report = verify(path)
        if not report.ok:
            raise FactorbenchError(f"{path} failed verification right after generation: {report.problems}")
    elif verify_images:
        report = verify(path)
        if not report.ok:
            raise FactorbenchError(f"{path} failed verification ({'; '.join(report.problems)}); delete it and run again")
    with load(path) as ds:
        present = set(ds.split_names)
    for split in extra:
        if not set(split.names) <= present:
            add_split(path, split)
    with load(path) as ds:
        _check(ds, gen, spec, extra)
    return path
