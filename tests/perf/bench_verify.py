"""Verification time of dataset files: every chunk of the images read through HDF5 one block after
another (the reference) against the stored chunks checked (fletcher32) and inflated in threads
(``fileformat.sha256_rows``, what ``verify`` and the writer use). Both compute the same hash, asserted;
``speedup`` is the HDF5 median over the threaded one, measured in the same run, the two taking turns.

Run from the repository root, on files already generated (the cache's, for instance)::

    python tests/perf/bench_verify.py ~/.cache/factorbench/shapes3d-*.h5 --repeats 3
    python tests/perf/bench_verify.py --generate square dsprites     # writes them into a temporary folder
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import h5py

from factorbench.benchmark.environment import cpu_model_name, usable_cores
from factorbench.generators import fileformat as ff
from factorbench.generators import get, write_dataset


def _timed(path: Path, inflate: bool) -> tuple[float, str]:
    with h5py.File(path, "r") as f:
        start = time.perf_counter()
        digest = ff.sha256_rows(f["images"], inflate=inflate)
        return time.perf_counter() - start, digest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="dataset files (.h5) to hash")
    parser.add_argument("--generate", nargs="*", default=[], metavar="NAME", help="datasets to write first")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        files = list(args.files) + [write_dataset(get(name), Path(tmp) / f"{name}.h5", progress=False)
                                    for name in args.generate]
        if not files:
            parser.error("give dataset files or --generate NAME")
        print(f"({cpu_model_name()}, {usable_cores()} usable cores, {ff.HASH_THREADS} hash threads, median of "
              f"{args.repeats})")
        print("| file | images | HDF5 reads s | threaded s | speedup |")
        print("|---|---|---|---|---|")
        for path in files:
            with h5py.File(path, "r") as f:
                n = f["images"].shape[0]
            serial, threaded = [], []
            for _ in range(args.repeats):
                (t_serial, a), (t_threaded, b) = _timed(path, False), _timed(path, True)
                if a != b:
                    print(f"{path}: the two hashes differ", file=sys.stderr)
                    return 1
                serial.append(t_serial)
                threaded.append(t_threaded)
            s, t = statistics.median(serial), statistics.median(threaded)
            print(f"| {path.name} | {n:,} | {s:.1f} | {t:.1f} | {s / t:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
