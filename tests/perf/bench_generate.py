"""Generation time, memory and file size of each dataset (the figures in DATASETS.md and the README).

For every registered dataset (or those named on the command line), writes the default file into a
temporary directory ``--repeats`` times, each in a fresh Python process (so no cache carries over),
with the progress bar off, and prints the median wall time, images/s, the file size and the peak
resident memory of the process. The time covers sampling, rendering, compression, hashing and the
atomic rename: everything ``factorbench generate NAME --out FILE`` does after start-up and imports.

Two reference runs in the same invocation put the figures in proportion:

- ``writer``: the same number of images of the same shape, all black, written by the same writer (the
  cost of compression, checksums and hashing alone); ``x writer`` is the dataset's time over it;
- ``--memory``: a 1/16 shard of the dataset; ``rss ratio`` is the full run's peak memory over the
  shard's (about 1 when memory does not grow with N);
- ``--workers W``: the same file written by W processes (``write_dataset(workers=W)``: shards rendered side
  by side, then joined by copying their compressed chunks); ``speedup`` is the one-process median over it.

Run from the repository root::

    python tests/perf/bench_generate.py                          # every dataset
    python tests/perf/bench_generate.py square arrow             # some of them
    python tests/perf/bench_generate.py dsprites --param variant=color --memory
    python tests/perf/bench_generate.py mpi3d-toy --workers 2 --repeats 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from factorbench.benchmark.environment import cpu_model_name
from factorbench.generators import get, list_datasets
from factorbench.generators.params import parse_param_assignments

ONE_RUN = """
import json, resource, sys, time
import numpy as np
from factorbench.generators import get, write_dataset
from factorbench.generators import writer
name, out, params, mode, shard = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
workers = int(sys.argv[6])
gen = get(name, params)
start = time.perf_counter()
if mode == "writer":  # the reference run: black images of the dataset's shape through the same writer
    spec = gen.spec()
    def source(a, b):
        values, classes = gen.sample_factors(spec, a, b)
        return values, classes, np.zeros((b - a, *spec.image_shape), np.uint8)
    writer._write(writer.Path(out), spec, source, "black images", any(f.is_grid for f in spec.factors),
                  force=False, shard=None, batch_size=writer.DEFAULT_BATCH_SIZE, progress=False, desc="")
else:
    write_dataset(gen, out, progress=False, shard=shard or None, workers=workers)
print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def measure(name: str, params: dict[str, str], repeats: int, workdir: Path, mode: str = "dataset",
            shard: str = "", workers: int = 1) -> tuple[float, int, int, int]:
    """(median seconds, images, file bytes, peak RSS bytes) of writing dataset ``name`` ``repeats`` times."""
    import json

    times, rss, size = [], 0, 0
    for r in range(repeats):
        out = workdir / f"{name}-{mode}-{r}.h5"
        run = subprocess.run([sys.executable, "-c", ONE_RUN, name, str(out), json.dumps(params), mode, shard,
                              str(workers)], check=True, capture_output=True, text=True)
        seconds, peak = run.stdout.strip().splitlines()[-1].split()
        times.append(float(seconds))
        rss = max(rss, int(peak))
        written = next(workdir.glob(f"{out.name}*"))
        size = written.stat().st_size
        written.unlink()
    gen = get(name, params)
    n = gen.full_size() if not shard else (lambda a, b: b - a)(*_rows(gen.full_size(), shard))
    return statistics.median(times), n, size, rss


def _rows(n: int, shard: str) -> tuple[int, int]:
    i, k = map(int, shard.split("/"))
    return n * i // k, n * (i + 1) // k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="datasets (default: all that need no outside data)")
    parser.add_argument("--param", action="append", metavar="KEY=VALUE", help="generator parameter (repeatable)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory", action="store_true", help="also write a 1/16 shard and compare peak memory")
    parser.add_argument("--workers", type=int, default=1, metavar="W",
                        help="also write the file with W processes and compare the time")
    args = parser.parse_args()
    params = parse_param_assignments(args.param)
    names = args.names or [n for n in list_datasets() if "source" not in get(n).options]
    print(f"{'dataset':<12} {'images':>9} {'median s':>9} {'images/s':>9} {'x writer':>9} {'file MB':>8} "
          f"{'bytes/img':>10} {'peak MB':>8}" + (f" {'rss ratio':>9}" if args.memory else "")
          + (f" {f'{args.workers}-proc s':>9} {'speedup':>8}" if args.workers > 1 else ""))
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            seconds, n, size, rss = measure(name, params, args.repeats, Path(tmp))
            writer_s, *_ = measure(name, params, 1, Path(tmp), mode="writer")
            line = (f"{name:<12} {n:>9} {seconds:>9.2f} {n / seconds:>9.0f} {seconds / writer_s:>9.2f} "
                    f"{size / 1e6:>8.1f} {size / n:>10.0f} {rss / 1e6:>8.0f}")
            if args.memory:
                *_, shard_rss = measure(name, params, 1, Path(tmp), shard="0/16")
                line += f" {rss / shard_rss:>9.2f}"
            if args.workers > 1:
                parallel_s, *_ = measure(name, params, args.repeats, Path(tmp), workers=args.workers)
                line += f" {parallel_s:>9.2f} {seconds / parallel_s:>8.2f}"
            print(line, flush=True)
    print(f"({cpu_model_name()}, {os.cpu_count()} cores, repeats {args.repeats}"
          + (f", params {params}" if params else "") + ")")


if __name__ == "__main__":
    main()
