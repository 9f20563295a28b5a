#!/usr/bin/env bash
# --layout nhwc from the command line (CPU): the same model, weights and
# checkpoints in either layout.
#   1. keras-cnn (convolutions, max pooling, dropout on a 4-D tensor, flatten),
#      8 steps, and resnet20 (batch norm, residual blocks, global average
#      pooling), 1 step, from the same seed in NCHW and in NHWC: the trained
#      weights agree to fp32 rounding (another summation order; dropout draws
#      the same masks by logical element), and the NHWC run says so in its log.
#      The NCHW runs use --conv-algorithm im2col, the algorithm NHWC
#      convolutions have on the CPU, so the layouts are compared on the same
#      arithmetic; NCHW's default Winograd rounds differently (tests/ops check
#      it against im2col) and, through ReLU and pooling choices between
#      near-equal values, moves these nets by up to 4e-2 within 3 steps.
#      resnet20 takes one step only: on this synthetic data it amplifies
#      rounding chaotically (NCHW on 1 vs 2 threads, which only moves GEMM
#      chunk boundaries: 2e-6 apart after 1 step, 3e-3 after 2, 0.6 after 8;
#      NHWC vs NCHW: 2e-6, 3e-3, 0.58). Even its one step can take a ReLU
#      input within rounding of zero the other way: on a Zen 4 (OpenBLAS
#      Cooperlake kernels) a batch-norm bias then differed by 1.1e-2 of its
#      scale (3e-5 absolute; 1.7e-6 on a Zen 3). So for resnet20 the first
#      forward pass is held to rounding (the loss of step 1, before any
#      update: a flipped ReLU moves its output by about the rounding) and the
#      weights after one step to 5e-2 (a wrong layout gives order 1); keras-cnn
#      holds both to rounding.
#   2. a keras-cnn checkpoint written in NCHW at step 4 resumes in NHWC for
#      four steps and ends where the straight NCHW run ends (to rounding):
#      checkpoints do not record a layout. keras-cnn, not resnet20: one resnet20
#      step from a trained state already moves a batch-norm bias by 2e-3 to
#      2e-2 between layouts (measured at steps 2 to 5, 2026-11-23; one ReLU
#      input within fp32 rounding of zero going the other way is enough, and a
#      batch of 32 has about six million), so it cannot show agreement to
#      rounding past its first step.
# usage: layout.sh path/to/trainer path/to/compare_weights
set -euo pipefail
TRAINER=$1
CMP=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
COMMON=(--dataset synthetic --synthetic-samples 256 --global-batch-size 32 --threads 1 --progress off --no-eval
        --seed 4 --lr 0.05)

for run in keras-cnn:8:1e-4 resnet20:1:5e-2; do
  IFS=: read -r model steps rtol <<< "$run"
  "$TRAINER" --model "$model" "${COMMON[@]}" --epochs 1 --max-steps "$steps" --conv-algorithm im2col \
    --save-weights "$WORK/$model-nchw.safetensors" --metrics-file "$WORK/$model-nchw.jsonl" > "$WORK/$model-nchw.log"
  "$TRAINER" --model "$model" "${COMMON[@]}" --epochs 1 --max-steps "$steps" --layout nhwc \
    --save-weights "$WORK/$model-nhwc.safetensors" --metrics-file "$WORK/$model-nhwc.jsonl" > "$WORK/$model-nhwc.log"
  grep -q "activations channels-last (--layout nhwc)" "$WORK/$model-nhwc.log" || fail "$model: NHWC not logged"
  grep -q "channels-last" "$WORK/$model-nchw.log" && fail "$model: NCHW run claims channels-last"
  python3 - "$WORK/$model-nchw.jsonl" "$WORK/$model-nhwc.jsonl" "$model" "$steps" <<'PY' || fail "$model: training losses disagree"
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"epoch"' in l][-1]["train_loss"] for f in sys.argv[1:3])
rel = abs(a - b) / abs(a)
print(f"{sys.argv[3]}, mean training loss of {sys.argv[4]} step(s), nchw {a:.9f} vs nhwc {b:.9f}: relative {rel:.1e}")
sys.exit(0 if rel <= 1e-5 else 1)
PY
  echo -n "$model, $steps steps, nchw vs nhwc weights: "
  "$CMP" "$WORK/$model-nchw.safetensors" "$WORK/$model-nhwc.safetensors" --rtol "$rtol" || fail "$model: layouts disagree"
done

# A checkpoint from an NCHW run resumed in NHWC.
R=(--model keras-cnn "${COMMON[@]}" --epochs 1 --checkpoint-dir "$WORK/ck" --checkpoint-every 4)
"$TRAINER" "${R[@]}" --max-steps 8 --conv-algorithm im2col --save-weights "$WORK/straight.safetensors" \
  > "$WORK/straight.log"
rm -rf "$WORK/ck"
"$TRAINER" "${R[@]}" --max-steps 4 --conv-algorithm im2col > "$WORK/first.log"
"$TRAINER" "${R[@]}" --max-steps 8 --resume --layout nhwc --save-weights "$WORK/resumed.safetensors" > "$WORK/resumed.log"
grep -q "resumed from .*ckpt-000000004" "$WORK/resumed.log" || { cat "$WORK/resumed.log"; fail "did not resume at step 4"; }
echo -n "keras-cnn to step 8: straight nchw vs nchw to step 4, then nhwc: "
"$CMP" "$WORK/straight.safetensors" "$WORK/resumed.safetensors" --rtol 1e-4 || fail "resumed NHWC run diverged"
echo "PASS"
