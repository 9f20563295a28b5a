#!/usr/bin/env bash
# The seeds' accuracy bar on Fashion-MNIST, with the trainer's defaults:
#   lenet      (no flags)          >= 85% test accuracy within 5 epochs
#   keras-cnn  (--model keras-cnn) >= 89% test accuracy within 5 epochs
# --target-accuracy stops a run at the first epoch that reaches the bar, so the
# test takes as long as the model needs, at most 5 epochs.
# usage: convergence.sh path/to/trainer MODEL TARGET
set -euo pipefail
TRAINER=$1 MODEL=$2 TARGET=$3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$TRAINER" --model "$MODEL" --epochs 5 --target-accuracy "$TARGET" --metrics-file "$WORK/m.jsonl"
python3 - "$WORK/m.jsonl" "$TARGET" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
best = max(r["test_acc"] for r in recs if r["type"] == "epoch")
s = recs[-1]
print(f"best test accuracy {best:.4f} after {s['epochs']} epoch(s); target {float(sys.argv[2]):.4f}")
assert s["type"] == "summary" and s["reached_target"] and best >= float(sys.argv[2]) and s["epochs"] <= 5, s
PY
