"""The leaderboard's experiment pages: the papers' experiments that factorbench runs across a population of
encoders, computed from the same results as the score tables (the shipped rows, and yours where the site
adds them), by the same pure functions as REPRODUCTION.md and the experiment commands:

- ``experiments/meta-<protocol>.html``: Almudévar & Ortega's meta-evaluation (their Figures 4 and 5) of
  each dataset, one heat-map table per target (Spearman's rho with its bootstrap interval per metric and
  dependence setting), :mod:`factorbench.benchmark.experiments.metric_meta_evaluation`, and the paper's
  claims judged on it, :mod:`factorbench.benchmark.experiments.meta_evaluation_claims`;
- ``experiments/meta-claims.html``: those claims judged on every population scored in every setting, side
  by side (REPRODUCTION.md's grid);
- ``experiments/do-tran.html``: Do & Tran's dSprites comparison (their Figures 5-8), the table of settings,
  the claims with their verdicts and stability, and the figures,
  :mod:`factorbench.benchmark.experiments.do_tran_comparison`;
- ``experiments/irs.html``: Suter et al.'s IRS beside DCI D, MIG and the FactorVAE score,
  :mod:`factorbench.benchmark.experiments.irs_comparison`.

An experiment is on the site when every protocol it reads is. Each page reads only the runs its plan
trained (and yours), never the pending seeds of entries not yet complete (REPRODUCTION.md shows those,
marked): a page of the site, like its score tables, holds reference rows only.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ExperimentPage", "experiment_pages", "rho_colour"]

#: ``{protocol: {model: [runs]}}``: the results a page reads, as the site holds them
Results = Mapping[str, Mapping[str, Sequence[Any]]]
#: bootstrap resamples of the meta-evaluation pages (as REPRODUCTION.md's tables)
META_N_BOOT = 1000


@dataclass(frozen=True)
class ExperimentPage:
    """One page: ``file`` under ``experiments/``, its ``title``, the ``protocols`` it reads (all must be on the
    site), the ``plans`` whose encoders it shows, the ``source`` it reproduces, and ``render(results, yours,
    folder, plots)``, the page's HTML body (``folder``: where it may write its figures, when ``plots``)."""

    file: str
    title: str
    protocols: tuple[str, ...]
    plans: tuple[str, ...]
    source: str
    render: Callable[[Results, Collection[str], Path, bool], str]

    def citation(self, results: Results, version: str) -> str:
        """What to give to cite a number of the page: its title, each protocol and its hash, each plan and the
        hash its runs on the page record, and the factorbench version."""
        from .protocols import get_protocol

        protocols = [f"{p} (protocol {get_protocol(p).hash()[:12]})" for p in self.protocols]
        plans = sorted({(sweep["plan"], str(sweep.get("plan_hash", ""))[:12])
                        for p in self.protocols for runs in results[p].values() for run in runs
                        if (sweep := (run.training or {}).get("sweep") or {}).get("plan") in self.plans})
        return "; ".join([self.title, *protocols, *(f"{name} (plan {digest})" for name, digest in plans),
                          f"factorbench {version}"])


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def rho_colour(rho: float) -> tuple[str, str]:
    """(background, text colour) of a correlation's cell: the heat maps' diverging RdBu_r scale on [-1, 1]
    (:func:`~factorbench.benchmark.experiments.metric_meta_evaluation.plot_meta_evaluation`), grey where there
    is none, white text on the dark ends."""
    if math.isnan(rho):
        return "#d9d9d9", "#222"
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    return to_hex(colormaps["RdBu_r"]((max(-1.0, min(1.0, rho)) + 1) / 2)), "#fff" if abs(rho) > 0.6 else "#222"


def _command(text: str) -> str:
    return f"<p>Computed by <code>{_e(text)}</code> on the same results.</p>"


def _yours_note(yours: Collection[str], shown: Collection[str]) -> str:
    here = [m for m in yours if m in shown]
    return (f'<p class="note">Yours, added to the site: {_e(", ".join(here))} '
            '<span class="added">yours</span>.</p>' if here else "")


# --- Almudévar & Ortega: the meta-evaluation ------------------------------------------------------------

#: the populations computed during one :func:`experiment_pages` call, by (protocol, companion, plan, yours):
#: a population's page and the claims grid read the same meta-evaluation and claims (None outside a call: no
#: reuse)
_populations: dict[tuple[str, str, str, frozenset[str]], tuple[Any, Any, Any, list[Any]]] | None = None


def _population(results: Results, yours: Collection[str], protocol: str, companion: str,
                plan: str) -> tuple[dict[str, list[Any]], dict[str, list[Any]], Any, list[Any]]:
    """(the runs of ``plan`` and yours under ``protocol``, their ``companion`` runs of the same weights, their
    meta-evaluation, None under :data:`MIN_ENCODERS` encoders, and Almudévar & Ortega's claims judged on it,
    none without it), computed once per :func:`experiment_pages` call."""
    from factorbench.benchmark.experiments.meta_evaluation_claims import check_meta_claims
    from factorbench.benchmark.experiments.metric_meta_evaluation import (TooFewEncodersError, meta_evaluate_protocol,
                                                                           runs_of_plan, with_superseded)
    from factorbench.benchmark.results import superseded_results

    key = (protocol, companion, plan, frozenset(yours))
    if _populations is not None and key in _populations:
        return _populations[key]
    mine = runs_of_plan(results[protocol], plan, keep=yours)
    theirs = with_superseded(runs_of_plan(results[companion], plan, keep=yours), superseded_results(companion),
                             mine) if companion else {}
    try:
        result = meta_evaluate_protocol(protocol, mine, theirs, n_boot=META_N_BOOT)
    except TooFewEncodersError:  # a population still training (or only reference encoders): no correlation yet
        result = None
    claims = check_meta_claims(result) if result is not None else []
    if _populations is not None:
        _populations[key] = (mine, theirs, result, claims)
    return mine, theirs, result, claims


def _meta_render(protocol: str, companion: str, plan: str) -> Callable[[Results, Collection[str], Path, bool], str]:
    def render(results: Results, yours: Collection[str], folder: Path, plots: bool) -> str:
        from factorbench.benchmark.experiments.metric_meta_evaluation import (FEW_ENCODERS, MIN_ENCODERS,
                                                                               few_encoders_caveat,
                                                                               joined_off_scale_encoders,
                                                                               off_scale_note)
        from factorbench.benchmark.leaderboard import _DEFINED_IN

        mine, theirs, result, claims = _population(results, yours, protocol, companion, plan)
        scored = (f", with <a href=\"../{_e(companion)}/index.html\">{_e(companion)}</a>'s metrics in the independent "
                  "setting (the one it scores; n/a elsewhere)" if companion else ", every metric scored in every setting")
        body = [f"<p>Encoders of plan <code>{_e(plan)}</code> under <a href=\"../{_e(protocol)}/index.html\">"
                f"{_e(protocol)}</a>{scored}. For each dependence setting, Spearman's "
                "rho across the encoders between every metric and a target that says what a good code does; a "
                "metric better when lower is negated first, so a positive rho always means agreement. A good "
                "metric correlates strongly and keeps it as the factors become dependent (the encoders are the "
                "same in every setting).</p>"]
        if result is None:
            collected = sum(len(r) for r in mine.values())
            return "".join(body) + (f"<p>{collected} encoder{'' if collected == 1 else 's'} collected: too few for a "
                                    f"rank correlation (it takes {MIN_ENCODERS}).</p>")
        every = len(result.encoders)
        body.append(f"<p>{every} encoders; each cell: rho and its {round(100 * result.level)} % bootstrap interval "
                    f"({result.n_boot} resamples of the encoders), and its n where fewer than all have both values."
                    "</p>")
        if every < FEW_ENCODERS:
            body.append(f'<p class="note">{_e(few_encoders_caveat(every, 2))}</p>')
        for t, target in enumerate(result.targets):
            rows = []
            for m, metric in enumerate(result.metrics):
                cells = []
                for s in range(len(result.settings)):
                    rho, low, high = (float(result.rho[s, m, t]), float(result.low[s, m, t]),
                                      float(result.high[s, m, t]))
                    n = int(result.counts[s, m, t])
                    background, colour = rho_colour(rho)
                    text = ("n/a" if math.isnan(rho) else f"{rho:.2f}" + (
                        "" if math.isnan(low) else f'<br><span class="ci">[{low:.2f}, {high:.2f}]</span>')
                        + ("" if n == every else f'<br><span class="ci">n = {n}</span>'))
                    cells.append(f'<td class="heat" style="background:{background};color:{colour}" '
                                 f'data-value="{rho!r}">{text}</td>')
                rows.append(f'<tr><td class="name">{_e(metric)}</td>{"".join(cells)}</tr>')
            body.append(f'<h2>rho with <code>{_e(target)}</code></h2><div class="table-wrap">'
                        f'<table class="heat" id="rho-{_e(target)}"><thead><tr><th class="name">metric</th>'
                        + "".join(f"<th>{_e(s)}</th>" for s in result.settings) + "</tr></thead>\n<tbody>\n"
                        + "\n".join(rows) + "\n</tbody></table></div>")
        body.append(_yours_note(yours, mine))
        warned = joined_off_scale_encoders(result.encoders, mine, theirs)
        if warned:
            where = f'<a href="../metrics.html#{_DEFINED_IN["do_tran"]}">metrics.html</a>'
            body.append('<p class="note">' + off_scale_note(warned, len(result.encoders), where,
                                                            code=lambda name: f"<code>{_e(name)}</code>", text=_e)
                        + "</p>")
        body.append(_meta_claims_html(claims, len(result.encoders)))
        body.append(f"<details><summary>The {every} encoders</summary><p>"
                    + ", ".join(f"<code>{_e(e)}</code>" for e in result.encoders) + "</p></details>")
        body.append(_command(f"python -m factorbench.benchmark.experiments.metric_meta_evaluation {protocol} "
                             + (f"--with {companion} " if companion else "") + f"--plan {plan}"))
        return "".join(body)

    return render


def _meta_claims_html(claims: Sequence[Any], encoders: int) -> str:
    """Almudévar & Ortega's claims judged on a population of ``encoders``
    (:mod:`factorbench.benchmark.experiments.meta_evaluation_claims`), as a list."""
    from factorbench.benchmark.experiments import meta_evaluation_claims as mc
    from factorbench.benchmark.leaderboard import _DEFINED_IN

    few = mc.too_few_note(claims, encoders)
    if few:
        return f"<p>{_e(few)}</p>"
    items = "".join(f'<li id="{_e(c.key)}"><strong>Figure {_e(c.figure)}</strong>: "{_e(c.statement)}": '
                    f'<span class="verdict">{_e(mc.verdict_text(c))}</span>. Ours: {_e(c.evidence or "n/a")}.</li>'
                    for c in claims)
    return (f"<h2>Their claims, judged</h2><p>Each sentence of the paper's sections 6.1 and 6.2 tested on the "
            f"correlations above: {_e(mc.THRESHOLDS)}; beside each verdict, the share of the bootstrap resamples "
            "of the encoders that give it "
            f'(<a href="../metrics.html#{_DEFINED_IN["meta_evaluation"]}">metrics.html</a>).</p><ul>{items}</ul>')


def _claims_grid_render(results: Results, yours: Collection[str], folder: Path, plots: bool) -> str:
    """Almudévar & Ortega's claims (rows) judged on every population scored with every metric in every setting
    (columns: REPRODUCTION.md's meta-evaluations without a companion, each linked to its page), as
    REPRODUCTION.md's grid."""
    from factorbench.baselines.reproduction import META_COMPARISONS
    from factorbench.benchmark.experiments import meta_evaluation_claims as mc
    from factorbench.benchmark.experiments.metric_meta_evaluation import FEW_ENCODERS
    from factorbench.benchmark.leaderboard import _DEFINED_IN

    columns, shown = [], set()
    for meta in (m for m in META_COMPARISONS if not m.companion):
        runs, _, _, claims = _population(results, yours, meta.protocol, "", meta.plan)
        shown |= set(runs)
        columns.append((meta, sum(len(r) for r in runs.values()), {c.key: c for c in claims}))
    header = "".join(f'<th><a href="meta-{_e(meta.name)}.html">{_e(meta.protocol)}</a><br>{_e(meta.plan)} '
                     f"({count})</th>" for meta, count, _ in columns)
    rows = "".join(f'<tr id="{_e(claim.key)}"><td>{_e(claim.figure)}</td><td class="name">{_e(claim.statement)}</td>'
                   + "".join(f"<td>{_e(mc.grid_cell(judged.get(claim.key), count))}</td>"
                             for _, count, judged in columns) + "</tr>" for claim in mc.CLAIMS)
    return (f"<p>Each claim of their sections 6.1 and 6.2 judged on each population of encoders scored with every "
            f"metric in every setting (the column's page gives its correlations and evidence): {_e(mc.THRESHOLDS)}; "
            "beside each verdict, the share of the bootstrap resamples of the population's encoders that give it; "
            f"under {FEW_ENCODERS} encoders a population is not judged "
            f'(<a href="../metrics.html#{_DEFINED_IN["meta_evaluation"]}">metrics.html</a>).</p>'
            f'<div class="table-wrap"><table id="claims"><thead><tr><th>figure</th><th class="name">claim</th>{header}'
            f"</tr></thead>\n<tbody>\n{rows}\n</tbody></table></div>" + _yours_note(yours, shown)
            + _command("python -m factorbench.baselines.reproduction (the grid of REPRODUCTION.md)"))


# --- Do & Tran: dSprites comparison ---------------------------------------------------------------------

def _do_tran_render(results: Results, yours: Collection[str], folder: Path, plots: bool) -> str:
    from factorbench.benchmark.experiments import do_tran_comparison as dt
    from factorbench.benchmark.experiments.do_tran_comparison import mean_and_stderr

    settings = dt.settings_of(results[dt.PROTOCOL], dt.PLAN, yours=yours)
    intro = (f"<p>The encoders of plan <code>{dt.PLAN}</code> under <a href=\"../{dt.PROTOCOL}/index.html\">"
             f"{dt.PROTOCOL}</a>: FactorVAE over gamma, beta-VAE over beta and the AAE, a row per plan entry with the "
             "mean ± standard error over its seeds (their Figure 7 reports the mean and standard error of 4 "
             "runs). The paper prints no numbers for these figures: each claim is read against a threshold "
             "stated in the module before any run was scored.</p>")
    if not settings:
        return intro + f"<p>No run of plan <code>{dt.PLAN}</code> is collected yet.</p>"
    directions = [dt.scalar_direction(settings, k) for k in dt.TABLE]
    header = "".join(f'<th data-col="{3 + i}" data-better="{better}" tabindex="0" aria-sort="none">{_e(label)} '
                     f'{"↑" if better == "higher" else "↓"}</th>'
                     for i, (label, better) in enumerate(zip(dt.TABLE.values(), directions)))
    rows = []
    for s in settings:
        cells = []
        for k in dt.TABLE:
            mean, se = mean_and_stderr(s.values.get(k, ()))
            cells.append(f'<td data-value="{mean!r}">' + ("n/a" if math.isnan(mean) else f"{mean:.3f}" + (
                "" if math.isnan(se) else f" ± {se:.3f}")) + "</td>")
        family = _e(s.family) + (' <span class="added">yours</span>' if s.family == dt.YOURS else "")
        rows.append(f'<tr><td class="name" data-value="{_e(s.family)}">{family}</td><td class="name" data-value='
                    f'"{s.hyper_value if s.hyper_name else 0!r}">{_e(s.hyper_label)}</td><td data-value="{s.runs}">'
                    f'{s.runs}</td>{"".join(cells)}</tr>')
    table = ('<div class="table-wrap"><table class="sortable" id="settings"><thead><tr>'
             '<th class="name" data-col="0" data-better="none" tabindex="0" aria-sort="none">family</th>'
             '<th class="name" data-col="1" data-better="higher" tabindex="0" aria-sort="none">hyperparameter</th>'
             '<th data-col="2" data-better="higher" tabindex="0" aria-sort="none">runs</th>' + header
             + "</tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody></table></div>")
    claims = dt.check_claims(settings)
    stability = dt.verdict_stability(settings)
    items = []
    for c in claims:
        held = (f" Stability: the same verdict in {stability[c.key]:.0%} of {dt.STABILITY_RESAMPLES:,} bootstrap "
                "draws of each setting's runs." if c.key in stability else "")
        items.append(f'<li id="{_e(c.key)}"><strong>{_e(c.key)}</strong> (Figure {_e(c.figure)}): '
                     f'<span class="verdict">{_e(c.verdict)}</span>. {_e(c.statement)} Evidence: {_e(c.evidence)}'
                     f"{_e(held)}</li>")
    figures = ""
    if plots:
        drawn = dt.plot_figures(settings, folder / "do-tran")
        figures = "<h2>Figures</h2>" + "".join(
            f'<figure><img src="do-tran/{_e(p.name)}" alt="{_e(p.stem)}"><figcaption>their '
            f"{_e(p.stem.replace('fig', 'Figure '))}</figcaption></figure>" for p in drawn)
    return (intro + table + '<p class="note">n/a: no run of the setting has the metric (WSEPIN needs a Gaussian '
            "posterior, which the AAE's deterministic codes lack).</p>" + _missing_entries(dt.PLAN, settings)
            + _yours_note(yours, [s.model for s in settings])
            + "<h2>Claims (Do &amp; Tran 2020, section 4)</h2><ul>" + "".join(items) + "</ul>" + figures
            + _command("python -m factorbench.benchmark.experiments.do_tran_comparison --plot figures/"))


def _missing_entries(plan: str, settings: Sequence[Any]) -> str:
    """A note naming the entries of ``plan`` without a row: their seeds have not all finished, so no reference
    row holds them yet (REPRODUCTION.md shows their finished seeds, marked pending)."""
    from factorbench.benchmark.experiments.do_tran_comparison import missing_entries

    missing = missing_entries(settings, plan)
    if not missing:
        return ""
    return (f'<p class="note">Not shown: {len(missing)} entr{"y" if len(missing) == 1 else "ies"} of the plan whose '
            f"seeds have not all finished ({_e(', '.join(missing))}); the claims rest on the rows above.</p>")


# --- Suter et al.: IRS --------------------------------------------------------------------------------

def _irs_render(results: Results, yours: Collection[str], folder: Path, plots: bool) -> str:
    from factorbench.benchmark.experiments import irs_comparison as irs

    result = irs.irs_comparison(results[irs.PROTOCOL], yours=yours)
    intro = (f"<p>Every dSprites encoder of {' and '.join(f'<code>{p}</code>' for p in irs.PLANS)} under "
             f"<a href=\"../{irs.PROTOCOL}/index.html\">{irs.PROTOCOL}</a>, seed by seed: the Interventional "
             "Robustness Score beside DCI disentanglement, MIG and the FactorVAE score, and each one's Spearman "
             "rho with IRS across the encoders. Suter et al.'s appendix prints no IRS score to set beside "
             "these.</p>")
    if not result.encoders:
        return intro + "<p>No encoder of these plans is collected yet.</p>"
    header = "".join(f'<th data-col="{1 + c}" data-better="higher" tabindex="0" aria-sort="none">'
                     f"{_e(irs.COLUMNS.get(k, k))} ↑</th>" for c, k in enumerate(result.columns))
    rows = []
    for name, model, values in zip(result.encoders, result.models, result.values):
        mark = ' <span class="added">yours</span>' if model in yours else ""
        rows.append(f'<tr><td class="name" data-value="{_e(name)}">{_e(name)}{mark}</td>'
                    + "".join(f'<td data-value="{v!r}">{"n/a" if math.isnan(v) else f"{v:.3f}"}</td>' for v in values)
                    + "</tr>")
    rho = "".join(f"<td>{'n/a' if math.isnan(r) else f'{r:.2f}'}</td>" for r in result.rho)
    return (intro + '<div class="table-wrap"><table class="sortable" id="irs"><thead><tr><th class="name" '
            'data-col="0" data-better="none" tabindex="0" aria-sort="none">encoder</th>' + header
            + "</tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody><tfoot><tr><td class=\"name\">Spearman rho "
            f"with IRS ({len(result.encoders)} encoders)</td>{rho}</tr></tfoot></table></div>"
            + _command("python -m factorbench.benchmark.experiments.irs_comparison"))


def _pages() -> list[ExperimentPage]:
    """Every experiment page: each meta-evaluation of REPRODUCTION.md's (the current scoring first, then the
    grid of the claims on them, then the earlier ones, kept as their record), Do & Tran's comparison and the
    IRS table."""
    from factorbench.baselines.reproduction import META_COMPARISONS
    from factorbench.benchmark.experiments import do_tran_comparison as dt
    from factorbench.benchmark.experiments import irs_comparison as irs

    almudevar = "Almudévar & Ortega, Rethinking disentanglement under dependent factors of variation, 2025"
    pages = [ExperimentPage(f"meta-{m.name}.html", m.title.replace("`", ""), m.protocols, (m.plan,),
                            almudevar, _meta_render(m.protocol, m.companion, m.plan))
             for m in META_COMPARISONS]
    judged = [m for m in META_COMPARISONS if not m.companion]
    # after the populations it judges (the current scoring), before the earlier ones
    pages.insert(max(META_COMPARISONS.index(m) for m in judged) + 1,
                 ExperimentPage("meta-claims.html", "Almudévar & Ortega's claims, population by population",
                                tuple(dict.fromkeys(m.protocol for m in judged)),
                                tuple(dict.fromkeys(m.plan for m in judged)), almudevar, _claims_grid_render))
    pages.append(ExperimentPage("do-tran.html", "dSprites (Do & Tran Figures 5-8)", (dt.PROTOCOL,), (dt.PLAN,),
                                "Do & Tran, Theory and evaluation metrics for learning disentangled representations, "
                                "ICLR 2020", _do_tran_render))
    pages.append(ExperimentPage("irs.html", "dSprites: IRS (Suter et al.)", (irs.PROTOCOL,), irs.PLANS,
                                "Suter, Miladinović, Schölkopf & Bauer, Robustly disentangled causal mechanisms: "
                                "validating deep representations for interventional robustness, ICML 2019",
                                _irs_render))
    return pages


def experiment_pages(results: Results, yours: Collection[str] = (), folder: Path | None = None,
                     plots: bool = False) -> list[tuple[ExperimentPage, str]]:
    """(page, HTML body) of every experiment whose protocols are all in ``results``, in order; figures are
    written into ``folder`` when ``plots``."""
    global _populations
    out = []
    _populations = {}
    try:
        for page in _pages():
            if all(p in results for p in page.protocols):
                out.append((page, page.render(results, yours, folder if folder is not None else Path("."), plots)))
    finally:
        _populations = None
    return out
