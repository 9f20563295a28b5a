#!/usr/bin/env bash
# A rank killed with SIGKILL mid-training at N=4: every process of the job is
# gone within 30 s, the job's exit code is non-zero, and the output names the
# lost rank. Measured from the kill to the last process gone.
# usage: dead_rank.sh TRAINER
set -uo pipefail
TRAINER=$(readlink -f "$1")
source "$(dirname "$0")/common.sh"
ARGS="--model lenet --epochs 5 --no-eval --threads 1 --progress off $MARK"
mpirun -np 4 --oversubscribe "$TRAINER" $ARGS > "$WORK/job.log" 2>&1 &
job=$!
wait_for_training "$WORK/job.log" 60 || fail "training did not start"
sleep 1
victim=$(rank_pid 2)
[[ -n $victim ]] || fail "no rank 2 found"
t0=$(now)
kill -KILL "$victim"
wait $job
code=$?
while [[ -n $(live_trainers) ]]; do
  [[ $(elapsed "$t0" "$(now)" | cut -d. -f1) -ge 30 ]] && break
  sleep 0.1
done
t1=$(now)
echo "rank 2 (pid $victim) killed: job exit $code, all processes gone after $(elapsed "$t0" "$t1") s"
grep -iE "rank 2|exited on signal" "$WORK/job.log" | head -3
[[ $code != 0 ]] || fail "the job exited 0"
[[ -z $(live_trainers) ]] || fail "processes still running 30 s after the kill: $(live_trainers)"
python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 30 else 1)" || fail "took more than 30 s"
grep -q "rank 2" "$WORK/job.log" || fail "the output does not name rank 2"
echo "ok: dead rank"
