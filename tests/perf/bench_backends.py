"""How much the scores move between gl- and cpu-rendered copies of the same dataset spec.

The two backends sample the same sub-pixel grid and agree to the rounding, but not byte for byte
(README, "Renderer"), so the two copies of a protocol's data have different image hashes. This script
scores the ``pca`` encoder on both copies and prints, per protocol, the pixel difference of the copies
and every scalar on each copy with their absolute difference (the headline first).

Airplane and objects are measured on the protocols' own data (4,096 images). The teapot's 200,000
images take about 40 minutes of both cores on the cpu backend, so by default the teapot protocols are
measured on copies of their first ``--teapot-n`` images (the same spec with a smaller n: the same
factor values for those rows, the same split rules): ``teapot-dci-v1`` and ``teapot-dependent-v1``
with ``n`` = 20,000 (pass ``--teapot-n 200000`` for the full protocols).

Run from the repository root (the copies are cached in two folders, gl and cpu)::

    python tests/perf/bench_backends.py --gl-dir ~/.cache/factorbench --cpu-dir /tmp/fb-cpu
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np

from factorbench.benchmark import load
from factorbench.benchmark.cache import prepare_dataset
from factorbench.benchmark.evaluation import evaluate
from factorbench.benchmark.protocols import get_protocol

FULL = ("airplane-lsbd-v1", "airplane-dependent-v1", "objects-lsbd-v1")
TEAPOT = ("teapot-dci-v1", "teapot-dependent-v1")


def _protocol(name: str, n: int | None):
    protocol = get_protocol(name)
    if n is None or n == 200_000:
        return protocol
    short = name.replace("-v1", f"-first{n}-v1")
    return dataclasses.replace(protocol, name=short, dataset=dataclasses.replace(protocol.dataset, n=n))


def _pixels(a: Path, b: Path) -> tuple[float, float, float]:
    """Mean absolute difference (1/255), fraction of differing values and of values more than 8/255 apart."""
    total = diff = far = 0
    abs_sum = 0.0
    with load(a) as da, load(b) as db:
        for start in range(0, len(da), 4096):
            x = da.images[start:start + 4096].astype(np.int16)
            y = db.images[start:start + 4096].astype(np.int16)
            d = np.abs(x - y)
            total += d.size
            diff += int((d > 0).sum())
            far += int((d > 8).sum())
            abs_sum += float(d.sum())
    return abs_sum / total, diff / total, far / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gl-dir", type=Path, required=True)
    parser.add_argument("--cpu-dir", type=Path, required=True)
    parser.add_argument("--teapot-n", type=int, default=20_000)
    parser.add_argument("--protocol", nargs="+", default=[*FULL, *TEAPOT])
    args = parser.parse_args()
    for name in args.protocol:
        protocol = _protocol(name, args.teapot_n if name.startswith("teapot") else None)
        copies, results = {}, {}
        for backend, folder in (("gl", args.gl_dir), ("cpu", args.cpu_dir)):
            t0 = time.perf_counter()
            copies[backend] = prepare_dataset(protocol.dataset, backend=backend, directory=folder, progress=False)
            t1 = time.perf_counter()
            results[backend] = evaluate(protocol, "pca", data_dir=folder, backend=backend, progress=False)
            print(f"# {protocol.name} {backend}: data {t1 - t0:.0f} s, evaluation {time.perf_counter() - t1:.0f} s",
                  flush=True)
        mad, changed, far = _pixels(copies["gl"], copies["cpu"])
        n = results["gl"].dataset["sha256"]
        print(f"\n## {protocol.name} (pca; images gl {n['images'][:12]}, cpu {results['cpu'].dataset['sha256']['images'][:12]})")
        print(f"pixels: mean |gl - cpu| {mad * 1:.4f} / 255, {100 * changed:.3f} % of values differ, "
              f"{100 * far:.4f} % by more than 8/255\n")
        print("| scalar | better | gl | cpu | abs. difference |\n|---|---|---|---|---|")
        gl, cpu = results["gl"].scalars(), results["cpu"].scalars()
        head = results["gl"].headline["key"]
        for key in [head] + [k for k in gl if k != head]:
            better = results["gl"].directions.get(key, "higher")
            label = f"**{key}** (headline)" if key == head else key
            print(f"| {label} | {better} | {gl[key]:.4f} | {cpu[key]:.4f} | {abs(gl[key] - cpu[key]):.4f} |")
        diffs = [abs(gl[k] - cpu[k]) for k in gl if np.isfinite(gl[k]) and np.isfinite(cpu[k])]
        print(f"\nlargest difference {max(diffs):.4f}, median {float(np.median(diffs)):.4f}\n", flush=True)


if __name__ == "__main__":
    main()
