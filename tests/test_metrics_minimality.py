"""Minimality and sufficiency (Almudévar & Ortega 2025, eqs. 5-6): closed-form oracles, invariances,
ranges, determinism and validation."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factorbench.benchmark import toy
from factorbench.benchmark.metrics import MetricInputError
from factorbench.benchmark.metrics._information import entropy, mutual_information
from factorbench.benchmark.metrics.minimality import minimality_sufficiency

N = 5_000


def scores(result):
    return result.minimality, result.sufficiency


# --------------------------------------------------------------------------- maxima


@pytest.mark.parametrize("delta", [0.25, 0.4, 0.6, 0.8, 1.0])
def test_identity_and_bijective_toy_codes_score_one_for_any_dependence(delta):
    data = toy.dependent(n=4, K=5, delta=delta, alpha=1.0, N=N, seed=3)
    # alpha = 1: z_j = cos(pi y_j / K), an invertible function of y_j
    assert scores(minimality_sufficiency(data.codes, data.factors, classes=data.factor_classes)) == \
        pytest.approx((1.0, 1.0), abs=1e-12)
    # z = y itself, and any permutation of it
    assert scores(minimality_sufficiency(toy.identity(data.factors), data.factors)) == pytest.approx((1.0, 1.0), abs=1e-12)
    assert scores(minimality_sufficiency(toy.permuted(data.factors, seed=1), data.factors)) == \
        pytest.approx((1.0, 1.0), abs=1e-12)


def test_identity_on_continuous_factors_with_matching_bins():
    y = np.random.default_rng(0).uniform(size=(N, 3))
    # codes = factors and the same 15 equal-width bins for both: the same partition
    result = minimality_sufficiency(y, y, bins=15, factor_bins=15)
    assert scores(result) == pytest.approx((1.0, 1.0), abs=1e-12)
    np.testing.assert_allclose(np.diag(result.m), 1.0, atol=1e-12)


def test_duplicating_every_factor_keeps_both_at_one():
    data = toy.dependent(delta=1.0, N=N, seed=0)
    result = minimality_sufficiency(toy.duplicated(data.factors), data.factors)
    assert scores(result) == pytest.approx((1.0, 1.0), abs=1e-12)


@pytest.mark.parametrize("delta", [1.0, 0.75])
def test_code_with_only_the_first_factor_twice(delta):
    """z = [y1, y1] for factors (y1, y2): every code is minimal (m = 1); y1 is fully captured
    (s_1 = 1) and y2 only through its dependence on y1: s_2 = I(y1; y2) / H(y2), so
    sufficiency = (1 + I(y1; y2) / H(y2)) / 2, which is 1/2 for independent factors."""
    y = toy.dependent(n=2, K=5, delta=delta, N=N, seed=1).factors
    result = minimality_sufficiency(np.c_[y[:, 0], y[:, 0]], y)
    expected = 0.5 * (1.0 + mutual_information(y[:, 0], y[:, 1]) / entropy(y[:, 1]))
    assert result.minimality == pytest.approx(1.0, abs=1e-12)
    assert result.sufficiency == pytest.approx(expected, abs=1e-12)
    assert result.sufficiency < 1.0
    if delta == 1.0:
        assert result.sufficiency == pytest.approx(0.5, abs=0.005)


def test_one_pure_noise_dimension_gives_two_thirds_minimality():
    """z = [y1, y2, noise]: two codes with m = 1 and one with m ~ 0 (plug-in bias only)."""
    y = toy.dependent(n=2, K=5, delta=1.0, N=10_000, seed=2).factors
    codes = toy.with_noise_dims(y, 1, seed=5)
    result = minimality_sufficiency(codes, y)
    assert result.minimality == pytest.approx(2 / 3, abs=0.01)
    assert result.code_minimality[2] < 0.01
    assert result.sufficiency == pytest.approx(1.0, abs=1e-12)


# --------------------------------------------------------------------------- minima


def test_random_codes_score_near_zero():
    data = toy.dependent(delta=1.0, N=10_000, seed=0)
    result = minimality_sufficiency(toy.random_codes(10_000, 6, seed=1), data.factors)
    assert result.minimality < 0.02
    assert result.sufficiency < 0.02


def test_constant_codes_score_zero():
    data = toy.dependent(delta=1.0, N=1_000, seed=0)
    for rule in ("exclude", "zero"):
        result = minimality_sufficiency(toy.constant_codes(1_000, 3, value=2.5), data.factors, constant_codes=rule)
        assert scores(result) == (0.0, 0.0)
        assert not result.informative.any()
        assert np.all(result.m == 0) and np.all(result.s == 0)


def test_constant_code_dimension_is_excluded_or_counted_as_zero():
    data = toy.dependent(delta=0.5, N=2_000, seed=4)
    codes = np.c_[data.factors, np.full(2_000, 7.0)]
    excluded = minimality_sufficiency(codes, data.factors)
    assert scores(excluded) == pytest.approx((1.0, 1.0), abs=1e-12)
    assert excluded.informative.tolist() == [True] * 4 + [False]
    assert excluded.code_minimality[-1] == 0.0
    zero = minimality_sufficiency(codes, data.factors, constant_codes="zero")
    assert scores(zero) == pytest.approx((4 / 5, 1.0), abs=1e-12)


# --------------------------------------------------------------------------- invariances


def test_rescaling_and_offsetting_codes_changes_nothing():
    data = toy.dependent(delta=0.5, alpha=0.5, N=N, seed=7)
    base = minimality_sufficiency(data.codes, data.factors, classes=data.factor_classes)
    scaled = minimality_sufficiency(toy.rescaled(data.codes, [2.0, -3.0, 0.5, 7.0], [1.0, -4.0, 0.0, 100.0]),
                                    data.factors, classes=data.factor_classes)
    assert scores(scaled) == pytest.approx(scores(base), abs=1e-12)
    np.testing.assert_allclose(scaled.m, base.m, atol=1e-12)
    np.testing.assert_allclose(scaled.s, base.s, atol=1e-12)


def test_permuting_code_dimensions_permutes_columns():
    data = toy.dependent(delta=0.6, alpha=0.6, N=N, seed=8)
    order = np.array([2, 0, 3, 1])
    base = minimality_sufficiency(data.codes, data.factors)
    perm = minimality_sufficiency(data.codes[:, order], data.factors)
    assert scores(perm) == pytest.approx(scores(base), abs=1e-12)
    np.testing.assert_allclose(perm.m, base.m[:, order], atol=1e-12)
    np.testing.assert_allclose(perm.s, base.s[:, order], atol=1e-12)


def test_result_fields_shapes_and_json():
    data = toy.dependent(delta=0.7, alpha=0.7, N=1_000, seed=0)
    result = minimality_sufficiency(data.codes[:, :3], data.factors)
    assert result.m.shape == result.s.shape == result.mutual_information.shape == (4, 3)
    assert result.code_minimality.shape == (3,) and result.factor_sufficiency.shape == (4,)
    np.testing.assert_allclose(result.code_minimality, result.m.max(axis=0))
    np.testing.assert_allclose(result.factor_sufficiency, result.s.max(axis=1))
    assert result.minimality == pytest.approx(result.code_minimality.mean())
    assert result.sufficiency == pytest.approx(result.factor_sufficiency.mean())
    assert set(result.scalars()) == {"minimality", "sufficiency"}
    json.dumps(result.to_dict())


# --------------------------------------------------------------------------- ranges and determinism


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(1, 5), k=st.integers(1, 4), n=st.integers(10, 300),
       levels=st.integers(2, 6))
def test_scores_lie_in_unit_interval(seed, d, k, n, levels):
    rng = np.random.default_rng(seed)
    factors = rng.integers(0, levels, size=(n, k)).astype(float)
    factors[:2] = [[0.0] * k, [1.0] * k]  # every factor takes at least two values
    mix = rng.standard_normal((k, d))
    codes = factors @ mix + rng.standard_normal((n, d)) * rng.uniform(0, 2)
    result = minimality_sufficiency(codes, factors, bins=int(rng.integers(2, 20)))
    for value in (result.minimality, result.sufficiency):
        assert 0.0 <= value <= 1.0
    assert np.all((result.m >= 0) & (result.m <= 1)) and np.all((result.s >= 0) & (result.s <= 1))


def test_subsampling_is_seeded():
    data = toy.dependent(delta=0.5, alpha=0.6, N=N, seed=1)
    first = minimality_sufficiency(data.codes, data.factors, n_samples=2_000, seed=11)
    again = minimality_sufficiency(data.codes, data.factors, n_samples=2_000, seed=11)
    other = minimality_sufficiency(data.codes, data.factors, n_samples=2_000, seed=12)
    assert first.n_samples == 2_000
    assert scores(first) == scores(again)
    np.testing.assert_array_equal(first.m, again.m)
    assert scores(first) != scores(other)
    assert scores(minimality_sufficiency(data.factors, data.factors, n_samples=2_000)) == \
        pytest.approx((1.0, 1.0), abs=1e-12)


# --------------------------------------------------------------------------- validation


def test_validation_errors():
    y = toy.dependent(delta=1.0, N=200, seed=0).factors
    with pytest.raises(MetricInputError, match="bins must be an integer >= 2"):
        minimality_sufficiency(y, y, bins=1)
    with pytest.raises(MetricInputError, match="factor_bins must be an integer >= 2"):
        minimality_sufficiency(y, y, factor_bins=0)
    with pytest.raises(MetricInputError, match="n_samples must be an integer >= 2"):
        minimality_sufficiency(y, y, n_samples=1)
    with pytest.raises(MetricInputError, match="unknown constant_codes rule"):
        minimality_sufficiency(y, y, constant_codes="drop")
    with pytest.raises(MetricInputError, match="100 rows but the codes have 200"):
        minimality_sufficiency(y, y[:100])
    with pytest.raises(MetricInputError, match="2-D"):
        minimality_sufficiency(y[:, 0], y)
    with pytest.raises(MetricInputError, match="classes has shape"):
        minimality_sufficiency(y, y, classes=np.zeros((200, 2), dtype=int))
    with pytest.raises(MetricInputError, match="seed must be a non-negative integer"):
        minimality_sufficiency(y, y, seed=-1)
    with pytest.raises(MetricInputError, match="constant"):
        minimality_sufficiency(y, np.c_[y[:, :1], np.ones(200)])


def test_factor_constant_after_subsampling_is_reported():
    factor = np.zeros((1_000, 1))
    factor[0] = 1.0  # one rare value: a small resample misses it
    codes = np.random.default_rng(0).standard_normal((1_000, 2))
    with pytest.raises(MetricInputError, match="single class.*raise n_samples"):
        minimality_sufficiency(codes, factor, n_samples=3, seed=0)


# --------------------------------------------------------------------------- the toy-experiment script


def test_toy_experiment_script_runs_and_reports(tmp_path, monkeypatch):
    """The toy-experiment script on a small grid, with minimality and sufficiency only."""
    from factorbench.benchmark.experiments import toy_dependent_factors as script

    monkeypatch.setattr(script, "METRICS", {"minimality_sufficiency": script.METRICS["minimality_sufficiency"]})
    results = script.run_experiment(["--out", str(tmp_path), "--n-samples", "2000", "--steps", "3"])
    assert results["metrics"] == ["minimality", "sufficiency"]
    assert len(results["dependent"]) == 9 and len(results["nuisance"]) == 3
    assert results["verdicts"]["minimality"]["one_at_alpha_1"] and results["verdicts"]["sufficiency"]["one_at_alpha_1"]
    assert results["verdicts"]["minimality"]["falls_with_beta"] and results["verdicts"]["sufficiency"]["flat_in_beta"]
    for name in ("fig2_dependent_factors.png", "fig3_nuisance.png", "results.json"):
        assert (tmp_path / name).stat().st_size > 0
    assert json.loads((tmp_path / "results.json").read_text())["settings"]["n_samples"] == 2000
