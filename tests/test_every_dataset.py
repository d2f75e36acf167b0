"""One set of checks run on every registered dataset (shapes, dtypes, counts, domains, splits, hashes)."""

import numpy as np
import pytest

from factorbench.benchmark import load, verify
from factorbench.generators import Shard, get, list_datasets, merge_shards, write_dataset

from conftest import SMALL_IID_N

# datasets built from outside data (which the tests cannot have) are checked on small fakes in their own tests
DATASETS = sorted(name for name in list_datasets() if "source" not in get(name).options)


@pytest.fixture(params=DATASETS, scope="module")
def ds(request, generated):
    with load(generated(request.param)) as ds:
        yield ds


class TestEveryDataset:
    def test_shapes_and_dtypes(self, ds):
        gen = get(ds.spec.generator, ds.spec.params)
        n, k = len(ds), len(ds.spec.factors)
        assert n == (gen.full_size() if gen.is_grid else SMALL_IID_N) and ds.images.shape == (n, *gen.image_shape)
        assert ds.images[:2].dtype == np.uint8
        assert ds.factors.shape == (n, k) and ds.factors.dtype == np.float64
        if gen.is_grid:
            assert ds.factor_classes.shape == (n, k) and ds.factor_classes.dtype == np.int64

    def test_factor_values_lie_in_their_domains(self, ds):
        for j, factor in enumerate(ds.spec.factors):
            col = ds.factors[:, j]
            assert col.min() >= factor.low and col.max() <= factor.high
            if factor.kind == "cyclic":
                assert col.max() < factor.low + factor.period
            if factor.is_grid:
                classes = ds.factor_classes[:, j]
                assert np.array_equal(np.asarray(factor.values)[classes], col)
                assert np.array_equal(factor.classes_of(col), classes)
                assert np.array_equal(np.bincount(classes), np.full(len(factor.values), len(ds) // len(factor.values)))

    def test_grid_is_covered_exactly_once(self, ds):
        if ds.factor_classes is None:
            pytest.skip("not a grid dataset")
        shape = tuple(len(f.values) for f in ds.spec.factors)
        flat = np.ravel_multi_index(tuple(ds.factor_classes.T), shape)
        assert np.array_equal(np.sort(flat), np.arange(np.prod(shape)))

    def test_splits_are_disjoint_and_in_range(self, ds):
        assert ds.split_names
        seen = np.zeros(len(ds), int)
        for name in ds.split_names:
            idx = ds.split_indices(name)
            assert idx.dtype == np.int64 and np.all(np.diff(idx) > 0) and idx.min() >= 0 and idx.max() < len(ds)
            seen[idx] += 1
        assert seen.max() == 1

    def test_file_verifies_and_matches_a_fresh_render(self, ds):
        assert verify(ds.path).ok
        rows = np.random.default_rng(0).choice(len(ds), 32, replace=False)
        gen = get(ds.spec.generator, ds.spec.params)
        assert np.array_equal(gen.render(ds.factors[rows]), ds.images[rows])
        assert np.array_equal(gen.render(ds.factors[rows]), gen.render(ds.factors[rows]))

    def test_batch_size_and_shards_do_not_change_the_data(self, ds, tmp_path):
        """A file written in odd-sized batches, and one merged from three shards, hold the same data."""
        gen = get(ds.spec.generator, ds.spec.params)
        n = None if gen.is_grid else len(ds)
        odd = write_dataset(gen, tmp_path / "odd.h5", seed=ds.spec.seed, n=n, batch_size=97, progress=False)
        for i in range(3):
            write_dataset(gen, tmp_path / "merged.h5", seed=ds.spec.seed, n=n, shard=Shard(i, 3), progress=False)
        merged = merge_shards(tmp_path / "merged.h5", progress=False)
        with load(odd) as a, load(merged) as b:
            assert a.manifest["sha256"] == b.manifest["sha256"] == ds.manifest["sha256"]
