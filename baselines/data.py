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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from factorbench import generators
from factorbench.generators.errors import FactorbenchError

__all__ = ["DEFAULT_MEMORY_LIMIT", "EpochOrder", "TrainingData", "data_identity", "resolve_dataset", "split_identity"]

def _default_memory_limit() -> int:
    """A quarter of the machine's memory, at most 8 GiB, at least 1 GiB: the teapot's 2 GB training split
    is then held in memory on a 24 GiB machine (a batch gathered in about 0.15 ms instead of 5 ms read
    and decompressed by a reader thread)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 30
    return int(min(8 << 30, max(1 << 30, total // 4)))


#: splits larger than this many bytes of uint8 pixels are streamed from the file (same batches either way)
DEFAULT_MEMORY_LIMIT = _default_memory_limit()


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

    # the copy with the generator's default parameters first (dsprites, not its colour or noise variant)
    refs = sorted((p.dataset for p in PROTOCOLS.values() if p.dataset.generator == name), key=lambda r: bool(r.params))
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


def _split_view(ds: Any, split: str) -> Any:
    """The rows of ``split`` (or ``"all"``) of an open dataset, as the reader's :class:`Subset`."""
    if split == "all":
        return ds.subset(slice(None))
    if split not in ds.split_names:
        raise FactorbenchError(f"{ds.path} has no split {split!r}; its splits are "
                               f"{', '.join(ds.split_names) or '(none)'} (or use 'all')")
    return ds.split(split)


def data_identity(path: str | os.PathLike, split: str) -> dict[str, Any]:
    """:func:`split_identity` of a dataset file without reading its images (the run hash before training)."""
    from factorbench.benchmark.dataset import load

    with load(path) as ds:
        return split_identity(ds, split, len(_split_view(ds, split)))


class EpochOrder:
    """An endless sequence of epochs over ``n`` items, epoch ``e`` a permutation drawn from
    ``numpy.random.default_rng([*key, e])``: batch ``b`` of size ``B`` holds positions ``b*B .. b*B + B - 1``
    of that sequence, so any batch is a pure function of (key, b). The last two epoch orders are kept (a
    batch may straddle two epochs; drawing a 143k-item permutation every step would cost ~2 ms)."""

    def __init__(self, n: int, key: tuple[int, ...]) -> None:
        if n < 1:
            raise ValueError("an epoch order needs at least one item")
        self.n, self.key = n, tuple(int(k) for k in key)
        self._orders: dict[int, np.ndarray] = {}

    def permutation(self, epoch: int) -> np.ndarray:
        if epoch not in self._orders:
            if len(self._orders) >= 2:
                self._orders.pop(next(iter(self._orders)))
            self._orders[epoch] = np.random.default_rng([*self.key, epoch]).permutation(self.n)
        return self._orders[epoch]

    def batch(self, index: int, batch_size: int) -> np.ndarray:
        """Item indices (int64) of batch ``index``."""
        pos = np.arange(index * batch_size, (index + 1) * batch_size, dtype=np.int64)
        epochs, offsets = np.divmod(pos, self.n)
        out = np.empty(batch_size, dtype=np.int64)
        for epoch in np.unique(epochs):
            mask = epochs == epoch
            out[mask] = self.permutation(int(epoch))[offsets[mask]]
        return out


class TrainingData:
    """The images of ``split`` (a split name of the file, or ``"all"``) of a dataset file, with the factor
    values (and grid classes) of its rows for models that train on labels."""

    def __init__(self, path: str | os.PathLike, split: str = "train", *,
                 memory_limit: int = DEFAULT_MEMORY_LIMIT) -> None:
        from factorbench.benchmark.dataset import load

        self.path = Path(path)
        self._ds = load(self.path)
        ds = self._ds
        self._view = _split_view(ds, split)
        self.rows = self._view.indices
        if len(self.rows) == 0:
            raise FactorbenchError(f"split {split!r} of {self.path} is empty")
        self.split = split
        self._order: EpochOrder | None = None
        self.image_shape: tuple[int, int, int] = tuple(int(s) for s in ds.spec.image_shape)  # type: ignore[assignment]
        nbytes = len(self.rows) * int(np.prod(self.image_shape))
        self.in_memory = nbytes <= memory_limit
        self._images = self._view.images[:] if self.in_memory else None
        self.identity = split_identity(ds, split, len(self.rows))

    def __len__(self) -> int:
        return len(self.rows)

    def close(self) -> None:
        self._ds.close()

    @property
    def generator_name(self) -> str:
        return str(self._ds.spec.generator)

    @property
    def factor_specs(self) -> tuple[Any, ...]:
        """The dataset's factors (name, kind, domain), in column order."""
        return tuple(self._ds.spec.factors)

    @property
    def factors(self) -> np.ndarray:
        """(n, K) float64 factor values of the split's rows, in split order."""
        return self._view.factors

    @property
    def factor_classes(self) -> np.ndarray | None:
        """(n, K) int64 grid classes of the split's rows, or None for a dataset without a grid."""
        return self._view.factor_classes

    @property
    def images_in_memory(self) -> np.ndarray | None:
        """The split's uint8 images (n, H, W, C) when they are held in memory, else None (streamed)."""
        return self._images

    def batch_positions(self, step: int, batch_size: int, seed: int) -> np.ndarray:
        """Indices into the split of the batch of ``step`` (see the module docstring)."""
        if self._order is None or self._order.key != (seed,):
            self._order = EpochOrder(len(self.rows), (seed,))
        return self._order.batch(step, batch_size)

    def images_at(self, positions: np.ndarray) -> np.ndarray:
        """uint8 images (n, H, W, C) of the given indices into the split, in that order."""
        idx = np.asarray(positions, dtype=np.int64)
        if self._images is not None:
            return self._images[idx]
        return self._view.images[idx]  # the reader gathers any order chunk by chunk

    def batch(self, step: int, batch_size: int, seed: int) -> np.ndarray:
        """uint8 images (B, H, W, C) of the batch of ``step``."""
        return self.images_at(self.batch_positions(step, batch_size, seed))

    def batches(self, start: int, stop: int, batch_size: int, seed: int, *, read_ahead: int = 4) -> Iterator[np.ndarray]:
        """Batches of steps ``start .. stop - 1`` in order; streamed sets are read ahead by a thread."""
        return self.stream(lambda step: self.batch(step, batch_size, seed), start, stop, read_ahead=read_ahead)

    def stream(self, draw: Callable[[int], Any], start: int, stop: int, *, read_ahead: int = 4) -> Iterator[Any]:
        """``draw(step)`` for steps ``start .. stop - 1`` in order (``draw`` a pure function of the step that
        reads from this data); for a streamed split a thread draws ahead so that the model does not wait."""
        if self._images is not None:
            for step in range(start, stop):
                yield draw(step)
            return
        out: queue.Queue[Any] = queue.Queue(maxsize=read_ahead)
        done = threading.Event()

        def reader() -> None:
            try:
                for step in range(start, stop):
                    if done.is_set():
                        return
                    out.put(draw(step))
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
