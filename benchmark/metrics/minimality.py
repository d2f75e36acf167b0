"""Minimality and sufficiency (Almudévar & Ortega 2025, "Rethinking Disentanglement under Dependent
Factors of Variation", section 4.3, equations (5) and (6), estimated as in section 4.4).

For a code dimension z_j and a factor y_i (x the input):

    m_ij = I(z_j; y_i) / I(z_j; x)      (eq. 5: the fraction of z_j's information that is about y_i)
    s_ij = I(y_i; z_j) / I(y_i; x)      (eq. 6: the fraction of y_i's information that z_j captures)

    minimality  = (1/D) sum_j max_i m_ij,     sufficiency = (1/K) sum_i max_j s_ij.

Section 4.4: codes are discretised into equal-width bins (15 in the paper) and factors are
categorical, so every term is a plug-in (empirical) quantity, and because a deterministic code is a
function of x, I(z_j; x) = H(z_j) and I(y_i; x) = H(y_i) (the factors are functions of x too).

Unlike the classic metrics, both scores stay at 1 for a perfectly disentangled code whatever the
dependence between factors: if z_j is a bijection of y_j then I(z_j; y_j) = H(z_j) = H(y_j).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._base import (MetricInputError, MetricResult, check_classes, check_codes, check_factors, check_positive_int,
                    check_seed, constant_code_warnings, equal_width_bins, factor_classes, with_warnings)
from ._information import entropies, mutual_information_matrix

__all__ = ["CONSTANT_CODE_RULES", "MinimalitySufficiencyResult", "minimality_sufficiency"]


def _exclude(code_minimality: np.ndarray, informative: np.ndarray) -> float:
    """Average over informative codes only (a constant code carries no information, so no nuisance)."""
    return float(code_minimality[informative].mean()) if informative.any() else 0.0


def _zero(code_minimality: np.ndarray, informative: np.ndarray) -> float:
    """Average over all codes, a constant code counting as m = 0 (it attributes nothing to any factor)."""
    return float(code_minimality.mean())


#: How a constant code dimension (H(z_j) = 0, so m_ij = 0/0) enters the minimality average.
CONSTANT_CODE_RULES: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "exclude": _exclude,
    "zero": _zero,
}


@dataclass(frozen=True, eq=False)
class MinimalitySufficiencyResult(MetricResult):
    """Minimality and sufficiency of a code (Almudévar & Ortega 2025, eqs. 5-6).

    ``m`` and ``s`` are (K, D) with rows = factors i and columns = code dimensions j, as m_ij and s_ij
    in the paper; ``code_minimality`` (D,) = max_i m_ij, ``factor_sufficiency`` (K,) = max_j s_ij.
    ``mutual_information`` (K, D), ``code_entropy`` (D,) and ``factor_entropy`` (K,) are the plug-in
    quantities in nats. ``informative`` (D,) marks codes with H(z_j) > 0 (a constant code has m_.j =
    s_.j = 0); ``constant_codes`` says how constant codes entered ``minimality``. ``n_samples`` is the
    number of (possibly resampled) rows the estimate used.
    """

    headline: ClassVar[tuple[str, ...]] = ("minimality", "sufficiency")

    minimality: float
    sufficiency: float
    m: np.ndarray
    s: np.ndarray
    code_minimality: np.ndarray
    factor_sufficiency: np.ndarray
    mutual_information: np.ndarray
    code_entropy: np.ndarray
    factor_entropy: np.ndarray
    informative: np.ndarray
    constant_codes: str
    n_samples: int


def minimality_sufficiency(codes: Any, factors: Any, *, classes: Any = None, bins: int = 15, factor_bins: int = 20,
                           n_samples: int | None = None, constant_codes: str = "exclude",
                           seed: int = 0) -> MinimalitySufficiencyResult:
    """Minimality and sufficiency of ``codes`` (N, D) for ``factors`` (N, K).

    m_ij = I(z_j; y_i) / H(z_j) and s_ij = I(y_i; z_j) / H(y_i) (eqs. 5-6 with I(z_j; x) = H(z_j) and
    I(y_i; x) = H(y_i), section 4.4); minimality = mean_j max_i m_ij, sufficiency = mean_i max_j s_ij.

    - ``bins``: equal-width bins per code dimension over its own min..max (the paper uses 15).
    - ``classes`` (N, K): factor classes used as they are; otherwise factors with at most
      ``factor_bins`` distinct values keep their values as classes and the others are cut into
      ``factor_bins`` equal-width bins (:func:`factor_classes`).
    - ``n_samples``: if given, the estimate uses ``n_samples`` rows drawn with replacement (seeded);
      the authors' code drew 2,000. ``None`` uses every row once.
    - ``constant_codes``: a constant code has H(z_j) = 0 and m_ij = 0/0. ``"exclude"`` (default)
      leaves it out of the minimality average (it carries no information, hence no nuisance;
      Definition 1's I(z_j; x | y_i) = 0 holds); ``"zero"`` counts it as m = 0. Either way its
      entries in ``m`` and ``s`` are 0, and it never counts towards sufficiency. With no informative
      code at all, minimality is 0.
    """
    z = check_codes(codes)
    y = check_factors(factors, len(z))
    bins = check_positive_int("bins", bins, minimum=2)
    factor_bins = check_positive_int("factor_bins", factor_bins, minimum=2)
    seed = check_seed(seed)
    if constant_codes not in CONSTANT_CODE_RULES:
        raise MetricInputError(f"unknown constant_codes rule {constant_codes!r}; use one of {sorted(CONSTANT_CODE_RULES)}")
    if classes is not None:
        classes = check_classes(classes, y.shape)
    labels = factor_classes(y, classes, factor_bins)
    if n_samples is not None:
        n_samples = check_positive_int("n_samples", n_samples, minimum=2)
        rows = np.random.default_rng(seed).integers(0, len(z), size=n_samples)
        z, labels = z[rows], labels[rows]
    single = np.flatnonzero(np.all(labels == labels[:1], axis=0))
    if single.size:
        raise MetricInputError(
            f"factor(s) {single.tolist()} take a single class on the {len(labels)} rows used, so H(y_i) = 0 and "
            "sufficiency is undefined; drop the factor(s) or use more samples (raise n_samples)")

    binned = equal_width_bins(z, bins)
    h_z = entropies(binned)
    h_y = entropies(labels)
    mi = mutual_information_matrix(labels, binned)  # (K, D)
    informative = h_z > 0
    safe_hz = np.where(informative, h_z, 1.0)
    m = np.where(informative[None, :], np.clip(mi / safe_hz[None, :], 0.0, 1.0), 0.0)
    s = np.clip(mi / h_y[:, None], 0.0, 1.0)
    code_minimality = m.max(axis=0)
    factor_sufficiency = s.max(axis=1)
    minimality = CONSTANT_CODE_RULES[constant_codes](code_minimality, informative)
    result = MinimalitySufficiencyResult(
        minimality=minimality,
        sufficiency=float(factor_sufficiency.mean()),
        m=m,
        s=s,
        code_minimality=code_minimality,
        factor_sufficiency=factor_sufficiency,
        mutual_information=mi,
        code_entropy=h_z,
        factor_entropy=h_y,
        informative=informative,
        constant_codes=constant_codes,
        n_samples=len(z),
    )
    return with_warnings(result, constant_code_warnings(z))
