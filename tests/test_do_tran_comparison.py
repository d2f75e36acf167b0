"""Do & Tran 2020's dSprites comparison (section 4, Figures 5-8): entry names, means and standard errors,
the separation AUC, each claim on synthetic populations where it holds and where it fails, the report, the
figures, and the command on the shipped rows (complete entries of do-tran-v1 only)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import mannwhitneyu, spearmanr

from factorbench.benchmark.experiments.do_tran_comparison import (DIRECTIONS, Setting, check_claims, format_report,
                                                                   main, mean_and_stderr, parse_entry, plot_figures,
                                                                   resample_runs, results_with_pending, separation_auc,
                                                                   settings_of, verdict_stability)
from factorbench.generators.errors import FactorbenchError

JEMMIG, RMIG, D, C, I = ("do_tran.jemmig", "do_tran.rmig", "dci.disentanglement", "dci.completeness",
                         "dci.informativeness")
MODULARITY, WSEPIN = "modularity.score", "wsepin.wsepin"
SCALARS = (JEMMIG, RMIG, D, C, I, MODULARITY, WSEPIN)

#: setting means shaped as the paper describes them: FactorVAE better by JEMMIG and RMIG at every setting,
#: the standard VAE (beta = 1) worst by JEMMIG and best by modularity, D and C rising with beta and mixed
#: between families, the informativeness error following JEMMIG
PAPER = {
    ("factor-vae", "gamma", 10): (0.55, 0.40, 0.50, 0.45, 0.20, 0.75, 1.0),
    ("factor-vae", "gamma", 20): (0.50, 0.45, 0.30, 0.60, 0.18, 0.78, 1.1),
    ("factor-vae", "gamma", 50): (0.45, 0.50, 0.60, 0.35, 0.17, 0.72, 1.2),
    ("factor-vae", "gamma", 100): (0.40, 0.55, 0.40, 0.50, 0.15, 0.80, 1.3),
    ("beta-vae", "beta", 1): (0.95, 0.10, 0.20, 0.25, 0.40, 0.90, 0.8),
    ("beta-vae", "beta", 4): (0.75, 0.25, 0.35, 0.40, 0.33, 0.70, 1.4),
    ("beta-vae", "beta", 10): (0.70, 0.30, 0.45, 0.55, 0.31, 0.72, 1.6),
    ("beta-vae", "beta", 20): (0.80, 0.20, 0.60, 0.65, 0.36, 0.74, 1.2),
    ("beta-vae", "beta", 50): (0.88, 0.15, 0.70, 0.75, 0.38, 0.76, 1.0),
    ("aae", "gz", 10): (0.60, 0.35, 0.50, 0.50, 0.25, 0.70, 1.0),
}
OFFSETS = np.array([-0.015, -0.005, 0.005, 0.015])


def _population(means=PAPER, runs: int = 4, seed: int = 0, changes=None) -> list[Setting]:
    """One setting per entry of ``means``; each scalar's runs are its mean plus the offsets (mean zero) in a
    random order, so each setting's mean is exactly the one given. ``changes``: ``{(entry, scalar): mean}``."""
    rng = np.random.default_rng(seed)
    means = {entry: dict(zip(SCALARS, row)) for entry, row in means.items()}
    for (entry, scalar), value in (changes or {}).items():
        means[entry][scalar] = value
    out = []
    for (family, hyper, value), row in means.items():
        values = {k: tuple(float(m + o) for o in rng.permutation(OFFSETS)[:runs]) for k, m in row.items()}
        out.append(Setting(family, hyper, float(value), f"{family}.{hyper}-{value}", values,
                           directions=dict(DIRECTIONS)))
    return out


def _verdicts(settings: list[Setting]) -> dict[str, str]:
    return {c.key: c.verdict for c in check_claims(settings)}


def _claim(settings: list[Setting], key: str):
    return next(c for c in check_claims(settings) if c.key == key)


def _runs_of(settings: list[Setting], family: str, scalar: str) -> np.ndarray:
    return np.concatenate([s.values[scalar] for s in settings if s.family == family])


def _as_runs(setting: Setting) -> list[SimpleNamespace]:
    """``setting``'s runs as collected results of do-tran-v1 (seed i for the i-th run) stand in for them."""
    return [SimpleNamespace(training={"sweep": {"plan": "do-tran-v1", "seed": i}}, directions=dict(DIRECTIONS),
                            scalars=lambda i=i: {k: v[i] for k, v in setting.values.items()})
            for i in range(setting.runs)]


def test_entry_names():
    assert parse_entry("factor-vae.gamma-10") == ("factor-vae", "gamma", 10.0)
    assert parse_entry("beta-vae.beta-1") == ("beta-vae", "beta", 1.0)
    assert parse_entry("aae.gz-50") == ("aae", "gz", 50.0)
    assert parse_entry("beta-vae.beta-0.5") == ("beta-vae", "beta", 0.5)
    for name in ("beta-vae.chen-mlp", "beta-vae", "beta-vae.beta", "factor-vae.gamma-", "vae.beta-x1"):
        with pytest.raises(FactorbenchError, match=r"<family>\.<hyperparameter>-<value>"):
            parse_entry(name)


def test_mean_and_standard_error():
    mean, se = mean_and_stderr([1.0, 2.0, 3.0, 4.0])
    assert mean == pytest.approx(2.5)
    assert se == pytest.approx(math.sqrt(5 / 3) / 2)  # sample variance 5/3, over sqrt(4)
    assert mean_and_stderr([1.0, math.nan, 3.0]) == pytest.approx((2.0, math.sqrt(2) / math.sqrt(2)))
    single = mean_and_stderr([0.7])
    assert single[0] == 0.7 and math.isnan(single[1])
    assert all(math.isnan(x) for x in mean_and_stderr([]))
    setting = _population()[0]
    assert setting.mean(JEMMIG) == pytest.approx(0.55) and setting.runs == 4
    assert setting.stderr(JEMMIG) == pytest.approx(np.std(OFFSETS, ddof=1) / 2)


def test_separation_auc_closed_forms_and_mann_whitney():
    assert separation_auc([1.0, 2.0, 3.0], [0.0, 0.5]) == 1.0
    assert separation_auc([1.0, 2.0, 3.0], [0.0, 0.5], "lower") == 0.0
    # pairs (1,2) (1,3) (2,2) (2,3): only the tie counts, one half of four
    assert separation_auc([1.0, 2.0], [2.0, 3.0]) == pytest.approx(0.125)
    assert separation_auc([1.0, 2.0], [2.0, 3.0], "lower") == pytest.approx(0.875)
    assert separation_auc([1.0, 1.0], [1.0]) == 0.5
    assert separation_auc([1.0, math.nan], [0.0]) == 1.0
    assert math.isnan(separation_auc([], [1.0]))
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 6, 17).astype(float), rng.integers(0, 6, 11).astype(float)  # with ties
    assert separation_auc(a, b) == pytest.approx(mannwhitneyu(a, b).statistic / (17 * 11))
    with pytest.raises(FactorbenchError, match="direction"):
        separation_auc(a, b, "up")


def test_settings_of_keeps_the_plans_runs_in_seed_order():
    def run(plan, seed, jemmig, extra=None):
        scalars = {JEMMIG: jemmig, **(extra or {})}
        training = {"sweep": {"plan": plan, "seed": seed}} if plan else {}
        return SimpleNamespace(training=training, directions={JEMMIG: "lower", RMIG: "higher"},
                               scalars=lambda: dict(scalars))

    results = {
        "beta-vae.beta-4": [run("do-tran-v1", 2, 0.3), run("do-tran-v1", 0, 0.1, {RMIG: 0.5}),
                            run("other-v1", 1, 9.0), run("do-tran-v1", 1, 0.2)],
        "factor-vae.gamma-10": [run("do-tran-v1", 0, 0.4)],
        "beta-vae.chen-mlp": [run("other-v1", 0, 1.0)],  # another plan's entry: never parsed
        "pca": [run(None, None, 2.0)],
    }
    settings = settings_of(results)
    assert [(s.family, s.hyper_name, s.hyper_value, s.model) for s in settings] == [
        ("factor-vae", "gamma", 10.0, "factor-vae.gamma-10"), ("beta-vae", "beta", 4.0, "beta-vae.beta-4")]
    beta = settings[1]
    assert beta.seeds == (0, 1, 2) and beta.values[JEMMIG] == (0.1, 0.2, 0.3)
    assert beta.values[RMIG][0] == 0.5 and all(math.isnan(v) for v in beta.values[RMIG][1:])
    assert beta.directions[JEMMIG] == "lower" and beta.runs == 3
    assert settings_of(results, plan="nothing-v1") == []
    with pytest.raises(FactorbenchError, match="'beta-vae.chen-mlp' is not named"):
        settings_of(results, plan="other-v1")


def test_every_claim_holds_on_the_papers_picture():
    settings = _population()
    assert set(_verdicts(settings).values()) == {"reproduced"}
    fv_j, bv_j = _runs_of(settings, "factor-vae", JEMMIG), _runs_of(settings, "beta-vae", JEMMIG)
    fv_r, bv_r = _runs_of(settings, "factor-vae", RMIG), _runs_of(settings, "beta-vae", RMIG)

    agree = _claim(settings, "jemmig-rmig-agree")
    assert agree.numbers["rho"] == pytest.approx(spearmanr(np.r_[fv_j, bv_j], np.r_[fv_r, bv_r]).statistic)
    assert agree.numbers["runs"] == 36  # the AAE is not counted
    assert f"{agree.numbers['rho']:.3f}" in agree.evidence

    separate = _claim(settings, "dc-do-not-separate")
    assert separate.numbers["JEMMIG"] == 1.0 and separate.numbers["RMIG"] == 1.0  # every FactorVAE run is better
    for name, scalar in (("D", D), ("C", C), ("I", I)):
        fv, bv = _runs_of(settings, "factor-vae", scalar), _runs_of(settings, "beta-vae", scalar)
        u = mannwhitneyu(-fv, -bv).statistic if scalar == I else mannwhitneyu(fv, bv).statistic  # I: an error
        assert separate.numbers[name] == pytest.approx(u / (len(fv) * len(bv)))
    assert separate.numbers["D"] < 0.75 and separate.numbers["C"] < 0.75

    beats = _claim(settings, "factorvae-beats-betavae")
    assert beats.numbers == pytest.approx({"JEMMIG worst factor-vae": 0.55, "JEMMIG best beta-vae": 0.70,
                                           "RMIG worst factor-vae": 0.40, "RMIG best beta-vae": 0.30})
    assert "(factor-vae gamma=10) 0.550" in beats.evidence and "(beta-vae beta=10) 0.700" in beats.evidence

    tracks = _claim(settings, "informativeness-tracks-jemmig")
    fv_d, bv_d = _runs_of(settings, "factor-vae", D), _runs_of(settings, "beta-vae", D)
    assert tracks.numbers["D"] == pytest.approx(spearmanr(np.r_[fv_j, bv_j], np.r_[fv_d, bv_d]).statistic)

    favour = _claim(settings, "dc-favour-high-beta")
    assert favour.numbers["rho D"] == pytest.approx(1.0) and favour.numbers["rho C"] == pytest.approx(1.0)
    assert favour.numbers["I factor-vae"] == pytest.approx(np.mean([0.20, 0.18, 0.17, 0.15]))
    assert favour.numbers["I beta-20"] == pytest.approx(0.36) and favour.numbers["I beta-50"] == pytest.approx(0.38)

    modularity = _claim(settings, "modularity-favours-vae")
    assert modularity.numbers["modularity factor-vae"] == pytest.approx(np.mean([0.75, 0.78, 0.72, 0.80]))
    worst = _claim(settings, "jemmig-grades-vae-worst")
    assert worst.numbers == pytest.approx({"JEMMIG beta-1": 0.95, "JEMMIG next worst": 0.88})


@pytest.mark.parametrize("key, changes", [
    # the best beta-VAE beats the worst FactorVAE by JEMMIG (RMIG still holds): one of two fails the claim
    ("factorvae-beats-betavae", {(("beta-vae", "beta", 10), JEMMIG): 0.52}),
    # RMIG ranked against JEMMIG within FactorVAE and unrelated to it within beta-VAE
    ("jemmig-rmig-agree", {**{(("factor-vae", "gamma", g), RMIG): 0.9 - v for g, v in
                              ((10, 0.5), (20, 0.4), (50, 0.3), (100, 0.2))},
                           **{(("beta-vae", "beta", b), RMIG): v for b, v in
                              ((1, 0.95), (4, 0.05), (10, 0.9), (20, 0.1), (50, 0.85))}}),
    # every FactorVAE run has a higher D than every beta-VAE run
    ("dc-do-not-separate", {(("factor-vae", "gamma", g), D): 0.9 for g in (10, 20, 50, 100)}),
    # D follows JEMMIG
    ("informativeness-tracks-jemmig", {(entry, D): row[0] for entry, row in PAPER.items()}),
    # D falls with beta
    ("dc-favour-high-beta", {(("beta-vae", "beta", b), D): v for b, v in
                             ((1, 0.7), (4, 0.6), (10, 0.45), (20, 0.35), (50, 0.2))}),
    ("modularity-favours-vae", {(("beta-vae", "beta", 1), MODULARITY): 0.6}),
    ("jemmig-grades-vae-worst", {(("beta-vae", "beta", 1), JEMMIG): 0.85}),
])
def test_each_claim_fails_when_its_picture_is_broken(key, changes):
    verdicts = _verdicts(_population(changes=changes))
    assert verdicts[key] == "not reproduced"


def test_the_failing_numbers():
    beats = _claim(_population(changes={(("beta-vae", "beta", 10), JEMMIG): 0.52}), "factorvae-beats-betavae")
    assert beats.numbers["JEMMIG best beta-vae"] == pytest.approx(0.52) and "does not beat" in beats.evidence
    separate = _claim(_population(changes={(("factor-vae", "gamma", g), D): 0.9 for g in (10, 20, 50, 100)}),
                      "dc-do-not-separate")
    assert separate.numbers["D"] == 1.0
    # the high-beta settings more informative than FactorVAE on average: the claim fails on informativeness alone
    favour = _claim(_population(changes={(("beta-vae", "beta", 50), I): 0.10}), "dc-favour-high-beta")
    assert favour.verdict == "not reproduced" and favour.numbers["rho D"] == pytest.approx(1.0)
    vae = _claim(_population(changes={(("beta-vae", "beta", 1), JEMMIG): 0.85}), "jemmig-grades-vae-worst")
    assert vae.numbers["JEMMIG next worst"] == pytest.approx(0.88) and "beta-vae beta=50" in vae.evidence


def test_too_few_runs():
    # one run per setting: the claims on setting means cannot be decided; those across runs still can
    one = _verdicts(_population(runs=1))
    assert one == {"factorvae-beats-betavae": "too few runs", "jemmig-rmig-agree": "reproduced",
                   "dc-do-not-separate": "reproduced", "informativeness-tracks-jemmig": "reproduced",
                   "dc-favour-high-beta": "too few runs", "modularity-favours-vae": "too few runs",
                   "jemmig-grades-vae-worst": "too few runs"}
    # a single FactorVAE setting decides nothing
    lone = {entry: row for entry, row in PAPER.items() if entry[0] != "factor-vae" or entry[2] == 10}
    assert set(_verdicts(_population(lone)).values()) == {"too few runs"}
    # without the standard VAE, the two claims about it wait; with two beta-VAE settings, the trend in beta
    partial = {entry: row for entry, row in PAPER.items() if entry[0] != "beta-vae" or entry[2] in (4, 20)}
    verdicts = _verdicts(_population(partial))
    assert verdicts["modularity-favours-vae"] == verdicts["jemmig-grades-vae-worst"] == "too few runs"
    assert verdicts["dc-favour-high-beta"] == "too few runs"
    assert verdicts["factorvae-beats-betavae"] == "reproduced"
    assert set(_verdicts([]).values()) == {"too few runs"}
    claim = _claim(_population(runs=1), "factorvae-beats-betavae")
    assert "needs 2 FactorVAE and 2 beta-VAE settings with 2 runs of JEMMIG" in claim.evidence


def test_directions_come_from_the_runs():
    """A population whose runs call JEMMIG better when higher is judged that way."""
    settings = _population()
    flipped = [Setting(s.family, s.hyper_name, s.hyper_value, s.model,
                       {k: tuple(-v for v in vs) if k == JEMMIG else vs for k, vs in s.values.items()},
                       directions={**s.directions, JEMMIG: "higher"}) for s in settings]
    assert _verdicts(flipped) == _verdicts(settings)
    assert _claim(flipped, "jemmig-rmig-agree").numbers["rho"] > 0.7


def test_the_report():
    assert format_report([], []) == "No run of plan `do-tran-v1` is collected yet.\n"
    assert format_report([], [], plan="x-v1") == "No run of plan `x-v1` is collected yet.\n"
    settings = _population()
    report = format_report(settings, check_claims(settings))
    assert ("| family | hyperparameter | runs | JEMMIG ↓ | RMIG ↑ | DCI D ↑ | DCI C ↑ | DCI I (error) ↓ | modularity ↑ "
            "| WSEPIN (nats) ↑ | MISJED ↓ |") in report
    assert report.count(" | n/a |") == 10  # no run of the population has MISJED
    assert "\nn/a: no run of the setting has the metric; a result file says why under `skipped`" in report
    misjed = [Setting(s.family, s.hyper_name, s.hyper_value, s.model, {**s.values, "do_tran.misjed": (0.2, 0.4)})
              for s in settings[:1]]
    assert format_report(misjed, []).rstrip().endswith("| 1.000 ± 0.006 | 0.300 ± 0.100 |")  # no n/a: no note
    se = np.std(OFFSETS, ddof=1) / 2
    assert f"| factor-vae | gamma = 10 | 4 | 0.550 ± {se:.3f} | 0.400 ± {se:.3f} |" in report
    assert "| aae | gz = 10 | 4 |" in report
    assert "- **factorvae-beats-betavae** (Figure 5a, 5b): reproduced. " in report
    assert "- **modularity-favours-vae** (Figure 8b): reproduced. " in report and report.count("Evidence: ") == 7
    one = _population(runs=1)
    assert "| beta-vae | beta = 1 | 1 | 0.9" in format_report(one, check_claims(one))  # no error of one run


def test_the_figures(tmp_path):
    paths = plot_figures(_population(), tmp_path / "figures")
    assert [p.name for p in paths] == ["fig5.png", "fig6.png", "fig7.png", "fig8.png"]
    assert all(p.is_file() and p.stat().st_size > 0 and p.read_bytes()[:4] == b"\x89PNG" for p in paths)
    assert plot_figures([], tmp_path / "none") == [] and not (tmp_path / "none").exists()


def test_the_figures_draw_pending_settings_hollow():
    """A pending setting's markers are hollow (face "none") in the per-setting and per-run panels, the others
    filled in their family's colour; the panels say what hollow means only when something is pending."""
    from matplotlib.colors import to_rgba

    from factorbench.benchmark.experiments.do_tran_comparison import _FAMILY_NAMES, _colour, _per_setting, _scatter
    from factorbench.benchmark.plots import pyplot

    settings = _population(runs=2)
    pending = {settings[0].model, settings[4].model}
    fig, (left, right) = pyplot().subplots(1, 2)
    _per_setting(left, settings, JEMMIG, pending)
    _scatter(right, settings, JEMMIG, RMIG, pending)
    faces = [bars.lines[0].get_markerfacecolor() for bars in left.containers]  # one errorbar per setting
    assert len(faces) == len(settings)
    assert [i for i, face in enumerate(faces) if face == "none"] == [0, 4]
    assert to_rgba(faces[1]) == to_rgba("C0") and to_rgba(faces[5]) == to_rgba("C1")
    hollow = [len(c.get_facecolors()) == 0 or c.get_facecolors()[0][3] == 0 for c in right.collections]
    assert [i for i, h in enumerate(hollow) if h] == [0, 4]
    assert left.get_title().endswith("; bars: ± 1 standard error; hollow: pending)")
    assert right.get_legend().get_title().get_text() == "hollow: pending"
    (low, high), = [seg[:, 1] for seg in left.containers[1].lines[2][0].get_segments()]  # the bar of setting 1
    assert high - low == pytest.approx(2 * mean_and_stderr(settings[1].values[JEMMIG])[1]) and high > low
    # the legend's markers are filled in the family's colour even where the family's first setting is pending
    legend = right.get_legend()
    families = list(dict.fromkeys(_FAMILY_NAMES[s.family] for s in settings))
    assert [t.get_text() for t in legend.get_texts()] == families
    assert all(h.get_markerfacecolor() != "none" for h in legend.legend_handles)
    assert to_rgba(legend.legend_handles[0].get_markerfacecolor()) == to_rgba(_colour(settings[0].family))
    fig2, ax = pyplot().subplots()
    _per_setting(ax, settings, JEMMIG)
    assert "hollow" not in ax.get_title()
    assert all(bars.lines[0].get_markerfacecolor() != "none" for bars in ax.containers)
    pyplot().close(fig)
    pyplot().close(fig2)


def test_the_command_on_the_shipped_rows(capsys, tmp_path):
    assert main(["--resamples", "0"]) == 0  # the shipped rows: complete entries only, four seeds each
    out = capsys.readouterr().out
    assert out.startswith("Do & Tran 2020 on dSprites: ") and "pending" not in out
    rows = [line for line in out.splitlines() if line.startswith(("| factor-vae", "| beta-vae", "| aae"))]
    assert rows and all(line.split(" | ")[2] == "4" for line in rows)
    (tmp_path / "empty").mkdir()
    assert main(["--dir", str(tmp_path / "empty")]) == 0
    assert capsys.readouterr().out == "No run of plan `do-tran-v1` is collected yet.\n"
    assert main(["--dir", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --dir ") and "no such folder" in err
    # another plan's entries are not named <family>.<hyper>-<value>
    assert main(["--plan", "almudevar-ortega-v1"]) == 2
    assert "is not named <family>.<hyperparameter>-<value>" in capsys.readouterr().err


def test_the_command_on_collected_runs(capsys, tmp_path, monkeypatch):
    """The command reads the protocol's results, keeps the plan's runs and prints the table, the claims and
    the figures it wrote (the results stand in for collected runs of the plan)."""
    import factorbench.benchmark.results as results_module

    collected = {s.model: _as_runs(s) for s in _population()}
    seen = []
    monkeypatch.setattr(results_module, "reference_results",
                        lambda protocol, directory=None, add=(): seen.append((protocol, directory, add)) or collected)
    monkeypatch.setattr(results_module, "added_models", lambda add: ())
    assert main(["--add", "mine.json", "--plot", str(tmp_path / "figures")]) == 0
    out = capsys.readouterr().out
    assert seen == [("dsprites-dci-v1", None, ["mine.json"])]
    assert "10 settings of plan `do-tran-v1`, 40 runs" in out and out.count(": reproduced. ") == 7
    assert out.count(" Stability: the same verdict in ") == 7 and "of 1,000 bootstrap draws" in out
    assert f"wrote {tmp_path / 'figures' / 'fig8.png'}" in out


def test_your_own_encoder_stands_beside_the_settings_in_no_claim(tmp_path):
    """An added result of the user's encoder is a setting of its own, last, named by its model, in the table and
    the figures and in no claim; a run of neither the plan nor yours (a reference encoder) is left out."""
    from factorbench.benchmark.experiments.do_tran_comparison import YOURS, format_report, plot_figures

    collected = {s.model: _as_runs(s) for s in _population()}
    theirs = settings_of(collected)
    mine = SimpleNamespace(training={}, directions=dict(DIRECTIONS), scalars=lambda: {JEMMIG: 0.1, RMIG: 0.9})
    pca = SimpleNamespace(training={}, directions=dict(DIRECTIONS), scalars=lambda: {JEMMIG: 0.2, RMIG: 0.8})
    settings = settings_of({**collected, "my-encoder": [mine], "pca": [pca]}, yours=["my-encoder"])
    assert [s.model for s in settings] == [s.model for s in theirs] + ["my-encoder"]
    yours = settings[-1]
    assert (yours.family, yours.label, yours.hyper_label, yours.runs) == (YOURS, "my-encoder (yours)", "my-encoder", 1)
    assert [(c.key, c.verdict, c.evidence) for c in check_claims(settings)] == \
        [(c.key, c.verdict, c.evidence) for c in check_claims(theirs)]
    assert all("my-encoder" not in c.models for c in check_claims(settings))
    report = format_report(settings, check_claims(settings))
    assert "10 settings of plan `do-tran-v1`, 40 runs" in report and "beside them, yours (my-encoder), in no claim" in report
    assert "| yours | my-encoder | 1 | 0.100 | 0.900 |" in report
    assert len(plot_figures(settings, tmp_path)) == 4


def test_pending_seeds_join_the_report_marked_and_never_twice():
    """Seeds of entries not yet complete are added to the collected results and marked in the table; an
    entry found complete and pending at once is refused."""
    settings = _population(runs=1)
    pending = {settings[0].model, settings[4].model}
    report = format_report(settings, check_claims(settings), pending=pending)
    assert "10 runs (mean ± standard error over each setting's runs); 2 of the runs, in 2 settings marked pending" in report
    assert "| factor-vae | gamma = 10 | 1, pending | 0.5" in report and "| beta-vae | beta = 1 | 1, pending | 0.9" in report
    assert "| factor-vae | gamma = 20 | 1 | 0." in report and report.count(", pending |") == 2
    assert "pending" not in format_report(settings, check_claims(settings))
    assert results_with_pending({"a": [1]}, {"b": [2, 3]}) == {"a": [1], "b": [2, 3]}
    with pytest.raises(FactorbenchError, match="^a: in the results and among the pending seeds"):
        results_with_pending({"a": [1], "c": [4]}, {"a": [2]})


def test_the_settings_each_verdict_rests_on():
    """A claim names the settings whose runs decide it: runs of FactorVAE and beta-VAE, never the AAE; the
    claims on setting means only the settings with enough runs; none for "too few runs"."""
    settings = _population()
    fv = [f"factor-vae.gamma-{g}" for g in (10, 20, 50, 100)]
    bv = [f"beta-vae.beta-{b}" for b in (1, 4, 10, 20, 50)]
    models = {c.key: c.models for c in check_claims(settings)}
    for key in ("factorvae-beats-betavae", "jemmig-rmig-agree", "dc-do-not-separate", "informativeness-tracks-jemmig",
                "jemmig-grades-vae-worst"):
        assert sorted(models[key]) == sorted(fv + bv), key
    assert sorted(models["dc-favour-high-beta"]) == sorted(fv + bv)
    assert models["modularity-favours-vae"] == ("beta-vae.beta-1", *fv)
    # beta = 10 with one run: out of the claims on means, still in those across runs
    thinned = [Setting(s.family, s.hyper_name, s.hyper_value, s.model, {k: v[:1] for k, v in s.values.items()},
                       directions=s.directions) if s.model == "beta-vae.beta-10" else s for s in settings]
    models = {c.key: c.models for c in check_claims(thinned)}
    assert "beta-vae.beta-10" not in models["factorvae-beats-betavae"] + models["dc-favour-high-beta"]
    assert "beta-vae.beta-10" in models["jemmig-rmig-agree"] and len(models["factorvae-beats-betavae"]) == 8
    too_few = _claim(_population(runs=1), "factorvae-beats-betavae")
    assert too_few.models == () and too_few.pending_of(fv) == []


def test_verdicts_on_pending_settings_are_provisional():
    """A verdict resting on any pending setting says so, with how many; "too few runs" never does."""
    settings = _population(runs=1)
    pending = {"factor-vae.gamma-10", "beta-vae.beta-1", "aae.gz-10"}
    claims = check_claims(settings)
    agree = next(c for c in claims if c.key == "jemmig-rmig-agree")
    assert agree.pending_of(pending) == ["factor-vae.gamma-10", "beta-vae.beta-1"]  # the AAE is not used
    report = format_report(settings, claims, pending=pending)
    assert ("- **jemmig-rmig-agree** (Figure 5c): reproduced, provisional (2 of the 9 settings it rests on are "
            "pending). ") in report
    assert report.count(", provisional (") == 3  # the three claims across runs; the other four: too few runs
    assert "- **factorvae-beats-betavae** (Figure 5a, 5b): too few runs. " in report
    one = format_report(settings, claims, pending={"beta-vae.beta-50"})
    assert "reproduced, provisional (1 of the 9 settings it rests on is pending). " in one
    assert "provisional" not in format_report(settings, claims, pending={"aae.gz-10"})
    assert "provisional" not in format_report(settings, claims)
    # four runs each, two settings pending: the claims on means are provisional too
    full = _population()
    report = format_report(full, check_claims(full), pending={"factor-vae.gamma-10", "beta-vae.beta-1"})
    assert report.count(", provisional (2 of the 9 settings it rests on are pending)") == 6
    assert "- **modularity-favours-vae** (Figure 8b): reproduced, provisional (2 of the 5 settings" in report


def test_the_command_reads_pending_seeds(capsys, tmp_path, monkeypatch):
    """``--pending DIR`` reads DIR beside the collected results; bare ``--pending`` reads the checkout's
    folder of the plan, which may not exist yet; a missing DIR is a user error before any work."""
    import factorbench.benchmark.experiments.do_tran_comparison as module
    import factorbench.benchmark.results as results_module

    assert module.pending_dir().parts[-4:] == ("baselines", "pending", "do-tran-v1", "dsprites-dci-v1")

    population = {s.model: _as_runs(s) for s in _population(runs=1)}
    models = sorted(population)
    folders = {None: {m: population[m] for m in models[:6]}, str(tmp_path): {m: population[m] for m in models[6:]}}
    monkeypatch.setattr(results_module, "reference_results",
                        lambda protocol, directory=None, add=(): folders[None if directory is None else str(directory)])
    assert main(["--pending", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "10 settings of plan `do-tran-v1`, 10 runs" in out and out.count(", pending |") == 4
    # the pending seeds are the four FactorVAE settings: the three claims across runs rest on them
    assert out.count(": reproduced, provisional (") == 3
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "6 settings of plan `do-tran-v1`, 6 runs" in out and "provisional" not in out  # no FactorVAE: too few
    monkeypatch.setattr(module, "pending_dir", lambda plan=module.PLAN, protocol=module.PROTOCOL: tmp_path / "none")
    assert main(["--pending"]) == 0 and ", pending |" not in capsys.readouterr().out
    monkeypatch.setattr(module, "pending_dir", lambda plan=module.PLAN, protocol=module.PROTOCOL: tmp_path)
    assert main(["--pending"]) == 0 and capsys.readouterr().out.count(", pending |") == 4
    assert main(["--pending", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == f"error: --pending {tmp_path / 'missing'}: no such folder\n"


def test_resampled_runs_stay_whole():
    """A resampled setting takes whole runs: every scalar of a row, and its seed, from the same run."""
    setting = Setting("beta-vae", "beta", 4.0, "beta-vae.beta-4", {JEMMIG: (0.1, 0.2, 0.3), RMIG: (1.0, 2.0, 3.0)},
                      seeds=(5, 6, 7))
    drawn = resample_runs(setting, [2, 2, 0])
    assert drawn.values == {JEMMIG: (0.3, 0.3, 0.1), RMIG: (3.0, 3.0, 1.0)} and drawn.seeds == (7, 7, 5)
    assert (drawn.family, drawn.hyper_value, drawn.model, drawn.runs) == ("beta-vae", 4.0, "beta-vae.beta-4", 3)


def test_verdict_stability_closed_form():
    """Modularity's claim on a population where it hangs on one run. The beta = 1 setting has runs 0.90 and
    0.80, every FactorVAE run 0.86: the observed mean 0.85 is below FactorVAE's, "not reproduced"; a draw
    reproduces it only when it takes 0.90 twice (probability 1/4), so the verdict survives 3/4 of the draws.
    Settings whose runs are all equal, and claims that rest on them only, keep their verdicts in every draw."""
    means = {entry: row[:5] + (0.86 if entry[0] == "factor-vae" else row[5],) + row[6:] for entry, row in PAPER.items()}
    equal = [Setting(family, hyper, float(value), f"{family}.{hyper}-{value}",
                     {k: (m, m) for k, m in zip(SCALARS, row)}, directions=dict(DIRECTIONS))
             for (family, hyper, value), row in means.items()]
    vae = next(i for i, s in enumerate(equal) if s.family == "beta-vae" and s.hyper_value == 1)
    assert all(v == 1.0 for v in verdict_stability(equal, resamples=50).values())  # no spread: every draw agrees
    equal[vae] = Setting("beta-vae", "beta", 1.0, equal[vae].model, {**equal[vae].values, MODULARITY: (0.90, 0.80)},
                         directions=dict(DIRECTIONS))
    assert _claim(equal, "modularity-favours-vae").verdict == "not reproduced"
    stability = verdict_stability(equal, resamples=1000, seed=1)
    assert abs(stability["modularity-favours-vae"] - 0.75) < 0.05  # binomial sd at 1,000 draws: 0.014
    assert all(v == 1.0 for k, v in stability.items() if k != "modularity-favours-vae")
    assert verdict_stability(equal, resamples=100, seed=3) == verdict_stability(equal, resamples=100, seed=3)


def test_verdict_stability_does_not_move_with_settings_in_no_claim():
    """The AAE's and your settings are in no claim: adding or changing them leaves every stability as it was
    (they are not drawn, so the random stream of the claimed families' draws is the same)."""
    means = {entry: row[:5] + (0.86 if entry[0] == "factor-vae" else row[5],) + row[6:] for entry, row in PAPER.items()
             if entry[0] != "aae"}
    population = [Setting(family, hyper, float(value), f"{family}.{hyper}-{value}",
                          {k: (m, m) for k, m in zip(SCALARS, row)}, directions=dict(DIRECTIONS))
                  for (family, hyper, value), row in means.items()]
    vae = next(i for i, s in enumerate(population) if s.family == "beta-vae" and s.hyper_value == 1)
    population[vae] = Setting("beta-vae", "beta", 1.0, population[vae].model,
                              {**population[vae].values, MODULARITY: (0.90, 0.80)}, directions=dict(DIRECTIONS))
    alone = verdict_stability(population, resamples=200, seed=2)
    extra = [Setting("aae", "gz", g, f"aae.gz-{g}", {JEMMIG: (0.8, 0.9, 0.85), RMIG: (0.1, 0.0, 0.05)},
                     directions=dict(DIRECTIONS)) for g in (10, 20)]
    extra.append(Setting("yours", "", math.nan, "mine", {JEMMIG: (0.1, 0.2)}, directions=dict(DIRECTIONS)))
    assert verdict_stability(extra + population, resamples=200, seed=2) == alone
    assert 0.6 < alone["modularity-favours-vae"] < 0.9  # a verdict that the draws move (3/4 in expectation)


def test_verdict_stability_leaves_out_what_it_cannot_judge():
    one_run = _population(runs=1)  # claims on setting means: too few runs in every draw
    verdicts = _verdicts(one_run)
    stability = verdict_stability(one_run, resamples=5)
    assert set(stability) == {k for k, v in verdicts.items() if v != "too few runs"} and stability
    assert all(v == 1.0 for v in stability.values())  # one run a setting: every draw is the runs themselves
    assert verdict_stability([], resamples=5) == {}
    with pytest.raises(ValueError, match="at least 1"):
        verdict_stability(one_run, resamples=0)
    report = format_report(one_run, check_claims(one_run), stability=stability, resamples=5)
    assert report.count("Stability: the same verdict in 100% of 5 bootstrap draws") == len(stability)
    assert "Stability" not in format_report(one_run, check_claims(one_run))


def test_the_resamples_option(capsys, monkeypatch):
    import factorbench.benchmark.results as results_module

    collected = {s.model: _as_runs(s) for s in _population(runs=2)}
    monkeypatch.setattr(results_module, "reference_results", lambda protocol, directory=None, add=(): collected)
    assert main(["--resamples", "0"]) == 0
    assert "Stability" not in capsys.readouterr().out
    assert main(["--resamples", "20"]) == 0
    assert "of 20 bootstrap draws" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["--resamples", "-1"])
    assert exit_info.value.code == 2
    assert "--resamples must be 0 or more" in capsys.readouterr().err
