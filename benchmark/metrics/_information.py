"""Plug-in entropies and mutual information of discrete labels, shared by every information metric.

All quantities are in nats and computed from empirical frequencies (the plug-in estimator):
H(a) = -sum_s p(s) ln p(s), I(a; b) = H(a) + H(b) - H(a, b). Labels are non-negative integers;
counting uses ``np.bincount`` on combined indices, so a (D x K) mutual-information matrix over
N samples costs O(D K N).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "entropy",
    "entropy_from_counts",
    "entropies",
    "joint_entropy",
    "mutual_information",
    "mutual_information_matrix",
]


def entropy_from_counts(counts: np.ndarray, axis: int = -1) -> np.ndarray:
    """Entropy (nats) of the distribution(s) given by non-negative ``counts`` along ``axis``."""
    # sorted along the axis, so the sum (and the estimate) does not depend on how labels are numbered
    counts = np.sort(np.asarray(counts, dtype=np.float64), axis=axis)
    total = counts.sum(axis=axis, keepdims=True)
    p = np.divide(counts, total, out=np.zeros_like(counts), where=total > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=axis)


def _dense(labels: np.ndarray) -> tuple[np.ndarray, int]:
    labels = np.asarray(labels)
    if labels.size and labels.min() >= 0 and labels.max() < 4 * labels.size + 64:
        return labels.astype(np.int64, copy=False), int(labels.max()) + 1 if labels.size else 0
    uniq, inverse = np.unique(labels, return_inverse=True)
    return inverse.ravel().astype(np.int64), len(uniq)


def entropy(labels: np.ndarray) -> float:
    """Plug-in entropy (nats) of one column of integer labels."""
    dense, n = _dense(np.ravel(labels))
    return float(entropy_from_counts(np.bincount(dense, minlength=n)))


def entropies(labels: np.ndarray) -> np.ndarray:
    """Plug-in entropy (nats) of every column of integer labels (N, M) -> (M,)."""
    labels = np.asarray(labels)
    return np.array([entropy(labels[:, j]) for j in range(labels.shape[1])])


def joint_entropy(a: np.ndarray, b: np.ndarray) -> float:
    """Plug-in joint entropy H(a, b) (nats) of two integer label columns."""
    da, na = _dense(np.ravel(a))
    db, nb = _dense(np.ravel(b))
    return float(entropy_from_counts(np.bincount(da * nb + db, minlength=na * nb)))


def mutual_information(a: np.ndarray, b: np.ndarray) -> float:
    """Plug-in mutual information I(a; b) (nats) of two integer label columns; never negative."""
    mi = entropy(a) + entropy(b) - joint_entropy(a, b)
    return max(mi, 0.0)


def mutual_information_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Plug-in mutual information (nats) between every column of ``a`` (N, P) and of ``b`` (N, Q):
    a (P, Q) matrix, entries clipped at 0 against rounding."""
    a = np.asarray(a)
    b = np.asarray(b)
    dense_a = [_dense(a[:, i]) for i in range(a.shape[1])]
    dense_b = [_dense(b[:, j]) for j in range(b.shape[1])]
    ha = np.array([entropy_from_counts(np.bincount(d, minlength=n)) for d, n in dense_a])
    hb = np.array([entropy_from_counts(np.bincount(d, minlength=n)) for d, n in dense_b])
    out = np.empty((a.shape[1], b.shape[1]))
    for i, (da, na) in enumerate(dense_a):
        for j, (db, nb) in enumerate(dense_b):
            hab = entropy_from_counts(np.bincount(da * nb + db, minlength=na * nb))
            out[i, j] = ha[i] + hb[j] - hab
    return np.maximum(out, 0.0)
