#!/usr/bin/env bash
# CPU training results that must not move when the code is only reorganised:
# a fixed set of runs (lenet N=1, keras-cnn N=2, resnet20 N=2 with AdamW on
# synthetic data, convnet with Adam, lenet N=2 with ZeRO-1, a 2-block
# gpt2-tiny N=2 with AdamW on random tokens), each with
# OPENBLAS_CORETYPE=Haswell and one compute thread, must save weights whose
# per-tensor CRC-32s (the "tensor_crc32" metadata --save-weights writes) are
# those recorded in bitwise_reference.txt. A change that is meant to change
# results re-records them (--record) and says so in its commit.
# The bits depend on the code the compiler emitted and on the kernels that
# ran, so the check runs only where the build (compiler, build type, -march)
# and the vector-kernel clone are the reference's; elsewhere it reports
# skipped (exit 77) with the reason.
# usage: bitwise_reference.sh TRAINER BUILD_DESCRIPTION [--record]
#   BUILD_DESCRIPTION: "<compiler> <version> <build type> native=<ON|OFF>" (from CMake)
set -euo pipefail
TRAINER=$1 BUILD=$2 MODE=${3:-check}
REF="$(dirname "$(readlink -f "$0")")/bitwise_reference.txt"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_CORETYPE=Haswell LOCKSTEP_DEVICE=cpu
unset LOCKSTEP_BLAS_CHOICE

flags=" $(grep -m1 '^flags' /proc/cpuinfo 2> /dev/null | cut -d: -f2) "
[[ $flags == *" avx2 "* && $flags == *" fma "* ]] || { echo "skipped: OpenBLAS's Haswell kernels need AVX2 and FMA"; exit 77; }
# The clone of lockstep's own kernels this build runs here, from the start-up line.
clone=$("$TRAINER" --model mlp --dataset synthetic --synthetic-samples 64 --batch-size 32 --max-steps 1 --threads 1 \
          --no-eval --progress off | sed -n 's/.*, own kernels \(.*\)$/\1/p')
here="build: $BUILD; own kernels $clone; OpenBLAS $OPENBLAS_CORETYPE"

COMMON=(--threads 1 --no-eval --progress off)
run() {  # NAME RANKS ARGS...: trains, adds "NAME sha256-of-the-tensor-CRCs" to the digests
  local name=$1 n=$2; shift 2
  mpirun -np "$n" "$TRAINER" "${COMMON[@]}" "$@" --save-weights "$WORK/$name.safetensors" > "$WORK/$name.log" 2>&1 ||
    { cat "$WORK/$name.log"; fail "$name: the run failed"; }
  python3 - "$WORK/$name.safetensors" "$name" >> "$WORK/digests" <<'PY'
import hashlib, json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    meta = json.loads(f.read(n))["__metadata__"]
print(sys.argv[2], hashlib.sha256(meta["tensor_crc32"].encode()).hexdigest())
PY
}
run lenet-n1 1 --model lenet --max-steps 30
run keras-cnn-n2 2 --model keras-cnn --max-steps 20
run resnet20-n2-adamw 2 --model resnet20 --dataset synthetic --synthetic-samples 256 --batch-size 16 --max-steps 8 \
  --optimizer adamw --lr 1e-3 --weight-decay 0.01
run convnet-adam 1 --model convnet --batch-size 32 --max-steps 5 --optimizer adam --lr 1e-3
run lenet-zero1-n2 2 --model lenet --max-steps 20 --zero-stage 1 --optimizer sgd --momentum 0.9 --overlap on
run gpt2-small-n2 2 --model gpt2-tiny --dataset synthetic --synthetic-samples 64 --vocab-size 256 --seq-len 32 \
  --n-layer 2 --n-embd 64 --n-head 4 --batch-size 4 --max-steps 10 --optimizer adamw --lr 1e-3 --beta2 0.95 \
  --weight-decay 0.1

if [[ $MODE == --record ]]; then
  { echo "# $here"; cat "$WORK/digests"; } > "$REF"
  echo "recorded $REF:"; cat "$REF"
  exit 0
fi
[[ -f $REF ]] || fail "no reference: $REF (record one with --record)"
recorded=$(head -1 "$REF")
[[ $recorded == "# $here" ]] || { echo "skipped: the reference was recorded with '${recorded#\# }', this is '$here'"; exit 77; }
if ! diff <(tail -n +2 "$REF") "$WORK/digests"; then
  fail "weights differ from the reference (lines above: < recorded, > now)"
fi
echo "ok: $(wc -l < "$WORK/digests") runs bitwise as recorded ($here)"
