"""Base class of the datasets drawn by the 3D renderer (:mod:`factorbench.generators.render`).

The render backend is a run-time choice, not part of the dataset spec: backends agree within a stated
tolerance (DATASETS.md), and the file's manifest records which one made the pixels.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .base import Generator
from .render import get_backend


class RenderedGenerator(Generator, register=False):
    """A generator whose images come from the 3D renderer; ``backend`` is auto, gl, cpu or pyrender."""

    options: ClassVar[tuple[str, ...]] = ("backend",)

    def __init__(self, params: Any = None, *, backend: str = "auto", **overrides: Any) -> None:
        super().__init__(params, **overrides)
        if backend != "auto":
            get_backend(backend)  # fails early, with the reason, for an unknown or unavailable backend
        self.backend = backend

    def renderer_identity(self) -> str:
        return f"{super().renderer_identity()} via {get_backend(self.backend).identity()}"
