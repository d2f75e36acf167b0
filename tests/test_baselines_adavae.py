"""Ada-GVAE and Ada-ML-VAE: the choice of shared dimensions on constructed pairs, both averaging rules
against their formulas, the pair sampler on the real grids, the loss written out, a short training,
resume and bad input."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from factorbench.baselines.adavae import (AVERAGING, PairBatches, adaptive_average, gvae_average,  # noqa: E402
                                          posterior_kl, precision_average, shared_dimensions)
from factorbench.baselines.config import MODELS, get_family, make_config  # noqa: E402
from factorbench.baselines.data import TrainingData  # noqa: E402
from factorbench.baselines.runs import load_run  # noqa: E402
from factorbench.baselines.trainer import TrainOptions, train  # noqa: E402
from factorbench.generators.errors import FactorbenchError  # noqa: E402

QUIET = TrainOptions(progress=False, samples=False, log_every=10, threads=1)
TINY = {"channels": "8,8,8,8", "hidden": 32, "batch_size": 8, "latent_dim": 4}
F64 = torch.float64


def _t(*values: float) -> torch.Tensor:
    return torch.tensor([values], dtype=F64)


# --------------------------------------------------------------------------- the shared dimensions


def test_posterior_kl_is_the_kl_from_the_first_posterior_to_the_second():
    mu1, lv1 = _t(0.0, 1.0, -2.0), _t(0.0, math.log(0.5), 1.0)
    mu2, lv2 = _t(0.0, 3.0, -2.0), _t(math.log(4.0), math.log(2.0), 1.0)
    delta = posterior_kl(mu1, lv1, mu2, lv2)
    # by hand: 0.5 (v1/v2 + (mu2 - mu1)^2 / v2 - 1 + log v2 - log v1)
    expected = [0.5 * (0.25 - 1 + math.log(4)), 0.5 * (0.25 + 4 / 2 - 1 + math.log(4)), 0.0]
    assert delta[0].tolist() == pytest.approx(expected, abs=1e-12)
    reference = torch.distributions.kl_divergence(torch.distributions.Normal(mu1, (0.5 * lv1).exp()),
                                                  torch.distributions.Normal(mu2, (0.5 * lv2).exp()))
    assert torch.allclose(delta, reference, atol=1e-12)
    assert posterior_kl(mu2, lv2, mu1, lv1)[0, 0] != pytest.approx(delta[0, 0].item())  # not symmetric


def test_posteriors_that_differ_in_known_dimensions_share_exactly_the_others():
    rng = np.random.default_rng(0)
    p, d = 32, 7
    mu1 = torch.from_numpy(rng.normal(size=(p, d)))
    lv1 = torch.from_numpy(rng.uniform(-3, 0, size=(p, d)))
    changed = [[1, 4], [0], [2, 3, 6], [5]]
    mu2, lv2 = mu1.clone(), lv1.clone()
    for row in range(p):
        for j in changed[row % 4]:
            # about 3 posterior standard deviations away: a KL of 4.5 to 5.5 nats, so that every
            # changed dimension lies above the midpoint of the largest and smallest KL
            mu2[row, j] += (3.0 + 0.3 * rng.uniform()) * math.exp(0.5 * lv1[row, j].item())
    # a little noise on the unchanged dimensions: still far below the midpoint
    mu2 = mu2 + torch.from_numpy(rng.normal(scale=0.01, size=(p, d)))
    shared = shared_dimensions(posterior_kl(mu1, lv1, mu2, lv2))
    for row in range(p):
        assert set(np.flatnonzero(~shared[row].numpy())) == set(changed[row % 4])
    for name, average in AVERAGING.items():
        (m1, l1), (m2, l2), mask = adaptive_average(mu1, lv1, mu2, lv2, average)
        assert torch.equal(mask, shared)
        am, al = average(mu1, lv1, mu2, lv2)
        assert torch.equal(m1[mask], am[mask]) and torch.equal(m2[mask], am[mask])  # shared: both averaged
        assert torch.equal(l1[mask], al[mask]) and torch.equal(l2[mask], al[mask])
        assert torch.equal(m1[~mask], mu1[~mask]) and torch.equal(m2[~mask], mu2[~mask])  # changed: their own
        assert torch.equal(l1[~mask], lv1[~mask]) and torch.equal(l2[~mask], lv2[~mask])


def test_threshold_ties_and_equal_posteriors_follow_the_formula():
    # tau = (max + min) / 2, shared = delta < tau: a dimension at tau is not shared
    assert shared_dimensions(_t(0.0, 1.0, 2.0))[0].tolist() == [True, False, False]
    assert shared_dimensions(_t(0.0, 0.0, 2.0, 2.0))[0].tolist() == [True, True, False, False]
    assert shared_dimensions(_t(5.0, 1.0, 3.0, 1.0))[0].tolist() == [False, True, False, True]
    # every delta equal (identical posteriors, or one dimension): nothing lies below tau, nothing is shared
    assert not shared_dimensions(_t(0.0, 0.0, 0.0)).any()
    assert not shared_dimensions(_t(0.7, 0.7)).any()
    assert not shared_dimensions(_t(3.0)).any()
    mu, lv = _t(0.3, -1.0, 2.0), _t(0.0, -2.0, 0.5)
    for average in AVERAGING.values():
        (m1, l1), (m2, l2), mask = adaptive_average(mu, lv, mu.clone(), lv.clone(), average)
        assert not mask.any() and torch.equal(m1, mu) and torch.equal(l2, lv)


# --------------------------------------------------------------------------- the averaging rules


def test_gvae_average_is_the_mean_of_means_and_of_variances():
    mu, logvar = gvae_average(_t(1.0, -2.0), _t(0.0, math.log(0.1)), _t(3.0, 4.0), _t(math.log(4.0), math.log(0.3)))
    assert mu[0].tolist() == pytest.approx([2.0, 1.0], abs=1e-12)  # (mu1 + mu2) / 2 (disent issue 32)
    assert logvar.exp()[0].tolist() == pytest.approx([2.5, 0.2], abs=1e-12)  # (v1 + v2) / 2
    same_mu, same_lv = gvae_average(_t(0.4), _t(-1.5), _t(0.4), _t(-1.5))
    assert same_mu.item() == pytest.approx(0.4) and same_lv.item() == pytest.approx(-1.5)


def test_precision_average_averages_precisions_and_weights_means_by_precision():
    """disentanglement_lib's MLVae: v = 2 v1 v2 / (v1 + v2), mu = v (mu1/v1 + mu2/v2) / 2."""
    mu, logvar = precision_average(_t(1.0, 0.0), _t(0.0, math.log(9.0)), _t(3.0, 10.0), _t(math.log(4.0), 0.0))
    # 1/v = (1/1 + 1/4)/2 -> v = 1.6, mu = 1.6 (1/1 + 3/4)/2 = 1.4;  1/v = (1/9 + 1)/2 -> v = 1.8, mu = 9
    assert logvar.exp()[0].tolist() == pytest.approx([1.6, 1.8], abs=1e-12)
    assert mu[0].tolist() == pytest.approx([1.4, 9.0], abs=1e-12)
    # the normalised geometric mean of the densities: (log N(z; m1, v1) + log N(z; m2, v2)) / 2 - log N(z; m, v)
    # does not depend on z
    z = torch.linspace(-5, 5, 11, dtype=F64)

    def log_normal(m: float, v: float) -> torch.Tensor:
        return -0.5 * (math.log(2 * math.pi * v) + (z - m) ** 2 / v)

    gap = (log_normal(1.0, 1.0) + log_normal(3.0, 4.0)) / 2 - log_normal(mu[0, 0].item(), logvar[0, 0].exp().item())
    assert torch.allclose(gap, gap[0].expand_as(gap), atol=1e-12)
    # two identical Gaussians are unchanged
    same_mu, same_lv = precision_average(_t(0.4, -3.0), _t(-1.5, 2.0), _t(0.4, -3.0), _t(-1.5, 2.0))
    assert same_mu[0].tolist() == pytest.approx([0.4, -3.0], abs=1e-12)
    assert same_lv[0].tolist() == pytest.approx([-1.5, 2.0], abs=1e-12)
    # stable at extreme variances (no overflow in 1/v): the precise expert dominates, its variance doubled
    far_mu, far_lv = precision_average(_t(1.0), _t(-200.0), _t(5.0), _t(200.0))
    assert far_mu.item() == pytest.approx(1.0) and far_lv.item() == pytest.approx(-200.0 + math.log(2))


def test_both_models_are_registered_with_their_rule_and_the_defaults():
    gvae, mlvae = make_config("ada-gvae"), make_config("ada-ml-vae")
    assert MODELS["ada-gvae"] is type(gvae) and MODELS["ada-ml-vae"] is type(mlvae)
    assert (gvae.averaging, mlvae.averaging) == ("gvae", "ml-vae") and set(AVERAGING) == {"gvae", "ml-vae"}
    assert (gvae.beta, gvae.k, gvae.architecture) == (1.0, 2, "burgess") and gvae.hash() != mlvae.hash()


# --------------------------------------------------------------------------- the pairs


@pytest.mark.parametrize("dataset", ["square", "objects"])
def test_pairs_differ_in_exactly_k_factors_and_depend_on_seed_and_step(generated, dataset):
    data = TrainingData(generated(dataset), "all")
    classes = data.factor_classes
    for k in (1, 2):
        config = make_config("ada-gvae", {"k": k, "batch_size": 64})
        draw = PairBatches(config, data)
        firsts, changed = [], []
        for step in range(64):  # one epoch of first images: 4,096 / 64
            first, second = draw.pairs(step)
            differ = classes[first] != classes[second]
            assert np.all(differ.sum(1) == k), (dataset, k, step)
            firsts.append(first)
            changed.append(differ)
        assert np.array_equal(np.sort(np.concatenate(firsts)), np.arange(4096))
        if k == 1:  # both factors get changed, about equally often
            assert 0.4 < np.concatenate(changed)[:, 0].mean() < 0.6
        if dataset == "objects" and k == 1:  # the rotation of one object, or another object at the same rotation
            assert np.concatenate(changed)[:, 1].any() and np.concatenate(changed)[:, 0].any()
    config = make_config("ada-gvae", {"batch_size": 16})
    draw, again, other = PairBatches(config, data), PairBatches(config, data), PairBatches(config.replace(seed=1), data)
    for step in (0, 7, 300):
        assert all(np.array_equal(a, b) for a, b in zip(draw.pairs(step), again.pairs(step)))
    assert not np.array_equal(draw.pairs(0)[1], other.pairs(0)[1])
    assert not np.array_equal(draw.pairs(0)[1], draw.pairs(1)[1])
    batch = draw(3)
    first, second = draw.pairs(3)
    assert set(batch) == {"images"} and batch["images"].shape == (32, 64, 64, 3)
    assert np.array_equal(batch["images"][0::2], data.images_at(first))
    assert np.array_equal(batch["images"][1::2], data.images_at(second))
    data.close()


def _pairs_one_by_one(draw: PairBatches, step: int) -> tuple[np.ndarray, np.ndarray]:
    """The pairs as first written (every shipped Ada run trained on them): pair by pair, the subset, then the
    partner among the explicit list of candidates, each drawn from the one stream."""
    from factorbench.baselines.adavae import _PARTNER

    first = draw.eligible[draw._order.batch(step, draw.batch_size)]
    rng = np.random.default_rng([draw.seed, _PARTNER, step])
    second = np.empty_like(first)
    for p, i in enumerate(first):
        valid = np.flatnonzero(draw.partners[i] > 0)
        s = int(valid[rng.integers(len(valid))])
        key, order, starts, subset_classes = draw._groups[s]
        lo, hi = starts[key[i]], starts[key[i] + 1]
        candidates = order[lo:hi][np.all(subset_classes[lo:hi] != draw.classes[i, list(draw.subsets[s])], axis=1)]
        assert len(candidates) == draw.partners[i, s]
        second[p] = candidates[rng.integers(len(candidates))]
    return first, second


@pytest.mark.parametrize("cells", [1 << 16, 0])  # all pairs of a subset at once; row by row
def test_pairs_are_those_the_shipped_runs_trained_on(generated, monkeypatch, cells):
    import factorbench.baselines.adavae as adavae

    monkeypatch.setattr(adavae, "_VECTOR_CELLS", cells)
    data = TrainingData(generated("objects"), "all")
    for k, seed in ((1, 0), (2, 3)):
        draw = PairBatches(make_config("ada-gvae", {"k": k, "batch_size": 64, "seed": seed}), data)
        for step in (0, 1, 63, 64, 1000):
            assert all(np.array_equal(a, b) for a, b in zip(draw.pairs(step), _pairs_one_by_one(draw, step)))
    data.close()


def test_pairs_on_an_incomplete_grid_count_partners_exactly(generated):
    """Only the rows of a split are paired. On a 2 x 10 corner of square plus one lone image (5, 30): with k = 1
    the lone image has no partner (no other image on its row or column) and is never drawn; with k = 2 its
    partners are the 20 corner images, and a corner image (c, j) has 9 + 1 (the other row, other columns,
    and the lone image)."""
    data = TrainingData(generated("square"), "all")
    classes = data.factor_classes
    corner = (classes[:, 0] < 2) & (classes[:, 1] < 10)
    keep = np.flatnonzero(corner | ((classes[:, 0] == 5) & (classes[:, 1] == 30)))
    lone = int(np.flatnonzero(classes[keep, 0] == 5)[0])

    class Corner:
        factor_classes, split, generator_name = classes[keep], "corner", "square"
        factor_specs = data.factor_specs

    sub = Corner.factor_classes
    k1 = PairBatches(make_config("ada-gvae", {"k": 1, "batch_size": 16}), Corner())  # type: ignore[arg-type]
    assert k1.partners[lone].tolist() == [0, 0] and lone not in set(k1.eligible) and len(k1.eligible) == 20
    assert all(k1.partners[i].tolist() == [1, 9] for i in range(len(keep)) if i != lone)
    k2 = PairBatches(make_config("ada-gvae", {"k": 2, "batch_size": 16}), Corner())  # type: ignore[arg-type]
    assert k2.partners[lone].tolist() == [20] and len(k2.eligible) == 21
    assert all(k2.partners[i].tolist() == [10] for i in range(len(keep)) if i != lone)
    for draw, k in ((k1, 1), (k2, 2)):
        for step in range(6):
            first, second = draw.pairs(step)
            assert np.all((sub[first] != sub[second]).sum(1) == k)
    data.close()


# --------------------------------------------------------------------------- model, loss, training


@pytest.mark.parametrize("model", ["ada-gvae", "ada-ml-vae"])
def test_loss_is_the_elbo_of_both_images_with_the_averaged_posteriors(model):
    config = make_config(model, {**TINY, "beta": 3.0})
    family = get_family(config)
    torch.manual_seed(0)
    net = family.build(config, (64, 64, 3))
    x = torch.rand(8, 3, 64, 64)
    batch = {"images": x}
    out = net(batch, torch.Generator().manual_seed(5))
    loss = family.loss(out, batch, config, 0, 4096)
    # the encoder's posteriors are those of single images (encode), then averaged per pair by the rule
    mu, logvar = net.encode(x)
    assert torch.allclose(out["mu_encoder"], mu) and torch.allclose(out["logvar_encoder"], logvar)
    (m1, l1), (m2, l2), shared = adaptive_average(mu[0::2], logvar[0::2], mu[1::2], logvar[1::2],
                                                  AVERAGING[config.averaging])
    assert torch.equal(out["shared"], shared) and shared.shape == (4, 4)
    assert torch.allclose(out["mu"][0::2], m1) and torch.allclose(out["mu"][1::2], m2)
    assert torch.allclose(out["logvar"][0::2], l1) and torch.allclose(out["logvar"][1::2], l2)
    eps = torch.randn(out["mu"].shape, generator=torch.Generator().manual_seed(5))
    assert torch.allclose(out["z"], out["mu"] + (0.5 * out["logvar"]).exp() * eps)
    # Bernoulli NLL summed per image + beta KL(q~ || N(0, I)) summed per image, mean over the 8 images
    p = torch.sigmoid(out["logits"])
    recon = -(x * torch.log(p) + (1 - x) * torch.log(1 - p)).flatten(1).sum(1)
    kl = 0.5 * (out["mu"] ** 2 + out["logvar"].exp() - out["logvar"] - 1).sum(1)
    assert set(loss.groups) == {"model"}
    assert loss.groups["model"].item() == pytest.approx((recon + 3.0 * kl).mean().item(), rel=1e-5)
    assert loss.logs["shared_dims"].item() == pytest.approx(shared.float().sum(1).mean().item())
    with pytest.raises(ValueError, match="even number"):
        net({"images": x[:3]})


def _weights(run_dir) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(run_dir / "weights.safetensors"))


def test_training_on_square_pairs_lowers_the_loss(generated, tmp_path):
    """300 steps of 8 pairs with a small network: the loss falls well below its start."""
    config = make_config("ada-gvae", {**TINY, "steps": 300, "lr": 1e-3})
    train(config, generated("square"), tmp_path / "run", split="all",
          options=TrainOptions(**{**QUIET.__dict__, "log_every": 25}))
    rows = list(csv.DictReader(open(tmp_path / "run" / "log.csv")))
    loss = [float(r["loss"]) for r in rows]
    assert len(loss) == 12 and np.mean(loss[-3:]) < 0.8 * np.mean(loss[:2])
    assert all(0 <= float(r["shared_dims"]) < 4 for r in rows)


def test_resume_is_bit_identical_and_the_run_encodes_a_gaussian(generated, tmp_path):
    config = make_config("ada-ml-vae", {**TINY, "steps": 20})
    train(config, generated("square"), tmp_path / "whole", split="all", options=QUIET)
    stop = TrainOptions(**{**QUIET.__dict__, "stop_after": 7})
    assert train(config, generated("square"), tmp_path / "split", split="all", options=stop).step == 7
    second = train(config, generated("square"), tmp_path / "split", split="all", resume=True, options=QUIET)
    assert second.status == "finished"
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "split")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    encoder = load_run(tmp_path / "whole")
    mu, logvar = encoder(TrainingData(generated("square"), "all").batch(0, 5, 0))
    assert mu.shape == logvar.shape == (5, 4)


@pytest.mark.parametrize("params,message", [
    ({"k": "0"}, "k must be >= 1 \\(the number of factors that change within a pair\\), got 0"),
    ({"k": "-2"}, "must be >= 1"),
    ({"beta": "-1"}, "beta must be >= 0"),
])
def test_bad_configs_are_refused(params, message):
    for model in ("ada-gvae", "ada-ml-vae"):
        with pytest.raises(FactorbenchError, match=message):
            make_config(model, params)


def test_bad_data_is_refused_before_any_training(generated, tmp_path):
    cases = [
        ("teapot", {}, "has no grid"),
        ("square", {"k": 3}, "k=3, but split 'all' of square has 2 factor\\(s\\).*choose 1 <= k <= 2"),
        ("objects", {"k": 5}, "at most 2"),
    ]
    for dataset, params, message in cases:
        for model in ("ada-gvae", "ada-ml-vae"):
            with pytest.raises(FactorbenchError, match=message):
                train(make_config(model, {**TINY, **params, "steps": 5}), generated(dataset), tmp_path / "run",
                      split="all", options=QUIET)
            assert not (tmp_path / "run").exists()
