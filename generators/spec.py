"""Dataset specs: the frozen, JSON-serialisable description whose hash identifies the data."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from .errors import FactorbenchError
from .factors import Factor


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal content gives equal text (and hash)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class DatasetSpec:
    """What to generate: generator name and version, parameters, seed, size and factors."""

    generator: str
    version: str
    params: Mapping[str, Any]
    seed: int
    n: int
    image_shape: tuple[int, int, int]
    factors: tuple[Factor, ...]
    splits: tuple[Mapping[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        # canonical JSON values (tuples become lists), so a spec equals its JSON round trip
        object.__setattr__(self, "params", json.loads(canonical_json(dict(sorted(self.params.items())))))
        object.__setattr__(self, "image_shape", tuple(int(s) for s in self.image_shape))
        object.__setattr__(self, "factors", tuple(self.factors))
        object.__setattr__(self, "splits", tuple(json.loads(canonical_json(dict(s))) for s in self.splits))
        if self.n < 1:
            raise FactorbenchError(f"a dataset needs at least one sample, got n={self.n}")

    def __hash__(self) -> int:
        return hash(self.hash())

    @property
    def factor_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.factors)

    @property
    def is_grid(self) -> bool:
        return all(f.is_grid for f in self.factors)

    def to_dict(self) -> dict[str, Any]:
        return {
            "generator": self.generator,
            "version": self.version,
            "params": dict(self.params),
            "seed": self.seed,
            "n": self.n,
            "image_shape": list(self.image_shape),
            "factors": [f.to_dict() for f in self.factors],
            "splits": [dict(s) for s in self.splits],
        }

    def to_json(self) -> str:
        return canonical_json(self.to_dict())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "DatasetSpec":
        try:
            return cls(d["generator"], d["version"], d["params"], int(d["seed"]), int(d["n"]),
                       tuple(d["image_shape"]), tuple(Factor.from_dict(f) for f in d["factors"]),
                       tuple(d.get("splits", ())))
        except (KeyError, TypeError, ValueError) as exc:
            raise FactorbenchError(f"not a valid dataset spec ({exc!r})") from exc

    @classmethod
    def from_json(cls, text: str) -> "DatasetSpec":
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as exc:
            raise FactorbenchError(f"dataset spec is not valid JSON ({exc})") from exc

    def hash(self) -> str:
        """sha256 of the canonical JSON."""
        return sha256_text(self.to_json())
