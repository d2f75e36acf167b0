"""InfoGAN (WGAN-GP): the gradient penalty, the information term and the two losses against their formulas,
the step schedule and batches, which parameters each step moves, resume equality, the run as an encoder,
bad input, and a short training."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from factorbench.baselines.config import get_family, make_config  # noqa: E402
from factorbench.baselines.data import TrainingData  # noqa: E402
from factorbench.baselines.infogan import (InfoGAN, InfoGANBatches, code_nll, critic_loss, generator_loss,  # noqa: E402
                                           gradient_penalty, infogan_loss)
from factorbench.baselines.runs import load_run  # noqa: E402
from factorbench.baselines.trainer import TrainOptions, train  # noqa: E402
from factorbench.generators.errors import FactorbenchError  # noqa: E402

QUIET = TrainOptions(progress=False, samples=False, log_every=10, threads=1)
TINY = {"latent_dim": 3, "channels": "8,8,8,8", "hidden": 32, "batch_size": 16}


def _tiny(**params) -> object:
    return make_config("infogan", {**TINY, **params})


def _weights(run_dir) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(run_dir / "weights.safetensors"))


def _init_weights(config) -> dict[str, np.ndarray]:
    """The weights the trainer starts from (it seeds torch with the config's seed, then builds)."""
    torch.manual_seed(config.seed)
    model = get_family(config).build(config, (64, 64, 3))
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


# --------------------------------------------------------------------------- loss terms


def test_gradient_penalty_of_a_linear_critic_is_exact():
    """f(x) = w.x has gradient w everywhere: the penalty is (|w| - 1)^2 whatever the images and eps, and its
    gradient in w is 2 (|w| - 1) w / |w| (the penalty keeps the graph of the input gradient)."""
    gen = torch.Generator().manual_seed(0)
    real = torch.rand((5, 2, 3, 3), generator=gen, dtype=torch.float64)
    fake = torch.rand((5, 2, 3, 3), generator=gen, dtype=torch.float64) * 2 - 1
    eps = torch.rand((5, 1, 1, 1), generator=gen, dtype=torch.float64)
    for scale in (0.3, 1.0, 2.5):
        w = (torch.randn(18, generator=gen, dtype=torch.float64) * scale).requires_grad_(True)
        penalty = gradient_penalty(lambda x: x.flatten(1) @ w, real, fake, eps)
        norm = w.detach().norm()
        assert penalty.dtype == torch.float64
        assert penalty.item() == pytest.approx((norm.item() - 1) ** 2, rel=1e-12, abs=1e-14)
        penalty.backward()
        assert torch.allclose(w.grad, 2 * (norm - 1) * w.detach() / norm, rtol=1e-12)


def test_gradient_penalty_of_a_quadratic_critic_at_the_interpolates():
    """f(x) = |x|^2 / 2 has gradient x: the penalty is the mean of (|x^| - 1)^2, x^ = eps real + (1 - eps) fake."""
    gen = torch.Generator().manual_seed(1)
    real = torch.rand((7, 1, 4, 4), generator=gen, dtype=torch.float64)
    fake = torch.rand((7, 1, 4, 4), generator=gen, dtype=torch.float64) - 0.5
    eps = torch.rand((7, 1, 1, 1), generator=gen, dtype=torch.float64)
    penalty = gradient_penalty(lambda x: 0.5 * x.flatten(1).pow(2).sum(1), real, fake, eps)
    x_hat = (eps * real + (1 - eps) * fake).flatten(1)
    assert penalty.item() == pytest.approx(((x_hat.norm(dim=1) - 1) ** 2).mean().item(), rel=1e-12)
    # eps = 1 puts the interpolate on the real image, eps = 0 on the generated one
    ones, zeros = torch.ones_like(eps), torch.zeros_like(eps)
    on_real = gradient_penalty(lambda x: 0.5 * x.flatten(1).pow(2).sum(1), real, fake, ones)
    on_fake = gradient_penalty(lambda x: 0.5 * x.flatten(1).pow(2).sum(1), real, fake, zeros)
    assert on_real.item() == pytest.approx(((real.flatten(1).norm(dim=1) - 1) ** 2).mean().item(), rel=1e-12)
    assert on_fake.item() == pytest.approx(((fake.flatten(1).norm(dim=1) - 1) ** 2).mean().item(), rel=1e-12)


def test_gradient_penalty_under_bf16_autocast_matches_float32():
    """The critic under the trainer's CPU bfloat16 autocast: the penalty (float32 interpolates and norm) is
    within bf16 rounding of the float32 one, and back-propagates into the critic."""
    config = _tiny()
    torch.manual_seed(0)
    model = InfoGAN(config, (64, 64, 3))
    gen = torch.Generator().manual_seed(2)
    real = torch.rand((8, 3, 64, 64), generator=gen) * 2 - 1
    fake = torch.rand((8, 3, 64, 64), generator=gen) * 2 - 1
    eps = torch.rand((8, 1, 1, 1), generator=gen)
    exact = gradient_penalty(model.critic_value, real, fake, eps)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = gradient_penalty(model.critic_value, real, fake, eps)
    assert low.dtype == torch.float32
    assert low.item() == pytest.approx(exact.item(), rel=0.03)
    # grad_x D of a ReLU network is piecewise constant in the biases, and Q does not enter it: the weights
    params = [p for name, p in model.body.named_parameters() if name.endswith("weight")] + [model.critic_head.weight]
    low.backward(inputs=params)
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in params)


def test_information_term_closed_form():
    """-log N(c; mu, 1) summed over codes, mean over the batch."""
    c = torch.tensor([[0.5, -0.5], [1.0, 0.0]], dtype=torch.float64)
    mu = torch.tensor([[0.0, 0.0], [0.0, 0.5]], dtype=torch.float64)
    # row 1: 0.125 + 0.125; row 2: 0.5 + 0.125; plus log 2 pi (two codes x 1/2 log 2 pi) in each row
    expected = (0.25 + 0.625) / 2 + math.log(2 * math.pi)
    assert code_nll(c, mu).item() == pytest.approx(expected, rel=1e-14)
    normal = torch.distributions.Normal(mu, torch.ones_like(mu))
    assert code_nll(c, mu).item() == pytest.approx(-normal.log_prob(c).sum(1).mean().item(), rel=1e-14)
    # Q predicting 0 for c ~ U(-1, 1): E[c^2] / 2 = 1/6 per code above the constant
    assert code_nll(c, c).item() == pytest.approx(math.log(2 * math.pi), rel=1e-14)


def test_critic_and_generator_losses_are_the_wgan_formulas():
    d_real = torch.tensor([1.0, 3.0], dtype=torch.float64)
    d_fake = torch.tensor([-2.0, 0.5, 0.0], dtype=torch.float64)
    penalty, info = torch.tensor(0.25, dtype=torch.float64), torch.tensor(4.0, dtype=torch.float64)
    # E[D(fake)] - E[D(real)] + 10 GP + 6 NLL = -0.5 - 2 + 2.5 + 24
    assert critic_loss(d_real, d_fake, penalty, info, 10.0, 6.0).item() == pytest.approx(24.0)
    # -E[D(fake)] + 6 NLL = 0.5 + 24
    assert generator_loss(d_fake, info, 6.0).item() == pytest.approx(24.5)
    assert critic_loss(d_real, d_fake, penalty, info, 0.0, 0.0).item() == pytest.approx(-2.5)


def test_loss_returns_the_group_of_its_phase():
    config = _tiny(info_weight=2.0, gp_weight=3.0)
    c = torch.tensor([[0.5, -0.5, 0.0]])
    q = torch.zeros((1, 3))
    out = {"c": c, "q_fake": q, "d_real": torch.tensor([2.0]), "d_fake": torch.tensor([1.0]),
           "penalty": torch.tensor(0.5)}
    nll = 0.25 + 1.5 * math.log(2 * math.pi)
    critic = infogan_loss(out, {"host_phase": np.array([0])}, config, 0, 100)
    assert list(critic.groups) == ["critic"]
    assert critic.groups["critic"].item() == pytest.approx(1.0 - 2.0 + 3.0 * 0.5 + 2.0 * nll, rel=1e-6)
    assert critic.logs["wasserstein"].item() == pytest.approx(1.0)
    gen = infogan_loss(out, {"host_phase": np.array([1])}, config, 5, 100)
    assert list(gen.groups) == ["generator"]
    assert gen.groups["generator"].item() == pytest.approx(-1.0 + 2.0 * nll, rel=1e-6)


# --------------------------------------------------------------------------- schedule, batches, steps


def test_batches_alternate_critic_and_generator_steps(generated):
    data = TrainingData(generated("square"), "all")
    config = _tiny(n_critic=3, seed=7)
    draw = InfoGANBatches(config, data)
    kinds = [draw.phase(s) for s in range(9)]
    assert kinds == [("critic", 0), ("critic", 1), ("critic", 2), ("generator", 0),
                     ("critic", 3), ("critic", 4), ("critic", 5), ("generator", 1), ("critic", 6)]
    # critic step k takes batch k of the seeded epochs (every image seen once per epoch of critic steps)
    assert np.array_equal(draw(4)["images"], data.batch(3, 16, 7)) and int(draw(4)["host_phase"][0]) == 0
    assert draw(3)["images"].shape == (0, 64, 64, 3) and int(draw(3)["host_phase"][0]) == 1
    data.close()


def test_each_step_moves_only_its_group(generated, tmp_path):
    """Step 0 is a critic step: the generator keeps its initial weights; with n_critic 1, step 1 is a
    generator step: the critic (body, critic head, Q head) keeps the weights step 0 left."""
    config = _tiny(n_critic=1, steps=1)
    init = _init_weights(config)
    train(config, generated("square"), tmp_path / "one", split="all", options=QUIET)
    one = _weights(tmp_path / "one")
    assert init.keys() == one.keys()
    gen_keys = [k for k in one if k.startswith("generator.")]
    critic_keys = [k for k in one if not k.startswith("generator.")]
    assert gen_keys and {k.split(".")[0] for k in critic_keys} == {"body", "critic_head", "q_head"}
    assert all(np.array_equal(one[k], init[k]) for k in gen_keys)
    assert all(not np.array_equal(one[k], init[k]) for k in critic_keys if "weight" in k)

    train(config.replace(steps=2), generated("square"), tmp_path / "two", split="all", options=QUIET)
    two = _weights(tmp_path / "two")
    assert all(np.array_equal(two[k], one[k]) for k in critic_keys)
    assert all(not np.array_equal(two[k], one[k]) for k in gen_keys if "weight" in k)


def test_resume_is_bit_identical(generated, tmp_path):
    config = _tiny(steps=40)
    whole = train(config, generated("square"), tmp_path / "whole", split="all", options=QUIET)
    stopped = train(config, generated("square"), tmp_path / "split", split="all",
                    options=TrainOptions(**{**QUIET.__dict__, "stop_after": 17}))
    assert stopped.status == "stopped" and stopped.step == 17
    second = train(config, generated("square"), tmp_path / "split", split="all", resume=True, options=QUIET)
    assert whole.status == second.status == "finished"
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "split")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    rows = lambda run: {r["step"]: r for r in csv.DictReader(open(run / "log.csv"))}  # noqa: E731
    ra, rb = rows(tmp_path / "whole"), rows(tmp_path / "split")
    assert ra["10"]["wasserstein"] == rb["10"]["wasserstein"] and ra["30"]["loss"] == rb["30"]["loss"]


def test_run_is_an_encoder_of_codes_with_a_picture(generated, tmp_path):
    config = _tiny(steps=12)
    train(config, generated("square"), tmp_path / "run", split="all",
          options=TrainOptions(**{**QUIET.__dict__, "samples": True}))
    assert (tmp_path / "run" / "samples.png").stat().st_size > 0
    encoder = load_run(tmp_path / "run")
    data = TrainingData(generated("square"), "all")
    codes = encoder(data.batch(0, 10, 0))
    data.close()
    assert isinstance(codes, np.ndarray) and codes.shape == (10, 3) and codes.dtype == np.float32
    # decode(c) is G(0, c) as logits: sigmoid(decode) = (tanh(a) + 1) / 2
    model = encoder.model
    c = torch.tensor([[0.3, -0.2, 0.9]])
    with torch.no_grad():
        assert torch.allclose(torch.sigmoid(model.decode(c)), (model.generate(c) + 1) / 2, atol=1e-6)
    rows = model.traversals(c, 5)
    assert len(rows) == 3 and torch.allclose(rows[1][1][:, 1], torch.linspace(-1, 1, 5))


def test_noise_widens_the_generator_input(generated, tmp_path):
    config = _tiny(noise_dim=4, steps=6, n_critic=2)
    train(config, generated("square"), tmp_path / "run", split="all", options=QUIET)
    weights = _weights(tmp_path / "run")
    assert weights["generator.0.weight"].shape == (32, 7)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("params, message", [
    ({"architecture": "mlp"}, "batch norm"),
    ({"n_critic": 0}, "n_critic"),
    ({"noise_dim": -1}, "noise_dim"),
    ({"info_weight": -1.0}, "info_weight"),
    ({"gp_weight": float("nan")}, "gp_weight"),
    ({"latent_dim": 0}, "latent_dim"),
])
def test_impossible_settings_are_refused(params, message):
    with pytest.raises(FactorbenchError, match=message):
        make_config("infogan", params)


def test_bad_dataset_is_refused_before_training(tmp_path, toy):
    from factorbench.generators import write_dataset

    path = write_dataset(toy, tmp_path / "toy.h5", n=50, progress=False)
    with pytest.raises(FactorbenchError, match="64 x 64"):
        train(_tiny(steps=5), path, tmp_path / "run", split="all", options=QUIET)
    assert not (tmp_path / "run").exists()


def test_defaults_are_eastwood_and_williams():
    config = make_config("infogan")
    assert (config.latent_dim, config.noise_dim, config.info_weight, config.gp_weight, config.n_critic) == \
        (10, 0, 6.0, 10.0, 5)
    assert (config.lr, config.adam_beta1, config.adam_beta2, config.batch_size) == (1e-4, 0.0, 0.9, 64)
    assert config.steps == 6 * 50 * (160_000 // 64 // 5)  # E&W count 80 % of the 200,000 images an epoch


# --------------------------------------------------------------------------- learning


@pytest.mark.slow
def test_short_training_learns(generated, tmp_path):
    """A few hundred steps on square: the critic's Wasserstein estimate rises while the generator's
    images are far from the data, then falls as the generator catches up, the gradient penalty with it."""
    config = _tiny(steps=300, lr=1e-3)
    train(config, generated("square"), tmp_path / "run", split="all",
          options=TrainOptions(**{**QUIET.__dict__, "log_every": 30}))
    rows = list(csv.DictReader(open(tmp_path / "run" / "log.csv")))
    w = [float(r["wasserstein"]) for r in rows]
    peak = int(np.argmax(w))
    assert 0 < peak < len(w) - 3
    assert w[-1] < 0.2 * w[peak]
    assert float(rows[-1]["gradient_penalty"]) < 0.2 * float(rows[peak]["gradient_penalty"])


def test_information_term_alone_is_learned():
    """The information term wired through both groups: with the Wasserstein terms left out, a hundred Adam
    steps of each group on it alone take -log Q(c | G(c)) from chance (Q predicting 0: D (1/6 + log(2 pi)/2))
    most of the way to its floor D log(2 pi) / 2 (Q exact): G writes the codes into its images and Q reads
    them back."""
    config = _tiny(lr=1e-3)
    torch.manual_seed(0)
    model = InfoGAN(config, (64, 64, 3))
    groups = get_family(config).groups(model, config)
    gen = torch.Generator().manual_seed(0)
    batch = {"images": torch.zeros((0, 3, 64, 64)), "host_phase": np.array([1])}
    floor = 3 * 0.5 * math.log(2 * math.pi)
    chance = floor + 3 / 6
    values = []
    for _ in range(100):
        out = model(batch, gen)
        info = code_nll(out["c"], out["q_fake"])
        for _, opt in groups.values():
            opt.zero_grad()
        info.backward()
        for _, opt in groups.values():
            opt.step()
        values.append(info.item())
    assert values[0] == pytest.approx(chance, abs=0.3)
    assert np.mean(values[-10:]) - floor < 0.4 * (chance - floor)
