"""Do & Tran 2020 ("Theory and evaluation metrics for learning disentangled representations", ICLR, section
4 on dSprites, their Figures 5-8): FactorVAE against beta-VAE over their hyperparameter ranges, judged by
JEMMIG and RMIG beside DCI's disentanglement, completeness and informativeness (Eastwood & Williams) and
modularity (Ridgeway & Mozer); the table adds their WSEPIN and MISJED (section 3.2, independence of the code
pairs; the paper shows it on dSprites as heat maps, Figure 15, and makes no claim of it there).

The runs are those of the plan ``do-tran-v1`` (entries ``factor-vae.gamma-10`` ... ``beta-vae.beta-50``,
``aae.gz-10`` ... ``aae.gz-50``, four seeds each) scored under ``dsprites-dci-v1``. :func:`settings_of`
groups them into one :class:`Setting` per entry (its per-seed scalars); :func:`check_claims` checks the
paper's claims on the settings, each with the numbers behind its verdict; :func:`format_report` writes the
table of their Figure 7 (mean and standard error over the runs of each setting) and the claims;
:func:`plot_figures` draws the counterparts of Figures 5-8. Every check runs on whatever subset of the plan
is collected, and says "too few runs" where the subset cannot decide it; :func:`verdict_stability` says how
firmly the runs hold each verdict (the share of bootstrap draws of every setting's runs that keep it,
``--resamples N`` draws in the report, 0 for none).

    python -m factorbench.benchmark.experiments.do_tran_comparison
    python -m factorbench.benchmark.experiments.do_tran_comparison --add mine.json --plot figures/
    python -m factorbench.benchmark.experiments.do_tran_comparison --dir results/dsprites-dci-v1
    python -m factorbench.benchmark.experiments.do_tran_comparison --pending

``--pending`` adds the finished seeds of entries not yet complete, which ``factorbench sweep do-tran-v1
--collect --pending baselines/pending/do-tran-v1`` keeps outside every table (:func:`pending_dir`); the
report marks their settings as pending, and a claim's verdict resting on any of them as provisional (their
other seeds can change it).

Thresholds (this module's reading of the paper's words; the paper prints no numbers for them):

- "clearly outperform" (Fig. 5a/5b): the worst FactorVAE setting's mean is better than the best beta-VAE
  setting's mean, by JEMMIG and by RMIG.
- JEMMIG and RMIG agree (Fig. 5c): Spearman's rho across runs <= -0.7 (:data:`RHO_AGREE`; negative because
  JEMMIG is better when lower, RMIG when higher).
- "much better ... in separating FactorVAE and beta-VAE models" (Fig. 6): the AUC (the probability that a
  random FactorVAE run scores better than a random beta-VAE run, ties counting one half) of JEMMIG and of
  RMIG is >= 0.9 (:data:`AUC_SEPARATES`), and that of DCI disentanglement and of completeness is below
  0.75 (:data:`AUC_DOES_NOT_SEPARATE`). The AUC is directional: a metric that ranks beta-VAE runs above
  FactorVAE runs (AUC near 0) does not separate them the way JEMMIG and RMIG do.
- "only informativeness seems to be correlated with JEMMIG ... disentanglement and completeness are
  strongly uncorrelated" (Fig. 6): |rho(JEMMIG, DCI informativeness error)| >= 0.5 and |rho(JEMMIG, D)|,
  |rho(JEMMIG, C)| < 0.5 across runs (:data:`RHO_CORRELATED`).
- "blindly favor beta-VAE models with high beta" (Fig. 7a/7b): Spearman's rho between beta and the
  beta-VAE settings' means of D and of C >= 0.5 (:data:`RHO_BETA`), and every setting with beta >= 20
  (:data:`HIGH_BETA`) has a worse mean DCI informativeness error than the mean of the FactorVAE settings'
  means (Fig. 7c).

A claim on setting means counts only the settings with at least :data:`MIN_RUNS` runs (the paper's
means are over 4), and every claim needs at least :data:`MIN_SETTINGS` settings of each family (3 beta-VAE
settings for a rank correlation with beta).
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from factorbench.benchmark.experiments.metric_meta_evaluation import check_plan_names, runs_of_plan, spearman
from factorbench.generators.errors import FactorbenchError, exits_2_on_user_error
from factorbench.generators.outputs import check_input_dir, check_new_files, check_output_dir, save_figure

__all__ = ["AUC_DOES_NOT_SEPARATE", "AUC_SEPARATES", "Claim", "FIGURES", "HIGH_BETA", "MIN_RUNS", "MIN_SETTINGS", "PLAN",
           "PROTOCOL", "RHO_AGREE", "RHO_BETA", "RHO_CORRELATED", "Setting", "check_claims", "format_report",
           "main", "mean_and_stderr", "missing_entries", "parse_entry", "pending_dir", "pending_results", "plot_figures",
           "results_with_pending", "resample_runs", "scalar_direction", "separation_auc", "settings_of", "verdict_stability",
           "verdict_text"]

PLAN = "do-tran-v1"
PROTOCOL = "dsprites-dci-v1"
FACTOR_VAE, BETA_VAE, AAE = "factor-vae", "beta-vae", "aae"

JEMMIG, RMIG = "do_tran.jemmig", "do_tran.rmig"
DISENTANGLEMENT, COMPLETENESS, INFORMATIVENESS = "dci.disentanglement", "dci.completeness", "dci.informativeness"
MODULARITY, WSEPIN, MISJED = "modularity.score", "wsepin.wsepin", "do_tran.misjed"
#: the columns of :func:`format_report`, with their labels
TABLE = {JEMMIG: "JEMMIG", RMIG: "RMIG", DISENTANGLEMENT: "DCI D", COMPLETENESS: "DCI C",
         INFORMATIVENESS: "DCI I (error)", MODULARITY: "modularity", WSEPIN: "WSEPIN (nats)", MISJED: "MISJED"}
#: directions used where no run carries one (``dsprites-dci-v1`` records them with every run)
DIRECTIONS = {JEMMIG: "lower", RMIG: "higher", DISENTANGLEMENT: "higher", COMPLETENESS: "higher",
              INFORMATIVENESS: "lower", MODULARITY: "higher", WSEPIN: "higher", MISJED: "lower"}

RHO_AGREE = -0.7
AUC_SEPARATES = 0.9
AUC_DOES_NOT_SEPARATE = 0.75
RHO_CORRELATED = 0.5
RHO_BETA = 0.5
HIGH_BETA = 20.0
MIN_RUNS = 2
MIN_SETTINGS = 2
#: bootstrap draws of :func:`verdict_stability` in the report
STABILITY_RESAMPLES = 1000

REPRODUCED, NOT_REPRODUCED, TOO_FEW = "reproduced", "not reproduced", "too few runs"
#: the family of a setting of the user's own encoder (an added result without training provenance): shown
#: beside the plan's settings, in no claim
YOURS = "yours"
_FAMILY_ORDER = (FACTOR_VAE, BETA_VAE, AAE)
_NEED = {FACTOR_VAE: MIN_SETTINGS, BETA_VAE: MIN_SETTINGS}  # settings of each family every claim needs
_FAMILY_NAMES = {FACTOR_VAE: "FactorVAE", BETA_VAE: "beta-VAE", AAE: "AAE", YOURS: "yours"}
_ENTRY = re.compile(r"(?P<family>[A-Za-z0-9][A-Za-z0-9_-]*)\.(?P<hyper>[A-Za-z_][A-Za-z0-9_]*)"
                    r"-(?P<value>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)")


def parse_entry(name: str) -> tuple[str, str, float]:
    """``(family, hyperparameter, value)`` of a plan entry named ``<family>.<hyper>-<value>``
    (``factor-vae.gamma-10`` -> ``("factor-vae", "gamma", 10.0)``)."""
    match = _ENTRY.fullmatch(name)
    if match is None:
        raise FactorbenchError(f"entry {name!r} is not named <family>.<hyperparameter>-<value> (e.g. "
                               "factor-vae.gamma-10), so its setting cannot be read from its name")
    return match["family"], match["hyper"], float(match["value"])


def pending_dir(plan: str = PLAN, protocol: str = PROTOCOL) -> Path:
    """``baselines/pending/<plan>/<protocol>``: where this checkout keeps the finished seeds of the plan's
    entries that are not yet complete (``factorbench sweep PLAN --collect --pending baselines/pending/PLAN``),
    outside every table until an entry's last seed is in."""
    import factorbench.baselines

    return Path(factorbench.baselines.__file__).with_name("pending") / plan / protocol


def pending_results(plan: str = PLAN, protocol: str = PROTOCOL, folder: str | os.PathLike | None = None
                    ) -> dict[str, list[Any]]:
    """``{model: [runs]}`` of the pending seeds in ``folder`` (default :func:`pending_dir`), each file
    validated as a reference file; none where the folder does not exist (no seed of the plan is pending)."""
    from factorbench.benchmark.results import reference_results

    folder = pending_dir(plan, protocol) if folder is None else Path(folder)
    return reference_results(protocol, folder) if folder.is_dir() else {}


def missing_entries(settings: Sequence["Setting"], plan: str = PLAN) -> list[str]:
    """The entries of the shipped ``plan`` without a setting among ``settings`` (none of their seeds is in
    the results given), in the plan's order; none for a plan that is not shipped."""
    from factorbench.baselines.plan import _raw_plan

    shown = {s.model for s in settings}
    return [m["name"] for m in (_raw_plan(plan) or {}).get("models", []) if m.get("name") not in shown]


def results_with_pending(results: Mapping[str, Sequence[Any]], pending: Mapping[str, Sequence[Any]]
                         ) -> dict[str, list[Any]]:
    """``{model: [runs]}`` of both: the complete entries ``results`` and the ``pending`` seeds of entries not
    yet complete. An entry in both is an error: ``--collect --pending`` removes a pending file once its entry
    is complete, so a model in both means one of the two folders is stale."""
    both = sorted(set(results) & set(pending))
    if both:
        raise FactorbenchError(f"{', '.join(both)}: in the results and among the pending seeds; an entry collected "
                               "complete has no pending file (collect again with --collect --pending, which "
                               "removes it)")
    return {**{m: list(r) for m, r in results.items()}, **{m: list(r) for m, r in pending.items()}}


def mean_and_stderr(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error (sample standard deviation / sqrt(n)) of the finite ``values``, as Do &
    Tran's Figures 2 and 7 report "the mean and the standard error of 4 different runs"; NaN where
    undefined (no finite value; the error of a single one)."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return math.nan, math.nan
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else math.nan


@dataclass(frozen=True)
class Setting:
    """The runs of one plan entry: ``values[scalar]`` holds one value per run, in seed order (NaN where a
    run lacks the scalar); ``directions[scalar]`` is "higher" or "lower" (better), as the runs record it."""

    family: str
    hyper_name: str
    hyper_value: float
    model: str
    values: Mapping[str, tuple[float, ...]]
    seeds: tuple[int | None, ...] = ()
    directions: Mapping[str, str] = field(default_factory=dict)

    @property
    def runs(self) -> int:
        """How many runs the setting holds."""
        return len(self.seeds) if self.seeds else max((len(v) for v in self.values.values()), default=0)

    @property
    def label(self) -> str:
        """``factor-vae gamma=10``; ``my-encoder (yours)`` for the user's encoder."""
        return f"{self.family} {self.hyper_name}={self.hyper_value:g}" if self.hyper_name else f"{self.model} ({self.family})"

    @property
    def hyper_label(self) -> str:
        """``gamma = 10``; the model's name for the user's encoder, which has no hyperparameter."""
        return f"{self.hyper_name} = {self.hyper_value:g}" if self.hyper_name else self.model

    def finite(self, scalar: str) -> np.ndarray:
        """The finite values of ``scalar`` over the runs."""
        x = np.asarray(self.values.get(scalar, ()), dtype=float)
        return x[np.isfinite(x)]

    def mean(self, scalar: str) -> float:
        """The mean of ``scalar`` over the runs (:func:`mean_and_stderr`)."""
        return mean_and_stderr(self.values.get(scalar, ()))[0]

    def stderr(self, scalar: str) -> float:
        """The standard error of ``scalar``'s mean over the runs (:func:`mean_and_stderr`)."""
        return mean_and_stderr(self.values.get(scalar, ()))[1]


@dataclass(frozen=True)
class Claim:
    """One of the paper's claims: ``verdict`` is "reproduced", "not reproduced" or "too few runs";
    ``evidence`` says why, with the numbers, which ``numbers`` also holds by name; ``models``: the
    settings (plan entries) whose runs the verdict rests on."""

    key: str
    figure: str
    statement: str
    evidence: str
    verdict: str
    numbers: Mapping[str, float] = field(default_factory=dict)
    models: tuple[str, ...] = ()

    def pending_of(self, pending: Collection[str]) -> list[str]:
        """The settings of :attr:`models` that are in ``pending`` (entries not yet complete): a verdict
        resting on any is provisional, as their other seeds can change it; none for "too few runs"."""
        return [] if self.verdict == TOO_FEW else [m for m in self.models if m in pending]


def _sort_key(setting: Setting) -> tuple:
    family = setting.family
    rank = (_FAMILY_ORDER.index(family) if family in _FAMILY_ORDER else
            len(_FAMILY_ORDER) + (family == YOURS))
    return rank, family, setting.hyper_name, setting.hyper_value if setting.hyper_name else 0.0, setting.model


def settings_of(results: Mapping[str, Sequence[Any]], plan: str = PLAN, yours: Collection[str] = ()) -> list[Setting]:
    """One :class:`Setting` per model of ``results`` (``{model: [runs]}``, as
    :func:`factorbench.benchmark.results.reference_results` gives them) with runs that ``plan`` trained,
    and one per model of ``yours`` (the user's added results: family :data:`YOURS`, in no claim), the other
    runs left out; FactorVAE first, then beta-VAE, the AAE and any other family, each by its
    hyperparameter, then yours."""
    out = []
    for model, runs in runs_of_plan(results, plan, keep=yours).items():
        kept = list(enumerate(runs))
        family, hyper, value = (YOURS, "", math.nan) if model in yours else parse_entry(model)
        seeds = [((r.training or {}).get("sweep") or {}).get("seed") for _, r in kept]
        order = sorted(range(len(kept)), key=lambda j: (seeds[j] is None, seeds[j] or 0, kept[j][0]))
        rows = [kept[j][1].scalars() for j in order]
        scalars = list(dict.fromkeys(k for row in rows for k in row))
        directions: dict[str, str] = {}
        for _, run in kept:
            for key, direction in (getattr(run, "directions", None) or {}).items():
                directions.setdefault(key, direction)
        out.append(Setting(family, hyper, value, model,
                           {k: tuple(float(row.get(k, math.nan)) for row in rows) for k in scalars},
                           tuple(seeds[j] for j in order), directions))
    return sorted(out, key=_sort_key)


def separation_auc(first: Sequence[float], second: Sequence[float], direction: str = "higher") -> float:
    """The probability that a random value of ``first`` is better (in ``direction``) than a random value of
    ``second``, ties counting one half: the Mann-Whitney U statistic over ``len(first) * len(second)``.
    1 when every ``first`` beats every ``second``, 0.5 when the two cannot be told apart; NaN when
    either has no finite value."""
    if direction not in ("higher", "lower"):
        raise FactorbenchError(f"direction must be 'higher' or 'lower', got {direction!r}")
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) == 0 or len(b) == 0:
        return math.nan
    diff = a[:, None] - b[None, :]
    if direction == "lower":
        diff = -diff
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)


# --- the claims ----------------------------------------------------------------------------------------

def scalar_direction(settings: Sequence[Setting], scalar: str) -> str:
    """"higher" or "lower" (better) for ``scalar``, as the first setting that records it says, else
    :data:`DIRECTIONS` (else "higher")."""
    for s in settings:
        if scalar in s.directions:
            return s.directions[scalar]
    return DIRECTIONS.get(scalar, "higher")


def _goodness(value: float, direction: str) -> float:
    return value if direction == "higher" else -value


def _of(settings: Sequence[Setting], family: str) -> list[Setting]:
    return [s for s in settings if s.family == family]


def _with_means(settings: Sequence[Setting], family: str, scalar: str) -> list[tuple[Setting, float]]:
    """The settings of ``family`` with at least :data:`MIN_RUNS` finite values of ``scalar``, with their mean."""
    return [(s, float(s.finite(scalar).mean())) for s in _of(settings, family) if len(s.finite(scalar)) >= MIN_RUNS]


def _beta_one(settings: Sequence[Setting], scalar: str) -> Setting | None:
    """The beta-VAE setting with beta = 1 (the standard VAE) if it has :data:`MIN_RUNS` values of ``scalar``."""
    for s in _of(settings, BETA_VAE):
        if s.hyper_value == 1.0 and len(s.finite(scalar)) >= MIN_RUNS:
            return s
    return None


def _runs(settings: Sequence[Setting], family: str, *scalars: str) -> tuple[np.ndarray, list[Setting]]:
    """The runs of ``family`` with a finite value of every scalar, ``(runs, len(scalars))``, and the
    settings they come from."""
    rows, used = [], []
    for s in _of(settings, family):
        table = np.full((len(scalars), s.runs), math.nan)
        for row, scalar in enumerate(scalars):
            values = np.asarray(s.values.get(scalar, ()), dtype=float)[:s.runs]
            table[row, :len(values)] = values
        ok = table[:, np.isfinite(table).all(axis=0)].T
        if len(ok):
            rows.append(ok)
            used.append(s)
    return (np.concatenate(rows) if rows else np.empty((0, len(scalars)))), used


def _few_settings(counts: Mapping[str, int], need: Mapping[str, int], what: str) -> str | None:
    """The evidence of a "too few runs" verdict, or None when every family has enough settings."""
    if all(counts[f] >= need[f] for f in need):
        return None
    have = ", ".join(f"{_FAMILY_NAMES[f]} {counts[f]}" for f in need)
    wanted = " and ".join(f"{need[f]} {_FAMILY_NAMES[f]}" for f in need)
    return f"needs {wanted} settings {what}; the runs give {have}."


def _models(*groups: Sequence[Setting | tuple[Setting, float]]) -> tuple[str, ...]:
    """The models of the settings in ``groups`` (settings or ``(setting, mean)`` pairs), each once, in order."""
    seen = (item[0] if isinstance(item, tuple) else item for group in groups for item in group)
    return tuple(dict.fromkeys(s.model for s in seen))


def _f(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


def _factorvae_beats_betavae(settings: Sequence[Setting]) -> Claim:
    key, figure = "factorvae-beats-betavae", "5a, 5b"
    statement = ("By JEMMIG and by RMIG, the worst FactorVAE setting is better than the best beta-VAE setting "
                 "(\"the worst FactorVAE models clearly outperform the best beta-VAE models\").")
    parts, numbers, holds, used = [], {}, True, []
    for scalar, name in ((JEMMIG, "JEMMIG"), (RMIG, "RMIG")):
        direction = scalar_direction(settings, scalar)
        fv, bv = _with_means(settings, FACTOR_VAE, scalar), _with_means(settings, BETA_VAE, scalar)
        few = _few_settings({FACTOR_VAE: len(fv), BETA_VAE: len(bv)}, _NEED,
                            f"with {MIN_RUNS} runs of {name}")
        if few:
            return Claim(key, figure, statement, few, TOO_FEW)
        used += [fv, bv]
        worst = min(fv, key=lambda sm: _goodness(sm[1], direction))
        best = max(bv, key=lambda sm: _goodness(sm[1], direction))
        ok = _goodness(worst[1], direction) > _goodness(best[1], direction)
        holds &= ok
        numbers[f"{name} worst factor-vae"], numbers[f"{name} best beta-vae"] = worst[1], best[1]
        parts.append(f"{name} ({direction} is better): the worst FactorVAE setting ({worst[0].label}) {_f(worst[1])} "
                     f"{'beats' if ok else 'does not beat'} the best beta-VAE setting ({best[0].label}) {_f(best[1])}")
    return Claim(key, figure, statement, "; ".join(parts) + ".", REPRODUCED if holds else NOT_REPRODUCED, numbers,
                 _models(*used))


def _jemmig_rmig_agree(settings: Sequence[Setting]) -> Claim:
    key, figure = "jemmig-rmig-agree", "5c"
    statement = (f"Across the FactorVAE and beta-VAE runs, JEMMIG and RMIG rank alike: Spearman's rho <= "
                 f"{RHO_AGREE} (negative since JEMMIG is better when lower).")
    fv, fv_from = _runs(settings, FACTOR_VAE, JEMMIG, RMIG)
    bv, bv_from = _runs(settings, BETA_VAE, JEMMIG, RMIG)
    few = _few_settings({FACTOR_VAE: len(fv_from), BETA_VAE: len(bv_from)}, _NEED,
                        "with runs of JEMMIG and RMIG")
    if few:
        return Claim(key, figure, statement, few, TOO_FEW)
    both = np.concatenate([fv, bv])
    rho = spearman(both[:, 0], both[:, 1])
    # agreement has the sign of the product of the directions: negative for lower-better JEMMIG
    sign = 1.0 if scalar_direction(settings, JEMMIG) == scalar_direction(settings, RMIG) else -1.0
    ok = not math.isnan(rho) and sign * rho >= -RHO_AGREE
    return Claim(key, figure, statement,
                 f"rho(JEMMIG, RMIG) = {_f(rho)} over {len(both)} runs ({len(fv)} FactorVAE, {len(bv)} beta-VAE).",
                 REPRODUCED if ok else NOT_REPRODUCED, {"rho": rho, "runs": float(len(both))}, _models(fv_from, bv_from))


def _dc_do_not_separate(settings: Sequence[Setting]) -> Claim:
    key, figure = "dc-do-not-separate", "6"
    statement = (f"JEMMIG and RMIG separate FactorVAE from beta-VAE runs (AUC >= {AUC_SEPARATES}), DCI "
                 f"disentanglement and completeness do not (AUC < {AUC_DOES_NOT_SEPARATE}); AUC: the probability "
                 "that a FactorVAE run scores better than a beta-VAE run.")
    numbers, parts, used = {}, [], []
    for scalar, name in ((JEMMIG, "JEMMIG"), (RMIG, "RMIG"), (DISENTANGLEMENT, "D"), (COMPLETENESS, "C"),
                         (INFORMATIVENESS, "I")):
        fv, fv_from = _runs(settings, FACTOR_VAE, scalar)
        bv, bv_from = _runs(settings, BETA_VAE, scalar)
        if scalar != INFORMATIVENESS:  # I is shown, not judged
            few = _few_settings({FACTOR_VAE: len(fv_from), BETA_VAE: len(bv_from)}, _NEED,
                                f"with runs of {name}")
            if few:
                return Claim(key, figure, statement, few, TOO_FEW)
            used += [fv_from, bv_from]
        numbers[name] = separation_auc(fv[:, 0], bv[:, 0], scalar_direction(settings, scalar))
        parts.append(f"{name} {_f(numbers[name])}")
    ok = (numbers["JEMMIG"] >= AUC_SEPARATES and numbers["RMIG"] >= AUC_SEPARATES
          and numbers["D"] < AUC_DOES_NOT_SEPARATE and numbers["C"] < AUC_DOES_NOT_SEPARATE)
    return Claim(key, figure, statement, "AUC " + ", ".join(parts) + ".", REPRODUCED if ok else NOT_REPRODUCED,
                 numbers, _models(*used))


def _informativeness_tracks_jemmig(settings: Sequence[Setting]) -> Claim:
    key, figure = "informativeness-tracks-jemmig", "6"
    statement = (f"Across runs, JEMMIG correlates with DCI informativeness (|rho| >= {RHO_CORRELATED}) but not with "
                 f"disentanglement or completeness (|rho| < {RHO_CORRELATED}).")
    numbers, parts, used = {}, [], []
    for scalar, name in ((INFORMATIVENESS, "I"), (DISENTANGLEMENT, "D"), (COMPLETENESS, "C")):
        fv, fv_from = _runs(settings, FACTOR_VAE, JEMMIG, scalar)
        bv, bv_from = _runs(settings, BETA_VAE, JEMMIG, scalar)
        few = _few_settings({FACTOR_VAE: len(fv_from), BETA_VAE: len(bv_from)}, _NEED,
                            f"with runs of JEMMIG and {name}")
        if few:
            return Claim(key, figure, statement, few, TOO_FEW)
        used += [fv_from, bv_from]
        both = np.concatenate([fv, bv])
        numbers[name] = spearman(both[:, 0], both[:, 1])
        parts.append(f"rho(JEMMIG, {name}) = {_f(numbers[name])} ({len(both)} runs)")
    ok = (abs(numbers["I"]) >= RHO_CORRELATED and abs(numbers["D"]) < RHO_CORRELATED
          and abs(numbers["C"]) < RHO_CORRELATED)  # NaN compares false: not reproduced
    return Claim(key, figure, statement, ", ".join(parts) + ".",
                 REPRODUCED if ok else NOT_REPRODUCED, numbers, _models(*used))


def _dc_favour_high_beta(settings: Sequence[Setting]) -> Claim:
    key, figure = "dc-favour-high-beta", "7"
    statement = (f"DCI disentanglement and completeness rise with beta (Spearman's rho of beta and the beta-VAE "
                 f"setting means >= {RHO_BETA}), while the settings with beta >= {HIGH_BETA:g} are less informative "
                 "(worse DCI informativeness error) than FactorVAE on average.")
    numbers, parts, used = {}, [], []
    for scalar, name in ((DISENTANGLEMENT, "D"), (COMPLETENESS, "C")):
        bv = _with_means(settings, BETA_VAE, scalar)
        used.append(bv)
        if len(bv) < 3:
            return Claim(key, figure, statement, f"needs 3 beta-VAE settings with {MIN_RUNS} runs of {name}; the runs "
                                                 f"give {len(bv)}.", TOO_FEW)
        rho = spearman(np.array([s.hyper_value for s, _ in bv]), np.array([m for _, m in bv]))
        numbers[f"rho {name}"] = _goodness(rho, scalar_direction(settings, scalar))
        parts.append(f"rho(beta, {name}) = {_f(numbers[f'rho {name}'])} over {len(bv)} settings")
    direction = scalar_direction(settings, INFORMATIVENESS)
    fv = _with_means(settings, FACTOR_VAE, INFORMATIVENESS)
    high = [(s, m) for s, m in _with_means(settings, BETA_VAE, INFORMATIVENESS) if s.hyper_value >= HIGH_BETA]
    if len(fv) < MIN_SETTINGS or not high:
        return Claim(key, figure, statement, f"needs {MIN_SETTINGS} FactorVAE settings and one with beta >= "
                                             f"{HIGH_BETA:g}, each with {MIN_RUNS} runs of DCI informativeness; the "
                                             f"runs give {len(fv)} and {len(high)}.", TOO_FEW)
    reference = float(np.mean([m for _, m in fv]))
    numbers["I factor-vae"] = reference
    less_informative = all(_goodness(m, direction) < _goodness(reference, direction) for _, m in high)
    parts.append(f"DCI I error ({direction} is better): FactorVAE mean {_f(reference)}, "
                 + ", ".join(f"beta={s.hyper_value:g} {_f(m)}" for s, m in high))
    for s, m in high:
        numbers[f"I beta-{s.hyper_value:g}"] = m
    ok = (numbers["rho D"] >= RHO_BETA and numbers["rho C"] >= RHO_BETA and less_informative)
    return Claim(key, figure, statement, "; ".join(parts) + ".", REPRODUCED if ok else NOT_REPRODUCED, numbers,
                 _models(*used, fv, high))


def _modularity_favours_vae(settings: Sequence[Setting]) -> Claim:
    key, figure = "modularity-favours-vae", "8b"
    statement = ("Modularity scores the standard VAE (beta = 1) better than FactorVAE: above the mean of the "
                 "FactorVAE settings' means (\"modularity often gives higher scores for standard VAEs\").")
    vae, fv = _beta_one(settings, MODULARITY), _with_means(settings, FACTOR_VAE, MODULARITY)
    if vae is None or len(fv) < MIN_SETTINGS:
        return Claim(key, figure, statement, f"needs the beta = 1 setting and {MIN_SETTINGS} FactorVAE settings, each "
                                             f"with {MIN_RUNS} runs of modularity; the runs give "
                                             f"{0 if vae is None else 1} and {len(fv)}.", TOO_FEW)
    mean_vae, reference = vae.mean(MODULARITY), float(np.mean([m for _, m in fv]))
    direction = scalar_direction(settings, MODULARITY)
    ok = _goodness(mean_vae, direction) > _goodness(reference, direction)
    return Claim(key, figure, statement, f"modularity beta=1 {_f(mean_vae)}, FactorVAE mean of {len(fv)} settings "
                                         f"{_f(reference)}.", REPRODUCED if ok else NOT_REPRODUCED,
                 {"modularity beta-1": mean_vae, "modularity factor-vae": reference}, _models([vae], fv))


def _jemmig_grades_vae_worst(settings: Sequence[Setting]) -> Claim:
    key, figure = "jemmig-grades-vae-worst", "5a"
    statement = ("JEMMIG grades the standard VAE (beta = 1) worst of all FactorVAE and beta-VAE settings "
                 "(\"JEMMIG consistently grades standard VAEs worse than other models\").")
    vae = _beta_one(settings, JEMMIG)
    fv, bv = _with_means(settings, FACTOR_VAE, JEMMIG), _with_means(settings, BETA_VAE, JEMMIG)
    if vae is None or len(fv) < MIN_SETTINGS or len(bv) < MIN_SETTINGS:
        return Claim(key, figure, statement, f"needs the beta = 1 setting, {MIN_SETTINGS} FactorVAE and {MIN_SETTINGS} "
                                             f"beta-VAE settings, each with {MIN_RUNS} runs of JEMMIG; the runs give "
                                             f"{0 if vae is None else 1}, {len(fv)} and {len(bv)}.", TOO_FEW)
    direction = scalar_direction(settings, JEMMIG)
    mean_vae = vae.mean(JEMMIG)
    others = [(s, m) for s, m in fv + bv if s is not vae]
    next_worst = min(others, key=lambda sm: _goodness(sm[1], direction))
    ok = all(_goodness(mean_vae, direction) < _goodness(m, direction) for _, m in others)
    return Claim(key, figure, statement, f"JEMMIG ({direction} is better) beta=1 {_f(mean_vae)}; the worst other "
                                         f"setting, {next_worst[0].label}, {_f(next_worst[1])}.",
                 REPRODUCED if ok else NOT_REPRODUCED, {"JEMMIG beta-1": mean_vae, "JEMMIG next worst": next_worst[1]},
                 _models([vae], fv, bv))


def check_claims(settings: Sequence[Setting]) -> list[Claim]:
    """Do & Tran's claims of section 4 (Figures 5-8) checked on ``settings`` (see the module for the
    thresholds), in the order of the paper's text."""
    return [_factorvae_beats_betavae(settings), _jemmig_rmig_agree(settings), _dc_do_not_separate(settings),
            _informativeness_tracks_jemmig(settings), _dc_favour_high_beta(settings),
            _modularity_favours_vae(settings), _jemmig_grades_vae_worst(settings)]


def resample_runs(setting: Setting, rows: Sequence[int]) -> Setting:
    """``setting`` with its runs replaced by the runs at ``rows`` (0-based, repeats allowed): each run kept
    whole, every scalar of a row from the same run."""
    rows = list(rows)
    return replace(setting, values={k: tuple(v[i] for i in rows) for k, v in setting.values.items()},
                   seeds=tuple(setting.seeds[i] for i in rows) if setting.seeds else ())


def verdict_stability(settings: Sequence[Setting], resamples: int = STABILITY_RESAMPLES, seed: int = 0
                      ) -> dict[str, float]:
    """How firmly the runs hold each verdict: the fraction of ``resamples`` bootstrap draws (every setting's
    runs drawn with replacement, as many as it has, independently per setting; Efron & Tibshirani 1993, ch. 6)
    in which :func:`check_claims` gives the verdict it gives on the runs themselves, by claim key. Claims
    that are "too few runs" are left out (a draw keeps every setting's count, so it cannot judge them
    either). Only the FactorVAE and beta-VAE settings are drawn: the others (the AAE, yours) are in no claim,
    so drawing them would only move the random stream, and a claim's stability with them. A setting of one run
    is the same in every draw; with two runs a draw is one of three, so the
    fraction measures sensitivity to the seeds at hand, not the spread of an unseen seed. Deterministic in
    ``seed``."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    observed = {c.key: c.verdict for c in check_claims(settings) if c.verdict != TOO_FEW}
    if not observed:
        return {}
    rng = np.random.default_rng(seed)
    same = dict.fromkeys(observed, 0)
    for _ in range(resamples):
        drawn = [resample_runs(s, rng.integers(0, s.runs, s.runs)) if s.runs > 1 and s.family in _NEED else s
                 for s in settings]
        for claim in check_claims(drawn):
            if claim.key in same and claim.verdict == observed[claim.key]:
                same[claim.key] += 1
    return {key: count / resamples for key, count in same.items()}


# --- report and figures --------------------------------------------------------------------------------

def format_report(settings: Sequence[Setting], claims: Sequence[Claim], plan: str = PLAN,
                  pending: Collection[str] = (), stability: Mapping[str, float] | None = None,
                  resamples: int = STABILITY_RESAMPLES) -> str:
    """Markdown: a row per setting (mean ± standard error over its runs of every scalar of :data:`TABLE`),
    then the claims with their verdicts; one sentence when no run of ``plan`` is collected. ``pending``:
    the models whose runs are seeds of entries not yet complete, marked "pending" in the runs column.
    ``stability``: :func:`verdict_stability` over ``resamples`` draws, given after each judged claim's
    evidence."""
    if not settings:
        return f"No run of plan `{plan}` is collected yet.\n"
    arrows = {"higher": " ↑", "lower": " ↓"}
    yours = [s for s in settings if s.family == YOURS]
    planned = [s for s in settings if s.family != YOURS]
    runs = sum(s.runs for s in planned)
    waiting = [s for s in settings if s.model in pending]
    of_them = (f"; {sum(s.runs for s in waiting)} of the runs, in {len(waiting)} settings marked pending, are finished "
               "seeds of entries not yet complete, outside the reference tables" if waiting else "")
    beside = (f"; beside them, yours ({', '.join(s.model for s in yours)}), in no claim" if yours else "")
    out = [f"Do & Tran 2020 on dSprites: {len(planned)} settings of plan `{plan}`, {runs} runs (mean ± standard "
           f"error over each setting's runs){of_them}{beside}", ""]
    out.append("| family | hyperparameter | runs | " + " | ".join(
        label + arrows.get(scalar_direction(settings, scalar), "") for scalar, label in TABLE.items()) + " |")
    out.append("|---|---|---|" + "---|" * len(TABLE))
    missing = False  # a cell without a value: the note under the table says why
    for s in settings:
        cells = []
        for scalar in TABLE:
            mean, se = mean_and_stderr(s.values.get(scalar, ()))
            missing |= math.isnan(mean)
            cells.append("n/a" if math.isnan(mean) else f"{mean:.3f}" + ("" if math.isnan(se) else f" ± {se:.3f}"))
        runs_cell = f"{s.runs}, pending" if s.model in pending else str(s.runs)
        out.append(f"| {s.family} | {s.hyper_label} | {runs_cell} | " + " | ".join(cells) + " |")
    if missing:
        out += ["", "n/a: no run of the setting has the metric; a result file says why under `skipped` (in `do-tran-v1`: "
                    "WSEPIN, which needs a Gaussian posterior, for the AAE's deterministic codes)."]
    if claims:
        out += ["", "Claims (Do & Tran 2020, section 4):", ""]
        out += [f"- **{c.key}** (Figure {c.figure}): {verdict_text(c, pending)}. {c.statement} Evidence: {c.evidence}"
                + _stability_text(c, stability, resamples) for c in claims]
    return "\n".join(out) + "\n"


def _stability_text(claim: Claim, stability: Mapping[str, float] | None, resamples: int) -> str:
    if not stability or claim.key not in stability:
        return ""
    return (f" Stability: the same verdict in {stability[claim.key]:.0%} of {resamples:,} bootstrap draws of each "
            "setting's runs.")


def verdict_text(claim: Claim, pending: Collection[str], counts: bool = True) -> str:
    """The verdict, marked ", provisional" where it rests on settings not yet complete (:meth:`Claim.pending_of`),
    with how many of them (``counts``) or without."""
    waiting = claim.pending_of(pending)
    if not waiting:
        return claim.verdict
    if not counts:
        return f"{claim.verdict}, provisional"
    return (f"{claim.verdict}, provisional ({len(waiting)} of the {len(claim.models)} settings it rests on "
            f"{'is' if len(waiting) == 1 else 'are'} pending)")


def _colour(family: str) -> str:
    # the paper's colours: FactorVAE blue, beta-VAE orange
    return {FACTOR_VAE: "C0", BETA_VAE: "C1", AAE: "C2"}.get(family, "C7")


def _face(setting: Setting, pending: Collection[str]) -> str:
    """The marker's face: hollow ("none") for a pending setting, else its family's colour."""
    return "none" if setting.model in pending else _colour(setting.family)


def _pending_note(settings: Sequence[Setting], pending: Collection[str]) -> str | None:
    """What a hollow marker means, where any setting drawn is pending."""
    return "hollow: pending" if any(s.model in pending for s in settings) else None


def _per_setting(ax: Any, settings: Sequence[Setting], scalar: str, pending: Collection[str] = ()) -> None:
    """Mean ± standard error of ``scalar`` per setting, coloured by family, hollow where pending."""
    for i, s in enumerate(settings):
        mean, se = mean_and_stderr(s.values.get(scalar, ()))
        ax.errorbar([i], [mean], yerr=None if math.isnan(se) else [se], fmt="o", color=_colour(s.family),
                    markerfacecolor=_face(s, pending), capsize=3)
    ax.set_xticks(range(len(settings)), [f"{s.family}\n{s.hyper_label.replace(' ', '')}" for s in settings],
                  rotation=60, ha="right", fontsize=7)
    note = _pending_note(settings, pending)
    ax.set_title(f"{TABLE.get(scalar, scalar)} ({scalar_direction(settings, scalar)} is better; bars: ± 1 standard error"
                 f"{'; ' + note if note else ''})", fontsize=9)


def _scatter(ax: Any, settings: Sequence[Setting], x: str, y: str, pending: Collection[str] = ()) -> None:
    """``y`` against ``x`` per run, coloured by family, hollow where the setting is pending. The legend has
    one filled marker per family drawn, whichever of its settings are pending (the title says what hollow
    means)."""
    from matplotlib.lines import Line2D

    families: list[str] = []
    for s in settings:
        xs, ys = np.asarray(s.values.get(x, ()), dtype=float), np.asarray(s.values.get(y, ()), dtype=float)
        n = min(len(xs), len(ys))
        ax.scatter(xs[:n], ys[:n], s=14, edgecolors=_colour(s.family), facecolors=_face(s, pending))
        if s.family not in families:
            families.append(s.family)
    ax.set_xlabel(TABLE.get(x, x), fontsize=8)
    ax.set_ylabel(TABLE.get(y, y), fontsize=8)
    handles = [Line2D([], [], linestyle="none", marker="o", markersize=5, color=_colour(f),
                      label=_FAMILY_NAMES.get(f, f)) for f in families]
    ax.legend(handles=handles, fontsize=7, title=_pending_note(settings, pending), title_fontsize=7)


#: the files :func:`plot_figures` writes
FIGURES = ("fig5.png", "fig6.png", "fig7.png", "fig8.png")


def plot_figures(settings: Sequence[Setting], directory: str | Path, pending: Collection[str] = ()) -> list[Path]:
    """The counterparts of Do & Tran's Figures 5-8 as PNGs in ``directory`` (:data:`FIGURES`): ``fig5.png``
    (JEMMIG and RMIG per setting, JEMMIG against RMIG per run), ``fig6.png`` (DCI D, C and I against JEMMIG
    and RMIG per run), ``fig7.png`` (D, C and I per setting), ``fig8.png`` (modularity per setting and
    against JEMMIG). The settings of ``pending`` (models whose runs are seeds of entries not yet complete) are
    drawn hollow, and the panels say so. Nothing is drawn without settings."""
    if not settings:
        return []
    from ..plots import pyplot

    plt = pyplot()

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        paths.append(save_figure(fig, directory / name, dpi=100))

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    _per_setting(axes[0], settings, JEMMIG, pending)
    _per_setting(axes[1], settings, RMIG, pending)
    _scatter(axes[2], settings, JEMMIG, RMIG, pending)
    save(fig, "fig5.png")
    fig, axes = plt.subplots(2, 3, figsize=(13, 8))
    for row, x in enumerate((JEMMIG, RMIG)):
        for col, y in enumerate((DISENTANGLEMENT, COMPLETENESS, INFORMATIVENESS)):
            _scatter(axes[row, col], settings, x, y, pending)
    save(fig, "fig6.png")
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for ax, scalar in zip(axes, (DISENTANGLEMENT, COMPLETENESS, INFORMATIVENESS)):
        _per_setting(ax, settings, scalar, pending)
    save(fig, "fig7.png")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    _scatter(axes[0], settings, JEMMIG, MODULARITY, pending)
    _per_setting(axes[1], settings, MODULARITY, pending)
    save(fig, "fig8.png")
    return paths


@exits_2_on_user_error
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help=f"a folder of <model>.json results of {PROTOCOL} "
                                                    "(default: the shipped rows)")
    parser.add_argument("--add", action="append", default=[], metavar="JSON", help="more results (repeatable)")
    parser.add_argument("--plan", default=PLAN, help=f"the plan whose runs are compared (default {PLAN})")
    parser.add_argument("--pending", metavar="DIR", nargs="?", const="", default=None,
                        help="also the finished seeds of entries not yet complete, marked as pending: a folder of "
                             f"<model>.json results (default: this checkout's baselines/pending/<plan>/{PROTOCOL})")
    parser.add_argument("--plot", metavar="DIR", default=None, help="also write the figures into this folder")
    parser.add_argument("--force", action="store_true", help="replace the figures in --plot if they exist")
    parser.add_argument("--resamples", type=int, default=STABILITY_RESAMPLES, metavar="N",
                        help="bootstrap draws of each setting's runs for each verdict's stability "
                             f"(default {STABILITY_RESAMPLES}; 0: none)")
    args = parser.parse_args(argv)
    if args.resamples < 0:
        parser.error(f"--resamples must be 0 or more, got {args.resamples}")
    pending_folder = check_input_dir(args.pending, "--pending") if args.pending else None  # before any work
    if args.plot:  # before any work
        plots = check_output_dir(args.plot, "--plot")
        check_new_files([plots / name for name in FIGURES], args.force,
                        "pass --force to replace them or --plot to write elsewhere")
    from factorbench.benchmark.results import added_models, reference_results

    results = reference_results(PROTOCOL, args.dir, add=args.add)
    pending = pending_results(args.plan, folder=pending_folder) if args.pending is not None else {}
    results = results_with_pending(results, pending)
    check_plan_names(results, [args.plan])
    settings = settings_of(results, args.plan, yours=added_models(args.add))
    stability = verdict_stability(settings, args.resamples) if args.resamples else None
    print(format_report(settings, check_claims(settings), plan=args.plan, pending=set(pending), stability=stability,
                        resamples=args.resamples), end="")
    if args.plot:
        for path in plot_figures(settings, args.plot, pending=set(pending)):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
