"""Images per second through ``Dataset.to_torch()`` and a ``torch.utils.data.DataLoader`` (batch 64,
shuffled), with 0 and 2 workers: factorbench's view (``__getitems__``: one batched read per batch, the
HDF5 handle and image dataset kept per process) against the reference of one ``__getitem__`` read per
image (what ``to_torch`` did before 0.2), measured in the same run, on the same file.

    python tests/perf/bench_torch_loader.py                    # the square dataset (4,096 images), from the cache
    python tests/perf/bench_torch_loader.py --file teapot.h5 --batches 100

Each row: ``--batches`` batches after 3 untimed ones, median of ``--rounds`` rounds, the rows taking turns.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader

from factorbench.baselines.trainer import cpu_model_name
from factorbench.benchmark.cache import prepare_dataset
from factorbench.benchmark.dataset import load
from factorbench.benchmark.protocols import get_protocol


class PerItem(torch.utils.data.Dataset):
    """The reference: one image read (and one file lookup) per item, as ``to_torch`` was before."""

    def __init__(self, view: torch.utils.data.Dataset) -> None:
        self.view = view

    def __len__(self) -> int:
        return len(self.view)

    def __getitem__(self, i: int):
        row = int(self.view.indices[i])
        ds = self.view.dataset
        image = ds._h5()["images"][row]
        x = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))).float().div_(255.0)
        return x, torch.from_numpy(ds.factors[row].astype(np.float32))


def images_per_s(dataset: torch.utils.data.Dataset, workers: int, batches: int) -> float:
    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=workers,
                        generator=torch.Generator().manual_seed(0), persistent_workers=workers > 0)
    it = iter(loader)
    for _ in range(3):
        next(it)
    start = time.perf_counter()
    n = 0
    for _ in range(batches):
        x, _ = next(it)
        n += len(x)
    return n / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", help="a dataset file (default: the cached square dataset)")
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    path = args.file or prepare_dataset(get_protocol("square-lsbd-v1").dataset, progress=False)
    torch.set_num_threads(1)
    view = load(path).to_torch()
    print(f"# {cpu_model_name()}, torch {torch.__version__}, {path}: batch 64, {args.batches} batches, "
          f"median of {args.rounds} rounds")
    print("workers | to_torch (batched) img/s | per-item reference img/s | ratio")
    for workers in (0, 2):
        ours, ref = [], []
        for _ in range(args.rounds):
            ours.append(images_per_s(view, workers, args.batches))
            ref.append(images_per_s(PerItem(view), workers, args.batches))
        a, b = statistics.median(ours), statistics.median(ref)
        print(f"{workers} | {a:,.0f} | {b:,.0f} | {a / b:.1f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
