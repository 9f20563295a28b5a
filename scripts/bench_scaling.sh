#!/usr/bin/env bash
# The seeds' scaling table: one model trained under mpirun at N = 1, 2, ...
# ranks with the *global* batch fixed and split evenly (the seed notebook's
# batch 1024 over 1/2/4/8 GPUs). Prints each run's own epoch lines and
# "Average time" line, then
#   #ranks | train s/epoch | test s | train % | test % | img/s | speedup | efficiency
# with every figure from the run's metrics file (--metrics-file): train s/epoch
# and test s are the means over the epochs after the first when there are
# several (the "Average time" line's figures), accuracies are the last epoch's,
# img/s is the summary's (all ranks, first 5 steps excluded), speedup =
# img/s(N) / img/s(N=1) of the same invocation, efficiency = speedup / N.
# Rows with more ranks than cores say so. --benchmark runs have no test
# columns (—). Last line: JSON.
# usage: scripts/bench_scaling.sh MODEL [--ranks "1 2"] [--epochs 3] [--global-batch 1024]
#                                 [--optimizer adam] [--lr 0.001] [--benchmark] [-- extra trainer args]
# TRAINER=path/to/trainer runs that binary; otherwise scripts/build.sh builds
# $BUILD_DIR (default build/) first.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
usage() { sed -n '/^# usage:/,/^# TRAINER/{/^# TRAINER/!s/^# //p}' "$0" >&2; exit 2; }
[[ $# -ge 1 && $1 != -* ]] || usage
MODEL=$1; shift
RANKS="1 2" EPOCHS=3 GLOBAL_BATCH=1024 OPTIMIZER=adam LR=0.001 BENCHMARK=0
EXTRA=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --ranks) RANKS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --global-batch) GLOBAL_BATCH=$2; shift 2 ;;
    --optimizer) OPTIMIZER=$2; shift 2 ;;
    --lr) LR=$2; shift 2 ;;
    --benchmark) BENCHMARK=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "bench_scaling.sh: unknown argument $1" >&2; usage ;;
  esac
done
[[ $GLOBAL_BATCH =~ ^[1-9][0-9]*$ ]] || { echo "bench_scaling.sh: --global-batch: '$GLOBAL_BATCH' is not a positive whole number" >&2; exit 2; }
for n in $RANKS; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "bench_scaling.sh: --ranks: '$n' is not a positive whole number" >&2; exit 2; }
  ((GLOBAL_BATCH % n == 0)) || { echo "bench_scaling.sh: --global-batch $GLOBAL_BATCH does not split evenly over $n ranks" >&2; exit 2; }
done
if [[ -z ${TRAINER:-} ]]; then
  "$ROOT/scripts/build.sh" > /dev/null
  TRAINER="${BUILD_DIR:-$ROOT/build}/trainer"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A CPU benchmark: the CPU even where --device auto would find a GPU (a
# command-line --device still wins).
export LOCKSTEP_DEVICE="${LOCKSTEP_DEVICE:-cpu}"
CORES=$(nproc)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

MODE_ARGS=()
[[ $BENCHMARK == 1 ]] && MODE_ARGS=(--benchmark)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $CORES cores"
echo "$MODEL: global batch $GLOBAL_BATCH split over the ranks, $EPOCHS epochs, $OPTIMIZER lr $LR${MODE_ARGS[*]:+, benchmark mode}${EXTRA[*]:+; trainer args: ${EXTRA[*]}}"

runs=()
for n in $RANKS; do
  launch=(mpirun -np "$n")
  ((n > CORES)) && launch+=(--oversubscribe)
  cmd=("${launch[@]}" "$TRAINER" --model "$MODEL" --global-batch-size "$GLOBAL_BATCH" --epochs "$EPOCHS"
       --optimizer "$OPTIMIZER" --lr "$LR" --progress off --metrics-file "$WORK/n$n.jsonl" "${MODE_ARGS[@]}"
       "${EXTRA[@]}")
  echo
  echo "== $n rank$([[ $n == 1 ]] || echo s)$( ((n > CORES)) && echo " (oversubscribed: $n ranks on $CORES cores)"): ${cmd[*]}"
  if ! "${cmd[@]}" > "$WORK/n$n.log" 2>&1; then
    cat "$WORK/n$n.log"
    echo "bench_scaling.sh: the run at $n ranks failed" >&2
    exit 1
  fi
  # The run's own lines, as the seed shows them: one per epoch, the averages, the benchmark line.
  grep -E '^\[ *[0-9]+/[0-9]+\] |^Average time |^benchmark: ' "$WORK/n$n.log" || true
  runs+=("$n")
done

echo
python3 - "$WORK" "$CORES" "$MODEL" "$GLOBAL_BATCH" "$EPOCHS" "$OPTIMIZER" "$LR" "$BENCHMARK" "${runs[@]}" \
  -- "${EXTRA[@]}" <<'PY'
import json, sys
work, cores, model, global_batch, epochs, optimizer, lr, benchmark = sys.argv[1:9]
rest = sys.argv[9:]
split = rest.index("--")
ranks, extra = [int(n) for n in rest[:split]], rest[split + 1:]
cores = int(cores)

rows = []
for n in ranks:
    recs = [json.loads(line) for line in open(f"{work}/n{n}.jsonl")]
    ep = [r for r in recs if r["type"] == "epoch"]
    summary = [r for r in recs if r["type"] == "summary"]
    assert ep and summary, f"run at {n} ranks: no epoch or summary records"
    s = summary[-1]
    assert s["world_size"] == n, (n, s["world_size"])
    evaluated = s.get("eval", True)
    rows.append({
        "ranks": n,
        "train_seconds_per_epoch": s["mean_train_seconds"],
        "test_seconds": s["mean_test_seconds"] if evaluated else None,
        "train_acc": ep[-1]["train_acc"],
        "test_acc": ep[-1]["test_acc"] if evaluated else None,
        "images_per_sec": s["images_per_sec"],
        "epochs": len(ep),
        "oversubscribed": n > cores,
    })
base = next((r["images_per_sec"] for r in rows if r["ranks"] == 1), None)
for r in rows:
    r["speedup"] = r["images_per_sec"] / base if base else None
    r["efficiency"] = r["speedup"] / r["ranks"] if base else None

DASH = "\u2014"
def num(v, fmt):
    return DASH if v is None else format(v, fmt)
head = ["#ranks", "train s/epoch", "test s", "train %", "test %", "img/s", "speedup", "efficiency"]
table = [[str(r["ranks"]), num(r["train_seconds_per_epoch"], ".2f"), num(r["test_seconds"], ".2f"),
          num(100 * r["train_acc"], ".2f"), num(None if r["test_acc"] is None else 100 * r["test_acc"], ".2f"),
          num(r["images_per_sec"], ",.0f"), num(r["speedup"], ".2f"), num(r["efficiency"], ".2f")] for r in rows]
widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
print(" | ".join(h.rjust(w) for h, w in zip(head, widths)))
print("-|-".join("-" * w for w in widths))
for r, t in zip(rows, table):
    line = " | ".join(v.rjust(w) for v, w in zip(t, widths))
    if r["oversubscribed"]:
        line += f"  (oversubscribed: {r['ranks']} ranks on {cores} cores)"
    print(line)
print(json.dumps({"bench": "scaling", "model": model, "global_batch": int(global_batch), "epochs": int(epochs),
                  "optimizer": optimizer, "lr": float(lr), "benchmark": benchmark == "1", "cores": cores,
                  "extra_args": extra, "rows": rows}))
PY
