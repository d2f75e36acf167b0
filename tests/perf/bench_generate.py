"""Generation time and file size of each dataset (the figures in DATASETS.md and the README).

For every registered dataset (or those named on the command line), writes the default file into a
temporary directory ``--repeats`` times, each in a fresh Python process (so no cache carries over),
with the progress bar off, and prints the median wall time, images/s and the file size. The time
covers sampling, rendering, compression, hashing and the atomic rename: everything
``factorbench generate NAME --out FILE`` does after start-up and imports.

Run from the repository root::

    python tests/perf/bench_generate.py                 # every dataset
    python tests/perf/bench_generate.py square arrow    # some of them
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from factorbench.generators import get, list_datasets

ONE_RUN = """
import sys, time
from factorbench.generators import get, write_dataset
gen = get(sys.argv[1])
start = time.perf_counter()
write_dataset(gen, sys.argv[2], progress=False)
print(time.perf_counter() - start)
"""


def measure(name: str, repeats: int, workdir: Path) -> tuple[float, int, int]:
    """(median seconds, images, file bytes) of writing dataset ``name`` ``repeats`` times."""
    times, size = [], 0
    for r in range(repeats):
        out = workdir / f"{name}-{r}.h5"
        run = subprocess.run([sys.executable, "-c", ONE_RUN, name, str(out)], check=True, capture_output=True,
                             text=True)
        times.append(float(run.stdout.strip().splitlines()[-1]))
        size = out.stat().st_size
        out.unlink()
    return statistics.median(times), get(name).full_size(), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="datasets (default: all)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    names = args.names or list(list_datasets())
    print(f"{'dataset':<12} {'images':>8} {'median s':>9} {'images/s':>9} {'file MB':>8} {'bytes/img':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            seconds, n, size = measure(name, args.repeats, Path(tmp))
            print(f"{name:<12} {n:>8} {seconds:>9.2f} {n / seconds:>9.0f} {size / 1e6:>8.2f} {size / n:>10.0f}")
    print(f"(cpu count {os.cpu_count()}, repeats {args.repeats})")


if __name__ == "__main__":
    main()
