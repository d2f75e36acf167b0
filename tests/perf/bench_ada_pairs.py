"""Milliseconds per step of drawing the Ada-GVAE / Ada-ML-VAE pairs (batch 64): ``PairBatches.pairs``
against the reference of one pair at a time (the loop every shipped Ada run trained on, kept in
``tests/test_baselines_adavae.py``), measured in the same run on the same data; the pairs are checked equal.

    python tests/perf/bench_ada_pairs.py                      # square, arrow, objects from the cache; k = 1, 2
    python tests/perf/bench_ada_pairs.py --datasets coil100 --steps 500

Each row: the median of ``--rounds`` rounds of ``--steps`` steps, the two taking turns.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from factorbench.baselines.adavae import PairBatches  # noqa: E402
from factorbench.baselines.config import make_config  # noqa: E402
from factorbench.baselines.data import TrainingData, resolve_dataset  # noqa: E402
from factorbench.baselines.trainer import cpu_model_name  # noqa: E402
from test_baselines_adavae import _pairs_one_by_one  # noqa: E402


def ms_per_step(fn, draw: PairBatches, steps: int) -> float:
    t0 = time.perf_counter()
    for step in range(steps):
        fn(draw, step)
    return (time.perf_counter() - t0) / steps * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["square", "arrow", "objects"])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"CPU: {cpu_model_name()}; {args.steps} steps of 64 pairs, median of {args.rounds} rounds")
    print(f"{'dataset':<10} {'k':>2} {'pairs() ms':>11} {'one by one ms':>14} {'speed-up':>9}")
    for name in args.datasets:
        data = TrainingData(resolve_dataset(name, progress=False), "train")
        for k in (1, 2):
            draw = PairBatches(make_config("ada-gvae", {"k": k, "batch_size": 64}), data)
            for step in range(20):
                assert all(np.array_equal(a, b) for a, b in zip(draw.pairs(step), _pairs_one_by_one(draw, step)))
            new, old = [], []
            for _ in range(args.rounds):
                new.append(ms_per_step(PairBatches.pairs, draw, args.steps))
                old.append(ms_per_step(_pairs_one_by_one, draw, args.steps))
            a, b = statistics.median(new), statistics.median(old)
            print(f"{name:<10} {k:>2} {a:>11.3f} {b:>14.3f} {b / a:>8.2f}x")
        data.close()


if __name__ == "__main__":
    main()
