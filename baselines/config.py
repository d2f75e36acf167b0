"""Model configs: every setting of a training run as a frozen, JSON-round-tripping, hashed dataclass.

A config holds the model name and version, the architecture, the latent size, every loss
hyperparameter written out in full, the optimiser, the batch size, the number of steps and the seed.
Its hash (sha256 of the canonical JSON, name and version included) identifies the trained model, as a
protocol's hash identifies an evaluation. A change to a model's code that changes what it learns bumps
the ``version`` of its config class (never an edit in place that keeps the hash).

Config classes register themselves by name when they are defined (:data:`MODELS`); the model family
that implements a config (network builder, loss, optimiser groups) registers with
:func:`register_family`. This module needs no PyTorch.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.params import parse_params
from factorbench.generators.spec import canonical_json, sha256_text

__all__ = ["ARCHITECTURES", "FIXED_WIDTH_ARCHITECTURES", "MODELS", "OMITTED_AT_DEFAULT", "RECONSTRUCTIONS", "Family",
           "ModelConfig", "config_from_dict", "get_family", "make_config", "register_family"]

#: encoder/decoder pairs (see :mod:`factorbench.baselines.nets`). The first three take their widths from
#: ``channels`` and ``hidden``; the others are Almudevar & Ortega 2025's appendix C networks, with the
#: widths of its tables (see :data:`FIXED_WIDTH_ARCHITECTURES`).
ARCHITECTURES = ("dlib", "burgess", "mlp", "burgess-2018", "chen-mlp", "locatello-sbd", "montero-small",
                 "montero-large")
#: architectures whose layer widths are fixed by their source's tables: ``channels`` and ``hidden`` stay
#: at their defaults (a run that set them would record widths the network does not have)
FIXED_WIDTH_ARCHITECTURES = frozenset({"burgess-2018", "chen-mlp", "locatello-sbd", "montero-small",
                                       "montero-large"})
#: reconstruction likelihoods (see :mod:`factorbench.baselines.terms`)
RECONSTRUCTIONS = ("bernoulli", "gaussian")

#: model name -> config class, filled when a config class with a ``name`` is defined
MODELS: dict[str, type["ModelConfig"]] = {}


#: settings added after runs were published: left out of a config's canonical form (and so its hash) while
#: at their default, so that every earlier run keeps its hash; written out in full once set
OMITTED_AT_DEFAULT = ("weight_decay", "lr_decay_every", "lr_decay_factor")

#: the range rules of ``ModelConfig._require``
_RULES: dict[str, Callable[[float], bool]] = {
    ">= 0": lambda v: v >= 0, ">= 1": lambda v: v >= 1, "positive": lambda v: v > 0, "in [0, 1)": lambda v: 0 <= v < 1}


@dataclass(frozen=True)
class ModelConfig:
    """Settings every model shares. Subclasses add their loss hyperparameters and set ``name``.

    Defaults follow disentanglement_lib (Locatello et al. 2019): Adam lr 1e-4, betas (0.9, 0.999),
    eps 1e-8, batch 64, Bernoulli reconstruction summed over pixels and averaged over the batch.
    """

    name: ClassVar[str] = ""
    version: ClassVar[int] = 1

    architecture: str = "burgess"
    latent_dim: int = 10
    #: convolution widths of the four encoder layers (the decoder mirrors them); mlp: unused
    channels: tuple[int, ...] = (32, 32, 64, 64)
    #: width of the dense layer(s) between the convolutions and the latent heads
    hidden: int = 256
    reconstruction: str = "bernoulli"
    #: standard deviation of the Gaussian likelihood (``reconstruction="gaussian"`` only)
    recon_sigma: float = 0.7071067811865476
    lr: float = 1e-4
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    batch_size: int = 64
    steps: int = 300_000
    seed: int = 0
    #: L2 weight decay of the model's Adam optimiser (PyTorch ``Adam(weight_decay=...)``, added to the
    #: gradient; Almudevar & Ortega 2025, appendix B: 4e-5); 0: none
    weight_decay: float = 0.0
    #: step learning-rate schedule: every optimiser's rate is multiplied by ``lr_decay_factor`` every
    #: ``lr_decay_every`` steps (PyTorch ``StepLR`` counted in steps; Almudevar & Ortega: every 20 epochs,
    #: factor 0.1); 0: constant rate
    lr_decay_every: int = 0
    lr_decay_factor: float = 0.1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            if cls.name in MODELS:
                raise RuntimeError(f"model {cls.name!r} registered twice")
            MODELS[cls.name] = cls

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            kind = hints[f.name]
            if typing.get_origin(kind) is tuple:
                if isinstance(value, list):
                    value = tuple(value)
                    object.__setattr__(self, f.name, value)
                if not isinstance(value, tuple) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                    raise FactorbenchError(f"{self.name}: {f.name} must be a tuple of integers, got {value!r}")
            elif kind is float and isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, f.name, float(value))
            elif not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise FactorbenchError(f"{self.name}: {f.name} must be {kind.__name__}, got {value!r}")
        self._check()

    def _check(self) -> None:
        """Range checks; subclasses extend them (call ``super()._check()``)."""
        if self.architecture not in ARCHITECTURES:
            raise FactorbenchError(f"{self.name}: unknown architecture {self.architecture!r}; choose one of "
                                   f"{', '.join(ARCHITECTURES)}")
        if self.architecture in FIXED_WIDTH_ARCHITECTURES:
            defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig) if f.name in ("channels", "hidden")}
            changed = [k for k, v in defaults.items() if getattr(self, k) != v]
            if changed:
                raise FactorbenchError(f"{self.name}: the {self.architecture} architecture has the fixed widths of its "
                                       f"source's tables; leave {' and '.join(changed)} unset (they apply to dlib, "
                                       "burgess and mlp)")
        if self.reconstruction not in RECONSTRUCTIONS:
            raise FactorbenchError(f"{self.name}: unknown reconstruction {self.reconstruction!r}; choose one of "
                                   f"{', '.join(RECONSTRUCTIONS)}")
        self._require("positive", "latent_dim", "hidden", "batch_size", "steps", "lr", "recon_sigma", "adam_eps")
        self._require(">= 0", "weight_decay", "lr_decay_every")
        self._require("positive", "lr_decay_factor")
        if len(self.channels) != 4 or min(self.channels) < 1:
            raise FactorbenchError(f"{self.name}: channels must be four positive widths, got {self.channels}")
        self._require("in [0, 1)", "adam_beta1", "adam_beta2")
        if self.seed < 0:
            raise FactorbenchError(f"{self.name}: seed must be >= 0, got {self.seed}")

    def _require(self, rule: str, *keys: str, meaning: str = "") -> None:
        """Each named setting must satisfy ``rule`` (a key of ``_RULES``: ``">= 0"``, ``">= 1"``, ``"positive"``,
        ``"in [0, 1)"``) and be finite, else a clear error naming it (``meaning`` says what the setting is)."""
        test = _RULES[rule]
        for key in keys:
            value = getattr(self, key)
            if not (test(value) and math.isfinite(value)):
                raise FactorbenchError(f"{self.name}: {key} must be {rule}" + (f" ({meaning})" if meaning else "")
                                       + f", got {value}")

    def to_dict(self, every_setting: bool = False) -> dict[str, Any]:
        """``{"model", "version", "params"}``: the canonical form (tuples as lists), without the settings of
        :data:`OMITTED_AT_DEFAULT` that are at their default (``every_setting``: with them, for display)."""
        params = {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
                  for f in dataclasses.fields(self)
                  if every_setting or not (f.name in OMITTED_AT_DEFAULT and getattr(self, f.name) == f.default)}
        return {"model": self.name, "version": self.version, "params": params}

    def lr_factor(self, step: int) -> float:
        """The learning-rate multiplier at ``step``: ``lr_decay_factor ** (step // lr_decay_every)`` (1 when
        ``lr_decay_every`` is 0). A function of the step alone, so a resumed run continues exactly."""
        return self.lr_decay_factor ** (step // self.lr_decay_every) if self.lr_decay_every else 1.0

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True) if indent else canonical_json(self.to_dict())

    def hash(self) -> str:
        """sha256 of the canonical JSON: model name, version and every setting."""
        return sha256_text(canonical_json(self.to_dict()))

    def replace(self, **changes: Any) -> "ModelConfig":
        return dataclasses.replace(self, **changes)


def make_config(model: str, overrides: Mapping[str, Any] | None = None) -> ModelConfig:
    """The config of ``model`` with its defaults, overridden by ``overrides`` (typed values or the
    strings of ``--param key=value``, e.g. ``{"beta": "4", "channels": "32,32,64,64"}``)."""
    if model not in MODELS:
        raise FactorbenchError(f"unknown model {model!r}; choose one of {', '.join(sorted(MODELS))}")
    return parse_params(MODELS[model], overrides)


def config_from_dict(data: Mapping[str, Any]) -> ModelConfig:
    """Inverse of :meth:`ModelConfig.to_dict`; refuses a version other than the current one."""
    try:
        model, version, params = data["model"], data["version"], data["params"]
    except (KeyError, TypeError):
        raise FactorbenchError("a model config needs 'model', 'version' and 'params'") from None
    if model not in MODELS:
        raise FactorbenchError(f"unknown model {model!r}; choose one of {', '.join(sorted(MODELS))}")
    cls = MODELS[model]
    if version != cls.version:
        raise FactorbenchError(f"{model} config version {version} was written by another version of factorbench "
                               f"(this one has version {cls.version}); retrain it")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - known)
    if unknown:
        raise FactorbenchError(f"{model} config has unknown settings {unknown}")
    return cls(**params)


@dataclass(frozen=True)
class Family:
    """How a config is trained: ``build(config, image_shape) -> nn.Module``; ``loss(outputs, batch, config,
    step, dataset_size) -> Loss`` (a pure function); ``groups(model, config) -> {group: (params,
    optimiser)}``, one optimiser per loss group. Each step back-propagates every group the loss returns,
    in that order, and steps those groups' optimisers only (a loss may return a subset: alternating
    schedules).

    ``batches`` (optional): ``batches(config, data) -> draw``, called once before training (it checks the
    data and raises a FactorbenchError if the model cannot train on it), ``draw(step)`` a pure function
    of the step giving the step's inputs as a dict of numpy arrays: ``"images"`` uint8 (n, H, W, C) plus
    any labels. The model and the loss then get that dict as ``batch`` (images as floats in [0, 1],
    channels first; every array a tensor on the device). Without it the batch is the image tensor of
    ``TrainingData.batch(step, batch_size, seed)``."""

    build: Callable[..., Any]
    loss: Callable[..., Any]
    groups: Callable[..., Any]
    batches: Callable[..., Any] | None = None


_FAMILIES: dict[str, Family] = {}


def register_family(config_cls: type[ModelConfig], family: Family) -> None:
    """Attach the training code of a model family to its config class."""
    if not config_cls.name or MODELS.get(config_cls.name) is not config_cls:
        raise RuntimeError(f"{config_cls.__name__} is not a registered model config")
    _FAMILIES[config_cls.name] = family


def get_family(config: ModelConfig) -> Family:
    try:
        return _FAMILIES[config.name]
    except KeyError:
        raise FactorbenchError(f"model {config.name!r} has no training code registered") from None
