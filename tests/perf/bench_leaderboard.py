"""Time `factorbench leaderboard` with its plots drawn by one process and by ``--jobs`` processes, in one run.

    python tests/perf/bench_leaderboard.py                                   # square-lsbd-v1, 1 against 2
    python tests/perf/bench_leaderboard.py --protocol teapot-dci-v1 coil100-lsbd-v1 --jobs 4

Each build writes the whole site of the named protocols (pages and PNG plots) into a temporary folder;
prints wall seconds per build and the ratio. The sites are compared file by file (they must be equal).
Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def build(protocols: list[str], jobs: int, out: Path) -> float:
    from factorbench.benchmark.leaderboard import build_site

    t0 = time.perf_counter()
    build_site(out, protocols, jobs=jobs)
    return time.perf_counter() - t0


def main() -> None:
    from factorbench.benchmark.environment import cpu_model_name

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--protocol", nargs="+", default=["square-lsbd-v1"])
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    print(f"{', '.join(args.protocol)}; {cpu_model_name()}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        times, sites = {}, {}
        for jobs in (1, args.jobs):
            sites[jobs] = Path(tmp) / f"site{jobs}"
            times[jobs] = build(args.protocol, jobs, sites[jobs])
        files = [{p.relative_to(s): p.read_bytes() for p in s.rglob("*") if p.is_file()} for s in sites.values()]
        pngs = sum(p.suffix == ".png" for p in files[0])
        print(f"  {len(files[0])} files ({pngs} plots); the sites are {'equal' if files[0] == files[1] else 'DIFFERENT'}")
        for jobs, wall in times.items():
            print(f"  --jobs {jobs}: {wall:6.1f} s")
        print(f"  --jobs 1 / --jobs {args.jobs}: {times[1] / times[args.jobs]:.2f}x")


if __name__ == "__main__":
    main()
