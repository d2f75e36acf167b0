"""Result files and the reference-score table.

One evaluation gives an :class:`EvaluationResult`, written as JSON (numbers as floats) with a sha256
checksum of its content. The reference table of a protocol is the folder
``benchmark/reference/<protocol>/`` (installed with the package): one JSON file per model, either a
single result or several seeds of one model (``{"model": ..., "runs": [...]}``, as ``factorbench sweep
PLAN --collect`` writes them, with a per-scalar ``summary``), which the table shows as mean and sample
standard deviation (n - 1). :func:`scores_table` validates every file before it shows a number: its schema
and checksum (an edited value is refused), its protocol and protocol hash (a stale result must be
re-run, never silently mixed in), its dataset spec hash, every metric of the protocol, and one file
per model name; rows scored on other images than the protocol's reference copy are marked. Users add
their own results beside the reference rows (``add=[paths]``, ``factorbench scores --add``).
"""

from __future__ import annotations

import csv
import fnmatch
import functools
import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.spec import canonical_json, sha256_text
from factorbench.generators.outputs import check_input_dir, write_atomically

from .columns import score_column
from .protocols import PROTOCOLS, Protocol, get_protocol

__all__ = ["EvaluationResult", "REFERENCE_DIR", "RESULT_FORMAT", "SUPERSEDED_DIR", "ScoresTable", "added_models",
           "better_direction", "format_table", "load_result", "reference_results", "save_runs", "scores_table",
           "superseded_dir", "superseded_results"]

#: the reference results shipped with the package
REFERENCE_DIR = Path(__file__).with_name("reference")
#: runs that a job's later training replaced in :data:`REFERENCE_DIR`, kept where a retired protocol's
#: shipped results scored the same weights (``<protocol>/<model>.json``, the reference files' format)
SUPERSEDED_DIR = Path(__file__).with_name("superseded")
#: version of the result file's schema (2: checksum, headline and directions, data hashes as read, no local path)
RESULT_FORMAT = 2

#: (metric, scalar) pairs for which a lower value is better (every other scalar: higher is better)
LOWER_IS_BETTER = frozenset({
    ("dci", "informativeness"),      # NRMSE (lasso, forest); the gbt estimator reports accuracy instead
    ("dci_of_samples", "informativeness"),
    ("d_lsbd", "score"), ("d_lsbd_objects", "score"),
    ("do_tran", "jemmig"), ("do_tran", "misjed"),
})


def better_direction(metric: str, scalar: str, settings: dict[str, Any] | None = None) -> str:
    """``"higher"`` or ``"lower"``: which way a metric's scalar is better."""
    gbt = (settings or {}).get("regressor") == "gbt"
    if metric in ("dci", "dci_of_samples") and scalar == "informativeness" and gbt:
        return "higher"
    return "lower" if (metric, scalar) in LOWER_IS_BETTER else "higher"


@dataclass(frozen=True)
class EvaluationResult:
    """What one evaluation produced, and everything needed to say how (see :func:`evaluate`).

    ``dataset`` holds the dataset spec hash, the sha256 of every array as read and verified
    (``sha256``), the renderer, and whether the images are the protocol's reference copy
    (``reference_images_sha256``, ``same_images_as_reference``). ``headline`` is the protocol's
    headline scalar and its direction (``{"key": ..., "better": "higher" | "lower"}``); ``directions``
    gives the direction of every scalar. Metrics are kept in the protocol's order."""

    protocol: str
    protocol_version: int
    protocol_hash: str
    dataset: dict[str, Any]
    package_version: str
    encoder: str
    code_dim: int
    posterior: bool
    metrics: dict[str, dict[str, Any]]
    skipped: dict[str, str] = field(default_factory=dict)
    partial: bool = False
    seeds: list[int] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    date: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    model: str = ""
    #: for a trained run (``run:RUN_DIR``): its run hash, model config and config hash, training data and budget
    training: dict[str, Any] = field(default_factory=dict)
    headline: dict[str, str] = field(default_factory=dict)
    directions: dict[str, str] = field(default_factory=dict)
    result_format: int = RESULT_FORMAT
    #: what the checks of the codes and the encoder found before the metrics ran (``code_checks``)
    warnings: list[str] = field(default_factory=list)

    def scalars(self) -> dict[str, float]:
        """``{"label.field": value}`` of every headline scalar, in the protocol's order."""
        return {f"{label}.{name}": math.nan if v is None else float(v)
                for label, m in self.metrics.items() for name, v in m["scalars"].items()}

    def to_dict(self) -> dict[str, Any]:
        """The content as plain data; ``training`` only for trained runs (an encoder with provenance),
        ``warnings`` only when the input checks found something."""
        d = asdict(self)
        for key in ("training", "warnings"):
            if not d[key]:
                del d[key]
        return d

    def checksum(self) -> str:
        """sha256 of the canonical JSON of the content (written into the file as ``checksum``): the
        :meth:`to_dict` content, read without its deep copy (a result's metrics hold hundreds of
        thousands of values, and the copy took most of the time of reading reference files)."""
        content = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in ("training", "warnings"):
            if not content[key]:
                del content[key]
        return sha256_text(canonical_json(content))

    def to_json(self) -> str:
        return json.dumps({**self.to_dict(), "checksum": self.checksum()}, indent=1, allow_nan=False)

    def save(self, path: str | os.PathLike, *, force: bool = False) -> Path:
        """Write the JSON file (atomically; an existing file is replaced only with ``force``; a failed
        write leaves nothing behind)."""
        path = Path(path)
        if path.is_dir():
            raise FactorbenchError(f"{path} is a directory; give a file name for the result")
        if path.exists() and not force:
            raise FactorbenchError(f"{path} exists; pass --force to replace it")
        write_atomically(path, self.to_json())
        return path

    def headline_key(self) -> str | None:
        return self.headline.get("key")

    def summary(self) -> str:
        """A readable table of the scalars: the headline first with its direction, then the others in
        the protocol's order, each with its direction."""
        lines = [f"{self.protocol} (hash {self.protocol_hash[:12]})  encoder: {self.encoder}  code dim {self.code_dim}"]
        scalars = self.scalars()
        head = self.headline_key()
        if head in scalars:
            lines.append(f"  headline: {head} = {scalars[head]:.4f} ({self.headline.get('better', 'higher')} is better)")
        width = max((len(k) for k in scalars), default=10)
        order = ([head] if head in scalars else []) + [k for k in scalars if k != head]
        for key in order:
            arrow = _ARROWS.get(self.directions.get(key, "higher"), "")
            lines.append(f"  {key:<{width}}  {scalars[key]:8.4f}  {arrow}")
        for label, why in self.skipped.items():
            lines.append(f"  {label:<{width}}  skipped: {why}")
        for warning in self.warnings:
            lines.append(f"  WARNING (input): {warning}")
        for label, m in self.metrics.items():
            for warning in m.get("result", {}).get("warnings", ()):
                lines.append(f"  warning ({label}): {warning}")
        trained_on = ((self.training or {}).get("training_data") or {}).get("generator")
        scored_on = PROTOCOLS[self.protocol].dataset.generator if self.protocol in PROTOCOLS else None
        if trained_on and scored_on and trained_on != scored_on:
            lines.append(f"  note: the model was trained on {trained_on}, not on {scored_on}, this protocol's data")
        objects, expected = self.dataset.get("objects"), self.dataset.get("objects_expected")
        if objects is not None:
            lines.append(f"  data: your copy (source digest {str(self.dataset.get('source_digest'))[:12]}), {objects} "
                         "objects")
            if expected is not None and objects < expected:
                lines.append(f"  WARNING: scored on {objects} of the {expected} objects {self.protocol} names: not "
                             "comparable with its reference rows")
        if self.dataset.get("same_images_as_reference") is False:
            lines.append(f"  note: these images (sha256 {self.dataset['sha256']['images'][:12]}, "
                         f"{self.dataset.get('renderer', '')}) differ from the copy the reference rows were scored on "
                         f"(sha256 {str(self.dataset.get('reference_images_sha256'))[:12]}); scores can differ "
                         "from the reference table by the renderer's difference (benchmark/METRICS.md)")
        total = sum(v for k, v in self.timings.items())
        lines.append(f"  total time {total:.1f} s")
        return "\n".join(lines)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvaluationResult":
        try:
            return cls(**d)
        except TypeError as exc:
            raise FactorbenchError(f"not a factorbench result ({exc})") from None


_ARROWS = {"higher": "(higher is better)", "lower": "(lower is better)"}

#: the JSON Schema of a result file (draft 2020-12), published for other tools: ``factorbench scores --schema``
RESULT_SCHEMA_PATH = Path(__file__).with_name("result.schema.json")

_JSON_TYPES = {"object": "an object", "array": "a list", "string": "a string", "integer": "an integer",
               "number": "a number", "boolean": "true or false", "null": "null"}


@functools.lru_cache(maxsize=1)
def _schema_validator() -> Any:
    import jsonschema

    schema = json.loads(RESULT_SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _schema_problem(error: Any) -> str:
    """One schema violation in words: where it is (``dataset.sha256``) and what is wrong."""
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required":
        missing = error.message.split("'")[1]
        return f"missing {f'{where}.' if where else ''}{missing}"
    if error.validator == "additionalProperties" and error.schema.get("additionalProperties") is False:
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return f"unknown {', '.join(f'{where}.{k}' if where else k for k in extra)}"
    if error.validator == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return (f"{where} must be {' or '.join(_JSON_TYPES[t] for t in wanted)}, got "
                f"{type(error.instance).__name__} {json.dumps(error.instance)[:40]}")
    return f"{where or 'the file'}: {error.message[:200]}"


def validate_result_schema(data: Any, where: str = "result") -> None:
    """Check a result's JSON value against :data:`RESULT_SCHEMA_PATH` (jsonschema); the error lists every
    violation found, each with its place in the file."""
    errors = sorted(_schema_validator().iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        problems = list(dict.fromkeys(_schema_problem(e) for e in errors))
        raise FactorbenchError(f"{where} is not a valid result (benchmark/result.schema.json): " + "; ".join(problems[:6])
                               + (f"; and {len(problems) - 6} more" if len(problems) > 6 else ""))


def _number(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def _parse_result(data: Any, where: str) -> EvaluationResult:
    """One result from its JSON value: schema, types and checksum checked, errors naming ``where``."""
    if not isinstance(data, dict):
        raise FactorbenchError(f"{where} is not a factorbench result (a JSON object is expected)")
    if data.get("result_format") != RESULT_FORMAT:
        raise FactorbenchError(f"{where} has result format {data.get('result_format', 1)!r}; this factorbench "
                               f"reads format {RESULT_FORMAT}: re-run the evaluation with this version")
    validate_result_schema(data, where)
    data = dict(data)
    checksum = data.pop("checksum", None)
    for label, entry in data["metrics"].items():
        for name, value in entry["scalars"].items():
            stored = entry["result"].get(name)
            if value is not None and _number(stored) and stored is not None and not math.isclose(value, stored,
                                                                                                   rel_tol=1e-12):
                raise FactorbenchError(f"{where}: {label}.{name} is {value} but the metric's result says {stored}; "
                                       "the file was edited: re-run the evaluation")
    result = EvaluationResult(**data)
    if checksum != result.checksum():
        raise FactorbenchError(f"{where}: its checksum does not match its content (the file was edited after it "
                               "was written, or is incomplete); re-run the evaluation to get a valid result")
    return result


def load_result(path: str | os.PathLike) -> EvaluationResult:
    """A result file, validated (schema, checksum)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FactorbenchError(f"cannot read result {path} ({exc})") from None
    return _parse_result(data, str(path))


def save_runs(path: str | os.PathLike, model: str, runs: Sequence[EvaluationResult]) -> Path:
    """Write several runs of one model as one reference file, ``{"model": ..., "runs": [...]}`` (the form
    :func:`reference_results` reads; atomically, replacing ``path``)."""
    path = Path(path)
    document = {"model": model, "runs": [json.loads(r.to_json()) for r in runs]}
    write_atomically(path, json.dumps(document, sort_keys=True, allow_nan=False))
    return path


def compare_with_shipped(result: EvaluationResult, tolerance: float = 5e-5) -> str | None:
    """For a reference encoder (``ideal``, ``random``, ``pca``) re-run under a protocol with shipped rows: a
    line saying whether it reproduces the shipped row (every scalar within ``tolerance``) and, where it
    does not, which recorded parts of the environment differ (library versions, CPU, Python), the usual
    reasons. None for other encoders or protocols without that row."""
    path = REFERENCE_DIR / result.protocol / f"{result.model}.json"
    if result.model not in ("ideal", "random", "pca") or result.partial or not path.is_file():
        return None
    shipped = _runs_of(path)[0]
    if shipped.protocol_hash != result.protocol_hash or shipped.seeds != result.seeds:
        return None
    ours, theirs = result.scalars(), shipped.scalars()
    gaps = {k: abs(ours[k] - theirs[k]) for k in ours.keys() & theirs.keys()
            if not (math.isnan(ours[k]) and math.isnan(theirs[k]))}
    worst = max(gaps, key=lambda k: (math.isnan(gaps[k]), gaps[k]), default=None)
    if worst is None or not gaps[worst] > tolerance:
        return f"reproduces the shipped {result.model} row of {result.protocol} (every scalar within {tolerance:g})"
    env_a, env_b = result.environment, shipped.environment
    changed = [f"{k} {env_b.get(k, 'not recorded')} -> {env_a.get(k, 'not recorded')}"
               for k in sorted(set(env_a) | set(env_b)) if k != "factorbench_commit" and env_a.get(k) != env_b.get(k)]
    if result.package_version != shipped.package_version:
        changed.insert(0, f"factorbench {shipped.package_version} -> {result.package_version}")
    if result.dataset.get("sha256") != shipped.dataset.get("sha256"):
        changed.insert(0, "the data (its image or factor hashes differ: another renderer or generator version)")
    return (f"differs from the shipped {result.model} row of {result.protocol}: {worst} by {gaps[worst]:.2g}; "
            + ("what changed since: " + "; ".join(changed) if changed else
               "the recorded environment is the same (threads or BLAS kernels can still differ)"))


def summary_of(runs: Sequence[EvaluationResult]) -> dict[str, dict[str, float | int | None]]:
    """Mean and sample standard deviation (n - 1, as the score tables show) and count of the finite values
    of each headline scalar over ``runs``: the ``summary`` of a collected reference file."""
    values: dict[str, list[float]] = {}
    for run in runs:
        for key, value in run.scalars().items():
            values.setdefault(key, []).append(value)
    out: dict[str, dict[str, float | int | None]] = {}
    for key, vs in values.items():
        finite = [v for v in vs if math.isfinite(v)]
        out[key] = {"mean": float(np.mean(finite)) if finite else None,
                    "std": float(np.std(finite, ddof=1)) if len(finite) > 1 else None, "n": len(finite)}
    return out


#: the keys of a file of several runs: ``{"model", "runs"}`` (:func:`save_runs`), plus what a sweep's
#: ``--collect`` adds (protocol, plan, seeds, missing seeds, summary), each checked against the runs
RUNS_FILE_KEYS = frozenset({"model", "runs", "protocol", "plan", "seeds", "missing_seeds", "summary"})


def _sweep_seed(run: EvaluationResult) -> Any:
    return ((run.training or {}).get("sweep") or {}).get("seed")


def _sweep_plan(run: EvaluationResult) -> Any:
    """The name of the plan whose sweep trained ``run`` (None for a run not trained by a sweep)."""
    return ((run.training or {}).get("sweep") or {}).get("plan")


def _same_summary(stated: Any, derived: Mapping[str, Mapping[str, Any]]) -> bool:
    if not isinstance(stated, dict) or set(stated) != set(derived):
        return False
    for key, d in derived.items():
        s = stated[key]
        if not isinstance(s, dict) or set(s) != set(d) or s["n"] != d["n"]:
            return False
        for field_ in ("mean", "std"):
            a, b = s[field_], d[field_]
            if (a is None) != (b is None) or (a is not None and not (_number(a) and math.isclose(a, b, rel_tol=1e-12,
                                                                                                 abs_tol=1e-15))):
                return False
    return True


def _check_runs_file(data: Mapping[str, Any], runs: list[EvaluationResult], path: Path) -> None:
    """Every field of a file of several runs agrees with its runs: no run twice (same content, run hash or
    sweep seed), and the stated protocol, plan, seeds, missing seeds and summary are what the runs give."""
    unknown = sorted(set(data) - RUNS_FILE_KEYS)
    if unknown:
        raise FactorbenchError(f"{path}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; a file of "
                               f"runs holds {', '.join(sorted(RUNS_FILE_KEYS))}")
    checksums = [r.checksum() for r in runs]
    hashes = [(r.training or {}).get("run_hash") for r in runs]
    seeds = [_sweep_seed(r) for r in runs]
    for what, values in (("the same result", checksums), ("the same trained run", hashes), ("the same seed", seeds)):
        present = [v for v in values if v is not None]
        if len(set(present)) != len(present):
            i, j = next((i, j) for i in range(len(values)) for j in range(i + 1, len(values))
                        if values[i] is not None and values[i] == values[j])
            raise FactorbenchError(f"{path}: runs {i} and {j} are {what}; a row averages distinct runs only")
    if "protocol" in data and any(r.protocol != data["protocol"] for r in runs):
        raise FactorbenchError(f"{path} says protocol {data['protocol']!r}, its runs were scored under "
                               f"{sorted({r.protocol for r in runs})}")
    if "plan" in data:
        plans = {_sweep_plan(r) for r in runs}
        if plans != {data["plan"]}:
            raise FactorbenchError(f"{path} says plan {data['plan']!r}, its runs ran under {sorted(map(str, plans))}")
    if "seeds" in data and data["seeds"] != seeds:
        raise FactorbenchError(f"{path} says seeds {data['seeds']}, its runs are seeds {seeds}")
    if "missing_seeds" in data:
        missing = data["missing_seeds"]
        if not isinstance(missing, list) or set(missing) & set(seeds):
            raise FactorbenchError(f"{path}: missing_seeds {missing!r} must list seeds it has no run of")
        if runs and (runs[0].training or {}).get("sweep"):
            from factorbench.baselines.plan import planned_seeds

            # the plan may have gained seeds since (the table counts them from the plan, not from this field)
            planned = planned_seeds(runs[0].training, str(data.get("model", runs[0].model)))
            if planned is not None and set(missing) - set(planned):
                raise FactorbenchError(f"{path} says seeds {missing} are missing; its plan asks for seeds "
                                       f"{list(planned)} only")
    if "summary" in data and not _same_summary(data["summary"], summary_of(runs)):
        raise FactorbenchError(f"{path}: its summary is not the mean and std of its runs; it was edited or is stale "
                               "(collect it again)")


def _runs_of(path: Path) -> list[EvaluationResult]:
    """A reference file holds one result or ``{"model": ..., "runs": [result, ...]}`` (every other field
    checked against the runs: :func:`_check_runs_file`)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FactorbenchError(f"cannot read result {path} ({exc})") from None
    if isinstance(data, dict) and "runs" in data:
        if not isinstance(data["runs"], list) or not data["runs"]:
            raise FactorbenchError(f"{path}: 'runs' must be a non-empty list of results")
        runs = [_parse_result(r, f"{path} (run {i})") for i, r in enumerate(data["runs"])]
        model = data.get("model", runs[0].model)
        if any(r.model not in ("", model) for r in runs):
            raise FactorbenchError(f"{path}: its runs name different models ({sorted({r.model for r in runs})})")
        _check_runs_file(data, runs, path)
        return runs
    return [_parse_result(data, str(path))]


def _expected_spec_hash(protocol: Protocol) -> str | None:
    """The spec hash of the protocol's dataset (None for outside data, which depends on the local copy)."""
    if protocol.needs_source:
        return None
    from .cache import dataset_spec

    return dataset_spec(protocol.dataset).hash()


def _check_run(run: EvaluationResult, where: Path, protocol: Protocol, spec_hash: str | None) -> None:
    if run.protocol != protocol.name:
        raise FactorbenchError(f"{where} holds a result of protocol {run.protocol}, not {protocol.name}; "
                               "keep each protocol's results in their own folder")
    if run.protocol_hash != protocol.hash():
        raise FactorbenchError(
            f"{where} was made under {run.protocol} hash {run.protocol_hash[:12]}, but the current "
            f"{protocol.name} has hash {protocol.hash()[:12]}: the protocol changed, so this result is stale; "
            "re-run the evaluation for it")
    if run.partial:
        raise FactorbenchError(f"{where} is a partial run (--only); the table needs every metric")
    missing = [m.label for m in protocol.metrics if m.label not in run.metrics and m.label not in run.skipped]
    if missing:
        raise FactorbenchError(f"{where} lacks the metric(s) {', '.join(missing)} of {protocol.name}; re-run it")
    if spec_hash is not None and run.dataset["spec_hash"] != spec_hash:
        raise FactorbenchError(f"{where} was scored on dataset spec {run.dataset['spec_hash'][:12]}, not the "
                               f"protocol's {spec_hash[:12]}; its numbers are for other data: re-run it")


def _check_sweep_provenance(run: EvaluationResult, where: Path, protocol: Protocol) -> str:
    """A result made by a sweep must still match the shipped plan it ran under (entry, settings, seed,
    split) and, where PyTorch is installed, the model config the current code builds for it. Returns how
    far it was checked: "config", "plan" or "none" (a plan not shipped); "config" for results not made by
    a sweep (nothing to check)."""
    if not (run.training or {}).get("sweep"):
        return "config"
    from factorbench.baselines.plan import sweep_run_problem

    problem, checked = sweep_run_problem(run.training, protocol.name, run.model)
    if problem:
        sweep = run.training["sweep"]
        raise FactorbenchError(
            f"{where}: run {sweep.get('job')} is stale: {problem}. Re-run it with `factorbench sweep "
            f"{sweep.get('plan')} --only '{sweep.get('job')}'` and collect it (--collect), or remove the file")
    return checked


def added_models(add: Sequence[str | os.PathLike]) -> tuple[str, ...]:
    """The model names of the result files ``add`` (the user's, ``--add``), as :func:`reference_results` names
    them: each file's model, else its file name without ``.json``."""
    return tuple(dict.fromkeys((_runs_of(Path(p))[0].model or Path(p).stem) for p in add))


def reference_results(protocol: str | Protocol, directory: str | os.PathLike | None = None,
                      add: tuple[str | os.PathLike, ...] | list = ()) -> dict[str, list[EvaluationResult]]:
    """``{model: [runs]}`` of the reference folder of ``protocol`` (or ``directory``) plus the files
    ``add``, every file validated (see the module docstring); one file per model name."""
    return _reference_results(protocol, directory, add)[0]


def superseded_dir(reference_dir: str | os.PathLike) -> Path:
    """Where a collect into ``reference_dir`` keeps the runs it replaces: :data:`SUPERSEDED_DIR` for the
    package's reference folder, else ``<reference_dir>-superseded`` beside it."""
    folder = Path(reference_dir)
    return SUPERSEDED_DIR if folder.resolve() == REFERENCE_DIR.resolve() else folder.with_name(folder.name + "-superseded")


def superseded_results(protocol: str | Protocol, directory: str | os.PathLike | None = None
                       ) -> dict[str, list[EvaluationResult]]:
    """``{model: [runs]}`` of the superseded runs of ``protocol`` (:data:`SUPERSEDED_DIR`, or ``directory``):
    runs of weights that a job's later training replaced in the reference folder, kept because a retired
    protocol's shipped results scored the same weights, so that the record of that earlier scoring still joins
    this protocol's scores of its own weights (:func:`~factorbench.benchmark.experiments.metric_meta_evaluation.
    with_superseded`). Validated as reference files; none where the folder is missing. Never a reference row."""
    protocol = get_protocol(protocol)
    folder = Path(directory) if directory is not None else SUPERSEDED_DIR / protocol.name
    return reference_results(protocol, folder) if folder.is_dir() else {}


def _reference_results(protocol: str | Protocol, directory: str | os.PathLike | None = None,
                       add: tuple[str | os.PathLike, ...] | list = ()) -> tuple[dict[str, list[EvaluationResult]], list[str]]:
    """:func:`reference_results` and a note for each model whose provenance could not be checked in full."""
    protocol = get_protocol(protocol)
    folder = Path(directory) if directory is not None else REFERENCE_DIR / protocol.name
    if directory is not None:
        check_input_dir(folder, "--dir")
    paths = sorted(folder.glob("*.json")) + [Path(p) for p in add]  # no shipped folder: no reference rows
    for p in paths[len(paths) - len(add):]:
        if not p.is_file():
            raise FactorbenchError(f"--add {p}: no such file")
    spec_hash = _expected_spec_hash(protocol)
    out: dict[str, list[EvaluationResult]] = {}
    origin: dict[str, Path] = {}
    unchecked: list[str] = []
    for path in paths:
        runs = _runs_of(path)
        for run in runs:
            _check_run(run, path, protocol, spec_hash)
        model = runs[0].model or path.stem
        checked = {_check_sweep_provenance(run, path, protocol) for run in runs}
        if "none" in checked:
            unchecked.append(f"{model}: its plan {runs[0].training['sweep'].get('plan')!r} is not shipped with "
                             "factorbench, so its settings were not checked")
        elif "plan" in checked:
            unchecked.append(f"{model}: settings checked against its plan, the model config not against the model "
                             "code (install factorbench[train] for that check)")
        if model in out:
            raise FactorbenchError(f"{path} and {origin[model]} both hold results of model {model!r}; give each "
                                   "model its own name (`factorbench evaluate ... --model NAME`, or the file's "
                                   "\"model\" field; several seeds go into one file as {\"model\": ..., "
                                   "\"runs\": [...]})")
        out[model], origin[model] = runs, path
    if protocol.needs_source:
        _check_one_copy(protocol, out, origin)
    return out, unchecked


def _copy_label(run: EvaluationResult) -> str:
    d = run.dataset
    objects = d.get("objects")
    digest = f", source digest {str(d.get('source_digest'))[:12]}" if d.get("source_digest") else ""
    return f"spec {d['spec_hash'][:12]}{digest}" + (f", {objects} objects" if objects is not None else "")


def _check_one_copy(protocol: Protocol, results: Mapping[str, list[EvaluationResult]],
                    origin: Mapping[str, Path]) -> None:
    """The rows of a protocol built from the user's data all come from one copy of it (one dataset spec,
    whose params hold the copy's digest and its object count): rows of two copies are never shown side by
    side, nor averaged within a row."""
    copies: dict[str, list[str]] = {}
    labels: dict[str, str] = {}
    for model, runs in results.items():
        specs = {r.dataset["spec_hash"] for r in runs}
        if len(specs) > 1:
            raise FactorbenchError(f"{origin[model]}: the runs of {model!r} were scored on {len(specs)} different copies "
                                   f"of {protocol.dataset.generator} ({'; '.join(sorted({_copy_label(r) for r in runs}))}); "
                                   "a row averages runs of one copy only")
        spec = specs.pop()
        copies.setdefault(spec, []).append(model)
        labels[spec] = _copy_label(runs[0])
    if len(copies) > 1:
        groups = "\n  ".join(f"{labels[spec]}: {', '.join(models)}" for spec, models in copies.items())
        raise FactorbenchError(f"the results of {protocol.name} come from {len(copies)} different copies of "
                               f"{protocol.dataset.generator}, whose scores cannot be compared:\n  {groups}\n"
                               "Show the rows of one copy at a time (--dir with only those files, or --add only "
                               "results of the copy the reference rows used); `factorbench evaluate ... --source` "
                               "scores the reference encoders (ideal, random, pca) on your copy")


@dataclass(frozen=True)
class ScoresTable:
    """A protocol's score table: ``columns`` (scalar keys, the headline first, then the protocol's
    order), ``directions`` (``"higher"``/``"lower"`` per column) and ``rows`` of (model, number of
    runs, one (mean, sample std or None) per column, whether the images are the reference copy)."""

    protocol: str
    headline: str
    headline_better: str
    columns: tuple[str, ...]
    directions: tuple[str, ...]
    rows: tuple[tuple[str, int, tuple[tuple[float, float | None], ...], bool], ...]
    #: lines printed under the table (what could not be checked, which rows lack seeds)
    notes: tuple[str, ...] = ()
    #: (model, seeds its plan asks for) of the rows made by a sweep that has not finished all of them
    unfinished: tuple[tuple[str, int], ...] = ()
    #: (model, kind) of every row (:mod:`factorbench.benchmark.kinds`)
    kinds: tuple[tuple[str, str], ...] = ()
    #: (model, why) of the rows whose code is no more informative than the random baseline's
    uninformative: tuple[tuple[str, str], ...] = ()
    #: the models of the user's added files (``--add``), marked as theirs on the leaderboard
    added: tuple[str, ...] = ()
    #: (model, training precision) of every trained row (:func:`row_precision`)
    precisions: tuple[tuple[str, str], ...] = ()
    #: (model, column) of the cells whose metric warned that they do not compare with the other rows' (a code
    #: off the scale of Do & Tran's quantisation range); marked ⚠, the warning under the table
    caveats: tuple[tuple[str, str], ...] = ()

    def cell_mark(self, model: str, column: str) -> str:
        """`` ⚠`` for a cell that does not compare with the other rows' (:attr:`caveats`), else ``""``."""
        return " ⚠" if (model, column) in self.caveats else ""

    def kind_cell(self, model: str) -> str:
        """The kind column: ``"unsupervised"``, with `` ⚠`` for a row flagged uninformative."""
        return dict(self.kinds).get(model, "") + (" ⚠" if model in dict(self.uninformative) else "")

    def best(self) -> tuple[str, int, tuple[tuple[float, float | None], ...], bool] | None:
        """The first row (by the headline) that competes: not an oracle or baseline, not uninformative."""
        from .kinds import RANKED_KINDS

        kinds, flagged = dict(self.kinds), dict(self.uninformative)
        return next((r for r in self.rows if kinds.get(r[0]) in RANKED_KINDS and r[0] not in flagged), None)

    def runs_cell(self, model: str, runs: int) -> str:
        """The runs column: ``"2"``, or ``"2 of 3"`` where the row's plan asks for seeds not finished yet."""
        planned = dict(self.unfinished).get(model)
        return str(runs) if planned is None else f"{runs} of {planned}"


def _directions(protocol: Protocol, keys: list[str]) -> list[str]:
    settings = {m.label: (m.metric, dict(m.settings)) for m in protocol.metrics}
    out = []
    for key in keys:
        label, _, name = key.rpartition(".")
        metric, sets = settings.get(label, ("", {}))
        out.append(better_direction(metric, name, sets))
    return out


def scores_table(protocol: str | Protocol, directory: str | os.PathLike | None = None,
                 columns: str | None = None, add: tuple[str | os.PathLike, ...] | list = ()) -> ScoresTable:
    """Every model's mean and sample standard deviation (n - 1; None for one run) of each scalar, sorted
    by the protocol's headline metric (best first). ``columns``: a shell-style pattern selecting the
    scalar columns shown (e.g. ``"independent.*"``); the headline column is always kept, first."""
    protocol = get_protocol(protocol)
    return _table_of(protocol, *_reference_results(protocol, directory, add), columns)


#: fields shown in their definition's order within a metric (others keep theirs, after these)
_FIELD_ORDER = {"disentanglement": 0, "completeness": 1, "informativeness": 2, "minimality": 3, "sufficiency": 4}


def _table_of(protocol: Protocol, results: dict[str, list[EvaluationResult]], unchecked: list[str],
              columns: str | None = None) -> ScoresTable:
    """The score table of validated ``results`` (see :func:`scores_table`)."""
    labels = [m.label for m in protocol.metrics]
    keys: list[str] = []
    for runs in results.values():
        for key in runs[0].scalars():
            if key not in keys:
                keys.append(key)
    # the protocol's metric order, and within a metric its fields in their definition's order (D, C, I)
    keys.sort(key=lambda k: (labels.index(k.rpartition(".")[0]) if k.rpartition(".")[0] in labels else len(labels),
                             _FIELD_ORDER.get(k.rpartition(".")[2], len(_FIELD_ORDER))))
    head = protocol.headline.key
    from .kinds import row_kind, uninformative_rows

    scalars = {model: [r.scalars() for r in runs] for model, runs in results.items()}  # read once per run

    def column(model: str, key: str) -> list[float]:
        return [s.get(key, math.nan) for s in scalars[model]]

    kinds = {model: row_kind(model, runs) for model, runs in results.items()}
    means = {model: [float(np.mean(column(model, k))) for k in keys] for model in results}
    flagged = uninformative_rows(keys, _directions(protocol, keys), means, kinds)
    chosen = [k for k in keys if k != head and (columns is None or fnmatch.fnmatchcase(k, columns))]
    if columns is not None and not chosen and results and not fnmatch.fnmatchcase(head, columns):
        raise FactorbenchError(f"--columns {columns!r} matches none of {protocol.name}'s columns: "
                               f"{', '.join(k for k in keys if k != head)}")
    keys = ([head] if head in keys else []) + chosen
    pin = protocol.reference_images
    rows, unfinished, waiting = [], [], []
    for model, runs in results.items():
        cells = []
        for key in keys:
            values = column(model, key)
            cells.append((float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else None))
        same = not pin or all(r.dataset["sha256"]["images"] == pin for r in runs)
        rows.append((model, len(runs), tuple(cells), same))
        missing = _unfinished_seeds(model, runs)
        if missing is not None:
            unfinished.append((model, len(runs) + len(missing)))
            plan = runs[0].training["sweep"].get("plan")
            waiting.append(f"{model}: {len(runs)} of the {len(runs) + len(missing)} seeds plan {plan} asks for "
                           f"(seed{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} not finished "
                           "yet); its mean and std may still move")
    first = next(iter(results.values()), None)
    if protocol.needs_source and first:
        record = first[0].dataset
        line = f"data: one copy of {protocol.dataset.generator} for every row ({_copy_label(first[0])})"
        objects, expected = record.get("objects"), record.get("objects_expected")
        if objects is not None and expected is not None and objects < expected:
            line += f"; WARNING: {objects} of the {expected} objects {protocol.name} names, not comparable with the " \
                    "published set's scores"
        waiting.insert(0, line)
    if head in keys:
        sign = -1.0 if protocol.headline.better == "higher" else 1.0
        rows.sort(key=lambda r: (math.isnan(r[2][0][0]), sign * r[2][0][0] if not math.isnan(r[2][0][0]) else 0.0))
    precisions = {model: p for model, runs in results.items() if (p := row_precision(runs)) is not None}
    note = _precision_note(precisions)
    if note is not None:
        waiting.append(note)
    flags = [f"⚠ {model}: {why}" for model, why in flagged.items()]
    for model, runs in results.items():  # what the input checks found (code_checks), once per distinct text
        found: dict[str, int] = {}
        for run in runs:
            for text in run.warnings:
                found[text] = found.get(text, 0) + 1
        flags += [f"⚠ {model}: input check ({count} of {len(runs)} run{'s' if len(runs) > 1 else ''}): {text}"
                  for text, count in found.items()]
    incomparable = _incomparable_metrics(results)
    flags += [note for _, _, note in incomparable]
    caveats = tuple((model, key) for model, label, _ in incomparable for key in keys if key.startswith(label + "."))
    return ScoresTable(protocol.name, head, protocol.headline.better, tuple(keys),
                       tuple(_directions(protocol, keys)), tuple(rows), tuple(waiting + flags + unchecked),
                       tuple(unfinished), tuple(kinds.items()), tuple(flagged.items()),
                       precisions=tuple(precisions.items()), caveats=caveats)


def incomparable_metrics(run: EvaluationResult) -> dict[str, str]:
    """Metric label -> the first of its warnings that says its scores do not compare with other rows' (Do &
    Tran's quantised metrics of a code off their range's scale), for the metrics of ``run`` that have one."""
    from .metrics.do_tran import SCALE_WARNING

    out = {}
    for label, entry in run.metrics.items():
        texts = [t for t in (entry.get("result") or {}).get("warnings", ()) if SCALE_WARNING in t]
        if texts:
            out[label] = texts[0]
    return out


def _incomparable_metrics(results: Mapping[str, Sequence[EvaluationResult]]) -> list[tuple[str, str, str]]:
    """(model, metric label, line under the table) for each :func:`incomparable_metrics` warning: one per
    model and metric, with how many of its runs carry it, in the words of the first (the runs' figures may
    differ)."""
    out = []
    for model, runs in results.items():
        found: dict[str, list[str]] = {}
        for run in runs:
            for label, text in incomparable_metrics(run).items():
                found.setdefault(label, []).append(text)
        for label, texts in found.items():
            which = "" if len(set(texts)) == 1 else ", the first's words"
            out.append((model, label, f"⚠ {model}: {label} ({len(texts)} of {len(runs)} "
                                      f"run{'s' if len(runs) > 1 else ''}{which}): {texts[0]}"))
    return out


def row_precision(runs: Sequence[EvaluationResult]) -> str | None:
    """The precision a row's runs were trained in (``training.trained.precision``): ``"bf16"``, ``"fp32"``,
    ``"mixed"`` when its runs differ, ``"not recorded"``; None for a row without training (a reference
    encoder)."""
    trained = [(r.training or {}) for r in runs]
    if not any(trained):
        return None
    found = {str((t.get("trained") or {}).get("precision") or "not recorded") for t in trained if t}
    return found.pop() if len(found) == 1 else "mixed"


def _precision_note(precisions: Mapping[str, str]) -> str | None:
    """A note under a table whose trained rows were trained in more than one precision (None otherwise)."""
    by: dict[str, list[str]] = {}
    for model, precision in precisions.items():
        by.setdefault(precision, []).append(model)
    if len(by) < 2:
        return None
    groups = "; ".join(f"{p}: {', '.join(models)}" for p, models in sorted(by.items()))
    return (f"rows trained in different precisions ({groups}): precision alone moves most scalars by more than "
            "a row's seed spread (REPRODUCTION.md, \"Precision\"), so compare rows of one precision")


def _unfinished_seeds(model: str, runs: list[EvaluationResult]) -> list[int] | None:
    """The seeds that the plan of a sweep-made row asks for and its file lacks (None: complete, or not a
    sweep's row)."""
    training = runs[0].training or {}
    if not training.get("sweep"):
        return None
    from factorbench.baselines.plan import planned_seeds

    planned = planned_seeds(training, model)
    have = {(r.training or {}).get("sweep", {}).get("seed") for r in runs}
    missing = [s for s in planned or () if s not in have]
    return missing or None


_MARK = "*"
_FOOTNOTE = (f"{_MARK} scored on other images than the protocol's reference copy (another renderer or driver); "
             "see benchmark/METRICS.md for how much that moves the scores")


def _header_cell(key: str, better: str, headline: str) -> str:
    arrow = "↑" if better == "higher" else "↓"
    return f"{key} {arrow}" + (" (headline)" if key == headline else "")


def format_table(table: ScoresTable, fmt: str = "md") -> str:
    """The table as Markdown (``md``), CSV (``csv``; one header row, then numbers only: mean and std in
    separate columns, ``planned_runs`` the seeds a row's plan asks for where some are not finished, the
    row's ``kind`` and whether it is ``uninformative``), LaTeX (``latex``; booktabs) or JSON (``json``:
    every column with its direction, every row with its values, kind and notes). ↑: higher is better, ↓: lower is better; ± is the sample standard deviation
    (n - 1) over runs; a row whose plan asks for more seeds than have finished shows "2 of 3" runs."""
    def cell(mean: float, std: float | None, digits: int = 3) -> str:
        if math.isnan(mean):  # a scalar the row's metric did not report (e.g. one that needs a posterior)
            return "n/a"
        return f"{mean:.{digits}f}" if std is None else f"{mean:.{digits}f} ± {std:.{digits}f}"

    def name(row: Any) -> str:
        return row[0] if row[3] else f"{row[0]} {_MARK}"

    marked = any(not row[3] for row in table.rows)
    notes = [f"headline: {table.headline} ({table.headline_better} is better); ↑ higher is better, ↓ lower is "
             "better; ± is the sample standard deviation (n - 1) over runs"] + ([_FOOTNOTE] if marked else []) \
        + list(table.notes)
    heads = [_header_cell(k, d, table.headline) for k, d in zip(table.columns, table.directions)]
    if fmt == "md":
        lines = ["| " + " | ".join(["model", "runs", "kind", *heads]) + " |",
                 "|" + "|".join("---" for _ in range(len(heads) + 3)) + "|"]
        lines += ["| " + " | ".join([name(r), table.runs_cell(r[0], r[1]), table.kind_cell(r[0]),
                                     *(cell(m, s) + table.cell_mark(r[0], k) for k, (m, s) in
                                       zip(table.columns, r[2]))]) + " |" for r in table.rows]
        return "\n".join(lines + [""] + notes)
    if fmt == "json":
        document = {
            "protocol": table.protocol, "headline": {"key": table.headline, "better": table.headline_better},
            "columns": [{"key": k, "better": d} for k, d in zip(table.columns, table.directions)],
            "rows": [{"model": model, "runs": runs, "planned_runs": dict(table.unfinished).get(model),
                      "kind": dict(table.kinds).get(model, ""), "uninformative": dict(table.uninformative).get(model),
                      "precision": dict(table.precisions).get(model),
                      "caveats": [k for k in table.columns if (model, k) in table.caveats],
                      "reference_images": same,
                      "values": {k: {"mean": None if math.isnan(m) else m,
                                     "std": None if s is None or math.isnan(s) else s}
                                 for k, (m, s) in zip(table.columns, cells)}}
                     for model, runs, cells, same in table.rows],
            "notes": notes}
        return json.dumps(document, indent=1, ensure_ascii=False, allow_nan=False)
    if fmt == "csv":  # numbers only below the header (pandas reads them as numbers); directions: --format json
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["model", "runs", "reference_images", "planned_runs", "kind", "uninformative"]
                        + [h + suffix for h in table.columns for suffix in ("", ".std")])
        for model, runs, cells, same in table.rows:
            flat: list[Any] = [model, runs, "yes" if same else "no", dict(table.unfinished).get(model, ""),
                               dict(table.kinds).get(model, ""), "yes" if model in dict(table.uninformative) else "no"]
            for mean, std in cells:
                flat += [f"{mean:.6g}", "" if std is None else f"{std:.6g}"]
            writer.writerow(flat)
        return buf.getvalue()
    if fmt == "latex":
        specials = {"\\": r"\textbackslash{}", "_": r"\_", "#": r"\#", "%": r"\%", "&": r"\&", "$": r"\$",
                    "{": r"\{", "}": r"\}", "^": r"\^{}", "~": r"\~{}"}

        def tex(text: str) -> str:
            return "".join(specials.get(c, c) for c in text)

        # the best mean of each column among the rows that compete (not oracle, baseline or uninformative), bold
        from .kinds import RANKED_KINDS

        kinds, flagged = dict(table.kinds), dict(table.uninformative)
        competing = [r for r in table.rows if kinds.get(r[0]) in RANKED_KINDS and r[0] not in flagged]
        best = []
        for i, (key, better) in enumerate(zip(table.columns, table.directions)):
            means = [r[2][i][0] for r in competing if not math.isnan(r[2][i][0]) and not table.cell_mark(r[0], key)]
            best.append((max(means) if better == "higher" else min(means)) if means else None)

        def tcell(mean: float, std: float | None, i: int, model: str) -> str:
            if math.isnan(mean):
                return "n/a"
            text = f"{mean:.3f}" if std is None else f"{mean:.3f} $\\pm$ {std:.3f}"
            if table.cell_mark(model, table.columns[i]):  # does not compare: never bold
                return text + r"$^{\ddagger}$"
            top = best[i] is not None and round(mean, 3) == round(best[i], 3) and model in {r[0] for r in competing}
            return f"\\textbf{{{text}}}" if top else text

        proto = PROTOCOLS.get(table.protocol)
        names = []
        for key in table.columns:
            group, short, _ = score_column(proto, key)
            names.append(f"{group}: {short}" if group else short)
        arrows = {"higher": r"$\uparrow$", "lower": r"$\downarrow$"}
        lines = [r"% needs \usepackage{booktabs}; bold: the best mean of each column among the rows that compete",
                 r"\begin{tabular}{l r l " + "r " * len(table.columns) + "}", r"\toprule",
                 " & ".join(["model", "runs", "kind",
                             *(f"{tex(n)} {arrows[d]}" for n, d in zip(names, table.directions))])
                 + r" \\", r"\midrule"]
        for row in table.rows:
            lines.append(" & ".join([tex(row[0]) + ("" if row[3] else r"$^{*}$"), table.runs_cell(row[0], row[1]),
                                     tex(table.kind_cell(row[0]).replace(" ⚠", "")) + (r" $^{\dagger}$" if " ⚠"
                                                                                         in table.kind_cell(row[0]) else ""),
                                     *(tcell(m, s, i, row[0]) for i, (m, s) in enumerate(row[2]))]) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}"]
        lines += ["% columns: " + "; ".join(f"{tex(n)} = {tex(k)}" for n, k in zip(names, table.columns))]
        if table.caveats:
            lines += [r"% $^{\ddagger}$: a cell that does not compare with the other rows' (the notes below say why)"]
        lines += ["% " + tex(note).replace("↑", r"$\uparrow$").replace("↓", r"$\downarrow$").replace("±", r"$\pm$")
                  for note in notes]
        return "\n".join(lines)
    raise FactorbenchError(f"unknown table format {fmt!r}; use md, csv, latex or json")
