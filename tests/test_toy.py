"""Value tests for the toy representations of Almudévar & Ortega 2025 (section 5) and the oracle codes."""

from __future__ import annotations

import numpy as np
import pytest

from factorbench.benchmark import toy
from factorbench.benchmark.toy import ToyData
from factorbench.generators.errors import FactorbenchError


def offdiag_corr(x: np.ndarray) -> np.ndarray:
    c = np.corrcoef(x.T)
    return c[~np.eye(c.shape[0], dtype=bool)]


def arccos_index(codes: np.ndarray, K: int) -> np.ndarray:
    """Invert z = cos(pi z' / K) on [0, pi]: returns z'."""
    return np.arccos(np.clip(codes, -1.0, 1.0)) * K / np.pi


# --------------------------------------------------------------------------- dependent (section 5.1)


@pytest.mark.parametrize("make", [lambda: toy.dependent(n=3, K=4, delta=0.5, alpha=0.6, N=500, seed=1),
                                  lambda: toy.nuisance(n=3, K=4, beta=0.5, N=500, seed=1)])
def test_shapes_dtypes_and_params(make):
    d = make()
    assert isinstance(d, ToyData)
    assert d.factor_classes.shape == d.factors.shape == d.codes.shape == (500, 3)
    assert d.factor_classes.dtype == np.int64
    assert d.factors.dtype == d.codes.dtype == np.float64
    np.testing.assert_array_equal(d.factors, d.factor_classes.astype(np.float64))
    assert d.factor_classes.min() >= 0 and d.factor_classes.max() <= 3
    assert np.all(np.abs(d.codes) <= 1.0)
    assert d.params["n"] == 3 and d.params["K"] == 4 and d.params["N"] == 500 and d.params["seed"] == 1
    with pytest.raises(AttributeError):
        d.codes = d.codes  # frozen


def test_determinism():
    a, b = toy.dependent(delta=0.5, alpha=0.5, seed=3), toy.dependent(delta=0.5, alpha=0.5, seed=3)
    c = toy.dependent(delta=0.5, alpha=0.5, seed=4)
    np.testing.assert_array_equal(a.factor_classes, b.factor_classes)
    np.testing.assert_array_equal(a.codes, b.codes)
    assert not np.array_equal(a.factor_classes, c.factor_classes)
    assert not np.array_equal(a.codes, c.codes)
    n1, n2, n3 = toy.nuisance(beta=0.5, seed=3), toy.nuisance(beta=0.5, seed=3), toy.nuisance(beta=0.5, seed=4)
    np.testing.assert_array_equal(n1.codes, n2.codes)
    assert not np.array_equal(n1.codes, n3.codes)


def test_no_global_randomness():
    np.random.seed(0)
    a = toy.dependent(delta=0.5, alpha=0.5, N=200)
    np.random.seed(1)
    np.random.random(10)
    b = toy.dependent(delta=0.5, alpha=0.5, N=200)
    np.testing.assert_array_equal(a.codes, b.codes)


@pytest.mark.parametrize("delta", [0.25, 0.5, 1.0])
def test_alpha_one_codes_are_cosine_of_own_class(delta):
    K = 5
    d = toy.dependent(n=4, K=K, delta=delta, alpha=1.0, N=5000, seed=0)
    for j in range(4):
        y = d.factor_classes[:, j]
        for k in np.unique(y):
            col = d.codes[y == k, j]
            assert np.ptp(col) == 0.0  # constant within each class of y_j
        np.testing.assert_array_equal(d.codes[:, j], np.cos(np.pi * y / K))
    # a bijection of y_j: distinct classes give distinct codes (cosine argument in [0, pi])
    assert len(np.unique(d.codes[:, 0])) == K


def test_codes_follow_the_paper_formula():
    n, K, alpha = 4, 5, 0.7
    d = toy.dependent(n=n, K=K, delta=0.6, alpha=alpha, N=2000, seed=2)
    y = d.factors
    z_prime = np.stack([alpha * y[:, j] + (1 - alpha) / (n - 1) * np.delete(y, j, axis=1).sum(axis=1)
                        for j in range(n)], axis=1)
    np.testing.assert_allclose(d.codes, np.cos(np.pi * z_prime / K), rtol=0, atol=1e-12)


def test_delta_one_gives_independent_factors():
    # N = 20,000: the standard error of a correlation is about 1/sqrt(N) = 0.007; measured max |r| = 0.012
    # (n = 4, seed 0); tolerance 0.03.
    d = toy.dependent(n=4, K=5, delta=1.0, N=20_000, seed=0)
    assert np.abs(offdiag_corr(d.factors)).max() < 0.03
    # and each factor is uniform over its K classes (expected 4,000 each)
    for j in range(4):
        counts = np.bincount(d.factor_classes[:, j], minlength=5)
        assert np.all(np.abs(counts - 4000) < 250)


@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_delta_one_over_n_gives_equal_factors(n):
    # delta = 1/n makes every y'_i the mean of all eps, so all factors are equal: measured correlation 1.000
    # and all factors equal in every sample (n = 2, 3, 4, 6); threshold 0.99.
    d = toy.dependent(n=n, K=5, delta=1.0 / n, N=20_000, seed=0)
    assert offdiag_corr(d.factors).min() > 0.99
    assert np.mean((d.factor_classes == d.factor_classes[:, :1]).all(axis=1)) > 0.999


def test_dependence_grows_as_delta_falls():
    # measured minimum correlations, n = 4, N = 20,000: delta 1 -> ~0, 0.75 -> 0.22, 0.5 -> 0.59, 0.25 -> 1.0
    mins = [offdiag_corr(toy.dependent(n=4, delta=delta, N=20_000, seed=0).factors).min()
            for delta in (1.0, 0.75, 0.5, 0.25)]
    assert mins == sorted(mins)
    assert 0.15 < mins[1] < 0.3 and 0.5 < mins[2] < 0.7


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_alpha_one_over_n_makes_all_codes_equal(n):
    # z'_j = (1/n) y_j + (1/n) sum_{i != j} y_i = mean(y) for every j
    K = 5
    d = toy.dependent(n=n, K=K, delta=1.0, alpha=1.0 / n, N=2000, seed=0)
    for j in range(1, n):
        np.testing.assert_allclose(d.codes[:, j], d.codes[:, 0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(d.codes[:, 0], np.cos(np.pi * d.factors.mean(axis=1) / K), rtol=0, atol=1e-12)
    # while the factors themselves are independent, so the codes are not a copy of any one factor
    assert len(np.unique(np.round(d.codes[:, 0], 9))) > K


@pytest.mark.parametrize("delta", [0.25, 0.5, 1.0])
def test_every_class_occurs(delta):
    d = toy.dependent(n=4, K=5, delta=delta, N=10_000, seed=0)
    for j in range(4):
        assert set(np.unique(d.factor_classes[:, j])) == set(range(5))


def test_k_two_and_large_k():
    d = toy.dependent(n=2, K=2, delta=1.0, N=1000, seed=0)
    assert set(np.unique(d.factor_classes)) == {0, 1}
    np.testing.assert_array_equal(np.unique(d.codes), np.cos(np.pi * np.array([1.0, 0.0]) / 2))
    d = toy.dependent(n=3, K=50, delta=1.0, N=20_000, seed=0)
    assert set(np.unique(d.factor_classes)) == set(range(50))


# --------------------------------------------------------------------------- nuisance (section 5.2)


def test_nuisance_beta_zero_equals_dependent_disentangled():
    for seed in (0, 7):
        a = toy.nuisance(n=4, K=5, beta=0.0, N=3000, seed=seed)
        b = toy.dependent(n=4, K=5, delta=1.0, alpha=1.0, N=3000, seed=seed)
        np.testing.assert_array_equal(a.factor_classes, b.factor_classes)
        np.testing.assert_array_equal(a.codes, b.codes)


@pytest.mark.parametrize("beta", [0.3, 0.8])
def test_nuisance_codes_are_own_class_plus_bounded_noise(beta):
    K = 5
    a = toy.nuisance(n=4, K=K, beta=beta, N=5000, seed=0)
    b = toy.dependent(n=4, K=K, delta=1.0, alpha=1.0, N=5000, seed=0)
    np.testing.assert_array_equal(a.factor_classes, b.factor_classes)  # same factors
    assert np.abs(a.codes - b.codes).max() > 0.05  # the nuisance moves the codes
    noise = arccos_index(a.codes, K) - a.factors  # = beta * eps
    assert noise.min() >= -1e-9 and noise.max() <= beta + 1e-9
    assert noise.max() > 0.95 * beta  # eps spans [0, 1]
    # one eps per sample, shared by all codes (the paper's eps has no index j)
    np.testing.assert_allclose(noise, noise[:, :1].repeat(4, axis=1), rtol=0, atol=1e-9)
    # the code still determines its class: codes of different classes do not overlap
    for k in range(K - 1):
        assert a.codes[a.factor_classes[:, 0] == k, 0].min() > a.codes[a.factor_classes[:, 0] == k + 1, 0].max()


def test_nuisance_largest_beta_stays_below_pi():
    K = 5
    a = toy.nuisance(K=K, beta=1 - 1 / K, N=5000, seed=0)
    assert arccos_index(a.codes, K).max() < K


# --------------------------------------------------------------------------- argument validation


@pytest.mark.parametrize("kwargs, match", [
    ({"n": 1}, "n must be >= 2"),
    ({"K": 1}, "K must be >= 2"),
    ({"N": 1}, "N must be >= 2"),
    ({"n": 2.0}, "n must be an integer"),
    ({"delta": 0.2}, "delta must lie in"),   # 1/n = 0.25
    ({"delta": 1.1}, "delta must lie in"),
    ({"alpha": 0.1}, "alpha must lie in"),
    ({"alpha": 1.5}, "alpha must lie in"),
    ({"alpha": float("nan")}, "alpha must be a finite"),
])
def test_dependent_rejects_bad_arguments(kwargs, match):
    with pytest.raises(FactorbenchError, match=match):
        toy.dependent(**kwargs)


@pytest.mark.parametrize("kwargs, match", [
    ({"beta": -0.1}, "beta must lie in"),
    ({"beta": 0.81}, "beta must lie in"),   # 1 - 1/K = 0.8
    ({"n": 1}, "n must be >= 2"),
    ({"K": 1}, "K must be >= 2"),
    ({"N": 0}, "N must be >= 2"),
])
def test_nuisance_rejects_bad_arguments(kwargs, match):
    with pytest.raises(FactorbenchError, match=match):
        toy.nuisance(**kwargs)


def test_range_edges_are_accepted():
    toy.dependent(n=3, delta=1 / 3, alpha=1 / 3, N=10)
    toy.nuisance(K=3, beta=1 - 1 / 3, N=10)


# --------------------------------------------------------------------------- oracle codes


@pytest.fixture
def factors() -> np.ndarray:
    return toy.dependent(n=4, K=5, delta=1.0, N=2000, seed=0).factors


def test_identity(factors):
    codes = toy.identity(factors)
    np.testing.assert_array_equal(codes, factors)
    assert codes.dtype == np.float64 and codes is not factors


@pytest.mark.parametrize("seed", range(10))
def test_permuted_is_a_real_permutation(factors, seed):
    codes = toy.permuted(factors, seed)
    match = [[np.array_equal(codes[:, j], factors[:, i]) for i in range(4)] for j in range(4)]
    order = [row.index(True) for row in match]  # each code column equals one factor column
    assert sorted(order) == [0, 1, 2, 3]
    assert order != [0, 1, 2, 3]
    np.testing.assert_array_equal(toy.permuted(factors, seed), codes)


def test_permuted_two_columns_swaps(factors):
    for seed in range(5):
        np.testing.assert_array_equal(toy.permuted(factors[:, :2], seed), factors[:, [1, 0]])


def test_rescaled(factors):
    scales, offsets = np.array([2.0, -1.0, 0.5, 3.0]), np.array([1.0, 0.0, -2.0, 5.0])
    np.testing.assert_allclose(toy.rescaled(factors, scales, offsets), factors * scales + offsets)
    with pytest.raises(FactorbenchError, match="non-zero"):
        toy.rescaled(factors, [1.0, 0.0, 1.0, 1.0], 0.0)
    with pytest.raises(FactorbenchError, match="one value per column"):
        toy.rescaled(factors, [1.0, 2.0], 0.0)


def test_duplicated(factors):
    codes = toy.duplicated(factors)
    assert codes.shape == (2000, 8) and codes.dtype == np.float64
    for i in range(4):
        np.testing.assert_array_equal(codes[:, 2 * i], factors[:, i])
        np.testing.assert_array_equal(codes[:, 2 * i + 1], factors[:, i])


def test_rotated_is_orthogonal_and_mixes(factors):
    codes = toy.rotated(factors, seed=0)
    std = (factors - factors.mean(axis=0)) / factors.std(axis=0)
    np.testing.assert_allclose(np.linalg.norm(codes, axis=1), np.linalg.norm(std, axis=1), rtol=1e-10)
    q, *_ = np.linalg.lstsq(std, codes, rcond=None)
    np.testing.assert_allclose(q.T @ q, np.eye(4), atol=1e-10)
    assert np.abs(q).max() < 0.99  # no code is a single factor
    assert np.all((np.abs(q) > 0.05).sum(axis=0) >= 2)  # every code mixes at least two factors
    np.testing.assert_array_equal(toy.rotated(factors, seed=0), codes)
    assert not np.allclose(toy.rotated(factors, seed=1), codes)
    with pytest.raises(FactorbenchError, match="non-zero variance"):
        toy.rotated(np.ones((10, 2)), seed=0)


def test_random_and_constant_codes():
    r = toy.random_codes(20_000, 3, seed=0)
    assert r.shape == (20_000, 3) and r.dtype == np.float64
    np.testing.assert_allclose(r.mean(axis=0), 0.0, atol=0.03)
    np.testing.assert_allclose(r.std(axis=0), 1.0, atol=0.03)
    np.testing.assert_array_equal(toy.random_codes(50, 3, seed=0), toy.random_codes(50, 3, seed=0))
    assert not np.array_equal(toy.random_codes(50, 3, seed=1), toy.random_codes(50, 3, seed=0))
    c = toy.constant_codes(100, 4, value=2.5)
    assert c.shape == (100, 4) and c.dtype == np.float64
    np.testing.assert_array_equal(c.var(axis=0), 0.0)
    np.testing.assert_array_equal(toy.constant_codes(5, 2), 0.0)


def test_with_noise_dims(factors):
    codes = toy.with_noise_dims(factors, 2, seed=0)
    assert codes.shape == (2000, 6)
    np.testing.assert_array_equal(codes[:, :4], factors)
    assert np.abs(offdiag_corr(codes)).max() < 0.1  # noise columns are unrelated to the factors
    np.testing.assert_array_equal(toy.with_noise_dims(factors, 2, seed=0), codes)
    assert toy.with_noise_dims(factors, 0, seed=0).shape == (2000, 4)
    with pytest.raises(FactorbenchError, match="extra must be >= 0"):
        toy.with_noise_dims(factors, -1, seed=0)


# --------------------------------------------------------------------------- Gaussian posteriors


def test_gaussian_posterior(factors):
    mu, logvar = toy.gaussian_posterior(factors, 0.25)
    np.testing.assert_array_equal(mu, factors)
    assert logvar.shape == factors.shape and logvar.dtype == np.float64
    np.testing.assert_allclose(logvar, np.log(0.25))
    var = np.array([0.1, 0.2, 0.3, 0.4])
    _, logvar = toy.gaussian_posterior(factors, var, seed=0)
    np.testing.assert_allclose(logvar, np.broadcast_to(np.log(var), factors.shape))


@pytest.mark.parametrize("variance", [0.0, -1.0, [0.1, 0.0, 0.1, 0.1], float("inf")])
def test_gaussian_posterior_rejects_non_positive_variance(factors, variance):
    with pytest.raises(FactorbenchError, match="variance must be finite and > 0"):
        toy.gaussian_posterior(factors, variance)


def test_gaussian_posterior_rejects_wrong_shape(factors):
    with pytest.raises(FactorbenchError, match="does not broadcast"):
        toy.gaussian_posterior(factors, [0.1, 0.2])


def test_sample_posterior_moments():
    mu = np.tile([0.0, 3.0, -1.0], (40_000, 1))
    _, logvar = toy.gaussian_posterior(mu, [1.0, 0.25, 4.0])
    s = toy.sample_posterior(mu, logvar, seed=0)
    assert s.shape == mu.shape and s.dtype == np.float64
    np.testing.assert_allclose(s.mean(axis=0), [0.0, 3.0, -1.0], atol=0.03)
    np.testing.assert_allclose(s.std(axis=0), [1.0, 0.5, 2.0], rtol=0.02)
    np.testing.assert_array_equal(toy.sample_posterior(mu, logvar, seed=0), s)
    assert not np.array_equal(toy.sample_posterior(mu, logvar, seed=1), s)
    with pytest.raises(FactorbenchError, match="same shape"):
        toy.sample_posterior(mu, logvar[:, :2], seed=0)
