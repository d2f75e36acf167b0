"""The generator interface and the registry of datasets.

A generator has one core primitive, :meth:`Generator.render`, mapping a batch of factor values to
uint8 images, plus the deterministic sampling of factor values for any range of sample indices.
Subclasses that set ``name`` register themselves when the class is defined. The built-in datasets'
modules are imported on first use (:data:`BUILTIN`): a command that needs one dataset does not pay for
importing the others (trimesh, scipy); :func:`list_datasets` imports them all.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import numpy as np

from .errors import FactorbenchError
from .factors import Factor, subgrid_factors
from .params import params_to_dict, parse_params
from .spec import DatasetSpec
from .splits import RandomSplit, SplitSpec

_REGISTRY: dict[str, type["Generator"]] = {}
#: the built-in datasets: name -> the module of this package that defines (and registers) it
BUILTIN = {"airplane": "airplane", "arrow": "arrow", "coil100": "coil100", "dsprites": "dsprites",
           "modelnet40": "modelnet40", "mpi3d-toy": "mpi3d_toy", "objects": "objects", "shapes3d": "shapes3d",
           "square": "square", "teapot": "teapot"}


def _import_builtin(*names: str) -> None:
    """Import (and so register) the built-in datasets ``names`` (default: all of them) not yet registered."""
    for name in names or tuple(BUILTIN):
        if name in BUILTIN and name not in _REGISTRY:
            importlib.import_module(f".{BUILTIN[name]}", __package__)

#: Factor values of i.i.d. datasets are drawn in blocks of this many samples, each block from its own
#: seeded stream, so any index range (a shard, a resumed batch) is reproducible on its own.
SAMPLING_BLOCK = 4096


@dataclass(frozen=True)
class NoParams:
    """For generators without parameters."""


@dataclass(frozen=True)
class GridStepParams:
    """Base of the parameters of the large grid datasets: ``step`` (one stride per factor; ``()`` = the
    full grid) makes a smaller file of the same images, every ``step[k]``-th value of factor k
    (:func:`factorbench.generators.factors.subgrid_factors`), e.g. for quick experiments and tests."""

    step: tuple[int, ...] = ()


class Generator(ABC):
    """Base class of all dataset generators."""

    name: ClassVar[str]
    version: ClassVar[str]  # semantic version; bump on any change of output for the same spec
    description: ClassVar[str]  # one line
    citation: ClassVar[str]  # BibTeX
    Params: ClassVar[type] = NoParams
    default_n: ClassVar[int | None] = None  # None: the size of the full grid
    options: ClassVar[tuple[str, ...]] = ()  # run-time keyword options of the constructor (see ``get``)

    def __init_subclass__(cls, register: bool = True, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if register and "name" in cls.__dict__:
            if cls.name in _REGISTRY:
                raise TypeError(f"a dataset called {cls.name!r} is already registered")
            _REGISTRY[cls.name] = cls

    def __init__(self, params: Any = None, **overrides: Any) -> None:
        if params is not None and overrides:
            raise FactorbenchError("give either a Params object or keyword parameters, not both")
        if params is None:
            params = parse_params(self.Params, overrides)
        elif not isinstance(params, self.Params):
            raise FactorbenchError(f"{self.name}: params must be {self.Params.__name__}, got {type(params).__name__}")
        self.params = params
        if getattr(params, "step", ()):
            self.factors()  # a step that does not fit the factors fails here, before any work

    # -- what subclasses provide -------------------------------------------------------------
    @abstractmethod
    def factors(self) -> tuple[Factor, ...]:
        """The factors, in column order."""

    @property
    @abstractmethod
    def image_shape(self) -> tuple[int, int, int]:
        """(H, W, C) of every image."""

    @abstractmethod
    def render(self, factors: np.ndarray) -> np.ndarray:
        """Images (M, H, W, C) uint8 for factor values (M, K) float64."""

    def renderer_identity(self) -> str:
        """Which code made the pixels (recorded in the file's manifest)."""
        return f"{type(self).__module__}.{type(self).__name__}"

    def default_splits(self, seed: int) -> tuple[SplitSpec, ...]:
        """The standard splits written into every file of this dataset."""
        return (RandomSplit(seed=seed),)

    def stepped(self, factors: tuple[Factor, ...]) -> tuple[Factor, ...]:
        """``factors`` thinned by the ``step`` parameter (for generators whose Params derive from
        :class:`GridStepParams`; their ``factors()`` returns ``self.stepped(full grid factors)``)."""
        step = getattr(self.params, "step", ())
        return subgrid_factors(factors, step, f"{self.name}: parameter step") if step else tuple(factors)

    # -- derived -----------------------------------------------------------------------------
    @property
    def is_grid(self) -> bool:
        return all(f.is_grid for f in self.factors())

    @property
    def grid_shape(self) -> tuple[int, ...]:
        if not self.is_grid:
            raise FactorbenchError(f"{self.name} is not a grid dataset")
        return tuple(len(f.values) for f in self.factors())

    def full_size(self) -> int:
        return math.prod(self.grid_shape) if self.is_grid else int(self.default_n)

    def spec(self, seed: int = 0, n: int | None = None) -> DatasetSpec:
        """The dataset spec for this generator's parameters, a seed and a size."""
        if self.is_grid:
            full = self.full_size()
            if n is not None and n != full:
                raise FactorbenchError(f"{self.name} is a full grid of {full} samples; omit --n or give --n {full}")
            n = full
        elif n is None:
            n = int(self.default_n)
        if not isinstance(n, int) or n < 1:
            raise FactorbenchError(f"--n must be a positive integer, got {n!r}")
        if not isinstance(seed, int) or seed < 0:
            raise FactorbenchError(f"--seed must be a non-negative integer, got {seed!r}")
        return DatasetSpec(self.name, self.version, params_to_dict(self.params), seed, n, self.image_shape,
                           self.factors(), tuple(s.to_dict() for s in self.default_splits(seed)))

    def sample_factors(self, spec: DatasetSpec, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Factor values (and grid classes, or None) of samples ``start..stop-1`` of ``spec``.

        Grid datasets enumerate the full grid in C order (the first factor varies slowest).
        Other datasets draw each factor i.i.d. uniformly over its interval; block b of
        ``SAMPLING_BLOCK`` samples uses the stream ``default_rng([seed, b])``.
        """
        if not 0 <= start <= stop <= spec.n:
            raise FactorbenchError(f"sample range {start}..{stop} is outside 0..{spec.n}")
        factors = self.factors()
        if all(f.is_grid for f in factors):
            idx = np.unravel_index(np.arange(start, stop), tuple(len(f.values) for f in factors))
            classes = np.stack(idx, axis=1).astype(np.int64)
            values = np.stack([np.asarray(f.values)[c] for f, c in zip(factors, idx)], axis=1)
            return values.astype(np.float64), classes
        if any(f.is_grid for f in factors):
            raise FactorbenchError(f"{self.name}: mixed grid and i.i.d. factors need their own sample_factors")
        first, last = start // SAMPLING_BLOCK, -(-stop // SAMPLING_BLOCK)
        blocks = [self._from_unit(np.random.default_rng([spec.seed, b]).random((SAMPLING_BLOCK, len(factors))))
                  for b in range(first, last)]
        values = np.concatenate(blocks) if blocks else np.zeros((0, len(factors)))
        offset = first * SAMPLING_BLOCK
        return values[start - offset:stop - offset], None

    def _from_unit(self, u: np.ndarray) -> np.ndarray:
        """Map uniform [0, 1) draws to each factor's interval."""
        lows = np.array([f.low for f in self.factors()])
        highs = np.array([f.high for f in self.factors()])
        return lows + u * (highs - lows)

    def info(self) -> dict[str, Any]:
        """Everything ``factorbench info`` prints."""
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "image_shape": list(self.image_shape),
            "n": self.full_size(),
            "grid": self.is_grid,
            "params": params_to_dict(self.params),
            "factors": [f.to_dict() for f in self.factors()],
            "splits": [s.to_dict() for s in self.default_splits(0)],
            "citation": self.citation,
        }


def list_datasets() -> dict[str, str]:
    """``{name: one-line description}`` of every registered dataset, sorted by name."""
    _import_builtin()
    return {name: _REGISTRY[name].description for name in sorted(_REGISTRY)}


def get(name: str, params: Mapping[str, Any] | None = None, **options: Any) -> Generator:
    """The generator called ``name`` with parameter overrides (strings or typed values) and run-time
    options that are not part of the data's identity (``backend`` for the 3D datasets, ``source`` for
    datasets built from local files)."""
    _import_builtin(name)
    if name not in _REGISTRY:
        raise FactorbenchError(f"unknown dataset {name!r}; available: {', '.join(sorted(set(_REGISTRY) | set(BUILTIN)))} "
                               "(see `factorbench list`)")
    cls = _REGISTRY[name]
    parameters = {field.name for field in dataclasses.fields(cls.Params)}
    for option in options:
        if option in parameters and option not in cls.options:
            raise FactorbenchError(f"{option!r} is a parameter of {name}, not a run-time option: give it in params, "
                                   f"get({name!r}, {{{option!r}: ...}}) (on the command line, --param {option}=...)")
        if option not in cls.options:
            raise FactorbenchError(f"{name} takes no --{option}"
                                   + (f" (its options: {', '.join('--' + o for o in cls.options)})" if cls.options else ""))
    return cls(**dict(params or {}), **options)


def generator_for_spec(spec: DatasetSpec) -> Generator:
    """Rebuild the generator that made ``spec``; refuses a spec from another generator version."""
    gen = get(spec.generator, spec.params)
    if gen.version != spec.version:
        raise FactorbenchError(f"{spec.generator}: this file was made by version {spec.version}, this installation "
                               f"has version {gen.version}; regenerate the file or install a matching factorbench")
    return gen
