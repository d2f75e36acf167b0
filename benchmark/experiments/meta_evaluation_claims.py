"""Almudévar & Ortega's claims about their Figures 4 and 5 (2025, sections 6.1 and 6.2), checked one by one
on a meta-evaluation (:class:`~factorbench.benchmark.experiments.metric_meta_evaluation.MetaEvaluation`).

Each claim is the paper's sentence and a pure test of the correlation array of one target (settings x
metrics, the independent setting first). Its verdict is judged on the point estimates, and again in every
bootstrap resample of the encoders that the meta-evaluation drew for its intervals: the *stability* is the
share of those resamples that give the same verdict, so that a verdict that turns on one or two encoders
says so.

The words "strong", "moderate" and "weak" are Dancey & Reidy's bands for a correlation's size (2007, as
tabulated by Akoglu 2018, "User's guide to correlation coefficients"): strong from :data:`STRONG`, weak
below :data:`MODERATE`. "Stable" means no dependent setting moves the correlation by more than
:data:`STABLE_MOVE` from the independent one; "declines sharply" means some dependent setting takes it
down by :data:`SHARP_FALL` or more (the width of the moderate band); "varies substantially" means its
range over the settings is :data:`SHARP_FALL` or more. These thresholds are fixed here, with the claims,
and apply alike to every population. "Most" is more than half.

    python -m factorbench.benchmark.experiments.metric_meta_evaluation dsprites-dependent-v3 --plan almudevar-ortega-v1
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from factorbench.benchmark.experiments.metric_meta_evaluation import FEW_ENCODERS, MetaEvaluation

__all__ = ["CLAIMS", "MetaClaim", "MODERATE", "NOT_REPRODUCED", "NOT_SCORED", "REPRODUCED", "SHARP_FALL",
           "STABLE_MOVE", "STRONG", "THRESHOLDS", "TOO_FEW", "check_meta_claims", "format_meta_claims", "grid_cell",
           "too_few_note", "verdict_text"]

#: a correlation this high or higher is strong (Dancey & Reidy 2007)
STRONG = 0.7
#: a correlation this high or higher is at least moderate; below it, weak (Dancey & Reidy 2007)
MODERATE = 0.4
#: the most a stable correlation moves, in any dependent setting, from the independent one
STABLE_MOVE = 0.15
#: a fall from the independent setting this large or larger is sharp; a range this large varies substantially
SHARP_FALL = 0.3

ACCURACY, IRS = "downstream.score", "irs.score"
MINIMALITY, SUFFICIENCY = "minimality_sufficiency.minimality", "minimality_sufficiency.sufficiency"

REPRODUCED, NOT_REPRODUCED = "reproduced", "not reproduced"
#: fewer encoders than :data:`~factorbench.benchmark.experiments.metric_meta_evaluation.FEW_ENCODERS`
TOO_FEW = "too few encoders"
#: the meta-evaluation lacks the claim's target or metric
NOT_SCORED = "not scored"


@dataclass(frozen=True)
class MetaClaim:
    """One claim judged: ``statement`` is the paper's, ``evidence`` ours in words and numbers; ``stability``
    the share of the bootstrap resamples giving ``verdict`` (None when not judged); ``numbers`` the figures
    the evidence cites, by name, for the prose."""

    key: str
    figure: str
    statement: str
    evidence: str
    verdict: str
    stability: float | None
    resamples: int
    numbers: Mapping[str, float]


@dataclass(frozen=True)
class _Table:
    """One target's correlations: ``rho[s, m]`` over ``settings`` (the independent one first) x ``metrics``."""

    rho: np.ndarray
    settings: tuple[str, ...]
    metrics: tuple[str, ...]

    def of(self, metric: str) -> np.ndarray:
        return self.rho[:, self.metrics.index(metric)]

    def others(self, metric: str) -> list[int]:
        return [m for m, name in enumerate(self.metrics) if name != metric]


#: (holds, evidence, numbers) of a claim's test on one target's correlations
Judgement = tuple[bool, str, dict[str, float]]


def _f(x: float) -> str:
    return f"{x:.2f}"


def _verb(count: int, singular: str, plural: str) -> str:
    return singular if count == 1 else plural


def _most(count: int, total: int) -> bool:
    return count > total / 2


def _strongest_independent(table: _Table, subject: str) -> Judgement:
    own, others = table.of(subject)[0], table.others(subject)
    best = max(others, key=lambda m: table.rho[0, m])
    return (bool(own >= table.rho[0, best]),
            f"{subject} {_f(own)}; the highest other, {table.metrics[best]}, {_f(table.rho[0, best])}",
            {"own": float(own), "best other": float(table.rho[0, best])})


def _others_at_least_moderate(table: _Table, subject: str) -> Judgement:
    others = table.others(subject)
    count = sum(table.rho[0, m] >= MODERATE for m in others)
    return (_most(count, len(others)), f"{count} of the {len(others)} others at {MODERATE} or more",
            {"count": float(count), "others": float(len(others))})


def _stable(table: _Table, subject: str) -> Judgement:
    moves = table.of(subject)[1:] - table.of(subject)[0]
    worst = int(np.argmax(np.abs(moves)))
    return (bool(abs(moves[worst]) <= STABLE_MOVE),
            f"{_f(table.of(subject)[0])} independent; its largest move, {moves[worst]:+.2f}, under "
            f"{table.settings[worst + 1]}", {"independent": float(table.of(subject)[0]), "move": float(moves[worst])})


def _others_fall_sharply(table: _Table, subject: str) -> Judgement:
    others = table.others(subject)
    falls = {table.metrics[m]: float(table.rho[0, m] - table.rho[1:, m].min()) for m in others}
    sharp = [name for name, fall in falls.items() if fall >= SHARP_FALL]
    return (_most(len(sharp), len(others)),
            f"{len(sharp)} of the {len(others)} others {_verb(len(sharp), 'falls', 'fall')} by {SHARP_FALL} or more "
            "in some dependent setting"
            + (f" ({', '.join(sharp)})" if 0 < len(sharp) <= 4 else "")
            + f"; the median largest fall {_f(float(np.median(list(falls.values()))))}",
            {"count": float(len(sharp)), "others": float(len(others)),
             "median fall": float(np.median(list(falls.values())))})


def _highest_lowest(table: _Table, subject: str) -> Judgement:
    lowest = table.rho.min(axis=0)
    own, others = lowest[table.metrics.index(subject)], table.others(subject)
    best = max(others, key=lambda m: lowest[m])
    return (bool(own >= lowest[best]),
            f"{subject}'s lowest over the settings {_f(own)}; the highest lowest of the others, "
            f"{table.metrics[best]}'s, {_f(lowest[best])}", {"own": float(own), "best other": float(lowest[best])})


def _others_weak_independent(table: _Table, subject: str) -> Judgement:
    others = table.others(subject)
    weak = sum(table.rho[0, m] < MODERATE for m in others)
    negative = sum(table.rho[0, m] < 0 for m in others)
    return (_most(weak, len(others)),
            f"{weak} of the {len(others)} others below {MODERATE} with independent factors, {negative} negative",
            {"count": float(weak), "others": float(len(others)), "negative": float(negative)})


def _others_vary(table: _Table, subject: str) -> Judgement:
    others = table.others(subject)
    ranges = [float(np.ptp(table.rho[:, m])) for m in others]
    varying = sum(r >= SHARP_FALL for r in ranges)
    signs = sum(bool((table.rho[:, m] > 0).any() and (table.rho[:, m] < 0).any()) for m in others)
    return (_most(varying, len(others)),
            f"{varying} of the {len(others)} others {_verb(varying, 'ranges', 'range')} over {SHARP_FALL} or more "
            f"across the settings, {signs} {_verb(signs, 'changes', 'change')} sign", {"count": float(varying), "others": float(len(others)), "sign": float(signs)})


def _strong_everywhere(table: _Table, subject: str) -> Judgement:
    values = table.of(subject)
    worst = int(np.argmin(values))
    return (bool(values[worst] >= STRONG),
            f"{subject} {_f(values[0])} independent, its lowest {_f(values[worst])} ({table.settings[worst]})",
            {"independent": float(values[0]), "lowest": float(values[worst])})


def _strongest_everywhere(table: _Table, subject: str) -> Judgement:
    others = table.others(subject)
    first = [s for s in range(len(table.settings)) if table.of(subject)[s] >= max(table.rho[s, m] for m in others)]
    return (len(first) == len(table.settings),
            f"{subject} the highest in {len(first)} of the {len(table.settings)} settings",
            {"count": float(len(first)), "settings": float(len(table.settings))})


@dataclass(frozen=True)
class _Claim:
    key: str
    figure: str
    statement: str
    target: str
    subject: str
    test: Callable[[_Table, str], Judgement]


#: the claims of sections 6.1 (Figure 4, against the single-code accuracy) and 6.2 (Figure 5, against IRS),
#: in the paper's words and order
CLAIMS: tuple[_Claim, ...] = (
    _Claim("sufficiency-strongest", "4", "When the factors are independent, Sufficiency achieves the strongest "
           "correlation with accuracy", ACCURACY, SUFFICIENCY, _strongest_independent),
    _Claim("others-moderate", "4", "most other metrics also exhibit moderate to high correlations",
           ACCURACY, SUFFICIENCY, _others_at_least_moderate),
    _Claim("sufficiency-stable", "4", "As factor dependence increases ... Sufficiency remains stable",
           ACCURACY, SUFFICIENCY, _stable),
    _Claim("others-decline", "4", "whereas the correlations of the other metrics decline sharply",
           ACCURACY, SUFFICIENCY, _others_fall_sharply),
    _Claim("sufficiency-most-reliable", "4", "Sufficiency provides the most reliable and robust predictor of "
           "downstream accuracy among the metrics considered, especially in scenarios where factors are dependent",
           ACCURACY, SUFFICIENCY, _highest_lowest),
    _Claim("others-weak", "5", "most metrics have weak—or even negative—correlations with IRS, including when "
           "factors are independent", IRS, MINIMALITY, _others_weak_independent),
    _Claim("others-vary", "5", "their correlations vary substantially across dependence levels, sometimes "
           "changing sign", IRS, MINIMALITY, _others_vary),
    _Claim("minimality-strong", "5", "Minimality exhibits a consistently strong, positive correlation with IRS "
           "... for every dependence regime considered", IRS, MINIMALITY, _strong_everywhere),
    _Claim("minimality-strongest", "5", "Minimality tracks interventional robustness far more faithfully than "
           "competing metrics", IRS, MINIMALITY, _strongest_everywhere),
)


def _table(result: MetaEvaluation, target: str) -> _Table | None:
    """The point correlations of ``target`` over the metrics scored in every setting; None where the
    target is missing."""
    if target not in result.targets:
        return None
    values = result.rho[:, :, result.targets.index(target)]
    whole = [m for m in range(len(result.metrics)) if np.isfinite(values[:, m]).all()]
    return _Table(values[:, whole], result.settings, tuple(result.metrics[m] for m in whole))


def _judgeable(claim: _Claim, table: _Table) -> bool:
    return claim.subject in table.metrics and len(table.metrics) >= 2 and len(table.settings) >= 2


def _resampled(result: MetaEvaluation, table: _Table, target: str) -> list[_Table]:
    """``table`` in each of ``result``'s bootstrap resamples in which every cell it reads has a value."""
    columns = [result.metrics.index(m) for m in table.metrics]
    picked = result.samples[:, :, columns, result.targets.index(target)]
    return [_Table(sample, table.settings, table.metrics) for sample in picked if np.isfinite(sample).all()]


def check_meta_claims(result: MetaEvaluation, few: int = FEW_ENCODERS) -> list[MetaClaim]:
    """Every claim of :data:`CLAIMS` judged on ``result`` (a claim whose target or metric is not scored in
    every setting: :data:`NOT_SCORED`; fewer than ``few`` encoders: :data:`TOO_FEW`), each with its
    stability over ``result``'s bootstrap resamples (those in which every cell it reads has a value)."""
    out = []
    for claim in CLAIMS:
        table = _table(result, claim.target)
        if table is None or not _judgeable(claim, table):
            out.append(MetaClaim(claim.key, claim.figure, claim.statement, "", NOT_SCORED, None, 0, {}))
            continue
        holds, evidence, numbers = claim.test(table, claim.subject)
        if len(result.encoders) < few:
            out.append(MetaClaim(claim.key, claim.figure, claim.statement, evidence, TOO_FEW, None, 0, numbers))
            continue
        same = [claim.test(sample, claim.subject)[0] == holds for sample in _resampled(result, table, claim.target)]
        out.append(MetaClaim(claim.key, claim.figure, claim.statement, evidence,
                             REPRODUCED if holds else NOT_REPRODUCED, float(np.mean(same)) if same else None,
                             len(same), numbers))
    return out


def grid_cell(claim: MetaClaim | None, encoders: int) -> str:
    """A claim's verdict as a cell of a grid over populations: "reproduced (62%)" with its stability, "too few
    encoders (7)" for a population of ``encoders`` too small to judge (``claim`` None: under
    :data:`~factorbench.benchmark.experiments.metric_meta_evaluation.MIN_ENCODERS`, no meta-evaluation at all)."""
    if claim is None or claim.verdict == TOO_FEW:
        return f"{TOO_FEW} ({encoders})"
    return claim.verdict + (f" ({claim.stability:.0%})" if claim.stability is not None else "")


def verdict_text(claim: MetaClaim) -> str:
    """The verdict with its stability: "reproduced (the same in 62 % of 1000 resamples)"."""
    if claim.stability is None:
        return claim.verdict
    return f"{claim.verdict} (the same in {claim.stability:.0%} of {claim.resamples} resamples)"


#: the thresholds in words, as every rendering of the claims states them
THRESHOLDS = (f"strong from {STRONG}, weak below {MODERATE}, stable within {STABLE_MOVE} of the independent setting, "
              f"a sharp fall {SHARP_FALL} or more")


def too_few_note(claims: Sequence[MetaClaim], encoders: int) -> str | None:
    """The sentence that stands for the claims when none is judged for want of encoders (else None)."""
    if claims and all(claim.verdict == TOO_FEW for claim in claims):
        return (f"{encoders} encoders are too few to judge Almudévar & Ortega's claims about their Figures 4 and 5 "
                f"(it takes {FEW_ENCODERS}).")
    return None


def format_meta_claims(claims: Sequence[MetaClaim], encoders: int, where: str = "benchmark/METRICS.md") -> str:
    """The claims as a Markdown paragraph and table (figure, the paper's claim, ours, verdict with its
    stability), ``where`` the reference to METRICS.md; under :data:`FEW_ENCODERS` encoders, one sentence."""
    few = too_few_note(claims, encoders)
    if few:
        return few
    lines = [f"Almudévar & Ortega's claims about their Figures 4 and 5, judged on these correlations: their metric "
             f"against the other metrics scored in every setting; {THRESHOLDS}; the share of the bootstrap "
             f"resamples of the encoders that give the same verdict beside it ({where}, \"Their claims, judged\").",
             "", "| figure | the paper | ours | verdict |", "|---|---|---|---|"]
    for claim in claims:
        lines.append(f"| {claim.figure} | {claim.statement} | {claim.evidence or 'n/a'} | {verdict_text(claim)} |")
    return "\n".join(lines)
