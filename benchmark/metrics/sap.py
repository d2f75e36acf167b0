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
  capped near 0.2. Kept for reproducing published numbers. The SVMs (one per code, factor and class)
  are solved together by a vectorised replay of liblinear's own iterations, which gives the
  predictions of sklearn's ``LinearSVC`` (see :data:`SVM_SOLVERS`).
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

from ._base import (MetricInputError, MetricResult, check_classes, check_codes, check_factors, check_seed,
                    constant_code_warnings, with_warnings)
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


# --------------------------------------------------------------------------- discrete mode: one-feature linear SVMs
#
# LinearSVC(C, class_weight="balanced") with its defaults (penalty "l2", loss "squared_hinge", fit_intercept,
# intercept_scaling 1, multi_class "ovr", tol 1e-4, max_iter 1000; ``dual="auto"`` picks the primal solver
# when there are more samples than features) calls liblinear's L2R_L2LOSS_SVC solver. On one code (values x_j)
# each binary sub-problem is, with theta = (w, b) (the intercept is an extra feature of value 1 and is
# penalised too),
#
#     f(w, b) = 1/2 (w^2 + b^2) + sum_j C_j max(0, 1 - y_j (w x_j + b))^2,      y_j in {-1, +1}.
#
# One-vs-rest (more than 2 classes): one sub-problem per class c, y_j = +1 on class c with C_j = C n / (m n_c)
# (the balanced weight of class c) and y_j = -1 on every other sample with the unweighted C_j = C. Two classes:
# one sub-problem, the larger label positive, each sample weighted by the balanced weight of its own class.
# Prediction: the class with the largest w_c x + b_c (the first on ties); with two classes the larger label
# where w x + b > 0.
#
# liblinear minimises f with a trust-region Newton method (TRON, tron.cpp) from (0, 0) and stops once
# |grad f| <= tol max(min(n_pos, n_neg), 1) / n |grad f(0, 0)|, which is far enough from the optimum to change
# some predictions (on 10,000 x 10 codes x 5 factors the exact optimum changes 5 of the 50 accuracies). So
# the vectorised solver runs the same TRON iterations (trust-region conjugate gradient, acceptance and radius
# rules, stopping tests) on all sub-problems at once, and reaches liblinear's answer up to rounding. TRON only
# needs f, its gradient and its Hessian on the active set {j : y_j (w x_j + b) < 1}; on one feature the active
# samples of each sign lie on one side of a threshold in x, so these are differences of prefix sums over the
# samples sorted by (class, x): O(log n) per sub-problem and iteration. The sums use x' = (x - mid) / half per
# code, for accuracy. Where a decision of the iteration (an acceptance or stopping test) or a test sample's
# prediction is within rounding of a tie, that (code, factor) pair is refitted with liblinear itself.

#: LinearSVC's defaults that liblinear's stopping rule uses.
LIBLINEAR_TOL = 1e-4
LIBLINEAR_MAX_ITER = 1000
#: TRON's constants (tron.cpp): acceptance thresholds eta and trust-region factors sigma.
_ETA = (1e-4, 0.25, 0.75)
_SIGMA = (0.25, 0.5, 4.0)
#: Relative distance from a tie below which a decision is left to liblinear (rounding differs from its own).
NEAR_TIE = 1e-9
#: Distance of a test sample's two best decision values, relative to (|x| + 1) max_c |(w_c, b_c)|, below which
#: liblinear (whose coefficients differ from these by about 1e-11 relative) might predict the other class.
PREDICTION_TIE = 1e-9
#: Training samples x (code, factor) pairs held at once (prefix sums, keys and temporaries: about 40 bytes each).
CHUNK_ELEMENTS = 1 << 20


@dataclass(frozen=True)
class _Blocks:
    """Training data of one chunk of d codes and the factors with at least two training classes, for sums
    over any threshold set of samples. Per code: ``xr`` (d, n) the sorted values; ``mid``, ``half`` (d,) of
    x' = (x - mid) / half; ``a1``, ``a2`` (d, n + 1) prefix sums of x', x'^2 in that order. Per block
    (factor, code), flat with n + 1 entries per block: ``p1``, ``p2`` prefix sums of x', x'^2 over the
    block's samples sorted by (class, x); flat with n entries per block: ``keys`` = (block * n_max_classes +
    class) * (n + 1) + rank, rank = number of the code's samples with a smaller x (ascending over all blocks,
    so that one searchsorted counts the samples of a class below a threshold)."""

    xr: np.ndarray
    mid: np.ndarray
    half: np.ndarray
    a1: np.ndarray
    a2: np.ndarray
    p1: np.ndarray
    p2: np.ndarray
    keys: np.ndarray


@dataclass(frozen=True)
class _SubProblems:
    """The q binary sub-problems of every code of a chunk, arrays (d, q) or broadcastable. ``factor`` (q,) the
    sub-problem's factor (index into the chunk's factor list); ``c_pos``, ``c_neg`` the C_j of positive and
    negative samples; ``n_pos``, ``n_neg`` their counts; ``eps`` liblinear's relative stopping tolerance;
    ``key_base`` the key of (block, positive class, rank 0); ``before`` the number of flat ``keys`` entries
    before the block's positive segment; ``seg_start``, ``seg_stop`` flat ``p1``/``p2`` indices of that segment."""

    factor: np.ndarray
    c_pos: np.ndarray
    c_neg: np.ndarray
    n_pos: np.ndarray
    n_neg: np.ndarray
    eps: np.ndarray
    key_base: np.ndarray
    before: np.ndarray
    seg_start: np.ndarray
    seg_stop: np.ndarray


@dataclass(frozen=True)
class _Point:
    """f, its gradient (g0, g1) and the Hessian of its loss part (h00, h01, h11; the full Hessian adds the
    identity) at (w, b), arrays (d, q); ``f_scale`` bounds the magnitude of the terms summed into f; ``edge``
    whether a training sample's margin y (w x + b) is within rounding of 1 (it may or may not count as active,
    which changes the Hessian)."""

    f: np.ndarray
    g0: np.ndarray
    g1: np.ndarray
    h00: np.ndarray
    h01: np.ndarray
    h11: np.ndarray
    f_scale: np.ndarray
    edge: np.ndarray


def _blocks(x_train: np.ndarray, labels: list[np.ndarray], n_classes: list[int]) -> _Blocks:
    """:class:`_Blocks` of the codes ``x_train`` (n, d) and the compact training labels of the factors."""
    n, d = x_train.shape
    xt = np.ascontiguousarray(x_train.T)
    order = np.argsort(xt, axis=1)                         # tied values share their rank: any order will do
    xr = np.take_along_axis(xt, order, axis=1)
    first = np.ones((d, n), dtype=bool)
    first[:, 1:] = xr[:, 1:] != xr[:, :-1]
    rank = np.maximum.accumulate(np.where(first, np.arange(n), 0), axis=1)
    lo, hi = xr[:, 0], xr[:, -1]
    mid = lo / 2 + hi / 2                                   # exact for a constant code, whose x' is then 0
    half = hi / 2 - lo / 2
    half = np.where(half > 0, half, 1.0)
    xs = (xr - mid[:, None]) / half[:, None]
    n_max = max(n_classes)
    blocks = np.arange(len(labels) * d).reshape(len(labels), d, 1)
    xb = np.empty((len(labels), d, n))
    keys = np.empty((len(labels), d, n), dtype=np.int64)
    for f, (y, m) in enumerate(zip(labels, n_classes)):
        in_code_order = y[order].astype(np.uint8 if m <= 256 else np.int64)   # small integers sort by radix
        by_class = np.argsort(in_code_order, axis=1, kind="stable")
        xb[f] = np.take_along_axis(xs, by_class, axis=1)
        cls = np.repeat(np.arange(m), np.bincount(y, minlength=m))
        keys[f] = (blocks[f] * n_max + cls) * (n + 1) + np.take_along_axis(rank, by_class, axis=1)
    return _Blocks(xr, mid, half, _prefix(xs), _prefix(xs * xs), _prefix(xb).ravel(), _prefix(xb * xb).ravel(),
                   keys.ravel())


def _prefix(a: np.ndarray) -> np.ndarray:
    """Prefix sums along the last axis with a leading 0."""
    out = np.zeros(a.shape[:-1] + (a.shape[-1] + 1,))
    np.cumsum(a, axis=-1, out=out[..., 1:])
    return out


def _sub_problems(blocks: _Blocks, labels: list[np.ndarray], n_classes: list[int], svm_C: float) -> _SubProblems:
    """The one-vs-rest sub-problems (one per class; one for two classes) of every block of the chunk."""
    d, n = blocks.xr.shape
    n_max = max(n_classes)
    factor, positive, c_pos, c_neg, n_pos, start = [], [], [], [], [], []
    for f, (y, m) in enumerate(zip(labels, n_classes)):
        counts = np.bincount(y, minlength=m)
        weight = n / (m * counts)                          # sklearn's class_weight="balanced"
        starts = np.concatenate([[0], np.cumsum(counts)])
        for c in ([1] if m == 2 else range(m)):
            factor.append(f)
            positive.append(c)
            c_pos.append(svm_C * weight[c])
            c_neg.append(svm_C * weight[0] if m == 2 else svm_C)
            n_pos.append(counts[c])
            start.append(starts[c])
    factor_, positive_, start_ = np.array(factor), np.array(positive), np.array(start)
    n_pos_ = np.array(n_pos, dtype=np.float64)[None, :]
    eps = LIBLINEAR_TOL * np.maximum(np.minimum(n_pos_, n - n_pos_), 1.0) / n
    block = factor_[None, :] * d + np.arange(d)[:, None]
    seg_start = block * (n + 1) + start_
    return _SubProblems(factor_, np.array(c_pos)[None, :], np.array(c_neg)[None, :], n_pos_, n - n_pos_, eps,
                        (block * n_max + positive_) * (n + 1), block * n + start_, seg_start,
                        seg_start + n_pos_.astype(np.int64))


def _point(blocks: _Blocks, sp: _SubProblems, w: np.ndarray, b: np.ndarray) -> _Point:
    """:class:`_Point` at (w, b) (d, q). Positives are active where w x + b < 1 (x below (1 - b) / w for
    w > 0, above for w < 0, all or none for w = 0), negatives where w x + b > -1. The sums run in x' and are
    mapped back: w x + b = w' x' + b' with w' = half w, b' = b + mid w."""
    d, n = blocks.xr.shape
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t_pos, t_neg = (1.0 - b) / w, (-1.0 - b) / w
    pos_below, neg_below = w >= 0, w <= 0                  # which side of the threshold is active
    # number of the code's samples with x < t (searchsorted 'left'), or x <= t via the next float up
    t_pos = np.where(w > 0, t_pos, np.nextafter(t_pos, np.inf))
    t_neg = np.where(w < 0, t_neg, np.nextafter(t_neg, np.inf))
    t_pos = np.where(w == 0, np.where(b < 1.0, np.inf, -np.inf), t_pos)
    t_neg = np.where(w == 0, np.where(b > -1.0, np.inf, -np.inf), t_neg)
    r_pos = np.empty(w.shape, dtype=np.int64)
    r_neg = np.empty(w.shape, dtype=np.int64)
    for i in range(d):
        r_pos[i] = np.searchsorted(blocks.xr[i], t_pos[i])
        r_neg[i] = np.searchsorted(blocks.xr[i], t_neg[i])
    edge = _at_margin(blocks.xr, r_pos, w, b, 1.0) | _at_margin(blocks.xr, r_neg, w, b, -1.0)
    # positives of the block with rank < r: a prefix of the block's positive segment
    k_pos = np.searchsorted(blocks.keys, sp.key_base + r_pos) - sp.before
    k_neg = np.searchsorted(blocks.keys, sp.key_base + r_neg) - sp.before
    p1, p2 = blocks.p1, blocks.p2
    seg1, seg2 = p1[sp.seg_stop] - p1[sp.seg_start], p2[sp.seg_stop] - p2[sp.seg_start]
    below1, below2 = p1[sp.seg_start + k_pos] - p1[sp.seg_start], p2[sp.seg_start + k_pos] - p2[sp.seg_start]
    n_p = np.where(pos_below, k_pos, sp.n_pos - k_pos)
    s1_p = np.where(pos_below, below1, seg1 - below1)
    s2_p = np.where(pos_below, below2, seg2 - below2)
    # negatives with rank < r: all of the code's samples below r minus the positives below r
    rows = np.arange(d)[:, None]
    pos1, pos2 = p1[sp.seg_start + k_neg] - p1[sp.seg_start], p2[sp.seg_start + k_neg] - p2[sp.seg_start]
    all1, all2 = blocks.a1[rows, r_neg], blocks.a2[rows, r_neg]
    k_below = r_neg - k_neg
    n_n = np.where(neg_below, k_below, sp.n_neg - k_below)
    s1_n = np.where(neg_below, all1 - pos1, (blocks.a1[:, -1:] - all1) - (seg1 - pos1))
    s2_n = np.where(neg_below, all2 - pos2, (blocks.a2[:, -1:] - all2) - (seg2 - pos2))
    # f, gradient and loss Hessian in (w', b'), then in (w, b) = A^-1 (w', b'), A = [[half, 0], [mid, 1]]
    s, m = blocks.half[:, None], blocks.mid[:, None]
    wp, bp = s * w, b + m * w
    cp, cn = sp.c_pos, sp.c_neg
    loss = (cp * ((1.0 - bp) ** 2 * n_p - 2.0 * (1.0 - bp) * wp * s1_p + wp * wp * s2_p)
            + cn * ((1.0 + bp) ** 2 * n_n + 2.0 * (1.0 + bp) * wp * s1_n + wp * wp * s2_n))
    h00 = 2.0 * (cp * s2_p + cn * s2_n)
    h01 = 2.0 * (cp * s1_p + cn * s1_n)
    h11 = 2.0 * (cp * n_p + cn * n_n)
    g0 = h00 * wp + h01 * bp - 2.0 * (cp * s1_p - cn * s1_n)
    g1 = h01 * wp + h11 * bp - 2.0 * (cp * n_p - cn * n_n)
    f_scale = (0.5 * (w * w + b * b) + cp * n_p * (np.abs(1.0 - bp) + np.abs(wp)) ** 2
               + cn * n_n * (np.abs(1.0 + bp) + np.abs(wp)) ** 2)
    return _Point(0.5 * (w * w + b * b) + loss, w + s * g0 + m * g1, b + g1,
                  s * s * h00 + 2.0 * s * m * h01 + m * m * h11, s * h01 + m * h11, h11, f_scale, edge)


def _at_margin(xr: np.ndarray, r: np.ndarray, w: np.ndarray, b: np.ndarray, level: float) -> np.ndarray:
    """Whether one of the two sorted values next to the threshold position ``r`` (d, q) has w x + b within
    :data:`NEAR_TIE` of ``level`` (relative to |w x| + |b| + 1): liblinear, whose (w, b) differ from these by
    rounding, may put that sample on the other side of the margin."""
    rows = np.arange(xr.shape[0])[:, None]
    out = np.zeros(w.shape, dtype=bool)
    for pos in (np.clip(r - 1, 0, xr.shape[1] - 1), np.clip(r, 0, xr.shape[1] - 1)):
        x = xr[rows, pos]
        out |= np.abs(w * x + b - level) <= NEAR_TIE * (np.abs(w * x) + np.abs(b) + 1.0)
    return out


def _near(a: np.ndarray, b: np.ndarray, absolute: np.ndarray | float = 0.0) -> np.ndarray:
    """Whether a and b are within rounding of each other (relative :data:`NEAR_TIE`, plus ``absolute``)."""
    return np.abs(a - b) <= NEAR_TIE * (np.abs(a) + np.abs(b)) + absolute


def _trcg(delta: np.ndarray, pt: _Point) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """TRON's truncated conjugate gradient (tron.cpp ``trcg``) on H s = -g within |s| <= delta, all
    sub-problems at once: step (s0, s1), residual (r0, r1) and whether a test was within rounding of a tie."""
    s0, s1 = np.zeros_like(delta), np.zeros_like(delta)
    r0, r1 = -pt.g0, -pt.g1
    d0, d1 = r0.copy(), r1.copy()
    cg_tol = 0.1 * np.hypot(pt.g0, pt.g1)
    rtr = r0 * r0 + r1 * r1
    live = np.ones(delta.shape, dtype=bool)
    unsure = np.zeros(delta.shape, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(50):                                # 2 variables: 2 steps in exact arithmetic
            r_norm = np.hypot(r0, r1)
            unsure |= live & _near(r_norm, cg_tol)
            live &= ~(r_norm <= cg_tol)
            if not live.any():
                break
            hd0 = d0 + pt.h00 * d0 + pt.h01 * d1
            hd1 = d1 + pt.h01 * d0 + pt.h11 * d1
            alpha = rtr / (d0 * hd0 + d1 * hd1)
            t0, t1 = s0 + alpha * d0, s1 + alpha * d1
            t_norm = np.hypot(t0, t1)
            unsure |= live & _near(t_norm, delta)
            out = live & (t_norm > delta)                  # to the trust-region boundary along d, then stop
            std, sts, dtd = s0 * d0 + s1 * d1, s0 * s0 + s1 * s1, d0 * d0 + d1 * d1
            rad = np.sqrt(std * std + dtd * (delta * delta - sts))
            to_edge = np.where(std >= 0, (delta * delta - sts) / (std + rad), (rad - std) / dtd)
            step = np.where(out, to_edge, alpha)
            s0, s1 = np.where(live, s0 + step * d0, s0), np.where(live, s1 + step * d1, s1)
            r0, r1 = np.where(live, r0 - step * hd0, r0), np.where(live, r1 - step * hd1, r1)
            live &= ~out
            rnew = r0 * r0 + r1 * r1
            beta = rnew / rtr
            d0, d1 = np.where(live, beta * d0 + r0, d0), np.where(live, beta * d1 + r1, d1)
            rtr = np.where(live, rnew, rtr)
        unsure |= live                                     # did not finish: leave it to liblinear
    return s0, s1, r0, r1, unsure


def _tron(blocks: _Blocks, sp: _SubProblems) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """liblinear's TRON (tron.cpp ``tron``) on every sub-problem at once, from (0, 0): (w, b) (d, q) and whether
    a decision of the iteration was within rounding of a tie (then liblinear may have taken the other branch)."""
    eta0, eta1, eta2 = _ETA
    sigma1, sigma2, sigma3 = _SIGMA
    shape = (blocks.xr.shape[0], len(sp.factor))
    w, b = np.zeros(shape), np.zeros(shape)
    pt = _point(blocks, sp, w, b)
    delta = np.hypot(pt.g0, pt.g1)
    g_stop = sp.eps * delta
    search = ~(delta <= g_stop)
    first = np.ones(shape, dtype=bool)                     # no step accepted yet
    accepted = np.zeros(shape, dtype=np.int64)
    unsure = np.zeros(shape, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for _ in range(LIBLINEAR_MAX_ITER):                # rounds, accepted or not (TRON needs a handful)
            if not search.any():
                break
            s0, s1, r0, r1, cg_unsure = _trcg(delta, pt)
            new = _point(blocks, sp, w + s0, b + s1)
            gs = pt.g0 * s0 + pt.g1 * s1
            prered = -0.5 * (gs - (s0 * r0 + s1 * r1))
            actred = pt.f - new.f
            f_round = 1e-13 * (pt.f_scale + new.f_scale)   # rounding of f (and of actred)
            snorm = np.hypot(s0, s1)
            delta = np.where(search & first, np.minimum(delta, snorm), delta)
            curv = new.f - pt.f - gs
            alpha = np.where(curv <= 0, sigma3, np.maximum(sigma1, -0.5 * (gs / curv)))
            below = [actred < e * prered for e in (eta0, eta1, eta2)]
            radius = np.where(below[0], np.minimum(np.maximum(alpha, sigma1) * snorm, sigma2 * delta),
                     np.where(below[1], np.maximum(sigma1 * delta, np.minimum(alpha * snorm, sigma2 * delta)),
                     np.where(below[2], np.maximum(sigma1 * delta, np.minimum(alpha * snorm, sigma3 * delta)),
                              np.maximum(delta, np.minimum(alpha * snorm, sigma3 * delta)))))
            take = search & (actred > eta0 * prered)
            tests = [_near(actred, e * prered, f_round) for e in (eta0, eta1, eta2)]
            unsure |= search & (cg_unsure | tests[0] | tests[1] | tests[2] | (np.abs(curv) <= f_round))
            delta = np.where(search, radius, delta)
            w, b = np.where(take, w + s0, w), np.where(take, b + s1, b)
            pt = _Point(*(np.where(take, new_v, old_v) for new_v, old_v in zip(
                (new.f, new.g0, new.g1, new.h00, new.h01, new.h11, new.f_scale, new.edge),
                (pt.f, pt.g0, pt.g1, pt.h00, pt.h01, pt.h11, pt.f_scale, pt.edge))))
            unsure |= take & pt.edge
            accepted += take
            first &= ~take
            g_norm = np.hypot(pt.g0, pt.g1)
            unsure |= take & _near(g_norm, g_stop)
            stop = take & (g_norm <= g_stop)
            small = 1e-12 * np.abs(pt.f)                   # the stall test: both reductions below it
            act_small, pre_small = np.abs(actred) <= small, np.abs(prered) <= small
            stop |= search & ((pt.f < -1.0e32) | ((np.abs(actred) <= 0) & (prered <= 0)) | (act_small & pre_small))
            act_edge = _near(np.abs(actred), small, f_round)
            pre_edge = _near(np.abs(prered), small)
            unsure |= search & ((act_edge & (pre_small | pre_edge)) | (pre_edge & act_small)
                                | ((np.abs(actred) <= f_round) & (prered <= 0)))
            stop |= accepted >= LIBLINEAR_MAX_ITER
            broken = search & ~(np.isfinite(pt.f) & np.isfinite(g_norm) & np.isfinite(delta))
            unsure |= broken
            search &= ~(stop | broken)
    return w, b, unsure | search


def _liblinear_predict(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, svm_C: float,
                       seed: int) -> np.ndarray:
    """LinearSVC(C=svm_C, class_weight="balanced") on one code (primal solver, as ``dual="auto"`` picks here)."""
    svm = LinearSVC(C=svm_C, class_weight="balanced", dual=False, random_state=seed)
    svm.fit(x_train[:, None], y_train)
    return svm.predict(x_test[:, None])


def _liblinear_accuracy(inp: _Inputs) -> np.ndarray:
    """S_ik = test accuracy of sklearn's LinearSVC (liblinear) on c_i alone, one fit per (code, factor)."""
    z_train, z_test = inp.codes[inp.train], inp.codes[inp.test]
    out = np.zeros((inp.codes.shape[1], inp.labels.shape[1]))
    for k in range(inp.labels.shape[1]):
        y_train, y_test = inp.labels[inp.train, k], inp.labels[inp.test, k]
        if _single_class(y_train):
            out[:, k] = np.mean(y_test == y_train[0])
            continue
        for i in range(z_train.shape[1]):
            out[i, k] = np.mean(_liblinear_predict(z_train[:, i], y_train, z_test[:, i], inp.svm_C, inp.seed) == y_test)
    return out


def _predict(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Predicted compact classes (n_test, d) of the lines w (d, q), b (d, q) at x (n_test, d), as sklearn: the
    first largest w_c x + b_c, or with one line (two classes) class 1 where w x + b > 0. Also (d,) whether a
    test sample's decision is within :data:`PREDICTION_TIE` (|x| + 1) max_c |(w_c, b_c)| of a tie."""
    tie = PREDICTION_TIE * (np.abs(x) + 1.0) * np.hypot(w, b).max(axis=1)
    top = x * w[:, 0] + b[:, 0]
    if w.shape[1] == 1:
        return (top > 0).astype(np.int64), (np.abs(top) <= tie).any(axis=0)
    best = np.zeros(x.shape, dtype=np.int64)
    second = np.full(x.shape, -np.inf)
    score, low = np.empty_like(x), np.empty_like(x)
    wins = np.empty(x.shape, dtype=bool)
    for c in range(1, w.shape[1]):                         # running top two; a tie keeps the first class
        np.multiply(x, w[:, c], out=score)
        score += b[:, c]
        np.minimum(top, score, out=low)
        np.maximum(second, low, out=second)
        np.greater(score, top, out=wins)
        np.maximum(top, score, out=top)
        np.copyto(best, c, where=wins)
    return best, (top - second <= tie).any(axis=0)


def _vectorised_accuracy(inp: _Inputs) -> np.ndarray:
    """S_ik = test accuracy of the same SVMs, liblinear's iterations run on all sub-problems at once (see the
    comment above :data:`LIBLINEAR_TOL`); (code, factor) pairs with a decision within rounding of a tie are
    refitted with liblinear."""
    z_train, z_test = inp.codes[inp.train], inp.codes[inp.test]
    n, d_all = z_train.shape
    out = np.zeros((d_all, inp.labels.shape[1]))
    factors, classes, labels = [], [], []
    for k in range(inp.labels.shape[1]):
        present, compact = np.unique(inp.labels[inp.train, k], return_inverse=True)
        if len(present) < 2:
            out[:, k] = np.mean(inp.labels[inp.test, k] == present[0])
            continue
        factors.append(k)
        classes.append(present)
        labels.append(compact.ravel())
    if not factors:
        return out
    n_classes = [len(c) for c in classes]
    per_code = max(len(factors) * n, len(inp.test))
    step = max(1, CHUNK_ELEMENTS // per_code)
    for lo in range(0, d_all, step):
        codes = np.arange(lo, min(lo + step, d_all))
        blocks = _blocks(z_train[:, codes], labels, n_classes)
        sp = _sub_problems(blocks, labels, n_classes, inp.svm_C)
        w, b, unsure = _tron(blocks, sp)
        x = z_test[:, codes]
        for f, k in enumerate(factors):
            cols = np.flatnonzero(sp.factor == f)
            pred, near_tie = _predict(x, w[:, cols], b[:, cols])
            y_test = inp.labels[inp.test, k]
            out[codes, k] = np.mean(classes[f][pred] == y_test[:, None], axis=0)
            for j in np.flatnonzero(near_tie | unsure[:, cols].any(axis=1)):
                i = codes[j]
                out[i, k] = np.mean(_liblinear_predict(z_train[:, i], inp.labels[inp.train, k], z_test[:, i],
                                                       inp.svm_C, inp.seed) == y_test)
    return out


#: Solvers of the discrete mode's SVMs: "liblinear" fits sklearn's LinearSVC per (code, factor) (the
#: reference); "vectorised" replays liblinear's iterations on all sub-problems at once and gives the same
#: predictions (pairs within rounding of a tie are refitted with liblinear).
SVM_SOLVERS: dict[str, Callable[[_Inputs], np.ndarray]] = {
    "liblinear": _liblinear_accuracy,
    "vectorised": _vectorised_accuracy,
}
#: The solver that ``mode="discrete"`` uses.
DEFAULT_SVM_SOLVER = "vectorised"


def _linear_svm_accuracy(inp: _Inputs) -> np.ndarray:
    """S_ik = test accuracy of LinearSVC(C=svm_C, class_weight="balanced") on c_i alone (the solver is
    :data:`DEFAULT_SVM_SOLVER`). A factor with a single class in the training split is predicted as that class."""
    return SVM_SOLVERS[DEFAULT_SVM_SOLVER](inp)


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
    return with_warnings(SAPResult(math.fsum(gaps) / len(gaps), gaps, matrix, top, mode), constant_code_warnings(z))
