#!/usr/bin/env bash
# The large-batch recipe and benchmark mode from the command line, on short
# synthetic runs: --lr-scaling linear logs and uses lr x global batch / base
# batch (the same weights as giving that LR by hand) and warms up from --lr;
# --no-decay-bn-bias changes training only when there is weight decay;
# --label-smoothing reaches the loss and the model still learns; --benchmark
# trains on synthetic data shaped for the model, never evaluates and ends with
# one images/s line (with the median and range of 10-step windows when there
# are two or more); --benchmark-input fixed trains every step on the first
# batch (the weights of a loader run whose every epoch is those samples, to
# rounding: the loader shuffles them) and says so.
# usage: recipe.sh path/to/trainer path/to/compare_weights
set -euo pipefail
TRAINER=$1 CMP=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
SYN="--model mlp --dataset synthetic --synthetic-samples 4096 --threads 1 --progress off"
jq_py() { python3 -c "import json,sys; recs=[json.loads(l) for l in open(sys.argv[1])]; $2" "$1"; }

# --- linear scaling: the logged and recorded effective LR at two global batches
for gb in 512 2048; do
  "$TRAINER" $SYN --global-batch-size $gb --lr 0.05 --lr-scaling linear --epochs 1 --max-steps 1 --no-eval \
    --metrics-file "$WORK/lin$gb.jsonl" > "$WORK/lin$gb.out"
done
grep -F "lr 0.1 = 0.05 x 512/256 (constant)" "$WORK/lin512.out" || fail "effective LR at global batch 512 not logged"
grep -F "lr 0.4 = 0.05 x 2048/256 (constant)" "$WORK/lin2048.out" || fail "effective LR at global batch 2048 not logged"
jq_py "$WORK/lin512.jsonl" 'assert abs(recs[-1]["lr"] - 0.1) < 1e-7 and abs(recs[1]["lr"] - 0.1) < 1e-7, recs'
jq_py "$WORK/lin2048.jsonl" 'assert abs(recs[-1]["lr"] - 0.4) < 1e-7 and abs(recs[1]["lr"] - 0.4) < 1e-7, recs'
"$TRAINER" $SYN --global-batch-size 2048 --lr 0.05 --lr-scaling linear --base-batch-size 1024 --epochs 1 --max-steps 1 \
  --no-eval > "$WORK/base1024.out"
grep -F "lr 0.1 = 0.05 x 2048/1024 (constant)" "$WORK/base1024.out" || fail "--base-batch-size not applied"
"$TRAINER" $SYN --global-batch-size 2048 --lr 0.05 --epochs 1 --max-steps 1 --no-eval > "$WORK/none.out"
grep -F "lr 0.05 (constant)" "$WORK/none.out" || fail "--lr-scaling none (default) changed the LR"

# The scaled LR is the one training uses: the same weights as --lr 0.1 given by hand.
W="--global-batch-size 512 --epochs 1 --max-steps 3 --no-eval"
"$TRAINER" $SYN $W --lr 0.05 --lr-scaling linear --save-weights "$WORK/scaled.safetensors" > /dev/null
"$TRAINER" $SYN $W --lr 0.1 --save-weights "$WORK/by-hand.safetensors" > /dev/null
"$TRAINER" $SYN $W --lr 0.05 --save-weights "$WORK/unscaled.safetensors" > /dev/null
cmp -s "$WORK/scaled.safetensors" "$WORK/by-hand.safetensors" || fail "linear scaling trained differently from --lr 0.1"
cmp -s "$WORK/scaled.safetensors" "$WORK/unscaled.safetensors" && fail "linear scaling made no difference"

# Warmup with linear scaling ramps from --lr (0.05) to 0.2 over 4 steps (one
# epoch of 4096 / 1024): step 3, the first epoch's last, has 0.05 + 0.15 x 3/4.
"$TRAINER" $SYN --global-batch-size 1024 --lr 0.05 --lr-scaling linear --warmup-epochs 1 --epochs 2 --no-eval \
  --metrics-file "$WORK/warm.jsonl" > "$WORK/warm.out"
grep -F "lr 0.2 = 0.05 x 1024/256 (constant, 4 warmup steps from 0.05)" "$WORK/warm.out" || fail "warmup not logged"
jq_py "$WORK/warm.jsonl" 'e=[r for r in recs if r["type"]=="epoch"]; assert abs(e[0]["lr"]-0.1625)<1e-6 and abs(e[1]["lr"]-0.2)<1e-7, e'

# --- --no-decay-bn-bias: a difference only under weight decay ----------------
D="--epochs 1 --max-steps 3 --no-eval --global-batch-size 256"
"$TRAINER" $SYN $D --weight-decay 0.1 --save-weights "$WORK/decay-all.safetensors" > /dev/null
"$TRAINER" $SYN $D --weight-decay 0.1 --no-decay-bn-bias --save-weights "$WORK/decay-weights.safetensors" \
  > "$WORK/nodecay.out"
grep -F "weight_decay=0.1) without decay on biases and batch norm" "$WORK/nodecay.out" || fail "--no-decay-bn-bias not logged"
cmp -s "$WORK/decay-all.safetensors" "$WORK/decay-weights.safetensors" && fail "--no-decay-bn-bias changed nothing"
"$TRAINER" $SYN $D --save-weights "$WORK/wd0.safetensors" > /dev/null
"$TRAINER" $SYN $D --no-decay-bn-bias --save-weights "$WORK/wd0-flag.safetensors" > /dev/null
cmp -s "$WORK/wd0.safetensors" "$WORK/wd0-flag.safetensors" || fail "--no-decay-bn-bias changed a run without weight decay"

# --- label smoothing: reaches the loss, and the model learns ------------------
L="--synthetic-samples 2048 --batch-size 64 --epochs 3 --lr 0.02"
"$TRAINER" $SYN $L --label-smoothing 0.1 --metrics-file "$WORK/ls.jsonl" > "$WORK/ls.out"
"$TRAINER" $SYN $L --metrics-file "$WORK/plain.jsonl" > /dev/null
grep -F ", label smoothing 0.1" "$WORK/ls.out" || fail "label smoothing not logged"
python3 - "$WORK/ls.jsonl" "$WORK/plain.jsonl" <<'PY'
import json, sys
ls, plain = ([json.loads(l) for l in open(p) if '"epoch"' in l] for p in sys.argv[1:3])
assert ls[-1]["test_acc"] > 0.5, f"mlp did not learn with label smoothing: {ls[-1]}"
assert ls[-1]["train_loss"] < ls[0]["train_loss"], ls
# The smoothed objective is not the plain one (first epoch: nearly the same weights).
assert abs(ls[0]["train_loss"] - plain[0]["train_loss"]) > 1e-4, (ls[0], plain[0])
print("label smoothing 0.1: test acc", ls[-1]["test_acc"], "train loss", ls[0]["train_loss"], "->", ls[-1]["train_loss"])
PY

# --- --benchmark ---------------------------------------------------------------
# lenet's input from the registry, 12 steps (2 epochs of 6 steps of 32: just
# the samples the steps need), no evaluation, the throughput line at the end.
"$TRAINER" --benchmark --model lenet --batch-size 32 --epochs 2 --max-steps 12 --threads 1 --progress off \
  --metrics-file "$WORK/bench.jsonl" > "$WORK/bench.out" 2> "$WORK/bench.err"
grep -v '^configuration:' "$WORK/bench.out"
# Nothing on stderr but, on a loaded machine, the input-bound warning (2 ms steps
# of one thread can wait for their batch 10% of the time when tests run side by side).
unexpected=$(grep -v '^warning: input-bound: ' "$WORK/bench.err" || true)
[[ -z $unexpected ]] || fail "stderr: $unexpected"
grep -q "^lockstep .* | lenet on synthetic (192 train / .* samples of \[1, 28, 28\])" "$WORK/bench.out" ||
  fail "benchmark data is not synthetic [1, 28, 28] sized for the steps"
grep -qF "(test)" "$WORK/bench.out" && fail "benchmark mode evaluated"
grep -q "TEST" "$WORK/bench.out" && fail "benchmark mode printed a TEST time"
[[ $(grep -cE '^\[[12]/2\] \(train\) acc: [0-9.]+%, loss: [0-9.]+ \| [0-9.]+s \| [0-9,]+ img/s$' "$WORK/bench.out") -eq 2 ]] ||
  fail "expected two epoch lines without test figures"
grep -qE '^benchmark: lenet on \[1, 28, 28\] samples, batch 32 per rank x 1 rank: [0-9,]+ img/s total, [0-9,]+ img/s per rank, [0-9.]+ ms per step \(7 steps timed, 5 warm-up steps left out\)$' \
  "$WORK/bench.out" || fail "no benchmark line"
[[ $(tail -1 "$WORK/bench.out") == benchmark:* ]] || fail "the benchmark line is not the last"
jq_py "$WORK/bench.jsonl" '
e = [r for r in recs if r["type"] == "epoch"]; s = recs[-1]
assert s["type"] == "summary" and s["benchmark"] is True and s["eval"] is False, s
assert s["steps"] == 12 and s["images_per_sec"] > 0 and s["ms_per_step"] > 0 and s["warmup_seconds"] > 0, s
assert abs(s["ms_per_step"] / 1e3 - 32 / s["images_per_sec"]) < 1e-9, s
assert len(e) == 2 and all(r["test_acc"] == 0 and r["test_loss"] == 0 for r in e), e
assert s["windows"] == 0 and s["window_steps"] == 10, s
# The floor (nn/step_floor.h): 3 x the 4.50 MFLOP forward per sample, and more
# bytes than the 129,068 fp32 parameters alone (7 passes with momentum SGD).
assert abs(s["floor_flops_per_step"] / (3 * 32) - 4.50e6) < 0.01e6, s
assert 28 * 129068 < s["floor_bytes_per_step"] < 28 * 129068 + 32 * 4 * 1e6, s'
# 22 timed steps: two full 10-step windows (the last 2 steps in none), whose
# median and range the line and the summary give, as PyTorch's scripts time.
"$TRAINER" --benchmark --model mlp --batch-size 32 --epochs 1 --max-steps 27 --threads 1 --progress off \
  --metrics-file "$WORK/win.jsonl" > "$WORK/win.out"
grep -qE '\(22 steps timed, 5 warm-up steps left out\); 10-step windows: median [0-9,]+ img/s, [0-9,]+-[0-9,]+$' \
  "$WORK/win.out" || fail "no window figures in the benchmark line: $(tail -1 "$WORK/win.out")"
jq_py "$WORK/win.jsonl" '
s = recs[-1]
assert s["windows"] == 2 and s["window_steps"] == 10, s
assert 0 < s["window_min_images_per_sec"] <= s["window_median_images_per_sec"] <= s["window_max_images_per_sec"], s
assert abs(s["window_median_images_per_sec"] - (s["window_min_images_per_sec"] + s["window_max_images_per_sec"]) / 2) < 1e-6 * s["window_max_images_per_sec"], s'
# --benchmark-input fixed: 8 steps on the first batch of 32. Over 32 samples
# (one batch per epoch) it ends at a loader run's weights to rounding (the
# loader reshuffles the same samples each epoch); over 256 samples it does not
# (the loader's 8 steps see 8 different batches).
FIX="--benchmark --model mlp --batch-size 32 --epochs 8 --max-steps 8 --threads 1 --progress off"
for n in 32 256; do
  "$TRAINER" $FIX --benchmark-input fixed --synthetic-samples $n --metrics-file "$WORK/fixed$n.jsonl" \
    --save-weights "$WORK/fixed$n.safetensors" > "$WORK/fixed$n.out"
  "$TRAINER" $FIX --synthetic-samples $n --save-weights "$WORK/loader$n.safetensors" > /dev/null
done
grep -qE '^benchmark: mlp on \[1, 28, 28\] samples \(one fixed batch\), batch 32 per rank' "$WORK/fixed256.out" ||
  fail "the benchmark line does not name the fixed batch"
jq_py "$WORK/fixed256.jsonl" 'assert recs[-1]["benchmark_input"] == "fixed" and recs[-1]["steps"] == 8, recs[-1]'
echo -n "fixed batch vs the loader over the same 32 samples (rounding only): "
"$CMP" "$WORK/fixed32.safetensors" "$WORK/loader32.safetensors" --rtol 1e-4 || fail "the fixed batch is not the first batch"
echo -n "fixed batch vs the loader over 256 samples (must differ): "
if "$CMP" "$WORK/fixed256.safetensors" "$WORK/loader256.safetensors" --rtol 1e-3; then
  fail "--benchmark-input fixed trained on the loader's batches"
fi
# --image-size sets H = W of the model's input.
"$TRAINER" --benchmark --model lenet --image-size 20 --batch-size 16 --epochs 1 --max-steps 2 --threads 1 \
  > "$WORK/size.out"
grep -q "samples of \[1, 20, 20\])" "$WORK/size.out" || fail "--image-size 20 not applied"
echo "recipe ok"
