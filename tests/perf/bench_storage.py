"""Measure HDF5 storage options for the ``images`` dataset of factorbench files.

For each data set and each storage option (chunk rows x compression filter, with fletcher32 on),
the script writes the (N, 64, 64, 3) uint8 image array to an HDF5 file in a temporary directory and
measures:

* size       file size in MB (10**6 bytes) and compression ratio (raw bytes / file bytes);
* write      images/s, writing in blocks of the writer's batch size (512 rows), including close;
* seq read   images/s, reading all rows in blocks of 1024 rows (as hashing and copying do);
* rand read  images/s, reading 100 batches of 64 random indices through the project's reader
             (``factorbench.benchmark.dataset._gather_rows``, which reads each needed chunk once, as
             ``ds.images[idx]`` and a shuffled training loader do); the same batches for every option.

Reads are repeated (``--repeats``, at least 2) and the best time is kept. The file has just been
written, so reads come from the OS page cache: the figures measure HDF5 and filter (decompression)
cost, not disk speed. Files are opened with h5py's default chunk cache, as the project's reader does.

Data sets: ``arrow`` and ``square`` from the project's generators (4096 images each), and
``synthetic-3d``, a SYNTHETIC stand-in for rendered 3-D objects (smooth shaded ellipsoid blobs with
colour gradients and light noise on a white background, numpy ``default_rng(0)``), which compresses
much less well than the two flat 2-D generators.

After the main grid, fletcher32 is switched off for the two best settings to measure its cost.
The recommendation rule (printed with the result) is deliberately simple:

    a setting qualifies if, on every data set, its random-batch read is at least
    ``--min-random-frac`` (default 0.5) of the fastest setting's random-batch read on that data set;
    among qualifying settings, pick the smallest total file size over all data sets.

Run from the repository root::

    python tests/perf/bench_storage.py            # full run, 4096 images per data set
    python tests/perf/bench_storage.py --quick    # 1024 images per data set
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import h5py
import numpy as np

from factorbench.benchmark.dataset import _gather_rows
from factorbench.generators import get
from factorbench.generators.fileformat import READ_BLOCK_ROWS
from factorbench.generators.writer import DEFAULT_BATCH_SIZE

CHUNK_ROWS_OPTIONS = (1, 4, 16, 64)
#: name -> (h5py compression, compression_opts)
COMPRESSIONS: dict[str, tuple[str | None, int | None]] = {
    "none": (None, None),
    "lzf": ("lzf", None),
    "gzip-1": ("gzip", 1),
    "gzip-4": ("gzip", 4),
}
RANDOM_BATCHES = 100
RANDOM_BATCH_SIZE = 64
FLETCHER_OFF_SETTINGS = 2  # how many of the best settings are re-measured with fletcher32 off
SIZE = 64


@dataclass(frozen=True)
class Option:
    chunk_rows: int
    compression: str
    fletcher32: bool = True

    @property
    def setting(self) -> tuple[int, str]:
        """The option without its fletcher32 flag."""
        return self.chunk_rows, self.compression

    def dataset_kwargs(self, shape: tuple[int, ...]) -> dict[str, object]:
        filt, level = COMPRESSIONS[self.compression]
        kwargs: dict[str, object] = {
            "shape": shape,
            "dtype": np.uint8,
            "chunks": (min(self.chunk_rows, shape[0]), *shape[1:]),
            "fletcher32": self.fletcher32,
            "track_times": False,
        }
        if filt is not None:
            kwargs["compression"] = filt
            if level is not None:
                kwargs["compression_opts"] = level
        return kwargs


@dataclass(frozen=True)
class Result:
    dataset: str
    option: Option
    n: int
    raw_bytes: int
    file_bytes: int
    write_ips: float
    seq_ips: float
    rand_ips: float

    @property
    def ratio(self) -> float:
        return self.raw_bytes / self.file_bytes


# -- data sets -------------------------------------------------------------------------------------

def generator_images(name: str, n: int) -> np.ndarray:
    """``n`` images of the project's generator ``name``, evenly spaced over its full sample range."""
    g = get(name)
    spec = g.spec()
    values, _classes = g.sample_factors(spec, 0, spec.n)
    step = max(1, spec.n // n)
    images = g.render(values[::step][:n])
    assert images.dtype == np.uint8 and images.shape == (min(n, spec.n), *spec.image_shape)
    return images


def synthetic_3d_images(n: int, seed: int = 0, blobs: int = 3, noise: float = 3.0,
                        batch: int = 256) -> np.ndarray:
    """SYNTHETIC stand-in for rendered 3-D objects: 1..``blobs`` shaded ellipsoids per image.

    Each blob is an ellipse-shaped height field lit by a random directional light (ambient + Lambert),
    tinted by a linear colour gradient, with anti-aliased edges and Gaussian noise (``noise`` grey
    levels) on object pixels; the background is pure white.
    """
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float64) + 0.5
    out = np.empty((n, SIZE, SIZE, 3), dtype=np.uint8)
    for a in range(0, n, batch):
        b = min(a + batch, n)
        m = b - a
        img = np.ones((m, SIZE, SIZE, 3))
        count = rng.integers(1, blobs + 1, size=m)
        for k in range(blobs):
            active = (k < count)[:, None, None]
            cx, cy = rng.uniform(14, 50, (2, m, 1, 1))
            ra, rb = rng.uniform(6, 18, (2, m, 1, 1))
            theta = rng.uniform(0, np.pi, (m, 1, 1))
            c, s = np.cos(theta), np.sin(theta)
            u = ((xx - cx) * c + (yy - cy) * s) / ra
            v = (-(xx - cx) * s + (yy - cy) * c) / rb
            r = np.sqrt(u * u + v * v)
            alpha = np.clip((1.0 - r) * np.minimum(ra, rb), 0.0, 1.0) * active  # ~1 px soft edge
            z = np.sqrt(np.clip(1.0 - r * r, 0.0, 1.0))
            light = rng.normal(size=(3, m, 1, 1))
            light[2] = np.abs(light[2]) + 0.5  # light from the viewer's side
            light /= np.linalg.norm(light, axis=0, keepdims=True)
            lambert = np.clip((u * light[0] + v * light[1] + z * light[2]) / np.sqrt(u * u + v * v + z * z + 1e-12),
                              0.0, 1.0)
            shade = 0.25 + 0.75 * lambert
            base = rng.uniform(0.15, 0.95, (m, 1, 1, 3))
            tint = rng.uniform(-0.25, 0.25, (m, 1, 1, 3))
            colour = np.clip(base + tint * u[..., None], 0.0, 1.0) * shade[..., None]
            img = img * (1.0 - alpha[..., None]) + colour * alpha[..., None]
        is_object = (img < 1.0).any(axis=-1, keepdims=True)
        img = img * 255.0 + rng.normal(0.0, noise, img.shape) * is_object
        out[a:b] = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return out


def build_datasets(n: int) -> dict[str, np.ndarray]:
    return {"arrow": generator_images("arrow", n),
            "square": generator_images("square", n),
            "synthetic-3d": synthetic_3d_images(n)}


# -- measurements ----------------------------------------------------------------------------------

def best_of(repeats: int, run: Callable[[], float]) -> float:
    """Smallest of ``repeats`` timings returned by ``run``."""
    return min(run() for _ in range(repeats))


def measure(name: str, images: np.ndarray, option: Option, batches: list[np.ndarray], workdir: Path,
            repeats: int) -> Result:
    n = images.shape[0]
    path = workdir / f"{name}-{option.chunk_rows}-{option.compression}-{int(option.fletcher32)}.h5"

    t0 = time.perf_counter()
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("images", **option.dataset_kwargs(images.shape))
        for a in range(0, n, DEFAULT_BATCH_SIZE):
            ds[a:a + DEFAULT_BATCH_SIZE] = images[a:a + DEFAULT_BATCH_SIZE]
    write_s = time.perf_counter() - t0
    file_bytes = path.stat().st_size

    def sequential() -> float:
        elapsed = 0.0
        with h5py.File(path, "r") as f:
            ds = f["images"]
            for a in range(0, n, READ_BLOCK_ROWS):
                t = time.perf_counter()
                block = ds[a:a + READ_BLOCK_ROWS]
                elapsed += time.perf_counter() - t
                if not np.array_equal(block, images[a:a + READ_BLOCK_ROWS]):  # untimed check
                    raise AssertionError(f"{path.name}: rows from {a} read back wrong")
        return elapsed

    def random_batches() -> float:
        with h5py.File(path, "r") as f:
            ds = f["images"]
            t = time.perf_counter()
            for idx in batches:
                _gather_rows(ds, idx)
            elapsed = time.perf_counter() - t
            if not np.array_equal(_gather_rows(ds, batches[0]), images[batches[0]]):
                raise AssertionError(f"{path.name}: random batch read back wrong")
        return elapsed

    seq_s = best_of(repeats, sequential)
    rand_s = best_of(repeats, random_batches)
    path.unlink()
    rand_rows = sum(len(b) for b in batches)
    return Result(name, option, n, images.nbytes, file_bytes, n / write_s, n / seq_s, rand_rows / rand_s)


def random_index_batches(n: int, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    size = min(RANDOM_BATCH_SIZE, n)
    return [rng.choice(n, size=size, replace=False) for _ in range(RANDOM_BATCHES)]


# -- decision and report ---------------------------------------------------------------------------

def rank_settings(results: list[Result], min_random_frac: float) -> list[tuple[int, str]]:
    """Settings (fletcher32 on) that qualify, best first (see the module docstring for the rule)."""
    main = [r for r in results if r.option.fletcher32]
    names = sorted({r.dataset for r in main})
    fastest = {d: max(r.rand_ips for r in main if r.dataset == d) for d in names}
    by_setting: dict[tuple[int, str], list[Result]] = {}
    for r in main:
        by_setting.setdefault(r.option.setting, []).append(r)
    qualifying = [s for s, rs in by_setting.items()
                  if all(r.rand_ips >= min_random_frac * fastest[r.dataset] for r in rs)]
    return sorted(qualifying, key=lambda s: (sum(r.file_bytes for r in by_setting[s]),
                                             -min(r.rand_ips / fastest[r.dataset] for r in by_setting[s])))


HEADER = (f"{'dataset':<13} {'chunk':>5} {'compression':<11} {'fl32':<4} {'size MB':>8} {'ratio':>6} "
          f"{'write img/s':>11} {'seq img/s':>10} {'rand img/s':>10}")


def format_row(r: Result) -> str:
    o = r.option
    return (f"{r.dataset:<13} {o.chunk_rows:>5} {o.compression:<11} {'on' if o.fletcher32 else 'off':<4} "
            f"{r.file_bytes / 1e6:>8.2f} {r.ratio:>6.1f} {r.write_ips:>11,.0f} {r.seq_ips:>10,.0f} "
            f"{r.rand_ips:>10,.0f}")


def fletcher_cost(results: list[Result], setting: tuple[int, str]) -> str:
    """Mean relative change (on -> off) of size and read speeds for one setting."""
    pairs = [(on, off) for on in results for off in results
             if on.dataset == off.dataset and on.option.setting == off.option.setting == setting
             and on.option.fletcher32 and not off.option.fletcher32]
    if not pairs:
        return "not measured"

    def mean_pct(f: Callable[[Result], float]) -> float:
        return 100.0 * float(np.mean([f(on) / f(off) - 1.0 for on, off in pairs]))

    return (f"size {mean_pct(lambda r: r.file_bytes):+.2f}%, seq read {mean_pct(lambda r: r.seq_ips):+.1f}%, "
            f"rand read {mean_pct(lambda r: r.rand_ips):+.1f}% with fletcher32 on vs off")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="See the module docstring for what is measured and the decision rule.")
    parser.add_argument("--quick", action="store_true", help="1024 images per data set instead of 4096")
    parser.add_argument("--repeats", type=int, default=2, help="read repeats, best kept (default 2, min 2)")
    parser.add_argument("--min-random-frac", type=float, default=0.5,
                        help="a setting qualifies if its random-batch read is at least this fraction of the "
                             "fastest on every data set (default 0.5)")
    parser.add_argument("--tmpdir", default=None, help="where to write the temporary files (default: system temp)")
    args = parser.parse_args(argv)
    repeats = max(2, args.repeats)
    n = 1024 if args.quick else 4096

    t_start = time.perf_counter()
    datasets = build_datasets(n)
    print(f"h5py {h5py.__version__}, HDF5 {h5py.version.hdf5_version}, numpy {np.__version__}, "
          f"{os.cpu_count()} CPUs; {n} images per data set "
          f"(built in {time.perf_counter() - t_start:.1f} s); 'synthetic-3d' is SYNTHETIC, not a generator",
          flush=True)

    options = [Option(c, comp) for c in CHUNK_ROWS_OPTIONS for comp in COMPRESSIONS]
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="bench_storage_", dir=args.tmpdir) as tmp:
        batches = {name: random_index_batches(len(images)) for name, images in datasets.items()}

        def run(option_list: list[Option]) -> None:
            for name, images in datasets.items():
                for o in option_list:
                    r = measure(name, images, o, batches[name], Path(tmp), repeats)
                    results.append(r)
                    print(f"  [{time.perf_counter() - t_start:6.1f} s] {format_row(r)}", file=sys.stderr, flush=True)

        run(options)
        ranked = rank_settings(results, args.min_random_frac)
        top = ranked[:FLETCHER_OFF_SETTINGS]
        run([Option(c, comp, fletcher32=False) for c, comp in top])

    print()
    print(HEADER)
    print("-" * len(HEADER))
    for name in datasets:
        for r in results:
            if r.dataset == name:
                print(format_row(r))
        print()

    print(f"Rule: on every data set rand read >= {args.min_random_frac:g} x the fastest setting's rand read; "
          "then smallest total size.")
    if ranked:
        print("Qualifying settings, best first: " + ", ".join(f"chunk {c} {comp}" for c, comp in ranked))
        for s in top:
            print(f"fletcher32 cost at chunk {s[0]} {s[1]}: {fletcher_cost(results, s)}")
        c, comp = ranked[0]
        total = sum(r.file_bytes for r in results if r.option.fletcher32 and r.option.setting == ranked[0]) / 1e6
        print(f"RECOMMENDATION: CHUNK_ROWS={c}, compression {comp} ({total:.2f} MB over all data sets); "
              "fletcher32: see its cost above")
    else:
        print("RECOMMENDATION: no setting qualifies; lower --min-random-frac")
    print(f"Total runtime: {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
