#!/usr/bin/env python3
"""Does --clip-grad-norm on the GPU clip as the CPU does? scripts/gpu/check.sh's compare.clip.

  compare_clip.py OUT_DIR

Reads the trainer's metrics files OUT_DIR/lenet-clip-NAME.jsonl (lenet, 3
epochs, seed 1, --clip-grad-norm 0.5): the CPU's (cpu), the GPU's in a
captured graph (graph) and with fp16 under NCCL (fp16); and the CPU's
unclipped runs at seeds 1-5 (lenet-cpu.jsonl, lenet-cpu-sN.jsonl), whose
spread is the yardstick for run-to-run noise.

Each clipped run must have one grad_clip record per epoch, with updates
clipped by the last (clipping happened: at 0.5 nearly every update is), and
each GPU run's test accuracy must be within the CPU seeds' spread plus 0.5
points of the CPU's clipped run. Runs that differ only in rounding drift
apart over three epochs like runs from different seeds (the H100's unclipped
modes at one seed spread over 0.9 points, the CPU's seeds over 1.2), so a
fixed 0.5 points would be a coin toss; a clipping that is broken either
clips nothing or costs far more.
Exits 1 when a run fails, 2 when a file is missing or unreadable.
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_lenet import SEEDS, read_records, seed_name, test_accuracy  # noqa: E402

GPU_RUNS = ("graph", "fp16")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: compare_clip.py OUT_DIR")
    out = sys.argv[1]
    try:
        seeds = [test_accuracy(out, seed_name("cpu", s), "compare_clip.py") for s in SEEDS]
        runs = {}
        for name in ("cpu",) + GPU_RUNS:
            records = read_records(out, f"clip-{name}", "compare_clip.py")
            runs[name] = (test_accuracy(out, f"clip-{name}", "compare_clip.py"),
                          [r for r in records if r.get("type") == "grad_clip"])
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    spread = max(seeds) - min(seeds)
    bound = spread + 0.5
    cpu_acc = runs["cpu"][0]
    print(f"CPU unclipped, seeds 1-5: {' '.join(f'{a:.2f}' for a in seeds)} (spread {spread:.2f}); "
          f"bound for a GPU run against the CPU's clipped one: {bound:.2f} points")
    ok = True
    for name, (acc, clip) in runs.items():
        clipped = [r.get("clipped_steps") for r in clip]
        norms = [round(r["grad_norm"], 4) for r in clip if isinstance(r.get("grad_norm"), (int, float))]
        problems = []
        if len(clip) != 3:
            problems.append(f"{len(clip)} grad_clip records, not 3")
        elif not isinstance(clipped[-1], int) or clipped[-1] <= 0:
            problems.append("no update clipped")
        if name != "cpu" and abs(acc - cpu_acc) > bound:
            problems.append(f"{acc - cpu_acc:+.2f} points from the CPU's")
        print(f"clip {name}: test accuracy {acc:.2f}%, clipped updates so far by epoch {clipped}, last norms {norms}:",
              "; ".join(problems) or "ok")
        ok &= not problems
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
