"""A protocol's evaluation sub-grid: the rows it scores, the splits restricted to it, exact interventions."""

import numpy as np
import pytest

from factorbench.benchmark import evaluate
from factorbench.benchmark.dataset import load
from factorbench.benchmark.evaluation import evaluation_rows, evaluation_size
from factorbench.benchmark.metrics.intervention import beta_vae_score
from factorbench.benchmark.metrics.mig import mig
from factorbench.benchmark.metrics.samplers import GridSampler
from factorbench.benchmark.protocols import DatasetRef, Headline, MetricCall, Protocol
from factorbench.benchmark.subgrid import positions_in, subgrid_factors, subgrid_rows, subgrid_size
from factorbench.generators import FactorbenchError, get

STEP = (4, 2)  # square: every 4th vertical shift, every 2nd horizontal one -> 16 x 32 = 512 samples
SMALL_BETA = {"batch_size": 8, "n_train": 200, "n_eval": 100}


def _protocol(step=STEP, name="square-subgrid-v1") -> Protocol:
    calls = (MetricCall("mig", "mig", {"eval": "all"}), MetricCall("mig_test", "mig", {"eval": "test"}),
             MetricCall("beta_vae", "beta_vae_score", {}, SMALL_BETA))
    return Protocol(name, 1, "test protocol on a square sub-grid", DatasetRef("square", eval_grid=step), calls,
                    Headline("mig", "score"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("cache")
    mp.setenv("FACTORBENCH_DATA", str(path))
    yield path
    mp.undo()


def test_subgrid_rows_and_factors_follow_the_strides():
    gen = get("square")
    values, classes = gen.sample_factors(gen.spec(), 0, gen.full_size())
    rows = subgrid_rows(classes, STEP)
    assert len(rows) == subgrid_size(gen.factors(), STEP) == 16 * 32
    assert np.all(classes[rows, 0] % 4 == 0) and np.all(classes[rows, 1] % 2 == 0)
    factors = subgrid_factors(gen.factors(), STEP)
    assert factors[0].values == gen.factors()[0].values[::4] and len(factors[1].values) == 32
    # the sub-grid keeps the file's C order: its rows enumerate the sub-grid's own grid
    sub_classes = classes[rows] // np.asarray(STEP)
    assert np.array_equal(np.ravel_multi_index(tuple(sub_classes.T), (16, 32)), np.arange(len(rows)))


def test_positions_in_keeps_order_and_repeats_and_drops_rows_outside():
    rows = np.array([0, 4, 8, 12])
    assert positions_in(rows, np.array([8, 1, 8, 0, 13, 12])).tolist() == [2, 2, 0, 3]
    assert positions_in(rows, np.array([], dtype=np.int64)).tolist() == []


@pytest.mark.parametrize("step, message", [((2,), "1 strides given but the dataset has 2 factors"),
                                           ((64, 1), "leaves 1 value of factor 'vertical_shift'")])
def test_a_sub_grid_that_does_not_fit_is_refused_when_the_protocol_is_made(step, message):
    with pytest.raises(FactorbenchError, match=message):
        _protocol(step)
    with pytest.raises(FactorbenchError, match="positive integer strides"):
        DatasetRef("square", eval_grid=(0, 1))


def test_only_protocols_with_a_sub_grid_carry_it_in_their_json():
    assert "eval_grid" not in DatasetRef("square").to_dict()
    assert DatasetRef("square", eval_grid=STEP).to_dict()["eval_grid"] == [4, 2]
    assert _protocol().hash() != _protocol((2, 2)).hash()


def test_evaluation_on_a_sub_grid_equals_the_metrics_on_its_rows(cache):
    protocol = _protocol()
    result = evaluate(protocol, "ideal", progress=False)
    assert result.dataset["rows_scored"] == 512
    with load(next(cache.glob("square-*.h5"))) as ds:
        rows = evaluation_rows(protocol, ds)
        codes = np.concatenate([np.cos(ds.factors[rows]), np.sin(ds.factors[rows])], axis=1)[:, [0, 2, 1, 3]]
        classes = ds.factor_classes[rows] // np.asarray(STEP)
        expected = mig(codes, ds.factors[rows], classes=classes)
        test_rows = np.intersect1d(ds.split_indices("test"), rows)
        inside = np.searchsorted(rows, test_rows)
        expected_test = mig(codes[inside], ds.factors[test_rows], classes=classes[inside])
        sampler = GridSampler(subgrid_factors(ds.spec.factors, STEP), codes.reshape(16, 32, 4))
    assert result.metrics["mig"]["scalars"]["score"] == pytest.approx(expected.score, abs=1e-12)
    assert result.metrics["mig_test"]["scalars"]["score"] == pytest.approx(expected_test.score, abs=1e-12)
    assert len(test_rows) < 512 / 5  # the test split is restricted to the sub-grid, not read whole
    beta = beta_vae_score(sampler, None, seed=0, **SMALL_BETA)
    assert result.metrics["beta_vae"]["scalars"]["score"] == beta.score


def test_codes_of_the_whole_file_or_of_the_sub_grid_give_the_same_scores(cache, tmp_path):
    protocol = _protocol()
    n = get("square").full_size()
    assert evaluation_size(protocol) == 512
    full = np.random.default_rng(1).standard_normal((n, 3))
    with load(next(cache.glob("square-*.h5"))) as ds:
        rows = evaluation_rows(protocol, ds)
    a = evaluate(protocol, codes=full, progress=False)
    b = evaluate(protocol, codes=full[rows], progress=False)
    assert a.metrics == b.metrics
    with pytest.raises(FactorbenchError, match="evaluation sub-grid \\(512 rows"):
        evaluate(protocol, codes=full[:100], progress=False)
