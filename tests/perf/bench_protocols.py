"""Wall time of evaluating an encoder under protocols (the "< 30 s per protocol" figures of the README).

For each protocol, runs ``factorbench evaluate PROTOCOL --encoder ENCODER`` in a fresh process (the
protocol's data already cached: run it once before, or let the first repeat generate it and pass
``--repeats 2``), and the same with the ``pca`` reference encoder as the reference run, and prints the
median wall time of the whole command, the result's own split (dataset check, encoding, metrics), the
ratio to the ``pca`` run and to the 30 s budget. The encoder of a trained model is ``run:RUN_DIR``
(e.g. a short ``factorbench train vae --dataset dsprites --steps 300 --out RUN_DIR``: encoding and
metric costs do not depend on how long the model trained).

Run from the repository root::

    python tests/perf/bench_protocols.py dsprites-dci-v1 dsprites-dependent-v1 --encoder run:runs/dsprites-vae
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from factorbench.benchmark.environment import cpu_model_name

BUDGET_S = 30.0


def evaluate_once(protocol: str, encoder: str, workdir: Path) -> tuple[float, dict[str, float]]:
    """(wall seconds of the command, the result's timings)."""
    out = workdir / "result.json"
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "factorbench.benchmark.cli", "evaluate", protocol, "--encoder",
                          encoder, "--out", str(out), "--force", "--quiet"], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"factorbench evaluate {protocol} --encoder {encoder} failed:\n{run.stderr.strip()}")
    timings = json.loads(out.read_text())["timings"]
    return wall, timings


def measure(protocol: str, encoder: str, repeats: int, workdir: Path) -> tuple[float, dict[str, float]]:
    runs = [evaluate_once(protocol, encoder, workdir) for _ in range(repeats)]
    best = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
    return statistics.median(r[0] for r in runs), best[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocols", nargs="+")
    parser.add_argument("--encoder", required=True, help="e.g. run:RUN_DIR (a trained model)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'protocol':<24} {'encoder':<8} {'wall s':>7} {'check':>6} {'encode':>7} {'metrics':>8} "
          f"{'x pca':>6} {'x budget':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for protocol in args.protocols:
            ref_wall, _ = measure(protocol, "pca", args.repeats, Path(tmp))
            wall, t = measure(protocol, args.encoder, args.repeats, Path(tmp))
            metrics = sum(v for k, v in t.items() if k not in ("prepare_dataset", "encode"))
            print(f"{protocol:<24} {'given':<8} {wall:>7.1f} {t['prepare_dataset']:>6.1f} {t['encode']:>7.1f} "
                  f"{metrics:>8.1f} {wall / ref_wall:>6.2f} {wall / BUDGET_S:>9.2f}", flush=True)
            print(f"{'':<24} {'pca':<8} {ref_wall:>7.1f}", flush=True)
    print(f"(encoder {args.encoder}; {cpu_model_name()}, {os.cpu_count()} cores, median of {args.repeats}; "
          "wall includes interpreter start and imports)")


if __name__ == "__main__":
    main()
