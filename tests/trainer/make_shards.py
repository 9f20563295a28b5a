#!/usr/bin/env python3
"""Writes llm.c token shards of a learnable toy language for the GPT-2 tests:
phrases of 3-8 tokens drawn from a fixed set of 40 (vocabulary VOCAB), so a
model can learn which token follows which. usage: make_shards.py DIR VOCAB
TRAIN_TOKENS VAL_TOKENS. Writes DIR/toy_train_000.bin and DIR/toy_val_000.bin."""
import random
import struct
import sys


def write_shard(path, tokens):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, len(tokens)] + [0] * 253)))
        f.write(struct.pack("<%dH" % len(tokens), *tokens))


def main():
    out, vocab, n_train, n_val = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(0)
    phrases = [[rng.randrange(vocab) for _ in range(rng.randint(3, 8))] for _ in range(40)]
    for split, n, seed in (("train", n_train, 1), ("val", n_val, 2)):
        r = random.Random(seed)
        tokens = []
        while len(tokens) < n:
            tokens += r.choice(phrases)
        write_shard(f"{out}/toy_{split}_000.bin", tokens[:n])


if __name__ == "__main__":
    main()
