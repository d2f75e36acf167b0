"""GPUs for a sweep's jobs: which ones this process may use, and how many jobs share each (packing).

A packed job is an ordinary job in its own process: K processes per GPU, each training one run exactly as it
would alone (so each packed run's weights are those of the run trained alone, and resume stays exact). On one
NVIDIA H200, 8 processes gave 5.75x one process's steps/s, and 8.1x under CUDA MPS, where 8 models vmapped in
one process gave 2.4x (BASELINES.md, Speed); processes are the measured choice.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from factorbench.generators.errors import FactorbenchError

__all__ = ["DEFAULT_PACK", "GpuSlots", "visible_gpus"]

#: jobs per GPU when the sweep trains on GPUs and ``--pack`` is not given (measured: BASELINES.md, Speed)
DEFAULT_PACK = 8


def visible_gpus(device: str, environ: Mapping[str, str] | None = None, count: int | None = None) -> tuple[int, ...]:
    """The indices of the GPUs the sweep's jobs may train on: none for ``--device cpu``; else the entries of
    ``CUDA_VISIBLE_DEVICES`` when it is set (indices only: a job gets one of them as its own
    ``CUDA_VISIBLE_DEVICES``), else ``0 .. count - 1`` with ``count`` from PyTorch (0 without CUDA)."""
    if device == "cpu":
        return ()
    env = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in env:
        entries = [e.strip() for e in env["CUDA_VISIBLE_DEVICES"].split(",") if e.strip()]
        if not all(e.isdigit() for e in entries):
            raise FactorbenchError(
                f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r} names GPUs by UUID or MIG name; the sweep gives "
                "each job one GPU by index: set CUDA_VISIBLE_DEVICES to indices (e.g. 0,1), or --device cpu")
        return tuple(int(e) for e in entries)
    if count is None:
        try:
            import torch
        except ImportError:
            return ()
        count = torch.cuda.device_count()
    return tuple(range(count))


class GpuSlots:
    """``pack`` places on each GPU; :meth:`take` gives a job the GPU with the fewest jobs (lowest index on a
    tie) and :meth:`give_back` returns its place when the job ends."""

    def __init__(self, gpus: Sequence[int], pack: int) -> None:
        if pack < 1:
            raise FactorbenchError(f"--pack must be >= 1, got {pack}")
        self.pack = pack
        self.load: dict[int, int] = {g: 0 for g in gpus}

    @property
    def capacity(self) -> int:
        return self.pack * len(self.load)

    def take(self) -> int:
        gpu = min(self.load, key=lambda g: (self.load[g], g))
        if self.load[gpu] >= self.pack:
            raise RuntimeError("every GPU place is taken")
        self.load[gpu] += 1
        return gpu

    def give_back(self, gpu: int) -> None:
        self.load[gpu] -= 1
