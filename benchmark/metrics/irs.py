"""Interventional Robustness Score (IRS).

Suter, Miladinović, Schölkopf & Bauer 2019, "Robustly Disentangled Causal Mechanisms: Validating Deep
Representations for Interventional Robustness" (ICML), Eq. (3) and appendix A, A.1
(``shared/papers/suter-2019-irs-appendix.txt``).

For a code dimension ``l`` and a factor ``i`` (the rest of the factors, ``\\i``, are the nuisances):

    PIDA_li(k, r)  = | E[z_l | do(g_i = k)] - E[z_l | do(g_i = k, g_\\i = r)] |
    MPIDA_li(k)    = sup_r PIDA_li(k, r)                      (or a quantile, as disentanglement_lib)
    EMPIDA_li      = E_k[ MPIDA_li(k) ]                       (k ~ p(g_i); or the plain mean over k)
    D_l            = max_i ( 1 - EMPIDA_li / sup_x | E[z_l] - z_l(x) | )
    IRS            = sum_l max_dev_l D_l / sum_l max_dev_l    (active codes; max_dev_l the normaliser)

Estimators of the interventional expectations (registry :data:`ESTIMATORS`):

- ``"crossed"`` (appendix A.1, noise-free crossed data): ``E[z | do(g_i = k)]`` is the mean code of the
  samples with ``g_i = k`` and each sample is its own interventional expectation, so the deviations
  are ``|mean_k - z(x)|`` over the samples ``x`` with ``g_i = k``.
- ``"importance"`` (appendix A, confounded data): ``E[z | do(g_i = k, g_\\i = r)]`` is the mean code of
  the cell ``(k, r)`` (nothing is left to adjust for) and ``E[z | do(g_i = k)] = sum_x w_x z(x)`` over
  the samples with ``g_i = k``, with ``w_x = p(g_\\i(x)) / (N p(g(x)))`` from observed frequencies,
  summed per cell to ``p(r)`` and self-normalised within ``k`` (so that ``k`` values seen with only
  part of the nuisance configurations still give a weighted mean). The deviations are
  ``|mean_k - cellmean(k, r)|`` over the cells ``(k, r)`` that occur.
- ``"auto"``: ``"crossed"`` when every combination of classes occurs equally often (a full crossed
  design), ``"importance"`` otherwise. On a full crossed design with one sample per combination the
  two estimators agree exactly.

Choices: D_l is floored at 0 (a code whose deviations within every factor's realisations exceed its
overall spread would otherwise score below 0); the normaliser is always the maximum deviation, also when
a quantile is asked for (as disentanglement_lib); constant codes are inactive and excluded. The
importance estimator scores interventional *expectations*: with many samples per cell it averages
variation that no factor explains, so a pure-noise code comes out robust (near 1) there, while the
crossed estimator, which takes each sample as its own expectation, scores it low.

All grouping is hash partitioning on integer keys (:func:`row_group_ids`), never pairwise loops: O(N)
for the means and maxima (plus the sorts inside ``np.unique`` where a key space is too large for a
dense table, and per-group sorts when a quantile below 1 is asked for).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._base import (MetricInputError, MetricResult, check_classes, check_codes, check_factors, check_kinds,
                    check_positive_int, check_seed, constant_code_warnings, equal_width_bins, factor_classes,
                    with_warnings)

__all__ = ["AVERAGES", "ESTIMATORS", "IRSResult", "WEIGHTINGS", "irs", "is_full_crossed", "row_group_ids"]

# Dense integer keys are compacted with a presence table when the key space is at most this many
# times the number of rows (or below _DENSE_FLOOR); larger key spaces go through np.unique.
_DENSE_FACTOR = 8
_DENSE_FLOOR = 1 << 16
# Combined keys stay well inside int64.
_KEY_LIMIT = 1 << 62
# Group-wise quantiles loop over contiguous blocks up to this many groups, and sort jointly beyond.
_LOOP_GROUPS = 256


# --------------------------------------------------------------------------- hash partitioning


def _compact(keys: np.ndarray, bound: int) -> tuple[np.ndarray, int]:
    """Relabel non-negative integer ``keys`` (all < ``bound``) to 0..G-1, keeping their order."""
    if bound <= max(_DENSE_FACTOR * keys.size, _DENSE_FLOOR):
        present = np.zeros(bound, dtype=bool)
        present[keys] = True
        remap = np.cumsum(present) - 1
        return remap[keys].astype(np.int64, copy=False), int(present.sum())
    uniques, inverse = np.unique(keys, return_inverse=True)
    return inverse.ravel().astype(np.int64, copy=False), int(uniques.size)


def row_group_ids(labels: np.ndarray, sizes: Sequence[int] | None = None) -> tuple[np.ndarray, int]:
    """Group id (0..G-1) of every row of the integer matrix ``labels`` (M, K): equal rows share an id.

    Columns are combined one at a time into mixed-radix keys (``key * n_j + label_j``, as
    ``np.ravel_multi_index``), compacted whenever the next key would leave int64, so that any number of
    columns works. ``sizes`` (the number of classes per column, labels in 0..n_j-1) defaults to
    ``labels.max(axis=0) + 1``. Returns ``(ids, G)``; ids are in lexicographic order of the rows.
    """
    labels = np.asarray(labels, dtype=np.int64)
    m, k = labels.shape
    if k == 0:
        return np.zeros(m, dtype=np.int64), 1 if m else 0
    sizes = [int(s) for s in (labels.max(axis=0) + 1 if sizes is None else sizes)]
    keys = labels[:, 0].copy()
    bound = sizes[0]
    for j in range(1, k):
        if bound * sizes[j] >= _KEY_LIMIT:
            keys, bound = _compact(keys, bound)
        keys = keys * sizes[j] + labels[:, j]
        bound *= sizes[j]
    return _compact(keys, bound)


def is_full_crossed(labels: np.ndarray) -> bool:
    """Whether the rows of ``labels`` (N, K), classes 0..n_j-1, hold every combination of classes
    equally often (a full crossed design, e.g. a dataset grid or repeats of one)."""
    labels = np.asarray(labels, dtype=np.int64)
    sizes = labels.max(axis=0) + 1
    total = math.prod(int(s) for s in sizes)
    if total > labels.shape[0]:
        return False
    ids, n_groups = row_group_ids(labels, sizes)
    if n_groups != total:
        return False
    counts = np.bincount(ids, minlength=n_groups)
    return bool(np.all(counts == counts[0]))


# --------------------------------------------------------------------------- group reductions


def _group_sums(values: np.ndarray, groups: np.ndarray, n_groups: int,
                weights: np.ndarray | None = None) -> np.ndarray:
    """Per-group sums (G, D) of the rows of ``values`` (M, D), optionally weighted per row."""
    out = np.empty((n_groups, values.shape[1]), dtype=np.float64)
    for d in range(values.shape[1]):
        w = values[:, d] if weights is None else values[:, d] * weights
        out[:, d] = np.bincount(groups, weights=w, minlength=n_groups)
    return out


def _group_order(groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Stable order of the rows by group (a radix sort when the group ids fit in 16 bits)."""
    small = groups.astype(np.int16) if n_groups < (1 << 15) else groups
    return np.argsort(small, kind="stable")


def _group_quantile(values: np.ndarray, groups: np.ndarray, n_groups: int, quantile: float | None) -> np.ndarray:
    """Per-group maximum (``quantile`` None or 1) or linear-interpolation quantile (``np.quantile``'s
    default method) of every column of ``values`` (M, D); every group 0..G-1 must be non-empty."""
    m, d = values.shape
    if quantile is None or quantile >= 1.0:
        out = np.full((n_groups, d), -np.inf)
        for j in range(d):
            np.maximum.at(out[:, j], groups, values[:, j])
        return out
    counts = np.bincount(groups, minlength=n_groups)
    starts = np.cumsum(counts) - counts
    if n_groups <= _LOOP_GROUPS:  # few large groups: partition each contiguous block, O(M) in all
        grouped = values[_group_order(groups, n_groups)]
        return np.stack([np.quantile(grouped[s:s + c], quantile, axis=0) for s, c in zip(starts, counts)])
    # Many small groups: sort every column by value, then stably by group, and read the order statistics.
    vt = np.ascontiguousarray(values.T)  # (D, M)
    by_value = np.argsort(vt, axis=1)
    small = groups.astype(np.int16) if n_groups < (1 << 15) else groups
    by_group = np.argsort(small[by_value], axis=1, kind="stable")
    position = quantile * (counts - 1)
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, counts - 1)
    t = position - low
    a = np.take_along_axis(vt, np.take_along_axis(by_value, by_group[:, starts + low], axis=1), axis=1)
    b = np.take_along_axis(vt, np.take_along_axis(by_value, by_group[:, starts + high], axis=1), axis=1)
    out = np.where(t >= 0.5, b - (b - a) * (1.0 - t), a + (b - a) * t)  # numpy's lerp
    return out.T


# --------------------------------------------------------------------------- estimators


@dataclass(frozen=True)
class _Deviations:
    """MPIDA per realisation of one factor: ``mpida`` (n_i, D) and the realisations' frequencies (n_i,)."""

    mpida: np.ndarray
    frequency: np.ndarray


def _crossed(codes: np.ndarray, labels: np.ndarray, quantile: float | None) -> list[_Deviations]:
    """Appendix A.1: per factor i and class k, deviations |mean(z | g_i = k) - z(x)| over the samples."""
    n = codes.shape[0]
    out = []
    for i in range(labels.shape[1]):
        g = labels[:, i]
        n_k = int(g.max()) + 1
        counts = np.bincount(g, minlength=n_k).astype(np.float64)
        means = _group_sums(codes, g, n_k) / counts[:, None]
        deviations = np.abs(codes - means[g])
        out.append(_Deviations(_group_quantile(deviations, g, n_k, quantile), counts / n))
    return out


def _importance(codes: np.ndarray, labels: np.ndarray, quantile: float | None) -> list[_Deviations]:
    """Appendix A: interventional means with frequency importance weights, on cell means (g_i, g_rest)."""
    n, k_factors = labels.shape
    sizes = labels.max(axis=0) + 1
    cell, n_cells = row_group_ids(labels, sizes)
    cell_counts = np.bincount(cell, minlength=n_cells).astype(np.float64)
    cell_means = _group_sums(codes, cell, n_cells) / cell_counts[:, None]
    cell_labels = np.empty((n_cells, k_factors), dtype=np.int64)
    cell_labels[cell] = labels
    out = []
    for i in range(k_factors):
        rest = np.delete(cell_labels, i, axis=1)
        rest_id, n_rest = row_group_ids(rest, np.delete(sizes, i))
        # Per sample w = p(r) / (N p(k, r)); summed over the n_kr samples of cell (k, r) this is p(r).
        p_rest = np.bincount(rest_id, weights=cell_counts, minlength=n_rest) / n
        weight = p_rest[rest_id]
        g = cell_labels[:, i]
        n_k = int(sizes[i])
        total = np.bincount(g, weights=weight, minlength=n_k)
        means = _group_sums(cell_means, g, n_k, weight) / total[:, None]
        deviations = np.abs(cell_means - means[g])
        frequency = np.bincount(g, weights=cell_counts, minlength=n_k) / n
        out.append(_Deviations(_group_quantile(deviations, g, n_k, quantile), frequency))
    return out


Estimator = Callable[[np.ndarray, np.ndarray, "float | None"], list[_Deviations]]

#: Estimators of the per-realisation deviations MPIDA_li(k), by name ("auto" picks one of them).
ESTIMATORS: dict[str, Estimator] = {"crossed": _crossed, "importance": _importance}

#: How MPIDA_li(k) is averaged over the realisations k of factor i into EMPIDA_li.
AVERAGES: dict[str, Callable[[_Deviations], np.ndarray]] = {
    # E_k under the observed p(g_i = k) (the expectation in the paper's EMPIDA).
    "frequency": lambda dev: dev.frequency @ dev.mpida,
    # Plain mean over the realisations (appendix A.1's 1/N_i sum; disentanglement_lib).
    "uniform": lambda dev: dev.mpida.mean(axis=0),
}

#: Weights of the per-code scores D_l in the overall score (active codes only).
WEIGHTINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "max_deviation": lambda max_dev: max_dev,  # disentanglement_lib
    "uniform": lambda max_dev: np.ones_like(max_dev),
}


# --------------------------------------------------------------------------- result


@dataclass(frozen=True, eq=False)
class IRSResult(MetricResult):
    """IRS of a representation.

    ``score``: weighted mean of ``code_scores`` over the active codes (0 when none is active).
    ``code_scores`` (D,): D_l = max_i irs_matrix[l, i], floored at 0; 0 for inactive codes.
    ``irs_matrix`` (D, K): 1 - EMPIDA_li / max_deviation_l (rows of inactive codes are 0).
    ``empida`` (D, K): EMPIDA_li, codes by rows and factors by columns (as disentanglement_lib).
    ``max_deviation`` (D,): the normaliser max_x |z_l(x) - mean(z_l)|.
    ``parents`` (D,): the factor i reaching D_l (-1 for inactive codes).
    ``active`` (D,): codes that are not constant; ``num_active`` their count.
    ``estimator``: the estimator used ("crossed" or "importance"); ``n_classes`` (K,) the number of
    classes of every factor as used; ``quantile``, ``average``, ``weighting``, ``n_samples`` as used.
    """

    headline: ClassVar[tuple[str, ...]] = ("score",)

    score: float
    code_scores: np.ndarray
    irs_matrix: np.ndarray
    empida: np.ndarray
    max_deviation: np.ndarray
    parents: np.ndarray
    active: np.ndarray
    num_active: int
    estimator: str
    n_classes: np.ndarray
    quantile: float | None
    average: str
    weighting: str
    n_samples: int


# --------------------------------------------------------------------------- metric


def _check_choice(name: str, value: Any, registry: dict[str, Any]) -> str:
    if not isinstance(value, str) or value not in registry:
        raise MetricInputError(f"unknown {name} {value!r}; use one of {sorted(registry)}")
    return value


def _check_quantile(quantile: Any) -> float | None:
    if quantile is None:
        return None
    if (isinstance(quantile, bool) or not isinstance(quantile, numbers.Real) or not np.isfinite(quantile)
            or not 0.0 < quantile <= 1.0):
        raise MetricInputError(f"quantile must be a number in (0, 1] or None (the maximum), got {quantile!r}; "
                               "disentanglement_lib uses 0.99")
    return float(quantile)


def _labels(factors: np.ndarray, classes: np.ndarray | None, kinds: tuple[str, ...], bins: int,
            rebin: bool) -> np.ndarray:
    """Discrete factor labels 0..n_j-1: grid classes as given, few-valued and categorical columns at their
    own values, other columns in ``bins`` equal-width bins; ``rebin`` bins everything (disentanglement_lib)."""
    if rebin:
        source = factors if classes is None else classes.astype(np.float64)
        return factor_classes(source, equal_width_bins(source, bins), bins)
    if classes is not None:
        return factor_classes(factors, classes, bins)
    labels = factor_classes(factors, None, bins)
    for j, kind in enumerate(kinds):
        if kind == "categorical":  # never merge categories into bins
            labels[:, j] = np.unique(factors[:, j], return_inverse=True)[1].ravel()
    return labels


def irs(codes: Any, factors: Any, *, classes: Any = None, kinds: Sequence[str] | None = None, bins: int = 20,
        quantile: float | None = None, estimator: str = "auto", seed: int = 0, max_samples: int | None = None,
        average: str = "frequency", weighting: str = "max_deviation", rebin: bool = False) -> IRSResult:
    """Interventional Robustness Score (Suter et al. 2019, Eq. 3 and appendix A; see the module docstring).

    ``codes`` (N, D); ``factors`` (N, K); ``classes`` (N, K) grid indices, used as they are (never
    re-binned); without them factors with at most ``bins`` distinct values (and categorical ones, per
    ``kinds``) keep their own values and the others are cut into ``bins`` equal-width bins.
    ``quantile``: None (the paper's supremum) or q in (0, 1] for the q-quantile of the deviations in
    each group (disentanglement_lib: 0.99); the normaliser is always the maximum deviation.
    ``estimator``: "auto", "crossed" or "importance". ``max_samples``: score a random subset of this
    many rows (drawn with ``seed``; the only randomness). ``average``: "frequency" (E over p(g_i)) or
    "uniform" (mean over realisations, as disentanglement_lib). ``weighting``: "max_deviation" (as
    disentanglement_lib) or "uniform" for the mean of D_l over active codes. ``rebin``: re-bin every
    factor (classes included) into ``bins`` equal-width bins, as disentanglement_lib does.
    """
    x = check_codes(codes)
    f = check_factors(factors, n=x.shape[0])
    n, d = x.shape
    k = f.shape[1]
    c = None if classes is None else check_classes(classes, f.shape)
    kinds_t = check_kinds(kinds, k)
    bins = check_positive_int("bins", bins, minimum=2)
    q = _check_quantile(quantile)
    if estimator != "auto":
        _check_choice("estimator", estimator, ESTIMATORS)
    _check_choice("average", average, AVERAGES)
    _check_choice("weighting", weighting, WEIGHTINGS)
    seed = check_seed(seed)
    if not isinstance(rebin, (bool, np.bool_)):
        raise MetricInputError(f"rebin must be True or False, got {rebin!r}")
    if max_samples is not None:
        max_samples = check_positive_int("max_samples", max_samples, minimum=2)
        if max_samples < n:
            rows = np.sort(np.random.default_rng(seed).choice(n, size=max_samples, replace=False))
            x, f = x[rows], f[rows]
            c = None if c is None else c[rows]
            n = max_samples

    labels = _labels(f, c, kinds_t, bins, bool(rebin))
    n_classes = labels.max(axis=0) + 1
    used = ("crossed" if is_full_crossed(labels) else "importance") if estimator == "auto" else estimator

    active = np.ptp(x, axis=0) > 0
    max_dev = np.where(active, np.abs(x - x.mean(axis=0)).max(axis=0), 0.0)
    empida = np.zeros((d, k))
    irs_matrix = np.zeros((d, k))
    code_scores = np.zeros(d)
    parents = np.full(d, -1, dtype=np.int64)
    score = 0.0
    if active.any():
        xa = x[:, active]
        deviations = ESTIMATORS[used](xa, labels, q)
        empida_a = np.stack([AVERAGES[average](dev) for dev in deviations], axis=1)  # (D_active, K)
        matrix_a = 1.0 - empida_a / max_dev[active, None]
        empida[active] = empida_a
        irs_matrix[active] = matrix_a
        code_scores[active] = np.clip(matrix_a.max(axis=1), 0.0, 1.0)
        parents[active] = matrix_a.argmax(axis=1)
        w = WEIGHTINGS[weighting](max_dev[active])
        score = float(np.clip(np.dot(w, code_scores[active]) / w.sum(), 0.0, 1.0))
    result = IRSResult(score=score, code_scores=code_scores, irs_matrix=irs_matrix, empida=empida,
                       max_deviation=max_dev, parents=parents, active=active, num_active=int(active.sum()),
                       estimator=used, n_classes=n_classes, quantile=q, average=average, weighting=weighting,
                       n_samples=n)
    return with_warnings(result, constant_code_warnings(x))
