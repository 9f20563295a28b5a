#!/usr/bin/env bash
# Communication benchmarks at 2 ranks on this machine (build/ binaries):
#   1. allreduce sweep, nccl-tests style, 4 B to 256 MB: MPI_Allreduce,
#      lockstep's ordered allreduce over messages, and lockstep's shared-memory
#      path (what buckets use when all ranks share a host);
#   2. fusion: per-tensor MPI_Allreduce vs lockstep buckets vs one raw
#      MPI_Allreduce, on ResNet-50's layout and on 4,000 small tensors;
#   3. step: training step time for lenet and convnet at N=1 and at N=2 with
#      --overlap on, off and auto (same per-rank batch, synthetic data, no
#      evaluation, one compute thread per rank: the ranks fill 2 cores), the
#      exposed communication (time step() waited for reductions), which mode
#      auto chose and whether it is not the slower one: a mode counts as
#      faster when the median of the rounds' paired on/off step-time ratios
#      is more than 2% from 1 ("even" otherwise).
# Last line: JSON with bucket_vs_raw, bucket_vs_per_tensor,
# busbw_256mb_over_4mb (the MPI backend's gradient path: the order-fixed
# allreduce over messages; MPI_Allreduce's and the shared-memory path's ratios
# alongside), exposed_comm_fraction (the worse of the two models, as auto
# runs them) and auto_picks_faster (true when, for both models, auto chose
# the faster mode or the two were even).
# --steps-only runs part 3 alone (its JSON line is then the last).
# usage: scripts/bench_comm.sh [--reps 5] [--steps-only]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
REPS=5 STEPS_ONLY=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) REPS=$2; shift 2 ;;
    --steps-only) STEPS_ONLY=1; shift ;;
    *) echo "bench_comm.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
"$ROOT/scripts/build.sh" > /dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A CPU benchmark: the CPU even where --device auto would find a GPU (a
# command-line --device still wins).
export LOCKSTEP_DEVICE="${LOCKSTEP_DEVICE:-cpu}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; $(mpirun --version | head -1)"

if ((!STEPS_ONLY)); then
  echo; echo "== 1. allreduce sweep, 2 ranks"
  for path in mpi ordered shm; do
    mpirun -np 2 "$BUILD/bench_allreduce" -b 4 -e 256M -f 2 -w 5 -n 20 --path $path | tee "$WORK/sweep-$path.txt" | grep -v '^{'
  done

  echo; echo "== 2. fusion, 2 ranks"
  mpirun -np 2 "$BUILD/bench_fusion" --reps 15 | tee "$WORK/fusion.txt" | grep -v '^{'
fi

echo; echo "== 3. step time, $REPS rounds"
step_run() {  # model batch steps ranks [flags]: prints "images/s-per-rank exposed-fraction overlapped"
  local model=$1 batch=$2 steps=$3 n=$4; shift 4
  mpirun -np "$n" "$BUILD/trainer" --model "$model" --dataset synthetic --no-eval --batch-size "$batch" \
    --max-steps "$steps" --threads 1 --progress off --metrics-file "$WORK/m.jsonl" "$@" > /dev/null
  python3 -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1])][-1]; print(d["images_per_sec_per_rank"], d["exposed_comm_fraction"], "on" if d["overlap"] else "off")' "$WORK/m.jsonl"
}
results=()
for spec in "lenet 128 200" "convnet 32 12"; do
  set -- $spec
  model=$1 batch=$2 steps=$3
  one=() on=() off=() auto=() exp_on=() exp_off=() exp_auto=() picked=()
  for ((r = 1; r <= REPS; ++r)); do
    read -r a _ _ < <(step_run "$model" "$batch" "$steps" 1)
    read -r b e _ < <(step_run "$model" "$batch" "$steps" 2 --overlap on)
    read -r c f _ < <(step_run "$model" "$batch" "$steps" 2 --overlap off)
    read -r d g p < <(step_run "$model" "$batch" "$steps" 2 --overlap auto)
    one+=("$a"); on+=("$b"); off+=("$c"); auto+=("$d"); exp_on+=("$e"); exp_off+=("$f"); exp_auto+=("$g"); picked+=("$p")
    printf '  %s round %d: step %.1f ms (N=1); N=2: %.1f ms overlap on (%.2f%% exposed), %.1f ms off (%.2f%%), %.1f ms auto (%s, %.2f%%)\n' \
      "$model" "$r" "$(python3 -c "print(1e3*$batch/$a)")" "$(python3 -c "print(1e3*$batch/$b)")" \
      "$(python3 -c "print(100*$e)")" "$(python3 -c "print(1e3*$batch/$c)")" "$(python3 -c "print(100*$f)")" \
      "$(python3 -c "print(1e3*$batch/$d)")" "$p" "$(python3 -c "print(100*$g)")"
  done
  results+=("$(python3 - "$model" "$batch" "${one[*]}" "${on[*]}" "${off[*]}" "${auto[*]}" "${exp_on[*]}" \
                "${exp_off[*]}" "${exp_auto[*]}" "${picked[*]}" <<'PY'
import json, statistics, sys
model, batch = sys.argv[1], int(sys.argv[2])
one, on, off, auto, exp_on, exp_off, exp_auto = ([float(v) for v in a.split()] for a in sys.argv[3:10])
picked = sorted(set(sys.argv[10].split()))
ms = lambda ips: 1e3 * batch / statistics.median(ips)
# The rounds' paired step-time ratios on/off (same round, back to back): a
# mode is faster only when their median is off 1 by more than 2%, else even.
paired = statistics.median(f / n for n, f in zip(on, off))
faster = "on" if paired < 0.98 else "off" if paired > 1.02 else "even"
print(json.dumps({"model": model, "batch_per_rank": batch, "step_ms_n1": round(ms(one), 2),
                  "step_ms_n2_overlap_on": round(ms(on), 2), "step_ms_n2_overlap_off": round(ms(off), 2),
                  "step_ms_n2_overlap_auto": round(ms(auto), 2), "auto_chose": "/".join(picked),
                  "faster_mode": faster, "on_over_off_step": round(ms(on) / ms(off), 3),
                  "on_over_off_step_paired_median": round(paired, 3),
                  "auto_picks_faster": faster == "even" or picked == [faster],
                  "exposed_comm_fraction": statistics.median(exp_auto),
                  "exposed_comm_fraction_overlap_on": statistics.median(exp_on),
                  "exposed_comm_fraction_overlap_off": statistics.median(exp_off),
                  "n2_over_n1_step": round(ms(auto) / ms(one), 3)}))
PY
)")
  echo "  ${results[-1]}"
done

if ((STEPS_ONLY)); then
  python3 - "${results[@]}" <<'PY'
import json, sys
steps = [json.loads(a) for a in sys.argv[1:]]
print(json.dumps({"bench": "comm_steps", "ranks": 2,
                  "exposed_comm_fraction": max(s["exposed_comm_fraction"] for s in steps),
                  "auto_picks_faster": all(s["auto_picks_faster"] for s in steps), "steps": steps}))
PY
  exit 0
fi
python3 - "$WORK/sweep-mpi.txt" "$WORK/sweep-ordered.txt" "$WORK/sweep-shm.txt" "$WORK/fusion.txt" "${results[@]}" <<'PY'
import json, sys
last = lambda path: json.loads([l for l in open(path) if l.startswith("{")][-1])
mpi, ordered, ours, fusion = last(sys.argv[1]), last(sys.argv[2]), last(sys.argv[3]), last(sys.argv[4])
steps = [json.loads(a) for a in sys.argv[5:]]
out = {"bench": "comm", "ranks": 2,
       "bucket_vs_raw": round(fusion["resnet50"]["bucket_vs_raw"], 3),
       "bucket_vs_raw_ordered": round(fusion["resnet50"]["bucket_vs_raw_ordered"], 3),
       "bucket_vs_per_tensor": round(fusion["many_small"]["bucket_vs_per_tensor"], 3),
       # The MPI backend's gradient path (order-fixed allreduce over messages);
       # then MPI_Allreduce itself and the shared-memory path for comparison.
       "busbw_256mb_over_4mb": ordered["busbw_256mb_over_4mb"],
       "busbw_256mb_over_4mb_mpi_allreduce": mpi["busbw_256mb_over_4mb"],
       "busbw_256mb_over_4mb_shared_memory": ours["busbw_256mb_over_4mb"],
       "exposed_comm_fraction": max(s["exposed_comm_fraction"] for s in steps),
       "auto_picks_faster": all(s["auto_picks_faster"] for s in steps),
       "fusion": fusion, "steps": steps}
print(json.dumps(out))
PY
