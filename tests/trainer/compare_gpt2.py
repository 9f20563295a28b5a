#!/usr/bin/env python3
"""Compares two GPT-2 weight files (safetensors in Hugging Face's names, as
the trainer writes them) tensor by tensor: the largest difference relative to
the tensor's largest magnitude in A must be within RTOL, except in the key
third of each attention's QKV bias (h.L.attn.c_attn.bias: q | k | v), held to
KEY_RTOL. Prints the worst tensor of each kind; exits 1 beyond them.
usage: compare_gpt2.py A B RTOL KEY_RTOL"""
import json
import struct
import sys

import numpy as np


def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], dtype=np.float32)
            for k, v in header.items() if k != "__metadata__"}


def main():
    a, b = load(sys.argv[1]), load(sys.argv[2])
    rtol, key_rtol = float(sys.argv[3]), float(sys.argv[4])
    if a.keys() != b.keys():
        sys.exit(f"the files hold different tensors: {sorted(a.keys() ^ b.keys())}")
    channels = a["transformer.ln_f.weight"].size  # C
    worst, worst_key = (0.0, ""), (0.0, "")
    for name, x in a.items():
        scale = max(float(np.abs(x).max()), 1e-30)
        d = np.abs(b[name] - x)
        if name.endswith("attn.c_attn.bias"):  # q | k | v
            k = float(d[channels:2 * channels].max()) / scale
            worst_key = max(worst_key, (k, name))
            d = np.concatenate([d[:channels], d[2 * channels:]])
        worst = max(worst, (float(d.max()) / scale, name))
    print(f"largest relative difference {worst[0]:.3e} ({worst[1]}), key bias {worst_key[0]:.3e} ({worst_key[1]})")
    sys.exit(0 if worst[0] <= rtol and worst_key[0] <= key_rtol else 1)


if __name__ == "__main__":
    main()
