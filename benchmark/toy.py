"""Toy representations with known ground truth, for validating metrics.

Two generators follow Almudévar & Ortega 2025, "Rethinking Disentanglement under Dependent Factors
of Variation", section 5 (``shared/papers/almudevar-ortega-2025-dependent-factors.txt``):

- :func:`dependent` (section 5.1): dependent factors, controlled by ``delta``, and a representation
  whose entanglement is controlled by ``alpha``;
- :func:`nuisance` (section 5.2): independent factors and a representation that also carries a
  nuisance, controlled by ``beta``.

The rest are oracle codes used across the test suite (identity, permuted, rescaled, duplicated,
rotated, random, constant, with noise dimensions) and Gaussian-posterior wrappers of any code.
Every function is pure: randomness comes only from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from factorbench.generators.errors import FactorbenchError

__all__ = [
    "ToyData",
    "constant_codes",
    "dependent",
    "duplicated",
    "gaussian_posterior",
    "identity",
    "nuisance",
    "permuted",
    "random_codes",
    "rescaled",
    "rotated",
    "sample_posterior",
    "with_noise_dims",
]

# Slack for range checks, so that ``delta=1/3`` passes for n = 3 however the caller rounded it.
_SLACK = 1e-12


@dataclass(frozen=True, eq=False)
class ToyData:
    """Factors and codes of one toy experiment.

    ``factor_classes`` (N, n) int64 in 0..K-1; ``factors`` (N, n) float64, the class index as a
    float; ``codes`` (N, n) float64; ``params`` the arguments that made it (name, n, K, ..., seed).
    """

    factor_classes: np.ndarray
    factors: np.ndarray
    codes: np.ndarray
    params: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- argument checks


def _int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise FactorbenchError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise FactorbenchError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _in_range(name: str, value: Any, low: float, high: float, low_text: str, high_text: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise FactorbenchError(f"{name} must be a finite real number, got {value!r}")
    if not (low - _SLACK <= value <= high + _SLACK):
        raise FactorbenchError(f"{name} must lie in [{low_text}, {high_text}] = [{low:.6g}, {high:.6g}], got {value!r}")
    return float(min(max(value, low), high))


def _as_2d(name: str, array: Any) -> np.ndarray:
    a = np.asarray(array, dtype=np.float64)
    if a.ndim != 2:
        raise FactorbenchError(f"{name} must be a 2-D array (samples, dimensions), got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise FactorbenchError(f"{name} must be finite (no NaN or inf)")
    return a


# --------------------------------------------------------------------------- paper toys


def _bin(y_prime: np.ndarray, K: int) -> np.ndarray:
    """The binning B of section 5.1: [0, 1] into K equal-width classes 0..K-1 (1.0 goes to K-1)."""
    return np.clip(np.floor(y_prime * K), 0, K - 1).astype(np.int64)


def _factors(rng: np.random.Generator, n: int, K: int, delta: float, N: int) -> np.ndarray:
    """Section 5.1, first equation: y'_i = delta eps_i + (1-delta)/(n-1) sum_{l != i} eps_l, y_i = B(y'_i)."""
    eps = rng.uniform(0.0, 1.0, size=(N, n))
    others = eps.sum(axis=1, keepdims=True) - eps  # sum over l != i
    y_prime = delta * eps + (1.0 - delta) / (n - 1) * others
    return _bin(y_prime, K)


def dependent(n: int = 4, K: int = 5, delta: float = 1.0, alpha: float = 1.0, N: int = 10_000,
              seed: int = 0) -> ToyData:
    """Dependent factors and an entangled representation (Almudévar & Ortega 2025, section 5.1).

    Factors: eps_i ~ U[0, 1] i.i.d., i = 1..n, and

        y'_i = delta * eps_i + (1 - delta) / (n - 1) * sum_{l != i} eps_l,     y_i = B(y'_i),

    where B bins [0, 1] into K equal-width classes 0..K-1 (the top edge goes to K-1). ``delta = 1``
    gives independent factors; ``delta = 1/n`` makes every y'_i the mean of all eps, so all factors
    are equal (maximal dependence).

    Representation, on the class indices y_j (not on y'_j):

        z'_j = alpha * y_j + (1 - alpha) / (n - 1) * sum_{i != j} y_i,     z_j = cos(pi * z'_j / K).

    ``alpha = 1`` gives z_j = cos(pi y_j / K), a bijection of y_j (perfectly disentangled);
    ``alpha = 1/n`` makes every z'_j the mean of all y_i, so all codes are equal (fully entangled).

    Reading of the paper: it writes B: R -> {0, 1, ..., K} but says "K discrete classes"; we use the
    K classes 0..K-1, for which the cosine argument pi z'_j / K stays in [0, pi (K-1)/K] within
    [0, pi], as the paper requires. z is built from the binned y, as the equation is written.
    """
    n = _int("n", n, 2)
    K = _int("K", K, 2)
    N = _int("N", N, 2)
    delta = _in_range("delta", delta, 1.0 / n, 1.0, "1/n", "1")
    alpha = _in_range("alpha", alpha, 1.0 / n, 1.0, "1/n", "1")
    rng = np.random.default_rng(seed)
    classes = _factors(rng, n, K, delta, N)
    y = classes.astype(np.float64)
    others = y.sum(axis=1, keepdims=True) - y  # sum over i != j (exact: small integers)
    z_prime = alpha * y + (1.0 - alpha) / (n - 1) * others
    codes = np.cos(np.pi * z_prime / K)
    params = {"toy": "dependent", "n": n, "K": K, "delta": delta, "alpha": alpha, "N": N, "seed": seed}
    return ToyData(factor_classes=classes, factors=y, codes=codes, params=params)


def nuisance(n: int = 4, K: int = 5, beta: float = 0.0, N: int = 10_000, seed: int = 0) -> ToyData:
    """Independent factors and a representation carrying a nuisance (Almudévar & Ortega 2025, 5.2).

    Factors as in :func:`dependent` with ``delta = 1`` (independent). Representation:

        z'_j = y_j + beta * eps,     z_j = cos(pi * z'_j / K),     eps ~ U[0, 1],

    with ``beta`` in [0, 1 - 1/K], so z'_j < K and the cosine stays a bijection of [0, pi).

    Reading of the paper: eps carries no index j (unlike the eps_i that make the factors), so we
    draw one eps per sample, shared by all n codes, independent of the factors. It is drawn after
    the factors from the same generator, so ``nuisance(beta=0)`` equals ``dependent(delta=1,
    alpha=1)`` with the same seed.
    """
    n = _int("n", n, 2)
    K = _int("K", K, 2)
    N = _int("N", N, 2)
    beta = _in_range("beta", beta, 0.0, 1.0 - 1.0 / K, "0", "1 - 1/K")
    rng = np.random.default_rng(seed)
    classes = _factors(rng, n, K, 1.0, N)
    eps = rng.uniform(0.0, 1.0, size=(N, 1))
    y = classes.astype(np.float64)
    codes = np.cos(np.pi * (y + beta * eps) / K)
    params = {"toy": "nuisance", "n": n, "K": K, "beta": beta, "N": N, "seed": seed}
    return ToyData(factor_classes=classes, factors=y, codes=codes, params=params)


# --------------------------------------------------------------------------- oracle codes


def identity(factors: np.ndarray) -> np.ndarray:
    """Codes equal to the factors (a copy, float64)."""
    return _as_2d("factors", factors).copy()


def permuted(factors: np.ndarray, seed: int) -> np.ndarray:
    """The factor columns in a seeded order that is never the identity when there are >= 2 columns."""
    f = _as_2d("factors", factors)
    k = f.shape[1]
    order = np.random.default_rng(seed).permutation(k)
    if k >= 2 and np.array_equal(order, np.arange(k)):
        order = np.roll(order, 1)
    return f[:, order].copy()


def rescaled(factors: np.ndarray, scales: Any, offsets: Any = 0.0) -> np.ndarray:
    """Codes ``factors * scales + offsets`` per column; scales must be non-zero (an invertible map)."""
    f = _as_2d("factors", factors)
    s = np.asarray(scales, dtype=np.float64)
    o = np.asarray(offsets, dtype=np.float64)
    for name, a in (("scales", s), ("offsets", o)):
        if a.ndim > 1 or (a.ndim == 1 and a.shape[0] != f.shape[1]):
            raise FactorbenchError(f"{name} must be a scalar or have one value per column ({f.shape[1]}), "
                                   f"got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise FactorbenchError(f"{name} must be finite")
    if np.any(s == 0):
        raise FactorbenchError("scales must be non-zero (a zero scale erases the factor)")
    return f * s + o


def duplicated(factors: np.ndarray) -> np.ndarray:
    """Each factor twice, side by side: columns [f1, f1, f2, f2, ...]."""
    return np.repeat(_as_2d("factors", factors), 2, axis=1)


def rotated(factors: np.ndarray, seed: int) -> np.ndarray:
    """Standardised factors (zero mean, unit std per column) times a seeded random orthogonal matrix.

    The matrix is Haar-distributed (QR of a Gaussian matrix, signs fixed by R's diagonal), so every
    code mixes the factors while row norms of the standardised factors are preserved.
    """
    f = _as_2d("factors", factors)
    std = f.std(axis=0)
    if np.any(std == 0):
        raise FactorbenchError("rotated needs factors with non-zero variance in every column")
    k = f.shape[1]
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((k, k)))
    q = q * np.sign(np.diag(r))
    return ((f - f.mean(axis=0)) / std) @ q


def random_codes(N: int, D: int, seed: int) -> np.ndarray:
    """Codes independent of everything: standard normal, shape (N, D)."""
    N = _int("N", N, 1)
    D = _int("D", D, 1)
    return np.random.default_rng(seed).standard_normal((N, D))


def constant_codes(N: int, D: int, value: float = 0.0) -> np.ndarray:
    """Codes that carry no information: every entry equals ``value``, shape (N, D)."""
    N = _int("N", N, 1)
    D = _int("D", D, 1)
    return np.full((N, D), float(value), dtype=np.float64)


def with_noise_dims(codes: np.ndarray, extra: int, seed: int) -> np.ndarray:
    """The codes followed by ``extra`` standard-normal columns independent of everything."""
    c = _as_2d("codes", codes)
    extra = _int("extra", extra, 0)
    noise = np.random.default_rng(seed).standard_normal((c.shape[0], extra))
    return np.concatenate([c, noise], axis=1)


# --------------------------------------------------------------------------- Gaussian posteriors


def gaussian_posterior(codes: np.ndarray, variance: Any, seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A Gaussian posterior N(mu, diag(variance)) around deterministic codes: ``(mu, logvar)``.

    ``mu`` is a copy of ``codes``; ``logvar = log(variance)`` broadcast to the codes' shape
    (``variance`` a scalar, one value per dimension, or one per entry; every value must be > 0).
    ``seed`` is accepted for a uniform oracle signature and unused: the result is deterministic.
    """
    mu = _as_2d("codes", codes).copy()
    var = np.asarray(variance, dtype=np.float64)
    if not np.all(np.isfinite(var)) or np.any(var <= 0):
        raise FactorbenchError("variance must be finite and > 0 (a Gaussian posterior needs a positive variance)")
    try:
        logvar = np.broadcast_to(np.log(var), mu.shape).copy()
    except ValueError:
        raise FactorbenchError(f"variance of shape {var.shape} does not broadcast to the codes' shape {mu.shape}; "
                               "give a scalar or one value per dimension") from None
    return mu, logvar


def sample_posterior(mu: np.ndarray, logvar: np.ndarray, seed: int) -> np.ndarray:
    """One sample per row of N(mu, diag(exp(logvar))): ``mu + exp(logvar / 2) * eps``, eps ~ N(0, 1)."""
    m = _as_2d("mu", mu)
    lv = _as_2d("logvar", logvar)
    if m.shape != lv.shape:
        raise FactorbenchError(f"mu and logvar must have the same shape, got {m.shape} and {lv.shape}")
    return m + np.exp(0.5 * lv) * np.random.default_rng(seed).standard_normal(m.shape)
