"""``torch.compile`` of a model's forward pass against the eager step, on this machine's CPU, in one run.

The trainer's step as ``train()`` runs it (a beta-VAE by default: forward under autocast, the family's
loss, backward, Adam), batch 64 of random 64 x 64 x 3 images in channels-last, once in eager mode and
once with ``torch.compile(model)`` (inductor, default mode), in fp32 and in bf16 autocast. After
``--warmup`` steps each (the compile's warm-up reported apart), the two take turns over ``--rounds``
rounds of ``--steps`` steps; prints the median ms per step and eager / compiled.

    python tests/perf/bench_compile.py                      # beta-vae, burgess, 1 thread
    python tests/perf/bench_compile.py --model factor-vae --architecture dlib --threads 2

Run it on an otherwise idle machine (a busy core makes every row slower, not the same).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch


def make_step(model_name: str, architecture: str, compiled: bool, bf16: bool) -> Callable[[int], None]:
    """One training step of a fresh model (seed 0), eager or compiled."""
    import factorbench.baselines.models  # noqa: F401  (registers the model families)
    from factorbench.baselines.config import get_family, make_config

    config = make_config(model_name, {"steps": 1000, "architecture": architecture})
    family = get_family(config)
    torch.manual_seed(0)
    model = family.build(config, (64, 64, 3)).to(memory_format=torch.channels_last)
    groups = family.groups(model, config)
    forward = torch.compile(model) if compiled else model
    generator = torch.Generator().manual_seed(1)
    x = torch.rand(config.batch_size, 3, 64, 64, generator=generator).contiguous(memory_format=torch.channels_last)

    def step(i: int) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = forward(x, generator)
        loss = family.loss(out, x, config, i, 4096)
        for _, opt in groups.values():
            opt.zero_grad(set_to_none=True)
        names = list(loss.groups)
        for k, name in enumerate(names):
            loss.groups[name].backward(inputs=groups[name][0], retain_graph=k < len(names) - 1)
        for name, (_, opt) in groups.items():
            if name in loss.groups:
                opt.step()

    return step


def time_step(step: Callable[[int], None], warmup: int, steps: int) -> tuple[float, float]:
    """(warm-up seconds, seconds per step; nan for no steps)."""
    t0 = time.perf_counter()
    for i in range(warmup):
        step(i)
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(steps):
        step(warmup + i)
    return warm, (time.perf_counter() - t0) / steps if steps else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="beta-vae")
    ap.add_argument("--architecture", default="burgess")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from factorbench.benchmark.environment import cpu_model_name

    torch.set_num_threads(args.threads)
    print(f"{args.model} ({args.architecture}), batch 64, {args.threads} thread(s), {cpu_model_name()}, "
          f"PyTorch {torch.__version__}")
    for bf16 in (False, True):
        precision = "bf16" if bf16 else "fp32"
        steps = {label: make_step(args.model, args.architecture, label == "compiled", bf16)
                 for label in ("eager", "compiled")}
        times: dict[str, list[float]] = {label: [] for label in steps}
        for label, step in steps.items():  # warm-up (the compile) once, outside the timed rounds
            warm, _ = time_step(step, args.warmup, 0)
            print(f"  {precision} {label:<9} warm-up {warm:.1f} s ({args.warmup} steps)", flush=True)
        for _ in range(args.rounds):  # the two take turns, so that a drifting machine hits both alike
            for label, step in steps.items():
                times[label].append(time_step(step, 0, args.steps)[1])
        med = {label: statistics.median(t) for label, t in times.items()}
        for label, t in times.items():
            print(f"  {precision} {label:<9} {1e3 * med[label]:8.1f} ms/step (median of "
                  f"{', '.join(f'{1e3 * x:.1f}' for x in t)})", flush=True)
        print(f"  {precision} eager / compiled: {med['eager'] / med['compiled']:.2f}x", flush=True)

if __name__ == "__main__":
    main()
