"""Export to Hugging Face ``datasets`` (the ``hf`` extra): a dataset or split as a ``datasets.Dataset`` of
rows ``{"image", "index", <factor>..., <factor>_class...}``, so a user of that library needs no glue;
``.to_parquet(path)`` then writes Parquet. Built with ``Dataset.from_generator``, which caches the Arrow
table under ``cache_dir`` (default: ``datasets``' own cache), keyed by the file's image hash and the rows."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from factorbench.generators.errors import FactorbenchError

if TYPE_CHECKING:
    from .dataset import Dataset, Subset

__all__ = ["to_hf"]

#: rows read from the file at a time
_BATCH = 256


def _rows(path: str, indices: Sequence[int], identity: str) -> Iterator[dict[str, Any]]:
    """The rows, read in batches (``identity``, the file's image hash, only keys the cache)."""
    from .dataset import Dataset

    with Dataset(path) as ds:
        names, classes = ds.factor_names, ds.factor_classes
        for start in range(0, len(indices), _BATCH):
            rows = np.asarray(indices[start:start + _BATCH], dtype=np.int64)
            images, factors = ds.images[rows], ds.factors[rows]
            grid = None if classes is None else classes[rows]
            for j, row in enumerate(rows.tolist()):
                image = images[j]
                item: dict[str, Any] = {"image": image[..., 0] if image.shape[-1] == 1 else image, "index": row}
                item.update({name: float(factors[j, k]) for k, name in enumerate(names)})
                if grid is not None:
                    item.update({f"{name}_class": int(grid[j, k]) for k, name in enumerate(names)})
                yield item


def to_hf(view: "Dataset | Subset", *, cache_dir: str | os.PathLike | None = None,
          keep_in_memory: bool = False) -> Any:
    """``view`` (a dataset or a split of one) as a ``datasets.Dataset``: ``image`` (a ``datasets.Image``,
    PIL when read), ``index`` (the row in the factorbench file), one float32 column per factor (its value)
    and, for grid datasets, one int64 column ``<factor>_class`` per factor (its grid class)."""
    try:
        import datasets
    except ImportError:
        raise FactorbenchError("the Hugging Face export needs the datasets package: pip install 'factorbench[hf]'") \
            from None
    from .dataset import Dataset

    dataset = view if isinstance(view, Dataset) else view.dataset
    indices = np.arange(len(dataset)) if isinstance(view, Dataset) else view.indices
    names = dataset.factor_names
    features = {"image": datasets.Image(), "index": datasets.Value("int64"),
                **{name: datasets.Value("float32") for name in names}}
    if dataset.factor_classes is not None:
        features.update({f"{name}_class": datasets.Value("int64") for name in names})
    identity = f"{dataset.manifest['spec_hash']}:{dataset.manifest['sha256']['images']}"
    info = datasets.DatasetInfo(description=f"factorbench {dataset.spec.generator} (spec {identity[:16]}), "
                                f"{len(indices)} rows: {getattr(view, 'name', 'all')}")
    return datasets.Dataset.from_generator(
        _rows, features=datasets.Features(features), cache_dir=None if cache_dir is None else str(cache_dir),
        keep_in_memory=keep_in_memory, info=info,
        # the rows as an array: datasets would split a list into one shard per element
        gen_kwargs={"path": str(dataset.path), "indices": np.asarray(indices, dtype=np.int64), "identity": identity})
