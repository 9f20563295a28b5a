"""Bytes PyTorch keeps for backward: the activations of one forward pass.

Counts the distinct storages autograd saves (saved_tensors_hooks), leaving out
parameters, buffers and the input, for the same layers as lockstep's model
(torch_models.py). Compare with lockstep's "memory held between steps" line
(activations) for the same model, input and batch.

usage: python3 torch_saved_bytes.py [--model resnet50] [--batch-size 4] [--image-size 224] [--channels 3]
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_models import TorchModel  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--channels", type=int, default=3)
    a = ap.parse_args()
    torch.manual_seed(0)
    m = TorchModel(a.model, in_ch=a.channels, classes=10, hw=a.image_size)
    x = torch.randn(a.batch_size, a.channels, a.image_size, a.image_size)
    y = torch.randint(0, 10, (a.batch_size,))
    seen = {}

    def pack(t):
        s = t.storage()
        seen.setdefault(s.data_ptr(), s.size() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        torch.nn.functional.cross_entropy(m(x), y)
    skip = {p.data_ptr() for p in m.parameters()} | {b.data_ptr() for b in m.buffers()} | {x.data_ptr()}
    total = sum(v for k, v in seen.items() if k not in skip)
    print(f"{a.model} batch {a.batch_size} at {a.image_size}x{a.image_size}: PyTorch {torch.__version__} saves "
          f"{total / 2**20:.1f} MiB of activations for backward")


if __name__ == "__main__":
    main()
