"""Samplers and the intervention metrics (BetaVAE and FactorVAE scores): oracle codes at the maximum,
noise and constant codes near chance, invariances, real images, dataset files, determinism, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factorbench.benchmark import toy as oracles
from factorbench.benchmark.dataset import load
from factorbench.benchmark.metrics import MetricInputError
from factorbench.benchmark.metrics.intervention import (BetaVAEResult, FactorVAEResult, beta_vae_score,
                                                        factor_vae_score)
from factorbench.benchmark.metrics.samplers import (FactorSampler, GeneratorSampler, GridSampler, check_sampler,
                                                    grid_classes, sample_factor_values)
from factorbench.generators import Factor, get, write_dataset

FACTORS = (Factor("size", "continuous", values=tuple(np.linspace(0.5, 1.0, 8))),
           Factor("shape", "categorical", values=tuple(float(v) for v in range(9))),
           Factor.cyclic_grid("angle", 10))
SHAPE = (8, 9, 10)
SMALL = dict(batch_size=16, n_train=300, n_eval=300)  # small and quick; the defaults are timed in the report
K = len(FACTORS)


def grid_values(factors=FACTORS) -> np.ndarray:
    """Every grid point's factor values, in C order."""
    axes = [np.asarray(f.values) for f in factors]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(factors))


def sampler_of(codes: np.ndarray) -> GridSampler:
    return GridSampler(FACTORS, codes)


@pytest.fixture(scope="module")
def identity_codes() -> np.ndarray:
    return oracles.identity(grid_values())


def both(sampler, encoder=None, **kw):
    return beta_vae_score(sampler, encoder, **{**SMALL, **kw}), factor_vae_score(sampler, encoder, **{**SMALL, **kw})


# --------------------------------------------------------------------------- oracles


def test_identity_codes_score_one(identity_codes):
    beta, factor = both(sampler_of(identity_codes))
    assert isinstance(beta, BetaVAEResult) and isinstance(factor, FactorVAEResult)
    assert beta.score == beta.eval_accuracy >= 0.99 and beta.train_accuracy >= 0.99
    assert factor.score == factor.eval_accuracy == factor.train_accuracy == 1.0
    assert factor.num_active_dims == K and factor.active_dims.tolist() == [True] * K
    # every vote on the diagonal: code d is the lowest-variance code exactly when factor d is fixed
    assert factor.votes.shape == (K, K) and factor.votes.sum() == SMALL["n_train"]
    assert np.array_equal(factor.votes, np.diag(np.diag(factor.votes)))
    assert set(beta.scalars()) == {"score"} and beta.to_dict()["score"] == beta.score


def test_permuted_and_rescaled_codes_keep_the_scores(identity_codes):
    base_beta, base_factor = both(sampler_of(identity_codes))
    codes = oracles.rescaled(oracles.permuted(identity_codes, seed=3), scales=[0.3, -4.0, 25.0],
                             offsets=[1.0, 0.0, -7.0])
    beta, factor = both(sampler_of(codes))
    assert beta.score >= 0.99
    assert factor.score == base_factor.score == 1.0 and factor.num_active_dims == K
    # the votes follow the permutation of the code dimensions
    order = np.random.default_rng(3).permutation(K)
    order = np.roll(order, 1) if np.array_equal(order, np.arange(K)) else order
    assert np.array_equal(factor.votes, base_factor.votes[order])


def test_random_codes_score_near_chance():
    codes = oracles.random_codes(math.prod(SHAPE), 5, seed=1)
    beta, factor = both(sampler_of(codes), n_eval=1_000)
    # chance is 1/3; the standard error of an accuracy over 1,000 points is about 0.015
    assert abs(factor.score - 1 / K) < 0.08
    assert factor.num_active_dims == 5
    assert beta.score < 0.45
    assert factor.train_accuracy >= factor.score - 0.08  # majority votes fit their own points at least as well


def test_constant_codes_score_zero_without_crashing():
    codes = oracles.constant_codes(math.prod(SHAPE), 4, value=2.5)
    beta, factor = both(sampler_of(codes), n_eval=1_000)
    assert factor.score == factor.train_accuracy == 0.0
    assert factor.num_active_dims == 0 and not factor.active_dims.any()
    assert factor.votes.shape == (4, K) and not factor.votes.any()
    assert np.array_equal(factor.global_std, np.zeros(4))
    # all features are 0: the classifier predicts one class, right about 1/3 of the time
    assert 0.25 < beta.score < 0.42


def test_constant_dimension_is_pruned_and_not_counted(identity_codes):
    codes = np.concatenate([identity_codes, np.full((len(identity_codes), 1), 7.0)], axis=1)
    factor = factor_vae_score(sampler_of(codes), **SMALL)
    assert factor.num_active_dims == K  # not D = 4 (disentanglement_lib would report 4)
    assert factor.active_dims.tolist() == [True, True, True, False]
    assert factor.score == 1.0 and not factor.votes[3].any()
    assert beta_vae_score(sampler_of(codes), **SMALL).score >= 0.99


def test_pruning_threshold_counts_low_variance_codes(identity_codes):
    tiny = identity_codes[:, :1] * 1e-3  # std about 1.5e-4 < 0.05: pruned; with a lower threshold it counts
    codes = np.concatenate([identity_codes, tiny], axis=1)
    assert factor_vae_score(sampler_of(codes), **SMALL).num_active_dims == K
    kept = factor_vae_score(sampler_of(codes), prune_threshold=1e-5, **SMALL)
    assert kept.num_active_dims == K + 1 and kept.score == 1.0  # the copy of factor 0 votes for factor 0 too


def test_pruning_every_code_scores_zero_and_says_so(identity_codes):
    # the original rule: every std below 0.05 leaves no active code and the score is 0, whatever the codes
    # encode; the same codes x100 score 1. The result says so instead of returning a silent 0
    small = identity_codes * 0.004  # stds about 0.003
    pruned = factor_vae_score(sampler_of(small), **SMALL)
    assert pruned.score == 0.0 and pruned.num_active_dims == 0
    (warning,) = pruned.warnings
    assert "3 of 3 codes have a std below the pruning threshold 0.05" in warning and "no code is left" in warning
    assert pruned.to_dict()["warnings"] == [warning]
    scaled = factor_vae_score(sampler_of(small * 100), **SMALL)
    assert scaled.score == 1.0 and scaled.warnings == ()


def test_pruned_and_constant_codes_are_named_in_the_warnings(identity_codes):
    codes = np.concatenate([identity_codes, identity_codes[:, :1] * 1e-3, np.full((len(identity_codes), 1), 7.0)],
                           axis=1)
    factor = factor_vae_score(sampler_of(codes), **SMALL)
    (warning,) = factor.warnings
    assert "2 of 5 codes have a std below" in warning and "dimensions [3, 4]" in warning
    assert "constant: [4]" in warning and "no code is left" not in warning
    beta = beta_vae_score(sampler_of(codes), **SMALL)
    (warning,) = beta.warnings
    assert warning.startswith("1 of 5 code dimensions are constant") and "(dimension [4])" in warning
    assert beta_vae_score(sampler_of(identity_codes), **SMALL).warnings == ()


def test_duplicated_codes_still_score_one(identity_codes):
    factor = factor_vae_score(sampler_of(oracles.duplicated(identity_codes)), **SMALL)
    assert factor.score == 1.0 and factor.num_active_dims == 2 * K


def test_one_code_for_two_factors_is_penalised(identity_codes):
    # codes: factor 0 + 10 * factor 1 (both readable, but in one dimension) and factor 2
    mixed = np.stack([identity_codes[:, 0] + 10 * identity_codes[:, 1], identity_codes[:, 2]], axis=1)
    factor = factor_vae_score(sampler_of(mixed), **SMALL)
    assert 0.4 < factor.score < 0.8  # two of three factors are told apart at best: about 2/3


# --------------------------------------------------------------------------- images


def square_encoder(images: np.ndarray) -> np.ndarray:
    """The square's position as (cos, sin) of the circular centroid of its rows and of its columns."""
    w = images[..., 0].astype(np.float64)
    angle = 2 * np.pi * np.arange(w.shape[1]) / w.shape[1]
    rows, cols = w.sum(axis=2), w.sum(axis=1)
    out = [m @ f(angle) / m.sum(axis=1) for m in (rows, cols) for f in (np.cos, np.sin)]
    return np.stack(out, axis=1)


IMAGE_RUN = dict(batch_size=8, n_train=60, n_eval=40, n_variance=200)


def test_generator_sampler_renders_and_scores_the_square():
    sampler = GeneratorSampler(get("square"))
    assert sampler.num_factors == 2 and isinstance(sampler, FactorSampler)
    values = sampler.sample(5, np.random.default_rng(0))
    assert values.shape == (5, 2) and np.isin(values, sampler.factors[0].values).all()
    images = sampler.observe(values)
    assert images.shape == (5, 64, 64, 3) and images.dtype == np.uint8
    beta = beta_vae_score(sampler, square_encoder, batch_size=8, n_train=60, n_eval=40)
    factor = factor_vae_score(sampler, square_encoder, **IMAGE_RUN)
    assert beta.score == 1.0
    assert factor.score == 1.0 and factor.num_active_dims == 4
    assert factor.votes[:2, 1].sum() == 0 and factor.votes[2:, 0].sum() == 0  # rows for factor 0, columns for 1


def test_generator_sampler_draws_continuous_factors_over_their_interval(toy):
    sampler = GeneratorSampler(toy)
    values = sampler.sample(4_000, np.random.default_rng(0))
    for j, f in enumerate(toy.factors()):
        assert f.low <= values[:, j].min() and values[:, j].max() < f.high
        assert abs(values[:, j].mean() - (f.low + f.high) / 2) < 0.03 * (f.high - f.low)
    assert sampler.observe(values[:3]).shape == (3, 8, 8, 1)
    # the image is a linear function of (a, cos b): its mean pixel reads them back, not b's sign
    encoder = lambda imgs: np.stack([imgs[:, :, -1, 0].mean(1), imgs[:, -1, :, 0].mean(1)], 1) / 255.0
    assert factor_vae_score(sampler, encoder, **SMALL).score > 0.9


@pytest.fixture(scope="module")
def square_file(tmp_path_factory) -> str:
    return str(write_dataset(get("square"), tmp_path_factory.mktemp("square") / "square.h5", progress=False))


def test_grid_sampler_on_a_dataset_file_matches_the_generator(square_file):
    with load(square_file) as ds:
        from_file = GridSampler.from_dataset(ds)
        assert from_file.grid_shape == (64, 64) and from_file.rows is None
        values = from_file.sample(50, np.random.default_rng(4))
        assert np.array_equal(from_file.observe(values), get("square").render(values))
        # the file's lazy images and the renderer give the same observations, hence the same scores
        for fn in (beta_vae_score, factor_vae_score):
            kw = IMAGE_RUN if fn is factor_vae_score else dict(batch_size=8, n_train=60, n_eval=40)
            a = fn(from_file, square_encoder, **kw)
            b = fn(GeneratorSampler(get("square")), square_encoder, **kw)
            assert a.to_dict() == b.to_dict() and a.score == 1.0


def test_grid_sampler_from_a_shuffled_view_and_from_codes(square_file):
    with load(square_file) as ds:
        order = np.random.default_rng(0).permutation(len(ds))
        view = ds.subset(order)
        shuffled = GridSampler.from_dataset(view)
        assert shuffled.rows is not None
        values = shuffled.sample(20, np.random.default_rng(1))
        assert np.array_equal(shuffled.observe(values), GridSampler.from_dataset(ds).observe(values))
        # precomputed codes, one row per sample of the view in its order: no encoder needed
        codes = GridSampler.from_dataset(view, codes=view.factors)
        np.testing.assert_allclose(codes.observe(values), values)
        assert factor_vae_score(codes, **SMALL).score == 1.0
        assert GridSampler.from_dataset(square_file, codes=ds.factors).observe(values).shape == (20, 2)


def test_from_dataset_rejects_partial_grids_and_continuous_data(square_file, tmp_path, toy):
    with load(square_file) as ds:
        with pytest.raises(MetricInputError, match="not the full grid"):
            GridSampler.from_dataset(ds.subset(np.arange(100)))
        with pytest.raises(MetricInputError, match="exactly once"):
            GridSampler.from_dataset(ds.subset(np.r_[0, np.arange(4095)]))
        with pytest.raises(MetricInputError, match=r"codes must have shape \(4096, D\)"):
            GridSampler.from_dataset(ds, codes=np.zeros((10, 2)))
    path = write_dataset(toy, tmp_path / "toy.h5", n=20, progress=False)
    with load(path) as ds, pytest.raises(MetricInputError, match="not a grid dataset.*GeneratorSampler"):
        GridSampler.from_dataset(ds)
    with pytest.raises(MetricInputError, match="no 'spec'"):
        GridSampler.from_dataset(np.zeros((4, 2)))


# --------------------------------------------------------------------------- samplers


def test_grid_sampler_accepts_grid_shaped_and_lazy_observations(identity_codes):
    flat = sampler_of(identity_codes)
    shaped = GridSampler(FACTORS, identity_codes.reshape(*SHAPE, K))
    values = flat.sample(500, np.random.default_rng(0))
    assert np.array_equal(flat.observe(values), values) and np.array_equal(shaped.observe(values), values)

    class SortedOnly:
        """An array-like that, as h5py, reads only strictly increasing index arrays."""

        def __init__(self, a):
            self.a = a

        def __len__(self):
            return len(self.a)

        def __getitem__(self, idx):
            assert np.all(np.diff(idx) > 0)
            return self.a[idx]

    lazy = GridSampler(FACTORS, SortedOnly(identity_codes))
    assert np.array_equal(lazy.observe(values), values)
    assert factor_vae_score(lazy, **SMALL).to_dict() == factor_vae_score(flat, **SMALL).to_dict()


def test_grid_sampler_draws_uniform_grid_points():
    values = sampler_of(grid_values()).sample(90_000, np.random.default_rng(0))
    classes = grid_classes(FACTORS, values)
    for j, n in enumerate(SHAPE):
        assert np.isin(values[:, j], FACTORS[j].values).all()
        counts = np.bincount(classes[:, j], minlength=n)
        assert np.abs(counts / len(values) - 1 / n).max() < 0.01
    # the first two factors are independent: their joint frequencies factorise
    joint = np.bincount(classes[:, 0] * 9 + classes[:, 1], minlength=72) / len(values)
    assert np.abs(joint - 1 / 72).max() < 0.004


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-20, 20, allow_nan=False), min_size=1, max_size=40))
def test_grid_classes_equal_nearest_value(values):
    v = np.asarray(values)
    for f in FACTORS:
        grid = np.asarray(f.values)
        dist = np.abs(v[:, None] - grid[None, :])
        if f.kind == "cyclic":
            dist = np.minimum(dist % f.period, f.period - dist % f.period)
        best = np.sort(dist, axis=1)
        clear = best[:, 1] - best[:, 0] > 1e-9  # skip exact ties between two grid values
        got = grid_classes((f,), v[:, None])[:, 0]
        assert np.array_equal(got[clear], f.classes_of(v)[clear])


def test_sample_factor_values_is_seeded():
    a = sample_factor_values(FACTORS, 10, np.random.default_rng(5))
    b = sample_factor_values(FACTORS, 10, np.random.default_rng(5))
    assert np.array_equal(a, b) and a.shape == (10, K)


# --------------------------------------------------------------------------- encoders, determinism


class FakeTensor:
    """Stands in for a torch tensor: detach() and cpu() must be called before numpy conversion."""

    def __init__(self, a, stage=0):
        self.a, self.stage = a, stage

    def detach(self):
        return FakeTensor(self.a, 1)

    def cpu(self):
        assert self.stage == 1
        return FakeTensor(self.a, 2)

    @property
    def shape(self):
        return self.a.shape

    def __array__(self, dtype=None, copy=None):
        assert self.stage == 2
        return self.a if dtype is None else self.a.astype(dtype)


def test_encoder_may_return_tensors(identity_codes):
    images = np.arange(math.prod(SHAPE))  # observations: the grid index; the encoder looks the codes up
    sampler = GridSampler(FACTORS, images)
    calls = []

    def encoder(obs):
        calls.append(len(obs))
        return FakeTensor(identity_codes[obs])

    result = factor_vae_score(sampler, encoder, encoder_batch=1000, **SMALL)
    assert result.to_dict() == factor_vae_score(sampler_of(identity_codes), **SMALL).to_dict()
    # many points per call: 10,000 variance samples, then 300 points x 16 for training and for evaluation
    assert max(calls) == 1000 and len(calls) == 10 + 5 + 5
    torch = pytest.importorskip("torch")
    beta = beta_vae_score(sampler, lambda obs: torch.as_tensor(identity_codes[obs]).requires_grad_(), **SMALL)
    assert beta.to_dict() == beta_vae_score(sampler_of(identity_codes), **SMALL).to_dict()


def test_same_seed_same_result_and_encoder_batch_does_not_matter():
    sampler = sampler_of(oracles.random_codes(math.prod(SHAPE), 4, seed=2))
    for fn in (beta_vae_score, factor_vae_score):
        a, b = fn(sampler, seed=7, **SMALL), fn(sampler, seed=7, encoder_batch=37, **SMALL)
        assert a.to_dict() == b.to_dict()
        assert fn(sampler, seed=8, **SMALL).to_dict() != a.to_dict()


@settings(max_examples=20, deadline=None)
@given(d=st.integers(1, 6), seed=st.integers(0, 2**16), batch=st.integers(2, 12), scale=st.floats(0.01, 100))
def test_scores_are_accuracies(d, seed, batch, scale):
    codes = scale * oracles.random_codes(math.prod(SHAPE), d, seed=seed)
    kw = dict(batch_size=batch, n_train=40, n_eval=30, n_variance=50, seed=seed)
    beta = beta_vae_score(sampler_of(codes), **{k: v for k, v in kw.items() if k != "n_variance"})
    factor = factor_vae_score(sampler_of(codes), **kw)
    for r in (beta, factor):
        assert 0.0 <= r.score <= 1.0 and 0.0 <= r.train_accuracy <= 1.0
        assert r.score * 30 == pytest.approx(round(r.score * 30))  # a fraction of the 30 evaluation points
    assert factor.votes.sum() == (40 if factor.num_active_dims else 0)
    assert factor.num_active_dims == int(factor.active_dims.sum()) <= d


def test_single_training_label_gives_a_constant_classifier(identity_codes):
    r = beta_vae_score(sampler_of(identity_codes), n_train=1, n_eval=60, batch_size=4)
    assert r.train_accuracy == 1.0 and 0.0 < r.score < 0.7


# --------------------------------------------------------------------------- validation


class NoObserve:
    num_factors = 3

    def sample(self, n, rng):
        return np.zeros((n, 3))


class WrongShape(FactorSampler):
    num_factors = 3

    def sample(self, n, rng):
        return np.zeros((n, 2))

    def observe(self, values):
        return values


def test_validation_errors(identity_codes):
    s = sampler_of(identity_codes)
    cases = [
        (lambda: beta_vae_score(object()), "lacks num_factors, sample, observe"),
        (lambda: factor_vae_score(NoObserve()), "lacks observe"),
        (lambda: beta_vae_score(WrongShape(), **SMALL), r"returned shape \(\d+, 2\); expected \(\d+, 3\)"),
        (lambda: beta_vae_score(s, lambda obs: obs[:-1], **SMALL), "one row per observation"),
        (lambda: factor_vae_score(s, lambda obs: obs[:, 0], **SMALL), "one row per observation"),
        (lambda: factor_vae_score(s, lambda obs: obs * np.nan, **SMALL), "NaN or inf"),
        (lambda: beta_vae_score(s, encoder="pca"), "encoder must be a callable"),
        (lambda: beta_vae_score(s, n_train=0), "n_train must be an integer >= 1"),
        (lambda: factor_vae_score(s, n_eval=-5), "n_eval must be an integer >= 1"),
        (lambda: factor_vae_score(s, batch_size=1), "batch_size must be an integer >= 2"),
        (lambda: beta_vae_score(s, batch_size=2.5), "batch_size must be an integer >= 1"),
        (lambda: factor_vae_score(s, n_variance=1), "n_variance must be an integer >= 2"),
        (lambda: factor_vae_score(s, prune_threshold=-0.1), "prune_threshold must be a finite number >= 0"),
        (lambda: factor_vae_score(s, prune_threshold=float("nan")), "prune_threshold"),
        (lambda: beta_vae_score(s, seed=-1), "seed must be a non-negative integer"),
        (lambda: beta_vae_score(s, encoder_batch=0), "encoder_batch"),
        (lambda: GridSampler(FACTORS, identity_codes[:-1]), r"has 719 rows but the grid \(8, 9, 10\) has 720"),
        (lambda: GridSampler(FACTORS[:1] + (Factor("t", "continuous", 0.0, 1.0),), identity_codes),
         r"\['t'\] are not grid factors.*GeneratorSampler"),
        (lambda: GridSampler(FACTORS, identity_codes, rows=np.arange(5)), "rows must be 720 integer"),
        (lambda: GridSampler(FACTORS, 5), "array or array-like"),
        (lambda: s.observe(np.zeros((4, 2))), r"shape \(n, 3\)"),
        (lambda: s.sample(-1, np.random.default_rng()), "non-negative integer"),
        (lambda: GeneratorSampler("square"), "factorbench generator"),
    ]
    for call, message in cases:
        with pytest.raises(MetricInputError, match=message):
            call()


def test_a_sampler_needs_two_factors():
    one = GridSampler(FACTORS[:1], np.zeros((8, 2)))
    with pytest.raises(MetricInputError, match="num_factors must be an integer >= 2"):
        check_sampler(one)
    assert check_sampler(sampler_of(grid_values())) == K


def test_changing_code_dimension_is_an_error(identity_codes):
    sampler = GridSampler(FACTORS, np.arange(720))
    state = {"n": 0}

    def encoder(obs):
        state["n"] += 1
        return identity_codes[obs][:, : 3 if state["n"] == 1 else 2]

    with pytest.raises(MetricInputError, match="3 columns in one call and 2 in another|2 columns in one call and 3"):
        factor_vae_score(sampler, encoder, encoder_batch=100, **SMALL)


# --------------------------------------------------------------------------- defaults


@pytest.mark.slow
def test_defaults_on_a_large_grid():
    factors = tuple(Factor(f"f{i}", "continuous", values=tuple(np.linspace(0, 1, 10))) for i in range(5))
    codes = oracles.with_noise_dims(grid_values(factors), 5, seed=0)
    sampler = GridSampler(factors, codes)
    assert beta_vae_score(sampler).score >= 0.99
    factor = factor_vae_score(sampler)
    assert factor.score >= 0.99 and factor.num_active_dims == 10
