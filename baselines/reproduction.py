"""The tables of REPRODUCTION.md: our reference scores beside the published ones, point by point.

    python -m factorbench.baselines.reproduction [--check] [--file REPRODUCTION.md]

Reads the published numbers (``published/*.toml``, transcribed from the papers' tables, sources inside)
and the shipped reference results (``benchmark/reference/<protocol>/<model>.json``, validated as
``factorbench scores`` validates them), and rewrites the part of REPRODUCTION.md between the markers
``<!-- tables:begin -->`` and ``<!-- tables:end -->``, and every number of the prose written as
``<!--=EXPRESSION-->VALUE<!---->`` (:func:`render_value`). ``--check`` only compares (exit status 1 when the
file is out of date), so the document can never show numbers the reference files do not hold. Rows: every model the shipped plans
train under the protocol (with "—" until its runs are collected) and every other reference row.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factorbench.benchmark.results import EvaluationResult, reference_results
from factorbench.generators.errors import FactorbenchError, exits_2_on_user_error
from factorbench.generators.outputs import write_atomically

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["BEGIN", "END", "PROSE_NUMBER", "PUBLISHED_DIR", "Comparison", "COMPARISONS", "MetaComparison",
           "META_COMPARISONS", "render_prose",
           "render_tables", "render_value", "update_document"]

PUBLISHED_DIR = Path(__file__).with_name("published")
BEGIN, END = "<!-- tables:begin -->", "<!-- tables:end -->"


def _d_lsbd_sum(run: EvaluationResult) -> float:
    """D_LSBD summed over the subgroups, as Tonnaer et al. print it (one subgroup per object set: the score)."""
    result = run.metrics["d_lsbd"]["result"]
    return float(sum(result["subgroup_scores"])) if "subgroup_scores" in result else float(result["score"])


def _zeroshot(label: str) -> Any:
    def read(run: EvaluationResult) -> float:
        return float(run.metrics[label]["result"]["heldout_mean"]["zeroshot"])
    return read


#: derived values that are not scalars of the results
_DERIVED = {"d_lsbd.sum": _d_lsbd_sum, "dci_lasso.zeroshot": _zeroshot("dci_lasso"),
            "dci_forest.zeroshot": _zeroshot("dci_forest")}

#: column key -> header
_HEADERS = {"d_lsbd.sum": "D_LSBD (sum) ↓", "beta_vae.score": "BetaVAE ↑", "factor_vae.score": "FactorVAE ↑",
            "sap.score": "SAP ↑", "dci.disentanglement": "DCI D ↑", "mig.score": "MIG ↑",
            "modularity.score": "modularity ↑", "dci_lasso.disentanglement": "lasso D ↑",
            "dci_lasso.completeness": "lasso C ↑", "dci_lasso.informativeness": "lasso test NRMSE ↓",
            "dci_lasso.zeroshot": "lasso zero-shot NRMSE ↓", "dci_forest.disentanglement": "forest D ↑",
            "dci_forest.completeness": "forest C ↑", "dci_forest.informativeness": "forest test NRMSE ↓",
            "dci_forest.zeroshot": "forest zero-shot NRMSE ↓"}


@dataclass(frozen=True)
class Comparison:
    """One table: a protocol of ours against one published table (``published`` file, ``table`` in it)."""

    title: str
    protocol: str
    published: str
    table: str
    columns: tuple[str, ...]
    note: str = ""


_TONNAER = ("d_lsbd.sum", "beta_vae.score", "factor_vae.score", "sap.score", "dci.disentanglement", "mig.score",
            "modularity.score")
_EASTWOOD = ("dci_lasso.disentanglement", "dci_lasso.completeness", "dci_lasso.informativeness", "dci_lasso.zeroshot",
             "dci_forest.disentanglement", "dci_forest.completeness", "dci_forest.informativeness",
             "dci_forest.zeroshot")

COMPARISONS = (
    Comparison("Square (Tonnaer et al. Table 5)", "square-lsbd-v1", "tonnaer-2022", "square", _TONNAER),
    Comparison("Arrow (Tonnaer et al. Table 6)", "arrow-lsbd-v1", "tonnaer-2022", "arrow", _TONNAER),
    Comparison("Airplane (Tonnaer et al. Table 7)", "airplane-lsbd-v1", "tonnaer-2022", "airplane", _TONNAER),
    Comparison("Objects against ModelNet40 airplanes (Tonnaer et al. Table 8)", "objects-lsbd-v1", "tonnaer-2022",
               "modelnet40", _TONNAER,
               "`objects` (64 procedural objects x 64 rotations) stands in for ModelNet40's airplanes, which need "
               "outside data: the same kind of task (object identity x one rotation), not the same images."),
    Comparison("COIL-100 (Tonnaer et al. Table 9)", "coil100-lsbd-v1", "tonnaer-2022", "coil100", _TONNAER,
               "The genuine COIL-100 images (100 objects x 72 views, 64 x 64; the user's copy, source digest "
               "`b550fc88a4c8`), scored under `coil100-lsbd-v1`; every trained row of Table 9 is here (the COIL-100 "
               "entries of `reference-v1`, fp32, three seeds each)."),
    Comparison("Teapot (Eastwood & Williams Table 1 and zero-shot table)", "teapot-dci-v1", "eastwood-williams-2018",
               "teapot", _EASTWOOD, "Eastwood & Williams report one trained model per row, without a spread."),
)


@dataclass(frozen=True)
class MetaComparison:
    """One meta-evaluation (Almudévar & Ortega's Figures 4 and 5): the Spearman correlations across the
    encoders that ``plan`` trained, under the dependent-factor ``protocol`` (with the ``companion``
    protocol's metrics in the independent setting, where ``protocol`` leaves them out; "" = none). Their
    figures are heat maps without printed numbers, so the paper's side is its stated findings, in the prose."""

    title: str
    protocol: str
    companion: str
    plan: str
    note: str = ""
    #: its name where another comparison reads the same protocol (another plan's encoders); "" = the protocol
    key: str = ""

    @property
    def name(self) -> str:
        """What the prose's ``rho`` values and the leaderboard's page name it by: ``key``, else the protocol."""
        return self.key or self.protocol

    @property
    def protocols(self) -> tuple[str, ...]:
        """The protocols it reads."""
        return (self.protocol, self.companion) if self.companion else (self.protocol,)


_EARLIER = ("The earlier scoring, kept as its record: `{}` scored minimality, sufficiency, MIG, SAP, modularity, IRS "
            "and the downstream targets in every setting, and DCI, BetaVAE, FactorVAE and Do & Tran's came from `{}` "
            "on independent data only (n/a elsewhere). The plan moved to `{}`, which scores every metric in every "
            "setting as the paper does; these encoders join its tables as they train again. Where one has trained "
            "again, this table joins `{}`'s scores of the weights it scored, kept as superseded runs (BASELINES.md, "
            "\"Runs a job's later training replaces\").")


def _earlier(dataset: str, title: str) -> MetaComparison:
    return MetaComparison(f"{title} under `{dataset}-dependent-v2` (earlier scoring)", f"{dataset}-dependent-v2",
                          f"{dataset}-dci-v1", "almudevar-ortega-v1",
                          _EARLIER.format(f"{dataset}-dependent-v2", f"{dataset}-dci-v1", f"{dataset}-dependent-v3",
                                          f"{dataset}-dci-v1"))


META_COMPARISONS = (
    MetaComparison("dSprites (Almudévar & Ortega Figures 4 and 5)", "dsprites-dependent-v3", "", "almudevar-ortega-v1"),
    MetaComparison("Shapes3D (Almudévar & Ortega Figures 4 and 5)", "shapes3d-dependent-v3", "", "almudevar-ortega-v1"),
    MetaComparison("MPI3D-toy (Almudévar & Ortega Figures 4 and 5)", "mpi3d-toy-dependent-v3", "",
                   "almudevar-ortega-v1"),
    MetaComparison("dSprites, Do & Tran's encoders under `dsprites-dependent-v3`", "dsprites-dependent-v3", "",
                   "do-tran-v1",
                   "A second population on the same protocol: the 48 dSprites encoders of `do-tran-v1` (FactorVAE "
                   "gamma 10-100, beta-VAE beta 1-50 and the AAE, four seeds each; one architecture, two loss "
                   "families and their hyperparameters, where Almudévar & Ortega vary losses and architectures). "
                   "Their plan added this protocol after training; each run is scored on its own weights.",
                   key="dsprites-dependent-v3.do-tran-v1"),
    _earlier("dsprites", "dSprites"),
    MetaComparison("dSprites, the first encoders under `dsprites-dependent-v1`", "dsprites-dependent-v1",
                   "dsprites-dci-v1", "almudevar-ortega-v1",
                   "All ten have since trained again under `dsprites-dependent-v2`, which adds the whole-code target "
                   "and changes nothing else, and are in the table above; this one stays as the record of their "
                   "first scoring. Eight gave the same weights again on the same GPU model; `beta-vae` and "
                   "`annealed-vae` on `burgess-2018` trained again on a CPU, with other weights, so their "
                   "`dsprites-dci-v1` scores join only their v2 rows (the cells of n = 8 here)."),
    _earlier("shapes3d", "Shapes3D"),
    _earlier("mpi3d-toy", "MPI3D-toy"),
)

#: bootstrap resamples of the meta-evaluation tables (seeded: the document is reproducible)
META_N_BOOT = 1000


def _datasets_scored_under(raw_plan: Mapping[str, Any], protocol: str) -> set[str]:
    """The datasets of a plan (its TOML table) whose models are scored under ``protocol``."""
    return {d for d, table in raw_plan.get("datasets", {}).items() if protocol in table.get("protocols", [])}


def _planned_jobs(plan: str, protocol: str) -> int:
    """How many jobs of ``plan`` are scored under ``protocol`` (read from its TOML file, no model code)."""
    from .plan import _raw_plan

    raw = _raw_plan(plan) or {}
    datasets = _datasets_scored_under(raw, protocol)
    seeds = raw.get("budget", {}).get("seeds", [])
    return sum(len(entry.get("seeds", seeds)) * len(datasets & set(entry.get("datasets", [])))
               for entry in raw.get("models", []))


def _retired_in(plan: str, protocol: str) -> bool:
    """``protocol`` is one that ``plan`` scored under before it moved to a newer one (its ``retired`` list)."""
    from .plan import _raw_plan

    return any(protocol in table.get("retired", []) for table in (_raw_plan(plan) or {}).get("datasets", {}).values())


def _meta_comparison(name: str) -> MetaComparison:
    """The :data:`META_COMPARISONS` entry named ``name`` (its key, else its protocol)."""
    entry = next((m for m in META_COMPARISONS if m.name == name), None)
    if entry is None:
        raise FactorbenchError(f"no meta-evaluation {name}: one of " + ", ".join(m.name for m in META_COMPARISONS))
    return entry


def _meta_table(meta: MetaComparison, sources: "_Sources") -> str:
    from factorbench.benchmark.experiments.meta_evaluation_claims import format_meta_claims
    from factorbench.benchmark.experiments.metric_meta_evaluation import (MIN_ENCODERS, format_meta_evaluation,
                                                                           joined_off_scale_encoders,
                                                                           off_scale_note)

    planned = _planned_jobs(meta.plan, meta.protocol)
    whose = (f"that `{meta.plan}` scored under it before moving its scoring to a newer version" if
             _retired_in(meta.plan, meta.protocol) else f"of the {planned} that `{meta.plan}` trains")
    result = sources.meta(meta.name)
    lines = [f"### {meta.title}", ""]
    with_companion = f" (with `{meta.companion}`)" if meta.companion else ""
    scored = (f", with `{meta.companion}`'s metrics in the independent setting (the one it scores)" if meta.companion
              else ", every metric scored in every setting")
    command = (f"python -m factorbench.benchmark.experiments.metric_meta_evaluation {meta.protocol}"
               + (f" --with {meta.companion}" if meta.companion else "") + f" --plan {meta.plan}")
    if result is None:
        collected = sources.meta_encoders(meta.name)
        lines.append(f"Protocol `{meta.protocol}`{with_companion}: {collected} of the {planned} encoders that "
                     f"`{meta.plan}` trains {'is' if collected == 1 else 'are'} collected, too few for a rank "
                     f"correlation (it takes {MIN_ENCODERS}).")
    else:
        lines += [f"Protocol `{meta.protocol}`{scored}; {len(result.encoders)} encoders {whose}: "
                  + ", ".join(f"`{e}`" for e in result.encoders) + f". `{command}` prints it.", "",
                  format_meta_evaluation(result).rstrip()]
        results, companion = sources.meta_runs(meta.name)
        warned = joined_off_scale_encoders(result.encoders, results, companion)
        if warned:
            lines += ["", off_scale_note(warned, len(result.encoders), "[METRICS.md](benchmark/METRICS.md)",
                                         code=lambda name: f"`{name}`")]
        lines += ["", format_meta_claims(sources.meta_claims(meta.name), len(result.encoders),
                                         "[METRICS.md](benchmark/METRICS.md)")]
    if meta.note:
        lines += ["", meta.note]
    return "\n".join(lines)


def _meta_claims_grid(sources: "_Sources") -> str:
    """Almudévar & Ortega's claims (rows) judged on each population scored in every setting (columns: the
    :data:`META_COMPARISONS` without a companion), side by side."""
    from factorbench.benchmark.experiments.meta_evaluation_claims import CLAIMS, grid_cell

    metas = [meta for meta in META_COMPARISONS if not meta.companion]
    judged = {meta.name: {c.key: c for c in sources.meta_claims(meta.name)} for meta in metas}
    counts = {meta.name: sources.meta_encoders(meta.name) for meta in metas}

    def cell(meta: MetaComparison, key: str) -> str:
        return grid_cell(judged[meta.name].get(key), counts[meta.name])

    lines = ["### Almudévar & Ortega's claims, population by population", "",
             "Each claim of their sections 6.1 and 6.2 judged on each population scored with every metric in every "
             "setting (the tables above), with the share of the bootstrap resamples of its encoders that give the "
             "same verdict; a population under 10 encoders is not judged.", "",
             "| figure | claim | " + " | ".join(f"`{meta.protocol}`, `{meta.plan}` ({counts[meta.name]})"
                                                for meta in metas) + " |",
             "|---|---|" + "---|" * len(metas)]
    for claim in CLAIMS:
        lines.append(f"| {claim.figure} | {claim.statement} | " + " | ".join(cell(meta, claim.key) for meta in metas)
                     + " |")
    return "\n".join(lines)


def _do_tran_section(sources: "_Sources") -> str:
    """Do & Tran's Figures 5-8 on dSprites: the settings of ``do-tran-v1`` and their claims, checked
    (:mod:`factorbench.benchmark.experiments.do_tran_comparison`)."""
    from factorbench.benchmark.experiments import do_tran_comparison as dt

    settings, claims, pending = sources.do_tran()
    missing = dt.missing_entries(settings)
    if pending:
        status = (", with the finished seeds of entries not yet complete (`baselines/pending/"
                  f"{dt.PLAN}/`, marked pending: the plan trains every entry's seed 0 first). ")
    else:
        status = (f"; {len(missing)} entries without a finished seed ({', '.join(missing)}). " if missing else
                  ", every entry complete. ")
    return "\n".join([
        "### dSprites (Do & Tran Figures 5-8)", "",
        f"Protocol `{dt.PROTOCOL}`, the encoders of `{dt.PLAN}` (FactorVAE gamma 10-100, beta-VAE beta 1-50, the AAE; "
        "four seeds each)" + status +
        f"`python -m factorbench.benchmark.experiments.do_tran_comparison{' --pending' if pending else ''}` prints it and "
        "`--plot DIR` draws the figures; the module states how each claim is read. A claim on setting means "
        f"counts only settings with at least {dt.MIN_RUNS} runs; a claim across runs (Figures 5c and 6) can be "
        "judged on one seed per setting. A judged claim's stability is the share of "
        f"{dt.STABILITY_RESAMPLES:,} bootstrap draws of every setting's runs that keep its verdict "
        "(`verdict_stability`). Their Figure 6 uses lasso "
        "classifiers without the shape factor; `dsprites-dci-v1` uses forest regressors on all five factors.", "",
        dt.format_report(settings, claims, pending=pending, stability=sources.do_tran_stability()).rstrip()])


def _irs_section(sources: "_Sources", protocol: str = "dsprites-dci-v1") -> str:
    """Suter et al.'s IRS of every collected dSprites encoder of the IRS plans, beside DCI D, MIG and the
    FactorVAE score, with the Spearman correlation of each with IRS across the encoders
    (:mod:`factorbench.benchmark.experiments.irs_comparison`)."""
    from factorbench.benchmark.experiments import irs_comparison as irs
    from factorbench.benchmark.experiments.do_tran_comparison import results_with_pending

    pending = {model: runs for plan in irs.PLANS for model, runs in sources.pending(plan, protocol).items()}
    result = irs.irs_comparison(results_with_pending(sources.protocol(protocol), pending))
    lines = ["### dSprites: IRS (Suter et al.)", "",
             f"Protocol `{protocol}`, every collected encoder of " + " and ".join(f"`{p}`" for p in irs.PLANS)
             + ", with the finished seeds of entries not yet complete (marked pending, as above). Suter et al.'s "
             "appendix reports no IRS numbers to set beside these (its figures are importance "
             "matrices and interventional plots); the last row is each metric's Spearman correlation with IRS "
             "across the encoders. `python -m factorbench.benchmark.experiments.irs_comparison` prints it "
             "(`--add` puts yours beside them).", ""]
    if not result.encoders:
        return "\n".join(lines + ["No encoder of these plans is collected yet."])
    return "\n".join(lines) + "\n" + irs.format_irs_comparison(result, pending=set(pending)).rstrip()


#: the plan of fp32 replicates of the square rows and the folder its runs are collected into (outside the
#: reference folder: no table shows them as rows)
PRECISION_PLAN = "precision-square-v1"
PRECISION_REPLICATES_DIR = Path(__file__).with_name("replicates") / PRECISION_PLAN


def _precision_section(sources: "_Sources") -> str:
    """How far the training precision moves each scalar of the square rows: the collected replicates of
    :data:`PRECISION_PLAN` against the shipped runs of the same seed
    (:mod:`factorbench.benchmark.experiments.precision_effect`, its rule fixed before any replicate ran)."""
    from factorbench.benchmark.experiments.precision_effect import format_scalar_verdicts

    lines = ["### Precision: fp32 replicates of the square rows", "",
             f"Plan `{PRECISION_PLAN}` trains seed 0 of every square entry again with the shipped config in fp32 "
             "(the shipped rows: bf16). Each scalar's shift, replicate minus the shipped run of the same seed, is "
             "measured in the row's seed standard deviations (z); a scalar is *fragile under precision* when "
             "\\|z\\| > 1 in at least half of the models that report it, a rule fixed before any replicate ran. "
             "Median, largest and the sign count are descriptive. `python -m "
             f"factorbench.benchmark.experiments.precision_effect baselines/replicates/{PRECISION_PLAN}` prints "
             "each model's shifts."]
    for protocol in sorted(_replicate_protocols()):
        if not sources.protocol(protocol):
            lines += ["", f"`{protocol}`: the reference folder holds no rows of it to compare the replicates with."]
            continue
        effect = sources.precision(protocol)
        planned = _planned_jobs(PRECISION_PLAN, protocol)
        lines += ["", f"`{protocol}`: {len(effect.models)} of the {planned} replicates collected "
                  f"({', '.join(effect.models)}).", "", format_scalar_verdicts(effect).rstrip()]
    return "\n".join(lines)


def _replicate_protocols() -> list[str]:
    folder = PRECISION_REPLICATES_DIR
    return [p.name for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []


def _published(name: str) -> dict[str, Any]:
    return tomllib.loads((PUBLISHED_DIR / f"{name}.toml").read_text())


def _fmt(value: float | None, std: float | None = None) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:.3f}" if std is None else f"{value:.3f} ± {std:.3f}"


def _ours(runs: Sequence[EvaluationResult], key: str) -> tuple[float, float | None]:
    read = _DERIVED.get(key)
    values = [read(r) if read else r.scalars().get(key, math.nan) for r in runs]
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _theirs(row: Sequence[Any], columns: Sequence[str], key: str) -> tuple[float, float | None]:
    value = row[list(columns).index(key)]
    return (float(value[0]), float(value[1])) if isinstance(value, list) else (float(value), None)


def _table(comparison: Comparison, results: Mapping[str, Sequence[EvaluationResult]]) -> str:
    published = _published(comparison.published)
    rows = published[comparison.table]
    columns = published["columns"]
    shown = [c for c in comparison.columns if c in columns]
    head = "| model | runs | " + " | ".join(_HEADERS[c] for c in shown) + " |"
    lines = [f"### {comparison.title}", "", f"Protocol `{comparison.protocol}`; each cell is ours / published "
             f"({published['source']}); ± is the sample standard deviation over seeds (ours) or runs (theirs).", "",
             head, "|" + "---|" * (len(shown) + 2)]
    planned = _planned(comparison.protocol)
    names = [m for m in rows if m in results or m in planned] + [m for m in results if m not in rows
                                                                  and m not in ("ideal", "random")]
    for model in names:
        runs = results.get(model, ())
        paper_row = published_row(model, rows, planned)
        cells = []
        for key in shown:
            ours = _fmt(*_ours(runs, key)) if runs else "—"
            theirs = _fmt(*_theirs(rows[paper_row], columns, key)) if paper_row else "—"
            cells.append(f"{ours} / {theirs}")
        lines.append(f"| {model} | {len(runs)} | " + " | ".join(cells) + " |")
    others = [m for m in rows if m not in names]
    if others:
        lines += ["", f"Published rows without a counterpart in the plan yet: {', '.join(others)}."]
    if comparison.note:
        lines += ["", comparison.note]
    return "\n".join(lines)


def published_row(model: str, rows: Mapping[str, Any], trains: Mapping[str, str] | None = None) -> str | None:
    """The published row a row of ours is compared with: its own name, else the row of the model its plan
    entry trains (``trains``: entry name -> model, :func:`_planned`), which the entry varies in one setting
    (``vae-30k`` and ``quessard-1k`` the budget, ``ada-gvae-k1`` Ada's k); None when the paper has neither."""
    if model in rows:
        return model
    varied = (trains or {}).get(model)
    return varied if varied in rows else None


def _planned(protocol: str) -> dict[str, str]:
    """``{row name: model}`` of the entries the shipped plans train for ``protocol`` (read from the TOML
    files, no model code)."""
    from .plan import PLANS_DIR, _raw_plan

    names: dict[str, str] = {}
    for path in sorted(PLANS_DIR.glob("*.toml")):
        plan = _raw_plan(path.stem) or {}
        datasets = _datasets_scored_under(plan, protocol)
        for entry in plan.get("models", []):
            if datasets & set(entry.get("datasets", [])):
                names[entry.get("name", entry.get("model"))] = entry.get("model")
    return names


def render_tables(reference_dir: Path | None = None, sources: "_Sources | None" = None) -> str:
    """The generated part of REPRODUCTION.md (``sources``: results already read, shared with the prose)."""
    sources = sources if sources is not None else _Sources(reference_dir)
    return "\n\n".join([_table(comparison, sources.protocol(comparison.protocol)) for comparison in COMPARISONS]
                       + [_meta_table(meta, sources) for meta in META_COMPARISONS] + [_meta_claims_grid(sources)]
                       + [_do_tran_section(sources), _irs_section(sources), _precision_section(sources)])


#: a number of the prose: ``<!--=EXPRESSION-->VALUE<!---->``, VALUE rewritten from EXPRESSION (see :func:`render_value`)
PROSE_NUMBER = re.compile(r"<!--=(?P<expr>[^>]*?)-->(?P<value>.*?)<!---->", re.S)


class _Sources:
    """The reference results and published tables the prose reads, each loaded once."""

    def __init__(self, reference_dir: Path | None) -> None:
        self.reference_dir = reference_dir
        self._results: dict[str, Mapping[str, Sequence[EvaluationResult]]] = {}
        self._published: dict[str, dict[str, Any]] = {}
        self._meta: dict[str, Any] = {}
        self._meta_runs: dict[str, tuple[dict[str, list[Any]], dict[str, list[Any]]]] = {}
        self._meta_claims: dict[str, list[Any]] = {}
        self._precision: dict[str, Any] = {}
        self._do_tran: tuple[list[Any], list[Any], set[str]] | None = None
        self._do_tran_stability: dict[str, float] | None = None

    def protocol(self, protocol: str) -> Mapping[str, Sequence[EvaluationResult]]:
        """The validated reference results of ``protocol``, read once (none where its folder is missing)."""
        if protocol not in self._results:
            folder = self.reference_dir / protocol if self.reference_dir is not None else None
            self._results[protocol] = reference_results(protocol, folder) if folder is None or folder.is_dir() else {}
        return self._results[protocol]

    def pending(self, plan: str, protocol: str) -> Mapping[str, Sequence[EvaluationResult]]:
        """The validated finished seeds of ``plan``'s entries not yet complete, under ``protocol`` (this
        checkout's ``baselines/pending/<plan>/<protocol>``, as the replicates are read from the checkout;
        none where it is missing), read once."""
        from factorbench.benchmark.experiments.do_tran_comparison import pending_results

        key = f"pending:{plan}:{protocol}"
        if key not in self._results:
            self._results[key] = pending_results(plan, protocol)
        return self._results[key]

    def meta(self, name: str) -> Any:
        """The meta-evaluation of the :data:`META_COMPARISONS` entry named ``name`` (its key, else its
        protocol; None with fewer than :data:`MIN_ENCODERS` encoders collected), computed once."""
        from factorbench.benchmark.experiments.metric_meta_evaluation import MIN_ENCODERS, meta_evaluate_protocol

        if name not in self._meta:
            results, companion = self.meta_runs(name)
            entry = _meta_comparison(name)
            self._meta[name] = meta_evaluate_protocol(entry.protocol, results, companion, n_boot=META_N_BOOT) \
                if self.meta_encoders(name) >= MIN_ENCODERS else None
        return self._meta[name]

    def meta_encoders(self, name: str) -> int:
        """How many encoders of the meta-evaluation ``name`` are collected (its plan's runs under its
        protocol), also below the :data:`MIN_ENCODERS` a rank correlation needs."""
        return sum(len(runs) for runs in self.meta_runs(name)[0].values())

    def meta_claims(self, name: str) -> list[Any]:
        """Almudévar & Ortega's claims judged on the meta-evaluation ``name``
        (:mod:`factorbench.benchmark.experiments.meta_evaluation_claims`; none with fewer than
        :data:`~factorbench.benchmark.experiments.metric_meta_evaluation.MIN_ENCODERS` encoders), judged once: the
        tables, the grid and every ``metaclaim`` value of the prose read them."""
        from factorbench.benchmark.experiments.meta_evaluation_claims import check_meta_claims

        if name not in self._meta_claims:
            result = self.meta(name)
            self._meta_claims[name] = check_meta_claims(result) if result is not None else []
        return self._meta_claims[name]

    def meta_runs(self, name: str) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
        """The runs the meta-evaluation ``name`` reads: its plan's runs under its protocol, and under its
        companion protocol those of the same weights (superseded runs where a job trained again; none
        without a companion), read once."""
        from factorbench.benchmark.experiments.metric_meta_evaluation import runs_of_plan, with_superseded
        from factorbench.benchmark.results import superseded_results

        if name not in self._meta_runs:
            entry = _meta_comparison(name)
            results = runs_of_plan(self.protocol(entry.protocol), entry.plan)
            companion = with_superseded(runs_of_plan(self.protocol(entry.companion), entry.plan),
                                        superseded_results(entry.companion), results) if entry.companion else {}
            self._meta_runs[name] = (results, companion)
        return self._meta_runs[name]

    def do_tran(self) -> tuple[list[Any], list[Any], set[str]]:
        """Do & Tran's settings (the collected and pending runs of their plan), their claims checked, and the
        pending models (:mod:`factorbench.benchmark.experiments.do_tran_comparison`), computed once."""
        from factorbench.benchmark.experiments import do_tran_comparison as dt

        if self._do_tran is None:
            pending = self.pending(dt.PLAN, dt.PROTOCOL)
            settings = dt.settings_of(dt.results_with_pending(self.protocol(dt.PROTOCOL), pending), dt.PLAN)
            self._do_tran = (settings, dt.check_claims(settings), set(pending))
        return self._do_tran

    def do_tran_stability(self) -> dict[str, float]:
        """:func:`~factorbench.benchmark.experiments.do_tran_comparison.verdict_stability` of :meth:`do_tran`'s
        settings (its default draws and seed), computed once."""
        from factorbench.benchmark.experiments import do_tran_comparison as dt

        if self._do_tran_stability is None:
            self._do_tran_stability = dt.verdict_stability(self.do_tran()[0])
        return self._do_tran_stability

    def precision(self, protocol: str) -> Any:
        """The precision effect of the collected replicates of ``protocol`` against the reference rows
        (:data:`PRECISION_REPLICATES_DIR`), computed once."""
        from factorbench.benchmark.experiments.precision_effect import precision_effect

        if protocol not in self._precision:
            folder = PRECISION_REPLICATES_DIR / protocol
            if not folder.is_dir():
                raise FactorbenchError(f"no replicates of {protocol} in {PRECISION_REPLICATES_DIR}: one of "
                                       + (", ".join(sorted(_replicate_protocols())) or "none"))
            self._precision[protocol] = precision_effect(protocol, self.protocol(protocol),
                                                         reference_results(protocol, folder))
        return self._precision[protocol]

    def runs(self, protocol: str, model: str) -> Sequence[EvaluationResult]:
        runs = self.protocol(protocol).get(model)
        if not runs:
            raise FactorbenchError(f"the prose cites {model} under {protocol}, which has no reference runs")
        return sorted(runs, key=lambda r: (r.training.get("sweep") or {}).get("seed", 0))

    def published(self, name: str, table: str, model: str, key: str) -> tuple[float, float | None]:
        if name not in self._published:
            self._published[name] = _published(name)
        data = self._published[name]
        try:
            return _theirs(data[table][model], data["columns"], key)
        except (KeyError, ValueError):
            raise FactorbenchError(f"the prose cites {name} {table} {model} {key}, which the published file "
                                   "lacks") from None


def _values(runs: Sequence[EvaluationResult], key: str) -> list[float]:
    read = _DERIVED.get(key)
    return [read(r) if read else r.scalars().get(key, math.nan) for r in runs]


def _digits(fmt: str, prefix: str) -> int:
    return int(fmt[len(prefix):] or 2)


def _mean_std(mean: float, std: float, fmt: str) -> str:
    """``msN`` "mean ± std", ``mN`` the mean, ``sN`` the std, N decimals (default 2)."""
    if fmt.startswith("ms"):
        d = _digits(fmt, "ms")
        return f"{mean:.{d}f} ± {std:.{d}f}"
    if fmt[:1] in ("m", "s"):
        d = _digits(fmt, fmt[0])
        return f"{(mean if fmt[0] == 'm' else std):.{d}f}"
    raise ValueError(f"format {fmt!r} is not one of msN, mN, sN, seedsN, n")


def render_value(expression: str, sources: _Sources) -> str:
    """One number of the prose, from the shipped results or the published tables (formatted once, from the
    full-precision value: no double rounding):

    - ``ours PROTOCOL MODEL KEY FORMAT``: ``msN`` mean ± sample std, ``mN`` mean, ``sN`` std, ``seedsN``
      every seed's value ("a, b and c", in seed order), ``n`` the number of runs (N decimals, default 2);
    - ``paper FILE TABLE MODEL KEY FORMAT``: ``msN``, ``mN`` or ``sN`` of a published cell;
    - ``gap PROTOCOL MODEL KEY FILE TABLE [PAPER_MODEL]``: our mean's distance from the published mean in
      published standard deviations, one decimal (``PAPER_MODEL``: the published row, for an entry of ours
      that varies it, e.g. ``quessard-1k`` against ``quessard``);
    - ``rho NAME TARGET METRIC SETTING FORMAT``: a cell of the meta-evaluation named ``NAME`` (its protocol,
      or its key: :data:`META_COMPARISONS`): ``mN`` Spearman's rho, ``ciN`` its bootstrap interval, ``n`` the number
      of encoders it is over (``~`` in METRIC stands for a space);
    - ``precision PROTOCOL FIELD``: a count of the precision replicates' comparison (:data:`PRECISION_PLAN`):
      ``models`` collected, ``planned``, ``scalars``, ``fragile`` scalars, ``pairs`` (model, scalar),
      ``bitequal`` pairs, ``positive`` shifts;
    - ``claim KEY verdict``: the verdict of Do & Tran's claim KEY (:func:`~factorbench.benchmark.experiments.
      do_tran_comparison.check_claims`), ", provisional" added where it rests on pending settings;
      ``claim KEY NAME mN``: a number of its evidence (``Claim.numbers``, ``~`` for a space in NAME);
      ``claim KEY stability``: the percentage of bootstrap draws of the settings' runs that keep its verdict
      (:func:`~factorbench.benchmark.experiments.do_tran_comparison.verdict_stability`);
    - ``claims FIELD``: how many of Do & Tran's claims there are (``total``), are ``judged`` (not "too few
      runs"), ``reproduced``, and ``provisional`` (judged on pending settings); ``claims pending``: that
      count as a clause ("3 of the verdicts rest on settings whose other seeds are still to come", or
      "every verdict rests on complete settings");
    - ``metaclaim NAME KEY verdict``: the verdict of Almudévar & Ortega's claim KEY on the meta-evaluation
      ``NAME`` (:mod:`~factorbench.benchmark.experiments.meta_evaluation_claims`), ``metaclaim NAME KEY
      stability`` the percentage of its bootstrap resamples that keep it, ``metaclaim NAME KEY NUMBER mN`` a
      number of its evidence (``MetaClaim.numbers``, ``~`` for a space);
    - ``metaclaims NAME FIELD``: on the meta-evaluation ``NAME``, how many of Almudévar & Ortega's claims there
      are (``total``), are ``judged`` (neither too few encoders nor unscored) and ``reproduced``, and how many
      of its plan's encoders are collected (``encoders``, also under
      :data:`~factorbench.benchmark.experiments.metric_meta_evaluation.MIN_ENCODERS`) and ``planned``; ``which``:
      the keys of the claims reproduced ("`a`, `b` and `c`", or "none")."""
    parts = expression.split()
    try:
        if parts[0] == "ours" and len(parts) == 5:
            _, protocol, model, key, fmt = parts
            values = _values(sources.runs(protocol, model), key)
            mean = sum(values) / len(values)
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else math.nan
            if fmt == "n":
                return str(len(values))
            if fmt.startswith("seeds"):
                d = _digits(fmt, "seeds")
                text = [f"{v:.{d}f}" for v in values]
                return text[0] if len(text) == 1 else ", ".join(text[:-1]) + " and " + text[-1]
            return _mean_std(mean, std, fmt)
        elif parts[0] == "paper" and len(parts) == 6:
            _, name, table, model, key, fmt = parts
            mean, std = sources.published(name, table, model, key)
            return _mean_std(mean, std or 0.0, fmt)
        elif parts[0] == "rho" and len(parts) == 6:
            _, protocol, target, metric, setting, fmt = parts
            result = sources.meta(protocol)
            if result is None:
                raise FactorbenchError(f"the prose cites a correlation under {protocol}, which has too few encoders")
            metric = metric.replace("~", " ")  # a metric name with spaces (a negated one) is written with ~
            try:
                s, m, t = result.settings.index(setting), result.metrics.index(metric), result.targets.index(target)
            except ValueError:
                raise FactorbenchError(f"the prose cites {target} x {metric} in setting {setting} of {protocol}, "
                                       f"which its meta-evaluation lacks") from None
            if fmt == "n":  # the encoders this cell's correlation is over
                return str(int(result.counts[s, m, t]))
            if fmt.startswith("ci"):
                d = _digits(fmt, "ci")
                return f"[{result.low[s, m, t]:.{d}f}, {result.high[s, m, t]:.{d}f}]"
            if fmt.startswith("m"):
                return f"{result.rho[s, m, t]:.{_digits(fmt, 'm')}f}"
            raise ValueError(f"format {fmt!r} is not one of mN, ciN, n")
        elif parts[0] == "precision" and len(parts) == 3:
            _, protocol, field = parts
            effect = sources.precision(protocol)
            verdicts = effect.fragile()
            counts = {"models": len(effect.models), "planned": _planned_jobs(PRECISION_PLAN, protocol),
                      "scalars": len(effect.keys), "fragile": sum(v[2] for v in verdicts.values()),
                      "pairs": len(effect.shifts), "bitequal": effect.bit_identical(),
                      "positive": sum(s.shift > 0 for s in effect.shifts)}
            if field not in counts:
                raise ValueError(f"field {field!r} is not one of {', '.join(counts)}")
            return str(counts[field])
        elif parts[0] == "metaclaim" and len(parts) in (4, 5):
            return _meta_claim_value(parts[1], parts[2], parts[3:], sources)
        elif parts[0] == "metaclaims" and len(parts) == 3:
            return _meta_claims_count(parts[1], parts[2], sources)
        elif parts[0] == "claim" and len(parts) in (3, 4):
            return _claim_value(parts[1], parts[2:], sources)
        elif parts[0] == "claims" and len(parts) == 2:
            from factorbench.benchmark.experiments.do_tran_comparison import REPRODUCED, TOO_FEW

            _, claims, pending = sources.do_tran()
            counts = {"total": len(claims), "judged": sum(c.verdict != TOO_FEW for c in claims),
                      "reproduced": sum(c.verdict == REPRODUCED for c in claims),
                      "provisional": sum(bool(c.pending_of(pending)) for c in claims)}
            if parts[1] == "pending":
                n = counts["provisional"]
                return (f"{n} of the verdicts rest{'s' if n == 1 else ''} on settings whose other seeds are still to "
                        "come" if n else "every verdict rests on complete settings")
            if parts[1] not in counts:
                raise ValueError(f"field {parts[1]!r} is not one of {', '.join(counts)}, pending")
            return str(counts[parts[1]])
        elif parts[0] == "gap" and len(parts) in (6, 7):
            _, protocol, model, key, name, table, *paper_model = parts
            values = _values(sources.runs(protocol, model), key)
            model = paper_model[0] if paper_model else model
            mean, std = sources.published(name, table, model, key)
            if not std:
                raise FactorbenchError(f"the prose asks for a gap in standard deviations of {name} {table} {model} "
                                       f"{key}, which has none")
            return f"{abs(sum(values) / len(values) - mean) / std:.1f}"
    except (IndexError, ValueError) as exc:
        raise FactorbenchError(f"prose number <!--={expression}-->: {exc}") from None
    raise FactorbenchError(f"prose number <!--={expression}-->: not one of 'ours PROTOCOL MODEL KEY FORMAT', "
                           "'paper FILE TABLE MODEL KEY FORMAT', 'gap PROTOCOL MODEL KEY FILE TABLE [PAPER_MODEL]', "
                           "'rho PROTOCOL TARGET METRIC SETTING FORMAT', 'precision PROTOCOL FIELD', "
                           "'claim KEY verdict', 'claim KEY stability', 'claim KEY NAME FORMAT', 'claims FIELD', "
                           "'metaclaim META KEY verdict', 'metaclaim META KEY stability', "
                           "'metaclaim META KEY NAME FORMAT', 'metaclaims META FIELD'")


def _meta_claim_value(name: str, key: str, rest: Sequence[str], sources: "_Sources") -> str:
    """``metaclaim META KEY verdict|stability`` or ``metaclaim META KEY NAME mN`` of :func:`render_value`:
    Almudévar & Ortega's claim ``KEY`` judged on the meta-evaluation ``META``."""
    claim = next((c for c in sources.meta_claims(name) if c.key == key), None)
    if claim is None:
        from factorbench.benchmark.experiments.meta_evaluation_claims import CLAIMS

        raise FactorbenchError(f"the prose cites Almudévar & Ortega's claim {key!r} on {name}, which has too few "
                               "encoders" if any(c.key == key for c in CLAIMS) else
                               f"the prose cites Almudévar & Ortega's claim {key!r}, not one of "
                               + ", ".join(c.key for c in CLAIMS))
    if list(rest) == ["verdict"]:
        return claim.verdict
    if list(rest) == ["stability"]:
        if claim.stability is None:
            raise FactorbenchError(f"the prose cites the stability of claim {key} on {name}, which is "
                                   f"{claim.verdict}")
        return f"{claim.stability:.0%}"
    if len(rest) != 2 or not rest[1].startswith("m"):
        raise ValueError(f"'metaclaim {name} {key}' takes 'verdict', 'stability' or 'NAME mN'")
    number = rest[0].replace("~", " ")
    if number not in claim.numbers:
        raise FactorbenchError(f"the prose cites {number!r} of claim {key} on {name}, whose evidence gives "
                               + ", ".join(map(repr, claim.numbers)))
    return f"{claim.numbers[number]:.{_digits(rest[1], 'm')}f}"


def _meta_claims_count(name: str, field: str, sources: "_Sources") -> str:
    """``metaclaims META FIELD`` of :func:`render_value`: a count of Almudévar & Ortega's claims on the
    meta-evaluation ``META``, or of its encoders."""
    from factorbench.benchmark.experiments.meta_evaluation_claims import CLAIMS, NOT_SCORED, REPRODUCED, TOO_FEW

    entry = _meta_comparison(name)
    claims = sources.meta_claims(name)
    counts = {"encoders": sources.meta_encoders(name), "planned": _planned_jobs(entry.plan, entry.protocol),
              "total": len(CLAIMS), "judged": sum(c.verdict not in (TOO_FEW, NOT_SCORED) for c in claims),
              "reproduced": sum(c.verdict == REPRODUCED for c in claims)}
    if field == "which":  # the claims reproduced, by key
        keys = [f"`{c.key}`" for c in claims if c.verdict == REPRODUCED]
        return "none" if not keys else keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + " and " + keys[-1]
    if field not in counts:
        raise ValueError(f"field {field!r} is not one of {', '.join(counts)}, which")
    return str(counts[field])


def _claim_value(key: str, rest: Sequence[str], sources: "_Sources") -> str:
    """``claim KEY verdict`` or ``claim KEY NAME mN`` of :func:`render_value`."""
    _, claims, pending = sources.do_tran()
    claim = next((c for c in claims if c.key == key), None)
    if claim is None:
        raise FactorbenchError(f"the prose cites Do & Tran's claim {key!r}, not one of "
                               + ", ".join(c.key for c in claims))
    if list(rest) == ["verdict"]:
        from factorbench.benchmark.experiments.do_tran_comparison import verdict_text

        return verdict_text(claim, pending, counts=False)
    if list(rest) == ["stability"]:
        stability = sources.do_tran_stability()
        if key not in stability:
            raise FactorbenchError(f"the prose cites the stability of Do & Tran's claim {key}, which has none "
                                   f"({claim.verdict})")
        return f"{stability[key]:.0%}"
    if len(rest) != 2:
        raise ValueError(f"'claim {key}' takes 'verdict', 'stability' or 'NAME FORMAT'")
    name, fmt = rest[0].replace("~", " "), rest[1]
    if name not in claim.numbers:
        raise FactorbenchError(f"the prose cites {name!r} of Do & Tran's claim {key}, whose evidence ({claim.verdict}) "
                               "gives " + (", ".join(map(repr, claim.numbers)) or "no number"))
    if not fmt.startswith("m"):
        raise ValueError(f"format {fmt!r} is not mN")
    return f"{claim.numbers[name]:.{_digits(fmt, 'm')}f}"


def render_prose(text: str, reference_dir: Path | None = None, sources: "_Sources | None" = None) -> str:
    """``text`` with every prose number (:data:`PROSE_NUMBER`) rewritten from its expression."""
    sources = sources if sources is not None else _Sources(reference_dir)
    return PROSE_NUMBER.sub(lambda m: f"<!--={m['expr']}-->{render_value(m['expr'], sources)}<!---->", text)


def update_document(path: Path, check: bool = False, reference_dir: Path | None = None) -> bool:
    """Rewrite the tables and the prose numbers of ``path`` (True when it changed); ``check``: only report
    whether it would."""
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{path} has no {BEGIN} ... {END} markers")
    start, stop = text.index(BEGIN) + len(BEGIN), text.index(END)
    sources = _Sources(reference_dir)  # each protocol's results read once, for the tables and the prose
    new = render_prose(text[:start] + "\n" + render_tables(reference_dir, sources) + "\n" + text[stop:],
                       reference_dir, sources)
    if new == text:
        return False
    if not check:
        write_atomically(path, new)
    return True


@exits_2_on_user_error
def document_main(argv: list[str] | None, description: str, default_file: Path, module: str,
                  update: Callable[[argparse.Namespace], bool], extra: Callable[[argparse.ArgumentParser], None]
                  = lambda parser: None) -> int:
    """The command of a generated document: ``--file``, ``--check`` (exit 1 when stale), ``--reference-dir``;
    ``update(args)`` rewrites it (or, with ``--check``, only says whether it would)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--file", type=Path, default=default_file)
    parser.add_argument("--check", action="store_true", help="exit 1 if the generated parts are out of date")
    parser.add_argument("--reference-dir", type=Path, default=None,
                        help="reference files <protocol>/<model>.json (default: the package's benchmark/reference)")
    extra(parser)
    args = parser.parse_args(argv)
    changed = update(args)
    if args.check and changed:
        print(f"{args.file} is out of date: run python -m {module}")
        return 1
    print(f"{args.file}: {'updated' if changed else 'up to date'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return document_main(argv, __doc__.splitlines()[0], Path(__file__).resolve().parent.parent / "REPRODUCTION.md",
                         "factorbench.baselines.reproduction",
                         lambda args: update_document(args.file, check=args.check, reference_dir=args.reference_dir))


if __name__ == "__main__":
    raise SystemExit(main())
