"""DCI (Eastwood & Williams 2018) and zero-shot informativeness: closed-form importance oracles,
oracle codes, invariances, held-out sets, cyclic factors, the gbt variant, ranges and validation."""

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sklearn.ensemble import RandomForestRegressor

from factorbench.benchmark import toy
from factorbench.benchmark.metrics import MetricInputError
from factorbench.benchmark.metrics.dci import (DEFAULT_DEPTHS, REGRESSORS, DCIResult, ZeroShotResult,
                                               _DepthLimitedForest, dci, dci_from_importance,
                                               zero_shot_informativeness)

# --------------------------------------------------------------------------- data


def _split(codes, factors, n_train, n_val):
    """(train, val, test) slices of codes and factors, in order."""
    a, b = n_train, n_train + n_val
    return (codes[:a], factors[:a]), (codes[a:b], factors[a:b]), (codes[b:], factors[b:])


def _score(codes, factors, regressor="lasso", n_train=1500, n_val=300, **kw):
    (xtr, ftr), (xva, fva), (xte, fte) = _split(codes, factors, n_train, n_val)
    return dci(xtr, ftr, xte, fte, codes_val=xva, factors_val=fva, regressor=regressor, **kw)


@pytest.fixture(scope="module")
def uniform():
    """2,100 i.i.d. samples of 3 uniform factors on [0, 1]."""
    return np.random.default_rng(7).uniform(size=(2100, 3))


# --------------------------------------------------------------------------- closed-form importance oracles


def test_diagonal_importance_is_perfect():
    d, c, code_d, rho, factor_c = dci_from_importance(np.diag([5.0] * 5))
    assert d == pytest.approx(1.0) and c == pytest.approx(1.0)
    np.testing.assert_allclose(code_d, 1.0)
    np.testing.assert_allclose(rho, 0.2)
    np.testing.assert_allclose(factor_c, 1.0)


def test_duplicated_codes_halve_completeness():
    # 10 codes, 5 factors, every factor read equally from two codes (disentanglement_lib's dci_test)
    r = np.vstack([np.diag([5.0] * 5)] * 2)
    d, c, _, _, factor_c = dci_from_importance(r)
    assert d == pytest.approx(1.0)
    assert c == pytest.approx(1.0 - math.log(2) / math.log(10))
    np.testing.assert_allclose(factor_c, 1.0 - math.log(2) / math.log(10))


def test_one_code_for_two_factors():
    # 5 codes, 10 factors, every code equally important for two factors
    r = np.hstack([np.diag([5.0] * 5)] * 2)
    d, c, code_d, _, _ = dci_from_importance(r)
    assert d == pytest.approx(1.0 - math.log(2) / math.log(10))
    np.testing.assert_allclose(code_d, 1.0 - math.log(2) / math.log(10))
    assert c == pytest.approx(1.0)


def test_uniform_importance_scores_zero():
    d, c, _, _, _ = dci_from_importance(np.ones((4, 3)))
    assert d == pytest.approx(0.0, abs=1e-12) and c == pytest.approx(0.0, abs=1e-12)


def test_dead_code_gets_no_weight_and_no_nan():
    r = np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
    d, c, code_d, rho, factor_c = dci_from_importance(r)
    assert d == pytest.approx(1.0)
    np.testing.assert_allclose(rho, [1 / 3, 2 / 3, 0.0])
    assert code_d[2] == 0.0
    assert c == pytest.approx(1.0)   # log base D = 3, each factor read from one code
    assert not np.isnan(np.r_[code_d, rho, factor_c]).any()


def test_all_zero_importance_and_degenerate_shapes():
    assert dci_from_importance(np.zeros((3, 2)))[:2] == (0.0, 0.0)
    # K = 1: every code with importance is disentangled; completeness by entropy over codes
    d, c, code_d, _, factor_c = dci_from_importance(np.array([[1.0], [1.0], [0.0]]))
    assert d == pytest.approx(1.0)
    np.testing.assert_allclose(code_d, [1.0, 1.0, 0.0])
    assert c == pytest.approx(1.0 - math.log(2) / math.log(3))
    # D = 1: every factor with importance is complete; disentanglement by entropy over factors
    d, c, _, _, factor_c = dci_from_importance(np.array([[1.0, 1.0, 0.0]]))
    assert d == pytest.approx(1.0 - math.log(2) / math.log(3))
    np.testing.assert_allclose(factor_c, [1.0, 1.0, 0.0])
    assert c == pytest.approx(2 / 3)


def test_weighted_completeness():
    # factor 0 read from one code (C = 1, importance 3), factor 1 from two codes equally (C = 0, importance 1)
    r = np.array([[3.0, 0.5], [0.0, 0.5]])
    assert dci_from_importance(r, "mean")[1] == pytest.approx(0.5)
    assert dci_from_importance(r, "weighted")[1] == pytest.approx(0.75)


@pytest.mark.parametrize("bad, message", [
    (np.array([[1.0, -1.0]]), "negative"),
    (np.array([1.0, 2.0]), "2-D"),
    (np.array([[np.nan]]), "NaN"),
    (np.zeros((0, 2)), "non-empty"),
])
def test_importance_validation(bad, message):
    with pytest.raises(MetricInputError, match=message):
        dci_from_importance(bad)


def test_rounding_negatives_count_as_zero_but_real_negatives_are_refused():
    # scikit-learn >= 1.9's feature_importances_ can hold about -1e-17 where a feature was never used
    r = np.eye(3) - 1e-17 * (1.0 - np.eye(3))
    d, c, code_d, rho, factor_c = dci_from_importance(r)
    assert (d, c) == (1.0, 1.0)
    np.testing.assert_array_equal(rho, np.full(3, 1 / 3))
    with pytest.raises(MetricInputError, match=r"negative entries \(the smallest is -0.001\)"):
        dci_from_importance(np.eye(3) - 1e-3 * (1.0 - np.eye(3)))


@pytest.mark.parametrize("regressor, options", [("forest", {}), ("gbt", {"gbt_params": {"n_estimators": 5}})])
def test_sklearn_rounding_negatives_do_not_crash_tree_dci(regressor, options):
    # the reported input: the forest's and the boosted trees' importances hold -9e-19 and -3.6e-17 here
    rs = np.random.RandomState(0)
    z = rs.randint(1, 11, (1000, 10)).astype(float)
    zt = rs.randint(1, 11, (1000, 10)).astype(float)
    r = dci(z, z, zt, zt, regressor=regressor, **options)
    assert (r.importance >= 0).all()
    # the identity code: every factor read from its own code
    np.testing.assert_array_equal(r.importance.argmax(axis=0), np.arange(10))
    assert r.disentanglement > 0.99 and r.completeness > 0.99


def test_bad_completeness_name_lists_options():
    with pytest.raises(MetricInputError, match=r"unknown completeness 'median'.*\['mean', 'weighted'\]"):
        dci_from_importance(np.eye(2), "median")


# --------------------------------------------------------------------------- oracle codes


@pytest.mark.parametrize("regressor, tol_dc, tol_i", [("lasso", 1e-6, 1e-3), ("forest", 1e-3, 0.05)])
def test_identity_code_is_perfect(uniform, regressor, tol_dc, tol_i):
    r = _score(toy.identity(uniform), uniform, regressor)
    assert isinstance(r, DCIResult)
    assert r.disentanglement == pytest.approx(1.0, abs=tol_dc)
    assert r.completeness == pytest.approx(1.0, abs=tol_dc)
    assert 0.0 <= r.informativeness < tol_i
    assert r.importance.shape == (3, 3)
    assert r.informativeness_measure == "nrmse"
    assert r.selection == "validation"
    assert set(r.scalars()) == {"disentanglement", "completeness", "informativeness"}


def test_lasso_identity_weights_are_the_unit_diagonal(uniform):
    r = _score(toy.identity(uniform), uniform, "lasso")
    # standardised input equals standardised target: weight 1 - alpha (the smallest alpha wins)
    np.testing.assert_allclose(r.importance, np.eye(3), atol=1e-3)
    assert all(h == {"alpha": pytest.approx(1e-4)} for h in r.hyperparameters)


def test_lasso_invariant_to_permutation_and_rescaling(uniform):
    base = _score(toy.identity(uniform), uniform, "lasso")
    perm = toy.permuted(uniform, seed=3)
    order = [int(np.flatnonzero((perm[:5, i, None] == uniform[:5]).all(axis=0))[0]) for i in range(3)]
    p = _score(perm, uniform, "lasso")
    s = _score(toy.rescaled(uniform, [2.0, -0.5, 40.0], [1.0, -3.0, 7.0]), uniform, "lasso")
    for other in (p, s):
        assert other.disentanglement == pytest.approx(base.disentanglement, abs=1e-9)
        assert other.completeness == pytest.approx(base.completeness, abs=1e-9)
        assert other.informativeness == pytest.approx(base.informativeness, rel=1e-6)
    np.testing.assert_allclose(p.importance, base.importance[order], atol=1e-9)


def test_forest_invariant_to_permutation_and_rescaling(uniform):
    base = _score(toy.identity(uniform), uniform, "forest")
    for codes in (toy.permuted(uniform, seed=3), toy.rescaled(uniform, [2.0, 0.5, 40.0], [1.0, -3.0, 7.0])):
        other = _score(codes, uniform, "forest")
        assert other.disentanglement == pytest.approx(base.disentanglement, abs=2e-3)
        assert other.completeness == pytest.approx(base.completeness, abs=2e-3)
        assert other.informativeness == pytest.approx(base.informativeness, abs=5e-3)


@pytest.mark.parametrize("regressor", ["lasso", "forest"])
def test_random_code_is_uninformative(uniform, regressor):
    codes = toy.random_codes(len(uniform), 6, seed=11)
    r = _score(codes, uniform, regressor)
    assert r.informativeness == pytest.approx(1.0, abs=0.06)
    if regressor == "forest":
        # every code is used a little for every factor
        assert r.disentanglement < 0.35
        assert _score(toy.identity(uniform), uniform, regressor).disentanglement - r.disentanglement > 0.6
    else:
        # the lasso keeps at most a few tiny noise weights: D is not meaningful here (a single surviving
        # weight looks disentangled), but the total importance is negligible next to the identity's 3
        assert r.importance.sum() < 0.1


def test_duplicated_code_loses_completeness(uniform):
    # the forest splits on either copy with equal gain: each factor is read from two codes about equally
    r = _score(toy.duplicated(uniform), uniform, "forest")
    assert r.disentanglement > 0.99
    assert r.completeness == pytest.approx(1.0 - math.log(2) / math.log(6), abs=0.05)
    # the lasso is indifferent between exactly collinear copies and coordinate descent keeps the first
    lasso = _score(toy.duplicated(uniform), uniform, "lasso")
    np.testing.assert_allclose(lasso.importance[1::2], 0.0, atol=1e-12)
    assert lasso.completeness == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("regressor", ["lasso", "forest"])
def test_constant_code_dims_do_not_crash_and_get_zero_relevance(uniform, regressor):
    codes = np.concatenate([toy.identity(uniform), toy.constant_codes(len(uniform), 2, value=3.0)], axis=1)
    r = _score(codes, uniform, regressor)
    np.testing.assert_array_equal(r.code_relevance[3:], 0.0)
    np.testing.assert_array_equal(r.importance[3:], 0.0)
    assert r.disentanglement > 0.99 and r.completeness > 0.99
    assert np.isfinite(r.code_disentanglement).all()


def test_all_constant_code_scores_zero_and_chance(uniform):
    r = _score(toy.constant_codes(len(uniform), 3), uniform, "lasso")
    assert (r.disentanglement, r.completeness) == (0.0, 0.0)
    assert r.informativeness == pytest.approx(1.0, abs=0.06)
    np.testing.assert_array_equal(r.code_relevance, 0.0)


def test_single_factor_and_single_code(uniform):
    one = uniform[:, :1]
    r = _score(toy.identity(one), one, "lasso")
    assert r.disentanglement == 1.0 and r.completeness == 1.0
    r = _score(uniform[:, :1] + uniform[:, 1:2], uniform[:, :2], "lasso")
    assert r.code_disentanglement.shape == (1,)
    assert r.disentanglement == pytest.approx(1.0 - math.log(2) / math.log(2), abs=0.05)   # equally important
    np.testing.assert_array_equal(r.factor_completeness, 1.0)


# --------------------------------------------------------------------------- validation split, determinism


def test_single_alpha_is_used_as_given(uniform):
    # the original code fixed alpha = 0.02: a one-value grid has nothing to choose
    codes = toy.rotated(uniform, seed=2)
    r = _score(codes, uniform, "lasso", alphas=(0.02,))
    assert r.selection == "none"
    assert all(h == {"alpha": 0.02} for h in r.hyperparameters)


def test_internal_holdout_when_no_validation_split(uniform):
    codes = toy.identity(uniform)
    r = dci(codes[:1800], uniform[:1800], codes[1800:], uniform[1800:], regressor="lasso")
    assert r.selection.startswith("holdout 0.2")
    assert r.disentanglement == pytest.approx(1.0, abs=1e-6)
    assert r.informativeness < 1e-3


@pytest.mark.parametrize("regressor", ["lasso", "forest"])
def test_same_seed_same_result(uniform, regressor):
    codes = toy.with_noise_dims(toy.rotated(uniform, seed=1), 2, seed=2)
    a = dci(codes[:1800], uniform[:1800], codes[1800:], uniform[1800:], regressor=regressor, seed=5)
    b = dci(codes[:1800], uniform[:1800], codes[1800:], uniform[1800:], regressor=regressor, seed=5)
    assert a.to_dict() == b.to_dict()


def test_forest_scores_do_not_depend_on_the_threads_that_grow_it(uniform, monkeypatch):
    """The forest grows on every core it may use, yet its scores are those of one thread, bit for bit; a
    thread limit in force (a sweep job's --threads) is honoured."""
    import importlib

    from threadpoolctl import threadpool_limits

    dci_module = importlib.import_module("factorbench.benchmark.metrics.dci")  # the package exports dci()

    codes = toy.with_noise_dims(toy.rotated(uniform, seed=1), 2, seed=2)
    runs = {}
    for threads in (1, 2, 3):
        monkeypatch.setattr(dci_module, "forest_threads", lambda t=threads: t)
        runs[threads] = dci(codes[:1800], uniform[:1800], codes[1800:], uniform[1800:], regressor="forest",
                            seed=5).to_dict()
    assert runs[1] == runs[2] == runs[3]
    monkeypatch.undo()
    with threadpool_limits(1):
        assert dci_module.forest_threads() == 1


def test_long_fits_show_progress_on_a_terminal_only_inside_an_evaluation(uniform, monkeypatch):
    import io
    import sys

    from factorbench.benchmark.metrics._progress import metric_progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    codes = toy.rotated(uniform, seed=1)
    for named, expected in ((None, False), ("dci_forest", True)):
        err = Terminal()
        monkeypatch.setattr(sys, "stderr", err)
        with metric_progress(named):
            dci(codes[:1800], uniform[:1800], codes[1800:], uniform[1800:], regressor="forest", seed=5)
        assert ("dci_forest: max_depth per factor" in err.getvalue()) is expected
        assert ("0/3" in err.getvalue()) is expected  # counted over the factors (tqdm may skip later redraws)


def test_depth_limited_forest_matches_a_forest_grown_to_that_depth():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1500, 4))
    y = x[:, 0] + np.sin(2 * x[:, 1]) + 0.1 * rng.normal(size=1500)
    xt = rng.normal(size=(300, 4))
    full = RandomForestRegressor(10, random_state=5, n_jobs=1).fit(x, y)
    for depth in (1, 2, 3, None):   # shallow nodes are large: no tied splits, so the trees are identical
        ref = RandomForestRegressor(10, max_depth=depth, random_state=5, n_jobs=1).fit(x, y)
        cut = _DepthLimitedForest(full, depth)
        np.testing.assert_allclose(cut.predict(xt), ref.predict(xt), atol=1e-12)
        np.testing.assert_allclose(cut.importance, ref.feature_importances_, atol=1e-12)
    ref = RandomForestRegressor(10, max_depth=8, random_state=5, n_jobs=1).fit(x, y)
    cut = _DepthLimitedForest(full, 8)   # deep nodes: ties broken by a different draw, same estimator
    np.testing.assert_allclose(cut.importance, ref.feature_importances_, atol=5e-3)
    err = [np.sqrt(np.mean((m - (xt[:, 0] + np.sin(2 * xt[:, 1]))) ** 2)) for m in (cut.predict(xt), ref.predict(xt))]
    assert err[0] == pytest.approx(err[1], rel=0.05)


# --------------------------------------------------------------------------- held-out sets and zero-shot


@pytest.fixture(scope="module")
def linear_gap():
    """A code linear in the factors; training factors in [0, 1]^3, held-out factors in [1, 2]^3."""
    rng = np.random.default_rng(3)
    mix = np.array([[1.0, 0.2, 0.0], [0.0, 1.0, -0.3], [0.4, 0.0, 1.0]])
    f_in = rng.uniform(size=(1200, 3))
    f_out = rng.uniform(1.0, 2.0, size=(300, 3))
    return f_in @ mix + 0.5, f_in, f_out @ mix + 0.5, f_out


def test_lasso_extrapolates_a_linear_code(linear_gap):
    c_in, f_in, c_out, f_out = linear_gap
    z = zero_shot_informativeness(c_in[:1000], f_in[:1000], c_out, f_out, codes_val=c_in[1000:1100],
                                  factors_val=f_in[1000:1100])
    assert isinstance(z, ZeroShotResult)
    assert z.informativeness < 5e-3
    assert z.factor_error.shape == (3,)
    r = dci(c_in[:1000], f_in[:1000], c_in[1100:], f_in[1100:], codes_val=c_in[1000:1100],
            factors_val=f_in[1000:1100], heldout={"zeroshot": (c_out, f_out), "test_again": (c_in[1100:], f_in[1100:])})
    np.testing.assert_allclose(r.heldout["zeroshot"], z.factor_error, rtol=1e-12)
    assert r.heldout_mean["zeroshot"] == pytest.approx(z.informativeness)
    np.testing.assert_allclose(r.heldout["test_again"], r.factor_error, rtol=1e-12)   # no refit


def test_forest_cannot_extrapolate(linear_gap):
    c_in, f_in, c_out, f_out = linear_gap
    z = zero_shot_informativeness(c_in[:1000], f_in[:1000], c_out, f_out, regressor="forest")
    # predictions stay near the edge of the training range (1.0): RMSE ~ sqrt(E[U^2]) = 1/sqrt(3),
    # over the training std 1/sqrt(12): about 2
    assert z.informativeness == pytest.approx(2.0, abs=0.25)


def test_nrmse_std_eval_normalises_by_the_evaluated_set(linear_gap):
    c_in, f_in, c_out, f_out = linear_gap
    a = zero_shot_informativeness(c_in[:1000], f_in[:1000], c_out, f_out, regressor="forest")
    b = zero_shot_informativeness(c_in[:1000], f_in[:1000], c_out, f_out, regressor="forest", nrmse_std="eval")
    np.testing.assert_allclose(b.factor_error * f_out.std(axis=0), a.factor_error * f_in[:1000].std(axis=0))
    with pytest.raises(MetricInputError, match="constant on the held-out set"):
        zero_shot_informativeness(c_in[:1000], f_in[:1000], c_out, np.ones_like(f_out), nrmse_std="eval")


# --------------------------------------------------------------------------- cyclic factors


def test_cossin_on_a_cos_sin_code():
    rng = np.random.default_rng(4)
    angle = rng.uniform(0, 2 * np.pi, size=2100)
    other = rng.uniform(size=2100)
    factors = np.stack([angle, other], axis=1)
    codes = np.stack([np.cos(angle), np.sin(angle), other], axis=1)
    kinds = ["cyclic", "continuous"]
    r = _score(codes, factors, "lasso", kinds=kinds, cyclic="cossin")
    assert r.factor_error[0] < 1e-3 and r.informativeness < 1e-3
    # the angle is read from two codes equally: C_0 = 1 - ln2/ln3; every code serves one factor
    assert r.factor_completeness[0] == pytest.approx(1 - math.log(2) / math.log(3), abs=1e-3)
    assert r.factor_completeness[1] == pytest.approx(1.0)
    assert r.disentanglement == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(r.importance[:2, 0], 1.0, atol=1e-3)   # |w_cos| + |w_sin| summed per code
    raw = _score(codes, factors, "lasso", kinds=kinds, cyclic="raw")
    assert raw.factor_error[0] > 0.3   # a linear map of (cos, sin) cannot give the raw angle


def test_cossin_leaves_non_cyclic_factors_alone(uniform):
    a = _score(toy.identity(uniform), uniform, "lasso", kinds=["continuous", "categorical", "continuous"],
               cyclic="cossin")
    b = _score(toy.identity(uniform), uniform, "lasso")
    assert a.to_dict()["factor_error"] == b.to_dict()["factor_error"]


# --------------------------------------------------------------------------- gbt (disentanglement_lib)


def test_gbt_on_discrete_identity_code():
    rng = np.random.default_rng(5)
    classes = rng.integers(0, 3, size=(240, 2))
    factors = classes.astype(float)
    codes = factors + 0.01 * rng.normal(size=factors.shape)
    opts = {"n_estimators": 10}
    r = dci(codes[:160], factors[:160], codes[160:], factors[160:], regressor="gbt", gbt_params=opts)
    assert r.informativeness_measure == "accuracy"
    assert r.informativeness == pytest.approx(1.0)
    assert r.disentanglement > 0.95 and r.completeness > 0.95
    assert r.selection == "none" and r.hyperparameters == ({}, {})
    given_classes = dci(codes[:160], factors[:160], codes[160:], factors[160:], regressor="gbt", gbt_params=opts,
                        classes_train=classes[:160], classes_test=classes[160:])
    assert given_classes.to_dict() == r.to_dict()
    w = dci(codes[:160], factors[:160], codes[160:], factors[160:], regressor="gbt", gbt_params=opts,
            completeness="weighted", heldout={"again": (codes[160:], factors[160:])})
    assert w.completeness_weighting == "weighted"
    np.testing.assert_allclose(w.heldout["again"], w.factor_error)


def test_gbt_zero_shot_with_given_classes():
    rng = np.random.default_rng(8)
    classes = rng.integers(0, 3, size=(200, 2))
    codes = classes + 0.01 * rng.normal(size=classes.shape)
    z = zero_shot_informativeness(codes[:150], classes[:150].astype(float), codes[150:], classes[150:].astype(float),
                                  regressor="gbt", gbt_params={"n_estimators": 5}, classes_train=classes[:150],
                                  classes_heldout=classes[150:])
    assert z.informativeness_measure == "accuracy"
    np.testing.assert_allclose(z.factor_error, 1.0)


def test_gbt_random_code_is_near_chance():
    rng = np.random.default_rng(6)
    factors = rng.integers(0, 2, size=(200, 1)).astype(float)
    codes = rng.normal(size=(200, 2))
    r = dci(codes[:120], factors[:120], codes[120:], factors[120:], regressor="gbt",
            gbt_params={"n_estimators": 10})
    assert r.informativeness < 0.7


# --------------------------------------------------------------------------- ranges


# codes made as a linear map of fewer factors are exactly collinear: at the smallest alphas coordinate
# descent may stop short of its tight tolerance (the predictions are unaffected) and says so
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(30, 80), d=st.integers(1, 4), k=st.integers(1, 3),
       noise=st.floats(0.0, 2.0), regressor=st.sampled_from(["lasso", "forest"]),
       completeness=st.sampled_from(["mean", "weighted"]))
# one code, every factor's completeness 1: the weighted sum came out as 1.0000000000000002
@example(seed=2814, n=51, d=1, k=3, noise=0.48473284505892533, regressor="lasso", completeness="weighted")
def test_scores_in_range(seed, n, d, k, noise, regressor, completeness):
    rng = np.random.default_rng(seed)
    factors = rng.uniform(size=(n, k))
    codes = factors @ rng.normal(size=(k, d)) + noise * rng.normal(size=(n, d))
    codes[:, 0] *= rng.integers(0, 2)   # sometimes a constant dimension
    r = dci(codes[: n // 2], factors[: n // 2], codes[n // 2:], factors[n // 2:], regressor=regressor,
            depths=(2, None), n_trees=3, completeness=completeness, seed=seed,
            heldout={"h": (codes[n // 2:], factors[n // 2:])})
    assert 0.0 <= r.disentanglement <= 1.0 and 0.0 <= r.completeness <= 1.0
    for a in (r.code_disentanglement, r.factor_completeness, r.code_relevance):
        assert np.all((a >= 0) & (a <= 1))
    assert np.all(r.factor_error >= 0) and r.informativeness >= 0
    assert np.all(r.heldout["h"] >= 0)
    assert r.code_relevance.sum() == pytest.approx(1.0) or r.code_relevance.sum() == 0.0


# --------------------------------------------------------------------------- validation errors


def _args(n=40, d=3, k=2):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, d)), rng.uniform(size=(n, k)), rng.normal(size=(n, d)), rng.uniform(size=(n, k))


@pytest.mark.parametrize("change, message", [
    (lambda a: (a[0], a[1][:-1], a[2], a[3]), "39 rows but the codes have 40"),
    (lambda a: (a[0], a[1], a[2], a[3][:-1]), "factors_test has 39 rows"),
    (lambda a: (np.where(np.arange(3) == 1, np.nan, a[0]), a[1], a[2], a[3]), "NaN or inf"),
    (lambda a: (a[0][:, 0], a[1], a[2], a[3]), "2-D"),
    (lambda a: (a[0], np.c_[a[1][:, :1], np.ones(40)], a[2], a[3]), r"column\(s\) \[1\] are constant"),
    (lambda a: (a[0], a[1], a[2][:, :2], a[3]), "codes_test has 2 code dimensions but codes_train has 3"),
    (lambda a: (a[0], a[1], a[2], a[3][:, :1]), "factors_test has 1 factors but factors_train has 2"),
])
def test_input_validation(change, message):
    with pytest.raises(MetricInputError, match=message):
        dci(*change(_args()))


def test_bad_option_names_list_the_valid_ones():
    a = _args()
    with pytest.raises(MetricInputError, match=r"unknown regressor 'svm'.*\['forest', 'gbt', 'lasso'\]"):
        dci(*a, regressor="svm")
    assert sorted(REGRESSORS) == ["forest", "gbt", "lasso"]
    with pytest.raises(MetricInputError, match=r"unknown cyclic 'angle'.*\['cossin', 'raw'\]"):
        dci(*a, cyclic="angle")
    with pytest.raises(MetricInputError, match=r"unknown nrmse_std"):
        dci(*a, nrmse_std="test")
    with pytest.raises(MetricInputError, match=r"unknown regressor"):
        zero_shot_informativeness(*a, regressor="ridge")


def test_option_validation():
    a = _args()
    with pytest.raises(MetricInputError, match="both codes_val and factors_val"):
        dci(*a, codes_val=a[2])
    with pytest.raises(MetricInputError, match="alphas"):
        dci(*a, alphas=[0.1, -1.0])
    with pytest.raises(MetricInputError, match="depths"):
        dci(*a, regressor="forest", depths=[0])
    with pytest.raises(MetricInputError, match="depths"):
        dci(*a, regressor="forest", depths=8)
    with pytest.raises(MetricInputError, match="n_trees"):
        dci(*a, regressor="forest", n_trees=0)
    with pytest.raises(MetricInputError, match="seed"):
        dci(*a, seed=-1)
    with pytest.raises(MetricInputError, match="val_fraction"):
        dci(*a, val_fraction=1.5)
    with pytest.raises(MetricInputError, match="one kind per factor"):
        dci(*a, kinds=["cyclic"])
    with pytest.raises(MetricInputError, match="heldout"):
        dci(*a, heldout={"z": a[0]})
    with pytest.raises(MetricInputError, match="classifier predicts factor classes"):
        dci(*a, regressor="gbt", cyclic="cossin")
    with pytest.raises(MetricInputError, match="classes are for regressor='gbt'"):
        dci(*a, classes_train=np.zeros((40, 2), int))
    with pytest.raises(MetricInputError, match="not the classes of the test set"):
        dci(*a, regressor="gbt", classes_train=np.zeros((40, 2), int))
    with pytest.raises(MetricInputError, match="single class"):
        dci(*a, regressor="gbt", classes_train=np.zeros((40, 2), int), classes_test=np.zeros((40, 2), int))


def test_default_depth_grid_is_documented():
    assert DEFAULT_DEPTHS == (2, 4, 8, 12, 16, None)
