#!/usr/bin/env bash
# The installed package as a user meets it: `cmake --install` of this build into
# a fresh prefix; the installed trainer runs; a separate project (consumer/)
# finds lockstep with find_package, builds against the installed headers and
# static libraries, and trains data-parallel at N=1 and N=2 (the same losses:
# N ranks x B/N equals 1 rank x B, replicas bitwise identical, see main.cpp),
# and at N=2 with the optimizer state sharded (ZeRO-1: the same losses, bit
# for bit, with half the state); a CUDA package compiles its GPU loop too;
# asking for a version the package is not (find_package(lockstep 99)) fails.
# usage: find_package.sh BUILD_DIR
set -euo pipefail
BUILD=$(readlink -f "$1") SRC=$(dirname "$(readlink -f "$0")")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$BUILD" --prefix "$WORK/prefix" > "$WORK/install.log" || { cat "$WORK/install.log"; fail "cmake --install"; }
for f in bin/trainer bin/lockstep-run lib/liblockstep.a lib/liblockstep_models.a include/lockstep/nn/model.h \
         include/lockstep/models/registry.h lib/cmake/lockstep/lockstepConfig.cmake; do
  [[ -f $WORK/prefix/$f ]] || fail "not installed: $f"
done
"$WORK/prefix/bin/trainer" --version | grep -q '^lockstep ' || fail "the installed trainer does not run"

cmake -S "$SRC/consumer" -B "$WORK/build" -DCMAKE_PREFIX_PATH="$WORK/prefix" -DCMAKE_BUILD_TYPE=Release \
  > "$WORK/configure.log" 2>&1 || { cat "$WORK/configure.log"; fail "configuring a project with find_package(lockstep)"; }
cmake --build "$WORK/build" -j2 > "$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; fail "building against the package"; }

one=$(mpirun -np 1 "$WORK/build/consumer") || fail "the consumer at N=1: $one"
two=$(mpirun -np 2 "$WORK/build/consumer") || fail "the consumer at N=2: $two"
zero=$(mpirun -np 2 "$WORK/build/consumer" --zero-stage-1) || fail "the consumer at N=2, ZeRO-1: $zero"
echo "$one"
echo "$two"
echo "$zero"
# The library's programs run the trainer's OpenBLAS kernels (use_fast_blas_kernels).
"$WORK/prefix/bin/trainer" --model mlp --dataset synthetic --synthetic-samples 256 --batch-size 64 --max-steps 1 \
  --threads 1 --no-eval --progress off --device cpu > "$WORK/trainer.out" || fail "the installed trainer's run"
theirs=$(sed -n 's/.* thread[s]*, OpenBLAS \(.*\), own kernels .*/\1/p' "$WORK/trainer.out")
[[ -n $theirs && ${one##*, OpenBLAS } == "$theirs" ]] ||
  fail "the consumer runs OpenBLAS '${one##*, OpenBLAS }', the trainer '$theirs'"
[[ $(sed 's/, optimizer state.*//' <<< "$two") == $(sed 's/, optimizer state.*//' <<< "$zero") ]] ||
  fail "ZeRO-1 trained differently from stage 0 at N=2"
read -r held all <<< "$(sed -n 's/.*optimizer state \([0-9]*\) of \([0-9]*\) values.*/\1 \2/p' <<< "$zero")"
((held > 0 && 2 * held <= all + 64)) || fail "ZeRO-1: rank 0 holds $held of $all state values"
# A package built with CUDA compiles the consumer's GPU loop too (README's "On
# the GPU": the installed headers reach cuDNN, NCCL and the CUDA runtime).
# Without a GPU here it is refused in one line; with one it trains (the GPU
# run itself is the gpu-labelled test gpu.consumer.np1).
if grep -q 'set(lockstep_HAVE_CUDA ON)' "$WORK/prefix/lib/cmake/lockstep/lockstepConfig.cmake"; then
  code=0
  gpu=$(mpirun -np 1 "$WORK/build/consumer" --gpu 2>&1) || code=$?
  if [[ $code -eq 0 ]]; then
    grep -q "^consumer: ok on 1 ranks (GPUs, NCCL)" <<< "$gpu" || fail "the consumer's GPU run: $gpu"
  else
    [[ $(grep -c "^consumer: " <<< "$gpu") -eq 1 ]] && grep -q "^consumer: --gpu: " <<< "$gpu" ||
      fail "the consumer's GPU run without a GPU: exit $code, not one line naming --gpu: $gpu"
  fi
  echo "consumer --gpu (CUDA package): ${gpu%%$'\n'*}"
fi
# Losses "a -> b" at N=1 and N=2 agree to rounding (another summation order).
losses() { sed -n 's/.*: loss \([0-9.]*\) -> \([0-9.]*\) .*/\1 \2/p' <<< "$1"; }
read -r a1 b1 <<< "$(losses "$one")" && read -r a2 b2 <<< "$(losses "$two")" || fail "no losses printed"
awk -v a1="$a1" -v b1="$b1" -v a2="$a2" -v b2="$b2" \
  'function d(x, y) { return x > y ? x - y : y - x } BEGIN { exit !(d(a1, a2) <= 1e-3 && d(b1, b2) <= 1e-3) }' ||
  fail "N=1 and N=2 trained differently: $a1 -> $b1 vs $a2 -> $b2"

# The version file: a project asking for lockstep 99 must not get 0.x.
sed 's/find_package(lockstep 0.1 REQUIRED)/find_package(lockstep 99 REQUIRED)/' "$SRC/consumer/CMakeLists.txt" \
  > "$WORK/CMakeLists.txt"
mkdir "$WORK/v99" && cp "$WORK/CMakeLists.txt" "$SRC/consumer/main.cpp" "$WORK/v99/"
if cmake -S "$WORK/v99" -B "$WORK/v99/build" -DCMAKE_PREFIX_PATH="$WORK/prefix" > "$WORK/v99.log" 2>&1; then
  fail "find_package(lockstep 99) accepted the installed $(grep -o 'version [0-9.]*' "$WORK/v99.log" | head -1)"
fi
grep -q 'compatible with requested version "99"' "$WORK/v99.log" || { cat "$WORK/v99.log"; fail "lockstep 99: not refused for its version"; }
echo "ok: installed package (find_package(lockstep), lockstep::lockstep and lockstep::models)"
