"""Checks of output paths, made before any work: a command that will fail to write its result must
fail at once, with a message, not after an hour of rendering or scoring.

Writability is probed by creating (and removing) a temporary file in the folder, not by permission
bits: that is what counts for root too, on read-only mounts and in pseudo-file systems such as /proc.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .errors import FactorbenchError

__all__ = ["check_disk_space", "check_output_dir", "check_output_file", "check_writable_dir", "format_bytes"]


def format_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"  # pragma: no cover


def check_writable_dir(directory: str | os.PathLike, what: str) -> None:
    """``directory`` exists, is a folder, and a file can be created in it (else a FactorbenchError
    that names ``what``, the thing to be written)."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise FactorbenchError(f"cannot write {what}: {directory} is a file, not a directory")
    if not directory.is_dir():
        raise FactorbenchError(f"cannot write {what}: directory {directory} does not exist; create it first")
    try:
        fd, probe = tempfile.mkstemp(prefix=".factorbench-probe-", dir=directory)
    except OSError as exc:
        raise FactorbenchError(f"cannot write {what}: directory {directory} is not writable "
                               f"({exc.strerror or exc}); choose another place") from None
    os.close(fd)
    os.unlink(probe)


def check_output_file(path: str | os.PathLike, force: bool, option: str = "--out") -> Path:
    """A file that will be written: not a directory, its folder writable, not existing unless ``force``."""
    path = Path(path)
    if path.is_dir():
        raise FactorbenchError(f"{option} {path} is a directory; give a file name such as {path / 'out'}")
    check_writable_dir(path.parent, str(path))
    if path.exists() and not force:
        raise FactorbenchError(f"{path} already exists; pass --force (force=True) to overwrite it")
    return path


def check_output_dir(path: str | os.PathLike, option: str) -> Path:
    """A folder that will be created if needed and written into: not a file; if it does not exist, its
    parent must exist and be writable."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FactorbenchError(f"{option} {path} is a file; give a directory")
    if path.is_dir():
        check_writable_dir(path, f"into {path}")
    else:
        check_writable_dir(path.parent, f"{option} {path}")
    return path


def check_disk_space(directory: str | os.PathLike, needed: float, what: str, advice: str) -> None:
    """Refuse to start writing about ``needed`` bytes into ``directory`` when its disk has less free."""
    free = shutil.disk_usage(directory).free
    if needed > free:
        raise FactorbenchError(f"{what} needs about {format_bytes(needed)}, but {directory} has "
                               f"{format_bytes(free)} free; {advice}")
