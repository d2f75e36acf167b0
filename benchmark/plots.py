"""PNG plots of the matrices behind an evaluation's scores (``factorbench evaluate --plots DIR``).

:data:`PLOTTERS` maps a metric name to a function drawing its result: Hinton-style diagrams of DCI
importance matrices (Eastwood & Williams 2018, Figure 3), heat maps of mutual-information,
IRS and minimality/sufficiency matrices, and the whitened 2-D projections of D_LSBD coloured by
group element (Tonnaer et al. 2022, Figure 4).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["PLOTTERS", "hinton", "plot_result"]


def _figure(ncols: int = 1, size: tuple[float, float] = (4.0, 3.6)):
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(size[0] * ncols, size[1]), squeeze=False)
    return plt, fig, axes[0]


def hinton(ax: Any, matrix: np.ndarray, xlabel: str, ylabel: str) -> None:
    """Hinton diagram: a square per entry, its area proportional to the entry (rows = codes)."""
    matrix = np.abs(np.asarray(matrix, dtype=float))
    top = matrix.max() if matrix.size and matrix.max() > 0 else 1.0
    ax.set_facecolor("0.85")
    for (i, j), w in np.ndenumerate(matrix):
        side = np.sqrt(w / top) * 0.9
        ax.add_patch(__import__("matplotlib").patches.Rectangle((j - side / 2, i - side / 2), side, side,
                                                                  facecolor="black", edgecolor="black"))
    ax.set_xlim(-0.5, matrix.shape[1] - 0.5)
    ax.set_ylim(matrix.shape[0] - 0.5, -0.5)
    ax.set_xticks(range(matrix.shape[1]))
    ax.set_yticks(range(matrix.shape[0]))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_aspect("equal")


def _heatmap(ax: Any, matrix: np.ndarray, xlabel: str, ylabel: str, title: str) -> None:
    matrix = np.asarray(matrix, dtype=float)
    image = ax.imshow(matrix, cmap="viridis", aspect="auto")
    ax.figure.colorbar(image, ax=ax, fraction=0.046)
    ax.set_xticks(range(matrix.shape[1]))
    ax.set_yticks(range(matrix.shape[0]))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)


Plotter = Callable[[dict[str, Any], str, list[str], Path], None]


def _save(plt: Any, fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _dci(result: dict[str, Any], title: str, names: list[str], path: Path) -> None:
    plt, fig, (ax,) = _figure()
    hinton(ax, np.asarray(result["importance"]), "factor", "code")
    ax.set_xticklabels(names or range(np.asarray(result["importance"]).shape[1]), rotation=45, fontsize=7)
    ax.set_title(f"{title}: D {result['disentanglement']:.2f}  C {result['completeness']:.2f}", fontsize=9)
    _save(plt, fig, path)


def _matrix(field: str, xlabel: str, ylabel: str) -> Plotter:
    def draw(result: dict[str, Any], title: str, names: list[str], path: Path) -> None:
        plt, fig, (ax,) = _figure()
        _heatmap(ax, np.asarray(result[field]), xlabel, ylabel, f"{title}: {field}")
        if xlabel == "factor" and names:
            ax.set_xticklabels(names, rotation=45, fontsize=7)
        _save(plt, fig, path)
    return draw


def _minimality(result: dict[str, Any], title: str, names: list[str], path: Path) -> None:
    plt, fig, axes = _figure(2)
    for ax, field in zip(axes, ("m", "s")):
        _heatmap(ax, np.asarray(result[field]), "code", "factor", f"{title}: {field}")
        if names:
            ax.set_yticklabels(names, fontsize=7)
    _save(plt, fig, path)


def _lsbd(result: dict[str, Any], title: str, names: list[str], path: Path) -> None:
    projections = np.asarray(result["projections"])  # (K, n_1, ..., n_K, 2)
    k = projections.shape[0]
    plt, fig, axes = _figure(k)
    for s, ax in enumerate(axes):
        points = projections[s]
        element = np.indices(points.shape[:-1])[s].ravel()
        flat = points.reshape(-1, 2)
        ax.scatter(flat[:, 0], flat[:, 1], c=element, cmap="hsv", s=3)
        ax.set_aspect("equal")
        name = names[s] if s < len(names) else f"subgroup {s}"
        ax.set_title(f"{title}: {name}, omega {result['omegas'][s]}, D {result['subgroup_scores'][s]:.3f}",
                     fontsize=8)
    _save(plt, fig, path)


def _lsbd_objects(result: dict[str, Any], title: str, names: list[str], path: Path) -> None:
    projections = np.asarray(result["projections"])  # (O, R, 2)
    shown = min(4, projections.shape[0])
    plt, fig, axes = _figure(shown)
    for o, ax in enumerate(axes):
        ax.scatter(projections[o, :, 0], projections[o, :, 1], c=np.arange(projections.shape[1]), cmap="hsv", s=6)
        ax.set_aspect("equal")
        ax.set_title(f"{title}: object {o}, omega {result['omegas'][o]}, D {result['object_scores'][o]:.3f}",
                     fontsize=8)
    _save(plt, fig, path)


#: metric name -> plotter of its result dict
PLOTTERS: dict[str, Plotter] = {
    "dci": _dci,
    "mig": _matrix("mutual_information", "factor", "code"),
    "modularity": _matrix("mutual_information", "factor", "code"),
    "irs": _matrix("irs_matrix", "factor", "code"),
    "minimality_sufficiency": _minimality,
    "d_lsbd": _lsbd,
    "d_lsbd_objects": _lsbd_objects,
}


def plot_result(result: Any, directory: str | os.PathLike) -> list[Path]:
    """Draw every metric of ``result`` (an EvaluationResult) that has a plotter; returns the PNG paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    names = list(result.dataset.get("factor_names", []))
    written = []
    for label, entry in result.metrics.items():
        plotter = PLOTTERS.get(entry["metric"])
        if plotter is None:
            continue
        path = directory / f"{result.protocol}.{label}.png"
        plotter(entry["result"], label, names, path)
        written.append(path)
    return written
