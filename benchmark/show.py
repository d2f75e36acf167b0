"""A labelled grid of samples along each factor of a dataset file."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.outputs import check_output_file, save_figure

from .dataset import Dataset, load


def traversal_rows(ds: Dataset, per_factor: int) -> list[np.ndarray]:
    """For each factor, ``per_factor`` sample indices along it.

    Grid factors: evenly spaced classes of that factor, every other factor held at the class of
    sample 0 (an exact traversal). Other factors: the samples nearest to evenly spaced values of
    the factor (the other factors vary).
    """
    factors, classes = ds.factors, ds.factor_classes
    rows = []
    for k, factor in enumerate(ds.spec.factors):
        if factor.is_grid and classes is not None:
            targets = np.unique(np.linspace(0, len(factor.values) - 1, per_factor).round().astype(int))
            others = np.delete(np.arange(classes.shape[1]), k)
            same = np.all(classes[:, others] == classes[0, others], axis=1)
            cand = np.flatnonzero(same)
            pos = {int(c): int(r) for r, c in zip(cand, classes[cand, k])}
            rows.append(np.array([pos[t] for t in targets if t in pos], dtype=np.int64))
        else:
            targets = np.linspace(factor.low, factor.high, per_factor)
            rows.append(np.array([int(np.argmin(np.abs(factors[:, k] - t))) for t in targets], dtype=np.int64))
    return rows


#: the most images per factor a sheet shows (a sheet of K x 64 labelled images is already large)
MAX_PER_FACTOR = 64


def show(path: str | os.PathLike, out: str | os.PathLike, per_factor: int = 8, force: bool = False) -> Path:
    """Write a PNG with one row per factor: images along that factor, labelled with the factor values."""
    from .plots import pyplot

    if not 2 <= per_factor <= MAX_PER_FACTOR:
        raise FactorbenchError(f"--per-factor must be between 2 and {MAX_PER_FACTOR}, got {per_factor}")
    out = check_output_file(out, force)
    with load(path) as ds:
        rows = traversal_rows(ds, per_factor)
        classes = ds.factor_classes
        k = len(rows)
        fig, axes = pyplot().subplots(k, per_factor, figsize=(1.3 * per_factor + 1.2, 1.5 * k + 0.5), squeeze=False)
        for r, (factor, idx) in enumerate(zip(ds.spec.factors, rows)):
            images = ds.images[idx]
            for c in range(per_factor):
                ax = axes[r, c]
                ax.set_xticks([])
                ax.set_yticks([])
                if c < len(idx):
                    ax.imshow(images[c].squeeze(), cmap="gray", vmin=0, vmax=255, interpolation="nearest")
                    value = f"{ds.factors[idx[c], r]:.3g}"
                    ax.set_title(f"j={classes[idx[c], r]} ({value})" if factor.is_grid else value, fontsize=8)
                else:
                    ax.axis("off")
            axes[r, 0].set_ylabel(factor.name, fontsize=9)
        fig.suptitle(f"{ds.spec.generator} v{ds.spec.version}  ({ds.path.name}, n={len(ds)})", fontsize=10)
        fig.tight_layout()
        save_figure(fig, out, dpi=100)
    return out
