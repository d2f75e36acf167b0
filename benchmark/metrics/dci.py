"""DCI: disentanglement, completeness and informativeness, and zero-shot informativeness.

Eastwood & Williams 2018, "A Framework for the Quantitative Evaluation of Disentangled
Representations" (``shared/papers/eastwood-williams-2018-dci-framework.txt``), section 2 and
section 4.3; zero-shot inference in appendix B.2.

One regressor f_j per factor z_j predicts z_j from the whole code c (D dimensions). Their relative
importances form R (D codes x K factors), R_ij = importance of c_i for predicting z_j. Then

    P_ij = R_ij / sum_k R_ik,   D_i = 1 - H_K(P_i.) = 1 + sum_k P_ik log_K P_ik,
    rho_i = sum_j R_ij / sum_ij R_ij,   D = sum_i rho_i D_i,                       (section 2)
    P~_ij = R_ij / sum_d R_dj,  C_j = 1 - H_D(P~_.j),   C = mean_j C_j,
    I_j = NRMSE_j = RMSE(z_j, f_j(c)) / std_train(z_j)  on the test split (lower is better),

std_train the population standard deviation (ddof 0) of the factor on the training split: the
original code standardised targets with training statistics, so an error of 1 is that of always
predicting the training mean, on the test split and on every held-out set alike (``nrmse_std="eval"``
divides by the evaluated set's own std instead, as the original code's ``nrmse`` did).

Regressors (the ``regressor`` argument, registry :data:`REGRESSORS`):

- ``"lasso"``: inputs and targets standardised with training statistics, R_ij = |w_ij|; the l1
  coefficient alpha is chosen per factor on the validation split (section 4.3).
- ``"forest"``: ``RandomForestRegressor`` with 10 trees (section 4.3), R_.j = its
  ``feature_importances_``; the tree depth is chosen per factor on the validation split. One forest
  grown to the deepest depth of the grid serves every depth (see :class:`_DepthLimitedForest`).
- ``"gbt"``: disentanglement_lib's variant: ``GradientBoostingClassifier`` (sklearn defaults) per
  factor on discrete factor classes, R_.j = ``feature_importances_``, informativeness = accuracy
  (higher is better). It has no hyperparameter to choose, so no validation split is used.

Without ``codes_val``/``factors_val`` a seeded ``val_fraction`` (20 %) of the training set is held
out to choose the hyperparameter, and the regressor is then refitted on the whole training set with
the chosen value.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
from sklearn.ensemble import GradientBoostingClassifier, RandomForestRegressor
from sklearn.linear_model import lasso_path

from ..environment import usable_cores
from ._progress import metric_steps
from ._base import (
    MetricInputError,
    MetricResult,
    check_classes,
    check_codes,
    check_factors,
    check_kinds,
    check_positive_int,
    check_seed,
    constant_code_warnings,
    factor_classes,
    with_warnings,
)

__all__ = [
    "COMPLETENESS",
    "CYCLIC",
    "DEFAULT_ALPHAS",
    "DEFAULT_DEPTHS",
    "NRMSE_STD",
    "REGRESSORS",
    "DCIResult",
    "ZeroShotResult",
    "dci",
    "dci_from_importance",
    "dci_of_samples",
    "zero_shot_informativeness",
]

#: Lasso l1 coefficients tried on the validation split (inputs and targets are standardised, so
#: alpha = 1 already sets every weight to zero: the constant predictor is always on the grid).
DEFAULT_ALPHAS: tuple[float, ...] = tuple(float(a) for a in np.logspace(-4, 0, 13))
#: Random-forest depths tried on the validation split (``None``: grown until the leaves are pure).
DEFAULT_DEPTHS: tuple[int | None, ...] = (2, 4, 8, 12, 16, None)
#: Trees per random forest (Eastwood & Williams fix n = 10, section 4.3).
DEFAULT_TREES = 10
#: Coordinate-descent tolerance of the lasso (relative to ||y||^2; sklearn's 1e-4 stops the path
#: early at small alphas).
_LASSO_TOL = 1e-8
#: Negative importances down to this fraction of the matrix's total magnitude are rounding and count
#: as 0: scikit-learn >= 1.9 sums impurity decreases in an order that can leave -1e-17 where a feature
#: was never used (or only in splits that improved nothing).
_ROUNDING = 1e-12


# --------------------------------------------------------------------------- disentanglement, completeness


def _one_minus_entropy(p: np.ndarray, base: int) -> np.ndarray:
    """1 - H_base of every row of ``p`` (rows sum to 1 or are all zero), with 0 log 0 = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return np.clip(1.0 + terms.sum(axis=1) / math.log(base), 0.0, 1.0)


def _entropic_scores(r: np.ndarray) -> np.ndarray:
    """1 - H_M(r_i. / sum_m r_im) for every row i of ``r`` (n x M), log base M.

    A row without any importance scores 0 (it says nothing about any column). With M = 1 the log base
    is undefined: a row with importance scores 1 (it can only point at the one column).
    """
    total = r.sum(axis=1)
    has = total > 0
    out = np.zeros(r.shape[0])
    if r.shape[1] == 1:
        out[has] = 1.0
        return out
    p = r[has] / total[has, None]
    out[has] = _one_minus_entropy(p, r.shape[1])
    return out


def _completeness_mean(factor_c: np.ndarray, r: np.ndarray) -> float:
    """C = mean_j C_j (the paper, section 2)."""
    return float(factor_c.mean())


def _completeness_weighted(factor_c: np.ndarray, r: np.ndarray) -> float:
    """C = sum_j (sum_i R_ij / sum_ij R_ij) C_j (disentanglement_lib)."""
    total = r.sum()
    if total <= 0:
        return 0.0
    return float(np.dot(r.sum(axis=0) / total, factor_c))


#: How the per-factor completeness scores are combined (``completeness`` argument).
COMPLETENESS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "mean": _completeness_mean,
    "weighted": _completeness_weighted,
}


def _lookup(registry: Mapping[str, Any], name: Any, argument: str) -> Any:
    if not isinstance(name, str) or name not in registry:
        raise MetricInputError(f"unknown {argument} {name!r}; use one of {sorted(registry)}")
    return registry[name]


def dci_from_importance(importance: Any, completeness: str = "mean"
                        ) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
    """Disentanglement and completeness of an importance matrix R (D codes x K factors), R >= 0.

    Returns ``(D, C, code_disentanglement, code_relevance, factor_completeness)`` with (section 2)
    D_i = 1 - H_K(P_i.), P_ij = R_ij / sum_k R_ik; rho_i = sum_j R_ij / sum R; D = sum_i rho_i D_i;
    C_j = 1 - H_D(P~_.j), P~_ij = R_ij / sum_i R_ij; C = mean_j C_j (``completeness="mean"``, the
    paper) or sum_j (sum_i R_ij / sum R) C_j (``"weighted"``, disentanglement_lib).

    Conventions where the formulas are undefined: a code with no importance has D_i = 0 and rho_i = 0
    (it does not count); a factor no code is important for has C_j = 0; with K = 1 every code with
    importance has D_i = 1, with D = 1 a factor with importance has C_j = 1; an all-zero R gives
    D = C = 0.
    """
    combine = _lookup(COMPLETENESS, completeness, "completeness")
    r = np.asarray(importance)
    if r.dtype == object or not (np.issubdtype(r.dtype, np.number) or r.dtype == np.bool_) or np.iscomplexobj(r):
        raise MetricInputError(f"importance must be a real numeric array, got dtype {r.dtype}")
    if r.ndim != 2 or 0 in r.shape:
        raise MetricInputError(f"importance must be a non-empty 2-D array (codes x factors), got shape {r.shape}")
    r = r.astype(np.float64)
    if not np.isfinite(r).all():
        raise MetricInputError("importance holds NaN or inf; give finite importances")
    r = _zero_rounding(r)
    code_d = _entropic_scores(r)
    factor_c = _entropic_scores(r.T)
    total = r.sum()
    rho = r.sum(axis=1) / total if total > 0 else np.zeros(r.shape[0])
    # weighted means of scores in [0, 1]; the clip removes rounding (weights summing to 1 + 2e-16)
    d, c = (float(np.clip(v, 0.0, 1.0)) for v in (np.dot(rho, code_d), combine(factor_c, r)))
    return d, c, code_d, rho, factor_c


def _zero_rounding(r: np.ndarray) -> np.ndarray:
    """``r`` with negative entries that are rounding (>= -``_ROUNDING`` x sum |r|) set to 0; any
    larger negative entry is an error (importances are magnitudes)."""
    if not (r < 0).any():
        return r
    tolerance = _ROUNDING * float(np.abs(r).sum())
    worst = float(r.min())
    if worst < -tolerance:
        raise MetricInputError(f"importance holds negative entries (the smallest is {worst:.3g}); "
                               "give magnitudes (e.g. |weights|)")
    return np.where(r < 0, 0.0, r)


# --------------------------------------------------------------------------- regressors


class _Model(Protocol):
    def predict(self, x: np.ndarray) -> np.ndarray: ...

    @property
    def importance(self) -> np.ndarray: ...


@dataclass(frozen=True)
class _Linear:
    """y = x w + b; importance |w|."""

    coef: np.ndarray
    intercept: float

    def predict(self, x: np.ndarray) -> np.ndarray:
        return x @ self.coef + self.intercept

    @property
    def importance(self) -> np.ndarray:
        return np.abs(self.coef)


@dataclass(frozen=True)
class _Fitted:
    """A fitted sklearn estimator; importance = its ``feature_importances_``."""

    estimator: Any

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.estimator.predict(x), dtype=np.float64)

    @property
    def importance(self) -> np.ndarray:
        return _zero_rounding(np.asarray(self.estimator.feature_importances_, dtype=np.float64))


@dataclass(frozen=True)
class _Options:
    alphas: tuple[float, ...]
    depths: tuple[int | None, ...]
    n_trees: int
    gbt_params: Mapping[str, Any]
    max_iter: int


def _fit_lasso(x: np.ndarray, y: np.ndarray, grid: Sequence[Any], random_state: int,
               options: _Options) -> list[_Model]:
    """One lasso per alpha of ``grid`` (one coordinate-descent path with warm starts); the intercept
    comes from centring on the data it is fitted on."""
    x_mean = x.mean(axis=0)
    y_mean = float(y.mean())
    values = np.asarray(grid, dtype=np.float64)
    order = np.argsort(-values, kind="stable")  # the path runs from the largest alpha down
    _, coefs, _ = lasso_path(x - x_mean, y - y_mean, alphas=values[order], max_iter=options.max_iter,
                             tol=_LASSO_TOL)
    models: list[_Model] = [None] * len(values)  # type: ignore[list-item]
    for k, idx in enumerate(order):
        w = np.array(coefs[:, k], dtype=np.float64)
        models[idx] = _Linear(w, y_mean - float(x_mean @ w))
    return models


@dataclass(frozen=True)
class _DepthLimitedForest:
    """A random forest grown to ``forest``'s depth, read as if grown with ``max_depth=depth``.

    sklearn grows trees depth first and a node's split never depends on the depth limit, so cutting
    every tree at ``depth`` gives the forest that ``max_depth=depth`` grows from the same bootstrap
    samples (the same estimator; the two can differ only where two splits improve the impurity by
    exactly the same amount, where the tie is broken by a different random draw). One forest then
    serves the whole depth grid. A sample's prediction is the value of the node where its path
    reaches ``depth`` (or its leaf); the importance is the impurity decrease of the splits above
    ``depth``, normalised per tree and averaged as ``feature_importances_`` does.
    """

    forest: RandomForestRegressor
    depth: int | None

    def _full(self) -> bool:
        return self.depth is None or all(e.tree_.max_depth <= self.depth for e in self.forest.estimators_)

    def predict(self, x: np.ndarray) -> np.ndarray:
        if self._full():
            return np.asarray(self.forest.predict(x), dtype=np.float64)
        total = np.zeros(len(x))
        for est in self.forest.estimators_:
            path = est.decision_path(x)  # CSR rows: the nodes from the root down, in increasing id = depth order
            length = np.diff(path.indptr)
            node = path.indices[path.indptr[:-1] + np.minimum(self.depth, length - 1)]
            total += est.tree_.value[node, 0, 0]
        return total / len(self.forest.estimators_)

    @property
    def importance(self) -> np.ndarray:
        if self._full():
            return _zero_rounding(np.asarray(self.forest.feature_importances_, dtype=np.float64))
        n_features = self.forest.n_features_in_
        per_tree = []
        for est in self.forest.estimators_:
            tree = est.tree_
            if tree.node_count <= 1:
                continue
            left, right = tree.children_left, tree.children_right
            split = np.flatnonzero((left >= 0) & (tree.compute_node_depths() - 1 < self.depth))
            w, imp = tree.weighted_n_node_samples, tree.impurity
            decrease = w[split] * imp[split] - w[left[split]] * imp[left[split]] - w[right[split]] * imp[right[split]]
            tree_imp = np.bincount(tree.feature[split], weights=decrease, minlength=n_features)
            total = tree_imp.sum()
            per_tree.append(tree_imp / total if total > 0 else tree_imp)
        if not per_tree:
            return np.zeros(n_features)
        mean = np.mean(per_tree, axis=0)
        total = mean.sum()
        return _zero_rounding(mean / total if total > 0 else mean)


def forest_threads() -> int:
    """Threads that grow a forest's trees: the cores this process may use, at most the thread limit in force
    (``threadpoolctl``, e.g. a sweep job's ``--threads``). The scores do not depend on it: every tree's seed
    is drawn from ``random_state`` before any tree grows, and predictions are then summed in tree order
    (the forest predicts single-threaded), so the numbers are those of one thread, bit for bit."""
    from threadpoolctl import threadpool_info

    limits = [int(p["num_threads"]) for p in threadpool_info() if p.get("num_threads")]
    return max(1, min([usable_cores(), *limits]))


def _fit_forest(x: np.ndarray, y: np.ndarray, grid: Sequence[Any], random_state: int,
                options: _Options) -> list[_Model]:
    """One random forest (``options.n_trees`` trees, grown on :func:`forest_threads` threads) grown to the
    deepest depth of ``grid``, read at every depth of the grid (see :class:`_DepthLimitedForest`)."""
    deepest = None if any(d is None for d in grid) else max(grid)
    forest = RandomForestRegressor(n_estimators=options.n_trees, max_depth=deepest, random_state=random_state,
                                   n_jobs=forest_threads()).fit(x, y)
    forest.set_params(n_jobs=1)  # threads would add the trees' predictions in the order they finish
    return [_DepthLimitedForest(forest, depth) for depth in grid]


def _fit_gbt(x: np.ndarray, y: np.ndarray, grid: Sequence[Any], random_state: int,
             options: _Options) -> list[_Model]:
    """``GradientBoostingClassifier`` with sklearn defaults (overridden by ``gbt_params``) on classes."""
    params = {"random_state": random_state, **options.gbt_params}
    return [_Fitted(GradientBoostingClassifier(**params).fit(x, y.astype(np.int64))) for _ in grid]


@dataclass(frozen=True)
class _Regressor:
    """One DCI regressor: how to fit it over a hyperparameter grid and how its predictions are scored."""

    fit: Callable[[np.ndarray, np.ndarray, Sequence[Any], int, _Options], list[_Model]]
    hyperparameter: str | None  # the grid-chosen hyperparameter (None: nothing to choose)
    grid: Callable[[_Options], tuple[Any, ...]]
    standardise: bool  # inputs and targets standardised with training statistics
    measure: str  # "nrmse" (lower is better) or "accuracy" (higher is better)


#: The regressors of :func:`dci` and :func:`zero_shot_informativeness`, by name.
REGRESSORS: dict[str, _Regressor] = {
    "lasso": _Regressor(_fit_lasso, "alpha", lambda o: o.alphas, True, "nrmse"),
    "forest": _Regressor(_fit_forest, "max_depth", lambda o: o.depths, True, "nrmse"),
    "gbt": _Regressor(_fit_gbt, None, lambda o: (None,), False, "accuracy"),
}


# --------------------------------------------------------------------------- targets and errors


def _raw(column: np.ndarray) -> np.ndarray:
    return column[:, None]


def _cossin(column: np.ndarray) -> np.ndarray:
    return np.stack([np.cos(column), np.sin(column)], axis=1)


#: How a cyclic factor (angle in radians) is regressed (``cyclic`` argument): ``"raw"`` the angle
#: itself (the paper), ``"cossin"`` its (cos, sin) pair with one regressor each.
CYCLIC: dict[str, Callable[[np.ndarray], np.ndarray]] = {"raw": _raw, "cossin": _cossin}


def _targets(factors: np.ndarray, kinds: tuple[str, ...], cyclic: str) -> list[np.ndarray]:
    """Regression targets of every factor: (N, 1) or, for a cyclic factor with ``"cossin"``, (N, 2)."""
    return [(CYCLIC[cyclic] if kind == "cyclic" else _raw)(factors[:, j]) for j, kind in enumerate(kinds)]


def _nrmse(pred: np.ndarray, target: np.ndarray, scale2: float) -> float:
    """sqrt(mean_n sum_t (pred_nt - target_nt)^2) / sqrt(scale2): the RMSE of the target vector (one or
    two columns) over the root of the summed variances of its columns."""
    return float(np.sqrt(np.mean(np.sum((pred - target) ** 2, axis=1)) / scale2))


def _accuracy(pred: np.ndarray, target: np.ndarray, scale2: float) -> float:
    return float(np.mean(pred[:, 0] == target[:, 0]))


_MEASURES: dict[str, Callable[[np.ndarray, np.ndarray, float], float]] = {"nrmse": _nrmse, "accuracy": _accuracy}


def _scale_train(target: np.ndarray, train_var: np.ndarray, name: str, j: int) -> float:
    return float(train_var.sum())


def _scale_eval(target: np.ndarray, train_var: np.ndarray, name: str, j: int) -> float:
    var = float(target.var(axis=0).sum())
    if var <= 0:
        raise MetricInputError(f"factor {j} is constant on {name}, so nrmse_std='eval' divides by zero; "
                               "use nrmse_std='train' (normalise by the training std)")
    return var


#: The variance an NRMSE is normalised by (``nrmse_std`` argument): ``"train"`` the training
#: targets' (default: the same scale for test and every held-out set), ``"eval"`` the evaluated set's
#: own (as the original code's ``nrmse``).
NRMSE_STD: dict[str, Callable[[np.ndarray, np.ndarray, str, int], float]] = {
    "train": _scale_train,
    "eval": _scale_eval,
}


# --------------------------------------------------------------------------- fitting (shared)


@dataclass(frozen=True)
class _Standardiser:
    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def of(cls, a: np.ndarray, active: bool) -> _Standardiser:
        if not active:
            return cls(np.zeros(a.shape[1]), np.ones(a.shape[1]))
        std = a.std(axis=0)
        return cls(a.mean(axis=0), np.where(std > 0, std, 1.0))  # a constant column becomes all zeros

    def forward(self, a: np.ndarray) -> np.ndarray:
        return (a - self.mean) / self.std

    def backward(self, a: np.ndarray) -> np.ndarray:
        return a * self.std + self.mean


@dataclass(frozen=True)
class _FactorFit:
    models: tuple[_Model, ...]  # one per target column
    target_scale: _Standardiser
    train_var: np.ndarray  # variance of each raw target column on the training set
    hyperparameters: dict[str, Any]

    def predict(self, x_std: np.ndarray) -> np.ndarray:
        pred = np.stack([m.predict(x_std) for m in self.models], axis=1)
        return self.target_scale.backward(pred)

    @property
    def importance(self) -> np.ndarray:
        return np.sum([m.importance for m in self.models], axis=0)


@dataclass(frozen=True)
class _Fit:
    spec: _Regressor
    code_scale: _Standardiser
    factors: tuple[_FactorFit, ...]
    selection: str

    def errors(self, codes: np.ndarray, targets: list[np.ndarray], nrmse_std: str, name: str) -> np.ndarray:
        measure = _MEASURES[self.spec.measure]
        x = self.code_scale.forward(codes)
        out = np.empty(len(self.factors))
        for j, (fit, target) in enumerate(zip(self.factors, targets)):
            scale2 = NRMSE_STD[nrmse_std](target, fit.train_var, name, j) if self.spec.measure == "nrmse" else 1.0
            out[j] = measure(fit.predict(x), target, scale2)
        return out

    @property
    def importance(self) -> np.ndarray:
        return np.stack([f.importance for f in self.factors], axis=1)


def _fit_factor(spec: _Regressor, options: _Options, grid: tuple[Any, ...], random_state: int,
                x: np.ndarray, t: np.ndarray, x_val: np.ndarray | None, t_val: np.ndarray | None,
                fit_rows: np.ndarray | None) -> _FactorFit:
    """Fit one factor's regressor(s), choosing the grid value with the lowest validation error.

    ``x`` are the standardised training codes, ``t`` the raw targets (N, m). The validation set is
    ``(x_val, t_val)`` when given; otherwise the rows not in ``fit_rows`` of the training set, and the
    chosen value is refitted on all training rows.
    """
    target_scale = _Standardiser.of(t, spec.standardise)
    ts = target_scale.forward(t)
    train_var = t.var(axis=0)
    if len(grid) == 1:
        models = tuple(spec.fit(x, ts[:, c], grid, random_state, options)[0] for c in range(t.shape[1]))
        chosen = grid[0]
    else:
        if x_val is None:
            assert fit_rows is not None
            held = np.ones(len(x), dtype=bool)
            held[fit_rows] = False
            x_fit, ts_fit, x_sel, t_sel = x[fit_rows], ts[fit_rows], x[held], t[held]
        else:
            assert t_val is not None
            x_fit, ts_fit, x_sel, t_sel = x, ts, x_val, t_val
        per_target = [spec.fit(x_fit, ts_fit[:, c], grid, random_state, options) for c in range(t.shape[1])]
        errors = []
        for g in range(len(grid)):
            pred = target_scale.backward(np.stack([per_target[c][g].predict(x_sel) for c in range(t.shape[1])], axis=1))
            errors.append(np.mean(np.sum((pred - t_sel) ** 2, axis=1)))
        best = int(np.argmin(errors))  # first of equals: the grid's order breaks ties
        chosen = grid[best]
        if x_val is None:
            models = tuple(spec.fit(x, ts[:, c], (chosen,), random_state, options)[0] for c in range(t.shape[1]))
        else:
            models = tuple(per_target[c][best] for c in range(t.shape[1]))
    hyper = {} if spec.hyperparameter is None else {spec.hyperparameter: chosen}
    return _FactorFit(models, target_scale, train_var, hyper)


def _fit_all(spec: _Regressor, options: _Options, codes: np.ndarray, targets: list[np.ndarray],
             codes_val: np.ndarray | None, targets_val: list[np.ndarray] | None, seed: int,
             val_fraction: float) -> _Fit:
    """Fit every factor's regressor on the training set (shared by :func:`dci` and
    :func:`zero_shot_informativeness`, so both give the same regressors for the same seed)."""
    rng = np.random.default_rng(seed)
    states = rng.integers(0, 2**31 - 1, size=len(targets))
    grid = spec.grid(options)
    code_scale = _Standardiser.of(codes, spec.standardise)
    x = code_scale.forward(codes)
    x_val = None if codes_val is None else code_scale.forward(codes_val)
    fit_rows = None
    if len(grid) == 1:
        selection = "none"
    elif codes_val is not None:
        selection = "validation"
    else:
        n_held = min(max(1, int(round(val_fraction * len(x)))), len(x) - 2)
        fit_rows = np.sort(rng.permutation(len(x))[n_held:])
        selection = f"holdout {val_fraction:g} of train, refit on train"
    fits = tuple(
        _fit_factor(spec, options, grid, int(states[j]), x, targets[j], x_val,
                    None if targets_val is None else targets_val[j], fit_rows)
        for j in metric_steps(range(len(targets)), len(targets), f"{spec.hyperparameter or 'fit'} per factor"))
    return _Fit(spec, code_scale, fits, selection)


# --------------------------------------------------------------------------- argument checks


def _check_options(alphas: Sequence[float] | None, depths: Sequence[int | None] | None, n_trees: int,
                   gbt_params: Mapping[str, Any] | None, max_iter: int) -> _Options:
    if alphas is None:
        alpha_grid = DEFAULT_ALPHAS
    else:
        try:
            alpha_grid = tuple(float(a) for a in alphas)
        except (TypeError, ValueError) as exc:
            raise MetricInputError(f"alphas must be a sequence of positive numbers, got {alphas!r}") from exc
        if not alpha_grid or not all(math.isfinite(a) and a > 0 for a in alpha_grid):
            raise MetricInputError(f"alphas must be a non-empty sequence of finite numbers > 0, got {alphas!r}")
    if depths is None:
        depth_grid = DEFAULT_DEPTHS
    else:
        try:
            depth_grid = () if isinstance(depths, (str, bytes)) else tuple(depths)
        except TypeError:
            depth_grid = ()
        ok = all(d is None or (isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 1)
                 for d in depth_grid)
        if not depth_grid or not ok:
            raise MetricInputError(f"depths must be a non-empty sequence of integers >= 1 or None, got {depths!r}")
        depth_grid = tuple(None if d is None else int(d) for d in depth_grid)
    n_trees = check_positive_int("n_trees", n_trees)
    max_iter = check_positive_int("max_iter", max_iter)
    if gbt_params is None:
        gbt_params = {}
    if not isinstance(gbt_params, Mapping) or "random_state" in gbt_params:
        raise MetricInputError("gbt_params must be a mapping of GradientBoostingClassifier arguments "
                               "(random_state comes from seed)")
    return _Options(alpha_grid, depth_grid, n_trees, dict(gbt_params), max_iter)


def _check_fraction(val_fraction: Any, name: str = "val_fraction") -> float:
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, numbers.Real) or not 0 < val_fraction < 1:
        raise MetricInputError(f"{name} must be a number in (0, 1), got {val_fraction!r}")
    return float(val_fraction)


def _check_split(codes: Any, factors: Any, name: str, d: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """An evaluation split: codes (N, d) and factors (N, k); a factor may be constant here."""
    x = check_codes(codes, f"codes_{name}")
    if x.shape[1] != d:
        raise MetricInputError(f"codes_{name} has {x.shape[1]} code dimensions but codes_train has {d}; "
                               "give codes of the same representation")
    f = check_factors(factors, len(x), f"factors_{name}", allow_constant=True)
    if f.shape[1] != k:
        raise MetricInputError(f"factors_{name} has {f.shape[1]} factors but factors_train has {k}; "
                               "give the same factors in the same order")
    return x, f


def _check_heldout(heldout: Any, d: int, k: int, with_classes: bool) -> dict[str, tuple[np.ndarray, ...]]:
    if heldout is None:
        return {}
    if not isinstance(heldout, Mapping):
        raise MetricInputError("heldout must be a mapping name -> (codes, factors), e.g. {'zeroshot': (c, z)}")
    out: dict[str, tuple[np.ndarray, ...]] = {}
    for name, entry in heldout.items():
        if not isinstance(name, str):
            raise MetricInputError(f"heldout names must be strings, got {name!r}")
        want = "(codes, factors, classes)" if with_classes else "(codes, factors)"
        if not isinstance(entry, (tuple, list)) or len(entry) != (3 if with_classes else 2):
            raise MetricInputError(f"heldout[{name!r}] must be a tuple {want}")
        x, f = _check_split(entry[0], entry[1], f"heldout[{name!r}]", d, k)
        if with_classes:
            out[name] = (x, f, check_classes(entry[2], f.shape, f"heldout[{name!r}] classes"))
        else:
            out[name] = (x, f)
    return out


@dataclass(frozen=True)
class _Prepared:
    spec: _Regressor
    options: _Options
    kinds: tuple[str, ...]
    x_train: np.ndarray
    f_train: np.ndarray
    x_val: np.ndarray | None
    f_val: np.ndarray | None
    seed: int
    val_fraction: float


def _prepare(codes_train: Any, factors_train: Any, codes_val: Any, factors_val: Any, regressor: str,
             kinds: Sequence[str] | None, cyclic: str, seed: Any, nrmse_std: str, val_fraction: Any,
             options: _Options) -> _Prepared:
    spec = _lookup(REGRESSORS, regressor, "regressor")
    _lookup(CYCLIC, cyclic, "cyclic")
    _lookup(NRMSE_STD, nrmse_std, "nrmse_std")
    seed = check_seed(seed)
    val_fraction = _check_fraction(val_fraction)
    x = check_codes(codes_train, "codes_train", min_samples=5)
    f = check_factors(factors_train, len(x), "factors_train")
    kinds_t = check_kinds(kinds, f.shape[1])
    if spec.measure == "accuracy" and cyclic != "raw":
        raise MetricInputError(f"cyclic={cyclic!r} applies to regressors; the gbt classifier predicts factor classes, "
                               "use cyclic='raw'")
    if (codes_val is None) != (factors_val is None):
        raise MetricInputError("give both codes_val and factors_val, or neither "
                               "(then a seeded part of the training set chooses the hyperparameters)")
    x_val = f_val = None
    if codes_val is not None:
        x_val, f_val = _check_split(codes_val, factors_val, "val", x.shape[1], f.shape[1])
    return _Prepared(spec, options, kinds_t, x, f, x_val, f_val, seed, val_fraction)


def _gbt_classes(train: np.ndarray, classes_train: Any, others: dict[str, tuple[np.ndarray, Any]]
                 ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Factor classes for the gbt classifier: the given ones, or every set's factors discretised
    together with :func:`factor_classes` (so a value has the same class in every set)."""
    if classes_train is not None:
        c_train = check_classes(classes_train, train.shape, "classes_train")
        out = {}
        for name, (f, c) in others.items():
            if c is None:
                raise MetricInputError(f"classes_train was given but not the classes of {name}; give both or neither")
            out[name] = check_classes(c, f.shape, f"classes of {name}")
    else:
        given = [name for name, (_, c) in others.items() if c is not None]
        if given:
            raise MetricInputError(f"classes of {given} were given but not classes_train; give both or neither")
        stacked = factor_classes(np.concatenate([train] + [f for f, _ in others.values()], axis=0))
        c_train = stacked[:len(train)]
        out, start = {}, len(train)
        for name, (f, _) in others.items():
            out[name] = stacked[start:start + len(f)]
            start += len(f)
    single = [j for j in range(c_train.shape[1]) if np.unique(c_train[:, j]).size < 2]
    if single:
        raise MetricInputError(f"factor(s) {single} have a single class on the training set; a classifier needs "
                               "at least two: drop them or give finer classes")
    return c_train, out


def _fit_prepared(p: _Prepared, cyclic: str, targets_train: list[np.ndarray]) -> _Fit:
    """The regressors of every factor; the gbt classifier has nothing to choose and ignores the
    validation split."""
    if p.spec.measure == "accuracy" or p.f_val is None:
        return _fit_all(p.spec, p.options, p.x_train, targets_train, None, None, p.seed, p.val_fraction)
    targets_val = _targets(p.f_val, p.kinds, cyclic)
    return _fit_all(p.spec, p.options, p.x_train, targets_train, p.x_val, targets_val, p.seed, p.val_fraction)


def _class_targets(classes: np.ndarray) -> list[np.ndarray]:
    return [classes[:, j:j + 1].astype(np.float64) for j in range(classes.shape[1])]


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, eq=False)
class DCIResult(MetricResult):
    """DCI scores (Eastwood & Williams 2018, section 2) and what they are computed from.

    ``informativeness`` is the mean test NRMSE over factors (lower is better), or for ``gbt`` the mean
    test accuracy (higher is better): ``informativeness_measure`` says which. ``importance`` is R
    (codes x factors); ``code_relevance`` is rho; ``heldout`` maps each held-out set's name to its
    per-factor error of the train-fitted regressors, ``heldout_mean`` to their mean.
    """

    headline: ClassVar[tuple[str, ...]] = ("disentanglement", "completeness", "informativeness")

    disentanglement: float
    completeness: float
    informativeness: float
    informativeness_measure: str
    importance: np.ndarray
    code_disentanglement: np.ndarray
    code_relevance: np.ndarray
    factor_completeness: np.ndarray
    factor_error: np.ndarray
    factor_error_train: np.ndarray
    heldout: dict[str, np.ndarray]
    heldout_mean: dict[str, float]
    hyperparameters: tuple[dict[str, Any], ...]
    regressor: str
    selection: str
    completeness_weighting: str
    cyclic: str
    nrmse_std: str


@dataclass(frozen=True, eq=False)
class ZeroShotResult(MetricResult):
    """Zero-shot informativeness (Eastwood & Williams 2018, appendix B.2): the error of train-fitted
    regressors on held-out (unseen) factor combinations, per factor and averaged."""

    headline: ClassVar[tuple[str, ...]] = ("informativeness",)

    informativeness: float
    informativeness_measure: str
    factor_error: np.ndarray
    hyperparameters: tuple[dict[str, Any], ...]
    regressor: str
    selection: str
    cyclic: str
    nrmse_std: str


# --------------------------------------------------------------------------- public functions


def dci(codes_train: Any, factors_train: Any, codes_test: Any, factors_test: Any, *,
        codes_val: Any = None, factors_val: Any = None, regressor: str = "lasso",
        kinds: Sequence[str] | None = None, cyclic: str = "raw", heldout: Mapping[str, tuple] | None = None,
        seed: int = 0, completeness: str = "mean", nrmse_std: str = "train", val_fraction: float = 0.2,
        alphas: Sequence[float] | None = None, depths: Sequence[int | None] | None = None,
        n_trees: int = DEFAULT_TREES, gbt_params: Mapping[str, Any] | None = None, max_iter: int = 10_000,
        classes_train: Any = None, classes_test: Any = None) -> DCIResult:
    """Disentanglement, completeness and informativeness of a code (Eastwood & Williams 2018).

    One regressor per factor (``regressor``: ``"lasso"``, ``"forest"`` or ``"gbt"``) is fitted on the
    training split, its hyperparameter (lasso ``alphas``, forest ``depths``) chosen by the lowest
    validation error on ``codes_val``/``factors_val`` or, without them, on a seeded ``val_fraction``
    of the training set followed by a refit on all of it. R = importance matrix; D, C from
    :func:`dci_from_importance` (``completeness`` = ``"mean"`` or ``"weighted"``). Informativeness is
    the mean over factors of the test NRMSE_j = RMSE_j / std_j, std_j the training std
    (``nrmse_std="train"``) or the test set's own (``"eval"``); ``gbt`` reports mean test accuracy.

    ``kinds`` marks factors ``"cyclic"`` (angles in radians): ``cyclic="raw"`` regresses the angle
    (the paper), ``"cossin"`` regresses (cos, sin) with one regressor each, importance = their sum,
    and NRMSE = sqrt(mean_n ||(cos, sin)_n - prediction_n||^2 / (var cos + var sin)). Categorical
    factors are regressed as numbers (as in the paper). ``heldout={name: (codes, factors)}``
    (``(codes, factors, classes)`` for gbt with classes) scores the same regressors on each held-out
    set, without refitting.

    ``gbt`` (disentanglement_lib): ``GradientBoostingClassifier(**gbt_params)`` per factor on
    ``classes_train`` (or the factors discretised with :func:`factor_classes`, all sets together);
    raw codes, no validation split.
    """
    options = _check_options(alphas, depths, n_trees, gbt_params, max_iter)
    _lookup(COMPLETENESS, completeness, "completeness")
    p = _prepare(codes_train, factors_train, codes_val, factors_val, regressor, kinds, cyclic, seed, nrmse_std,
                 val_fraction, options)
    d, k = p.x_train.shape[1], p.f_train.shape[1]
    x_test, f_test = _check_split(codes_test, factors_test, "test", d, k)
    held = _check_heldout(heldout, d, k, with_classes=p.spec.measure == "accuracy" and classes_train is not None)

    if p.spec.measure == "accuracy":
        others = {"the test set": (f_test, classes_test)}
        others.update({f"heldout[{n!r}]": (h[1], h[2] if len(h) == 3 else None) for n, h in held.items()})
        c_train, c_others = _gbt_classes(p.f_train, classes_train, others)
        train_t = _class_targets(c_train)
        test_t = _class_targets(c_others["the test set"])
        held_t = {n: _class_targets(c_others[f"heldout[{n!r}]"]) for n in held}
    else:
        if classes_train is not None or classes_test is not None:
            raise MetricInputError(f"classes are for regressor='gbt'; regressor={regressor!r} uses the factor values")
        train_t = _targets(p.f_train, p.kinds, cyclic)
        test_t = _targets(f_test, p.kinds, cyclic)
        held_t = {n: _targets(h[1], p.kinds, cyclic) for n, h in held.items()}

    fit = _fit_prepared(p, cyclic, train_t)
    importance = fit.importance
    dis, com, code_d, rho, factor_c = dci_from_importance(importance, completeness)
    test_err = fit.errors(x_test, test_t, nrmse_std, "the test set")
    train_err = fit.errors(p.x_train, train_t, nrmse_std, "the training set")
    held_err = {n: fit.errors(h[0], held_t[n], nrmse_std, f"heldout[{n!r}]") for n, h in held.items()}
    result = DCIResult(
        disentanglement=dis, completeness=com, informativeness=float(test_err.mean()),
        informativeness_measure=p.spec.measure, importance=importance, code_disentanglement=code_d,
        code_relevance=rho, factor_completeness=factor_c, factor_error=test_err, factor_error_train=train_err,
        heldout=held_err, heldout_mean={n: float(e.mean()) for n, e in held_err.items()},
        hyperparameters=tuple(f.hyperparameters for f in fit.factors), regressor=regressor,
        selection=fit.selection, completeness_weighting=completeness, cyclic=cyclic, nrmse_std=nrmse_std)
    return with_warnings(result, constant_code_warnings(p.x_train, "code (training split)"))


def grouped_parts(groups: np.ndarray, fractions: Sequence[float], seed: int) -> list[np.ndarray]:
    """Sample indices cut into parts of about ``fractions`` of the distinct groups each (a seeded
    permutation of the groups), so that the samples of one group (one observation drawn twice) fall in
    one part."""
    unique, inverse = np.unique(groups, return_inverse=True)
    rank = np.empty(len(unique), dtype=np.int64)
    rank[np.random.default_rng(seed).permutation(len(unique))] = np.arange(len(unique))
    bounds = np.round(np.cumsum([0.0, *fractions]) * len(unique)).astype(np.int64)
    return [np.flatnonzero((rank[inverse] >= a) & (rank[inverse] < b)) for a, b in zip(bounds[:-1], bounds[1:])]


def dci_of_samples(codes: Any, factors: Any, *, classes: Any = None, groups: Any = None,
                   kinds: Sequence[str] | None = None, seed: int = 0, validation_fraction: float = 0.1,
                   test_fraction: float = 0.1, regressor: str = "lasso", cyclic: str = "raw",
                   completeness: str = "mean", nrmse_std: str = "train", alphas: Sequence[float] | None = None,
                   depths: Sequence[int | None] | None = None, n_trees: int = DEFAULT_TREES,
                   gbt_params: Mapping[str, Any] | None = None, max_iter: int = 10_000) -> DCIResult:
    """:func:`dci` on one set of samples (e.g. a correlated split, whose factors are dependent): the set
    is cut into training, validation and test parts by ``groups`` (N,) (the observation each sample is;
    None: every sample its own), ``validation_fraction`` and ``test_fraction`` of the groups each, with a
    seeded permutation (:func:`grouped_parts`), and DCI is fitted and tested on those parts, so that the
    importances and the informativeness are those of the set's own distribution. ``classes`` (N, K)
    feeds ``regressor="gbt"`` only, as in :func:`dci`."""
    x = check_codes(codes, "codes", min_samples=5)
    f = np.asarray(factors, dtype=np.float64)
    if f.ndim != 2 or len(f) != len(x):
        raise MetricInputError(f"factors must have shape ({len(x)}, K), one row per code; got {f.shape}")
    g = np.arange(len(x)) if groups is None else np.asarray(groups)
    if g.shape != (len(x),):
        raise MetricInputError(f"groups has shape {g.shape}; give one group label per sample ({len(x)},)")
    validation_fraction = _check_fraction(validation_fraction, "validation_fraction")
    test_fraction = _check_fraction(test_fraction, "test_fraction")
    if validation_fraction + test_fraction >= 1:
        raise MetricInputError(f"validation_fraction + test_fraction must leave a training part; got "
                               f"{validation_fraction} + {test_fraction}")
    train, val, test = grouped_parts(g, (1 - validation_fraction - test_fraction, validation_fraction,
                                         test_fraction), seed)
    if min(len(train), len(val), len(test)) < 2:
        raise MetricInputError(f"{len(np.unique(g))} distinct samples are too few to cut into training, validation "
                               "and test parts; give more samples")
    c = None if classes is None or regressor != "gbt" else np.asarray(classes)
    return dci(x[train], f[train], x[test], f[test], codes_val=x[val], factors_val=f[val], regressor=regressor,
               kinds=kinds, cyclic=cyclic, seed=seed, completeness=completeness, nrmse_std=nrmse_std,
               alphas=alphas, depths=depths, n_trees=n_trees, gbt_params=gbt_params, max_iter=max_iter,
               classes_train=None if c is None else c[train], classes_test=None if c is None else c[test])


def zero_shot_informativeness(codes_train: Any, factors_train: Any, codes_heldout: Any, factors_heldout: Any, *,
                              codes_val: Any = None, factors_val: Any = None, regressor: str = "lasso",
                              kinds: Sequence[str] | None = None, cyclic: str = "raw", seed: int = 0,
                              nrmse_std: str = "train", val_fraction: float = 0.2,
                              alphas: Sequence[float] | None = None, depths: Sequence[int | None] | None = None,
                              n_trees: int = DEFAULT_TREES, gbt_params: Mapping[str, Any] | None = None,
                              max_iter: int = 10_000, classes_train: Any = None,
                              classes_heldout: Any = None) -> ZeroShotResult:
    """Zero-shot informativeness (Eastwood & Williams 2018, appendix B.2): regressors fitted on the
    training split exactly as in :func:`dci` (same seed, same regressors) predict the factors of a
    held-out set of unseen factor combinations; the result is the per-factor NRMSE there (accuracy for
    ``gbt``) and its mean. Same options as :func:`dci`.
    """
    options = _check_options(alphas, depths, n_trees, gbt_params, max_iter)
    p = _prepare(codes_train, factors_train, codes_val, factors_val, regressor, kinds, cyclic, seed, nrmse_std,
                 val_fraction, options)
    x_held, f_held = _check_split(codes_heldout, factors_heldout, "heldout", p.x_train.shape[1], p.f_train.shape[1])
    if p.spec.measure == "accuracy":
        c_train, c_others = _gbt_classes(p.f_train, classes_train, {"the held-out set": (f_held, classes_heldout)})
        train_t, held_t = _class_targets(c_train), _class_targets(c_others["the held-out set"])
    else:
        if classes_train is not None or classes_heldout is not None:
            raise MetricInputError(f"classes are for regressor='gbt'; regressor={regressor!r} uses the factor values")
        train_t, held_t = _targets(p.f_train, p.kinds, cyclic), _targets(f_held, p.kinds, cyclic)
    fit = _fit_prepared(p, cyclic, train_t)
    err = fit.errors(x_held, held_t, nrmse_std, "the held-out set")
    result = ZeroShotResult(
        informativeness=float(err.mean()), informativeness_measure=p.spec.measure, factor_error=err,
        hyperparameters=tuple(f.hyperparameters for f in fit.factors), regressor=regressor, selection=fit.selection,
        cyclic=cyclic, nrmse_std=nrmse_std)
    return with_warnings(result, constant_code_warnings(p.x_train, "code (training split)"))
