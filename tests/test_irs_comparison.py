"""Suter et al.'s IRS beside other metrics across encoders: rows per run of the plans (and the user's), the
reference encoders left out, Spearman's rho with IRS, the Markdown table and the command."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import spearmanr

from factorbench.benchmark.experiments.irs_comparison import (COLUMNS, PLANS, format_irs_comparison, irs_comparison,
                                                             main)


def _run(plan: str | None, seed: int, **scalars: float) -> SimpleNamespace:
    training = {"sweep": {"plan": plan, "seed": seed}, "config": {"model": "beta-vae"}} if plan else {}
    return SimpleNamespace(training=training, scalars=lambda: {k.replace("_", ".", 1): v for k, v in scalars.items()})


def test_rows_and_correlations_closed_form():
    irs = [0.2, 0.5, 0.4, 0.9]
    mig = [0.1, 0.3, 0.35, 0.2]  # ranks 1, 3, 4, 2 against IRS's 1, 3, 2, 4: rho = 1 - 6 * 8 / 60
    results = {
        "b.model": [_run(PLANS[0], 0, irs_score=irs[0], mig_score=mig[0]),
                    _run(PLANS[0], 1, irs_score=irs[1], mig_score=mig[1])],
        "a.model": [_run(PLANS[1], 0, irs_score=irs[2], mig_score=mig[2])],
        "other-plan": [_run("reference-v1", 0, irs_score=0.0, mig_score=0.0)],
        "pca": [_run(None, 0, irs_score=0.3, mig_score=0.3)],
        "mine": [_run(None, 0, irs_score=irs[3], mig_score=mig[3])],
    }
    result = irs_comparison(results, yours=["mine"])
    assert result.encoders == ("a.model/seed0", "b.model/seed0", "b.model/seed1", "mine/run0")
    assert result.models == ("a.model", "b.model", "b.model", "mine")
    order = [2, 0, 1, 3]
    assert result.values[:, 0].tolist() == [irs[i] for i in order]
    assert result.values[:, 2].tolist() == [mig[i] for i in order]
    assert np.isnan(result.values[:, [1, 3]]).all()  # no DCI D nor FactorVAE in these runs
    assert result.rho[0] == 1.0
    assert result.rho[2] == pytest.approx(spearmanr(irs, mig)[0]) and result.rho[2] == pytest.approx(0.2)
    assert math.isnan(result.rho[1]) and math.isnan(result.rho[3])
    # without "mine" among yours: the plans' three only
    assert irs_comparison(results).encoders == ("a.model/seed0", "b.model/seed0", "b.model/seed1")
    table = format_irs_comparison(result, pending={"a.model"})
    assert table.splitlines()[0] == "| encoder | " + " | ".join(f"{c} ↑" for c in COLUMNS.values()) + " |"
    assert "| a.model/seed0 (pending) | 0.400 | n/a | 0.350 | n/a |" in table
    assert "| b.model/seed0 | 0.200 | n/a | 0.100 | n/a |" in table
    assert table.rstrip().endswith("| Spearman rho with IRS (4 encoders) | 1.00 | n/a | 0.20 | n/a |")
    few = irs_comparison({"b.model": results["b.model"]})
    assert len(few.encoders) == 2 and np.isnan(few.rho).all()  # under 3 encoders: no correlation


def test_the_command_on_the_shipped_rows(capsys, tmp_path):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| encoder | IRS ↑ |") and "| Spearman rho with IRS (" in out
    assert "| pca" not in out and "| ideal" not in out
    (tmp_path / "empty").mkdir()
    assert main(["--dir", str(tmp_path / "empty")]) == 0
    assert capsys.readouterr().out == f"No encoder of {', '.join(PLANS)} is collected yet.\n"
    assert main(["--dir", str(tmp_path / "missing")]) == 2
    assert "--dir" in capsys.readouterr().err


def test_a_plan_name_nothing_was_trained_by_is_refused_where_a_shipped_one_is_not(capsys, tmp_path, monkeypatch):
    import factorbench.benchmark.results as results_module
    from factorbench.benchmark.experiments import do_tran_comparison, metric_meta_evaluation
    from factorbench.benchmark.experiments.metric_meta_evaluation import check_plan_names, plans_of

    results = {"b.model": [_run("my-plan", 0, irs_score=0.5)], "pca": [_run(None, 0, irs_score=0.3)]}
    assert plans_of(results) == {"my-plan"}
    check_plan_names(results, ["my-plan", "reference-v1"])  # collected here; shipped (if not collected yet)
    with pytest.raises(Exception, match=r"--plan 'my-plam': no run here .* come from my-plan \(shipped plans: "):
        check_plan_names(results, ["my-plan", "my-plam"])
    monkeypatch.setattr(results_module, "reference_results", lambda *args, **kwargs: results)
    for command in (main, do_tran_comparison.main, lambda argv: metric_meta_evaluation.main(["dsprites-dependent-v3",
                                                                                              *argv])):
        assert command(["--plan", "my-plam"]) == 2
        err = capsys.readouterr().err
        assert "--plan 'my-plam': no run here was trained by a plan of that name" in err
        assert "the runs here come from my-plan (shipped" in err
    # a shipped plan not collected in the results given: said so, not refused
    assert main(["--plan", "reference-v1"]) == 0
    assert capsys.readouterr().out == "No encoder of reference-v1 is collected yet.\n"
