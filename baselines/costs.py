"""What each job of a plan cost, from its shipped results: the tables in BASELINES.md.

    python -m factorbench.baselines.costs [--check] [--plan NAME] [--file baselines/BASELINES.md]

Every job of a plan gets a row group (entry and dataset): its seeds' training CPU seconds, wall seconds,
scoring seconds (every protocol of the job), precision and device as the results record them, "—" where a
run predates the record; jobs without a collected result are listed as such. A plan's table is the part of
the file between ``<!-- costs:begin PLAN -->`` and ``<!-- costs:end PLAN -->``; every plan with such
markers is rewritten (``--plan``: that one only); ``--check`` only compares (exit status 1 when one is out
of date), so the tables cover every job and cannot drift from the results.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.outputs import write_atomically

__all__ = ["job_costs", "markers", "planned_tables", "render_costs", "update_costs"]

_MARKER = re.compile(r"<!-- costs:begin ([A-Za-z0-9._-]+) -->")


def markers(plan_name: str) -> tuple[str, str]:
    """The comments that enclose ``plan_name``'s generated table."""
    return f"<!-- costs:begin {plan_name} -->", f"<!-- costs:end {plan_name} -->"


def planned_tables(text: str) -> list[str]:
    """The plans whose tables ``text`` holds, in order."""
    return _MARKER.findall(text)


def job_costs(plan_name: str, reference_dir: Path | None = None) -> dict[str, dict[str, Any] | None]:
    """job id -> what its results record about training and scoring (None: no collected result), in plan
    order. Scoring seconds add up the job's protocols (None where one result lacks them); ``missing``: the
    job's protocols without a result (a job scored before a protocol joined its plan)."""
    from factorbench.benchmark.results import REFERENCE_DIR

    from .plan import expand, load_plan

    folder = reference_dir if reference_dir is not None else REFERENCE_DIR
    jobs = expand(load_plan(plan_name))
    found: dict[str, dict[str, Any]] = {}
    for job in jobs:
        scoring: list[Any] = []
        scored: set[str] = set()
        for protocol in job.protocols:
            path = folder / protocol / f"{job.entry.name}.json"
            if not path.is_file():
                continue
            document = json.loads(path.read_text())
            for run in document.get("runs", []):
                training = run.get("training") or {}
                sweep = training.get("sweep") or {}
                if sweep.get("plan") != plan_name or sweep.get("job") != job.id:
                    continue
                scoring.append(sweep.get("evaluation_wall_time_s"))
                scored.add(protocol)
                if job.id not in found:
                    trained = training.get("trained") or {}
                    found[job.id] = {"cpu_s": trained.get("cpu_time_s"), "wall_s": trained.get("wall_time_s"),
                                     "precision": trained.get("precision"), "device_label": _device_label(trained),
                                     "device": str(trained.get("device") or ""),
                                     "steps": (training.get("budget") or {}).get("steps")}
        if job.id in found:
            found[job.id]["scoring_s"] = None if None in scoring else sum(scoring)
            found[job.id]["missing"] = [protocol for protocol in job.protocols if protocol not in scored]
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
             "`--check` fails when stale). Per seed, in seed order: training CPU seconds, training wall seconds, "
             "scoring wall seconds (all the job's protocols); — where the run predates the record.", "",
             "| job | steps | CPU s | wall s | scoring s | precision | device |", "|---|---|---|---|---|---|---|"]
    partial = {job: r["missing"] for job, r in costs.items() if r is not None and r["missing"]}
    for group, members in groups.items():
        members = [(seed, None if r is not None and r["missing"] else r) for seed, r in members]
        records = [r for _, r in members if r is not None]
        if not records:
            continue
        devices = sorted({r["device_label"] or "not recorded" for r in records})
        lines.append(f"| {group}/{','.join(s.removeprefix('seed') for s, r in members if r is not None)} | "
                     f"{records[0]['steps']:,} | {', '.join(_number(r['cpu_s']) for r in records)} | "
                     f"{', '.join(_number(r['wall_s']) for r in records)} | "
                     f"{', '.join(_number(r['scoring_s']) for r in records)} | "
                     f"{', '.join(sorted({str(r['precision']) for r in records}))} | {'; '.join(devices)} |")
    done = [r for r in costs.values() if r is not None and not r["missing"]]
    on_gpu = [r for r in done if r["device"].startswith("cuda")]
    recorded = [r for r in done if r["cpu_s"] is not None and not r["device"].startswith("cuda")]
    missing = [job for job, r in costs.items() if r is None]
    unrecorded = [job for job, r in costs.items() if r is not None and not r["missing"] and r["cpu_s"] is None]
    lines += ["", f"{len(done)} of {len(costs)} jobs have collected results under all their protocols; "
              f"{len(recorded)} trained on a CPU record their training CPU time, {sum(r['cpu_s'] for r in recorded) / 3600:.1f} CPU hours in all"
              + (f"; {len(on_gpu)} trained on a GPU, {sum(r['wall_s'] or 0 for r in on_gpu) / 3600:.1f} hours of "
                 "training wall time (jobs sharing it)" if on_gpu else "") + "."]
    if unrecorded:
        lines.append(f"Without a recorded CPU time ({len(unrecorded)}, trained before results kept it): "
                     + ", ".join(unrecorded) + ".")
    if partial:
        lines.append(f"Collected under some of their protocols only, so the sweep trains them again and they are "
                     f"left out above ({len(partial)}): "
                     + ", ".join(f"{job} (no {', '.join(gaps)})" for job, gaps in partial.items()) + ".")
    if missing:
        lines.append(f"Not collected yet ({len(missing)}): " + ", ".join(missing) + ".")
    return "\n".join(lines)


def update_costs(path: Path, plan_name: str | None = None, check: bool = False,
                 reference_dir: Path | None = None) -> bool:
    """Rewrite the cost tables of ``path`` (True when one changed): ``plan_name``'s, or every plan's that
    has markers there; ``check``: only report whether it would."""
    text = path.read_text()
    plans = [plan_name] if plan_name is not None else planned_tables(text)
    if not plans:
        raise FactorbenchError(f"{path} has no cost table: mark one with {' ... '.join(markers('PLAN'))}")
    new = text
    for plan in plans:
        begin, end = markers(plan)
        if begin not in new or end not in new or new.index(begin) > new.index(end):
            raise FactorbenchError(f"{path} has no {begin} ... {end} markers")
        start, stop = new.index(begin) + len(begin), new.index(end)
        new = new[:start] + "\n" + render_costs(plan, reference_dir) + "\n" + new[stop:]
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
                         lambda parser: parser.add_argument("--plan", default=None,
                                                            help="one plan's table (default: every plan's)"))


if __name__ == "__main__":
    raise SystemExit(main())

