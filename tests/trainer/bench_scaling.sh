#!/usr/bin/env bash
# scripts/bench_scaling.sh on tiny synthetic runs of mlp under mpirun: each
# run's epoch and "Average time" lines, the seeds' table with one row per rank
# count (speedup 1.00 at N=1, efficiency = speedup / N), test columns "—" in
# benchmark mode, the oversubscription label exactly when ranks exceed cores,
# and a last line of JSON that agrees with the table. Checks shape and
# consistency only, never speed.
# usage: bench_scaling.sh path/to/scripts/bench_scaling.sh path/to/trainer
set -euo pipefail
SCRIPT=$1
export TRAINER=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
HEADER='#ranks | train s/epoch | test s | train % | test % | img/s | speedup | efficiency'

# Seeds' table with evaluation: N = 1, 2; two epochs, so the means leave out the first.
bash "$SCRIPT" mlp --ranks "1 2" --epochs 2 --global-batch 256 --optimizer sgd --lr 0.05 -- \
  --dataset synthetic --synthetic-samples 2048 --threads 1 > "$WORK/eval.out"
cat "$WORK/eval.out"
# Two run sections, each with its epoch lines and Average time line.
[[ $(grep -c '^== [12] rank' "$WORK/eval.out") -eq 2 ]] || fail "expected a section per rank count"
[[ $(grep -cE '^\[[12]/2\] \(train\) acc: .* \| \(test\) acc: ' "$WORK/eval.out") -eq 4 ]] || fail "epoch lines"
[[ $(grep -cE '^Average time TRAIN [0-9.]+s TEST [0-9.]+s \(epochs 2-2\)' "$WORK/eval.out") -eq 2 ]] ||
  fail "Average time lines"
grep -qE '^#ranks \| train s/epoch \| test s \| train % \| test % \| +img/s \| speedup \| efficiency$' "$WORK/eval.out" ||
  fail "table header is not: $HEADER"
NUM='[0-9]+\.[0-9]{2}'
grep -qE "^ +1 \| +$NUM \| +$NUM \| +$NUM \| +$NUM \| +[0-9,]+ \| +1\.00 \| +1\.00$" "$WORK/eval.out" || fail "row for 1 rank"
grep -qE "^ +2 \| +$NUM \| +$NUM \| +$NUM \| +$NUM \| +[0-9,]+ \| +$NUM \| +$NUM$" "$WORK/eval.out" || fail "row for 2 ranks"
grep -qF "(oversubscribed:" "$WORK/eval.out" && [[ $(nproc) -ge 2 ]] && fail "labelled oversubscribed on $(nproc) cores"
python3 - "$WORK/eval.out" <<'PY'
import json, re, sys
lines = open(sys.argv[1]).read().splitlines()
j = json.loads(lines[-1])
assert j["bench"] == "scaling" and j["model"] == "mlp" and j["global_batch"] == 256 and j["benchmark"] is False, j
rows = j["rows"]
assert [r["ranks"] for r in rows] == [1, 2], rows
assert rows[0]["speedup"] == 1.0 and rows[0]["efficiency"] == 1.0, rows[0]
for r in rows:
    assert r["epochs"] == 2 and r["images_per_sec"] > 0 and r["test_seconds"] is not None, r
    assert 0 <= r["train_acc"] <= 1 and 0 <= r["test_acc"] <= 1, r
    assert abs(r["speedup"] - r["images_per_sec"] / rows[0]["images_per_sec"]) < 1e-9, r
    assert abs(r["efficiency"] - r["speedup"] / r["ranks"]) < 1e-9, r
# The table shows the JSON's figures, and train s/epoch is the run's own "Average time TRAIN".
averages = [float(m.group(1)) for m in (re.match(r"Average time TRAIN ([0-9.]+)s", l) for l in lines) if m]
table = [l for l in lines if re.match(r"^ +[0-9]+ \| ", l)]
for r, row, avg in zip(rows, table, averages):
    cells = [c.strip() for c in row.split("|")]
    assert cells[1] == f"{r['train_seconds_per_epoch']:.2f}" == f"{avg:.2f}", (cells, r, avg)
    assert cells[3] == f"{100 * r['train_acc']:.2f}" and cells[4] == f"{100 * r['test_acc']:.2f}", (cells, r)
    assert cells[5] == f"{r['images_per_sec']:,.0f}", (cells, r)
print("eval table ok")
PY

# Benchmark mode at N = 1 and 4: no test columns; 4 ranks on fewer cores are labelled.
bash "$SCRIPT" mlp --ranks "1 4" --epochs 1 --global-batch 256 --optimizer sgd --lr 0.05 --benchmark -- \
  --max-steps 8 --threads 1 > "$WORK/bench.out"
cat "$WORK/bench.out"
[[ $(grep -c '^benchmark: mlp on \[1, 28, 28\] samples' "$WORK/bench.out") -eq 2 ]] || fail "benchmark lines"
grep -qE "^ +1 \| +$NUM \| +— \| +$NUM \| +— \| +[0-9,]+ \| +1\.00 \| +1\.00$" "$WORK/bench.out" ||
  fail "benchmark row for 1 rank has test figures or lacks others"
if [[ $(nproc) -lt 4 ]]; then
  grep -qE "^ +4 \| .* \| +$NUM \| +$NUM  \(oversubscribed: 4 ranks on $(nproc) cores\)$" "$WORK/bench.out" ||
    fail "4 ranks on $(nproc) cores not labelled oversubscribed"
else
  grep -qF "(oversubscribed:" "$WORK/bench.out" && fail "labelled oversubscribed on $(nproc) cores"
fi
tail -1 "$WORK/bench.out" | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["benchmark"] is True and [r["ranks"] for r in j["rows"]] == [1, 4], j
for r in j["rows"]:
    assert r["test_seconds"] is None and r["test_acc"] is None, r
assert j["rows"][1]["oversubscribed"] == (4 > j["cores"]), j
print("benchmark table ok")'
echo "bench_scaling ok"
