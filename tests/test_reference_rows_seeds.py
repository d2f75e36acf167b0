"""``python -m factorbench.baselines.reference --seeds``: one file with a run per seed of a seeded encoder."""

import json

import pytest

from factorbench.baselines.reference import main
from factorbench.benchmark.results import reference_results, scores_table


@pytest.fixture
def square(monkeypatch, generated):
    monkeypatch.setattr("factorbench.benchmark.evaluation.prepare_dataset", lambda *a, **k: generated("square"))


def test_seeded_reference_encoder_writes_one_file_with_a_run_per_seed(square, tmp_path, capsys):
    assert main(["--protocol", "square-lsbd-v1", "--encoder", "random", "--seeds", "0", "1", "--out",
                 str(tmp_path)]) == 0
    path = tmp_path / "square-lsbd-v1" / "random.json"
    data = json.loads(path.read_text())
    assert data["model"] == "random" and len(data["runs"]) == 2
    assert ["(seed 0)" in data["runs"][0]["encoder"], "(seed 1)" in data["runs"][1]["encoder"]] == [True, True]
    runs = reference_results("square-lsbd-v1", tmp_path / "square-lsbd-v1")["random"]
    first, second = (r.scalars()["d_lsbd.score"] for r in runs)
    assert first != second  # two projections, two scores
    (row,) = scores_table("square-lsbd-v1", tmp_path / "square-lsbd-v1").rows
    (mean, std), n = row[2][0], row[1]
    assert n == 2 and mean == pytest.approx((first + second) / 2)
    assert std == pytest.approx(abs(first - second) / 2 ** 0.5)
    # an existing file is kept without --force
    before = path.read_text()
    assert main(["--protocol", "square-lsbd-v1", "--encoder", "random", "--seeds", "2", "3", "--out",
                 str(tmp_path)]) == 0
    assert path.read_text() == before and "exists" in capsys.readouterr().out


def test_seeds_are_refused_where_they_mean_nothing(square, tmp_path, capsys):
    assert main(["--protocol", "square-lsbd-v1", "--encoder", "ideal", "--seeds", "0", "1", "--out",
                 str(tmp_path)]) == 2
    assert "ideal has no seed" in capsys.readouterr().err
    assert main(["--protocol", "square-lsbd-v1", "--encoder", "pca", "--seeds", "1", "1", "--out",
                 str(tmp_path)]) == 2
    assert "repeats a seed" in capsys.readouterr().err
    assert main(["--protocol", "no-such-v1", "--out", str(tmp_path)]) == 2
    assert "unknown protocol" in capsys.readouterr().err
    assert not any(tmp_path.rglob("*.json"))
