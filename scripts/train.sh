#!/usr/bin/env bash
# One command for a newcomer: install what is missing, build, and train LeNet
# on Fashion-MNIST on the CPU. Extra arguments go to the trainer, e.g.
#   scripts/train.sh --model keras-cnn --epochs 5
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh" > /dev/null
# The CPU, as promised, even where --device auto would take a GPU (--device cuda
# among the arguments still wins).
export LOCKSTEP_DEVICE="${LOCKSTEP_DEVICE:-cpu}"
exec "${BUILD_DIR:-$ROOT/build}/trainer" "$@"
