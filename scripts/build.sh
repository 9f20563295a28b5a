#!/usr/bin/env bash
# Configures and builds lockstep (Release) into build/ (or $BUILD_DIR).
# Progress goes to stderr, a line per stage and one per tenth of the build,
# so a first build (minutes on 2 cores) shows signs of life even where stdout
# is discarded; the compiler's full output is in $BUILD_DIR/build.log, and its
# last lines are printed when the build fails.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
JOBS="$(nproc)"
mkdir -p "$BUILD_DIR"
say() { echo "build.sh: $*" >&2; }
t0=$SECONDS
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} > "$BUILD_DIR/configure.log" 2>&1 \
  || { cat "$BUILD_DIR/configure.log" >&2; say "configuring failed (log: $BUILD_DIR/configure.log)"; exit 1; }
say "building in $BUILD_DIR with $JOBS jobs (compiler output: $BUILD_DIR/build.log)"
set +e
cmake --build "$BUILD_DIR" -j "$JOBS" 2>&1 | tee "$BUILD_DIR/build.log" |
  awk '/^\[ *[0-9]+%\]/ { p = substr($0, 2, index($0, "%") - 2) + 0
                          if (p >= next_p) { printf "build.sh: %3d%%\n", p > "/dev/stderr"; fflush("/dev/stderr")
                                             next_p = p - p % 10 + 10 } }'
rc=${PIPESTATUS[0]}
set -e
if ((rc != 0)); then
  tail -n 60 "$BUILD_DIR/build.log" >&2
  say "the build failed after $((SECONDS - t0)) s (full output: $BUILD_DIR/build.log)"
  exit "$rc"
fi
say "built in $((SECONDS - t0)) s"
