"""Loss terms, configs and networks of the baselines against values computed by hand."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from factorbench.baselines import models  # noqa: E402,F401
from factorbench.baselines.config import MODELS, config_from_dict, get_family, make_config  # noqa: E402
from factorbench.baselines.dipvae import dip_ii_covariance  # noqa: E402
from factorbench.baselines.nets import build_decoder, build_encoder  # noqa: E402
from factorbench.baselines.terms import (bernoulli_nll, capacity, covariance, dip_penalty, gaussian_kl,  # noqa: E402
                                         gaussian_nll, permute_dims, total_correlation)
from factorbench.generators.errors import FactorbenchError  # noqa: E402


def test_gaussian_kl_closed_form():
    mu = torch.tensor([[0.5, -1.0]])
    logvar = torch.tensor([[math.log(2.0), 0.0]])
    kl = gaussian_kl(mu, logvar)
    expected = [0.5 * (0.25 + 2.0 - math.log(2.0) - 1.0), 0.5 * (1.0 + 1.0 - 0.0 - 1.0)]
    assert torch.allclose(kl, torch.tensor([expected]), atol=1e-7)
    q = torch.distributions.Normal(mu, torch.exp(0.5 * logvar))
    p = torch.distributions.Normal(torch.zeros_like(mu), torch.ones_like(mu))
    assert torch.allclose(kl, torch.distributions.kl_divergence(q, p), atol=1e-6)
    assert gaussian_kl(torch.zeros(3, 4), torch.zeros(3, 4)).abs().max() == 0


def test_total_correlation_against_brute_force():
    """Chen et al.'s minibatch-weighted estimate, computed with plain densities and loops in float64."""
    rng = np.random.default_rng(0)
    m, d, n = 5, 3, 100
    mu = rng.normal(size=(m, d))
    logvar = rng.normal(scale=0.5, size=(m, d))
    z = mu + np.exp(0.5 * logvar) * rng.normal(size=(m, d))

    def density(x: float, mean: float, lv: float) -> float:
        return math.exp(-0.5 * (x - mean) ** 2 / math.exp(lv)) / math.sqrt(2 * math.pi * math.exp(lv))

    tc = 0.0
    for i in range(m):
        joint = sum(math.prod(density(z[i, j], mu[k, j], logvar[k, j]) for j in range(d)) for k in range(m)) / (n * m)
        marginals = math.prod(sum(density(z[i, j], mu[k, j], logvar[k, j]) for k in range(m)) / (n * m)
                              for j in range(d))
        tc += math.log(joint) - math.log(marginals)
    tc /= m
    got = total_correlation(*(torch.tensor(a, dtype=torch.float64) for a in (z, mu, logvar)), dataset_size=n)
    assert got.item() == pytest.approx(tc, rel=1e-10, abs=1e-10)


def test_total_correlation_is_finite_where_densities_underflow():
    mu = torch.tensor([[0.0, 0.0], [1e3, -1e3], [-1e3, 1e3]])
    logvar = torch.full((3, 2), -20.0)
    tc = total_correlation(mu.clone(), mu, logvar, dataset_size=1000)
    assert torch.isfinite(tc)


def test_dip_penalties_by_hand():
    cov = torch.tensor([[2.0, 0.5], [0.5, 0.25]])
    # off-diagonal: 2 * 0.5^2 = 0.5; diagonal: (2 - 1)^2 + (0.25 - 1)^2 = 1.5625
    assert dip_penalty(cov, 3.0, 7.0).item() == pytest.approx(3.0 * 0.5 + 7.0 * 1.5625)
    mu = torch.tensor([[1.0, 0.0], [-1.0, 2.0], [0.0, 1.0], [2.0, 1.0]])
    centred = mu.numpy() - mu.numpy().mean(0)
    assert np.allclose(covariance(mu).numpy(), centred.T @ centred / 4)  # biased: 1/n
    logvar = torch.log(torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]))
    expected = centred.T @ centred / 4 + np.diag([4.0, 5.0])
    assert np.allclose(dip_ii_covariance(mu, logvar).numpy(), expected, atol=1e-5)


def test_permute_dims_permutes_each_column_independently():
    z = torch.arange(200, dtype=torch.float32).reshape(50, 4)
    g = torch.Generator().manual_seed(0)
    p = permute_dims(z, g)
    for j in range(4):
        assert torch.equal(torch.sort(p[:, j]).values, z[:, j])
    rows = (p - torch.arange(4) ) / 4  # row index each entry came from
    assert not all(torch.equal(rows[:, 0], rows[:, j]) for j in range(1, 4))
    assert not torch.equal(p, z)
    assert torch.equal(p, permute_dims(z, torch.Generator().manual_seed(0)))


def test_capacity_schedule():
    assert capacity(0, 25.0, 100) == 0.0
    assert capacity(50, 25.0, 100) == 12.5
    assert capacity(100, 25.0, 100) == 25.0
    assert capacity(10_000, 25.0, 100) == 25.0


def test_reconstruction_likelihoods():
    logits = torch.tensor([[[[0.0, 2.0], [-1.0, 3.0]]]])
    x = torch.tensor([[[[1.0, 0.0], [0.5, 1.0]]]])
    p = torch.sigmoid(logits)
    manual = -(x * torch.log(p) + (1 - x) * torch.log(1 - p)).sum()
    assert bernoulli_nll(logits, x).item() == pytest.approx(manual.item(), rel=1e-6)
    # sigma = 1/sqrt(2): the sum of squares (disentanglement_lib's l2 loss); mean over the batch
    two = torch.cat([logits, logits])
    assert gaussian_nll(two, torch.cat([x, x]), 1 / math.sqrt(2)).item() == pytest.approx(((p - x) ** 2).sum().item(),
                                                                                         rel=1e-6)


def _outputs(batch: int = 6, latent: int = 3, seed: int = 0) -> tuple[dict, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    mu, logvar = torch.randn(batch, latent, generator=g), 0.3 * torch.randn(batch, latent, generator=g)
    out = {"mu": mu, "logvar": logvar, "z": mu + torch.exp(0.5 * logvar) * torch.randn(batch, latent, generator=g),
           "logits": torch.randn(batch, 1, 64, 64, generator=g),
           "d_real": torch.randn(batch, 2, generator=g), "d_permuted": torch.randn(batch, 2, generator=g)}
    return out, torch.rand(batch, 1, 64, 64, generator=g)


def test_losses_are_written_out_in_full():
    out, x = _outputs()
    recon = bernoulli_nll(out["logits"], x)
    kl = gaussian_kl(out["mu"], out["logvar"]).sum(1).mean()
    tc = total_correlation(out["z"], out["mu"], out["logvar"], 1000)
    cases = {
        "vae": ({}, recon + kl),
        "beta-vae": ({"beta": 3.0}, recon + 3.0 * kl),
        "annealed-vae": ({"gamma": 10.0, "c_max": 4.0, "c_steps": 10}, recon + 10.0 * (kl - 2.0).abs()),
        "beta-tcvae": ({"beta": 6.0}, recon + kl + 5.0 * tc),
        "dip-vae-i": ({"lambda_od": 2.0, "lambda_d": 20.0}, recon + kl + dip_penalty(covariance(out["mu"]), 2.0, 20.0)),
        "dip-vae-ii": ({"lambda_od": 2.0, "lambda_d": 2.0},
                       recon + kl + dip_penalty(dip_ii_covariance(out["mu"], out["logvar"]), 2.0, 2.0)),
        "factor-vae": ({"gamma": 7.0}, recon + kl + 7.0 * (out["d_real"][:, 0] - out["d_real"][:, 1]).mean()),
    }
    # tested in their own files: tests/test_baselines_{lsbd,infogan,adavae,quessard,hfs_aae}.py
    assert set(cases) == set(MODELS) - {"lsbd-vae", "infogan", "ada-gvae", "ada-ml-vae", "quessard", "hfs-vae", "aae"}
    for name, (params, expected) in cases.items():
        config = make_config(name, params)
        loss = get_family(config).loss(out, x, config, 5, 1000)
        assert loss.groups["model"].item() == pytest.approx(expected.item(), rel=1e-6), name
    # beta-TCVAE with beta = 1 is the VAE
    assert get_family(make_config("beta-tcvae", {"beta": 1.0})).loss(out, x, make_config("beta-tcvae", {"beta": 1.0}),
                                                                      0, 1000).groups["model"].item() == \
        pytest.approx((recon + kl).item(), rel=1e-6)


def test_factor_vae_discriminator_loss_is_the_cross_entropy():
    out, x = _outputs()
    config = make_config("factor-vae")
    disc = get_family(config).loss(out, x, config, 0, 1000).groups["discriminator"]
    p_real = torch.softmax(out["d_real"], 1)[:, 0]
    p_perm = torch.softmax(out["d_permuted"], 1)[:, 1]
    expected = -0.5 * (torch.log(p_real).mean() + torch.log(p_perm).mean())
    assert disc.item() == pytest.approx(expected.item(), rel=1e-6)


def test_factor_vae_optimisers_split_the_parameters():
    config = make_config("factor-vae", {"latent_dim": 3, "disc_width": 8, "disc_layers": 2})
    family = get_family(config)
    model = family.build(config, (64, 64, 1))
    groups = family.groups(model, config)
    vae_ids = {id(p) for p in groups["model"][0]}
    disc_ids = {id(p) for p in groups["discriminator"][0]}
    assert not vae_ids & disc_ids
    assert vae_ids | disc_ids == {id(p) for p in model.parameters()}
    assert groups["discriminator"][1].defaults["betas"] == (0.5, 0.9)


@pytest.mark.parametrize("architecture,channels", list(itertools.product(["dlib", "burgess", "mlp"], [1, 3])))
def test_architectures_map_64x64_images(architecture, channels):
    config = make_config("vae", {"architecture": architecture, "latent_dim": 5})
    enc, dec = build_encoder(config, channels), build_decoder(config, channels)
    enc.eval(), dec.eval()
    h = enc(torch.rand(2, channels, 64, 64))
    assert h.shape == (2, config.hidden)
    assert dec(torch.randn(2, 5)).shape == (2, channels, 64, 64)


def test_conv_kernels_follow_the_sources():
    kernels = {a: [m.kernel_size[0] for m in build_encoder(make_config("vae", {"architecture": a}), 3)
                   if isinstance(m, torch.nn.Conv2d)] for a in ("dlib", "burgess")}
    assert kernels == {"dlib": [4, 4, 2, 2], "burgess": [4, 4, 4, 4]}
    wide = make_config("vae", {"channels": "16,16,32,48"})
    widths = [m.out_channels for m in build_encoder(wide, 3) if isinstance(m, torch.nn.Conv2d)]
    assert widths == [16, 16, 32, 48]


def test_config_round_trip_and_hash():
    for name in MODELS:
        config = make_config(name, {"latent_dim": "4", "seed": "3"})
        again = config_from_dict(json.loads(config.to_json()))
        assert again == config and again.hash() == config.hash()
        for f in dataclasses.fields(config):
            value = getattr(config, f.name)
            changed = (value + 1 if isinstance(value, int) else value * 0.5 + 0.01 if isinstance(value, float)
                       else None)
            if changed is not None and f.name not in ("adam_beta1", "adam_beta2"):
                try:
                    other = config.replace(**{f.name: changed})
                except FactorbenchError:
                    continue
                assert other.hash() != config.hash(), (name, f.name)
    assert make_config("vae").hash() != make_config("beta-vae", {"beta": 1.0}).hash()


@pytest.mark.parametrize("model,params,message", [
    ("no-such-model", {}, "unknown model"),
    ("vae", {"betta": "4"}, "unknown parameter 'betta'"),
    ("beta-vae", {"beta": "four"}, "expects float"),
    ("vae", {"latent_dim": "0"}, "latent_dim must be positive"),
    ("vae", {"steps": "-5"}, "steps must be positive"),
    ("vae", {"architecture": "resnet"}, "unknown architecture"),
    ("vae", {"channels": "32,32"}, "four positive widths"),
    ("beta-vae", {"beta": "-1"}, "beta must be >= 0"),
    ("beta-vae", {"beta": "nan"}, "beta must be >= 0, got nan"),
    ("vae", {"lr": "inf"}, "lr must be positive, got inf"),
    ("annealed-vae", {"c_steps": "0"}, "c_steps must be positive"),
    ("factor-vae", {"disc_layers": "0"}, "disc_layers must be positive"),
    ("dip-vae-i", {"lambda_d": "-1"}, "lambda_d must be >= 0"),
    ("beta-tcvae", {"beta": "-inf"}, "beta must be >= 0"),
])
def test_bad_configs_are_refused_clearly(model, params, message):
    with pytest.raises(FactorbenchError, match=message):
        make_config(model, params)


def test_config_from_another_version_is_refused():
    data = make_config("vae").to_dict()
    data["version"] = 99
    with pytest.raises(FactorbenchError, match="version 99"):
        config_from_dict(data)
