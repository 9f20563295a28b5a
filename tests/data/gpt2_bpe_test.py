#!/usr/bin/python3
"""scripts/data/gpt2_bpe.py with GPT-2's real ranks: its self-check and known ids, then the
C++ Gpt2Vocab (through tests/tools/gpt2_tokens) against it: the same ids for plain English
(sentences, and every paragraph of the Austen novels when r-cran-janeaustenr is installed),
and the Python ids decoded back to the text. Exit 77 (ctest: skipped) without the ranks
file or the regex package.
usage: gpt2_bpe_test.py GPT2_TOKENS"""
import os
import subprocess
import sys
import tempfile

from ranks_file import SCRIPTS, find_ranks

sys.path.insert(0, SCRIPTS)
try:
    import gpt2_bpe
except ImportError as e:
    print(f"skipped: {e} (Debian's python3-regex; scripts/setup.sh installs it)")
    sys.exit(77)

SENTENCES = [
    "Hello world", " the", "It is a truth universally acknowledged, that a single man in possession",
    "\"My dear Mr. Bennet,\" said his lady to him one day, \"have you heard that Netherfield Park is let at last?\"",
    "I don't know; they'll say it's 1,813 pages -- isn't it?\n\n  Indented,\ttabbed   and trailing   ",
    "<|endoftext|>", "", " ", "\n", "a  b", "x'y's 'tis O'Neil's", "99 bottles", "USA.  Dr. Who?!",
]


def cxx(tool, ranks, mode, data):
    r = subprocess.run([tool, ranks, mode], input=data, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: gpt2_tokens {mode}: {r.stderr.decode().strip()}")
    return r.stdout


def main():
    tool = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        ranks = find_ranks(tmp)
        if ranks is None:
            print("skipped: no gpt2.tiktoken (set GPT2_TIKTOKEN, or run scripts/data/prepare_austen.sh once)")
            sys.exit(77)
        failures = []
        r = subprocess.run([sys.executable, os.path.join(SCRIPTS, "gpt2_bpe.py"), "--self-check", ranks],
                           capture_output=True, text=True)
        print(r.stdout.strip())
        if r.returncode != 0:
            failures.append(f"self-check: {r.stderr.strip()}")
        bpe = gpt2_bpe.Gpt2Bpe(ranks)
        for text, want in (("Hello world", [15496, 995]), (" the", [262])):
            if bpe.encode(text) != want:
                failures.append(f"python: {text!r} -> {bpe.encode(text)}, expected {want}")
        texts = list(SENTENCES)
        try:
            import austen_text
            for lines in austen_text.read_novels(os.environ.get("AUSTEN_DIR", austen_text.DEFAULT_DIR)).values():
                texts += austen_text.text(lines).split("\n\n")
        except austen_text.RDataError as e:
            print(f"(no Austen paragraphs: {e})")
        ids_cxx = cxx(tool, ranks, "encode", "\0".join(texts).encode()).decode().split("\n")[:len(texts)]
        ids_py = [bpe.encode(t) for t in texts]
        differ = [t for t, a, b in zip(texts, ids_cxx, ids_py) if [int(x) for x in a.split()] != b]
        ascii_differ = [t for t in differ if t.isascii()]
        print(f"C++ encode: {len(texts) - len(differ)} of {len(texts)} texts give Python's ids "
              f"({len(ascii_differ)} ASCII texts differ, {len(differ) - len(ascii_differ)} others)")
        failures += [f"C++ encode differs on {t[:60]!r}" for t in ascii_differ[:5]]
        decoded = cxx(tool, ranks, "decode", "".join(" ".join(map(str, i)) + "\n" for i in ids_py).encode())
        back = decoded.decode().split("\0")[:len(texts)]
        failures += [f"C++ decode of {t[:60]!r} gives {b[:60]!r}" for t, b in zip(texts, back) if t != b][:5]
        if cxx(tool, ranks, "decode", b"15496 995 50256\n") != b"Hello world<|endoftext|>\0":
            failures.append("C++ decode of 15496 995 50256")
        r = subprocess.run([tool, ranks, "decode"], input=b"50257\n", capture_output=True, text=False)
        if r.returncode != 2 or b"token 50257 at position 0 is outside the vocabulary of 50257" not in r.stderr:
            failures.append(f"C++ decode of 50257: exit {r.returncode}, {r.stderr!r}")
    for f in failures:
        print(f"FAIL: {f}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
