"""``factorbench.load(name)``: a dataset by name (the protocols' cached copy, generated on first use), by
protocol name, or by file; clear errors for names that are neither."""

from __future__ import annotations

import numpy as np
import pytest

import factorbench
from factorbench.benchmark.cache import prepare_dataset
from factorbench.benchmark.protocols import get_protocol
from factorbench.generators.errors import FactorbenchError
from factorbench.generators.fileformat import package_version


def test_load_by_dataset_name_protocol_name_and_file(tmp_path, capsys):
    with factorbench.load("square", data_dir=tmp_path) as ds:  # generated on first use
        assert ds.spec.generator == "square" and len(ds) == 4096
        path, first = ds.path, np.array(ds.images[:8])
        assert {"train", "test", "correlated-single"} <= set(ds.split_names)  # the protocols' splits
    assert "generating square" in capsys.readouterr().err  # status on stderr
    expected = prepare_dataset(get_protocol("square-lsbd-v1").dataset, directory=tmp_path, progress=False)
    assert str(path) == str(expected)
    with factorbench.load("square-dependent-v1", data_dir=tmp_path, progress=False) as ds:  # reused, not regenerated
        assert str(ds.path) == str(expected)
    assert capsys.readouterr() == ("", "")
    with factorbench.load(expected) as ds:
        assert np.array_equal(ds.images[:8], first)
    assert factorbench.__version__ == package_version()


@pytest.mark.parametrize("name, kwargs, message", [
    ("sqare", {}, "no dataset or protocol named 'sqare'; datasets: airplane, arrow"),
    ("square-lsbd-v1", {"params": {"size": 32}}, "is a protocol: its dataset's parameters are fixed"),
    ("dsprites", {"params": {"variant": "sepia"}}, "no protocol scores dsprites with params {'variant': 'sepia'}"),
    ("data/square.h5", {"params": {"a": 1}}, "is a file: params and source belong to a dataset name"),
])
def test_names_that_are_not_datasets_are_refused_before_any_work(tmp_path, name, kwargs, message):
    with pytest.raises(FactorbenchError, match=message.replace("(", r"\(").replace("{", r"\{")):
        factorbench.load(name, data_dir=tmp_path, **kwargs)
    assert not any(tmp_path.iterdir())
