"""Shared pieces of every metric: input validation, factor discretisation and result objects.

Conventions (the same for every metric in this package):

- ``codes`` is a float array (N, D): one row per sample, one column per code dimension. A constant
  column is legal (it carries no information) and never crashes a metric.
- ``factors`` is a float array (N, K) of ground-truth factor values, in the same row order.
- ``classes`` (optional) is an int array (N, K) of factor classes (grid indices). Metrics that need
  discrete factors use it as is; without it they discretise ``factors`` with :func:`factor_classes`.
- ``kinds`` (optional) is one of ``"continuous"``, ``"categorical"``, ``"cyclic"`` per factor
  (default: every factor continuous).
- ``seed`` is the only source of randomness (``numpy.random.default_rng(seed)``).

Every metric returns a frozen dataclass deriving from :class:`MetricResult`: the headline scalars
plus the matrices behind them; ``to_dict()`` gives plain JSON-ready Python values. Its ``warnings``
say when a score rests on something the numbers alone do not show: code dimensions that are constant
on the samples scored (:func:`constant_code_warnings`), codes a metric's own rule left out (the
FactorVAE score's pruning).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.factors import FACTOR_KINDS

__all__ = [
    "MetricInputError",
    "MetricResult",
    "check_classes",
    "check_codes",
    "check_factors",
    "check_kinds",
    "check_posterior",
    "check_same_length",
    "check_seed",
    "constant_code_warnings",
    "constant_dims",
    "constant_dims_warnings",
    "discrete_factors",
    "factor_classes",
    "with_warnings",
]


class MetricInputError(FactorbenchError, ValueError):
    """Inputs a metric cannot score: the message says which argument and what to do."""


# --------------------------------------------------------------------------- results


def _plain(value: Any) -> Any:
    """JSON-ready form of a result field: arrays become (nested) lists, numpy scalars Python scalars."""
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, (np.floating, float)):
        return float(value) if np.isfinite(value) else None  # strict JSON: NaN/inf become null
    if isinstance(value, (np.integer, np.bool_)):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, MetricResult):
        return value.to_dict()
    return value


@dataclass(frozen=True, eq=False)
class MetricResult:
    """Base of every metric's result. Subclasses are frozen dataclasses; ``headline`` names the fields
    that are the metric's headline scalars (in the order a table shows them)."""

    headline: ClassVar[tuple[str, ...]] = ()

    #: what the reader of the score should know (constant codes, pruned codes), one sentence each
    warnings: tuple[str, ...] = field(default=(), kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain Python values (floats, ints, nested lists, dicts; NaN as None)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def scalars(self) -> dict[str, float]:
        """The headline scalars, by name."""
        return {name: float(getattr(self, name)) for name in self.headline}


def _listed(indices: Sequence[int], limit: int = 20) -> str:
    shown = ", ".join(str(int(i)) for i in indices[:limit])
    return f"[{shown}{', ...' if len(indices) > limit else ''}]"


def constant_dims(codes: np.ndarray, logvar: np.ndarray | None = None) -> np.ndarray:
    """A boolean mask of the code dimensions (columns of ``codes``, the last axis) that take a single value on
    every sample (with ``logvar``: whose posterior mean and log-variance both do)."""
    flat = np.asarray(codes).reshape(-1, np.shape(codes)[-1])
    constant = np.all(flat == flat[:1], axis=0)
    if logvar is not None:
        lv = np.asarray(logvar).reshape(flat.shape)
        constant &= np.all(lv == lv[:1], axis=0)
    return constant


def constant_code_warnings(codes: np.ndarray, name: str = "code", logvar: np.ndarray | None = None
                           ) -> tuple[str, ...]:
    """A warning naming the code dimensions (columns of ``codes``, the last axis) that take a single
    value on every sample (with ``logvar``: whose posterior mean and log-variance both do), or ``()``."""
    shape = np.shape(codes)
    return constant_dims_warnings(np.flatnonzero(constant_dims(codes, logvar)), shape[-1],
                                  int(np.prod(shape[:-1])), name)


def constant_dims_warnings(dims: Sequence[int], total: int, n: int, name: str = "code") -> tuple[str, ...]:
    """The warning of :func:`constant_code_warnings` for known constant dimensions ``dims`` of
    ``total``, over ``n`` samples (``()`` when there are none)."""
    if len(dims) == 0:
        return ()
    return (f"{len(dims)} of {total} {name} dimensions are constant on the {n} samples scored "
            f"(dimension{'s' if len(dims) > 1 else ''} {_listed(dims)}): they carry no information, and the "
            "score treats them as unused",)


def with_warnings(result: MetricResult, warnings: Sequence[str]) -> MetricResult:
    """``result`` with ``warnings`` appended to its own (the same object when there are none)."""
    warnings = tuple(w for w in warnings if w not in result.warnings)
    if not warnings:
        return result
    return dataclasses.replace(result, warnings=result.warnings + warnings)


# --------------------------------------------------------------------------- validation


def _as_float_2d(name: str, array: Any, what: str) -> np.ndarray:
    try:
        a = np.asarray(array)
    except Exception as exc:  # ragged lists and the like
        raise MetricInputError(f"{name} must be a numeric array {what}: {exc}") from exc
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise MetricInputError(f"{name} must be a numeric array {what}, got dtype {a.dtype}")
    if np.iscomplexobj(a):
        raise MetricInputError(f"{name} must be real-valued, got dtype {a.dtype}")
    if a.ndim != 2:
        hint = " (reshape a single column with x[:, None])" if a.ndim == 1 else ""
        raise MetricInputError(f"{name} must be 2-D {what}, got shape {a.shape}{hint}")
    if a.shape[1] == 0:
        raise MetricInputError(f"{name} has no columns: shape {a.shape}")
    a = a.astype(np.float64, copy=False)
    if not np.isfinite(a).all():
        bad = np.argwhere(~np.isfinite(a))[0]
        raise MetricInputError(
            f"{name} holds NaN or inf (first at row {bad[0]}, column {bad[1]}); "
            "remove or fix those samples before scoring")
    return a


def check_codes(codes: Any, name: str = "codes", min_samples: int = 2) -> np.ndarray:
    """``codes`` as float64 (N, D), finite, with at least ``min_samples`` rows."""
    a = _as_float_2d(name, codes, "of shape (N, D) (samples x code dimensions)")
    if a.shape[0] < min_samples:
        raise MetricInputError(f"{name} has {a.shape[0]} samples; a metric needs at least {min_samples}")
    return a


def check_factors(factors: Any, n: int | None = None, name: str = "factors",
                  allow_constant: bool = False) -> np.ndarray:
    """``factors`` as float64 (N, K), finite, N equal to ``n`` if given, no constant column
    (a constant factor cannot be predicted or normalised; drop it) unless ``allow_constant``."""
    a = _as_float_2d(name, factors, "of shape (N, K) (samples x factors)")
    if n is not None and a.shape[0] != n:
        raise MetricInputError(f"{name} has {a.shape[0]} rows but the codes have {n}; "
                               "give one row of factors per code, in the same order")
    if a.shape[0] < 2:
        raise MetricInputError(f"{name} has {a.shape[0]} samples; a metric needs at least 2")
    if not allow_constant:
        constant = np.flatnonzero(np.all(a == a[:1], axis=0))
        if constant.size:
            raise MetricInputError(
                f"{name} column(s) {constant.tolist()} are constant on these samples; a constant factor "
                "cannot be scored: drop the column(s) or use samples where the factor varies")
    return a


def check_classes(classes: Any, shape: tuple[int, int], name: str = "classes") -> np.ndarray:
    """``classes`` as int64 (N, K) of non-negative class indices, with the factors' shape."""
    a = np.asarray(classes)
    if a.dtype == np.bool_:
        a = a.astype(np.int64)
    if not np.issubdtype(a.dtype, np.integer):
        if np.issubdtype(a.dtype, np.floating) and np.isfinite(a).all() and np.all(a == np.round(a)):
            a = a.astype(np.int64)
        else:
            raise MetricInputError(f"{name} must hold integer class indices, got dtype {a.dtype}")
    if a.shape != tuple(shape):
        raise MetricInputError(f"{name} has shape {a.shape}; expected {tuple(shape)} (one class per factor value)")
    if a.size and a.min() < 0:
        raise MetricInputError(f"{name} holds negative class indices; classes must be 0, 1, 2, ...")
    return a.astype(np.int64, copy=False)


def check_kinds(kinds: Sequence[str] | None, k: int) -> tuple[str, ...]:
    """One kind per factor; ``None`` means every factor is continuous."""
    if kinds is None:
        return ("continuous",) * k
    if isinstance(kinds, str):
        raise MetricInputError(f"kinds must be a sequence of {k} kind names, not the string {kinds!r}")
    kinds = tuple(kinds)
    if len(kinds) != k:
        raise MetricInputError(f"kinds has {len(kinds)} entries for {k} factors; give one kind per factor")
    for kind in kinds:
        if kind not in FACTOR_KINDS:
            raise MetricInputError(f"unknown factor kind {kind!r}; use one of {FACTOR_KINDS}")
    return kinds


def check_posterior(mu: Any, logvar: Any) -> tuple[np.ndarray, np.ndarray]:
    """A diagonal Gaussian posterior: ``mu`` and ``logvar`` float64 (N, D) of the same shape."""
    m = check_codes(mu, "mu")
    lv = check_codes(logvar, "logvar")
    if m.shape != lv.shape:
        raise MetricInputError(f"mu has shape {m.shape} but logvar has shape {lv.shape}; they must match")
    return m, lv


def check_same_length(**arrays: np.ndarray) -> int:
    """The common number of rows of the named arrays, or an error naming the mismatch."""
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f"{name}: {n}" for name, n in lengths.items())
        raise MetricInputError(f"sample counts differ ({listed}); give one row per sample in each")
    return next(iter(lengths.values()))


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise MetricInputError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def check_positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise MetricInputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


# --------------------------------------------------------------------------- discretisation


def equal_width_bins(x: np.ndarray, bins: int) -> np.ndarray:
    """Integer bin (0..bins-1) of each entry of every column of ``x`` (N, M), ``bins`` equal-width bins
    over the column's own min..max (the max falls in the last bin). A constant column is all zeros.
    As disentanglement_lib's ``_histogram_discretize``."""
    x = np.asarray(x, dtype=np.float64)
    lo = x.min(axis=0)
    span = x.max(axis=0) - lo
    safe = np.where(span > 0, span, 1.0)
    idx = np.floor((x - lo) / safe * bins).astype(np.int64)
    return np.clip(idx, 0, bins - 1)


def factor_classes(factors: np.ndarray, classes: np.ndarray | None = None, bins: int = 20,
                   max_values: int | None = None) -> np.ndarray:
    """Discrete labels (N, K) int64 of every factor, 0..n_k-1.

    ``classes`` given: used as they are (grid factors keep their own classes, never re-binned), only
    relabelled to 0..n_k-1. Otherwise a column with at most ``max_values`` distinct values (default
    ``bins``) is labelled by its distinct values; other columns are cut into ``bins`` equal-width bins
    over their range.
    """
    if classes is not None:
        out = np.empty(classes.shape, dtype=np.int64)
        for j in range(classes.shape[1]):
            out[:, j] = np.unique(classes[:, j], return_inverse=True)[1].ravel()
        return out
    max_values = bins if max_values is None else max_values
    out = np.empty(factors.shape, dtype=np.int64)
    for j in range(factors.shape[1]):
        values, inverse = np.unique(factors[:, j], return_inverse=True)
        if len(values) <= max_values:
            out[:, j] = inverse.ravel()
        else:
            out[:, j] = equal_width_bins(factors[:, j:j + 1], bins)[:, 0]
    return out


def discrete_factors(factors: Any, n: int, classes: Any = None, factor_bins: int = 20) -> np.ndarray:
    """Validated factors as discrete labels (N, K) int64: ``classes`` as given (relabelled 0..n_k-1),
    otherwise :func:`factor_classes` of ``factors`` (at most ``factor_bins`` distinct values kept,
    others cut into ``factor_bins`` equal-width bins). Every factor must take at least two classes."""
    y = check_factors(factors, n)
    factor_bins = check_positive_int("factor_bins", factor_bins, 2)
    if classes is not None:
        classes = check_classes(classes, y.shape)
    labels = factor_classes(y, classes, factor_bins)
    single = np.flatnonzero(labels.max(axis=0) == 0)
    if single.size:
        raise MetricInputError(
            f"classes column(s) {single.tolist()} hold a single class on these samples; a factor with one "
            "class cannot be scored: drop the column(s) or give the factors' own classes")
    return labels
