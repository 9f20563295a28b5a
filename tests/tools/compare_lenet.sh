#!/usr/bin/env bash
# scripts/gpu/compare_lenet.py (check.sh's compare.lenet) on metrics files
# written here: it passes the second H100 run's accuracies (2026-11-24), fails
# a GPU whose 5-seed mean is 2 points low and a mode outside the CPU's seed
# range widened by 0.5, and stops with one line and exit 2 on a missing file,
# one without epoch records or one that is not JSON Lines.
# usage: compare_lenet.sh SCRIPT
set -euo pipefail
SCRIPT=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# write DIR NAME=ACC...: one metrics file per run, its last epoch at ACC percent.
write() {
  local dir=$1; shift
  mkdir -p "$dir"
  for kv in "$@"; do
    printf '{"type":"epoch","epoch":1,"test_acc":0.5}\n{"type":"epoch","epoch":3,"test_acc":%s}\n' \
      "$(python3 -c "print(${kv#*=} / 100)")" > "$dir/lenet-${kv%%=*}.jsonl"
  done
}
MODES="nccl1 mpi2 nccl1-bf16 mpi2-fp16 cuda-bf16 cuda-fp16 nccl1-fp16 fp16-resumed cuda-graph cuda-nhwc cuda-nhwc-bf16-graph
       cuda-bf16-benchmark cuda-fp16-benchmark"
h100() {  # the H100 run's figures
  write "$1" cpu=88.51 cpu-s2=88.18 cpu-s3=88.47 cpu-s4=88.03 cpu-s5=87.29 \
    cuda=87.91 cuda-s2=88.44 cuda-s3=87.67 cuda-s4=88.04 cuda-s5=86.20
  for m in $MODES; do write "$1" "$m=87.59"; done
}

h100 "$WORK/pass"
out=$(python3 "$SCRIPT" "$WORK/pass") || fail "the H100 run's accuracies do not pass: $out"
echo "$out"
[[ $out == *"means -0.44 points apart (bound 1.0): ok"* ]] || fail "the means' line is missing or wrong"

h100 "$WORK/low"
write "$WORK/low" cuda=86.1 cuda-s2=86.4 cuda-s3=86.0 cuda-s4=86.2 cuda-s5=85.9
set +e; out=$(python3 "$SCRIPT" "$WORK/low"); rc=$?; set -e
[[ $rc -eq 1 && $out == *"(bound 1.0): FAIL"* ]] || fail "a GPU 2 points low passed (exit $rc): $out"
echo "low GPU mean: exit 1"

h100 "$WORK/mode"
write "$WORK/mode" cuda-graph=86.5
set +e; out=$(python3 "$SCRIPT" "$WORK/mode"); rc=$?; set -e
[[ $rc -eq 1 && $out == *"(86.79-89.01): cuda-graph"* ]] || fail "a mode at 86.5 passed (exit $rc): $out"
echo "mode outside the CPU's range: exit 1"

h100 "$WORK/missing"
rm "$WORK/missing/lenet-cuda-s3.jsonl"
set +e; err=$(python3 "$SCRIPT" "$WORK/missing" 2>&1 >/dev/null); rc=$?; set -e
[[ $rc -eq 2 && $(grep -c '' <<<"$err") -eq 1 && $err == *"lenet-cuda-s3.jsonl: No such file"* ]] \
  || fail "a missing file: exit $rc, stderr '$err'"
echo "missing file: exit 2, $err"

h100 "$WORK/empty"
echo '{"type":"summary"}' > "$WORK/empty/lenet-cpu-s4.jsonl"
set +e; err=$(python3 "$SCRIPT" "$WORK/empty" 2>&1 >/dev/null); rc=$?; set -e
[[ $rc -eq 2 && $err == *"lenet-cpu-s4.jsonl: no epoch records"* ]] || fail "no epoch records: exit $rc, '$err'"
echo "no epoch records: exit 2, $err"
h100 "$WORK/garbled"
echo 'not json' > "$WORK/garbled/lenet-cuda-nhwc.jsonl"
set +e; err=$(python3 "$SCRIPT" "$WORK/garbled" 2>&1 >/dev/null); rc=$?; set -e
[[ $rc -eq 2 && $(grep -c '' <<<"$err") -eq 1 && $err == *"lenet-cuda-nhwc.jsonl: not JSON Lines"* ]] \
  || fail "a garbled file: exit $rc, '$err'"
echo "garbled file: exit 2"
echo "compare_lenet: all checks passed"
