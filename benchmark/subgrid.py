"""The evaluation sub-grid of a protocol: every ``step[k]``-th value of each factor of a grid dataset.

A protocol on a large grid (dSprites' 737,280 images, MPI3D's 1,036,800) cannot encode every image
within seconds, yet its intervention metrics (BetaVAE, FactorVAE) need the code of every grid point
they draw. A sub-grid keeps both: the samples whose class of factor k is a multiple of ``step[k]``
form a smaller full grid (``ceil(n_k / step[k])`` values per factor, in the same C order as the file),
whose codes are all computed. Splits of the file are intersected with it, so a metric reads the
same kind of rows (the training part, a correlated sample, ...) restricted to the sub-grid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from factorbench.generators.factors import Factor, subgrid_factors

__all__ = ["subgrid_factors", "subgrid_rows", "subgrid_size", "positions_in"]


def subgrid_size(factors: Sequence[Factor], step: Sequence[int]) -> int:
    """Number of samples of the sub-grid: prod_k ceil(n_k / step[k])."""
    return math.prod(len(f.values) for f in subgrid_factors(factors, step))


def subgrid_rows(classes: np.ndarray, step: Sequence[int]) -> np.ndarray:
    """File rows (sorted) whose class of every factor k is a multiple of ``step[k]``."""
    classes = np.asarray(classes)
    keep = np.all(classes % np.asarray(step, dtype=np.int64)[None, :] == 0, axis=1)
    return np.flatnonzero(keep).astype(np.int64)


def positions_in(rows: np.ndarray, file_rows: np.ndarray) -> np.ndarray:
    """Positions in ``rows`` (sorted file rows) of the entries of ``file_rows`` that ``rows`` holds, in the
    order of ``file_rows`` (repeats kept: a correlated split may draw a row more than once)."""
    file_rows = np.asarray(file_rows, dtype=np.int64)
    pos = np.searchsorted(rows, file_rows)
    inside = pos < len(rows)
    inside[inside] = rows[pos[inside]] == file_rows[inside]
    return pos[inside].astype(np.int64)
