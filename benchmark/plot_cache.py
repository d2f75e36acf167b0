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
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from factorbench.generators.spec import canonical_json, sha256_text

__all__ = ["MANIFEST", "cached_plots", "default_plot_cache", "plot_key", "plots_through_cache", "store_plots"]

#: the file that completes an entry: ``{"files": {name: sha256}}``
MANIFEST = "files.json"


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
