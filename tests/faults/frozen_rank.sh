#!/usr/bin/env bash
# A rank frozen with SIGSTOP mid-training at N=4, --collective-timeout 5: rank
# 0's watchdog names the frozen rank (rank number, host, pid), the job exits
# with code 3 within timeout + 10 s, and no process is left (the stopped one
# included).
# usage: frozen_rank.sh TRAINER
set -uo pipefail
TRAINER=$(readlink -f "$1")
source "$(dirname "$0")/common.sh"
TIMEOUT=5
ARGS="--model lenet --epochs 5 --no-eval --threads 1 --progress off --collective-timeout $TIMEOUT $MARK"
mpirun -np 4 --oversubscribe "$TRAINER" $ARGS > "$WORK/job.log" 2>&1 &
job=$!
wait_for_training "$WORK/job.log" 60 || fail "training did not start"
sleep 1
victim=$(rank_pid 1)
[[ -n $victim ]] || fail "no rank 1 found"
t0=$(now)
kill -STOP "$victim"
wait $job
code=$?
t1=$(now)
for _ in $(seq 50); do [[ -z $(live_trainers) ]] && break; sleep 0.1; done
echo "rank 1 (pid $victim) frozen: job exit $code after $(elapsed "$t0" "$t1") s (timeout $TIMEOUT s)"
grep "collective timeout" "$WORK/job.log"
[[ $code == 3 ]] || { cat "$WORK/job.log"; fail "exit code $code, expected 3"; }
python3 -c "import sys; sys.exit(0 if $t1 - $t0 < $TIMEOUT + 10 else 1)" || fail "took longer than timeout + 10 s"
grep -q "^error: collective timeout .*rank 1 (host $(hostname), pid $victim) has not reached step" "$WORK/job.log" ||
  fail "rank 0 did not name rank 1 with its host and pid"
[[ -z $(live_trainers) ]] || fail "processes left: $(live_trainers)"
echo "ok: frozen rank"
