"""The registered protocols (version 1). Never edit one in place: add ``-v2`` instead.

- ``teapot-dci-v1``: Eastwood & Williams 2018 on the 200,000-image teapot set.
- ``square-lsbd-v1``, ``arrow-lsbd-v1``, ``airplane-lsbd-v1``, ``objects-lsbd-v1``,
  ``modelnet40-lsbd-v1``, ``coil100-lsbd-v1``: Tonnaer et al. 2022 (D_LSBD plus the classic metrics).
- ``teapot-dependent-v1``, ``square-dependent-v1``, ``arrow-dependent-v1``, ``airplane-dependent-v1``:
  Almudévar & Ortega 2025 (minimality, sufficiency, the classic metrics and single-code downstream
  accuracy, on independent and on correlated samples).
"""

from __future__ import annotations

from factorbench import generators
from factorbench.generators.presets import applicable_presets

from .base import DatasetRef, Headline, MetricCall, Protocol, register

EASTWOOD = ("Eastwood & Williams, A framework for the quantitative evaluation of disentangled representations, "
            "ICLR 2018")
TONNAER = ("Tonnaer, Perez Rey, Menkovski, Holenderski & Portegies, Quantifying and learning linear symmetry-based "
           "disentanglement, ICML 2022")
ALMUDEVAR = "Almudévar & Ortega, Rethinking disentanglement under dependent factors of variation, 2025"

#: the correlated-factor presets of the dependent-factor protocols, where a dataset's factors allow them
DEPENDENT_PRESETS = ("single", "double-0.1", "triple", "confounded")


def _teapot_dci() -> Protocol:
    splits = {"train": "train", "validation": "validation", "test": "test", "heldout": ["zeroshot"]}
    test = {"eval": "test"}
    metrics = (
        MetricCall("dci_lasso", "dci", splits, {"regressor": "lasso"}),
        MetricCall("dci_forest", "dci", splits, {"regressor": "forest"}),
        MetricCall("mig", "mig", test),
        MetricCall("sap", "sap", test),
        MetricCall("modularity", "modularity", test),
        MetricCall("explicitness", "explicitness", test, max_samples=10_000),
        MetricCall("irs", "irs", test),
        MetricCall("do_tran", "do_tran", test, max_samples=10_000),
        MetricCall("wsepin", "wsepin", test, max_samples=10_000),
        MetricCall("windin", "windin", test, max_samples=10_000),
    )
    return Protocol(
        "teapot-dci-v1", 1,
        "Eastwood & Williams: teapot 200k, DCI (lasso, random forest) with zero-shot NRMSE on the gap, "
        "MIG, SAP, modularity, explicitness, IRS, Do & Tran",
        DatasetRef("teapot"), metrics, Headline("dci_forest", "disentanglement"), EASTWOOD)


def _lsbd(name: str, generator: str, per_object: bool = False, needs_source: bool = False) -> Protocol:
    everything = {"eval": "all"}
    readout = {"train": "train", "validation": "validation", "test": "test"}
    lsbd = (MetricCall("d_lsbd", "d_lsbd_objects", {}) if per_object else MetricCall("d_lsbd", "d_lsbd", {}))
    metrics = (
        lsbd,
        MetricCall("beta_vae", "beta_vae_score", {}),
        MetricCall("factor_vae", "factor_vae_score", {}),
        MetricCall("sap", "sap", everything),
        MetricCall("dci", "dci", readout, {"regressor": "forest"}),
        MetricCall("mig", "mig", everything),
        MetricCall("modularity", "modularity", everything),
    )
    what = "per object, averaged" if per_object else "on the full grid"
    return Protocol(
        f"{name}-lsbd-v1", 1,
        f"Tonnaer et al.: {generator}, D_LSBD {what}, plus BetaVAE, FactorVAE, SAP, DCI, MIG, modularity"
        + (" (needs local data: --source)" if needs_source else ""),
        DatasetRef(generator, needs_source=needs_source), metrics, Headline("d_lsbd", "score", "lower"), TONNAER)


def _dependent(generator: str) -> Protocol:
    factors = generators.get(generator).factors()
    presets = tuple(p for p in DEPENDENT_PRESETS if p in applicable_presets(factors))
    grid = all(f.is_grid for f in factors)
    cap = None if grid else 10_000
    settings = [("independent", "train")] + [(p, f"correlated-{p}") for p in presets]
    metrics = []
    for label, split in settings:
        data = {"eval": split}
        metrics += [
            MetricCall(f"{label}.minimality_sufficiency", "minimality_sufficiency", data, max_samples=cap),
            MetricCall(f"{label}.mig", "mig", data, max_samples=cap),
            MetricCall(f"{label}.sap", "sap", data, max_samples=cap),
            MetricCall(f"{label}.modularity", "modularity", data, max_samples=cap),
            MetricCall(f"{label}.irs", "irs", data, max_samples=cap),
            MetricCall(f"{label}.downstream", "single_code_accuracy", data, max_samples=cap),
        ]
    return Protocol(
        f"{generator}-dependent-v1", 1,
        f"Almudévar & Ortega: {generator}, minimality, sufficiency, MIG, SAP, modularity, IRS and single-code "
        f"accuracy on independent and correlated ({', '.join(presets)}) samples",
        DatasetRef(generator, extra_splits=presets), tuple(metrics),
        Headline("independent.minimality_sufficiency", "sufficiency"), ALMUDEVAR)


register(_teapot_dci())
for _name in ("square", "arrow", "airplane"):
    register(_lsbd(_name, _name))
register(_lsbd("objects", "objects", per_object=True))
register(_lsbd("modelnet40", "modelnet40", per_object=True, needs_source=True))
register(_lsbd("coil100", "coil100", per_object=True, needs_source=True))
for _name in ("teapot", "square", "arrow", "airplane"):
    register(_dependent(_name))
