#!/usr/bin/env bash
# scripts/gpu/compare_clip.py (check.sh's compare.clip) on metrics files
# written here: it passes the H100 runs' figures (2026-11-24: CPU clipped
# 86.56, graph 86.58, fp16 86.18, CPU seeds 87.29-88.51), fails a GPU run 2
# points from the CPU's (bound: the seeds' spread 1.22 + 0.5), a run that
# clipped nothing and one with a missing epoch's clip record, and stops with
# one line and exit 2 on a missing or garbled file.
# usage: compare_clip.sh SCRIPT
set -euo pipefail
SCRIPT=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# seeds DIR: the CPU's unclipped runs at seeds 1-5, last epoch only.
seeds() {
  local s acc
  mkdir -p "$1"
  for s in "=88.51" "-s2=88.18" "-s3=88.47" "-s4=88.03" "-s5=87.29"; do
    acc=${s#*=}
    printf '{"type":"epoch","epoch":3,"test_acc":%s}\n' "$(python3 -c "print($acc / 100)")" \
      > "$1/lenet-cpu${s%%=*}.jsonl"
  done
}
# clip DIR NAME ACC [CLIPPED...]: a clipped run, its grad_clip records (default 3 epochs, clipping every epoch).
clip() {
  local dir=$1 name=$2 acc=$3; shift 3
  local counts=("$@") e=0
  [[ ${#counts[@]} -gt 0 ]] || counts=(462 930 1398)
  : > "$dir/lenet-clip-$name.jsonl"
  for c in "${counts[@]}"; do
    e=$((e + 1))
    printf '{"type":"epoch","epoch":%d,"test_acc":0.8}\n{"type":"grad_clip","epoch":%d,"clipped_steps":%d,"grad_norm":1.5}\n' \
      "$e" "$e" "$c" >> "$dir/lenet-clip-$name.jsonl"
  done
  printf '{"type":"epoch","epoch":%d,"test_acc":%s}\n' "$((e + 1))" "$(python3 -c "print($acc / 100)")" \
    >> "$dir/lenet-clip-$name.jsonl"
}
h100() {
  seeds "$1"
  clip "$1" cpu 86.56
  clip "$1" graph 86.58
  clip "$1" fp16 86.18
}
run() {  # run DIR: sets out and rc
  set +e; out=$(python3 "$SCRIPT" "$1" 2>&1); rc=$?; set -e
}

h100 "$WORK/pass"
run "$WORK/pass"
[[ $rc -eq 0 ]] || fail "the H100 figures do not pass (exit $rc): $out"
echo "$out"
[[ $out == *"(spread 1.22)"*"1.72 points"* ]] || fail "the bound line is missing or wrong"

h100 "$WORK/far"
clip "$WORK/far" graph 84.5
run "$WORK/far"
[[ $rc -eq 1 && $out == *"clip graph: "*"-2.06 points from the CPU's"* ]] || fail "a run 2 points off passed (exit $rc): $out"
echo "2 points off: exit 1"

h100 "$WORK/none"
clip "$WORK/none" fp16 86.3 0 0 0
run "$WORK/none"
[[ $rc -eq 1 && $out == *"clip fp16: "*"no update clipped"* ]] || fail "a run that clipped nothing passed (exit $rc): $out"
echo "nothing clipped: exit 1"

h100 "$WORK/short"
clip "$WORK/short" cpu 86.56 462 930
run "$WORK/short"
[[ $rc -eq 1 && $out == *"clip cpu: "*"2 grad_clip records, not 3"* ]] || fail "2 clip records passed (exit $rc): $out"
echo "a missing clip record: exit 1"

h100 "$WORK/missing"
rm "$WORK/missing/lenet-cpu-s4.jsonl"
set +e; err=$(python3 "$SCRIPT" "$WORK/missing" 2>&1 >/dev/null); rc=$?; set -e
[[ $rc -eq 2 && $(grep -c '' <<<"$err") -eq 1 && $err == *"lenet-cpu-s4.jsonl: No such file"* ]] \
  || fail "a missing file: exit $rc, stderr '$err'"
echo "missing file: exit 2, $err"

h100 "$WORK/garbled"
echo 'not json' > "$WORK/garbled/lenet-clip-graph.jsonl"
set +e; err=$(python3 "$SCRIPT" "$WORK/garbled" 2>&1 >/dev/null); rc=$?; set -e
[[ $rc -eq 2 && $(grep -c '' <<<"$err") -eq 1 && $err == *"lenet-clip-graph.jsonl: not JSON Lines"* ]] \
  || fail "a garbled file: exit $rc, '$err'"
echo "garbled file: exit 2"
echo "compare_clip: all checks passed"
