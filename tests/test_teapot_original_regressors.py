"""Eastwood & Williams' regressor settings (fixed lasso alpha, a forest depth per factor) as an analysis
beside the protocol's: per-factor fitting gives the same numbers as one DCI call where the settings agree."""

import numpy as np
import pytest

from factorbench.benchmark.experiments.teapot_original_regressors import (DEPTH_PRESETS, PROTOCOL, main,
                                                                          original_scores, protocol_scores)
from factorbench.benchmark.metrics.dci import dci
from factorbench.benchmark.protocols import PROTOCOLS


def _data(seed=0, n=600, k=3, d=5):
    rng = np.random.default_rng(seed)
    factors = {s: rng.uniform(-1, 1, (m, k)) for s, m in (("train", n), ("validation", 150), ("test", 200),
                                                          ("zeroshot", 100))}
    mix = rng.normal(size=(k, d))
    return {s: (f @ mix + 0.1 * rng.normal(size=(len(f), d)), f) for s, f in factors.items()}


@pytest.mark.parametrize("regressor, depths", [("lasso", (0, 0, 0)), ("forest", (4, 4, 4))])
def test_per_factor_fits_equal_one_call_with_the_same_settings(regressor, depths):
    data, kinds = _data(), ["continuous"] * 3
    ours = original_scores(data, kinds, regressor, depths)
    grid = {"alphas": [0.02]} if regressor == "lasso" else {"depths": [4]}
    whole = dci(*data["train"], *data["test"], regressor=regressor, kinds=kinds, heldout={"zeroshot": data["zeroshot"]},
                **grid)
    assert ours.disentanglement == pytest.approx(whole.disentanglement, abs=1e-9 if regressor == "lasso" else 0.05)
    assert ours.completeness == pytest.approx(whole.completeness, abs=1e-9 if regressor == "lasso" else 0.05)
    assert ours.informativeness == pytest.approx(whole.informativeness, abs=1e-9 if regressor == "lasso" else 0.05)
    assert ours.zeroshot == pytest.approx(whole.heldout_mean["zeroshot"], abs=1e-9 if regressor == "lasso" else 0.05)


def test_an_axis_aligned_code_is_disentangled_with_shallow_trees():
    rng = np.random.default_rng(1)
    f = {s: rng.uniform(-1, 1, (m, 3)) for s, m in (("train", 800), ("test", 200), ("zeroshot", 100))}
    data = {s: (np.concatenate([v, rng.normal(size=(len(v), 2))], axis=1), v) for s, v in f.items()}
    s = original_scores(data, ["continuous"] * 3, "forest", (3, 2, 3))
    assert s.disentanglement > 0.95 and s.completeness > 0.95 and s.informativeness < 0.3


def test_presets_and_bad_input():
    assert set(DEPTH_PRESETS) == {"pca", "vae", "beta-vae", "infogan"}
    assert all(len(d) == 5 for d in DEPTH_PRESETS.values())
    with pytest.raises(Exception, match="one forest depth per factor"):
        original_scores(_data(), ["continuous"] * 3, "forest", (3, 3))


def test_cli_refuses_an_existing_output(tmp_path, capsys):
    out = tmp_path / "x.json"
    out.write_text("{}")
    assert main(["--encoder", "pca", "--preset", "pca", "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err and out.read_text() == "{}"


@pytest.mark.parametrize("label", ["dci_lasso", "dci_forest"])
def test_protocol_column_uses_the_protocols_settings_and_validation_split(label):
    """The 'protocol' numbers are teapot-dci-v1's DCI call: its settings, its validation split."""
    call = next(c for c in PROTOCOLS[PROTOCOL].metrics if c.label == label)
    assert call.data["validation"] == "validation" and call.data["heldout"] == ["zeroshot"]
    data, kinds = _data(seed=2), ["continuous"] * 3
    ours = protocol_scores(data, kinds, call.settings["regressor"], seed=call.seed)
    theirs = dci(*data["train"], *data["test"], codes_val=data["validation"][0], factors_val=data["validation"][1],
                 kinds=kinds, heldout={"zeroshot": data["zeroshot"]}, seed=call.seed, **call.settings)
    assert (ours.disentanglement, ours.completeness, ours.informativeness, ours.zeroshot) == (
        theirs.disentanglement, theirs.completeness, theirs.informativeness, theirs.heldout_mean["zeroshot"])
