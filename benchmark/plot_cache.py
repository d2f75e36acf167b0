"""A content-addressed cache of the plots :func:`factorbench.benchmark.plots.plot_result` draws, so that a
leaderboard built again (after a new row, or with ``--add``) draws only the plots of results it has not
drawn before.

An entry is a folder ``<cache>/<key>/`` holding the PNG files and ``files.json``, their names and sha256,
written last (an entry without it is not an entry). The key is the sha256 of everything the files'
bytes depend on (:func:`plot_key`): the result's checksum (its whole content: protocol, metrics, factor
names), the source of the plotting module, and the versions of matplotlib, Pillow, zlib and numpy. A
cached file whose bytes no longer match its recorded sha256 is not used: the plots are drawn again and
the entry replaced. Default location: ``<data cache>/leaderboard-plots``
(:func:`factorbench.benchmark.cache.data_dir`); each entry is a few tens of kB per plot.

The cache is bounded (:func:`prune`): using an entry touches its manifest, and after a build the least
recently used entries are removed until the cache holds at most :data:`DEFAULT_MAX_MB` MB (``factorbench
leaderboard --plot-cache-max-mb N``), with the staging folders that killed builds left behind.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factorbench.generators.spec import canonical_json, sha256_text

__all__ = ["DEFAULT_MAX_MB", "MANIFEST", "Pruned", "cached_plots", "default_plot_cache", "plot_key",
           "plots_through_cache", "prune", "store_plots"]

#: the file that completes an entry: ``{"files": {name: sha256}}``
MANIFEST = "files.json"
#: the size :func:`prune` keeps the cache under by default: about five builds of the whole site (92 MB each)
DEFAULT_MAX_MB = 512
#: a staging folder older than this (seconds) belongs to a build that was killed
STALE_STAGING_S = 3600.0


def default_plot_cache() -> Path:
    """``<data cache>/leaderboard-plots`` (``$FACTORBENCH_DATA``, else ``~/.cache/factorbench``)."""
    from .cache import data_dir

    return data_dir() / "leaderboard-plots"


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@functools.lru_cache(maxsize=1)
def _drawing() -> dict[str, str]:
    """What besides the result decides the files' bytes, the same for every result of a process: the
    plotting module's source and the versions of the libraries that draw and encode the PNGs."""
    import matplotlib
    import numpy
    import PIL

    from . import plots

    return {"plots": _sha256_file(Path(plots.__file__)), "matplotlib": matplotlib.__version__,
            "pillow": PIL.__version__, "zlib": zlib.ZLIB_RUNTIME_VERSION, "numpy": numpy.__version__}


def plot_key(result: Any) -> str:
    """The cache key of ``result``'s plots: sha256 over the result's checksum, the plotting module's source
    and the versions of the libraries that draw and encode the PNGs."""
    return sha256_text(canonical_json({"result": result.checksum(), **_drawing()}))


def cached_plots(cache: str | os.PathLike, key: str, target: str | os.PathLike) -> list[Path] | None:
    """Copy the entry ``key``'s files into ``target`` and return their paths, in the order they were drawn;
    None when there is no complete entry or one of its files has other bytes than recorded (then nothing
    is copied)."""
    entry = Path(cache) / key
    try:
        files = json.loads((entry / MANIFEST).read_text())["files"]
        blobs = [(name, (entry / name).read_bytes()) for name in files]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if any(hashlib.sha256(blob).hexdigest() != files[name] for name, blob in blobs):
        return None
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    out = []
    for name, blob in blobs:
        (target / name).write_bytes(blob)
        out.append(target / name)
    try:
        os.utime(entry / MANIFEST)  # used now: the last entry :func:`prune` removes
    except OSError:
        pass
    return out


def store_plots(cache: str | os.PathLike, key: str, paths: Sequence[Path]) -> None:
    """Record ``paths`` (files of one folder) as the entry ``key``: copied into a temporary folder beside the
    entry, manifest last, then renamed into place, so a reader sees a whole entry or none. An entry another
    process stored meanwhile is kept; a cache that cannot be written is skipped (it only saves time)."""
    cache = Path(cache)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key[:16]}.", dir=cache))
    except OSError:
        return
    try:
        manifest = {}
        for path in paths:
            shutil.copyfile(path, staging / path.name)
            manifest[path.name] = _sha256_file(staging / path.name)
        (staging / MANIFEST).write_text(json.dumps({"files": manifest}, indent=1))
        entry = cache / key
        if entry.exists():  # an entry that failed its check: replaced
            shutil.rmtree(entry, ignore_errors=True)
        os.replace(staging, entry)
    except OSError:  # another process renamed its copy into place first, or the disk is full
        pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def plots_through_cache(result: Any, target: str | os.PathLike, cache: str | os.PathLike | None,
                        draw: Callable[[Any, Path], list[Path]]) -> list[Path]:
    """``draw(result, target)``, or the cached files of an earlier drawing of the same plots; what is
    drawn is stored. ``cache`` None: always draw."""
    if cache is None:
        return draw(result, Path(target))
    key = plot_key(result)
    found = cached_plots(cache, key, target)
    if found is not None:
        return found
    paths = draw(result, Path(target))
    store_plots(cache, key, paths)
    return paths


@dataclass(frozen=True)
class Pruned:
    """What :func:`prune` removed: ``entries`` and their ``bytes``, the ``staging`` folders of killed builds,
    and the ``kept_bytes`` left."""

    entries: int
    bytes: int
    staging: int
    kept_bytes: int


def _folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.iterdir() if f.is_file())


def prune(cache: str | os.PathLike, max_bytes: int, now: float | None = None) -> Pruned:
    """Remove the least recently used entries (by their manifest's modification time, which a use
    updates) until the entries of ``cache`` hold at most ``max_bytes``, and the staging folders older than
    :data:`STALE_STAGING_S`; a missing cache is empty. Files that cannot be removed are left."""
    cache = Path(cache)
    now = time.time() if now is None else now
    entries, staging = [], 0
    for folder in sorted(cache.iterdir()) if cache.is_dir() else ():
        if not folder.is_dir():
            continue
        try:
            if folder.name.startswith("."):
                if now - folder.stat().st_mtime > STALE_STAGING_S:
                    shutil.rmtree(folder)
                    staging += 1
            elif (folder / MANIFEST).is_file():
                entries.append(((folder / MANIFEST).stat().st_mtime, folder.name, _folder_bytes(folder), folder))
        except OSError:
            continue
    total = sum(size for _, _, size, _ in entries)
    removed = freed = 0
    for _, _, size, folder in sorted(entries):
        if total - freed <= max_bytes:
            break
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed += 1
            freed += size
    return Pruned(removed, freed, staging, total - freed)
