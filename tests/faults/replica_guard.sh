#!/usr/bin/env bash
# The replica guard (--check-replicas-every) at N=4:
#   1. a clean run compares the parameter checksums at every step and reports
#      that all checks passed;
#   2. with one parameter of rank 2 changed after step 5 (--inject-fault
#      replica-drift@2:5) and checks every 2 steps, the job stops at the check
#      after step 6 with exit code 4 and one message naming rank 2 (host, pid)
#      and no other rank; no process is left.
# usage: replica_guard.sh TRAINER
set -uo pipefail
TRAINER=$(readlink -f "$1")
source "$(dirname "$0")/common.sh"
ARGS="--dataset synthetic --synthetic-samples 1024 --batch-size 16 --epochs 1 --max-steps 12 --no-eval --threads 1
      --progress off $MARK"

mpirun -np 4 --oversubscribe "$TRAINER" $ARGS --check-replicas-every 1 > "$WORK/clean.log" 2>&1
code=$?
[[ $code == 0 ]] || { cat "$WORK/clean.log"; fail "clean run: exit code $code"; }
grep "replicas identical" "$WORK/clean.log"
grep -q "^replicas identical at all 12 checks (every 1 steps)" "$WORK/clean.log" || fail "clean run: checks not reported"

t0=$(now)
mpirun -np 4 --oversubscribe "$TRAINER" $ARGS --check-replicas-every 2 --inject-fault replica-drift@2:5 \
  > "$WORK/drift.log" 2>&1
code=$?
t1=$(now)
for _ in $(seq 50); do [[ -z $(live_trainers) ]] && break; sleep 0.1; done
grep -E "fault injected|replicas diverged" "$WORK/drift.log"
echo "drift on rank 2 after step 5: job exit $code after $(elapsed "$t0" "$t1") s"
[[ $code == 4 ]] || { cat "$WORK/drift.log"; fail "exit code $code, expected 4"; }
[[ $(grep -c "replicas diverged" "$WORK/drift.log") == 1 ]] || { cat "$WORK/drift.log"; fail "not exactly one message"; }
grep -qE "^error: replicas diverged after step 6: rank 2 \(host $(hostname), pid [0-9]+\) has parameter checksum [0-9a-f]{16}; ranks 0,1,3 have [0-9a-f]{16} \(--check-replicas-every 2\)$" \
  "$WORK/drift.log" || { cat "$WORK/drift.log"; fail "the message does not name rank 2 alone"; }
[[ -z $(live_trainers) ]] || fail "processes left: $(live_trainers)"
echo "ok: replica guard"
