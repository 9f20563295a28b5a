#!/usr/bin/env python3
"""Interop: PyTorch loads lockstep's safetensors weights and gets lockstep's results.

For each model: train a few steps with the lockstep trainer on a slice of
Fashion-MNIST (2,000 training and 500 test images, written as IDX files so the
test stays fast), save the weights; load them with the reference `safetensors` package into the
layer-for-layer PyTorch definition (strict state_dict; for ResNets the batch
norm running statistics too, so evaluation mode must agree), evaluate the test set
with the normalisation stored in the file's metadata, and compare test loss and
accuracy with what lockstep reported. Exit 77 (ctest: skipped) when torch or
safetensors is not importable.
usage: torch_loads_weights.py TRAINER [MODEL ...]
"""
import gzip, json, os, subprocess, sys, tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file
    from safetensors import safe_open
except ImportError as e:
    print(f"skipped: {e} (scripts/setup.sh installs torch and safetensors)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "bench"))
from torch_models import TorchModel  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def write_idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def main():
    trainer, models = sys.argv[1], sys.argv[2:] or ["mlp", "lenet", "keras-cnn"]
    torch.set_num_threads(1)
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "data")
        os.mkdir(data)
        for split, n in (("train", 2000), ("t10k", 500)):
            write_idx(f"{data}/{split}-images-idx3-ubyte.gz", read_idx(f"{DATA}/{split}-images-idx3-ubyte.gz")[:n])
            write_idx(f"{data}/{split}-labels-idx1-ubyte.gz", read_idx(f"{DATA}/{split}-labels-idx1-ubyte.gz")[:n])
        images = read_idx(f"{data}/t10k-images-idx3-ubyte.gz")
        labels = torch.from_numpy(read_idx(f"{data}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
        for name in models:
            w, m = os.path.join(work, f"{name}.safetensors"), os.path.join(work, f"{name}.jsonl")
            subprocess.run([trainer, "--model", name, "--dataset", "mnist-format", "--data-dir", data,
                            "--max-steps", "3" if name == "convnet" else "20", "--batch-size", "64", "--threads", "1",
                            "--save-weights", w, "--metrics-file", m, "--progress", "off"],
                           check=True, stdout=subprocess.DEVNULL)
            ours = [json.loads(l) for l in open(m) if '"epoch"' in l][-1]
            with safe_open(w, framework="pt") as f:
                meta = f.metadata()
            mean, std = float(meta["input_mean"]), float(meta["input_std"])
            model = TorchModel(name)
            state = load_file(w)
            # PyTorch's batch norm also counts its batches (used only with
            # momentum=None); lockstep does not store the count. Every other
            # tensor, running statistics included, must match by name and shape.
            for k, v in model.state_dict().items():
                if k.endswith("num_batches_tracked"):
                    state.setdefault(k, torch.zeros_like(v))
            model.load_state_dict(state, strict=True)
            model.eval()
            x = (torch.from_numpy(images.astype(np.float32)).unsqueeze(1) / 255.0 - mean) / std
            with torch.no_grad():
                logits = model(x)
            loss = F.cross_entropy(logits.double(), labels).item()
            acc = (logits.argmax(1) == labels).double().mean().item()
            ok = abs(loss - ours["test_loss"]) <= 1e-4 * max(1.0, abs(loss)) and abs(acc - ours["test_acc"]) <= 1 / len(x)
            print(f"{'ok  ' if ok else 'FAIL'} {name}: torch test loss {loss:.6f} acc {acc:.4f} | "
                  f"lockstep loss {ours['test_loss']:.6f} acc {ours['test_acc']:.4f}")
            failures += not ok
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
