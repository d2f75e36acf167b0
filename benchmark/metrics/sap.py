"""Separated Attribute Predictability (Kumar, Sattigeri & Balakrishnan 2018, "Variational Inference of
Disentangled Latent Concepts from Unlabeled Observations", ICLR, section 3).

A score matrix S (D codes x K factors) says how well code c_i alone predicts factor v_k; per factor
the gap between the two best codes is taken and averaged:

    SAP = (1 / K) sum_k (S_(1)k - S_(2)k),

with S_(1)k >= S_(2)k the two largest entries of column k (with D = 1: S_1k itself). The score
matrix comes from one of the modes in :data:`SAP_MODES`:

- ``"continuous"``: S_ik = squared Pearson correlation of c_i and the factor values v_k on all
  samples (0 for a constant code), as disentanglement_lib with ``continuous_factors=True``.
- ``"discrete"``: S_ik = test accuracy of a linear SVM (``LinearSVC``, squared hinge, C = ``svm_C``,
  balanced class weights) trained on c_i alone to predict the class of v_k, with a seeded
  train/test split; as disentanglement_lib with ``continuous_factors=False``. Its multi-class SVM is
  one-vs-rest: each class gets a line w_c x + b_c and the prediction is the largest. On one input
  dimension "class c versus the rest" is separable by one threshold only for the two extreme
  classes, so the middle classes get near-flat lines that never win; a perfect code then reaches
  only a few of 10 uniform classes (accuracy ~0.2-0.3, depending on the code's scale, since C = 0.01
  also penalises the intercept) while the other codes sit at chance (~0.1): SAP of a perfect code is
  capped near 0.2. Kept for reproducing published numbers.
- ``"threshold"``: S_ik = chance-adjusted balanced test accuracy of a threshold classifier on c_i
  alone: a decision tree with at most n_k leaves (n_k - 1 thresholds, n_k = number of classes of
  v_k), balanced class weights. Any code that maps each class to its own interval (monotone or not)
  is classified perfectly, so a perfect code scores 1; balanced accuracy a is adjusted for chance as
  (a - 1/m) / (1 - 1/m) (m classes present in the test split) and clipped at 0, so an uninformative
  code scores about 0 whatever the number and balance of the classes. This is the discrete mode to
  use when a perfect code should score high.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from sklearn.svm import LinearSVC
from sklearn.tree import DecisionTreeClassifier

from ._base import MetricInputError, MetricResult, check_classes, check_codes, check_factors, check_seed
from .mig import discrete_factors, top_two_gap

__all__ = ["SAPResult", "SAP_MODES", "adjusted_balanced_accuracy", "check_fraction", "sap", "split_indices"]


@dataclass(frozen=True, eq=False)
class SAPResult(MetricResult):
    """``score`` = SAP; ``factor_gaps`` (K,) the gap of every factor; ``score_matrix`` (D, K) S_ik;
    ``top_codes`` (K,) the best code for every factor (the first one on ties); ``mode`` the mode used."""

    headline: ClassVar[tuple[str, ...]] = ("score",)

    score: float
    factor_gaps: np.ndarray
    score_matrix: np.ndarray
    top_codes: np.ndarray
    mode: str


def check_fraction(name: str, value: Any) -> float:
    """A real number strictly between 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 < float(value) < 1.0:
        raise MetricInputError(f"{name} must be a number strictly between 0 and 1, got {value!r}")
    return float(value)


def split_indices(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded train/test split of ``n`` samples: ``round(n * test_fraction)`` test samples (at least
    one, and at least one left to train on), drawn by ``default_rng(seed).permutation``; both index
    arrays sorted."""
    if n < 2:
        raise MetricInputError(f"a train/test split needs at least 2 samples, got {n}")
    test_fraction = check_fraction("test_fraction", test_fraction)
    n_test = min(max(int(round(n * test_fraction)), 1), n - 1)
    order = np.random.default_rng(check_seed(seed)).permutation(n)
    return np.sort(order[n_test:]), np.sort(order[:n_test])


@dataclass(frozen=True)
class _Inputs:
    """Everything a score-matrix mode may use."""

    codes: np.ndarray       # (N, D) float64
    values: np.ndarray      # (N, K) float64 factor values
    labels: np.ndarray      # (N, K) int64 factor classes 0..n_k-1
    train: np.ndarray
    test: np.ndarray
    svm_C: float
    seed: int


def _squared_correlation(inp: _Inputs) -> np.ndarray:
    """S_ik = cov(c_i, v_k)^2 / (var c_i var v_k) on all samples; 0 for a constant code. Every sum runs
    over one code's own contiguous row, so permuting the codes permutes S bit for bit."""
    z = np.ascontiguousarray(inp.codes.T)
    y = np.ascontiguousarray(inp.values.T)
    z = z - z.mean(axis=1, keepdims=True)
    y = y - y.mean(axis=1, keepdims=True)
    var_z = (z * z).sum(axis=1)
    var_y = (y * y).sum(axis=1)
    varying = (np.ptp(inp.codes, axis=0) > 0) & (var_z > 0)
    out = np.zeros((z.shape[0], y.shape[0]))
    for k in range(y.shape[0]):
        cov = (z[varying] * y[k]).sum(axis=1)
        out[varying, k] = cov ** 2 / (var_z[varying] * var_y[k])
    return np.clip(out, 0.0, 1.0)


def _single_class(train_labels: np.ndarray) -> bool:
    return bool(np.all(train_labels == train_labels[0]))


def _linear_svm_accuracy(inp: _Inputs) -> np.ndarray:
    """S_ik = test accuracy of LinearSVC(C=svm_C, class_weight="balanced") on c_i alone. The primal
    solver (``dual=False``) reaches the same optimum as disentanglement_lib's default dual solver, faster,
    and without randomness. A factor with a single class in the training split is predicted as that class."""
    z_train, z_test = inp.codes[inp.train], inp.codes[inp.test]
    out = np.zeros((inp.codes.shape[1], inp.labels.shape[1]))
    for k in range(inp.labels.shape[1]):
        y_train, y_test = inp.labels[inp.train, k], inp.labels[inp.test, k]
        if _single_class(y_train):
            out[:, k] = np.mean(y_test == y_train[0])
            continue
        for i in range(z_train.shape[1]):
            svm = LinearSVC(C=inp.svm_C, class_weight="balanced", dual=False, random_state=inp.seed)
            svm.fit(z_train[:, i:i + 1], y_train)
            out[i, k] = np.mean(svm.predict(z_test[:, i:i + 1]) == y_test)
    return out


def adjusted_balanced_accuracy(pred: np.ndarray, truth: np.ndarray) -> float:
    """Balanced accuracy a (mean recall over the m classes present in ``truth``) adjusted for chance,
    (a - 1/m) / (1 - 1/m), clipped to [0, 1]; 0 when ``truth`` holds a single class."""
    present, inverse = np.unique(truth, return_inverse=True)
    m = len(present)
    if m < 2:
        return 0.0
    hits = np.bincount(inverse.ravel(), weights=(pred == truth).astype(np.float64), minlength=m)
    recall = hits / np.bincount(inverse.ravel(), minlength=m)
    a = math.fsum(recall) / m
    return float(min(max((a - 1.0 / m) / (1.0 - 1.0 / m), 0.0), 1.0))


def _threshold_accuracy(inp: _Inputs) -> np.ndarray:
    """S_ik = chance-adjusted balanced test accuracy of a decision tree with at most n_k leaves and
    balanced class weights on c_i alone (0 when the training split holds a single class)."""
    z_train, z_test = inp.codes[inp.train], inp.codes[inp.test]
    out = np.zeros((inp.codes.shape[1], inp.labels.shape[1]))
    for k in range(inp.labels.shape[1]):
        y_train, y_test = inp.labels[inp.train, k], inp.labels[inp.test, k]
        n_classes = len(np.unique(y_train))
        if n_classes < 2:
            continue
        for i in range(z_train.shape[1]):
            tree = DecisionTreeClassifier(max_leaf_nodes=n_classes, class_weight="balanced", random_state=inp.seed)
            tree.fit(z_train[:, i:i + 1], y_train)
            out[i, k] = adjusted_balanced_accuracy(tree.predict(z_test[:, i:i + 1]), y_test)
    return out


SAP_MODES: dict[str, Callable[[_Inputs], np.ndarray]] = {
    "continuous": _squared_correlation,
    "discrete": _linear_svm_accuracy,
    "threshold": _threshold_accuracy,
}


def sap(codes: Any, factors: Any, *, classes: Any = None, mode: str = "continuous", test_fraction: float = 0.5,
        svm_C: float = 0.01, seed: int = 0, factor_bins: int = 20) -> SAPResult:
    """SAP score of ``codes`` (N, D) with respect to ``factors`` (N, K); ``mode`` one of
    :data:`SAP_MODES` (see the module docstring).

    ``"continuous"`` uses the factor values on all samples. The classifier modes use factor classes
    (``classes`` when given, else :func:`factor_classes` with ``factor_bins``), train on a seeded
    split of ``1 - test_fraction`` of the samples and score on the rest; ``svm_C`` is the SVM's C
    (``"discrete"`` only). Score in [0, 1].
    """
    z = check_codes(codes)
    y = check_factors(factors, len(z))
    if not isinstance(mode, str) or mode not in SAP_MODES:
        raise MetricInputError(f"unknown SAP mode {mode!r}; use one of {sorted(SAP_MODES)}")
    if isinstance(svm_C, bool) or not isinstance(svm_C, numbers.Real) or not (0 < svm_C < math.inf):
        raise MetricInputError(f"svm_C must be a positive finite number, got {svm_C!r}")
    seed = check_seed(seed)
    if mode == "continuous":  # uses the factor values on all samples: no classes, no split
        if classes is not None:
            check_classes(classes, y.shape)
        labels, train, test = None, np.arange(len(z)), np.arange(0)
        check_fraction("test_fraction", test_fraction)
    else:
        labels = discrete_factors(y, len(z), classes, factor_bins)
        train, test = split_indices(len(z), test_fraction, seed)
    matrix = SAP_MODES[mode](_Inputs(z, y, labels, train, test, float(svm_C), seed))
    gaps = np.clip(top_two_gap(matrix), 0.0, 1.0)
    top = np.argmax(matrix, axis=0).astype(np.int64)
    return SAPResult(math.fsum(gaps) / len(gaps), gaps, matrix, top, mode)
