#!/usr/bin/env bash
# Crash safety of checkpoints: RUNS jobs (N=2, keras-cnn, a checkpoint after
# every step, so rank 0 spends much of its time writing) are each killed with
# SIGKILL to rank 0 — the writer — at a random moment. A kill that finds a
# checkpoint temporary on disk landed mid-write. After every kill, --resume
# must load the newest complete checkpoint (no damaged file skipped: writes are
# atomic), remove the stale temporary and finish training. A run that ends
# before its kill lands (a fast machine can finish inside the random delay) is
# not counted and another run takes its place, up to 2*RUNS attempts, so RUNS
# kills are always checked. Prints the counts.
# usage: checkpoint_crash.sh TRAINER [RUNS]
set -uo pipefail
TRAINER=$(readlink -f "$1") RUNS=${2:-50}
source "$(dirname "$0")/common.sh"
STEPS=60
ARGS="--model keras-cnn --global-batch-size 16 --max-steps $STEPS --checkpoint-every 1 --keep-checkpoints 2 --threads 1
      --progress off --no-eval $MARK"
mid_write=0 resumed=0 fresh=0 killed=0 i=0
while (( killed < RUNS )); do
  i=$((i + 1))
  (( i <= 2 * RUNS )) || fail "only $killed of $RUNS runs were killed in $((i - 1)) attempts: training ends before the kill"
  dir=$WORK/ckpt-$i
  mpirun -np 2 "$TRAINER" $ARGS --checkpoint-dir "$dir" > "$WORK/run.log" 2>&1 &
  job=$!
  wait_for_training "$WORK/run.log" 60 || fail "run $i: training did not start"
  # Kill while checkpoints are being written: after the first one is on disk
  # (on a loaded machine start-up can outlast a fixed delay), at a random moment.
  for _ in $(seq 600); do ls "$dir" 2> /dev/null | grep -q '^ckpt-' && break; sleep 0.1; done
  sleep "$(python3 -c "import random; print(random.uniform(0, 1.0))")"
  writer=$(rank_pid 0)
  [[ -n $writer ]] || { wait $job; echo "run $i: finished before the kill; not counted, another run takes its place"; rm -rf "$dir"; continue; }
  kill -KILL "$writer" 2> /dev/null ||
    { wait $job; echo "run $i: finished before the kill; not counted, another run takes its place"; rm -rf "$dir"; continue; }
  killed=$((killed + 1))
  wait $job
  ls -a "$dir" | grep -q '^\.ckpt-.*\.tmp-' && mid_write=$((mid_write + 1))
  newest=$(ls "$dir" | grep '^ckpt-' | sort | tail -1)
  mpirun -np 2 "$TRAINER" $ARGS --checkpoint-dir "$dir" --resume > "$WORK/resume.log" 2>&1 ||
    { cat "$WORK/resume.log"; fail "run $i: --resume failed after the kill (newest: ${newest:-none})"; }
  grep -q "skipping checkpoint" "$WORK/resume.log" && { cat "$WORK/resume.log"; fail "run $i: a damaged checkpoint"; }
  if [[ -n $newest ]]; then
    grep -q "resumed from .*$newest" "$WORK/resume.log" || fail "run $i: did not resume from $newest"
    resumed=$((resumed + 1))
  else
    fresh=$((fresh + 1))  # killed before the first checkpoint: a fresh start
  fi
  ls "$dir" | grep -q "ckpt-$(printf %09d $STEPS).safetensors" || fail "run $i: training did not finish"
  ls -a "$dir" | grep -q '^\.ckpt-.*\.tmp-' && fail "run $i: a stale temporary is still there"
  rm -rf "$dir"
done
echo "$RUNS runs killed (SIGKILL to rank 0) in $i attempts: $mid_write mid-write (a temporary on disk), $resumed resumed from the newest checkpoint, $fresh started fresh (no checkpoint yet); every one finished"
[[ $((resumed + fresh)) == "$RUNS" ]] || fail "not every run was checked"
[[ $mid_write -gt 0 ]] || fail "no kill landed mid-write: the test does not test what it says"
echo "ok: checkpoint crash safety"
