"""Almudévar & Ortega's claims about their Figures 4 and 5, judged on a meta-evaluation: each test on tables
built to satisfy or to break it, the stability over resamples, and the cases that cannot be judged."""

import numpy as np
import pytest

from factorbench.benchmark.experiments.meta_evaluation_claims import (ACCURACY, CLAIMS, IRS, MINIMALITY,
                                                                      NOT_REPRODUCED, NOT_SCORED, REPRODUCED,
                                                                      SUFFICIENCY, TOO_FEW, check_meta_claims,
                                                                      format_meta_claims)
from factorbench.benchmark.experiments.metric_meta_evaluation import MetaEvaluation, meta_evaluate

SETTINGS = ("independent", "single", "triple")
METRICS = (MINIMALITY, SUFFICIENCY, "a.score", "b.score", "c.score")
# rho[setting, metric] against the accuracy, and against IRS, as the paper describes them
HOLDS = {ACCURACY: [[0.5, 0.9, 0.8, 0.7, 0.6], [0.2, 0.88, 0.4, 0.3, 0.5], [0.1, 0.85, 0.3, 0.2, 0.1]],
         IRS: [[0.8, 0.1, 0.2, 0.3, 0.35], [0.75, 0.5, -0.1, 0.0, 0.7], [0.9, -0.2, 0.3, 0.6, 0.1]]}
# and as every claim fails: sufficiency weaker than a and unstable, the others flat; minimality weak
FAILS = {ACCURACY: [[0.35, 0.5, 0.9, 0.2, 0.3], [0.35, 0.1, 0.9, 0.2, 0.3], [0.35, 0.5, 0.9, 0.2, 0.3]],
         IRS: [[0.2, 0.8, 0.9, 0.5, 0.6], [0.1, 0.8, 0.9, 0.5, 0.6], [0.3, 0.8, 0.85, 0.5, 0.6]]}


def _rho(table: dict, targets=(ACCURACY, IRS)) -> np.ndarray:
    return np.stack([np.array(table[t], dtype=float) for t in targets], axis=-1)


def _meta(rho: np.ndarray, samples: np.ndarray, encoders: int = 12, targets=(ACCURACY, IRS)) -> MetaEvaluation:
    return MetaEvaluation(SETTINGS, METRICS, tuple(targets), tuple(f"e{i}/seed0" for i in range(encoders)), rho,
                          rho - 0.1, rho + 0.1, 0.95, len(samples), 0, np.full(rho.shape, encoders), samples)


def _by_key(claims):
    return {c.key: c for c in claims}


def test_every_claim_holds_on_the_papers_picture_with_its_numbers():
    rho = _rho(HOLDS)
    claims = _by_key(check_meta_claims(_meta(rho, np.stack([rho] * 5))))
    assert list(claims) == [c.key for c in CLAIMS]
    assert {c.verdict for c in claims.values()} == {REPRODUCED}
    assert all(c.stability == 1.0 and c.resamples == 5 for c in claims.values())
    assert claims["sufficiency-strongest"].numbers == pytest.approx({"own": 0.9, "best other": 0.8})
    assert claims["sufficiency-stable"].numbers["move"] == pytest.approx(-0.05)
    assert claims["others-decline"].numbers["count"] == 4  # falls 0.4, 0.5, 0.5, 0.5
    assert claims["sufficiency-most-reliable"].numbers == pytest.approx({"own": 0.85, "best other": 0.3})
    assert claims["others-vary"].numbers["sign"] == 2  # sufficiency's and a's correlations change sign
    assert claims["minimality-strong"].numbers == pytest.approx({"independent": 0.8, "lowest": 0.75})
    assert "a.score, 0.80" in claims["sufficiency-strongest"].evidence


def test_every_claim_fails_where_the_picture_is_the_opposite():
    rho = _rho(FAILS)
    claims = _by_key(check_meta_claims(_meta(rho, np.stack([rho] * 3))))
    assert {c.verdict for c in claims.values()} == {NOT_REPRODUCED}
    assert claims["sufficiency-stable"].numbers["move"] == pytest.approx(-0.4)
    assert claims["others-moderate"].numbers["count"] == 1  # only a.score reaches 0.4
    assert claims["minimality-strongest"].numbers["count"] == 0


def test_the_stability_is_the_share_of_resamples_that_agree_and_skips_incomplete_ones():
    holds, fails = _rho(HOLDS), _rho(FAILS)
    incomplete = holds.copy()
    incomplete[1, 2, 0] = np.nan  # a resample in which one cell had too few encoders
    claims = check_meta_claims(_meta(holds, np.stack([holds, fails, holds, fails, incomplete])))
    assert all(c.verdict == REPRODUCED and c.resamples in (4, 5) and c.stability in (0.5, 0.6) for c in claims)
    # the NaN cell is read only by the accuracy claims that compare every metric in the single setting
    by_key = _by_key(claims)
    assert by_key["sufficiency-strongest"].resamples == 4 and by_key["sufficiency-strongest"].stability == 0.5
    assert by_key["minimality-strong"].resamples == 5 and by_key["minimality-strong"].stability == 0.6


def test_too_few_encoders_and_a_missing_target_are_not_judged():
    rho = _rho(HOLDS)
    few = check_meta_claims(_meta(rho, np.stack([rho] * 2), encoders=9))
    assert {c.verdict for c in few} == {TOO_FEW} and all(c.stability is None for c in few)
    assert format_meta_claims(few, 9) == ("9 encoders are too few to judge Almudévar & Ortega's claims about their "
                                          "Figures 4 and 5 (it takes 10).")
    accuracy_only = rho[:, :, :1]
    claims = _by_key(check_meta_claims(_meta(accuracy_only, accuracy_only[None], targets=(ACCURACY,))))
    assert all(claims[c.key].verdict == (NOT_SCORED if c.target == IRS else REPRODUCED) for c in CLAIMS)
    table = format_meta_claims(list(claims.values()), 12)
    assert table.count("\n| 5 |") == 4 and "| n/a | not scored |" in table


def test_the_samples_are_the_resamples_of_the_intervals_and_an_exact_metric_holds_in_every_one():
    """``meta_evaluate`` keeps each resample's correlations; the intervals are their percentiles, and a
    sufficiency equal to the accuracy is the strongest in every resample."""
    rng = np.random.default_rng(3)
    population = {}
    for i in range(12):
        accuracy, irs = rng.random(), rng.random()
        row = {}
        for setting in SETTINGS:
            row.update({f"{setting}.{ACCURACY}": accuracy, f"{setting}.{IRS}": irs, f"{setting}.{SUFFICIENCY}": accuracy,
                        f"{setting}.{MINIMALITY}": irs, f"{setting}.a.score": rng.random()})
        population[f"e{i}/seed0"] = row
    result = meta_evaluate(population, targets=(ACCURACY, IRS), n_boot=200, seed=1)
    assert result.samples.shape == (200, 3, 3, 2)
    s, m, t = 1, result.metrics.index("a.score"), 0
    finite = result.samples[:, s, m, t][np.isfinite(result.samples[:, s, m, t])]
    assert np.quantile(finite, [0.025, 0.975]) == pytest.approx([result.low[s, m, t], result.high[s, m, t]])
    claims = _by_key(check_meta_claims(result))
    assert claims["sufficiency-strongest"].verdict == REPRODUCED and claims["sufficiency-strongest"].stability == 1.0
    assert claims["minimality-strong"].numbers["lowest"] == pytest.approx(1.0)
    assert claims["minimality-strong"].stability == 1.0
