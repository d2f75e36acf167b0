"""Writing, reading back, sharding, resuming and verifying dataset files."""

import hashlib
import json

import h5py
import numpy as np
import pytest

from factorbench.benchmark import load, verify
from factorbench.generators import (FactorbenchError, GenerationInterrupted, Shard, get, merge_shards,
                                    write_dataset)
from factorbench.generators import fileformat as ff


def _contents(path):
    with h5py.File(path, "r") as f:
        manifest = json.loads(f.attrs["manifest"])
        arrays = {k: f[k][:] for k in ("images", "factors")}
    return manifest, arrays


def test_round_trip_matches_the_generator(generated):
    path = generated("square")
    gen = get("square")
    spec = gen.spec()
    values, classes = gen.sample_factors(spec, 0, spec.n)
    with load(path) as ds:
        assert len(ds) == 4096 and ds.spec == spec
        assert np.array_equal(ds.factors, values) and np.array_equal(ds.factor_classes, classes)
        assert np.array_equal(ds.images[100:164], gen.render(values[100:164]))
        assert ds.manifest["sha256"]["images"] == ff.sha256_array(gen.render(values))
        assert ds.manifest["generator_version"] == gen.version and ds.manifest["spec_hash"] == spec.hash()
        assert ds.factor_names == ("vertical_shift", "horizontal_shift")


def test_storage_layout(generated):
    with h5py.File(generated("arrow"), "r") as f:
        images = f["images"]
        assert images.dtype == np.uint8 and images.shape == (4096, 64, 64, 3)
        assert images.chunks == (ff.CHUNK_ROWS, 64, 64, 3) and images.compression == ff.COMPRESSION
        assert f["factors"].dtype == np.float64 and f["factor_classes"].dtype == np.int64
        assert set(f["splits"]) == {"train", "validation", "test"}
        assert "rows_written" not in f.attrs and "row_start" not in f.attrs


def test_same_spec_and_seed_give_identical_data(tmp_path, toy):
    a = write_dataset(toy, tmp_path / "a.h5", seed=4, n=700, progress=False, batch_size=64)
    b = write_dataset(toy, tmp_path / "b.h5", seed=4, n=700, progress=False, batch_size=300)
    c = write_dataset(toy, tmp_path / "c.h5", seed=5, n=700, progress=False)
    (ma, xa), (mb, xb), (mc, _) = _contents(a), _contents(b), _contents(c)
    assert ma == mb  # batch size does not change the data
    assert all(xa[k].tobytes() == xb[k].tobytes() for k in xa)
    assert mc["sha256"]["factors"] != ma["sha256"]["factors"]
    assert "factor_classes" not in ma["sha256"]  # i.i.d. continuous factors have no classes


@pytest.mark.parametrize("count", [1, 3, 4])
def test_shards_merge_into_the_single_process_file(tmp_path, toy, count):
    single = write_dataset(toy, tmp_path / "single.h5", seed=1, n=1001, progress=False, batch_size=128)
    out = tmp_path / "merged.h5"
    for i in reversed(range(count)):
        write_dataset(toy, out, seed=1, n=1001, shard=f"{i}/{count}", progress=False, batch_size=100)
    with pytest.raises(FactorbenchError, match="incomplete"):
        load(Shard(0, count).path(out))
    merged = merge_shards(out, progress=False)
    (m1, x1), (m2, x2) = _contents(single), _contents(merged)
    assert m1 == m2
    assert all(np.array_equal(x1[k], x2[k]) for k in x1)
    assert verify(merged).ok


def test_merge_copies_the_shards_compressed_chunks_as_they_are(tmp_path, toy, monkeypatch):
    """Merging copies each image's stored chunk (no decoding and compressing again): the merged file holds
    the single-process file's chunk bytes, and the decoding writer is never called."""
    from factorbench.generators import writer

    single = write_dataset(toy, tmp_path / "single.h5", seed=1, n=700, progress=False)
    out = tmp_path / "merged.h5"
    for i in range(3):
        write_dataset(toy, out, seed=1, n=700, shard=f"{i}/3", progress=False, batch_size=64)

    def decoding_writer(*args, **kwargs):
        raise AssertionError("merge decoded and compressed the images again")
    monkeypatch.setattr(writer, "_write_rendered", decoding_writer)
    merged = merge_shards(out, progress=False, batch_size=100)
    with h5py.File(single, "r") as a, h5py.File(merged, "r") as b:
        assert a.attrs["manifest"] == b.attrs["manifest"]
        for row in (0, 233, 234, 466, 467, 699):  # both sides of each shard's boundary
            assert a["images"].id.read_direct_chunk((row, 0, 0, 0)) == b["images"].id.read_direct_chunk((row, 0, 0, 0))
    assert verify(merged).ok


def test_workers_write_the_single_process_file_and_keep_a_finished_shard(tmp_path, monkeypatch):
    """``workers=W`` renders W shards in fresh processes and joins them: the same content as one process, no
    shard left behind. A shard finished before (an interrupted run) is kept, not rendered again."""
    from factorbench.generators import writer

    gen = get("square")
    single = write_dataset(gen, tmp_path / "single.h5", progress=False)
    out = tmp_path / "parallel.h5"
    write_dataset(gen, out, shard="1/3", progress=False)
    with h5py.File(Shard(1, 3).path(out), "a") as f:
        f.attrs["kept"] = 1  # a mark the merge would not find on a shard rendered again
    seen = []

    def spying_merge(target, shards, **kwargs):
        with h5py.File(shards[1], "r") as f:
            seen.append((int(f.attrs.get("kept", 0)), kwargs["check_contents"]))
        return merge_shards(target, shards, **kwargs)
    monkeypatch.setattr(writer, "merge_shards", spying_merge)
    assert write_dataset(gen, out, progress=False, workers=3) == out
    assert write_dataset(gen, tmp_path / "fresh.h5", progress=False, workers=2) == tmp_path / "fresh.h5"
    # the kept shard is checked against its manifest before it is joined; shards just hashed are not again
    assert seen == [(1, True), (0, False)]
    (m1, x1), (m2, x2), (m3, _) = _contents(single), _contents(out), _contents(tmp_path / "fresh.h5")
    assert m1 == m2 == m3 and all(np.array_equal(x1[k], x2[k]) for k in x1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.h5", "parallel.h5", "single.h5"]
    assert verify(out).ok


def _hdf5_fletcher32(data: bytes) -> int:
    """HDF5's H5_checksum_fletcher32 (H5checksum.c), line by line: the oracle for the vectorised one."""
    sum1 = sum2 = 0
    words, i = len(data) // 2, 0
    while words:
        run = min(words, 360)
        words -= run
        for _ in range(run):
            sum1 += (data[i] << 8) | data[i + 1]
            i += 2
            sum2 += sum1
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    if len(data) % 2:
        sum1 += data[i] << 8
        sum2 += sum1
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
    sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    return (sum2 << 16) | sum1


def test_fletcher32_is_hdf5s_checksum_and_the_one_stored_with_each_image(tmp_path):
    rng = np.random.default_rng(0)
    cases = [bytes(rng.integers(0, 256, size=k, dtype=np.uint8)) for k in (1, 2, 3, 719, 720, 721, 1441, 4097)]
    cases += [b"\xff" * 1000, b"\x00" * 9 + b"\x01", b"\xff\xff" * 65535, b"\x00\x01" * 3, b"\x00" * 4]
    assert ff.fletcher32(cases).tolist() == [_hdf5_fletcher32(c) for c in cases]
    assert _hdf5_fletcher32(b"\xff\xff" * 65535) == 0xFFFFFFFF and _hdf5_fletcher32(b"\x00" * 4) == 0  # the folds
    with pytest.raises(ValueError, match="at least one byte"):
        ff.fletcher32([b"ab", b""])
    path = write_dataset(get("square"), tmp_path / "s.h5", progress=False)
    with h5py.File(path, "r") as f:
        stored = [f["images"].id.read_direct_chunk((r, 0, 0, 0))[1] for r in range(f["images"].shape[0])]
    assert ff.fletcher32([c[:-4] for c in stored]).tolist() == [int.from_bytes(c[-4:], "little") for c in stored]


def test_hashing_stored_image_chunks_equals_reading_them_through_hdf5(tmp_path, monkeypatch):
    """Images hashed from their stored chunks, checked and inflated in threads, give the hash HDF5's reads
    give; other storage (several rows a chunk) is read through HDF5. A chunk whose checksum fails is an
    error naming its rows, as through HDF5, even where it inflates: verification proves every chunk
    readable either way."""
    monkeypatch.setattr(ff, "HASH_THREADS", 3)
    path = write_dataset(get("square"), tmp_path / "s.h5", progress=False)
    with h5py.File(path, "r") as f, h5py.File(tmp_path / "other.h5", "w") as g:
        images = f["images"]
        assert ff._one_deflated_row_per_chunk(images)
        fast = ff._sha256_inflated(images, 100)
        assert fast == ff.sha256_rows(images) == ff.sha256_rows(images, inflate=False)
        assert fast == hashlib.sha256(images[:].tobytes()).hexdigest()
        g.create_dataset("images", data=images[:], chunks=(64, 64, 64, 1), compression="gzip")
        g.create_dataset("plain", data=images[:], chunks=(1, 64, 64, 3), compression="gzip")
        assert not ff._one_deflated_row_per_chunk(g["images"]) and ff._one_deflated_row_per_chunk(g["plain"])
        assert ff.sha256_rows(g["images"]) == ff._sha256_inflated(g["plain"], 7) == fast
    _flip_byte(path, "images", chunk=3)  # a flip that inflates to the same pixels, its fletcher32 sum off
    with h5py.File(path, "r") as f:
        with pytest.raises(ff._NotInflatable):
            ff._sha256_inflated(f["images"], 100)
        for inflate in (True, False):
            with pytest.raises(ff.UnreadableData, match="rows 0..1023 cannot be read"):
                ff.sha256_rows(f["images"], inflate=inflate)
    report = verify(path)
    assert not report.ok and "images: rows 0..1023 cannot be read" in " ".join(report.problems)


@pytest.mark.parametrize("workers, shard, message", [
    (0, None, "workers must be a whole number"), (True, None, "workers must be a whole number"),
    (2.0, None, "workers must be a whole number"), (2, "0/2", "not both")])
def test_bad_worker_counts_are_refused_before_anything_is_written(tmp_path, workers, shard, message):
    with pytest.raises(FactorbenchError, match=message):
        write_dataset(get("square"), tmp_path / "x.h5", progress=False, workers=workers, shard=shard)
    assert list(tmp_path.iterdir()) == []


def test_a_shard_of_another_dataset_is_never_joined(tmp_path):
    """A shard file of another seed where the workers would write theirs: an error that names it, nothing
    written; with ``force`` it is replaced and the file is this dataset."""
    gen = get("square")
    out = tmp_path / "x.h5"
    write_dataset(gen, out, shard="0/2", seed=1, progress=False)
    with pytest.raises(FactorbenchError, match=r"x.h5.shard-0-of-2 is not a shard of this dataset"):
        write_dataset(gen, out, progress=False, workers=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.h5.shard-0-of-2"]
    write_dataset(gen, out, progress=False, workers=2, force=True)
    single = write_dataset(gen, tmp_path / "single.h5", progress=False)
    assert _contents(out)[0] == _contents(single)[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["single.h5", "x.h5"]


def test_a_generator_that_cannot_travel_to_other_processes_is_refused(tmp_path):
    gen = get("square")
    object.__setattr__(gen, "unpicklable", lambda: None)
    with pytest.raises(FactorbenchError, match="cannot be rendered by several processes"):
        write_dataset(gen, tmp_path / "x.h5", progress=False, workers=2)
    assert list(tmp_path.iterdir()) == []


def test_merge_refuses_missing_or_foreign_shards(tmp_path, toy):
    out = tmp_path / "m.h5"
    with pytest.raises(FactorbenchError, match="no shards found"):
        merge_shards(out, progress=False)
    write_dataset(toy, out, seed=1, n=300, shard="0/3", progress=False)
    write_dataset(toy, out, seed=1, n=300, shard="2/3", progress=False)
    with pytest.raises(FactorbenchError, match=r"do not cover the dataset exactly once \(have 0/3, 2/3\)"):
        merge_shards(out, progress=False)
    write_dataset(toy, out, seed=2, n=300, shard="1/3", progress=False)
    with pytest.raises(FactorbenchError, match="another dataset spec"):
        merge_shards(out, progress=False)
    assert not out.exists() and not (tmp_path / "m.h5.partial").exists()


@pytest.mark.parametrize("text", ["3/2", "2/2", "-1/2", "1/0", "a/b", "1"])
def test_bad_shard_specs_are_rejected(text):
    with pytest.raises(FactorbenchError, match="shard"):
        Shard.parse(text)


class _Interrupting:
    """Wraps a generator and raises KeyboardInterrupt once ``after`` rows have been rendered."""

    def __init__(self, gen, after):
        self.gen, self.after, self.rendered = gen, after, 0

    def __getattr__(self, name):
        return getattr(self.gen, name)

    def render(self, factors):
        if self.rendered >= self.after:
            raise KeyboardInterrupt
        self.rendered += len(factors)
        return self.gen.render(factors)


def test_interrupted_generation_resumes_to_the_same_hashes(tmp_path, toy):
    reference = write_dataset(toy, tmp_path / "ref.h5", seed=3, n=1000, progress=False)
    out = tmp_path / "out.h5"
    flaky = _Interrupting(toy, after=300)
    with pytest.raises(GenerationInterrupted, match="run the same command again to resume"):
        write_dataset(flaky, out, seed=3, n=1000, progress=False, batch_size=100)
    partial = tmp_path / "out.h5.partial"
    assert not out.exists() and partial.exists()
    with h5py.File(partial, "r") as f:
        assert int(f.attrs["rows_written"]) == 300
    counting = _Interrupting(toy, after=10**9)
    write_dataset(counting, out, seed=3, n=1000, progress=False, batch_size=100)
    assert counting.rendered == 700  # resumed: only the missing rows were rendered
    assert not partial.exists()
    assert _contents(out)[0] == _contents(reference)[0]


def test_a_partial_file_of_another_job_or_a_broken_one_is_restarted(tmp_path, toy):
    out = tmp_path / "out.h5"
    with pytest.raises(GenerationInterrupted):
        write_dataset(_Interrupting(toy, after=200), out, seed=9, n=1000, progress=False, batch_size=100)
    counting = _Interrupting(toy, after=10**9)
    write_dataset(counting, out, seed=3, n=1000, progress=False, batch_size=100)  # another seed
    assert counting.rendered == 1000
    (tmp_path / "b.h5.partial").write_bytes(b"not hdf5 at all")
    write_dataset(toy, tmp_path / "b.h5", seed=3, n=1000, progress=False)
    assert _contents(tmp_path / "b.h5")[0] == _contents(out)[0]


def test_existing_output_needs_force_and_is_kept_on_failure(tmp_path, toy):
    out = tmp_path / "x.h5"
    write_dataset(toy, out, seed=1, n=100, progress=False)
    before = out.read_bytes()
    old_manifest = _contents(out)[0]
    with pytest.raises(FactorbenchError, match="already exists; pass --force"):
        write_dataset(toy, out, seed=2, n=100, progress=False)
    with pytest.raises(GenerationInterrupted):  # a failed --force run leaves the old file untouched
        write_dataset(_Interrupting(toy, after=0), out, seed=2, n=100, force=True, progress=False)
    assert out.read_bytes() == before
    write_dataset(toy, out, seed=2, n=100, force=True, progress=False)
    assert _contents(out)[0]["sha256"]["factors"] != old_manifest["sha256"]["factors"]
    assert load(out).spec.seed == 2


def test_unwritable_destinations(tmp_path, toy):
    with pytest.raises(FactorbenchError, match="does not exist"):
        write_dataset(toy, tmp_path / "missing" / "x.h5", n=10, progress=False)
    with pytest.raises(FactorbenchError, match="is a directory"):
        write_dataset(toy, tmp_path, n=10, progress=False)
    # folders nobody can write into, root included (root ignores permission bits, so the check creates a file)
    with pytest.raises(FactorbenchError, match="is not writable"):
        write_dataset(toy, "/proc/x.h5", n=10, progress=False)
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(FactorbenchError, match="is a file, not a directory"):
        write_dataset(toy, tmp_path / "a-file" / "x.h5", n=10, progress=False)
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"]


def _flip_byte(path, dataset, chunk=0):
    with h5py.File(path, "r") as f:
        ds = f[dataset]
        if ds.chunks:
            info = ds.id.get_chunk_info(chunk)
            offset = info.byte_offset + info.size // 2
        else:
            offset = ds.id.get_offset() + 8 * 37 + 3
    with open(path, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([byte[0] ^ 0x01]))


@pytest.mark.parametrize("dataset", ["images", "factors", "factor_classes", "splits/train"])
def test_verify_catches_a_flipped_byte(tmp_path, generated, dataset):
    path = tmp_path / "copy.h5"
    path.write_bytes(generated("square").read_bytes())
    assert verify(path).ok
    _flip_byte(path, dataset, chunk=3)
    report = verify(path)
    assert not report.ok
    assert any(p.startswith(dataset) for p in report.problems), report.problems


def test_corrupted_or_foreign_files_give_clear_errors(tmp_path, generated):
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"\x89HDF\r\n" + b"\x00" * 100)
    with pytest.raises(FactorbenchError, match="cannot be opened as an HDF5 file"):
        load(junk)
    assert not verify(junk).ok
    truncated = tmp_path / "truncated.h5"
    truncated.write_bytes(generated("square").read_bytes()[:50000])
    with pytest.raises(FactorbenchError, match="cannot be opened|corrupted"):
        load(truncated)
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["x"] = np.arange(3)
    with pytest.raises(FactorbenchError, match="not a factorbench dataset file"):
        load(other)
    assert "not a factorbench dataset" in verify(other).problems[0]
    with pytest.raises(FactorbenchError, match="no such file"):
        load(tmp_path / "absent.h5")
    corrupted = tmp_path / "corrupted.h5"
    corrupted.write_bytes(generated("square").read_bytes())
    _flip_byte(corrupted, "images", chunk=5)
    with pytest.raises(FactorbenchError, match="corrupted"):
        load(corrupted).images[5 * ff.CHUNK_ROWS]


def test_edited_spec_is_caught(tmp_path, generated):
    path = tmp_path / "copy.h5"
    path.write_bytes(generated("square").read_bytes())
    with h5py.File(path, "r+") as f:
        spec = json.loads(f.attrs["spec"])
        spec["seed"] = 99
        f.attrs["spec"] = json.dumps(spec)
    report = verify(path)
    assert not report.ok and any("spec" in p for p in report.problems)


def test_interrupted_finalisation_is_redone(tmp_path, toy, monkeypatch):
    reference = write_dataset(toy, tmp_path / "ref.h5", seed=3, n=500, progress=False)
    real = ff.compute_manifest

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ff, "compute_manifest", interrupted)
    out = tmp_path / "out.h5"
    with pytest.raises(GenerationInterrupted):
        write_dataset(toy, out, seed=3, n=500, progress=False)
    monkeypatch.setattr(ff, "compute_manifest", real)
    counting = _Interrupting(toy, after=10**9)
    write_dataset(counting, out, seed=3, n=500, progress=False)
    assert counting.rendered == 0  # all rows were written: only the splits and the manifest were redone
    assert _contents(out)[0] == _contents(reference)[0]


def test_a_partial_file_in_use_by_another_process_is_left_alone(tmp_path, toy):
    import subprocess
    import sys

    partial = tmp_path / "x.h5.partial"
    holder = subprocess.Popen([sys.executable, "-c", "import h5py, sys, time; f = h5py.File(sys.argv[1], 'w'); "
                               "f.flush(); print('ready', flush=True); time.sleep(30)", str(partial)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(FactorbenchError, match="being written by another process"):
            write_dataset(toy, tmp_path / "x.h5", n=10, progress=False)
        assert partial.exists()
    finally:
        holder.kill()
        holder.wait()


def test_package_version_is_the_checkouts_not_a_stale_egg_info(tmp_path):
    """Run from a folder holding a stale factorbench.egg-info (which importlib.metadata finds first), the
    version recorded in files and results is still the checkout's pyproject.toml version."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    stale = tmp_path / "factorbench.egg-info"
    stale.mkdir()
    (stale / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: factorbench\nVersion: 0.0.9\n")
    code = ("from importlib import metadata; from factorbench.generators.fileformat import package_version; "
            "print(metadata.version('factorbench'), package_version())")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', pyproject, re.MULTILINE).group(1)
    assert out.stdout.split() == ["0.0.9", version]
