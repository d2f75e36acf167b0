"""Mutual Information Gap (Chen et al. 2018, "Isolating Sources of Disentanglement in Variational
Autoencoders", NeurIPS, section 4.1), estimated as in disentanglement_lib.

Each code dimension c_i is cut into ``bins`` equal-width bins over its own min..max; each factor is
used at its discrete classes v_k (grid factors at their own classes, continuous factors binned, see
:func:`factor_classes`). With the plug-in mutual information I(c_i; v_k) in nats,

    gap_k = (I(c_(1); v_k) - I(c_(2); v_k)) / H(v_k),     MIG = (1 / K) sum_k gap_k,

where c_(1), c_(2) are the codes with the largest and second largest mutual information with v_k.
With a single code dimension (D = 1) there is no second code: gap_k = I(c_1; v_k) / H(v_k).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._base import (MetricResult, check_codes, check_positive_int, constant_code_warnings, discrete_factors,
                    equal_width_bins, with_warnings)
from ._information import entropies, mutual_information_matrix

__all__ = ["MIGResult", "binned_mutual_information", "discrete_factors", "first_appearance_labels", "mig",
           "top_two_gap"]


@dataclass(frozen=True, eq=False)
class MIGResult(MetricResult):
    """``score`` = MIG; ``factor_gaps`` (K,) the normalised gap of every factor; ``mutual_information``
    (D, K) I(c_i; v_k) in nats; ``factor_entropy`` (K,) H(v_k) in nats; ``top_codes`` (K,) the code
    with the largest mutual information with each factor (the first one on ties)."""

    headline: ClassVar[tuple[str, ...]] = ("score",)

    score: float
    factor_gaps: np.ndarray
    mutual_information: np.ndarray
    factor_entropy: np.ndarray
    top_codes: np.ndarray


def binned_mutual_information(codes: np.ndarray, labels: np.ndarray, bins: int) -> np.ndarray:
    """Plug-in mutual information (D, K) in nats between every code dimension, cut into ``bins``
    equal-width bins over its own min..max, and every column of discrete ``labels``. A constant code
    falls into one bin and has zero mutual information with everything.

    The bins of each code are relabelled in order of first appearance, so that a code and its
    negation (the same partition with reversed bin numbers) give bit-identical estimates."""
    binned = equal_width_bins(codes, bins)
    return mutual_information_matrix(first_appearance_labels(binned), labels)


def first_appearance_labels(labels: np.ndarray) -> np.ndarray:
    """Relabel every column of integer ``labels`` (N, M) to 0, 1, 2, ... in order of first appearance
    down the rows: two columns that make the same partition of the samples get identical labels."""
    out = np.empty(labels.shape, dtype=np.int64)
    for j in range(labels.shape[1]):
        values, first, inverse = np.unique(labels[:, j], return_index=True, return_inverse=True)
        rank = np.empty(len(values), dtype=np.int64)
        rank[np.argsort(first)] = np.arange(len(values))
        out[:, j] = rank[inverse.ravel()]
    return out


def top_two_gap(matrix: np.ndarray) -> np.ndarray:
    """Per column of ``matrix`` (D, K): largest minus second largest entry; with D = 1 the entry itself."""
    if matrix.shape[0] == 1:
        return matrix[0].copy()
    top_two = -np.partition(-matrix, 1, axis=0)[:2]
    return top_two[0] - top_two[1]


def mig(codes: Any, factors: Any, *, classes: Any = None, bins: int = 20, factor_bins: int = 20) -> MIGResult:
    """Mutual Information Gap of ``codes`` (N, D) with respect to ``factors`` (N, K).

    Codes are cut into ``bins`` (default 20) equal-width bins over their own range; factors are used
    at ``classes`` when given, otherwise discretised by :func:`factor_classes` with ``factor_bins``.
    Score in [0, 1]: 1 when each factor is captured by one code and no other code carries information
    about it; 0 for constant codes and when two codes carry the same information (duplicates).
    """
    z = check_codes(codes)
    bins = check_positive_int("bins", bins, 2)
    labels = discrete_factors(factors, len(z), classes, factor_bins)
    mi = binned_mutual_information(z, labels, bins)
    h = entropies(labels)
    # Plug-in estimates satisfy I(c; v) <= H(v); clip only against rounding.
    gaps = np.clip(top_two_gap(mi) / h, 0.0, 1.0)
    top = np.argmax(mi, axis=0).astype(np.int64)
    return with_warnings(MIGResult(math.fsum(gaps) / len(gaps), gaps, mi, h, top), constant_code_warnings(z))
