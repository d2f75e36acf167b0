"""Training data: the images of one split of a dataset file, as seeded batches drawn from (seed, step).

The batch of step ``s`` holds positions ``s*B .. s*B + B - 1`` of an endless sequence of epochs, each
epoch a permutation of the split drawn from ``numpy.random.default_rng([seed, epoch])``; so a resumed
run needs no sampler state and sees exactly the batches an uninterrupted run sees. Images are held in
memory as uint8 when the split fits under ``memory_limit`` bytes (the 4,096-image sets) and read from
the HDF5 file otherwise (the 200,000-image teapot), a background thread reading ahead so that the
model does not wait for the disk.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from factorbench import generators
from factorbench.generators.errors import FactorbenchError

__all__ = ["DEFAULT_MEMORY_LIMIT", "TrainingData", "data_identity", "resolve_dataset", "split_identity"]

#: splits larger than this many bytes of uint8 pixels are streamed from the file
DEFAULT_MEMORY_LIMIT = 1 << 30


def resolve_dataset(dataset: str | os.PathLike, *, source: str | os.PathLike | None = None,
                    progress: bool = True) -> Path:
    """A dataset file: ``dataset`` itself if it is a file, else the protocol cache's copy of the dataset of
    that name (the copy the protocols evaluate on; generated on first use)."""
    path = Path(dataset)
    if path.is_file():
        return path
    name = str(dataset)
    if name not in generators.list_datasets():
        raise FactorbenchError(f"--dataset {name!r} is neither a file nor a dataset name; give a dataset file or "
                               f"one of {', '.join(generators.list_datasets())}")
    from factorbench.benchmark.cache import prepare_dataset
    from factorbench.benchmark.protocols import PROTOCOLS
    from factorbench.benchmark.protocols.base import DatasetRef

    refs = [p.dataset for p in PROTOCOLS.values() if p.dataset.generator == name]
    ref = DatasetRef(name, refs[0].params, refs[0].seed, refs[0].n, needs_source=refs[0].needs_source) if refs \
        else DatasetRef(name)
    return prepare_dataset(ref, source=source, progress=progress)


def split_identity(ds: Any, split: str, n: int) -> dict[str, Any]:
    """What a training run records of its data (it enters the run hash): generator, spec hash, image and
    split hashes, split name, size and image shape."""
    identity = {
        "generator": ds.spec.generator, "generator_version": ds.spec.version, "spec_hash": ds.spec.hash(),
        "images_sha256": ds.manifest["sha256"]["images"], "split": split, "n": int(n),
        "image_shape": [int(s) for s in ds.spec.image_shape],
    }
    if split != "all":
        identity["split_sha256"] = ds.manifest["sha256"].get(f"splits/{split}", "")
    return identity


def data_identity(path: str | os.PathLike, split: str) -> dict[str, Any]:
    """:func:`split_identity` of a dataset file without reading its images (the run hash before training)."""
    from factorbench.benchmark.dataset import load

    with load(path) as ds:
        if split == "all":
            n = len(ds)
        elif split in ds.split_names:
            n = len(ds.split_indices(split))
        else:
            raise FactorbenchError(f"{path} has no split {split!r}; its splits are "
                                   f"{', '.join(ds.split_names) or '(none)'} (or use 'all')")
        return split_identity(ds, split, n)


class TrainingData:
    """The images of ``split`` (a split name of the file, or ``"all"``) of a dataset file."""

    def __init__(self, path: str | os.PathLike, split: str = "train", *,
                 memory_limit: int = DEFAULT_MEMORY_LIMIT) -> None:
        from factorbench.benchmark.dataset import load

        self.path = Path(path)
        self._ds = load(self.path)
        ds = self._ds
        if split == "all":
            self.rows = np.arange(len(ds))
        elif split in ds.split_names:
            self.rows = np.sort(ds.split_indices(split)).astype(np.int64)
        else:
            raise FactorbenchError(f"{self.path} has no split {split!r}; its splits are "
                                   f"{', '.join(ds.split_names) or '(none)'} (or use 'all')")
        if len(self.rows) == 0:
            raise FactorbenchError(f"split {split!r} of {self.path} is empty")
        self.split = split
        self._orders: dict[tuple[int, int], np.ndarray] = {}
        self.image_shape: tuple[int, int, int] = tuple(int(s) for s in ds.spec.image_shape)  # type: ignore[assignment]
        nbytes = len(self.rows) * int(np.prod(self.image_shape))
        self.in_memory = nbytes <= memory_limit
        self._images = ds.images[self.rows] if self.in_memory else None
        self.identity = split_identity(ds, split, len(self.rows))

    def __len__(self) -> int:
        return len(self.rows)

    def close(self) -> None:
        self._ds.close()

    def batch_positions(self, step: int, batch_size: int, seed: int) -> np.ndarray:
        """Indices into the split of the batch of ``step`` (see the module docstring)."""
        n = len(self.rows)
        pos = np.arange(step * batch_size, (step + 1) * batch_size, dtype=np.int64)
        epochs, offsets = np.divmod(pos, n)
        out = np.empty(batch_size, dtype=np.int64)
        for epoch in np.unique(epochs):
            mask = epochs == epoch
            out[mask] = self._permutation(seed, int(epoch))[offsets[mask]]
        return out

    def _permutation(self, seed: int, epoch: int) -> np.ndarray:
        """The order of ``epoch`` (the last two are kept: a batch may straddle two epochs)."""
        key = (seed, epoch)
        if key not in self._orders:
            if len(self._orders) >= 2:
                self._orders.pop(next(iter(self._orders)))
            self._orders[key] = np.random.default_rng([seed, epoch]).permutation(len(self.rows))
        return self._orders[key]

    def batch(self, step: int, batch_size: int, seed: int) -> np.ndarray:
        """uint8 images (B, H, W, C) of the batch of ``step``."""
        idx = self.batch_positions(step, batch_size, seed)
        if self._images is not None:
            return self._images[idx]
        order = np.argsort(idx, kind="stable")
        images = np.empty((batch_size, *self.image_shape), dtype=np.uint8)
        images[order] = self._ds.images[self.rows[idx[order]]]
        return images

    def batches(self, start: int, stop: int, batch_size: int, seed: int, *, read_ahead: int = 4) -> Iterator[np.ndarray]:
        """Batches of steps ``start .. stop - 1`` in order; streamed sets are read ahead by a thread."""
        if self._images is not None:
            for step in range(start, stop):
                yield self.batch(step, batch_size, seed)
            return
        out: queue.Queue[Any] = queue.Queue(maxsize=read_ahead)
        done = threading.Event()

        def reader() -> None:
            try:
                for step in range(start, stop):
                    if done.is_set():
                        return
                    out.put(self.batch(step, batch_size, seed))
            except BaseException as exc:  # handed to the consumer
                out.put(exc)

        thread = threading.Thread(target=reader, name="factorbench-batches", daemon=True)
        thread.start()
        try:
            for _ in range(start, stop):
                item = out.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            done.set()
            while thread.is_alive():
                try:
                    out.get_nowait()
                except queue.Empty:
                    thread.join(0.01)
