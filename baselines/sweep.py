"""Sweeps: a plan's jobs trained and evaluated through submitit, resumable, idempotent, with status.

A sweep directory (default ``$FACTORBENCH_SWEEPS/<plan name>``, i.e. ``~/.cache/factorbench/sweeps/...``)
holds

- ``runs/<run hash>/``: one training run per job, named by its run hash (model config + training data);
- ``results/<protocol>/<name>/seed<K>.json``: one evaluation result per (protocol, model, seed), written
  atomically (temporary file + rename) once the evaluation is complete;
- ``jobs/<name>/<dataset>/seed<K>.json``: the job's state (running, interrupted, failed with its error,
  done), attempts, CPU and wall seconds; ``seed<K>.lock``: held (``flock``) while a process works on it;
- ``plans/<plan hash>.json``: every version of the plan that ran here; ``submitit/``: submitit's logs.

A job is done when every protocol's result exists and matches the job (config hash, protocol hash,
dataset spec hash and training split); done jobs are skipped without touching a file. An unfinished job
resumes its run from the last checkpoint (runs resume bit-identically). A result whose job now asks for
something else (an entry edited after it ran) is an error before any work: finished entries are never
changed, a new setting is a new entry.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import errno
import fcntl
import functools
import json
import os
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from submitit.helpers import Checkpointable

from factorbench.benchmark.environment import environment_record
from factorbench.generators.errors import FactorbenchError
from factorbench.generators.outputs import check_output_dir, temporaries_of, write_atomically

from . import models  # noqa: F401  (registers every model: the plan's configs are built in the jobs)
from .gpus import DEFAULT_PACK, GpuSlots, visible_gpus
from .plan import Job, Plan, expand, select
from .slurm import (SlurmSettings, parse_slurm_settings, record_submission, resolve_settings, slurm_states,
                    submit_array)

__all__ = ["ENGINES", "EngineRequest", "JobStatus", "PackedSweepJob", "SweepInterrupted", "SweepJob", "SweepOptions",
           "check_finished_unchanged", "collect", "default_sweep_dir", "format_status", "job_done", "restore",
           "result_path", "run_job", "run_sweep", "state_path", "sweep_status"]

SWEEPS_ENV = "FACTORBENCH_SWEEPS"
#: job states as :func:`sweep_status` reports them
STATES = ("done", "running", "failed", "interrupted", "left")


class SweepInterrupted(FactorbenchError):
    """The sweep was stopped (Ctrl-C or SIGTERM); its running jobs checkpointed."""

    exit_status = 130


@dataclass(frozen=True)
class SweepOptions:
    """How the jobs run (none of this changes a run's hash or a result's scores)."""

    device: str = "auto"
    precision: str = "auto"
    #: CPU threads per job (PyTorch, and the BLAS of the metrics); None: the libraries' defaults
    threads: int | None = None
    checkpoint_every_s: float = 120.0
    #: write samples.png into each run
    samples: bool = True
    #: seconds between updates of the job's record (its CPU and wall time so far) while it runs
    record_every_s: float = 30.0
    #: (generator, path) pairs: the user's copy of each dataset made from outside data (coil100, modelnet40)
    sources: tuple[tuple[str, str], ...] = ()
    #: processes that generate a dataset the jobs need and the cache lacks (the other jobs wait for it)
    data_workers: int = 1

    def source_for(self, generator: str) -> str | None:
        return dict(self.sources).get(generator)


def default_sweep_dir(plan: Plan) -> Path:
    """``$FACTORBENCH_SWEEPS/<plan name>``; default ``$XDG_CACHE_HOME/factorbench/sweeps`` (``~/.cache/...``).
    Named by the plan's name, not its hash: appending an entry keeps the finished jobs."""
    if os.environ.get(SWEEPS_ENV):
        root = Path(os.environ[SWEEPS_ENV]).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = Path(base) / "factorbench" / "sweeps"
    return root / plan.name


# ----------------------------------------------------------------------------------------------- paths

def result_path(sweep_dir: Path, protocol: str, job: Job) -> Path:
    return Path(sweep_dir) / "results" / protocol / job.entry.name / f"seed{job.seed}.json"


def state_path(sweep_dir: Path, job: Job) -> Path:
    return Path(sweep_dir) / "jobs" / job.entry.name / job.dataset.name / f"seed{job.seed}.json"


def _lock_path(sweep_dir: Path, job: Job) -> Path:
    return state_path(sweep_dir, job).with_suffix(".lock")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise FactorbenchError(f"{path} is unreadable ({exc}); move it away and run the sweep again") from None


# ----------------------------------------------------------------------------------- what a job must match

@functools.lru_cache(maxsize=None)
def _protocol_identity(protocol: str) -> tuple[str, str | None]:
    """(protocol hash, dataset spec hash) of a protocol, without touching its data. The spec of a dataset
    made from the user's copy depends on that copy: None here (:func:`check_source_copies` compares it
    when the copy is given)."""
    from factorbench.benchmark.cache import dataset_spec
    from factorbench.benchmark.protocols import get_protocol

    p = get_protocol(protocol)
    return p.hash(), None if p.needs_source else dataset_spec(p.dataset).hash()


def _mismatch(result: Mapping[str, Any], job: Job, protocol: str) -> str:
    """Why a result file does not belong to ``job`` under ``protocol`` ('' when it does)."""
    protocol_hash, spec_hash = _protocol_identity(protocol)
    training = result.get("training") or {}
    data = training.get("training_data") or {}
    if result.get("protocol_hash") != protocol_hash:
        return f"protocol hash {str(result.get('protocol_hash'))[:12]}, the current {protocol} has {protocol_hash[:12]}"
    if training.get("config_hash") != job.config.hash():
        return (f"config hash {str(training.get('config_hash'))[:12]}, the plan now gives {job.config.hash()[:12]} "
                f"({job.config.to_json()})")
    if (spec_hash is not None and data.get("spec_hash") != spec_hash) or data.get("split") != job.dataset.split:
        return f"trained on other data (spec {str(data.get('spec_hash'))[:12]}, split {data.get('split')!r})"
    if result.get("partial"):
        return "a partial evaluation"
    return ""


def _result_state(sweep_dir: Path, job: Job, protocol: str) -> str:
    """'done', 'missing', or the reason the existing file does not match."""
    data = _read_json(result_path(sweep_dir, protocol, job))
    if data is None:
        return "missing"
    return _mismatch(data, job, protocol) or "done"


def _finished_result(sweep_dir: Path, job: Job, protocol: str) -> Any:
    """The job's result under ``protocol`` where it is done (:func:`_result_state`), else None; read once."""
    data = _read_json(result_path(Path(sweep_dir), protocol, job))
    return data if data is not None and not _mismatch(data, job, protocol) else None


def _weights_of(result: Any) -> Any:
    """The ``weights_sha256`` a result scored (None where it records none)."""
    return ((result or {}).get("training") or {}).get("weights_sha256")


def _scored_weights(sweep_dir: Path, job: Job) -> set[Any]:
    """The ``weights_sha256`` of the job's finished results (one value when its protocols score one run)."""
    finished = (_finished_result(sweep_dir, job, p) for p in job.protocols)
    return {_weights_of(result) for result in finished if result is not None}


def job_done(job: Job, sweep_dir: Path) -> bool:
    """Every protocol of the job has its matching result (reads the result files, nothing else)."""
    return all(_result_state(Path(sweep_dir), job, p) == "done" for p in job.protocols)


def check_finished_unchanged(jobs: Sequence[Job], sweep_dir: Path) -> None:
    """Refuse (before any work) a plan that changed a job whose results exist: scores are never tuned."""
    problems = []
    for job in jobs:
        for p in job.protocols:
            state = _result_state(Path(sweep_dir), job, p)
            if state not in ("done", "missing"):
                problems.append(f"{job.id} under {p}: {result_path(Path(sweep_dir), p, job)} has {state}")
    if problems:
        raise FactorbenchError("the plan changed jobs that already have results:\n  " + "\n  ".join(problems[:10])
                               + ("\n  ..." if len(problems) > 10 else "") + "\nA finished entry is never changed: "
                               "give the changed settings a new entry (name = ...), or use another sweep directory")


def check_precision(jobs: Sequence[Job], rows: Mapping[tuple[str, str], Mapping[int, str]], sweep_dir: Path,
                    precision: str) -> None:
    """Refuse (before any work) ``--precision P`` where finished jobs were trained in another precision: a
    job's precision is part of what it computes (bf16 and fp32 runs of one config differ in every score),
    so an fp32 replicate of bf16 rows is another sweep directory, not a rerun. ``auto`` takes the jobs as
    they are. ``rows``: :func:`_row_precisions` of the plan's jobs."""
    if precision == "auto":
        return
    other: dict[str, list[str]] = {}
    for job in jobs:
        trained = rows.get((job.entry.name, job.dataset.name), {}).get(job.seed)
        if trained not in (None, precision):
            other.setdefault(trained, []).append(job.id)
    if other:
        listed = "; ".join(f"{len(ids)} in {prec} ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''})"
                           for prec, ids in sorted(other.items()))
        raise FactorbenchError(f"--precision {precision}: finished jobs of {sweep_dir} were trained in another "
                               f"precision: {listed}. A job's precision is part of what it computes: for {precision} "
                               "replicates use another sweep directory (--dir), or leave --precision auto to keep these")


def _trained_precision(sweep_dir: Path, job: Job) -> str | None:
    """The precision a finished job trained in (from its first finished result); None when it has no finished
    result, or its result predates the record."""
    for p in job.protocols:
        result = _read_json(result_path(sweep_dir, p, job))
        if result is None or _mismatch(result, job, p):  # not a finished result of this job
            continue
        trained = ((result.get("training") or {}).get("trained") or {}).get("precision")
        return None if trained is None else str(trained)
    return None


def _row_precisions(jobs: Sequence[Job], sweep_dir: Path) -> dict[tuple[str, str], dict[int, str]]:
    """(entry, dataset) -> seed -> the precision that seed finished in."""
    rows: dict[tuple[str, str], dict[int, str]] = {}
    for job in jobs:
        trained = _trained_precision(sweep_dir, job)
        if trained is not None:
            rows.setdefault((job.entry.name, job.dataset.name), {})[job.seed] = trained
    return rows


def _by_precision(row: Mapping[int, str], but: int | None = None) -> dict[str, list[int]]:
    """precision -> seeds of ``row`` (seed -> precision), leaving out seed ``but``."""
    out: dict[str, list[int]] = {}
    for seed, precision in sorted(row.items()):
        if seed != but:
            out.setdefault(precision, []).append(seed)
    return out


def _seeds_in(precisions: Mapping[str, Sequence[int]]) -> str:
    return "; ".join(f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, sorted(seeds)))} in {prec}"
                     for prec, seeds in sorted(precisions.items(), key=lambda item: min(item[1])))


def check_row_precision(todo: Sequence[Job], rows: Mapping[tuple[str, str], Mapping[int, str]],
                        precision: str) -> None:
    """Refuse (before any work) to train a job in ``precision`` beside other seeds of its row (same entry and
    dataset) that finished in another: a row's seeds share one precision, or its spread measures the
    precision as well as the seed. With ``--precision auto`` this is what happens when a row's seeds are
    trained on machines of different kinds (bf16 units or not). The job's own earlier results do not count:
    a job that trains again scores every protocol again on its new weights. ``rows``: :func:`_row_precisions`
    of the plan's jobs."""
    clashes = []
    for job in todo:
        others = _by_precision(rows.get((job.entry.name, job.dataset.name), {}), but=job.seed)
        if set(others) - {precision}:
            clashes.append((job, others))
    if clashes:
        listed = "; ".join(f"{job.id} (its row has {_seeds_in(others)})" for job, others in clashes[:4])
        more = f"; and {len(clashes) - 4} more" if len(clashes) > 4 else ""
        jobs = f"{len(clashes)} job{'s' if len(clashes) != 1 else ''}"
        raise FactorbenchError(f"{jobs} would train in {precision} beside "
                               f"finished seeds of their row trained in another precision: {listed}{more}. A row's "
                               "seeds share one precision: train these in their row's (--precision P; bf16 on a CPU "
                               "without bf16 units is emulated, about 9x slower), on a machine where --precision "
                               "auto gives it, or leave them out (--only)")


# ------------------------------------------------------------------------------------------------ locks

#: how long a starting job keeps trying for its lock before it calls the job busy: a status probe holds the
#: lock for microseconds, a job that runs holds it for hours
LOCK_RETRY_S = 5.0


def _flock(fh: Any, operation: int, path: Path) -> bool:
    """``flock(fh, operation | LOCK_NB)``: True if taken, False if another process holds it. A file system
    without ``flock`` (Lustre mounted without ``-o flock``, some NFS setups) is a clear error."""
    try:
        fcntl.flock(fh, operation | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK):
            raise FactorbenchError(f"the file system of {path.parent} does not support file locks (flock: "
                                   f"{exc.strerror}); a sweep needs them to run each job once. Put the sweep "
                                   "directory (--dir) on a file system with locks (on Lustre: mounted with -o flock)"
                                   ) from None
        raise


def check_locks(sweep_dir: Path) -> None:
    """The sweep directory's file system supports ``flock`` (checked before any job starts)."""
    path = Path(sweep_dir) / "jobs" / ".flock-test"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        if _flock(fh, fcntl.LOCK_SH, path):
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def _job_lock(sweep_dir: Path, job: Job, retry_s: float = LOCK_RETRY_S) -> Iterator[bool]:
    """Hold the job's lock (exclusive) while the body runs; yields False (holding nothing) when another process
    keeps it for ``retry_s`` seconds. The lock dies with its process, so a killed job is never 'running' for
    ever."""
    path = _lock_path(sweep_dir, job)
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a")
    try:
        deadline = time.monotonic() + retry_s
        while not _flock(fh, fcntl.LOCK_EX, path):
            if time.monotonic() >= deadline:
                yield False
                return
            time.sleep(0.05)
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
    finally:
        fh.close()


def _lock_held(sweep_dir: Path, job: Job) -> bool:
    """Whether a process holds the job's lock. The probe takes a shared lock, which never keeps another probe
    out, and a job starting at that moment retries (:data:`LOCK_RETRY_S`) instead of calling itself busy."""
    path = _lock_path(sweep_dir, job)
    if not path.exists():
        return False
    with open(path, "a") as fh:
        if not _flock(fh, fcntl.LOCK_SH, path):
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False


@contextmanager
def _dataset_lock(ref_generator: str) -> Iterator[None]:
    """Serialise preparing one dataset (generation, added splits) across the jobs of all sweeps."""
    from factorbench.benchmark.cache import data_dir

    directory = data_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / f".{ref_generator}.prepare.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# ---------------------------------------------------------------------------------------------- one job

def _job_source(job: Job, options: SweepOptions) -> str | None:
    """The user's copy of the job's data when its protocols are built from outside data, else None."""
    from factorbench.benchmark.protocols import get_protocol

    refs = [get_protocol(p).dataset for p in job.protocols]
    return next((options.source_for(r.generator) for r in refs if r.needs_source), None)


def check_sources(jobs: Sequence[Job], options: SweepOptions) -> None:
    """Every job whose protocols are built from the user's data has a ``--source`` that exists (checked
    before any job starts)."""
    from factorbench.benchmark.protocols import get_protocol

    for job in jobs:
        for p in job.protocols:
            ref = get_protocol(p).dataset
            if not ref.needs_source:
                continue
            path = options.source_for(ref.generator)
            if path is None:
                raise FactorbenchError(f"{job.id}: protocol {p} is built from your copy of {ref.generator}; pass "
                                       f"--source {ref.generator}=PATH (see `factorbench protocols {p}`)")
            if not Path(path).exists():
                raise FactorbenchError(f"--source {ref.generator}={path}: no such file or folder")


def check_source_copies(jobs: Sequence[Job], sweep_dir: Path, options: SweepOptions) -> None:
    """The results already in the sweep for a dataset made from the user's data were trained on the copy
    given now (the same dataset spec, whose params hold the copy's digest): a sweep never mixes copies."""
    from factorbench.benchmark.cache import dataset_spec
    from factorbench.benchmark.protocols import get_protocol

    expected: dict[str, str] = {}
    for job in jobs:
        for p in job.protocols:
            ref = get_protocol(p).dataset
            source = options.source_for(ref.generator) if ref.needs_source else None
            data = _read_json(result_path(sweep_dir, p, job)) if source is not None else None
            if data is None:
                continue
            if p not in expected:
                expected[p] = dataset_spec(ref, source).hash()
            have = ((data.get("training") or {}).get("training_data") or {}).get("spec_hash")
            if have != expected[p]:
                raise FactorbenchError(
                    f"{job.id} under {p} was trained on another copy of {ref.generator} (dataset spec "
                    f"{str(have)[:12]}) than --source {source} (spec {expected[p][:12]}); give the copy the sweep "
                    "used, or another sweep directory (--dir): results of two copies are never mixed")


def _prepare_data(job: Job, options: SweepOptions = SweepOptions()) -> Path:
    """The dataset file every protocol of the job evaluates on (generated and given their splits once)."""
    from factorbench.benchmark.cache import prepare_dataset
    from factorbench.benchmark.protocols import get_protocol

    paths = set()
    source = _job_source(job, options)
    with _dataset_lock(job.dataset.name):
        for p in job.protocols:
            paths.add(prepare_dataset(get_protocol(p).dataset, source=source, progress=False,
                                      workers=options.data_workers))
    if len(paths) != 1:  # the plan's check makes this impossible
        raise FactorbenchError(f"{job.id}: the protocols {', '.join(job.protocols)} use different files "
                               f"{sorted(paths)}")
    return paths.pop()


def _train_and_evaluate(job: Job, sweep_dir: Path, plan: Plan, options: SweepOptions,
                        started: Callable[[str], None], stop: threading.Event | None = None) -> None:
    """Prepare the data, train (or resume) the run, evaluate each protocol without a result yet;
    ``started(run_hash)`` is called once the run is known. Setting ``stop`` stops the training with a
    checkpoint, or the evaluation before its next protocol (:class:`TrainingInterrupted` either way)."""
    from factorbench.benchmark.evaluation import evaluate

    from .data import data_identity
    from .runs import RunSpec, load_run
    from .trainer import TrainingInterrupted, TrainOptions, train

    path = _prepare_data(job, options)
    config = job.config
    run_hash = RunSpec(config, data_identity(path, job.dataset.split)).hash()
    started(run_hash)
    run_dir = sweep_dir / "runs" / run_hash
    train(config, path, run_dir, split=job.dataset.split, resume=True,
          options=TrainOptions(device=options.device, precision=options.precision, threads=options.threads,
                               checkpoint_every_s=options.checkpoint_every_s, progress=False,
                               samples=options.samples), stop=stop)
    encoder = load_run(run_dir)
    weights = encoder.provenance.get("weights_sha256")
    for protocol in job.protocols:
        if stop is not None and stop.is_set():
            raise TrainingInterrupted(f"stopped before evaluating {protocol}; the run in {run_dir} is complete")
        out = result_path(sweep_dir, protocol, job)
        for stale in temporaries_of(out):  # left by a process killed while writing
            stale.unlink(missing_ok=True)
        finished = _finished_result(sweep_dir, job, protocol)
        if finished is not None:
            scored = _weights_of(finished)
            if scored == weights:
                continue
            # e.g. restored from another machine while a protocol added to the plan trained the job again: a
            # job's protocols always score one set of weights, so the older result is scored again
            print(f"{job.id} under {protocol}: the result there scored other weights ({str(scored)[:12]}) than "
                  f"this run's ({str(weights)[:12]}); scoring it again on this run", file=sys.stderr, flush=True)
        start = time.perf_counter()
        result = evaluate(protocol, encoder, progress=False, source=_job_source(job, options))
        wall = time.perf_counter() - start
        training = {**result.training, "sweep": {
            "plan": plan.name, "plan_hash": plan.hash(), "job": job.id, "job_index": job.index,
            "dataset": job.dataset.name, "seed": job.seed, "host": socket.gethostname(),
            "evaluation_wall_time_s": wall}}
        result = dataclasses.replace(result, model=job.entry.name, training=training,
                                     dataset={k: v for k, v in result.dataset.items() if k != "path"},
                                     timings={**result.timings, "wall": wall})
        write_atomically(out, result.to_json())


def _describe(exc: BaseException) -> str:
    if isinstance(exc, FactorbenchError):
        return str(exc)
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return "".join(lines[-3:]).strip()


def run_job(job: Job, sweep_dir: str | os.PathLike, plan: Plan, options: SweepOptions = SweepOptions(),
            stop: threading.Event | None = None) -> str:
    """Train the job's model (resuming its run) and evaluate it under each protocol of its dataset.
    Returns "skipped" (already done; nothing is written), "busy" (another process holds the job) or
    "done". Records the state, its error and the CPU time in ``jobs/``; re-raises a failure. ``stop``: set
    from another thread, it stops the job as SIGTERM does (a checkpoint, state "interrupted")."""
    sweep_dir = Path(sweep_dir)
    if job_done(job, sweep_dir):
        return "skipped"
    with _job_lock(sweep_dir, job) as mine:
        if not mine:
            return "busy"
        if job_done(job, sweep_dir):
            return "skipped"
        # read once now (and kept): the commit and machine its results record are the ones this process loaded
        # its code from, even where the checkout moves on while the job trains
        environment_record()
        path = state_path(sweep_dir, job)
        before = _read_json(path) or {}
        cpu0, wall0 = time.process_time(), time.perf_counter()
        record = {"job": job.id, "index": job.index, "config_hash": job.config.hash(), "plan_hash": plan.hash(),
                  "attempts": int(before.get("attempts", 0)) + 1, "host": socket.gethostname(), "pid": os.getpid(),
                  "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES") or None,
                  "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                  "steps": job.config.steps}

        writing = threading.Lock()
        finished = threading.Event()

        def save(state: str, error: str = "") -> None:
            with writing:
                if finished.is_set():
                    return
                if state != "running":
                    finished.set()
                write_atomically(path, json.dumps({
                    **record, "state": state, "error": error,
                    "cpu_s": float(before.get("cpu_s", 0.0)) + time.process_time() - cpu0,
                    "wall_s": float(before.get("wall_s", 0.0)) + time.perf_counter() - wall0,
                    "updated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")},
                    indent=1, sort_keys=True))

        def started(run_hash: str) -> None:
            record["run_hash"] = run_hash
            # steps the run had before the sweep first ran this job (a run trained elsewhere and placed in
            # runs/): they cost the sweep no CPU time, so the status estimate leaves them out
            record["external_steps"] = int(before["external_steps"]) if "external_steps" in before \
                else _run_step(sweep_dir / "runs" / run_hash, job.config.steps)
            save("running")

        def heartbeat() -> None:  # CPU time so far, so that a job killed without warning still counts it
            while not finished.wait(options.record_every_s):
                save("running")

        save("running")
        threading.Thread(target=heartbeat, name="factorbench-job-record", daemon=True).start()
        limits = nullcontext()
        if options.threads is not None:
            from threadpoolctl import threadpool_limits

            limits = threadpool_limits(options.threads)
        try:
            with limits:
                _train_and_evaluate(job, sweep_dir, plan, options, started, stop)
        except FactorbenchError as exc:
            if getattr(exc, "exit_status", 2) == 130:  # stopped with a checkpoint: resumes on the next run
                save("interrupted", str(exc).split(";")[0])
            else:
                save("failed", _describe(exc))
            raise
        except (KeyboardInterrupt, SystemExit) as exc:  # Ctrl-C; submitit's exit after a requeue
            save("interrupted", type(exc).__name__)
            raise
        except BaseException as exc:
            save("failed", _describe(exc))
            raise
        save("done")
        return "done"


#: the longest a job killed by SLURM (preemption, scancel) waits for SLURM's SIGKILL after its checkpoint
SLURM_KILL_WAIT_S = 900.0


@contextmanager
def _sigterm_stops_the_job() -> Iterator[None]:
    """A local job's answer to SIGTERM outside training, where the trainer's handler (a checkpoint at the next
    step) is not installed: while it prepares its data or evaluates its run, the job stops at once with
    :class:`~factorbench.baselines.trainer.TrainingInterrupted` (state "interrupted"), as Ctrl-C stops a
    command. Without it submitit's job process ignores SIGTERM there, and a sweep stopped then waited and killed
    the job's controller only, leaving the job running. Stopping there loses nothing: data and results are
    written whole or not at all, and the run's checkpoints stay."""

    def handler(signum: int, frame: Any) -> None:
        from .trainer import TrainingInterrupted

        raise TrainingInterrupted("stopped while preparing the data or evaluating; the run's checkpoints stay")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class SweepJob(Checkpointable):
    """The callable submitit runs: ``SweepJob(plan, dir, options, engine)(job_id)``.

    Locally the trainer answers SIGTERM and Ctrl-C itself (checkpoint, then "interrupted"). Under SLURM the
    job trains in a worker thread while the main thread keeps the signals, so that SLURM decides what
    happens to the job:

    - SIGTERM (preemption with a grace time, ``scancel``, the time limit): the worker checkpoints at its next
      step, then the job waits for SLURM's SIGKILL instead of exiting, so SLURM records PREEMPTED and
      requeues it (``--requeue``) rather than FAILED;
    - USR2 (``signal_delay_s`` before the time limit): submitit calls :meth:`checkpoint`, which stops the
      worker and waits for its checkpoint before submitit requeues the job, so no step is lost.

    A requeued job runs the same call and resumes the run from that checkpoint."""

    def __init__(self, plan: Plan, sweep_dir: str | os.PathLike, options: SweepOptions, engine: str = "local",
                 signal_delay_s: float = 120.0) -> None:
        self.plan = plan
        self.sweep_dir = str(sweep_dir)
        self.options = options
        self.engine = engine
        self.signal_delay_s = float(signal_delay_s)
        self._stop: threading.Event | None = None
        self._worker: threading.Thread | None = None

    def __getstate__(self) -> dict[str, Any]:  # submitit pickles the call; the running job's handles stay here
        return {k: v for k, v in self.__dict__.items() if k not in ("_stop", "_worker")}

    def __setstate__(self, state: dict[str, Any]) -> None:  # a call pickled before engine existed runs as local
        self.__dict__.update({"engine": "local", "signal_delay_s": 120.0, **state, "_stop": None, "_worker": None})

    def __call__(self, job_id: str) -> str:
        job = {j.id: j for j in expand(self.plan)}[job_id]
        if threading.current_thread() is not threading.main_thread():
            return run_job(job, self.sweep_dir, self.plan, self.options)
        if self.engine != "slurm":
            with _sigterm_stops_the_job():
                return run_job(job, self.sweep_dir, self.plan, self.options)
        return self._run_in_worker(job)

    def _run_in_worker(self, job: Job) -> str:
        stop, killed = threading.Event(), threading.Event()
        outcome: dict[str, Any] = {}

        def work() -> None:
            try:
                outcome["result"] = run_job(job, self.sweep_dir, self.plan, self.options, stop=stop)
            except BaseException as exc:  # noqa: BLE001  (handed to the main thread)
                outcome["error"] = exc

        def on_sigterm(signum: int, frame: Any) -> None:
            killed.set()
            stop.set()

        # daemon: a job that must exit (submitit's requeue) never waits for an evaluation to end
        worker = threading.Thread(target=work, name="factorbench-sweep-job", daemon=True)
        self._stop, self._worker = stop, worker
        previous = signal.signal(signal.SIGTERM, on_sigterm)
        try:
            worker.start()
            try:
                while worker.is_alive():
                    worker.join(0.2)
            except KeyboardInterrupt:
                stop.set()
                worker.join(self.signal_delay_s)
                raise
            if killed.is_set():
                # checkpointed; SLURM kills the job after its grace time and requeues it if it preempted it:
                # exiting now would make SLURM record FAILED and never requeue
                deadline = time.monotonic() + SLURM_KILL_WAIT_S
                while time.monotonic() < deadline:
                    time.sleep(1.0)
        finally:
            signal.signal(signal.SIGTERM, previous)
        if "error" in outcome:
            raise outcome["error"]
        return str(outcome["result"])

    def checkpoint(self, job_id: str) -> Any:
        """submitit's hook before it requeues the job (USR2): stop the worker and wait (up to the warning's
        ``signal_delay_s`` less a margin) for its checkpoint, then requeue the same call."""
        if self._stop is not None:
            self._stop.set()
        if self._worker is not None:
            self._worker.join(max(self.signal_delay_s - 20.0, 5.0))
        return super().checkpoint(job_id)


class PackedSweepJob(SweepJob):
    """Under SLURM with ``--pack K``: ``PackedSweepJob(...)(group)`` runs in each of the K tasks of one array
    task (``ntasks_per_node=K``, sharing the allocation and its GPU), task ``r`` the group's ``r``-th job as
    :class:`SweepJob` would. submitit lets only task 0 checkpoint and requeue on USR2; the other tasks stop
    their own job at its next step on USR2 (a checkpoint), so a requeued group loses no step."""

    def __call__(self, group: tuple[str, ...]) -> str:  # type: ignore[override]
        import submitit

        rank = submitit.JobEnvironment().global_rank
        if rank >= len(group):
            return "idle"
        if rank != 0 and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGUSR2, lambda signum, frame: self._stop.set() if self._stop is not None else None)
        return super().__call__(group[rank])


# -------------------------------------------------------------------------------------------- engines

@dataclass(frozen=True)
class EngineRequest:
    plan: Plan
    jobs: tuple[Job, ...]
    sweep_dir: Path
    parallel: int
    options: SweepOptions
    #: SLURM's settings (``--slurm KEY=VALUE``); None for the local engine
    slurm: SlurmSettings | None = None
    echo: Callable[[str], None] = print
    #: locally: the GPUs jobs train on (each job gets one as its CUDA_VISIBLE_DEVICES); empty: none
    gpus: tuple[int, ...] = ()
    #: jobs per GPU (locally), jobs per SLURM task group (under SLURM)
    pack: int = 1


@contextmanager
def _sigterm_flag() -> Iterator[threading.Event]:
    """An event set by SIGTERM (Ctrl-C stays a KeyboardInterrupt)."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)


def _failure_text(sweep_dir: Path, job: Job, exc: BaseException, record_failure: bool = True) -> str:
    """The job's error as it recorded it, else the last error line of submitit's report (then recorded as a
    failure, unless the sweep is stopping)."""
    path = state_path(sweep_dir, job)
    record = _read_json(path) or {}
    if record.get("state") in ("failed", "interrupted") and record.get("error"):
        return str(record["error"]).strip().splitlines()[-1]
    lines = str(exc).splitlines()
    errors = [line for line in lines if line and not line[0].isspace() and ("Error" in line or "Exception" in line)
              and not line.startswith(("Traceback", "You can check"))]
    logs = [line.strip(" -") for line in lines if line.strip().endswith("_log.err")]
    text = (errors[-1] if errors else type(exc).__name__) + (f" (log: {logs[-1]})" if logs else "")
    if record_failure:
        write_atomically(path, json.dumps({**record, "job": job.id, "config_hash": job.config.hash(), "state": "failed",
                                        "error": text}, indent=1, sort_keys=True))
    return text


#: how long a stopped local sweep waits for its jobs to checkpoint before it kills them
LOCAL_STOP_WAIT_S = 120.0


def _kill_job_process(sweep_dir: Path, job: Job) -> None:
    """SIGKILL the process that runs ``job`` (its pid is in the job's record): killing submitit's controller
    alone leaves it running, holding the job's lock."""
    record = _read_json(state_path(sweep_dir, job)) or {}
    pid = record.get("pid")
    if record.get("state") != "running" or not isinstance(pid, int) or pid == os.getpid():
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _submit_ignoring_ctrl_c(executor: Any, fn: Any, job_id: str) -> Any:
    """Submit with SIGINT ignored, a disposition the job's processes inherit: the terminal's Ctrl-C reaches
    the whole process group, and submitit's job controller would answer it by killing its job a second
    later. This process stops the jobs with SIGTERM instead, which the controller forwards and the trainer
    answers with a checkpoint at its next step (it installs its own Ctrl-C handler while it trains)."""
    if threading.current_thread() is not threading.main_thread():
        return executor.submit(fn, job_id)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return executor.submit(fn, job_id)
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_local(req: EngineRequest) -> dict[str, str]:
    """submitit's local executor: one process per job, ``parallel`` at a time, in the order given (plan order,
    or ``--only``'s). With GPUs each job gets one GPU as its ``CUDA_VISIBLE_DEVICES``, the least busy, and
    ``pack`` jobs share a GPU."""
    import submitit

    executor = submitit.LocalExecutor(folder=req.sweep_dir / "submitit" / "%j")
    executor.update_parameters(timeout_min=7 * 24 * 60)
    fn = SweepJob(req.plan, req.sweep_dir, req.options)
    slots = GpuSlots(req.gpus, req.pack) if req.gpus else None
    pending = list(req.jobs)
    running: dict[str, tuple[Job, Any, float]] = {}
    gpu_of: dict[str, int] = {}
    outcome: dict[str, str] = {}
    total = len(req.jobs)

    def reap(stopping: bool = False) -> None:
        for job_id, (job, handle, started) in list(running.items()):
            if not handle.done():
                continue
            del running[job_id]
            if slots is not None:
                slots.give_back(gpu_of.pop(job_id))
            try:
                outcome[job_id] = handle.result()
                seconds = time.perf_counter() - started
                req.echo(f"[{len(outcome)}/{total}] {job_id}: {outcome[job_id]} ({seconds:.1f} s)")
            except Exception as exc:  # noqa: BLE001  (submitit wraps the job's error)
                state = (_read_json(state_path(req.sweep_dir, job)) or {}).get("state")
                outcome[job_id] = "interrupted" if stopping or state == "interrupted" else "failed"
                why = _failure_text(req.sweep_dir, job, exc, record_failure=outcome[job_id] == "failed")
                req.echo(f"[{len(outcome)}/{total}] {job_id}: {outcome[job_id]}: {why}")

    def stop_all(sig: int) -> None:
        for _, handle, _ in running.values():
            if handle._process is not None and handle._process.poll() is None:
                handle._process.send_signal(sig)  # the job's controller forwards SIGTERM to the job
        deadline = time.monotonic() + LOCAL_STOP_WAIT_S
        while running and time.monotonic() < deadline:
            reap(stopping=True)
            time.sleep(0.1)
        for job, handle, _ in running.values():  # still running after the wait: kill the job and its controller
            _kill_job_process(req.sweep_dir, job)
            if handle._process is not None and handle._process.poll() is None:
                handle._process.kill()

    with _sigterm_flag() as stop:
        try:
            while pending or running:
                while pending and len(running) < req.parallel and not stop.is_set():
                    job = pending.pop(0)
                    where = ""
                    if slots is not None:
                        gpu_of[job.id] = slots.take()
                        executor.update_parameters(gpus_per_node=1, visible_gpus=(gpu_of[job.id],))
                        where = f" on GPU {gpu_of[job.id]}"
                    running[job.id] = (job, _submit_ignoring_ctrl_c(executor, fn, job.id), time.perf_counter())
                    req.echo(f"started {job.id} (job {job.index}){where}")
                reap()
                if stop.is_set():
                    stop_all(signal.SIGTERM)
                    break
                time.sleep(0.1)
        except KeyboardInterrupt:
            stop_all(signal.SIGTERM)
            stop.set()
    if stop.is_set():
        left = len(pending) + sum(v == "interrupted" for v in outcome.values())
        raise SweepInterrupted(f"stopped; {left} job{'s' if left != 1 else ''} left: run the same command again to "
                               "resume from the checkpoints")
    return outcome


def _run_slurm(req: EngineRequest) -> dict[str, str]:
    """submitit's SLURM executor: one array job, ``parallel`` tasks at a time, requeued on preemption or
    timeout (the job resumes from its checkpoint; :class:`SweepJob`). The settings are checked against the
    cluster (partition, MaxTime) before anything is submitted; sbatch's refusal is a clear error. Every
    submission's ids are kept in ``slurm.json`` for ``--status``. Returns at once."""
    import submitit

    if shutil.which("sbatch") is None or shutil.which("srun") is None:
        raise FactorbenchError("--engine slurm needs a SLURM cluster (no sbatch/srun here); run it on a login node, "
                               "or use --engine local")
    settings = resolve_settings(req.slurm or SlurmSettings(), req.options.threads, req.plan.name)
    executor = submitit.SlurmExecutor(folder=req.sweep_dir / "submitit" / "%j", max_num_timeout=settings.max_num_timeout)
    try:
        executor.update_parameters(array_parallelism=req.parallel, **settings.executor_parameters())
    except (ValueError, TypeError) as exc:
        raise FactorbenchError(f"--slurm: {exc}") from None
    at_once = req.parallel
    if req.pack > 1:  # K jobs per array task, one SLURM task each, sharing the allocation (and its GPU)
        groups = [tuple(j.id for j in req.jobs[i:i + req.pack]) for i in range(0, len(req.jobs), req.pack)]
        at_once = min(req.parallel, len(groups))
        executor.update_parameters(ntasks_per_node=req.pack, array_parallelism=at_once)
        fn: SweepJob = PackedSweepJob(req.plan, req.sweep_dir, req.options, engine="slurm",
                                      signal_delay_s=settings.signal_delay_s)
        handles = submit_array(executor, fn, groups)
        ids = {job_id: h.job_id for group, h in zip(groups, handles) for job_id in group}
    else:
        fn = SweepJob(req.plan, req.sweep_dir, req.options, engine="slurm", signal_delay_s=settings.signal_delay_s)
        handles = submit_array(executor, fn, [j.id for j in req.jobs])
        ids = {j.id: h.job_id for j, h in zip(req.jobs, handles)}
    record_submission(req.sweep_dir, ids, write_atomically)
    if handles:
        packed = f", {req.pack} jobs per array task" if req.pack > 1 else ""
        req.echo(f"submitted {len(req.jobs)} job{'s' if len(req.jobs) != 1 else ''} as SLURM array "
                 f"{handles[0].job_id.split('_')[0]} ({len(handles)} task{'s' if len(handles) != 1 else ''}{packed}, "
                 f"{at_once} at a time, {settings.time} min per attempt, up to {settings.max_num_timeout} requeues "
                 "at the time limit); follow them with --status")
    return {j.id: "submitted" for j in req.jobs}


#: engine name -> runner
ENGINES: dict[str, Callable[[EngineRequest], dict[str, str]]] = {"local": _run_local, "slurm": _run_slurm}


def _record_plan(sweep_dir: Path, plan: Plan) -> None:
    path = sweep_dir / "plans" / f"{plan.hash()}.json"
    if not path.exists():
        write_atomically(path, json.dumps({"hash": plan.hash(), "source": plan.source, "plan": plan.to_dict()},
                                       indent=1, sort_keys=True))


def precision_here_for(engine: str, gpus: Sequence[int], options: SweepOptions) -> str | None:
    """The precision jobs will train in: ``--precision`` when named; for ``auto`` on the local engine, what
    the trainer chooses on this machine (fp32 on a GPU; bf16 on a CPU with bf16 units, else fp32). None
    under SLURM with ``auto``: the nodes decide (``collect`` still refuses a row of mixed precisions)."""
    if options.precision != "auto":
        return options.precision
    if engine != "local":
        return None
    import torch

    from .trainer import choose_precision

    return choose_precision("auto", torch.device("cuda" if gpus else "cpu"))


def run_sweep(plan: Plan, sweep_dir: str | os.PathLike | None = None, *, engine: str = "local",
              parallel: int | None = None, only: str | None = None, options: SweepOptions = SweepOptions(),
              settings: SlurmSettings | Mapping[str, Any] | None = None,
              echo: Callable[[str], None] = print, pack: int | None = None) -> dict[str, str]:
    """Run the plan's jobs (those matching ``only``) that are not done; returns job id -> outcome
    ("done", "failed", "interrupted", "busy", "submitted", or "skipped" for finished jobs). ``parallel``:
    jobs at once (default: 1 locally on the CPU, ``pack`` per GPU where jobs train on GPUs, all of them
    under SLURM, which schedules them); ``pack``: jobs sharing one GPU (default
    :data:`~factorbench.baselines.gpus.DEFAULT_PACK`), each in its own process; ``settings``: SLURM's
    (:class:`~factorbench.baselines.slurm.SlurmSettings`, or a mapping of ``--slurm`` keys to values)."""
    if engine not in ENGINES:
        raise FactorbenchError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if parallel is not None and parallel < 1:
        raise FactorbenchError(f"--jobs must be >= 1, got {parallel}")
    if pack is not None and pack < 1:
        raise FactorbenchError(f"--pack must be >= 1, got {pack}")
    gpus: tuple[int, ...] = ()
    if engine == "local":
        gpus = visible_gpus(options.device)
        if options.device == "cuda" and not gpus:
            raise FactorbenchError("--device cuda: no CUDA GPU is visible here (CUDA_VISIBLE_DEVICES, PyTorch); use "
                                   "--device cpu or auto")
        if pack is not None and not gpus:
            raise FactorbenchError(f"--pack {pack}: no CUDA GPU is visible here, and packing shares a GPU; on the "
                                   "CPU run jobs side by side with --jobs N (and --threads about cores/N)")
    if settings is not None and engine != "slurm":
        raise FactorbenchError("--slurm settings need --engine slurm")
    if settings is not None and not isinstance(settings, SlurmSettings):
        settings = parse_slurm_settings([f"{k}={v}" for k, v in settings.items()])
    if options.threads is not None and options.threads < 1:
        raise FactorbenchError(f"--threads must be >= 1, got {options.threads}")
    if not (options.checkpoint_every_s > 0 and options.record_every_s > 0):
        raise FactorbenchError("--checkpoint-every and --record-every must be positive seconds")
    if plan.precision:  # the plan fixes it: part of what its jobs compute
        if options.precision not in ("auto", plan.precision):
            raise FactorbenchError(f"--precision {options.precision}: plan {plan.name} trains in {plan.precision} "
                                   "(its precision = ...); leave --precision out")
        options = dataclasses.replace(options, precision=plan.precision)
    sweep_dir = Path(sweep_dir) if sweep_dir is not None else default_sweep_dir(plan)
    jobs = select(expand(plan), only)
    check_finished_unchanged(jobs, sweep_dir)
    rows = _row_precisions(expand(plan), sweep_dir)  # read once for both checks
    check_precision(jobs, rows, sweep_dir, options.precision)
    outcome = {j.id: "skipped" for j in jobs if job_done(j, sweep_dir)}
    todo = tuple(j for j in jobs if j.id not in outcome)
    here = precision_here_for(engine, gpus, options)
    if here is not None:
        check_row_precision(todo, rows, here)
    check_sources(todo, options)
    check_source_copies(jobs, sweep_dir, options)
    if todo:
        check_locks(sweep_dir)
    busy = [j for j in todo if _lock_held(sweep_dir, j)]
    for j in busy:
        outcome[j.id] = "busy"
        echo(f"{j.id}: another process is running it; left alone")
    todo = tuple(j for j in todo if j.id not in outcome)
    echo(f"plan {plan.name} (hash {plan.hash()[:12]}): {len(jobs)} job{'s' if len(jobs) != 1 else ''} selected, "
         f"{len(jobs) - len(todo) - len(busy)} done, {len(todo)} to run -> {sweep_dir}")
    if not todo:
        return outcome
    _record_plan(sweep_dir, plan)
    pack = pack if pack is not None else (DEFAULT_PACK if gpus else 1)
    if gpus:
        parallel = min(parallel or len(gpus) * pack, len(gpus) * pack)
        if options.threads is None:  # the processes share the cores
            options = dataclasses.replace(options, threads=max(1, (os.cpu_count() or 1) // parallel))
        echo(f"training on GPU{'s' if len(gpus) > 1 else ''} {', '.join(map(str, gpus))}: up to {pack} job"
             f"{'s' if pack > 1 else ''} per GPU, {parallel} at once, {options.threads} CPU thread"
             f"{'s' if options.threads != 1 else ''} each")
    if parallel is None:
        parallel = len(todo) if engine == "slurm" else 1
    outcome.update(ENGINES[engine](EngineRequest(plan, todo, sweep_dir, parallel, options, settings, echo,
                                                 gpus=gpus, pack=pack)))
    return outcome


# ---------------------------------------------------------------------------------------------- status

@dataclass(frozen=True)
class JobStatus:
    job: Job
    state: str
    error: str = ""
    cpu_s: float = 0.0
    wall_s: float = 0.0
    attempts: int = 0
    #: the run's last checkpointed step (unfinished runs), else None
    step: int | None = None
    #: steps the run had before the sweep first ran the job (trained elsewhere: no CPU time counted)
    external_steps: int = 0
    #: its results were restored from reference files (:func:`restore`), not run in this directory
    restored: bool = False
    #: the kind of device a restored job's run trained on ("cpu", "cuda"; "" when not restored or not recorded)
    trained_on: str = ""
    #: what SLURM says about the job's latest submission when it is not done (pending and why, NODE_FAIL, ...)
    slurm: str = ""
    #: the precision of the unfinished run's checkpoint ("" without one)
    checkpoint_precision: str = ""
    #: for a job not done: the precisions its row's other finished seeds (same entry and dataset) trained in
    row_precisions: tuple[str, ...] = ()


def _checkpoint(run_dir: Path) -> tuple[int | None, str]:
    """(step, precision) of the last checkpoint of the run in ``run_dir`` (from the safetensors header);
    (None, "") without one, "" for a precision not recorded."""
    from .checkpoint import checkpoint_summary

    ckpt = run_dir / "checkpoint.safetensors"
    if not ckpt.is_file():
        return None, ""
    try:
        step, extra = checkpoint_summary(ckpt)
    except FactorbenchError:
        return None, ""
    return step, str(extra.get("precision") or "")


def _run_step(run_dir: Path, steps: int) -> int:
    """How far the run in ``run_dir`` is: ``steps`` when it is finished, else its checkpoint's step (0 if none)."""
    if (run_dir / "DONE").is_file():
        return steps
    return _checkpoint(run_dir)[0] or 0


def sweep_status(plan: Plan, sweep_dir: str | os.PathLike | None = None, only: str | None = None,
                 ask_slurm: bool = True) -> list[JobStatus]:
    """The state of every selected job: done, running (its lock is held), failed (with its error),
    interrupted (started, stopped or killed; resumes on the next run) or left (never started, or finished
    before a protocol was added to its dataset); for the jobs
    submitted to SLURM that are not done, what ``squeue``/``sacct`` say (``ask_slurm``)."""
    sweep_dir = Path(sweep_dir) if sweep_dir is not None else default_sweep_dir(plan)
    out = []
    for job in select(expand(plan), only):
        record = _read_json(state_path(sweep_dir, job)) or {}
        if record.get("config_hash") not in (None, job.config.hash()):
            record = {}
        if job_done(job, sweep_dir):
            state = "done"
        elif _lock_held(sweep_dir, job):
            state = "running"
        elif record.get("state") == "failed":
            state = "failed"
        elif record.get("state") == "done":  # finished before a protocol was added to its dataset: runs again
            state = "left"
            if record.get("restored"):  # its time was spent elsewhere
                record = {k: v for k, v in record.items() if k not in ("cpu_s", "wall_s")}
        elif record:
            state = "interrupted"
        else:
            state = "left"
        step, in_precision = _checkpoint(sweep_dir / "runs" / str(record.get("run_hash"))) \
            if state in ("interrupted", "running", "failed") else (None, "")
        out.append(JobStatus(job, state, record.get("error", "") if state == "failed" else "",
                             float(record.get("cpu_s", 0.0)), float(record.get("wall_s", 0.0)),
                             int(record.get("attempts", 0)), step, int(record.get("external_steps", 0)),
                             state == "done" and bool(record.get("restored")),
                             str(record.get("device", "")) if state == "done" and record.get("restored") else "",
                             checkpoint_precision=in_precision))
    open_rows = {(s.job.entry.name, s.job.dataset.name) for s in out if s.state != "done"}
    rows = _row_precisions([j for j in expand(plan) if (j.entry.name, j.dataset.name) in open_rows], sweep_dir)
    out = [dataclasses.replace(s, row_precisions=tuple(sorted(_by_precision(
        rows.get((s.job.entry.name, s.job.dataset.name), {}), but=s.job.seed)))) if s.state != "done" else s
        for s in out]
    if ask_slurm:
        told = slurm_states(sweep_dir, [s.job.id for s in out if s.state != "done"])
        out = [dataclasses.replace(s, slurm=told[s.job.id].describe()) if s.job.id in told else s for s in out]
    return out


def _estimate_cpu_s(statuses: Sequence[JobStatus]) -> float | None:
    """CPU seconds the unfinished jobs still need (:func:`_estimate`)."""
    return _estimate(statuses)[0]


def _architecture(job: Job) -> Any:
    return getattr(job.config, "architecture", None)


def _estimate(statuses: Sequence[JobStatus]) -> tuple[float | None, int, int]:
    """CPU seconds the unfinished jobs still need: the finished jobs' CPU seconds per step the sweep
    trained (steps of runs trained elsewhere do not count), averaged over the same entry and dataset where
    there are some, else over the same architecture on the same dataset (a step's cost is mostly the
    network's and the image's), else over the same model on any dataset, else over the whole sweep, times
    the steps left. Restored jobs whose runs trained on a GPU do not count: their CPU seconds say nothing
    of a step's cost on a CPU. Returns it (None before any job the sweep trained has finished), how many
    finished jobs it rests on, and how many unfinished jobs took the whole sweep's average (none alike)."""
    rates = [(s.job, s.cpu_s / (s.job.config.steps - s.external_steps)) for s in statuses
             if s.state == "done" and s.cpu_s > 0 and s.job.config.steps > s.external_steps
             and s.trained_on.split(":")[0] in ("", "cpu")]
    if not rates:
        return None, 0, 0
    total, unlike = 0.0, 0
    for s in statuses:
        if s.state == "done":
            continue
        alikes = (lambda j: j.entry is s.job.entry and j.dataset == s.job.dataset,
                  lambda j: _architecture(j) is not None and _architecture(j) == _architecture(s.job)
                  and j.dataset == s.job.dataset,
                  lambda j: j.config.name == s.job.config.name, lambda j: True)
        for level, alike in enumerate(alikes):
            same = [rate for job, rate in rates if alike(job)]
            if same:
                break
        unlike += level == len(alikes) - 1
        total += float(np.mean(same)) * max(s.job.config.steps - (s.step or 0), 0)
    return total, len(rates), unlike


def format_status(plan: Plan, statuses: Sequence[JobStatus], sweep_dir: Path, verbose: bool = False,
                  precision_here: str | None = None) -> str:
    """Counts per state, CPU hours spent and an estimate for the rest, then the jobs that are not done
    (all jobs with ``verbose``), failures with their error. A job whose row already has finished seeds says
    their precision, and, given ``precision_here`` (what a sweep here would train in), whether a sweep
    here refuses it (:func:`check_row_precision`)."""
    counts = {s: sum(1 for x in statuses if x.state == s) for s in STATES}
    restored = sum(1 for x in statuses if x.restored)
    ran = [s for s in statuses if not s.restored]
    spent = sum(s.cpu_s for s in ran)
    estimate, basis, unlike = _estimate(statuses)
    left = sum(1 for x in statuses if x.state != "done")
    lines = [f"plan {plan.name} (hash {plan.hash()[:12]}), sweep directory {sweep_dir}",
             f"{len(statuses)} job{'s' if len(statuses) != 1 else ''}: "
             + ", ".join(f"{counts[s]} {s}" for s in STATES)
             + (f" ({restored} of the done restored from reference files, not counted in the time spent)"
                if restored else ""),
             f"CPU time spent: {spent / 3600:.2f} h (wall {sum(s.wall_s for s in ran) / 3600:.2f} h); "
             + ("estimate for the rest: " + (f"{estimate / 3600:.2f} CPU h" if estimate is not None else
                                             "none until a job has finished"))
             + (f" (from {basis} finished job{'s' if basis != 1 else ''}; {unlike} of the {left} not done have no "
                "finished job of their entry, architecture or model and take the sweep's average)" if unlike else "")]
    if precision_here is not None:
        lines.append(f"a sweep here trains in {precision_here}")
    for s in statuses:
        if s.state == "done" and not verbose:
            continue
        extra = ""
        if s.step is not None:
            clash = precision_here is not None and s.checkpoint_precision not in ("", precision_here)
            extra = (f" (step {s.step} of {s.job.config.steps}"
                     + (f", in {s.checkpoint_precision}: a sweep here, in {precision_here}, does not resume it"
                        if clash else "") + ")")
        line = f"  {s.job.index:>4}  {s.job.id:<36} {s.state}{extra}"
        if s.attempts:
            line += f"  {s.cpu_s / 60:.1f} CPU min, {s.attempts} attempt{'s' if s.attempts > 1 else ''}"
        if s.row_precisions:
            line += f"  (row in {', '.join(s.row_precisions)}"
            line += (f"; refused here, where it would train in {precision_here})"
                     if precision_here is not None and set(s.row_precisions) - {precision_here} else ")")
        lines.append(line + (f"  [{s.slurm}]" if s.slurm else ""))
        if s.error:
            lines += [f"        {text}" for text in s.error.splitlines()[-6:]]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- collect

def _summary(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float | int | None]]:
    """:func:`factorbench.benchmark.results.summary_of` the validated results (schema and checksum)."""
    from factorbench.benchmark.results import _parse_result, summary_of

    return summary_of([_parse_result(dict(run), f"run {i}") for i, run in enumerate(runs)])


#: per-point arrays a result holds only for its plots (D_LSBD's projected codes, about 0.35 MB a run)
PLOT_ONLY = ("projections",)


def _slim(run: Mapping[str, Any]) -> dict[str, Any]:
    """A validated result without its plot-only arrays (:data:`PLOT_ONLY`), each metric's ``result``
    naming what it left out under ``"omitted"``, with a new checksum over what remains (every scalar,
    matrix and hash stays)."""
    from factorbench.benchmark.results import EvaluationResult, _parse_result

    data = _parse_result(dict(run), "run").to_dict()
    for entry in data["metrics"].values():
        dropped = [k for k in PLOT_ONLY if k in entry["result"]]
        for key in dropped:
            del entry["result"][key]
        if dropped:
            entry["result"]["omitted"] = sorted(set(entry["result"].get("omitted", [])) | set(dropped))
    return json.loads(EvaluationResult(**data).to_json())


def _sweep_seed_of(run: Mapping[str, Any]) -> Any:
    return ((run.get("training") or {}).get("sweep") or {}).get("seed")


def _keep_superseded(target: Path, runs: Sequence[Mapping[str, Any]], out: Path, superseded: Path, plan: Plan,
                     protocol: str, name: str, after: Mapping[Path, Sequence[Mapping[str, Any]]],
                     echo: Callable[[str], None]) -> Path | None:
    """Before ``target`` (a reference file in ``out``) is rewritten with ``runs``: each of its runs that a
    new run of the same seed replaces with other weights (the job trained again) is kept in
    ``superseded/<protocol>/<name>.json`` where a result of another protocol of the plan's entry in ``out``
    (``*/<name>.json`` as this collect leaves it, ``after``: a retired protocol's above all) scored its
    weights, so that the record of that earlier scoring still joins this protocol's scores of its own
    weights; the others are dropped. A seed already kept there keeps its first run. Returns the file
    written, if any."""
    old = _read_json(target) if target.is_file() else None
    new = {_sweep_seed_of(r): _weights_of(r) for r in runs}
    replaced = [r for r in (old or {}).get("runs", [])
                if _weights_of(r) and new.get(_sweep_seed_of(r)) not in (None, _weights_of(r))]
    if not replaced:
        return None
    scored: set[Any] = set()
    for path in out.glob(f"*/{name}.json"):
        other = _read_json(path) if path.parent.name != protocol else None
        if other and other.get("plan") == plan.name:
            scored |= {_weights_of(r) for r in after.get(path, other.get("runs", []))}
    archive = superseded / protocol / f"{name}.json"
    earlier = list((_read_json(archive) or {}).get("runs", [])) if archive.is_file() else []
    seeds = {_sweep_seed_of(r) for r in earlier}
    added = [r for r in replaced if _weights_of(r) in scored and _sweep_seed_of(r) not in seeds]
    if not added:
        return None
    kept = sorted(earlier + added, key=_sweep_seed_of)
    document = {"model": name, "protocol": protocol, "plan": plan.name, "seeds": [_sweep_seed_of(r) for r in kept],
                "missing_seeds": [], "summary": _summary(kept), "runs": kept}
    write_atomically(archive, json.dumps(document, sort_keys=True, allow_nan=False))
    echo(f"kept {archive} (seed{'s' if len(added) != 1 else ''} {', '.join(str(_sweep_seed_of(r)) for r in added)}: "
         "weights trained again; another protocol's results scored the old ones)")
    return archive


def collect(plan: Plan, sweep_dir: str | os.PathLike | None = None, out: str | os.PathLike | None = None,
            echo: Callable[[str], None] = print, complete_only: bool = False,
            pending: str | os.PathLike | None = None, superseded: str | os.PathLike | None = None) -> list[Path]:
    """Write ``out/<protocol>/<name>.json`` (default: the package's reference folder) for every
    (protocol, entry) of the plan with at least one finished seed: ``{"model", "protocol", "plan" (its name),
    "seeds", "missing_seeds", "summary": {scalar: {mean, std, n}}, "runs": [per-seed results]}``, from finished
    results only (each run records its config hash and the hash of the plan it ran under). Appending an entry
    to the plan does not change the files of the others. The first run keeps everything its plots need; the
    others leave out the plot-only point clouds (:func:`_slim`), which would make the reference folder
    hundreds of megabytes. ``complete_only``: leave out (and say so) every entry with a seed not finished,
    so that no row of fewer seeds than its plan asks for is written. ``pending``: a folder for those entries
    instead (same format, implies ``complete_only``), so that finished seeds of an unfinished entry outlive
    the sweep directory (``--restore pending`` on the next machine); an entry written complete to ``out``
    has its pending file removed. ``superseded`` (default :func:`~factorbench.benchmark.results.superseded_dir`
    of ``out``): where a run replaced by a run of other weights is kept (:func:`_keep_superseded`).
    A run scored on images other than the copy its protocol pins (another renderer) is left out, named, and
    counts as a missing seed.
    A file whose content would not change is not rewritten; a file holding runs of another config (or not
    written by a sweep) is refused: finished entries are never replaced."""
    from factorbench.benchmark.results import REFERENCE_DIR, superseded_dir

    sweep_dir = Path(sweep_dir) if sweep_dir is not None else default_sweep_dir(plan)
    out = Path(out) if out is not None else REFERENCE_DIR
    pending = Path(pending) if pending is not None else None
    if pending is not None and pending.resolve() == out.resolve():
        raise FactorbenchError(f"--pending {pending} is the reference folder itself: give a folder of its own")
    check_output_dir(out, "--collect", parents=True)  # before any result is read
    if pending is not None:
        check_output_dir(pending, "--pending", parents=True)
    complete_only = complete_only or pending is not None
    superseded = Path(superseded) if superseded is not None else superseded_dir(out)
    groups: dict[tuple[str, str], list[Job]] = {}
    for job in expand(plan):
        for p in job.protocols:
            groups.setdefault((p, job.entry.name), []).append(job)
    mixed = [f"{entry}/{dataset} ({_seeds_in(_by_precision(row))})" for (entry, dataset), row in
             _row_precisions(expand(plan), sweep_dir).items() if len(set(row.values())) > 1]
    if mixed:
        raise FactorbenchError(f"{len(mixed)} row{'s' if len(mixed) != 1 else ''} of {sweep_dir} mix precisions: "
                               f"{'; '.join(mixed[:4])}{'; ...' if len(mixed) > 4 else ''}. A row's seeds share one "
                               "precision, or its spread measures the precision as well as the seed: nothing was "
                               "written. Move the odd seeds' results aside (results/PROTOCOL/ENTRY/seedK.json in the "
                               "sweep directory) and train them again in the row's precision (--only ID --precision P)")
    written: list[Path] = []
    planned: list[tuple[Any, ...]] = []
    for (protocol, name), jobs in groups.items():
        runs, seeds, missing = [], [], []
        for job in jobs:
            run = _finished_result(sweep_dir, job, protocol)
            if run is not None:
                other = _other_images(run, result_path(sweep_dir, protocol, job))
                if other:
                    echo(f"left out {job.id} under {protocol}: {other}")
                    missing.append(job.seed)
                    continue
                runs.append(run)
                seeds.append(job.seed)
            else:
                missing.append(job.seed)
        if not runs:
            continue
        folder = out
        if complete_only and missing:
            if pending is None:
                echo(f"left out {protocol}/{name}: seeds {missing} not finished")
                continue
            folder = pending
        target = folder / protocol / f"{name}.json"
        # the entry's file among the pending ones, once it is complete (then removed below)
        left_pending = pending / protocol / f"{name}.json" if pending is not None and folder is out else None
        configs = {job.config.hash() for job in jobs}
        for path, source in ((target, folder),) + (((left_pending, pending),) if left_pending else ()):
            _check_collect_target(path, name, configs, set(seeds), sweep_dir, plan, source)
        document = {"model": name, "protocol": protocol,
                    "plan": plan.name,
                    "seeds": seeds, "missing_seeds": missing, "summary": _summary(runs),
                    "runs": runs[:1] + [_slim(r) for r in runs[1:]]}
        text = json.dumps(document, sort_keys=True, allow_nan=False)
        planned.append((target, text, runs, seeds, missing, folder, protocol, name, left_pending))
    # every file checked before any is written; the runs each reference file holds once this collect is done
    after = {target: runs for target, _, runs, _, _, folder, *_ in planned if folder is out}
    for target, text, runs, seeds, missing, folder, protocol, name, left_pending in planned:
        if not (target.is_file() and target.read_text() == text):
            if folder is out:  # before the replaced runs are gone
                _keep_superseded(target, runs, out, superseded, plan, protocol, name, after, echo)
            write_atomically(target, text)
            written.append(target)
            echo(f"wrote {target} ({len(seeds)} seed{'s' if len(seeds) != 1 else ''}"
                 + (f"; seeds {missing} not finished" if missing else "") + ")")
        if left_pending is not None and left_pending.is_file():
            left_pending.unlink()
            echo(f"removed {left_pending}: the entry is complete in {out}")
    return written


def _other_images(run: Mapping[str, Any], path: Path) -> str:
    """Why ``run`` cannot be a reference run because it was scored on images other than the copy its protocol
    pins (another renderer or driver: ``dataset.same_images_as_reference`` False), '' otherwise."""
    data = run.get("dataset") or {}
    if data.get("same_images_as_reference") is not False:
        return ""
    return (f"scored on images (sha256 {str((data.get('sha256') or {}).get('images'))[:12]}, "
            f"{data.get('renderer', 'renderer unknown')}) other than the copy the protocol pins (sha256 "
            f"{str(data.get('reference_images_sha256'))[:12]}), so its scores carry the renderer's difference; "
            f"move {path} aside and train the job again where the dataset generates the pinned images (DATASETS.md)")


def _check_collect_target(target: Path, name: str, configs: set[str], seeds: set[int], sweep_dir: Path,
                          plan: Plan, source: Path) -> None:
    """Refuse to overwrite ``target`` when it holds runs of another config (or was not written by a sweep), or
    seeds the sweep directory lacks (collecting would drop them)."""
    existing = _read_json(target)
    if existing is None:
        return
    old = {r.get("training", {}).get("config_hash") for r in existing.get("runs", [existing])} \
        if isinstance(existing, dict) else {None}
    if old - configs or "runs" not in existing:
        raise FactorbenchError(f"{target} holds other runs of {name} (another config, or not written by a "
                               "sweep); finished entries are never replaced: name the entry differently")
    kept = {r["training"]["sweep"]["seed"] for r in existing.get("runs", [])}
    if kept - seeds:
        raise FactorbenchError(f"{target} has seeds {sorted(kept - seeds)} that {sweep_dir} lacks; "
                               "collect from the sweep directory that made them, or put them back into "
                               f"this one first: factorbench sweep {plan.name} --restore {source}")


# --------------------------------------------------------------------------------------------- restore

def _superseded_by(sweep_dir: Path, job: Job, runs_of: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The weights (first 12 hex digits) of the job's results in the sweep directory that ``runs_of``
    (protocol -> run, from reference files) may replace; empty where they stay. They give way only where
    they are a dead end and the source is whole: the job is not done there and no process works on it, no
    finished run of the directory holds the weights its results scored (restored from reference files
    without weights, or cut while training again), so the sweep would train the job again and score every
    protocol anew; and ``runs_of`` scores every protocol of the job on one run."""
    scored = _scored_weights(sweep_dir, job)
    weights = {_weights_of(run) for run in runs_of.values()}
    if (set(runs_of) != set(job.protocols) or len(weights) != 1 or not scored - weights
            or job_done(job, sweep_dir) or _lock_held(sweep_dir, job)):
        return set()
    for protocol in job.protocols:
        result = _finished_result(sweep_dir, job, protocol)
        run_hash = ((result or {}).get("training") or {}).get("run_hash")
        if result is not None and run_hash and (sweep_dir / "runs" / str(run_hash) / "DONE").is_file():
            return set()  # the sweep scores the missing protocols on that run
    return {str(w)[:12] for w in scored - weights}


def restore(plan: Plan, sweep_dir: str | os.PathLike | None = None, source: str | os.PathLike | None = None,
            echo: Callable[[str], None] = print) -> list[Path]:
    """Write the runs of the reference files ``source/<protocol>/<name>.json`` (default: the package's
    ``benchmark/reference``) back into the sweep directory as their jobs' results, so that the plan's sweep,
    continued on another machine, skips the jobs they finished and :func:`collect` keeps their seeds.
    Only runs of this plan are restored, each checked (schema and checksum) and only where its job still
    asks for what it ran (config hash, protocol, dataset spec and split, as for any result of the sweep);
    a finished result is not replaced, and a run is left out where the job's results there scored other
    weights (a job's protocols score one run), except where those results are a dead end
    (:func:`_superseded_by`): then the source's runs, one run's scores under every protocol of the job, take
    their place, as training the job again would. A job whose every protocol is restored gets a record
    marked ``restored``, with the training's CPU time where the run recorded it (runs trained before
    factorbench recorded it count none, and the status estimate leaves them out)."""
    from factorbench.benchmark.results import REFERENCE_DIR, _parse_result

    sweep_dir = Path(sweep_dir) if sweep_dir is not None else default_sweep_dir(plan)
    source = Path(source) if source is not None else REFERENCE_DIR
    if not source.is_dir():
        raise FactorbenchError(f"{source} is not a directory of reference files (<protocol>/<name>.json)")
    jobs = {job.id: job for job in expand(plan)}
    names = {(p, job.entry.name) for job in jobs.values() for p in job.protocols}
    written: list[Path] = []
    touched: dict[str, list[Mapping[str, Any]]] = {}
    incoming: dict[str, dict[str, Mapping[str, Any]]] = {}  # job id -> protocol -> run, each checked
    for protocol, name in sorted(names):
        target = source / protocol / f"{name}.json"
        document = _read_json(target)
        if document is None:
            continue
        if not isinstance(document, dict) or document.get("plan") != plan.name or "runs" not in document:
            echo(f"{target}: not written by a sweep of plan {plan.name}; left out")
            continue
        for i, run in enumerate(document["runs"]):
            _parse_result(run, f"{target}, run {i}")
            job = jobs.get(str(((run.get("training") or {}).get("sweep") or {}).get("job")))
            if job is None or job.entry.name != name or protocol not in job.protocols:
                echo(f"{target}, run {i}: its job is no longer in plan {plan.name}; left out")
                continue
            why = _mismatch(run, job, protocol)
            if why:
                echo(f"{target}, run {i} ({job.id}): stale, {why}; left out")
                continue
            incoming.setdefault(job.id, {})[protocol] = run
    replaced: set[str] = set()
    for job_id, runs_of in incoming.items():
        job = jobs[job_id]
        dead = _superseded_by(sweep_dir, job, runs_of)
        if dead:
            echo(f"{job.id}: the sweep directory's results scored weights ({', '.join(sorted(dead))}) that no "
                 "finished run there holds, so the job would train again; replaced by the source's run, which "
                 "scored every protocol of the job")
            replaced.add(job_id)
        for protocol, run in runs_of.items():
            state = _result_state(sweep_dir, job, protocol)
            weights = _weights_of(run)
            others = _scored_weights(sweep_dir, job) - {weights}
            if others and not dead:
                # a job's protocols score one set of weights: a run of other weights would ship beside them
                echo(f"{job.id} under {protocol}: the sweep directory holds results of other weights "
                     f"({', '.join(sorted(str(w)[:12] for w in others))}) than this run's ({str(weights)[:12]}); "
                     "left out (the sweep trains the job again and scores every protocol on one run)")
                continue
            if state == "missing" or (dead and state == "done"
                                      and _weights_of(_finished_result(sweep_dir, job, protocol)) != weights):
                path = result_path(sweep_dir, protocol, job)
                write_atomically(path, json.dumps(run, sort_keys=True, allow_nan=False))
                written.append(path)
            elif state != "done":
                echo(f"{job.id} under {protocol}: the sweep directory holds another result ({state}); left alone")
                continue
            touched.setdefault(job.id, []).append(run)
    for job_id, runs in touched.items():
        job = jobs[job_id]
        path = state_path(sweep_dir, job)
        if not job_done(job, sweep_dir) or (path.exists() and job_id not in replaced):
            continue
        training = runs[0]["training"]
        write_atomically(path, json.dumps({
            "job": job.id, "index": job.index, "config_hash": job.config.hash(),
            "plan_hash": training["sweep"]["plan_hash"], "run_hash": training.get("run_hash"),
            "state": "done", "error": "", "attempts": 0, "steps": job.config.steps,
            "cpu_s": float(training.get("trained", {}).get("cpu_time_s") or 0.0),
            "wall_s": float(training.get("trained", {}).get("wall_time_s", 0.0))
            + sum(float(r["training"]["sweep"].get("evaluation_wall_time_s", 0.0)) for r in runs),
            "restored": str(source), "host": training["sweep"].get("host", ""),
            "device": str(training.get("trained", {}).get("device", "")),
            "updated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}, indent=1, sort_keys=True))
    done = len({job_id for job_id in touched if job_done(jobs[job_id], sweep_dir)})
    echo(f"restored {len(written)} result{'s' if len(written) != 1 else ''} from {source} into {sweep_dir}; "
         f"{done} job{'s' if done != 1 else ''} of plan {plan.name} done there")
    return written
