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


def test_readme_first_command_works_when_repeated(tmp_path, monkeypatch, capsys):
    """Its factorbench commands, run twice in the same folder, succeed both times."""
    import shlex

    from factorbench.benchmark.cli import main

    first = _readme_commands()[0]
    commands = [shlex.split(part)[1:] for part in first.split("&&") if shlex.split(part)[0] == "factorbench"]
    assert [c[0] for c in commands] == ["generate", "verify", "evaluate"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FACTORBENCH_DATA", str(tmp_path / "cache"))
    for _ in range(2):
        for argv in commands:
            assert main([*argv, "--quiet"] if argv[0] != "verify" else argv) == 0, (argv, capsys.readouterr().err)
    assert (tmp_path / "square-lsbd-v1.pca.json").is_file() and any((tmp_path / "plots").glob("*.png"))


def test_readme_cites_the_current_hashes():
    """The citation example in the README names the hashes of today's protocol and reference plan."""
    from factorbench.baselines.plan import load_plan
    from factorbench.benchmark.protocols import PROTOCOLS

    text = (ROOT / "README.md").read_text()
    cited = re.search(r"`square-lsbd-v1` \(protocol\s+`(\w+)`\).*?plan `reference-v1` \(`(\w+)`\)", text, re.S)
    assert cited, "the README's 'Citing a number' example is missing"
    assert PROTOCOLS["square-lsbd-v1"].hash().startswith(cited.group(1))
    assert load_plan("reference-v1").hash().startswith(cited.group(2)), \
        f"the README cites plan hash {cited.group(2)}; the plan's is {load_plan('reference-v1').hash()[:12]}"


#: the rows of the README's LSBD-VAE table -> the reference entry they quote
README_LSBD_ROWS = {"LSBD-VAE, L = 1024": "lsbd-vae-1024", "LSBD-VAE, L = 0": "lsbd-vae-0", "VAE, same budget": "vae"}


def test_readme_lsbd_table_quotes_the_reference_files():
    """Every cell of the README's D_LSBD table equals the shipped reference rows at the digits shown (the
    sum over the two subgroups, twice `d_lsbd.score`): mean ± std over all seeds, or the single finished
    seed while the others are training; the seed count in the row's label is the file's."""
    import numpy as np

    from factorbench.benchmark.results import reference_results

    text = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| (LSBD-VAE, L = \d+|VAE, same budget)([^|]*)\|([^|]+)\|([^|]+)\|", text, re.M)
    assert {r[0] for r in rows} == set(README_LSBD_ROWS), "the README's LSBD-VAE table is missing rows"
    for label, rest, *cells in rows:
        seeds = re.search(r"\d+ seeds", rest)
        for dataset, cell in zip(("square", "arrow"), cells):
            runs = reference_results(f"{dataset}-lsbd-v1")[README_LSBD_ROWS[label]]
            values = [2 * r.scalars()["d_lsbd.score"] for r in runs]
            digits = len(re.findall(r"\d+\.(\d+)", cell)[0])
            mean, *std = (float(x) for x in re.findall(r"\d+\.\d+", cell))
            where = f"README LSBD table, {label} on {dataset}: {cell.strip()}"
            if std:
                assert seeds and seeds.group() == f"{len(runs)} seeds", f"{where}: the file has {len(runs)} seeds"
                assert mean == round(float(np.mean(values)), digits), f"{where}; the files give {np.mean(values):.{digits}f}"
                assert std[0] == round(float(np.std(values, ddof=1)), digits), where
            else:
                assert len(runs) == 1, f"{where}: {len(runs)} seeds have finished; quote their mean ± std"
                assert mean == round(values[0], digits), f"{where}; the file gives {values[0]:.{digits}f}"


def test_readme_meta_evaluation_example_runs(capsys):
    """The README's Python example of the meta-evaluation and its claims runs as written, and prints one line
    per claim."""
    from factorbench.benchmark.experiments.meta_evaluation_claims import CLAIMS

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    example = next(block for block in blocks if "check_meta_claims" in block)
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in printed] == [claim.key for claim in CLAIMS]
    assert all(line.split()[2] in ("reproduced", "not") for line in printed)
