#!/usr/bin/env bash
# One call of a GPU machine: runs named plans of scripts/gpu/check.sh
# (its CHECK_PLAN sets) into a fresh directory, packs every result into one
# file in RESULTS_DIR (the device tool brings back at most 8 files) and prints
# last what to read (the tool's reply carries the end of the output).
#
#   scripts/gpu/call.sh RESULTS_DIR PLAN...   (GPU machine, repository root, .gpu-bundle carried)
#   scripts/gpu/call.sh --list PLAN...        (anywhere: the steps those plans run)
#
# PLAN: verify -- check.sh's tests and train plans side by side (the GPU tests
# keep the GPU busy, the training steps and their CPU references mostly the
# host's 16 cores) -- or one of check.sh's plans: tests, train, targets, rest,
# profile, run one after another. docs/gpu.md, "Fitting the checks into a short GPU time", says
# which calls fit 15 minutes of GPU time. CHECK_STEPS narrows every plan
# (check.sh); CHECK_BUNDLE names the bundle (default: .gpu-bundle).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CHECK="$ROOT/scripts/gpu/check.sh"
PLANS="verify, tests, train, targets, rest, profile"
if [[ $# -lt 2 ]]; then
  echo "usage: call.sh RESULTS_DIR|--list PLAN... (plans: $PLANS)" >&2
  exit 2
fi
DEST=$1
shift
for p in "$@"; do
  case "$p" in
    verify|tests|train|targets|rest|profile) ;;
    *) echo "call.sh: $p: not a plan ($PLANS)" >&2; exit 2 ;;
  esac
done

# The check.sh plans a call plan stands for.
parts() { if [[ $1 == verify ]]; then echo tests train; else echo "$1"; fi; }

if [[ $DEST == --list ]]; then
  for p in "$@"; do
    for part in $(parts "$p"); do CHECK_PLAN=$part bash "$CHECK" --list | sed "s/^/$p: /"; done
  done
  exit 0
fi

mkdir -p "$DEST" || { echo "call.sh: cannot make RESULTS_DIR $DEST" >&2; exit 2; }
# A fresh directory: a reused machine can keep /tmp from an earlier run.
WORK="$(mktemp -d /tmp/lockstep-call.XXXXXX)"
touch "$WORK/summary.txt"
rc=0
for p in "$@"; do
  pids=() names=()
  for part in $(parts "$p"); do
    CHECK_PLAN=$part bash "$CHECK" "$WORK" ${CHECK_BUNDLE:+"$CHECK_BUNDLE"} > "$WORK/check-$part.out" 2>&1 &
    pids+=($!) names+=("$part")
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" && continue
    rc=1  # a failed step, or check.sh could not start: its last lines say which
    echo "== check.sh, plan ${names[$i]}, failed:"
    tail -n 5 "$WORK/check-${names[$i]}.out"
  done
done

name="results-$(IFS=-; echo "$*").tgz"
tar -C "$WORK" -czf "$DEST/$name" . || { echo "call.sh: cannot write $DEST/$name" >&2; rc=1; }
for f in environment.txt summary.txt bench_table.md race_summary.txt; do
  [[ -s "$WORK/$f" ]] && { echo "== $f"; grep -v '^check.sh: ' "$WORK/$f"; }
done
echo "call.sh: $(grep -c ' PASS ' "$WORK/summary.txt") passed, $(grep -c ' FAIL' "$WORK/summary.txt") failed," \
  "$(grep -c ' SKIP ' "$WORK/summary.txt") skipped; everything in $DEST/$name ($(du -h "$DEST/$name" | cut -f1))"
exit $rc
