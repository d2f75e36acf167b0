"""What a result records about the software and machine that made it, so that a number can be traced a
year later: Python, the machine and CPU model, the versions of factorbench and of the libraries the
numbers depend on (numpy, scipy, scikit-learn, h5py; PyTorch where installed), and the git commit of a
source checkout. Read from package metadata, without importing the libraries."""

from __future__ import annotations

import os
import platform
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path

__all__ = ["LIBRARIES", "SPEED_FLAGS", "cpu_model_name", "cpu_signature", "cpuinfo", "environment_record",
           "source_commit", "source_root", "usable_cores"]

#: distributions whose versions a result records (absent ones are left out)
LIBRARIES = ("numpy", "scipy", "scikit-learn", "h5py", "torch")

#: /proc/cpuinfo flags that set PyTorch's and BLAS's speed on a CPU: 256- and 512-bit vectors, bf16 dot
#: products, AMX tiles (oneDNN picks its kernels by them)
SPEED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def cpuinfo() -> str:
    """Linux's /proc/cpuinfo, or "" where there is none."""
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def cpu_model_name() -> str:
    """The CPU's model name (/proc/cpuinfo's "model name"), else the platform's processor or machine."""
    for line in cpuinfo().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return platform.processor() or platform.machine()


def cpu_signature(text: str | None = None) -> str:
    """What tells apart two CPUs that share a model name (a virtual machine's "AMD EPYC" is an EPYC without
    AVX-512 on one host and a Zen 4 with AVX512-BF16 on another): vendor, family, model and stepping of the
    first processor in /proc/cpuinfo (or ``text``), and which of :data:`SPEED_FLAGS` it has, e.g.
    "AuthenticAMD family 25 model 17 stepping 1; avx2 avx512f avx512_bf16". "" where there is no cpuinfo."""
    fields: dict[str, str] = {}
    for line in (cpuinfo() if text is None else text).splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough: a machine's cores are alike
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if not fields:
        return ""
    identity = " ".join(part for part in (fields.get("vendor_id", ""),
                                          *(f"{name} {fields[key]}" for key, name in (
                                              ("cpu family", "family"), ("model", "model"),
                                              ("stepping", "stepping")) if fields.get(key)))
                        if part)
    flags = set(fields.get("flags", "").split())
    units = " ".join(flag for flag in SPEED_FLAGS if flag in flags) or "none of " + " ".join(SPEED_FLAGS)
    return f"{identity or 'unknown CPU'}; {units}"


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity on Linux, else every core)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def source_root() -> Path | None:
    """The git checkout factorbench runs from (its package folders lie in the repository's root), or None
    for an installed package."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / ".git").exists() else None


@lru_cache(maxsize=1)
def source_commit() -> str:
    """The git commit of the checkout factorbench runs from (with ``+dirty`` when it has changes), or ''
    for an installed package."""
    root = source_root()
    if root is None:
        return ""
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{commit}+dirty" if commit and dirty else commit


@lru_cache(maxsize=1)
def environment_record() -> dict[str, str]:
    """``{"python", "machine", "cpu", "cpu_signature", "factorbench_commit", "<library>": version, ...}``
    (``cpu_signature`` and the commit where known)."""
    record = {"python": platform.python_version(), "machine": platform.machine(), "cpu": cpu_model_name()}
    signature = cpu_signature()
    if signature:
        record["cpu_signature"] = signature
    for name in LIBRARIES:
        try:
            record[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    commit = source_commit()
    if commit:
        record["factorbench_commit"] = commit
    return record
