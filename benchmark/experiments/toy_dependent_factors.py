"""Toy experiments of Almudévar & Ortega 2025, section 5 (their Figures 2 and 3).

Figure 2 (section 5.1): n factors made dependent by ``delta`` (1 = independent, 1/n = all equal) and a
representation entangled by ``alpha`` (1 = z_j a bijection of y_j, 1/n = every code the same mix);
Figure 3 (section 5.2): independent factors and a representation with a nuisance of size ``beta``.
Both come from :mod:`factorbench.benchmark.toy` (``dependent`` and ``nuisance``).

Every setting is scored with minimality and sufficiency and with the classic metrics present in
``factorbench.benchmark.metrics`` (MIG, SAP, modularity, DCI, IRS; a missing module is skipped with a
note). The script saves one plot per figure and a JSON file of every number into ``--out``, prints the
tables, and prints for each metric whether the behaviour the paper asks for (and, for the classic
metrics, the behaviour the paper reports) holds here:

- dependence sweep, desideratum (i): the score is 1 at alpha = 1 for every delta;
- dependence sweep, desideratum (ii): for fixed alpha < 1 the score increases as delta decreases;
- nuisance sweep: the score falls as beta grows (only minimality should; sufficiency stays flat).

Usage: python -m factorbench.benchmark.experiments.toy_dependent_factors --out results/toy [--n-samples 10000] [--seed 0]
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from factorbench.benchmark import toy
from factorbench.generators.errors import exits_2_on_user_error
from factorbench.generators.outputs import check_new_files, check_output_dir, save_figure, write_atomically

#: Tolerance on "equals 1", "flat" and on monotonicity (a plug-in estimate on a finite sample wobbles).
TOL = 0.02

# --------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class MetricSpec:
    """A metric as the script runs it: module and function in factorbench.benchmark.metrics, the headline
    fields to keep (higher is better for all of them), and how to call it on a toy data set."""

    module: str
    function: str
    fields: tuple[str, ...]
    call: Callable[[Callable[..., Any], toy.ToyData, argparse.Namespace], Any]


def _by_classes(fn: Callable[..., Any], data: toy.ToyData, args: argparse.Namespace) -> Any:
    return fn(data.codes, data.factors, classes=data.factor_classes)


def _by_classes_seeded(fn: Callable[..., Any], data: toy.ToyData, args: argparse.Namespace) -> Any:
    return fn(data.codes, data.factors, classes=data.factor_classes, seed=args.seed)


def _minimality(fn: Callable[..., Any], data: toy.ToyData, args: argparse.Namespace) -> Any:
    return fn(data.codes, data.factors, classes=data.factor_classes, n_samples=args.resample, seed=args.seed)


def _dci(fn: Callable[..., Any], data: toy.ToyData, args: argparse.Namespace) -> Any:
    """DCI needs a train/test split: a seeded 80/20 split of the toy samples."""
    order = np.random.default_rng(args.seed).permutation(len(data.codes))
    cut = int(0.8 * len(order))
    train, test = order[:cut], order[cut:]
    return fn(data.codes[train], data.factors[train], data.codes[test], data.factors[test],
              regressor=args.dci_regressor, seed=args.seed)


METRICS: dict[str, MetricSpec] = {
    "minimality_sufficiency": MetricSpec("minimality", "minimality_sufficiency", ("minimality", "sufficiency"),
                                         _minimality),
    "mig": MetricSpec("mig", "mig", ("score",), _by_classes),
    "sap": MetricSpec("sap", "sap", ("score",), _by_classes_seeded),
    "modularity": MetricSpec("modularity", "modularity", ("score",), _by_classes),
    "dci": MetricSpec("dci", "dci", ("disentanglement", "completeness"), _dci),
    "irs": MetricSpec("irs", "irs", ("score",), _by_classes_seeded),
}

#: What the paper reports for the classic metrics (section 5.1, "What results do we observe?", and
#: section 5.2), keyed by column name; checked against our numbers below.
PAPER_CLAIMS: dict[str, tuple[tuple[str, str], ...]] = {
    "mig": (("below_one_independent", "fails to reach 1 at alpha = 1, delta = 1"),
            ("below_max_dependent", "never attains its maximum at delta = 1/n")),
    "sap": (("below_one_independent", "fails to reach 1 at alpha = 1, delta = 1"),
            ("below_max_dependent", "never attains its maximum at delta = 1/n")),
    "modularity": (("below_max_dependent", "never attains its maximum at delta = 1/n"),),
    "dci.disentanglement": (("below_one_independent", "fails to reach 1 at alpha = 1, delta = 1"),
                            ("flat_in_delta", "remains largely invariant with respect to delta")),
    "dci.completeness": (("below_one_independent", "fails to reach 1 at alpha = 1, delta = 1"),
                         ("flat_in_delta", "remains largely invariant with respect to delta")),
}


def load_metrics() -> dict[str, tuple[MetricSpec, Callable[..., Any]]]:
    """Every metric in :data:`METRICS` whose module can be imported; a missing one is reported and skipped."""
    found = {}
    for name, spec in METRICS.items():
        try:
            module = importlib.import_module(f"factorbench.benchmark.metrics.{spec.module}")
            found[name] = (spec, getattr(module, spec.function))
        except (ImportError, AttributeError) as exc:
            print(f"note: skipping {name}: {exc}")
    return found


def column_names(metrics: dict[str, tuple[MetricSpec, Callable[..., Any]]]) -> list[str]:
    names = []
    for name, (spec, _) in metrics.items():
        names += [f if name == "minimality_sufficiency" else (name if len(spec.fields) == 1 else f"{name}.{f}")
                  for f in spec.fields]
    return names


def score_all(data: toy.ToyData, metrics: dict[str, tuple[MetricSpec, Callable[..., Any]]],
              args: argparse.Namespace) -> dict[str, float]:
    row: dict[str, float] = {}
    for name, (spec, fn) in metrics.items():
        result = spec.call(fn, data, args)
        for f in spec.fields:
            key = f if name == "minimality_sufficiency" else (name if len(spec.fields) == 1 else f"{name}.{f}")
            row[key] = float(getattr(result, f))
    return row


# --------------------------------------------------------------------------- checks


def dependence_checks(table: dict[tuple[float, float], dict[str, float]], alphas: list[float],
                      deltas: list[float], column: str) -> dict[str, Any]:
    """Desiderata (i) and (ii) of section 5.1 and the paper's observations, for one column."""
    value = {key: row[column] for key, row in table.items()}
    top_alpha, low_delta, high_delta = max(alphas), min(deltas), max(deltas)
    falling = sorted(deltas, reverse=True)  # delta from 1 (independent) down to 1/n
    increases, rises, drops = [], [], [0.0]
    for a in alphas:
        if a == top_alpha:
            continue
        seq = [value[(a, d)] for d in falling]
        drops += [x - b for x, b in zip(seq, seq[1:])]
        increases.append(all(b >= x - TOL for x, b in zip(seq, seq[1:])) and seq[-1] >= seq[0])
        rises.append(seq[-1] > seq[0] + TOL)
    at_one = [value[(top_alpha, d)] for d in deltas]
    spread_in_delta = max(max(value[(a, d)] for d in deltas) - min(value[(a, d)] for d in deltas)
                          for a in alphas if a != top_alpha)
    return {
        "one_at_alpha_1": all(v >= 1 - TOL for v in at_one),
        # non-decreasing (within TOL) along delta = 1 -> 1/n for every alpha < 1, rising for at least one
        "increases_as_delta_decreases": all(increases) and any(rises),
        "largest_drop_as_delta_decreases": max(drops),
        "below_one_independent": value[(top_alpha, high_delta)] < 1 - TOL,
        "below_max_dependent": value[(top_alpha, low_delta)] < 1 - TOL,
        "flat_in_delta": spread_in_delta <= 0.1,
    }


def nuisance_checks(rows: list[dict[str, float]], column: str) -> dict[str, bool]:
    seq = [row[column] for row in rows]
    return {
        "falls_with_beta": all(b <= x + TOL for x, b in zip(seq, seq[1:])) and seq[-1] < seq[0] - 0.05,
        "flat_in_beta": max(seq) - min(seq) <= TOL,
    }


def yes(flag: bool) -> str:
    return "yes" if flag else "NO"


# --------------------------------------------------------------------------- plots


def plot_dependence(table: dict[tuple[float, float], dict[str, float]], alphas: list[float], deltas: list[float],
                    columns: list[str], path: Path) -> None:
    from ..plots import pyplot

    plt = pyplot()

    cols = min(4, len(columns))
    rows = math.ceil(len(columns) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.8 * rows), squeeze=False, sharex=True)
    cmap = plt.get_cmap("coolwarm")
    for ax, column in zip(axes.flat, columns):
        for i, d in enumerate(sorted(deltas)):
            colour = cmap(i / max(len(deltas) - 1, 1))  # blue: delta = 1/n (dependent), red: delta = 1
            ax.plot(alphas, [table[(a, d)][column] for a in alphas], "o-", color=colour, ms=3,
                    label=f"delta={d:.3g}")
        ax.set_title(column, fontsize=9)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("alpha")
    for ax in list(axes.flat)[len(columns):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6)
    fig.suptitle("Dependent factors (Almudévar & Ortega 2025, Fig. 2)", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def plot_nuisance(betas: list[float], rows: list[dict[str, float]], columns: list[str], path: Path) -> None:
    from ..plots import pyplot

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    for column in columns:
        ax.plot(betas, [row[column] for row in rows], "o-", ms=3, label=column)
    ax.set_xlabel("beta")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    ax.set_title("Nuisance (Almudévar & Ortega 2025, Fig. 3)", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="directory for the plots and results.json")
    parser.add_argument("--n-samples", type=int, default=10_000, help="toy samples per setting (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the toy data and of every metric")
    parser.add_argument("--n", type=int, default=4, help="number of factors (the paper: 4)")
    parser.add_argument("--K", type=int, default=5, help="classes per factor (the paper: 5)")
    parser.add_argument("--steps", type=int, default=5, help="values of alpha, delta and beta each (default 5)")
    parser.add_argument("--resample", type=int, default=None,
                        help="minimality/sufficiency on this many rows drawn with replacement (the authors: 2000)")
    parser.add_argument("--dci-regressor", default="lasso", choices=("lasso", "forest", "gbt"),
                        help="DCI regressor: lasso (default), forest or gbt")
    parser.add_argument("--force", action="store_true", help="replace the files of an earlier run in --out")
    args = parser.parse_args(argv)
    if args.n_samples < 100 or args.steps < 3:
        parser.error("--n-samples must be >= 100 and --steps >= 3")
    return args


#: the files an experiment writes into ``--out``
OUTPUTS = ("fig2_dependent_factors.png", "fig3_nuisance.png", "results.json")


def run_experiment(argv: list[str] | None = None) -> dict[str, Any]:
    """Score every metric over the toy grids, print the tables and verdicts, write :data:`OUTPUTS` into
    ``--out``; returns what ``results.json`` holds. ``--out``'s files are checked before any work."""
    args = parse_args(argv)
    check_output_dir(args.out, "--out")
    check_new_files([args.out / name for name in OUTPUTS], args.force,
                    "pass --force to replace them or --out to write elsewhere")
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    metrics = load_metrics()
    columns = column_names(metrics)
    grid = [float(v) for v in np.linspace(1.0 / args.n, 1.0, args.steps)]
    betas = [float(v) for v in np.linspace(0.0, 1.0 - 1.0 / args.K, args.steps)]

    table: dict[tuple[float, float], dict[str, float]] = {}
    for a in grid:
        for d in grid:
            data = toy.dependent(n=args.n, K=args.K, delta=d, alpha=a, N=args.n_samples, seed=args.seed)
            table[(a, d)] = score_all(data, metrics, args)
    nuisance_rows = [score_all(toy.nuisance(n=args.n, K=args.K, beta=b, N=args.n_samples, seed=args.seed),
                               metrics, args) for b in betas]

    # ---- tables
    width = max(len(c) for c in columns) + 2
    print(f"\nDependent factors (section 5.1): n = {args.n}, K = {args.K}, N = {args.n_samples}")
    print("alpha  delta  " + "".join(f"{c:>{width}}" for c in columns))
    for (a, d), row in table.items():
        print(f"{a:5.3f}  {d:5.3f}  " + "".join(f"{row[c]:>{width}.3f}" for c in columns))
    print(f"\nNuisance (section 5.2): n = {args.n}, K = {args.K}, N = {args.n_samples}")
    print("beta   " + "".join(f"{c:>{width}}" for c in columns))
    for b, row in zip(betas, nuisance_rows):
        print(f"{b:5.3f}  " + "".join(f"{row[c]:>{width}.3f}" for c in columns))

    # ---- verdicts
    checks = {c: {**dependence_checks(table, grid, grid, c), **nuisance_checks(nuisance_rows, c)} for c in columns}
    print(f"\nExpected behaviour (tolerance {TOL}):")
    print(f"{'metric':<22}{'=1 at alpha=1':>15}{'rises as delta falls':>22}{'falls with beta':>17}{'flat in beta':>14}")
    for c in columns:
        ch = checks[c]
        print(f"{c:<22}{yes(ch['one_at_alpha_1']):>15}{yes(ch['increases_as_delta_decreases']):>22}"
              f"{yes(ch['falls_with_beta']):>17}{yes(ch['flat_in_beta']):>14}")
    print("\nThe paper's expectations for its own metrics:")
    verdicts: dict[str, Any] = {}
    for c, expectation in (("minimality", ("one_at_alpha_1", "increases_as_delta_decreases", "falls_with_beta")),
                           ("sufficiency", ("one_at_alpha_1", "increases_as_delta_decreases", "flat_in_beta"))):
        if c in checks:
            held = {e: checks[c][e] for e in expectation}
            verdicts[c] = held
            print(f"  {c}: " + ", ".join(f"{e} {yes(v)}" for e, v in held.items())
                  + f" (largest drop as delta decreases: {checks[c]['largest_drop_as_delta_decreases']:.3f})")
    print("The paper's observations on the classic metrics (Fig. 2; Fig. 3: only minimality reacts to beta):")
    for c, claims in PAPER_CLAIMS.items():
        if c not in checks:
            continue
        held = {label: checks[c][key] for key, label in claims}
        held["insensitive to beta"] = not checks[c]["falls_with_beta"]
        verdicts[c] = held
        print(f"  {c}: " + "; ".join(f"{label}: {'reproduced' if v else 'NOT reproduced'}" for label, v in held.items()))
    for c in columns:
        if c not in verdicts:
            verdicts[c] = {"insensitive to beta": not checks[c]["falls_with_beta"]}

    # ---- files
    plot_dependence(table, grid, grid, columns, args.out / "fig2_dependent_factors.png")
    plot_nuisance(betas, nuisance_rows, columns, args.out / "fig3_nuisance.png")
    results = {
        "settings": {"n": args.n, "K": args.K, "n_samples": args.n_samples, "seed": args.seed,
                     "resample": args.resample, "dci_regressor": args.dci_regressor, "tolerance": TOL},
        "metrics": columns,
        "dependent": [{"alpha": a, "delta": d, **row} for (a, d), row in table.items()],
        "nuisance": [{"beta": b, **row} for b, row in zip(betas, nuisance_rows)],
        "checks": checks,
        "verdicts": verdicts,
    }
    write_atomically(args.out / "results.json", json.dumps(results, indent=2))
    print(f"\nwrote {args.out / 'fig2_dependent_factors.png'}, {args.out / 'fig3_nuisance.png'}, "
          f"{args.out / 'results.json'} in {time.perf_counter() - start:.1f} s")
    return results


@exits_2_on_user_error
def main(argv: list[str] | None = None) -> int:
    run_experiment(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
