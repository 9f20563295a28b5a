#!/usr/bin/env bash
# The preflight check catches ranks started differently: a rank with another
# --model, or half the ranks with another --lr. Every rank must exit non-zero
# within 5 s and rank 0 must print the table of what differs. The 5 s include
# start-up, so a sanitizer build (slower to start and, with LeakSanitizer, to
# exit) multiplies them by TEST_TIME_SCALE (scripts/sanitize.sh sets it).
# usage: preflight.sh TRAINER [COMPARE_WEIGHTS, unused]
set -uo pipefail
TRAINER=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0
LIMIT=$((5 * ${TEST_TIME_SCALE:-1}))
run_case() {  # name, expected table text, mpirun arguments...
  local name=$1 expect=$2; shift 2
  local t0 t1 code
  t0=$(date +%s.%N)
  mpirun "$@" > "$WORK/$name.out" 2>&1
  code=$?
  t1=$(date +%s.%N)
  local secs
  secs=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
  echo "--- $name: exit $code after ${secs}s"
  grep -A8 "preflight check failed" "$WORK/$name.out"
  if [[ $code -eq 0 ]]; then echo "FAIL $name: exit code 0"; failures=$((failures + 1)); fi
  if ! python3 -c "import sys; sys.exit(0 if $secs < $LIMIT else 1)"; then
    echo "FAIL $name: took ${secs}s (limit ${LIMIT}s)"; failures=$((failures + 1))
  fi
  if ! grep -q -- "$expect" "$WORK/$name.out"; then echo "FAIL $name: no '$expect' row"; failures=$((failures + 1)); fi
  # mpirun has returned; its ranks must be gone too (allow a moment for reaping).
  local left=""
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    # This test's trainers only (their command lines name $WORK); zombies have exited.
    left=$(for p in $(pgrep -f -- "--metrics-file $WORK/" || true); do
             awk '$3 !~ /^Z/ {print $1, $3}' "/proc/$p/stat" 2> /dev/null; done)
    [[ -z $left ]] && break
    sleep 0.1
  done
  if [[ -n $left ]]; then echo "FAIL $name: trainer processes left: $left"; failures=$((failures + 1)); fi
}
COMMON="--max-steps 5 --threads 1 --metrics-file $WORK/metrics.jsonl"  # the file marks this test's processes
run_case model "  model       0      lenet" \
  -np 1 "$TRAINER" $COMMON --model lenet : -np 1 "$TRAINER" $COMMON --model mlp
run_case lr "  lr     0,1    0.05" \
  -np 2 --oversubscribe "$TRAINER" $COMMON --lr 0.05 : -np 2 "$TRAINER" $COMMON --lr 0.1
[[ $failures -eq 0 ]]
