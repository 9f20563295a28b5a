#!/usr/bin/env bash
# N ranks x B/N equals 1 rank x B: mlp and lenet (no dropout), SGD with
# momentum, 20 steps at global batch 64 on Fashion-MNIST, trained at N = 1, 2
# and 4 (4 oversubscribed on 2 cores), must end with the same weights within a
# relative difference of 1e-5 (per tensor, relative to its largest magnitude).
# 20 steps: the runs differ only in fp32 summation order, which stays below
# 7e-7 through step 25, but between steps 25 and 30 one of lenet's ReLU or
# pooling choices flips in the N=1 run and its conv bias moves by 2e-4 (both
# N=2 and N=4 then differ from N=1 by the same 1.84e-5; 2026-11-23).
# usage: equivalence.sh TRAINER COMPARE_WEIGHTS
set -euo pipefail
TRAINER=$1 CMP=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
ARGS="--global-batch-size 64 --max-steps 20 --optimizer sgd --momentum 0.9 --lr 0.05 --threads 1 --progress off"
for model in mlp lenet; do
  for n in 1 2 4; do
    mpirun -np $n --oversubscribe "$TRAINER" --model $model $ARGS --save-weights "$WORK/$model-$n.safetensors" \
      > "$WORK/$model-$n.log"
  done
  for n in 2 4; do
    echo -n "$model N=1 vs N=$n: "
    "$CMP" "$WORK/$model-1.safetensors" "$WORK/$model-$n.safetensors" --rtol 1e-5
  done
done
