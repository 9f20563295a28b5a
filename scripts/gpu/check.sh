#!/usr/bin/env bash
# The GPU checks, in one command, on a GPU machine without our Debian
# dependencies (the project's lent H100/H200: CUDA driver, nvcc, PyTorch 2.11
# whose Python packages carry cuDNN 9, NCCL 2 and cuBLAS; no package registry).
#
#   scripts/gpu/pack.sh                      (development machine: builds .gpu-bundle/)
#   scripts/gpu/check.sh OUT_DIR [BUNDLE]    (GPU machine, from the repository root)
#   scripts/gpu/check.sh --list              (anywhere: the steps CHECK_PLAN/CHECK_STEPS select)
#
# Uses the bundle's binaries, shared libraries and relocated Open MPI; finds the
# CUDA libraries in PyTorch's Python packages (or /usr/local/cuda). Runs the GPU
# tests (parity of every GPU op with its CPU op, the CUDA runtime layer), the
# NCCL tests at N=1 and the MPI-staged tests with 2 ranks sharing the GPU;
# then the trainer: lenet on Fashion-MNIST on the CPU and on the GPU (same
# flags, seeds 1-5; scripts/gpu/compare_lenet.py compares the accuracies), with NCCL
# at N=1 and with 2 ranks sharing the GPU through --comm mpi, and each of
# those two with gradient compression (bf16 over NCCL, fp16 staged), in bf16
# and fp16 mixed precision (fp16 also over NCCL and across a checkpoint and
# --resume); and the
# benchmarks: convnet at batch 1024 and resnet50 at 224x224, batch 128, against
# PyTorch (eager and torch.compile, scripts/bench/torch_gpu.py), plus the floor
# (matmul TFLOP/s, copy bandwidth). Timings land in OUT_DIR/bench.jsonl, and as
# a table of lockstep beside PyTorch and the step's floors in
# OUT_DIR/bench_table.md; what the convolution races chose, in
# OUT_DIR/race_summary.txt.
# Writes OUT_DIR/summary.txt (one line per step: PASS/FAIL/SKIP, seconds) and a
# log per step; exits non-zero when any step failed.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"

# Which steps run. CHECK_STEPS (an extended regex over step names; default:
# all) and CHECK_PLAN, a named set sized for one call within 15 minutes of
# GPU time (docs/gpu.md, "Fitting the checks into a short GPU time"); given both,
# a step runs when it is in the plan and matches CHECK_STEPS. The plans
# tests, train, targets and rest split every step but the profiles between
# them; scripts/gpu/call.sh runs them as device calls.
# The like-for-like rows the GPU targets are judged by (bf16, the small CNN
# with CUDA graphs and the large model, against PyTorch eager in both memory
# orders), with the floor.
TARGETS_RE='^bench\.(floor|convnet\.lockstep\.bf16\.nhwc(\.graph)?|convnet\.torch\.eager\.bf16(\.nhwc)?|resnet50\.lockstep\.bf16\.nhwc(\.graph)?|resnet50\.torch\.eager\.bf16(\.nhwc)?)$'
PLAN_STEPS="" PLAN_EXCLUDE=""
case "${CHECK_PLAN:-}" in
  "") ;;
  tests) PLAN_STEPS='^gpu_tests$' ;;
  train) PLAN_STEPS='^(nccl|staged|consumer|train|compare)' ;;
  targets) PLAN_STEPS="$TARGETS_RE" ;;
  rest) PLAN_STEPS='^bench'; PLAN_EXCLUDE="$TARGETS_RE" ;;
  profile) PLAN_STEPS='^profile\.resnet50\.(lockstep|torch)\.bf16\.nhwc$' ;;
  *) echo "check.sh: CHECK_PLAN=$CHECK_PLAN: not a plan (tests, train, targets, rest, profile)" >&2; exit 2 ;;
esac
selected() {  # NAME: whether the step runs
  [[ -z "$PLAN_STEPS" || "$1" =~ $PLAN_STEPS ]] && [[ -z "$PLAN_EXCLUDE" || ! "$1" =~ $PLAN_EXCLUDE ]] &&
    [[ -z "${CHECK_STEPS:-}" || "$1" =~ $CHECK_STEPS ]]
}
profiles_selected() { [[ "${CHECK_STEPS:-}$PLAN_STEPS" == *profile* ]]; }

# The machine: the bundle unpacked, the CUDA libraries found, the environment
# set and written down. Not for --list.
setup() {
  OUT="${1:?usage: check.sh OUT_DIR [BUNDLE]}"
  B="$(cd "${2:-$ROOT/.gpu-bundle}" 2>/dev/null && pwd)" || { echo "check.sh: no bundle at ${2:-$ROOT/.gpu-bundle} (run scripts/gpu/pack.sh on a development machine and carry it)" >&2; exit 2; }
  mkdir -p "$OUT"
  SUMMARY="$OUT/summary.txt"
  # Several calls may share OUT_DIR, but only with one bundle: a reused machine can
  # keep /tmp from an earlier run, whose results would join this run's table.
  BUNDLE_COMMIT="$(cat "$B/COMMIT" 2>/dev/null || echo unknown)"
  if [[ -f "$OUT/environment.txt" ]] && ! grep -qx "commit: $BUNDLE_COMMIT" "$OUT/environment.txt"; then
    echo "check.sh: $OUT holds results of another bundle ($(grep -m1 '^commit: ' "$OUT/environment.txt")); give an empty or new directory" >&2
    exit 2
  fi
  # pack.sh leaves bundle.tar.xz: unpack it next to a scratch copy (the carried
  # folder may be read-only).
  DATA="$B/data/fashion-mnist"
  if [[ -f "$B/bundle.tar.xz" ]]; then
    U="$(mktemp -d /tmp/lockstep-bundle.XXXXXX)"
    tar -C "$U" -xJf "$B/bundle.tar.xz" || { echo "check.sh: cannot unpack $B/bundle.tar.xz" >&2; exit 2; }
    B="$U"
  fi
  : >> "$SUMMARY"  # appended to: several calls (CHECK_STEPS) may share one OUT_DIR

  # PyTorch's Python (its packages hold cuDNN and NCCL; it runs the benchmarks).
  PY="${PYTHON:-python3}"
  [[ -x /opt/torch/.venv/bin/python ]] && PY="${PYTHON:-/opt/torch/.venv/bin/python}"
  # Python and nvidia-smi run with the machine's own libraries, not the bundle's
  # (its Debian 12 libstdc++ may be older than what PyTorch needs).
  HOST_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
  host_env() { LD_LIBRARY_PATH="$HOST_LD_LIBRARY_PATH" "$@"; }

  # CUDA libraries: the first directory holding each soname wins.
  cuda_dirs=()
  for so in libcudnn.so.9 libnccl.so.2 libcublas.so.13 libcublasLt.so.13; do
    d=""
    for base in /usr/local/cuda/lib64 $("$PY" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) \
                /opt/torch/.venv; do
      f="$(find "$base/" -name "$so" 2>/dev/null | head -1)"
      if [[ -n "$f" ]]; then d="$(dirname "$f")"; break; fi
    done
    if [[ -z "$d" ]]; then echo "check.sh: $so not found (PyTorch's nvidia packages or /usr/local/cuda)" | tee -a "$SUMMARY" >&2; exit 2; fi
    [[ " ${cuda_dirs[*]} " == *" $d "* ]] || cuda_dirs+=("$d")
  done
  cuda_path="$(IFS=:; echo "${cuda_dirs[*]}")"

  export LD_LIBRARY_PATH="$B/lib:$cuda_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export OPAL_PREFIX="$B/openmpi" PMIX_INSTALL_PREFIX="$B/openmpi"
  export OMPI_MCA_mca_base_component_path="$B/openmpi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"
  export PMIX_MCA_mca_base_component_path="$B/openmpi/lib/x86_64-linux-gnu/pmix2/lib/pmix"
  export PATH="$B/openmpi/bin:$B/bin:$PATH"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none

  {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $BUNDLE_COMMIT"
    host_env nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
    echo "cuda libraries: $cuda_path"
  } | tee "$OUT/environment.txt"
}

# --list: print the names of the steps the selection runs, one a line, and
# exit: no bundle, no GPU, nothing run (planning a call; tests/tools/gpu_plans.sh).
LIST=0
if [[ "${1:-}" == --list ]]; then
  LIST=1
  OUT="(--list)" B="(--list)" DATA="" PY=python3 SUMMARY=/dev/null
else
  setup "$@"
fi

failed=0
# step NAME COMMAND...: runs with a log; exit 77 counts as SKIP. Only the
# steps CHECK_PLAN and CHECK_STEPS select (above) run, so the checks can be
# split over several calls of a time-limited machine; with --list, only the name
# is printed.
# A step running longer than CHECK_STEP_TIMEOUT seconds (default 420) is
# killed with everything it started (its own process group) and FAILs, so one
# hang cannot eat the machine's time limit.
STEP_TIMEOUT="${CHECK_STEP_TIMEOUT:-420}"
step() {
  local name="$1"; shift
  selected "$name" || return 0
  if (( LIST )); then echo "$name"; return 0; fi
  local t0=$SECONDS rc timed_out=0
  set -m  # the step and its children get a process group of their own
  "$@" > "$OUT/$name.log" 2>&1 &
  local pid=$!
  set +m
  while kill -0 "$pid" 2>/dev/null; do
    if (( SECONDS - t0 >= STEP_TIMEOUT )); then
      timed_out=1
      kill -TERM -- "-$pid" 2>/dev/null
      sleep 5
      kill -KILL -- "-$pid" 2>/dev/null
      break
    fi
    sleep 1
  done
  wait "$pid"
  rc=$?
  local verdict=PASS
  if (( timed_out )); then verdict="FAIL (timeout ${STEP_TIMEOUT}s)"; failed=1
  elif (( rc == 77 )); then verdict=SKIP
  elif (( rc != 0 )); then verdict="FAIL (exit $rc)"; failed=1; fi
  printf '%-28s %-16s %4ds\n' "$name" "$verdict" $((SECONDS - t0)) | tee -a "$SUMMARY"
}

# CHECK_GPU_TESTS: a Catch2 test spec to run part of gpu_tests (e.g. '[conv],[model]').
step gpu_tests        gpu_tests --durations yes ${CHECK_GPU_TESTS:+"$CHECK_GPU_TESTS"}
step nccl.np1         mpirun -np 1 gpu_mpi_tests "[nccl]"
step staged.np2       mpirun -np 2 gpu_mpi_tests "[staged]"
step nccl_timeout.np1 mpirun -np 1 gpu_mpi_tests "[nccl_timeout]"
# The library's GPU loop as a user writes it (README's "On the GPU").
step consumer.gpu.np1 mpirun -np 1 consumer --gpu

# ---- training on the GPU (Fashion-MNIST from the bundle) ----
LENET=(--model lenet --epochs 3 --batch-size 128 --optimizer sgd --lr 0.05 --momentum 0.9 --progress off
       --data-dir "$DATA")
# NCHW unless a step names NHWC (a later flag wins): --layout auto would take
# NHWC for the 16-bit modes, and their figures since the first run are NCHW's.
TRAIN=("${LENET[@]}" --seed 1 --layout nchw)
CLIP=(--clip-grad-norm 0.5)
# The CPU references, side by side (3 compute threads each; the GPU machine has
# 16 cores): lenet at seeds 1-5 and lenet clipped at seed 1. One after another
# they took 200 s of a device call (2026-11-24).
cpu_references() {
  local pids=() rc=0 s p
  trainer "${TRAIN[@]}" --device cpu --threads 3 --metrics-file "$OUT/lenet-cpu.jsonl" > "$OUT/lenet-cpu.out" 2>&1 &
  pids+=($!)
  trainer "${TRAIN[@]}" "${CLIP[@]}" --device cpu --threads 3 --metrics-file "$OUT/lenet-clip-cpu.jsonl" \
    > "$OUT/lenet-clip-cpu.out" 2>&1 &
  pids+=($!)
  for s in 2 3 4 5; do
    trainer "${LENET[@]}" --seed "$s" --device cpu --threads 3 --metrics-file "$OUT/lenet-cpu-s$s.jsonl" \
      > "$OUT/lenet-cpu-s$s.out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  tail -n 3 "$OUT"/lenet-cpu*.out "$OUT/lenet-clip-cpu.out"
  return $rc
}
step train.cpu.references cpu_references
step train.lenet.cuda      trainer "${TRAIN[@]}" --device cuda --metrics-file "$OUT/lenet-cuda.jsonl"
# --device auto (the default): the GPU here, and the CPU with the GPUs hidden.
device_auto() {
  local run=(--model lenet --benchmark --max-steps 8 --batch-size 64 --progress off)
  trainer "${run[@]}" > "$OUT/device-auto.out" 2>&1 &&
    CUDA_VISIBLE_DEVICES= trainer "${run[@]}" > "$OUT/device-auto-hidden.out" 2>&1
  local rc=$?
  grep '^device: ' "$OUT/device-auto.out" "$OUT/device-auto-hidden.out"
  (( rc == 0 )) && grep -q '^device: .* (--device auto: [0-9]* GPUs* visible)' "$OUT/device-auto.out" &&
    grep -q '^device: the CPU (--device auto: ' "$OUT/device-auto-hidden.out"
}
step train.device.auto device_auto
# --layout auto (the default): channels-last for 16-bit precision on the GPU, NCHW for fp32.
layout_auto() {
  local run=(--model lenet --benchmark --max-steps 8 --batch-size 64 --progress off --device cuda)
  trainer "${run[@]}" --precision bf16 > "$OUT/layout-auto-bf16.out" 2>&1 &&
    trainer "${run[@]}" > "$OUT/layout-auto-fp32.out" 2>&1
  local rc=$?
  grep -h '^model: ' "$OUT/layout-auto-bf16.out" "$OUT/layout-auto-fp32.out"
  (( rc == 0 )) &&
    grep -q '; activations channels-last (--layout auto: bf16 on the GPU: ' "$OUT/layout-auto-bf16.out" &&
    ! grep -q 'channels-last' "$OUT/layout-auto-fp32.out"
}
step train.layout.auto layout_auto
step train.lenet.nccl.np1  mpirun -np 1 trainer "${TRAIN[@]}" --device cuda --comm nccl --metrics-file "$OUT/lenet-nccl1.jsonl"
step train.lenet.mpi.np2   mpirun -np 2 trainer "${TRAIN[@]}" --batch-size 64 --device cuda --comm mpi \
                             --metrics-file "$OUT/lenet-mpi2.jsonl"
step train.lenet.nccl.bf16 mpirun -np 1 trainer "${TRAIN[@]}" --device cuda --comm nccl --grad-compression bf16 \
                             --metrics-file "$OUT/lenet-nccl1-bf16.jsonl"
step train.lenet.mpi.np2.fp16 mpirun -np 2 trainer "${TRAIN[@]}" --batch-size 64 --device cuda --comm mpi \
                             --grad-compression fp16 --metrics-file "$OUT/lenet-mpi2-fp16.jsonl"
step train.lenet.cuda.bf16 trainer "${TRAIN[@]}" --device cuda --precision bf16 --metrics-file "$OUT/lenet-cuda-bf16.jsonl"
step train.lenet.cuda.fp16 trainer "${TRAIN[@]}" --device cuda --precision fp16 --metrics-file "$OUT/lenet-cuda-fp16.jsonl"
# fp16 with a checkpoint mid-run: the loss scale and applied-step count are
# saved and restored (the resumed run continues from the checkpoint's scale).
fp16_resume() {
  rm -rf "$OUT/ckpt-fp16"
  trainer "${TRAIN[@]}" --device cuda --precision fp16 --max-steps 300 --checkpoint-dir "$OUT/ckpt-fp16" \
    --metrics-file "$OUT/lenet-fp16-first.jsonl" || return 1
  trainer "${TRAIN[@]}" --device cuda --precision fp16 --checkpoint-dir "$OUT/ckpt-fp16" --resume \
    --metrics-file "$OUT/lenet-fp16-resumed.jsonl" 2>&1 | tee "$OUT/lenet-fp16-resumed.out" || return 1
  # The resumed run must start from the first run's last loss scale and skipped count.
  host_env "$PY" - "$OUT" <<'PY'
import json, re, sys
out = sys.argv[1]
recs = [json.loads(l) for l in open(f"{out}/lenet-fp16-first.jsonl") if l.strip()]
last = [r for r in recs if r["type"] == "loss_scale"][-1]
m = re.search(r"resumed from .*; fp16 loss scale ([0-9.e+-]+), (\d+) steps skipped so far",
              open(f"{out}/lenet-fp16-resumed.out").read())
got = (float(m.group(1)), int(m.group(2))) if m else None
print("first run ended at loss scale", last["loss_scale"], "with", last["skipped_steps"], "skipped; resumed from", got)
sys.exit(0 if got == (float(last["loss_scale"]), int(last["skipped_steps"])) else 1)
PY
}
step train.lenet.fp16.resume fp16_resume
step train.lenet.nccl.fp16 mpirun -np 1 trainer "${TRAIN[@]}" --device cuda --comm nccl --precision fp16 \
                             --metrics-file "$OUT/lenet-nccl1-fp16.jsonl"
# --cudnn-benchmark in 16 bits races graph-API engines for each convolution direction
# (docs/gpu.md): training with the winners must reach the same accuracy. fp16
# starts at a loss scale that may overflow, the case where the race waits.
step train.lenet.cuda.bf16.benchmark trainer "${TRAIN[@]}" --device cuda --precision bf16 --cudnn-benchmark \
                             --metrics-file "$OUT/lenet-cuda-bf16-benchmark.jsonl"
step train.lenet.cuda.fp16.benchmark trainer "${TRAIN[@]}" --device cuda --precision fp16 --cudnn-benchmark \
                             --metrics-file "$OUT/lenet-cuda-fp16-benchmark.jsonl"
step train.lenet.graph     trainer "${TRAIN[@]}" --device cuda --cuda-graph --metrics-file "$OUT/lenet-cuda-graph.jsonl"
step train.lenet.nhwc      trainer "${TRAIN[@]}" --device cuda --layout nhwc --metrics-file "$OUT/lenet-cuda-nhwc.jsonl"
step train.lenet.nhwc.bf16.graph trainer "${TRAIN[@]}" --device cuda --layout nhwc --precision bf16 --cuda-graph \
                             --metrics-file "$OUT/lenet-cuda-nhwc-bf16-graph.jsonl"
# --cuda-graph replays the captured step: with SGD the weights must equal the
# eager run's bit for bit (keras-cnn: dropout keyed by the device step counter;
# an evaluation in between, after which the step is captured again).
graph_vs_eager() {
  local run=(--model keras-cnn --epochs 2 --max-steps 600 --batch-size 128 --optimizer sgd --lr 0.05 --momentum 0.9
             --seed 1 --progress off --data-dir "$DATA" --device cuda)
  trainer "${run[@]}" --save-weights "$OUT/keras-eager.safetensors" &&
    trainer "${run[@]}" --cuda-graph --save-weights "$OUT/keras-graph.safetensors" &&
    compare_weights "$OUT/keras-eager.safetensors" "$OUT/keras-graph.safetensors" --exact
}
step train.keras.graph.vs.eager graph_vs_eager
# Batch norm across ranks: running statistics broadcast at start, synced
# statistics (--sync-batchnorm, through the host with --comm mpi).
step train.resnet20.mpi.np2.syncbn mpirun -np 2 trainer --model resnet20 --benchmark --max-steps 20 --batch-size 32 \
                             --device cuda --comm mpi --sync-batchnorm --progress off
step train.resnet20.bf16   trainer --model resnet20 --benchmark --max-steps 20 --batch-size 32 --device cuda \
                             --precision bf16 --layout nchw --progress off
step train.resnet20.nhwc.np2.syncbn mpirun -np 2 trainer --model resnet20 --benchmark --max-steps 20 --batch-size 32 \
                             --device cuda --comm mpi --sync-batchnorm --layout nhwc --progress off
step train.resnet20.fp16.mpi.np2 mpirun -np 2 trainer --model resnet20 --benchmark --max-steps 20 --batch-size 32 \
                             --device cuda --comm mpi --precision fp16 --layout nchw --progress off
# --clip-grad-norm on the device (the loss scaler's rule; in a captured graph,
# and with fp16's dynamic scale) against the CPU's clipping.
step train.lenet.clip.graph trainer "${TRAIN[@]}" "${CLIP[@]}" --device cuda --cuda-graph \
                             --metrics-file "$OUT/lenet-clip-graph.jsonl"
step train.lenet.clip.fp16.nccl mpirun -np 1 trainer "${TRAIN[@]}" "${CLIP[@]}" --device cuda --comm nccl \
                             --precision fp16 --metrics-file "$OUT/lenet-clip-fp16.jsonl"
# Clipping happened, and the GPU's accuracy is within the CPU seeds' spread + 0.5 of the CPU's
# clipped run (scripts/gpu/compare_clip.py).
step compare.clip host_env "$PY" "$ROOT/scripts/gpu/compare_clip.py" "$OUT"
# Seeds 2-5 on the GPU in fp32 (the CPU's ran with the references): three
# epochs of lenet move by over a point from seed to seed, so the GPU's accuracy
# is compared as a mean over seeds (scripts/gpu/compare_lenet.py).
lenet_seeds() {
  local rc=0 s
  for s in 2 3 4 5; do
    trainer "${LENET[@]}" --seed "$s" --device cuda --metrics-file "$OUT/lenet-cuda-s$s.jsonl" || rc=1
  done
  return $rc
}
step train.lenet.seeds lenet_seeds
# The GPU must reach the CPU's test accuracy: mean over seeds 1-5, and every mode at seed 1.
step compare.lenet host_env "$PY" "$ROOT/scripts/gpu/compare_lenet.py" "$OUT"

# ---- benchmarks: lockstep vs PyTorch on the same model, batch and precision ----
# As torch_gpu.py: one batch kept on the GPU (--benchmark-input fixed) and 60
# steps in a row (one epoch: no drain or loader restart every 6 steps). The
# .loader steps put the input pipeline back in (a later flag wins). Debug
# logging puts each convolution race's outcome (contenders, times, engines
# left out, the one kept) in the step's log. A row is NCHW unless it names
# --layout nhwc (--layout auto would take NHWC for every 16-bit row).
bench_lockstep() {  # name model batch [flags...]
  local name=$1 model=$2 batch=$3; shift 3
  trainer --model "$model" --benchmark --benchmark-input fixed --epochs 1 --device cuda --cudnn-benchmark \
    --batch-size "$batch" --max-steps 60 --progress off --log-level debug --metrics-file "$OUT/$name.jsonl" \
    --layout nchw "$@"
}
step bench.floor                  host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --floor
step bench.convnet.lockstep       bench_lockstep bench-convnet convnet 1024
step bench.convnet.torch.eager    host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model convnet --batch-size 1024
step bench.convnet.torch.compile  host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model convnet --batch-size 1024 --compile
step bench.resnet50.lockstep      bench_lockstep bench-resnet50 resnet50 128
step bench.resnet50.torch.eager   host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model resnet50 --batch-size 128 \
                                    --channels 3 --image-size 224 --classes 1000 --steps 60
step bench.resnet50.torch.compile host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model resnet50 --batch-size 128 \
                                    --channels 3 --image-size 224 --classes 1000 --steps 60 --compile
# CUDA graphs: the small CNN is launch-bound, where one launch per step pays.
step bench.convnet.lockstep.graph     bench_lockstep bench-convnet-graph convnet 1024 --cuda-graph
step bench.resnet50.lockstep.graph    bench_lockstep bench-resnet50-graph resnet50 128 --cuda-graph
step bench.convnet.lockstep.bf16.graph bench_lockstep bench-convnet-bf16-graph convnet 1024 --precision bf16 --cuda-graph
# bf16 (mixed precision) on both sides: PyTorch autocast, lockstep --precision bf16.
step bench.convnet.lockstep.bf16      bench_lockstep bench-convnet-bf16 convnet 1024 --precision bf16
step bench.convnet.torch.eager.bf16   host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model convnet --batch-size 1024 \
                                        --precision bf16
step bench.resnet50.lockstep.bf16     bench_lockstep bench-resnet50-bf16 resnet50 128 --precision bf16
# The same with each batch synthesised on the host and copied (data_wait_fraction in the summary).
step bench.resnet50.lockstep.bf16.loader bench_lockstep bench-resnet50-bf16-loader resnet50 128 --precision bf16 \
                                        --benchmark-input loader
step bench.resnet50.torch.eager.bf16  host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model resnet50 --batch-size 128 \
                                        --channels 3 --image-size 224 --classes 1000 --steps 60 --precision bf16
step bench.resnet50.torch.compile.bf16 host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model resnet50 \
                                        --batch-size 128 --channels 3 --image-size 224 --classes 1000 --steps 60 \
                                        --precision bf16 --compile
# fp16 with dynamic loss scaling on both sides: autocast + GradScaler, lockstep --precision fp16.
step bench.convnet.lockstep.fp16      bench_lockstep bench-convnet-fp16 convnet 1024 --precision fp16
step bench.convnet.torch.eager.fp16   host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model convnet --batch-size 1024 \
                                        --precision fp16
step bench.resnet50.lockstep.fp16     bench_lockstep bench-resnet50-fp16 resnet50 128 --precision fp16
step bench.resnet50.torch.eager.fp16  host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model resnet50 --batch-size 128 \
                                        --channels 3 --image-size 224 --classes 1000 --steps 60 --precision fp16
# NHWC (--layout nhwc) against PyTorch's channels_last, same models, batches and precisions.
TORCH_R50=(--model resnet50 --batch-size 128 --channels 3 --image-size 224 --classes 1000 --steps 60)
# PyTorch with cudnn.deterministic: lockstep's default algorithm policy on both sides (the fp32 rows, where
# the policy costs the most; bench_table.py gives them a column of their own).
step bench.convnet.torch.eager.deterministic host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model convnet \
                                         --batch-size 1024 --deterministic
step bench.resnet50.torch.eager.deterministic host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" "${TORCH_R50[@]}" \
                                         --deterministic
step bench.convnet.lockstep.nhwc       bench_lockstep bench-convnet-nhwc convnet 1024 --layout nhwc
step bench.convnet.torch.eager.nhwc    host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model convnet --batch-size 1024 \
                                         --channels-last
# fp32 NHWC with deterministic algorithms is slow (docs/gpu.md): the trainer says so.
step bench.convnet.nhwc.fp32.warning grep -q "layout nhwc in fp32" "$OUT/bench.convnet.lockstep.nhwc.log"
step bench.convnet.lockstep.bf16.nhwc  bench_lockstep bench-convnet-bf16-nhwc convnet 1024 --precision bf16 --layout nhwc
step bench.convnet.lockstep.bf16.nhwc.graph bench_lockstep bench-convnet-bf16-nhwc-graph convnet 1024 --precision bf16 \
                                         --layout nhwc --cuda-graph
step bench.convnet.torch.eager.bf16.nhwc host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model convnet \
                                         --batch-size 1024 --precision bf16 --channels-last
step bench.resnet50.lockstep.nhwc      bench_lockstep bench-resnet50-nhwc resnet50 128 --layout nhwc
step bench.resnet50.torch.eager.nhwc   host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" "${TORCH_R50[@]}" --channels-last
step bench.resnet50.lockstep.bf16.nhwc bench_lockstep bench-resnet50-bf16-nhwc resnet50 128 --precision bf16 --layout nhwc
# Its kernels took 46.6 of its 120 ms per step (H100, 2026-11-24, one loader thread synthesising
# each batch): the host was the bound. Since: --loader-threads, and a fixed batch here.
step bench.resnet50.lockstep.bf16.nhwc.graph bench_lockstep bench-resnet50-bf16-nhwc-graph resnet50 128 --precision bf16 \
                                         --layout nhwc --cuda-graph
step bench.resnet50.torch.eager.bf16.nhwc host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" "${TORCH_R50[@]}" \
                                         --precision bf16 --channels-last
# fp16 in NHWC: in NCHW PyTorch's fp16 row is 1.28x its bf16 one (H100, 2026-11-24), lockstep's the same as bf16.
step bench.resnet50.lockstep.fp16.nhwc bench_lockstep bench-resnet50-fp16-nhwc resnet50 128 --precision fp16 --layout nhwc
step bench.resnet50.torch.eager.fp16.nhwc host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" "${TORCH_R50[@]}" \
                                         --precision fp16 --channels-last
# Algorithm choice as PyTorch's: any cuDNN algorithm (atomics allowed) and up to
# 8 GiB of scratch per call (FFT), against the deterministic 512 MiB default above.
ANY=(--cudnn-nondeterministic --cudnn-workspace-mb 8192)
step bench.convnet.lockstep.any        bench_lockstep bench-convnet-any convnet 1024 "${ANY[@]}"
step bench.convnet.lockstep.bf16.any   bench_lockstep bench-convnet-bf16-any convnet 1024 --precision bf16 "${ANY[@]}"
step bench.convnet.lockstep.bf16.nhwc.any.graph bench_lockstep bench-convnet-bf16-nhwc-any-graph convnet 1024 \
                                         --precision bf16 --layout nhwc --cuda-graph "${ANY[@]}"
step bench.resnet50.lockstep.any       bench_lockstep bench-resnet50-any resnet50 128 "${ANY[@]}"
step bench.resnet50.lockstep.bf16.nhwc.any bench_lockstep bench-resnet50-bf16-nhwc-any resnet50 128 --precision bf16 \
                                         --layout nhwc "${ANY[@]}"
step bench.resnet50.lockstep.bf16.nhwc.any.graph bench_lockstep bench-resnet50-bf16-nhwc-any-graph resnet50 128 \
                                         --precision bf16 --layout nhwc --cuda-graph "${ANY[@]}"
# ---- profiles (only when CHECK_STEPS or CHECK_PLAN names them: CHECK_PLAN=profile) ----
# Where a step's GPU time goes, kernel by kernel: Nsight Compute's durations for
# lockstep (kernel_times.py sums them by name), torch.profiler for PyTorch.
NCU="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
# The trainer starts collection at its 7th batch (cudaProfilerStart, after the
# warm-up steps, cuDNN's algorithm search and graph captures): `steps` steady
# steps are profiled after 6 unprofiled ones.
profile_lockstep() {  # name steps trainer-flags...
  local name=$1 steps=$2; shift 2
  [[ -n "$NCU" ]] || { echo "no ncu on this machine"; return 77; }
  host_env "$NCU" --clock-control none --profile-from-start off --csv --metrics gpu__time_duration.sum \
    --print-units base --log-file "$OUT/$name.csv" env LD_LIBRARY_PATH="$LD_LIBRARY_PATH" "$B/bin/trainer" \
    --benchmark --benchmark-input fixed --epochs 1 --device cuda --cudnn-benchmark --progress off \
    --max-steps $((6 + steps)) --layout nchw "$@" > /dev/null || return 1
  host_env "$PY" "$ROOT/scripts/gpu/kernel_times.py" "$OUT/$name.csv" "$steps"
}
if profiles_selected; then
  R50=(--channels 3 --image-size 224 --classes 1000)
  for p in fp32 bf16; do
    step profile.convnet.lockstep.$p  profile_lockstep profile-convnet-$p 3 --model convnet --batch-size 1024 --precision $p
    step profile.convnet.lockstep.$p.any profile_lockstep profile-convnet-$p-any 3 --model convnet --batch-size 1024 \
                                        --precision $p "${ANY[@]}"
    step profile.convnet.torch.$p     host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model convnet --batch-size 1024 \
                                        --precision $p --profile --window 3
    step profile.resnet50.lockstep.$p profile_lockstep profile-resnet50-$p 2 --model resnet50 --batch-size 128 --precision $p
    step profile.resnet50.torch.$p    host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model resnet50 --batch-size 128 \
                                        "${R50[@]}" --precision $p --profile --window 2
  done
  # resnet50 fp16 (0.97-0.98x PyTorch eager on the fourth H100 run, whose fp16 row is 1.28x its bf16 one).
  step profile.resnet50.lockstep.fp16 profile_lockstep profile-resnet50-fp16 2 --model resnet50 --batch-size 128 \
                                      --precision fp16
  step profile.resnet50.torch.fp16    host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model resnet50 --batch-size 128 \
                                      "${R50[@]}" --precision fp16 --profile --window 2
  # NHWC in bf16, the tensor-core layout, against PyTorch's channels_last.
  step profile.resnet50.lockstep.bf16.nhwc profile_lockstep profile-resnet50-bf16-nhwc 2 --model resnet50 \
                                      --batch-size 128 --precision bf16 --layout nhwc
  step profile.resnet50.torch.bf16.nhwc host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model resnet50 \
                                      --batch-size 128 "${R50[@]}" --precision bf16 --channels-last --profile --window 2
  step profile.convnet.lockstep.bf16.nhwc profile_lockstep profile-convnet-bf16-nhwc 3 --model convnet \
                                      --batch-size 1024 --precision bf16 --layout nhwc
  step profile.convnet.torch.bf16.nhwc host_env "$PY" "$ROOT/scripts/bench/torch_gpu.py" --model convnet \
                                      --batch-size 1024 --precision bf16 --channels-last --profile --window 3
  step profile.convnet.lockstep.fp32.nhwc profile_lockstep profile-convnet-fp32-nhwc 2 --model convnet \
                                      --batch-size 1024 --layout nhwc
fi

(( LIST )) && exit 0

# Every machine-readable line in one file.
for f in "$OUT"/bench.*.log; do grep -h '^{' "$f" 2>/dev/null; done > "$OUT/bench.jsonl"
for f in "$OUT"/bench-*.jsonl; do grep -h '"summary"' "$f" 2>/dev/null; done >> "$OUT/bench.jsonl"
# ... and as a Markdown table, lockstep beside PyTorch (scripts/gpu/bench_table.py).
if compgen -G "$OUT/bench-*.jsonl" > /dev/null; then
  host_env "$PY" "$ROOT/scripts/gpu/bench_table.py" "$OUT" > "$OUT/bench_table.md" 2>&1 && cat "$OUT/bench_table.md"
  # ... and what the convolution races bought, by their own timing (scripts/gpu/race_summary.py).
  host_env "$PY" "$ROOT/scripts/gpu/race_summary.py" "$OUT" > "$OUT/race_summary.txt" 2>&1 && cat "$OUT/race_summary.txt"
fi

echo "check.sh: $(grep -c PASS "$SUMMARY") passed, $(grep -c FAIL "$SUMMARY") failed, $(grep -c SKIP "$SUMMARY") skipped; logs in $OUT" | tee -a "$SUMMARY"
exit $failed
