"""HFS-VAE and the adversarial autoencoder: closed-form loss terms, shapes, resume equality, short training."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from factorbench.baselines import models  # noqa: E402,F401
from factorbench.baselines.aae import AAE, adversarial_losses  # noqa: E402
from factorbench.baselines.config import MODELS, get_family, make_config  # noqa: E402
from factorbench.baselines.data import TrainingData  # noqa: E402
from factorbench.baselines.hfsvae import hausdorff_factorized_support, latent_pairs  # noqa: E402
from factorbench.baselines.runs import load_run  # noqa: E402
from factorbench.baselines.trainer import TrainOptions, train  # noqa: E402
from factorbench.generators.errors import FactorbenchError  # noqa: E402

QUIET = TrainOptions(progress=False, samples=False, log_every=10, threads=1)
TINY = {"latent_dim": 3, "channels": "8,8,8,8", "hidden": 32, "batch_size": 16}
ONE_PAIR = torch.tensor([[0, 1]])


def _weights(run_dir) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(run_dir / "weights.safetensors"))


# --------------------------------------------------------------------------- the Hausdorff support penalty


def test_a_product_support_costs_nothing_and_a_missing_corner_costs_its_squared_distance():
    grid = torch.tensor([[x, y] for x in (0.0, 1.0, 2.0) for y in (0.0, 1.0, 2.0)])
    assert hausdorff_factorized_support(grid, ONE_PAIR).item() == 0.0
    # without the corner (2, 2) its nearest batch points are (1, 2) and (2, 1), at squared distance 1
    assert hausdorff_factorized_support(grid[:-1], ONE_PAIR).item() == 1.0
    # an L of arm s misses (s, s), whose nearest points are at squared distance s^2: squared, not plain
    s = 3.0
    assert hausdorff_factorized_support(torch.tensor([[0.0, 0.0], [s, 0.0], [0.0, s]]), ONE_PAIR).item() == s * s
    # a diagonal of n points (perfect correlation): ceil((n - 1)^2 / 2)
    for n in range(2, 7):
        diagonal = torch.arange(n, dtype=torch.float32)[:, None].repeat(1, 2)
        assert hausdorff_factorized_support(diagonal, ONE_PAIR).item() == math.ceil((n - 1) ** 2 / 2)


def test_penalty_sums_over_pairs_scales_quadratically_and_ignores_shifts():
    torch.manual_seed(0)
    m = torch.randn(40, 4)
    pairs = latent_pairs(4, 6, 0, 0)
    total = hausdorff_factorized_support(m, pairs)
    assert total.item() == pytest.approx(sum(hausdorff_factorized_support(m, p[None]).item() for p in pairs))
    assert hausdorff_factorized_support(2.5 * m, pairs).item() == pytest.approx(6.25 * total.item(), rel=1e-5)
    assert hausdorff_factorized_support(m + 7.0, pairs).item() == pytest.approx(total.item(), rel=1e-4)
    # a copied dimension: (x, x) is a diagonal, its product set a full square
    copied = torch.tensor([[0.0, 5.0, 0.0], [1.0, 3.0, 1.0], [2.0, 4.0, 2.0]])
    assert hausdorff_factorized_support(copied, torch.tensor([[0, 2]])).item() == 2.0


def test_penalty_and_gradient_equal_the_dense_min_max():
    """The blockwise search gives the value and gradient of max_ab min_c over the full B^2 x B tensor."""
    torch.manual_seed(1)
    m = torch.randn(50, 5, dtype=torch.float64, requires_grad=True)
    pairs = latent_pairs(5, 4, 3, 11)
    s = m[:, pairs]  # (B, P, 2)
    b = len(m)
    a_idx, b_idx = torch.arange(b).repeat(b), torch.arange(b).repeat_interleave(b)
    product = torch.cat([s[a_idx, :, 0:1], s[b_idx, :, 1:2]], dim=-1)
    dense = ((product[:, None] - s[None]) ** 2).sum(-1).min(1)[0].max(0)[0].sum()
    ours = hausdorff_factorized_support(m, pairs)
    assert ours.item() == pytest.approx(dense.item(), rel=1e-12)
    g_dense, = torch.autograd.grad(dense, m)
    g_ours, = torch.autograd.grad(ours, m)
    assert torch.allclose(g_dense, g_ours)


def test_pairs_are_distinct_capped_and_a_function_of_seed_and_step():
    pairs = latent_pairs(10, 25, 0, 7)
    assert pairs.shape == (25, 2) and bool((pairs[:, 0] < pairs[:, 1]).all())
    assert len({tuple(p) for p in pairs.tolist()}) == 25
    assert torch.equal(pairs, latent_pairs(10, 25, 0, 7))
    assert not torch.equal(pairs, latent_pairs(10, 25, 0, 8)) and not torch.equal(pairs, latent_pairs(10, 25, 1, 7))
    assert latent_pairs(3, 25, 0, 0).tolist() == [[0, 1], [0, 2], [1, 2]]


def test_hfs_vae_loss_is_the_beta_vae_loss_plus_gamma_times_the_penalty():
    config = make_config("hfs-vae", {**TINY, "beta": 2.0, "gamma": 10.0, "hfs_pairs": 2})
    beta = make_config("beta-vae", {**TINY, "beta": 2.0})
    family = get_family(config)
    torch.manual_seed(0)
    model = family.build(config, (64, 64, 1))
    x = torch.rand(16, 1, 64, 64)
    out = model(x, torch.Generator().manual_seed(0))
    loss = family.loss(out, x, config, 5, 1000)
    base = get_family(beta).loss(out, x, beta, 5, 1000).groups["model"]
    hfs = hausdorff_factorized_support(out["mu"], latent_pairs(3, 2, config.seed, 5))
    assert loss.groups["model"].item() == pytest.approx((base + 10.0 * hfs).item(), rel=1e-6)
    assert loss.logs["hfs"].item() == pytest.approx(hfs.item())


@pytest.mark.parametrize("params,message", [
    ({"latent_dim": "1"}, "latent_dim must be >= 2"),
    ({"gamma": "-1"}, "gamma must be >= 0"),
    ({"hfs_pairs": "0"}, "hfs_pairs must be positive"),
])
def test_bad_hfs_configs_are_refused(params, message):
    with pytest.raises(FactorbenchError, match=message):
        make_config("hfs-vae", params)


# --------------------------------------------------------------------------- the adversarial autoencoder


def test_adversarial_losses_are_the_cross_entropies_of_the_discriminator():
    d_prior, d_code = torch.tensor([2.0, -1.0]), torch.tensor([0.5, -3.0])
    disc, gen = adversarial_losses(d_prior, d_code, d_code)
    sig = torch.sigmoid
    expected_disc = -torch.log(sig(d_prior)).mean() - torch.log(1 - sig(d_code)).mean()
    assert disc.item() == pytest.approx(expected_disc.item(), rel=1e-6)
    assert gen.item() == pytest.approx(-torch.log(sig(d_code)).mean().item(), rel=1e-6)
    # a discriminator that cannot tell (logit 0) costs 2 log 2 and leaves the generator log 2
    zero = torch.zeros(4)
    disc, gen = adversarial_losses(zero, zero, zero)
    assert disc.item() == pytest.approx(2 * math.log(2)) and gen.item() == pytest.approx(math.log(2))


def test_aae_has_do_and_tran_defaults_and_a_deterministic_code():
    config = make_config("aae")
    assert (config.latent_dim, config.hidden, config.lr, config.adam_beta1, config.adam_beta2, config.disc_lr,
            config.disc_layers, config.disc_width, config.batch_size) == (10, 128, 1e-3, 0.5, 0.99, 1e-4, 5, 1000, 64)
    model = AAE(config, (64, 64, 1)).eval()
    dense = [m for m in model.discriminator.modules() if isinstance(m, torch.nn.Linear)]
    assert [d.out_features for d in dense] == [1000] * 5 + [1]
    x = torch.rand(4, 1, 64, 64)
    z = model.encode(x)
    assert isinstance(z, torch.Tensor) and z.shape == (4, 10) and torch.equal(z, model.encode(x))
    groups = get_family(config).groups(model, config)
    assert groups["discriminator"][1].defaults["lr"] == 1e-4 and groups["model"][1].defaults["betas"] == (0.5, 0.99)
    ids = [{id(p) for p in params} for params, _ in groups.values()]
    assert not ids[0] & ids[1] and ids[0] | ids[1] == {id(p) for p in model.parameters()}


def test_new_models_are_listed_by_train_list(capsys):
    from factorbench.benchmark.cli import main as cli

    assert "hfs-vae" in MODELS and "aae" in MODELS
    assert cli(["train", "list"]) == 0
    listed = capsys.readouterr().out
    assert "hfs-vae" in listed and "aae" in listed


# --------------------------------------------------------------------------- training


@pytest.mark.parametrize("model,params", [
    ("hfs-vae", {"gamma": 100.0}),
    ("aae", {"gz": 1.0, "disc_width": 128}),  # a narrower discriminator than 5 x 1000: a fifth of the time
    # fixed architectures: montero-small in the default suite, the others (50 s each on an AVX2-only CPU) slow
    pytest.param("beta-vae", {"architecture": "burgess-2018", "beta": 1.0}, marks=pytest.mark.slow),
    pytest.param("beta-vae", {"architecture": "chen-mlp", "beta": 1.0}, marks=pytest.mark.slow),
    ("beta-vae", {"architecture": "montero-small", "beta": 1.0, "steps": 150}),  # learns in half the steps
])
def test_a_few_hundred_steps_on_one_channel_dsprites_learn(generated, tmp_path, model, params):
    """300 steps (or fewer) on a dSprites sub-grid (one channel): the reconstruction falls to well under its start."""
    fixed = params.get("architecture") in ("burgess-2018", "chen-mlp", "montero-small")
    config = make_config(model, {**({} if fixed else {"channels": "8,8,16,16", "hidden": 64}), "latent_dim": 4,
                                 "batch_size": 32, "steps": 300, "lr": 1e-3, **params})
    log_every = config.steps // 6
    train(config, generated("dsprites"), tmp_path / "run",
          options=TrainOptions(**{**QUIET.__dict__, "log_every": log_every}))
    rows = list(csv.DictReader(open(tmp_path / "run" / "log.csv")))
    recon = [float(r["recon"]) for r in rows]
    assert len(recon) == 6 and recon[-1] < 0.5 * recon[0]  # measured 0.21-0.42 (AMD EPYC, AVX2)
    if model == "hfs-vae":
        assert all(float(r["hfs"]) >= 0 for r in rows)


@pytest.mark.parametrize("model,params", [("hfs-vae", {"hfs_pairs": 2}), ("aae", {}),
                                          # the spatial-broadcast decoder costs 30x a step: slow
                                          pytest.param("factor-vae", {"architecture": "locatello-sbd",
                                                                      "channels": "32,32,64,64", "hidden": 256,
                                                                      "batch_size": 4}, marks=pytest.mark.slow)])
def test_resume_is_bit_identical(generated, tmp_path, model, params):
    config = make_config(model, {**TINY, "steps": 20, **params})
    train(config, generated("dsprites"), tmp_path / "whole", options=QUIET)
    stop = TrainOptions(**{**QUIET.__dict__, "stop_after": 9})
    assert train(config, generated("dsprites"), tmp_path / "split", options=stop).step == 9
    assert train(config, generated("dsprites"), tmp_path / "split", resume=True, options=QUIET).status == "finished"
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "split")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_an_aae_run_gives_plain_codes_and_posterior_metrics_say_they_do_not_apply(generated, tmp_path):
    config = make_config("aae", {**TINY, "steps": 10})
    train(config, generated("dsprites"), tmp_path / "run", options=QUIET)
    encoder = load_run(tmp_path / "run")
    data = TrainingData(generated("dsprites"), "test")
    codes = encoder(data.batch(0, 6, 0))
    data.close()
    assert isinstance(codes, np.ndarray) and codes.shape == (6, 3)
