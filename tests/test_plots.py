"""Plots of the metric results: every plot says what it shows (titles, axis labels, colour bars), matrices
share one layout (factors along x, codes along y), and existing files are kept unless forced."""

import numpy as np
import pytest

from factorbench.benchmark import toy
from factorbench.benchmark.metrics import (d_lsbd, d_lsbd_objects, dci, dci_of_samples, irs, mig,
                                           minimality_sufficiency, modularity)
from factorbench.benchmark.plots import PLOTTERS, plot_result
from factorbench.benchmark.results import EvaluationResult
from factorbench.generators.errors import FactorbenchError

NAMES = ["shape", "size"]
GRID = np.repeat(np.stack(np.meshgrid(np.arange(6.0), np.arange(5.0), indexing="ij"), -1).reshape(-1, 2), 4, axis=0)
CODES = np.concatenate([toy.identity(GRID), np.random.default_rng(0).normal(size=(len(GRID), 1))], axis=1)
ANGLES = 2 * np.pi * np.arange(8) / 8


def _torus_codes():
    a, b = np.meshgrid(ANGLES, ANGLES, indexing="ij")
    return np.stack([np.cos(a), np.sin(a), np.cos(b), np.sin(b)], axis=-1)


def _objects_codes(n_objects=64):
    rng = np.random.default_rng(1)
    ring = np.stack([np.cos(ANGLES), np.sin(ANGLES)], axis=-1)
    return ring[None] * rng.uniform(0.5, 2.0, (n_objects, 1, 1)) + rng.normal(0, 0.3, (n_objects, 8, 2))


@pytest.fixture(scope="module")
def results():
    half = len(GRID) // 2
    return {
        "dci": dci(CODES[:half], GRID[:half], CODES[half:], GRID[half:]).to_dict(),
        "dci_of_samples": dci_of_samples(CODES, GRID).to_dict(),  # the same result, on a cut of one set
        "mig": mig(CODES, GRID).to_dict(),
        "modularity": modularity(CODES, GRID).to_dict(),
        "irs": irs(CODES, GRID).to_dict(),
        "minimality_sufficiency": minimality_sufficiency(CODES, GRID).to_dict(),
        "d_lsbd": d_lsbd(_torus_codes()).to_dict(),
        "d_lsbd_objects": d_lsbd_objects(_objects_codes()).to_dict(),
    }


def _parts(fig):
    """(main axes, colour-mapped artists) of a figure: colour-bar axes are not main axes."""
    main = [ax for ax in fig.axes if getattr(ax, "_colorbar", None) is None]
    mapped = [a for ax in main for a in [*ax.images, *ax.collections] if a.get_array() is not None]
    return main, mapped


@pytest.fixture(scope="module")
def figures(results):
    import matplotlib.pyplot as plt

    figs = {name: PLOTTERS[name](result, f"label-{name}", NAMES) for name, result in results.items()}
    yield figs
    for fig in figs.values():
        plt.close(fig)


def test_every_metric_with_matrices_has_a_plotter(results):
    assert set(PLOTTERS) == set(results)


@pytest.mark.parametrize("name", sorted(PLOTTERS))
def test_every_plot_is_titled_labelled_and_has_colour_legends(figures, name):
    axes, mapped = _parts(figures[name])
    for ax in axes:
        assert ax.get_xlabel() and ax.get_ylabel(), (name, ax.get_title())
        assert f"label-{name}" in ax.get_title() + (ax.figure._suptitle.get_text() if ax.figure._suptitle else "")
        assert ax.get_title().split(": ")[-1].strip() not in ("m", "s", "mutual_information")
    for artist in mapped:  # every colour means something written next to it
        assert artist.colorbar is not None and artist.colorbar.ax.get_ylabel(), name


@pytest.mark.parametrize("name, panels", [("dci", 1), ("mig", 1), ("modularity", 1), ("irs", 1),
                                          ("minimality_sufficiency", 2)])
def test_matrices_put_factors_along_x_and_codes_along_y(figures, name, panels):
    axes, _ = _parts(figures[name])
    for ax in axes[:panels]:
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("factor", "code")
        assert [t.get_text().split("\n")[0] for t in ax.get_xticklabels()] == NAMES
        assert [t.get_text() for t in ax.get_yticklabels()] == ["z0", "z1", "z2"]


def test_minimality_and_sufficiency_are_drawn_codes_by_factors(figures, results):
    axes, _ = _parts(figures["minimality_sufficiency"])
    m, s = (np.asarray(results["minimality_sufficiency"][f]) for f in ("m", "s"))  # (factors, codes)
    np.testing.assert_array_equal(axes[0].images[0].get_array(), m.T)
    np.testing.assert_array_equal(axes[1].images[0].get_array(), s.T)
    assert "minimality" in axes[0].get_title() and "sufficiency" in axes[1].get_title()


def test_modularity_plot_is_not_the_mig_plot(figures, results):
    mi = np.asarray(results["mig"]["mutual_information"])
    (mig_ax,), _ = _parts(figures["mig"])
    np.testing.assert_allclose(mig_ax.images[0].get_array(), mi / np.asarray(results["mig"]["factor_entropy"]))
    heat, bars = _parts(figures["modularity"])[0]
    np.testing.assert_allclose(heat.images[0].get_array(), mi / mi.max(axis=1, keepdims=True))
    # the per-code modularity scores, as bars
    widths = [p.get_width() for p in bars.patches]
    np.testing.assert_allclose(widths, results["modularity"]["code_scores"])


def test_lsbd_scatter_axes_and_the_objects_shown(figures):
    axes, mapped = _parts(figures["d_lsbd"])
    assert [ax.get_xlabel() for ax in axes] == ["whitened principal component 1"] * 2
    assert [a.colorbar.ax.get_ylabel().split(":")[0] for a in mapped] == NAMES
    fig = figures["d_lsbd_objects"]
    assert "3 of 64 objects shown (the best, median and worst by D_LSBD)" in fig._suptitle.get_text()
    axes, _ = _parts(fig)
    assert len(axes[0].lines[0].get_xdata()) == 64  # every object's score is drawn
    assert [ax.get_title().split(":")[0] for ax in axes[1:]] == ["best object", "median object", "worst object"]


def test_plot_files_are_kept_unless_forced(results, tmp_path):
    result = EvaluationResult(
        protocol="p-v1", protocol_version=1, protocol_hash="0" * 64, dataset={"factor_names": NAMES},
        package_version="0", encoder="e", code_dim=3, posterior=False,
        metrics={"mig": {"metric": "mig", "result": results["mig"]},
                 "irs": {"metric": "irs", "result": results["irs"]},
                 "sap": {"metric": "sap", "result": {}}})
    paths = plot_result(result, tmp_path)
    assert [p.name for p in paths] == ["p-v1.mig.png", "p-v1.irs.png"]
    paths[1].unlink()
    paths[0].write_bytes(b"mine")
    with pytest.raises(FactorbenchError, match="p-v1.mig.png already exists; pass --force to replace them or --plots"):
        plot_result(result, tmp_path)
    assert paths[0].read_bytes() == b"mine" and not paths[1].exists()  # nothing written
    plot_result(result, tmp_path, force=True)
    assert paths[0].read_bytes()[:4] == b"\x89PNG" and paths[1].exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p-v1.irs.png", "p-v1.mig.png"]
