#!/usr/bin/env bash
# The input side of a --benchmark run alone: build/bench_loader times
# PrefetchLoader assembling synthetic batches with 1, 2, 4, ... workers
# (--loader-threads), rounds alternating the worker counts; prints per-round
# ms per batch, the medians with each count's speedup, and a JSON last line.
# usage: scripts/bench_loader.sh [bench_loader flags: --image-size 224 --channels 3
#        --batch-size 128 --batches 8 --rounds 5 --workers 1,2,4]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="${BUILD_DIR:-$ROOT/build}"
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,7p' "$0"; exit 0; }
[[ -x $BUILD/bench_loader ]] || { echo "bench_loader.sh: $BUILD/bench_loader not built (scripts/build.sh)" >&2; exit 2; }
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; $(date -u +%Y-%m-%d)"
exec "$BUILD/bench_loader" "$@"
