"""Training throughput of factorbench's trainer next to the ``disent`` library's (v0.8.0), in one run.

The same model in both: a beta-VAE (beta 4, 10 latents) with the Burgess conv64 encoder/decoder (conv
32, 32, 64, 64, kernel 4, stride 2; dense 256; the mirror decoder), which is disent's ``EncoderConv64`` /
``DecoderConv64`` and factorbench's ``burgess`` architecture; Bernoulli reconstruction summed over pixels
and averaged over the batch (disent: ``recon_loss="bce"``, ``loss_reduction="mean_sum"``); Adam lr 1e-4;
batch 64 of the ``square`` images (4,096 x 64 x 64 x 3). What differs: disent trains through its
Lightning framework in float32 (its default; no autocast option in its framework), from a DataLoader
of float tensors; its encoder emits mean and log-variance from one dense layer of 2 x 10 units where
factorbench has two heads of 10 (the same arithmetic).

Rows, each timed over ``--steps`` steps after ``--warmup`` steps, the contenders taking turns over
``--rounds`` rounds (medians reported, ratios per round):

- ``disent (Lightning)``: ``BetaVae`` in a ``lightning.Trainer`` (no logger, no checkpointing, no
  progress bar), timed by a callback between batches;
- ``disent modules, plain loop, fp32`` / ``bf16 + channels_last``: disent's model and loss driven by a
  plain PyTorch loop, to separate the framework's overhead from the arithmetic;
- ``factorbench``: :func:`factorbench.baselines.trainer.train` as ``factorbench train`` runs it
  (precision auto: bfloat16 autocast and channels-last on a CPU with bf16 units), with its data pipeline
  (images in memory as uint8, seeded batches); ``factorbench fp32``: the same in float32, contiguous, and
  the two other combinations of precision and memory format;
  ``factorbench streamed``: the images read from the HDF5 file in batches by a reader thread (as for the
  200,000-image teapot); ``factorbench fixed batch``: one batch reused, i.e. no data pipeline at all.

Setup (a separate virtualenv, so that disent's dependencies stay out of the project's)::

    python3 -m venv .venv-disent
    .venv-disent/bin/pip install torch==2.13.0                  # the CPU wheel of the local index
    .venv-disent/bin/pip install --no-deps disent==0.8.0
    .venv-disent/bin/pip install numpy scipy scikit-learn h5py tqdm pillow safetensors lightning
    .venv-disent/bin/pip install --no-deps trimesh
    .venv-disent/bin/pip install --no-deps -e .                 # factorbench, from the repository root
    .venv-disent/bin/python tests/perf/bench_train.py

disent imports torchvision, whose PyPI wheels do not load against the CPU torch: a stand-in module is
put in its place for the import (as in ``bench_metrics.py``); nothing used here touches it. Run it on an
otherwise idle machine: PyTorch's OpenMP threads spin while they wait for a busy core, so a second busy
process can make a 2-thread step several times slower for every contender.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

BATCH, LATENT, BETA, LR = 64, 10, 4.0, 1e-4


def _import_disent() -> Any:
    from bench_metrics import _torchvision_loads, _torchvision_stand_in

    import lightning  # noqa: F401  (it probes for torchvision when imported: before the stand-in exists)

    stand_in = {} if _torchvision_loads() else _torchvision_stand_in()
    if stand_in:  # disent's DFC-VAE module imports a VGG network at import time (unused here)
        import types

        models = types.ModuleType("torchvision.models")
        models.vgg19_bn = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("torchvision is not available"))
        stand_in["torchvision.models"] = models
        stand_in["torchvision"].models = models
    sys.modules.update(stand_in)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import disent.frameworks.vae as frameworks
            from disent.model import AutoEncoder
            from disent.model.ae import DecoderConv64, EncoderConv64
    finally:  # Lightning looks torchvision up later; the stand-in must not be found then
        for name, mod in stand_in.items():
            if sys.modules.get(name) is mod:
                del sys.modules[name]
    return frameworks, AutoEncoder, EncoderConv64, DecoderConv64


def _square_images(cache: Path) -> tuple[Path, np.ndarray]:
    os.environ.setdefault("FACTORBENCH_DATA", str(cache))
    from factorbench.baselines.data import TrainingData, resolve_dataset

    path = resolve_dataset("square", progress=False)
    data = TrainingData(path, "all")
    images = data._images.copy()
    data.close()
    return path, images


def _disent_model(parts: Any) -> Any:
    frameworks, AutoEncoder, Enc, Dec = parts
    cfg = frameworks.BetaVae.cfg(optimizer="adam", optimizer_kwargs={"lr": LR}, beta=BETA, recon_loss="bce",
                                 loss_reduction="mean_sum")
    model = AutoEncoder(encoder=Enc(x_shape=(3, 64, 64), z_size=LATENT, z_multiplier=2),
                        decoder=Dec(x_shape=(3, 64, 64), z_size=LATENT))
    return frameworks.BetaVae(model=model, cfg=cfg)


def time_disent_lightning(parts: Any, images: np.ndarray, warmup: int, steps: int) -> float:
    """Seconds per step of disent's BetaVae trained by a Lightning Trainer."""
    import lightning
    import torch

    x = torch.from_numpy(images).permute(0, 3, 1, 2).float().div(255.0)

    class Data(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return len(x)

        def __getitem__(self, i: int) -> dict:
            return {"x_targ": (x[i],)}

    stamps: list[float] = []

    class Clock(lightning.Callback):
        def on_train_batch_end(self, *args: Any) -> None:
            stamps.append(time.perf_counter())

    loader = torch.utils.data.DataLoader(Data(), batch_size=BATCH, shuffle=True, drop_last=True)
    trainer = lightning.Trainer(max_steps=warmup + steps, logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                                callbacks=[Clock()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(_disent_model(parts), loader)
    return (stamps[-1] - stamps[warmup - 1]) / steps


def time_disent_plain(parts: Any, images: np.ndarray, warmup: int, steps: int, bf16: bool) -> float:
    """Seconds per step of disent's model and loss in a plain loop (fp32, or bf16 autocast + channels_last)."""
    import torch

    framework = _disent_model(parts)
    framework.train()
    opt = torch.optim.Adam(framework.parameters(), lr=LR)
    x_all = torch.from_numpy(images).permute(0, 3, 1, 2).float().div(255.0)
    if bf16:
        framework = framework.to(memory_format=torch.channels_last)
    rng = np.random.default_rng(0)
    t0 = 0.0
    for step in range(warmup + steps):
        if step == warmup:
            t0 = time.perf_counter()
        x = x_all[rng.choice(len(x_all), BATCH, replace=False)]
        if bf16:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = _disent_loss(framework, x)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return (time.perf_counter() - t0) / steps


def _disent_loss(framework: Any, x: Any) -> Any:
    """disent's loss for one batch, as its framework computes it in ``training_step``."""
    out = framework.do_training_step({"x_targ": (x,)}, 0)
    return out[0] if isinstance(out, tuple) else out


def time_factorbench(path: Path, warmup: int, steps: int, *, precision: str = "auto", channels_last: bool = True,
                     memory_limit: int | None = None, fixed_batch: bool = False) -> float:
    """Seconds per step of factorbench's trainer, from its log (the interval after the warm-up)."""
    from factorbench.baselines import data as data_module
    from factorbench.baselines.config import make_config
    from factorbench.baselines.trainer import TrainOptions, train

    config = make_config("beta-vae", {"beta": BETA, "latent_dim": LATENT, "batch_size": BATCH, "lr": LR,
                                      "steps": warmup + steps})
    options = TrainOptions(precision=precision, channels_last=channels_last, progress=False, samples=False,
                           log_every=warmup if steps % warmup == 0 else 1, checkpoint_every_s=1e9,
                           **({} if memory_limit is None else {"memory_limit": memory_limit}))
    original = data_module.TrainingData.batches
    if fixed_batch:
        def same(self: Any, start: int, stop: int, batch_size: int, seed: int, **kw: Any):
            batch = self.batch(0, batch_size, seed)
            for _ in range(start, stop):
                yield batch
        data_module.TrainingData.batches = same  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            train(config, path, Path(tmp) / "run", split="all", options=options)
            rows = list(csv.DictReader(open(Path(tmp) / "run" / "log.csv")))
    finally:
        data_module.TrainingData.batches = original  # type: ignore[method-assign]
    by_step = {int(r["step"]): float(r["wall_time_s"]) for r in rows}
    return (by_step[warmup + steps] - by_step[warmup]) / steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="timed steps per measurement (default 100)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first (default 20)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of taking turns (default 3)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: one per core)")
    parser.add_argument("--skip-disent", action="store_true", help="time factorbench only")
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as cache:
        path, images = _square_images(Path(cache))
        parts = None if args.skip_disent else _import_disent()
        contenders: dict[str, Callable[[], float]] = {}
        if parts is not None:
            contenders["disent (Lightning), fp32"] = lambda: time_disent_lightning(parts, images, args.warmup, args.steps)
            contenders["disent modules, plain loop, fp32"] = lambda: time_disent_plain(parts, images, args.warmup,
                                                                                      args.steps, False)
            contenders["disent modules, plain loop, bf16 + channels_last"] = lambda: time_disent_plain(
                parts, images, args.warmup, args.steps, True)
        contenders["factorbench (auto precision)"] = lambda: time_factorbench(path, args.warmup, args.steps)
        contenders["factorbench fp32"] = lambda: time_factorbench(path, args.warmup, args.steps, precision="fp32",
                                                                  channels_last=False)
        contenders["factorbench fp32 + channels_last"] = lambda: time_factorbench(path, args.warmup, args.steps,
                                                                                  precision="fp32")
        contenders["factorbench bf16, contiguous"] = lambda: time_factorbench(path, args.warmup, args.steps,
                                                                              precision="bf16", channels_last=False)
        contenders["factorbench streamed from HDF5"] = lambda: time_factorbench(path, args.warmup, args.steps,
                                                                                memory_limit=0)
        contenders["factorbench fixed batch (no data pipeline)"] = lambda: time_factorbench(
            path, args.warmup, args.steps, fixed_batch=True)
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for r in range(args.rounds):
            for name, fn in contenders.items():
                times[name].append(fn())
                print(f"round {r + 1}: {name:<52} {1000 * times[name][-1]:7.1f} ms/step", flush=True)
    reference = "disent (Lightning), fp32" if parts is not None else "factorbench fp32"
    print(f"\n{torch.get_num_threads()} threads, batch {BATCH}, {args.steps} timed steps after {args.warmup}, "
          f"{args.rounds} rounds; ratio = steps/s over {reference}'s, median of per-round ratios")
    print(f"| {'contender':<52} | ms/step | steps/s | x {reference.split(',')[0]} |")
    print(f"|{'-' * 54}|---------|---------|------|")
    for name, ts in times.items():
        ratio = statistics.median(ref / t for ref, t in zip(times[reference], ts))
        print(f"| {name:<52} | {1000 * statistics.median(ts):7.1f} | {1 / statistics.median(ts):7.1f} | {ratio:4.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
