#!/usr/bin/env bash
# OpenBLAS's kernels chosen from the CPU's features (core/blas_kernels.h), as
# the trainer and a benchmark program meet them:
#   - the start-up line names the kernels in use, and bench_sgemm runs the same;
#   - a user's OPENBLAS_CORETYPE is kept, and the line says it was the user's;
#   - a CPU OpenBLAS does not recognise (met here through an LD_PRELOAD shim
#     that makes openblas_get_corename() answer "Prescott", or "Haswell", until
#     OPENBLAS_CORETYPE is set) gets SkylakeX on AVX-512, Haswell on AVX2+FMA:
#     the process re-executes itself, also as mpirun's ranks, the line says
#     why, and the weights are bitwise those of a run given that family
#     explicitly;
#   - the variable carrying the choice is not an unknown option to the trainer.
# usage: blas_kernels.sh TRAINER BENCH_SGEMM SHIM.so COMPARE_WEIGHTS
set -euo pipefail
TRAINER=$1 SGEMM=$2 SHIM=$3 COMPARE=$4
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LOCKSTEP_DEVICE=cpu
unset OPENBLAS_CORETYPE LOCKSTEP_BLAS_CHOICE
# An ASan build (scripts/sanitize.sh) would refuse the preloaded shim ahead of
# its runtime; the shim allocates nothing.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { [[ $flags == *" $1 "* ]]; }
if has avx512f && has avx512bw && has avx512vl && has avx512dq; then
  want_core=SkylakeX want_reason=AVX-512
elif has avx2 && has fma; then
  want_core=Haswell want_reason="AVX2 and FMA"
else
  want_core="" want_reason=""
fi
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); expected for an unrecognised CPU: ${want_core:-no change}"

ARGS=(--model mlp --dataset synthetic --synthetic-samples 256 --batch-size 64 --max-steps 3 --threads 1 --no-eval
      --progress off)
# The kernels named on the trainer's start-up line: "NAME (...)" up to ", own kernels".
kernels() { sed -n 's/.* thread[s]*, OpenBLAS \(.*\), own kernels .*/\1/p' "$1"; }
train() {  # out-file [env...] : one short run
  local out=$1; shift
  env "$@" "$TRAINER" "${ARGS[@]}" --metrics-file "$out.jsonl" --save-weights "$out.safetensors" > "$out" 2> "$out.err" ||
    fail "the trainer failed ($*): $(cat "$out" "$out.err")"
  # The input-bound advice depends on how loaded the machine is, not on the
  # kernels: a busy CI host can slow the loader past its threshold.
  ! grep -v '^warning: input-bound: ' "$out.err" | grep -q . || fail "stderr not empty ($*): $(cat "$out.err")"
  [[ -n $(kernels "$out") ]] || fail "no kernels on the start-up line ($*): $(grep OpenBLAS "$out")"
}
sgemm() { env "$@" "$SGEMM" | sed -n 's/^sgemm [0-9x]*, 1 thread, OpenBLAS \(.*\): [0-9.]* GFLOP\/s$/\1/p'; }

# 1. As this machine is: the trainer and the benchmark run the same kernels.
train "$WORK/native"
native=$(kernels "$WORK/native")
echo "this machine: OpenBLAS $native"
[[ $(sgemm) == "$native" ]] || fail "bench_sgemm runs '$(sgemm)', the trainer '$native'"
if [[ $native == *"(chosen: "* ]]; then
  [[ $native == "$want_core (chosen: $want_reason; OpenBLAS reported "* ]] ||
    fail "lockstep chose '$native'; for these features it should be $want_core for $want_reason"
fi
grep -q "own kernels x86-64-v3\|own kernels x86-64 baseline" "$WORK/native" || fail "the vector-kernel clone is not named"

# 2. The user's OPENBLAS_CORETYPE is kept, even where lockstep would choose
#    otherwise: how to meet OpenBLAS's Prescott kernels on any x86-64 machine.
for core in Prescott Haswell; do
  train "$WORK/user-$core" OPENBLAS_CORETYPE=$core
  [[ $(kernels "$WORK/user-$core") == "$core (OPENBLAS_CORETYPE=$core)" ]] ||
    fail "OPENBLAS_CORETYPE=$core: the trainer says '$(kernels "$WORK/user-$core")'"
  [[ $(sgemm OPENBLAS_CORETYPE=$core) == "$core (OPENBLAS_CORETYPE=$core)" ]] ||
    fail "OPENBLAS_CORETYPE=$core: bench_sgemm says '$(sgemm OPENBLAS_CORETYPE=$core)'"
done
# A choice variable that does not match OPENBLAS_CORETYPE is not lockstep's: the user's.
train "$WORK/stale" OPENBLAS_CORETYPE=Haswell "LOCKSTEP_BLAS_CHOICE=SkylakeX|AVX-512|Prescott"
[[ $(kernels "$WORK/stale") == "Haswell (OPENBLAS_CORETYPE=Haswell)" ]] ||
  fail "a stale LOCKSTEP_BLAS_CHOICE was taken for lockstep's choice: $(kernels "$WORK/stale")"
grep -q "LOCKSTEP_BLAS_CHOICE" "$WORK/stale" && fail "LOCKSTEP_BLAS_CHOICE was reported as an unknown variable"

# 3. The CPU OpenBLAS does not recognise: Prescott (its generic fallback), and
#    Haswell (what 0.3.21 gives AMD Zen 5).
for fake in Prescott Haswell; do
  want="$want_core (chosen: $want_reason; OpenBLAS reported $fake)"
  [[ -z $want_core || ($fake == Haswell && $want_core == Haswell) ]] && want=$fake  # OpenBLAS's choice stands
  train "$WORK/fake-$fake" LD_PRELOAD="$SHIM" FAKE_OPENBLAS_CORENAME=$fake
  got=$(kernels "$WORK/fake-$fake")
  echo "OpenBLAS pretending $fake: trainer '$got'"
  [[ $got == "$want" ]] || fail "OpenBLAS reporting $fake: the trainer says '$got', expected '$want'"
  [[ $(sgemm LD_PRELOAD="$SHIM" FAKE_OPENBLAS_CORENAME=$fake) == "$want" ]] ||
    fail "OpenBLAS reporting $fake: bench_sgemm says '$(sgemm LD_PRELOAD="$SHIM" FAKE_OPENBLAS_CORENAME=$fake)'"
done
if [[ -n $want_core ]]; then
  # The re-executed run is the run asked for: the same weights, bit for bit,
  # as one given that family by hand.
  train "$WORK/explicit" OPENBLAS_CORETYPE=$want_core
  "$COMPARE" "$WORK/fake-Prescott.safetensors" "$WORK/explicit.safetensors" --exact > /dev/null ||
    fail "the re-executed run's weights differ from OPENBLAS_CORETYPE=$want_core's"
  python3 - "$WORK/fake-Prescott.jsonl" "$want_core" <<'PY' || fail "the metrics summary does not name the kernels in use"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
assert s["type"] == "summary" and s["blas_kernels"] == sys.argv[2], s.get("blas_kernels")
PY
  # mpirun's ranks re-execute themselves before MPI starts, each on its own.
  LD_PRELOAD="$SHIM" mpirun -np 2 "$TRAINER" "${ARGS[@]}" --log-all-ranks > "$WORK/mpi" 2>&1 ||
    fail "mpirun -np 2 with the re-exec: $(tail -5 "$WORK/mpi")"
  [[ $(grep -c "OpenBLAS $want_core (chosen: $want_reason; OpenBLAS reported Prescott)" "$WORK/mpi") -eq 2 ]] ||
    fail "mpirun -np 2: not both ranks on $want_core: $(grep OpenBLAS "$WORK/mpi")"
fi
echo "ok: kernels named and chosen from the CPU's features"
