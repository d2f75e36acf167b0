"""Sweep plans: which models, with which settings, on which datasets, seeds and budget, evaluated under
which protocols. A plan is data (a TOML file), checked in full before any work, and pinned by its hash.

A plan file::

    name = "reference-v1"
    description = "..."

    [budget]
    steps = 5000                 # training steps of every entry (an entry may set its own ``steps``)

    [datasets.square]            # one trained model serves every protocol of its dataset
    split = "all"                # the split the models are trained on
    protocols = ["square-lsbd-v1", "square-dependent-v1"]
    # retired = ["..."]          # protocols it was scored under before: their results stay valid, none run

    [[models]]
    model = "beta-vae"           # a registered model (``factorbench train list``)
    name = "beta-vae"            # the row name in the score tables (default: the model); unique per dataset
    datasets = ["square", "arrow"]
    seeds = [0, 1, 2]
    params = { beta = 5.0, latent_dim = 4 }

:func:`expand` turns a plan into jobs, one per (entry, dataset, seed), in file order: entries, then their
datasets, then their seeds. Appending an entry appends jobs and renumbers none; a job is identified by its
id ``name/dataset/seedK`` and by the hash of its training run (model config + data), never by position.
Checking a plan builds each entry's model config, so it needs the model families (PyTorch).
"""

from __future__ import annotations

import dataclasses
import functools
import fnmatch
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.spec import canonical_json, sha256_text

from .config import MODELS, OMITTED_AT_DEFAULT, ModelConfig, make_config

#: the defaults of the settings a recorded config leaves out when they are at their default
_OMITTED_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ModelConfig) if f.name in OMITTED_AT_DEFAULT}

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["PLANS_DIR", "DatasetPlan", "Job", "Plan", "PlanEntry", "expand", "find_plan", "load_plan", "parse_plan",
           "planned_seeds", "select", "sweep_run_problem"]

#: the plans shipped with the package (``factorbench sweep NAME`` finds them by name)
PLANS_DIR = Path(__file__).with_name("plans")
#: settings a plan states outside ``params`` (so an entry cannot set them twice)
_RESERVED = ("steps", "seed")


@dataclass(frozen=True)
class DatasetPlan:
    """A dataset of the plan: the split models train on and the protocols every trained model is
    evaluated under (all on this dataset)."""

    name: str
    protocols: tuple[str, ...]
    split: str = "train"
    #: protocols the dataset's models were scored under before the plan moved to newer ones: their results
    #: stay valid, and nothing is run for them
    retired: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        # "retired" only where set, so that the plans without it keep their hashes
        return {"protocols": list(self.protocols), "split": self.split,
                **({"retired": list(self.retired)} if self.retired else {})}


@dataclass(frozen=True)
class PlanEntry:
    """One model with its settings, trained on each of ``datasets`` with each of ``seeds``."""

    model: str
    name: str
    params: Mapping[str, Any]
    datasets: tuple[str, ...]
    seeds: tuple[int, ...]
    steps: int

    def config(self, seed: int) -> ModelConfig:
        """The model config of this entry for ``seed`` (budget and seed included)."""
        return make_config(self.model, {**self.params, "steps": self.steps, "seed": seed})

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "name": self.name, "params": dict(self.params), "datasets": list(self.datasets),
                "seeds": list(self.seeds), "steps": self.steps}


@dataclass(frozen=True)
class Plan:
    name: str
    description: str
    datasets: Mapping[str, DatasetPlan]
    entries: tuple[PlanEntry, ...]
    #: where the plan was read from (not part of its hash, nor of equality)
    source: str = dataclasses.field(default="", compare=False)
    #: the precision every job trains in (``precision = "fp32"``), part of the plan; None: the sweep's
    #: ``--precision`` (default auto) decides
    precision: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The canonical content: everything that decides what is trained and evaluated."""
        return {"name": self.name, "description": self.description,
                **({"precision": self.precision} if self.precision else {}),
                "datasets": {k: v.to_dict() for k, v in sorted(self.datasets.items())},
                "entries": [e.to_dict() for e in self.entries]}

    def to_table(self) -> dict[str, Any]:
        """The plan as the table a TOML file parses to, every setting explicit: ``parse_plan(p.to_table()) == p``."""
        return {"name": self.name, "description": self.description,
                **({"precision": self.precision} if self.precision else {}),
                "datasets": {k: v.to_dict() for k, v in self.datasets.items()},
                "models": [e.to_dict() for e in self.entries]}

    def hash(self) -> str:
        """sha256 of the canonical JSON of :meth:`to_dict` (comments and layout of the file do not count)."""
        return sha256_text(canonical_json(self.to_dict()))


@dataclass(frozen=True)
class Job:
    """One training run of the plan and its evaluations: ``index`` is the position in :func:`expand`."""

    index: int
    entry: PlanEntry
    dataset: DatasetPlan
    seed: int

    @property
    def id(self) -> str:
        return f"{self.entry.name}/{self.dataset.name}/seed{self.seed}"

    @property
    def config(self) -> ModelConfig:
        return self.entry.config(self.seed)

    @property
    def protocols(self) -> tuple[str, ...]:
        return self.dataset.protocols


def _error(source: str, where: str, what: str) -> FactorbenchError:
    return FactorbenchError(f"{source}: {where}: {what}")


def _expect(source: str, where: str, value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _error(source, where, f"expected {what}, got {value!r}")
    return value


def _int_list(source: str, where: str, value: Any) -> tuple[int, ...]:
    items = _expect(source, where, value, list, "a list of integers")
    if not items or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in items):
        raise _error(source, where, f"expected a non-empty list of integers >= 0, got {value!r}")
    if len(set(items)) != len(items):
        raise _error(source, where, f"repeated values in {value!r}")
    return tuple(items)


def _str_list(source: str, where: str, value: Any) -> tuple[str, ...]:
    items = _expect(source, where, value, list, "a list of names")
    if not items or not all(isinstance(v, str) and v for v in items):
        raise _error(source, where, f"expected a non-empty list of names, got {value!r}")
    if len(set(items)) != len(items):
        raise _error(source, where, f"repeated names in {value!r}")
    return tuple(items)


def _unknown_keys(source: str, where: str, table: Mapping[str, Any], known: Sequence[str]) -> None:
    extra = sorted(set(table) - set(known))
    if extra:
        raise _error(source, where, f"unknown key{'s' if len(extra) > 1 else ''} {', '.join(extra)}; "
                     f"the keys here are {', '.join(known)}")


def _dataset(source: str, name: str, table: Any) -> DatasetPlan:
    from factorbench.benchmark.protocols import PROTOCOLS

    where = f"[datasets.{name}]"
    _expect(source, where, table, dict, "a table")
    _unknown_keys(source, where, table, ("protocols", "split", "retired"))
    if "protocols" not in table:
        raise _error(source, where, "needs protocols = [...] (see `factorbench protocols`)")
    protocols = _str_list(source, f"{where} protocols", table["protocols"])
    retired = _str_list(source, f"{where} retired", table["retired"]) if "retired" in table else ()
    for p in retired:
        if p not in PROTOCOLS:
            raise _error(source, f"{where} retired", f"unknown protocol {p!r}; see `factorbench protocols`")
        if PROTOCOLS[p].dataset.generator != name:
            raise _error(source, f"{where} retired", f"{p} runs on the {PROTOCOLS[p].dataset.generator} dataset, "
                         f"not on {name}")
        if p in protocols:
            raise _error(source, f"{where} retired", f"{p} is also in protocols; a protocol is run or retired")
    specs = set()
    for p in protocols:
        if p not in PROTOCOLS:
            raise _error(source, f"{where} protocols", f"unknown protocol {p!r}; see `factorbench protocols`")
        ref = PROTOCOLS[p].dataset
        if ref.generator != name:
            raise _error(source, f"{where} protocols", f"{p} runs on the {ref.generator} dataset, not on {name}")
        specs.add(canonical_json({"params": dict(ref.params), "seed": ref.seed, "n": ref.n}))
    if len(specs) > 1:
        raise _error(source, f"{where} protocols", "these protocols use different versions of the dataset; one trained "
                     "model cannot serve them all: give them separate dataset entries")
    split = _expect(source, f"{where} split", table.get("split", "train"), str, "a split name")
    # the splits of a dataset made from the user's copy are known once it is given (checked when the job starts)
    local = any(PROTOCOLS[p].dataset.needs_source for p in protocols)
    available = set() if local else set().union(*(_split_names(PROTOCOLS[p].dataset) for p in protocols))
    if split != "all" and not local and split not in available:
        raise _error(source, f"{where} split", f"{name} has no split {split!r}; its splits are "
                     f"{', '.join(sorted(available))} (or 'all')")
    return DatasetPlan(name, protocols, split, tuple(retired))


def _split_names(ref: Any) -> set[str]:
    """The splits the protocols' file of ``ref`` holds: the generator's own and the reference's presets."""
    from factorbench.benchmark.cache import _extra_splits, dataset_spec
    from factorbench.generators.splits import split_from_dict

    spec = dataset_spec(ref)
    splits = [split_from_dict(s) for s in spec.splits] + _extra_splits(ref, spec)
    return {name for split in splits for name in split.names}


def _entry(source: str, i: int, table: Any, datasets: Mapping[str, DatasetPlan], budget: int | None,
           default_seeds: tuple[int, ...] | None) -> PlanEntry:
    where = f"[[models]] #{i + 1}"
    _expect(source, where, table, dict, "a table")
    _unknown_keys(source, where, table, ("model", "name", "datasets", "seeds", "steps", "params"))
    model = _expect(source, f"{where} model", table.get("model"), str, "a model name")
    where = f"[[models]] #{i + 1} ({model})"
    if model not in MODELS:
        raise _error(source, f"{where} model", f"unknown model {model!r}; choose one of {', '.join(sorted(MODELS))}")
    name = _expect(source, f"{where} name", table.get("name", model), str, "a name")
    if not name or any(c in name for c in "/\\ *?[]") or name.startswith("."):
        raise _error(source, f"{where} name", f"{name!r} cannot name files: use letters, digits, '-', '_' and '.'")
    if "datasets" not in table:
        raise _error(source, where, "needs datasets = [...]")
    names = _str_list(source, f"{where} datasets", table["datasets"])
    for d in names:
        if d not in datasets:
            raise _error(source, f"{where} datasets", f"dataset {d!r} has no [datasets.{d}] table (the plan has "
                         f"{', '.join(sorted(datasets)) or 'none'})")
    if "seeds" in table:
        seeds = _int_list(source, f"{where} seeds", table["seeds"])
    elif default_seeds is not None:
        seeds = default_seeds
    else:
        raise _error(source, where, "needs seeds = [...] (or a plan-wide [budget] seeds)")
    steps = table.get("steps", budget)
    if steps is None:
        raise _error(source, where, "needs steps (or a plan-wide [budget] steps)")
    steps = _expect(source, f"{where} steps", steps, int, "a positive integer")
    if steps < 1:
        raise _error(source, f"{where} steps", f"must be positive, got {steps}")
    params = _expect(source, f"{where} params", table.get("params", {}), dict, "a table of model settings")
    for key in _RESERVED:
        if key in params:
            where_set = "steps" if key == "steps" else "seeds"
            raise _error(source, f"{where} params", f"{key} is set by the plan ({where_set} of the entry or of "
                         "[budget]), not in params")
    entry = PlanEntry(model, name, dict(sorted(params.items())), names, seeds, steps)
    try:
        typed = entry.config(seeds[0]).to_dict(every_setting=True)["params"]
    except FactorbenchError as exc:
        raise _error(source, f"{where} params", str(exc)) from None
    # the settings as the config holds them (beta = 5 and beta = 5.0 are one plan, one hash)
    return dataclasses.replace(entry, params={k: typed[k] for k in entry.params})


def parse_plan(data: Mapping[str, Any], source: str = "<plan>") -> Plan:
    """A plan from the parsed TOML table, every key checked (errors name ``source`` and the key)."""
    from . import models  # noqa: F401  (fills MODELS)

    _unknown_keys(source, "top level", data, ("name", "description", "precision", "budget", "datasets", "models"))
    name = _expect(source, "name", data.get("name"), str, "the plan's name")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):  # it names the sweep's folder
        raise _error(source, "name", f"{name!r} cannot name a sweep folder: start with a letter or digit, then use "
                     "letters, digits, '-', '_' and '.'")
    description = _expect(source, "description", data.get("description", ""), str, "a text")
    precision = data.get("precision")
    if precision is not None and precision not in ("bf16", "fp16", "fp32"):
        raise _error(source, "precision", f"{precision!r}: choose bf16, fp16 or fp32 (or leave it out: the sweep's "
                     "--precision decides)")
    budget = _expect(source, "[budget]", data.get("budget", {}), dict, "a table")
    _unknown_keys(source, "[budget]", budget, ("steps", "seeds"))
    steps = budget.get("steps")
    if steps is not None:
        _expect(source, "[budget] steps", steps, int, "a positive integer")
    seeds = _int_list(source, "[budget] seeds", budget["seeds"]) if "seeds" in budget else None
    tables = _expect(source, "[datasets]", data.get("datasets", {}), dict, "tables [datasets.NAME]")
    if not tables:
        raise _error(source, "[datasets]", "the plan has no datasets; add a [datasets.NAME] table")
    datasets = {k: _dataset(source, k, v) for k, v in tables.items()}
    rows = _expect(source, "[[models]]", data.get("models", []), list, "an array of tables [[models]]")
    if not rows:
        raise _error(source, "[[models]]", "the plan has no models; add a [[models]] table")
    entries = tuple(_entry(source, i, row, datasets, steps, seeds) for i, row in enumerate(rows))
    seen: dict[tuple[str, str], int] = {}
    for i, entry in enumerate(entries):
        for d in entry.datasets:
            if (entry.name, d) in seen:
                raise _error(source, f"[[models]] #{i + 1} ({entry.model})",
                             f"{entry.name!r} on {d} is already entry #{seen[entry.name, d] + 1}; give one of them "
                             "another name = ...")
            seen[entry.name, d] = i
    unused = sorted(set(datasets) - {d for e in entries for d in e.datasets})
    if unused:
        raise _error(source, f"[datasets.{unused[0]}]", "no model is trained on it; remove it or add it to an entry")
    return Plan(name, description, datasets, entries, source, precision)


def find_plan(plan: str | os.PathLike) -> Path:
    """A plan file: ``plan`` itself, or the shipped plan of that name (``reference-v1``)."""
    path = Path(plan)
    if path.is_file():
        return path
    shipped = PLANS_DIR / f"{plan}.toml"
    if shipped.is_file() and os.sep not in str(plan):
        return shipped
    names = sorted(p.stem for p in PLANS_DIR.glob("*.toml"))
    raise FactorbenchError(f"plan {str(plan)!r} is neither a file nor a shipped plan; give a .toml file or one of "
                           f"{', '.join(names) or '(none shipped)'}")


def load_plan(plan: str | os.PathLike) -> Plan:
    """Read and check a plan file (or a shipped plan by name)."""
    path = find_plan(plan)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise FactorbenchError(f"cannot read plan {path} ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise FactorbenchError(f"{path} is not valid TOML ({exc})") from None
    return parse_plan(data, str(path))


def expand(plan: Plan) -> list[Job]:
    """Every job of the plan in a stable order: entries as listed, then their datasets, then their seeds."""
    jobs = []
    for entry in plan.entries:
        for d in entry.datasets:
            for seed in entry.seeds:
                jobs.append(Job(len(jobs), entry, plan.datasets[d], seed))
    return jobs


def _matches(job: Job, pattern: str) -> bool:
    """A job id pattern (``vae/square/*``), a job index (``7``) or an index range (``0-8``, both included)."""
    numbers = re.fullmatch(r"(\d+)(?:-(\d+))?", pattern)
    if numbers:
        low = int(numbers.group(1))
        return low <= job.index <= int(numbers.group(2) or low)
    return fnmatch.fnmatchcase(job.id, pattern)


def select(jobs: Sequence[Job], only: str | None) -> list[Job]:
    """The jobs that ``only`` names, in the order it names them: comma-separated shell patterns over job ids
    (``'vae/square/*,*/teapot/*'``), job indices (``7``) or index ranges (``0-8``), each pattern's jobs in plan
    order and a job matched twice taken at its first pattern, so that ``'*/dsprites/*,*'`` runs every dSprites
    job before the rest; None selects all, in plan order. A pattern that matches nothing is an error (a typo
    would otherwise run nothing)."""
    if only is None:
        return list(jobs)
    patterns = [p.strip() for p in only.split(",") if p.strip()]
    if not patterns:
        raise FactorbenchError("--only needs a pattern such as 'vae/square/*'")
    chosen: dict[str, Job] = {}  # a job matched again keeps the place of its first match
    for p in patterns:
        matched = [j for j in jobs if _matches(j, p)]
        if not matched:
            ids = ", ".join(j.id for j in jobs[:4]) + (", ..." if len(jobs) > 4 else "")
            raise FactorbenchError(f"--only {p!r} matches no job; job ids look like {ids} (name/dataset/seedK), "
                                   f"indices run from 0 to {len(jobs) - 1}")
        chosen.update((j.id, j) for j in matched)
    return list(chosen.values())


def replace_entries(plan: Plan, entries: Sequence[PlanEntry]) -> Plan:
    """``plan`` with other entries (tests and tools that derive plans)."""
    return dataclasses.replace(plan, entries=tuple(entries))


# ------------------------------------------------------------------------------ provenance of a result

def _plain(value: Any) -> Any:
    """Lists and tuples alike, ints and floats alike (5 == 5.0), for comparing settings."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return float(value)


def _raw_plan(name: str) -> dict[str, Any] | None:
    """The shipped plan ``name`` as its TOML table (no model code needed), or None if none is shipped.
    Parsed once per content (a table checks every run against it); callers must not modify it."""
    path = PLANS_DIR / f"{name}.toml"
    if not name or os.sep in name or not path.is_file():
        return None
    try:
        return _parse_toml(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise FactorbenchError(f"cannot read the shipped plan {path} ({exc})") from None


@functools.lru_cache(maxsize=16)
def _parse_toml(text: str) -> dict[str, Any]:
    return tomllib.loads(text)


def _models_available() -> bool:
    try:
        from . import models  # noqa: F401  (PyTorch, the ``train`` extra)
    except ImportError:
        return False
    return True


def _raw_entry(raw: Mapping[str, Any], model: str, dataset: str) -> dict[str, Any] | None:
    """The entry of a raw plan that makes the rows named ``model`` on ``dataset`` (None if it has none)."""
    entries = [e for e in raw.get("models", []) if isinstance(e, dict) and e.get("name", e.get("model")) == model
               and dataset in e.get("datasets", [])]
    return entries[0] if entries else None


def planned_seeds(training: Mapping[str, Any], model: str) -> tuple[int, ...] | None:
    """The seeds that the shipped plan named in a sweep result's ``training`` record asks of the entry
    ``model`` on the run's dataset (None for a result not made by a sweep, or a plan or entry not shipped):
    what a score table compares its finished seeds with."""
    sweep = training.get("sweep") or {}
    raw = _raw_plan(str(sweep.get("plan") or ""))
    entry = _raw_entry(raw, model, str(sweep.get("dataset"))) if raw is not None else None
    if entry is None:
        return None
    return tuple(entry.get("seeds", raw.get("budget", {}).get("seeds", [])))


def sweep_run_problem(training: Mapping[str, Any], protocol: str, model: str) -> tuple[str, str]:
    """Why the ``training`` record of a result made by a sweep no longer matches the shipped plan it ran
    under ('' when it matches), and how far it was checked: ``"config"`` (plan and model code), ``"plan"``
    (the plan's settings only: PyTorch is not installed) or ``"none"`` (the plan is not shipped).

    Checks, without PyTorch: the plan is shipped and still has the entry ``model`` on the run's dataset,
    seed and split, the protocol is one of the dataset's, and every setting the entry states (params,
    steps, seed) equals the run's config. With the ``train`` extra also the config hash: the entry's config
    as the current code builds it (model version and every default) must hash to the run's, so a model
    whose code changed what it learns (a version bump) makes its old results stale."""
    sweep = training.get("sweep") or {}
    name, dataset, seed = sweep.get("plan"), sweep.get("dataset"), sweep.get("seed")
    config = training.get("config") or {}
    raw = _raw_plan(str(name or ""))
    if raw is None:
        return "", "none"
    entry = _raw_entry(raw, model, dataset)
    if entry is None:
        return f"plan {name} no longer has the entry {model!r} on {dataset}", "plan"
    budget = raw.get("budget", {})
    dataset_table = raw.get("datasets", {}).get(dataset, {})
    seeds = entry.get("seeds", budget.get("seeds", []))
    stated = {**entry.get("params", {}), "steps": entry.get("steps", budget.get("steps"))}
    # a config records the settings of OMITTED_AT_DEFAULT only where they differ from their defaults
    have = {**_OMITTED_DEFAULTS, **config.get("params", {})}
    changed = sorted(k for k, v in stated.items() if _plain(have.get(k)) != _plain(v))
    if entry.get("model") != config.get("model"):
        return f"plan {name} entry {model!r} now trains {entry.get('model')!r}, not {config.get('model')!r}", "plan"
    if changed:
        return (f"plan {name} entry {model!r} now sets " + ", ".join(f"{k} = {stated[k]!r} (the run: "
                f"{have.get(k)!r})" for k in changed)), "plan"
    if seed not in seeds or have.get("seed") != seed:
        return f"plan {name} entry {model!r} no longer has seed {seed}", "plan"
    if protocol not in dataset_table.get("protocols", []) + dataset_table.get("retired", []):
        return f"plan {name} no longer evaluates {dataset} under {protocol}", "plan"
    if (training.get("training_data") or {}).get("split") != dataset_table.get("split", "train"):
        return f"plan {name} now trains on the {dataset_table.get('split', 'train')!r} split of {dataset}", "plan"
    if not _models_available():
        return "", "plan"
    try:
        job_config = make_config(entry["model"], {**entry.get("params", {}), "steps": stated["steps"], "seed": seed})
    except FactorbenchError as exc:
        return f"plan {name} entry {model!r} no longer builds ({exc})", "config"
    if job_config.hash() != training.get("config_hash"):
        return (f"its model config hash {str(training.get('config_hash'))[:12]} differs from the "
                f"{job_config.hash()[:12]} that plan {name} entry {model!r} gives with this version's "
                f"{entry['model']} (config version {job_config.version}, the run's {config.get('version')})"), "config"
    return "", "config"
