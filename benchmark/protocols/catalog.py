"""The registered protocols. Never edit one in place: add ``-v2`` instead.

- ``teapot-dci-v1``: Eastwood & Williams 2018 on the 200,000-image teapot set.
- ``square-lsbd-v1``, ``arrow-lsbd-v1``, ``airplane-lsbd-v1``, ``objects-lsbd-v1``,
  ``modelnet40-lsbd-v1``, ``coil100-lsbd-v1``: Tonnaer et al. 2022 (D_LSBD plus the classic metrics).
- ``teapot-dependent-v1``, ``square-dependent-v1``, ``arrow-dependent-v1``, ``airplane-dependent-v1``:
  Almudévar & Ortega 2025 (minimality, sufficiency, the classic metrics and single-code downstream
  accuracy, on independent and on correlated samples).
- ``dsprites-dci-v1`` (and ``dsprites-color-dci-v1``, ``dsprites-noise-dci-v1``), ``shapes3d-dci-v1``,
  ``mpi3d-toy-dci-v1``: disentanglement_lib's metric suite (Locatello et al. 2019) plus IRS, Do & Tran's
  metrics and minimality/sufficiency, on an evaluation sub-grid of the standard sets;
  ``dsprites-dependent-v1``, ``shapes3d-dependent-v1``, ``mpi3d-toy-dependent-v1``: Almudévar & Ortega on
  the same sub-grids; their ``-v2`` adds, in every setting, the same forests' accuracy on the whole code
  (``downstream_full``), everything else unchanged; their ``-v3`` scores, in every setting, every metric of
  the suite (DCI, BetaVAE, FactorVAE, explicitness, Do & Tran's and WSEPIN beside v2's), as the paper does.
"""

from __future__ import annotations

import numpy as np

from factorbench import generators
from factorbench.generators.presets import applicable_presets

from .base import DatasetRef, Headline, MetricCall, Protocol, register

#: DCI's hyperparameter grids, stated in the protocols (the metric's defaults)
DCI_GRIDS = {"alphas": [float(a) for a in np.logspace(-4, 0, 13)], "depths": [2, 4, 8, 12, 16, None]}


def _call(label: str, metric: str, data: dict, settings: dict | None = None, **kw) -> MetricCall:
    """A metric call whose settings state every keyword of the metric: its defaults, overridden by
    ``settings``. So the protocol's JSON (and hash) pins every setting, defaults included."""
    from ..adapters import metric_defaults

    return MetricCall(label, metric, data, {**metric_defaults(metric), **(settings or {})}, **kw)

EASTWOOD = ("Eastwood & Williams, A framework for the quantitative evaluation of disentangled representations, "
            "ICLR 2018")
TONNAER = ("Tonnaer, Perez Rey, Menkovski, Holenderski & Portegies, Quantifying and learning linear symmetry-based "
           "disentanglement, ICML 2022")
ALMUDEVAR = "Almudévar & Ortega, Rethinking disentanglement under dependent factors of variation, 2025"

#: sha256 of the images the reference rows (benchmark/reference/) were scored on, per generator (or
#: protocol prefix, for a dataset with parameters) with its default parameters and seed 0: the 3D sets
#: rendered by the gl backend on Mesa llvmpipe (LLVM 15.0.6, Mesa 22.3.6); another renderer or driver
#: gives other images and the result says so (METRICS.md)
REFERENCE_IMAGES = {
    "square": "05f6f98c6c6d2ced844eb8c0077820e0ac51f98495e1ca35ee3fe7e7b16b9142",
    "arrow": "9d15507d8ebd6cfb165b545b9c4cb6c08541789c1d8a1c4068fd2b7f872e850d",
    "airplane": "a867ce0944d1524105134b5846a32813ddba15539574ce6283a3ab354810c499",
    "objects": "2fd8afc526882f1098b23e70f8539b6313d5e99d5c1b0d2d52678294a4b538e0",
    "teapot": "a2a15a87a4b06e017f0e2986fea40fd816b0b2e6c9e4e94c1d72cdb4dbf14de1",
    "dsprites": "b978bdd9c56919592d575ba7f7dc4fc7fa2c47b3d11d2d3957ec0424e4e07c3d",
    "dsprites-color": "326f697118b9e8b29923a472701e59f38a8b1c00150c3c18488f9ddd935783e6",
    "dsprites-noise": "b648c884bba148ed3bb8361f3f37edc59823e5ef21a51019cd9d794f8d539a6e",
    "shapes3d": "54d2df840cfd45eae23ed77c3c7bccd66ff90099292c935a22830d6ede9202cd",
    "mpi3d-toy": "cf4cf3bc3b40b7866addd32621a5c345d798a50a228221ae08d1f77ecd97b497",
}

LOCATELLO = ("Locatello et al., Challenging common assumptions in the unsupervised learning of disentangled "
             "representations, ICML 2019 (disentanglement_lib's metric suite)")

#: evaluation sub-grids of the large standard grids (one stride per factor, see ``DatasetRef.eval_grid``):
#: dSprites every 4th orientation, posX and posY (3 x 6 x 10 x 8 x 8 = 11,520 of 737,280 images);
#: Shapes3D every 2nd hue, scale and view angle (5 x 5 x 5 x 4 x 4 x 8 = 16,000 of 480,000); MPI3D-toy
#: every 13th position of each joint (6 x 6 x 2 x 3 x 3 x 4 x 4 = 10,368 of 1,036,800)
EVAL_GRIDS = {
    "dsprites": (1, 1, 4, 4, 4),
    "shapes3d": (2, 2, 2, 2, 1, 2),
    "mpi3d-toy": (1, 1, 1, 1, 1, 13, 13),
}


def _classic(name: str, generator: str, params: dict | None = None, stand_in: bool = False) -> Protocol:
    """disentanglement_lib's metric suite (plus IRS, Do & Tran's and minimality/sufficiency) on a standard set."""
    from factorbench.benchmark.subgrid import subgrid_size

    step = EVAL_GRIDS[generator]
    gen = generators.get(generator, params or {})
    readout = {"train": "train", "validation": "validation", "test": "test"}
    everything = {"eval": "all"}
    metrics = (
        _call("dci", "dci", readout, {"regressor": "forest", **DCI_GRIDS}),
        _call("beta_vae", "beta_vae_score", {}),
        _call("factor_vae", "factor_vae_score", {}),
        _call("mig", "mig", everything),
        _call("sap", "sap", everything),
        _call("modularity", "modularity", everything),
        _call("explicitness", "explicitness", everything),
        _call("irs", "irs", everything),
        _call("do_tran", "do_tran", everything),
        _call("wsepin", "wsepin", everything),
        _call("minimality_sufficiency", "minimality_sufficiency", everything),
    )
    size = subgrid_size(gen.factors(), step)
    return Protocol(
        f"{name}-dci-v1", 1,
        f"{generator}{'' if not params else ' ' + ' '.join(f'{k}={v}' for k, v in params.items())}"
        f"{' (a regenerated stand-in)' if stand_in else ''}: DCI (forest), BetaVAE, FactorVAE, MIG, SAP, "
        f"modularity, explicitness, IRS, Do & Tran, minimality/sufficiency on a {size:,}-image sub-grid of "
        f"{gen.full_size():,}",
        DatasetRef(generator, params or {}, eval_grid=step), metrics, Headline("dci", "disentanglement"),
        LOCATELLO, REFERENCE_IMAGES.get(name, ""))


#: the correlated-factor presets of the dependent-factor protocols, where a dataset's factors allow them
DEPENDENT_PRESETS = ("single", "double-0.1", "triple", "confounded")


def _teapot_dci() -> Protocol:
    splits = {"train": "train", "validation": "validation", "test": "test", "heldout": ["zeroshot"]}
    test = {"eval": "test"}
    metrics = (
        _call("dci_lasso", "dci", splits, {"regressor": "lasso", **DCI_GRIDS}),
        _call("dci_forest", "dci", splits, {"regressor": "forest", **DCI_GRIDS}),
        _call("mig", "mig", test),
        _call("sap", "sap", test),
        _call("modularity", "modularity", test),
        _call("explicitness", "explicitness", test, max_samples=10_000),
        _call("irs", "irs", test),
        _call("do_tran", "do_tran", test, max_samples=10_000),
        _call("wsepin", "wsepin", test, max_samples=10_000),
    )
    return Protocol(
        "teapot-dci-v1", 1,
        "Eastwood & Williams: teapot 200k, DCI (lasso, random forest) with zero-shot NRMSE on the gap, "
        "MIG, SAP, modularity, explicitness, IRS, Do & Tran",
        DatasetRef("teapot"), metrics, Headline("dci_forest", "disentanglement"), EASTWOOD,
        REFERENCE_IMAGES["teapot"])


def _lsbd(name: str, generator: str, per_object: bool = False, needs_source: bool = False) -> Protocol:
    everything = {"eval": "all"}
    readout = {"train": "train", "validation": "validation", "test": "test"}
    lsbd = (_call("d_lsbd", "d_lsbd_objects", {}) if per_object else _call("d_lsbd", "d_lsbd", {}))
    metrics = (
        lsbd,
        _call("beta_vae", "beta_vae_score", {}),
        _call("factor_vae", "factor_vae_score", {}),
        _call("sap", "sap", everything),
        _call("dci", "dci", readout, {"regressor": "forest", **DCI_GRIDS}),
        _call("mig", "mig", everything),
        _call("modularity", "modularity", everything),
    )
    what = "per object, averaged" if per_object else "on the full grid"
    return Protocol(
        f"{name}-lsbd-v1", 1,
        f"Tonnaer et al.: {generator}, D_LSBD {what}, plus BetaVAE, FactorVAE, SAP, DCI, MIG, modularity"
        + (" (needs local data: --source)" if needs_source else ""),
        DatasetRef(generator, needs_source=needs_source), metrics, Headline("d_lsbd", "score", "lower"), TONNAER,
        REFERENCE_IMAGES.get(generator, ""))


def _dependent(generator: str, eval_grid: tuple[int, ...] = (), stand_in: bool = False, version: int = 1) -> Protocol:
    """Almudévar & Ortega's section 6 metrics on independent and correlated samples. Version 2 adds the
    downstream forests on the whole code beside the paper's single-code readout; version 3 scores every
    metric of the suite in every setting, as the paper does (DCI on a grouped 80/10/10 cut of the
    setting's samples, BetaVAE and FactorVAE holding a factor fixed among them: :class:`SplitSampler`)."""
    factors = generators.get(generator).factors()
    presets = tuple(p for p in DEPENDENT_PRESETS if p in applicable_presets(factors))
    grid = all(f.is_grid for f in factors)
    cap = None if grid else 10_000
    settings = [("independent", "train")] + [(p, f"correlated-{p}") for p in presets]
    metrics = []
    for label, split in settings:
        data = {"eval": split}
        metrics += [
            _call(f"{label}.minimality_sufficiency", "minimality_sufficiency", data, max_samples=cap),
            _call(f"{label}.mig", "mig", data, max_samples=cap),
            _call(f"{label}.sap", "sap", data, max_samples=cap),
            _call(f"{label}.modularity", "modularity", data, max_samples=cap),
            _call(f"{label}.irs", "irs", data, max_samples=cap),
            _call(f"{label}.downstream", "single_code_accuracy", data, max_samples=cap),
        ] + ([_call(f"{label}.downstream_full", "full_code_accuracy", data, max_samples=cap)] if version >= 2 else [])
        if version >= 3:
            metrics += [
                _call(f"{label}.dci", "dci_of_samples", data, {"regressor": "forest", **DCI_GRIDS}, max_samples=cap),
                _call(f"{label}.beta_vae", "beta_vae_score", data),
                _call(f"{label}.factor_vae", "factor_vae_score", data),
                _call(f"{label}.explicitness", "explicitness", data, max_samples=cap),
                _call(f"{label}.do_tran", "do_tran", data, max_samples=cap),
                _call(f"{label}.wsepin", "wsepin", data, max_samples=cap),
            ]
    where = ""
    if eval_grid:
        from factorbench.benchmark.subgrid import subgrid_size

        full = generators.get(generator).full_size()
        where = f", on a {subgrid_size(factors, eval_grid):,}-image sub-grid of {full:,}"
    scored = {1: "MIG, SAP, modularity, IRS and single-code accuracy",
              2: "MIG, SAP, modularity, IRS and single- and whole-code accuracy",
              3: "MIG, SAP, modularity, IRS, single- and whole-code accuracy, DCI (forest), BetaVAE, FactorVAE, "
                 "explicitness, Do & Tran's metrics and WSEPIN"}[version]
    return Protocol(
        f"{generator}-dependent-v{version}", version,
        f"Almudévar & Ortega: {generator}{' (a regenerated stand-in)' if stand_in else ''}, minimality, "
        f"sufficiency, {scored} on independent and correlated "
        f"({', '.join(presets)}) samples{where}",
        DatasetRef(generator, extra_splits=presets, eval_grid=eval_grid), tuple(metrics),
        Headline("independent.minimality_sufficiency", "sufficiency"), ALMUDEVAR,
        REFERENCE_IMAGES.get(generator, ""))


register(_teapot_dci())
for _name in ("square", "arrow", "airplane"):
    register(_lsbd(_name, _name))
register(_lsbd("objects", "objects", per_object=True))
register(_lsbd("modelnet40", "modelnet40", per_object=True, needs_source=True))
register(_lsbd("coil100", "coil100", per_object=True, needs_source=True))
for _name in ("teapot", "square", "arrow", "airplane"):
    register(_dependent(_name))
register(_classic("dsprites", "dsprites"))
register(_classic("dsprites-color", "dsprites", {"variant": "color"}))
register(_classic("dsprites-noise", "dsprites", {"variant": "noise"}))
register(_dependent("dsprites", EVAL_GRIDS["dsprites"]))
register(_dependent("dsprites", EVAL_GRIDS["dsprites"], version=2))
register(_dependent("dsprites", EVAL_GRIDS["dsprites"], version=3))
register(_classic("shapes3d", "shapes3d"))
register(_dependent("shapes3d", EVAL_GRIDS["shapes3d"]))
register(_dependent("shapes3d", EVAL_GRIDS["shapes3d"], version=2))
register(_dependent("shapes3d", EVAL_GRIDS["shapes3d"], version=3))
register(_classic("mpi3d-toy", "mpi3d-toy", stand_in=True))
register(_dependent("mpi3d-toy", EVAL_GRIDS["mpi3d-toy"], stand_in=True))
register(_dependent("mpi3d-toy", EVAL_GRIDS["mpi3d-toy"], stand_in=True, version=2))
register(_dependent("mpi3d-toy", EVAL_GRIDS["mpi3d-toy"], stand_in=True, version=3))
