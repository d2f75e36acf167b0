"""The training subcommands of ``factorbench`` (``train``, ``show-run``, ``sweep``), registered into the CLI's
command table. PyTorch (and submitit) are imported only when one of them runs (install the ``train`` extra)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from factorbench.benchmark.cli import command
from factorbench.generators.errors import FactorbenchError
from factorbench.generators.params import parse_param_assignments
from factorbench.generators.spec import canonical_json

__all__: list[str] = []


def _need_torch() -> None:
    try:
        import safetensors  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        raise FactorbenchError("training needs PyTorch and safetensors: pip install 'factorbench[train]' "
                               "(on a CPU-only machine install torch's CPU build first)") from None


def _model_names() -> list[str]:
    from .config import MODELS

    _need_torch()
    from . import models  # noqa: F401

    return sorted(MODELS)


@command("train", "train a baseline model on a dataset into a run directory (resumable)")
def _train(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="model name; `factorbench train list` prints every model with its settings")
    p.add_argument("--dataset", metavar="NAME_OR_FILE", help="required: a dataset name (the protocols' cached copy, "
                   "generated on first use) or a dataset file")
    p.add_argument("--split", default="train", help="split of the dataset to train on, or 'all' (default train)")
    p.add_argument("--out", metavar="RUN_DIR", help="required: the run directory (config, checkpoints, log, weights, "
                   "samples.png)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: the model's)")
    p.add_argument("--seed", type=int, default=None, help="seed of initialisation, batches and noise (default 0)")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="model setting (repeatable), e.g. beta=4, "
                   "latent_dim=4, architecture=dlib")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="auto (CUDA when present), cpu "
                   "or cuda")
    p.add_argument("--precision", default="auto", choices=("auto", "bf16", "fp16", "fp32"), help="auto (fp32 on CUDA, "
                   "where bf16 measured slower; bf16 on CPUs with bf16 units, else fp32), bf16, fp16 (CUDA) or fp32")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: one per core; on a busy "
                   "machine use fewer)")
    p.add_argument("--resume", action="store_true", help="continue an unfinished run in RUN_DIR")
    p.add_argument("--force", action="store_true", help="replace whatever run RUN_DIR holds")
    p.add_argument("--checkpoint-every", type=float, default=120.0, metavar="SECONDS",
                   help="seconds between checkpoints (default 120, as in `sweep`)")
    p.add_argument("--snapshot-every", type=int, default=None, metavar="STEPS",
                   help="also keep the weights every STEPS steps (evaluate one with --encoder run:RUN_DIR@STEP)")
    p.add_argument("--tensorboard", action="store_true", help="also log to TensorBoard, RUN_DIR/tensorboard (needs "
                   "pip install 'factorbench[tensorboard]'; view with tensorboard --logdir RUN_DIR)")
    p.add_argument("--source", metavar="PATH", default=None, help="local data for datasets that need it")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    def run(args: argparse.Namespace) -> int:
        names = _model_names()
        from .config import make_config

        if args.model == "list":
            for name in names:
                print(f"{name:<14} {canonical_json(make_config(name).to_dict(every_setting=True))}")
            return 0
        if args.dataset is None or args.out is None:
            raise FactorbenchError("train needs --dataset NAME_OR_FILE and --out RUN_DIR")
        overrides = parse_param_assignments(args.param)
        for key, value in (("steps", args.steps), ("seed", args.seed)):
            if value is not None:
                if key in overrides:
                    raise FactorbenchError(f"--{key} and --param {key}= both given; give one")
                overrides[key] = value
        config = make_config(args.model, overrides)
        from .trainer import TrainOptions, train

        options = TrainOptions(device=args.device, precision=args.precision, checkpoint_every_s=args.checkpoint_every,
                               progress=not args.quiet, snapshot_every=args.snapshot_every,
                               tensorboard=args.tensorboard,
                               threads=args.threads)
        result = train(config, args.dataset, args.out, split=args.split, resume=args.resume, force=args.force,
                       options=options, source=args.source)
        if result.status == "already complete":
            print(f"{result.run_dir} already holds this run, complete ({result.step} steps); not retrained")
        if result.status == "finished":
            print(f"trained {config.name} for {result.step} steps in {result.wall_time_s:.0f} s "
                  f"({result.steps_per_s:.1f} steps/s) -> {result.run_dir}")
            print(f"evaluate it with: factorbench evaluate PROTOCOL --encoder run:{result.run_dir}")
        return 0
    p.set_defaults(run=run)


@command("show-run", "redraw a trained run's picture: reconstructions and latent traversals")
def _show_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--out", metavar="PNG", default=None, help="default: RUN_DIR/samples.png")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")

    def run(args: argparse.Namespace) -> int:
        _need_torch()
        from .show import show_run

        print(f"wrote {show_run(args.run_dir, args.out, force=args.force)}")
        return 0
    p.set_defaults(run=run)


def _in_source_checkout() -> bool:
    """factorbench runs from a git checkout (where collected rows are committed), not an installed package."""
    from factorbench.benchmark.environment import source_root

    return source_root() is not None


def _sources(items: list[str] | None) -> tuple[tuple[str, str], ...]:
    """``--source DATASET=PATH`` items as (generator, path) pairs; each dataset a generator that takes a source."""
    from factorbench.benchmark.protocols import PROTOCOLS

    pairs = parse_param_assignments(items, flag="--source")
    local = sorted({p.dataset.generator for p in PROTOCOLS.values() if p.needs_source})
    for name in pairs:
        if name not in local:
            raise FactorbenchError(f"--source {name}=...: {name!r} is not made from your data; give DATASET=PATH for "
                                   f"one of {', '.join(local)}, e.g. coil100=~/data/coil-100")
    return tuple((name, os.path.expanduser(path)) for name, path in sorted(pairs.items()))


@command("sweep", "train and evaluate a plan's models (local processes or SLURM), resumable; --status, --collect")
def _sweep(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", metavar="PLAN", help="a plan file (.toml) or a shipped plan's name, e.g. reference-v1")
    p.add_argument("--engine", default="local", choices=("local", "slurm"), help="local (processes on this machine) "
                   "or slurm (a job array); default local")
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="jobs run at once (default: 1 locally; under "
                   "SLURM all of them, the scheduler decides)")
    p.add_argument("--pack", type=int, default=None, metavar="K", help="jobs sharing one GPU, each in its own process "
                   "(locally: default 8 where jobs train on GPUs, each job given one GPU; under SLURM: K jobs per "
                   "array "
                   "task, one SLURM task each; default 1); start CUDA MPS first for the most throughput")
    p.add_argument("--only", metavar="PATTERN", help="only these jobs: shell patterns over job ids (name/dataset/"
                   "seedK), job indices or ranges, comma-separated, e.g. 'vae/square/*' or '0-8'; "
                   "they run in the order given, e.g. '*/dsprites/*,*' runs the dSprites jobs first")
    p.add_argument("--dry-run", action="store_true", help="list the jobs and their state; run nothing")
    p.add_argument("--status", action="store_true", help="what is done, running, failed (with the error) and left, "
                   "CPU hours spent and an estimate for the rest")
    p.add_argument("--collect", nargs="?", const="", metavar="DIR", help="write the finished results as reference "
                   "files DIR/<protocol>/<name>.json (default, in a git checkout of factorbench only: its "
                   "benchmark/reference)")
    p.add_argument("--complete-only", action="store_true", help="--collect: only entries whose every seed has "
                   "finished (no row of fewer seeds than the plan asks for)")
    p.add_argument("--pending", metavar="DIR", help="--collect: write the entries with seeds still to run into "
                   "DIR/<protocol>/<name>.json instead (implies --complete-only), so that their finished seeds survive "
                   "a new machine (--restore DIR); an entry collected complete has its file there removed")
    p.add_argument("--restore", nargs="?", const="", metavar="DIR", help="put the finished runs of reference files "
                   "DIR/<protocol>/<name>.json (default: the package's benchmark/reference) back into the sweep "
                   "directory, so that a sweep continued on a new machine skips them and --collect keeps them")
    p.add_argument("--dir", metavar="SWEEP_DIR", help="sweep directory (default $FACTORBENCH_SWEEPS/<plan name>, "
                   "else ~/.cache/factorbench/sweeps/<plan name>)")
    p.add_argument("--verbose", action="store_true", help="--status: list the finished jobs too")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="auto (CUDA when present), cpu "
                   "or cuda")
    p.add_argument("--precision", default="auto", choices=("auto", "bf16", "fp16", "fp32"),
                   help="auto, bf16, fp16 or fp32 (see `factorbench train`)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads per job (default: the libraries' "
                   "defaults; with --jobs N on C cores use about C/N)")
    p.add_argument("--checkpoint-every", type=float, default=120.0, metavar="SECONDS",
                   help="seconds between training checkpoints (default 120)")
    p.add_argument("--record-every", type=float, default=30.0, metavar="SECONDS",
                   help="seconds between updates of a running job's record (CPU time so far; default 30)")
    p.add_argument("--source", action="append", metavar="DATASET=PATH", help="your copy of a dataset made from "
                   "outside data, for the jobs whose protocols need one (repeatable), e.g. coil100=~/data/coil-100")
    p.add_argument("--data-workers", type=int, default=1, metavar="N", help="processes that generate a dataset the "
                   "jobs need and the cache lacks, while the other jobs wait for it (default 1; on a many-core "
                   "machine about its core count)")
    p.add_argument("--slurm", action="append", metavar="KEY=VALUE", help="SLURM setting for --engine slurm "
                   "(repeatable): partition, time (minutes or [D-]HH:MM:SS), cpus_per_task, mem, gpus_per_node, "
                   "account, qos, constraint, exclude, nodelist, job_name, comment, signal_delay_s, max_num_timeout, "
                   "setup (a shell line; repeatable), sbatch.OPTION (any other sbatch option); see BASELINES.md")

    def run(args: argparse.Namespace) -> int:
        _need_torch()
        try:
            import submitit  # noqa: F401
        except ImportError:
            raise FactorbenchError("sweeps need submitit: pip install 'factorbench[train]'") from None
        from .plan import expand, load_plan, select
        from .slurm import parse_slurm_settings
        from .gpus import visible_gpus
        from .sweep import (ENGINES, SweepOptions, collect, default_sweep_dir, format_status, job_done,
                            precision_here_for, restore, run_sweep, sweep_status)

        if args.engine not in ENGINES:
            raise FactorbenchError(f"--engine {args.engine!r}: choose one of {', '.join(ENGINES)}")
        if args.slurm and args.engine != "slurm":
            raise FactorbenchError("--slurm settings need --engine slurm")
        modes = [name for name in ("dry_run", "status") if getattr(args, name)] + \
            [name for name in ("collect", "restore") if getattr(args, name) is not None]
        if len(modes) > 1:
            raise FactorbenchError(f"give one of --dry-run, --status, --collect and --restore (got {', '.join(modes)})")
        plan = load_plan(args.plan)
        sweep_dir = Path(args.dir) if args.dir else default_sweep_dir(plan)
        if args.dir and (args.status or args.collect is not None) and not sweep_dir.is_dir():
            raise FactorbenchError(f"--dir {sweep_dir}: no such sweep folder (a sweep writes it when it starts)")
        if args.status:
            options = SweepOptions(device=args.device, precision=plan.precision or args.precision)
            here = precision_here_for(args.engine, visible_gpus(args.device) if args.engine == "local" else (), options)
            print(format_status(plan, sweep_status(plan, sweep_dir, args.only), sweep_dir, verbose=args.verbose,
                                precision_here=here))
            return 0
        if args.complete_only and args.collect is None:
            raise FactorbenchError("--complete-only says which entries --collect writes; give it with --collect")
        if args.pending is not None and args.collect is None:
            raise FactorbenchError("--pending says where --collect writes unfinished entries; give it with --collect")
        if args.collect is not None:
            if not args.collect and not _in_source_checkout():
                raise FactorbenchError("--collect without DIR writes into factorbench's own reference folder, which is "
                                       "part of the installed package here; give a folder: --collect DIR")
            written = collect(plan, sweep_dir, args.collect or None, complete_only=args.complete_only,
                              pending=args.pending)
            print(f"{len(written)} reference file{'s' if len(written) != 1 else ''} written")
            return 0
        if args.restore is not None:
            restore(plan, sweep_dir, args.restore or None)
            return 0
        if args.dry_run:
            jobs = select(expand(plan), args.only)
            print(f"plan {plan.name} (hash {plan.hash()[:12]}): {len(jobs)} jobs -> {sweep_dir}")
            for job in jobs:
                state = "done" if job_done(job, sweep_dir) else "to run"
                print(f"  {job.index:>4}  {job.id:<36} {job.entry.model:<13} config {job.config.hash()[:12]}  "
                      f"{job.config.steps} steps  {state}  -> {', '.join(job.protocols)}")
            return 0
        if args.data_workers < 1:
            raise FactorbenchError(f"--data-workers {args.data_workers}: give a number of processes, 1 or more")
        options = SweepOptions(device=args.device, precision=args.precision, threads=args.threads,
                               checkpoint_every_s=args.checkpoint_every, record_every_s=args.record_every,
                               sources=_sources(args.source), data_workers=args.data_workers)
        outcome = run_sweep(plan, sweep_dir, engine=args.engine, parallel=args.jobs, only=args.only, options=options,
                            settings=parse_slurm_settings(args.slurm) if args.engine == "slurm" else None,
                            pack=args.pack)
        failed = sorted(k for k, v in outcome.items() if v == "failed")
        if failed:
            print(f"{len(failed)} job{'s' if len(failed) > 1 else ''} failed: {', '.join(failed)}; see --status")
            return 1
        return 0
    p.set_defaults(run=run)
