"""Single-code downstream accuracy (Almudévar & Ortega 2025, section 6.1): oracles and errors."""

import numpy as np
import pytest

from factorbench.benchmark import toy
from factorbench.benchmark.metrics import MetricInputError, single_code_accuracy


@pytest.fixture(scope="module")
def factors():
    return np.random.default_rng(0).integers(0, 5, size=(3000, 3)).astype(float)


def test_identity_code_predicts_every_factor(factors):
    result = single_code_accuracy(toy.identity(factors), factors)
    assert result.score == 1.0
    np.testing.assert_array_equal(result.accuracy.argmax(axis=0), [0, 1, 2])
    assert result.accuracy.shape == (3, 3) and result.n_train == 1000 and result.n_test == 2000


def test_permuted_and_rescaled_codes_score_the_same(factors):
    base = single_code_accuracy(toy.identity(factors), factors).score
    assert single_code_accuracy(toy.permuted(factors, seed=1), factors).score == base
    assert single_code_accuracy(toy.rescaled(factors, [2.0, -3.0, 0.5], 7.0), factors).score == base


def test_constant_and_random_codes_score_near_chance(factors):
    constant = single_code_accuracy(toy.constant_codes(len(factors), 3), factors)
    np.testing.assert_allclose(constant.factor_accuracy, constant.chance, atol=0.03)  # forests vote on bootstraps
    random = single_code_accuracy(toy.random_codes(len(factors), 3, seed=2), factors)
    assert random.score < 0.3  # chance is about 0.2 with 5 uniform classes


def test_seeded_and_validated(factors):
    codes = toy.random_codes(len(factors), 3, seed=3)
    assert single_code_accuracy(codes, factors, seed=4).score == single_code_accuracy(codes, factors, seed=4).score
    with pytest.raises(MetricInputError, match="n_train"):
        single_code_accuracy(codes[:500], factors[:500])
    with pytest.raises(MetricInputError, match="rows"):
        single_code_accuracy(codes, factors[:100])


def test_groups_keep_repeated_samples_out_of_the_test_set():
    """A code that only identifies the sample: with repeats in both parts a forest memorises it;
    with groups (the row each sample repeats) it cannot."""
    rng = np.random.default_rng(5)
    rows = rng.integers(0, 1500, size=4000)                 # drawn with replacement, like a correlated split
    factors = rng.integers(0, 10, size=(1500, 2)).astype(float)[rows]
    codes = rng.random((1500, 2))[rows]                     # unique per row, unrelated to the factors
    leaky = single_code_accuracy(codes, factors, n_trees=10)
    grouped = single_code_accuracy(codes, factors, groups=rows, n_trees=10)
    assert leaky.score > 0.3 and grouped.score < 0.2       # chance is about 0.1
    with pytest.raises(MetricInputError, match="groups"):
        single_code_accuracy(codes, factors, groups=rows[:10])
