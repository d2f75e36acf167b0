"""The training subcommands of ``factorbench`` (``train``, ``show-run``), registered into the CLI's
command table. PyTorch is imported only when one of them runs (install the ``train`` extra)."""

from __future__ import annotations

import argparse

from factorbench.benchmark.cli import command
from factorbench.generators.errors import FactorbenchError
from factorbench.generators.params import parse_param_assignments

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
    p.add_argument("model", help="model name (see `factorbench train --list`); 'list' prints them with their settings")
    p.add_argument("--dataset", metavar="NAME_OR_FILE", help="a dataset name (the protocols' cached copy, generated "
                   "on first use) or a dataset file")
    p.add_argument("--split", default="train", help="split of the dataset to train on, or 'all' (default train)")
    p.add_argument("--out", metavar="RUN_DIR", help="run directory (config, checkpoints, log, weights, samples.png)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: the model's)")
    p.add_argument("--seed", type=int, default=None, help="seed of initialisation, batches and noise (default 0)")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="model setting (repeatable), e.g. beta=4, "
                   "latent_dim=4, architecture=dlib")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda")
    p.add_argument("--precision", default="auto", help="auto (bf16 on CUDA and on CPUs with bf16 units, else fp32; "
                   "fp16 on CUDA without bf16), bf16, fp16 or fp32")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: one per core; on a busy "
                   "machine use fewer)")
    p.add_argument("--resume", action="store_true", help="continue an unfinished run in RUN_DIR")
    p.add_argument("--force", action="store_true", help="replace whatever run RUN_DIR holds")
    p.add_argument("--checkpoint-every", type=float, default=180.0, metavar="SECONDS",
                   help="seconds between checkpoints (default 180)")
    p.add_argument("--snapshot-every", type=int, default=None, metavar="STEPS",
                   help="also keep the weights every STEPS steps (evaluate one with --encoder run:RUN_DIR@STEP)")
    p.add_argument("--source", metavar="PATH", default=None, help="local data for datasets that need it")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    def run(args: argparse.Namespace) -> int:
        names = _model_names()
        from .config import make_config

        if args.model == "list":
            for name in names:
                print(f"{name:<14} {make_config(name).to_json()}")
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
