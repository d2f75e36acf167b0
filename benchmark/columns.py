"""Score columns in words: the short name and group of a column ``label.field`` of a protocol's table
(``D`` of ``dci.disentanglement``, group ``double-0.1`` of ``double-0.1.mig.score``), shared by the score
tables (LaTeX) and the leaderboard."""

from __future__ import annotations

from .protocols import Protocol

__all__ = ["score_column"]

#: (metric or label, field) -> the column's short name
SHORT_NAMES = {("dci", "disentanglement"): "D", ("dci", "completeness"): "C", ("dci", "informativeness"): "I",
               ("minimality_sufficiency", "minimality"): "min", ("minimality_sufficiency", "sufficiency"): "suff",
               ("mig", "score"): "MIG", ("sap", "score"): "SAP", ("modularity", "score"): "mod",
               ("explicitness", "score"): "expl", ("irs", "score"): "IRS", ("downstream", "score"): "acc",
               ("d_lsbd", "score"): "D_LSBD", ("d_lsbd", "sum"): "D_LSBD sum", ("beta_vae", "score"): "BetaVAE",
               ("factor_vae", "score"): "FactorVAE"}


def score_column(protocol: Protocol | None, key: str) -> tuple[str, str, str]:
    """(group, short name, metric) of a score column ``label.field``: the group is the dependence setting a
    label starts with (``double-0.1`` of ``double-0.1.mig``), '' for a label that is its metric's own."""
    label, _, name = key.rpartition(".")
    call = next((c for c in protocol.metrics if c.label == label), None) if protocol is not None else None
    metric = call.metric if call is not None else label
    group, base = "", label
    for candidate in (metric, label.rsplit(".", 1)[-1]):
        if label.endswith("." + candidate):
            group, base = label[:-len(candidate) - 1], candidate
            break
    short = SHORT_NAMES.get((metric, name)) or SHORT_NAMES.get((base, name))
    if short is None:
        short = name if base == metric else f"{base} {name}"
    elif base.startswith("dci_"):
        short = f"{base[len('dci_'):]} {short}"
    return group, short, metric
