"""Bad input across commands: each reproducer of the reliability review gets a clear error (exit status 2)
or a warning, before any long work, and nothing is left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from factorbench.baselines.config import make_config  # noqa: E402
from factorbench.baselines.plan import load_plan  # noqa: E402
from factorbench.baselines.runs import load_run  # noqa: E402
from factorbench.baselines.trainer import TrainOptions, train  # noqa: E402
from factorbench.benchmark.cli import main as cli  # noqa: E402
from factorbench.generators.errors import FactorbenchError  # noqa: E402

QUIET = TrainOptions(progress=False, samples=False, log_every=5, threads=1)
TINY = {"latent_dim": 3, "channels": "8,8,8,8", "hidden": 32, "batch_size": 16}


@pytest.fixture(scope="module")
def tiny_run(generated, tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "vae"
    train(make_config("vae", {**TINY, "steps": 10}), generated("square"), run, options=QUIET)
    return run


def test_outputs_in_unwritable_places_fail_before_any_work(capsys, tiny_run):
    # /proc passes permission bits for root; writing is tested by creating a file
    assert cli(["leaderboard", "--out", "/proc/factorbench-site", "--no-plots"]) == 2
    assert "not writable" in capsys.readouterr().err
    assert cli(["show-run", str(tiny_run), "--out", "/proc/factorbench.png"]) == 2
    assert "not writable" in capsys.readouterr().err


def test_a_batch_larger_than_the_split_is_refused_without_a_run_folder(capsys, generated, tmp_path):
    argv = ["train", "vae", "--dataset", str(generated("square")), "--split", "all", "--out", str(tmp_path / "r"),
            "--param", "batch_size=100000", "--steps", "5"]
    assert cli(argv) == 2
    assert "batch_size 100000 is larger than split 'all'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_resume_with_nothing_to_resume_says_so(capsys, generated, tmp_path):
    train(make_config("vae", {**TINY, "steps": 5}), generated("square"), tmp_path / "r", resume=True,
          options=TrainOptions(**{**QUIET.__dict__, "progress": True}))
    assert "holds no run to resume; starting this one from step 0" in capsys.readouterr().err


def test_the_nan_guard_says_what_it_knows(generated, tmp_path):
    """No checkpoint yet (it would be written after 180 s) and fp32 already: neither is claimed."""
    config = make_config("vae", {**TINY, "steps": 200, "lr": 1e30})
    with pytest.raises(FactorbenchError) as info:
        train(config, generated("square"), tmp_path / "r", options=TrainOptions(**{**QUIET.__dict__,
                                                                                     "precision": "fp32"}))
    message = str(info.value)
    assert "no checkpoint was written yet. Lower lr" in message and "fp32" not in message


def test_segments_record_their_threads_and_weights_are_byte_identical(generated, tmp_path):
    config = make_config("vae", {**TINY, "steps": 6})
    for name in ("a", "b"):
        train(config, generated("square"), tmp_path / name, options=QUIET)
    done = json.loads((tmp_path / "a" / "DONE").read_text())
    assert done["segments"][0]["threads"] == 1
    weights = [(tmp_path / n / "weights.safetensors").read_bytes() for n in ("a", "b")]
    assert weights[0] == weights[1]  # sha256sum can check "bit-identical"


def test_a_run_scored_on_another_dataset_is_flagged(tiny_run):
    from factorbench.benchmark.evaluation import evaluate

    with pytest.warns(UserWarning, match="was trained on square; arrow-lsbd-v1 scores it on arrow"):
        result = evaluate("arrow-lsbd-v1", load_run(tiny_run), only=("mig",), progress=False)
    assert "note: the model was trained on square, not on arrow" in result.summary()


def test_a_snapshot_step_must_be_a_number(tiny_run):
    with pytest.raises(FactorbenchError, match="the part after '@' names a kept snapshot's step.*got 'abc'"):
        load_run(f"{tiny_run}@abc")


@pytest.mark.parametrize("name", ["../../escape", "", "a/b", ".hidden"])
def test_plan_names_must_name_a_folder(tmp_path, name):
    text = (Path(__file__).resolve().parent.parent / "baselines" / "plans" / "reference-v1.toml").read_text()
    path = tmp_path / "plan.toml"
    path.write_text(text.replace('name = "reference-v1"', f'name = "{name}"', 1))
    with pytest.raises(FactorbenchError, match="cannot name a sweep folder"):
        load_plan(path)


def test_status_and_collect_of_a_missing_sweep_folder_fail(capsys, tmp_path):
    for flag in ("--status", "--collect"):
        assert cli(["sweep", "reference-v1", flag, "--dir", str(tmp_path / "nowhere")]) == 2
        assert "no such sweep folder" in capsys.readouterr().err


def test_verify_a_folder_or_a_missing_file_is_a_usage_error(capsys, tmp_path):
    assert cli(["verify", str(tmp_path)]) == 2
    assert "is a folder; give a dataset file" in capsys.readouterr().err
    assert cli(["verify", str(tmp_path / "missing.h5")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_scores_columns_that_match_nothing_are_an_error(capsys):
    assert cli(["scores", "square-lsbd-v1", "--columns", "nothing.*"]) == 2
    assert "--columns 'nothing.*' matches none of square-lsbd-v1's columns" in capsys.readouterr().err


def test_python_api_arguments_of_the_wrong_type_get_clear_errors(generated):
    from factorbench.benchmark.dataset import load
    from factorbench.benchmark.evaluation import evaluate
    from factorbench.generators import split_from_dict

    with load(generated("square")) as ds:
        with pytest.raises(FactorbenchError, match="a split is named by a string, got 123"):
            ds.split(123)
    with pytest.raises(FactorbenchError, match="batch_size must be a positive whole number, got '10'"):
        evaluate("square-lsbd-v1", "pca", batch_size="10", progress=False)
    with pytest.raises(FactorbenchError, match="random split: fractions must be numbers"):
        split_from_dict({"kind": "random", "fractions": ["0.8", 0.1, 0.1]})


def test_bare_collect_writes_only_into_a_source_checkout(capsys, monkeypatch, tmp_path):
    import factorbench.baselines.commands as commands

    monkeypatch.setattr(commands, "_in_source_checkout", lambda: False)
    assert cli(["sweep", "reference-v1", "--collect", "--dir", str(tmp_path)]) == 2
    assert "part of the installed package here; give a folder: --collect DIR" in capsys.readouterr().err


@pytest.mark.parametrize("target, message", [
    ("a-file", "--collect {t} is a file; give a directory"),
    ("a-file/ref", "--collect {t}: {f} is a file, so no folder can be made below it"),
])
def test_collect_refuses_a_folder_it_cannot_make_before_reading_any_result(capsys, tmp_path, target, message):
    (tmp_path / "a-file").write_text("x")
    t = tmp_path / target
    assert cli(["sweep", "reference-v1", "--collect", str(t), "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message.format(t=t, f=tmp_path / "a-file") in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_collect_makes_nested_folders_as_mkdir_p_does(tmp_path):
    from factorbench.generators.outputs import check_output_dir

    assert check_output_dir(tmp_path / "a" / "b", "--collect", parents=True) == tmp_path / "a" / "b"
    with pytest.raises(FactorbenchError, match="does not exist; create it first"):
        check_output_dir(tmp_path / "a" / "b", "--plots")  # without parents, the parent must exist
    assert list(tmp_path.iterdir()) == []  # a check makes nothing


def test_a_very_wide_code_is_warned_about_before_the_metrics(monkeypatch):
    import factorbench.benchmark.evaluation as evaluation

    monkeypatch.setattr(evaluation, "LARGE_CODE", 3)  # the square's ideal code has 4 dimensions
    with pytest.warns(UserWarning, match="codes of 4 dimensions: the metrics' cost grows"):
        evaluation.evaluate("square-lsbd-v1", "ideal", only=("mig",), progress=False)


def test_one_cli_choices_and_separators(capsys, tmp_path):
    """Closed sets are argparse choices (exit 2, the valid values named); `evaluate --only` takes commas as
    `sweep --only` does."""
    assert cli(["train", "vae", "--dataset", "square", "--out", str(tmp_path / "r"), "--precision", "fp64"]) == 2
    assert "invalid choice: 'fp64' (choose from 'auto', 'bf16', 'fp16', 'fp32')" in capsys.readouterr().err
    assert cli(["sweep", "reference-v1", "--engine", "pbs", "--dry-run"]) == 2
    assert "invalid choice: 'pbs'" in capsys.readouterr().err
    out = tmp_path / "ideal.json"
    assert cli(["evaluate", "square-lsbd-v1", "--encoder", "ideal", "--only", "mig,sap", "--out", str(out)]) == 0
    assert set(json.loads(out.read_text())["metrics"]) == {"mig", "sap"}


def test_cuda_settings_are_decided_and_recorded_without_a_gpu(monkeypatch, capsys, tiny_run):
    from factorbench.baselines.trainer import choose_precision, cuda_determinism

    # on CUDA auto is fp32 whatever the GPU (bf16 measured slower there), so never emulated bf16
    for native in (False, True):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True, n=native: n)
        assert choose_precision("auto", torch.device("cuda")) == "fp32"
    assert choose_precision("bf16", torch.device("cuda")) == "bf16"
    fp32, bf16 = cuda_determinism("fp32"), cuda_determinism("bf16")
    assert fp32["tf32"] is False and bf16["tf32"] is True  # a run recorded as fp32 is fp32, not TF32
    assert fp32["cudnn_deterministic"] and not fp32["cudnn_benchmark"]
    if not torch.cuda.is_available():
        assert cli(["evaluate", "square-lsbd-v1", "--encoder", f"run:{tiny_run}", "--device", "cuda"]) == 2
        assert "--device cuda: no CUDA device" in capsys.readouterr().err


def test_columns_matching_only_the_headline_show_the_headline(capsys):
    assert cli(["scores", "square-lsbd-v1", "--columns", "d_lsbd*"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "| model | runs | kind | d_lsbd.score ↓ (headline) |"
