#!/usr/bin/env bash
# --zero-stage 1 (ZeRO-1: optimizer state sharded over the ranks) against
# stage 0, side by side: for each model and optimizer, ROUNDS rounds in which
# the two stages run one after the other (N ranks on this host, --benchmark
# data, STEPS steps with the first 5 left out). Reports per stage the median
# ms per step (the trainer's benchmark line), the median over rounds of the
# largest peak resident memory of any rank (/usr/bin/time %M; the OS counts a
# shared page in every process that has touched it, so with shared memory
# that overstates what the ranks hold together), the optimizer state per rank
# (from the trainer's log), and the ratios. Last line: JSON.
# usage: scripts/bench_zero.sh [--ranks 2] [--rounds 3] [--steps 12]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
RANKS=2 ROUNDS=3 STEPS=12
while [[ $# -gt 0 ]]; do
  case $1 in
    --ranks) RANKS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "bench_zero.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $RANKS =~ ^[1-9][0-9]*$ && $ROUNDS =~ ^[1-9][0-9]*$ && $STEPS =~ ^[0-9]+$ && $STEPS -gt 5 ]] ||
  { echo "bench_zero.sh: --ranks and --rounds must be positive integers, --steps more than 5" >&2; exit 2; }
[[ -x $BUILD/trainer ]] || { echo "bench_zero.sh: $BUILD/trainer not built (scripts/build.sh)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "bench_zero.sh: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A CPU benchmark: the CPU even where --device auto would find a GPU (a
# command-line --device still wins).
export LOCKSTEP_DEVICE="${LOCKSTEP_DEVICE:-cpu}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; $RANKS ranks, $ROUNDS rounds of $STEPS steps"
printf '%-22s %-6s %10s %10s %8s %12s %12s %8s %14s\n' model optim "stage0 ms" "stage1 ms" "1 / 0" "stage0 MiB" "stage1 MiB" "1 / 0" "state MB/rank"
rows=()
while read -r model optim batch extra; do
  for ((r = 0; r < ROUNDS; ++r)); do
    for z in 0 1; do
      log="$WORK/$model-$optim-$z-$r.log"
      # Each rank's peak resident memory into its own file (lines from two ranks would interleave).
      mpirun -np "$RANKS" --oversubscribe bash -c 'exec /usr/bin/time -f %M -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' \
        "$WORK/$model-$optim-$z-$r.rss" "$BUILD/trainer" --benchmark --model "$model" \
        --batch-size "$batch" --optimizer "$optim" --lr 1e-3 --max-steps "$STEPS" --zero-stage $z --progress off \
        $extra < /dev/null > "$log" 2>&1 || { echo "bench_zero.sh: run failed:"; tail -5 "$log"; exit 1; }
    done
  done
  row=$(python3 - "$WORK" "$model" "$optim" "$ROUNDS" "$batch" "$extra" <<'PY'
import glob, json, re, statistics, sys
work, model, optim, rounds, batch, extra = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
out = {"model": model, "optimizer": optim, "batch_per_rank": int(batch), "extra": extra}
for z in (0, 1):
    ms, rss, state = [], [], None
    for r in range(rounds):
        text = open(f"{work}/{model}-{optim}-{z}-{r}.log").read()
        ms.append(float(re.search(r"([0-9.]+) ms per step", text).group(1)))
        rss.append(max(int(open(f).read().split()[-1]) for f in glob.glob(f"{work}/{model}-{optim}-{z}-{r}.rss.*")) / 1024)
        m = re.search(r"optimizer state sharded \(([0-9.]+) of ([0-9.]+) MB here\)", text)
        if m: state = (float(m.group(1)), float(m.group(2)))
    out[f"stage{z}_ms"] = statistics.median(ms)
    out[f"stage{z}_ms_rounds"] = ms
    out[f"stage{z}_peak_rss_mib"] = statistics.median(rss)
    out[f"stage{z}_peak_rss_mib_rounds"] = rss
out["state_mb_per_rank"] = {"stage0": state[1], "stage1": state[0]} if state else None
print(json.dumps(out))
PY
)
  rows+=("$row")
  python3 - "$row" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
s = j["state_mb_per_rank"]
print(f"{j['model'] + ' ' + j['extra']:<22} {j['optimizer']:<6} {j['stage0_ms']:>10.1f} {j['stage1_ms']:>10.1f} {j['stage1_ms'] / j['stage0_ms']:>8.3f} "
      f"{j['stage0_peak_rss_mib']:>12.0f} {j['stage1_peak_rss_mib']:>12.0f} {j['stage1_peak_rss_mib'] / j['stage0_peak_rss_mib']:>8.3f} "
      f"{(str(s['stage0']) + ' -> ' + str(s['stage1'])) if s else '-':>14}")
PY
done <<'EOF_MODELS'
resnet50 adam 16 --image-size 64
resnet50 sgd 16 --image-size 64
keras-cnn adam 128
EOF_MODELS
python3 -c 'import json,sys; print(json.dumps({"bench": "zero", "ranks": int(sys.argv[1]), "results": [json.loads(a) for a in sys.argv[2:]]}))' "$RANKS" "${rows[@]}"
