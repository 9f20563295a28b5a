#!/usr/bin/env bash
# scripts/gpu/bench_table.py (check.sh's benchmark table) on files written
# here: a lockstep row beside PyTorch's eager and compile figures with the
# ratio on the window median, its FLOP and bytes floors from the floor step's
# rates (bf16 rate for fp16 rows), and dashes where the floor step or a
# summary's floor fields are missing; and the memory table beside PyTorch's peak.
# usage: bench_table.sh SCRIPT
set -euo pipefail
SCRIPT=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# convnet fp16: 100 ms/step; floors 3.2e12 FLOP (4 ms at 800 TFLOP/s) and 6e9 bytes (2 ms at 3,000 GB/s).
printf '%s\n' '{"type":"epoch","epoch":1}' \
  '{"type":"summary","model":"convnet","images_per_sec":10000,"windows":3,"window_median_images_per_sec":12000,"ms_per_step":100.0,"floor_flops_per_step":3.2e12,"floor_bytes_per_step":6e9,"gpu_peak_allocated_mib":1500.4,"gpu_steady_peak_allocated_mib":1200.0,"gpu_workspace_mib":64.0,"held_mib":{"parameters":10.0,"gradients":10.0,"optimizer_state":10.0,"buffers":0.0,"activations":700.0,"activation_gradients":200.0,"layer_scratch":50.0,"cudnn_workspace":64.0,"total":1044.0}}' \
  > "$WORK/bench-convnet-fp16-nhwc-graph.jsonl"
printf 'some log line\n%s\n' '{"impl":"floor","device":"H","matmul_fp32_tflops":50.0,"matmul_bf16_tflops":800.0,"copy_gb_per_s":3000.0}' \
  > "$WORK/bench.floor.log"
printf '%s\n' '{"impl":"pytorch","model":"convnet","precision":"fp16","layout":"nhwc","mode":"eager","images_per_sec":8000,"peak_allocated_mib":1000.0}' \
  > "$WORK/bench.convnet.torch.eager.fp16.nhwc.log"
printf '%s\n' '{"impl":"pytorch","model":"convnet","precision":"fp16","layout":"nhwc","mode":"eager","algorithms":"deterministic","images_per_sec":6000}' \
  > "$WORK/bench.convnet.torch.eager.deterministic.fp16.nhwc.log"
printf '%s\n' '{"impl":"pytorch","model":"convnet","precision":"fp16","layout":"nhwc","mode":"compile","images_per_sec":9000}' \
  > "$WORK/bench.convnet.torch.compile.fp16.nhwc.log"

out=$(python3 "$SCRIPT" "$WORK")
echo "$out"
# PyTorch's deterministic-algorithm run (lockstep's default policy) gets a column of its own.
want='| convnet | fp16 | nhwc | --cuda-graph | 10,000 | 12,000 | 100.0 | 8,000 | **1.50x** | 6,000 | **2.00x** | 9,000 | 4.00 | 2.00 | 25.0x |'
[[ $out == *"$want"* ]] || fail "the row is not: $want"
# The memory table: the whole run's peak, the timed steps', the workspace, what is held between steps
# (activations / their gradients / layer scratch) and the timed peak beyond it, PyTorch eager's and the ratio.
want='| convnet | fp16 | nhwc | --cuda-graph | 1,500 | 1,200 | 64 | 1,044 (700 / 200 / 50) | 156 | 1,000 | 1.50x |'
[[ $out == *"$want"* ]] || fail "the memory row is not: $want"

# An "any algorithm" row (PyTorch's own policy) is not set beside the deterministic run.
printf '%s\n' '{"type":"summary","model":"convnet","images_per_sec":16000,"ms_per_step":64.0}' \
  > "$WORK/bench-convnet-fp16-nhwc-any.jsonl"
out=$(python3 "$SCRIPT" "$WORK")
want='| convnet | fp16 | nhwc | any algorithm | 16,000 | - | 64.0 | 8,000 | **2.00x** | - | - | 9,000 |'
[[ $out == *"$want"* ]] || fail "the any-algorithm row is not: $want"
rm "$WORK/bench-convnet-fp16-nhwc-any.jsonl"

rm "$WORK/bench.floor.log"
out=$(python3 "$SCRIPT" "$WORK")
[[ $out == *"| 9,000 | - | - | - |"* ]] || fail "without a floor step the floor columns are not dashes: $out"
echo "no floor step: dashes"

set +e; out=$(python3 "$SCRIPT" "$WORK/missing" 2>&1); rc=$?; set -e
[[ $rc -ne 0 && $out == *"usage: bench_table.py"* ]] || fail "a missing directory did not stop with the usage line (exit $rc): $out"
echo "missing directory: exit $rc"
