"""The benchmark table of a scripts/gpu/check.sh run: lockstep against PyTorch.

Reads OUT_DIR/bench-*.jsonl (lockstep's metrics files; the run is named by
check.sh's bench_lockstep: bench-MODEL[-bf16|-fp16][-nhwc][-any][-graph]) and
the PyTorch result lines of OUT_DIR/bench.*.log (torch_gpu.py's JSON lines),
and prints one Markdown row per lockstep run with the PyTorch eager (and
compile) figure of the same model, precision and layout, and the ratio.
PyTorch's default takes any cuDNN algorithm; lockstep's default takes
deterministic ones (--cudnn-nondeterministic, the "any algorithm" rows, is
PyTorch's policy). So a default row also stands beside PyTorch eager run with
cudnn.deterministic (torch_gpu.py --deterministic) where that ran: the same
policy on both sides.
torch_gpu.py reports the median of 10-step windows; so the ratio takes
lockstep's median of 10-step windows where the run had any (its mean rate
over the timed steps otherwise), and the row shows both.

With the floor's rates (torch_gpu.py --floor's JSON line in OUT_DIR/bench.*.log)
each row also holds the step against its floor (nn/step_floor.h; the summary's
floor_flops_per_step and floor_bytes_per_step): FLOPs over the matmul rate of
the row's precision (fp16 rows use the bf16 rate: the same tensor cores), and
bytes over the copy bandwidth; "÷ floor" is ms/step over the larger of the two.

A second table gives each lockstep run's peak GPU memory beside PyTorch
eager's (torch.cuda.max_memory_allocated over the run): lockstep's peak over
the whole run, over its timed steps alone (no races, captures or first-step
growth) and the cuDNN workspace it held at the end -- where a peak comes from.
"held between steps" is the summary's held_mib: what the model, optimizer and
workspace keep from step to step (in brackets: activations / activation
gradients / layer scratch); "timed peak - held" is what the step's transients,
communication buffers and the allocator's rounding add on top.

  python3 scripts/gpu/bench_table.py OUT_DIR
"""
import glob
import json
import os
import sys


def lockstep_runs(out):
    for path in sorted(glob.glob(os.path.join(out, "bench-*.jsonl"))):
        name = os.path.basename(path)[len("bench-"):-len(".jsonl")]
        parts = name.split("-")
        summary = None
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    rec = json.loads(line)
                    if rec.get("type") == "summary":
                        summary = rec
        if summary is None:
            continue
        precision = next((p for p in parts if p in ("bf16", "fp16")), "fp32")
        layout = "nhwc" if "nhwc" in parts else "nchw"
        flags = [f for f, token in (("--cuda-graph", "graph"), ("any algorithm", "any"), ("loader input", "loader"))
                 if token in parts]
        yield {"model": summary.get("model", parts[0]), "precision": precision, "layout": layout,
               "variant": ", ".join(flags) or "default", "images_per_sec": summary["images_per_sec"],
               "window_median": summary.get("window_median_images_per_sec") if summary.get("windows") else None,
               "ms_per_step": summary["ms_per_step"], "floor_flops": summary.get("floor_flops_per_step"),
               "floor_bytes": summary.get("floor_bytes_per_step"),
               "peak_mib": summary.get("gpu_peak_allocated_mib"),
               "steady_peak_mib": summary.get("gpu_steady_peak_allocated_mib"),
               "workspace_mib": summary.get("gpu_workspace_mib"), "held": summary.get("held_mib")}


def floor_rates(out):
    """torch_gpu.py --floor's rates, or None when no floor step ran."""
    for path in sorted(glob.glob(os.path.join(out, "bench.*.log"))):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if rec.get("impl") == "floor":
                        return rec
    return None


def floor_ms(r, rates):
    """(FLOP floor ms, bytes floor ms) of a lockstep row, or None."""
    if not rates or r["floor_flops"] is None or r["floor_bytes"] is None:
        return None
    tflops = rates["matmul_fp32_tflops"] if r["precision"] == "fp32" else rates["matmul_bf16_tflops"]
    return 1e3 * r["floor_flops"] / (tflops * 1e12), 1e3 * r["floor_bytes"] / (rates["copy_gb_per_s"] * 1e9)


def torch_results(out):
    found = {}
    for path in sorted(glob.glob(os.path.join(out, "bench.*.log"))):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if rec.get("impl") == "pytorch":
                    mode = rec["mode"] + (".deterministic" if rec.get("algorithms") == "deterministic" else "")
                    key = (rec["model"], rec["precision"], rec.get("layout", "nchw"), mode)
                    found[key] = rec
    return found


def mib(v):
    return f"{v:,.0f}" if v is not None else "-"


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: bench_table.py OUT_DIR (a scripts/gpu/check.sh output directory)")
    out = sys.argv[1]
    torch = torch_results(out)
    rates = floor_rates(out)
    rows = list(lockstep_runs(out))
    if not rows:
        sys.exit(f"bench_table.py: no lockstep benchmark results (bench-*.jsonl with a summary) in {out}")
    print("| model | precision | layout | lockstep run | lockstep img/s | window median | ms/step | "
          "PyTorch eager img/s | ratio | PyTorch eager, deterministic | ratio | PyTorch compile img/s | "
          "FLOP floor ms | bytes floor ms | ÷ floor |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        key = (r["model"], r["precision"], r["layout"])
        eager_rec, compiled_rec = torch.get(key + ("eager",)), torch.get(key + ("compile",))
        eager = eager_rec["images_per_sec"] if eager_rec else None
        compiled = compiled_rec["images_per_sec"] if compiled_rec else None
        median = r["window_median"]
        ratio = f"**{(median or r['images_per_sec']) / eager:.2f}x**" if eager else "-"
        # lockstep's default algorithms are deterministic: beside PyTorch's run with the same policy too.
        det_rec = torch.get(key + ("eager.deterministic",)) if "any algorithm" not in r["variant"] else None
        det = det_rec["images_per_sec"] if det_rec else None
        det_ratio = f"**{(median or r['images_per_sec']) / det:.2f}x**" if det else "-"
        fl = floor_ms(r, rates)
        floors = (f"{fl[0]:.2f} | {fl[1]:.2f} | {r['ms_per_step'] / max(fl):.1f}x" if fl and max(fl) > 0
                  else "- | - | -")
        print(f"| {r['model']} | {r['precision']} | {r['layout']} | {r['variant']} | {r['images_per_sec']:,.0f} | "
              f"{f'{median:,.0f}' if median else '-'} | {r['ms_per_step']:.1f} | {f'{eager:,.0f}' if eager else '-'} | "
              f"{ratio} | {f'{det:,.0f}' if det else '-'} | {det_ratio} | {f'{compiled:,.0f}' if compiled else '-'} | "
              f"{floors} |")
    if not any(r["peak_mib"] is not None for r in rows):
        return
    print()
    print("| model | precision | layout | lockstep run | peak MiB allocated | timed steps' peak | cuDNN workspace | "
          "held between steps | timed peak - held | PyTorch eager peak | ratio |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if r["peak_mib"] is None:
            continue
        eager_rec = torch.get((r["model"], r["precision"], r["layout"], "eager"))
        theirs = eager_rec.get("peak_allocated_mib") if eager_rec else None
        ratio = f"{r['peak_mib'] / theirs:.2f}x" if theirs else "-"
        held, beyond = "-", "-"
        if r["held"]:
            h = r["held"]
            held = (f"{mib(h['total'])} ({mib(h['activations'])} / {mib(h['activation_gradients'])} / "
                    f"{mib(h['layer_scratch'])})")
            if r["steady_peak_mib"] is not None:
                beyond = mib(r["steady_peak_mib"] - h["total"])
        print(f"| {r['model']} | {r['precision']} | {r['layout']} | {r['variant']} | {mib(r['peak_mib'])} | "
              f"{mib(r['steady_peak_mib'])} | {mib(r['workspace_mib'])} | {held} | {beyond} | {mib(theirs)} | "
              f"{ratio} |")


if __name__ == "__main__":
    main()
