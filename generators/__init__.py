"""Dataset generators: factors, specs, the registry, and the writer of dataset files."""

from .base import Generator, generator_for_spec, get, list_datasets
from .errors import FactorbenchError
from .factors import Factor
from .spec import DatasetSpec
from .presets import PRESETS, applicable_presets, resolve_split
from .splits import (CompositionSplit, CorrelatedPair, CorrelatedSplit, ExtrapolationSplit, FactorTable, GapSplit,
                     InterpolationSplit, OrderedSplit, RandomSplit, RecombinationSplit, SplitSpec,
                     sample_correlated_factors, split_from_dict)
from .writer import GenerationInterrupted, Shard, add_split, generate, merge_shards, write_dataset

__all__ = [
    "PRESETS", "CompositionSplit", "CorrelatedPair", "CorrelatedSplit", "DatasetSpec", "ExtrapolationSplit", "Factor",
    "FactorTable", "FactorbenchError", "GapSplit", "GenerationInterrupted", "Generator", "InterpolationSplit",
    "OrderedSplit", "RandomSplit", "RecombinationSplit", "Shard", "SplitSpec", "add_split", "applicable_presets",
    "generate", "generator_for_spec", "get", "list_datasets", "merge_shards", "resolve_split",
    "sample_correlated_factors", "split_from_dict", "write_dataset",
]
