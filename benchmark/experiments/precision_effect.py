"""How far the training precision moves each metric: replicates of reference rows trained in another
precision (``precision-square-v1``: fp32 replicates of seed 0 of every square entry of ``reference-v1``,
whose shipped runs trained in bf16), set against the shipped run of the same config and seed, in units
of the row's seed standard deviation (BASELINES.md, "When a row reproduces bit for bit").

For scalar ``m`` of model ``M``: shift = m(replicate) - m(shipped run of the same seed), and
z = shift / s, with s the sample standard deviation (n - 1) of ``m`` over the shipped row's seeds. The
rule that calls a scalar *fragile under precision* was fixed before any replicate ran: its |z| exceeds 1
(precision moves it further than a change of seed typically does) in at least half of the models that
report it. A scalar equal in both runs to the last bit has z = 0.

The analysis is a pure function of results (:func:`precision_effect`), so it runs on any pair of
folders: e.g. replicates trained on another CPU, in the same precision, to measure that effect instead.

    factorbench sweep precision-square-v1 --jobs 2 --threads 1
    factorbench sweep precision-square-v1 --collect DIR
    python -m factorbench.benchmark.experiments.precision_effect DIR            # every protocol under DIR
    python -m factorbench.benchmark.experiments.precision_effect DIR --protocol square-lsbd-v1
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factorbench.generators.errors import FactorbenchError, exits_2_on_user_error

__all__ = ["FRAGILE_Z", "FRAGILE_SHARE", "MetricShift", "PrecisionEffect", "format_precision_effect",
           "format_scalar_verdicts", "precision_effect"]

#: a scalar's replicate differs from its shipped run by more than this many of the row's seed standard
#: deviations ...
FRAGILE_Z = 1.0
#: ... in at least this share of the models that report it: it is fragile under precision (fixed before
#: any replicate ran)
FRAGILE_SHARE = 0.5


@dataclass(frozen=True)
class MetricShift:
    """One scalar of one model: its value in the shipped run (``reference``) and in the replicate of the
    same config and seed, and the shipped row's seed standard deviation (None with one seed)."""

    model: str
    key: str
    seed: int
    reference: float
    replicate: float
    seed_std: float | None

    @property
    def shift(self) -> float:
        return self.replicate - self.reference

    @property
    def z(self) -> float | None:
        """shift / seed_std; 0 for an equal value, inf for a changed value of a row without spread, None
        without a spread or a finite value."""
        if not (math.isfinite(self.reference) and math.isfinite(self.replicate)):
            return None
        if self.shift == 0:
            return 0.0
        if self.seed_std is None:
            return None
        return math.copysign(math.inf, self.shift) if self.seed_std == 0 else self.shift / self.seed_std


@dataclass(frozen=True)
class PrecisionEffect:
    """Every :class:`MetricShift` of a protocol, the models and scalars in the shipped files' order, and
    what each side was trained in (``{model: "bf16 on <cpu>"}``)."""

    protocol: str
    models: tuple[str, ...]
    keys: tuple[str, ...]
    shifts: tuple[MetricShift, ...]
    reference_trained: dict[str, str]
    replicate_trained: dict[str, str]

    def shift(self, model: str, key: str) -> MetricShift | None:
        return next((s for s in self.shifts if s.model == model and s.key == key), None)

    def fragile(self) -> dict[str, tuple[int, int, bool]]:
        """``{key: (models with |z| > FRAGILE_Z, models with a z, fragile)}`` (see the module)."""
        out = {}
        for key in self.keys:
            zs = [s.z for s in self.shifts if s.key == key and s.z is not None]
            over = sum(abs(z) > FRAGILE_Z for z in zs)
            out[key] = (over, len(zs), bool(zs) and over >= FRAGILE_SHARE * len(zs))
        return out

    def bit_identical(self) -> int:
        """How many (model, scalar) pairs are equal to the last bit."""
        return sum(s.shift == 0 for s in self.shifts)


def _trained(run: Any) -> str:
    trained = (run.training or {}).get("trained") or {}
    precision = trained.get("precision") or "precision not recorded"
    where = trained.get("device_name") or trained.get("device") or "device not recorded"
    return f"{precision} on {where}"


def precision_effect(protocol: str, reference: Mapping[str, Sequence[Any]],
                     replicate: Mapping[str, Sequence[Any]]) -> PrecisionEffect:
    """Pair each replicate run with the shipped run of the same model, seed and config (``config_hash``)
    and measure every scalar's shift (see the module). ``reference``/``replicate``: ``{model: [runs]}``
    as :func:`factorbench.benchmark.results.reference_results` gives them. A replicate of a model or seed
    without a shipped run, or of another config, is an error: it would compare different jobs."""
    from factorbench.benchmark.results import _sweep_seed, summary_of

    models, keys, shifts = [], [], []
    reference_trained, replicate_trained = {}, {}
    for model, runs in replicate.items():
        if model not in reference:
            raise FactorbenchError(f"{protocol}: the replicates hold {model!r}, which has no shipped row to compare "
                                   f"with (shipped: {', '.join(sorted(reference)) or 'none'})")
        shipped = {_sweep_seed(r): r for r in reference[model]}
        spread = summary_of(reference[model])  # the row's sample std (n - 1) over its finite seeds
        for run in runs:
            seed = _sweep_seed(run)
            base = shipped.get(seed)
            if base is None:
                raise FactorbenchError(f"{protocol}: the replicate of {model} seed {seed} has no shipped run of that "
                                       f"seed (shipped seeds: {sorted(s for s in shipped if s is not None)})")
            ours, theirs = (run.training or {}).get("config_hash"), (base.training or {}).get("config_hash")
            if ours is None or ours != theirs:
                raise FactorbenchError(f"{protocol}: the replicate of {model} seed {seed} trained another config "
                                       f"({str(ours)[:12]}) than the shipped run ({str(theirs)[:12]}); a replicate "
                                       "repeats the shipped config and changes only how it is computed")
            if model not in models:
                models.append(model)
            reference_trained[model], replicate_trained[model] = _trained(base), _trained(run)
            ref_scalars = base.scalars()
            for key, value in run.scalars().items():
                if key not in ref_scalars:
                    continue
                shifts.append(MetricShift(model, key, int(seed), ref_scalars[key], value, spread[key]["std"]))
                if key not in keys:
                    keys.append(key)
    if not shifts:
        raise FactorbenchError(f"{protocol}: no replicate run to compare")
    return PrecisionEffect(protocol, tuple(models), tuple(keys), tuple(shifts), reference_trained, replicate_trained)


def _cell(s: MetricShift | None) -> str:
    if s is None:
        return "n/a"
    z = s.z
    zs = "n/a" if z is None else ("0" if z == 0 else f"{z:+.1f}")
    return f"{s.shift:+.3f} ({zs})"


def format_precision_effect(effect: PrecisionEffect) -> str:
    """Markdown: each model's shifts ``shift (z)``, then each scalar's count of |z| > 1 and verdict."""
    lines = [f"{effect.protocol}: replicate minus shipped run of the same seed (in the row's seed standard "
             "deviations)", "", "| model | trained (shipped / replicate) | " + " | ".join(effect.keys) + " |",
             "|---|---|" + "---|" * len(effect.keys)]
    for model in effect.models:
        trained = f"{effect.reference_trained[model]} / {effect.replicate_trained[model]}"
        lines.append(f"| {model} | {trained} | " + " | ".join(_cell(effect.shift(model, k)) for k in effect.keys)
                     + " |")
    return "\n".join(lines) + "\n\n" + format_scalar_verdicts(effect)


def format_scalar_verdicts(effect: PrecisionEffect) -> str:
    """Markdown: per scalar, how many models it moves by more than :data:`FRAGILE_Z` seed standard
    deviations, the median and largest |z| (descriptive), how many shifts are positive, and the verdict;
    then how many (model, scalar) pairs are equal to the last bit."""
    fragile = effect.fragile()
    lines = [f"| scalar | models with \\|z\\| > {FRAGILE_Z:g} | median \\|z\\| | largest \\|z\\| | shifts > 0 "
             "| fragile under precision |", "|---|---|---|---|---|---|"]
    for key in effect.keys:
        over, n, verdict = fragile[key]
        scored = [s for s in effect.shifts if s.key == key and s.z is not None]
        if scored:
            largest = max(scored, key=lambda s: abs(s.z))
            median = f"{statistics.median(abs(s.z) for s in scored):.1f}"
            top = f"{abs(largest.z):.1f} ({largest.model})"
        else:
            median = top = "n/a"
        positive = sum(s.shift > 0 for s in effect.shifts if s.key == key)
        total = sum(1 for s in effect.shifts if s.key == key)
        lines.append(f"| {key} | {over} of {n} | {median} | {top} | {positive} of {total} | "
                     f"{'yes' if verdict else 'no'} |")
    lines += ["", f"{effect.bit_identical()} of {len(effect.shifts)} (model, scalar) pairs are equal to the last bit."]
    return "\n".join(lines) + "\n"


@exits_2_on_user_error
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("replicates", help="a sweep's --collect folder: <protocol>/<model>.json")
    parser.add_argument("--protocol", action="append", default=None,
                        help="only this protocol (repeatable; default: every protocol folder under REPLICATES)")
    parser.add_argument("--reference", default=None, metavar="DIR",
                        help="the rows to compare with: a folder of <protocol>/<model>.json (default: the shipped rows)")
    args = parser.parse_args(argv)
    from factorbench.benchmark.protocols import PROTOCOLS
    from factorbench.benchmark.results import reference_results

    root = Path(args.replicates)
    if not root.is_dir():
        raise FactorbenchError(f"{root}: no such folder (give the folder that `factorbench sweep PLAN --collect "
                               "DIR` wrote)")
    protocols = args.protocol or sorted(p.name for p in root.iterdir() if p.is_dir() and p.name in PROTOCOLS)
    if not protocols:
        raise FactorbenchError(f"{root} holds no protocol folder (<protocol>/<model>.json)")
    for protocol in protocols:
        if protocol not in PROTOCOLS:
            raise FactorbenchError(f"unknown protocol {protocol!r}; see `factorbench protocols`")
        reference_dir = Path(args.reference) / protocol if args.reference else None
        effect = precision_effect(protocol, reference_results(protocol, reference_dir),
                                  reference_results(protocol, root / protocol))
        print(format_precision_effect(effect))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
