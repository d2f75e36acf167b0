"""Loading, verifying and looking at dataset files; protocols, metrics and evaluation.

Protocols, metrics and evaluation are imported on first use (they pull in scikit-learn), so that the
data commands start fast.
"""

from importlib import import_module
from typing import Any

from factorbench.generators.errors import FactorbenchError

from .dataset import Dataset, ImageArray, Subset, load
from .show import show
from .verify import VerifyReport, verify

_LAZY = {"evaluate": "evaluation", "get_protocol": "protocols", "list_protocols": "protocols",
         "EvaluationResult": "results", "load_result": "results"}

__all__ = ["Dataset", "EvaluationResult", "FactorbenchError", "ImageArray", "Subset", "VerifyReport", "evaluate",
           "get_protocol", "list_protocols", "load", "load_result", "show", "verify"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
