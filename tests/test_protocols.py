"""Protocols, encoders, evaluate(), result files and the scores table."""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys

import numpy as np
import pytest

from factorbench.benchmark.adapters import ADAPTERS
from factorbench.benchmark.cli import main
from factorbench.benchmark.encoders import encode, load_encoder
from factorbench.benchmark.evaluation import evaluate
from factorbench.benchmark.protocols import PROTOCOLS, DatasetRef, Headline, MetricCall, Protocol, get_protocol
from factorbench.benchmark.results import format_table, load_result, reference_results, scores_table
from factorbench.generators.errors import FactorbenchError

# a small protocol on the embedded square set, fast enough for the default suite
SMALL = Protocol(
    "square-small-v1", 1, "test protocol", DatasetRef("square"),
    (MetricCall("d_lsbd", "d_lsbd", {}),
     MetricCall("mig", "mig", {"eval": "all"}),
     MetricCall("factor_vae", "factor_vae_score", {}, {"n_train": 300, "n_eval": 200, "n_variance": 1000}),
     MetricCall("dci", "dci", {"train": "train", "validation": "validation", "test": "test"},
                {"regressor": "lasso"})),
    Headline("d_lsbd", "score", "lower"))


@pytest.fixture
def data_dir(tmp_path_factory, monkeypatch):
    path = tmp_path_factory.getbasetemp() / "protocol-data"
    monkeypatch.setenv("FACTORBENCH_DATA", str(path))
    return path


# --------------------------------------------------------------------------- protocols


def test_registered_protocols_are_versioned_and_hash_stably():
    assert {"teapot-dci-v1", "square-lsbd-v1", "arrow-lsbd-v1", "airplane-lsbd-v1", "objects-lsbd-v1",
            "modelnet40-lsbd-v1", "coil100-lsbd-v1", "teapot-dependent-v1", "square-dependent-v1",
            "arrow-dependent-v1", "airplane-dependent-v1"} <= set(PROTOCOLS)
    for name, protocol in PROTOCOLS.items():
        assert name.endswith(f"-v{protocol.version}") and protocol.version >= 1
        again = Protocol(**{f.name: getattr(protocol, f.name) for f in dataclasses.fields(protocol)})
        assert again.hash() == protocol.hash() == protocol.hash()
        assert json.loads(protocol.to_json())["name"] == name
        for call in protocol.metrics:
            assert call.metric in ADAPTERS, (name, call.metric)


def test_protocol_hash_changes_with_every_setting():
    base = get_protocol("square-lsbd-v1")
    calls = list(base.metrics)
    calls[1] = dataclasses.replace(calls[1], settings={**calls[1].settings, "batch_size": 32})
    variants = [
        dataclasses.replace(base, metrics=tuple(calls)),
        dataclasses.replace(base, metrics=base.metrics[:1] + tuple(dataclasses.replace(c, seed=1) for c in base.metrics[1:])),
        dataclasses.replace(base, dataset=dataclasses.replace(base.dataset, seed=1)),
        dataclasses.replace(base, dataset=DatasetRef("square", {"side": 8})),
        dataclasses.replace(base, headline=Headline("mig", "score")),
    ]
    hashes = {v.hash() for v in variants}
    assert base.hash() not in hashes and len(hashes) == len(variants)


def test_protocol_settings_pin_every_metric_default():
    """Each metric call states every keyword setting of its metric, so a changed default cannot change
    a protocol's numbers without changing its hash."""
    from factorbench.benchmark.adapters import FED_BY_ADAPTER, metric_function

    for protocol in PROTOCOLS.values():
        for call in protocol.metrics:
            metric = metric_function(call.metric)
            keywords = {p.name for p in inspect.signature(metric).parameters.values()
                        if p.kind is p.KEYWORD_ONLY}
            missing = keywords - FED_BY_ADAPTER - set(call.settings)
            assert not missing, f"{protocol.name} {call.label}: settings do not pin {sorted(missing)}"


def test_a_protocol_cannot_read_a_split_its_dataset_lacks():
    with pytest.raises(FactorbenchError, match="correlated-single"):
        Protocol("square-bad-v1", 1, "bad", DatasetRef("square"),
                 (MetricCall("mig", "mig", {"eval": "correlated-single"}),), Headline("mig", "score"))


def test_unknown_protocol_lists_the_known_ones():
    with pytest.raises(FactorbenchError, match="square-lsbd-v1"):
        get_protocol("square-lsbd")


# --------------------------------------------------------------------------- encoders


class _Batches:
    """A stand-in dataset: images are the row index broadcast over a tiny image."""

    def __init__(self, n):
        self.images = np.arange(n, dtype=np.uint8)[:, None, None, None] * np.ones((1, 2, 2, 1), np.uint8)


@pytest.mark.parametrize("bad, message", [
    (lambda x: np.zeros(len(x)), "shape"),
    (lambda x: np.zeros((len(x) - 1, 3)), "rows for a batch"),
    (lambda x: np.full((len(x), 3), np.nan), "NaN"),
    (lambda x: (np.zeros((len(x), 3)), np.zeros((len(x), 2))), "must match"),
    (lambda x: np.array([["a"]] * len(x)), "dtype"),
])
def test_encoder_output_is_checked(bad, message):
    with pytest.raises(FactorbenchError, match=message):
        encode(bad, _Batches(10), np.arange(10), batch_size=4)


def test_encoder_code_size_must_be_fixed_and_encoder_callable():
    calls = iter([3, 4, 4])
    with pytest.raises(FactorbenchError, match="code size must be fixed"):
        encode(lambda x: np.zeros((len(x), next(calls))), _Batches(10), np.arange(10), batch_size=4)
    with pytest.raises(FactorbenchError, match="callable"):
        load_encoder(42)
    with pytest.raises(FactorbenchError, match="cannot import"):
        load_encoder("no_such_module_xyz:encode")
    with pytest.raises(FactorbenchError, match="reference encoder"):
        load_encoder("nonsense")


def test_encode_batches_in_order_and_accepts_torch():
    torch = pytest.importorskip("torch")
    mu, logvar = encode(lambda x: torch.tensor(x[:, 0, 0, :], dtype=torch.float32), _Batches(10), np.arange(10),
                        batch_size=3)
    np.testing.assert_array_equal(mu[:, 0], np.arange(10))
    assert logvar is None
    module = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 2))
    out, _ = encode(load_encoder(module), _Batches(5), np.arange(5), batch_size=2)
    assert out.shape == (5, 2)


# --------------------------------------------------------------------------- evaluate


@pytest.fixture
def small_results(data_dir):
    return {name: evaluate(SMALL, name, progress=False) for name in ("ideal", "random", "pca")}


def test_reference_encoders_order_and_result_round_trip(small_results, tmp_path):
    ideal, random, pca = (small_results[k] for k in ("ideal", "random", "pca"))
    assert ideal.metrics["d_lsbd"]["scalars"]["score"] < 0.01 < random.metrics["d_lsbd"]["scalars"]["score"]
    assert ideal.metrics["factor_vae"]["scalars"]["score"] == 1.0 > random.metrics["factor_vae"]["scalars"]["score"]
    assert pca.metrics["d_lsbd"]["scalars"]["score"] > 0.01
    assert ideal.code_dim == 4 and ideal.protocol_hash == SMALL.hash()
    assert ideal.dataset["spec_hash"] and ideal.dataset["sha256"]["images"]
    path = ideal.save(tmp_path / "r.json")
    assert load_result(path).to_dict() == json.loads(json.dumps(ideal.to_dict()))
    with pytest.raises(FactorbenchError, match="--force"):
        ideal.save(path)


def test_metric_warnings_reach_the_result_file_and_the_summary(small_results, data_dir, tmp_path):
    from factorbench.benchmark.cache import prepare_dataset
    from factorbench.benchmark.dataset import load

    with load(prepare_dataset(SMALL.dataset, progress=False)) as ds:
        f = ds.factors
    # the ideal code, scaled below FactorVAE's pruning threshold, with a constant dimension
    codes = 0.01 * np.stack([np.cos(f[:, 0]), np.sin(f[:, 0]), np.zeros(len(f)), np.cos(f[:, 1]), np.sin(f[:, 1])], 1)
    result = evaluate(SMALL, codes=codes, progress=False)
    assert result.metrics["factor_vae"]["scalars"]["score"] == 0.0
    (pruned,) = result.metrics["factor_vae"]["result"]["warnings"]
    assert pruned.startswith("5 of 5 codes have a std below the pruning threshold 0.05") and "no code is left" in pruned
    (constant,) = result.metrics["mig"]["result"]["warnings"]
    assert constant.startswith("1 of 5 code dimensions are constant on the 4096 samples")
    assert load_result(result.save(tmp_path / "r.json")).metrics["factor_vae"]["result"]["warnings"] == [pruned]
    summary = result.summary().splitlines()
    assert f"  warning (factor_vae): {pruned}" in summary and f"  warning (mig): {constant}" in summary
    assert "warning" not in small_results["ideal"].summary()


def test_codes_given_by_the_user_must_match_the_file(small_results, data_dir):
    with pytest.raises(FactorbenchError, match="rows"):
        evaluate(SMALL, codes=np.zeros((10, 4)), progress=False)
    with pytest.raises(FactorbenchError, match="either an encoder or codes"):
        evaluate(SMALL, progress=False)
    from factorbench.benchmark import load
    from factorbench.benchmark.cache import prepare_dataset

    with load(prepare_dataset(SMALL.dataset, progress=False)) as ds:
        angles = ds.factors
    codes = np.concatenate([np.cos(angles), np.sin(angles)], axis=1)
    again = evaluate(SMALL, codes=codes, progress=False, only=("d_lsbd",))
    assert again.partial and again.metrics["d_lsbd"]["scalars"]["score"] < 0.01


def test_scores_table_sorts_and_refuses_stale_results(small_results, tmp_path):
    folder = tmp_path / "ref"
    for name, result in small_results.items():
        dataclasses.replace(result, model=name).save(folder / f"{name}.json")
    table = scores_table(SMALL, folder)
    assert [r[0] for r in table.rows][0] == "ideal" and table.rows[-1][0] == "random"
    assert "| ideal |" in format_table(table, "md")
    assert format_table(table, "csv").splitlines()[0].startswith("model,runs,")
    stale = dataclasses.replace(small_results["pca"], model="pca", protocol_hash="0" * 64)
    stale.save(folder / "pca.json", force=True)
    with pytest.raises(FactorbenchError, match="stale"):
        reference_results(SMALL, folder)


def test_seeds_are_aggregated_with_the_sample_std(small_results, tmp_path):
    ideal = small_results["ideal"]
    mig = ideal.metrics["mig"]
    lower = {**mig, "scalars": {"score": mig["scalars"]["score"] - 0.1},
             "result": {**mig["result"], "score": mig["scalars"]["score"] - 0.1}}
    other = dataclasses.replace(ideal, metrics={**ideal.metrics, "mig": lower})
    runs = [json.loads(r.to_json()) for r in (ideal, other)]
    (tmp_path / "ideal.json").write_text(json.dumps({"model": "ideal", "runs": runs}))
    table = scores_table(SMALL, tmp_path)
    mean, std = table.rows[0][2][table.columns.index("mig.score")]
    assert table.rows[0][1] == 2 and std == pytest.approx(0.1 / 2 ** 0.5)   # sample std (n - 1)
    assert "sample standard deviation (n - 1)" in format_table(table, "md")


def test_cli_evaluate_with_module_function(small_results, data_dir, tmp_path, monkeypatch, capsys):
    (tmp_path / "my_encoder_mod.py").write_text(
        "import numpy as np\n"
        "def encode(images):\n"
        "    x = images.reshape(len(images), -1).astype(float)\n"
        "    return x[:, :6]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_encoder_mod", None)
    out = tmp_path / "result.json"
    import factorbench.benchmark.protocols.base as base

    monkeypatch.setitem(base.PROTOCOLS, SMALL.name, SMALL)
    code = main(["evaluate", SMALL.name, "--encoder", "my_encoder_mod:encode", "--out", str(out), "--quiet",
                 "--only", "mig"])
    assert code == 0 and load_result(out).encoder.endswith("encode") and load_result(out).code_dim == 6
    assert main(["evaluate", SMALL.name, "--encoder", "my_encoder_mod:encode", "--out", str(out), "--quiet"]) == 2
    assert "--force" in capsys.readouterr().err


POSTERIOR = Protocol(
    "square-posterior-v1", 1, "test protocol for posteriors", DatasetRef("square", extra_splits=("single",)),
    (MetricCall("do_tran", "do_tran", {"eval": "all"}, max_samples=1000),
     MetricCall("wsepin", "wsepin", {"eval": "all"}, {"n_samples": 500}, max_samples=500),
     MetricCall("minimality", "minimality_sufficiency", {"eval": "correlated-single"})),
    Headline("do_tran", "jemmig", "lower"))


def test_posterior_encoders_feed_the_sampling_metrics(data_dir):
    def encoder(images):
        x = images.reshape(len(images), -1)[:, :4].astype(float) / 255.0
        return x, np.full_like(x, -4.0)

    with_posterior = evaluate(POSTERIOR, encoder, progress=False)
    assert with_posterior.posterior and "wsepin" in with_posterior.metrics and not with_posterior.skipped
    plain = evaluate(POSTERIOR, lambda images: encoder(images)[0], progress=False)
    assert not plain.posterior and "needs a Gaussian posterior" in plain.skipped["wsepin"]
    assert 0.0 <= plain.metrics["minimality"]["scalars"]["sufficiency"] <= 1.0


def test_cli_protocols_scores_and_plots(small_results, data_dir, tmp_path, monkeypatch, capsys):
    import factorbench.benchmark.protocols.base as base

    assert main(["protocols"]) == 0
    assert "square-lsbd-v1" in capsys.readouterr().out
    assert main(["protocols", "square-lsbd-v1"]) == 0
    out, err = capsys.readouterr()
    assert get_protocol("square-lsbd-v1").hash() in err and json.loads(out)["name"] == "square-lsbd-v1"  # stdout: JSON
    monkeypatch.setitem(base.PROTOCOLS, SMALL.name, SMALL)
    assert main(["protocols", SMALL.name, "--dataset-path"]) == 0
    assert capsys.readouterr().out.strip().endswith(".h5")
    result_file = tmp_path / "r.json"
    assert main(["evaluate", SMALL.name, "--encoder", "ideal", "--out", str(result_file), "--quiet",
                 "--plots", str(tmp_path / "plots")]) == 0
    pngs = sorted(p.name for p in (tmp_path / "plots").glob("*.png"))
    assert pngs == [f"{SMALL.name}.{label}.png" for label in ("d_lsbd", "dci", "mig")]
    # existing plots are kept, as the result file is, and refused before the evaluation runs
    again = ["evaluate", SMALL.name, "--encoder", "ideal", "--out", str(tmp_path / "again.json"), "--quiet",
             "--plots", str(tmp_path / "plots")]
    capsys.readouterr()
    assert main(again) == 2
    assert "--force" in capsys.readouterr().err and not (tmp_path / "again.json").exists()
    assert main([*again, "--force"]) == 0
    folder = tmp_path / "ref"
    folder.mkdir()
    result_file.rename(folder / "ideal.json")
    capsys.readouterr()
    assert main(["scores", SMALL.name, "--dir", str(folder), "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("ideal,1,yes,,oracle,no,") and not any(line.startswith("direction") for line in lines)
    assert main(["scores", SMALL.name, "--dir", str(folder), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["columns"][0]["better"] == "lower" and document["rows"][0]["kind"] == "oracle"
    assert main(["scores", "square-lsbd-v1"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert table[2].startswith("| ideal |") and table[-1].startswith("| random |")
    assert main(["scores", "square-dependent-v1", "--columns", "single.*"]) == 0
    columns = capsys.readouterr().out.splitlines()[0].strip("| ").split(" | ")[3:]
    headline = "independent.minimality_sufficiency.sufficiency ↑ (headline)"   # always shown, first
    assert columns[0] == headline and len(columns) > 1
    assert all(c.startswith("single.") for c in columns[1:])


def test_cli_codes_file_in_any_order_with_indices(small_results, data_dir, tmp_path, monkeypatch):
    import factorbench.benchmark.protocols.base as base
    from factorbench.benchmark import load
    from factorbench.benchmark.cache import prepare_dataset

    monkeypatch.setitem(base.PROTOCOLS, SMALL.name, SMALL)
    with load(prepare_dataset(SMALL.dataset, progress=False)) as ds:
        angles = ds.factors
    codes = np.concatenate([np.cos(angles), np.sin(angles)], axis=1)
    order = np.random.default_rng(0).permutation(len(codes))
    np.savez(tmp_path / "shuffled.npz", codes=codes[order], indices=order)
    np.save(tmp_path / "plain.npy", codes)
    np.savez(tmp_path / "bad.npz", codes=codes, indices=np.zeros(len(codes), dtype=int))
    scores = {}
    for name in ("shuffled.npz", "plain.npy"):
        out = tmp_path / f"{name}.json"
        assert main(["evaluate", SMALL.name, "--codes", str(tmp_path / name), "--out", str(out), "--quiet",
                     "--only", "d_lsbd"]) == 0
        scores[name] = load_result(out).metrics["d_lsbd"]["scalars"]["score"]
    assert scores["shuffled.npz"] == scores["plain.npy"] < 0.01
    assert main(["evaluate", SMALL.name, "--codes", str(tmp_path / "bad.npz"), "--out", str(tmp_path / "x.json"),
                 "--quiet"]) == 2


def test_outside_data_protocol_reads_a_local_copy_once(tmp_path):
    """modelnet40-lsbd-v1 on a tiny fake ModelNet40 folder: the first run needs --source, later runs
    find the cached copy; without either the error says where the data comes from."""
    from test_modelnet40 import _folder

    cache = tmp_path / "cache"
    with pytest.raises(FactorbenchError, match="--source"):
        evaluate("modelnet40-lsbd-v1", "ideal", data_dir=cache, progress=False)
    source = _folder(tmp_path / "data")
    first = evaluate("modelnet40-lsbd-v1", "ideal", source=source, data_dir=cache, progress=False,
                     only=("d_lsbd", "mig"))
    again = evaluate("modelnet40-lsbd-v1", "ideal", data_dir=cache, progress=False, only=("d_lsbd",))
    assert first.dataset["spec_hash"] == again.dataset["spec_hash"]
    assert again.metrics["d_lsbd"]["scalars"]["score"] < 0.01   # (object, cos, sin) per object
    assert len(list(cache.glob("modelnet40-*.h5"))) == 1
