#!/usr/bin/env python3
"""PyTorch DistributedDataParallel (gloo) reference for lockstep's scaling benchmark.

Starts WORLD processes on this host (torch.multiprocessing), each training the
same model on its own fixed synthetic batch of --batch-size samples with SGD
(momentum 0.9) under DDP with the gloo backend, --threads intra-op threads per
process. After 5 warm-up steps, rank 0 times windows of steps; the result is the
median images/s over all ranks. Last line: JSON (rank 0).

Across hosts (scripts/bench_hosts.sh): --rank R --master ADDR:PORT runs one
rank in this process; start one per host with the same --world and --master
(set GLOO_SOCKET_IFNAME to the interface that reaches the others).
"""
import argparse, json, os, socket, statistics, sys, time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import TorchModel  # noqa: E402


def worker(rank, a, master, out):
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method=f"tcp://{master}", rank=rank, world_size=a.world)
    torch.manual_seed(0)
    model = DDP(TorchModel(a.model, in_ch=a.channels, classes=a.classes, hw=a.image_size))
    if a.compression == "fp16":  # DDP's own hook: each bucket cast to fp16 for the allreduce, divided by the world
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(rank)
    x = torch.rand(a.batch_size, a.channels, a.image_size, a.image_size, generator=g)
    y = torch.randint(0, a.classes, (a.batch_size,), generator=g)

    def step():
        opt.zero_grad(set_to_none=False)
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(5):
        step()
    rates = []
    for _ in range(a.steps // a.window):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(a.window):
            step()
        dist.barrier()
        rates.append(a.window * a.batch_size * a.world / (time.perf_counter() - t0))
    if rank == 0:
        out.put(statistics.median(rates))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="lenet")
    ap.add_argument("--batch-size", type=int, default=128, help="per process")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--image-size", type=int, default=28)
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--classes", type=int, default=10)
    # (bf16_compress_hook refuses gloo in 1.13: "required CUDA 11+ and NCCL 2.10+")
    ap.add_argument("--compression", default="none", choices=["none", "fp16"],
                    help="gradients on the wire: fp16 registers DDP's fp16_compress_hook")
    ap.add_argument("--rank", type=int, help="run only this rank (with --master), one process per host")
    ap.add_argument("--master", help="ADDR:PORT of rank 0's rendezvous, with --rank")
    a = ap.parse_args()
    if (a.rank is None) != (a.master is None):
        ap.error("--rank and --master go together")
    if a.rank is not None:
        out = mp.get_context("spawn").Queue()
        worker(a.rank, a, a.master, out)
        if a.rank != 0:
            return
        ips = out.get()
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        procs = [ctx.Process(target=worker, args=(r, a, f"127.0.0.1:{port}", out)) for r in range(a.world)]
        for p in procs:
            p.start()
        ips = out.get()
        for p in procs:
            p.join()
    print(f"torch {torch.__version__} DDP gloo {a.model} world {a.world} batch {a.batch_size}/rank "
          f"threads {a.threads} compression {a.compression}: median {ips:,.0f} img/s")
    print(json.dumps({"impl": "pytorch-ddp-gloo", "model": a.model, "world": a.world, "batch": a.batch_size,
                      "threads": a.threads, "image_size": a.image_size, "compression": a.compression, "images_per_sec": ips}))


if __name__ == "__main__":
    main()
