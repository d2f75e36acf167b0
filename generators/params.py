"""Typed generator parameters: frozen dataclasses, parsed from ``k=v`` strings with clear errors."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Mapping

from .errors import FactorbenchError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _convert(name: str, kind: Any, raw: Any) -> Any:
    if typing.get_origin(kind) is tuple:  # tuple[float, ...]: "a,b,c", "(a, b, c)" (as `info` prints it) or a sequence
        (item, *_) = typing.get_args(kind)
        if isinstance(raw, str):
            text = raw.strip()
            if len(text) >= 2 and (text[0], text[-1]) in (("(", ")"), ("[", "]")):
                text = text[1:-1]
            items = text.split(",")
        else:
            items = raw
        if not isinstance(items, (list, tuple)):
            raise FactorbenchError(f"parameter {name!r} expects comma-separated {item.__name__} values, got {raw!r}")
        return tuple(_convert(name, item, v.strip() if isinstance(v, str) else v) for v in items)
    if not isinstance(raw, str):
        if kind is float and isinstance(raw, int) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, kind) and not (kind is int and isinstance(raw, bool)):
            return raw
        raise FactorbenchError(f"parameter {name!r} expects {kind.__name__}, got {raw!r} ({type(raw).__name__})")
    text = raw.strip()
    try:
        if kind is bool:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError(text)
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
        if kind is str:
            return text
    except ValueError:
        raise FactorbenchError(f"parameter {name!r} expects {kind.__name__}, got {raw!r}") from None
    raise FactorbenchError(f"parameter {name!r} has unsupported type {kind!r}")


def parse_params(params_cls: type, overrides: Mapping[str, Any] | None) -> Any:
    """Build ``params_cls`` (a frozen dataclass) from defaults plus ``overrides`` (strings or typed values)."""
    hints = typing.get_type_hints(params_cls)
    fields = {f.name: f for f in dataclasses.fields(params_cls)}
    values = {}
    for key, raw in (overrides or {}).items():
        if key not in fields:
            known = ", ".join(sorted(fields)) or "(none)"
            raise FactorbenchError(f"unknown parameter {key!r}; valid parameters are: {known}")
        values[key] = _convert(key, hints[key], raw)
    return params_cls(**values)


def parse_param_assignments(items: list[str] | None, flag: str = "--param") -> dict[str, str]:
    """Turn ``["side=8", "seed=2"]`` into a dict, rejecting items without ``=`` and repeated keys (the
    messages name ``flag``)."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise FactorbenchError(f"{flag} expects key=value, got {item!r}")
        if key in out:
            raise FactorbenchError(f"{flag} {key} given twice")
        out[key] = value
    return out


def params_to_dict(params: Any) -> dict[str, Any]:
    return dataclasses.asdict(params)
