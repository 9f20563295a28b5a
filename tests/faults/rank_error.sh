#!/usr/bin/env bash
# An error during training at N=4 (--inject-fault error@RANK:STEP):
#   1. on every rank after step 3: the ranks learn that all of them failed and
#      end together: exit 1, one line from rank 0, no MPI_Abort;
#   2. on rank 2 alone after step 3: the others wait for it in a collective,
#      so rank 2 names itself and ends the job (MPI_Abort) once its wait for
#      the others (5 s) is over: exit 1, no process left;
#   3. a batch too large for the memory of every rank (N=2): one line naming
#      --batch-size, exit 2, no MPI_Abort.
# usage: rank_error.sh TRAINER
set -uo pipefail
TRAINER=$(readlink -f "$1")
source "$(dirname "$0")/common.sh"
ARGS="--dataset synthetic --synthetic-samples 1024 --batch-size 16 --epochs 1 --max-steps 12 --no-eval --threads 1
      --progress off $MARK"
MESSAGE="fault injected: an error after step 3 \(launcher/trainer.cpp:[0-9]+\)"

t0=$(now)
mpirun -np 4 --oversubscribe "$TRAINER" $ARGS --inject-fault error@all:3 > "$WORK/all.log" 2>&1
code=$?
t1=$(now)
for _ in $(seq 50); do [[ -z $(live_trainers) ]] && break; sleep 0.1; done
grep "fault injected" "$WORK/all.log"
echo "error on every rank after step 3: job exit $code after $(elapsed "$t0" "$t1") s"
[[ $code == 1 ]] || { cat "$WORK/all.log"; fail "every rank: exit code $code, expected 1"; }
[[ $(grep -c "fault injected" "$WORK/all.log") == 1 ]] || { cat "$WORK/all.log"; fail "every rank: not one line"; }
grep -qE "^error: $MESSAGE$" "$WORK/all.log" || { cat "$WORK/all.log"; fail "every rank: the line names ranks"; }
grep -q "MPI_ABORT" "$WORK/all.log" && { cat "$WORK/all.log"; fail "every rank: MPI_Abort was called"; }
[[ -z $(live_trainers) ]] || fail "every rank: processes left: $(live_trainers)"

t0=$(now)
mpirun -np 4 --oversubscribe "$TRAINER" $ARGS --inject-fault error@2:3 > "$WORK/one.log" 2>&1
code=$?
t1=$(now)
for _ in $(seq 50); do [[ -z $(live_trainers) ]] && break; sleep 0.1; done
grep "fault injected" "$WORK/one.log"
took=$(elapsed "$t0" "$t1")
echo "error on rank 2 after step 3: job exit $code after $took s"
[[ $code == 1 ]] || { cat "$WORK/one.log"; fail "rank 2: exit code $code, expected 1"; }
grep -qE "^\[rank 2/4\] error: $MESSAGE$" "$WORK/one.log" || { cat "$WORK/one.log"; fail "rank 2: no line naming it"; }
[[ $(grep -c "fault injected" "$WORK/one.log") == 1 ]] || { cat "$WORK/one.log"; fail "rank 2: not one line"; }
python3 -c "import sys; sys.exit(0 if $took < 30 else 1)" || fail "rank 2: the job took $took s to end (gate 30 s)"
[[ -z $(live_trainers) ]] || fail "rank 2: processes left: $(live_trainers)"

# Every rank refuses a tensor larger than its MemAvailable before touching it.
avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
batch=$(( avail_kib * 1024 / 400000 * 5 / 4 ))
mpirun -np 2 "$TRAINER" --model convnet --benchmark --benchmark-input fixed --batch-size "$batch" --max-steps 1 \
  --threads 1 --progress off $MARK > "$WORK/oom.log" 2>&1
code=$?
grep "out of host memory" "$WORK/oom.log"
echo "convnet at batch $batch on each of 2 ranks: job exit $code"
[[ $code == 2 ]] || { cat "$WORK/oom.log"; fail "out of memory: exit code $code, expected 2"; }
[[ $(grep -c "out of host memory" "$WORK/oom.log") == 1 ]] || { cat "$WORK/oom.log"; fail "out of memory: not one line"; }
grep -qE "^error: (\[every rank, figures of rank 0\] )?out of host memory for a tensor \([0-9]+ MiB\), .* training convnet at $batch samples per process \(--batch-size\): a smaller batch needs less$" \
  "$WORK/oom.log" || { cat "$WORK/oom.log"; fail "out of memory: the line does not name --batch-size"; }
grep -q "MPI_ABORT" "$WORK/oom.log" && { cat "$WORK/oom.log"; fail "out of memory: MPI_Abort was called"; }
[[ -z $(live_trainers) ]] || fail "out of memory: processes left: $(live_trainers)"
echo "ok: rank errors"
