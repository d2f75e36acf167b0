"""Loading, verifying and looking at dataset files; protocols, metrics and evaluation."""

from factorbench.generators.errors import FactorbenchError

from .dataset import Dataset, ImageArray, Subset, load
from .evaluate import evaluate
from .protocols import get_protocol, list_protocols
from .results import EvaluationResult, load_result
from .show import show
from .verify import VerifyReport, verify

__all__ = ["Dataset", "EvaluationResult", "FactorbenchError", "ImageArray", "Subset", "VerifyReport", "evaluate",
           "get_protocol", "list_protocols", "load", "load_result", "show", "verify"]
