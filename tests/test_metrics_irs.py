"""IRS (Suter et al. 2019): closed-form oracles, estimator agreement, invariances, ranges and validation."""

import itertools
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factorbench.benchmark import toy
from factorbench.benchmark.metrics import MetricInputError
from factorbench.benchmark.metrics.irs import IRSResult, irs, is_full_crossed, row_group_ids


def grid(*sizes: int, repeats: int = 1) -> np.ndarray:
    """Every combination of classes 0..n_j-1, ``repeats`` times, as float factors."""
    g = np.array(list(itertools.product(*(range(n) for n in sizes))), dtype=np.float64)
    return np.tile(g, (repeats, 1))


def reference_irs(codes, labels, quantile=1.0):
    """disentanglement_lib's formula written as loops: per-sample deviations, plain mean over the
    realisations, per-code quantile, weights max_dev (all codes active)."""
    max_dev = np.abs(codes - codes.mean(axis=0)).max(axis=0)
    empida = np.zeros((codes.shape[1], labels.shape[1]))
    for i in range(labels.shape[1]):
        values = np.unique(labels[:, i])
        for k in values:
            block = codes[labels[:, i] == k]
            empida[:, i] += np.quantile(np.abs(block - block.mean(axis=0)), quantile, axis=0)
        empida[:, i] /= len(values)
    d = (1.0 - empida / max_dev[:, None]).max(axis=1)
    return float(np.average(d, weights=max_dev)), empida


def confounded(n: int, seed: int) -> np.ndarray:
    """Three factors (4, 4, 3 classes): g2 equals g1 with probability 0.7 and is uniform otherwise,
    g3 independent; every combination occurs (full support) at n = 20,000."""
    rng = np.random.default_rng(seed)
    g1 = rng.integers(0, 4, n)
    g2 = np.where(rng.random(n) < 0.7, g1, rng.integers(0, 4, n))
    g3 = rng.integers(0, 3, n)
    return np.stack([g1, g2, g3], axis=1).astype(np.float64)


# --------------------------------------------------------------------------- oracles at the maximum


@pytest.mark.parametrize("sizes", [(3, 4, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("estimator", ["crossed", "importance", "auto"])
@pytest.mark.parametrize("quantile", [None, 0.99])
def test_identity_on_crossed_grid_scores_one(sizes, estimator, quantile):
    g = grid(*sizes)
    r = irs(toy.identity(g), g, estimator=estimator, quantile=quantile)
    assert isinstance(r, IRSResult)
    assert r.score == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(r.code_scores, 1.0, atol=1e-12)
    np.testing.assert_array_equal(r.parents, np.arange(len(sizes)))
    assert r.estimator == ("crossed" if estimator == "auto" else estimator)
    assert r.num_active == len(sizes) and r.active.all()
    assert r.empida.shape == (len(sizes), len(sizes))  # (codes, factors)
    np.testing.assert_allclose(np.diag(r.empida), 0.0, atol=1e-12)


def test_identity_with_noise_free_repeats_and_nonlinear_bijection():
    g = grid(3, 4, 5, repeats=3)
    codes = np.c_[np.cos(np.pi * g[:, 0] / 3), np.exp(g[:, 1]), -g[:, 2] ** 3]
    for est in ("crossed", "importance", "auto"):
        r = irs(codes, g, estimator=est)
        assert r.score == pytest.approx(1.0, abs=1e-12)
    assert irs(codes, g).estimator == "crossed"


def test_permuted_codes_give_the_same_score():
    g = grid(3, 4, 5)
    assert irs(toy.permuted(g, seed=3), g).score == pytest.approx(1.0, abs=1e-12)
    # A non-trivial code: the per-code scores move with the columns, the score stays.
    z = np.c_[g[:, 0] + g[:, 1], g[:, 2], g[:, 0] - 0.5 * g[:, 2]]
    order = np.array([2, 0, 1])
    for est in ("crossed", "importance"):
        a, b = irs(z, g, estimator=est), irs(z[:, order], g, estimator=est)
        assert b.score == pytest.approx(a.score, abs=1e-12)
        np.testing.assert_allclose(b.code_scores, a.code_scores[order], atol=1e-12)
        np.testing.assert_array_equal(b.parents, a.parents[order])


def test_rescaled_codes_give_the_same_score():
    g = grid(3, 4, 5)
    scales, offsets = np.array([0.01, 3.0, 250.0]), np.array([-7.0, 0.5, 1e3])
    assert irs(toy.rescaled(g, scales, offsets), g).score == pytest.approx(1.0, abs=1e-12)
    z = np.c_[g[:, 0] + g[:, 1], g[:, 2], g[:, 0] - 0.5 * g[:, 2]]
    a = irs(z, g)
    b = irs(z * scales + offsets, g)
    # D_l is invariant to any affine map of z_l (a negative scale included) ...
    np.testing.assert_allclose(irs(-2.0 * z + 1.0, g).code_scores, a.code_scores, atol=1e-12)
    np.testing.assert_allclose(b.code_scores, a.code_scores, atol=1e-12)
    # ... the unweighted score too; the max_deviation weighting only under a common scale.
    assert irs(z * scales + offsets, g, weighting="uniform").score == pytest.approx(
        irs(z, g, weighting="uniform").score, abs=1e-12)
    assert irs(5.0 * z + 2.0, g).score == pytest.approx(a.score, abs=1e-12)
    assert b.score != pytest.approx(a.score, abs=1e-3)


# --------------------------------------------------------------------------- oracles at the minimum


def test_all_zero_codes_score_zero_not_nan():
    g = grid(3, 4, 5)
    r = irs(toy.constant_codes(len(g), 4), g)
    assert r.score == 0.0
    assert not r.active.any() and r.num_active == 0
    np.testing.assert_array_equal(r.code_scores, 0.0)
    np.testing.assert_array_equal(r.parents, -1)
    assert all(np.isfinite(np.asarray(v, dtype=float)).all() for v in
               (r.code_scores, r.irs_matrix, r.empida, r.max_deviation))


def test_constant_dimension_is_excluded_and_does_not_crash():
    g = grid(3, 4, 5)
    z = np.c_[g[:, 0] + g[:, 1], np.full(len(g), 0.1), g[:, 2]]
    r = irs(z, g)
    assert r.active.tolist() == [True, False, True] and r.num_active == 2
    assert r.code_scores[1] == 0.0 and r.parents[1] == -1 and r.max_deviation[1] == 0.0
    ref = irs(z[:, [0, 2]], g)
    assert r.score == pytest.approx(ref.score, abs=1e-12)
    np.testing.assert_allclose(r.code_scores[[0, 2]], ref.code_scores, atol=1e-12)


def test_random_codes_score_low():
    # Measured over seeds 0..9: 0.146-0.181 (importance, maximum), 0.136-0.175 (crossed), 0.357-0.388
    # (importance, 0.99 quantile). With ~1,000 samples per realisation and most cells holding a single
    # sample, the largest deviation within a group nearly reaches the largest over all 10,000 samples
    # (extremes of a Gaussian grow like sqrt(2 log n)), so 1 - EMPIDA / max_dev stays small.
    rng = np.random.default_rng(0)
    f = rng.integers(0, 10, (10_000, 5)).astype(np.float64)
    codes = toy.random_codes(10_000, 10, seed=1)
    r = irs(codes, f)
    assert r.estimator == "importance"
    assert r.score < 0.25
    assert irs(codes, f, estimator="crossed").score < 0.25
    assert irs(codes, f, quantile=0.99).score < 0.45
    # On a small crossed grid (256 samples, measured 0.10-0.24 over seeds 0..9).
    g = grid(4, 4, 4, 4)
    assert max(irs(toy.random_codes(len(g), 4, seed=s), g).score for s in range(3)) < 0.35


def test_importance_averages_noise_within_cells():
    # IRS scores interventional *expectations*: with many samples per cell the importance estimator
    # averages pure noise out, so a code independent of everything is robust (near 1), while the
    # noise-free crossed estimator takes every sample as its own expectation (low).
    f = np.random.default_rng(0).integers(0, 4, (10_000, 3)).astype(np.float64)
    codes = toy.random_codes(10_000, 4, seed=0)
    assert irs(codes, f, estimator="importance").score > 0.9
    assert irs(codes, f, estimator="crossed").score < 0.25


# --------------------------------------------------------------------------- closed forms


def test_mixing_two_factors_closed_form():
    # z = g1 + g2 on a (3, 4, 5) grid: holding g1 fixed, z moves with g2 by at most 1.5 around its mean;
    # the largest deviation overall is 1 + 1.5 = 2.5. So D = max(1 - 1.5/2.5, 1 - 1/2.5, 1 - 2.5/2.5) = 0.6.
    g = grid(3, 4, 5)
    z = g[:, :1] + g[:, 1:2]
    for est in ("crossed", "importance"):
        r = irs(z, g, estimator=est)
        np.testing.assert_allclose(r.irs_matrix[0], [0.4, 0.6, 0.0], atol=1e-12)
        np.testing.assert_allclose(r.empida[0], [1.5, 1.0, 2.5], atol=1e-12)
        assert r.max_deviation[0] == pytest.approx(2.5)
        assert r.score == pytest.approx(0.6, abs=1e-12) and r.parents[0] == 1
    # With the identity codes of the other factors beside it, still well below 1.
    r = irs(np.c_[z, g[:, 2]], g)
    assert r.score == pytest.approx((0.6 * 2.5 + 1.0 * 2.0) / 4.5, abs=1e-12)
    assert irs(np.c_[z, g[:, 2]], g, weighting="uniform").score == pytest.approx(0.8, abs=1e-12)


def test_estimators_agree_on_a_full_grid_with_one_sample_per_cell():
    g = grid(3, 4, 5)
    codes = toy.random_codes(len(g), 4, seed=2)
    for q in (None, 0.9, 0.5):
        a = irs(codes, g, estimator="crossed", quantile=q)
        b = irs(codes, g, estimator="importance", quantile=q)
        np.testing.assert_allclose(a.empida, b.empida, atol=1e-12)
        assert a.score == pytest.approx(b.score, abs=1e-12)


def test_confounded_identity_scores_one_with_importance():
    d = toy.dependent(n=3, K=4, delta=0.5, alpha=1.0, N=5_000, seed=0)
    assert not is_full_crossed(d.factor_classes)
    for codes in (d.codes, toy.identity(d.factors)):
        r = irs(codes, d.factors)
        assert r.estimator == "importance"
        assert r.score == pytest.approx(1.0, abs=1e-12)


def test_importance_weights_remove_confounding():
    # z = 2 g1 + g2 with g2 confounded by g1 (full support). The interventional mean under do(g1 = k)
    # is 2k + sum_r p(r) g2(r) = 2k + mean(g2) (the sample mean), so EMPIDA for g1 is
    # max(|max g2 - mean g2|, |min g2 - mean g2|) = max(mean g2, 3 - mean g2) whatever the confounding;
    # the observational (crossed) estimator centres on 2k + E[g2 | g1 = k] instead.
    f = confounded(20_000, seed=0)
    assert row_group_ids(f.astype(np.int64))[1] == 4 * 4 * 3
    z = 2.0 * f[:, :1] + f[:, 1:2]
    mean_g2 = f[:, 1].mean()
    expected = max(mean_g2, 3.0 - mean_g2)
    r = irs(z, f)
    assert r.estimator == "importance"
    assert r.empida[0, 0] == pytest.approx(expected, abs=1e-12)
    assert r.irs_matrix[0, 0] == pytest.approx(1.0 - expected / r.max_deviation[0], abs=1e-12)
    naive = irs(z, f, estimator="crossed")
    assert abs(naive.empida[0, 0] - expected) > 0.1


def test_matches_disentanglement_lib_formula():
    rng = np.random.default_rng(4)
    labels = rng.integers(0, 6, (3_000, 3))
    labels[:, 2] = rng.integers(0, 300, 3_000)  # > 256 realisations: the joint-sort quantile path
    codes = np.c_[labels[:, 0] + 0.3 * rng.standard_normal(3_000), rng.standard_normal((3_000, 2))]
    for q in (1.0, 0.99, 0.5):
        expected, empida = reference_irs(codes, labels, q)
        r = irs(codes, labels.astype(float), classes=labels, estimator="crossed", quantile=q, average="uniform")
        np.testing.assert_allclose(r.empida, empida, rtol=1e-12, atol=1e-12)
        assert r.score == pytest.approx(expected, abs=1e-12)


def test_quantile_one_equals_maximum():
    g = grid(3, 4, 5, repeats=2)
    codes = toy.random_codes(len(g), 3, seed=5)
    f = np.random.default_rng(1).integers(0, 5, (2_000, 3)).astype(float)
    for est in ("crossed", "importance"):
        for x, y in ((codes, g), (toy.random_codes(2_000, 3, seed=6), f)):
            a = irs(x, y, estimator=est)
            b = irs(x, y, estimator=est, quantile=1.0)
            np.testing.assert_array_equal(a.empida, b.empida)
            assert a.score == b.score
            assert irs(x, y, estimator=est, quantile=0.9).score >= a.score


def test_average_frequency_and_uniform_differ_only_with_unequal_frequencies():
    g = grid(3, 4, 5)
    z = g[:, :1] + g[:, 1:2] * g[:, 2:3]
    assert irs(z, g, average="uniform").score == pytest.approx(irs(z, g).score, abs=1e-12)
    f = np.random.default_rng(0).choice(4, size=(3_000, 2), p=[0.7, 0.1, 0.1, 0.1]).astype(float)
    z = f[:, :1] * (1.0 + f[:, 1:2])
    a, b = irs(z, f), irs(z, f, average="uniform")
    assert a.empida[0, 0] != pytest.approx(b.empida[0, 0], abs=1e-3)


# --------------------------------------------------------------------------- discretisation


def test_grid_factor_with_64_values_is_not_rebinned():
    g = grid(64, 3)
    classes = g.astype(np.int64)
    angles = 2 * np.pi * g[:, :1] / 64  # the factor value of a 64-element grid
    factors = np.c_[angles, g[:, 1]]
    codes = np.c_[np.cos(angles / 2), g[:, 1]]
    r = irs(codes, factors, classes=classes, bins=20)
    assert r.score == pytest.approx(1.0, abs=1e-12)
    assert r.n_classes.tolist() == [64, 3]
    # Categorical factors keep their own values too.
    assert irs(codes, factors, kinds=["categorical", "categorical"], bins=20).score == pytest.approx(1.0, abs=1e-12)
    # disentanglement_lib's re-binning (and its per-sample estimator) merges 3-4 grid values per bin:
    # no longer 1. (The importance estimator would average the merged values within each cell.)
    rebinned = irs(codes, factors, classes=classes, bins=20, rebin=True, estimator="crossed")
    assert rebinned.n_classes.tolist() == [20, 3]
    assert rebinned.score < 0.99
    # Without classes, a continuous column with more than `bins` values is binned.
    assert irs(codes, factors, bins=20).n_classes.tolist() == [20, 3]


def test_continuous_factors_are_binned():
    rng = np.random.default_rng(0)
    f = rng.random((4_000, 2))
    r = irs(f, f, bins=10)
    assert r.n_classes.tolist() == [10, 10]
    assert 0.8 < r.score < 1.0  # each code varies within its bin by up to a tenth of its range


# --------------------------------------------------------------------------- properties


@settings(max_examples=25, deadline=None)
@given(n=st.integers(4, 200), d=st.integers(1, 4), k=st.integers(1, 3), classes=st.integers(2, 6),
       seed=st.integers(0, 10_000), quantile=st.sampled_from([None, 0.5, 0.99]),
       estimator=st.sampled_from(["auto", "crossed", "importance"]))
def test_scores_lie_in_unit_interval(n, d, k, classes, seed, quantile, estimator):
    rng = np.random.default_rng(seed)
    f = rng.integers(0, classes, (n, k)).astype(float)
    f[:2, :] = [[0.0] * k, [1.0] * k]  # no constant factor
    codes = rng.standard_normal((n, d)) * rng.integers(0, 2, d)  # some dims constant
    codes[:, 0] += f[:, 0] * rng.random()
    r = irs(codes, f, quantile=quantile, estimator=estimator)
    assert 0.0 <= r.score <= 1.0
    assert np.all((r.code_scores >= 0) & (r.code_scores <= 1))
    assert np.all(np.isfinite(r.irs_matrix)) and np.all(r.irs_matrix <= 1.0 + 1e-12)
    assert np.all(r.empida >= 0)
    np.testing.assert_array_equal(r.active, np.ptp(codes, axis=0) > 0)


def test_determinism_and_subsampling():
    rng = np.random.default_rng(0)
    f = rng.integers(0, 5, (3_000, 3)).astype(float)
    z = f + 0.1 * rng.standard_normal(f.shape)
    a = irs(z, f, max_samples=1_000, seed=7)
    b = irs(z, f, max_samples=1_000, seed=7)
    assert a.to_dict() == b.to_dict() and a.n_samples == 1_000
    assert irs(z, f, max_samples=1_000, seed=8).score != a.score
    # Without subsampling the seed changes nothing; max_samples >= N keeps every row.
    assert irs(z, f, seed=1).to_dict() == irs(z, f, seed=2).to_dict() == irs(z, f, max_samples=5_000).to_dict()


def test_result_to_dict_and_headline():
    g = grid(3, 4)
    r = irs(toy.identity(g), g)
    assert r.scalars() == {"score": 1.0}
    d = r.to_dict()
    assert d["parents"] == [0, 1] and d["estimator"] == "crossed" and d["quantile"] is None
    assert d["empida"] == [[0.0, 1.0], [1.5, 0.0]]  # code 0 = g1 in 0..2 moves by 1 with g2 fixed


# --------------------------------------------------------------------------- hash partitioning


def test_row_group_ids_and_full_crossed():
    labels = np.array([[1, 0], [0, 2], [1, 0], [0, 2], [0, 0]])
    ids, n = row_group_ids(labels)
    assert n == 3 and ids.tolist() == [2, 1, 2, 1, 0]
    # 70 binary columns: a key space of 2**70 is compacted on the way, equal rows still share ids.
    rng = np.random.default_rng(0)
    wide = rng.integers(0, 2, (50, 70))
    wide = np.r_[wide, wide[:10]]
    ids, n = row_group_ids(wide)
    assert n == len(np.unique(wide, axis=0))
    np.testing.assert_array_equal(ids[50:], ids[:10])
    assert is_full_crossed(grid(2, 3, repeats=2).astype(int))
    assert not is_full_crossed(np.r_[grid(2, 3), grid(2, 3)[:1]].astype(int))
    assert not is_full_crossed(grid(2, 3)[:-1].astype(int))


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("kwargs, message", [
    ({"quantile": 0.0}, r"quantile must be a number in \(0, 1\]"),
    ({"quantile": 1.5}, "quantile"),
    ({"quantile": True}, "quantile"),
    ({"estimator": "exact"}, "unknown estimator 'exact'"),
    ({"average": "median"}, "unknown average"),
    ({"weighting": "variance"}, "unknown weighting"),
    ({"bins": 1}, "bins must be an integer >= 2"),
    ({"max_samples": 1}, "max_samples must be an integer >= 2"),
    ({"seed": -1}, "seed must be a non-negative integer"),
    ({"rebin": "yes"}, "rebin must be True or False"),
    ({"kinds": ["continuous"]}, "kinds has 1 entries for 2 factors"),
    ({"classes": np.zeros((12, 3), dtype=int)}, r"classes has shape \(12, 3\)"),
])
def test_validation_errors(kwargs, message):
    g = grid(3, 4)
    with pytest.raises(MetricInputError, match=message):
        irs(g, g, **kwargs)


def test_validation_errors_on_arrays():
    g = grid(3, 4)
    with pytest.raises(MetricInputError, match="11 rows but the codes have 12"):
        irs(g, g[:-1])
    with pytest.raises(MetricInputError, match="NaN"):
        irs(np.where(g == 0, np.nan, g), g)
    with pytest.raises(MetricInputError, match="constant"):
        irs(g, np.c_[g, np.ones(len(g))])
    with pytest.raises(MetricInputError, match="2-D"):
        irs(g[:, 0], g)


# --------------------------------------------------------------------------- speed


@pytest.mark.slow
def test_speed_100k():
    rng = np.random.default_rng(0)
    f = rng.integers(0, 10, (100_000, 5)).astype(float)
    codes = rng.standard_normal((100_000, 10))
    start = time.perf_counter()
    r = irs(codes, f, quantile=0.99)
    assert r.estimator == "importance"
    assert time.perf_counter() - start < 5.0
