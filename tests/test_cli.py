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


@pytest.mark.parametrize("argv, message", [
    (["generate", "cube", "--out", "{tmp}/x.h5"], "unknown dataset 'cube'"),
    (["generate", "square", "--out", "{tmp}/x.h5", "--param", "colour=red"], "unknown parameter 'colour'"),
    (["generate", "square", "--out", "{tmp}/x.h5", "--param", "side=big"], "'side' expects int"),
    (["generate", "square", "--out", "{tmp}/x.h5", "--param", "side"], "--param expects key=value"),
    (["generate", "square", "--out", "{tmp}/x.h5", "--shard", "3/2"], "shard 3/2 is invalid"),
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
