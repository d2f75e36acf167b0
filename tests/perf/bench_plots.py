"""Time the plots of a model page drawn as ``plot_result`` draws them (tight layout computed once, no layout
engine left on the figure) against the reference, ``Figure.tight_layout`` alone (which leaves a
placeholder engine, so ``savefig`` measures every text once more), in one run, alternating.

    python tests/perf/bench_plots.py                                   # dsprites-dependent-v2, 2 models
    python tests/perf/bench_plots.py --protocol square-lsbd-v1 --models 4 --repeats 3

Prints wall seconds per build and the ratio; the PNG files of the two ways must be equal byte for byte.
Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from pathlib import Path


def draw(runs: list, once: bool) -> tuple[float, dict[str, str]]:
    import factorbench.benchmark.plots as plots

    lay_out = plots._lay_out_once
    if not once:
        plots._lay_out_once = lambda fig: fig.tight_layout()  # the reference: the engine stays
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            for i, run in enumerate(runs):
                plots.plot_result(run, Path(tmp) / str(i))
            wall = time.perf_counter() - t0
            return wall, {str(p.relative_to(tmp)): hashlib.sha256(p.read_bytes()).hexdigest()
                          for p in sorted(Path(tmp).rglob("*.png"))}
    finally:
        plots._lay_out_once = lay_out


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    from factorbench.benchmark.environment import cpu_model_name
    from factorbench.benchmark.results import reference_results

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--protocol", default="dsprites-dependent-v2")
    ap.add_argument("--models", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    runs = [model_runs[0] for model_runs in list(reference_results(args.protocol).values())[:args.models]]
    print(f"{args.protocol}, {len(runs)} models; {cpu_model_name()}, {os.cpu_count()} cores")
    draw(runs[:1], True)  # imports and font cache
    walls: dict[bool, list[float]] = {True: [], False: []}
    files: dict[bool, dict[str, str]] = {}
    for _ in range(args.repeats):
        for once in (False, True):
            wall, files[once] = draw(runs, once)
            walls[once].append(wall)
    print(f"  {len(files[True])} plots; the files are {'equal' if files[True] == files[False] else 'DIFFERENT'}")
    for once, label in ((False, "tight_layout, engine left (reference)"), (True, "laid out once (plot_result)")):
        print(f"  {label}: " + ", ".join(f"{w:.2f} s" for w in walls[once]))
    print(f"  reference / plot_result: {min(walls[False]) / min(walls[True]):.2f}x (best of {args.repeats} each)")


if __name__ == "__main__":
    main()
