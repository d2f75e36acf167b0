"""Score a model under a protocol: ``evaluate(protocol, encoder)`` or ``evaluate(protocol, codes=...)``.

The protocol's dataset is prepared in the cache (generated on first use, checked on every use; see
:mod:`factorbench.benchmark.cache`), every sample of the file is encoded in file order (or the
user's codes are checked against that order), then each of the protocol's metric calls runs on the
splits it names. The result holds every metric's scalars and matrices plus everything needed to say
which protocol, data, package and encoder produced it.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import platform
import time
from typing import Any

import numpy as np

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.fileformat import package_version

from .adapters import ADAPTERS, EvalContext, NotApplicable
from .cache import prepare_dataset
from .dataset import load
from .encoders import describe_encoder, encode, load_encoder
from .protocols import Protocol, get_protocol
from .results import EvaluationResult

__all__ = ["evaluate", "load_codes"]


def load_codes(path: str | os.PathLike) -> tuple[Any, np.ndarray | None]:
    """Codes from an ``.npy`` file (an array (N, D)) or an ``.npz`` file holding ``codes``, or ``mu``
    and ``logvar``, and optionally ``indices`` (the dataset row of each code row). Returns the codes
    (an array, or a ``(mu, logvar)`` pair) and the indices (or None)."""
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise FactorbenchError(f"cannot read codes from {path} ({exc}); give an .npy array or an .npz with "
                               "'codes' or 'mu' and 'logvar'") from None
    if isinstance(data, np.ndarray):
        return data, None
    keys = set(data.files)
    indices = data["indices"] if "indices" in keys else None
    if "codes" in keys:
        return data["codes"], indices
    if {"mu", "logvar"} <= keys:
        return (data["mu"], data["logvar"]), indices
    raise FactorbenchError(f"{path} holds {sorted(keys)}; it needs an array 'codes', or 'mu' and 'logvar' "
                           "(and optionally 'indices')")


def _check_user_codes(codes: Any, n: int, indices: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """The user's codes checked against the file (one row per sample) and put in file order."""
    from .encoders import _check_batch

    mu, logvar = _check_batch(codes, n, "the codes given")
    if indices is None:
        return mu, logvar
    idx = np.asarray(indices)
    if idx.shape != (n,) or not np.issubdtype(idx.dtype, np.integer) or not np.array_equal(np.sort(idx), np.arange(n)):
        raise FactorbenchError(f"indices must give each of the dataset's {n} rows exactly once (an integer "
                               f"permutation of 0..{n - 1}), one per code row; got shape {idx.shape}, "
                               f"dtype {idx.dtype}")
    order = np.argsort(idx)
    return mu[order], None if logvar is None else logvar[order]


def evaluate(protocol: str | Protocol, encoder: Any = None, *, codes: Any = None, indices: Any = None,
             batch_size: int = 256,
             source: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
             progress: bool = True, only: tuple[str, ...] | None = None) -> EvaluationResult:
    """Score ``encoder`` (images -> codes or (mu, logvar); a reference name ``ideal``/``random``/``pca``;
    ``module:function``; a torch module) or precomputed ``codes`` (one row per sample of the protocol's
    dataset file, in file order; see ``protocol_dataset``) under ``protocol``.

    ``indices`` (optional, with ``codes``) gives the dataset row of each code row, in any order.
    ``source`` points at outside data (ModelNet40, COIL-100) the first time; ``only`` restricts the run
    to some metric labels (the result then says so and cannot enter the reference table)."""
    protocol = get_protocol(protocol)
    if (encoder is None) == (codes is None):
        raise FactorbenchError("give either an encoder or codes (not both, not neither)")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    path = prepare_dataset(protocol.dataset, source=source, directory=data_dir, progress=progress)
    timings["prepare_dataset"] = time.perf_counter() - t0
    calls = protocol.metrics if only is None else tuple(protocol.metric(label) for label in only)
    with load(path) as ds:
        rows = np.arange(len(ds))
        t0 = time.perf_counter()
        training: dict[str, Any] = {}
        if codes is not None:
            mu, logvar = _check_user_codes(codes, len(ds), indices)
            description = "codes given by the user"
        else:
            encoder = load_encoder(encoder)
            description = describe_encoder(encoder)
            training = dict(getattr(encoder, "provenance", None) or {})
            if hasattr(encoder, "fit"):
                fit_split = "train" if "train" in ds.split_names else None
                encoder.fit(ds.split(fit_split).images if fit_split else ds.images)
            mu, logvar = encode(encoder, ds, rows, batch_size=batch_size, progress=progress)
        timings["encode"] = time.perf_counter() - t0
        ctx = EvalContext(ds, mu, logvar, ds.factors, ds.factor_classes, ds.factor_kinds,
                          tuple(len(f.values) for f in ds.spec.factors) if ds.spec.is_grid else None)
        metrics: dict[str, dict[str, Any]] = {}
        skipped: dict[str, str] = {}
        for call in calls:
            if progress:
                print(f"  {call.label} ...", flush=True)
            t0 = time.perf_counter()
            try:
                result = ADAPTERS[call.metric](ctx, call)
            except NotApplicable as why:
                skipped[call.label] = str(why)
                continue
            timings[call.label] = time.perf_counter() - t0
            scalars = {k: (v if math.isfinite(v) else None) for k, v in result.scalars().items()}
            metrics[call.label] = {"metric": call.metric, "scalars": scalars, "result": result.to_dict()}
        dataset_info = {"path": str(path), "spec_hash": ds.spec.hash(), "factor_names": list(ds.spec.factor_names), "manifest_sha256": dict(ds.manifest["sha256"]),
                        "renderer": ds.manifest.get("renderer", "")}
    return EvaluationResult(
        protocol=protocol.name, protocol_version=protocol.version, protocol_hash=protocol.hash(),
        dataset=dataset_info, package_version=package_version(), encoder=description,
        code_dim=int(mu.shape[1]), posterior=logvar is not None, metrics=metrics, skipped=skipped,
        partial=only is not None, seeds=sorted({c.seed for c in calls}), timings=timings,
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        environment={"python": platform.python_version(), "machine": platform.machine()},
        training=training,
    )
