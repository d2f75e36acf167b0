"""Files are written whole or not at all, and an experiment command checks its outputs before any work."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from factorbench.generators.errors import FactorbenchError  # noqa: E402
from factorbench.generators.outputs import (  # noqa: E402
    check_new_files,
    save_figure,
    temporaries_of,
    write_atomically,
)


def test_write_atomically_round_trips_text_and_bytes_and_creates_folders(tmp_path):
    text = write_atomically(tmp_path / "a" / "b" / "x.json", '{"é": 1}')
    assert text.read_text(encoding="utf-8") == '{"é": 1}'
    assert write_atomically(tmp_path / "y.bin", b"\x00\xff").read_bytes() == b"\x00\xff"
    write_atomically(text, "replaced")
    assert text.read_text() == "replaced"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["x.json", "y.bin"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "x.json"
    path.write_text("old")

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(path, "new" * 1000)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_temporaries_of_finds_what_a_killed_writer_left_and_nothing_else(tmp_path):
    path = tmp_path / "seed[0].json"  # glob characters in the name are taken literally
    left = [tmp_path / ".seed[0].json.4242.tmp", tmp_path / ".seed[0].json.77.tmp"]
    for p in [*left, tmp_path / ".seed1.json.4242.tmp", tmp_path / "seed[0].json", tmp_path / ".seed0.json.1.tmp"]:
        p.write_text("")
    assert temporaries_of(path) == sorted(left)
    assert temporaries_of(tmp_path / "other.json") == []


def test_save_figure_writes_a_png_by_the_target_suffix_and_closes_the_figure(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    path = save_figure(fig, tmp_path / "f.png", dpi=50)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not plt.fignum_exists(fig.number)
    fig, _ = plt.subplots()
    assert save_figure(fig, tmp_path / "f.pdf").read_bytes()[:5] == b"%PDF-"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.pdf", "f.png"]


def test_an_interrupted_figure_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "f.png"
    path.write_bytes(b"old")
    fig, _ = plt.subplots()

    def interrupted(target, **kwargs):  # half a file, then Ctrl-C
        open(target, "wb").write(b"\x89PNG half")
        raise KeyboardInterrupt

    monkeypatch.setattr(fig, "savefig", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_figure(fig, path)
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["f.png"]
    assert not plt.fignum_exists(fig.number)


def test_check_new_files_names_what_exists(tmp_path):
    paths = [tmp_path / f"{i}.png" for i in range(5)]
    check_new_files(paths, force=False)  # none exists
    for p in paths:
        p.write_bytes(b"x")
    check_new_files(paths, force=True)
    with pytest.raises(FactorbenchError, match=r"0.png, .*2.png, \.\.\. already exist; pass --force"):
        check_new_files(paths, force=False)
    with pytest.raises(FactorbenchError, match=r"1.png already exists; or elsewhere$"):
        check_new_files(paths[1:2], force=False, advice="or elsewhere")


# --------------------------------------------------------------------------- the experiment commands


def _no_work(*args, **kwargs):
    raise AssertionError("the command started its work before checking its outputs")


def test_meta_evaluation_checks_its_plot_before_the_bootstrap(tmp_path, capsys, monkeypatch):
    from factorbench.benchmark.experiments import metric_meta_evaluation as module

    monkeypatch.setattr(module, "meta_evaluate_protocol", _no_work)
    assert module.main(["square-dependent-v1", "--plot", str(tmp_path / "missing" / "fig.png")]) == 2
    assert "does not exist" in capsys.readouterr().err
    existing = tmp_path / "fig.png"
    existing.write_bytes(b"mine")
    assert module.main(["square-dependent-v1", "--plot", str(existing)]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err and existing.read_bytes() == b"mine"
    monkeypatch.undo()
    assert module.main(["square-dependent-v1", "--n-boot", "10", "--plot", str(existing), "--force"]) == 0
    assert existing.read_bytes()[:4] == b"\x89PNG"


def test_do_tran_comparison_checks_its_figures_before_any_work(tmp_path, capsys, monkeypatch):
    from factorbench.benchmark.experiments import do_tran_comparison as module

    monkeypatch.setattr(module, "settings_of", _no_work)
    figures = tmp_path / "figures"
    figures.mkdir()
    (figures / module.FIGURES[2]).write_bytes(b"mine")
    assert module.main(["--plot", str(figures)]) == 2
    assert "fig7.png already exists; pass --force" in capsys.readouterr().err
    assert (figures / "fig7.png").read_bytes() == b"mine"
    assert module.main(["--plot", str(figures / "fig7.png")]) == 2
    assert "is a file; give a directory" in capsys.readouterr().err


def test_toy_experiment_refuses_to_replace_an_earlier_run(tmp_path, capsys, monkeypatch):
    from factorbench.benchmark.experiments import toy_dependent_factors as module

    monkeypatch.setattr(module, "load_metrics", _no_work)
    (tmp_path / "results.json").write_text("{}")
    assert module.main(["--out", str(tmp_path)]) == 2
    assert "results.json already exists; pass --force" in capsys.readouterr().err
    assert (tmp_path / "results.json").read_text() == "{}"
    with pytest.raises(SystemExit) as exit_:
        module.main(["--out", str(tmp_path), "--dci-regressor", "svm"])
    assert exit_.value.code == 2
