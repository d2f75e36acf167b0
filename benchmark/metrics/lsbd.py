"""D_LSBD, the linear symmetry-based disentanglement metric for SO(2) subgroups (Tonnaer et al. 2022,
"Quantifying and Learning Linear Symmetry-Based Disentanglement", section "Practical Computation of
D_LSBD", equations (8)-(10); lower is better, 0 is perfect).

The data form a full grid G_1 x ... x G_K of cyclic subgroups with n_k elements each; element j of
subgroup k is the angle theta = 2 pi j / n_k. Codes come as an array (n_1, ..., n_K, D). For each
subgroup k:

1. eq. (8): subtract from every code the mean over subgroup k's orbit through it (the n_k codes that
   differ only in factor k), leaving the variation due to G_k;
2. project the N = n_1 ... n_K centred codes onto their first two principal components and divide
   each component by sqrt(2 lambda), lambda its variance (with the N - 1 denominator, as the
   authors' code), so that the points have mean squared norm (N - 1) / N;
3. eqs. (9)-(10): rotate every point by rho_omega(g_k)^{-1} = R(-omega theta), take the mean squared
   distance of the rotated points to their mean M_{k,omega} (one mean over the whole grid, eq. 9),
   and minimise over the integers omega in Omega (default [-10, 10]).

D_LSBD = (1/K) sum_k D^(k) (the text after eq. 10). The subgroups separate, so each omega is found
on its own (the authors' code searched all 21^K combinations). With complex points c = p_x + i p_y
the rotation is a phase, and the dispersion is

    D^(k)(omega) = mean |c|^2 - | (1/N) sum_j exp(-2 pi i omega j / n_k) S_j |^2,

S_j the sum of the points with g_k = j: a discrete Fourier transform of S, evaluated for every
omega at once. omega = 0 gives exactly (N - 1) / N = 1 - 1/N (the centred points have mean 0),
which is also the metric's largest possible value; an unstructured (random) code scores just below.

Objects x rotations (ModelNet40, COIL-100; the paper's supplementary section E): each object has its
own base point and one SO(2) subgroup, D_LSBD is computed per object (its own centring, PCA, omega)
and averaged over objects (:func:`d_lsbd_objects`).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._base import MetricInputError, MetricResult, constant_code_warnings, with_warnings

__all__ = ["LSBDObjectsResult", "LSBDResult", "OMEGA_SEARCHES", "REDUCTIONS", "d_lsbd", "d_lsbd_objects"]

DEFAULT_OMEGAS = range(-10, 11)

#: A subgroup whose second principal standard deviation is at most this fraction of the codes'
#: largest magnitude holds no 2-D representation of SO(2) (rank < 2 after centring): it scores the
#: metric's worst value 1 - 1/N at every omega instead of dividing by a zero variance.
_RANK_TOL = 1e-12

#: How the per-subgroup scores combine into D_LSBD.
REDUCTIONS: dict[str, Callable[[np.ndarray], float]] = {
    # The paper: "averaging across all subgroups" (text after eq. 10); the authors' current code.
    "mean": lambda scores: float(np.mean(scores)),
    # An earlier version of the authors' code summed over subgroups. The published tables for the
    # two-subgroup datasets (Square, Arrow, Airplane) hold values up to 1.905, which a mean cannot
    # exceed 1 - 1/N to reach: they are sums.
    "sum": lambda scores: float(np.sum(scores)),
}


# --------------------------------------------------------------------------- validation


def _check_array(codes: Any, min_ndim: int, what: str) -> np.ndarray:
    try:
        a = np.asarray(codes)
    except Exception as exc:  # ragged nested lists
        raise MetricInputError(f"codes must be a numeric array {what}: {exc}") from exc
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_) or np.iscomplexobj(a):
        raise MetricInputError(f"codes must be a real numeric array {what}, got dtype {a.dtype}")
    if a.ndim < min_ndim:
        raise MetricInputError(f"codes must have at least {min_ndim} dimensions {what}, got shape {a.shape}")
    a = a.astype(np.float64, copy=False)
    if a.shape[-1] < 2:
        raise MetricInputError(
            f"codes have {a.shape[-1]} code dimension(s) (last axis of shape {a.shape}); an SO(2) subgroup needs "
            "a 2-D subspace, so give at least 2 code dimensions")
    if not np.isfinite(a).all():
        raise MetricInputError("codes hold NaN or inf; fix or drop those encodings before scoring")
    return a


def _check_orbits(sizes: tuple[int, ...], axis_names: str) -> None:
    small = [(k, n) for k, n in enumerate(sizes) if n < 3]
    if small:
        listed = ", ".join(f"axis {k} has {n}" for k, n in small)
        raise MetricInputError(
            f"every {axis_names} needs at least 3 elements ({listed}); with fewer, the rotations R(omega theta) "
            "cannot tell omega apart: drop the axis or use a finer grid")


def _check_omegas(omegas: Iterable[Any]) -> np.ndarray:
    if isinstance(omegas, (str, bytes)) or not isinstance(omegas, Iterable):
        raise MetricInputError(f"omegas must be an iterable of integers (e.g. range(-10, 11)), got {omegas!r}")
    values = list(omegas)
    if not values:
        raise MetricInputError("omegas is empty; give at least one integer frequency (e.g. range(-10, 11))")
    for w in values:
        if isinstance(w, (bool, np.bool_)) or not isinstance(w, numbers.Integral):
            raise MetricInputError(f"omegas must hold integers (the representations of SO(2) are indexed by "
                                   f"integers), got {w!r}")
    return np.unique(np.asarray(values, dtype=np.int64))


# --------------------------------------------------------------------------- core


def _search_order(grid: np.ndarray) -> np.ndarray:
    """Indices of ``grid`` by preference on ties: smallest |omega| first, then positive before negative."""
    return np.array(sorted(range(len(grid)), key=lambda i: (abs(int(grid[i])), -int(grid[i]))), dtype=np.int64)


def _best(scores: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Minimum over the last axis of ``scores`` (..., W) and the omega reaching it (ties: smallest |omega|)."""
    order = _search_order(grid)
    pick = order[np.argmin(scores[..., order], axis=-1)]
    return np.take_along_axis(scores, pick[..., None], axis=-1)[..., 0], grid[pick]


def _whitened_top2(centred: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First two principal components of ``centred`` (..., N, D) (points already centred) divided by
    sqrt(2 lambda), lambda the component's variance with denominator N - 1. Returns the projections
    (..., N, 2), the variances (..., 2) and a flag (...) for a rank below 2 (projections then carry
    zeros where the variance is zero). Eigenvector signs are fixed (largest entry positive)."""
    n = centred.shape[-2]
    cov = np.einsum("...nd,...ne->...de", centred, centred) / (n - 1)
    _, vectors = np.linalg.eigh(cov)
    top = vectors[..., :, ::-1][..., :, :2]  # (..., D, 2), largest variance first
    biggest = np.take_along_axis(top, np.abs(top).argmax(axis=-2)[..., None, :], axis=-2)
    top = top * np.where(biggest < 0, -1.0, 1.0)
    projected = centred @ top  # (..., N, 2)
    # The variance of each projection itself (the eigenvalue, to rounding), so that the mean squared
    # norm of the whitened points is (N - 1) / N to one rounding.
    variance = np.einsum("...nc,...nc->...c", projected, projected) / (n - 1)
    degenerate = np.sqrt(variance[..., 1]) <= _RANK_TOL * scale
    keep = np.sqrt(variance) > _RANK_TOL * scale
    whitened = projected / np.sqrt(2.0 * np.where(keep, variance, 1.0))[..., None, :]
    whitened = np.where(keep[..., None, :], whitened, 0.0)
    return whitened, variance, degenerate


def _phases(grid: np.ndarray, n: int) -> np.ndarray:
    """exp(-2 pi i omega j / n) for every omega in ``grid`` and j = 0..n-1, shape (W, n). The product
    omega j is reduced mod n in integers first, so aliased frequencies give bit-identical phases."""
    index = np.mod(np.outer(grid, np.arange(n)), n)
    return np.exp(-2j * np.pi * index / n)


def _dispersion(sums: np.ndarray, mean_sq: np.ndarray, count: int, grid: np.ndarray) -> np.ndarray:
    """Eq. (10) for every omega: mean squared norm minus the squared norm of the rotated mean.
    ``sums`` (..., n) complex: the sum of the points at each group element; ``mean_sq`` (...)."""
    mean = sums @ _phases(grid, sums.shape[-1]).T / count  # (..., W)
    return np.maximum(mean_sq[..., None] - np.abs(mean) ** 2, 0.0)


# --------------------------------------------------------------------------- grid of K subgroups


@dataclass(frozen=True, eq=False)
class LSBDResult(MetricResult):
    """D_LSBD on a full grid of K cyclic subgroups (Tonnaer et al. 2022, eqs. 8-10); lower is better.

    ``score`` = ``reduction`` (mean by default) of ``subgroup_scores`` (K,); ``omegas`` (K,) the best
    integer frequency per subgroup (its sign follows the PCA sign convention: largest eigenvector
    entry positive); ``omega_grid`` (W,) the frequencies searched and ``scores_by_omega`` (K, W) the
    dispersion at each; ``projections`` (K, n_1, ..., n_K, 2) the whitened 2-D projection of every
    code for each subgroup, before the rotation (for plots); ``variances`` (K, 2) the two principal
    variances; ``degenerate`` (K,) subgroups whose centred codes have rank < 2 (scored 1 - 1/N at every
    omega, so the smallest |omega| searched is reported);
    ``chance`` the score at omega = 0 and the metric's maximum: 1 - 1/N (K (1 - 1/N) for "sum").
    """

    headline: ClassVar[tuple[str, ...]] = ("score",)

    score: float
    subgroup_scores: np.ndarray
    omegas: np.ndarray
    omega_grid: np.ndarray
    scores_by_omega: np.ndarray
    projections: np.ndarray
    variances: np.ndarray
    degenerate: np.ndarray
    chance: float
    reduction: str


def d_lsbd(codes: Any, *, omegas: Iterable[int] = DEFAULT_OMEGAS, reduction: str = "mean") -> LSBDResult:
    """D_LSBD of ``codes`` (n_1, ..., n_K, D) on the full grid of K cyclic subgroups, element j of
    subgroup k at angle 2 pi j / n_k (Tonnaer et al. 2022, eqs. 8-10).

    D^(k) = min_{omega in omegas} (1/N) sum_g || R(-omega theta_k(g)) z'_k(g) - M_{k,omega} ||^2 with
    z'_k the orbit-centred codes projected on their top two principal components and divided by
    sqrt(2 lambda), M_{k,omega} the mean of the rotated points over the whole grid (eq. 9), N the grid
    size. ``reduction``: "mean" over subgroups (the paper) or "sum" (the published tables for the
    two-subgroup datasets). Every score lies in [0, 1 - 1/N] for "mean"; omega = 0 gives 1 - 1/N.
    """
    z = _check_array(codes, 2, "of shape (n_1, ..., n_K, D): one axis per cyclic subgroup, then the code")
    sizes = z.shape[:-1]
    _check_orbits(sizes, "subgroup axis (orbit)")
    grid = _check_omegas(omegas)
    if reduction not in REDUCTIONS:
        raise MetricInputError(f"unknown reduction {reduction!r}; use one of {sorted(REDUCTIONS)}")
    k_groups = len(sizes)
    n_total = int(np.prod(sizes))
    scale = float(np.abs(z).max())

    scores = np.empty((k_groups, len(grid)))
    projections = np.empty((k_groups, *sizes, 2))
    variances = np.empty((k_groups, 2))
    degenerate = np.zeros(k_groups, dtype=bool)
    for k in range(k_groups):
        centred = z - z.mean(axis=k, keepdims=True)  # eq. (8)
        whitened, variances[k], degenerate[k] = _whitened_top2(centred.reshape(n_total, -1), scale)
        points = whitened.reshape(*sizes, 2)
        projections[k] = points
        c = points[..., 0] + 1j * points[..., 1]
        sums = np.moveaxis(c, k, -1).reshape(-1, sizes[k]).sum(axis=0)  # S_j, j = 0..n_k-1
        mean_sq = np.mean(np.abs(c) ** 2)
        scores[k] = _dispersion(sums, np.asarray(mean_sq), n_total, grid)
        if degenerate[k]:
            scores[k] = 1.0 - 1.0 / n_total
    subgroup_scores, best = _best(scores, grid)
    result = LSBDResult(
        score=REDUCTIONS[reduction](subgroup_scores),
        subgroup_scores=subgroup_scores,
        omegas=best.astype(np.int64),
        omega_grid=grid,
        scores_by_omega=scores,
        projections=projections,
        variances=variances,
        degenerate=degenerate,
        chance=REDUCTIONS[reduction](np.full(k_groups, 1.0 - 1.0 / n_total)),
        reduction=reduction,
    )
    return with_warnings(result, constant_code_warnings(z))


# --------------------------------------------------------------------------- objects x rotations


def _per_object(scores: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each object its own omega (the paper: D_LSBD "calculated per object instance" and averaged)."""
    return _best(scores, grid)


def _shared(scores: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One omega for every object, minimising the average over objects (the authors' code)."""
    _, w = _best(scores.mean(axis=0), grid)
    column = int(np.flatnonzero(grid == w)[0])
    return scores[:, column], np.full(scores.shape[0], w, dtype=np.int64)


#: How the frequency omega is chosen in the objects x rotations case.
OMEGA_SEARCHES: dict[str, Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "per_object": _per_object,
    "shared": _shared,
}


@dataclass(frozen=True, eq=False)
class LSBDObjectsResult(MetricResult):
    """D_LSBD per object for objects x rotations data, averaged over objects (Tonnaer et al. 2022,
    supplementary section E); lower is better.

    ``object_scores`` (O,), ``omegas`` (O,) the frequency used for each object, ``omega_grid`` (W,),
    ``scores_by_omega`` (O, W), ``projections`` (O, R, 2) the whitened 2-D projections before rotation,
    ``variances`` (O, 2), ``degenerate`` (O,) objects whose centred codes have rank < 2 (scored
    1 - 1/R), ``chance`` = 1 - 1/R with R the number of rotations, ``omega_search`` the rule used.
    """

    headline: ClassVar[tuple[str, ...]] = ("score",)

    score: float
    object_scores: np.ndarray
    omegas: np.ndarray
    omega_grid: np.ndarray
    scores_by_omega: np.ndarray
    projections: np.ndarray
    variances: np.ndarray
    degenerate: np.ndarray
    chance: float
    omega_search: str


def d_lsbd_objects(codes: Any, *, omegas: Iterable[int] = DEFAULT_OMEGAS,
                   omega_search: str = "per_object") -> LSBDObjectsResult:
    """D_LSBD for codes (n_objects, n_rotations, D): for every object, centre its n_rotations codes,
    project on their top two principal components divided by sqrt(2 lambda), and take the eq. (10)
    dispersion after rotating rotation r back by R(-omega 2 pi r / n_rotations); average over objects.

    ``omega_search``: "per_object" (default; each object's D_LSBD is its own minimum, as the paper
    describes) or "shared" (one omega for all objects minimising the average, as the authors' code).
    """
    z = _check_array(codes, 3, "of shape (n_objects, n_rotations, D)")
    if z.ndim != 3:
        raise MetricInputError(f"codes must have shape (n_objects, n_rotations, D), got {z.ndim} axes {z.shape}; "
                               "use d_lsbd for a grid of several cyclic subgroups")
    _check_orbits(z.shape[1:2], "object's rotation axis")
    grid = _check_omegas(omegas)
    if omega_search not in OMEGA_SEARCHES:
        raise MetricInputError(f"unknown omega_search {omega_search!r}; use one of {sorted(OMEGA_SEARCHES)}")
    n_rot = z.shape[1]
    scale = float(np.abs(z).max())
    centred = z - z.mean(axis=1, keepdims=True)
    whitened, variances, degenerate = _whitened_top2(centred, scale)
    c = whitened[..., 0] + 1j * whitened[..., 1]  # (O, R): one point per group element
    scores = _dispersion(c, np.mean(np.abs(c) ** 2, axis=1), n_rot, grid)
    scores[degenerate] = 1.0 - 1.0 / n_rot
    object_scores, best = OMEGA_SEARCHES[omega_search](scores, grid)
    result = LSBDObjectsResult(
        score=float(object_scores.mean()),
        object_scores=object_scores,
        omegas=best.astype(np.int64),
        omega_grid=grid,
        scores_by_omega=scores,
        projections=whitened,
        variances=variances,
        degenerate=degenerate,
        chance=1.0 - 1.0 / n_rot,
        omega_search=omega_search,
    )
    return with_warnings(result, constant_code_warnings(z))
