#!/usr/bin/python3
"""GPT-2's byte-level BPE encoder, from a tiktoken ranks file (gpt2.tiktoken).

The ranks file has one "<base64 bytes> <rank>" line per token; the rank is the
token id (0..50255), and id 50256 is <|endoftext|>. Text is split by GPT-2's
pre-tokenisation regex (Unicode classes: needs the `regex` package, Debian's
python3-regex), each piece is UTF-8 encoded and its bytes are merged as
tiktoken merges them: repeatedly join the adjacent pair whose concatenated
bytes have the lowest rank, until no pair is a token.

    gpt2_bpe.py --self-check RANKS     # known ids; exit 0 when they match
    gpt2_bpe.py RANKS TEXT...          # the ids of TEXT
"""
import base64
import sys

import regex

PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = 50256
EOT_TEXT = "<|endoftext|>"


class Gpt2Bpe:
    def __init__(self, ranks_path):
        self.ranks = {}
        with open(ranks_path, "rb") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    token, rank = line.split()
                    self.ranks[base64.b64decode(token, validate=True)] = int(rank)
                except ValueError:
                    raise ValueError(f"{ranks_path}: line {n} is not '<base64 bytes> <rank>'") from None
        self.tokens = {r: b for b, r in self.ranks.items()}
        self.pattern = regex.compile(PATTERN)
        self.cache = {}

    def merge(self, piece):
        """The token ids of one pre-token's bytes."""
        if piece in self.ranks:
            return [self.ranks[piece]]
        parts = [piece[i:i + 1] for i in range(len(piece))]
        while len(parts) > 1:
            best, at = None, -1
            for i in range(len(parts) - 1):
                r = self.ranks.get(parts[i] + parts[i + 1])
                if r is not None and (best is None or r < best):
                    best, at = r, i
            if best is None:
                break
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        return [self.ranks[p] for p in parts]

    def encode_ordinary(self, text):
        out = []
        for piece in self.pattern.findall(text):
            ids = self.cache.get(piece)
            if ids is None:
                ids = self.cache[piece] = self.merge(piece.encode("utf-8"))
            out.extend(ids)
        return out

    def encode(self, text, eot=False):
        """Token ids of `text`. With eot, each "<|endoftext|>" in it is token 50256; otherwise it
        is ordinary text (as tiktoken's encode_ordinary)."""
        if not eot:
            return self.encode_ordinary(text)
        out = []
        for i, part in enumerate(text.split(EOT_TEXT)):
            if i:
                out.append(EOT)
            out.extend(self.encode_ordinary(part))
        return out

    def decode(self, ids):
        return b"".join(EOT_TEXT.encode() if i == EOT else self.tokens[i] for i in ids).decode("utf-8", "replace")


# Ids as tiktoken's "gpt2" encoding gives them.
KNOWN = [
    ("Hello world", [15496, 995]),
    (" the", [262]),
    ("hello", [31373]),
    ("It is a truth universally acknowledged", [1026, 318, 257, 3872, 26208, 10810]),
    ("<|endoftext|>", [27, 91, 437, 1659, 5239, 91, 29]),  # ordinary text unless eot=True
]


def self_check(ranks_path):
    bpe = Gpt2Bpe(ranks_path)
    failures = []
    if sorted(bpe.tokens) != list(range(EOT)):
        failures.append(f"ranks are not exactly 0..{EOT - 1} ({len(bpe.tokens)} tokens)")
    for text, want in KNOWN:
        got = bpe.encode(text)
        if got != want:
            failures.append(f"{text!r} -> {got}, expected {want}")
    if bpe.encode("a<|endoftext|>b", eot=True) != [64, EOT, 65]:
        failures.append(f"'a<|endoftext|>b' with eot -> {bpe.encode('a<|endoftext|>b', eot=True)}")
    sample = "Mr. Darcy's £10,000 a year -- isn't it?\n\n  Café naïve 1813\t"
    if bpe.decode(bpe.encode(sample)) != sample:
        failures.append(f"{sample!r} does not decode back to itself")
    for f in failures:
        print(f"gpt2_bpe.py self-check: {f}", file=sys.stderr)
    print(f"gpt2_bpe.py self-check: {len(KNOWN) + 3 - len(failures)} of {len(KNOWN) + 3} checks pass")
    return not failures


def main():
    args = sys.argv[1:]
    try:
        if len(args) == 2 and args[0] == "--self-check":
            sys.exit(0 if self_check(args[1]) else 1)
        if len(args) >= 2:
            print(Gpt2Bpe(args[0]).encode(" ".join(args[1:])))
            return
    except (OSError, ValueError) as e:
        sys.exit(f"gpt2_bpe.py: {e}")
    sys.exit("usage: gpt2_bpe.py --self-check RANKS | gpt2_bpe.py RANKS TEXT...")


if __name__ == "__main__":
    main()
