"""The data cache: a file changed since its last verification is verified again, results carry the
hashes of the data read, and a bad cache folder gets a clear error."""

from __future__ import annotations

import json

import h5py
import pytest

from factorbench.benchmark.cache import DataChanged, prepare_dataset, verified_hashes
from factorbench.benchmark.evaluation import evaluate
from factorbench.benchmark.protocols import DatasetRef, Headline, MetricCall, Protocol
from factorbench.benchmark.protocols.catalog import REFERENCE_IMAGES
from factorbench.generators import fileformat as ff

TINY = Protocol("square-tiny-v1", 1, "test protocol", DatasetRef("square"),
                (MetricCall("mig", "mig", {"eval": "all"}),), Headline("mig", "score"),
                reference_images=REFERENCE_IMAGES["square"])


def _rewrite_first_image(path, *, update_manifest: bool) -> str:
    """Write other pixels into image 0 in place (a valid HDF5 file); returns the new images hash."""
    with h5py.File(path, "r+") as f:
        f["images"][0] = 255 - f["images"][0]
        if update_manifest:  # a consistent file of other data: its own manifest agrees
            manifest = json.loads(f.attrs["manifest"])
            manifest["sha256"] = ff.content_hashes(f)
            ff.store_manifest(f, manifest)
        return ff.sha256_rows(f["images"])


def test_a_file_rewritten_in_place_is_verified_again_and_refused(tmp_path):
    path = prepare_dataset(TINY.dataset, directory=tmp_path, progress=False)
    stamp = path.with_name(path.name + ".verified.json")
    assert json.loads(stamp.read_text())["sha256"]["images"] == REFERENCE_IMAGES["square"]
    _rewrite_first_image(path, update_manifest=False)
    with pytest.raises(DataChanged, match="failed verification.*images: sha256"):
        prepare_dataset(TINY.dataset, directory=tmp_path, progress=False)
    with pytest.raises(DataChanged):
        evaluate(TINY, "ideal", data_dir=tmp_path, progress=False)


def test_a_dataset_prepared_by_several_processes_is_the_pinned_one(tmp_path):
    """``workers`` generate the cache's copy in shards: the pinned images, every split, no shard left."""
    one = prepare_dataset(TINY.dataset, directory=tmp_path / "one", progress=False)
    two = prepare_dataset(TINY.dataset, directory=tmp_path / "two", progress=False, workers=2)
    assert one.name == two.name
    assert verified_hashes(two) == verified_hashes(one)
    assert verified_hashes(two)["images"] == REFERENCE_IMAGES["square"]
    assert sorted(p.name for p in two.parent.iterdir() if not p.name.startswith(".")) == \
        [two.name, two.name + ".verified.json"]


def test_results_carry_the_hashes_of_the_data_read(tmp_path):
    before = evaluate(TINY, "ideal", data_dir=tmp_path, progress=False)
    assert before.dataset["sha256"]["images"] == REFERENCE_IMAGES["square"]
    assert before.dataset["same_images_as_reference"] is True
    path = prepare_dataset(TINY.dataset, directory=tmp_path, progress=False)
    new = _rewrite_first_image(path, update_manifest=True)
    after = evaluate(TINY, "ideal", data_dir=tmp_path, progress=False)
    assert after.dataset["sha256"]["images"] == new != REFERENCE_IMAGES["square"]
    assert after.dataset["same_images_as_reference"] is False
    assert after.dataset["reference_images_sha256"] == REFERENCE_IMAGES["square"]
    assert "differ from the copy the reference rows were scored on" in after.summary()


def test_an_unchanged_file_is_not_verified_again(tmp_path, monkeypatch):
    path = prepare_dataset(TINY.dataset, directory=tmp_path, progress=False)
    import factorbench.benchmark.cache as cache

    def fail(_path):
        raise AssertionError("verified again although unchanged")

    monkeypatch.setattr(cache, "verify", fail)
    assert verified_hashes(path)["images"] == REFERENCE_IMAGES["square"]


def test_results_hold_no_local_path(tmp_path):
    result = evaluate(TINY, "ideal", data_dir=tmp_path, progress=False)
    assert "path" not in result.dataset
    assert str(tmp_path) not in result.to_json()


@pytest.mark.parametrize("where, message", [("file", "is a file, not a directory"),
                                            ("under-file", "cannot create"),
                                            ("proc", "cannot create")])
def test_a_bad_cache_folder_is_a_clear_error(tmp_path, capsys, monkeypatch, where, message):
    from factorbench.benchmark.cli import main

    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    target = {"file": a_file, "under-file": a_file / "cache", "proc": "/proc/factorbench-cache"}[where]
    monkeypatch.setenv("FACTORBENCH_DATA", str(target))
    code = main(["evaluate", "square-lsbd-v1", "--encoder", "ideal", "--out", str(tmp_path / "r.json"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "FACTORBENCH_DATA" in err
    assert not (tmp_path / "r.json").exists() and a_file.read_text() == "x"


def test_a_cached_file_holds_the_splits_of_every_protocol_that_shares_it(tmp_path):
    """Built for one protocol, the file already holds the correlated splits of the others on the same data,
    so they read it without writing (and so can run beside a process that reads it)."""
    import subprocess
    import sys

    from factorbench.benchmark.cache import file_state
    from factorbench.benchmark.protocols import get_protocol

    path = prepare_dataset(get_protocol("square-lsbd-v1").dataset, directory=tmp_path, progress=False)
    with h5py.File(path, "r") as f:
        assert {"correlated-single", "correlated-confounded"} <= set(f["splits"])
    assert not list(tmp_path.glob("*.building*"))
    before = file_state(path)
    reader = subprocess.Popen([sys.executable, "-c", "import h5py, sys, time\nf = h5py.File(sys.argv[1], 'r')\n"
                               "print('open', flush=True)\ntime.sleep(60)", str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "open"
        again = prepare_dataset(get_protocol("square-dependent-v1").dataset, directory=tmp_path, progress=False)
    finally:
        reader.kill()
        reader.wait()
    assert again == path and file_state(path) == before
