"""Downstream accuracy from a single code dimension and from the whole code (Almudévar & Ortega 2025, section 6.1): oracles and errors."""

import numpy as np
import pytest

from factorbench.benchmark import toy
from factorbench.benchmark.metrics import MetricInputError, full_code_accuracy, single_code_accuracy


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


# --- the same forests on the whole code ------------------------------------------------------------------

def test_full_code_reads_a_factor_that_no_single_dimension_holds(factors):
    """z = (y0 + y1, y0 - y1, y2): neither of the first two dimensions alone tells y0 or y1 (a sum or a
    difference of two uniform classes), both together do exactly."""
    y0, y1, y2 = factors.T
    codes = np.stack([y0 + y1, y0 - y1, y2], axis=1)
    full = full_code_accuracy(codes, factors)
    single = single_code_accuracy(codes, factors)
    np.testing.assert_array_equal(full.factor_accuracy, [1.0, 1.0, 1.0])
    assert full.score == 1.0
    assert single.factor_accuracy[0] < 0.6 and single.factor_accuracy[1] < 0.6 and single.factor_accuracy[2] == 1.0
    # the same training and test samples as the single-code readout: the same chance, the same sizes
    np.testing.assert_array_equal(full.chance, single.chance)
    assert (full.n_train, full.n_test) == (single.n_train, single.n_test) == (1000, 2000)


def test_full_code_identity_rescaling_and_chance(factors):
    assert full_code_accuracy(toy.identity(factors), factors).score == 1.0
    noisy = toy.identity(factors) + np.random.default_rng(6).normal(0, 0.6, factors.shape)
    base = full_code_accuracy(noisy, factors)
    assert 0.3 < base.score < 1.0
    assert full_code_accuracy(noisy * 4.0, factors).score == base.score  # exact in floating point: same splits
    constant = full_code_accuracy(toy.constant_codes(len(factors), 3), factors)
    np.testing.assert_allclose(constant.factor_accuracy, constant.chance, atol=0.03)
    assert full_code_accuracy(toy.random_codes(len(factors), 3, seed=2), factors).score < 0.3


def test_full_code_seeded_validated_and_grouped(factors):
    codes = toy.random_codes(len(factors), 3, seed=3)
    assert full_code_accuracy(codes, factors, seed=4).score == full_code_accuracy(codes, factors, seed=4).score
    with pytest.raises(MetricInputError, match="full_code_accuracy needs more than n_train"):
        full_code_accuracy(codes[:500], factors[:500])
    rng = np.random.default_rng(5)
    rows = rng.integers(0, 1500, size=4000)
    many = rng.integers(0, 10, size=(1500, 2)).astype(float)[rows]
    ids = rng.random((1500, 2))[rows]
    assert full_code_accuracy(ids, many, n_trees=10).score > 0.3           # memorised repeats
    assert full_code_accuracy(ids, many, groups=rows, n_trees=10).score < 0.2
    with pytest.raises(MetricInputError, match="groups"):
        full_code_accuracy(ids, many, groups=rows[:10])
