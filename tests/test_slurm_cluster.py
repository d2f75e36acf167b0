"""``factorbench sweep --engine slurm`` on a real SLURM cluster (started by ``.ci/slurm-cluster.sh``; skipped
where none runs): a scancel, a preemption with a grace time and a time-limit requeue, each ending with the job
done, trained once, with weights and scores identical to the local engine's.

Marked slow (4.5 minutes on 2 idle cores, most of it SLURM's grace, requeue and time-limit waits): run it
with ``bash .ci/slurm-cluster.sh && python -m pytest -m slurm`` as root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("submitit")
pytest.importorskip("safetensors")


def _cluster_missing() -> str:
    """Why this machine has no usable test cluster ('' when it has one)."""
    if not (shutil.which("sbatch") and shutil.which("sinfo") and shutil.which("sacct")):
        return "no SLURM here (.ci/slurm-cluster.sh starts a test cluster)"
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%P %a"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"sinfo failed ({exc})"
    parts = dict(line.split() for line in out.stdout.splitlines() if len(line.split()) == 2)
    if out.returncode != 0 or parts.get("urgent") != "up" or not any(p.endswith("*") for p in parts):
        return "no test cluster with a default and an 'urgent' partition up (.ci/slurm-cluster.sh starts one)"
    return ""


pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.skipif(bool(_cluster_missing()), reason=_cluster_missing() or "-")]

TINY = "latent_dim = 3, channels = [8, 8, 8, 8], hidden = 32, batch_size = 16"
PLAN = f"""
name = "slurm-test"
description = "a scancel, a preemption and a time limit on tiny VAEs"

[budget]
steps = 3000
seeds = [0, 1]

[datasets.square]
split = "all"
protocols = ["square-lsbd-v1"]

[[models]]
model = "vae"
datasets = ["square"]
params = {{ {TINY} }}

[[models]]
name = "long"
model = "beta-vae"
datasets = ["square"]
seeds = [0]
steps = 6000
params = {{ {TINY}, beta = 4.0 }}
"""
FAST = ["--threads", "1", "--checkpoint-every", "1", "--record-every", "1"]


def _cli(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "factorbench.benchmark.cli", *args], env=env, capture_output=True,
                          text=True, timeout=300)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def _wait(predicate, what: str, timeout: float = 240.0) -> None:
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}; squeue: "
                                 + subprocess.run(["squeue"], capture_output=True, text=True).stdout)
        time.sleep(0.5)


def _sacct(slurm_id: str) -> list[str]:
    """Every state SLURM recorded for the job or array task (requeues included), oldest first."""
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-D", "-j", slurm_id, "-o", "JobID,State"], capture_output=True,
                         text=True).stdout
    return [line.split("|")[1].split()[0] for line in out.splitlines() if line.split("|")[0] == slurm_id]


def test_scancel_preemption_and_time_limit_end_done_once_and_equal_the_local_engine(tmp_path):
    from factorbench.baselines.plan import expand, load_plan
    from factorbench.baselines.slurm import latest_ids, read_submissions
    from factorbench.baselines.sweep import result_path, state_path, sweep_status
    from factorbench.benchmark.cache import prepare_dataset
    from factorbench.benchmark.protocols import get_protocol

    env = {**os.environ, "FACTORBENCH_DATA": str(tmp_path / "data")}
    os.environ["FACTORBENCH_DATA"], saved = env["FACTORBENCH_DATA"], os.environ.get("FACTORBENCH_DATA")
    try:
        prepare_dataset(get_protocol("square-lsbd-v1").dataset, progress=False)
    finally:
        if saved is None:
            del os.environ["FACTORBENCH_DATA"]
        else:
            os.environ["FACTORBENCH_DATA"] = saved
    (tmp_path / "plan.toml").write_text(PLAN)
    plan = load_plan(tmp_path / "plan.toml")
    plan_file, sweep = str(tmp_path / "plan.toml"), tmp_path / "slurm"
    jobs = {j.id: j for j in expand(plan)}
    cancelled, preempted, timed = "vae/square/seed1", "vae/square/seed0", "long/square/seed0"

    def status(job_id: str):
        return next(s for s in sweep_status(plan, sweep, job_id) if s.job.id == job_id)

    # the local engine, side by side, for the comparison at the end
    local = subprocess.Popen([sys.executable, "-m", "factorbench.benchmark.cli", "sweep", plan_file, "--engine", "local",
                              "--dir", str(tmp_path / "local"), *FAST], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        # the short jobs with the default time; the long one with 2-minute attempts (USR2 30 s before the limit;
        # SLURM may send it up to a minute early, never before the job has started)
        _cli("sweep", plan_file, "--engine", "slurm", "--only", "vae/*", "--dir", str(sweep), *FAST, env=env)
        _cli("sweep", plan_file, "--engine", "slurm", "--only", "long/*", "--dir", str(sweep), *FAST,
             "--slurm", "time=2", "--slurm", "signal_delay_s=30",
             "--slurm", "max_num_timeout=20", env=env)
        assert len(read_submissions(sweep)) == 2
        ids = latest_ids(sweep)
        _wait(lambda: min(status(cancelled).step or 0, status(preempted).step or 0) >= 50, "the short jobs to train")

        # scancel: SIGTERM, a checkpoint, SLURM's kill: CANCELLED, not requeued; the sweep run again resumes it.
        # At once, preemption by a job of the 'urgent' partition that needs every CPU: SIGTERM, grace time, kill,
        # PREEMPTED and requeued
        subprocess.run(["scancel", ids[cancelled]], check=True)
        cpus = subprocess.run(["sinfo", "-h", "-p", "urgent", "-o", "%c"], capture_output=True,
                              text=True).stdout.split()[0]
        subprocess.run(["sbatch", "-p", "urgent", "-c", cpus, "-o", os.devnull, "--wrap", "sleep 1"],
                       check=True, capture_output=True)
        _wait(lambda: "CANCELLED" in _sacct(ids[cancelled]), f"{cancelled} to be cancelled")
        _wait(lambda: "PREEMPTED" in _sacct(ids[preempted]), f"{preempted} to be preempted")
        _wait(lambda: status(cancelled).state == "interrupted", f"{cancelled} to record its interruption")
        assert "CANCELLED" in status(cancelled).slurm and status(cancelled).step >= 50
        _cli("sweep", plan_file, "--engine", "slurm", "--only", cancelled, "--dir", str(sweep), *FAST, env=env)
        assert len(read_submissions(sweep)) == 3

        # everything submitted ends
        arrays = sorted({s["array"] for s in read_submissions(sweep)})
        _wait(lambda: not subprocess.run(["squeue", "-h", "-j", ",".join(arrays)], capture_output=True,
                                         text=True).stdout.strip(), "the jobs to end", timeout=420)
    finally:  # a failed test leaves nothing queued on the cluster
        arrays = sorted({s["array"] for s in read_submissions(sweep) if s.get("array")})
        if arrays:
            subprocess.run(["scancel", *arrays], capture_output=True)
        if local.poll() is None:
            try:
                local.wait(timeout=300)
            except subprocess.TimeoutExpired:
                local.kill()
    assert local.returncode == 0, local.stdout.read()

    done = _cli("sweep", plan_file, "--status", "--dir", str(sweep), env=env).stdout
    assert "3 jobs: 3 done" in done, done
    history = {job_id: _sacct(slurm_id) for job_id, slurm_id in ids.items()}
    assert history[preempted][0] == "PREEMPTED" and history[preempted][-1] == "COMPLETED", history
    assert history[cancelled] == ["CANCELLED"] and _sacct(latest_ids(sweep)[cancelled]) == ["COMPLETED"], history
    # requeued at the time limit; a job that finishes as the next warning arrives is killed by it after its work
    # is done, which SLURM records FAILED: the sweep reads the results, which are complete
    assert "REQUEUED" in history[timed] and history[timed][-1] in ("COMPLETED", "FAILED"), history
    from safetensors.numpy import load_file

    for job_id, job in jobs.items():
        record = json.loads(state_path(sweep, job).read_text())
        assert record["state"] == "done" and record["attempts"] >= 2, (job_id, record)
        run = sweep / "runs" / record["run_hash"]
        # trained once: every resume continued where the last checkpoint stopped, the log has each step once
        starts = [s["from_step"] for s in json.loads((run / "DONE").read_text())["segments"]]
        assert starts == sorted(set(starts)) and len(starts) >= 2, (job_id, starts)
        steps = [int(line.split(",")[0]) for line in (run / "log.csv").read_text().splitlines()[1:]]
        assert steps == list(range(50, job.config.steps + 1, 50)), (job_id, steps)
        # the local engine trained the same weights and scores
        a = load_file(str(run / "weights.safetensors"))
        b = load_file(str(tmp_path / "local" / "runs" / record["run_hash"] / "weights.safetensors"))
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a), job_id
        for protocol in job.protocols:
            ma, mb = (json.loads(result_path(d, protocol, job).read_text())["metrics"]
                      for d in (sweep, tmp_path / "local"))
            assert json.dumps(ma, sort_keys=True) == json.dumps(mb, sort_keys=True), job_id
