"""Run directories: what a training run wrote, and a finished run as an encoder for ``evaluate``.

A run directory holds

- ``run.json``: the model config and its hash, the training data's identity (generator, spec hash, image
  and split hashes), the run hash (config + data), the package version;
- ``checkpoint.safetensors``: the last checkpoint (weights, optimiser and generator state, step);
- ``log.csv``: losses averaged over each logging interval, wall time, steps/s;
- ``weights.safetensors``: the final weights; ``samples.png``: reconstructions and latent traversals;
- ``DONE``: written last (JSON: steps, wall and CPU time, threads, device, precision, versions). A run with ``DONE``
  is complete and is never retrained.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.spec import canonical_json, sha256_text

from .config import ModelConfig, config_from_dict

__all__ = ["RUN_FILES", "RunEncoder", "RunSpec", "load_run", "read_run"]

RUN_JSON, CHECKPOINT, LOG, WEIGHTS, SAMPLES, DONE = (
    "run.json", "checkpoint.safetensors", "log.csv", "weights.safetensors", "samples.png", "DONE")
#: every file a run writes (``--force`` removes these, and the snapshots, and nothing else)
RUN_FILES = (RUN_JSON, CHECKPOINT, LOG, WEIGHTS, SAMPLES, DONE)
#: folder of intermediate weights (``TrainOptions.snapshot_every``)
SNAPSHOTS = "snapshots"


def snapshot_path(run_dir: Path, step: int) -> Path:
    return run_dir / SNAPSHOTS / f"step-{step:07d}.safetensors"


@dataclass(frozen=True)
class RunSpec:
    """A model config trained on one split of one dataset: what a run directory is named by."""

    config: ModelConfig
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "data": dict(self.data)}

    def hash(self) -> str:
        return sha256_text(canonical_json(self.to_dict()))


def read_run(run_dir: str | os.PathLike) -> dict[str, Any]:
    """``run.json`` of a run directory (plus ``done``: the DONE record, or None)."""
    run_dir = Path(run_dir)
    path = run_dir / RUN_JSON
    if not path.is_file():
        raise FactorbenchError(f"{run_dir} is not a training run (no {RUN_JSON}); train one with "
                               "`factorbench train MODEL --dataset NAME --out DIR`")
    try:
        info = json.loads(path.read_text())
        done_path = run_dir / DONE
        info["done"] = json.loads(done_path.read_text()) if done_path.is_file() else None
    except (OSError, json.JSONDecodeError) as exc:
        raise FactorbenchError(f"{run_dir}: cannot read the run record ({exc})") from None
    return info


class RunEncoder:
    """A finished run as an encoder: uint8 images (n, H, W, C) -> (posterior mean, log-variance) for a model
    whose ``encode`` gives a Gaussian posterior, or codes (n, D) for one whose ``encode`` gives a tensor
    (LSBD-VAE: points on circles), float32 on the CPU (or ``device``), eval mode. ``step`` picks a
    snapshot instead of the final weights. ``provenance`` goes into the result JSON."""

    def __init__(self, run_dir: str | os.PathLike, device: str = "cpu", step: int | None = None) -> None:
        import torch

        from .checkpoint import load_weights, weights_sha256
        from .config import get_family
        from . import models  # noqa: F401  (registers every model)

        self.run_dir = Path(run_dir)
        info = read_run(self.run_dir)
        finished = info["done"] is not None
        if not finished and step is None:
            raise FactorbenchError(f"{self.run_dir} is not finished (no {DONE}); resume it with `factorbench train "
                                   f"... --out {self.run_dir} --resume` first, or evaluate one of its snapshots "
                                   f"(run:{self.run_dir}@STEP)")
        self.config = config_from_dict(info["config"])
        if self.config.hash() != info["config_hash"]:
            raise FactorbenchError(f"{self.run_dir}/{RUN_JSON}: the config does not match its hash; the file was edited")
        final = finished and (step is None or step == self.config.steps)
        self.image_shape = tuple(info["data"]["image_shape"])
        self.device = torch.device(device)
        self.model = get_family(self.config).build(self.config, self.image_shape)
        weights = self.run_dir / WEIGHTS if final else snapshot_path(self.run_dir, step)
        if not weights.is_file():
            kept = sorted(int(p.stem.split("-")[1]) for p in (self.run_dir / SNAPSHOTS).glob("step-*.safetensors"))
            raise FactorbenchError(f"{self.run_dir} has no weights at step {step}; it kept steps "
                                   f"{kept + [self.config.steps] if finished else kept}"
                                   + ("" if finished else " so far (it is not finished)"))
        load_weights(weights, self.model)
        self.model.to(self.device).eval()
        self.step = self.config.steps if final else int(step)  # type: ignore[arg-type]
        self.description = (f"run {self.config.name} {info['run_hash'][:12]} ({self.run_dir.name}"
                            + ("" if final else f", step {self.step}") + ")")
        done = info["done"] or {}
        self.provenance = {
            "run_hash": info["run_hash"], "model": self.config.name, "config": info["config"],
            "config_hash": info["config_hash"], "training_data": info["data"],
            "budget": {"steps": self.step, "batch_size": self.config.batch_size, "planned_steps": self.config.steps},
            # the weights scored, by their tensors alone (checkpoint.weights_sha256 recomputes it from the file)
            "weights_sha256": weights_sha256(weights),
            # a snapshot of a run still training (a learning curve) has no DONE record yet: "finished" says so
            "trained": {"finished": finished,
                        **{k: done.get(k) for k in ("wall_time_s", "cpu_time_s", "threads", "device", "device_name",
                                                    "precision", "torch_version", "package_version")},
                        # recorded since 2026-12 (two CPUs of one model name differ in their vector units)
                        **{k: done[k] for k in ("device_signature",) if done.get(k)}},
        }

    def __call__(self, images: np.ndarray) -> tuple[np.ndarray, np.ndarray] | np.ndarray:
        import torch

        if tuple(images.shape[1:]) != self.image_shape:
            raise FactorbenchError(f"{self.description} was trained on images of shape {self.image_shape}, got "
                                   f"{tuple(images.shape[1:])}")
        x = torch.from_numpy(np.ascontiguousarray(images)).to(self.device).permute(0, 3, 1, 2).float().div_(255.0)
        with torch.no_grad():
            out = self.model.encode(x)
        if isinstance(out, torch.Tensor):
            return out.float().cpu().numpy()
        mu, logvar = out
        return mu.float().cpu().numpy(), logvar.float().cpu().numpy()


def load_run(run_dir: str | os.PathLike, device: str = "cpu", step: int | None = None) -> RunEncoder:
    """The encoder of a finished run: ``evaluate(protocol, load_run(dir))``; ``step``: a kept snapshot (also of
    a run still training: learning curves). The string form ``RUN_DIR@STEP`` (as in
    ``--encoder run:RUN_DIR@STEP``) names a snapshot too."""
    text = str(run_dir)
    if step is None and "@" in text and not Path(text).exists():
        text, at = text.rsplit("@", 1)
        if not at.isdigit():
            raise FactorbenchError(f"run:{run_dir}: the part after '@' names a kept snapshot's step (a whole number, "
                                   f"e.g. run:{text}@2000), got {at!r}")
        step = int(at)
    return RunEncoder(text, device, step)
