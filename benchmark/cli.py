"""The ``factorbench`` command: one subcommand per job, registered in :data:`COMMANDS`."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable

from factorbench import generators
from factorbench.generators.errors import FactorbenchError
from factorbench.generators.interrupts import caused_by_interrupt, stopping_on_signals
from factorbench.generators.fileformat import package_version
from factorbench.generators.params import parse_param_assignments
from factorbench.generators.presets import applicable_presets, default_partition, resolve_split
from factorbench.generators.writer import add_split

from .dataset import load
from .dependence import factor_dependence
from .show import show
from .verify import verify

Configure = Callable[[argparse.ArgumentParser], None]
#: name -> (help, configure): ``configure`` adds the arguments and sets ``run`` (args -> exit status).
COMMANDS: dict[str, tuple[str, Configure]] = {}


def command(name: str, help: str) -> Callable[[Configure], Configure]:
    def register(configure: Configure) -> Configure:
        COMMANDS[name] = (help, configure)
        return configure
    return register


def _print_generator_info(name: str, params: dict[str, str]) -> None:
    gen = generators.get(name, params)
    info = gen.info()
    print(f"{info['name']} (version {info['version']})")
    print(f"  {info['description']}")
    print(f"  images: {info['n']} x {' x '.join(map(str, info['image_shape']))} uint8"
          f"{'  (full grid)' if info['grid'] else '  (i.i.d. samples, default size)'}")
    print("  factors:")
    for f in gen.factors():
        print(f"    {f.describe()}")
    print("  parameters (set with --param key=value):")
    for key, value in info["params"].items() or [("(none)", "")]:
        print(f"    {key} = {value}")
    print("  splits written into every file:")
    for s in info["splits"]:
        print(f"    {json.dumps(s)}")
    print("  split presets (add one to a file with `factorbench split FILE --spec NAME`):")
    for name, desc in applicable_presets(gen.factors()).items():
        print(f"    {name:<18} {desc}")
    print("  citation:")
    print(textwrap.indent(info["citation"], "    "))


def _print_file_info(path: str) -> None:
    with load(path) as ds:
        info = ds.info
        spec, man = ds.spec, ds.manifest
        print(f"{path}: {spec.generator} version {spec.version}, n = {len(ds)}, images {list(spec.image_shape)}")
        print(f"  seed {spec.seed}, params {json.dumps(spec.params)}")
        print(f"  spec hash {info['spec_hash']}")
        print(f"  made by factorbench {man.get('package_version')} with {man.get('renderer')}")
        print("  factors:")
        for f in spec.factors:
            print(f"    {f.describe()}")
        print("  splits (size; pairwise dependence of the factors on the split: Pearson r, normalised MI adjusted for chance):")
        for name, size in info["splits"].items():
            print(f"    {name:<24} {size}")
            idx = ds.split_indices(name)
            if len(idx) > 1:
                for a, b, r, nmi in factor_dependence(ds.factors[idx], spec.factors).pairs():
                    print(f"      {a} ~ {b}: r = {r:+.3f}, AMI = {nmi:+.3f}")


@command("list", "list the datasets with one-line descriptions")
def _list(p: argparse.ArgumentParser) -> None:
    def run(args: argparse.Namespace) -> int:
        for name, desc in generators.list_datasets().items():
            print(f"{name:<12} {desc}")
        return 0
    p.set_defaults(run=run)


@command("info", "describe a dataset (factors, size, parameters, citation) or a dataset file")
def _info(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="NAME_OR_FILE", help="a dataset name from `factorbench list`, or a file")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="show the dataset with these parameters")

    def run(args: argparse.Namespace) -> int:
        target = Path(args.target)
        if args.target not in generators.list_datasets() and (target.exists() or target.suffix or "/" in args.target):
            _print_file_info(args.target)  # a path (says "no such file" when it is missing)
        else:
            _print_generator_info(args.target, parse_param_assignments(args.param))
        return 0
    p.set_defaults(run=run)


@command("generate", "render a dataset into an HDF5 file (resumes an interrupted run)")
def _generate(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="dataset name (see `factorbench list`)")
    p.add_argument("--out", metavar="FILE", help="output HDF5 file (default NAME.h5, with the parameters given, "
                   "e.g. dsprites-variant-color.h5)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--n", type=int, default=None, help="number of samples (grid datasets: the full grid)")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="generator parameter (repeatable)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.add_argument("--shard", metavar="I/N", help="write only shard I of N (0-based) to FILE.shard-I-of-N; "
                   "join the shards with `factorbench merge FILE`")
    p.add_argument("--workers", type=int, default=1, metavar="N", help="render in N processes (shards joined "
                   "into FILE, the same data as one process; default 1)")
    p.add_argument("--batch-size", type=int, default=generators.writer.DEFAULT_BATCH_SIZE,
                   help="images rendered per batch (memory use is proportional to it)")
    p.add_argument("--backend", choices=("auto", "gl", "cpu", "pyrender"), default=None,
                   help="renderer of the 3D datasets (default auto: gl when a GL context can be made, else cpu)")
    p.add_argument("--source", metavar="PATH", default=None,
                   help="local data that datasets built from outside files read (e.g. modelnet40, coil100)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    def run(args: argparse.Namespace) -> int:
        params = parse_param_assignments(args.param)
        shard = generators.Shard.parse(args.shard) if args.shard else None
        out = args.out or default_output_name(args.name, params)
        written = generators.generate(args.name, out, params=params, seed=args.seed, n=args.n,
                                      force=args.force, shard=shard, batch_size=args.batch_size,
                                      progress=not args.quiet, workers=args.workers, backend=args.backend,
                                      source=args.source)
        print(f"wrote {written}")
        return 0
    p.set_defaults(run=run)


def default_output_name(name: str, params: dict[str, str]) -> str:
    """``NAME.h5``, or ``NAME-KEY-VALUE[-...].h5`` with the parameters given (characters other than letters,
    digits, dots and minus signs become underscores)."""
    import re

    parts = [name] + [f"{k}-{v}" for k, v in sorted(params.items())]
    return re.sub(r"[^A-Za-z0-9.\-]", "_", "-".join(parts)) + ".h5"


@command("merge", "join shard files written with `generate --shard` into one dataset file")
def _merge(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", metavar="FILE", help="the dataset file to write (shards are FILE.shard-I-of-N)")
    p.add_argument("shards", nargs="*", metavar="SHARD", help="shard files (default: FILE.shard-*-of-*)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    def run(args: argparse.Namespace) -> int:
        written = generators.merge_shards(args.out, args.shards or None, force=args.force, progress=not args.quiet)
        print(f"wrote {written}")
        return 0
    p.set_defaults(run=run)


@command("split", "add a split (a preset name or a JSON split spec) to a dataset file, without rewriting it")
def _split(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE")
    p.add_argument("--spec", required=True, metavar="NAME_OR_JSON",
                   help="a preset (see `factorbench info DATASET`) or a JSON split spec")
    p.add_argument("--force", action="store_true", help="replace splits of the same name")

    def run(args: argparse.Namespace) -> int:
        with load(args.file) as ds:
            partition = default_partition(ds.spec.splits, ds.spec.seed)
            split = resolve_split(args.spec, ds.spec.factors, partition)
        sizes = add_split(args.file, split, force=args.force)
        for name, size in sizes.items():
            print(f"added split {name!r} ({size} samples) to {args.file}")
        return 0
    p.set_defaults(run=run)


@command("verify", "recompute every content hash of a dataset file and report what does not match")
def _verify(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="print the report as JSON")

    def run(args: argparse.Namespace) -> int:
        path = Path(args.file)
        if path.is_dir():  # a mistake in the command, not a damaged file (exit 2, not 1)
            raise FactorbenchError(f"{path} is a folder; give a dataset file (.h5) to verify")
        if not path.exists():
            raise FactorbenchError(f"{path}: no such file; give a dataset file (.h5) to verify")
        report = verify(args.file)
        print(json.dumps(report.to_dict(), indent=2) if args.json else report.summary())
        return 0 if report.ok else 1
    p.set_defaults(run=run)


@command("show", "write a PNG of samples along each factor, labelled with factor values")
def _show(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE")
    p.add_argument("--out", required=True, metavar="PNG")
    p.add_argument("--per-factor", type=int, default=8, help="images per factor (default 8)")
    p.add_argument("--force", action="store_true", help="overwrite PNG if it exists")

    def run(args: argparse.Namespace) -> int:
        print(f"wrote {show(args.file, args.out, per_factor=args.per_factor, force=args.force)}")
        return 0
    p.set_defaults(run=run)


@command("protocols", "list the evaluation protocols, or print one protocol's full definition")
def _protocols(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="a protocol name (default: list them all)")
    p.add_argument("--dataset-path", action="store_true",
                   help="prepare the protocol's dataset in the cache (generating it on first use) and print its "
                   "path: encode its images in file order to evaluate precomputed codes with --codes")
    p.add_argument("--eval-rows", metavar="NPY", default=None,
                   help="prepare the protocol's dataset and write the file rows it scores (its evaluation sub-grid, "
                   "or every row) to NPY: codes of exactly these rows, in this order, are accepted by --codes")
    p.add_argument("--force", action="store_true", help="overwrite the --eval-rows file if it exists")
    p.add_argument("--source", metavar="PATH", default=None, help="local data for protocols that need it")

    def run(args: argparse.Namespace) -> int:
        from .protocols import get_protocol, list_protocols

        if args.name is None and (args.dataset_path or args.eval_rows):
            raise FactorbenchError("--dataset-path and --eval-rows need a protocol name (see `factorbench protocols`)")
        if args.name is None:
            for name, description in list_protocols().items():
                print(f"{name:<22} {description}")
            return 0
        protocol = get_protocol(args.name)
        if args.dataset_path:
            from .cache import prepare_dataset

            print(prepare_dataset(protocol.dataset, source=args.source))
            return 0
        if args.eval_rows:
            import numpy as np

            from factorbench.generators.outputs import check_output_file

            from .cache import prepare_dataset
            from .evaluation import evaluation_rows

            out = Path(args.eval_rows)
            if out.suffix != ".npy":
                raise FactorbenchError(f"--eval-rows {out}: name a .npy file (numpy.save writes that format)")
            check_output_file(out, args.force, "--eval-rows")
            with load(prepare_dataset(protocol.dataset, source=args.source)) as ds:
                rows = evaluation_rows(protocol, ds)
            np.save(out, rows)
            print(f"wrote {out}: {len(rows)} file rows of {protocol.dataset.generator} scored by {protocol.name}")
            return 0
        print(f"# {protocol.name}  hash {protocol.hash()}", file=sys.stderr)  # stdout: valid JSON alone
        print(protocol.to_json(indent=2))
        return 0
    p.set_defaults(run=run)


def _default_model_name(encoder: str | None, codes: str | None) -> str:
    """The model name a result records when --model is not given (and its default file name)."""
    if encoder is None:
        return Path(str(codes)).stem
    if encoder.startswith("run:"):
        run, _, step = encoder[len("run:"):].partition("@")
        return Path(run).resolve().name + (f"-step{step}" if step else "")
    return encoder.replace(":", ".")


@command("evaluate", "score an encoder (or precomputed codes) under a protocol and write a result JSON")
def _evaluate(p: argparse.ArgumentParser) -> None:
    p.add_argument("protocol", help="protocol name (see `factorbench protocols`)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--encoder", metavar="SPEC", help="ideal, random, pca, run:RUN_DIR (a model trained with "
                      "`factorbench train`), or module:function (a callable "
                      "images (n, H, W, C) uint8 -> codes (n, D) or (mu, logvar), or a factory returning one)")
    what.add_argument("--codes", metavar="FILE", help="codes of every sample of the protocol's dataset, in file "
                      "order: .npy, or .npz with 'codes' or 'mu' and 'logvar' (and optionally 'indices': the row of "
                      "each code, any order)")
    p.add_argument("--out", metavar="JSON", help="result file (default: <protocol>.<model>.json)")
    p.add_argument("--model", default=None, help="model name recorded in the result (default: from --encoder)")
    p.add_argument("--plots", metavar="DIR", help="also write PNG plots of the metrics' matrices into DIR")
    p.add_argument("--batch-size", type=int, default=256, help="images per encoder call (default 256)")
    p.add_argument("--source", metavar="PATH", default=None, help="local data for protocols that need it")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"), help="where a run: encoder encodes "
                   "(default cpu; auto: CUDA when present)")
    p.add_argument("--only", nargs="+", metavar="LABEL", help="run only these metric labels (a partial result); "
                   "space- or comma-separated, as `sweep --only`")
    p.add_argument("--force", action="store_true", help="overwrite the result file and the plots if they exist")
    p.add_argument("--quiet", action="store_true", help="no progress output")

    def run(args: argparse.Namespace) -> int:
        import dataclasses

        from factorbench.generators.outputs import check_output_dir, check_output_file

        from .evaluation import evaluate, load_codes
        from .protocols import get_protocol

        # everything that can be checked is checked before any data is generated or encoded
        protocol = get_protocol(args.protocol)
        if args.only:  # "a b", "a,b" and "a, b" alike
            args.only = [label for item in args.only for label in item.split(",") if label.strip()]
            args.only = [label.strip() for label in args.only]
            for label in args.only:
                protocol.metric(label)
        if args.encoder is not None:
            from .encoders import check_encoder_spec

            check_encoder_spec(args.encoder)  # before a default file name is made from it
        model = args.model or _default_model_name(args.encoder, args.codes)
        out = check_output_file(Path(args.out) if args.out else Path(f"{args.protocol}.{model}.json"), args.force)
        if args.plots:  # refuse existing plots (without --force) and directories in their place, as the result file
            from .plots import check_plot_paths, plot_paths

            _check_plot_targets(check_output_dir(args.plots, "--plots"), protocol, args.only)
            calls = [(c.label, c.metric) for c in protocol.metrics if not args.only or c.label in args.only]
            check_plot_paths(plot_paths(args.protocol, calls, args.plots), args.force)
        if args.batch_size < 1:
            raise FactorbenchError(f"--batch-size must be positive, got {args.batch_size}")
        codes, indices = (None, None)
        if args.codes:
            from .evaluation import check_protocol_codes

            codes, indices = load_codes(args.codes)
            codes, logvar, _ = check_protocol_codes(protocol, codes, indices, source=args.source)
            codes, indices = (codes if logvar is None else (codes, logvar)), None  # now in file order
        else:
            from .encoders import load_encoder

            args.encoder = load_encoder(args.encoder, args.device)  # an import error before any data is generated
        result = evaluate(protocol, args.encoder, codes=codes, indices=indices, batch_size=args.batch_size,
                          source=args.source, progress=not args.quiet,
                          only=tuple(args.only) if args.only else None)
        result = dataclasses.replace(result, model=model)
        result.save(out, force=args.force)
        print(result.summary())
        print(f"wrote {out}")
        from .results import compare_with_shipped

        comparison = compare_with_shipped(result)
        if comparison:
            print(comparison, file=sys.stderr)
        if args.plots:
            from .plots import plot_result

            for path in plot_result(result, args.plots, force=args.force):
                print(f"wrote {path}")
        return 0
    p.set_defaults(run=run)


def _check_plot_targets(directory: Path, protocol: Any, only: list[str] | None) -> None:
    """The PNGs ``--plots`` will write are not directories."""
    from .plots import PLOTTERS

    for call in protocol.metrics:
        target = directory / f"{protocol.name}.{call.label}.png"
        if call.metric in PLOTTERS and (only is None or call.label in only) and target.is_dir():
            raise FactorbenchError(f"--plots {directory}: {target} is a directory; remove it or choose another folder")


@command("scores", "print the score table of a protocol: the reference rows (and your results with --add), best "
         "first by its headline metric")
def _scores(p: argparse.ArgumentParser) -> None:
    p.add_argument("protocol", nargs="?", help="protocol name (see `factorbench protocols`)")
    p.add_argument("--schema", action="store_true", help="print the JSON Schema of a result file (draft 2020-12), "
                   "for tools that write or check results, and exit")
    p.add_argument("--format", choices=("md", "csv", "latex", "json"), default="md",
                   help="md (default), csv (numbers only, one header row), latex, or json (with each column's "
                        "direction)")
    p.add_argument("--dir", metavar="DIR", default=None, help="a folder of result JSON files (default: the "
                   "reference results shipped with factorbench)")
    p.add_argument("--add", action="append", metavar="JSON", default=[],
                   help="a result file of yours to show beside the reference rows (repeatable)")
    p.add_argument("--columns", metavar="PATTERN", default=None,
                   help="show only the score columns matching a shell-style pattern, e.g. 'independent.*' "
                   "(the headline column is always shown, first)")

    def run(args: argparse.Namespace) -> int:
        from .results import RESULT_SCHEMA_PATH, format_table, scores_table

        if args.schema:
            if args.protocol or args.add or args.dir:
                raise FactorbenchError("--schema prints the result files' JSON Schema; give it alone")
            print(RESULT_SCHEMA_PATH.read_text(), end="")
            return 0
        if not args.protocol:
            raise FactorbenchError("give a protocol (see `factorbench protocols`), or --schema")
        table = scores_table(args.protocol, args.dir, args.columns, add=args.add)
        if not table.rows:
            print(f"no results for {args.protocol} yet")
            return 0
        print(format_table(table, args.format))
        return 0
    p.set_defaults(run=run)


@command("leaderboard", "write a static HTML site of the reference score tables, with plots and each number's "
         "provenance")
def _leaderboard(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write (new or empty; --force replaces "
                   "a site written before)")
    p.add_argument("--protocol", nargs="+", action="extend", default=None, metavar="NAME",
                   help="only these protocols (default: every protocol with reference results)")
    p.add_argument("--dir", metavar="DIR", default=None, help="a folder of <protocol>/<model>.json result files "
                   "(default: the reference results shipped with factorbench)")
    p.add_argument("--add", nargs="+", action="extend", default=[], metavar="RESULT.json", help="your results (files written by "
                   "`factorbench evaluate`), shown beside the reference rows of their protocols and marked as yours")
    p.add_argument("--no-plots", action="store_true", help="leave out the plots (faster)")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="processes that draw the plots (default: every usable core)")
    p.add_argument("--plot-cache", metavar="DIR", default=None, help="a folder of the plots drawn by earlier "
                   "builds, reused where a result is unchanged (default: leaderboard-plots in the data cache, "
                   "$FACTORBENCH_DATA or ~/.cache/factorbench)")
    p.add_argument("--plot-cache-max-mb", type=float, default=None, metavar="MB",
                   help="after the build, remove the least recently used plots until the cache holds at most "
                        "this many MB (default 512, about five builds of the whole site)")
    p.add_argument("--no-plot-cache", action="store_true", help="draw every plot, and keep none")
    p.add_argument("--force", action="store_true", help="replace a site written before")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    def run(args: argparse.Namespace) -> int:
        from tqdm.auto import tqdm

        from .leaderboard import build_site
        from .plot_cache import default_plot_cache

        if args.no_plot_cache and (args.plot_cache or args.plot_cache_max_mb is not None):
            given = "--plot-cache" if args.plot_cache else "--plot-cache-max-mb"
            raise FactorbenchError(f"{given} and --no-plot-cache contradict each other; give one")
        cache = None if args.no_plot_cache else (args.plot_cache or default_plot_cache())

        def progress(items: Any) -> Any:
            return tqdm(items, desc="model pages", unit="page", disable=True if args.quiet else None)

        out = build_site(args.out, args.protocol, reference_dir=args.dir, plots=not args.no_plots, force=args.force,
                         progress=progress, add=args.add, jobs=args.jobs, plot_cache=cache,
                         plot_cache_max_mb=args.plot_cache_max_mb)
        print(f"wrote {out}/index.html")
        return 0
    p.set_defaults(run=run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="factorbench", description="Datasets with known factors of variation, "
                                     "and the protocols and metrics to evaluate representations on them.")
    parser.add_argument("--version", action="version", version=f"factorbench {package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (help_text, configure) in COMMANDS.items():
        configure(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage error (or --help, --version): its status
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    # SIGTERM (kill, a scheduler's stop) ends a command as Ctrl-C does, so that the same clean-up runs (no
    # staging folder or temporary file left behind); train and sweep install their own handler while they run
    with stopping_on_signals():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        return args.run(args)
    except FactorbenchError as exc:
        print(f"factorbench {args.command}: error: {exc}", file=sys.stderr)
        if isinstance(exc, generators.GenerationInterrupted):
            return 130
        return int(getattr(exc, "exit_status", 2))
    except BrokenPipeError:  # output piped into e.g. `head`, which closed early
        sys.stderr.close()
        return 0
    except BaseException as exc:  # Ctrl-C, SIGTERM, or an extension's ImportError when one cut its set-up
        if not caused_by_interrupt(exc):
            raise
        print(f"factorbench {args.command}: interrupted", file=sys.stderr)
        return 130


import factorbench.baselines.commands  # noqa: E402,F401  (registers train and show-run; torch loads only when they run)

if __name__ == "__main__":  # python -m factorbench.benchmark.cli: use the imported module's command table
    from factorbench.benchmark.cli import main as _main

    sys.exit(_main())
