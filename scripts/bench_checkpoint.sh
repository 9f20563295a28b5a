#!/usr/bin/env bash
# The stall a checkpoint puts on training: written before the next step
# (--checkpoint-write sync) against written on rank 0's writer thread while
# training goes on (background, the default).
#
# For each model and round, two trainer runs back to back (1 process,
# --threads 2, --max-steps STEPS, --no-eval, a checkpoint every 10 steps,
# --timeline): sync and background. A step's time is the span from its
# 'data wait' to the next step's, so the step that ends with a checkpoint
# holds what the checkpoint cost training. Per run, over the steps after the
# first 5: the median of the checkpoint steps against the median of the
# others; their difference is the stall per checkpoint, and its share at a
# checkpoint every 50 steps is that stall / (50 x the other steps' median).
# Beside it, from the trainer's debug lines: the write's own seconds, and for
# background the copy of the state into the writer's staging tensors.
# Models: keras-cnn on Fashion-MNIST (SGD), resnet50 at 64x64 on synthetic
# data (batch 16, SGD momentum 0.9), both with the momentum state in the file.
# Prints every run, then per model and mode the medians over rounds. Last line: JSON.
# usage: scripts/bench_checkpoint.sh [--quick] [--rounds 3] [--steps 45] [--models "keras-cnn resnet50"]
# --quick: a smoke test of every path (1 round, 15 steps, keras-cnn only; figures meaningless).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
ROUNDS=3 STEPS=45 MODELS="keras-cnn resnet50" QUICK=0
fail() { echo "bench_checkpoint.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) QUICK=1; shift ;;
    --rounds|--steps|--models)
      [[ $# -ge 2 ]] || fail "$1 needs a value"
      case $1 in --rounds) ROUNDS=$2 ;; --steps) STEPS=$2 ;; --models) MODELS=$2 ;; esac
      shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0"; exit 0 ;;
    *) fail "unknown argument '$1' (see --help)" ;;
  esac
done
((QUICK)) && { ROUNDS=1 STEPS=15 MODELS=keras-cnn; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || fail "--rounds: '$ROUNDS' is not a positive integer"
[[ $STEPS =~ ^[0-9]+$ && $STEPS -ge 15 ]] || fail "--steps: '$STEPS' is not an integer of at least 15 (5 warm-up steps, then a checkpoint every 10)"
[[ -n ${MODELS// /} ]] || fail "--models: give at least one of keras-cnn, resnet50"
for m in $MODELS; do [[ $m == keras-cnn || $m == resnet50 ]] || fail "--models: '$m' is not one of keras-cnn, resnet50"; done
[[ -x $BUILD/trainer ]] || fail "$BUILD/trainer is not built (scripts/build.sh, or BUILD_DIR=...)"

export LOCKSTEP_DEVICE="${LOCKSTEP_DEVICE:-cpu}"
WORK=$(mktemp -d /tmp/lockstep-bench-checkpoint.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
declare -A ARGS=(
  [keras-cnn]="--model keras-cnn --batch-size 128"
  [resnet50]="--model resnet50 --image-size 64 --dataset synthetic --synthetic-samples 100000 --batch-size 16"
)
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)
echo "machine: $CPU, $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS round(s) of $STEPS steps$( ((QUICK)) && echo ', --quick (figures meaningless)')"
RESULTS=$WORK/results
: > "$RESULTS"
for ((r = 1; r <= ROUNDS; ++r)); do
  for m in $MODELS; do
    for mode in sync background; do
      rm -rf "$WORK/ckpt" "$WORK/t.json"
      # shellcheck disable=SC2086
      "$BUILD/trainer" ${ARGS[$m]} --max-steps "$STEPS" --threads 2 --no-eval --progress off \
        --checkpoint-dir "$WORK/ckpt" --checkpoint-every 10 --checkpoint-write "$mode" --log-level debug \
        --timeline "$WORK/t.json" < /dev/null > "$WORK/run.log" 2>&1 ||
        { tail -5 "$WORK/run.log" >&2; fail "$m $mode failed in round $r"; }
      read -r ck other write copy < <(python3 - "$WORK/t.json" "$WORK/run.log" << 'PY'
import json, re, statistics, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
starts = sorted(e["ts"] for e in ev if e.get("name") == "data wait" and e.get("ph") in ("X", "B"))
# Step s (1-based) runs from starts[s-1] to starts[s]; the last has no end.
steps = {s: (starts[s] - starts[s - 1]) / 1000 for s in range(6, len(starts))}
ck = [v for s, v in steps.items() if s % 10 == 0]
other = [v for s, v in steps.items() if s % 10 != 0]
log = open(sys.argv[2]).read()
w = [float(x) for x in re.findall(r"written in ([0-9.]+) s", log)]
c = [float(x) for x in re.findall(r"state copied in ([0-9.]+) s", log)]
print(statistics.median(ck), statistics.median(other), statistics.median(w) if w else 0, statistics.median(c) if c else 0)
PY
)
      size=$(stat -c %s "$(ls "$WORK"/ckpt/ckpt-*.safetensors | tail -1)")
      echo "$m $mode $r $ck $other $write $copy $size" >> "$RESULTS"
      printf '  round %d %-9s %-10s checkpoint steps %8.1f ms, others %8.1f ms, write %.3f s, copy %.3f s, %s bytes\n' \
        "$r" "$m" "$mode" "$ck" "$other" "$write" "$copy" "$size"
    done
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$RESULTS" "$MODELS" "$STEPS" "$ROUNDS" "$QUICK" "$CPU" << 'PY'
import json, statistics, sys
path, models, steps, rounds, quick, cpu = sys.argv[1:7]
runs = {}
for line in open(path):
    m, mode, _, ck, other, write, copy, size = line.split()
    runs.setdefault((m, mode), []).append(dict(ck=float(ck), other=float(other), write=float(write),
                                               copy=float(copy), size=int(size)))
med = lambda rs, k: statistics.median(r[k] for r in rs)
out = {"bench": "checkpoint", "machine": cpu, "steps": int(steps), "rounds": int(rounds), "quick": quick == "1",
       "results": []}
print("\n| model | checkpoint MB | mode | step, ms | checkpoint step, ms | stall per checkpoint, ms | of 50 steps | write, s | state copy, ms |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
for m in models.split():
    for mode in ("sync", "background"):
        rs = runs[(m, mode)]
        stalls = [r["ck"] - r["other"] for r in rs]
        stall, base = statistics.median(stalls), med(rs, "other")
        row = {"model": m, "mode": mode, "checkpoint_bytes": rs[0]["size"], "step_ms": round(base, 1),
               "checkpoint_step_ms": round(med(rs, "ck"), 1), "stall_ms": round(stall, 1),
               "share_at_50_steps": round(stall / (50 * base), 4), "write_s": round(med(rs, "write"), 3),
               "copy_ms": round(1000 * med(rs, "copy"), 1), "runs_stall_ms": [round(v, 1) for v in stalls]}
        out["results"].append(row)
        copy = f"{row['copy_ms']:.1f}" if mode == "background" else "-"
        print(f"| {m} | {rs[0]['size'] / 1e6:.1f} | {mode} | {base:.1f} | {row['checkpoint_step_ms']:.1f} | "
              f"{stall:.1f} | {100 * row['share_at_50_steps']:.2f}% | {row['write_s']:.3f} | {copy} |")
print(json.dumps(out))
PY
