"""Suter et al. 2019's Interventional Robustness Score beside other metrics, encoder by encoder: every
dSprites encoder of the plans ``almudevar-ortega-v1`` and ``do-tran-v1`` scored under ``dsprites-dci-v1``,
its IRS, DCI disentanglement, MIG and FactorVAE score, and each metric's Spearman correlation with IRS
across the encoders. Suter et al.'s appendix prints no IRS score (its figures are importance matrices and
interventional plots of single models), so there is no published number to set beside these.

:func:`irs_comparison` is a pure function of the results (``{model: [runs]}``), so it runs on any
population, yours beside the reference rows:

    python -m factorbench.benchmark.experiments.irs_comparison
    python -m factorbench.benchmark.experiments.irs_comparison --add mine.json
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from factorbench.benchmark.experiments.metric_meta_evaluation import (MIN_ENCODERS, check_plan_names, population_of,
                                                                       runs_of_plan, spearman)
from factorbench.generators.errors import exits_2_on_user_error

__all__ = ["COLUMNS", "IRSComparison", "PLANS", "PROTOCOL", "format_irs_comparison", "irs_comparison", "main"]

#: the plans whose dSprites encoders are compared, and the protocol that scores them
PLANS = ("almudevar-ortega-v1", "do-tran-v1")
PROTOCOL = "dsprites-dci-v1"
#: the scalars of the comparison (IRS first), with their labels
COLUMNS = {"irs.score": "IRS", "dci.disentanglement": "DCI D", "mig.score": "MIG", "factor_vae.score": "FactorVAE"}
IRS = "irs.score"


@dataclass(frozen=True)
class IRSComparison:
    """``values[e, c]``: scalar ``columns[c]`` of encoder ``encoders[e]`` (``"<model>/seed<k>"``, NaN where the
    run lacks it); ``models[e]`` its model; ``rho[c]``: Spearman's rho between IRS and column ``c`` across
    the encoders with both values (NaN under
    :data:`~factorbench.benchmark.experiments.metric_meta_evaluation.MIN_ENCODERS` encoders)."""

    encoders: tuple[str, ...]
    models: tuple[str, ...]
    columns: tuple[str, ...]
    values: np.ndarray
    rho: np.ndarray


def irs_comparison(results: Mapping[str, Sequence[Any]], plans: Sequence[str] = PLANS,
                   columns: Sequence[str] = tuple(COLUMNS), yours: Collection[str] = ()) -> IRSComparison:
    """The runs of ``results`` (``{model: [runs]}``) that a sweep of one of ``plans`` trained, and those of the
    models in ``yours`` (the user's added results), one row per run in model order (the reference encoders
    ideal, random and pca left out), and each column's Spearman correlation with IRS (the first of
    ``columns``, :data:`IRS` by default)."""
    kept = runs_of_plan(results, *plans, keep=yours)
    population = population_of(dict(sorted(kept.items())))
    encoders = tuple(population)
    values = np.array([[population[e].get(k, math.nan) for k in columns] for e in encoders], dtype=float
                      ).reshape(len(encoders), len(columns))
    rho = np.array([spearman(values[:, 0], values[:, c]) if len(encoders) >= MIN_ENCODERS else math.nan
                    for c in range(len(columns))], dtype=float)
    return IRSComparison(encoders, tuple(e.rsplit("/", 1)[0] for e in encoders), tuple(columns), values, rho)


def format_irs_comparison(result: IRSComparison, pending: Collection[str] = ()) -> str:
    """A Markdown table: a row per encoder (``(pending)`` after those of the models in ``pending``), a column
    per scalar, and a last row of each scalar's Spearman rho with IRS."""
    labels = [COLUMNS.get(k, k) + " ↑" for k in result.columns]
    lines = ["| encoder | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for name, model, row in zip(result.encoders, result.models, result.values):
        lines.append(f"| {name}{' (pending)' if model in pending else ''} | "
                     + " | ".join("n/a" if math.isnan(v) else f"{v:.3f}" for v in row) + " |")
    lines.append(f"| Spearman rho with IRS ({len(result.encoders)} encoders) | "
                 + " | ".join("n/a" if math.isnan(r) else f"{r:.2f}" for r in result.rho) + " |")
    return "\n".join(lines) + "\n"


@exits_2_on_user_error
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help=f"a folder of <model>.json results of {PROTOCOL} "
                                                    "(default: the shipped rows)")
    parser.add_argument("--add", action="append", default=[], metavar="JSON", help="more results (repeatable)")
    parser.add_argument("--plan", action="append", default=None, metavar="PLAN",
                        help=f"the runs this plan trained (repeatable; default {' and '.join(PLANS)}); yours (--add) "
                             "are always shown")
    args = parser.parse_args(argv)
    from factorbench.benchmark.results import added_models, reference_results

    plans = PLANS if args.plan is None else tuple(args.plan)
    results = reference_results(PROTOCOL, args.dir, add=args.add)
    check_plan_names(results, plans)
    result = irs_comparison(results, plans, yours=added_models(args.add))
    if not result.encoders:
        print(f"No encoder of {', '.join(plans)} is collected yet.")
        return 0
    print(format_irs_comparison(result), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
