"""Shared fixtures: generated dataset files (made once per test session) and a small i.i.d. generator."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from factorbench.generators import Factor, Generator, get, write_dataset

SMALL_IID_N = 600
#: grid datasets with more samples than this are checked on a sub-grid of themselves (their ``step``
#: parameter: the same images at every k-th value of each factor), at most about SMALL_GRID_N samples
LARGE_GRID_N = 50_000
SMALL_GRID_N = 3_000


def small_grid_step(gen: Generator, target: int = SMALL_GRID_N) -> tuple[int, ...]:
    """Strides that thin a large grid to at most ``target`` samples: repeatedly halve the factor with the
    most values left (the later one on ties), never below two values."""
    sizes = [len(f.values) for f in gen.factors()]
    step = [1] * len(sizes)
    left = lambda k: -(-sizes[k] // step[k])  # noqa: E731  (ceil)
    while int(np.prod([left(k) for k in range(len(sizes))])) > target:
        k = max((k for k in range(len(sizes)) if left(k) > 2), key=lambda k: (left(k), k), default=None)
        if k is None:
            break
        step[k] = -(-sizes[k] // max(2, left(k) // 2))
    return tuple(step)


def shared_test_params(name: str) -> dict:
    """Parameters the shared dataset tests use: the defaults, thinned to a sub-grid for large grids."""
    gen = get(name)
    if gen.is_grid and gen.full_size() > LARGE_GRID_N:
        return {"step": small_grid_step(gen)}
    return {}


@dataclass(frozen=True)
class ToyParams:
    size: int = 8


class ToyIID(Generator, register=False):
    """Two continuous factors drawn i.i.d.; the image is a deterministic function of both."""

    name: ClassVar[str] = "toy-iid"
    version: ClassVar[str] = "0.0.1"
    description: ClassVar[str] = "test generator"
    citation: ClassVar[str] = ""
    Params: ClassVar[type] = ToyParams
    default_n: ClassVar[int] = 1000

    def factors(self) -> tuple[Factor, ...]:
        return (Factor("a", "continuous", low=0.0, high=1.0), Factor("b", "cyclic", low=0.0, high=2 * np.pi,
                                                                      period=2 * np.pi))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (self.params.size, self.params.size, 1)

    def render(self, factors: np.ndarray) -> np.ndarray:
        ramp = np.linspace(0, 1, self.params.size)
        img = factors[:, 0, None, None] * ramp[None, :, None] + np.cos(factors[:, 1])[:, None, None] * ramp[None, None, :]
        return np.rint(127.5 * (img + 1.0)).clip(0, 255).astype(np.uint8)[..., None]


@pytest.fixture
def toy() -> ToyIID:
    return ToyIID()


@pytest.fixture(scope="session")
def generated(tmp_path_factory: pytest.TempPathFactory):
    """``generated(name)`` -> path of that dataset with default settings, written once per session."""
    root = tmp_path_factory.mktemp("datasets")
    cache: dict[str, Path] = {}

    def make(name: str) -> Path:
        if name not in cache:
            gen = get(name, shared_test_params(name))
            n = None if gen.is_grid else SMALL_IID_N  # i.i.d. datasets: a small file of the same spec otherwise
            cache[name] = write_dataset(gen, root / f"{name}.h5", n=n, progress=False)
        return cache[name]

    return make
