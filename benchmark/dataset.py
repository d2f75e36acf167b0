"""Reading dataset files: lazy, chunked image access, factors, splits and subset views."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np

from factorbench.generators import fileformat as ff
from factorbench.generators.errors import FactorbenchError
from factorbench.generators.spec import DatasetSpec
from factorbench.generators.splits import FactorTable

Index = int | slice | np.ndarray | list[int]


def _rows_of(key: Index, n: int) -> np.ndarray | slice | int:
    """Normalise an index over rows: int (negative allowed), slice, or integer / boolean array."""
    if isinstance(key, (int, np.integer)):
        i = int(key)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range for {n} samples")
        return i % n
    if isinstance(key, slice):
        # h5py reads forward slices only; other steps become index arrays
        return key if key.step in (None, 1) else np.arange(n)[key]
    arr = np.asarray(key)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise IndexError(f"boolean index must have shape ({n},), got {arr.shape}")
        return np.flatnonzero(arr)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise IndexError(f"index arrays must hold integers or booleans, got {arr.dtype}")
    arr = arr.astype(np.int64).reshape(-1)
    if arr.size and (arr.min() < -n or arr.max() >= n):
        raise IndexError(f"index out of range for {n} samples")
    return np.where(arr < 0, arr + n, arr)


#: the most bytes one slice of :func:`_gather_rows` reads where the rows asked for run on without a gap
GATHER_RUN_BYTES = 32 * 2**20


def gather_run_rows(ds: h5py.Dataset) -> int:
    """Rows of ``ds`` in :data:`GATHER_RUN_BYTES` (at least one): the most one slice of a run reads, so that a
    run's temporary block stays small whatever the image size (8,192 rows of dSprites, 170 of 256 x 256 x 3)."""
    row_bytes = int(np.prod(ds.shape[1:], dtype=np.int64)) * np.dtype(ds.dtype).itemsize
    return max(1, GATHER_RUN_BYTES // max(1, row_bytes))


def _gather_rows(ds: h5py.Dataset, rows: np.ndarray, run_rows: int | None = None) -> np.ndarray:
    """Rows in any order (repeats allowed), reading each needed chunk once, with one slice per run of
    consecutive needed chunks (at most ``run_rows`` rows a slice, default :func:`gather_run_rows`, within
    blocks aligned to it).

    h5py's own fancy indexing on chunked data costs about 1 ms per row (about 90 ms per batch of 64,
    whatever the chunking); slicing chunk by chunk reads a random batch of 64 in 2-3 ms with one image
    per chunk (``python tests/perf/bench_storage.py``). A whole split read chunk by chunk paid h5py's call
    overhead per image (dSprites' 737,280 images: 85 s on one core of the AMD EPYC); runs of chunks are
    read with one call each (40-43 s, ``python tests/perf/bench_split_load.py``), leaving HDF5's own
    per-chunk cost.
    """
    out = np.empty((len(rows), *ds.shape[1:]), dtype=ds.dtype)
    if len(rows) == 0:
        return out
    order = np.argsort(rows, kind="stable")
    sorted_rows = rows[order]
    chunk = ds.chunks[0] if ds.chunks else len(ds)
    chunk_ids = sorted_rows // chunk
    blocks = chunk_ids // max(1, (run_rows or gather_run_rows(ds)) // chunk)
    # a new slice where a needed chunk does not follow the last one read, or a new aligned block begins
    cuts = np.flatnonzero((np.diff(chunk_ids) > 1) | (np.diff(blocks) != 0)) + 1
    for group in np.split(np.arange(len(sorted_rows)), cuts):
        lo, hi = int(sorted_rows[group[0]]), int(sorted_rows[group[-1]]) + 1
        block = ds[lo:hi]
        out[order[group]] = block[sorted_rows[group] - lo]
    return out


class ImageArray:
    """Lazy view of the images: indexing reads only the chunks it needs.

    Supports ``images[i]``, ``images[a:b]`` and fancy indexing with any order and repeats
    (``images[[5, 1, 5]]``), returning uint8 arrays (…, H, W, C).
    """

    def __init__(self, dataset: "Dataset", rows: np.ndarray | None = None) -> None:
        self._dataset = dataset
        self._rows = rows  # None: all rows of the file

    def __len__(self) -> int:
        return len(self._rows) if self._rows is not None else self._dataset.num_samples_in_file

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self), *self._dataset.spec.image_shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.uint8)

    def __getitem__(self, key: Index) -> np.ndarray:
        rows = _rows_of(key, len(self))
        if self._rows is not None:  # a subset view: map to file rows
            sel = self._rows[rows]
            return self._dataset._read_images(sel)
        return self._dataset._read_images(rows)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[:]
        return out if dtype is None else out.astype(dtype)

    def __iter__(self):
        for a in range(0, len(self), ff.READ_BLOCK_ROWS):
            yield from self[a:a + ff.READ_BLOCK_ROWS]


class _Table:
    """Shared accessors of a dataset and its subset views."""

    spec: DatasetSpec
    indices: np.ndarray | None

    @property
    def factor_names(self) -> tuple[str, ...]:
        return self.spec.factor_names

    @property
    def factor_kinds(self) -> tuple[str, ...]:
        return tuple(f.kind for f in self.spec.factors)


class Dataset(_Table):
    """A dataset file opened for reading (see :func:`load`). Usable as a context manager."""

    indices = None

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._file: h5py.File | None = None
        self._pid = -1
        f = self._h5()
        self.spec, self.manifest = ff.read_header(f, str(self.path))
        self.num_samples_in_file = int(f["images"].shape[0])
        if self.num_samples_in_file != self.spec.n:
            raise FactorbenchError(f"{self.path}: holds {self.num_samples_in_file} images but its spec says "
                                   f"{self.spec.n}; the file is corrupted: regenerate it")
        self._factors: np.ndarray | None = None
        self._classes: np.ndarray | None = None
        self._images: tuple[h5py.File, h5py.Dataset] | None = None

    def _h5(self) -> h5py.File:
        # Reopen after a fork (e.g. in DataLoader workers): HDF5 handles must not cross processes.
        if self._file is None or self._pid != os.getpid():
            self._file = ff.open_h5(str(self.path))
            self._pid = os.getpid()
        return self._file

    def close(self) -> None:
        if self._file is not None and self._pid == os.getpid():
            self._file.close()
        self._file = None
        self._images = None

    def __enter__(self) -> "Dataset":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_file"], state["_pid"], state["_images"] = None, -1, None
        return state

    def __len__(self) -> int:
        return self.spec.n

    def __repr__(self) -> str:
        return f"Dataset({str(self.path)!r}, {self.spec.generator} v{self.spec.version}, n={len(self)})"

    # -- arrays --------------------------------------------------------------------------------
    @property
    def images(self) -> ImageArray:
        return ImageArray(self)

    def _images_dataset(self) -> h5py.Dataset:
        """The file's ``images`` dataset, looked up once per process (a lookup per read cost a third of a
        per-image loader's time)."""
        f = self._h5()
        if self._images is None or self._images[0] is not f:
            self._images = (f, f["images"])
        return self._images[1]

    def _read_images(self, rows: np.ndarray | slice | int) -> np.ndarray:
        ds = self._images_dataset()
        try:
            if not isinstance(rows, np.ndarray):
                return ds[rows]
            return _gather_rows(ds, rows)
        except OSError as exc:
            raise FactorbenchError(f"{self.path}: image data cannot be read ({exc}); the file is corrupted: "
                                   "run `factorbench verify` and regenerate it") from None

    @property
    def factors(self) -> np.ndarray:
        """(N, K) float64 factor values (read once, then cached)."""
        if self._factors is None:
            self._factors = self._h5()["factors"][:]
            self._factors.setflags(write=False)
        return self._factors

    @property
    def factor_classes(self) -> np.ndarray | None:
        """(N, K) int64 grid class of each factor, or None for datasets without grid factors."""
        if self._classes is None and "factor_classes" in self._h5():
            self._classes = self._h5()["factor_classes"][:]
            self._classes.setflags(write=False)
        return self._classes

    # -- splits --------------------------------------------------------------------------------
    @property
    def split_names(self) -> tuple[str, ...]:
        return tuple(sorted(self._h5().get("splits", {})))

    def split_indices(self, name: str) -> np.ndarray:
        """Sorted int64 sample indices of split ``name`` (correlated training sets, drawn with replacement,
        may repeat an index)."""
        if not isinstance(name, str):
            raise FactorbenchError(f"a split is named by a string, got {name!r}; this file's splits are: "
                                   f"{', '.join(self.split_names) or '(none)'}")
        splits = self._h5().get("splits", {})
        if name not in splits:
            raise FactorbenchError(f"{self.path} has no split {name!r}; its splits are: "
                                   f"{', '.join(self.split_names) or '(none)'}")
        return splits[name][:]

    def split(self, name: str) -> "Subset":
        """A view of split ``name`` with the same accessors (images, factors, ...)."""
        return Subset(self, self.split_indices(name), name)

    def subset(self, indices: Index) -> "Subset":
        rows = _rows_of(indices, len(self))
        rows = np.arange(len(self))[rows] if not isinstance(rows, np.ndarray) else rows
        return Subset(self, np.atleast_1d(rows), "subset")

    def factor_table(self) -> FactorTable:
        """Factor values, classes and factor descriptions, as split specs see them."""
        return FactorTable(self.factors, self.factor_classes, self.spec.factors)

    @property
    def info(self) -> dict[str, Any]:
        """Spec, manifest and split sizes, as plain JSON-ready data."""
        return {
            "path": str(self.path),
            "spec": self.spec.to_dict(),
            "spec_hash": self.spec.hash(),
            "manifest": self.manifest,
            "splits": {name: int(self._h5()["splits"][name].shape[0]) for name in self.split_names},
        }

    def to_torch(self, split: str | None = None, transform: Callable[[np.ndarray], Any] | None = None,
                 target_transform: Callable[[Any], Any] | None = None, target: str = "factors"):
        """A ``torch.utils.data.Dataset`` of (image: float32 tensor (C, H, W) in [0, 1], or ``transform`` of the
        uint8 (H, W, C) array; target: float32 tensor (K,) of factor values, or with ``target="classes"`` an
        int64 tensor (K,) of their grid classes, or ``target_transform`` of it), read a batch at a time by a
        ``DataLoader``."""
        view = self.split(split) if split else self.subset(slice(None))
        return view.to_torch(transform, target_transform, target)

    def to_hf(self, split: str | None = None, *, cache_dir: str | os.PathLike | None = None,
              keep_in_memory: bool = False) -> Any:
        """The dataset (or ``split``) as a Hugging Face ``datasets.Dataset`` (:func:`factorbench.benchmark.hf.to_hf`;
        needs the ``hf`` extra); ``.to_parquet(path)`` writes it as Parquet."""
        from .hf import to_hf

        return to_hf(self.split(split) if split else self, cache_dir=cache_dir, keep_in_memory=keep_in_memory)


class Subset(_Table):
    """Rows ``indices`` of a dataset (a split or any selection), read lazily from the same file."""

    def __init__(self, dataset: Dataset, indices: np.ndarray, name: str) -> None:
        self.dataset = dataset
        self.indices = np.asarray(indices, dtype=np.int64)
        self.name = name
        self.spec = dataset.spec

    def __len__(self) -> int:
        return len(self.indices)

    def __repr__(self) -> str:
        return f"Subset({self.name!r} of {self.dataset!r}, n={len(self)})"

    @property
    def images(self) -> ImageArray:
        return ImageArray(self.dataset, self.indices)

    @property
    def factors(self) -> np.ndarray:
        return self.dataset.factors[self.indices]

    @property
    def factor_classes(self) -> np.ndarray | None:
        c = self.dataset.factor_classes
        return None if c is None else c[self.indices]

    def to_torch(self, transform: Callable[[np.ndarray], Any] | None = None,
                 target_transform: Callable[[Any], Any] | None = None, target: str = "factors"):
        from ._torch import TorchDataset  # torch is optional: import it only here

        return TorchDataset(self.dataset, self.indices, transform, target_transform, target)

    def to_hf(self, *, cache_dir: str | os.PathLike | None = None, keep_in_memory: bool = False) -> Any:
        """These rows as a Hugging Face ``datasets.Dataset`` (:func:`factorbench.benchmark.hf.to_hf`)."""
        from .hf import to_hf

        return to_hf(self, cache_dir=cache_dir, keep_in_memory=keep_in_memory)


def load(path: str | os.PathLike) -> Dataset:
    """Open a dataset file written by ``factorbench generate``."""
    return Dataset(path)
