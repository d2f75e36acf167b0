"""The leaderboard site: pages hold the score tables' rows and each run's provenance, bad output folders are
refused before anything is written, and the pages load in a real headless browser (Debian's chromium)."""

from __future__ import annotations

import dataclasses
import math
import re
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from factorbench.benchmark.cli import main as cli
from factorbench.benchmark.leaderboard import MARKER, build_site
from factorbench.benchmark.results import REFERENCE_DIR, scores_table
from factorbench.generators.errors import FactorbenchError

PROTOCOLS = ["square-lsbd-v1", "teapot-dci-v1"]


class _Tables(HTMLParser):
    """The text of every cell of the table with id ``which``, row by row."""

    def __init__(self, which: str) -> None:
        super().__init__()
        self.which, self.inside, self.rows, self.cell = which, False, [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == self.which:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(self.cell.strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def _table(path: Path, which: str) -> list[list[str]]:
    parser = _Tables(which)
    parser.feed(path.read_text())
    return parser.rows


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site of two protocols' shipped reference rows, without plots (drawing every model's plots costs
    about 45 s; ``plotted_site`` draws three models')."""
    out = tmp_path_factory.mktemp("site") / "site"
    build_site(out, PROTOCOLS, plots=False)
    return out


PLOTTED_MODELS = ("pca", "random", "vae")


@pytest.fixture(scope="module")
def plotted_site(tmp_path_factory):
    """The site of three shipped square-lsbd-v1 rows, with their plots, drawn in this process."""
    root = tmp_path_factory.mktemp("plotted")
    folder = root / "reference" / "square-lsbd-v1"
    folder.mkdir(parents=True)
    for model in PLOTTED_MODELS:
        shutil.copy(REFERENCE_DIR / "square-lsbd-v1" / f"{model}.json", folder)
    return build_site(root / "site", ["square-lsbd-v1"], reference_dir=root / "reference", jobs=1)


def test_protocol_pages_hold_the_score_table_rows_in_order(site):
    for name in PROTOCOLS:
        table = scores_table(name)
        rows = _table(site / name / "index.html", "scores")
        assert rows[0][:3] == ["model", "runs", "kind"]
        assert [r[0] for r in rows[1:]] == [row[0] for row in table.rows]
        head = table.columns.index(table.headline)
        for html_row, row in zip(rows[1:], table.rows):
            mean, std = row[2][head]
            assert html_row[1] == table.runs_cell(row[0], row[1])
            assert html_row[2].startswith(dict(table.kinds)[row[0]])
            assert html_row[3 + head] == (f"{mean:.3f}" if std is None else f"{mean:.3f} ± {std:.3f}")
            # a cell that does not compare with the others' (teapot: the reference rows' do_tran) ends in ⚠
            marked = [k for k, cell in zip(table.columns, html_row[3:]) if cell.endswith(" ⚠")]
            assert marked == [k for k in table.columns if (row[0], k) in table.caveats]
        if name == "teapot-dci-v1":
            assert {m for m, _ in table.caveats} == {"ideal", "random", "pca"}
        text = (site / name / "index.html").read_text()
        assert scores_table(name).headline in text
        from factorbench.benchmark.protocols import get_protocol

        assert get_protocol(name).hash() in text  # the protocol hash and its definition
        assert "&quot;metrics&quot;" in text  # the definition, escaped
    index = _table(site / "index.html", "protocols")
    assert [r[0] for r in index[1:]] == PROTOCOLS


def test_model_pages_hold_every_run_its_provenance_and_plots(site, plotted_site):
    assert not (site / "square-lsbd-v1" / "plots").exists()  # --no-plots draws none
    site = plotted_site
    page = site / "square-lsbd-v1" / "pca.html"
    result = json.loads((REFERENCE_DIR / "square-lsbd-v1" / "pca.json").read_text())
    text = page.read_text()
    for sha in result["dataset"]["sha256"].values():
        assert sha in text
    assert result["protocol_hash"] in text
    runs = _table(page, "runs")
    assert len(runs) == 2 and runs[1][0] == "run 1"
    pictures = sorted(p.name for p in (site / "square-lsbd-v1" / "plots" / "pca").iterdir())
    assert pictures == ["square-lsbd-v1.d_lsbd.png", "square-lsbd-v1.dci.png", "square-lsbd-v1.mig.png",
                        "square-lsbd-v1.modularity.png"]
    for name in pictures:
        assert f'src="plots/pca/{name}"' in text
    # a web server (another user) can read the site; each figure has a caption and links to itself
    import stat

    assert stat.S_IMODE(site.stat().st_mode) & 0o005 == 0o005
    page = (site / "square-lsbd-v1" / "pca.html").read_text()
    assert "<figcaption>" in page and page.count("<figure>") == page.count("<img ")



def test_a_trained_model_page_names_its_config_plan_and_seed(tmp_path):
    """A collected file (several seeds of one sweep entry) gets mean ± std and each seed's provenance."""
    folder = tmp_path / "reference" / "square-lsbd-v1"
    folder.mkdir(parents=True)
    base = json.loads((REFERENCE_DIR / "square-lsbd-v1" / "pca.json").read_text())
    runs = []
    for seed, value in [(0, 0.4), (1, 0.6)]:
        run = json.loads(json.dumps(base))
        run["model"] = "my-vae"
        run["metrics"]["d_lsbd"]["scalars"]["score"] = run["metrics"]["d_lsbd"]["result"]["score"] = value
        run["training"] = {"config_hash": f"{seed}" * 64, "config": {"model": "vae", "params": {"seed": seed}},
                           "sweep": {"plan": "my-plan", "plan_hash": "ab" * 32, "job": f"my-vae/square/seed{seed}",
                                     "seed": seed, "dataset": "square"},
                           "trained": {"device": "cpu", "device_name": "Some CPU Model", "precision": "bf16",
                                       "wall_time_s": 120.0, "cpu_time_s": 90.0, "threads": 1,
                                       "torch_version": "2.13.0+cpu"}}
        if seed == 1:  # recorded since 2026-12: what the name leaves out
            run["training"]["trained"]["device_signature"] = "GenuineIntel family 6 model 143 stepping 8; avx2"
        from factorbench.benchmark.results import EvaluationResult

        run.pop("checksum", None)
        runs.append(json.loads(EvaluationResult.from_dict(run).to_json()))
    (folder / "my-vae.json").write_text(json.dumps({"model": "my-vae", "runs": runs}))
    out = build_site(tmp_path / "site", ["square-lsbd-v1"], reference_dir=tmp_path / "reference", plots=False)
    rows = _table(out / "square-lsbd-v1" / "index.html", "scores")
    assert rows[1][:4] == ["my-vae", "2", "unsupervised", "0.500 ± 0.141"]
    text = (out / "square-lsbd-v1" / "my-vae.html").read_text()
    assert [r[0] for r in _table(out / "square-lsbd-v1" / "my-vae.html", "runs")[1:]] == ["seed 0", "seed 1"]
    assert "my-plan (hash " + "ab" * 32 in text and "0" * 64 in text and "1" * 64 in text
    assert "my-vae/square/seed1" in text
    # the settings as a table and the command that reproduces the row
    assert "<h2>Settings</h2>" in text and "factorbench sweep my-plan --only &#x27;my-vae/square/*&#x27;" in text
    assert "cpu Some CPU Model (bf16), 2.0 min (1.5 CPU min, 1 threads), torch 2.13.0+cpu" in text
    assert ("cpu Some CPU Model [GenuineIntel family 6 model 143 stepping 8; avx2] (bf16), 2.0 min" in text)
    # the plan is not shipped: the page says its settings were not checked
    assert "is not shipped with factorbench" in (out / "square-lsbd-v1" / "index.html").read_text()


def test_plots_drawn_by_several_processes_are_the_same_files(tmp_path, capsys, plotted_site):
    """--jobs 2 draws the model pages' plots in two processes: the same files, byte for byte, as one."""
    reference = plotted_site.parent / "reference"
    sites = [plotted_site, build_site(tmp_path / "site2", ["square-lsbd-v1"], reference_dir=reference, jobs=2)]
    files = [{p.relative_to(site): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()} for site in sites]
    assert files[0].keys() == files[1].keys() and files[0] == files[1]
    assert sum(name.suffix == ".png" for name in files[0]) >= 3 * 2  # plots of every model page
    with pytest.raises(FactorbenchError, match="--jobs must be at least 1"):
        build_site(tmp_path / "site0", ["square-lsbd-v1"], reference_dir=reference, jobs=0)
    assert not (tmp_path / "site0").exists()
    assert cli(["leaderboard", "--out", str(tmp_path / "site-cli"), "--jobs", "0", "--quiet"]) == 2
    assert "--jobs must be at least 1" in capsys.readouterr().err


def _site_files(site: Path) -> dict:
    return {p.relative_to(site): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}


def test_a_site_built_again_takes_unchanged_plots_from_the_cache(tmp_path, monkeypatch, capsys, plotted_site):
    """A second build with the same plot cache draws nothing and writes the same files; a cached file with
    other bytes than recorded is drawn again (and the entry repaired); another result has another key."""
    import factorbench.benchmark.plots as plots
    from factorbench.benchmark.plot_cache import MANIFEST, plot_key
    from factorbench.benchmark.results import load_result

    reference, cache = plotted_site.parent / "reference", tmp_path / "cache"
    first = build_site(tmp_path / "cold", ["square-lsbd-v1"], reference_dir=reference, jobs=1, plot_cache=cache)
    assert _site_files(first) == _site_files(plotted_site)
    entries = sorted(p for p in cache.iterdir())
    assert len(entries) == len(PLOTTED_MODELS) and all((e / MANIFEST).is_file() for e in entries)
    drawn = []
    real = plots.plot_result
    monkeypatch.setattr(plots, "plot_result", lambda run, target: drawn.append(run.model) or real(run, target))
    warm = build_site(tmp_path / "warm", ["square-lsbd-v1"], reference_dir=reference, jobs=1, plot_cache=cache)
    assert drawn == [] and _site_files(warm) == _site_files(plotted_site)
    # a damaged cached file is not used: that model's plots are drawn again, the entry rewritten
    pca = load_result(reference / "square-lsbd-v1" / "pca.json")
    damaged = cache / plot_key(pca) / "square-lsbd-v1.mig.png"
    good = damaged.read_bytes()
    damaged.write_bytes(good[:100])
    again = build_site(tmp_path / "again", ["square-lsbd-v1"], reference_dir=reference, jobs=1, plot_cache=cache)
    assert drawn == ["pca"] and _site_files(again) == _site_files(plotted_site)
    assert damaged.read_bytes() == good
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no staging left behind
    # the key follows the content
    other = dataclasses.replace(pca, model="pca-2")
    assert plot_key(other) != plot_key(pca) and plot_key(pca) in {e.name for e in entries}
    # the command line: contradicting options and a cache that is a file are refused, exit 2
    a_file = tmp_path / "cache.txt"
    a_file.write_text("x")
    assert cli(["leaderboard", "--out", str(tmp_path / "cli"), "--plot-cache", str(a_file), "--quiet"]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert cli(["leaderboard", "--out", str(tmp_path / "cli"), "--plot-cache", str(cache), "--no-plot-cache",
                "--quiet"]) == 2
    assert "contradict" in capsys.readouterr().err
    assert not (tmp_path / "cli").exists()


def test_the_plot_cache_keeps_the_most_recently_used_entries_under_its_size(tmp_path):
    """prune removes the entries used longest ago until the rest fit, and staging folders older than an
    hour; a use (cached_plots) makes an entry the newest."""
    import os

    from factorbench.benchmark.plot_cache import MANIFEST, STALE_STAGING_S, cached_plots, prune, store_plots

    drawn = tmp_path / "drawn"
    drawn.mkdir()
    cache = tmp_path / "cache"
    for i, key in enumerate("abcd"):  # 1,000 bytes of plot each, a used 100 s apart
        (drawn / "p.png").write_bytes(bytes([i]) * 1000)
        store_plots(cache, key, [drawn / "p.png"])
        os.utime(cache / key / MANIFEST, (1000.0 + 100 * i, 1000.0 + 100 * i))
    size = sum(f.stat().st_size for f in (cache / "a").iterdir())  # the plot and its manifest
    old_staging, new_staging = cache / ".e.old", cache / ".f.new"
    old_staging.mkdir()
    new_staging.mkdir()
    now = 1000.0 + STALE_STAGING_S + 500
    os.utime(old_staging, (now - STALE_STAGING_S - 1, now - STALE_STAGING_S - 1))
    os.utime(new_staging, (now - 10, now - 10))
    assert cached_plots(cache, "a", tmp_path / "out") == [tmp_path / "out" / "p.png"]  # "a" is now the newest
    result = prune(cache, 4 * size, now=now)  # every entry fits; the killed build's staging goes
    assert (result.entries, result.staging, result.kept_bytes) == (0, 1, 4 * size)
    assert not old_staging.exists() and new_staging.exists()
    result = prune(cache, 2 * size + 1, now=now)
    assert (result.entries, result.bytes, result.staging, result.kept_bytes) == (2, 2 * size, 0, 2 * size)
    assert sorted(p.name for p in cache.iterdir()) == [".f.new", "a", "d"]
    assert prune(cache, 1, now=now).kept_bytes == 0 and sorted(p.name for p in cache.iterdir()) == [".f.new"]
    assert prune(tmp_path / "missing", 1) == prune(cache, 1, now=now)  # nothing there: nothing to do


def test_a_build_bounds_its_plot_cache(tmp_path, capsys, plotted_site):
    """After a build the cache holds at most --plot-cache-max-mb: an entry no build has used for long goes,
    the entries this build used stay; a size that is not positive is refused before any work."""
    import os

    from factorbench.benchmark.plot_cache import MANIFEST, store_plots

    reference, cache = plotted_site.parent / "reference", tmp_path / "cache"
    build_site(tmp_path / "one", ["square-lsbd-v1"], reference_dir=reference, jobs=1, plot_cache=cache)
    used = sorted(e.name for e in cache.iterdir())
    total = sum(f.stat().st_size for e in cache.iterdir() for f in e.iterdir())
    (tmp_path / "old.png").write_bytes(b"x" * 5000)
    store_plots(cache, "0" * 64, [tmp_path / "old.png"])  # another result's plots, used long ago
    os.utime(cache / ("0" * 64) / MANIFEST, (1.0, 1.0))
    build_site(tmp_path / "two", ["square-lsbd-v1"], reference_dir=reference, jobs=1, plot_cache=cache,
               plot_cache_max_mb=(total + 100) / 1e6)
    assert sorted(e.name for e in cache.iterdir()) == used
    for bad in ("0", "-1", "nan"):
        assert cli(["leaderboard", "--out", str(tmp_path / "bad"), "--plot-cache", str(cache),
                    "--plot-cache-max-mb", bad, "--quiet"]) == 2
        assert "--plot-cache-max-mb must be a positive number of MB" in capsys.readouterr().err
    assert cli(["leaderboard", "--out", str(tmp_path / "bad"), "--plot-cache-max-mb", "5", "--no-plot-cache",
                "--quiet"]) == 2
    assert "contradict" in capsys.readouterr().err and not (tmp_path / "bad").exists()


def test_a_build_stopped_by_sigterm_leaves_nothing_behind(tmp_path):
    """`kill` (SIGTERM) stops the command as Ctrl-C does: exit 130, no site, no staging folder, no cache
    entry half written."""
    import signal
    import subprocess
    import sys
    import time

    out, cache = tmp_path / "site", tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-m", "factorbench.benchmark.cli", "leaderboard", "--out", str(out),
                             "--protocol", "square-lsbd-v1", "--jobs", "1", "--plot-cache", str(cache), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".site.*/square-lsbd-v1/plots")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".site.*"))
    entries = list(cache.iterdir()) if cache.exists() else []
    assert all(not e.name.startswith(".") and (e / "files.json").is_file() for e in entries)


def test_bad_output_folders_are_refused_before_anything_is_written(tmp_path, capsys):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(FactorbenchError, match="is a file"):
        build_site(a_file, PROTOCOLS[:1], plots=False)
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(FactorbenchError, match="other files in it"):
        build_site(other, PROTOCOLS[:1], plots=False, force=True)
    assert sorted(p.name for p in other.iterdir()) == ["keep.txt"]
    with pytest.raises(FactorbenchError, match="unknown protocol"):
        build_site(tmp_path / "new", ["no-such-protocol"], plots=False)
    assert not (tmp_path / "new").exists()
    out = build_site(tmp_path / "site", PROTOCOLS[:1], plots=False)
    before = (out / "index.html").read_text()
    with pytest.raises(FactorbenchError, match="--force"):
        build_site(out, PROTOCOLS[:1], plots=False)
    build_site(out, PROTOCOLS, plots=False, force=True)
    assert (out / MARKER).is_file() and (out / "index.html").read_text() != before
    # through the command line: a clear message and exit 2, no traceback
    assert cli(["leaderboard", "--out", str(other), "--quiet"]) == 2
    assert "other files in it" in capsys.readouterr().err
    assert not list(tmp_path.glob(".site.*")) and not list(tmp_path.glob(".new.*"))  # no staging left behind


def test_an_edited_result_stops_the_build_and_writes_nothing(tmp_path):
    folder = tmp_path / "reference" / "square-lsbd-v1"
    shutil.copytree(REFERENCE_DIR / "square-lsbd-v1", folder)
    data = json.loads((folder / "pca.json").read_text())
    data["metrics"]["d_lsbd"]["scalars"]["score"] = 0.0  # a better number, by hand
    (folder / "pca.json").write_text(json.dumps(data))
    with pytest.raises(FactorbenchError, match="was edited"):
        build_site(tmp_path / "site", ["square-lsbd-v1"], reference_dir=tmp_path / "reference", plots=False)
    assert not (tmp_path / "site").exists()


def _browser():
    """A headless chromium driven by selenium, or a skip naming what is missing."""
    webdriver = pytest.importorskip("selenium.webdriver")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("Debian's chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


def test_pages_load_in_a_headless_browser_without_errors(site, plotted_site):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser = _browser()
    try:
        browser.get((site / "index.html").as_uri())
        assert browser.title == "factorbench reference scores"
        links = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#protocols tbody a")]
        assert links == PROTOCOLS
        browser.find_element(By.LINK_TEXT, "square-lsbd-v1").click()
        assert browser.title == "square-lsbd-v1"
        table = scores_table("square-lsbd-v1")
        shown = [r.find_element(By.CSS_SELECTOR, "td").text for r in browser.find_elements(By.CSS_SELECTOR, "#scores tbody tr")]
        assert shown == [row[0] for row in table.rows]  # best first
        # the headline column (D_LSBD, lower is better) sorts ascending first, then descending (its name is a
        # link to the metric's definition: Enter on the header sorts, as a click beside the name does)
        from selenium.webdriver.common.keys import Keys

        header = browser.find_elements(By.CSS_SELECTOR, "#scores th")[3]
        header.send_keys(Keys.ENTER)
        assert header.get_attribute("aria-sort") == "ascending"
        header.send_keys(Keys.ENTER)
        resorted = [r.find_element(By.CSS_SELECTOR, "td").text for r in browser.find_elements(By.CSS_SELECTOR, "#scores tbody tr")]
        assert resorted == list(reversed(shown))
        # the kind filter shows the rows of one kind only
        Select(browser.find_element(By.ID, "kind-filter")).select_by_value("baseline")
        visible = [r.find_element(By.CSS_SELECTOR, "td").text for r in browser.find_elements(By.CSS_SELECTOR, "#scores tbody tr")
                   if r.is_displayed()]
        assert sorted(visible) == ["pca", "random"]
        browser.find_element(By.LINK_TEXT, "pca").click()
        assert browser.title.startswith("pca") and browser.find_elements(By.TAG_NAME, "img") == []  # no plots
        browser.get((plotted_site / "square-lsbd-v1" / "pca.html").as_uri())
        images = browser.find_elements(By.TAG_NAME, "img")
        assert len(images) == 4
        assert all(browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", img)
                   for img in images)
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == []
    finally:
        browser.quit()


def test_every_definition_link_names_a_heading_of_the_metrics_page():
    """The site's links into metrics.html (the score columns' and the experiment pages') land on a heading of
    METRICS.md: a renamed heading fails here, not as a dead link."""
    from factorbench.benchmark.leaderboard import _DEFINED_IN, _metrics_page

    anchors = set(re.findall(r'<h2 id="([^"]+)"', _metrics_page()))
    assert {"dci", "meta-evaluation-across-encoders"} <= anchors
    assert set(_DEFINED_IN.values()) - anchors == set()


def test_added_results_are_shown_beside_the_reference_rows_and_marked(tmp_path, capsys):
    from factorbench.benchmark.cli import main as cli

    mine = tmp_path / "mine.json"
    assert cli(["evaluate", "square-lsbd-v1", "--encoder", "ideal", "--model", "my-encoder", "--out", str(mine),
                "--quiet"]) == 0
    capsys.readouterr()
    assert cli(["leaderboard", "--out", str(tmp_path / "site"), "--protocol", "square-lsbd-v1", "--no-plots",
                "--quiet", "--add", str(mine)]) == 0
    rows = _table(tmp_path / "site" / "square-lsbd-v1" / "index.html", "scores")
    models = [r[0] for r in rows[1:]]
    assert "my-encoder (added)" in models and "pca" in models  # beside the shipped rows
    row = rows[1:][models.index("my-encoder (added)")]
    assert row[2].startswith("external") and "yours" in row[2]
    assert cli(["leaderboard", "--out", str(tmp_path / "other"), "--add", str(tmp_path / "none.json")]) == 2
    assert "--add" in capsys.readouterr().err


def test_wide_tables_fit_a_desktop_and_a_phone(tmp_path):
    """The dependent-factor table (21 score columns in three settings): a headline view that fits 1,400 px,
    grouped headers, short names linked to their definition, a model column that stays put when the table
    scrolls at 400 px (the page itself never scrolls sideways), every column one click away, and sorting
    from the keyboard that starts in the column's better direction."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    site = build_site(tmp_path / "site", ["square-dependent-v1"], plots=False)
    page = site / "square-dependent-v1" / "index.html"
    assert _table(page, "scores")[0][:4] == ["model", "runs", "kind", "independent"]  # the group row
    browser = _browser()
    try:
        browser.set_window_size(1400, 900)
        browser.get(page.as_uri())
        width = browser.execute_script("return document.getElementById('scores').offsetWidth")
        assert width <= 1400 - 40
        visible = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#scores th[data-col]") if th.is_displayed()]
        assert visible == ["suff ↑", "min ↑", "MIG ↑", "SAP ↑", "mod ↑", "IRS ↑", "acc ↑"]
        link = browser.find_element(By.LINK_TEXT, "suff")
        assert link.get_attribute("href").endswith("/metrics.html#minimality-and-sufficiency")
        browser.find_element(By.ID, "all-columns").click()
        shown = [th for th in browser.find_elements(By.CSS_SELECTOR, "#scores th[data-col]") if th.is_displayed()]
        assert len(shown) == 21 and [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#scores th.group")] \
            == ["independent", "single", "confounded"]
        # keyboard sorting, the better direction first: min is higher-better, so descending, then ascending
        header = shown[1]
        header.send_keys(Keys.ENTER)
        assert header.get_attribute("aria-sort") == "descending"
        values = [float(td.get_attribute("data-value")) for td in
                  browser.find_elements(By.CSS_SELECTOR, "#scores tbody tr td:nth-child(5)")]
        assert values == sorted(values, reverse=True)
        header.send_keys(Keys.SPACE)
        assert header.get_attribute("aria-sort") == "ascending"
        # a phone: the page does not scroll sideways, the table does, and the model column stays in view
        browser.set_window_size(400, 800)
        browser.get(page.as_uri())
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        left = browser.execute_script("return document.querySelector('#scores tbody td').getBoundingClientRect().left")
        browser.execute_script("document.querySelector('.table-wrap').scrollLeft = 400")
        assert browser.execute_script("return document.querySelector('.table-wrap').scrollLeft") > 0
        assert abs(browser.execute_script(
            "return document.querySelector('#scores tbody td').getBoundingClientRect().left") - left) < 1
        browser.get((site / "metrics.html").as_uri())
        assert browser.find_element(By.ID, "minimality-and-sufficiency").is_displayed()
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    finally:
        browser.quit()


EXPERIMENT_PROTOCOLS = ["dsprites-dci-v1", "dsprites-dependent-v2"]


@pytest.fixture(scope="module")
def experiments_site(tmp_path_factory):
    """The site of the two dSprites protocols the experiments read, without plots."""
    out = tmp_path_factory.mktemp("experiments") / "site"
    build_site(out, EXPERIMENT_PROTOCOLS, plots=False)
    return out


def test_experiment_pages_hold_the_experiments_numbers(experiments_site):
    """The index links the three experiments on these protocols; each page's numbers are those of the
    experiment's own function on the shipped results: the meta-evaluation's rho and intervals cell by cell,
    Do & Tran's settings and verdicts, the IRS rows and correlations."""
    from factorbench.benchmark.experiment_pages import META_N_BOOT
    from factorbench.benchmark.experiments import do_tran_comparison as dt
    from factorbench.benchmark.experiments.irs_comparison import irs_comparison
    from factorbench.benchmark.experiments.metric_meta_evaluation import (meta_evaluate_protocol, runs_of_plan,
                                                                           with_superseded)
    from factorbench.benchmark.results import reference_results, superseded_results

    index = (experiments_site / "index.html").read_text()
    links = re.findall(r'<a href="experiments/([^"]+)">', index)
    assert links == ["meta-dsprites-dependent-v2.html", "do-tran.html", "irs.html"]
    assert all((experiments_site / "experiments" / link).is_file() for link in links)

    plan = "almudevar-ortega-v1"
    results = runs_of_plan(reference_results("dsprites-dependent-v2"), plan)
    # each encoder joins the companion's run of its own weights, a superseded one where its job trained again
    meta = meta_evaluate_protocol("dsprites-dependent-v2", results,
                                  with_superseded(runs_of_plan(reference_results("dsprites-dci-v1"), plan),
                                                  superseded_results("dsprites-dci-v1"), results), n_boot=META_N_BOOT)
    page = experiments_site / "experiments" / "meta-dsprites-dependent-v2.html"
    assert f"{len(meta.encoders)} encoders" in page.read_text()
    for t, target in enumerate(meta.targets):
        rows = _table(page, f"rho-{target}")
        assert rows[0] == ["metric", *meta.settings]
        assert [r[0] for r in rows[1:]] == list(meta.metrics)
        for m in range(len(meta.metrics)):
            for s in range(len(meta.settings)):
                rho, low, high = meta.rho[s, m, t], meta.low[s, m, t], meta.high[s, m, t]
                assert rows[1 + m][1 + s] == ("n/a" if math.isnan(rho) else f"{rho:.2f}[{low:.2f}, {high:.2f}]")

    settings = dt.settings_of(reference_results(dt.PROTOCOL), dt.PLAN)
    page = experiments_site / "experiments" / "do-tran.html"
    from factorbench.benchmark.protocols import get_protocol

    # every version of the plan its runs were trained under (appending a protocol changes the plan's hash)
    plans = "; ".join(f"do-tran-v1 (plan {h})" for h in sorted({r.training["sweep"]["plan_hash"][:12] for runs in
                      runs_of_plan(reference_results(dt.PROTOCOL), dt.PLAN).values() for r in runs}))
    assert (f"<code>dSprites (Do &amp; Tran Figures 5-8); dsprites-dci-v1 (protocol "
            f"{get_protocol('dsprites-dci-v1').hash()[:12]}); {plans}; factorbench ") in page.read_text()
    rows = _table(page, "settings")
    assert [r[:3] for r in rows[1:]] == [[s.family, s.hyper_label, str(s.runs)] for s in settings]
    text = page.read_text()
    for claim in dt.check_claims(settings):
        assert re.search(rf'<li id="{claim.key}"><strong>{claim.key}</strong> \(Figure [^)]*\): '
                         rf'<span class="verdict">{claim.verdict}</span>', text)

    irs = irs_comparison(reference_results("dsprites-dci-v1"))
    rows = _table(experiments_site / "experiments" / "irs.html", "irs")
    assert [r[0] for r in rows[1:-1]] == list(irs.encoders)
    assert rows[1][1] == f"{irs.values[0, 0]:.3f}"
    assert rows[-1] == [f"Spearman rho with IRS ({len(irs.encoders)} encoders)", "1.00",
                        *(f"{r:.2f}" for r in irs.rho[1:])]


@pytest.fixture(scope="module")
def v3_results():
    """The shipped results of the three protocols Almudévar & Ortega's claims page reads."""
    from factorbench.benchmark.results import reference_results

    return {p: reference_results(p) for p in ("dsprites-dependent-v3", "shapes3d-dependent-v3",
                                              "mpi3d-toy-dependent-v3")}


def test_the_claims_page_gives_reproductions_grid(tmp_path, v3_results):
    """The page of Almudévar & Ortega's claims on every population scored in every setting holds, cell by
    cell, the verdicts and stabilities of REPRODUCTION.md's grid (the same results, the same bootstrap), each
    column linked to its population's page."""
    from factorbench.baselines.reproduction import _meta_claims_grid, _Sources
    from factorbench.benchmark.experiment_pages import _pages

    page = next(p for p in _pages() if p.file == "meta-claims.html")
    assert page.protocols == tuple(v3_results)
    html_page = tmp_path / "claims.html"
    html_page.write_text(page.render(v3_results, (), tmp_path, False))
    rows = _table(html_page, "claims")
    grid = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in _meta_claims_grid(_Sources(None)).splitlines() if line.startswith(("| 4 |", "| 5 |"))]
    assert len(rows) == 1 + len(grid) == 10
    assert [row[1:] for row in rows[1:]] == [row[1:] for row in grid]  # the claim, then each population's cell
    assert rows[0][2].startswith("dsprites-dependent-v3")
    text = html_page.read_text()
    for name in ("dsprites-dependent-v3", "shapes3d-dependent-v3", "dsprites-dependent-v3.do-tran-v1"):
        assert f'<a href="meta-{name}.html">' in text


def test_a_site_build_computes_each_population_once(monkeypatch, v3_results):
    """A population's page and the claims grid read one meta-evaluation, and one judgement of its claims, per
    build (the bootstrap and the resampled claims are the costly parts); outside a build nothing is kept, so
    pages rendered from other results are computed again."""
    import factorbench.benchmark.experiments.meta_evaluation_claims as mc
    import factorbench.benchmark.experiments.metric_meta_evaluation as mme
    from factorbench.benchmark.experiment_pages import experiment_pages

    calls = []
    real = mme.meta_evaluate_protocol
    monkeypatch.setattr(mme, "meta_evaluate_protocol",
                        lambda protocol, runs, *a, **kw: calls.append((protocol, sorted(runs))) or real(protocol, runs,
                                                                                                      *a, **kw))
    judged = []
    real_claims = mc.check_meta_claims
    # a population by its encoders and correlations: two datasets' populations can share every encoder name
    monkeypatch.setattr(mc, "check_meta_claims", lambda result, *a, **kw: judged.append(
        (result.encoders, result.rho.tobytes())) or real_claims(result, *a, **kw))
    results = v3_results
    files = [page.file for page, _ in experiment_pages(results)]
    assert "meta-claims.html" in files and "meta-dsprites-dependent-v3.do-tran-v1.html" in files
    assert len(calls) == len(set(map(str, calls))) and len(calls) >= 2  # the two dSprites populations, once each
    assert len(judged) == len(set(judged)) >= 2  # their claims, once each
    experiment_pages(results)
    assert len(calls) == 2 * len(set(map(str, calls)))


def test_a_meta_evaluation_page_under_three_encoders_counts_them(tmp_path):
    """A population still training (two of the plan's encoders collected) gets no correlations, and its
    page says how many encoders there are."""
    from factorbench.benchmark.experiment_pages import _meta_render
    from factorbench.benchmark.experiments.metric_meta_evaluation import runs_of_plan
    from factorbench.benchmark.results import reference_results

    runs = runs_of_plan(reference_results("dsprites-dependent-v3"), "almudevar-ortega-v1")
    two = dict(sorted(runs.items())[:2])
    page = _meta_render("dsprites-dependent-v3", "", "almudevar-ortega-v1")({"dsprites-dependent-v3": two}, (),
                                                                            tmp_path, False)
    assert "<p>2 encoders collected: too few for a rank correlation (it takes 3).</p>" in page
    assert "<table" not in page


def test_a_site_without_the_experiments_protocols_has_no_experiment_pages(site):
    assert not (site / "experiments").exists()
    assert "Experiments" not in (site / "index.html").read_text()


def test_your_encoder_joins_the_experiment_pages_marked(tmp_path):
    """An added result joins Do & Tran's table as a setting of its own and the IRS table, marked yours; a
    page's figures are drawn only with plots."""
    from factorbench.benchmark.experiment_pages import experiment_pages
    from factorbench.benchmark.results import reference_results

    shipped = reference_results("dsprites-dci-v1")
    one = shipped["beta-vae.beta-4"][0]
    mine = dataclasses.replace(one, training={}, model="mine")
    pages = dict((page.file, body) for page, body in experiment_pages({"dsprites-dci-v1": {**shipped, "mine": [mine]}},
                                                                      yours=["mine"], folder=tmp_path, plots=True))
    assert list(pages) == ["do-tran.html", "irs.html"]  # the meta-evaluation needs dsprites-dependent-v2 too
    assert '<td class="name" data-value="yours">yours <span class="added">yours</span></td>' in pages["do-tran.html"]
    assert '<td class="name" data-value="mine/run0">mine/run0 <span class="added">yours</span></td>' in pages["irs.html"]
    assert sorted(p.name for p in (tmp_path / "do-tran").iterdir()) == ["fig5.png", "fig6.png", "fig7.png", "fig8.png"]
    without = experiment_pages({"dsprites-dci-v1": shipped}, folder=tmp_path / "none", plots=False)
    assert "yours" not in without[0][1] and not (tmp_path / "none").exists()


def test_experiment_pages_load_in_a_headless_browser_and_sort(experiments_site):
    from selenium.webdriver.common.by import By

    browser = _browser()
    try:
        browser.get((experiments_site / "index.html").as_uri())
        browser.find_element(By.LINK_TEXT, "dSprites (Do & Tran Figures 5-8)").click()
        assert browser.title == "dSprites (Do & Tran Figures 5-8)"
        header = browser.find_elements(By.CSS_SELECTOR, "#settings th")[3]  # JEMMIG, lower is better
        header.click()
        assert header.get_attribute("aria-sort") == "ascending"
        jemmig = [float(r.find_elements(By.CSS_SELECTOR, "td")[3].text.split(" ")[0])
                  for r in browser.find_elements(By.CSS_SELECTOR, "#settings tbody tr")]
        assert jemmig == sorted(jemmig)
        for page in ("meta-dsprites-dependent-v2.html", "irs.html"):
            browser.get((experiments_site / "experiments" / page).as_uri())
            assert browser.find_elements(By.CSS_SELECTOR, "table tbody tr")
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == []
    finally:
        browser.quit()


def test_protocol_given_twice_keeps_both(tmp_path, capsys):
    assert cli(["leaderboard", "--out", str(tmp_path / "site"), "--protocol", "square-lsbd-v1", "--protocol",
                "arrow-lsbd-v1", "--no-plots", "--quiet"]) == 0
    assert (tmp_path / "site" / "square-lsbd-v1").is_dir() and (tmp_path / "site" / "arrow-lsbd-v1").is_dir()
