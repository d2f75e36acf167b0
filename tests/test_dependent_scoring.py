"""Every metric in every dependence setting (the ``-dependent-v3`` protocols): the split sampler of the
intervention metrics, DCI on one set of samples, and the protocols that use them."""

from __future__ import annotations

import numpy as np
import pytest

from factorbench.benchmark.metrics import MetricInputError
from factorbench.benchmark.metrics.dci import dci, dci_of_samples, grouped_parts
from factorbench.benchmark.metrics.intervention import beta_vae_score, factor_vae_score
from factorbench.benchmark.metrics.samplers import GridSampler, SplitSampler, hold_fixed
from factorbench.benchmark.protocols import PROTOCOLS
from factorbench.generators import Factor

FACTORS = (Factor("a", "continuous", values=tuple(np.linspace(0.0, 1.0, 6))),
           Factor("b", "continuous", values=tuple(np.linspace(0.0, 1.0, 6))),
           Factor("c", "categorical", values=tuple(float(v) for v in range(5))))
SHAPE = (6, 6, 5)
SMALL = dict(batch_size=16, n_train=3000, n_eval=3000)


def grid_values() -> np.ndarray:
    axes = [np.asarray(f.values) for f in FACTORS]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(FACTORS))


def ideal_codes() -> np.ndarray:
    """Codes equal to the factor values, one row per grid point in C order."""
    return grid_values().copy()


def tied_samples() -> np.ndarray:
    """Every grid point with a == b (a and b the same factor in these samples), c free."""
    values = grid_values()
    return values[values[:, 0] == values[:, 1]]


def test_split_sampler_draws_the_samples_and_holds_a_factor_among_them():
    samples = tied_samples()
    sampler = SplitSampler(FACTORS, ideal_codes(), samples)
    rng = np.random.default_rng(0)
    drawn = sampler.sample(5000, rng)
    assert (drawn[:, 0] == drawn[:, 1]).all()  # only rows of the samples
    assert len(np.unique(drawn, axis=0)) == len(samples)  # every one of them, uniformly
    counts = np.unique(drawn, axis=0, return_counts=True)[1]
    assert counts.min() > 5000 / len(samples) * 0.6
    # holding a at 0.4 draws b = 0.4 as well (the samples' conditional), c free among its values
    value = FACTORS[0].values[2]
    held = sampler.hold_fixed(drawn[:600], np.zeros(600, dtype=int), np.full(600, value), rng)
    assert (held[:, 0] == value).all() and (held[:, 1] == value).all()
    assert set(held[:, 2]) == set(FACTORS[2].values)
    # overwriting the column instead (the independent rule) leaves the samples' distribution
    assert not (GridSampler(FACTORS, ideal_codes()).hold_fixed(drawn[:600], np.zeros(600, dtype=int),
                                                               np.full(600, value), rng)[:, 1] == value).all()
    # the codes observed are the grid's
    assert np.array_equal(sampler.observe(held), held)


def test_the_independent_rule_overwrites_and_draws_nothing():
    values = grid_values()[:10]
    rng = np.random.default_rng(3)
    state = rng.bit_generator.state
    out = hold_fixed(object(), values, np.array([2] * 10), np.full(10, 4.0), rng)  # a sampler without the method
    assert (out[:, 2] == 4.0).all() and np.array_equal(out[:, :2], values[:, :2])
    assert rng.bit_generator.state == state
    assert np.array_equal(GridSampler(FACTORS, ideal_codes()).hold_fixed(values, np.array([2] * 10),
                                                                         np.full(10, 4.0), rng), out)


def test_a_value_no_sample_has_cannot_be_held():
    sampler = SplitSampler(FACTORS, ideal_codes(), tied_samples()[::5])  # c = 0 only
    with pytest.raises(MetricInputError, match="no sample has c = 3"):
        sampler.hold_fixed(np.zeros((1, 3)), np.array([2]), np.array([3.0]), np.random.default_rng(0))
    with pytest.raises(MetricInputError, match="at least one sample"):
        SplitSampler(FACTORS, ideal_codes(), np.zeros((0, 3)))


def test_on_independent_samples_the_split_sampler_scores_as_the_grid():
    """The whole grid, each point once, as samples: the same distribution as the grid sampler's, so the
    ideal codes score 1 under both metrics either way."""
    split = SplitSampler(FACTORS, ideal_codes(), grid_values())
    assert beta_vae_score(split, seed=0, **SMALL).score == 1.0
    assert factor_vae_score(split, seed=0, **SMALL).score == 1.0


def test_tied_factors_cannot_be_told_apart_closed_form():
    """With a == b in every sample, holding a fixed holds b too: the ideal code's a- and b-dimensions
    both stop varying, so neither metric can tell which of the two was held. FactorVAE's vote goes to the
    first of two zero variances (code a) for both, and the majority vote gets one of them right: 1/3 + 1/3 x 1
    of the points, 2/3 (c is always right). BetaVAE's features for a and b are the same: 2/3 again.
    Overwriting the column instead, the grid sampler holds only a, and both score 1."""
    codes = ideal_codes()
    split = SplitSampler(FACTORS, codes, tied_samples())
    assert factor_vae_score(split, seed=0, **SMALL).score == pytest.approx(2 / 3, abs=0.03)
    assert beta_vae_score(split, seed=0, **SMALL).score == pytest.approx(2 / 3, abs=0.03)
    grid = GridSampler(FACTORS, codes)
    assert factor_vae_score(grid, seed=0, **SMALL).score == 1.0


def test_grouped_parts_keep_each_group_whole():
    groups = np.repeat(np.arange(200), 3)[np.random.default_rng(1).permutation(600)]
    parts = grouped_parts(groups, (0.8, 0.1, 0.1), seed=4)
    assert sorted(np.concatenate(parts).tolist()) == list(range(600))  # a partition of the samples
    sets = [set(groups[p]) for p in parts]
    assert [len(s) for s in sets] == [160, 20, 20]
    assert not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2])
    again = grouped_parts(groups, (0.8, 0.1, 0.1), seed=4)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))


def test_dci_of_samples_is_dci_on_its_grouped_parts():
    rng = np.random.default_rng(0)
    factors = rng.random((400, 3))
    codes = np.c_[factors, rng.normal(size=(400, 1))] + 0.01 * rng.normal(size=(400, 4))
    groups = np.arange(400) // 2
    train, val, test = grouped_parts(groups, (0.8, 0.1, 0.1), seed=5)
    settings = dict(regressor="forest", depths=[2, 4], n_trees=20)
    ours = dci_of_samples(codes, factors, groups=groups, seed=5, **settings)
    direct = dci(codes[train], factors[train], codes[test], factors[test], codes_val=codes[val],
                 factors_val=factors[val], seed=5, **settings)
    assert ours.disentanglement == direct.disentanglement and ours.informativeness == direct.informativeness
    assert ours.disentanglement > 0.8  # each factor read from its own code
    with pytest.raises(MetricInputError, match="leave a training part"):
        dci_of_samples(codes, factors, validation_fraction=0.5, test_fraction=0.5)
    with pytest.raises(MetricInputError, match="groups has shape"):
        dci_of_samples(codes, factors, groups=groups[:10])
    with pytest.raises(MetricInputError, match="too few"):
        dci_of_samples(codes[:12], factors[:12], groups=np.zeros(12))


@pytest.mark.parametrize("dataset", ["dsprites", "shapes3d", "mpi3d-toy"])
def test_v3_scores_every_metric_in_every_setting(dataset):
    v2, v3 = PROTOCOLS[f"{dataset}-dependent-v2"], PROTOCOLS[f"{dataset}-dependent-v3"]
    settings = list(dict.fromkeys(m.label.rsplit(".", 1)[0] for m in v3.metrics))
    assert settings == list(dict.fromkeys(m.label.rsplit(".", 1)[0] for m in v2.metrics))
    assert settings[0] == "independent" and len(settings) >= 4
    for setting in settings:
        here = {m.label.rsplit(".", 1)[1]: m for m in v3.metrics if m.label.startswith(setting + ".")}
        assert set(here) == {"minimality_sufficiency", "mig", "sap", "modularity", "irs", "downstream",
                             "downstream_full", "dci", "beta_vae", "factor_vae", "explicitness", "do_tran", "wsepin"}
        split = "train" if setting == "independent" else f"correlated-{setting}"
        assert all(dict(m.data) == {"eval": split} for m in here.values())
    # v2's calls are v3's, unchanged
    assert {str(m.to_dict()) for m in v2.metrics} <= {str(m.to_dict()) for m in v3.metrics}


def test_v3_on_a_small_grid_scores_the_oracle(tmp_path):
    """The square set's v3 (not registered: its dependent protocol is v1) on the ideal encoder: in every
    setting DCI, BetaVAE and FactorVAE read the two factors apart (on 64 values a factor, sigma 0.1 leaves
    the other factor far more spread than the one held), and each setting scores its own samples (Do &
    Tran's MISJED, which sees the factors' joint distribution, moves)."""
    from factorbench.benchmark.evaluation import evaluate
    from factorbench.benchmark.protocols.catalog import _dependent

    protocol = _dependent("square", version=3)
    result = evaluate(protocol, "ideal", data_dir=tmp_path, progress=False)
    metrics = result.metrics
    settings = list(dict.fromkeys(m.label.rsplit(".", 1)[0] for m in protocol.metrics))
    assert settings == ["independent", "single", "confounded"]
    for s in settings:
        assert metrics[f"{s}.dci"]["scalars"]["disentanglement"] == pytest.approx(1.0, abs=1e-6)
        assert metrics[f"{s}.beta_vae"]["scalars"]["score"] == 1.0
        assert metrics[f"{s}.factor_vae"]["scalars"]["score"] == 1.0
    misjed = [metrics[f"{s}.do_tran"]["scalars"]["misjed"] for s in settings]
    assert len(set(misjed)) == 3
    # DCI on the setting's samples is DCI: its informativeness (an error) is better when lower, in every
    # setting, as dsprites-dci-v1's; the leaderboard and the meta-evaluation orient by these
    for s in settings:
        assert result.directions[f"{s}.dci.informativeness"] == "lower"
        assert result.directions[f"{s}.dci.disentanglement"] == "higher"
        assert result.directions[f"{s}.do_tran.jemmig"] == "lower"
