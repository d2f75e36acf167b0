"""Modularity and explicitness (Ridgeway & Mozer 2018, "Learning Deep Disentangled Embeddings With the
F-Statistic Loss", NeurIPS, section 3), estimated as in disentanglement_lib.

Modularity: with m_ik the plug-in mutual information (nats) between code c_i, cut into ``bins``
equal-width bins over its own range (as in MIG), and the classes of factor v_k, let
theta_i = max_k m_ik and the template t_ik = theta_i at the argmax, 0 elsewhere. Then

    delta_i = sum_k (m_ik - t_ik)^2 / (theta_i^2 (K - 1)),     modularity_i = 1 - delta_i,

and the score is the mean of modularity_i over the informative codes. Since 0 <= m_ik <= theta_i,
modularity_i lies in [0, 1]: 1 when the code carries information about one factor only.

Conventions where the formula is undefined:

- theta_i = 0 (a constant code, or one with no plug-in information about any factor): the code
  depends on no factor, so nothing about its modularity can be measured; it is left out of the mean
  (its entry in ``code_scores`` is NaN, ``informative`` is False) and adding or removing such a code
  does not change the score. If no code is informative the score is 0. disentanglement_lib instead
  gives these codes modularity 0 and averages over all codes, so unused dimensions lower its score.
- K = 1: every informative code depends on at most the one factor: modularity_i = 1.

Explicitness: for every factor a one-vs-rest logistic regression (one binary model per class, L2,
C = ``C``, lbfgs) predicts the factor's class from the whole code, standardised with the training
split's mean and standard deviation (a constant code stays 0). The factor's score is the mean over
classes of the ROC-AUC of that class's decision function on the test split; the headline is the mean
over factors, and the same on the training split is reported as ``train_score``. A linear score is
monotone in each code, so a single scalar code per factor is not explicit for a factor with more
than two classes: the identity code on n uniform classes scores mean_c max(c, n-1-c) / (n-1)
(7/9 for n = 10); a one-hot code, or any binary factor's identity code, scores 1.

Differences from disentanglement_lib's explicitness: it fits ``LogisticRegression()`` with the
sklearn defaults of its time (liblinear one-vs-rest, intercept penalised) and scores the class
probabilities normalised across classes; here each class's own binary decision value is ranked
(normalising across classes mixes the other classes' models into every class's ranking). It drew
separate train and test samples; here one seeded split of the given samples is used.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy.stats import rankdata
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from ._base import (MetricInputError, MetricResult, check_codes, check_positive_int, check_seed,
                    constant_code_warnings, with_warnings)
from .mig import binned_mutual_information, discrete_factors
from .sap import split_indices

__all__ = ["ExplicitnessResult", "ModularityResult", "explicitness", "modularity", "modularity_from_information",
           "roc_auc"]

# Largest mutual information (nats) that still counts as "no information" (plug-in rounding).
_NO_INFORMATION = 1e-12


@dataclass(frozen=True, eq=False)
class ModularityResult(MetricResult):
    """``score`` = mean modularity over informative codes; ``code_scores`` (D,) modularity_i (NaN for a
    code with no information); ``informative`` (D,) theta_i > 0; ``mutual_information`` (D, K) m_ik in
    nats; ``top_factors`` (D,) the factor each code is most informative about (-1 if none)."""

    headline: ClassVar[tuple[str, ...]] = ("score",)

    score: float
    code_scores: np.ndarray
    informative: np.ndarray
    mutual_information: np.ndarray
    top_factors: np.ndarray


@dataclass(frozen=True, eq=False)
class ExplicitnessResult(MetricResult):
    """``score`` = mean test ROC-AUC over factors; ``factor_scores`` (K,) per factor (mean over its
    classes); ``train_score`` and ``factor_train_scores`` (K,) the same on the training split."""

    headline: ClassVar[tuple[str, ...]] = ("score",)

    score: float
    factor_scores: np.ndarray
    train_score: float
    factor_train_scores: np.ndarray
    n_train: int
    n_test: int


def modularity_from_information(mi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-code modularity (D,) of a mutual-information matrix (D, K) and the mask of informative codes
    (theta_i > 0); uninformative codes get NaN (see the module docstring)."""
    mi = np.asarray(mi, dtype=np.float64)
    theta = mi.max(axis=1)
    informative = theta > _NO_INFORMATION
    scores = np.full(mi.shape[0], np.nan)
    if mi.shape[1] == 1:
        scores[informative] = 1.0
        return scores, informative
    m = mi[informative]
    t = theta[informative]
    # sum_k (m_ik - t_ik)^2 = sum_k m_ik^2 - theta_i^2 (the template removes exactly the top entry).
    off_top = np.sum(m * m, axis=1) - t * t
    delta = off_top / (t * t * (mi.shape[1] - 1))
    scores[informative] = np.clip(1.0 - delta, 0.0, 1.0)
    return scores, informative


def modularity(codes: Any, factors: Any, *, classes: Any = None, bins: int = 20,
               factor_bins: int = 20) -> ModularityResult:
    """Modularity (Ridgeway & Mozer 2018, section 3) of ``codes`` (N, D) with respect to ``factors``
    (N, K): codes binned into ``bins`` equal-width bins as in MIG, factors at ``classes`` when given,
    else :func:`factor_classes` with ``factor_bins``. Score in [0, 1]."""
    z = check_codes(codes)
    bins = check_positive_int("bins", bins, 2)
    labels = discrete_factors(factors, len(z), classes, factor_bins)
    mi = binned_mutual_information(z, labels, bins)
    scores, informative = modularity_from_information(mi)
    score = math.fsum(scores[informative]) / int(informative.sum()) if informative.any() else 0.0
    top = np.where(informative, np.argmax(mi, axis=1), -1).astype(np.int64)
    return with_warnings(ModularityResult(float(score), scores, informative, mi, top), constant_code_warnings(z))


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for the boolean labels ``positive`` (Mann-Whitney U with
    average ranks, so ties count one half); needs at least one positive and one negative."""
    ranks = rankdata(scores)
    n_pos = int(positive.sum())
    n_neg = len(positive) - n_pos
    u = ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def _mean_auc(decision: np.ndarray, model_classes: np.ndarray, truth: np.ndarray) -> float:
    """Mean one-vs-rest ROC-AUC over the classes that have a model and both positives and negatives in
    ``truth``; 0.5 (chance) when no class can be scored."""
    aucs = []
    for column, c in enumerate(model_classes):
        positive = truth == c
        if positive.any() and not positive.all():
            aucs.append(roc_auc(decision[:, column], positive))
    return math.fsum(aucs) / len(aucs) if aucs else 0.5


def _one_vs_rest(x_train: np.ndarray, y_train: np.ndarray, x_eval: list[np.ndarray], C: float, max_iter: int,
                 seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """One binary logistic regression per class of ``y_train`` (class versus the rest); returns the
    classes and, for every array in ``x_eval``, its (n, n_classes) decision values."""
    model_classes = np.unique(y_train)
    outputs = [np.empty((len(x), len(model_classes))) for x in x_eval]
    for column, c in enumerate(model_classes):
        model = LogisticRegression(C=C, solver="lbfgs", max_iter=max_iter, random_state=seed)
        model.fit(x_train, y_train == c)
        for x, out in zip(x_eval, outputs):
            out[:, column] = model.decision_function(x)
    return model_classes, outputs


def explicitness(codes: Any, factors: Any, *, classes: Any = None, test_fraction: float = 0.5, seed: int = 0,
                 C: float = 1.0, max_iter: int = 200, factor_bins: int = 20) -> ExplicitnessResult:
    """Explicitness (Ridgeway & Mozer 2018, section 3) of ``codes`` (N, D) with respect to ``factors``
    (N, K): mean over factors of the one-vs-rest ROC-AUC of logistic regressions (C = ``C``, lbfgs,
    ``max_iter`` iterations) from the standardised code, trained on a seeded split of
    ``1 - test_fraction`` of the samples and scored on the rest. Factors at ``classes`` when given,
    else :func:`factor_classes` with ``factor_bins``. Classes absent from an evaluated split (or from
    the training split) are skipped; a factor with no scorable class scores 0.5. Score in [0, 1];
    0.5 is chance.
    """
    z = check_codes(codes)
    seed = check_seed(seed)
    max_iter = check_positive_int("max_iter", max_iter)
    if isinstance(C, bool) or not isinstance(C, numbers.Real) or not (0 < C < math.inf):
        raise MetricInputError(f"C must be a positive finite number, got {C!r}")
    labels = discrete_factors(factors, len(z), classes, factor_bins)
    train, test = split_indices(len(z), test_fraction, seed)
    mean = z[train].mean(axis=0)
    std = z[train].std(axis=0)
    std = np.where(std > 0, std, 1.0)
    x_train = (z[train] - mean) / std
    x_test = (z[test] - mean) / std
    k = labels.shape[1]
    test_scores = np.full(k, 0.5)
    train_scores = np.full(k, 0.5)
    # Each fit is small: one thread avoids OpenMP start-up and oversubscription (several times faster).
    with threadpool_limits(limits=1):
        for j in range(k):
            y_train, y_test = labels[train, j], labels[test, j]
            if np.all(y_train == y_train[0]):
                continue
            model_classes, (d_train, d_test) = _one_vs_rest(x_train, y_train, [x_train, x_test], float(C), max_iter,
                                                            seed)
            train_scores[j] = _mean_auc(d_train, model_classes, y_train)
            test_scores[j] = _mean_auc(d_test, model_classes, y_test)
    result = ExplicitnessResult(math.fsum(test_scores) / k, test_scores, math.fsum(train_scores) / k, train_scores,
                                len(train), len(test))
    return with_warnings(result, constant_code_warnings(z))
