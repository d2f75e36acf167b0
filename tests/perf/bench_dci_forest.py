"""Wall time of DCI with the random forest (Eastwood & Williams' regressor, 10 trees per factor, grown to
the deepest depth of the grid) on one thread against every core this process may use
(``forest_threads``), in the same run, on the same codes; the two results are checked equal bit for bit.

    python tests/perf/bench_dci_forest.py                       # 20,000 training codes, 10 dims, 5 factors
    python tests/perf/bench_dci_forest.py --n 120000 --rounds 1 # the teapot's training split size

The codes: a rotated copy of uniform factors with noise dimensions (``factorbench.benchmark.toy``).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time

import numpy as np

from factorbench.benchmark import toy
from factorbench.benchmark.environment import cpu_model_name
from factorbench.benchmark.metrics.dci import dci

dci_module = importlib.import_module("factorbench.benchmark.metrics.dci")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000, help="training codes (the test set is a quarter of it)")
    ap.add_argument("--factors", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    factors = rng.uniform(size=(args.n + args.n // 4, args.factors))
    codes = toy.with_noise_dims(toy.rotated(factors, seed=1), 10 - args.factors, seed=2)
    split = args.n
    threads = dci_module.forest_threads()
    original = dci_module.forest_threads
    times: dict[int, list[float]] = {1: [], threads: []}
    results = {}
    for _ in range(args.rounds):
        for t in times:
            dci_module.forest_threads = lambda t=t: t
            t0 = time.perf_counter()
            results[t] = dci(codes[:split], factors[:split], codes[split:], factors[split:], regressor="forest",
                             seed=0).to_dict()
            times[t].append(time.perf_counter() - t0)
    dci_module.forest_threads = original
    assert results[1] == results[threads], "the scores differ between thread counts"
    one, many = statistics.median(times[1]), statistics.median(times[threads])
    print(f"CPU: {cpu_model_name()}; {args.n:,} training codes, 10 dims, {args.factors} factors; median of "
          f"{args.rounds} round(s)")
    print(f"1 thread {one:.2f} s, {threads} threads {many:.2f} s: {one / many:.2f}x; scores equal bit for bit")


if __name__ == "__main__":
    main()
