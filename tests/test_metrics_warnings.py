"""Every metric says when the codes it scored hold constant dimensions (``result.warnings``, also in
``to_dict()``), and stays silent otherwise."""

import numpy as np
import pytest

from factorbench.benchmark import toy
from factorbench.benchmark.metrics import (d_lsbd, d_lsbd_objects, dci, do_tran, explicitness, full_code_accuracy,
                                           informativeness, irs,
                                           jemmig, mig, minimality_sufficiency, misjed, modularity, rmig, sap,
                                           single_code_accuracy, windin, wsepin, zero_shot_informativeness)
from factorbench.benchmark.metrics._base import constant_code_warnings

# a 6 x 5 grid of two factors, each sample twice: 60 samples
GRID = np.repeat(np.stack(np.meshgrid(np.arange(6.0), np.arange(5.0), indexing="ij"), -1).reshape(-1, 2), 2, axis=0)


def _with_constant(codes, column=1, value=3.0):
    """``codes`` with a constant dimension inserted at ``column``."""
    return np.insert(codes, column, value, axis=1)


def _grid_codes(codes):
    """Codes on the 6 x 5 grid (one sample per cell), for D_LSBD."""
    return codes[::2].reshape(6, 5, -1)


def _posterior(codes):
    return codes, np.full(codes.shape, -2.0)


METRICS = {
    "dci": lambda c: dci(c[:40], GRID[:40], c[40:], GRID[40:]),
    "zero_shot": lambda c: zero_shot_informativeness(c[:40], GRID[:40], c[40:], GRID[40:]),
    "mig": lambda c: mig(c, GRID),
    "sap": lambda c: sap(c, GRID),
    "modularity": lambda c: modularity(c, GRID),
    "explicitness": lambda c: explicitness(c, GRID),
    "irs": lambda c: irs(c, GRID),
    "minimality": lambda c: minimality_sufficiency(c, GRID),
    "downstream": lambda c: single_code_accuracy(c, GRID, n_train=30),
    "downstream_full": lambda c: full_code_accuracy(c, GRID, n_train=30),
    "d_lsbd": lambda c: d_lsbd(_grid_codes(c)),
    "d_lsbd_objects": lambda c: d_lsbd_objects(_grid_codes(c)),
    "informativeness": lambda c: informativeness(c),
    "misjed": lambda c: misjed(c),
    "rmig": lambda c: rmig(c, None, GRID),
    "jemmig": lambda c: jemmig(c, None, GRID),
    "do_tran": lambda c: do_tran(*_posterior(c), GRID),
    "wsepin": lambda c: wsepin(*_posterior(c), n_samples=200),
    "windin": lambda c: windin(*_posterior(c), n_samples=200),
}


@pytest.mark.parametrize("name", sorted(METRICS))
def test_constant_codes_are_named_and_other_codes_give_no_warning(name):
    codes = toy.identity(GRID) * 0.5 + np.random.default_rng(0).normal(0, 0.01, GRID.shape)
    assert METRICS[name](codes).warnings == ()
    result = METRICS[name](_with_constant(codes))
    (warning,) = result.warnings
    assert warning.startswith("1 of 3 ") and "dimensions are constant" in warning and "(dimension [1])" in warning
    assert result.to_dict()["warnings"] == [warning]


def test_constant_code_warning_text():
    codes = np.zeros((4, 30))
    codes[:, 0] = [0, 1, 2, 3]
    (warning,) = constant_code_warnings(codes)
    assert warning.startswith("29 of 30 code dimensions are constant on the 4 samples scored (dimensions [1, 2,")
    assert ", ...]" in warning  # long lists are cut
    # a posterior counts as constant only when its log-variance is constant too
    logvar = np.zeros((4, 30))
    logvar[:, 5] = [0, 1, 0, 1]
    assert "28 of 30" in constant_code_warnings(codes, logvar=logvar)[0]
    assert constant_code_warnings(codes[:, :1]) == ()
