#!/usr/bin/env python3
"""Writes the first N training and M test images of Fashion-MNIST as an IDX
directory (for `--dataset mnist-format --data-dir DIR`): the seeds'
experiments at a scale a 2-core machine finishes in minutes.
usage: fashion_mnist_slice.py DIR [--train N] [--test M] [--source /usr/share/datasets/fashion-mnist]
Standard library only.
"""
import argparse, gzip, os


def copy(src, dst, n):
    with gzip.open(src, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    if n > dims[0]:
        raise SystemExit(f"{src} holds {dims[0]} items, {n} asked for")
    per = 1
    for d in dims[1:]:
        per *= d
    header = raw[:4] + n.to_bytes(4, "big") + raw[8:4 + 4 * ndim]
    with gzip.open(dst, "wb") as f:
        f.write(header + raw[4 + 4 * ndim: 4 + 4 * ndim + n * per])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--train", type=int, default=12000)
    ap.add_argument("--test", type=int, default=2000)
    ap.add_argument("--source", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    for split, n in (("train", a.train), ("t10k", a.test)):
        for kind in ("images-idx3", "labels-idx1"):
            name = f"{split}-{kind}-ubyte.gz"
            copy(os.path.join(a.source, name), os.path.join(a.dir, name), n)


if __name__ == "__main__":
    main()
