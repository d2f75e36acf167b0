"""What each job of a plan cost, from its shipped results: the table in BASELINES.md.

    python -m factorbench.baselines.costs [--check] [--plan reference-v1] [--file baselines/BASELINES.md]

Every job of the plan gets a row group (entry and dataset): its seeds' training CPU seconds, wall seconds,
precision and CPU as the results record them, or "not recorded" where a run predates the record; jobs
without a collected result are listed as such. The part of the file between ``<!-- costs:begin -->`` and
``<!-- costs:end -->`` is rewritten; ``--check`` only compares (exit status 1 when it is out of date), so
the table covers every job and cannot drift from the results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.outputs import write_atomically

__all__ = ["BEGIN", "END", "job_costs", "render_costs", "update_costs"]

BEGIN, END = "<!-- costs:begin -->", "<!-- costs:end -->"


def job_costs(plan_name: str, reference_dir: Path | None = None) -> dict[str, dict[str, Any] | None]:
    """job id -> what its results record about training (None: no collected result), in plan order."""
    from factorbench.benchmark.results import REFERENCE_DIR

    from .plan import expand, load_plan

    folder = reference_dir if reference_dir is not None else REFERENCE_DIR
    jobs = expand(load_plan(plan_name))
    found: dict[str, dict[str, Any]] = {}
    for job in jobs:
        for protocol in job.protocols:
            path = folder / protocol / f"{job.entry.name}.json"
            if job.id in found or not path.is_file():
                continue
            document = json.loads(path.read_text())
            for run in document.get("runs", []):
                training = run.get("training") or {}
                sweep = training.get("sweep") or {}
                if sweep.get("plan") == plan_name and sweep.get("job") == job.id:
                    trained = training.get("trained") or {}
                    found[job.id] = {"cpu_s": trained.get("cpu_time_s"), "wall_s": trained.get("wall_time_s"),
                                     "precision": trained.get("precision"), "cpu": _device_label(trained),
                                     "steps": (training.get("budget") or {}).get("steps"),
                                     "evaluation_s": sweep.get("evaluation_wall_time_s")}
    return {job.id: found.get(job.id) for job in jobs}


def _device_label(trained: dict[str, Any]) -> str | None:
    """The device's name, with its signature (family, model, vector units) where the run recorded one."""
    name, signature = trained.get("device_name"), trained.get("device_signature")
    return f"{name} ({signature})" if name and signature else name


def _number(value: Any) -> str:
    return "—" if value is None else f"{float(value):,.0f}"


def render_costs(plan_name: str, reference_dir: Path | None = None) -> str:
    """The generated table: one row per (entry, dataset), each seed's figures in seed order."""
    costs = job_costs(plan_name, reference_dir)
    groups: dict[str, list[tuple[str, dict[str, Any] | None]]] = {}
    for job_id, record in costs.items():
        name, dataset, seed = job_id.split("/")
        groups.setdefault(f"{name}/{dataset}", []).append((seed, record))
    lines = [f"Generated from the shipped results of `{plan_name}` (`python -m factorbench.baselines.costs`; "
             "`--check` fails when stale). Per seed, in seed order: training CPU seconds, training wall seconds; "
             "— where the run predates the record.", "",
             "| job | steps | CPU s | wall s | precision | CPU |", "|---|---|---|---|---|---|"]
    for group, members in groups.items():
        records = [r for _, r in members if r is not None]
        if not records:
            continue
        cpus = sorted({r["cpu"] or "not recorded" for r in records})
        lines.append(f"| {group}/{','.join(s.removeprefix('seed') for s, r in members if r is not None)} | "
                     f"{records[0]['steps']:,} | {', '.join(_number(r['cpu_s']) for r in records)} | "
                     f"{', '.join(_number(r['wall_s']) for r in records)} | "
                     f"{', '.join(sorted({str(r['precision']) for r in records}))} | {'; '.join(cpus)} |")
    done = [r for r in costs.values() if r is not None]
    recorded = [r for r in done if r["cpu_s"] is not None]
    missing = [job for job, r in costs.items() if r is None]
    unrecorded = [job for job, r in costs.items() if r is not None and r["cpu_s"] is None]
    lines += ["", f"{len(done)} of {len(costs)} jobs have collected results; {len(recorded)} record their training "
              f"CPU time, {sum(r['cpu_s'] for r in recorded) / 3600:.1f} CPU hours in all."]
    if unrecorded:
        lines.append(f"Without a recorded CPU time ({len(unrecorded)}, trained before results kept it): "
                     + ", ".join(unrecorded) + ".")
    if missing:
        lines.append(f"Not collected yet ({len(missing)}): " + ", ".join(missing) + ".")
    return "\n".join(lines)


def update_costs(path: Path, plan_name: str = "reference-v1", check: bool = False,
                 reference_dir: Path | None = None) -> bool:
    """Rewrite the cost table of ``path`` (True when it changed); ``check``: only report whether it would."""
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise FactorbenchError(f"{path} has no {BEGIN} ... {END} markers")
    start, stop = text.index(BEGIN) + len(BEGIN), text.index(END)
    new = text[:start] + "\n" + render_costs(plan_name, reference_dir) + "\n" + text[stop:]
    if new == text:
        return False
    if not check:
        write_atomically(path, new)
    return True


def main(argv: list[str] | None = None) -> int:
    from .reproduction import document_main

    return document_main(argv, __doc__.splitlines()[0], Path(__file__).resolve().parent / "BASELINES.md",
                         "factorbench.baselines.costs",
                         lambda args: update_costs(args.file, args.plan, check=args.check,
                                                   reference_dir=args.reference_dir),
                         lambda parser: parser.add_argument("--plan", default="reference-v1"))


if __name__ == "__main__":
    raise SystemExit(main())

