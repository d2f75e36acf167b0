"""Split specs: declarative, JSON-serialisable, hashed descriptions of index splits.

A split spec maps the factor table of a dataset to named index arrays. Kinds register themselves
by their ``kind`` name, so a spec read back from JSON finds its class without an if/elif chain.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import numpy as np

from .errors import FactorbenchError
from .spec import canonical_json, sha256_text

SPLIT_KINDS: dict[str, type["SplitSpec"]] = {}


@dataclass(frozen=True)
class SplitSpec(ABC):
    """Base class: subclasses set ``kind`` and implement :meth:`assign`."""

    kind: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            if cls.kind in SPLIT_KINDS:
                raise TypeError(f"split kind {cls.kind!r} is already registered")
            SPLIT_KINDS[cls.kind] = cls

    def to_dict(self) -> dict[str, Any]:
        body = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}
        return {"kind": self.kind, **body}

    def hash(self) -> str:
        return sha256_text(canonical_json(self.to_dict()))

    @abstractmethod
    def assign(self, factors: np.ndarray, factor_classes: np.ndarray | None) -> dict[str, np.ndarray]:
        """Return ``{split name: sorted int64 indices}`` for a dataset with these factor values."""


def split_from_dict(d: Mapping[str, Any]) -> SplitSpec:
    kind = d.get("kind")
    if kind not in SPLIT_KINDS:
        raise FactorbenchError(f"unknown split kind {kind!r}; known kinds: {', '.join(sorted(SPLIT_KINDS))}")
    cls = SPLIT_KINDS[kind]
    names = {f.name for f in dataclasses.fields(cls)}
    body = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k != "kind"}
    unknown = set(body) - names
    if unknown:
        raise FactorbenchError(f"split kind {kind!r} has no fields {sorted(unknown)}; fields are {sorted(names)}")
    return cls(**body)


@dataclass(frozen=True)
class RandomSplit(SplitSpec):
    """A seeded random partition into named parts of the given fractions (which sum to 1)."""

    kind: ClassVar[str] = "random"
    names: tuple[str, ...] = ("train", "validation", "test")
    fractions: tuple[float, ...] = (0.8, 0.1, 0.1)
    seed: int = 0

    def __post_init__(self) -> None:
        if len(self.names) != len(self.fractions) or len(set(self.names)) != len(self.names):
            raise FactorbenchError("random split: give one distinct name per fraction")
        if any(f < 0 for f in self.fractions) or abs(sum(self.fractions) - 1.0) > 1e-9:
            raise FactorbenchError(f"random split: fractions must be >= 0 and sum to 1, got {self.fractions}")

    def assign(self, factors: np.ndarray, factor_classes: np.ndarray | None) -> dict[str, np.ndarray]:
        n = len(factors)
        order = np.random.default_rng(self.seed).permutation(n)
        bounds = np.rint(np.cumsum((0.0,) + tuple(self.fractions)) * n).astype(np.int64)
        return {name: np.sort(order[a:b]).astype(np.int64)
                for name, a, b in zip(self.names, bounds[:-1], bounds[1:])}
