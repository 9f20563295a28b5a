#!/usr/bin/env bash
# scripts/gpu/check.sh refuses an OUT_DIR holding another bundle's results (a
# reused machine can keep /tmp from an earlier run, whose benchmark files
# would join this run's table) and leaves them untouched; the same bundle's
# directory, or a fresh one, is taken (several calls may share one).
# usage: check_out_dir.sh CHECK_SH
set -euo pipefail
CHECK=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$WORK/bundle" "$WORK/out"
echo 1111111111111111111111111111111111111111 > "$WORK/bundle/COMMIT"
printf 'date: earlier\ncommit: 2222222222222222222222222222222222222222\n' > "$WORK/out/environment.txt"
echo '{"summary": true}' > "$WORK/out/bench-convnet.jsonl"
before=$(cd "$WORK/out" && sha256sum ./*)

set +e; out=$(CHECK_STEPS='^none$' bash "$CHECK" "$WORK/out" "$WORK/bundle" 2>&1); rc=$?; set -e
echo "$out"
[[ $rc -eq 2 ]] || fail "another bundle's directory: exit $rc"
[[ $(wc -l <<< "$out") -eq 1 && $out == *"holds results of another bundle (commit: 2222"*"give an empty or new directory" ]] ||
  fail "the message: $out"
[[ $(cd "$WORK/out" && sha256sum ./*) == "$before" ]] || fail "the earlier results were touched"

# The same bundle's directory (an earlier call of this run) passes the check;
# what follows (CUDA libraries, steps) is not this test's business.
printf 'date: earlier\ncommit: 1111111111111111111111111111111111111111\n' > "$WORK/out/environment.txt"
set +e; out=$(CHECK_STEPS='^none$' timeout 60 bash "$CHECK" "$WORK/out" "$WORK/bundle" 2>&1); set -e
[[ $out != *"holds results of another bundle"* ]] || fail "the same bundle was refused: $out"
echo "ok"
