"""The benchmark scripts under tests/perf are not run by the suite (they time things); this checks, without
running them, that every name they import exists, so that a refactor cannot leave one broken."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

PERF = Path(__file__).resolve().parent / "perf"
SCRIPTS = sorted(PERF.glob("*.py"))


def _top_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def missing_imports(script: Path, folder: Path = PERF) -> list[str]:
    """``module.name`` for every ``from module import name`` of ``script`` whose name does not exist: in a
    sibling script of ``folder`` (read, not run) or in factorbench (imported)."""
    missing = []
    for node in ast.walk(ast.parse(script.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.level or node.module is None:
            continue
        sibling = folder / f"{node.module}.py"
        if sibling.is_file():
            defined = _top_level_names(sibling)
            missing += [f"{node.module}.{a.name}" for a in node.names if a.name not in defined]
        elif node.module.split(".")[0] == "factorbench":
            module = importlib.import_module(node.module)
            is_package = hasattr(module, "__path__")
            missing += [f"{node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)
                        and not (is_package and importlib.util.find_spec(f"{node.module}.{a.name}"))]
    return missing


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_name_a_benchmark_script_imports_exists(script):
    assert missing_imports(script) == []


def test_the_check_finds_a_missing_name(tmp_path):
    """The broken import this test was written for: a script importing a helper its sibling no longer has."""
    (tmp_path / "helper.py").write_text("def cpu_model_name():\n    return ''\n")
    (tmp_path / "bench_x.py").write_text("from helper import cpu_model, cpu_model_name\n"
                                         "from factorbench.benchmark.environment import cpu_model_name, gone\n")
    assert missing_imports(tmp_path / "bench_x.py", tmp_path) == ["helper.cpu_model",
                                                                   "factorbench.benchmark.environment.gone"]
