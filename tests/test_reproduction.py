"""REPRODUCTION.md: its tables are generated from the shipped reference files and the published numbers,
and are up to date; the published numbers are well-formed; D_LSBD is shown as the paper's sum."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from factorbench.baselines.reproduction import COMPARISONS, PUBLISHED_DIR, _d_lsbd_sum, render_tables, update_document
from factorbench.benchmark.results import REFERENCE_DIR, EvaluationResult, load_result

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_the_document_is_up_to_date():
    assert not update_document(ROOT / "REPRODUCTION.md", check=True), \
        "REPRODUCTION.md is out of date: run python -m factorbench.baselines.reproduction"


@pytest.mark.parametrize("path", sorted(PUBLISHED_DIR.glob("*.toml")), ids=lambda p: p.stem)
def test_published_tables_are_well_formed(path):
    data = tomllib.loads(path.read_text())
    columns = data["columns"]
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    assert tables and data["source"]
    for rows in tables.values():
        for model, values in rows.items():
            assert len(values) == len(columns), model
            for v in values:
                mean, std = (v if isinstance(v, list) else (v, 0.0))
                assert 0.0 <= mean <= 2.0 and std >= 0.0, (model, v)
    for comparison in COMPARISONS:
        if comparison.published == path.stem:
            assert comparison.table in tables and set(comparison.columns) <= set(columns)


def test_d_lsbd_is_shown_as_the_sum_over_subgroups():
    square = load_result(REFERENCE_DIR / "square-lsbd-v1" / "pca.json")
    assert _d_lsbd_sum(square) == pytest.approx(2 * square.scalars()["d_lsbd.score"])
    objects = load_result(REFERENCE_DIR / "objects-lsbd-v1" / "pca.json")  # one rotation: the score itself
    assert _d_lsbd_sum(objects) == pytest.approx(objects.scalars()["d_lsbd.score"])


def test_a_collected_row_is_shown_as_mean_and_std_beside_the_paper(tmp_path):
    for comparison in COMPARISONS:
        shutil.copytree(REFERENCE_DIR / comparison.protocol, tmp_path / comparison.protocol)
    base = json.loads((REFERENCE_DIR / "arrow-lsbd-v1" / "pca.json").read_text())
    runs = []
    for value in (0.25, 0.35):
        run = json.loads(json.dumps(base))
        run["model"] = "beta-vae"
        result = run["metrics"]["d_lsbd"]["result"]
        result["subgroup_scores"] = [value, value]
        run["metrics"]["d_lsbd"]["scalars"]["score"] = result["score"] = value
        run.pop("checksum", None)
        runs.append(json.loads(EvaluationResult.from_dict(run).to_json()))
    (tmp_path / "arrow-lsbd-v1" / "beta-vae.json").write_text(json.dumps({"model": "beta-vae", "runs": runs}))
    text = render_tables(tmp_path)
    arrow = text[text.index("### Arrow"):text.index("### Airplane")]
    row = next(line for line in arrow.splitlines() if line.startswith("| beta-vae |"))
    # sum over the two subgroups: 0.5 and 0.7, mean 0.6, sample std 0.141; the paper: 1.178 ± 0.065
    assert row.split(" | ")[1:3] == ["2", "0.600 ± 0.141 / 1.178 ± 0.065"]


def _collected(tmp_path):
    """A copy of the collected file of the VAE on square (three seeds), its folder and its content."""
    folder = tmp_path / "ref" / "square-lsbd-v1"
    folder.mkdir(parents=True)
    data = json.loads((REFERENCE_DIR / "square-lsbd-v1" / "vae.json").read_text())
    return folder, data


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["summary"]["d_lsbd.score"].update(mean=0.1), "its summary is not the mean and std of its runs"),
    (lambda d: d.update(seeds=[0, 1, 5]), r"says seeds \[0, 1, 5\], its runs are seeds \[0, 1, 2\]"),
    (lambda d: d.update(missing_seeds=[3]), r"says seeds \[3\] are missing; its plan asks for seeds \[0, 1, 2\] only"),
    (lambda d: d.update(missing_seeds=[1]), "must list seeds it has no run of"),
    (lambda d: d.update(plan="reference-v2"), "says plan 'reference-v2', its runs ran under"),
    (lambda d: d.update(protocol="arrow-lsbd-v1"), "says protocol 'arrow-lsbd-v1'"),
    (lambda d: d.update(note="x"), "unknown key note"),
    (lambda d: d["runs"].__setitem__(2, d["runs"][0]), "runs 0 and 2 are the same result"),
])
def test_every_field_of_a_collected_file_is_checked(tmp_path, edit, message):
    from factorbench.benchmark.results import scores_table
    from factorbench.generators.errors import FactorbenchError

    folder, data = _collected(tmp_path)
    (folder / "vae.json").write_text(json.dumps(data))
    assert len(scores_table("square-lsbd-v1", folder).rows) == 1  # the untouched copy passes
    edit(data)
    (folder / "vae.json").write_text(json.dumps(data))
    with pytest.raises(FactorbenchError, match=message):
        scores_table("square-lsbd-v1", folder)


def test_a_run_copied_in_place_of_another_seed_is_refused(tmp_path):
    """A duplicate disguised as another seed (its sweep seed changed, its checksum recomputed) is still the
    same trained run."""
    from factorbench.benchmark.results import scores_table
    from factorbench.generators.errors import FactorbenchError

    folder, data = _collected(tmp_path)
    twin = json.loads(json.dumps(data["runs"][0]))
    twin["training"]["sweep"]["seed"] = 2
    twin.pop("checksum")
    data["runs"][2] = json.loads(EvaluationResult.from_dict(twin).to_json())
    (folder / "vae.json").write_text(json.dumps(data))
    with pytest.raises(FactorbenchError, match="runs 0 and 2 are the same trained run"):
        scores_table("square-lsbd-v1", folder)


def test_check_reports_an_edited_reference_file_without_a_traceback(tmp_path, capsys):
    from factorbench.baselines.reproduction import main

    ref = tmp_path / "ref"
    from factorbench.baselines.reproduction import META_COMPARISONS

    from factorbench.baselines.reproduction import _replicate_protocols

    protocols = [c.protocol for c in COMPARISONS] + [p for m in META_COMPARISONS for p in m.protocols] \
        + _replicate_protocols()
    for protocol in protocols:
        if (REFERENCE_DIR / protocol).is_dir():
            shutil.copytree(REFERENCE_DIR / protocol, ref / protocol, dirs_exist_ok=True)
    doc = tmp_path / "REPRODUCTION.md"
    shutil.copy(Path(__file__).resolve().parent.parent / "REPRODUCTION.md", doc)
    assert main(["--check", "--file", str(doc), "--reference-dir", str(ref)]) == 0
    path = ref / "square-lsbd-v1" / "vae.json"
    data = json.loads(path.read_text())
    data["runs"][1]["metrics"]["d_lsbd"]["scalars"]["score"] = 0.123  # edited in place
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["--check", "--file", str(doc), "--reference-dir", str(ref)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "vae.json" in err and "Traceback" not in err


def test_prose_numbers_are_generated_once_from_full_precision_and_checked(tmp_path):
    """A number of the prose is rewritten from its expression: ours (mean ± std, per seed, count), the
    paper's, and the distance in the paper's standard deviations; an edited value is stale for --check."""
    import math

    from factorbench.baselines.reproduction import render_prose, render_value
    from factorbench.benchmark.results import reference_results
    from factorbench.generators.errors import FactorbenchError

    runs = sorted(reference_results("arrow-lsbd-v1")["factor-vae"], key=lambda r: r.training["sweep"]["seed"])
    values = [_d_lsbd_sum(r) for r in runs]
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    from factorbench.baselines.reproduction import _Sources

    sources = _Sources(None)
    assert render_value("ours arrow-lsbd-v1 factor-vae d_lsbd.sum ms2", sources) == f"{mean:.2f} ± {std:.2f}"
    assert render_value("ours arrow-lsbd-v1 factor-vae d_lsbd.sum seeds3", sources) == \
        f"{values[0]:.3f}, {values[1]:.3f} and {values[2]:.3f}"
    assert render_value("ours arrow-lsbd-v1 factor-vae d_lsbd.sum n", sources) == "3"
    assert render_value("paper tonnaer-2022 arrow factor-vae d_lsbd.sum ms3", sources) == "1.526 ± 0.125"
    assert render_value("gap arrow-lsbd-v1 factor-vae d_lsbd.sum tonnaer-2022 arrow", sources) == \
        f"{abs(mean - 1.526) / 0.125:.1f}"
    # one rounding from the full value: 0.0648 is 0.06, not 0.065 rounded again to 0.07
    assert 0.0645 < std < 0.065 and render_value("ours arrow-lsbd-v1 factor-vae d_lsbd.sum s2", sources) == "0.06"
    text = "FactorVAE <!--=ours arrow-lsbd-v1 factor-vae d_lsbd.sum ms2-->0.94 ± 0.07<!----> on arrow"
    assert render_prose(text) == text.replace("0.94 ± 0.07", f"{mean:.2f} ± {std:.2f}")
    for bad, message in [("ours arrow-lsbd-v1 nobody d_lsbd.sum ms2", "has no reference runs"),
                         ("paper tonnaer-2022 arrow nobody d_lsbd.sum ms3", "the published file lacks"),
                         ("mean of everything", "not one of")]:
        with pytest.raises(FactorbenchError, match=message):
            render_prose(f"<!--={bad}-->1<!---->")
    # a cell of a meta-evaluation: Spearman's rho, its bootstrap interval, the number of encoders
    from factorbench.baselines.reproduction import _Sources

    sources = _Sources(None)
    meta = sources.meta("dsprites-dependent-v1")
    s, m, t = (meta.settings.index("triple"), meta.metrics.index("mig.score"), meta.targets.index("irs.score"))
    assert render_value("rho dsprites-dependent-v1 irs.score mig.score triple m3", sources) == f"{meta.rho[s, m, t]:.3f}"
    assert render_value("rho dsprites-dependent-v1 irs.score mig.score triple ci2", sources) == \
        f"[{meta.low[s, m, t]:.2f}, {meta.high[s, m, t]:.2f}]"
    assert render_value("rho dsprites-dependent-v1 irs.score mig.score triple n", sources) == str(len(meta.encoders))
    negated = "dci.informativeness~(negated:~lower~is~better)"
    assert float(render_value(f"rho dsprites-dependent-v1 downstream.score {negated} independent m2", sources)) > 0
    for bad, message in [("rho dsprites-dependent-v1 irs.score nothing.score triple m2", "lacks"),
                         ("rho square-lsbd-v1 irs.score mig.score triple m2", "no meta-evaluation")]:
        with pytest.raises(FactorbenchError, match=message):
            render_value(bad, sources)
    # a claim of Almudévar & Ortega judged on a meta-evaluation: its verdict, stability and numbers
    from factorbench.benchmark.experiments.meta_evaluation_claims import check_meta_claims

    name = "dsprites-dependent-v3.do-tran-v1"
    claim = next(c for c in check_meta_claims(sources.meta(name)) if c.key == "minimality-strong")
    assert render_value(f"metaclaim {name} minimality-strong verdict", sources) == claim.verdict
    assert render_value(f"metaclaim {name} minimality-strong stability", sources) == f"{claim.stability:.0%}"
    assert render_value(f"metaclaim {name} minimality-strong lowest m3", sources) == f"{claim.numbers['lowest']:.3f}"
    for bad, message in [(f"metaclaim {name} nothing verdict", "not one of sufficiency-strongest"),
                         (f"metaclaim {name} minimality-strong nothing m2", "evidence gives 'independent'"),
                         (f"metaclaim {name} minimality-strong lowest x2", "takes 'verdict'"),
                         (f"metaclaims {name} nothing", "not one of encoders")]:
        with pytest.raises(FactorbenchError, match=message):
            render_value(bad, sources)
    # the counts of a population: its encoders and plan, the claims judged and reproduced
    judged = check_meta_claims(sources.meta(name))
    assert [render_value(f"metaclaims {name} {field}", sources) for field in
            ("encoders", "planned", "total", "judged")] == ["48", "48", "9", "9"]
    assert render_value(f"metaclaims {name} reproduced", sources) == str(sum(c.verdict == "reproduced"
                                                                             for c in judged))
    which = render_value(f"metaclaims {name} which", sources)
    assert which.count("`") == 2 * sum(c.verdict == "reproduced" for c in judged)
    assert all((f"`{c.key}`" in which) == (c.verdict == "reproduced") for c in judged)
    # the document's own numbers: test_the_document_is_up_to_date renders them too (update_document)
    assert "<!--=ours square-lsbd-v1 vae d_lsbd.sum ms2-->" in (ROOT / "REPRODUCTION.md").read_text()


def test_the_claims_grid_gives_each_populations_verdicts():
    """The grid of Almudévar & Ortega's claims has one row per claim and, in the column of Do & Tran's 48
    encoders (the last), each verdict and stability that check_meta_claims gives that population."""
    from factorbench.baselines.reproduction import _meta_claims_grid, _Sources
    from factorbench.benchmark.experiments.meta_evaluation_claims import CLAIMS

    sources = _Sources(None)
    grid = _meta_claims_grid(sources)
    header = next(line for line in grid.splitlines() if line.startswith("| figure |"))
    assert header.endswith("`dsprites-dependent-v3`, `do-tran-v1` (48) |")
    rows = [line for line in grid.splitlines() if line.startswith(("| 4 |", "| 5 |"))]
    claims = sources.meta_claims("dsprites-dependent-v3.do-tran-v1")
    assert len(rows) == len(CLAIMS) == len(claims)
    for row, claim, spec in zip(rows, claims, CLAIMS):
        assert f"| {spec.statement} |" in row and row.endswith(f"| {claim.verdict} ({claim.stability:.0%}) |")


def test_two_meta_evaluations_of_one_protocol_are_told_apart_by_their_plans(monkeypatch):
    """``dsprites-dependent-v3`` is read twice, over ``almudevar-ortega-v1``'s encoders and over ``do-tran-v1``'s:
    each comparison has its own name, and each evaluates only its plan's runs."""
    import factorbench.benchmark.experiments.metric_meta_evaluation as mme
    from factorbench.baselines.reproduction import META_COMPARISONS, _Sources
    from factorbench.generators.errors import FactorbenchError

    names = [m.name for m in META_COMPARISONS]
    assert len(set(names)) == len(names)
    both = [m for m in META_COMPARISONS if m.protocol == "dsprites-dependent-v3"]
    assert {m.plan for m in both} == {"almudevar-ortega-v1", "do-tran-v1"} and len({m.name for m in both}) == 2
    seen = {}

    def fake_evaluate(protocol, results, companion=None, **kw):
        seen[protocol] = sorted(results)
        return protocol

    sources = _Sources(None)
    runs = {"a": ["run"], "b": ["run"], "c": ["run"], "d": ["run"], "e": ["run"]}
    monkeypatch.setattr(mme, "meta_evaluate_protocol", fake_evaluate)
    monkeypatch.setattr(mme, "runs_of_plan", lambda results, plan, keep=(): {k: v for k, v in results.items()
                                                                              if (k < "d") == (plan == "do-tran-v1")})
    monkeypatch.setattr(sources, "protocol", lambda protocol: runs)
    assert sources.meta("dsprites-dependent-v3.do-tran-v1") == "dsprites-dependent-v3"
    assert seen["dsprites-dependent-v3"] == ["a", "b", "c"]  # the plan's runs
    assert sources.meta("dsprites-dependent-v3") is None  # two of almudevar-ortega-v1's: too few
    assert sources.meta_encoders("dsprites-dependent-v3") == 2  # counted all the same, for the table and prose
    from factorbench.baselines.reproduction import _meta_table, render_value

    entry = next(m for m in both if m.plan == "almudevar-ortega-v1")
    assert "`dsprites-dependent-v3`: 2 of the 24 encoders that `almudevar-ortega-v1` trains are collected, too few " \
        "for a rank correlation (it takes 3)." in _meta_table(entry, sources)
    assert [render_value(f"metaclaims dsprites-dependent-v3 {field}", sources)
            for field in ("encoders", "judged", "reproduced", "which")] == ["2", "0", "0", "none"]
    with pytest.raises(FactorbenchError, match="no meta-evaluation nothing: one of .*dsprites-dependent-v3.do-tran-v1"):
        sources.meta("nothing")


def test_prose_cites_do_and_trans_claims_with_their_provisional_mark():
    """``claim KEY verdict`` is the claim's verdict, ", provisional" where it rests on pending settings;
    ``claim KEY NAME mN`` a number of its evidence; ``claim KEY stability`` the share of bootstrap draws
    keeping its verdict; ``claims FIELD`` counts them."""
    from factorbench.baselines.reproduction import _Sources, render_value
    from factorbench.benchmark.experiments.do_tran_comparison import Setting, check_claims
    from factorbench.generators.errors import FactorbenchError

    keys = ("do_tran.jemmig", "do_tran.rmig", "dci.disentanglement", "dci.completeness", "dci.informativeness")
    rows = {("factor-vae", "gamma", 10): (0.5, 0.5, 0.2, 0.2, 0.2), ("factor-vae", "gamma", 20): (0.4, 0.6, 0.3, 0.1, 0.1),
            ("beta-vae", "beta", 1): (0.9, 0.1, 0.4, 0.4, 0.4), ("beta-vae", "beta", 4): (0.8, 0.2, 0.1, 0.3, 0.3)}
    settings = [Setting(f, h, float(v), f"{f}.{h}-{v}", {k: (x,) for k, x in zip(keys, row)})
                for (f, h, v), row in rows.items()]
    claims = check_claims(settings)
    sources = _Sources(None)
    sources._do_tran = (settings, claims, {"factor-vae.gamma-10"})
    # JEMMIG and RMIG are exactly reversed over the four runs: rho = -1, agreement reproduced
    assert render_value("claim jemmig-rmig-agree verdict", sources) == "reproduced, provisional"
    assert render_value("claim jemmig-rmig-agree rho m2", sources) == "-1.00"
    assert render_value("claim jemmig-rmig-agree runs m0", sources) == "4"
    # every FactorVAE run beats every beta-VAE run by JEMMIG and RMIG; by D one of four pairs
    assert render_value("claim dc-do-not-separate JEMMIG m2", sources) == "1.00"
    assert render_value("claim dc-do-not-separate D m2", sources) == "0.50"
    assert render_value("claim factorvae-beats-betavae verdict", sources) == "too few runs"  # one run a setting
    counts = {f: render_value(f"claims {f}", sources) for f in ("total", "judged", "reproduced", "provisional")}
    assert counts == {"total": "7", "judged": "3", "reproduced": str(sum(c.verdict == "reproduced" for c in claims)),
                      "provisional": "3"}
    assert render_value("claims pending", sources) == "3 of the verdicts rest on settings whose other seeds are still to come"
    sources._do_tran_stability = {c.key: 0.25 for c in claims if c.verdict != "too few runs"}
    assert render_value("claim jemmig-rmig-agree stability", sources) == "25%"
    with pytest.raises(FactorbenchError, match="which has none \\(too few runs\\)"):
        render_value("claim factorvae-beats-betavae stability", sources)
    sources._do_tran = (settings, claims, {"aae.gz-10"})  # a pending setting no claim rests on
    assert render_value("claim jemmig-rmig-agree verdict", sources) == "reproduced"
    assert render_value("claims provisional", sources) == "0"
    assert render_value("claims pending", sources) == "every verdict rests on complete settings"
    for bad, message in [("claim no-such-claim verdict", "not one of factorvae-beats-betavae"),
                         ("claim jemmig-rmig-agree nothing m2", "gives 'rho', 'runs'"),
                         ("claim factorvae-beats-betavae JEMMIG~worst~factor-vae m2", "gives no number"),
                         ("claim jemmig-rmig-agree rho x2", "is not mN"), ("claims everything", "not one of total"),
                         ("claim jemmig-rmig-agree", "not one of")]:
        with pytest.raises(FactorbenchError, match=message):
            render_value(bad, sources)


def test_the_cost_tables_cover_every_job_and_are_up_to_date():
    from factorbench.baselines.costs import job_costs, planned_tables, update_costs
    from factorbench.baselines.plan import expand, load_plan

    baselines = ROOT / "baselines" / "BASELINES.md"
    assert planned_tables(baselines.read_text()) == ["reference-v1", "almudevar-ortega-v1"]
    assert not update_costs(baselines, check=True), \
        "BASELINES.md's cost tables are out of date: run python -m factorbench.baselines.costs"
    costs = job_costs("reference-v1")
    assert list(costs) == [j.id for j in expand(load_plan("reference-v1"))]  # every job, in plan order
    assert costs["beta-vae/coil100/seed0"]["precision"] == "fp32" and costs["beta-vae/coil100/seed0"]["cpu_s"] > 0
    assert costs["beta-vae/coil100/seed0"]["scoring_s"] > 0 and costs["beta-vae/coil100/seed0"]["missing"] == []


def test_a_cost_table_sets_gpu_runs_and_jobs_missing_a_protocol_apart(tmp_path):
    """GPU runs' CPU seconds are not added to the CPU hours; a job scored under some of its protocols only
    (trained before a protocol joined the plan: here its other result is left out of the copy) is listed
    apart, not as done; scoring adds the protocols."""
    import shutil

    from factorbench.baselines.costs import job_costs, markers, render_costs, update_costs
    from factorbench.generators.errors import FactorbenchError

    jobs = {"beta-vae.burgess-2018/mpi3d-toy/seed0": "gpu", "annealed-vae.burgess-2018/mpi3d-toy/seed0": "partial",
            "beta-vae.burgess-2018/dsprites/seed0": "cpu"}
    for protocol in ("mpi3d-toy-dependent-v3", "mpi3d-toy-dci-v1", "dsprites-dependent-v3", "dsprites-dci-v1"):
        for entry in ("beta-vae.burgess-2018", "annealed-vae.burgess-2018"):
            source = REFERENCE_DIR / protocol / f"{entry}.json"
            if source.is_file() and (protocol, entry) != ("mpi3d-toy-dependent-v3", "annealed-vae.burgess-2018"):
                (tmp_path / protocol).mkdir(exist_ok=True)
                shutil.copy(source, tmp_path / protocol / f"{entry}.json")
    costs = job_costs("almudevar-ortega-v1", tmp_path)
    gpu, partial, cpu = (costs[job] for job in jobs)
    assert gpu["device"].startswith("cuda") and gpu["missing"] == [] and cpu["device"] == "cpu"
    assert partial["missing"] == ["mpi3d-toy-dependent-v3"]
    assert sum(r is not None and not r["missing"] for r in costs.values()) == 3  # + annealed-vae on dSprites
    table = render_costs("almudevar-ortega-v1", tmp_path)
    cpu_jobs = [r for job, r in costs.items() if r is not None and not r["missing"] and r["device"] == "cpu"]
    assert (f"3 of 72 jobs have collected results under all their protocols; 2 trained on a CPU record their "
            f"training CPU time, {sum(r['cpu_s'] for r in cpu_jobs) / 3600:.1f} CPU hours in all; 1 trained on a "
            f"GPU") in table
    assert "only, so the sweep trains them again and they are left out above (1): " \
           "annealed-vae.burgess-2018/mpi3d-toy/seed0 (no mpi3d-toy-dependent-v3)" in table
    assert "| annealed-vae.burgess-2018/mpi3d-toy/" not in table
    scoring = f"{gpu['scoring_s']:,.0f}"
    assert f"| beta-vae.burgess-2018/mpi3d-toy/0 | 10,000 | {gpu['cpu_s']:,.0f} | {gpu['wall_s']:,.0f} | {scoring} |" in table
    page = tmp_path / "page.md"
    page.write_text("before\n" + "\n".join(markers("almudevar-ortega-v1")) + "\nafter\n")
    assert update_costs(page, reference_dir=tmp_path) and not update_costs(page, check=True, reference_dir=tmp_path)
    assert page.read_text().startswith("before\n<!-- costs:begin almudevar-ortega-v1 -->\nGenerated from")
    page.write_text("no markers")
    with pytest.raises(FactorbenchError, match="has no cost table"):
        update_costs(page)
    with pytest.raises(FactorbenchError, match="no <!-- costs:begin reference-v1 -->"):
        update_costs(page, "reference-v1")


def test_the_cost_table_names_a_cpu_by_its_signature_where_the_run_recorded_one():
    from factorbench.baselines.costs import _device_label

    assert _device_label({"device_name": "AMD EPYC"}) == "AMD EPYC"  # runs trained before the record
    assert _device_label({"device_name": "AMD EPYC", "device_signature": "AuthenticAMD family 25 model 17 "
                          "stepping 1; avx2 avx512f avx512_bf16"}) == ("AMD EPYC (AuthenticAMD family 25 model 17 "
                                                                       "stepping 1; avx2 avx512f avx512_bf16)")
    assert _device_label({}) is None


def test_a_variant_is_compared_with_the_row_it_varies():
    """An entry named otherwise than its model is compared with the model's published row, read from the
    shipped plans: the budget variants and the k = 1 ablation; none where the paper has no such row."""
    from factorbench.baselines.reproduction import _planned, published_row

    rows = {"vae": [], "quessard": [], "ada-gvae": [], "lsbd-vae-256": []}
    trains = _planned("square-lsbd-v1")
    assert trains["quessard-1k"] == "quessard" and trains["ada-gvae-k1"] == "ada-gvae" and trains["vae"] == "vae"
    assert published_row("vae", rows, trains) == "vae" and published_row("vae", rows) == "vae"
    assert published_row("quessard-1k", rows, trains) == "quessard"
    assert published_row("ada-gvae-k1", rows, trains) == "ada-gvae" and published_row("ada-gvae-k1", rows) is None
    assert published_row("ada-ml-vae-k1", rows, trains) is None  # the paper's row is not among these rows
    assert published_row("vae-30k", rows, {"vae-30k": "vae"}) == "vae"
    assert published_row("lsbd-vae-all-g100", rows, _planned("objects-lsbd-v1")) is None  # model lsbd-vae
    assert published_row("mine", rows, trains) is None


def test_the_irs_table_lists_the_plans_dsprites_encoders_only():
    """Every shipped dSprites encoder of the plans, and every seed of their pending entries, marked."""
    from factorbench.baselines.reproduction import _irs_section, _Sources
    from factorbench.benchmark.experiments.do_tran_comparison import pending_dir
    from factorbench.benchmark.experiments.irs_comparison import PLANS as IRS_PLANS
    from factorbench.benchmark.results import reference_results

    text = _irs_section(_Sources(None))

    def of_plans(results):
        return [(model, r) for model, rs in results.items() for r in rs
                if ((r.training or {}).get("sweep") or {}).get("plan") in IRS_PLANS]

    runs = of_plans(reference_results("dsprites-dci-v1"))
    pending = [(model, r) for plan in IRS_PLANS if pending_dir(plan).is_dir()
               for model, r in of_plans(reference_results("dsprites-dci-v1", pending_dir(plan)))]
    rows = [line for line in text.splitlines() if line.startswith("| ") and "/seed" in line]
    assert len(rows) == len(runs) + len(pending) and len(runs) >= 3
    assert not any(line.startswith("| pca") for line in text.splitlines())
    assert sorted(line.split(" | ")[0][2:] for line in rows if "(pending)" in line) == sorted(
        f"{model}/seed{r.training['sweep']['seed']} (pending)" for model, r in pending)
    assert f"| Spearman rho with IRS ({len(rows)} encoders) | 1.00 |" in text
    empty = _irs_section(_Sources(None), "square-lsbd-v1")  # no encoder of these plans there
    assert empty.endswith("No encoder of these plans is collected yet.")


def test_the_precision_section_counts_the_replicates_and_follows_them(tmp_path, monkeypatch):
    """The precision table and the prose counts come from the collected fp32 replicates: each scalar's verdict
    follows the rule of ``precision_effect`` (|z| > 1 in at least half of the models), and a replicate
    edited to equal its shipped run is counted as bit-equal and moves the verdicts."""
    import factorbench.baselines.reproduction as reproduction
    from factorbench.baselines.reproduction import _precision_section, _Sources, render_value
    from factorbench.benchmark.experiments.precision_effect import FRAGILE_Z

    protocol = "square-lsbd-v1"
    sources = _Sources(None)
    effect = sources.precision(protocol)
    text = _precision_section(sources)
    assert f"`{protocol}`: {len(effect.models)} of the 12 replicates collected" in text
    for key, (over, n, fragile) in effect.fragile().items():
        zs = [s.z for s in effect.shifts if s.key == key and s.z is not None]
        assert over == sum(abs(z) > FRAGILE_Z for z in zs) and fragile == (over >= 0.5 * n)
        assert f"| {key} | {over} of {n} |" in text and text.split(f"| {key} |")[1].split("\n")[0].endswith(
            "| yes |" if fragile else "| no |")
    assert render_value(f"precision {protocol} bitequal", sources) == str(effect.bit_identical())
    assert render_value(f"precision {protocol} models", sources) == str(len(effect.models))
    with pytest.raises(Exception, match="is not one of"):
        render_value(f"precision {protocol} everything", sources)

    # a replicate set equal to the shipped runs: every pair bit-equal, nothing fragile
    replicates = tmp_path / "replicates"
    folder = replicates / protocol
    folder.mkdir(parents=True)
    shipped = json.loads((REFERENCE_DIR / protocol / "vae.json").read_text())
    seed0 = next(r for r in shipped["runs"] if r["training"]["sweep"]["seed"] == 0)
    (folder / "vae.json").write_text(json.dumps(seed0))  # a reference file may hold one result
    monkeypatch.setattr(reproduction, "PRECISION_REPLICATES_DIR", replicates)
    same = _Sources(None)
    assert render_value(f"precision {protocol} bitequal", same) == render_value(f"precision {protocol} pairs", same)
    assert render_value(f"precision {protocol} fragile", same) == "0"
    assert "1 of the 12 replicates collected (vae)" in _precision_section(same)
