"""Streaming, safe writing of dataset files: batches, temporary file, atomic rename, shards, resume.

Rows are rendered and written ``batch_size`` at a time, so memory does not grow with N. Everything
goes to ``OUT.partial`` and is renamed to ``OUT`` only when complete. An interrupted run leaves the
partial file, and running the same command again resumes it from the last written batch. A shard
(``--shard i/n``) writes rows ``[N*i//n, N*(i+1)//n)`` to ``OUT.shard-i-of-n``; :func:`merge_shards`
joins the shards into a file with the same content hashes as a single-process run, copying their
compressed chunks as they are. ``workers=W`` does both on one machine: W processes render a shard each,
then the shards are joined and removed.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import h5py
import numpy as np
from tqdm import tqdm

from . import fileformat as ff
from .base import Generator, get
from .errors import FactorbenchError
from .outputs import check_disk_space, check_output_file
from .spec import DatasetSpec, canonical_json
from .splits import FactorTable, SplitSpec, split_from_dict

DEFAULT_BATCH_SIZE = 512
PARTIAL_SUFFIX = ".partial"

# (start, stop) -> (factor values, factor classes or None, images)
BatchSource = Callable[[int, int], tuple[np.ndarray, "np.ndarray | None", np.ndarray]]


class GenerationInterrupted(FactorbenchError):
    """Raised on Ctrl-C; the partial file is kept so that the same command resumes."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based): rows ``[N*index//count, N*(index+1)//count)``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise FactorbenchError(f"shard {self.index}/{self.count} is invalid: use i/n with n >= 1 and "
                                   f"0 <= i < n (shards are numbered from 0), e.g. 0/{max(self.count, 2)}")

    @classmethod
    def parse(cls, text: str) -> "Shard":
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not m:
            raise FactorbenchError(f"--shard expects i/n (e.g. 0/4), got {text!r}")
        return cls(int(m.group(1)), int(m.group(2)))

    def rows(self, n: int) -> tuple[int, int]:
        return n * self.index // self.count, n * (self.index + 1) // self.count

    def path(self, out: Path) -> Path:
        return out.with_name(f"{out.name}.shard-{self.index}-of-{self.count}")


def _check_destination(path: Path, force: bool) -> None:
    if path.is_dir():
        raise FactorbenchError(f"{path} is a directory; give a file name such as {path / 'data.h5'}")
    check_output_file(path, force)


def _row_bytes(values: np.ndarray, classes: np.ndarray | None, images: np.ndarray) -> float:
    """Bytes per row in the file, estimated from rows compressed as the file stores them (one image per
    chunk, gzip level 1, a 4-byte checksum), plus factors and classes and a margin."""
    import zlib

    compressed = np.mean([len(zlib.compress(np.ascontiguousarray(im).tobytes(), ff.COMPRESSION_LEVEL)) + 4
                          for im in images])
    per_row = compressed + values[0].nbytes + (0 if classes is None else classes[0].nbytes)
    return 1.1 * per_row + 64  # chunk index and compression variation


def _rows_in_partial(partial: Path) -> int:
    try:
        with h5py.File(partial, "r") as f:
            return int(f.attrs.get("rows_written", 0))
    except (OSError, ValueError, TypeError):
        return 0


def _check_space(target: Path, partial: Path, source: BatchSource, start: int, stop: int,
                 batch_size: int) -> BatchSource:
    """Refuse a file that will not fit on the disk, before writing it. The size per row comes from the
    partial file being resumed, else from the first batch, rendered here and handed to the writer
    (returned source), so no row is rendered twice."""
    rows = stop - start
    written = _rows_in_partial(partial) if partial.exists() else 0
    if written > 0:
        have = partial.stat().st_size
        needed = have / written * rows - have
    else:
        first = (start, min(stop, start + batch_size))
        try:
            batch = source(*first)
        except KeyboardInterrupt:
            raise GenerationInterrupted(f"interrupted before anything was written to {target}") from None
        needed = _row_bytes(*batch) * rows

        def source_with_first(a: int, b: int, _inner: BatchSource = source) -> tuple:
            return batch if (a, b) == first else _inner(a, b)
        source = source_with_first
    check_disk_space(target.parent, needed, f"{target} ({rows:,} images)",
                     "free some space, write elsewhere (--out), write fewer images (--n) or write shards on "
                     "several disks (--shard)")
    return source


def _batches(start: int, stop: int, batch_size: int) -> Iterator[tuple[int, int]]:
    for a in range(start, stop, batch_size):
        yield a, min(a + batch_size, stop)


def _render_source(gen: Generator, spec: DatasetSpec) -> BatchSource:
    def source(a: int, b: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        values, classes = gen.sample_factors(spec, a, b)
        images = gen.render(values)
        expected = (b - a, *spec.image_shape)
        if images.dtype != np.uint8 or images.shape != expected:
            raise RuntimeError(f"{gen.name}.render returned {images.dtype} {images.shape}, expected uint8 {expected}")
        return values, classes, images
    return source


def _open_partial(partial: Path, spec: DatasetSpec, start: int, stop: int, renderer: str,
                  has_classes: bool, log: Callable[[str], None]) -> tuple[h5py.File, int]:
    """Open ``partial`` for resuming when it holds the same job, else start it afresh."""
    if partial.exists():
        try:
            f = h5py.File(partial, "a")
        except BlockingIOError:  # HDF5's file lock: another process is writing it
            raise FactorbenchError(f"{partial} is being written by another process; wait for it to finish "
                                   "or stop it, then run this command again") from None
        except OSError:
            f = None
        if f is not None:
            same = (f.attrs.get("spec") == spec.to_json() and f.attrs.get("renderer") == renderer
                    and int(f.attrs.get("row_start", -1)) == start and int(f.attrs.get("row_stop", -1)) == stop
                    and "rows_written" in f.attrs)
            if same:
                done = int(f.attrs["rows_written"])
                log(f"resuming {partial} at row {start + done} of {start}..{stop}")
                return f, done
            f.close()
        log(f"discarding {partial}: it belongs to another job or is unreadable; starting afresh")
        partial.unlink()
    rows = stop - start
    f = h5py.File(partial, "w")
    ff.write_header(f, spec)
    f.attrs["renderer"] = renderer
    f.attrs["row_start"], f.attrs["row_stop"], f.attrs["rows_written"] = start, stop, 0
    f.create_dataset("images", **ff.image_dataset_options(rows, spec.image_shape))
    k = len(spec.factors)
    f.create_dataset("factors", shape=(rows, k), dtype=np.float64)
    if has_classes:
        f.create_dataset("factor_classes", shape=(rows, k), dtype=np.int64)
    return f, 0


#: writes rows ``[a, b)`` of the dataset into an open partial file whose first row is ``start``: (f, start, a, b)
RowWriter = Callable[[h5py.File, int, int, int], None]


def _write_rendered(source: BatchSource) -> RowWriter:
    """Rows drawn by ``source`` (rendered, or read from shards), written by value: HDF5 compresses them."""
    def write(f: h5py.File, start: int, a: int, b: int) -> None:
        values, classes, images = source(a, b)
        lo, hi = a - start, b - start
        f["images"][lo:hi] = images
        f["factors"][lo:hi] = values
        if classes is not None:
            f["factor_classes"][lo:hi] = classes
    return write


def _fill(f: h5py.File, write_rows: RowWriter, start: int, stop: int, done: int, batch_size: int,
          progress: bool, desc: str) -> None:
    """Write rows ``[start + done, stop)`` batch by batch, each followed by its progress mark (so a run
    interrupted between batches resumes after the last one written)."""
    with tqdm(total=stop - start, initial=done, unit="img", desc=desc, disable=None if progress else True,
              file=sys.stderr, dynamic_ncols=True) as bar:
        for a, b in _batches(start + done, stop, batch_size):
            write_rows(f, start, a, b)
            f.attrs["rows_written"] = b - start
            f.flush()
            bar.update(b - a)


def _finalise(f: h5py.File, spec: DatasetSpec, renderer: str, shard: Shard | None) -> None:
    """Write the splits and the manifest; the progress attributes go last, so an interrupted
    finalisation is simply redone when the command is run again."""
    if shard is None:
        if "splits" in f:
            del f["splits"]
        table = FactorTable(f["factors"][:], f["factor_classes"][:] if "factor_classes" in f else None, spec.factors)
        group = f.create_group("splits")
        for split_dict in spec.splits:
            split = split_from_dict(split_dict)
            for name, idx in split.assign(table).items():
                if name in group:
                    raise FactorbenchError(f"{spec.generator}: two default splits are both called {name!r}")
                group.create_dataset(name, data=idx.astype(np.int64))
                group[name].attrs["split_spec"] = canonical_json(split.to_dict())
        progress_attrs = ("rows_written", "row_start", "row_stop", "renderer")
    else:
        f.attrs["shard"] = f"{shard.index}/{shard.count}"
        progress_attrs = ("rows_written",)
    ff.store_manifest(f, ff.compute_manifest(f, spec, renderer))
    for key in progress_attrs:
        del f.attrs[key]


def _write(out: Path, spec: DatasetSpec, source: BatchSource, renderer: str, has_classes: bool, *,
           force: bool, shard: Shard | None, batch_size: int, progress: bool, desc: str,
           rows: RowWriter | None = None) -> Path:
    """Write the dataset (or ``shard``) into ``out`` through its partial file, rows drawn from ``source`` and
    written by value, or by ``rows`` (a merge copying compressed chunks)."""
    target = shard.path(out) if shard else out
    _check_destination(target, force)
    if batch_size < 1:
        raise FactorbenchError(f"batch size must be positive, got {batch_size}")
    start, stop = shard.rows(spec.n) if shard else (0, spec.n)
    partial = target.with_name(target.name + PARTIAL_SUFFIX)
    source = _check_space(target, partial, source, start, stop, batch_size)
    log = (lambda msg: print(msg, file=sys.stderr)) if progress else (lambda msg: None)
    fresh = not partial.exists()
    f, done = _open_partial(partial, spec, start, stop, renderer, has_classes, log)
    try:
        _fill(f, rows or _write_rendered(source), start, stop, done, batch_size, progress, desc)
        _finalise(f, spec, renderer, shard)
    except KeyboardInterrupt:
        f.close()
        raise GenerationInterrupted(f"interrupted; {partial} keeps the rows written so far: run the same command "
                                    "again to resume, or delete it to start afresh") from None
    except BaseException:
        f.close()
        if fresh or done == 0:  # a failed run leaves nothing behind (an interrupted one keeps its rows)
            partial.unlink(missing_ok=True)
        raise
    f.close()
    os.replace(partial, target)
    return target


def write_dataset(gen: Generator, out: str | os.PathLike, *, seed: int = 0, n: int | None = None,
                  force: bool = False, shard: Shard | str | None = None,
                  batch_size: int = DEFAULT_BATCH_SIZE, progress: bool = True, workers: int = 1) -> Path:
    """Render ``gen``'s dataset (or one shard of it) into the HDF5 file ``out``; returns the path written.
    ``workers`` > 1 renders the whole dataset in that many processes (:func:`_write_in_processes`): the
    same content hashes as one process."""
    spec = gen.spec(seed=seed, n=n)
    if isinstance(shard, str):
        shard = Shard.parse(shard)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise FactorbenchError(f"workers must be a whole number of processes, 1 or more; got {workers!r}")
    if workers > 1 and shard is not None:
        raise FactorbenchError("give either a shard (--shard) or several workers (--workers), not both: the "
                               "workers write shards of their own")
    if workers > 1 and spec.n > 1:
        return _write_in_processes(gen, Path(out), spec, seed=seed, n=n, force=force, batch_size=batch_size,
                                   progress=progress, workers=workers)
    if shard is not None and shard.count > spec.n:
        raise FactorbenchError(f"--shard {shard.index}/{shard.count}: {gen.name} has {spec.n:,} images, so it can "
                               f"be split into at most {spec.n:,} shards (each needs at least one image)")
    has_classes = any(f.is_grid for f in spec.factors)
    desc = gen.name + (f" shard {shard.index}/{shard.count}" if shard else "")
    return _write(Path(out), spec, _render_source(gen, spec), gen.renderer_identity(), has_classes,
                  force=force, shard=shard, batch_size=batch_size, progress=progress, desc=desc)


def _write_in_processes(gen: Generator, out: Path, spec: DatasetSpec, *, seed: int, n: int | None, force: bool,
                        batch_size: int, progress: bool, workers: int) -> Path:
    """``workers`` processes (fresh interpreters: nothing of this one, a GL context say, is inherited, and no
    ``__main__`` is imported again) each render a shard ``OUT.shard-i-of-W`` (:func:`_shard_main`), then
    :func:`merge_shards` joins them and they are removed. A shard finished by an interrupted run is kept
    and not rendered again; an unfinished one resumes from its partial file."""
    _check_destination(out, force)
    shards = [Shard(i, min(workers, spec.n)) for i in range(min(workers, spec.n))]
    todo = [sh for sh in shards if not _kept_shard(sh.path(out), spec, gen.renderer_identity(), force)]
    try:
        payloads = [pickle.dumps({"gen": gen, "out": str(out), "seed": seed, "n": n, "shard": (sh.index, sh.count),
                                  "batch_size": batch_size}) for sh in todo]
    except Exception as exc:  # noqa: BLE001 - any pickling failure means the same to the user
        raise FactorbenchError(f"{gen.name} cannot be rendered by several processes ({type(exc).__name__}: "
                               f"{exc}); use one (workers=1, no --workers)") from None
    left = sum(b - a for a, b in (sh.rows(spec.n) for sh in todo))
    running: dict[subprocess.Popen, tuple[Shard, Any]] = {}
    failed: list[str] = []
    # the worker imports factorbench from where this process does (a checkout on sys.path, say)
    command = [sys.executable, "-c", "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
               "from factorbench.generators.writer import _shard_main; _shard_main()", json.dumps(sys.path)]
    with tqdm(total=spec.n, initial=spec.n - left, unit="img", desc=f"{gen.name} ({len(shards)} processes)",
              disable=None if progress else True, file=sys.stderr, dynamic_ncols=True) as bar:
        try:
            for sh, payload in zip(todo, payloads):
                errors = tempfile.TemporaryFile()
                proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors)
                running[proc] = (sh, errors)
                assert proc.stdin is not None
                proc.stdin.write(payload)
                proc.stdin.close()
            while running and not failed:
                for proc in [p for p in running if p.poll() is not None]:
                    sh, errors = running.pop(proc)
                    if proc.returncode == 0:
                        a, b = sh.rows(spec.n)
                        bar.update(b - a)
                    else:
                        errors.seek(0)
                        lines = errors.read().decode(errors="replace").strip().splitlines()
                        failed.append(f"shard {sh.index}/{sh.count}: "
                                      + (lines[-1] if lines else f"exit status {proc.returncode}"))
                    errors.close()
                time.sleep(0.1)
        except KeyboardInterrupt:  # the workers got the same Ctrl-C and keep their partial files
            _wait_or_end(running)
            raise GenerationInterrupted(f"interrupted; the shards of {out} written so far are kept "
                                        f"({out.name}.shard-*-of-{len(shards)} and their partial files): run the "
                                        "same command again to resume") from None
        finally:
            _wait_or_end(running, grace_s=0.0)
    if failed:
        raise FactorbenchError(f"rendering {out} in {len(shards)} processes failed ({'; '.join(failed)}); the "
                               "shards written so far are kept, and the same command resumes them")
    # a shard kept from an interrupted run is checked against its manifest; the ones just written were
    # hashed by their worker from the file it wrote
    merged = merge_shards(out, [sh.path(out) for sh in shards], force=force, progress=progress,
                          batch_size=batch_size, check_contents=len(todo) < len(shards))
    for sh in shards:
        sh.path(out).unlink(missing_ok=True)
    return merged


def _kept_shard(path: Path, spec: DatasetSpec, renderer: str, force: bool) -> bool:
    """Whether ``path`` is a finished shard of this dataset, kept from an interrupted run (a shard file exists
    only once complete). A shard of another spec or renderer is an error, or, with ``force``, removed."""
    if not path.exists():
        return False
    try:
        with h5py.File(path, "r") as f:
            same = f.attrs.get("spec") == spec.to_json() and f.attrs.get("renderer") == renderer
    except OSError:
        same = False
    if same:
        return True
    if not force:
        raise FactorbenchError(f"{path} is not a shard of this dataset (another spec, seed or renderer, or "
                               "unreadable); move it away, or give --force to replace it")
    path.unlink()
    return False


def _wait_or_end(running: Mapping[subprocess.Popen, Any], grace_s: float = 30.0) -> None:
    """Give worker processes ``grace_s`` seconds to exit (keeping their partial files), then end them."""
    deadline = time.monotonic() + grace_s
    for proc in running:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait()


def _shard_main() -> None:
    """A worker process of :func:`_write_in_processes`: renders one shard, its arguments pickled on stdin
    (written by the parent process, never read from elsewhere); a user's error exits with status 2."""
    args = pickle.loads(sys.stdin.buffer.read())
    index, count = args["shard"]
    try:
        write_dataset(args["gen"], args["out"], seed=args["seed"], n=args["n"], shard=Shard(index, count),
                      batch_size=args["batch_size"], progress=False)
    except FactorbenchError as exc:  # GenerationInterrupted too: the partial file is kept
        print(exc, file=sys.stderr)
        sys.exit(2)


def generate(name: str, out: str | os.PathLike, *, params: Mapping[str, Any] | None = None, seed: int = 0,
             n: int | None = None, force: bool = False, shard: Shard | str | None = None,
             batch_size: int = DEFAULT_BATCH_SIZE, progress: bool = True, workers: int = 1,
             **options: Any) -> Path:
    """Generate dataset ``name`` into ``out`` (see ``factorbench generate --help``). ``options`` are the
    generator's run-time options, e.g. ``backend="cpu"`` for a 3D dataset or ``source=PATH``; None is omitted."""
    gen = get(name, params, **{k: v for k, v in options.items() if v is not None})
    return write_dataset(gen, out, seed=seed, n=n, force=force, shard=shard, batch_size=batch_size,
                         progress=progress, workers=workers)


_SHARD_NAME = re.compile(r"\.shard-(\d+)-of-(\d+)$")


def find_shards(out: Path) -> list[Path]:
    """The complete shard files ``OUT.shard-i-of-n`` next to ``out``, sorted by index."""
    found = []
    for p in out.parent.glob(f"{out.name}.shard-*-of-*"):
        m = _SHARD_NAME.search(p.name)
        if m and p.name == out.name + m.group(0):
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found)]


def _open_shard(p: Path) -> tuple[Shard, h5py.File]:
    f = ff.open_h5(str(p))
    if "shard" not in f.attrs or "manifest" not in f.attrs:
        f.close()
        raise FactorbenchError(f"{p} is not a complete shard; finish it by running its "
                               "`factorbench generate ... --shard` command again")
    try:
        shard = Shard.parse(str(f.attrs["shard"]))
        DatasetSpec.from_json(str(f.attrs["spec"]))
        for key in ("renderer", "row_start", "row_stop"):
            f.attrs[key]
        json.loads(str(f.attrs["manifest"]))["sha256"]
    except (KeyError, ValueError, TypeError, OSError, FactorbenchError) as exc:
        f.close()
        raise FactorbenchError(f"shard {p} is corrupted (its header cannot be read: {exc}); delete it and write "
                               "it again with its `factorbench generate ... --shard` command") from None
    return shard, f


def _check_shards(opened: list[tuple[Shard, h5py.File]], contents: bool = True) -> DatasetSpec:
    """All shards share one spec and renderer, cover every row once and (``contents``) match their manifests."""
    first = opened[0][1]
    spec = DatasetSpec.from_json(str(first.attrs["spec"]))
    for shard, f in opened:
        if f.attrs["spec"] != first.attrs["spec"] or f.attrs["renderer"] != first.attrs["renderer"]:
            raise FactorbenchError(f"{f.filename} belongs to another dataset spec or renderer than {first.filename}")
        if (int(f.attrs["row_start"]), int(f.attrs["row_stop"])) != shard.rows(spec.n):
            raise FactorbenchError(f"{f.filename}: its rows do not match shard {shard.index}/{shard.count}")
    counts = {s.count for s, _ in opened}
    if len(counts) != 1 or sorted(s.index for s, _ in opened) != list(range(counts.pop())):
        have = ", ".join(f"{s.index}/{s.count}" for s, _ in opened)
        raise FactorbenchError(f"shards do not cover the dataset exactly once (have {have}); "
                               "write the missing ones with --shard")
    for _, f in opened if contents else ():
        try:
            hashes = ff.content_hashes(f)
        except (ff.UnreadableData, KeyError) as exc:
            raise FactorbenchError(f"shard {f.filename} is corrupted ({exc}); delete it and write it again with "
                                   "its `factorbench generate ... --shard` command") from None
        if hashes != json.loads(str(f.attrs["manifest"]))["sha256"]:
            raise FactorbenchError(f"{f.filename}: its data do not match the shard's manifest; "
                                   "delete the shard and write it again")
    return spec


def merge_shards(out: str | os.PathLike, shards: list[str | os.PathLike] | None = None, *,
                 force: bool = False, progress: bool = True, batch_size: int = DEFAULT_BATCH_SIZE,
                 check_contents: bool = True) -> Path:
    """Join shard files into ``out``; the result has the same content hashes as a single-process run.
    Each shard's data are checked against its manifest first, unless ``check_contents`` is False: shards
    this process's workers have just written and hashed (:func:`_write_in_processes`)."""
    out = Path(out)
    paths = [Path(p) for p in shards] if shards else find_shards(out)
    if not paths:
        raise FactorbenchError(f"no shards found for {out} (expected files named {out.name}.shard-I-of-N); "
                               "write them with `factorbench generate ... --shard I/N`")
    _check_destination(out, force)
    opened: list[tuple[Shard, h5py.File]] = []
    try:
        for p in paths:
            opened.append(_open_shard(p))
        opened.sort(key=lambda t: t[0].index)
        spec = _check_shards(opened, contents=check_contents)
        ranges = [(*s.rows(spec.n), f) for s, f in opened]

        def source(a: int, b: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
            parts = [(f, max(a, sa) - sa, min(b, sb) - sa) for sa, sb, f in ranges if max(a, sa) < min(b, sb)]
            values = np.concatenate([f["factors"][lo:hi] for f, lo, hi in parts])
            images = np.concatenate([f["images"][lo:hi] for f, lo, hi in parts])
            classes = (np.concatenate([f["factor_classes"][lo:hi] for f, lo, hi in parts])
                       if "factor_classes" in parts[0][0] else None)
            return values, classes, images

        first = opened[0][1]
        desc = f"merge {spec.generator}"
        rows = _chunk_copier(ranges) if all(_stored_as_written(f["images"], spec) for _, f in opened) else None
        return _write(out, spec, source, str(first.attrs["renderer"]), "factor_classes" in first, force=force,
                      shard=None, batch_size=batch_size, progress=progress, desc=desc, rows=rows)
    finally:
        for _, f in opened:
            f.close()


def _stored_as_written(images: h5py.Dataset, spec: DatasetSpec) -> bool:
    """Whether a shard's images are stored as a file written now stores them (one image per chunk, the
    filters and level of :func:`fileformat.image_dataset_options`), so that its compressed chunks can be
    copied as they are."""
    want = ff.image_dataset_options(max(1, images.shape[0]), spec.image_shape)
    return (ff._one_deflated_row_per_chunk(images) and images.chunks == want["chunks"]
            and images.dtype == want["dtype"] and images.compression == want["compression"]
            and images.compression_opts == want["compression_opts"]
            and bool(images.fletcher32) == want["fletcher32"])


def _chunk_copier(ranges: list[tuple[int, int, h5py.File]]) -> RowWriter:
    """Rows written by copying each shard's compressed image chunks unchanged (no decoding, no compressing:
    the same bytes, so the same content hashes), factors and classes by value."""
    def write(f: h5py.File, start: int, a: int, b: int) -> None:
        images = f["images"].id
        tail = (0,) * (len(f["images"].shape) - 1)
        for sa, sb, src in ranges:
            lo, hi = max(a, sa), min(b, sb)
            if lo >= hi:
                continue
            chunks = src["images"].id
            for row in range(lo, hi):
                mask, data = chunks.read_direct_chunk((row - sa, *tail))
                images.write_direct_chunk((row - start, *tail), data, mask)
            f["factors"][lo - start:hi - start] = src["factors"][lo - sa:hi - sa]
            if "factor_classes" in f:
                f["factor_classes"][lo - start:hi - start] = src["factor_classes"][lo - sa:hi - sa]
    return write


def add_split(path: str | os.PathLike, split: SplitSpec, *, force: bool = False) -> dict[str, int]:
    """Add the parts of ``split`` to an existing dataset file, without rewriting its images.

    The new index arrays are written under temporary names, then renamed and entered in the manifest
    in one short metadata step; on any failure (or Ctrl-C) the temporary arrays are removed and the
    file is as it was. Existing splits of the same name are replaced only with ``force``.
    Returns ``{split name: size}``.
    """
    try:
        f = h5py.File(path, "r+")
    except BlockingIOError:
        raise FactorbenchError(f"{path} is open in another process (reading or writing it), and HDF5 lets no process "
                               "write a file that others have open; try again when it is done") from None
    except OSError:
        f = ff.open_h5(str(path))  # raises the clear error for a missing or broken file
        f.close()
        raise FactorbenchError(f"{path} is not writable; check its permissions") from None
    with f:
        spec, manifest = ff.read_header(f, str(path))
        table = FactorTable(f["factors"][:], f["factor_classes"][:] if "factor_classes" in f else None, spec.factors)
        parts = split.assign(table)
        group = f.require_group("splits")
        clash = sorted(set(parts) & set(group))
        if clash and not force:
            raise FactorbenchError(f"{path} already has split(s) {', '.join(clash)}; pass --force to replace them")
        pending = {name: f".pending-{name}" for name in parts}
        try:
            for name, idx in parts.items():
                if pending[name] in group:
                    del group[pending[name]]
                group.create_dataset(pending[name], data=idx.astype(np.int64))
                group[pending[name]].attrs["split_spec"] = canonical_json(split.to_dict())
            hashes = {f"splits/{name}": ff.sha256_array(idx.astype(np.int64)) for name, idx in parts.items()}
            for name in parts:
                if name in group:
                    del group[name]
                group.move(pending[name], name)
            manifest["sha256"].update(hashes)
            manifest["shapes"] = ff.shapes_of(f)
            ff.store_manifest(f, manifest)
        except BaseException:
            for name in pending.values():
                if name in group:
                    del group[name]
            raise
    return {name: len(idx) for name, idx in parts.items()}
