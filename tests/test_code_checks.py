"""Input checks before the metrics: constant, repeated and tiny codes, encoders blind to the image or
saturated by uint8 input; their warnings reach the result, its file, its summary and the score table."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from factorbench.benchmark.code_checks import (BLIND_RATIO, MIN_DISTINCT, SMALL_STD, code_warnings,
                                               probe_warnings)

RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, size=(32, 16, 16, 3), dtype=np.uint8)
WEIGHTS = RNG.normal(size=(16 * 16 * 3, 4)) / 40


def _flat(images: np.ndarray) -> np.ndarray:
    return images.reshape(len(images), -1).astype(np.float64)


def test_healthy_codes_pass_and_each_fault_is_named():
    codes = RNG.normal(size=(500, 4))
    assert code_warnings(codes) == []
    assert "constant over the 500 images" in code_warnings(np.ones((500, 4)))[0]
    tiny = code_warnings(codes * SMALL_STD / 10)
    assert len(tiny) == 1 and "far below the scale" in tiny[0]
    repeated = np.repeat(codes[:int(MIN_DISTINCT * 500) - 1], 11, axis=0)[:500]
    assert "distinct codes for 500 images" in code_warnings(repeated)[0]
    # one constant dimension beside live ones is a (collapsed) model, not a broken input
    assert code_warnings(np.column_stack([codes, np.zeros(500)])) == []
    # the scale check is relative to nothing but the codes: a tenfold larger code is as healthy
    assert code_warnings(codes * 10) == []


def test_probes_find_pixel_statistics_and_saturation_but_not_a_linear_encoder():
    def linear(images):
        return _flat(images) / 255 @ WEIGHTS

    def pixel_statistics(images):  # blind to where the pixels are
        x = _flat(images) / 255
        return np.column_stack([x.mean(1), x.std(1), (x ** 3).mean(1)])

    def saturated(images):  # forgot to divide by 255
        return np.tanh(_flat(images) @ WEIGHTS * 40)

    assert probe_warnings(linear, IMAGES) == []
    blind = probe_warnings(pixel_statistics, IMAGES)
    assert len(blind) == 1 and blind[0].startswith("shuffling every image's pixels moves the codes by 0.0%")
    found = probe_warnings(saturated, IMAGES)
    assert len(found) == 1 and "the encoder saturates" in found[0]
    # the ratio is a fraction of the distance between two images' codes, below BLIND_RATIO
    assert float(found[0].split("by ")[1].split("%")[0]) / 100 < BLIND_RATIO
    assert probe_warnings(lambda images: np.zeros((len(images), 3)), IMAGES) == []  # left to code_warnings


def test_warnings_travel_with_the_result(tmp_path, generated, monkeypatch):
    from factorbench.benchmark.evaluation import evaluate
    from factorbench.benchmark.results import load_result, scores_table

    monkeypatch.setenv("FACTORBENCH_DATA", str(tmp_path / "data"))

    def pixel_mean(images):
        x = images.reshape(len(images), -1).astype(np.float64) / 255
        return np.column_stack([x.mean(1), x.std(1)])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = evaluate("square-lsbd-v1", pixel_mean, progress=False)
    assert any("every code dimension is constant" in str(w.message) for w in caught)
    assert len(result.warnings) == 1 and "ignores its input" in result.warnings[0]
    assert "WARNING (input): every code dimension is constant" in result.summary()
    path = result.save(tmp_path / "r.json")
    assert load_result(path).warnings == result.warnings
    table = scores_table("square-lsbd-v1", add=[str(path)])
    assert any("input check (1 of 1 run): every code dimension is constant" in note for note in table.notes)
    # a healthy encoder's result has no warnings key at all, as results written before the checks
    pca = evaluate("square-lsbd-v1", "pca", progress=False)
    assert pca.warnings == [] and "warnings" not in pca.to_dict()


@pytest.mark.parametrize("n", [0, 1, 3])
def test_too_few_rows_are_not_judged(n):
    assert code_warnings(np.zeros((n, 2))) == [] and probe_warnings(lambda x: _flat(x)[:, :2], IMAGES[:n]) == []
