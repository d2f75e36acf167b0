"""Time loading a whole split of a dataset file into memory, as training does for a split that fits
(``baselines.data.TrainingData``): the reader's ``_gather_rows`` with one slice per run of consecutive
chunks (the default, at most ``GATHER_RUN_BYTES`` a slice) against one slice per chunk (how it read
before; ``run_rows`` = the chunk's rows), both in this process, on the same rows. The two arrays must be
equal; the script prints both times and their ratio.

Run from the repository root (the dataset is generated into the data cache first if it is not there)::

    python tests/perf/bench_split_load.py                       # dSprites, all 737,280 images
    python tests/perf/bench_split_load.py --dataset square      # a small set, for a quick look
    python tests/perf/bench_split_load.py --rows 100000         # the first 100,000 rows only
"""

from __future__ import annotations

import argparse
import time

import h5py
import numpy as np

from factorbench.baselines.data import resolve_dataset
from factorbench.benchmark.dataset import _gather_rows, gather_run_rows
from factorbench.benchmark.environment import cpu_model_name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="dsprites", help="a dataset name or file (default dsprites)")
    parser.add_argument("--rows", type=int, default=None, help="only the first ROWS rows (default: all)")
    args = parser.parse_args(argv)
    path = resolve_dataset(args.dataset, progress=False)  # the protocols' cached copy
    with h5py.File(path, "r") as f:
        images = f["images"]
        n = len(images) if args.rows is None else min(args.rows, len(images))
        rows = np.arange(n)
        chunk = images.chunks[0] if images.chunks else n
        timings = {}
        arrays = {}
        runs = gather_run_rows(images)
        for label, run_rows in (("one slice per chunk (before)", chunk), (f"runs of chunks (<= {runs} rows)", runs)):
            start = time.perf_counter()
            arrays[label] = _gather_rows(images, rows, run_rows=run_rows)
            timings[label] = time.perf_counter() - start
    before, after = timings.values()
    same = np.array_equal(*arrays.values())
    print(f"{args.dataset}: {n:,} rows of {path.name} ({chunk} row(s) a chunk), {cpu_model_name()}")
    for label, seconds in timings.items():
        print(f"  {label:<34} {seconds:8.1f} s  ({n / seconds:,.0f} rows/s)")
    print(f"  ratio (before / now): {before / after:.2f}x; arrays equal: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
