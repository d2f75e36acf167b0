"""Renderer throughput and agreement on teapot scenes: gl vs cpu vs pyrender, in one run.

Renders the teapot dataset's scenes (64 x 64, the dataset's lighting and camera, i.i.d. factors from
the dataset's own sampler) with every backend available here. The backends take turns, round after
round, on the same scenes (``--rounds``), so that a change in the machine's speed during the run (a
shared machine's neighbours) falls on all of them; the table gives the median images/s over the rounds
and the median of the per-round ratios to pyrender (the reference renderer). Agreement, on the same
scenes: each backend's mean absolute difference per channel from the cpu backend (in 1/255) and the
fraction of pixel values within 8/255. Antialiasing: 4 samples per pixel (the dataset default) and 1;
tessellation: the dataset default (``subdivisions`` 0: 8 x 8 cells per patch at 64 x 64, 4,032 triangles)
and 4 x 4 (1,008 triangles), to show how each backend's speed follows the triangle count.

Run from the repository root::

    python tests/perf/bench_render.py               # gl: 2,048 images a round, cpu and pyrender: 200
    python tests/perf/bench_render.py --rounds 9 --gl-n 4096
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from factorbench.generators import FactorbenchError, get
from factorbench.generators.render import backend_class

BATCH = 512


def timed_render(gen: object, values: np.ndarray) -> tuple[np.ndarray, float]:
    start = time.perf_counter()
    images = np.concatenate([gen.render(values[a:a + BATCH]) for a in range(0, len(values), BATCH)])
    return images, len(values) / (time.perf_counter() - start)


def compare(available: list[str], values: np.ndarray, params: dict[str, int], args: argparse.Namespace) -> None:
    gens = {b: get("teapot", params, backend=b) for b in available}
    speeds: dict[str, list[float]] = {b: [] for b in available}
    images: dict[str, np.ndarray] = {}
    for b, gen in list(gens.items()):
        try:
            gen.render(values[:BATCH if b == "gl" else 8])  # warm-up: context, mesh upload, targets
        except FactorbenchError as exc:
            print(f"  {b}: {exc}")
            del gens[b]
    for r in range(args.rounds):
        for b, gen in gens.items():
            if b == "cpu" and r > 0:
                continue  # slow, and not the reference: one round
            n = args.gl_n if b == "gl" else args.n
            imgs, ips = timed_render(gen, values[:n])
            speeds[b].append(ips)
            images.setdefault(b, imgs[:args.n])
    label = ", ".join(f"{k} {v}" for k, v in params.items())
    print(f"\n{label}")
    print(f"{'backend':<10} {'images/s':>9} {'x pyrender':>11} {'mean |diff| vs cpu':>19} {'within 8/255':>13}")
    for b in gens:
        ips = float(np.median(speeds[b]))
        if "pyrender" in gens and b != "cpu":
            ratio = f"{np.median(np.array(speeds[b]) / np.array(speeds['pyrender'])):.1f}"
        elif "pyrender" in gens:
            ratio = f"{ips / np.median(speeds['pyrender']):.1f}"
        else:
            ratio = "n/a"
        if "cpu" in images:
            diff = np.abs(images[b].astype(int) - images["cpu"])
            agree = f"{diff.mean():19.3f} {100 * (diff <= 8).mean():12.3f}%"
        else:
            agree = f"{'n/a':>19} {'n/a':>13}"
        print(f"{b:<10} {ips:9.0f} {ratio:>11} {agree}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gl-n", type=int, default=2048, help="images for the gl backend, each round")
    parser.add_argument("--n", type=int, default=200, help="images for cpu and pyrender (and agreement)")
    parser.add_argument("--rounds", type=int, default=5, help="turns of every backend (medians are reported)")
    args = parser.parse_args()
    gen = get("teapot")
    n = max(args.gl_n, args.n)
    values, _ = gen.sample_factors(gen.spec(n=n), 0, n)
    available = [b for b in ("gl", "cpu", "pyrender") if backend_class(b).unavailable_reason() is None]
    print(f"backends available: {', '.join(available)}; {args.rounds} rounds")
    for samples in (4, 1):
        for subdivisions in (0, 4):
            compare(available, values, {"samples": samples, "subdivisions": subdivisions}, args)


if __name__ == "__main__":
    main()
