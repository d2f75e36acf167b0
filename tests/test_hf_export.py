"""Export to Hugging Face ``datasets``: every row's image, factor values, grid classes and file index as
read from the factorbench file; splits; grey images; Parquet round trip."""

from __future__ import annotations

import numpy as np
import pytest

datasets = pytest.importorskip("datasets")

from factorbench.benchmark import load  # noqa: E402
from factorbench.generators import write_dataset  # noqa: E402


def test_a_split_exports_row_for_row(generated, tmp_path):
    with load(generated("square")) as ds:
        test = ds.split("test")
        hf = ds.to_hf("test", cache_dir=tmp_path / "hf")
        assert len(hf) == len(test) and hf.column_names == ["image", "index", "vertical_shift", "horizontal_shift",
                                                             "vertical_shift_class", "horizontal_shift_class"]
        assert np.array_equal(hf["index"][:], test.indices)
        for i in (0, 1, len(test) - 1):
            row, k = hf[i], int(test.indices[i])
            assert np.array_equal(np.asarray(row["image"]), ds.images[k])
            assert row["vertical_shift"] == np.float32(ds.factors[k, 0])
            assert row["horizontal_shift_class"] == ds.factor_classes[k, 1]
        hf.to_parquet(str(tmp_path / "test.parquet"))
        back = datasets.Dataset.from_parquet(str(tmp_path / "test.parquet"), cache_dir=str(tmp_path / "hf2"))
        assert len(back) == len(test) and back[5]["index"] == hf[5]["index"]


def test_grey_images_without_a_grid(toy, tmp_path):
    path = write_dataset(toy, tmp_path / "toy.h5", n=40, progress=False)
    with load(path) as ds:
        hf = ds.to_hf(cache_dir=tmp_path / "hf")
        assert len(hf) == 40 and not any(c.endswith("_class") for c in hf.column_names)
        assert np.array_equal(np.asarray(hf[7]["image"]), ds.images[7][..., 0])
        assert np.allclose([hf[7][name] for name in ds.factor_names], ds.factors[7], rtol=1e-6)
