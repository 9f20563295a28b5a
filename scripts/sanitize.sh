#!/usr/bin/env bash
# Sanitizer runs (docs/reliability.md, "Sanitizers"):
#   asan  build-asan/ with ASan+UBSan (gcc): the whole ctest suite, MPI,
#         faults and cluster tests included
#   tsan  build-tsan/ with TSan: the comm threads, buckets, distributed
#         optimizer, watchdog and checkpoint writer (MPI tests at 2 and 4
#         ranks, watchdog, loader and checkpoint-writer unit tests, 2-rank
#         trainer runs with overlap and the watchdog, one with --zero-stage 1
#         and background checkpoints, one with --sync-batchnorm)
#   all   both (default)
# Options are compiled into every binary (tests/sanitizers/sanitizer_defaults.cpp.in)
# so that ranks started over ssh get them too; ASAN_OPTIONS, UBSAN_OPTIONS,
# LSAN_OPTIONS and TSAN_OPTIONS override them. Every report is written to
# <build>/sanitizer-reports/; a run fails when a test fails or when that
# directory is not empty (a report from a process whose failure a test
# expected, or whose stderr it kept), and prints the reports.
# Extra arguments go to ctest in the asan part (e.g. -L unit).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WHAT="${1:-all}"
[[ $# -gt 0 ]] && shift
case "$WHAT" in asan|tsan|all) ;; *) echo "usage: scripts/sanitize.sh [asan|tsan|all] [ctest args...]" >&2; exit 2;; esac
ASAN_BUILD="${ASAN_BUILD_DIR:-$ROOT/build-asan}"
TSAN_BUILD="${TSAN_BUILD_DIR:-$ROOT/build-tsan}"
JOBS="${JOBS:-2}"
COMMON_CMAKE="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# Prints and counts the reports in $1/sanitizer-reports; non-zero if any.
check_reports() {
  local dir="$1/sanitizer-reports" n
  n=$(find "$dir" -type f 2> /dev/null | wc -l)
  if (( n > 0 )); then
    echo "FAIL: $n sanitizer report(s) in $dir:"
    for f in "$dir"/*; do echo "=== $f"; cat "$f"; done
    return 1
  fi
  echo "ok: no sanitizer reports in $dir"
}

fresh_reports() { rm -rf "$1/sanitizer-reports"; mkdir -p "$1/sanitizer-reports"; }

run_asan() {
  echo "== asan: ASan+UBSan build in $ASAN_BUILD"
  local t0=$SECONDS
  CMAKE_ARGS="$COMMON_CMAKE -DLOCKSTEP_SANITIZE=address" BUILD_DIR="$ASAN_BUILD" "$ROOT/scripts/build.sh"
  echo "== asan: build $((SECONDS - t0)) s; whole suite under ctest"
  fresh_reports "$ASAN_BUILD"
  t0=$SECONDS
  local rc=0
  # The timeout is test.sh's: every test's own TIMEOUT property still applies.
  # TEST_TIME_SCALE=3 widens only mpi.preflight's 5 s gate, which counts
  # start-up and exit: an ASan rank starts about 2x slower (instrumented data
  # loading, the slow unwinder on every malloc) and LeakSanitizer's exit check
  # walks Open MPI's ~3,300 leftover allocations; 4 ranks on 2 cores took 7.3 s.
  (cd "$ASAN_BUILD" && TEST_TIME_SCALE=3 ctest --output-on-failure --timeout 1200 "$@") || rc=$?
  echo "== asan: suite $((SECONDS - t0)) s, ctest exit $rc"
  check_reports "$ASAN_BUILD" || rc=1
  return $rc
}

run_tsan() {
  echo "== tsan: TSan build in $TSAN_BUILD (mpi_tests, lockstep_tests, trainer)"
  local t0=$SECONDS
  mkdir -p "$TSAN_BUILD"
  # shellcheck disable=SC2086
  cmake -S "$ROOT" -B "$TSAN_BUILD" $COMMON_CMAKE -DLOCKSTEP_SANITIZE=thread > "$TSAN_BUILD/configure.log" 2>&1 \
    || { cat "$TSAN_BUILD/configure.log"; return 1; }
  cmake --build "$TSAN_BUILD" -j "$JOBS" --target mpi_tests lockstep_tests trainer
  echo "== tsan: build $((SECONDS - t0)) s"
  fresh_reports "$TSAN_BUILD"
  t0=$SECONDS
  # OpenMP (libgomp) and OpenBLAS are not built with TSan, so their worker
  # threads would produce false reports: run single-threaded instead of
  # suppressing them. Open MPI's are suppressed (tests/sanitizers/tsan.supp).
  export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
  local rc=0 work
  work=$(mktemp -d)
  step() {  # name, command...: runs it, records a failure, goes on
    local name="$1" s=$SECONDS; shift
    echo "-- tsan: $name"
    if "$@" > "$work/out" 2>&1; then
      echo "   passed ($((SECONDS - s)) s)"
    else
      local code=$?
      echo "   FAILED (exit $code, $((SECONDS - s)) s):"; tail -n 40 "$work/out"; rc=1
    fi
  }
  step "buckets, distributed optimizer, collectives at 2 ranks" \
    mpirun -np 2 --oversubscribe "$TSAN_BUILD/tests/mpi_tests"
  step "buckets, distributed optimizer, collectives at 4 ranks" \
    mpirun -np 4 --oversubscribe "$TSAN_BUILD/tests/mpi_tests"
  step "watchdog, prefetch-loader and checkpoint-writer unit tests" "$TSAN_BUILD/tests/lockstep_tests" \
    "[watchdog],[data],[checkpoint]"
  # --overlap on: the communication threads run whatever --overlap auto would choose here.
  local train=(--model lenet --dataset synthetic --synthetic-samples 512 --batch-size 32 --epochs 1 --threads 1
               --collective-timeout 30 --progress off --loader-threads 2 --overlap on)
  step "trainer, 2 ranks, overlap, shared-memory buckets, watchdog, timeline" \
    mpirun -np 2 --oversubscribe "$TSAN_BUILD/trainer" "${train[@]}" --timeline "$work/trace.json"
  step "trainer, 2 ranks, overlap, MPI buckets (bf16 wire, 5 buckets)" \
    mpirun -np 2 --oversubscribe "$TSAN_BUILD/trainer" "${train[@]}" --grad-compression bf16 \
    --fusion-threshold-mb 0.05 --first-bucket-mb 0.01
  # ZeRO-1: the parameter allgather runs on a second communication thread
  # while the next forward reads each layer's parameters once they arrive
  # (a bf16 wire keeps the gradients, and so the parameters, out of shared
  # memory: the allgather goes over MPI).
  step "trainer, 2 ranks, --zero-stage 1, allgather during the forward, checkpoints" \
    mpirun -np 2 --oversubscribe "$TSAN_BUILD/trainer" "${train[@]}" --zero-stage 1 --grad-compression bf16 \
    --fusion-threshold-mb 0.05 --first-bucket-mb 0.01 --checkpoint-dir "$work/ckpt" --checkpoint-every 4 \
    --check-replicas-every 3
  # Synchronised batch norm reduces statistics on the training thread while
  # the communication thread reduces gradient buckets of the same step.
  step "trainer, 2 ranks, resnet20 with --sync-batchnorm and overlapped buckets" \
    mpirun -np 2 --oversubscribe "$TSAN_BUILD/trainer" --model resnet20 --dataset synthetic \
    --synthetic-shape 3,16,16 --synthetic-samples 128 --batch-size 8 --epochs 1 --threads 1 --sync-batchnorm \
    --fusion-threshold-mb 0.2 --first-bucket-mb 0.05 --collective-timeout 30 --progress off --overlap on
  rm -rf "$work"
  echo "== tsan: runs $((SECONDS - t0)) s"
  check_reports "$TSAN_BUILD" || rc=1
  return $rc
}

status=0
if [[ $WHAT == asan || $WHAT == all ]]; then run_asan "$@" || status=1; fi
if [[ $WHAT == tsan || $WHAT == all ]]; then run_tsan || status=1; fi
if (( status == 0 )); then echo "sanitize.sh $WHAT: passed"; else echo "sanitize.sh $WHAT: FAILED"; fi
exit $status
