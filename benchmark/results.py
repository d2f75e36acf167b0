"""Result files and the reference-score table.

One evaluation gives an :class:`EvaluationResult`, written as JSON (numbers as floats). The reference
table of a protocol is the folder ``benchmark/reference/<protocol>/`` (installed with the package):
one JSON file per model, either a single result or several seeds of one model (``{"model": ..., "runs":
[...]}``, as ``factorbench sweep PLAN --collect`` writes them, with a per-scalar ``summary``), which the
table shows as mean and standard deviation. :func:`scores_table` refuses a file whose protocol hash differs from
the current protocol's (a stale result must be re-run, never silently mixed in).
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from factorbench.generators.errors import FactorbenchError

from .protocols import Protocol, get_protocol

__all__ = ["EvaluationResult", "REFERENCE_DIR", "format_table", "load_result", "reference_results", "scores_table"]

#: the reference results shipped with the package
REFERENCE_DIR = Path(__file__).with_name("reference")


@dataclass(frozen=True)
class EvaluationResult:
    """What one evaluation produced, and everything needed to say how (see :func:`evaluate`)."""

    protocol: str
    protocol_version: int
    protocol_hash: str
    dataset: dict[str, Any]
    package_version: str
    encoder: str
    code_dim: int
    posterior: bool
    metrics: dict[str, dict[str, Any]]
    skipped: dict[str, str] = field(default_factory=dict)
    partial: bool = False
    seeds: list[int] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    date: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    model: str = ""
    #: for a trained run (``run:RUN_DIR``): its run hash, model config and config hash, training data and budget
    training: dict[str, Any] = field(default_factory=dict)

    def scalars(self) -> dict[str, float]:
        """``{"label.field": value}`` of every headline scalar."""
        return {f"{label}.{name}": math.nan if v is None else float(v)
                for label, m in self.metrics.items() for name, v in m["scalars"].items()}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True, allow_nan=False)

    def save(self, path: str | os.PathLike, *, force: bool = False) -> Path:
        """Write the JSON file (atomically; an existing file is replaced only with ``force``)."""
        path = Path(path)
        if path.exists() and not force:
            raise FactorbenchError(f"{path} exists; pass --force to replace it")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json())
        os.replace(tmp, path)
        return path

    def summary(self) -> str:
        """A readable table of the headline scalars."""
        lines = [f"{self.protocol} (hash {self.protocol_hash[:12]})  encoder: {self.encoder}  code dim {self.code_dim}"]
        width = max((len(k) for k in self.scalars()), default=10)
        for key, value in self.scalars().items():
            lines.append(f"  {key:<{width}}  {value:8.4f}")
        for label, why in self.skipped.items():
            lines.append(f"  {label:<{width}}  skipped: {why}")
        for label, m in self.metrics.items():
            for warning in m.get("result", {}).get("warnings", ()):
                lines.append(f"  warning ({label}): {warning}")
        total = sum(v for k, v in self.timings.items())
        lines.append(f"  total time {total:.1f} s")
        return "\n".join(lines)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvaluationResult":
        try:
            return cls(**d)
        except TypeError as exc:
            raise FactorbenchError(f"not a factorbench result ({exc})") from None


def load_result(path: str | os.PathLike) -> EvaluationResult:
    try:
        return EvaluationResult.from_dict(json.loads(Path(path).read_text()))
    except (OSError, json.JSONDecodeError) as exc:
        raise FactorbenchError(f"cannot read result {path} ({exc})") from None


def _runs_of(path: Path) -> list[EvaluationResult]:
    """A reference file holds one result or ``{"model": ..., "runs": [result, ...]}``."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise FactorbenchError(f"cannot read result {path} ({exc})") from None
    runs = data["runs"] if isinstance(data, dict) and "runs" in data else [data]
    return [EvaluationResult.from_dict(r) for r in runs]


def reference_results(protocol: str | Protocol, directory: str | os.PathLike | None = None
                      ) -> dict[str, list[EvaluationResult]]:
    """``{model: [runs]}`` of the reference folder of ``protocol``, each checked against its hash."""
    protocol = get_protocol(protocol)
    folder = Path(directory) if directory is not None else REFERENCE_DIR / protocol.name
    out: dict[str, list[EvaluationResult]] = {}
    current = protocol.hash()
    for path in sorted(folder.glob("*.json")):
        runs = _runs_of(path)
        for run in runs:
            if run.protocol != protocol.name or run.protocol_hash != current:
                raise FactorbenchError(
                    f"{path} was made under {run.protocol} hash {run.protocol_hash[:12]}, but the current "
                    f"{protocol.name} has hash {current[:12]}: the protocol changed, so this result is stale; "
                    "re-run the evaluation for it")
            if run.partial:
                raise FactorbenchError(f"{path} is a partial run (--only); the table needs every metric")
        out[runs[0].model or path.stem] = runs
    return out


def scores_table(protocol: str | Protocol, directory: str | os.PathLike | None = None,
                 columns: str | None = None) -> tuple[list[str], list[list[Any]]]:
    """Header and rows (model, then mean and std of each headline scalar over runs), sorted by the
    protocol's headline metric (best first). ``columns``: a shell-style pattern selecting the scalar
    columns shown (e.g. ``"independent.*"``); the headline column is always kept."""
    protocol = get_protocol(protocol)
    results = reference_results(protocol, directory)
    keys: list[str] = []
    for runs in results.values():
        for key in runs[0].scalars():
            if key not in keys:
                keys.append(key)
    head = protocol.headline.key
    if columns is not None:
        keys = [k for k in keys if k == head or fnmatch.fnmatchcase(k, columns)]
    rows = []
    for model, runs in results.items():
        row: list[Any] = [model, len(runs)]
        for key in keys:
            values = [r.scalars().get(key, math.nan) for r in runs]
            row.append((float(np.mean(values)), float(np.std(values)) if len(values) > 1 else None))
        rows.append(row)
    if head in keys:
        col = 2 + keys.index(head)
        sign = -1.0 if protocol.headline.better == "higher" else 1.0
        rows.sort(key=lambda r: (math.isnan(r[col][0]), sign * r[col][0] if not math.isnan(r[col][0]) else 0.0))
    return ["model", "runs", *keys], rows


def format_table(header: list[str], rows: list[list[Any]], fmt: str = "md") -> str:
    """The table as Markdown (``md``) or CSV (``csv``; mean and std in separate columns)."""
    def cell(v: Any) -> str:
        if isinstance(v, tuple):
            mean, std = v
            return f"{mean:.3f}" if std is None else f"{mean:.3f} ± {std:.3f}"
        return str(v)

    if fmt == "md":
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
        return "\n".join(lines)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(header[:2] + [h + suffix for h in header[2:] for suffix in ("", ".std")])
        for row in rows:
            flat = row[:2]
            for mean, std in row[2:]:
                flat += [f"{mean:.6g}", "" if std is None else f"{std:.6g}"]
            writer.writerow(flat)
        return buf.getvalue()
    raise FactorbenchError(f"unknown table format {fmt!r}; use md or csv")
