#!/usr/bin/env bash
# Trainer outputs on a short synthetic run: epoch lines, the average line, the
# metrics JSONL schema, weights that load back, --help and --version.
# usage: outputs.sh path/to/trainer
set -euo pipefail
TRAINER=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$TRAINER" --help > "$WORK/help"
for opt in model dataset data-dir epochs max-steps batch-size global-batch-size optimizer lr momentum \
           weight-decay lr-schedule warmup-epochs seed threads device metrics-file save-weights load-weights; do
  grep -q -- "--$opt" "$WORK/help" || fail "--help does not list --$opt"
done
# Descriptions wrap at the terminal width: read them with the breaks joined.
tr -s ' \n' ' ' < "$WORK/help" | grep -q "(default: lenet)" || fail "--help does not show defaults"
"$TRAINER" --version | grep -q "^lockstep " || fail "--version"

# A CUDA-enabled build opens cuBLAS only when a GPU context is made
# (runtime/cuda/cublas_library.h): loading it costs a process 0.11 s and 210 MB,
# so a CPU run must not. The dynamic loader's own log says what was opened.
LD_DEBUG=files "$TRAINER" --model mlp --dataset synthetic --synthetic-samples 256 --batch-size 64 --max-steps 2 \
  --threads 1 > /dev/null 2> "$WORK/ld.log" || fail "the loader-logged CPU run failed"
grep -q 'file=libc\.so' "$WORK/ld.log" || fail "LD_DEBUG=files logged nothing; cannot check what a CPU run loads"
if grep -qE 'file=[^ ]*libcublas' "$WORK/ld.log"; then fail "a CPU run loaded cuBLAS: $(grep -m1 -E 'file=[^ ]*libcublas' "$WORK/ld.log")"; fi

ARGS="--model mlp --dataset synthetic --synthetic-samples 2048 --batch-size 64 --epochs 3 --lr 0.02 --threads 1"
"$TRAINER" $ARGS --metrics-file "$WORK/m.jsonl" --save-weights "$WORK/w.safetensors" > "$WORK/out" 2> "$WORK/err"
cat "$WORK/out"
# Nothing on stderr but, on a loaded machine, the input-bound advice (a
# measurement of the host, not of this test's subject).
! grep -v '^warning: input-bound: ' "$WORK/err" | grep -q . || fail "stderr not empty: $(cat "$WORK/err")"
grep -q $'\r' "$WORK/out" && fail "progress bar drawn although stdout is not a terminal"
[[ $(grep -cE '^\[[1-3]/3\] \(train\) acc: [0-9.]+%, loss: [0-9.]+ \| \(test\) acc: [0-9.]+%, loss: [0-9.]+ \| [0-9.]+s, [0-9.]+s \| [0-9,]+ img/s$' "$WORK/out") -eq 3 ]] \
  || fail "expected three seed-style epoch lines"
grep -qE '^Average time TRAIN [0-9.]+s TEST [0-9.]+s \(epochs 2-3\)' "$WORK/out" || fail "average line"
grep -qE '^memory: host peak resident [0-9]+ MiB$' "$WORK/out" || fail "memory line"
HELD='^memory held between steps: parameters [0-9.]+, gradients [0-9.]+, optimizer state [0-9.]+, buffers [0-9.]+, '
HELD+='activations [0-9.]+, activation gradients [0-9.]+, layer scratch [0-9.]+ MiB: [0-9.]+ MiB in all$'
grep -qE "$HELD" "$WORK/out" || fail "held-memory line"

python3 - "$WORK/m.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
epochs = [r for r in recs if r["type"] == "epoch"]
summary = [r for r in recs if r["type"] == "summary"]
assert len(epochs) == 3 and len(summary) == 1 and recs[-1]["type"] == "summary", recs
for i, r in enumerate(epochs, 1):
    for k in ["epoch", "step", "train_loss", "train_acc", "test_loss", "test_acc", "seconds", "images_per_sec"]:
        assert k in r, (k, r)
    assert r["epoch"] == i and r["step"] == 32 * i, r
    assert 0 <= r["train_acc"] <= 1 and 0 <= r["test_acc"] <= 1, r
s = summary[0]
for k in ["world_size", "steps", "epochs", "images_per_sec", "test_acc", "train_seconds"]:
    assert k in s, (k, s)
assert s["world_size"] == 1 and s["steps"] == 96 and s["epochs"] == 3 and s["images_per_sec"] > 0, s
# The process's memory high-water mark: more than the binary alone, less than the machine.
assert 10 < s["host_peak_resident_mib"] < 64 * 1024 and "gpu_peak_allocated_mib" not in s, s
# What the run holds between steps, by owner: mlp has as many gradients as parameters, SGD with
# momentum one state tensor of that size, no batch norm; the parts add up; no cuDNN on the CPU.
h = s["held_mib"]
parts = ["parameters", "gradients", "optimizer_state", "buffers", "activations", "activation_gradients",
         "layer_scratch"]
assert sorted(h) == sorted(parts + ["total"]), h
assert h["parameters"] > 0 and h["gradients"] == h["parameters"] == h["optimizer_state"], h
assert h["buffers"] == 0 and h["activations"] > 0 and h["activation_gradients"] > 0, h
assert abs(sum(h[k] for k in parts) - h["total"]) < 1e-6, h
assert epochs[-1]["test_acc"] > 0.5, "mlp did not learn the synthetic classes"
print("metrics ok:", s)
PY

# Evaluation holds no more than training: by default it runs at the training batch, so the
# activations held after the run (which evaluated) are those of a run that never evaluates.
"$TRAINER" $ARGS --epochs 1 --max-steps 2 --no-eval --metrics-file "$WORK/noeval.jsonl" > /dev/null
python3 - "$WORK/m.jsonl" "$WORK/noeval.jsonl" <<'PY'
import json, sys
held = [[json.loads(l) for l in open(f)][-1]["held_mib"] for f in sys.argv[1:]]
assert held[0]["activations"] == held[1]["activations"], held
print("evaluation held the training plan's activations:", held[0]["activations"], "MiB")
PY

# The saved weights load back: evaluating them again gives the same test accuracy as
# the last epoch (0 training steps are not allowed, so train one step at lr ~0 and compare).
"$TRAINER" $ARGS --epochs 1 --max-steps 1 --lr 1e-30 --load-weights "$WORK/w.safetensors" \
  --metrics-file "$WORK/m2.jsonl" > /dev/null
python3 - "$WORK/m.jsonl" "$WORK/m2.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if '"epoch"' in l][-1]
b = [json.loads(l) for l in open(sys.argv[2]) if '"epoch"' in l][-1]
assert abs(a["test_acc"] - b["test_acc"]) < 1e-9 and abs(a["test_loss"] - b["test_loss"]) < 1e-6, (a, b)
print("reloaded weights reproduce test accuracy", b["test_acc"])
PY

# Options from the environment; the command line wins.
LOCKSTEP_EPOCHS=1 LOCKSTEP_BATCH_SIZE=128 "$TRAINER" $ARGS --batch-size 64 --max-steps 2 > "$WORK/env.out"
grep -q "batch 64 per process" "$WORK/env.out" || fail "command line did not win over LOCKSTEP_BATCH_SIZE"
grep -q "^\[1/1\]" "$WORK/env.out" || fail "LOCKSTEP_EPOCHS not applied"
# Options that need each other may come from different sources (the SLURM examples set both by variable).
LOCKSTEP_CHECKPOINT_EVERY=1 "$TRAINER" $ARGS --max-steps 2 --checkpoint-dir "$WORK/env-ckpt" > "$WORK/env2.out" ||
  fail "LOCKSTEP_CHECKPOINT_EVERY with --checkpoint-dir on the command line was refused"
ls "$WORK/env-ckpt" | grep -q . || fail "LOCKSTEP_CHECKPOINT_EVERY + --checkpoint-dir wrote no checkpoint"
echo "outputs ok"
