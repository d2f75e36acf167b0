"""Split specs: round trips, determinism, predicates, correlated sets, presets, and adding splits to files."""

import hashlib
import json
import math

import h5py
import numpy as np
import pytest

from factorbench.benchmark import load, verify
from factorbench.benchmark.cli import main
from factorbench.benchmark.dependence import factor_dependence
from factorbench.generators import (CompositionSplit, CorrelatedPair, CorrelatedSplit, ExtrapolationSplit, Factor,
                                    FactorbenchError, FactorTable, GapSplit, InterpolationSplit, OrderedSplit,
                                    RandomSplit, RecombinationSplit, add_split, applicable_presets, resolve_split,
                                    sample_correlated_factors, split_from_dict)
from factorbench.generators.presets import correlation_pairs, teapot_gap
from factorbench.generators.splits import Inequality


def uniform_table(n=200_000, seed=0):
    """An i.i.d. table with the teapot's factors."""
    rng = np.random.default_rng(seed)
    factors = (Factor("azimuth", "cyclic", low=0.0, high=2 * math.pi, period=2 * math.pi),
               Factor("elevation", "continuous", low=0.0, high=math.pi / 2),
               Factor("red", "continuous", low=0.0, high=1.0), Factor("green", "continuous", low=0.0, high=1.0),
               Factor("blue", "continuous", low=0.0, high=1.0))
    u = rng.random((n, 5))
    return FactorTable(u * np.array([2 * math.pi, math.pi / 2, 1, 1, 1]), None, factors)


def grid_table(k=4, steps=10):
    factors = tuple(Factor(f"f{i}", "categorical", values=tuple(range(steps))) for i in range(k))
    classes = np.stack(np.unravel_index(np.arange(steps**k), (steps,) * k), axis=1)
    return FactorTable(classes.astype(float), classes, factors)


SPECS = [
    RandomSplit(seed=3),
    OrderedSplit(names=("a", "b"), fractions=(0.25, 0.75)),
    teapot_gap(),
    teapot_gap(0.7, "pi/2.5"),
    CompositionSplit(factors=("red", "green"), threshold=0.6),
    InterpolationSplit(factor="elevation", low=0.3, high=0.5, base=OrderedSplit()),
    ExtrapolationSplit(factor="blue", threshold=0.8, above=False),
    RecombinationSplit(ranges=(("red", 0.0, 0.2), ("azimuth", 0.5, 1.0))),
    CorrelatedSplit(pairs=(("red", "green", 0.1), ("blue", "elevation", 0.2, True)), size=5000, seed=2,
                    within=teapot_gap(), within_part="train"),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.kind)
def test_specs_round_trip_through_json_with_the_same_hash(spec):
    again = split_from_dict(json.loads(spec.to_json()))
    assert again == spec and again.hash() == spec.hash() and again.to_json() == spec.to_json()


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.kind)
def test_same_spec_gives_the_same_indices_and_disjoint_parts(spec):
    table = uniform_table(20_000)
    first, second = spec.assign(table), spec.assign(table)
    assert set(first) == set(spec.names)
    assert all(np.array_equal(first[k], second[k]) for k in first)
    assert all(p.dtype == np.int64 and np.all(np.diff(p) >= 0) for p in first.values())
    if not isinstance(spec, CorrelatedSplit):  # partitions and hold-outs: every sample exactly once
        joined = np.concatenate(list(first.values()))
        assert np.array_equal(np.sort(joined), np.arange(len(table)))


def _digest(parts):
    return hashlib.sha256(b"".join(parts[k].astype("<i8").tobytes() for k in sorted(parts))).hexdigest()[:16]


def test_indices_are_the_same_on_every_machine():
    # Golden digests: PCG64 streams and the specs' arithmetic are platform independent.
    table = uniform_table(5000, seed=1)
    assert _digest(RandomSplit(seed=0).assign(table)) == GOLDEN["random"]
    assert _digest(teapot_gap().assign(table)) == GOLDEN["gap"]
    assert _digest(SPECS[-1].assign(table)) == GOLDEN["correlated"]


GOLDEN = {"random": "5671dac5cc58fe42", "gap": "367c722868dbc90a", "correlated": "c66650617acdefb5"}


def test_gap_holds_out_exactly_the_predicate_and_matches_the_analytic_fraction():
    table = uniform_table()
    parts = teapot_gap(partition=OrderedSplit()).assign(table)
    v = table.values
    predicate = (v[:, 2] > v[:, 3] + 0.15) & (v[:, 2] > v[:, 4] + 0.15) & (v[:, 1] > math.pi / 4)
    assert np.array_equal(parts["zeroshot"], np.flatnonzero(predicate))
    for name in ("train", "validation", "test"):
        assert not predicate[parts[name]].any()
    # the analytic fraction 0.5 * 0.85^3 / 3 = 0.10235; 200,000 samples: standard error 0.0007
    assert abs(len(parts["zeroshot"]) / len(table) - 0.5 * 0.85**3 / 3) < 0.003
    # the ordered base: train is the first 80 % in generation order, minus the gap
    assert np.array_equal(parts["train"], np.flatnonzero(~predicate[:160_000]))
    assert np.array_equal(parts["test"], 180_000 + np.flatnonzero(~predicate[180_000:]))


def test_inequalities_parse_to_a_canonical_form():
    a = Inequality.parse("red - green > 0.15")
    assert a == Inequality.parse("red > green + 0.15") == Inequality.parse("0.15 < red - green")
    assert Inequality.parse("2*elevation >= pi/2") == Inequality((("elevation", 2.0),), ">=", math.pi / 2)
    assert Inequality.coerce(a.to_json()) == a
    for bad in ("red green > 1", "red * green > 1", "red > 1 > 0", "import os", "3 > 1", "red == 1"):
        with pytest.raises(FactorbenchError, match="inequality"):
            Inequality.parse(bad)


def test_holdout_regions_follow_their_definitions():
    table = uniform_table(50_000)
    red, green = table.scaled("red"), table.scaled("green")
    comp = CompositionSplit(factors=("red", "green"), threshold=0.6).assign(table)
    assert np.array_equal(comp["composition"], np.flatnonzero((red > 0.6) & (green > 0.6)))
    train = comp["train"]
    assert (red[train] > 0.6).any() and (green[train] > 0.6).any()  # each high value is still seen alone
    elev = table.scaled("elevation")
    inter = InterpolationSplit(factor="elevation", low=0.3, high=0.5).assign(table)
    assert np.all((elev[inter["interpolation"]] >= 0.3) & (elev[inter["interpolation"]] <= 0.5))
    assert elev[inter["train"]].min() < 0.3 and elev[inter["train"]].max() > 0.5
    extra = ExtrapolationSplit(factor="blue", threshold=0.8).assign(table)
    assert table.scaled("blue")[extra["extrapolation"]].min() > 0.8 and table.scaled("blue")[extra["train"]].max() <= 0.8
    rec = RecombinationSplit(ranges=(("red", 0.0, 0.2), ("azimuth", 0.5, 1.0))).assign(table)
    az = table.scaled("azimuth")
    assert np.array_equal(rec["recombination"], np.flatnonzero((red <= 0.2) & (az >= 0.5)))


def _pearson(table, idx, a, b):
    return float(np.corrcoef(table.column(a)[idx], table.column(b)[idx])[0, 1])


def test_correlation_grows_as_sigma_falls_and_other_pairs_stay_independent():
    table = grid_table()  # 4 factors x 10 values, 10,000 samples
    measured = {}
    for sigma in (0.4, 0.1, 0.04):
        idx = CorrelatedSplit(pairs=(("f0", "f1", sigma),), size=20_000, seed=1).assign(table)["correlated"]
        measured[sigma] = _pearson(table, idx, "f0", "f1")
        for a, b in (("f0", "f2"), ("f1", "f3"), ("f2", "f3")):
            assert abs(_pearson(table, idx, a, b)) < 0.03
    # measured: r = 0.456 (sigma 0.4), 0.951 (0.1), 0.998 (0.04); other pairs |r| <= 0.01
    assert 0.4 < measured[0.4] < measured[0.1] < measured[0.04] <= 1.0
    anti = CorrelatedSplit(pairs=(("f0", "f1", 0.1, True),), size=20_000).assign(table)["correlated"]
    assert _pearson(table, anti, "f0", "f1") < -0.85


def test_confounded_preset_couples_the_first_factor_with_all_others():
    table = grid_table()
    spec = resolve_split("confounded", table.factors, RandomSplit())
    idx = spec.assign(table)["correlated-confounded"]
    dep = factor_dependence(table.values[idx], table.factors)
    assert np.all(dep.pearson[0, 1:] > 0.7) and np.all(dep.nmi[0, 1:] > 0.15)  # measured 0.76, AMI 0.19
    assert np.all(np.abs(dep.pearson[1:, 1:][~np.eye(3, dtype=bool)]) > 0.3)  # coupled through f0
    train = set(RandomSplit().assign(table)["train"])
    assert set(idx) <= train  # drawn from the training part only


def test_presets_choose_disjoint_pairs_first():
    table = grid_table(k=5)
    assert correlation_pairs(table.factors, 3) == [("f0", "f1"), ("f2", "f3"), ("f0", "f2")]
    assert set(applicable_presets(grid_table(k=2).factors)) == {"single", "confounded"}
    assert {"single", "double-0.4", "double-0.1", "double-0.04", "triple", "confounded", "teapot-gap",
            "teapot-large-gap"} <= set(applicable_presets(uniform_table(10).factors))
    with pytest.raises(FactorbenchError, match="does not apply to this dataset: it needs 2 factor pairs"):
        resolve_split("double-0.1", grid_table(k=2).factors, RandomSplit())
    with pytest.raises(FactorbenchError, match="needs the factors elevation, red, green, blue"):
        resolve_split("teapot-gap", grid_table(k=2).factors, RandomSplit())
    with pytest.raises(FactorbenchError, match="unknown split preset 'nope'; presets for this dataset: single"):
        resolve_split("nope", grid_table(k=2).factors, RandomSplit())


def test_sampling_from_the_correlated_joint():
    table = uniform_table(10)
    values = sample_correlated_factors(table.factors, [("red", "green", 0.1)], 20_000, seed=4)
    again = sample_correlated_factors(table.factors, [("red", "green", 0.1)], 20_000, seed=4)
    assert values.shape == (20_000, 5) and np.array_equal(values, again)
    assert len(np.unique(values, axis=0)) == 20_000  # rendered afresh: no sample repeats
    assert np.corrcoef(values[:, 2], values[:, 3])[0, 1] > 0.85
    assert abs(np.corrcoef(values[:, 2], values[:, 4])[0, 1]) < 0.03


@pytest.mark.parametrize("make, message", [
    (lambda: RandomSplit(fractions=(0.5, 0.2, 0.2)), "sum to 1"),
    (lambda: CorrelatedPair("red", "red", 0.1), "two different factors"),
    (lambda: CorrelatedPair("red", "green", 0.0), "sigma must be > 0"),
    (lambda: CorrelatedPair("red", "green", -1), "sigma must be > 0"),
    (lambda: CorrelatedSplit(pairs=()), "at least one pair"),
    (lambda: CorrelatedSplit(pairs=(("a", "b", 0.1), ("b", "a", 0.2))), "listed twice"),
    (lambda: CompositionSplit(factors=("red",)), "two or more"),
    (lambda: InterpolationSplit(factor="red", low=0.0, high=0.5), r"in \(0, 1\)"),
    (lambda: InterpolationSplit(factor="red", low=0.6, high=0.5), "low <= high"),
    (lambda: RecombinationSplit(ranges=(("red", 0.5, 0.2),)), "empty range"),
    (lambda: GapSplit(where=()), "at least one inequality"),
    (lambda: GapSplit(where=("red > 0.5",), holdout="train"), "also a part of the base"),
    (lambda: split_from_dict({"kind": "magic"}), "unknown split kind"),
    (lambda: split_from_dict({"kind": "random", "seeds": 1}), "has no fields"),
])
def test_bad_specs_are_rejected_with_clear_errors(make, message):
    with pytest.raises(FactorbenchError, match=message):
        make()


@pytest.mark.parametrize("spec, message", [
    (GapSplit(where=("purple > 0.5",)), "unknown factor 'purple'; this dataset's factors are: azimuth"),
    (GapSplit(where=("red > 2",)), "no sample lies in the hold-out region"),
    (ExtrapolationSplit(factor="red", threshold=0.9, above=False, base=RandomSplit()), None),
    (CorrelatedSplit(pairs=(("red", "mauve", 0.1),)), "unknown factor 'mauve'"),
])
def test_specs_that_do_not_fit_the_data(spec, message):
    table = uniform_table(1000)
    if message is None:
        assert len(spec.assign(table)["extrapolation"]) > 800
    else:
        with pytest.raises(FactorbenchError, match=message):
            spec.assign(table)


def test_add_split_to_a_file_without_rewriting_images(tmp_path, generated):
    path = tmp_path / "arrow.h5"
    path.write_bytes(generated("arrow").read_bytes())
    with h5py.File(path, "r") as f:
        chunk0 = f["images"].id.get_chunk_info(0).byte_offset
    sizes = add_split(path, resolve_split("single", load(path).spec.factors, RandomSplit()))
    assert sizes == {"correlated-single": 3277}
    assert verify(path).ok
    with h5py.File(path, "r") as f:
        assert f["images"].id.get_chunk_info(0).byte_offset == chunk0
        assert json.loads(f["splits/correlated-single"].attrs["split_spec"])["kind"] == "correlated"
    with load(path) as ds:
        idx = ds.split_indices("correlated-single")
        assert set(idx) <= set(ds.split_indices("train"))
        assert factor_dependence(ds.factors[idx], ds.spec.factors).pearson[0, 1] > 0.8
    with pytest.raises(FactorbenchError, match="already has split"):
        add_split(path, RandomSplit(names=("correlated-single",), fractions=(1.0,)))
    add_split(path, RandomSplit(names=("correlated-single",), fractions=(1.0,)), force=True)
    assert len(load(path).split_indices("correlated-single")) == 4096 and verify(path).ok


def test_an_interrupted_add_split_leaves_the_file_as_it_was(tmp_path, generated, monkeypatch):
    path = tmp_path / "arrow.h5"
    path.write_bytes(generated("arrow").read_bytes())
    from factorbench.generators import fileformat

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(fileformat, "sha256_array", interrupted)
    with pytest.raises(KeyboardInterrupt):
        add_split(path, RandomSplit(names=("x", "y"), fractions=(0.5, 0.5)))
    monkeypatch.undo()
    assert load(path).split_names == ("test", "train", "validation") and verify(path).ok


def test_split_and_info_from_the_cli(tmp_path, generated, capsys):
    path = tmp_path / "arrow.h5"
    path.write_bytes(generated("arrow").read_bytes())
    assert main(["split", str(path), "--spec", "confounded"]) == 0
    spec = '{"kind": "random", "names": ["half-a", "half-b"], "fractions": [0.5, 0.5], "seed": 1}'
    assert main(["split", str(path), "--spec", spec]) == 0
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "correlated-confounded" in out and "half-a" in out and "hue ~ rotation: r = " in out
    assert main(["split", str(path), "--spec", "triple"]) == 2
    assert "does not apply" in capsys.readouterr().err
    assert main(["split", str(path), "--spec", "{not json"]) == 2
    assert "not valid JSON" in capsys.readouterr().err
