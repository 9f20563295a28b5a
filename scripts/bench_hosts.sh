#!/usr/bin/env bash
# Data-parallel training across two hosts over a link of a given bandwidth:
# lockstep against PyTorch DDP (gloo), the regime where reducing gradients
# during backward (overlap) is meant to pay. The hosts are network namespaces
# on this machine (scripts/lib/namespace_hosts.sh: veth pairs to a bridge, an
# sshd per host), one rank on each; a token-bucket filter (`tc ... tbf`) on
# each host's link caps its sending rate (--rates; "none": the bare veth).
#
# Per model, rate and round, back to back, all with 1 compute thread per rank
# and the same per-rank batch of synthetic data:
#   lockstep N=2 across the hosts (lockstep-run -H a:1,b:1 trainer --benchmark),
#     with overlap (the default), with --no-overlap, and with overlap and
#     --fusion-threshold-mb 4 (smaller buckets after the 1 MB first one, each
#     ready earlier in backward; for keras-cnn the same plan as the default);
#   DDP N=2 across the hosts (scripts/bench/torch_ddp.py --rank/--master in each
#     namespace, GLOO_SOCKET_IFNAME=eth0);
# and each round, on this host without a network, lockstep and DDP at N=1.
# --compression "none fp16" repeats every N=2 run per wire type: fp16 runs
# lockstep with --grad-compression fp16 and DDP with its fp16_compress_hook
# (DDP's bf16 hook needs NCCL, so fp16 is the wire both can use over gloo).
# Per rate, once: lockstep's allreduce over messages and MPI_Allreduce on
# 64 MB across the link (bench_allreduce), the link's effective bus bandwidth.
# Reports medians of img/s, the efficiency img/s(N=2) / (2 x img/s(N=1)) of
# each implementation against its own N=1, lockstep's exposed communication
# (the metrics summary's exposed_comm_fraction: the share of training time
# spent waiting for reductions) and lockstep / DDP. Needs root. Last line: JSON.
# usage: scripts/bench_hosts.sh [--models "keras-cnn resnet50"] [--rates "none 10gbit 1gbit"] [--reps 3]
#                               [--steps 30] [--compression "none fp16"]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
MODELS="keras-cnn resnet50" RATES="none 10gbit 1gbit" REPS=3 STEPS=30 WIRES=none
while [[ $# -gt 0 ]]; do
  case $1 in
    --models) MODELS=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --compression) WIRES=$2; shift 2 ;;
    *) echo "bench_hosts.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) == 0 ]] || { echo "bench_hosts.sh: network namespaces, tc and sshd need root" >&2; exit 2; }
for r in $RATES; do
  [[ $r == none || $r =~ ^[0-9]+[mg]bit$ ]] || { echo "bench_hosts.sh: --rates: '$r' is not none, Nmbit or Ngbit" >&2; exit 2; }
done
for w in $WIRES; do
  [[ $w == none || $w == fp16 ]] || { echo "bench_hosts.sh: --compression: '$w' is not none or fp16" >&2; exit 2; }
done
[[ -n ${WIRES// /} ]] || { echo "bench_hosts.sh: --compression: empty list" >&2; exit 2; }
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "bench_hosts.sh: --reps: '$REPS' is not a positive integer" >&2; exit 2; }
[[ $STEPS =~ ^[0-9]+$ && $STEPS -ge 10 ]] || { echo "bench_hosts.sh: --steps: '$STEPS' is not an integer >= 10" >&2; exit 2; }

source "$ROOT/scripts/lib/shaped_hosts.sh"
for m in $MODELS; do bench_model_shape "$m" > /dev/null; done

"$ROOT/scripts/build.sh" > /dev/null
source "$ROOT/scripts/lib/namespace_hosts.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A CPU benchmark: the CPU even where --device auto would find a GPU (a
# command-line --device still wins).
export LOCKSTEP_DEVICE="${LOCKSTEP_DEVICE:-cpu}"
WORK=$(mktemp -d /tmp/lockstep-bench-hosts.XXXXXX)
chmod 755 "$WORK"
cleanup() { nshosts_down; rm -rf "$WORK"; }
trap cleanup EXIT
nshosts_up 2 "$WORK"
RUN=("$BUILD/lockstep-run" -H "$SUB.1:1,$SUB.2:1" --ssh-options "-F $SSH_CONFIG")
PY=/usr/bin/python3
DDP="$ROOT/scripts/bench/torch_ddp.py"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; hosts ${NS[*]} on $SUB.0/24;" \
     "1 thread per rank, $REPS rounds, $STEPS steps per run"

summary() {  # metrics file -> "images_per_sec exposed_comm_fraction"
  python3 -c 'import json,sys; s=[json.loads(l) for l in open(sys.argv[1])][-1]; print(s["images_per_sec"], s.get("exposed_comm_fraction", 0))' "$1"
}
lockstep_run() {  # model ranks(1|2) extra-args... -> "img/s exposed"
  local model=$1 n=$2; shift 2
  read -r batch hw ch cls <<< "$(bench_model_shape "$model")"
  local args=(--model "$model" --benchmark --batch-size "$batch" --image-size "$hw" --threads 1 --max-steps "$STEPS"
              --progress off --metrics-file "$WORK/m.jsonl" "$@")
  rm -f "$WORK/m.jsonl"
  if [[ $n == 1 ]]; then
    "$BUILD/trainer" "${args[@]}" > "$WORK/lockstep.log" 2>&1
  else
    "${RUN[@]}" "$BUILD/trainer" "${args[@]}" > "$WORK/lockstep.log" 2>&1
  fi || { cat "$WORK/lockstep.log" >&2; echo "bench_hosts.sh: lockstep $model N=$n failed" >&2; return 1; }
  summary "$WORK/m.jsonl"
}
ddp_run() {  # model ranks(1|2) [wire] -> img/s
  local model=$1 n=$2 wire=${3:-none}
  read -r batch hw ch cls <<< "$(bench_model_shape "$model")"
  local args=(--model "$model" --batch-size "$batch" --image-size "$hw" --channels "$ch" --classes "$cls" --threads 1
              --steps $((STEPS - 5 - (STEPS - 5) % 5)) --window 5 --compression "$wire")
  if [[ $n == 1 ]]; then
    "$PY" "$DDP" "${args[@]}" --world 1 > "$WORK/ddp.log" 2>&1
  else
    local master=$SUB.1:$((29500 + RANDOM % 400))
    ip netns exec "${NS[1]}" env GLOO_SOCKET_IFNAME=eth0 "$PY" "$DDP" "${args[@]}" --world 2 --rank 1 \
      --master "$master" > "$WORK/ddp1.log" 2>&1 &
    local peer=$!
    ip netns exec "${NS[0]}" env GLOO_SOCKET_IFNAME=eth0 "$PY" "$DDP" "${args[@]}" --world 2 --rank 0 \
      --master "$master" > "$WORK/ddp.log" 2>&1 || { kill $peer 2> /dev/null; false; }
    wait $peer
  fi || { cat "$WORK/ddp.log" >&2; echo "bench_hosts.sh: DDP $model N=$n failed" >&2; return 1; }
  tail -1 "$WORK/ddp.log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["images_per_sec"])'
}
link_busbw() {  # path -> GB/s at 64 MB across the hosts
  "${RUN[@]}" "$BUILD/bench_allreduce" -b 64M -e 64M -w 2 -n 5 --path "$1" > "$WORK/ar.log" 2>&1 ||
    { cat "$WORK/ar.log" >&2; return 1; }
  awk '$1 ~ /^[0-9]+$/ && NF == 6 {printf "%.0f ms, busbw %s GB/s, %s wrong\n", $3 / 1000, $5, $6}' "$WORK/ar.log"
}

declare -A R  # key "model rate kind" -> space-separated values over rounds
for rate in $RATES; do
  bench_set_rate "$rate"
  echo "link $rate: 64 MB allreduce across the hosts, median of 5:"
  out=$(link_busbw ordered) || exit 1
  echo "  lockstep messages: $out"
  out=$(link_busbw mpi) || exit 1
  echo "  MPI_Allreduce:     $out"
done
for ((round = 1; round <= REPS; ++round)); do
  for model in $MODELS; do
    bench_set_rate none
    out=$(lockstep_run "$model" 1) || exit 1
    R["$model - l1"]+="${out%% *} "
    out=$(ddp_run "$model" 1) || exit 1
    R["$model - d1"]+="$out "
    for rate in $RATES; do
      bench_set_rate "$rate"
      for wire in $WIRES; do
        k="$model $rate $wire"
        out=$(lockstep_run "$model" 2 --grad-compression "$wire") || exit 1
        R["$k l2"]+="${out%% *} " R["$k x2"]+="${out##* } "
        out=$(lockstep_run "$model" 2 --grad-compression "$wire" --no-overlap) || exit 1
        R["$k n2"]+="${out%% *} " R["$k y2"]+="${out##* } "
        out=$(lockstep_run "$model" 2 --grad-compression "$wire" --fusion-threshold-mb 4) || exit 1
        R["$k f2"]+="${out%% *} " R["$k z2"]+="${out##* } "
        out=$(ddp_run "$model" 2 "$wire") || exit 1
        R["$k d2"]+="$out "
        printf '  round %d %s %s wire %s: lockstep %.1f (no overlap %.1f, 4 MB buckets %.1f) img/s, exposed %.1f%% (%.1f%%); DDP %.1f img/s\n' \
          "$round" "$model" "$rate" "$wire" $(echo "${R["$k l2"]}" | awk '{print $NF}') \
          $(echo "${R["$k n2"]}" | awk '{print $NF}') $(echo "${R["$k f2"]}" | awk '{print $NF}') \
          "$(echo "${R["$k x2"]}" | awk '{print 100 * $NF}')" \
          "$(echo "${R["$k y2"]}" | awk '{print 100 * $NF}')" $(echo "${R["$k d2"]}" | awk '{print $NF}')
      done
    done
  done
done
bench_set_rate none

dump=""
for k in "${!R[@]}"; do dump+="$k=${R[$k]}"$'\n'; done
python3 - "$MODELS" "$RATES" "$WIRES" <<PY
import json, statistics, sys
models, rates, wires = sys.argv[1].split(), sys.argv[2].split(), sys.argv[3].split()
R = {}
for line in """$dump""".strip().splitlines():
    k, v = line.split("=")
    R[k] = [float(x) for x in v.split()]
med = lambda k: statistics.median(R[k])
print()
print("| model | link | wire | lockstep N=1 | lockstep N=2 | efficiency | exposed comm | no overlap: N=2, efficiency, exposed "
      "| 4 MB buckets: N=2, efficiency, exposed | DDP N=1 | DDP N=2 | DDP efficiency | lockstep / DDP at N=2 |")
print("|---|---|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|")
out = []
for m in models:
    l1, d1 = med(f"{m} - l1"), med(f"{m} - d1")
    for r in rates:
      for w in wires:
        k = f"{m} {r} {w}"
        l2, n2, d2 = med(f"{k} l2"), med(f"{k} n2"), med(f"{k} d2")
        x2, y2, f2, z2 = med(f"{k} x2"), med(f"{k} y2"), med(f"{k} f2"), med(f"{k} z2")
        print(f"| {m} | {r} | {w} | {l1:.1f} | {l2:.1f} | {l2 / (2 * l1):.3f} | {100 * x2:.1f}% | {n2:.1f}, {n2 / (2 * l1):.3f}, {100 * y2:.1f}% "
              f"| {f2:.1f}, {f2 / (2 * l1):.3f}, {100 * z2:.1f}% | {d1:.1f} | {d2:.1f} | {d2 / (2 * d1):.3f} | {l2 / d2:.2f}x |")
        out.append({"model": m, "link": r, "wire": w, "lockstep": {"n1": l1, "n2": l2, "efficiency": round(l2 / (2 * l1), 3),
                    "exposed_comm": round(x2, 4), "no_overlap_n2": n2, "no_overlap_exposed_comm": round(y2, 4),
                    "buckets_4mb_n2": f2, "buckets_4mb_exposed_comm": round(z2, 4)},
                    "ddp": {"n1": d1, "n2": d2, "efficiency": round(d2 / (2 * d1), 3)}, "lockstep_over_ddp": round(l2 / d2, 3)})
print(json.dumps(out))
PY
