"""Freed memory kept for reuse while a model trains on the CPU (glibc's malloc).

PyTorch's CPU allocator hands every tensor's memory back to ``malloc`` when the tensor is freed. glibc
serves a block above its mmap threshold (128 KiB at start, rising to at most 32 MiB) with a fresh
``mmap`` and unmaps it on ``free``, so a block larger than 32 MiB is never reused: every training step
of a large layer allocates its gradient and the optimiser's temporaries anew, and the kernel zeroes
each of their pages on first touch. ``chen-mlp`` on 64 x 64 x 3 images has two 12,288 x 1,200 weights
(59 MB each): its steps spent 40-50 % of their time in those page faults. With ``mmap`` off for
allocations (``M_MMAP_MAX`` 0) and a trim threshold of 1 GiB, freed blocks stay in the heap and the next
step reuses them. Only where memory comes from changes, not what is computed: the weights are the same
bit for bit (tested). Measured by ``tests/perf/bench_allocator.py`` (figures in BASELINES.md, "Speed").

On a C library without glibc's ``mallopt`` (macOS, musl) nothing is changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["heap_reuse"]

#: ``mallopt`` parameters and glibc's defaults (malloc.h; mallopt(3))
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
DEFAULT_TRIM_THRESHOLD, DEFAULT_MMAP_MAX = 128 * 1024, 65536
#: free memory at the top of the heap beyond this is returned to the system while the setting holds
TRIM_THRESHOLD = 1 << 30

_lock = threading.Lock()
_holders = 0  # nested or concurrent holders (training in threads): the last one out restores the defaults
_applied = False  # whether the first holder's mallopt calls took effect (the later holders share its setting)


def _glibc() -> Any | None:
    """The process's C library when it is glibc (it has ``gnu_get_libc_version`` and ``mallopt``)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt") else None


@contextmanager
def heap_reuse(enabled: bool = True, libc: Any | None = None) -> Iterator[bool]:
    """Within the block, keep freed memory in the heap for reuse (see the module's docstring); yields
    whether the setting holds. On leaving the last of nested or concurrent blocks, glibc's defaults are
    restored and the free memory is returned to the system (``malloc_trim``). ``libc``: for tests."""
    global _holders, _applied
    libc = (libc or _glibc()) if enabled else None
    if libc is None:
        yield False
        return
    with _lock:
        if _holders == 0:
            _applied = libc.mallopt(M_MMAP_MAX, 0) == 1 and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
        _holders += 1
        applied = _applied
    try:
        yield applied
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
                libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
                libc.malloc_trim(0)
