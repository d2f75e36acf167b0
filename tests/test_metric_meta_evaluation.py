"""The metric meta-evaluation (Almudévar & Ortega 2025, section 6): Spearman correlations across encoders,
bootstrap intervals, settings found from the keys, and the command on the shipped dependent-factor rows."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy.stats import spearmanr

from factorbench.benchmark.experiments.metric_meta_evaluation import (LOWER_IS_BETTER, format_meta_evaluation, main,
                                                                       meta_evaluate, meta_evaluate_protocol,
                                                                       population_of, runs_of_plan, spearman)
from factorbench.generators.errors import FactorbenchError


def test_spearman_closed_forms_and_scipy():
    x = np.array([3.0, 1.0, 2.0, 5.0])
    assert spearman(x, x ** 3) == pytest.approx(1.0)
    assert spearman(x, -x) == pytest.approx(-1.0)
    assert math.isnan(spearman(x, np.ones(4)))
    # ties take their average rank: ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4)
    assert spearman(np.array([1.0, 2.0, 2.0, 3.0]), np.arange(4.0)) == pytest.approx(math.sqrt(0.9))
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=30), rng.normal(size=30)
    assert spearman(a, b) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)


def _population(n: int = 40, seed: int = 0) -> dict[str, dict[str, float]]:
    """Encoders with a target per setting; 'good' is a monotone function of the target, 'bad' its reverse,
    'noise' independent of it; in the 'dependent' setting 'fragile' stops following the target."""
    rng = np.random.default_rng(seed)
    rows = {}
    for i in range(n):
        row = {}
        for setting in ("independent", "dependent"):
            target = rng.random()
            row[f"{setting}.downstream.score"] = target
            row[f"{setting}.irs.score"] = target ** 2
            row[f"{setting}.good.score"] = math.exp(target)
            row[f"{setting}.bad.score"] = -target
            row[f"{setting}.noise.score"] = rng.random()
            row[f"{setting}.fragile.score"] = target if setting == "independent" else rng.random()
        rows[f"enc{i}"] = row
    return rows


def test_meta_evaluation_recovers_the_planted_correlations():
    result = meta_evaluate(_population(), n_boot=300, seed=1)
    assert result.settings == ("independent", "dependent") and len(result.encoders) == 40
    assert set(result.metrics) == {"good.score", "bad.score", "noise.score", "fragile.score"}
    m = {name: i for i, name in enumerate(result.metrics)}
    for t in range(2):  # downstream and IRS (its square: the same ranking)
        for s in range(2):
            assert result.rho[s, m["good.score"], t] == pytest.approx(1.0)
            assert (result.low[s, m["good.score"], t], result.high[s, m["good.score"], t]) == pytest.approx((1.0, 1.0))
            assert result.rho[s, m["bad.score"], t] == pytest.approx(-1.0)
            assert result.low[s, m["noise.score"], t] < 0 < result.high[s, m["noise.score"], t]
        assert result.rho[0, m["fragile.score"], t] == pytest.approx(1.0)
        assert result.low[1, m["fragile.score"], t] < 0 < result.high[1, m["fragile.score"], t]
    again = meta_evaluate(_population(), n_boot=300, seed=1)
    assert np.array_equal(again.low, result.low, equal_nan=True)  # a function of the seed
    table = format_meta_evaluation(result)
    assert "| good.score | 1.00 [1.00, 1.00] | 1.00 [1.00, 1.00] |" in table
    assert (result.counts == 40).all() and "fewer where" not in table and "(n = " not in table


def test_missing_values_leave_an_encoder_out_of_that_setting_only():
    population = _population(10)
    population["enc0"]["dependent.good.score"] = math.nan
    del population["enc1"]["dependent.noise.score"]
    result = meta_evaluate(population, metrics=("good.score", "noise.score"), n_boot=50)
    assert result.rho[1, 0, 0] == pytest.approx(1.0)  # the 9 others still rank perfectly
    # each cell says how many encoders it is over, and the table shows it where fewer than all
    assert result.counts[0, 0, 0] == result.counts[0, 1, 0] == 10 and result.counts[1, 0, 0] == 9
    assert result.counts[1, 1, 0] == 9
    table = format_meta_evaluation(result)
    assert "across 10 encoders (fewer where a cell gives its n)" in table
    assert "| good.score | 1.00 [1.00, 1.00] | 1.00 [1.00, 1.00] (n = 9) |" in table
    with pytest.raises(FactorbenchError, match="at least 3 encoders"):
        meta_evaluate({k: population[k] for k in ("enc0", "enc1")})
    with pytest.raises(FactorbenchError, match="no setting holds every target"):
        meta_evaluate(population, targets=("nothing.score",))


def test_the_bootstrap_with_missing_values_is_each_resamples_spearman_over_its_encoders_with_both():
    """The interval of a cell where some encoders lack a value: every resample of all encoders, kept when at
    least 3 of its draws have both values, scored by Spearman over those draws (ties included)."""
    rng = np.random.default_rng(3)
    population = {f"enc{i}": {"s.downstream.score": float(rng.integers(0, 4)), "s.irs.score": rng.random(),
                              "s.m.score": float(rng.integers(0, 3))} for i in range(7)}
    for name in ("enc1", "enc4"):
        population[name]["s.m.score"] = math.nan
    result = meta_evaluate(population, metrics=("m.score",), n_boot=200, seed=5)
    draws = np.random.default_rng(5).integers(0, 7, size=(200, 7))
    x = np.array([population[f"enc{i}"]["s.m.score"] for i in range(7)])
    for t, target in enumerate(("downstream.score", "irs.score")):
        y = np.array([population[f"enc{i}"][f"s.{target}"] for i in range(7)])
        boots = np.array([spearman(x[d[np.isfinite(x[d])]], y[d[np.isfinite(x[d])]]) for d in draws
                          if np.isfinite(x[d]).sum() >= 3])
        boots = boots[np.isfinite(boots)]
        assert result.counts[0, 0, t] == 5 and len(boots) > 100
        assert (result.low[0, 0, t], result.high[0, 0, t]) == tuple(np.quantile(boots, [(1 - 0.95) / 2, (1 + 0.95) / 2]))


def test_a_table_over_few_encoders_says_what_chance_gives():
    """With n encoders, rho = 1 is one ordering of n!: counted over every ordering of 4 ranks, then the
    table's line under 10 encoders (1/6 for 3, 1/24 for 4) and none from 10 on."""
    import itertools

    orderings = list(itertools.permutations(range(4)))
    perfect = sum(spearman(np.arange(4.0), np.array(p, dtype=float)) == pytest.approx(1.0) for p in orderings)
    assert perfect / len(orderings) == 1 / 24
    for n, expected in [(3, "1/6"), (4, "1/24")]:
        table = format_meta_evaluation(meta_evaluate(_population(n), n_boot=20))
        assert f"With {n} encoders, a correlation of exactly 1 (or -1) arises by chance with probability " \
               f"{expected} in each cell" in table
        assert table.count("arises by chance") == 2  # under each target's heading
    assert "arises by chance" not in format_meta_evaluation(meta_evaluate(_population(10), n_boot=20))
    # the heat maps' title carries the same line, shortened
    from factorbench.benchmark.experiments.metric_meta_evaluation import _plot_heading

    assert _plot_heading(meta_evaluate(_population(3), n_boot=20)) == \
        "Spearman rho across 3 encoders; with 3, rho = 1 (or -1) arises by chance with probability 1/6 per cell"
    assert _plot_heading(meta_evaluate(_population(10), n_boot=20)) == "Spearman rho across 10 encoders"


def test_the_shipped_square_population_and_the_command(capsys, tmp_path):
    from factorbench.benchmark.results import reference_results

    results = reference_results("square-dependent-v1")
    population = population_of(results)
    assert "pca/run0" not in population and "ideal/run0" not in population  # trained encoders only
    assert "vae/seed0" in population and len(population) == sum(len(r) for m, r in results.items()
                                                                if m not in ("ideal", "random", "pca"))
    assert main(["square-dependent-v1", "--n-boot", "100", "--plot", str(tmp_path / "fig.png")]) == 0
    out = capsys.readouterr().out
    assert "| metric | independent | single | confounded |" in out and (tmp_path / "fig.png").stat().st_size > 0
    assert main(["no-such-v1"]) == 2
    # a plan with no encoder under this protocol: a user error that says what to do, before any bootstrap
    capsys.readouterr()
    assert main(["square-dependent-v1", "--plan", "almudevar-ortega-v1"]) == 2
    assert ("square-dependent-v1: a rank correlation across encoders needs at least 3 encoders, got 0 (the results of "
            "plan almudevar-ortega-v1 collected so far); add your encoders' results with --add JSON"
            ) in capsys.readouterr().err
    # the teapot's settings include "double-0.1", a name with a dot, kept whole and in the protocol's order
    from factorbench.benchmark.experiments.metric_meta_evaluation import protocol_order
    from factorbench.benchmark.protocols import get_protocol

    teapot = population_of(reference_results("teapot-dependent-v1"))
    settings, metrics = protocol_order(get_protocol("teapot-dependent-v1"), teapot)
    assert settings == ["independent", "single", "double-0.1", "triple", "confounded"]
    assert metrics == ["minimality_sufficiency.minimality", "minimality_sufficiency.sufficiency", "mig.score",
                       "sap.score", "modularity.score"]


def test_your_own_encoder_added_joins_the_population(capsys, tmp_path):
    """A result of the user's encoder has no training provenance (kind external): it joins the population
    the reference encoders ideal, random and pca are kept out of, here and in the command's count."""
    from factorbench.benchmark.cli import main as cli
    from factorbench.benchmark.results import reference_results

    mine = tmp_path / "mine.json"
    assert cli(["evaluate", "square-dependent-v1", "--encoder", "pca", "--model", "my-encoder", "--out", str(mine),
                "--quiet"]) == 0
    shipped = population_of(reference_results("square-dependent-v1"))
    population = population_of(reference_results("square-dependent-v1", add=[mine]))
    assert set(population) - set(shipped) == {"my-encoder/run0"}
    # the same encoder as the shipped pca row, which only --with-reference-encoders counts
    every = population_of(reference_results("square-dependent-v1"), trained_only=False)
    assert population["my-encoder/run0"] == pytest.approx(every["pca/run0"])
    capsys.readouterr()
    assert main(["square-dependent-v1", "--add", str(mine), "--n-boot", "10"]) == 0
    assert f"{len(shipped) + 1} encoders" in capsys.readouterr().out
    # a plan keeps its own encoders and yours
    planned = runs_of_plan(reference_results("square-dependent-v1"), "reference-v1")
    assert main(["square-dependent-v1", "--add", str(mine), "--plan", "reference-v1", "--n-boot", "10"]) == 0
    assert f"{sum(len(r) for r in planned.values()) + 1} encoders" in capsys.readouterr().out
    # yours under the companion protocol join your row there (without them its cells count one fewer)
    theirs = tmp_path / "mine-lsbd.json"
    assert cli(["evaluate", "square-lsbd-v1", "--encoder", "pca", "--model", "my-encoder", "--out", str(theirs),
                "--quiet"]) == 0
    capsys.readouterr()
    every_cell = re.compile(r"^\| dci\.disentanglement \| [-0-9.]+ \[[-0-9., ]+\] \|", re.M)
    assert main(["square-dependent-v1", "--add", str(mine), "--with", "square-lsbd-v1", "--n-boot", "10"]) == 0
    assert f"(n = {len(shipped)})" in capsys.readouterr().out
    assert main(["square-dependent-v1", "--add", str(mine), "--with", "square-lsbd-v1", "--add-with", str(theirs),
                 "--plan", "reference-v1", "--n-boot", "10"]) == 0
    assert every_cell.search(capsys.readouterr().out)
    with pytest.raises(SystemExit) as stop:
        main(["square-dependent-v1", "--add-with", str(theirs)])
    assert stop.value.code == 2 and "give --with PROTOCOL too" in capsys.readouterr().err


def test_a_companion_protocols_metrics_join_the_independent_setting_oriented():
    """``with_companion`` adds the companion's scalars to the independent setting only where the row lacks
    them, never its targets; ``oriented`` negates a lower-is-better scalar, so that its correlation with the
    target has the sign of agreement."""
    from factorbench.benchmark.experiments.metric_meta_evaluation import LOWER_IS_BETTER, with_companion

    population = _population(12)
    companion = {name: {"error.nrmse" + LOWER_IS_BETTER: -(1 - row["independent.downstream.score"]),
                        "downstream.score": 0.0, "good.score": -1.0}
                 for name, row in population.items()}
    joined, added = with_companion(population, companion, "independent")
    assert added == ["error.nrmse" + LOWER_IS_BETTER]  # the target and a metric the row has are not taken
    name = next(iter(population))
    assert joined[name]["independent.good.score"] == population[name]["independent.good.score"]
    assert "dependent.error.nrmse" + LOWER_IS_BETTER not in joined[name]
    result = meta_evaluate(joined, metrics=["good.score", "error.nrmse" + LOWER_IS_BETTER], n_boot=50)
    t = result.targets.index("downstream.score")
    assert result.rho[0, 1, t] == pytest.approx(1.0)  # lower error, higher accuracy: agreement
    assert math.isnan(result.rho[1, 1, t])  # computed on independent data only


def test_the_shipped_dsprites_population_with_its_dci_companion(capsys):
    from factorbench.benchmark.experiments.metric_meta_evaluation import LOWER_IS_BETTER, runs_of_plan
    from factorbench.benchmark.results import reference_results

    results = reference_results("dsprites-dci-v1")
    planned = runs_of_plan(results, "almudevar-ortega-v1")
    assert planned and "pca" not in planned and all(
        r.training["sweep"]["plan"] == "almudevar-ortega-v1" for runs in planned.values() for r in runs)
    oriented = population_of(planned, oriented=True)
    row = next(iter(oriented.values()))
    assert "dci.informativeness" not in row and row["dci.informativeness" + LOWER_IS_BETTER] < 0
    assert main(["dsprites-dependent-v1", "--with", "dsprites-dci-v1", "--plan", "almudevar-ortega-v1",
                 "--n-boot", "50"]) == 0
    out = capsys.readouterr().out
    assert f"| do_tran.jemmig{LOWER_IS_BETTER} |" in out and "| dci.disentanglement |" in out
    # no v1 encoder joins a run off the quantisation range's scale: burgess-2018's AnnealedVAE has one in the
    # dsprites-dci-v1 reference rows, but of weights trained again since, which its v1 result did not score
    assert "off the scale" not in out


def test_encoders_off_the_quantisation_ranges_scale_are_named(capsys):
    """With the reference encoders counted, the command names those whose companion scores carry Do & Tran's
    scale warning (the random projection, PCA and the true factors' values on dSprites), and the trained ones
    whose runs carry it."""
    from factorbench.benchmark.experiments.metric_meta_evaluation import main, off_scale_encoders
    from factorbench.benchmark.results import reference_results

    results = reference_results("dsprites-dci-v1")
    # read apart from the function: the trained runs whose do_tran result warns of a code off the range's scale
    warned = sorted(f"{model}/seed{run.training['sweep']['seed']}" for model, runs in results.items() for run in runs
                    if run.training and any("off the scale" in w for w in run.metrics["do_tran"]["result"]["warnings"]))
    assert sorted(off_scale_encoders(results)) == warned
    assert sorted(off_scale_encoders(results, trained_only=False)) == sorted(["ideal/run0", "pca/run0", "random/run0",
                                                                             *warned])
    assert main(["dsprites-dependent-v2", "--with", "dsprites-dci-v1", "--with-reference-encoders",
                 "--n-boot", "20"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\n3 of the \d+ encoders \(ideal/run0, pca/run0, random/run0\) hold codes off the scale of "
                     "Do & Tran's", out)
    # and judges the paper's claims on the correlations it printed
    assert "\n| 4 | When the factors are independent, Sufficiency achieves the strongest correlation" in out


def test_the_off_scale_note_reads_the_same_in_every_medium():
    """One sentence serves REPRODUCTION.md, the leaderboard's pages and the command line: its Markdown form is
    the plain one with names in backticks, and its HTML form, tags stripped and unescaped, is the plain one."""
    import html

    from factorbench.benchmark.experiments.metric_meta_evaluation import off_scale_note

    plain = off_scale_note(["a/seed0"], 12, "METRICS.md")
    assert plain == ("1 of the 12 encoders (a/seed0) holds a code off the scale of Do & Tran's fixed quantisation "
                     "range [-4, 4] in some setting: the do_tran rows' correlations mix scales (METRICS.md, \"The "
                     "range's scale\").")
    assert off_scale_note(["a/seed0"], 12, "METRICS.md", code=lambda name: f"`{name}`") == plain.replace(
        "a/seed0", "`a/seed0`").replace("the do_tran", "the `do_tran`")
    names = ["x<y/seed0", "z/seed1"]
    page = off_scale_note(names, 3, '<a href="m.html">METRICS.md</a>',
                          code=lambda name: f"<code>{html.escape(name)}</code>", text=html.escape)
    assert "Do &amp; Tran" in page and "<code>x&lt;y/seed0</code>, <code>z/seed1</code>) hold codes" in page
    assert html.unescape(re.sub(r"<[^>]+>", "", page)) == off_scale_note(names, 3, "METRICS.md")


def test_a_v2_protocol_adds_the_whole_code_target():
    """On a ``-dependent-v2`` protocol the whole-code accuracy is a third target, never a metric; on v1 the
    two paper targets stay the only ones."""
    from types import SimpleNamespace

    from factorbench.benchmark.experiments.metric_meta_evaluation import (TARGETS, WHOLE_CODE_TARGET,
                                                                           meta_evaluate_protocol)
    from factorbench.benchmark.protocols import get_protocol

    settings = list(dict.fromkeys(m.label.rsplit(".", 1)[0] for m in get_protocol("dsprites-dependent-v2").metrics))
    assert settings[0] == "independent" and len(settings) == 5
    rng = np.random.default_rng(1)
    results = {}
    for i in range(8):
        scalars = {}
        for s in settings:
            single, whole = rng.random(), rng.random()
            scalars.update({f"{s}.downstream.score": single, f"{s}.irs.score": rng.random(),
                            f"{s}.downstream_full.score": whole, f"{s}.mig.score": whole ** 3,
                            f"{s}.minimality_sufficiency.sufficiency": -single})
        run = SimpleNamespace(training={"sweep": {"seed": 0}}, scalars=lambda scalars=scalars: scalars,
                              directions={})
        results[f"model{i}"] = [run]
    result = meta_evaluate_protocol("dsprites-dependent-v2", results, n_boot=20)
    assert result.targets == TARGETS + (WHOLE_CODE_TARGET,)
    assert WHOLE_CODE_TARGET not in result.metrics and result.settings == tuple(settings)
    m, t = result.metrics.index("mig.score"), result.targets.index(WHOLE_CODE_TARGET)
    np.testing.assert_allclose(result.rho[:, m, t], 1.0)
    m, t = result.metrics.index("minimality_sufficiency.sufficiency"), result.targets.index("downstream.score")
    np.testing.assert_allclose(result.rho[:, m, t], -1.0)
    v1 = meta_evaluate_protocol("dsprites-dependent-v1", results, n_boot=20)
    assert v1.targets == TARGETS and v1.metrics == ("minimality_sufficiency.sufficiency", "mig.score")  # its labels only


def test_a_companion_run_of_other_weights_is_not_joined():
    """An encoder trained again (other weights) keeps its own protocol's row; the companion's scores of the
    other training are left out, those of the same weights (or of runs that record none) kept."""
    from types import SimpleNamespace

    from factorbench.benchmark.experiments.metric_meta_evaluation import same_weights

    def run(seed, weights):
        return SimpleNamespace(training={"sweep": {"seed": seed}, **({"weights_sha256": weights} if weights else {})})

    results = {"a": [run(0, "w0"), run(1, "w1")], "b": [run(0, "x0")], "c": [run(0, None)]}
    companion = {"a": [run(0, "w0"), run(1, "other")], "b": [run(0, "retrained")], "c": [run(0, "y")],
                 "d": [run(0, "z")]}
    kept = same_weights(companion, results)
    assert {m: [r.training.get("weights_sha256") for r in runs] for m, runs in kept.items()} == \
        {"a": ["w0"], "c": ["y"], "d": ["z"]}



def test_a_protocol_metric_better_when_lower_is_negated_as_the_companions_are():
    """``-dependent-v3`` scores DCI's informativeness (an error) in every setting itself: its rho with the
    target is the raw scalar's rho negated, so a positive correlation means agreement, as for a companion's
    metrics (the v1 and v2 protocols had no such metric of their own)."""
    from types import SimpleNamespace

    from factorbench.benchmark.protocols import get_protocol

    protocol = get_protocol("dsprites-dependent-v3")
    settings = list(dict.fromkeys(m.label.rsplit(".", 1)[0] for m in protocol.metrics))
    rng = np.random.default_rng(0)
    results = {}
    for e in range(8):
        scalars, directions = {}, {}
        for setting in settings:
            accuracy = rng.random()
            for key, value, better in [("downstream.score", accuracy, "higher"), ("irs.score", rng.random(), "higher"),
                                       ("downstream_full.score", rng.random(), "higher"),
                                       ("dci.informativeness", 1 - accuracy + 0.1 * rng.random(), "lower"),
                                       ("dci.disentanglement", rng.random(), "higher")]:
                scalars[f"{setting}.{key}"] = value
                directions[f"{setting}.{key}"] = better
        run = SimpleNamespace(scalars=lambda s=scalars: dict(s), directions=directions,
                              training={"config": {"model": "beta-vae", "params": {}}, "sweep": {"seed": 0}})
        results[f"model-{e}"] = [run]
    result = meta_evaluate_protocol("dsprites-dependent-v3", results, n_boot=10)
    negated = "dci.informativeness" + LOWER_IS_BETTER
    assert negated in result.metrics and "dci.informativeness" not in result.metrics
    assert "dci.disentanglement" in result.metrics  # better when higher: as it is
    raw = population_of(results)
    for setting in settings:
        x = [row[f"{setting}.dci.informativeness"] for row in raw.values()]
        y = [row[f"{setting}.downstream.score"] for row in raw.values()]
        s, m, t = (result.settings.index(setting), result.metrics.index(negated),
                   result.targets.index("downstream.score"))
        assert result.rho[s, m, t] == pytest.approx(-spearmanr(x, y).statistic)
        assert result.rho[s, m, t] > 0.5  # the error falls as the accuracy rises: agreement
