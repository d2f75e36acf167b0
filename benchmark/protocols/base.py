"""Protocols: frozen, versioned, hashed descriptions of how a representation is scored.

A protocol pins the data (generator, version, parameters, seed, size, the extra split presets added
to the file), every metric call (which metric, on which split(s), with which settings, sample sizes
and seeds) and the headline metric a results table is sorted by. ``Protocol.hash()`` is the sha256
of its canonical JSON; it goes into every result file. A breaking change is a new name or version,
never an edit in place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from factorbench import generators
from factorbench.generators.errors import FactorbenchError
from factorbench.generators.params import params_to_dict
from factorbench.generators.spec import canonical_json, sha256_text

__all__ = ["DatasetRef", "Headline", "MetricCall", "PROTOCOLS", "Protocol", "get_protocol", "list_protocols",
           "register"]


def _canonical(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Canonical JSON value of a mapping (tuples become lists), so that equal settings compare equal."""
    return json.loads(canonical_json(dict(mapping)))


@dataclass(frozen=True)
class DatasetRef:
    """The dataset a protocol runs on: generator name, parameters (``{}`` = defaults), seed, size
    (None = the generator's default, the full grid for grid sets) and the split presets to add to
    the file (e.g. correlated-factor presets; see ``factorbench info DATASET``).

    ``eval_grid`` (grid datasets only; ``()`` = every sample) is one stride per factor: the metrics run
    on the sub-grid of the file's samples whose class of factor k is a multiple of ``eval_grid[k]``
    (:mod:`factorbench.benchmark.subgrid`). Models still train on the whole file; only the sub-grid is
    encoded, so a protocol on a 737,280-image grid can score a model in seconds, with exact
    interventions (every sub-grid point has its image)."""

    generator: str
    params: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    n: int | None = None
    extra_splits: tuple[str, ...] = ()
    #: the dataset reads outside data (ModelNet40, COIL-100): evaluate needs ``source=PATH`` once
    needs_source: bool = False
    eval_grid: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _canonical(self.params))
        object.__setattr__(self, "extra_splits", tuple(self.extra_splits))
        object.__setattr__(self, "eval_grid", tuple(self.eval_grid))
        if any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in self.eval_grid):
            raise FactorbenchError(f"eval_grid must hold positive integer strides, one per factor; got {self.eval_grid}")

    def to_dict(self) -> dict[str, Any]:
        out = {"generator": self.generator, "params": dict(self.params), "seed": self.seed, "n": self.n,
               "extra_splits": list(self.extra_splits), "needs_source": self.needs_source}
        if self.eval_grid:  # only where set, so the protocols written before it keep their hashes
            out["eval_grid"] = list(self.eval_grid)
        return out


@dataclass(frozen=True)
class MetricCall:
    """One metric evaluated by a protocol.

    ``label`` names the result (unique within a protocol), ``metric`` is a key of
    :data:`factorbench.benchmark.adapters.ADAPTERS`, ``data`` maps the metric's roles to split names
    (``"all"`` = every sample of the file), e.g. ``{"train": "train", "validation": "validation",
    "test": "test", "heldout": ["zeroshot"]}`` for DCI or ``{"eval": "test"}``; ``settings`` are the
    metric's keyword arguments; ``max_samples`` caps every role's rows with a seeded subsample
    (``seed`` also seeds the metric)."""

    label: str
    metric: str
    data: Mapping[str, Any]
    settings: Mapping[str, Any] = field(default_factory=dict)
    max_samples: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", _canonical(self.data))
        object.__setattr__(self, "settings", _canonical(self.settings))

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "metric": self.metric, "data": dict(self.data),
                "settings": dict(self.settings), "max_samples": self.max_samples, "seed": self.seed}


@dataclass(frozen=True)
class Headline:
    """The scalar a results table is sorted by: ``field`` of metric call ``label``; ``better`` says
    whether higher or lower is better."""

    label: str
    field: str
    better: Literal["higher", "lower"] = "higher"

    @property
    def key(self) -> str:
        return f"{self.label}.{self.field}"

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "field": self.field, "better": self.better}


@dataclass(frozen=True)
class Protocol:
    """A fixed way of scoring a representation (see the module docstring)."""

    name: str
    version: int
    description: str
    dataset: DatasetRef
    metrics: tuple[MetricCall, ...]
    headline: Headline
    citation: str = ""
    #: sha256 of the images the reference rows were scored on ("" = none pinned). Rendered datasets
    #: differ in their last bits between renderers and drivers; a result on other images says so. It
    #: names a copy of the data, not a setting, so it is not part of the protocol's JSON or hash.
    reference_images: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics", tuple(self.metrics))
        labels = [m.label for m in self.metrics]
        if len(set(labels)) != len(labels):
            raise FactorbenchError(f"protocol {self.name}: metric labels must be unique, got {labels}")
        if self.headline.label not in labels:
            raise FactorbenchError(f"protocol {self.name}: headline {self.headline.label!r} is not one of its metrics")
        if not self.name.endswith(f"-v{self.version}"):
            raise FactorbenchError(f"protocol {self.name}: the name must end in -v{self.version}")
        if self.dataset.eval_grid:
            from ..subgrid import subgrid_factors

            subgrid_factors(generators.get(self.dataset.generator, self.dataset.params).factors(),
                            self.dataset.eval_grid, f"protocol {self.name}")  # raises when it does not fit
        available = set(self.split_names()) | {"all"}
        for call in self.metrics:
            for role, names in call.data.items():
                for split in [names] if isinstance(names, str) else names:
                    if split not in available:
                        raise FactorbenchError(
                            f"protocol {self.name}: metric {call.label!r} reads split {split!r} ({role}), which the "
                            f"dataset will not have; it has {', '.join(sorted(available))} (add a preset to "
                            "DatasetRef.extra_splits for a correlated split)")

    def split_names(self) -> tuple[str, ...]:
        """The splits of the protocol's dataset file: the generator's standard ones and the extra presets."""
        from factorbench.generators.presets import default_partition, resolve_split

        gen = generators.get(self.dataset.generator, self.dataset.params)
        standard = gen.default_splits(self.dataset.seed)
        partition = default_partition(standard, self.dataset.seed)
        names = [n for split in standard for n in split.names]
        for preset in self.dataset.extra_splits:
            names += resolve_split(preset, gen.factors(), partition).names
        return tuple(names)

    @property
    def needs_source(self) -> bool:
        return self.dataset.needs_source

    def generator_version(self) -> str:
        return generators.get(self.dataset.generator, self.dataset.params).version

    def dataset_params(self) -> dict[str, Any]:
        """Every generator parameter, defaults filled in (so a changed default changes the hash)."""
        return params_to_dict(generators.get(self.dataset.generator, self.dataset.params).params)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "dataset": {**self.dataset.to_dict(), "params": self.dataset_params(),
                        "generator_version": self.generator_version()},
            "metrics": [m.to_dict() for m in self.metrics],
            "headline": self.headline.to_dict(),
            "citation": self.citation,
        }

    def to_json(self, indent: int | None = None) -> str:
        if indent is None:
            return canonical_json(self.to_dict())
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    def hash(self) -> str:
        """sha256 of the canonical JSON: any change of data, metric, setting or seed changes it."""
        return sha256_text(self.to_json())

    def metric(self, label: str) -> MetricCall:
        for m in self.metrics:
            if m.label == label:
                return m
        raise FactorbenchError(f"protocol {self.name} has no metric {label!r}; it has "
                               f"{', '.join(m.label for m in self.metrics)}")


#: name -> protocol, filled by :func:`register` (see ``catalog.py``)
PROTOCOLS: dict[str, Protocol] = {}


def register(protocol: Protocol) -> Protocol:
    if protocol.name in PROTOCOLS:
        raise FactorbenchError(f"protocol {protocol.name} is registered twice")
    PROTOCOLS[protocol.name] = protocol
    return protocol


def get_protocol(name: str | Protocol) -> Protocol:
    """The registered protocol ``name`` (a Protocol is returned as is)."""
    if isinstance(name, Protocol):
        return name
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise FactorbenchError(f"unknown protocol {name!r}; `factorbench protocols` lists them: "
                               f"{', '.join(sorted(PROTOCOLS))}") from None


def list_protocols() -> dict[str, str]:
    """``{name: one-line description}`` of every registered protocol, sorted by name."""
    return {name: PROTOCOLS[name].description for name in sorted(PROTOCOLS)}
