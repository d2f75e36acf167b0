"""Quessard et al. 2020: Givens products against the definition, the entanglement regulariser against its
formula, the trajectories against the factor values of the real square and objects sets, the loss written
out, bad input, resume and a short training."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from factorbench.baselines.config import get_family, make_config  # noqa: E402
from factorbench.baselines.data import TrainingData  # noqa: E402
from factorbench.baselines.quessard import (QuessardBatches, draw_trajectories, entanglement,  # noqa: E402
                                            givens_matrix, grid_steps, planes)
from factorbench.baselines.runs import load_run  # noqa: E402
from factorbench.baselines.trainer import TrainOptions, train  # noqa: E402
from factorbench.generators.errors import FactorbenchError  # noqa: E402

QUIET = TrainOptions(progress=False, samples=False, log_every=10, threads=1)
TINY = {"channels": "8,8,8,8", "hidden": 32, "batch_size": 4, "trajectories": 64}


# --------------------------------------------------------------------------- rotations


def _rotation(n: int, i: int, j: int, theta: float) -> torch.Tensor:
    """R_ij(theta) written out: the identity but for cos/sin in rows and columns i, j (the paper's sign)."""
    r = torch.eye(n, dtype=torch.float64)
    r[i, i] = r[j, j] = math.cos(theta)
    r[i, j], r[j, i] = math.sin(theta), -math.sin(theta)
    return r


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7])
def test_givens_products_are_rotations(n):
    m = n * (n - 1) // 2
    angles = (torch.rand(6, m, generator=torch.Generator().manual_seed(n), dtype=torch.float64) - 0.5) * 4 * math.pi
    mats = givens_matrix(angles, n)
    assert mats.shape == (6, n, n)
    eye = torch.eye(n, dtype=torch.float64)
    assert torch.allclose(mats @ mats.transpose(-1, -2), eye.expand(6, n, n), atol=1e-12)
    assert torch.allclose(torch.linalg.det(mats), torch.ones(6, dtype=torch.float64), atol=1e-12)
    assert torch.equal(givens_matrix(torch.zeros(m, dtype=torch.float64), n), eye)
    # the product in the stated order: (0,1), (0,2), ..., (n-2, n-1), each R_ij written out
    expected = eye
    for k, (i, j) in enumerate(planes(n)):
        expected = expected @ _rotation(n, i, j, float(angles[0, k]))
    assert torch.allclose(mats[0], expected, atol=1e-12)


def test_givens_order_and_sign_match_the_definition():
    assert planes(4) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    theta = 0.3
    two = givens_matrix(torch.tensor([theta], dtype=torch.float64), 2)
    assert torch.allclose(two, torch.tensor([[math.cos(theta), math.sin(theta)], [-math.sin(theta), math.cos(theta)]],
                                            dtype=torch.float64))
    # the order matters: R_01 R_02 differs from R_02 R_01
    a, b = 0.4, -1.1
    ab = givens_matrix(torch.tensor([a, b, 0.0], dtype=torch.float64), 3)
    assert torch.allclose(ab, _rotation(3, 0, 1, a) @ _rotation(3, 0, 2, b))
    assert not torch.allclose(ab, _rotation(3, 0, 2, b) @ _rotation(3, 0, 1, a))


# --------------------------------------------------------------------------- regulariser


def test_entanglement_is_its_formula_on_hand_made_angles():
    # the authors' own example: [1, 1, 0.5, 0, 0] -> 1 + 1 + 0.25 - 1 = 1.25
    assert entanglement(torch.tensor([[1.0, 1.0, 0.5, 0.0, 0.0]])).item() == pytest.approx(1.25)
    angles = torch.tensor([[1.0, 1.0, 0.5, 0.0, 0.0, 0.0],
                           [0.0, -2.0, 0.0, 0.0, 0.0, 0.3],
                           [0.1, 0.2, -0.3, 0.0, 0.0, 0.0]], dtype=torch.float64)
    per_action = [1.0 + 1.0 + 0.25 - 1.0, 4.0 + 0.09 - 4.0, 0.01 + 0.04 + 0.09 - 0.09]
    assert entanglement(angles).item() == pytest.approx(sum(per_action) / 3, rel=1e-12)
    # the largest |theta| is left out whatever its sign
    assert entanglement(torch.tensor([[-3.0, 1.0]])).item() == pytest.approx(1.0)


def test_entanglement_is_zero_for_rotations_in_a_single_plane():
    n = 4
    for k, (i, j) in enumerate(planes(n)):
        angles = torch.zeros(1, 6, dtype=torch.float64)
        angles[0, k] = 0.7 * (k + 1)
        assert entanglement(angles).item() == 0.0
        mat = givens_matrix(angles[0], n)
        others = [d for d in range(n) if d not in (i, j)]
        assert torch.allclose(mat[others][:, others], torch.eye(n - 2, dtype=torch.float64))  # identity elsewhere
        assert torch.allclose(mat[[i, j]][:, [i, j]], _rotation(2, 0, 1, 0.7 * (k + 1)))
    # two planes: not zero
    assert entanglement(torch.tensor([[0.5, 0.0, 0.0, 0.0, 0.0, 0.2]])).item() == pytest.approx(0.04)


# --------------------------------------------------------------------------- trajectories


def _check_transitions(data: TrainingData, rows: np.ndarray, actions: np.ndarray, cyclic: tuple[int, ...]) -> None:
    """Every transition is exactly one grid step (2 pi / 64 on these sets) of the claimed action's factor,
    in the claimed direction, wrapping around; every other factor is unchanged."""
    values, factors = data.factors, data.factor_specs
    for t in range(actions.shape[1]):
        before, after = values[rows[:, t]], values[rows[:, t + 1]]
        for k, j in enumerate(cyclic):
            step = factors[j].period / factors[j].num_values
            for a, sign in ((2 * k, 1), (2 * k + 1, -1)):
                moved = actions[:, t] == a
                assert moved.any()
                delta = np.mod(after[moved, j] - before[moved, j] - sign * step + math.pi, 2 * math.pi) - math.pi
                assert np.allclose(delta, 0, atol=1e-9)
                rest = [c for c in range(values.shape[1]) if c != j]
                assert np.array_equal(after[moved][:, rest], before[moved][:, rest])


def test_trajectories_on_square_are_single_steps_of_their_actions(generated):
    data = TrainingData(generated("square"), "all")
    steps = grid_steps(data.factor_classes, data.factor_specs, 2)
    assert steps.next.shape == (4096, 4) and steps.cyclic == (0, 1)
    # the whole action table: every row and action, wrap-around included
    _check_transitions(data, np.c_[np.arange(4096).repeat(4), steps.next.reshape(-1)],
                       np.tile(np.arange(4), 4096)[:, None], steps.cyclic)
    classes = data.factor_classes
    wraps = (classes[:, 0] == 63)
    assert np.array_equal(classes[steps.next[wraps, 0], 0], np.zeros(wraps.sum()))  # 63 -> 0
    assert np.array_equal(classes[steps.next[classes[:, 1] == 0, 3], 1], np.full(64, 63))  # 0 -> 63
    pool = draw_trajectories(steps, 3000, 5, seed=0)
    assert pool.rows.shape == (3000, 6) and pool.actions.shape == (3000, 5)
    _check_transitions(data, pool.rows, pool.actions, steps.cyclic)
    assert set(np.unique(pool.actions)) == {0, 1, 2, 3}
    data.close()


def test_trajectories_on_objects_keep_the_object(generated):
    data = TrainingData(generated("objects"), "all")
    steps = grid_steps(data.factor_classes, data.factor_specs, 1)
    pool = draw_trajectories(steps, 500, 4, seed=2)
    assert steps.cyclic == (1,) and pool.actions.max() == 1
    _check_transitions(data, pool.rows, pool.actions, steps.cyclic)
    data.close()


def test_batches_are_the_pool_and_depend_on_seed_and_step(generated):
    data = TrainingData(generated("square"), "all")
    config = make_config("quessard", {"trajectories": 100, "trajectory_length": 3, "batch_size": 16})
    draw = QuessardBatches(config, data)
    first = draw(0)
    assert first["images"].shape == (64, 64, 64, 3) and first["actions"].shape == (16, 3)
    assert first["images"].dtype == np.uint8 and first["actions"].dtype == np.int64
    chosen = draw._order.batch(0, 16)
    assert np.array_equal(first["images"], data.images_at(draw.pool.rows[chosen].reshape(-1)))
    assert np.array_equal(first["actions"], draw.pool.actions[chosen])
    # one pass over the pool: every trajectory once in the first 100 slots
    seen = np.concatenate([draw._order.batch(b, 16) for b in range(7)])[:100]
    assert np.array_equal(np.sort(seen), np.arange(100))
    again = QuessardBatches(config, data)
    for step in (0, 6, 7, 123):
        a, b = draw(step), again(step)
        assert np.array_equal(a["images"], b["images"]) and np.array_equal(a["actions"], b["actions"])
    other = QuessardBatches(config.replace(seed=1), data)
    assert not np.array_equal(other.pool.rows, draw.pool.rows)
    data.close()


# --------------------------------------------------------------------------- model and loss


def test_loss_is_written_out_in_full():
    config = make_config("quessard", {**TINY, "lam": 0.5, "latent_dim": 3, "cyclic_factors": 2})
    family = get_family(config)
    torch.manual_seed(0)
    model = family.build(config, (64, 64, 3))
    assert model.angles.shape == (4, 3) and model.angles.abs().max() < math.pi / 3
    b, t = 2, 3
    x = torch.rand(b * (t + 1), 3, 64, 64)
    actions = torch.tensor([[0, 3, 1], [2, 2, 0]])
    batch = {"images": x, "actions": actions}
    out = model(batch)
    loss = family.loss(out, batch, config, 0, 4096)
    with torch.no_grad():
        total = 0.0
        mats = [givens_matrix(model.angles[a].double(), 3) for a in range(4)]
        for p in range(b):
            h = model.head(model.encoder(x[p * (t + 1): p * (t + 1) + 1])).double()[0]
            z = h / h.norm()
            for s in range(t + 1):
                if s:
                    z = mats[int(actions[p, s - 1])] @ z
                recon = torch.sigmoid(model.decoder(z.float()[None])).double()[0].clamp(1e-12, 1 - 1e-12)
                target = x[p * (t + 1) + s].double()
                total += -(target * recon.log() + (1 - target) * (1 - recon).log()).mean().item()
        theta2 = model.angles.double() ** 2
        reg = np.mean([float(theta2[a].sum() - theta2[a].max()) for a in range(4)])
    expected = total / (b * (t + 1)) + 0.5 * reg
    assert set(loss.groups) == {"model"}
    assert loss.groups["model"].item() == pytest.approx(expected, rel=1e-5)
    assert loss.logs["entanglement"].item() == pytest.approx(reg, rel=1e-6)
    codes = model.encode(x)
    assert codes.shape == (8, 3) and torch.allclose(codes.norm(dim=1), torch.ones(8), atol=1e-6)
    assert torch.allclose(out["z"].norm(dim=-1), torch.ones(b, t + 1), atol=1e-5)  # rotations keep the sphere
    opt = family.groups(model, config)["model"][1]
    assert [g["lr"] for g in opt.param_groups] == [1e-3, 1e-2] and opt.param_groups[1]["params"] == [model.angles]


@pytest.mark.parametrize("params,message", [
    ({"latent_dim": "1"}, "at least 2 latent dimensions"),
    ({"lam": "-0.1"}, "lam must be >= 0"),
    ({"trajectories": "0"}, "trajectories must be >= 1"),
    ({"trajectory_length": "0"}, "trajectory_length must be >= 1"),
    ({"cyclic_factors": "0"}, "cyclic_factors must be >= 1"),
    ({"angle_lr": "0"}, "angle_lr must be positive"),
])
def test_bad_configs_are_refused(params, message):
    with pytest.raises(FactorbenchError, match=message):
        make_config("quessard", params)


def test_bad_data_is_refused_before_any_training(generated, tmp_path):
    cases = [
        ("teapot", "all", {}, "has no grid"),
        ("objects", "all", {}, "1 cyclic factor.*set cyclic_factors=1"),
        ("square", "train", {}, "lacks .* grid neighbours.*--split all"),
    ]
    for dataset, split, params, message in cases:
        with pytest.raises(FactorbenchError, match=message):
            train(make_config("quessard", {**TINY, **params, "steps": 5}), generated(dataset), tmp_path / "run",
                  split=split, options=QUIET)
        assert not (tmp_path / "run").exists()


def _weights(run_dir) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(run_dir / "weights.safetensors"))


def test_resume_is_bit_identical(generated, tmp_path):
    config = make_config("quessard", {**TINY, "steps": 20})
    whole = train(config, generated("square"), tmp_path / "whole", split="all", options=QUIET)
    stop = TrainOptions(**{**QUIET.__dict__, "stop_after": 7})
    assert train(config, generated("square"), tmp_path / "split", split="all", options=stop).step == 7
    second = train(config, generated("square"), tmp_path / "split", split="all", resume=True, options=QUIET)
    assert whole.status == second.status == "finished"
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "split")
    assert a.keys() == b.keys() and "angles" in a and all(np.array_equal(a[k], b[k]) for k in a)


def test_short_training_lowers_the_loss_and_gives_codes_on_the_sphere(generated, tmp_path):
    """Square, small networks, 300 steps of 4 trajectories: the reconstruction falls (the decoder learns at
    least the dark background), the regulariser pulls the angles towards single planes, and the finished
    run encodes onto the unit sphere and draws its action traversals."""
    config = make_config("quessard", {**TINY, "steps": 300, "lam": 1.0})
    train(config, generated("square"), tmp_path / "run", split="all",
          options=TrainOptions(**{**QUIET.__dict__, "samples": True, "log_every": 50}))
    rows = list(csv.DictReader(open(tmp_path / "run" / "log.csv")))
    recon = [float(r["recon"]) for r in rows]
    ent = [float(r["entanglement"]) for r in rows]
    assert recon[-1] < 0.5 * recon[0] and ent[-1] < 0.5 * ent[0], (recon, ent)
    assert (tmp_path / "run" / "samples.png").stat().st_size > 0
    encoder = load_run(tmp_path / "run")
    codes = encoder(TrainingData(generated("square"), "all").batch(0, 8, 0))
    assert isinstance(codes, np.ndarray) and codes.shape == (8, 4)
    assert np.allclose(np.linalg.norm(codes, axis=1), 1, atol=1e-5)
    rows = encoder.model.traversals(torch.from_numpy(codes[:1]), 5)
    assert len(rows) == 4 and all(z.shape == (5, 4) for _, z in rows)
    mats = encoder.model.matrices()
    assert torch.allclose(rows[1][1][2], mats[1] @ mats[1] @ torch.from_numpy(codes[0]), atol=1e-5)
