#!/usr/bin/env bash
# The hierarchical allreduce across hosts (--hierarchical-allreduce,
# runtime/comm/hierarchical_allreduce.h) against the flat ordered allreduce,
# side by side: --hosts network-namespace hosts on this machine (2;
# scripts/lib/namespace_hosts.sh), --per-host ranks on each (2), each host's
# sending rate capped by a token-bucket filter (--rates; "none": the bare veth).
#
# Per rate and round, alternating: bench_allreduce at each of --sizes through
# the flat path (--path ordered), the hierarchical one and MPI_Allreduce
# (median of 5 timed calls each; every run checks its sums: #wrong must be 0);
# then per model, trainer --benchmark with --hierarchical-allreduce off and on
# (synthetic data, 1 thread per rank, the metrics summary's images/s and
# exposed communication; --models "" skips them). --wire fp16 or bf16 sends
# 16-bit gradients (bench_allreduce --wire, trainer --grad-compression; no
# MPI_Allreduce then). --trainer-args adds options to every training run
# (e.g. "--zero-stage 1"). Reports medians over rounds and flat / hierarchical.
# With more ranks than cores the training runs are oversubscribed, and say so.
# Needs root. Last line: JSON.
# usage: scripts/bench_hierarchical.sh [--hosts 2] [--per-host 2] [--rates "none 1gbit"] [--sizes "4M 64M"]
#                                      [--models "keras-cnn resnet50"] [--reps 3] [--steps 20] [--wire f32]
#                                      [--trainer-args "..."]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
HOSTS=2 PER_HOST=2 RATES="none 1gbit" SIZES="4M 64M" MODELS="keras-cnn resnet50" REPS=3 STEPS=20 WIRE=f32 TRAINER_ARGS=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --hosts) HOSTS=$2; shift 2 ;;
    --per-host) PER_HOST=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --wire) WIRE=$2; shift 2 ;;
    --trainer-args) TRAINER_ARGS=$2; shift 2 ;;
    *) echo "bench_hierarchical.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) == 0 ]] || { echo "bench_hierarchical.sh: network namespaces, tc and sshd need root" >&2; exit 2; }
[[ $HOSTS =~ ^[2-8]$ ]] || { echo "bench_hierarchical.sh: --hosts: '$HOSTS' is not 2 to 8" >&2; exit 2; }
[[ $PER_HOST =~ ^[2-8]$ ]] || { echo "bench_hierarchical.sh: --per-host: '$PER_HOST' is not 2 to 8" >&2; exit 2; }
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "bench_hierarchical.sh: --reps: '$REPS' is not a positive integer" >&2; exit 2; }
[[ $STEPS =~ ^[0-9]+$ && $STEPS -ge 10 ]] || { echo "bench_hierarchical.sh: --steps: '$STEPS' is not an integer >= 10" >&2; exit 2; }
[[ $WIRE == f32 || $WIRE == fp16 || $WIRE == bf16 ]] || { echo "bench_hierarchical.sh: --wire: '$WIRE' is not f32, fp16 or bf16" >&2; exit 2; }
PATHS="ordered hierarchical mpi" COMPRESSION=none
[[ $WIRE != f32 ]] && PATHS="ordered hierarchical" COMPRESSION=$WIRE
for r in $RATES; do
  [[ $r == none || $r =~ ^[0-9]+[mg]bit$ ]] || { echo "bench_hierarchical.sh: --rates: '$r' is not none, Nmbit or Ngbit" >&2; exit 2; }
done
for s in $SIZES; do
  [[ $s =~ ^[0-9]+[KM]?$ ]] || { echo "bench_hierarchical.sh: --sizes: '$s' is not a size like 4M" >&2; exit 2; }
done
source "$ROOT/scripts/lib/shaped_hosts.sh"
for m in $MODELS; do bench_model_shape "$m" > /dev/null; done

[[ -x $BUILD/trainer && -x $BUILD/bench_allreduce && -x $BUILD/lockstep-run ]] ||
  { echo "bench_hierarchical.sh: $BUILD lacks trainer, bench_allreduce or lockstep-run (scripts/build.sh)" >&2; exit 2; }
source "$ROOT/scripts/lib/namespace_hosts.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A CPU benchmark: the CPU even where --device auto would find a GPU (a
# command-line --device still wins).
export LOCKSTEP_DEVICE="${LOCKSTEP_DEVICE:-cpu}"
WORK=$(mktemp -d /tmp/lockstep-bench-hier.XXXXXX)
chmod 755 "$WORK"
cleanup() { nshosts_down; rm -rf "$WORK"; }
trap cleanup EXIT
nshosts_up "$HOSTS" "$WORK"
RANKS=$((HOSTS * PER_HOST))
HOSTLIST=$(for ((i = 1; i <= HOSTS; ++i)); do echo -n "$SUB.$i:$PER_HOST,"; done)
RUN=("$BUILD/lockstep-run" -H "${HOSTLIST%,}" --ssh-options "-F $SSH_CONFIG")
OVER=""
((RANKS > $(nproc))) && OVER=" (oversubscribed: $RANKS ranks on $(nproc) cores)"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; $HOSTS hosts x $PER_HOST" \
     "ranks$OVER; $REPS rounds; wire $WIRE${TRAINER_ARGS:+; trainer $TRAINER_ARGS}"

allreduce_ms() {  # size path -> milliseconds (median of 5); fails on a wrong sum
  local wire=()
  [[ $2 != mpi ]] && wire=(--wire "$WIRE")
  "${RUN[@]}" "$BUILD/bench_allreduce" -b "$1" -e "$1" -w 2 -n 5 --path "$2" "${wire[@]}" > "$WORK/ar.log" 2>&1 ||
    { cat "$WORK/ar.log" >&2; return 1; }
  awk '$1 ~ /^[0-9]+$/ && NF == 6 { if ($6 != 0) { print "wrong sums" > "/dev/stderr"; exit 1 } printf "%.2f\n", $3 / 1000 }' \
    "$WORK/ar.log"
}
train() {  # model extra-args... -> "img/s exposed"
  local model=$1; shift
  read -r batch hw _ <<< "$(bench_model_shape "$model")"
  rm -f "$WORK/m.jsonl"
  "${RUN[@]}" "$BUILD/trainer" --model "$model" --benchmark --batch-size "$batch" --image-size "$hw" --threads 1 \
    --max-steps "$STEPS" --progress off --grad-compression "$COMPRESSION" --metrics-file "$WORK/m.jsonl" $TRAINER_ARGS "$@" \
    > "$WORK/train.log" 2>&1 ||
    { cat "$WORK/train.log" >&2; echo "bench_hierarchical.sh: $model $* failed" >&2; return 1; }
  python3 -c 'import json,sys; s=[json.loads(l) for l in open(sys.argv[1])][-1]; print(s["images_per_sec"], s.get("exposed_comm_fraction", 0))' "$WORK/m.jsonl"
}

declare -A R  # "rate what" -> values over rounds
for ((round = 1; round <= REPS; ++round)); do
  for rate in $RATES; do
    bench_set_rate "$rate"
    for size in $SIZES; do
      for path in $PATHS; do
        R["$rate ar $size $path"]+="$(allreduce_ms "$size" "$path") "
      done
      echo "  round $round, $rate, $size allreduce ms: flat $(echo ${R["$rate ar $size ordered"]} | awk '{print $NF}')," \
           "hierarchical $(echo ${R["$rate ar $size hierarchical"]} | awk '{print $NF}')," \
           "MPI_Allreduce $(echo ${R["$rate ar $size mpi"]:-} | awk '{print $NF}')"
    done
    for model in $MODELS; do
      out=$(train "$model" --hierarchical-allreduce off)
      R["$rate tr $model flat"]+="${out%% *} " R["$rate ex $model flat"]+="${out##* } "
      out=$(train "$model" --hierarchical-allreduce on)
      R["$rate tr $model hier"]+="${out%% *} " R["$rate ex $model hier"]+="${out##* } "
      echo "  round $round, $rate, $model img/s: flat $(echo ${R["$rate tr $model flat"]} | awk '{print $NF}')," \
           "hierarchical $(echo ${R["$rate tr $model hier"]} | awk '{print $NF}')"
    done
  done
done
bench_set_rate none

dump=""
for k in "${!R[@]}"; do dump+="$k=${R[$k]}"$'\n'; done
python3 - "$RATES" "$SIZES" "$MODELS" "$PER_HOST" "$HOSTS" "$WIRE" <<PY
import json, statistics, sys
rates, sizes, models, per_host, hosts = sys.argv[1].split(), sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4]), int(sys.argv[5])
R = {}
for line in """$dump""".strip().splitlines():
    k, v = line.split("=")
    R[k] = [float(x) for x in v.split()]
med = lambda k: statistics.median(R[k])
wire = sys.argv[6]
out = {"bench": "hierarchical", "wire": wire, "hosts": hosts, "ranks_per_host": per_host, "allreduce": [], "training": []}
print()
print("| link | size | flat ms | hierarchical ms | MPI_Allreduce ms | flat / hierarchical |")
print("|---|---:|---:|---:|---:|---:|")
for rate in rates:
    for size in sizes:
        f, h = med(f"{rate} ar {size} ordered"), med(f"{rate} ar {size} hierarchical")
        m = med(f"{rate} ar {size} mpi") if f"{rate} ar {size} mpi" in R else None  # fp32 only
        print(f"| {rate} | {size} | {f:.1f} | {h:.1f} | {'-' if m is None else f'{m:.1f}'} | **{f / h:.2f}x** |")
        out["allreduce"].append({"rate": rate, "size": size, "flat_ms": f, "hierarchical_ms": h, "mpi_ms": m})
print()
print("| link | model | flat img/s | exposed | hierarchical img/s | exposed | hierarchical / flat |")
print("|---|---|---:|---:|---:|---:|---:|")
for rate in rates:
    for model in models:
        f, h = med(f"{rate} tr {model} flat"), med(f"{rate} tr {model} hier")
        xf, xh = med(f"{rate} ex {model} flat"), med(f"{rate} ex {model} hier")
        print(f"| {rate} | {model} | {f:.1f} | {100 * xf:.1f}% | {h:.1f} | {100 * xh:.1f}% | **{h / f:.2f}x** |")
        out["training"].append({"rate": rate, "model": model, "flat_img_s": f, "hierarchical_img_s": h,
                                "flat_exposed": xf, "hierarchical_exposed": xh})
print(json.dumps(out))
PY
