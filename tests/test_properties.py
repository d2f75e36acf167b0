"""Property-based checks of the pieces every file relies on."""

import h5py
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from factorbench.benchmark.dataset import _gather_rows
from factorbench.generators import Shard
from factorbench.generators.square import periodic_coverage


@given(n=st.integers(1, 10**7), count=st.integers(1, 64))
def test_shards_partition_the_rows(n, count):
    bounds = [Shard(i, count).rows(n) for i in range(count)]
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(b[1] == c[0] and b[0] <= b[1] for b, c in zip(bounds, bounds[1:]))


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.integers(0, 99), max_size=40), chunk=st.sampled_from([1, 3, 7, 100]))
def test_chunked_gather_equals_numpy_fancy_indexing(tmp_path_factory, rows, chunk):
    data = np.arange(100 * 6, dtype=np.uint8).reshape(100, 2, 3)
    path = tmp_path_factory.mktemp("g") / "g.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, chunks=(chunk, 2, 3))
        idx = np.asarray(rows, dtype=np.int64)
        assert np.array_equal(_gather_rows(f["x"], idx), data[idx])


@given(start=st.floats(-1000, 1000, allow_nan=False), length=st.floats(0.5, 63.5))
def test_periodic_coverage_conserves_length(start, length):
    cov = periodic_coverage(np.array([start]), length, 64)
    assert cov.min() >= 0 and cov.max() <= 1 + 1e-12
    assert abs(cov.sum() - length) < 1e-9
