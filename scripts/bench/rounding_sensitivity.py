"""How far rounding alone moves a model's gradients, in PyTorch (CPU).

The GPU model test (tests/gpu/test_gpu_model.cpp) compares each parameter
gradient of a 16-bit GPU step with the fp32 CPU step by relative L2. This
script measures what that comparison can expect from rounding alone, on
PyTorch's own copy of the model (scripts/bench/torch_models.py), so the
figure does not depend on lockstep's code:

  fp32 vs fp64     the same step in float32 and float64 (float32 rounding)
  perturbed        float32 with the input and every parameter moved by a
                   relative uniform(-u, u), against float64 (u = 2^-8 is a
                   bf16 rounding, 2^-11 an fp16 one)

Training mode (batch statistics), softmax cross-entropy on labels i*7 mod
classes, as the GPU test. Usage:
  python3 scripts/bench/rounding_sensitivity.py --model resnet50 --image-size 64 --batch-size 4
"""
import argparse
import copy
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import TorchModel  # noqa: E402


def step_grads(model, x, y):
    model.zero_grad()
    z = model(x)
    nn.functional.cross_entropy(z, y).backward()
    return z.detach(), [p.grad.detach().clone() for p in model.parameters()]


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item() if b.norm() > 0 else (a - b).norm().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--bits", type=int, nargs="+", default=[8, 11], help="perturbations 2^-bits")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    m = TorchModel(a.model, in_ch=a.channels, classes=a.classes, hw=a.image_size).train()
    names = [n for n, _ in m.named_parameters()]
    x = torch.randn(a.batch_size, a.channels, a.image_size, a.image_size)
    y = torch.arange(a.batch_size) * 7 % a.classes
    z64, g64 = step_grads(copy.deepcopy(m).double(), x.double(), y)

    def report(label, z, g):
        r = [rel_l2(p, q) for p, q in zip(g, g64)]
        worst = max(range(len(r)), key=lambda i: r[i])
        every = rel_l2(torch.cat([p.flatten() for p in g]), torch.cat([q.flatten() for q in g64]))
        print(f"{a.model} {a.image_size}x{a.image_size} batch {a.batch_size}, {label}: logits {rel_l2(z, z64):.3g}, "
              f"worst gradient {r[worst]:.3g} ({names[worst]}), tensors above 0.8: {sum(v > 0.8 for v in r)}/{len(r)}, "
              f"all gradients {every:.3g}")

    report("fp32 vs fp64", *step_grads(m, x, y))
    for bits in a.bits:
        u = 2.0 ** -bits
        mp = copy.deepcopy(m)
        with torch.no_grad():
            for p in mp.parameters():
                p.mul_(1 + (torch.rand_like(p) * 2 - 1) * u)
        xp = x * (1 + (torch.rand_like(x) * 2 - 1) * u)
        report(f"fp32 perturbed by 2^-{bits} vs fp64", *step_grads(mp, xp, y))


if __name__ == "__main__":
    main()
