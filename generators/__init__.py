"""Dataset generators: factors, specs, the registry, and the writer of dataset files."""

from . import arrow, square  # noqa: F401  (registers the datasets)
from .base import Generator, generator_for_spec, get, list_datasets
from .errors import FactorbenchError
from .factors import Factor
from .spec import DatasetSpec
from .splits import RandomSplit, SplitSpec, split_from_dict
from .writer import GenerationInterrupted, Shard, generate, merge_shards, write_dataset

__all__ = [
    "DatasetSpec", "Factor", "FactorbenchError", "GenerationInterrupted", "Generator", "RandomSplit", "Shard",
    "SplitSpec", "generate", "generator_for_spec", "get", "list_datasets", "merge_shards", "split_from_dict",
    "write_dataset",
]
