"""Property-based checks of the pieces every file relies on."""

import h5py
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from factorbench.benchmark.dataset import GATHER_RUN_BYTES, _gather_rows, gather_run_rows
from factorbench.generators import Shard
from factorbench.generators.square import periodic_coverage


@given(n=st.integers(1, 10**7), count=st.integers(1, 64))
def test_shards_partition_the_rows(n, count):
    bounds = [Shard(i, count).rows(n) for i in range(count)]
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(b[1] == c[0] and b[0] <= b[1] for b, c in zip(bounds, bounds[1:]))


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.integers(0, 99), max_size=40), chunk=st.sampled_from([1, 3, 7, 100]),
       runs=st.lists(st.tuples(st.integers(0, 99), st.integers(1, 60)), max_size=3),
       run_rows=st.sampled_from([1, 5, 16, 4096]))
def test_chunked_gather_equals_numpy_fancy_indexing(tmp_path_factory, rows, chunk, runs, run_rows):
    """Any rows, in any order, with repeats and runs of consecutive rows (read a slice per run, split at
    blocks of ``run_rows``): the same array as numpy's fancy indexing."""
    data = np.arange(100 * 6, dtype=np.uint8).reshape(100, 2, 3)
    path = tmp_path_factory.mktemp("g") / "g.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, chunks=(chunk, 2, 3))
        idx = np.asarray(rows + [r for a, n in runs for r in range(a, min(100, a + n))], dtype=np.int64)
        assert np.array_equal(_gather_rows(f["x"], idx, run_rows=run_rows), data[idx])
        assert np.array_equal(_gather_rows(f["x"], np.arange(100), run_rows=run_rows), data)


def test_a_run_of_rows_is_read_with_one_slice_per_block():
    """Consecutive rows cost one read per block of run_rows, not one per chunk (the whole-split load)."""
    reads = []

    class Recorder:
        chunks, shape, dtype = (1, 2), (50, 2), np.dtype(np.uint8)

        def __getitem__(self, key):
            reads.append((key.start, key.stop))
            return np.arange(key.start, key.stop, dtype=np.uint8)[:, None].repeat(2, 1)

    out = _gather_rows(Recorder(), np.r_[0:20, 30, 32, 33], run_rows=8)
    assert reads == [(0, 8), (8, 16), (16, 20), (30, 31), (32, 34)]
    assert np.array_equal(out[:, 0], np.r_[0:20, 30, 32, 33])
    # by default a slice holds at most GATHER_RUN_BYTES of rows, and at least one row
    for shape, rows in [((9, 64, 64, 1), 8192), ((9, 256, 256, 3), 170), ((9, 4096, 4096, 3), 1)]:
        Recorder.shape = shape
        assert gather_run_rows(Recorder()) == rows
        assert rows == 1 or rows * np.prod(shape[1:]) <= GATHER_RUN_BYTES < (rows + 1) * np.prod(shape[1:])


@given(start=st.floats(-1000, 1000, allow_nan=False), length=st.floats(0.5, 63.5))
def test_periodic_coverage_conserves_length(start, length):
    cov = periodic_coverage(np.array([start]), length, 64)
    assert cov.min() >= 0 and cov.max() <= 1 + 1e-12
    assert abs(cov.sum() - length) < 1e-9
