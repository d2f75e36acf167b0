"""Cheap checks that codes can be scored, run before the metrics.

Every metric scores whatever codes it is given, and some input mistakes even raise the headline (an
encoder that reshapes (n, H, W, C) images as (n, C, H, W) scored D_LSBD 0.389 against 0.427 on arrow,
informativeness 0.906 against 0.660). These checks catch what is cheap to catch; each returns sentences
for the result's ``warnings`` (shown by ``evaluate``, ``scores`` and the leaderboard). None changes a score.

- :func:`code_warnings` looks at the codes alone (encoders and ``--codes`` alike): constant codes,
  codes that repeat (fewer than :data:`MIN_DISTINCT` of the rows distinct), codes far below the
  metrics' scale (every dimension's standard deviation under :data:`SMALL_STD`).
- :func:`probe_warnings` encodes a probe batch twice more, with its pixels shuffled (one fixed
  permutation of positions) and at half intensity, and warns when the codes barely move
  (:data:`BLIND_RATIO` of the distance between the codes of different images): an encoder that sees
  pixel statistics rather than the image, or saturates on uint8 input it never divided by 255.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["BLIND_RATIO", "CONSTANT_STD", "MIN_DISTINCT", "PROBE_SIZE", "SMALL_STD", "code_warnings",
           "probe_rows", "probe_warnings"]

#: a dimension whose standard deviation is at most this times (1 + |mean|) is constant
CONSTANT_STD = 1e-9
#: the largest standard deviation of a dimension below which the codes are far below the metrics' scale
SMALL_STD = 1e-3
#: fewer distinct codes than this fraction of the rows: the codes repeat
MIN_DISTINCT = 0.1
#: a probe moves the codes less than this fraction of the typical distance between two images' codes
BLIND_RATIO = 0.05
#: images in the probe batch
PROBE_SIZE = 64

_ADVICE = ("check that the encoder takes uint8 images of shape (n, H, W, C), channels last, and scales "
           "them itself (e.g. divides by 255)")


def code_warnings(mu: np.ndarray) -> list[str]:
    """Warnings about codes ``mu`` (n, d) alone: constant, repeated, or far below the metrics' scale."""
    mu = np.asarray(mu, dtype=np.float64)
    if mu.ndim != 2 or len(mu) < 4:  # too few rows to judge
        return []
    std = mu.std(axis=0)
    constant = std <= CONSTANT_STD * (1.0 + np.abs(mu.mean(axis=0)))
    if constant.all():
        return [f"every code dimension is constant over the {len(mu):,} images: the encoder ignores its input; "
                + _ADVICE]
    out = []
    if std.max() < SMALL_STD:
        out.append(f"every code dimension's standard deviation is below {SMALL_STD:g} (largest {std.max():.2g}): far "
                   "below the scale the metrics' estimators (lasso, histograms, classifiers) expect; rescale the "
                   "codes, or " + _ADVICE)
    live = mu[:, ~constant]
    scaled = np.round(live / std[~constant], 6)  # distinct up to a millionth of each dimension's spread
    distinct = len(np.unique(scaled, axis=0))
    if distinct < MIN_DISTINCT * len(mu):
        out.append(f"only {distinct:,} distinct codes for {len(mu):,} images ({distinct / len(mu):.1%}): the codes "
                   "repeat (a saturated or quantised encoder); " + _ADVICE)
    return out


def _mean_distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b, axis=1).mean())


def probe_warnings(encode_batch: Callable[[np.ndarray], np.ndarray], images: np.ndarray, seed: int = 0) -> list[str]:
    """Warnings from encoding ``images`` (uint8, (n, H, W, C)) as given, with the pixel positions shuffled,
    and at half intensity; ``encode_batch`` maps such a batch to codes (n, d)."""
    images = np.asarray(images)
    if len(images) < 4:  # too few images to judge
        return []
    base = np.asarray(encode_batch(images), dtype=np.float64)
    rng = np.random.default_rng(seed)
    between = _mean_distance(base, base[rng.permutation(len(base))])
    if not np.isfinite(between) or between == 0.0:
        return []  # constant codes: code_warnings says so
    n, h, w, c = images.shape
    order = rng.permutation(h * w)
    shuffled = images.reshape(n, h * w, c)[:, order].reshape(images.shape)
    out = []
    moved = _mean_distance(base, np.asarray(encode_batch(shuffled), dtype=np.float64))
    if moved < BLIND_RATIO * between:
        out.append(f"shuffling every image's pixels moves the codes by {moved / between:.1%} of the distance between "
                   "two images' codes: the encoder sees pixel statistics, not the image; " + _ADVICE)
    moved = _mean_distance(base, np.asarray(encode_batch(images // 2), dtype=np.float64))
    if moved < BLIND_RATIO * between:
        out.append(f"halving every image's intensity moves the codes by {moved / between:.1%} of the distance "
                   "between two images' codes: the encoder saturates; " + _ADVICE)
    return out


def probe_rows(n: int, size: int = PROBE_SIZE, seed: int = 0) -> np.ndarray:
    """``size`` rows of ``n`` spread over the whole set (sorted, deterministic)."""
    if n <= size:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size, replace=False))

