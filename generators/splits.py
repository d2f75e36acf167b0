"""Split specs: declarative, JSON-serialisable, hashed descriptions of index splits.

A split spec maps the factor table of a dataset to named index arrays (sorted int64; only the
``correlated`` kind draws with replacement, so its indices may repeat). Kinds register themselves by
their ``kind`` name, so a spec read back from JSON finds its class without an if/elif chain.

Kinds: ``random`` and ``ordered`` partitions; hold-outs (``gap``, ``composition``, ``interpolation``,
``extrapolation``, ``recombination``) that take a region of factor space out of a base partition and
keep it as a named split; and ``correlated`` training sets with dependent factors.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import operator
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from .errors import FactorbenchError
from .factors import Factor
from .spec import canonical_json, sha256_text

SPLIT_KINDS: dict[str, type["SplitSpec"]] = {}


@dataclass(frozen=True)
class FactorTable:
    """What a split sees of a dataset: factor values (N, K), grid classes or None, and the factors."""

    values: np.ndarray
    classes: np.ndarray | None
    factors: tuple[Factor, ...]

    def __len__(self) -> int:
        return len(self.values)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.factors)

    def index(self, name: str) -> int:
        if name not in self.names:
            raise FactorbenchError(f"unknown factor {name!r}; this dataset's factors are: {', '.join(self.names)}")
        return self.names.index(name)

    def column(self, name: str) -> np.ndarray:
        return self.values[:, self.index(name)]

    def scaled(self, name: str) -> np.ndarray:
        """Factor values min-max scaled to [0, 1] over the factor's domain (grid: first to last value)."""
        f = self.factors[self.index(name)]
        return (self.column(name) - f.low) / (f.high - f.low)


def _to_json(value: Any) -> Any:
    if isinstance(value, SplitSpec):
        return value.to_dict()
    if isinstance(value, (Inequality, CorrelatedPair)):
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, Mapping) and "kind" in value:
        return split_from_dict(value)
    if isinstance(value, list):
        return tuple(_from_json(v) for v in value)
    return value


@dataclass(frozen=True, kw_only=True)
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
        body = {f.name: _to_json(getattr(self, f.name)) for f in dataclasses.fields(self)}
        return {"kind": self.kind, **body}

    def to_json(self) -> str:
        return canonical_json(self.to_dict())

    def hash(self) -> str:
        return sha256_text(self.to_json())

    @property
    @abstractmethod
    def names(self) -> tuple[str, ...]:
        """The names of the splits :meth:`assign` returns."""

    @abstractmethod
    def assign(self, table: FactorTable) -> dict[str, np.ndarray]:
        """Return ``{split name: int64 indices}`` for a dataset with this factor table."""


def split_from_dict(d: Mapping[str, Any]) -> SplitSpec:
    """Rebuild a split spec from its dict (the inverse of ``to_dict``)."""
    kind = d.get("kind")
    if kind not in SPLIT_KINDS:
        raise FactorbenchError(f"unknown split kind {kind!r}; known kinds: {', '.join(sorted(SPLIT_KINDS))}")
    cls = SPLIT_KINDS[kind]
    names = {f.name for f in dataclasses.fields(cls)}
    body = {k: _from_json(v) for k, v in d.items() if k != "kind"}
    unknown = set(body) - names
    if unknown:
        raise FactorbenchError(f"split kind {kind!r} has no fields {sorted(unknown)}; fields are {sorted(names)}")
    try:
        return cls(**body)
    except TypeError as exc:
        raise FactorbenchError(f"split kind {kind!r}: {exc}") from None


# -- partitions ------------------------------------------------------------------------------------

def _check_fractions(kind: str, names: Sequence[str], fractions: Sequence[float]) -> None:
    if any(isinstance(f, bool) or not isinstance(f, (int, float)) for f in fractions):
        raise FactorbenchError(f"{kind} split: fractions must be numbers, got {tuple(fractions)!r}")
    if len(names) != len(fractions) or len(set(names)) != len(names) or not names:
        raise FactorbenchError(f"{kind} split: give one distinct name per fraction")
    if any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-9:
        raise FactorbenchError(f"{kind} split: fractions must be >= 0 and sum to 1, got {tuple(fractions)}")


def _cut(order: np.ndarray, names: Sequence[str], fractions: Sequence[float]) -> dict[str, np.ndarray]:
    bounds = np.rint(np.cumsum((0.0, *fractions)) * len(order)).astype(np.int64)
    return {name: np.sort(order[a:b]).astype(np.int64) for name, a, b in zip(names, bounds[:-1], bounds[1:])}


@dataclass(frozen=True, kw_only=True)
class RandomSplit(SplitSpec):
    """A seeded random partition into named parts of the given fractions (which sum to 1)."""

    kind: ClassVar[str] = "random"
    names: tuple[str, ...] = ("train", "validation", "test")
    fractions: tuple[float, ...] = (0.8, 0.1, 0.1)
    seed: int = 0

    def __post_init__(self) -> None:
        _check_fractions(self.kind, self.names, self.fractions)

    def assign(self, table: FactorTable) -> dict[str, np.ndarray]:
        return _cut(np.random.default_rng(self.seed).permutation(len(table)), self.names, self.fractions)


@dataclass(frozen=True, kw_only=True)
class OrderedSplit(SplitSpec):
    """Consecutive parts in generation order (for i.i.d. samples, as random as a shuffle)."""

    kind: ClassVar[str] = "ordered"
    names: tuple[str, ...] = ("train", "validation", "test")
    fractions: tuple[float, ...] = (0.8, 0.1, 0.1)

    def __post_init__(self) -> None:
        _check_fractions(self.kind, self.names, self.fractions)

    def assign(self, table: FactorTable) -> dict[str, np.ndarray]:
        return _cut(np.arange(len(table)), self.names, self.fractions)


# -- hold-outs -------------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class HoldoutSplit(SplitSpec):
    """A region of factor space held out: its samples form split ``holdout`` and are removed, by
    boolean masks, from every part of the ``base`` partition."""

    holdout: str = "holdout"
    base: SplitSpec = field(default_factory=RandomSplit)

    def __post_init__(self) -> None:
        if not isinstance(self.base, SplitSpec):
            raise FactorbenchError(f"{self.kind} split: base must be a split spec")
        if isinstance(self.base, (HoldoutSplit, CorrelatedSplit)):
            raise FactorbenchError(f"{self.kind} split: base must be a partition (random or ordered)")
        if self.holdout in self.base.names:
            raise FactorbenchError(f"{self.kind} split: hold-out name {self.holdout!r} is also a part of the base")

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.base.names, self.holdout)

    @abstractmethod
    def region(self, table: FactorTable) -> np.ndarray:
        """Boolean mask (N,) of the held-out samples."""

    def describe_region(self) -> str:
        return self.kind

    def assign(self, table: FactorTable) -> dict[str, np.ndarray]:
        held = np.asarray(self.region(table), dtype=bool)
        if not held.any():
            raise FactorbenchError(f"{self.kind} split: no sample lies in the hold-out region "
                                   f"({self.describe_region()}); widen it")
        if held.all():
            raise FactorbenchError(f"{self.kind} split: every sample lies in the hold-out region "
                                   f"({self.describe_region()}); narrow it")
        parts = {name: idx[~held[idx]] for name, idx in self.base.assign(table).items()}
        parts[self.holdout] = np.flatnonzero(held).astype(np.int64)
        return parts


_OPS = {">": operator.gt, ">=": operator.ge}
_AST_CMP = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<="}


def _linear(node: ast.AST, constants: Mapping[str, float]) -> dict[str, float]:
    """A linear form {name: coefficient, "": constant} of an expression tree."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return {"": float(node.value)}
    if isinstance(node, ast.Name):
        return {"": constants[node.id]} if node.id in constants else {node.id: 1.0}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
        return {k: sign * v for k, v in _linear(node.operand, constants).items()}
    if isinstance(node, ast.BinOp):
        left, right = _linear(node.left, constants), _linear(node.right, constants)
        if isinstance(node.op, (ast.Add, ast.Sub)):
            sign = 1.0 if isinstance(node.op, ast.Add) else -1.0
            out = dict(left)
            for k, v in right.items():
                out[k] = out.get(k, 0.0) + sign * v
            return out
        if isinstance(node.op, ast.Mult) and (set(left) <= {""} or set(right) <= {""}):
            scalar, form = (left.get("", 0.0), right) if set(left) <= {""} else (right.get("", 0.0), left)
            return {k: scalar * v for k, v in form.items()}
        if isinstance(node.op, ast.Div) and set(right) <= {""} and right.get("", 0.0) != 0:
            return {k: v / right[""] for k, v in left.items()}
    raise ValueError("not a linear expression")


@dataclass(frozen=True)
class Inequality:
    """``sum_k terms[k] * factor_k  op  bound`` with op ``>`` or ``>=``."""

    terms: tuple[tuple[str, float], ...]
    op: str
    bound: float

    @classmethod
    def parse(cls, text: str) -> "Inequality":
        """Parse e.g. ``"red - green > 0.15"`` or ``"elevation > pi/4"`` (``pi`` is the constant)."""
        try:
            tree = ast.parse(text.strip(), mode="eval").body
            if not (isinstance(tree, ast.Compare) and len(tree.ops) == 1 and type(tree.ops[0]) in _AST_CMP):
                raise ValueError("needs exactly one of >, >=, <, <=")
            form = _linear(ast.BinOp(tree.left, ast.Sub(), tree.comparators[0]), {"pi": math.pi})
        except (SyntaxError, ValueError) as exc:
            raise FactorbenchError(f"cannot read the inequality {text!r} ({exc}); write a linear inequality over "
                                   "factor names such as 'red - green > 0.15' or 'elevation > pi/4'") from None
        op = _AST_CMP[type(tree.ops[0])]
        if op in ("<", "<="):  # a < b  <=>  -a > -b
            form, op = {k: -v for k, v in form.items()}, op.replace("<", ">")
        terms = tuple(sorted((k, v) for k, v in form.items() if k and v != 0.0))
        if not terms:
            raise FactorbenchError(f"the inequality {text!r} names no factor")
        return cls(terms, op, -form.get("", 0.0))

    @classmethod
    def coerce(cls, value: Any) -> "Inequality":
        if isinstance(value, Inequality):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, (Mapping, list, tuple)):
            d = dict(value) if isinstance(value, Mapping) else {"terms": value[0], "op": value[1], "bound": value[2]}
            terms = tuple(sorted((str(k), float(v)) for k, v in (d["terms"].items() if isinstance(d["terms"], Mapping)
                                                                   else d["terms"])))
            if d["op"] not in _OPS:
                raise FactorbenchError(f"inequality operator must be '>' or '>=', got {d['op']!r}")
            return cls(terms, d["op"], float(d["bound"]))
        raise FactorbenchError(f"cannot read an inequality from {value!r}")

    def to_json(self) -> dict[str, Any]:
        return {"terms": {k: v for k, v in self.terms}, "op": self.op, "bound": self.bound}

    def holds(self, table: FactorTable) -> np.ndarray:
        lhs = sum(coef * table.column(name) for name, coef in self.terms)
        return _OPS[self.op](lhs, self.bound)

    def __str__(self) -> str:
        terms = sorted(self.terms, key=lambda t: (t[1] < 0, t[0]))  # positive terms first
        text = " ".join(f"{'-' if c < 0 else '+'} {'' if abs(c) == 1 else f'{abs(c):g}*'}{n}" for n, c in terms)
        text = text[2:] if text.startswith("+ ") else "-" + text[2:]
        return f"{text} {self.op} {self.bound:g}"


@dataclass(frozen=True, kw_only=True)
class GapSplit(HoldoutSplit):
    """Hold out the samples satisfying every inequality (a conjunction), e.g. the teapot's zero-shot gap
    (Eastwood & Williams 2018, section 5.2): ``red - green > 0.15, red - blue > 0.15, elevation > pi/4``."""

    kind: ClassVar[str] = "gap"
    where: tuple[Inequality, ...] = ()
    holdout: str = "zeroshot"

    def __post_init__(self) -> None:
        object.__setattr__(self, "where", tuple(Inequality.coerce(w) for w in self.where))
        if not self.where:
            raise FactorbenchError("gap split: give at least one inequality in 'where'")
        super().__post_init__()

    def describe_region(self) -> str:
        return " and ".join(map(str, self.where))

    def region(self, table: FactorTable) -> np.ndarray:
        return np.logical_and.reduce([w.holds(table) for w in self.where])


def _check_unit(kind: str, what: str, value: float, open_ends: bool = False) -> None:
    lo_ok = value > 0 if open_ends else value >= 0
    hi_ok = value < 1 if open_ends else value <= 1
    if not (lo_ok and hi_ok):
        rng = "(0, 1)" if open_ends else "[0, 1]"
        raise FactorbenchError(f"{kind} split: {what} is a position on the min-max scaled factor, in {rng}; "
                               f"got {value}")


@dataclass(frozen=True, kw_only=True)
class CompositionSplit(HoldoutSplit):
    """Hold out the combination of high values of two or more factors (all of them above ``threshold``
    on the min-max scaled factor), while each high value is still seen with low values of the others
    (after Schott et al. 2022, "composition")."""

    kind: ClassVar[str] = "composition"
    factors: tuple[str, ...] = ()
    threshold: float = 0.5
    holdout: str = "composition"

    def __post_init__(self) -> None:
        if len(self.factors) < 2 or len(set(self.factors)) != len(self.factors):
            raise FactorbenchError("composition split: name two or more distinct factors")
        _check_unit(self.kind, "threshold", self.threshold, open_ends=True)
        super().__post_init__()

    def describe_region(self) -> str:
        return " and ".join(f"{f} > {self.threshold:g} (scaled)" for f in self.factors)

    def region(self, table: FactorTable) -> np.ndarray:
        return np.logical_and.reduce([table.scaled(f) > self.threshold for f in self.factors])


@dataclass(frozen=True, kw_only=True)
class InterpolationSplit(HoldoutSplit):
    """Hold out the middle values ``low <= scaled factor <= high`` of one factor, with ``0 < low`` and
    ``high < 1`` so that both ends are seen in training (after Schott et al. 2022, "interpolation")."""

    kind: ClassVar[str] = "interpolation"
    factor: str = ""
    low: float = 0.4
    high: float = 0.6
    holdout: str = "interpolation"

    def __post_init__(self) -> None:
        if not self.factor:
            raise FactorbenchError("interpolation split: name the factor")
        _check_unit(self.kind, "low", self.low, open_ends=True)
        _check_unit(self.kind, "high", self.high, open_ends=True)
        if not self.low <= self.high:
            raise FactorbenchError(f"interpolation split: need low <= high, got {self.low} > {self.high}")
        super().__post_init__()

    def describe_region(self) -> str:
        return f"{self.low:g} <= {self.factor} <= {self.high:g} (scaled)"

    def region(self, table: FactorTable) -> np.ndarray:
        u = table.scaled(self.factor)
        return (u >= self.low) & (u <= self.high)


@dataclass(frozen=True, kw_only=True)
class ExtrapolationSplit(HoldoutSplit):
    """Hold out the values of one factor beyond ``threshold`` (above it, or below it with
    ``above=False``) on the min-max scaled factor (after Schott et al. 2022, "extrapolation")."""

    kind: ClassVar[str] = "extrapolation"
    factor: str = ""
    threshold: float = 0.75
    above: bool = True
    holdout: str = "extrapolation"

    def __post_init__(self) -> None:
        if not self.factor:
            raise FactorbenchError("extrapolation split: name the factor")
        _check_unit(self.kind, "threshold", self.threshold, open_ends=True)
        super().__post_init__()

    def describe_region(self) -> str:
        return f"{self.factor} {'>' if self.above else '<'} {self.threshold:g} (scaled)"

    def region(self, table: FactorTable) -> np.ndarray:
        u = table.scaled(self.factor)
        return u > self.threshold if self.above else u < self.threshold


@dataclass(frozen=True, kw_only=True)
class RecombinationSplit(HoldoutSplit):
    """Hold out the samples where every named factor lies in its range ``[low, high]`` (scaled): one
    factor's range never seen with another's ("recombination to range"), or, with ranges on every
    factor, a held-out corner of factor space ("recombination to element"; Montero et al. 2021)."""

    kind: ClassVar[str] = "recombination"
    ranges: tuple[tuple[str, float, float], ...] = ()
    holdout: str = "recombination"

    def __post_init__(self) -> None:
        ranges = tuple((str(n), float(lo), float(hi)) for n, lo, hi in self.ranges)
        object.__setattr__(self, "ranges", ranges)
        if not ranges:
            raise FactorbenchError("recombination split: give at least one (factor, low, high) range")
        if len({n for n, _, _ in ranges}) != len(ranges):
            raise FactorbenchError("recombination split: each factor may have one range only")
        for name, lo, hi in ranges:
            _check_unit(self.kind, f"the range of {name}", lo)
            _check_unit(self.kind, f"the range of {name}", hi)
            if lo > hi:
                raise FactorbenchError(f"recombination split: empty range {lo} > {hi} for {name}")
        super().__post_init__()

    def describe_region(self) -> str:
        return " and ".join(f"{lo:g} <= {n} <= {hi:g} (scaled)" for n, lo, hi in self.ranges)

    def region(self, table: FactorTable) -> np.ndarray:
        return np.logical_and.reduce([(table.scaled(n) >= lo) & (table.scaled(n) <= hi) for n, lo, hi in self.ranges])


# -- correlated factors ----------------------------------------------------------------------------

@dataclass(frozen=True)
class CorrelatedPair:
    """Factors ``a`` and ``b`` coupled with strength ``sigma`` (anti-correlated with ``anti``)."""

    a: str
    b: str
    sigma: float
    anti: bool = False

    def __post_init__(self) -> None:
        if self.a == self.b:
            raise FactorbenchError(f"a correlated pair must name two different factors, got {self.a!r} twice")
        if not (isinstance(self.sigma, (int, float)) and self.sigma > 0 and math.isfinite(self.sigma)):
            raise FactorbenchError(f"correlated pair ({self.a}, {self.b}): sigma must be > 0, got {self.sigma!r}")

    @classmethod
    def coerce(cls, value: Any) -> "CorrelatedPair":
        if isinstance(value, CorrelatedPair):
            return value
        if isinstance(value, Mapping):
            return cls(str(value["a"]), str(value["b"]), float(value["sigma"]), bool(value.get("anti", False)))
        if isinstance(value, (list, tuple)) and len(value) in (3, 4):
            return cls(str(value[0]), str(value[1]), float(value[2]), bool(value[3]) if len(value) == 4 else False)
        raise FactorbenchError(f"a correlated pair is (a, b, sigma[, anti]) or a dict; got {value!r}")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def correlation_weights(table: FactorTable, pairs: Sequence[CorrelatedPair]) -> np.ndarray:
    """Unnormalised sample weights: prod over pairs of exp(-(c_a - c_b)^2 / (2 sigma^2)) on min-max
    scaled factors; anti-correlation uses c_a - (1 - c_b) (Roth et al. 2022; Träuble et al. 2021)."""
    log_w = np.zeros(len(table))
    for p in pairs:
        ca, cb = table.scaled(p.a), table.scaled(p.b)
        diff = ca - (1.0 - cb) if p.anti else ca - cb
        log_w -= diff**2 / (2.0 * p.sigma**2)
    return np.exp(log_w)


@dataclass(frozen=True, kw_only=True)
class CorrelatedSplit(SplitSpec):
    """A training set with dependent factors: ``size`` indices drawn with replacement, with probability
    proportional to :func:`correlation_weights`, from part ``within_part`` of the partition ``within``
    (all samples when ``within`` is None). Test data stay as they are (uncorrelated)."""

    kind: ClassVar[str] = "correlated"
    pairs: tuple[CorrelatedPair, ...] = ()
    size: int | None = None
    seed: int = 0
    name: str = "correlated"
    within: SplitSpec | None = None
    within_part: str = "train"

    def __post_init__(self) -> None:
        object.__setattr__(self, "pairs", tuple(CorrelatedPair.coerce(p) for p in self.pairs))
        if not self.pairs:
            raise FactorbenchError("correlated split: give at least one pair (a, b, sigma)")
        if not isinstance(self.within, (SplitSpec, type(None))):
            raise FactorbenchError("correlated split: 'within' must be a split spec or null")
        if len({frozenset((p.a, p.b)) for p in self.pairs}) != len(self.pairs):
            raise FactorbenchError("correlated split: a pair of factors is listed twice")
        if self.size is not None and (not isinstance(self.size, int) or self.size < 1):
            raise FactorbenchError(f"correlated split: size must be a positive integer, got {self.size!r}")
        if self.within is not None:
            if isinstance(self.within, CorrelatedSplit):
                raise FactorbenchError("correlated split: 'within' must be a partition or a hold-out split")
            if self.within_part not in self.within.names:
                raise FactorbenchError(f"correlated split: 'within' has no part {self.within_part!r}; "
                                       f"its parts are {', '.join(self.within.names)}")

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,)

    def assign(self, table: FactorTable) -> dict[str, np.ndarray]:
        pool = (np.arange(len(table)) if self.within is None
                else self.within.assign(table)[self.within_part])
        weights = correlation_weights(table, self.pairs)[pool]
        total = weights.sum()
        if not total > 0:
            raise FactorbenchError("correlated split: every sample has weight 0; increase sigma")
        size = self.size if self.size is not None else len(pool)
        rng = np.random.default_rng(self.seed)
        drawn = pool[rng.choice(len(pool), size=size, replace=True, p=weights / total)]
        return {self.name: np.sort(drawn).astype(np.int64)}


def sample_correlated_factors(factors: Sequence[Factor], pairs: Sequence[CorrelatedPair | Sequence[Any]], n: int,
                              seed: int = 0, batch: int = 65536) -> np.ndarray:
    """Draw ``n`` factor vectors from the correlated joint directly (for generators that render any value):
    uniform proposals over each factor's domain (grid factors: uniform over their values), accepted with
    probability :func:`correlation_weights` (<= 1). Deterministic for a seed; no sample repeats."""
    factors = tuple(factors)
    pairs = tuple(CorrelatedPair.coerce(p) for p in pairs)
    rng = np.random.default_rng(seed)
    accepted: list[np.ndarray] = []
    count = 0
    for _ in range(10_000):
        cols = [np.asarray(f.values)[rng.integers(0, len(f.values), batch)] if f.is_grid
                else f.low + rng.random(batch) * (f.high - f.low) for f in factors]
        values = np.stack(cols, axis=1)
        keep = rng.random(batch) < correlation_weights(FactorTable(values, None, factors), pairs)
        accepted.append(values[keep])
        count += int(keep.sum())
        if count >= n:
            return np.concatenate(accepted)[:n]
    raise FactorbenchError(f"correlated sampling accepted {count} of {10_000 * batch} proposals, fewer than "
                           f"the {n} asked for; increase sigma or ask for fewer samples")
