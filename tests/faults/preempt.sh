#!/usr/bin/env bash
# Preemption: SIGTERM to one rank of an N=2 job (as a scheduler or scancel
# does) and SIGUSR1 to a single process (SLURM's --signal=USR1@N). Each time:
# all ranks stop at the next step boundary, rank 0 writes a checkpoint of that
# step, the job exits with 75; then --resume finishes training, and the final
# weights equal those of an uninterrupted run (gate 1e-6; expected bitwise).
# usage: preempt.sh TRAINER COMPARE_WEIGHTS
set -uo pipefail
TRAINER=$(readlink -f "$1") CMP=$(readlink -f "$2")
source "$(dirname "$0")/common.sh"
ARGS="--model lenet --global-batch-size 64 --max-steps 300 --optimizer sgd --momentum 0.9 --threads 1 --progress off --no-eval $MARK"

case_() {  # name, signal, ranks, rank to signal
  local name=$1 sig=$2 n=$3 target=$4
  local launch=()
  [[ $n -gt 1 ]] && launch=(mpirun -np "$n")
  "${launch[@]}" "$TRAINER" $ARGS --save-weights "$WORK/straight-$name.safetensors" > "$WORK/straight-$name.log" 2>&1 ||
    fail "$name: uninterrupted run failed"
  "${launch[@]}" "$TRAINER" $ARGS --checkpoint-dir "$WORK/ckpt-$name" --save-weights "$WORK/resumed-$name.safetensors" \
    > "$WORK/$name.log" 2>&1 &
  local job=$!
  # The stop handlers are installed before the first "batch ..." line (a fixed
  # sleep was too short for a slow start, e.g. under ASan: the signal came first).
  if [[ $n -gt 1 ]]; then wait_for_training "$WORK/$name.log" 60 || fail "$name: training did not start"; sleep 1
  else
    for ((i = 0; i < 600; i++)); do grep -q "^batch " "$WORK/$name.log" 2> /dev/null && break; sleep 0.1; done
    grep -q "^batch " "$WORK/$name.log" || fail "$name: training did not start"; sleep 1
  fi
  local pid
  if [[ $n -gt 1 ]]; then pid=$(rank_pid "$target"); else pid=$job; fi
  [[ -n $pid ]] || fail "$name: no process to signal"
  local t0 t1 code
  t0=$(now)
  kill -"$sig" "$pid"
  wait $job
  code=$?
  t1=$(now)
  local line step
  line=$(grep "stopped by SIG$sig after step" "$WORK/$name.log")
  echo "$name: SIG$sig to rank $target of $n: exit $code after $(elapsed "$t0" "$t1") s; $line"
  [[ $code == 75 ]] || { cat "$WORK/$name.log"; fail "$name: exit $code, expected 75"; }
  step=$(echo "$line" | sed -E 's/.*after step ([0-9]+).*/\1/')
  [[ -n $step && $step -lt 300 ]] || fail "$name: no stop step in the log"
  local ckpt
  ckpt=$(printf "%s/ckpt-%09d.safetensors" "$WORK/ckpt-$name" "$step")
  [[ -f $ckpt ]] || fail "$name: no checkpoint of step $step"
  [[ ! -f $WORK/resumed-$name.safetensors ]] || fail "$name: final weights written by a stopped run"
  "${launch[@]}" "$TRAINER" $ARGS --checkpoint-dir "$WORK/ckpt-$name" --resume \
    --save-weights "$WORK/resumed-$name.safetensors" > "$WORK/$name-resume.log" 2>&1 || fail "$name: --resume failed"
  grep -q "resumed from .*ckpt-$(printf %09d "$step").safetensors at step $step" "$WORK/$name-resume.log" ||
    fail "$name: did not resume at step $step"
  echo -n "$name: stopped at $step + resumed to 300 vs 300 straight: "
  "$CMP" "$WORK/straight-$name.safetensors" "$WORK/resumed-$name.safetensors" --rtol 1e-6 || fail "$name: weights differ"
}
case_ term2 TERM 2 1
case_ usr1 USR1 1 0
echo "ok: preemption"
