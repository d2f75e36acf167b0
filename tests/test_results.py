"""Result files and score tables: every file validated (schema, checksum, protocol, data, duplicates),
user rows beside the reference rows, the headline first with its direction, the protocol's order."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from factorbench.benchmark.cli import main
from factorbench.benchmark.evaluation import evaluate
from factorbench.benchmark.protocols import DatasetRef, Headline, MetricCall, Protocol
from factorbench.benchmark.protocols.catalog import REFERENCE_IMAGES
from factorbench.benchmark.results import EvaluationResult, format_table, load_result, reference_results, scores_table
from factorbench.generators.errors import FactorbenchError

ROOT = Path(__file__).resolve().parent.parent

# metrics not in alphabetical order; the headline (lower is better) is not the first metric
TABLE = Protocol("square-table-v1", 1, "test protocol", DatasetRef("square"),
                 (MetricCall("mig", "mig", {"eval": "all"}),
                  MetricCall("dci", "dci", {"train": "train", "validation": "validation", "test": "test"},
                             {"regressor": "lasso"})),
                 Headline("dci", "informativeness", "lower"), reference_images=REFERENCE_IMAGES["square"])
OTHER = dataclasses.replace(TABLE, name="square-other-v1")
ORDER = ["dci.informativeness", "mig.score", "dci.disentanglement", "dci.completeness"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    data = tmp_path_factory.mktemp("table-data")
    return {name: dataclasses.replace(evaluate(TABLE, name, data_dir=data, progress=False), model=name)
            for name in ("ideal", "random", "pca")}


@pytest.fixture
def folder(results, tmp_path, monkeypatch):
    import factorbench.benchmark.protocols.base as base

    monkeypatch.setitem(base.PROTOCOLS, TABLE.name, TABLE)
    monkeypatch.setitem(base.PROTOCOLS, OTHER.name, OTHER)
    path = tmp_path / "ref"
    for name, result in results.items():
        result.save(path / f"{name}.json")
    return path


def _scores(capsys, *argv):
    code = main(["scores", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_result_json_holds_the_headline_and_directions_in_the_protocols_order(results, tmp_path):
    result = results["pca"]
    assert result.headline == {"key": "dci.informativeness", "better": "lower"}
    assert result.directions["dci.informativeness"] == "lower" and result.directions["mig.score"] == "higher"
    text = json.loads(result.save(tmp_path / "r.json").read_text(), object_pairs_hook=list)
    metrics = dict(text)["metrics"]
    assert [label for label, _ in metrics] == ["mig", "dci"]
    lines = result.summary().splitlines()
    assert lines[1].startswith("  headline: dci.informativeness = ") and lines[1].endswith("(lower is better)")
    assert [line.split()[0] for line in lines[2:6]] == ORDER
    assert "(lower is better)" in lines[2] and "(higher is better)" in lines[3]


def test_table_shows_the_headline_first_and_keeps_the_protocols_order(folder, capsys):
    table = scores_table(TABLE, folder)
    assert list(table.columns) == ORDER and table.directions == ("lower", "higher", "higher", "higher")
    assert [row[0] for row in table.rows] == ["ideal", "pca", "random"]
    code, out, _ = _scores(capsys, TABLE.name, "--dir", str(folder))
    header = out.splitlines()[0]
    assert code == 0 and header.startswith("| model | runs | kind | dci.informativeness ↓ (headline) | mig.score ↑ |")
    assert "headline: dci.informativeness (lower is better)" in out
    code, out, _ = _scores(capsys, TABLE.name, "--dir", str(folder), "--format", "latex")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith(r"% needs \usepackage{booktabs}") and \
        lines[1] == r"\begin{tabular}{l r l r r r r }"
    # human column names (the full keys in a comment below), escaped, the direction beside each
    assert r"I $\downarrow$ & MIG $\uparrow$" in out and r"% columns: I = dci.informativeness; MIG = mig.score" in out
    assert r"\midrule" in out and r"\end{tabular}" in lines
    # no trained row competes here (oracle and baselines only): nothing is bold
    assert r"\textbf" not in out


def test_an_edited_value_is_refused(folder, capsys):
    data = json.loads((folder / "pca.json").read_text())
    data["metrics"]["mig"]["scalars"]["score"] = 0.99
    data["metrics"]["mig"]["result"]["score"] = 0.99
    (folder / "pca.json").write_text(json.dumps(data))
    code, out, err = _scores(capsys, TABLE.name, "--dir", str(folder))
    assert code == 2 and "pca.json" in err and "checksum does not match" in err and "0.99" not in out
    data["metrics"]["mig"]["result"]["score"] = 0.5   # scalar and matrix disagree
    (folder / "pca.json").write_text(json.dumps(data))
    with pytest.raises(FactorbenchError, match="pca.json: mig.score is 0.99 but the metric's result says 0.5"):
        load_result(folder / "pca.json")


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("metrics"), "missing metrics"),
    (lambda d: d.update(extra=1), "unknown extra"),
    (lambda d: d.update(code_dim="ten"), 'code_dim must be an integer, got str "ten"'),
    (lambda d: d.update(result_format=1), "result format 1"),
    (lambda d: d["dataset"].pop("sha256"), "missing dataset.sha256"),
    (lambda d: d["metrics"]["mig"]["scalars"].update(score="high"), "metrics.mig.scalars.score must be a number or null"),
    (lambda d: d["headline"].update(better="up"), "headline.better: 'up' is not one of ['higher', 'lower']"),
])
def test_the_schema_is_checked_and_the_error_names_the_file(folder, capsys, change, message):
    data = json.loads((folder / "random.json").read_text())
    change(data)
    (folder / "random.json").write_text(json.dumps(data))
    code, _, err = _scores(capsys, TABLE.name, "--dir", str(folder))
    assert code == 2 and f"{folder / 'random.json'}" in err and message in err


def test_a_result_on_other_data_is_refused(results, folder, capsys):
    other = dataclasses.replace(results["pca"], dataset={**results["pca"].dataset, "spec_hash": "f" * 64})
    other.save(folder / "pca.json", force=True)
    code, _, err = _scores(capsys, TABLE.name, "--dir", str(folder))
    assert code == 2 and "pca.json was scored on dataset spec ffffffffffff" in err


def test_rows_on_other_images_are_marked(results, folder, capsys):
    dataset = {**results["pca"].dataset, "sha256": {**results["pca"].dataset["sha256"], "images": "e" * 64}}
    dataclasses.replace(results["pca"], dataset=dataset).save(folder / "pca.json", force=True)
    table = scores_table(TABLE, folder)
    assert {row[0]: row[3] for row in table.rows} == {"ideal": True, "pca": False, "random": True}
    text = format_table(table, "md")
    assert "| pca * |" in text and "* scored on other images than the protocol's reference copy" in text
    assert "pca,1,no," in format_table(table, "csv")


def test_two_files_naming_one_model_are_refused(results, folder, capsys):
    results["pca"].save(folder / "pca-again.json")
    code, _, err = _scores(capsys, TABLE.name, "--dir", str(folder))
    assert code == 2 and "/pca-again.json" in err and "/pca.json" in err and "both hold results of model 'pca'" in err


def test_another_protocols_result_is_named_as_such(folder, capsys):
    code, _, err = _scores(capsys, OTHER.name, "--dir", str(folder))
    assert code == 2 and "holds a result of protocol square-table-v1, not square-other-v1" in err
    assert "stale" not in err


def test_a_missing_folder_is_an_error(folder, capsys, tmp_path):
    code, out, err = _scores(capsys, TABLE.name, "--dir", str(tmp_path / "nonexistent"))
    assert code == 2 and "no such folder" in err and "no results" not in out
    code, out, _ = _scores(capsys, "modelnet40-lsbd-v1")   # no shipped rows: an empty table is no error
    assert code == 0 and "no results for modelnet40-lsbd-v1 yet" in out


def test_user_results_are_added_beside_the_reference_rows(results, folder, tmp_path, capsys):
    mine = tmp_path / "mine.json"
    dataclasses.replace(results["pca"], model="my-vae").save(mine)
    ref = tmp_path / "ref-only"
    ref.mkdir()
    for name in ("ideal", "random"):
        (ref / f"{name}.json").write_text((folder / f"{name}.json").read_text())
    code, out, _ = _scores(capsys, TABLE.name, "--dir", str(ref), "--add", str(mine))
    rows = [line.split(" | ")[0].strip("| ") for line in out.splitlines()[2:5]]
    assert code == 0 and rows == ["ideal", "my-vae", "random"]
    assert set(reference_results(TABLE, ref, add=[mine])) == {"ideal", "random", "my-vae"}
    code, _, err = _scores(capsys, TABLE.name, "--dir", str(folder), "--add", str(folder / "pca.json"))
    assert code == 2 and "both hold results of model 'pca'" in err and "--model NAME" in err
    code, _, err = _scores(capsys, TABLE.name, "--dir", str(ref), "--add", str(tmp_path / "absent.json"))
    assert code == 2 and "no such file" in err


def test_a_scalar_a_row_lacks_reads_n_a_not_nan(folder):
    """A metric that skipped a model (e.g. one that needs a posterior, for PCA) leaves its column empty of
    numbers: 'n/a' in Markdown and LaTeX, as on the leaderboard, never 'nan ± nan'."""
    table = scores_table(TABLE, folder)
    rows = tuple((model, n, ((math.nan, math.nan),) + cells[1:], same) if model == "pca" else (model, n, cells, same)
                 for model, n, cells, same in table.rows)
    table = dataclasses.replace(table, rows=rows)
    for fmt in ("md", "latex"):
        text = format_table(table, fmt)
        assert "nan" not in text
        pca_line = next(line for line in text.splitlines() if line.lstrip("| ").startswith("pca"))
        assert "n/a" in pca_line and pca_line.count("n/a") == 1


LOCAL = dataclasses.replace(TABLE, name="coil100-table-v1", dataset=DatasetRef("coil100", needs_source=True),
                            reference_images="")


def _local_copy(result, spec: str, digest: str, objects: int, expected: int = 100):
    """``result`` as if scored under LOCAL on one copy of the user's COIL-100 (its spec, digest, objects)."""
    dataset = {**result.dataset, "spec_hash": spec * 64, "source_digest": digest * 64, "objects": objects,
               "objects_expected": expected}
    return dataclasses.replace(result, protocol=LOCAL.name, protocol_hash=LOCAL.hash(), dataset=dataset)


def test_rows_of_two_copies_of_the_users_data_are_never_compared(results, tmp_path, monkeypatch, capsys):
    import factorbench.benchmark.protocols.base as base

    monkeypatch.setitem(base.PROTOCOLS, LOCAL.name, LOCAL)
    one = tmp_path / "one"
    one.mkdir()
    _local_copy(results["pca"], "a", "b", 100).save(one / "pca.json")
    _local_copy(results["random"], "a", "b", 100).save(one / "random.json")
    table = scores_table(LOCAL.name, one)
    assert table.notes[0] == ("data: one copy of coil100 for every row (spec aaaaaaaaaaaa, source digest bbbbbbbbbbbb, "
                              "100 objects)")
    # a third row from another copy (another digest, so another spec): refused, naming both copies
    _local_copy(results["ideal"], "c", "d", 100).save(one / "ideal.json")
    with pytest.raises(FactorbenchError, match=r"(?s)come from 2 different copies of coil100.*spec cccccccccccc.*: "
                                               r"ideal\n  spec aaaaaaaaaaaa, source digest bbbbbbbbbbbb, 100 objects: "
                                               r"pca, random"):
        scores_table(LOCAL.name, one)
    assert main(["scores", LOCAL.name, "--dir", str(one)]) == 2
    assert "different copies" in capsys.readouterr().err
    # one row whose runs come from two copies is refused too
    from factorbench.benchmark.results import save_runs

    two = tmp_path / "two"
    two.mkdir()
    save_runs(two / "pca.json", "pca", [_local_copy(results["pca"], "a", "b", 100),
                                        _local_copy(results["pca"], "e", "f", 100)])
    with pytest.raises(FactorbenchError, match="the runs of 'pca' were scored on 2 different copies"):
        scores_table(LOCAL.name, two)
    # rows on fewer objects than the protocol names say so under the table and in the result's summary
    few = tmp_path / "few"
    few.mkdir()
    _local_copy(results["pca"], "a", "b", 6, 626).save(few / "pca.json")
    assert "WARNING: 6 of the 626 objects coil100-table-v1 names" in scores_table(LOCAL.name, few).notes[0]
    assert "WARNING: scored on 6 of the 626 objects" in _local_copy(results["pca"], "a", "b", 6, 626).summary()


def test_a_copy_with_fewer_objects_than_the_protocol_names_is_warned_about(tmp_path):
    from factorbench.benchmark.evaluation import local_data_record
    from factorbench.benchmark.protocols import get_protocol
    from factorbench.generators import get

    class Spec:  # the spec of a user's ModelNet40 copy with 3 airplanes
        factors = get("modelnet40").factors()[:0] + (dataclasses.replace(get("modelnet40").factors()[0],
                                                                          values=(0.0, 1.0, 2.0)),)
        params = {"source_digest": "9" * 64}

    with pytest.warns(UserWarning, match="your copy of modelnet40 holds 3 objects, the protocol names 626"):
        record = local_data_record(get_protocol("modelnet40-lsbd-v1"), Spec())
    assert record == {"source_digest": "9" * 64, "objects": 3, "objects_expected": 626}


def test_a_result_records_the_library_versions_and_the_commit(results):
    from importlib import metadata
    from pathlib import Path

    env = results["pca"].environment
    for name in ("numpy", "scipy", "scikit-learn", "h5py"):
        assert env[name] == metadata.version(name)
    assert env["python"] and env["cpu"]
    if (Path(__file__).resolve().parent.parent / ".git").exists():  # a source checkout
        assert len(env["factorbench_commit"].split("+")[0]) == 40


def test_a_rerun_of_a_reference_encoder_says_whether_it_reproduces_the_shipped_row(results, tmp_path, monkeypatch):
    import factorbench.benchmark.results as results_module
    from factorbench.benchmark.results import compare_with_shipped

    ours = dataclasses.replace(results["pca"], environment={**results["pca"].environment, "numpy": "9.9"})
    folder = tmp_path / TABLE.name
    folder.mkdir()
    monkeypatch.setattr(results_module, "REFERENCE_DIR", tmp_path)
    results["pca"].save(folder / "pca.json")
    assert compare_with_shipped(ours).startswith("reproduces the shipped pca row of square-table-v1")
    moved = json.loads((folder / "pca.json").read_text())
    moved.pop("checksum")
    score = moved["metrics"]["mig"]["scalars"]["score"] + 0.01
    moved["metrics"]["mig"]["scalars"]["score"] = moved["metrics"]["mig"]["result"]["score"] = score
    (folder / "pca.json").write_text(EvaluationResult.from_dict(moved).to_json())
    line = compare_with_shipped(ours)
    assert "differs from the shipped pca row of square-table-v1: mig.score by 0.01" in line
    assert f"numpy {results['pca'].environment['numpy']} -> 9.9" in line
    assert compare_with_shipped(dataclasses.replace(ours, model="my-vae")) is None


def test_latex_bolds_each_columns_best_competing_mean_and_escapes_names():
    import dataclasses

    from factorbench.benchmark.results import format_table, scores_table

    table = scores_table("square-lsbd-v1")
    lines = format_table(table, "latex").splitlines()
    row = next(line for line in lines if line.startswith("lsbd-vae-1024 &"))
    assert row.split(" & ")[3] == r"\textbf{0.000 $\pm$ 0.000}"  # D_LSBD, lower is better
    assert r"\textbf" not in next(line for line in lines if line.startswith("ideal &"))  # the oracle never competes
    odd = dataclasses.replace(table, rows=((r"a_b&c%{x}^~\y",) + table.rows[0][1:],) + table.rows[1:])
    assert r"a\_b\&c\%\{x\}\^{}\~{}\textbackslash{}y &" in format_table(odd, "latex")


def test_every_shipped_result_is_valid_under_the_published_schema(capsys):
    """The JSON Schema is what the files are: every run of every shipped reference file passes it (and a tool
    that reads `scores --schema` gets the same file)."""
    import jsonschema

    from factorbench.benchmark.results import REFERENCE_DIR, RESULT_SCHEMA_PATH

    schema = json.loads(RESULT_SCHEMA_PATH.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    files = sorted(REFERENCE_DIR.glob("*/*.json"))
    assert len(files) > 100
    for path in files:
        document = json.loads(path.read_text())
        for run in document.get("runs", [document]):
            errors = list(validator.iter_errors(run))
            assert not errors, (path, errors[0].message)
    assert main(["scores", "--schema"]) == 0
    assert json.loads(capsys.readouterr().out) == schema
    assert main(["scores", "square-lsbd-v1", "--schema"]) == 2
    assert "give it alone" in capsys.readouterr().err
    assert main(["scores"]) == 2
    assert "give a protocol" in capsys.readouterr().err


def test_results_of_an_earlier_package_version_stay_readable():
    """The shipped rows were written by earlier versions (0.1.0): they load and tabulate under this one."""
    from factorbench.generators.fileformat import package_version

    from factorbench.benchmark.results import REFERENCE_DIR

    versions = {}
    for path in sorted(REFERENCE_DIR.glob("square-lsbd-v1/*.json")):
        document = json.loads(path.read_text())
        for run in document.get("runs", [document]):
            versions[run["package_version"]] = path
    assert any(v != package_version() for v in versions)
    table = scores_table("square-lsbd-v1")
    assert {row[0] for row in table.rows} >= {"pca", "vae", "beta-vae"}


def test_rows_trained_in_different_precisions_are_named_under_the_table(tmp_path):
    """A table whose trained rows mix precisions says which row is which, since precision alone moves most
    scalars by more than a seed's spread; the JSON rows carry it; a table of one precision says nothing."""
    import shutil

    from factorbench.benchmark.results import REFERENCE_DIR, row_precision

    protocol = "square-lsbd-v1"
    shipped = scores_table(protocol)
    assert dict(shipped.precisions)["vae"] == "bf16" and "pca" not in dict(shipped.precisions)
    assert not any("different precisions" in note for note in shipped.notes)
    folder = tmp_path / protocol
    shutil.copytree(REFERENCE_DIR / protocol, folder)
    replicate = ROOT / "baselines" / "replicates" / "precision-square-v1" / protocol / "vae.json"
    shutil.copy(replicate, folder / "vae.json")  # the VAE's fp32 replicate in place of its bf16 row
    table = scores_table(protocol, folder)
    assert dict(table.precisions)["vae"] == "fp32" and dict(table.precisions)["beta-vae"] == "bf16"
    (note,) = [n for n in table.notes if "different precisions" in n]
    assert note.startswith("rows trained in different precisions (bf16: ") and "; fp32: vae)" in note
    rows = {r["model"]: r for r in json.loads(format_table(table, "json"))["rows"]}
    assert rows["vae"]["precision"] == "fp32" and rows["pca"]["precision"] is None
    runs = reference_results(protocol)["vae"] + reference_results(protocol, folder)["vae"]
    assert row_precision(runs) == "mixed"


def test_rows_scored_off_the_quantisation_ranges_scale_are_named_under_the_table(tmp_path):
    """Do & Tran's quantised metrics read a code on [-4, 4]; a row whose code is off that scale (a warning of
    the metric) is named under the table, with how many of its runs; a result without the warning gives none."""
    from factorbench.benchmark.metrics.do_tran import SCALE_WARNING
    from factorbench.benchmark.results import REFERENCE_DIR, save_runs

    protocol = "dsprites-dci-v1"
    notes = [n for n in scores_table(protocol).notes if SCALE_WARNING in n]
    # read apart from the table: the rows with a run whose do_tran result carries the warning (the reference
    # encoders, and trained rows whose code is narrower than the prior's, as burgess-2018's AnnealedVAE)
    warned = sorted(model for model, runs in reference_results(protocol).items()
                    if any(SCALE_WARNING in w for r in runs for w in r.metrics["do_tran"]["result"]["warnings"]))
    assert {"ideal", "pca", "random"} <= set(warned)
    assert sorted(n.split(":")[0] for n in notes) == [f"⚠ {m}" for m in warned]
    (random_note,) = [n for n in notes if n.startswith("⚠ random")]
    assert random_note.startswith(f"⚠ random: do_tran (1 of 1 run): 10 of 10 code dimensions are {SCALE_WARNING}")
    # its do_tran cells are marked (Markdown, the JSON's caveats), no other cell; CSV stays numbers
    table = scores_table(protocol)
    do_tran = [k for k in table.columns if k.startswith("do_tran.")]
    assert do_tran and {k for m, k in table.caveats if m == "random"} == set(do_tran)
    assert not any(m not in warned for m, _ in table.caveats)
    (row,) = [line for line in format_table(table, "md").splitlines() if line.startswith("| random |")]
    assert "| 0.631 ⚠ |" in row and row.count("⚠") == len(do_tran)
    rows = {r["model"]: r for r in json.loads(format_table(table, "json"))["rows"]}
    assert rows["random"]["caveats"] == do_tran and rows["beta-vae.beta-1"]["caveats"] == []
    assert "⚠" not in format_table(table, "csv")
    # LaTeX never bolds such a cell, even of a row that competes (a user's code, kind "external"): the
    # random projection's MISJED, 0.007, is the lowest of the column
    external = dataclasses.replace(table, kinds=tuple((m, "external" if m == "random" else k) for m, k in table.kinds))
    lines = format_table(external, "latex").splitlines()
    column = 3 + table.columns.index("do_tran.misjed")
    assert next(line for line in lines if line.startswith("random &")).split(" & ")[column] == r"0.007$^{\ddagger}$"
    # the bold cells are the competing rows at the column's best (ties at three decimals all bold), random not
    i = table.columns.index("do_tran.misjed")
    competing = {m: cells[i][0] for m, _, cells, _ in table.rows
                 if dict(table.kinds)[m] not in ("oracle", "baseline") and m not in dict(table.uninformative)}
    best = round(min(competing.values()), 3)
    bold = {line.split(" & ")[0] for line in lines if " & " in line and r"\textbf" in line.split(" & ")[column]}
    assert bold == {m for m, v in competing.items() if round(v, 3) == best} and bold and "random" not in bold
    warned = load_result(REFERENCE_DIR / protocol / "random.json")
    entry = warned.metrics["do_tran"]
    clean = dataclasses.replace(warned, seeds=[1], metrics={
        **warned.metrics, "do_tran": {**entry, "result": {**entry["result"], "warnings": []}}})
    folder = tmp_path / protocol
    folder.mkdir()
    save_runs(folder / "random.json", "random", [warned, clean])
    (note,) = [n for n in scores_table(protocol, folder).notes if SCALE_WARNING in n]
    assert note.startswith("⚠ random: do_tran (1 of 2 runs): 10 of 10")
    save_runs(folder / "random.json", "random", [clean])
    assert not any(SCALE_WARNING in n for n in scores_table(protocol, folder).notes)
    # three runs whose figures differ: one line, counted, in the first run's words
    (pca,) = [n for n in scores_table("teapot-dci-v1").notes if n.startswith("⚠ pca:")]
    assert pca.startswith("⚠ pca: do_tran (3 of 3 runs, the first's words): 6 of 10 code dimensions")


def test_json_table_gives_null_for_a_metric_a_row_does_not_report():
    """The AAE's deterministic codes have no WSEPIN (it needs a Gaussian posterior): its mean and standard
    deviation are NaN, which strict JSON cannot hold; the table gives null for both, and n/a in Markdown."""
    table = scores_table("dsprites-dci-v1")
    rows = {r["model"]: r for r in json.loads(format_table(table, "json"))["rows"]}
    assert rows["aae.gz-10"]["values"]["wsepin.wsepin"] == {"mean": None, "std": None}
    assert rows["beta-vae.beta-1"]["values"]["wsepin.wsepin"]["std"] > 0
    (row,) = [line for line in format_table(table, "md").splitlines() if line.startswith("| aae.gz-10 |")]
    assert "| n/a |" in row
