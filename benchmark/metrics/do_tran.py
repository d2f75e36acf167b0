"""Information metrics of Do & Tran, "Theory and evaluation metrics for learning disentangled
representations" (ICLR 2020).

Two families, both in nats unless normalised:

Quantised (section 3, appendix A.9). Every code dimension z_i is quantised over one fixed range
[``low``, ``high``] (default [-4, 4]) into ``bins`` equal bins (default B = 100), the same range for
every code and every model. A value outside the range falls in the nearest edge bin. The bin masses
Q(s|x) of a Gaussian posterior N(mu, exp(logvar)) are either the exact integral of the density over
the bin (``mass="cdf"``, appendix A.13; the two edge bins also take the tails, so each row sums to 1)
or the authors' approximation, the density at the bin centre renormalised over the bins
(``mass="pdf"``; where that density is below 1e-5 at every centre, all the mass goes to the bin
holding the mean, as in their code); a deterministic code (``logvar=None``) puts all its mass in the bin holding the value.
Q(s) = mean over x of Q(s|x), and joints with a factor are Q(s, y) = (1/N) sum over x with class y of
Q(s|x). From these:

- :func:`informativeness`: I(z_i; x) = H(z_i) - H(z_i|x) (section 3.1), normalised by log B.
- :func:`misjed`: MISJED(z_i, z_j) = H(z_i) + H(z_j) - H(zbar_i, zbar_j), zbar the posterior means
  (section 3.2, Eq. 7), normalised by 2 log B.
- :func:`rmig`: RMIG(y_k) = I(z_i*, y_k) - I(z_j°, y_k), the two codes with the largest mutual
  information with y_k (section 3.3), normalised by H(y_k).
- :func:`jemmig`: JEMMIG(y_k) = H(z_i*, y_k) - I(z_i*, y_k) + I(z_j°, y_k) (section 3.3), normalised
  by H(y_k) + log B (appendix A.11, Eq. 15); lower is better.
- :func:`do_tran`: all of the above from one quantisation pass.

Mutual informations are clipped at 0 and normalised scores into [0, 1] (their proven range) against
rounding.

Sampled (section 3.2, appendix A.9 Eq. 11-12), for diagonal Gaussian posteriors only:
:func:`wsepin` and :func:`windin` estimate I(x, z), I(x, z_i), I(x, z_{!=i}) and I(z_i; z_{!=i}) by
Monte Carlo, q(z) being the mixture of all N posteriors.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import sparse
from scipy.special import entr, logsumexp, ndtr

from ._base import (MetricInputError, MetricResult, _listed, check_codes, check_posterior, check_positive_int,
                    check_seed, constant_code_warnings, constant_dims, discrete_factors, with_warnings)

__all__ = [
    "DEFAULT_BINS",
    "DETERMINISTIC",
    "DEFAULT_HIGH",
    "DEFAULT_LOW",
    "MASS_ESTIMATORS",
    "OUTSIDE_SHARE",
    "PRECISIONS",
    "SCALE_WARNING",
    "SPREAD_RANGE",
    "DoTranResult",
    "INDINResult",
    "InformativenessResult",
    "JEMMIGResult",
    "MISJEDResult",
    "RMIGResult",
    "SEPINResult",
    "bin_edges",
    "bin_index",
    "do_tran",
    "informativeness",
    "jemmig",
    "misjed",
    "quantised_posterior",
    "rmig",
    "scale_warnings",
    "windin",
    "wsepin",
]

DEFAULT_LOW = -4.0
DEFAULT_HIGH = 4.0
DEFAULT_BINS = 100
#: the ``mass`` recorded in a result computed from deterministic codes (``logvar=None``)
DETERMINISTIC = "deterministic"

#: quantised rows are processed in blocks of about this many entries (rows x bins), bounding memory
_BLOCK_ENTRIES = 1 << 21
#: the sampled estimators work on blocks of samples of about this many (sample, code, posterior) entries
_SAMPLE_BLOCK_ENTRIES = 1 << 20
_TINY = np.finfo(np.float64).tiny
_MAX_LOGVAR = 700.0
#: ``mass="pdf"`` as the authors' code: variance and standard deviation floors of the density, and the
#: density below which, at every bin centre, the posterior counts as a point at its mean
_PDF_FLOOR = 1e-8
_PDF_MIN_DENSITY = 1e-5
#: the spread of a code dimension (standard deviation of its aggregate posterior) the fixed range reads as
#: the paper does, as multiples of a N(0, 1) prior's on [-4, 4] (in general (high - low) / 8): outside it,
#: :func:`scale_warnings` warns
SPREAD_RANGE = (0.5, 2.0)
#: the share of a dimension's posterior means outside [low, high] above which it warns too
OUTSIDE_SHARE = 0.05
#: the words that mark :func:`scale_warnings`' warning (score tables list it under the table)
SCALE_WARNING = "off the scale of the fixed quantisation range"


# --------------------------------------------------------------------------- quantisation


def bin_edges(low: float = DEFAULT_LOW, high: float = DEFAULT_HIGH, bins: int = DEFAULT_BINS) -> np.ndarray:
    """The ``bins + 1`` edges of ``bins`` equal bins over [low, high]."""
    low, high, bins = _check_range(low, high, bins)
    return np.linspace(low, high, bins + 1)


def bin_index(values: Any, low: float = DEFAULT_LOW, high: float = DEFAULT_HIGH,
              bins: int = DEFAULT_BINS) -> np.ndarray:
    """Bin (0..bins-1) of each value: bin b holds [edge_b, edge_{b+1}); values below ``low`` fall in
    bin 0, values at or above ``high`` in bin ``bins - 1`` (as the authors' ``at_bin``)."""
    low, high, bins = _check_range(low, high, bins)
    x = np.asarray(values, dtype=np.float64)
    idx = np.floor((x - low) * (bins / (high - low)))
    return np.clip(idx, 0, bins - 1).astype(np.int64)


def _mass_cdf(mu: np.ndarray, logvar: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Exact Gaussian bin masses (rows, B): Phi((b - mu)/sd) - Phi((a - mu)/sd) for each bin [a, b),
    the first bin from -inf and the last to +inf (appendix A.13)."""
    sd = np.maximum(np.exp(0.5 * logvar), _TINY)[:, None]
    cdf = ndtr((edges[None, 1:-1] - mu[:, None]) / sd)
    rows = len(mu)
    cdf = np.concatenate([np.zeros((rows, 1)), cdf, np.ones((rows, 1))], axis=1)
    return np.maximum(np.diff(cdf, axis=1), 0.0)


def _mass_pdf(mu: np.ndarray, logvar: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The authors' approximation (rows, B), as their code computes it: the density at each bin centre
    times the bin width, renormalised over the bins (appendix A.9), with their floors (variance and
    standard deviation at least 1e-8); where the density at every bin centre is below 1e-5 (a
    posterior far outside the range, or one so narrow that it falls between centres) all the mass goes
    to the bin holding the mean instead. Computed as a softmax of the log-density, so nothing
    underflows."""
    centres = 0.5 * (edges[:-1] + edges[1:])
    var = np.maximum(np.exp(logvar), _PDF_FLOOR)[:, None]
    sd = np.maximum(np.exp(0.5 * logvar), _PDF_FLOOR)
    sq = (centres[None, :] - mu[:, None]) ** 2
    nearest = sq.min(axis=1, keepdims=True)
    q = np.exp(-0.5 * (sq - nearest) / var)
    q /= q.sum(axis=1, keepdims=True)
    log_peak = -0.5 * nearest[:, 0] / var[:, 0] - np.log(sd) - 0.5 * math.log(2 * math.pi)
    far = log_peak < math.log(_PDF_MIN_DENSITY)
    if far.any():
        q[far] = 0.0
        q[np.flatnonzero(far), bin_index(mu[far], edges[0], edges[-1], len(centres))] = 1.0
    return q


#: Gaussian bin-mass estimators by name: (mu (rows,), logvar (rows,), edges (B+1,)) -> masses (rows, B)
MASS_ESTIMATORS: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "cdf": _mass_cdf,
    "pdf": _mass_pdf,
}


def _one_hot_mass(values: np.ndarray, low: float, high: float, bins: int) -> np.ndarray:
    q = np.zeros((len(values), bins))
    q[np.arange(len(values)), bin_index(values, low, high, bins)] = 1.0
    return q


def quantised_posterior(mu: Any, logvar: Any = None, *, low: float = DEFAULT_LOW, high: float = DEFAULT_HIGH,
                        bins: int = DEFAULT_BINS, mass: str = "cdf") -> np.ndarray:
    """Q(s|x) for every sample and code: an array (N, D, B) whose rows sum to 1. Deterministic codes
    (``logvar=None``) are one-hot on the bin holding the value. Memory N * D * B floats: the metrics
    themselves never build it whole."""
    m, lv = _check_inputs(mu, logvar)
    low, high, bins = _check_range(low, high, bins)
    estimator = _check_mass(mass)
    edges = np.linspace(low, high, bins + 1)
    out = np.empty((m.shape[0], m.shape[1], bins))
    for d in range(m.shape[1]):
        out[:, d] = (_one_hot_mass(m[:, d], low, high, bins) if lv is None
                     else estimator(m[:, d], lv[:, d], edges))
    return out


@dataclass(frozen=True)
class _CodeStatistics:
    """Quantised entropies of every code (nats): H(z_i), H(z_i|x) (D,) and H(z_i, y_k) (D, K)."""

    code_entropy: np.ndarray
    conditional_entropy: np.ndarray
    joint_entropy: np.ndarray | None
    factor_entropy: np.ndarray | None


def _code_statistics(mu: np.ndarray, logvar: np.ndarray | None, labels: np.ndarray | None,
                     low: float, high: float, bins: int, mass: str) -> _CodeStatistics:
    """One pass over the quantised posteriors, block by block of rows (memory O(rows x B)):
    Q(s) and sum_x H(Q(.|x)) per code, and the joints Q(s, y_k) with every factor at once through a
    sparse (sum_k C_k) x N class-indicator matrix."""
    n, d = mu.shape
    edges = np.linspace(low, high, bins + 1)
    estimator = None if logvar is None else MASS_ESTIMATORS[mass]
    rows = max(1, _BLOCK_ENTRIES // bins)
    q_marginal = np.zeros((d, bins))
    cond = np.zeros(d)
    if labels is not None:
        sizes = labels.max(axis=0) + 1
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        total = int(sizes.sum())
        joints = np.zeros((d, total, bins))
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        if labels is not None:
            block = labels[start:stop] + offsets
            k = labels.shape[1]
            indicator = sparse.csr_matrix(
                (np.ones(block.size), (block.T.ravel(), np.tile(np.arange(stop - start), k))),
                shape=(total, stop - start))
        for i in range(d):
            q = (_one_hot_mass(mu[start:stop, i], low, high, bins) if estimator is None or logvar is None
                 else estimator(mu[start:stop, i], logvar[start:stop, i], edges))
            q_marginal[i] += q.sum(axis=0)
            if logvar is not None:
                cond[i] += entr(q).sum()
            if labels is not None:
                joints[i] += indicator @ q
    code_entropy = entr(q_marginal / n).sum(axis=1)
    conditional_entropy = cond / n
    if labels is None:
        return _CodeStatistics(code_entropy, conditional_entropy, None, None)
    joint_entropy = np.empty((d, labels.shape[1]))
    factor_entropy = np.empty(labels.shape[1])
    for j, (o, c) in enumerate(zip(offsets, sizes)):
        block = joints[:, o:o + c, :] / n
        joint_entropy[:, j] = entr(block).sum(axis=(1, 2))
        factor_entropy[j] = entr(np.bincount(labels[:, j], minlength=c) / n).sum()
    return _CodeStatistics(code_entropy, conditional_entropy, joint_entropy, factor_entropy)


# --------------------------------------------------------------------------- validation


def _check_range(low: Any, high: Any, bins: Any) -> tuple[float, float, int]:
    for name, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise MetricInputError(f"{name} must be a finite number, got {value!r}")
    if not low < high:
        raise MetricInputError(f"the quantisation range needs low < high, got low={low!r}, high={high!r}")
    if isinstance(bins, bool) or not isinstance(bins, numbers.Integral) or bins < 2:
        raise MetricInputError(f"bins must be an integer >= 2 (the paper uses 100), got {bins!r}")
    return float(low), float(high), int(bins)


def _check_mass(mass: Any) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    if not isinstance(mass, str) or mass not in MASS_ESTIMATORS:
        raise MetricInputError(f"unknown mass estimator {mass!r}; use one of {sorted(MASS_ESTIMATORS)}")
    return MASS_ESTIMATORS[mass]


def _check_inputs(mu: Any, logvar: Any) -> tuple[np.ndarray, np.ndarray | None]:
    if logvar is None:
        return check_codes(mu, "mu"), None
    return check_posterior(mu, logvar)


def _check_labels(factors: Any, classes: Any, n: int, factor_bins: int) -> np.ndarray:
    if factors is None:
        raise MetricInputError("this metric needs the ground-truth factors (N, K); pass factors=...")
    return discrete_factors(factors, n, classes, factor_bins)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, eq=False)
class InformativenessResult(MetricResult):
    """``informativeness`` = mean over codes of I(z_i; x) / log B. ``informativeness_per_code`` (D,) the
    normalised values, ``mutual_information`` (D,) I(z_i; x) in nats, ``code_entropy`` (D,) H(z_i),
    ``conditional_entropy`` (D,) H(z_i|x) (quantised, nats), ``order`` (D,) codes from most to least
    informative. Every quantised result records ``bins``, ``low``, ``high`` and ``mass``, the bin-mass
    estimator (``"deterministic"`` for codes given without ``logvar``)."""

    headline: ClassVar[tuple[str, ...]] = ("informativeness",)

    informativeness: float
    informativeness_per_code: np.ndarray
    mutual_information: np.ndarray
    code_entropy: np.ndarray
    conditional_entropy: np.ndarray
    order: np.ndarray
    bins: int
    low: float
    high: float
    mass: str


@dataclass(frozen=True, eq=False)
class MISJEDResult(MetricResult):
    """``misjed`` = mean over pairs i < j of MISJED(z_i, z_j) / (2 log B) (lower is better: the codes are
    independent *and* informative). ``misjed_matrix`` (D, D) the normalised pair values and
    ``misjed_unnormalized`` (D, D) in nats, both symmetric with a zero diagonal (a code is not paired
    with itself); ``code_entropy`` (D,) H(z_i); ``mean_joint_entropy`` (D, D) H(zbar_i, zbar_j) of the
    quantised posterior means (diagonal: H(zbar_i)); ``order`` (D,) codes by informativeness, most
    informative first (the paper shows the matrix in this order)."""

    headline: ClassVar[tuple[str, ...]] = ("misjed",)

    misjed: float
    misjed_matrix: np.ndarray
    misjed_unnormalized: np.ndarray
    code_entropy: np.ndarray
    mean_joint_entropy: np.ndarray
    order: np.ndarray
    bins: int
    low: float
    high: float
    mass: str


@dataclass(frozen=True, eq=False)
class RMIGResult(MetricResult):
    """``rmig`` = mean over factors of RMIG(y_k) / H(y_k). ``rmig_per_factor`` (K,) normalised,
    ``gap`` (K,) I(z_i*, y_k) - I(z_j°, y_k) in nats, ``mutual_information`` (D, K) I(z_i; y_k),
    ``factor_entropy`` (K,) H(y_k), ``code_entropy`` (D,) H(z_i), ``top_code`` / ``second_code`` (K,)
    i* and j° (``second_code`` is -1 with a single code)."""

    headline: ClassVar[tuple[str, ...]] = ("rmig",)

    rmig: float
    rmig_per_factor: np.ndarray
    gap: np.ndarray
    mutual_information: np.ndarray
    factor_entropy: np.ndarray
    code_entropy: np.ndarray
    top_code: np.ndarray
    second_code: np.ndarray
    bins: int
    low: float
    high: float
    mass: str


@dataclass(frozen=True, eq=False)
class JEMMIGResult(MetricResult):
    """``jemmig`` = mean over factors of JEMMIG(y_k) / (H(y_k) + log B), in [0, 1], lower is better.
    ``jemmig_per_factor`` (K,) normalised, ``jemmig_unnormalized`` (K,) in nats, ``joint_entropy``
    (D, K) H(z_i, y_k), ``mutual_information`` (D, K) I(z_i; y_k), ``factor_entropy`` (K,) H(y_k),
    ``top_code`` / ``second_code`` (K,) i* and j° (-1 with a single code)."""

    headline: ClassVar[tuple[str, ...]] = ("jemmig",)

    jemmig: float
    jemmig_per_factor: np.ndarray
    jemmig_unnormalized: np.ndarray
    joint_entropy: np.ndarray
    mutual_information: np.ndarray
    factor_entropy: np.ndarray
    top_code: np.ndarray
    second_code: np.ndarray
    bins: int
    low: float
    high: float
    mass: str


@dataclass(frozen=True, eq=False)
class DoTranResult(MetricResult):
    """Every quantised metric from one pass: ``informativeness``, ``misjed`` (None with one code),
    ``rmig`` and ``jemmig`` (None without factors). ``scalars()`` gives the headline of each present one."""

    headline: ClassVar[tuple[str, ...]] = ("informativeness", "misjed", "rmig", "jemmig")

    informativeness: InformativenessResult
    misjed: MISJEDResult | None
    rmig: RMIGResult | None
    jemmig: JEMMIGResult | None

    def scalars(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name in self.headline:
            part = getattr(self, name)
            if part is not None:
                out.update(part.scalars())
        return out


# --------------------------------------------------------------------------- quantised metrics


def _informativeness_result(stats: _CodeStatistics, bins: int, low: float, high: float,
                            mass: str) -> InformativenessResult:
    mi = np.maximum(stats.code_entropy - stats.conditional_entropy, 0.0)
    normalized = np.minimum(mi / math.log(bins), 1.0)
    order = np.argsort(-mi, kind="stable")
    return InformativenessResult(float(normalized.mean()), normalized, mi, stats.code_entropy,
                                 stats.conditional_entropy, order, bins, low, high, mass)


def _misjed_result(mu: np.ndarray, stats: _CodeStatistics, info: InformativenessResult, bins: int, low: float,
                   high: float, mass: str) -> MISJEDResult:
    d = mu.shape[1]
    if d < 2:
        raise MetricInputError(f"MISJED scores pairs of codes; mu has {d} code dimension (need at least 2)")
    idx = bin_index(mu, low, high, bins)
    n = len(mu)
    joint = np.zeros((d, d))
    for i in range(d):
        joint[i, i] = entr(np.bincount(idx[:, i], minlength=bins) / n).sum()
        for j in range(i + 1, d):
            counts = np.bincount(idx[:, i] * bins + idx[:, j], minlength=bins * bins)
            joint[i, j] = joint[j, i] = entr(counts / n).sum()
    h = stats.code_entropy
    raw = np.maximum(h[:, None] + h[None, :] - joint, 0.0)
    np.fill_diagonal(raw, 0.0)
    normalized = np.minimum(raw / (2.0 * math.log(bins)), 1.0)
    upper = np.triu_indices(d, 1)
    return MISJEDResult(float(normalized[upper].mean()), normalized, raw, h, joint, info.order, bins, low, high, mass)


def _top_two(mi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per factor (column): i*, j° (-1 when there is one code) and their mutual informations."""
    order = np.argsort(-mi, axis=0, kind="stable")
    k = mi.shape[1]
    top = order[0]
    best = mi[top, np.arange(k)]
    if mi.shape[0] < 2:
        return top, np.full(k, -1, dtype=np.int64), best, np.zeros(k)
    second = order[1]
    return top, second, best, mi[second, np.arange(k)]


def _factor_mi(stats: _CodeStatistics) -> np.ndarray:
    assert stats.joint_entropy is not None and stats.factor_entropy is not None
    mi = stats.code_entropy[:, None] + stats.factor_entropy[None, :] - stats.joint_entropy
    return np.maximum(mi, 0.0)


def _rmig_result(stats: _CodeStatistics, bins: int, low: float, high: float, mass: str) -> RMIGResult:
    mi = _factor_mi(stats)
    top, second, best, runner = _top_two(mi)
    gap = best - runner
    per_factor = np.clip(gap / stats.factor_entropy, 0.0, 1.0)
    return RMIGResult(float(per_factor.mean()), per_factor, gap, mi, stats.factor_entropy, stats.code_entropy,
                      top, second, bins, low, high, mass)


def _jemmig_result(stats: _CodeStatistics, bins: int, low: float, high: float, mass: str) -> JEMMIGResult:
    assert stats.joint_entropy is not None and stats.factor_entropy is not None
    mi = _factor_mi(stats)
    top, second, best, runner = _top_two(mi)
    k = mi.shape[1]
    raw = stats.joint_entropy[top, np.arange(k)] - best + runner
    per_factor = np.clip(raw / (stats.factor_entropy + math.log(bins)), 0.0, 1.0)
    return JEMMIGResult(float(per_factor.mean()), per_factor, raw, stats.joint_entropy, mi, stats.factor_entropy,
                        top, second, bins, low, high, mass)


def scale_warnings(mu: Any, logvar: Any = None, *, low: float = DEFAULT_LOW, high: float = DEFAULT_HIGH,
                   bins: int = DEFAULT_BINS) -> tuple[str, ...]:
    """A warning naming the code dimensions that do not sit on the scale the fixed range is made for, or ``()``.

    Do & Tran quantise every code over [-4, 4] "since most of the latent values fall within this range"
    (appendix A.9): codes on the scale of a N(0, 1) prior. A code of another scale reads differently,
    and JEMMIG and MISJED improve as a code shrinks: on the dSprites sub-grid a fixed random projection
    of the pixels scores JEMMIG 0.631, the same code x 0.1 scores 0.386 and standardised 0.868; a code
    inside one bin would score H(y)/(H(y) + log B) per factor (0.355 there) while saying nothing.
    A dimension is off that scale when its spread, the standard deviation of its aggregate posterior
    sqrt(var(mu) + mean(exp(logvar))), lies outside :data:`SPREAD_RANGE` times (high - low) / 8, or when
    more than :data:`OUTSIDE_SHARE` of its posterior means lie outside [low, high]. Constant dimensions
    are left to the constant-code warning; a deterministic dimension whose distinct values each have a
    bin of their own is exempt (the quantisation loses nothing of it, so its scale does not matter)."""
    m, lv = _check_inputs(mu, logvar)
    return _scale_warnings(m, lv, *_check_range(low, high, bins))


def _scale_warnings(m: np.ndarray, lv: np.ndarray | None, low: float, high: float, bins: int) -> tuple[str, ...]:
    """:func:`scale_warnings` of checked codes and range."""
    unit = (high - low) / 8.0
    spread = np.sqrt(m.var(axis=0) + (0.0 if lv is None else np.exp(np.minimum(lv, _MAX_LOGVAR)).mean(axis=0)))
    outside = ((m < low) | (m > high)).mean(axis=0)
    off = (spread < SPREAD_RANGE[0] * unit) | (spread > SPREAD_RANGE[1] * unit) | (outside > OUTSIDE_SHARE)
    off &= ~constant_dims(m, lv)
    if lv is None:
        for i in np.flatnonzero(off):
            values = np.unique(m[:, i])
            if len(np.unique(bin_index(values, low, high, bins))) == len(values):
                off[i] = False
    dims = np.flatnonzero(off)
    if len(dims) == 0:
        return ()
    prior = "N(0, 1)" if unit == 1.0 else f"N(0, {unit:g}^2)"
    low_spread, high_spread = f"{spread[dims].min():.2f}", f"{spread[dims].max():.2f}"
    spreads = low_spread if low_spread == high_spread else f"{low_spread} to {high_spread}"
    where = (f"dimension{'s' if len(dims) > 1 else ''} {_listed(dims)}: spread {spreads} where the prior's "
             f"is {unit:g}")
    clipped = int((outside[dims] > OUTSIDE_SHARE).sum())
    if clipped:
        where += f"; {clipped} with more than {OUTSIDE_SHARE:.0%} of their values outside the range"
    return (f"{len(dims)} of {m.shape[1]} code dimensions are {SCALE_WARNING} [{low:g}, {high:g}], made for codes "
            f"on a {prior} prior's scale ({where}): the quantised metrics change with a code's scale (JEMMIG and "
            "MISJED improve as a code shrinks) and do not compare with those of codes on the prior's scale; score "
            "the posterior (mu, logvar) of a model with a N(0, I) prior, or standardise the code",)


def _constant(mu: np.ndarray, logvar: np.ndarray | None) -> tuple[str, ...]:
    """The warning for code dimensions whose posterior (mean, and log-variance if given) is constant."""
    return constant_code_warnings(mu, "code (posterior)" if logvar is not None else "code", logvar)


def _quantised(mu: np.ndarray, logvar: np.ndarray | None, low: float, high: float, bins: int) -> tuple[str, ...]:
    """The warnings of a quantised metric: constant dimensions and those off the range's scale."""
    return _constant(mu, logvar) + _scale_warnings(mu, logvar, low, high, bins)


def _prepare(mu: Any, logvar: Any, low: Any, high: Any, bins: Any,
             mass: Any) -> tuple[np.ndarray, np.ndarray | None, float, float, int, str]:
    m, lv = _check_inputs(mu, logvar)
    low, high, bins = _check_range(low, high, bins)
    _check_mass(mass)
    return m, lv, low, high, bins, mass if lv is not None else DETERMINISTIC


def informativeness(mu: Any, logvar: Any = None, *, low: float = DEFAULT_LOW, high: float = DEFAULT_HIGH,
                    bins: int = DEFAULT_BINS, mass: str = "cdf") -> InformativenessResult:
    """Informativeness of every code (Do & Tran 2020, section 3.1 and appendix A.9):
    I(z_i; x) = H(z_i) - H(z_i|x) with H(z_i) = -sum_s Q(s) ln Q(s), Q(s) = mean_x Q(s|x), and
    H(z_i|x) = mean_x [-sum_s Q(s|x) ln Q(s|x)]; normalised by log B (the paper's recommended
    normalisation, section 3.1). A deterministic code has H(z_i|x) = 0, so I(z_i; x) = H(z_i)."""
    m, lv, low, high, bins, mass = _prepare(mu, logvar, low, high, bins, mass)
    stats = _code_statistics(m, lv, None, low, high, bins, mass)
    return with_warnings(_informativeness_result(stats, bins, low, high, mass), _quantised(m, lv, low, high, bins))


def misjed(mu: Any, logvar: Any = None, *, low: float = DEFAULT_LOW, high: float = DEFAULT_HIGH,
           bins: int = DEFAULT_BINS, mass: str = "cdf") -> MISJEDResult:
    """MISJED (Do & Tran 2020, section 3.2, Eq. 7) of every pair of codes:
    MISJED(z_i, z_j) = H(z_i) + H(z_j) - H(zbar_i, zbar_j), H(z_i) from the quantised posteriors and
    H(zbar_i, zbar_j) the plug-in joint entropy of the quantised posterior means; normalised by
    2 log B. Small when the two codes are both independent and informative. The headline is the mean
    over pairs i < j (the paper reports the pair matrix only). Values are clipped at 0: quantisation can
    put H(z_i) a little below H(zbar_i) when posterior mass straddles a bin edge."""
    m, lv, low, high, bins, mass = _prepare(mu, logvar, low, high, bins, mass)
    if m.shape[1] < 2:
        raise MetricInputError(f"MISJED scores pairs of codes; mu has {m.shape[1]} code dimension (need at least 2)")
    stats = _code_statistics(m, lv, None, low, high, bins, mass)
    info = _informativeness_result(stats, bins, low, high, mass)
    return with_warnings(_misjed_result(m, stats, info, bins, low, high, mass), _quantised(m, lv, low, high, bins))


def rmig(mu: Any, logvar: Any = None, factors: Any = None, *, classes: Any = None, low: float = DEFAULT_LOW,
         high: float = DEFAULT_HIGH, bins: int = DEFAULT_BINS, mass: str = "cdf", factor_bins: int = 20) -> RMIGResult:
    """Robust MIG (Do & Tran 2020, section 3.3): RMIG(y_k) = I(z_i*, y_k) - I(z_j°, y_k), the largest and
    second largest I(z_i; y_k) over codes, from the joint Q(s, y_k) = (1/N) sum_{x: y(x) = y_k} Q(s|x);
    normalised by H(y_k) and averaged over factors. Factors are used at their classes
    (``classes`` kept as they are; continuous factors cut into ``factor_bins`` equal-width bins,
    see :func:`factor_classes`). With a single code, I(z_j°, y_k) = 0."""
    m, lv, low, high, bins, mass = _prepare(mu, logvar, low, high, bins, mass)
    labels = _check_labels(factors, classes, len(m), factor_bins)
    stats = _code_statistics(m, lv, labels, low, high, bins, mass)
    return with_warnings(_rmig_result(stats, bins, low, high, mass), _quantised(m, lv, low, high, bins))


def jemmig(mu: Any, logvar: Any = None, factors: Any = None, *, classes: Any = None, low: float = DEFAULT_LOW,
           high: float = DEFAULT_HIGH, bins: int = DEFAULT_BINS, mass: str = "cdf",
           factor_bins: int = 20) -> JEMMIGResult:
    """JEMMIG (Do & Tran 2020, section 3.3): JEMMIG(y_k) = H(z_i*, y_k) - I(z_i*, y_k) + I(z_j°, y_k), with
    i*, j° the codes of largest and second largest I(z_i; y_k); normalised by H(y_k) + log B
    (appendix A.11, Eq. 15) into [0, 1] and averaged over factors; lower is better (0: one code is an
    invertible function of the factor and no other code knows it). Factors as in :func:`rmig`."""
    m, lv, low, high, bins, mass = _prepare(mu, logvar, low, high, bins, mass)
    labels = _check_labels(factors, classes, len(m), factor_bins)
    stats = _code_statistics(m, lv, labels, low, high, bins, mass)
    return with_warnings(_jemmig_result(stats, bins, low, high, mass), _quantised(m, lv, low, high, bins))


def do_tran(mu: Any, logvar: Any = None, factors: Any = None, classes: Any = None, *, low: float = DEFAULT_LOW,
            high: float = DEFAULT_HIGH, bins: int = DEFAULT_BINS, mass: str = "cdf",
            factor_bins: int = 20) -> DoTranResult:
    """Informativeness, MISJED (at least two codes) and, when ``factors`` are given, RMIG and JEMMIG,
    from one quantisation pass (same settings as the single functions)."""
    m, lv, low, high, bins, mass = _prepare(mu, logvar, low, high, bins, mass)
    labels = None if factors is None else _check_labels(factors, classes, len(m), factor_bins)
    stats = _code_statistics(m, lv, labels, low, high, bins, mass)
    info = _informativeness_result(stats, bins, low, high, mass)
    pairs = _misjed_result(m, stats, info, bins, low, high, mass) if m.shape[1] >= 2 else None
    if labels is None:
        return with_warnings(DoTranResult(info, pairs, None, None), _quantised(m, lv, low, high, bins))
    return with_warnings(DoTranResult(info, pairs, _rmig_result(stats, bins, low, high, mass),
                                      _jemmig_result(stats, bins, low, high, mass)), _quantised(m, lv, low, high, bins))


# --------------------------------------------------------------------------- sampled metrics

#: floating-point types of the (samples x codes x posteriors) log-density blocks
PRECISIONS: dict[str, type[np.floating]] = {"float32": np.float32, "float64": np.float64}


@dataclass(frozen=True)
class _SampledTerms:
    """Monte-Carlo mutual informations (nats): I(x, z) scalar; I(x, z_i), I(x, z_{!=i}),
    I(z_i; z_{!=i}) per code (D,)."""

    total: float
    code: np.ndarray
    without: np.ndarray
    dependence: np.ndarray


def _exact_log_sums(z: np.ndarray, mu: np.ndarray, logvar: np.ndarray,
                    own: int) -> tuple[float, np.ndarray, np.ndarray]:
    """float64, max-shifted: for one sample z (D,) the log of sum_n q(z|x_n) / q(z|x_own) and of the same
    ratio for z_{!=i} and for z_i (D,). Used where the fast block overflows (extreme variances)."""
    logd = -0.5 * ((z[None, :] - mu) ** 2 / np.exp(logvar) + np.log(2.0 * np.pi) + logvar)  # (N, D)
    logd = logd - logd[own]
    total = logd.sum(axis=1)
    return (float(logsumexp(total)), logsumexp(total[:, None] - logd, axis=0), logsumexp(logd, axis=0))


def _sampled_terms(mu: np.ndarray, logvar: np.ndarray, n_samples: int, seed: int, chunk: int | None,
                   precision: str) -> _SampledTerms:
    """E over z ~ q(z|x), x uniform over the N samples (``n_samples`` draws), of
    log q(z|x) - log q(z) and of the same for z_i and z_{!=i}, with q(z) = (1/N) sum_n q(z|x_n)
    (Do & Tran 2020, appendix A.9, Eq. 11-12).

    For each block of samples the per-dimension log-densities log N(z_sd; mu_nd, var_nd) (S, D, N)
    are computed once and shifted by the sample's own posterior's value, so the own term of every
    mixture sum is exactly exp(0) = 1. With r_sn = sum_d (shifted), the three mixture sums are
    sum_n exp(r_sn) (whole code), sum_n exp(r_sn - shifted_sdn) (all but d) and sum_n exp(shifted_sdn)
    (d alone); log q(z|x) cancels, so I(x, z) = E[log N - log sum_n exp(r_sn)] and likewise for the
    others, and I(z_i; z_{!=i}) = E[log sum(whole) - log sum(d) - log sum(all but d) + log N].
    The exponentials run in ``precision`` (float32 by default: about 6x faster, error ~1e-6 relative
    per log-density); a sample whose block sums overflow is redone exactly in float64.
    """
    n, d = mu.shape
    dtype = PRECISIONS[precision]
    rng = np.random.default_rng(seed)
    own = rng.integers(0, n, size=n_samples)
    logvar = np.maximum(logvar, math.log(_TINY))
    sd = np.exp(0.5 * logvar)
    z = mu[own] + rng.standard_normal((n_samples, d)) * sd[own]
    with np.errstate(over="ignore"):
        zc = z.astype(dtype)
        mu_t = np.ascontiguousarray(mu.T, dtype=dtype)
        scale_t = np.ascontiguousarray((math.sqrt(0.5) / sd).T, dtype=dtype)
    const_t = np.ascontiguousarray((-0.5 * (math.log(2.0 * math.pi) + logvar)).T, dtype=dtype)
    if chunk is None:
        chunk = max(1, _SAMPLE_BLOCK_ENTRIES // (d * n))
    chunk = min(chunk, n_samples)
    block = np.empty((chunk, d, n), dtype=dtype)
    other = np.empty((chunk, d, n), dtype=dtype)
    log_total = np.empty(n_samples)
    log_without = np.empty((n_samples, d))
    log_code = np.empty((n_samples, d))
    for start in range(0, n_samples, chunk):
        stop = min(n_samples, start + chunk)
        m = stop - start
        lg, rest = block[:m], other[:m]
        rows = np.arange(m)
        mine = own[start:stop]
        with np.errstate(over="ignore", invalid="ignore"):     # overflow is caught below and redone
            np.subtract(zc[start:stop, :, None], mu_t, out=lg)
            np.multiply(lg, scale_t, out=lg)
            np.square(lg, out=lg)
            np.subtract(const_t, lg, out=lg)                       # log N(z_sd; mu_nd, var_nd)
            np.subtract(lg, lg[rows, :, mine][:, :, None], out=lg)  # minus the own posterior's value
            total = lg.sum(axis=1)                                 # (m, N), own entry exactly 0
            np.subtract(total[:, None, :], lg, out=rest)
            np.exp(rest, out=rest)
            s_without = np.einsum("ij->i", rest.reshape(m * d, n)).reshape(m, d)
            np.exp(lg, out=lg)
            s_code = np.einsum("ij->i", lg.reshape(m * d, n)).reshape(m, d)
            np.exp(total, out=total)
            s_total = np.einsum("ij->i", total)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_total[start:stop] = np.log(s_total.astype(np.float64))
            log_without[start:stop] = np.log(s_without.astype(np.float64))
            log_code[start:stop] = np.log(s_code.astype(np.float64))
        bad = ~(np.isfinite(log_total[start:stop]) & np.isfinite(log_without[start:stop]).all(axis=1)
                & np.isfinite(log_code[start:stop]).all(axis=1))
        for r in np.flatnonzero(bad):
            s = start + r
            log_total[s], log_without[s], log_code[s] = _exact_log_sums(z[s], mu, logvar, int(own[s]))
    log_n = math.log(n)
    total_mi = float(log_n - log_total.mean())
    code_mi = log_n - log_code.mean(axis=0)
    without_mi = log_n - log_without.mean(axis=0)
    dependence = (log_total[:, None] - log_code - log_without).mean(axis=0) + log_n
    return _SampledTerms(total_mi, code_mi, without_mi, dependence)


def _check_sampling(mu: Any, logvar: Any, n_samples: Any, k: Any, seed: Any, chunk: Any, precision: Any,
                    name: str) -> tuple[np.ndarray, np.ndarray, int, int, int, int | None]:
    if logvar is None:
        raise MetricInputError(
            f"{name} needs a Gaussian posterior (mu, logvar): it estimates I(x, z) from the posterior densities, "
            "and a deterministic code has none (its I(x, z) is unbounded). Pass logvar, or use the quantised "
            "informativeness/misjed/rmig/jemmig, which accept deterministic codes")
    m, lv = check_posterior(mu, logvar)
    if lv.max() > _MAX_LOGVAR:
        raise MetricInputError(f"logvar holds values up to {lv.max():.4g}; above {_MAX_LOGVAR} the variance overflows "
                               "float64 (check that logvar is a log-variance, not a variance)")
    n_samples = check_positive_int("n_samples", n_samples)
    k = check_positive_int("k", k)
    seed = check_seed(seed)
    if chunk is not None:
        chunk = check_positive_int("chunk", chunk)
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise MetricInputError(f"unknown precision {precision!r}; use one of {sorted(PRECISIONS)}")
    return m, lv, n_samples, min(k, m.shape[1]), seed, chunk


def _weights(code_mi: np.ndarray) -> np.ndarray:
    """rho_i = I(x, z_i) / sum_j I(x, z_j), estimates clipped at 0; all zero when no code is informative."""
    mi = np.maximum(code_mi, 0.0)
    total = mi.sum()
    return mi / total if total > 0 else np.zeros_like(mi)


@dataclass(frozen=True, eq=False)
class SEPINResult(MetricResult):
    """``wsepin`` = sum_i rho_i SEPIN_i and ``sepin_at_k`` = mean of the ``k`` largest SEPIN_i, where
    SEPIN_i = I(x, z) - I(x, z_{!=i}) (nats) per code is in ``sepin``; ``weights`` (D,) rho_i;
    ``code_information`` (D,) I(x, z_i); ``total_information`` I(x, z); ``information_without`` (D,)
    I(x, z_{!=i}); ``code_dependence`` (D,) I(z_i; z_{!=i}); ``k`` the number of codes averaged."""

    headline: ClassVar[tuple[str, ...]] = ("wsepin", "sepin_at_k")

    wsepin: float
    sepin_at_k: float
    sepin: np.ndarray
    weights: np.ndarray
    code_information: np.ndarray
    total_information: float
    information_without: np.ndarray
    code_dependence: np.ndarray
    k: int
    n_samples: int
    seed: int
    precision: str


@dataclass(frozen=True, eq=False)
class INDINResult(MetricResult):
    """``windin`` = sum_i rho_i INDIN_i and ``indin_at_k`` = mean of the ``k`` largest INDIN_i, where
    INDIN_i = I(x, z_i) - I(z_i; z_{!=i}) (nats) per code is in ``indin``; other fields as in
    :class:`SEPINResult`."""

    headline: ClassVar[tuple[str, ...]] = ("windin", "indin_at_k")

    windin: float
    indin_at_k: float
    indin: np.ndarray
    weights: np.ndarray
    code_information: np.ndarray
    total_information: float
    information_without: np.ndarray
    code_dependence: np.ndarray
    k: int
    n_samples: int
    seed: int
    precision: str


def _top_k_mean(values: np.ndarray, k: int) -> float:
    return float(np.sort(values)[::-1][:k].mean())


def wsepin(mu: Any, logvar: Any, *, n_samples: int = 10_000, k: int = 3, seed: int = 0, chunk: int | None = None,
           precision: str = "float32") -> SEPINResult:
    """WSEPIN and SEPIN@k (Do & Tran 2020, section 3.2): SEPIN_i = I(x, z_i | z_{!=i}) = I(x, z) - I(x, z_{!=i});
    WSEPIN = sum_i rho_i SEPIN_i with rho_i = I(x, z_i) / sum_j I(x, z_j); SEPIN@k the mean of the k
    largest SEPIN_i (k is capped at the number of codes). All terms are Monte-Carlo estimates from
    ``n_samples`` draws z ~ q(z|x), x uniform over the rows, with q(z) the mixture of all N posteriors
    (appendix A.9); in nats, not normalised. Cost O(n_samples x N x D); memory about
    2 x ``chunk`` x D x N floats (``chunk`` samples per block, chosen automatically when None)."""
    m, lv, n_samples, k, seed, chunk = _check_sampling(mu, logvar, n_samples, k, seed, chunk, precision, "wsepin")
    terms = _sampled_terms(m, lv, n_samples, seed, chunk, precision)
    sepin = terms.total - terms.without
    rho = _weights(terms.code)
    result = SEPINResult(float(np.dot(rho, sepin)), _top_k_mean(sepin, k), sepin, rho, terms.code, terms.total,
                         terms.without, terms.dependence, k, n_samples, seed, precision)
    return with_warnings(result, _constant(m, lv))


def windin(mu: Any, logvar: Any, *, n_samples: int = 10_000, k: int = 3, seed: int = 0, chunk: int | None = None,
           precision: str = "float32") -> INDINResult:
    """WINDIN and INDIN@k (Do & Tran 2020, section 3.2, Eq. 9): INDIN_i = I(x, z_i) - I(z_i; z_{!=i}), weighted
    by rho_i as in :func:`wsepin` or averaged over the k largest. For a factorised (diagonal Gaussian)
    encoder I(z_i; z_{!=i} | x) = 0, so INDIN_i equals SEPIN_i in theory (Eq. 8); both are estimated from
    the same samples, so with the same seed they agree to rounding. Estimation as in :func:`wsepin`."""
    m, lv, n_samples, k, seed, chunk = _check_sampling(mu, logvar, n_samples, k, seed, chunk, precision, "windin")
    terms = _sampled_terms(m, lv, n_samples, seed, chunk, precision)
    indin = terms.code - terms.dependence
    rho = _weights(terms.code)
    result = INDINResult(float(np.dot(rho, indin)), _top_k_mean(indin, k), indin, rho, terms.code, terms.total,
                         terms.without, terms.dependence, k, n_samples, seed, precision)
    return with_warnings(result, _constant(m, lv))
