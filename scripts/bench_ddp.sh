#!/usr/bin/env bash
# Data-parallel scaling on this machine: lockstep under mpirun against PyTorch
# DDP (gloo), same model, same per-rank batch, 1 compute thread per rank.
#
# Each round runs, back to back: lockstep at N=1 and N=2 (mpirun -np N trainer
# on Fashion-MNIST; the metrics summary's images/s over all ranks, first 5
# steps excluded), then DDP at N=1 and N=2 (scripts/bench/torch_ddp.py; one
# fixed synthetic batch per rank, median of timed windows). Reports medians
# over rounds and the scaling efficiency img/s(N=2) / (2 x img/s(N=1)).
# Last line: JSON.
# usage: scripts/bench_ddp.sh [--models "lenet keras-cnn"] [--batch 128] [--reps 5] [--steps 150]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
MODELS="lenet keras-cnn" BATCH=128 REPS=5 STEPS=150
while [[ $# -gt 0 ]]; do
  case $1 in
    --models) MODELS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    *) echo "bench_ddp.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
"$ROOT/scripts/build.sh" > /dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A CPU benchmark: the CPU even where --device auto would find a GPU (a
# command-line --device still wins).
export LOCKSTEP_DEVICE="${LOCKSTEP_DEVICE:-cpu}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; batch $BATCH per rank, 1 thread per rank, $REPS rounds"

lockstep_ips() {  # model ranks
  local steps=$STEPS
  [[ $1 == keras-cnn ]] && steps=$((STEPS / 3))
  mpirun -np "$2" "$BUILD/trainer" --model "$1" --batch-size "$BATCH" --threads 1 --max-steps "$steps" \
    --progress off --metrics-file "$WORK/m.jsonl" > /dev/null
  python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1]["images_per_sec"])' "$WORK/m.jsonl"
}
ddp_ips() {  # model ranks
  /usr/bin/python3 "$ROOT/scripts/bench/torch_ddp.py" --model "$1" --world "$2" --batch-size "$BATCH" --threads 1 \
    --steps 40 | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["images_per_sec"])'
}

results=()
for model in $MODELS; do
  l1=() l2=() d1=() d2=()
  for ((r = 1; r <= REPS; ++r)); do
    l1+=("$(lockstep_ips "$model" 1)")
    l2+=("$(lockstep_ips "$model" 2)")
    d1+=("$(ddp_ips "$model" 1)")
    d2+=("$(ddp_ips "$model" 2)")
    printf '  %s round %d: lockstep %.0f / %.0f img/s, DDP %.0f / %.0f img/s (N=1 / N=2)\n' \
      "$model" "$r" "${l1[-1]}" "${l2[-1]}" "${d1[-1]}" "${d2[-1]}"
  done
  results+=("$(python3 - "$model" "${l1[*]}" "${l2[*]}" "${d1[*]}" "${d2[*]}" <<'PY'
import json, statistics, sys
model = sys.argv[1]
l1, l2, d1, d2 = ([float(v) for v in a.split()] for a in sys.argv[2:6])
m = {k: statistics.median(v) for k, v in (("l1", l1), ("l2", l2), ("d1", d1), ("d2", d2))}
print(json.dumps({"model": model,
                  "lockstep": {"n1": round(m["l1"]), "n2": round(m["l2"]), "efficiency": round(m["l2"] / (2 * m["l1"]), 3),
                               "runs_n1": [round(v) for v in l1], "runs_n2": [round(v) for v in l2]},
                  "ddp_gloo": {"n1": round(m["d1"]), "n2": round(m["d2"]), "efficiency": round(m["d2"] / (2 * m["d1"]), 3),
                               "runs_n1": [round(v) for v in d1], "runs_n2": [round(v) for v in d2]},
                  "lockstep_over_ddp_n2": round(m["l2"] / m["d2"], 2)}))
PY
)")
done
python3 - "${results[@]}" <<'PY'
import json, sys
rows = [json.loads(a) for a in sys.argv[1:]]
print(f"\n{'model':<10} {'impl':<10} {'N=1 img/s':>10} {'N=2 img/s':>10} {'efficiency':>11}")
for r in rows:
    for impl in ("lockstep", "ddp_gloo"):
        x = r[impl]
        print(f"{r['model']:<10} {impl:<10} {x['n1']:>10,} {x['n2']:>10,} {x['efficiency']:>11.3f}")
print(json.dumps({"bench": "ddp", "results": rows}))
PY
