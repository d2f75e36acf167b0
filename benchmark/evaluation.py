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
import sys
import time
import warnings
from typing import Any

import numpy as np

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.fileformat import package_version

from .adapters import ADAPTERS, EvalContext, NotApplicable
from .code_checks import code_warnings, probe_rows, probe_warnings
from .cache import DataChanged, expected_rows, file_state, prepare_dataset, verified_hashes
from .environment import environment_record
from .metrics._progress import metric_progress
from .dataset import load
from .encoders import describe_encoder, encode, encode_images, load_encoder
from .protocols import Protocol, get_protocol
from .results import EvaluationResult, better_direction
from .subgrid import subgrid_factors, subgrid_rows, subgrid_size

__all__ = ["check_codes", "check_protocol_codes", "evaluate", "evaluation_rows", "evaluation_size", "load_codes"]


_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"


def load_codes(path: str | os.PathLike) -> tuple[Any, np.ndarray | None]:
    """Codes from an ``.npy`` file (an array (N, D)) or an ``.npz`` file holding ``codes``, or ``mu``
    and ``logvar``, and optionally ``indices`` (the dataset row of each code row). Returns the codes
    (an array, or a ``(mu, logvar)`` pair) and the indices (or None). Nothing is checked against a
    protocol here (see :func:`check_codes`)."""
    how = "save them with numpy.save(FILE.npy, codes) or numpy.savez(FILE.npz, codes=codes) (or mu=..., logvar=...)"
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise FactorbenchError(f"--codes {path}: cannot read it ({exc.strerror or exc})") from None
    if not (head.startswith(_NPY_MAGIC) or head.startswith(_ZIP_MAGIC)):
        looks = "a text (e.g. CSV) file" if head and all(32 <= b < 127 or b in (9, 10, 13) for b in head) else "not a numpy file"
        raise FactorbenchError(f"--codes {path} is {looks}, not a numpy .npy or .npz file; {how}")
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        if "pickled" in str(exc):
            raise FactorbenchError(f"--codes {path} holds Python objects, not a numeric array; {how}") from None
        raise FactorbenchError(f"--codes {path} cannot be read as a numpy file ({exc}); {how}") from None
    if isinstance(data, np.ndarray):
        return data, None
    try:
        keys = set(data.files)
        if "codes" in keys and ({"mu", "logvar"} & keys):
            raise FactorbenchError(f"--codes {path} holds both 'codes' and {sorted({'mu', 'logvar'} & keys)}: which "
                                   "should be scored? Save only 'codes' (deterministic codes) or only 'mu' and "
                                   "'logvar' (a Gaussian posterior)")
        indices = data["indices"] if "indices" in keys else None
        if "codes" in keys:
            return data["codes"], indices
        if {"mu", "logvar"} <= keys:
            return (data["mu"], data["logvar"]), indices
    except ValueError as exc:
        raise FactorbenchError(f"--codes {path}: an array in it cannot be read ({exc}); {how}") from None
    raise FactorbenchError(f"--codes {path} holds {sorted(keys)}; it needs an array 'codes', or 'mu' and 'logvar' "
                           "(and optionally 'indices')")


def _rows_of(codes: Any) -> int | None:
    """Number of rows of the user's codes (an array or a (mu, logvar) pair), None if it has no shape."""
    first = codes[0] if isinstance(codes, (tuple, list)) and len(codes) == 2 else codes
    shape = getattr(first, "shape", None)
    return int(shape[0]) if shape else None


def evaluation_size(protocol: str | Protocol, *, source: str | os.PathLike | None = None) -> int:
    """How many samples a protocol scores: its evaluation sub-grid, or every sample of its file."""
    from .cache import dataset_spec

    protocol = get_protocol(protocol)
    ref = protocol.dataset
    if not ref.eval_grid:
        return expected_rows(ref, source=source)
    return subgrid_size(dataset_spec(ref, source).factors, ref.eval_grid)


def check_protocol_codes(protocol: str | Protocol, codes: Any, indices: Any = None, *,
                         source: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None
                         ) -> tuple[np.ndarray, np.ndarray | None, str]:
    """The user's codes for ``protocol`` checked (see :func:`check_codes`) without generating its data:
    ``(mu, logvar, covers)`` with ``covers`` ``"file"`` (one row per image of the file, put in file order)
    or ``"subgrid"`` (one row per image of the protocol's evaluation sub-grid, in file order)."""
    protocol = get_protocol(protocol)
    n = expected_rows(protocol.dataset, source=source, directory=data_dir)
    m = evaluation_size(protocol, source=source) if protocol.dataset.eval_grid else n
    if m != n and _rows_of(codes) == m and indices is None:
        mu, logvar = check_codes(codes, m)
        return mu, logvar, "subgrid"
    mu, logvar = check_codes(codes, n, indices, subgrid=None if m == n else m)
    return mu, logvar, "file"


def evaluation_rows(protocol: str | Protocol, dataset: Any) -> np.ndarray:
    """The rows of the protocol's dataset file (loaded) that it encodes and scores, in file order."""
    protocol = get_protocol(protocol)
    step = protocol.dataset.eval_grid
    return subgrid_rows(dataset.factor_classes, step) if step else np.arange(len(dataset))


def check_codes(codes: Any, n: int, indices: Any = None, *,
                subgrid: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """The user's codes checked against a dataset file of ``n`` images (one row per image: numeric,
    2-D, finite) and put in file order (``indices``: the file row of each code row). ``subgrid``: the
    size of the protocol's evaluation sub-grid, named in the error about a wrong number of rows."""
    from .encoders import to_numpy

    if isinstance(codes, (tuple, list)) and len(codes) == 2:
        parts = {"mu": to_numpy(codes[0]), "logvar": to_numpy(codes[1])}
        if parts["mu"].shape != parts["logvar"].shape:
            raise FactorbenchError(f"the codes given have mu of shape {parts['mu'].shape} and logvar of shape "
                                   f"{parts['logvar'].shape}; they must match")
    else:
        parts = {"codes": to_numpy(codes)}
    for name, a in parts.items():
        if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_) \
                or np.issubdtype(a.dtype, np.complexfloating):
            raise FactorbenchError(f"the {name} given have dtype {a.dtype}; give real numbers, an array (N, D)")
        if a.ndim != 2:
            raise FactorbenchError(f"the {name} given have shape {a.shape}; give an array of shape (N, D): one row "
                                   f"per image of the protocol's dataset (N = {n}), one column per code dimension")
        if a.shape[0] != n:
            also = ("" if subgrid is None else
                    f", or one row per image of its evaluation sub-grid ({subgrid} rows, in file order; "
                    "`factorbench protocols NAME --eval-rows OUT.npy` writes their file rows)")
            raise FactorbenchError(f"the {name} given have {a.shape[0]} rows, but the protocol's dataset has {n} "
                                   f"images: give one row per image{also} (`factorbench protocols NAME "
                                   "--dataset-path` prints the file, in whose order the rows go)")
        if a.shape[1] < 1:
            raise FactorbenchError(f"the {name} given have no columns; give at least one code dimension")
        if not np.isfinite(a).all():
            raise FactorbenchError(f"the {name} given contain NaN or inf; fix them before scoring")
    mu = parts.get("codes", parts.get("mu")).astype(np.float64)
    logvar = parts["logvar"].astype(np.float64) if "logvar" in parts else None
    if indices is None:
        return mu, logvar
    idx = np.asarray(indices)
    if idx.shape != (n,) or not np.issubdtype(idx.dtype, np.integer) or not np.array_equal(np.sort(idx), np.arange(n)):
        raise FactorbenchError(f"indices must give each of the dataset's {n} rows exactly once (an integer "
                               f"permutation of 0..{n - 1}), one per code row; got shape {idx.shape}, "
                               f"dtype {idx.dtype}")
    order = np.argsort(idx)
    return mu[order], None if logvar is None else logvar[order]


def _directions(protocol: Protocol, metrics: dict[str, dict[str, Any]]) -> dict[str, str]:
    settings = {m.label: dict(m.settings) for m in protocol.metrics}
    return {f"{label}.{name}": better_direction(entry["metric"], name, settings.get(label))
            for label, entry in metrics.items() for name in entry["scalars"]}


#: codes wider than this are warned about before the metrics run (their cost grows with the width)
LARGE_CODE = 1_000


def local_data_record(protocol: Protocol, spec: Any) -> dict[str, Any]:
    """What a result on the user's copy of the data records about that copy: the copy's digest, the
    number of objects it holds and the number the protocol names (``objects_expected``: the published
    set's, e.g. ModelNet40's 626 training airplanes, COIL-100's 100 objects). A copy with fewer objects
    is warned about (``warnings.warn``) and its result says so in its summary and score tables."""
    from factorbench import generators

    expected = len(generators.get(protocol.dataset.generator, dict(protocol.dataset.params)).factors()[0].values)
    have = len(spec.factors[0].values)
    if have < expected:
        warnings.warn(f"{protocol.name}: your copy of {protocol.dataset.generator} holds {have} objects, the protocol "
                      f"names {expected}: these scores are not comparable with its reference rows", stacklevel=3)
    return {"source_digest": str(spec.params.get("source_digest", "")), "objects": have, "objects_expected": expected}


def evaluate(protocol: str | Protocol, encoder: Any = None, *, codes: Any = None, indices: Any = None,
             batch_size: int = 256,
             source: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
             progress: bool = True, only: tuple[str, ...] | None = None,
             backend: str | None = None) -> EvaluationResult:
    """Score ``encoder`` (images -> codes or (mu, logvar); a reference name ``ideal``/``random``/``pca``;
    ``module:function``; a torch module) or precomputed ``codes`` (one row per sample of the protocol's
    dataset file, in file order; see ``protocol_dataset``) under ``protocol``.

    ``indices`` (optional, with ``codes``) gives the dataset row of each code row, in any order; the
    codes are checked before any data is generated. ``source`` points at outside data (ModelNet40,
    COIL-100) the first time; ``backend`` picks the renderer of a 3D dataset generated on first use;
    ``only`` restricts the run to some metric labels (the result then says so and cannot enter the
    reference table). The result records the hashes of the data as read (verified), and whether its
    images are the copy the protocol's reference rows were scored on."""
    protocol = get_protocol(protocol)
    if (encoder is None) == (codes is None):
        raise FactorbenchError("give either an encoder or codes (not both, not neither)")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise FactorbenchError(f"batch_size must be a positive whole number, got {batch_size!r}")
    calls = protocol.metrics if only is None else tuple(protocol.metric(label) for label in only)
    if codes is not None:  # before any data is generated
        mu, logvar, codes_cover = check_protocol_codes(protocol, codes, indices, source=source, data_dir=data_dir)
    else:
        encoder = load_encoder(encoder)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    path = prepare_dataset(protocol.dataset, source=source, directory=data_dir, progress=progress, backend=backend)
    hashes = verified_hashes(path)
    state = file_state(path)
    timings["prepare_dataset"] = time.perf_counter() - t0
    with load(path) as ds:
        step = protocol.dataset.eval_grid
        rows = evaluation_rows(protocol, ds)
        if codes is not None and step and codes_cover == "file":
            mu, logvar = mu[rows], None if logvar is None else logvar[rows]
        t0 = time.perf_counter()
        training: dict[str, Any] = {}
        input_warnings: list[str] = []
        if codes is not None:
            description = "codes given by the user"
        else:
            description = describe_encoder(encoder)
            training = dict(getattr(encoder, "provenance", None) or {})
            trained_on = (training.get("training_data") or {}).get("generator")
            if trained_on and trained_on != protocol.dataset.generator:
                warnings.warn(f"{description} was trained on {trained_on}; {protocol.name} scores it on "
                              f"{protocol.dataset.generator}: a transfer, not the protocol's setting", stacklevel=2)
            if hasattr(encoder, "fit"):
                fit_split = "train" if "train" in ds.split_names else None
                encoder.fit(ds.split(fit_split).images if fit_split else ds.images)
            mu, logvar = encode(encoder, ds, rows, batch_size=batch_size, progress=progress)
            if not hasattr(encoder, "encode_dataset"):  # an encoder of images: probe it
                probe = ds.images[np.sort(rows[probe_rows(len(rows))])]
                input_warnings += probe_warnings(lambda batch: encode_images(encoder, batch), probe)
        input_warnings = code_warnings(mu) + input_warnings
        for text in input_warnings:
            warnings.warn(f"{protocol.name}, {description}: {text}", stacklevel=2)
        timings["encode"] = time.perf_counter() - t0
        if mu.shape[1] > LARGE_CODE:
            warnings.warn(f"codes of {mu.shape[1]:,} dimensions: the metrics' cost grows with the dimension (D_LSBD, "
                          "DCI and the classifiers per code can take tens of minutes); factorbench's models use 4 to "
                          "10", stacklevel=2)
        if step:
            grid_factors = subgrid_factors(ds.spec.factors, step, f"protocol {protocol.name}")
            ctx = EvalContext(ds, mu, logvar, ds.factors[rows], ds.factor_classes[rows] // np.asarray(step),
                              ds.factor_kinds, tuple(len(f.values) for f in grid_factors), file_rows=rows,
                              grid_factors=grid_factors)
        else:
            ctx = EvalContext(ds, mu, logvar, ds.factors, ds.factor_classes, ds.factor_kinds,
                              tuple(len(f.values) for f in ds.spec.factors) if ds.spec.is_grid else None)
        metrics: dict[str, dict[str, Any]] = {}
        skipped: dict[str, str] = {}
        for call in calls:
            if progress:
                print(f"  {call.label} ...", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            try:
                with metric_progress(call.label if progress else None):
                    result = ADAPTERS[call.metric](ctx, call)
            except NotApplicable as why:
                skipped[call.label] = str(why)
                continue
            timings[call.label] = time.perf_counter() - t0
            scalars = {k: (v if math.isfinite(v) else None) for k, v in result.scalars().items()}
            metrics[call.label] = {"metric": call.metric, "scalars": scalars, "result": result.to_dict()}
        pin = protocol.reference_images or None
        dataset_info = {"spec_hash": ds.spec.hash(), "rows_scored": int(len(rows)),
                        "factor_names": list(ds.spec.factor_names), "sha256": hashes,
                        "renderer": ds.manifest.get("renderer", ""), "reference_images_sha256": pin,
                        "same_images_as_reference": None if pin is None else hashes["images"] == pin,
                        **(local_data_record(protocol, ds.spec) if protocol.needs_source else {})}
        if hashes != dict(ds.manifest["sha256"]):
            raise DataChanged(f"{path} changed since it was verified; run again")
    if file_state(path) != state:
        raise DataChanged(f"{path} changed while it was being read; make sure nothing else writes it, then run again")
    return EvaluationResult(
        protocol=protocol.name, protocol_version=protocol.version, protocol_hash=protocol.hash(),
        dataset=dataset_info, package_version=package_version(), encoder=description,
        code_dim=int(mu.shape[1]), posterior=logvar is not None, metrics=metrics, skipped=skipped,
        partial=only is not None, seeds=sorted({c.seed for c in calls}), timings=timings,
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        environment=environment_record(),
        training=training,
        headline={"key": protocol.headline.key, "better": protocol.headline.better},
        directions=_directions(protocol, metrics),
        warnings=input_warnings,
    )
