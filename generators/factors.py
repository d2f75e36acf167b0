"""Factors of variation: a name, a kind and a domain (an interval or the values of a grid)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .errors import FactorbenchError

FactorKind = Literal["continuous", "categorical", "cyclic"]
FACTOR_KINDS: tuple[str, ...] = ("continuous", "categorical", "cyclic")


@dataclass(frozen=True)
class Factor:
    """One generative factor.

    ``values`` is set for grid factors (the sorted list of values the factor takes); otherwise the
    domain is the interval ``[low, high]`` (``[low, high)`` for cyclic factors). Cyclic factors
    carry their ``period``.
    """

    name: str
    kind: FactorKind
    low: float | None = None
    high: float | None = None
    values: tuple[float, ...] | None = None
    period: float | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if self.kind not in FACTOR_KINDS:
            raise FactorbenchError(f"factor {self.name!r}: kind must be one of {FACTOR_KINDS}, got {self.kind!r}")
        if self.values is not None:
            vals = tuple(float(v) for v in self.values)
            if len(vals) < 2 or any(b <= a for a, b in zip(vals, vals[1:])):
                raise FactorbenchError(f"factor {self.name!r}: grid values must be at least two, strictly increasing")
            object.__setattr__(self, "values", vals)
            object.__setattr__(self, "low", vals[0] if self.low is None else float(self.low))
            object.__setattr__(self, "high", vals[-1] if self.high is None else float(self.high))
        elif self.low is None or self.high is None or not self.high > self.low:
            raise FactorbenchError(f"factor {self.name!r}: give grid values or an interval low < high")
        if self.kind == "cyclic" and (self.period is None or self.period <= 0):
            raise FactorbenchError(f"factor {self.name!r}: a cyclic factor needs a positive period")

    @classmethod
    def cyclic_grid(cls, name: str, steps: int, description: str = "") -> "Factor":
        """A cyclic factor over ``steps`` group elements; element j is the angle 2*pi*j/steps."""
        values = tuple(2.0 * math.pi * j / steps for j in range(steps))
        return cls(name, "cyclic", low=0.0, high=2.0 * math.pi, values=values, period=2.0 * math.pi,
                   description=description)

    @property
    def is_grid(self) -> bool:
        return self.values is not None

    @property
    def num_values(self) -> int | None:
        return None if self.values is None else len(self.values)

    def classes_of(self, values: np.ndarray) -> np.ndarray:
        """Index of the nearest grid value for each value (cyclic distance for cyclic factors)."""
        if self.values is None:
            raise FactorbenchError(f"factor {self.name!r} is not a grid factor and has no classes")
        grid = np.asarray(self.values)
        diff = np.asarray(values, dtype=np.float64)[:, None] - grid[None, :]
        if self.kind == "cyclic":
            diff = np.remainder(diff + self.period / 2, self.period) - self.period / 2
        return np.argmin(np.abs(diff), axis=1).astype(np.int64)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "low": self.low, "high": self.high}
        if self.values is not None:
            out["values"] = list(self.values)
        if self.period is not None:
            out["period"] = self.period
        if self.description:
            out["description"] = self.description
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Factor":
        values = d.get("values")
        return cls(d["name"], d["kind"], low=d.get("low"), high=d.get("high"),
                   values=None if values is None else tuple(values), period=d.get("period"),
                   description=d.get("description", ""))

    def describe(self) -> str:
        """One line: name, kind and domain."""
        if self.values is not None:
            dom = f"grid of {len(self.values)} values in [{self.low:.4g}, {self.high:.4g}]"
        else:
            right = ")" if self.kind == "cyclic" else "]"
            dom = f"[{self.low:.4g}, {self.high:.4g}{right}"
        per = f", period {self.period:.4g}" if self.period is not None else ""
        desc = f"  {self.description}" if self.description else ""
        return f"{self.name:<18} {self.kind:<11} {dom}{per}{desc}"


def subgrid_factors(factors: Sequence[Factor], step: Sequence[int], owner: str = "step") -> tuple[Factor, ...]:
    """The factors of a sub-grid: factor k keeps ``values[::step[k]]`` (at least two values). Raises a
    clear error when ``step`` does not fit the factors (a non-grid factor, a wrong length, too coarse).

    Used by the large grid datasets' ``step`` parameter (a smaller file of the same images) and by a
    protocol's evaluation sub-grid (:mod:`factorbench.benchmark.subgrid`)."""
    factors = tuple(factors)
    step = tuple(step)
    if any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in step):
        raise FactorbenchError(f"{owner}: strides must be positive integers, one per factor; got {step}")
    if len(step) != len(factors):
        raise FactorbenchError(f"{owner}: {len(step)} strides given but the dataset has {len(factors)} factors "
                               f"({', '.join(f.name for f in factors)}); give one stride per factor")
    out = []
    for f, s in zip(factors, step):
        if f.values is None:
            raise FactorbenchError(f"{owner}: strides need grid factors; {f.name!r} is not one")
        values = f.values[::s]
        if len(values) < 2:
            raise FactorbenchError(f"{owner}: stride {s} leaves {len(values)} value of factor {f.name!r} "
                                   f"({len(f.values)} values); use at most {len(f.values) - 1}")
        out.append(Factor(f.name, f.kind, low=f.low, high=f.high, values=values, period=f.period,
                          description=f.description))
    return tuple(out)
