"""Verify a dataset file: recompute every content hash and compare it with the manifest."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from factorbench.generators import fileformat as ff
from factorbench.generators.errors import FactorbenchError


@dataclass(frozen=True)
class VerifyReport:
    """``ok`` is True when every check passed; ``problems`` says what did not match and where."""

    path: str
    ok: bool
    checked: tuple[str, ...]
    problems: tuple[str, ...] = field(default=())

    def summary(self) -> str:
        head = f"{self.path}: {'OK' if self.ok else 'FAILED'} ({len(self.checked)} items checked)"
        return "\n".join([head, *(f"  - {p}" for p in self.problems)])

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.ok, "checked": list(self.checked), "problems": list(self.problems)}


def _check_structure(f: Any, spec: Any, manifest: dict[str, Any]) -> list[str]:
    problems = []
    n, k = spec.n, len(spec.factors)
    expected = {"images": [n, *spec.image_shape], "factors": [n, k]}
    if any(fa.is_grid for fa in spec.factors):
        expected["factor_classes"] = [n, k]
    for name, shape in expected.items():
        if name not in f:
            problems.append(f"{name}: missing from the file")
        elif list(f[name].shape) != shape:
            problems.append(f"{name}: shape {list(f[name].shape)}, the spec implies {shape}")
    if manifest.get("shapes") != ff.shapes_of(f):
        problems.append(f"shapes {ff.shapes_of(f)} differ from the manifest's {manifest.get('shapes')}")
    if manifest.get("spec_hash") != spec.hash():
        problems.append("spec: its hash differs from the manifest's spec_hash (the spec attribute was edited)")
    for name in f.get("splits", {}):
        idx = f["splits"][name][:]
        if idx.size and (idx.min() < 0 or idx.max() >= n or np.any(np.diff(idx) < 0)):
            problems.append(f"splits/{name}: indices are not sorted and within 0..{n - 1}")
    return problems


def verify(path: str | os.PathLike) -> VerifyReport:
    """Recompute the sha256 of images, factors, factor classes and every split, and check shapes."""
    path = str(path)
    try:
        f = ff.open_h5(path)
    except FactorbenchError as exc:
        return VerifyReport(path, False, (), (str(exc),))
    with f:
        try:
            spec, manifest = ff.read_header(f, path)
        except FactorbenchError as exc:
            return VerifyReport(path, False, (), (str(exc),))
        problems = _check_structure(f, spec, manifest)
        expected = manifest.get("sha256", {})
        checked = []
        for name in sorted(set(expected) | {"images", "factors"}):
            checked.append(name)
            if name not in f:
                problems.append(f"{name}: listed in the manifest but missing from the file")
                continue
            try:
                actual = ff.sha256_rows(f[name])
            except ff.UnreadableData as exc:
                problems.append(str(exc))
                continue
            if name not in expected:
                problems.append(f"{name}: present in the file but not in the manifest")
            elif actual != expected[name]:
                problems.append(f"{name}: sha256 {actual[:16]}... does not match the manifest's "
                                f"{expected[name][:16]}... (the data changed since it was written)")
        for name in (f"splits/{s}" for s in f.get("splits", {})):
            if name not in expected:
                problems.append(f"{name}: present in the file but not in the manifest")
    return VerifyReport(path, not problems, tuple(checked), tuple(problems))
