"""D_LSBD (Tonnaer et al. 2022, eqs. 8-10): closed-form oracles on the torus and object grids, a
brute-force reference, invariances, ranges and validation."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factorbench.benchmark.metrics import MetricInputError
from factorbench.benchmark.metrics.lsbd import d_lsbd, d_lsbd_objects

GRID = 64
N = GRID * GRID


def angles(*sizes):
    """Angle arrays 2 pi j / n_k on the full grid, one per axis (indexing 'ij')."""
    return np.meshgrid(*[2 * np.pi * np.arange(n) / n for n in sizes], indexing="ij")


def torus(f1=1, f2=1, n=GRID):
    t1, t2 = angles(n, n)
    return np.stack([np.cos(f1 * t1), np.sin(f1 * t1), np.cos(f2 * t2), np.sin(f2 * t2)], axis=-1)


def reference(codes, omega_list):
    """Straight from eqs. (8)-(10): loop over subgroups and omegas, explicit rotation matrices,
    SVD-based PCA (each axis signed so that its largest entry is positive, the metric's convention;
    the other sign swaps omega and -omega), whitening by sqrt(2 * variance) (N - 1 denominator), one
    mean over the grid."""
    sizes = codes.shape[:-1]
    n_total = int(np.prod(sizes))
    grid_angles = [a.reshape(-1) for a in angles(*sizes)]
    out = np.zeros((len(sizes), len(omega_list)))
    for k in range(len(sizes)):
        x = (codes - codes.mean(axis=k, keepdims=True)).reshape(n_total, -1)
        _, sv, vt = np.linalg.svd(x, full_matrices=False)
        axes = vt[:2] * np.sign(vt[:2][np.arange(2), np.abs(vt[:2]).argmax(axis=1)])[:, None]
        proj = x @ axes.T / np.sqrt(2 * sv[:2] ** 2 / (n_total - 1))
        for w, omega in enumerate(omega_list):
            phi = -omega * grid_angles[k]
            rot = np.stack([np.cos(phi) * proj[:, 0] - np.sin(phi) * proj[:, 1],
                            np.sin(phi) * proj[:, 0] + np.cos(phi) * proj[:, 1]], axis=1)
            out[k, w] = np.mean(np.sum((rot - rot.mean(axis=0)) ** 2, axis=1))
    return out


# --------------------------------------------------------------------------- oracles on the torus


def test_ideal_encoder_scores_zero_with_unit_frequencies():
    result = d_lsbd(torus())
    assert result.score == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(result.subgroup_scores, 0.0, atol=1e-12)
    assert np.abs(result.omegas).tolist() == [1, 1]
    assert not result.degenerate.any()
    assert result.chance == 1 - 1 / N


@pytest.mark.parametrize("d", [4, 10])
def test_invertible_linear_map_of_the_ideal_code_still_scores_zero(d):
    mix = np.random.default_rng(3).standard_normal((4, d))  # full rank 4 (injective for d >= 4)
    assert np.linalg.matrix_rank(mix) == 4
    result = d_lsbd(torus() @ mix + 5.0)
    assert result.score == pytest.approx(0.0, abs=1e-10)
    assert np.abs(result.omegas).tolist() == [1, 1]


def test_higher_frequencies_are_found():
    result = d_lsbd(torus(f1=2, f2=3))
    assert result.score == pytest.approx(0.0, abs=1e-12)
    assert np.abs(result.omegas).tolist() == [2, 3]
    # outside the searched range the best frequency is not available
    limited = d_lsbd(torus(f1=2, f2=3), omegas=range(-1, 2))
    assert limited.subgroup_scores.min() > 0.5


@pytest.mark.parametrize("d", [4, 10])
def test_random_gaussian_code_scores_just_below_one_minus_one_over_n(d):
    """For unstructured codes the rotated mean at each omega != 0 has squared norm ~ Exp(mean 1/N),
    so D^(k) = 1 - 1/N - max over 20 such terms: between 1 - 16/N and 1 - 1/N (the lower bound fails
    with probability about 20 exp(-15) per subgroup), i.e. about 0.999 for the 64 x 64 grid."""
    result = d_lsbd(np.random.default_rng(d).standard_normal((GRID, GRID, d)))
    assert np.all(result.subgroup_scores <= 1 - 1 / N + 1e-12)
    assert np.all(result.subgroup_scores >= 1 - 16 / N)
    assert result.score == pytest.approx(0.999, abs=0.001)


@pytest.mark.parametrize("codes", [
    np.random.default_rng(0).standard_normal((GRID, GRID, 4)),
    torus(),
    torus(f1=2) * 100.0 - 3.0,
])
def test_omega_zero_gives_exactly_one_minus_one_over_n(codes):
    result = d_lsbd(codes, omegas=[0])
    np.testing.assert_allclose(result.subgroup_scores, 1 - 1 / N, rtol=0, atol=1e-12)
    assert result.omegas.tolist() == [0, 0]


def test_omega_zero_on_an_uneven_three_subgroup_grid():
    codes = np.random.default_rng(1).standard_normal((5, 7, 9, 3))
    result = d_lsbd(codes, omegas=[0])
    np.testing.assert_allclose(result.subgroup_scores, 1 - 1 / 315, rtol=0, atol=1e-12)
    assert result.chance == pytest.approx(1 - 1 / 315)


def test_matches_brute_force_reference():
    rng = np.random.default_rng(7)
    t1, t2, t3 = angles(6, 7, 8)
    structured = np.stack([np.cos(t1), np.sin(t1), np.cos(2 * t2) + 0.3 * np.cos(t3), np.sin(2 * t2)], axis=-1)
    for codes in (rng.standard_normal((6, 7, 8, 5)), structured @ rng.standard_normal((4, 6))
                  + 0.2 * rng.standard_normal((6, 7, 8, 6))):
        omega_list = list(range(-4, 5))
        result = d_lsbd(codes, omegas=omega_list)
        np.testing.assert_allclose(result.scores_by_omega, reference(codes, omega_list), atol=1e-10)
        np.testing.assert_allclose(result.subgroup_scores, result.scores_by_omega.min(axis=1), atol=1e-15)


def test_phase_coupled_to_another_factor_is_penalised():
    """Subgroup 1's circle turns with t2 as well: per orbit it is perfectly equivariant, but not over
    the grid. Eq. (9) takes one mean over the whole grid, so D^(1) stays near its maximum."""
    t1, t2 = angles(GRID, GRID)
    coupled = np.stack([np.cos(t1 + t2), np.sin(t1 + t2), np.cos(t2), np.sin(t2)], axis=-1)
    result = d_lsbd(coupled)
    assert result.subgroup_scores[0] > 0.99


def test_sum_reduction_reproduces_the_published_tables_scale():
    codes = np.random.default_rng(2).standard_normal((GRID, GRID, 4))
    mean = d_lsbd(codes)
    total = d_lsbd(codes, reduction="sum")
    assert total.score == pytest.approx(2 * mean.score)
    assert total.score > 1.9  # unstructured codes: ~2 (1 - 1/N), as CC-VAE's 1.905 on Square
    assert total.chance == pytest.approx(2 * (1 - 1 / N))


# --------------------------------------------------------------------------- invariances and degenerate codes


def test_permuting_rescaling_offsetting_and_rotating_the_code_change_nothing():
    rng = np.random.default_rng(4)
    codes = torus() @ rng.standard_normal((4, 6)) + 0.3 * rng.standard_normal((GRID, GRID, 6))
    base = d_lsbd(codes)
    q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    for variant in (codes[..., [3, 1, 5, 0, 2, 4]], 7.5 * codes - 2.0, codes @ q):
        np.testing.assert_allclose(d_lsbd(variant).subgroup_scores, base.subgroup_scores, atol=1e-10)


def test_constant_extra_dimension_changes_nothing():
    codes = np.concatenate([torus(), np.full((GRID, GRID, 1), 3.0)], axis=-1)
    assert d_lsbd(codes).score == pytest.approx(0.0, abs=1e-12)


def test_constant_and_rank_one_codes_score_the_maximum():
    constant = d_lsbd(np.full((8, 8, 3), 2.0))
    assert constant.degenerate.all()
    np.testing.assert_allclose(constant.subgroup_scores, 1 - 1 / 64)
    assert constant.omegas.tolist() == [0, 0]
    inexact = d_lsbd(np.full((GRID, GRID, 4), 0.1))  # the orbit means round: centred values ~1e-17
    assert inexact.degenerate.all() and inexact.score == pytest.approx(1 - 1 / N)
    assert d_lsbd(torus() + 1e6).score == pytest.approx(0.0, abs=1e-8)  # a large offset is no degeneracy
    t1, t2 = angles(16, 16)
    # subgroup 1 only in one dimension (no 2-D representation), subgroup 2 ideal
    half = np.stack([np.cos(t1), np.zeros_like(t1), np.cos(t2), np.sin(t2)], axis=-1)
    result = d_lsbd(half)
    assert result.degenerate.tolist() == [True, False]
    assert result.subgroup_scores[0] == pytest.approx(1 - 1 / 256)
    assert result.subgroup_scores[1] == pytest.approx(0.0, abs=1e-12)


def test_projections_are_whitened():
    result = d_lsbd(torus() @ np.random.default_rng(0).standard_normal((4, 5)))
    assert result.projections.shape == (2, GRID, GRID, 2)
    for k in range(2):
        p = result.projections[k].reshape(-1, 2)
        np.testing.assert_allclose(p.T @ p / (N - 1), 0.5 * np.eye(2), atol=1e-10)
    json.dumps(result.to_dict())
    assert set(result.scalars()) == {"score"}


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), sizes=st.lists(st.integers(3, 6), min_size=1, max_size=3),
       d=st.integers(2, 5))
def test_scores_lie_between_zero_and_one_minus_one_over_n(seed, sizes, d):
    codes = np.random.default_rng(seed).standard_normal((*sizes, d))
    result = d_lsbd(codes, omegas=range(-3, 4))
    n_total = int(np.prod(sizes))
    assert np.all(result.subgroup_scores >= 0)
    assert np.all(result.subgroup_scores <= 1 - 1 / n_total + 1e-12)
    assert 0 <= result.score <= 1 - 1 / n_total + 1e-12
    np.testing.assert_allclose(result.scores_by_omega[:, 3], 1 - 1 / n_total, atol=1e-12)  # omega = 0
    assert set(result.omegas.tolist()) <= set(range(-3, 4))


# --------------------------------------------------------------------------- objects x rotations


def object_codes(freqs, n_rot=GRID, d=7, seed=0):
    rng = np.random.default_rng(seed)
    t = 2 * np.pi * np.arange(n_rot) / n_rot
    out = []
    for f in freqs:
        base = np.stack([np.cos(f * t), np.sin(f * t)], axis=-1)
        out.append(base @ rng.standard_normal((2, d)) + rng.standard_normal(d))  # a per-object base point
    return np.stack(out)


def test_objects_with_ideal_codes_score_zero():
    result = d_lsbd_objects(object_codes([1] * 20))
    assert result.score == pytest.approx(0.0, abs=1e-10)
    assert result.object_scores.shape == (20,)
    assert set(np.abs(result.omegas).tolist()) == {1}
    assert result.chance == 1 - 1 / GRID


def test_objects_per_object_and_shared_omega():
    codes = object_codes([1, 1, 2, 3], seed=1)
    per_object = d_lsbd_objects(codes)
    shared = d_lsbd_objects(codes, omega_search="shared")
    assert per_object.score == pytest.approx(0.0, abs=1e-10)
    assert np.abs(per_object.omegas).tolist() == [1, 1, 2, 3]
    assert len(set(shared.omegas.tolist())) == 1
    assert shared.score > 0.4
    assert np.all(per_object.object_scores <= shared.object_scores + 1e-12)


def test_objects_random_and_omega_zero():
    codes = np.random.default_rng(3).standard_normal((30, 72, 7))
    zero = d_lsbd_objects(codes, omegas=[0])
    np.testing.assert_allclose(zero.object_scores, 1 - 1 / 72, rtol=0, atol=1e-12)
    result = d_lsbd_objects(codes)
    assert np.all(result.object_scores <= 1 - 1 / 72 + 1e-12)
    assert result.score == pytest.approx(1 - 1 / 72, abs=0.1)


def test_objects_match_the_single_subgroup_grid():
    codes = np.random.default_rng(5).standard_normal((3, 10, 4))
    result = d_lsbd_objects(codes, omegas=range(-3, 4))
    for o in range(3):
        alone = d_lsbd(codes[o], omegas=range(-3, 4))
        assert result.object_scores[o] == pytest.approx(alone.score, abs=1e-12)
        assert result.omegas[o] == alone.omegas[0]


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("codes, message", [
    (np.zeros(5), "at least 2 dimensions"),
    (np.zeros((8, 8, 1)), "1 code dimension"),
    (np.zeros((8, 2, 4)), "at least 3 elements .*axis 1 has 2"),
    (np.full((4, 4, 2), np.nan), "NaN or inf"),
    (np.array([["a", "b"]] * 4), "real numeric"),
])
def test_d_lsbd_validation(codes, message):
    with pytest.raises(MetricInputError, match=message):
        d_lsbd(codes)


def test_d_lsbd_option_validation():
    codes = torus(n=8)
    with pytest.raises(MetricInputError, match="omegas is empty"):
        d_lsbd(codes, omegas=[])
    with pytest.raises(MetricInputError, match="must hold integers"):
        d_lsbd(codes, omegas=[0, 1.5])
    with pytest.raises(MetricInputError, match="iterable of integers"):
        d_lsbd(codes, omegas=3)
    with pytest.raises(MetricInputError, match="unknown reduction"):
        d_lsbd(codes, reduction="max")


def test_d_lsbd_objects_validation():
    with pytest.raises(MetricInputError, match=r"\(n_objects, n_rotations, D\)"):
        d_lsbd_objects(np.zeros((4, 8)))
    with pytest.raises(MetricInputError, match="use d_lsbd"):
        d_lsbd_objects(np.zeros((2, 4, 8, 3)))
    with pytest.raises(MetricInputError, match="at least 3 elements"):
        d_lsbd_objects(np.zeros((5, 2, 3)))
    with pytest.raises(MetricInputError, match="unknown omega_search"):
        d_lsbd_objects(object_codes([1, 1], n_rot=8), omega_search="best")
