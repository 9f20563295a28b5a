#!/usr/bin/env bash
# Resume: 40 steps straight versus 20 steps, stop, --resume, 20 more — at N=1
# and N=2 the weights must be bitwise identical (same data order, same state).
# Also: a checkpoint written at N=2 resumed at N=1 matches the straight N=2 run
# within 1e-5 (the data position is global; only the reduction order differs).
# usage: resume.sh TRAINER COMPARE_WEIGHTS
set -euo pipefail
TRAINER=$1 CMP=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
ARGS="--model lenet --global-batch-size 64 --optimizer sgd --momentum 0.9 --threads 1 --progress off"
fail() { echo "FAIL: $*"; exit 1; }
for n in 1 2; do
  mpirun -np $n "$TRAINER" $ARGS --max-steps 40 --save-weights "$WORK/straight-$n.safetensors" > /dev/null
  mpirun -np $n "$TRAINER" $ARGS --max-steps 20 --checkpoint-dir "$WORK/ckpt-$n" > /dev/null
  ls "$WORK/ckpt-$n"/ckpt-000000020.safetensors > /dev/null || fail "no checkpoint at step 20"
  cp -r "$WORK/ckpt-$n" "$WORK/at20-$n"
  mpirun -np $n "$TRAINER" $ARGS --max-steps 40 --checkpoint-dir "$WORK/ckpt-$n" --resume \
    --save-weights "$WORK/resumed-$n.safetensors" > "$WORK/resume-$n.log"
  grep -q "resumed from .*ckpt-000000020.safetensors at step 20" "$WORK/resume-$n.log" || fail "did not resume at step 20"
  echo -n "N=$n: 40 straight vs 20 + resume + 20: "
  "$CMP" "$WORK/straight-$n.safetensors" "$WORK/resumed-$n.safetensors" --exact
done
# Resume with an empty checkpoint directory is a fresh start.
mpirun -np 1 "$TRAINER" $ARGS --max-steps 2 --checkpoint-dir "$WORK/fresh" --resume > "$WORK/fresh.log"
grep -q "resumed" "$WORK/fresh.log" && fail "resumed from nothing"
# Written at N=2, resumed at N=1.
mpirun -np 1 "$TRAINER" $ARGS --max-steps 40 --checkpoint-dir "$WORK/at20-2" --resume \
  --save-weights "$WORK/cross.safetensors" > "$WORK/cross.log"
grep -q "resumed from .*ckpt-000000020.safetensors at step 20" "$WORK/cross.log" || fail "cross: did not resume at step 20"
echo -n "N=2 checkpoint resumed at N=1 vs N=2 straight: "
"$CMP" "$WORK/straight-2.safetensors" "$WORK/cross.safetensors" --rtol 1e-5
