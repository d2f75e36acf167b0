"""The README's two commands stay true: CI runs the same test command, and the CLI knows what they use."""

import re
from pathlib import Path

from factorbench.benchmark.cli import COMMANDS
from factorbench.generators import list_datasets

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_ci_runs_exactly_the_readme_test_command():
    install_and_run, test = _readme_commands()
    assert "pytest" in test
    assert test in (ROOT / ".ci" / "run").read_text().splitlines()


def test_readme_first_command_uses_known_commands_and_datasets():
    first = _readme_commands()[0]
    used = re.findall(r"factorbench (\w+)", first)
    assert used and set(used) <= set(COMMANDS)
    assert re.search(r"generate (\w+)", first).group(1) in list_datasets()
    from factorbench.benchmark.protocols import PROTOCOLS

    assert re.search(r"evaluate (\S+)", first).group(1) in PROTOCOLS


def test_every_dataset_has_a_card():
    cards = set(re.findall(r"^## (\S+)", (ROOT / "DATASETS.md").read_text(), re.M))
    assert set(list_datasets()) <= cards
