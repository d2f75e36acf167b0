"""The training loop every model shares: batches from (seed, step), optimiser groups, precision, NaN guard,
CSV log, periodic atomic checkpoints, resume, and Ctrl-C / SIGTERM handled at a step boundary.

Per step: the learning rates follow the config's step schedule, the model maps a batch to outputs, the
family's pure loss function returns one scalar per optimiser group, each group's scalar is back-propagated
into that group's parameters only (``backward(inputs=...)``), then every optimiser steps. Precision: on CUDA, autocast to bfloat16 where
the GPU supports it, else float16 with a gradient scaler; on a CPU with bfloat16 matrix units (AMX or
AVX-512 BF16), bfloat16 autocast; else float32. Convolutional models run channels-last.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.fileformat import package_version
from factorbench.generators.outputs import temporaries_of, write_atomically

from . import models  # noqa: F401  (registers every model family)
from .allocator import heap_reuse
from .checkpoint import checkpoint_summary, load_checkpoint, save_checkpoint, save_weights
from .config import ModelConfig, get_family
from .data import DEFAULT_MEMORY_LIMIT, TrainingData, resolve_dataset
from .nets import check_image_shape, is_convolutional
from .optim import apply_lr_schedule
from .runs import CHECKPOINT, DONE, LOG, RUN_FILES, RUN_JSON, SAMPLES, SNAPSHOTS, WEIGHTS, RunSpec, read_run, snapshot_path
# imported with the trainer, not when a run of hours ends: a package upgraded or edited meanwhile would
# otherwise be imported half new, half old, and fail after the training (the run then only resumes)
from .show import write_samples

__all__ = ["PRECISIONS", "TrainOptions", "TrainResult", "TrainingInterrupted", "apply_cuda_determinism",
           "choose_device", "choose_precision", "cuda_determinism", "train"]

#: precision name -> autocast dtype (None: float32, no autocast)
PRECISIONS: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


class TrainingInterrupted(FactorbenchError):
    """Training stopped by Ctrl-C or SIGTERM after writing a checkpoint."""

    exit_status = 130


@dataclass(frozen=True)
class TrainOptions:
    """How to train (not what: that is the config). None of these changes the run's hash."""

    device: str = "auto"
    precision: str = "auto"
    #: CPU threads of PyTorch (None: its default, one per core). On a shared machine use fewer threads than
    #: free cores: OpenMP threads that wait for a busy core spin, and a 2-thread step can run 10x slower.
    threads: int | None = None
    channels_last: bool = True
    checkpoint_every_s: float = 120.0
    log_every: int = 50
    memory_limit: int = DEFAULT_MEMORY_LIMIT
    progress: bool = True
    samples: bool = True
    #: stop (with a checkpoint) once this step is reached, as if interrupted; None: train to the end
    stop_after: int | None = None
    #: also keep the weights every this many steps (``snapshots/step-NNNNNNN.safetensors``: learning curves)
    snapshot_every: int | None = None
    #: also write every log.csv row to TensorBoard (``tensorboard/`` in the run; needs the tensorboard extra)
    tensorboard: bool = False
    #: hold the split's uint8 images on the training device and gather each batch there: "auto" (on CUDA when
    #: the split is in memory and takes at most a quarter of the GPU's free memory), "always", "never". The
    #: batches are the same either way; families that draw their own batches (pairs, trajectories) do not.
    resident_data: str = "auto"
    #: on the CPU, keep freed memory in the heap for the next step instead of unmapping it (glibc; the same
    #: arithmetic, fewer page faults: 1.70x faster steps for chen-mlp on 64 x 64 x 3, see ``allocator``)
    reuse_freed_memory: bool = True


@dataclass(frozen=True)
class TrainResult:
    run_dir: Path
    run_hash: str
    #: "finished", "already complete" or "stopped"
    status: str
    step: int
    wall_time_s: float
    steps_per_s: float


def _cpu_has_bf16() -> bool:
    from factorbench.benchmark.environment import cpuinfo

    flags = cpuinfo()
    return " amx_bf16" in flags or " avx512_bf16" in flags


#: fp32 steps/s over bf16 autocast steps/s on a CPU without bf16 units (AMD EPYC, AVX2 only, 1 thread, the
#: burgess network at batch 64): 2.73 / 0.30 for 3 channels, 3.31 / 0.34 for 1 (BASELINES.md, Speed)
BF16_EMULATION_SLOWDOWN = 9


def _check_resumed_precision(checkpoint: Path, precision: str, requested: str) -> None:
    """Refuse to continue a checkpoint in another precision than it was trained in: precision is part of what
    a run computes (bf16 and fp32 runs of one config differ in every score), so a run trained half in each
    is neither. Checked from the checkpoint's header, before the first step."""
    step, extra = checkpoint_summary(checkpoint)
    trained = extra.get("precision")
    if trained is None or trained == precision:
        return
    why = (f"--precision {requested} chooses {precision} on this machine" if requested == "auto"
           else f"this resume asks for --precision {precision}")
    raise FactorbenchError(f"{checkpoint.parent} was trained in {trained} up to step {step:,}, and {why}; a run's "
                           f"precision is part of what it computes, so it is not continued in another. Pass "
                           f"--precision {trained} to continue it as it began, or start it over in {precision} "
                           f"(`factorbench train --force`; in a sweep, delete {checkpoint.parent})")


def cpu_model_name() -> str:
    """The CPU's model name (:func:`factorbench.benchmark.environment.cpu_model_name`). CPU time per step
    depends on it (bf16 matrix units, AVX-512), so run records keep it beside the time."""
    from factorbench.benchmark.environment import cpu_model_name as model_name

    return model_name()


def choose_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise FactorbenchError("--device cuda: no CUDA device is available to PyTorch here; use --device cpu or auto")
    if requested not in ("cpu", "cuda"):
        raise FactorbenchError(f"--device {requested!r}: choose auto, cpu or cuda")
    return torch.device(requested)


def choose_precision(requested: str, device: torch.device) -> str:
    if requested != "auto":
        if requested not in PRECISIONS:
            raise FactorbenchError(f"--precision {requested!r}: choose auto, {', '.join(PRECISIONS)}")
        if requested == "fp16" and device.type != "cuda":
            raise FactorbenchError("--precision fp16 needs a CUDA device; use bf16 or fp32 on the CPU")
        return requested
    if device.type == "cuda":  # measured: bf16 autocast 0.81-0.85x fp32's steps/s (BASELINES.md, Speed)
        return "fp32"
    return "bf16" if _cpu_has_bf16() else "fp32"


def cuda_determinism(precision: str) -> dict[str, Any]:
    """The settings a CUDA run trains under (recorded in every segment): deterministic cuDNN kernels,
    ``torch.use_deterministic_algorithms`` (warning, not failing, where an op has no deterministic
    kernel), cuBLAS's fixed workspace, and TF32 off for ``fp32`` so that a run recorded as fp32 is fp32
    (on by default, TF32 matmuls and convolutions keep only 10 mantissa bits)."""
    tf32 = precision != "fp32"
    return {"cudnn_deterministic": True, "cudnn_benchmark": False, "deterministic_algorithms": "warn_only",
            "cublas_workspace_config": ":4096:8", "tf32": tf32}


def apply_cuda_determinism(settings: dict[str, Any]) -> None:
    """Set :func:`cuda_determinism`'s settings in this process (before the first cuBLAS call)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", settings["cublas_workspace_config"])
    torch.backends.cudnn.deterministic = settings["cudnn_deterministic"]
    torch.backends.cudnn.benchmark = settings["cudnn_benchmark"]
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = settings["tf32"]
    torch.backends.cudnn.allow_tf32 = settings["tf32"]


@contextmanager
def _stop_signals(stop: threading.Event | None = None) -> Iterator[threading.Event]:
    """An event set by the first Ctrl-C or SIGTERM (a second Ctrl-C interrupts at once); ``stop``, when
    given, is that event, so that another thread can stop the training too. Off the main thread no handler
    is installed: only ``stop`` stops it (the SLURM worker, whose main thread owns the signals)."""
    stop = stop if stop is not None else threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _check_writable(run_dir: Path) -> None:
    """The run directory is (or can be made) a writable directory: checked before any data is prepared,
    without creating anything."""
    if run_dir.exists() and not run_dir.is_dir():
        raise FactorbenchError(f"--out {run_dir} is a file; give a directory for the run")
    existing = run_dir
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise FactorbenchError(f"cannot create {run_dir}: {existing} is a file; choose another --out")
    try:
        fd, probe = tempfile.mkstemp(prefix=".factorbench-write-test", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise FactorbenchError(f"cannot write into {existing} ({exc.strerror or exc}); choose a writable --out") from None


def _prepare_run_dir(run_dir: Path, spec: RunSpec, *, resume: bool, force: bool) -> str:
    """Check the run directory against the run; returns "new", "resume" or "complete"."""
    _check_writable(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FactorbenchError(f"cannot create {run_dir} ({exc.strerror or exc}); choose a writable --out") from None
    left_over = {p.name for f in RUN_FILES for p in temporaries_of(run_dir / f)} | {f + ".tmp" for f in RUN_FILES}
    present = {p.name for p in run_dir.iterdir()} - left_over - {SNAPSHOTS}  # an interrupted write's are no run
    if RUN_JSON not in present:
        if present - set(RUN_FILES):
            raise FactorbenchError(f"{run_dir} is not empty and holds no training run; give a new or empty "
                                   "directory as --out")
        return "new"
    info = read_run(run_dir)
    same = info.get("run_hash") == spec.hash()
    if force:
        for name in RUN_FILES:
            (run_dir / name).unlink(missing_ok=True)
        for snap in (run_dir / SNAPSHOTS).glob("step-*.safetensors"):
            snap.unlink()
        return "new"
    if not same:
        raise FactorbenchError(f"{run_dir} holds another run ({info.get('config', {}).get('model')}, run hash "
                               f"{str(info.get('run_hash'))[:12]}; this one is {spec.hash()[:12]}); choose another "
                               "--out, or pass --force to replace it")
    if info["done"] is not None:
        return "complete"
    if not resume:
        raise FactorbenchError(f"{run_dir} holds this run, unfinished; pass --resume to continue it or --force to "
                               "start over")
    return "resume"


#: the run's TensorBoard folder (with ``TrainOptions.tensorboard``)
TENSORBOARD = "tensorboard"


def _check_tensorboard() -> None:
    try:
        import tensorboard  # noqa: F401
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError:
        raise FactorbenchError("--tensorboard needs the tensorboard package: pip install 'factorbench[tensorboard]'") \
            from None


class _TensorBoardLog:
    """log.csv's rows as TensorBoard scalars (``loss``, ``recon``, ..., ``steps_per_s``). A resumed run starts
    a new event file that purges the events after the resume step, so TensorBoard shows what log.csv holds."""

    def __init__(self, folder: Path, resumed_at: int | None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(folder), purge_step=None if resumed_at is None else resumed_at + 1)

    def write(self, row: dict[str, float]) -> None:
        step = int(row["step"])
        for key, value in row.items():
            if key not in ("step", "wall_time_s"):
                self.writer.add_scalar(key, value, step, walltime=None)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class _CsvLog:
    def __init__(self, path: Path, keep_until: int | None) -> None:
        self.path = path
        self.header: list[str] | None = None
        rows: list[dict[str, str]] = []
        if keep_until is not None and path.is_file():
            with open(path, newline="") as fh:
                reader = csv.DictReader(fh)
                self.header = list(reader.fieldnames or []) or None
                rows = [r for r in reader if int(r["step"]) <= keep_until]
        buf = io.StringIO()
        if self.header:
            writer = csv.DictWriter(buf, self.header)
            writer.writeheader()
            writer.writerows(rows)
        write_atomically(path, buf.getvalue())

    def write(self, row: dict[str, float]) -> None:
        """Append a row. Losses that log some values on some steps only (alternating schedules) may bring a
        column the header lacks: the file is then rewritten with the wider header, earlier rows blank there."""
        fixed = ("step", "wall_time_s", "steps_per_s")
        new = self.header is None
        if not new and set(row) - set(self.header):
            with open(self.path, newline="") as fh:
                rows = list(csv.DictReader(fh))
            self.header = list(fixed) + sorted((set(self.header) | set(row)) - set(fixed))
            buf = io.StringIO()
            writer = csv.DictWriter(buf, self.header, restval="")
            writer.writeheader()
            writer.writerows(rows)
            write_atomically(self.path, buf.getvalue())
        if new:
            self.header = list(fixed) + sorted(k for k in row if k not in fixed)
        with open(self.path, "a", newline="") as fh:
            writer = csv.DictWriter(fh, self.header, restval="")
            if new:
                writer.writeheader()
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


def train(config: ModelConfig, dataset: str | Path, run_dir: str | Path, *, split: str = "train",
          resume: bool = False, force: bool = False, options: TrainOptions = TrainOptions(),
          source: str | None = None, stop: threading.Event | None = None) -> TrainResult:
    """Train ``config`` on ``split`` of ``dataset`` (a file, or a dataset name: the protocol cache's copy)
    into ``run_dir``. A complete run with the same hash is not retrained; an unfinished one continues with
    ``resume``; ``force`` starts over. Setting ``stop`` (from another thread) stops it like Ctrl-C: a
    checkpoint at the next step boundary, then :class:`TrainingInterrupted`."""
    run_dir = Path(run_dir)
    if options.threads is not None:
        if options.threads < 1:
            raise FactorbenchError(f"--threads must be >= 1, got {options.threads}")
        torch.set_num_threads(options.threads)
    device = choose_device(options.device)
    precision = choose_precision(options.precision, device)
    if device.type == "cpu" and precision == "bf16" and not _cpu_has_bf16():
        print(f"warning: --precision bf16 on a CPU without bf16 units ({cpu_model_name()}: no AVX512-BF16, no AMX) "
              f"runs emulated, about {BF16_EMULATION_SLOWDOWN:g}x slower per step than fp32 (measured on an AMD EPYC "
              "with AVX2 only); --precision auto trains in fp32 here", file=sys.stderr)
    if options.log_every < 1 or options.checkpoint_every_s <= 0:
        raise FactorbenchError("log_every and checkpoint_every_s must be positive")
    if options.resident_data not in ("auto", "always", "never"):
        raise FactorbenchError(f"resident_data {options.resident_data!r}: choose auto, always or never")
    if options.tensorboard:
        _check_tensorboard()
    _check_writable(run_dir)
    path = resolve_dataset(dataset, source=source, progress=options.progress)
    data = TrainingData(path, split, memory_limit=options.memory_limit)
    try:
        check_image_shape(config, data.image_shape)
        family = get_family(config)
        draw = family.batches(config, data) if family.batches is not None else None  # checks the data first
        if draw is None and config.batch_size > len(data):
            raise FactorbenchError(f"{config.name}: batch_size {config.batch_size} is larger than split {split!r} of "
                                   f"{data.path.name} ({len(data):,} images); use at most {len(data):,}")
        spec = RunSpec(config, data.identity)
        state = _prepare_run_dir(run_dir, spec, resume=resume, force=force)
        if resume and state == "new" and options.progress:
            print(f"{run_dir} holds no run to resume; starting this one from step 0", file=sys.stderr)
        if state == "complete":
            done = read_run(run_dir)["done"]
            if options.progress:
                print(f"{run_dir} is complete ({config.name}, {done['steps']} steps); not retrained")
            return TrainResult(run_dir, spec.hash(), "already complete", done["steps"], done["wall_time_s"],
                               done.get("steps_per_s", math.nan))
        if state == "resume" and (run_dir / CHECKPOINT).is_file():
            _check_resumed_precision(run_dir / CHECKPOINT, precision, options.precision)
        with heap_reuse(options.reuse_freed_memory and device.type == "cpu"):
            return _train(config, data, spec, run_dir, device, precision, state == "resume", options, draw, stop)
    finally:
        data.close()


def _resident_images(data: TrainingData, device: torch.device, mode: str) -> torch.Tensor | None:
    """The split's uint8 images on ``device`` (batches are then gathered there), or None (see
    ``TrainOptions.resident_data``, checked by :func:`train`)."""
    images = data.images_in_memory
    if mode == "never" or images is None:
        return None
    if mode == "auto" and (device.type != "cuda" or images.nbytes > torch.cuda.mem_get_info(device)[0] // 4):
        return None
    return torch.from_numpy(images).to(device)


def _to_device(raw: Any, device: torch.device, channels_last: bool) -> Any:
    """uint8 images (n, H, W, C) -> float (n, C, H, W) in [0, 1] on ``device`` (from a numpy array, or a uint8
    tensor already there); a dict of arrays (a family's ``batches``) -> the same dict of tensors, its
    ``"images"`` converted so and its ``"host_*"`` entries left as numpy arrays."""
    def images(a: Any) -> torch.Tensor:
        u8 = a if isinstance(a, torch.Tensor) else torch.from_numpy(a).to(device, non_blocking=True)
        x = u8.permute(0, 3, 1, 2).float().div_(255.0)
        return x if channels_last else x.contiguous()

    if isinstance(raw, dict):  # "host_*" entries stay numpy arrays: reading them never waits for the GPU
        return {k: images(v) if k == "images" else v if k.startswith("host_") else torch.from_numpy(v).to(device)
                for k, v in raw.items()}
    return images(raw)


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model_name()


def _device_signature(device: torch.device) -> str:
    """What the name leaves out and the time per step depends on: a CPU's family, model and vector units
    (:func:`factorbench.benchmark.environment.cpu_signature`), a GPU's compute capability."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return f"compute capability {major}.{minor}"
    from factorbench.benchmark.environment import cpu_signature

    return cpu_signature()


def _train(config: ModelConfig, data: TrainingData, spec: RunSpec, run_dir: Path, device: torch.device,
           precision: str, resume: bool, options: TrainOptions, draw: Any = None,
           stop_event: threading.Event | None = None) -> TrainResult:
    from tqdm import tqdm

    family = get_family(config)
    run_hash = spec.hash()
    if not resume or not (run_dir / RUN_JSON).is_file():
        record = {"run_hash": run_hash, "config": config.to_dict(), "config_hash": config.hash(), "data": spec.data,
                  "dataset_path": str(data.path.resolve()), "package_version": package_version(),
                  "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        write_atomically(run_dir / RUN_JSON, json.dumps(record, indent=1, sort_keys=True))

    if device.type == "cuda":
        apply_cuda_determinism(cuda_determinism(precision))
    torch.manual_seed(config.seed)
    model = family.build(config, data.image_shape)
    memory_format = torch.channels_last if options.channels_last and is_convolutional(config) else None
    model = model.to(device, memory_format=memory_format) if memory_format else model.to(device)
    model.train()
    groups = family.groups(model, config)
    optimizers = {name: opt for name, (_, opt) in groups.items()}
    generator = torch.Generator(device=device)
    noise_seed = config.seed + 0x5EED
    generator.manual_seed(noise_seed)
    dtype = PRECISIONS[precision]
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")

    start, wall_before, cpu_before = 0, 0.0, 0.0
    ckpt = run_dir / CHECKPOINT
    segments: list[dict[str, Any]] = []  # one per start or resume: from which step, on what, in which precision
    noise = "seeded"
    partial: dict[str, Any] = {}  # the log interval a stop cut short (its sums, continued after the resume)
    if resume and ckpt.is_file():
        start, extra = load_checkpoint(ckpt, model, optimizers, generator, noise_seed)
        partial = extra.get("log_interval") or {}
        wall_before = float(extra.get("wall_time_s", 0.0))
        cpu_before = float(extra.get("cpu_time_s") or 0.0)
        segments = list(extra.get("segments") or [])
        noise = extra["noise"]
        if extra.get("scaler"):
            scaler.load_state_dict(extra["scaler"])
    resident = _resident_images(data, device, options.resident_data) if draw is None else None
    segment = {"from_step": start, "device": str(device), "device_name": _device_name(device),
               "device_signature": _device_signature(device),
               "precision": precision, "noise": noise, "threads": torch.get_num_threads(),
               "data_on_device": resident is not None}
    if device.type == "cuda":
        segment["determinism"] = cuda_determinism(precision)
    segments.append(segment)
    log = _CsvLog(run_dir / LOG, keep_until=start if resume else None)
    board = _TensorBoardLog(run_dir / TENSORBOARD, start if resume else None) if options.tensorboard else None
    stop_at = config.steps if options.stop_after is None else min(config.steps, options.stop_after)

    sums: dict[str, torch.Tensor] = {k: torch.tensor(v, dtype=torch.float32, device=device)
                                     for k, v in (partial.get("sums") or {}).items()}
    counts: dict[str, int] = {k: int(v) for k, v in (partial.get("counts") or {}).items()}
    count, step = int(partial.get("count", 0)), start

    def checkpoint(step: int, wall: float) -> None:
        # a stop between two log rows keeps the interval's sums (exact: float32 values as JSON doubles), so that
        # the resumed run writes the same log rows as one never stopped
        interval = {"sums": {k: float(v) for k, v in sums.items()}, "counts": counts, "count": count} if count else None
        save_checkpoint(ckpt, model, optimizers, generator, step,
                        {"wall_time_s": wall, "cpu_time_s": cpu_before + time.process_time() - cpu_start,
                         "scaler": scaler.state_dict() if scaler.is_enabled() else None,
                         "device": str(device), "precision": precision, "segments": segments,
                         "log_interval": interval})

    t_start, cpu_start = time.perf_counter(), time.process_time()
    t_interval, step_interval = t_start, start
    last_ckpt = t_start

    def flush_log(step: int) -> dict[str, float]:
        nonlocal sums, counts, count, t_interval, step_interval
        values = {k: float(v) / counts[k] for k, v in sums.items()}
        if config.lr_decay_every:  # the scheduled rate of the interval's last step (the model's optimiser)
            values["lr"] = next(iter(optimizers.values())).param_groups[0]["lr"]
        bad = [k for k, v in values.items() if not math.isfinite(v)]
        if bad:
            kept = (f"the last checkpoint in {run_dir} is intact" if ckpt.is_file() else
                    "no checkpoint was written yet")
            advice = "lower lr" + (" or try --precision fp32" if precision != "fp32" else "")
            raise FactorbenchError(f"{config.name}: {', '.join(bad)} became {values[bad[0]]} by step {step}; {kept}. "
                                   f"{advice[0].upper()}{advice[1:]}")
        now = time.perf_counter()
        rate = (step - step_interval) / max(now - t_interval, 1e-9)
        row = {"step": step, "wall_time_s": wall_before + now - t_start, "steps_per_s": rate, **values}
        log.write(row)
        if board is not None:
            board.write(row)
        sums, counts, count, t_interval, step_interval = {}, {}, 0, now, step
        return {**values, "steps_per_s": rate}

    bar = tqdm(total=config.steps, initial=start, desc=f"{config.name}", unit="step", disable=None if options.progress else True,
               dynamic_ncols=True)
    with _stop_signals(stop_event) as stop:
        try:
            if draw is not None:
                raw_batches: Any = data.stream(draw, start, stop_at)
            elif resident is not None:  # gathered on the device: the same rows as data.batches
                raw_batches = (resident.index_select(0, torch.from_numpy(
                    data.batch_positions(s, config.batch_size, config.seed)).to(device, non_blocking=True))
                    for s in range(start, stop_at))
            else:
                raw_batches = data.batches(start, stop_at, config.batch_size, config.seed)
            for raw in raw_batches:
                x = _to_device(raw, device, memory_format is not None)
                apply_lr_schedule(optimizers, config, step)
                with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                    out = model(x, generator)
                loss = family.loss(out, x, config, step, len(data))
                for opt in optimizers.values():
                    opt.zero_grad(set_to_none=True)
                names = list(loss.groups)
                for i, name in enumerate(names):
                    scaler.scale(loss.groups[name]).backward(inputs=groups[name][0], retain_graph=i < len(names) - 1)
                for name, opt in optimizers.items():
                    if name in loss.groups:
                        scaler.step(opt)
                scaler.update()
                for k, v in loss.logs.items():
                    sums[k] = sums[k] + v.detach() if k in sums else v.detach().float().clone()
                    counts[k] = counts.get(k, 0) + 1
                count += 1
                step += 1
                bar.update(1)
                if options.snapshot_every and step % options.snapshot_every == 0 and step < config.steps:
                    (run_dir / SNAPSHOTS).mkdir(exist_ok=True)
                    save_weights(snapshot_path(run_dir, step), model, {"run_hash": run_hash, "step": str(step)})
                if step % options.log_every == 0 or step == config.steps:
                    values = flush_log(step)
                    bar.set_postfix(loss=f"{values.get('loss', math.nan):.4g}", refresh=False)
                    if time.perf_counter() - last_ckpt >= options.checkpoint_every_s:
                        checkpoint(step, wall_before + time.perf_counter() - t_start)
                        last_ckpt = time.perf_counter()
                if stop.is_set():
                    checkpoint(step, wall_before + time.perf_counter() - t_start)
                    raise TrainingInterrupted(f"interrupted at step {step} of {config.steps}; the checkpoint is in "
                                              f"{run_dir}: continue with --resume")
        finally:
            bar.close()
            if board is not None:
                board.close()
    wall = wall_before + time.perf_counter() - t_start
    rate = (step - start) / max(time.perf_counter() - t_start, 1e-9)
    checkpoint(step, wall)
    if step < config.steps:
        return TrainResult(run_dir, run_hash, "stopped", step, wall, rate)
    save_weights(run_dir / WEIGHTS, model, {"run_hash": run_hash, "config": config.to_json()})
    if options.samples:
        model.eval()
        write_samples(model, data, run_dir / SAMPLES, device=device)
    done = {"steps": step, "wall_time_s": wall, "cpu_time_s": cpu_before + time.process_time() - cpu_start,
            "steps_per_s": rate, "device": str(device), "device_name": _device_name(device),
            "device_signature": _device_signature(device),
            "precision": precision, "threads": torch.get_num_threads(), "segments": segments,
            "torch_version": torch.__version__, "package_version": package_version(),
            "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    write_atomically(run_dir / DONE, json.dumps(done, indent=1, sort_keys=True))
    return TrainResult(run_dir, run_hash, "finished", step, wall, rate)
