"""Training runs: learning, determinism, resume equality, run directories, bad input, the run: encoder."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from factorbench.baselines.checkpoint import load_weights  # noqa: E402
from factorbench.baselines.config import make_config  # noqa: E402
from factorbench.baselines.data import TrainingData  # noqa: E402
from factorbench.baselines.runs import load_run, read_run  # noqa: E402
from factorbench.baselines.trainer import TrainOptions, train  # noqa: E402
from factorbench.benchmark.cli import main as cli  # noqa: E402
from factorbench.generators import write_dataset  # noqa: E402
from factorbench.generators.errors import FactorbenchError  # noqa: E402

#: one thread: results do not depend on the machine's load (OpenMP threads waiting for a busy core spin)
QUIET = TrainOptions(progress=False, samples=False, log_every=10, threads=1)
#: a small network: the tests check the machinery, not the model
TINY = {"latent_dim": 3, "channels": "8,8,8,8", "hidden": 32, "batch_size": 16}


def _tiny(model: str = "vae", **params) -> object:
    return make_config(model, {**TINY, **params})


def _weights(run_dir: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(run_dir / "weights.safetensors"))


def test_batches_come_from_seed_and_step(generated):
    data = TrainingData(generated("square"), "train")
    n = len(data)
    # one epoch of positions is a permutation of the split; the same (seed, step) gives the same batch
    steps = -(-n // 64)
    seen = np.concatenate([data.batch_positions(s, 64, 3) for s in range(steps)])[:n]
    assert np.array_equal(np.sort(seen), np.arange(n))
    assert np.array_equal(data.batch(7, 64, 3), data.batch(7, 64, 3))
    assert not np.array_equal(data.batch_positions(7, 64, 3), data.batch_positions(7, 64, 4))
    # streamed from the file (no memory) gives the very same batches, read ahead by a thread
    streamed = TrainingData(generated("square"), "train", memory_limit=0)
    assert data.in_memory and not streamed.in_memory
    for a, b in zip(data.batches(0, 5, 64, 3), streamed.batches(0, 5, 64, 3)):
        assert np.array_equal(a, b)
    data.close(), streamed.close()


def test_short_training_learns(generated, tmp_path):
    """120 steps of batch 32 of the standard beta-VAE on square: the loss falls and the reconstruction beats
    the untrained network's. Measured over seeds 0-3 (AMD EPYC): the logged reconstruction falls to
    0.086-0.102 of its start, the test NLL to 0.09-0.21 of the untrained network's (0.07 after 200 steps)."""
    config = make_config("beta-vae", {"latent_dim": 4, "steps": 120, "batch_size": 32, "beta": 1.0})
    result = train(config, generated("square"), tmp_path / "run", options=QUIET)
    assert result.status == "finished" and result.step == 120
    import csv

    rows = list(csv.DictReader(open(tmp_path / "run" / "log.csv")))
    first, last = float(rows[0]["recon"]), float(rows[-1]["recon"])
    assert last < 0.25 * first

    encoder = load_run(tmp_path / "run")
    untrained = type(encoder.model)(config, (64, 64, 3)).eval()
    data = TrainingData(generated("square"), "test")
    x = torch.from_numpy(data.batch(0, 256, 0)).permute(0, 3, 1, 2).float() / 255
    from factorbench.baselines.terms import bernoulli_nll

    with torch.no_grad():
        trained_nll = bernoulli_nll(encoder.model.decode(encoder.model.encode(x)[0]), x)
        untrained_nll = bernoulli_nll(untrained.decode(untrained.encode(x)[0]), x)
    assert trained_nll < 0.3 * untrained_nll
    data.close()


@pytest.mark.parametrize("model", ["vae", "factor-vae", "beta-tcvae", "dip-vae-ii", "annealed-vae"])
def test_resume_is_bit_identical(generated, tmp_path, model):
    config = _tiny(model, steps=40)
    whole = train(config, generated("square"), tmp_path / "whole", options=QUIET)
    first = train(config, generated("square"), tmp_path / "split", options=QUIET.__class__(
        **{**QUIET.__dict__, "stop_after": 17}))
    assert first.status == "stopped" and first.step == 17
    assert not (tmp_path / "split" / "weights.safetensors").exists()
    with open(tmp_path / "split" / "checkpoint.safetensors", "rb") as fh:  # the header's metadata
        cpu_first = json.loads(json.loads(fh.read(int.from_bytes(fh.read(8), "little")))["__metadata__"]["extra"])[
            "cpu_time_s"]
    with pytest.raises(FactorbenchError, match="--resume"):
        train(config, generated("square"), tmp_path / "split", options=QUIET)
    second = train(config, generated("square"), tmp_path / "split", resume=True, options=QUIET)
    assert whole.status == second.status == "finished"
    # the CPU time of both parts adds up in the run's record, as the wall time does
    done = json.loads((tmp_path / "split" / "DONE").read_text())
    assert 0 < cpu_first < done["cpu_time_s"] and done["threads"] >= 1
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "split")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    log_a = (tmp_path / "whole" / "log.csv").read_text().splitlines()
    log_b = (tmp_path / "split" / "log.csv").read_text().splitlines()
    cols = log_a[0].split(",")
    keep = [i for i, c in enumerate(cols) if c not in ("wall_time_s", "steps_per_s")]
    strip = lambda lines: [[line.split(",")[i] for i in keep] for line in lines]  # noqa: E731
    # the stop at 17 kept the interval 10-17's sums in the checkpoint: the resumed log equals the uninterrupted one
    assert log_a[0] == log_b[0] and strip(log_a[1:]) == strip(log_b[1:])
    assert [r[0] for r in strip(log_b[1:])] == ["10", "20", "30", "40"]


def test_training_is_deterministic(generated, tmp_path):
    config = _tiny("beta-vae", steps=25, seed=4)
    for name in ("a", "b"):
        train(config, generated("square"), tmp_path / name, options=QUIET)
    a, b = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(np.array_equal(a[k], b[k]) for k in a)
    train(config.replace(seed=5), generated("square"), tmp_path / "c", options=QUIET)
    c = _weights(tmp_path / "c")
    assert not all(np.array_equal(a[k], c[k]) for k in a)
    # the weights' digest: over the tensors alone, equal for equal weights, in the encoder's provenance
    from safetensors.torch import load_file, save_file

    from factorbench.baselines.checkpoint import tensors_sha256, weights_sha256
    from factorbench.baselines.runs import load_run

    digests = [weights_sha256(tmp_path / name / "weights.safetensors") for name in "abc"]
    assert digests[0] == digests[1] != digests[2] and len(digests[0]) == 64
    tensors = load_file(str(tmp_path / "a" / "weights.safetensors"))
    save_file(dict(reversed(list(tensors.items()))), str(tmp_path / "other.safetensors"), metadata={"x": "y"})
    assert weights_sha256(tmp_path / "other.safetensors") == digests[0]  # another header, the same tensors
    name = next(iter(tensors))
    tensors[name] = tensors[name].clone()
    tensors[name].view(-1)[0] += 1e-3
    assert tensors_sha256(tensors) != digests[0]
    assert load_run(tmp_path / "a").provenance["weights_sha256"] == digests[0]


def test_run_directory_rules(generated, tmp_path):
    config = _tiny(steps=12)
    run = tmp_path / "run"
    train(config, generated("square"), run, options=QUIET)
    before = {p.name: p.stat().st_mtime_ns for p in run.iterdir()}
    again = train(config, generated("square"), run, options=QUIET)
    assert again.status == "already complete"
    assert {p.name: p.stat().st_mtime_ns for p in run.iterdir()} == before  # not retrained, nothing rewritten
    with pytest.raises(FactorbenchError, match="holds another run"):
        train(config.replace(steps=13), generated("square"), run, options=QUIET)
    assert {p.name: p.stat().st_mtime_ns for p in run.iterdir()} == before  # the earlier run is intact
    replaced = train(config.replace(steps=13), generated("square"), run, force=True, options=QUIET)
    assert replaced.status == "finished" and read_run(run)["config"]["params"]["steps"] == 13

    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep me")
    with pytest.raises(FactorbenchError, match="not empty"):
        train(config, generated("square"), foreign, options=QUIET)
    # what a process killed while writing its first run.json leaves is no foreign file: the run starts
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / ".run.json.4242.tmp").write_text("{")
    assert train(config, generated("square"), killed, options=QUIET).status == "finished"
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(FactorbenchError, match="cannot write|is a file"):
        train(config, generated("square"), blocker / "run", options=QUIET)
    with pytest.raises(FactorbenchError, match="is a file"):
        train(config, generated("square"), blocker, options=QUIET)


def test_corrupted_checkpoint_is_reported_and_kept(generated, tmp_path):
    config = _tiny(steps=20)
    run = tmp_path / "run"
    train(config, generated("square"), run, options=QUIET.__class__(**{**QUIET.__dict__, "stop_after": 10}))
    ckpt = run / "checkpoint.safetensors"
    data = bytearray(ckpt.read_bytes())
    data[len(data) // 2:] = b"\0" * (len(data) - len(data) // 2)
    ckpt.write_bytes(bytes(data[: len(data) - 100]))
    damaged = ckpt.read_bytes()
    with pytest.raises(FactorbenchError, match="damaged|unreadable"):
        train(config, generated("square"), run, resume=True, options=QUIET)
    assert ckpt.read_bytes() == damaged


def test_images_must_be_64x64(tmp_path):
    from conftest import ToyIID

    path = write_dataset(ToyIID(), tmp_path / "toy.h5", n=50, progress=False)
    with pytest.raises(FactorbenchError, match="64 x 64"):
        train(_tiny(steps=5), path, tmp_path / "run", split="all", options=QUIET)
    assert not (tmp_path / "run").exists()


def test_unknown_split_is_refused(generated, tmp_path):
    with pytest.raises(FactorbenchError, match="no split 'nope'"):
        train(_tiny(steps=5), generated("square"), tmp_path / "run", split="nope", options=QUIET)


def test_snapshots_are_the_weights_of_a_shorter_run(generated, tmp_path):
    """Batches depend on (seed, step) only, so a run's snapshot at step k equals a run of k steps."""
    long = _tiny(steps=30)
    train(long, generated("square"), tmp_path / "long", options=QUIET.__class__(**{**QUIET.__dict__,
                                                                                  "snapshot_every": 10}))
    train(long.replace(steps=20), generated("square"), tmp_path / "short", options=QUIET)
    snap = load_run(f"{tmp_path / 'long'}@20").model.state_dict()
    short = load_run(tmp_path / "short").model.state_dict()
    assert all(torch.equal(snap[k], short[k]) for k in snap)
    with pytest.raises(FactorbenchError, match="no weights at step 15"):
        load_run(tmp_path / "long", step=15)


def test_run_encoder_codes_and_provenance(generated, tmp_path, monkeypatch):
    from factorbench.benchmark.evaluation import evaluate

    config = _tiny(steps=10)
    run = tmp_path / "run"
    train(config, generated("square"), run, split="all", options=QUIET)
    encoder = load_run(run)
    data = TrainingData(generated("square"), "all")
    images = data.batch(0, 8, 0)
    mu, logvar = encoder(images)
    model = type(encoder.model)(config, (64, 64, 3))
    load_weights(run / "weights.safetensors", model)
    model.eval()
    with torch.no_grad():
        expected = model.encode(torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255)
    assert np.allclose(mu, expected[0].numpy()) and np.allclose(logvar, expected[1].numpy())
    data.close()

    monkeypatch.setattr("factorbench.benchmark.evaluation.prepare_dataset", lambda *a, **k: generated("square"))
    result = evaluate("square-lsbd-v1", f"run:{run}", progress=False, only=("d_lsbd",))
    assert result.posterior and result.code_dim == 3
    assert result.training["config_hash"] == config.hash()
    assert result.training["run_hash"] == read_run(run)["run_hash"]
    assert result.training["budget"]["steps"] == 10
    assert json.loads(result.to_json())["training"]["config"]["params"]["latent_dim"] == 3


def test_unfinished_run_is_not_an_encoder_but_its_snapshots_are(generated, tmp_path):
    """A run still training serves its kept snapshots (learning curves), marked unfinished, not its final step."""
    run = tmp_path / "run"
    train(_tiny(steps=20), generated("square"), run,
          options=QUIET.__class__(**{**QUIET.__dict__, "stop_after": 12, "snapshot_every": 5}))
    with pytest.raises(FactorbenchError, match="not finished"):
        load_run(run)
    with pytest.raises(FactorbenchError, match=r"kept steps \[5, 10\] so far"):
        load_run(run, step=20)
    snapshot = load_run(f"{run}@10")
    assert snapshot.step == 10 and snapshot.provenance["budget"]["steps"] == 10
    assert snapshot.provenance["trained"]["finished"] is False and snapshot.provenance["trained"]["device"] is None
    data = TrainingData(generated("square"), "all")
    images = data.batch(0, 4, 0)
    data.close()
    model = type(snapshot.model)(snapshot.config, (64, 64, 3))
    load_weights(run / "snapshots" / "step-0000010.safetensors", model)
    model.eval()
    with torch.no_grad():
        expected = model.encode(torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255)
    assert np.allclose(snapshot(images)[0], expected[0].numpy())
    with pytest.raises(FactorbenchError, match="not a training run"):
        load_run(tmp_path)


def test_cli_train_errors_exit_2(capsys, tmp_path, generated):
    path = str(generated("square"))
    cases = [
        (["train", "no-such", "--dataset", path, "--out", str(tmp_path / "r")], "unknown model"),
        (["train", "vae", "--dataset", path, "--out", str(tmp_path / "r"), "--param", "beta=4"], "unknown parameter"),
        (["train", "beta-vae", "--dataset", path, "--out", str(tmp_path / "r"), "--param", "beta=x"], "expects float"),
        (["train", "vae", "--dataset", path, "--out", str(tmp_path / "r"), "--steps", "0"], "steps must be positive"),
        (["train", "vae", "--dataset", "nowhere.h5", "--out", str(tmp_path / "r")], "neither a file nor a dataset"),
        (["train", "vae", "--dataset", path, "--out", str(tmp_path / "r"), "--device", "tpu"], "--device"),
    ]
    for argv, message in cases:
        assert cli(argv) == 2, argv
        assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def _checkpoint_step(run: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(run / "checkpoint.safetensors"), "pt") as fh:
        return int(fh.metadata()["step"])


def _train_until_logged_then_interrupt(args: list[str], log: Path, rows: int) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 90
    while time.time() < deadline and (not log.is_file() or len(log.read_text().splitlines()) < rows + 1):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def test_cli_ctrl_c_checkpoints_and_resumes(generated, tmp_path):
    """SIGINT stops at a step boundary with a checkpoint (exit 130, no traceback); --resume continues from it."""
    run = tmp_path / "run"
    args = [sys.executable, "-m", "factorbench.benchmark.cli", "train", "vae", "--dataset", str(generated("square")),
            "--out", str(run), "--steps", "100000", "--quiet", "--threads", "1"] + \
        [f"--param={k}={v}" for k, v in TINY.items()]
    first = _train_until_logged_then_interrupt(args, run / "log.csv", 1)
    assert first.returncode == 130, first.stderr
    assert "continue with --resume" in first.stderr and "Traceback" not in first.stderr
    step = _checkpoint_step(run)
    assert step >= 50 and not (run / "DONE").exists()
    refused = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "pass --resume" in refused.stderr
    assert _checkpoint_step(run) == step
    logged = len((run / "log.csv").read_text().splitlines()) - 1
    second = _train_until_logged_then_interrupt(args + ["--resume"], run / "log.csv", logged + 1)
    assert second.returncode == 130, second.stderr
    assert _checkpoint_step(run) > step
    steps_logged = [int(line.split(",")[0]) for line in (run / "log.csv").read_text().splitlines()[1:]]
    assert steps_logged == sorted(steps_logged) and len(set(steps_logged)) == len(steps_logged)


def test_unwritable_out_is_refused_before_the_data_is_prepared(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FACTORBENCH_DATA", str(tmp_path / "cache"))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert cli(["train", "vae", "--dataset", "square", "--out", str(blocker / "run")]) == 2
    assert "is a file" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()  # nothing generated, nothing left behind


def test_cli_train_then_evaluate_the_run(tmp_path, monkeypatch, capsys):
    """The README's flow at a small scale: train on a dataset name (the protocol cache's copy), evaluate
    run:RUN_DIR, retrain is a no-op, show-run redraws the picture."""
    monkeypatch.setenv("FACTORBENCH_DATA", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    train_args = ["train", "beta-vae", "--dataset", "square", "--split", "all", "--out", "runs/b", "--steps", "20",
                  "--threads", "1", "--quiet"] + [f"--param={k}={v}" for k, v in TINY.items()]
    assert cli(train_args) == 0
    assert "trained beta-vae for 20 steps" in capsys.readouterr().out
    assert (tmp_path / "runs/b/samples.png").stat().st_size > 0
    assert cli(train_args) == 0
    assert "not retrained" in capsys.readouterr().out
    assert cli(["evaluate", "square-lsbd-v1", "--encoder", "run:runs/b", "--only", "d_lsbd", "--quiet"]) == 0
    result = json.loads((tmp_path / "square-lsbd-v1.b.json").read_text())
    assert result["training"]["model"] == "beta-vae" and result["training"]["budget"]["steps"] == 20
    assert result["posterior"] is True and result["code_dim"] == 3
    assert cli(["show-run", "runs/b", "--out", "again.png"]) == 0
    assert (tmp_path / "again.png").stat().st_size > 0
    assert cli(["show-run", "runs/b", "--out", "again.png"]) == 2
    assert "--force" in capsys.readouterr().err


def _rewrite_checkpoint(path: Path, noise_state: "torch.Tensor", device: str) -> None:
    """The checkpoint as a run on ``device`` would have written it: its noise generator's state and device."""
    import torch  # noqa: F401
    from safetensors.torch import load, save

    data = path.read_bytes()
    metadata = json.loads(data[8:8 + int.from_bytes(data[:8], "little")])["__metadata__"]
    tensors = load(data)
    tensors["rng/noise"] = noise_state
    extra = json.loads(metadata["extra"])
    extra["device"] = device
    for segment in extra["segments"]:
        segment["device"] = device
    metadata["extra"] = json.dumps(extra)
    path.write_bytes(save(tensors, metadata=metadata))


def _other_kind_of_device(run: Path) -> tuple[str, "torch.Tensor"]:
    """A device of the other kind than the one ``run`` trains on, and a noise state as it would write it: a
    CUDA generator's (16 bytes) for a CPU run, a CPU generator's (5,056 bytes) for a CUDA run."""
    import torch

    data = (run / "checkpoint.safetensors").read_bytes()
    extra = json.loads(json.loads(data[8:8 + int.from_bytes(data[:8], "little")])["__metadata__"]["extra"])
    if extra["device"].startswith("cuda"):
        return "cpu", torch.Generator().get_state()
    return "cuda:0", torch.zeros(16, dtype=torch.uint8)


def test_a_checkpoint_from_another_kind_of_device_resumes_with_a_reseeded_noise_stream(generated, tmp_path):
    """A CUDA generator's state (16 bytes) cannot be set on a CPU generator, nor the reverse: the resumed run
    re-seeds its noise from (seed, step), deterministically, and records every segment (step, device,
    precision, noise)."""
    from factorbench.baselines.checkpoint import noise_seed_after_device_change

    config = _tiny("vae", steps=30)
    stop = QUIET.__class__(**{**QUIET.__dict__, "stop_after": 12})
    runs = []
    for name in ("a", "b"):
        train(config, generated("square"), tmp_path / name, options=stop)
        other, state = _other_kind_of_device(tmp_path / name)
        _rewrite_checkpoint(tmp_path / name / "checkpoint.safetensors", state, other)
        runs.append(train(config, generated("square"), tmp_path / name, resume=True, options=QUIET))
    assert [r.status for r in runs] == ["finished", "finished"]
    a, b = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(np.array_equal(a[k], b[k]) for k in a)  # the reseeded stream is a function of (seed, step)
    train(config, generated("square"), tmp_path / "whole", options=QUIET)
    whole = _weights(tmp_path / "whole")
    assert not all(np.array_equal(a[k], whole[k]) for k in a)  # ... but another stream than the uninterrupted run's
    segments = json.loads((tmp_path / "a" / "DONE").read_text())["segments"]
    assert [(s["from_step"], s["noise"]) for s in segments] == [(0, "seeded"), (12, "reseeded")]
    assert segments[0]["device"] == other and segments[1]["device"].split(":")[0] != other.split(":")[0]
    assert segments[1]["precision"]
    assert noise_seed_after_device_change(7, 12) != noise_seed_after_device_change(7, 13)


def test_a_same_device_resume_records_its_segments(generated, tmp_path):
    config = _tiny("vae", steps=20)
    train(config, generated("square"), tmp_path / "run", options=QUIET.__class__(**{**QUIET.__dict__, "stop_after": 8}))
    train(config, generated("square"), tmp_path / "run", resume=True, options=QUIET)
    done = json.loads((tmp_path / "run" / "DONE").read_text())
    segments = done["segments"]
    assert [(s["from_step"], s["noise"]) for s in segments] == [(0, "seeded"), (8, "restored")]
    assert segments[0]["device"] == segments[1]["device"] and segments[0]["precision"] == segments[1]["precision"]
    # each segment and the run name the CPU beyond its model name (family, model, vector units)
    from factorbench.benchmark.environment import cpu_signature

    assert segments[0]["device_signature"] == segments[1]["device_signature"] == done["device_signature"]
    assert done["device_signature"] == cpu_signature()


def test_tensorboard_holds_what_log_csv_holds_also_after_a_resume(generated, tmp_path):
    """--tensorboard: every log.csv row as scalars at its step; a run stopped at step 17 and resumed shows each
    step once (the resumed event file purges what followed the checkpoint), with log.csv's values."""
    pytest.importorskip("tensorboard")
    import csv

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = _tiny(steps=40)
    board = {**QUIET.__dict__, "tensorboard": True}
    train(config, generated("square"), tmp_path / "run", options=TrainOptions(**{**board, "stop_after": 17}))
    train(config, generated("square"), tmp_path / "run", resume=True, options=TrainOptions(**board))
    rows = list(csv.DictReader(open(tmp_path / "run" / "log.csv")))
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == set(rows[0]) - {"step", "wall_time_s"}
    for tag in ("loss", "recon", "kl"):
        scalars = events.Scalars(tag)
        assert [s.step for s in scalars] == [int(r["step"]) for r in rows] == [10, 20, 30, 40]
        assert np.allclose([s.value for s in scalars], [float(r[tag]) for r in rows], rtol=1e-5)


def test_tensorboard_without_its_package_is_a_clear_error_before_any_work(generated, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name == "tensorboard" or name.startswith("tensorboard."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    with pytest.raises(FactorbenchError, match=r"pip install 'factorbench\[tensorboard\]'"):
        train(_tiny(steps=5), generated("square"), tmp_path / "run", options=TrainOptions(**{**QUIET.__dict__,
                                                                                              "tensorboard": True}))
    assert not (tmp_path / "run").exists()


def test_batches_gathered_on_the_device_train_the_same_run(generated, tmp_path):
    """The split held on the training device and each batch gathered there (the CUDA default when it fits;
    forced here on the CPU) gives the same weights and log as batches gathered on the host."""
    config = _tiny(steps=30)
    runs = {}
    for mode in ("never", "always"):
        train(config, generated("square"), tmp_path / mode, options=TrainOptions(**{**QUIET.__dict__,
                                                                                   "resident_data": mode}))
        runs[mode] = _weights(tmp_path / mode)
        done = json.loads((tmp_path / mode / "DONE").read_text())
        assert done["segments"][0]["data_on_device"] is (mode == "always")
    assert runs["never"].keys() == runs["always"].keys()
    assert all(np.array_equal(runs["never"][k], runs["always"][k]) for k in runs["never"])
    logs = [[{k: v for k, v in row.items() if k not in ("wall_time_s", "steps_per_s")}
             for row in csv.DictReader(open(tmp_path / mode / "log.csv"))] for mode in ("never", "always")]
    assert logs[0] == logs[1]
    with pytest.raises(FactorbenchError, match="resident_data 'gpu': choose auto, always or never"):
        train(config, generated("square"), tmp_path / "bad", options=TrainOptions(**{**QUIET.__dict__,
                                                                                    "resident_data": "gpu"}))


def test_a_resumed_optimiser_keeps_its_parameters_memory_layout(tmp_path):
    """Checkpoints store contiguous tensors; a channels-last convolution's Adam moments come back with the
    weight's strides (CUDA's fused Adam refuses moments laid out otherwise than their parameter) and the
    same values, so that the resumed step equals the uninterrupted one."""
    from factorbench.baselines.checkpoint import load_checkpoint, save_checkpoint

    def net() -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Flatten(),
                                   torch.nn.Linear(8 * 6 * 6, 2)).to(memory_format=torch.channels_last)

    x = torch.randn(4, 3, 8, 8).to(memory_format=torch.channels_last)
    model = net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model(x).square().sum().backward()
    opt.step()
    save_checkpoint(tmp_path / "c.safetensors", model, {"model": opt}, torch.Generator(), 1, {"device": "cpu"})
    resumed = net()
    resumed_opt = torch.optim.Adam(resumed.parameters(), lr=1e-2)
    load_checkpoint(tmp_path / "c.safetensors", resumed, {"model": resumed_opt}, torch.Generator())
    conv_weight = resumed[0].weight
    assert not conv_weight.is_contiguous()  # channels-last: the case contiguous checkpoints lose
    for param, saved in zip(resumed.parameters(), model.parameters()):
        moments = resumed_opt.state[param]
        for key in ("exp_avg", "exp_avg_sq"):
            assert moments[key].stride() == param.stride()
            assert torch.equal(moments[key], opt.state[saved][key])
    for m, o in ((model, opt), (resumed, resumed_opt)):
        o.zero_grad()
        m(x).square().sum().backward()
        o.step()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), resumed.parameters()))


def test_a_checkpoint_is_not_continued_in_another_precision(generated, tmp_path, capsys):
    """A run trained in fp32 up to a checkpoint refuses a bf16 resume (and says which precision continues it),
    before any step; the same precision resumes; ``--force`` starts over in the new precision."""
    config = _tiny("vae", steps=20)
    fp32 = QUIET.__class__(**{**QUIET.__dict__, "stop_after": 8, "precision": "fp32"})
    train(config, generated("square"), tmp_path / "run", options=fp32)
    before = (tmp_path / "run" / "checkpoint.safetensors").read_bytes()
    bf16 = QUIET.__class__(**{**QUIET.__dict__, "precision": "bf16"})
    with pytest.raises(FactorbenchError, match=r"trained in fp32 up to step 8.*--precision fp32 to continue"):
        train(config, generated("square"), tmp_path / "run", resume=True, options=bf16)
    assert (tmp_path / "run" / "checkpoint.safetensors").read_bytes() == before  # nothing lost
    run = tmp_path / "run"
    code = cli(["train", "vae", "--dataset", str(generated("square")), "--out", str(run), "--resume", "--quiet",
                "--precision", "bf16", "--steps", "20"] + [f"--param={k}={v}" for k, v in TINY.items()])
    assert code == 2 and "trained in fp32 up to step 8" in capsys.readouterr().err
    done = train(config, generated("square"), run, resume=True,
                 options=QUIET.__class__(**{**QUIET.__dict__, "precision": "fp32"}))
    assert done.status == "finished" and done.step == 20


def test_bf16_on_a_cpu_without_bf16_units_warns_that_it_is_emulated(tmp_path, capsys, monkeypatch):
    """The warning comes first, before the data is even looked for (here: a missing file); fp32, and bf16 on a
    CPU with bf16 units, do not warn. The device is the CPU by name: the warning is about the CPU's units (a
    GPU check sends train() of device "auto" to the GPU)."""
    from factorbench.baselines import trainer

    def start(precision: str) -> str:
        with pytest.raises(FactorbenchError, match="neither a file nor a dataset"):
            train(_tiny("vae"), tmp_path / "nowhere.h5", tmp_path / precision,
                  options=QUIET.__class__(**{**QUIET.__dict__, "precision": precision, "device": "cpu"}))
        return capsys.readouterr().err

    monkeypatch.setattr(trainer, "_cpu_has_bf16", lambda: False)
    err = start("bf16")
    assert "runs emulated, about 9x slower per step than fp32" in err and "--precision auto trains in fp32 here" in err
    assert "emulated" not in start("fp32")
    monkeypatch.setattr(trainer, "_cpu_has_bf16", lambda: True)
    assert "emulated" not in start("bf16")


def test_keeping_freed_memory_for_reuse_changes_no_weight():
    """The allocator setting moves where memory comes from, not what is computed: chen-mlp on 64 x 64 x 3,
    whose two 12,288 x 1,200 weights are what it speeds up, takes the same optimiser steps to the same bits."""
    import platform

    from factorbench.baselines.allocator import heap_reuse
    from factorbench.baselines.config import get_family

    config = make_config("beta-vae", {"architecture": "chen-mlp", "latent_dim": 4, "batch_size": 8})
    family = get_family(config)

    def three_steps() -> list[torch.Tensor]:
        torch.manual_seed(0)
        model = family.build(config, (64, 64, 3))
        groups = family.groups(model, config)
        noise = torch.Generator().manual_seed(1)
        x = torch.rand(8, 3, 64, 64, generator=torch.Generator().manual_seed(2))
        for step in range(3):
            loss = family.loss(model(x, noise), x, config, step, 4096)
            for name, (params, optimiser) in groups.items():
                optimiser.zero_grad(set_to_none=True)
                loss.groups[name].backward(inputs=params)
                optimiser.step()
        return [p.detach().clone() for p in model.parameters()]

    with heap_reuse() as applied:
        on = three_steps()
    off = three_steps()
    assert len(on) == len(off) and all(torch.equal(a, b) for a, b in zip(on, off))
    assert applied == (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc")
    with heap_reuse(enabled=False) as applied:
        assert not applied


def test_training_holds_the_allocator_setting_on_the_cpu_unless_told_not_to(generated, tmp_path, monkeypatch):
    import contextlib
    import dataclasses

    import factorbench.baselines.trainer as trainer

    asked: list[bool] = []
    monkeypatch.setattr(trainer, "heap_reuse", lambda enabled: asked.append(enabled) or contextlib.nullcontext())
    for name, reuse in (("on", True), ("off", False)):
        train(_tiny(steps=2), generated("square"), tmp_path / name,
              options=dataclasses.replace(QUIET, reuse_freed_memory=reuse, device="cpu"))
    assert asked == [True, False]


def test_heap_reuse_sets_glibc_once_and_restores_its_defaults_after_the_last_holder():
    from factorbench.baselines import allocator

    class FakeLibc:
        def __init__(self) -> None:
            self.calls: list[tuple] = []

        def mallopt(self, param: int, value: int) -> int:
            self.calls.append(("mallopt", param, value))
            return 1

        def malloc_trim(self, pad: int) -> int:
            self.calls.append(("malloc_trim", pad))
            return 1

    libc = FakeLibc()
    with allocator.heap_reuse(libc=libc) as outer:
        with allocator.heap_reuse(libc=libc) as inner:  # nested (or a second training thread): set once
            assert outer and inner
            assert libc.calls == [("mallopt", allocator.M_MMAP_MAX, 0),
                                  ("mallopt", allocator.M_TRIM_THRESHOLD, allocator.TRIM_THRESHOLD)]
        assert len(libc.calls) == 2  # the outer holder still holds it
    assert libc.calls[2:] == [("mallopt", allocator.M_MMAP_MAX, allocator.DEFAULT_MMAP_MAX),
                              ("mallopt", allocator.M_TRIM_THRESHOLD, allocator.DEFAULT_TRIM_THRESHOLD),
                              ("malloc_trim", 0)]
    assert allocator._holders == 0
    libc.mallopt = lambda param, value: 0  # a C library that refuses the setting: no holder claims it holds
    with allocator.heap_reuse(libc=libc) as outer, allocator.heap_reuse(libc=libc) as inner:
        assert not outer and not inner
