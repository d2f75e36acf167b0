"""Imports every model family, so that :data:`factorbench.baselines.config.MODELS` is complete."""

from __future__ import annotations

from . import dipvae, factorvae, lsbd, tcvae, vae  # noqa: F401  (registration on import)
from . import aae, adavae, hfsvae, infogan, quessard  # noqa: F401  (registration on import)
from .config import MODELS, get_family, make_config

__all__ = ["MODELS", "get_family", "make_config"]
