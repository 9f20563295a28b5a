#!/usr/bin/env python3
"""Writes a synthetic data set in the CIFAR-10 binary format, for tests.

usage: make_cifar10.py DIR [--train-per-file N] [--test N] [--seed S]

DIR gets data_batch_1.bin ... data_batch_5.bin (N records each) and
test_batch.bin: records of one label byte (0-9) and 3072 pixel bytes (the
1024 red, 1024 green, then 1024 blue values of a 32x32 image, row-major).

The images are learnable but not trivially: a class is a colour (five
colours) and a stripe orientation (horizontal or vertical, period 6 pixels),
so colour alone tells a class only up to its pair and a model must also see
the stripes. Both survive the crop-and-flip augmentation. Every pixel gets
uniform noise and every image a random brightness offset. Labels cycle
through the classes from a random start, so every file holds every class.
Python's standard library only; the same seed gives the same bytes.
"""
import argparse
import os
import random
import sys

SIDE = 32
PLANE = SIDE * SIDE
COLOURS = [(200, 60, 60), (60, 190, 70), (70, 80, 210), (210, 200, 60), (170, 70, 190)]  # RGB per class pair


def image(label, rng):
    """3072 bytes: class colour on the stripes, dimmed between them, plus noise."""
    colour = COLOURS[label // 2]
    vertical = label % 2 == 1
    phase = rng.randrange(6)
    brightness = rng.randint(-25, 25)
    stripe = [((x if vertical else y) + phase) % 6 < 3 for y in range(SIDE) for x in range(SIDE)]
    out = bytearray(3 * PLANE)
    for c in range(3):
        on = colour[c] + brightness
        off = colour[c] // 3 + brightness
        base = c * PLANE
        for i in range(PLANE):
            v = (on if stripe[i] else off) + rng.randint(-40, 40)
            out[base + i] = 0 if v < 0 else 255 if v > 255 else v
    return out


def write_file(path, count, rng):
    start = rng.randrange(10)
    with open(path, "wb") as f:
        for i in range(count):
            label = (start + i) % 10
            f.write(bytes([label]))
            f.write(image(label, rng))


def main(argv):
    p = argparse.ArgumentParser(description="Write a synthetic CIFAR-10 binary data set.")
    p.add_argument("dir")
    p.add_argument("--train-per-file", type=int, default=200, help="records in each of the 5 training files")
    p.add_argument("--test", type=int, default=200, help="records in test_batch.bin")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    if a.train_per_file < 1 or a.test < 1:
        p.error("--train-per-file and --test must be at least 1")
    os.makedirs(a.dir, exist_ok=True)
    rng = random.Random(a.seed)
    for b in range(1, 6):
        write_file(os.path.join(a.dir, f"data_batch_{b}.bin"), a.train_per_file, rng)
    write_file(os.path.join(a.dir, "test_batch.bin"), a.test, rng)


if __name__ == "__main__":
    main(sys.argv[1:])
