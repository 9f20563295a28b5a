#!/usr/bin/env python3
"""Sums Nsight Compute's per-kernel durations by kernel name: where a step's GPU time goes.

  ncu --csv --metrics gpu__time_duration.sum --print-units base --log-file K.csv PROGRAM...
  kernel_times.py K.csv STEPS

Prints GPU ms per step (total / STEPS), then the 30 kernels with the most time:
ms per step, share, launches per step, name. scripts/bench/torch_gpu.py
--profile prints the same table for PyTorch.
"""
import collections, csv, sys


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    lines = [l for l in open(path, errors="replace") if not l.startswith("==")]
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"kernel_times.py: {path}: no ncu CSV header (\"ID\",...)")
    total = collections.Counter()
    count = collections.Counter()
    for row in csv.DictReader(lines[start:]):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = row["Kernel Name"]
        total[name] += float(row["Metric Value"].replace(",", ""))
        count[name] += 1
    ns = sum(total.values())
    print(f"{sum(count.values())} kernels over {steps} steps, GPU time {ns / 1e6 / steps:.3f} ms per step")
    for name, t in total.most_common(30):
        print(f"{t / 1e6 / steps:9.3f} ms/step {100 * t / ns:5.1f}% {count[name] / steps:5.0f}/step  {name[:110]}")


if __name__ == "__main__":
    main()
