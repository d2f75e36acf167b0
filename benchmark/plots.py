"""PNG plots of the matrices behind an evaluation's scores (``factorbench evaluate --plots DIR``).

:data:`PLOTTERS` maps a metric name to a function that draws its result as a matplotlib figure:
Hinton diagrams of DCI importance matrices (Eastwood & Williams 2018, Figure 3), heat maps of the
normalised mutual information behind MIG, of each code's information relative to its best factor
next to its modularity score, of the IRS and minimality/sufficiency matrices, and the whitened 2-D
projections of D_LSBD coloured by group element (Tonnaer et al. 2022, Figure 4).

Conventions, the same in every plot: a title names the metric label and its headline value; a matrix
has the factors along x (by name) and the codes along y (``z0``, ``z1``, ...); every colour has a
labelled colour bar; a plot that shows some of the items (objects) says which, and how many there are.
:func:`plot_result` refuses to overwrite existing files unless ``force`` is given, as result files do.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from factorbench.generators.outputs import check_new_files, save_figure

__all__ = ["PLOTTERS", "hinton", "plot_paths", "plot_result", "pyplot"]

Figure = Any
#: a plotter: (metric result dict, metric label, factor names) -> figure
Plotter = Callable[[dict[str, Any], str, list[str]], Figure]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display needed), imported whole: a Ctrl-C or SIGTERM
    during the first import is raised after it (:func:`~factorbench.generators.interrupts.interrupts_deferred`)."""
    from factorbench.generators.interrupts import interrupts_deferred

    with interrupts_deferred():
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    return plt


def _figure(ncols: int = 1, size: tuple[float, float] = (4.4, 3.8)) -> tuple[Figure, list[Any]]:
    fig, axes = pyplot().subplots(1, ncols, figsize=(size[0] * ncols, size[1]), squeeze=False)
    return fig, list(axes[0])


def _factor_names(names: list[str], k: int) -> list[str]:
    return [names[j] if j < len(names) else f"factor {j}" for j in range(k)]


def _code_names(d: int) -> list[str]:
    return [f"z{i}" for i in range(d)]


def _matrix_axes(ax: Any, shape: tuple[int, int], names: list[str]) -> None:
    """Factors along x (by name), codes along y (z0, z1, ...): the layout of every matrix plot."""
    ax.set_xticks(range(shape[1]))
    ax.set_xticklabels(_factor_names(names, shape[1]), rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(shape[0]))
    ax.set_yticklabels(_code_names(shape[0]), fontsize=7)
    ax.set_xlabel("factor")
    ax.set_ylabel("code")


def hinton(ax: Any, matrix: np.ndarray, xlabel: str = "factor", ylabel: str = "code") -> None:
    """Hinton diagram: a black square per entry, its area proportional to the entry (rows = codes)."""
    from matplotlib.patches import Rectangle

    matrix = np.abs(np.asarray(matrix, dtype=float))
    top = matrix.max() if matrix.size and matrix.max() > 0 else 1.0
    ax.set_facecolor("0.85")
    for (i, j), w in np.ndenumerate(matrix):
        side = np.sqrt(w / top) * 0.9
        ax.add_patch(Rectangle((j - side / 2, i - side / 2), side, side, facecolor="black", edgecolor="black"))
    ax.set_xlim(-0.5, matrix.shape[1] - 0.5)
    ax.set_ylim(matrix.shape[0] - 0.5, -0.5)
    ax.set_xticks(range(matrix.shape[1]))
    ax.set_yticks(range(matrix.shape[0]))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_aspect("equal")


def _heatmap(ax: Any, matrix: np.ndarray, names: list[str], title: str, colour: str,
             limits: tuple[float, float] | None = (0.0, 1.0)) -> None:
    """A codes x factors matrix as a heat map with a labelled colour bar."""
    matrix = np.asarray(matrix, dtype=float)
    vmin, vmax = limits if limits is not None else (None, None)
    image = ax.imshow(matrix, cmap="viridis", aspect="auto", vmin=vmin, vmax=vmax, interpolation="nearest")
    ax.figure.colorbar(image, ax=ax, fraction=0.046).set_label(colour, fontsize=8)
    _matrix_axes(ax, matrix.shape, names)
    ax.set_title(title, fontsize=9)


def _dci(result: dict[str, Any], label: str, names: list[str]) -> Figure:
    importance = np.asarray(result["importance"], dtype=float)
    fig, (ax,) = _figure()
    hinton(ax, importance)
    _matrix_axes(ax, importance.shape, names)
    measure = "NRMSE" if result.get("informativeness_measure", "nrmse") == "nrmse" else "accuracy"
    ax.set_title(f"{label}: importance of each code for each factor\n(square area proportional; "
                 f"{result.get('regressor', '')}, largest {importance.max():.2f})\n"
                 f"D {result['disentanglement']:.2f}  C {result['completeness']:.2f}  "
                 f"I ({measure}) {result['informativeness']:.2f}", fontsize=8)
    return fig


def _mig(result: dict[str, Any], label: str, names: list[str]) -> Figure:
    mi = np.asarray(result["mutual_information"], dtype=float)
    entropy = np.asarray(result["factor_entropy"], dtype=float)
    normalised = mi / np.where(entropy > 0, entropy, 1.0)[None, :]
    fig, (ax,) = _figure()
    _heatmap(ax, normalised, names, f"{label}: I(code; factor) / H(factor)\nMIG {result['score']:.3f} "
             "(gap between each column's top two)", "mutual information / factor entropy")
    gaps = np.asarray(result["factor_gaps"], dtype=float)
    ax.set_xticklabels([f"{n}\ngap {g:.2f}" for n, g in zip(_factor_names(names, mi.shape[1]), gaps)],
                       rotation=45, ha="right", fontsize=7)
    return fig


def _modularity(result: dict[str, Any], label: str, names: list[str]) -> Figure:
    mi = np.asarray(result["mutual_information"], dtype=float)
    best = mi.max(axis=1, keepdims=True)
    relative = np.where(best > 0, mi / np.where(best > 0, best, 1.0), 0.0)
    scores = np.asarray([np.nan if s is None else s for s in result["code_scores"]], dtype=float)
    fig, (left, right) = _figure(2)
    _heatmap(left, relative, names, f"{label}: each code's information about each factor,\nrelative to its "
             "best factor (a modular code has one 1 per row)", "I(code; factor) / max over factors")
    rows = np.arange(len(scores))
    right.barh(rows, np.nan_to_num(scores, nan=0.0), color="0.3")
    for i in np.flatnonzero(np.isnan(scores)):
        right.text(0.02, i, "no information (not counted)", va="center", fontsize=7)
    right.set_ylim(len(scores) - 0.5, -0.5)
    right.set_yticks(rows)
    right.set_yticklabels(_code_names(len(scores)), fontsize=7)
    right.set_xlim(0.0, 1.0)
    right.set_xlabel("modularity of the code")
    right.set_ylabel("code")
    right.set_title(f"{label}: per-code modularity, mean {result['score']:.3f}", fontsize=9)
    return fig


def _irs(result: dict[str, Any], label: str, names: list[str]) -> Figure:
    fig, (ax,) = _figure()
    _heatmap(ax, np.asarray(result["irs_matrix"], dtype=float), names,
             f"{label}: robustness of each code to interventions\non the other factors, IRS {result['score']:.3f}",
             "1 - EMPIDA / largest deviation")
    return fig


def _minimality(result: dict[str, Any], label: str, names: list[str]) -> Figure:
    fig, axes = _figure(2, size=(5.2, 4.0))
    titles = {"m": f"minimality {result['minimality']:.3f}: m = I(code; factor) / H(code)\n"
                   "(the mean over codes of each row's maximum)",
              "s": f"sufficiency {result['sufficiency']:.3f}: s = I(code; factor) / H(factor)\n"
                   "(the mean over factors of each column's maximum)"}
    colours = {"m": "share of the code's information about the factor",
               "s": "share of the factor's information in the code"}
    for ax, field in zip(axes, ("m", "s")):
        # stored (factors, codes) as in the paper; drawn codes x factors like every other matrix
        _heatmap(ax, np.asarray(result[field], dtype=float).T, names, titles[field], colours[field])
    fig.suptitle(f"{label}: minimality and sufficiency", fontsize=9)
    return fig


def _angle_colourbar(fig: Figure, ax: Any, points: Any, n: int, what: str) -> None:
    bar = fig.colorbar(points, ax=ax, fraction=0.046)
    bar.set_label(f"{what}: group element j (angle 2 pi j / {n})", fontsize=7)


def _scatter_axes(ax: Any) -> None:
    ax.set_aspect("equal")
    ax.set_xlabel("whitened principal component 1")
    ax.set_ylabel("whitened principal component 2")


def _lsbd(result: dict[str, Any], label: str, names: list[str]) -> Figure:
    projections = np.asarray(result["projections"], dtype=float)  # (K, n_1, ..., n_K, 2)
    k = projections.shape[0]
    fig, axes = _figure(k, size=(4.8, 4.2))
    for s, ax in enumerate(axes):
        points = projections[s]
        element = np.indices(points.shape[:-1])[s].ravel()
        flat = points.reshape(-1, 2)
        n = points.shape[s]
        name = _factor_names(names, k)[s]
        drawn = ax.scatter(flat[:, 0], flat[:, 1], c=element, cmap="hsv", vmin=0, vmax=n, s=3)
        _scatter_axes(ax)
        _angle_colourbar(fig, ax, drawn, n, name)
        ax.set_title(f"{label}: codes projected for {name}\n(the other factors' orbits averaged out)\n"
                     f"omega {result['omegas'][s]}, D_LSBD {result['subgroup_scores'][s]:.3f}", fontsize=8)
    fig.suptitle(f"{label}: D_LSBD {result['score']:.3f} (lower is better; a perfect code turns by omega "
                 "with the factor)", fontsize=9)
    return fig


def _lsbd_objects(result: dict[str, Any], label: str, names: list[str]) -> Figure:
    projections = np.asarray(result["projections"], dtype=float)  # (O, R, 2)
    scores = np.asarray(result["object_scores"], dtype=float)
    n_objects, n_rot = projections.shape[:2]
    order = np.argsort(scores, kind="stable")
    picks = list(dict.fromkeys([int(order[0]), int(order[len(order) // 2]), int(order[-1])]))
    roles = dict(zip(picks, ("best", "median", "worst") if len(picks) == 3 else ("best", "worst")))
    fig, axes = _figure(len(picks) + 1, size=(4.6, 4.2))
    first = axes[0]
    first.plot(np.arange(n_objects), scores, ".", color="0.2", markersize=4)
    first.axhline(result["score"], color="tab:red", linewidth=1, label=f"mean {result['score']:.3f}")
    first.set_xlabel(f"{_factor_names(names, 2)[0]} id")
    first.set_ylabel("D_LSBD of the object")
    first.legend(fontsize=7)
    first.set_title(f"{label}: D_LSBD of each of the {n_objects} objects", fontsize=8)
    rotation = _factor_names(names, 2)[1]
    for ax, o in zip(axes[1:], picks):
        drawn = ax.scatter(projections[o, :, 0], projections[o, :, 1], c=np.arange(n_rot), cmap="hsv",
                           vmin=0, vmax=n_rot, s=8)
        _scatter_axes(ax)
        _angle_colourbar(fig, ax, drawn, n_rot, rotation)
        ax.set_title(f"{roles[o]} object: {o}\nomega {result['omegas'][o]}, D_LSBD {scores[o]:.3f}", fontsize=8)
    fig.suptitle(f"{label}: {len(picks)} of {n_objects} objects shown (the best, median and worst by D_LSBD); "
                 f"mean D_LSBD {result['score']:.3f}", fontsize=9)
    return fig


#: metric name -> plotter of its result dict
PLOTTERS: dict[str, Plotter] = {
    "dci": _dci,
    "dci_of_samples": _dci,
    "mig": _mig,
    "modularity": _modularity,
    "irs": _irs,
    "minimality_sufficiency": _minimality,
    "d_lsbd": _lsbd,
    "d_lsbd_objects": _lsbd_objects,
}


def plot_paths(protocol: str, metrics: Iterable[tuple[str, str]], directory: str | os.PathLike) -> list[Path]:
    """The files :func:`plot_result` writes for ``metrics`` ((label, metric name) pairs) of ``protocol``."""
    return [Path(directory) / f"{protocol}.{label}.png" for label, metric in metrics if metric in PLOTTERS]


def check_plot_paths(paths: Iterable[Path], force: bool = False) -> None:
    """Refuse existing plot files unless ``force`` (as result files are refused)."""
    check_new_files(list(paths), force, "pass --force to replace them or --plots to write elsewhere")


def plot_result(result: Any, directory: str | os.PathLike, *, force: bool = False) -> list[Path]:
    """Draw every metric of ``result`` (an EvaluationResult) that has a plotter; returns the PNG paths.
    Existing files are replaced only with ``force`` (checked before anything is written)."""
    directory = Path(directory)
    entries = [(label, entry) for label, entry in result.metrics.items() if entry["metric"] in PLOTTERS]
    paths = plot_paths(result.protocol, [(label, entry["metric"]) for label, entry in entries], directory)
    check_plot_paths(paths, force)
    directory.mkdir(parents=True, exist_ok=True)
    names = list(result.dataset.get("factor_names", []))
    for path, (label, entry) in zip(paths, entries):
        fig = PLOTTERS[entry["metric"]](entry["result"], label, names)
        fig.tight_layout()
        save_figure(fig, path, dpi=100)
    return paths
