"""Almudevar & Ortega's appendix C architectures, the weight decay and the step learning-rate schedule."""

from __future__ import annotations

import csv
import itertools
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from factorbench.baselines import models  # noqa: E402,F401
from factorbench.baselines.config import (ARCHITECTURES, FIXED_WIDTH_ARCHITECTURES, MODELS,  # noqa: E402
                                          config_from_dict, get_family, make_config)
from factorbench.baselines.nets import (ARCHITECTURE_REGISTRY, SpatialBroadcastDecoder, build_decoder,  # noqa: E402
                                        build_encoder, feature_width)
from factorbench.baselines.trainer import TrainOptions, train  # noqa: E402
from factorbench.generators.errors import FactorbenchError  # noqa: E402

QUIET = TrainOptions(progress=False, samples=False, log_every=10, threads=1)


def _layers(module: torch.nn.Module, kind: type) -> list[torch.nn.Module]:
    return [m for m in module.modules() if isinstance(m, kind)]


def _shape_trace(module: torch.nn.Sequential, x: torch.Tensor) -> list[tuple[int, ...]]:
    """Output shape (without the batch) after every parametrised layer."""
    shapes = []
    for layer in module:
        x = layer(x)
        if any(True for _ in layer.parameters(recurse=False)):
            shapes.append(tuple(x.shape[1:]))
    return shapes


def test_the_registry_holds_every_architecture_name():
    assert set(ARCHITECTURE_REGISTRY) == set(ARCHITECTURES)
    assert FIXED_WIDTH_ARCHITECTURES < set(ARCHITECTURES)


@pytest.mark.parametrize("architecture,channels", list(itertools.product(ARCHITECTURES, [1, 3])))
def test_every_architecture_maps_one_and_three_channel_images(architecture, channels):
    config = make_config("beta-vae", {"architecture": architecture, "latent_dim": 6})
    enc, dec = build_encoder(config, channels).eval(), build_decoder(config, channels).eval()
    assert enc(torch.rand(2, channels, 64, 64)).shape == (2, feature_width(config))
    assert dec(torch.randn(2, 6)).shape == (2, channels, 64, 64)


# output shapes of the tables of Almudevar & Ortega 2025, appendix C (C = 3, latent_dim = 10), layer by layer
TABLES = {
    "burgess-2018": ([(32, 32, 32), (32, 16, 16), (32, 8, 8), (32, 4, 4), (256,), (256,)],            # Table 2
                     [(256,), (256,), (512,), (32, 8, 8), (32, 16, 16), (32, 32, 32), (3, 64, 64)]),  # Table 3
    "chen-mlp": ([(1200,), (1200,)], [(1200,), (1200,), (1200,), (12288,)]),                        # Tables 4-5
    "burgess": ([(32, 32, 32), (32, 16, 16), (64, 8, 8), (64, 4, 4), (256,)],                        # Table 6 (C.3)
                [(256,), (1024,), (64, 8, 8), (32, 16, 16), (32, 32, 32), (3, 64, 64)]),              # Table 7
    "locatello-sbd": ([(32, 32, 32), (32, 16, 16), (64, 8, 8), (64, 4, 4), (256,)],                  # Table 6
                      [(64, 64, 64)] * 4 + [(3, 64, 64)]),                                            # Table 8
    "montero-small": ([(32, 32, 32), (32, 16, 16), (64, 8, 8), (64, 4, 4), (128, 2, 2), (256,)],     # Table 9
                      [(256,), (512,), (64, 4, 4), (64, 8, 8), (32, 16, 16), (32, 32, 32), (3, 64, 64)]),
    "montero-large": ([(64, 32, 32), (64, 16, 16), (128, 8, 8), (128, 4, 4), (256, 2, 2), (256,)],   # Table 11
                      [(256,), (1024,), (128, 4, 4), (128, 8, 8), (64, 16, 16), (64, 32, 32), (3, 64, 64)]),
}


@pytest.mark.parametrize("architecture", sorted(TABLES))
def test_layers_have_the_output_shapes_of_the_papers_tables(architecture):
    config = make_config("vae", {"architecture": architecture})
    enc_shapes, dec_shapes = TABLES[architecture]
    assert _shape_trace(build_encoder(config, 3), torch.rand(2, 3, 64, 64)) == enc_shapes
    decoder = build_decoder(config, 3)
    if isinstance(decoder, SpatialBroadcastDecoder):
        decoder = decoder.net
        z = torch.randn(2, 12, 64, 64)  # the tiled latent and its two coordinate channels
    else:
        z = torch.randn(2, 10)
    assert _shape_trace(decoder, z) == dec_shapes


def test_chen_decoder_uses_tanh_and_montero_kernels_are_k4_s2_p1():
    chen = build_decoder(make_config("vae", {"architecture": "chen-mlp"}), 3)
    assert len(_layers(chen, torch.nn.Tanh)) == 3 and not _layers(chen, torch.nn.ReLU)
    for name in ("burgess-2018", "montero-small", "montero-large"):
        config = make_config("vae", {"architecture": name})
        convs = _layers(build_encoder(config, 1), torch.nn.Conv2d) + _layers(build_decoder(config, 1),
                                                                             torch.nn.ConvTranspose2d)
        assert {(c.kernel_size, c.stride, c.padding) for c in convs} == {((4, 4), (2, 2), (1, 1))}
    sbd = build_decoder(make_config("vae", {"architecture": "locatello-sbd"}), 1)
    assert {(c.kernel_size, c.stride, c.padding) for c in _layers(sbd, torch.nn.Conv2d)} == {((5, 5), (1, 1), (2, 2))}


def test_spatial_broadcast_tiles_the_code_beside_a_coordinate_grid():
    dec = SpatialBroadcastDecoder(latent_dim=3, out_channels=1)
    seen = {}
    dec.net[0].register_forward_hook(lambda module, args, out: seen.update(input=args[0]))
    z = torch.tensor([[0.5, -1.0, 2.0]])
    dec(z)
    x = seen["input"][0]
    assert x.shape == (5, 64, 64)
    assert torch.equal(x[:3], z[0][:, None, None].expand(3, 64, 64))
    assert torch.allclose(x[3, 0], torch.linspace(-1, 1, 64)) and torch.allclose(x[4, :, 0], torch.linspace(-1, 1, 64))
    assert "grid" not in dec.state_dict()  # computed, not stored with the weights


def test_fixed_width_architectures_refuse_channels_and_hidden():
    for name in sorted(FIXED_WIDTH_ARCHITECTURES):
        with pytest.raises(FactorbenchError, match=f"the {name} architecture has the fixed widths.*leave hidden unset"):
            make_config("beta-vae", {"architecture": name, "hidden": "128"})
        with pytest.raises(FactorbenchError, match="leave channels unset"):
            make_config("vae", {"architecture": name, "channels": "8,8,8,8"})
    with pytest.raises(FactorbenchError, match="unknown architecture 'locatello'; choose one of dlib, burgess"):
        make_config("vae", {"architecture": "locatello"})


def test_new_settings_keep_every_earlier_config_hash():
    """weight_decay and the schedule are left out of the canonical form at their defaults: the hashes of
    runs trained before they existed stay the same (pinned here for three models)."""
    pinned = {"vae": "3dcb2306b7c670a4", "beta-vae": "26aca35bb3ae2c84", "factor-vae": "5127d362958a4de4"}
    for name, prefix in pinned.items():
        config = make_config(name)
        assert config.hash().startswith(prefix)
        assert not {"weight_decay", "lr_decay_every", "lr_decay_factor"} & set(config.to_dict()["params"])
    shown = make_config("vae").to_dict(every_setting=True)["params"]  # `factorbench train list` shows them
    assert (shown["weight_decay"], shown["lr_decay_every"], shown["lr_decay_factor"]) == (0.0, 0, 0.1)
    decayed = make_config("beta-vae", {"weight_decay": "4e-5", "lr_decay_every": "100"})
    params = decayed.to_dict()["params"]
    assert params["weight_decay"] == 4e-5 and params["lr_decay_every"] == 100 and "lr_decay_factor" not in params
    assert config_from_dict(json.loads(decayed.to_json())) == decayed
    assert decayed.hash() != make_config("beta-vae").hash()
    for model in MODELS:  # every family takes the settings
        assert make_config(model, {"weight_decay": "1e-5"}).weight_decay == 1e-5
    with pytest.raises(FactorbenchError, match="weight_decay must be >= 0"):
        make_config("vae", {"weight_decay": "-1"})
    with pytest.raises(FactorbenchError, match="lr_decay_factor must be positive"):
        make_config("vae", {"lr_decay_factor": "0"})


def test_lr_factor_is_a_step_function_of_the_step():
    config = make_config("vae", {"lr_decay_every": "20", "lr_decay_factor": "0.1"})
    assert [config.lr_factor(s) for s in (0, 19, 20, 39, 40)] == pytest.approx([1, 1, 0.1, 0.1, 0.01])
    assert make_config("vae").lr_factor(10**6) == 1.0


def test_weight_decay_reaches_the_model_optimiser_only():
    config = make_config("factor-vae", {"weight_decay": "4e-5", "latent_dim": 3, "disc_width": 8, "disc_layers": 2})
    family = get_family(config)
    groups = family.groups(family.build(config, (64, 64, 1)), config)
    assert groups["model"][1].defaults["weight_decay"] == 4e-5
    assert groups["discriminator"][1].defaults["weight_decay"] == 0


def test_schedule_and_weight_decay_train_and_resume_bit_identically(generated, tmp_path):
    """The rate follows the schedule (logged per interval) and a run stopped between two decays resumes
    to the very weights of an uninterrupted one."""
    config = make_config("beta-vae", {"latent_dim": 3, "channels": "8,8,8,8", "hidden": 32, "batch_size": 16,
                                      "steps": 40, "lr": 1e-3, "weight_decay": 4e-5, "lr_decay_every": 15,
                                      "lr_decay_factor": 0.5})
    train(config, generated("dsprites"), tmp_path / "whole", options=QUIET)
    stop = TrainOptions(**{**QUIET.__dict__, "stop_after": 23})
    assert train(config, generated("dsprites"), tmp_path / "split", options=stop).step == 23
    assert train(config, generated("dsprites"), tmp_path / "split", resume=True, options=QUIET).status == "finished"
    from safetensors.numpy import load_file

    a = load_file(str(tmp_path / "whole" / "weights.safetensors"))
    b = load_file(str(tmp_path / "split" / "weights.safetensors"))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    rows = list(csv.DictReader(open(tmp_path / "whole" / "log.csv")))
    # logged every 10 steps: the rate of the interval's last step (steps 9, 19, 29, 39)
    assert [float(r["lr"]) for r in rows] == pytest.approx([1e-3, 5e-4, 5e-4, 2.5e-4])


def test_the_default_memory_limit_is_a_quarter_of_the_machine_within_bounds():
    import os

    from factorbench.baselines.data import DEFAULT_MEMORY_LIMIT

    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert DEFAULT_MEMORY_LIMIT == min(8 << 30, max(1 << 30, total // 4))
