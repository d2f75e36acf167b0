"""Rendering layer for the 3D datasets: one interface, several backends.

``render(mesh, model, view, colours, camera, light, settings, backend="auto") -> uint8 (M, S, S, 3)``
draws M instances of one mesh (see :mod:`.scene` for the conventions). Backends register by name:

- ``gl``: moderngl with a headless EGL context, many instances per draw call (fast; default);
- ``cpu``: a vectorised numpy z-buffer rasteriser, needing no OpenGL (fallback, and the test oracle);
- ``pyrender``: the reference renderer (optional extra ``pyrender``).

``auto`` picks ``gl`` when a GL context can be made, else ``cpu``.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from ..errors import FactorbenchError
from .scene import (Camera, Light, RenderSettings, check_batch, check_orbit_camera, look_at, orbit_views,
                    rotation_z)

BACKENDS: dict[str, type["Backend"]] = {}
_BACKEND_MODULES = {"cpu": ".cpu", "gl": ".gl", "pyrender": ".pyrender_backend"}


class Backend(ABC):
    """A renderer. Subclasses set ``name`` and implement :meth:`render`."""

    name: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            BACKENDS[cls.name] = cls

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """None when the backend can run here, else why not (and what to install)."""
        return None

    def identity(self) -> str:
        """What made the pixels, for the file's manifest (backend, and GL renderer where there is one)."""
        return self.name

    @abstractmethod
    def render(self, mesh: Any, model: np.ndarray, view: np.ndarray, colours: np.ndarray, camera: Camera,
               light: Light, settings: RenderSettings) -> np.ndarray:
        """uint8 images (M, S, S, 3); see :func:`render`."""


def probe_in_child(script: str, timeout: float = 120.0) -> str | None:
    """Run ``script`` in a fresh Python process: None when it exits 0 having printed something, else the
    last line of what it said. Backends probe EGL this way, so that the calling process never initialises
    EGL just to ask (a forked worker could not use it afterwards)."""
    try:
        probe = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as error:
        return f"{type(error).__name__}: {error}"
    if probe.returncode == 0 and probe.stdout.strip():
        return None
    lines = (probe.stderr or probe.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit status {probe.returncode}"


def backend_class(name: str) -> type[Backend]:
    if name not in _BACKEND_MODULES:
        raise FactorbenchError(f"unknown render backend {name!r}; choose from auto, {', '.join(_BACKEND_MODULES)}")
    if name not in BACKENDS:
        importlib.import_module(_BACKEND_MODULES[name], __name__)
    return BACKENDS[name]


_INSTANCES: dict[str, Backend] = {}


def get_backend(name: str = "auto") -> Backend:
    """A backend instance (cached per process); ``auto`` is ``gl`` when available, else ``cpu``."""
    if name == "auto":
        name = "gl" if backend_class("gl").unavailable_reason() is None else "cpu"
    if name not in _INSTANCES:
        cls = backend_class(name)
        reason = cls.unavailable_reason()
        if reason:
            raise FactorbenchError(f"render backend {name!r} is not available: {reason}")
        _INSTANCES[name] = cls()
    return _INSTANCES[name]


def render(mesh: Any, model: np.ndarray, view: np.ndarray, colours: np.ndarray, camera: Camera = Camera(),
           light: Light = Light(), settings: RenderSettings = RenderSettings(), backend: str = "auto") -> np.ndarray:
    """Render M instances of ``mesh`` (an object with ``vertices`` (V,3), ``faces`` (F,3) and
    ``vertex_normals`` (V,3)) with per-instance model and view matrices and base colours."""
    model, view, colours = check_batch(model, view, colours)
    return get_backend(backend).render(mesh, model, view, colours, camera, light, settings)


__all__ = ["BACKENDS", "Backend", "Camera", "Light", "RenderSettings", "backend_class", "get_backend", "look_at",
           "orbit_views", "render", "rotation_z"]
