#!/usr/bin/env bash
# A batch too large for the host's memory: one line naming the batch option and
# exit 2, not the kernel's OOM killer (exit 137, no message) or swapping. The
# batch is sized from this machine's MemAvailable so that convnet's first
# activation (about 400 KB a sample in fp32) is 1.25 times it; the allocator
# refuses that tensor before touching it, so the run peaks with little more
# than its input batch in memory (970 MB resident on a 23 GiB machine, 1.2 s).
# usage: out_of_memory.sh path/to/trainer
set -euo pipefail
TRAINER=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
[[ -n $avail_kib ]] || fail "no MemAvailable in /proc/meminfo"
batch=$(( avail_kib * 1024 / 400000 * 5 / 4 ))
echo "MemAvailable $((avail_kib / 1024)) MiB: convnet at batch $batch"
set +e
"$TRAINER" --model convnet --benchmark --benchmark-input fixed --batch-size "$batch" --max-steps 1 --threads 1 \
  --progress off > "$WORK/out" 2> "$WORK/err"
code=$?
set -e
cat "$WORK/err"
[[ $code -eq 2 ]] || fail "exit code $code, expected 2"
[[ $(grep -c '' "$WORK/err") -eq 1 ]] || fail "expected one line on stderr"
grep -qE "^error: out of host memory for a tensor \([0-9]+ MiB\), with [0-9]+ MiB available \(MemAvailable in /proc/meminfo; 512 MiB of it kept free\), training convnet at $batch samples per process \(--batch-size\): a smaller batch needs less$" \
  "$WORK/err" || fail "the message does not name the tensor, the memory available and the batch option"
echo "ok"
