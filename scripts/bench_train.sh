#!/usr/bin/env bash
# Training throughput, lockstep vs PyTorch 1.13 CPU, side by side.
#
# For each model: REPS rounds; in each round the lockstep trainer (Fashion-MNIST
# through its prefetching loader, summary images/s after 5 warm-up steps) and
# PyTorch (scripts/bench/torch_cpu.py: the same layers, optimizer, batch and
# thread count on one fixed synthetic batch, median of timed windows after 5
# warm-up steps) run one after the other, so both see the same machine state.
# Reports medians over rounds, the ratio, and lockstep's effective GFLOP/s
# (3 x forward FLOPs of direct convolution per image x images/s) next to the
# core's single-thread sgemm rate, and each side's peak resident memory
# (medians over rounds; PyTorch's includes what its runtime holds after
# `import torch`, reported beside it). Each side's kernels are named: the
# OpenBLAS family the trainer ran (core/blas_kernels.h; its metrics summary)
# and its own vector-kernel clone, and the instruction set oneDNN ran
# PyTorch's convolutions with (DNNL_VERBOSE). Last line: JSON.
# ResNets (no CIFAR/ImageNet files on the development machines) run in
# --benchmark mode: synthetic data of the model's shape, --image-size S
# shrinking H and W (resnet50 is 224x224, 1000 classes), PyTorch on the same shape.
# usage: scripts/bench_train.sh [--models "lenet keras-cnn"] [--batch 256] [--threads 1] [--reps 5] [--image-size S] [--steps N]
set -euo pipefail
# A CPU benchmark: the CPU even where --device auto would find a GPU (a
# command-line --device still wins).
export LOCKSTEP_DEVICE="${LOCKSTEP_DEVICE:-cpu}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
MODELS="lenet keras-cnn" BATCH=256 THREADS=1 REPS=5 IMAGE=0 STEPS=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --image-size) IMAGE=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    *) echo "bench_train.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
"$ROOT/scripts/build.sh" > /dev/null
TORCH_PY=/usr/bin/python3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

SGEMM=$("$BUILD/bench_sgemm" | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["sgemm_gflops"])')
# oneDNN's instruction set for PyTorch's convolutions (its first primitive logs it).
TORCH_ISA=$(DNNL_VERBOSE=1 "$TORCH_PY" -c 'import torch; torch.nn.functional.conv2d(torch.randn(8, 16, 28, 28), torch.randn(32, 16, 3, 3))' 2>/dev/null |
            sed -n 's/.*,isa:\(.*\)/\1/p' | head -1)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; sgemm 1 thread: $SGEMM GFLOP/s"
echo "PyTorch's oneDNN: ${TORCH_ISA:-unknown}"
echo "batch $BATCH, $THREADS thread(s), $REPS rounds"

results=()
for model in $MODELS; do
  steps=60; [[ $model == keras-cnn || $model == convnet ]] && steps=40
  data=() shape=()
  if [[ $model == resnet* ]]; then
    steps=20
    side=32 classes=10; [[ $model == resnet50 ]] && side=224 classes=1000
    ((IMAGE > 0)) && side=$IMAGE
    data=(--benchmark --image-size "$side")
    shape=(--channels 3 --image-size "$side" --classes "$classes")
  fi
  ((STEPS > 0)) && steps=$STEPS
  ours=() theirs=() our_mem=() their_mem=() their_base=()
  for ((r = 1; r <= REPS; ++r)); do
    "$BUILD/trainer" --model "$model" --batch-size "$BATCH" --threads "$THREADS" --max-steps "$steps" \
      "${data[@]}" --progress off --metrics-file "$WORK/m.jsonl" > "$WORK/out"
    read -r rate mem < <(python3 -c 'import json,sys; s=[json.loads(l) for l in open(sys.argv[1])][-1]; print(s["images_per_sec"], s["host_peak_resident_mib"])' "$WORK/m.jsonl")
    kernels=$(python3 -c 'import json,sys; s=[json.loads(l) for l in open(sys.argv[1])][-1]; print("OpenBLAS", s["blas_kernels"] + ", own", s["simd_clone"])' "$WORK/m.jsonl")
    ours+=("$rate") our_mem+=("$mem")
    read -r rate mem base < <("$TORCH_PY" "$ROOT/scripts/bench/torch_cpu.py" --model "$model" --batch-size "$BATCH" \
      --threads "$THREADS" --steps "$(( steps < 40 ? steps : 40 ))" --window "$(( steps < 40 ? 5 : 10 ))" "${shape[@]}" | tail -1 | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["images_per_sec"], j["peak_resident_mib"], j["import_resident_mib"])')
    theirs+=("$rate") their_mem+=("$mem") their_base+=("$base")
    printf '  %s round %d: lockstep %.1f img/s %s MiB, pytorch %.1f img/s %s MiB\n' "$model" "$r" "${ours[-1]}" \
      "${our_mem[-1]%.*}" "${theirs[-1]}" "${their_mem[-1]%.*}"
  done
  mflop=$(grep -o '[0-9.]* MFLOP forward' "$WORK/out" | cut -d' ' -f1)
  results+=("$(python3 - "$model" "$mflop" "$SGEMM" "${ours[*]}" "${theirs[*]}" "${our_mem[*]}" "${their_mem[*]}" \
                "${their_base[*]}" "$kernels" "$TORCH_ISA" <<'PY'
import json, statistics, sys
model, mflop, sgemm = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
ours, theirs, our_mem, their_mem, their_base = ([float(v) for v in a.split()] for a in sys.argv[4:9])
kernels, torch_isa = sys.argv[9], sys.argv[10]
o, t = statistics.median(ours), statistics.median(theirs)
gf = 3 * mflop * 1e6 * o / 1e9
def rate(v):  # whole images/s, or one decimal below 100 (resnet50 at 224x224 runs at 4-8)
    return round(v) if v >= 100 else round(v, 1)
print(json.dumps({"model": model, "lockstep_img_s": rate(o), "pytorch_img_s": rate(t), "ratio": round(o / t, 2),
                  "mflop_fwd": mflop, "effective_gflops": round(gf, 1), "sgemm_gflops": sgemm,
                  "lockstep_runs": [rate(v) for v in ours], "pytorch_runs": [rate(v) for v in theirs],
                  "lockstep_peak_mib": round(statistics.median(our_mem)),
                  "pytorch_peak_mib": round(statistics.median(their_mem)),
                  "pytorch_import_mib": round(statistics.median(their_base)),
                  "lockstep_kernels": kernels, "pytorch_onednn_isa": torch_isa}))
PY
)")
done
python3 - "${results[@]}" <<'PY'
import json, sys
rows = [json.loads(a) for a in sys.argv[1:]]
print(f"\n{'model':<10} {'lockstep img/s':>14} {'pytorch img/s':>14} {'ratio':>7} {'effective GFLOP/s':>22}"
      f" {'peak MiB lockstep':>18} {'pytorch (import)':>17}")
for r in rows:
    print(f"{r['model']:<10} {r['lockstep_img_s']:>14,} {r['pytorch_img_s']:>14,} {r['ratio']:>6.2f}x "
          f"{r['effective_gflops']:>10.1f} of {r['sgemm_gflops']:.0f} sgemm"
          f" {r['lockstep_peak_mib']:>18,} {r['pytorch_peak_mib']:>8,} ({r['pytorch_import_mib']:,})"
          f"  {r['lockstep_kernels']}")
print(json.dumps({"bench": "train", "results": rows}))
PY
