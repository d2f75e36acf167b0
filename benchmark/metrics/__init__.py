"""Disentanglement metrics: plain, seeded functions over arrays (conventions in ``_base``; formulas,
sources and defaults in ``benchmark/METRICS.md``)."""

from ._base import MetricInputError, MetricResult, factor_classes
from .dci import DCIResult, ZeroShotResult, dci, dci_from_importance, dci_of_samples, zero_shot_informativeness
from .do_tran import do_tran, informativeness, jemmig, misjed, rmig, windin, wsepin
from .downstream import DownstreamResult, FullCodeAccuracyResult, full_code_accuracy, single_code_accuracy
from .intervention import BetaVAEResult, FactorVAEResult, beta_vae_score, factor_vae_score
from .irs import IRSResult, irs
from .lsbd import LSBDObjectsResult, LSBDResult, d_lsbd, d_lsbd_objects
from .mig import MIGResult, mig
from .minimality import MinimalitySufficiencyResult, minimality_sufficiency
from .modularity import ExplicitnessResult, ModularityResult, explicitness, modularity
from .samplers import FactorSampler, GeneratorSampler, GridSampler
from .sap import SAPResult, sap

__all__ = [
    "BetaVAEResult", "DCIResult", "DownstreamResult", "ExplicitnessResult", "FactorSampler", "FactorVAEResult", "FullCodeAccuracyResult",
    "GeneratorSampler", "GridSampler", "IRSResult", "LSBDObjectsResult", "LSBDResult", "MIGResult",
    "MetricInputError", "MetricResult", "MinimalitySufficiencyResult", "ModularityResult", "SAPResult",
    "ZeroShotResult", "beta_vae_score", "d_lsbd", "d_lsbd_objects", "dci", "dci_from_importance", "dci_of_samples", "do_tran",
    "explicitness", "factor_classes", "factor_vae_score", "full_code_accuracy", "informativeness", "irs", "jemmig", "mig",
    "minimality_sufficiency", "misjed", "modularity", "rmig", "sap", "single_code_accuracy", "windin", "wsepin",
    "zero_shot_informativeness",
]
