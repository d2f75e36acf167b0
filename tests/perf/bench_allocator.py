"""CPU time of a training step with freed memory kept for reuse (``factorbench.baselines.allocator``, the
trainer's default on the CPU) against glibc's default, where each block over its mmap threshold is
unmapped on free and page-faults in anew at the next step; as ratios, measured in the same run.

Each row is one architecture's beta-VAE (batch 64, 10 latents, Adam with weight decay 4e-5 as in
``almudevar-ortega-v1``) on random 64 x 64 x ``--channels`` images: the trainer's step (the family's
model, its loss, back-propagation, Adam), ``--warmup`` untimed steps, then ``--steps`` timed ones, CPU time
of the process (``time.process_time``). glibc's setting is process-wide and sticky, so every measurement
runs in a fresh process; the two settings take turns over ``--rounds`` rounds and the medians are
reported, with each process's peak resident memory and whether both settings reached the same weights
bit for bit (they must: only where memory comes from differs).

    python tests/perf/bench_allocator.py                          # chen-mlp, montero-small, burgess-2018, burgess
    python tests/perf/bench_allocator.py --only chen-mlp --channels 1 --rounds 5

One thread per process. Run it on an otherwise idle core (a second busy process on the same core
halves every figure but not their ratio).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import time

ARCHITECTURES = ["chen-mlp", "montero-small", "burgess-2018", "burgess"]


def _child(arch: str, reuse: bool, channels: int, warmup: int, steps: int) -> dict:
    import torch

    from factorbench.baselines import models  # noqa: F401  (registers the families)
    from factorbench.baselines.allocator import heap_reuse
    from factorbench.baselines.config import get_family, make_config
    from factorbench.baselines.nets import is_convolutional

    torch.set_num_threads(1)
    config = make_config("beta-vae", {"architecture": arch, "beta": 4.0, "latent_dim": 10, "lr": 1e-4,
                                      "weight_decay": 4e-5})
    family = get_family(config)
    with heap_reuse(reuse) as applied:
        torch.manual_seed(0)
        model = family.build(config, (64, 64, channels))
        layout = torch.channels_last if is_convolutional(config) else torch.contiguous_format
        model = model.to(memory_format=layout).train()
        groups = family.groups(model, config)
        noise = torch.Generator().manual_seed(1)
        x = torch.rand(config.batch_size, channels, 64, 64, generator=torch.Generator().manual_seed(2))
        x = x.contiguous(memory_format=layout)

        def step(i: int) -> None:
            loss = family.loss(model(x, noise), x, config, i, 480_000)
            for name, (params, optimiser) in groups.items():
                optimiser.zero_grad(set_to_none=True)
                loss.groups[name].backward(inputs=params)
                optimiser.step()

        for i in range(warmup):
            step(i)
        start = time.process_time()
        for i in range(warmup, warmup + steps):
            step(i)
        cpu = (time.process_time() - start) / steps
        digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    return {"applied": applied, "ms_per_step": 1000 * cpu, "peak_rss_mb": resource.getrusage(
            resource.RUSAGE_SELF).ru_maxrss / 1024, "weights": digest[:16]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", default=ARCHITECTURES, metavar="ARCH")
    parser.add_argument("--channels", type=int, default=3, choices=(1, 3))
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("ARCH", "REUSE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        arch, reuse = args.child
        print(json.dumps(_child(arch, reuse == "1", args.channels, args.warmup, args.steps)))
        return 0
    from factorbench.baselines.trainer import cpu_model_name

    print(f"# {cpu_model_name()}; one thread; beta-VAE, batch 64, 64 x 64 x {args.channels}; {args.steps} steps "
          f"after {args.warmup}, {args.rounds} rounds; medians", file=sys.stderr)
    print("| architecture | glibc default (ms/step) | freed memory reused (ms/step) | speed-up | peak RSS MB "
          "(default; reused) | same weights |")
    print("|---|---|---|---|---|---|")
    for arch in args.only:
        runs: dict[str, list[dict]] = {"0": [], "1": []}
        for _ in range(args.rounds):
            for reuse in ("0", "1"):
                out = subprocess.run([sys.executable, __file__, "--child", arch, reuse, "--channels",
                                      str(args.channels), "--warmup", str(args.warmup), "--steps", str(args.steps)],
                                     check=True, capture_output=True, text=True).stdout
                runs[reuse].append(json.loads(out.strip().splitlines()[-1]))
        off = statistics.median(r["ms_per_step"] for r in runs["0"])
        on = statistics.median(r["ms_per_step"] for r in runs["1"])
        same = len({r["weights"] for r in runs["0"] + runs["1"]}) == 1
        applied = all(r["applied"] for r in runs["1"])
        print(f"| {arch} | {off:.0f} | {on:.0f}{'' if applied else ' (not applied: no glibc)'} | {off / on:.2f}x | "
              f"{max(r['peak_rss_mb'] for r in runs['0']):.0f}; {max(r['peak_rss_mb'] for r in runs['1']):.0f} | "
              f"{'yes' if same else 'NO'} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
