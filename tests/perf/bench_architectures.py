"""Training steps per second of every architecture (and of the HFS-VAE and AAE losses) at batch 64 and
256, in float32 and in bfloat16 autocast, as ratios against the ``burgess`` beta-VAE at the same batch
and precision, measured in the same run.

Each row: ``--warmup`` untimed steps, then ``--steps`` timed steps of the trainer's own step (the
family's model, its pure loss, back-propagation per optimiser group, Adam), on random images already on
the device (no data pipeline: the step's arithmetic alone), channels-last for convolutional networks as
``factorbench train`` runs them (``--memory-format contiguous`` times the other layout too). The
contenders take turns over ``--rounds`` rounds; medians reported. Images have ``--channels`` channels (1:
dSprites; 3: Shapes3D, MPI3D).

    python tests/perf/bench_architectures.py --threads 2                 # all rows, about 15 min on 2 cores
    python tests/perf/bench_architectures.py --batch 256 --only montero-large hfs-vae
    python tests/perf/bench_architectures.py --batch 64 --threads 1 --only burgess --precision fp32 \
        --channels 3 --memory-format channels_last contiguous      # the layout's effect

Run it on an otherwise idle machine (PyTorch's OpenMP threads spin while they wait for a busy core).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import torch

from factorbench.baselines import models  # noqa: F401  (registers the families)
from factorbench.baselines.config import ARCHITECTURES, get_family, make_config
from factorbench.baselines.nets import is_convolutional
from factorbench.baselines.trainer import cpu_model_name

REFERENCE = "burgess"
#: extra rows: (label, model, params) — the new losses on the reference architecture
LOSS_ROWS = [("hfs-vae", "hfs-vae", {}), ("aae", "aae", {"hidden": 128})]


def _rows(only: list[str] | None) -> list[tuple[str, str, dict[str, Any]]]:
    rows = [(a, "beta-vae", {"architecture": a}) for a in ARCHITECTURES] + LOSS_ROWS
    return [r for r in rows if only is None or r[0] in only or r[0] == REFERENCE]


class _Step:
    """One model, its optimisers and a fixed batch; ``__call__(n)`` runs n training steps."""

    def __init__(self, model_name: str, params: dict[str, Any], batch: int, channels: int, precision: str,
                 memory_format: str = "channels_last") -> None:
        config = make_config(model_name, {**params, "batch_size": batch})
        self.config, self.family = config, get_family(config)
        torch.manual_seed(0)
        fmt = torch.channels_last if is_convolutional(config) and memory_format == "channels_last" \
            else torch.contiguous_format
        self.model = self.family.build(config, (64, 64, channels)).to(memory_format=fmt).train()
        self.groups = self.family.groups(self.model, config)
        self.x = torch.rand(batch, channels, 64, 64).round().contiguous(memory_format=fmt)
        self.gen = torch.Generator().manual_seed(1)
        self.dtype = torch.bfloat16 if precision == "bf16" else None
        self.step = 0

    def __call__(self, n: int) -> None:
        for _ in range(n):
            with torch.autocast("cpu", dtype=self.dtype or torch.float32, enabled=self.dtype is not None):
                out = self.model(self.x, self.gen)
            loss = self.family.loss(out, self.x, self.config, self.step, 100_000)
            for _, opt in self.groups.values():
                opt.zero_grad(set_to_none=True)
            names = list(loss.groups)
            for i, name in enumerate(names):
                loss.groups[name].backward(inputs=self.groups[name][0], retain_graph=i < len(names) - 1)
            for name in names:
                self.groups[name][1].step()
            self.step += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--only", nargs="+", default=None, help="row labels to time (the reference always is)")
    parser.add_argument("--memory-format", nargs="+", default=["channels_last"],
                        choices=["channels_last", "contiguous"],
                        help="layouts of the convolutional networks' weights and images (the trainer's: channels_last)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"# {cpu_model_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}; "
          f"{args.channels}-channel 64 x 64 images; median of {args.rounds} rounds of {args.steps} steps")
    print("row | batch | precision | steps/s | images/s | vs burgess (same batch, precision, layout)")
    for batch in args.batch:
        for precision in args.precision:
            steppers = {f"{label}, {fmt}" if len(args.memory_format) > 1 else label:
                        _Step(model, params, batch, args.channels, precision, fmt)
                        for label, model, params in _rows(args.only) for fmt in args.memory_format}
            for s in steppers.values():
                s(args.warmup)
            rates: dict[str, list[float]] = {label: [] for label in steppers}
            for _ in range(args.rounds):
                for label, s in steppers.items():
                    t = time.perf_counter()
                    s(args.steps)
                    rates[label].append(args.steps / (time.perf_counter() - t))
            for label, values in rates.items():
                layout = label.rsplit(", ", 1)[1] if len(args.memory_format) > 1 else None
                ref = statistics.median(rates[f"{REFERENCE}, {layout}" if layout else REFERENCE])
                rate = statistics.median(values)
                print(f"{label} | {batch} | {precision} | {rate:.2f} | {rate * batch:.0f} | {rate / ref:.2f}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
