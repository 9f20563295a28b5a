#!/usr/bin/python3
"""scripts/data/austen_text.py and prepare_austen.sh: the R unserializer on a database
written here (a data frame with a factor, encodings, back-references, an ALTREP
sequence), damaged databases as one-line errors naming the file, the six novels from
r-cran-janeaustenr's real database, and the shards prepare_austen.sh makes from them
(when GPT-2's ranks are found, see ranks_file.py). Exit 77 (ctest: skipped) when the
real database is not installed, after the written-database checks pass."""
import gzip
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

from ranks_file import SCRIPTS, find_ranks

sys.path.insert(0, SCRIPTS)
import austen_text  # noqa: E402

FAILURES = []


def check(ok, what):
    if not ok:
        FAILURES.append(what)


# ---- a writer for the few R objects the checks need (XDR serialization) ----
def i32(*v):
    return struct.pack(f">{len(v)}i", *v)


def flags(t, obj=False, attr=False, tag=False, levels=0):
    return i32(t | obj << 8 | attr << 9 | tag << 10 | levels << 12)


def chars(s, levels=64, enc="ascii"):  # levels: 64 ASCII, 8 UTF-8, 4 Latin-1
    if s is None:
        return flags(9) + i32(-1)  # NA_character_
    return flags(9, levels=levels) + i32(len(s.encode(enc))) + s.encode(enc)


def strs(*v):
    return flags(16) + i32(len(v)) + b"".join(x if isinstance(x, bytes) else chars(x) for x in v)


def header(version=3):
    return b"X\n" + i32(version, 0x040201, 0x030500) + (i32(5) + b"UTF-8" if version == 3 else b"")


def written_database(d):
    sym = lambda name: flags(1) + chars(name)  # noqa: E731
    # list(title = factor(c("Emma", "Persuasion", "Emma")), line = c("Café", "naïve£", NA)), a data frame
    factor = (flags(13, obj=True, attr=True) + i32(3, 1, 2, 1) +
              flags(2, tag=True) + sym("levels") + strs("Emma", "Persuasion") +     # symbol 1
              flags(2, tag=True) + sym("class") + strs("factor") + flags(254))      # symbol 2
    line = strs(chars("Café", 8, "utf-8"), chars("naïve£", 4, "latin-1"), chars(None))
    frame = (header() + flags(19, obj=True, attr=True) + i32(2) + factor + line +
             flags(2, tag=True) + sym("names") + strs("title", "line") +
             flags(2, tag=True) + i32(255 | 2 << 8) + strs("data.frame") +          # "class" again: a reference
             flags(2, tag=True) + sym("row.names") + flags(13) + i32(2, -2 ** 31, -3) + flags(254))
    # 1:5 as R 3.5+ writes it: ALTREP, info pairlist(class, package, type), state c(n, first, step), no attributes
    seq = (header(2) + flags(238) + flags(2) + sym("compact_intseq") + flags(2) + sym("base") + flags(2) +
           flags(13) + i32(1, 13) + flags(254) + flags(14) + i32(3) + struct.pack(">3d", 5, 1, 1) + flags(254))
    db, entries = b"", []
    for name, blob in (("frame", frame), ("seq", seq)):
        entry = struct.pack(">I", len(blob)) + zlib.compress(blob)
        entries.append((name, len(db), len(entry)))
        db += entry
    names = lambda *n: flags(2, tag=True) + sym("names") + strs(*n) + flags(254)  # noqa: E731
    index = (header() + flags(19, attr=True) + i32(3) +
             flags(19, attr=True) + i32(len(entries)) + b"".join(flags(13) + i32(2, o, n) for _, o, n in entries) +
             names(*(n for n, _, _ in entries)) +
             flags(19) + i32(0) + flags(10) + i32(1, 1) + names("variables", "references", "compressed"))
    with open(os.path.join(d, "Rdata.rdx"), "wb") as f:
        f.write(gzip.compress(index))
    with open(os.path.join(d, "Rdata.rdb"), "wb") as f:
        f.write(db)


def run(*args, **env):
    return subprocess.run(list(args), capture_output=True, text=True, env={**os.environ, **env})


def one_line_error(r, path, what):
    check(r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1 and path in r.stderr,
          f"{what}: exit {r.returncode}, stderr {r.stderr!r} (one line naming {path} expected)")


def main():
    tmp = tempfile.mkdtemp()
    try:
        d = os.path.join(tmp, "written")
        os.makedirs(d)
        written_database(d)
        db = austen_text.read_database(d)
        check(db.get("frame") == {"title": ["Emma", "Persuasion", "Emma"], "line": ["Café", "naïve£", None]},
              f"written data frame read as {db.get('frame')!r}")
        check(db.get("seq") == [1, 2, 3, 4, 5], f"compact 1:5 read as {db.get('seq')!r}")
        rdb = os.path.join(d, "Rdata.rdb")
        with open(rdb, "r+b") as f:
            f.truncate(os.path.getsize(rdb) - 10)
        try:
            austen_text.read_database(d)
            check(False, "a truncated .rdb reads without error")
        except austen_text.RDataError as e:
            check(str(e).startswith(rdb + ": seq: "), f"truncated .rdb: {e}")

        real = os.environ.get("AUSTEN_DIR", austen_text.DEFAULT_DIR)
        if not os.path.isfile(os.path.join(real, "Rdata.rdx")):
            print(f"written database: {'ok' if not FAILURES else 'FAILED'}")
            if not FAILURES:
                print(f"skipped: no {real}/Rdata.rdx (Debian's r-cran-janeaustenr; scripts/setup.sh installs it)")
                sys.exit(77)
            raise SystemExit(1)
        novels = austen_text.read_novels(real)
        check(list(novels) == list(austen_text.NOVELS), f"novels {list(novels)}")
        check(austen_text.text(novels["prideprejudice"]).startswith("PRIDE AND PREJUDICE"),
              f"Pride and Prejudice starts {novels['prideprejudice'][:1]}")
        check(all(len(v) > 5000 for v in novels.values()), f"line counts {[len(v) for v in novels.values()]}")
        print("novels:", ", ".join(f"{n} {len(v)} lines" for n, v in novels.items()))
        cli = os.path.join(SCRIPTS, "austen_text.py")
        r = run(sys.executable, cli, "--dir", real, "prideprejudice")
        check(r.returncode == 0 and r.stdout == austen_text.text(novels["prideprejudice"]), "austen_text.py NAME")
        broken = os.path.join(tmp, "broken")
        os.makedirs(broken)
        shutil.copy(os.path.join(real, "Rdata.rdx"), broken)
        with open(os.path.join(real, "Rdata.rdb"), "rb") as src, open(os.path.join(broken, "Rdata.rdb"), "wb") as f:
            f.write(src.read(600000))
        one_line_error(run(sys.executable, cli, "--dir", broken, "--list"), os.path.join(broken, "Rdata.rdb"),
                       "austen_text.py on a truncated .rdb")

        ranks = find_ranks(tmp)
        if ranks is None:
            print("prepare_austen.sh not run: no gpt2.tiktoken (see tests/data/ranks_file.py)")
        else:
            prepare(real, ranks, tmp)
    finally:
        shutil.rmtree(tmp)
    for f in FAILURES:
        print(f"FAIL: {f}")
    sys.exit(1 if FAILURES else 0)


def shard(path):
    with open(path, "rb") as f:
        b = f.read()
    h = struct.unpack("<256i", b[:1024])
    check(h[:2] == (20240520, 1) and len(b) == 1024 + 2 * h[2], f"{path}: header {h[:3]}, {len(b)} bytes")
    return struct.unpack(f"<{h[2]}H", b[1024:1024 + 2 * h[2]])


def prepare(real, ranks, tmp):
    script = os.path.join(SCRIPTS, "prepare_austen.sh")
    out, cache = os.path.join(tmp, "out"), os.path.join(tmp, "cache")
    env = {"AUSTEN_DIR": real, "LOCKSTEP_CACHE": cache}
    files = [os.path.join(out, n) for n in ("austen_train.bin", "austen_val.bin", "gpt2.tiktoken")]
    made = []
    for args in ((out, ranks), (out,)):  # the second run takes OUTDIR's copy of the ranks
        r = run("bash", script, *args, **env)
        check(r.returncode == 0, f"prepare_austen.sh: exit {r.returncode}: {r.stderr.strip()}")
        made.append([open(f, "rb").read() if os.path.isfile(f) else None for f in files])
    check(made[0] == made[1] and None not in made[0], "prepare_austen.sh run twice: different files")
    print(r.stdout.strip().split("\n")[-2])
    train, val = shard(os.path.join(out, "austen_train.bin")), shard(os.path.join(out, "austen_val.bin"))
    for name, t in (("train", train), ("val", val)):
        check(t[:1] == (50256,) and t.count(50256) == 6, f"{name}: {t.count(50256)} documents, first token {t[:1]}")
    check(0.08 < len(val) / (len(train) + len(val)) < 0.12, f"val is {len(val)} of {len(train) + len(val)} tokens")
    one_line_error(run("bash", script, out, **{**env, "AUSTEN_DIR": os.path.join(tmp, "none")}),
                   os.path.join(tmp, "none", "Rdata.rdx"), "prepare_austen.sh without the database")
    one_line_error(run("bash", script, os.path.join(tmp, "o2"), os.path.join(tmp, "no.tiktoken"), **env),
                   os.path.join(tmp, "no.tiktoken"), "prepare_austen.sh with a missing ranks file")


if __name__ == "__main__":
    main()
