"""Run time and scores of factorbench's classic metrics next to the ``disent`` library's (v0.8.0).

Both libraries score the same seeded synthetic representation: 5 grid factors with 10 classes each
(a full grid of 100,000 points), and a 10-dimensional code that is a fixed, noisy, partly entangled
function of the factors (two codes are pure noise, two are non-linear, several mix two factors; the
noise is drawn once per grid point, like a deterministic encoder of noisy images). The array metrics
see 10,000 grid points drawn uniformly (plus 5,000 more as DCI's test split); the intervention
metrics sample the grid itself: factorbench through :class:`GridSampler` over the grid's codes,
disent through a minimal ground-truth dataset whose observations are grid indices and whose
representation function looks the codes up.

disent's public metrics sample their own data, so the array-level functions behind them are called
with exactly these codes: ``_compute_dci`` (gradient-boosted classifiers on classes,
importance-weighted completeness), ``_compute_mig``, ``_compute_sap`` (continuous and discrete) and
``metric_factor_vae`` on the grid dataset. disent has no BetaVAE score, modularity, explicitness or
IRS; its other metrics (flatness, factored components, unsupervised) have no factorbench counterpart.

Each measurement is the median of ``--repeats`` runs, except that anything taking over 10 s on its
first run is run once (disent's DCI and the gbt DCI take minutes). The second table times the whole
classic set of factorbench (the default lasso and forest DCI, MIG, SAP, modularity, explicitness,
BetaVAE, FactorVAE, IRS), with one timed pass over all of them; the target is under 60 s on a
2-core machine. The gbt DCI (disentanglement_lib's variant) is reported separately.

Setup (a separate virtualenv, so that disent's dependencies stay out of the project's)::

    python3 -m venv .venv-disent
    .venv-disent/bin/pip install torch==2.13.0            # the CPU wheel of the local index
    .venv-disent/bin/pip install --no-deps disent==0.8.0
    .venv-disent/bin/pip install numpy scipy scikit-learn h5py tqdm pillow pytest hypothesis
    .venv-disent/bin/pip install --no-deps trimesh        # factorbench.generators imports it
    .venv-disent/bin/pip install --no-deps -e .           # factorbench, from the repository root

Nothing else is installed: ``disent.metrics/__init__`` pulls in disent's training frameworks
(``lightning``) and ``disent.dataset`` imports ``torchvision``, whose PyPI wheels are built against
a CUDA torch and fail to load against the CPU one ("operator torchvision::nms does not exist").
:func:`load_disent` therefore imports only disent's metric modules (without running
``disent/metrics/__init__.py``), and when ``torchvision`` cannot be imported it puts a stand-in for
the three names that disent's dataset modules touch at import time (``torchvision.datasets.ImageFolder``
and the ``torchvision.transforms.functional`` module) into ``sys.modules`` for the duration of the
import only. No metric code path uses them.

Run from the repository root::

    .venv-disent/bin/python tests/perf/bench_metrics.py               # full comparison (~10 min)
    .venv-disent/bin/python tests/perf/bench_metrics.py --quick       # small inputs, a smoke run
    python tests/perf/bench_metrics.py --skip-disent                      # factorbench only (any venv)
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import statistics
import sys
import time
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from factorbench.benchmark.metrics.dci import dci
from factorbench.benchmark.metrics.intervention import beta_vae_score, factor_vae_score
from factorbench.benchmark.metrics.irs import irs
from factorbench.benchmark.metrics.mig import mig
from factorbench.benchmark.metrics.modularity import explicitness, modularity
from factorbench.benchmark.metrics.samplers import GridSampler
from factorbench.benchmark.metrics.sap import sap, split_indices
from factorbench.generators.factors import Factor

# --------------------------------------------------------------------------- synthetic representation

#: Classes per factor (5 factors); the grid holds every combination once, in C order.
GRID_SIZES: tuple[int, ...] = (10, 10, 10, 10, 10)
#: Linear part of the code: rows are factors (scaled to [0, 1]), columns are the 10 code dimensions.
#: c0 = v0 + 0.2 v1, c1 = v1, c2 = tanh(3 (v2 - 0.5)), c3 = v3 + 0.6 v4, c4 = 0.5 v0 + 0.3 v4,
#: c5 = v2 - 0.3 v3, c6 = 0.3 v1 (a weak duplicate), c7 = cos(pi v2), c8 and c9 pure noise. Factor v4
#: has no code of its own (FactorVAE about 0.90, MIG about 0.18).
MIXING = np.array([
    # c0   c1   c2   c3   c4   c5    c6   c7   c8   c9
    [1.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0],   # v0
    [0.2, 1.0, 0.0, 0.0, 0.0, 0.0, 0.3, 0.0, 0.0, 0.0],   # v1
    [0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0],   # v2
    [0.0, 0.0, 0.0, 1.0, 0.0, -0.3, 0.0, 0.0, 0.0, 0.0],  # v3
    [0.0, 0.0, 0.0, 0.6, 0.3, 0.0, 0.0, 0.0, 0.0, 0.0],   # v4
])
#: Standard deviation of the Gaussian noise added to each code dimension.
NOISE_STD = np.array([0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 1.0, 1.0])
#: Element-wise non-linearities applied to the linear part, by code dimension.
NONLINEAR: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    2: lambda x: np.tanh(3.0 * (x - 0.5)),
    7: lambda x: np.cos(np.pi * x),
}


@dataclass(frozen=True)
class Inputs:
    """The shared inputs: grid factors, the code of every grid point, and two i.i.d. draws of grid
    points (``train``: the array metrics' samples; ``test``: DCI's test split)."""

    factors: tuple[Factor, ...]
    grid_codes: np.ndarray      # (prod GRID_SIZES, D), row = C-order grid index
    classes_train: np.ndarray   # (n_train, K) int64
    codes_train: np.ndarray     # (n_train, D)
    classes_test: np.ndarray    # (n_test, K) int64
    codes_test: np.ndarray      # (n_test, D)

    @property
    def values_train(self) -> np.ndarray:
        """Factor values of the training draw (the grid values are the classes 0..n_k-1)."""
        return self.classes_train.astype(np.float64)

    @property
    def values_test(self) -> np.ndarray:
        return self.classes_test.astype(np.float64)


def grid_factors(sizes: tuple[int, ...] = GRID_SIZES) -> tuple[Factor, ...]:
    """Ordinal grid factors ``v0..v{K-1}`` whose values are their classes 0..n_k-1."""
    return tuple(Factor(f"v{j}", "continuous", values=tuple(float(v) for v in range(n))) for j, n in enumerate(sizes))


def grid_classes(sizes: tuple[int, ...] = GRID_SIZES) -> np.ndarray:
    """Classes (prod sizes, K) of every grid point in C order (the first factor varies slowest)."""
    return np.stack(np.unravel_index(np.arange(math.prod(sizes)), sizes), axis=1).astype(np.int64)


def encode(classes: np.ndarray, noise: np.ndarray, sizes: tuple[int, ...] = GRID_SIZES) -> np.ndarray:
    """Code (n, D) of factor classes (n, K): scaled factors times :data:`MIXING`, the non-linearities
    of :data:`NONLINEAR`, plus ``noise`` (n, D) scaled by :data:`NOISE_STD`."""
    scaled = classes / (np.asarray(sizes, dtype=np.float64) - 1.0)
    z = scaled @ MIXING
    for d, fn in NONLINEAR.items():
        z[:, d] = fn(z[:, d])
    return z + noise * NOISE_STD


def make_inputs(n_train: int = 10_000, n_test: int = 5_000, seed: int = 0) -> Inputs:
    """Seeded inputs: codes on the whole grid (noise drawn once per grid point) and ``n_train`` +
    ``n_test`` grid points drawn uniformly with replacement."""
    rng = np.random.default_rng(seed)
    classes = grid_classes()
    codes = encode(classes, rng.standard_normal((len(classes), MIXING.shape[1])))
    rows = rng.integers(len(classes), size=n_train + n_test)
    tr, te = rows[:n_train], rows[n_train:]
    return Inputs(grid_factors(), codes, classes[tr], codes[tr], classes[te], codes[te])


def identity_inputs(n_train: int, n_test: int, seed: int = 0) -> Inputs:
    """Inputs whose code is the factor classes themselves (a perfectly disentangled code)."""
    rng = np.random.default_rng(seed)
    classes = grid_classes()
    codes = classes.astype(np.float64)
    rows = rng.integers(len(classes), size=n_train + n_test)
    tr, te = rows[:n_train], rows[n_train:]
    return Inputs(grid_factors(), codes, classes[tr], codes[tr], classes[te], codes[te])


# --------------------------------------------------------------------------- disent


_TORCHVISION_NAMES = ("torchvision", "torchvision.datasets", "torchvision.transforms",
                      "torchvision.transforms.functional")
_DISENT_METRIC_MODULES = ("_dci", "_mig", "_sap", "_factor_vae")


def _torchvision_stand_in() -> dict[str, types.ModuleType]:
    """Empty modules for the torchvision names disent's dataset package touches when it is imported."""
    mods = {name: types.ModuleType(name) for name in _TORCHVISION_NAMES}

    class ImageFolder:  # referenced by disent's imagenet-backed dataset at import time only
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("torchvision is not available in this environment")

    mods["torchvision.datasets"].ImageFolder = ImageFolder
    mods["torchvision"].datasets = mods["torchvision.datasets"]
    mods["torchvision"].transforms = mods["torchvision.transforms"]
    mods["torchvision.transforms"].functional = mods["torchvision.transforms.functional"]
    return mods


def _torchvision_loads() -> bool:
    try:
        importlib.import_module("torchvision")
        return True
    except Exception:  # noqa: BLE001 - a wheel built for another torch raises RuntimeError, not ImportError
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        return False


def load_disent() -> types.SimpleNamespace:
    """disent's metric modules and ground-truth dataset classes, imported without running
    ``disent/metrics/__init__.py`` (which needs ``lightning``) and, when torchvision cannot be
    loaded, with a stand-in for it during the import. Raises ImportError when disent is missing."""
    disent = importlib.import_module("disent")
    stand_in = {} if _torchvision_loads() else _torchvision_stand_in()
    sys.modules.update(stand_in)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "numba is not installed" from disent.util.jit
            if "disent.metrics" not in sys.modules:
                pkg = types.ModuleType("disent.metrics")
                pkg.__path__ = [os.path.join(os.path.dirname(disent.__file__), "metrics")]
                sys.modules["disent.metrics"] = pkg
            mods = {m: importlib.import_module(f"disent.metrics.{m}") for m in _DISENT_METRIC_MODULES}
            dataset = importlib.import_module("disent.dataset")
            data = importlib.import_module("disent.dataset.data")
    finally:
        for name, mod in stand_in.items():
            if sys.modules.get(name) is mod:
                del sys.modules[name]
    version = getattr(disent, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version
        version = dist_version("disent")
    return types.SimpleNamespace(version=version, dci=mods["_dci"], mig=mods["_mig"], sap=mods["_sap"],
                                 factor_vae=mods["_factor_vae"], DisentDataset=dataset.DisentDataset,
                                 GroundTruthData=data.GroundTruthData)


def disent_grid_dataset(ds: types.SimpleNamespace, sizes: tuple[int, ...] = GRID_SIZES) -> Any:
    """A disent ``DisentDataset`` over the grid ``sizes`` whose observation of a grid point is its
    C-order index (disent's ``pos_to_idx`` is ``np.ravel_multi_index``, the same order)."""
    names = tuple(f"v{j}" for j in range(len(sizes)))

    class GridIndexData(ds.GroundTruthData):
        factor_names = property(lambda self: names)
        factor_sizes = property(lambda self: tuple(sizes))
        img_shape = property(lambda self: (1, 1, 1))

        def _get_observation(self, idx: int) -> int:
            return int(idx)

    return ds.DisentDataset(GridIndexData())


def lookup(grid_codes: np.ndarray) -> Callable[[Any], np.ndarray]:
    """disent representation function: a batch of grid indices (a tensor) -> their codes."""
    return lambda obs: grid_codes[np.asarray(obs, dtype=np.int64)]


def disent_dci(ds: types.SimpleNamespace, inp: Inputs) -> dict[str, float]:
    return ds.dci._compute_dci(inp.codes_train.T, inp.classes_train.T, inp.codes_test.T, inp.classes_test.T)


def disent_mig(ds: types.SimpleNamespace, inp: Inputs) -> dict[str, float]:
    return ds.mig._compute_mig(inp.codes_train.T, inp.classes_train.T)


def disent_sap_continuous(ds: types.SimpleNamespace, inp: Inputs) -> dict[str, float]:
    # the continuous mode uses only the first pair of arrays: all samples, as factorbench does
    y = inp.values_train.T
    return ds.sap._compute_sap(inp.codes_train.T, y, inp.codes_train.T, y, True)


def disent_sap_discrete(ds: types.SimpleNamespace, inp: Inputs, test_fraction: float = 0.5,
                        seed: int = 0) -> dict[str, float]:
    """disent's discrete SAP on factorbench's seeded train/test split (:func:`split_indices`)."""
    tr, te = split_indices(len(inp.codes_train), test_fraction, seed)
    z, c = inp.codes_train, inp.classes_train
    return ds.sap._compute_sap(z[tr].T, c[tr].T, z[te].T, c[te].T, False)


def disent_factor_vae(ds: types.SimpleNamespace, inp: Inputs, n_train: int = 10_000, n_eval: int = 5_000,
                      n_variance: int = 10_000, seed: int = 0) -> dict[str, float]:
    """disent's FactorVAE score on the grid dataset (its sampling uses numpy's global generator)."""
    np.random.seed(seed)
    return ds.factor_vae.metric_factor_vae(disent_grid_dataset(ds), lookup(inp.grid_codes), batch_size=64,
                                           num_train=n_train, num_eval=n_eval, num_variance_estimate=n_variance)


# --------------------------------------------------------------------------- factorbench


def fb_dci_gbt(inp: Inputs, seed: int = 0) -> Any:
    """factorbench's disentanglement_lib-style DCI: gbt on classes, importance-weighted completeness."""
    return dci(inp.codes_train, inp.values_train, inp.codes_test, inp.values_test, regressor="gbt",
               completeness="weighted", classes_train=inp.classes_train, classes_test=inp.classes_test, seed=seed)


def fb_factor_vae(inp: Inputs, n_train: int = 10_000, n_eval: int = 5_000, n_variance: int = 10_000,
                  seed: int = 0) -> Any:
    return factor_vae_score(GridSampler(inp.factors, inp.grid_codes), n_train=n_train, n_eval=n_eval,
                            n_variance=n_variance, seed=seed)


def fb_classic(inp: Inputs, n_train: int = 10_000, n_eval: int = 5_000) -> dict[str, Callable[[], Any]]:
    """factorbench's classic metrics on ``inp``, by name (each a zero-argument call)."""
    z, y, c = inp.codes_train, inp.values_train, inp.classes_train
    sampler = GridSampler(inp.factors, inp.grid_codes)
    return {
        "dci (lasso)": lambda: dci(z, y, inp.codes_test, inp.values_test, regressor="lasso"),
        "dci (forest)": lambda: dci(z, y, inp.codes_test, inp.values_test, regressor="forest"),
        "mig": lambda: mig(z, y, classes=c),
        "sap (continuous)": lambda: sap(z, y, classes=c),
        "modularity": lambda: modularity(z, y, classes=c),
        "explicitness": lambda: explicitness(z, y, classes=c),
        "beta_vae_score": lambda: beta_vae_score(sampler, n_train=n_train, n_eval=n_eval),
        "factor_vae_score": lambda: factor_vae_score(sampler, n_train=n_train, n_eval=n_eval, n_variance=n_train),
        "irs": lambda: irs(z, y, classes=c),
    }


def headline(result: Any) -> str:
    """The result's headline numbers, e.g. ``D=0.61 C=0.55 I=0.43``."""
    if hasattr(result, "disentanglement"):
        return f"D={result.disentanglement:.3f} C={result.completeness:.3f} I={result.informativeness:.3f}"
    return f"{result.score:.4f}"


# --------------------------------------------------------------------------- timing and report


def timed(fn: Callable[[], Any], repeats: int, once_above: float = 10.0) -> tuple[float, Any]:
    """(median seconds, result of the last run) of ``fn``; a first run over ``once_above`` s is not repeated."""
    times, out = [], None
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
        if times[0] > once_above:
            break
    return statistics.median(times), out


@dataclass(frozen=True)
class Row:
    metric: str
    fb_s: float | None
    disent_s: float | None
    fb_score: float | None
    disent_score: float | None
    note: str

    def cells(self) -> list[str]:
        def num(x: float | None, fmt: str) -> str:
            return "" if x is None else format(x, fmt)

        ratio = "" if not (self.fb_s and self.disent_s) else f"{self.disent_s / self.fb_s:.1f}x"
        diff = "" if self.fb_score is None or self.disent_score is None else f"{self.fb_score - self.disent_score:+.2e}"
        return [self.metric, num(self.fb_s, ".3f"), num(self.disent_s, ".3f"), ratio, num(self.fb_score, ".4f"),
                num(self.disent_score, ".4f"), diff, self.note]


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.ljust(w) if i in (0, len(cells) - 1) else c.rjust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    print(line(header))
    print(line(["-" * w for w in widths]))
    for r in rows:
        print(line(r))
    sys.stdout.flush()


NOTES = {
    "dci": "same GradientBoostingClassifier (sklearn defaults) per factor on classes and "
           "importance-weighted completeness (factorbench: regressor='gbt', completeness='weighted'); "
           "D and C differ only through tree tie-breaking (factorbench seeds random_state, disent does "
           "not) and disent's +1e-11 on R inside the entropies; I is test accuracy on both sides",
    "dci-default": "factorbench's default DCI (lasso, alpha chosen on a validation split, NRMSE) against "
                   "disent's only DCI: different estimators, so only the times compare",
    "mig": "same estimator: 20 equal-width bins per code over its own min..max, plug-in MI in nats, "
           "gap of the top two over H(factor)",
    "sap-c": "same score matrix: squared Pearson correlation of each code with each factor on all samples",
    "sap-d": "LinearSVC(C=0.01, balanced) on one code per (code, factor), both on factorbench's seeded split; "
             "one-vs-rest on a single input caps even a perfect code near 0.2",
    "fvae": "independent random draws on each side (factorbench: seeded default_rng streams, disent: the "
            "global numpy generator), so scores agree within sampling error; disent prunes nothing "
            "(threshold 0, factorbench 0.05: here every code has std > 0.05) and reports num_active_dims = D "
            "whatever is pruned; a constant code (std 0) gives 0/0 variances in disent",
}


def compare(inp: Inputs, ds: types.SimpleNamespace, repeats: int, fvae_points: tuple[int, int, int],
            skip_gbt: bool = False) -> list[Row]:
    """Time and score every metric both libraries implement on ``inp``."""
    rows: list[Row] = []
    if not skip_gbt:
        print(f"[disent {ds.version}] timing DCI (gbt) on both sides: each runs once if it takes over 10 s ...",
              flush=True)
        t_fb, r_fb = timed(lambda: fb_dci_gbt(inp), repeats)
        t_ds, r_ds = timed(lambda: disent_dci(ds, inp), repeats)
        rows.append(Row("dci gbt: disentanglement", t_fb, t_ds, r_fb.disentanglement,
                        float(r_ds["dci.disentanglement"]), "[dci]"))
        rows.append(Row("dci gbt: completeness", None, None, r_fb.completeness, float(r_ds["dci.completeness"]),
                        "[dci]"))
        rows.append(Row("dci gbt: informativeness", None, None, r_fb.informativeness,
                        float(r_ds["dci.informativeness_test"]), "[dci] test accuracy"))
        t_lasso, r_lasso = timed(fb_classic(inp)["dci (lasso)"], repeats)
        rows.append(Row("dci lasso (default) vs disent", t_lasso, t_ds, None, None, "[dci-default]"))

    print("timing MIG, SAP ...", flush=True)
    for name, ours, theirs, key, note in (
        ("mig", lambda: mig(inp.codes_train, inp.values_train, classes=inp.classes_train),
         lambda: disent_mig(ds, inp), "mig.discrete_score", "[mig]"),
        ("sap continuous", lambda: sap(inp.codes_train, inp.values_train, classes=inp.classes_train),
         lambda: disent_sap_continuous(ds, inp), "sap.score", "[sap-c]"),
        ("sap discrete", lambda: sap(inp.codes_train, inp.values_train, classes=inp.classes_train, mode="discrete"),
         lambda: disent_sap_discrete(ds, inp), "sap.score", "[sap-d]"),
    ):
        t_fb, r_fb = timed(ours, repeats)
        t_ds, r_ds = timed(theirs, repeats)
        rows.append(Row(name, t_fb, t_ds, r_fb.score, float(r_ds[key]), note))

    print("timing FactorVAE ...", flush=True)
    n_train, n_eval, n_var = fvae_points
    t_fb, r_fb = timed(lambda: fb_factor_vae(inp, n_train, n_eval, n_var), repeats)
    t_ds, r_ds = timed(lambda: disent_factor_vae(ds, inp, n_train, n_eval, n_var), repeats)
    rows.append(Row("factor_vae_score", t_fb, t_ds, r_fb.score, float(r_ds["factor_vae.eval_accuracy"]),
                    f"[fvae] active dims: factorbench {r_fb.num_active_dims}, "
                    f"disent reports {r_ds['factor_vae.num_active_dims']}"))
    return rows


def full_set(inp: Inputs, repeats: int, n_points: tuple[int, int]) -> tuple[list[list[str]], float, float]:
    """Per-metric median times of factorbench's classic set, their sum, and one timed pass over all."""
    calls = fb_classic(inp, *n_points)
    rows, total = [], 0.0
    for name, fn in calls.items():
        seconds, result = timed(fn, repeats)
        total += seconds
        rows.append([name, f"{seconds:.3f}", headline(result)])
        print(f"  {name}: {seconds:.3f} s", file=sys.stderr, flush=True)
    start = time.perf_counter()
    for fn in calls.values():
        fn()
    one_pass = time.perf_counter() - start
    return rows, total, one_pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs (1,000 samples), a smoke run")
    parser.add_argument("--skip-disent", action="store_true", help="time factorbench only")
    parser.add_argument("--skip-gbt", action="store_true",
                        help="leave out the gradient-boosting DCI on both sides (minutes each)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (median; default 3)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    n_train, n_test = (1_000, 500) if args.quick else (10_000, 5_000)
    fvae_points = (n_train, n_test, n_train)
    inp = make_inputs(n_train, n_test, args.seed)
    print(f"inputs: {n_train} samples (+{n_test} DCI test), {inp.codes_train.shape[1]} codes, "
          f"{len(GRID_SIZES)} factors x {GRID_SIZES[0]} classes; grid of {len(inp.grid_codes)} points; "
          f"seed {args.seed}; repeats {args.repeats}; numpy {np.__version__}")

    status = 0
    if not args.skip_disent:
        try:
            ds = load_disent()
        except ImportError as err:
            print(f"disent cannot be imported ({err}); run with the disent virtualenv (see the docstring) "
                  "or pass --skip-disent", file=sys.stderr)
            return 2
        rows = compare(inp, ds, args.repeats, fvae_points, args.skip_gbt)
        print()
        print(f"factorbench vs disent {ds.version} (seconds; speed-up = disent / factorbench; diff = "
              "factorbench - disent)")
        print_table(["metric", "fb s", "disent s", "speed-up", "fb score", "disent score", "diff", "note"],
                    [r.cells() for r in rows])
        print()
        for key, text in NOTES.items():
            print(f"[{key}] {text}")
        print()

    print("factorbench classic set (median seconds each; scores are the headline numbers)")
    rows, total, one_pass = full_set(inp, args.repeats, (n_train, n_test))
    print_table(["metric", "seconds", "score"], rows)
    print(f"sum of medians: {total:.2f} s; one pass over all {len(rows)}: {one_pass:.2f} s "
          f"(target < 60 s at 10,000 samples: {'met' if one_pass < 60 else 'NOT met'})")
    if args.skip_disent and not args.skip_gbt:
        seconds, r = timed(lambda: fb_dci_gbt(inp), args.repeats)
        print(f"dci (gbt, weighted completeness; reported separately): {seconds:.2f} s, {headline(r)}")
    if not args.quick and one_pass >= 60:
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
