"""Meta-evaluation of disentanglement metrics across a population of encoders (Almudévar & Ortega 2025,
section 6, their Figures 4 and 5): for each dependence setting, the Spearman rank correlation across
encoders between every metric and a target that says what a good representation does (the accuracy of a
downstream classifier, or the Interventional Robustness Score), with a bootstrap interval over encoders.

A good metric correlates strongly with the target, and keeps that correlation as the factors become
dependent (the encoders are the same in every setting; only the evaluation samples change).

The analysis is a pure function of scores: :func:`meta_evaluate` takes one row of scalars per encoder
(``{"<setting>.<metric label>.<scalar>": value}``, as a dependent-factor protocol's results hold them),
so it runs on any population, e.g. your own encoders' results beside the reference rows.
:func:`population_of` builds the rows from a protocol's result files (one row per trained run, seeds
apart).

    python -m factorbench.benchmark.experiments.metric_meta_evaluation square-dependent-v1
    python -m factorbench.benchmark.experiments.metric_meta_evaluation square-dependent-v1 --add mine.json --plot fig.png
    python -m factorbench.benchmark.experiments.metric_meta_evaluation dsprites-dependent-v1 \
        --with dsprites-dci-v1 --plan almudevar-ortega-v1
    python -m factorbench.benchmark.experiments.metric_meta_evaluation dsprites-dependent-v3 --plan almudevar-ortega-v1
    python -m factorbench.benchmark.experiments.metric_meta_evaluation dsprites-dependent-v2 \
        --with dsprites-dci-v1 --plan almudevar-ortega-v1

From ``-dependent-v2`` on, a protocol adds a third target, the same forests on the whole code
(:data:`WHOLE_CODE_TARGET`); a ``-dependent-v3`` protocol scores every metric in every setting.

``--with`` adds the metrics of a companion protocol scored on the same encoders' independent data (DCI,
BetaVAE, FactorVAE, Do & Tran's) to the independent setting, the one setting in which they are computed
(for the v1 and v2 protocols, which score them nowhere else). Each encoder joins the companion's run of
the weights it scored: where its job trained again since, the superseded run kept for that
(:func:`with_superseded`), else none;
``--plan`` keeps only the runs a plan trained (and yours, ``--add``); ``--add-with`` adds your results under
the companion protocol, joined to your row of the same model.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from factorbench.generators.errors import FactorbenchError, exits_2_on_user_error
from factorbench.generators.outputs import check_output_file, save_figure

__all__ = ["MIN_ENCODERS", "MetaEvaluation", "TARGETS", "TooFewEncodersError", "WHOLE_CODE_TARGET", "few_encoders_caveat",
           "format_meta_evaluation", "meta_evaluate", "meta_evaluate_protocol", "plot_meta_evaluation",
           "runs_of_plan", "joined_off_scale_encoders", "off_scale_note", "population_of", "protocol_order",
           "same_weights", "spearman", "with_companion", "with_superseded"]

#: the targets of Almudévar & Ortega's Figures 4 (downstream accuracy) and 5 (IRS), as scalar names
#: within a setting (``<label>.<scalar>``)
TARGETS = ("downstream.score", "irs.score")
#: a third target where a protocol scores it (the ``-dependent-v2`` protocols): the same downstream forests
#: on the whole code, so that a metric's correlation with the single-code readout can be told apart from
#: its correlation with what the code holds at all
WHOLE_CODE_TARGET = "downstream_full.score"


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation of ``x`` and ``y`` (ties get their average rank, Spearman 1904): the
    Pearson correlation of the ranks; NaN when either is constant (no ranking to compare)."""
    return float(_spearman_rows(np.asarray(x, dtype=float)[None], np.asarray(y, dtype=float)[None])[0])


def _spearman_rows(x: np.ndarray, y: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """:func:`spearman` of each row of ``x`` (B, n) with the same row of ``y``, over the entries where
    ``valid`` (B, n) holds (default all): the others are ranked after every valid one, so that the valid
    entries' ranks are their ranks among themselves, and left out of the correlation."""
    from scipy.stats import rankdata

    valid = np.ones(x.shape, dtype=bool) if valid is None else valid
    centre = (valid.sum(axis=1, keepdims=True) + 1) / 2  # the mean of ranks 1..n (ties keep the sum)
    rx = np.where(valid, rankdata(np.where(valid, x, np.inf), axis=1) - centre, 0.0)
    ry = np.where(valid, rankdata(np.where(valid, y, np.inf), axis=1) - centre, 0.0)
    denominator = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (rx * ry).sum(axis=1) / denominator
    return np.where(denominator > 0, np.clip(rho, -1.0, 1.0), np.nan)


#: a rank correlation across encoders needs at least this many of them (a population, a cell, a resample)
MIN_ENCODERS = 3


class TooFewEncodersError(FactorbenchError):
    """A meta-evaluation of fewer than :data:`MIN_ENCODERS` encoders."""


@dataclass(frozen=True)
class MetaEvaluation:
    """``rho[s, m, t]``: Spearman correlation across the ``encoders`` between metric ``metrics[m]`` and
    target ``targets[t]`` in setting ``settings[s]``; ``low``/``high``: the bootstrap percentile interval
    (``level``, ``n_boot`` resamples of the encoders with replacement, ``seed``); ``counts[s, m, t]``: how
    many encoders the cell's correlation is over (those with both values; fewer than ``encoders`` where an
    encoder lacks the metric, e.g. a companion protocol's score of other weights); ``samples[b, s, m, t]``:
    the cell's correlation in bootstrap resample ``b`` (NaN where the resample holds fewer than
    :data:`MIN_ENCODERS` of the cell's encoders or ranks none apart), the same resamples in every cell, so that
    a statement about several cells can be judged in each
    (:mod:`factorbench.benchmark.experiments.meta_evaluation_claims`)."""

    settings: tuple[str, ...]
    metrics: tuple[str, ...]
    targets: tuple[str, ...]
    encoders: tuple[str, ...]
    rho: np.ndarray
    low: np.ndarray
    high: np.ndarray
    level: float
    n_boot: int
    seed: int
    counts: np.ndarray
    samples: np.ndarray


def _settings_of(keys: Sequence[str], targets: Sequence[str]) -> list[str]:
    """The settings (key prefixes) in which every target is present, in first-seen order."""
    prefixes: list[str] = []
    for key in keys:
        for target in targets:
            if key.endswith("." + target):
                prefix = key[:-len(target) - 1]
                if prefix not in prefixes:
                    prefixes.append(prefix)
    return [p for p in prefixes if all(f"{p}.{t}" in keys for t in targets)]


def meta_evaluate(population: Mapping[str, Mapping[str, float]], targets: Sequence[str] = TARGETS,
                  metrics: Sequence[str] | None = None, settings: Sequence[str] | None = None,
                  n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> MetaEvaluation:
    """Spearman correlations between metrics and targets across encoders, per setting (see the module).

    ``population``: encoder name -> ``{"<setting>.<label>.<scalar>": value}``. ``metrics`` (scalar names
    within a setting, ``<label>.<scalar>``): default every one present in every setting of every encoder,
    the targets excluded. Encoders missing a value (or with a non-finite one) of a setting are left out of
    that setting's correlations. Needs at least :data:`MIN_ENCODERS` encoders."""
    if len(population) < MIN_ENCODERS:
        raise TooFewEncodersError(f"a rank correlation across encoders needs at least {MIN_ENCODERS} encoders, got "
                                  f"{len(population)}")
    if not 0 < level < 1:
        raise FactorbenchError(f"level must be in (0, 1), got {level}")
    if n_boot < 1:
        raise FactorbenchError(f"n_boot must be >= 1, got {n_boot}")
    names = tuple(population)
    keys = list(dict.fromkeys(k for row in population.values() for k in row))  # first-seen (protocol) order
    settings = tuple(settings) if settings is not None else tuple(_settings_of(keys, targets))
    if not settings:
        raise FactorbenchError(f"no setting holds every target ({', '.join(targets)}); the scores hold "
                               f"{', '.join(keys[:12])}{', ...' if len(keys) > 12 else ''}")
    if metrics is None:
        per_setting = [{k[len(s) + 1:] for k in keys if k.startswith(s + ".")} for s in settings]
        first = [k[len(settings[0]) + 1:] for k in keys if k.startswith(settings[0] + ".")]
        metrics = [m for m in first if all(m in here for here in per_setting) and m not in targets]
    metrics = tuple(metrics)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(names), size=(n_boot, len(names)))
    shape = (len(settings), len(metrics), len(targets))
    rho, low, high = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    counts = np.zeros(shape, dtype=int)
    samples = np.full((n_boot, *shape), np.nan)
    for s, setting in enumerate(settings):
        for t, target in enumerate(targets):
            y = np.array([population[e].get(f"{setting}.{target}", np.nan) for e in names], dtype=float)
            for m, metric in enumerate(metrics):
                x = np.array([population[e].get(f"{setting}.{metric}", np.nan) for e in names], dtype=float)
                ok = np.isfinite(x) & np.isfinite(y)
                counts[s, m, t] = int(ok.sum())
                if ok.sum() < MIN_ENCODERS:
                    continue
                rho[s, m, t] = spearman(x[ok], y[ok])
                # every resample at once, scored over its encoders with both values, if it has enough of them
                kept = ok[draws].sum(axis=1) >= MIN_ENCODERS
                samples[kept, s, m, t] = boots = _spearman_rows(x[draws[kept]], y[draws[kept]], ok[draws[kept]])
                boots = boots[np.isfinite(boots)]
                if len(boots):
                    low[s, m, t], high[s, m, t] = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return MetaEvaluation(settings, metrics, tuple(targets), names, rho, low, high, level, n_boot, seed, counts,
                          samples)


def protocol_order(protocol: Any, population: Mapping[str, Mapping[str, float]],
                   targets: Sequence[str] = TARGETS) -> tuple[list[str], list[str]]:
    """The settings and metrics of a dependent-factor protocol in its own order (its metric labels are
    ``<setting>.<metric>``): the independent setting first, the metrics as the protocol lists them."""
    labels = [m.label for m in protocol.metrics]  # "<setting>.<metric>"; a setting may hold dots (double-0.1)
    settings = list(dict.fromkeys(label.rsplit(".", 1)[0] for label in labels if "." in label))
    keys = {k for row in population.values() for k in row}
    first = [label.rsplit(".", 1)[1] for label in labels if "." in label and label.rsplit(".", 1)[0] == settings[0]] \
        if settings else []
    metrics = [f"{m}.{k.rsplit('.', 1)[1]}" for m in first for k in sorted(keys)
               if k.startswith(f"{settings[0]}.{m}.") and "." not in k[len(f"{settings[0]}.{m}."):]]
    return settings, [m for m in dict.fromkeys(metrics) if m not in targets]


#: the suffix of a scalar that is better when lower, negated by ``population_of(oriented=True)``
LOWER_IS_BETTER = " (negated: lower is better)"


def population_of(results: Mapping[str, Sequence[Any]], trained_only: bool = True,
                  oriented: bool = False) -> dict[str, dict[str, float]]:
    """One row of scalars per run: ``"<model>/seed<k>"`` (or ``"<model>/run<i>"``) -> ``run.scalars()``, from
    ``{model: [runs]}`` (:func:`factorbench.benchmark.results.reference_results`). ``trained_only`` leaves
    out the reference encoders ``ideal``, ``random`` and ``pca`` (kinds oracle and baseline); a result of the
    user's own encoder, without training provenance, stays (kind external). ``oriented``:
    a scalar the run marks better when lower (an error, JEMMIG) is negated and renamed ``KEY`` +
    :data:`LOWER_IS_BETTER`, so that a positive correlation always means the metric ranks as the target."""
    rows: dict[str, dict[str, float]] = {}
    for name, run in _encoders(results, trained_only):
        scalars = run.scalars()
        if oriented:
            directions = getattr(run, "directions", {}) or {}
            scalars = {(k + LOWER_IS_BETTER if directions.get(k) == "lower" else k):
                       (-v if directions.get(k) == "lower" else v) for k, v in scalars.items()}
        rows[name] = scalars
    return rows


def _encoders(results: Mapping[str, Sequence[Any]], trained_only: bool) -> list[tuple[str, Any]]:
    """(``"<model>/seed<k>"`` or ``"<model>/run<i>"``, run) of every run, less the reference encoders (``ideal``,
    ``random``, ``pca``: kinds oracle and baseline, :mod:`factorbench.benchmark.kinds`) when ``trained_only``; a
    result of the user's own encoder (kind external, no training provenance) is kept."""
    from factorbench.benchmark.kinds import row_kind

    out = []
    for model, runs in results.items():
        for i, run in enumerate(runs):
            training = run.training or {}
            if trained_only and row_kind(model, [run]) in ("oracle", "baseline"):
                continue
            seed = (training.get("sweep") or {}).get("seed")
            out.append((f"{model}/seed{seed}" if seed is not None else f"{model}/run{i}", run))
    return out


def off_scale_encoders(results: Mapping[str, Sequence[Any]], trained_only: bool = True) -> list[str]:
    """The encoders (named as :func:`population_of` names them) whose result carries Do & Tran's scale
    warning (:func:`factorbench.benchmark.results.incomparable_metrics`): their quantised metrics read a
    code off the scale of the fixed range, so correlations over them mix scales."""
    from factorbench.benchmark.results import incomparable_metrics

    return [name for name, run in _encoders(results, trained_only) if incomparable_metrics(run)]


def joined_off_scale_encoders(encoders: Collection[str], results: Mapping[str, Sequence[Any]],
                               companion: Mapping[str, Sequence[Any]], trained_only: bool = True) -> list[str]:
    """Those of a meta-evaluation's ``encoders`` whose own result or joined companion run (of the same
    weights: :func:`same_weights`) carries Do & Tran's scale warning (:func:`off_scale_encoders`)."""
    named = off_scale_encoders(results, trained_only) + off_scale_encoders(same_weights(companion, results),
                                                                           trained_only)
    return [name for name in dict.fromkeys(named) if name in encoders]


def off_scale_note(warned: Sequence[str], total: int, where: str, *, code: Callable[[str], str] = str,
                   text: Callable[[str], str] = str) -> str:
    """The sentence under a meta-evaluation that names the encoders of :func:`joined_off_scale_encoders`
    (``warned``, of ``total``) and says what their codes do to the ``do_tran`` rows, with ``where`` the
    reference to METRICS.md's "The range's scale", ``code`` formatting a name and ``text`` escaping the
    prose, as the medium (Markdown, HTML, a terminal) needs."""
    hold = "holds a code" if len(warned) == 1 else "hold codes"
    return (text(f"{len(warned)} of the {total} encoders (") + ", ".join(code(name) for name in warned)
            + text(f") {hold} off the scale of Do & Tran's fixed quantisation range [-4, 4] in some setting: the ")
            + code("do_tran")
            + text(" rows' correlations mix scales (") + where + text(", \"The range's scale\")."))


def with_companion(population: Mapping[str, Mapping[str, float]], companion: Mapping[str, Mapping[str, float]],
                   setting: str, targets: Sequence[str] = TARGETS) -> tuple[dict[str, dict[str, float]], list[str]]:
    """``population`` with each encoder's scalars under a companion protocol (``companion``, rows as
    :func:`population_of` gives them, matched by name) added as metrics of ``setting``, where its own row
    lacks them; and the names of the metrics added, in the companion's order. The targets are never taken
    from the companion (each protocol computes its own). Encoders without a companion row keep theirs."""
    added: list[str] = []
    out = {name: dict(row) for name, row in population.items()}
    for name, row in out.items():
        for key, value in companion.get(name, {}).items():
            if key in targets or f"{setting}.{key}" in population[name]:
                continue
            row[f"{setting}.{key}"] = value
            if key not in added:
                added.append(key)
    return out, added


def _weights_of(run: Any) -> Any:
    """The ``training.weights_sha256`` a result scored (None where it records none)."""
    return (run.training or {}).get("weights_sha256")


def same_weights(companion: Mapping[str, Sequence[Any]], results: Mapping[str, Sequence[Any]]
                 ) -> dict[str, list[Any]]:
    """``companion``'s runs (``{model: [runs]}``) less those that scored other weights than the run of the same
    model and seed in ``results`` (both recording ``training.weights_sha256``), so that one encoder's row
    never joins the scores of two trainings (e.g. a job trained again on another device)."""
    from factorbench.benchmark.results import _sweep_seed

    scored = {(model, _sweep_seed(r)): _weights_of(r) for model, runs in results.items() for r in runs}

    def other_weights(model: str, run: Any) -> bool:
        mine, theirs = _weights_of(run), scored.get((model, _sweep_seed(run)))
        return bool(mine and theirs and mine != theirs)

    kept = {model: [r for r in runs if not other_weights(model, r)] for model, runs in companion.items()}
    return {model: runs for model, runs in kept.items() if runs}


def with_superseded(companion: Mapping[str, Sequence[Any]], superseded: Mapping[str, Sequence[Any]],
                    results: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
    """``companion`` (``{model: [runs]}``) with each run that scored other weights than ``results``' run of the
    same model and seed replaced by the ``superseded`` run of the companion protocol that scored the same
    weights, where one was kept (:func:`factorbench.benchmark.results.superseded_results`). A retired
    protocol's record then keeps its companion cells after its jobs trained again; runs without such a
    superseded run stay as they are (:func:`same_weights` then leaves them out)."""
    from factorbench.benchmark.results import _sweep_seed

    scored = {(model, _sweep_seed(r)): _weights_of(r) for model, runs in results.items() for r in runs}
    earlier = {(model, _sweep_seed(r), _weights_of(r)): r for model, runs in superseded.items() for r in runs}

    def matching(model: str, run: Any) -> Any:
        wanted = scored.get((model, _sweep_seed(run)))
        if not wanted or wanted == _weights_of(run):
            return run
        return earlier.get((model, _sweep_seed(run), wanted), run)

    return {model: [matching(model, r) for r in runs] for model, runs in companion.items()}


def runs_of_plan(results: Mapping[str, Sequence[Any]], *plans: str, keep: Collection[str] = ()) -> dict[str, list[Any]]:
    """``{model: [runs]}`` with only the runs a sweep of one of ``plans`` trained, in their order (models
    left without runs dropped), and every run of the models in ``keep`` (the user's added results)."""
    from factorbench.benchmark.results import _sweep_plan

    kept = {model: [r for r in runs if model in keep or _sweep_plan(r) in plans] for model, runs in results.items()}
    return {model: runs for model, runs in kept.items() if runs}


def plans_of(results: Mapping[str, Sequence[Any]]) -> set[str]:
    """The names of the plans whose sweeps trained runs of ``results``."""
    from factorbench.benchmark.results import _sweep_plan

    return {plan for runs in results.values() for r in runs if isinstance(plan := _sweep_plan(r), str)}


def check_plan_names(results: Mapping[str, Sequence[Any]], plans: Sequence[str], option: str = "--plan") -> None:
    """Refuse a plan name that no run of ``results`` was trained by and that factorbench does not ship
    (a mistyped name, which would otherwise select nothing and read as "not collected yet")."""
    from factorbench.baselines.plan import PLANS_DIR

    present, shipped = plans_of(results), {path.stem for path in PLANS_DIR.glob("*.toml")}
    for plan in plans:
        if plan not in present and plan not in shipped:
            raise FactorbenchError(f"{option} {plan!r}: no run here was trained by a plan of that name, nor does "
                                   f"factorbench ship one; the runs here come from "
                                   f"{', '.join(sorted(present)) or 'no plan'} (shipped plans: "
                                   f"{', '.join(sorted(shipped))})")


#: below this many encoders a table says how often a perfect rank agreement arises by chance
FEW_ENCODERS = 10


def few_encoders_caveat(n: int, digits: int) -> str:
    """What a correlation across ``n`` encoders cannot show: rho = 1 is one of the n! orderings (rho = -1
    another), so it arises by chance with probability 1/n!; the bootstrap resamples only these n encoders,
    so its interval cannot widen beyond what they show."""
    return (f"With {n} encoders, a correlation of exactly 1 (or -1) arises by chance with probability "
            f"1/{math.factorial(n)} in each cell, and the bootstrap resamples these same {n}: an interval "
            f"[{1:.{digits}f}, {1:.{digits}f}] says that they agree, not that the agreement is certain.")


def format_meta_evaluation(result: MetaEvaluation, digits: int = 2) -> str:
    """One Markdown table per target: a row per metric, a column per setting, each cell
    ``rho [low, high]``, and ``(n = k)`` where fewer than all the encoders have both values; under
    :data:`FEW_ENCODERS` encoders, a line on what chance alone gives."""
    out = []
    every = len(result.encoders)
    for t, target in enumerate(result.targets):
        fewer = bool(((result.counts[:, :, t] < every) & ~np.isnan(result.rho[:, :, t])).any())
        out.append(f"Spearman correlation with `{target}` across {every} encoders"
                   + (" (fewer where a cell gives its n)" if fewer else "")
                   + f" ({round(100 * result.level)} % bootstrap interval, {result.n_boot} resamples)")
        if every < FEW_ENCODERS:
            out.append("")
            out.append(few_encoders_caveat(every, digits))
        out.append("")
        out.append("| metric | " + " | ".join(result.settings) + " |")
        out.append("|---|" + "---|" * len(result.settings))
        for m, metric in enumerate(result.metrics):
            cells = []
            for s in range(len(result.settings)):
                r, lo, hi = result.rho[s, m, t], result.low[s, m, t], result.high[s, m, t]
                n = int(result.counts[s, m, t])
                cells.append("n/a" if math.isnan(r) else f"{r:.{digits}f}" + (
                    "" if math.isnan(lo) else f" [{lo:.{digits}f}, {hi:.{digits}f}]")
                    + ("" if n == every else f" (n = {n})"))
            out.append(f"| {metric} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _plot_heading(result: MetaEvaluation) -> str:
    """The heat maps' title: how many encoders, and under :data:`FEW_ENCODERS` what chance alone gives (the
    tables' caveat, shortened)."""
    n = len(result.encoders)
    heading = f"Spearman rho across {n} encoders"
    if n < FEW_ENCODERS:
        heading += f"; with {n}, rho = 1 (or -1) arises by chance with probability 1/{math.factorial(n)} per cell"
    return heading


def plot_meta_evaluation(result: MetaEvaluation, path: str | Path) -> Path:
    """Heat maps (one per target) of rho, metrics x settings, as Almudévar & Ortega's Figures 4 and 5, under
    :func:`_plot_heading`."""
    from ..plots import pyplot

    plt = pyplot()

    fig, axes = plt.subplots(1, len(result.targets), figsize=(1.6 + 1.1 * len(result.settings) * len(result.targets),
                                                              0.8 + 0.4 * len(result.metrics)), squeeze=False)
    # grey where a metric is not scored in a setting: not to be read as rho = 0
    cmap = plt.colormaps["RdBu_r"].with_extremes(bad="#d9d9d9")
    for t, ax in enumerate(axes[0]):
        image = ax.imshow(np.ma.masked_invalid(result.rho[:, :, t].T), vmin=-1, vmax=1, cmap=cmap, aspect="auto")
        ax.set_xticks(range(len(result.settings)), result.settings, rotation=45, ha="right")
        ax.set_yticks(range(len(result.metrics)), result.metrics if t == 0 else [""] * len(result.metrics))
        ax.set_title(f"rho with {result.targets[t]}")
        for s in range(len(result.settings)):
            for m in range(len(result.metrics)):
                rho = result.rho[s, m, t]
                if not math.isnan(rho):  # white on the dark ends of the scale, black elsewhere
                    ax.text(s, m, f"{rho:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if abs(rho) > 0.6 else "black")
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8)
    fig.suptitle(_plot_heading(result), fontsize=9)
    return save_figure(fig, path, dpi=120, bbox_inches="tight")


def meta_evaluate_protocol(protocol: str, results: Mapping[str, Sequence[Any]],
                           companion: Mapping[str, Sequence[Any]] | None = None, trained_only: bool = True,
                           n_boot: int = 1000, seed: int = 0) -> MetaEvaluation:
    """:func:`meta_evaluate` of a dependent-factor protocol's results (``{model: [runs]}``), in the
    protocol's order of settings and metrics, against :data:`TARGETS` (and :data:`WHOLE_CODE_TARGET` where the
    protocol scores it), with the companion protocol's metrics (``companion``, :func:`with_companion`) added
    to its first (independent) setting. Both are oriented: a metric better when lower is negated."""
    from factorbench.benchmark.protocols import get_protocol

    population = population_of(results, trained_only=trained_only, oriented=True)
    spec = get_protocol(protocol)
    whole_code = any(m.label.endswith("." + WHOLE_CODE_TARGET.split(".")[0]) for m in spec.metrics)
    targets = TARGETS + ((WHOLE_CODE_TARGET,) if whole_code else ())
    settings, metrics = protocol_order(spec, population, targets)
    if companion:
        population, added = with_companion(population, population_of(same_weights(companion, results),
                                                                      trained_only=trained_only, oriented=True),
                                           settings[0])
        metrics = metrics + [m for m in added if m not in metrics]
    return meta_evaluate(population, targets, metrics=metrics, settings=settings, n_boot=n_boot, seed=seed)


@exits_2_on_user_error
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocol", help="a dependent-factor protocol, e.g. square-dependent-v1")
    parser.add_argument("--dir", default=None, help="a folder of <model>.json results (default: the shipped rows)")
    parser.add_argument("--add", action="append", default=[], metavar="JSON", help="more results (repeatable)")
    parser.add_argument("--with-reference-encoders", action="store_true",
                        help="also count ideal, random and pca (left out by default: they are not trained encoders)")
    parser.add_argument("--with", dest="companion", default=None, metavar="PROTOCOL",
                        help="also the metrics of this protocol (scored on the same encoders' independent data, e.g. "
                             "dsprites-dci-v1), in the independent setting")
    parser.add_argument("--add-with", action="append", default=[], metavar="JSON",
                        help="your results under the --with protocol (repeatable), joined to your --add results of the "
                             "same model")
    parser.add_argument("--plan", default=None, help="only the runs this plan trained, e.g. almudevar-ortega-v1")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", metavar="PNG", default=None, help="also write the heat maps")
    parser.add_argument("--force", action="store_true", help="replace --plot if it exists")
    args = parser.parse_args(argv)
    if args.add_with and not args.companion:
        parser.error("--add-with adds results under the --with protocol: give --with PROTOCOL too")
    if args.plot:  # before any work: a heat map that cannot be written fails now, not after the bootstrap
        check_output_file(args.plot, args.force, option="--plot")
    from factorbench.benchmark.results import added_models, reference_results, superseded_results

    results = reference_results(args.protocol, args.dir, add=args.add)
    companion = reference_results(args.companion, add=args.add_with) if args.companion else {}
    if args.plan:  # the plan's encoders, and yours beside them
        check_plan_names(results, [args.plan])
        yours = added_models(args.add)
        results, companion = (runs_of_plan(results, args.plan, keep=yours),
                              runs_of_plan(companion, args.plan, keep=added_models(args.add_with)))
    if args.companion:  # the companion's scores of the weights the results scored, where they were trained again
        companion = with_superseded(companion, superseded_results(args.companion), results)
    trained_only = not args.with_reference_encoders
    try:
        result = meta_evaluate_protocol(args.protocol, results, companion, trained_only=trained_only,
                                        n_boot=args.n_boot, seed=args.seed)
    except TooFewEncodersError as exc:
        whose = f" of plan {args.plan}" if args.plan else ""
        raise TooFewEncodersError(f"{args.protocol}: {exc} (the results{whose} collected so far); add your encoders' "
                                  "results with --add JSON, or train more of a plan's (factorbench sweep PLAN, then "
                                  "--collect)") from None
    print(f"{args.protocol}: {len(result.encoders)} encoders ({len(results)} models)\n")
    print(format_meta_evaluation(result))
    warned = joined_off_scale_encoders(result.encoders, results, companion, trained_only)
    if warned:
        print(off_scale_note(warned, len(result.encoders), "benchmark/METRICS.md"))
    from factorbench.benchmark.experiments.meta_evaluation_claims import check_meta_claims, format_meta_claims

    print("\n" + format_meta_claims(check_meta_claims(result), len(result.encoders)))
    if args.plot:
        print(f"wrote {plot_meta_evaluation(result, args.plot)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
