"""SLURM for sweeps: typed settings checked before anything is submitted, submission through submitit with
clear errors, every submission's job ids kept (``slurm.json``), and what SLURM says about the jobs that are
not done (``squeue``, ``sacct``) for ``--status``.

Settings (``--slurm KEY=VALUE``, repeatable; :data:`SETTINGS` lists them with their types):

- ``time``: the limit of one attempt, in minutes or SLURM's ``[D-]HH:MM:SS`` forms; default 1,440 minutes,
  or the partition's MaxTime where that is shorter. SLURM sends USR2 ``signal_delay_s`` (default 120) before
  it; the job then checkpoints at its next step and is requeued, at most ``max_num_timeout`` (default 3)
  times; an attempt must leave at least :data:`MIN_WORK_S` seconds of work before the warning.
- ``partition``, ``account``, ``qos``, ``constraint``, ``exclude``, ``nodelist``, ``job_name``, ``comment``,
  ``mem`` (``16G``), ``cpus_per_task`` (default: ``--threads``, else 1), ``gpus_per_node``;
- ``setup``: a shell line run before the job (``module load cuda``, ``conda activate fb``), repeatable;
- ``sbatch.OPTION=VALUE``: any other sbatch option, passed as ``--OPTION=VALUE`` (``sbatch.reservation=x``).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from factorbench.generators.errors import FactorbenchError

__all__ = ["MIN_WORK_S", "SETTINGS", "SlurmSettings", "SlurmState", "latest_ids", "parse_slurm_settings",
           "parse_slurm_time", "partition_max_minutes", "read_submissions", "record_submission", "resolve_settings",
           "slurm_states", "submit_array"]

#: seconds of work an attempt must have before SLURM's USR2 warning (time - signal_delay_s)
MIN_WORK_S = 30
#: sacct/squeue states of a job that did not finish, with what they mean for the sweep
ENDED_BADLY = {"NODE_FAIL": "the node failed", "OUT_OF_MEMORY": "killed for exceeding its memory (raise mem)",
               "TIMEOUT": "hit its time limit too often", "CANCELLED": "cancelled", "FAILED": "failed",
               "PREEMPTED": "preempted", "BOOT_FAIL": "the node failed to boot", "DEADLINE": "missed its deadline"}


@dataclass(frozen=True)
class SlurmSettings:
    """What ``--slurm`` sets; None: SLURM's or the sweep's default."""

    partition: str | None = None
    #: minutes per attempt
    time: int | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    gpus_per_node: int | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    exclude: str | None = None
    nodelist: str | None = None
    job_name: str | None = None
    comment: str | None = None
    signal_delay_s: int = 120
    max_num_timeout: int = 3
    setup: tuple[str, ...] = ()
    #: other sbatch options (name, value)
    sbatch: tuple[tuple[str, str], ...] = ()

    def executor_parameters(self) -> dict[str, Any]:
        """The settings as submitit ``SlurmExecutor.update_parameters`` keywords (``max_num_timeout`` is the
        executor's own argument, not one of these)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)
                               if f.name not in ("setup", "sbatch", "max_num_timeout") and getattr(self, f.name) is not None}
        if self.setup:
            out["setup"] = list(self.setup)
        out["additional_parameters"] = {"requeue": True, **dict(self.sbatch)}
        return out


def parse_slurm_time(text: str) -> int:
    """SLURM's time forms (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``) as whole
    minutes (seconds rounded up), the unit submitit works in."""
    value = str(text).strip()
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", value)
    if not match:
        raise ValueError(f"{text!r} is not a SLURM time (minutes, MM:SS, HH:MM:SS or D-HH:MM:SS)")
    days, a, b, c = match.groups()
    parts = [int(x) for x in (a, b, c) if x is not None]
    if days is not None:  # D-HH, D-HH:MM, D-HH:MM:SS
        hours, minutes, seconds = (parts + [0, 0])[:3]
        total = ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    elif len(parts) == 1:
        total = parts[0] * 60
    elif len(parts) == 2:
        total = parts[0] * 60 + parts[1]
    else:
        total = (parts[0] * 60 + parts[1]) * 60 + parts[2]
    return -(-total // 60)


def _positive_int(text: str) -> int:
    if not re.fullmatch(r"\d+", text.strip()) or int(text) < 1:
        raise ValueError(f"{text!r} is not a positive whole number")
    return int(text)


def _count(text: str) -> int:
    if not re.fullmatch(r"\d+", text.strip()):
        raise ValueError(f"{text!r} is not a whole number >= 0")
    return int(text)


def _memory(text: str) -> str:
    if not re.fullmatch(r"\d+[KMGT]?", text.strip(), flags=re.IGNORECASE):
        raise ValueError(f"{text!r} is not a SLURM memory size (e.g. 16G, 4000M, 16000)")
    return text.strip().upper()


def _text(text: str) -> str:
    if not text.strip() or "\n" in text:
        raise ValueError("give a non-empty single-line value")
    return text.strip()


def _minutes(text: str) -> int:
    minutes = parse_slurm_time(text)
    if minutes < 1:
        raise ValueError(f"{text!r} is shorter than a minute")
    return minutes


@dataclass(frozen=True)
class Setting:
    parse: Callable[[str], Any]
    help: str
    repeatable: bool = False


#: every ``--slurm`` key: how its value is read, and what it means
SETTINGS: dict[str, Setting] = {
    "partition": Setting(_text, "partition to submit to (default: the cluster's default partition)"),
    "time": Setting(_minutes, "limit per attempt: minutes or [D-]HH:MM:SS (default 1440, or the partition's "
                              "MaxTime if shorter)"),
    "cpus_per_task": Setting(_positive_int, "CPU cores per job (default: --threads, else 1)"),
    "mem": Setting(_memory, "memory per job, e.g. 16G (default: the partition's)"),
    "gpus_per_node": Setting(_count, "GPUs per job, e.g. 1"),
    "account": Setting(_text, "account to charge"),
    "qos": Setting(_text, "quality of service"),
    "constraint": Setting(_text, "node features, e.g. 'a100|h100'"),
    "exclude": Setting(_text, "nodes to avoid"),
    "nodelist": Setting(_text, "nodes to use"),
    "job_name": Setting(_text, "job name (default factorbench-<plan>)"),
    "comment": Setting(_text, "job comment"),
    "signal_delay_s": Setting(_positive_int, "seconds between SLURM's USR2 warning and the time limit: the job "
                                             "checkpoints and is requeued in them (default 120)"),
    "max_num_timeout": Setting(_count, "how often one job may hit its time limit and be requeued (default 3)"),
    "setup": Setting(_text, "a shell line run before each job, e.g. 'module load cuda' (repeatable)", True),
}
SBATCH_PREFIX = "sbatch."


def _known_keys() -> str:
    return ", ".join([*SETTINGS, SBATCH_PREFIX + "OPTION"])


def parse_slurm_settings(items: Sequence[str] | None) -> SlurmSettings:
    """``--slurm KEY=VALUE`` items as :class:`SlurmSettings`, each value checked (a clear error names the
    key, what is wrong and the accepted form). ``-`` and ``_`` are the same in keys."""
    values: dict[str, Any] = {}
    setup: list[str] = []
    sbatch: dict[str, str] = {}
    for item in items or []:
        key, sep, value = str(item).partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise FactorbenchError(f"--slurm expects KEY=VALUE, got {item!r}; keys: {_known_keys()}")
        if key.startswith(SBATCH_PREFIX):
            option = key[len(SBATCH_PREFIX):].replace("_", "-")
            if not re.fullmatch(r"[a-z][a-z0-9-]*", option):
                raise FactorbenchError(f"--slurm {item}: {option!r} is not an sbatch option name")
            if option in ("array", "signal", "output", "error", "requeue", "open-mode"):
                raise FactorbenchError(f"--slurm {item}: the sweep sets --{option} itself")
            if option in sbatch:
                raise FactorbenchError(f"--slurm {key} given twice")
            sbatch[option] = value
            continue
        if key == "additional_parameters":
            raise FactorbenchError(f"--slurm {item}: give other sbatch options one by one as sbatch.OPTION=VALUE, "
                                   "e.g. --slurm sbatch.reservation=maint")
        spec = SETTINGS.get(key)
        if spec is None:
            raise FactorbenchError(f"--slurm {key}: unknown setting; choose one of {_known_keys()}")
        try:
            parsed = spec.parse(value)
        except ValueError as exc:
            raise FactorbenchError(f"--slurm {key}={value}: {exc} ({spec.help})") from None
        if spec.repeatable:
            setup.append(parsed)
        elif key in values:
            raise FactorbenchError(f"--slurm {key} given twice")
        else:
            values[key] = parsed
    settings = SlurmSettings(**values, setup=tuple(setup), sbatch=tuple(sorted(sbatch.items())))
    if settings.time is not None:
        check_time(settings)
    return settings


def check_time(settings: SlurmSettings) -> None:
    """An attempt leaves at least :data:`MIN_WORK_S` seconds of work before SLURM's USR2 warning."""
    if settings.time is not None and settings.time * 60 - settings.signal_delay_s < MIN_WORK_S:
        raise FactorbenchError(
            f"--slurm time={settings.time} (minutes) leaves {settings.time * 60 - settings.signal_delay_s} s before "
            f"the time-limit warning at signal_delay_s={settings.signal_delay_s}: each attempt would be requeued "
            f"before it trained; give time >= {-(-(settings.signal_delay_s + MIN_WORK_S) // 60)} minutes or a "
            "smaller signal_delay_s")


def _run(command: Sequence[str], timeout: float = 30.0) -> str | None:
    """stdout of a SLURM command; None where it is missing or fails."""
    if shutil.which(command[0]) is None:
        return None
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def partition_max_minutes(partition: str | None) -> tuple[str, int | None] | None:
    """(partition name, its MaxTime in minutes; None: infinite) of ``partition`` (None: the default one), from
    ``sinfo``; None where sinfo cannot tell. Raises for a partition the cluster does not have."""
    text = _run(["sinfo", "-h", "-o", "%P|%l"])
    if text is None:
        return None
    table: dict[str, str] = {}
    default = None
    for line in text.splitlines():
        name, _, limit = line.strip().partition("|")
        if name.endswith("*"):
            name = name[:-1]
            default = name
        table.setdefault(name, limit)
    name = partition or default
    if name is None:
        return None
    if name not in table:
        raise FactorbenchError(f"--slurm partition={name}: this cluster has no such partition; it has "
                               f"{', '.join(sorted(table))}")
    limit = table[name].strip()
    if limit in ("infinite", "UNLIMITED", "n/a", ""):
        return name, None
    try:
        return name, parse_slurm_time(limit)
    except ValueError:
        return name, None


DEFAULT_TIME_MIN = 24 * 60


def resolve_settings(settings: SlurmSettings, threads: int | None, plan_name: str) -> SlurmSettings:
    """Fill the sweep's defaults (time, cpus_per_task, job_name) and check the time against the partition's
    MaxTime (a job asking for more would stay pending for ever)."""
    limits = partition_max_minutes(settings.partition)
    max_time = limits[1] if limits else None
    time = settings.time
    if time is None:
        time = DEFAULT_TIME_MIN if max_time is None else min(DEFAULT_TIME_MIN, max_time)
    elif max_time is not None and time > max_time:
        raise FactorbenchError(f"--slurm time={time} (minutes) is longer than partition {limits[0]}'s MaxTime of "
                               f"{max_time} minutes, so SLURM would never start the jobs; give time={max_time} or "
                               "less (longer runs continue over several attempts: max_num_timeout)")
    out = replace(settings, time=time, cpus_per_task=settings.cpus_per_task or threads or 1,
                  job_name=settings.job_name or f"factorbench-{plan_name}")
    check_time(out)
    return out


def submit_array(executor: Any, fn: Any, arguments: Sequence[Any]) -> list[Any]:
    """``executor.map_array(fn, arguments)`` with sbatch's refusal as a :class:`FactorbenchError` (its own
    words, e.g. 'invalid partition specified')."""
    from submitit.core.utils import FailedJobError, FailedSubmissionError

    try:
        return executor.map_array(fn, list(arguments))
    except (FailedJobError, FailedSubmissionError, subprocess.CalledProcessError, OSError) as exc:
        text = str(getattr(exc, "stderr", None) or getattr(exc, "output", None) or exc)
        if isinstance(text, bytes):
            text = text.decode(errors="replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        raise FactorbenchError("SLURM refused the submission: " + "; ".join(lines[-3:] or [type(exc).__name__])
                               + "\nCheck the --slurm settings (partition, account, qos, time, mem) against "
                               "`sinfo` and your site's documentation") from None


# ----------------------------------------------------------------------------------------- submissions

SUBMISSIONS = "slurm.json"


def read_submissions(sweep_dir: Path) -> list[dict[str, Any]]:
    """Every submission of the sweep, oldest first: ``{"array", "submitted", "jobs": {job id: SLURM id}}``
    (a file written before submissions were kept counts as one)."""
    path = Path(sweep_dir) / SUBMISSIONS
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, json.JSONDecodeError) as exc:
        raise FactorbenchError(f"{path} is unreadable ({exc}); move it away (it only lists submitted jobs)") from None
    if isinstance(data, dict) and "submissions" in data:
        return list(data["submissions"])
    if isinstance(data, dict) and "jobs" in data:
        ids = dict(data["jobs"])
        return [{"array": next(iter(ids.values()), "").split("_")[0], "submitted": None, "jobs": ids}]
    return []


def record_submission(sweep_dir: Path, ids: Mapping[str, str], write: Callable[[Path, str], object]) -> None:
    """Append a submission (job id -> SLURM id) to ``slurm.json``, keeping the earlier ones."""
    submissions = read_submissions(sweep_dir)
    submissions.append({"array": next(iter(ids.values()), "").split("_")[0],
                        "submitted": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                        "jobs": dict(ids)})
    write(Path(sweep_dir) / SUBMISSIONS, json.dumps({"submissions": submissions}, indent=1, sort_keys=True))


def latest_ids(sweep_dir: Path) -> dict[str, str]:
    """job id -> the SLURM id of its latest submission."""
    out: dict[str, str] = {}
    for submission in read_submissions(sweep_dir):
        out.update(submission.get("jobs") or {})
    return out


def _expand_array_ids(job_id: str) -> list[str]:
    """``123_[0-2,5%4]`` -> 123_0, 123_1, 123_2, 123_5 (squeue and sacct print pending array tasks so)."""
    match = re.fullmatch(r"(\d+)_\[([^\]]+)\]", job_id)
    if not match:
        return [job_id]
    array, spec = match.group(1), match.group(2).split("%")[0]
    out = []
    for part in spec.split(","):
        low, _, high = part.partition("-")
        out += [f"{array}_{i}" for i in range(int(low), int(high or low) + 1)]
    return out


@dataclass(frozen=True)
class SlurmState:
    """What SLURM says about one job: its state (PENDING, RUNNING, NODE_FAIL, ...), the reason it waits or
    ended, and its id."""

    slurm_id: str
    state: str
    reason: str = ""

    def describe(self) -> str:
        meaning = ENDED_BADLY.get(self.state)
        reason = self.reason if self.reason and self.reason not in ("None", "(null)") else ""
        return (f"SLURM {self.slurm_id}: {self.state}" + (f", {meaning}" if meaning else "")
                + (f" ({reason})" if reason else ""))


def slurm_states(sweep_dir: Path, job_ids: Sequence[str]) -> dict[str, SlurmState]:
    """job id -> what ``squeue`` (queued and running jobs, with the reason they wait) or else ``sacct`` (the
    latest record of an ended one) says about its latest submission; empty where SLURM's commands are not
    here or the sweep never submitted to SLURM."""
    ids = latest_ids(sweep_dir)
    wanted = {ids[j]: j for j in job_ids if j in ids}
    if not wanted:
        return {}
    arrays = sorted({s.split("_")[0] for s in wanted})
    found: dict[str, SlurmState] = {}
    text = _run(["sacct", "-n", "-X", "-P", "-j", ",".join(arrays), "-o", "JobID,State,Reason"])
    for line in (text or "").splitlines():
        parts = line.split("|")
        if len(parts) >= 2:
            state = parts[1].split()[0] if parts[1] else ""
            for sid in _expand_array_ids(parts[0]):
                found[sid] = SlurmState(sid, state, parts[2] if len(parts) > 2 else "")
    text = _run(["squeue", "-h", "-r", "-j", ",".join(arrays), "-o", "%i|%T|%r"])
    for line in (text or "").splitlines():
        parts = line.split("|")
        if len(parts) == 3:
            for sid in _expand_array_ids(parts[0]):
                if parts[1] == "COMPLETING" and sid in found:  # sacct already says how it ended
                    continue
                found[sid] = SlurmState(sid, parts[1], parts[2])
    return {wanted[sid]: found[sid] for sid in wanted if sid in found}

