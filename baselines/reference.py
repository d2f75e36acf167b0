"""Reference rows of the score tables: the ``ideal``, ``random`` and ``pca`` encoders under every protocol
that runs without outside data, written to ``benchmark/reference/<protocol>/<encoder>.json``.

    python -m factorbench.baselines.reference [--protocol NAME ...] [--encoder ideal random pca] [--force]

Each run prints its wall time (dataset preparation, encoding, metrics); datasets come from the cache
(``$FACTORBENCH_DATA``) and are generated there on first use. Results hold no local path (the dataset's
spec hash and the hashes of its data identify it).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from factorbench.benchmark.encoders import REFERENCE_ENCODERS
from factorbench.benchmark.evaluation import evaluate
from factorbench.benchmark.protocols import PROTOCOLS
from factorbench.benchmark.results import REFERENCE_DIR


def embedded_protocols() -> list[str]:
    """Protocols whose data factorbench makes itself (no --source)."""
    return [name for name, p in sorted(PROTOCOLS.items()) if not p.needs_source]


def run(protocol: str, encoder: str, out_dir: Path, force: bool = False) -> Path:
    out = out_dir / protocol / f"{encoder}.json"
    if out.exists() and not force:
        print(f"{out} exists (pass --force to re-run)")
        return out
    start = time.perf_counter()
    result = evaluate(protocol, encoder, progress=False)
    wall = time.perf_counter() - start
    result = dataclasses.replace(result, model=encoder, timings={**result.timings, "wall": wall})
    result.save(out, force=True)
    print(f"{protocol:<22} {encoder:<7} {wall:7.1f} s (prepare {result.timings['prepare_dataset']:.1f} s, "
          f"encode {result.timings['encode']:.1f} s)  -> {out}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", nargs="+", default=None, help="default: every embedded protocol")
    parser.add_argument("--encoder", nargs="+", default=list(REFERENCE_ENCODERS), choices=list(REFERENCE_ENCODERS))
    parser.add_argument("--out", type=Path, default=REFERENCE_DIR, help="default: the package's reference folder")
    parser.add_argument("--force", action="store_true", help="re-run existing results")
    args = parser.parse_args(argv)
    for protocol in args.protocol or embedded_protocols():
        for encoder in args.encoder:
            run(protocol, encoder, args.out, args.force)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
