#!/usr/bin/env bash
# lockstep-run's restart supervisor on one host, 4 ranks:
#   1. a rank SIGKILLed after the first checkpoint, --max-restarts 1: the job
#      restarts at 4 ranks from the newest checkpoint, exits 0, the metrics
#      file holds one "restart" record, and the final weights equal those of
#      the same run never interrupted, bitwise;
#   2. a rank killed in both attempts with --max-restarts 1: the budget is
#      spent, one line gives every attempt's history, the exit code is the
#      failing one (137);
#   3. a setup error (an unknown model) with --max-restarts 3: not retried,
#      one attempt, exit 2;
#   4. --max-restarts without a --checkpoint-dir: refused before anything starts.
# usage: restart_local.sh LOCKSTEP_RUN TRAINER COMPARE_WEIGHTS
set -uo pipefail
RUN=$(readlink -f "$1") TRAINER=$(readlink -f "$2") CMP=$(readlink -f "$3")
source "$(dirname "$(readlink -f "$0")")/../faults/common.sh"
ARGS=(--model lenet --global-batch-size 64 --max-steps 300 --optimizer sgd --momentum 0.9 --lr 0.05 --threads 1
      --progress off --no-eval --checkpoint-every 10 $MARK)
LAUNCH=(-np 4 --mpirun-args --oversubscribe)

# Kills rank $2 once the file $1 exists (a checkpoint, a log line's file).
kill_rank_when() {  # path-glob rank
  local i victim=""
  for ((i = 0; i < 600; i++)); do compgen -G "$1" > /dev/null && break; sleep 0.05; done
  for ((i = 0; i < 100; i++)); do victim=$(rank_pid "$2"); [[ -n $victim ]] && break; sleep 0.05; done
  [[ -n $victim ]] || fail "no rank $2 to kill"
  kill -KILL "$victim"
  echo "killed rank $2 (pid $victim) at $(date +%T.%N | cut -c1-12)"
}

# --- 1. one kill, restarted, bitwise equal to the uninterrupted run ---
"$RUN" "${LAUNCH[@]}" "$TRAINER" "${ARGS[@]}" --checkpoint-dir "$WORK/ck0" --save-weights "$WORK/straight.safetensors" > "$WORK/straight.log" 2>&1 ||
  { cat "$WORK/straight.log"; fail "the uninterrupted run"; }
rm -f "$WORK/metrics.jsonl"
"$RUN" "${LAUNCH[@]}" --max-restarts 1 "$TRAINER" "${ARGS[@]}" --checkpoint-dir "$WORK/ck1" \
  --save-weights "$WORK/restarted.safetensors" > "$WORK/one.log" 2>&1 &
job=$!
kill_rank_when "$WORK/ck1/ckpt-*.safetensors" 2
code=0
wait $job || code=$?
grep "^lockstep-run:" "$WORK/one.log"
[[ $code == 0 ]] || { cat "$WORK/one.log"; fail "the restarted job exited $code"; }
grep -q "^lockstep-run: attempt 1 failed: killed by signal 9 (SIGKILL), reached step [0-9]*; restart 1 of 1 in 1 s at 4 ranks, global batch 64 = 4 x 16 x 1 accumulation steps$" \
  "$WORK/one.log" || fail "no attempt line"
grep -q "^lockstep-run: attempt 2 trains again from step [0-9]* ([0-9]* steps recomputed), [0-9.]* s after the failure was seen$" \
  "$WORK/one.log" || fail "no line for the second attempt's first step"
[[ $(grep -c '"type":"restart"' "$WORK/metrics.jsonl") == 1 ]] || fail "not one restart record in the metrics file"
grep '"type":"restart"' "$WORK/metrics.jsonl"
[[ $(grep -c '"type":"config"' "$WORK/metrics.jsonl") == 2 ]] || fail "the metrics file does not hold both attempts"
echo -n "restarted vs uninterrupted: "
"$CMP" "$WORK/straight.safetensors" "$WORK/restarted.safetensors" --exact || fail "the restarted run's weights differ"
echo "ok: a killed rank restarted at 4 ranks"

# --- 2. the budget spent ---
"$RUN" "${LAUNCH[@]}" --max-restarts 1 "$TRAINER" "${ARGS[@]}" --checkpoint-dir "$WORK/ck2" > "$WORK/two.log" 2>&1 &
job=$!
kill_rank_when "$WORK/ck2/ckpt-*.safetensors" 1
for ((i = 0; i < 600; i++)); do grep -q "trains again" "$WORK/two.log" && break; sleep 0.05; done
kill_rank_when "$WORK/two.log" 3
code=0
wait $job || code=$?
grep "^lockstep-run:" "$WORK/two.log"
[[ $code == 137 ]] || { cat "$WORK/two.log"; fail "exit $code after the budget was spent, expected 137"; }
grep -q "^lockstep-run: error: the job failed with exit code 137 and its restart budget is spent (--max-restarts 1): attempt 1: 4 ranks, killed by signal 9 (SIGKILL), reached step [0-9]*; attempt 2: 4 ranks, killed by signal 9 (SIGKILL), reached step [0-9]*$" \
  "$WORK/two.log" || fail "no line with the attempts' history"
echo "ok: budget spent"

# --- 3. a setup error is not retried ---
code=0
"$RUN" "${LAUNCH[@]}" --max-restarts 3 "$TRAINER" "${ARGS[@]}" --model nosuch --checkpoint-dir "$WORK/ck3" \
  > "$WORK/three.log" 2>&1 || code=$?
grep "^lockstep-run:" "$WORK/three.log"
[[ $code == 2 ]] || { cat "$WORK/three.log"; fail "exit $code for a setup error, expected 2"; }
grep -q "^lockstep-run: not restarting: bad input or a failed setup check is not retried; attempt 1: 4 ranks, bad input or a failed setup check$" \
  "$WORK/three.log" || fail "no 'not retried' line"
echo "ok: setup error not retried"

# --- 4. no checkpoint directory ---
code=0
"$RUN" "${LAUNCH[@]}" --max-restarts 1 "$TRAINER" --model lenet > "$WORK/four.log" 2>&1 || code=$?
cat "$WORK/four.log"
[[ $code == 2 && $(wc -l < "$WORK/four.log") == 1 ]] && grep -q "names no --checkpoint-dir" "$WORK/four.log" ||
  fail "--max-restarts without --checkpoint-dir: not one clear line and exit 2"
echo "ok: restarts need a checkpoint directory"
