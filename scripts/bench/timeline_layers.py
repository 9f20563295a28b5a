#!/usr/bin/env python3
"""Where a training step's time goes, from the trainer's --timeline trace.

Reads the Chrome trace one rank's `trainer --timeline FILE` wrote and sums,
over the steps after --skip warm-up steps, the forward and backward spans
by layer kind (the layer's description up to its first parenthesis:
Embedding, Attention, MLP, LayerNorm, TiedLinear, ...), the optimizer step,
data waits, and what lies between the spans (the loss, which is not a layer,
and the step's own bookkeeping). A step runs from one optimizer step's end to
the next one's. Prints ms per step for each and its share; last line JSON.
usage: timeline_layers.py TRACE.json [--skip 5]
"""
import argparse
import collections
import json
import re
import sys


def kind(name):
    # "forward 3 Attention(h.1, heads=4)" -> "Attention"; "optimizer step" stays whole.
    m = re.match(r"(forward|backward) \d+ ([^(]+)", name)
    return (m.group(1), m.group(2).strip()) if m else (None, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--skip", type=int, default=5, help="warm-up steps left out (the trainer's --benchmark leaves 5)")
    a = ap.parse_args()
    try:
        events = json.load(open(a.trace))
    except (OSError, ValueError) as e:
        sys.exit(f"timeline_layers.py: {a.trace}: {e}")
    spans = sorted((e for e in events if e.get("ph") == "X" and e.get("tid", 0) == 0), key=lambda e: e["ts"])
    ends = [e["ts"] + e["dur"] for e in spans if e["name"] == "optimizer step"]
    if len(ends) <= a.skip:
        sys.exit(f"timeline_layers.py: {a.trace} holds {len(ends)} steps, not more than --skip {a.skip}")
    # Step i (i >= 1) runs from the end of optimizer step i-1 to the end of optimizer step i;
    # step 0 from the first span on.
    bounds = [spans[0]["ts"]] + ends
    first, last = bounds[a.skip], bounds[-1]
    steps = len(bounds) - 1 - a.skip
    total = collections.defaultdict(float)
    for e in spans:
        if first <= e["ts"] < last:
            phase, k = kind(e["name"])
            total[(k, phase or "")] += e["dur"]
    wall = last - first
    total[("between spans (loss, bookkeeping)", "")] = wall - sum(total.values())
    print(f"{a.trace}: {steps} steps after {a.skip} left out, {wall / steps / 1e3:.1f} ms per step")
    print(f"{'part':<36} {'phase':<9} {'ms/step':>9} {'share':>7}")
    rows = []
    for (k, phase), us in sorted(total.items(), key=lambda kv: -kv[1]):
        ms = us / steps / 1e3
        rows.append({"part": k, "phase": phase, "ms_per_step": round(ms, 2), "share": round(us / wall, 4)})
        print(f"{k:<36} {phase:<9} {ms:>9.1f} {100 * us / wall:>6.1f}%")
    print(json.dumps({"trace": a.trace, "steps": steps, "ms_per_step": round(wall / steps / 1e3, 2), "parts": rows}))


if __name__ == "__main__":
    main()
