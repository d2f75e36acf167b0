"""Loading, verifying and looking at dataset files (protocols and metrics build on this)."""

from factorbench.generators.errors import FactorbenchError

from .dataset import Dataset, ImageArray, Subset, load
from .show import show
from .verify import VerifyReport, verify

__all__ = ["Dataset", "FactorbenchError", "ImageArray", "Subset", "VerifyReport", "load", "show", "verify"]
