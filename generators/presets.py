"""Named split presets: the teapot's zero-shot gaps and the correlated-factor settings.

A preset builds a split spec for a dataset from its factors and its default partition (the first
split spec of the dataset, e.g. random 80/10/10), so that ``factorbench split FILE --spec single``
means the same thing on every dataset it applies to.

Correlated presets follow Roth et al. 2022 / Träuble et al. 2021 (sigmas as published): ``single``
(one pair, sigma 0.1), ``double-0.4``, ``double-0.1``, ``double-0.04`` (two pairs), ``triple`` (three
pairs, sigma 0.1) and ``confounded`` (the first factor paired with every other, sigma 0.2). The pairs
are chosen from the factor order: first disjoint neighbours (f0, f1), (f2, f3), ..., then the remaining
pairs in lexicographic order. Training indices are drawn from the default partition's ``train`` part,
as many as it holds; validation and test stay uncorrelated.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .errors import FactorbenchError
from .factors import Factor
from .splits import CorrelatedPair, CorrelatedSplit, GapSplit, RandomSplit, SplitSpec, split_from_dict

Builder = Callable[[tuple[Factor, ...], SplitSpec], SplitSpec]


@dataclass(frozen=True)
class SplitPreset:
    name: str
    description: str
    build: Builder
    requirement: Callable[[tuple[Factor, ...]], str | None]  # None when the preset applies, else why not


PRESETS: dict[str, SplitPreset] = {}


def _register(name: str, description: str, requirement: Callable[[tuple[Factor, ...]], str | None]):
    def decorate(build: Builder) -> Builder:
        PRESETS[name] = SplitPreset(name, description, build, requirement)
        return build
    return decorate


def correlation_pairs(factors: Sequence[Factor], count: int) -> list[tuple[str, str]]:
    """``count`` factor pairs: disjoint neighbours first, then the other pairs in lexicographic order."""
    names = [f.name for f in factors]
    disjoint = [(names[i], names[i + 1]) for i in range(0, len(names) - 1, 2)]
    rest = [p for p in itertools.combinations(names, 2) if p not in disjoint]
    pairs = (disjoint + rest)[:count]
    if len(pairs) < count:
        raise FactorbenchError(f"{count} distinct factor pairs are needed; {len(names)} factors give {len(pairs)}")
    return pairs


def _needs_pairs(count: int) -> Callable[[tuple[Factor, ...]], str | None]:
    def requirement(factors: tuple[Factor, ...]) -> str | None:
        available = len(factors) * (len(factors) - 1) // 2
        return None if available >= count else f"needs {count} factor pairs; {len(factors)} factors give {available}"
    return requirement


def _correlated(name: str, count: int, sigma: float) -> None:
    @_register(name, f"{count} correlated factor pair{'s' * (count > 1)}, sigma {sigma:g}", _needs_pairs(count))
    def build(factors: tuple[Factor, ...], partition: SplitSpec) -> SplitSpec:
        pairs = [CorrelatedPair(a, b, sigma) for a, b in correlation_pairs(factors, count)]
        return CorrelatedSplit(pairs=tuple(pairs), name=f"correlated-{name}", within=partition, within_part="train")


_correlated("single", 1, 0.1)
for _sigma in (0.4, 0.1, 0.04):
    _correlated(f"double-{_sigma:g}", 2, _sigma)
_correlated("triple", 3, 0.1)


@_register("confounded", "the first factor correlated with every other factor, sigma 0.2", _needs_pairs(1))
def _confounded(factors: tuple[Factor, ...], partition: SplitSpec) -> SplitSpec:
    first = factors[0].name
    pairs = tuple(CorrelatedPair(first, f.name, 0.2) for f in factors[1:])
    return CorrelatedSplit(pairs=pairs, name="correlated-confounded", within=partition, within_part="train")


TEAPOT_FACTORS = ("elevation", "red", "green", "blue")


def _needs_teapot_factors(factors: tuple[Factor, ...]) -> str | None:
    missing = [n for n in TEAPOT_FACTORS if n not in {f.name for f in factors}]
    return f"needs the factors {', '.join(TEAPOT_FACTORS)} (missing {', '.join(missing)})" if missing else None


def teapot_gap(colour_margin: float = 0.15, elevation: str = "pi/4", partition: SplitSpec | None = None) -> GapSplit:
    """The teapot's zero-shot gap, "red teapots seen from above" (Eastwood & Williams 2018, section 5.2):
    red - green > margin, red - blue > margin, elevation > threshold; held out as ``zeroshot``."""
    where = (f"red - green > {colour_margin!r}", f"red - blue > {colour_margin!r}", f"elevation > {elevation}")
    return GapSplit(where=where, holdout="zeroshot", **({"base": partition} if partition else {}))


@_register("teapot-gap", "the teapot zero-shot gap: red - green > 0.15, red - blue > 0.15, elevation > pi/4",
           _needs_teapot_factors)
def _teapot_gap(factors: tuple[Factor, ...], partition: SplitSpec) -> SplitSpec:
    return teapot_gap(0.15, "pi/4", _partition_of(partition))


@_register("teapot-large-gap", "the original code's large-gap variant: margins 0.7, elevation > pi/2.5",
           _needs_teapot_factors)
def _teapot_large_gap(factors: tuple[Factor, ...], partition: SplitSpec) -> SplitSpec:
    return teapot_gap(0.7, "pi/2.5", _partition_of(partition))


def _partition_of(split: SplitSpec) -> SplitSpec:
    """The plain partition under a hold-out (a gap preset replaces the hold-out, keeping its base)."""
    return getattr(split, "base", split)


def default_partition(splits: Sequence[SplitSpec | Mapping[str, Any]], seed: int) -> SplitSpec:
    """The partition that presets build on: a dataset's first standard split (a spec or its JSON
    dict), or a seeded random split when it has none."""
    if not splits:
        return RandomSplit(seed=seed)
    first = splits[0]
    return first if isinstance(first, SplitSpec) else split_from_dict(first)


def applicable_presets(factors: Sequence[Factor]) -> dict[str, str]:
    """``{preset name: description}`` of the presets that apply to a dataset with these factors."""
    return {name: p.description for name, p in PRESETS.items() if p.requirement(tuple(factors)) is None}


def resolve_split(text: str | SplitSpec, factors: Sequence[Factor], partition: SplitSpec) -> SplitSpec:
    """A split spec from a preset name, a JSON object, or a spec, checked against the dataset's factors."""
    factors = tuple(factors)
    if isinstance(text, SplitSpec):
        return text
    if text.lstrip().startswith("{"):
        try:
            return split_from_dict(json.loads(text))
        except json.JSONDecodeError as exc:
            raise FactorbenchError(f"--spec is not valid JSON ({exc})") from None
    if text not in PRESETS:
        names = ", ".join(applicable_presets(factors)) or "(none)"
        raise FactorbenchError(f"unknown split preset {text!r}; presets for this dataset: {names}; or give a JSON "
                               'spec such as \'{"kind": "random", "fractions": [0.5, 0.5], "names": ["a", "b"]}\'')
    preset = PRESETS[text]
    why_not = preset.requirement(factors)
    if why_not:
        raise FactorbenchError(f"split preset {text!r} does not apply to this dataset: it {why_not}")
    return preset.build(factors, partition)
