"""Checkpoints as one safetensors file (no pickle): model weights, optimiser state, the noise generator's
state and the step, written to a temporary file, synced and renamed over the previous checkpoint, so a
kill at any moment leaves the last complete checkpoint intact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load, save

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.outputs import write_atomically

__all__ = ["checkpoint_summary", "load_checkpoint", "load_weights",
           "noise_seed_after_device_change", "save_checkpoint", "save_weights", "tensors_sha256", "weights_sha256"]


def _reproducible(data: bytes) -> bytes:
    """safetensors bytes with the header's metadata in sorted key order: the library writes it in hash-map
    order, which differs from one process to the next, so two identical runs would not give byte-identical
    files (``sha256sum`` could not check the docs' "bit-identical")."""
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    if "__metadata__" in header:
        header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(text) > n:  # not the library's compact form: leave the file as it was written
        return data
    return data[:8] + text + b" " * (n - len(text)) + data[8 + n:]


def _cpu(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu").contiguous()


def save_weights(path: Path, model: torch.nn.Module, metadata: dict[str, str] | None = None) -> None:
    """The model's state dict (parameters and buffers) as safetensors."""
    write_atomically(path, _reproducible(save({k: _cpu(v) for k, v in model.state_dict().items()},
                                                metadata=metadata)))


def tensors_sha256(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over the tensors alone, in name order: each name, dtype, shape and raw bytes. The file's header
    (metadata, key order) does not enter it, so a result's ``weights_sha256`` ties it to the weights
    themselves."""
    import hashlib

    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def weights_sha256(path: str | Path) -> str:
    """:func:`tensors_sha256` of a weights file (``weights.safetensors`` or a snapshot)."""
    return tensors_sha256(_read(Path(path))[0])


def load_weights(path: Path, model: torch.nn.Module) -> dict[str, str]:
    """Load weights written by :func:`save_weights` into ``model``; returns the file's metadata."""
    tensors, metadata = _read(path)
    _load_model(model, tensors, "", path)
    return metadata


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    try:
        data = path.read_bytes()
        tensors = load(data)
        header_len = int.from_bytes(data[:8], "little")  # the metadata lives in the JSON header
        metadata = json.loads(data[8:8 + header_len]).get("__metadata__", {}) or {}
    except (OSError, SafetensorError, ValueError, json.JSONDecodeError) as exc:
        raise FactorbenchError(f"{path} is unreadable ({exc}); it is damaged: pass --force to start the run "
                               "over") from None
    return tensors, metadata


def _load_model(model: torch.nn.Module, tensors: dict[str, torch.Tensor], prefix: str, path: Path) -> None:
    state = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
    expected = model.state_dict()
    if set(state) != set(expected) or any(state[k].shape != expected[k].shape for k in expected):
        raise FactorbenchError(f"{path} does not hold weights of this model (different layers or shapes); "
                               "it was written for another config")
    model.load_state_dict(state)


def save_checkpoint(path: Path, model: torch.nn.Module, optimizers: dict[str, torch.optim.Optimizer],
                    generator: torch.Generator, step: int, extra: dict[str, Any]) -> None:
    """Everything needed to continue training at ``step`` (the next step to run)."""
    tensors = {f"model/{k}": _cpu(v) for k, v in model.state_dict().items()}
    optim_meta: dict[str, Any] = {}
    for group, opt in optimizers.items():
        state = opt.state_dict()
        optim_meta[group] = {"param_groups": state["param_groups"], "scalars": {}}
        for index, slots in state["state"].items():
            for key, value in slots.items():
                if isinstance(value, torch.Tensor):
                    tensors[f"optim/{group}/{index}/{key}"] = _cpu(value)
                else:
                    optim_meta[group]["scalars"][f"{index}/{key}"] = value
    tensors["rng/noise"] = generator.get_state()
    metadata = {"step": str(step), "optim": json.dumps(optim_meta), "extra": json.dumps(extra)}
    write_atomically(path, _reproducible(save(tensors, metadata=metadata)))


def _match_parameter_strides(opt: torch.optim.Optimizer) -> None:
    """Give each per-parameter state tensor (Adam's moments) its parameter's memory layout. Checkpoints hold
    contiguous tensors; a channels-last convolution's moments loaded as they are would have other strides
    than the weight, which CUDA's fused Adam refuses ("params, grads, exp_avgs, and exp_avg_sqs must have
    same dtype, device, and layout"). The values are unchanged, so the resumed run stays bit-identical."""
    for param, slots in opt.state.items():
        for key, value in slots.items():
            if isinstance(value, torch.Tensor) and value.shape == param.shape and value.stride() != param.stride():
                slots[key] = torch.empty_like(param, dtype=value.dtype).copy_(value)


def noise_seed_after_device_change(noise_seed: int, step: int) -> int:
    """The seed of the noise generator of a run resumed at ``step`` on another kind of device than the one
    that wrote its checkpoint: a CPU generator's state (5,056 bytes) and a CUDA generator's (16 bytes) cannot
    be converted, so the stream is restarted from (noise seed, step), deterministically."""
    import numpy as np

    return int(np.random.SeedSequence([noise_seed, step]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def checkpoint_summary(path: Path) -> tuple[int, dict[str, Any]]:
    """(step, extra) of a checkpoint, read from its JSON header alone (no tensors): what a resume would
    continue from, cheap enough to check before any data is loaded."""
    try:
        with open(path, "rb") as f:
            header_len = int.from_bytes(f.read(8), "little")
            metadata = json.loads(f.read(header_len)).get("__metadata__", {}) or {}
        return int(metadata["step"]), json.loads(metadata["extra"])
    except (OSError, KeyError, ValueError) as exc:
        raise FactorbenchError(f"{path} is not a readable factorbench checkpoint ({exc}); pass --force to start "
                               "the run over") from None


def load_checkpoint(path: Path, model: torch.nn.Module, optimizers: dict[str, torch.optim.Optimizer],
                    generator: torch.Generator, noise_seed: int | None = None) -> tuple[int, dict[str, Any]]:
    """Restore a checkpoint in place; returns (next step, extra).

    The noise generator's state is restored when the checkpoint was written on the same kind of device
    (``extra["device"]``, and a state of the same size); on another kind it is re-seeded with
    :func:`noise_seed_after_device_change` (``noise_seed`` required) and ``extra["noise"]`` says
    ``"reseeded"``: the run continues, but is no longer bit-identical to one that never changed device."""
    tensors, metadata = _read(path)
    try:
        step = int(metadata["step"])
        optim_meta = json.loads(metadata["optim"])
        extra = json.loads(metadata["extra"])
    except (KeyError, ValueError) as exc:
        raise FactorbenchError(f"{path} is not a factorbench checkpoint ({exc}); pass --force to start over") from None
    _load_model(model, tensors, "model/", path)
    for group, opt in optimizers.items():
        if group not in optim_meta:
            raise FactorbenchError(f"{path} has no optimiser state for {group!r}; pass --force to start over")
        state: dict[int, dict[str, Any]] = {}
        for key, value in tensors.items():
            if key.startswith(f"optim/{group}/"):
                index, slot = key[len(f"optim/{group}/"):].split("/", 1)
                state.setdefault(int(index), {})[slot] = value
        for key, value in optim_meta[group]["scalars"].items():
            index, slot = key.split("/", 1)
            state.setdefault(int(index), {})[slot] = value
        opt.load_state_dict({"state": state, "param_groups": optim_meta[group]["param_groups"]})
        _match_parameter_strides(opt)
    saved = tensors["rng/noise"]
    saved_kind = str(extra.get("device") or generator.device.type).split(":")[0]
    if saved_kind == generator.device.type and saved.numel() == generator.get_state().numel():
        generator.set_state(saved)
        extra["noise"] = "restored"
    elif noise_seed is None:
        raise FactorbenchError(f"{path} was written on a {saved_kind} device; its noise generator's state cannot be "
                               f"restored on {generator.device.type}: resume on a {saved_kind} device")
    else:
        generator.manual_seed(noise_seed_after_device_change(noise_seed, step))
        extra["noise"] = "reseeded"
    return step, extra
