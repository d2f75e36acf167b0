import json
import math

import numpy as np
import pytest

from factorbench.generators import DatasetSpec, Factor, FactorbenchError, get, list_datasets
from factorbench.generators.params import parse_param_assignments


def test_registry_lists_every_dataset_with_a_description():
    names = list_datasets()
    assert {"square", "arrow"} <= set(names)
    assert all(desc and "\n" not in desc for desc in names.values())


def test_unknown_dataset_names_the_available_ones():
    with pytest.raises(FactorbenchError, match="unknown dataset 'nope'.*square"):
        get("nope")


def test_a_parameter_given_as_a_keyword_says_where_it_goes():
    with pytest.raises(FactorbenchError, match=r"'side' is a parameter of square, not a run-time option: give it in "
                                               r"params, get\('square', \{'side': ...\}\)"):
        get("square", side=8)
    assert get("square", {"side": 8}).params.side == 8
    with pytest.raises(FactorbenchError, match="square takes no --colour$"):
        get("square", colour=1)


@pytest.mark.parametrize("name", sorted(n for n in list_datasets() if "source" not in get(n).options))
def test_spec_round_trips_through_json_with_the_same_hash(name):
    spec = get(name).spec(seed=3)
    again = DatasetSpec.from_json(spec.to_json())
    assert again == spec
    assert again.hash() == spec.hash()
    assert json.loads(spec.to_json())["seed"] == 3


def test_spec_hash_changes_with_seed_params_and_version():
    base = get("square").spec()
    assert get("square").spec(seed=1).hash() != base.hash()
    assert get("square", {"side": 8}).spec().hash() != base.hash()
    bumped = DatasetSpec(base.generator, "9.9.9", base.params, base.seed, base.n, base.image_shape, base.factors,
                         base.splits)
    assert bumped.hash() != base.hash()


def test_cyclic_grid_factor_values_and_classes():
    f = Factor.cyclic_grid("t", 64)
    assert f.values[1] == pytest.approx(2 * math.pi / 64) and f.period == pytest.approx(2 * math.pi)
    # classes use the cyclic distance: a value just below 2 pi is class 0
    assert list(f.classes_of(np.array([0.0, 2 * math.pi - 1e-9, f.values[5] + 1e-6]))) == [0, 0, 5]
    assert Factor.from_dict(f.to_dict()) == f


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "angle", "low": 0.0, "high": 1.0}, "kind must be one of"),
    ({"kind": "continuous", "low": 1.0, "high": 1.0}, "interval low < high"),
    ({"kind": "cyclic", "low": 0.0, "high": 1.0}, "positive period"),
    ({"kind": "categorical", "values": (1.0, 0.0)}, "strictly increasing"),
])
def test_invalid_factors_are_rejected(kwargs, message):
    with pytest.raises(FactorbenchError, match=message):
        Factor("f", **kwargs)


def test_params_are_parsed_by_type_with_clear_errors():
    assert get("square", {"side": "8"}).params.side == 8
    with pytest.raises(FactorbenchError, match="unknown parameter 'sides'; valid parameters are: side"):
        get("square", {"sides": "8"})
    with pytest.raises(FactorbenchError, match="'side' expects int, got 'big'"):
        get("square", {"side": "big"})
    with pytest.raises(FactorbenchError, match="side must be between 1 and 63"):
        get("square", {"side": 64})
    with pytest.raises(FactorbenchError, match="expects int"):
        get("square", {"side": 2.5})


def test_param_assignments():
    assert parse_param_assignments(["side=8", "x = 1"]) == {"side": "8", "x": " 1"}
    with pytest.raises(FactorbenchError, match="key=value"):
        parse_param_assignments(["side"])
    with pytest.raises(FactorbenchError, match="given twice"):
        parse_param_assignments(["side=1", "side=2"])


def test_grid_dataset_rejects_another_size():
    with pytest.raises(FactorbenchError, match="full grid of 4096"):
        get("square").spec(n=100)


def test_iid_sampling_is_reproducible_for_any_range(toy):
    spec = toy.spec(seed=7, n=10000)
    full, classes = toy.sample_factors(spec, 0, 10000)
    assert classes is None and full.shape == (10000, 2)
    for a, b in [(0, 1), (4095, 4097), (5000, 9999), (8192, 10000)]:
        part, _ = toy.sample_factors(spec, a, b)
        assert np.array_equal(part, full[a:b])
    assert full[:, 0].min() >= 0 and full[:, 0].max() < 1 and full[:, 1].max() < 2 * np.pi
    assert abs(full[:, 0].mean() - 0.5) < 0.01  # uniform
    other, _ = toy.sample_factors(toy.spec(seed=8, n=10000), 0, 10000)
    assert not np.array_equal(other, full)


def test_generator_for_spec_rebuilds_the_generator_and_refuses_other_versions():
    from factorbench.generators import generator_for_spec

    spec = get("square", {"side": 6}).spec(seed=1)
    gen = generator_for_spec(spec)
    assert gen.params.side == 6 and gen.spec(seed=1) == spec
    old = DatasetSpec.from_dict({**spec.to_dict(), "version": "0.9.0"})
    with pytest.raises(FactorbenchError, match="made by version 0.9.0.*regenerate"):
        generator_for_spec(old)


def test_builtin_datasets_register_on_first_use_and_the_cli_imports_none():
    """Each built-in module registers exactly the name BUILTIN gives it; importing the CLI pulls in no dataset
    module and none of trimesh, scipy, scikit-learn, torch, matplotlib (a command pays for what it uses)."""
    import subprocess
    import sys

    from factorbench.generators import base, list_datasets

    assert set(list_datasets()) >= set(base.BUILTIN)
    for name, module in base.BUILTIN.items():
        assert base._REGISTRY[name].__module__ == f"factorbench.generators.{module}"
    code = ("import sys, factorbench.benchmark.cli; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('trimesh', 'scipy', 'sklearn', 'torch', 'matplotlib', 'moderngl') or m.startswith("
            "'factorbench.generators.') and m.rsplit('.', 1)[-1] in " + repr(sorted(base.BUILTIN.values())) + "))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
