"""What kind of row a score table shows, and whether its code carries enough information to be ranked.

Kinds (from the result's provenance and model config, never typed by hand):

- ``oracle``: ``ideal``, the factors themselves;
- ``baseline``: ``random`` and ``pca``, reference encoders without training;
- ``unsupervised``, ``weakly supervised`` (Ada-GVAE, Ada-ML-VAE: pairs known to share factors),
  ``supervised`` (LSBD-VAE with labelled pairs, Quessard et al.'s model: transformation labels): trained
  runs, by their model config;
- ``external``: a result without training provenance and not a reference encoder (the user's encoder).

A trained or external row is *uninformative* when its informativeness is no better than the ``random``
baseline's on the same protocol (the protocol's first DCI informativeness, else its independent-setting
downstream accuracy): its code says too little about the factors for its disentanglement scores to mean
anything (a collapsed code can score a low D_LSBD). Oracle and baseline rows are never flagged, and
neither kind counts as a protocol's "best".

No PyTorch needed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["KINDS", "RANKED_KINDS", "informativeness_key", "row_kind", "uninformative_rows"]

KINDS = ("oracle", "baseline", "unsupervised", "weakly supervised", "supervised", "external")
#: kinds that compete for a protocol's "best" (oracle and baselines are references, not entries)
RANKED_KINDS = ("unsupervised", "weakly supervised", "supervised", "external")

#: reference encoders without training -> kind
REFERENCE_KINDS = {"ideal": "oracle", "random": "baseline", "pca": "baseline"}

#: model name -> its supervision from its config's params; a model not listed is unsupervised
SUPERVISION: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "ada-gvae": lambda params: "weakly supervised",
    "ada-ml-vae": lambda params: "weakly supervised",
    "lsbd-vae": lambda params: "supervised" if int(params.get("labelled_pairs", 0)) > 0 else "unsupervised",
    "quessard": lambda params: "supervised",
}


def row_kind(model: str, runs: Sequence[Any]) -> str:
    """The kind of a score-table row (``model`` and its results)."""
    training = (runs[0].training or {}) if runs else {}
    config = training.get("config") or {}
    if config.get("model"):
        return SUPERVISION.get(str(config["model"]), lambda params: "unsupervised")(config.get("params") or {})
    return REFERENCE_KINDS.get(model, "external")


def informativeness_key(columns: Sequence[str]) -> str | None:
    """The scalar a protocol's informativeness is read from: the first ``*.informativeness`` of a DCI
    metric, else the independent setting's (or the only) downstream accuracy; None when it has neither."""
    for key in columns:
        if key.endswith(".informativeness") and "zeroshot" not in key:
            return key
    for key in ("independent.downstream.score", "downstream.score"):
        if key in columns:
            return key
    return None


def uninformative_rows(columns: Sequence[str], directions: Sequence[str], means: Mapping[str, Sequence[float]],
                       kinds: Mapping[str, str]) -> dict[str, str]:
    """Rows (model -> reason) whose informativeness is no better than the ``random`` row's. ``means``: model ->
    the mean of each column (in ``columns`` order)."""
    key = informativeness_key(columns)
    if key is None or "random" not in means:
        return {}
    i = list(columns).index(key)
    better = directions[i]
    floor = means["random"][i]
    if math.isnan(floor):
        return {}
    out = {}
    for model, values in means.items():
        if kinds.get(model) not in RANKED_KINDS or math.isnan(values[i]):
            continue
        worse = values[i] <= floor if better == "higher" else values[i] >= floor
        if worse:
            out[model] = (f"{key} {values[i]:.3f}, no better than the random baseline's {floor:.3f}: too little "
                          "information about the factors to rank its disentanglement")
    return out
