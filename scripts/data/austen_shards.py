#!/usr/bin/python3
"""Jane Austen's six novels as GPT-2 tokens in llm.c's shard format.

    austen_shards.py RANKS OUTDIR [--austen-dir DIR]

Writes OUTDIR/austen_train.bin and OUTDIR/austen_val.bin: a header of 256
little-endian int32 (magic 20240520, version 1, token count), then uint16
tokens. Each novel is split at the first blank line at or after 90% of its
lines: the part before is a training document, the rest a validation
document. Documents are in the order of austen_text.NOVELS, each preceded by
<|endoftext|> (50256) as llm.c's scripts do. Prints the token counts and the
unigram entropy of the training tokens. Files are written whole under a
temporary name and renamed, so a rerun makes the same bytes.
"""
import argparse
import math
import os
import struct
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import austen_text  # noqa: E402
import gpt2_bpe  # noqa: E402

MAGIC, VERSION = 20240520, 1
VAL_FRACTION = 0.1


def split_novel(lines):
    """(train lines, val lines): the cut is the first blank line at or after (1 - VAL_FRACTION) of them."""
    k = int(len(lines) * (1 - VAL_FRACTION))
    while k < len(lines) and lines[k].strip():
        k += 1
    return lines[:k], lines[k:]


def write_shard(path, tokens):
    header = struct.pack("<256i", MAGIC, VERSION, len(tokens), *([0] * 253))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header)
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))
    os.replace(tmp, path)


def entropy_nats(tokens):
    n = len(tokens)
    return -sum(c / n * math.log(c / n) for c in Counter(tokens).values())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("ranks", help="gpt2.tiktoken")
    p.add_argument("outdir")
    p.add_argument("--austen-dir", default=austen_text.DEFAULT_DIR)
    a = p.parse_args()
    try:
        novels = austen_text.read_novels(a.austen_dir)
        bpe = gpt2_bpe.Gpt2Bpe(a.ranks)
    except (austen_text.RDataError, OSError, ValueError) as e:
        sys.exit(f"austen_shards.py: {e}")
    train, val = [], []
    for name, lines in novels.items():
        t, v = split_novel(lines)
        for tokens, part in ((train, t), (val, v)):
            tokens.append(gpt2_bpe.EOT)
            tokens.extend(bpe.encode(austen_text.text(part)))
        print(f"{name}: {len(t)} training lines, {len(v)} validation lines")
    os.makedirs(a.outdir, exist_ok=True)
    write_shard(os.path.join(a.outdir, "austen_train.bin"), train)
    write_shard(os.path.join(a.outdir, "austen_val.bin"), val)
    print(f"austen_train.bin: {len(train)} tokens; austen_val.bin: {len(val)} tokens")
    print(f"training tokens: {len(set(train))} distinct, unigram entropy {entropy_nats(train):.4f} nats")


if __name__ == "__main__":
    main()
