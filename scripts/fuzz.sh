#!/usr/bin/env bash
# libFuzzer for lockstep's input parsers (harnesses in tests/fuzz/).
#   scripts/fuzz.sh TARGET SECONDS   TARGET: idx | safetensors | hostfile | options | all
#   scripts/fuzz.sh --build          only (re)build the fuzz targets
# Builds build-fuzz/ (clang, -DLOCKSTEP_FUZZ=ON: ASan + UBSan + coverage) when
# needed, then fuzzes a scratch copy of tests/fuzz/corpus/TARGET (the checked-in
# corpus is never written) for SECONDS. Everything a run leaves is under
# build-fuzz/runs/TARGET/: fuzz.log, corpus/ (the grown corpus) and artifacts/
# (crash-*, leak-*, oom-*, timeout-* inputs). Prints the executions and the
# exit status; exits 1 on a finding. Keep a fixed finding as a regression:
# copy it into tests/fuzz/corpus/TARGET/ as regress-<what>.
# Environment: FUZZ_BUILD_DIR (default build-fuzz), JOBS (build parallelism),
# FUZZ_VERBOSE=1 (stream libFuzzer's output instead of only its summary).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
TARGETS=(idx safetensors hostfile options)

usage() { echo "usage: $0 {idx|safetensors|hostfile|options|all} SECONDS | $0 --build" >&2; exit 2; }

build() {
  command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (scripts/setup.sh installs clang)" >&2; exit 1; }
  local rt
  rt="$(clang -print-runtime-dir 2>/dev/null)/libclang_rt.fuzzer-x86_64.a"
  [[ -f "$rt" ]] || { echo "fuzz.sh: libFuzzer runtime $rt missing (scripts/setup.sh installs libclang-rt-dev)" >&2; exit 1; }
  mkdir -p "$BUILD"
  # One build at a time (ctest may start several fuzz runs at once).
  exec 9>"$BUILD/.build.lock"
  flock 9
  if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
    CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -DLOCKSTEP_FUZZ=ON -DLOCKSTEP_BUILD_TESTS=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
      -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" > "$BUILD/configure.log" 2>&1 \
      || { cat "$BUILD/configure.log" >&2; exit 1; }
  fi
  local targets=()
  for t in "${TARGETS[@]}"; do targets+=("fuzz_$t"); done
  cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target "${targets[@]}" > "$BUILD/build.log" 2>&1 \
    || { tail -n 60 "$BUILD/build.log" >&2; echo "fuzz.sh: build failed (log: $BUILD/build.log)" >&2; exit 1; }
  flock -u 9
}

# fuzz TARGET SECONDS: returns libFuzzer's status (0: no finding).
fuzz() {
  local t="$1" secs="$2"
  local bin="$BUILD/tests/fuzz/fuzz_$t" seeds="$ROOT/tests/fuzz/corpus/$t" work="$BUILD/runs/$t"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp "$seeds"/* "$work/corpus/"
  local dict=()
  [[ -f "$ROOT/tests/fuzz/$t.dict" ]] && dict=(-dict="$ROOT/tests/fuzz/$t.dict")
  # -malloc_limit_mb: one allocation of more than 512 MB from a small input
  # (a header that asks for gigabytes) is a finding, not just slow.
  local args=("$work/corpus" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10
              -artifact_prefix="$work/artifacts/" -print_final_stats=1 "${dict[@]}")
  local status=0
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  if [[ "${FUZZ_VERBOSE:-0}" == 1 ]]; then
    "$bin" "${args[@]}" 2>&1 | tee "$work/fuzz.log" || status=${PIPESTATUS[0]}
  else
    "$bin" "${args[@]}" > "$work/fuzz.log" 2>&1 || status=$?
  fi
  local execs final
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log" | tail -n 1)
  # libFuzzer's last status line: "#N DONE cov: C ft: F corp: UNITS/SIZE ..."
  final=$(sed -n 's/^#[0-9]*[[:space:]]*DONE[[:space:]]*cov: \([0-9]*\) ft: [0-9]* corp: \([^ ]*\).*/coverage \1, corpus \2/p' \
    "$work/fuzz.log" | tail -n 1)
  if [[ $status -ne 0 ]]; then
    tail -n 60 "$work/fuzz.log"
    echo "fuzz.sh: $t: FINDING after ${execs:-?} executions (libFuzzer exit $status); log $work/fuzz.log"
    ls -1 "$work/artifacts" | sed "s|^|  artifact: $work/artifacts/|"
    echo "  reproduce: $bin $work/artifacts/<file>"
    return 1
  fi
  echo "fuzz.sh: $t: ${execs:-?} executions in $secs s, no finding (${final:-no final stats}); exit 0"
}

[[ $# -ge 1 ]] || usage
if [[ "$1" == "--build" ]]; then
  build
  echo "fuzz.sh: built ${TARGETS[*]/#/fuzz_} in $BUILD"
  exit 0
fi
[[ $# -eq 2 && "$2" =~ ^[0-9]+$ ]] || usage
case "$1" in
  all) run=("${TARGETS[@]}") ;;
  idx|safetensors|hostfile|options) run=("$1") ;;
  *) usage ;;
esac
build
failed=0
for t in "${run[@]}"; do fuzz "$t" "$2" || failed=1; done
exit $failed
