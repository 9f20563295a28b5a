#!/usr/bin/env bash
# One command for the whole suite: install what is missing, build, run every
# test through ctest. Extra arguments go to ctest (e.g. -L unit, -R gradcheck).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh"
cd "${BUILD_DIR:-$ROOT/build}"
ctest --output-on-failure --timeout 1200 "$@"
