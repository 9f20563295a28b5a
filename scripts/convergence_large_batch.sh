#!/usr/bin/env bash
# The large-batch experiment of docs/convergence.md: keras-cnn on Fashion-MNIST,
# SGD with momentum 0.9, E epochs, base learning rate LR (default 0.05), LR
# schedule S (default constant), for each seed:
#   A  global batch 256, lr LR                         (the reference)
#   B  global batch 2048, lr LR                        (8x the batch, no recipe)
#   C  global batch 2048, lr LR x 2048/256,            (the recipe: linear scaling
#      warmup over W epochs from LR                     and gradual warmup)
# Prints each run's last-epoch test accuracy, then a table (mean and range over
# seeds) and one JSON line. The global batch is fixed, so the result does not
# depend on how many ranks run it (RANKS, default 1).
# usage: scripts/convergence_large_batch.sh [--epochs E] [--seeds "1 2"] [--warmup-epochs W] [--ranks N]
#                                          [--lr LR] [--schedule constant|cosine|step] [--runs "A B C"]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TRAINER="${TRAINER:-$ROOT/build/trainer}"
E=10 SEEDS="1 2" W=2 RANKS=1 LR=0.05 SCHEDULE=constant RUNS="A B C"
while [[ $# -gt 0 ]]; do
  case $1 in
    --epochs) E=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --warmup-epochs) W=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --lr) LR=$2; shift 2 ;;
    --schedule) SCHEDULE=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    *) echo "convergence_large_batch.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n "${TRAINER_PREBUILT:-}" ]] || "$ROOT/scripts/build.sh" > /dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A CPU run: the CPU even where --device auto would find a GPU (a
# command-line --device still wins).
export LOCKSTEP_DEVICE="${LOCKSTEP_DEVICE:-cpu}"
OUT="${OUT_DIR:-$(mktemp -d)}"
mkdir -p "$OUT"
echo "keras-cnn, Fashion-MNIST, $E epochs, SGD momentum 0.9, lr $LR ($SCHEDULE), seeds: $SEEDS, $RANKS rank(s); logs in $OUT"
run() {  # name seed args...
  local name=$1 seed=$2
  shift 2
  local cmd=("$TRAINER")
  ((RANKS > 1)) && cmd=(mpirun -np "$RANKS" --oversubscribe "$TRAINER")
  "${cmd[@]}" --model keras-cnn --epochs "$E" --optimizer sgd --momentum 0.9 --seed "$seed" --progress off \
    --lr "$LR" --lr-schedule "$SCHEDULE" --metrics-file "$OUT/$name-$seed.jsonl" "$@" > "$OUT/$name-$seed.log" 2>&1
  python3 -c 'import json,sys; e=[json.loads(l) for l in open(sys.argv[1])]; e=[x for x in e if x["type"]=="epoch"]; print("  %s seed %s: test %.2f%% after %d epochs" % (sys.argv[2], sys.argv[3], 100*e[-1]["test_acc"], len(e)))' \
    "$OUT/$name-$seed.jsonl" "$name" "$seed"
}
for seed in $SEEDS; do
  [[ " $RUNS " == *" A "* ]] && run A "$seed" --global-batch-size 256
  [[ " $RUNS " == *" B "* ]] && run B "$seed" --global-batch-size 2048
  [[ " $RUNS " == *" C "* ]] && run C "$seed" --global-batch-size 2048 --lr-scaling linear --base-batch-size 256 \
    --warmup-epochs "$W"
done
python3 - "$OUT" "$SEEDS" "$E" "$W" "$LR" "$SCHEDULE" "$RUNS" <<'PY'
import json, sys, statistics
out, seeds, E, W, LR, S, runs = (sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), sys.argv[4], float(sys.argv[5]),
                                 sys.argv[6], sys.argv[7].split())
def last(name, seed):
    e = [json.loads(l) for l in open(f"{out}/{name}-{seed}.jsonl")]
    return 100 * [x for x in e if x["type"] == "epoch"][-1]["test_acc"]
desc = {"A": f"batch 256, lr {LR:g}, {S}", "B": f"batch 2048, lr {LR:g}, {S} (no recipe)",
        "C": f"batch 2048, lr {8 * LR:g} (linear scaling), warmup {W} epochs, {S}"}
res = {k: [last(k, s) for s in seeds] for k in "ABC" if k in runs}
print("| run | configuration | test % per seed | mean | vs A |")
print("|---|---|---|---:|---:|")
for k in res:
    m = statistics.mean(res[k])
    vs = f"{m - statistics.mean(res['A']):+.2f}" if "A" in res else ""
    print(f"| {k} | {desc[k]} | {', '.join(f'{v:.2f}' for v in res[k])} | {m:.2f} | {vs} |")
print(json.dumps({"bench": "convergence", "model": "keras-cnn", "epochs": E, "warmup_epochs": float(W), "lr": LR,
                  "lr_schedule": S, "seeds": seeds, "test_acc": {k: [round(v, 2) for v in res[k]] for k in res}}))
PY
