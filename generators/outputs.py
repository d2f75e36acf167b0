"""Checks of output paths, made before any work: a command that will fail to write its result must
fail at once, with a message, not after an hour of rendering or scoring.

Writability is probed by creating (and removing) a temporary file in the folder, not by permission
bits: that is what counts for root too, on read-only mounts and in pseudo-file systems such as /proc.

Files are then written whole or not at all (:func:`write_atomically`, :func:`save_figure`): through a
temporary file beside the target and a rename, so an interrupted command leaves the old file or none.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

from .errors import FactorbenchError

__all__ = ["check_disk_space", "check_new_files", "check_output_dir", "check_output_file", "check_writable_dir",
           "format_bytes", "save_figure", "temporaries_of", "write_atomically"]


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


def check_input_dir(path: str | os.PathLike, option: str) -> Path:
    """A folder that will be read: it must exist and be a folder."""
    path = Path(path)
    if not path.is_dir():
        raise FactorbenchError(f"{option} {path}: " + ("no such folder" if not path.exists() else "not a folder"))
    return path


def check_output_dir(path: str | os.PathLike, option: str, parents: bool = False) -> Path:
    """A folder that will be created if needed and written into: not a file; if it does not exist, its
    parent must exist and be writable (``parents``: its nearest existing ancestor, the folders between
    being created as ``mkdir -p`` does)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FactorbenchError(f"{option} {path} is a file; give a directory")
    if path.is_dir():
        check_writable_dir(path, f"into {path}")
        return path
    ancestor = path.parent
    while parents and not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if parents and ancestor.exists() and not ancestor.is_dir():
        raise FactorbenchError(f"{option} {path}: {ancestor} is a file, so no folder can be made below it")
    check_writable_dir(ancestor, f"{option} {path}")
    return path


def check_new_files(paths: list[Path], force: bool, advice: str = "pass --force to replace them") -> None:
    """Refuse, before any work, to write files that exist unless ``force``: names the first three."""
    existing = [str(p) for p in paths if p.exists()]
    if existing and not force:
        more = ", ..." if len(existing) > 3 else ""
        raise FactorbenchError(f"{', '.join(existing[:3])}{more} already exist{'s' if len(existing) == 1 else ''}; "
                               f"{advice}")


def _temporary(path: Path) -> Path:
    """A hidden name beside ``path``, unique to this process, ending in ``.tmp`` (so that no reader's
    ``*.json`` or ``*.png`` takes a left-over for a finished file)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def temporaries_of(path: str | os.PathLike) -> list[Path]:
    """The temporary files that :func:`write_atomically` or :func:`save_figure` left beside ``path`` when
    their process was killed while writing (any process's)."""
    path = Path(path)
    return sorted(path.parent.glob(f".{glob_escape(path.name)}.*.tmp"))


def write_atomically(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a synced temporary file and a rename: a reader sees the old file
    or the new one, and a failed or interrupted write leaves nothing behind. Creates missing folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(path)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def save_figure(fig: Any, path: str | os.PathLike, **savefig: Any) -> Path:
    """Save a matplotlib figure to ``path`` whole or not at all (as :func:`write_atomically`), then close
    it; ``savefig`` are ``Figure.savefig``'s options (``dpi``, ``bbox_inches``)."""
    import matplotlib.pyplot as plt

    path = Path(path)
    tmp = _temporary(path)
    savefig.setdefault("format", path.suffix.lstrip(".").lower() or None)  # the temporary name has none
    try:
        fig.savefig(tmp, **savefig)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        plt.close(fig)
    return path


def check_disk_space(directory: str | os.PathLike, needed: float, what: str, advice: str) -> None:
    """Refuse to start writing about ``needed`` bytes into ``directory`` when its disk has less free."""
    free = shutil.disk_usage(directory).free
    if needed > free:
        raise FactorbenchError(f"{what} needs about {format_bytes(needed)}, but {directory} has "
                               f"{format_bytes(free)} free; {advice}")
