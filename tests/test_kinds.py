"""Row kinds (from provenance and model config) and the uninformative-row rule of the score tables."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from factorbench.benchmark.kinds import SUPERVISION, row_kind, uninformative_rows
from factorbench.benchmark.results import REFERENCE_DIR, EvaluationResult, format_table, scores_table


def _run(model: str | None = None, **params) -> SimpleNamespace:
    training = {"config": {"model": model, "params": params}} if model else {}
    return SimpleNamespace(training=training)


def test_kinds_come_from_the_provenance_and_the_model_config():
    assert row_kind("ideal", [_run()]) == "oracle"
    assert {row_kind(m, [_run()]) for m in ("random", "pca")} == {"baseline"}
    assert row_kind("my-encoder", [_run()]) == "external"
    assert row_kind("vae", [_run("vae", latent_dim=4)]) == "unsupervised"
    assert row_kind("x", [_run("ada-gvae", k=2)]) == row_kind("y", [_run("ada-ml-vae")]) == "weakly supervised"
    assert row_kind("lsbd-vae-1024", [_run("lsbd-vae", labelled_pairs=1024)]) == "supervised"
    assert row_kind("lsbd-vae-0", [_run("lsbd-vae", labelled_pairs=0)]) == "unsupervised"
    assert row_kind("quessard", [_run("quessard")]) == "supervised"


def test_every_listed_model_exists():
    pytest.importorskip("torch")
    from factorbench.baselines.config import MODELS
    from factorbench.baselines import models  # noqa: F401

    assert set(SUPERVISION) <= set(MODELS)


def test_rows_no_more_informative_than_random_are_flagged():
    columns, directions = ("d_lsbd.score", "dci.informativeness"), ("lower", "lower")
    kinds = {"random": "baseline", "ideal": "oracle", "good": "unsupervised", "collapsed": "unsupervised",
             "tie": "external"}
    means = {"random": [0.98, 0.96], "ideal": [0.0, 0.0], "good": [0.4, 0.25], "collapsed": [0.3, 0.99],
             "tie": [0.5, 0.96]}
    flagged = uninformative_rows(columns, directions, means, kinds)
    assert set(flagged) == {"collapsed", "tie"}  # no better (equal counts as no better); references never
    assert "dci.informativeness 0.990, no better than the random baseline's 0.960" in flagged["collapsed"]
    # a higher-is-better informativeness (downstream accuracy) and a protocol without a random row
    up = uninformative_rows(("independent.downstream.score",), ("higher",),
                            {"random": [0.3], "a": [0.2], "b": [0.5]}, {"a": "unsupervised", "b": "unsupervised"})
    assert set(up) == {"a"}
    assert uninformative_rows(columns, directions, {"good": [0.4, 0.25]}, {"good": "unsupervised"}) == {}
    assert uninformative_rows(("mig.score",), ("higher",), means, kinds) == {}  # nothing to read it from


def test_a_collapsed_row_is_marked_in_scores_and_never_best(tmp_path, capsys):
    """The issue's case: a code that carries (almost) nothing, scored with a low D_LSBD, ranks high by the
    headline; the table marks it and 'best' skips it, and the oracle and baselines."""
    folder = tmp_path / "square-lsbd-v1"
    folder.mkdir()
    for name in ("ideal", "random", "pca"):
        (folder / f"{name}.json").write_text((REFERENCE_DIR / "square-lsbd-v1" / f"{name}.json").read_text())
    run = json.loads((REFERENCE_DIR / "square-lsbd-v1" / "pca.json").read_text())
    run = run["runs"][0] if "runs" in run else run
    run.pop("checksum", None)
    run["model"] = "collapsed"
    run["metrics"]["d_lsbd"]["scalars"]["score"] = run["metrics"]["d_lsbd"]["result"]["score"] = 0.2
    run["metrics"]["dci"]["scalars"]["informativeness"] = run["metrics"]["dci"]["result"]["informativeness"] = 0.99
    (folder / "collapsed.json").write_text(EvaluationResult.from_dict(run).to_json())
    table = scores_table("square-lsbd-v1", folder)
    assert [r[0] for r in table.rows][:2] == ["ideal", "collapsed"]  # the headline alone ranks it second
    assert dict(table.kinds) == {"ideal": "oracle", "random": "baseline", "pca": "baseline", "collapsed": "external"}
    assert set(dict(table.uninformative)) == {"collapsed"}
    assert table.best() is None  # nothing else competes here
    text = format_table(table)
    assert "| collapsed | 1 | external ⚠ |" in text and "⚠ collapsed: dci.informativeness 0.990" in text
    assert any(line.startswith("collapsed,1,yes,,external,yes,") for line in format_table(table, "csv").splitlines())
    shipped = scores_table("square-lsbd-v1")
    assert shipped.best()[0] == "lsbd-vae-1024" and not math.isnan(shipped.best()[2][0][0])
