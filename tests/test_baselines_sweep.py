"""Sweeps: plans (parsing, hashing, expansion, errors), a local sweep through submitit, idempotent re-runs,
a kill in the middle, --status, and collecting reference files."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")
pytest.importorskip("submitit")

from factorbench.baselines.plan import expand, load_plan, parse_plan, select  # noqa: E402
from factorbench.baselines.sweep import (SweepOptions, _job_lock, collect, format_status, restore,  # noqa: E402
                                         job_done, result_path, run_job, run_sweep, state_path, sweep_status)
from factorbench.baselines.trainer import cpu_model_name  # noqa: E402
from factorbench.benchmark.environment import cpu_signature  # noqa: E402
from factorbench.benchmark.cli import main as cli  # noqa: E402
from factorbench.generators.errors import FactorbenchError  # noqa: E402

#: tiny networks: the tests check the machinery, not the models
TINY = 'latent_dim = 3, channels = [8, 8, 8, 8], hidden = 32, batch_size = 16'
PLAN = f"""
# a tiny plan for tests
name = "tiny"
description = "two seeds of a tiny VAE on square"

[budget]
steps = 30       # a few dozen steps
seeds = [0, 1]

[datasets.square]
split = "all"
protocols = ["square-lsbd-v1", "square-dependent-v1"]

[[models]]
model = "vae"
datasets = ["square"]
params = {{ {TINY} }}
"""
BETA = f"""
[[models]]
model = "beta-vae"
datasets = ["square"]
seeds = [0]
params = {{ {TINY}, beta = 4.0 }}
"""
OPTIONS = SweepOptions(threads=1, samples=False)
QUIET = dict(echo=lambda line: None)


def _plan(tmp_path: Path, text: str = PLAN, name: str = "plan.toml"):
    path = tmp_path / name
    path.write_text(text)
    return load_plan(path)


def _tree(root: Path) -> dict[str, int]:
    """Every file under ``root`` with its modification time."""
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*")) if p.is_file()}


def _scores(path: Path) -> dict:
    return {k: v["scalars"] for k, v in json.loads(path.read_text())["metrics"].items()}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """The protocol data cache of this module (square is generated once, on first use)."""
    path = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FACTORBENCH_DATA", str(path))
        yield path


@pytest.fixture(scope="module")
def swept(tmp_path_factory, data_dir):
    """The tiny plan swept once with the local engine (two jobs side by side); returns (plan, dir, seconds)."""
    root = tmp_path_factory.mktemp("sweep")
    plan = _plan(root)
    start = time.perf_counter()
    outcome = run_sweep(plan, root / "sweep", engine="local", parallel=2, options=OPTIONS, **QUIET)
    assert outcome == {"vae/square/seed0": "done", "vae/square/seed1": "done"}
    return plan, root / "sweep", time.perf_counter() - start


# ------------------------------------------------------------------------------------------------ plans

def test_plan_round_trip_and_hash(tmp_path):
    plan = _plan(tmp_path)
    assert plan.name == "tiny" and plan.entries[0].steps == 30 and plan.entries[0].seeds == (0, 1)
    assert parse_plan(plan.to_table()) == plan and parse_plan(plan.to_table()).hash() == plan.hash()
    # layout, comments, key order and defaults written out do not change the hash
    relaid = PLAN.replace("# a tiny plan for tests", "").replace("steps = 30       # a few dozen steps", "steps=30")
    relaid = relaid.replace(f"params = {{ {TINY} }}", "params = { hidden = 32, latent_dim = 3, batch_size = 16, "
                            "channels = [8, 8, 8, 8] }")
    assert _plan(tmp_path, relaid, "b.toml").hash() == plan.hash()
    explicit = PLAN.replace('model = "vae"\n', 'model = "vae"\nname = "vae"\nseeds = [0, 1]\nsteps = 30\n')
    integer_beta = _plan(tmp_path, PLAN + BETA.replace("4.0", "4"), "f.toml")
    assert _plan(tmp_path, PLAN + BETA, "e.toml").hash() == integer_beta.hash()
    assert _plan(tmp_path, explicit, "c.toml").hash() == plan.hash()
    # what is trained or evaluated changes it
    changes = [("steps = 30", "steps = 31"), ("seeds = [0, 1]", "seeds = [0, 2]"), ("hidden = 32", "hidden = 33"),
               (', "square-dependent-v1"', ""), ('split = "all"', 'split = "train"')]
    hashes = {plan.hash()}
    for old, new in changes:
        assert old in PLAN
        hashes.add(_plan(tmp_path, PLAN.replace(old, new, 1), "d.toml").hash())
    assert len(hashes) == len(changes) + 1
    # a model config of the plan is the library's config, seed and budget included
    job = expand(plan)[1]
    assert job.config.to_dict()["params"]["seed"] == 1 and job.config.steps == 30 and job.config.channels == (8,) * 4


def test_expansion_order_and_ids_are_stable_when_an_entry_is_appended(tmp_path):
    before = expand(_plan(tmp_path))
    after = expand(_plan(tmp_path, PLAN + BETA, "more.toml"))
    assert [j.id for j in before] == ["vae/square/seed0", "vae/square/seed1"]
    assert [(j.index, j.id) for j in after[:2]] == [(j.index, j.id) for j in before]
    assert [(j.index, j.id) for j in after[2:]] == [(2, "beta-vae/square/seed0")]
    assert [j.config.hash() for j in after[:2]] == [j.config.hash() for j in before]
    # order: entries as listed, then datasets, then seeds
    plan = load_plan("reference-v1")
    ids = [j.id for j in expand(plan)]
    assert ids[:4] == ["vae/square/seed0", "vae/square/seed1", "vae/square/seed2", "vae/arrow/seed0"]
    assert [j.index for j in expand(plan)] == list(range(len(ids))) and len(set(ids)) == len(ids)


def test_only_selects_by_pattern(tmp_path):
    jobs = expand(_plan(tmp_path, PLAN + BETA))
    assert [j.id for j in select(jobs, "vae/square/*")] == ["vae/square/seed0", "vae/square/seed1"]
    assert [j.id for j in select(jobs, "*/seed0")] == ["vae/square/seed0", "beta-vae/square/seed0"]
    # in the order given, each pattern's jobs in plan order, a job matched twice at its first pattern
    assert [j.id for j in select(jobs, "beta-vae/*, vae/*/seed1")] == ["beta-vae/square/seed0", "vae/square/seed1"]
    assert [j.id for j in select(jobs, "*/seed1,*")] == ["vae/square/seed1", "vae/square/seed0", "beta-vae/square/seed0"]
    assert len(select(jobs, None)) == 3
    assert [j.id for j in select(jobs, "2")] == ["beta-vae/square/seed0"]  # job indices, as disentanglement_lib's
    assert [j.index for j in select(jobs, "0-1")] == [0, 1] and [j.index for j in select(jobs, "1-9, 0")] == [1, 2, 0]
    with pytest.raises(FactorbenchError, match="indices run from 0 to 2"):
        select(jobs, "3")
    with pytest.raises(FactorbenchError, match="matches no job; job ids look like vae/square/seed0"):
        select(jobs, "vae/arrow/*")


def test_the_engine_gets_the_jobs_in_the_order_only_gives(tmp_path, monkeypatch):
    import factorbench.baselines.sweep as sweep_module

    given: list[list[str]] = []
    monkeypatch.setitem(sweep_module.ENGINES, "local",
                        lambda req: given.append([j.id for j in req.jobs]) or {j.id: "done" for j in req.jobs})
    plan = _plan(tmp_path, PLAN + BETA)
    run_sweep(plan, tmp_path / "sweep", only="beta-vae/*,*", options=OPTIONS, **QUIET)
    assert given == [["beta-vae/square/seed0", "vae/square/seed0", "vae/square/seed1"]]


def test_reference_plan(tmp_path):
    plan = load_plan("reference-v1")
    jobs = expand(plan)
    # the VAE family on the three torus sets and objects, LSBD-VAE (L = 1024 and 0 on the torus sets, 256 on
    # objects), Ada-GVAE, Ada-ML-VAE and Quessard et al.'s model on all four; VAE, beta-VAE and InfoGAN on the
    # teapot; then the appended LSBD-VAE with L = 0 on objects; then the object-set entries on COIL-100 (the
    # VAE family, LSBD-VAE with L = 0 and 256, Ada-GVAE, Ada-ML-VAE, Quessard); then the ablations (Ada with
    # k = 1 on square and arrow, LSBD-VAE fully labelled with gamma 100 on objects and COIL-100, Quessard at a
    # tenth of the steps on the four sets); three seeds each
    assert plan.name == "reference-v1" and len(jobs) == (7 * 3 + 7 + 3 + 3 + 1 + 2 * 3 + 2 + 3 + 1 + 3 + 1 + 12 + 10) * 3
    assert [j.id for j in jobs[150:153]] == [f"lsbd-vae-0/objects/seed{k}" for k in range(3)]
    coil = [j for j in jobs if j.dataset.name == "coil100" and j.index < 189]
    assert [j.index for j in coil] == list(range(153, 189)) and {j.protocols for j in coil} == {("coil100-lsbd-v1",)}
    objects = {(j.entry.name, j.seed): j.config for j in jobs if j.dataset.name == "objects"}
    assert all(j.config == objects[j.entry.name, j.seed] for j in coil)  # the objects entries' settings
    ablations = [j for j in jobs if j.index >= 189]
    assert {j.entry.name for j in ablations} == {"ada-gvae-k1", "ada-ml-vae-k1", "lsbd-vae-all-g100", "quessard-1k"}
    by_id = {j.id: j.config for j in jobs}
    assert by_id["ada-gvae-k1/arrow/seed1"] == dataclasses.replace(by_id["ada-gvae/arrow/seed1"], k=1)
    assert by_id["lsbd-vae-all-g100/objects/seed2"] == dataclasses.replace(
        by_id["lsbd-vae-256/objects/seed2"], labelled_pairs=2048, gamma=100.0)  # every image of 64 x 64 in a pair
    assert by_id["lsbd-vae-all-g100/coil100/seed0"].labelled_pairs == 100 * 72 // 2
    assert by_id["quessard-1k/objects/seed0"] == dataclasses.replace(by_id["quessard/objects/seed0"], steps=1000)
    # the measured budgets (BASELINES.md, "Budget")
    assert {e.steps for e in plan.entries if "teapot" not in e.datasets and not e.model.startswith("ada-")
            and e.name != "quessard-1k"} == {10000}
    assert {e.steps for e in plan.entries if e.model.startswith("ada-")} == {20000}
    assert {e.model: e.steps for e in plan.entries if "teapot" in e.datasets} == \
        {"vae": 20000, "beta-vae": 20000, "infogan": 30000}
    assert [j.id for j in select(jobs, "vae/square/*")] == [f"vae/square/seed{k}" for k in range(3)]
    by_id = {j.id: j.config for j in jobs}
    assert by_id["beta-vae/square/seed0"].beta == 5.0 and by_id["vae/objects/seed2"].latent_dim == 7
    assert by_id["lsbd-vae-1024/arrow/seed1"].labelled_pairs == 1024 and by_id["lsbd-vae-0/square/seed0"].labelled_pairs == 0
    lsbd_objects = by_id["lsbd-vae-256/objects/seed0"]
    assert (lsbd_objects.circles, lsbd_objects.latent_dim, lsbd_objects.gamma, lsbd_objects.log_t_max) == (1, 7, 1.0, -5.0)
    unlabelled_objects = by_id["lsbd-vae-0/objects/seed1"]
    assert unlabelled_objects == dataclasses.replace(by_id["lsbd-vae-256/objects/seed1"], labelled_pairs=0)
    assert by_id["ada-ml-vae/airplane/seed2"].k == 2 and by_id["ada-gvae/objects/seed0"].latent_dim == 7
    assert by_id["quessard/arrow/seed0"].lam == 0.01 and by_id["quessard/objects/seed1"].cyclic_factors == 1
    assert by_id["dip-vae-i/arrow/seed0"].lambda_d == 10.0 and by_id["dip-vae-ii/arrow/seed0"].lambda_d == 1.0
    assert by_id["annealed-vae/airplane/seed1"].c_steps == 3500 and by_id["factor-vae/square/seed0"].gamma == 1.0
    assert jobs[0].protocols == ("square-lsbd-v1", "square-dependent-v1")
    # Eastwood & Williams' teapot recipe: the sum of squares on [-1, 1], Adam betas (0, 0.9), 10 codes
    teapot = by_id["beta-vae/teapot/seed1"]
    assert (teapot.reconstruction, teapot.recon_sigma ** -2, teapot.adam_beta1, teapot.adam_beta2, teapot.beta,
            teapot.latent_dim) == ("gaussian", pytest.approx(8.0), 0.0, 0.9, 6.0, 10)
    assert by_id["vae/teapot/seed0"].recon_sigma == teapot.recon_sigma and by_id["infogan/teapot/seed2"].info_weight == 6
    assert by_id["infogan/teapot/seed0"].latent_dim == 10
    assert [j for j in jobs if j.id == "vae/teapot/seed0"][0].protocols == ("teapot-dci-v1", "teapot-dependent-v1")


def test_the_standard_dataset_plans_hold_the_settings_their_sources_give():
    """Almudévar & Ortega's and Do & Tran's plans, as BASELINES.md cites them (fixed before they ran)."""
    plan = load_plan("almudevar-ortega-v1")
    jobs = expand(plan)
    assert len(jobs) == 6 * 4 * 3 and {j.seed for j in jobs} == {0} and {e.steps for e in plan.entries} == {10000}
    by_id = {j.id: j.config for j in jobs}
    assert {c.architecture for c in by_id.values()} == {"burgess-2018", "chen-mlp", "burgess", "montero-small"}
    assert all((c.latent_dim, c.lr, c.weight_decay, c.lr_decay_every, c.lr_decay_factor, c.batch_size)
               == (10, 1e-4, 4e-5, 4000, 0.1, 64) for c in by_id.values())
    assert by_id["beta-vae.burgess/dsprites/seed0"].beta == 4.0
    annealed = by_id["annealed-vae.chen-mlp/shapes3d/seed0"]
    assert (annealed.gamma, annealed.c_max, annealed.c_steps) == (1000.0, 25.0, 7000)
    assert by_id["beta-tcvae.montero-small/mpi3d-toy/seed0"].beta == 6.0
    assert by_id["factor-vae.burgess-2018/dsprites/seed0"].gamma == 20.0
    ada = by_id["ada-gvae.burgess/dsprites/seed0"]
    assert (ada.beta, ada.k) == (6.0, 1)
    hfs = by_id["hfs-vae.burgess/mpi3d-toy/seed0"]
    assert (hfs.beta, hfs.gamma, hfs.hfs_pairs) == (1.0, 1.0, 25)
    assert jobs[0].protocols == ("dsprites-dependent-v3", "dsprites-dci-v1")
    # the results of its earlier scorings: the first 10 encoders under v1, the first 20 under v2
    assert plan.datasets["dsprites"].retired == ("dsprites-dependent-v1", "dsprites-dependent-v2")
    assert plan.datasets["shapes3d"].retired == ("shapes3d-dependent-v2",)

    plan = load_plan("do-tran-v1")
    jobs = expand(plan)
    assert len(jobs) == (4 + 5 + 3) * 4 and {j.protocols for j in jobs} == {("dsprites-dci-v1", "dsprites-dependent-v3")}
    by_entry = {j.entry.name: j.config for j in jobs if j.seed == 0}
    assert sorted(c.gamma for n, c in by_entry.items() if n.startswith("factor-vae")) == [10, 20, 50, 100]
    assert sorted(c.beta for n, c in by_entry.items() if n.startswith("beta-vae")) == [1, 4, 10, 20, 50]
    assert sorted(c.gz for n, c in by_entry.items() if n.startswith("aae")) == [10, 20, 50]
    assert all((c.lr, c.adam_beta1, c.adam_beta2, c.latent_dim, c.hidden) == (1e-3, 0.5, 0.99, 10, 128)
               for c in by_entry.values())


@pytest.mark.parametrize("old, new, message", [
    ('model = "vae"', 'model = "vea"', r"\[\[models\]\] #1 \(vea\) model: unknown model 'vea'"),
    ("hidden = 32", "hiden = 32", r"#1 \(vae\) params: unknown parameter 'hiden'"),
    ("hidden = 32", 'hidden = "wide"', r"#1 \(vae\) params: parameter 'hidden' expects int"),
    ('datasets = ["square"]', 'datasets = ["sqare"]', r"datasets: dataset 'sqare' has no \[datasets.sqare\] table"),
    ('"square-dependent-v1"', '"square-depend-v1"',
     r"\[datasets.square\] protocols: unknown protocol 'square-depend-v1'"),
    ('"square-dependent-v1"', '"arrow-dependent-v1"', "arrow-dependent-v1 runs on the arrow dataset, not on square"),
    ("hidden = 32", "steps = 10", r"params: steps is set by the plan"),
    ("seeds = [0, 1]", "seeds = [0, 0]", r"\[budget\] seeds: repeated values"),
    ("steps = 30 ", "steps = 0 ", r"#1 \(vae\) steps: must be positive"),
    ('split = "all"', 'split = "all"\nsplits = "x"', r"\[datasets.square\]: unknown key splits"),
    ('name = "tiny"', 'name = "tiny"\nbudjet = 3', "top level: unknown key budjet"),
    ("[budget]", "[budget", "is not valid TOML"),
    ('split = "all"', 'split = "all"\nretired = ["square-depend-v0"]',
     r"\[datasets.square\] retired: unknown protocol 'square-depend-v0'"),
    ('split = "all"', 'split = "all"\nretired = ["arrow-dependent-v1"]', "arrow-dependent-v1 runs on the arrow dataset"),
    ('split = "all"', 'split = "all"\nretired = ["square-lsbd-v1"]', "square-lsbd-v1 is also in protocols"),
    ('split = "all"', 'split = "tarin"', r"\[datasets.square\] split: square has no split 'tarin'; its splits are "
                                          "correlated-confounded, correlated-single, test, train, validation"),
])
def test_bad_plans_name_the_file_and_key(tmp_path, old, new, message):
    assert old in PLAN
    path = tmp_path / "bad.toml"
    path.write_text(PLAN.replace(old, new, 1))
    with pytest.raises(FactorbenchError, match=message) as info:
        load_plan(path)
    assert str(path) in str(info.value)


def test_more_bad_plans(tmp_path):
    with pytest.raises(FactorbenchError, match=r"'vae' on square is already entry #1; give one of them another name"):
        _plan(tmp_path, PLAN + BETA.replace("beta-vae", "vae").replace(", beta = 4.0", ""))
    with pytest.raises(FactorbenchError, match="neither a file nor a shipped plan; give a .toml file or one of "
                                               "almudevar-ortega-v1, do-tran-v1, precision-square-v1, reference-v1, tonnaer-30k-v1"):
        load_plan(tmp_path / "nowhere.toml")
    text = PLAN + '\n[datasets.arrow]\nprotocols = ["arrow-lsbd-v1"]\n'
    with pytest.raises(FactorbenchError, match=r"\[datasets.arrow\]: no model is trained on it"):
        _plan(tmp_path, text.replace("[[models]]", '[datasets.x]\nprotocols = ["square-lsbd-v1"]\n[[models]]', 0))



def test_jobs_on_the_users_data_need_a_source_before_anything_runs(tmp_path, capsys):
    """A plan may train on a dataset made from the user's copy (coil100); its jobs refuse to start without
    ``--source coil100=DIR`` or with one that does not exist, before any data is prepared."""
    text = PLAN.replace('datasets = ["square"]', 'datasets = ["square", "coil100"]', 1) + \
        '\n[datasets.coil100]\nsplit = "all"\nprotocols = ["coil100-lsbd-v1"]\n'
    plan = _plan(tmp_path, text)
    assert any(j.dataset.name == "coil100" for j in expand(plan))
    sweep = tmp_path / "sweep"
    with pytest.raises(FactorbenchError, match=r"vae/coil100/seed0: protocol coil100-lsbd-v1 is built from your copy "
                                               r"of coil100; pass --source coil100=PATH"):
        run_sweep(plan, sweep, only="vae/coil100/*", echo=lambda s: None)
    with pytest.raises(FactorbenchError, match="--source coil100=.*nowhere: no such file or folder"):
        run_sweep(plan, sweep, only="vae/coil100/*", echo=lambda s: None,
                  options=SweepOptions(sources=(("coil100", str(tmp_path / "nowhere")),)))
    assert not (sweep / "runs").exists()
    plan_file = tmp_path / "coil.toml"
    plan_file.write_text(text)
    for flag, message in [("square=/tmp", "'square' is not made from your data; give DATASET=PATH for one of coil100, "
                                          "modelnet40"),
                          ("coil100", "--source expects key=value")]:
        assert cli(["sweep", str(plan_file), "--source", flag, "--dir", str(sweep)]) == 2
        assert message in capsys.readouterr().err


def test_cli_plan_errors_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(PLAN.replace('model = "vae"', 'model = "vea"'))
    good = tmp_path / "plan.toml"
    good.write_text(PLAN)
    cases = [(["sweep", str(bad), "--dry-run"], "unknown model 'vea'"),
             (["sweep", str(good), "--only", "x/*", "--dir", str(tmp_path / "s")], "matches no job"),
             (["sweep", str(good), "--engine", "cloud"], "invalid choice: 'cloud'"),
             (["sweep", str(good), "--jobs", "0", "--dir", str(tmp_path / "s")], "--jobs must be >= 1"),
             (["sweep", str(good), "--data-workers", "0", "--dir", str(tmp_path / "s")],
              "--data-workers 0: give a number of processes"),
             (["sweep", str(good), "--status", "--dry-run"], "give one of"),
             (["sweep", str(good), "--slurm", "partition=x"], "need --engine slurm"),
             (["sweep", str(good), "--engine", "slurm", "--slurm", "time=0:03:00", "--slurm", "signal_delay_s=170"],
              "each attempt would be requeued before it trained"),
             (["sweep", str(good), "--engine", "slurm", "--slurm", "additional_parameters=x"], "sbatch.OPTION=VALUE")]
    for argv, message in cases:
        assert cli(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()
    assert cli(["sweep", str(good), "--dry-run", "--dir", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "2 jobs" in out and "vae/square/seed1" in out and "to run" in out and not (tmp_path / "s").exists()


def test_a_jobs_results_record_the_commit_it_started_from_not_one_checked_out_while_it_trained(tmp_path,
                                                                                              monkeypatch):
    """The checkout can move on while a job trains (a commit landing during a long sweep): the commit its
    results record is the one read when the job began, whose code the process loaded."""
    import subprocess

    from factorbench.baselines import trainer
    from factorbench.benchmark import environment

    head = {"commit": "a" * 40}

    def git(args, **kwargs):
        out = head["commit"] if "rev-parse" in args else ""
        return subprocess.CompletedProcess(args, 0, stdout=out, stderr="")

    def training_while_the_checkout_moves(*args, **kwargs):
        head["commit"] = "b" * 40
        return real_train(*args, **kwargs)
    real_train = trainer.train
    for cached in (environment.source_commit, environment.environment_record):
        cached.cache_clear()
    try:
        monkeypatch.setattr(environment, "source_root", lambda: tmp_path)
        monkeypatch.setattr(environment.subprocess, "run", git)
        monkeypatch.setattr(trainer, "train", training_while_the_checkout_moves)
        plan = _plan(tmp_path)
        job = expand(plan)[0]
        assert run_job(job, tmp_path / "s", plan, OPTIONS) == "done" and head["commit"] == "b" * 40
        for protocol in job.protocols:
            result = json.loads(result_path(tmp_path / "s", protocol, job).read_text())
            assert result["environment"]["factorbench_commit"] == "a" * 40
    finally:
        for cached in (environment.source_commit, environment.environment_record):
            cached.cache_clear()


def test_data_workers_reach_the_datasets_preparation(tmp_path, monkeypatch):
    """``--data-workers`` (``SweepOptions.data_workers``) is the number of processes that generate a job's
    dataset where the cache lacks it."""
    from factorbench.baselines.sweep import _prepare_data
    from factorbench.benchmark import cache

    monkeypatch.setenv("FACTORBENCH_DATA", str(tmp_path / "data"))
    seen = []

    def preparing(ref, **kwargs):
        seen.append(kwargs["workers"])
        return tmp_path / "data" / "square.h5"
    monkeypatch.setattr(cache, "prepare_dataset", preparing)
    job = expand(_plan(tmp_path))[0]
    assert _prepare_data(job, SweepOptions(data_workers=6)) == tmp_path / "data" / "square.h5"
    assert seen == [6] * len(job.protocols)


def test_default_sweep_directory_is_named_by_the_plan(tmp_path, monkeypatch):
    from factorbench.baselines.sweep import default_sweep_dir

    plan = _plan(tmp_path)
    monkeypatch.setenv("FACTORBENCH_SWEEPS", str(tmp_path / "sweeps"))
    assert default_sweep_dir(plan) == tmp_path / "sweeps" / "tiny"
    monkeypatch.delenv("FACTORBENCH_SWEEPS")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_sweep_dir(plan) == tmp_path / "cache" / "factorbench" / "sweeps" / "tiny"
    # appending an entry changes the plan's hash, not its directory: the finished jobs stay where they are
    assert default_sweep_dir(_plan(tmp_path, PLAN + BETA, "more.toml")) == default_sweep_dir(plan)


# ---------------------------------------------------------------------------------------------- sweeps

def test_local_sweep_writes_one_result_per_protocol_model_seed(swept):
    plan, sweep_dir, seconds = swept
    results = sorted(str(p.relative_to(sweep_dir / "results")) for p in (sweep_dir / "results").rglob("*.json"))
    assert results == [f"{p}/vae/seed{k}.json" for p in ("square-dependent-v1", "square-lsbd-v1") for k in (0, 1)]
    for job in expand(plan):
        for protocol in job.protocols:
            data = json.loads(result_path(sweep_dir, protocol, job).read_text())
            assert data["model"] == "vae" and data["protocol"] == protocol and not data["partial"]
            sweep = data["training"]["sweep"]
            assert sweep["plan_hash"] == plan.hash() and sweep["job"] == job.id and sweep["seed"] == job.seed
            assert data["training"]["config_hash"] == job.config.hash()
            assert data["training"]["budget"] == {"steps": 30, "batch_size": 16, "planned_steps": 30}
            assert data["training"]["trained"]["device"] == "cpu" and data["training"]["trained"]["wall_time_s"] > 0
            # the CPU's model name travels with the time: CPU seconds per job depend on it
            assert data["training"]["trained"]["device_name"] == cpu_model_name() != ""
            # and, where /proc/cpuinfo tells it, what that name leaves out (family, model, vector units)
            assert data["training"]["trained"].get("device_signature") == (cpu_signature() or None)
            assert data["environment"].get("cpu_signature") == (cpu_signature() or None)
            assert "path" not in data["dataset"] and data["timings"]["wall"] > 0
        record = json.loads(state_path(sweep_dir, job).read_text())
        assert record["state"] == "done" and record["attempts"] == 1 and record["cpu_s"] > 0
        assert (sweep_dir / "runs" / record["run_hash"] / "DONE").is_file()
    # the two seeds are different models
    job0, job1 = expand(plan)
    lsbd = [_scores(result_path(sweep_dir, "square-lsbd-v1", job)) for job in (job0, job1)]
    assert lsbd[0] != lsbd[1]
    assert not list(sweep_dir.rglob("*.tmp"))
    print(f"tiny sweep, 2 jobs side by side with the local engine: {seconds:.1f} s")


def test_rerun_skips_everything_and_writes_nothing(swept, capsys):
    plan, sweep_dir, _ = swept
    before = _tree(sweep_dir)
    outcome = run_sweep(plan, sweep_dir, engine="local", parallel=2, options=OPTIONS, **QUIET)
    assert outcome == {"vae/square/seed0": "skipped", "vae/square/seed1": "skipped"}
    assert run_job(expand(plan)[0], sweep_dir, plan, OPTIONS) == "skipped"
    assert cli(["sweep", plan.source, "--dir", str(sweep_dir), "--threads", "1"]) == 0
    assert "2 done, 0 to run" in capsys.readouterr().out
    assert _tree(sweep_dir) == before


def test_a_finished_job_in_another_precision_is_refused_not_rerun(swept, capsys):
    """Precision is part of a job's identity: finished jobs trained in bf16 (fp32 on a CPU without bf16
    units) are skipped under their own --precision and refused under the other one, before any work."""
    plan, sweep_dir, _ = swept
    job = expand(plan)[0]
    trained = json.loads(result_path(sweep_dir, job.protocols[0], job).read_text())["training"]["trained"]
    own, other = trained["precision"], {"bf16": "fp32", "fp32": "bf16"}[trained["precision"]]
    before = _tree(sweep_dir)
    mine = dataclasses.replace(OPTIONS, precision=own)
    assert set(run_sweep(plan, sweep_dir, options=mine, **QUIET).values()) == {"skipped"}
    with pytest.raises(FactorbenchError, match=f"--precision {other}: finished jobs .* 2 in {own} "
                                               r"\(vae/square/seed0, vae/square/seed1\).*another sweep directory"):
        run_sweep(plan, sweep_dir, options=dataclasses.replace(OPTIONS, precision=other), **QUIET)
    assert cli(["sweep", plan.source, "--dir", str(sweep_dir), "--precision", other]) == 2
    assert "use another sweep directory" in capsys.readouterr().err
    assert _tree(sweep_dir) == before


def test_a_row_of_mixed_precisions_is_neither_trained_nor_collected(swept, tmp_path, monkeypatch, capsys):
    """A row's seeds share one precision: with seed 0 finished in its precision, seed 1 is refused (before any
    work) where --precision auto would train it in the other one (a machine of another kind), and a sweep
    directory whose row already mixes them is not collected (nothing written)."""
    import shutil

    from factorbench.baselines import trainer
    from factorbench.baselines.sweep import _row_precisions, check_row_precision, collect

    plan, swept_dir, _ = swept
    sweep_dir = tmp_path / "sweep"
    shutil.copytree(swept_dir, sweep_dir)
    seed0, seed1 = expand(plan)
    own = json.loads(result_path(sweep_dir, seed0.protocols[0], seed0).read_text())["training"]["trained"]["precision"]
    other = {"bf16": "fp32", "fp32": "bf16"}[own]
    for protocol in seed1.protocols:  # seed 1 finished in the other precision (as on another machine)
        path = result_path(sweep_dir, protocol, seed1)
        result = json.loads(path.read_text())
        result["training"]["trained"]["precision"] = other
        path.write_text(json.dumps(result))
    out = tmp_path / "collected"
    with pytest.raises(FactorbenchError, match=rf"1 row of .* mix precisions: vae/square \(seed 0 in {own}; seed 1 "
                                               rf"in {other}\).*nothing was written"):
        collect(plan, sweep_dir, out, **QUIET)
    assert not out.exists()
    for protocol in seed1.protocols:  # seed 1 not trained yet
        result_path(sweep_dir, protocol, seed1).unlink()
    monkeypatch.setattr(trainer, "choose_precision", lambda requested, device: other)
    before = _tree(sweep_dir)
    with pytest.raises(FactorbenchError, match=rf"1 job would train in {other} beside finished seeds of their row "
                                               rf"trained in another precision: vae/square/seed1 \(its row has seed 0 "
                                               rf"in {own}\)"):
        run_sweep(plan, sweep_dir, options=OPTIONS, **QUIET)
    assert cli(["sweep", plan.source, "--dir", str(sweep_dir), "--threads", "1"]) == 2
    assert "A row's seeds share one precision" in capsys.readouterr().err
    assert cli(["sweep", plan.source, "--dir", str(sweep_dir), "--status"]) == 0  # --status says so too
    status = capsys.readouterr().out
    assert f"a sweep here trains in {other}" in status
    assert re.search(rf"vae/square/seed1 +left .* \(row in {own}; refused here, where it would train in {other}\)",
                     status)
    assert _tree(sweep_dir) == before
    rows = _row_precisions(expand(plan), sweep_dir)
    check_row_precision([seed1], rows, own)  # in the row's own precision it trains
    check_row_precision([seed0], rows, other)  # a job's own results do not count (rescored if retrained)
    assert len(collect(plan, sweep_dir, out, **QUIET)) == 2  # one finished seed, no mix: collected


def test_status_says_which_checkpoints_and_rows_a_sweep_here_would_not_continue(swept, tmp_path):
    """A checkpoint's precision comes from its header; --status names it where a sweep here would train in
    another (the trainer then refuses the resume), and says nothing more where they agree."""
    from factorbench.baselines.sweep import JobStatus, _checkpoint

    plan, sweep_dir, _ = swept
    job = expand(plan)[0]
    run_dir = sweep_dir / "runs" / json.loads(state_path(sweep_dir, job).read_text())["run_hash"]
    own = json.loads(result_path(sweep_dir, job.protocols[0], job).read_text())["training"]["trained"]["precision"]
    assert _checkpoint(run_dir) == (30, own) and _checkpoint(tmp_path) == (None, "")
    jobs = {j.id: j for j in expand(_plan(tmp_path, PLAN.replace("seeds = [0, 1]", "seeds = [0, 1, 2]")))}
    statuses = [JobStatus(jobs["vae/square/seed0"], "done", cpu_s=60.0),
                JobStatus(jobs["vae/square/seed1"], "interrupted", step=10, checkpoint_precision="bf16",
                          row_precisions=("bf16",)),
                JobStatus(jobs["vae/square/seed2"], "left", row_precisions=("bf16",))]
    elsewhere = format_status(plan, statuses, sweep_dir, precision_here="fp32")
    assert "a sweep here trains in fp32" in elsewhere
    assert "interrupted (step 10 of 30, in bf16: a sweep here, in fp32, does not resume it)" in elsewhere
    assert "left  (row in bf16; refused here, where it would train in fp32)" in elsewhere
    same = format_status(plan, statuses, sweep_dir, precision_here="bf16")
    assert "interrupted (step 10 of 30)" in same and "left  (row in bf16)" in same and "refused" not in same


def test_a_changed_finished_entry_is_refused(swept, tmp_path):
    plan, sweep_dir, _ = swept
    changed = _plan(tmp_path, PLAN.replace("hidden = 32", "hidden = 48"))
    before = _tree(sweep_dir)
    with pytest.raises(FactorbenchError, match=r"(?s)vae/square/seed0 under square-lsbd-v1.*config hash.*A finished "
                                               r"entry is never changed"):
        run_sweep(changed, sweep_dir, options=OPTIONS, **QUIET)
    assert _tree(sweep_dir) == before


def test_status_counts_and_failure(swept, tmp_path, monkeypatch, capsys):
    plan, done_dir, _ = swept
    sweep_dir = tmp_path / "sweep"
    shutil.copytree(done_dir, sweep_dir)
    more = f"""
[[models]]
model = "beta-vae"
datasets = ["square"]
seeds = [0, 1, 2, 3]
params = {{ {TINY} }}
"""
    plan = _plan(tmp_path, PLAN + more)
    jobs = {j.id: j for j in expand(plan)}

    def boom(*args, **kwargs):
        raise FactorbenchError("the dataset went away: regenerate it")

    monkeypatch.setattr("factorbench.baselines.sweep._train_and_evaluate", boom)
    with pytest.raises(FactorbenchError, match="went away"):
        run_job(jobs["beta-vae/square/seed0"], sweep_dir, plan, OPTIONS)
    # a job killed while it ran: its state says running, but nobody holds its lock
    state = state_path(sweep_dir, jobs["beta-vae/square/seed1"])
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({"state": "running", "config_hash": jobs["beta-vae/square/seed1"].config.hash(),
                                 "attempts": 1, "cpu_s": 36.0, "wall_s": 40.0}))
    with _job_lock(sweep_dir, jobs["beta-vae/square/seed2"]) as mine:  # another process works on seed 2
        assert mine
        statuses = sweep_status(plan, sweep_dir)
        assert cli(["sweep", plan.source, "--dir", str(sweep_dir), "--status"]) == 0
        out = capsys.readouterr().out
    states = {s.job.id: s.state for s in statuses}
    assert states == {"vae/square/seed0": "done", "vae/square/seed1": "done", "beta-vae/square/seed0": "failed",
                      "beta-vae/square/seed1": "interrupted", "beta-vae/square/seed2": "running",
                      "beta-vae/square/seed3": "left"}
    assert "6 jobs: 2 done, 1 running, 1 failed, 1 interrupted, 1 left" in out
    assert re.search(r"beta-vae/square/seed0 +failed  [\d.]+ CPU min, 1 attempt\n"
                     r" +the dataset went away: regenerate it", out), out
    spent = sum(s.cpu_s for s in statuses)
    assert spent > 36.0 and f"CPU time spent: {spent / 3600:.2f} h" in out
    # the estimate: the finished jobs' CPU seconds per step, times the steps left
    done = [s for s in statuses if s.state == "done"]
    rate = np.mean([s.cpu_s / 30 for s in done])
    assert f"estimate for the rest: {rate * 4 * 30 / 3600:.2f} CPU h" in out
    assert " vae/square/seed0" not in format_status(plan, statuses, sweep_dir)
    assert " vae/square/seed0" in format_status(plan, statuses, sweep_dir, verbose=True)
    assert sweep_status(plan, sweep_dir, only="beta-vae/*/seed3")[0].state == "left"


def test_status_estimate_leaves_out_steps_trained_elsewhere(swept, tmp_path):
    """A run placed in runs/ finished (trained outside the sweep) costs the sweep no CPU time: its job
    records its steps as external and the estimate leaves them out; jobs of an entry with no finished job
    take the rate of the same model on other datasets before the sweep's average."""
    from factorbench.baselines.sweep import JobStatus, _estimate_cpu_s, _run_step

    plan, sweep_dir, _ = swept
    records = [json.loads(state_path(sweep_dir, j).read_text()) for j in expand(plan)]
    assert [r["external_steps"] for r in records] == [0, 0]  # trained by the sweep
    run_dir = sweep_dir / "runs" / records[0]["run_hash"]
    assert _run_step(run_dir, 30) == 30 and _run_step(sweep_dir / "runs" / "nothing", 30) == 0
    plan2 = _plan(tmp_path, PLAN + BETA.replace("seeds = [0]", "seeds = [0, 1, 2]"))
    jobs = {j.id: j for j in expand(plan2)}
    statuses = [JobStatus(jobs["vae/square/seed0"], "done", cpu_s=60.0),           # 2 CPU s a step
                JobStatus(jobs["beta-vae/square/seed0"], "done", cpu_s=3.0, external_steps=30),  # only evaluated
                JobStatus(jobs["beta-vae/square/seed1"], "done", cpu_s=90.0),      # 3 CPU s a step
                JobStatus(jobs["vae/square/seed1"], "left"),
                JobStatus(jobs["beta-vae/square/seed2"], "interrupted", step=10)]
    assert _estimate_cpu_s(statuses) == pytest.approx(2.0 * 30 + 3.0 * 20)
    # no finished beta-vae job trained by the sweep: the whole sweep's rate
    statuses[2] = JobStatus(jobs["beta-vae/square/seed1"], "left")
    assert _estimate_cpu_s(statuses) == pytest.approx(2.0 * 30 + 2.0 * 30 + 2.0 * 20)
    assert _estimate_cpu_s(statuses[1:]) is None
    # a restored job trained on a GPU: its CPU seconds per step are no estimate of a CPU's
    statuses[0] = JobStatus(jobs["vae/square/seed0"], "done", cpu_s=6.0, restored=True, trained_on="cuda")
    assert _estimate_cpu_s(statuses) is None
    statuses[0] = JobStatus(jobs["vae/square/seed0"], "done", cpu_s=60.0, restored=True, trained_on="cpu")
    assert _estimate_cpu_s(statuses) == pytest.approx(2.0 * 30 + 2.0 * 30 + 2.0 * 20)


def test_status_estimate_takes_the_same_architecture_on_the_same_dataset_before_the_sweeps_average(tmp_path):
    """A job whose entry has no finished job takes the CPU seconds per step of finished jobs of the same
    architecture on the same dataset (a step's cost is mostly the network's and the image's) before those of
    its model elsewhere or the sweep's average; the status says how many jobs took the sweep's average."""
    from factorbench.baselines.sweep import JobStatus, _estimate

    mlp = f"""
[[models]]
name = "vae-mlp"
model = "vae"
datasets = ["square"]
params = {{ {TINY}, architecture = "mlp" }}
"""
    plan = _plan(tmp_path, PLAN + BETA.replace("seeds = [0]", "seeds = [0, 1]") + mlp)
    jobs = {j.id: j for j in expand(plan)}
    done_burgess = JobStatus(jobs["vae/square/seed0"], "done", cpu_s=60.0)  # 2 CPU s a step
    done_mlp = JobStatus(jobs["vae-mlp/square/seed0"], "done", cpu_s=150.0)  # 5 CPU s a step
    left = [JobStatus(jobs["beta-vae/square/seed0"], "left"), JobStatus(jobs["vae-mlp/square/seed1"], "left")]
    # beta-vae (burgess, like vae) takes vae's rate, not the sweep's average of 3.5
    assert _estimate([done_burgess, done_mlp, *left]) == (pytest.approx(2.0 * 30 + 5.0 * 30), 2, 0)
    # without a finished burgess job, nothing is like it: the sweep's average, and the status says so
    assert _estimate([done_mlp, *left]) == (pytest.approx(5.0 * 30 + 5.0 * 30), 1, 1)
    text = format_status(plan, [done_mlp, *left], tmp_path)
    assert "(from 1 finished job; 1 of the 2 not done have no finished job of their entry, architecture or model " \
           "and take the sweep's average)" in text
    assert "sweep's average" not in format_status(plan, [done_burgess, done_mlp, *left], tmp_path)


def test_a_job_failing_in_its_process_is_reported(tmp_path, data_dir, capsys):
    """A job that fails in its own process: the sweep says so and exits 1; --status shows the error."""
    plan = _plan(tmp_path, PLAN + BETA.replace("beta = 4.0", "beta = 4.0, lr = 1e12"))  # diverges at once
    argv = ["sweep", plan.source, "--dir", str(tmp_path / "sweep"), "--threads", "1", "--only", "beta-vae/*"]
    assert cli(argv) == 1
    out = capsys.readouterr().out
    assert "beta-vae/square/seed0: failed: beta-vae: loss, recon, kl became nan by step 30" in out
    assert "1 job failed: beta-vae/square/seed0; see --status" in out
    assert cli(argv + ["--status"]) == 0
    out = capsys.readouterr().out
    assert "1 job: 0 done, 0 running, 1 failed, 0 interrupted, 0 left" in out and "Lower lr" in out


def test_collect_writes_mean_and_std_of_finished_runs(swept, tmp_path, capsys):
    from factorbench.benchmark.results import reference_results, scores_table

    plan, sweep_dir, _ = swept
    plan3 = _plan(tmp_path, PLAN.replace("seeds = [0, 1]", "seeds = [0, 1, 2]"))  # seed 2 never ran
    out = tmp_path / "reference"
    written = collect(plan3, sweep_dir, out, **QUIET)
    assert sorted(str(p.relative_to(out)) for p in written) == ["square-dependent-v1/vae.json",
                                                                 "square-lsbd-v1/vae.json"]
    doc = json.loads((out / "square-lsbd-v1" / "vae.json").read_text())
    assert doc["model"] == "vae" and doc["seeds"] == [0, 1] and doc["missing_seeds"] == [2] and len(doc["runs"]) == 2
    runs = [json.loads(result_path(sweep_dir, "square-lsbd-v1", j).read_text()) for j in expand(plan)]
    # the first run is kept whole (its plots); the others leave out the plot-only point clouds, nothing else
    assert doc["runs"][0] == runs[0]
    slim = doc["runs"][1]
    assert "projections" in runs[1]["metrics"]["d_lsbd"]["result"]
    assert slim["metrics"]["d_lsbd"]["result"]["omitted"] == ["projections"]
    for label, entry in runs[1]["metrics"].items():
        kept = {k: v for k, v in entry["result"].items() if k != "projections"}
        assert {k: v for k, v in slim["metrics"][label]["result"].items() if k != "omitted"} == kept
        assert slim["metrics"][label]["scalars"] == entry["scalars"]
    assert {k: v for k, v in slim.items() if k not in ("metrics", "checksum")} == \
        {k: v for k, v in runs[1].items() if k not in ("metrics", "checksum")}
    values = [r["metrics"]["d_lsbd"]["scalars"]["score"] for r in runs]
    assert doc["summary"]["d_lsbd.score"] == {"mean": pytest.approx(np.mean(values)),
                                              "std": pytest.approx(np.std(values, ddof=1)), "n": 2}
    # the score tables read the file as two runs of one model, with the same mean and std
    assert [r.model for r in reference_results("square-lsbd-v1", out / "square-lsbd-v1")["vae"]] == ["vae", "vae"]
    table = scores_table("square-lsbd-v1", out / "square-lsbd-v1")
    model, n, cells, _ = table.rows[0]
    mean, std = cells[table.columns.index("d_lsbd.score")]
    assert (model, n) == ("vae", 2)
    assert mean == pytest.approx(np.mean(values)) and std == pytest.approx(np.std(values, ddof=1))
    # collecting again, or after appending an entry, rewrites nothing
    before = _tree(out)
    assert collect(plan3, sweep_dir, out, **QUIET) == []
    appended = _plan(tmp_path, PLAN.replace("seeds = [0, 1]", "seeds = [0, 1, 2]") + BETA, "more.toml")
    assert collect(appended, sweep_dir, out, **QUIET) == []
    assert _tree(out) == before
    # a file of another config is never replaced
    other = json.loads((out / "square-lsbd-v1" / "vae.json").read_text())
    other["runs"][0]["training"]["config_hash"] = "0" * 64
    (out / "square-lsbd-v1" / "vae.json").write_text(json.dumps(other))
    with pytest.raises(FactorbenchError, match="finished entries are never replaced"):
        collect(plan, sweep_dir, out, **QUIET)
    assert cli(["sweep", plan.source, "--dir", str(sweep_dir), "--collect", str(tmp_path / "ref2")]) == 0
    assert "2 reference files written" in capsys.readouterr().out
    # --complete-only leaves out an entry with a seed not finished, and says so
    assert collect(plan3, sweep_dir, tmp_path / "ref3", echo=print, complete_only=True) == []
    assert "left out square-lsbd-v1/vae: seeds [2] not finished" in capsys.readouterr().out
    assert not (tmp_path / "ref3").exists()
    assert cli(["sweep", plan.source, "--dir", str(sweep_dir), "--collect", str(tmp_path / "ref4"),
                "--complete-only"]) == 0
    assert "2 reference files written" in capsys.readouterr().out  # plan's seeds [0, 1] are all finished
    assert cli(["sweep", plan.source, "--dir", str(sweep_dir), "--complete-only"]) == 2
    assert "give it with --collect" in capsys.readouterr().err


def test_restore_puts_collected_runs_back_into_a_new_sweep_directory(swept, tmp_path, capsys):
    """A sweep continued on a new machine: the reference files' runs go back into an empty sweep directory,
    the jobs they finished are skipped, collecting again rewrites nothing, and nothing is ever replaced."""
    plan, sweep_dir, _ = swept
    out = tmp_path / "reference"
    collect(plan, sweep_dir, out, **QUIET)
    fresh = tmp_path / "fresh"
    written = restore(plan, fresh, out, **QUIET)
    assert len(written) == 4  # 2 seeds x 2 protocols
    for job in expand(plan):
        for protocol in job.protocols:
            restored = json.loads(result_path(fresh, protocol, job).read_text())
            original = json.loads(result_path(sweep_dir, protocol, job).read_text())
            assert _scores(result_path(fresh, protocol, job)) == _scores(result_path(sweep_dir, protocol, job))
            assert restored["training"] == original["training"]
    statuses = sweep_status(plan, fresh)
    assert [(s.state, s.restored, s.trained_on) for s in statuses] == [("done", True, "cpu")] * 2
    # the training CPU time the runs recorded (the estimate uses it), not counted as spent in this directory
    trained = [json.loads(result_path(sweep_dir, "square-lsbd-v1", j).read_text())["training"]["trained"]
               for j in expand(plan)]
    assert [s.cpu_s for s in statuses] == [t["cpu_time_s"] for t in trained] and all(t["cpu_time_s"] > 0 for t in trained)
    assert "CPU time spent: 0.00 h (wall 0.00 h)" in format_status(plan, statuses, fresh)
    assert "2 of the done restored from reference files" in format_status(plan, statuses, fresh)
    # the sweep skips them (nothing trained), collecting rewrites nothing, restoring again writes nothing
    before = _tree(fresh)
    assert run_sweep(plan, fresh, options=OPTIONS, **QUIET) == {j.id: "skipped" for j in expand(plan)}
    assert not (fresh / "runs").exists()
    ref_before = _tree(out)
    assert collect(plan, fresh, out, **QUIET) == [] and _tree(out) == ref_before
    assert restore(plan, fresh, out, **QUIET) == [] and _tree(fresh) == before
    # without restoring, collecting into those files from a directory that lacks their seeds is refused
    partial = tmp_path / "partial"
    shutil.copytree(fresh, partial)
    for path in (partial / "results").rglob("seed1.json"):
        path.unlink()
    with pytest.raises(FactorbenchError, match="lacks; .* --restore"):
        collect(plan, partial, out, **QUIET)
    # runs of another plan are left out; a tampered run fails its checksum
    other = tmp_path / "other"
    shutil.copytree(out, other)
    doc = json.loads((other / "square-lsbd-v1" / "vae.json").read_text())
    (other / "square-lsbd-v1" / "vae.json").write_text(json.dumps({**doc, "plan": "another"}))
    lines = []
    restore(plan, tmp_path / "fresh2", other, echo=lines.append)
    assert any("not written by a sweep of plan tiny" in line for line in lines)
    assert not (tmp_path / "fresh2" / "results" / "square-lsbd-v1").exists()
    doc["runs"][1]["metrics"]["d_lsbd"]["scalars"]["score"] += 0.1
    (other / "square-lsbd-v1" / "vae.json").write_text(json.dumps(doc))
    with pytest.raises(FactorbenchError, match="was edited"):
        restore(plan, tmp_path / "fresh3", other, **QUIET)
    assert cli(["sweep", plan.source, "--dir", str(tmp_path / "fresh4"), "--restore", str(out)]) == 0
    assert "restored 4 results" in capsys.readouterr().out
    assert cli(["sweep", plan.source, "--restore", str(out), "--collect"]) == 2


def test_collect_keeps_a_replaced_run_whose_weights_another_protocol_scored(swept, tmp_path):
    """A job trained again replaces its run in a reference file with a run of other weights; the old run is
    kept among the superseded runs where another protocol's shipped result scored its weights (a retired
    protocol's record), the meta-evaluation's companion join finds it there, and nothing else is kept."""
    from factorbench.benchmark.experiments.metric_meta_evaluation import same_weights, with_superseded
    from factorbench.benchmark.results import (EvaluationResult, _parse_result, reference_results, superseded_dir,
                                               superseded_results)

    plan, sweep_dir, _ = swept
    out, out2 = tmp_path / "reference", tmp_path / "reference2"
    collect(plan, sweep_dir, out, **QUIET)
    collect(plan, sweep_dir, out2, **QUIET)
    old = json.loads((out / "square-lsbd-v1" / "vae.json").read_text())["runs"][1]
    copy = tmp_path / "sweep"
    shutil.copytree(sweep_dir / "results", copy / "results")
    job = expand(plan)[1]

    def trained_again(protocol: str) -> None:
        path = result_path(copy, protocol, job)
        data = _parse_result(json.loads(path.read_text()), "run").to_dict()
        data["training"] = {**data["training"], "weights_sha256": "f" * 64}
        path.write_text(EvaluationResult(**data).to_json())

    # seed 1 trained again and scored under square-lsbd-v1 only: square-dependent-v1 keeps the old weights' result
    trained_again("square-lsbd-v1")
    lines: list[str] = []
    collect(plan, copy, out, echo=lines.append)
    kept_dir = superseded_dir(out)
    assert kept_dir == tmp_path / "reference-superseded"
    assert any(line.startswith(f"kept {kept_dir / 'square-lsbd-v1' / 'vae.json'} (seed 1:") for line in lines)
    kept = superseded_results("square-lsbd-v1", kept_dir / "square-lsbd-v1")
    assert list(kept) == ["vae"] and [r.checksum() for r in kept["vae"]] == [old["checksum"]]
    companion = reference_results("square-lsbd-v1", out / "square-lsbd-v1")
    assert [(r.training or {}).get("weights_sha256") for r in companion["vae"]][1] == "f" * 64
    results = reference_results("square-dependent-v1", out / "square-dependent-v1")
    assert len(same_weights(companion, results)["vae"]) == 1  # seed 1's companion run scored other weights
    joined = same_weights(with_superseded(companion, kept, results), results)["vae"]
    assert [r.checksum() for r in joined] == [companion["vae"][0].checksum(), old["checksum"]]
    # collecting again writes nothing; a seed kept once keeps its first run
    before = {**_tree(out), **{f"kept/{k}": v for k, v in _tree(kept_dir).items()}}
    collect(plan, copy, out, **QUIET)
    assert {**_tree(out), **{f"kept/{k}": v for k, v in _tree(kept_dir).items()}} == before
    # where every protocol scored the new weights, the old run is dropped, as before
    trained_again("square-dependent-v1")
    collect(plan, copy, out2, **QUIET)
    assert not superseded_dir(out2).exists()
    assert [(r.training or {}).get("weights_sha256") for r in reference_results(
        "square-dependent-v1", out2 / "square-dependent-v1")["vae"]][1] == "f" * 64


def test_collect_leaves_out_a_run_scored_on_other_images_than_the_pinned_copy(swept, tmp_path):
    """A run scored on images another renderer drew (same spec, other bytes) is no reference run: collecting
    names it and counts its seed as missing, so --complete-only leaves its entry out."""
    plan, sweep_dir, _ = swept
    copy = tmp_path / "sweep"
    shutil.copytree(sweep_dir / "results", copy / "results")
    job = expand(plan)[1]
    path = result_path(copy, "square-lsbd-v1", job)
    run = json.loads(path.read_text())
    assert run["dataset"]["same_images_as_reference"] is True
    run["dataset"] = {**run["dataset"], "same_images_as_reference": False, "renderer": "another renderer",
                      "sha256": {**run["dataset"]["sha256"], "images": "f" * 64}}
    path.write_text(json.dumps(run))
    lines: list[str] = []
    out = tmp_path / "reference"
    collect(plan, copy, out, echo=lines.append)
    doc = json.loads((out / "square-lsbd-v1" / "vae.json").read_text())
    assert doc["seeds"] == [0] and doc["missing_seeds"] == [job.seed] and len(doc["runs"]) == 1
    assert any(line.startswith(f"left out {job.id} under square-lsbd-v1: scored on images (sha256 ffffffffffff, "
                               "another renderer) other than the copy the protocol pins") and str(path) in line
               for line in lines), lines
    # the other protocol's run of the same job scored the pinned images: kept
    assert json.loads((out / "square-dependent-v1" / "vae.json").read_text())["seeds"] == [0, 1]
    lines.clear()
    assert collect(plan, copy, tmp_path / "complete", echo=lines.append, complete_only=True) \
        == [tmp_path / "complete" / "square-dependent-v1" / "vae.json"]
    assert f"left out square-lsbd-v1/vae: seeds [{job.seed}] not finished" in lines


def _restored_with_a_result_of_other_weights(swept, tmp_path):
    """A sweep directory restored from the collected reference files, then job 0's second result removed
    and its first made to name other weights (``0`` * 64): (plan, reference dir, directory, job, result)."""
    plan, sweep_dir, _ = swept
    out = tmp_path / "reference"
    collect(plan, sweep_dir, out, **QUIET)
    job = expand(plan)[0]
    first, second = job.protocols
    fresh = tmp_path / "fresh"
    restore(plan, fresh, out, **QUIET)
    result_path(fresh, second, job).unlink()
    other = json.loads(result_path(fresh, first, job).read_text())
    other["training"]["weights_sha256"] = "0" * 64
    result_path(fresh, first, job).write_text(json.dumps(other))
    return plan, out, fresh, job, other


def test_restore_leaves_out_a_run_of_other_weights_than_the_jobs_results(swept, tmp_path):
    """A job's protocols score one run: where the sweep directory holds a result of other weights whose run is
    finished there (the sweep scores the missing protocol on it), the reference file's run of the same job is
    not restored beside it, nor is a source that brings only some of the job's protocols."""
    plan, out, fresh, job, other = _restored_with_a_result_of_other_weights(swept, tmp_path)
    first, second = job.protocols  # the first scored another run of the same job, finished here
    (fresh / "runs" / other["training"]["run_hash"]).mkdir(parents=True)
    (fresh / "runs" / other["training"]["run_hash"] / "DONE").write_text("{}")
    before = _tree(fresh)
    lines: list[str] = []
    assert restore(plan, fresh, out, echo=lines.append) == []
    assert any(f"{job.id} under {second}: the sweep directory holds results of other weights (000000000000)"
               in line for line in lines), lines
    assert _tree(fresh) == before and not job_done(job, fresh)
    # a source with one of the job's two protocols does not replace them either, finished run or not
    shutil.rmtree(fresh / "runs")
    partial = tmp_path / "partial"
    shutil.copytree(out, partial)
    shutil.rmtree(partial / second)
    assert restore(plan, fresh, partial, **QUIET) == [] and not job_done(job, fresh)
    # without the odd result, both of the job's runs come back
    result_path(fresh, first, job).unlink()
    assert sorted(restore(plan, fresh, out, **QUIET)) == sorted(result_path(fresh, p, job) for p in job.protocols)
    assert job_done(job, fresh)


def test_restore_replaces_results_whose_weights_are_nowhere_by_a_whole_run(swept, tmp_path):
    """Results of other weights that no finished run of the sweep directory holds (restored without weights,
    the job unfinished) are a dead end: the sweep would train the job again. A source that scored every
    protocol of the job on one run (another machine trained it again) takes their place at once, with a job
    record saying where it came from; the sweep then skips the job."""
    plan, out, fresh, job, _ = _restored_with_a_result_of_other_weights(swept, tmp_path)
    sweep_dir = swept[1]  # the first result scored an older run of the job, its weights not kept
    state_path(fresh, job).write_text(json.dumps({"job": job.id, "state": "interrupted", "attempts": 2}))
    lines: list[str] = []
    written = restore(plan, fresh, out, echo=lines.append)
    assert sorted(written) == sorted(result_path(fresh, p, job) for p in job.protocols)
    assert any(line.startswith(f"{job.id}: the sweep directory's results scored weights (000000000000)")
               for line in lines), lines
    assert job_done(job, fresh)
    for protocol in job.protocols:
        assert json.loads(result_path(fresh, protocol, job).read_text())["training"] == \
            json.loads(result_path(sweep_dir, protocol, job).read_text())["training"]
    record = json.loads(state_path(fresh, job).read_text())
    assert (record["state"], record["restored"]) == ("done", str(out))
    assert run_sweep(plan, fresh, options=OPTIONS, **QUIET)[job.id] == "skipped"
    # restoring again changes nothing: the job is done
    before = _tree(fresh)
    assert restore(plan, fresh, out, **QUIET) == [] and _tree(fresh) == before


def _wait_for(predicate, timeout: float = 120.0, process: subprocess.Popen | None = None) -> None:
    deadline = time.time() + timeout
    while not predicate():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the process ended first: {process.communicate()}")
        if time.time() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.1)


def _training_step(sweep_dir: Path) -> int:
    """The step logged last by the run being trained (0 before the first log line)."""
    logs = list((sweep_dir / "runs").glob("*/log.csv")) if (sweep_dir / "runs").is_dir() else []
    lines = logs[0].read_text().splitlines() if logs else []
    return int(lines[-1].split(",")[0]) if len(lines) > 1 else 0


@pytest.mark.slow
def test_kill_in_the_middle_then_rerun_equals_an_uninterrupted_sweep(tmp_path, data_dir):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it), then SIGTERM to the sweep alone (its job
    checkpoints; exit 130 each time), then SIGKILL to the whole process group while the job trains (as a power
    cut): re-running completes with the scores and weights of an uninterrupted sweep, and no result file is
    ever half-written."""
    text = PLAN.replace("steps = 30 ", "steps = 900 ").replace("seeds = [0, 1]", "seeds = [0]")
    plan = _plan(tmp_path, text)
    job = expand(plan)[0]
    run_job(job, tmp_path / "whole", plan, OPTIONS)  # the uninterrupted sweep

    sweep_dir = tmp_path / "sweep"
    args = [sys.executable, "-m", "factorbench.benchmark.cli", "sweep", plan.source, "--dir", str(sweep_dir),
            "--threads", "1", "--checkpoint-every", "0.5", "--record-every", "0.5"]
    env = {**os.environ, "FACTORBENCH_DATA": str(data_dir)}
    step, cpu = 0, 0.0
    for attempt, stop in enumerate(["ctrl-c", "sigterm", "sigkill"], 1):
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
        _wait_for(lambda: _training_step(sweep_dir) >= step + 100, process=proc)
        if stop == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
        elif stop == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its job, at once
        out, err = proc.communicate(timeout=120)
        if stop != "sigkill":
            assert proc.returncode == 130, err
            assert "run the same command again to resume" in err and "Traceback" not in err
            record = json.loads(state_path(sweep_dir, job).read_text())
            assert record["state"] == "interrupted" and record["error"].startswith("interrupted at step")
        _wait_for(lambda: sweep_status(plan, sweep_dir)[0].state != "running", 30)  # the kernel frees the lock
        status = sweep_status(plan, sweep_dir)[0]
        assert status.state == "interrupted" and status.attempts == attempt
        # a stopped job checkpoints where it stopped; a killed one keeps its last periodic checkpoint
        assert (step < status.step if stop == "sigkill" else step + 100 <= status.step) and status.step < 900
        assert status.cpu_s > cpu  # the CPU time of killed attempts counts too
        step, cpu = status.step, status.cpu_s
        assert not (sweep_dir / "results").exists()

    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    for protocol in job.protocols:
        path = result_path(sweep_dir, protocol, job)
        assert _scores(path) == _scores(result_path(tmp_path / "whole", protocol, job))
    assert sorted(p.name for p in (sweep_dir / "results").rglob("*") if p.is_file()) == ["seed0.json", "seed0.json"]
    record = json.loads(state_path(sweep_dir, job).read_text())
    assert record["state"] == "done" and record["attempts"] == 4
    from safetensors.numpy import load_file

    a = load_file(str(next((sweep_dir / "runs").glob("*/weights.safetensors"))))
    b = load_file(str(next((tmp_path / "whole" / "runs").glob("*/weights.safetensors"))))
    assert all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("phase", ["preparing the data", "evaluating"])
def test_sigterm_outside_training_stops_a_local_job_at_once(tmp_path, data_dir, monkeypatch, phase):
    """A local job answers SIGTERM where the trainer's handler is not installed too (while it prepares its data
    or evaluates its run): it stops at once, "interrupted", with no result half-written, and the next run
    completes it. submitit's job process ignores SIGTERM by default: the test installs that disposition, so a
    job that does not answer the signal runs to the end and the test fails."""
    import factorbench.baselines.sweep as sweep_module
    import factorbench.benchmark.evaluation as evaluation

    plan = _plan(tmp_path, PLAN.replace("seeds = [0, 1]", "seeds = [0]").replace(', "square-dependent-v1"', ""))
    (job,) = expand(plan)
    sweep_dir = tmp_path / "sweep"

    def terminate_then(fn):
        def wrapped(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.5)  # the handler runs between two bytecodes of this thread, here at the latest
            return fn(*args, **kwargs)
        return wrapped

    if phase == "evaluating":
        monkeypatch.setattr(evaluation, "evaluate", terminate_then(evaluation.evaluate))
    else:
        monkeypatch.setattr(sweep_module, "_prepare_data", terminate_then(sweep_module._prepare_data))
    def bypass(signum, frame):  # as submitit's job process does
        return None

    previous = signal.signal(signal.SIGTERM, bypass)
    try:
        with pytest.raises(FactorbenchError, match="stopped while preparing the data or evaluating") as caught:
            sweep_module.SweepJob(plan, sweep_dir, OPTIONS)(job.id)
        assert signal.getsignal(signal.SIGTERM) is bypass  # the job's handler is gone, the bypass back in place
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert getattr(caught.value, "exit_status", None) == 130
    record = json.loads(state_path(sweep_dir, job).read_text())
    assert record["state"] == "interrupted" and record["error"] == "stopped while preparing the data or evaluating"
    assert not (sweep_dir / "results").exists() or not any(p.is_file() for p in (sweep_dir / "results").rglob("*"))
    assert _training_step(sweep_dir) == (30 if phase == "evaluating" else 0)
    if phase == "evaluating":  # the next run scores the trained run
        monkeypatch.undo()
        assert run_job(job, sweep_dir, plan, OPTIONS) == "done"
        assert _training_step(sweep_dir) == 30
        assert [p.name for p in (sweep_dir / "results").rglob("*") if p.is_file()] == ["seed0.json"]


def _fake_slurm(tmp_path: Path, monkeypatch) -> Path:
    """sbatch, srun, scontrol, sinfo, sacct and squeue stand-ins on PATH: sbatch keeps the submission file and
    answers with job 4242; scontrol records its arguments; sinfo has one partition, gpu, of two days."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {"sbatch": f'cp "$1" {tmp_path}/submitted.sh\necho "Submitted batch job 4242"\n', "srun": "exit 0\n",
               "scontrol": f'echo "$@" >> {tmp_path}/scontrol.txt\n', "sinfo": 'echo "gpu*|2-00:00:00"\n',
               "sacct": "exit 0\n", "squeue": "exit 0\n"}
    for name, body in scripts.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "submitted.sh"


def _slurm_task(sweep_dir: Path, job_id: str, data_dir: Path, rank: int = 0, ntasks: int = 1) -> subprocess.Popen:
    """Run SLURM job ``job_id`` (``4242``, or ``4242_1`` for an array task) as SLURM would: submitit's entry
    point with SLURM's variables (task ``rank`` of ``ntasks``)."""
    array, _, task = job_id.partition("_")
    env = {**os.environ, "FACTORBENCH_DATA": str(data_dir), "SUBMITIT_EXECUTOR": "slurm", "SLURM_JOB_ID": array,
           "SLURM_NTASKS": str(ntasks), "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank), "SLURM_NODEID": "0",
           "SLURM_JOB_NUM_NODES": "1"}
    if task:
        env.update(SLURM_JOB_ID=str(5000 + int(task)), SLURM_ARRAY_JOB_ID=array, SLURM_ARRAY_TASK_ID=task)
    return subprocess.Popen([sys.executable, "-u", "-m", "submitit.core._submit", str(sweep_dir / "submitit" / "%j")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_slurm_engine_submits_one_requeueable_array(tmp_path, monkeypatch):
    submitted = _fake_slurm(tmp_path, monkeypatch)
    plan = _plan(tmp_path, PLAN + BETA)
    outcome = run_sweep(plan, tmp_path / "sweep", engine="slurm", parallel=2, only="*/seed0", options=OPTIONS,
                        settings={"partition": "gpu", "time": "0:30:00", "gpus_per_node": 1, "setup": "module load x",
                                  "sbatch.reservation": "maint"}, **QUIET)
    assert outcome == {"vae/square/seed0": "submitted", "beta-vae/square/seed0": "submitted"}
    script = submitted.read_text()
    for line in ("--array=0-1%2", "--requeue", "--signal=USR2@120", "--partition=gpu", "--time=30", "--gpus-per-node=1",
                 "--cpus-per-task=1", "--job-name=factorbench-tiny", "--reservation=maint"):
        assert f"#SBATCH {line}\n" in script
    assert "\nmodule load x\n" in script
    from factorbench.baselines.slurm import latest_ids, read_submissions

    assert latest_ids(tmp_path / "sweep") == {"vae/square/seed0": "4242_0", "beta-vae/square/seed0": "4242_1"}
    # a second submission (default time: the partition's MaxTime of two days caps nothing below a day; every job
    # at once) keeps the first one's ids
    run_sweep(plan, tmp_path / "sweep", engine="slurm", only="vae/*", options=OPTIONS, **QUIET)
    script = submitted.read_text()
    assert "#SBATCH --time=1440\n" in script and "#SBATCH --array=0-1%2\n" in script
    assert [len(s["jobs"]) for s in read_submissions(tmp_path / "sweep")] == [2, 2]
    monkeypatch.setenv("PATH", "/nowhere")
    with pytest.raises(FactorbenchError, match="--engine slurm needs a SLURM cluster"):
        run_sweep(plan, tmp_path / "sweep", engine="slurm", options=OPTIONS, **QUIET)


@pytest.mark.parametrize("settings, message", [
    ({"time": "3-00:00:00"}, "longer than partition gpu's MaxTime of 2880 minutes"),
    ({"partition": "nope"}, "no such partition; it has gpu"),
    ({"time": "1", "signal_delay_s": 120}, "each attempt would be requeued before it trained"),
    ({"time": "ten"}, "is not a SLURM time"),
    ({"additional_parameters": "x"}, "sbatch.OPTION=VALUE"),
    ({"partion": "gpu"}, "unknown setting; choose one of partition, time"),
    ({"sbatch.array": "0-3"}, "the sweep sets --array itself"),
    ({"mem": "lots"}, "not a SLURM memory size")])
def test_slurm_settings_are_checked_before_anything_is_submitted(tmp_path, monkeypatch, settings, message):
    submitted = _fake_slurm(tmp_path, monkeypatch)
    plan = _plan(tmp_path)
    with pytest.raises(FactorbenchError, match=re.escape(message)):
        run_sweep(plan, tmp_path / "sweep", engine="slurm", options=OPTIONS, settings=settings, **QUIET)
    assert not submitted.exists() and not (tmp_path / "sweep" / "slurm.json").exists()


def test_slurm_refusal_and_status_from_squeue_and_sacct(tmp_path, monkeypatch):
    _fake_slurm(tmp_path, monkeypatch)
    plan = _plan(tmp_path)
    (tmp_path / "bin" / "sbatch").write_text("#!/bin/sh\necho 'sbatch: error: invalid account: nobody' >&2\n"
                                             "echo 'sbatch: error: Batch job submission failed' >&2\nexit 1\n")
    with pytest.raises(FactorbenchError, match="SLURM refused the submission: sbatch: error: invalid account: nobody"):
        run_sweep(plan, tmp_path / "sweep", engine="slurm", options=OPTIONS, settings={"account": "nobody"}, **QUIET)
    (tmp_path / "bin" / "sbatch").write_text("#!/bin/sh\necho 'Submitted batch job 4242'\n")
    run_sweep(plan, tmp_path / "sweep", engine="slurm", options=OPTIONS, **QUIET)
    (tmp_path / "bin" / "squeue").write_text("#!/bin/sh\necho '4242_1|PENDING|PartitionTimeLimit'\n")
    (tmp_path / "bin" / "sacct").write_text("#!/bin/sh\necho '4242_0|OUT_OF_MEMORY|None'\n"
                                            "echo '4242_[1]|PENDING|PartitionTimeLimit'\n")
    statuses = {s.job.id: s for s in sweep_status(plan, tmp_path / "sweep")}
    assert statuses["vae/square/seed0"].slurm == ("SLURM 4242_0: OUT_OF_MEMORY, killed for exceeding its memory "
                                                  "(raise mem)")
    assert statuses["vae/square/seed1"].slurm == "SLURM 4242_1: PENDING (PartitionTimeLimit)"
    text = format_status(plan, list(statuses.values()), tmp_path / "sweep")
    assert "left  [SLURM 4242_1: PENDING (PartitionTimeLimit)]" in text


def test_the_lock_probe_never_turns_a_starting_job_away(tmp_path):
    """--status probes a job's lock; a job taking it at that moment waits instead of calling itself busy, and
    a held lock still reads 'running'."""
    import fcntl

    from factorbench.baselines.sweep import _lock_held, _lock_path

    plan = _plan(tmp_path)
    job = expand(plan)[0]
    sweep_dir = tmp_path / "sweep"
    path = _lock_path(sweep_dir, job)
    path.parent.mkdir(parents=True)
    with open(path, "a") as probe:  # a probe holds the lock (shared) for a moment
        fcntl.flock(probe, fcntl.LOCK_SH)
        with _job_lock(sweep_dir, job, retry_s=0.3) as mine:
            assert mine is False  # still held after the retries
        import threading

        threading.Timer(0.3, lambda: fcntl.flock(probe, fcntl.LOCK_UN)).start()
        with _job_lock(sweep_dir, job, retry_s=5.0) as mine:  # released while the job retries
            assert mine is True
        with _job_lock(sweep_dir, job) as mine:
            assert mine is True and _lock_held(sweep_dir, job)
        assert not _lock_held(sweep_dir, job)


def test_a_file_system_without_locks_is_a_clear_error(tmp_path, monkeypatch):
    import errno
    import fcntl

    import factorbench.baselines.sweep as sweep_module

    def no_flock(fh, operation):
        raise OSError(errno.ENOSYS, "Function not implemented")

    plan = _plan(tmp_path)
    monkeypatch.setattr(sweep_module.fcntl, "flock", no_flock)
    with pytest.raises(FactorbenchError, match="does not support file locks.*on Lustre: mounted with -o flock"):
        run_sweep(plan, tmp_path / "sweep", options=OPTIONS, **QUIET)
    assert fcntl.flock is no_flock  # (the module's fcntl is the one patched)
    assert not (tmp_path / "sweep" / "runs").exists()  # before any job started


@pytest.mark.slow
def test_slurm_preemption_requeues_and_resumes_from_the_checkpoint(tmp_path, monkeypatch, data_dir):
    """A SLURM array task preempted (USR2) while it trains asks SLURM to requeue it; the requeued task resumes the
    run from its checkpoint and finishes the job."""
    _fake_slurm(tmp_path, monkeypatch)
    plan = _plan(tmp_path, PLAN.replace("steps = 30 ", "steps = 600 ").replace("seeds = [0, 1]", "seeds = [0]"))
    sweep_dir = tmp_path / "sweep"
    options = SweepOptions(threads=1, samples=False, checkpoint_every_s=0.5)
    run_sweep(plan, sweep_dir, engine="slurm", options=options, **QUIET)
    task = _slurm_task(sweep_dir, "4242", data_dir)  # one job: not an array
    _wait_for(lambda: _training_step(sweep_dir) >= 150, process=task)
    task.send_signal(signal.SIGUSR2)
    out, err = task.communicate(timeout=120)
    assert "preempted" in err and (tmp_path / "scontrol.txt").read_text().split() == ["requeue", "4242"]
    first = sweep_status(plan, sweep_dir)[0]
    assert first.state == "interrupted" and first.step >= 150
    task = _slurm_task(sweep_dir, "4242", data_dir)  # SLURM starts the requeued job
    out, err = task.communicate(timeout=300)
    assert task.returncode == 0, err
    job = expand(plan)[0]
    record = json.loads(state_path(sweep_dir, job).read_text())
    assert record["state"] == "done" and record["attempts"] == 2
    log = next((sweep_dir / "runs").glob("*/log.csv")).read_text().splitlines()[1:]
    steps = [int(line.split(",")[0]) for line in log]
    assert steps == sorted(set(steps)) and steps[-1] == 600
    assert all(result_path(sweep_dir, p, job).is_file() for p in job.protocols)


def _plain(notes: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n for n in notes if ": input check (" not in n)


def test_scores_refuse_results_whose_plan_entry_or_model_config_changed(swept, tmp_path, monkeypatch):
    """A collected row is shown only while the shipped plan still asks for what it trained, and the
    current model code builds the same config (hash); a plan that is not shipped is named in a note."""
    import factorbench.baselines.plan as plan_module
    from factorbench.baselines.vae import VAEConfig
    from factorbench.benchmark.results import format_table, scores_table

    plan, sweep_dir, _ = swept
    out = tmp_path / "reference"
    collect(plan, sweep_dir, out, **QUIET)
    folder = out / "square-lsbd-v1"
    shipped = tmp_path / "plans"
    shipped.mkdir()
    monkeypatch.setattr(plan_module, "PLANS_DIR", shipped)
    # not shipped: shown, with a note
    table = scores_table("square-lsbd-v1", folder)
    # (the 30-step tiny VAE's codes are tiny: the input checks' note is left out of these comparisons)
    assert [r[0] for r in table.rows] == ["vae"] and "'tiny' is not shipped" in _plain(table.notes)[0]
    assert "'tiny' is not shipped" in format_table(table)
    # shipped and unchanged (comments and appended entries do not matter): fully checked, no note
    (shipped / "tiny.toml").write_text("# a comment\n" + PLAN + BETA)
    assert _plain(scores_table("square-lsbd-v1", folder).notes) == ()
    assert "| vae | 2 |" in format_table(scores_table("square-lsbd-v1", folder))
    # the shipped plan asks for a seed that has not finished: the row says how many of how many
    (shipped / "tiny.toml").write_text(PLAN.replace("seeds = [0, 1]", "seeds = [0, 1, 2]"))
    table = scores_table("square-lsbd-v1", folder)
    assert table.unfinished == (("vae", 3),) and table.runs_cell("vae", 2) == "2 of 3"
    assert _plain(table.notes) == ("vae: 2 of the 3 seeds plan tiny asks for (seed 2 not finished yet); its mean and std "
                           "may still move",)
    assert "| vae | 2 of 3 |" in format_table(table)
    assert format_table(table, "csv").splitlines()[1].startswith("vae,2,yes,3,")
    assert " & 2 of 3 & " in format_table(table, "latex")
    (shipped / "tiny.toml").write_text(PLAN)
    # without PyTorch only the plan's settings are compared, and the table says so
    monkeypatch.setattr(plan_module, "_models_available", lambda: False)
    assert "not against the model code" in _plain(scores_table("square-lsbd-v1", folder).notes)[0]
    monkeypatch.undo()
    monkeypatch.setattr(plan_module, "PLANS_DIR", shipped)
    edits = [(PLAN.replace("hidden = 32", "hidden = 64"), "now sets hidden = 64"),
             (PLAN.replace("steps = 30 ", "steps = 40 "), "now sets steps = 40"),
             (PLAN.replace("seeds = [0, 1]", "seeds = [1]"), "no longer has seed 0"),
             (PLAN.replace('"square-lsbd-v1", ', ""), "no longer evaluates square under square-lsbd-v1"),
             (PLAN.replace('split = "all"', 'split = "train"'), "now trains on the 'train' split"),
             (PLAN.replace('model = "vae"', 'model = "beta-vae"\nname = "vae"'), "now trains 'beta-vae'"),
             (PLAN.replace('model = "vae"', 'model = "vae"\nname = "vae2"'), "no longer has the entry 'vae'")]
    for text, message in edits:
        (shipped / "tiny.toml").write_text(text)
        with pytest.raises(FactorbenchError, match=re.escape(message) + ".*stale|stale.*" + re.escape(message)):
            scores_table("square-lsbd-v1", folder)
    # the model's code changed what it learns (a version bump): stale, named by the config versions
    (shipped / "tiny.toml").write_text(PLAN)
    monkeypatch.setattr(VAEConfig, "version", VAEConfig.version + 1)
    with pytest.raises(FactorbenchError, match="stale.*config version 2, the run's 1"):
        scores_table("square-lsbd-v1", folder)


# ------------------------------------------------------------------------------------------------ packing

def test_visible_gpus_and_slots():
    from factorbench.baselines.gpus import GpuSlots, visible_gpus

    assert visible_gpus("cpu", {"CUDA_VISIBLE_DEVICES": "0,1"}) == ()
    assert visible_gpus("auto", {"CUDA_VISIBLE_DEVICES": "2, 3"}) == (2, 3)
    assert visible_gpus("auto", {"CUDA_VISIBLE_DEVICES": ""}) == ()
    assert visible_gpus("cuda", {}, count=3) == (0, 1, 2)
    with pytest.raises(FactorbenchError, match="UUID or MIG"):
        visible_gpus("auto", {"CUDA_VISIBLE_DEVICES": "GPU-8a3f,1"})
    slots = GpuSlots((4, 7), pack=2)
    assert slots.capacity == 4
    assert [slots.take() for _ in range(3)] == [4, 7, 4]  # the least busy GPU, the lowest index on a tie
    slots.give_back(4)
    assert slots.take() == 4 and slots.take() == 7
    with pytest.raises(RuntimeError):
        slots.take()
    with pytest.raises(FactorbenchError, match="--pack must be >= 1"):
        GpuSlots((0,), pack=0)


def test_pack_is_refused_without_a_gpu_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(PLAN)
    assert cli(["sweep", str(plan_file), "--pack", "4", "--dir", str(tmp_path / "sweep")]) == 2
    assert "--pack 4: no CUDA GPU is visible here" in capsys.readouterr().err
    assert cli(["sweep", str(plan_file), "--device", "cuda", "--dir", str(tmp_path / "sweep")]) == 2
    assert "--device cuda: no CUDA GPU is visible" in capsys.readouterr().err
    assert not (tmp_path / "sweep").exists()


def test_local_sweep_gives_each_job_a_gpu_of_its_own_pack(tmp_path, data_dir, monkeypatch):
    """Three jobs on two (pretend) GPUs, one job per GPU: two at once, each process sees only its GPU (the
    jobs themselves train on the CPU here, which has no CUDA)."""
    import factorbench.baselines.sweep as sweep_module

    monkeypatch.setenv("FACTORBENCH_DATA", str(data_dir))
    monkeypatch.setattr(sweep_module, "visible_gpus", lambda device: (3, 5))
    plan = _plan(tmp_path, PLAN.replace(', "square-dependent-v1"', "") + BETA)  # one protocol: the packing is tested
    lines: list[str] = []
    outcome = run_sweep(plan, tmp_path / "sweep", pack=1, options=SweepOptions(samples=False), echo=lines.append)
    assert sorted(outcome.values()) == ["done"] * 3
    assert lines[1] == "training on GPUs 3, 5: up to 1 job per GPU, 2 at once, " \
        f"{max(1, (os.cpu_count() or 1) // 2)} CPU thread{'s' if (os.cpu_count() or 1) // 2 > 1 else ''} each"
    starts = [line for line in lines if line.startswith("started ")]
    assert starts[0].endswith("on GPU 3") and starts[1].endswith("on GPU 5")
    records = {j.id: json.loads(state_path(tmp_path / "sweep", j).read_text()) for j in expand(plan)}
    assert sorted(r["cuda_visible_devices"] for r in records.values()) in (["3", "3", "5"], ["3", "5", "5"])
    for line in starts:  # the GPU the engine named is the one the job's process saw
        job_id, gpu = line.split()[1], line.split()[-1]
        assert records[job_id]["cuda_visible_devices"] == gpu
    # a packed job is the run trained alone: the same weights as train() of its config in this process
    from safetensors.numpy import load_file

    from factorbench.baselines.trainer import TrainOptions, train

    job = expand(plan)[2]
    alone = train(job.config, "square", tmp_path / "alone", split=job.dataset.split,
                  options=TrainOptions(progress=False, samples=False, threads=max(1, (os.cpu_count() or 1) // 2)))
    packed = load_file(str(tmp_path / "sweep" / "runs" / records[job.id]["run_hash"] / "weights.safetensors"))
    single = load_file(str(alone.run_dir / "weights.safetensors"))
    assert alone.run_hash == records[job.id]["run_hash"] and packed.keys() == single.keys()
    assert all(np.array_equal(packed[k], single[k]) for k in packed)


def test_slurm_pack_runs_k_jobs_per_array_task(tmp_path, monkeypatch, data_dir):
    """--pack 2 under SLURM: three jobs in two array tasks of two SLURM tasks each; task r of an array task
    trains the group's r-th job, a task without a job returns at once."""
    submitted = _fake_slurm(tmp_path, monkeypatch)
    plan = _plan(tmp_path, PLAN.replace(', "square-dependent-v1"', "") + BETA)  # one protocol: the packing is tested
    sweep_dir = tmp_path / "sweep"
    outcome = run_sweep(plan, sweep_dir, engine="slurm", pack=2, options=OPTIONS, **QUIET)
    assert sorted(outcome.values()) == ["submitted"] * 3
    script = submitted.read_text()
    assert "#SBATCH --array=0-1%2\n" in script and "#SBATCH --ntasks-per-node=2\n" in script
    from factorbench.baselines.slurm import latest_ids

    ids = latest_ids(sweep_dir)
    jobs = [j.id for j in expand(plan)]
    assert ids == {jobs[0]: "4242_0", jobs[1]: "4242_0", jobs[2]: "4242_1"}

    procs = [_slurm_task(sweep_dir, array_task, data_dir, rank, 2) for array_task in ("4242_0", "4242_1")
             for rank in (0, 1)]
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
    assert all(job_done(j, sweep_dir) for j in expand(plan))
    from submitit.core.utils import JobPaths

    idle = JobPaths(sweep_dir / "submitit" / "%j", job_id="4242_1", task_id=1).result_pickle
    assert idle.is_file() and "idle" in str(__import__("pickle").loads(idle.read_bytes()))


def test_a_plan_can_fix_its_precision(tmp_path):
    """precision = "fp32" in a plan: part of its hash, taken by the sweep under --precision auto, and a clash
    with --precision is refused; the fp32 replicates plan holds reference-v1's square entries, seed 0."""
    fixed = _plan(tmp_path, PLAN.replace('description = "two seeds of a tiny VAE on square"',
                                         'description = "two seeds of a tiny VAE on square"\nprecision = "fp32"'),
                  name="fixed.toml")
    assert fixed.precision == "fp32" and fixed.hash() != _plan(tmp_path).hash()
    assert parse_plan(fixed.to_table()) == fixed
    with pytest.raises(FactorbenchError, match="--precision bf16: plan tiny trains in fp32"):
        run_sweep(fixed, tmp_path / "sweep", options=dataclasses.replace(OPTIONS, precision="bf16"), **QUIET)
    with pytest.raises(FactorbenchError, match="precision.*'fp64': choose bf16, fp16 or fp32"):
        _plan(tmp_path, PLAN.replace('name = "tiny"', 'name = "tiny"\nprecision = "fp64"'), name="bad.toml")
    replicates, reference = load_plan("precision-square-v1"), load_plan("reference-v1")
    assert replicates.precision == "fp32" and reference.precision is None
    by_id = {j.id: j.config for j in expand(reference)}
    jobs = expand(replicates)
    assert len(jobs) == 12 and all(j.seed == 0 and j.dataset.name == "square" for j in jobs)
    assert all(j.config == by_id[j.id] for j in jobs)  # the shipped seed 0's configs, exactly
    assert {j.entry.name for j in jobs} == {j.entry.name for j in expand(reference)
                                            if j.dataset.name == "square" and j.index < 189}  # not the ablations


def test_a_run_is_not_stale_for_a_setting_its_config_leaves_out_at_the_default():
    """Recorded configs leave out weight_decay, lr_decay_every and lr_decay_factor at their defaults (so that
    older runs keep their hashes); a plan entry that states one of them at its default still matches."""
    import copy

    from factorbench.baselines.plan import sweep_run_problem
    from factorbench.benchmark.results import REFERENCE_DIR

    path = REFERENCE_DIR / "dsprites-dependent-v1" / "beta-vae.chen-mlp.json"
    training = json.loads(path.read_text())["runs"][0]["training"]
    assert "lr_decay_factor" not in training["config"]["params"]  # the entry states 0.1, the default
    assert sweep_run_problem(training, "dsprites-dependent-v1", "beta-vae.chen-mlp") == ("", "config")
    changed = copy.deepcopy(training)
    changed["config"]["params"]["lr_decay_factor"] = 0.5
    problem, _ = sweep_run_problem(changed, "dsprites-dependent-v1", "beta-vae.chen-mlp")
    assert "lr_decay_factor = 0.1 (the run: 0.5)" in problem
    # dsprites-dependent-v1 is retired in that plan (its results stay valid); a protocol neither run nor retired
    # is not
    assert sweep_run_problem(training, "dsprites-dependent-v2", "beta-vae.chen-mlp") == ("", "config")
    problem, _ = sweep_run_problem(training, "dsprites-color-dci-v1", "beta-vae.chen-mlp")
    assert problem == "plan almudevar-ortega-v1 no longer evaluates dsprites under dsprites-color-dci-v1"


def test_pending_keeps_finished_seeds_of_unfinished_entries_across_machines(swept, tmp_path, capsys):
    """--collect --pending DIR: an entry with a seed still to run goes to DIR (not the reference folder), comes
    back on a new machine with --restore DIR, and leaves DIR once it is collected complete."""
    plan, sweep_dir, _ = swept
    plan3 = _plan(tmp_path, PLAN.replace("seeds = [0, 1]", "seeds = [0, 1, 2]"))  # seed 2 never ran
    out, pending = tmp_path / "reference", tmp_path / "pending"
    written = collect(plan3, sweep_dir, out, pending=pending, **QUIET)
    assert not out.exists()
    assert sorted(str(p.relative_to(pending)) for p in written) == ["square-dependent-v1/vae.json",
                                                                     "square-lsbd-v1/vae.json"]
    doc = json.loads((pending / "square-lsbd-v1" / "vae.json").read_text())
    assert doc["seeds"] == [0, 1] and doc["missing_seeds"] == [2]
    # a new machine whose sweep directory lacks seed 0: collecting from it would drop that seed
    partial = tmp_path / "partial"
    restore(plan3, partial, pending, **QUIET)
    for protocol in ("square-lsbd-v1", "square-dependent-v1"):
        result_path(partial, protocol, expand(plan3)[0]).unlink()
    with pytest.raises(FactorbenchError, match=f"seeds \\[0\\] that {partial} lacks.*--restore {pending}"):
        collect(plan3, partial, out, pending=pending, **QUIET)
    fresh = tmp_path / "fresh"
    assert len(restore(plan3, fresh, pending, **QUIET)) == 4  # 2 seeds x 2 protocols
    assert sum(job_done(job, fresh) for job in expand(plan3)) == 2
    before = _tree(pending)
    assert collect(plan3, fresh, out, pending=pending, **QUIET) == []  # byte-identical: nothing rewritten
    assert _tree(pending) == before and not out.exists()
    # the entry complete (here: a plan asking for the two finished seeds) goes to the reference folder, and its
    # pending file goes away
    assert cli(["sweep", plan.source, "--dir", str(fresh), "--collect", str(out), "--pending", str(pending)]) == 0
    printed = capsys.readouterr().out
    assert "2 reference files written" in printed and "the entry is complete in" in printed
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.json")) == ["square-dependent-v1/vae.json",
                                                                            "square-lsbd-v1/vae.json"]
    assert not list(pending.rglob("*.json"))
    assert json.loads((out / "square-lsbd-v1" / "vae.json").read_text())["missing_seeds"] == []
    # user errors
    assert cli(["sweep", plan.source, "--dir", str(fresh), "--pending", str(pending)]) == 2
    assert "give it with --collect" in capsys.readouterr().err
    with pytest.raises(FactorbenchError, match="the reference folder itself"):
        collect(plan3, fresh, out, pending=out, **QUIET)


def test_a_job_trained_again_scores_its_restored_results_again(tmp_path, data_dir, monkeypatch):
    """A protocol added to a plan makes a finished job run again; on a new machine its run trains again and
    may give other weights (another device): the results restored for it are scored again, so that every
    protocol of a job scores one set of weights. Results of the same weights are kept as they are."""
    import factorbench.baselines.checkpoint as checkpoint

    one = _plan(tmp_path, PLAN.replace(', "square-dependent-v1"', "").replace("seeds = [0, 1]", "seeds = [0]"), "a.toml")
    both = _plan(tmp_path, PLAN.replace("seeds = [0, 1]", "seeds = [0]"), "b.toml")
    (job_one,), (job,) = expand(one), expand(both)
    assert run_job(job_one, tmp_path / "first", one, OPTIONS) == "done"
    collect(one, tmp_path / "first", tmp_path / "ref", **QUIET)
    lsbd = "square-lsbd-v1"
    # the same weights (same device, threads, precision): the restored result is kept byte for byte
    restore(both, tmp_path / "same", tmp_path / "ref", **QUIET)
    kept = result_path(tmp_path / "same", lsbd, job).read_bytes()
    assert run_job(job, tmp_path / "same", both, OPTIONS) == "done"
    assert result_path(tmp_path / "same", lsbd, job).read_bytes() == kept
    # other weights: scored again, and both results name the weights they scored
    restore(both, tmp_path / "other", tmp_path / "ref", **QUIET)
    (status,) = sweep_status(both, tmp_path / "other", ask_slurm=False)
    assert (status.state, status.cpu_s) == ("left", 0.0)  # restored, then a protocol added: not "interrupted"
    monkeypatch.setattr(checkpoint, "weights_sha256", lambda path: "f" * 64)
    assert run_job(job, tmp_path / "other", both, OPTIONS) == "done"
    for protocol in job.protocols:
        assert json.loads(result_path(tmp_path / "other", protocol, job).read_text())["training"]["weights_sha256"] \
            == "f" * 64


def test_a_retired_protocol_round_trips_and_changes_the_hash_only_where_set(tmp_path):
    plan = _plan(tmp_path)
    retiring = _plan(tmp_path, PLAN.replace(', "square-dependent-v1"', "").replace(
        'split = "all"', 'split = "all"\nretired = ["square-dependent-v1"]'), "r.toml")
    assert retiring.datasets["square"].retired == ("square-dependent-v1",)
    assert expand(retiring)[0].protocols == ("square-lsbd-v1",)  # nothing runs for a retired protocol
    assert parse_plan(retiring.to_table()) == retiring and retiring.hash() != plan.hash()
    assert "retired" not in plan.to_table()["datasets"]["square"]  # plans without it keep their hashes
