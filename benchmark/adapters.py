"""How a protocol's metric call is fed: from the codes of a whole dataset file to a metric's arrays.

:data:`ADAPTERS` maps a metric name (``MetricCall.metric``) to a function ``(context, call) ->
MetricResult``. The context holds the codes of every sample of the file (in file order), the factor
values, classes and kinds, and the grid shape; an adapter picks the rows of the splits named in
``call.data`` (capped by ``call.max_samples`` with a seeded subsample) and passes ``call.settings``
as keyword arguments. An adapter raises :class:`NotApplicable` when the model's output cannot feed
the metric (e.g. sampling information metrics need a Gaussian posterior); the result records why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from factorbench.generators.errors import FactorbenchError

from .metrics._base import MetricResult

if TYPE_CHECKING:  # the protocols import this module to fill in metric defaults
    from .protocols.base import MetricCall

__all__ = ["ADAPTERS", "EvalContext", "NotApplicable", "adapter"]


class NotApplicable(Exception):
    """The metric cannot be computed from this model's output; the message says why."""


@dataclass
class EvalContext:
    """Codes of every sample of a dataset file and what metrics need to know about its factors."""

    dataset: Any
    mu: np.ndarray
    logvar: np.ndarray | None
    factors: np.ndarray
    classes: np.ndarray | None
    kinds: tuple[str, ...]
    grid_shape: tuple[int, ...] | None
    #: the file row of each code row when the protocol scores a sub-grid of the file (None: every row)
    file_rows: np.ndarray | None = None
    #: the factors of that sub-grid (their grid values), for the intervention metrics' sampler
    grid_factors: tuple[Any, ...] | None = None

    def rows(self, split: str) -> np.ndarray:
        """Code rows of ``split`` ("all": every code row); on a sub-grid, the split's rows inside it."""
        if split == "all":
            return np.arange(len(self.mu))
        rows = np.asarray(self.dataset.split_indices(split))
        if self.file_rows is None:
            return rows
        from .subgrid import positions_in

        return positions_in(self.file_rows, rows)

    def role_rows(self, call: MetricCall, role: str) -> np.ndarray:
        if role not in call.data:
            raise FactorbenchError(f"metric call {call.label!r} needs data role {role!r}; it has {sorted(call.data)}")
        rows = self.rows(call.data[role])
        if call.max_samples is not None and len(rows) > call.max_samples:
            rng = np.random.default_rng([call.seed, sum(map(ord, role))])
            rows = np.sort(rng.choice(rows, call.max_samples, replace=False))
        return rows

    def arrays(self, rows: np.ndarray) -> dict[str, Any]:
        return {"codes": self.mu[rows], "factors": self.factors[rows],
                "classes": None if self.classes is None else self.classes[rows]}

    def grid_codes(self) -> np.ndarray:
        if self.grid_shape is None:
            raise NotApplicable("the metric needs a full grid dataset")
        return self.mu.reshape(*self.grid_shape, self.mu.shape[1])


#: metric name -> "module.function" in factorbench.benchmark.metrics
METRIC_FUNCTIONS: dict[str, str] = {
    "dci": "dci.dci", "dci_of_samples": "dci.dci_of_samples",
    "mig": "mig.mig", "sap": "sap.sap", "modularity": "modularity.modularity",
    "explicitness": "modularity.explicitness", "irs": "irs.irs",
    "minimality_sufficiency": "minimality.minimality_sufficiency",
    "single_code_accuracy": "downstream.single_code_accuracy", "full_code_accuracy": "downstream.full_code_accuracy",
    "beta_vae_score": "intervention.beta_vae_score", "factor_vae_score": "intervention.factor_vae_score",
    "d_lsbd": "lsbd.d_lsbd", "d_lsbd_objects": "lsbd.d_lsbd_objects", "do_tran": "do_tran.do_tran",
    "wsepin": "do_tran.wsepin", "windin": "do_tran.windin",
}
#: keyword arguments the adapters fill from the data (never part of a protocol's settings)
FED_BY_ADAPTER = frozenset({"classes", "kinds", "seed", "codes_val", "factors_val", "heldout", "encoder", "logvar",
                            "classes_train", "classes_test", "classes_val", "groups"})


def metric_function(name: str) -> Callable[..., MetricResult]:
    import importlib

    module, fn = METRIC_FUNCTIONS[name].split(".")
    return getattr(importlib.import_module(f"factorbench.benchmark.metrics.{module}"), fn)


def metric_defaults(name: str) -> dict[str, Any]:
    """The keyword-only settings of metric ``name`` with their defaults (JSON values), minus the ones
    the adapters fill from the data (positional arguments are always data)."""
    import inspect

    out = {}
    for p in inspect.signature(metric_function(name)).parameters.values():
        if p.kind is not p.KEYWORD_ONLY or p.name in FED_BY_ADAPTER:
            continue
        value = p.default
        out[p.name] = list(value) if isinstance(value, (range, tuple)) else value
    return out


Adapter = Callable[[EvalContext, "MetricCall"], MetricResult]
#: metric name -> adapter
ADAPTERS: dict[str, Adapter] = {}


def adapter(name: str) -> Callable[[Adapter], Adapter]:
    def register(fn: Adapter) -> Adapter:
        ADAPTERS[name] = fn
        return fn
    return register


def _on_eval(name: str) -> Adapter:
    """Adapter of a metric ``f(codes, factors, *, classes, [kinds], [seed], **settings)`` on the rows
    of the call's ``eval`` split; ``kinds``, ``seed`` and ``groups`` (the file row of each sample: a
    correlated split repeats rows) are passed where the metric takes them."""
    def run(ctx: EvalContext, call: "MetricCall") -> MetricResult:
        import inspect

        metric = metric_function(name)
        accepted = inspect.signature(metric).parameters
        rows = ctx.role_rows(call, "eval")
        fed = (("kinds", ctx.kinds), ("seed", call.seed), ("groups", rows))  # groups: the file row of each sample
        extra = {key: value for key, value in fed if key in accepted}
        a = ctx.arrays(rows)
        return metric(a["codes"], a["factors"], classes=a["classes"], **extra, **call.settings)
    return run


for _name in ("mig", "modularity", "sap", "explicitness", "irs", "minimality_sufficiency", "single_code_accuracy",
              "full_code_accuracy", "dci_of_samples"):
    ADAPTERS[_name] = _on_eval(_name)


@adapter("dci")
def _dci(ctx: EvalContext, call: MetricCall) -> MetricResult:
    from .metrics.dci import dci

    parts = {role: ctx.arrays(ctx.role_rows(call, role)) for role in ("train", "validation", "test")
             if role in call.data}
    heldout = {}
    for name in call.data.get("heldout", []):
        rows = ctx.rows(name)
        heldout[name] = (ctx.mu[rows], ctx.factors[rows])
    val = parts.get("validation")
    return dci(parts["train"]["codes"], parts["train"]["factors"], parts["test"]["codes"], parts["test"]["factors"],
               codes_val=None if val is None else val["codes"], factors_val=None if val is None else val["factors"],
               kinds=ctx.kinds, heldout=heldout or None, seed=call.seed, **call.settings)


def _grid_sampler(ctx: EvalContext, call: MetricCall) -> Any:
    """The grid's sampler: uniform grid points (the factors independent), or, where the call names an
    ``eval`` split, the samples of that split (their dependence kept; :class:`SplitSampler`)."""
    from .metrics.samplers import GridSampler, SplitSampler

    if ctx.grid_shape is None:
        raise NotApplicable("intervention metrics need a full grid dataset (or a generator sampler)")
    factors = ctx.grid_factors or ctx.dataset.spec.factors
    if "eval" not in call.data:
        return GridSampler(factors, ctx.grid_codes())
    return SplitSampler(factors, ctx.grid_codes(), ctx.factors[ctx.role_rows(call, "eval")])


@adapter("beta_vae_score")
def _beta_vae(ctx: EvalContext, call: MetricCall) -> MetricResult:
    from .metrics.intervention import beta_vae_score

    return beta_vae_score(_grid_sampler(ctx, call), None, seed=call.seed, **call.settings)


@adapter("factor_vae_score")
def _factor_vae(ctx: EvalContext, call: MetricCall) -> MetricResult:
    from .metrics.intervention import factor_vae_score

    return factor_vae_score(_grid_sampler(ctx, call), None, seed=call.seed, **call.settings)


@adapter("d_lsbd")
def _d_lsbd(ctx: EvalContext, call: MetricCall) -> MetricResult:
    from .metrics.lsbd import d_lsbd

    if any(k != "cyclic" for k in ctx.kinds):
        raise NotApplicable("D_LSBD needs every factor cyclic")
    return d_lsbd(ctx.grid_codes(), **call.settings)


@adapter("d_lsbd_objects")
def _d_lsbd_objects(ctx: EvalContext, call: MetricCall) -> MetricResult:
    from .metrics.lsbd import d_lsbd_objects

    if ctx.grid_shape is None or len(ctx.grid_shape) != 2 or ctx.kinds != ("categorical", "cyclic"):
        raise NotApplicable("D_LSBD per object needs an (object, rotation) grid")
    return d_lsbd_objects(ctx.grid_codes(), **call.settings)


def _posterior_rows(ctx: EvalContext, call: MetricCall) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    rows = ctx.role_rows(call, "eval")
    return ctx.mu[rows], None if ctx.logvar is None else ctx.logvar[rows], rows


@adapter("do_tran")
def _do_tran(ctx: EvalContext, call: MetricCall) -> MetricResult:
    from .metrics.do_tran import do_tran

    mu, logvar, rows = _posterior_rows(ctx, call)
    return do_tran(mu, logvar, ctx.factors[rows], classes=None if ctx.classes is None else ctx.classes[rows],
                   **call.settings)


def _sampling(fn_name: str) -> Adapter:
    def run(ctx: EvalContext, call: MetricCall) -> MetricResult:
        mu, logvar, _ = _posterior_rows(ctx, call)
        if logvar is None:
            raise NotApplicable(f"{fn_name} needs a Gaussian posterior (mu, logvar); the encoder returned plain codes")
        return metric_function(fn_name)(mu, logvar, seed=call.seed, **call.settings)
    return run


ADAPTERS["wsepin"] = _sampling("wsepin")
ADAPTERS["windin"] = _sampling("windin")
