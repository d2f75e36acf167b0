"""The HDF5 dataset file: layout, storage settings and the content hashes of the manifest.

Layout of one file::

    images            (N, H, W, C) uint8, chunked, compressed
    factors           (N, K) float64
    factor_classes    (N, K) int64          (grid datasets only)
    splits/<name>     (M,) int64 sorted sample indices (attribute ``split_spec``: the split spec JSON)
    attrs: format, format_version, spec (dataset spec JSON), manifest (JSON, see :func:`compute_manifest`)

Storage settings were chosen by measurement (``python tests/perf/bench_storage.py``; figures in the
README): one image per chunk, gzip level 1, fletcher32 checksums. Against 64-image chunks, random
batches read 15-21x faster through :class:`factorbench.benchmark.Dataset` while files of rendered
images grow by about 3 % (flat 2-D images compress worse one by one: +44 %, on files of a few MB).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from .errors import FactorbenchError
from .spec import DatasetSpec, canonical_json

FORMAT_NAME = "factorbench-dataset"
FORMAT_VERSION = 1

#: Images per HDF5 chunk, compression filter and level (see the module docstring).
CHUNK_ROWS = 1
COMPRESSION = "gzip"
COMPRESSION_LEVEL = 1
#: Rows read at a time when hashing or copying (a multiple of CHUNK_ROWS).
READ_BLOCK_ROWS = 1024
#: threads that inflate stored image chunks while hashing them (zlib releases the GIL)
HASH_THREADS = max(1, min(16, os.cpu_count() or 1))


@functools.lru_cache(maxsize=1)
def package_version() -> str:
    """factorbench's version. From a source checkout (an editable install) it is read from the checkout's
    pyproject.toml: the installed metadata can then be a stale ``factorbench.egg-info`` that Python finds
    first on ``sys.path`` (the checkout's root, when commands run there). Otherwise the installed
    distribution's."""
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if pyproject.is_file():
        match = re.search(r'^name = "factorbench"\n(?:.*\n)*?version = "([^"]+)"', pyproject.read_text(), re.MULTILINE)
        if match:
            return match.group(1)
    try:
        return metadata.version("factorbench")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


def image_dataset_options(rows: int, image_shape: tuple[int, int, int]) -> dict[str, Any]:
    return {
        "shape": (rows, *image_shape),
        "dtype": np.uint8,
        "chunks": (max(1, min(CHUNK_ROWS, rows)), *image_shape),
        "compression": COMPRESSION,
        "compression_opts": COMPRESSION_LEVEL,
        "fletcher32": True,
    }


def _le_bytes(a: np.ndarray) -> bytes:
    """Array bytes in little-endian C order, so hashes are the same on every machine."""
    return np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()


def sha256_array(a: np.ndarray) -> str:
    return hashlib.sha256(_le_bytes(np.asarray(a))).hexdigest()


class UnreadableData(FactorbenchError):
    """Stored bytes could not be decoded (checksum or decompression failure)."""


class _NotInflatable(Exception):
    """A stored chunk this module does not decode itself (HDF5 reads it instead)."""


def _one_deflated_row_per_chunk(ds: h5py.Dataset) -> bool:
    """Whether each row of ``ds`` is stored as one chunk of gzip alone, or gzip then fletcher32: what
    :func:`image_dataset_options` writes, and what :func:`_sha256_inflated` decodes."""
    return (ds.chunks is not None and ds.ndim >= 2 and ds.chunks == (1, *ds.shape[1:]) and ds.dtype.itemsize == 1
            and ds.compression == "gzip" and not ds.shuffle and ds.scaleoffset is None
            and ds.id.get_create_plist().get_nfilters() == (2 if ds.fletcher32 else 1))


def fletcher32(chunks: list[bytes]) -> np.ndarray:
    """HDF5's Fletcher-32 checksum of each byte string, as its fletcher32 filter computes and stores it
    (``H5_checksum_fletcher32``, HDF5's H5checksum.c: big-endian 16-bit words, an odd last byte as a
    word's high byte, sums folded to 16 bits with end-around carry), for all of them at once. Folding keeps
    each sum's value modulo 65535 and never reaches 0 from a positive sum, so the stored sum of a
    positive total S is (S - 1) mod 65535 + 1, of a zero total 0."""
    lengths = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
    odd = lengths % 2 == 1
    words = np.frombuffer(b"".join(c + b"\0" if o else c for c, o in zip(chunks, odd)) if odd.any()
                          else b"".join(chunks), dtype=">u2")
    n = (lengths + 1) // 2
    ends = np.cumsum(n)
    if not len(chunks) or not n.all():
        raise ValueError("fletcher32: every chunk must hold at least one byte")
    running = np.cumsum(words, dtype=np.int64)  # sum1 after each word, unfolded
    before = np.concatenate(([0], running[ends[:-1] - 1]))
    sum1 = running[ends - 1] - before
    sum2 = np.add.reduceat(running, ends - n) - n * before  # sum2 adds sum1 after every word
    folded = [np.where(s == 0, 0, (s - 1) % 65535 + 1) for s in (sum1, sum2)]
    return (folded[1] << 16) | folded[0]


def _sha256_inflated(ds: h5py.Dataset, block: int) -> str:
    """sha256 of the bytes of a dataset stored as :func:`_one_deflated_row_per_chunk`, its chunks read as
    stored, their fletcher32 sums checked (:func:`fletcher32`) and inflated with zlib in
    :data:`HASH_THREADS` threads, ``block`` rows a task, at most two tasks a thread ahead of the hash
    (bounded memory). What HDF5's filter pipeline checks, without its serial reads; a chunk it would not
    take so (a failed sum, a skipped filter, a wrong size) raises :class:`_NotInflatable`."""
    rows, trim, zeros = ds.shape[0], 4 if ds.fletcher32 else 0, (0,) * (ds.ndim - 1)
    row_bytes = int(np.prod(ds.shape[1:]))
    dsid = ds.id

    def inflate(a: int, b: int) -> bytes:
        stored = []
        for r in range(a, b):
            mask, data = dsid.read_direct_chunk((r, *zeros))
            if mask or len(data) <= trim:  # a filter skipped, or no payload: HDF5 knows what it holds
                raise _NotInflatable
            stored.append(data)
        if trim:
            sums = np.frombuffer(b"".join(data[-4:] for data in stored), dtype="<u4")
            stored = [data[:-4] for data in stored]
            if not np.array_equal(fletcher32(stored), sums):
                raise _NotInflatable  # HDF5 names the rows (or takes a sum stored byte-reversed, as it does)
        parts = [zlib.decompress(data) for data in stored]
        if any(len(row) != row_bytes for row in parts):
            raise _NotInflatable
        return b"".join(parts)

    h = hashlib.sha256()
    with ThreadPoolExecutor(HASH_THREADS) as pool:
        pending: deque = deque()
        try:
            for a in range(0, rows, block):
                pending.append(pool.submit(inflate, a, min(a + block, rows)))
                if len(pending) >= 2 * HASH_THREADS:
                    h.update(pending.popleft().result())
            while pending:
                h.update(pending.popleft().result())
        finally:
            for future in pending:
                future.cancel()
    return h.hexdigest()


def sha256_rows(ds: h5py.Dataset, block: int = READ_BLOCK_ROWS, *, inflate: bool = True) -> str:
    """sha256 of a dataset's bytes, read ``block`` rows at a time (constant memory), every chunk's
    checksum checked, a corrupted block named. Images stored as factorbench writes them are read as
    stored chunks and checked and inflated in threads (:func:`_sha256_inflated`); anything else, a chunk
    that fails there, or ``inflate=False``: read through HDF5."""
    if inflate and _one_deflated_row_per_chunk(ds):
        try:
            return _sha256_inflated(ds, block)
        except (_NotInflatable, zlib.error, OSError, ValueError, KeyError):
            pass  # read through HDF5 below: the same hash where the data are sound, else its error
    h = hashlib.sha256()
    for a in range(0, ds.shape[0], block):
        b = min(a + block, ds.shape[0])
        try:
            rows = ds[a:b]
        except OSError as exc:
            raise UnreadableData(f"{ds.name.lstrip('/')}: rows {a}..{b - 1} cannot be read ({exc}); "
                                 "the file is corrupted: regenerate it") from None
        h.update(_le_bytes(rows))
    return h.hexdigest()


def content_hashes(f: h5py.File) -> dict[str, str]:
    """sha256 of images, factors, factor classes and each split, keyed by their path in the file."""
    hashes = {"images": sha256_rows(f["images"]), "factors": sha256_rows(f["factors"])}
    if "factor_classes" in f:
        hashes["factor_classes"] = sha256_rows(f["factor_classes"])
    for name in sorted(f.get("splits", {})):
        hashes[f"splits/{name}"] = sha256_rows(f["splits"][name])
    return hashes


def shapes_of(f: h5py.File) -> dict[str, list[int]]:
    names = ["images", "factors", "factor_classes"] + [f"splits/{s}" for s in sorted(f.get("splits", {}))]
    return {name: list(f[name].shape) for name in names if name in f}


def compute_manifest(f: h5py.File, spec: DatasetSpec, renderer: str) -> dict[str, Any]:
    """The manifest stored with a complete file. It holds no dates, so equal data give equal manifests."""
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "spec_hash": spec.hash(),
        "generator": spec.generator,
        "generator_version": spec.version,
        "package_version": package_version(),
        "renderer": renderer,
        "shapes": shapes_of(f),
        "sha256": content_hashes(f),
    }


def read_header(f: h5py.File, path: str) -> tuple[DatasetSpec, dict[str, Any]]:
    """Spec and manifest of an open file, with a clear error when the file is not a complete dataset."""
    if f.attrs.get("format") != FORMAT_NAME:
        raise FactorbenchError(f"{path} is not a factorbench dataset file (no '{FORMAT_NAME}' header); "
                               "make one with `factorbench generate`")
    if int(f.attrs.get("format_version", -1)) > FORMAT_VERSION:
        raise FactorbenchError(f"{path} uses file format {f.attrs['format_version']}, newer than this "
                               f"installation reads ({FORMAT_VERSION}); upgrade factorbench")
    if "shard" in f.attrs:
        raise FactorbenchError(f"{path} is shard {f.attrs['shard']} of a dataset, incomplete on its own: join the "
                               "shards with `factorbench merge`")
    if "manifest" not in f.attrs:
        raise FactorbenchError(f"{path} is incomplete (a shard or an interrupted run): finish it with "
                               "`factorbench generate` (it resumes) or `factorbench merge`")
    spec = DatasetSpec.from_json(str(f.attrs["spec"]))
    try:
        manifest = json.loads(str(f.attrs["manifest"]))
    except json.JSONDecodeError as exc:
        raise FactorbenchError(f"{path}: the manifest is not valid JSON ({exc}); regenerate the file") from None
    return spec, manifest


def write_header(f: h5py.File, spec: DatasetSpec) -> None:
    f.attrs["format"] = FORMAT_NAME
    f.attrs["format_version"] = FORMAT_VERSION
    f.attrs["spec"] = spec.to_json()


def store_manifest(f: h5py.File, manifest: dict[str, Any]) -> None:
    f.attrs["manifest"] = canonical_json(manifest)


def open_h5(path: str, mode: str = "r") -> h5py.File:
    """Open an HDF5 file, turning h5py's low-level errors into a message a user can act on."""
    try:
        return h5py.File(path, mode)
    except FileNotFoundError:
        raise FactorbenchError(f"{path}: no such file") from None
    except OSError as exc:
        raise FactorbenchError(f"{path} cannot be opened as an HDF5 file ({exc}); it is not a factorbench "
                               "dataset or it is corrupted: regenerate it with `factorbench generate`") from None
