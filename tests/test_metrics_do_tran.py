"""Do & Tran 2020 information metrics: quantised (informativeness, MISJED, RMIG, JEMMIG) and sampled
(WSEPIN, SEPIN@k, WINDIN, INDIN@k) estimators against closed-form oracles."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from factorbench.benchmark.metrics import MetricInputError
from factorbench.benchmark.metrics.do_tran import (MASS_ESTIMATORS, SCALE_WARNING, bin_edges, bin_index, do_tran,
                                                   informativeness, jemmig, misjed, quantised_posterior, rmig,
                                                   scale_warnings, windin, wsepin)

LN2 = math.log(2.0)
CENTRES = 0.5 * (bin_edges()[1:] + bin_edges()[:-1])


def _grid_posterior(levels, repeat=4, var=1e-4, spacing=3.0):
    """A balanced full grid: code i takes ``levels[i]`` well-separated values (``spacing`` apart), every
    combination ``repeat`` times, narrow Gaussian posteriors. Closed form: I(x, z_i) = ln levels[i],
    I(x, z) = sum_i ln levels[i], the codes are independent, so SEPIN_i = INDIN_i = ln levels[i]."""
    axes = [spacing * (np.arange(c) - (c - 1) / 2) for c in levels]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(levels))
    mu = np.repeat(grid, repeat, axis=0)
    return mu, np.full(mu.shape, math.log(var))


def _factor_codes(n=1_000, seed=0):
    """Factor with 5 classes mapped to separate bin centres in code 1; code 0 constant, code 2 noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 5, n)
    codes = np.stack([np.full(n, 0.5), CENTRES[[10, 30, 50, 70, 90]][y], rng.uniform(-3, 3, n)], axis=1)
    return codes, y[:, None].astype(float)


# --------------------------------------------------------------------------- quantisation


def test_values_outside_the_range_fall_in_the_edge_bins():
    np.testing.assert_array_equal(bin_index([-10.0, -4.0, -3.9, 3.99, 4.0, 10.0]), [0, 0, 1, 99, 99, 99])
    q = quantised_posterior(np.array([[-40.0], [0.0], [40.0]]), np.zeros((3, 1)))
    np.testing.assert_allclose(q.sum(axis=-1), 1.0, atol=1e-12)
    assert q[0, 0, 0] == pytest.approx(1.0, abs=1e-12) and q[2, 0, -1] == pytest.approx(1.0, abs=1e-12)
    # N(0, 1) over [-4, 4]: each edge bin also takes its tail, Phi(-4 + 0.08) in total
    assert q[1, 0, 0] == pytest.approx(0.5 * math.erfc((4 - 0.08) / math.sqrt(2)), rel=1e-9)


def test_pdf_mass_is_the_renormalised_density_at_bin_centres():
    mu = np.array([[0.3], [-1.2]])
    logvar = np.log(np.array([[0.5], [0.04]]))
    q = quantised_posterior(mu, logvar, mass="pdf")[:, 0]
    sd = np.exp(0.5 * logvar)
    dens = np.exp(-0.5 * ((CENTRES[None] - mu) / sd) ** 2) / sd
    np.testing.assert_allclose(q, dens / dens.sum(axis=1, keepdims=True), rtol=1e-10, atol=1e-300)
    # far narrower than a bin: all mass on the bin holding the mean, no underflow
    narrow = quantised_posterior(np.array([[0.123], [9.0]]), np.array([[-200.0], [-200.0]]), mass="pdf")[:, 0]
    assert narrow[0, bin_index(0.123)] == 1.0 and narrow[1, -1] == 1.0
    np.testing.assert_array_equal(narrow.sum(axis=1), 1.0)


def _authors_pdf_mass(mu, sd):
    """Q(s|x) as the authors' script computes it (DisentanglementMetrics, informativeness_metrics_v3):
    density at the bin centres (variance and std floored at 1e-8) times the width, renormalised; where
    the largest centre density is below 1e-5, one-hot on the bin holding the mean."""
    var, sd = np.maximum(sd ** 2, 1e-8), np.maximum(sd, 1e-8)
    dens = np.exp(-(CENTRES[None] - mu[:, None]) ** 2 / (2 * var[:, None])) / (sd[:, None] * math.sqrt(2 * math.pi))
    q = dens * 0.08
    q = q / np.maximum(q.sum(axis=1, keepdims=True), 1e-8)
    one_hot = np.eye(100)[bin_index(mu)]
    return np.where(dens.max(axis=1, keepdims=True) < 1e-5, one_hot, q)


def test_pdf_mass_puts_far_posteriors_in_one_bin_as_the_authors():
    # N(7, 0.5^2): every centre density is below 1e-5, so the authors put all the mass in the last bin
    mu = np.array([7.0, -19.0, 4.5, 3.0, 0.3, 0.3, 0.04, 1.0])
    sd = np.array([0.5, 2.0, 0.2, 0.5, 1e5, 3e4, 1e-6, 1e-3])
    q = quantised_posterior(mu[:, None], 2 * np.log(sd)[:, None], mass="pdf")[:, 0]
    np.testing.assert_allclose(q, _authors_pdf_mass(mu, sd), rtol=1e-9, atol=1e-12)
    assert q[0, -1] == 1.0 and q[1, 0] == 1.0
    # 4.5 with sd 0.2 is still within reach of the last centre (density 0.09 there): spread as usual
    assert 0.5 < q[2, -1] < 1.0 and q[2, -2] > 0
    # a posterior so wide that its density is below 1e-5 everywhere (sd > 39,894) also becomes one-hot
    assert q[4, bin_index(0.3)] == 1.0 and q[5].max() < 0.02
    # the exact masses of N(7, 0.5^2) put all but 1e-9 of it in the last bin too
    exact = quantised_posterior(mu[:2, None], 2 * np.log(sd[:2])[:, None], mass="cdf")[0, 0]
    assert exact[-1] == pytest.approx(1.0, abs=1e-9)


def test_registry_holds_both_mass_estimators():
    assert set(MASS_ESTIMATORS) == {"cdf", "pdf"}


# --------------------------------------------------------------------------- informativeness


@pytest.mark.parametrize("mass", ["cdf", "pdf"])
def test_standard_normal_posterior_has_no_information(mass):
    mu, logvar = np.zeros((300, 3)), np.zeros((300, 3))
    res = informativeness(mu, logvar, mass=mass)
    np.testing.assert_allclose(res.mutual_information, 0.0, atol=1e-9)
    assert res.informativeness == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("m", [1, 2, 5, 7])
def test_deterministic_code_in_m_equal_bins(m):
    values = CENTRES[np.linspace(5, 95, m).astype(int)]
    codes = np.repeat(values, 12)[:, None]
    res = informativeness(codes)
    assert res.informativeness == pytest.approx(math.log(m) / math.log(100), abs=1e-12)
    assert res.conditional_entropy[0] == 0.0 and res.mass == "deterministic"
    # posteriors far narrower than a bin give the same value through both mass estimators
    for mass in ("cdf", "pdf"):
        narrow = informativeness(codes, np.full(codes.shape, math.log(1e-8)), mass=mass)
        assert narrow.informativeness == pytest.approx(math.log(m) / math.log(100), abs=1e-9)


def test_exact_and_pdf_masses_agree_for_wide_posteriors():
    rng = np.random.default_rng(1)
    mu = rng.uniform(-1.0, 1.0, (400, 3))
    logvar = np.log(np.array([[0.1, 0.25, 0.5]])).repeat(400, axis=0)
    exact = informativeness(mu, logvar, mass="cdf")
    approx = informativeness(mu, logvar, mass="pdf")
    np.testing.assert_allclose(exact.mutual_information, approx.mutual_information, atol=2e-3)
    np.testing.assert_allclose(exact.code_entropy, approx.code_entropy, atol=2e-3)


def test_informativeness_orders_codes():
    rng = np.random.default_rng(2)
    mu = rng.uniform(-3, 3, (500, 3))
    logvar = np.log(np.array([[1.0, 1e-4, 0.05]])).repeat(500, axis=0)
    res = informativeness(mu, logvar)
    np.testing.assert_array_equal(res.order, [1, 2, 0])


def test_permuting_codes_permutes_per_code_results():
    rng = np.random.default_rng(3)
    codes, y = _factor_codes()
    mu = np.concatenate([codes, rng.normal(size=(len(codes), 1))], axis=1)
    logvar = np.log(rng.uniform(0.001, 0.5, mu.shape))
    perm = np.array([2, 0, 3, 1])
    a = do_tran(mu, logvar, y)
    b = do_tran(mu[:, perm], logvar[:, perm], y)
    np.testing.assert_allclose(b.informativeness.mutual_information, a.informativeness.mutual_information[perm])
    assert b.informativeness.informativeness == pytest.approx(a.informativeness.informativeness, rel=1e-12)
    np.testing.assert_allclose(b.misjed.misjed_matrix, a.misjed.misjed_matrix[np.ix_(perm, perm)])
    assert b.misjed.misjed == pytest.approx(a.misjed.misjed, rel=1e-12)
    np.testing.assert_allclose(b.rmig.mutual_information, a.rmig.mutual_information[perm])
    assert b.rmig.rmig == pytest.approx(a.rmig.rmig, rel=1e-12)
    assert b.jemmig.jemmig == pytest.approx(a.jemmig.jemmig, rel=1e-12)
    np.testing.assert_array_equal(perm[b.rmig.top_code], a.rmig.top_code)


# --------------------------------------------------------------------------- RMIG and JEMMIG


def test_code_in_separate_bins_gives_rmig_one_and_jemmig_zero():
    codes, y = _factor_codes()
    constant = codes.copy()
    constant[:, 2] = -1.0
    r, j = rmig(constant, None, y), jemmig(constant, None, y)
    assert r.rmig == pytest.approx(1.0, abs=1e-12) and j.jemmig == pytest.approx(0.0, abs=1e-12)
    assert r.top_code[0] == 1 and r.factor_entropy[0] == pytest.approx(j.joint_entropy[1, 0])
    # an independent noise code: plug-in bias only, still close to the ideal
    codes, y = _factor_codes(5_000)
    r, j = rmig(codes, None, y), jemmig(codes, None, y)
    assert r.rmig > 0.9 and j.jemmig < 0.05
    # the same through narrow Gaussian posteriors and both mass estimators
    codes, y = _factor_codes()
    for mass in ("cdf", "pdf"):
        r = rmig(constant, np.full(codes.shape, math.log(1e-6)), y, mass=mass)
        j = jemmig(constant, np.full(codes.shape, math.log(1e-6)), y, mass=mass)
        assert r.rmig == pytest.approx(1.0, abs=1e-6) and j.jemmig == pytest.approx(0.0, abs=1e-6)


def test_constant_codes_score_the_minimum_without_crashing():
    _, y = _factor_codes(300)
    codes = np.zeros((300, 3))
    r, j, info = rmig(codes, None, y), jemmig(codes, None, y), informativeness(codes)
    assert r.rmig == 0.0 and info.informativeness == 0.0
    h = r.factor_entropy[0]
    assert j.jemmig == pytest.approx(h / (h + math.log(100)), rel=1e-12)
    assert misjed(codes).misjed == 0.0


def test_duplicated_code_gives_rmig_zero():
    codes, y = _factor_codes()
    twice = codes[:, [1, 1]]
    assert rmig(twice, None, y).rmig == pytest.approx(0.0, abs=1e-12)
    res = jemmig(twice, None, y)
    h = res.factor_entropy[0]                 # H(z*, y) - I* + I° = H(y) - H(y) + H(y)
    assert res.jemmig_per_factor[0] == pytest.approx(h / (h + math.log(100)), rel=1e-12)


def test_classes_are_used_as_given_and_continuous_factors_binned():
    rng = np.random.default_rng(4)
    y = rng.uniform(0, 1, (600, 1))
    codes = np.concatenate([4 * y - 2, rng.normal(size=(600, 1))], axis=1)
    res = rmig(codes, None, y, factor_bins=10)
    assert res.factor_entropy[0] == pytest.approx(math.log(10), abs=0.02)
    classes = (y[:, 0] > 0.5).astype(int)[:, None]
    res = rmig(codes, None, y, classes=classes)
    assert res.factor_entropy[0] == pytest.approx(math.log(2), abs=0.01)


def test_single_code_rmig_uses_no_runner_up():
    codes, y = _factor_codes()
    res = rmig(codes[:, 1:2], None, y)
    assert res.rmig == pytest.approx(1.0) and res.second_code[0] == -1


# --------------------------------------------------------------------------- MISJED


def test_misjed_orders_informative_before_noisy_pairs():
    rng = np.random.default_rng(5)
    n = 2_000
    mu = np.concatenate([rng.uniform(-3, 3, (n, 2)), np.zeros((n, 2))], axis=1)
    logvar = np.log(np.array([[1e-4, 1e-4, 1.0, 1.0]])).repeat(n, axis=0)
    res = misjed(mu, logvar, bins=20)
    m = res.misjed_unnormalized
    assert m[0, 1] < m[0, 2] < m[2, 3]          # informative pair < mixed pair < noisy pair (section 3.2)
    assert m[0, 1] == pytest.approx(0.0, abs=0.1)   # independent, deterministic: plug-in bias only
    np.testing.assert_array_equal(np.diag(res.misjed_matrix), 0.0)
    np.testing.assert_allclose(res.misjed_matrix, res.misjed_matrix.T)
    upper = res.misjed_matrix[np.triu_indices(4, 1)]
    assert res.misjed == pytest.approx(upper.mean())
    np.testing.assert_allclose(res.misjed_matrix, m / (2 * math.log(20)))


def test_misjed_of_deterministic_codes_is_their_mutual_information():
    codes, _ = _factor_codes()
    twice = codes[:, [1, 1]]
    res = misjed(twice)
    assert res.misjed_unnormalized[0, 1] == pytest.approx(math.log(5), abs=0.01)


# --------------------------------------------------------------------------- combined


def test_do_tran_matches_the_single_functions_and_serialises():
    rng = np.random.default_rng(6)
    codes, y = _factor_codes(500)
    logvar = np.log(rng.uniform(0.001, 0.3, codes.shape))
    res = do_tran(codes, logvar, y)
    assert res.scalars() == {
        "informativeness": informativeness(codes, logvar).informativeness,
        "misjed": misjed(codes, logvar).misjed,
        "rmig": rmig(codes, logvar, y).rmig,
        "jemmig": jemmig(codes, logvar, y).jemmig,
    }
    json.dumps(res.to_dict(), allow_nan=False)
    alone = do_tran(codes, logvar)
    assert alone.rmig is None and set(alone.scalars()) == {"informativeness", "misjed"}
    assert do_tran(codes[:, :1]).misjed is None


# --------------------------------------------------------------------------- sampled estimators


def _reference_terms(mu, logvar, n_samples, seed):
    """Naive float64 Monte-Carlo with the estimator's draws (for checking the vectorised version)."""
    rng = np.random.default_rng(seed)
    n, d = mu.shape
    own = rng.integers(0, n, n_samples)
    z = mu[own] + rng.standard_normal((n_samples, d)) * np.exp(0.5 * logvar[own])
    logd = -0.5 * ((z[:, None, :] - mu[None]) ** 2 / np.exp(logvar)[None] + np.log(2 * np.pi) + logvar[None])
    cond = logd[np.arange(n_samples), own]                                # (S, D)
    log_q = logsumexp(logd.sum(-1), axis=1) - math.log(n)
    log_qi = logsumexp(logd, axis=1) - math.log(n)
    log_qnot = np.stack([logsumexp(logd.sum(-1) - logd[:, :, i], axis=1) for i in range(d)], 1) - math.log(n)
    total = np.mean(cond.sum(-1) - log_q)
    code = np.mean(cond - log_qi, axis=0)
    without = np.mean(cond.sum(-1, keepdims=True) - cond - log_qnot, axis=0)
    dependence = np.mean(log_q[:, None] - log_qi - log_qnot, axis=0)
    return total, code, without, dependence


@pytest.mark.parametrize("precision, tol", [("float64", 1e-9), ("float32", 2e-4)])
def test_sampled_terms_match_a_naive_reference(precision, tol):
    rng = np.random.default_rng(7)
    mu = rng.normal(size=(60, 4)) * np.array([2.0, 1.0, 0.5, 0.1])
    logvar = np.log(rng.uniform(0.01, 1.0, (60, 4)))
    total, code, without, dependence = _reference_terms(mu, logvar, 300, seed=11)
    res = wsepin(mu, logvar, n_samples=300, seed=11, chunk=7, precision=precision)
    assert res.total_information == pytest.approx(total, abs=tol)
    np.testing.assert_allclose(res.code_information, code, atol=tol)
    np.testing.assert_allclose(res.information_without, without, atol=tol)
    np.testing.assert_allclose(res.code_dependence, dependence, atol=tol)
    np.testing.assert_allclose(res.sepin, total - without, atol=2 * tol)
    ind = windin(mu, logvar, n_samples=300, seed=11, precision=precision)
    np.testing.assert_allclose(ind.indin, code - dependence, atol=3 * tol)


def test_sampled_standard_normal_posterior_has_no_information():
    mu, logvar = np.zeros((50, 3)), np.zeros((50, 3))
    for fn in (wsepin, windin):
        res = fn(mu, logvar, n_samples=200)
        for v in (res.total_information, res.code_information, res.information_without, res.code_dependence):
            np.testing.assert_allclose(v, 0.0, atol=1e-9)
        np.testing.assert_array_equal(res.weights, 0.0)
        assert res.scalars() == pytest.approx({k: 0.0 for k in res.headline}, abs=1e-9)


def test_well_separated_grid_has_closed_form_information():
    levels = (2, 3, 4)
    mu, logvar = _grid_posterior(levels)
    logs = np.log(levels)
    res = wsepin(mu, logvar, n_samples=2_000, k=2)
    assert res.total_information == pytest.approx(logs.sum(), abs=1e-9)
    np.testing.assert_allclose(res.code_information, logs, atol=1e-9)
    np.testing.assert_allclose(res.sepin, logs, atol=1e-9)
    np.testing.assert_allclose(res.code_dependence, 0.0, atol=1e-9)
    np.testing.assert_allclose(res.weights, logs / logs.sum())
    assert res.wsepin == pytest.approx(np.sum(logs ** 2) / logs.sum(), abs=1e-9)
    assert res.sepin_at_k == pytest.approx((math.log(4) + math.log(3)) / 2, abs=1e-9)
    ind = windin(mu, logvar, n_samples=2_000, k=2)
    np.testing.assert_allclose(ind.indin, logs, atol=1e-9)
    assert ind.windin == pytest.approx(res.wsepin, abs=1e-9)
    # permuting the codes permutes the per-code values (the oracle does not depend on the draws)
    perm = np.array([2, 0, 1])
    p = wsepin(mu[:, perm], logvar[:, perm], n_samples=2_000, k=2)
    np.testing.assert_allclose(p.sepin, res.sepin[perm], atol=1e-9)
    assert p.wsepin == pytest.approx(res.wsepin, abs=1e-9)


def test_duplicated_dimension_has_no_separable_information():
    mu, logvar = _grid_posterior((2, 2))
    mu, logvar = mu[:, [0, 0, 1]], logvar[:, [0, 0, 1]]
    sep = wsepin(mu, logvar, n_samples=1_000)
    ind = windin(mu, logvar, n_samples=1_000)
    np.testing.assert_allclose(sep.sepin, [0.0, 0.0, LN2], atol=1e-9)
    np.testing.assert_allclose(ind.indin, [0.0, 0.0, LN2], atol=1e-9)
    np.testing.assert_allclose(sep.code_dependence, [LN2, LN2, 0.0], atol=1e-9)
    assert sep.total_information == pytest.approx(2 * LN2, abs=1e-9)
    assert sep.wsepin == pytest.approx(LN2 / 3, abs=1e-9)
    assert sep.sepin_at_k == pytest.approx(LN2 / 3, abs=1e-9)


def test_sampling_is_deterministic_per_seed_and_chunk_free():
    rng = np.random.default_rng(8)
    mu, logvar = rng.normal(size=(80, 3)), np.log(rng.uniform(0.05, 1.0, (80, 3)))
    a = wsepin(mu, logvar, n_samples=300, seed=3)
    b = wsepin(mu, logvar, n_samples=300, seed=3, chunk=1)
    c = wsepin(mu, logvar, n_samples=300, seed=4)
    np.testing.assert_allclose(a.sepin, b.sepin, atol=1e-5)
    assert a.to_dict() == wsepin(mu, logvar, n_samples=300, seed=3).to_dict()
    assert a.wsepin != c.wsepin


def test_float32_overflow_falls_back_to_exact_float64():
    rng = np.random.default_rng(9)
    mu, logvar = rng.normal(size=(20, 2)), np.log(rng.uniform(0.1, 1.0, (20, 2)))
    logvar[0, 0] = 200.0                     # sd = e^100: beyond float32
    fast = wsepin(mu, logvar, n_samples=200, seed=1)
    exact = wsepin(mu, logvar, n_samples=200, seed=1, precision="float64")
    assert np.isfinite(fast.sepin).all()
    np.testing.assert_allclose(fast.sepin, exact.sepin, atol=1e-4)
    np.testing.assert_allclose(fast.code_information, exact.code_information, atol=1e-4)


def test_k_is_capped_at_the_number_of_codes():
    mu, logvar = _grid_posterior((2, 3))
    res = wsepin(mu, logvar, n_samples=100, k=5)
    assert res.k == 2 and res.sepin_at_k == pytest.approx(res.sepin.mean())


# --------------------------------------------------------------------------- ranges (property tests)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(5, 60), d=st.integers(2, 4),
       scale=st.floats(0.1, 6.0), deterministic=st.booleans(), mass=st.sampled_from(["cdf", "pdf"]),
       bins=st.integers(2, 60))
def test_quantised_metrics_lie_in_the_unit_interval(seed, n, d, scale, deterministic, mass, bins):
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=(n, d)) * scale
    logvar = None if deterministic else rng.uniform(-12, 2, (n, d))
    y = rng.integers(0, 3, (n, 2)).astype(float)
    y[:2] = [[0, 0], [1, 1]]                 # every factor varies
    res = do_tran(mu, logvar, y, bins=bins, mass=mass)
    for values in (res.informativeness.informativeness_per_code, res.misjed.misjed_matrix,
                   res.rmig.rmig_per_factor, res.jemmig.jemmig_per_factor):
        assert np.all(values >= 0.0) and np.all(values <= 1.0)
    assert np.all(res.rmig.mutual_information <= res.rmig.factor_entropy[None] + 1e-12)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 40), d=st.integers(1, 4))
def test_sampled_information_is_bounded_by_log_n(seed, n, d):
    rng = np.random.default_rng(seed)
    mu, logvar = rng.normal(size=(n, d)) * 3, rng.uniform(-8, 1, (n, d))
    res = wsepin(mu, logvar, n_samples=64, seed=seed)
    assert res.total_information <= math.log(n) + 1e-9
    assert np.all(res.code_information <= math.log(n) + 1e-9)
    assert np.isfinite(res.sepin).all() and np.isfinite(res.code_dependence).all()
    assert res.weights.sum() == pytest.approx(1.0) or res.weights.sum() == 0.0


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("call, message", [
    (lambda: informativeness(np.zeros((5, 2)), np.zeros((5, 3))), "must match"),
    (lambda: informativeness(np.zeros((5, 2)), bins=1), "bins must be an integer >= 2"),
    (lambda: informativeness(np.zeros((5, 2)), low=1.0, high=1.0), "low < high"),
    (lambda: informativeness(np.zeros((5, 2)), low=float("nan")), "low must be a finite number"),
    (lambda: informativeness(np.array([[0.0, np.nan], [1.0, 1.0]])), "NaN or inf"),
    (lambda: informativeness(np.zeros((5, 2)), np.full((5, 2), np.nan)), "NaN or inf"),
    (lambda: informativeness(np.zeros((5, 2)), mass="trapezoid"), "unknown mass estimator"),
    (lambda: misjed(np.zeros((5, 1))), "pairs of codes"),
    (lambda: rmig(np.zeros((5, 2))), "needs the ground-truth factors"),
    (lambda: rmig(np.zeros((5, 2)), None, np.arange(4.0)[:, None]), "4 rows but the codes have 5"),
    (lambda: jemmig(np.zeros((4, 2)), None, np.arange(4.0)[:, None], classes=np.zeros((4, 1), int)),
     "single class"),
    (lambda: wsepin(np.zeros((5, 2)), None), "needs a Gaussian posterior"),
    (lambda: windin(np.zeros((5, 2)), np.zeros((5, 3))), "must match"),
    (lambda: wsepin(np.zeros((5, 2)), np.zeros((5, 2)), n_samples=0), "n_samples must be an integer >= 1"),
    (lambda: wsepin(np.zeros((5, 2)), np.zeros((5, 2)), k=0), "k must be an integer >= 1"),
    (lambda: wsepin(np.zeros((5, 2)), np.zeros((5, 2)), seed=-1), "seed"),
    (lambda: windin(np.zeros((5, 2)), np.zeros((5, 2)), precision="float16"), "unknown precision"),
])
def test_validation_errors(call, message):
    with pytest.raises(MetricInputError, match=message):
        call()


# --------------------------------------------------------------------------- the range's scale


def _standard(n=4_000, d=3, seed=0):
    """Codes whose every column has mean 0 and standard deviation exactly 1."""
    z = np.random.default_rng(seed).standard_normal((n, d))
    return (z - z.mean(0)) / z.std(0)


def test_codes_on_the_priors_scale_give_no_scale_warning():
    z = _standard()
    assert scale_warnings(z) == () and scale_warnings(z * 0.51) == () and scale_warnings(z * 1.99) == ()
    # a narrow posterior mean spread by its posterior variance (a collapsed dimension: mu 0, logvar 0) is on scale
    mu = np.column_stack([0.3 * z[:, 0], np.zeros(len(z))])
    assert scale_warnings(mu, np.zeros_like(mu)) == ()
    assert do_tran(z, None, (z > 0).astype(float)).warnings == ()


def test_codes_off_the_priors_scale_are_named_with_their_spread():
    z = _standard()
    (warning,) = scale_warnings(z * [1.0, 0.49, 10.0])
    assert warning.startswith(f"2 of 3 code dimensions are {SCALE_WARNING} [-4, 4], made for codes on a N(0, 1) "
                              "prior's scale (dimensions [1, 2]: spread 0.49 to 10.00 where the prior's is 1; 1 with "
                              "more than 5% of their values outside the range)")
    # shifted out of the range, at the prior's spread: named for its values outside
    (warning,) = scale_warnings(np.column_stack([z[:, 0], z[:, 1] + 6.0]))
    assert "(dimension [1]: spread 1.00 where the prior's is 1; 1 with more than 5%" in warning
    # a narrow posterior is off scale; the reference spread follows the range: (high - low) / 8
    (warning,) = scale_warnings(0.1 * z, np.full(z.shape, -12.0))  # spread sqrt(0.01 + e^-12), 0.10 for all three
    assert "3 of 3" in warning and "spread 0.10 where the prior's is 1)" in warning
    (warning,) = scale_warnings(z, low=-1.0, high=1.0)
    assert "[-1, 1], made for codes on a N(0, 0.25^2) prior's scale" in warning and "spread 1.00 where" in warning


def test_a_discrete_code_the_bins_keep_apart_is_exempt_and_one_they_merge_is_not():
    n = 300
    values = np.tile([0.0, 0.1, 0.2], n // 3)  # three bins of width 0.08: nothing lost, scale irrelevant
    assert scale_warnings(values[:, None]) == ()
    merged = np.tile([0.0, 0.05, 0.1], n // 3)  # 0 and 0.05 share the bin [0, 0.08)
    (warning,) = scale_warnings(merged[:, None])
    assert "1 of 1 code dimensions" in warning
    # constant dimensions are the constant-code warning's, not this one's
    assert scale_warnings(np.column_stack([np.full(n, 0.3), _standard(n, 1)[:, 0]])) == ()


def test_a_code_shrunk_into_one_bin_scores_the_closed_form_jemmig_and_is_warned():
    """JEMMIG(y_k) of a code inside one bin is H(y_k) (H(z|y) = I = 0, H(y|z) = H(y)): normalised
    H(y_k) / (H(y_k) + ln B), a score better than a noisy code on the prior's scale, which the warning flags."""
    rng = np.random.default_rng(1)
    y = np.column_stack([np.repeat(np.arange(6), 50), np.tile(np.arange(5), 60)]).astype(float)
    informative = (y - y.mean(0)) / y.std(0) + rng.normal(0, 0.5, y.shape)
    shrunk = 1e-4 * informative + 0.01  # every value in the bin [0, 0.08)
    h = np.log([6.0, 5.0])
    expected = float(np.mean(h / (h + math.log(100))))
    result = jemmig(shrunk, None, y)
    assert result.jemmig == pytest.approx(expected, abs=1e-12)
    assert result.jemmig < jemmig(informative, None, y).jemmig
    assert any(SCALE_WARNING in w for w in result.warnings)
    assert jemmig(informative, None, y).warnings == ()
    for metric in (lambda c: informativeness(c), lambda c: misjed(c), lambda c: rmig(c, None, y),
                   lambda c: do_tran(c, None, y)):
        assert any(SCALE_WARNING in w for w in metric(shrunk).warnings)
    # the sampled estimators read mutual information, unchanged by a code's scale: no such warning
    mu, logvar = _grid_posterior([2, 3])
    assert not any(SCALE_WARNING in w for w in wsepin(mu * 0.01, logvar + 2 * math.log(0.01), n_samples=200).warnings)
