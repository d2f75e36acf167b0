"""Reference rows of the score tables: the ``ideal``, ``random`` and ``pca`` encoders under every protocol
that runs without outside data, written to ``benchmark/reference/<protocol>/<encoder>.json``.

    python -m factorbench.baselines.reference [--protocol NAME ...] [--encoder ideal random pca] [--seeds 0 1 2] [--force]
    python -m factorbench.baselines.reference --protocol coil100-lsbd-v1 --source ~/data/coil-100   # the user's data

``--seeds`` (the seeded encoders, ``random`` and ``pca``: the projection, or PCA's fitting subsample and
randomised SVD) writes one file with a run per seed (``{"model": ..., "runs": [...]}``), shown as mean +- std;
the teapot's PCA row, an entry of the reference plan, has three.

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
from factorbench.benchmark.results import REFERENCE_DIR, save_runs
from factorbench.generators.errors import FactorbenchError, exits_2_on_user_error


def embedded_protocols() -> list[str]:
    """Protocols whose data factorbench makes itself (no --source)."""
    return [name for name, p in sorted(PROTOCOLS.items()) if not p.needs_source]


#: the reference encoders whose result depends on a seed
SEEDED = ("random", "pca")


def run(protocol: str, encoder: str, out_dir: Path, force: bool = False, seeds: tuple[int, ...] = (0,),
        source: str | None = None) -> Path:
    """Evaluate ``encoder`` under ``protocol`` (once per seed) and write ``out_dir/<protocol>/<encoder>.json``:
    one result, or ``{"model": encoder, "runs": [one result per seed]}`` for several seeds. ``source``: the
    user's copy of the data of a protocol built from outside data."""
    out = out_dir / protocol / f"{encoder}.json"
    if len(seeds) > 1 and encoder not in SEEDED:
        raise FactorbenchError(f"{encoder} has no seed (only {', '.join(SEEDED)} do); run it without --seeds")
    if len(set(seeds)) != len(seeds):
        raise FactorbenchError(f"--seeds {' '.join(map(str, seeds))} repeats a seed")
    if out.exists() and not force:
        print(f"{out} exists (pass --force to re-run)")
        return out
    results = []
    for seed in seeds:
        start = time.perf_counter()
        spec = REFERENCE_ENCODERS[encoder](seed=seed) if encoder in SEEDED else encoder
        result = evaluate(protocol, spec, progress=False, source=source)
        wall = time.perf_counter() - start
        results.append(dataclasses.replace(result, model=encoder, timings={**result.timings, "wall": wall}))
        print(f"{protocol:<22} {encoder:<7} seed {seed} {wall:7.1f} s (prepare {result.timings['prepare_dataset']:.1f} s, "
              f"encode {result.timings['encode']:.1f} s)", flush=True)
    if len(results) == 1:
        results[0].save(out, force=True)
    else:
        save_runs(out, encoder, results)
    print(f"  -> {out}", flush=True)
    return out


@exits_2_on_user_error
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", nargs="+", default=None, help="default: every embedded protocol")
    parser.add_argument("--encoder", nargs="+", default=list(REFERENCE_ENCODERS), choices=list(REFERENCE_ENCODERS))
    parser.add_argument("--out", type=Path, default=REFERENCE_DIR, help="default: the package's reference folder")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0],
                        help=f"one run per seed, in one file ({', '.join(SEEDED)} only; default 0)")
    parser.add_argument("--force", action="store_true", help="re-run existing results")
    parser.add_argument("--source", default=None, help="your copy of the data of a protocol built from outside data "
                        "(coil100-lsbd-v1, modelnet40-lsbd-v1)")
    args = parser.parse_args(argv)
    for protocol in args.protocol or embedded_protocols():
        if protocol not in PROTOCOLS:
            raise FactorbenchError(f"unknown protocol {protocol!r}; see `factorbench protocols`")
        for encoder in args.encoder:
            run(protocol, encoder, args.out, args.force, tuple(args.seeds), args.source)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
