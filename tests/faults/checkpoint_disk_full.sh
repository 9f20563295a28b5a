#!/usr/bin/env bash
# A full disk under checkpoint writes. The checkpoint directory is a 1.5 MiB
# tmpfs: room for one lenet checkpoint (1.0 MB), not for the next beside it
# (a write is a temporary renamed over, and the old one goes only after). N=2,
# 30 steps, a checkpoint every 10, for --checkpoint-write background and sync:
#   --checkpoint-failure continue: exit 0; the writes of steps 20 and 30 are
#     each one warning naming the file and the full disk; ckpt-10 alone
#     on disk, no temporary left; --resume loads it.
#   --checkpoint-failure stop: exit 2 with one error line naming
#     --checkpoint-dir and step 20 (the trainer stops at once with sync
#     writes, at the next checkpoint with background ones, when it learns of
#     the failure); ckpt-10 alone on disk and still loads.
# Mounting a tmpfs needs root (CI runs as root); elsewhere this reports
# skipped (exit 77).
# usage: checkpoint_disk_full.sh TRAINER
set -uo pipefail
TRAINER=$(readlink -f "$1")
source "$(dirname "$0")/common.sh"
DISK=$WORK/disk
mkdir -p "$DISK"
mount -t tmpfs -o size=1536k tmpfs "$DISK" 2> /dev/null || { echo "skipped: cannot mount a tmpfs here (needs root)"; exit 77; }
trap 'umount "$DISK" 2> /dev/null; rm -rf "$WORK"' EXIT
ARGS="--model lenet --global-batch-size 64 --max-steps 30 --checkpoint-every 10 --threads 1 --progress off --no-eval $MARK"

kept_and_resumes() {  # NAME: only ckpt-10 in the directory, no temporary, and --resume loads it
  local left
  left=$(ls -A "$DISK/ckpt" | tr '\n' ' ')
  [[ $left == "ckpt-000000010.safetensors " ]] || fail "$1: the directory holds '$left', not ckpt-10 alone"
  mpirun -np 2 "$TRAINER" $ARGS --checkpoint-dir "$DISK/ckpt" --resume --max-steps 12 > "$WORK/resume.out" 2>&1 ||
    { cat "$WORK/resume.out"; fail "$1: --resume failed"; }
  grep -q "resumed from .*ckpt-000000010.safetensors at step 10" "$WORK/resume.out" ||
    { cat "$WORK/resume.out"; fail "$1: did not resume at step 10"; }
}

for write in background sync; do
  rm -rf "${DISK:?}"/*
  mpirun -np 2 "$TRAINER" $ARGS --checkpoint-dir "$DISK/ckpt" --checkpoint-write $write \
    > "$WORK/continue.out" 2> "$WORK/continue.err"
  code=$?
  [[ $code == 0 ]] || { cat "$WORK/continue.err"; fail "$write, continue: exit $code"; }
  n=$(grep -cE "^warning: checkpoint of step ([23]0) not written: $DISK/ckpt/ckpt-0000000\1.safetensors: write failed \(No space left on device\); training goes on \(--checkpoint-failure continue\), the newest checkpoint is $DISK/ckpt/ckpt-000000010.safetensors$" "$WORK/continue.err")
  [[ $n == 2 ]] || { cat "$WORK/continue.err"; fail "$write, continue: $n warnings for the writes of steps 20 and 30, not 2"; }
  [[ $(grep -vc "^warning: checkpoint of step" "$WORK/continue.err") == 0 ]] ||
    { cat "$WORK/continue.err"; fail "$write, continue: other lines on stderr"; }
  kept_and_resumes "$write, continue"
  echo "ok: $write writes, --checkpoint-failure continue: exit 0, 2 warnings, ckpt-10 kept and resumed"

  rm -rf "${DISK:?}"/*
  mpirun -np 2 "$TRAINER" $ARGS --checkpoint-dir "$DISK/ckpt" --checkpoint-write $write --checkpoint-failure stop \
    > "$WORK/stop.out" 2> "$WORK/stop.err"
  code=$?
  [[ $code == 2 ]] || { cat "$WORK/stop.err"; fail "$write, stop: exit $code, not 2"; }
  grep -q "^warning: checkpoint of step 20 not written: $DISK/ckpt/ckpt-000000020.safetensors: write failed (No space left on device); stopping (--checkpoint-failure stop)$" "$WORK/stop.err" ||
    { cat "$WORK/stop.err"; fail "$write, stop: no warning for step 20's write"; }
  errors=$(grep -c "^error: " "$WORK/stop.err")
  [[ $errors == 1 ]] && grep -q "^error: --checkpoint-dir: the checkpoint of step 20 could not be written" "$WORK/stop.err" ||
    { cat "$WORK/stop.err"; fail "$write, stop: not one error line naming step 20"; }
  kept_and_resumes "$write, stop"
  echo "ok: $write writes, --checkpoint-failure stop: exit 2, one error line, ckpt-10 kept and resumed"
done
