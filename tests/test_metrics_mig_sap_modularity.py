"""Value tests for MIG, SAP, modularity and explicitness: closed forms on oracle codes, invariances,
ranges, determinism and validation errors."""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score
from sklearn.svm import LinearSVC

from factorbench.benchmark import toy
from factorbench.benchmark.metrics import MetricInputError
from factorbench.benchmark.metrics.mig import MIGResult, mig, top_two_gap
from factorbench.benchmark.metrics.modularity import (ExplicitnessResult, ModularityResult, explicitness,
                                                      modularity, modularity_from_information, roc_auc)
from factorbench.benchmark.metrics.sap import (SAP_MODES, SAPResult, adjusted_balanced_accuracy, sap,
                                               split_indices)

N_CLASSES = 10
N_FACTORS = 5
N_SAMPLES = 10_000
LN10 = math.log(N_CLASSES)


@pytest.fixture(scope="module")
def balanced() -> np.ndarray:
    """5 independent factors, each exactly uniform on 10 classes (1,000 samples per class), 10,000 rows."""
    rng = np.random.default_rng(0)
    column = np.repeat(np.arange(N_CLASSES), N_SAMPLES // N_CLASSES)
    return np.stack([rng.permutation(column) for _ in range(N_FACTORS)], axis=1).astype(np.float64)


def full_grid(*sizes: int) -> np.ndarray:
    """Every combination of the factor classes exactly once: (prod sizes, len(sizes)) float64."""
    mesh = np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1).astype(np.float64)


# --------------------------------------------------------------------------- MIG


def test_mig_identity_closed_form(balanced):
    r = mig(toy.identity(balanced), balanced)
    assert isinstance(r, MIGResult)
    # Uniform factors on 10 classes, 20 bins >= 10 classes: I(z_k; v_k) = H(v_k) = ln 10 exactly.
    np.testing.assert_allclose(np.diag(r.mutual_information), LN10, rtol=1e-12)
    np.testing.assert_allclose(r.factor_entropy, LN10, rtol=1e-12)
    off = r.mutual_information[~np.eye(N_FACTORS, dtype=bool)]
    # Independent factors: only the plug-in bias, about (10 - 1)^2 / (2 N) = 0.004 nats.
    assert off.max() < 0.01
    second = np.sort(r.mutual_information, axis=0)[-2]
    np.testing.assert_allclose(r.factor_gaps, (LN10 - second) / LN10, rtol=1e-12)
    assert r.score >= 0.99
    np.testing.assert_array_equal(r.top_codes, np.arange(N_FACTORS))
    assert r.scalars() == {"score": r.score}


def test_mig_full_grid_is_exactly_one():
    grid = full_grid(4, 5, 6)
    r = mig(grid, grid)
    np.testing.assert_allclose(r.mutual_information, np.diag(np.log([4, 5, 6])), atol=1e-12)
    assert r.score == pytest.approx(1.0, abs=1e-12)


def test_mig_permuted_and_rescaled_codes_are_invariant(balanced):
    base = mig(toy.identity(balanced), balanced)
    assert mig(toy.permuted(balanced, seed=3), balanced).score == base.score
    scaled = toy.rescaled(balanced, scales=[2.0, -0.5, 3.7, -11.0, 1e-3], offsets=[1.0, -4.0, 0.25, 100.0, 0.0])
    r = mig(scaled, balanced)
    assert r.score == base.score
    np.testing.assert_array_equal(r.mutual_information, base.mutual_information)


def test_mig_permuted_noisy_codes_exact(balanced):
    rng = np.random.default_rng(1)
    codes = balanced + 0.7 * rng.standard_normal(balanced.shape)
    base = mig(codes, balanced)
    order = np.array([3, 0, 4, 1, 2])
    r = mig(codes[:, order], balanced)
    assert r.score == base.score
    np.testing.assert_array_equal(r.mutual_information, base.mutual_information[order])
    np.testing.assert_array_equal(order[r.top_codes], base.top_codes)


def test_mig_random_constant_and_duplicated(balanced):
    assert mig(toy.random_codes(N_SAMPLES, 10, seed=2), balanced).score < 0.01
    r = mig(toy.constant_codes(N_SAMPLES, 10), balanced)
    assert r.score == 0.0
    np.testing.assert_array_equal(r.mutual_information, 0.0)
    r = mig(toy.duplicated(balanced), balanced)
    assert r.score == 0.0  # the duplicate has exactly the same information: the gap is 0
    np.testing.assert_array_equal(r.factor_gaps, 0.0)


def test_mig_single_code_gap_is_mi_over_entropy():
    grid = full_grid(4, 3)
    r = mig(grid[:, :1], grid)
    np.testing.assert_allclose(r.factor_gaps, [1.0, 0.0], atol=1e-12)
    assert r.score == pytest.approx(0.5, abs=1e-12)
    np.testing.assert_array_equal(top_two_gap(np.array([[0.3, 0.1]])), [0.3, 0.1])


def test_mig_continuous_factors_and_classes():
    rng = np.random.default_rng(4)
    factors = rng.uniform(size=(4_000, 2))
    # 20 equal-width code bins and 20 equal-width factor bins are the same partition: MI = H.
    r = mig(factors * 3.0 - 1.0, factors)
    np.testing.assert_allclose(np.diag(r.mutual_information), r.factor_entropy, rtol=1e-12)
    # classes given are used as they are: 64 grid classes are never re-binned to 20.
    grid = full_grid(64, 2)
    r = mig(grid, grid, classes=grid.astype(np.int64), bins=64)
    np.testing.assert_allclose(r.factor_entropy, np.log([64, 2]), rtol=1e-12)
    assert r.score == pytest.approx(1.0, abs=1e-12)


# --------------------------------------------------------------------------- SAP


def test_sap_continuous_identity_random_constant(balanced):
    r = sap(toy.identity(balanced), balanced)
    assert isinstance(r, SAPResult) and r.mode == "continuous"
    np.testing.assert_allclose(np.diag(r.score_matrix), 1.0, rtol=1e-12)
    assert r.score >= 0.99
    np.testing.assert_array_equal(r.top_codes, np.arange(N_FACTORS))
    assert sap(toy.random_codes(N_SAMPLES, 10, seed=5), balanced).score < 0.01
    r = sap(toy.constant_codes(N_SAMPLES, 10, value=3.0), balanced)
    assert r.score == 0.0
    np.testing.assert_array_equal(r.score_matrix, 0.0)


def test_sap_continuous_closed_form_half_correlation():
    rng = np.random.default_rng(6)
    f = rng.standard_normal((50_000, 1))
    codes = np.concatenate([f + rng.standard_normal(f.shape), rng.standard_normal(f.shape)], axis=1)
    r = sap(codes, f)
    # corr(f + e, f)^2 = var f / (var f + var e) = 1/2.
    assert r.score_matrix[0, 0] == pytest.approx(0.5, abs=0.01)
    assert r.score == pytest.approx(0.5, abs=0.01)


def test_sap_continuous_invariances(balanced):
    rng = np.random.default_rng(7)
    codes = balanced + rng.standard_normal(balanced.shape)
    base = sap(codes, balanced)
    order = np.array([2, 4, 0, 1, 3])
    r = sap(codes[:, order], balanced)
    assert r.score == base.score
    np.testing.assert_array_equal(r.score_matrix, base.score_matrix[order])
    r = sap(codes * np.array([2.0, -3.0, 0.1, -1e3, 7.0]) + 5.0, balanced)
    np.testing.assert_allclose(r.score_matrix, base.score_matrix, rtol=1e-9)
    assert r.score == pytest.approx(base.score, rel=1e-9)


def test_sap_discrete_reproduces_the_cap_threshold_does_not(balanced):
    identity = toy.identity(balanced)
    linear = sap(identity, balanced, mode="discrete")
    # One-vs-rest linear SVMs on one input reach only the extreme classes: ~0.2-0.3 accuracy, SAP ~0.2.
    assert np.all(np.diag(linear.score_matrix) < 0.4)
    assert 0.1 < linear.score < 0.3
    thresholds = sap(identity, balanced, mode="threshold")
    np.testing.assert_allclose(np.diag(thresholds.score_matrix), 1.0)
    assert thresholds.score >= 0.95
    assert thresholds.mode == "threshold"
    # A non-monotone code that keeps every class in its own interval is still a perfect threshold code.
    folded = (balanced - 4.6) ** 2
    assert sap(folded, balanced, mode="threshold").score >= 0.95


def test_sap_classifier_modes_random_constant_permuted(balanced):
    small = balanced[:3_000]
    rand = toy.random_codes(len(small), 6, seed=8)
    const = toy.constant_codes(len(small), 6)
    for mode in ("discrete", "threshold"):
        assert sap(rand, small, mode=mode).score < 0.05
        r = sap(const, small, mode=mode)
        assert r.score == 0.0
        base = sap(small, small, mode=mode, seed=3)
        order = np.array([1, 0, 4, 2, 3])
        p = sap(small[:, order], small, mode=mode, seed=3)
        assert p.score == base.score
        np.testing.assert_array_equal(p.score_matrix, base.score_matrix[order])


def test_sap_determinism_and_seed(balanced):
    rng = np.random.default_rng(9)
    codes = balanced[:2_000] + 2.0 * rng.standard_normal((2_000, N_FACTORS))
    for mode in SAP_MODES:
        a = sap(codes, balanced[:2_000], mode=mode, seed=11)
        b = sap(codes, balanced[:2_000], mode=mode, seed=11)
        assert a.to_dict() == b.to_dict()
    a = sap(codes, balanced[:2_000], mode="threshold", seed=11)
    c = sap(codes, balanced[:2_000], mode="threshold", seed=12)
    assert not np.array_equal(c.score_matrix, a.score_matrix)   # another split


# --------------------------------------------------------------------------- SAP discrete: vectorised solver


SAP_MODULE = importlib.import_module("factorbench.benchmark.metrics.sap")

SVM_SCENARIOS = ["random", "separable", "constant", "unbalanced", "two classes", "many classes", "discrete codes",
                 "offset and scale", "other C and split"]


def svm_scenario(name: str) -> tuple[np.ndarray, np.ndarray, dict]:
    """(codes, factor classes, sap keyword arguments) of a named test case, 1,500 samples."""
    rng = np.random.default_rng(SVM_SCENARIOS.index(name))
    n = 1_500
    y = rng.integers(0, 10, (n, 3))
    noise = rng.standard_normal((n, 4))
    if name == "random":
        return 3.0 * noise + 2.0, y, {}
    if name == "separable":                                   # each class its own value: the identity code
        return y[:, [0, 1, 2, 0]] * np.array([1.0, -2.5, 0.3, 7.0]) + np.array([0.0, 4.0, -1.0, 2.0]), y, {}
    if name == "constant":
        return np.full((n, 3), 2.5), y, {}
    if name == "unbalanced":
        skewed = rng.choice(6, size=(n, 2), p=[0.55, 0.25, 0.1, 0.05, 0.04, 0.01])
        return skewed[:, [0, 1, 0]] + 0.5 * noise[:, :3], skewed, {}
    if name == "two classes":
        binary = np.stack([rng.integers(0, 2, n), rng.uniform(size=n) < 0.1], axis=1).astype(np.int64)
        return np.concatenate([binary + 0.8 * noise[:, :2], noise[:, 2:3]], axis=1), binary, {}
    if name == "many classes":
        many = rng.integers(0, 40, (n, 1))
        return many + 3.0 * noise[:, :2], many, {}
    if name == "discrete codes":
        return np.round(2.0 * noise[:, :3]), y, {}
    if name == "offset and scale":
        return np.stack([1e6 + y[:, 0] + noise[:, 0], 1e-6 * (y[:, 1] + noise[:, 1])], axis=1), y, {}
    if name == "other C and split":
        return y[:, :2] + noise[:, :2], y, {"svm_C": 1.0, "test_fraction": 0.8, "seed": 5}
    raise AssertionError(name)


def discrete_both(monkeypatch, codes: np.ndarray, classes: np.ndarray, **kwargs) -> tuple[SAPResult, SAPResult]:
    """The discrete SAP with the default (vectorised) solver and with sklearn's LinearSVC per pair."""
    assert SAP_MODULE.DEFAULT_SVM_SOLVER == "vectorised"
    factors = classes.astype(np.float64)
    fast = sap(codes, factors, classes=classes, mode="discrete", **kwargs)
    with monkeypatch.context() as patch:
        patch.setattr(SAP_MODULE, "DEFAULT_SVM_SOLVER", "liblinear")
        reference = sap(codes, factors, classes=classes, mode="discrete", **kwargs)
    return fast, reference


@pytest.mark.parametrize("name", SVM_SCENARIOS)
def test_sap_discrete_vectorised_equals_liblinear(monkeypatch, name):
    codes, classes, kwargs = svm_scenario(name)
    fast, reference = discrete_both(monkeypatch, codes, classes, **kwargs)
    np.testing.assert_array_equal(fast.score_matrix, reference.score_matrix)
    assert fast.score == reference.score


@pytest.mark.parametrize("name", ["random", "separable", "unbalanced", "two classes", "many classes",
                                  "discrete codes", "offset and scale"])
def test_sap_discrete_coefficients_match_liblinear(name):
    """The replayed iterations end where liblinear does: (w, b) of every one-vs-rest line within 1e-9
    relative (measured: about 1e-11 at most) wherever no decision was within rounding of a tie."""
    codes, classes, kwargs = svm_scenario(name)
    labels = [np.unique(classes[:, k], return_inverse=True)[1].ravel() for k in range(classes.shape[1])]
    n_classes = [int(lab.max()) + 1 for lab in labels]
    svm_C = kwargs.get("svm_C", 0.01)
    blocks = SAP_MODULE._blocks(codes, labels, n_classes)
    problems = SAP_MODULE._sub_problems(blocks, labels, n_classes, svm_C)
    w, b, unsure = SAP_MODULE._tron(blocks, problems)
    assert unsure.mean() <= 0.2                               # the comparison below covers most lines
    for f, lab in enumerate(labels):
        cols = np.flatnonzero(problems.factor == f)
        for i in range(codes.shape[1]):
            svm = LinearSVC(C=svm_C, class_weight="balanced", dual=False).fit(codes[:, i:i + 1], lab)
            ours = np.stack([w[i, cols], b[i, cols]])
            theirs = np.stack([svm.coef_[:, 0], svm.intercept_])
            error = np.hypot(*(ours - theirs)) / np.hypot(*theirs)
            sure = ~unsure[i, cols]
            assert np.all(error[sure] <= 1e-9), (f, i, error.max())


def test_sap_discrete_replays_liblinear_not_the_exact_optimum():
    """liblinear stops at |grad f| <= tol min(n_pos, n_neg) / n |grad f(0)|, visibly short of the optimum on
    an informative code: the replay has liblinear's coefficients, not those of a tighter fit."""
    rng = np.random.default_rng(22)
    lab = rng.integers(0, 10, 1_500)
    code = (lab + 0.5 * rng.standard_normal(len(lab)))[:, None]
    blocks = SAP_MODULE._blocks(code, [lab], [10])
    w, b, unsure = SAP_MODULE._tron(blocks, SAP_MODULE._sub_problems(blocks, [lab], [10], 0.01))
    default = LinearSVC(C=0.01, class_weight="balanced", dual=False).fit(code, lab)
    tight = LinearSVC(C=0.01, class_weight="balanced", dual=False, tol=1e-12, max_iter=10_000).fit(code, lab)
    assert not unsure.any()
    ours = np.concatenate([w[0], b[0]])
    theirs = np.concatenate([default.coef_[:, 0], default.intercept_])
    optimum = np.concatenate([tight.coef_[:, 0], tight.intercept_])
    assert np.abs(ours - theirs).max() <= 1e-11
    assert np.abs(optimum - theirs).max() > 1e-5             # about 1.5e-4 here


def test_sap_discrete_refits_near_ties_with_liblinear(monkeypatch):
    codes, classes, _ = svm_scenario("random")
    calls = []
    fit = SAP_MODULE._liblinear_predict
    monkeypatch.setattr(SAP_MODULE, "_liblinear_predict", lambda *a: calls.append(a) or fit(*a))
    base = sap(codes, classes.astype(np.float64), classes=classes, mode="discrete")
    assert len(calls) <= 1                                    # a near-tie is rare on continuous codes
    calls.clear()
    monkeypatch.setattr(SAP_MODULE, "PREDICTION_TIE", np.inf)  # every pair is a near-tie: all refitted
    refitted = sap(codes, classes.astype(np.float64), classes=classes, mode="discrete")
    assert len(calls) == codes.shape[1] * classes.shape[1]
    np.testing.assert_array_equal(refitted.score_matrix, base.score_matrix)


def test_sap_discrete_chunks_give_the_same_matrix(monkeypatch):
    codes, classes, _ = svm_scenario("unbalanced")
    whole = sap(codes, classes.astype(np.float64), classes=classes, mode="discrete")
    monkeypatch.setattr(SAP_MODULE, "CHUNK_ELEMENTS", 1)        # one code at a time
    chunked = sap(codes, classes.astype(np.float64), classes=classes, mode="discrete")
    np.testing.assert_array_equal(chunked.score_matrix, whole.score_matrix)


def test_sap_discrete_single_training_class_and_unseen_test_class(monkeypatch):
    rng = np.random.default_rng(21)
    n = 400
    classes = np.stack([np.zeros(n, np.int64), rng.integers(0, 4, n)], axis=1)
    train, test = split_indices(n, 0.5, 0)
    classes[test[:3], 0] = 1                                  # factor 0: one class in training, two in test
    classes[test[:5], 1] = 4                                  # factor 1: class 4 only in the test split
    codes = rng.standard_normal((n, 3)) + classes[:, 1:2]
    fast, reference = discrete_both(monkeypatch, codes, classes)
    np.testing.assert_array_equal(fast.score_matrix, reference.score_matrix)
    np.testing.assert_array_equal(fast.score_matrix[:, 0], np.mean(classes[test, 0] == 0))


@st.composite
def svm_problems(draw):
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(8, 300))
    m = draw(st.integers(2, 6))
    classes = rng.integers(0, m, size=(n, 2))
    classes[:2] = [[0, 0], [1, 1]]
    kind = draw(st.sampled_from(["normal", "classes", "rounded", "constant"]))
    codes = rng.standard_normal((n, 2)) * draw(st.sampled_from([1e-3, 1.0, 50.0]))
    if kind == "classes":
        codes += classes * rng.uniform(-2, 2, 2)
    elif kind == "rounded":
        codes = np.round(codes)
    elif kind == "constant":
        codes[:, 0] = 0.5
    return codes, classes, seed % 100, draw(st.sampled_from([0.01, 1.0]))


@settings(max_examples=25, deadline=None)
@given(svm_problems())
def test_sap_discrete_vectorised_equals_liblinear_property(problem):
    codes, classes, seed, svm_C = problem
    factors = classes.astype(np.float64)
    fast = sap(codes, factors, classes=classes, mode="discrete", seed=seed, svm_C=svm_C)
    train, test = split_indices(len(codes), 0.5, seed)
    for k in range(classes.shape[1]):
        y_train = classes[train, k]
        for i in range(codes.shape[1]):
            if len(np.unique(y_train)) < 2:
                expected = np.mean(classes[test, k] == y_train[0])
            else:
                svm = LinearSVC(C=svm_C, class_weight="balanced", dual=False).fit(codes[train, i:i + 1], y_train)
                expected = np.mean(svm.predict(codes[test, i:i + 1]) == classes[test, k])
            assert fast.score_matrix[i, k] == expected


def test_adjusted_balanced_accuracy_closed_forms():
    truth = np.array([0, 0, 0, 0, 1, 1, 2, 2])
    assert adjusted_balanced_accuracy(truth, truth) == 1.0
    assert adjusted_balanced_accuracy(np.zeros(8, int), truth) == 0.0   # a constant guess: chance
    # recalls 1/2, 1, 0 -> balanced accuracy 1/2 -> (1/2 - 1/3) / (2/3) = 1/4
    pred = np.array([0, 0, 1, 1, 1, 1, 0, 0])
    assert adjusted_balanced_accuracy(pred, truth) == pytest.approx(0.25)
    assert adjusted_balanced_accuracy(np.array([1, 1]), np.array([1, 1])) == 0.0


def test_split_indices():
    train, test = split_indices(10, 0.3, seed=0)
    assert len(test) == 3 and len(train) == 7
    np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(10))
    a, b = split_indices(2, 0.99, seed=1)
    assert len(a) == 1 and len(b) == 1
    np.testing.assert_array_equal(split_indices(10, 0.3, seed=0)[1], test)
    assert not np.array_equal(split_indices(10, 0.3, seed=1)[1], test)


# --------------------------------------------------------------------------- modularity


def test_modularity_identity_and_full_grid(balanced):
    r = modularity(toy.identity(balanced), balanced)
    assert isinstance(r, ModularityResult)
    assert r.score >= 0.999
    np.testing.assert_array_equal(r.top_factors, np.arange(N_FACTORS))
    grid = full_grid(3, 4, 5)
    r = modularity(grid, grid)
    assert r.score == pytest.approx(1.0, abs=1e-12)
    assert r.informative.all()


def test_modularity_closed_form_two_factor_code():
    # code 0 = (f0, f1) jointly: I = ln 2 with each of f0, f1, 0 with f2 -> delta = 1/2, modularity 1/2.
    grid = full_grid(2, 2, 2)
    codes = np.stack([2 * grid[:, 0] + grid[:, 1], grid[:, 2]], axis=1)
    r = modularity(codes, grid)
    np.testing.assert_allclose(r.mutual_information[0], [math.log(2), math.log(2), 0.0], atol=1e-12)
    np.testing.assert_allclose(r.code_scores, [0.5, 1.0], atol=1e-12)
    assert r.score == pytest.approx(0.75, abs=1e-12)
    # with only f0, f1 as factors the joint code is not modular at all
    np.testing.assert_allclose(modularity(codes[:, :1], grid[:, :2]).code_scores, [0.0], atol=1e-12)


def test_modularity_matches_template_formula():
    rng = np.random.default_rng(10)
    mi = rng.uniform(0, 1, size=(7, 4))
    scores, informative = modularity_from_information(mi)
    theta = mi.max(axis=1)
    template = np.where(mi == theta[:, None], theta[:, None], 0.0)
    delta = ((mi - template) ** 2).sum(axis=1) / (theta ** 2 * (mi.shape[1] - 1))
    np.testing.assert_allclose(scores, 1.0 - delta, rtol=1e-12)
    assert informative.all()


def test_modularity_invariances(balanced):
    rng = np.random.default_rng(11)
    codes = balanced + 0.8 * rng.standard_normal(balanced.shape)
    base = modularity(codes, balanced)
    order = np.array([4, 2, 0, 3, 1])
    r = modularity(codes[:, order], balanced)
    assert r.score == base.score
    np.testing.assert_array_equal(r.code_scores, base.code_scores[order])
    identity = modularity(balanced, balanced)
    scaled = toy.rescaled(balanced, scales=[-1.0, 2.5, -0.01, 40.0, 1.0], offsets=[3.0, 0.0, -2.0, 1.0, 9.0])
    assert modularity(scaled, balanced).score == identity.score


def test_modularity_uninformative_codes_are_left_out(balanced):
    base = modularity(balanced, balanced)
    with_constant = np.concatenate([balanced, np.full((N_SAMPLES, 2), 4.2)], axis=1)
    r = modularity(with_constant, balanced)
    assert r.score == base.score
    np.testing.assert_array_equal(r.informative, [True] * N_FACTORS + [False, False])
    assert np.isnan(r.code_scores[-2:]).all()
    np.testing.assert_array_equal(r.top_factors[-2:], [-1, -1])
    r = modularity(toy.constant_codes(N_SAMPLES, 4), balanced)
    assert r.score == 0.0 and not r.informative.any()


def test_modularity_single_factor():
    grid = full_grid(6, 3)
    r = modularity(np.concatenate([grid, np.zeros((len(grid), 1))], axis=1), grid[:, :1])
    np.testing.assert_array_equal(r.code_scores[:1], [1.0])
    assert np.isnan(r.code_scores[2])
    assert r.score == 1.0


# --------------------------------------------------------------------------- explicitness


def test_explicitness_identity_closed_form(balanced):
    r = explicitness(toy.identity(balanced), balanced)
    assert isinstance(r, ExplicitnessResult)
    # A linear one-vs-rest score is monotone in the one informative code: class c (of n uniform classes)
    # is ranked above the c classes on one side only, AUC = max(c, n-1-c) / (n-1); mean over c = 7/9.
    closed = np.mean([max(c, N_CLASSES - 1 - c) / (N_CLASSES - 1) for c in range(N_CLASSES)])
    assert closed == pytest.approx(7 / 9)
    assert r.score == pytest.approx(closed, abs=0.01)
    assert r.train_score == pytest.approx(closed, abs=0.01)
    assert r.n_train + r.n_test == N_SAMPLES


def _dlib_explicitness(x_train, y_train, x_test, y_test, classifier):
    """disentanglement_lib's explicitness of one factor, written out: one classifier on the standardised
    code, classes ranked by ``predict_proba`` (normalised across classes), macro ROC-AUC."""
    from sklearn.metrics import roc_auc_score
    from sklearn.preprocessing import MultiLabelBinarizer

    mean, std = x_train.mean(axis=0), x_train.std(axis=0)
    clf = classifier.fit((x_train - mean) / std, y_train)
    mlb = MultiLabelBinarizer()
    return roc_auc_score(mlb.fit_transform(y_test[:, None]), clf.predict_proba((x_test - mean) / std))


def test_explicitness_of_the_identity_code_against_disentanglement_lib():
    # the identity code on 10 uniform classes: factorbench 7/9, disentanglement_lib's procedure 1.000
    # with today's LogisticRegression() (multinomial) and 0.977 here with the old default (liblinear,
    # one-vs-rest, probabilities normalised across classes); METRICS.md says so
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, 6_000)
    x = y[:, None].astype(float)
    today = _dlib_explicitness(x[:1_000], y[:1_000], x[1_000:], y[1_000:], LogisticRegression())
    old = _dlib_explicitness(x[:1_000], y[:1_000], x[1_000:], y[1_000:],
                             OneVsRestClassifier(LogisticRegression(solver="liblinear")))
    ours = explicitness(x, x).score
    assert today == pytest.approx(1.0, abs=1e-3)
    assert 0.97 < old < 0.99
    assert ours == pytest.approx(7 / 9, abs=0.01)
    text = " ".join((Path(__file__).resolve().parents[1] / "benchmark" / "METRICS.md").read_text().split())
    assert "(the same as disentanglement_lib)" not in text
    assert "0.976" in text and "1.000" in text and "`max_iter=1000`" in text


def test_explicitness_explicit_codes_score_one():
    grid = np.tile(full_grid(2, 2, 2), (200, 1))
    assert explicitness(grid, grid).score >= 0.999          # binary factors: the identity code is explicit
    multi = np.tile(full_grid(4, 3), (150, 1)).astype(np.int64)
    one_hot = np.concatenate([np.eye(4)[multi[:, 0]], np.eye(3)[multi[:, 1]]], axis=1)
    r = explicitness(one_hot, multi.astype(np.float64))
    assert r.score >= 0.999 and r.train_score >= 0.999
    np.testing.assert_array_less(0.999, r.factor_scores)


def test_explicitness_random_and_constant(balanced):
    small = balanced[:3_000]
    r = explicitness(toy.random_codes(len(small), 6, seed=12), small)
    assert r.score == pytest.approx(0.5, abs=0.03)
    r = explicitness(toy.constant_codes(len(small), 6), small)
    assert r.score == 0.5 and r.train_score == 0.5
    np.testing.assert_array_equal(r.factor_scores, 0.5)


def test_explicitness_determinism_and_seed(balanced):
    rng = np.random.default_rng(13)
    codes = balanced[:2_000] + 3.0 * rng.standard_normal((2_000, N_FACTORS))
    a = explicitness(codes, balanced[:2_000], seed=1)
    assert a.to_dict() == explicitness(codes, balanced[:2_000], seed=1).to_dict()
    assert explicitness(codes, balanced[:2_000], seed=2).score != a.score


def test_roc_auc_matches_sklearn_with_ties():
    rng = np.random.default_rng(14)
    scores = rng.integers(0, 5, size=300).astype(float)
    positive = rng.uniform(size=300) < 0.3
    assert roc_auc(scores, positive) == pytest.approx(roc_auc_score(positive, scores), abs=1e-12)


# --------------------------------------------------------------------------- ranges (property tests)


@st.composite
def small_problems(draw):
    seed = draw(st.integers(0, 2**31 - 1))
    n = draw(st.integers(12, 60))
    k = draw(st.integers(1, 3))
    d = draw(st.integers(1, 4))
    rng = np.random.default_rng(seed)
    classes = rng.integers(0, draw(st.integers(2, 5)), size=(n, k))
    classes[0], classes[1] = 0, 1                           # every factor takes at least two classes
    codes = rng.standard_normal((n, d))
    kind = draw(st.sampled_from(["random", "constant", "factor", "mixed"]))
    if kind == "constant":
        codes[:] = 1.5
    elif kind == "factor":
        codes[:, 0] = classes[:, 0]
    elif kind == "mixed":
        codes[:, 0] = 0.0
        codes[:, -1] = classes[:, -1] * 2.0 + 0.1 * codes[:, -1]
    return codes, classes.astype(np.float64), seed % 1000


@settings(max_examples=25, deadline=None)
@given(small_problems())
def test_scores_lie_in_unit_interval(problem):
    codes, factors, seed = problem
    results = [mig(codes, factors), modularity(codes, factors),
               explicitness(codes, factors, seed=seed)]
    results += [sap(codes, factors, mode=mode, seed=seed) for mode in SAP_MODES]
    for r in results:
        assert 0.0 <= r.score <= 1.0
    m, mod, ex = results[:3]
    assert np.all((m.factor_gaps >= 0) & (m.factor_gaps <= 1))
    assert np.all(m.mutual_information >= 0)
    assert np.all(m.mutual_information <= m.factor_entropy + 1e-12)
    scored = mod.code_scores[mod.informative]
    assert np.all((scored >= 0) & (scored <= 1))
    assert 0.0 <= ex.train_score <= 1.0
    for r in results[3:]:
        assert np.all((r.score_matrix >= 0) & (r.score_matrix <= 1))


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("call, message", [
    (lambda c, f: mig(c, f, bins=1), "bins must be an integer >= 2"),
    (lambda c, f: mig(c, f, bins=2.5), "bins must be an integer"),
    (lambda c, f: mig(c, f[:-1]), "rows but the codes have"),
    (lambda c, f: mig(c[:, 0], f), "2-D"),
    (lambda c, f: mig(c, f, factor_bins=1), "factor_bins"),
    (lambda c, f: mig(c, np.zeros_like(f)), "constant"),
    (lambda c, f: mig(c, f, classes=np.zeros(f.shape, int)), "single class"),
    (lambda c, f: mig(c, f, classes=np.zeros((3, 2), int)), "shape"),
    (lambda c, f: sap(c, f, mode="linear"), "unknown SAP mode 'linear'"),
    (lambda c, f: sap(c, f, mode="discrete", svm_C=0), "svm_C must be a positive"),
    (lambda c, f: sap(c, f, test_fraction=0.0), "test_fraction must be a number strictly between 0 and 1"),
    (lambda c, f: sap(c, f, test_fraction=1.5), "strictly between 0 and 1"),
    (lambda c, f: sap(c, f, seed=-1), "seed must be a non-negative integer"),
    (lambda c, f: modularity(c, f, bins=0), "bins"),
    (lambda c, f: modularity(np.full_like(c, np.nan), f), "NaN or inf"),
    (lambda c, f: explicitness(c, f, C=-1.0), "C must be a positive finite number"),
    (lambda c, f: explicitness(c, f, max_iter=0), "max_iter"),
    (lambda c, f: explicitness(c, f, test_fraction=True), "test_fraction"),
    (lambda c, f: explicitness(c, f, seed=1.5), "seed"),
])
def test_validation_errors(call, message):
    rng = np.random.default_rng(0)
    factors = rng.integers(0, 3, size=(40, 2)).astype(np.float64)
    factors[:2] = [[0, 0], [1, 1]]
    codes = rng.standard_normal((40, 3))
    with pytest.raises(MetricInputError, match=message):
        call(codes, factors)
