"""What the convolution races of a scripts/gpu/check.sh run bought.

lockstep's benchmark steps log at debug level, and with --cudnn-benchmark
each convolution race (ops/conv/conv2d_cuda.cu: cuDNN's legacy algorithm against
its graph-API plans, per layer, direction and batch size) logs one line:

  conv2d (cuda) [N, C, H, W] -> [OC, OH, OW], kernel KxK stride S pad P, PREC[ nhwc], DIRECTION:
    [reference algorithm R, ]legacy algorithm A T ms; engine E T ms; ...; engine E left out (disagreement D | did not run: STATUS);
    [the legacy algorithm left out (disagreement D);] [timed with the host's launch cost (...);]
    kept engine E|the legacy algorithm (T ms)

(one line; or ending "; no graph-API plan passes the rules", " gave an inf or
NaN; the next call races again" or "; no memory to race the plans (...)").
For each OUT_DIR/bench.*.log with such lines this prints, per direction and
in total: the races, how many a plan won, the contenders left out (they
disagreed with the race's reference, or did not run), and the summed time of the legacy algorithms against that of
the contenders kept, per run of every raced layer once -- for a model trained
at one batch size, about the convolutions' share of one step, by the races'
own timing. Races whose line says they were timed with the host's launch
cost (the host gate timed out) are counted on a line of their own.

  python3 scripts/gpu/race_summary.py OUT_DIR
"""
import glob
import os
import re
import sys

LINE = re.compile(r"^(?:\[rank \d+/\d+\] )?conv2d \(cuda\) .*?, (fp32|bf16|fp16)( nhwc)?, "
                  r"(forward|backward data|backward filter): (?:reference algorithm -?\d+, )?"
                  r"legacy algorithm (-?\d+)(.*)$")
DIRECTIONS = ("forward", "backward data", "backward filter")


def parse(rest):
    """(legacy ms or None, kept ms or None, left-out count, whether a plan won, outcome).

    One engine can enter a race several times (its knob settings are separate
    plans), so the kept time is the one the line gives after "kept ...". Lines
    from before it gave one are read by the race's own rule: the least time wins.
    """
    legacy_ms = None
    m = re.match(r"^ ([0-9.eE+-]+) ms", rest)
    if m:
        legacy_ms = float(m.group(1))
    times = [float(t) for t in re.findall(r"; engine -?\d+ ([0-9.eE+-]+) ms", rest)]
    left_out = len(re.findall(r"; (?:engine -?\d+|the legacy algorithm) left out \((?:disagreement|did not run)",
                              rest))
    kept = re.search(r"; kept (engine -?\d+|the legacy algorithm)(?: \(([0-9.eE+-]+) ms\))?$", rest)
    if kept:
        won = kept.group(1) != "the legacy algorithm"
        if kept.group(2) is not None:
            kept_ms = float(kept.group(2))
        elif legacy_ms is not None:
            kept_ms = min([legacy_ms] + times)
        else:
            kept_ms = None
        return legacy_ms, kept_ms, left_out, won, "kept"
    if "no graph-API plan passes the rules" in rest:
        return None, None, 0, False, "no plan"
    if "gave an inf or NaN" in rest:
        return None, None, 0, False, "retry"
    if "no memory to race the plans" in rest:
        return None, None, 0, False, "no memory"
    return None, None, 0, False, "unknown"


def summarise(path):
    per = {d: {"races": 0, "won": 0, "left_out": 0, "legacy_ms": 0.0, "kept_ms": 0.0, "untimed": 0}
           for d in DIRECTIONS}
    found = 0
    ungated = 0  # races whose times include the host's launch cost (the gate timed out)
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if not m:
                continue
            found += 1
            d = per[m.group(3)]
            legacy_ms, kept_ms, left_out, won, outcome = parse(m.group(5))
            d["races"] += 1
            d["left_out"] += left_out
            if "; timed with the host's launch cost" in m.group(5):
                ungated += 1
            if outcome != "kept" or legacy_ms is None:
                d["untimed"] += 1  # nothing timed: no plan, every plan left out, a retry, no memory
                continue
            if won:
                d["won"] += 1
            d["legacy_ms"] += legacy_ms
            d["kept_ms"] += kept_ms
    return found, per, ungated


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: race_summary.py OUT_DIR (a scripts/gpu/check.sh output directory)")
    any_found = False
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "bench.*.log"))):
        found, per, ungated = summarise(path)
        if not found:
            continue
        any_found = True
        print(f"{os.path.basename(path)[:-len('.log')]}:")
        total = {"races": 0, "won": 0, "left_out": 0, "legacy_ms": 0.0, "kept_ms": 0.0, "untimed": 0}
        for name in DIRECTIONS:
            d = per[name]
            for k in total:
                total[k] += d[k]
            if d["races"]:
                print(f"  {name:15s} {d['races']:3d} races, a plan won {d['won']:3d}, {d['left_out']:2d} left out, "
                      f"{d['untimed']:2d} untimed; legacy {d['legacy_ms']:8.3f} ms -> kept {d['kept_ms']:8.3f} ms")
        t = total
        print(f"  {'all':15s} {t['races']:3d} races, a plan won {t['won']:3d}, {t['left_out']:2d} left out, "
              f"{t['untimed']:2d} untimed; legacy {t['legacy_ms']:8.3f} ms -> kept {t['kept_ms']:8.3f} ms")
        if ungated:
            plural = "s" if ungated != 1 else ""
            print(f"  {ungated} race{plural} timed with the host's launch cost (the gate timed out)")
    if not any_found:
        print("race_summary.py: no convolution race lines (lockstep logs them with --cudnn-benchmark "
              "--log-level debug)")


if __name__ == "__main__":
    main()
