#!/usr/bin/env python3
"""PyTorch GPU reference for lockstep's GPU training benchmark, and the floor.

Model mode: trains the same model as lockstep (scripts/bench/torch_models.py:
same layers and optimizer) on synthetic data on one GPU, eager or under
torch.compile, fp32 (TF32 off, as lockstep's fp32 path), bf16 autocast or fp16 autocast with GradScaler,
and prints the median images/s over timed windows (torch.cuda.synchronize at
each window's end). Last line is machine-readable JSON.

--floor: the rates a step time is compared with: dense matmul TFLOP/s (fp32
without TF32, and bf16) and device-to-device copy bandwidth.
Runs with PyTorch 2.x on a CUDA machine (the project's lent H100/H200).
"""
import argparse, json, os, statistics, sys, time
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import TorchModel  # noqa: E402


def timed(fn, reps):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps


def profile(step, reps):
    """Per-kernel GPU time over reps steps, the counterpart of scripts/gpu/kernel_times.py."""
    from torch.profiler import ProfilerActivity, profile as prof
    with prof(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(reps):
            step()
        torch.cuda.synchronize()
    events = p.key_averages()
    key = "self_device_time_total" if hasattr(events[0], "self_device_time_total") else "self_cuda_time_total"
    rows = sorted(((getattr(e, key), e.count, e.key) for e in events), reverse=True)
    total = sum(r[0] for r in rows)
    print(f"{reps} steps, GPU time {total / 1e3 / reps:.3f} ms per step")
    for us, count, name in rows[:30]:
        if us <= 0:
            break
        print(f"{us / 1e3 / reps:9.3f} ms/step {100 * us / total:5.1f}% {count // reps:5d}/step  {name[:110]}")


def floor():
    out = {"impl": "floor", "device": torch.cuda.get_device_name()}
    n = 8192
    for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        a = torch.randn(n, n, device="cuda", dtype=dt)
        b = torch.randn(n, n, device="cuda", dtype=dt)
        timed(lambda: a @ b, 3)
        s = min(timed(lambda: a @ b, 10) for _ in range(3))
        out[f"matmul_{name}_tflops"] = 2 * n ** 3 / s / 1e12
    x = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    timed(lambda: y.copy_(x), 3)
    s = min(timed(lambda: y.copy_(x), 20) for _ in range(3))
    out["copy_gb_per_s"] = 2 * x.numel() / s / 1e9  # read + write
    print(f"floor on {out['device']}: fp32 matmul {out['matmul_fp32_tflops']:.1f} TFLOP/s, "
          f"bf16 matmul {out['matmul_bf16_tflops']:.1f} TFLOP/s, copy {out['copy_gb_per_s']:.0f} GB/s")
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="convnet")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--window", type=int, default=10, help="steps per timed window")
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--image-size", type=int, default=28)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--channels-last", action="store_true",
                    help="model and input in torch.channels_last (NHWC), as lockstep --layout nhwc")
    ap.add_argument("--floor", action="store_true")
    ap.add_argument("--deterministic", action="store_true",
                    help="cudnn.deterministic: deterministic convolution algorithms only, lockstep's default policy "
                         "(PyTorch's default takes any)")
    ap.add_argument("--profile", action="store_true",
                    help="after warm-up, print the GPU kernels of one timed window by total time (torch.profiler)")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as in lockstep
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = a.deterministic
    if a.floor:
        return floor()
    torch.manual_seed(0)
    model = TorchModel(a.model, in_ch=a.channels, classes=a.classes, hw=a.image_size).cuda()
    model.train()
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
    # fp16: fused optimizers take GradScaler's inf check on the device (no host
    # sync per step), as lockstep's loss scaling does.
    fused = a.precision == "fp16"
    opt = (torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=fused) if a.optimizer == "sgd"
           else torch.optim.Adam(model.parameters(), lr=1e-3, fused=fused))
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand(a.batch_size, a.channels, a.image_size, a.image_size, device="cuda")
    if a.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, a.classes, (a.batch_size,), device="cuda")
    fwd = torch.compile(model) if a.compile else model

    # fp16: autocast with dynamic loss scaling (GradScaler), as lockstep --precision fp16.
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    scaler = torch.amp.GradScaler("cuda", enabled=a.precision == "fp16")

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=half or torch.float32, enabled=half is not None):
            loss = loss_fn(fwd(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    if a.profile:
        return profile(step, a.window)
    rates = []
    for _ in range(a.steps // a.window):
        rates.append(a.batch_size / timed(step, a.window))  # timed(): seconds per step
    med = statistics.median(rates)
    mode = "compile" if a.compile else "eager"
    layout = "nhwc" if a.channels_last else "nchw"
    policy = "deterministic" if a.deterministic else "any"
    print(f"torch {torch.__version__} {mode} ({policy} algorithms) {a.precision} {layout} {a.model} "
          f"{a.channels}x{a.image_size}x{a.image_size} "
          f"batch {a.batch_size} on {torch.cuda.get_device_name()}: "
          f"median {med:,.0f} img/s over {len(rates)} windows of {a.window} steps; "
          f"peak {torch.cuda.max_memory_allocated() / 2**20:,.1f} MiB allocated, "
          f"{torch.cuda.max_memory_reserved() / 2**20:,.1f} MiB reserved")
    print(json.dumps({"impl": "pytorch", "version": torch.__version__, "mode": mode, "algorithms": policy,
                      "precision": a.precision,
                      "layout": layout, "model": a.model, "batch": a.batch_size, "device": torch.cuda.get_device_name(),
                      "images_per_sec": med, "peak_allocated_mib": torch.cuda.max_memory_allocated() / 2**20,
                      "peak_reserved_mib": torch.cuda.max_memory_reserved() / 2**20}))


if __name__ == "__main__":
    main()
