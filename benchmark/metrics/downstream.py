"""Low-resource downstream prediction (Almudévar & Ortega 2025, section 6.1).

Following Locatello et al. (2019b) as used by Almudévar & Ortega: each factor is predicted by a
random-forest classifier trained on only ``n_train`` (1,000) samples, and its accuracy is measured on
held-out samples. :func:`single_code_accuracy` is the paper's readout: the forest sees **one** code
dimension; for factor i and code j the accuracy is a_ij, the factor's score max_j a_ij (the best single
dimension) and the headline the mean over factors. The paper reports the rank correlation of
disentanglement metrics with it (its Figure 4). :func:`full_code_accuracy` is the same forest on the
**whole** code, with the same samples: what the code holds about each factor at all, however it is spread
over the dimensions, so that the gap between the two is what a single dimension loses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from sklearn.ensemble import RandomForestClassifier

from ._progress import metric_steps
from ._base import (MetricInputError, MetricResult, check_classes, check_codes, check_factors, check_positive_int,
                    check_seed, constant_code_warnings, factor_classes, with_warnings)

__all__ = ["DownstreamResult", "FullCodeAccuracyResult", "full_code_accuracy", "single_code_accuracy"]


@dataclass(frozen=True, eq=False)
class DownstreamResult(MetricResult):
    """``score`` = mean over factors of the best single-code accuracy; ``accuracy`` (D, K) = accuracy of
    code j predicting factor k; ``factor_accuracy`` (K,) its column maxima; ``chance`` (K,) the accuracy
    of always predicting the most frequent training class."""

    headline: ClassVar[tuple[str, ...]] = ("score",)

    score: float
    factor_accuracy: np.ndarray
    accuracy: np.ndarray
    chance: np.ndarray
    n_train: int
    n_test: int


def single_code_accuracy(codes: Any, factors: Any, *, classes: Any = None, groups: Any = None,
                         n_train: int = 1_000, max_test: int = 5_000, n_trees: int = 20, bins: int = 20,
                         seed: int = 0) -> DownstreamResult:
    """Accuracy of random forests (``n_trees`` trees) predicting each factor's class from one code
    dimension, trained on ``n_train`` samples and tested on up to ``max_test`` other samples, both
    drawn (seeded) from the given samples. Factors are used at their classes (continuous factors cut
    into ``bins`` equal-width bins, see :func:`factor_classes`).

    ``groups`` (N,) marks samples that are the same observation (e.g. the dataset row of each sample
    of a correlated split, which is drawn with replacement): no group is in both the training and the
    test samples, so a repeated image never lets a forest score by memorising it."""
    z, labels, train, test, rng = _samples("single_code_accuracy", codes, factors, classes, groups, n_train,
                                           max_test, n_trees, bins, seed)
    d, k = z.shape[1], labels.shape[1]
    accuracy = np.zeros((d, k))
    chance = np.zeros(k)
    for j in metric_steps(range(k), k, f"forests per factor ({d} codes each)"):
        chance[j] = _chance(labels[:, j], train, test)
        for i in range(d):
            accuracy[i, j] = _forest_accuracy(z[:, i:i + 1], labels[:, j], train, test, n_trees, rng)
    factor_accuracy = accuracy.max(axis=0)
    return with_warnings(DownstreamResult(float(factor_accuracy.mean()), factor_accuracy, accuracy, chance, len(train),
                                          len(test)), constant_code_warnings(z))


@dataclass(frozen=True, eq=False)
class FullCodeAccuracyResult(MetricResult):
    """``score`` = mean over factors of the accuracy of a forest on the whole code; ``factor_accuracy``
    (K,) per factor; ``chance`` (K,) the accuracy of always predicting the most frequent training class."""

    headline: ClassVar[tuple[str, ...]] = ("score",)

    score: float
    factor_accuracy: np.ndarray
    chance: np.ndarray
    n_train: int
    n_test: int


def full_code_accuracy(codes: Any, factors: Any, *, classes: Any = None, groups: Any = None,
                       n_train: int = 1_000, max_test: int = 5_000, n_trees: int = 20, bins: int = 20,
                       seed: int = 0) -> FullCodeAccuracyResult:
    """Accuracy of random forests (``n_trees`` trees) predicting each factor's class from the whole code,
    trained on ``n_train`` samples and tested on up to ``max_test`` others: the samples, classes and
    ``groups`` rule of :func:`single_code_accuracy` with the same arguments, so the two are comparable
    sample for sample."""
    z, labels, train, test, rng = _samples("full_code_accuracy", codes, factors, classes, groups, n_train,
                                           max_test, n_trees, bins, seed)
    k = labels.shape[1]
    accuracy, chance = np.zeros(k), np.zeros(k)
    for j in metric_steps(range(k), k, "forests per factor (whole code)"):
        chance[j] = _chance(labels[:, j], train, test)
        accuracy[j] = _forest_accuracy(z, labels[:, j], train, test, n_trees, rng)
    return with_warnings(FullCodeAccuracyResult(float(accuracy.mean()), accuracy, chance, len(train), len(test)),
                         constant_code_warnings(z))


def _forest_accuracy(x: np.ndarray, labels: np.ndarray, train: np.ndarray, test: np.ndarray, n_trees: int,
                     rng: np.random.Generator) -> float:
    """Accuracy on ``test`` of a forest of ``n_trees`` trees fitted on ``train`` (seeded by the next draw of
    ``rng``)."""
    forest = RandomForestClassifier(n_estimators=n_trees, random_state=int(rng.integers(2**31 - 1)), n_jobs=1)
    forest.fit(x[train], labels[train])
    return float(np.mean(forest.predict(x[test]) == labels[test]))


def _chance(labels: np.ndarray, train: np.ndarray, test: np.ndarray) -> float:
    """Accuracy on ``test`` of always predicting the most frequent class of ``train``."""
    counts = np.bincount(labels[train], minlength=labels.max() + 1)
    return float(np.mean(labels[test] == counts.argmax()))


def _samples(metric: str, codes: Any, factors: Any, classes: Any, groups: Any, n_train: int, max_test: int,
             n_trees: int, bins: int, seed: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.random.Generator]:
    """Checked codes, factor classes, training and test rows (no group in both) and the generator that drew
    them, whose next draws seed the forests."""
    z = check_codes(codes)
    y = check_factors(factors, len(z))
    n_train = check_positive_int("n_train", n_train)
    max_test = check_positive_int("max_test", max_test)
    check_positive_int("n_trees", n_trees)
    seed = check_seed(seed)
    if classes is not None:
        classes = check_classes(classes, y.shape)
    labels = factor_classes(y, classes, bins)
    if len(z) < n_train + 10:
        raise MetricInputError(f"{metric} needs more than n_train + 10 = {n_train + 10} samples to "
                               f"train on {n_train} and test on the rest; got {len(z)} (lower n_train)")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(z))
    train, rest = order[:n_train], order[n_train:]
    if groups is not None:
        groups = np.asarray(groups)
        if groups.shape != (len(z),):
            raise MetricInputError(f"groups has shape {groups.shape}; give one group label per sample ({len(z)},)")
        rest = rest[~np.isin(groups[rest], groups[train])]
        if len(rest) < 10:
            raise MetricInputError(f"only {len(rest)} samples share no group with the {n_train} training samples; "
                                   "give more samples or lower n_train")
    return z, labels, train, rest[:max_test], rng
