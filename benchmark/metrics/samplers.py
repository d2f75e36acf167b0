"""Samplers of factor values and their observations, for the intervention metrics (BetaVAE, FactorVAE).

Intervention metrics do not score a fixed table of codes: they draw factor values, hold some of them
fixed, and look at what an encoder makes of the observations. A :class:`FactorSampler` gives them the
two operations they need, as disentanglement_lib's ``GroundTruthData`` does:

- ``sample(n, rng)``: factor values (n, K) drawn i.i.d. from the dataset's factor distribution;
- ``observe(values)``: the observation of each row of values (images, or precomputed codes).

and one more that the metrics use where a sampler has it:

- ``hold_fixed(values, factor, value, rng)``: the rows of ``values`` redrawn so that factor
  ``factor[i]`` of row i takes ``value[i]`` and the other factors follow the data's distribution given
  it. With independent factors that is overwriting one column (:meth:`FactorSampler.hold_fixed`, and
  what the metrics do for a sampler without the method); with dependent factors the other factors must
  be drawn again.

Three samplers cover factorbench's data:

- :class:`GridSampler`: a full grid of observations (a grid dataset file, or codes precomputed on the
  grid), indexed in C order over the factors' grid values; ``sample`` draws uniform grid points.
- :class:`SplitSampler`: the same grid, but factor values drawn from a set of samples (e.g. a
  correlated split, whose factors are dependent), and held fixed by drawing, among those samples,
  the ones that share the fixed factor's value: the data-based reading of the intervention metrics
  (the FactorVAE score of Almudévar & Ortega's code, after Carbonneau et al.'s ``z_min_var``).
- :class:`GeneratorSampler`: any generator; ``sample`` draws each factor uniformly over its domain
  (its interval, or its grid values) and ``observe`` renders the images.

Both draw factor values with :func:`sample_factor_values`, so for a grid dataset the two give the same
values, and the same images, for the same random generator.
"""

from __future__ import annotations

import math
import numbers
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from factorbench.generators.factors import Factor

from ._base import MetricInputError

__all__ = [
    "FactorSampler",
    "GeneratorSampler",
    "GridSampler",
    "SplitSampler",
    "check_sampler",
    "hold_fixed",
    "grid_classes",
    "sample_factor_values",
]


# --------------------------------------------------------------------------- factor values


def sample_factor_values(factors: Sequence[Factor], n: int, rng: np.random.Generator) -> np.ndarray:
    """Values (n, K) float64, each factor drawn independently and uniformly over its domain: one of its
    grid values (each with probability 1/n_k), or a point of its interval ``[low, high)``. Columns are
    drawn one after the other from ``rng``."""
    out = np.empty((n, len(factors)), dtype=np.float64)
    for j, f in enumerate(factors):
        if f.is_grid:
            out[:, j] = np.asarray(f.values)[rng.integers(len(f.values), size=n)]
        else:
            out[:, j] = f.low + (f.high - f.low) * rng.random(n)
    return out


def _nearest_value(factor: Factor, values: np.ndarray) -> np.ndarray:
    """Index of the nearest grid value of ``factor`` for each value, in O(n log n_k): the same classes as
    :meth:`Factor.classes_of` (cyclic distance for cyclic factors) without its (n, n_k) distance matrix."""
    grid = np.asarray(factor.values, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    period = factor.period if factor.kind == "cyclic" else None
    if period is not None:
        v = grid[0] + np.remainder(v - grid[0], period)
    i = np.clip(np.searchsorted(grid, v), 1, len(grid) - 1)
    idx = np.where(v - grid[i - 1] <= grid[i] - v, i - 1, i)
    if period is not None:  # past the last value, the first one (a period on) may be nearer
        idx = np.where((v > grid[-1]) & (grid[0] + period - v < v - grid[-1]), 0, idx)
    return idx.astype(np.int64)


def grid_classes(factors: Sequence[Factor], values: np.ndarray) -> np.ndarray:
    """Grid class (index of the nearest grid value) of every entry of ``values`` (n, K): int64 (n, K)."""
    values = np.asarray(values, dtype=np.float64)
    out = np.empty(values.shape, dtype=np.int64)
    for j, f in enumerate(factors):
        out[:, j] = _nearest_value(f, values[:, j])
    return out


# --------------------------------------------------------------------------- the interface


class FactorSampler(ABC):
    """Draws factor values and observes them. Any object with these three members can be scored
    (subclassing is not required; :func:`check_sampler` checks them)."""

    @property
    @abstractmethod
    def num_factors(self) -> int:
        """K, the number of factors (columns of the values)."""

    @abstractmethod
    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Factor values (n, K), each row drawn i.i.d. from the dataset's factor distribution."""

    @abstractmethod
    def observe(self, values: np.ndarray) -> Any:
        """Observations (n, ...) of the rows of ``values`` (images, or codes)."""

    def hold_fixed(self, values: np.ndarray, factor: np.ndarray, value: np.ndarray,
                   rng: np.random.Generator) -> np.ndarray:
        """``values`` (n, K) with factor ``factor[i]`` of row i set to ``value[i]``: the conditional draw
        when factors are independent (it draws nothing from ``rng``)."""
        return _overwrite(values, factor, value)


def _overwrite(values: np.ndarray, factor: np.ndarray, value: np.ndarray) -> np.ndarray:
    out = np.array(values, dtype=np.float64)
    out[np.arange(len(out)), factor] = value
    return out


def hold_fixed(sampler: Any, values: np.ndarray, factor: np.ndarray, value: np.ndarray,
               rng: np.random.Generator) -> np.ndarray:
    """``sampler.hold_fixed`` where the sampler has it, else the independent rule (overwrite the column)."""
    method = getattr(sampler, "hold_fixed", None)
    if method is None:
        return _overwrite(values, factor, value)
    out = np.asarray(method(values, factor, value, rng), dtype=np.float64)
    if out.shape != np.shape(values):
        raise MetricInputError(f"sampler.hold_fixed returned shape {out.shape}; expected {np.shape(values)}")
    return out


def check_sampler(sampler: Any) -> int:
    """The sampler's number of factors, after checking that it has ``num_factors`` (an integer >= 2),
    ``sample`` and ``observe``."""
    missing = [name for name in ("num_factors", "sample", "observe") if not hasattr(sampler, name)]
    if missing:
        raise MetricInputError(
            f"sampler {type(sampler).__name__} lacks {', '.join(missing)}; give a FactorSampler "
            "(GridSampler, GeneratorSampler, or any object with num_factors, sample(n, rng) and observe(values))")
    for name in ("sample", "observe"):
        if not callable(getattr(sampler, name)):
            raise MetricInputError(f"sampler.{name} must be a method, got {type(getattr(sampler, name)).__name__}")
    k = sampler.num_factors
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 2:
        raise MetricInputError(f"sampler.num_factors must be an integer >= 2 (the metric classifies which factor "
                               f"was held fixed), got {k!r}")
    return int(k)


def _check_n(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise MetricInputError(f"n must be a non-negative integer, got {n!r}")
    return int(n)


def _check_values(values: Any, k: int) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] != k:
        raise MetricInputError(f"factor values must have shape (n, {k}), got {v.shape}")
    return v


# --------------------------------------------------------------------------- grid


class GridSampler(FactorSampler):
    """Observations on the full grid of ``factors`` (every factor a grid factor).

    ``observations`` holds one observation per grid point in C order over the factors' values (the
    first factor varies slowest): shape (prod n_k, ...) or (n_1, ..., n_K, ...). It may be a numpy
    array (images or codes) or any array-like indexable with an increasing integer array (factorbench's
    lazy ``ImageArray``, an h5py dataset). ``rows`` (optional, (prod n_k,) int) gives the row of
    ``observations`` that holds each grid point, for observations stored in another order.

    ``sample`` draws uniform grid points; ``observe`` maps values to their nearest grid point and
    returns that point's observation.
    """

    def __init__(self, factors: Sequence[Factor], observations: Any, *, rows: Any = None) -> None:
        factors = tuple(factors)
        if not factors or not all(isinstance(f, Factor) for f in factors):
            raise MetricInputError("GridSampler needs a non-empty sequence of Factor objects")
        not_grid = [f.name for f in factors if not f.is_grid]
        if not_grid:
            raise MetricInputError(f"factor(s) {not_grid} are not grid factors; GridSampler needs a full grid "
                                   "(use GeneratorSampler(generator) for datasets with continuous factors)")
        self.factors = factors
        self.grid_shape = tuple(len(f.values) for f in factors)
        size = math.prod(self.grid_shape)
        if not hasattr(observations, "__getitem__"):
            raise MetricInputError(f"observations must be an array or array-like, got {type(observations).__name__}")
        shape = tuple(getattr(observations, "shape", ()))
        if len(factors) > 1 and shape[:len(factors)] == self.grid_shape:
            observations = np.asarray(observations)
            observations = observations.reshape(size, *observations.shape[len(factors):])
        try:
            length = len(observations)
        except TypeError:
            raise MetricInputError(f"observations must have a length, got {type(observations).__name__}") from None
        if rows is None:
            if length != size:
                raise MetricInputError(
                    f"observations has {length} rows but the grid {self.grid_shape} has {size} points; give one "
                    f"observation per grid point in C order, shape ({size}, ...) or {self.grid_shape + ('...',)}")
            self.rows = None
        else:
            rows = np.asarray(rows)
            if rows.shape != (size,) or not np.issubdtype(rows.dtype, np.integer):
                raise MetricInputError(f"rows must be {size} integer row indices (one per grid point), "
                                       f"got shape {rows.shape} and dtype {rows.dtype}")
            if rows.min() < 0 or rows.max() >= length:
                raise MetricInputError(f"rows holds indices outside 0..{length - 1} (the observations' rows)")
            self.rows = rows.astype(np.int64)
        self.observations = observations

    @classmethod
    def from_dataset(cls, dataset: Any, codes: Any = None) -> "GridSampler":
        """A sampler over a grid dataset (a loaded file, a subset view or a path) that holds every grid
        point exactly once, in any order. Observations are its images, or ``codes`` (N, D) given one row
        per sample of ``dataset`` in its order (then ``observe`` returns codes and no encoder is needed)."""
        if isinstance(dataset, (str, os.PathLike)):
            from factorbench.benchmark.dataset import load

            dataset = load(dataset)
        for attr in ("spec", "factor_classes", "images"):
            if not hasattr(dataset, attr):
                raise MetricInputError(f"from_dataset needs a dataset loaded with factorbench.benchmark.dataset.load "
                                       f"(or a path to one); {type(dataset).__name__} has no {attr!r}")
        factors = tuple(dataset.spec.factors)
        not_grid = [f.name for f in factors if not f.is_grid]
        if not_grid:
            raise MetricInputError(
                f"{dataset.spec.generator} is not a grid dataset (factor(s) {not_grid} are continuous); use "
                f"GeneratorSampler(factorbench.generators.get({dataset.spec.generator!r})) instead")
        grid_shape = tuple(len(f.values) for f in factors)
        size = math.prod(grid_shape)
        classes = dataset.factor_classes
        if classes is None or len(classes) != size:
            n = len(dataset)
            raise MetricInputError(
                f"this {dataset.spec.generator} data holds {n} samples, not the full grid {grid_shape} of {size} "
                "points; give the whole dataset file (not a split)")
        flat = np.ravel_multi_index(tuple(np.asarray(classes, dtype=np.int64).T), grid_shape)
        if np.any(np.bincount(flat, minlength=size) != 1):
            raise MetricInputError(f"this {dataset.spec.generator} data does not hold every grid point exactly once; "
                                   "give the whole dataset file")
        rows = None if np.array_equal(flat, np.arange(size)) else np.argsort(flat)
        if codes is None:
            observations = dataset.images
        else:
            observations = np.asarray(codes)
            if observations.ndim != 2 or len(observations) != size:
                raise MetricInputError(f"codes must have shape ({size}, D), one row per sample of the dataset in "
                                       f"its order; got {observations.shape}")
        return cls(factors, observations, rows=rows)

    @property
    def num_factors(self) -> int:
        return len(self.factors)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return sample_factor_values(self.factors, _check_n(n), rng)

    def indices(self, values: np.ndarray) -> np.ndarray:
        """Row of ``observations`` holding the nearest grid point of each row of ``values``."""
        classes = grid_classes(self.factors, _check_values(values, self.num_factors))
        flat = np.ravel_multi_index(tuple(classes.T), self.grid_shape)
        return flat if self.rows is None else self.rows[flat]

    def observe(self, values: np.ndarray) -> Any:
        idx = self.indices(values)
        if isinstance(self.observations, np.ndarray):
            return self.observations[idx]
        # array-likes (lazy image files, h5py) read an increasing index array best: read each row once
        unique, inverse = np.unique(idx, return_inverse=True)
        return np.asarray(self.observations[unique])[inverse.ravel()]


class SplitSampler(GridSampler):
    """A :class:`GridSampler` whose factor values come from ``samples`` (n, K), the factor values of a
    set of grid points (a split, repeats allowed), instead of the uniform grid.

    ``sample`` draws rows of ``samples`` uniformly with replacement: the set's joint distribution,
    dependent factors included. ``hold_fixed`` draws, for each row, a row of ``samples`` whose factor
    k has the nearest grid value to the one asked for, uniformly among them: the conditional
    distribution of the other factors given factor k in the set. A value no sample has is an error.
    ``observe`` is the grid's.
    """

    def __init__(self, factors: Sequence[Factor], observations: Any, samples: Any, *, rows: Any = None) -> None:
        super().__init__(factors, observations, rows=rows)
        samples = _check_values(samples, self.num_factors)
        if not len(samples):
            raise MetricInputError("SplitSampler needs at least one sample to draw from")
        classes = grid_classes(self.factors, samples)
        #: the samples' factor values, each the grid value nearest to the one given
        self.values = np.stack([np.asarray(f.values, dtype=np.float64)[classes[:, j]]
                                for j, f in enumerate(self.factors)], axis=1)
        # per factor: the samples sorted by that factor's class, and where each class starts
        self._order = [np.argsort(classes[:, j], kind="stable") for j in range(self.num_factors)]
        self._starts = [np.searchsorted(classes[order, j], np.arange(n + 1))
                        for j, (order, n) in enumerate(zip(self._order, self.grid_shape))]

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.values[rng.integers(len(self.values), size=_check_n(n))]

    def hold_fixed(self, values: np.ndarray, factor: np.ndarray, value: np.ndarray,
                   rng: np.random.Generator) -> np.ndarray:
        values = _check_values(values, self.num_factors)
        factor, value = np.asarray(factor, dtype=np.int64), np.asarray(value, dtype=np.float64)
        out = np.empty_like(values)
        u = rng.random(len(values))
        for j, f in enumerate(self.factors):
            at = np.flatnonzero(factor == j)
            if not at.size:
                continue
            classes = _nearest_value(f, value[at])
            start, stop = self._starts[j][classes], self._starts[j][classes + 1]
            if np.any(stop == start):
                missing = np.unique(np.asarray(f.values)[classes[stop == start]])
                raise MetricInputError(f"no sample has {f.name} = {', '.join(f'{v:g}' for v in missing[:5])}; "
                                       "a value held fixed must be one the samples take")
            picked = start + np.minimum((u[at] * (stop - start)).astype(np.int64), stop - start - 1)
            out[at] = self.values[self._order[j][picked]]
        return out


# --------------------------------------------------------------------------- generator


class GeneratorSampler(FactorSampler):
    """Factor values drawn i.i.d. from each factor's domain of a factorbench generator (uniform over the
    interval, or over the grid values) and observed by rendering: ``observe = generator.render``."""

    def __init__(self, generator: Any) -> None:
        if not callable(getattr(generator, "factors", None)) or not callable(getattr(generator, "render", None)):
            raise MetricInputError(f"GeneratorSampler needs a factorbench generator (factorbench.generators.get(name));"
                                   f" {type(generator).__name__} has no factors() and render()")
        self.generator = generator
        self.factors = tuple(generator.factors())

    @property
    def num_factors(self) -> int:
        return len(self.factors)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return sample_factor_values(self.factors, _check_n(n), rng)

    def observe(self, values: np.ndarray) -> np.ndarray:
        return self.generator.render(_check_values(values, self.num_factors))
