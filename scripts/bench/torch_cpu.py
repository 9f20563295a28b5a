#!/usr/bin/env python3
"""PyTorch CPU reference for lockstep's training-throughput benchmark.

Trains the same model (same layers, same init family, same optimizer) on
synthetic data (28x28x1 unless --channels/--image-size say otherwise) with the
given batch and thread count, and prints the
median images/s over timed windows and the process's peak resident memory
(and what it held after importing torch, before the model existed). Last line
is machine-readable JSON.
Runs with Debian's python3-torch (1.13, CPU).
"""
import argparse, json, os, resource, statistics, sys, time
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import TorchModel  # noqa: E402


def peak_resident_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="lenet")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--window", type=int, default=10, help="steps per timed window")
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--image-size", type=int, default=28)
    ap.add_argument("--classes", type=int, default=10)
    a = ap.parse_args()
    import_mib = peak_resident_mib()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = TorchModel(a.model, in_ch=a.channels, classes=a.classes, hw=a.image_size)
    model.train()
    opt = (torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if a.optimizer == "sgd"
           else torch.optim.Adam(model.parameters(), lr=1e-3))
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand(a.batch_size, a.channels, a.image_size, a.image_size)
    y = torch.randint(0, a.classes, (a.batch_size,))

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    rates = []
    for _ in range(a.steps // a.window):
        t0 = time.perf_counter()
        for _ in range(a.window):
            step()
        dt = time.perf_counter() - t0
        rates.append(a.window * a.batch_size / dt)
    med = statistics.median(rates)
    print(f"torch {torch.__version__} {a.model} {a.channels}x{a.image_size}x{a.image_size} "
          f"batch {a.batch_size} threads {a.threads}: "
          f"median {med:,.0f} img/s over {len(rates)} windows of {a.window} steps; "
          f"peak resident {peak_resident_mib():,.0f} MiB ({import_mib:,.0f} after importing torch)")
    print(json.dumps({"impl": "pytorch", "version": torch.__version__, "model": a.model,
                      "batch": a.batch_size, "threads": a.threads, "images_per_sec": med,
                      "peak_resident_mib": peak_resident_mib(), "import_resident_mib": import_mib}))


if __name__ == "__main__":
    main()
