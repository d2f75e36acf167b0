"""The precision-effect analysis: shifts in seed standard deviations, the fragility rule, pairing checks."""

from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np
import pytest

from factorbench.benchmark.experiments.precision_effect import (
    MetricShift, format_precision_effect, main, precision_effect)
from factorbench.benchmark.results import reference_results, save_runs
from factorbench.generators.errors import FactorbenchError

PROTOCOL = "square-lsbd-v1"


@pytest.fixture(scope="module")
def shipped():
    return reference_results(PROTOCOL)


def _std(runs, key):
    return float(np.std([r.scalars()[key] for r in runs], ddof=1))


def _replicate(run, moves: dict[str, float], precision: str = "fp32"):
    """``run`` retrained in ``precision``: each scalar ``key`` moved by ``moves[key]``."""
    metrics = copy.deepcopy(run.metrics)
    for key, delta in moves.items():
        label, name = key.split(".", 1)
        metrics[label]["scalars"][name] += delta
        if name in metrics[label].get("result", {}):  # the metric's own result agrees, as in a real run
            metrics[label]["result"][name] = metrics[label]["scalars"][name]
    training = copy.deepcopy(run.training)
    training["trained"] = {**training.get("trained", {}), "precision": precision, "device_name": "Test CPU"}
    return dataclasses.replace(run, metrics=metrics, training=training)


def _seed0(runs):
    return next(r for r in runs if r.training["sweep"]["seed"] == 0)


def test_shifts_are_measured_in_the_rows_seed_standard_deviations(shipped):
    vae, beta = shipped["vae"], shipped["beta-vae"]
    mig, sap = "mig.score", "sap.score"
    replicate = {
        "vae": [_replicate(_seed0(vae), {mig: 2 * _std(vae, mig), sap: 0.5 * _std(vae, sap)})],
        "beta-vae": [_replicate(_seed0(beta), {mig: -3 * _std(beta, mig)})],
    }
    effect = precision_effect(PROTOCOL, shipped, replicate)
    assert effect.models == ("vae", "beta-vae")
    assert effect.keys == tuple(_seed0(vae).scalars())
    assert effect.shift("vae", mig).z == pytest.approx(2.0)
    assert effect.shift("beta-vae", mig).z == pytest.approx(-3.0)
    assert effect.shift("vae", sap).z == pytest.approx(0.5)
    assert effect.shift("beta-vae", sap).z == 0.0
    # every other scalar is the shipped value itself
    assert effect.bit_identical() == 2 * len(effect.keys) - 3
    fragile = effect.fragile()
    assert fragile[mig] == (2, 2, True)      # over 1 SD in both models
    assert fragile[sap] == (0, 2, False)     # 0.5 SD and 0
    assert fragile["d_lsbd.score"] == (0, 2, False)
    assert effect.reference_trained["vae"].startswith("bf16")
    assert effect.replicate_trained["vae"] == "fp32 on Test CPU"
    table = format_precision_effect(effect)
    # over 1 SD in both; median |z| 2.5, largest 3.0 (the beta-VAE's), one shift of two positive
    assert "| mig.score | 2 of 2 | 2.5 | 3.0 (beta-vae) | 1 of 2 | yes |" in table
    assert "| sap.score | 0 of 2 | 0.3 | 0.5 (vae) | 1 of 2 | no |" in table  # 0.5 SD and 0
    assert "(+2.0)" in table and "(-3.0)" in table


def test_half_of_the_models_is_enough_to_be_fragile(shipped):
    key = "mig.score"
    replicate = {m: [_replicate(_seed0(shipped[m]), {key: 1.5 * _std(shipped[m], key)} if m == "vae" else {})]
                 for m in ("vae", "beta-vae", "factor-vae")}
    assert precision_effect(PROTOCOL, shipped, replicate).fragile()[key] == (1, 3, False)
    replicate["factor-vae"] = [_replicate(_seed0(shipped["factor-vae"]), {key: -1.5 * _std(shipped["factor-vae"], key)})]
    assert precision_effect(PROTOCOL, shipped, replicate).fragile()[key] == (2, 3, True)


def test_z_of_a_row_without_spread_or_with_non_finite_values():
    assert MetricShift("m", "k", 0, 0.5, 0.5, 0.0).z == 0.0
    assert MetricShift("m", "k", 0, 0.5, 0.6, 0.0).z == math.inf
    assert MetricShift("m", "k", 0, 0.5, 0.4, 0.0).z == -math.inf
    assert MetricShift("m", "k", 0, 0.5, 0.6, None).z is None
    assert MetricShift("m", "k", 0, math.nan, 0.6, 0.1).z is None
    assert MetricShift("m", "k", 0, 0.5, 0.7, 0.1).z == pytest.approx(2.0)


def test_a_replicate_must_repeat_a_shipped_job(shipped):
    run = _seed0(shipped["vae"])
    with pytest.raises(FactorbenchError, match="no shipped row"):
        precision_effect(PROTOCOL, shipped, {"not-a-model": [_replicate(run, {})]})
    other_seed = copy.deepcopy(run.training)
    other_seed["sweep"]["seed"] = 7
    with pytest.raises(FactorbenchError, match="no shipped run of that seed"):
        precision_effect(PROTOCOL, shipped, {"vae": [dataclasses.replace(run, training=other_seed)]})
    other_config = {**run.training, "config_hash": "0" * 64}
    with pytest.raises(FactorbenchError, match="another config"):
        precision_effect(PROTOCOL, shipped, {"vae": [dataclasses.replace(run, training=other_config)]})
    with pytest.raises(FactorbenchError, match="no replicate run"):
        precision_effect(PROTOCOL, shipped, {})


def test_the_command_reads_a_collect_folder(shipped, tmp_path, capsys):
    vae = shipped["vae"]
    folder = tmp_path / "fp32" / PROTOCOL
    folder.mkdir(parents=True)
    save_runs(folder / "vae.json", "vae", [_replicate(_seed0(vae), {"mig.score": 2 * _std(vae, "mig.score")})])
    assert main([str(tmp_path / "fp32")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{PROTOCOL}: replicate minus shipped run")
    assert "| vae | bf16 on " in out and "(+2.0)" in out
    assert main([str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main([str(tmp_path / "fp32"), "--protocol", "no-such-v1"]) == 2
    assert "unknown protocol" in capsys.readouterr().err
