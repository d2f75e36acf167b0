"""Intervention metrics: the BetaVAE score (Higgins et al. 2017) and the FactorVAE score (Kim & Mnih 2018).

Both hold one factor fixed over a batch of observations, encode the batch, and ask a classifier which
factor was held fixed; the score is the classifier's accuracy on held-out points. They follow
disentanglement_lib's protocol (``evaluation/metrics/beta_vae.py`` and ``factor_vae.py``): batches of
64, 10,000 training and 5,000 evaluation points, and for FactorVAE 10,000 samples to estimate the
code's scale and a pruning threshold of 0.05 on its standard deviation.

Data come from a :class:`~factorbench.benchmark.metrics.samplers.FactorSampler` (factor values and
their observations); ``encoder`` maps observations (n, ...) to codes (n, D) (numpy, or a tensor with
``.detach().cpu()``); without an encoder the observations are the codes. A factor is held fixed by the
sampler's ``hold_fixed`` (overwriting its column where factors are independent; with a
:class:`~factorbench.benchmark.metrics.samplers.SplitSampler` on dependent factors, the other factors are
drawn from the samples that share its value, so every observation stays in the data's distribution).
Encoding is batched over many points (``encoder_batch`` observations per encoder call; without an
encoder, codes are fetched a whole sampling block at a time); the result depends on the seed and the
other arguments, not on ``encoder_batch``. Randomness: ``SeedSequence(seed)`` spawns independent streams for the variance
estimate, the training points and the evaluation points.

Differences from disentanglement_lib (FactorVAE): ``num_active_dims`` counts the active codes (the
library reports the total number of codes); a vote is filed under the code's own index (the library files
it under the code's position among the active codes, which shifts the rows of its vote matrix when a code
is pruned; accuracies are the same); ``votes`` is (D, K) (the library's is (K, D)); a code with zero
variance is never active, even with ``prune_threshold=0``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np
from sklearn.linear_model import LogisticRegression

from ._base import (MetricInputError, MetricResult, _listed, check_codes, check_positive_int, check_seed,
                    constant_dims_warnings, with_warnings)
from .samplers import check_sampler, hold_fixed

__all__ = ["BetaVAEResult", "FactorVAEResult", "beta_vae_score", "factor_vae_score"]

Encoder = Callable[[Any], Any]

#: Factor values are drawn this many observations at a time (whole points), whatever ``encoder_batch``.
SAMPLE_BLOCK = 32_768
#: Iterations of the logistic regression's solver (sklearn's default of 100 may stop short on raw codes).
LOGISTIC_MAX_ITER = 1_000


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, eq=False)
class BetaVAEResult(MetricResult):
    """``score`` = ``eval_accuracy``: accuracy of the logistic regression on the evaluation points;
    ``train_accuracy`` on its own training points."""

    headline: ClassVar[tuple[str, ...]] = ("score",)

    score: float
    train_accuracy: float
    eval_accuracy: float


@dataclass(frozen=True, eq=False)
class FactorVAEResult(MetricResult):
    """``score`` = ``eval_accuracy`` of the majority-vote classifier; ``votes`` (D, K): training points
    whose lowest-variance code was d when factor k was held fixed; ``active_dims`` (D,) bool: codes whose
    global std is at least the pruning threshold (``num_active_dims`` of them); ``global_std`` (D,)."""

    headline: ClassVar[tuple[str, ...]] = ("score",)

    score: float
    train_accuracy: float
    eval_accuracy: float
    num_active_dims: int
    active_dims: np.ndarray
    votes: np.ndarray
    global_std: np.ndarray


# --------------------------------------------------------------------------- encoding


def _to_numpy(out: Any) -> Any:
    """An encoder's output as a numpy-convertible object: tensors are detached and moved to the CPU
    (duck-typed, so torch is never imported here)."""
    if hasattr(out, "detach"):
        out = out.detach()
    if hasattr(out, "cpu"):
        out = out.cpu()
    return out


class _Representation:
    """Codes (n, D) of factor values: observe them, encode ``batch`` observations per encoder call, and
    check every call returns one finite row per observation with the same D."""

    def __init__(self, sampler: Any, encoder: Encoder | None, batch: int) -> None:
        # without an encoder the observations are codes: fetch them a whole sampling block at a time
        self.sampler, self.encoder = sampler, encoder
        self.batch = batch if encoder is not None else max(batch, SAMPLE_BLOCK)
        self.dim: int | None = None
        self.low: np.ndarray | None = None  # per-code minimum and maximum over every code seen
        self.high: np.ndarray | None = None
        self.seen = 0
        self.what = "the codes the sampler observed (no encoder was given)" if encoder is None else "the encoder output"

    def _encode(self, values: np.ndarray) -> np.ndarray:
        obs = self.sampler.observe(values)
        out = obs if self.encoder is None else _to_numpy(self.encoder(obs))
        shape = np.shape(out)
        if len(shape) != 2 or shape[0] != len(values):
            hint = "; give an encoder that maps observations to codes" if self.encoder is None else ""
            raise MetricInputError(
                f"{self.what} has shape {shape} for {len(values)} observations; it must return one row per "
                f"observation, shape ({len(values)}, D){hint}")
        codes = check_codes(out, name=self.what, min_samples=1)
        if self.dim is None:
            self.dim = codes.shape[1]
        elif codes.shape[1] != self.dim:
            raise MetricInputError(f"{self.what} has {codes.shape[1]} columns in one call and {self.dim} in another; "
                                   "the code dimension must not change")
        if len(codes):
            low, high = codes.min(axis=0), codes.max(axis=0)
            self.low = low if self.low is None else np.minimum(self.low, low)
            self.high = high if self.high is None else np.maximum(self.high, high)
            self.seen += len(codes)
        return codes

    def constant_warnings(self) -> tuple[str, ...]:
        """The warning naming the codes that took one value on every observation encoded."""
        if self.low is None:
            return ()
        return constant_dims_warnings(np.flatnonzero(self.low == self.high), len(self.low), self.seen)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        parts = [self._encode(values[a:a + self.batch]) for a in range(0, len(values), self.batch)]
        return np.concatenate(parts, axis=0)


def _sample(sampler: Any, n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    values = np.array(sampler.sample(n, rng), dtype=np.float64)
    if values.shape != (n, k):
        raise MetricInputError(f"sampler.sample({n}, rng) returned shape {values.shape}; expected ({n}, {k}) "
                               "(one row of factor values per sample)")
    return values


def _blocks(n_points: int, per_point: int) -> list[tuple[int, int]]:
    """Consecutive ranges of points, each with about SAMPLE_BLOCK observations (at least one point)."""
    step = max(1, SAMPLE_BLOCK // per_point)
    return [(a, min(a + step, n_points)) for a in range(0, n_points, step)]


def _check_common(sampler: Any, encoder: Any, batch_size: Any, n_train: Any, n_eval: Any, seed: Any,
                  encoder_batch: Any, min_batch: int) -> tuple[int, int, int, int, int, int]:
    k = check_sampler(sampler)
    if encoder is not None and not callable(encoder):
        raise MetricInputError(f"encoder must be a callable observations -> codes (n, D) or None, "
                               f"got {type(encoder).__name__}")
    return (k, check_positive_int("batch_size", batch_size, min_batch), check_positive_int("n_train", n_train),
            check_positive_int("n_eval", n_eval), check_seed(seed), check_positive_int("encoder_batch", encoder_batch))


# --------------------------------------------------------------------------- BetaVAE


def _beta_vae_points(rep: _Representation, sampler: Any, k: int, batch_size: int, n_points: int,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Features (n_points, D) and labels (n_points,) of the BetaVAE classifier."""
    features, labels = [], []
    for a, b in _blocks(n_points, 2 * batch_size):
        m = b - a
        fixed = rng.integers(k, size=m)
        v1 = _sample(sampler, m * batch_size, k, rng).reshape(m, batch_size, k)
        v2 = _sample(sampler, m * batch_size, k, rng)
        point = np.arange(m)
        v2 = hold_fixed(sampler, v2, np.repeat(fixed, batch_size), v1[point, :, fixed].ravel(), rng
                        ).reshape(m, batch_size, k)
        z = rep(np.concatenate([v1.reshape(-1, k), v2.reshape(-1, k)]))
        z1, z2 = z[:m * batch_size].reshape(m, batch_size, -1), z[m * batch_size:].reshape(m, batch_size, -1)
        features.append(np.abs(z1 - z2).mean(axis=1))
        labels.append(fixed)
    return np.concatenate(features), np.concatenate(labels)


def beta_vae_score(sampler: Any, encoder: Encoder | None = None, *, batch_size: int = 64, n_train: int = 10_000,
                   n_eval: int = 5_000, seed: int = 0, encoder_batch: int = 4096) -> BetaVAEResult:
    """BetaVAE score (Higgins et al. 2017, section 3 "Disentanglement metric" and appendix A.4).

    Each point: draw a factor k uniformly; draw ``batch_size`` pairs of factor values, the two members of
    a pair independent except that they share factor k's value; encode both; the point's feature is
    mean_l |z(v1_l) - z(v2_l)| (D,) and its label is k. A logistic regression (scikit-learn, C = 1,
    lbfgs, multinomial, ``max_iter=1000``: disentanglement_lib's default of 100 iterations can stop
    short, so it matches this score exactly only with ``max_iter=1000``) is fitted on ``n_train`` points; the score is its accuracy on ``n_eval`` new points.
    A training set with a single label gives a constant classifier.
    """
    k, batch_size, n_train, n_eval, seed, encoder_batch = _check_common(
        sampler, encoder, batch_size, n_train, n_eval, seed, encoder_batch, min_batch=1)
    train_ss, eval_ss = np.random.SeedSequence(seed).spawn(2)
    rep = _Representation(sampler, encoder, encoder_batch)
    x_train, y_train = _beta_vae_points(rep, sampler, k, batch_size, n_train, np.random.default_rng(train_ss))
    x_eval, y_eval = _beta_vae_points(rep, sampler, k, batch_size, n_eval, np.random.default_rng(eval_ss))
    if np.unique(y_train).size == 1:
        predict: Callable[[np.ndarray], np.ndarray] = lambda x: np.full(len(x), y_train[0])
    else:
        model = LogisticRegression(max_iter=LOGISTIC_MAX_ITER, random_state=seed)
        model.fit(x_train, y_train)
        predict = model.predict
    train_accuracy = float(np.mean(predict(x_train) == y_train))
    eval_accuracy = float(np.mean(predict(x_eval) == y_eval))
    return with_warnings(BetaVAEResult(eval_accuracy, train_accuracy, eval_accuracy), rep.constant_warnings())


# --------------------------------------------------------------------------- FactorVAE


def _factor_vae_votes(rep: _Representation, sampler: Any, k: int, batch_size: int, n_points: int,
                      rng: np.random.Generator, global_var: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Votes (D, K): for each point, the active code with the lowest normalised variance over a batch
    with factor k held fixed, against k."""
    d = len(global_var)
    votes = np.zeros(d * k, dtype=np.int64)
    scale = np.where(active, global_var, 1.0)
    for a, b in _blocks(n_points, batch_size):
        m = b - a
        fixed = rng.integers(k, size=m)
        v = _sample(sampler, m * batch_size, k, rng).reshape(m, batch_size, k)
        point = np.arange(m)
        v = hold_fixed(sampler, v.reshape(-1, k), np.repeat(fixed, batch_size),
                       np.repeat(v[point, 0, fixed], batch_size), rng)
        z = rep(v).reshape(m, batch_size, d)
        local = np.where(active, z.var(axis=1, ddof=1) / scale, np.inf)
        votes += np.bincount(local.argmin(axis=1) * k + fixed, minlength=d * k)
    return votes.reshape(d, k)


def _pruning_warnings(global_std: np.ndarray, active: np.ndarray, threshold: float, n: int) -> tuple[str, ...]:
    """The warning naming the codes the pruning rule left out (and which of them are constant)."""
    pruned = np.flatnonzero(~active)
    if not pruned.size:
        return ()
    constant = np.flatnonzero(global_std == 0)
    text = (f"{pruned.size} of {len(active)} codes {'has' if pruned.size == 1 else 'have'} a std below the pruning threshold {threshold:g} over {n} "
            f"samples (dimension{'s' if pruned.size > 1 else ''} {_listed(pruned)}, largest such std "
            f"{float(global_std[pruned].max()):.3g}"
            + (f"; constant: {_listed(constant)}" if constant.size else "") + ") and take no part in the vote")
    if not active.any():
        text += ("; no code is left, so the score is 0 by the original rule whatever the codes encode: "
                 "codes on a smaller scale than the threshold need rescaling (or a lower prune_threshold)")
    return (text,)


def factor_vae_score(sampler: Any, encoder: Encoder | None = None, *, batch_size: int = 64, n_train: int = 10_000,
                     n_eval: int = 5_000, n_variance: int = 10_000, prune_threshold: float = 0.05, seed: int = 0,
                     encoder_batch: int = 4096) -> FactorVAEResult:
    """FactorVAE score (Kim & Mnih 2018, section 4 "A new metric for disentanglement").

    s_d = std of code d over ``n_variance`` samples (ddof 1); code d is active if s_d >= ``prune_threshold``
    and s_d > 0. Each point: draw a factor k uniformly and a batch of ``batch_size`` factor values that
    share one value of factor k; its vote is d* = argmin over active d of Var_batch(z_d) / s_d^2 (ddof 1),
    counted in votes[d*, k]. The majority-vote classifier maps each code d to argmax_k votes[d, k]
    (ties and codes without votes: the lowest k); the score is its accuracy on ``n_eval`` new points.
    With no active code the score, both accuracies and the votes are 0. ``warnings`` names the pruned
    codes whenever the rule leaves any out (and says so when it leaves none in).
    """
    k, batch_size, n_train, n_eval, seed, encoder_batch = _check_common(
        sampler, encoder, batch_size, n_train, n_eval, seed, encoder_batch, min_batch=2)
    n_variance = check_positive_int("n_variance", n_variance, 2)
    if isinstance(prune_threshold, bool) or not isinstance(prune_threshold, numbers.Real) \
            or not math.isfinite(prune_threshold) or prune_threshold < 0:
        raise MetricInputError(f"prune_threshold must be a finite number >= 0 (a std), got {prune_threshold!r}")
    var_ss, train_ss, eval_ss = np.random.SeedSequence(seed).spawn(3)
    rep = _Representation(sampler, encoder, encoder_batch)
    var_rng = np.random.default_rng(var_ss)
    z = np.concatenate([rep(_sample(sampler, b - a, k, var_rng)) for a, b in _blocks(n_variance, 1)])
    global_var = z.var(axis=0, ddof=1)
    global_std = np.sqrt(global_var)
    active = (global_std >= prune_threshold) & (global_std > 0)
    d = len(global_std)
    warnings = _pruning_warnings(global_std, active, prune_threshold, n_variance)
    if not active.any():
        return FactorVAEResult(0.0, 0.0, 0.0, 0, active, np.zeros((d, k), dtype=np.int64), global_std,
                               warnings=warnings)
    train_votes = _factor_vae_votes(rep, sampler, k, batch_size, n_train, np.random.default_rng(train_ss),
                                    global_var, active)
    eval_votes = _factor_vae_votes(rep, sampler, k, batch_size, n_eval, np.random.default_rng(eval_ss),
                                   global_var, active)
    assigned = train_votes.argmax(axis=1)
    codes = np.arange(d)
    train_accuracy = float(train_votes[codes, assigned].sum() / n_train)
    eval_accuracy = float(eval_votes[codes, assigned].sum() / n_eval)
    return FactorVAEResult(eval_accuracy, train_accuracy, eval_accuracy, int(active.sum()), active, train_votes,
                           global_std, warnings=warnings)
