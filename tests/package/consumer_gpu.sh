#!/usr/bin/env bash
# The library's GPU loop (README's "On the GPU"; tests/package/consumer/main.cpp
# --gpu) at one rank: the MLP trains on the GPU with NCCL averaging, the loss
# halves and the replica check passes. Without a usable GPU: skipped (exit 77)
# with the consumer's own one-line reason, never passed.
# usage: consumer_gpu.sh MPIRUN CONSUMER
set -uo pipefail
MPIRUN=$1 CONSUMER=$2
out=$("$MPIRUN" -np 1 "$CONSUMER" --gpu 2>&1)
code=$?
echo "$out"
# select_device's refusal when there is no device names the reason after "--gpu: ".
if [[ $code -ne 0 ]] && grep -E "^consumer: --gpu: " <<< "$out" | grep -qv "ranks on this host"; then
  echo "skipped: no usable GPU here"
  exit 77
fi
[[ $code -eq 0 ]] || { echo "FAIL: exit code $code"; exit 1; }
grep -qE "^consumer: ok on 1 ranks \(GPUs, NCCL\): loss " <<< "$out" || { echo "FAIL: no ok line for the GPU run"; exit 1; }
echo "ok: the library's GPU loop"
