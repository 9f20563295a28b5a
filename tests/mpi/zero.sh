#!/usr/bin/env bash
# --zero-stage 1 (optimizer state sharded over the ranks, ZeRO-1) against
# stage 0: the same sums and the same elementwise updates, so the trainer must
# end with bitwise the same weights, and its checkpoint (parameters, and the
# optimizer state gathered from the shards) must hold bitwise the same
# tensors. Through shared memory (fp32), over messages (bf16 on the wire),
# with accumulation and no overlap, batch norm without decay on its
# parameters, clipping, at 2 and 3 ranks; the 2-rank rows with --overlap on
# (the communication threads), the 3-rank ones as --overlap auto chooses
# (here, on 2 cores: after backward). Then resume across stages: a
# stage-1 checkpoint resumed at stage 0, and the reverse, equal the straight run.
# usage: zero.sh TRAINER COMPARE_WEIGHTS
set -euo pipefail
TRAINER=$1 CMP=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
BASE="--global-batch-size 48 --max-steps 12 --threads 1 --progress off"
fail() { echo "FAIL: $*"; exit 1; }
same() {  # NAME N ARGS...: stage 0 and stage 1, bitwise
  local name=$1 n=$2
  shift 2
  for z in 0 1; do
    mpirun -np "$n" --oversubscribe "$TRAINER" $BASE "$@" --zero-stage $z --checkpoint-dir "$WORK/$name-ckpt$z" \
      --save-weights "$WORK/$name-$z.safetensors" > "$WORK/$name-$z.log"
  done
  grep -q "ZeRO-1: optimizer state sharded" "$WORK/$name-1.log" || fail "$name: no ZeRO-1 in the log"
  echo -n "$name N=$n, stage 0 vs 1, weights: "
  "$CMP" "$WORK/$name-0.safetensors" "$WORK/$name-1.safetensors" --exact
  echo -n "$name N=$n, stage 0 vs 1, checkpoint (parameters and optimizer state): "
  "$CMP" "$WORK/$name-ckpt0/ckpt-000000012.safetensors" "$WORK/$name-ckpt1/ckpt-000000012.safetensors" --exact
}
same adam 2 --model lenet --optimizer adam --lr 1e-3 --overlap on
same adam 3 --model lenet --optimizer adam --lr 1e-3
same sgd-bf16-wire 2 --model lenet --optimizer sgd --momentum 0.9 --nesterov --weight-decay 1e-4 --grad-compression bf16 \
  --overlap on
same accumulate 3 --model mlp --optimizer adamw --weight-decay 0.01 --accumulate-steps 2 --no-overlap
same resnet20 2 --model resnet20 --dataset synthetic --synthetic-samples 480 --optimizer sgd --momentum 0.9 \
  --weight-decay 5e-4 --no-decay-bn-bias --fusion-threshold-mb 0.2 --overlap on
same clip 2 --model lenet --clip-grad-norm 0.05 --overlap on
grep -q "12 of 12 updates clipped" "$WORK/clip-1.log" || fail "clip: no clipping report"

# Resume across stages: 12 steps, checkpoint, 12 more at the other stage.
ARGS="--model lenet --optimizer adam --lr 1e-3 --global-batch-size 48 --threads 1 --progress off"
mpirun -np 2 "$TRAINER" $ARGS --max-steps 24 --save-weights "$WORK/straight.safetensors" > /dev/null
for from in 0 1; do
  to=$((1 - from))
  mpirun -np 2 "$TRAINER" $ARGS --max-steps 12 --zero-stage $from --checkpoint-dir "$WORK/resume$from" > /dev/null
  mpirun -np 2 "$TRAINER" $ARGS --max-steps 24 --zero-stage $to --checkpoint-dir "$WORK/resume$from" --resume \
    --save-weights "$WORK/resumed$from.safetensors" > "$WORK/resume$from.log"
  grep -q "resumed from .*ckpt-000000012.safetensors at step 12" "$WORK/resume$from.log" || fail "did not resume"
  echo -n "stage $from checkpoint resumed at stage $to vs 24 straight steps: "
  "$CMP" "$WORK/straight.safetensors" "$WORK/resumed$from.safetensors" --exact
done
