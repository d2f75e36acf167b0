"""Time `factorbench leaderboard` with its plots drawn by one process and by ``--jobs`` processes, and built
again from a plot cache the first cached build filled, in one run.

    python tests/perf/bench_leaderboard.py                                   # square-lsbd-v1, 1 against 2
    python tests/perf/bench_leaderboard.py --protocol teapot-dci-v1 coil100-lsbd-v1 --jobs 4

Each build writes the whole site of the named protocols (pages and PNG plots) into a temporary folder;
prints wall seconds per build and the ratios. The sites are compared file by file (they must be equal).
Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def build(protocols: list[str], jobs: int, out: Path, cache: Path | None = None) -> float:
    from factorbench.benchmark.leaderboard import build_site

    t0 = time.perf_counter()
    build_site(out, protocols, jobs=jobs, plot_cache=cache)
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
        cache = Path(tmp) / "plot-cache"
        for run in ("cold", "warm"):  # --jobs N with a plot cache: filled, then read
            sites[run] = Path(tmp) / f"site-{run}"
            times[run] = build(args.protocol, args.jobs, sites[run], cache)
        files = [{p.relative_to(s): p.read_bytes() for p in s.rglob("*") if p.is_file()} for s in sites.values()]
        pngs = sum(p.suffix == ".png" for p in files[0])
        same = all(f == files[0] for f in files[1:])
        print(f"  {len(files[0])} files ({pngs} plots); the sites are {'equal' if same else 'DIFFERENT'}")
        for jobs in (1, args.jobs):
            print(f"  --jobs {jobs}: {times[jobs]:6.1f} s")
        for run in ("cold", "warm"):
            print(f"  --jobs {args.jobs}, plot cache {run}: {times[run]:6.1f} s")
        print(f"  --jobs 1 / --jobs {args.jobs}: {times[1] / times[args.jobs]:.2f}x; "
              f"cold / warm plot cache: {times['cold'] / times['warm']:.2f}x")


if __name__ == "__main__":
    main()
