"""The leaderboard: a static HTML site of the reference score tables, with each number's provenance.

    factorbench leaderboard --out site/ [--protocol NAME ...] [--no-plots] [--jobs N] [--force]
                            [--plot-cache DIR | --no-plot-cache]

Pages (plain HTML and CSS; a few lines of inline JavaScript only sort the tables, which read the same
without it):

- ``index.html``: every protocol with its dataset, headline metric and best row (oracle, baselines and rows
  flagged uninformative do not compete, :mod:`factorbench.benchmark.kinds`);
- ``<protocol>/index.html``: the score table (mean ± sample std over seeds, the headline first, best
  first; dependence settings as grouped headers, short metric names linked to ``metrics.html``; a table of
  more than :data:`COMPACT_OVER` columns opens in a headline view, every column one click away), the
  protocol's hash, citation and full definition, and how to cite a number;
- ``metrics.html``: METRICS.md, one anchored section per metric family;
- ``experiments/*.html``: the papers' experiments across the trained encoders (Almudévar & Ortega's
  meta-evaluation per dataset, Do & Tran's dSprites comparison, Suter et al.'s IRS), each where the site
  holds every protocol it reads (:mod:`~factorbench.benchmark.experiment_pages`);
- ``<protocol>/<model>.html``: every run of the model (seed by seed), its provenance (model config and
  its hash, plan and plan hash, training data hashes, budget, device, wall time, the hashes of the data
  the evaluation read) and the plots ``evaluate --plots`` draws, for its first run. A plot cache
  (:mod:`~factorbench.benchmark.plot_cache`, by default in the data cache) keeps the plots drawn, keyed by
  the result's content, so a build after a new row draws only that row's plots; after a build the least
  recently used ones are removed down to ``plot_cache_max_mb``.

The tables are :func:`factorbench.benchmark.results.scores_table`: a stale or edited result stops the
build with the same error ``factorbench scores`` gives. The site is written to a temporary folder and
moved into place when complete; an existing ``--out`` is replaced only with ``--force`` and only if it is
a site this command wrote.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.outputs import check_output_dir

from .columns import score_column
from .environment import usable_cores
from .experiment_pages import experiment_pages
from .kinds import KINDS
from .protocols import PROTOCOLS, Protocol, get_protocol
from .results import REFERENCE_DIR, EvaluationResult, ScoresTable, _reference_results, _table_of, added_models

__all__ = ["MARKER", "build_site"]

#: the file that marks a folder as a site written by :func:`build_site` (so --force never wipes another folder)
MARKER = ".factorbench-leaderboard"

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 78em; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; vertical-align: top; }
th { background: #f2f2f2; cursor: pointer; }
td.name, th.name { text-align: left; }
.table-wrap { overflow-x: auto; max-width: 100%; }
.table-wrap table { margin: 0; }
#scores td, #scores th, #runs td, #runs th, #protocols td, #settings td, #irs td { white-space: nowrap; }
code { overflow-wrap: anywhere; }
#scores tbody td:first-child, #runs tbody td:first-child, #scores thead tr:first-child th:first-child,
#runs thead tr:first-child th:first-child { position: sticky; left: 0; z-index: 1; background: #fff; }
#scores thead tr:first-child th:first-child, #runs thead tr:first-child th:first-child { background: #f2f2f2; }
th.group { text-align: center; cursor: default; }
th[aria-sort="ascending"]::after { content: " ▲"; }
th[aria-sort="descending"]::after { content: " ▼"; }
th a { color: inherit; }
table.compact .extra { display: none; }
@media (max-width: 600px) { body { margin: 1em auto; padding: 0 0.5em; } table { font-size: 0.85em; } }
td.headline { font-weight: bold; }
code, pre { font-size: 0.9em; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; }
pre.text { white-space: pre-wrap; font-family: inherit; font-size: 0.95em; }
.note { color: #555; font-size: 0.9em; }
img { max-width: min(32em, 100%); border: 1px solid #ddd; }
figure { display: inline-block; margin: 0.5em; vertical-align: top; }
figcaption { color: #555; font-size: 0.9em; }
.kind { color: #555; }
.flag { color: #a40; font-weight: bold; }
.added { color: #06c; font-weight: bold; }
td.heat { text-align: center; min-width: 5.5em; }
.ci { font-size: 0.8em; }
.verdict { font-weight: bold; }
"""

#: sorts a table by a header (click, Enter or Space; numbers by their data-value), first in the column's
#: better direction (data-better), then the other way; toggles the compact view and the kind filter. The
#: pages read the same without it.
_SORT_JS = """
document.querySelectorAll("table.sortable th[data-col]").forEach(function (th) {
  var col = parseInt(th.getAttribute("data-col"), 10);
  function sort() {
    var table = th.closest("table"), body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var first = th.getAttribute("data-better") === "higher" ? "descending" : "ascending";
    var now = th.getAttribute("aria-sort");
    var order = (now === first) ? (first === "ascending" ? "descending" : "ascending") : first;
    rows.sort(function (a, b) {
      var x = a.cells[col].getAttribute("data-value"), y = b.cells[col].getAttribute("data-value");
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (isNaN(nx) || isNaN(ny)) ? String(x).localeCompare(String(y)) : nx - ny;
      return order === "ascending" ? c : -c;
    });
    table.querySelectorAll("th[aria-sort]").forEach(function (o) { o.setAttribute("aria-sort", "none"); });
    th.setAttribute("aria-sort", order);
    rows.forEach(function (r) { body.appendChild(r); });
  }
  th.addEventListener("click", function (event) { if (event.target.tagName !== "A") { sort(); } });
  th.addEventListener("keydown", function (event) {
    if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sort(); }
  });
});
var kindFilter = document.getElementById("kind-filter");
if (kindFilter) {
  kindFilter.addEventListener("change", function () {
    document.querySelectorAll("#scores tbody tr").forEach(function (row) {
      row.hidden = kindFilter.value !== "" && row.getAttribute("data-kind") !== kindFilter.value;
    });
  });
}
var allColumns = document.getElementById("all-columns");
if (allColumns) {
  allColumns.addEventListener("change", function () {
    document.getElementById("scores").classList.toggle("compact", !allColumns.checked);
  });
}
"""

#: metric (or analysis) -> the anchor of its definition's heading in METRICS.md (the site's metrics.html)
_DEFINED_IN = {"dci": "dci", "dci_of_samples": "dci", "mig": "mig", "sap": "sap", "modularity": "modularity-and-explicitness",
               "explicitness": "modularity-and-explicitness", "beta_vae": "betavae-and-factorvae-scores",
               "factor_vae": "betavae-and-factorvae-scores", "irs": "irs", "do_tran": "do-tran-s-information-metrics",
               "minimality_sufficiency": "minimality-and-sufficiency", "d_lsbd": "d-lsbd",
               "downstream": "single-code-downstream-accuracy", "beta_vae_score": "betavae-and-factorvae-scores",
               "factor_vae_score": "betavae-and-factorvae-scores",
               "single_code_accuracy": "single-code-downstream-accuracy",
               "downstream_full": "single-code-downstream-accuracy",
               "full_code_accuracy": "single-code-downstream-accuracy",
               "meta_evaluation": "meta-evaluation-across-encoders"}
#: a score table with more columns than this opens in its compact view (the headline and the first group)
COMPACT_OVER = 10


def _slug(heading: str) -> str:
    """A METRICS.md heading's anchor: the words before its ':' or '(', lower case, joined by '-'."""
    words = heading.split(":")[0].split("(")[0]
    return "-".join("".join(c if c.isalnum() else " " for c in words.lower()).split())


def _metrics_page() -> str:
    """METRICS.md as a page of the site: one section per heading (anchored as :data:`_DEFINED_IN` links),
    its text as written."""
    text = (Path(__file__).with_name("METRICS.md")).read_text()
    parts = []
    for block in ("\n" + text).split("\n## ")[1:]:
        heading, _, body = block.partition("\n")
        parts.append(f'<h2 id="{_e(_slug(heading))}">{_e(heading)}</h2><pre class="text">{_e(body.strip())}</pre>')
    return _page("Metrics: definitions and sources", "".join(parts), "")


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, body: str, root: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{_e(title)}</title>\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<style>{_CSS}</style>\n</head>\n'
            f'<body>\n<p class="note"><a href="{root}index.html">factorbench reference scores</a></p>\n'
            f'<h1>{_e(title)}</h1>\n{body}\n<script>{_SORT_JS}</script>\n</body>\n</html>\n')


def _file_name(model: str) -> str:
    """A model's page name: its name with anything outside [A-Za-z0-9._-] replaced."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in model)
    return f"{safe or '_'}.html"


def _cell(mean: float, std: float | None) -> str:
    if mean != mean:  # nan
        return "n/a"
    return f"{mean:.3f}" if std is None else f"{mean:.3f} ± {std:.3f}"


def _arrow(better: str) -> str:
    return "↑" if better == "higher" else "↓"


def _cite(protocol: Protocol, version: str) -> str:
    return (f"<p>To cite a number of this table, give the protocol and its hash, the factorbench version and, "
            f"for a trained model, the plan and its hash (on the model's page): <code>{_e(protocol.name)} "
            f"(protocol {protocol.hash()[:12]}), factorbench {_e(version)}</code>.</p>")


def _headers(protocol: Protocol | None, columns: Sequence[str], directions: Sequence[str], first: int,
             compact: set[str]) -> tuple[str, str]:
    """(group row or '', header cells) of score columns starting at table column ``first``: short names
    linked to their definition, the full key and direction as a tooltip, sortable by keyboard."""
    parts = [score_column(protocol, k) for k in columns]
    cells = []
    for i, (key, better, (group, short, metric)) in enumerate(zip(columns, directions, parts)):
        anchor = _DEFINED_IN.get(metric)
        name = (f'<a href="../metrics.html#{anchor}">{_e(short)}</a>' if anchor else _e(short))
        extra = "" if key in compact else ' class="extra"'
        cells.append(f'<th{extra} data-col="{first + i}" data-better="{better}" tabindex="0" aria-sort="none" '
                     f'title="{_e(key)}: {better} is better">{name} {_arrow(better)}</th>')
    groups = [g for g, _, _ in parts]
    if not any(groups):
        return "", "".join(cells)
    spans: list[tuple[str, int, bool]] = []
    for key, g in zip(columns, groups):
        shown = key in compact
        if spans and spans[-1][0] == g and spans[-1][2] == shown:
            spans[-1] = (g, spans[-1][1] + 1, shown)
        else:
            spans.append((g, 1, shown))
    row = "".join(f'<th class="group{"" if shown else " extra"}" colspan="{n}" scope="colgroup">{_e(g or "")}</th>'
                  for g, n, shown in spans)
    return row, "".join(cells)


def _compact_columns(protocol: Protocol | None, table: ScoresTable) -> set[str]:
    """The columns of the compact view: every column of a small table; else the headline and the columns of
    the first group (the independent setting), or the first few columns of a table without groups."""
    columns = list(table.columns)
    if len(columns) <= COMPACT_OVER:
        return set(columns)
    groups = [score_column(protocol, k)[0] for k in columns]
    first = next((g for g in groups if g), "")
    keep = {k for k, g in zip(columns, groups) if g == first} if first else set(columns[:COMPACT_OVER])
    return keep | {table.headline}


def _score_table(table: ScoresTable, protocol: Protocol | None = None) -> str:
    compact = _compact_columns(protocol, table)
    group_row, heads = _headers(protocol, table.columns, table.directions, 3, compact)
    kinds, flagged = dict(table.kinds), dict(table.uninformative)
    rows = []
    for model, runs, cells, same in table.rows:
        mark = "" if same else " *"
        tds = "".join(f'<td data-value="{m!r}" class="{"headline" if k == table.headline else ""}'
                      f'{"" if k in compact else " extra"}"'
                      + (' title="does not compare with the other rows: see the notes under the table"'
                         if table.cell_mark(model, k) else "")
                      + f">{_e(_cell(m, s) + table.cell_mark(model, k))}</td>"
                      for k, (m, s) in zip(table.columns, cells))
        kind = kinds.get(model, "")
        flag = (f' <span class="flag" title="{_e(flagged[model])}">⚠ uninformative</span>' if model in flagged else "")
        if model in table.added:
            flag += ' <span class="added">yours</span>'
            mark += " (added)"
        rows.append(f'<tr data-kind="{_e(kind)}"><td class="name" data-value="{_e(model)}"><a href="'
                    f'{_e(_file_name(model))}">{_e(model)}</a>{mark}</td><td data-value="{runs}">'
                    f'{_e(table.runs_cell(model, runs))}</td><td class="name" data-value="{_e(kind)}"><span class="kind">'
                    f'{_e(kind)}</span>{flag}</td>{tds}</tr>')
    present = [k for k in KINDS if k in kinds.values()]
    options = "".join(f'<option value="{_e(k)}">{_e(k)}</option>' for k in present)
    chooser = (f'<p><label>Show <select id="kind-filter"><option value="">every kind</option>{options}</select>'
               "</label>")
    small = len(compact) == len(table.columns)
    if not small:
        chooser += (f' <label><input type="checkbox" id="all-columns"> every column ({len(table.columns)}; the '
                    f"headline view shows {len(compact)})</label>")
    chooser += "</p>"
    lead = ('<th class="name" rowspan="2">model</th><th rowspan="2">runs</th><th class="name" rowspan="2">kind</th>'
            if group_row else "")
    head_rows = (f"<tr>{lead}{group_row}</tr><tr>{heads}</tr>" if group_row else
                 '<tr><th class="name" data-col="0" data-better="none" tabindex="0" aria-sort="none">model</th>'
                 '<th data-col="1" data-better="higher" tabindex="0" aria-sort="none">runs</th>'
                 f'<th class="name" data-col="2" data-better="none" tabindex="0" aria-sort="none">kind</th>{heads}</tr>')
    return (chooser + f'<div class="table-wrap"><table class="sortable{"" if small else " compact"}" id="scores">'
            f'<thead>{head_rows}</thead>\n<tbody>\n' + "\n".join(rows) + "\n</tbody></table></div>")


def _notes(table: ScoresTable) -> str:
    notes = [f"headline: {table.headline} ({table.headline_better} is better); ↑ higher is better, ↓ lower is "
             "better; ± is the sample standard deviation (n - 1) over runs (seeds)"]
    if any(not row[3] for row in table.rows):
        notes.append("* scored on other images than the protocol's reference copy (another renderer or driver)")
    notes += list(table.notes)
    return "".join(f'<p class="note">{_e(n)}</p>' for n in notes)


def _protocol_page(protocol: Protocol, table: ScoresTable, version: str) -> str:
    definition = json.dumps(protocol.to_dict(), indent=1, sort_keys=True)
    body = (f"<p>{_e(protocol.description)}</p>"
            + (f"<p>Source: {_e(protocol.citation)}</p>" if protocol.citation else "")
            + f"<p>Protocol hash: <code>{protocol.hash()}</code></p>"
            + (_score_table(table, protocol) + _notes(table) if table.rows else "<p>No results yet.</p>")
            + _cite(protocol, version)
            + f"<details><summary>Definition (the JSON the hash is taken of)</summary><pre>{_e(definition)}</pre>"
              "</details>")
    return _page(protocol.name, body, "../")


def _provenance(run: EvaluationResult) -> list[tuple[str, str]]:
    """(label, value) rows of where a run's numbers come from."""
    rows: list[tuple[str, str]] = [("protocol hash", run.protocol_hash),
                                   ("factorbench version", run.package_version),
                                   ("evaluated", f"{run.date} with encoder {run.encoder}")]
    rows += [(f"data sha256 ({k})", v) for k, v in sorted((run.dataset.get("sha256") or {}).items())]
    rows.append(("dataset spec hash", str(run.dataset.get("spec_hash", ""))))
    training = run.training or {}
    if training:
        sweep = training.get("sweep") or {}
        data = training.get("training_data") or {}
        trained = training.get("trained") or {}
        rows += [("plan", f"{sweep.get('plan', '')} (hash {sweep.get('plan_hash', '')})" if sweep else "(not a sweep)"),
                 ("job", str(sweep.get("job", ""))),
                 ("model config hash", str(training.get("config_hash", ""))),
                 ("model config", json.dumps(training.get("config", {}), sort_keys=True)),
                 ("run hash", str(training.get("run_hash", ""))),
                 ("training data", f"{data.get('generator', '')} split {data.get('split', '')}, spec "
                                   f"{data.get('spec_hash', '')}, images sha256 {data.get('images_sha256', '')}"),
                 ("budget", f"{(training.get('budget') or {}).get('steps', '')} steps of batch "
                            f"{(training.get('budget') or {}).get('batch_size', '')}"),
                 ("trained on", f"{trained.get('device', '')}"
                                + (f" {trained['device_name']}" if trained.get("device_name") else "")
                                + (f" [{trained['device_signature']}]" if trained.get("device_signature") else "")
                                + f" ({trained.get('precision', '')}), "
                                f"{float(trained.get('wall_time_s', 0.0)) / 60:.1f} min"
                                + (f" ({float(trained['cpu_time_s']) / 60:.1f} CPU min, {trained.get('threads')} "
                                   "threads)" if trained.get("cpu_time_s") else "")
                                + f", torch {trained.get('torch_version', '')}")]
    else:
        rows.append(("training", "none (a reference encoder)"))
    warnings = [f"{label}: {w}" for label, entry in run.metrics.items() for w in entry.get("result", {}).get("warnings", ())]
    rows.append(("warnings", "; ".join(warnings)))
    return [(k, v) for k, v in rows if v]


def _settings_and_command(model: str, runs: Sequence[EvaluationResult]) -> str:
    """A trained row's model settings as a short table and the command that reproduces it."""
    training = runs[0].training or {}
    config = training.get("config") or {}
    if not config:
        return ""
    params = {k: v for k, v in sorted((config.get("params") or {}).items()) if k != "seed"}
    cells = "".join(f'<tr><td class="name">{_e(k)}</td><td class="name">{_e(v)}</td></tr>' for k, v in params.items())
    out = (f"<h2>Settings</h2><p>Model <code>{_e(config.get('model', ''))}</code> (config version "
           f"{_e(config.get('version', ''))}); seeds: {_e(', '.join(_run_label(r, i) for i, r in enumerate(runs)))}.</p>"
           f'<table class="provenance">{cells}</table>')
    sweep = training.get("sweep") or {}
    if sweep.get("plan") and sweep.get("dataset"):
        command = f"factorbench sweep {sweep['plan']} --only '{model}/{sweep['dataset']}/*'"
        out += f"<p>Reproduce this row (every seed): <code>{_e(command)}</code></p>"
    return out


def _caption(path: str) -> str:
    """A plot's caption from its file name (``plots/vae/d_lsbd_projections.png``: d lsbd projections)."""
    return Path(path).stem.replace("_", " ").replace("-", " ")


def _run_label(run: EvaluationResult, i: int) -> str:
    sweep = (run.training or {}).get("sweep") or {}
    return f"seed {sweep['seed']}" if "seed" in sweep else f"run {i + 1}"


def _model_page(protocol: Protocol, model: str, runs: Sequence[EvaluationResult], table: ScoresTable,
                plots: Sequence[str]) -> str:
    keys = list(table.columns)
    group_row, heads = _headers(protocol, keys, table.directions, 1, set(keys))
    rows = []
    for i, run in enumerate(runs):
        values = run.scalars()
        tds = "".join(f'<td data-value="{values.get(k, float("nan"))!r}">{_e(_cell(values.get(k, float("nan")), None))}'
                      "</td>" for k in keys)
        rows.append(f'<tr><td class="name" data-value="{i}">{_e(_run_label(run, i))}</td>{tds}</tr>')
    head_rows = (f'<tr><th class="name" rowspan="2">run</th>{group_row}</tr><tr>{heads}</tr>' if group_row else
                 f'<tr><th class="name" data-col="0" data-better="none" tabindex="0" aria-sort="none">run</th>{heads}'
                 "</tr>")
    per_run = (f'<div class="table-wrap"><table class="sortable" id="runs"><thead>{head_rows}</thead>\n'
               "<tbody>\n" + "\n".join(rows) + "\n</tbody></table></div>")
    provenance = []
    for i, run in enumerate(runs):
        cells = "".join(f'<tr><td class="name">{_e(k)}</td><td class="name"><code>{_e(v)}</code></td></tr>'
                        for k, v in _provenance(run))
        provenance.append(f"<h3>{_e(_run_label(run, i))}</h3><table class=\"provenance\">{cells}</table>")
    images = "".join(f'<figure><a href="{_e(p)}"><img src="{_e(p)}" alt="{_e(_caption(p))}"></a>'
                     f"<figcaption>{_e(_caption(p))} (click to enlarge)</figcaption></figure>" for p in plots)
    body = (f'<p>Protocol <a href="index.html">{_e(protocol.name)}</a> (hash <code>{protocol.hash()[:12]}</code>), '
            f"{len(runs)} run{'s' if len(runs) != 1 else ''}; kind: {_e(dict(table.kinds).get(model, ''))}.</p>"
            + _settings_and_command(model, runs) + f"<h2>Runs</h2>{per_run}"
            + (f"<h2>Plots ({_e(_run_label(runs[0], 0))})</h2>{images}" if plots else "")
            + "<h2>Provenance</h2>" + "".join(provenance))
    return _page(f"{model} under {protocol.name}", body, "../")


def _experiments_index(experiments: Sequence[Any]) -> str:
    """The index page's list of the experiment pages (:mod:`~factorbench.benchmark.experiment_pages`)."""
    if not experiments:
        return ""
    items = "".join(f'<li><a href="experiments/{_e(page.file)}">{_e(page.title)}</a> <span class="note">('
                    f'{_e(", ".join(page.protocols))}; {_e(page.source)})</span></li>' for page in experiments)
    return ("<h2>Experiments</h2><p>The papers' experiments across the trained encoders, computed from the same "
            f'results as the tables:</p><ul id="experiments">{items}</ul>')


def _index_page(entries: Sequence[tuple[Protocol, ScoresTable]], version: str, experiments: Sequence[Any] = ()
                ) -> str:
    rows = []
    for protocol, table in entries:
        top = table.best() if table.columns else None  # oracle, baselines and uninformative rows do not compete
        best = f"{top[0]} ({_cell(*top[2][0])})" if top else ""
        rows.append(f'<tr><td class="name" data-value="{_e(protocol.name)}"><a href="{_e(protocol.name)}/index.html">'
                    f'{_e(protocol.name)}</a></td><td class="name" data-value="{_e(protocol.dataset.generator)}">'
                    f"{_e(protocol.dataset.generator)}</td><td class=\"name\" data-value=\"{_e(table.headline)}\">"
                    f"{_e(table.headline)} {_arrow(table.headline_better)}</td><td data-value=\"{len(table.rows)}\">"
                    f'{len(table.rows)}</td><td class="name" data-value="{_e(best)}">{_e(best)}</td></tr>')
    body = (f"<p>Reference scores of factorbench {_e(version)}: every embedded protocol, each model's mean ± "
            "sample standard deviation over seeds, each number traceable to its training config, plan and data "
            "hashes.</p>"
            '<div class="table-wrap"><table class="sortable" id="protocols"><thead><tr>'
            + "".join(f'<th class="name" data-col="{i}" data-better="{b}" tabindex="0" aria-sort="none">{h}</th>'
                      for i, (h, b) in enumerate([("protocol", "none"), ("dataset", "none"), ("headline", "none"),
                                                  ("models", "higher"), ("best", "none")]))
            + '</tr></thead>\n<tbody>\n' + "\n".join(rows) + "\n</tbody></table></div>"
            + '<p class="note"><a href="metrics.html">How each metric is defined, and its source</a></p>'
            + _experiments_index(experiments))
    return _page("factorbench reference scores", body, "")


def _check_out(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise FactorbenchError(f"--out {out} is a file; give a folder for the site")
    if out.is_dir() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise FactorbenchError(f"--out {out} is a folder with other files in it; give a new or empty folder (a "
                                   "site this command wrote can be replaced with --force)")
        if not force:
            raise FactorbenchError(f"--out {out} holds a site already; pass --force to replace it")
    # a file is created and removed to test writing (permission bits pass for root, also in /proc)
    check_output_dir(out, "--out")


def _added_by_protocol(add: Sequence[str | os.PathLike]) -> dict[str, list[Path]]:
    """The user's result files grouped by the protocol each names (read, not yet validated)."""
    grouped: dict[str, list[Path]] = {}
    for item in add:
        path = Path(item)
        if not path.is_file():
            raise FactorbenchError(f"--add {path}: no such file")
        try:
            data = json.loads(path.read_text())
            runs = data["runs"] if isinstance(data, dict) and "runs" in data else [data]
            protocol = runs[0]["protocol"]
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
            raise FactorbenchError(f"--add {path}: not a factorbench result ({type(exc).__name__}: {exc})") from None
        grouped.setdefault(str(protocol), []).append(path)
    return grouped


def _plot_first_run(task: tuple[EvaluationResult, Path, Path | None]) -> list[Path]:
    """The plots of a model page, drawn or taken from the plot cache (a worker's task: top-level, so that
    it pickles)."""
    from .plot_cache import plots_through_cache
    from .plots import plot_result

    run, target, cache = task
    return plots_through_cache(run, target, cache, plot_result)


class _Sized:
    """An iterator with a length, so that a progress bar knows its total."""

    def __init__(self, items: Iterable[Any], n: int) -> None:
        self._items, self._n = items, n

    def __iter__(self) -> Any:
        return iter(self._items)

    def __len__(self) -> int:
        return self._n


def _draw_plots(tasks: Sequence[tuple[EvaluationResult, Path, Path | None]], jobs: int,
                progress: Callable[[Iterable[Any]], Iterable[Any]] | None) -> list[list[Path]]:
    """Every task's plots, in order, drawn by ``jobs`` processes (in this one for 1): the same files either
    way, since each plot is drawn alone."""
    wrap = progress if progress is not None else (lambda items: items)
    if jobs <= 1 or len(tasks) <= 1:
        return list(wrap(_Sized(map(_plot_first_run, tasks), len(tasks))))
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=multiprocessing.get_context(method))
    try:
        drawn = list(wrap(_Sized(pool.map(_plot_first_run, tasks, chunksize=1), len(tasks))))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return drawn


def build_site(out: str | os.PathLike, protocols: Iterable[str] | None = None, *,
               reference_dir: str | os.PathLike | None = None, plots: bool = True, force: bool = False,
               progress: Callable[[Iterable[Any]], Iterable[Any]] | None = None,
               add: Sequence[str | os.PathLike] = (), jobs: int | None = None,
               plot_cache: str | os.PathLike | None = None, plot_cache_max_mb: float | None = None) -> Path:
    """Write the site into ``out`` (see the module docstring); returns ``out``. ``protocols``: names
    (default every protocol with a reference folder, and those of ``add``); ``reference_dir``: the folder
    of ``<protocol>/<model>.json`` files (default the package's); ``add``: the user's result files, shown
    beside the reference rows of their protocols and marked as added; ``jobs``: processes drawing the
    plots (default every usable core); ``plot_cache``: a folder of plots drawn before
    (:mod:`~factorbench.benchmark.plot_cache`; None draws every plot); ``plot_cache_max_mb``: after the
    build, the least recently used plots are removed from the cache until it holds at most this many MB
    (default :data:`~factorbench.benchmark.plot_cache.DEFAULT_MAX_MB`); ``progress`` wraps the model pages.
    Every input is checked, and every table built, before anything is written."""
    from factorbench.generators.fileformat import package_version

    from .plot_cache import DEFAULT_MAX_MB, prune

    if jobs is not None and jobs < 1:
        raise FactorbenchError(f"--jobs must be at least 1, got {jobs}")
    max_mb = DEFAULT_MAX_MB if plot_cache_max_mb is None else plot_cache_max_mb
    if not max_mb > 0:  # NaN too
        raise FactorbenchError(f"--plot-cache-max-mb must be a positive number of MB, got {plot_cache_max_mb}")
    jobs = usable_cores() if jobs is None else jobs
    version = package_version()
    out = Path(out)
    root = Path(reference_dir) if reference_dir is not None else REFERENCE_DIR
    if not root.is_dir():
        raise FactorbenchError(f"no reference folder {root}")
    added = _added_by_protocol(add)
    names = list(protocols) if protocols is not None else sorted({p.name for p in root.iterdir()
                                                                  if p.is_dir() and p.name in PROTOCOLS} | set(added))
    if not names:
        raise FactorbenchError(f"no protocol has results under {root}")
    for name in names:
        get_protocol(name)  # unknown names: a clear error before any work
    _check_out(out, force)
    if plot_cache is not None and Path(plot_cache).exists() and not Path(plot_cache).is_dir():
        raise FactorbenchError(f"the plot cache {plot_cache} is not a folder; name a folder (--plot-cache DIR) or "
                               "draw without one (--no-plot-cache)")
    built: list[tuple[Protocol, ScoresTable, Mapping[str, list[EvaluationResult]]]] = []
    for name in names:
        protocol = get_protocol(name)
        folder = root / name
        mine = added.get(name, [])
        if folder.is_dir() or mine:
            with tempfile.TemporaryDirectory() as empty:  # a protocol only the user's results show
                results, unchecked = _reference_results(protocol, folder if folder.is_dir() else empty, mine)
            table = _table_of(protocol, results, unchecked)
            yours = added_models(mine)
            table = dataclasses.replace(table, added=yours)
        else:  # a protocol without results yet: its page says so
            table = ScoresTable(protocol.name, protocol.headline.key, protocol.headline.better, (), (), ())
            results = {}
        built.append((protocol, table, results))
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.resolve().parent))
    try:
        staging.chmod(0o755)  # mkdtemp makes it private; a web server must read the site
        (staging / MARKER).write_text("a site written by `factorbench leaderboard`; --force replaces it\n")
        site_results = {p.name: r for p, _, r in built if r}
        experiments = experiment_pages(site_results, yours=[m for _, t, _ in built for m in t.added],
                                       folder=staging / "experiments", plots=plots)
        if experiments:
            (staging / "experiments").mkdir(exist_ok=True)
        for page, body in experiments:
            cite = page.citation(site_results, version)
            (staging / "experiments" / page.file).write_text(_page(
                page.title, body + f'<p class="note">Source: {_e(page.source)}</p><p>To cite a number of this page, '
                f"give: <code>{_e(cite)}</code>.</p>", "../"))
        (staging / "index.html").write_text(_index_page([(p, t) for p, t, _ in built], version,
                                                        [page for page, _ in experiments]))
        (staging / "metrics.html").write_text(_metrics_page())
        pages = []  # (protocol, table, model, runs, folder, page file) of every model page
        for protocol, table, results in built:
            folder = staging / protocol.name
            folder.mkdir()
            (folder / "index.html").write_text(_protocol_page(protocol, table, version))
            pages += [(protocol, table, model, runs, folder, _file_name(model)) for model, runs in results.items()]
        if plots:
            cache = None if plot_cache is None else Path(plot_cache)
            drawn = _draw_plots([(runs[0], folder / "plots" / page[:-len(".html")], cache)
                                 for _, _, _, runs, folder, page in pages], jobs, progress)
        else:
            drawn = [[] for _ in (progress(pages) if progress is not None else pages)]
        for (protocol, table, model, runs, folder, page), paths in zip(pages, drawn):
            pictures = [str(p.relative_to(folder)) for p in paths]
            (folder / page).write_text(_model_page(protocol, model, runs, table, pictures))
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if plots and plot_cache is not None:
        prune(plot_cache, int(max_mb * 1e6))
    return out
