"""Renderer throughput and agreement on teapot scenes: gl vs cpu vs pyrender, in one run.

Renders the teapot dataset's scenes (64 x 64, the dataset's lighting and camera, i.i.d. factors from
the dataset's own sampler) with every backend available here, and prints images/s, the ratio of each
backend's speed to pyrender's (the reference renderer) and, on the same scenes, each backend's
agreement with the cpu backend: mean absolute difference per channel (in 1/255) and the fraction of
pixel values within 8/255. Antialiasing: ``--samples`` (default 4, the dataset default) and 1.

Run from the repository root::

    python tests/perf/bench_render.py               # gl: 4,000 images, cpu and pyrender: 200
    python tests/perf/bench_render.py --gl-n 20000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from factorbench.generators import FactorbenchError, get
from factorbench.generators.render import backend_class


def timed_render(backend: str, values: np.ndarray, samples: int) -> tuple[np.ndarray, float]:
    gen = get("teapot", {"samples": samples}, backend=backend)
    gen.render(values[:8])  # warm-up: context creation, mesh upload
    start = time.perf_counter()
    images = np.concatenate([gen.render(values[a:a + 512]) for a in range(0, len(values), 512)])
    return images, len(values) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gl-n", type=int, default=4000, help="images for the gl backend")
    parser.add_argument("--n", type=int, default=200, help="images for cpu and pyrender (and agreement)")
    args = parser.parse_args()
    gen = get("teapot")
    values, _ = gen.sample_factors(gen.spec(n=max(args.gl_n, args.n)), 0, max(args.gl_n, args.n))
    available = [b for b in ("gl", "cpu", "pyrender") if backend_class(b).unavailable_reason() is None]
    print(f"backends available: {', '.join(available)}")
    for samples in (4, 1):
        speed, images = {}, {}
        for b in available:
            n = args.gl_n if b == "gl" else args.n
            try:
                imgs, speed[b] = timed_render(b, values[:n], samples)
            except FactorbenchError as exc:
                print(f"  {b}: {exc}")
                continue
            images[b] = imgs[:args.n]
        print(f"\nsamples per pixel: {samples}")
        print(f"{'backend':<10} {'images/s':>9} {'x pyrender':>11} {'mean |diff| vs cpu':>19} {'within 8/255':>13}")
        for b, ips in speed.items():
            ratio = f"{ips / speed['pyrender']:.1f}" if "pyrender" in speed else "n/a"
            if "cpu" in images:
                diff = np.abs(images[b].astype(int) - images["cpu"])
                agree = f"{diff.mean():19.3f} {100 * (diff <= 8).mean():12.3f}%"
            else:
                agree = f"{'n/a':>19} {'n/a':>13}"
            print(f"{b:<10} {ips:9.0f} {ratio:>11} {agree}")


if __name__ == "__main__":
    main()
