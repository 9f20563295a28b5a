#!/usr/bin/env bash
# A lenet run at N=2 with --timeline: each rank's Chrome trace must parse, its
# events must be well formed (name, ph, pid, tid, ts; dur on spans; metadata
# naming the process and threads), hold forward/backward per layer, bucket
# readiness, allreduces on the communication thread, optimizer steps and data
# waits; and in most steps an allreduce must start before backward ends
# (communication overlapped with backward). With --zero-stage 1: reduce-scatter
# spans on the communication thread, a parameter allgather there after each
# optimizer step, and no forward before its first range has arrived. Small
# buckets split lenet's
# 0.5 MB of gradients so several can go out during backward; --overlap on,
# as --overlap auto reduces after backward where the ranks fill the cores.
# usage: timeline.sh TRAINER [COMPARE_WEIGHTS, unused]
set -euo pipefail
TRAINER=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mpirun -np 2 "$TRAINER" --model lenet --max-steps 30 --threads 1 --no-eval --progress off --overlap on \
  --fusion-threshold-mb 0.1 --first-bucket-mb 0.01 --timeline "$WORK/trace.json" > "$WORK/out"
ls "$WORK"
python3 - "$WORK/trace.rank0.json" "$WORK/trace.rank1.json" <<'PY'
import json, sys
for rank, path in enumerate(sys.argv[1:]):
    events = json.load(open(path))
    assert isinstance(events, list) and events, path
    for e in events:
        for k in ("name", "ph", "pid", "tid"):
            assert k in e, (k, e)
        assert e["pid"] == rank, e
        assert e["ph"] in ("X", "i", "M"), e
        if e["ph"] != "M":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        if e["ph"] == "X":
            assert e["dur"] >= 0, e
    meta = {(e["name"], e["args"]["name"]) for e in events if e["ph"] == "M"}
    assert ("process_name", f"rank {rank}") in meta and ("thread_name", "comm") in meta, meta
    cats = {e.get("cat") for e in events if e["ph"] != "M"}
    for c in ("forward", "backward", "allreduce", "bucket", "optimizer", "data"):
        assert c in cats, (c, cats)
    assert all(e["tid"] == 1 for e in events if e.get("cat") == "allreduce"), "allreduce off the comm thread"
    steps = sorted(e["ts"] for e in events if e.get("cat") == "optimizer")
    assert len(steps) == 30, len(steps)
    overlapped = 0
    prev = 0.0
    for t in steps:
        bwd = [e for e in events if e.get("cat") == "backward" and prev <= e["ts"] < t]
        ar = [e for e in events if e.get("cat") == "allreduce" and prev <= e["ts"] < t]
        if bwd and ar and min(a["ts"] for a in ar) < max(b["ts"] + b["dur"] for b in bwd):
            overlapped += 1
        prev = t
    print(f"rank {rank}: {len(events)} events, {overlapped}/30 steps with an allreduce during backward")
    assert overlapped >= 24, overlapped
print("timeline ok")
PY

# --zero-stage 1: buckets are reduce-scattered on the communication thread and
# each optimizer step starts the parameter allgather there, first range first;
# the next forward's first layer starts only once that range has arrived.
mpirun -np 2 "$TRAINER" --model lenet --max-steps 10 --threads 1 --no-eval --progress off --zero-stage 1 --overlap on \
  --fusion-threshold-mb 0.1 --first-bucket-mb 0.01 --timeline "$WORK/zero.json" > "$WORK/zero.out"
python3 - "$WORK/zero.rank0.json" "$WORK/zero.rank1.json" <<'PY'
import json, sys
for rank, path in enumerate(sys.argv[1:]):
    events = [e for e in json.load(open(path)) if e["ph"] == "X"]
    scatter = [e for e in events if e["name"].startswith("reduce-scatter bucket")]
    assert scatter and all(e["tid"] == 1 and e["cat"] == "allreduce" for e in scatter), "reduce-scatter off the comm thread"
    assert not [e for e in events if e["name"].startswith("allreduce bucket")], "allreduce at stage 1"
    steps = sorted(e["ts"] + e["dur"] for e in events if e["name"] == "optimizer step")
    gathers = [e for e in events if e["name"].startswith("allgather parameters")]
    assert gathers and all(e["tid"] == 1 for e in gathers), "parameter allgather off the comm thread"
    first = sorted((e["ts"], e["ts"] + e["dur"]) for e in gathers if e["name"] == "allgather parameters 0")
    assert len(steps) == len(first) == 10, (len(steps), len(first))
    assert all(g >= s for s, (g, _) in zip(steps, first)), "an allgather before its optimizer step ended"
    forwards = sorted(e["ts"] for e in events if e["name"].startswith("forward "))
    for k in range(9):  # step k+1's forward runs between optimizer steps k and k+1
        fwd = [t for t in forwards if steps[k] <= t < steps[k + 1]]
        assert fwd and fwd[0] >= first[k][1] - 1, f"step {k + 2}: forward began before its first parameters arrived"
    print(f"rank {rank}: {len(scatter)} reduce-scatter spans, {len(gathers)} allgather ranges in {len(first)} steps")
print("zero timeline ok")
PY
