"""The command line: each subcommand, and clear errors that leave nothing behind."""

import json

import h5py
import numpy as np
import pytest

from factorbench.benchmark.cli import main
from factorbench.generators import list_datasets


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_and_info(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == sorted(list_datasets())
    code, out, _ = run(capsys, "info", "square")
    assert code == 0
    for text in ("version 1.0.0", "4096 x 64 x 64 x 3", "vertical_shift", "side = 4", "@inproceedings{tonnaer2022"):
        assert text in out
    code, out, _ = run(capsys, "info", "square", "--param", "side=8")
    assert "side = 8" in out


def test_generate_verify_show_info(tmp_path, capsys):
    out = tmp_path / "sq.h5"
    code, stdout, _ = run(capsys, "generate", "square", "--out", str(out), "--param", "side=6", "--seed", "2",
                          "--quiet")
    assert code == 0 and f"wrote {out}" in stdout
    with h5py.File(out, "r") as f:
        assert json.loads(f.attrs["spec"])["params"] == {"side": 6}
        assert (f["images"][0, ..., 0] == 255).sum() == 36
    code, stdout, _ = run(capsys, "verify", str(out))
    assert code == 0 and "OK" in stdout
    code, stdout, _ = run(capsys, "verify", str(out), "--json")
    assert json.loads(stdout)["ok"] is True
    code, stdout, _ = run(capsys, "info", str(out))
    assert code == 0 and "seed 2" in stdout and "train" in stdout
    png = tmp_path / "sq.png"
    code, _, _ = run(capsys, "show", str(out), "--out", str(png), "--per-factor", "5")
    assert code == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, err = run(capsys, "show", str(out), "--out", str(png))
    assert code == 2 and "already exists" in err


def test_shard_and_merge_from_the_cli(tmp_path, capsys):
    single, merged = tmp_path / "a.h5", tmp_path / "b.h5"
    assert run(capsys, "generate", "arrow", "--out", str(single), "--quiet")[0] == 0
    for i in range(3):
        assert run(capsys, "generate", "arrow", "--out", str(merged), "--shard", f"{i}/3", "--quiet")[0] == 0
    assert run(capsys, "merge", str(merged), "--quiet")[0] == 0
    with h5py.File(single, "r") as a, h5py.File(merged, "r") as b:
        assert a.attrs["manifest"] == b.attrs["manifest"]
    workers = tmp_path / "c.h5"
    assert run(capsys, "generate", "arrow", "--out", str(workers), "--workers", "2", "--quiet")[0] == 0
    with h5py.File(single, "r") as a, h5py.File(workers, "r") as c:
        assert a.attrs["manifest"] == c.attrs["manifest"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.h5", "b.h5", "c.h5"]
                                                                 + [f"b.h5.shard-{i}-of-3" for i in range(3)])


@pytest.mark.parametrize("argv, message", [
    (["generate", "cube", "--out", "{tmp}/x.h5"], "unknown dataset 'cube'"),
    (["generate", "square", "--out", "{tmp}/x.h5", "--param", "colour=red"], "unknown parameter 'colour'"),
    (["generate", "square", "--out", "{tmp}/x.h5", "--param", "side=big"], "'side' expects int"),
    (["generate", "square", "--out", "{tmp}/x.h5", "--param", "side"], "--param expects key=value"),
    (["generate", "square", "--out", "{tmp}/x.h5", "--shard", "3/2"], "shard 3/2 is invalid"),
    (["generate", "square", "--out", "{tmp}/x.h5", "--workers", "0"], "workers must be a whole number"),
    (["generate", "square", "--out", "{tmp}/x.h5", "--workers", "2", "--shard", "0/2"], "not both"),
    (["generate", "square", "--out", "{tmp}/x.h5", "--n", "10"], "full grid of 4096"),
    (["generate", "square", "--out", "{tmp}/nodir/x.h5"], "does not exist"),
    (["generate", "square", "--out", "{tmp}/x.h5", "--seed", "-1"], "non-negative"),
    (["verify", "{tmp}/absent.h5"], "no such file"),
    (["show", "{tmp}/absent.h5", "--out", "{tmp}/x.png"], "no such file"),
    (["info", "cube"], "unknown dataset"),
    (["merge", "{tmp}/x.h5"], "no shards found"),
])
def test_bad_input_gives_a_clear_error_and_leaves_nothing(tmp_path, capsys, argv, message):
    argv = [a.format(tmp=tmp_path) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code in (1, 2)
    assert message in (err + out)
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_existing_output_without_force(tmp_path, capsys):
    out = tmp_path / "x.h5"
    assert run(capsys, "generate", "square", "--out", str(out), "--quiet")[0] == 0
    before = out.read_bytes()
    code, _, err = run(capsys, "generate", "square", "--out", str(out), "--seed", "1", "--quiet")
    assert code == 2 and "already exists; pass --force" in err and out.read_bytes() == before
    assert run(capsys, "generate", "square", "--out", str(out), "--seed", "1", "--force", "--quiet")[0] == 0
    assert out.read_bytes() != before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.h5"]


def test_verify_exit_status_reports_a_corrupted_file(tmp_path, capsys):
    out = tmp_path / "x.h5"
    run(capsys, "generate", "square", "--out", str(out), "--quiet")
    with h5py.File(out, "r+") as f:
        f["factors"][0, 0] = np.float64(1.0)
    code, stdout, _ = run(capsys, "verify", str(out))
    assert code == 1 and "FAILED" in stdout and "factors: sha256" in stdout


def test_run_time_options_are_checked(tmp_path, capsys):
    code, _, err = run(capsys, "generate", "square", "--out", str(tmp_path / "x.h5"), "--backend", "cpu")
    assert code == 2 and "square takes no --backend" in err
    code, _, err = run(capsys, "generate", "airplane", "--out", str(tmp_path / "x.h5"), "--source", "x")
    assert code == 2 and "airplane takes no --source (its options: --backend)" in err
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- clear errors before any work


@pytest.fixture
def fresh_cache(tmp_path_factory, monkeypatch):
    """A cache folder that must stay absent: nothing is generated before the checks."""
    cache = tmp_path_factory.mktemp("caches") / "cache"
    monkeypatch.setenv("FACTORBENCH_DATA", str(cache))
    return cache


@pytest.mark.parametrize("argv, message", [
    (["generate", "teapot", "--out", "{tmp}/t.h5", "--n", "1000000000000"], "needs about"),
    (["generate", "arrow", "--out", "{tmp}/a.h5", "--shard", "0/5000"], "at most 4,096 shards"),
    (["generate", "square", "--out", "/proc/x.h5"], "is not writable"),
    (["generate", "square", "--out", "{tmp}/afile/x.h5"], "is a file, not a directory"),
    (["show", "{square}", "--out", "/proc/x.png"], "is not writable"),
    (["show", "{square}", "--out", "{tmp}/adir"], "is a directory"),
    (["show", "{square}", "--out", "{tmp}/x.png", "--per-factor", "100000"], "between 2 and 64"),
    (["info", "{tmp}/missing.h5"], "no such file"),
])
def test_more_bad_input_gives_a_clear_error_and_leaves_nothing(tmp_path, capsys, generated, argv, message):
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    argv = [a.format(tmp=tmp_path, square=generated("square")) for a in argv]
    for _ in range(2):   # and again: no leftover changes the answer
        code, out, err = run(capsys, *argv)
        assert code == 2 and message in err and "Traceback" not in err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile"]
        assert list((tmp_path / "adir").iterdir()) == []


def test_generate_refuses_a_file_that_does_not_fit_on_the_disk(tmp_path, capsys, monkeypatch):
    from types import SimpleNamespace

    import factorbench.generators.outputs as outputs
    from factorbench.generators import get
    from factorbench.generators.writer import _row_bytes

    real = outputs.shutil.disk_usage
    monkeypatch.setattr(outputs.shutil, "disk_usage", lambda path: SimpleNamespace(free=100_000))
    code, _, err = run(capsys, "generate", "arrow", "--out", str(tmp_path / "a.h5"), "--quiet")
    assert code == 2 and "needs about" in err and "has 100.0 KB free" in err
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(outputs.shutil, "disk_usage", real)
    assert run(capsys, "generate", "arrow", "--out", str(tmp_path / "a.h5"), "--quiet")[0] == 0
    gen = get("arrow")
    spec = gen.spec()
    values, classes = gen.sample_factors(spec, 0, 512)
    estimate = _row_bytes(values, classes, gen.render(values)) * spec.n
    assert 0.5 < estimate / (tmp_path / "a.h5").stat().st_size < 2.0   # a fair estimate, not a bound


def test_merge_names_a_corrupted_shard(tmp_path, capsys):
    out = tmp_path / "a.h5"
    for i in range(2):
        assert run(capsys, "generate", "arrow", "--out", str(out), "--shard", f"{i}/2", "--quiet")[0] == 0
    shard = tmp_path / "a.h5.shard-1-of-2"
    with h5py.File(shard, "r") as f:
        offset = f["images"].id.get_chunk_info(5).byte_offset
    data = bytearray(shard.read_bytes())
    data[offset + 20] ^= 0xFF
    shard.write_bytes(bytes(data))
    code, _, err = run(capsys, "merge", str(out), "--quiet")
    assert code == 2 and f"shard {shard} is corrupted" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.h5.shard-0-of-2", "a.h5.shard-1-of-2"]


def test_tuple_parameters_accept_what_info_prints(capsys):
    code, out, _ = run(capsys, "info", "teapot", "--param", "background=(1.0, 0.5, 0.0)")
    assert code == 0 and "background = (1.0, 0.5, 0.0)" in out
    code, out, _ = run(capsys, "info", "teapot", "--param", "background=[1, 0.5, 0]")
    assert code == 0 and "background = (1.0, 0.5, 0.0)" in out


@pytest.mark.parametrize("extra, message", [
    (["--out", "{tmp}/adir"], "is a directory"),
    (["--out", "{tmp}/adir", "--force"], "is a directory"),
    (["--out", "/proc/r.json"], "is not writable"),
    (["--out", "{tmp}/afile/r.json"], "is a file, not a directory"),
    (["--out", "{tmp}/afile"], "already exists"),
    (["--plots", "{tmp}/afile"], "--plots {tmp}/afile is a file"),
    (["--plots", "/proc/plots"], "is not writable"),
    (["--plots", "{tmp}/afile/plots"], "is a file, not a directory"),
    (["--only", "nonesuch"], "has no metric 'nonesuch'"),
])
def test_evaluate_checks_its_outputs_before_any_work(tmp_path, capsys, fresh_cache, extra, message):
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    extra = [a.format(tmp=tmp_path) for a in extra]
    if "--out" not in extra:
        extra += ["--out", str(tmp_path / "r.json")]
    code, _, err = run(capsys, "evaluate", "square-lsbd-v1", "--encoder", "ideal", "--quiet", *extra)
    assert code == 2 and message.format(tmp=tmp_path) in err and "Traceback" not in err
    assert not fresh_cache.exists()   # checked before the data were generated
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile"] and not any((tmp_path / "adir").iterdir())
    assert (tmp_path / "afile").read_text() == "x"


def _text_codes(d):
    (d / "codes.csv").write_text("0.1,0.2\n0.3,0.4\n")
    return d / "codes.csv"


def _both(d):
    np.savez(d / "codes.npz", codes=np.zeros((4096, 2)), mu=np.zeros((4096, 2)), logvar=np.zeros((4096, 2)))
    return d / "codes.npz"


def _npy(array):
    def make(d):
        np.save(d / "codes.npy", array)
        return d / "codes.npy"
    return make


@pytest.mark.parametrize("protocol, make, message", [
    ("teapot-dci-v1", _npy(np.zeros(200_000)), "the codes given have shape (200000,); give an array of shape (N, D)"),
    ("square-lsbd-v1", _text_codes, "is a text (e.g. CSV) file, not a numpy .npy or .npz file"),
    ("square-lsbd-v1", _both, "holds both 'codes' and ['logvar', 'mu']: which should be scored?"),
    ("square-lsbd-v1", _npy(np.zeros((10, 4))), "have 10 rows, but the protocol's dataset has 4096 images"),
    ("square-lsbd-v1", _npy(np.array([["a"]] * 4096)), "have dtype <U1"),
    ("square-lsbd-v1", _npy(np.full((4096, 2), np.nan)), "contain NaN or inf"),
    ("square-lsbd-v1", lambda d: d / "absent.npy", "cannot read it"),
])
def test_codes_are_checked_before_any_data_is_generated(tmp_path, capsys, fresh_cache, protocol, make, message):
    path = make(tmp_path)
    code, _, err = run(capsys, "evaluate", protocol, "--codes", str(path), "--out", str(tmp_path / "r.json"))
    assert code == 2 and message in err and "batch" not in err and "pickled" not in err
    assert not fresh_cache.exists() and not (tmp_path / "r.json").exists()


def test_encoder_module_is_imported_from_the_current_directory(tmp_path, capsys, monkeypatch, fresh_cache):
    """The README's `--encoder mymodels.enc:encode`, run from the folder holding mymodels/."""
    import sys

    from factorbench.benchmark.results import load_result

    (tmp_path / "mymodels").mkdir()
    (tmp_path / "mymodels" / "enc.py").write_text(
        "def encode(images):\n    return images.reshape(len(images), -1)[:, :3].astype(float)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    for name in [m for m in sys.modules if m.startswith("mymodels")]:
        monkeypatch.delitem(sys.modules, name)
    code, _, err = run(capsys, "evaluate", "square-lsbd-v1", "--encoder", "mymodels.enc:encode", "--quiet",
                       "--only", "mig")
    assert code == 0, err
    assert load_result(tmp_path / "square-lsbd-v1.mymodels.enc.encode.json").code_dim == 3


def test_generate_without_out_names_the_file_after_the_dataset_and_its_parameters(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, stdout, _ = run(capsys, "generate", "square", "--quiet")
    assert code == 0 and (tmp_path / "square.h5").exists()
    code, stdout, _ = run(capsys, "generate", "square", "--param", "side=8", "--quiet")
    assert code == 0 and "wrote square-side-8.h5" in stdout
    code, _, err = run(capsys, "generate", "square", "--quiet")
    assert code == 2 and "square.h5 already exists" in err


def test_eval_rows_writes_the_rows_a_protocol_scores(tmp_path, capsys, fresh_cache):
    out = tmp_path / "rows.npy"
    code, stdout, _ = run(capsys, "protocols", "square-lsbd-v1", "--eval-rows", str(out))
    assert code == 0 and np.array_equal(np.load(out), np.arange(4096)) and "4096 file rows" in stdout
    code, _, err = run(capsys, "protocols", "square-lsbd-v1", "--eval-rows", str(tmp_path / "rows.txt"))
    assert code == 2 and ".npy" in err
    code, _, err = run(capsys, "protocols", "--eval-rows", str(out))
    assert code == 2 and "need a protocol name" in err


@pytest.mark.parametrize("argv, message", [
    (["generate", "dsprites", "--param", "variant=colour"], "variant must be one of plain, color, noise"),
    (["generate", "shapes3d", "--param", "step=2,2"], "2 strides given but the dataset has 6 factors"),
    (["generate", "mpi3d-toy", "--param", "step=1,1,1,1,1,40,1"], "stride 40 leaves 1 value of factor"),
])
def test_standard_sets_refuse_bad_parameters_before_any_work(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_codes_of_another_set_are_refused_before_its_data_is_generated(tmp_path, capsys, fresh_cache):
    codes = tmp_path / "shapes3d-codes.npy"
    np.save(codes, np.zeros((16_000, 10)))  # one row per image of shapes3d's evaluation sub-grid
    code, _, err = run(capsys, "evaluate", "dsprites-dci-v1", "--codes", str(codes), "--out", str(tmp_path / "r.json"))
    assert code == 2 and "737280 images" in err and "evaluation sub-grid (11520 rows" in err
    assert not fresh_cache.exists()


def test_a_module_command_turns_a_user_error_into_exit_status_2(capsys):
    from factorbench.generators.errors import FactorbenchError, exits_2_on_user_error

    @exits_2_on_user_error
    def command(fail: bool) -> int:
        """doc"""
        if fail:
            raise FactorbenchError("the file is missing; give --file")
        return 1

    assert command.__doc__ == "doc" and command(False) == 1
    assert command(True) == 2
    assert capsys.readouterr().err == "error: the file is missing; give --file\n"

    @exits_2_on_user_error
    def broken() -> int:
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):  # a program error keeps its traceback
        broken()


@pytest.mark.parametrize("spec, message", [
    ("/no/such/run", "for a trained run write run:/no/such/run"),
    ("mymodels", "run:RUN_DIR or module:function"),
    ("my/models:encode", "run:RUN_DIR or module:function"),
    ("run:", "give the run's directory"),
])
def test_a_malformed_encoder_spec_is_named_before_a_file_name_is_made_from_it(tmp_path, capsys, monkeypatch,
                                                                            fresh_cache, spec, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "evaluate", "square-lsbd-v1", "--encoder", spec, "--quiet")
    assert code == 2 and message in err and "cannot write" not in err, err
    assert list(tmp_path.iterdir()) == [] and not fresh_cache.exists()
