"""Shared metric helpers: validation errors, discretisation and plug-in information (closed forms)."""

import math

import numpy as np
import pytest

from factorbench.benchmark.metrics import MetricInputError, factor_classes
from factorbench.benchmark.metrics._base import (check_classes, check_codes, check_factors, check_kinds,
                                                 check_posterior, equal_width_bins)
from factorbench.benchmark.metrics._information import (entropy, joint_entropy, mutual_information,
                                                        mutual_information_matrix)


@pytest.mark.parametrize("bad, message", [
    (np.zeros(5), "2-D"),
    (np.zeros((1, 3)), "at least 2"),
    (np.array([[1.0, np.nan], [0.0, 1.0]]), "NaN or inf"),
    (np.array([[1.0, np.inf], [0.0, 1.0]]), "row 0, column 1"),
    (np.array([["a", "b"], ["c", "d"]]), "numeric"),
    (np.zeros((4, 0)), "no columns"),
])
def test_check_codes_rejects(bad, message):
    with pytest.raises(MetricInputError, match=message):
        check_codes(bad)


def test_check_codes_accepts_constant_column_and_ints():
    out = check_codes(np.array([[1, 0], [1, 2]]))
    assert out.dtype == np.float64


def test_check_factors_rejects_mismatch_and_constant():
    with pytest.raises(MetricInputError, match="3 rows but the codes have 4"):
        check_factors(np.arange(6.0).reshape(3, 2), n=4)
    with pytest.raises(MetricInputError, match=r"column\(s\) \[1\] are constant"):
        check_factors(np.array([[0.0, 1.0], [1.0, 1.0]]))


def test_check_classes_kinds_posterior():
    with pytest.raises(MetricInputError, match="integer"):
        check_classes(np.array([[0.5]]), (1, 1))
    with pytest.raises(MetricInputError, match="shape"):
        check_classes(np.zeros((2, 2), int), (2, 3))
    assert check_classes(np.array([[1.0, 2.0]]), (1, 2)).dtype == np.int64
    with pytest.raises(MetricInputError, match="unknown factor kind"):
        check_kinds(["continuous", "circular"], 2)
    with pytest.raises(MetricInputError, match="one kind per factor"):
        check_kinds(["continuous"], 2)
    assert check_kinds(None, 2) == ("continuous", "continuous")
    with pytest.raises(MetricInputError, match="must match"):
        check_posterior(np.zeros((3, 2)), np.zeros((3, 3)))


def test_equal_width_bins_and_factor_classes():
    x = np.array([[0.0, 5.0], [0.5, 5.0], [1.0, 5.0]])
    np.testing.assert_array_equal(equal_width_bins(x, 2), [[0, 0], [1, 0], [1, 0]])
    grid = np.repeat(np.arange(64.0), 2)[:, None]
    assert factor_classes(grid, bins=20).max() == 19          # no classes given: re-binned
    classes = np.repeat(np.arange(64), 2)[:, None]
    np.testing.assert_array_equal(factor_classes(grid, classes), classes)  # own classes kept
    few = np.array([[0.1], [0.7], [0.1]])
    np.testing.assert_array_equal(factor_classes(few), [[0], [1], [0]])


def test_information_closed_forms():
    rng = np.random.default_rng(0)
    a = np.repeat(np.arange(4), 250)
    assert entropy(a) == pytest.approx(math.log(4))
    assert mutual_information(a, a) == pytest.approx(math.log(4))
    assert joint_entropy(a, a % 2) == pytest.approx(math.log(4))
    assert mutual_information(a, a % 2) == pytest.approx(math.log(2))
    b = rng.integers(0, 4, size=200_000)
    c = rng.integers(0, 4, size=200_000)
    assert mutual_information(b, c) < 1e-3
    m = mutual_information_matrix(np.stack([a, a % 2], 1), np.stack([a, 3 - a], 1))
    np.testing.assert_allclose(m, [[math.log(4)] * 2, [math.log(2)] * 2])
    big = np.array([10**9, 10**9 + 1, 10**9])
    assert entropy(big) == pytest.approx(entropy(np.array([0, 1, 0])))
