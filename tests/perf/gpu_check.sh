#!/usr/bin/env bash
# tests/perf/gpu_check.sh: GPU-readiness check of factorbench's training library (baselines/), the one whose
# figures BASELINES.md's Speed section records.
#
# Run from the repository root of a factorbench checkout, on a machine with one NVIDIA GPU:
#
#     bash tests/perf/gpu_check.sh         # everything, within BUDGET_S (default 480 s = 8 minutes)
#     DEVICE=cpu STEPS=20 PACK=2 TEAPOT_N=512 CAP_SCALE=12 bash tests/perf/gpu_check.sh   # dry run on a CPU
#
# A lent session's call that trains a plan's jobs while the training tests run beside them (two checks, two
# scratch folders; the wheels of an offline machine carried in an ignored folder):
#
#     export WHEELS=gpu-wheels
#     (ONLY=tests TESTS_CAP=300 BUDGET_S=420 WORK=/tmp/fa bash tests/perf/gpu_check.sh > $OUT/tests.txt 2>&1) &
#     ONLY=sweep SWEEP_PLAN=almudevar-ortega-v1 SWEEP_ONLY='6,9,12,18' SWEEP_CAP=510 BUDGET_S=560 THREADS=2 \
#         SWEEP_MPS=1 WORK=/tmp/fb bash tests/perf/gpu_check.sh > $OUT/sweep.txt 2>&1
#     wait; tar czf $OUT/back.tgz -C /tmp fb/reference fb/logs fa/logs      # one file: few files come back
#
# (run with timeout_s 600 on a machine lent for 15 minutes; then, here: `factorbench sweep PLAN --restore DIR`
# on the unpacked fb/reference, and --collect.) SWEEP_ONLY names jobs not finished here (indices from
# `factorbench sweep PLAN --status`): a job the sweep here has already trained would be trained twice. Jobs
# still training when the step's time runs out are lost (their checkpoints stay on the lent machine): a
# dSprites job of the burgess-2018 network trained 230-310 s packed 8 to an H200, so a second wave of such
# jobs rarely finishes.
#
# Steps, in this order (each has its own timeout, cut to the time left; a failure is recorded and the
# script goes on; one summary table is printed at the end, also on Ctrl-C):
#   env         GPU, driver, CPU cores, Python
#   install     a virtual environment in $WORK/venv that also sees $PYTHON's packages (never a system-wide
#               install): a CUDA torch already there is kept, else `pip install torch` from PyPI (whose
#               default Linux x86-64 wheel is the CUDA build); then `pip install -e .[train,test]` (if that
#               fails, offline, the checkout is imported through a shim and the missing modules are listed)
#   data        the square dataset generated into the cache (so that no training time includes it)
#   train_auto  `factorbench train vae --dataset square` STEPS steps, --precision auto (bf16 on the GPU)
#   train_fp32  the same with --precision fp32
#   pack        PACK concurrent training processes on the one GPU (seeds 1..PACK): aggregate steps/s
#   eval        the train_auto run evaluated (square-lsbd-v1, fast metrics) on the CPU and on the GPU,
#               codes and scores compared (GPU also with TF32 convolutions off)
#   xdevice     a run checkpointed on the CPU resumed on the GPU, and the other way round
#   tests       the test suite's training tests, train() pointed at DEVICE (a pytest plugin maps "auto")
#   teapot      the 200,000-image teapot rendered with the gl backend (EGL) and timed
#   sweep       (only with SWEEP_PLAN) a plan's jobs trained and scored on the GPU, PACK per GPU, then collected
#               as reference files into $WORK/reference (bring them home; `factorbench sweep PLAN --restore`)
#   then, while time is left: minimal (hand-written loop: eager fp32, the whole step as one CUDA graph
#   alone and over 8 / 64 vmapped seeds, torch.compile's reduce-overhead mode; on a CPU: eager fp32/bf16,
#   vmap over 8 seeds, torch.compile), stream (square streamed from HDF5 as the teapot is), mps (pack under CUDA MPS);
#   in 8 minutes these extras are usually cut: a second run `ONLY=minimal,stream,mps bash gpu_check.sh`
#
# Environment switches:
#   DEVICE=cuda|cpu   TRAIN_STEPS/STEPS=2000   PACK=8   TEAPOT_N=200000   BUDGET_S=480   THREADS=2
#   CAP_SCALE=1 (multiply every step's timeout: a slow CPU dry run)
#   WORK=/tmp/fb-gpu-check (scratch: venv, data cache, runs, logs; runs are removed at start)
#   PYTHON=python3    VENV=DIR (use this environment)   SKIP_INSTALL=1 (use $VENV or $PYTHON as is)
#   TORCH_SPEC=torch  what pip installs when no CUDA torch is importable (a CPU dry run: a pinned CPU wheel)
#   WHEELS=DIR        offline machine: install missing packages from these wheels only (e.g. moderngl,
#                     glcontext, trimesh, submitit for the interpreter there; `pip download --no-deps
#                     --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 -d DIR ...`)
#   SKIP=a,b          skip these steps (names above)          ONLY=a,b   run only these (env/install/data always)
#   EVAL_LABELS="d_lsbd beta_vae factor_vae mig sap modularity"   TESTS="tests/test_x.py ..." (test files)
#   PYTEST_ARGS="-k deterministic"   extra pytest arguments of the tests step (verbose, so that the failing
#                     tests are named even when the step's timeout stops pytest before its summary)
#   MIN_ARGS="--precision fp32;--precision bf16 --seeds 32"   the minimal step's runs, ';'-separated
#                     (minimal_loop.py's options: --precision, --seeds K, --compile [--compile-mode M], --cuda-graph)
#   SWEEP_PLAN=almudevar-ortega-v1   SWEEP_ONLY='*/dsprites/*'   SWEEP_JOBS=$PACK   SWEEP_PRECISION=fp32
#   SWEEP_CAP=480 (the sweep step's timeout, s; the last SWEEP_COLLECT_S=25 of it collect what finished)
#   SWEEP_DATA_WORKERS=$(nproc)   processes that generate a dataset the jobs need (--data-workers): on a
#                     lease of 2026-11-29 one process took 280 s of a 520 s step to prepare MPI3D-toy, the GPU
#                     idle; 16 processes generated it in 129.5 s there (splits and verification come after)
#   SWEEP_MPS=1       the sweep's jobs share the GPU through the CUDA MPS daemon (started and stopped around
#                     the step; without it where it cannot start, and the summary says why)
#   TESTS_CAP=110 (the tests step's timeout, s)
#   MIN_STEPS=500     steps of each minimal run (default STEPS)    MIN_CAP=100   the minimal step's timeout (s)
set -u
set -o pipefail

REPO=$(pwd)
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-${TRAIN_STEPS:-2000}}
PACK=${PACK:-8}
TEAPOT_N=${TEAPOT_N:-200000}
BUDGET_S=${BUDGET_S:-480}
THREADS=${THREADS:-2}
WORK=${WORK:-/tmp/fb-gpu-check}
PYTHON=${PYTHON:-python3}
VENV=${VENV:-}
WHEELS=${WHEELS:-}
SKIP=${SKIP:-}
ONLY=${ONLY:-}
SKIP_INSTALL=${SKIP_INSTALL:-0}
EVAL_LABELS=${EVAL_LABELS:-d_lsbd beta_vae factor_vae mig sap modularity}
RESERVE_S=8
CAP_SCALE=${CAP_SCALE:-1}   # multiplies every step's cap and minimum (a slow CPU dry run: CAP_SCALE=10)

T_START=$(date +%s)
DEADLINE=$((T_START + BUDGET_S))
mkdir -p "$WORK/logs" "$WORK/py" "$WORK/cache"
rm -rf "$WORK/runs" "$WORK/mps"
mkdir -p "$WORK/runs"
SUMMARY="$WORK/summary.tsv"
: > "$SUMMARY"
export FACTORBENCH_DATA="$WORK/cache"
export PYTHONUNBUFFERED=1
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=${PIP_DEFAULT_TIMEOUT:-20} PIP_RETRIES=${PIP_RETRIES:-1}
TORCH_SPEC=${TORCH_SPEC:-torch}   # what `pip install` gets when no CUDA torch is importable
VPY=$PYTHON
SHIM=""
INSTALL_OK=0

if [ ! -f "$REPO/baselines/trainer.py" ] || [ ! -f "$REPO/pyproject.toml" ]; then
    echo "gpu_check.sh: run me from the root of a factorbench checkout (no baselines/trainer.py here)" >&2
    exit 2
fi

# ----------------------------------------------------------------------------------------------- helpers
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
left_s() { echo $(( DEADLINE - $(date +%s) - RESERVE_S )); }
add_row() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$SUMMARY"; }
in_list() { case ",$2," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
log() { echo "[gpu_check $(date +%T) +$(( $(date +%s) - T_START ))s] $*" >&2; }

# run_step NAME CAP_S MIN_S FUNCTION: FUNCTION sees STEP_T (its timeout, s) and sets STATUS and DETAIL
run_step() {
    local name=$1 cap min fn=$4 left t0
    cap=$(awk -v c="$2" -v k="$CAP_SCALE" 'BEGIN { printf "%d", c * k }')
    min=$(awk -v c="$3" -v k="$CAP_SCALE" 'BEGIN { printf "%d", c * k }')
    if in_list "$name" "$SKIP" || { [ -n "$ONLY" ] && ! in_list "$name" "env,install,data,$ONLY"; }; then
        add_row "$name" SKIP 0 "skipped (SKIP/ONLY)"; return
    fi
    if [ "$INSTALL_OK" != 1 ] && [ "$name" != env ] && [ "$name" != install ]; then
        add_row "$name" SKIP 0 "not run: the install step failed"; return
    fi
    left=$(left_s)
    if [ "$left" -lt "$min" ]; then
        add_row "$name" SKIP 0 "not run: ${left}s left of the budget, needs ${min}s"; return
    fi
    STEP_T=$(( cap < left ? cap : left ))
    STATUS=FAIL DETAIL=""
    log "step $name (timeout ${STEP_T}s)"
    t0=$(now)
    "$fn"
    add_row "$name" "$STATUS" "$(elapsed "$t0")" "$DETAIL"
    log "step $name: $STATUS $DETAIL"
}

# tmo SECONDS CMD...: timeout with a kill 5 s after the TERM; rc 124 on timeout
tmo() { local s=$1; shift; timeout -k 5 "$s" "$@"; }
status_of() { case $1 in 0) echo OK ;; 124|137) echo TIMEOUT ;; *) echo "FAIL" ;; esac; }

fb() { "$VPY" -m factorbench.benchmark.cli "$@"; }
fbpy() { "$VPY" "$WORK/py/fbcheck.py" "$@"; }

GPU_SAMPLER_PID=""
gpu_sampler_start() {  # GPU utilisation and memory every 200 ms into $1
    GPU_SAMPLER_PID=""
    [ "$DEVICE" = cuda ] && command -v nvidia-smi >/dev/null 2>&1 || return 0
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 200 > "$1" 2>/dev/null &
    GPU_SAMPLER_PID=$!
}
gpu_sampler_stop() {  # prints " gpu util mean/max %, mem max MiB" from $1
    if [ -n "$GPU_SAMPLER_PID" ]; then
        kill "$GPU_SAMPLER_PID" 2>/dev/null; wait "$GPU_SAMPLER_PID" 2>/dev/null
        GPU_SAMPLER_PID=""
        awk -F', *' 'NF>=2 && $1+0==$1 { n++; s+=$1; if ($1>m) m=$1; if ($2>mm) mm=$2 }
            END { if (n) printf "; GPU util mean %.0f%% max %d%%, mem max %d MiB", s/n, m, mm }' "$1"
    fi
}

MPS_UP=0
cleanup() {
    [ -n "$GPU_SAMPLER_PID" ] && kill "$GPU_SAMPLER_PID" 2>/dev/null
    mps_stop  # defined below, with mps_start
}
print_summary() {
    cleanup
    echo
    echo "================ factorbench GPU check: summary ($(( $(date +%s) - T_START )) s of ${BUDGET_S} s; DEVICE=$DEVICE, STEPS=$STEPS, PACK=$PACK) ================"
    awk -F'\t' 'BEGIN { printf "%-11s %-8s %7s  %s\n", "step", "status", "secs", "result"; printf "%-11s %-8s %7s  %s\n", "----", "------", "----", "------" }
                { printf "%-11s %-8s %7s  %s\n", $1, $2, $3, $4 }' "$SUMMARY"
    echo "logs: $WORK/logs   runs: $WORK/runs   results: $SUMMARY"
}
trap 'print_summary; trap - EXIT; exit 130' INT TERM
trap 'print_summary' EXIT

# ------------------------------------------------------------------------------ embedded Python helpers
cat > "$WORK/py/fbcheck.py" <<'PYEOF'
"""Helpers of gpu_check.sh (one sub-command per use); each prints one line for the summary."""
from __future__ import annotations

import csv
import json
import statistics
import sys
import time
from pathlib import Path


def runinfo(run_dir: str) -> dict:
    d = Path(run_dir)
    out = {"run": d.name}
    if (d / "DONE").is_file():
        done = json.loads((d / "DONE").read_text())
        out.update(steps=done["steps"], steps_per_s=done["steps_per_s"], wall_s=done["wall_time_s"],
                   precision=done["precision"], device=done["device"], device_name=done.get("device_name"))
    if (d / "log.csv").is_file():
        rates = [float(r["steps_per_s"]) for r in csv.DictReader(open(d / "log.csv"))]
        out["intervals"] = len(rates)
        if len(rates) > 1:
            out["steady_steps_per_s"] = statistics.median(rates[1:])  # the first interval holds warm-up
        elif rates:
            out["steady_steps_per_s"] = rates[0]
    return out


def cmd_runinfo(run_dir: str) -> None:
    info = runinfo(run_dir)
    if "steps_per_s" not in info:
        rows = list(csv.DictReader(open(Path(run_dir, "log.csv")))) if Path(run_dir, "log.csv").is_file() else []
        if rows:
            print(f"unfinished: reached step {rows[-1]['step']} after {float(rows[-1]['wall_time_s']):.1f} s, "
                  f"last interval {float(rows[-1]['steps_per_s']):.1f} steps/s")
        else:
            print(f"unfinished: no step logged in {run_dir}")
        sys.exit(1)
    print(f"{info['precision']} on {info['device_name']}: {info['steps_per_s']:.1f} steps/s over the run, "
          f"{info.get('steady_steps_per_s', float('nan')):.1f} steady (median of 50-step intervals), "
          f"{info['steps']} steps in {info['wall_s']:.1f} s")
    Path(run_dir, "runinfo.json").write_text(json.dumps(info))


def cmd_packinfo(wall: str, single_run: str, *run_dirs: str) -> None:
    infos = [runinfo(r) for r in run_dirs]
    done = [i for i in infos if "steps_per_s" in i]
    steps = sum(i["steps"] for i in done)
    per = [i["steps_per_s"] for i in done]
    steady = [i.get("steady_steps_per_s", i["steps_per_s"]) for i in done]
    single = runinfo(single_run) if Path(single_run, "DONE").is_file() else {}
    base = single.get("steady_steps_per_s")
    agg_wall = steps / float(wall) if float(wall) > 0 else float("nan")
    reached = []
    for r in run_dirs:
        if not Path(r, "DONE").is_file() and Path(r, "log.csv").is_file():
            rows = list(csv.DictReader(open(Path(r, "log.csv"))))
            if rows:
                reached.append(int(rows[-1]["step"]))
    line = (f"{len(done)}/{len(run_dirs)} finished"
            + (f" (unfinished ones reached steps {sorted(reached)})" if reached else "")
            + f"; aggregate {agg_wall:.1f} steps/s over the wall "
            f"(process start included), {sum(steady):.1f} steady (sum of per-process medians); "
            f"per process median {statistics.median(steady) if steady else float('nan'):.1f}")
    if base:
        line += f"; = {sum(steady) / base:.2f}x one process alone ({base:.1f})"
    print(line)
    if len(done) < len(run_dirs):
        sys.exit(1)


def cmd_eval(run_dir: str, protocol: str, device: str, out: str, tf32: str, *labels: str) -> None:
    import numpy as np
    import torch

    from factorbench.baselines.runs import load_run
    from factorbench.benchmark import evaluate
    from factorbench.benchmark.cache import prepare_dataset
    from factorbench.benchmark.dataset import load
    from factorbench.benchmark.protocols import get_protocol

    if device == "cuda":
        torch.backends.cudnn.allow_tf32 = tf32 == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32 == "tf32"
    enc = load_run(run_dir, device=device)
    t0 = time.perf_counter()
    result = evaluate(protocol, enc, progress=False, only=tuple(labels) or None)
    wall = time.perf_counter() - t0
    with load(prepare_dataset(get_protocol(protocol).dataset, progress=False)) as ds:
        images = ds.images[:2048]
    mu = enc(images)
    mu = mu[0] if isinstance(mu, tuple) else mu
    np.save(out + ".mu.npy", mu)
    scalars = {f"{label}.{k}": v for label, e in result.metrics.items() for k, v in e["scalars"].items()}
    Path(out).write_text(json.dumps({"device": device, "tf32": tf32, "wall_s": wall, "scalars": scalars,
                                     "timings": result.timings}))
    print(f"{device}{'' if device == 'cpu' else ' ' + tf32}: {len(scalars)} scalars in {wall:.1f} s "
          f"(encode {result.timings.get('encode', float('nan')):.2f} s)")


def cmd_evalcmp(ref: str, *others: str) -> None:
    import numpy as np

    a = json.loads(Path(ref).read_text())
    mu_a = np.load(ref + ".mu.npy")
    parts, worst_all = [], 0.0
    for other in others:
        if not Path(other).is_file():
            parts.append(f"{Path(other).name}: missing")
            continue
        b = json.loads(Path(other).read_text())
        mu_b = np.load(other + ".mu.npy")
        dmu = float(np.abs(mu_a - mu_b).max())
        rel = dmu / max(float(np.abs(mu_a).max()), 1e-12)
        diffs = {k: abs((a["scalars"][k] or 0) - (b["scalars"].get(k) or 0)) for k in a["scalars"]}
        worst = max(diffs, key=diffs.get) if diffs else None
        changed = sorted(k for k, v in diffs.items() if v > 1e-6)
        worst_all = max(worst_all, diffs[worst] if worst else 0.0)
        parts.append(f"{b['device']}/{b['tf32']} vs cpu: max|dmu| {dmu:.2e} (rel {rel:.1e}), "
                     f"{len(changed)}/{len(diffs)} scores differ (>1e-6), largest {worst} "
                     f"{diffs[worst] if worst else 0:.3g} ({a['scalars'].get(worst)} vs {b['scalars'].get(worst)}); "
                     f"time {b['wall_s']:.1f} s vs {a['wall_s']:.1f} s")
    print(" | ".join(parts))


def cmd_xdevice(dataset: str, first: str, second: str, work: str, tag: str) -> None:
    """A run checkpointed on ``first`` resumed on ``second``."""
    from factorbench.baselines.config import make_config
    from factorbench.baselines.trainer import TrainOptions, train

    config = make_config("vae", {"steps": 40, "batch_size": 16})
    run = Path(work) / f"xdev-{tag}-{first}-to-{second}"
    opts = dict(progress=False, samples=False, threads=2, log_every=10)
    train(config, dataset, run, force=True, options=TrainOptions(device=first, stop_after=20, **opts))
    try:
        r = train(config, dataset, run, resume=True, options=TrainOptions(device=second, **opts))
        done = json.loads((run / "DONE").read_text())
        print(f"{first}->{second}: resumed, {r.status} at step {r.step}; DONE records device {done['device']}, "
              f"precision {done['precision']} only")
    except Exception as exc:  # noqa: BLE001
        print(f"{first}->{second}: resume FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
        sys.exit(1)


def cmd_stream(dataset: str, device: str, steps: str, out: str, threads: str) -> None:
    """The same vae run with the split streamed from the HDF5 file by the read-ahead thread (as the teapot)."""
    from factorbench.baselines.config import make_config
    from factorbench.baselines.trainer import TrainOptions, train

    config = make_config("vae", {"steps": int(steps)})
    train(config, dataset, out, force=True, options=TrainOptions(device=device, memory_limit=0, progress=False,
                                                                samples=False, threads=int(threads)))
    cmd_runinfo(out)


def cmd_h5info(path: str, seconds: str) -> None:
    import h5py

    from factorbench.benchmark.protocols.catalog import REFERENCE_IMAGES

    p = Path(path)
    partial = p.with_name(p.name + ".partial")
    if p.is_file():
        with h5py.File(p, "r") as f:
            n = f["images"].shape[0]
            manifest = json.loads(f.attrs["manifest"]) if "manifest" in f.attrs else {}
        renderer = manifest.get("renderer", "?")
        renderer = renderer.split("GL_RENDERER: ")[-1].split(", GL_VERSION")[0] if "GL_RENDERER" in renderer else renderer
        sha = (manifest.get("sha256") or {}).get("images", "")
        same = "same images as the reference (llvmpipe)" if sha == REFERENCE_IMAGES["teapot"] else \
            "images differ from the reference rows' (rendered by Mesa llvmpipe)"
        print(f"{n:,} images in {float(seconds):.0f} s = {n / float(seconds):.0f} images/s (all included); "
              f"renderer {renderer}; {same if n == 200_000 else 'not the full set: no hash comparison'}")
    elif partial.is_file():
        with h5py.File(partial, "r") as f:
            n = int(f.attrs.get("rows_written", 0))
            renderer = str(f.attrs.get("renderer", "?"))
            renderer = renderer.split("GL_RENDERER: ")[-1].split(", GL_VERSION")[0] if "GL_RENDERER" in renderer else renderer
        print(f"unfinished: {n:,} images in {float(seconds):.0f} s = {n / float(seconds):.0f} images/s; "
              f"renderer {renderer}")
        sys.exit(1)
    else:
        print("no file written")
        sys.exit(1)


def cmd_minsummary() -> None:
    """One line from minimal_loop.py's JSON lines on stdin."""
    out = []
    for line in sys.stdin:
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if "steps_per_s" not in d:
            out.append(f"{d.get('args')}: rc {d.get('rc')}")
            continue
        compiled = {True: " compile", False: "", "default": " compile"}.get(d["compile"], f" compile {d['compile']}")
        name = (d["precision"] + compiled + (" cuda-graph" if d.get("cuda_graph") else "")
                + (f" vmap x{d['seeds']}" if d["seeds"] > 1 else ""))
        out.append(f"{name} {d['model_steps_per_s']:.0f} model-steps/s"
                   + (f" (warm-up {d['warmup_s']} s)" if d["compile"] or d.get("cuda_graph") else ""))
    print("; ".join(out))


def cmd_glinfo() -> None:
    try:
        import moderngl

        ctx = moderngl.create_standalone_context(backend="egl")
        print(ctx.info["GL_RENDERER"], "|", ctx.info["GL_VERSION"])
        ctx.release()
    except Exception as exc:  # noqa: BLE001
        print(f"no EGL context: {type(exc).__name__}: {exc}")
        sys.exit(1)


if __name__ == "__main__":
    globals()["cmd_" + sys.argv[1]](*sys.argv[2:])
PYEOF

cat > "$WORK/py/fbcheck_plugin.py" <<'PYEOF'
"""pytest plugin of gpu_check.sh: train() with device "auto" runs on $FB_TEST_DEVICE, and every device that
train() chose is appended to $FB_TEST_DEVICE_LOG (so the summary can say where the tests trained)."""
import os


def pytest_configure(config):
    try:
        import factorbench.baselines.trainer as trainer
    except Exception:  # noqa: BLE001  (torch missing: the tests skip themselves)
        return
    wanted, log = os.environ.get("FB_TEST_DEVICE"), os.environ.get("FB_TEST_DEVICE_LOG")
    original = trainer.choose_device

    def choose(requested):
        device = original(wanted if requested == "auto" and wanted else requested)
        if log:
            with open(log, "a") as fh:
                fh.write(device.type + "\n")
        return device

    trainer.choose_device = choose
PYEOF

cat > "$WORK/py/minimal_loop.py" <<'PYEOF'
"""factorbench's `vae` (burgess, latent 10, batch 64, Adam 1e-4, Bernoulli) in a minimal loop: the split as
uint8 on the device once, batches gathered there, no logging. --seeds K: K models at once (torch.func.vmap
over stacked parameters). --compile: torch.compile of the step (--compile-mode reduce-overhead: its CUDA
graphs). --cuda-graph: the whole step (batch gather, noise, forward, backward, capturable Adam) captured once
as one CUDA graph and replayed (the default CUDA generator draws inside it). Prints one line."""
import argparse, json, time

import numpy as np
import torch
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--dataset", required=True); ap.add_argument("--steps", type=int, default=2000)
ap.add_argument("--warmup", type=int, default=20); ap.add_argument("--device", default="cuda")
ap.add_argument("--precision", default="fp32"); ap.add_argument("--seeds", type=int, default=1)
ap.add_argument("--compile", action="store_true"); ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--compile-mode", default="default", choices=("default", "reduce-overhead", "max-autotune-no-cudagraphs"))
ap.add_argument("--cuda-graph", action="store_true")
args = ap.parse_args()
if args.cuda_graph and (args.compile or args.device != "cuda"):
    ap.error("--cuda-graph needs --device cuda and no --compile")
torch.set_num_threads(args.threads)
from factorbench.baselines.config import make_config
from factorbench.baselines.data import TrainingData
from factorbench.baselines.vae import GaussianVAE

data = TrainingData(args.dataset, "train")
dev = torch.device(args.device)
images = torch.from_numpy(data.images_at(np.arange(len(data)))).to(dev)
data.close()
config = make_config("vae", {})
shape, B, K = tuple(images.shape[1:]), config.batch_size, args.seeds
dtype = torch.bfloat16 if args.precision == "bf16" else None
gen = torch.Generator(device=dev); gen.manual_seed(1)
if args.cuda_graph:  # a graph replays the default CUDA generator's draws with fresh offsets by itself
    torch.cuda.manual_seed(1)
    gen = None
fused = True if dev.type == "cuda" else None
adam = {"fused": fused, "capturable": True} if args.cuda_graph else {"fused": fused}
cast = {"cache_enabled": False} if args.cuda_graph else {}  # autocast's cast cache must not outlive a capture


def batch(k=1):
    idx = torch.randint(0, len(images), (k * B,), device=dev, generator=gen)
    x = images.index_select(0, idx).permute(0, 3, 1, 2).float().div_(255.0)
    return x if k == 1 else x.reshape(k, B, *x.shape[1:])


if K == 1:
    torch.manual_seed(0)
    model = GaussianVAE(config, shape).to(dev, memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, **adam)

    def step(x, eps):
        with torch.autocast(dev.type, dtype=dtype or torch.float32, enabled=dtype is not None, **cast):
            mu, logvar = model.encode(x)
            mu, logvar = mu.float(), logvar.float()
            logits = model.decode(mu + torch.exp(0.5 * logvar) * eps)
        recon = F.binary_cross_entropy_with_logits(logits.float(), x, reduction="none").flatten(1).sum(1).mean()
        loss = recon + (0.5 * (mu.square() + logvar.exp() - logvar - 1.0)).sum(1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    if args.compile:
        step = torch.compile(step, mode=args.compile_mode)

    def one():
        return step(batch(), torch.randn((B, config.latent_dim), device=dev, generator=gen))
else:
    from torch.func import functional_call, grad_and_value, stack_module_state, vmap

    models = []
    for s in range(K):
        torch.manual_seed(s)
        models.append(GaussianVAE(config, shape).to(dev))
    params, buffers = stack_module_state(models)
    base = models[0]
    opt = torch.optim.Adam(list(params.values()), lr=config.lr, **adam)

    def loss_one(p, x, eps):
        sub = lambda pre: {k[len(pre):]: v for k, v in p.items() if k.startswith(pre)}  # noqa: E731
        h = functional_call(base.encoder, sub("encoder."), (x,))
        mu = functional_call(base.mu_head, sub("mu_head."), (h,)).float()
        logvar = functional_call(base.logvar_head, sub("logvar_head."), (h,)).float()
        logits = functional_call(base.decoder, sub("decoder."), (mu + torch.exp(0.5 * logvar) * eps,))
        recon = F.binary_cross_entropy_with_logits(logits.float(), x, reduction="none").flatten(1).sum(1).mean()
        return recon + (0.5 * (mu.square() + logvar.exp() - logvar - 1.0)).sum(1).mean()

    gv = vmap(grad_and_value(loss_one))

    def one():
        x = batch(K)
        eps = torch.randn((K, B, config.latent_dim), device=dev, generator=gen)
        with torch.autocast(dev.type, dtype=dtype or torch.float32, enabled=dtype is not None, **cast):
            grads, loss = gv(params, x, eps)
        for k, p in params.items():
            p.grad = grads[k]
        opt.step()
        return loss.detach()

t0 = time.perf_counter()
if args.cuda_graph:  # PyTorch's whole-network capture: warm up on a side stream (Adam's state), then capture
    eager = one
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(3, args.warmup)):
            eager()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = eager()

    def one():
        graph.replay()
        return static_loss
for _ in range(args.warmup):
    one()
if dev.type == "cuda":
    torch.cuda.synchronize()
warm = time.perf_counter() - t0
t0 = time.perf_counter()
for _ in range(args.steps):
    last = one()
final = float(last.float().mean())
wall = time.perf_counter() - t0
print(json.dumps({"precision": args.precision, "seeds": K, "compile": args.compile and args.compile_mode,
                  "cuda_graph": args.cuda_graph, "steps": args.steps,
                  "steps_per_s": round(args.steps / wall, 1), "model_steps_per_s": round(K * args.steps / wall, 1),
                  "warmup_s": round(warm, 1), "loss": round(final, 1)}))
PYEOF

# ------------------------------------------------------------------------------------------------ steps
step_env() {
    local gpu="no nvidia-smi"
    if command -v nvidia-smi >/dev/null 2>&1; then
        gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)
    fi
    DETAIL="GPU: $gpu; $(nproc) CPU cores; $($PYTHON --version 2>&1); DEVICE=$DEVICE"
    if [ "$DEVICE" = cuda ] && ! command -v nvidia-smi >/dev/null 2>&1; then STATUS=WARN; else STATUS=OK; fi
}

make_shim() {  # factorbench importable from this checkout without installing it (namespace package + links)
    SHIM="$WORK/shim"
    rm -rf "$SHIM"; mkdir -p "$SHIM/factorbench"
    ln -s "$REPO/generators" "$SHIM/factorbench/generators"
    ln -s "$REPO/benchmark" "$SHIM/factorbench/benchmark"
    ln -s "$REPO/baselines" "$SHIM/factorbench/baselines"
    export PYTHONPATH="$SHIM${PYTHONPATH:+:$PYTHONPATH}"
}

step_install() {
    # Everything goes into $WORK/venv (or $VENV): never into a system-wide Python. The new environment sees the
    # packages of $PYTHON's environment through a .pth file, so a CUDA torch already there (a cloud image,
    # a container) is used as it is and not downloaded again.
    local log="$WORK/logs/install.log" pipx=() torch_note="" t_end rc=0 extras="train,test" v
    t_end=$(( $(date +%s) + STEP_T ))
    if [ -n "$WHEELS" ]; then
        # offline: only the wheels given (plus what is installed); the build backend already installed; the
        # test extra's selenium (leaderboard tests only) left out: pytest and hypothesis are usually there
        pipx=(--no-index --find-links "$WHEELS" --no-build-isolation); extras="train"
    fi
    : > "$log"
    if [ -n "$VENV" ] && [ -x "$VENV/bin/python" ]; then
        VPY="$VENV/bin/python"
    elif [ "$SKIP_INSTALL" = 1 ]; then
        VPY=$PYTHON
    else
        v="$WORK/venv"
        if [ ! -x "$v/bin/python" ]; then
            rm -rf "$v"
            tmo $(( STEP_T / 2 )) $PYTHON -m venv "$v" >> "$log" 2>&1 || rm -rf "$v"
        fi
        if [ ! -x "$v/bin/python" ]; then
            # no ensurepip (a distribution's python3 without python3-venv): a venv without its own pip; the
            # base environment's pip is reached through the .pth file below and installs into this venv
            echo "--- venv with pip failed; retrying --without-pip" >> "$log"
            tmo $(( STEP_T / 4 )) $PYTHON -m venv --without-pip "$v" >> "$log" 2>&1 || rm -rf "$v"
        fi
        if [ ! -x "$v/bin/python" ]; then
            STATUS=FAIL; DETAIL="could not create a virtual environment in $v with $PYTHON (python3-venv missing?); "
            DETAIL+="nothing installed (set VENV=DIR or SKIP_INSTALL=1); $(tail -1 "$log")"
            return
        fi
        # the base environment's packages (a preinstalled CUDA torch, numpy, ...) visible behind the venv's own
        $PYTHON -c 'import site, sys; print("\n".join(p for p in site.getsitepackages() + [site.getusersitepackages()]))' \
            > "$("$v/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-base-env.pth" 2>>"$log"
        VPY="$v/bin/python"
    fi
    if [ "$SKIP_INSTALL" != 1 ]; then
        if "$VPY" -c 'import sys, torch; sys.exit(0 if torch.version.cuda else 1)' >/dev/null 2>&1; then
            torch_note="kept the CUDA torch already installed"
        elif [ "$DEVICE" = cuda ] || ! "$VPY" -c 'import torch' >/dev/null 2>&1; then
            # PyPI's default torch wheel for Linux x86-64 is the CUDA build (not this project's CPU pin)
            log "pip install $TORCH_SPEC (plain torch: PyPI's default Linux x86-64 wheel is the CUDA build)"
            tmo $(( t_end - $(date +%s) )) "$VPY" -m pip install -q ${pipx[@]+"${pipx[@]}"} "$TORCH_SPEC" >> "$log" 2>&1 || rc=$?
            torch_note="pip install $TORCH_SPEC: rc $rc"
        fi
        if [ -n "$WHEELS" ] && ls "$WHEELS"/*.whl >/dev/null 2>&1; then
            # the carried wheels themselves first, so that they are there even if the editable install fails
            # (their own needs, numpy, cloudpickle, typing_extensions, are in the base environment)
            tmo $(( t_end - $(date +%s) )) "$VPY" -m pip install -q --no-index --no-deps "$WHEELS"/*.whl >> "$log" 2>&1 \
                || torch_note="$torch_note; wheels from $WHEELS: install failed"
        fi
        if ! tmo $(( t_end - $(date +%s) )) "$VPY" -m pip install -q ${pipx[@]+"${pipx[@]}"} -e "${REPO}[$extras]" >> "$log" 2>&1; then
            # offline or a missing build backend: the checkout itself, through a shim, with what is installed
            echo "--- editable install failed; using a shim of the checkout" >> "$log"
            make_shim
            torch_note="$torch_note; project via shim (pip install -e failed, see install.log)"
        fi
    else
        "$VPY" -c 'import factorbench.baselines' >/dev/null 2>&1 || make_shim
    fi
    local info
    info=$("$VPY" - "$DEVICE" 2>>"$log" <<'PY'
import importlib, sys
import torch
missing = [m for m in ("factorbench.baselines.trainer", "safetensors", "submitit", "moderngl", "trimesh", "h5py",
                       "sklearn", "pytest") if importlib.util.find_spec(m.split(".")[0]) is None]
try:
    import factorbench.baselines.trainer  # noqa: F401
except Exception as exc:  # noqa: BLE001
    missing.append(f"factorbench ({type(exc).__name__})")
cuda = torch.cuda.is_available()
print(f"torch {torch.__version__} (CUDA build {torch.version.cuda}, cuda available {cuda}"
      + (f", {torch.cuda.get_device_name(0)}, bf16 {torch.cuda.is_bf16_supported(including_emulation=False)}" if cuda else "") + ")"
      + (f"; MISSING: {', '.join(missing)}" if missing else "; all imports ok"))
sys.exit(1 if (sys.argv[1] == "cuda" and not cuda) or any(m.startswith("factorbench") for m in missing) else 0)
PY
)
    rc=$?
    DETAIL="$info${torch_note:+; $torch_note}; python $VPY"
    if [ $rc = 0 ]; then STATUS=OK; INSTALL_OK=1; else STATUS=FAIL; fi
}

SQUARE=""
step_data() {
    local log="$WORK/logs/data.log"
    SQUARE=$(tmo "$STEP_T" "$VPY" - 2>"$log" <<'PY'
from factorbench.baselines.data import resolve_dataset
print(resolve_dataset("square", progress=False))
PY
)
    local rc=$?
    STATUS=$(status_of $rc)
    if [ $rc = 0 ] && [ -f "$SQUARE" ]; then
        DETAIL="square in the cache: $SQUARE ($(du -h "$SQUARE" | cut -f1))"
    else
        DETAIL="square not prepared (rc $rc): $(tail -1 "$log")"; SQUARE=""
    fi
}

train_vae() {  # train_vae PRECISION
    local prec=$1 out="$WORK/runs/vae-$1" log="$WORK/logs/train-$1.log" util rc
    gpu_sampler_start "$WORK/logs/gpu-train-$prec.csv"
    tmo "$STEP_T" "$VPY" -m factorbench.benchmark.cli train vae --dataset "${SQUARE:-square}" --out "$out" \
        --steps "$STEPS" --device "$DEVICE" --precision "$prec" --threads "$THREADS" --quiet > "$log" 2>&1
    rc=$?
    util=$(gpu_sampler_stop "$WORK/logs/gpu-train-$prec.csv")
    STATUS=$(status_of $rc)
    DETAIL="$(fbpy runinfo "$out" 2>>"$log")"
    [ $rc = 0 ] || DETAIL="rc $rc: $DETAIL; $(tail -1 "$log")"
    DETAIL="$DETAIL$util"
}
step_train_auto() { train_vae auto; }
step_train_fp32() { train_vae fp32; }

pack_runs() {  # pack_runs TAG: PACK concurrent processes; sets STATUS and DETAIL
    local tag=$1 pids=() dirs=() t0 wall k util
    gpu_sampler_start "$WORK/logs/gpu-$tag.csv"
    t0=$(now)
    for k in $(seq 1 "$PACK"); do
        dirs+=("$WORK/runs/$tag-$k")
        tmo "$STEP_T" "$VPY" -m factorbench.benchmark.cli train vae --dataset "${SQUARE:-square}" \
            --out "$WORK/runs/$tag-$k" --steps "$STEPS" --seed "$k" --device "$DEVICE" --precision auto \
            --threads "$THREADS" --quiet > "$WORK/logs/$tag-$k.log" 2>&1 &
        pids+=($!)
    done
    for k in "${pids[@]}"; do wait "$k"; done
    wall=$(elapsed "$t0")
    util=$(gpu_sampler_stop "$WORK/logs/gpu-$tag.csv")
    DETAIL="$(fbpy packinfo "$wall" "$WORK/runs/vae-auto" "${dirs[@]}" 2>>"$WORK/logs/$tag.log")"
    if [ $? = 0 ]; then STATUS=OK; else STATUS=FAIL; DETAIL="$DETAIL; last log lines: $(tail -qn1 "$WORK"/logs/"$tag"-*.log 2>/dev/null | sort | uniq -c | head -2 | tr '\n' ' ')"; fi
    DETAIL="$DETAIL; wall ${wall}s$util"
}
step_pack() { pack_runs pack; }

step_eval() {
    local run="$WORK/runs/vae-auto" log="$WORK/logs/eval.log" parts=() rc=0 each
    if [ ! -f "$run/DONE" ]; then STATUS=SKIP; DETAIL="no finished train_auto run"; return; fi
    each=$(( STEP_T / 3 ))
    # shellcheck disable=SC2086
    parts+=("$(tmo "$each" "$VPY" "$WORK/py/fbcheck.py" eval "$run" square-lsbd-v1 cpu "$WORK/runs/eval-cpu.json" tf32 $EVAL_LABELS 2>>"$log")") || rc=1
    if [ "$DEVICE" = cuda ]; then
        # shellcheck disable=SC2086
        parts+=("$(tmo "$each" "$VPY" "$WORK/py/fbcheck.py" eval "$run" square-lsbd-v1 cuda "$WORK/runs/eval-cuda.json" tf32 $EVAL_LABELS 2>>"$log")") || rc=1
        # shellcheck disable=SC2086
        parts+=("$(tmo "$each" "$VPY" "$WORK/py/fbcheck.py" eval "$run" square-lsbd-v1 cuda "$WORK/runs/eval-cuda-notf32.json" notf32 $EVAL_LABELS 2>>"$log")") || rc=1
        DETAIL="$(fbpy evalcmp "$WORK/runs/eval-cpu.json" "$WORK/runs/eval-cuda.json" "$WORK/runs/eval-cuda-notf32.json" 2>>"$log")"
    else
        # shellcheck disable=SC2086
        parts+=("$(tmo "$each" "$VPY" "$WORK/py/fbcheck.py" eval "$run" square-lsbd-v1 cpu "$WORK/runs/eval-cpu2.json" tf32 $EVAL_LABELS 2>>"$log")") || rc=1
        DETAIL="$(fbpy evalcmp "$WORK/runs/eval-cpu.json" "$WORK/runs/eval-cpu2.json" 2>>"$log")"
    fi
    [ $rc = 0 ] && STATUS=OK || { STATUS=FAIL; DETAIL="$DETAIL; $(tail -1 "$log")"; }
    DETAIL="$DETAIL [$(IFS='|'; echo "${parts[*]}")]"
}

step_xdevice() {
    local log="$WORK/logs/xdevice" a b
    a=$(tmo $(( STEP_T / 2 )) "$VPY" "$WORK/py/fbcheck.py" xdevice "${SQUARE:-square}" cpu "$DEVICE" "$WORK/runs" 1 2>"$log-1.log")
    local ra=$?
    b=$(tmo $(( STEP_T / 2 )) "$VPY" "$WORK/py/fbcheck.py" xdevice "${SQUARE:-square}" "$DEVICE" cpu "$WORK/runs" 2 2>"$log-2.log")
    local rb=$?
    [ -z "$a" ] && a="cpu->$DEVICE: rc $ra: $(tail -1 "$log-1.log")"
    [ -z "$b" ] && b="$DEVICE->cpu: rc $rb: $(tail -1 "$log-2.log")"
    DETAIL="$a | $b"
    if [ $ra = 0 ] && [ $rb = 0 ]; then STATUS=OK; else STATUS=FAIL; fi
}

step_tests() {
    local log="$WORK/logs/tests.log" files=() xd=() line devs
    for f in ${TESTS:-tests/test_baselines_training.py tests/test_baselines_terms.py tests/test_baselines_adavae.py \
             tests/test_baselines_lsbd.py tests/test_baselines_quessard.py tests/test_baselines_infogan.py}; do
        [ -f "$f" ] && files+=("$f")
    done
    if "$VPY" -c 'import xdist' >/dev/null 2>&1; then xd=(-n 4); fi
    : > "$WORK/logs/test-devices.txt"
    FB_TEST_DEVICE=$DEVICE FB_TEST_DEVICE_LOG="$WORK/logs/test-devices.txt" \
        PYTHONPATH="$WORK/py${PYTHONPATH:+:$PYTHONPATH}" \
        tmo "$STEP_T" "$VPY" -m pytest -v -rf -p fbcheck_plugin -p no:cacheprovider ${xd[@]+"${xd[@]}"} \
        ${PYTEST_ARGS:-} "${files[@]}" > "$log" 2>&1
    local rc=$?
    line=$(grep -E '[0-9]+ (passed|failed)' "$log" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//')
    if [ -z "$line" ]; then  # killed before its summary: count the verbose result lines printed so far
        line=$(awk '/ PASSED/ { p++ } / FAILED/ { f++ } / ERROR/ { e++ } / SKIPPED/ { s++ }
                    END { printf "stopped at the timeout after %d passed, %d failed, %d errors, %d skipped",
                          p, f, e, s }' "$log")
    fi
    devs=$(sort "$WORK/logs/test-devices.txt" | uniq -c | awk '{ printf "%s%d on %s", (NR > 1 ? ", " : ""), $1, $2 }')
    DETAIL="${line:-no pytest summary (rc $rc)}; train() ran ${devs:-nowhere}"
    local failed
    # the failing tests' names, from the summary or (killed before it) from the verbose lines
    failed=$({ grep -E '^FAILED' "$log" | sed -E 's/^FAILED [^:]*::([^ ]*).*/\1/';
               grep -E ' FAILED' "$log" | grep -oE '::[^ ]+' | sed 's/^:://'; } | sort -u | head -12 | tr '\n' ' ')
    [ -n "$failed" ] && DETAIL="$DETAIL; failed: $failed"
    case $rc in 0) STATUS=OK ;; 124|137) STATUS=TIMEOUT ;; *) STATUS=FAIL ;; esac
}

step_sweep() {
    # a plan's jobs on this GPU (PACK processes share it); stopped by SIGTERM at the step's timeout less the
    # collection time (running jobs checkpoint and count as interrupted), then every finished job collected
    local log="$WORK/logs/sweep.log" dir="$WORK/sweep" ref="$WORK/reference" collect_s=${SWEEP_COLLECT_S:-25} rc util n
    local pack=()
    [ "$DEVICE" = cuda ] && pack=(--pack "$PACK")  # a CPU dry run runs the jobs side by side instead
    if [ -z "${SWEEP_PLAN:-}" ]; then STATUS=SKIP; DETAIL="no SWEEP_PLAN given"; return; fi
    mkdir -p "$ref"
    local mps_note=""
    if [ "${SWEEP_MPS:-0}" = 1 ]; then  # the jobs share the GPU through MPS (1.4-2x the aggregate steps/s of plain processes in the pack step)
        if mps_start; then mps_note="; under MPS"; else mps_note="; without MPS ($MPS_WHY)"; fi
    fi
    gpu_sampler_start "$WORK/logs/gpu-sweep.csv"
    tmo $(( STEP_T - collect_s )) "$VPY" -m factorbench.benchmark.cli sweep "$SWEEP_PLAN" --dir "$dir" \
        ${SWEEP_ONLY:+--only "$SWEEP_ONLY"} --jobs "${SWEEP_JOBS:-$PACK}" ${pack[@]+"${pack[@]}"} --device "$DEVICE" \
        --precision "${SWEEP_PRECISION:-fp32}" --threads "$THREADS" \
        --data-workers "${SWEEP_DATA_WORKERS:-$(nproc)}" > "$log" 2>&1
    rc=$?
    util=$(gpu_sampler_stop "$WORK/logs/gpu-sweep.csv")
    [ -n "$mps_note" ] && mps_stop
    fb sweep "$SWEEP_PLAN" --dir "$dir" --status > "$WORK/logs/sweep-status.txt" 2>&1
    tmo $(( collect_s - 3 )) "$VPY" -m factorbench.benchmark.cli sweep "$SWEEP_PLAN" --dir "$dir" --collect "$ref" \
        >> "$log" 2>&1
    n=$(find "$ref" -name '*.json' | wc -l)
    DETAIL="$SWEEP_PLAN ${SWEEP_ONLY:-(all)}: $(grep -m1 -E '^[0-9]+ jobs' "$WORK/logs/sweep-status.txt"); $n reference files in $ref$util$mps_note"
    case $rc in 0) STATUS=OK ;; 124|137) STATUS=TIMEOUT ;; *) STATUS=FAIL; DETAIL="rc $rc: $DETAIL; $(tail -1 "$log")" ;; esac
}

step_teapot() {
    local log="$WORK/logs/teapot.log" out="$WORK/teapot.h5" gl t0 rc
    rm -f "$out" "$out.partial"
    gl=$(tmo 30 "$VPY" "$WORK/py/fbcheck.py" glinfo 2>>"$log")
    if [ "$DEVICE" = cuda ] && ! echo "$gl" | grep -qi nvidia; then
        # Mesa (llvmpipe) or nothing: point glvnd at NVIDIA's EGL vendor library where the driver ships one
        for j in /usr/share/glvnd/egl_vendor.d/10_nvidia.json /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json \
                 /etc/glvnd/egl_vendor.d/10_nvidia.json; do
            if [ -f "$j" ]; then
                export __EGL_VENDOR_LIBRARY_FILENAMES=$j
                gl="$gl -> with $j: $(tmo 30 "$VPY" "$WORK/py/fbcheck.py" glinfo 2>>"$log")"
                break
            fi
        done
    fi
    t0=$(now)
    tmo $(( STEP_T - 10 )) "$VPY" -m factorbench.benchmark.cli generate teapot --out "$out" --n "$TEAPOT_N" \
        --backend gl --quiet >> "$log" 2>&1
    rc=$?
    local secs; secs=$(elapsed "$t0")
    DETAIL="$(fbpy h5info "$out" "$secs" 2>>"$log")"
    [ -z "$DETAIL" ] && DETAIL="rc $rc: $(tail -1 "$log")"
    DETAIL="$DETAIL; EGL: $gl"
    STATUS=$(status_of $rc)
}

step_minimal() {
    local log="$WORK/logs/minimal.log" parts=() r each
    [ -z "$SQUARE" ] && { STATUS=SKIP; DETAIL="no dataset"; return; }
    local configs=()
    local default="--precision fp32;--precision bf16;--precision bf16 --seeds 8;--precision fp32 --compile"
    # on a GPU: the launch-bound step captured as one CUDA graph, alone and over 8 / 64 vmapped models
    [ "$DEVICE" = cuda ] && default="--precision fp32;--precision fp32 --cuda-graph;--precision fp32 --seeds 8 --cuda-graph;--precision fp32 --seeds 64 --cuda-graph;--precision fp32 --compile --compile-mode reduce-overhead"
    IFS=';' read -r -a configs <<< "${MIN_ARGS:-$default}"
    each=$(( STEP_T / ${#configs[@]} ))
    for args in "${configs[@]}"; do
        [ "$(left_s)" -lt 15 ] && break
        # shellcheck disable=SC2086
        r=$(tmo "$each" "$VPY" "$WORK/py/minimal_loop.py" --dataset "$SQUARE" --device "$DEVICE" --steps "${MIN_STEPS:-$STEPS}" \
            --threads "$THREADS" $args 2>>"$log" | tail -1)
        local rc=$?
        [ -z "$r" ] && r="{\"args\": \"$args\", \"rc\": $rc}"
        parts+=("$r")
    done
    DETAIL=$(printf '%s\n' "${parts[@]}" | fbpy minsummary)
    [ ${#parts[@]} -gt 0 ] && STATUS=OK || STATUS=FAIL
    grep -q '"rc"' <<< "$(printf '%s\n' "${parts[@]}")" && STATUS=PARTIAL
}

step_stream() {
    local out="$WORK/runs/vae-streamed" log="$WORK/logs/stream.log"
    [ -z "$SQUARE" ] && { STATUS=SKIP; DETAIL="no dataset"; return; }
    DETAIL=$(tmo "$STEP_T" "$VPY" "$WORK/py/fbcheck.py" stream "$SQUARE" "$DEVICE" "$STEPS" "$out" "$THREADS" 2>>"$log")
    local rc=$?
    STATUS=$(status_of $rc)
    DETAIL="HDF5 read-ahead thread (memory_limit=0): ${DETAIL:-rc $rc: $(tail -1 "$log")}"
}

# mps_start: the CUDA MPS daemon for the processes started after it (its pipe and logs under $WORK/mps);
# returns 1 where it cannot run, with the reason in MPS_WHY. mps_stop: the daemon ended (cleanup on exit too).
# Both run in this shell (never in $(...)): the daemon's variables must reach the processes started later.
MPS_WHY=""
mps_start() {
    MPS_WHY=""
    if [ "$DEVICE" != cuda ] || ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
        MPS_WHY="no nvidia-cuda-mps-control (or DEVICE=cpu)"; return 1
    fi
    export CUDA_MPS_PIPE_DIRECTORY="$WORK/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$WORK/mps/log"
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if ! tmo 10 nvidia-cuda-mps-control -d > "$WORK/logs/mps.log" 2>&1; then
        MPS_WHY="MPS daemon did not start: $(tail -1 "$WORK/logs/mps.log")"
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; return 1
    fi
    MPS_UP=1
}
mps_stop() {
    if [ "$MPS_UP" = 1 ]; then echo quit | nvidia-cuda-mps-control >/dev/null 2>&1; MPS_UP=0; fi
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}

step_mps() {
    if ! mps_start; then
        case $MPS_WHY in no\ nvidia*) STATUS=SKIP ;; *) STATUS=FAIL ;; esac
        DETAIL=$MPS_WHY; return
    fi
    pack_runs pack-mps
    mps_stop
    DETAIL="under MPS: $DETAIL"
}

# ------------------------------------------------------------------------------------------------- plan
#          name        cap  min  function
run_step   env          15    5  step_env
run_step   install     210   30  step_install
run_step   data         90   10  step_data
run_step   train_auto   75   20  step_train_auto
run_step   train_fp32   75   20  step_train_fp32
run_step   pack        100   30  step_pack
run_step   minimal     ${MIN_CAP:-100}   30  step_minimal
run_step   mps         100   40  step_mps
run_step   eval         90   25  step_eval
run_step   xdevice      40   15  step_xdevice
run_step   tests       ${TESTS_CAP:-110}   30  step_tests
run_step   sweep       ${SWEEP_CAP:-480}   60  step_sweep
run_step   teapot      150   30  step_teapot
run_step   stream       60   20  step_stream
exit 0
