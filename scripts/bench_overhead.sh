#!/usr/bin/env bash
# Single-rank data-parallel overhead (the roadmap's goal: <= 1%; DDP: 3%): for
# each model, build/bench_overhead times training steps taken directly and
# through the DistributedOptimizer over a world of one, alternating blocks in
# one process (scripts/bench/bench_overhead.cpp), and this prints one row per
# model and a JSON last line.
# usage: scripts/bench_overhead.sh [--rounds 10] [--steps 10]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="${BUILD_DIR:-$ROOT/build}"
ROUNDS=10 STEPS=10
while (($#)); do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "bench_overhead.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x $BUILD/bench_overhead ]] || { echo "bench_overhead.sh: $BUILD/bench_overhead not built (scripts/build.sh)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; $ROUNDS rounds of $STEPS steps each way"
printf '%-10s %-16s %12s %12s %9s\n' model "batch, threads" "plain ms" "wrapped ms" overhead
rows=()
while read -r model batch threads extra; do
  line=$("$BUILD/bench_overhead" --model "$model" --batch-size "$batch" --threads "$threads" --rounds "$ROUNDS" \
         --steps "$STEPS" $extra | tail -1)
  rows+=("$line")
  python3 - "$line" "$batch" "$threads" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
print(f"{j['model']:<10} {sys.argv[2] + ', ' + sys.argv[3]:<16} {j['plain_ms']:>12.2f} {j['wrapped_ms']:>12.2f} {100 * j['overhead']:>+8.2f}%")
PY
done <<'EOF_MODELS'
lenet 256 1
keras-cnn 256 1
resnet20 64 2
resnet50 32 2 --image-size 64
EOF_MODELS
python3 -c 'import json,sys; print(json.dumps({"bench": "overhead", "results": [json.loads(a) for a in sys.argv[1:]]}))' "${rows[@]}"
